"""np.linspace with traced endpoints (issue 29): NumPy's values bit for bit, and the
derivatives 1 - i/(num - 1) and i/(num - 1) of sample i in start and stop."""

from __future__ import annotations

import numpy as np
import pytest

import symad as sd

CASES = [
    (1.0, 2.0, 5, True), (0.3, -1.7, 7, False), (0.1, 0.7, 11, True), (1.0, 2.0, 1, True),
    (1.0, 2.0, 1, False), (1.0, 2.0, 0, True), (2.0, 2.0, 4, True),
    (np.array([0.0, 1.0]), np.array([2.0, 5.0]), 4, True),
    (np.array([[0.5], [1.5]]), np.array([2.0, -3.0]), 3, False),
]


@pytest.mark.parametrize("start, stop, num, endpoint", CASES)
def test_linspace_values_and_derivatives(start, stop, num, endpoint):
    def samples(a, b):
        return np.linspace(a, b, num, endpoint=endpoint)

    expected = np.linspace(start, stop, num, endpoint=endpoint)
    got = sd.trace(samples, start, stop)(start, stop)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)
    if num == 0:
        return
    divisions = (num - 1 if endpoint else num) or 1
    fraction = (np.arange(num) / divisions).reshape((-1,) + (1,) * np.ndim(expected[0]))
    if endpoint and num > 1:
        fraction[-1] = 1.0
    weights = np.cos(np.arange(expected.size)).reshape(expected.shape)
    loss = lambda a, b: np.sum(samples(a, b) * weights)  # noqa: E731
    d_start, d_stop = sd.grad(loss, argnums=(0, 1))(start, stop)
    want_start = np.broadcast_to(weights * (1 - fraction), expected.shape)
    want_stop = np.broadcast_to(weights * fraction, expected.shape)
    np.testing.assert_allclose(d_start, _unbroadcast(want_start, np.shape(start)), rtol=1e-13)
    np.testing.assert_allclose(d_stop, _unbroadcast(want_stop, np.shape(stop)), rtol=1e-13)


def _unbroadcast(gradient: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a gradient over the axes broadcasting added to an operand of ``shape``."""
    gradient = np.sum(gradient, axis=tuple(range(gradient.ndim - len(shape))))
    return np.sum(gradient, axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True) \
        if shape else gradient


def test_linspace_axis_and_retstep():
    a, b = np.zeros(2), np.array([1.0, 3.0])
    moved = sd.trace(lambda a, b: np.linspace(a, b, 4, axis=1), a, b)(a, b)
    assert np.array_equal(moved, np.linspace(a, b, 4, axis=1))
    step = sd.trace(lambda a, b: np.linspace(a, b, 5, retstep=True)[1], 1.0, 2.0)(1.0, 2.0)
    assert step == np.linspace(1.0, 2.0, 5, retstep=True)[1]
    with pytest.raises(sd.TracingError, match="linspace"):
        sd.trace(lambda a: np.linspace(a, 2.0, 3, dtype=int), 1.0)
