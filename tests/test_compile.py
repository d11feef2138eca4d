"""The compiler: passes, backends agreeing with each other, blocking, threads, source, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numexpr
import numpy as np
import pytest
import scipy.special
import sympy

import symad as sd
import symad.numpy as snp
from symad.compile import memory, threads
from symad.compile.scalar import numexpr_backend
from symad.compile.scalar import program as program_module
from symad.compile.scalar.program import compile_program, max_live
from tests.elements import element_trace

BACKENDS = ["numexpr", "numpy"]


def _rng():
    return np.random.default_rng(7)


# ---------------------------------------------------------------------------
# Every primitive on every backend: the same numbers as NumPy/SciPy
# ---------------------------------------------------------------------------

# name: (function of x, y, reference of x, y, domain)
ELEMENTWISE = {
    "arith": (lambda x, y: (x * y - x / y) ** 2 + -x, lambda x, y: (x * y - x / y) ** 2 - x, "pos"),
    "pow_symbolic": (lambda x, y: x ** y, lambda x, y: x ** y, "pos"),
    "pow_const": (lambda x, y: x ** 3 + y ** 0.5 + x ** -1.0 + x ** 2.5,
                  lambda x, y: x ** 3 + np.sqrt(y) + 1 / x + x ** 2.5, "pos"),
    "exp_log": (lambda x, y: np.exp(x) + np.log(y) + np.expm1(x) + np.log1p(y) + np.log10(y),
                lambda x, y: np.exp(x) + np.log(y) + np.expm1(x) + np.log1p(y) + np.log10(y), "pos"),
    "exp2_log2_cbrt": (lambda x, y: np.exp2(x) + np.log2(y) + np.cbrt(x - y),
                       lambda x, y: np.exp2(x) + np.log2(y) + np.cbrt(x - y), "pos"),
    "trig": (lambda x, y: np.sin(x) * np.cos(y) + np.tan(x / 4) + np.arctan2(y, x - 1),
             lambda x, y: np.sin(x) * np.cos(y) + np.tan(x / 4) + np.arctan2(y, x - 1), "pos"),
    "inverse_trig": (lambda x, y: np.arcsin(x / 3) + np.arccos(y / 3) + np.arctan(x),
                     lambda x, y: np.arcsin(x / 3) + np.arccos(y / 3) + np.arctan(x), "pos"),
    "hyperbolic": (lambda x, y: np.sinh(x) + np.cosh(y) + np.tanh(x * y) + np.arcsinh(x)
                   + np.arccosh(1 + y) + np.arctanh(x / 3),
                   lambda x, y: np.sinh(x) + np.cosh(y) + np.tanh(x * y) + np.arcsinh(x)
                   + np.arccosh(1 + y) + np.arctanh(x / 3), "pos"),
    "abs_sign": (lambda x, y: np.abs(x - y) + np.sign(x - 1), lambda x, y: np.abs(x - y) + np.sign(x - 1), "pos"),
    "max_min_hypot": (lambda x, y: np.maximum(x, y) - np.minimum(x, 2 * y) + np.hypot(x, y),
                      lambda x, y: np.maximum(x, y) - np.minimum(x, 2 * y) + np.hypot(x, y), "pos"),
    "special": (lambda x, y: snp.erf(x - 1) + snp.erfc(y) + snp.sigmoid(x - y) + snp.softplus(y - x),
                lambda x, y: scipy.special.erf(x - 1) + scipy.special.erfc(y)
                + scipy.special.expit(x - y) + np.logaddexp(0.0, y - x), "pos"),
    "logaddexp": (lambda x, y: np.logaddexp(x, 2 * y), lambda x, y: np.logaddexp(x, 2 * y), "pos"),
    "where": (lambda x, y: snp.where((x > 1) & (y < 1.5), x * y, snp.where(x <= y, -x, y)),
              lambda x, y: np.where((x > 1) & (y < 1.5), x * y, np.where(x <= y, -x, y)), "pos"),
    "clip": (lambda x, y: np.clip(x * y, 0.5, 2.0), lambda x, y: np.clip(x * y, 0.5, 2.0), "pos"),
}


def _points(domain: str, n: int = 101):
    rng = _rng()
    return rng.uniform(0.1, 2.5, n), rng.uniform(0.1, 2.5, n)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_backends_match_numpy_reference(case, backend):
    fun, reference, domain = ELEMENTWISE[case]
    x, y = _points(domain)
    F = sd.trace(fun, 1.0, 1.0)
    got = F.compile(backend)(x, y)
    with np.errstate(all="ignore"):
        want = reference(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_numexpr_float32_on_every_case(case):
    # numexpr types float32 separately (and spells it as Python's float): every
    # function it is given must exist for float32 too.
    fun, reference, domain = ELEMENTWISE[case]
    x, y = _points(domain)
    got = sd.trace(fun, 1.0, 1.0)(x.astype(np.float32), y.astype(np.float32))
    assert got.dtype == np.float32
    with np.errstate(all="ignore"):
        want = reference(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_gradients_agree_across_backends(case):
    fun = ELEMENTWISE[case][0]
    x, y = _points(ELEMENTWISE[case][2])
    G = sd.grad(fun, argnums=(0, 1)).trace(1.0, 1.0)
    results = {backend: G.compile(backend)(x, y) for backend in BACKENDS}
    for backend, result in results.items():
        for got, want in zip(result, results["numpy"]):
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13, err_msg=backend)


@pytest.mark.skipif("numba" not in sd.available_backends(), reason="numba is not installed")
def test_numba_matches_numpy_reference_on_every_case():
    # One graph holding every case (and one for their gradients): numba compiles
    # each kernel for a second or more, so the cases share a kernel.
    cases = sorted(ELEMENTWISE)
    x, y = _points("pos")
    F = sd.trace(lambda x, y: tuple(ELEMENTWISE[c][0](x, y) for c in cases), 1.0, 1.0)
    with np.errstate(all="ignore"):
        for case, got in zip(cases, F.compile("numba")(x, y)):
            np.testing.assert_allclose(got, ELEMENTWISE[case][1](x, y), rtol=1e-13, atol=1e-14,
                                       err_msg=case)
    G = sd.grad(lambda x, y: sum(ELEMENTWISE[c][0](x, y) for c in cases), argnums=(0, 1))
    G = G.trace(1.0, 1.0)
    for got, want in zip(G.compile("numba")(x, y), G.compile("numpy")(x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    assert G._evaluators[("numba", "float64")].note == ""


def test_default_backend_is_numexpr_and_transforms_use_it():
    f = lambda x, y: np.log(x) + x * y - np.sin(y)  # noqa: E731
    F = sd.trace(f, 2.0, 5.0)
    assert float(F(2.0, 5.0)) == pytest.approx(np.log(2) + 10 - np.sin(5), rel=1e-15)
    assert ("numexpr", "float64") in F._evaluators
    G = sd.grad(f, argnums=(0, 1)).trace(2.0, 5.0)
    gx, gy = G(np.array([1.0, 2.0]), 5.0)
    np.testing.assert_allclose(gx, [6.0, 5.5], rtol=1e-15)
    np.testing.assert_allclose(gy, [1 - np.cos(5), 2 - np.cos(5)], rtol=1e-15)
    assert list(G._evaluators) == [("numexpr", "float64")]


def test_evaluators_are_cached_per_backend_and_dtype():
    F = sd.trace(lambda x: np.sin(x) * 2, 0.0)
    F(np.ones(3))
    first = F._evaluators[("numexpr", "float64")]
    F(np.ones(5))
    assert F._evaluators[("numexpr", "float64")] is first
    F(np.ones(3, np.float32))
    assert set(F._evaluators) == {("numexpr", "float64"), ("numexpr", "float32")}


def test_custom_primitive_runs_inside_the_numexpr_evaluator():
    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    F = sd.trace(lambda x: softsign(np.sin(x)) * 3 + 1, 0.0)
    x = np.linspace(-3, 3, 11)
    np.testing.assert_allclose(F(x), 3 * np.sin(x) / (1 + np.abs(np.sin(x))) + 1, rtol=1e-14, atol=1e-15)
    assert "EXTERNALS[0]" in F.source()


def test_comparison_outputs_are_boolean_arrays():
    F = sd.trace(lambda x: (x > 1.0, x * 2), 0.0)
    above, doubled = F(np.array([0.5, 1.5]))
    assert above.dtype == np.bool_ and above.tolist() == [False, True]
    np.testing.assert_array_equal(doubled, [1.0, 3.0])


def test_reductions_logsumexp_and_parameters_over_a_batch():
    w = sd.Parameter(np.array([0.5, -1.0, 2.0]), name="w")
    F = sd.trace(lambda x: snp.logsumexp(x * w) + np.max(x * w) - np.min(x), np.zeros(3))
    x = _rng().normal(size=(7, 3))
    want = scipy.special.logsumexp(x * w.value, axis=-1) + np.max(x * w.value, axis=-1) - x.min(-1)
    for backend in sd.available_backends():
        np.testing.assert_allclose(F.compile(backend)(x), want, rtol=1e-14)


def test_empty_and_scalar_batches():
    F = sd.trace(lambda x, y: x * y + 1, 0.0, 0.0)
    assert F(np.zeros(0), 2.0).shape == (0,)
    value = F(2.0, 3.0)
    assert isinstance(value, np.float64) and value == 7.0


def test_non_finite_constants_in_expressions():
    F = sd.trace(lambda x: x * 1e308 * 10 + np.exp(x * 0) * 0, 1.0)
    with np.errstate(all="ignore"):
        assert np.isinf(F(1.0))
    G = sd.from_sympy(sympy.Symbol("x") + sympy.oo * 0 + 1, [sympy.Symbol("x")])
    assert np.isnan(G(1.0)) or np.isfinite(G(1.0))  # whatever SymPy folds, it evaluates


# ---------------------------------------------------------------------------
# The passes
# ---------------------------------------------------------------------------


def _logistic(iterations):
    def f(l):
        for _ in range(iterations):
            l = 4 * l * (1 - l)
        return l
    return f


def test_fuse_inlines_single_use_temporaries_into_one_expression():
    F = sd.trace(lambda x: np.sin(x) * np.cos(x) + x / (1 + x), 0.0)
    source = F.source("numexpr")
    programs = [line for line in source.splitlines() if line.startswith("_E")]
    assert len(programs) == 1
    for operation in ("'sin_dd'", "'cos_dd'", "'div_ddd'", "'mul_ddd'", "'add_ddd'"):
        assert operation in source
    assert "BUFFER_IS_BOOLEAN = ()" in source  # no full-size temporary at all


def test_fuse_inlines_single_use_temporaries_into_one_string_without_the_vm(monkeypatch):
    # Where numexpr's internals refuse assembled programs, regions are numexpr strings.
    monkeypatch.setattr(numexpr_backend, "_VM_USABLE", False)
    F = sd.trace(lambda x: np.sin(x) * np.cos(x) + x / (1 + x), 0.0)
    programs = [line for line in F.source("numexpr").splitlines() if line.startswith("_E")]
    assert len(programs) == 1
    assert "((sin(a0) * cos(a0)) + (a0 / (1.0 + a0)))" in programs[0]


@pytest.mark.parametrize("assembled", [True, False], ids=["vm-programs", "strings"])
def test_functions_numpy_computes_faster_are_numpy_steps_into_buffers(assembled, monkeypatch):
    # exp and tanh run as NumPy ufunc steps between two numexpr regions, writing into a
    # block buffer (out=) rather than a fresh array per block.
    if not assembled:
        monkeypatch.setattr(numexpr_backend, "_VM_USABLE", False)
    assert {"exp", "tanh", "log"} <= numexpr_backend.NUMPY_IS_FASTER
    assert not {"add", "multiply", "divide"} & numexpr_backend.NUMPY_IS_FASTER
    F = sd.trace(lambda x: np.tanh(np.exp(x * x + 1) * x) + x, 0.0)
    source = F.source("numexpr")
    programs = [line for line in source.splitlines() if line.startswith("_E")]
    # x*x + 1 and t + x are numexpr programs; e*x, one product, is a NumPy call too
    assert len(programs) == 2 and "exp" not in "".join(programs)
    calls = [line.strip() for line in source.splitlines() if "(b0, out=" in line or "out=b" in line]
    assert any(call.startswith("np.exp(b0, out=b") for call in calls)
    assert any(call.startswith("np.tanh(") and "out=" in call for call in calls)
    assert any(call.startswith("np.multiply(") and "out=" in call for call in calls)
    x = np.linspace(-1.5, 1.5, 101)
    np.testing.assert_allclose(F(x), np.tanh(np.exp(x * x + 1) * x) + x, rtol=1e-15)
    np.testing.assert_array_equal(F.compile("numexpr", block_size=7)(x), F(x))


@pytest.mark.parametrize("assembled", [True, False], ids=["vm-programs", "strings"])
def test_steps_of_the_same_shape_share_one_numexpr_program(assembled, monkeypatch):
    # The entries of a sparse Hessian differ only in their inputs: a NumExpr
    # program per entry made compiling Rosenbrock's (N = 1000) take seconds.
    if not assembled:
        monkeypatch.setattr(numexpr_backend, "_VM_USABLE", False)
    rosenbrock = element_trace(lambda x: np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2),
                               np.zeros(8))
    H = sd.hessian(rosenbrock, sparse=True).trace(np.zeros(8))
    source = H.source("numexpr")
    programs = [line for line in source.splitlines() if line.startswith("_E")]
    calls = [line for line in source.splitlines() if line.strip().startswith("E[") and "out=" in line]
    assert len(programs) <= 4 < len(calls)
    x = np.linspace(-1.2, 1.1, 8)
    np.testing.assert_allclose(H.compile("numexpr")(x), H.compile("numpy")(x), rtol=1e-15)


def test_regions_of_the_same_shape_are_lowered_once_and_keep_their_own_constants(monkeypatch):
    # Each region is lowered once per shape: 20 gradient entries of one shape make one
    # program, lowered once; regions that differ only in a constant (2 vs 3, and 2 vs
    # 2.0, which are equal in Python) must not share a program.
    lowered = []
    lower = numexpr_backend._lower_region
    monkeypatch.setattr(numexpr_backend, "_lower_region",
                        lambda *args: lowered.append(args[0]) or lower(*args))
    G = sd.grad(element_trace(lambda x: np.sum(np.sin(x) * np.cos(x * x)), np.zeros(20))).trace(
        np.zeros(20))
    assert "level by level" not in G.evaluator("numexpr", np.float64).note
    programs = [line for line in G.source("numexpr").splitlines() if line.startswith("_E")]
    assert len(programs) == 1 and len(lowered) == 1
    x = np.linspace(-2, 2, 20)
    np.testing.assert_allclose(G.compile("numexpr")(x),
                               np.cos(x) * np.cos(x * x) - 2 * x * np.sin(x) * np.sin(x * x),
                               rtol=1e-13, atol=1e-15)

    F = sd.trace(lambda x, y: snp.stack([snp.sin(x) * 2, snp.sin(y) * 3, (x > y) * 2.0]), 1.0, 1.0)
    got = F.compile("numexpr")(np.array([0.5, 2.0]), np.array([1.0, -1.0]))
    np.testing.assert_array_equal(  # one row per point
        got, [[2 * np.sin(0.5), 3 * np.sin(1.0), 0.0], [2 * np.sin(2.0), 3 * np.sin(-1.0), 2.0]])


@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_numexpr_strings_match_numpy_reference(case, monkeypatch):
    monkeypatch.setattr(numexpr_backend, "_VM_USABLE", False)
    fun, reference, domain = ELEMENTWISE[case]
    x, y = _points(domain)
    got = sd.trace(fun, 1.0, 1.0).compile("numexpr")(x, y)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got, reference(x, y), rtol=1e-13, atol=1e-14)


def test_logistic_gradient_is_one_numexpr_program_with_shared_values_in_registers():
    # 67 operations whose forward values are reused by the reverse sweep: one
    # virtual-machine program (one pass over memory), no block-sized temporary.
    G = sd.grad(_logistic(10)).trace(0.3)
    source = G.source("numexpr")
    programs = [line for line in source.splitlines() if line.startswith("_E")]
    assert len(programs) == 1 and programs[0].startswith("_E0 = _vm(['a0'], 'd', (1.0, 4.0, ), ")
    assert "BUFFER_IS_BOOLEAN = ()" in source
    assert source.count("out=o0, **_CALL)") == 1 and "out=b" not in source
    x = np.linspace(0.05, 0.95, 1001)
    want = np.ones_like(x)  # d l_10 / d l_0 by the chain rule, step by step
    l = x.copy()
    for _ in range(10):
        want = want * (4 - 8 * l)
        l = 4 * l * (1 - l)
    np.testing.assert_allclose(G(x), want, rtol=1e-9, atol=1e-6)  # 0 at x = 0.5
    np.testing.assert_allclose(G(x), G.compile("numpy")(x), rtol=1e-12)


def test_regions_recompute_cheap_shared_values_and_store_costly_ones():
    from symad.compile.scalar.program import build_program, fuse_regions
    # exp(x) feeds two outputs: stored once; 2*x feeds both too but is recomputed.
    F = sd.trace(lambda x: (np.exp(x) * (2 * x), np.sin(np.exp(x) + 2 * x)), 0.0)
    program = fuse_regions(build_program(F.graph), lambda instruction: True)
    by_result = {step.result: step for step in program.steps}
    stored = {step.instruction.primitive.name for step in program.steps}
    assert "exp" in stored and "multiply" in stored  # exp(x) and the first output
    doubled = [step for step in program.steps
               if any(i.primitive.name == "multiply" and 0 in i.operands for i in step.body)]
    assert len(doubled) == 2  # 2*x inside both output regions
    assert all(len(step.body) >= 1 for step in by_result.values())
    x = np.linspace(-1, 1, 7)
    first, second = F(x)
    np.testing.assert_allclose(first, np.exp(x) * 2 * x, rtol=1e-15)
    np.testing.assert_allclose(second, np.sin(np.exp(x) + 2 * x), rtol=1e-15)


def test_shared_values_stay_materialized_and_cheap_ones_are_recomputed():
    F = sd.trace(lambda x: np.exp(x) * np.sin(np.exp(x)) + (x * 2) * np.cos(x * 2), 0.0)
    program = compile_program(F.graph, lambda ins: True)
    materialized = {step.instruction.primitive.name for step in program.steps}
    assert "exp" in materialized  # shared, and too costly to recompute
    inlined_names = {ins.primitive.name for ins in program.inlined.values()}
    assert "multiply" in inlined_names  # x*2 is recomputed in both consumers
    np.testing.assert_allclose(F(0.3), np.exp(0.3) * np.sin(np.exp(0.3)) + 0.6 * np.cos(0.6),
                               rtol=1e-15)


def test_liveness_frees_each_temporary_once_after_its_last_use():
    G = sd.grad(_logistic(30)).trace(0.3)
    program = compile_program(G.graph, lambda ins: False)
    freed_at = {}
    for index, freed in enumerate(program.frees):
        for value in freed:
            assert value not in freed_at, "freed twice"
            freed_at[value] = index
    for index, step in enumerate(program.steps):
        for leaf in step.leaves:
            if leaf in freed_at:
                assert freed_at[leaf] >= index, "read after being freed"
    results = {step.result for step in program.steps}
    outputs = {o for o in program.outputs if isinstance(o, int)}
    assert set(freed_at) == results - outputs
    # Reverse mode keeps the forward values alive, but far fewer than all nodes at once.
    assert max_live(program) < len(program.steps)


def test_numexpr_buffers_are_reused():
    G = sd.grad(element_trace(lambda x: np.sum(np.sin(x) * np.exp(np.cos(x))), np.zeros(40))).trace(
        np.zeros(40))
    module_source = G.source("numexpr")
    buffers = next(line for line in module_source.splitlines() if line.startswith("BUFFER_IS_BOOLEAN"))
    steps = module_source.count("_CALL)")
    assert buffers.count("False") < steps / 2


def test_fused_expressions_are_capped(monkeypatch):
    monkeypatch.setattr(program_module, "MAX_REGION_OPERATIONS", 4)
    F = sd.trace(lambda x: np.sin(np.cos(np.sin(np.cos(np.sin(np.cos(x)))))) + 1, 0.0)
    programs = [line for line in F.source("numexpr").splitlines() if line.startswith("_E")]
    assert len(programs) >= 2
    x = np.linspace(-1, 1, 9)
    np.testing.assert_allclose(F(x), np.sin(np.cos(np.sin(np.cos(np.sin(np.cos(x)))))) + 1, rtol=1e-15)


# ---------------------------------------------------------------------------
# Blocked evaluation
# ---------------------------------------------------------------------------


def mixed(x, y):
    return np.tanh(x * y) * np.exp(-y ** 2) + np.log(1 + x ** 2) + np.sqrt(x + y) * np.cos(x - y)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("block_size", [1, 3, 64])
def test_small_blocks_give_identical_results(backend, block_size):
    rng = _rng()
    x, y = rng.uniform(0.2, 2, 1001), rng.uniform(0.2, 2, 1001)
    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    whole = G.compile(backend, block_size=10**6)(x, y)
    blocked = G.compile(backend, block_size=block_size)(x, y)
    for a, b in zip(whole, blocked):
        np.testing.assert_array_equal(a, b)


def test_blocks_with_broadcast_and_core_shapes():
    rng = _rng()
    H = sd.hessian(lambda v, s: np.sum(np.sin(v) * s) * np.prod(v)).trace(np.zeros(3), 0.0)
    v, s = rng.normal(size=(5, 4, 3)), rng.normal(size=(4,))
    whole = H.compile("numpy")(v, s)
    blocked = H.compile("numexpr", block_size=2)(v, s)
    assert blocked.shape == (5, 4, 3, 3)
    np.testing.assert_allclose(blocked, whole, rtol=1e-14, atol=1e-14)


def test_block_size_keeps_the_working_set_bounded():
    from symad.compile.scalar.source import WORKING_SET_BYTES, block_size_for

    for temporaries in (1, 10, 100, 1000):
        block = block_size_for(temporaries, 8)
        assert block * temporaries * 8 <= WORKING_SET_BYTES or block == 1 << 12


# ---------------------------------------------------------------------------
# Threads and dtypes
# ---------------------------------------------------------------------------


def _thread_spy(pause=0.0):
    seen = []

    @sd.primitive
    def spy(x):
        seen.append((numexpr.get_num_threads(), threading.get_ident()))
        time.sleep(pause)  # lets the other thread take a block (the sleep releases the GIL)
        return x

    return spy, seen


def test_threads_share_the_blocks_and_numexpr_runs_each_call_on_its_caller():
    # symad's threads take the blocks of a batch between them; numexpr is switched to one
    # thread for the call (each program then runs in the thread that calls it) and back.
    spy, seen = _thread_spy(pause=0.02)
    F = sd.trace(lambda x: spy(np.sin(x)) + 1, 0.0)
    x = np.linspace(0, 1, 100_000)
    original = numexpr.set_num_threads(2)
    previous = sd.set_num_threads(2)
    try:
        result = F(x)
        assert {count for count, _ in seen} == {1}  # numexpr serial inside the evaluation
        assert len({ident for _, ident in seen}) == 2  # both threads took blocks
        assert len(seen) >= 4  # several blocks each, so a busy core holds up little
        assert numexpr.get_num_threads() == 2  # numexpr's global setting restored after it
        np.testing.assert_allclose(result, np.sin(x) + 1, rtol=1e-15)
        seen.clear()
        np.testing.assert_array_equal(F.compile("numexpr", num_threads=1)(x), result)
        assert {ident for _, ident in seen} == {threading.get_ident()}  # the evaluator option wins
    finally:
        sd.set_num_threads(previous)
        numexpr.set_num_threads(original)


def test_wide_graphs_switch_numexpr_to_symads_threads_only_during_the_call(monkeypatch):
    # Level by level, each group is one large numexpr call on numexpr's own threads.
    monkeypatch.setattr(threads, "SMALL_BATCH", 4)
    spy, seen = _thread_spy()
    F = element_trace(lambda x: snp.sum(spy(np.sin(x)) * x), np.zeros(1200))
    assert "level by level" in F.evaluator("numexpr", np.float64).note
    x = np.linspace(0, 1, 1200 * 8).reshape(8, 1200)
    original = numexpr.set_num_threads(1)
    previous = sd.set_num_threads(2)
    try:
        np.testing.assert_allclose(F(x), np.sum(np.sin(x) * x, axis=1), rtol=1e-12)
        assert seen[-1][0] == 2  # symad's setting inside the evaluation
        assert numexpr.get_num_threads() == 1  # numexpr's global setting restored after it
    finally:
        sd.set_num_threads(previous)
        numexpr.set_num_threads(original)


def test_set_num_threads_validates_and_returns_previous():
    previous = sd.set_num_threads(3)
    try:
        assert sd.get_num_threads() == 3
        assert sd.set_num_threads(None) == 3
        assert sd.get_num_threads() == threads.default_num_threads()
        with pytest.raises(ValueError, match="positive int"):
            sd.set_num_threads(0)
    finally:
        sd.set_num_threads(previous if previous != threads.default_num_threads() else None)


@pytest.mark.parametrize("backend", sd.available_backends())
def test_float32_inputs_evaluate_in_float32(backend):
    rng = _rng()
    x = rng.uniform(0.2, 2, 50).astype(np.float32)
    y = rng.uniform(0.2, 2, 50).astype(np.float32)
    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    got = G.compile(backend)(x, y)
    want = G.compile("numpy")(x.astype(np.float64), y.astype(np.float64))
    for a, b in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5)
    mixed_dtypes = G.compile(backend)(x, y.astype(np.float64))
    assert mixed_dtypes[0].dtype == np.float64


def test_concurrent_calls_from_threads_are_correct():
    # One compiled numexpr module shared by several threads (dask's threaded
    # scheduler does this): NumExpr programs are not reentrant, evaluate() serialises.
    from concurrent.futures import ThreadPoolExecutor

    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    rng = _rng()
    batches = [(rng.uniform(0.2, 2, 300), rng.uniform(0.2, 2, 300)) for _ in range(40)]
    want = [G.compile("numpy")(x, y) for x, y in batches]
    evaluate = G.compile("numexpr", block_size=64)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda xy: evaluate(*xy), batches))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g[0], w[0], rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(g[1], w[1], rtol=1e-13, atol=1e-14)


# ---------------------------------------------------------------------------
# Generated source: standalone and safe
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_source_runs_in_a_namespace_without_symad(backend):
    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    source = G.source(backend)
    assert "symad" not in "\n".join(line for line in source.splitlines() if not line.startswith("#"))
    namespace: dict = {}
    exec(source, namespace)  # noqa: S102
    x, y = np.array([0.5, 1.0, 1.5]), np.array([1.2, 0.3, 0.9])
    gx, gy = namespace["run"](x, y)
    want = G.compile("numpy")(x, y)
    np.testing.assert_allclose(gx, want[0], rtol=1e-15)
    np.testing.assert_allclose(gy, want[1], rtol=1e-15)


@pytest.mark.parametrize("backend", ["numpy", "numexpr"])
def test_source_runs_as_an_isolated_subprocess(backend, tmp_path):
    G = sd.grad(lambda x, y: snp.erf(x) * np.exp(-y) + np.maximum(x, y), argnums=(0, 1)).trace(1.0, 1.0)
    path = tmp_path / "generated.py"
    path.write_text(G.source(backend))
    script = (
        "import importlib.util, sys\n"
        # symad may well be installed (CI installs it editable): block it, so the
        # generated module is shown to run without it.
        "sys.modules['symad'] = None\n"
        "try:\n    import symad\nexcept ImportError:\n    pass\n"
        "else:\n    raise SystemExit('symad must not be importable here')\n"
        f"spec = importlib.util.spec_from_file_location('generated', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "gx, gy = module.run([0.5, 1.5], 0.25)\n"
        "print(repr(gx.tolist()) + ';' + repr(gy.tolist()))\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    completed = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True,
                               cwd=str(tmp_path), env=environment, timeout=120)
    assert completed.returncode == 0, completed.stderr
    gx, gy = (eval(part) for part in completed.stdout.split(";"))  # noqa: S307 - our own repr
    want = G.compile("numpy")(np.array([0.5, 1.5]), 0.25)
    np.testing.assert_allclose(gx, want[0], rtol=1e-15)
    np.testing.assert_allclose(gy, want[1], rtol=1e-15)


@pytest.mark.parametrize("backend", ["numpy", "numexpr"])
def test_generated_source_is_the_same_in_every_process(backend):
    # String hashes differ between processes (PYTHONHASHSEED): nothing in code generation may
    # iterate a set of strings (the numexpr registers a region reused followed one, and the
    # module differed from run to run, values alike).
    script = (
        "import numpy as np, symad as sd\n"
        "def logistic(l):\n"
        "    x = 0.3\n"
        "    for _ in range(14):\n"
        "        x = l * x * (1 - x)\n"
        "    return x\n"
        f"print(sd.grad(logistic).trace(3.7).source({backend!r}))\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    sources = []
    for seed in ("1", "2", "3"):
        environment = {**os.environ, "PYTHONHASHSEED": seed,
                       "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                   env=environment, timeout=120)
        assert completed.returncode == 0, completed.stderr
        sources.append(completed.stdout)
    assert sources[0] == sources[1] == sources[2] and "def " in sources[0]


def test_user_names_only_reach_comments():
    evil = "f\nimport os; os.system('echo pwned')\r\x00"
    x = sympy.Symbol("x\nraise SystemExit('symbol')")
    F = sd.from_sympy(sympy.sin(x) * 2, [x])
    F.name = evil
    for backend in BACKENDS:
        source = F.source(backend)
        for line in source.splitlines():
            if "pwned" in line or "SystemExit" in line:
                assert line.lstrip().startswith("#"), line
        assert "\x00" not in source and "\r" not in source
        namespace: dict = {}
        exec(source, namespace)  # noqa: S102 - must not run any of the names
        np.testing.assert_allclose(namespace["run"](0.5)[0], 2 * np.sin(0.5), rtol=1e-15)


def test_numbers_are_printed_with_repr_float():
    F = sd.trace(lambda x: x * 0.1 + 1 / 3 * x ** 2, 0.0)
    source = F.source("numpy")
    assert repr(0.1) in source and repr(1 / 3) in source


# ---------------------------------------------------------------------------
# Backends and errors
# ---------------------------------------------------------------------------


def test_available_backends():
    backends = sd.available_backends()
    assert backends[:2] == ["numexpr", "numpy"]
    try:
        import numba  # noqa: F401
    except ImportError:
        assert "numba" not in backends
    else:
        assert "numba" in backends


def test_unknown_backend_is_a_compile_error_naming_it():
    F = sd.trace(lambda x: x + 1, 0.0)
    with pytest.raises(sd.CompileError, match=r"unknown backend 'fortran'.*'numexpr', 'numpy'"):
        F.compile("fortran")
    with pytest.raises(sd.CompileError, match="fortran"):
        F.source("fortran")
    assert issubclass(sd.CompileError, RuntimeError)


def test_numexpr_regions_that_pass_a_value_through_copy_it_into_the_result():
    # An output that is an input under stop_gradient, and a comparison output: each
    # region's result register is written by its last operation.
    F = sd.trace(lambda x: (sd.stop_gradient(x) * 1.0, np.sin(x) ** 1.0, x > 0.5), 0.0)
    x = np.array([0.2, 0.9])
    same, sine, above = F(x)
    np.testing.assert_array_equal(same, x)
    np.testing.assert_allclose(sine, np.sin(x), rtol=1e-15)
    np.testing.assert_array_equal(above, [False, True])


@pytest.mark.parametrize("assembled", [True, False], ids=["vm-programs", "strings"])
def test_division_by_a_power_of_two_is_an_exact_multiplication(assembled, monkeypatch):
    # x / 2**k is rewritten as x * 2**-k (exact); other divisors stay divisions.
    if not assembled:
        monkeypatch.setattr(numexpr_backend, "_VM_USABLE", False)
    F = sd.trace(lambda x: (x / 4.0, x / 0.5, x / 3.0, np.sin(x) / 1024.0), 0.0)
    x = np.linspace(-3.0, 3.0, 101)
    got = F.compile("numexpr")(x)
    want = (x / 4.0, x / 0.5, x / 3.0, np.sin(x) / 1024.0)
    for index in (0, 1, 3):  # the powers of two: exact
        np.testing.assert_array_equal(got[index], want[index])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-15)  # numexpr may use 1/3 here


# ---------------------------------------------------------------------------
# Output arrays
# ---------------------------------------------------------------------------


def _vm_flags(address: int) -> list[str]:
    """The kernel's VmFlags of the mapping holding ``address`` (Linux /proc/self/smaps)."""
    current = None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                low, high = (int(part, 16) for part in head.split("-"))
                current = low <= address < high
            elif head == "VmFlags:" and current:
                return line.split()[1:]
    raise AssertionError("address not mapped")


