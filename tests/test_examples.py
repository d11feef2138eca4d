"""The worked examples of the issue, one test each (SPEC §1-§4)."""

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp

X1, X2 = sympy.symbols("x1 x2")

F_VALUE = np.log(2.0) + 10.0 - np.sin(5.0)
F_GRAD = (5.5, 2.0 - np.cos(5.0))


def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# ---------------------------------------------------------------------------
# f(x1, x2) = log(x1) + x1*x2 - sin(x2) at (2, 5)
# ---------------------------------------------------------------------------


def test_f_value_traced_and_plain():
    np.testing.assert_allclose(F_VALUE, 11.652071, rtol=1e-7)
    F = sd.trace(f, 2.0, 5.0)
    np.testing.assert_allclose(F(2.0, 5.0), F_VALUE, rtol=1e-12)


def test_f_grad_both_arguments():
    g = sd.grad(f, argnums=(0, 1))(2.0, 5.0)
    assert isinstance(g, tuple) and len(g) == 2
    np.testing.assert_allclose(g, F_GRAD, rtol=1e-12)


def test_f_grad_default_argnum_is_first():
    np.testing.assert_allclose(sd.grad(f)(2.0, 5.0), 5.5, rtol=1e-12)
    np.testing.assert_allclose(sd.grad(f, 1)(2.0, 5.0), F_GRAD[1], rtol=1e-12)


def test_f_value_and_grad():
    value, g = sd.value_and_grad(f, argnums=(0, 1))(2.0, 5.0)
    np.testing.assert_allclose(value, F_VALUE, rtol=1e-12)
    assert isinstance(g, tuple) and len(g) == 2
    np.testing.assert_allclose(g, F_GRAD, rtol=1e-12)


def test_f_jvp():
    out, tangent = sd.jvp(f, (2.0, 5.0), (1.0, 0.0))
    np.testing.assert_allclose(out, F_VALUE, rtol=1e-12)
    np.testing.assert_allclose(tangent, 5.5, rtol=1e-12)
    _, tangent2 = sd.jvp(f, (2.0, 5.0), (0.0, 1.0))
    np.testing.assert_allclose(tangent2, F_GRAD[1], rtol=1e-12)


def test_f_vjp():
    out, vjp_fn = sd.vjp(f, 2.0, 5.0)
    np.testing.assert_allclose(out, F_VALUE, rtol=1e-12)
    ct = vjp_fn(1.0)
    assert isinstance(ct, tuple) and len(ct) == 2
    np.testing.assert_allclose(ct, F_GRAD, rtol=1e-12)
    np.testing.assert_allclose(vjp_fn(2.0), 2.0 * np.array(F_GRAD), rtol=1e-12)


def test_f_gradient_formula_exact():
    dF = sd.grad(f, (0, 1)).trace(2.0, 5.0)
    assert dF.formula() == (1 / X1 + X2, X1 - sympy.cos(X2))


def test_f_trace_inputs_named_after_parameters():
    F = sd.trace(f, 2.0, 5.0)
    assert F.inputs == (X1, X2)
    assert F.formula() == sympy.log(X1) + X1 * X2 - sympy.sin(X2)


def test_f_latex_cse_stats():
    F = sd.grad(f, (0, 1)).trace(2.0, 5.0)
    tex = F.latex()
    assert isinstance(tex, str)
    assert "\\begin{aligned}" in tex

    assignments, outputs = F.cse()
    assert isinstance(assignments, list)
    for pair in assignments:
        symbol, expr = pair
        assert isinstance(symbol, sympy.Symbol)
        assert isinstance(expr, sympy.Basic)
    # Rebuilding the outputs from the CSE program gives the formula back.
    outs = list(outputs)
    for symbol, expr in reversed(assignments):
        outs = [sympy.sympify(o).subs(symbol, expr) for o in outs]
    expected = (1 / X1 + X2, X1 - sympy.cos(X2))
    assert len(outs) == 2
    for got, want in zip(outs, expected, strict=True):
        assert sympy.simplify(got - want) == 0

    assert tex == (
        "\\begin{aligned}\n"
        "\\frac{\\partial f}{\\partial x_{1}} &= x_{2} + \\frac{1}{x_{1}} \\\\\n"
        "\\frac{\\partial f}{\\partial x_{2}} &= x_{1} - \\cos{\\left(x_{2} \\right)}\n"
        "\\end{aligned}"
    )
    # log, multiply, add, sin, subtract
    assert sd.trace(f, 2.0, 5.0).stats()["nodes"] == 5


