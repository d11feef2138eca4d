"""Taylor-coefficient recurrences: ``rule(sweep, node, k) -> y[k]``, one line of table per primitive.

Notation: ``y`` is the node's output, ``u``/``a``/``b`` its operands, ``x[k]``
the k-th normalised Taylor coefficient. With several variables ``k`` is a
multi-index, a sum ``sum_{j=1..k} x[j] y[k-j]`` runs over the splits ``k = l + m``
(``sweep.index.splits(k)``) with ``l`` not zero, and a factor ``j`` that a
derivative brings down is ``l``'s entry along the axis the recurrence
differentiates on (``sweep.index.axis(k)``, ``sweep.index.weight(l, axis)``):
every rule below is written once for both (see :mod:`symad.transforms.taylor`). A primitive missing from
:data:`TAYLOR` uses the generic chain rule on series
(:meth:`symad.transforms.taylor.TaylorSweep.chain_rule`) through its
symbolic partials; with partial rules that reuse their output, that *is* the
classical recurrence for exp, sin/cos, sinh/cosh, tan, tanh, sigmoid,
softplus, erf, the inverse functions, maximum/minimum/abs and custom
primitives. The closed forms below are for the primitives where the generic
rule would divide by zero (powers at 0) or cost twice as much (log, sqrt,
quotients), and for the linear and piecewise ones. A non-integer or traced
exponent composes the derivatives of ``u**r`` at ``u[0]`` with the powers of
the input series (O(n**3), see :func:`_real_power_series`), since the
classical O(n**2) recurrence divides by ``u[0]``.

References for the recurrences: Griewank & Walther, *Evaluating
Derivatives* (2nd ed., SIAM 2008), chapter 13, table 13.2.
"""

from __future__ import annotations

import sympy

from symad import array_primitives as A
from symad import primitives as P
from symad.atoms import is_constant, is_zero_constant, same_atom
from symad.graph import atom_shape
from symad.ir.primitive import RuleTable

__all__ = ["TAYLOR", "needs_partials"]

ZERO = sympy.Integer(0)


def _operand(sweep, node, index):
    """A getter ``j -> operand[j]`` for the node's operand at ``index``."""
    atom = node.args[index]
    return lambda j: sweep.coefficient(atom, j)


def _output(sweep, node):
    return lambda j: sweep.coefficient(node, j)


# -- linear ---------------------------------------------------------------------


def _add(sweep, node, k):
    return sweep.total([sweep.coefficient(arg, k) for arg in node.args])


def _subtract(sweep, node, k):
    a, b = node.args
    return sweep.difference(sweep.coefficient(a, k), sweep.coefficient(b, k))


def _negative(sweep, node, k):
    return sweep.negate(sweep.coefficient(node.args[0], k))


def _select(sweep, node, k):
    # The primal condition picks the branch for every coefficient: the branch
    # not taken is never multiplied by anything, so its nan/inf cannot leak.
    condition, if_true, if_false = node.args
    return sweep.builder.record(
        P.select_p, (condition, sweep.coefficient(if_true, k), sweep.coefficient(if_false, k)))


def _flat(sweep, node, k):
    """Piecewise-constant primitives (sign, stop_gradient): no higher coefficients."""
    return sympy.Integer(0)


# -- products, quotients, powers ---------------------------------------------------


def _multiply(sweep, node, k):
    if same_atom(node.args[0], node.args[1]):  # u * u: each cross product once
        return _symmetric_convolution(sweep, _operand(sweep, node, 0), k)
    return sweep.convolution(_operand(sweep, node, 0), _operand(sweep, node, 1), k)


def _divide(sweep, node, k):
    # y = a / b:  y[k] = (a[k] - sum_{j=1..k} b[j] y[k-j]) / b[0]
    a, b = node.args
    if not sweep.is_varying(b):
        return sweep.quotient(sweep.coefficient(a, k), b)
    y = _output(sweep, node)
    correction = sweep.total([sweep.product(sweep.coefficient(b, l), y(rest))
                              for l, rest in _nonzero_splits(sweep, k)])
    return sweep.quotient(sweep.difference(sweep.coefficient(a, k), correction), b)


