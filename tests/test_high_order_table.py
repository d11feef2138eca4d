"""Every row of the primitive table to order 20, at magnitudes from 1e-8 to 1e8, against mpmath.

``sd.taylor(f, 20, derivatives=True)`` over an array of points spanning
1e-8 … 1e8 (and their negatives where the domain allows), each derivative of
orders 1 … 20 against mpmath's Taylor expansion at 50 digits (finite
differences at ~4,000-bit working precision, at the exact binary value of
the float point; nothing in it shares code with symad's recurrences).

Stated tolerance: 1e-11 relative (float64 rounding grown by the order-20
recurrences; most rows stay below 1e-13). Where the exact value is below
1e-300 (it underflows float64) symad must give a finite value as tiny; where
it overflows float64 the point is not compared (the issue asks for points
"where the exact value is finite"). A value that is nan or inf where the
exact value is finite fails.

No exceptions: arcsin, arccos and arctanh (whose partials once used (1 - x)(1 + x),
whose derivative cancels near 0) are held to the same tolerance down to 1e-20 and
up to 1 - 1e-8; hypot(x, 2) (whose partial x/hypot(x, 2) once cancelled for |x| >> 2)
over all magnitudes. Their partials now use the primitives one_minus_square (valued
(1 - x)(1 + x), partial -2x) and hypot_ratio (a/hypot(a, b), whose partials are
products), which have rows of their own.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest

import symad as sd
import symad.numpy as snp
from symad import primitives as P

ORDER = 20
RTOL = 1e-11
MAGNITUDES = [1e-8, 1e-4, 0.7, 3.0, 1e4, 1e8]
BOTH_SIGNS = MAGNITUDES + [-m for m in MAGNITUDES]
INSIDE_UNIT = [1e-20, 1e-8, 1e-4, 0.7, -0.7, 1 - 1e-8, -(1 - 1e-8)]

mp = mpmath


class Row:
    def __init__(self, name, function, reference, points, rtol=RTOL, degree=None):
        self.name, self.function, self.reference = name, function, reference
        self.points, self.rtol = points, rtol
        # A polynomial's derivatives past its degree are exactly 0 (mpmath's finite
        # differences give rounding noise there): symad must give exactly 0.0.
        self.degree = degree


# One line per row of the primitive table (symad/primitives.py); every
# differentiable primitive appears at least once, non-differentiable ones
# (sign, stop_gradient, comparisons) are covered by their flat coefficients.
ROWS = [
    # -- arithmetic
    Row("add", lambda x: x + 2.5, lambda t: t + 2.5, BOTH_SIGNS, degree=1),
    Row("subtract", lambda x: 2.5 - x, lambda t: 2.5 - t, BOTH_SIGNS, degree=1),
    Row("negative", lambda x: -x, lambda t: -t, MAGNITUDES, degree=1),
    Row("multiply", lambda x: x * x * x, lambda t: t**3, BOTH_SIGNS, degree=3),
    Row("divide", lambda x: 3.0 / x, lambda t: 3 / t, BOTH_SIGNS),
    Row("divide_by_constant", lambda x: x / 3.0, lambda t: t / 3, MAGNITUDES, degree=1),
    Row("power_integer", lambda x: x**7, lambda t: t**7, BOTH_SIGNS, degree=7),
    Row("power_negative_integer", lambda x: x**-3, lambda t: t**-3, BOTH_SIGNS),
    Row("power_real", lambda x: x**2.5, lambda t: t ** mp.mpf(2.5), MAGNITUDES),
    Row("power_traced", lambda x: x**x, lambda t: t**t, [1e-8, 1e-4, 0.7, 3.0, 100.0]),
    Row("power_constant_base", lambda x: 2.0**x, lambda t: 2**t, BOTH_SIGNS),
    # -- roots, exponentials, logarithms
    Row("sqrt", snp.sqrt, mp.sqrt, MAGNITUDES),
    Row("cbrt", snp.cbrt, mp.cbrt, MAGNITUDES),
    Row("cbrt_negative", snp.cbrt, lambda t: -mp.cbrt(-t), [-m for m in MAGNITUDES]),
    Row("exp", snp.exp, mp.exp, BOTH_SIGNS),
    Row("exp2", snp.exp2, lambda t: 2**t, BOTH_SIGNS),
    Row("expm1", snp.expm1, mp.expm1, BOTH_SIGNS),
    Row("log", snp.log, mp.log, MAGNITUDES),
    Row("log2", snp.log2, lambda t: mp.log(t, 2), MAGNITUDES),
    Row("log10", snp.log10, mp.log10, MAGNITUDES),
    Row("log1p", snp.log1p, mp.log1p, MAGNITUDES + [-1e-8, -1e-4, -0.7]),
    # -- trigonometric and hyperbolic
    Row("sin", snp.sin, mp.sin, BOTH_SIGNS),
    Row("cos", snp.cos, mp.cos, BOTH_SIGNS),
    Row("tan", snp.tan, mp.tan, BOTH_SIGNS),
    Row("arcsin", snp.arcsin, mp.asin, INSIDE_UNIT),
    Row("arccos", snp.arccos, mp.acos, INSIDE_UNIT),
    Row("arctan", snp.arctan, mp.atan, BOTH_SIGNS),
    Row("arctan2_y", lambda x: snp.arctan2(x, 2.0), lambda t: mp.atan2(t, 2), BOTH_SIGNS),
    Row("arctan2_x", lambda x: snp.arctan2(2.0, x), lambda t: mp.atan2(2, t), BOTH_SIGNS),
    Row("sinh", snp.sinh, mp.sinh, BOTH_SIGNS),
    Row("cosh", snp.cosh, mp.cosh, BOTH_SIGNS),
    Row("tanh", snp.tanh, mp.tanh, BOTH_SIGNS),
    Row("sech", lambda x: snp.apply(P.sech_p, x), mp.sech, BOTH_SIGNS),
    Row("arcsinh", snp.arcsinh, mp.asinh, BOTH_SIGNS),
    Row("arccosh", snp.arccosh, mp.acosh, [1 + 1e-8, 1 + 1e-4, 1.7, 3.0, 1e4, 1e8]),
    Row("arctanh", snp.arctanh, mp.atanh, INSIDE_UNIT),
    Row("one_minus_square", lambda x: snp.apply(P.one_minus_square_p, x), lambda t: (1 - t) * (1 + t),
        BOTH_SIGNS + [1 - 1e-8], degree=2),
    # -- piecewise and two-argument smooth functions
    Row("abs", snp.abs, abs, BOTH_SIGNS),
    Row("maximum", lambda x: snp.maximum(snp.sin(x), 0.25), lambda t: max(mp.sin(t), mp.mpf(0.25)),
        BOTH_SIGNS),
    Row("minimum", lambda x: snp.minimum(snp.sin(x), 0.25), lambda t: min(mp.sin(t), mp.mpf(0.25)),
        BOTH_SIGNS),
    Row("reduce_max", lambda x: snp.max(snp.stack([snp.sin(x), snp.cos(x)])),
        lambda t: max(mp.sin(t), mp.cos(t)), BOTH_SIGNS),
    Row("reduce_min", lambda x: snp.min(snp.stack([snp.sin(x), snp.cos(x)])),
        lambda t: min(mp.sin(t), mp.cos(t)), BOTH_SIGNS),
    Row("where", lambda x: snp.where(x > 0, snp.sin(x), snp.exp(x)),
        lambda t: mp.sin(t) if t > 0 else mp.exp(t), BOTH_SIGNS),
    Row("hypot", lambda x: snp.hypot(x, 2.0), lambda t: mp.hypot(t, 2), BOTH_SIGNS),
    Row("hypot_ratio", lambda x: snp.apply(P.hypot_ratio_p, x, 2.0), lambda t: t / mp.hypot(t, 2), BOTH_SIGNS),
    Row("hypot_ratio_second", lambda x: snp.apply(P.hypot_ratio_p, 2.0, x), lambda t: 2 / mp.hypot(t, 2),
        BOTH_SIGNS),
    Row("logaddexp", lambda x: snp.logaddexp(x, 1.0), lambda t: mp.log(mp.exp(t) + mp.e), BOTH_SIGNS),
    Row("logaddexp2", lambda x: snp.logaddexp2(x, 1.0), lambda t: mp.log(mp.power(2, t) + 2, 2),
        BOTH_SIGNS),
    # piecewise linear in both operands: a smooth dividend, a divisor (points off the jumps)
    Row("mod", lambda x: snp.mod(snp.sin(x), 0.3) + snp.mod(2.5, x),
        lambda t: mp.sin(t) - 0.3 * mp.floor(mp.sin(t) / 0.3) + 2.5 - t * mp.floor(2.5 / t),
        [0.7, 1.1, -0.7, -1.9, 3.7]),
    Row("fmod", lambda x: snp.fmod(snp.sin(x), 0.3) + snp.fmod(2.5, x),
        lambda t: mp.sin(t) - 0.3 * int(mp.sin(t) / 0.3) + 2.5 - t * int(2.5 / t),
        [0.7, 1.1, -0.7, -1.9, 3.7]),
    Row("logsumexp", lambda x: snp.logsumexp(snp.stack([x, 2 * x, 1.0])),
        lambda t: mp.log(mp.exp(t) + mp.exp(2 * t) + mp.e), BOTH_SIGNS),
    # -- special functions
    Row("erf", snp.erf, mp.erf, BOTH_SIGNS),
    Row("erfc", snp.erfc, mp.erfc, BOTH_SIGNS),
    Row("sigmoid", snp.sigmoid, lambda t: 1 / (1 + mp.exp(-t)), BOTH_SIGNS),
    Row("softplus", snp.softplus, lambda t: mp.log(1 + mp.exp(t)), BOTH_SIGNS),
]


@functools.cache
def exact_derivatives(name: str, point: float) -> tuple:
    """Orders 0..ORDER at ``point`` from mpmath at 50 digits (no chopping of tiny values)."""
    row = next(row for row in ROWS if row.name == name)
    with mpmath.workdps(50):
        series = mpmath.taylor(row.reference, mpmath.mpf(point), ORDER, chop=False)
        return tuple(series[n] * mpmath.factorial(n) for n in range(ORDER + 1))


def check(value: float, exact, rtol: float, context: str) -> None:
    if abs(exact) > 1.7e308:  # the exact value is not a finite float64
        return
    if abs(exact) < 1e-300:  # it underflows float64: nothing finite to compare digits with
        assert math.isfinite(value) and abs(value) < 1e-290, f"{context}: {value!r}, exact {exact}"
        return
    reference = float(exact)
    assert math.isfinite(value), f"{context}: {value!r} where the exact value is {reference!r}"
    error = abs(value - reference) / abs(reference)
    assert error <= rtol, f"{context}: {value!r} vs exact {reference!r} (relative error {error:.1e})"


def test_every_differentiable_primitive_has_a_row():
    covered = {"add", "subtract", "negative", "multiply", "divide", "power", "sqrt", "cbrt", "exp",
               "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
               "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "sech", "arcsinh", "arccosh",
               "arctanh", "abs", "maximum", "minimum", "reduce_max", "reduce_min", "where", "hypot",
               "one_minus_square", "hypot_ratio",
               "logaddexp", "logaddexp2", "mod", "fmod", "logsumexp", "erf", "erfc", "sigmoid", "softplus"}
    from symad.rules.partials import ELEMENTARY_PARTIALS, NONDIFFERENTIABLE

    table = {primitive.name for primitive in ELEMENTARY_PARTIALS} - {p.name for p in NONDIFFERENTIABLE}
    assert table <= covered, f"rows missing for {sorted(table - covered)}"
    assert {row.name.split("_")[0] for row in ROWS} >= {"add", "power", "arctan2", "reduce"}


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_order_20_across_magnitudes(row):
    derivatives = sd.taylor(row.function, ORDER, derivatives=True)(np.array(row.points))
    assert len(derivatives) == ORDER + 1
    values = [np.broadcast_to(d, (len(row.points),)) for d in derivatives]  # constants broadcast
    for index, point in enumerate(row.points):
        exact = exact_derivatives(row.name, point)
        for n in range(ORDER + 1):
            context = f"{row.name}^({n})({point})"
            if row.degree is not None and n > row.degree:
                assert values[n][index] == 0.0, f"{context}: {values[n][index]!r}, exactly 0 expected"
                continue
            check(float(values[n][index]), exact[n], row.rtol, context)


def test_hypot_far_from_its_second_argument_is_accurate_relative_to_itself():
    # hypot(x, 2) at x = 1e4 and 1e20: the n-th derivative (n >= 2) is ~ 2 n!/x**(n+1), far
    # below the terms ~ n!/x**(n-1) a recurrence on x/hypot(x, 2) subtracts; it once
    # matched only to 1e-12 of those (at 1e20 the second derivative was 0).
    for x in (1e4, 1e20):
        derivatives = sd.taylor(lambda t: snp.hypot(t, 2.0), ORDER, derivatives=True)(x)
        # 1,000 digits: the finite differences must resolve 1e-400 next to hypot(1e20, 2) = 1e20.
        with mpmath.workdps(1000):
            exact = mpmath.taylor(lambda t: mpmath.hypot(t, 2), mpmath.mpf(x), ORDER, chop=False)
        for n in range(2, ORDER + 1):
            if abs(exact[n]) < 1e-290:
                # The normalised coefficient f^(n)/n! itself is subnormal (order 16 at
                # 1e20): Taylor mode works in coefficients, so its digits are gone.
                continue
            check(float(derivatives[n]), exact[n] * mpmath.factorial(n), RTOL, f"hypot^({n})({x})")
