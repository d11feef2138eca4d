"""Every primitive of SPEC §1, driven from one spec table (the way JAX's lax_autodiff_test does).

For each elementwise primitive the table gives the traced function, its arity, an input
domain away from singularities and kinks, and a NumPy/SciPy reference. The tests check

* values of the traced and compiled function against the reference (scalar and batch),
* derivatives up to order 2 in forward and reverse mode against finite differences
  (``symad.testing.check_grads``), through ``symad.numpy`` and through plain NumPy calls,
* the symbolic partial rules exactly (``formula() == cos(x)``, DESIGN item 8),
* the array operations of SPEC §1 against NumPy, and
* structural properties: exact zeros, shared subexpressions, custom primitives to order 2.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.special as sc
import sympy

import symad as sd
import symad.numpy as snp
from symad.primitives import cbrt as sympy_cbrt
from symad.primitives import sigmoid as sympy_sigmoid
from symad.testing import check_grads

# ---------------------------------------------------------------------------
# The spec table
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One elementwise primitive.

    ``domain`` is one ``(low, high)`` for every argument or a tuple of them, one per
    argument; ``valid`` rejects sample points too close to a kink or tie (where finite
    differences and one-sided derivatives disagree). ``np_fn`` is the plain NumPy/SciPy
    spelling, dispatched through ``__array_ufunc__``/``__array_function__`` (None if NumPy
    has none); ``ref`` computes the expected values on NumPy arrays.
    """

    name: str
    fn: Callable
    arity: int
    domain: tuple
    ref: Callable
    np_fn: Callable | None = None
    valid: Callable | None = None

    def domains(self) -> list[tuple[float, float]]:
        if isinstance(self.domain[0], tuple):
            assert len(self.domain) == self.arity
            return list(self.domain)
        return [self.domain] * self.arity

    def __repr__(self) -> str:  # parametrize ids
        return self.name


def _away_from(*kinks, gap=0.05):
    """A ``valid`` predicate for a unary row: the point is at least ``gap`` from every kink."""
    return lambda x: all(np.all(np.abs(x - k) > gap) for k in kinks)


def _no_tie(a, b):
    return np.all(np.abs(a - b) > 0.05)