def _nonzero_splits(sweep, k):
    """The splits ``(l, k - l)`` of ``k`` with ``l`` not zero (``j = 1..k`` of one variable)."""
    zero = sweep.zero
    return [(l, rest) for l, rest in sweep.index.splits(k) if l != zero]


def _differentiated_splits(sweep, k, below_k: bool = False):
    """``(l, k - l, l_a)`` for the splits whose ``l`` has a positive entry ``l_a`` along the axis
    the recurrence at ``k`` differentiates on (``j = 1..k`` of one variable, ``1..k-1`` with
    ``below_k``), and ``k_a``, the factor ``1/k_a`` of the recurrence divides by."""
    index = sweep.index
    axis = index.axis(k)
    terms = []
    for l, rest in index.splits(k):
        weight = index.weight(l, axis)
        if weight and not (below_k and rest == sweep.zero):
            terms.append((l, rest, weight))
    return terms, axis, index.weight(k, axis)


def _log(sweep, node, k):
    # y = log(u):  y[k] = (u[k] - (1/k) sum_{j=1..k-1} j y[j] u[k-j]) / u[0]
    (u,) = node.args
    splits, axis, k_axis = _differentiated_splits(sweep, k, below_k=True)
    inner = sweep.total([sweep.product(sweep.weighted(node, l, axis), sweep.coefficient(u, rest))
                         for l, rest, _ in splits])
    numerator = sweep.difference(sweep.coefficient(u, k), sweep.scaled(sympy.Rational(1, k_axis), inner))
    return sweep.quotient(numerator, u)


def _sqrt(sweep, node, k):
    # y = sqrt(u):  y[k] = (u[k] - sum_{j=1..k-1} y[j] y[k-j]) / (2 y[0])
    (u,) = node.args
    y = _output(sweep, node)
    square_part = _symmetric_convolution(sweep, y, k, start=1)
    numerator = sweep.difference(sweep.coefficient(u, k), square_part)
    return sweep.quotient(numerator, sweep.product(sympy.Integer(2), node))


def _symmetric_convolution(sweep, a, k, start=0):
    """``sum_{j=start..k-start} a[j] a[k-j]``, each product recorded once.

    ``start`` is 0 or 1: 1 leaves out the two terms holding ``a[0]``. Each
    unordered pair ``{l, k - l}`` is one product (doubled unless ``l = k - l``).
    """
    terms = []
    zero = sweep.zero
    for l, rest in sweep.index.splits(k):
        if l > rest:
            continue  # the pair was met as (rest, l)
        if start and l == zero:
            continue
        product = sweep.product(a(l), a(rest))
        terms.append(product if l == rest else sweep.product(sympy.Integer(2), product))
    return sweep.total(terms)


class _AuxiliarySeries:
    """A series that is not a graph node (``u**4`` inside ``u**5``), extended on demand.

    ``next_coefficient(series, k)`` gets the series itself, so a recurrence on its own
    earlier coefficients (the logarithm's) needs no closure over it: such a closure and
    the series would hold each other, a cycle keeping the whole trace alive until the
    cyclic collector runs. Coefficients are made in the order of the sweep's keys
    (total order first), so each one's recurrence finds those below it.
    """

    def __init__(self, sweep, first, next_coefficient):
        self.coefficients = [first]
        self._keys = sweep.index.keys
        self._positions = sweep.index.positions
        self._next = next_coefficient

    def __call__(self, k):
        position = k if self._positions is None else self._positions[k]
        while len(self.coefficients) <= position:
            self.coefficients.append(self._next(self, self._keys[len(self.coefficients)]))
        return self.coefficients[position]


def _square_series(sweep, base):
    first = sweep.builder.record(P.pow_p, (base(sweep.zero), sympy.Integer(2)))
    return _AuxiliarySeries(sweep, first, lambda _, k: _symmetric_convolution(sweep, base, k))


def _product_series(sweep, a, b):
    first = sweep.product(a(sweep.zero), b(sweep.zero))
    return _AuxiliarySeries(sweep, first, lambda _, k: sweep.convolution(a, b, k))


