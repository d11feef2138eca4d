"""The on-disk cache of generated modules: keys, entries, safety, size bound, other processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.special
import sympy

import symad as sd
from symad import config
from symad.compile import disk_cache, pipeline
from symad.graph import GraphBuilder
from symad.primitives import PRIMITIVES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache turned on, in a private directory of this test's own."""
    directory = tmp_path / "cache"
    monkeypatch.setattr(config, "cache", True)
    monkeypatch.setattr(config, "cache_dir", str(directory))
    return directory


def _taylor():
    return sd.derivative(lambda x: np.tanh(x) * scipy.special.erf(x), 6).trace(0.7)


def _entries(directory):
    return sorted(p.name for p in (directory / "modules").glob("*.json"))


# ---------------------------------------------------------------------------
# The canonical form and the key
# ---------------------------------------------------------------------------


def test_equal_graphs_share_a_key_and_any_difference_changes_it():
    f = lambda x, y: np.sin(x * y) + 2.5 * x  # noqa: E731
    key = lambda F: disk_cache.entry_key(F.graph, "numexpr", "float64", "f")  # noqa: E731
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "cache", True)
        first, again = sd.trace(f, 0.0, 0.0), sd.trace(f, 1.0, 2.0)  # traced anew: new nodes
        assert disk_cache.canonical_form(first.graph) == disk_cache.canonical_form(again.graph)
        assert key(first) == key(again)
        for other in (lambda x, y: np.sin(x * y) + 2.4 * x, lambda x, y: np.cos(x * y) + 2.5 * x,
                      lambda x, y: np.sin(y * x + 0) + 2.5 * y):
            assert key(sd.trace(other, 0.0, 0.0)) != key(first)
        assert disk_cache.entry_key(first.graph, "numpy", "float64", "f") != key(first)
        assert disk_cache.entry_key(first.graph, "numexpr", "float32", "f") != key(first)
        assert disk_cache.entry_key(first.graph, "numexpr", "float64", "g") != key(first)
    assert key(first) is None  # turned off (the test suite's default)


def test_an_edited_or_reinstalled_compiler_changes_every_key(monkeypatch):
    # The fingerprint names each source file of the compiler by path, modification time
    # and size (what Python's bytecode cache trusts): touching one changes it.
    import types

    disk_cache._fingerprint.cache_clear()
    before = disk_cache._fingerprint("numexpr")
    real_stat = os.stat

    def touched(path, *args, **kwargs):
        status = real_stat(path, *args, **kwargs)
        if str(path).endswith(os.path.join("compile", "scalar", "numexpr_backend.py")):
            return types.SimpleNamespace(st_mtime_ns=status.st_mtime_ns + 1, st_size=status.st_size)
        return status

    monkeypatch.setattr(disk_cache.os, "stat", touched)
    disk_cache._fingerprint.cache_clear()
    try:
        assert disk_cache._fingerprint("numexpr") != before
    finally:
        monkeypatch.undo()
        disk_cache._fingerprint.cache_clear()
    assert disk_cache._fingerprint("numexpr") == before


def test_constants_are_written_exactly():
    x = sympy.Symbol("x")

    def graph(constant):
        builder = GraphBuilder()
        builder.add_input(x)
        return builder.finish([builder.record(PRIMITIVES["multiply"], (x, constant))])

    forms = {disk_cache.canonical_form(graph(c)) for c in
             (sympy.Float(0.1), sympy.Float(0.1 + 2**-55, 30), sympy.Rational(1, 10), sympy.Integer(3))}
    assert len(forms) == 4  # 0.1 in binary, a longer 0.1, the fraction 1/10 and 3 all differ


def test_unknown_parameter_kinds_are_refused_not_hashed():
    x = sympy.Symbol("x")
    builder = GraphBuilder()
    builder.add_input(x)
    node = builder.record(PRIMITIVES["sin"], (x,))
    graph = builder.finish([node])
    node.params = (("weights", np.arange(3.0)),)  # a kind the canonical form does not know yet
    with pytest.raises(disk_cache.NotCanonical, match="ndarray"):
        disk_cache.canonical_form(graph)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "cache", True)
        assert disk_cache.entry_key(graph, "numpy", "float64", "f") is None
    assert disk_cache._canonical_param((("axis", (0, 1)), ("keep", True), ("scale", 0.5))) == (
        ("axis", (("int", 0), ("int", 1))), ("keep", True), ("scale", ("float", "0x1.0000000000000p-1")))


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_a_second_function_of_the_same_graph_loads_the_entry_without_lowering(cache, backend,
                                                                             monkeypatch):
    x = np.linspace(-1, 1, 101)
    want = _taylor().compile("numpy")(x) if backend != "numpy" else None
    before = len(_entries(cache))
    first = _taylor()
    got = first.compile(backend)(x)
    assert len(_entries(cache)) == before + 1
    lowered = []
    monkeypatch.setattr(pipeline, "lower_module", lambda *a, **k: lowered.append(a))
    second = _taylor()
    again = second.compile(backend)(x)
    assert lowered == []  # served from the cache
    np.testing.assert_array_equal(again, got)
    if want is not None:
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert second.source(backend) == first.source(backend)


