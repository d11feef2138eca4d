"""Accuracy of symad.special's derivatives, orders 0-4, against mpmath over each domain.

For every function of the special-functions issue, ``sd.derivative(f, k)`` (Taylor mode,
k = 1..4; k = 0 is the value) is evaluated on points spread over the function's domain
-- tiny and huge magnitudes, the neighbourhood of poles and branch points, far tails --
and compared with a reference computed by mpmath at 40 significant digits: closed forms
where they exist (the Bessel families' binomial sums, Lambert W's polynomial recurrence),
``mpmath.diffs`` otherwise. Points where the true value is not a finite float64 number
(overflow, or a non-zero value below the smallest normal float) are left out of the maximum
and counted ("n/a").

Prints, per function and order, the worst relative error and the point where it occurs,
and exits with status 1 if any exceeds 1e-9 outside the limits listed in ``LIMITED``
(each with the reason; docs/special-functions.md states them). Run from the project root::

    python benchmarks/special_accuracy.py            # the table (about a minute)
    python benchmarks/special_accuracy.py --markdown # the same, as the docs' table
    python benchmarks/special_accuracy.py --nested   # orders by nested sd.grad (slower)

This measures accuracy, not time: no lock or quiet machine needed.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import mpmath as mp
import numpy as np
import scipy
import scipy.special as sc

import symad as sd
import symad.special as ssp

DPS = 40
TARGET = 1e-9
ORDERS = range(5)


@dataclass
class Case:
    name: str
    fn: Callable                      # x -> traced value (symad.special)
    points: tuple
    reference: Callable               # (mpf x, order k) -> mpf, the k-th derivative
    note: str = ""
    limited: dict = field(default_factory=dict)  # point -> (tolerance, why)


def by_diffs(function: Callable) -> Callable:
    """The k-th derivative of an mpmath function by ``mpmath.diffs`` (cached per point).

    Numerical differentiation is checked against itself at 20 more digits: a disagreement
    beyond 1e-20 relative (a step size unsuited to the point) raises rather than measure
    against a wrong reference.
    """
    cache: dict = {}

    def reference(x, k):
        if x not in cache:
            values = list(mp.diffs(function, x, 4))
            with mp.workdps(DPS + 20):
                check = list(mp.diffs(function, x, 4))
            for order, (a, b) in enumerate(zip(values, check)):
                scale = max(abs(v) for v in check[max(order - 1, 0):order + 2])
                if abs(a - b) > mp.mpf(1e-20) * max(abs(b), scale * mp.mpf(10) ** -10):
                    raise RuntimeError(f"unreliable mpmath.diffs at x = {x}, order {order}")
            # mpmath.diffs leaves an exact zero (odd derivatives of sinc at 0) as noise
            cache[x] = [
                0 if abs(v) < mp.mpf(10) ** -25 * max(abs(u) for u in values[max(i - 1, 0):i + 2])
                else v for i, v in enumerate(values)]
        return cache[x][k]

    return reference


def closed(function: Callable) -> Callable:
    """``function(x, k)`` computed at twice the working precision."""

    def reference(x, k):
        with mp.workdps(2 * DPS):
            return function(x, k)

    return reference


def inverse_reference(forward: Callable, scale, exponent, guess: Callable) -> Callable:
    """Derivatives of an inverse function y(x) whose y' = scale * exp(exponent * y**2):
    y^(n) = scale^n exp(n exponent y^2) P_n(y), P_1 = 1, P_{n+1} = P_n' + 2 n exponent y P_n.
    y itself by ``findroot`` of ``forward(y) = x`` from SciPy's guess (forward keeps its
    relative precision where the inverse's argument is 1e-300 or 1 - 2**-53)."""

    def reference(x, k):
        with mp.workdps(2 * DPS):
            y = mp.findroot(lambda t: forward(t) - x, mp.mpf(guess(float(x))))
            if k == 0:
                return y
            polynomial = [mp.mpf(1)]
            for n in range(1, k):
                derivative = [i * c for i, c in enumerate(polynomial)][1:]
                new = [mp.mpf(0)] * (len(polynomial) + 1)
                for i, c in enumerate(derivative):
                    new[i] += c
                for i, c in enumerate(polynomial):
                    new[i + 1] += 2 * n * exponent * c
                polynomial = new
            value = sum(c * y**i for i, c in enumerate(polynomial))
            return scale**k * mp.exp(k * exponent * y**2) * value

    return reference


