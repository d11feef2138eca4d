"""Sparsity of array programs without unrolling, and sparse Jacobians and Hessians by graph colouring.

References: the unrolled program's pattern (``F.expand().sparsity()``, one
scalar node per element), central differences, and the grid energy's
analytic Hessian.
"""

import numpy as np
import pytest
import scipy.sparse

import symad as sd
import symad.numpy as snp
from symad import array_primitives as A
from symad.linalg_primitives import LINALG_PRIMITIVES
from symad.transforms.colouring import (
    column_colouring,
    hessian_colouring,
    hessian_sources,
    star_colouring,
)


def grid_energy(u):
    return (np.sum((u[1:, :] - u[:-1, :]) ** 2) + np.sum((u[:, 1:] - u[:, :-1]) ** 2)
            + np.sum((u ** 2 - 1) ** 2))


def grid_hessian(u):
    """The analytic Hessian of grid_energy: twice the grid's graph Laplacian plus diag(12 u^2 - 4)."""
    rows, columns = u.shape

    def path_laplacian(n):
        degrees = np.full(n, 2.0)
        degrees[0] -= 1.0
        degrees[-1] -= 1.0  # a path of one vertex: no neighbour
        return scipy.sparse.diags([-np.ones(n - 1), degrees, -np.ones(n - 1)], [-1, 0, 1])

    laplacian = (scipy.sparse.kron(path_laplacian(rows), scipy.sparse.identity(columns))
                 + scipy.sparse.kron(scipy.sparse.identity(rows), path_laplacian(columns)))
    return (2 * laplacian + scipy.sparse.diags(12 * u.ravel() ** 2 - 4)).tocsr()


def pack_with_base(x):
    out = snp.zeros(3)
    out[1] = x[0] * 2
    return out + x


PARAMETER = sd.Parameter(np.array([1.0, 2.0]), name="w")

