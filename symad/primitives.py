"""Every primitive symad records: its name, SymPy form, NumPy implementation and identities.

One stanza per primitive keeps what *defines* it together: the name, the
SymPy expression it records, the NumPy implementation, its spellings for the
backends and its algebraic identities. The rules of each transform live in
one table per transform, registered onto these primitives the way
autograd's ``numpy_vjps.py`` registers onto ``numpy_wrapper``:
:mod:`symad.rules.partials` (symbolic partial derivatives, written with
traceable operations) and :mod:`symad.rules.taylor` (Taylor-coefficient
recurrences). This module imports nothing traced, so the layers stay
acyclic: graph -> primitives, and rules -> numpy -> tracer -> graph.

A primitive whose ``partials`` is ``None`` has no rule: differentiating
through it raises :class:`~symad.errors.DifferentiationError`.

>>> sin_p.name, sin_p.numpy_name
('sin', 'sin')
>>> import sympy
>>> sin_p.to_sympy((sympy.Symbol("x"),), {})
sin(x)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mpmath
import numpy as np
import scipy.special
import sympy
from sympy.codegen.cfunctions import expm1 as sympy_expm1
from sympy.codegen.cfunctions import log1p as sympy_log1p

from symad.atoms import is_constant, is_zero_constant, same_atom

__all__ = ["Primitive", "PRIMITIVES"]

PartialRule = Callable[..., Any]


class Primitive:
    """An operation the tracer records as one node.

    Args:
        name: the primitive's name, as printed in errors.
        to_sympy: builds the node's SymPy expression from operand atoms.
        numpy_impl: evaluates the primitive on NumPy arrays or floats.
        partials: usually registered later by :mod:`symad.rules.partials`
            (custom primitives pass theirs here): one rule per argument, each ``rule(out, *args) -> value or
            None`` (None: the partial is structurally zero), where ``out`` is
            the node's own result, as autograd's and JAX's rules take ``ans``;
            for a variadic primitive one ``rule(out, args) -> sequence``
            giving every operand's partial at once (so an n-ary node costs
            O(n), not O(n**2)); ``None`` if the primitive has no derivative rule.
        arity: the number of operands (ignored when ``variadic``).
        commutative: operands may be reordered (for hash-consing).
        simplify: ``simplify(builder, args) -> atom or None``, identities
            such as ``x * 1 -> x`` applied before recording.
        folds_constants: constant operands are evaluated exactly by SymPy.
        variadic: takes any number of operands.
        numpy_name: the NumPy spelling, for generated code and dispatch.
        numexpr_name: the numexpr spelling, or None where numexpr lacks it
            (the translation table of the numexpr lowering).
        returns_boolean: the result is a truth value (comparisons).
        boolean_operands: operand positions that take truth values (the
            condition of ``where``); the builder converts other operands.
        kind: ``"elementwise"`` (every primitive of this module: operands
            broadcast as in NumPy, the result has the broadcast shape), or for
            the array primitives of :mod:`symad.array_primitives`
            ``"linear"`` (structural and linear operations: reshape,
            reductions by sum, slices, ...; reverse mode uses their
            ``transpose``), ``"bilinear"`` (``einsum``: linear in each
            operand) or ``"array"`` (other operations on whole arrays, with
            their own rules).
        shape_rule: ``shape_rule(operand_shapes, params) -> shape`` for an
            array primitive (elementwise ones broadcast).
    """

    def __init__(
        self,
        name: str,
        to_sympy: Callable[..., sympy.Basic],
        numpy_impl: Callable[..., Any],
        partials: Sequence[PartialRule | None] | PartialRule | None = None,
        *,
        arity: int = 1,
        commutative: bool = False,
        simplify: Callable | None = None,
        folds_constants: bool = True,
        variadic: bool = False,
        numpy_name: str | None = None,
        numexpr_name: str | None = None,
        returns_boolean: bool = False,
        boolean_operands: tuple[int, ...] = (),
        kind: str = "elementwise",
        shape_rule: Callable | None = None,
    ):
        self.name = name
        self._to_sympy = to_sympy
        self.numpy_impl = numpy_impl
        self.partials = partials
        # True where every partial rule is written with broadcasting operations only, so
        # that the reverse sweep may call it once on arrays for a run of like nodes
        # (set for the rules of symad.rules.partials; a custom rule may not broadcast).
        self.broadcasting_partials = False
        self.arity = arity
        self.commutative = commutative
        self.simplify = simplify
        self.folds_constants = folds_constants
        self.variadic = variadic
        self.numpy_name = numpy_name
        self.numexpr_name = numexpr_name
        self.returns_boolean = returns_boolean
        self.boolean_operands = boolean_operands
        self.kind = kind
        self.elementwise = kind == "elementwise"
        self.shape_rule = shape_rule
        #: Reverse mode of a linear or bilinear array primitive (symad.rules.transposes):
        #: ``transpose(cotangent, node, operand_index, lead) -> cotangent of that operand``.
        self.transpose = None

    def to_sympy(self, args: Sequence, params: dict) -> sympy.Basic:
        return self._to_sympy(*args, **params)

    @property
    def has_partials(self) -> bool:
        return self.partials is not None

    def partials_at(self, out, args: Sequence, indices: Sequence[int]) -> dict:
        """``{index: partial or None}`` w.r.t. the operands at ``indices`` (traced values).

        ``out`` is the node's own result (a traced value): rules that reuse it
        keep higher derivatives small and free of repeated powers.
        """
        if self.variadic:
            every_partial = self.partials(out, args)
            return {index: every_partial[index] for index in indices}
        rules = self.partials
        return {index: None if rules[index] is None else rules[index](out, *args)
                for index in indices}

    def __repr__(self) -> str:
        return f"Primitive({self.name!r})"


PRIMITIVES: dict[str, Primitive] = {}


def _register(primitive: Primitive) -> Primitive:
    PRIMITIVES[primitive.name] = primitive
    return primitive


# ---------------------------------------------------------------------------
# SymPy functions for primitives SymPy has no class for
# ---------------------------------------------------------------------------


class NumericImplementation:
    """What ``sympy.lambdify`` calls for a symad SymPy function: its ``_imp_``.

    SymPy's printers know no ``sigmoid``, ``ndtr``...: lambdify prints such a call
    by name and takes the name from a namespace holding the ``_imp_`` of every
    function class in the expression. Without one, a formula symad returns
    raises NameError when lambdified. mpmath arguments (``modules="mpmath"``) are
    computed by ``mpmath_impl`` at mpmath's working precision, SymPy arguments
    (``modules="sympy"``) stay symbolic, anything else (floats, NumPy arrays) goes
    to ``numpy_impl`` -- what symad itself evaluates with -- or, where there is
    none, to ``mpmath_impl`` element by element.
    """

    def __init__(self, function_class, mpmath_impl: Callable, numpy_impl: Callable | None = None):
        self.function_class = function_class
        self.mpmath_impl = mpmath_impl
        self.numpy_impl = numpy_impl

    def __call__(self, *args):
        if any(isinstance(arg, sympy.Basic) for arg in args):
            return self.function_class(*args)
        if any(isinstance(arg, (mpmath.mpf, mpmath.mpc)) for arg in args):
            return self.mpmath_impl(*(mpmath.mpmathify(arg) for arg in args))
        if self.numpy_impl is not None:
            return self.numpy_impl(*args)
        values = np.vectorize(lambda *v: float(self.mpmath_impl(*(mpmath.mpf(float(a)) for a in v))),
                              otypes=[np.float64])(*args)
        return values[()] if values.ndim == 0 else values

    def __repr__(self) -> str:
        return f"NumericImplementation({self.function_class.__name__})"


def evalf_by_mpmath(function, mpmath_impl: Callable, prec: int):
    """``function.evalf`` at ``prec`` bits by ``mpmath_impl``; None (stay symbolic) unless real."""
    values = [arg.evalf(mpmath.libmp.prec_to_dps(prec) + 5) for arg in function.args]
    if not all(value.is_Number and value.is_real for value in values):
        return None
    with mpmath.workprec(prec + 20):
        result = mpmath_impl(*(value._to_mpmath(prec + 20) for value in values))
        if isinstance(result, mpmath.mpc):
            return None
        # Made an mpf here, at the working precision: outside, mpmath.mpf rounds to mpmath's
        # global precision (53 bits by default), and evalf(50) kept 16 digits.
        result = mpmath.mpf(result)
    return sympy.Float._new(result._mpf_, prec)


def _mpmath_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))  # mpmath's exponent range is unbounded: no overflow


def _mpmath_softplus(x):
    return mpmath.log1p(mpmath.exp(x))  # log1p: full precision where exp(x) is tiny


class sigmoid(sympy.Function):  # noqa: N801 - SymPy function classes are lower case
    """The logistic function 1/(1 + exp(-x)), printed as sigma(x)."""

    @classmethod
    def eval(cls, x):
        if x.is_zero:
            return sympy.Rational(1, 2)
        return None

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return 1 / (1 + sympy.exp(-x))

    def _eval_evalf(self, prec):
        return evalf_by_mpmath(self, _mpmath_sigmoid, prec)

    def fdiff(self, argindex=1):
        # sech(x/2)**2/4 = sigma(x) sigma(-x), as the partial rule (symad.rules.partials):
        # 1 - sigma(x) rounds to 0 for large x.
        return sympy.sech(self.args[0] / 2) ** 2 / 4


class softplus(sympy.Function):  # noqa: N801
    """log(1 + exp(x)), evaluated stably."""

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return sympy.log(1 + sympy.exp(x))

    _eval_rewrite_as_log = _eval_rewrite_as_exp

    def _eval_evalf(self, prec):
        return evalf_by_mpmath(self, _mpmath_softplus, prec)

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])


# The stable NumPy forms symad evaluates with (the primitives' implementations below).
sigmoid._imp_ = staticmethod(NumericImplementation(sigmoid, _mpmath_sigmoid, scipy.special.expit))
softplus._imp_ = staticmethod(NumericImplementation(
    softplus, _mpmath_softplus, lambda x: np.logaddexp(0.0, x)))


class cbrt(sympy.Function):  # noqa: N801
    """The real cube root (negative for negative x, unlike SymPy's principal root)."""

    @classmethod
    def eval(cls, x):
        if x.is_Number and x.is_real:
            return sympy.sign(x) * sympy.root(abs(x), 3)
        return None

    def _mpmathcode(self, printer):
        # lambdify(..., "mpmath") would print mpmath.cbrt, the principal (complex) root.
        x = printer._print(self.args[0])
        return (f"{printer._module_format('mpmath.sign')}({x})"
                f"*{printer._module_format('mpmath.cbrt')}(abs({x}))")

    def fdiff(self, argindex=1):
        return 1 / (3 * cbrt(self.args[0]) ** 2)


class stop_gradient(sympy.Function):  # noqa: N801
    """Identity whose derivative is zero (every order)."""

    @classmethod
    def eval(cls, x):
        if x.is_number:
            return x
        return None

    def fdiff(self, argindex=1):
        return sympy.Integer(0)


# As a value stop_gradient is the identity (lambdify would not know the name).
stop_gradient._imp_ = staticmethod(NumericImplementation(stop_gradient, lambda x: x, lambda x: x))


# ---------------------------------------------------------------------------
# Identities used by ``simplify`` hooks
# ---------------------------------------------------------------------------


def _is_number(atom, value: int) -> bool:
    """True if ``atom`` is the number ``value`` (1 or -1), exact or float.

    Compared through the numbers' own fields: ``Float(0.001) == 1`` sympifies
    the 1 and converts precisions, a few microseconds on every product
    recorded with a float constant.
    """
    if not atom.is_Number:
        return False
    if atom.is_Integer:
        return atom.p == value
    if atom.is_Float:
        return atom._mpf_ == _FLOAT_MPF[value]
    return atom == value


_FLOAT_MPF = {1: sympy.Float(1.0)._mpf_, -1: sympy.Float(-1.0)._mpf_}


def _negated_operand(builder, atom):
    """``y`` if ``atom`` is the node ``-y`` in ``builder``, else None."""
    node = builder.node_of(atom)
    if node is not None and node.primitive is neg_p:
        return node.args[0]
    return None


def _simplify_add(builder, args):
    if all(a.is_Symbol for a in args):  # every identity below needs a constant operand
        return None
    kept = tuple(a for a in args if not is_zero_constant(a))
    if not kept:
        return sympy.Integer(0)
    if len(kept) == 1:
        return kept[0]
    if len(kept) != len(args):
        return builder.record(add_p, kept)
    return None


def _simplify_sub(builder, args):
    a, b = args
    if is_zero_constant(b):
        return a
    if same_atom(a, b):
        return sympy.Integer(0)
    if is_zero_constant(a):
        return builder.record(neg_p, (b,))
    inner = _negated_operand(builder, b)
    if inner is not None:  # a - (-y) = a + y
        return builder.record(add_p, (a, inner))
    return None


def _simplify_mul(builder, args):
    a, b = args  # sorted: a constant operand comes first
    if a.is_Symbol:  # so both are symbols: every identity below needs a constant
        return None
    if is_zero_constant(a) or is_zero_constant(b):
        return sympy.Integer(0)
    if _is_number(a, 1):
        return b
    if _is_number(b, 1):
        return a
    if _is_number(a, -1):
        return builder.record(neg_p, (b,))
    return _fold_rational_factors(builder, a, b)


def _fold_rational_factors(builder, factor, operand):
    """``c1 * (c2 * y) -> (c1*c2) * y`` and ``c1 * (-y) -> (-c1) * y`` for exact rationals.

    Taylor coefficients multiply by j and 1/k at every order; folding keeps
    ``2 * (-x/2)`` from reaching a formula as two nodes (it is ``-x``). Only
    exact rationals fold: with floats the product would round differently.
    """
    if not factor.is_Rational:
        return None
    node = builder.node_of(operand)
    if node is None:
        return None
    if node.primitive is neg_p:
        return builder.record(mul_p, (-factor, node.args[0]))
    if node.primitive is mul_p and node.args[0].is_Rational:
        return builder.record(mul_p, (factor * node.args[0], node.args[1]))
    return None


def _simplify_div(builder, args):
    a, b = args
    if a.is_Symbol and b.is_Symbol:  # every identity below needs a constant operand
        return None
    if _is_number(b, 1):
        return a
    if _is_number(b, -1):
        return builder.record(neg_p, (a,))
    if is_zero_constant(a) and not is_zero_constant(b):
        return sympy.Integer(0)
    return None


def _simplify_neg(builder, args):
    return _negated_operand(builder, args[0])


def _simplify_pow(builder, args):
    base, exponent = args
    if _is_number(exponent, 1):
        return base
    if is_zero_constant(exponent):
        return sympy.Integer(1)
    if _is_number(base, 1):
        return sympy.Integer(1)
    return _fold_power_of_power(builder, base, exponent)


def _is_integral_number(atom) -> bool:
    return atom.is_Number and float(atom).is_integer()


def _fold_power_of_power(builder, base, exponent):
    """``(x**a)**b -> x**(a*b)`` where that is exact: ``b`` an integer.

    Kept apart when ``a`` is not an integer but ``a*b`` is: ``sqrt(x)**2`` is
    nan for x < 0 and ``x**1`` is not, so folding would change the domain.
    """
    inner = builder.node_of(base)
    if inner is None or inner.primitive is not pow_p or not _is_integral_number(exponent):
        return None
    inner_base, inner_exponent = inner.args
    if not inner_exponent.is_Number:
        return None
    product = inner_exponent * exponent
    if not _is_integral_number(inner_exponent) and _is_integral_number(product):
        return None
    return builder.record(pow_p, (inner_base, product))


def _simplify_select(builder, args):
    condition, if_true, if_false = args
    if isinstance(condition, sympy.logic.boolalg.BooleanAtom) or condition.is_Number:
        return if_true if bool(condition) else if_false
    if same_atom(if_true, if_false):
        return if_true
    return None


def _simplify_stop_gradient(builder, args):
    (x,) = args
    if is_constant(x):
        return x
    node = builder.node_of(x)
    if node is not None and node.primitive is stop_gradient_p:
        return x
    return None


# ---------------------------------------------------------------------------
# The table: names, SymPy forms, NumPy implementations, identities, spellings.
# The derivative rules are registered onto these by symad/rules/partials.py
# (symbolic partials) and symad/rules/taylor.py (Taylor recurrences).
# ---------------------------------------------------------------------------

# -- arithmetic --------------------------------------------------------------

add_p = _register(Primitive(
    "add", lambda *a: sympy.Add(*a), lambda *a: _sum_arrays(a),
    commutative=True, simplify=_simplify_add, variadic=True, numpy_name="add", numexpr_name="+"))
sub_p = _register(Primitive(
    "subtract", lambda a, b: a - b, np.subtract, arity=2,
    simplify=_simplify_sub, numpy_name="subtract", numexpr_name="-"))
mul_p = _register(Primitive(
    "multiply", lambda a, b: a * b, np.multiply, arity=2,
    commutative=True, simplify=_simplify_mul, numpy_name="multiply", numexpr_name="*"))
div_p = _register(Primitive(
    "divide", lambda a, b: a / b, np.true_divide, arity=2,
    simplify=_simplify_div, numpy_name="true_divide", numexpr_name="/"))
neg_p = _register(Primitive(
    "negative", lambda a: -a, np.negative,
    simplify=_simplify_neg, numpy_name="negative", numexpr_name="-"))
pow_p = _register(Primitive(
    "power", lambda a, b: a**b, np.power, arity=2,
    simplify=_simplify_pow, numpy_name="power", numexpr_name="**"))


def _sum_arrays(terms):
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


# -- roots, exponentials, logarithms -----------------------------------------

sqrt_p = _register(Primitive("sqrt", sympy.sqrt, np.sqrt, numpy_name="sqrt", numexpr_name="sqrt"))
cbrt_p = _register(Primitive("cbrt", cbrt, np.cbrt, numpy_name="cbrt"))
exp_p = _register(Primitive("exp", sympy.exp, np.exp, numpy_name="exp", numexpr_name="exp"))
exp2_p = _register(Primitive("exp2", lambda x: 2**x, np.exp2, numpy_name="exp2"))
expm1_p = _register(Primitive(
    "expm1", sympy_expm1, np.expm1, numpy_name="expm1", numexpr_name="expm1"))
log_p = _register(Primitive("log", sympy.log, np.log, numpy_name="log", numexpr_name="log"))
log2_p = _register(Primitive("log2", lambda x: sympy.log(x, 2), np.log2, numpy_name="log2"))
log10_p = _register(Primitive(
    "log10", lambda x: sympy.log(x, 10), np.log10, numpy_name="log10", numexpr_name="log10"))
log1p_p = _register(Primitive(
    "log1p", sympy_log1p, np.log1p, numpy_name="log1p", numexpr_name="log1p"))

# -- trigonometric and hyperbolic ----------------------------------------------

sin_p = _register(Primitive("sin", sympy.sin, np.sin, numpy_name="sin", numexpr_name="sin"))
cos_p = _register(Primitive("cos", sympy.cos, np.cos, numpy_name="cos", numexpr_name="cos"))
tan_p = _register(Primitive("tan", sympy.tan, np.tan, numpy_name="tan", numexpr_name="tan"))
arcsin_p = _register(Primitive(
    "arcsin", sympy.asin, np.arcsin, numpy_name="arcsin", numexpr_name="arcsin"))
arccos_p = _register(Primitive(
    "arccos", sympy.acos, np.arccos, numpy_name="arccos", numexpr_name="arccos"))
arctan_p = _register(Primitive(
    "arctan", sympy.atan, np.arctan, numpy_name="arctan", numexpr_name="arctan"))
arctan2_p = _register(Primitive(
    "arctan2", sympy.atan2, np.arctan2, arity=2, numpy_name="arctan2", numexpr_name="arctan2"))
sinh_p = _register(Primitive("sinh", sympy.sinh, np.sinh, numpy_name="sinh", numexpr_name="sinh"))
cosh_p = _register(Primitive("cosh", sympy.cosh, np.cosh, numpy_name="cosh", numexpr_name="cosh"))
tanh_p = _register(Primitive("tanh", sympy.tanh, np.tanh, numpy_name="tanh", numexpr_name="tanh"))
# sech is tanh's derivative rule (tanh' = sech**2, sech' = -sech*tanh): unlike
# cosh**-2 it never overflows, so no 0 * inf appears at any order for large |x|.
sech_p = _register(Primitive("sech", sympy.sech, lambda x: 1 / np.cosh(x), numpy_name="sech"))
arcsinh_p = _register(Primitive(
    "arcsinh", sympy.asinh, np.arcsinh, numpy_name="arcsinh", numexpr_name="arcsinh"))
arccosh_p = _register(Primitive(
    "arccosh", sympy.acosh, np.arccosh, numpy_name="arccosh", numexpr_name="arccosh"))
arctanh_p = _register(Primitive(
    "arctanh", sympy.atanh, np.arctanh, numpy_name="arctanh", numexpr_name="arctanh"))
# 1 - x**2 as one primitive, for the partials of arcsin, arccos and arctanh: its value
# is (1 - x)(1 + x), exact near |x| = 1 where 1 - x*x loses half the digits, and its
# own partial is -2x, where the product rule on (1 - x)(1 + x) gives (1 - x) - (1 + x),
# which cancels near 0 (arcsin''(1e-20) was 0, not 1e-20).
one_minus_square_p = _register(Primitive(
    "one_minus_square", lambda x: 1 - x**2, lambda x: (1 - x) * (1 + x), numpy_name=None))

# -- piecewise and two-argument smooth functions ------------------------------

abs_p = _register(Primitive("abs", sympy.Abs, np.abs, numpy_name="abs", numexpr_name="abs"))
sign_p = _register(Primitive("sign", sympy.sign, np.sign, numpy_name="sign"))
maximum_p = _register(Primitive(
    "maximum", sympy.Max, np.maximum, arity=2, commutative=True, numpy_name="maximum"))
minimum_p = _register(Primitive(
    "minimum", sympy.Min, np.minimum, arity=2, commutative=True, numpy_name="minimum"))
reduce_max_p = _register(Primitive(
    "reduce_max", lambda *a: sympy.Max(*a), lambda *a: np.max(np.stack(np.broadcast_arrays(*a)), axis=0),
    commutative=True, variadic=True))
reduce_min_p = _register(Primitive(
    "reduce_min", lambda *a: sympy.Min(*a), lambda *a: np.min(np.stack(np.broadcast_arrays(*a)), axis=0),
    commutative=True, variadic=True))
hypot_p = _register(Primitive(
    "hypot", lambda a, b: sympy.sqrt(a**2 + b**2), np.hypot, arity=2,
    commutative=True, numpy_name="hypot"))
# a / hypot(a, b), the partial of hypot (the cosine of the angle of (a, b)), as tanh' = sech**2
# uses sech: its partials b**2/h**3 and -a b/h**3 are written as products of the pair
# hypot_ratio(b, a)**2 / h and -hypot_ratio(a, b) hypot_ratio(b, a) / h, which never
# cancel. Differentiating the quotient a / h instead gives 1/h - (a/h)**2/h, which loses
# (a/b)**2 of its digits (hypot(x, 2)'' at x = 1e20 was 0, not 4e-60).
hypot_ratio_p = _register(Primitive(
    "hypot_ratio", lambda a, b: a / sympy.sqrt(a**2 + b**2), lambda a, b: a / np.hypot(a, b),
    arity=2, numpy_name=None))
logaddexp_p = _register(Primitive(
    "logaddexp", lambda a, b: sympy.log(sympy.exp(a) + sympy.exp(b)), np.logaddexp, arity=2,
    commutative=True, numpy_name="logaddexp"))
logsumexp_p = _register(Primitive(
    "logsumexp", lambda *a: sympy.log(sympy.Add(*[sympy.exp(t) for t in a])),
    lambda *a: scipy.special.logsumexp(np.stack(np.broadcast_arrays(*a)), axis=0),
    commutative=True, variadic=True))

# -- special functions ---------------------------------------------------------

erf_p = _register(Primitive("erf", sympy.erf, scipy.special.erf, numpy_name="erf"))
erfc_p = _register(Primitive("erfc", sympy.erfc, scipy.special.erfc, numpy_name="erfc"))
sigmoid_p = _register(Primitive("sigmoid", sigmoid, scipy.special.expit, numpy_name="expit"))
softplus_p = _register(Primitive(
    "softplus", softplus, lambda x: np.logaddexp(0.0, x), numpy_name="softplus"))

# -- selection, comparison, gradient control -----------------------------------

select_p = _register(Primitive(
    "where", lambda c, a, b: sympy.Piecewise((a, c), (b, True)), np.where, arity=3,
    simplify=_simplify_select, numpy_name="where", numexpr_name="where", boolean_operands=(0,)))


def _comparison(name, relation, numpy_impl, numexpr_name):
    return _register(Primitive(
        name, relation, numpy_impl, arity=2, numpy_name=name, numexpr_name=numexpr_name,
        returns_boolean=True))


less_p = _comparison("less", sympy.StrictLessThan, np.less, "<")
less_equal_p = _comparison("less_equal", sympy.LessThan, np.less_equal, "<=")
greater_p = _comparison("greater", sympy.StrictGreaterThan, np.greater, ">")
greater_equal_p = _comparison("greater_equal", sympy.GreaterThan, np.greater_equal, ">=")
equal_p = _comparison("equal", sympy.Eq, np.equal, "==")
not_equal_p = _comparison("not_equal", sympy.Ne, np.not_equal, "!=")


def _logical(name, relation, numpy_impl, arity):
    return _register(Primitive(
        name, relation, numpy_impl, arity=arity, numpy_name=name, returns_boolean=True,
        boolean_operands=tuple(range(arity)), commutative=arity == 2))


logical_and_p = _logical("logical_and", sympy.And, np.logical_and, 2)
logical_or_p = _logical("logical_or", sympy.Or, np.logical_or, 2)
logical_not_p = _logical("logical_not", sympy.Not, np.logical_not, 1)

stop_gradient_p = _register(Primitive(
    "stop_gradient", stop_gradient, lambda x: x, simplify=_simplify_stop_gradient, numpy_name=None))
