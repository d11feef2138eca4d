"""Taylor coefficients computed as numbers (symad.transforms.series, issue 32).

References: the symbolic Taylor sweep (orders it can build, exact to rounding), and
series computed exactly in 60-digit mpmath arithmetic by independent recurrences.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import symad as sd
import symad.numpy as snp
from benchmarks.order import exact_series
from symad.transforms.series import multivariate_coefficients, series_coefficients

# Every numeric rule (products, quotients, constant, integer and traced powers, log, sqrt,
# where, sign, stop_gradient) and the generic chain rule through many partial rules.
FUNCTIONS = {
    "exp_sin_over": lambda x: np.exp(np.sin(x)) / (1 + x**2),
    "tanh": np.tanh,
    "log_sqrt": lambda x: np.log(1 + x**2) * np.sqrt(2 + x),
    "powers": lambda x: x**3 - 2 * x**-2 + (1.5 + x) ** 2.5 + x**x,
    "inverse_trig": lambda x: np.arctan(x) + np.arcsin(x / 2) - np.arccos(x / 3),
    "hyperbolic": lambda x: np.sinh(x) * np.cosh(2 * x) - np.arcsinh(x),
    "special": lambda x: sd.special.erf(x) + sd.special.expit(x) + np.log1p(x**2),
    "piecewise": lambda x: np.where(x > 0, x**2, -x) + np.abs(x) * np.sign(x) + np.maximum(x, 0.1),
    "constant_exponent_base": lambda x: 2.0**x + np.exp2(x) - np.cbrt(x + 3),
    "stopped": lambda x: x * sd.stop_gradient(x) + np.cos(x) ** 2,
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("point", [0.3, -0.45])
def test_numeric_series_equal_the_symbolic_sweep(name, point):
    f = FUNCTIONS[name]
    order = 24
    expected = np.array([float(c) for c in sd.taylor(f, order)(point)])
    (got,), _ = series_coefficients(sd.trace(f, point), order, (0,), (point,))
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-11, atol=1e-300, equal_nan=True)
    if name == "powers":  # x**x: nan for every order at a negative point, as NumPy's value
        assert np.isnan(got[0, 0]) == (point < 0)


def test_order_1000_agrees_with_60_digit_arithmetic():
    point = 0.3
    f = FUNCTIONS["exp_sin_over"]
    (got,), _ = series_coefficients(sd.trace(f, point), 1000, (0,), (point,))
    exact = np.array([float(v) for v in exact_series(1000, point)])
    big = np.abs(exact) > 1e-280
    assert big.sum() == 1001
    assert np.max(np.abs(got[:, 0] - exact)[big] / np.abs(exact[big])) < 1e-9


def test_tanh_coefficients_stay_accurate_down_to_1e_217():
    # tanh' = 1 - tanh**2 in 60 digits; the coefficients at 0.5 fall to about 1e-217.
    order, point = 1000, 0.5
    with mpmath.workdps(60):
        y = [mpmath.tanh(mpmath.mpf(point))] + [mpmath.mpf(0)] * order
        p = [1 - y[0] ** 2] + [mpmath.mpf(0)] * order
        for k in range(1, order + 1):
            y[k] = (p[k - 1]) / k  # u = x: y[k] = p[k-1] / k
            p[k] = -sum(y[j] * y[k - j] for j in range(k + 1))
    exact = np.array([float(v) for v in y])
    (got,), _ = series_coefficients(sd.trace(np.tanh, point), order, (0,), (point,))
    assert 1e-220 < abs(exact[-1]) < 1e-214
    assert np.max(np.abs(got[:, 0] - exact) / np.abs(exact)) < 1e-9


def test_a_batch_of_points_gives_each_points_series():
    f = FUNCTIONS["log_sqrt"]
    points = np.linspace(-0.8, 0.9, 7).reshape(7, 1) + np.zeros((1, 2))
    (got,), shape = series_coefficients(sd.trace(f, 0.0), 12, (0,), (points,))
    assert shape == (7, 2)
    for index, point in enumerate(points.reshape(-1)):
        (one,), _ = series_coefficients(sd.trace(f, 0.0), 12, (0,), (point,))
        np.testing.assert_allclose(got[:, index], one[:, 0], rtol=1e-14)


def test_a_direction_scales_the_coefficients():
    f = lambda x, y: np.sin(x * y) + x / y  # noqa: E731
    F = sd.trace(f, 0.4, 1.3)
    (got,), _ = series_coefficients(F, 10, (0, 1), (0.4, 1.3), steps=(2.0, -0.5))
    expected = [float(c) for c in sd.taylor(f, 10, (0, 1), direction=(2.0, -0.5))(0.4, 1.3)]
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-12, atol=1e-15)


def test_multivariate_series_equal_the_symbolic_sweep():
    f = lambda x, y, z: np.exp(x * y + z) * np.cos(x - z) + y / (2 + x)  # noqa: E731
    point = (0.1, 0.2, 0.3)
    series, _ = multivariate_coefficients(sd.trace(f, *point), 6, (0, 1, 2), point)
    expected = sd.taylor(f, 6, argnum=(0, 1, 2))(*point)
    assert set(series) == set(expected)
    for key, value in expected.items():
        assert abs(series[key][0] - float(value)) < 1e-14 * max(1, abs(float(value))), key


def test_derivatives_from_coefficients():
    (got,), _ = series_coefficients(sd.trace(np.exp, 0.0), 20, (0,), (0.0,))
    factorials = np.array([math.factorial(k) for k in range(21)], dtype=float)
    np.testing.assert_allclose(got[:, 0] * factorials, np.ones(21), rtol=1e-14)


def test_snp_functions_trace_too():
    f = lambda x: snp.logaddexp(x, 2 * x) + snp.hypot(x, 1.0)  # noqa: E731
    expected = np.array([float(c) for c in sd.taylor(f, 16)(0.7)])
    (got,), _ = series_coefficients(sd.trace(f, 0.7), 16, (0,), (0.7,))
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-11, atol=1e-300)


# -- through sd.taylor ----------------------------------------------------------------


def test_sd_taylor_gives_any_order_of_coefficients():
    f = FUNCTIONS["exp_sin_over"]
    series = sd.taylor(f, 1000)(0.3)
    assert len(series) == 1001 and all(isinstance(c, np.float64) for c in series[:3])
    exact = np.array([float(v) for v in exact_series(1000, 0.3)])
    np.testing.assert_allclose(np.array(series), exact, rtol=1e-9)
    grid = np.linspace(-1.0, 1.0, 50).reshape(5, 10)
    on_grid = sd.taylor(f, 200)(grid)
    assert on_grid[200].shape == (5, 10)
    np.testing.assert_allclose(on_grid[200][2, 3], sd.taylor(f, 200)(grid[2, 3])[200], rtol=1e-13)


@pytest.mark.parametrize("order", [47, 48, 60])
def test_numbers_and_the_graph_agree_where_the_call_switches(order, monkeypatch):
    from symad.transforms import series as S

    f = lambda x, y: np.exp(np.sin(x) * y) / (1 + x**2)  # noqa: E731
    numbers = sd.taylor(f, order)(np.array([0.3, -0.2]), 0.7)
    monkeypatch.setattr(S, "NUMERIC_FROM_ORDER", 10**6)
    graph = sd.taylor(f, order)(np.array([0.3, -0.2]), 0.7)
    np.testing.assert_allclose(np.array(numbers), np.array(graph), rtol=1e-11, atol=1e-300)
    assert S.wants_numbers(order, None) == (order >= 10**6)


def test_two_variables_to_high_order_through_sd_taylor():
    f = lambda x, y: 1 / (2 - x - y)  # noqa: E731  coefficient of x^i y^j: C(i+j, i) / 2^(i+j+1)
    series = sd.taylor(f, 60, argnum=(0, 1))(0.0, 0.0)
    assert len(series) == math.comb(62, 2) and list(series) == sorted(series)
    for (i, j), value in series.items():
        exact = math.comb(i + j, i) / 2.0 ** (i + j + 1)
        assert abs(value - exact) <= 1e-13 * exact, (i, j)
    derivatives = sd.taylor(f, 40, argnum=(0, 1), derivatives=True)(0.0, 0.0)
    assert derivatives[(3, 2)] == pytest.approx(math.factorial(5) / 2.0**6, rel=1e-13)


def test_a_derivative_beyond_float64_is_refused_naming_it():
    f = lambda x: 1 / (0.5 - x)  # noqa: E731  f^(k)(0) = k! 2^(k+1): 4.9e310 at k = 151
    with pytest.raises(sd.DifferentiationError, match=r"order 151 is about 4.9e310.*derivatives=False"):
        sd.taylor(f, 170, derivatives=True)(0.0)
    assert sd.taylor(f, 170)(0.0)[170] == pytest.approx(2.0**171, rel=1e-13)


def test_whole_array_steps_inside_a_scalar_function_are_expanded():
    # sum(sin(k x)) holds whole-array nodes (multiply, sin, reduce_sum over 39 elements):
    # the numbers are computed on its per-element version.
    k = np.arange(1.0, 40.0)
    f = lambda x: snp.sum(snp.sin(x * k))  # noqa: E731
    series = sd.taylor(f, 200)(0.5)
    expected = [sum(ki**j * np.sin(0.5 * ki + j * np.pi / 2) for ki in k) / math.factorial(j)
                for j in range(6)]
    np.testing.assert_allclose(np.array(series[:6]), expected, rtol=1e-12)


def test_mpmath_series_at_any_precision():
    f = FUNCTIONS["exp_sin_over"]
    series = sd.taylor(f, 300, dps=60)(0.3)
    assert all(isinstance(c, mpmath.mpf) for c in series)
    exact = exact_series(300, 0.3)
    with mpmath.workdps(60):
        assert max(abs(c - e) / abs(e) for c, e in zip(series, exact)) < mpmath.mpf(10) ** -50
    # Derivatives of any order: sin's 300th derivative is sin itself (300 = 0 mod 4).
    derivative = sd.taylor(np.sin, 300, derivatives=True, dps=40)(0.5)[300]
    with mpmath.workdps(40):
        assert abs(derivative - mpmath.sin(mpmath.mpf(0.5))) < mpmath.mpf(10) ** -35
    # A batch gives object arrays of mpf, each point at its float's exact binary value.
    batch = sd.taylor(np.exp, 3, dps=30)(np.array([0.1, 0.2]))
    assert batch[3].shape == (2,) and batch[3].dtype == object
    with mpmath.workdps(30):
        assert abs(batch[3][1] - mpmath.exp(mpmath.mpf(0.2)) / 6) < mpmath.mpf(10) ** -29


def test_dps_is_checked():
    with pytest.raises(sd.DifferentiationError, match="dps must be a positive integer"):
        sd.taylor(np.sin, 3, dps=0)
    with pytest.raises(sd.DifferentiationError, match="one variable or along a direction"):
        sd.taylor(lambda x, y: x * y, 3, argnum=(0, 1), dps=30)


def test_points_in_blocks_give_each_points_series(monkeypatch):
    # A small working set splits 37 points into blocks of a few; the series are the same.
    from symad.transforms import series as S

    f = FUNCTIONS["powers"]
    points = np.linspace(0.2, 1.4, 37)
    whole = sd.taylor(f, 50)(points)
    monkeypatch.setattr(S, "WORKING_SET_BYTES", 8 * 51 * 40)
    blocked = sd.taylor(f, 50)(points)
    np.testing.assert_array_equal(np.array(blocked), np.array(whole))
    assert 1 < 8 * 51 * 40 // (8 * 51 * (len(S._plan_of(sd.trace(f, 0.0), 50, (0,)).rules) + 2)) < 37