# (function, example arguments): together they record every array primitive (checked below),
# elementwise ones with broadcasting, leading axes of seeds (Jacobian graphs), 0-d, size-1
# and empty axes, scalar nodes and element symbols beside array nodes.
PROGRAMS = {
    "broadcast product": (lambda x, y: x * y, (np.ones((3, 4)), np.ones(4))),
    "where": (lambda x, y: snp.where(x > 0, x, y), (np.ones((3, 4)), np.ones(4))),
    "sum over an axis": (lambda x: np.sum(x, axis=0), (np.ones((3, 4)),)),
    "max over an axis": (lambda x: np.max(x, axis=1), (np.ones((3, 4)),)),
    "min over all axes": (lambda x: np.min(x, axis=(0, 1)), (np.ones((2, 3)),)),
    "logsumexp": (lambda x: snp.logsumexp(x, axis=0), (np.ones((3, 4)),)),
    "matmul": (lambda x, w: x @ w, (np.ones((3, 4)), np.ones((4, 2)))),
    "batched einsum": (lambda a, b: np.einsum("bij,bjk->bik", a, b), (np.ones((2, 3, 4)), np.ones((2, 4, 2)))),
    "outer": (lambda a, b: np.outer(a, b), (np.ones(3), np.ones(2))),
    "dot": (lambda a, b: a @ b, (np.ones(3), np.ones(3))),
    "tensordot": (lambda a, b: np.tensordot(a, b, axes=2), (np.ones((2, 3, 4)), np.ones((3, 4)))),
    "reshape": (lambda x: x.reshape(6, 2), (np.ones((3, 4)),)),
    "transpose": (lambda x: x.T, (np.ones((3, 4)),)),
    "broadcast_to": (lambda v: np.broadcast_to(v, (3, 4)), (np.ones(4),)),
    "slice with a step": (lambda x: x[1:, ::2], (np.ones((3, 4)),)),
    "pad": (lambda x: np.pad(x, 1), (np.ones((3, 4)),)),
    "fancy index": (lambda x: x[[2, 0, 2]], (np.ones((3, 4)),)),
    "roll": (lambda x: np.roll(x, 1), (np.ones(4),)),
    "diagonal": (lambda x: np.diagonal(x), (np.ones((3, 3)),)),
    "scatter-add (gradient of a gather)": (
        lambda x: sd.grad(lambda v: np.sum(v[[0, 0, 2]] ** 2))(x), (np.ones(3),)),
    "concatenate": (lambda x, y: np.concatenate([x, y]), (np.ones(3), np.ones(2))),
    "cumsum": (lambda x: np.cumsum(x, axis=0), (np.ones((3, 2)),)),
    "reverse cumsum (its gradient)": (lambda x: sd.grad(lambda v: np.sum(np.cumsum(v) ** 2))(x), (np.ones(4),)),
    "pack of scalars": (lambda x: snp.stack([x[0], x[1] * 2]) + x[:2], (np.ones(3),)),
    "pack on a constant base": (pack_with_base, (np.ones(3),)),
    "scatter": (lambda x, v: x.at[1].set(v), (np.ones(3), 0.0)),
    "item assignment": (lambda x: x.at[0:2].set(x[1:] * 2), (np.ones(3),)),
    "scalar argument": (lambda x, s: x * s + s, (np.ones(3), 2.0)),
    "size-1 axis": (lambda x: np.sum(x, axis=1) * x[:, 0], (np.ones((3, 1)),)),
    "empty axis": (lambda x: np.sum(x, axis=0), (np.ones((0, 3)),)),
    "scalars beside arrays": (lambda x: (x[0] * x[2], np.sum(x) * x[1:]), (np.ones(3),)),
    "a Parameter": (lambda x: x[:2] * PARAMETER + x[2], (np.ones(3),)),
    "jacfwd (seeds as a leading axis)": (lambda x: sd.jacfwd(lambda v: np.sin(v[1:]) * v[:-1])(x), (np.ones(4),)),
    "jacrev (seeds as a leading axis)": (lambda x: sd.jacrev(lambda v: np.cumsum(v[1:] * v[:-1]))(x),
                                         (np.ones(4),)),
    "dense hessian": (lambda x: sd.hessian(lambda v: np.sum(v[1:] ** 2 * v[:-1]))(x), (np.ones(4),)),
    "grid energy gradient": (sd.grad(grid_energy), (np.ones((4, 3)),)),
    "complex parts and modulus": (lambda z: (np.real(z) * np.imag(z[::-1]), np.conj(z) * np.abs(z)),
                                  (np.ones(3) * 1j,)),
    "sort and its gradient": (lambda x: sd.grad(lambda v: np.sum(np.sort(v, axis=0) ** 2))(x), (np.ones((3, 2)),)),
}


#: Programs with no per-element view (a sort's permutation is known only at run time), and
#: their pattern: each element of a sorted column may come from any element of the column.
NO_ELEMENT_VIEW = {"sort and its gradient": np.kron(np.ones((3, 3)), np.eye(2))}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_pattern_of_an_array_program_is_the_unrolled_one(name):
    function, args = PROGRAMS[name]
    F = sd.trace(function, *args)
    assert F.is_array_program
    pattern = F.sparsity()
    if name in NO_ELEMENT_VIEW:  # a sort has no per-element view: the pattern is stated
        np.testing.assert_array_equal(pattern.toarray(), NO_ELEMENT_VIEW[name])
        return
    expected = F.expand().sparsity()
    assert pattern.shape == expected.shape
    assert pattern.dtype == np.int8
    np.testing.assert_array_equal(pattern.toarray(), expected.toarray())


#: Fourier transforms: dense along their axes, no per-element form to compare with.
FOURIER = (lambda x: (np.fft.fft(x, axis=0), np.fft.rfft(x, axis=0), np.fft.irfft(x, n=4, axis=0)),
           (np.ones((3, 2)),))


