"""Array programs as loop nests (symad/loopnest/): numba kernels and C loops.

Every array primitive, through both printers, against the NumPy backend's values
(and, for the programs of tests/test_arrays.py, against JAX's hard-coded
gradients); shapes with broadcasting, size-1 and empty axes; a batch of points;
the structure of the loops (fusion, loop ranges instead of branches, a C source
whose size does not depend on the arrays' sizes). numba tests are skipped only
where numba is not installed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp
from symad import array_primitives as A
from symad import loopnest as L
from symad.compile.arrays.numba_loops import PARALLEL_MIN_WORK
from symad.linalg_primitives import LINALG_PRIMITIVES
from symad.compile.registry import numba_available
from symad.compile.threads import numba_threads
from symad.pytree import tree_flatten
from tests.test_arrays import CASES, JAX_GRADIENTS
from tests.test_c_export import COMPILER, compile_c

needs_compiler = pytest.mark.skipif(COMPILER is None, reason="no C compiler (cc/gcc/clang) on PATH")
needs_numba = pytest.mark.skipif(not numba_available(),
                                 reason="numba is not installed (pip install symad[fast])")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "symad-cache"))


rng = np.random.default_rng(19)
X34 = rng.normal(size=(3, 4))
COLUMN, ROW = rng.normal(size=(3, 1)), rng.normal(size=(1, 4))
CUBE = rng.normal(size=(2, 3, 4))
ONES_AXES = rng.normal(size=(1, 3, 1))
EMPTY = np.zeros((0, 3))
BIG = rng.normal(size=(40, 40))  # products of 40**3 multiply-adds: BLAS in numba
WEIGHTS = rng.normal(size=(5, 60))  # more than 256 elements: a constant bound through EXTERNALS

#: Programs for the loops' own concerns, beside those of tests/test_arrays.py. Each is
#: ``(function, arguments)``; its outputs may be arrays.
LOOP_CASES = {
    "broadcast_column_row": (lambda c, r: (np.sin(c * r) + c - r, np.sum(np.exp(c + r), axis=0)), (COLUMN, ROW)),
    "size_one_axes": (lambda a: (a.reshape(3) * np.sum(a, axis=(0, 2)), np.transpose(a, (2, 1, 0)) ** 2),
                      (ONES_AXES,)),
    "empty_axes": (lambda e: (e * 2.0, np.sum(e, axis=0), np.sum(np.exp(e))), (EMPTY,)),
    "reductions_over_axes": (lambda x: (np.sum(x, axis=(0, 2)), np.max(x, axis=1), np.min(x, axis=(0, 1)),
                                        np.sum(np.max(x ** 2, axis=0))), (CUBE,)),
    "logsumexp_axes": (lambda x: (snp.logsumexp(x, axis=0), snp.logsumexp(x, axis=(1, 2)), snp.logsumexp(x)),
                       (CUBE,)),
    "cumsum_axes": (lambda x: (np.cumsum(x, axis=0), np.sum(np.cumsum(x, axis=1) ** 2)), (X34,)),
    "fancy_indices": (lambda x: (x[np.array([[0, 2], [1, 1]])], np.take(x, np.array([3, 0, 3]), axis=1),
                                 np.sum(np.sin(x[np.array([2, 2, 0])]))), (X34,)),
    "scatter_and_assign": (lambda x, v: (x.at[1:3, ::2].set(v[:2, :2] ** 2), x.at[0].set(3.0),
                                         x.at[np.array([0, 0, 2])].add(v[0, 0])), (X34, X34)),
    "pack_elements": (lambda x: snp.stack([x[0, 0] * x[1, 1], np.sin(x[2, 3]), x[0, 1]]) * np.sum(x), (X34,)),
    "concatenate_three": (lambda x, c: np.concatenate([x, c, x[:, :1] * 2.0], axis=1) ** 2, (X34, COLUMN)),
    "batched_einsum": (lambda x: (snp.einsum("bij,bjk->bik", x, np.transpose(x, (0, 2, 1))),
                                  snp.einsum("ij,ij->i", x[0], x[1]), np.tensordot(x, x, axes=([0, 1], [0, 1]))),
                       (CUBE,)),
    "blas_matmul": (lambda m: np.tanh(m @ m.T) @ m, (BIG,)),
    "strided_slices": (lambda x: (x[::-2, 1::3], x[2, ::-1], x[None, 1:, 2]), (X34,)),
    "constant_arrays": (lambda w: (w * WEIGHTS, np.sum(w * np.arange(300.0).reshape(5, 60))), (WEIGHTS,)),
    "powers_and_where": (lambda x, y: (np.where(x > y, x ** 3, np.abs(x) ** y), np.sum(x ** 2.5 > 0)),
                         (np.abs(X34) + 0.5, X34)),
    "pad_reflect": (lambda x: np.pad(x, ((1, 2), (0, 1)), mode="reflect") * np.pad(x, ((2, 1), (1, 0))), (X34,)),
}


#: Every program: those of tests/test_arrays.py (with JAX's gradients) and the above.
#: tests/test_arrays.py's sorting programs: the loop nests have no form for a sort yet
#: (symad.loopnest.planning.NO_LOOP_FORM); test_sorting_has_no_loop_form_and_says_so checks them.
SORTING = ("sort_rows", "argsort_gather_median")
PROGRAMS = {**{name: CASES[name] for name in sorted(CASES) if name not in SORTING}, **LOOP_CASES}
class Combined:
    """Programs as one function of all their arguments (each program its own copies)
    returning all their outputs, and the weighted sum of those outputs, whose gradient
    holds each program's: one trace and one compile for all of them (numba takes a
    second or more per compile)."""

    def __init__(self, programs: dict):
        self.programs = programs
        self.names = list(programs)
        self.counts = [len(programs[name][1]) for name in self.names]
        self.arguments = [np.asarray(a, dtype=float) for name in self.names for a in programs[name][1]]

    def outputs(self, *args):
        outputs, start = [], 0
        for name, count in zip(self.names, self.counts):
            outputs.append(self.programs[name][0](*args[start:start + count]))
            start += count
        return tuple(outputs)

    def total(self, *args):
        leaves = tree_flatten(self.outputs(*args))[0]
        return sum(np.sum(leaf * (1.0 + 0.1 * k)) for k, leaf in enumerate(leaves))

    def value_and_gradient(self):
        argnums = tuple(range(len(self.arguments)))

        def both(*args):
            return self.outputs(*args), sd.grad(self.total, argnums=argnums)(*args)

        return sd.trace(both, *self.arguments)

    def by_program(self, values) -> dict:
        """``(outputs, gradients)`` as ``{name: ([output arrays], [gradient arrays])}``."""
        outputs, gradients = values
        result, start = {}, 0
        for name, value, count in zip(self.names, outputs, self.counts):
            result[name] = ([np.asarray(v, dtype=float) for v in tree_flatten(value)[0]],
                            [np.asarray(g, dtype=float) for g in gradients[start:start + count]])
            start += count
        return result

    def assert_close(self, got, want, what: str) -> None:
        for name in self.names:
            for part, (a_list, b_list) in zip(("output", "gradient"), zip(got[name], want[name])):
                assert len(a_list) == len(b_list), name
                for k, (a, b) in enumerate(zip(a_list, b_list)):
                    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12,
                                               err_msg=f"{what}: {name}, {part} {k}")

    def assert_gradients_match_jax(self, got) -> None:
        """A program's outputs enter the total with weight 1 + 0.1 k (k: the output's
        position among all); JAX's gradients (tests/test_arrays.py) times that weight."""
        position = 0
        for name in self.names:
            outputs, gradients = got[name]
            if name in JAX_GRADIENTS:
                for g, reference in zip(gradients, JAX_GRADIENTS[name]):
                    np.testing.assert_allclose(g, (1.0 + 0.1 * position) * np.asarray(reference),
                                               rtol=1e-10, atol=1e-12, err_msg=name)
            position += len(outputs)


