"""Every primitive symad records, one stanza each: everything the system knows about it.

A primitive is declared once, through :func:`register`, and each fact about it
is a field of that declaration: its name and SymPy form, its NumPy
implementation, its algebraic identities, its LaTeX spelling, its structural
facts (finite for finite operands, what an element costs, measured timings)
and its spelling for every backend -- the NumPy, numexpr, numba and C
lowerings, and the mpmath and interval interpreters. Backends and printers
read those fields (:meth:`Primitive.spelling`); none keeps its own table of
names, and a primitive with no spelling for a backend is the one fallback that
backend has (evaluated in NumPy, or refused with a message naming it). The
rules of each transform live in one table per transform, registered onto these
primitives the way autograd's ``numpy_vjps.py`` registers onto
``numpy_wrapper``: :mod:`symad.rules.partials` (symbolic partial derivatives,
written with traceable operations) and :mod:`symad.rules.taylor`
(Taylor-coefficient recurrences). What a stanza is made of -- the
:class:`Primitive` type, :func:`register` and the registry, the rule tables'
type, the spelling helpers and cost classes -- is :mod:`symad.ir.primitive`,
re-exported here. This module imports nothing traced and no backend, so the
layers stay acyclic: primitives -> ir.primitive, graph -> ir.primitive (the
graph imports no catalogue), rules -> numpy -> tracer -> graph, and every
backend -> ir.primitive.

A primitive whose ``partials`` is ``None`` has no rule: differentiating
through it raises :class:`~symad.errors.DifferentiationError`.

>>> sin_p.name, sin_p.numpy_name, sin_p.spelling("c")
('sin', 'sin', 'sin({0})')
>>> import sympy
>>> sin_p.to_sympy((sympy.Symbol("x"),), {})
sin(x)
>>> spell(hypot_ratio_p.spelling("numba"), ["a", "b"])
'(a / np.hypot(a, b))'
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

import mpmath
import numpy as np
import sympy
from mpmath import iv
from mpmath.libmp.libmpi import mpi_atan, mpi_cosh_sinh
from sympy.codegen.cfunctions import expm1 as sympy_expm1
from sympy.codegen.cfunctions import log1p as sympy_log1p

from symad.atoms import is_constant, is_zero_constant, same_atom
from symad.lazy_scipy import special as lazy_scipy

# The machinery the stanzas are declared with, re-exported: ``from symad.primitives import
# Primitive, register`` keeps working.
from symad.ir.primitive import (
    ARITHMETIC,
    BACKENDS,
    BUILDER_ROLES,
    CALL,
    FREE,
    MAX_INFIX_TERMS,  # noqa: F401 - re-exported, as every name of the machinery
    NATIVE,
    PARTIALS,
    PRIMITIVES,
    PartialRule,  # noqa: F401 - re-exported
    Primitive,
    RuleTable,
    infix,
    joined,
    nested,
    python_sum,
    register,
    spell,
    stacked,
)

__all__ = ["Primitive", "PRIMITIVES", "BACKENDS", "register", "spell", "FREE", "ARITHMETIC",
           "NATIVE", "CALL", "RuleTable", "PARTIALS"]


def _c_power(args: Sequence[str], constants: Sequence = ()) -> str:
    """C for ``base ** exponent``: exactly rounded either way, x**1, x**2 and x**-1 need
    no pow() call; a traced exponent (x**y, 2.0**y) is pow() as NumPy computes it."""
    base, exponent = args
    value = constants[1] if len(constants) > 1 else None
    if value is not None:
        if value == 1:
            return base
        if value == 2:
            return f"{base} * {base}"
        if value == -1:
            return f"1.0 / {base}"
    return f"pow({base}, {exponent})"


def _c_logsumexp(args: Sequence[str], constants: Sequence = ()) -> str:
    return f"symad_logsumexp({len(args)}, (const double[]){{{', '.join(args)}}})"


# C helpers the C spellings call: NumPy's semantics where C's differ, stable forms.
_C_MAXIMUM = ("static double symad_maximum(double a, double b) "
              "{ return (a != a || b != b) ? a + b : (a > b ? a : b); }")
_C_MINIMUM = ("static double symad_minimum(double a, double b) "
              "{ return (a != a || b != b) ? a + b : (a < b ? a : b); }")
_C_SIGN = "static double symad_sign(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x); }"
_C_MOD = ("static double symad_mod(double a, double b) { double r = fmod(a, b); "
          "if (b == 0.0) return r; if (r != 0.0) { if ((b < 0.0) != (r < 0.0)) r += b; } "
          "else r = copysign(0.0, b); return r; }")
_C_SIGMOID = ("static double symad_sigmoid(double x) "
              "{ if (x >= 0.0) return 1.0 / (1.0 + exp(-x)); double e = exp(x); return e / (1.0 + e); }")
_C_SOFTPLUS = ("static double symad_softplus(double x) "
               "{ return (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x))); }")
_C_LOGADDEXP = ("static double symad_logaddexp(double a, double b) "
                "{ if (a == b) return a + 0.69314718055994530942; "
                "double m = a > b ? a : b; return m + log1p(exp(-fabs(a - b))); }")
_C_LOGSUMEXP = ("static double symad_logsumexp(int n, const double *v) "
                "{ double m = v[0], s = 0.0; int i; "
                "for (i = 1; i < n; i++) if (v[i] > m || v[i] != v[i]) m = v[i]; "
                "if (m != m || m == HUGE_VAL || m == -HUGE_VAL) return m; "
                "for (i = 0; i < n; i++) s += exp(v[i] - m); return m + log(s); }")


# ---------------------------------------------------------------------------
# mpmath and interval implementations: NumPy's real semantics at any precision
# ---------------------------------------------------------------------------

NAN = mpmath.mpf("nan")


def _mp_divide(a, b):
    if b == 0:  # mpmath raises; IEEE gives a signed infinity, or nan for 0/0 and nan/0
        return NAN if a == 0 or mpmath.isnan(a) else mpmath.inf * mpmath.sign(a)
    return a / b


def _mp_power(a, b):
    if a == 0 and b < 0:
        return mpmath.inf
    return mpmath.power(a, b)


def _mp_cbrt(x):
    return mpmath.sign(x) * mpmath.cbrt(abs(x))  # the real cube root (mpmath's is the principal one)


def _mp_extremum(choose):
    def extremum(*args):
        if any(mpmath.isnan(a) for a in args):
            return NAN  # NumPy's maximum and minimum propagate nan
        return choose(args)

    return extremum


def _mp_logaddexp(*args):
    largest = max(args)
    if mpmath.isinf(largest):
        return largest
    return largest + mpmath.log(mpmath.fsum(mpmath.exp(a - largest) for a in args))


def _mp_sign(x):
    return NAN if mpmath.isnan(x) else mpmath.mpf(mpmath.sign(x))


def _mp_rounding(function):
    def rounding(x):
        return x if mpmath.isnan(x) or mpmath.isinf(x) else function(x)

    return rounding


def _mp_fmod(a, b):
    if b == 0 or mpmath.isinf(a) or mpmath.isnan(a) or mpmath.isnan(b):
        return NAN
    if mpmath.isinf(b):
        return a
    quotient = a / b
    return a - b * mpmath.sign(quotient) * mpmath.floor(abs(quotient))  # C's: the sign of a


def _mp_mod(a, b):
    remainder = _mp_fmod(a, b)
    if remainder != 0 and not mpmath.isnan(remainder) and (remainder < 0) != (b < 0):
        remainder += b  # NumPy's (and Python's) mod takes the divisor's sign; inf for b = inf
    return remainder


def _sympy_fmod(a, b):
    # a - trunc(a / b) b, with trunc(t) = sign(t) floor(|t|)
    return a - b * sympy.sign(a / b) * sympy.floor(sympy.Abs(a / b))


def _mp_select(condition, if_true, if_false):
    return if_true if condition else if_false


def _iv_sum(*terms):
    return functools.reduce(operator.add, terms)


def _iv_atan(x):
    return iv.make_mpf(mpi_atan(x._mpi_, iv.prec))


def _iv_cosh(x):
    return iv.make_mpf(mpi_cosh_sinh(x._mpi_, iv.prec)[0])


def _iv_sinh(x):
    return iv.make_mpf(mpi_cosh_sinh(x._mpi_, iv.prec)[1])


def _identity(x):
    return x


def _one_minus_square(x):
    return (1 - x) * (1 + x)  # numbers, mpmath numbers and intervals alike


# ---------------------------------------------------------------------------
# LaTeX spellings that are more than a function name
# ---------------------------------------------------------------------------


def _latex_log(printer, expr, exp=None):
    # SymPy prints log(x)**2 as \log{(x)}^{2}, which reads as log(x^2); write \log^{2} like \sin^{2}.
    name = r"\ln" if printer._settings["ln_notation"] else r"\log"
    return printer._function_call(name, expr, exp)


def _latex_sech(printer, expr, exp=None):
    # 1/cosh: as readable as \operatorname{sech}, and every LaTeX reader knows \cosh.
    cosh = printer._function_call(r"\cosh", expr, exp)
    return rf"\frac{{1}}{{{cosh}}}"


def _latex_cbrt(printer, expr, exp=None):
    root = rf"\sqrt[3]{{{printer._print(expr.args[0])}}}"
    return root if exp is None else rf"\left({root}\right)^{{{exp}}}"


def _printed_product(a, b):
    # 2 (x - 1) kept as written: SymPy distributes a number over a sum when it builds
    # 2 * (x - 1), giving 2 x - 2, and the derivative of (x - 1)**2 would print as a sum of
    # scaled terms. An unevaluated product keeps the factor (SymPy still merges numbers
    # when the product is multiplied again).
    number, other = (a, b) if a.is_Number else (b, a)
    if number.is_Number and other.is_Add:
        return sympy.Mul(number, other, evaluate=False)
    return a * b


def _printed_quotient(a, b):
    # (x - 1) / 2 kept as written, as a product by 1/2 (see _printed_product).
    if b.is_Rational and not b.is_zero and a.is_Add:
        return sympy.Mul(1 / b, a, evaluate=False)
    return a / b


def _printed_sech(x):
    # 1/cosh as a power, so that a product prints it as a denominator: 2 tanh(x)/cosh^2(x),
    # not 2 tanh(x) (1/cosh^2(x)).
    return sympy.Pow(sympy.cosh(x, evaluate=False), -1, evaluate=False) if not x.is_Number \
        else sympy.sech(x)


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
sigmoid._imp_ = staticmethod(NumericImplementation(sigmoid, _mpmath_sigmoid, lazy_scipy.expit))
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
# The catalogue: one stanza per primitive. The derivative rules are registered onto
# these by symad/rules/partials.py (symbolic partials) and symad/rules/taylor.py
# (Taylor recurrences); symad/numpy/elementwise.py gives each its NumPy name.
# ---------------------------------------------------------------------------

# -- arithmetic --------------------------------------------------------------

add_p = register(Primitive(
    "add", lambda *a: sympy.Add(*a), lambda *a: _sum_arrays(a),
    commutative=True, simplify=_simplify_add, variadic=True,
    numpy=python_sum, numexpr=("+", ...), numba=infix("+"), c=joined(" + "),
    mpmath=lambda *terms: mpmath.fsum(terms), interval=_iv_sum,
    finite=True, cost=ARITHMETIC, cost_ns=(0.43, 0.26),
    complex_values="follow"))
sub_p = register(Primitive(
    "subtract", lambda a, b: a - b, np.subtract, arity=2, simplify=_simplify_sub,
    numpy_name="subtract", numexpr=("-", 0, 1), numba="({0} - {1})", c="{0} - {1}",
    mpmath=operator.sub, interval=operator.sub,
    finite=True, cost=ARITHMETIC, cost_ns=(0.43, 0.26),
    complex_values="follow"))
mul_p = register(Primitive(
    "multiply", lambda a, b: a * b, np.multiply, arity=2, commutative=True,
    simplify=_simplify_mul, numpy_name="multiply",
    numexpr=("*", 0, 1), numba="({0} * {1})", c="{0} * {1}",
    mpmath=operator.mul, interval=operator.mul, printed=_printed_product,
    finite=True, cost=ARITHMETIC, cost_ns=(0.36, 0.26),
    complex_values="follow"))
div_p = register(Primitive(
    "divide", lambda a, b: a / b, np.true_divide, arity=2, simplify=_simplify_div,
    numpy_name="true_divide", numexpr=("/", 0, 1), numba="({0} / {1})", c="{0} / {1}",
    mpmath=_mp_divide, interval=operator.truediv, printed=_printed_quotient,
    cost=ARITHMETIC, cost_ns=(0.70, 0.33),
    complex_values="follow"))
neg_p = register(Primitive(
    "negative", lambda a: -a, np.negative, simplify=_simplify_neg, numpy_name="negative",
    numexpr=("-", 0), numba="(-{0})", c="-{0}", mpmath=operator.neg, interval=operator.neg,
    finite=True, cost=ARITHMETIC, cost_ns=(0.26, 0.19),
    complex_values="follow"))
# cost_ns: a variable or non-integral exponent (numexpr writes integral ones as products)
pow_p = register(Primitive(
    "power", lambda a, b: a**b, np.power, arity=2, simplify=_simplify_pow, numpy_name="power",
    numexpr=("**", 0, 1), numba="({0} ** {1})", c=_c_power,
    mpmath=_mp_power, interval=("power", {}), cost_ns=(9.96, 2.26),
    complex_values="follow"))


def _sum_arrays(terms):
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


# -- roots, exponentials, logarithms -----------------------------------------

sqrt_p = register(Primitive(
    "sqrt", sympy.sqrt, np.sqrt, numpy_name="sqrt",
    numexpr=("sqrt", 0), numba="np.sqrt({0})", c="sqrt({0})",
    mpmath=mpmath.sqrt, interval=("clipped", {"function": iv.sqrt, "lower": 0}),
    cost=NATIVE, cost_ns=(2.34, 1.20),
    complex_values="follow"))
cbrt_p = register(Primitive(
    "cbrt", cbrt, np.cbrt, numpy_name="cbrt", numba="np.cbrt({0})", c="cbrt({0})",
    mpmath=_mp_cbrt, interval=("monotone", {}), latex=_latex_cbrt, finite=True))
exp_p = register(Primitive(
    "exp", sympy.exp, np.exp, numpy_name="exp",
    numexpr=("exp", 0), numba="np.exp({0})", c="exp({0})", mpmath=mpmath.exp, interval=iv.exp,
    finite=True, cost_ns=(4.13, 0.82),
    complex_values="follow"))
exp2_p = register(Primitive(
    "exp2", lambda x: 2**x, np.exp2, numpy_name="exp2", numba="np.exp2({0})", c="exp2({0})",
    mpmath=lambda x: mpmath.power(2, x), interval=("monotone", {}), finite=True,
    complex_values="follow"))
expm1_p = register(Primitive(
    "expm1", sympy_expm1, np.expm1, numpy_name="expm1",
    numexpr=("expm1", 0), numba="np.expm1({0})", c="expm1({0})",
    mpmath=mpmath.expm1, interval=("monotone", {}), latex=r"\operatorname{expm1}",
    finite=True, cost_ns=(7.19, 1.18),
    complex_values="follow"))
log_p = register(Primitive(
    "log", sympy.log, np.log, numpy_name="log",
    numexpr=("log", 0), numba="np.log({0})", c="log({0})",
    mpmath=mpmath.log, interval=("clipped", {"function": iv.log, "lower": 0}),
    latex=_latex_log, cost_ns=(3.33, 0.82),
    complex_values="follow"))
log2_p = register(Primitive(
    "log2", lambda x: sympy.log(x, 2), np.log2, numpy_name="log2",
    numexpr=("log2", 0), numba="np.log2({0})", c="log2({0})",
    mpmath=lambda x: mpmath.log(x, 2), interval=("monotone", {"lower": 0}),
    cost_ns=(3.60, 0.93),
    complex_values="follow"))
log10_p = register(Primitive(
    "log10", lambda x: sympy.log(x, 10), np.log10, numpy_name="log10",
    numexpr=("log10", 0), numba="np.log10({0})", c="log10({0})",
    mpmath=mpmath.log10, interval=("monotone", {"lower": 0}), cost_ns=(6.17, 0.88),
    complex_values="follow"))
log1p_p = register(Primitive(
    "log1p", sympy_log1p, np.log1p, numpy_name="log1p",
    numexpr=("log1p", 0), numba="np.log1p({0})", c="log1p({0})",
    mpmath=mpmath.log1p, interval=("monotone", {"lower": -1}), latex=r"\operatorname{log1p}",
    cost_ns=(6.95, 1.04),
    complex_values="follow"))

# -- trigonometric and hyperbolic ----------------------------------------------

sin_p = register(Primitive(
    "sin", sympy.sin, np.sin, numpy_name="sin",
    numexpr=("sin", 0), numba="np.sin({0})", c="sin({0})", mpmath=mpmath.sin, interval=iv.sin,
    finite=True, cost_ns=(8.32, 8.11),
    complex_values="follow"))
cos_p = register(Primitive(
    "cos", sympy.cos, np.cos, numpy_name="cos",
    numexpr=("cos", 0), numba="np.cos({0})", c="cos({0})", mpmath=mpmath.cos, interval=iv.cos,
    finite=True, cost_ns=(8.18, 7.99),
    complex_values="follow"))
tan_p = register(Primitive(
    "tan", sympy.tan, np.tan, numpy_name="tan",
    numexpr=("tan", 0), numba="np.tan({0})", c="tan({0})", mpmath=mpmath.tan, interval=iv.tan,
    cost_ns=(8.84, 1.35),
    complex_values="follow"))
arcsin_p = register(Primitive(
    "arcsin", sympy.asin, np.arcsin, numpy_name="arcsin",
    numexpr=("arcsin", 0), numba="np.arcsin({0})", c="asin({0})",
    mpmath=mpmath.asin, interval=("monotone", {"lower": -1, "upper": 1}),
    cost_ns=(10.18, 1.26),
    complex_values="follow"))
arccos_p = register(Primitive(
    "arccos", sympy.acos, np.arccos, numpy_name="arccos",
    numexpr=("arccos", 0), numba="np.arccos({0})", c="acos({0})",
    mpmath=mpmath.acos, interval=("monotone", {"increasing": False, "lower": -1, "upper": 1}),
    cost_ns=(10.14, 1.36),
    complex_values="follow"))
arctan_p = register(Primitive(
    "arctan", sympy.atan, np.arctan, numpy_name="arctan",
    numexpr=("arctan", 0), numba="np.arctan({0})", c="atan({0})",
    mpmath=mpmath.atan, interval=_iv_atan, finite=True, cost_ns=(8.23, 1.24),
    complex_values="follow"))
arctan2_p = register(Primitive(
    "arctan2", sympy.atan2, np.arctan2, arity=2, numpy_name="arctan2",
    numexpr=("arctan2", 0, 1), numba="np.arctan2({0}, {1})", c="atan2({0}, {1})",
    mpmath=mpmath.atan2, interval=iv.atan2, finite=True, cost_ns=(15.09, 2.22)))
sinh_p = register(Primitive(
    "sinh", sympy.sinh, np.sinh, numpy_name="sinh",
    numexpr=("sinh", 0), numba="np.sinh({0})", c="sinh({0})", mpmath=mpmath.sinh,
    interval=_iv_sinh, finite=True, cost_ns=(10.83, 1.18),
    complex_values="follow"))
cosh_p = register(Primitive(
    "cosh", sympy.cosh, np.cosh, numpy_name="cosh",
    numexpr=("cosh", 0), numba="np.cosh({0})", c="cosh({0})", mpmath=mpmath.cosh,
    interval=_iv_cosh, finite=True, cost_ns=(7.54, 0.98),
    complex_values="follow"))
tanh_p = register(Primitive(
    "tanh", sympy.tanh, np.tanh, numpy_name="tanh",
    numexpr=("tanh", 0), numba="np.tanh({0})", c="tanh({0})", mpmath=mpmath.tanh,
    interval=("monotone", {}), finite=True, cost_ns=(11.37, 1.71),
    complex_values="follow"))
# sech is tanh's derivative rule (tanh' = sech**2, sech' = -sech*tanh): unlike
# cosh**-2 it never overflows, so no 0 * inf appears at any order for large |x|.
# Its cost is cosh's (the division adds well under a nanosecond).
sech_p = register(Primitive(
    "sech", sympy.sech, lambda x: 1 / np.cosh(x),
    # 1/cosh everywhere: cosh's inf past |x| = 710 gives the right 0
    numpy="(1.0 / np.cosh({0}))", numexpr=("/", "1", ("cosh", 0)),
    numba="(1.0 / np.cosh({0}))", c="1.0 / cosh({0})",
    mpmath=mpmath.sech, interval=("even", {"increasing": False}),
    latex=_latex_sech, printed=_printed_sech, cost_ns=(7.54, 0.98),
    complex_values="follow"))
arcsinh_p = register(Primitive(
    "arcsinh", sympy.asinh, np.arcsinh, numpy_name="arcsinh",
    numexpr=("arcsinh", 0), numba="np.arcsinh({0})", c="asinh({0})",
    mpmath=mpmath.asinh, interval=("monotone", {}), cost_ns=(20.40, 2.08),
    complex_values="follow"))
arccosh_p = register(Primitive(
    "arccosh", sympy.acosh, np.arccosh, numpy_name="arccosh",
    numexpr=("arccosh", 0), numba="np.arccosh({0})", c="acosh({0})",
    mpmath=mpmath.acosh, interval=("monotone", {"lower": 1}), cost_ns=(18.05, 2.17),
    complex_values="follow"))
arctanh_p = register(Primitive(
    "arctanh", sympy.atanh, np.arctanh, numpy_name="arctanh",
    numexpr=("arctanh", 0), numba="np.arctanh({0})", c="atanh({0})",
    mpmath=mpmath.atanh, interval=("monotone", {"lower": -1, "upper": 1}),
    cost_ns=(20.13, 1.58),
    complex_values="follow"))
# 1 - x**2 as one primitive, for the partials of arcsin, arccos and arctanh: its value
# is (1 - x)(1 + x), exact near |x| = 1 where 1 - x*x loses half the digits, and its
# own partial is -2x, where the product rule on (1 - x)(1 + x) gives (1 - x) - (1 + x),
# which cancels near 0 (arcsin''(1e-20) was 0, not 1e-20).
one_minus_square_p = register(Primitive(
    "one_minus_square", lambda x: 1 - x**2, lambda x: (1 - x) * (1 + x), numpy_name=None,
    numpy="((1.0 - {0}) * (1.0 + {0}))", numba="((1.0 - {0}) * (1.0 + {0}))",
    c="(1.0 - {0}) * (1.0 + {0})", mpmath=_one_minus_square, interval=_one_minus_square,
    cost=NATIVE,
    complex_values="follow"))

# -- piecewise and two-argument smooth functions ------------------------------

abs_p = register(Primitive(
    "abs", sympy.Abs, np.abs, numpy_name="abs",
    numexpr=("abs", 0), numba="np.abs({0})", c="fabs({0})", mpmath=abs, interval=abs,
    finite=True, cost=NATIVE, cost_ns=(1.75, 0.18)))
sign_p = register(Primitive(
    "sign", sympy.sign, np.sign, numpy_name="sign",
    numexpr=("sign", 0), numba="np.sign({0})", c=("symad_sign({0})", _C_SIGN),
    mpmath=_mp_sign, interval=("endpoints", {}), finite=True, cost=NATIVE, cost_ns=(1.68, 0.58)))
# Rounding to an integer: piecewise constant, every partial a structural zero (as sign).
floor_p = register(Primitive(
    "floor", sympy.floor, np.floor, numpy_name="floor",
    numexpr=("floor", 0), numba="np.floor({0})", c="floor({0})",
    mpmath=_mp_rounding(mpmath.floor), interval=("endpoints", {}), finite=True, cost=NATIVE))
ceiling_p = register(Primitive(
    "ceiling", sympy.ceiling, np.ceil, numpy_name="ceil",
    numexpr=("ceil", 0), numba="np.ceil({0})", c="ceil({0})",
    mpmath=_mp_rounding(mpmath.ceil), interval=("endpoints", {}), finite=True, cost=NATIVE))
# NumPy's mod (remainder, Python's %): the sign of the divisor. Piecewise linear in both
# operands: d/da = 1, d/db = -floor(a / b) (symad.rules.partials).
mod_p = register(Primitive(
    "mod", sympy.Mod, np.mod, arity=2, numpy_name="mod",
    numba="np.mod({0}, {1})", c=("symad_mod({0}, {1})", _C_MOD), mpmath=_mp_mod,
    interval=("none", {"why": "mod jumps where a / b crosses an integer; not enclosed"})))
# C's fmod: the sign of the dividend; d/da = 1, d/db = -trunc(a / b).
fmod_p = register(Primitive(
    "fmod", _sympy_fmod, np.fmod, arity=2, numpy_name="fmod",
    numba="np.fmod({0}, {1})", c="fmod({0}, {1})", mpmath=_mp_fmod,
    interval=("none", {"why": "fmod jumps where a / b crosses a nonzero integer; not enclosed"})))
maximum_p = register(Primitive(
    "maximum", sympy.Max, np.maximum, arity=2, commutative=True, numpy_name="maximum",
    numexpr=("maximum", 0, 1), numba="np.maximum({0}, {1})",
    c=("symad_maximum({0}, {1})", _C_MAXIMUM),
    mpmath=_mp_extremum(max), interval=("extremum", {"choose": max}),
    finite=True, cost=NATIVE, cost_ns=(2.25, 0.29)))
minimum_p = register(Primitive(
    "minimum", sympy.Min, np.minimum, arity=2, commutative=True, numpy_name="minimum",
    numexpr=("minimum", 0, 1), numba="np.minimum({0}, {1})",
    c=("symad_minimum({0}, {1})", _C_MINIMUM),
    mpmath=_mp_extremum(min), interval=("extremum", {"choose": min}),
    finite=True, cost=NATIVE, cost_ns=(2.25, 0.29)))
reduce_max_p = register(Primitive(
    "reduce_max", lambda *a: sympy.Max(*a), lambda *a: np.max(np.stack(np.broadcast_arrays(*a)), axis=0),
    commutative=True, variadic=True,
    numpy=stacked("np.max"), numba=nested("np.maximum"), c=(nested("symad_maximum"), _C_MAXIMUM),
    mpmath=_mp_extremum(max), interval=("extremum", {"choose": max}), finite=True, cost=NATIVE))
reduce_min_p = register(Primitive(
    "reduce_min", lambda *a: sympy.Min(*a), lambda *a: np.min(np.stack(np.broadcast_arrays(*a)), axis=0),
    commutative=True, variadic=True,
    numpy=stacked("np.min"), numba=nested("np.minimum"), c=(nested("symad_minimum"), _C_MINIMUM),
    mpmath=_mp_extremum(min), interval=("extremum", {"choose": min}), finite=True, cost=NATIVE))
hypot_p = register(Primitive(
    "hypot", lambda a, b: sympy.sqrt(a**2 + b**2), np.hypot, arity=2,
    commutative=True, numpy_name="hypot",
    numexpr=("hypot", 0, 1), numba="np.hypot({0}, {1})", c="hypot({0}, {1})",
    mpmath=mpmath.hypot, interval=lambda a, b: iv.sqrt(a**2 + b**2),
    finite=True, cost_ns=(16.92, 16.55)))
# a / hypot(a, b), the partial of hypot (the cosine of the angle of (a, b)), as tanh' = sech**2
# uses sech: its partials b**2/h**3 and -a b/h**3 are written as products of the pair
# hypot_ratio(b, a)**2 / h and -hypot_ratio(a, b) hypot_ratio(b, a) / h, which never
# cancel. Differentiating the quotient a / h instead gives 1/h - (a/h)**2/h, which loses
# (a/b)**2 of its digits (hypot(x, 2)'' at x = 1e20 was 0, not 4e-60).
hypot_ratio_p = register(Primitive(
    "hypot_ratio", lambda a, b: a / sympy.sqrt(a**2 + b**2), lambda a, b: a / np.hypot(a, b),
    arity=2, numpy_name=None,
    numpy="({0} / np.hypot({0}, {1}))", numba="({0} / np.hypot({0}, {1}))",
    c="{0} / hypot({0}, {1})", mpmath=lambda a, b: _mp_divide(a, mpmath.hypot(a, b)),
    interval=lambda a, b: a / iv.sqrt(a**2 + b**2)))
logaddexp_p = register(Primitive(
    "logaddexp", lambda a, b: sympy.log(sympy.exp(a) + sympy.exp(b)), np.logaddexp, arity=2,
    commutative=True, numpy_name="logaddexp",
    numba="np.logaddexp({0}, {1})", c=("symad_logaddexp({0}, {1})", _C_LOGADDEXP),
    mpmath=_mp_logaddexp, interval=("corners", {}), finite=True))
_C_LOGADDEXP2 = ("static double symad_logaddexp2(double a, double b) "
                 "{ if (a == b) return a + 1.0; "
                 "double m = a > b ? a : b; "
                 "return m + 1.442695040888963407359924681001892137 * log1p(exp2(-fabs(a - b))); }")


def _mp_logaddexp2(a, b):
    largest = max(a, b)
    if mpmath.isinf(largest) or mpmath.isnan(largest):
        return largest
    return largest + mpmath.log(mpmath.power(2, a - largest) + mpmath.power(2, b - largest), 2)


# log2(2**a + 2**b): NumPy's logaddexp2, without overflow for large a or b (the base-2
# twin of logaddexp, for bits and log2-likelihoods). The walk-through of "Adding a
# primitive" in docs/adding-a-primitive.md.
logaddexp2_p = register(Primitive(
    "logaddexp2", lambda a, b: sympy.log(2**a + 2**b, 2), np.logaddexp2, arity=2,
    commutative=True, numpy_name="logaddexp2",
    numba="np.logaddexp2({0}, {1})", c=("symad_logaddexp2({0}, {1})", _C_LOGADDEXP2),
    mpmath=_mp_logaddexp2, interval=("corners", {}), finite=True))
logsumexp_p = register(Primitive(
    "logsumexp", lambda *a: sympy.log(sympy.Add(*[sympy.exp(t) for t in a])),
    lambda *a: lazy_scipy.logsumexp(np.stack(np.broadcast_arrays(*a)), axis=0),
    commutative=True, variadic=True,
    numpy=stacked("special.logsumexp"), c=(_c_logsumexp, _C_LOGSUMEXP),
    mpmath=_mp_logaddexp, interval=("corners", {}), finite=True))

# -- special functions ---------------------------------------------------------

erf_p = register(Primitive(
    "erf", sympy.erf, lazy_scipy.erf, numpy_name="erf", numba="math.erf({0})", c="erf({0})",
    mpmath=mpmath.erf, interval=("monotone", {}), finite=True))
erfc_p = register(Primitive(
    "erfc", sympy.erfc, lazy_scipy.erfc, numpy_name="erfc", numba="math.erfc({0})",
    c="erfc({0})", mpmath=mpmath.erfc, interval=("monotone", {"increasing": False}),
    finite=True))
sigmoid_p = register(Primitive(
    "sigmoid", sigmoid, lazy_scipy.expit, numpy_name="expit",
    numba="(1.0 / (1.0 + np.exp(-{0})))", c=("symad_sigmoid({0})", _C_SIGMOID),
    mpmath=_mpmath_sigmoid, interval=("monotone", {}), latex=r"\sigma", finite=True))
softplus_p = register(Primitive(
    "softplus", softplus, lambda x: np.logaddexp(0.0, x),
    numpy="np.logaddexp(0.0, {0})", numba="np.logaddexp(0.0, {0})",
    c=("symad_softplus({0})", _C_SOFTPLUS), mpmath=_mpmath_softplus, interval=("monotone", {}),
    latex=r"\operatorname{softplus}", finite=True))

# -- selection, comparison, gradient control -----------------------------------

select_p = register(Primitive(
    "where", lambda c, a, b: sympy.Piecewise((a, c), (b, True)), np.where, arity=3,
    simplify=_simplify_select, numpy_name="where", boolean_operands=(0,),
    numexpr=("where", 0, 1, 2), numba="({1} if {0} else {2})", c="{0} != 0.0 ? {1} : {2}",
    mpmath=_mp_select, interval=("select", {}), finite=True, cost=NATIVE,
    complex_values="follow"))


def _comparison(name, relation, numpy_impl, symbol, mpmath_impl, interval, complex_values=None):
    return register(Primitive(
        name, relation, numpy_impl, arity=2, numpy_name=name, returns_boolean=True,
        numexpr=(symbol, 0, 1), numba=f"({{0}} {symbol} {{1}})",
        c=f"{{0}} {symbol} {{1}} ? 1.0 : 0.0", mpmath=mpmath_impl, interval=interval,
        finite=True, cost=NATIVE, complex_values=complex_values))


less_p = _comparison("less", sympy.StrictLessThan, np.less, "<", operator.lt, ("less", {}))
less_equal_p = _comparison("less_equal", sympy.LessThan, np.less_equal, "<=", operator.le,
                           ("less_equal", {}))
greater_p = _comparison("greater", sympy.StrictGreaterThan, np.greater, ">", operator.gt,
                        ("less", {"swapped": True}))
greater_equal_p = _comparison("greater_equal", sympy.GreaterThan, np.greater_equal, ">=",
                              operator.ge, ("less_equal", {"swapped": True}))
equal_p = _comparison("equal", sympy.Eq, np.equal, "==", operator.eq, ("equal", {}),
                      complex_values="real")
not_equal_p = _comparison("not_equal", sympy.Ne, np.not_equal, "!=", operator.ne,
                          ("equal", {"negated": True}), complex_values="real")

# The graph builder's own conversions between numbers and truth values (the graph imports
# no catalogue: it finds them by role).
BUILDER_ROLES.truth = not_equal_p
BUILDER_ROLES.number = select_p


def _logical(name, relation, numpy_impl, arity, **spellings):
    return register(Primitive(
        name, relation, numpy_impl, arity=arity, numpy_name=name, returns_boolean=True,
        boolean_operands=tuple(range(arity)), commutative=arity == 2, finite=True, cost=NATIVE,
        **spellings))


logical_and_p = _logical(
    "logical_and", sympy.And, np.logical_and, 2, numexpr=("&", 0, 1), numba="({0} and {1})",
    c="({0} != 0.0 && {1} != 0.0) ? 1.0 : 0.0", mpmath=lambda a, b: bool(a) and bool(b),
    interval=("and", {}))
logical_or_p = _logical(
    "logical_or", sympy.Or, np.logical_or, 2, numexpr=("|", 0, 1), numba="({0} or {1})",
    c="({0} != 0.0 || {1} != 0.0) ? 1.0 : 0.0", mpmath=lambda a, b: bool(a) or bool(b),
    interval=("or", {}))
logical_not_p = _logical(
    "logical_not", sympy.Not, np.logical_not, 1, numexpr=("~", 0), numba="(not {0})",
    c="{0} == 0.0 ? 1.0 : 0.0", mpmath=operator.not_, interval=("not", {}))

stop_gradient_p = register(Primitive(
    "stop_gradient", stop_gradient, lambda x: x, simplify=_simplify_stop_gradient, numpy_name=None,
    numpy="{0}", numexpr=0, numba="{0}", c="{0}", mpmath=_identity, interval=_identity,
    latex=r"\operatorname{sg}", finite=True, cost=FREE,
    complex_values="follow"))
