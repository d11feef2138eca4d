"""Recording at scale: the inlining budget of formula(), deep graphs through cse() and latex(),
and the size limit on symbolic array arguments."""

import math

import numpy as np
import pytest
import sympy

import symad as sd
import symad.function
import symad.inlining
from symad.cli import main as cli_main
from symad.inlining import inlined_sizes
from tests.elements import element_trace


def doubling_chain(steps):
    """``x <- sin(x) + 0.001 x``: each step uses x twice, so the inlined tree doubles."""

    def chain(x):
        for _ in range(steps):
            x = np.sin(x) + 0.001 * x
        return x

    return chain


def sin_chain(steps):
    def nested(x):
        for _ in range(steps):
            x = np.sin(x)
        return x

    return nested


def chain_operations(steps):
    # ops(x_{k+1}) = 1 (add) + 1 (sin) + ops(x_k) + 1 (mul) + ops(x_k); ops(x_0) = 0.
    return 3 * (2**steps - 1)


def test_the_estimate_counts_the_inlined_tree_exactly():
    for steps in (1, 2, 3, 6):
        F = sd.trace(doubling_chain(steps), 0.3)
        size, depth = inlined_sizes(F.graph)
        assert size == chain_operations(steps)
        assert depth == 2 * steps
        if steps <= 3:  # the estimate is what SymPy builds (no terms merge here)
            assert sympy.count_ops(F.formula(), visual=False) == size
    # Several outputs add up (1 + 3: the shared sin is counted in both factors);
    # inputs and constants count nothing.
    assert inlined_sizes(sd.trace(lambda a: (a * 2.0, np.sin(a) * np.sin(a)), 1.0).graph) == (4, 2)
    assert inlined_sizes(sd.trace(lambda a: a, 1.0).graph) == (0, 0)


def test_formula_past_the_size_budget_raises_a_clear_error():
    F = sd.grad(doubling_chain(40)).trace(0.3)
    with pytest.raises(sd.ExportError) as info:
        F.formula()
    assert isinstance(info.value, sd.SymadError) and isinstance(info.value, ValueError)
    message = str(info.value)
    assert message.startswith("formula(grad(chain)): the inlined formula would have ")
    assert f"more than max_size={symad.inlining.MAX_FORMULA_SIZE:,}" in message
    assert "F.cse()" in message and "F.latex()" in message and "max_size=" in message

    G = sd.trace(doubling_chain(40), 0.3)
    with pytest.raises(sd.ExportError, match=f"would have {chain_operations(40):,} operations"):
        G.formula()


def test_max_size_is_the_exact_boundary_and_small_formulas_stay_exact():
    x = sympy.Symbol("x")
    F = sd.trace(doubling_chain(2), 0.3)  # 9 operations
    with pytest.raises(sd.ExportError, match="would have 9 operations .* more than max_size=8"):
        F.formula(max_size=8)
    step = lambda v: sympy.sin(v) + sympy.Float(0.001) * v  # noqa: E731
    assert F.formula(max_size=9) == step(step(x))
    gradient = sd.grad(doubling_chain(2)).trace(0.3).formula()
    assert sympy.expand(gradient - sympy.diff(step(step(x)), x)) == 0
    # The default budget leaves ordinary formulas alone.
    assert sd.grad(lambda a, b: a * b + sympy.Integer(1) * np.sin(a), argnums=(0, 1)).trace(
        1.0, 2.0).formula() == (sympy.Symbol("b") + sympy.cos(sympy.Symbol("a")), sympy.Symbol("a"))


def test_the_default_budget_is_the_module_constant(monkeypatch):
    F = sd.trace(doubling_chain(3), 0.3)  # 21 operations
    monkeypatch.setattr(symad.inlining, "MAX_FORMULA_SIZE", 20)
    with pytest.raises(sd.ExportError, match="more than max_size=20"):
        F.formula()
    assert F.formula(max_size=math.inf) is not None


def test_formula_past_the_depth_budget_raises_instead_of_recursing():
    F = sd.trace(sin_chain(150), 0.3)
    with pytest.raises(sd.ExportError) as info:
        F.formula()
    message = str(info.value)
    assert "nested 150 operations deep, more than max_depth=100" in message
    assert "F.cse()" in message
    x = sympy.Symbol("x")
    expected = x
    for _ in range(60):
        expected = sympy.sin(expected)
    assert sd.trace(sin_chain(60), 0.3).formula() == expected


def test_a_deep_gradient_answers_at_once():
    # The case at a depth the suite can afford (it measures 10,000 in
    # benchmarks/scale.py): the error comes from counting, not from SymPy.
    G = sd.grad(doubling_chain(2000)).trace(0.3)
    with pytest.raises(sd.ExportError, match=r"would have over 1\.8e\+19 operations"):
        G.formula()


