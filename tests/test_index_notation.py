"""Formulas of array programs in index notation (symad/export/index_notation.py).

Three kinds of checks: the exact SymPy form of each array primitive's formula;
that every formula is exact (at every element, evaluated with SymPy, it equals
the function's value); and that LaTeX is one line per kept array node whose
length does not depend on the arrays' sizes. Every LaTeX string exported here
is also rendered by KaTeX (tests/conftest.py records it for tests/test_katex.py).
"""


import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp
from symad.errors import ExportError
from symad.export.index_notation import Maximum, Minimum, evaluate_element, index_symbol

i, j, k, l = (index_symbol(name) for name in "ijkl")  # noqa: E741


def bases(F):
    """The IndexedBase of each array input, in argument order."""
    return [leaf.indexed for leaf in F.in_symbols]


def lines(text):
    return text.split("\n")[1:-1]


def array_names(F, args):
    """Name -> value of the inputs and named constants, for evaluate_element."""
    named = {leaf.name: np.asarray(value) for leaf, value in zip(F.in_symbols, args)}
    named.update({str(base.label): value for base, value in F.formula_constants.items()})
    return named


def assert_formula_is_exact(F, *args):
    """At every element of every output, the formula evaluates to F's value."""
    formulas, indices, values = F.formula(), F.index_symbols, F(*args)
    if not isinstance(formulas, (tuple, list)):
        formulas, indices, values = [formulas], [indices], [values]
    named = array_names(F, args)
    checked = 0
    for formula, free, value in zip(formulas, indices, values):
        value = np.asarray(value, dtype=float)
        for position in np.ndindex(value.shape):
            if isinstance(formula, sympy.NDimArray):
                got = evaluate_element(formula[position], {}, named)
            else:
                got = evaluate_element(formula, dict(zip(free, position)), named)
            assert got == pytest.approx(value[position], rel=1e-12, abs=1e-12), (position, formula)
            checked += 1
    assert checked


# ---------------------------------------------------------------------------
# Each primitive's formula, exactly
# ---------------------------------------------------------------------------

X0, W0, Y0, x0 = np.ones((3, 4)), np.ones((4, 2)), np.ones((2, 3, 4)), np.arange(5.0)


def test_reductions_are_sums_over_bound_indices():
    F = sd.trace(lambda X: np.sum(X, axis=0), X0)
    (X,) = bases(F)
    assert F.index_symbols == (i,)
    assert F.formula() == sympy.Sum(X[j, i], (j, 0, 2))
    assert sd.trace(lambda X: np.sum(X ** 2), X0).formula() == sympy.Sum(X[i, j] ** 2, (i, 0, 2), (j, 0, 3))
    # keepdims: the size-1 axis keeps its free index j; the bound index skips it
    F = sd.trace(lambda X: np.sum(X, axis=1, keepdims=True), X0)
    assert F.index_symbols == (i, j) and F.formula() == sympy.Sum(X[i, k], (k, 0, 3))
    assert sd.trace(lambda X: np.mean(X, axis=1), X0).formula() == sympy.Sum(X[i, j], (j, 0, 3)) / 4
    assert sd.trace(lambda X: np.max(X, axis=1), X0).formula() == Maximum(X[i, j], (j, 0, 3))
    assert sd.trace(lambda X: np.min(X), X0).formula() == Minimum(X[i, j], (i, 0, 2), (j, 0, 3))
    assert sd.trace(lambda X: snp.logsumexp(X, axis=0), X0).formula() == sympy.log(
        sympy.Sum(sympy.exp(X[j, i]), (j, 0, 2)))
    x = bases(sd.trace(lambda x: x, x0))[0]
    assert sd.trace(lambda x: np.linalg.norm(x), x0).formula() == sympy.sqrt(sympy.Sum(x[i] ** 2, (i, 0, 4)))