def _integer_power_series(sweep, base, exponent: int):
    """``base**exponent`` (exponent >= 1) by repeated squaring of series: no division by base[0]."""
    result = None
    square = base
    while exponent:
        if exponent & 1:
            result = square if result is None else _product_series(sweep, result, square)
        exponent >>= 1
        if exponent:
            square = _square_series(sweep, square)
    return result


def _log_series(sweep, base_atom):
    """The series of ``log(base)``, kept beside a node that needs it (``a ** b``)."""
    base = lambda j: sweep.coefficient(base_atom, j)  # noqa: E731

    def next_coefficient(log, k):
        # log(u)[k] = (u[k] - (1/k) sum_{j=1..k-1} j log[j] u[k-j]) / u[0]
        splits, _, k_axis = _differentiated_splits(sweep, k, below_k=True)
        inner = sweep.total([sweep.product(sweep.product(sympy.Integer(weight), log(l)), base(rest))
                             for l, rest, weight in splits])
        numerator = sweep.difference(base(k), sweep.scaled(sympy.Rational(1, k_axis), inner))
        return sweep.quotient(numerator, base_atom)

    return _AuxiliarySeries(sweep, sweep.builder.record(P.log_p, (base_atom,)), next_coefficient)


def _power(sweep, node, k):
    state = sweep.auxiliary.get(node)
    if state is None:
        state = sweep.auxiliary[node] = _power_plan(sweep, node)
    return state(k)


def _power_plan(sweep, node):
    """A getter ``k -> y[k]`` for ``y = a ** b``, chosen once per node."""
    base_atom, exponent_atom = node.args
    base = lambda j: sweep.coefficient(base_atom, j)  # noqa: E731
    y = _output(sweep, node)
    if sweep.is_varying(exponent_atom):
        # y = exp(b log a):  y[k] = (1/k) sum_{j=1..k} j w[j] y[k-j], with w = b log a.
        zero = sweep.zero
        log_base = _log_series(sweep, base_atom) if sweep.is_varying(base_atom) else (
            lambda j: sweep.builder.record(P.log_p, (base_atom,)) if j == zero else sympy.Integer(0))
        exponent = lambda j: sweep.coefficient(exponent_atom, j)  # noqa: E731
        w = _product_series(sweep, exponent, log_base)

        def exponential(k):
            splits, _, k_axis = _differentiated_splits(sweep, k)
            terms = [sweep.product(sweep.product(sympy.Integer(weight), w(l)), y(rest))
                     for l, rest, weight in splits]
            return sweep.scaled(sympy.Rational(1, k_axis), sweep.total(terms))
        return exponential
    if is_constant(exponent_atom) and exponent_atom.is_Number and float(exponent_atom).is_integer():
        power = int(exponent_atom)
        if power == 0:  # the builder folds x**0 to 1; kept for graphs built elsewhere
            return lambda k: sympy.Integer(0)
        if power >= 1:
            return _integer_power_series(sweep, base, power)
        # y = 1 / v with v = base**(-power):  y[k] = -(sum_{j=1..k} v[j] y[k-j]) / v[0]
        v = base if power == -1 else _integer_power_series(sweep, base, -power)
        return lambda k: _reciprocal_coefficient(sweep, v, y, k)
    return _real_power_series(sweep, base_atom, exponent_atom)