def bessel(family: str, v) -> Callable:
    """d^k/dx^k of a Bessel function as the binomial sum of neighbouring orders (exact).

    J, Y: 2^-k sum_j (-1)^j C(k, j) Z_{v-k+2j};  I: 2^-k sum_j C(k, j) I_{v-k+2j};
    K: (-2)^-k sum_j C(k, j) K_{v-k+2j}.
    """
    function = {"j": mp.besselj, "y": mp.bessely, "i": mp.besseli, "k": mp.besselk}[family]

    def reference(x, k):
        with mp.workdps(2 * DPS):  # the sum cancels at small x
            total = mp.mpf(0)
            for j in range(k + 1):
                sign = (-1) ** j if family in "jy" else 1
                total += sign * mp.binomial(k, j) * function(v - k + 2 * j, x)
            return total / (-2 if family == "k" else 2) ** k

    return reference


def lambertw_reference(x, k):
    """W^(n) = exp(-nW) p_n(W) / (1 + W)^(2n - 1), p_1 = 1,
    p_{n+1} = -(n W + 3n - 1) p_n + (1 + W) p_n'  (exact, also next to the branch point)."""
    with mp.workdps(2 * DPS):
        if x < -mp.exp(-1):
            return mp.nan  # off the real domain, as symad's nan
        w = mp.lambertw(x).real
        if k == 0:
            return w
        coefficients = [mp.mpf(1)]  # p_n as a list of polynomial coefficients in W
        for n in range(1, k):
            derivative = [i * c for i, c in enumerate(coefficients)][1:] + [0]
            new = [0] * (len(coefficients) + 1)
            for i, c in enumerate(coefficients):
                new[i] += -(3 * n - 1) * c
                new[i + 1] += -n * c
            for i, c in enumerate(derivative):
                new[i] += c
                new[i + 1] += c
            coefficients = new
        p = sum(c * w**i for i, c in enumerate(coefficients))
        return mp.exp(-k * w) * p / (1 + w) ** (2 * k - 1)


def sinc_reference(x, k):
    return by_diffs(lambda t: mp.sinc(mp.pi * t))(x, k)


def _log_derivative(x, k):
    return mp.log(x) if k == 0 else (-1) ** (k - 1) * mp.factorial(k - 1) / x**k


def _logit(x, k):
    if k == 0:
        return mp.log(x) - mp.log1p(-x)
    return _log_derivative(x, k) + mp.factorial(k - 1) / (1 - x) ** k


def _log_beta_a(a, b, k):
    b = mp.mpf(b)
    if k == 0:
        return mp.log(mp.beta(a, b))
    return mp.polygamma(k - 1, a) - mp.polygamma(k - 1, a + b)


def _gammainc_large(x, k, a=None):
    """P(a, x) and its derivatives, those of the density x**(a-1) exp(-x)/gamma(a) (a = 1e6 by default)."""
    a = mp.mpf(10) ** 6 if a is None else a
    if k == 0:  # mpmath's lower series does not converge far right of a: 1 - Q there
        if x > a:
            return 1 - mp.gammainc(a, x, mp.inf, regularized=True)
        return mp.gammainc(a, 0, x, regularized=True)
    return mp.diff(lambda t: mp.exp((a - 1) * mp.log(t) - t - mp.loggamma(a)), x, k - 1)


def _log_ncdf(t):
    return mp.log(mp.ncdf(t)) if t < 0 else mp.log1p(-mp.ncdf(-t))


BESSEL_POINTS = (1e-3, 0.02, 0.5, 2.0, 7.3, 30.0, 100.5, 1e3)
I_POINTS = (1e-3, 0.02, 0.5, 2.0, 7.3, 30.0, 100.5, 700.0)
BELOW_E = -0.36787944117144233  # the float nearest -1/e, just below it (nan)
ABOVE_E = np.nextafter(BELOW_E, 0.0)  # the first float of W's domain

