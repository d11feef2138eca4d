"""Derivatives of orders 1-4 of every symad.special function against mpmath at 30 digits.

``sd.derivative(f, k)`` (Taylor mode) is evaluated on points spread over each function's domain -- small, moderate and
large arguments, not only near 1 -- and compared with mpmath's ``diffs`` of the mpmath
function, computed at 30 significant digits. The tolerance is 1e-9 relative (an exact
zero derivative must come out below 1e-14 in absolute value).

Where SciPy's own value is not accurate enough to meet that, the point would be listed
in ``SCIPY_LIMITED`` with the reason and a looser tolerance, not left out; today no point
needs it. benchmarks/special_accuracy.py measures more points and reports the table
that docs/special-functions.md shows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import mpmath as mp
import numpy as np
import pytest
import sympy

import symad as sd
import symad.special as ssp

DIGITS = 30
RTOL = 1e-9


@dataclass(frozen=True)
class Case:
    """``fn`` (through symad.special) and the same function for mpmath, or for SymPy.

    ``reference`` maps an mpf to an mpf; its derivatives come from ``mpmath.diffs``.
    ``sympy_reference`` maps a Symbol to an expression; its derivatives come from
    ``sympy.diff`` and ``evalf(30)`` -- used where ``mpmath.diffs`` is slow (Bessel
    functions of the second kind at integer orders) or unreliable (x = 1e100).
    """

    name: str
    fn: Callable
    reference: Callable | None
    points: tuple
    sympy_reference: Callable | None = None

    def __repr__(self) -> str:
        return self.name


def _ncdf_log(t):
    # log1p(-Phi(-t)) for t > 0: log(Phi(30)) is -5e-198, below 30 digits of 1
    return mp.log(mp.ncdf(t)) if t < 0 else mp.log1p(-mp.ncdf(-t))


def _spherical_j0(t):
    return mp.sinc(mp.pi * t)


CASES = [
    Case("gamma", ssp.gamma, mp.gamma, (-2.5, 0.1, 3.7, 25.0)),
    Case("gammaln", ssp.gammaln, lambda t: mp.log(abs(mp.gamma(t))), (-2.5, 0.1, 3.7, 25.0, 150.0)),
    Case("digamma", ssp.digamma, mp.digamma, (-2.5, 0.1, 3.7, 25.0)),
    Case("polygamma_2", lambda x: ssp.polygamma(2, x), lambda t: mp.polygamma(2, t), (0.1, 3.7, 25.0)),
    Case("beta_a", lambda a: ssp.beta(a, 2.5), lambda t: mp.beta(t, 2.5), (0.3, 4.0, 30.0)),
    Case("beta_b", lambda b: ssp.beta(1.5, b), lambda t: mp.beta(1.5, t), (0.3, 4.0, 30.0)),
    # |b| << a: the partial psi(a) - psi(a + b) is a series in b there (no cancellation)
    Case("betaln_small_b", lambda a: ssp.betaln(a, 1e-3), lambda t: mp.log(mp.beta(t, mp.mpf(1e-3))), (30.0, 1e5)),
    Case("beta_small_a", lambda b: ssp.beta(1e-3, b), lambda t: mp.beta(mp.mpf(1e-3), t), (1.0, 100.0)),
    Case("poch_small_m", lambda z: ssp.poch(z, 1e-3), lambda t: mp.rf(t, mp.mpf(1e-3)), (0.5, 1e3)),
    Case("betaln_a", lambda a: ssp.betaln(a, 2.5), lambda t: mp.log(mp.beta(t, 2.5)), (0.3, 4.0, 300.0)),
    Case("gammainc", lambda x: ssp.gammainc(3.5, x), lambda t: mp.gammainc(3.5, 0, t, regularized=True), (0.5, 3.5, 20.0)),
    Case("gammainc_a200", lambda x: ssp.gammainc(200.0, x), lambda t: mp.gammainc(200, 0, t, regularized=True), (150.0, 200.0, 260.0)),
    Case("gammaincc", lambda x: ssp.gammaincc(3.5, x), lambda t: mp.gammainc(3.5, t, mp.inf, regularized=True), (0.5, 3.5, 20.0)),
    Case("erfinv", ssp.erfinv, mp.erfinv, (-0.99, 0.3, 0.999999)),
    Case("erfcinv", ssp.erfcinv, lambda t: mp.erfinv(1 - t), (1e-10, 0.5, 1.7)),
    Case("ndtr", ssp.ndtr, mp.ncdf, (-10.0, 0.5, 5.0)),
    Case("log_ndtr", ssp.log_ndtr, _ncdf_log, (-40.0, -20.0, -5.0, -4.0, -1.0, 3.0)),
    Case("ndtri", ssp.ndtri, lambda t: mp.sqrt(2) * mp.erfinv(2 * t - 1), (1e-10, 0.3, 0.999)),
    Case("expit", ssp.expit, lambda t: 1 / (1 + mp.exp(-t)), (-30.0, 0.5, 20.0)),
    Case("logit", ssp.logit, lambda t: mp.log(t / (1 - t)), (1e-6, 0.3, 0.999)),
    Case("xlogy_x", lambda x: ssp.xlogy(x, 3.0), lambda t: t * mp.log(3), (0.5,)),
    Case("xlogy_y", lambda y: ssp.xlogy(2.0, y), lambda t: 2 * mp.log(t), (1e-3, 0.5, 50.0)),
    Case("xlog1py_y", lambda y: ssp.xlog1py(2.0, y), lambda t: 2 * mp.log1p(t), (-0.9, 1e-8, 50.0)),
    Case("j0", ssp.j0, lambda t: mp.besselj(0, t), (0.5, 10.0, 40.0)),
    Case("j1", ssp.j1, lambda t: mp.besselj(1, t), (0.5, 10.0, 40.0)),
    Case("jv_2.5", lambda x: ssp.jv(2.5, x), lambda t: mp.besselj(2.5, t), (0.5, 10.0, 40.0)),
    Case("y0", ssp.y0, None, (0.5, 10.0, 40.0), lambda t: sympy.bessely(0, t)),
    Case("y1", ssp.y1, None, (0.5, 10.0, 40.0), lambda t: sympy.bessely(1, t)),
    Case("yv_1.5", lambda x: ssp.yv(1.5, x), lambda t: mp.bessely(1.5, t), (0.5, 10.0, 40.0)),
    Case("i0", ssp.i0, lambda t: mp.besseli(0, t), (0.5, 10.0, 40.0)),
    Case("i1", ssp.i1, lambda t: mp.besseli(1, t), (0.5, 10.0, 40.0)),
    Case("iv_2.5", lambda x: ssp.iv(2.5, x), lambda t: mp.besseli(2.5, t), (0.5, 10.0, 40.0)),
    Case("k0", ssp.k0, None, (0.5, 10.0, 40.0), lambda t: sympy.besselk(0, t)),
    Case("k1", ssp.k1, None, (0.5, 10.0, 40.0), lambda t: sympy.besselk(1, t)),
    Case("kv_1.5", lambda x: ssp.kv(1.5, x), lambda t: mp.besselk(1.5, t), (0.5, 10.0, 40.0)),
    Case("zeta", ssp.zeta, mp.zeta, (-2.5, 0.5, 3.0, 20.0)),
    Case("zeta_hurwitz_q", lambda q: ssp.zeta(3.0, q), lambda t: mp.zeta(3, t), (0.5, 2.0, 30.0)),
    Case("lambertw", ssp.lambertw, lambda t: mp.lambertw(t).real, (-0.3, 0.0, 0.5, 1e3)),
    Case("lambertw_huge", ssp.lambertw, None, (1e100, 1e300), sympy.LambertW),
    Case("ellipk", ssp.ellipk, mp.ellipk, (-2.0, 0.0, 1e-3, 0.1, 0.3, 0.9, 0.999)),
    Case("ellipe", ssp.ellipe, mp.ellipe, (-2.0, 0.0, 1e-3, 0.1, 0.3, 0.9, 0.999)),
    Case("sinc", ssp.sinc, _spherical_j0, (0.0, 1e-3, 0.3, 7.25)),
    # Extreme magnitudes: overflow and underflow edges, huge and tiny arguments.
    Case("gamma_extreme", ssp.gamma, mp.gamma, (1e-5, 150.5, -150.5)),
    # pi x rounded would cost pi |x| 1e-16 (numpy.sinc: 4e-8 at 1e8 + 0.1): reduced exactly
    Case("sinc_large", ssp.sinc, _spherical_j0, (1 - 1e-8, 3e6 + 0.1, 1e8 + 0.1)),
    Case("gamma_near_poles", ssp.gamma, mp.gamma, (-20.3, -1.001, -0.999, 169.5)),
    Case("log_ndtr_far_tails", ssp.log_ndtr, _ncdf_log, (-1e5, -1e3, -3.9999999, 10.0, 30.0)),
    Case("jv_2.5_wide", lambda x: ssp.jv(2.5, x), lambda t: mp.besselj(2.5, t), (1e-3, 1e3)),
    Case("yv_1.5_wide", lambda x: ssp.yv(1.5, x), lambda t: mp.bessely(1.5, t), (1e-3, 1e3)),
    Case("kv_1.5_wide", lambda x: ssp.kv(1.5, x), lambda t: mp.besselk(1.5, t), (1e-3, 700.0)),
    # x < 0: the reflection formula (SciPy's psi(-1 + 1e-9) keeps 7 digits, its
    # polygamma(4, -1e5 - 0.5) none)
    Case("digamma_negative", ssp.digamma, mp.digamma, (-1 + 1e-9, -0.75, -100.5 + 1e-6)),
    Case("gammaln_negative", ssp.gammaln, lambda t: mp.log(abs(mp.gamma(t))), (-1e5 - 0.5, -1 + 1e-9)),
    Case("digamma_extreme", ssp.digamma, mp.digamma, (1e-8, 1e6)),
    Case("j0_extreme", ssp.j0, None, (1e-6, 1e4), lambda t: sympy.besselj(0, t)),
    Case("y0_extreme", ssp.y0, None, (1e-6, 1e4), lambda t: sympy.bessely(0, t)),
    Case("i0_extreme", ssp.i0, None, (1e-6, 700.0), lambda t: sympy.besseli(0, t)),
    Case("k0_extreme", ssp.k0, None, (1e-6, 700.0), lambda t: sympy.besselk(0, t)),
    Case("erfinv_extreme", ssp.erfinv, mp.erfinv, (1e-10, 1 - 2.0**-50)),
    Case("expit_extreme", ssp.expit, lambda t: 1 / (1 + mp.exp(-t)), (-700.0, 40.0)),
    Case("ellipk_extreme", ssp.ellipk, mp.ellipk, (-1e6, 1 - 1e-12)),
    Case("ellipe_extreme", ssp.ellipe, mp.ellipe, (-1e6, 1 - 1e-12)),
    Case("zeta_extreme", ssp.zeta, mp.zeta, (1 + 1e-6, -30.5, 60.0)),
    # Next to the branch point -1/e (mpmath.diffs cannot step across it: sympy's diff)
    Case("lambertw_branch_point", ssp.lambertw, None, (-0.36787944117144, -0.3678794),
         sympy.LambertW),
]

#: (case, point) -> (tolerance, why): where SciPy's value (or the derivative's intrinsic
#: conditioning in float64) does not allow 1e-9. Reported in docs/special-functions.md.
SCIPY_LIMITED: dict = {}


@functools.cache
def reference_derivatives(case: Case, point: float) -> tuple[float, ...]:
    """Derivatives of orders 0-4 at ``point`` (an exact float), computed at 30 digits.

    From ``mpmath.diffs``, a value below 1e-20 of its neighbouring orders is an exact zero
    that numerical differentiation left as noise (the odd derivatives of sinc at 0): 0.0.
    """
    if case.sympy_reference is not None:
        t = sympy.Symbol("t")
        expression = case.sympy_reference(t)
        exact_point = sympy.Float(point, 40)  # the float's exact binary value
        values = []
        for _ in range(5):
            values.append(float(expression.subs(t, exact_point).evalf(DIGITS)))
            expression = sympy.diff(expression, t)
        return tuple(values)
    with mp.workdps(DIGITS):
        values = [float(v) for v in mp.diffs(case.reference, mp.mpf(point), 4)]
    neighbours = [max(abs(v) for v in values[max(k - 1, 0):k + 2]) for k in range(5)]
    return tuple(0.0 if abs(v) < 1e-20 * n else v for v, n in zip(values, neighbours))


def relative_error(value: float, expected: float) -> float:
    """Relative error; against an exact zero, the absolute error in units of 1e-14/RTOL."""
    if expected == 0.0:
        return abs(value) * RTOL / 1e-14
    return abs(value - expected) / abs(expected)


@pytest.mark.parametrize("case", CASES, ids=repr)
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_derivatives_against_mpmath(case, order):
    points = np.array(case.points, dtype=np.float64)
    values = np.atleast_1d(sd.derivative(case.fn, order)(points))
    assert values.shape == points.shape
    for point, value in zip(case.points, values):
        expected = reference_derivatives(case, point)[order]
        tolerance, _ = SCIPY_LIMITED.get((case.name, point), (RTOL, ""))
        error = relative_error(float(value), expected)
        assert error <= tolerance, (
            f"{case.name}^({order})({point}) = {value!r}, mpmath: {expected!r} (error {error:.1e})"
        )
