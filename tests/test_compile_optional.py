"""Optional backends and inputs: numba (the fused loop) and dask arrays. Skipped cleanly without them."""

from __future__ import annotations

import os

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp
from symad.compile import numba_backend


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "symad-cache"))


def mixed(x, y):
    return np.tanh(x * y) * np.exp(-y ** 2) + np.log(1 + x ** 2) + np.sqrt(x + y) * np.cos(x - y)


# ---------------------------------------------------------------------------
# numba
# ---------------------------------------------------------------------------

needs_numba = pytest.mark.skipif(not numba_backend.numba_available(),
                                 reason="numba is not installed (pip install symad[fast])")


@needs_numba
def test_numba_gradient_matches_numpy_and_writes_its_cache(tmp_path_factory):
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0.2, 2, 1000), rng.uniform(0.2, 2, 1000)
    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    got = G.compile("numba")(x, y)
    want = G.compile("numpy")(x, y)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    assert G._evaluators[("numba", "float64")].note == ""
    source = G.source("numba")
    assert "numba.prange(" in source and "cache=True" in source
    directory = os.path.join(os.environ["SYMAD_CACHE_DIR"], "numba")
    files = [name for _, _, names in os.walk(directory) for name in names]
    assert any(name.endswith(".py") for name in files)
    assert any(name.endswith(".nbi") for name in files)  # numba's on-disk index of machine code


@needs_numba
def test_numba_broadcasts_scalar_inputs_and_parameters():
    w = sd.Parameter(np.array([2.0, -1.0]), name="w")
    F = sd.trace(lambda x, s: np.sum(np.sin(x * w)) * s, np.zeros(2), 0.0)
    x = np.random.default_rng(2).normal(size=(6, 2))
    np.testing.assert_allclose(F.compile("numba")(x, 3.0), np.sin(x * w.value).sum(-1) * 3.0,
                               rtol=1e-14)


@needs_numba
def test_numba_falls_back_to_numexpr_with_a_note():
    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    F = sd.trace(lambda x: softsign(x) + snp.logsumexp(np.stack([x, 2 * x])), 0.0)
    x = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(F.compile("numba")(x), F.compile("numpy")(x), rtol=1e-15)
    note = F._evaluators[("numba", "float64")].note
    assert "logsumexp" in note and "softsign" in note and "numexpr instead" in note


@needs_numba
def test_numba_falls_back_for_graphs_too_large_to_compile(monkeypatch):
    monkeypatch.setattr(numba_backend, "MAX_NUMBA_NODES", 3)
    F = sd.trace(lambda x: np.sin(np.cos(np.exp(x))) * x + 1, 0.0)
    np.testing.assert_allclose(F.compile("numba")(np.array([0.5])), F.compile("numpy")(np.array([0.5])))
    assert "exceed" in F._evaluators[("numba", "float64")].note


def test_numba_is_listed_only_when_importable():
    assert ("numba" in sd.available_backends()) == numba_backend.numba_available()


# ---------------------------------------------------------------------------
# dask
# ---------------------------------------------------------------------------

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install symad[dask])")
import dask  # noqa: E402


def test_dask_array_in_dask_array_out():
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0.2, 2, 1000), rng.uniform(0.2, 2, 1000)
    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    gx, gy = G(da.from_array(x, chunks=300), y)
    assert isinstance(gx, da.Array) and isinstance(gy, da.Array)
    assert gx.chunks == ((300, 300, 300, 100),)
    with dask.config.set(scheduler="synchronous"):
        got = dask.compute(gx, gy)
    want = G.compile("numpy")(x, y)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-13)


def test_dask_with_core_shapes_broadcasting_and_transforms():
    rng = np.random.default_rng(4)
    v = rng.normal(size=(10, 3))
    s = rng.normal(size=(4, 1))
    f = lambda v, s: np.sum(np.sin(v) ** 2) * s + np.prod(v)  # noqa: E731
    J = sd.grad(sd.trace(f, np.zeros(3), 0.0), argnums=(0, 1))
    dv, ds = J(da.from_array(v, chunks=(4, 2)), s)  # the core axis is chunked too
    assert dv.shape == (4, 10, 3) and ds.shape == (4, 10)
    with dask.config.set(scheduler="sync"):
        got_dv, got_ds = dv.compute(), ds.compute()
    want_dv, want_ds = J(v, s)
    np.testing.assert_allclose(got_dv, want_dv, rtol=1e-14)
    np.testing.assert_allclose(got_ds, want_ds, rtol=1e-14)
    assert want_dv.shape == (4, 10, 3)


def test_dask_boolean_outputs_and_float32():
    x = np.linspace(-1, 1, 20, dtype=np.float32)
    F = sd.trace(lambda x: (x > 0, x * 2), 0.0)
    above, doubled = F(da.from_array(x, chunks=7))
    assert above.dtype == np.bool_ and doubled.dtype == np.float32
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_array_equal(above.compute(), x > 0)
        np.testing.assert_array_equal(doubled.compute(), x * 2)


def test_dask_chunks_run_in_worker_processes():
    """Chunk tasks carry the graph (not code), so they pickle and run in other processes."""
    w = sd.Parameter(1.5, name="w")
    G = sd.grad(sd.trace(lambda x: np.sin(x * w) * snp.erf(x), 0.0)).trace(0.0)
    x = np.linspace(-2, 2, 40)
    result = G(da.from_array(x, chunks=10))
    got = result.compute(scheduler="processes", num_workers=2)
    np.testing.assert_allclose(got, G.compile("numpy")(x), rtol=1e-14)