def _primitives(F) -> set:
    return {node.primitive for node in F.graph.nodes}


@pytest.fixture(scope="module")
def every_program():
    combined = Combined(PROGRAMS)
    return combined, combined.value_and_gradient()


def test_the_programs_hold_every_array_primitive(every_program):
    _, F = every_program
    assert F.is_array_program
    # The complex parts and Fourier transforms make complex programs, which the loop nests
    # (numba) do not take (they fall back loudly): tests/test_complex.py and test_fft.py.
    # Linear algebra has no loop form (LAPACK computes it): tests/test_linalg.py checks that
    # the numba backend falls back to numexpr for it.
    complex_only = {A.real_p, A.imag_p, A.conj_p, A.modulus_p, A.fft_p, A.rfft_p, A.irfft_p}
    missing = set(A.ARRAY_PRIMITIVES) - complex_only - set(LINALG_PRIMITIVES) - _primitives(F)
    missing -= L.planning.NO_LOOP_FORM
    assert not missing, sorted(p.name for p in missing)


@pytest.mark.parametrize("name", SORTING)
def test_sorting_has_no_loop_form_and_says_so(name, caplog):
    import logging

    f, args = CASES[name]
    F = sd.value_and_grad(f).trace(*args)
    assert {"argsort", "take_along", "take_along_add"} <= {p.name for p in _primitives(F)}
    with pytest.raises(sd.ExportError, match="no loop form for argsort.*in C"):
        F.to_c("f")
    if numba_available():
        with caplog.at_level(logging.WARNING, logger="symad"):
            evaluate = F.compile("numba")
        assert "no loop form for argsort" in evaluate.note and "numexpr instead" in evaluate.note
        value, gradient = evaluate(*args)
        assert value == pytest.approx(f(*args), rel=1e-14)
        np.testing.assert_allclose(gradient, JAX_GRADIENTS[name][0], rtol=1e-12)