@pytest.mark.skipif(memory._madvise is None, reason="the paging hint is Linux-only")
def test_large_outputs_are_kept_off_huge_pages_and_small_ones_untouched(monkeypatch):
    monkeypatch.setattr(memory, "SMALL_PAGES_FROM", 1 << 20)
    calls = []
    real = memory._madvise
    monkeypatch.setattr(memory, "_madvise", lambda *args: calls.append(args) or real(*args))
    big = memory.output_array((1 << 18, 2), np.float64)  # 4 MiB
    assert big.flags.owndata and big.flags.c_contiguous and big.shape == (1 << 18, 2)
    assert "nh" in _vm_flags(big.ctypes.data + big.nbytes // 2)  # the kernel took the hint
    (start, length, advice), = calls
    assert start % 4096 == 0 and big.ctypes.data <= start and start + length <= big.ctypes.data + big.nbytes
    assert advice == 15  # MADV_NOHUGEPAGE
    small = memory.output_array((1000,), np.float64)
    assert len(calls) == 1 and small.shape == (1000,)  # below the threshold: NumPy's own array


@pytest.mark.parametrize("backend", sd.available_backends())
def test_outputs_of_a_batch_of_vectors_are_one_c_contiguous_array_per_leaf(backend, monkeypatch):
    # The evaluator writes each scalar output into a column of the leaf's array:
    # nothing is stacked afterwards, and a large leaf gets the paging hint.
    monkeypatch.setattr(memory, "SMALL_PAGES_FROM", 1 << 10)
    G = sd.grad(lambda v: np.sum(v[1:] * v[:-1] ** 2)).trace(np.zeros(6))
    X = _rng().normal(size=(300, 6))
    got = G.compile(backend)(X)
    assert got.shape == (300, 6) and got.flags.c_contiguous
    want = np.zeros_like(X)
    want[:, 1:] += X[:, :-1] ** 2
    want[:, :-1] += 2 * X[:, 1:] * X[:, :-1]
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_a_wide_gradient_module_spells_its_output_kinds_briefly():
    # One literal per output (a tuple of 5,000 False) cost the loader more than the rest.
    import symad.compile as compile_package

    gradient = sd.grad(element_trace(lambda x: np.sum(np.sin(x) ** 2), np.zeros(5000))).trace(
        np.zeros(5000))
    module = compile_package.generate_module(gradient.graph, "numexpr", "float64", gradient.name)
    header = next(line for line in module.source.splitlines() if line.startswith("OUTPUT_IS_BOOLEAN"))
    assert header == "OUTPUT_IS_BOOLEAN = (False,) * 5000"
    mixed = element_trace(lambda x: (x > 0, x * 2.0, x < 1), np.zeros(3))
    module = compile_package.generate_module(mixed.graph, "numpy", "float64", mixed.name)
    namespace = {}
    exec(compile(module.source, "<generated>", "exec"), namespace)
    assert namespace["OUTPUT_IS_BOOLEAN"] == (True,) * 3 + (False,) * 3 + (True,) * 3


class _BlockFailed(Exception):
    pass


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_in_a_block_reaches_the_caller_as_it_was_raised(backend):
    # evaluate() catches what a block raises (in whichever thread ran it), stops handing out
    # blocks and re-raises that exception, the first one caught, in the caller.
    seen = []

    @sd.primitive
    def fragile(x):
        seen.append(np.size(x))
        if np.any(x > 0.5):
            raise _BlockFailed(f"fragile refused {float(np.max(x)):.3f}")
        return x

    F = sd.trace(lambda x: fragile(x) * 2.0, 0.0)
    evaluate = F.compile(backend, block_size=4)
    np.testing.assert_array_equal(evaluate(np.linspace(0.0, 0.5, 8)), np.linspace(0.0, 1.0, 8))
    seen.clear()
    with pytest.raises(_BlockFailed, match="fragile refused"):
        evaluate(np.linspace(0.0, 1.0, 40))  # 10 blocks of 4 points; the 6th holds 20/39 > 0.5
    # Blocks 1-6 were evaluated, and no block was handed out after the failure (other
    # threads, if there are any, may finish the blocks they hold).
    assert 6 <= len(seen) < 10 and set(seen) == {4}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_generated_evaluate_fills_strided_columns_block_by_block(backend):
    # A generated module's evaluate(inputs, outputs, n) takes 1-D inputs (or 0-d ones, the
    # same for every point) and 1-D outputs, either of which may be a strided column of a
    # batch of vectors. From STAGE_MIN_POINTS points on, strided columns are copied through
    # contiguous blocks and the outputs copied back, block by block; 0-d inputs are read as
    # they are. progress, if given, hears of every block's points.
    G = sd.grad(mixed, argnums=(0, 1)).trace(1.0, 1.0)
    namespace: dict = {}
    exec(G.source(backend), namespace)  # noqa: S102
    n = 1000
    assert n >= namespace["STAGE_MIN_POINTS"]
    points = _rng().uniform(0.2, 2.0, (n, 2))
    x = points[:, 0]  # a strided column
    for y in (points[:, 1], np.float64(0.7)):
        want = G.compile(backend)(np.ascontiguousarray(x), np.ascontiguousarray(y))
        results = np.full((n, 2), np.nan)
        done: list = []
        namespace["evaluate"]([x, np.asarray(y)], [results[:, 0], results[:, 1]], n,
                              block_size=128, threads=1, progress=done.append)
        np.testing.assert_array_equal(results[:, 0], want[0])
        np.testing.assert_array_equal(results[:, 1], want[1])
        assert sorted(done) == [104] + [128] * 7


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_generated_run_on_an_empty_batch(backend):
    # run() broadcasts its arguments; one of a single element is passed to evaluate as 0-d,
    # an empty one as the empty batch it is.
    namespace: dict = {}
    exec(sd.trace(mixed, 1.0, 1.0).source(backend), namespace)  # noqa: S102
    (empty,) = namespace["run"](np.zeros((0, 2)), 0.5)
    assert empty.shape == (0, 2)
    (one,) = namespace["run"](np.array([[0.7]]), 0.5)
    np.testing.assert_allclose(one, [[mixed(0.7, 0.5)]], rtol=1e-15)