def test_contractions_are_sums_over_the_contracted_index():
    F = sd.trace(lambda X, W: X @ W, X0, W0)
    X, W = bases(F)
    assert F.index_symbols == (i, j)
    assert F.formula() == sympy.Sum(X[i, k] * W[k, j], (k, 0, 3))
    assert sd.trace(lambda X: np.einsum("ij,ij->i", X, X), X0).formula() == sympy.Sum(X[i, j] ** 2, (j, 0, 3))
    F = sd.trace(lambda Y, W: np.einsum("aij,jk->aik", Y, W), Y0, W0)
    Y, W = bases(F)
    assert F.formula() == sympy.Sum(Y[i, j, l] * W[l, k], (l, 0, 3))
    F = sd.trace(lambda Y, X: np.tensordot(Y, X, axes=([1, 2], [0, 1])), Y0, X0)
    Y, X = bases(F)
    assert F.formula() == sympy.Sum(Y[i, j, k] * X[j, k], (j, 0, 2), (k, 0, 3))


def test_transposes_and_reshapes_map_indices():
    F = sd.trace(lambda X: X.T, X0)
    (X,) = bases(F)
    assert F.formula() == X[j, i]
    F = sd.trace(lambda Y: np.transpose(Y, (2, 0, 1)), Y0)
    (Y,) = bases(F)
    assert F.formula() == Y[j, k, i]
    assert sd.trace(lambda Y: Y.reshape(6, 4), Y0).formula() == Y[sympy.floor(i / 3), sympy.Mod(i, 3), j]
    assert sd.trace(lambda X: X.reshape(-1), X0).formula() == X[sympy.floor(i / 4), sympy.Mod(i, 4)]
    F = sd.trace(lambda x: x.reshape(5, 1), x0)
    assert F.formula() == bases(F)[0][i]  # a size-1 axis adds an index and reads nothing
    # the diagonal, taken by symad.numpy through the flat reshape: floor/Mod resolved by the ranges
    assert sd.trace(lambda X: np.diagonal(X), X0).formula() == X[i, i]
    assert sd.trace(lambda X: np.trace(X[:, :3]), X0).formula() == sympy.Sum(X[i, i], (i, 0, 2))


def test_slices_are_affine_index_maps():
    F = sd.trace(lambda x: x[1::2], x0)
    (x,) = bases(F)
    assert F.formula() == x[2 * i + 1]
    assert sd.trace(lambda x: x[::-1], x0).formula() == x[4 - i]
    assert sd.trace(lambda x: np.flip(x), x0).formula() == x[4 - i]
    assert sd.trace(lambda X: X[1:, ::2], X0).formula() == bases(sd.trace(lambda X: X, X0))[0][i + 1, 2 * j]
    assert sd.trace(lambda X: X[1], X0).formula() == bases(sd.trace(lambda X: X, X0))[0][1, i]
    assert sd.trace(lambda x: np.diff(x), x0).formula() == x[i + 1] - x[i]
    F = sd.trace(lambda x: x[:, None] * x[None, :], x0)
    assert F.index_symbols == (i, j) and F.formula() == x[i] * x[j]


def test_integer_index_arrays_in_closed_form_or_named():
    F = sd.trace(lambda x: np.roll(x, 2), x0)
    (x,) = bases(F)
    assert F.formula() == x[sympy.Mod(i + 3, 5)] and F.formula_constants == {}
    assert sd.trace(lambda x: np.repeat(x, 2), x0).formula() == x[sympy.floor(i / 2)]
    assert sd.trace(lambda x: np.tile(x, 2), x0).formula() == x[sympy.Mod(i, 5)]
    assert sd.trace(lambda x: x[[1, 3]], x0).formula() == x[2 * i + 1]
    X = bases(sd.trace(lambda X: X, X0))[0]
    assert sd.trace(lambda X: X[[0, 2], 1:], X0).formula() == X[2 * i, j + 1]
    F = sd.trace(lambda x: x[[0, 2, 2]], x0)
    ((p, values),) = F.formula_constants.items()
    assert F.formula() == x[p[i]] and str(p) == "p"
    np.testing.assert_array_equal(values, [0, 2, 2])


