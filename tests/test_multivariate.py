"""Mixed partials (``sd.derivative(f, (a, b, ...))``) and Taylor maps (``sd.taylor(f, n, argnum=(...))``).

References are SymPy's exact derivatives evaluated at 40 digits (at the exact
binary values of the float points), and for functions whose SymPy derivatives
would take minutes, mpmath's own partial derivatives (``mpmath.diff(f, (x, y),
(a, b))``) at 60 digits. The float64 results are held to 1e-12 relative; the
same graphs evaluated by the mpmath backend at 40 digits to 1e-32, which checks
every recurrence to far below float64 rounding.
"""

import itertools
import math

import mpmath
import numpy as np
import pytest
import sympy

import symad as sd
from symad.transforms.taylor import Multivariate
from tests.test_precision import assert_encloses

X, Y, Z, W = sympy.symbols("x y z w")


def exact_partial(expression, variables, orders, point, digits=40):
    """d^|orders| expression / d variables^orders at ``point`` (floats, taken as exact binaries)."""
    spec = [item for variable, order in zip(variables, orders) for item in (variable, order) if order]
    derivative = sympy.diff(expression, *spec) if spec else expression
    return derivative.evalf(digits, subs={v: sympy.Float(p) for v, p in zip(variables, point)})


def relative_error(value, exact) -> float:
    exact = mpmath.mpf(exact) if not isinstance(exact, mpmath.mpf) else exact
    with mpmath.workdps(50):
        return float(abs(mpmath.mpf(value) - exact) / abs(exact))


# Functions whose exact derivatives of total order 20 SymPy forms in seconds: products of
# exponentials and trigonometric functions, a quotient with a logarithm, a square root, a
# real power of a series, and a traced exponent.
SYMPY_CASES = [
    ("exp(xy) cos(x - y)", lambda x, y: np.exp(x * y) * np.cos(x - y),
     sympy.exp(X * Y) * sympy.cos(X - Y), [(10, 10), (1, 19), (20, 0), (3, 4), (1, 1)]),
    ("log(2 + x + 2y) / (1 - x/3 - y/4)", lambda x, y: np.log(2 + x + 2 * y) / (1 - x / 3 - y / 4),
     sympy.log(2 + X + 2 * Y) / (1 - X / 3 - Y / 4), [(10, 10), (4, 16)]),
    ("sqrt(3 + x + 2y) exp(x - y)", lambda x, y: np.sqrt(3 + x + 2 * y) * np.exp(x - y),
     sympy.sqrt(3 + X + 2 * Y) * sympy.exp(X - Y), [(10, 10), (2, 7)]),
    ("(1 + xy + x)^2.5", lambda x, y: (1 + x * y + x) ** 2.5,
     (1 + X * Y + X) ** sympy.Rational(5, 2), [(6, 6), (3, 2)]),
    ("x^y", lambda x, y: x**y, X**Y, [(10, 10), (7, 3)]),
]


@pytest.mark.parametrize("name, function, expression, all_orders", SYMPY_CASES,
                         ids=[case[0] for case in SYMPY_CASES])
def test_mixed_partials_match_sympys_exact_derivatives(name, function, expression, all_orders):
    point = (0.3, 0.4) if name != "x^y" else (1.3, 0.4)
    for orders in all_orders:
        exact = exact_partial(expression, (X, Y), orders, point)
        D = sd.derivative(function, orders)
        assert relative_error(D(*point), exact) < 1e-12, (name, orders)
        with mpmath.workdps(40):
            precise = D.trace(*point).compile("mpmath", dps=40)(*point)
            assert relative_error(precise, exact) < 1e-32, (name, orders)


def exp_sin_quotient(x, y):
    return np.exp(np.sin(x) * y) / (1 + x**2 + y**2)


def mpmath_exp_sin_quotient(x, y):
    return mpmath.exp(mpmath.sin(x) * y) / (1 + x**2 + y**2)


def test_a_mixed_partial_of_a_composite_against_mpmath():
    # d^16 f / dx^8 dy^8 of a function whose SymPy derivatives grow too fast to use here (its
    # order 20 takes SymPy about 100 s: benchmarks/order.py): mpmath's partial derivative at
    # 40 digits is the reference.
    point = (0.3, 0.4)
    with mpmath.workdps(40):
        exact = mpmath.diff(mpmath_exp_sin_quotient, tuple(map(mpmath.mpf, point)), (8, 8))
    D = sd.derivative(exp_sin_quotient, (8, 8))
    assert relative_error(D(*point), exact) < 1e-12
    assert relative_error(D.trace(*point).compile("mpmath", dps=30)(*point), exact) < 1e-27


