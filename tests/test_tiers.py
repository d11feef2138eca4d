"""The default backend's tiers (symad.compile.tiers): F(...) starts with numexpr and moves
to a faster compiled backend once it has spent that backend's compile time.

Timing decides in use; here the threshold and the margin are set so that each test's
outcome is fixed whatever the machine's speed.
"""

import logging
import pickle
import threading

import numpy as np
import pytest

import symad as sd
from symad import config
from symad.compile import tiers
from symad.compile.tiers import Promotion


def logistic(x):
    for _ in range(6):
        x = 4 * x * (1 - x)
    return x


@pytest.fixture
def promoting(monkeypatch):
    """Promotion on, at the first call's end, and the second tier always kept."""
    monkeypatch.setattr(config, "promote", True)
    monkeypatch.setattr(tiers, "compile_estimate", lambda operations: 0.0)
    monkeypatch.setattr(tiers, "KEEP_RATIO", float("inf"))


def points(n=5000):
    return np.random.default_rng(1).uniform(0.05, 0.95, n)


def test_a_function_starts_with_numexpr_and_says_so():
    F = sd.grad(logistic).trace(0.3)
    assert F.tier == "numexpr"
    F(points())  # the suite runs with promotion off: nothing is watched
    assert F._promotion is None and F.tier == "numexpr"


def test_a_hot_function_moves_to_the_second_tier_and_keeps_its_values(promoting):
    F = sd.grad(logistic).trace(0.3)
    F._promotion = Promotion(F.name, len(F.graph.nodes), target="numpy")
    x = points()
    F(x)                              # numexpr: a first call with these shapes compiles
    first = F(x)                      # numexpr, then the trial of numpy
    assert F.tier == "numpy" and F._promotion.decided
    assert ("numpy", "float64") in F._evaluators
    later = F(x)                      # numpy from now on
    np.testing.assert_array_equal(later, F.compile("numpy")(x))
    np.testing.assert_allclose(first, later, rtol=1e-13)
    h = 1e-6                          # and both are the derivative
    np.testing.assert_allclose(later, (logistic(x + h) - logistic(x - h)) / (2 * h), rtol=1e-5, atol=1e-6)


def test_the_first_tier_stays_if_the_second_is_not_faster(promoting, monkeypatch):
    monkeypatch.setattr(tiers, "KEEP_RATIO", 0.0)  # no backend is infinitely faster
    F = sd.trace(lambda x: np.sin(x) * x, 0.0)
    F._promotion = Promotion(F.name, len(F.graph.nodes), target="numpy")
    F(points())
    F(points())
    assert F._promotion.decided and F.tier == "numexpr"


def test_nothing_is_compiled_before_the_time_is_spent(monkeypatch):
    monkeypatch.setattr(config, "promote", True)
    F = sd.trace(lambda x: np.exp(x) + x, 0.0)
    for _ in range(3):
        F(points(100))  # microseconds each, against a compile estimate of a second
    assert F._promotion is not None and not F._promotion.decided
    assert F._promotion.spent > 0
    assert set(F._evaluators) == {("numexpr", "float64")}


def test_promotion_can_be_turned_off(promoting, monkeypatch):
    monkeypatch.setattr(config, "promote", False)
    F = sd.trace(lambda x: x * x, 0.0)
    F(points())
    assert F._promotion is None and F.tier == "numexpr"
    monkeypatch.setattr(config, "promote", None)
    monkeypatch.setenv("SYMAD_PROMOTE", "off")
    F(points())
    assert F._promotion is None


def test_a_second_tier_that_fails_leaves_the_first_with_a_warning(promoting, caplog):
    F = sd.trace(lambda x: x * (1 - x), 0.0)
    F._promotion = Promotion(F.name, len(F.graph.nodes), target="no-such-backend")
    x = points()
    with caplog.at_level(logging.WARNING, logger="symad"):
        F(x)
        result = F(x)
    np.testing.assert_array_equal(result, x * (1 - x))
    assert F.tier == "numexpr" and F._promotion.decided
    assert "no-such-backend could not take over from numexpr" in caplog.text
    assert "unknown backend" in caplog.text