def test_pieces_are_piecewise_on_index_ranges():
    F = sd.trace(lambda x: np.concatenate([x, x ** 2]), x0)
    (x,) = bases(F)
    assert F.formula() == sympy.Piecewise((x[i], i < 5), (x[i - 5] ** 2, True))
    assert sd.trace(lambda x: np.stack([x, 2 * x]), x0).formula() == sympy.Piecewise(
        (x[j], sympy.Eq(i, 0)), (2 * x[j], True))
    assert sd.trace(lambda x: np.pad(x, (1, 2)), x0).formula() == sympy.Piecewise(
        (x[i - 1], (i >= 1) & (i <= 5)), (0, True))
    assert sd.trace(lambda x: np.pad(x[::2], (0, 1)), x0).formula() == sympy.Piecewise(
        (x[2 * i], i <= 2), (0, True))

    def assign(x):
        y = snp.zeros_like(x)
        y[1:3] = x[2:4]
        return y * x
    assert sd.trace(assign, x0).formula() == sympy.Piecewise(
        (x[i + 1], (i >= 1) & (i <= 2)), (0.0, True)) * x[i]


def test_cumulative_sums_run_to_the_free_index():
    F = sd.trace(lambda x: np.cumsum(x), x0)
    (x,) = bases(F)
    assert F.formula() == sympy.Sum(x[j], (j, 0, i))
    X = bases(sd.trace(lambda X: X, X0))[0]
    assert sd.trace(lambda X: np.cumsum(X, axis=0), X0).formula() == sympy.Sum(X[k, j], (k, 0, i))


def test_broadcasting_maps_indices_right_aligned():
    F = sd.trace(lambda x, X: X[:, :, None] * x, x0, X0)
    x, X = bases(F)
    assert F.formula() == X[i, j] * x[k]
    F = sd.trace(lambda A, y: A + y, np.ones((3, 1)), np.ones(4))
    A, y = bases(F)
    assert F.formula() == A[i, 0] + y[j]  # the broadcast size-1 axis reads index 0


def test_where_comparisons_and_constants():
    F = sd.trace(lambda x: np.where(x > 0, x, -x), x0)
    (x,) = bases(F)
    assert F.formula() == sympy.Piecewise((x[i], x[i] > 0), (-x[i], True))
    F = sd.trace(lambda x, y: x > y, x0, x0)
    x, y = bases(F)
    assert F.formula() == (x[i] > y[i])
    F = sd.trace(lambda x: x * np.array([1.0, 2.0, 3.0, 4.0, 5.0]) + np.ones(5), x0)
    ((c, values),) = F.formula_constants.items()
    assert str(c) == "c" and F.formula() == c[i] * bases(F)[0][i] + sympy.Float(1.0)
    np.testing.assert_array_equal(values, [1.0, 2.0, 3.0, 4.0, 5.0])
    # an input called c: the constant takes the next free letter
    F = sd.trace(lambda c: c * np.arange(5.0), x0)
    assert [str(base) for base in F.formula_constants] == ["a"]


def test_scalar_outputs_and_elements_of_array_inputs():
    F = sd.trace(lambda x: x[0] * np.sum(x), x0)
    (x,) = bases(F)
    assert F.index_symbols == () and F.formula() == x[0] * sympy.Sum(x[i], (i, 0, 4))
    F = sd.trace(lambda x: snp.stack([np.sum(x), np.max(x)]), x0)
    assert F.formula() == sympy.Array([sympy.Sum(x[i], (i, 0, 4)), Maximum(x[i], (i, 0, 4))])


def test_several_outputs_keep_their_structure_and_indices():
    F = sd.trace(lambda X: {"t": X.T, "s": np.sum(X)}, X0)
    (X,) = bases(F)
    assert F.index_symbols == {"s": (), "t": (i, j)}
    assert F.formula() == {"s": sympy.Sum(X[i, j], (i, 0, 2), (j, 0, 3)), "t": X[j, i]}


def test_index_letters_skip_the_names_of_inputs():
    F = sd.trace(lambda i, x: np.sum(i) * x, x0, x0)
    i_input, x = bases(F)
    assert F.index_symbols == (j,)
    assert F.formula() == x[j] * sympy.Sum(i_input[k], (k, 0, 4))