def test_mixed_partial_nodes_grow_polynomially_in_the_total_order():
    nodes = {k: sd.derivative(exp_sin_quotient, (k, k)).trace(0.3, 0.4).stats()["nodes"] for k in (3, 6, 12)}
    # A product of two full series over the box k <= (a, b) costs prod((a_i+1)(a_i+2)/2)
    # products: doubling both orders multiplies that by at most 16 (nesting grad doubles
    # the graph per order: 2**12 for one doubling from 12 to 24).
    assert nodes[6] / nodes[3] < 16 and nodes[12] / nodes[6] < 16, nodes
    assert nodes[12] < 5_000


def test_three_variables_and_zero_orders():
    def f(x, y, z):
        return np.exp(x + 2 * y - z) * np.sin(x * z)

    expression = sympy.exp(X + 2 * Y - Z) * sympy.sin(X * Z)
    point = (0.3, -0.2, 0.5)
    for orders in [(2, 3, 4), (0, 2, 1), (1, 0, 0), (3, 0, 2)]:
        exact = exact_partial(expression, (X, Y, Z), orders, point)
        assert relative_error(sd.derivative(f, orders)(*point), exact) < 1e-12, orders
    # Orders for the leading arguments only: (1, 2) differentiates x once and y twice.
    exact = exact_partial(expression, (X, Y, Z), (1, 2, 0), point)
    assert relative_error(sd.derivative(f, (1, 2))(*point), exact) < 1e-12
    # All zero: the function itself.
    assert sd.derivative(f, (0, 0, 0))(*point) == f(*point)


def test_one_non_zero_order_is_the_nth_derivative_graph():
    G = sd.derivative(lambda x, y: np.exp(x * y) * np.cos(y), (0, 5)).trace(0.3, 0.4)
    H = sd.derivative(lambda x, y: np.exp(x * y) * np.cos(y), 5, argnum=1).trace(0.3, 0.4)
    assert G.stats() == H.stats()
    assert G(0.3, 0.4) == H(0.3, 0.4)


def test_mixed_partials_are_elementwise_over_arrays():
    xs, ys = np.linspace(0.1, 0.9, 5), np.linspace(-0.5, 0.5, 5)
    D = sd.derivative(exp_sin_quotient, (3, 2))
    grid = D(xs[:, None], ys[None, :])
    assert grid.shape == (5, 5)
    for i, j in itertools.product(range(5), range(5)):
        assert grid[i, j] == D(xs[i], ys[j])
    with mpmath.workdps(30):
        exact = mpmath.diff(mpmath_exp_sin_quotient, (mpmath.mpf(xs[2]), mpmath.mpf(ys[4])), (3, 2))
    assert relative_error(grid[2, 4], exact) < 1e-13


def test_where_and_custom_primitives_under_mixed_partials(softsign_primitive):
    softsign = softsign_primitive

    def f(x, y):
        return np.where(x > y, np.exp(x * y), np.cos(x + y)) + softsign(x * y)

    # For x > y, t = xy > 0: softsign(t) = t/(1 + t) = 1 - 1/(1 + t).
    expression = sympy.exp(X * Y) - 1 / (1 + X * Y)
    for orders in [(2, 3), (4, 4)]:
        exact = exact_partial(expression, (X, Y), orders, (0.6, 0.4))
        assert relative_error(sd.derivative(f, orders)(0.6, 0.4), exact) < 1e-12, orders
    exact = exact_partial(sympy.cos(X + Y) + X * Y / (1 + X * Y), (X, Y), (2, 3), (0.2, 0.4))
    assert relative_error(sd.derivative(f, (2, 3))(0.2, 0.4), exact) < 1e-12


def test_an_argument_the_function_ignores_gives_exact_zeros():
    D = sd.derivative(lambda x, y: np.sin(x) + 0 * y, (2, 1)).trace(0.5, 0.5)
    assert D.graph.outputs == (0,) and D(0.5, 0.5) == 0.0
    assert float(sd.derivative(lambda x, y: np.sin(x) * y, (3, 2))(0.5, 2.0)) == 0.0