def test_the_programs_record_every_array_primitive():
    recorded = set()
    for function, args in [*PROGRAMS.values(), FOURIER]:
        recorded |= {node.primitive for node in sd.trace(function, *args).graph.nodes}
    # Linear algebra has no per-element version to compare with: tests/test_linalg.py checks
    # its patterns (dense within each matrix of a stack).
    assert set(A.ARRAY_PRIMITIVES) - set(LINALG_PRIMITIVES) - recorded == set()


def test_a_fourier_transform_is_dense_along_its_axis_only():
    F = sd.trace(FOURIER[0], *FOURIER[1])
    pattern = F.sparsity().toarray()
    # Outputs (i, j) of each transform read inputs (k, j): every k, the same j (fft: 3 x 2
    # outputs, rfft: 2 x 2, irfft: 4 x 2).
    fft_rows, rfft_rows, irfft_rows = pattern[:6], pattern[6:10], pattern[10:]
    np.testing.assert_array_equal(fft_rows, np.kron(np.ones((3, 3)), np.eye(2)))
    np.testing.assert_array_equal(rfft_rows, np.kron(np.ones((2, 3)), np.eye(2)))
    np.testing.assert_array_equal(irfft_rows, np.kron(np.ones((4, 3)), np.eye(2)))


def test_sparsity_never_unrolls(monkeypatch):
    def refuse(function):
        raise AssertionError("unrolled")

    monkeypatch.setattr("symad.function.unroll", refuse)
    gradient = sd.grad(grid_energy).trace(np.zeros((200, 200)))
    pattern = gradient.sparsity()
    assert pattern.shape == (40_000, 40_000)
    assert pattern.nnz == 199_200  # 5-point stencil: 40,000 + 4 * 200 * 199
    assert sd.hessian(grid_energy, sparse=True)(np.zeros((200, 200))).nnz == 199_200


def test_sparse_hessian_of_the_200_by_200_grid():
    u = np.random.default_rng(1).standard_normal((200, 200))
    H = sd.hessian(grid_energy, sparse=True)(u)
    assert isinstance(H, scipy.sparse.csr_matrix)
    assert H.shape == (40_000, 40_000) and H.nnz == 199_200
    expected = grid_hessian(u)
    expected.sum_duplicates()
    np.testing.assert_array_equal(H.indptr, expected.indptr)
    np.testing.assert_array_equal(H.indices, expected.indices)
    np.testing.assert_allclose(H.data, expected.data, rtol=1e-14, atol=1e-12)


@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (4, 3), (6, 7)])
def test_sparse_hessian_of_small_grids_against_the_analytic_one(shape):
    u = np.random.default_rng(2).standard_normal(shape)
    H = sd.hessian(grid_energy, sparse=True)(u)
    expected = grid_hessian(u).toarray()
    np.testing.assert_allclose(H.toarray(), expected, rtol=1e-14, atol=1e-12)
    assert H.nnz == np.count_nonzero(expected)  # no entry more than the structure holds
    np.testing.assert_array_equal((H - H.T).toarray(), 0.0)  # exactly symmetric


def test_the_values_function_keeps_its_contract():
    u = np.random.default_rng(3).standard_normal((5, 4))
    HF = sd.hessian(grid_energy, sparse=True).trace(u)
    rows, columns, shape = HF.sparse_layout
    assert shape == (20, 20)
    values = HF(u)
    assert values.shape == rows.shape == columns.shape == (HF.sparse_layout[0].size,)
    rebuilt = scipy.sparse.csr_matrix((values, (rows, columns)), shape=shape)
    np.testing.assert_allclose(rebuilt.toarray(), grid_hessian(u).toarray(), rtol=1e-14, atol=1e-12)
    assert list(zip(rows.tolist(), columns.tolist())) == sorted(zip(rows.tolist(), columns.tolist()))
    colouring = HF.sparse_colouring
    assert colouring.method == "star" and colouring.count == int(colouring.colours.max()) + 1
    # One forward sweep whatever the grid's size: the graph does not grow with it.
    larger = sd.hessian(grid_energy, sparse=True).trace(np.zeros((30, 40)))
    assert larger.stats()["nodes"] == HF.stats()["nodes"]