def test_gradients_in_index_notation():
    G = sd.grad(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))).trace(np.zeros(4))
    (x,) = bases(G)
    t = sympy.exp(-x[i] ** 2)
    assert G.formula() == t * sympy.cos(x[i]) - 2 * x[i] * t * sympy.sin(x[i])
    G = sd.grad(lambda X, W: np.sum(np.tanh(X @ W)), argnums=(0, 1)).trace(X0, W0)
    X, W = bases(G)
    inner = sympy.sech(sympy.Sum(X[i, l] * W[l, k], (l, 0, 3))) ** 2
    assert G.formula()[0] == sympy.Sum(inner * W[j, k], (k, 0, 1))
    # the scatter-add reversing an index array: a sum over a Kronecker delta
    G = sd.grad(lambda x: np.sum(x[[0, 2, 2]] ** 2)).trace(x0)
    p = next(iter(G.formula_constants))
    assert G.formula() == sympy.Sum(2 * bases(G)[0][p[j]] * sympy.KroneckerDelta(i, p[j]), (j, 0, 2))


def test_jacobian_seeds_are_kronecker_deltas():
    J = sd.jacobian(lambda x: np.sin(x)).trace(x0)
    (x,) = bases(J)
    assert J.formula() == sympy.KroneckerDelta(i, j) * sympy.cos(x[j]) and J.formula_constants == {}
    H = sd.hessian(lambda X: np.sum(np.sin(X) ** 2)).trace(X0)
    (X,) = bases(H)
    assert H.index_symbols == (i, j, k, l)
    assert H.formula() == sympy.expand((2 * sympy.cos(X[i, j]) ** 2 - 2 * sympy.sin(X[i, j]) ** 2)
                                       * sympy.KroneckerDelta(i, k) * sympy.KroneckerDelta(j, l))


# ---------------------------------------------------------------------------
# Exact at every element
# ---------------------------------------------------------------------------

rng = np.random.default_rng(7)
x5, X34, W42, Y234 = rng.normal(size=5), rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(2, 3, 4))

PROGRAMS = {
    "sum axis": (lambda X: np.sum(X, axis=0), X34),
    "mean": (lambda X: np.mean(X, axis=1, keepdims=True), X34),
    "max": (lambda X: np.max(X, axis=1), X34),
    "min": (lambda X: np.min(X), X34),
    "logsumexp": (lambda X: snp.logsumexp(X, axis=0), X34),
    "matmul": (lambda X, W: X @ W, X34, W42),
    "einsum": (lambda X: np.einsum("ij,ij->i", X, X), X34),
    "batched einsum": (lambda Y, W: np.einsum("aij,jk->aik", Y, W), Y234, W42),
    "transpose": (lambda Y: np.transpose(Y, (2, 0, 1)), Y234),
    "reshape": (lambda X: X.reshape(2, 6), X34),
    "reshape odd": (lambda X: X.reshape(4, 3), X34),
    "flatten": (lambda Y: Y.reshape(-1), Y234),
    "slices": (lambda X: X[1:, ::2] * X[:-1, 1::2], X34),
    "reverse": (lambda x: x[::-2], x5),
    "integer index": (lambda X: X[1] + X[:, 2].sum(), X34),
    "fancy": (lambda x: x[[0, 2, 2, 4]] * x[[3, 0, 4, 1]], x5),
    "fancy 2d": (lambda X: X[[0, 2], 1:] + X[[2, 1], :3], X34),
    "concatenate": (lambda x: np.concatenate([x, x[::2] ** 2, x[:1]]), x5),
    "stack": (lambda X: np.stack([X, 2 * X], axis=1), X34),
    "pad": (lambda X: np.pad(X, ((1, 0), (0, 2))), X34),
    "roll": (lambda x: np.roll(x, -2) * x, x5),
    "cumsum": (lambda X: np.cumsum(X, axis=1), X34),
    "diff": (lambda x: np.diff(x, 2), x5),
    "flip": (lambda X: np.flip(X), X34),
    "broadcasting": (lambda x, X: X[:, :, None] * x - x[:, None, None, None].sum(), x5, X34),
    "where": (lambda x: np.where(x > 0, np.sin(x), x ** 2), x5),
    "comparison": (lambda x: (x > 0.1) * x, x5),
    "tile repeat": (lambda x: np.tile(x, 2) + np.repeat(x, 2), x5),
    "diagonal trace": (lambda X: np.diagonal(X) * np.trace(X[:, :3]), X34),
    "constants": (lambda x: x * np.array([1.0, -2.0, 3.0, 0.5, 5.0]) + x @ np.arange(15.0).reshape(5, 3).sum(1), x5),
    "item assignment": (lambda x: x.at[1:3].set(x[3:]) if hasattr(x, "at") else x, x5),
    "stack of scalars": (lambda x: snp.stack([np.sum(x), np.max(x), x[2]]), x5),
    "prod": (lambda x: np.prod(x[:4]), x5),
}


