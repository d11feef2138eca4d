"""``symad.special``: SciPy's special functions as differentiable primitives.

The namespace mirrors ``scipy.special``: inside a traced function
``ssp.gamma(x)`` records a node, and so does ``scipy.special.gamma(x)``
itself (SciPy's ufuncs reach symad through ``__array_ufunc__``, routed by
the ufunc object, see :data:`SCIPY_UFUNCS`). On plain numbers every function
computes numerically, like SciPy.

Each function is one row of the table below: its SymPy form (SymPy's own
class where SymPy has one, so formulas and LaTeX read as mathematicians
write them), a vectorised NumPy/SciPy implementation, and symbolic partials
written with traceable operations, so derivatives of every order are graphs
again. Rules reuse the node's own value ``out`` where that keeps higher
derivatives small and free of overflow (gamma' = out*digamma(x),
erfinv' = sqrt(pi)/2*exp(out**2), lambertw' = 1/(exp(out)*(1 + out))).

Bessel functions of integer order (``j0``, ``j1``, ``y0``, ...) are the
general-order primitive (``jv``, ``yv``, ...) with a constant order: their
derivatives involve neighbouring orders anyway (j0' = -j1, j1' = (j0 - j2)/2),
so one primitive per family keeps one rule and shares nodes between
``j0(x)`` and ``jv(0, x)``. Every order is evaluated by SciPy's general
kernel (``jv``, AMOS): its ``j0``/``y0`` (Cephes) are faster but keep only
12-13 digits at x = 1e4, where ``jv(0, x)`` keeps all 16. Orders (and
polygamma's ``n``, the shapes of the incomplete gamma and beta functions)
are operands that must be constant: differentiating w.r.t. them raises
:class:`~symad.errors.DifferentiationError`.

docs/special-functions.md lists every function, its rule and its measured
accuracy.

>>> import symad as sd, symad.special as ssp
>>> float(ssp.gamma(5.0))
24.0
>>> sd.grad(ssp.gamma).trace(0.5).formula()
gamma(x)*polygamma(0, x)
>>> import scipy.special
>>> bool(sd.grad(lambda x: scipy.special.j0(x))(1.0) == -scipy.special.j1(1.0))
True
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import mpmath
import numpy as np
import sympy
from sympy.core.expr import Expr

from symad import numpy as snp
from symad import primitives as P
from symad.errors import DifferentiationError
from symad.graph import current_builder, is_constant, is_zero_constant
from symad.ir.primitive import Primitive
# SciPy's functions by name, imported at their first call (symad.lazy_scipy): ``sc.gamma``.
from symad.lazy_scipy import SciPyFunction
from symad.lazy_scipy import special as sc
from symad.numpy.elementwise import elementwise_function
from symad.tracer import as_atoms

__all__ = [
    "SCIPY_UFUNCS", "beta", "betainc", "betaln", "digamma", "ellipe", "ellipk", "erf", "erfc",
    "erfcinv", "erfinv", "expit", "gamma", "gammainc", "gammaincc", "gammaln", "i0", "i1", "iv",
    "j0", "j1", "jn", "jv", "k0", "k1", "kv", "lambertw", "log_ndtr", "logit", "ndtr", "ndtri",
    "poch", "polygamma", "psi", "sinc", "spherical_jn", "xlog1py", "xlogy", "y0", "y1", "yv",
    "zeta", "zeta_derivative",
]

# ---------------------------------------------------------------------------
# SymPy classes for the functions SymPy has none of
# ---------------------------------------------------------------------------


class _MpmathFunction(sympy.Function):
    """A SymPy function evaluated by ``_mpmath`` (for ``evalf`` and constant folding).

    ``_latex_name`` prints it in LaTeX (both SymPy's printer and symad's use it).
    """

    _latex_name = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # So that sympy.lambdify can evaluate formulas holding it (see
        # P.NumericImplementation); _define adds the NumPy implementation of its primitive.
        cls._imp_ = staticmethod(P.NumericImplementation(cls, lambda *args: cls._mpmath(*args)))

    @staticmethod
    def _mpmath(*args):
        raise NotImplementedError

    def _eval_evalf(self, prec):
        values = [arg.evalf(mpmath.libmp.prec_to_dps(prec) + 5) for arg in self.args]
        if not all(value.is_Number for value in values):
            return None
        with mpmath.workprec(prec + 20):
            result = self._mpmath(*(mpmath.mpf(str(value)) for value in values))
        if isinstance(result, mpmath.mpc):
            return None
        return Expr._from_mpmath(result, prec)

    def _latex(self, printer, exp=None):
        arguments = ", ".join(printer._print(arg) for arg in self.args)
        text = rf"{self._latex_name}\left({arguments}\right)"
        return rf"{{{text}}}^{{{exp}}}" if exp is not None else text

    _symad_latex = _latex


class ndtr(_MpmathFunction):  # noqa: N801 - SymPy function classes are lower case
    """The standard normal distribution function Phi(x), printed as Phi(x)."""

    _latex_name = r"\Phi"
    _mpmath = staticmethod(mpmath.ncdf)

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sympy.exp(-(x**2) / 2) / sympy.sqrt(2 * sympy.pi)

    def _eval_rewrite_as_erf(self, x, **kwargs):
        return (1 + sympy.erf(x / sympy.sqrt(2))) / 2


class log_ndtr(_MpmathFunction):  # noqa: N801
    """log(Phi(x)), evaluated without underflow for very negative x."""

    _latex_name = r"\log\Phi"
    _mpmath = staticmethod(lambda x: mpmath.log(mpmath.ncdf(x)))

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sympy.exp(-(x**2) / 2 - self) / sympy.sqrt(2 * sympy.pi)


class ndtri(_MpmathFunction):  # noqa: N801
    """The inverse of Phi: the standard normal quantile function."""

    _latex_name = r"\Phi^{-1}"
    _mpmath = staticmethod(lambda p: mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1))

    def fdiff(self, argindex=1):
        return sympy.sqrt(2 * sympy.pi) * sympy.exp(self**2 / 2)


class logit(_MpmathFunction):  # noqa: N801
    """log(p / (1 - p)), the inverse of the logistic function."""

    _latex_name = r"\operatorname{logit}"
    _mpmath = staticmethod(lambda p: mpmath.log(p / (1 - p)))

    def fdiff(self, argindex=1):
        p = self.args[0]
        return 1 / (p * (1 - p))


class xlogy(_MpmathFunction):  # noqa: N801
    """x*log(y), and 0 where x = 0 (whatever y)."""

    _latex_name = r"\operatorname{xlogy}"
    _mpmath = staticmethod(lambda x, y: mpmath.mpf(0) if x == 0 else x * mpmath.log(y))

    def fdiff(self, argindex=1):
        x, y = self.args
        return sympy.log(y) if argindex == 1 else x / y


class xlog1py(_MpmathFunction):  # noqa: N801
    """x*log(1 + y), and 0 where x = 0 (whatever y)."""

    _latex_name = r"\operatorname{xlog1py}"
    _mpmath = staticmethod(lambda x, y: mpmath.mpf(0) if x == 0 else x * mpmath.log1p(y))

    def fdiff(self, argindex=1):
        x, y = self.args
        return P.sympy_log1p(y) if argindex == 1 else x / (1 + y)


class zeta_derivative(_MpmathFunction):  # noqa: N801
    """The k-th derivative of the Hurwitz zeta function in s: d^k/ds^k zeta(s, q)."""

    _mpmath = staticmethod(lambda k, s, q: mpmath.zeta(s, q, int(k)))

    def fdiff(self, argindex=1):
        k, s, q = self.args
        if argindex == 2:
            return self.func(k + 1, s, q)
        raise sympy.core.function.ArgumentIndexError(self, argindex)

    def _latex(self, printer, exp=None):
        k, s, q = self.args
        arguments = printer._print(s) if q == 1 else f"{printer._print(s)}, {printer._print(q)}"
        text = rf"\zeta^{{({printer._print(k)})}}\left({arguments}\right)"
        return rf"{{{text}}}^{{{exp}}}" if exp is not None else text

    _symad_latex = _latex


# The classes stay reachable under these names; the module names ndtr, logit, ... are the
# traceable functions of the table below.
sympy_ndtr, sympy_log_ndtr, sympy_ndtri, sympy_logit = ndtr, log_ndtr, ndtri, logit
sympy_xlogy, sympy_xlog1py, sympy_zeta_derivative = xlogy, xlog1py, zeta_derivative

# ---------------------------------------------------------------------------
# Vectorised implementations SciPy has no single function for
# ---------------------------------------------------------------------------


def _scalar_if_0d(value):
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _is_scalar_order(order, value) -> bool:
    return np.ndim(order) == 0 and float(order) == value


def _kv(v, x):
    """``scipy.special.kv``, which underflows to 0 well before K_v does (kv(1, 700) is 0,
    K_1(700) is 4.7e-306); the scaled kve(v, x)*exp(-x) covers that range."""
    with np.errstate(all="ignore"):
        values = sc.kv(v, x)
        underflowed = (values == 0) & (np.asarray(x) > 0)
        if np.any(underflowed):
            values = np.where(underflowed, sc.kve(v, x) * np.exp(-np.asarray(x)), values)
    return _scalar_if_0d(values)


def _branch_point_series() -> np.ndarray:
    """Coefficients of 1 + W_0(x) = sum_k mu_k p**k, p = sqrt(2(e x + 1)) (Corless et al. 1996,
    eq. 4.22), exact fractions rounded once: mu_1 = 1, mu_2 = -1/3, mu_3 = 11/72, ..."""
    from fractions import Fraction

    mu, alpha = [Fraction(-1), Fraction(1)], [Fraction(2), Fraction(-1)]
    for k in range(2, _BRANCH_TERMS):
        alpha.append(sum((mu[j] * mu[k + 1 - j] for j in range(2, k)), Fraction(0)))
        mu.append(Fraction(k - 1, k + 1) * (mu[k - 2] / 2 + alpha[k - 2] / 4)
                  - alpha[k] / 2 - mu[k - 1] / (k + 1))
    return np.array([float(c) for c in mu[1:]])


# Near the branch point -1/e, SciPy's lambertw stops iterating at a relative step of 1e-8:
# W keeps 10 digits and 1 + W, which W' = 1/(e^W (1 + W)) divides by, only 3 at
# x = -1/e + 2e-15. There 1 + W is the series in p = sqrt(2(e x + 1)) instead, with e x + 1
# = e (x + 1/e) formed without cancellation (1/e as a sum of two floats: x + 1/e_hi is exact,
# Sterbenz). For p < 0.4 (x < -0.338) 32 terms are exact to below 1e-19; above, SciPy's
# W is exact to 1e-16 and so is 1 + W.
_BRANCH_TERMS = 33
_BRANCH_SERIES = _branch_point_series()
with mpmath.workdps(40):
    _INV_E_HI = float(mpmath.exp(-1))
    _INV_E_LO = float(mpmath.exp(-1) - mpmath.mpf(_INV_E_HI))
_BRANCH_RADIUS = 0.4


def _lambertw_1p_impl(x):
    """1 + W_0(x) on x >= -1/e (nan below), accurate to the last bits next to -1/e too."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        distance = (x + _INV_E_HI) + _INV_E_LO  # x + 1/e
        p = np.sqrt(2 * np.e * distance)  # nan below -1/e
        series = np.zeros_like(p)
        for coefficient in _BRANCH_SERIES[::-1]:
            series = (series + coefficient) * p
        far = 1 + sc.lambertw(np.where(p < _BRANCH_RADIUS, 0.0, x), 0).real
        return _scalar_if_0d(np.where(np.isnan(p) | (p < _BRANCH_RADIUS), series, far))