@needs_numba
def test_every_array_primitive_and_its_gradient_through_numba_matches_numpy(every_program):
    combined, F = every_program
    evaluate = F.compile("numba")
    assert evaluate.note == ""
    assert "numba.prange(" in F.source("numba")
    got = combined.by_program(evaluate(*combined.arguments))
    combined.assert_close(got, combined.by_program(F.compile("numpy")(*combined.arguments)), "numba")
    combined.assert_gradients_match_jax(got)
    # A batch of points, every other argument the same at each (its extent 1).
    batch = [np.stack([a * (1.0 + 0.25 * p) for p in range(3)]) if k % 2 == 0 else a
             for k, a in enumerate(combined.arguments)]
    got, want = evaluate(*batch), F.compile("numpy")(*batch)
    for a, b in zip(tree_flatten(got)[0], tree_flatten(want)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# C
# ---------------------------------------------------------------------------


def build_c(F, name, tmp_path):
    """F.to_c(name) compiled with -Wall -Wextra -Werror and loaded (tests/test_c_export.py);
    a caller taking the arrays, and the source."""
    call = compile_c(F, name, tmp_path)

    def call_arrays(*arguments):
        return call(*np.concatenate([np.ravel(np.asarray(a, dtype=float)) for a in arguments]))

    return call_arrays, F.to_c(name)[0]


def _flat(values) -> np.ndarray:
    leaves = tree_flatten(values)[0]
    return np.concatenate([np.ravel(np.asarray(leaf, dtype=float)) for leaf in leaves]) if leaves \
        else np.zeros(0)


@needs_compiler
def test_every_program_and_its_gradient_through_c_matches_numpy(every_program, tmp_path):
    combined, F = every_program
    call, source = build_c(F, "every_program", tmp_path)
    got = call(*combined.arguments)
    want = _flat(F.compile("numpy")(*combined.arguments))
    by_program = combined.by_program(_unflatten_like(F, got))
    combined.assert_close(by_program, combined.by_program(F.compile("numpy")(*combined.arguments)), "C")
    combined.assert_gradients_match_jax(by_program)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _unflatten_like(F, flat):
    """The flat outputs of F's C function as F's outputs (a tuple of pytrees)."""
    from symad.pytree import tree_unflatten

    leaves, start = [], 0
    for shape in F.out_shapes:
        size = math.prod(shape)
        leaves.append(flat[start:start + size].reshape(shape))
        start += size
    return tree_unflatten(F.out_treedef, leaves)


# ---------------------------------------------------------------------------
# The benchmark programs, and the shape of the loops
# ---------------------------------------------------------------------------


def grid_energy(u):
    return np.sum((u[1:, :] - u[:-1, :]) ** 2) + np.sum((u[:, 1:] - u[:, :-1]) ** 2) + np.sum((u ** 2 - 1) ** 2)


def grid_energy_gradient(u):
    """dE/du by hand: each difference pulls on both its ends; the double well 4u(u² - 1)."""
    g = 4 * u * (u ** 2 - 1)
    dx, dy = u[1:, :] - u[:-1, :], u[:, 1:] - u[:, :-1]
    g[1:, :] += 2 * dx
    g[:-1, :] -= 2 * dx
    g[:, 1:] += 2 * dy
    g[:, :-1] -= 2 * dy
    return g


def wave(x):
    return np.sum(np.sin(x) * np.exp(-x ** 2))


def wave_gradient(x):
    return (np.cos(x) - 2 * x * np.sin(x)) * np.exp(-x ** 2)


U = rng.normal(size=(64, 48))
WAVE_X = rng.normal(size=5000)


def _kernels(F) -> list:
    return [description for description, _, _ in L.lower_loops(F.graph, batch=False).kernels]


def test_the_grid_gradient_is_one_loop_nest_without_branches():
    G = sd.grad(grid_energy).trace(U)
    assert len(_kernels(G)) == 1
    program = L.lower_loops(G.graph, batch=False)
    assert not _statements_of(program.body, L.If)  # the edges are loop ranges, not conditions
    # value_and_grad: the double well's sum is accumulated in the gradient's loop.
    V = sd.value_and_grad(grid_energy).trace(U)
    kernels = _kernels(V)
    assert any("reduce_sum" in k and "add" in k for k in kernels), kernels
    assert len(kernels) == 4  # two sums over other shapes, the fused one, the total


def _statements_of(statements, cls) -> list:
    found = []
    for statement in statements:
        if isinstance(statement, cls):
            found.append(statement)
        for part in ("body", "then", "orelse"):
            found += _statements_of(getattr(statement, part, ()) or (), cls)
    return found


def test_expensive_values_read_at_several_indices_get_a_buffer():
    # exp(x) is read at i and i + 1: computing it once per element needs a buffer; the
    # cheap square is computed again where read.
    F = sd.trace(lambda x: np.exp(x)[1:] * np.exp(x)[:-1] + (x * x)[1:] - (x * x)[:-1], WAVE_X)
    program = L.lower_loops(F.graph, batch=False)
    assert len(program.kernels) == 2 and "exp" in program.kernels[0][0]
    assert len(program.temporaries) == 1 and program.temporaries[0].shape == WAVE_X.shape
    # Read once per element, it stays in the loop of its reader.
    W = sd.grad(wave).trace(WAVE_X)
    assert len(L.lower_loops(W.graph, batch=False).kernels) == 1


@needs_compiler
def test_c_source_of_the_grid_gradient_does_not_grow_with_the_grid(tmp_path):
    sources = [sd.grad(grid_energy).trace(np.zeros((n, n))).to_c("grid_gradient")[0] for n in (8, 256)]
    small, large = (s.replace("256", "8").replace("255", "7").replace("65536", "64").replace("65280", "56")
                    for s in sources)
    assert small.count(";") == large.count(";") < 200
    assert small.count("for (long") == large.count("for (long")
    call, _ = build_c(sd.grad(grid_energy).trace(U), "grid_gradient", tmp_path)
    np.testing.assert_allclose(call(U), grid_energy_gradient(U).ravel(), rtol=1e-12, atol=1e-12)


@needs_compiler
def test_c_benchmark_gradients_match_their_formulas(tmp_path):
    call, _ = build_c(sd.value_and_grad(grid_energy).trace(U), "grid_value_and_gradient", tmp_path)
    got = call(U)
    assert got[0] == pytest.approx(grid_energy(U), rel=1e-12)
    np.testing.assert_allclose(got[1:], grid_energy_gradient(U).ravel(), rtol=1e-12, atol=1e-12)
    call, source = build_c(sd.grad(wave).trace(WAVE_X), "wave_gradient", tmp_path)
    np.testing.assert_allclose(call(WAVE_X), wave_gradient(WAVE_X), rtol=1e-13, atol=1e-15)
    assert source.count("for (long") == 1


@needs_numba
def test_numba_benchmark_gradients_match_their_formulas():
    G = sd.value_and_grad(grid_energy).trace(U)
    value, gradient = G.compile("numba")(U)
    assert value == pytest.approx(grid_energy(U), rel=1e-12)
    np.testing.assert_allclose(gradient, grid_energy_gradient(U), rtol=1e-12, atol=1e-12)
    W = sd.grad(wave)
    batch = np.stack([WAVE_X, -WAVE_X / 2])  # a batch of two points
    np.testing.assert_allclose(W.trace(WAVE_X).compile("numba")(batch), wave_gradient(batch),
                               rtol=1e-13, atol=1e-15)


@needs_numba
def test_threads_share_chunks_and_partial_sums_combine_in_order():
    # Long enough for several chunks of the first axis; reductions over it add one partial
    # sum per chunk, in chunk order: one thread or two give the same bits.
    x = rng.normal(size=(3 * L.CHUNK_ELEMENTS + 5, 3))
    F = sd.trace(lambda x: (np.sum(np.exp(x)), np.max(x, axis=0), np.cumsum(x, axis=1), np.sum(x, axis=1)), x)
    evaluator = F.evaluator("numba", np.float64)
    namespace = evaluator.run.__globals__
    serial = evaluator.run(x[None])
    namespace["PARALLEL_MIN_WORK"] = 0  # the parallel function, whatever the size
    try:
        with numba_threads(2):
            parallel = evaluator.run(x[None])
    finally:
        namespace["PARALLEL_MIN_WORK"] = PARALLEL_MIN_WORK
    assert "numba.prange(" in F.source("numba")
    assert len(_partial_buffers(F)) == 2  # the sum of all and the max over the first axis
    want = F.compile("numpy")(x)
    for a, b, c in zip(serial, parallel, want):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a[0], c, rtol=1e-12)