ROWS = [
    # -- arithmetic --------------------------------------------------------------
    Row("add", snp.add, 2, (-2.0, 2.0), np.add, np.add),
    Row("subtract", snp.subtract, 2, (-2.0, 2.0), np.subtract, np.subtract),
    Row("multiply", snp.multiply, 2, (-2.0, 2.0), np.multiply, np.multiply),
    Row("divide", snp.divide, 2, ((-2.0, 2.0), (0.5, 2.0)), np.divide, np.divide),
    Row("negative", snp.negative, 1, (-2.0, 2.0), np.negative, np.negative),
    Row(
        "power_const_int",
        lambda x: snp.power(x, 3),
        1,
        (-2.0, 2.0),
        lambda x: np.power(x, 3),
        lambda x: np.power(x, 3),
    ),
    Row(
        "power_const_frac",
        lambda x: snp.power(x, 2.5),
        1,
        (0.2, 2.0),
        lambda x: np.power(x, 2.5),
        lambda x: np.power(x, 2.5),
    ),
    Row("power_traced", snp.power, 2, ((0.2, 2.0), (-1.5, 1.5)), np.power, np.power),
    Row("square", snp.square, 1, (-2.0, 2.0), np.square, np.square),
    Row("reciprocal", snp.reciprocal, 1, (0.3, 2.0), np.reciprocal, np.reciprocal),
    # -- roots, exponentials, logarithms -------------------------------------------
    Row("sqrt", snp.sqrt, 1, (0.2, 3.0), np.sqrt, np.sqrt),
    Row("cbrt", snp.cbrt, 1, (-2.0, 2.0), np.cbrt, np.cbrt, _away_from(0.0, gap=0.2)),
    Row("exp", snp.exp, 1, (-2.0, 2.0), np.exp, np.exp),
    Row("exp2", snp.exp2, 1, (-2.0, 2.0), np.exp2, np.exp2),
    Row("expm1", snp.expm1, 1, (-2.0, 2.0), np.expm1, np.expm1),
    Row("log", snp.log, 1, (0.2, 3.0), np.log, np.log),
    Row("log2", snp.log2, 1, (0.2, 3.0), np.log2, np.log2),
    Row("log10", snp.log10, 1, (0.2, 3.0), np.log10, np.log10),
    Row("log1p", snp.log1p, 1, (-0.5, 2.0), np.log1p, np.log1p),
    # -- trigonometric and hyperbolic --------------------------------------------
    Row("sin", snp.sin, 1, (-3.0, 3.0), np.sin, np.sin),
    Row("cos", snp.cos, 1, (-3.0, 3.0), np.cos, np.cos),
    Row("tan", snp.tan, 1, (-1.2, 1.2), np.tan, np.tan),
    Row("arcsin", snp.arcsin, 1, (-0.8, 0.8), np.arcsin, np.arcsin),
    Row("arccos", snp.arccos, 1, (-0.8, 0.8), np.arccos, np.arccos),
    Row("arctan", snp.arctan, 1, (-3.0, 3.0), np.arctan, np.arctan),
    # y > 0 keeps clear of arctan2's branch cut along the negative x axis.
    Row("arctan2", snp.arctan2, 2, ((0.3, 2.0), (-2.0, 2.0)), np.arctan2, np.arctan2),
    Row("sinh", snp.sinh, 1, (-2.0, 2.0), np.sinh, np.sinh),
    Row("cosh", snp.cosh, 1, (-2.0, 2.0), np.cosh, np.cosh),
    Row("tanh", snp.tanh, 1, (-2.0, 2.0), np.tanh, np.tanh),
    Row("arcsinh", snp.arcsinh, 1, (-2.0, 2.0), np.arcsinh, np.arcsinh),
    Row("arccosh", snp.arccosh, 1, (1.2, 3.0), np.arccosh, np.arccosh),
    Row("arctanh", snp.arctanh, 1, (-0.8, 0.8), np.arctanh, np.arctanh),
    # -- piecewise -----------------------------------------------------------------
    Row("abs", snp.abs, 1, (-2.0, 2.0), np.abs, np.abs, _away_from(0.0)),
    Row("sign", snp.sign, 1, (-2.0, 2.0), np.sign, np.sign, _away_from(0.0)),
    Row("maximum", snp.maximum, 2, (-2.0, 2.0), np.maximum, np.maximum, _no_tie),
    Row("minimum", snp.minimum, 2, (-2.0, 2.0), np.minimum, np.minimum, _no_tie),
    Row(
        "clip",
        lambda x: snp.clip(x, -0.5, 0.7),
        1,
        (-1.5, 1.5),
        lambda x: np.clip(x, -0.5, 0.7),
        lambda x: np.clip(x, -0.5, 0.7),
        _away_from(-0.5, 0.7),
    ),
    Row(
        "where",
        lambda x, y: snp.where(x > 0.2, snp.sin(x) * y, x - y),
        2,
        (-2.0, 2.0),
        lambda x, y: np.where(x > 0.2, np.sin(x) * y, x - y),
        lambda x, y: np.where(x > 0.2, np.sin(x) * y, x - y),
        lambda x, y: np.all(np.abs(x - 0.2) > 0.05),
    ),
    # -- smooth two-argument and special functions ----------------------------------
    Row("hypot", snp.hypot, 2, (0.3, 2.0), np.hypot, np.hypot),
    Row("logaddexp", snp.logaddexp, 2, (-3.0, 3.0), np.logaddexp, np.logaddexp),
    Row("erf", snp.erf, 1, (-2.0, 2.0), sc.erf, sc.erf),
    Row("erfc", snp.erfc, 1, (-2.0, 2.0), sc.erfc, sc.erfc),
    Row("sigmoid", snp.sigmoid, 1, (-4.0, 4.0), sc.expit, sc.expit),
    Row("softplus", snp.softplus, 1, (-4.0, 4.0), lambda x: np.logaddexp(0.0, x)),
]
ROWS_BY_NAME = {row.name: row for row in ROWS}

# Every elementwise primitive SPEC §1 names has at least one row.
SPEC_ELEMENTWISE = """add subtract multiply divide negative power square reciprocal sqrt cbrt
exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh
arcsinh arccosh arctanh abs sign maximum minimum clip where hypot logaddexp erf erfc sigmoid
softplus""".split()


def _seed(*names) -> int:
    return zlib.crc32("/".join(names).encode())


def sample(row: Row, rng: np.random.Generator, shape=()) -> tuple[np.ndarray, ...]:
    """A point in the row's domain (rejection-sampled away from kinks and ties)."""
    for _ in range(1000):
        args = tuple(rng.uniform(low, high, size=shape) for low, high in row.domains())
        if row.valid is None or row.valid(*args):
            return tuple(float(a) if shape == () else a for a in args)
    raise AssertionError(f"no valid sample point for {row.name}")