def test_mixed_partial_formula_and_latex_label():
    F = sd.derivative(lambda x, y: x**3 * y**2 + np.sin(x * y), (2, 1)).trace(1.0, 2.0)
    exact = sympy.diff(X**3 * Y**2 + sympy.sin(X * Y), X, 2, Y, 1)
    assert sympy.simplify(F.formula() - exact) == 0
    assert r"\frac{\partial^{3} f}{\partial x^{2} \partial y}" in F.latex()
    G = sd.derivative(lambda x, y, z: x * y * z, (0, 2, 1)).trace(1.0, 2.0, 3.0)
    assert G.output_labels == [r"\frac{\partial^{3} f}{\partial y^{2} \partial z}"]
    assert float(G(1.0, 2.0, 3.0)) == 0.0
    # A gradient of a mixed partial is labelled as one more partial.
    H = sd.grad(sd.derivative(lambda x, y: x**3 * y**2, (2, 1))).trace(1.0, 2.0)
    assert H.output_labels == [r"\frac{\partial^{4} f}{\partial x^{3} \partial y}"]


def test_taylor_map_latex_labels_each_coefficient():
    def f(x, y):
        return np.exp(x) * np.sin(y)

    text = sd.taylor(f, 2, argnum=(0, 1)).trace(0.1, 0.2).latex()
    assert r"\frac{1}{2} \frac{\partial^{2} f}{\partial x^{2}} &=" in text
    assert r"\frac{\partial^{2} f}{\partial x \partial y} &=" in text
    labels = sd.taylor(f, 2, argnum=(0, 1), derivatives=True).trace(0.1, 0.2).output_labels
    assert labels == ["f", r"\frac{\partial f}{\partial y}", r"\frac{\partial^{2} f}{\partial y^{2}}",
                      r"\frac{\partial f}{\partial x}", r"\frac{\partial^{2} f}{\partial x \partial y}",
                      r"\frac{\partial^{2} f}{\partial x^{2}}"]


def test_mixed_partial_errors():
    f = lambda x, y: x * y  # noqa: E731
    with pytest.raises(sd.DifferentiationError, match="non-negative integer"):
        sd.derivative(f, (1, -1))
    with pytest.raises(sd.DifferentiationError, match="non-negative integer"):
        sd.derivative(f, (1, 1.5))
    with pytest.raises(sd.DifferentiationError, match="n=\\(\\) gives no order"):
        sd.derivative(f, ())
    with pytest.raises(sd.DifferentiationError, match="total order 200 is above 170"):
        sd.derivative(f, (100, 100))
    with pytest.raises(sd.DifferentiationError, match="3 orders for a function of 2 arguments"):
        sd.derivative(f, (1, 1, 1))(0.5, 0.5)
    with pytest.raises(TypeError, match="float inputs only"):
        sd.derivative(f, (1, 1))(1, 2.0)
    traced_with_an_array = sd.trace(lambda v, y: v[0] * y, np.ones(2), 1.0)
    with pytest.raises(sd.DifferentiationError, match="every argument must be scalar"):
        sd.derivative(traced_with_an_array, (1, 1)).trace(np.ones(2), 1.0)


# ---------------------------------------------------------------------------
# Taylor maps
# ---------------------------------------------------------------------------


def all_keys(dimension: int, order: int) -> set:
    return {k for k in itertools.product(range(order + 1), repeat=dimension) if sum(k) <= order}


def test_four_variable_taylor_map_to_order_10_matches_sympy():
    # 1,001 coefficients, each against SymPy's derivative (from its parent's) at 30 digits.
    def f(x, y, z, w):
        return np.log(3 + x + y * z) * np.exp(w)

    expression = sympy.log(3 + X + Y * Z) * sympy.exp(W)
    point = (0.1, 0.2, 0.3, 0.4)
    series = sd.taylor(f, 10, argnum=(0, 1, 2, 3))(*point)
    assert set(series) == all_keys(4, 10) and len(series) == math.comb(14, 4) == 1001
    subs = {v: sympy.Float(p) for v, p in zip((X, Y, Z, W), point)}
    derivatives = {(0, 0, 0, 0): expression}
    for k in sorted(series, key=lambda k: (sum(k), k)):
        if k not in derivatives:
            axis = max(i for i in range(4) if k[i])
            parent = k[:axis] + (k[axis] - 1,) + k[axis + 1:]
            derivatives[k] = sympy.diff(derivatives[parent], (X, Y, Z, W)[axis])
        exact = derivatives[k].evalf(30, subs=subs) / math.prod(map(math.factorial, k))
        if exact == 0:
            assert series[k] == 0, k
        else:
            assert abs(series[k] - float(exact)) <= 1e-12 * max(1.0, abs(float(exact))), k


