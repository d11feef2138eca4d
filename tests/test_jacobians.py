"""Jacobians and Hessians of vector functions against analytic values and finite differences."""

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp

JACOBIANS = [sd.jacobian, sd.jacfwd, sd.jacrev]
JAC_IDS = ["jacobian", "jacfwd", "jacrev"]


# ---------------------------------------------------------------------------
# Softmax
# ---------------------------------------------------------------------------


def softmax(x):
    e = np.exp(x)
    return e / np.sum(e)


def softmax_lse(x):
    return np.exp(x - snp.logsumexp(x))


SOFT_X = np.array([0.1, -0.4, 1.2, 0.3])


def _softmax_np(x):
    e = np.exp(x - np.max(x))
    return e / e.sum()


@pytest.mark.parametrize("fun", [softmax, softmax_lse], ids=["exp-sum", "logsumexp"])
@pytest.mark.parametrize("jac", JACOBIANS, ids=JAC_IDS)
def test_softmax_jacobian(jac, fun):
    s = _softmax_np(SOFT_X)
    J = jac(fun)(SOFT_X)
    assert isinstance(J, np.ndarray)
    assert J.shape == (4, 4)
    np.testing.assert_allclose(J, np.diag(s) - np.outer(s, s), rtol=1e-10, atol=1e-14)


def test_softmax_hessian():
    s = _softmax_np(SOFT_X)
    eye = np.eye(4)
    # d2 s_i / dx_j dx_k = s_i (d_ik - s_k)(d_ij - s_j) - s_i s_j (d_jk - s_k)
    expected = np.einsum("i,ik,ij->ijk", s, eye - s[None, :], eye - s[None, :]) - np.einsum(
        "i,j,jk->ijk", s, s, eye - s[None, :]
    )
    H = sd.hessian(softmax)(SOFT_X)
    assert H.shape == (4, 4, 4)
    np.testing.assert_allclose(H, expected, rtol=1e-9, atol=1e-13)
    for nested in (sd.jacfwd(sd.jacrev(softmax)), sd.jacrev(sd.jacfwd(softmax))):
        np.testing.assert_allclose(nested(SOFT_X), expected, rtol=1e-9, atol=1e-13)


# ---------------------------------------------------------------------------
# Rosenbrock
# ---------------------------------------------------------------------------


