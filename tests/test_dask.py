"""dask arrays in, dask arrays out: the local schedulers and a dask.distributed LocalCluster.

Skipped cleanly without dask (``pip install symad[dask]``; CI installs it).
"""

from __future__ import annotations

import contextlib
import re
import socket
from pathlib import Path

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "symad-cache"))


def mixed(x, y):
    return np.tanh(x * y) * np.exp(-y ** 2) + np.log(1 + x ** 2) + np.sqrt(x + y) * np.cos(x - y)


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


def test_dask_distributed_local_cluster_runs_the_documented_code():
    """docs/compiler.md's cluster example, on a LocalCluster of two worker processes."""
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    f = lambda x, y: np.tanh(x * y) * np.exp(-y**2) + np.log(1 + x**2)  # noqa: E731
    gradient = sd.grad(sd.trace(f, 0.0, 0.0), argnums=(0, 1))
    rng = np.random.default_rng(5)
    x_values, y_values = rng.uniform(0.5, 2.0, 4000), rng.uniform(0.5, 2.0, 4000)
    with dashboard_port_taken(), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        gx, gy = gradient(da.from_array(x_values, chunks=1000), da.from_array(y_values, chunks=1000))
        got_x, got_y = client.compute([gx, gy], sync=True)
        workers = client.run(lambda: __import__("os").getpid())
    assert len(set(workers.values())) == 2  # two worker processes did the work
    want_x, want_y = sd.grad(f, argnums=(0, 1)).trace(0.0, 0.0).compile("numpy")(x_values, y_values)
    np.testing.assert_allclose(got_x, want_x, rtol=1e-13)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-13)


# ---------------------------------------------------------------------------
# No fixed port: the scheduler's web server must not need 8787
# ---------------------------------------------------------------------------
# distributed's scheduler always starts a web server (the dashboard, or without bokeh a
# page saying to install it, and its health and metrics routes). dashboard_address=None
# only turns the dashboard's pages off: the server still asks for port 8787, and when
# another program holds it distributed warns "Port 8787 is already in use", which the
# suite's filterwarnings = error turns into "Cluster failed to start". False is no
# better (it is not None, so the dashboard is on, at 8787). "127.0.0.1:0" lets the
# system pick a free port, on the loopback interface only.

DASHBOARD_PORT = 8787  # distributed's default
COMPILER_PAGE = Path(__file__).resolve().parents[1] / "docs" / "compiler.md"


@contextlib.contextmanager
def dashboard_port_taken():
    """127.0.0.1:8787 held by this process for the block, or by another one already."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        try:
            holder.bind(("127.0.0.1", DASHBOARD_PORT))
            holder.listen()
        except OSError:
            pass  # taken by another program: the case under test all the same
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe, \
                pytest.raises(OSError):
            probe.bind(("127.0.0.1", DASHBOARD_PORT))
        yield


def test_the_documented_cluster_starts_while_port_8787_is_taken():
    """docs/compiler.md's LocalCluster block, run as written, with the dashboard port taken."""
    pytest.importorskip("distributed", reason="dask.distributed is not installed")
    block = next(code for code in re.findall(r"```python\n(.*?)```", COMPILER_PAGE.read_text(), re.S)
                 if "LocalCluster(" in code)
    f = lambda x, y: np.tanh(x * y) * np.exp(-y**2) + np.log(1 + x**2)  # noqa: E731
    rng = np.random.default_rng(6)
    x_values, y_values = rng.uniform(0.5, 2.0, 2000), rng.uniform(0.5, 2.0, 2000)
    namespace = {"gradient": sd.grad(sd.trace(f, 0.0, 0.0), argnums=(0, 1)),
                 "x": da.from_array(x_values, chunks=500), "y": da.from_array(y_values, chunks=500)}
    with dashboard_port_taken():
        exec(compile(block, str(COMPILER_PAGE), "exec"), namespace)  # noqa: S102 - our own docs
    want_x, _ = sd.grad(f, argnums=(0, 1)).trace(0.0, 0.0).compile("numpy")(x_values, y_values)
    assert namespace["on_cluster"] == pytest.approx(want_x.mean(), rel=1e-12)