def test_three_variable_taylor_map_coefficients_and_derivatives():
    def f(x, y, z):
        return np.exp(np.sin(x) * y) / (1 + x**2 + z**2) + np.sqrt(2 + y * z)

    point = (0.3, 0.4, -0.2)
    coefficients = sd.taylor(f, 6, argnum=(0, 1, 2))(*point)
    derivatives = sd.taylor(f, 6, argnum=(0, 1, 2), derivatives=True)(*point)
    assert set(coefficients) == set(derivatives) == all_keys(3, 6)

    def reference(x, y, z):
        return mpmath.exp(mpmath.sin(x) * y) / (1 + x**2 + z**2) + mpmath.sqrt(2 + y * z)

    with mpmath.workdps(40):
        mpoint = tuple(map(mpmath.mpf, point))
        for k in [(0, 0, 0), (1, 0, 0), (0, 0, 1), (2, 1, 3), (6, 0, 0), (1, 4, 1), (0, 3, 3)]:
            exact = mpmath.diff(reference, mpoint, k)
            assert relative_error(derivatives[k], exact) < 1e-12, k
            assert relative_error(coefficients[k], exact / math.prod(map(math.factorial, k))) < 1e-12, k
            # The same partial derivative, computed alone:
            assert relative_error(sd.derivative(f, k)(*point), exact) < 1e-12, k


def test_taylor_map_of_a_polynomial_is_exact_and_sparse():
    series = sd.taylor(lambda x, y: (1 + x + 2 * y) ** 3, 4, argnum=(0, 1))(0.0, 0.0)
    expansion = sympy.Poly(sympy.expand((1 + X + 2 * Y) ** 3), X, Y)
    for (i, j), value in series.items():
        assert value == int(expansion.coeff_monomial(X**i * Y**j)), (i, j)


def test_taylor_map_argument_order_and_order_zero():
    f = lambda x, y: np.exp(2 * x) * np.sin(y)  # noqa: E731
    forward = sd.taylor(f, 3, argnum=(0, 1))(0.0, 0.5)
    backward = sd.taylor(f, 3, argnum=(1, 0))(0.0, 0.5)
    for (i, j), value in forward.items():
        assert backward[(j, i)] == value
    assert sd.taylor(f, 0, argnum=(0, 1))(0.1, 0.5) == {(0, 0): f(0.1, 0.5)}
    # Elementwise over arrays, as the one-variable series.
    grid = sd.taylor(f, 2, argnum=(0, 1))(np.array([0.0, 0.1]), 0.5)
    assert grid[(1, 1)].shape == (2,)
    np.testing.assert_allclose(grid[(1, 1)], 2 * np.exp(2 * np.array([0.0, 0.1])) * np.cos(0.5), rtol=1e-15)
    # One argnum keeps the tuple of orders.
    assert isinstance(sd.taylor(f, 2, argnum=0)(0.0, 0.5), tuple)
    with pytest.raises(sd.DifferentiationError, match="names no argument"):
        sd.taylor(f, 2, argnum=())


def test_multi_index_sets():
    box = Multivariate.box((2, 1))
    assert box.keys == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert box.axis((2, 1)) == 1 and box.axis((2, 0)) == 0
    assert len(Multivariate.total_order(4, 10).keys) == 1001
    assert len(box.splits((2, 1))) == 6
    with pytest.raises(ValueError, match="closed downwards"):
        Multivariate([(0, 0), (1, 1)])


def test_mixed_partials_and_taylor_maps_in_both_backends():
    def f(x, y):
        return np.exp(x * y) * np.cos(x - y)

    def reference(x, y):
        return mpmath.exp(x * y) * mpmath.cos(x - y)

    point = (0.3, 0.4)
    with mpmath.workdps(60):
        exact = mpmath.diff(reference, tuple(map(mpmath.mpf, point)), (5, 5))
    F = sd.derivative(f, (5, 5)).trace(*point)
    with mpmath.workdps(60):
        assert abs(F.compile("mpmath", dps=40)(*point) - exact) / abs(exact) < 1e-35
    assert_encloses(F.compile("interval", dps=30)(*point), exact, 1e-24)
    taylor_map = sd.taylor(f, 4, argnum=(0, 1)).trace(*point).compile("interval", dps=30)(*point)
    assert set(taylor_map) == {(i, j) for i in range(5) for j in range(5) if i + j <= 4}
    with mpmath.workdps(60):
        exact = mpmath.diff(reference, tuple(map(mpmath.mpf, point)), (1, 3)) / 6
    assert_encloses(taylor_map[(1, 3)], exact, 1e-25)