def rosen(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


ROSEN_X = np.array([1.3, 0.7, 0.8, 1.9, 1.2])


def _rosen_grad(x):
    g = np.zeros_like(x)
    g[:-1] += -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200 * (x[1:] - x[:-1] ** 2)
    return g


def _rosen_hess(x):
    n = len(x)
    H = np.zeros((n, n))
    for i in range(n - 1):
        H[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        H[i + 1, i + 1] += 200
        H[i, i + 1] = H[i + 1, i] = -400 * x[i]
    return H


def test_rosenbrock_value_and_gradient():
    value, g = sd.value_and_grad(rosen)(ROSEN_X)
    x = ROSEN_X
    expected_value = np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    np.testing.assert_allclose(value, expected_value, rtol=1e-12)
    assert g.shape == (5,)
    np.testing.assert_allclose(g, _rosen_grad(ROSEN_X), rtol=1e-10)


@pytest.mark.parametrize(
    "make_hessian",
    [
        sd.hessian,
        lambda f: sd.jacfwd(sd.jacrev(f)),
        lambda f: sd.jacrev(sd.jacfwd(f)),
        lambda f: sd.jacobian(sd.grad(f)),
        lambda f: sd.jacfwd(sd.grad(f)),
    ],
    ids=["hessian", "jacfwd-jacrev", "jacrev-jacfwd", "jacobian-grad", "jacfwd-grad"],
)
def test_rosenbrock_hessian(make_hessian):
    H = make_hessian(rosen)(ROSEN_X)
    assert H.shape == (5, 5)
    np.testing.assert_allclose(H, _rosen_hess(ROSEN_X), rtol=1e-10, atol=1e-12)


def test_rosenbrock_hessian_at_a_second_point():
    # the Hessian at a second point, to make sure nothing was frozen at the first
    x = ROSEN_X[::-1].copy()
    np.testing.assert_allclose(sd.hessian(rosen)(x), _rosen_hess(x), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# Shapes: out.shape + in.shape (+ in.shape)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("jac", JACOBIANS, ids=JAC_IDS)
def test_jacobian_shape_matrix_input(jac):
    v = np.array([1.0, -2.0, 0.5])
    A = np.arange(6.0).reshape(2, 3)
    J = jac(lambda A: A @ v)(A)
    assert J.shape == (2, 2, 3)
    expected = np.einsum("ij,k->ijk", np.eye(2), v)
    np.testing.assert_allclose(J, expected, rtol=1e-12)


@pytest.mark.parametrize("jac", JACOBIANS, ids=JAC_IDS)
def test_jacobian_shape_matrix_output(jac):
    x = np.array([1.0, 2.0, -1.0])
    J = jac(lambda x: np.outer(x, x))(x)
    assert J.shape == (3, 3, 3)
    eye = np.eye(3)
    expected = np.einsum("ik,j->ijk", eye, x) + np.einsum("i,jk->ijk", x, eye)
    np.testing.assert_allclose(J, expected, rtol=1e-12)


@pytest.mark.parametrize("jac", JACOBIANS, ids=JAC_IDS)
def test_jacobian_scalar_in_scalar_out(jac):
    J = jac(np.sin)(0.3)
    assert np.shape(J) == ()
    np.testing.assert_allclose(J, np.cos(0.3), rtol=1e-12)


@pytest.mark.parametrize("jac", JACOBIANS, ids=JAC_IDS)
def test_jacobian_argnums_tuple(jac):
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([-1.0, 0.5, 4.0])
    Ja, Jb = jac(lambda a, b: a * b, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(Ja, np.diag(b), rtol=1e-12)
    np.testing.assert_allclose(Jb, np.diag(a), rtol=1e-12)


def test_hessian_shape_matrix_input():
    A = np.array([[1.0, 2.0], [0.5, -1.0]])
    H = sd.hessian(lambda A: np.sum(A**3))(A)
    assert H.shape == (2, 2, 2, 2)
    expected = np.zeros((2, 2, 2, 2))
    for i in range(2):
        for j in range(2):
            expected[i, j, i, j] = 6 * A[i, j]
    np.testing.assert_allclose(H, expected, rtol=1e-12)


def test_hessian_scalar():
    H = sd.hessian(lambda x: x**4)(2.0)
    assert np.shape(H) == ()
    np.testing.assert_allclose(H, 48.0, rtol=1e-12)


# ---------------------------------------------------------------------------
# A small MLP over a dict of parameters, against central finite differences
# ---------------------------------------------------------------------------


N_BATCH = 4


def _mlp_data():
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.standard_normal((3, 4)),
        "b1": rng.standard_normal(4),
        "w2": rng.standard_normal((4, 1)),
        "b2": rng.standard_normal(1),
    }
    x = rng.standard_normal((N_BATCH, 3))
    y = rng.standard_normal((N_BATCH, 1))
    return params, x, y


def mlp_predict(params, x):
    hidden = np.tanh(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def mlp_loss(params, x, y):
    return np.mean((mlp_predict(params, x) - y) ** 2)


def _fd_tree(fun, params, eps=1e-6):
    """Central differences of fun(params) w.r.t. every leaf: out.shape + leaf.shape."""
    out_shape = np.shape(fun(params))
    result = {}
    for key, leaf in params.items():
        jac = np.zeros(out_shape + leaf.shape)
        for index in np.ndindex(leaf.shape):
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[key][index] += eps
            minus[key][index] -= eps
            diff = (np.asarray(fun(plus)) - np.asarray(fun(minus))) / (2 * eps)
            jac[(Ellipsis,) + index] = diff
        result[key] = jac
    return result


def test_mlp_gradient_dict():
    params, x, y = _mlp_data()
    value, g = sd.value_and_grad(mlp_loss)(params, x, y)
    np.testing.assert_allclose(value, mlp_loss(params, x, y), rtol=1e-12)
    assert isinstance(g, dict) and set(g) == set(params)
    fd = _fd_tree(lambda p: mlp_loss(p, x, y), params)
    for key in params:
        assert np.shape(g[key]) == params[key].shape, key
        np.testing.assert_allclose(g[key], fd[key], rtol=1e-6, atol=1e-8, err_msg=key)


@pytest.mark.parametrize("jac", JACOBIANS, ids=JAC_IDS)
def test_mlp_jacobian_of_predictions_dict(jac):
    params, x, _ = _mlp_data()

    def predict_flat(params, x):
        return mlp_predict(params, x)[:, 0]

    J = jac(predict_flat)(params, x)
    assert isinstance(J, dict) and set(J) == set(params)
    fd = _fd_tree(lambda p: predict_flat(p, x), params)
    for key in params:
        assert np.shape(J[key]) == (N_BATCH,) + params[key].shape, key
        np.testing.assert_allclose(J[key], fd[key], rtol=1e-6, atol=1e-8, err_msg=key)


def test_mlp_gradient_wrt_inputs_and_params():
    params, x, y = _mlp_data()
    gp, gx = sd.grad(mlp_loss, argnums=(0, 1))(params, x, y)
    assert isinstance(gp, dict) and set(gp) == set(params)
    assert gx.shape == x.shape
    eps = 1e-6
    fd_x = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[index] += eps
        xm[index] -= eps
        fd_x[index] = (mlp_loss(params, xp, y) - mlp_loss(params, xm, y)) / (2 * eps)
    np.testing.assert_allclose(gx, fd_x, rtol=1e-6, atol=1e-8)


def test_mlp_hessian_dict_blocks():
    params, x, y = _mlp_data()
    H = sd.hessian(mlp_loss)(params, x, y)
    # As in JAX: a dict of dicts, H[k1][k2] with shape k1.shape + k2.shape.
    assert isinstance(H, dict) and set(H) == set(params)
    for k1 in params:
        assert isinstance(H[k1], dict) and set(H[k1]) == set(params)
        for k2 in params:
            assert np.shape(H[k1][k2]) == params[k1].shape + params[k2].shape, (k1, k2)
    hidden = np.tanh(x @ params["w1"] + params["b1"])
    n = N_BATCH
    np.testing.assert_allclose(H["b2"]["b2"], np.array([[2.0]]), rtol=1e-12)
    np.testing.assert_allclose(
        H["w2"]["w2"], (2 / n) * (hidden.T @ hidden)[:, None, :, None], rtol=1e-10
    )
    np.testing.assert_allclose(
        H["w2"]["b2"], (2 / n) * hidden.sum(axis=0)[:, None, None], rtol=1e-10
    )
    # Symmetry across blocks, and against finite differences of the (checked) gradient.
    np.testing.assert_allclose(
        H["w1"]["b1"], np.transpose(H["b1"]["w1"], (1, 2, 0)), rtol=1e-10, atol=1e-14
    )
    grad = sd.grad(mlp_loss)
    for k2 in ("w1",):  # one row of blocks keeps the test fast
        fd = _fd_tree(lambda p, k2=k2: grad(p, x, y)[k2], params)
        for k1 in params:
            # fd[k1] has shape k2.shape + k1.shape; H[k2][k1] has the same layout
            np.testing.assert_allclose(
                H[k2][k1], fd[k1], rtol=1e-6, atol=1e-7, err_msg=f"{k2},{k1}"
            )