def _scatter(x):
    y = snp.zeros_like(x)
    y[1:3] = x[2:4]
    y[0] = x[4]
    return y * x


PROGRAMS["scatter"] = (_scatter, x5)


def _scatter_reversed(x):
    y = snp.zeros_like(x)
    y[3::-2] = x[:2]  # positions 3, 1: a reversed slice that runs through the start
    return y * x + x[::-2].sum()


PROGRAMS["scatter reversed"] = (_scatter_reversed, x5)
PROGRAMS["reversed take"] = (lambda x: x[[4, 3, 2]] * x[[1, 0, 3]], x5)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_formula_is_exact_at_every_element(name):
    f, *args = PROGRAMS[name]
    F = sd.trace(f, *args)
    assert F.is_array_program
    assert_formula_is_exact(F, *args)


GRADIENTS = ["sum axis", "max", "logsumexp", "matmul", "batched einsum", "reshape odd", "slices", "reverse",
             "fancy", "fancy 2d", "concatenate", "stack", "pad", "roll", "cumsum", "diff", "flip",
             "broadcasting", "where", "tile repeat", "diagonal trace", "constants", "scatter", "prod",
             "scatter reversed", "reversed take"]


@pytest.mark.parametrize("name", GRADIENTS)
def test_each_gradient_formula_is_exact_at_every_element(name):
    f, *args = PROGRAMS[name]
    G = sd.grad(lambda *a: np.sum(np.sin(f(*a))), argnums=tuple(range(len(args)))).trace(*args)
    assert_formula_is_exact(G, *args)


def test_jacobians_and_hessians_are_exact_at_every_element():
    assert_formula_is_exact(sd.jacobian(lambda x: np.sin(x) * x[0]).trace(x5), x5)
    assert_formula_is_exact(sd.jacobian(lambda x: np.ones((2, 5)) @ x + x[:2]).trace(x5), x5)
    assert_formula_is_exact(sd.hessian(lambda x: np.sum(x ** 3) * x[1]).trace(x5), x5)
    assert_formula_is_exact(sd.hessian(lambda X: np.sum(np.tanh(X) ** 2)).trace(X34[:2, :3]), X34[:2, :3])


def test_formula_of_an_empty_axis():
    F = sd.trace(lambda x: np.sum(x) + x[:0].sum(), x5)
    assert evaluate_element(F.formula(), {}, array_names(F, (x5,))) == pytest.approx(x5.sum())


# ---------------------------------------------------------------------------
# cse(): the same program, shared arrays as indexed temporaries
# ---------------------------------------------------------------------------


def run_cse(F, args):
    """Evaluate F.cse() element by element: each temporary filled, then the outputs."""
    assignments, outputs = F.cse()
    named = array_names(F, args)
    for lhs, rhs in assignments:
        if isinstance(lhs, sympy.Indexed):
            shape = lhs.base.shape
            values = np.empty(tuple(int(s) for s in shape))
            for position in np.ndindex(values.shape):
                values[position] = evaluate_element(rhs, dict(zip(lhs.indices, position)), named)
            named[str(lhs.base.label)] = values
        else:
            named[lhs.name] = evaluate_element(rhs, {}, named)
    leaves = []
    for output, free, shape in zip(outputs, flat_index_symbols(F.index_symbols), F.out_shapes):
        value = np.empty(shape)
        for position in np.ndindex(shape):
            value[position] = evaluate_element(output, dict(zip(free, position)), named)
        leaves.append(value)
    return assignments, leaves


