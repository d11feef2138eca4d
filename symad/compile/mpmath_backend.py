"""The ``"mpmath"`` backend: every node of the graph evaluated by mpmath at ``dps`` digits.

``F.compile("mpmath", dps=50)`` walks ``F``'s graph node by node
(:mod:`symad.compile.interpret`) with :data:`MPMATH_TABLE`: one mpmath
implementation per primitive, the special functions of :mod:`symad.special`
included, each computed by mpmath's own function at the working precision. The
graph's constants are exact SymPy numbers and are converted at that precision
(a float written in the function, ``0.1``, is the double it always was: its
binary value, exactly).

The implementations keep NumPy's real semantics, so a graph means the same here
as in float64: a result that is not real (``log(-1)``, ``sqrt(-2)``) is nan, a
division by zero is a signed infinity (nan for ``0/0``), a pole is nan or an
infinity as SciPy gives it. Where a formula would cancel at the working
precision (``polygamma(n, a + b) - polygamma(n, a)`` for small ``b``, ``1 + W(x)``
next to ``x = -1/e``, ``erfc^-1`` of a tiny number) the entry computes with as
many extra bits as the cancellation costs, so each node's value is correct to the
working precision: the error of a result is the graph's own conditioning, not
its primitives'.

>>> import symad as sd, numpy as np, mpmath
>>> f = sd.derivative(lambda x: np.exp(np.sin(x)), 5).trace(0.5).compile("mpmath", dps=40)
>>> value = f(mpmath.mpf("0.5"))
>>> print(mpmath.nstr(value, 30))
1.18841913019349353050638962666
>>> with mpmath.workdps(60):
...     print(mpmath.nstr(mpmath.diff(lambda t: mpmath.exp(mpmath.sin(t)), mpmath.mpf("0.5"), 5), 30))
1.18841913019349353050638962666
"""

from __future__ import annotations

import mpmath
import sympy

from symad.compile.interpret import Arithmetic, number_constant, scalar_argument
from symad.compile.source import is_builtin_primitive
from symad.errors import CompileError

__all__ = ["MpmathArithmetic", "MPMATH_TABLE", "mpmath_value", "registered_entry"]

NAN = mpmath.mpf("nan")


# ---------------------------------------------------------------------------
# NumPy's real semantics on mpmath's functions
# ---------------------------------------------------------------------------


def _real(value):
    """A complex result is nan (NumPy's real functions give nan where the result is not real)."""
    if isinstance(value, mpmath.mpc):
        return value.real if value.imag == 0 else NAN
    return value


def _total(function):
    """``function`` returning nan instead of raising at a pole or outside its domain.

    A graph evaluates both branches of a ``where`` (the double-``where`` of the
    derivative rules sends the branch not taken a harmless point, but not always
    one mpmath accepts): as in NumPy, an undefined value is nan, not an exception.
    """

    def evaluate(*args):
        try:
            return _real(function(*args))
        except (ZeroDivisionError, ValueError, mpmath.NoConvergence):
            return NAN

    evaluate.__name__ = getattr(function, "__name__", "evaluate")
    return evaluate


def _divide(a, b):
    if b == 0:  # mpmath raises; IEEE gives a signed infinity, or nan for 0/0 and nan/0
        return NAN if a == 0 or mpmath.isnan(a) else mpmath.inf * mpmath.sign(a)
    return a / b


def _power(a, b):
    if a == 0 and b < 0:
        return mpmath.inf
    return mpmath.power(a, b)


def _cbrt(x):
    return mpmath.sign(x) * mpmath.cbrt(abs(x))  # the real cube root (mpmath's is the principal one)


def _extremum(choose):
    def extremum(*args):
        if any(mpmath.isnan(a) for a in args):
            return NAN  # NumPy's maximum and minimum propagate nan
        return choose(args)

    return extremum


def _logaddexp(*args):
    largest = max(args)
    if mpmath.isinf(largest):
        return largest
    return largest + mpmath.log(mpmath.fsum(mpmath.exp(a - largest) for a in args))


def _sign(x):
    return NAN if mpmath.isnan(x) else mpmath.mpf(mpmath.sign(x))


def _heaviside(x, at_zero):
    if mpmath.isnan(x):
        return NAN
    return mpmath.mpf(0) if x < 0 else mpmath.mpf(1) if x > 0 else at_zero


def _select(condition, if_true, if_false):
    return if_true if condition else if_false


# ---------------------------------------------------------------------------
# Cancelling formulas: extra bits where a difference loses them
# ---------------------------------------------------------------------------


