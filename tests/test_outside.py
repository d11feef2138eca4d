"""A kept trace is not reused once what the function reads from outside has changed."""

from __future__ import annotations

import numpy as np
import pytest

import symad as sd

DATA = np.ones((4, 3))
RATE = 0.5


def _loss(w):
    return np.mean((DATA @ w) ** 2)


def _scaled(x):
    return RATE * np.sin(x)


def test_a_rebound_global_array_is_traced_again_with_a_warning_once():
    global DATA
    saved = DATA
    try:
        g = sd.grad(_loss)
        w = np.ones(3)
        np.testing.assert_allclose(g(w), [6.0, 6.0, 6.0])
        DATA = 2 * np.ones((4, 3))
        with pytest.warns(sd.RetraceWarning, match="'DATA', which the function reads from outside"):
            np.testing.assert_allclose(g(w), [24.0, 24.0, 24.0])
        DATA = 3 * np.ones((4, 3))  # the same name again: traced again, not warned again
        np.testing.assert_allclose(g(w), [54.0, 54.0, 54.0])
    finally:
        DATA = saved


def test_writing_into_an_array_a_closure_holds_is_seen():
    weights = np.ones(3)
    g = sd.grad(lambda x: np.sum(weights * x ** 2))
    np.testing.assert_allclose(g(np.ones(3)), [2.0, 2.0, 2.0])
    weights[:] = [1.0, 2.0, 3.0]
    with pytest.warns(sd.RetraceWarning, match="'weights'"):
        np.testing.assert_allclose(g(np.ones(3)), [2.0, 4.0, 6.0])


def test_a_rebound_global_number_and_nested_transforms():
    global RATE
    saved = RATE
    try:
        second = sd.grad(sd.grad(_scaled))  # reads what _scaled reads
        assert float(second(0.3)) == pytest.approx(-0.5 * np.sin(0.3), rel=1e-15)
        RATE = 2.0
        with pytest.warns(sd.RetraceWarning):
            assert float(second(0.3)) == pytest.approx(-2.0 * np.sin(0.3), rel=1e-15)
    finally:
        RATE = saved


def test_unchanged_values_keep_the_trace():
    global DATA
    saved = DATA
    try:
        g = sd.grad(_loss)
        w = np.ones(3)
        first = g.trace(w)
        assert g.trace(w) is first  # nothing changed: the kept trace
        DATA = np.ones((4, 3))  # a new array with the same contents: still valid
        assert g.trace(w) is first
    finally:
        DATA = saved


def test_the_check_covers_only_names_the_function_itself_uses():
    from symad.outside import snapshot

    table = {"scale": np.ones(2)}
    helper_value = np.ones(2)

    def helper():
        return helper_value

    def f(x):
        return x * table["scale"] + helper()  # a dict and another function: not watched

    assert [name for _, name, _ in snapshot(f)] == []
    assert [name for _, name, _ in snapshot(lambda x: x * helper_value)] == ["helper_value"]
