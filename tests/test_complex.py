"""Complex numbers: values as NumPy's, derivatives with JAX's conventions.

* ``grad`` of a real-valued function of complex ``z = x + iy`` is ``df/dx - i df/dy``
  (``grad(abs(z)**2) == 2 conj(z)``), checked against central differences along the
  real and the imaginary direction;
* ``holomorphic=True`` gives ``f'(z)``, equal to the difference quotient along either
  direction;
* ``jvp``/``vjp`` with complex tangents and cotangents satisfy JAX's pairing
  ``Re(sum(ct * J t)) == Re(sum(J^T ct * t))``;
* second order: forward over reverse (``jvp`` of ``grad``) and Hessians of real functions
  through complex intermediates, against central differences of the gradient.
"""

import numpy as np
import pytest
import sympy

import symad as sd
from symad.errors import DifferentiationError, TracingError

H = 1e-6
SHAPES = [(), (1,), (3,), (2, 1), (2, 3)]


def _points(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.3, 1.2, shape) + 1j * rng.uniform(-0.8, 0.8, shape)).astype(complex)


def _central_gradient(f, z):
    """df/dx - i df/dy per element, by central differences (JAX's convention)."""
    z = np.asarray(z, dtype=complex)
    grad = np.zeros(z.shape, dtype=complex)
    for index in np.ndindex(z.shape or ()):
        step = np.zeros(z.shape, dtype=complex)
        step[index] = H
        dx = (f(z + step) - f(z - step)) / (2 * H)
        dy = (f(z + 1j * step) - f(z - 1j * step)) / (2 * H)
        grad[index] = dx - 1j * dy
    return grad


def _summed(g):
    return lambda z: np.sum(g(z))


#: Real-valued functions of a complex array (summed), each a different primitive or rule.
REAL_VALUED = {
    "abs_squared": lambda z: np.abs(z) ** 2,
    "real_exp": lambda z: np.real(np.exp(z) * z),
    "imag_log": lambda z: np.imag(np.log(z + 2)),
    "angle": lambda z: np.angle(z),
    "abs_sin": lambda z: np.abs(np.sin(z)),
    "conj_product": lambda z: np.real(np.conj(z) * z ** 2),
    "abs_sqrt": lambda z: np.abs(np.sqrt(z) + 1j),
    "real_power": lambda z: np.real(z ** 2.5),
    "complex_exponent": lambda z: np.real(z ** (1 + 1j)),
    "imag_tanh": lambda z: np.imag(np.tanh(z)),
    "real_quotient": lambda z: np.real(1 / (z + 1j)),
    "abs_cubed": lambda z: abs(z) ** 3,
    "parts_method": lambda z: z.real * z.imag + np.real(z.conj() * 2j),
    "cos_cosh": lambda z: np.real(np.cos(z) * np.cosh(z) - np.arctan(z)),
    "where_on_parts": lambda z: np.where(np.real(z) > 0.7, np.abs(z), np.imag(z) ** 2),
    "arcsinh_exp2": lambda z: np.imag(np.arcsinh(z)) + np.real(np.exp2(z)),
    "var": lambda z: np.var(z) + np.var(z * z),   # real: the mean of |z - mean|**2
    "prod": lambda z: np.real(np.prod(z + 1j) * z),
    "max_min": lambda z: np.imag(np.max(z) - 2 * np.min(z * 1j)),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(REAL_VALUED))
def test_gradient_of_a_real_function_of_complex_input_is_jax_convention(name, shape):
    f = _summed(REAL_VALUED[name])
    z = _points(shape)
    got = sd.grad(f)(z)
    assert np.asarray(got).dtype == np.complex128 and np.shape(got) == shape
    np.testing.assert_allclose(got, _central_gradient(f, z), rtol=1e-6, atol=1e-7)
    assert np.isclose(sd.trace(f, z)(z), f(z), rtol=1e-14)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gradient_of_abs_squared_is_twice_the_conjugate_exactly(shape):
    z = _points(shape, seed=1)
    np.testing.assert_allclose(sd.grad(lambda z: np.sum(np.abs(z) ** 2))(z), 2 * np.conj(z),
                               rtol=1e-15, atol=0)
    assert complex(sd.grad(lambda z: abs(z) ** 2)(3 + 4j)) == 6 - 8j  # jax.grad's value