def _real_power_series(sweep, base_atom, r):
    """``y = a**r`` for a constant non-integer or an independent symbolic exponent ``r``.

    By composition: ``y[k] = sum_{m=1..k} binomial(r, m) a[0]**(r - m) [t**k] d(t)**m``
    with ``d = a - a[0]``; ``binomial(r, m) a[0]**(r - m)`` is the m-th derivative of
    ``u**r`` at ``a[0]`` over m!, each computed on its own. The classical recurrence
    ``y[k] = (1/(k a[0])) sum_j (r (k - j) - j) a[k-j] y[j]`` divides by ``a[0]`` and
    carries ``y[0] = a[0]**r``: 0/0 at a[0] = 0 (x**2.5 at 0 gave nan for every order)
    and 0 or inf where ``a[0]**r`` under- or overflows though ``a[0]**(r - m)`` does not
    (x**2.5'' at 1e-200 gave 0, at 1e150 inf). The cost is O(n**3) products for a base
    with a full series (the powers of ``d``), O(n) when the base is the seeded input
    itself (``d = t``: every power has one non-zero coefficient, the constant 1).
    """
    base = lambda j: sweep.coefficient(base_atom, j)  # noqa: E731
    builder = sweep.builder
    exact_exponent = sympy.Rational(r) if r.is_Number else None
    binomials = [sympy.Integer(1)]  # binomial(r, m), exact for a numeric r
    derivative_terms = [None]  # m -> binomial(r, m) a[0]**(r - m)
    power_of_increment = _IncrementPowers(sweep, base)

    def derivative_term(m):
        while len(derivative_terms) <= m:
            n = len(derivative_terms)
            if exact_exponent is not None:
                binomials.append(binomials[-1] * (exact_exponent - (n - 1)) / n)
                # r - n rounds in float64 for most r (1/3 - 1 needs 54 bits), as in the
                # partial rule b * a**(b - 1): relative error |log a| * eps, 2.6e-14 at 1e-200.
                derivative_terms.append(sweep.product(
                    binomials[-1], builder.record(P.pow_p, (base_atom, r - n))))
                continue
            factor = sweep.scaled(sympy.Rational(1, n), builder.record(P.sub_p, (r, sympy.Integer(n - 1))))
            binomials.append(sweep.product(binomials[-1], factor))
            term = sweep.product(binomials[-1], builder.record(
                P.pow_p, (base_atom, builder.record(P.sub_p, (r, sympy.Integer(n))))))
            # For an integer r = p past m = p, binomial(r, m) is exactly 0 (x**p is then a
            # polynomial) while a[0]**(r - m) is inf at a[0] = 0: 0, not 0 * inf = nan.
            is_zero = builder.record(P.equal_p, (binomials[-1], sympy.Integer(0)))
            derivative_terms.append(builder.record(P.select_p, (is_zero, sympy.Integer(0), term)))
        return derivative_terms[m]

    def real_power(k):
        return sweep.total([sweep.product(derivative_term(m), power_of_increment(m, k))
                            for m in range(1, sweep.index.grade(k) + 1)
                            if not is_zero_constant(power_of_increment(m, k))])
    return real_power


class _IncrementPowers:
    """``(m, k) -> [t**k] d**m`` for the increment ``d = a - a[0]`` of a series ``a``, memoized.

    An object calling itself, not a closure: a closure that calls itself holds
    itself, a reference cycle over the whole trace.
    """

    def __init__(self, sweep, base):
        self.sweep, self.base, self.known = sweep, base, {}

    def __call__(self, m: int, k):
        sweep = self.sweep
        if sweep.index.grade(k) < m:
            return ZERO
        if m == 1:
            return self.base(k)
        value = self.known.get((m, k))
        if value is None:
            # d**m = d * d**(m-1): sum over l != 0 (d[0] = 0) with |k - l| >= m - 1 (else zero)
            grade = sweep.index.grade
            value = self.known[(m, k)] = sweep.total([
                sweep.product(self.base(l), self(m - 1, rest))
                for l, rest in _nonzero_splits(sweep, k) if grade(rest) >= m - 1])
        return value


def _reciprocal_coefficient(sweep, v, y, k):
    """``y[k]`` of ``y = 1/v``: ``-(sum_{j=1..k} v[j] y[k-j]) / v[0]``."""
    terms = [sweep.product(v(l), y(rest)) for l, rest in _nonzero_splits(sweep, k)]
    return sweep.negate(sweep.quotient(sweep.total(terms), v(sweep.zero)))


# -- the table --------------------------------------------------------------------

#: The Taylor-coefficient recurrence of each primitive; one missing here (with partials)
#: goes through the generic chain rule on series.
TAYLOR = RuleTable("taylor", default_reason=lambda primitive: (
    "the chain rule on series through its partials" if primitive.has_partials else None))