def _lambertw_real(x):
    """The principal branch W_0 on its real domain x >= -1/e; nan below it."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        near = (x + _INV_E_HI) + _INV_E_LO < _BRANCH_RADIUS**2 / (2 * np.e)
        w = np.where(near, _lambertw_1p_impl(np.where(near, x, 0.0)) - 1,
                     sc.lambertw(np.where(near, 0.0, x), 0).real)
        return _scalar_if_0d(np.where((x + _INV_E_HI) + _INV_E_LO >= 0, w, np.nan))


def _zeta_impl(s, q):
    # SciPy's Hurwitz zeta covers s >= 1 only; its Riemann zeta covers every real s.
    if _is_scalar_order(q, 1):
        return sc.zeta(s)
    return sc.zeta(s, q)


def _mpmath_zeta_derivative(k, s, q) -> float:
    with mpmath.workdps(30):
        try:
            return float(mpmath.zeta(s, q, int(k)))
        except (ValueError, ZeroDivisionError):  # the pole at s = 1, or q <= 0
            return float("nan")


_zeta_derivative_ufunc = np.frompyfunc(_mpmath_zeta_derivative, 3, 1)


def _zeta_derivative_impl(k, s, q):
    # No SciPy function computes zeta's derivatives in s; mpmath does, one point at a time.
    return _scalar_if_0d(np.asarray(_zeta_derivative_ufunc(k, s, q), dtype=np.float64))


def _spherical_jn_impl(n, z):
    return sc.spherical_jn(np.asarray(n, dtype=np.int64), z)


# ---------------------------------------------------------------------------
# mpmath implementations (the "mpmath" backend's spellings, and the interval backend's
# point values): NumPy's real semantics, and as many extra bits as a cancellation costs
# ---------------------------------------------------------------------------

_NAN = mpmath.mpf("nan")


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


def _mp_polygamma_difference(n, a, b):
    total = mpmath.fadd(a, b, exact=True)
    return _cancelling_difference(lambda: mpmath.polygamma(int(n), total),
                                  lambda: mpmath.polygamma(int(n), a))


def _below_branch_point(x) -> bool:
    with mpmath.workprec(mpmath.mp.prec + 20):
        return x < -mpmath.exp(-1)


def _mp_lambertw(x):
    if _below_branch_point(x):
        return _NAN
    return _mp_lambertw_plus_one(x) - 1


def _mp_lambertw_plus_one(x):
    """1 + W_0(x): near x = -1/e, W is near -1 and the sum cancels; extra bits keep it exact."""
    if _below_branch_point(x):
        return _NAN
    return _cancelling_difference(lambda: mpmath.mpf(1), lambda: -mpmath.lambertw(x).real)


def _mp_erfcinv(y):
    """The inverse of erfc on (0, 2), relative-accurate for tiny y (where erfinv(1 - y) is not)."""
    if not 0 <= y <= 2:
        return _NAN
    if y == 0:
        return mpmath.inf
    if y == 2:
        return -mpmath.inf
    if y > 1:  # erfc(-t) = 2 - erfc(t); 2 - y is exact (Sterbenz)
        return -_mp_erfcinv(mpmath.fsub(2, y, exact=True))
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


def _mp_erfinv(x):
    if abs(x) <= mpmath.mpf("0.5"):
        return mpmath.erfinv(x)
    if abs(x) > 1:
        return _NAN
    # erfinv(x) = sign(x) erfcinv(1 - |x|); 1 - |x| is exact for |x| >= 1/2.
    return mpmath.sign(x) * _mp_erfcinv(mpmath.fsub(1, abs(x), exact=True))


def _mp_ndtri(p):
    return -mpmath.sqrt(2) * _mp_erfcinv(mpmath.fmul(2, p, exact=True))


def _mp_logit(p):
    # log(p/(1-p)) = 2 atanh(2p - 1): 2p - 1 is exact, so no cancellation near p = 1/2.
    if not 0 <= p <= 1:
        return _NAN
    return 2 * mpmath.atanh(mpmath.fsub(mpmath.fmul(2, p, exact=True), 1, exact=True))


def _mp_log_ndtr(x):
    if x > 0:  # Phi(x) = 1 - Phi(-x) rounds to 1: log1p keeps the tail's digits
        return mpmath.log1p(-mpmath.ncdf(-x))
    return mpmath.log(mpmath.ncdf(x))


def _mp_gammaln(x):
    return mpmath.loggamma(x) if x > 0 else mpmath.log(abs(mpmath.gamma(x)))


def _mp_spherical_jn(n, z):
    n = int(n)
    if z == 0:
        return mpmath.mpf(1 if n == 0 else 0)
    if z < 0:  # j_n(-z) = (-1)^n j_n(z)
        return (-1) ** n * _mp_spherical_jn(n, -z)
    return mpmath.sqrt(mpmath.pi / (2 * z)) * mpmath.besselj(n + mpmath.mpf(1) / 2, z)


def _mp_mills_excess(n, t):
    # g(t) = pdf(t)/Phi(-t) - t and its n-th derivative (mpmath differentiates numerically,
    # at extra precision of its own).
    return mpmath.diff(lambda s: mpmath.npdf(s) / mpmath.ncdf(-s) - s, t, int(n))


def _mp_zeta(s, q):
    if s == 1:
        return mpmath.inf  # the pole, as SciPy gives it (mpmath raises)
    return mpmath.zeta(s, q)


def _mp_elliptic_derivative(function):
    def derivative(n, m):
        return function(m) if int(n) == 0 else mpmath.diff(function, m, int(n))

    return derivative


def _iv_beta(a, b):
    return mpmath.iv.gamma(a) * mpmath.iv.gamma(b) / mpmath.iv.gamma(a + b)



# ---------------------------------------------------------------------------
# Partials that do not exist: constant operands
# ---------------------------------------------------------------------------


def _is_held_constant(operand) -> bool:
    """True for a constant atom or an ``sd.stop_gradient`` node: its derivative is zero."""
    atom = as_atoms(operand)[()]
    if is_constant(atom):
        return True
    builder = current_builder()
    node = builder.node_of(atom) if builder is not None else None
    return node is not None and node.primitive is P.stop_gradient_p


def _constant_operand(function: str, index: int, argument: str, why: str) -> Callable:
    """A partial rule for an operand that must be constant: zero if it is, else a clear error."""

    def rule(out, *operands):
        if _is_held_constant(operands[index]):
            return None
        raise DifferentiationError(
            f"{function}: symad cannot differentiate w.r.t. the argument {argument} "
            f"({why}). Pass {argument} as a number, wrap it in sd.stop_gradient, or define a "
            "custom primitive (@sd.primitive with .defpartials) that gives this partial."
        )

    return rule


_ORDER_WHY = "the order of a Bessel function is a constant parameter; only the argument is differentiated"

# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

#: SciPy ufuncs on traced values, by identity (their ``__name__`` may be a NumPy name, or
#: another SciPy name: ``jn is jv``, ``digamma is psi``), to the traceable function.
SCIPY_UFUNCS: dict = {}

SQRT_PI_OVER_2 = sympy.sqrt(sympy.pi) / 2
SQRT_2PI = sympy.sqrt(2 * sympy.pi)


def _define(
    name: str,
    arguments: str,
    sympy_form: Callable,
    numpy_impl: Callable,
    partials,
    doc: str,
    *,
    scipy_ufuncs: tuple = (),
    simplify: Callable | None = None,
    mpmath: Callable | None = None,
    interval=None,
) -> Callable:
    """Register one primitive and return its traceable function, named like SciPy's.

    ``arguments`` names the parameters ("x", "v x"): traced inputs are named after them.
    Generated NumPy code calls ``numpy_impl`` through its bound ``EXTERNALS``.
    ``mpmath`` and ``interval`` are its spellings for those backends (see
    :data:`symad.primitives.BACKENDS`).
    """
    primitive = P.register(Primitive(
        name, sympy_form, numpy_impl, partials, arity=len(arguments.split()), simplify=simplify,
        mpmath=mpmath, interval=interval))
    function = elementwise_function(primitive, name, doc)
    function.__module__ = __name__
    function.__signature__ = inspect.Signature([
        inspect.Parameter(argument, inspect.Parameter.POSITIONAL_ONLY)
        for argument in arguments.split()
    ])
    function.primitive = primitive
    if isinstance(sympy_form, type) and issubclass(sympy_form, _MpmathFunction):
        sympy_form._imp_.numpy_impl = numpy_impl  # lambdify computes as symad does
    for ufunc in scipy_ufuncs:
        SCIPY_UFUNCS[ufunc] = function
    return function


def _zero_first_operand(builder, args):
    # xlogy(0, y) = 0 for every y: derivative rules build it whenever a power is constant 1.
    return sympy.Integer(0) if is_zero_constant(args[0]) else None


# -- gamma and beta functions ----------------------------------------------------

gamma = _define(
    "gamma", "x", sympy.gamma, sc.gamma, (lambda out, x: out * digamma(x),),
    "The gamma function; gamma' = gamma(x)*digamma(x).", scipy_ufuncs=(sc.gamma,),
    mpmath=mpmath.gamma, interval=mpmath.iv.gamma)
gammaln = _define(
    "gammaln", "x", sympy.loggamma, sc.gammaln, (lambda out, x: digamma(x),),
    "log|gamma(x)|; its derivative is digamma(x) (for negative x too). Printed as "
    "SymPy's loggamma, which equals it for x > 0.", scipy_ufuncs=(sc.gammaln,),
    mpmath=_mp_gammaln, interval=("log_abs", {"of": mpmath.iv.gamma}))
@functools.cache
def _cot_derivative_polynomial(n: int) -> np.ndarray:
    """Coefficients (highest power first) of P_n with d^n/dt^n cot(t) = P_n(cot t):
    P_0 = c, P_{k+1} = -(1 + c**2) P_k'."""
    polynomial = np.polynomial.Polynomial([0, 1])
    for _ in range(n):
        polynomial = -np.polynomial.Polynomial([1, 0, 1]) * polynomial.deriv()
    return polynomial.coef[::-1].copy()


