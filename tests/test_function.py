"""Traced Functions: formula, cse, LaTeX, inputs, evaluation, batching and nesting."""

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp

x1, x2 = sympy.symbols("x1 x2")


def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


# -- formula side ---------------------------------------------------------------


def test_inputs_are_named_after_python_parameters_and_array_elements():
    F = sd.trace(lambda w, b: np.sum(w) + b, np.zeros((2, 2)), 0.0)
    w, b = F.inputs
    assert w == sympy.Array([[sympy.Symbol("w[0, 0]"), sympy.Symbol("w[0, 1]")],
                             [sympy.Symbol("w[1, 0]"), sympy.Symbol("w[1, 1]")]])
    assert b == sympy.Symbol("b")


def test_pytree_inputs_are_named_by_path():
    F = sd.trace(lambda params: params["w"] * params["b"][0], {"w": 0.0, "b": [0.0]})
    assert F.inputs == ({"b": [sympy.Symbol("params.b[0]")], "w": sympy.Symbol("params.w")},)


def test_formula_of_array_output_is_a_sympy_array_of_the_same_shape():
    F = sd.trace(lambda v: v * 2, np.zeros(3))
    v = F.inputs[0]
    assert F.formula(expand=True) == sympy.Array([2 * v[0], 2 * v[1], 2 * v[2]])


def test_formula_keeps_output_structure():
    F = sd.trace(lambda a, b: {"sum": a + b, "pair": (a * b, b)}, 0.0, 0.0)
    a, b = F.inputs
    assert F.formula() == {"pair": (a * b, b), "sum": a + b}


def test_cse_program_reproduces_the_formula():
    def g(t):
        s = np.sin(t)
        return s * s + np.exp(s)

    F = sd.trace(g, 0.0)
    assignments, [output] = F.cse()
    (t,) = F.inputs
    assert len(assignments) == 1  # sin(t) is the only shared subexpression
    assert assignments[0][1] == sympy.sin(t)
    rebuilt = output
    for symbol, expression in reversed(assignments):
        rebuilt = rebuilt.subs(symbol, expression)
    assert rebuilt == F.formula() == sympy.sin(t) ** 2 + sympy.exp(sympy.sin(t))
    # The names are plain SymPy symbols (made without filling SymPy's cache): equal to
    # sympy.Symbol("x0"), and usable in subs and lambdify like any other.
    assert [symbol for symbol, _ in assignments] == [sympy.Symbol("x0")]
    assert sympy.lambdify([t], output.subs(assignments[0][0], assignments[0][1]))(0.5) == \
        pytest.approx(np.sin(0.5) ** 2 + np.exp(np.sin(0.5)))


def test_cse_names_avoid_input_names():
    F = sd.trace(lambda x0, x1: np.sin(x0 * x1) ** 2 + np.sin(x0 * x1), 0.0, 0.0)
    assignments, _ = F.cse()
    assert assignments and all(not s.name.startswith("x") for s, _ in assignments)


def test_latex_is_one_aligned_block_with_named_intermediates():
    G = sd.grad(lambda x: np.sum(np.tanh(x) ** 2)).trace(np.zeros(2))
    text = G.latex()
    assert text.startswith("\\begin{aligned}") and text.endswith("\\end{aligned}")
    assert "x_{0} &= \\tanh{\\left(x_{0} \\right)}" not in text  # intermediates never shadow inputs
    assert "\\tanh" in text and "&=" in text
    assert G._repr_latex_().startswith("$\\displaystyle")


def test_latex_of_gradient_labels_partial_derivatives():
    text = sd.grad(f, (0, 1)).trace(2.0, 5.0).latex()
    assert "\\frac{\\partial f}{\\partial x_{1}} &= x_{2} + \\frac{1}{x_{1}}" in text
    assert "\\frac{\\partial f}{\\partial x_{2}} &= x_{1} - \\cos{\\left(x_{2} \\right)}" in text


def test_latex_output_names_and_sympy_settings():
    text = sd.latex(lambda a, b: a * b, 1.0, 2.0, output_names=["p"], mul_symbol="dot")
    assert "p &= a \\cdot b" in text  # one-letter names in math italic, as SymPy prints them
    with pytest.raises(ValueError, match="output_names"):
        sd.latex(lambda a: a, 1.0, output_names=["p", "q"])