CASES = [
    Case("gamma", ssp.gamma,
         (-170.5, -20.3, -2.5, -1.001, -0.999, -1 + 1e-9, 1e-8, 1e-3, 0.1, 0.5, 1.0, 3.7,
          10.0, 50.0, 100.0, 150.5, 169.5, 171.5),
         by_diffs(mp.gamma)),
    Case("gammaln", ssp.gammaln,
         (-1e5 - 0.5, -20.3, -2.5, -0.999, -1 + 1e-9, 1e-8, 1e-3, 0.1, 1.0, 2.0, 10.0, 1e3, 1e6,
          1e10, 1e100),
         closed(lambda x, k: mp.log(abs(mp.gamma(x))) if k == 0 else mp.polygamma(k - 1, x))),
    Case("digamma", ssp.digamma,
         (-1e5 - 0.5, -100.5 + 1e-6, -20.3, -2.5, -0.999, -1 + 1e-9, 1e-8, 1e-3, 0.1, 1.0,
          1.4616321449683622, 10.0, 1e3, 1e6, 1e10),
         closed(lambda x, k: mp.polygamma(k, x))),
    Case("polygamma(1, x)", lambda x: ssp.polygamma(1, x),
         (-1e5 - 0.5, -2.5, -1 + 1e-9, 1e-5, 0.1, 1.0, 10.0, 1e3, 1e6),
         closed(lambda x, k: mp.polygamma(1 + k, x))),
    Case("polygamma(3, x)", lambda x: ssp.polygamma(3, x),
         (-1e5 - 0.5, -2.5, -0.75, 1e-3, 0.1, 1.0, 10.0, 1e3, 1e5),
         closed(lambda x, k: mp.polygamma(3 + k, x))),
    Case("beta(a, 2.5)", lambda a: ssp.beta(a, 2.5),
         (1e-3, 0.3, 4.0, 30.0, 100.0), by_diffs(lambda t: mp.beta(t, 2.5))),
    Case("beta(a, 1e-3)", lambda a: ssp.beta(a, 1e-3),
         (1e-3, 0.3, 4.0, 30.0, 100.0), by_diffs(lambda t: mp.beta(t, mp.mpf(1e-3)))),
    Case("beta(1.5, b)", lambda b: ssp.beta(1.5, b),
         (1e-3, 0.3, 4.0, 30.0, 300.0), by_diffs(lambda t: mp.beta(1.5, t))),
    Case("betaln(a, 2.5)", lambda a: ssp.betaln(a, 2.5),
         (1e-3, 0.3, 4.0, 30.0, 300.0, 1e5), closed(lambda x, k: _log_beta_a(x, 2.5, k))),
    Case("betaln(a, 1e-3)", lambda a: ssp.betaln(a, 1e-3),
         (1e-3, 0.3, 4.0, 30.0, 300.0, 1e5), closed(lambda x, k: _log_beta_a(x, 1e-3, k))),
    Case("gammainc(0.5, x)", lambda x: ssp.gammainc(0.5, x),
         (1e-6, 1e-3, 0.5, 3.0, 20.0, 100.0),
         by_diffs(lambda t: mp.gammainc(0.5, 0, t, regularized=True))),
    Case("gammainc(3.5, x)", lambda x: ssp.gammainc(3.5, x),
         (1e-3, 0.5, 3.5, 20.0, 100.0),
         by_diffs(lambda t: mp.gammainc(3.5, 0, t, regularized=True))),
    Case("gammainc(200, x)", lambda x: ssp.gammainc(200.0, x),
         (100.0, 150.0, 200.0, 260.0, 400.0),
         by_diffs(lambda t: mp.gammainc(200, 0, t, regularized=True))),
    Case("gammainc(1e6, x)", lambda x: ssp.gammainc(1e6, x),
         (1e6 - 3e3, 1e6, 1e6 + 3e3, 1e6 + 1e4), closed(_gammainc_large)),
    Case("gammaincc(3.5, x)", lambda x: ssp.gammaincc(3.5, x),
         (1e-3, 0.5, 3.5, 20.0, 100.0, 600.0),
         by_diffs(lambda t: mp.gammainc(3.5, t, mp.inf, regularized=True))),
    Case("erfinv", ssp.erfinv,
         (-1 + 2.0**-52, -0.99, -1e-10, 1e-300, 0.3, 0.9, 0.999999, 1 - 2.0**-53),
         inverse_reference(mp.erf, mp.sqrt(mp.pi) / 2, 1, sc.erfinv)),
    Case("erfcinv", ssp.erfcinv,
         (1e-300, 1e-100, 1e-10, 0.5, 1.0, 1.7, 2 - 2.0**-51),
         inverse_reference(mp.erfc, -mp.sqrt(mp.pi) / 2, 1, sc.erfcinv)),
    Case("ndtr", ssp.ndtr, (-38.0, -20.0, -10.0, -1.0, 0.0, 0.5, 5.0, 8.0), by_diffs(mp.ncdf)),
    Case("log_ndtr", ssp.log_ndtr,
         (-1e5, -1e3, -40.0, -20.0, -5.0, -4.0000001, -4.0, -3.9999999, -1.0, 0.0, 3.0, 10.0,
          30.0), by_diffs(_log_ncdf)),
    Case("ndtri", ssp.ndtri,
         (1e-300, 1e-100, 1e-10, 0.3, 0.5, 0.999, 1 - 2.0**-53),
         inverse_reference(mp.ncdf, mp.sqrt(2 * mp.pi), mp.mpf(1) / 2, sc.ndtri)),
    Case("expit", ssp.expit, (-700.0, -30.0, -1.0, 0.0, 0.5, 20.0, 40.0),
         by_diffs(lambda t: 1 / (1 + mp.exp(-t)))),
    Case("logit", ssp.logit, (1e-300, 1e-6, 0.3, 0.5, 0.999, 1 - 1e-12),
         closed(_logit)),
    Case("xlogy(x, 3)", lambda x: ssp.xlogy(x, 3.0), (-2.0, 0.0, 0.5, 1e10),
         closed(lambda x, k: [x * mp.log(3), mp.log(3), 0, 0, 0][k])),
    Case("xlogy(2, y)", lambda y: ssp.xlogy(2.0, y), (1e-300, 1e-3, 0.5, 50.0, 1e300),
         closed(lambda y, k: 2 * _log_derivative(y, k))),
    Case("xlog1py(2, y)", lambda y: ssp.xlog1py(2.0, y), (-1 + 1e-12, -0.9, 1e-8, 50.0, 1e300),
         closed(lambda y, k: 2 * _log_derivative(1 + y, k) if k else 2 * mp.log1p(y))),
    Case("j0", ssp.j0, BESSEL_POINTS, bessel("j", 0)),
    Case("j1", ssp.j1, BESSEL_POINTS, bessel("j", 1)),
    Case("jv(2.5, x)", lambda x: ssp.jv(2.5, x), BESSEL_POINTS, bessel("j", mp.mpf(2.5))),
    Case("jv(10, x)", lambda x: ssp.jv(10, x), BESSEL_POINTS, bessel("j", 10)),
    Case("y0", ssp.y0, BESSEL_POINTS, bessel("y", 0)),
    Case("y1", ssp.y1, BESSEL_POINTS, bessel("y", 1)),
    Case("yv(1.5, x)", lambda x: ssp.yv(1.5, x), BESSEL_POINTS, bessel("y", mp.mpf(1.5))),
    Case("i0", ssp.i0, I_POINTS, bessel("i", 0)),
    Case("i1", ssp.i1, I_POINTS, bessel("i", 1)),
    Case("iv(2.5, x)", lambda x: ssp.iv(2.5, x), I_POINTS, bessel("i", mp.mpf(2.5))),
    Case("k0", ssp.k0, I_POINTS, bessel("k", 0)),
    Case("k1", ssp.k1, I_POINTS, bessel("k", 1)),
    Case("kv(1.5, x)", lambda x: ssp.kv(1.5, x), I_POINTS, bessel("k", mp.mpf(1.5))),
    Case("zeta", ssp.zeta, (-30.5, -2.5, 0.5, 1 + 1e-6, 1.5, 3.0, 20.0, 60.0), closed(lambda s, k: mp.zeta(s, 1, k))),
    Case("zeta(3, q)", lambda q: ssp.zeta(3.0, q), (1e-3, 0.5, 2.0, 30.0, 1e4),
         closed(lambda q, k: (-1) ** k * mp.rf(3, k) * mp.zeta(3 + k, q))),
    Case("lambertw", ssp.lambertw,
         (BELOW_E, ABOVE_E, -0.36787944117144, -0.367879441171, -0.3678794, -0.3678, -0.36, -0.3, -1e-300, 0.0, 1e-10,
          0.5, 1e3, 1e100, 1e300),
         lambertw_reference),
    Case("ellipk", ssp.ellipk,
         (-1e6, -2.0, 0.0, 1e-3, 0.0999, 0.1, 0.3, 0.5, 0.9, 0.999, 1 - 1e-6, 1 - 1e-12),
         by_diffs(mp.ellipk)),
    Case("ellipe", ssp.ellipe,
         (-1e6, -2.0, 0.0, 1e-3, 0.0999, 0.1, 0.3, 0.5, 0.9, 0.999, 1 - 1e-6, 1 - 1e-12),
         by_diffs(mp.ellipe)),
    Case("sinc", ssp.sinc,
         (0.0, 1e-8, 1e-3, 0.3, 0.5, 1 - 1e-8, 1.0, 7.25, 100.25, 1e4 + 0.25, 3e6 + 0.1, 1e8 + 0.1,
          -1e8 - 0.4),
         sinc_reference),
]