# ---------------------------------------------------------------------------
# Higher derivatives
# ---------------------------------------------------------------------------


def g_poly(x):
    return x**2 + 3 * x + 1


def test_polynomial_first_and_second_derivative():
    np.testing.assert_allclose(sd.grad(g_poly)(2.0), 7.0, rtol=1e-12)
    np.testing.assert_allclose(sd.grad(sd.grad(g_poly))(2.0), 2.0, rtol=1e-12)


def test_third_derivative_of_sin():
    expected = -np.cos(1.0)
    np.testing.assert_allclose(sd.derivative(np.sin, 3)(1.0), expected, rtol=1e-12)
    np.testing.assert_allclose(sd.grad(sd.grad(sd.grad(np.sin)))(1.0), expected, rtol=1e-12)


def test_derivative_on_a_grid():
    xs = np.linspace(0, 3, 7)
    out = sd.derivative(np.sin, 3)(xs)
    assert isinstance(out, np.ndarray) and out.shape == (7,)
    np.testing.assert_allclose(out, -np.cos(xs), rtol=1e-12, atol=1e-15)


def test_derivative_zero_is_the_function():
    xs = np.linspace(0, 3, 7)
    np.testing.assert_allclose(sd.derivative(np.sin, 0)(xs), np.sin(xs), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sd.derivative(g_poly, 0)(2.0), 11.0, rtol=1e-12)
    np.testing.assert_allclose(sd.derivative(f, 0)(2.0, 5.0), F_VALUE, rtol=1e-12)


def test_derivative_other_argnum_and_broadcast():
    np.testing.assert_allclose(sd.derivative(f, 1, argnum=1)(2.0, 5.0), F_GRAD[1], rtol=1e-12)
    np.testing.assert_allclose(sd.derivative(f, 2, argnum=1)(2.0, 5.0), np.sin(5.0), rtol=1e-12)
    xs = np.linspace(0.5, 3, 6)
    np.testing.assert_allclose(sd.derivative(f, 1)(xs, 5.0), 1 / xs + 5.0, rtol=1e-12)


# ---------------------------------------------------------------------------
# argnums / grad_position / Parameters
# ---------------------------------------------------------------------------


def fE(x, y, z):
    return x * z + y


def test_argnums_forms():
    np.testing.assert_allclose(sd.grad(fE)(2.0, 5.0, 3.0), 3.0, rtol=1e-12)
    g2 = sd.grad(fE, grad_position=(2,))(2.0, 5.0, 3.0)
    assert isinstance(g2, tuple) and len(g2) == 1
    np.testing.assert_allclose(g2[0], 2.0, rtol=1e-12)
    g012 = sd.grad(fE, argnums=(0, 1, 2))(2.0, 5.0, 3.0)
    assert isinstance(g012, tuple) and len(g012) == 3
    np.testing.assert_allclose(g012, (3.0, 1.0, 2.0), rtol=1e-12)


def test_negative_argnum_in_range():
    np.testing.assert_allclose(sd.grad(fE, argnums=-1)(2.0, 5.0, 3.0), 2.0, rtol=1e-12)


def test_parameter_weights_and_update_without_retrace():
    z = sd.Parameter(3.0, name="z")

    def fP(x, y):
        return x * z + y

    grad_w = sd.grad(fP, argnums=None, weights=[z])
    gw = grad_w(2.0, 5.0)
    assert isinstance(gw, tuple) and len(gw) == 1
    np.testing.assert_allclose(gw[0], 2.0, rtol=1e-12)

    vg = sd.value_and_grad(fP, argnums=0)
    value, gx = vg(2.0, 5.0)
    np.testing.assert_allclose(value, 11.0, rtol=1e-12)
    np.testing.assert_allclose(gx, 3.0, rtol=1e-12)

    traced = vg.trace(2.0, 5.0)
    z.value = 4.0
    assert vg.trace(2.0, 5.0) is traced  # the cached trace serves the new value
    value, gx = vg(2.0, 5.0)  # same transform object: no re-tracing needed
    np.testing.assert_allclose(value, 13.0, rtol=1e-12)
    np.testing.assert_allclose(gx, 4.0, rtol=1e-12)
    # a fresh transform agrees
    value, gx = sd.value_and_grad(fP, argnums=0)(2.0, 5.0)
    np.testing.assert_allclose(value, 13.0, rtol=1e-12)
    np.testing.assert_allclose(gx, 4.0, rtol=1e-12)
    np.testing.assert_allclose(grad_w(2.0, 5.0)[0], 2.0, rtol=1e-12)