def _cancelling_difference(first, second):
    """``first() - second()`` correct to the working precision however much the two agree.

    Computed with 20 extra bits; where the difference is smaller than the terms by
    more bits than that, again with as many more as it lost.
    """
    precision = mpmath.mp.prec
    extra = 20
    for _ in range(8):
        with mpmath.workprec(precision + extra):
            a, b = first(), second()
            difference = a - b
        if difference == 0 or not mpmath.isfinite(difference):
            break
        lost = max(mpmath.mag(a), mpmath.mag(b)) - mpmath.mag(difference)
        if lost + 10 <= extra:
            break
        extra = lost + 30
    return +difference  # rounded to the working precision


def _polygamma_difference(n, a, b):
    total = mpmath.fadd(a, b, exact=True)
    return _cancelling_difference(lambda: mpmath.polygamma(int(n), total),
                                  lambda: mpmath.polygamma(int(n), a))


def _below_branch_point(x) -> bool:
    with mpmath.workprec(mpmath.mp.prec + 20):
        return x < -mpmath.exp(-1)


def _lambertw(x):
    if _below_branch_point(x):
        return NAN
    return _lambertw_plus_one(x) - 1


def _lambertw_plus_one(x):
    """1 + W_0(x): near x = -1/e, W is near -1 and the sum cancels; extra bits keep it exact."""
    if _below_branch_point(x):
        return NAN
    return _cancelling_difference(lambda: mpmath.mpf(1), lambda: -mpmath.lambertw(x).real)


def _erfcinv(y):
    """The inverse of erfc on (0, 2), relative-accurate for tiny y (where erfinv(1 - y) is not)."""
    if not 0 <= y <= 2:
        return NAN
    if y == 0:
        return mpmath.inf
    if y == 2:
        return -mpmath.inf
    if y > 1:  # erfc(-t) = 2 - erfc(t); 2 - y is exact (Sterbenz)
        return -_erfcinv(mpmath.fsub(2, y, exact=True))
    if y > mpmath.mpf("0.1"):
        return mpmath.erfinv(mpmath.fsub(1, y, exact=True))
    # Newton on log erfc(t) = log y from the asymptotic start erfc(t) ~ exp(-t^2)/(t sqrt(pi)).
    with mpmath.workprec(mpmath.mp.prec + 20):
        log_y = mpmath.log(y)
        u = mpmath.log(2 / (mpmath.pi * y**2))
        start = mpmath.sqrt(u - mpmath.log(u)) / mpmath.sqrt(2)
        root = mpmath.findroot(
            lambda t: mpmath.log(mpmath.erfc(t)) - log_y, start, solver="newton",
            df=lambda t: -2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-t**2) / mpmath.erfc(t))
    return +root


def _erfinv(x):
    if abs(x) <= mpmath.mpf("0.5"):
        return mpmath.erfinv(x)
    if abs(x) > 1:
        return NAN
    # erfinv(x) = sign(x) erfcinv(1 - |x|); 1 - |x| is exact for |x| >= 1/2.
    return mpmath.sign(x) * _erfcinv(mpmath.fsub(1, abs(x), exact=True))


def _ndtri(p):
    return -mpmath.sqrt(2) * _erfcinv(mpmath.fmul(2, p, exact=True))


def _logit(p):
    # log(p/(1-p)) = 2 atanh(2p - 1): 2p - 1 is exact, so no cancellation near p = 1/2.
    if not 0 <= p <= 1:
        return NAN
    return 2 * mpmath.atanh(mpmath.fsub(mpmath.fmul(2, p, exact=True), 1, exact=True))


def _log_ndtr(x):
    if x > 0:  # Phi(x) = 1 - Phi(-x) rounds to 1: log1p keeps the tail's digits
        return mpmath.log1p(-mpmath.ncdf(-x))
    return mpmath.log(mpmath.ncdf(x))


def _gammaln(x):
    return mpmath.loggamma(x) if x > 0 else mpmath.log(abs(mpmath.gamma(x)))


def _spherical_jn(n, z):
    n = int(n)
    if z == 0:
        return mpmath.mpf(1 if n == 0 else 0)
    if z < 0:  # j_n(-z) = (-1)^n j_n(z)
        return (-1) ** n * _spherical_jn(n, -z)
    return mpmath.sqrt(mpmath.pi / (2 * z)) * mpmath.besselj(n + mpmath.mpf(1) / 2, z)