def test_a_batch_of_points_gives_the_values_of_each():
    points = np.random.default_rng(4).standard_normal((3, 4, 4))
    HF = sd.hessian(grid_energy, sparse=True).trace(points[0])
    values = HF(points)
    assert values.shape == (3, HF.sparse_layout[0].size)
    for point, row in zip(points, values):
        np.testing.assert_allclose(row, grid_hessian(point).data, rtol=1e-14, atol=1e-12)
    with pytest.raises(sd.DifferentiationError, match="one point at a time"):
        sd.hessian(sd.trace(grid_energy, points[0]), sparse=True)(points)


def central_jacobian(function, x, step=1e-6):
    columns = []
    for k in range(x.size):
        delta = np.zeros(x.size)
        delta[k] = step
        delta = delta.reshape(x.shape)
        forward = np.concatenate([np.ravel(v) for v in np.atleast_1d(function(x + delta))])
        backward = np.concatenate([np.ravel(v) for v in np.atleast_1d(function(x - delta))])
        columns.append((forward - backward) / (2 * step))
    return np.stack(columns, axis=1)


# Building blocks of random programs: each maps a (4, 3) array to one of the same shape.
STEPS = [
    lambda u: np.sin(u) * u,
    lambda u: np.roll(u, 1, axis=0) - u,
    lambda u: np.pad(u[1:] * u[:-1], ((0, 1), (0, 0))),
    lambda u: u * np.sum(u, axis=0),
    lambda u: np.cumsum(u, axis=1),
    lambda u: np.concatenate([u[:, 1:], u[:, :1] ** 2], axis=1),
    lambda u: u[[3, 1, 0, 2]] + u,
    lambda u: u @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]),
    lambda u: snp.where(u > 0.3, u ** 2, 3 * u),
    lambda u: np.exp(-u) + np.tanh(u[::-1]),
]


def random_program(seed, length=3):
    chosen = np.random.default_rng(seed).integers(len(STEPS), size=length).tolist()

    def program(u):
        for index in chosen:
            u = STEPS[index](u)
        return u

    return program


@pytest.mark.parametrize("seed", range(12))
def test_sparse_jacobians_of_random_programs(seed):
    program = random_program(seed)
    x = np.random.default_rng(100 + seed).uniform(0.5, 1.5, (4, 3))
    J = sd.jacobian(program, sparse=True)(x)
    F = sd.trace(program, x)
    pattern = F.sparsity()
    np.testing.assert_array_equal(pattern.toarray(), F.expand().sparsity().toarray())
    assert (J.astype(bool) != pattern.astype(bool)).nnz == 0  # exactly the structural non-zeros
    np.testing.assert_allclose(J.toarray(), central_jacobian(program, x), rtol=1e-6, atol=1e-7)
    colouring = sd.jacobian(program, sparse=True).trace(x).sparse_colouring
    assert colouring.method == "distance-2"


@pytest.mark.parametrize("seed", range(12))
def test_sparse_hessians_of_random_programs(seed):
    program = random_program(seed, length=2)
    energy = lambda u: np.sum(program(u) * u)  # noqa: E731
    x = np.random.default_rng(200 + seed).uniform(0.5, 1.5, (4, 3))
    H = sd.hessian(energy, sparse=True)(x)
    gradient = sd.grad(energy)
    expected = central_jacobian(lambda u: gradient(u), x)
    np.testing.assert_allclose(H.toarray(), expected, rtol=1e-6, atol=1e-6)
    structure = sd.grad(energy).trace(x).sparsity()
    assert (H.astype(bool) != (structure + structure.T).astype(bool)).nnz == 0
    np.testing.assert_array_equal((H - H.T).toarray(), 0.0)