def test_hostile_names_are_escaped_in_latex_and_never_executed():
    import builtins

    hostile = "__import__('builtins').setattr(__import__('builtins'), 'SYMAD_PWNED', 1)"
    F = sd.trace(lambda x: x * 2, 1.0, name=hostile)
    assert "\\_\\_import\\_\\_" in F.latex()
    q = sd.Parameter(1.0, name=hostile)
    assert float(sd.grad(lambda x: x * q)(1.0)) == 1.0
    sd.trace(lambda x: x * q, 1.0).latex()
    assert not hasattr(builtins, "SYMAD_PWNED")
    p = sd.Parameter(2.0, name="a}\\b")
    G = sd.trace(lambda x: x * p, 1.0)
    assert "a\\}\\backslash{}b" in G.latex()
    assert float(G(3.0)) == 6.0


def test_stats_counts_operations():
    stats = sd.trace(f, 2.0, 5.0).stats()
    assert stats["nodes"] == 5
    assert stats["operations"] == {"add": 1, "log": 1, "multiply": 1, "sin": 1, "subtract": 1}
    assert stats["inputs"] == 2 and stats["outputs"] == 1


# -- evaluation --------------------------------------------------------------------


def test_scalar_results_are_numpy_scalars_and_arrays_float64():
    F = sd.trace(f, 2.0, 5.0)
    value = F(2.0, 5.0)
    assert isinstance(value, np.float64)
    assert F(np.array([2.0, 3.0]), 5.0).dtype == np.float64


def test_float32_inputs_give_float32_results():
    F = sd.trace(f, 2.0, 5.0)
    result = F(np.float32(2.0), np.array([5.0], dtype=np.float32))
    assert result.dtype == np.float32
    np.testing.assert_allclose(result, [np.log(2) + 10 - np.sin(5)], rtol=1e-6)
    gradient = sd.grad(f, (0, 1))(np.float32(2.0), np.float32(5.0))
    assert [g.dtype for g in gradient] == [np.float32, np.float32]
    np.testing.assert_allclose(gradient, [5.5, 2 - np.cos(5)], rtol=1e-6)
    assert F(np.float32(2.0), 5.0).dtype == np.float64  # mixed: float64


def test_batches_broadcast_like_a_gufunc_without_retracing():
    F = sd.trace(lambda v, s: v * s, np.zeros(2), 0.0)
    vs = np.arange(12.0).reshape(3, 2, 2)  # batch (3, 2), core (2,)
    ss = np.array([1.0, 10.0, 100.0])[:, None]  # batch (3, 1)
    out = F(vs, ss)
    assert out.shape == (3, 2, 2)
    np.testing.assert_allclose(out, vs * ss[..., None])


def test_constant_outputs_broadcast_to_the_batch():
    G = sd.grad(lambda a, b: a * 3.0 + b * 0.0, argnums=(0, 1))
    d_a, d_b = G.trace(0.0, 0.0)(np.ones(4), np.ones(4))
    np.testing.assert_array_equal(d_a, np.full(4, 3.0))
    np.testing.assert_array_equal(d_b, np.zeros(4))


def test_wrong_core_shape_is_reported():
    F = sd.trace(lambda v: np.sum(v), np.zeros(3))
    with pytest.raises(sd.TracingError, match="traced with shape"):
        F(np.zeros(4))
    with pytest.raises(sd.TracingError, match="structured"):
        F(np.zeros(3), 1.0)


def test_compile_numpy_backend_and_unknown_backend():
    F = sd.trace(f, 2.0, 5.0)
    assert float(F.compile("numpy")(2.0, 5.0)) == pytest.approx(np.log(2) + 10 - np.sin(5))
    with pytest.raises(sd.CompileError, match="unknown backend"):
        F.compile("fortran")
    assert "numpy" in sd.available_backends()


def test_parameter_changes_value_without_retracing_and_shape_change_retraces():
    w = sd.Parameter(np.array([1.0, 2.0]), name="w")
    g = sd.grad(lambda x: np.sum(w * x) ** 2)
    np.testing.assert_allclose(g(1.0), 2 * 3.0 * 3.0)
    traced = g.trace(1.0)
    w.value = np.array([2.0, 2.0])
    assert g.trace(1.0) is traced
    np.testing.assert_allclose(g(1.0), 2 * 4.0 * 4.0)
    w.value = np.array([1.0, 1.0, 1.0])
    np.testing.assert_allclose(g(1.0), 2 * 3.0 * 3.0)


def test_parameter_named_like_an_argument_gets_a_distinct_symbol():
    p = sd.Parameter(3.0, name="x")
    F = sd.trace(lambda x: x * p, 2.0)
    assert float(F(2.0)) == 6.0
    assert sd.grad(lambda x: x * p)(2.0) == 3.0
    (weight_grad,) = sd.grad(lambda x: x * p, None, weights=[p])(2.0)
    assert weight_grad == 2.0