def finite_float(value) -> bool:
    """A normal float64 number, or 0 (subnormals keep too few digits to measure)."""
    magnitude = abs(value)
    return magnitude == 0 or np.finfo(np.float64).tiny <= magnitude <= np.finfo(np.float64).max


def relative_error(value: float, expected) -> float:
    if expected == 0:
        return abs(value) / 1e-14 * TARGET  # an exact zero must come out below 1e-14
    return float(abs(mp.mpf(value) - expected) / abs(expected))


def nested(fn: Callable, k: int) -> Callable:
    """The k-th derivative by nesting reverse mode: grad(grad(...(fn)))."""
    for _ in range(k):
        fn = sd.grad(fn)
    return lambda points: np.array([fn(float(point)) for point in points])


def measure(case: Case, mode: str = "taylor") -> dict:
    """{order: (worst error, at point, skipped count)}."""
    points = np.array(case.points, dtype=np.float64)
    results = {}
    for k in ORDERS:
        if k == 0:
            values = case.fn(points)
        elif mode == "taylor":
            values = sd.derivative(case.fn, k)(points)
        else:
            values = nested(case.fn, k)(points)
        values = np.atleast_1d(values)
        worst, at, skipped = 0.0, None, 0
        for point, value in zip(case.points, values):
            with mp.workdps(DPS):
                expected = case.reference(mp.mpf(point), k)
                if not mp.isfinite(expected) or not finite_float(expected):
                    skipped += 1
                    continue
                error = relative_error(float(value), expected)
            if not error <= worst:  # nan counts as the worst
                worst, at = error, point
        results[k] = (worst, at, skipped)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the docs' table")
    parser.add_argument("--only", help="cases whose name contains this text")
    parser.add_argument("--nested", action="store_true",
                        help="orders by nested sd.grad instead of Taylor mode (sd.derivative)")
    arguments = parser.parse_args()
    mode = "nested sd.grad" if arguments.nested else "Taylor mode (sd.derivative)"
    print(f"# {datetime.date.today()}, {mode}, numpy {np.__version__}, scipy {scipy.__version__}, "
          f"mpmath {mp.__version__}, target {TARGET:g} relative, orders 0-4")
    failed = []
    if arguments.markdown:
        print("| function | points | " + " | ".join(f"order {k}" for k in ORDERS) + " |")
        print("|---|---|" + "---|" * len(ORDERS))
    for case in CASES:
        if arguments.only and arguments.only not in case.name:
            continue
        results = measure(case, "nested" if arguments.nested else "taylor")
        cells = []
        for k, (worst, at, skipped) in results.items():
            tolerance = case.limited.get(at, (TARGET, ""))[0]
            flag = "" if worst <= tolerance else " !"
            if flag:
                failed.append((case.name, k, at, worst))
            where = f" @{float(at)!r}" if worst > 1e-13 else ""
            extra = f" ({skipped} n/a)" if skipped else ""
            cells.append(f"{worst:.0e}{where}{extra}{flag}")
        points = ", ".join(repr(float(p)) for p in case.points)
        if arguments.markdown:
            print(f"| `{case.name}` | {points} | " + " | ".join(cells) + " |")
        else:
            print(f"{case.name:18s} " + "  ".join(f"{c:>22s}" for c in cells))
        sys.stdout.flush()
    for name, k, at, worst in failed:
        print(f"MISSES {TARGET:g}: {name} order {k} at x = {at!r}: {worst:.1e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
