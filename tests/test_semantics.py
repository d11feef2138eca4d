"""Edge cases of the transform semantics (JAX's behaviour where SPEC is silent).

Each test pins a defect found in review, so it stays fixed.
"""

import gc

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp
from symad.graph import active_builders


def test_unused_weight_gets_zero_even_when_the_graph_holds_a_constant_zero():
    used, unused = sd.Parameter(1.0, name="w"), sd.Parameter(np.zeros(2), name="u")

    def relu_sum(x):
        return np.sum(np.maximum(used * x, 0))

    grad_used, grad_unused = sd.grad(relu_sum, None, weights=[used, unused])(np.array([-1.0, 2.0]))
    assert grad_used == 2.0
    np.testing.assert_array_equal(grad_unused, [0.0, 0.0])


def test_inner_argument_named_like_an_outer_one_is_a_distinct_symbol():
    def outer(x):
        a = x
        return sd.grad(lambda x: x * a)(2.0)  # d/dx (x * a) = a, the outer x

    assert sd.trace(outer, 0.0)(3.0) == 3.0
    assert sd.grad(outer)(3.0) == 1.0


def test_parameter_dependence_survives_a_transform_called_on_concrete_values():
    s = sd.Parameter(2.0, name="s")
    (weight_grad,) = sd.grad(
        lambda y: sd.grad(lambda x: s * x**2)(1.5) * y, argnums=None, weights=[s]
    )(1.0)
    assert weight_grad == 3.0  # d/ds (2 s 1.5) = 3
    F = sd.trace(lambda x: s * x, 0.0)
    (via_function,) = sd.grad(lambda y: F(3.0) * y, argnums=None, weights=[s])(1.0)
    assert via_function == 3.0


def test_comparisons_count_as_numbers_in_arithmetic():
    x = np.array([1.0, 2.0, 3.0])
    assert sd.trace(lambda v: np.sum(v > 1), x)(x) == 2.0
    assert sd.trace(lambda v: np.mean(v > 1), x)(x) == pytest.approx(2 / 3)
    np.testing.assert_array_equal(sd.trace(lambda v: (v > 1) + (v > 1), x)(x), [0.0, 2.0, 2.0])
    np.testing.assert_array_equal(sd.grad(lambda v: np.sum((v > 1) * v))(x), [0.0, 1.0, 1.0])
    (v0,) = sd.trace(lambda v: (v > 1) * v, 0.0).inputs
    assert sd.trace(lambda v: (v > 1) * v, 0.0).formula() == sympy.Piecewise((1, v0 > 1), (0, True)) * v0


def test_numbers_used_as_conditions_mean_nonzero():
    F = sd.trace(lambda c, a: snp.where(c, a, -a), 0.0, 0.0)
    np.testing.assert_array_equal(F(np.array([0.0, 2.0]), 1.0), [-1.0, 1.0])


def test_comparison_outputs_stay_boolean():
    out = sd.trace(lambda v: v > 1, np.zeros(3))(np.array([1.0, 2.0, 3.0]))
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, [False, True, True])


def test_iterating_over_a_traced_vector():
    def squares(v):
        return snp.stack([vi**2 for vi in v]).sum() + sum(v)

    np.testing.assert_allclose(sd.grad(squares)(np.array([1.0, 2.0])), [3.0, 5.0])


def test_max_and_min_share_the_derivative_at_ties_like_jax():
    np.testing.assert_allclose(sd.grad(np.max)(np.array([3.0, 3.0, 3.0])), [1 / 3] * 3)
    np.testing.assert_allclose(sd.grad(np.min)(np.full(4, 2.0)), [0.25] * 4)
    np.testing.assert_allclose(sd.grad(np.max)(np.array([1.0, 3.0, 3.0])), [0.0, 0.5, 0.5])
    np.testing.assert_allclose(
        sd.grad(lambda m: np.sum(np.max(m, axis=0)))(np.array([[1.0, 5.0], [2.0, 4.0]])),
        [[0.0, 1.0], [1.0, 0.0]],
    )


def test_parameter_behaves_like_its_value_everywhere():
    b = sd.Parameter(np.array([0.5, -0.5]), name="b")
    np.testing.assert_array_equal(b == 0.5, [True, False])
    assert float(b.max()) == 0.5 and b.size == 2
    assert float(sd.Parameter(2.0, name="c")) == 2.0
    F = sd.trace(lambda x: snp.where(b == 0.5, x, 0.0), np.ones(2))
    np.testing.assert_array_equal(F(np.ones(2)), [1.0, 0.0])
    assert sd.grad(lambda x: b.dot(x))(np.ones(2)).tolist() == [0.5, -0.5]