TAYLOR.update({
    P.add_p: _add,
    P.sub_p: _subtract,
    P.neg_p: _negative,
    P.mul_p: _multiply,
    P.div_p: _divide,
    P.pow_p: _power,
    P.log_p: _log,
    P.sqrt_p: _sqrt,
    P.select_p: _select,
    P.sign_p: _flat,
    P.stop_gradient_p: _flat,
})


# -- whole arrays ------------------------------------------------------------------
#
# A linear array primitive (sum, reshape, slice, take, concatenate, ...) maps each
# coefficient of its operands to the same coefficient of its result; einsum is bilinear
# (a Cauchy product, as multiply); amax/amin/logsumexp follow the chain rule through
# their weights (the elements' share of the derivative, symad.rules.transposes), summed
# over the reduced axes.


TAYLOR.no_rule("complex values: Taylor mode (sd.derivative, sd.taylor) expands in real "
               "arguments and refuses complex ones", A.modulus_p)


@TAYLOR.register(*[primitive for primitive in A.ARRAY_PRIMITIVES if primitive.kind == "linear"])
def _linear_array(sweep, node, k):
    coefficients = [sweep.coefficient(arg, k) for arg in node.args]
    if all(is_zero_constant(c) for c in coefficients):
        return ZERO
    builder = sweep.builder
    shaped = [A.broadcast_atom(builder, c, atom_shape(arg))
              if is_zero_constant(c) and atom_shape(arg) else c
              for c, arg in zip(coefficients, node.args)]
    return builder.record(node.primitive, shaped, node.params)


@TAYLOR.register(A.argsort_p)
def _argsort(sweep, node, k):
    return ZERO  # piecewise constant: every coefficient past the value is zero


@TAYLOR.register(A.take_along_p, A.take_along_add_p)
def _take_along(sweep, node, k):
    # Linear in its first operand, at the indices' value (their coefficients are zero).
    coefficient = sweep.coefficient(node.args[0], k)
    if is_zero_constant(coefficient):
        return ZERO
    return sweep.builder.record(node.primitive, (coefficient, node.args[1]), node.params)


@TAYLOR.register(A.einsum_p)
def _einsum(sweep, node, k):
    a, b = _operand(sweep, node, 0), _operand(sweep, node, 1)
    terms = []
    for l, rest in sweep.index.splits(k):
        left, right = a(l), b(rest)
        if not (is_zero_constant(left) or is_zero_constant(right)):
            terms.append(sweep.builder.record(node.primitive, (left, right), node.params))
    return sweep.total(terms)


@TAYLOR.register(A.amax_p, A.amin_p, A.reduce_logsumexp_p)
def _weighted_reduction(sweep, node, k):
    """``y[k] = (1/k) sum_l l reduce(x[l] w[k-l])``: the chain rule through the weights ``w``."""
    index, (operand,), (weights,) = sweep.index, node.args, sweep.partials[node].values()
    axis = index.axis(k)
    terms = []
    for l, rest in index.splits(k):
        if index.weight(l, axis) == 0 or is_zero_constant(sweep.coefficient(operand, l)):
            continue
        terms.append(sweep.product(sweep.weighted(operand, l, axis), sweep.coefficient(weights, rest)))
    summed = sweep.total(terms)
    if is_zero_constant(summed):
        return ZERO
    total = A.record_reduction(sweep.builder, A.reduce_sum_p, summed, dict(node.params)["axes"])
    return sweep.scaled(sympy.Rational(1, index.weight(k, axis)), total)


#: Rules that read the node's partials (recorded by the sweep's planning, as for the generic rule).
_READ_PARTIALS = frozenset(p for p, rule in TAYLOR.items() if rule is _weighted_reduction)


def needs_partials(sweep, node) -> bool:
    """True if the node's coefficients come through its partials: the generic chain rule, or a
    rule that reads them (a reduction's weights)."""
    return node.primitive not in TAYLOR or node.primitive in _READ_PARTIALS