def test_parameter_with_argnums_returns_pair():
    z = sd.Parameter(3.0, name="z")

    def fP(x, y):
        return x * z + y

    arg_grads, weight_grads = sd.grad(fP, argnums=0, weights=[z])(2.0, 5.0)
    np.testing.assert_allclose(arg_grads, 3.0, rtol=1e-12)
    assert isinstance(weight_grads, tuple) and len(weight_grads) == 1
    np.testing.assert_allclose(weight_grads[0], 2.0, rtol=1e-12)


# ---------------------------------------------------------------------------
# A linear layer with binary cross-entropy on logits
# ---------------------------------------------------------------------------


def _layer_data():
    rng = np.random.default_rng(0)
    x = np.ones(5)
    w = rng.standard_normal((5, 3))
    b = rng.standard_normal(3)
    y = np.zeros(3)
    return x, w, b, y


def _layer_expected(x, w, b, y):
    z = x @ w + b
    loss = np.mean(np.logaddexp(0.0, z) - z * y)
    delta = (sigmoid(z) - y) / 3.0
    return z, loss, np.outer(x, delta), delta


def bce_snp(x, w, b, y):
    z = x @ w + b
    return snp.mean(snp.softplus(z) - z * y)


def bce_numpy(x, w, b, y):
    z = x @ w + b
    return np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z))))


@pytest.mark.parametrize("loss", [bce_snp, bce_numpy], ids=["snp", "numpy"])
def test_bce_layer_gradients(loss):
    x, w, b, y = _layer_data()
    _, loss_value, gw_expected, gb_expected = _layer_expected(x, w, b, y)
    value, (gw, gb) = sd.value_and_grad(loss, argnums=(1, 2))(x, w, b, y)
    np.testing.assert_allclose(value, loss_value, rtol=1e-12)
    assert gw.shape == (5, 3) and gb.shape == (3,)
    np.testing.assert_allclose(gw, gw_expected, rtol=1e-10)
    np.testing.assert_allclose(gb, gb_expected, rtol=1e-10)
    gw2, gb2 = sd.grad(loss, (1, 2))(x, w, b, y)
    np.testing.assert_allclose(gw2, gw_expected, rtol=1e-10)
    np.testing.assert_allclose(gb2, gb_expected, rtol=1e-10)


def bce_with_z(x, w, b, y):
    z = x @ w + b
    return snp.mean(snp.softplus(z) - z * y), z


def bce_with_stopped_z(x, w, b, y):
    z = x @ w + b
    return snp.mean(snp.softplus(z) - z * y), sd.stop_gradient(z)


def test_bce_tuple_output_differentiates_the_sum():
    x, w, b, y = _layer_data()
    _, _, gw_expected, gb_expected = _layer_expected(x, w, b, y)
    gw, gb = sd.grad(bce_with_z, (1, 2))(x, w, b, y)
    np.testing.assert_allclose(gw, gw_expected + np.outer(x, np.ones(3)), rtol=1e-10)
    np.testing.assert_allclose(gb, gb_expected + np.ones(3), rtol=1e-10)


def test_bce_tuple_output_with_stop_gradient():
    x, w, b, y = _layer_data()
    _, _, gw_expected, gb_expected = _layer_expected(x, w, b, y)
    gw, gb = sd.grad(bce_with_stopped_z, (1, 2))(x, w, b, y)
    np.testing.assert_allclose(gw, gw_expected, rtol=1e-10)
    np.testing.assert_allclose(gb, gb_expected, rtol=1e-10)


