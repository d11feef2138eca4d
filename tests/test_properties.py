"""Property-based checks: random compositions of primitives against exact derivatives.

Each example is a random expression tree over elementwise primitives that are
smooth and finite on the whole real line (so any point is in the domain). The
same tree is built twice: as a symad function, and as a SymPy expression that
``sympy.diff`` differentiates exactly and mpmath evaluates to 30 digits.

The runs are derandomized (the same examples every run, so CI is
deterministic) and short by default; set ``SYMAD_PROPERTY_EXAMPLES`` (e.g.
1000) to run more.
"""

import os

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("SYMAD_PROPERTY_EXAMPLES", "40"))
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)

X, Y = sympy.symbols("x y", real=True)

# name: (symad version, SymPy version); each is finite and smooth on all reals.
UNARY = {
    "sin": (snp.sin, sympy.sin),
    "cos": (snp.cos, sympy.cos),
    "tanh": (snp.tanh, sympy.tanh),
    "arctan": (snp.arctan, sympy.atan),
    "arcsinh": (snp.arcsinh, sympy.asinh),
    "erf": (snp.erf, sympy.erf),
    "sigmoid": (snp.sigmoid, lambda a: 1 / (1 + sympy.exp(-a))),
    "softplus": (snp.softplus, lambda a: sympy.log(1 + sympy.exp(a))),
    "exp_tanh": (lambda a: snp.exp(snp.tanh(a)), lambda a: sympy.exp(sympy.tanh(a))),
    "square": (lambda a: a ** 2, lambda a: a ** 2),
    "sqrt_1p_square": (lambda a: snp.sqrt(1 + a * a), lambda a: sympy.sqrt(1 + a * a)),
    "log_1p_square": (lambda a: snp.log1p(a * a), lambda a: sympy.log(1 + a * a)),
    "negative": (lambda a: -a, lambda a: -a),
}
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "subtract": (lambda a, b: a - b, lambda a, b: a - b),
    "multiply": (lambda a, b: a * b, lambda a, b: a * b),
    "divide_safe": (lambda a, b: a / (1 + b * b), lambda a, b: a / (1 + b * b)),
    "logaddexp": (snp.logaddexp, lambda a, b: sympy.log(sympy.exp(a) + sympy.exp(b))),
    "arctan2_safe": (lambda a, b: snp.arctan2(a, 2 + snp.tanh(b)),
                     lambda a, b: sympy.atan2(a, 2 + sympy.tanh(b))),
    "where_greater": (lambda a, b: snp.where(a > b, a * b, snp.sin(b)),
                      lambda a, b: sympy.Piecewise((a * b, a > b), (sympy.sin(b), True))),
}

leaves = st.sampled_from(["x", "y"]) | st.sampled_from([0.5, -1.25, 2.0]).map(lambda c: ("const", c))
trees = st.recursive(
    leaves,
    lambda children: st.tuples(st.sampled_from(sorted(UNARY)), children)
    | st.tuples(st.sampled_from(sorted(BINARY)), children, children),
    max_leaves=6,
)
coordinates = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False).map(lambda v: round(v, 3))


def build(tree, x, y, table_index):
    """The tree's value over ``x``, ``y``: table_index 0 builds symad's, 1 SymPy's."""
    if tree == "x":
        return x
    if tree == "y":
        return y
    if tree[0] == "const":
        return tree[1] if table_index == 0 else sympy.Float(tree[1])
    operation, *children = tree
    table = UNARY if len(children) == 1 else BINARY
    return table[operation][table_index](*(build(c, x, y, table_index) for c in children))


def symad_function(tree):
    def f(x, y):
        return build(tree, x, y, 0) + 0 * x   # `+ 0*x`: a constant tree is still a function
    return f


def exact(expr, x, y) -> float:
    """``expr`` at (x, y), evaluated by mpmath with 30 digits."""
    return float(sympy.sympify(expr).evalf(30, subs={X: sympy.Float(x, 30), Y: sympy.Float(y, 30)}))


def assert_close(actual, expected, what):
    assert np.isfinite(actual), what
    assert abs(actual - expected) <= 1e-9 * max(1.0, abs(expected)), f"{what}: {actual} != {expected}"