def test_numba_takes_over_a_hot_gradient(promoting, caplog):
    pytest.importorskip("numba")
    F = sd.grad(logistic).trace(0.3)
    x = points(20_000)
    expected = F.compile("numexpr")(x)
    with caplog.at_level(logging.INFO, logger="symad"):
        F(x)
        F(x)
    assert F.tier == "numba"
    assert "numba takes over" in caplog.text
    np.testing.assert_allclose(F(x), expected, rtol=1e-12)


def test_transforms_promote_the_function_they_keep(promoting):
    pytest.importorskip("numba")
    gradient = sd.grad(lambda v: np.sum(v[1:] * v[:-1]) - np.sum(v ** 2))
    v = np.linspace(-1.0, 1.0, 64)
    gradient(v)
    gradient(v)
    assert gradient.trace(v).tier == "numba"
    expected = np.zeros_like(v)
    expected[1:] += v[:-1]
    expected[:-1] += v[1:]
    expected -= 2 * v
    np.testing.assert_allclose(gradient(v), expected, rtol=1e-14, atol=1e-15)


def test_threads_calling_during_the_trial_all_get_values(promoting):
    F = sd.grad(logistic).trace(0.3)
    F._promotion = Promotion(F.name, len(F.graph.nodes), target="numpy")
    x = points()
    expected = F.compile("numpy")(x)
    results, errors = [], []

    def call():
        try:
            for _ in range(5):
                results.append(F(x))
        except BaseException as error:  # reported below
            errors.append(error)

    workers = [threading.Thread(target=call) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors and len(results) == 20
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=1e-13)
    assert F.tier == "numpy"


def test_a_pickled_function_starts_watching_again(promoting):
    F = sd.trace(lambda x: x * x, 0.0)
    F._promotion = Promotion(F.name, len(F.graph.nodes), target="numpy")
    F(points())
    F(points())
    assert F.tier == "numpy"
    G = pickle.loads(pickle.dumps(F))
    assert G._promotion is None and G.tier == "numexpr"


def test_the_compile_estimate_grows_with_the_graph():
    assert tiers.compile_estimate(800) > tiers.compile_estimate(10) > 0