def test_bce_has_aux():
    x, w, b, y = _layer_data()
    z_expected, loss_value, gw_expected, gb_expected = _layer_expected(x, w, b, y)
    grads, (z_out,) = sd.grad(bce_with_z, (1, 2), has_aux=True)(x, w, b, y)
    gw, gb = grads
    np.testing.assert_allclose(gw, gw_expected, rtol=1e-10)
    np.testing.assert_allclose(gb, gb_expected, rtol=1e-10)
    np.testing.assert_allclose(z_out, z_expected, rtol=1e-12)

    # value_and_grad returns exactly what the function returned, here (loss, z)
    (value, z_out2), (gw3, gb3) = sd.value_and_grad(bce_with_z, (1, 2), has_aux=True)(
        x, w, b, y
    )
    np.testing.assert_allclose(value, loss_value, rtol=1e-12)
    np.testing.assert_allclose(z_out2, z_expected, rtol=1e-12)
    np.testing.assert_allclose(gw3, gw_expected, rtol=1e-10)
    np.testing.assert_allclose(gb3, gb_expected, rtol=1e-10)


def test_bce_with_parameters():
    x, w, b, y = _layer_data()
    _, loss_value, gw_expected, gb_expected = _layer_expected(x, w, b, y)
    W = sd.Parameter(w, name="w")
    B = sd.Parameter(b, name="b")

    def fwd(x, y):
        z = x @ W + B
        return snp.mean(snp.softplus(z) - z * y)

    value, grads = sd.value_and_grad(fwd, None, weights=[W, B])(x, y)
    np.testing.assert_allclose(value, loss_value, rtol=1e-12)
    assert isinstance(grads, tuple) and len(grads) == 2
    gw, gb = grads
    assert np.shape(gw) == (5, 3) and np.shape(gb) == (3,)
    np.testing.assert_allclose(gw, gw_expected, rtol=1e-10)
    np.testing.assert_allclose(gb, gb_expected, rtol=1e-10)


# ---------------------------------------------------------------------------
# Jacobian of a permutation, vjp of array functions, nesting
# ---------------------------------------------------------------------------


def test_jacobian_of_integer_indexing():
    y = np.array([1.0, 3.0, 2.0])

    def perm(x):
        return y * x[[0, 2, 1]]

    x = np.array([1.0, 2.0, 3.0])
    expected = np.array([[1.0, 0, 0], [0, 0, 3.0], [0, 2.0, 0]])
    for jac in (sd.jacobian, sd.jacfwd, sd.jacrev):
        J = jac(perm)(x)
        assert J.shape == (3, 3)
        np.testing.assert_array_equal(J, expected)


def zfun(x, y):
    return x**2 + y * x + y**2


Z_X = np.array([[1.0, 2.0], [3.0, 4.0]])
Z_Y = np.array([[0.5, -1.0], [2.0, 0.25]])


def test_vjp_of_array_function():
    out, vjp_fn = sd.vjp(zfun, Z_X, Z_Y)
    np.testing.assert_allclose(out, zfun(Z_X, Z_Y), rtol=1e-12)
    gx, gy = vjp_fn(np.ones((2, 2)))
    np.testing.assert_allclose(gx, 2 * Z_X + Z_Y, rtol=1e-12)
    np.testing.assert_allclose(gy, Z_X + 2 * Z_Y, rtol=1e-12)


def h_vjp(x, y):
    _, pullback = sd.vjp(zfun, x, y)
    gx, gy = pullback(np.ones((2, 2)))
    return 2 * gx + gy


def h_grad(x, y):
    gx, gy = sd.grad(lambda a, b: np.sum(zfun(a, b)), (0, 1))(x, y)
    return 2 * gx + gy


@pytest.mark.parametrize("h", [h_vjp, h_grad], ids=["vjp", "grad"])
def test_nested_derivative_of_derivative(h):
    np.testing.assert_allclose(h(Z_X, Z_Y), 5 * Z_X + 4 * Z_Y, rtol=1e-12)
    second = sd.grad(lambda x, y: np.sum(h(x, y)))(Z_X, Z_Y)
    assert second.shape == (2, 2)
    np.testing.assert_allclose(second, np.full((2, 2), 5.0), rtol=1e-12)