def test_keyword_arguments_bind_to_their_positions():
    def scaled(a, b=2.0):
        return a * b

    assert sd.grad(scaled)(2.0, b=3.0) == 3.0
    assert sd.grad(scaled, argnums=1)(2.0, b=3.0) == 2.0
    assert sd.grad(scaled)(2.0) == 2.0
    with pytest.raises(sd.TracingError, match="keyword-only"):
        sd.grad(lambda a, *, k=1.0: a * k)(2.0, k=3.0)


def test_vmap_pytree_axes_and_out_axes():
    xs = {"a": np.arange(3.0), "b": np.ones((2, 3))}
    out = sd.vmap(lambda d: d["a"] * d["b"], in_axes=({"a": 0, "b": 1},))(xs)
    np.testing.assert_allclose(out, (np.arange(3.0)[:, None] * np.ones((3, 2))))
    first, second = sd.vmap(lambda r: (r * 2, np.sum(r)), out_axes=(1, 0))(np.ones((2, 3)))
    assert first.shape == (3, 2) and second.shape == (2,)
    with pytest.raises(sd.TracingError, match="maps no argument"):
        sd.vmap(lambda a: a, in_axes=None)(np.ones(2))


def test_vmap_inside_a_trace_records_closures():
    assert sd.grad(lambda y: np.sum(sd.vmap(lambda r: r * y)(np.ones(3))))(2.0) == 3.0
    s = sd.Parameter(2.0, name="s")
    (weight_grad,) = sd.grad(lambda x: np.sum(sd.vmap(lambda r: s * r)(x)), None, weights=[s])(
        np.array([1.0, 2.0])
    )
    assert weight_grad == 3.0


def test_power_with_constant_zero_base_has_zero_exponent_derivative():
    assert sd.grad(lambda x: 0.0**x)(2.0) == 0.0
    assert sd.grad(lambda x: 2.0**x)(1.0) == pytest.approx(2 * np.log(2))


def test_mean_of_empty_is_nan_like_numpy():
    F = sd.trace(lambda v: np.mean(v, axis=0), np.zeros((0, 2)))
    assert np.isnan(F(np.zeros((0, 2)))).all()


def test_hessian_with_aux():
    hess, (aux,) = sd.hessian(lambda x: (np.sum(x**3), x[0]), has_aux=True)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(hess, np.diag([6.0, 12.0]))
    assert aux == 1.0


def test_from_sympy_never_parses_strings_and_rejects_complex_constants():
    x = sympy.Symbol("x")
    with pytest.raises(sd.TracingError, match="never parsed"):
        sd.from_sympy("__import__('os').getcwd() + x", [x])
    with pytest.raises(sd.TracingError, match="Symbols"):
        sd.from_sympy(x, ["x"])
    with pytest.raises(sd.TracingError, match="not real"):
        sd.from_sympy(sympy.I * x, [x])
    F = sd.from_sympy(sympy.Piecewise((x**2, x > 0)), [x])
    assert F(2.0) == 4.0 and np.isnan(F(-2.0))  # undefined past the last condition, as in SymPy


def test_variance_and_standard_deviation():
    v = np.array([1.0, 2.0, 4.0])
    assert sd.trace(lambda t: t.std(), v)(v) == pytest.approx(np.std(v))
    np.testing.assert_allclose(sd.grad(np.var)(v), 2 * (v - v.mean()) / 3)


