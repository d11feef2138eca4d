"""Reverse mode over runs of like nodes: the array sweep agrees with the node-by-node sweep."""

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp
from symad.transforms import reverse, terms
from tests.elements import element_trace

N = 12  # elements: runs of N like nodes, longer than reverse._MIN_RUN

# One elementwise function per primitive of the partials table, with a domain where it is smooth.
UNARY = {
    "sqrt": (snp.sqrt, 0.5, 3.0), "cbrt": (snp.cbrt, 0.5, 3.0), "exp": (snp.exp, -2.0, 2.0),
    "exp2": (snp.exp2, -2.0, 2.0), "expm1": (snp.expm1, -2.0, 2.0), "log": (snp.log, 0.5, 3.0),
    "log2": (snp.log2, 0.5, 3.0), "log10": (snp.log10, 0.5, 3.0), "log1p": (snp.log1p, 0.1, 3.0),
    "sin": (snp.sin, -2.0, 2.0), "cos": (snp.cos, -2.0, 2.0), "tan": (snp.tan, -1.0, 1.0),
    "arcsin": (snp.arcsin, -0.9, 0.9), "arccos": (snp.arccos, -0.9, 0.9),
    "arctan": (snp.arctan, -2.0, 2.0), "sinh": (snp.sinh, -2.0, 2.0), "cosh": (snp.cosh, -2.0, 2.0),
    "tanh": (snp.tanh, -2.0, 2.0), "arcsinh": (snp.arcsinh, -2.0, 2.0),
    "arccosh": (snp.arccosh, 1.5, 3.0), "arctanh": (snp.arctanh, -0.9, 0.9),
    "abs": (snp.abs, 0.2, 2.0), "erf": (snp.erf, -2.0, 2.0), "erfc": (snp.erfc, -2.0, 2.0),
    "sigmoid": (snp.sigmoid, -3.0, 3.0), "softplus": (snp.softplus, -3.0, 3.0),
    "negative": (lambda x: -x, -2.0, 2.0), "square": (lambda x: x**2, -2.0, 2.0),
    "reciprocal": (lambda x: 1 / x, 0.5, 3.0),
}
# (add is variadic: its partials are all 1 and need no rule call, so it is swept node by node)
BINARY = {
    "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "power": np.power, "arctan2": np.arctan2, "hypot": np.hypot, "maximum": np.maximum,
    "minimum": np.minimum, "logaddexp": np.logaddexp,
}


def node_by_node(monkeypatch):
    """Make every run too short for the array sweep."""
    monkeypatch.setattr(reverse, "_MIN_RUN", 10**9)


def count_array_sweeps(monkeypatch) -> list:
    calls = []
    original = terms.partial_atom_columns

    def counting(nodes, indices, function_name):
        calls.append(len(nodes))
        return original(nodes, indices, function_name)

    monkeypatch.setattr(reverse, "partial_atom_columns", counting)
    return calls


def both_sweeps(monkeypatch, fun, *args, argnums=0):
    """The gradient by the array sweep (checked to be taken) and by the node-by-node sweep."""
    with monkeypatch.context() as patch:
        calls = count_array_sweeps(patch)
        by_runs = sd.grad(element_trace(fun, *args), argnums=argnums)(*args)
        assert calls and max(calls) >= N
    with monkeypatch.context() as patch:
        node_by_node(patch)
        by_nodes = sd.grad(element_trace(fun, *args), argnums=argnums)(*args)
    return by_runs, by_nodes


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_run_matches_node_by_node(monkeypatch, name):
    op, low, high = UNARY[name]
    x = np.linspace(low, high, N)
    by_runs, by_nodes = both_sweeps(monkeypatch, lambda x: np.sum(op(x) * x), x)
    np.testing.assert_array_equal(by_runs, by_nodes)
    assert np.all(np.isfinite(by_runs))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_run_matches_node_by_node(monkeypatch, name):
    op = BINARY[name]
    x, y = np.linspace(0.5, 2.0, N), np.linspace(2.5, 0.7, N)
    by_runs, by_nodes = both_sweeps(monkeypatch, lambda x, y: np.sum(op(x, y)), x, y, argnums=(0, 1))
    for a, b in zip(by_runs, by_nodes):
        np.testing.assert_array_equal(a, b)


def test_gradient_graph_is_the_same_size(monkeypatch):
    def energy(x):
        return np.sum(np.sin(x) * np.exp(-x**2))

    x = np.zeros(N)
    by_runs = sd.grad(element_trace(energy, x)).trace(x).stats()["nodes"]
    node_by_node(monkeypatch)
    assert sd.grad(element_trace(energy, x)).trace(x).stats()["nodes"] == by_runs == 11 * N
    # Whole arrays: one node per array operation, whatever N.
    assert sd.grad(energy).trace(x).stats()["nodes"] == 11