def flat_index_symbols(tree):
    """The index-symbol tuples of each output leaf, flat."""
    if isinstance(tree, tuple) and all(isinstance(s, sympy.Symbol) for s in tree):
        return [tree]
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in flat_index_symbols(tree[key])]
    return [leaf for item in tree for leaf in flat_index_symbols(item)]


def test_cse_keeps_shared_arrays_as_indexed_assignments():
    G = sd.grad(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))).trace(np.zeros(4))
    (x,) = bases(G)
    assignments, outputs = G.cse()
    ((lhs, rhs),) = assignments
    assert isinstance(lhs, sympy.Indexed) and lhs.indices == (i,) and rhs == sympy.exp(-x[i] ** 2)
    t = lhs
    assert outputs == [t * sympy.cos(x[i]) - 2 * x[i] * t * sympy.sin(x[i])]
    # consistent with formula(): the temporary put back gives it
    assert outputs[0].xreplace({t: rhs}) == G.formula()


@pytest.mark.parametrize("name", ["matmul", "slices", "concatenate", "cumsum", "scatter", "diagonal trace"])
def test_cse_program_computes_the_function(name):
    f, *args = PROGRAMS[name]
    G = sd.grad(lambda *a: np.sum(np.sin(f(*a)) ** 2), argnums=tuple(range(len(args)))).trace(*args)
    assignments, leaves = run_cse(G, args)
    assert assignments  # the squares share sin(...): a temporary at least
    for got, expected in zip(leaves, G(*args)):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_cse_names_scalar_temporaries_plainly():
    F = sd.trace(lambda x: x * np.sum(x) + np.sum(x) ** 2, x5)
    (x,) = bases(F)
    ((lhs, rhs),), (output,) = F.cse()
    assert isinstance(lhs, sympy.Symbol) and rhs == sympy.Sum(x[i], (i, 0, 4))
    assert output == x[i] * lhs + lhs ** 2


# ---------------------------------------------------------------------------
# LaTeX
# ---------------------------------------------------------------------------

SIN_EXP = lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))  # noqa: E731


def test_latex_of_the_gradient_indexes_its_temporary():
    G = sd.grad(SIN_EXP).trace(np.zeros(10))
    assert lines(G.latex()) == [
        r"t_{i} &= e^{- x_{i}^{2}} \\",
        r"\left(\nabla_{x} f\right)_{i} &= - 2 t_{i} x_{i} \sin{\left(x_{i} \right)} + t_{i} \cos{\left(x_{i} \right)}",
    ]
    assert G._repr_latex_() == f"$\\displaystyle {G.latex()}$"


def test_latex_of_contractions():
    F = sd.trace(lambda X, W: np.sum(np.tanh(X @ W)), np.zeros((30, 50)), np.zeros((50, 40)))
    assert lines(F.latex()) == [r"f &= \sum_{i, j} \tanh{\left(\sum_{k} X_{i k} W_{k j} \right)}"]
    G = sd.grad(lambda X, W: np.sum(np.tanh(X @ W)), argnums=(0, 1)).trace(np.zeros((30, 50)), np.zeros((50, 40)))
    assert lines(G.latex()) == [
        r"t_{i j} &= \frac{1}{\cosh^{2}{\left(\sum_{k} X_{i k} W_{k j} \right)}} \\",
        r"\left(\nabla_{X} f\right)_{i j} &= \sum_{k} t_{i k} W_{j k} \\",
        r"\left(\nabla_{W} f\right)_{i j} &= \sum_{k} X_{k i} t_{k j}",
    ]