def _polygamma_impl(n, x):
    """scipy.special.polygamma (psi for n = 0), by the reflection formula for x < 0:

    psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) cot^(n)(pi x),

    with cot's argument reduced exactly (x - round(x), then by 1/2). SciPy's own values lose digits
    there: psi(-1 + 1e-9) keeps 7 (it steps through psi(x + 1) - 1/x with x + 1 rounded),
    polygamma(4, -1e5 - 0.5) none (a cancelling Hurwitz zeta).
    """
    if np.ndim(n) > 0:  # an order per point: one evaluation per distinct order
        n, x = np.broadcast_arrays(np.asarray(n), np.asarray(x, dtype=np.float64))
        result = np.full(x.shape, np.nan)
        for order in np.unique(n[np.isfinite(n)]):
            chosen = n == order
            result[chosen] = _polygamma_impl(order, x[chosen]) if order == int(order) else np.nan
        return result
    if not float(n) == int(n):
        return _scalar_if_0d(np.full(np.shape(x), np.nan))
    n = int(n)
    x = np.asarray(x, dtype=np.float64)
    direct = sc.psi(x) if n == 0 else sc.polygamma(n, x)
    reflect = (x < 0) & (x != np.round(x))
    if not np.any(reflect):
        return _scalar_if_0d(direct)
    xr = np.where(reflect, x, -0.5)
    with np.errstate(over="ignore", invalid="ignore"):
        # cot(pi r), r = x - round(x) exact in [-1/2, 1/2]; past |r| = 1/4 as
        # -tan(pi (r -+ 1/2)), exact again, so cot's zeros at half-integers stay exact zeros
        r = xr - np.round(xr)
        near_half = np.abs(r) > 0.25
        cot = np.where(near_half, -np.tan(np.pi * (r - np.copysign(0.5, r))),
                       1 / np.tan(np.pi * np.where(near_half, 0.5, r)))
        mirrored = sc.psi(1 - xr) if n == 0 else sc.polygamma(n, 1 - xr)
        reflected = (-1) ** n * mirrored - np.pi ** (n + 1) * np.polyval(_cot_derivative_polynomial(n), cot)
    return _scalar_if_0d(np.where(reflect, reflected, direct))