def test_externals_are_bound_from_the_graph_at_hand(cache):
    calls = []

    @sd.primitive
    def softsign(x):
        calls.append(len(x))
        return x / (1 + np.abs(x))

    @softsign.defpartials
    def _(x):
        return (1 / (1 + abs(x)) ** 2,)

    F = sd.trace(lambda x: softsign(x) * 2, 0.0)
    x = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(F(x), 2 * x / (1 + np.abs(x)), rtol=1e-15)
    meta = json.loads(next((cache / "modules").glob("*.json")).read_text())
    assert len(meta["externals"]) == 1 and "softsign" not in json.dumps(meta)  # data, no code
    G = sd.trace(lambda x: softsign(x) * 2, 0.0)
    calls.clear()
    got = G(x)
    assert calls == [9]  # this process's implementation, bound anew
    np.testing.assert_allclose(got, 2 * x / (1 + np.abs(x)), rtol=1e-15)


def _array_program(data):
    # An array program with a large constant (bound through EXTERNALS), a contraction and
    # elementwise steps: its gradient's module is an array module.
    return sd.grad(lambda w: np.sum(np.tanh(data @ w) ** 2)).trace(np.zeros(data.shape[1]))


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_array_programs_are_cached_with_their_constants_bound_from_the_graph(cache, backend,
                                                                             monkeypatch):
    rng = np.random.default_rng(0)
    data, w = rng.normal(size=(40, 30)), rng.normal(size=30) * 0.1
    want = 2 * data.T @ (np.tanh(data @ w) / np.cosh(data @ w) ** 2)
    first = _array_program(data)
    np.testing.assert_allclose(first.compile(backend)(w), want, rtol=1e-12)
    (meta_path,) = (cache / "modules").glob("*.json")
    meta = json.loads(meta_path.read_text())
    assert meta["array_module"] is not None
    assert any(how == "array" for how, *_ in meta["externals"])  # the data: bound, not stored
    assert not list((cache / "modules").glob("*.np*"))
    generated = []
    real = pipeline.lower_module
    monkeypatch.setattr(pipeline, "lower_module",
                        lambda *a, **k: generated.append(a) or real(*a, **k))
    second = _array_program(data)
    np.testing.assert_allclose(second.compile(backend)(w), want, rtol=1e-12)
    assert generated == []  # served from the cache
    other = _array_program(data + 1.0)  # other data: another key, lowered anew
    np.testing.assert_allclose(other.compile(backend)(w),
                               2 * (data + 1).T @ (np.tanh((data + 1) @ w) / np.cosh((data + 1) @ w) ** 2),
                               rtol=1e-12)
    assert len(generated) == 1 and len(_entries(cache)) == 2


def test_a_constant_array_is_bound_from_its_own_parameter_bit_for_bit(cache):
    # A and B differ only in the sign of a zero; arctan2 tells them apart. The entry must
    # bind B's parameter for B, not the first parameter equal to it in value.
    n = 1000
    a = np.arange(n, dtype=float)
    b = a.copy()
    b[0] = -0.0

    def f(x):
        return x * a + np.arctan2(b, x)

    x = -np.ones(n)
    for _ in range(2):  # generated, then from the cache
        got = sd.trace(f, np.zeros(n)).compile("numpy")(x)
        np.testing.assert_array_equal(got, x * a + np.arctan2(b, x))
    assert len(_entries(cache)) == 1


def test_exact_numbers_among_parameters_are_keyed_not_refused():
    # A gradient through max carries SymPy's exact 1 in a parameter (a fill's exact value):
    # it is written exactly, so such graphs are cached too.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "cache", True)
        key = lambda F: disk_cache.entry_key(F.graph, "numexpr", "float64", "f", compiler="arrays")  # noqa: E731
        first = key(sd.grad(lambda x: np.max(x) + np.sum(x ** 2)).trace(np.arange(5.0)))
        assert first is not None
        assert first == key(sd.grad(lambda x: np.max(x) + np.sum(x ** 2)).trace(np.ones(5)))
        assert first != key(sd.grad(lambda x: np.max(2 * x) + np.sum(x ** 2)).trace(np.ones(5)))


def test_array_shapes_are_part_of_the_key():
    f = lambda x: np.sum(np.sin(x))  # noqa: E731
    key = lambda F: disk_cache.entry_key(F.graph, "numexpr", "float64", "f", compiler="arrays")  # noqa: E731
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "cache", True)
        assert key(sd.grad(f).trace(np.zeros(3))) == key(sd.grad(f).trace(np.ones(3)))
        assert key(sd.grad(f).trace(np.zeros(3))) != key(sd.grad(f).trace(np.zeros(4)))
        assert key(sd.grad(f).trace(np.zeros(3))) != key(sd.grad(f).trace(np.zeros((3, 1))))