def _mills_excess(n, t):
    # g(t) = pdf(t)/Phi(-t) - t and its n-th derivative (mpmath differentiates numerically,
    # at extra precision of its own).
    return mpmath.diff(lambda s: mpmath.npdf(s) / mpmath.ncdf(-s) - s, t, int(n))


def _zeta(s, q):
    if s == 1:
        return mpmath.inf  # the pole, as SciPy gives it (mpmath raises)
    return mpmath.zeta(s, q)


def _elliptic_derivative(function):
    def derivative(n, m):
        return function(m) if int(n) == 0 else mpmath.diff(function, m, int(n))

    return derivative


def _sympy_evalf(head):
    """A SymPy function with no mpmath counterpart here, through SymPy's own evalf (mpmath)."""

    def evaluate(*args):
        digits = mpmath.mp.dps + 5
        exact = [sympy.Integer(int(a)) if mpmath.isint(a) else sympy.Float(a, digits) for a in args]
        value = head(*exact).evalf(digits)
        if not (value.is_Number and value.is_extended_real):
            return NAN
        return mpmath.mpf(value._to_mpmath(mpmath.mp.prec + 10)) if value.is_Float else mpmath.mpf(value)

    return evaluate


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

#: primitive name -> mpmath implementation (operands in, value out; see symad.compile.interpret).
_BY_NAME = {
    # arithmetic
    "add": lambda *terms: mpmath.fsum(terms),
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": _divide,
    "negative": lambda a: -a,
    "power": _power,
    # roots, exponentials, logarithms
    "sqrt": mpmath.sqrt,
    "cbrt": _cbrt,
    "exp": mpmath.exp,
    "exp2": lambda x: mpmath.power(2, x),
    "expm1": mpmath.expm1,
    "log": mpmath.log,
    "log2": lambda x: mpmath.log(x, 2),
    "log10": mpmath.log10,
    "log1p": mpmath.log1p,
    # trigonometric and hyperbolic
    "sin": mpmath.sin, "cos": mpmath.cos, "tan": mpmath.tan,
    "arcsin": mpmath.asin, "arccos": mpmath.acos, "arctan": mpmath.atan, "arctan2": mpmath.atan2,
    "sinh": mpmath.sinh, "cosh": mpmath.cosh, "tanh": mpmath.tanh, "sech": mpmath.sech,
    "arcsinh": mpmath.asinh, "arccosh": mpmath.acosh, "arctanh": mpmath.atanh,
    "one_minus_square": lambda x: (1 - x) * (1 + x),
    # piecewise and two-argument
    "abs": abs,
    "sign": _sign,
    "maximum": _extremum(max), "minimum": _extremum(min),
    "reduce_max": _extremum(max), "reduce_min": _extremum(min),
    "hypot": mpmath.hypot,
    "hypot_ratio": lambda a, b: _divide(a, mpmath.hypot(a, b)),
    "logaddexp": _logaddexp, "logsumexp": _logaddexp,
    "floor": mpmath.floor, "ceiling": mpmath.ceil,
    "frac": lambda x: x - mpmath.floor(x),
    "heaviside": _heaviside,
    # selection, comparison, gradient control
    "where": _select,
    "less": lambda a, b: a < b, "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b, "greater_equal": lambda a, b: a >= b,
    "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b,
    "logical_and": lambda a, b: bool(a) and bool(b), "logical_or": lambda a, b: bool(a) or bool(b),
    "logical_not": lambda a: not a,
    "stop_gradient": lambda x: x,
    # error function and the normal distribution
    "erf": mpmath.erf, "erfc": mpmath.erfc,
    "erfinv": _erfinv, "erfcinv": _erfcinv,
    "sigmoid": lambda x: 1 / (1 + mpmath.exp(-x)),
    "softplus": lambda x: mpmath.log1p(mpmath.exp(x)),
    "ndtr": mpmath.ncdf, "log_ndtr": _log_ndtr, "ndtri": _ndtri, "logit": _logit,
    "mills_excess": _mills_excess,
    "xlogy": lambda x, y: mpmath.mpf(0) if x == 0 else x * mpmath.log(y),
    "xlog1py": lambda x, y: mpmath.mpf(0) if x == 0 else x * mpmath.log1p(y),
    # gamma and beta functions
    "gamma": mpmath.gamma, "gammaln": _gammaln,
    "digamma": mpmath.digamma, "polygamma": lambda n, x: mpmath.polygamma(int(n), x),
    "polygamma_difference": _polygamma_difference,
    "beta": mpmath.beta, "betaln": lambda a, b: mpmath.log(abs(mpmath.beta(a, b))),
    "poch": mpmath.rf,
    "gammainc": lambda a, x: mpmath.gammainc(a, 0, x, regularized=True),
    "gammaincc": lambda a, x: mpmath.gammainc(a, x, mpmath.inf, regularized=True),
    "betainc": lambda a, b, x: mpmath.betainc(a, b, 0, x, regularized=True),
    # Bessel functions
    "jv": mpmath.besselj, "yv": mpmath.bessely, "iv": mpmath.besseli, "kv": mpmath.besselk,
    "spherical_jn": _spherical_jn,
    # trigonometric functions of pi x
    "sinpi": mpmath.sinpi, "cospi": mpmath.cospi, "sinc": mpmath.sincpi,
    # zeta, Lambert W, elliptic integrals
    "zeta": _zeta,
    "zeta_derivative": lambda k, s, q: mpmath.zeta(s, q, int(k)),
    "lambertw": _lambertw, "lambertw1p": _lambertw_plus_one,
    "ellipk": mpmath.ellipk, "ellipe": mpmath.ellipe,
    "elliptic_k_derivative": _elliptic_derivative(mpmath.ellipk),
    "elliptic_e_derivative": _elliptic_derivative(mpmath.ellipe),
}