def test_sparse_jacobian_of_several_outputs_and_a_scalar_argument():
    def f(x, s):
        return x[1:] * x[:-1] * s, np.sum(x) + s, x[0] * s

    x = np.array([0.5, 1.5, -2.0, 3.0])
    J = sd.jacobian(f, sparse=True)(x, 2.0)
    assert J.shape == (5, 4)
    expected = np.array([[1.5, 0.5, 0, 0], [0, -2.0, 1.5, 0], [0, 0, 3.0, -2.0], [1, 1, 1, 1], [1, 0, 0, 0]])
    expected[:3] *= 2.0
    expected[4] *= 2.0
    np.testing.assert_array_equal(J.toarray(), expected)
    assert J.nnz == 11
    Js = sd.jacobian(f, argnums=1, sparse=True)(x, 2.0)
    np.testing.assert_array_equal(Js.toarray().ravel(), [0.75, -3.0, -6.0, 1.0, 0.5])


def test_sparse_jacobian_without_any_dependency():
    J = sd.jacobian(lambda x, y: y * 2.0, sparse=True)(np.ones(3), np.ones(2))
    assert J.shape == (2, 3) and J.nnz == 0


def test_scalar_programs_keep_one_sweep_per_column():
    def chain(x):  # element-level code: a scalar program
        return sum((x[i + 1] - x[i] ** 2) ** 2 for i in range(len(x) - 1))

    x = np.linspace(-1.0, 1.0, 6)
    HF = sd.hessian(chain, sparse=True).trace(x)
    assert HF.sparse_colouring is None
    assert not HF.is_array_program  # every entry one scalar atom
    np.testing.assert_allclose(sd.hessian(chain, sparse=True)(x).toarray(),
                               central_jacobian(lambda v: sd.grad(chain)(v), x), rtol=1e-7, atol=1e-7)


# ---------------------------------------------------------------------------
# The colourings
# ---------------------------------------------------------------------------


def random_symmetric(size, per_row, seed):
    pattern = scipy.sparse.random(size, size, density=per_row / size, random_state=seed, format="csr")
    return ((pattern + pattern.T + scipy.sparse.identity(size)) != 0).tocsr()


def assert_distance_2(pattern, colours):
    for row in range(pattern.shape[0]):
        members = colours[pattern.indices[pattern.indptr[row]:pattern.indptr[row + 1]]]
        assert len(set(members.tolist())) == members.size, f"row {row} has two columns of one colour"


def assert_star(pattern, colours):
    """Every non-zero recoverable from one row of H S: the definition star colouring guarantees."""
    dense = pattern.toarray()
    for i, j in zip(*np.nonzero(dense)):
        in_row_i = np.sum(colours[np.nonzero(dense[i])[0]] == colours[j])
        in_row_j = np.sum(colours[np.nonzero(dense[j])[0]] == colours[i])
        assert in_row_i == 1 or in_row_j == 1, (i, j)
    for i, j in zip(*np.nonzero(dense)):  # and a proper colouring
        assert i == j or colours[i] != colours[j]


@pytest.mark.parametrize("seed", range(5))
def test_colourings_are_valid(seed):
    jacobian_pattern = scipy.sparse.random(60, 40, density=0.08, random_state=seed, format="csr") != 0
    colouring = column_colouring(jacobian_pattern)
    assert_distance_2(jacobian_pattern.tocsr(), colouring.colours)
    symmetric = random_symmetric(50, 3, seed).tolil()
    symmetric[seed, :] = True  # a hub: adjacent to every vertex
    symmetric[:, seed] = True
    symmetric = symmetric.tocsr()
    star = star_colouring(symmetric)
    assert_star(symmetric, star.colours)
    assert star.count <= column_colouring(symmetric).count
    sources = hessian_sources(symmetric, star)  # raises if any entry could not be recovered
    assert sources.size == symmetric.nnz


