"""Structural sparsity: F.sparsity(), and sparse Jacobians and Hessians that compute only non-zeros."""

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse

import symad as sd
import symad.numpy as snp


def rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def test_sparsity_pattern_of_a_traced_function():
    F = sd.trace(lambda v, w: (v[1:] * v[:-1], np.sin(w) + v[0]), np.zeros(3), 0.0)
    pattern = F.sparsity()
    assert scipy.sparse.issparse(pattern)
    assert pattern.toarray().tolist() == [[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 0, 1]]


def test_sparsity_of_a_gradient_is_the_hessian_pattern():
    G = sd.grad(rosenbrock).trace(np.zeros(6))
    pattern = G.sparsity().toarray()
    expected = np.eye(6, k=-1) + np.eye(6) + np.eye(6, k=1)
    np.testing.assert_array_equal(pattern, expected)


def test_sparsity_counts_constants_and_parameters():
    weight = sd.Parameter(np.array([1.0, 2.0]), name="w")
    F = sd.trace(lambda x: (x * weight, 3.0), 0.0)
    # inputs: x, then w[0], w[1]; outputs: x*w[0], x*w[1], the constant 3.
    assert F.sparsity().toarray().tolist() == [[1, 1, 0], [1, 0, 1], [0, 0, 0]]


@pytest.mark.parametrize("size", [5, 40])
def test_sparse_hessian_of_rosenbrock_matches_scipy(size):
    x = np.linspace(-1.2, 1.1, size)
    H = sd.hessian(rosenbrock, sparse=True)(x)
    assert isinstance(H, scipy.sparse.csr_matrix)
    assert H.shape == (size, size)
    assert H.nnz == 3 * size - 2  # tridiagonal: exactly the structural non-zeros
    np.testing.assert_allclose(H.toarray(), scipy.optimize.rosen_hess(x), rtol=1e-13, atol=1e-12)


def rosenbrock_by_elements(x):
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1))


def test_sparse_hessian_mirrors_the_upper_triangle():
    # A scalar program: each entry is one atom, the lower triangle's the upper's.
    H = sd.hessian(rosenbrock_by_elements, sparse=True).trace(np.zeros(5))
    rows, columns, shape = H.sparse_layout
    assert shape == (5, 5)
    atoms = dict(zip(zip(rows.tolist(), columns.tolist()), H.graph.outputs))
    assert len(atoms) == 13
    assert all(atoms[r, c] is atoms[c, r] for r, c in atoms)
    # An array program: both triangles read one entry of the compressed product.
    x = np.random.default_rng(0).uniform(-1, 1, 7)
    H = sd.hessian(rosenbrock, sparse=True)(x)
    assert H.nnz == 19
    np.testing.assert_array_equal((H - H.T).toarray(), 0.0)


def test_sparse_jacobian_matches_the_dense_one():
    f = lambda v: snp.stack([v[0] * v[3], np.sin(v[1]), v[2] ** 2 + v[0], 1.0])  # noqa: E731
    x = np.array([0.5, 1.5, -2.0, 3.0])
    J = sd.jacobian(f, sparse=True)(x)
    np.testing.assert_allclose(J.toarray(), sd.jacobian(f)(x), rtol=1e-15)
    assert J.nnz == 5  # the constant row has no entries
    assert sd.jacobian(f, sparse=True).trace(x).sparse_layout[2] == (4, 4)


def test_sparse_jacobian_of_a_scalar_argument_and_matrix_output():
    J = sd.jacobian(lambda t: snp.stack([[t, 2 * t], [t**2, 0.0]]), sparse=True)(3.0)
    assert J.shape == (4, 1)
    assert J.toarray().ravel().tolist() == [1.0, 2.0, 6.0, 0.0]


def test_sparse_errors_name_the_fix():
    with pytest.raises(sd.DifferentiationError, match="argnums must be one int"):
        sd.jacobian(rosenbrock, argnums=(0,), sparse=True)
    with pytest.raises(sd.DifferentiationError, match="has_aux is not supported"):
        sd.hessian(rosenbrock, has_aux=True, sparse=True)
    with pytest.raises(sd.DifferentiationError, match="pytree"):
        sd.hessian(lambda p: p["a"][0] * p["b"][0], sparse=True)({"a": np.ones(1), "b": np.ones(1)})
    doubled = sd.trace(lambda v: v * 2, np.zeros(3))  # core shape (3,): (2, 3) is a batch of 2
    with pytest.raises(sd.DifferentiationError, match="one point at a time"):
        sd.jacobian(doubled, sparse=True)(np.ones((2, 3)))
    values = sd.jacobian(doubled, sparse=True).trace(np.zeros(3))(np.ones((2, 3)))
    np.testing.assert_array_equal(values, np.full((2, 3), 2.0))  # the non-zeros over the batch