def sample_batch(row: Row, rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """``n`` valid points, one column per argument (each point checked by ``valid``)."""
    points = [sample(row, rng) for _ in range(n)]
    return tuple(np.array(column) for column in zip(*points))


def test_table_covers_spec():
    covered = {row.name.split("_")[0] for row in ROWS}
    assert set(SPEC_ELEMENTWISE) <= covered
    assert {"power_const_int", "power_const_frac", "power_traced"} <= set(ROWS_BY_NAME)


# ---------------------------------------------------------------------------
# (a) values against NumPy/SciPy
# ---------------------------------------------------------------------------


def _check_values(fn, row: Row):
    rng = np.random.default_rng(_seed("values", row.name))
    F = sd.trace(fn, *([0.5] * row.arity))
    # A scalar point: a NumPy scalar back.
    point = sample(row, rng)
    value = F(*point)
    assert np.ndim(value) == 0
    np.testing.assert_allclose(value, row.ref(*map(np.float64, point)), rtol=1e-12, atol=1e-14)
    # A batch of points through the same traced function (no re-tracing).
    xs = sample_batch(row, rng, 9)
    values = F(*xs)
    assert isinstance(values, np.ndarray) and values.shape == (9,)
    assert values.dtype == np.float64
    np.testing.assert_allclose(values, row.ref(*xs), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_values(row):
    _check_values(row.fn, row)


NUMPY_ROWS = [row for row in ROWS if row.np_fn is not None]


@pytest.mark.parametrize("row", NUMPY_ROWS, ids=repr)
def test_values_numpy_spelling(row):
    _check_values(row.np_fn, row)


# ---------------------------------------------------------------------------
# (b) derivatives up to order 2 against finite differences
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_grads(row):
    rng = np.random.default_rng(_seed("grads", row.name))
    check_grads(row.fn, sample(row, rng), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("row", ROWS, ids=repr)
def test_taylor_mode_against_finite_differences(row):
    # Every row of the table through Taylor mode too (its exact high-order values
    # are checked in tests/test_high_order.py).
    rng = np.random.default_rng(_seed("taylor", row.name))
    args = sample(row, rng)
    if any(np.shape(a) != () for a in args):
        pytest.skip("Taylor mode takes scalar arguments; this row samples arrays")
    check_grads(row.fn, args, order=2, modes=("taylor",))


@pytest.mark.parametrize("row", NUMPY_ROWS, ids=repr)
def test_grads_numpy_spelling(row):
    rng = np.random.default_rng(_seed("grads-np", row.name))
    check_grads(row.np_fn, sample(row, rng), order=2, modes=("fwd", "rev"))


VECTOR_ROWS = [
    "add",
    "multiply",
    "divide",
    "power_traced",
    "sin",
    "arctan2",
    "maximum",
    "clip",
    "where",
    "hypot",
    "logaddexp",
    "softplus",
]


@pytest.mark.parametrize("name", VECTOR_ROWS)
def test_grads_vector_args(name):
    row = ROWS_BY_NAME[name]
    rng = np.random.default_rng(_seed("grads-vec", name))
    args = sample(row, rng, shape=(3,))
    assert all(np.shape(a) == (3,) for a in args)
    check_grads(row.fn, args, order=2, modes=("fwd", "rev"))


def test_python_operators():
    """``+ - * / ** unary - abs()`` on tracers record the same primitives as snp."""

    def f(x, y):
        return (x + y) * (x - y) / y + x**y - (-x) * 2.0 + abs(x) ** 2 + 3.0 / y - 1.0

    def ref(x, y):
        return (x + y) * (x - y) / y + x**y + x * 2.0 + abs(x) ** 2 + 3.0 / y - 1.0

    xs = np.array([0.3, 1.1, 1.9])
    ys = np.array([0.7, 1.4, 0.4])
    np.testing.assert_allclose(sd.trace(f, 0.5, 0.5)(xs, ys), ref(xs, ys), rtol=1e-12)
    check_grads(f, (0.8, 1.3), order=2)


@pytest.mark.parametrize(
    "constant", [sympy.Integer(2), sympy.Rational(1, 2), sympy.pi, sympy.log(2)], ids=str
)
def test_sympy_constant_on_the_left_of_an_operator(constant):
    # The partial rules of exp2, erf and erfc multiply a SymPy constant by a tracer from
    # the left; SymPy must defer to the Tracer's reflected operators (this once raised
    # TracingError from sympify calling Tracer.__float__).
    F = sd.trace(lambda x: constant * x + constant / x - (constant - x) + constant**x, 0.5)
    assert F.formula() == constant * x + constant / x - (constant - x) + constant**x
    c = float(constant)
    np.testing.assert_allclose(F(0.7), c * 0.7 + c / 0.7 - (c - 0.7) + c**0.7, rtol=1e-14)


# ---------------------------------------------------------------------------
# Exact symbolic partial rules (DESIGN item 8)
# ---------------------------------------------------------------------------

x = sympy.Symbol("x")
y = sympy.Symbol("y")

# (function of x, its exact derivative). Each function is written ``lambda x: ...`` so the
# traced input is the symbol ``x`` (inputs are named after the Python parameters).
UNARY_DERIVATIVES = {
    "negative": (lambda x: snp.negative(x), sympy.Integer(-1)),
    "square": (lambda x: snp.square(x), 2 * x),
    "reciprocal": (lambda x: snp.reciprocal(x), -1 / x**2),
    "cube": (lambda x: x**3, 3 * x**2),
    "power_traced_base_and_exponent": (lambda x: x**x, x * x ** (x - 1) + sympy.log(x) * x**x),
    "sqrt": (lambda x: snp.sqrt(x), 1 / (2 * sympy.sqrt(x))),
    "cbrt": (lambda x: snp.cbrt(x), 1 / (3 * sympy_cbrt(x) ** 2)),
    "exp": (lambda x: snp.exp(x), sympy.exp(x)),
    "expm1": (lambda x: snp.expm1(x), sympy.exp(x)),
    "log": (lambda x: snp.log(x), 1 / x),
    "log2": (lambda x: snp.log2(x), 1 / (x * sympy.log(2))),
    "log10": (lambda x: snp.log10(x), 1 / (x * sympy.log(10))),
    "log1p": (lambda x: snp.log1p(x), 1 / (1 + x)),
    "sin": (lambda x: snp.sin(x), sympy.cos(x)),
    "cos": (lambda x: snp.cos(x), -sympy.sin(x)),
    "tan": (lambda x: snp.tan(x), 1 + sympy.tan(x) ** 2),
    "arcsin": (lambda x: snp.arcsin(x), 1 / sympy.sqrt(1 - x**2)),
    "arccos": (lambda x: snp.arccos(x), -1 / sympy.sqrt(1 - x**2)),
    "arctan": (lambda x: snp.arctan(x), 1 / (x**2 + 1)),
    "sinh": (lambda x: snp.sinh(x), sympy.cosh(x)),
    "cosh": (lambda x: snp.cosh(x), sympy.sinh(x)),
    "tanh": (lambda x: snp.tanh(x), sympy.sech(x) ** 2),
    "arcsinh": (lambda x: snp.arcsinh(x), 1 / sympy.sqrt(x**2 + 1)),
    "arccosh": (lambda x: snp.arccosh(x), 1 / (sympy.sqrt(x - 1) * sympy.sqrt(x + 1))),
    "arctanh": (lambda x: snp.arctanh(x), 1 / (1 - x**2)),
    "abs": (lambda x: snp.abs(x), sympy.Piecewise((1, x >= 0), (-1, True))),
    "sign": (lambda x: snp.sign(x), sympy.Integer(0)),
    "sigmoid": (lambda x: snp.sigmoid(x), sympy.sech(x / 2) ** 2 / 4),
    "softplus": (lambda x: snp.softplus(x), sympy_sigmoid(x)),
    "exp2": (lambda x: snp.exp2(x), sympy.log(2) * 2**x),
    "erf": (lambda x: snp.erf(x), 2 / sympy.sqrt(sympy.pi) * sympy.exp(-(x**2))),
    "erfc": (lambda x: snp.erfc(x), -2 / sympy.sqrt(sympy.pi) * sympy.exp(-(x**2))),
}


@pytest.mark.parametrize("name", list(UNARY_DERIVATIVES))
def test_exact_first_derivative(name):
    f, expected = UNARY_DERIVATIVES[name]
    F = sd.grad(f).trace(0.5)
    assert F.inputs == (x,)
    assert F.formula() == expected


def test_exact_second_derivatives():
    assert sd.grad(sd.grad(lambda x: snp.sin(x))).trace(0.5).formula() == -sympy.sin(x)
    assert sd.grad(sd.grad(lambda x: snp.exp(x))).trace(0.5).formula() == sympy.exp(x)
    assert sd.grad(sd.grad(lambda x: snp.log(x))).trace(0.5).formula() == -1 / x**2
    tanh_second = sd.grad(sd.grad(lambda x: snp.tanh(x))).trace(0.5).formula()
    assert tanh_second == -2 * sympy.tanh(x) * sympy.sech(x) ** 2


BINARY_DERIVATIVES = {
    "add": (lambda x, y: x + y, (1, 1)),
    "subtract": (lambda x, y: x - y, (1, -1)),
    "multiply": (lambda x, y: x * y, (y, x)),
    "divide": (lambda x, y: x / y, (1 / y, -x / y**2)),
    "arctan2": (lambda x, y: snp.arctan2(x, y), (y / (x**2 + y**2), -x / (x**2 + y**2))),
    "hypot": (
        lambda x, y: snp.hypot(x, y),
        (x / sympy.sqrt(x**2 + y**2), y / sympy.sqrt(x**2 + y**2)),
    ),
    "logaddexp": (lambda x, y: snp.logaddexp(x, y), (sympy_sigmoid(x - y), sympy_sigmoid(y - x))),
}


@pytest.mark.parametrize("name", list(BINARY_DERIVATIVES))
def test_exact_binary_partials(name):
    f, expected = BINARY_DERIVATIVES[name]
    F = sd.grad(f, argnums=(0, 1)).trace(0.5, 0.5)
    assert F.inputs == (x, y)
    assert F.formula() == tuple(sympy.sympify(e) for e in expected)


def test_exact_maximum_partials_split_ties():
    # JAX's convention: 1 where x wins, 0 where y wins, 1/2 at a tie.
    dx, dy = sd.grad(lambda x, y: snp.maximum(x, y), argnums=(0, 1)).trace(0.5, 0.5).formula()
    half = sympy.Rational(1, 2)
    for point, expected in [
        ({x: 2, y: 1}, (1, 0)),
        ({x: 1, y: 2}, (0, 1)),
        ({x: 1, y: 1}, (half, half)),
    ]:
        assert (dx.subs(point), dy.subs(point)) == expected
    np.testing.assert_array_equal(
        sd.grad(snp.maximum, argnums=(0, 1))(np.array([2.0, 1.0, 1.0]), np.array([1.0, 2.0, 1.0])),
        ([1.0, 0.0, 0.5], [0.0, 1.0, 0.5]),
    )


# ---------------------------------------------------------------------------
# Array operations
# ---------------------------------------------------------------------------

_rng = np.random.default_rng(20240611)
V3 = _rng.uniform(-1, 1, 3)
W3 = _rng.uniform(-1, 1, 3)
M23 = _rng.uniform(-1, 1, (2, 3))
M32 = _rng.uniform(-1, 1, (3, 2))
B223 = _rng.uniform(-1, 1, (2, 2, 3))
C31 = _rng.uniform(-1, 1, (3, 1))
R4 = _rng.uniform(-1, 1, 4)

# (id, traced function (NumPy spelling, dispatched), args, reference on NumPy arrays, order).
# A reference of None means: the same function on plain arrays, which is then pure NumPy.
ARRAY_CASES = [
    ("sum", lambda a: np.sum(np.sin(a)), (M23,), None, 2),
    ("sum_axis0", lambda a: np.sum(a * a, axis=0), (M23,), None, 2),
    ("sum_axis1_keepdims", lambda a: np.sum(a**3, axis=1, keepdims=True), (M23,), None, 2),
    (
        "sum_snp_axis_tuple",
        lambda a: snp.sum(a, axis=(0, 1)),
        (B223,),
        lambda a: np.sum(a, axis=(0, 1)),
        1,
    ),
    ("mean", lambda a: np.mean(np.exp(a)), (M23,), None, 2),
    ("mean_axis1", lambda a: np.mean(a * a, axis=1), (M23,), None, 2),
    ("prod", lambda a: np.prod(a), (V3,), None, 2),
    ("prod_axis0", lambda a: np.prod(a, axis=0), (M23,), None, 2),
    ("dot_vv", lambda a, b: np.dot(a, b), (V3, W3), None, 2),
    ("dot_mv", lambda a, b: np.dot(a, b), (M23, V3), None, 2),
    ("dot_snp_scalar", lambda a, b: snp.dot(a[0], b), (V3, W3), lambda a, b: np.dot(a[0], b), 2),
    ("matmul_op", lambda a, b: a @ b, (M23, M32), None, 2),
    ("matmul_np", lambda a, b: np.matmul(a, b), (M32, M23), None, 1),
    ("matmul_batch", lambda a, b: a @ b, (B223, M32), None, 1),
    ("matmul_vec_mat", lambda a, b: a @ b, (V3, M32), None, 2),
    ("matmul_mat_vec", lambda a, b: a @ b, (M23, V3), None, 2),
    ("matmul_vec_vec", lambda a, b: a @ b, (V3, W3), None, 2),
    ("matmul_snp", lambda a, b: snp.matmul(a, b), (M23, V3), lambda a, b: a @ b, 1),
    ("outer", lambda a, b: np.outer(a, b), (V3, R4), None, 2),
    ("transpose", lambda a: np.transpose(a) * M32, (M23,), None, 1),
    ("dot_T", lambda a: a.T @ a, (M23,), None, 2),
    ("transpose_axes", lambda a: np.transpose(a, (2, 0, 1)) ** 2, (B223,), None, 1),
    ("reshape", lambda a: np.reshape(np.sin(a), (3, 2)), (M23,), None, 1),
    ("reshape_method", lambda a: a.reshape(6) * np.arange(6.0), (M23,), None, 1),
    ("index_basic", lambda a: a[1, ::-1] * a[0, 1:2], (M23,), None, 2),
    ("index_ellipsis_newaxis", lambda a: a[..., 1][:, None] * a[0], (M23,), None, 1),
    ("index_int_array", lambda a: a[np.array([2, 0, 2])] ** 2, (V3,), None, 2),
    ("index_int_arrays_2d", lambda a: a[[0, 1, 1], [2, 0, 2]] * a[1, [0]], (M23,), None, 1),
    ("concatenate", lambda a, b: np.concatenate([a, np.sin(b), a * b]), (V3, W3), None, 2),
    ("concatenate_axis1", lambda a: np.concatenate([a, a**2], axis=1), (M23,), None, 1),
    ("stack", lambda a, b: np.stack([a, b * a]), (V3, W3), None, 2),
    ("stack_axis1", lambda a, b: np.stack([a, np.exp(b)], axis=1), (V3, W3), None, 1),
    ("broadcast_to", lambda a: np.broadcast_to(a, (2, 3)) * M23, (V3,), None, 2),
    ("broadcast_3x1_4", lambda a, b: a * b + np.sin(a - b), (C31, R4), None, 2),
    ("broadcast_4_3x1", lambda a, b: np.arctan2(b, a + 3.0), (C31, R4), None, 1),
    ("logsumexp", lambda a: snp.logsumexp(a), (V3,), lambda a: sc.logsumexp(a), 2),
    (
        "logsumexp_axis1",
        lambda a: snp.logsumexp(a, axis=1),
        (M23,),
        lambda a: sc.logsumexp(a, axis=1),
        2,
    ),
    ("norm", lambda a: np.linalg.norm(a), (V3,), None, 2),
    ("norm_snp", lambda a: snp.norm(a * 2.0), (V3,), lambda a: np.linalg.norm(a * 2.0), 2),
    ("norm_snp_linalg", lambda a: snp.linalg.norm(a), (V3,), lambda a: np.linalg.norm(a), 1),
]


@pytest.mark.parametrize(
    "fn, args, ref, order", [case[1:] for case in ARRAY_CASES], ids=[c[0] for c in ARRAY_CASES]
)
def test_array_operation(fn, args, ref, order):
    expected = (ref or fn)(*args)
    assert isinstance(expected, (np.ndarray, np.floating, float))  # the reference ran in NumPy
    value = sd.trace(fn, *args)(*args)
    assert np.shape(value) == np.shape(expected)
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-14)
    check_grads(fn, args, order=order, modes=("fwd", "rev"))


def test_sum_mean_prod_gradients_exact():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(sd.grad(lambda a: np.sum(a, axis=1))(a), np.ones((2, 3)))
    np.testing.assert_allclose(sd.grad(np.mean)(a), np.full((2, 3), 1 / 6), rtol=1e-15)
    np.testing.assert_allclose(
        sd.grad(lambda a: np.prod(a, axis=0))(a), [[4.0, 5.0, 6.0], [1.0, 2.0, 3.0]]
    )


def test_integer_index_gradient_accumulates():
    # x[2] is read twice and x[1] never: gradient (1, 0, 2), with an exact zero.
    g = sd.grad(lambda a: np.sum(a[np.array([2, 0, 2])])).trace(V3)
    np.testing.assert_array_equal(g(V3), [1.0, 0.0, 2.0])
    formula = g.formula(expand=True)
    assert list(formula) == [1, 0, 2]


def test_logsumexp_stable_at_large_inputs():
    big = np.array([1000.0, 1000.0, 999.0])
    F = sd.trace(lambda a: snp.logsumexp(a), big)
    np.testing.assert_allclose(F(big), sc.logsumexp(big), rtol=1e-14)
    np.testing.assert_allclose(F(-big), sc.logsumexp(-big), rtol=1e-14)
    softmax = np.exp(big - sc.logsumexp(big))
    grad = sd.grad(lambda a: snp.logsumexp(a))(big)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, softmax, rtol=1e-13)
    # A batch of rows, some huge, through the same traced function.
    rows = np.array([[1000.0, 999.0, 998.0], [-1000.0, -1001.0, -1000.5], [0.1, 0.2, 0.3]])
    np.testing.assert_allclose(F(rows), sc.logsumexp(rows, axis=1), rtol=1e-14)
    logaddexp = sd.trace(lambda a, b: snp.logaddexp(a, b), 0.0, 0.0)
    np.testing.assert_allclose(logaddexp(1000.0, 999.0), np.logaddexp(1000.0, 999.0), rtol=1e-14)


def test_norm_matches_numpy_on_a_batch():
    F = sd.trace(lambda a: np.linalg.norm(a), V3)
    batch = np.random.default_rng(3).normal(size=(5, 3))
    np.testing.assert_allclose(F(batch), np.linalg.norm(batch, axis=1), rtol=1e-13)
    np.testing.assert_allclose(sd.grad(np.linalg.norm)(V3), V3 / np.linalg.norm(V3), rtol=1e-13)


def test_broadcasting_shapes_and_gradient_shapes():
    f = lambda a, b: np.sum(a * b)  # noqa: E731
    assert sd.trace(lambda a, b: a * b, C31, R4)(C31, R4).shape == (3, 4)
    ga, gb = sd.grad(f, argnums=(0, 1))(C31, R4)
    assert ga.shape == (3, 1) and gb.shape == (4,)
    np.testing.assert_allclose(ga, np.full((3, 1), R4.sum()), rtol=1e-14)
    np.testing.assert_allclose(gb, np.full(4, C31.sum()), rtol=1e-14)


# ---------------------------------------------------------------------------
# Structural properties
# ---------------------------------------------------------------------------


def test_exact_zero_gradient():
    def f(x, y):
        return x * 0 + y

    gx = sd.grad(f).trace(0.5, 0.5).formula()
    assert gx == 0 and gx is sympy.S.Zero
    assert sd.grad(f, 1).trace(0.5, 0.5).formula() == 1
    # A position the output does not read at all: exact zeros too.
    gx, gy = sd.grad(lambda x, y: snp.sin(y), argnums=(0, 1)).trace(0.5, 0.5).formula()
    assert gx is sympy.S.Zero and gy == sympy.cos(y)


def test_shared_subexpressions_stay_shared():
    def f(x):
        return np.sin(x) * np.sin(x) + np.sin(x)

    stats = sd.trace(f, 0.5).stats()
    # One sin node (hash-consed), one multiply, one add.
    assert stats["operations"]["sin"] == 1
    assert stats["nodes"] == 3
    assert sum(stats["operations"].values()) == stats["nodes"]
    assert sd.trace(f, 0.5).formula() == sympy.sin(x) ** 2 + sympy.sin(x)
    # The same through symad.numpy, and the shared node is used twice in the CSE program.
    assert sd.trace(lambda x: snp.sin(x) * snp.sin(x) + snp.sin(x), 0.5).stats()["nodes"] == 3
    assignments, (output,) = sd.trace(f, 0.5).cse()
    assert [expr for _, expr in assignments] == [sympy.sin(x)]


def test_gradient_does_not_swell():
    # The derivative of a 20-fold composition is linear in size: each level adds a
    # bounded number of nodes (a tree-based sympy.diff would not share them).
    def f(x):
        for _ in range(20):
            x = np.sin(x) * np.cos(x) + x
        return x

    primal = sd.trace(f, 0.5).stats()["nodes"]
    gradient = sd.grad(f).trace(0.5).stats()["nodes"]
    assert primal == 20 * 4
    assert gradient <= 4 * primal


def _softsign_second(x):
    return -2 * np.sign(x) / (1 + np.abs(x)) ** 3


def test_custom_primitive_formula_and_first_derivative(softsign_primitive):
    softsign = softsign_primitive
    assert sd.trace(lambda x: softsign(x), 0.5).formula() == sympy.Function("softsign")(x)
    xs = np.array([-1.5, -0.3, 0.4, 2.0])
    np.testing.assert_allclose(sd.grad(softsign)(xs[2]), 1 / (1 + 0.4) ** 2, rtol=1e-14)
    np.testing.assert_allclose(
        sd.derivative(softsign, 1)(xs), 1 / (1 + np.abs(xs)) ** 2, rtol=1e-14
    )


@pytest.mark.parametrize("point", [-1.3, -0.4, 0.35, 1.7])
def test_custom_primitive_second_derivative(point, softsign_primitive):
    softsign = softsign_primitive
    second = sd.grad(sd.grad(softsign))(point)
    h = 1e-4
    numeric = (softsign(point + h) - 2 * softsign(point) + softsign(point - h)) / h**2
    np.testing.assert_allclose(second, numeric, rtol=1e-6)
    np.testing.assert_allclose(second, _softsign_second(point), rtol=1e-13)
    check_grads(softsign, (point,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("function", [snp.sigmoid, snp.softplus])
def test_formulas_with_sigmoid_and_softplus_evaluate_in_sympy(function):
    # A user checks the formula of a loss with SymPy: evalf and lambdify both work,
    # and the formula still prints with the function's own name.
    import mpmath

    from symad.primitives import softplus as sympy_softplus

    formula = sd.trace(function, 0.5).formula()
    (x,) = formula.free_symbols
    assert str(formula) == f"{function.__name__}(x)"
    assert function.__name__ in sympy.latex(formula)
    exact = {"sigmoid": lambda v: 1 / (1 + mpmath.exp(-v)),
             "softplus": lambda v: mpmath.log(1 + mpmath.exp(v))}[function.__name__]
    value = formula.subs(x, 0.37).evalf()
    assert value.is_Float and float(value) == pytest.approx(float(exact(0.37)), rel=1e-15)
    # evalf(40) at mpmath's default precision (evalf rounded to it, keeping 16 digits, before).
    precise = formula.subs(x, sympy.Rational(37, 100)).evalf(40)
    with mpmath.workdps(50):
        assert abs(precise - sympy.Float(exact(mpmath.mpf(37) / 100), 45)) < sympy.Float("1e-38")
    for module in ("numpy", "math", "scipy"):
        assert float(sympy.lambdify(x, formula, module)(0.37)) == pytest.approx(float(function(0.37)),
                                                                                rel=1e-15)
    # The NumPy form is the stable one symad evaluates with: no overflow at the extremes.
    extremes = np.array([-800.0, 0.0, 800.0])
    with np.errstate(over="raise", invalid="raise"):
        np.testing.assert_array_equal(sympy.lambdify(x, formula, "numpy")(extremes), function(extremes))
    with mpmath.workdps(30):
        result = sympy.lambdify(x, formula, "mpmath")(mpmath.mpf("0.37"))
        assert isinstance(result, mpmath.mpf) and abs(result - exact(mpmath.mpf("0.37"))) < 1e-28
    # The derivative's formula mixes both classes.
    gradient = sd.grad(lambda x: snp.softplus(x) * snp.sigmoid(x)).trace(0.5).formula()
    assert gradient.free_symbols == {x}
    assert float(sympy.lambdify(x, gradient)(0.37)) == pytest.approx(
        float(sd.grad(lambda v: snp.softplus(v) * snp.sigmoid(v))(0.37)), rel=1e-14)
    assert sympy_softplus(x).func is sympy_softplus


def test_cube_root_and_stop_gradient_lambdify_with_numpy_semantics():
    import mpmath

    from symad.primitives import stop_gradient

    x = sympy.Symbol("x")
    # mpmath.cbrt is the principal (complex) root; symad's cbrt is the real one.
    with mpmath.workdps(30):
        value = sympy.lambdify(x, sympy_cbrt(x), "mpmath")(mpmath.mpf(-8))
    assert value == -2
    for module in ("numpy", "math", "mpmath"):
        assert float(sympy.lambdify(x, 2 * stop_gradient(x), module)(-0.37)) == -0.74


@pytest.mark.parametrize("transform", [sd.grad, sd.jacfwd], ids=["reverse", "forward"])
def test_partials_of_a_max_or_min_of_several_scalars_share_ties(transform):
    # A max or min of several traced scalars is one node; its partials follow JAX at ties:
    # the extremal operands share the derivative equally, an indicator (1 or 0) over their
    # count -- as the formula shows.
    def of(reduce):
        return lambda a, b, c: reduce(snp.stack([a, b, c]))

    for reduce, point, expected in [
        (snp.max, (2.0, 1.0, 0.5), (1.0, 0.0, 0.0)),
        (snp.max, (1.0, 1.0, 0.5), (0.5, 0.5, 0.0)),
        (snp.max, (1.0, 1.0, 1.0), (1 / 3, 1 / 3, 1 / 3)),
        (snp.min, (1.0, 0.5, 0.5), (0.0, 0.5, 0.5)),
        (snp.min, (0.2, 0.5, 0.7), (1.0, 0.0, 0.0)),
    ]:
        partials = transform(of(reduce), argnums=(0, 1, 2))(*point)
        assert tuple(float(p) for p in partials) == pytest.approx(expected, rel=1e-15), point
    formula = transform(of(snp.max), argnums=(0, 1, 2)).trace(0.5, 0.5, 0.5).formula()
    branches = {piece.expr for f in formula for p in f.atoms(sympy.Piecewise) for piece in p.args}
    assert branches == {0, 1}, formula