def test_colourings_of_known_patterns():
    tridiagonal = scipy.sparse.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(30, 30), format="csr")
    assert column_colouring(tridiagonal).count == 3
    arrow = scipy.sparse.lil_matrix((40, 40))
    arrow.setdiag(1)
    arrow[0, :] = 1
    arrow[:, 0] = 1
    assert hessian_colouring(arrow).count == 2  # star: the hub, then every other vertex
    assert column_colouring(arrow).count == 40  # a full row: every column its own colour
    large_arrow = scipy.sparse.lil_matrix((20_000, 20_000))
    large_arrow.setdiag(1)
    large_arrow[0, :] = 1
    large_arrow[:, 0] = 1
    assert hessian_colouring(large_arrow.tocsr()).count == 2
    assert hessian_colouring(np.ones((6, 6))).count == 6
    dense = hessian_colouring(np.ones((30, 30)))
    assert (dense.method, dense.count) == ("distance-2", 30)  # star would cost 30^3 / 6 steps for as many


def test_grid_hessian_colouring():
    HF = sd.hessian(grid_energy, sparse=True).trace(np.zeros((20, 20)))
    rows, columns, shape = HF.sparse_layout
    pattern = scipy.sparse.csr_matrix((np.ones(rows.size), (rows, columns)), shape=shape)
    assert_star(pattern, HF.sparse_colouring.colours)
    assert HF.sparse_colouring.count <= 7  # the 5-point stencil needs at least 5


def test_sparse_jacobian_of_element_reads_beside_whole_arrays():
    def f(x):  # x[0], x[2] are element symbols; np.sin(x), x[1:] whole-array nodes
        return np.sin(x) * x[0] + snp.concatenate([x[1:] * x[2], snp.stack([x[0] ** 2])])

    x = np.array([0.3, -1.2, 0.7, 2.0])
    J = sd.jacobian(f, sparse=True)(x)
    np.testing.assert_allclose(J.toarray(), central_jacobian(f, x), rtol=1e-8, atol=1e-9)
    F = sd.trace(f, x)
    np.testing.assert_array_equal(J.toarray() != 0, F.expand().sparsity().toarray() != 0)


VECTOR_FUNCTIONS = [
    ("elementwise", lambda x: np.sin(x) * np.sum(x ** 2), np.array([0.1, 0.2, 0.3])),
    ("stacked scalars", lambda x: np.stack([x[0] * x[1], np.sin(x[2])]), np.array([0.1, 0.2, 0.3])),
    ("outer product", lambda x: np.outer(x, x ** 2), np.array([0.4, 0.7])),
    ("contraction", lambda x: np.einsum("ij,jk->ik", np.outer(x, x), np.outer(x, np.sin(x))),
     np.array([0.4, 0.7, 0.2])),
]


@pytest.mark.parametrize("name, function, x", VECTOR_FUNCTIONS, ids=[c[0] for c in VECTOR_FUNCTIONS])
def test_sparse_hessian_of_a_vector_function_holds_each_outputs_hessian(name, function, x):
    # hessian(sparse=True) of a vector function once gave the Hessian of the sum of the
    # outputs, shape (n, n), where the dense call gives one per output element. Now its rows
    # are (output element, first derivative) pairs: reshaped, the dense Hessian. Each
    # output's Hessian is also checked against central differences of its gradient.
    dense = sd.hessian(function)(x)
    sparse = sd.hessian(function, sparse=True)(x)
    out_size = int(np.prod(np.shape(function(x))))
    assert sparse.shape == (out_size * x.size, x.size)
    np.testing.assert_allclose(sparse.toarray().reshape(dense.shape), dense, rtol=1e-13, atol=1e-14)
    flat = lambda v: np.ravel(function(v))  # noqa: E731
    step = 1e-5
    for k in range(out_size):
        gradient = sd.grad(lambda v, k=k: flat(v)[k])
        differences = np.stack([(gradient(x + step * e) - gradient(x - step * e)) / (2 * step)
                                for e in np.eye(x.size)], axis=1)
        np.testing.assert_allclose(dense.reshape(out_size, x.size, x.size)[k], differences,
                                   rtol=1e-6, atol=1e-7)