def _digamma_impl(x):
    return _polygamma_impl(0, x)


# The implementations are the functions above (SciPy for x >= 0), not SciPy's psi and
# polygamma, whose values for x < 0 lose digits.
digamma = _define(
    "digamma", "x", sympy.digamma, _digamma_impl, (lambda out, x: polygamma(1, x),),
    "The digamma function psi(x) = gamma'(x)/gamma(x); psi' = polygamma(1, x).",
    scipy_ufuncs=(sc.psi,),
    mpmath=mpmath.digamma, interval=("digamma", {}))
psi = digamma
polygamma = _define(
    "polygamma", "n x", sympy.polygamma, _polygamma_impl,
    (_constant_operand("symad.special.polygamma(n, x)", 0, "n", "n is the integer order of the derivative"),
     lambda out, n, x: polygamma(n + 1, x)),
    "The n-th derivative of digamma (n a constant non-negative integer); "
    "its derivative is polygamma(n + 1, x).",
    mpmath=lambda n, x: mpmath.polygamma(int(n), x), interval=("polygamma", {}))


class polygamma_difference(_MpmathFunction):  # noqa: N801
    """polygamma(n, a + b) - polygamma(n, a), without cancellation where |b| << a."""

    _mpmath = staticmethod(lambda n, a, b: mpmath.polygamma(int(n), a + b) - mpmath.polygamma(int(n), a))

    def fdiff(self, argindex=1):
        n, a, b = self.args
        if argindex == 2:
            return self.func(n + 1, a, b)
        if argindex == 3:
            return sympy.polygamma(n + 1, a + b)
        raise sympy.core.function.ArgumentIndexError(self, argindex)

    def _eval_rewrite_as_polygamma(self, n, a, b, **kwargs):
        return sympy.polygamma(n, a + b) - sympy.polygamma(n, a)

    def _latex(self, printer, exp=None):
        n, a, b = (printer._print(arg) for arg in self.args)
        text = rf"\left(\psi^{{({n})}}\left({a} + {b}\right) - \psi^{{({n})}}\left({a}\right)\right)"
        return rf"{text}^{{{exp}}}" if exp is not None else text

    _symad_latex = _latex


# The partials of beta, betaln and poch are differences psi(a + b) - psi(a): where |b| << a
# the two are nearly equal (psi(1e5) = 11.5, the difference 1e-8 for b = 1e-3) and the
# subtraction kept 7 digits. There the difference is the Taylor series in b instead,
# sum_k polygamma(n + k, a) b**k / k!, whose terms shrink like (b/a)**k: 20 terms for
# |b| <= a/10 (a > 0, the series' radius being a, the distance to the pole at 0).
_DIFFERENCE_TERMS = 20
_DIFFERENCE_RATIO = 0.1


def _polygamma_difference_impl(n, a, b):
    n = int(n)
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    with np.errstate(all="ignore"):
        by_series = (a > 0) & (np.abs(b) <= _DIFFERENCE_RATIO * a)
        a_series = np.where(by_series, a, 1.0)
        b_series = np.where(by_series, b, 0.0)
        series = np.zeros(a.shape)
        term = np.ones(a.shape)
        for k in range(1, _DIFFERENCE_TERMS + 1):
            term = term * b_series / k
            series = series + sc.polygamma(n + k, a_series) * term
        direct = sc.polygamma(n, a + b) - sc.polygamma(n, a)
        return _scalar_if_0d(np.where(by_series, series, direct))


_polygamma_difference = _define(
    "polygamma_difference", "n a b", polygamma_difference, _polygamma_difference_impl,
    (_constant_operand("polygamma_difference(n, a, b)", 0, "n", "n is the order of the derivative"),
     lambda out, n, a, b: _polygamma_difference(n + 1, a, b),
     lambda out, n, a, b: polygamma(n + 1, a + b)),
    "polygamma(n, a + b) - polygamma(n, a), by its series in b where |b| <= a/10.",
    mpmath=_mp_polygamma_difference, interval=("corners", {"domain": "polygamma_difference"}))

beta = _define(
    "beta", "a b", sympy.beta, sc.beta,
    (lambda out, a, b: -out * _polygamma_difference(0, a, b),
     lambda out, a, b: -out * _polygamma_difference(0, b, a)),
    "The beta function B(a, b) = gamma(a)gamma(b)/gamma(a + b); its partials are "
    "B (digamma(a) - digamma(a + b)) and the same in b.", scipy_ufuncs=(sc.beta,),
    mpmath=mpmath.beta, interval=_iv_beta)
betaln = _define(
    "betaln", "a b", lambda a, b: sympy.log(sympy.beta(a, b)), sc.betaln,
    (lambda out, a, b: -_polygamma_difference(0, a, b),
     lambda out, a, b: -_polygamma_difference(0, b, a)),
    "log|B(a, b)|, without the overflow of beta.", scipy_ufuncs=(sc.betaln,),
    mpmath=lambda a, b: mpmath.log(abs(mpmath.beta(a, b))), interval=("log_abs", {"of": _iv_beta}))


# 1/(12 a) - 1/(360 a^3) + ...: log gamma(a) - Stirling's formula, to 1e-20 for a >= 1000.
_STIRLING_SERIES = ((1, sympy.Rational(1, 12)), (3, sympy.Rational(-1, 360)),
                    (5, sympy.Rational(1, 1260)), (7, sympy.Rational(-1, 1680)))
_LARGE_SHAPE = 1000


def _gamma_density(a, x):
    """x**(a-1) exp(-x) / gamma(a), the derivative of gammainc(a, x) in x.

    In logarithms: x**(a-1) and gamma(a) overflow separately for a past ~170 while their
    ratio does not. For a >= 1000 the logarithm (a-1) log x - x - log gamma(a) is a
    difference of numbers of size a log a around a result of size 1 (1e-9 lost at
    a = 1e6); there it is a (log1p(t) - t) - log1p(t) - log(2 pi a)/2 - stirling(a) with
    t = (x - a)/a (x - a exact), whose terms are of the size of the result. The double
    ``where`` keeps the branch not taken finite.
    """
    large = a >= _LARGE_SHAPE
    a_large = snp.where(large, a, _LARGE_SHAPE)
    t = (x - a_large) / a_large
    stirling = sum(coefficient / a_large**power for power, coefficient in _STIRLING_SERIES)
    log_large = (a_large * (snp.log1p(t) - t) - snp.log1p(t)
                 - snp.log(2 * sympy.pi * a_large) / 2 - stirling)
    a_small = snp.where(large, 1, a)
    log_small = xlogy(a_small - 1, x) - x - gammaln(a_small)
    return snp.exp(snp.where(large, log_large, log_small))