@PROPERTY_SETTINGS
@given(tree=trees, x=coordinates, y=coordinates)
def test_value_and_gradient_match_exact_derivatives(tree, x, y):
    expr = build(tree, X, Y, 1)
    f = symad_function(tree)
    value, (dx, dy) = sd.value_and_grad(f, argnums=(0, 1))(x, y)
    assert_close(float(value), exact(expr, x, y), f"value of {tree}")
    assert_close(float(dx), exact(sympy.diff(expr, X), x, y), f"d/dx of {tree}")
    assert_close(float(dy), exact(sympy.diff(expr, Y), x, y), f"d/dy of {tree}")


@PROPERTY_SETTINGS
@given(tree=trees, x=coordinates, y=coordinates)
def test_forward_and_reverse_modes_agree(tree, x, y):
    f = symad_function(tree)
    vector_f = lambda v: f(v[0], v[1])  # noqa: E731
    point = np.array([x, y])
    reverse = sd.jacrev(vector_f)(point)
    forward = sd.jacfwd(vector_f)(point)
    _, along_x = sd.jvp(f, (x, y), (1.0, 0.0))
    assert np.allclose(forward, reverse, rtol=1e-12, atol=1e-12), tree
    assert np.isclose(float(along_x), reverse[0], rtol=1e-12, atol=1e-12), tree


@settings(PROPERTY_SETTINGS, max_examples=max(EXAMPLES // 2, 10))
@given(tree=trees, x=coordinates, y=coordinates)
def test_hessian_and_nested_gradients_match_exact_second_derivatives(tree, x, y):
    expr = build(tree, X, Y, 1)
    f = symad_function(tree)
    vector_f = lambda v: f(v[0], v[1])  # noqa: E731
    hessian = sd.hessian(vector_f)(np.array([x, y]))
    for i, first in enumerate((X, Y)):
        for j, second in enumerate((X, Y)):
            expected = exact(sympy.diff(expr, first, second), x, y)
            assert_close(float(hessian[i, j]), expected, f"d2/d{first}d{second} of {tree}")
    nested = sd.grad(sd.grad(f, 0), 1)(x, y)
    assert_close(float(nested), exact(sympy.diff(expr, X, Y), x, y), f"nested grad of {tree}")


@PROPERTY_SETTINGS
@given(tree=trees, y=coordinates)
def test_the_untaken_branch_never_leaks_into_any_derivative(tree, y):
    # The taken branch at x = 0 is `tree`; the other has infinite partials there.
    f = symad_function(tree)

    def guarded(x, y):
        body = f(x, y)
        return snp.where(x > 0, snp.log(x) * body + snp.sqrt(x), body)

    expected = sd.grad(f, argnums=(0, 1))(0.0, y)
    actual = sd.grad(guarded, argnums=(0, 1))(0.0, y)
    assert np.allclose(actual, expected, rtol=1e-12, atol=1e-12), tree
    _, tangent = sd.jvp(guarded, (0.0, y), (1.0, 1.0))
    assert np.isclose(float(tangent), float(expected[0] + expected[1]), rtol=1e-12, atol=1e-12), tree
    vector = lambda v: guarded(v[0], v[1])  # noqa: E731
    assert np.all(np.isfinite(sd.hessian(vector)(np.array([0.0, y])))), tree


@PROPERTY_SETTINGS
@given(tree=trees, xs=st.lists(coordinates, min_size=3, max_size=3), y=coordinates)
def test_a_traced_gradient_evaluates_a_batch_like_pointwise_calls(tree, xs, y):
    f = symad_function(tree)
    gradient = sd.grad(f, argnums=(0, 1))
    G = gradient.trace(0.0, 0.0)
    batch_dx, batch_dy = G(np.array(xs), np.full(3, y))
    for k, x in enumerate(xs):
        dx, dy = gradient(x, y)
        assert np.isclose(batch_dx[k], dx, rtol=1e-13, atol=1e-13), tree
        assert np.isclose(batch_dy[k], dy, rtol=1e-13, atol=1e-13), tree
