"""Complex linear algebra (issue 29, items 1 x 2): svd, eigh, inv, solve, det, slogdet, expm,
cholesky, solve_triangular, cho_solve, qr and pinv of complex matrices, with JAX's
conventions (the pairing Re(ct * t), no conjugation).

Table-driven: each function of the table is checked at random complex matrices (square,
wide, tall, size-1 axes, stacks), its forward tangent against central differences along
a real and an imaginary direction, its VJP against the same differences through the
pairing; the gauge-dependent factors (U, Vh, eigenvectors) through what does not depend
on their phases (|U|, U diag(s) Vh, projectors), and their tangent and cotangent maps
exactly transposed to each other; exact identities (the gradient of the nuclear norm is
conj(U Vh), of log|det A| A^-T), second order, and real matrices' graphs unchanged.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import scipy.linalg

import symad as sd
import symad.numpy as snp


def rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def complex_normal(r, shape) -> np.ndarray:
    return r.normal(size=shape) + 1j * r.normal(size=shape)


def conj_t(x):
    return np.conj(np.swapaxes(x, -1, -2))


def hermitian(x):
    return (x + conj_t(x)) / 2


def general(r, shape):
    """A complex matrix, well conditioned (square: shifted along the diagonal)."""
    x = complex_normal(r, shape)
    if shape[-1] == shape[-2]:
        x = x + 2 * shape[-1] ** 0.5 * np.eye(shape[-1])
    return x


def _usv(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return (u * s[..., None, :]) @ vh


def _first_singular_projector(a):
    u = np.linalg.svd(a, full_matrices=False)[0][..., :, :1]
    return u @ conj_t(u)


def _first_eigen_projector(a):
    v = np.linalg.eigh(a)[1][..., :, -1:]
    return v @ conj_t(v)


B = np.array([1.0 + 0.5j, -2.0, 0.25j, 1.5, -1j, 0.5])


def _solve_triangular(trans, lower, unit_diagonal):
    def f(a):
        return snp.linalg.solve_triangular(a, B[: a.shape[-1]], trans=trans, lower=lower,
                                           unit_diagonal=unit_diagonal)
    return f


# name: (function of a complex matrix, the matrix ("general"; "hermitian" or "hpd", with
# Hermitian directions: eigh and cholesky read one triangle, and their derivative is taken
# along Hermitian directions, as JAX's), shapes)
SQUARE = [(1, 1), (3, 3), (2, 3, 3), (1, 2, 2)]
RECTANGULAR = [(1, 1), (1, 3), (3, 1), (3, 5), (5, 3), (4, 4), (2, 3, 5), (2, 5, 3)]
TALL = [(1, 1), (3, 1), (3, 3), (5, 3), (2, 4, 3)]
TABLE = {
    "svdvals": (lambda a: np.linalg.svd(a, compute_uv=False), "general", RECTANGULAR),
    "svd-abs-u": (lambda a: np.abs(np.linalg.svd(a, full_matrices=False)[0]), "general", RECTANGULAR),
    "svd-abs-vh": (lambda a: np.abs(np.linalg.svd(a, full_matrices=False)[2]), "general", RECTANGULAR),
    "svd-usv": (_usv, "general", RECTANGULAR),
    "svd-projector": (_first_singular_projector, "general", RECTANGULAR),
    "norm-nuc": (lambda a: np.linalg.norm(a, "nuc", axis=(-2, -1)), "general", RECTANGULAR),
    "norm-2": (lambda a: np.linalg.norm(a, 2, axis=(-2, -1)), "general", RECTANGULAR),
    "eigvalsh": (np.linalg.eigvalsh, "hermitian", SQUARE),
    "eigvalsh-upper": (lambda a: np.linalg.eigvalsh(a, UPLO="U"), "hermitian", SQUARE),
    "eigh-abs-v": (lambda a: np.abs(np.linalg.eigh(a)[1]), "hermitian", SQUARE),
    "eigh-abs-v-upper": (lambda a: np.abs(np.linalg.eigh(a, UPLO="U")[1]), "hermitian", SQUARE),
    "eigh-projector": (_first_eigen_projector, "hermitian", SQUARE),
    "inv": (np.linalg.inv, "general", SQUARE),
    "det": (np.linalg.det, "general", SQUARE),
    "slogdet-logabsdet": (lambda a: np.linalg.slogdet(a)[1], "general", SQUARE),
    "slogdet-sign": (lambda a: np.linalg.slogdet(a)[0], "general", SQUARE),
    "solve-vector": (lambda a: np.linalg.solve(a, B[: a.shape[-1]]), "general", SQUARE),
    "solve-matrix": (lambda a: np.linalg.solve(a, conj_t(a) * 2), "general", SQUARE),
    "expm": (lambda a: snp.linalg.expm(a * 0.3), "general", [(1, 1), (3, 3)]),
    "cholesky": (np.linalg.cholesky, "hpd", SQUARE),
    "cholesky-upper": (lambda a: np.linalg.cholesky(a, upper=True), "hpd", SQUARE),
    "cho_solve-lower": (lambda a: snp.linalg.cho_solve(snp.linalg.cho_factor(a, lower=True), B[: a.shape[-1]]),
                        "hpd", SQUARE[:2]),
    "cho_solve-upper": (lambda a: snp.linalg.cho_solve(snp.linalg.cho_factor(a), B[: a.shape[-1]]),
                        "hpd", SQUARE[:2]),
    "qr-q": (lambda a: np.linalg.qr(a)[0], "general", TALL),
    "qr-r": (lambda a: np.linalg.qr(a)[1], "general", TALL),
    "pinv": (np.linalg.pinv, "general", RECTANGULAR),
}
# Where the traced function's value is checked against another spelling of it.
REFERENCES = {
    "cho_solve-lower": lambda a: np.linalg.solve(a, B[: a.shape[-1]]),
    "cho_solve-upper": lambda a: np.linalg.solve(a, B[: a.shape[-1]]),
}
for _trans in (0, 1, "C"):
    for _lower in (True, False):
        for _unit in (False, True):
            _name = f"solve_triangular-{_trans}-{'lower' if _lower else 'upper'}{'-unit' if _unit else ''}"
            TABLE[_name] = (_solve_triangular(_trans, _lower, _unit), "general", [(1, 1), (3, 3)])
            REFERENCES[_name] = (lambda trans, lower, unit: lambda a: scipy.linalg.solve_triangular(
                a, B[: a.shape[-1]], trans=trans, lower=lower, unit_diagonal=unit))(_trans, _lower, _unit)
CASES = [(name, shape) for name, (_, _, shapes) in TABLE.items() for shape in shapes]


def _point_and_directions(name, shape):
    """The matrix, and a real and an imaginary direction (Hermitian ones for eigh, cholesky)."""
    _, kind, _ = TABLE[name]
    r = rng(f"{name}{shape}")
    if kind != "general":
        x = hermitian(complex_normal(r, shape))
        if kind == "hpd":
            x = x @ conj_t(x) + shape[-1] * np.eye(shape[-1])
        real_part = r.normal(size=shape)
        return x, [real_part + np.swapaxes(real_part, -1, -2),   # symmetric: Hermitian
                   1j * (real_part - np.swapaxes(real_part, -1, -2))]   # i antisymmetric
    return general(r, shape), [r.normal(size=shape), 1j * r.normal(size=shape)]


def _central(f, x, t, h=1e-6):
    return (np.asarray(f(x + h * t)) - np.asarray(f(x - h * t))) / (2 * h)


@pytest.mark.parametrize("name, shape", CASES)
def test_tangents_and_cotangents_match_central_differences(name, shape):
    f = TABLE[name][0]
    x, directions = _point_and_directions(name, shape)
    value = np.asarray(f(x))
    np.testing.assert_allclose(sd.trace(f, x)(x), REFERENCES.get(name, f)(x), rtol=1e-12, atol=1e-12)
    r = rng(name)
    cotangent = (complex_normal(r, value.shape) if np.iscomplexobj(value)
                 else r.normal(size=value.shape))
    (pulled,) = sd.vjp(f, x)[1](cotangent)
    assert pulled.shape == x.shape and np.iscomplexobj(pulled)
    for t in directions:
        central = _central(f, x, t)
        _, tangent = sd.jvp(f, (x,), (t,))
        np.testing.assert_allclose(tangent, central, rtol=1e-6, atol=1e-6)
        # Re sum(ct * J t) = Re sum(vjp(ct) * t): JAX's pairing, no conjugation.
        assert np.real(np.sum(pulled * t)) == pytest.approx(np.real(np.sum(cotangent * central)),
                                                            rel=1e-6, abs=1e-6)


# The factors themselves: their phases are a gauge (LAPACK's), so differences do not
# check them; the tangent and cotangent maps are checked to be each other's transposes.
FACTORS = {
    "svd-u": (lambda a: np.linalg.svd(a, full_matrices=False)[0], False),
    "svd-vh": (lambda a: np.linalg.svd(a, full_matrices=False)[2], False),
    "eigh-v": (lambda a: np.linalg.eigh(a)[1], True),
    "eigh-v-upper": (lambda a: np.linalg.eigh(a, UPLO="U")[1], True),
}


@pytest.mark.parametrize("name, shape", [(n, s) for n in FACTORS for s in [(3, 3), (3, 5), (5, 3), (2, 4, 4)]
                                         if not (FACTORS[n][1] and s[-1] != s[-2])])
def test_factor_tangents_and_cotangents_are_transposes(name, shape):
    f, is_hermitian = FACTORS[name]
    r = rng(f"{name}{shape}")
    x = complex_normal(r, shape)
    t = complex_normal(r, shape)
    if is_hermitian:
        x, t = hermitian(x), hermitian(t)
    cotangent = complex_normal(r, np.shape(f(x)))
    _, tangent = sd.jvp(f, (x,), (t,))
    (pulled,) = sd.vjp(f, x)[1](cotangent)
    assert np.real(np.sum(cotangent * tangent)) == pytest.approx(np.real(np.sum(pulled * t)), rel=1e-10)


def test_svd_tangent_fixes_the_gauge_as_jax_does():
    # U^H dU has the imaginary diagonal i Im(U^H dA V)_ii / s_i; V^H dV a zero diagonal.
    r = rng("gauge")
    a, t = complex_normal(r, (4, 3)), complex_normal(r, (4, 3))
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    _, (du, ds, dvh) = sd.jvp(lambda a: tuple(np.linalg.svd(a, full_matrices=False)), (a,), (t,))
    np.testing.assert_allclose(np.diag(conj_t(u) @ du), 1j * np.imag(np.diag(conj_t(u) @ t @ conj_t(vh))) / s,
                               atol=1e-12)
    np.testing.assert_allclose(np.diag(vh @ conj_t(dvh)), 0, atol=1e-12)
    np.testing.assert_allclose(ds, np.real(np.diag(conj_t(u) @ t @ conj_t(vh))), rtol=1e-12)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2), (2, 3, 3)])
def test_exact_gradients(shape):
    r = rng(f"exact{shape}")
    a = complex_normal(r, shape)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    # The nuclear norm: Re tr(U^H dA V), gradient conj(U Vh) (JAX's df/dx - i df/dy).
    nuclear = sd.grad(lambda a: np.sum(np.linalg.svd(a, compute_uv=False)))(a)
    np.testing.assert_allclose(nuclear, np.conj(u @ vh), rtol=1e-12, atol=1e-12)
    # The squared Frobenius norm as the sum of squared singular values: 2 conj(A).
    frobenius = sd.grad(lambda a: np.sum(np.linalg.svd(a, compute_uv=False) ** 2))(a)
    np.testing.assert_allclose(frobenius, 2 * np.conj(a), rtol=1e-12, atol=1e-12)
    if shape[-1] != shape[-2]:
        return
    a = general(r, shape)
    # log |det A| = Re log det A: its gradient is (log det)' = A^-T.
    logdet = sd.grad(lambda a: np.sum(np.linalg.slogdet(a)[1]))(a)
    np.testing.assert_allclose(logdet, np.swapaxes(np.linalg.inv(a), -1, -2), rtol=1e-12)
    # det is holomorphic: det(A) A^-T.
    if len(shape) == 2:
        holomorphic = sd.grad(np.linalg.det, holomorphic=True)(a)
        np.testing.assert_allclose(holomorphic, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-12)
    # The sum of a Hermitian matrix's eigenvalues is Re tr(A): gradient the identity.
    h = hermitian(a)
    np.testing.assert_allclose(sd.grad(lambda a: np.sum(np.linalg.eigvalsh(a)))(h),
                               np.broadcast_to(np.eye(shape[-1]), shape), atol=1e-12)


@pytest.mark.parametrize("name", ["norm-nuc", "svd-usv", "eigh-projector", "slogdet-logabsdet", "inv",
                                  "cholesky", "qr-q", "pinv", "solve_triangular-C-lower"])
def test_second_order_forward_over_reverse(name):
    # A Hessian-vector product of a real function: the tangent of its gradient, against
    # central differences of the gradient.
    f = TABLE[name][0]
    shape = (3, 3)
    x, (t, _) = _point_and_directions(name, shape)
    weights = complex_normal(rng(name + "w"), np.shape(f(x)))

    def loss(a):
        return np.sum(np.real(weights * f(a)))

    gradient = sd.grad(loss)
    _, hvp = sd.jvp(gradient, (x,), (t,))
    np.testing.assert_allclose(hvp, _central(gradient, x, t, 1e-5), rtol=1e-5, atol=1e-5)


def test_real_matrices_record_no_complex_node():
    # The complex rules are taken only for complex matrices: a real matrix's gradient graph
    # has no conj, real or imag node.
    a = rng("real").normal(size=(3, 3)) + 3 * np.eye(3)

    def f(a):
        u, s, vh = np.linalg.svd(a)
        w, v = np.linalg.eigh(a)
        sign, logdet = np.linalg.slogdet(a)
        q, r = np.linalg.qr(a)
        factors = np.linalg.cholesky(a @ a.T) + np.linalg.pinv(a) + q * r
        return np.sum(u * vh) + np.sum(s) + np.sum(w) + np.sum(v) + sign * logdet + np.sum(factors)

    graph = sd.grad(f).trace(a).graph
    assert all(node.primitive.name not in ("real", "imag", "conj") for node in graph.nodes)


def test_eigh_upper_reads_the_hermitian_matrix_of_the_upper_triangle():
    r = rng("upper")
    a = complex_normal(r, (4, 4))  # not Hermitian: NumPy reads one triangle
    for uplo in ("L", "U"):
        w, v = sd.trace(lambda a: np.linalg.eigh(a, UPLO=uplo), a)(a)
        w_numpy, v_numpy = np.linalg.eigh(a, UPLO=uplo)
        np.testing.assert_allclose(w, w_numpy, rtol=1e-12)
        np.testing.assert_allclose(np.abs(v), np.abs(v_numpy), rtol=1e-10)