def test_unused_weight_gets_zero_gradient():
    used, unused = sd.Parameter(2.0, name="a"), sd.Parameter(np.ones(2), name="b")
    grads = sd.grad(lambda x: x * used, None, weights=[used, unused])(3.0)
    assert grads[0] == 3.0
    np.testing.assert_array_equal(grads[1], np.zeros(2))


def test_parameter_outside_trace_behaves_like_its_value():
    w = sd.Parameter(np.array([1.0, -2.0]), name="w")
    np.testing.assert_array_equal(np.abs(w), [1.0, 2.0])
    np.testing.assert_array_equal(-w, [-1.0, 2.0])
    assert float(np.sum(w)) == -1.0


# -- transforms beyond the worked examples -------------------------------------------


def test_jvp_and_vjp_with_has_aux():
    def g(t):
        return t**2, t + 1

    out, tangent, aux = sd.jvp(g, (3.0,), (1.0,), has_aux=True)
    assert (out, tangent, aux) == (9.0, 6.0, (4.0,))
    out, vjp_fn, aux = sd.vjp(g, 3.0, has_aux=True)
    assert out == 9.0 and aux == (4.0,) and vjp_fn(2.0) == (12.0,)


def test_jvp_checks_tangent_shapes():
    with pytest.raises(sd.TracingError, match="tangent 0"):
        sd.jvp(lambda v: v, (np.zeros(2),), (np.zeros(3),))


def test_nested_closure_over_outer_tracer_has_no_perturbation_confusion():
    # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x  (the classic test, Siskind & Pearlmutter)
    def outer(x):
        return x * sd.grad(lambda y: x * y)(1.0)

    assert sd.grad(outer)(3.0) == 6.0


def test_transforms_nest_both_ways():
    def g(v):
        return np.sum(np.sin(v) * v[::-1])

    point = np.array([0.3, -0.7, 1.1])
    hessian = sd.hessian(g)(point)
    np.testing.assert_allclose(sd.jacfwd(sd.jacrev(g))(point), hessian)
    np.testing.assert_allclose(sd.jacrev(sd.jacrev(g))(point), hessian)
    np.testing.assert_allclose(sd.jacrev(sd.grad(g))(point), hessian)
    np.testing.assert_allclose(hessian, hessian.T)


def test_derivative_broadcasts_and_matches_sympy():
    g = lambda t: np.exp(np.sin(t)) / (1 + t**2)  # noqa: E731
    t = sympy.Symbol("t")
    exact = sympy.lambdify(t, sympy.diff(sympy.exp(sympy.sin(t)) / (1 + t**2), t, 4))
    grid = np.linspace(-1.0, 2.0, 7)
    np.testing.assert_allclose(sd.derivative(g, 4)(grid), exact(grid), rtol=1e-12)
    # Taylor mode: the graph grows by O(n) nodes per order, never by a factor.
    nodes = [sd.derivative(g, n).trace(0.7).stats()["nodes"] for n in range(1, 9)]
    growth = [later - earlier for earlier, later in zip(nodes, nodes[1:])]
    assert all(0 < step <= 12 * (n + 2) for n, step in enumerate(growth, start=1)), nodes
    with pytest.raises(ValueError, match="non-negative"):
        sd.derivative(g, -1)


def test_derivative_rejects_array_valued_traced_functions():
    F = sd.trace(lambda v: np.sum(v), np.zeros(2))
    with pytest.raises(sd.DifferentiationError, match="scalar"):
        sd.derivative(F, 1)(np.zeros(2))


def test_vmap_evaluates_batches_and_unrolls_inside_traces():
    rows = np.arange(6.0).reshape(3, 2)
    norms = sd.vmap(lambda r: snp.norm(r))(rows)
    np.testing.assert_allclose(norms, np.linalg.norm(rows, axis=1))
    cols = sd.vmap(lambda c, s: c * s, in_axes=(1, None))(rows, 2.0)
    np.testing.assert_allclose(cols, rows.T * 2.0)
    grad_of_mapped = sd.grad(lambda m: np.sum(sd.vmap(lambda r: r[0] * r[1])(m)))(rows)
    np.testing.assert_allclose(grad_of_mapped, rows[:, ::-1])


def test_from_sympy_arrays_piecewise_and_missing_symbols():
    x, y = sympy.symbols("x y")
    F = sd.from_sympy(sympy.Array([x * y, sympy.Piecewise((x, x > 0), (-x, True))]), [x, y])
    np.testing.assert_allclose(F(-2.0, 3.0), [-6.0, 2.0])
    J = sd.jacobian(F, argnums=(0, 1))(-2.0, 3.0)
    np.testing.assert_allclose(J[0], [3.0, -1.0])
    np.testing.assert_allclose(J[1], [-2.0, 0.0])
    with pytest.raises(sd.TracingError, match="not among the inputs"):
        sd.from_sympy(x + y, [x])