@pytest.mark.parametrize(
    "call",
    [
        lambda: sd.trace(lambda v: np.sum(v, axis=3), np.zeros(2)),
        lambda: sd.trace(lambda v: v @ v, np.zeros((2, 3))),
        lambda: sd.trace(lambda v: np.sum(v, initial=1.0), np.zeros(2)),
        lambda: sd.trace(lambda v: v // 2, np.zeros(2)),
        lambda: sd.trace(lambda v: v.item(), 0.0),
        lambda: sd.trace(lambda v: v, 0.0)("a"),
        lambda: sd.vmap(lambda a, b: a * b)(np.ones(2), np.ones(3)),
        lambda: sd.vmap(lambda a: a, in_axes=2)(np.ones(2)),
        lambda: sd.vmap(lambda a: a)(np.ones((0, 2))),
        lambda: sd.trace(lambda v: v.reshape(5), np.zeros(3)),
        lambda: sd.trace(lambda v: v[7], np.zeros(3)),
        lambda: sd.trace(lambda v: np.concatenate([v, v.reshape(1, 3)]), np.zeros(3)),
        lambda: sd.trace(lambda v: np.add.reduce(v, initial=10.0), np.zeros(3)),
        lambda: sd.trace(lambda v: np.add.reduce(v, where=[True, False, True]), np.zeros(3)),
        lambda: sd.trace(lambda v: np.nanmax(v), np.zeros(3)),
        lambda: sd.trace(lambda v: np.std(v, dtype=int), np.zeros(3)),
        lambda: sd.trace(lambda v: v * np.array(["a"]), np.zeros(1)),
        lambda: sd.grad(lambda v: v > 0)(1.0),
        lambda: sd.grad(lambda v: None)(1.0),
    ],
)
def test_user_mistakes_are_symad_errors_and_leave_no_trace_open(call):
    with pytest.raises(sd.SymadError):
        call()
    assert active_builders() == []
    assert gc.isenabled()  # recording pauses the cyclic collector; errors must resume it


@pytest.mark.parametrize("name", ["sigmoid", "softplus", "cbrt"])
def test_sympy_fdiff_of_symad_functions_agrees_with_the_partial_rule(name):
    # symad's SymPy function classes carry fdiff for users who call sympy.diff
    # on a formula; it must say what the primitive's partial rule says.
    function = getattr(snp, name)
    formula = sd.trace(lambda x: function(x), 0.7).formula()
    (x,) = sd.trace(lambda x: function(x), 0.7).inputs
    by_sympy = sympy.diff(formula, x)
    by_symad = sd.grad(lambda x: function(x)).trace(0.7).formula()
    assert sympy.simplify(by_sympy - by_symad) == 0


def test_sympy_fdiff_of_stop_gradient_is_zero():
    from symad.primitives import stop_gradient

    F = sd.trace(lambda x: sd.stop_gradient(x) * x, 0.0)
    (x,) = F.inputs
    assert sympy.diff(F.formula(), x) == stop_gradient(x)  # d/dx [sg(x) x] = sg(x)


def test_traces_in_several_threads_do_not_mix():
    from concurrent.futures import ThreadPoolExecutor

    w = sd.Parameter(0.5, name="w")  # a contraction: finite differences stay accurate

    def work(seed):
        point = 0.5 + seed / 10

        def g(x):  # a new function each time: every call traces
            total = x
            for _ in range(30):
                total = np.sin(total) * w + x
            return total

        gradient = sd.grad(g)(point)
        delta = 1e-6
        expected = (g(point + delta) - g(point - delta)) / (2 * delta)
        return float(gradient), float(expected)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, range(16)))
    for gradient, expected in results:
        assert gradient == pytest.approx(expected, rel=1e-5)
    assert active_builders() == [] and gc.isenabled()


def test_abs_has_the_right_derivative_at_zero_like_jax():
    assert sd.grad(np.abs)(0.0) == 1.0 and sd.grad(np.abs)(-2.0) == -1.0
    assert sd.derivative(lambda x: np.abs(x) ** 2, 2)(0.0) == 2.0
    assert sd.derivative(lambda x: np.cos(np.abs(x)), 2)(0.0) == -1.0
    np.testing.assert_allclose(sd.hessian(lambda v: np.sum(np.abs(v) ** 2))(np.zeros(2)), 2 * np.eye(2))


def test_inner_follows_numpy_shapes():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(60.0).reshape(5, 4, 3)
    np.testing.assert_allclose(sd.trace(np.inner, a, b)(a, b), np.inner(a, b))


def test_logical_operators_combine_conditions():
    x = np.array([-1.0, 0.5, 2.0])
    inside = sd.trace(lambda v: snp.where((v > 0) & (v < 1), v, 0.0), x)
    np.testing.assert_array_equal(inside(x), [0.0, 0.5, 0.0])
    outside = sd.trace(lambda v: snp.where(~(v > 0) | (v > 1), 1.0, 0.0), x)
    np.testing.assert_array_equal(outside(x), [1.0, 0.0, 1.0])
    (v0,) = sd.trace(lambda v: snp.where((v > 0) & (v < 1), v, 0.0), 0.0).inputs
    formula = sd.trace(lambda v: snp.where((v > 0) & (v < 1), v, 0.0), 0.0).formula()
    assert formula == sympy.Piecewise((v0, (v0 > 0) & (v0 < 1)), (0.0, True))
    round_trip = sd.from_sympy(formula, [v0])
    np.testing.assert_array_equal(round_trip(x), [0.0, 0.5, 0.0])


def test_constant_folding_never_raises():
    # nan constants cannot be compared by SymPy: the comparison is left to NumPy.
    F = sd.trace(lambda v: snp.where(np.mean(v[:0]) > 0, v, 1.0), np.ones(2))
    np.testing.assert_array_equal(F(np.ones(2)), [1.0, 1.0])
    # an exact constant beyond float range evaluates to inf
    assert sd.trace(lambda v: v * 0 + 10**400, 1.0)(1.0) == np.inf


def test_vmap_binds_keyword_arguments():
    out = sd.vmap(lambda a, scale=1.0: a * scale)(np.arange(3.0), scale=np.full(3, 2.0))
    np.testing.assert_allclose(out, [0.0, 2.0, 4.0])
