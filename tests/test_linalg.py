"""Linear algebra (issue 29): numpy.linalg and scipy.linalg as array primitives.

Table-driven: each function of the table is checked at random SPD or general matrices,
sizes 1 to 6 and stacks of them, for its value (NumPy's/SciPy's), its gradient and
forward tangent against central differences, its Hessian-vector product (forward over
reverse) against central differences of the gradient, and exact matrix-calculus
identities (d log det A = tr(A^-1 dA), d inv = -A^-1 dA A^-1). The graph does not grow
with the matrix size, and formulas print whole matrices (the gradient of log det A is
the inverse transposed).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import symad as sd
import symad.numpy as snp

RNG = np.random.default_rng(29)


def spd(n: int, lead: tuple = ()) -> np.ndarray:
    m = RNG.normal(size=lead + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def general(n: int, lead: tuple = ()) -> np.ndarray:
    return RNG.normal(size=lead + (n, n)) + 2 * n ** 0.5 * np.eye(n)


def lower(n: int, lead: tuple = ()) -> np.ndarray:
    return np.tril(general(n, lead))


def symmetric(d: np.ndarray) -> np.ndarray:
    return (d + np.swapaxes(d, -1, -2)) / 2


# name: (traced function of one matrix, NumPy/SciPy reference, matrix maker, symmetric
# directions only (the function reads one triangle), stacks allowed)
def _table(b):
    return {
        "slogdet-logabsdet": (lambda a: np.sum(np.linalg.slogdet(a)[1]),
                              lambda a: np.sum(np.linalg.slogdet(a)[1]), general, False, True),
        "slogdet-sign": (lambda a: np.sum(np.linalg.slogdet(a)[0] * a[..., 0, 0]),
                         lambda a: np.sum(np.linalg.slogdet(a)[0] * a[..., 0, 0]), general, False, True),
        "det": (lambda a: np.sum(np.linalg.det(a)), lambda a: np.sum(np.linalg.det(a)), general, False, True),
        "inv": (lambda a: np.sum(np.sin(np.linalg.inv(a))), lambda a: np.sum(np.sin(np.linalg.inv(a))),
                general, False, True),
        "solve-vector": (lambda a: np.sum(np.linalg.solve(a, b) ** 2),
                         lambda a: np.sum(np.linalg.solve(a, np.broadcast_to(b, a.shape[:-1])[..., None]) ** 2),
                         general, False, True),
        "solve-matrix": (lambda a: np.sum(np.linalg.solve(a, np.swapaxes(a, -1, -2) * 2) ** 2),
                         lambda a: np.sum(np.linalg.solve(a, np.swapaxes(a, -1, -2) * 2) ** 2),
                         general, False, True),
        "cholesky": (lambda a: np.sum(np.sin(np.linalg.cholesky(a))),
                     lambda a: np.sum(np.sin(np.linalg.cholesky(a))), spd, True, True),
        "cholesky-upper": (lambda a: np.sum(np.sin(np.linalg.cholesky(a, upper=True))),
                           lambda a: np.sum(np.sin(np.linalg.cholesky(a, upper=True))), spd, True, True),
        "matrix_power-3": (lambda a: np.sum(np.linalg.matrix_power(a, 3)),
                           lambda a: np.sum(np.linalg.matrix_power(a, 3)), general, False, True),
        "matrix_power--2": (lambda a: np.sum(np.linalg.matrix_power(a, -2)),
                            lambda a: np.sum(np.linalg.matrix_power(a, -2)), general, False, True),
        "solve_triangular-lower": (
            lambda a: np.sum(snp.linalg.solve_triangular(a, b, lower=True) ** 2),
            lambda a: np.sum(scipy.linalg.solve_triangular(a, b, lower=True) ** 2), lower, False, False),
        "solve_triangular-upper-T-unit": (
            lambda a: np.sum(snp.linalg.solve_triangular(a, np.outer(b, b) + a, trans="T", unit_diagonal=True) ** 2),
            lambda a: np.sum(scipy.linalg.solve_triangular(a, np.outer(b, b) + a, trans="T",
                                                           unit_diagonal=True) ** 2),
            lambda n, lead=(): np.swapaxes(lower(n, lead), -1, -2), False, False),
        "eigvalsh": (lambda a: np.sum(np.sin(np.linalg.eigvalsh(a)) * np.arange(1, a.shape[-1] + 1)),
                     lambda a: np.sum(np.sin(np.linalg.eigvalsh(a)) * np.arange(1, a.shape[-1] + 1)),
                     spd, True, True),
        # Squared eigenvectors: the same whichever sign LAPACK gives a column.
        "eigh": (lambda a: np.sum(np.linalg.eigh(a)[1] ** 2 * np.cos(np.arange(a.shape[-1] ** 2)).reshape(
                     a.shape[-2:])) + np.sum(np.linalg.eigh(a)[0] ** 3),
                 lambda a: np.sum(np.linalg.eigh(a)[1] ** 2 * np.cos(np.arange(a.shape[-1] ** 2)).reshape(
                     a.shape[-2:])) + np.sum(np.linalg.eigh(a)[0] ** 3), spd, True, True),
        "eigh-upper": (lambda a: np.sum(np.linalg.eigh(a, UPLO="U")[1] ** 2 * np.cos(
                           np.arange(a.shape[-1] ** 2)).reshape(a.shape[-2:])),
                       lambda a: np.sum(np.linalg.eigh(a, UPLO="U")[1] ** 2 * np.cos(
                           np.arange(a.shape[-1] ** 2)).reshape(a.shape[-2:])), spd, True, True),
        "svdvals": (lambda a: np.sum(np.sin(np.linalg.svd(a, compute_uv=False))),
                    lambda a: np.sum(np.sin(np.linalg.svd(a, compute_uv=False))), general, False, True),
        # U S Vh weighed elementwise, and squared vectors: the same whichever signs LAPACK gives.
        "svd": (lambda a: _svd_weighed(a), lambda a: _svd_weighed(a), general, False, True),
        "pinv": (lambda a: np.sum(np.sin(np.linalg.pinv(a))), lambda a: np.sum(np.sin(np.linalg.pinv(a))),
                 general, False, True),
        "expm": (lambda a: np.sum(np.sin(snp.linalg.expm(a * 0.3))),
                 lambda a: np.sum(np.sin(scipy.linalg.expm(a * 0.3))), general, False, True),
        "qr": (lambda a: np.sum(np.sin(np.linalg.qr(a)[0]) * a) + np.sum(np.linalg.qr(a, mode="r") ** 2 * a),
               lambda a: np.sum(np.sin(np.linalg.qr(a)[0]) * a) + np.sum(np.linalg.qr(a, mode="r") ** 2 * a),
               general, False, True),
        "cho_solve-upper": (
            lambda a: np.sum(snp.linalg.cho_solve(snp.linalg.cho_factor(a), b) ** 2),
            lambda a: np.sum(scipy.linalg.cho_solve(scipy.linalg.cho_factor(a), b) ** 2), spd, True, False),
        "cho_solve-lower": (
            lambda a: np.sum(snp.linalg.cho_solve(snp.linalg.cho_factor(a, lower=True), b) ** 2),
            lambda a: np.sum(scipy.linalg.cho_solve(scipy.linalg.cho_factor(a, lower=True), b) ** 2),
            spd, True, False),
    }


def _svd_weighed(a):
    u, s, vh = np.linalg.svd(a)
    n = a.shape[-1]
    weights = np.cos(np.arange(n * n)).reshape(n, n)
    return np.sum((u * s[..., None, :]) @ vh * weights) + np.sum(u ** 2 * weights) + np.sum(vh ** 2 * weights.T)


NAMES = list(_table(None))
SIZES = [1, 3, 6]
LEADS = [(), (2,), (1,)]
#: (name, n, stack in front): stacks for the functions NumPy stacks.
CASES = [(name, n, lead) for name in NAMES for n in SIZES for lead in LEADS
         if not lead or _table(None)[name][4]]


def _case(name, n, lead):
    b = RNG.normal(size=n)
    traced, reference, make, symmetric_only, _ = _table(b)[name]
    a = make(n, lead)
    direction = RNG.normal(size=a.shape)
    if symmetric_only:
        direction = symmetric(direction)
    return traced, reference, a, direction


def _central(f, x, d, h=1e-6):
    return (f(x + h * d) - f(x - h * d)) / (2 * h)


def _relative(value, reference) -> float:
    value, reference = np.asarray(value), np.asarray(reference)
    return float(np.max(np.abs(value - reference)) / max(1.0, np.max(np.abs(reference))))


@pytest.mark.parametrize("name, n, lead", CASES)
def test_value_gradient_and_tangent_match_central_differences(name, n, lead):
    traced, reference, a, d = _case(name, n, lead)
    assert np.isclose(sd.trace(traced, a)(a), reference(a), rtol=1e-12, atol=1e-12)
    grad = sd.grad(traced)(a)
    central = _central(reference, a, d)
    assert _relative(np.sum(grad * d), central) < 1e-7
    _, tangent = sd.jvp(traced, (a,), (d,))
    assert _relative(tangent, central) < 1e-7


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("name", NAMES)
def test_hessian_vector_products_match_central_differences_of_the_gradient(name, n):
    traced, _, a, d = _case(name, n, ())
    gradient = sd.grad(traced)
    _, hvp = sd.jvp(gradient, (a,), (d,))
    central = _central(gradient, a, d, 1e-5)
    assert _relative(hvp, central) < 1e-6


@pytest.mark.parametrize("lead", [(), (3,)])
@pytest.mark.parametrize("n", SIZES)
def test_exact_identities(n, lead):
    a, d = general(n, lead), RNG.normal(size=lead + (n, n))
    inverse = np.linalg.inv(a)
    # d log|det A| = tr(A^-1 dA); grad log|det A| = A^-T; d inv = -A^-1 dA A^-1.
    _, t = sd.jvp(lambda a: np.linalg.slogdet(a)[1], (a,), (d,))
    np.testing.assert_allclose(t, np.trace(inverse @ d, axis1=-2, axis2=-1), rtol=1e-12, atol=1e-12)
    g = sd.grad(lambda a: np.sum(np.linalg.slogdet(a)[1]))(a)
    np.testing.assert_allclose(g, np.swapaxes(inverse, -1, -2), rtol=1e-13, atol=1e-13)
    _, t = sd.jvp(np.linalg.inv, (a,), (d,))
    np.testing.assert_allclose(t, -inverse @ d @ inverse, rtol=1e-12, atol=1e-12)
    # d det A = det A tr(A^-1 dA); solve's gradient w.r.t. b is A^-T applied to the seed.
    _, t = sd.jvp(np.linalg.det, (a,), (d,))
    np.testing.assert_allclose(t, np.linalg.det(a) * np.trace(inverse @ d, axis1=-2, axis2=-1), rtol=1e-11)
    b = RNG.normal(size=n)
    g = sd.grad(lambda b: np.sum(np.linalg.solve(a, b)))(b)
    np.testing.assert_allclose(g, np.sum(np.linalg.solve(np.swapaxes(a, -1, -2), np.ones(lead + (n, 1)))[..., 0],
                                         axis=tuple(range(len(lead)))), rtol=1e-12)


def test_hessian_of_log_det_is_minus_the_inverse_twice():
    a = spd(3)
    inverse = np.linalg.inv(a)
    hessian = sd.hessian(lambda a: np.linalg.slogdet(a)[1])(a)
    np.testing.assert_allclose(hessian, -np.einsum("li,jk->ijkl", inverse, inverse), rtol=1e-12, atol=1e-14)


def test_jacobians_by_columns_and_rows_match_central_differences():
    a = general(3)
    columns = np.zeros((3, 3, 3, 3))
    for i in range(3):
        for j in range(3):
            e = np.zeros((3, 3))
            e[i, j] = 1.0
            columns[:, :, i, j] = _central(np.linalg.inv, a, e)
    for jacobian in (sd.jacfwd, sd.jacrev):
        assert _relative(jacobian(np.linalg.inv)(a), columns) < 1e-8
    b = RNG.normal(size=3)
    assert _relative(sd.jacrev(lambda b: np.linalg.solve(a, b))(b), np.linalg.inv(a)) < 1e-13


@pytest.mark.parametrize("name", NAMES)
def test_the_graph_does_not_grow_with_the_matrix_size(name):
    sizes = []
    for n in (4, 60):
        traced, _, a, _ = _case(name, n, ())
        sizes.append([len(sd.trace(traced, a).graph.nodes), len(sd.grad(traced).trace(a).graph.nodes),
                      len(sd.hessian(traced).trace(a).graph.nodes)])
    assert sizes[0] == sizes[1]


def test_the_gradient_of_log_det_prints_as_the_inverse_transposed():
    a = spd(3)
    derivative = sd.grad(lambda A: np.linalg.slogdet(A)[1]).trace(a)
    assert str(derivative.formula()) == "inv(A)[j, i]"
    assert r"\left(\nabla_{A} f\right)_{i j} &= {A^{-1}}_{j i}" in derivative.latex()
    gradient = sd.grad(lambda A, b: np.sum(np.linalg.solve(A, b)), argnums=(0, 1)).trace(a, np.ones(3))
    latex = gradient.latex()
    assert r"A^{-T} c" in latex and r"{A^{-1} b}_{j}" in latex
    assert str(sd.trace(lambda a: np.linalg.det(a) * np.linalg.cholesky(a), a).formula()) == \
        "det(a)*cholesky(a)[i, j]"
    # Inlined, nested linear algebra reads as calls; other operands as arrays of elements.
    b = np.ones(3)
    assert str(sd.trace(lambda A, b: snp.linalg.cho_solve(snp.linalg.cho_factor(A), b), a, b).formula()) == \
        "solve_triangular(cholesky(A.T).T, solve_triangular(cholesky(A.T).T, b, 1), 0)[i]"
    assert str(sd.trace(lambda A, b: np.linalg.solve(A, 2 * b + 1), a, b).formula()) == \
        "solve(A, Lambda(j, 2*b[j] + 1))[i]"


@pytest.mark.parametrize("backend", ["numpy", "numexpr", "numba"])
def test_every_backend_evaluates_linear_algebra_and_batches_of_points(backend):
    pytest.importorskip("numba") if backend == "numba" else None
    a, b = spd(3), RNG.normal(size=3)
    F = sd.grad(lambda a, b: np.sum(np.linalg.solve(a, b)) + np.linalg.slogdet(a)[1], argnums=(0, 1)).trace(a, b)
    compiled = F.compile(backend)
    if backend == "numba":  # no loop form for LAPACK's work: the registry falls back, saying so
        assert "no loop form for" in compiled.note and "numexpr" in compiled.note
    expected = sd.grad(lambda a, b: np.sum(np.linalg.solve(a, b)) + np.linalg.slogdet(a)[1], argnums=(0, 1))(a, b)
    for got, want in zip(compiled(a, b), expected):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    points_a, points_b = spd(3, (4,)), RNG.normal(size=(4, 3))
    batched = compiled(points_a, points_b)
    for k in range(4):
        np.testing.assert_allclose(batched[1][k], F(points_a[k], points_b[k])[1], rtol=1e-12)
    np.testing.assert_allclose(compiled(points_a, b)[0][2], F(points_a[2], b)[0], rtol=1e-12)


# -- norms ------------------------------------------------------------------------------

VECTOR_ORDS = [None, 0, 1, 2, 3, 0.5, np.inf, -np.inf]
MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"]


def _check_norm(x, ord, axis):
    """norm(x, ord, axis) with and without keepdims: NumPy's value, and a directional
    derivative against central differences."""
    for keepdims in (False, True):
        def f(x):
            return np.sum(np.sin(np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)))
        np.testing.assert_allclose(sd.trace(f, x)(x), f(x), rtol=1e-13)
        d = RNG.normal(size=x.shape)
        assert _relative(np.sum(sd.grad(f)(x) * d), _central(f, x, d)) < 1e-7


@pytest.mark.parametrize("ord", VECTOR_ORDS)
@pytest.mark.parametrize("shape, axis", [((5,), None), ((1,), None), ((3, 4), 1), ((3, 4), 0)])
def test_vector_norms_match_numpy_and_central_differences(ord, shape, axis):
    _check_norm(RNG.normal(size=shape) + 0.1, ord, axis)


@pytest.mark.parametrize("ord", MATRIX_ORDS)
@pytest.mark.parametrize("shape, axis", [((3, 4), None), ((1, 1), None), ((2, 3, 4), (2, 0)), ((2, 3, 4), (-2, -1))])
def test_matrix_norms_match_numpy_and_central_differences(ord, shape, axis):
    _check_norm(RNG.normal(size=shape), ord, axis)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)])
def test_thin_svd_of_rectangular_matrices_and_its_refusals(shape):
    a = RNG.normal(size=shape)
    m, n = shape[-2:]
    weights = np.cos(np.arange(m * n)).reshape(m, n)

    def f(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return np.sum((u * s[..., None, :]) @ vh * weights) + np.sum(u ** 2) * np.sum(vh ** 2 * s[..., :, None])

    d = RNG.normal(size=shape)
    np.testing.assert_allclose(sd.trace(f, a)(a), f(a), rtol=1e-12)
    assert _relative(np.sum(sd.grad(f)(a) * d), _central(f, a, d)) < 1e-7
    if m != n:
        with pytest.raises(sd.TracingError, match="full_matrices=False"):
            sd.trace(lambda a: np.linalg.svd(a)[0], a)
    with pytest.raises(sd.TracingError, match="hermitian"):
        sd.trace(lambda a: np.linalg.svd(a, hermitian=True)[1], a)


@pytest.mark.parametrize("shape", [(4, 2), (2, 5), (3, 4, 2)])
def test_pinv_of_rectangular_matrices(shape):
    a = RNG.normal(size=shape)
    d = RNG.normal(size=shape)
    f = lambda a: np.sum(np.sin(np.linalg.pinv(a)) * np.arange(1.0, 1 + shape[-1] * shape[-2]).reshape(  # noqa: E731
        shape[-1], shape[-2]))
    np.testing.assert_allclose(sd.trace(f, a)(a), f(a), rtol=1e-12)
    assert _relative(np.sum(sd.grad(f)(a) * d), _central(f, a, d)) < 1e-7
    _, hvp = sd.jvp(sd.grad(f), (a,), (d,))
    assert _relative(hvp, _central(sd.grad(f), a, d, 1e-5)) < 1e-6


def test_pinv_of_an_orthogonal_matrix_has_a_finite_gradient_unlike_svds_vectors():
    q = np.linalg.qr(RNG.normal(size=(3, 3)))[0]  # every singular value 1
    g = sd.grad(lambda a: np.sum(np.linalg.pinv(a) * np.arange(9.0).reshape(3, 3)))(q)
    d = RNG.normal(size=(3, 3))
    f = lambda a: np.sum(np.linalg.pinv(a) * np.arange(9.0).reshape(3, 3))  # noqa: E731
    assert np.all(np.isfinite(g)) and _relative(np.sum(g * d), _central(f, q, d)) < 1e-7


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 2)])
def test_qr_of_tall_matrices_and_its_refusals(shape):
    a = RNG.normal(size=shape)
    weights = np.cos(np.arange(shape[-2] * shape[-1])).reshape(shape[-2:])
    f = lambda a: np.sum(np.sin(np.linalg.qr(a)[0]) * weights) * np.sum(np.linalg.qr(a)[1])  # noqa: E731
    d = RNG.normal(size=shape)
    np.testing.assert_allclose(sd.trace(f, a)(a), f(a), rtol=1e-12)
    assert _relative(np.sum(sd.grad(f)(a) * d), _central(f, a, d)) < 1e-7
    for call in (lambda a: np.linalg.qr(np.swapaxes(a, -1, -2))[0], lambda a: np.linalg.qr(a, mode="complete")[0],
                 lambda a: np.linalg.qr(a, mode="raw")[0]):
        with pytest.raises(sd.TracingError, match="reduced QR factors"):
            sd.trace(lambda a: np.sum(call(a)), a)


def test_the_spectral_norms_gradient_is_the_top_singular_pair():
    a = general(4)
    u, s, vh = np.linalg.svd(a)
    np.testing.assert_allclose(sd.grad(lambda a: np.linalg.norm(a, ord=2))(a), np.outer(u[:, 0], vh[0]),
                               atol=1e-12)
    np.testing.assert_allclose(sd.grad(lambda a: np.linalg.norm(a, ord="nuc"))(a), u @ vh, atol=1e-12)


def test_the_norm_of_a_vector_by_count_has_a_zero_gradient():
    x = np.array([1.0, 0.0, -2.0])
    assert sd.trace(lambda x: np.linalg.norm(x, ord=0), x)(x) == 2.0
    assert not np.any(sd.grad(lambda x: np.linalg.norm(x, ord=0))(x))


# -- scipy.linalg, triangles and refusals --------------------------------------------------


@pytest.mark.parametrize("lower_triangle", [True, False])
@pytest.mark.parametrize("trans", [0, 1, "N", "T", "C"])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("rhs", [(4,), (4, 2)])
def test_solve_triangular_matches_scipy_and_differentiates_along_its_triangle(lower_triangle, trans,
                                                                             unit_diagonal, rhs):
    a = general(4)
    b = RNG.normal(size=rhs)
    options = dict(lower=lower_triangle, trans=trans, unit_diagonal=unit_diagonal)

    def f(a, b):
        return np.sum(np.sin(snp.linalg.solve_triangular(a, b, **options)))

    def reference(a, b):
        return np.sum(np.sin(scipy.linalg.solve_triangular(a, b, **options)))

    np.testing.assert_allclose(sd.trace(f, a, b)(a, b), reference(a, b), rtol=1e-13)
    ga, gb = sd.grad(f, argnums=(0, 1))(a, b)
    read = np.tril(np.ones((4, 4)), -1 if unit_diagonal else 0)
    read = read if lower_triangle else read.T
    assert not np.any(ga[read == 0])  # elements SciPy does not read have no derivative
    d, e = RNG.normal(size=a.shape), RNG.normal(size=b.shape)
    assert _relative(np.sum(ga * d), _central(lambda a: reference(a, b), a, d)) < 1e-7
    assert _relative(np.sum(gb * e), _central(lambda b: reference(a, b), b, e)) < 1e-7


def test_cho_factor_gives_scipys_triangle_and_zeros_elsewhere():
    a = spd(4)
    for lower_triangle in (False, True):
        c, flag = sd.trace(lambda a: snp.linalg.cho_factor(a, lower=lower_triangle)[0], a)(a), lower_triangle
        reference, _ = scipy.linalg.cho_factor(a, lower=flag)
        mask = np.tril(np.ones((4, 4))) if flag else np.triu(np.ones((4, 4)))
        np.testing.assert_allclose(c, reference * mask, rtol=1e-13)


def test_cholesky_gradients_are_symmetric_as_jax_has_them():
    g = sd.grad(lambda a: np.sum(np.sin(np.linalg.cholesky(a))))(spd(4))
    np.testing.assert_allclose(g, g.T, rtol=1e-13)


def test_eigenvalue_gradients_are_the_outer_products_of_eigenvectors():
    a = spd(4)
    w, v = np.linalg.eigh(a)
    for k in range(4):
        np.testing.assert_allclose(sd.grad(lambda a: np.linalg.eigvalsh(a)[k])(a), np.outer(v[:, k], v[:, k]),
                                   atol=1e-13)


def test_repeated_eigenvalues_have_finite_value_gradients_and_no_vector_gradients_as_jax():
    a = np.diag([1.0, 1.0, 3.0])
    assert np.all(np.isfinite(sd.grad(lambda a: np.sum(np.linalg.eigvalsh(a)))(a)))
    with np.errstate(all="ignore"):
        g = sd.grad(lambda a: np.sum(np.linalg.eigh(a)[1] * np.arange(9.0).reshape(3, 3)))(a)
    assert not np.all(np.isfinite(g))


@pytest.mark.parametrize("call, name", [
    (lambda a: np.linalg.cond(a), "numpy.linalg.cond"),
    (lambda a: np.linalg.matrix_rank(a), "numpy.linalg.matrix_rank"),
])
def test_what_is_not_traced_yet_is_refused_naming_what_is(call, name):
    with pytest.raises(sd.TracingError) as info:
        sd.grad(lambda a: np.sum(call(a)))(np.eye(2))
    message = str(info.value)
    assert name in message and "solve, inv, det, slogdet, cholesky" in message


@pytest.mark.parametrize("call, says", [
    (lambda a: np.linalg.inv(a[0]), "square matrix"),
    (lambda a: np.linalg.solve(a, np.ones(3)), "does not fit"),
    (lambda a: np.linalg.matrix_power(a, 1.5), "must be an integer"),
    (lambda a: snp.linalg.solve_triangular(a, np.ones(2), trans=3), "trans must be"),
])
def test_bad_arguments_are_named(call, says):
    with pytest.raises(sd.TracingError, match=says):
        sd.trace(lambda a: np.sum(call(a)), np.eye(2))


def test_concrete_arguments_go_to_numpy_and_scipy():
    a = spd(3)
    assert np.allclose(snp.linalg.inv(a), np.linalg.inv(a))
    assert np.allclose(snp.linalg.cho_solve(snp.linalg.cho_factor(a), np.ones(3)), np.linalg.solve(a, np.ones(3)))
    assert snp.linalg.slogdet(a)[0] == 1.0


def test_a_gradient_through_solve_factors_the_matrix_once():
    # Reverse mode solves with A^T from the factors the value was computed with (as JAX).
    F = sd.grad(lambda a, b: np.sum(np.linalg.solve(a, b)), argnums=(0, 1)).trace(general(5), np.ones(5))
    names = [node.primitive.name for node in F.graph.nodes]
    assert names.count("lu_factor") == 1 and names.count("solve") == 2


def test_a_singular_matrix_raises_as_numpy_does():
    F = sd.trace(lambda a, b: np.linalg.solve(a, b), np.eye(2), np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match="Singular"):
        F(np.ones((2, 2)), np.ones(2))


@pytest.mark.parametrize("call, use", [
    (lambda a: scipy.linalg.solve_triangular(a, np.ones(2)), "snp.linalg.solve_triangular"),
    (lambda a: scipy.linalg.cho_solve(scipy.linalg.cho_factor(a), np.ones(2)), "snp.linalg.cho_factor"),
    (lambda a: scipy.linalg.cholesky(a), "np.linalg.cholesky(a, upper=not lower)"),
    (lambda a: scipy.linalg.solve(a, np.ones(2)), "np.linalg.solve"),
    (lambda a: scipy.linalg.expm(a), "snp.linalg.expm"),
])
def test_scipy_linalg_on_a_traced_value_points_to_the_form_that_traces(call, use):
    with pytest.raises(sd.TracingError) as info:
        sd.trace(lambda a: np.sum(call(a)), np.eye(2))
    assert use in str(info.value) and "scipy.linalg." in str(info.value)


def test_taylor_mode_refuses_linear_algebra_and_nested_jvp_gives_the_derivative():
    a = np.diag([2.0, 3.0])

    def f(t):
        return np.linalg.slogdet(a * t)[1]

    for transform in (lambda: sd.derivative(f, 2)(1.5), lambda: sd.taylor(f, 60)(1.5)):
        with pytest.raises(sd.DifferentiationError, match=r"(?i)nest (sd\.)?jvp"):
            transform()
    second = sd.jvp(lambda t: sd.jvp(f, (t,), (1.0,))[1], (1.5,), (1.0,))[1]
    assert np.isclose(second, -2 / 1.5 ** 2, rtol=1e-13)  # log det(a t) = 2 log t + const


def test_sparsity_patterns_are_dense_within_each_matrix_of_a_stack():
    a = general(3, (2,))
    block = np.kron(np.eye(2), np.ones((9, 9)))  # each inverse reads its own matrix only
    np.testing.assert_array_equal(sd.trace(np.linalg.inv, a).sparsity().toarray(), block)
    b = RNG.normal(size=3)
    pattern = sd.trace(lambda a, b: np.linalg.solve(a, b), a, b).sparsity().toarray()
    np.testing.assert_array_equal(pattern, np.hstack([np.kron(np.eye(2), np.ones((3, 9))), np.ones((6, 3))]))
    assert sd.trace(lambda a: np.linalg.slogdet(a)[0], a).sparsity().nnz == 0  # the sign: constant
    dense = sd.jacobian(np.linalg.inv)(a).reshape(18, 18)
    np.testing.assert_allclose(sd.jacobian(np.linalg.inv, sparse=True)(a).toarray(), dense, rtol=1e-13)


def test_norms_of_complex_arrays_are_real_with_jaxs_gradient():
    # NumPy's norms of complex arrays are real; the gradient of a real function of complex
    # input is df/dx - i df/dy (JAX's), here conj(a) / |a| for the Frobenius norm.
    a = np.array([[1 + 2j, 0.5 - 1j], [0.3j, 2.0]])
    assert np.isclose(sd.trace(np.linalg.norm, a)(a), np.linalg.norm(a), rtol=1e-15)
    assert np.allclose(sd.grad(np.linalg.norm)(a), np.conj(a) / np.linalg.norm(a), rtol=1e-14)
    assert np.allclose(sd.grad(lambda v: np.linalg.norm(v, axis=1).sum())(a),
                       np.conj(a) / np.linalg.norm(a, axis=1, keepdims=True), rtol=1e-14)
    # The nuclear norm of a complex matrix: its gradient is conj(U Vh) (complex matrices'
    # factorisations: tests/test_linalg_complex.py).
    u, _, vh = np.linalg.svd(a)
    assert np.allclose(sd.grad(lambda m: np.linalg.norm(m, "nuc"))(a), np.conj(u @ vh), rtol=1e-13)