def test_latex_of_pieces_limits_and_constants():
    assert lines(sd.trace(lambda x: np.cumsum(x), x0).latex()) == [r"f_{i} &= \sum_{j=0}^{i} x_{j}"]
    assert lines(sd.trace(lambda x: np.roll(x, 2) * x, x0).latex()) == [
        r"f_{i} &= x_{i} x_{\left(i + 3\right) \bmod 5}"]
    assert lines(sd.trace(lambda x: np.pad(x, (1, 0)), x0).latex()) == [
        r"f_{i} &= \begin{cases} x_{i - 1} & \text{for}\: i \geq 1 \\0 & \text{otherwise} \end{cases}"]
    assert lines(sd.trace(lambda X: np.max(X, axis=0), X0).latex()) == [r"f_{i} &= \max_{j} X_{j i}"]
    assert lines(sd.trace(lambda x: x[[0, 2, 2]] * np.array([0.5, 2.0, 3.0]), x0).latex()) == [
        r"c &= \begin{bmatrix}\frac{1}{2} \\ 2 \\ 3\end{bmatrix} \\",
        r"p &= \begin{bmatrix}0 \\ 2 \\ 2\end{bmatrix} \\",
        r"f_{i} &= c_{i} x_{p_{i}}",
    ]
    big = np.arange(600.0).reshape(30, 20)
    assert lines(sd.trace(lambda x: big @ x, np.zeros(20)).latex()) == [
        r"c &\in \mathbb{R}^{30 \times 20} \\", r"f_{i} &= \sum_{j} c_{i j} x_{j}"]
    J = sd.jacobian(lambda x: np.sin(x)).trace(x0)
    assert lines(J.latex()) == [r"\left(J_{f}\right)_{i j} &= \cos{\left(x_{j} \right)} \delta_{i j}"]


def test_latex_options_apply_to_index_notation():
    G = sd.grad(SIN_EXP).trace(np.zeros(3))
    text = G.latex(output_names=["g"], temporaries="u")
    assert lines(text) == [r"u_{i} &= e^{- x_{i}^{2}} \\",
                           r"g_{i} &= - 2 u_{i} x_{i} \sin{\left(x_{i} \right)} + u_{i} \cos{\left(x_{i} \right)}"]
    inlined = G.latex(inline_below=5)
    assert len(lines(inlined)) == 1 and "e^{- x_{i}^{2}}" in inlined
    # an input named t: temporaries take the next letter; two of them are numbered
    F = sd.trace(lambda t: np.sum(np.exp(t) * np.sin(np.exp(t))) + np.sum(np.sin(np.exp(t)) ** 2), x0)
    assert [line.split(" &= ")[0] for line in lines(F.latex())] == ["{u_{1}}_{i}", "{u_{2}}_{i}", "f"]


def test_latex_per_element_view_on_request():
    G = sd.grad(SIN_EXP).trace(np.zeros(2))
    assert G.latex(expand=True) == G.expand().latex()
    assert r"\begin{bmatrix}" in G.latex(expand=True) and "x_{1}" in G.latex(expand=True)
    assert G.formula(expand=True) == G.expand().formula()
    assert G.cse(expand=True) == G.expand().cse()


def test_latex_and_graph_do_not_grow_with_the_arrays():
    small, large = (sd.grad(SIN_EXP).trace(np.zeros(n)) for n in (10, 10 ** 6))
    assert len(small.graph.nodes) == len(large.graph.nodes)
    assert small.latex() == large.latex() and len(large.latex().encode()) < 2048
    assert str(small.formula()) == str(large.formula())  # the IndexedBase x keeps its shape
    F = sd.trace(lambda X, W: np.sum(np.tanh(X @ W)), np.zeros((30, 50)), np.zeros((50, 40)))
    assert len(F.latex().encode()) < 1024  # the per-element LaTeX was 1.3 MB
    H = sd.hessian(lambda x: np.sum(x ** 4)).trace(np.zeros(300))
    assert len(H.latex().encode()) < 300 and H.formula_constants == {}


def test_latex_lines_parse_back_to_the_function():
    pytest.importorskip("antlr4", reason="SymPy's parse_latex needs antlr4-python3-runtime 4.11 (the test extra)")
    from sympy.parsing.latex import parse_latex

    G = sd.grad(SIN_EXP).trace(np.zeros(4))
    values = np.array([0.3, -1.2, 0.8, 2.0])
    expected = G(values)
    for position, value in enumerate(values):
        known = {sympy.Symbol("x_{i}"): value, sympy.Symbol("e"): sympy.E}
        for line in lines(G.latex(mul_symbol="dot")):
            label, rhs = line.rstrip(" \\").split(" &= ")
            result = parse_latex(rhs).subs(known)
            if label == "t_{i}":
                known[sympy.Symbol("t_{i}")] = result
        assert float(result) == pytest.approx(expected[position], rel=1e-12)