def test_a_graph_numba_cannot_take_stays_without_a_warning(promoting, caplog, softsign_primitive):
    pytest.importorskip("numba")
    softsign = softsign_primitive  # a custom primitive: numba has no scalar form for it
    F = sd.grad(lambda x: softsign(x) * x).trace(0.5)
    x = points()
    with caplog.at_level(logging.INFO, logger="symad"):
        F(x)
        F(x)
    assert F._promotion.decided and F.tier == "numexpr"
    assert "numba cannot take this graph; numexpr stays" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("softsign" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
    expected = x / (1 + np.abs(x)) + x / (1 + np.abs(x)) ** 2
    np.testing.assert_allclose(F(x), expected, rtol=1e-12)


def test_a_first_call_with_new_shapes_is_never_the_yardstick(promoting):
    # Its time includes numexpr's compile: a second tier compared with it would look fast.
    F = sd.trace(lambda x: x * (1 - x), 0.0)
    F._promotion = Promotion(F.name, len(F.graph.nodes), target="numpy")
    F(points(100))
    F(points(200))
    assert not F._promotion.decided
    F(points(200))
    assert F._promotion.decided


def test_a_function_pickled_before_tiers_existed_still_evaluates():
    F = sd.trace(lambda x: x * (1 - x), 0.0)
    state = F.__getstate__()
    del state["_promotion"]  # as a pickle written by the version before tiers holds it
    G = sd.Function.__new__(sd.Function)
    G.__dict__.update(state)
    assert G.tier == "numexpr"
    np.testing.assert_array_equal(G(np.array([0.5, 2.0])), [0.25, -2.0])


# ---------------------------------------------------------------------------
# Early trials (issue 30): kernels numba fuses, and kernels an earlier process compiled
# ---------------------------------------------------------------------------


def grid_energy(u):
    return (np.sum((u[1:, :] - u[:-1, :]) ** 2) + np.sum((u[:, 1:] - u[:, :-1]) ** 2)
            + np.sum((u ** 2 - 1) ** 2))


@pytest.fixture
def own_cache(monkeypatch, tmp_path):
    """Promotion on, the disk cache on, in a directory of this test's own."""
    monkeypatch.setattr(config, "promote", True)
    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SYMAD_CACHE", raising=False)
    monkeypatch.setattr(config, "cache", None, raising=False)


def test_fused_array_programs_are_the_ones_without_contractions():
    u = np.ones((4, 5))
    assert tiers.fused_array_program(sd.grad(grid_energy).trace(u).graph)
    weights = np.ones((5, 3))
    assert not tiers.fused_array_program(sd.grad(lambda u: np.sum(np.tanh(u @ weights))).trace(u).graph)


def test_an_early_promotion_tries_the_second_tier_at_the_second_call(promoting):
    F = sd.grad(grid_energy).trace(np.ones((8, 8)))
    F._promotion = Promotion(F.name, len(F.graph.nodes), target="numpy", early=True)
    F._promotion.spent = -1e9  # no time spent would ever be enough: only "early" moves it
    u = np.random.default_rng(0).normal(size=(8, 8))
    F(u)
    assert not F._promotion.decided
    F(u)
    assert F._promotion.decided and F.tier == "numpy"


def test_the_default_moves_a_grid_gradient_to_numba_at_its_second_call(own_cache):
    pytest.importorskip("numba")
    u = np.random.default_rng(0).normal(size=(64, 64))
    F = sd.grad(grid_energy).trace(u)
    first = F(u)
    assert F._promotion.compile_seconds is None and F.tier == "numexpr"
    F(u)  # the trial: compiled, timed, and numba is the faster by several times here
    assert F._promotion.decided
    np.testing.assert_allclose(F(u), first, rtol=1e-12)
    h, direction = 1e-6, np.random.default_rng(1).normal(size=u.shape)
    central = (grid_energy(u + h * direction) - grid_energy(u - h * direction)) / (2 * h)
    assert np.sum(first * direction) == pytest.approx(central, rel=1e-7)


def test_without_the_disk_cache_only_time_spent_moves_a_function(monkeypatch):
    monkeypatch.setattr(config, "promote", True)
    monkeypatch.setenv("SYMAD_CACHE", "0")
    F = sd.grad(grid_energy).trace(np.ones((8, 8)))
    F(np.ones((8, 8)))
    assert F._promotion.compile_seconds is not None


def test_a_kernel_an_earlier_process_compiled_is_tried_at_the_second_call(own_cache):
    pytest.importorskip("numba")
    F = sd.grad(logistic).trace(0.3)           # a scalar graph: no early trial of its own
    assert not tiers.early_trial(F.graph, F.name, False)
    F.compile("numba")(points(10))             # as an earlier session would have
    G = sd.grad(logistic).trace(0.3)           # this session's function
    assert tiers.early_trial(G.graph, G.name, False)


def chain(x, depth=800):
    for _ in range(depth):
        x = np.sin(x) + 0.001 * x
    return x


def test_a_graph_too_large_for_numba_moves_to_the_tape(promoting, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(tiers, "tape_estimate", lambda operations: 0.0)
    F = sd.grad(chain).trace(0.3)
    assert tiers.second_tier(len(F.graph.nodes), False) == "tape"
    first = F(0.3)   # numexpr; the first call with these shapes is never the yardstick
    F(0.3)           # the trial: the tape is compiled-free and kept (KEEP_RATIO is inf here)
    assert F.tier == "tape" and F._promotion.decided
    assert F(0.3) == pytest.approx(first, rel=1e-12)
    h = 1e-6
    assert first == pytest.approx((chain(0.3 + h) - chain(0.3 - h)) / (2 * h), rel=1e-6)


def test_the_tape_as_second_tier_costs_what_numba_s_start_costs():
    assert tiers.tape_estimate(10_000) < tiers.compile_estimate(10_000) / 10
    assert tiers.second_tier(2_000, False) == "numba" and tiers.second_tier(2_001, False) == "tape"


def test_a_large_batch_is_not_the_tape_s_to_time(promoting, monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(tiers, "tape_estimate", lambda operations: 0.0)
    F = sd.grad(chain).trace(0.3)
    x = np.full(tiers.TAPE_MAX_POINTS + 1, 0.3)
    F(x)
    F(x)
    assert F._promotion.target == "tape" and not F._promotion.decided
    assert [backend for backend, _ in F._evaluators] == ["numexpr"]