_SHAPE_WHY = ("the derivative of the regularised incomplete gamma function w.r.t. its shape "
              "has no closed form that SciPy evaluates")
gammainc = _define(
    "gammainc", "a x", lambda a, x: sympy.lowergamma(a, x) / sympy.gamma(a), sc.gammainc,
    (_constant_operand("scipy.special.gammainc(a, x)", 0, "a", _SHAPE_WHY),
     lambda out, a, x: _gamma_density(a, x)),
    "The regularised lower incomplete gamma function P(a, x) = lowergamma(a, x)/gamma(a); "
    "differentiable w.r.t. x (a must be constant).", scipy_ufuncs=(sc.gammainc,),
    mpmath=lambda a, x: mpmath.gammainc(a, 0, x, regularized=True),
    interval=("corners", {"domain": "incomplete_gamma"}))
gammaincc = _define(
    "gammaincc", "a x", lambda a, x: sympy.uppergamma(a, x) / sympy.gamma(a), sc.gammaincc,
    (_constant_operand("scipy.special.gammaincc(a, x)", 0, "a", _SHAPE_WHY),
     lambda out, a, x: -_gamma_density(a, x)),
    "The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x); "
    "differentiable w.r.t. x (a must be constant).", scipy_ufuncs=(sc.gammaincc,),
    mpmath=lambda a, x: mpmath.gammainc(a, x, mpmath.inf, regularized=True),
    interval=("corners", {"domain": "incomplete_gamma"}))

_BETA_SHAPE_WHY = ("the derivative of the regularised incomplete beta function w.r.t. its "
                   "shapes has no closed form that SciPy evaluates")
betainc = _define(
    "betainc", "a b x", lambda a, b, x: sympy.betainc_regularized(a, b, 0, x), sc.betainc,
    (_constant_operand("scipy.special.betainc(a, b, x)", 0, "a", _BETA_SHAPE_WHY),
     _constant_operand("scipy.special.betainc(a, b, x)", 1, "b", _BETA_SHAPE_WHY),
     # x**(a-1) (1-x)**(b-1) / B(a, b), in logarithms (each factor alone may overflow).
     lambda out, a, b, x: snp.exp(xlogy(a - 1, x) + xlog1py(b - 1, -x) - betaln(a, b))),
    "The regularised incomplete beta function I_x(a, b); differentiable w.r.t. x (a and b "
    "must be constant).", scipy_ufuncs=(sc.betainc,),
    mpmath=lambda a, b, x: mpmath.betainc(a, b, 0, x, regularized=True),
    interval=("corners", {"domain": "incomplete_beta"}))
poch = _define(
    "poch", "z m", sympy.RisingFactorial, sc.poch,
    (lambda out, z, m: out * _polygamma_difference(0, z, m),
     lambda out, z, m: out * digamma(z + m)),
    "The rising factorial (Pochhammer symbol) gamma(z + m)/gamma(z).", scipy_ufuncs=(sc.poch,),
    mpmath=mpmath.rf, interval=lambda z, m: mpmath.iv.gamma(z + m) / mpmath.iv.gamma(z))

# -- error function and the normal distribution ----------------------------------

erf = snp.erf
erfc = snp.erfc
expit = snp.sigmoid
erfinv = _define(
    "erfinv", "x", sympy.erfinv, sc.erfinv,
    (lambda out, x: SQRT_PI_OVER_2 * snp.exp(out**2),),
    "The inverse error function; erfinv' = sqrt(pi)/2*exp(erfinv(x)**2).",
    scipy_ufuncs=(sc.erfinv,),
    mpmath=_mp_erfinv, interval=("monotone", {"lower": -1, "upper": 1}))
erfcinv = _define(
    "erfcinv", "x", sympy.erfcinv, sc.erfcinv,
    (lambda out, x: -SQRT_PI_OVER_2 * snp.exp(out**2),),
    "The inverse complementary error function.", scipy_ufuncs=(sc.erfcinv,),
    mpmath=_mp_erfcinv, interval=("monotone", {"increasing": False, "lower": 0, "upper": 2}))
ndtr = _define(
    "ndtr", "x", ndtr, sc.ndtr, (lambda out, x: snp.exp(-(x**2) / 2) / SQRT_2PI,),
    "The standard normal distribution function Phi(x).", scipy_ufuncs=(sc.ndtr,),
    mpmath=mpmath.ncdf, interval=("monotone", {}))
_TAIL = -4
_TAIL_TERMS = 40  # the continued fraction's relative error at x = -4 is 1e-17


def _mills_excess_impl(n, t):
    """The n-th derivative of g(t) = 1/(t + 2/(t + 3/(t + ...))), 40 levels, for t >= 4.

    g = 1/R(t) - t, with R the Mills ratio Phi(-t)/pdf(t). The derivatives come from
    truncated Taylor arithmetic through the levels (y = k/(t + z) as a series in t), so
    none is a difference of nearly equal numbers.
    """
    n = int(n)
    t = np.asarray(t, dtype=np.float64)
    z = np.zeros((n + 1,) + t.shape)  # Taylor coefficients of the level below
    for k in range(_TAIL_TERMS, 0, -1):
        denominator = z.copy()
        denominator[0] += t
        if n >= 1:
            denominator[1] += 1.0
        y = np.empty_like(z)
        y[0] = k / denominator[0]
        for order in range(1, n + 1):
            y[order] = -sum(denominator[j] * y[order - j] for j in range(1, order + 1)) / denominator[0]
        z = y
    return _scalar_if_0d(z[n] * float(np.prod(np.arange(1, n + 1))))


class mills_excess(_MpmathFunction):  # noqa: N801
    """The n-th derivative of 1/R(t) - t, R(t) = Phi(-t)/pdf(t) the Mills ratio."""

    _mpmath = staticmethod(lambda n, t: mpmath.diff(
        lambda s: mpmath.npdf(s) / mpmath.ncdf(-s) - s, t, int(n)))

    def _latex(self, printer, exp=None):
        n, t = self.args
        text = rf"g^{{({printer._print(n)})}}\left({printer._print(t)}\right)"
        return rf"{{{text}}}^{{{exp}}}" if exp is not None else text

    _symad_latex = _latex


_mills_excess = _define(
    "mills_excess", "n t", mills_excess, _mills_excess_impl,
    (_constant_operand("mills_excess(n, t)", 0, "n", "n is the order of the derivative"),
     lambda out, n, t: _mills_excess(n + 1, t)),
    "d^n/dt^n (1/R(t) - t), R the Mills ratio, for t >= 4 (log_ndtr's far tail).",
    mpmath=_mp_mills_excess,
    interval=("none", {"why": "the derivatives of log_ndtr's far tail, x < -4"}))


def _log_ndtr_partial(out, x):
    """log_ndtr' = pdf(x)/Phi(x) =: h(x).

    Away from the far left tail, as one exponential: pdf and Phi both underflow for
    x < -38, their ratio (about -x) does not. In the tail (x < -4) that form is exact at
    order 1 but its derivatives are not: h' = -h (x + h), and x + h (about -1/x) would be
    the difference of two nearly equal numbers, losing a factor x**2 per order. There
    h = t + g(t), t = -x, with g = x + h the continued fraction of the Mills ratio, a
    primitive whose derivatives are computed without cancellation. The double ``where``
    keeps each branch finite where it is not taken.
    """
    tail = x < _TAIL
    t = -snp.where(tail, x, _TAIL)
    x_body = snp.where(tail, 0, x)
    body = snp.exp(-(x_body**2) / 2 - snp.where(tail, 0, out)) / SQRT_2PI
    return snp.where(tail, t + _mills_excess(0, t), body)