@pytest.mark.parametrize("damage", ["source", "code", "meta", "key", "truncated"])
def test_damaged_entries_are_ignored_and_rebuilt(cache, damage):
    x = np.linspace(-1, 1, 11)
    want = _taylor()(x)
    (meta_path,) = (cache / "modules").glob("*.json")
    stem = meta_path.with_suffix("")
    if damage == "source":
        Path(f"{stem}.py").write_text("raise SystemExit('never run')\n")
    elif damage == "code":
        data = bytearray(Path(f"{stem}.code").read_bytes())
        data[-3] ^= 0xFF
        Path(f"{stem}.code").write_bytes(bytes(data))
    elif damage == "meta":
        meta_path.write_text("{not json")
    elif damage == "key":
        meta = json.loads(meta_path.read_text())
        meta["key"] = "0" * 64
        meta_path.write_text(json.dumps(meta))
    else:
        Path(f"{stem}.code").write_bytes(Path(f"{stem}.code").read_bytes()[:20])
    assert disk_cache.load_entry(meta_path.stem, _taylor().graph) is None
    np.testing.assert_array_equal(_taylor()(x), want)  # lowered again, and written again
    assert disk_cache.load_entry(meta_path.stem, _taylor().graph) is not None


def test_a_directory_others_can_write_is_not_used(cache, caplog):
    (cache / "modules").mkdir(parents=True)
    os.chmod(cache, 0o777)
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(_taylor()(x), _taylor().compile("numpy")(x), rtol=1e-12)
    assert _entries(cache) == [] and "writable by no one else" in caplog.text


def test_the_cache_stays_within_its_size_bound_dropping_the_least_recently_used(cache, monkeypatch):
    for k in range(4):
        sd.trace(lambda x, k=k: np.sin(x) * (k + 1.5), 0.0)(np.ones(3))
    sizes = sum(p.stat().st_size for p in (cache / "modules").iterdir())
    entries = _entries(cache)
    assert len(entries) == 4
    monkeypatch.setattr(config, "cache_max_bytes", sizes // 2)
    newest = sorted((cache / "modules").glob("*.json"), key=lambda p: p.stat().st_mtime)[-1]
    disk_cache._evict(str(cache), config.cache_size_bound())
    left = _entries(cache)
    assert 0 < len(left) < 4 and newest.name in left
    assert sum(p.stat().st_size for p in (cache / "modules").iterdir()) <= 0.8 * sizes // 2 + 1
    stems = {p.name.split(".")[0] for p in (cache / "modules").iterdir()}
    assert stems == {name.split(".")[0] for name in left}  # no orphaned files


_CHILD = r"""
import sys, time
sys.path.insert(0, {root!r})
import numpy as np, scipy.special, symad as sd
from symad.compile import pipeline as compiler
F = sd.derivative(lambda x: np.tanh(x) * scipy.special.erf(x), 6).trace(0.7)
lowered = []
original = compiler.lower_module
compiler.lower_module = lambda *a, **k: lowered.append(1) or original(*a, **k)
value = F.compile({backend!r})(np.array([0.3]))
print(len(lowered), repr(float(value[0])))
"""


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
def test_a_second_process_skips_lowering(cache, backend):
    environment = dict(os.environ, SYMAD_CACHE="1", SYMAD_CACHE_DIR=str(cache))
    script = _CHILD.format(root=str(ROOT), backend=backend)
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=environment, timeout=300) for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr + runs[1].stderr
    (first_lowered, first_value), (second_lowered, second_value) = (run.stdout.split() for run in runs)
    assert (first_lowered, second_lowered) == ("1", "0") and first_value == second_value


def test_stores_scan_the_cache_only_now_and_then_and_still_keep_the_bound(cache, monkeypatch):
    # Every store once scanned every entry of the cache to decide on eviction: a session
    # compiling thousands of functions read 35,000 files per store. The size is now
    # measured at the first store, estimated after, and measured again every RESCAN_EVERY
    # stores or when the estimate passes the bound -- which eviction still keeps.
    monkeypatch.setattr(disk_cache, "_SIZE_ESTIMATES", {})
    monkeypatch.setattr(disk_cache, "RESCAN_EVERY", 4)
    scans = []
    original = disk_cache._evict
    monkeypatch.setattr(disk_cache, "_evict", lambda root, bound: scans.append(1) or original(root, bound))
    for k in range(10):
        sd.trace(lambda x, k=k: np.sin(x) * (k + 1.5), 0.0)(np.ones(3))
    assert len(_entries(cache)) == 10
    assert len(scans) == 2  # at the first store, and at the sixth (after four estimated)
    entry_bytes = sum(p.stat().st_size for p in (cache / "modules").iterdir()) / 10
    monkeypatch.setattr(config, "cache_max_bytes", int(12 * entry_bytes))
    for k in range(10, 16):  # past the bound by the estimate: measured, and evicted
        sd.trace(lambda x, k=k: np.sin(x) * (k + 1.5), 0.0)(np.ones(3))
    assert sum(p.stat().st_size for p in (cache / "modules").iterdir()) <= 12 * entry_bytes
    assert len(scans) > 2