def _run_program(assignments, outputs, values):
    """Evaluate a cse() program numerically, one assignment at a time."""
    env = dict(values)
    for symbol, expression in assignments:
        env[symbol] = float(expression.xreplace(env))
    return [float(output.xreplace(env)) for output in outputs]


def test_cse_of_a_deep_chain_splits_lines_instead_of_recursing():
    F = sd.trace(sin_chain(1000), 0.3)
    assignments, outputs = F.cse()
    # Values used once are inlined up to depth 99, then become an assignment.
    assert 9 <= len(assignments) <= 11
    x = F.graph.inputs[0]
    assert _run_program(assignments, outputs, {x: 0.3}) == pytest.approx([float(F(0.3))], rel=1e-12)
    # Small programs are unchanged by the depth rule.
    assert sd.trace(lambda t: np.sin(t) ** 2 + np.sin(t), 0.0).cse()[0] == [
        (sympy.Symbol("x0"), sympy.sin(sympy.Symbol("t")))]


def test_latex_splits_deep_lines_and_refuses_unbounded_inlining():
    F = sd.trace(sin_chain(300), 0.3)
    text = F.latex(max_inline=2500)
    assert text.count("&=") == 4  # three temporaries of depth 99, then the output
    with pytest.raises(sd.ExportError, match="max_inline=1000000 .* at most"):
        F.latex(max_inline=10**6)


def test_the_command_line_reports_the_budget_with_its_own_advice(capsys):
    assert cli_main(["diff", "exp(sin(x))*sin(exp(x))", "--wrt", "x", "--order", "12"]) == 1
    error = capsys.readouterr().err
    assert "the inlined formula would have" in error and "--python or --latex" in error
    assert "F.cse()" not in error
    assert cli_main(["diff", "exp(sin(x))*sin(exp(x))", "--wrt", "x", "--order", "12",
                     "--python"]) == 0


def test_the_array_size_limit_is_one_named_constant(monkeypatch):
    # Whole-array operations record one node whatever the size: no limit applies.
    monkeypatch.setattr(symad.function, "MAX_SYMBOLIC_ELEMENTS", 12)

    def energy(grid):
        return np.sum(grid**2)

    assert np.allclose(sd.grad(energy)(np.ones(13)), 2.0)
    assert sd.grad(energy).trace(np.ones(13)).stats()["nodes"] == 1
    # Reading the elements one at a time -- the per-element view, a Python loop over
    # them -- is what the limit bounds, with one named constant and a clear way past it.
    F = sd.trace(energy, np.zeros((3, 4)))  # exactly at the limit
    assert F.expand().formula() == sum(symbol**2 for symbol in np.ravel(F.inputs[0]))
    with pytest.raises(sd.TracingError) as info:
        sd.trace(energy, np.ones(13)).expand()
    message = str(info.value)
    assert "energy" in message and "13 elements" in message and "limit of 12" in message
    assert "whole-array operations" in message
    assert "symad.function.MAX_SYMBOLIC_ELEMENTS = 13" in message
    def loop_energy(grid):
        return sum(value**2 for value in grid.tolist())

    with pytest.raises(sd.TracingError, match="loop_energy"):
        sd.grad(loop_energy)(np.ones(13))
    monkeypatch.setattr(symad.function, "MAX_SYMBOLIC_ELEMENTS", 13)
    assert np.allclose(sd.grad(loop_energy)(np.ones(13)), 2.0)


def test_the_size_limit_applies_to_parameters_too(monkeypatch):
    monkeypatch.setattr(symad.function, "MAX_SYMBOLIC_ELEMENTS", 12)
    large = sd.Parameter(np.ones(13), name="grid")
    # A whole Parameter is one input: no limit.
    assert float(sd.grad(lambda x: x * np.sum(large**2))(1.0)) == 13.0
    (weight_gradient,) = sd.grad(lambda x: x * np.sum(large**2), argnums=None, weights=[large])(1.0)
    assert np.allclose(weight_gradient, 2.0)
    # Its per-element view is bounded like an argument's.
    with pytest.raises(sd.TracingError) as info:
        sd.trace(lambda x: x * np.sum(large**2), 1.0).expand()
    message = str(info.value)
    assert "13 elements" in message and "symad.function.MAX_SYMBOLIC_ELEMENTS = 13" in message
    monkeypatch.setattr(symad.function, "MAX_SYMBOLIC_ELEMENTS", 13)
    assert sd.trace(lambda x: x * np.sum(large**2), 1.0).expand().stats()["inputs"] == 14


# -- deep and wide graphs through every path, at Python's default recursion limit ----

#: Past Python's default recursion limit (1,000 frames, set by the fixture below): a
#: pass that recursed once per level would fail. benchmarks/scale.py runs 10^5.
DEPTH = 1_500