log_ndtr = _define(
    "log_ndtr", "x", log_ndtr, sc.log_ndtr,
    (_log_ndtr_partial,),
    "log(Phi(x)), accurate for very negative x; its derivative is pdf(x)/Phi(x).",
    scipy_ufuncs=(sc.log_ndtr,),
    mpmath=_mp_log_ndtr, interval=("monotone", {}))
ndtri = _define(
    "ndtri", "p", ndtri, sc.ndtri, (lambda out, p: SQRT_2PI * snp.exp(out**2 / 2),),
    "The standard normal quantile function, the inverse of ndtr.", scipy_ufuncs=(sc.ndtri,),
    mpmath=_mp_ndtri, interval=("monotone", {"lower": 0, "upper": 1}))
logit = _define(
    "logit", "p", logit, sc.logit, (lambda out, p: 1 / (p * (1 - p)),),
    "log(p/(1 - p)), the inverse of expit.", scipy_ufuncs=(sc.logit,),
    mpmath=_mp_logit, interval=("monotone", {"lower": 0, "upper": 1}))
xlogy = _define(
    "xlogy", "x y", xlogy, sc.xlogy,
    (lambda out, x, y: snp.log(y), lambda out, x, y: x / y),
    "x*log(y), 0 where x = 0.", scipy_ufuncs=(sc.xlogy,), simplify=_zero_first_operand,
    mpmath=lambda x, y: mpmath.mpf(0) if x == 0 else x * mpmath.log(y), interval=("xlogy", {}))
xlog1py = _define(
    "xlog1py", "x y", xlog1py, sc.xlog1py,
    (lambda out, x, y: snp.log1p(y), lambda out, x, y: x / (1 + y)),
    "x*log(1 + y), 0 where x = 0.", scipy_ufuncs=(sc.xlog1py,), simplify=_zero_first_operand,
    mpmath=lambda x, y: mpmath.mpf(0) if x == 0 else x * mpmath.log1p(y), interval=("xlog1py", {}))

# -- Bessel functions (one primitive per family, the order a constant operand) -----

jv = _define(
    "jv", "v x", sympy.besselj, sc.jv,
    (_constant_operand("scipy.special.jv(v, x)", 0, "v", _ORDER_WHY),
     lambda out, v, x: (jv(v - 1, x) - jv(v + 1, x)) / 2),
    "Bessel function of the first kind J_v(x); J_v' = (J_{v-1} - J_{v+1})/2.",
    scipy_ufuncs=(sc.jv,),
    mpmath=mpmath.besselj, interval=("bessel_j", {}))
yv = _define(
    "yv", "v x", sympy.bessely, sc.yv,
    (_constant_operand("scipy.special.yv(v, x)", 0, "v", _ORDER_WHY),
     lambda out, v, x: (yv(v - 1, x) - yv(v + 1, x)) / 2),
    "Bessel function of the second kind Y_v(x); Y_v' = (Y_{v-1} - Y_{v+1})/2.",
    scipy_ufuncs=(sc.yv,),
    mpmath=mpmath.bessely,
    interval=("none", {"why": "Bessel functions of the second kind are not enclosed"}))
iv = _define(
    "iv", "v x", sympy.besseli, sc.iv,
    (_constant_operand("scipy.special.iv(v, x)", 0, "v", _ORDER_WHY),
     lambda out, v, x: (iv(v - 1, x) + iv(v + 1, x)) / 2),
    "Modified Bessel function of the first kind I_v(x); I_v' = (I_{v-1} + I_{v+1})/2.",
    scipy_ufuncs=(sc.iv,),
    mpmath=mpmath.besseli, interval=("bessel_i", {}))
kv = _define(
    "kv", "v x", sympy.besselk, _kv,
    (_constant_operand("scipy.special.kv(v, x)", 0, "v", _ORDER_WHY),
     lambda out, v, x: -(kv(v - 1, x) + kv(v + 1, x)) / 2),
    "Modified Bessel function of the second kind K_v(x); K_v' = -(K_{v-1} + K_{v+1})/2.",
    scipy_ufuncs=(sc.kv,),
    mpmath=mpmath.besselk, interval=("monotone", {"increasing": False, "lower": 0}))
jn = jv


def _fixed_order(family: Callable, order: int, scipy_name: str) -> Callable:
    def function(x):
        return family(order, x)

    function.__name__ = function.__qualname__ = scipy_name
    function.__doc__ = f"``{family.__name__}({order}, x)``, as ``scipy.special.{scipy_name}``."
    SCIPY_UFUNCS[getattr(sc, scipy_name)] = function
    return function


j0, j1 = _fixed_order(jv, 0, "j0"), _fixed_order(jv, 1, "j1")
y0, y1 = _fixed_order(yv, 0, "y0"), _fixed_order(yv, 1, "y1")
i0, i1 = _fixed_order(iv, 0, "i0"), _fixed_order(iv, 1, "i1")
k0, k1 = _fixed_order(kv, 0, "k0"), _fixed_order(kv, 1, "k1")
SCIPY_UFUNCS[sc.yn] = yv  # integer-order spellings: the same families
SCIPY_UFUNCS[sc.kn] = kv

spherical_jn = _define(
    "spherical_jn", "n z", sympy.jn, _spherical_jn_impl,
    (_constant_operand("symad.special.spherical_jn(n, z)", 0, "n", "the order is a constant integer"),
     # No division by z: exact at z = 0, where j_n'(0) is 0 (or 1/3 for n = 1).
     lambda out, n, z: (n * spherical_jn(n - 1, z) - (n + 1) * spherical_jn(n + 1, z))
     / (2 * n + 1)),
    "Spherical Bessel function j_n(z) (a constant integer order n >= 0).",
    mpmath=_mp_spherical_jn,
    interval=("derivative_bound", {"bound": 1}))


def _reduced(x):
    """(r, sign) with x = k + r, k = round(x) (r exact, |r| <= 1/2) and sign = (-1)**k."""
    x = np.asarray(x, dtype=np.float64)
    k = np.round(x)
    return x - k, np.where(np.fmod(k, 2) == 0, 1.0, -1.0)


def _sinpi_impl(x):
    r, sign = _reduced(x)
    return _scalar_if_0d(sign * np.sin(np.pi * r))


def _cospi_impl(x):
    r, sign = _reduced(x)
    return _scalar_if_0d(sign * np.sin(np.pi * (0.5 - np.abs(r))))  # 1/2 - |r| exact


def _sinc_impl(x):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _scalar_if_0d(np.where(x == 0, 1.0, _sinpi_impl(x) / (np.pi * x)))


class _TrigPi(_MpmathFunction):
    _trig = ""

    def _latex(self, printer, exp=None):
        text = rf"\{self._trig}\left(\pi {printer._print(self.args[0])}\right)"
        return rf"{text}^{{{exp}}}" if exp is not None else text

    _symad_latex = _latex


class sinpi(_TrigPi):  # noqa: N801
    """sin(pi x), with the argument reduced exactly (exact zeros at the integers)."""

    _trig = "sin"
    _mpmath = staticmethod(mpmath.sinpi)

    def fdiff(self, argindex=1):
        return sympy.pi * cospi(self.args[0])

    def _eval_rewrite_as_sin(self, x, **kwargs):
        return sympy.sin(sympy.pi * x)


class cospi(_TrigPi):  # noqa: N801
    """cos(pi x), with the argument reduced exactly (exact zeros at the half-integers)."""

    _trig = "cos"
    _mpmath = staticmethod(mpmath.cospi)

    def fdiff(self, argindex=1):
        return -sympy.pi * sinpi(self.args[0])

    def _eval_rewrite_as_cos(self, x, **kwargs):
        return sympy.cos(sympy.pi * x)