def test_a_run_never_holds_a_node_and_its_user():
    # sin(sin(x)): the outer sines use the inner ones, so they are swept first, apart.
    x = np.linspace(-2.0, 2.0, N)
    f = element_trace(lambda x: np.sum(np.sin(np.sin(x))), x)
    gradient = sd.grad(f)(x)
    np.testing.assert_allclose(gradient, np.cos(np.sin(x)) * np.cos(x), rtol=1e-15, atol=0)


def test_power_of_a_constant_base_zero_in_an_array(monkeypatch):
    # d/dy 0**y is 0 (0**y is constant for y > 0), not log(0) * 0 = nan, element by element.
    base = np.array([0.0, 2.0, 3.0, 0.5] * 3)
    y = np.linspace(1.0, 2.0, N)
    by_runs, by_nodes = both_sweeps(monkeypatch, lambda y: np.sum(base**y), y)
    np.testing.assert_array_equal(by_runs, by_nodes)
    expected = np.where(base == 0, 0.0, np.log(np.where(base == 0, 1.0, base)) * base**y)
    np.testing.assert_allclose(by_runs, expected, rtol=1e-15, atol=0)


def test_masked_cotangents_are_swept_one_by_one(monkeypatch):
    # The square root's partial is infinite at 0, in the branch not taken there.
    x = np.linspace(-1.0, 1.0, N)
    x[3] = 0.0

    def f(x):  # the sines are swept as a run, the masked roots and products one by one
        return np.sum(snp.where(x > 0, np.sqrt(np.abs(x)), 2 * x) + np.sin(x))

    by_runs, by_nodes = both_sweeps(monkeypatch, f, x)
    np.testing.assert_array_equal(by_runs, by_nodes)
    positive = np.where(x > 0, x, 1.0)
    expected = np.where(x > 0, 0.5 / np.sqrt(positive), 2.0) + np.cos(x)
    np.testing.assert_allclose(by_runs, expected, rtol=1e-15)
    assert np.isfinite(by_runs[3])


def test_custom_primitive_rules_are_called_per_node():
    calls = []

    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    @softsign.defpartials
    def _(x):
        calls.append(np.shape(x))
        return (1 / (1 + abs(x)) ** 2,)

    x = np.linspace(-2.0, 2.0, N)
    gradient = sd.grad(element_trace(lambda x: np.sum(softsign(x)), x))(x)
    np.testing.assert_allclose(gradient, 1 / (1 + np.abs(x)) ** 2, rtol=1e-15)
    assert calls == [()] * N
    assert not softsign.primitive.broadcasting_partials
    # On a whole array the primitive is one node, and its rule is called once, on the array.
    calls.clear()
    gradient = sd.grad(lambda x: np.sum(softsign(x)))(x)
    np.testing.assert_allclose(gradient, 1 / (1 + np.abs(x)) ** 2, rtol=1e-15)
    assert calls == [(N,)]


def test_power_of_a_constant_base_array_zero_in_places():
    # The same for whole arrays: one power node, its base a constant array with zeros.
    y = np.linspace(1.0, 2.0, 4)
    for base in (np.array([0.0, 2.0, 3.0, 0.5]), np.array([1.5, 2.0, 3.0, 0.5]), np.zeros(4)):
        gradient = sd.grad(lambda y, base=base: np.sum(base**y))(y)
        expected = np.where(base == 0, 0.0, np.log(np.where(base == 0, 1.0, base)) * base**y)
        np.testing.assert_allclose(gradient, expected, rtol=1e-15, atol=0)


def test_runs_of_powers_guard_the_same_exponents_as_node_by_node(monkeypatch):
    # d/da a**p is guarded, where(p == 0, 0, p a**(p - 1)), only for a traced exponent p other
    # than a (for which 0 * 0**-1 would be nan): x**3 and x**x need no guard, y**x does. A run
    # of powers swept as arrays gets the same graph as one swept node by node.
    x, y = np.linspace(0.5, 2.0, N), np.linspace(2.5, 0.7, N)
    f = element_trace(lambda x, y: np.sum(x**x + x**3.0 + y**x), x, y)
    operations = {}
    for mode in ("runs", "nodes"):
        with monkeypatch.context() as patch:
            calls = count_array_sweeps(patch)
            if mode == "nodes":
                node_by_node(patch)
            operations[mode] = sd.grad(f, argnums=(0, 1)).trace(x, y).stats()["operations"]
            assert (max(calls, default=0) >= N) == (mode == "runs")
    assert operations["runs"] == operations["nodes"]
    assert operations["runs"]["where"] == N