@pytest.fixture
def default_recursion_limit():
    import sys

    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(previous)


def _chain_value_and_derivative(x0, steps):
    value, derivative = x0, 1.0
    for _ in range(steps):
        derivative *= math.cos(value) + 0.001
        value = math.sin(value) + 0.001 * value
    return value, derivative


def test_a_deep_chain_goes_through_every_path(default_recursion_limit, tmp_path):
    import copy
    import pickle
    import subprocess

    chain = doubling_chain(DEPTH)
    value, derivative = _chain_value_and_derivative(0.3, DEPTH)
    F = sd.trace(chain, 0.3)
    G = sd.grad(chain).trace(0.3)
    for backend in sd.available_backends():
        assert float(F.compile(backend)(0.3)) == pytest.approx(value, rel=1e-12)
        assert float(G.compile(backend)(0.3)) == pytest.approx(derivative, rel=1e-10)
    assert float(sd.jvp(chain, (0.3,), (1.0,))[1]) == pytest.approx(derivative, rel=1e-10)
    _, pullback = sd.vjp(chain, 0.3)
    assert float(pullback(1.0)[0]) == pytest.approx(derivative, rel=1e-10)
    assert float(sd.value_and_grad(chain)(0.3)[1]) == pytest.approx(derivative, rel=1e-10)
    # Second order, nested and in Taylor mode, agree with each other.
    second = float(sd.derivative(chain, 2)(0.3))
    assert float(sd.hessian(chain)(0.3)) == pytest.approx(second, rel=1e-9)
    assert float(sd.grad(sd.grad(chain))(0.3)) == pytest.approx(second, rel=1e-9)
    # Exports: every one answers without recursing (cse splits deep lines; formula refuses).
    assignments, outputs = G.cse()
    assert len(assignments) > DEPTH
    assert G.latex().count("&=") > DEPTH
    with pytest.raises(sd.ExportError):
        G.formula()
    source = G.source("numpy")
    namespace = {}
    exec(compile(source, "<deep>", "exec"), namespace)
    assert float(namespace["run"](np.array([0.3]))[0][0]) == pytest.approx(derivative, rel=1e-10)
    c_source = G.to_c("deep_gradient").source
    assert c_source.count("\n") > DEPTH
    (tmp_path / "deep.c").write_text(c_source)
    compiled = subprocess.run(["cc", "-std=c99", "-c", "-o", str(tmp_path / "deep.o"),
                               str(tmp_path / "deep.c")], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    assert G.sparsity().toarray().tolist() == [[1]]
    assert float(pickle.loads(pickle.dumps(G))(0.3)) == pytest.approx(derivative, rel=1e-10)
    # A node holds its operands (it is its value's atom): copies walk the graph in order.
    assert len(copy.deepcopy(G.graph).nodes) == len(G.graph.nodes)


def test_a_wide_sum_goes_through_every_path(default_recursion_limit):
    # One add node of n operands: spelled as one `a + b + ...` it nested n levels deep,
    # and Python's compiler refused the generated module past about 3,000 terms.
    n = 5_000
    symad.function.MAX_SYMBOLIC_ELEMENTS, previous = n, symad.function.MAX_SYMBOLIC_ELEMENTS
    try:
        def energy(x):
            return np.sum(np.sin(x) * np.exp(-x**2))

        x = np.linspace(-2, 2, n)
        G = sd.grad(element_trace(energy, np.zeros(n))).trace(np.zeros(n))
        expected = (np.cos(x) - 2 * x * np.sin(x)) * np.exp(-x**2)
        np.testing.assert_allclose(G(x), expected, rtol=1e-12, atol=1e-15)
        F = element_trace(energy, np.zeros(n))
        value = float(np.sum(np.sin(x) * np.exp(-x**2)))
        for backend in sd.available_backends():
            assert float(F.compile(backend)(x)) == pytest.approx(value, rel=1e-12)
        namespace = {}
        exec(compile(F.source("numpy"), "<wide>", "exec"), namespace)
        assert float(namespace["run"](*x)[0]) == pytest.approx(value, rel=1e-12)
        assert float(sd.jvp(F, (x,), (np.ones(n),))[1]) == pytest.approx(expected.sum(), rel=1e-10)
        # Exports of a wide sum (of squares: SymPy's assumptions make its products of
        # function applications cost milliseconds each, which is not what this tests).
        S = element_trace(lambda v: np.sum(v**2), np.zeros(n))
        assignments, (total,) = S.cse()
        assert len(total.args) == n
        assert S.latex().count("^{2}") == n
        assert S.to_c("wide").source.count("in[") >= n
    finally:
        symad.function.MAX_SYMBOLIC_ELEMENTS = previous