_sinpi = _define("sinpi", "x", sinpi, _sinpi_impl, (lambda out, x: sympy.pi * _cospi(x),),
                 "sin(pi x), the argument reduced exactly.",
                 mpmath=mpmath.sinpi, interval=lambda x: mpmath.iv.sin(mpmath.iv.pi * x))
_cospi = _define("cospi", "x", cospi, _cospi_impl, (lambda out, x: -sympy.pi * _sinpi(x),),
                 "cos(pi x), the argument reduced exactly.",
                 mpmath=mpmath.cospi, interval=lambda x: mpmath.iv.cos(mpmath.iv.pi * x))
_SINC_SMALL = sympy.Rational(1, 2)


def _sinc_partial(out, x):
    """sinc'(x): -pi j_1(pi x) for |x| < 1/2, (cos(pi x) - sinc(x))/x beyond.

    sinc(x) is the spherical Bessel function j_0(pi x): near 0 its derivatives are those
    of j_n, finite and free of cancellation where the quotient's are 0/0. Far from 0 the
    rounding of pi x (NumPy's sinc and j_n both round it) costs pi |x| 1e-16 relative
    -- 3e-9 at x = 3e6 + 0.1 --, so there the derivative is written with sin(pi x) and
    cos(pi x) of the exactly reduced argument. Double ``where``: each branch sees a safe x.
    """
    small = snp.abs(x) < _SINC_SMALL
    x_small = snp.where(small, x, 0)
    x_large = snp.where(small, 1, x)
    return snp.where(small, -sympy.pi * spherical_jn(1, sympy.pi * x_small),
                     (_cospi(x_large) - snp.where(small, 0, out)) / x_large)


sinc = _define(
    "sinc", "x", lambda x: sympy.sinc(sympy.pi * x), _sinc_impl,
    (_sinc_partial,),
    "NumPy's normalised sinc, sin(pi x)/(pi x) (``numpy.sinc``, re-exported by "
    "scipy.special), with pi x reduced exactly (numpy.sinc rounds it: 4e-8 off at "
    "x = 1e8 + 0.1); printed as SymPy's sinc(pi*x), SymPy's sinc being unnormalised.",
    mpmath=mpmath.sincpi,
    interval=("sinc", {}))


#: NumPy array functions (``__array_function__``) that symad.special traces.
ARRAY_FUNCTIONS: dict = {np.sinc: sinc}
# numpy.sinc is also symad.numpy.sinc, as in NumPy's namespace; it is defined here, beside
# the special functions it is made of, and symad.numpy cannot import this module (which
# imports symad.numpy), so this module puts it there.
snp.sinc = sinc
snp.__all__.append("sinc")

# -- zeta, Lambert W, elliptic integrals -------------------------------------------

def _zeta_derivative_order_zero(builder, args):
    # zeta^(0)(s, q) is zeta(s, q) itself: the q-partial below builds it for k = 1.
    k, s, q = args
    if is_zero_constant(k):
        return builder.record(_hurwitz.primitive, (s, q))
    return None


zeta_derivative = _define(
    "zeta_derivative", "k s q", zeta_derivative, _zeta_derivative_impl,
    (_constant_operand("zeta_derivative(k, s, q)", 0, "k", "k is the order of the derivative"),
     lambda out, k, s, q: zeta_derivative(k + 1, s, q),
     # d/dq of d^k/ds^k zeta(s, q) = -s zeta^(k)(s+1, q) - k zeta^(k-1)(s+1, q)
     lambda out, k, s, q: -s * zeta_derivative(k, s + 1, q) - k * zeta_derivative(k - 1, s + 1, q)),
    "The k-th derivative in s of the Hurwitz zeta function (mpmath evaluates it; SciPy has "
    "no such function).", simplify=_zeta_derivative_order_zero,
    mpmath=lambda k, s, q: mpmath.zeta(s, q, int(k)),
    interval=("none", {"why": "the derivatives of zeta in s are not enclosed"}))
_hurwitz = _define(
    "zeta", "s q", sympy.zeta, _zeta_impl,
    (lambda out, s, q: zeta_derivative(1, s, q), lambda out, s, q: -s * _hurwitz(s + 1, q)),
    "The Hurwitz zeta function zeta(s, q); q = 1 is Riemann's.",
    mpmath=_mp_zeta, interval=("corners", {"domain": "zeta"}))
SCIPY_UFUNCS[sc._ufuncs._zeta] = _hurwitz
SCIPY_UFUNCS[sc._ufuncs._riemann_zeta] = lambda s: _hurwitz(s, 1)


def zeta(x, q=None):
    """Riemann's zeta(x), or Hurwitz's zeta(x, q), as ``scipy.special.zeta``.

    Its derivatives in x are d^k/dx^k zeta, evaluated by mpmath (SciPy has none).

    >>> import symad as sd
    >>> round(float(zeta(2.0)), 12), round(float(sd.grad(zeta)(2.0)), 12)
    (1.644934066848, -0.937548254316)
    """
    return _hurwitz(x, 1 if q is None else q)


class lambertw1p(_MpmathFunction):  # noqa: N801
    """1 + W_0(x), computed without cancellation next to the branch point x = -1/e."""

    _mpmath = staticmethod(lambda x: 1 + mpmath.lambertw(x).real)

    def fdiff(self, argindex=1):
        return 1 / (sympy.exp(self - 1) * self)

    def _eval_rewrite_as_LambertW(self, x, **kwargs):  # noqa: N802 - SymPy's spelling
        return 1 + sympy.LambertW(x)

    def _latex(self, printer, exp=None):
        text = rf"\left(1 + W\left({printer._print(self.args[0])}\right)\right)"
        return rf"{text}^{{{exp}}}" if exp is not None else text

    _symad_latex = _latex


_lambertw_1p = _define(
    "lambertw1p", "x", lambertw1p, _lambertw_1p_impl,
    (lambda out, x: 1 / (snp.exp(out - 1) * out),),
    "1 + W_0(x), the denominator of W' (accurate next to -1/e, where 1 + W is tiny).",
    mpmath=_mp_lambertw_plus_one,
    interval=("lambertw", {"at_branch_point": 0}))

lambertw = _define(
    "lambertw", "x", sympy.LambertW, _lambertw_real,
    # 1/(exp(W)(1 + W)) rather than W/(x(1 + W)): finite at x = 0, and exp(W) = x/W never
    # overflows where x does not. 1 + W is its own primitive: near -1/e, 1 + out would keep
    # only the digits of W's distance to -1 (5 at x = -1/e + 1e-15).
    (lambda out, x: 1 / (snp.exp(out) * _lambertw_1p(x)),),
    "The principal real branch W_0 of the Lambert W function, real-valued (nan below -1/e).",
    mpmath=_mp_lambertw,
    interval=("lambertw", {"at_branch_point": -1}))


def _traced_lambertw(z, k, tol):
    # scipy.special.lambertw(z, k=0, tol=1e-8) calls this ufunc with an array k.
    if np.ndim(k) != 0 or int(k) != 0:
        raise DifferentiationError(
            f"scipy.special.lambertw with branch k={np.asarray(k).tolist()}: symad traces the "
            "principal real branch k=0 only (symad.special.lambertw)")
    return lambertw(z)


SCIPY_UFUNCS[sc._ufuncs._lambertw] = _traced_lambertw
# Near m = 0 the closed forms of K' and E' below divide a difference of nearly equal
# integrals by m: 0/0 at m = 0, and each further order loses another factor 1/m (at
# m = 1e-3 the fourth derivative kept 5 digits). For |m| < 0.1 the partials are instead
# the primitives elliptic_k_derivative(n, m) and elliptic_e_derivative(n, m), the n-th
# derivatives by the Maclaurin series (48 terms: 0.1**40 is below float64's resolution
# at any order used), each differentiating to the next: one node per order.
_SERIES_RADIUS = sympy.Rational(1, 10)
_SERIES_TERMS = 48


