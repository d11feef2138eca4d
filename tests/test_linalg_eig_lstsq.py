"""The general eigendecomposition (``eig``, ``eigvals``) and least squares (``lstsq``), issue 29.

Table-driven, as tests/test_linalg.py: each case is a real-valued function of the
decomposition, checked at random real and complex matrices, sizes 1 to 5 and stacks, for
its value (NumPy's), its forward tangent and its gradient against central differences
(the gradient of a real function of a complex matrix pairs with a direction by
``Re(sum(g * d))``, JAX's convention). The eigenvectors' phase is arbitrary, so the cases
read quantities that do not depend on it (``|v|``, ``v v^H``), as autograd's tests do.
Exact identities: ``dw = diag(V^-1 dA V)``, ``sum(dw) = tr(dA)``, unit-norm tangents
``Re(v^H dv) = 0``, and ``lstsq``'s normal equations. Second order (Hessian-vector
products), graph size at n = 4 equal to n = 60, the refusals.
"""

from __future__ import annotations

import numpy as np
import pytest

import symad as sd

RNG = np.random.default_rng(2929)


def real(n: int, lead: tuple = ()) -> np.ndarray:
    """A general real matrix: complex conjugate pairs of eigenvalues in general."""
    return RNG.normal(size=lead + (n, n))


def complex_matrix(n: int, lead: tuple = ()) -> np.ndarray:
    return RNG.normal(size=lead + (n, n)) + 1j * RNG.normal(size=lead + (n, n))


def real_spectrum(n: int, lead: tuple = ()) -> np.ndarray:
    """A non-symmetric real matrix with real, distinct eigenvalues 1..n (NumPy's eig then
    returns real arrays; the traced one complex ones)."""
    basis = RNG.normal(size=lead + (n, n)) + 3 * np.eye(n)
    return basis @ (np.arange(1.0, n + 1)[:, None] * np.linalg.inv(basis))


def _weights(n: int, shift: float = 0.0) -> np.ndarray:
    return np.cos(np.arange(n * n) + shift).reshape(n, n)


# name: real-valued function of a matrix, written with NumPy's names (the same callable is
# the reference: on concrete arrays it runs NumPy).
EIG_CASES = {
    "eigvals-modulus": lambda a: np.sum(np.abs(np.linalg.eigvals(a)) * np.arange(1, a.shape[-1] + 1)),
    "eigvals-parts": lambda a: np.sum(np.real(np.linalg.eigvals(a)) ** 2)
    + np.sum(np.sin(np.imag(np.linalg.eigvals(a)) ** 2)),
    "eig-values-and-vector-moduli": lambda a: np.sum(np.abs(np.linalg.eig(a)[0]))
    + np.sum(np.abs(np.linalg.eig(a)[1]) * _weights(a.shape[-1])),
    # Each eigenvector's projector v v^H: its phase cancels.
    "eig-projectors": lambda a: np.sum(np.real(np.einsum("...ik,...jk->...ijk", np.linalg.eig(a)[1],
                                                         np.conj(np.linalg.eig(a)[1])))
                                       * _weights(a.shape[-1], 1.0)[..., None]),
}
MATRICES = {"real": real, "complex": complex_matrix, "real-spectrum": real_spectrum}
CASES = [(name, kind, n, lead) for name in EIG_CASES for kind in MATRICES
         for n, lead in [(1, ()), (3, ()), (5, ()), (3, (2,)), (4, (1,))]]


def _central(f, x, d, h=1e-6):
    return (f(x + h * d) - f(x - h * d)) / (2 * h)


def _relative(value, reference) -> float:
    value, reference = np.asarray(value), np.asarray(reference)
    return float(np.max(np.abs(value - reference)) / max(1.0, np.max(np.abs(reference))))


def _direction(a):
    d = RNG.normal(size=a.shape)
    return d + 1j * RNG.normal(size=a.shape) if np.iscomplexobj(a) else d