def _partial_buffers(F):
    program = L.lower_loops(F.graph, batch=True)
    return [b for b in program.temporaries if b.kind == "partial"]


@needs_numba
def test_numba_source_runs_standalone_once_its_externals_are_bound():
    F = sd.grad(lambda w: np.sum(np.tanh(w * WEIGHTS) ** 2)).trace(WEIGHTS)
    namespace: dict = {}
    exec(F.source("numba"), namespace)  # noqa: S102 - the module symad just generated
    with pytest.raises(RuntimeError, match="EXTERNALS"):
        namespace["run"](WEIGHTS[None])
    namespace["EXTERNALS"][:] = F.evaluator("numba", np.float64).module.externals
    (got,) = namespace["run"](WEIGHTS[None])
    np.testing.assert_allclose(got[0], F(WEIGHTS), rtol=1e-13)


@needs_numba
def test_numba_evaluates_float32_in_float32():
    G = sd.grad(wave).trace(WAVE_X)
    x = WAVE_X.astype(np.float32)
    got = G.compile("numba")(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, wave_gradient(WAVE_X), rtol=1e-5, atol=1e-6)


@needs_numba
def test_numba_falls_back_to_numexpr_for_a_primitive_without_a_loop_form(caplog):
    import logging

    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    F = sd.trace(lambda x: np.sum(softsign(x) * x), WAVE_X)
    with caplog.at_level(logging.WARNING, logger="symad"):
        evaluate = F.compile("numba")
    assert "no loop form for softsign" in evaluate.note and "numexpr instead" in evaluate.note
    assert evaluate.note in caplog.text
    assert float(evaluate(WAVE_X)) == pytest.approx(float(np.sum(WAVE_X ** 2 / (1 + np.abs(WAVE_X)))))