def _maclaurin(coefficient: Callable) -> np.ndarray:
    return np.array([float(coefficient(k)) for k in range(_SERIES_TERMS)])


_K_SERIES = _maclaurin(lambda k: sympy.pi / 2 * sympy.binomial(2 * k, k) ** 2 / sympy.Integer(16) ** k)
_E_SERIES = _maclaurin(lambda k: sympy.pi / 2 * sympy.binomial(2 * k, k) ** 2 / sympy.Integer(16) ** k / (1 - 2 * k))


def _series_derivative(coefficients: np.ndarray) -> Callable:
    """``impl(n, m)``: the n-th derivative of the power series with ``coefficients``, by Horner."""

    def implementation(n, m):
        n = int(n)
        m = np.asarray(m, dtype=np.float64)
        falling = np.array([np.prod(np.arange(k - n + 1, k + 1, dtype=np.float64)) for k in range(n, len(coefficients))])
        terms = coefficients[n:] * falling
        result = np.zeros_like(m)
        for coefficient in terms[::-1]:
            result = result * m + coefficient
        return _scalar_if_0d(result)

    return implementation


class _EllipticDerivative(_MpmathFunction):
    _function = None

    @classmethod
    def _mpmath(cls, n, m):
        return mpmath.diff(cls._function, m, int(n))

    def _eval_evalf(self, prec):
        n, m = self.args
        with mpmath.workprec(prec + 20):
            value = mpmath.diff(self._function, mpmath.mpf(str(m.evalf(prec))), int(n))
        return Expr._from_mpmath(value, prec)

    def _latex(self, printer, exp=None):
        n, m = self.args
        text = rf"{self._letter}^{{({printer._print(n)})}}\left({printer._print(m)}\right)"
        return rf"{{{text}}}^{{{exp}}}" if exp is not None else text

    _symad_latex = _latex


class elliptic_k_derivative(_EllipticDerivative):  # noqa: N801
    """The n-th derivative of K(m) (used for |m| < 0.1, by its Maclaurin series)."""

    _letter = "K"
    _function = staticmethod(mpmath.ellipk)


class elliptic_e_derivative(_EllipticDerivative):  # noqa: N801
    """The n-th derivative of E(m) (used for |m| < 0.1, by its Maclaurin series)."""

    _letter = "E"
    _function = staticmethod(mpmath.ellipe)


_ORDER_OF_DERIVATIVE = "n is the order of the derivative, a constant"
_k_derivative = _define(
    "elliptic_k_derivative", "n m", elliptic_k_derivative, _series_derivative(_K_SERIES),
    (_constant_operand("elliptic_k_derivative(n, m)", 0, "n", _ORDER_OF_DERIVATIVE),
     lambda out, n, m: _k_derivative(n + 1, m)),
    "d^n K/dm^n for |m| < 0.1, by its Maclaurin series.",
    mpmath=_mp_elliptic_derivative(mpmath.ellipk), interval=("monotone", {"upper": 1}))
_e_derivative = _define(
    "elliptic_e_derivative", "n m", elliptic_e_derivative, _series_derivative(_E_SERIES),
    (_constant_operand("elliptic_e_derivative(n, m)", 0, "n", _ORDER_OF_DERIVATIVE),
     lambda out, n, m: _e_derivative(n + 1, m)),
    "d^n E/dm^n for |m| < 0.1, by its Maclaurin series.",
    mpmath=_mp_elliptic_derivative(mpmath.ellipe),
    interval=("monotone", {"increasing": False, "upper": 1}))


def _near_zero_by_series(series_derivative, closed_form):
    """A partial rule: ``series_derivative(1, m)`` for |m| < 0.1, else ``closed_form(m)``.

    Each branch sees a safe argument (the other branch's region is mapped to a harmless
    point), so that the branch not taken never puts inf or nan into the chain rule, where
    0 * nan would still be nan (the double ``where`` of JAX's FAQ).
    """

    def rule(out, m):
        small = snp.abs(m) < _SERIES_RADIUS
        m_series = snp.where(small, m, 0)
        m_closed = snp.where(small, sympy.Rational(1, 2), m)
        return snp.where(small, series_derivative(1, m_series), closed_form(m_closed))

    return rule


ellipk = _define(
    "ellipk", "m", sympy.elliptic_k, sc.ellipk,
    (_near_zero_by_series(
        _k_derivative,
        lambda m: (ellipe(m) - (1 - m) * ellipk(m)) / (2 * m * (1 - m))),),
    "The complete elliptic integral of the first kind K(m), in SciPy's (and SymPy's) "
    "parameter m = k**2; K' = (E - (1 - m)K)/(2m(1 - m)), by its series near m = 0.",
    scipy_ufuncs=(sc.ellipk,),
    mpmath=mpmath.ellipk, interval=("monotone", {"upper": 1}))
ellipe = _define(
    "ellipe", "m", sympy.elliptic_e, sc.ellipe,
    (_near_zero_by_series(
        _e_derivative,
        lambda m: (ellipe(m) - ellipk(m)) / (2 * m)),),
    "The complete elliptic integral of the second kind E(m), parameter m = k**2; "
    "E' = (E - K)/(2m), by its series near m = 0.", scipy_ufuncs=(sc.ellipe,),
    mpmath=mpmath.ellipe, interval=("monotone", {"increasing": False, "upper": 1}))

def route_scipy_ufuncs() -> None:
    """Put SciPy's ufuncs themselves into :data:`SCIPY_UFUNCS` (importing SciPy): run by
    symad.numpy the first time a ufunc that is not NumPy's meets a traced value.

    Until then the table holds the catalogue's stand-ins (:mod:`symad.lazy_scipy`), so that
    importing symad does not import SciPy.
    """
    import scipy.special

    routes = {(key.resolve() if isinstance(key, SciPyFunction) else key): function
              for key, function in SCIPY_UFUNCS.items()}
    # The SciPy ufunc named as an elementwise primitive's NumPy function (its stanza's
    # numpy_name: erf, expit, expm1, ...) computes the same mathematics: it traces as that
    # primitive, through symad.numpy's function of it.
    routes.update({
        getattr(scipy.special, function.primitive.numpy_name): function
        for name, function in vars(snp).items()
        if isinstance(getattr(function, "primitive", None), Primitive) and function.primitive.name == name
        and isinstance(getattr(scipy.special, function.primitive.numpy_name or "", None), np.ufunc)
    })
    SCIPY_UFUNCS.clear()
    SCIPY_UFUNCS.update(routes)


def scipy_ufunc_name(ufunc) -> str:
    """The name a user knows a SciPy ufunc by, ``scipy.special.gamma``, for error messages.

    >>> import scipy.special
    >>> scipy_ufunc_name(scipy.special.psi), scipy_ufunc_name(scipy.special.hyp2f1)
    ('scipy.special.psi', 'scipy.special.hyp2f1')
    """
    import scipy.special

    name = getattr(ufunc, "__name__", repr(ufunc))
    if getattr(scipy.special, name, None) is ufunc:
        return f"scipy.special.{name}"
    if getattr(scipy.special._ufuncs, name, None) is ufunc:  # behind a Python wrapper (zeta, lambertw)
        return f"scipy.special._ufuncs.{name}"
    module = getattr(ufunc, "__module__", None) or type(ufunc).__module__
    return f"{module}.{name}"


snp.register_foreign_functions(SCIPY_UFUNCS, ARRAY_FUNCTIONS, scipy_ufunc_name, load=route_scipy_ufuncs)