# ---------------------------------------------------------------------------
# Integer inputs, unused inputs
# ---------------------------------------------------------------------------


def test_integer_input_to_differentiated_position_raises():
    with pytest.raises(sd.DifferentiationError, match="argument 'x1' .* has dtype int"):
        sd.grad(f)(2, 5.0)
    with pytest.raises(TypeError, match="has dtype int"):  # a TypeError, as in JAX
        sd.grad(lambda v: np.sum(v**2))(np.arange(3))


def test_integer_input_in_undifferentiated_position_is_fine():
    np.testing.assert_allclose(sd.grad(f)(2.0, 5), 5.5, rtol=1e-12)


def test_unused_inputs_get_exact_zeros():
    x = np.array([1.0, 2.0, 3.0])
    y = np.arange(6.0).reshape(2, 3)
    gx, gy = sd.grad(lambda x, y: np.sum(x**2), (0, 1))(x, y)
    np.testing.assert_allclose(gx, 2 * x, rtol=1e-12)
    assert np.shape(gy) == (2, 3)
    np.testing.assert_array_equal(gy, np.zeros((2, 3)))

    g_scalar = sd.grad(lambda a, b: a * 2.0, (0, 1))(1.5, 4.0)
    assert g_scalar[1] == 0.0


# ---------------------------------------------------------------------------
# Pytrees
# ---------------------------------------------------------------------------


def test_pytree_dict():
    p = {"a": np.array([1.0, 2.0, 3.0]), "b": 2.0}

    def fd(p):
        return np.sum(p["a"] ** 2) * p["b"]

    g = sd.grad(fd)(p)
    assert isinstance(g, dict) and set(g) == {"a", "b"}
    assert np.shape(g["a"]) == (3,) and np.shape(g["b"]) == ()
    np.testing.assert_allclose(g["a"], 2 * p["a"] * p["b"], rtol=1e-12)
    np.testing.assert_allclose(g["b"], np.sum(p["a"] ** 2), rtol=1e-12)


def test_pytree_list_and_tuple():
    def fl(l):
        return l[0] * l[1] + np.sum(l[2] * l[0])

    args = [2.0, 3.0, np.array([1.0, -1.0, 0.5])]
    g = sd.grad(fl)(args)
    assert isinstance(g, list) and len(g) == 3
    np.testing.assert_allclose(g[0], 3.0 + 0.5, rtol=1e-12)
    np.testing.assert_allclose(g[1], 2.0, rtol=1e-12)
    assert np.shape(g[2]) == (3,)
    np.testing.assert_allclose(g[2], np.full(3, 2.0), rtol=1e-12)

    gt = sd.grad(fl)(tuple(args))
    assert isinstance(gt, tuple) and len(gt) == 3
    np.testing.assert_allclose(gt[0], 3.5, rtol=1e-12)
    np.testing.assert_allclose(gt[2], np.full(3, 2.0), rtol=1e-12)


def test_pytree_nested_in_several_arguments():
    def fn(params, x):
        return np.sum(params["w"][0] * x) + params["w"][1] ** 2

    params = {"w": (np.array([1.0, 2.0]), 3.0)}
    x = np.array([0.5, -2.0])
    gp, gx = sd.grad(fn, (0, 1))(params, x)
    assert isinstance(gp, dict) and isinstance(gp["w"], tuple)
    np.testing.assert_allclose(gp["w"][0], x, rtol=1e-12)
    np.testing.assert_allclose(gp["w"][1], 6.0, rtol=1e-12)
    np.testing.assert_allclose(gx, params["w"][0], rtol=1e-12)


# ---------------------------------------------------------------------------
# Python loops
# ---------------------------------------------------------------------------


def logistic(l):
    for _ in range(5):
        l = 4 * l * (1 - l)
    return l


