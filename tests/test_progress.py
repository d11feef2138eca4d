"""Progress bars for long compiles and evaluations: what they say, and when they are silent."""

from __future__ import annotations

import numpy as np
import pytest

import symad as sd
from symad import config
from symad.compile import registry
from symad.compile.progress import progress_bar


@pytest.fixture
def bars(monkeypatch):
    """Bars on, shown at once (no 2 s wait), whatever the terminal."""
    monkeypatch.setattr(config, "progress", True)
    monkeypatch.setattr(config, "progress_after", 0.0)


def _taylor():
    return sd.derivative(lambda x: np.exp(np.sin(x)) / (1 + x * x), 8).trace(0.7)


def test_long_evaluations_say_what_they_evaluate_and_count_points(bars, capsys):
    F = _taylor()
    x = np.linspace(-1, 1, 1 << 17)
    result = F(x)
    err = capsys.readouterr().err
    operations = F.stats()["nodes"]
    assert f"numexpr: generating the evaluator of {operations:,} operations" in err
    assert f"numexpr: evaluating {operations:,} operations" in err
    assert "/131k" in err and "points" in err  # counted in points
    np.testing.assert_allclose(result, F.compile("numpy")(x), rtol=1e-12)


def test_small_evaluations_and_switched_off_bars_print_nothing(monkeypatch, capsys):
    F = _taylor()
    x = np.linspace(-1, 1, 1 << 17)
    monkeypatch.setattr(config, "progress_after", 0.0)
    F(x)  # progress None: bars only on a terminal, and pytest's stderr is none
    monkeypatch.setattr(config, "progress", False)
    F.compile("numpy")(x)
    monkeypatch.setattr(config, "progress", True)
    F(x[:1000])  # too few points to count
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("on", True), ("0", False),
                                                 ("auto", None), ("", None)])
def test_the_environment_switch(monkeypatch, value, expected):
    monkeypatch.setenv("SYMAD_PROGRESS", value)
    assert config.progress_enabled() is expected
    monkeypatch.setattr(config, "progress", False)  # the attribute wins
    assert config.progress_enabled() is False


def test_a_bar_without_steps_keeps_its_clock_running(bars, capsys, monkeypatch):
    import time

    from symad.compile import progress

    monkeypatch.setattr(progress, "TICK", 0.01)
    with progress_bar("numba: compiling 7 operations in one kernel", total=1, ticking=True) as done:
        time.sleep(0.45)  # tqdm redraws at most every 0.1 s
        done(1)
    err = capsys.readouterr().err
    assert err.count("numba: compiling 7 operations in one kernel") >= 3  # redrawn while waiting


@pytest.mark.skipif(not registry.numba_available(), reason="numba is not installed")
def test_numba_compiles_under_a_bar_once_per_layout(bars, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path))
    F = sd.grad(lambda x, y: np.sin(x) * y ** 3, argnums=(0, 1)).trace(0.5, 0.5)
    evaluate = F.compile("numba")
    x = np.linspace(0, 1, 50)
    evaluate(x, x)
    err = capsys.readouterr().err
    assert f"numba: compiling {F.stats()['nodes']} operations in one kernel" in err
    evaluate(x, x)
    assert "compiling" not in capsys.readouterr().err


@pytest.mark.parametrize("backend", sd.available_backends())
def test_a_graph_of_no_operations_evaluates_under_a_bar(bars, capsys, backend):
    # The identity has 0 operations: the bar says so (it once failed to format "0").
    F = sd.trace(lambda x: x, 0.0)
    x = np.linspace(0, 1, 1 << 16)
    np.testing.assert_array_equal(F.compile(backend)(x), x)
    assert f"{backend}: evaluating 0 operations" in capsys.readouterr().err