def test_c_export_names_a_primitive_without_a_c_form():
    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    with pytest.raises(sd.ExportError, match="softsign.*in C"):
        sd.trace(lambda x: np.sum(softsign(x)), WAVE_X).to_c("f")


@needs_numba
def test_numba_falls_back_for_array_programs_too_large_to_compile(monkeypatch):
    from symad.compile.scalar import numba_backend

    monkeypatch.setattr(numba_backend, "MAX_NUMBA_NODES", 3)
    F = sd.grad(wave).trace(WAVE_X)
    evaluate = F.compile("numba")
    assert "exceed 3" in evaluate.note and "numexpr instead" in evaluate.note
    np.testing.assert_allclose(evaluate(WAVE_X), wave_gradient(WAVE_X), rtol=1e-13, atol=1e-15)


def test_long_chains_are_written_in_pieces_without_recursion_limits(tmp_path):
    # 300 inlined operations deep: each piece of MAX_INLINE_DEPTH is read from the last one's
    # buffer, so neither the lowering nor numba's typing nests past Python's limits.
    def chain(x):
        for _ in range(100):
            x = x * 0.99 + 0.01 * x[::-1]
        return np.sum(x ** 2)

    x = np.linspace(-1.0, 1.0, 7)
    G = sd.grad(chain).trace(x)
    program = L.lower_loops(G.graph, batch=False)
    assert len(G.graph.nodes) > 10 * L.MAX_INLINE_DEPTH and len(program.kernels) > 10
    if COMPILER is not None:
        call, _ = build_c(G, "long_chain", tmp_path)
        np.testing.assert_allclose(call(x), G.compile("numpy")(x), rtol=1e-12)


@needs_numba
def test_numba_falls_back_for_an_array_returned_element_by_element(caplog):
    # A constant array returned beside the result is one output per element: past
    # MAX_NUMBA_ARRAYS the loops would take numba minutes (1,000 elements: 35 s), so the
    # backend falls back to numexpr with a note, as for scalar graphs.
    import logging

    rng = np.random.default_rng(0)
    constant, x = rng.normal(size=1000), rng.normal(size=1000)
    F = sd.trace(lambda x: (np.sum(x ** 2), constant), x)
    with caplog.at_level(logging.WARNING, logger="symad"):
        value, returned = F.compile("numba")(x)
    assert "scalar outputs exceed" in caplog.text and "numexpr instead" in caplog.text
    np.testing.assert_array_equal(returned, constant)
    assert value == pytest.approx(np.sum(x ** 2), rel=1e-14)