def test_formula_budget_still_applies():
    def chain(x):
        for _ in range(60):
            x = np.sin(x) + 0.5 * x
        return np.sum(x)
    G = sd.grad(chain).trace(np.zeros(3))
    with pytest.raises(ExportError, match="cse"):
        G.formula()
    assignments, _ = G.cse()
    assert 0 < len(assignments) < 2 * len(G.graph.nodes)
    text = G.latex()
    assert 1 < len(lines(text)) <= len(G.graph.nodes) + 1
    assert r"\left(\nabla_{x} \mathrm{chain}\right)_{i}" in text


def test_hostile_array_names_stay_inert_in_latex():
    name = "}\\input{x}"
    F = sd.grad(lambda p: np.sum(np.sin(p[name]) ** 2)).trace({name: np.zeros(3)})
    text = F.latex()
    assert "\\input" not in text.replace(r"\backslash{}input", "")


def test_a_function_pickles_after_its_formulas_were_asked_for():
    import pickle

    F = sd.trace(lambda x: x[[0, 2, 2]] * np.arange(3.0) + 1.0, x0)
    F.formula(), F.cse(), F.latex(), F.index_symbols, F.formula_constants
    G = pickle.loads(pickle.dumps(F))
    assert str(G.formula()) == str(F.formula())
    np.testing.assert_array_equal(G(x0), F(x0))


def test_latex_options_are_checked_for_array_programs_too():
    G = sd.grad(SIN_EXP).trace(np.zeros(3))
    with pytest.raises(ExportError, match="max_inline"):
        G.latex(max_inline=10 ** 6)
    with pytest.raises(ExportError, match="temporaries"):
        G.latex(temporaries="1")
    with pytest.raises(ExportError, match="output_names"):
        G.latex(output_names=["a", "b"])


# ---------------------------------------------------------------------------
# A where inside nested reductions: no index escapes the sum that binds it
# ---------------------------------------------------------------------------

_X32 = np.random.default_rng(0).normal(size=(3, 2))


def _stable_logsumexp_loss(b):
    shifted = _X32 + b
    peak = np.max(shifted, axis=1, keepdims=True)
    return np.mean(peak[:, 0] + np.log(np.sum(np.exp(shifted - peak), axis=1)))


NESTED_PIECES = [
    ("gradient of a stable log-sum-exp", sd.grad(_stable_logsumexp_loss), (np.array([0.3, -0.2]),)),
    ("where inside two sums", lambda x: np.sum(np.sum(np.where(x > 0, x, 0), axis=1) ** 2),
     (np.array([[0.5, -1.0, 2.0], [-0.3, 0.7, 1.1]]),)),
    ("a tie count inside a sum", lambda x: np.sum(np.sum(np.where(x > 0, 1.0, 0.0), axis=0) * x[0]),
     (np.array([[0.5, -1.0, 2.0], [-0.3, 0.7, 1.1]]),)),
    ("max inside a sum of where's", lambda x: np.sum(np.max(np.where(x > 0, x, -x), axis=1) ** 2),
     (np.array([[0.5, -1.0, 2.0], [-0.3, 0.7, 1.1]]),)),
]


@pytest.mark.parametrize("name, function, args", NESTED_PIECES, ids=[c[0] for c in NESTED_PIECES])
def test_formulas_keep_every_bound_index_inside_its_sum(name, function, args):
    # SymPy's Sum folds a Piecewise out of the sums nested in it, so a where's condition on
    # a summation index once stood outside the sum binding it: formula() named an index that
    # nothing bound, and substituting the free indices gave another function.
    F = sd.trace(function, *args)
    formula = F.formula()
    names = {str(base) for base in F.formula_constants} | {leaf.name for leaf in F.in_symbols}
    stray = {symbol for symbol in formula.free_symbols
             if isinstance(symbol, sympy.Symbol) and symbol.name not in names}
    assert stray <= set(F.index_symbols), (stray, formula)
    assert_formula_is_exact(F, *args)
