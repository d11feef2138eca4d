"""The optional numba backend (the fused loop); skipped cleanly without numba (dask: test_dask.py)."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp
from symad.compile import registry
from symad.compile.scalar import numba_backend
from tests.elements import element_trace


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "symad-cache"))


def mixed(x, y):
    return np.tanh(x * y) * np.exp(-y ** 2) + np.log(1 + x ** 2) + np.sqrt(x + y) * np.cos(x - y)


# ---------------------------------------------------------------------------
# numba
# ---------------------------------------------------------------------------

needs_numba = pytest.mark.skipif(not registry.numba_available(),
                                 reason="numba is not installed (pip install symad[fast])")


@needs_numba
def test_numba_gradient_matches_numpy_and_writes_its_cache(tmp_path_factory, caplog):
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0.2, 2, 1000), rng.uniform(0.2, 2, 1000)
    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    with caplog.at_level(logging.INFO, logger="symad"):
        evaluate = G.compile("numba")
    got = evaluate(x, y)
    want = G.compile("numpy")(x, y)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    assert G._evaluators[("numba", "float64")].note == "" == evaluate.note
    assert evaluate.cached_at.startswith(os.environ["SYMAD_CACHE_DIR"])
    assert "cached on disk" in caplog.text and evaluate.cached_at in caplog.text
    source = G.source("numba")
    assert "numba.prange(" in source and "cache=_CACHE" in source  # True when run from a file
    directory = os.path.join(os.environ["SYMAD_CACHE_DIR"], "numba")
    files = [name for _, _, names in os.walk(directory) for name in names]
    assert any(name.endswith(".py") for name in files)
    assert any(name.endswith(".nbi") for name in files)  # numba's on-disk index of machine code


@needs_numba
def test_numba_falls_back_for_an_operation_on_too_many_operands(caplog):
    # numba's type inference follows a 1,000-term sum one term at a time and overflows
    # the recursion limit; a 250-operand max nests past Python's 200 parentheses.
    v = np.random.default_rng(2).uniform(-1e8, 1e8, (5, 1000))
    for reduce, name in ((np.sum, "add"), (np.max, "reduce_max")):
        F = element_trace(lambda x, reduce=reduce: reduce(x), np.zeros(1000))
        with caplog.at_level(logging.WARNING, logger="symad"):
            evaluate = F.compile("numba")
        assert evaluate.note.startswith(f"numba backend: {name} of 1000 operands exceeds 128")
        np.testing.assert_array_equal(evaluate(v), F.compile("numpy")(v))


@needs_numba
def test_numba_broadcasts_scalar_inputs_and_parameters():
    w = sd.Parameter(np.array([2.0, -1.0]), name="w")
    F = sd.trace(lambda x, s: np.sum(np.sin(x * w)) * s, np.zeros(2), 0.0)
    x = np.random.default_rng(2).normal(size=(6, 2))
    np.testing.assert_allclose(F.compile("numba")(x, 3.0), np.sin(x * w.value).sum(-1) * 3.0,
                               rtol=1e-14)


@needs_numba
def test_numba_falls_back_to_numexpr_with_a_note(caplog):
    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    F = sd.trace(lambda x: softsign(x) + snp.logsumexp(np.stack([x, 2 * x])), 0.0)
    x = np.linspace(-2, 2, 9)
    with caplog.at_level(logging.WARNING, logger="symad"):
        evaluate = F.compile("numba")
    np.testing.assert_allclose(evaluate(x), F.compile("numpy")(x), rtol=1e-15)
    note = F._evaluators[("numba", "float64")].note
    assert "logsumexp" in note and "softsign" in note and "numexpr instead" in note
    assert evaluate.note == note and note in caplog.text and evaluate.cached_at is None


@needs_numba
def test_numba_falls_back_for_graphs_too_large_to_compile(monkeypatch):
    monkeypatch.setattr(numba_backend, "MAX_NUMBA_NODES", 3)
    F = sd.trace(lambda x: np.sin(np.cos(np.exp(x))) * x + 1, 0.0)
    np.testing.assert_allclose(F.compile("numba")(np.array([0.5])), F.compile("numpy")(np.array([0.5])))
    assert "exceed" in F._evaluators[("numba", "float64")].note


def test_numba_is_listed_only_when_importable():
    assert ("numba" in sd.available_backends()) == registry.numba_available()


@needs_numba
def test_numba_gradient_over_a_batch_of_vectors_reads_and_writes_strided_columns():
    def rosenbrock(v):
        return sum(100 * (v[i + 1] - v[i] ** 2) ** 2 + (1 - v[i]) ** 2 for i in range(3))

    X = np.random.default_rng(6).uniform(-2, 2, (500, 4))  # each coordinate a strided column
    G = sd.grad(rosenbrock).trace(np.zeros(4))
    got = G.compile("numba")(X)
    x0, x1, x2, x3 = X.T
    want = np.stack([
        -400 * x0 * (x1 - x0**2) - 2 * (1 - x0),
        200 * (x1 - x0**2) - 400 * x1 * (x2 - x1**2) - 2 * (1 - x1),
        200 * (x2 - x1**2) - 400 * x2 * (x3 - x2**2) - 2 * (1 - x2),
        200 * (x3 - x2**2),
    ], axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(G.compile("numexpr")(X), want, rtol=1e-12, atol=1e-9)


@needs_numba
def test_numba_asks_llvm_for_interleaved_loops_only_while_compiling_a_new_layout(monkeypatch):
    import types

    G = sd.grad(lambda x, y: np.sin(x) * y ** 2 - x * y, argnums=(0, 1)).trace(0.5, 0.5)
    evaluate = G.compile("numba")
    namespace = G._evaluators[("numba", "float64")]._evaluate.__globals__
    options = []
    monkeypatch.setitem(namespace, "_llvm", types.SimpleNamespace(set_option=lambda _, o: options.append(o)))
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-2, 2, 1000), rng.uniform(-2, 2, 1000)
    want = G.compile("numpy")(x, y)
    for got, expected in zip(evaluate(x, y), want):
        np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert options == ["-force-vector-interleave=4", "-force-vector-interleave=0"]
    evaluate(x, y)  # the same layout: compiled already, LLVM's options untouched
    assert len(options) == 2
    XY = np.stack([x, y], axis=-1)
    for got, expected in zip(evaluate(XY[:, 0], XY[:, 1]), want):  # strided: a new layout
        np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert options[2:] == ["-force-vector-interleave=4", "-force-vector-interleave=0"]


@needs_numba
def test_numba_source_runs_with_exec_like_the_other_backends(tmp_path):
    # Run with exec() it once failed: "cannot cache function '_kernel': no locator available".
    F = sd.grad(element_trace(lambda x: np.sum(np.sin(x) ** 2), np.ones(3))).trace(np.ones(3))
    source = F.source("numba")
    namespace: dict = {}
    exec(source, namespace)  # noqa: S102 - the module symad just generated
    points = np.linspace(0.1, 1.0, 12).reshape(3, 4)
    for got, want in zip(namespace["run"](*points), F(points.T).T):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    # Saved to a file and imported, it keeps numba's on-disk cache.
    import importlib.util

    path = tmp_path / "grad_module.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("grad_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module._CACHE is True and namespace["_CACHE"] is False
    np.testing.assert_allclose(module.run(*points)[0], namespace["run"](*points)[0], rtol=0)


@needs_numba
def test_numba_compiles_array_programs_to_loop_kernels_cached_on_disk(caplog):
    # Once numexpr's with a note; now fused loops (symad/loopnest/), no note.
    def energy(u):
        return np.sum((u[1:, :] - u[:-1, :]) ** 2) + np.sum((u ** 2 - 1) ** 2)

    u = np.random.default_rng(7).normal(size=(40, 30))
    G = sd.value_and_grad(energy).trace(u)
    assert G.is_array_program
    evaluate = G.compile("numba")
    assert evaluate.note == "" and evaluate.cached_at.startswith(os.environ["SYMAD_CACHE_DIR"])
    for got, want in zip(evaluate(u), G.compile("numpy")(u)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    source = G.source("numba")
    assert "def _k1(" in source and "numba.prange(" in source and "ne.evaluate" not in source
    directory = os.path.join(os.environ["SYMAD_CACHE_DIR"], "numba")
    files = [name for _, _, names in os.walk(directory) for name in names]
    assert any(name.endswith(".nbi") for name in files)  # the kernels' machine code, kept
    batch = np.stack([u, -u, 2 * u])  # a batch of points, one loop nest for all
    values, gradients = evaluate(batch)
    np.testing.assert_allclose(values, [energy(p) for p in batch], rtol=1e-13)
    np.testing.assert_allclose(gradients[1], G(batch[1])[1], rtol=1e-13)