def test_python_loop_unrolls():
    l0 = 0.1
    l, dl = l0, 1.0
    for _ in range(5):
        dl *= 4 - 8 * l
        l = 4 * l * (1 - l)
    value, g = sd.value_and_grad(logistic)(l0)
    np.testing.assert_allclose(value, l, rtol=1e-12)
    np.testing.assert_allclose(g, dl, rtol=1e-10)
    eps = 1e-6
    fd = (logistic(l0 + eps) - logistic(l0 - eps)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


# ---------------------------------------------------------------------------
# Batching
# ---------------------------------------------------------------------------


def test_batch_evaluation_without_retracing():
    F = sd.trace(f, 1.0, 1.0)
    xs = np.linspace(0.5, 3.0, 1000)
    ys = np.linspace(-2.0, 2.0, 1000)
    out = F(xs, ys)
    assert isinstance(out, np.ndarray) and out.shape == (1000,)
    np.testing.assert_allclose(out, f(xs, ys), rtol=1e-12)

    gradient = sd.grad(F, argnums=(0, 1))
    gx, gy = gradient(xs, ys)
    gradient(xs[:10], ys[:10])
    gradient(xs.reshape(10, 100), ys.reshape(10, 100))
    assert len(gradient._cache) == 1  # one gradient graph serves every batch shape
    assert isinstance(gx, np.ndarray) and gx.shape == (1000,)
    assert isinstance(gy, np.ndarray) and gy.shape == (1000,)
    np.testing.assert_allclose(gx, 1 / xs + ys, rtol=1e-12)
    np.testing.assert_allclose(gy, xs - np.cos(ys), rtol=1e-12, atol=1e-15)


def test_zero_d_results_are_numpy_scalars():
    F = sd.trace(f, 1.0, 1.0)
    r = F(2.0, 5.0)
    assert isinstance(r, np.float64)
    np.testing.assert_allclose(r, F_VALUE, rtol=1e-12)
    g = sd.grad(f)(2.0, 5.0)
    assert isinstance(g, np.float64)


# ---------------------------------------------------------------------------
# Custom primitives
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def softsign(softsign_primitive):
    return softsign_primitive


def test_custom_primitive_value_grad_formula(softsign):
    def uses_softsign(x):
        return 2.0 * softsign(x)

    for x0 in (0.5, -1.5):
        value, g = sd.value_and_grad(uses_softsign)(x0)
        np.testing.assert_allclose(value, 2 * x0 / (1 + abs(x0)), rtol=1e-12)
        np.testing.assert_allclose(g, 2 / (1 + abs(x0)) ** 2, rtol=1e-12)
    formula = sd.trace(uses_softsign, 0.5).formula()
    assert "softsign" in str(formula)
    np.testing.assert_allclose(sd.grad(softsign)(0.5), 1 / 1.5**2, rtol=1e-12)


def test_custom_primitive_direct_call(softsign):
    np.testing.assert_allclose(softsign(0.5), 1 / 3, rtol=1e-12)


# ---------------------------------------------------------------------------
# from_sympy
# ---------------------------------------------------------------------------


def test_from_sympy():
    x, y = sympy.symbols("x y")
    G = sd.from_sympy(x**2 * sympy.sin(y), [x, y])
    np.testing.assert_allclose(G(1.0, 2.0), np.sin(2.0), rtol=1e-12)
    dG = sd.grad(G, argnums=(0, 1))
    gx, gy = dG(1.0, 2.0)
    np.testing.assert_allclose(gx, 2 * np.sin(2.0), rtol=1e-12)
    np.testing.assert_allclose(gy, np.cos(2.0), rtol=1e-12)
    fx, fy = dG.trace(1.0, 2.0).formula()
    assert sympy.simplify(fx - 2 * x * sympy.sin(y)) == 0
    assert sympy.simplify(fy - x**2 * sympy.cos(y)) == 0


# ---------------------------------------------------------------------------
# stop_gradient
# ---------------------------------------------------------------------------


def test_stop_gradient_first_order():
    assert sd.grad(lambda x: x * sd.stop_gradient(x))(3.0) == 3.0
    assert sd.grad(lambda x: 2.0 * sd.stop_gradient(x))(3.0) == 0.0


def test_stop_gradient_cuts_every_order():
    def h(x):
        return x * sd.stop_gradient(x**2)

    np.testing.assert_allclose(sd.grad(h)(3.0), 9.0, rtol=1e-12)
    assert sd.grad(sd.grad(h))(3.0) == 0.0
    assert sd.grad(sd.grad(lambda x: x * sd.stop_gradient(x)))(3.0) == 0.0