#: Holomorphic functions and their derivatives.
HOLOMORPHIC = {
    "exp_product": (lambda z: np.exp(z) * z, lambda z: np.exp(z) * (1 + z)),
    "sin_log": (lambda z: np.sin(np.log(z)), lambda z: np.cos(np.log(z)) / z),
    "sqrt_quotient": (lambda z: np.sqrt(z) / (1 + z), lambda z: (1 - z) / (2 * np.sqrt(z) * (1 + z) ** 2)),
    "power": (lambda z: z ** 3.5 - 2j * z, lambda z: 3.5 * z ** 2.5 - 2j),
    "tan_arcsin": (lambda z: np.tan(z) + np.arcsin(z / 3), lambda z: 1 / np.cos(z) ** 2 + 1 / np.sqrt(9 - z * z)),
    "log10_expm1": (lambda z: np.log10(z) * np.expm1(z), lambda z: np.expm1(z) / (z * np.log(10)) + np.log10(z) * np.exp(z)),
    "arcsinh": (lambda z: np.arcsinh(z), lambda z: 1 / np.sqrt(1 + z * z)),
    "exp2": (lambda z: np.exp2(z) * z, lambda z: np.exp2(z) * (np.log(2) * z + 1)),
    "prod": (lambda z: np.prod(np.stack([z, z + 1j, 2 * z]), axis=0), lambda z: 2 * (3 * z ** 2 + 2j * z)),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_holomorphic_derivative_is_the_complex_derivative(name):
    f, derivative = HOLOMORPHIC[name]
    z = 0.7 - 0.4j
    expected = derivative(z)
    along_real = (f(z + H) - f(z - H)) / (2 * H)
    along_imaginary = (f(z + 1j * H) - f(z - 1j * H)) / (2j * H)
    assert np.isclose(along_real, expected, rtol=1e-7) and np.isclose(along_imaginary, expected, rtol=1e-7)
    assert np.isclose(sd.grad(f, holomorphic=True)(z), expected, rtol=1e-13)
    assert np.isclose(sd.jacfwd(f, holomorphic=True)(z), expected, rtol=1e-13)
    assert np.isclose(sd.jacrev(f, holomorphic=True)(z), expected, rtol=1e-13)
    g = sd.grad(f, holomorphic=True)  # the second derivative: differences of the first
    second = (g(z + H) - g(z - H)) / (2 * H)
    assert np.isclose(sd.hessian(f, holomorphic=True)(z), second, rtol=1e-6)
    zs = _points((2, 3), seed=2)
    for jacobian in (sd.jacfwd(f, holomorphic=True)(zs), sd.jacobian(f, holomorphic=True)(zs)):
        assert jacobian.shape == (2, 3, 2, 3)
        np.testing.assert_allclose(jacobian.reshape(6, 6), np.diag(derivative(zs).reshape(-1)), rtol=1e-13)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_jvp_with_a_complex_tangent_is_the_directional_derivative(shape):
    def f(z):  # neither holomorphic nor real
        return np.exp(z) * np.conj(z) + np.abs(z)

    z, t = _points(shape, 3), _points(shape, 4) - 0.5
    out, tangent = sd.jvp(f, (z,), (t,))
    np.testing.assert_allclose(out, f(z), rtol=1e-15)
    np.testing.assert_allclose(tangent, (f(z + H * t) - f(z - H * t)) / (2 * H), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_vjp_is_the_transpose_of_jvp_under_jax_pairing(shape):
    def f(z, x):
        return np.exp(z) * np.conj(z) * x + np.real(z) * 1j

    z, x = _points(shape, 5), np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape)
    t_z, t_x, ct = _points(shape, 6), np.cos(x), _points(shape, 7)
    _, tangent = sd.jvp(f, (z, x), (t_z, t_x))
    _, vjp_fn = sd.vjp(f, z, x)
    ct_z, ct_x = vjp_fn(ct)
    assert np.asarray(ct_x).dtype == np.float64  # a real input's cotangent is real
    left = np.real(np.sum(ct * tangent))
    right = np.real(np.sum(ct_z * t_z)) + np.sum(ct_x * t_x)
    assert np.isclose(left, right, rtol=1e-12)


def test_second_order_forward_over_reverse_against_differences_of_the_gradient():
    def f(z):
        return np.sum(np.abs(np.exp(z) + z ** 2) ** 2 + np.angle(z))

    z, v = _points((3,), 8), _points((3,), 9)
    g = sd.grad(f)
    _, hvp = sd.jvp(g, (z,), (v,))
    np.testing.assert_allclose(hvp, (g(z + H * v) - g(z - H * v)) / (2 * H), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape", [(1,), (2,), (3,)], ids=str)
def test_hessian_of_a_real_function_through_complex_intermediates(shape):
    def f(x):
        return np.sum(np.real(np.exp(1j * x) * x ** 2) + np.abs(x + 2j * np.sin(x)) ** 3)

    x = np.linspace(0.2, 1.1, shape[0])
    g = sd.grad(f)
    h = sd.hessian(f)(x)
    assert h.dtype == np.float64
    columns = [(g(x + H * e) - g(x - H * e)) / (2 * H) for e in np.eye(shape[0])]
    np.testing.assert_allclose(h, np.stack(columns, axis=-1), rtol=1e-6, atol=1e-7)


def test_values_are_numpys_on_every_backend():
    def f(z, x):
        return (np.exp(z) * x + 1j * x, np.abs(z) * x, np.conj(z) ** 2 / (z + 2))

    z, x = _points((4,), 10), np.linspace(-1, 1, 4)
    F = sd.trace(f, z, x)
    expected = f(z, x)
    for backend in ("numpy", "numexpr", "numba"):
        got = F.compile(backend)(z, x)
        for a, b in zip(got, expected):
            assert a.dtype == b.dtype, backend  # a real output comes back real
            np.testing.assert_allclose(a, b, rtol=1e-15, atol=0)


def test_a_batch_of_complex_points_evaluates_without_retracing():
    g = sd.grad(lambda z: np.abs(z) ** 2 + np.real(z ** 3)).trace(1j)
    zs = _points((5,), 11)
    # Re(g) of a holomorphic g has gradient g' in this convention: d/dx Re g - i d/dy Re g.
    np.testing.assert_allclose(g(zs), 2 * np.conj(zs) + 3 * zs ** 2, rtol=1e-14)


def test_formula_uses_sympys_I_and_latex_prints_i():
    F = sd.trace(lambda x, y: x + 1j * y, 1.0, 2.0)
    x, y = sympy.symbols("x y")
    assert F.formula() == x + 1.0 * sympy.I * y
    assert "i" in F.latex() and complex(F(1.0, 2.0)) == 1 + 2j
    G = sd.trace(lambda z: np.conj(z) * z + np.complex128(2 + 3j), 1j)
    (z,) = G.inputs
    assert G.formula() == z * sympy.conjugate(z) + 2.0 + 3.0 * sympy.I
    assert r"\overline{z}" in G.latex()


def test_complex_constant_arrays_and_real_programs_stay_real():
    w = np.array([1 + 2j, -0.5j, 3.0])
    F = sd.trace(lambda x: np.real(np.sum(w * x)), np.ones(3))
    assert F(np.arange(3.0)) == pytest.approx(np.real(np.sum(w * np.arange(3.0))))
    np.testing.assert_allclose(sd.grad(F)(np.ones(3)), np.real(w))
    real = sd.trace(lambda x: np.abs(x) + np.real(x) + np.conj(x) - np.imag(x), np.ones(2))
    assert not real.is_complex_program  # real parts of real values record no complex node
    assert all(node.primitive.name not in ("real", "imag", "conj") for node in real.graph.nodes)
    assert real(np.array([-1.0, 2.0])).tolist() == [-1.0, 6.0]


@pytest.mark.parametrize("call, message", [
    (lambda: sd.grad(lambda z: z * z)(1j), "holomorphic=True"),
    (lambda: sd.jacrev(lambda z: np.exp(z))(np.ones(2) * 1j), "real-valued outputs"),
    (lambda: sd.jacfwd(lambda z: np.abs(z))(1j), "jacfwd requires real-valued inputs"),
    (lambda: sd.grad(lambda x: x * x, holomorphic=True)(1.0), "argument 0 is real"),
    (lambda: sd.grad(lambda z: np.abs(z), holomorphic=True)(1j), "the output is real"),
], ids=["grad_complex_out", "jacrev_complex_out", "jacfwd_complex_in", "holomorphic_real_in",
        "holomorphic_real_out"])
def test_jax_refusals_with_complex_values(call, message):
    with pytest.raises(DifferentiationError, match=message):
        call()


@pytest.mark.parametrize("call, message", [
    (lambda: sd.trace(lambda z: np.maximum(z, 1.0), 1j), "maximum of a complex value"),
    (lambda: sd.trace(lambda z: np.sign(z), 1j), "sign of a complex value"),
    (lambda: sd.trace(lambda z: np.hypot(z, 1.0), np.ones(2) * 1j), "hypot of a complex value"),
    (lambda: sd.trace(lambda x: x * 2, 1.0)(1j), "traced real"),
], ids=["maximum", "sign", "hypot", "complex_argument_to_real_trace"])
def test_operations_without_a_complex_form_are_refused_naming_them(call, message):
    with pytest.raises(TracingError, match=message):
        call()


def test_taylor_mode_and_c_export_refuse_complex_values_saying_what_to_do():
    with pytest.raises(DifferentiationError, match="holomorphic=True"):
        sd.derivative(lambda z: np.exp(z), 2)(0.5 + 0.1j)
    with pytest.raises(DifferentiationError, match="Taylor mode"):
        sd.taylor(lambda z: np.exp(z), 3)(0.5 + 0.1j)
    with pytest.raises(sd.CompileError, match="complex values"):
        sd.trace(lambda z: np.exp(z), 1j).to_c("f")
    # The complex second derivative by nesting, as the first message says.
    second = sd.grad(sd.grad(lambda z: np.exp(2 * z), holomorphic=True), holomorphic=True)(0.5 + 0.1j)
    assert np.isclose(second, 4 * np.exp(2 * (0.5 + 0.1j)), rtol=1e-14)


def test_a_cotangent_has_its_primals_dtype_even_where_fun_ignores_it():
    # JAX: vjp's cotangent for a complex primal is complex, zeros included (autograd's
    # second-order checks pull back through inputs a jvp does not depend on).
    _, pullback = sd.vjp(lambda x, v: np.sum(v), np.ones(3) + 1j, 2.0 + 1j)
    unused, used = pullback(1.0 + 0.5j)
    assert unused.dtype == np.complex128 and np.all(unused == 0)
    assert used == 1.0 + 0.5j
    _, real_pullback = sd.vjp(lambda x, y: x * y, 1.0, 2.0)
    assert all(np.isrealobj(ct) for ct in real_pullback(1.0))


# ---------------------------------------------------------------------------
# Reductions of complex values: max/min (NumPy's order), prod, var/std
# ---------------------------------------------------------------------------

#: (shape, axis, keepdims) cases of the reductions, 0-d and size-1 axes included.
REDUCTION_CASES = [((), None, False), ((1,), None, True), ((3,), 0, False), ((2, 1), 1, True),
                   ((2, 3), None, False), ((2, 3), 0, True), ((2, 3), 1, False), ((1, 3), 0, False)]


@pytest.mark.parametrize("shape, axis, keepdims", REDUCTION_CASES, ids=str)
@pytest.mark.parametrize("name", ["max", "min", "prod", "var", "std"])
def test_complex_reductions_have_numpys_values_and_jvps_along_both_directions(name, shape, axis, keepdims):
    reduce = getattr(np, name)
    if name == "std" and np.prod(np.empty(shape).sum(axis=axis).shape) == np.prod(shape):
        pytest.skip("the std of one element: sqrt's derivative at 0 (the documented nan)")

    def f(z):
        return reduce(z, axis=axis, keepdims=keepdims)

    z = _points(shape, seed=12)
    value = sd.trace(f, z)(z)
    assert np.asarray(value).dtype == np.asarray(f(z)).dtype  # var/std real, the others complex
    np.testing.assert_allclose(value, f(z), rtol=1e-14, atol=1e-15)
    for direction in (_points(shape, seed=13), 1j * _points(shape, seed=14)):
        _, tangent = sd.jvp(f, (z,), (direction,))
        central = (f(z + H * direction) - f(z - H * direction)) / (2 * H)
        np.testing.assert_allclose(tangent, central, rtol=1e-6, atol=1e-8)
        ct = _points(np.shape(value), seed=15)   # the VJP is the transpose under Re(ct * t)
        ct = ct if np.iscomplexobj(value) else np.real(ct)
        (pulled,) = sd.vjp(f, z)[1](ct)
        assert np.isclose(np.real(np.sum(ct * tangent)), np.real(np.sum(pulled * direction)), rtol=1e-12)


def test_max_of_complex_values_takes_numpys_order_and_the_chosen_elements_tangent():
    z = np.array([1 + 5j, 2 - 1j, 2 + 0.5j, -3 + 9j])   # real parts first, then imaginary
    assert complex(sd.trace(np.max, z)(z)) == np.max(z) == 2 + 0.5j
    assert complex(sd.trace(np.min, z)(z)) == np.min(z) == -3 + 9j
    t = np.array([1.0, 2.0, 3.0 + 1j, 4.0])
    assert complex(sd.jvp(np.max, (z,), (t,))[1]) == 3 + 1j
    ties = np.array([1 + 1j, 1 + 1j, 0.5j])   # a tie shares the tangent, as JAX's
    assert complex(sd.jvp(np.max, (ties,), (np.array([2.0, 4j, 9.0]),))[1]) == 1 + 2j


def test_a_tangent_has_its_outputs_dtype_through_a_pullback_of_real():
    # (z, u) -> vjp(np.real, z)(u) is complex (a cotangent of z); its tangent is too, as JAX's
    # (autograd's second-order checks compare it with differences of complex values).
    def pulled(z, u):
        return sd.vjp(np.real, z)[1](u)[0]

    for z in (0.4 + 0.1j, _points((3, 2), seed=16)):
        u = np.real(_points(np.shape(z), seed=17))
        out, tangent = sd.jvp(pulled, (z, u), (z, 2 * u))
        assert np.iscomplexobj(out) and np.iscomplexobj(tangent)
        np.testing.assert_array_equal(tangent, 2 * u + 0j)
        # an input fun does not use: a complex zero, traced inside another transform too
        _, zero = sd.jvp(lambda z, u: sd.vjp(lambda w: np.var(w) * 0 + np.sum(u), z)[1](1.0)[0],
                         (z, u), (z, u))
        assert np.iscomplexobj(zero) and not np.any(zero)