@pytest.mark.parametrize("name, kind, n, lead", CASES)
def test_eig_value_tangent_and_gradient_match_central_differences(name, kind, n, lead):
    f, a = EIG_CASES[name], MATRICES[kind](n, lead)
    d = _direction(a)
    assert np.isclose(sd.trace(f, a)(a), f(a), rtol=1e-12, atol=1e-12)
    central = _central(f, a, d)
    _, tangent = sd.jvp(f, (a,), (d,))
    assert _relative(tangent, central) < 1e-6
    gradient = sd.grad(f)(a)
    assert gradient.dtype == a.dtype  # a real matrix's gradient is real
    assert _relative(np.real(np.sum(gradient * d)), central) < 1e-6


@pytest.mark.parametrize("kind", list(MATRICES))
@pytest.mark.parametrize("lead", [(), (3,)])
def test_eig_values_and_vectors_are_numpys_and_complex(kind, lead):
    a = MATRICES[kind](4, lead)
    w, v = sd.trace(lambda a: np.linalg.eig(a), a)(a)
    expected_w, expected_v = np.linalg.eig(a)
    assert w.dtype == v.dtype == np.complex128  # NumPy's are real for a real spectrum; JAX's complex
    np.testing.assert_allclose(w, expected_w, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(v, expected_v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sd.trace(np.linalg.eigvals, a)(a), expected_w, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("kind", list(MATRICES))
@pytest.mark.parametrize("n, lead", [(1, ()), (4, ()), (3, (2,))])
def test_eig_exact_identities(kind, n, lead):
    a = MATRICES[kind](n, lead)
    d = _direction(a)
    w, v = np.linalg.eig(a)
    v_inv = np.linalg.inv(v)
    # dw = diag(V^-1 dA V); their sum is tr(dA).
    _, dw = sd.jvp(np.linalg.eigvals, (a,), (d,))
    np.testing.assert_allclose(dw, np.diagonal(v_inv @ d @ v, axis1=-2, axis2=-1), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.sum(dw, axis=-1), np.trace(d, axis1=-2, axis2=-1), rtol=1e-10, atol=1e-10)
    # The gradient of Re(sum w) = Re(tr A) is the identity; of Re(w_k), the real part of the
    # outer product of the k-th left and right eigenvectors (u_k^T v_k = 1).
    identity = sd.grad(lambda a: np.sum(np.real(np.linalg.eigvals(a))))(a)
    np.testing.assert_allclose(identity, np.broadcast_to(np.eye(n), a.shape), atol=1e-10)
    if not lead:
        g = sd.grad(lambda a: np.real(np.linalg.eigvals(a)[0]))(a)
        outer = np.outer(v_inv[0], v[:, 0])
        np.testing.assert_allclose(g, outer if np.iscomplexobj(a) else np.real(outer), rtol=1e-9, atol=1e-10)
    # The vectors stay unit vectors: Re(v^H dv) = 0 column by column.
    _, dv = sd.jvp(lambda a: np.linalg.eig(a)[1], (a,), (d,))
    np.testing.assert_allclose(np.real(np.sum(np.conj(v) * dv, axis=-2)), 0.0, atol=1e-10)


@pytest.mark.parametrize("name", list(EIG_CASES))
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_eig_hessian_vector_products_match_central_differences_of_the_gradient(name, kind):
    f, a = EIG_CASES[name], MATRICES[kind](3)
    d = _direction(a)
    gradient = sd.grad(f)
    _, hvp = sd.jvp(gradient, (a,), (d,))
    assert _relative(hvp, _central(gradient, a, d, 1e-5)) < 1e-5


def test_eig_of_a_stack_is_per_matrix():
    # autograd's test_eig_batched: each matrix of the stack differentiates on its own.
    a = complex_matrix(4, (3,))
    f = EIG_CASES["eig-values-and-vector-moduli"]
    g = sd.grad(lambda a: f(a))(a)
    for k in range(3):
        np.testing.assert_allclose(g[k], sd.grad(f)(a[k]), rtol=1e-10, atol=1e-12)


def test_repeated_eigenvalues_have_finite_value_gradients_and_no_vector_gradients_as_jax():
    a = np.diag([1.0, 1.0, 3.0]) + np.triu(np.ones((3, 3)), 2)
    assert np.all(np.isfinite(sd.grad(lambda a: np.sum(np.real(np.linalg.eigvals(a))))(a)))
    with np.errstate(all="ignore"):
        g = sd.grad(lambda a: np.sum(np.abs(np.linalg.eig(a)[1]) * _weights(3)))(a)
    assert not np.all(np.isfinite(g))


def test_eig_gradients_of_complex_outputs_are_refused_as_for_any_complex_output():
    with pytest.raises(sd.DifferentiationError):
        sd.grad(lambda a: np.sum(np.linalg.eigvals(a)))(real(3))
    # holomorphic=True: the trace's derivative, the identity.
    a = complex_matrix(3)
    np.testing.assert_allclose(sd.grad(lambda a: np.sum(np.linalg.eigvals(a)), holomorphic=True)(a),
                               np.eye(3), atol=1e-10)


# -- least squares ----------------------------------------------------------------------


def _rank_deficient(m: int, n: int, rank: int) -> np.ndarray:
    return RNG.normal(size=(m, rank)) @ RNG.normal(size=(rank, n))


def _lstsq_sum(a, b, residual_weight=1.0):
    x, residuals, rank, s = np.linalg.lstsq(a, b)
    return np.sum(np.sin(x)) + np.sum(residuals) * residual_weight + np.sum(s ** 2) * 0.1


# name: (a, b)
LSTSQ_CASES = {
    "tall-vector": lambda: (RNG.normal(size=(5, 3)), RNG.normal(size=5)),
    "tall-columns": lambda: (RNG.normal(size=(6, 2)), RNG.normal(size=(6, 3))),
    "square": lambda: (RNG.normal(size=(4, 4)) + 4 * np.eye(4), RNG.normal(size=(4, 2))),
    "wide-minimum-norm": lambda: (RNG.normal(size=(3, 5)), RNG.normal(size=3)),
    "one-by-one": lambda: (np.array([[1.7]]), np.array([0.4])),
    "one-column": lambda: (RNG.normal(size=(4, 1)), RNG.normal(size=4)),
    "rank-deficient": lambda: (_rank_deficient(5, 3, 2), RNG.normal(size=5)),
}


@pytest.mark.parametrize("name", list(LSTSQ_CASES))
def test_lstsq_values_are_numpys(name):
    a, b = LSTSQ_CASES[name]()
    x, residuals, rank, s = sd.trace(lambda a, b: np.linalg.lstsq(a, b), a, b)(a, b)
    expected = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x, expected[0], rtol=1e-12, atol=1e-12)
    if expected[1].size:  # NumPy returns residuals for a tall matrix of full rank
        np.testing.assert_allclose(residuals, expected[1], rtol=1e-10)
    assert int(rank) == expected[2]
    np.testing.assert_allclose(s, expected[3], rtol=1e-12)


@pytest.mark.parametrize("name", list(LSTSQ_CASES))
def test_lstsq_tangent_and_gradient_match_central_differences(name):
    a, b = LSTSQ_CASES[name]()
    da, db = RNG.normal(size=a.shape), RNG.normal(size=b.shape)
    curve, f = (lambda h: a + h * da), _lstsq_sum  # noqa: E731
    if name == "rank-deficient":  # along a curve of rank 2, a(h) = (L + h dL)(R + h dR): the
        # derivative at constant rank (JAX's); any other direction makes x jump
        left, right = RNG.normal(size=(5, 2)), RNG.normal(size=(2, 3))
        d_left, d_right = RNG.normal(size=(5, 2)), RNG.normal(size=(2, 3))
        a = left @ right
        da = d_left @ right + left @ d_right
        curve = lambda h: (left + h * d_left) @ (right + h * d_right)  # noqa: E731
        # NumPy returns no residuals for a rank-deficient matrix (the traced ones are the sums)
        f = lambda a, b: _lstsq_sum(a, b, 0.0)  # noqa: E731
    central = (f(curve(1e-6), b + 1e-6 * db) - f(curve(-1e-6), b - 1e-6 * db)) / 2e-6
    _, tangent = sd.jvp(f, (a, b), (da, db))
    assert _relative(tangent, central) < 1e-6
    ga, gb = sd.grad(f, argnums=(0, 1))(a, b)
    assert _relative(np.sum(ga * da) + np.sum(gb * db), central) < 1e-6


def test_lstsq_of_full_column_rank_solves_the_normal_equations():
    # x = (A^T A)^-1 A^T b: dx = (A^T A)^-1 (dA^T r + A^T (db - dA x)) with r = b - A x.
    a, b = RNG.normal(size=(7, 3)), RNG.normal(size=7)
    da, db = RNG.normal(size=a.shape), RNG.normal(size=b.shape)
    x = np.linalg.lstsq(a, b)[0]
    r = b - a @ x
    expected = np.linalg.solve(a.T @ a, da.T @ r + a.T @ (db - da @ x))
    _, dx = sd.jvp(lambda a, b: np.linalg.lstsq(a, b)[0], (a, b), (da, db))
    np.testing.assert_allclose(dx, expected, rtol=1e-11, atol=1e-12)
    # b's gradient of c . x is A (A^T A)^-1 c, pinv(A)^T c.
    c = RNG.normal(size=3)
    gb = sd.grad(lambda b: np.sum(np.linalg.lstsq(a, b)[0] * c))(b)
    np.testing.assert_allclose(gb, a @ np.linalg.solve(a.T @ a, c), rtol=1e-11)


@pytest.mark.parametrize("name", ["tall-vector", "tall-columns", "wide-minimum-norm"])
def test_lstsq_hessian_vector_products_match_central_differences_of_the_gradient(name):
    a, b = LSTSQ_CASES[name]()
    da = RNG.normal(size=a.shape)
    gradient = sd.grad(_lstsq_sum)
    _, hvp = sd.jvp(lambda a: gradient(a, b), (a,), (da,))
    central = (gradient(a + 1e-5 * da, b) - gradient(a - 1e-5 * da, b)) / 2e-5
    assert _relative(hvp, central) < 1e-5


@pytest.mark.parametrize("name, f, make", [
    ("eig", EIG_CASES["eig-values-and-vector-moduli"], lambda n: real(n)),
    ("eigvals", EIG_CASES["eigvals-modulus"], lambda n: complex_matrix(n)),
    ("lstsq", lambda a: _lstsq_sum(a, np.cos(np.arange(a.shape[0]))), lambda n: RNG.normal(size=(n + 2, n))),
])
def test_the_graph_does_not_grow_with_the_matrix_size(name, f, make):
    sizes = []
    for n in (4, 60):
        a = make(n)
        counts = [len(sd.trace(f, a).graph.nodes), len(sd.grad(f).trace(a).graph.nodes)]
        if not np.iscomplexobj(a):  # (a complex argument has no Hessian matrix: jacfwd refuses it)
            counts.append(len(sd.hessian(f).trace(a).graph.nodes))
        sizes.append(counts)
    assert sizes[0] == sizes[1]


def test_a_compiled_eig_gradient_evaluates_batches_of_points():
    f = EIG_CASES["eig-values-and-vector-moduli"]
    a = real(3)
    F = sd.grad(f).trace(a)
    points = real(3, (4,))
    batched = F(points)
    for k in range(4):
        np.testing.assert_allclose(batched[k], F(points[k]), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("call, says", [
    (lambda a: np.linalg.lstsq(np.stack([a, a]), np.ones(2))[0], "'a' must be a matrix"),
    (lambda a: np.linalg.lstsq(a, np.ones(3))[0], "'a' must be a matrix"),
    (lambda a: np.linalg.eig(a[0])[0], "square matrix"),
    (lambda a: np.linalg.lstsq(a * 1j, np.ones(2))[0].real, "lstsq of a complex value"),
])
def test_bad_arguments_are_named(call, says):
    with pytest.raises(sd.TracingError, match=says):
        sd.trace(lambda a: np.sum(call(a)), np.eye(2))