#: Primitives whose values are truth values or pass a value through: no nan wrapping.
_UNWRAPPED = {"where", "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
              "logical_and", "logical_or", "logical_not", "stop_gradient"}


#: The one table the mpmath backend evaluates with: a built-in primitive's name -> its
#: mpmath implementation. Keyed by the name each primitive is registered under in
#: ``symad.primitives.PRIMITIVES`` (looked up there, so a custom primitive that happens to
#: share a name never matches; :func:`registered_entry`).
MPMATH_TABLE: dict = {name: (implementation if name in _UNWRAPPED else _total(implementation))
                      for name, implementation in _BY_NAME.items()}


def registered_entry(table: dict, primitive):
    """``table``'s entry for ``primitive`` if it is the built-in primitive of that name, else None."""
    return table.get(primitive.name) if is_builtin_primitive(primitive) else None


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------


def mpmath_value(constant) -> mpmath.mpf | bool:
    """An exact SymPy constant of a graph as an mpmath number at the working precision.

    >>> with mpmath.workdps(30):
    ...     print(mpmath_value(sympy.Rational(1, 3)), mpmath_value(sympy.sqrt(sympy.pi) / 2))
    0.333333333333333333333333333333 0.886226925452758013649083741671
    """
    exact = number_constant(constant, mpmath.mpf)
    if exact is not None:
        return exact
    value = constant.evalf(mpmath.mp.dps + 10)
    if not (value.is_Number and value.is_extended_real):
        raise CompileError(f"the graph constant {constant} is not a real number")
    return +mpmath.mpf(value._to_mpmath(mpmath.mp.prec + 30))


def _argument(value, where: str) -> mpmath.mpf:
    """One number a user passed, as an exact mpmath number (floats keep their binary value).

    A decimal string is parsed by mpmath at the working precision (``"0.7"`` is the
    decimal 0.7 to ``dps`` digits, where the float 0.7 is a double).
    """
    return scalar_argument(
        value, where, mpmath.mpf, mpmath_value,
        "the mpmath backend takes real numbers: floats, ints, mpmath.mpf, decimal strings "
        "('0.7': the decimal at full precision), fractions.Fraction, SymPy numbers, or arrays of them")


class MpmathArithmetic(Arithmetic):
    """mpmath's real numbers at ``dps`` decimal digits (``mpmath.mp``, set during each evaluation)."""

    name = "mpmath"
    table = MPMATH_TABLE

    def implementation(self, primitive):
        found = registered_entry(self.table, primitive)
        if found is None and primitive.name.startswith("sympy."):
            # A SymPy function recorded by sd.from_sympy: its class is its SymPy form.
            found = _total(_sympy_evalf(primitive._to_sympy))
        return found

    def missing(self, primitive, function_name: str) -> str:
        return (
            f"{function_name}: the mpmath backend has no implementation of the primitive "
            f"{primitive.name!r} (a custom primitive's numeric implementation works in float64 "
            "only). Write it with traceable operations (np.exp, ...) instead of @sd.primitive, "
            "so that every backend evaluates it, or evaluate with the float64 backends")

    def precision(self):
        return mpmath.workdps(self.dps)

    def constant(self, atom):
        return mpmath_value(atom)

    def argument(self, value, where: str):
        return _argument(value, where)