def test_from_sympy_round_trips_a_traced_formula():
    F = sd.trace(lambda a, b: snp.sigmoid(a) * np.log1p(b) + np.arctan2(a, b), 0.5, 0.5)
    a, b = F.inputs
    G = sd.from_sympy(F.formula(), [a, b])
    np.testing.assert_allclose(G(0.3, 0.9), F(0.3, 0.9), rtol=1e-14)


def test_from_sympy_shares_the_products_sympy_flattened():
    # SymPy flattens 4*e*(1 - e) into a new product every step; imported oldest factor
    # first, the products share prefixes and the 14-step map is as small as traced.
    l = sympy.Symbol("l")
    expr = l
    for _ in range(14):
        expr = 4 * expr * (1 - expr)
    F = sd.from_sympy(expr, [l])
    assert F.stats()["nodes"] == 43  # 3 a step + 1 (134 when each product was folded on its own)
    assert float(F(0.3)) == pytest.approx(float(expr.subs(l, 0.3)), rel=1e-12)
    exact, x = 1.0, 0.3
    for _ in range(14):
        exact, x = exact * (4 - 8 * x), 4 * x * (1 - x)
    assert float(sd.grad(F)(0.3)) == pytest.approx(exact, rel=1e-9)
    assert F.latex().splitlines()[2] == r"t_{2} &= t_{1} \left(1 - 4 t_{1}\right) \\"
    G = sd.grad(F).trace(0.3)
    assert len(G.latex()) <= 3 * len(F.latex())  # the figure, for this program
    small = l
    for _ in range(4):
        small = 4 * small * (1 - small)
    assert sympy.expand(sd.from_sympy(small, [l]).formula() - small) == 0
    assert sympy.expand(sd.grad(sd.from_sympy(small, [l])).trace(0.3).formula() - small.diff(l)) == 0


def test_escaped_tracer_is_a_clear_error():
    leaked = []
    sd.trace(lambda t: leaked.append(t) or t, 1.0)
    with pytest.raises(sd.TracingError, match="escaped"):
        np.sin(leaked[0])


def test_jvp_refuses_primals_that_are_not_a_tuple_or_list():
    # An array as primals once reached the user's function as its rows: a TypeError of theirs.
    for primals, tangents, label in [(np.ones(3), (np.ones(3),), "primals"),
                                     ((np.ones(3),), np.ones(3), "tangents"),
                                     (2.0, (1.0,), "primals")]:
        with pytest.raises(sd.TracingError, match=rf"sd.jvp\(<lambda>\): {label} must be a tuple or list"):
            sd.jvp(lambda x: np.sum(x ** 2), primals, tangents)
    out, tangent = sd.jvp(lambda x: np.sum(x ** 2), [np.ones(3)], [np.ones(3)])
    assert (out, tangent) == (3.0, 6.0)


def test_vmap_out_axes_none_returns_one_unmapped_value():
    # As JAX: out_axes=None means the output is not mapped (it was [2., 2., 2.]).
    result = sd.vmap(lambda a: 2.0, out_axes=None)(np.arange(3.0))
    assert np.shape(result) == () and result == 2.0
    mapped, fixed = sd.vmap(lambda a, b: (a * 2, b + 1.0), in_axes=(0, None),
                            out_axes=(0, None))(np.arange(3.0), 5.0)
    assert mapped.tolist() == [0.0, 2.0, 4.0] and np.shape(fixed) == () and fixed == 6.0
    # Inside a trace, too.
    assert sd.grad(lambda x: sd.vmap(lambda a, b: b ** 2, in_axes=(0, None), out_axes=None)(
        np.ones(3), x))(3.0) == 6.0
    # An output that reads a mapped argument cannot be unmapped, even where the values
    # happen to be equal (JAX refuses it by structure too), inside a trace or outside.
    for values in (np.arange(3.0), np.ones(3)):
        with pytest.raises(sd.TracingError,
                           match=r"out_axes=None for output 0, but that output depends on the mapped"):
            sd.vmap(lambda a: a * 2, out_axes=None)(values)
        with pytest.raises(sd.TracingError, match="depends on the mapped arguments"):
            sd.grad(lambda x, v=values: np.sum(sd.vmap(lambda a: a * x, out_axes=None)(v)))(3.0)
    # ... and one that reads only unmapped values and closures can, wherever it is.
    assert sd.grad(lambda x: sd.vmap(lambda a: np.sin(x) + 1.0, out_axes=None)(np.arange(3.0)))(0.0) == 1.0
