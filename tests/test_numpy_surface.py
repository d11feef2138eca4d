"""NumPy's functions from issue 29's list, table-driven: values against NumPy's, derivatives
against central differences.

Each case is a function written with plain ``np.*`` calls (so the same lambda gives NumPy's
values on arrays and symad's graph on traced ones), an input sampler that keeps away from the
kinks of piecewise functions, and the shapes to try (0-d where NumPy allows it, size-1 axes).
First derivatives are checked with ``sd.jacobian`` (every output, every input element);
second derivatives of the summed output with ``sd.hessian`` against central differences of
the gradient.
"""

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp

H = 1e-6

# NumPy 2 deprecates two spellings these tests still check (users bring them from older code)
pytestmark = [pytest.mark.filterwarnings("ignore:`row_stack` alias is deprecated"),
              pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors are deprecated")]


def uniform(low, high):
    return lambda rng, shape: rng.uniform(low, high, shape)


def off_integers(scale=3.0):
    # k + u with u in [0.15, 0.85]: floor, ceil, rint... are flat within 1e-6 of these points
    return lambda rng, shape: rng.integers(-3, 3, shape) * scale / 3 + rng.uniform(0.15, 0.85, shape)


def distinct_pair(rng, shape):
    # two operands at least 0.1 apart: maximum-like functions are smooth there
    a = rng.uniform(-2, 2, shape)
    return a, a + rng.choice([-1.0, 1.0], shape) * rng.uniform(0.1, 1.0, shape)


def dividend_divisor(rng, shape):
    # a / b at least 0.1 from an integer: mod and fmod are linear around the point
    b = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 1.5, shape)
    quotient = rng.integers(-4, 4, shape) + rng.uniform(0.1, 0.9, shape)
    return quotient * b, b


def one(sampler):
    return lambda rng, shape: (sampler(rng, shape),)


def two(sampler):
    return lambda rng, shape: (sampler(rng, shape), sampler(rng, shape))


SCALAR_SHAPES = [(), (1,), (3,), (2, 1, 3)]

#: id -> (function, sampler of the arguments for one shape, shapes, smooth (check second order))
CASES = {
    # 1. scalings
    "deg2rad": (lambda x: np.deg2rad(x), one(uniform(-400, 400)), SCALAR_SHAPES, True),
    "rad2deg": (lambda x: np.rad2deg(x), one(uniform(-7, 7)), SCALAR_SHAPES, True),
    "radians": (lambda x: np.radians(x) * np.sin(np.radians(x)), one(uniform(-400, 400)),
                SCALAR_SHAPES, True),
    "degrees": (lambda x: np.degrees(x) ** 2, one(uniform(-7, 7)), SCALAR_SHAPES, True),
    # 2. nan-ignoring extrema, rounding
    "fmax": (lambda a, b: np.fmax(a, b) * a, distinct_pair, SCALAR_SHAPES, True),
    "fmin": (lambda a, b: np.fmin(a, b) * b, distinct_pair, SCALAR_SHAPES, True),
    "fmax-broadcast": (lambda a, b: np.fmax(a, b[..., :1]), distinct_pair, [(2, 3), (1, 4)], True),
    "floor": (lambda x: np.floor(x) * x, one(off_integers()), SCALAR_SHAPES, True),
    "ceil": (lambda x: np.ceil(x) * x, one(off_integers()), SCALAR_SHAPES, True),
    "trunc": (lambda x: np.trunc(x) * x, one(off_integers()), SCALAR_SHAPES, True),
    "fix": (lambda x: np.fix(x) * x, one(off_integers()), SCALAR_SHAPES, True),
    "rint": (lambda x: np.rint(x) * x, one(off_integers()), SCALAR_SHAPES, True),
    "round": (lambda x: np.round(x) * x, one(off_integers()), SCALAR_SHAPES, True),
    "round-decimals": (lambda x: np.round(x, 1) + x, one(lambda r, s: r.integers(-30, 30, s) / 10
                                                           + r.uniform(0.02, 0.08, s)),
                       SCALAR_SHAPES, True),
    "round-negative-decimals": (lambda x: np.round(x, -1) + x,
                                one(lambda r, s: r.integers(-30, 30, s) * 10 + r.uniform(1, 4, s)),
                                SCALAR_SHAPES, True),
    # 3. remainders
    "mod": (lambda a, b: np.mod(a, b), dividend_divisor, SCALAR_SHAPES, True),
    "remainder": (lambda a, b: np.remainder(a, b) * a, dividend_divisor, SCALAR_SHAPES, True),
    "%": (lambda a, b: a % b, dividend_divisor, SCALAR_SHAPES, True),
    "% number": (lambda a, b: (a % 0.7) + (2.5 % b), dividend_divisor, SCALAR_SHAPES, True),
    "fmod": (lambda a, b: np.fmod(a, b) * b, dividend_divisor, SCALAR_SHAPES, True),
}


def each(low=-2.0, high=2.0):
    """Several arrays, one per shape of a tuple of shapes."""
    return lambda rng, shapes: tuple(rng.uniform(low, high, shape) for shape in shapes)


def away_from_half(rng, shape):
    # |x| at least 0.05 from 0.5: select's conditions below hold all around the point
    x = rng.uniform(-2, 2, shape)
    return (np.where(np.abs(np.abs(x) - 0.5) < 0.05, x * 1.5 + 0.2, x),)


KNOTS = np.array([0.0, 0.3, 1.0, 1.2, 2.5])


def off_knots(rng, shape):
    # x in (-1, 3.5), at least 0.02 from every knot: interp is linear around it
    x = rng.uniform(-1, 3.5, shape)
    near = np.min(np.abs(np.subtract.outer(x, KNOTS)), axis=-1) < 0.02
    return np.where(near, x + 0.05, x)


MATRICES = [(3, 3), (2, 4), (4, 1), (1, 1), (2, 3, 3)]
VECTORS = [(1,), (3,), (4,)]

CASES.update({
    # 4. shapes and blocks (compositions of slices, gathers, concatenations, where)
    "tril": (lambda x: np.tril(x), one(uniform(-2, 2)), MATRICES, True),
    "tril-k": (lambda x: np.tril(x, -1) * x, one(uniform(-2, 2)), MATRICES, True),
    "triu": (lambda x: np.triu(x), one(uniform(-2, 2)), MATRICES, True),
    "triu-k": (lambda x: np.triu(x, 1) + np.triu(x, -1), one(uniform(-2, 2)), MATRICES, True),
    "diag-of-vector": (lambda x: np.diag(x), one(uniform(-2, 2)), VECTORS, True),
    "diag-of-vector-k": (lambda x: np.diag(x, 2) + np.diag(x ** 2, -2), one(uniform(-2, 2)),
                         VECTORS, True),
    "diag-of-matrix": (lambda x: np.diag(x) * np.diag(x, 1).sum(), one(uniform(-2, 2)),
                       [(3, 3), (2, 4), (4, 2)], True),
    "append": (lambda x: np.append(x, x ** 2), one(uniform(-2, 2)), [(), (3,), (2, 1)], True),
    "append-axis": (lambda x: np.append(x, 2 * x[:1], axis=0), one(uniform(-2, 2)),
                    [(2, 3), (1, 2), (3,)], True),
    "split": (lambda x: np.split(x, 2)[1] * np.split(x, 2)[0], one(uniform(-2, 2)),
              [(4,), (2, 3), (6, 1)], True),
    "split-indices": (lambda x: np.split(x, [1, 3], axis=-1)[1], one(uniform(-2, 2)),
                      [(4,), (2, 5), (1, 3)], True),
    "array_split": (lambda x: np.concatenate([p * (i + 1) for i, p in enumerate(np.array_split(x, 3))]),
                    one(uniform(-2, 2)), [(4,), (5, 2), (1,)], True),
    "vsplit": (lambda x: np.vsplit(x, 2)[1] - np.vsplit(x, 2)[0] ** 2, one(uniform(-2, 2)),
               [(4, 3), (2, 1), (2, 2, 2)], True),
    "hsplit": (lambda x: np.hsplit(x, 2)[0] * np.hsplit(x, 2)[1], one(uniform(-2, 2)),
               [(4,), (3, 4), (1, 2)], True),
    "dsplit": (lambda x: np.dsplit(x, [1])[1] * np.dsplit(x, [1])[0], one(uniform(-2, 2)),
               [(1, 2, 3), (2, 1, 2)], True),
    "row_stack": (lambda x: np.row_stack([x, x ** 2]), one(uniform(-2, 2)), [(3,), (2, 3), (1,)], True),
    "column_stack": (lambda x: np.column_stack([x, x ** 2]), one(uniform(-2, 2)),
                     [(3,), (2, 3), (1,)], True),
    "atleast_3d": (lambda x: np.atleast_3d(x) * 2, one(uniform(-2, 2)),
                   [(), (3,), (2, 3), (1, 2, 3)], True),
    "rot90": (lambda x: np.rot90(x) + np.rot90(x, 3) ** 2, one(uniform(-2, 2)),
              [(3, 3), (2, 2), (2, 1, 2)], True),
    "rot90-k2": (lambda x: np.rot90(x, 2), one(uniform(-2, 2)), [(2, 3), (1, 4)], True),
    "rot90-axes": (lambda x: np.rot90(x, -1, axes=(1, 2)), one(uniform(-2, 2)), [(2, 3, 4)], True),
    "kron": (lambda a, b: np.kron(a, b), each(), [((2,), (3,)), ((2, 2), (1, 3)), ((2,), (2, 2)),
                                                   ((1,), (1,))], True),
    "cross": (lambda a, b: np.cross(a, b), each(), [((3,), (3,)), ((2, 3), (3,)), ((4, 3), (4, 3))],
              True),
    "cross-2d": (lambda a, b: np.cross(a, b), each(), [((2,), (2,)), ((3, 2), (3, 2))], True),
    "cross-axis": (lambda a, b: np.cross(a, b, axis=0), each(), [((3, 2), (3, 2))], True),
    "select": (lambda x: np.select([x > 0.5, x < -0.5], [x ** 2, np.sin(x)], x), away_from_half,
               SCALAR_SHAPES, True),
    "select-default": (lambda x: np.select([x > 0.5], [x ** 2]), away_from_half, SCALAR_SHAPES, True),
    "rollaxis": (lambda x: np.rollaxis(x, 2) * np.rollaxis(x, 0, 3)[0, 0, 0], one(uniform(-2, 2)),
                 [(2, 3, 4), (1, 2, 1)], True),
    "nan_to_num": (lambda x: np.nan_to_num(x) * x, one(uniform(-2, 2)), SCALAR_SHAPES, True),
    "cumprod": (lambda x: np.cumprod(x), one(uniform(-2, 2)), [(), (4,), (2, 3)], True),
    "cumprod-axis": (lambda x: np.cumprod(x, axis=1), one(uniform(-2, 2)), [(2, 3), (3, 1), (2, 4, 2)],
                     True),
    "diff-prepend-append": (lambda x: np.diff(x ** 2, prepend=1.0, append=x[..., :1]),
                            one(uniform(-2, 2)), [(3,), (2, 4), (1,)], True),
    "diff-n": (lambda x: np.diff(x ** 3, n=2, axis=0), one(uniform(-2, 2)), [(4,), (3, 2)], True),
    "r_": (lambda x: snp.r_[x, x ** 2, 1.0, 0:2], one(uniform(-2, 2)), [(), (1,), (3,)], True),
    "c_": (lambda x: snp.c_[x, x ** 2], one(uniform(-2, 2)), [(1,), (3,), (2, 3)], True),
    "take_along_axis": (lambda x: np.take_along_axis(x, np.argsort(np.cos(np.arange(x.size)).reshape(
        x.shape), axis=-1), axis=-1), one(uniform(-2, 2)), [(4,), (2, 3), (3, 1)], True),
    "take_along_axis-0": (lambda x: np.take_along_axis(x, np.zeros((1,) + x.shape[1:], int), axis=0)
                          * x, one(uniform(-2, 2)), [(3, 2), (1, 4)], True),
    "gradient": (lambda x: np.gradient(x ** 2), one(uniform(-2, 2)), [(2,), (5,)], True),
    "gradient-axes": (lambda x: np.gradient(x ** 2, 0.3)[1] + np.gradient(x, axis=0),
                      one(uniform(-2, 2)), [(3, 4), (2, 2)], True),
    "gradient-edge2": (lambda x: np.gradient(np.sin(x), 0.5, edge_order=2), one(uniform(-2, 2)),
                       [(3,), (6,)], True),
    "gradient-coordinates": (lambda x: np.gradient(x ** 3, [0.0, 0.4, 0.5, 1.5], edge_order=2),
                             one(uniform(-2, 2)), [(4,)], True),
    "ldexp": (lambda x: np.ldexp(x, 3) + np.ldexp(x ** 2, np.array(-2)), one(uniform(-2, 2)),
              SCALAR_SHAPES, True),
    "interp": (lambda x: np.interp(x, KNOTS, [1.0, -2.0, 0.5, 3.0, 2.0]) * x, one(off_knots),
               SCALAR_SHAPES, True),
    "interp-left-right": (lambda x: np.interp(x, KNOTS, np.cos(KNOTS), left=-3.0, right=5.0) * x,
                          one(off_knots), SCALAR_SHAPES, True),
    "interp-traced-left-right": (lambda x: np.interp(x, KNOTS, np.cos(KNOTS), left=x ** 2, right=-x),
                                 one(off_knots), [()] * 6, True),
    "interp-values": (lambda f: np.interp(np.linspace(-0.5, 3.0, 7), KNOTS, f ** 2), one(uniform(-2, 2)),
                      [(5,)], True),
    # 5. reductions of a Python list of traced values (snp's; NumPy's converts the list first)
    "mean-of-list": (lambda x: snp.mean([x, x + 2]), one(uniform(-2, 2)), SCALAR_SHAPES, True),
    "var-of-list": (lambda x: snp.var([x, x ** 2, x + 1.0], axis=0), one(uniform(-2, 2)),
                    SCALAR_SHAPES, True),
    "std-of-list": (lambda x: snp.std([x, 3 * x + 1]), one(uniform(0.5, 2)), SCALAR_SHAPES, True),
    "norm-of-list": (lambda x: snp.linalg.norm([x, 2.0]), one(uniform(0.5, 2)), [()], True),
    "prod-of-list": (lambda x: snp.prod([x, x + 2], axis=0), one(uniform(-2, 2)), SCALAR_SHAPES,
                     True),
})


def spread(rng, shape):
    # distinct values at least 0.27 apart, in random order: a sort is linear around the point
    size = int(np.prod(shape))
    values = rng.permutation(size) * 0.37 + rng.uniform(0.0, 0.1, size) - 0.2 * size
    return (values.reshape(shape),)


def off_powers_of_two(rng, shape):
    # |x| = u * 2**k with u in [0.55, 0.95]: frexp's exponent is constant around x
    magnitude = rng.uniform(0.55, 0.95, shape) * 2.0 ** rng.integers(-4, 6, shape)
    return (rng.choice([-1.0, 1.0], shape) * magnitude,)


CASES.update({
    # 6. sorting: the values permuted, the derivative permuted alike (JAX's convention)
    "sort": (lambda x: np.sort(x), spread, [(1,), (4,), (2, 3), (3, 1)], True),
    "sort-axis0": (lambda x: np.sort(x, axis=0) ** 2, spread, [(3, 2), (1, 4), (2, 2, 2)], True),
    "sort-axis-none": (lambda x: np.sort(x, axis=None) * np.arange(x.size), spread,
                       [(2, 3), (1,)], True),
    "sort-descending": (lambda x: np.sort(-x)[..., ::-1] * x, spread, [(4,), (2, 3)], True),
    "argsort-gather": (lambda x: x[np.argsort(x)] * np.arange(x.size), spread, [(1,), (5,)], True),
    "argsort-gather-rows": (lambda x: x[np.argsort(x[:, 0])] * np.arange(x.shape[0])[:, None],
                            spread, [(3, 2), (1, 3), (4, 1)], True),
    "argsort-slices": (lambda x: x[np.argsort(x)[::-1][:2]] ** 2, spread, [(3,), (5,)], True),
    "take_along_axis-argsort": (lambda x: np.take_along_axis(x, np.argsort(x, axis=1), axis=1) * x,
                                spread, [(2, 3), (3, 1), (1, 4)], True),
    "argmax-gather": (lambda x: x[np.argmax(x)] * x + x[np.argmin(x)], spread, [(1,), (4,)], True),
    "argmin-axis": (lambda x: np.take_along_axis(x, np.argmin(x, axis=1, keepdims=True), axis=1)
                    ** 2, spread, [(2, 3), (3, 1)], True),
    "median": (lambda x: np.median(x) * x, spread, [(1,), (4,), (5,), (2, 3)], True),
    "median-axis": (lambda x: np.median(x, axis=0, keepdims=True) ** 2, spread, [(3, 2), (4, 1)],
                    True),
    "quantile": (lambda x: np.quantile(x, [0.0, 0.3, 0.5, 0.81, 1.0]) * np.sum(x), spread,
                 [(1,), (4,), (5,), (2, 3)], True),
    "quantile-axis": (lambda x: np.quantile(x, [[0.2], [0.7]], axis=-1, keepdims=True) ** 2, spread,
                      [(3, 2), (4, 1), (2, 5)], True),
    "percentile-axis0": (lambda x: np.percentile(x, 37.5, axis=0) * x, spread, [(3, 2), (1, 4), (4, 1)],
                         True),
    "frexp": (lambda x: np.frexp(x)[0] * np.frexp(x)[1] + np.frexp(x ** 2)[0], off_powers_of_two,
              SCALAR_SHAPES, True),
    # 7. einsum broadcasts an index of size 1 (NumPy does), and array()'s keywords
    "einsum-broadcast": (lambda a, b: np.einsum("ij,jk->ik", a, b), each(),
                         [((2, 1), (3, 2)), ((2, 3), (1, 4)), ((1, 1), (1, 1))], True),
    "einsum-broadcast-ellipsis": (lambda a, b: np.einsum("...i,...i->...", a, b ** 2), each(),
                                  [((2, 1, 3), (4, 1)), ((1, 3), (2, 3))], True),
    "array-copy": (lambda x: snp.array(x, copy=True, ndmin=2) * snp.asarray(x, copy=False) ** 2
                   + snp.array(x, copy=False, ndmin=3), one(uniform(-2, 2)), [(1,), (3,), (2, 1, 3)],
                   True),
})


#: Cases whose values are NumPy's to a few units in the last place, not bit for bit, and why.
ROUNDED = {
    "std-of-list": "snp.std and np.std sum the squares in different orders",
    "var-of-list": "snp.var and np.var sum the squares in different orders",
    "einsum-broadcast": "a contraction: the evaluator's and np.einsum's sums run in different orders",
    "einsum-broadcast-ellipsis": "a contraction: the evaluator's and np.einsum's sums run in "
                                 "different orders",
}

ROUNDED_RTOL = {"einsum-broadcast": 1e-14, "einsum-broadcast-ellipsis": 1e-14}


def central_jacobian(f, args, argnum):
    """d f(args) / d args[argnum], by central differences, shaped out.shape + arg.shape."""
    x = np.asarray(args[argnum], dtype=float)
    out = np.asarray(f(*args), dtype=float)
    columns = []
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = H
        plus = [*args[:argnum], x + step, *args[argnum + 1:]]
        minus = [*args[:argnum], x - step, *args[argnum + 1:]]
        columns.append((np.asarray(f(*plus)) - np.asarray(f(*minus))) / (2 * H))
    return np.stack(columns, axis=-1).reshape(out.shape + x.shape) if columns else None


def points(name):
    function, sampler, shapes, smooth = CASES[name]
    for seed, shape in enumerate(shapes):
        rng = np.random.default_rng([seed, *map(ord, name)])  # a case's own stream
        args = tuple(float(a) if shape == () else a for a in sampler(rng, shape))
        yield function, args, smooth


@pytest.mark.parametrize("name", CASES)
def test_values_are_numpys(name):
    for function, args, _ in points(name):
        want = function(*args)
        got = sd.trace(function, *args)(*args)
        assert np.shape(got) == np.shape(want)
        if name in ROUNDED:
            np.testing.assert_allclose(got, want, rtol=ROUNDED_RTOL.get(name, 1e-15), atol=0)
        else:
            np.testing.assert_array_equal(got, want)  # bit for bit, signed zeros aside


@pytest.mark.parametrize("name", CASES)
def test_first_derivatives_match_central_differences(name):
    for function, args, _ in points(name):
        for argnum in range(len(args)):
            got = sd.jacobian(function, argnums=argnum)(*args)
            want = central_jacobian(function, args, argnum)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"{name} {argnum}")


@pytest.mark.parametrize("name", [name for name, case in CASES.items() if case[3]])
def test_second_derivatives_match_differences_of_the_gradient(name):
    for function, args, _ in points(name):
        def total(*a, function=function):
            return np.sum(function(*a))

        for argnum in range(len(args)):
            got = sd.hessian(total, argnums=argnum)(*args)
            want = central_jacobian(sd.grad(total, argnums=argnum), args, argnum)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} {argnum}")


def test_jax_conventions():
    # d/db (a % b) = -floor(a / b): JAX gives (1, -2) at (0.7, 0.3); fmod truncates instead
    assert [float(g) for g in sd.grad(lambda a, b: a % b, argnums=(0, 1))(0.7, 0.3)] == [1.0, -2.0]
    assert [float(g) for g in sd.grad(lambda a, b: np.fmod(a, b), argnums=(0, 1))(-0.7, 0.3)] == [1.0, 2.0]
    # fmax at a tie shares the derivative equally, as maximum does; a nan operand is ignored
    assert [float(g) for g in sd.grad(lambda a, b: np.fmax(a, b), argnums=(0, 1))(1.0, 1.0)] == [0.5, 0.5]
    assert [float(g) for g in sd.grad(lambda a, b: np.fmin(a, b), argnums=(0, 1))(np.nan, 2.0)] == [0.0, 1.0]
    # rounding: zero derivative, also at the jumps
    assert float(sd.grad(lambda x: np.floor(x) + np.rint(x) + np.ceil(x))(2.0)) == 0.0


def test_nan_and_signed_zeros_are_numpys():
    x = np.array([-2.5, -0.5, -0.3, -0.0, 0.0, 0.5, 1.5, 2.5, np.inf, -np.inf, np.nan,
                  2.0**52 + 1, 4503599627370495.5, -1e300])
    for function in (np.rint, np.round, np.floor, np.ceil, np.trunc, np.fix):
        got = sd.trace(function, x)(x)
        np.testing.assert_array_equal(got, function(x))
        assert np.array_equal(np.signbit(got), np.signbit(function(x))), function
    a, b = np.meshgrid([np.nan, -1.0, 0.0, 2.0], [np.nan, -1.0, 0.0, 2.0])
    for function in (np.fmax, np.fmin, np.mod, np.fmod):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(sd.trace(function, a, b)(a, b), function(a, b))


def test_operators_refused_say_why_and_what_to_write():
    with pytest.raises(sd.TracingError, match=r"integer.*np\.floor\(x / y\)"):
        sd.grad(lambda x: x // 2)(3.0)
    with pytest.raises(sd.TracingError, match=r"np\.round\(x\)"):
        sd.grad(lambda x: round(x))(3.0)


def test_nan_to_num_replaces_as_numpy_and_passes_the_derivative_elsewhere():
    x = np.array([np.nan, np.inf, -np.inf, -1.5, 0.0, 2.0])
    for kwargs in ({}, {"nan": 1.0, "posinf": 5.0, "neginf": -7.0}):
        np.testing.assert_array_equal(sd.trace(lambda v, k=kwargs: np.nan_to_num(v, **k), x)(x),
                                      np.nan_to_num(x, **kwargs))
    np.testing.assert_array_equal(sd.grad(lambda v: np.sum(np.nan_to_num(v)))(x), [0, 0, 0, 1, 1, 1])


def test_cumprod_through_zeros():
    # the product rule at each step: no division by the zero
    x = np.array([2.0, 0.0, 3.0, -1.0])
    got = sd.jacobian(np.cumprod)(x)
    np.testing.assert_allclose(got, central_jacobian(np.cumprod, (x,), 0), atol=1e-8)


def test_shape_errors_are_numpys_or_name_the_call():
    with pytest.raises(sd.TracingError, match="split"):
        sd.trace(lambda x: np.split(x, 3), np.zeros(4))  # NumPy: "does not result in an equal division"
    with pytest.raises(sd.TracingError, match="dsplit.*3 or more"):
        sd.trace(lambda x: np.dsplit(x, 2), np.zeros((2, 2)))
    with pytest.raises(sd.TracingError, match="cross.*3-vectors"):
        sd.trace(lambda a, b: np.cross(a, b), np.zeros(2), np.zeros(3))
    with pytest.raises(sd.TracingError, match="diag.*1-D or 2-D"):
        sd.trace(lambda x: np.diag(x), np.zeros((2, 2, 2)))


def test_r_and_c_give_numpys_values():
    x, m = np.array([5.0, 6.0]), np.arange(6.0).reshape(2, 3)
    cases = [(lambda r, c, v: r[v, 0.0, 1:4:2], x), (lambda r, c, v: c[v, 2 * v], x),
             (lambda r, c, v: c[v, v[:, :1]], m), (lambda r, c, v: r[v, v], m),
             (lambda r, c, v: c[1.0, v[0]], x)]
    for build, value in cases:
        got = sd.trace(lambda v, b=build: b(snp.r_, snp.c_, v), value)(value)
        np.testing.assert_array_equal(got, build(np.r_, np.c_, value))


def test_numpys_reduction_of_a_list_says_what_to_write():
    with pytest.raises(sd.TracingError, match=r"traced values in a Python sequence.*snp\.mean\(\[x, y\]\)"):
        sd.grad(lambda x: np.mean([x, x + 2]))(1.0)


def test_interp_at_knots_and_outside_follows_jax():
    # the slope on the right at a knot; zero below the first and above the last
    f = lambda x: np.interp(x, [0.0, 1.0, 3.0], [0.0, 2.0, 3.0])  # noqa: E731
    assert [float(sd.grad(f)(t)) for t in (-1.0, 0.0, 1.0, 3.0, 4.0)] == [0.0, 2.0, 0.5, 0.0, 0.0]
    x = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, np.nan])
    np.testing.assert_array_equal(sd.trace(f, x)(x), f(x))


def test_sort_ties_and_nan_are_numpys_and_the_derivative_follows_the_stable_order():
    x = np.array([1.0, np.nan, -2.0, 1.0, np.nan, 0.5, -0.0, 0.0])
    np.testing.assert_array_equal(sd.trace(np.sort, x)(x), np.sort(x))
    np.testing.assert_array_equal(sd.trace(np.argsort, x)(x), np.argsort(x, kind="stable"))
    m = np.array([[1.0, 3.0, 3.0], [2.0, np.nan, 1.0], [0.0, -1.0, -1.0]])  # ties: the first; NaN wins
    for function in (np.argmax, np.argmin):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(sd.trace(lambda v, f=function, a=axis: f(v, axis=a), m)(m),
                                          function(m, axis=axis))
    # a tie: the first of two equal elements lands first, and gets the first slot's derivative
    jacobian = sd.jacobian(np.sort)(np.array([2.0, 1.0, 2.0]))
    np.testing.assert_array_equal(jacobian, np.eye(3)[[1, 0, 2]])
    # the indices have no derivative (integers, to JAX too)
    assert sd.grad(lambda v: np.sum(np.argsort(v) * v))(np.array([3.0, 1.0, 2.0])).tolist() == [1.0, 2.0, 0.0]


def test_sorting_graph_does_not_grow_with_the_axis():
    def f(v):
        return np.sum(np.sort(v) * np.cos(np.arange(v.size))) + np.median(v)

    sizes = [sd.grad(f).trace(np.zeros(n)).stats()["nodes"] for n in (4, 60)]
    assert sizes[0] == sizes[1]


def test_refusals_of_sorting_and_construction_say_why():
    with pytest.raises(sd.TracingError, match=r"partition.*kth=3 .*axis of length 3.*\[-3, 3\)"):
        sd.grad(lambda x: np.sum(np.partition(x, 3)))(np.ones(3))
    with pytest.raises(sd.TracingError, match="argpartition.*kth=1.5"):
        sd.grad(lambda x: np.sum(x[np.argpartition(x, 1.5)]))(np.ones(3))
    with pytest.raises(sd.TracingError, match=r"arange with a traced endpoint.*number of elements.*np\.linspace"):
        sd.grad(lambda x: np.sum(snp.arange(x, 4.0)))(1.0)
    with pytest.raises(sd.TracingError, match=r"np\.arange with a traced endpoint"):
        sd.grad(lambda x: np.sum(np.arange(x, 4.0)))(1.0)
    with pytest.raises(sd.TracingError, match="dtype=int64.*integer"):
        sd.grad(lambda x: np.sum(snp.array(x, dtype=np.int64)))(np.ones(2))
    with pytest.raises(sd.TracingError, match="not np.argsort's"):
        sd.grad(lambda x: np.sum(np.take_along_axis(x, x, axis=0)))(np.ones(2))
    with pytest.raises(sd.TracingError, match="indexes with a traced value"):
        sd.grad(lambda x: np.sum(x[x > 0]))(np.ones(2))


# -- sorting as two array primitives (argsort, take_along): O(n log n), any n -------------------


def _placed_back(x, w, axis):
    """The gradient of sum(sort(x, axis) * w): w put back where each sorted element came from."""
    g = np.zeros_like(x)
    np.put_along_axis(g, np.argsort(x, axis=axis, kind="stable"), w, axis=axis)
    return g


@pytest.mark.parametrize("shape, axis", [((1,), -1), ((6,), -1), ((4, 5), 0), ((4, 5), -1), ((1, 3), 0),
                                         ((3, 1), -1), ((2, 3, 4), 1)])
def test_sort_reverse_and_forward_modes_permute_the_derivative(shape, axis):
    rng = np.random.default_rng(len(shape) * 10 + axis)
    x, w, v = (rng.standard_normal(shape) for _ in range(3))

    def f(a):
        return np.sort(a, axis=axis)

    expected = _placed_back(x, w, axis)
    np.testing.assert_array_equal(sd.grad(lambda a: np.sum(f(a) * w))(x), expected)
    _, pullback = sd.vjp(f, x)
    np.testing.assert_array_equal(pullback(w)[0], expected)
    value, tangent = sd.jvp(f, (x,), (v,))
    np.testing.assert_array_equal(value, np.sort(x, axis=axis))
    np.testing.assert_array_equal(tangent, np.take_along_axis(v, np.argsort(x, axis=axis, kind="stable"), axis))
    # second order: the Hessian of sum(sort(x)**3) is diag(6 x) (a permutation is linear)
    if x.size <= 12:
        hessian = sd.hessian(lambda a: np.sum(np.sort(a.reshape(shape), axis=axis) ** 3))(x.reshape(-1))
        np.testing.assert_allclose(hessian, np.diag(6 * x.reshape(-1)), rtol=1e-14, atol=0)


#: (shape, kth, axis) of np.partition: size-1 axes, several kth at once, the flattened array.
PARTITIONS = [((1,), 0, -1), ((7,), 0, -1), ((7,), 3, -1), ((7,), -1, -1), ((14,), [0, 3, 6], -1),
              ((3, 1), 0, -1), ((4, 5), 2, 0), ((2, 6), [1, 4], 1), ((2, 3), 5, None)]


@pytest.mark.parametrize("shape, kth, axis", PARTITIONS, ids=str)
def test_partition_is_numpys_where_numpy_defines_it_and_differentiates_as_sort(shape, kth, axis):
    rng = np.random.default_rng(sum(shape))
    x, v = rng.standard_normal(shape), rng.standard_normal(shape)

    def f(a):
        return np.partition(a, kth, axis=axis)

    value, tangent = sd.jvp(f, (x,), (v,))
    numpys = np.partition(x, kth, axis=axis)
    along = -1 if axis is None else axis
    at_kth = np.atleast_1d(kth)
    np.testing.assert_array_equal(np.take(value, at_kth, along), np.take(numpys, at_kth, along))
    np.testing.assert_array_equal(value, np.sort(x, axis=axis))  # the other places: sort's
    central = (f(x + H * v) - f(x - H * v)) / (2 * H)   # in NumPy's own arrangement
    np.testing.assert_allclose(np.take(tangent, at_kth, along), np.take(central, at_kth, along),
                               rtol=1e-6, atol=1e-8)
    flat_v = v.reshape(-1) if axis is None else v
    order = np.argsort(x.reshape(-1) if axis is None else x, axis=along, kind="stable")
    np.testing.assert_array_equal(tangent, np.take_along_axis(flat_v, order, along))
    w = rng.standard_normal(value.shape)
    flat = x.reshape(-1) if axis is None else x
    gradient = sd.grad(lambda a: np.sum(f(a) * w))(x)
    np.testing.assert_array_equal(gradient.reshape(flat.shape), _placed_back(flat, w, along))
    indices = sd.trace(lambda a: np.argpartition(a, kth, axis=axis), x)(x)
    np.testing.assert_array_equal(indices, np.argsort(x, axis=axis, kind="stable"))


def test_partition_past_numpys_sorting_size_is_still_a_partition():
    # At 500 elements NumPy's introselect leaves the sides unordered; symad's sides are
    # sorted: the same kth elements, the same elements on each side.
    x = np.random.default_rng(5).standard_normal(500)
    for kth in (0, 17, 250, 499):
        traced = sd.trace(lambda a, k=kth: np.partition(a, k), x)(x)
        numpys = np.partition(x, kth)
        assert traced[kth] == numpys[kth]
        assert set(traced[:kth]) == set(numpys[:kth]) and set(traced[kth:]) == set(numpys[kth:])
    assert not np.array_equal(np.partition(x, 250), np.sort(x))  # so this case means something


def test_sort_under_vmap_sorts_each_row_and_differentiates_per_row():
    X = np.random.default_rng(3).standard_normal((5, 7))
    np.testing.assert_array_equal(sd.vmap(np.sort)(X), np.sort(X, axis=-1))
    w = np.arange(7.0)
    grads = sd.vmap(sd.grad(lambda x: np.sum(np.sort(x) * w)))(X)
    np.testing.assert_array_equal(grads, _placed_back(X, np.broadcast_to(w, X.shape), -1))


def test_a_gather_at_repeated_traced_indices_adds_their_cotangents():
    x = np.array([3.0, -1.0, 2.0, 5.0])
    f = lambda v: np.sum(v[np.argsort(v)[np.zeros(3, dtype=int)]] * np.array([1.0, 2.0, 4.0]))  # noqa: E731
    assert sd.trace(f, x)(x) == 7 * -1.0
    assert sd.grad(f)(x).tolist() == [0.0, 7.0, 0.0, 0.0]


def test_quantile_of_ties_and_nan_is_numpys_and_refusals_say_why():
    x = np.array([[1.0, 2.0, 2.0, -0.0, 0.0, 5.0], [np.nan, 1.0, 2.0, 3.0, 4.0, 5.0]])
    for q in (0.0, 0.1, 0.5, 0.55, 0.9, 1.0, [0.25, 0.75]):
        np.testing.assert_array_equal(sd.trace(lambda v, q=q: np.quantile(v, q, axis=1), x)(x),
                                      np.quantile(x, q, axis=1))
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        sd.trace(lambda v: np.quantile(v, 1.5), x)
    with pytest.raises(sd.TracingError, match="method='linear'"):
        sd.trace(lambda v: np.quantile(v, 0.5, method="nearest"), x)
    with pytest.raises(sd.TracingError, match="at numbers q"):
        sd.trace(lambda v: np.quantile(v, v[0, 1] / 10), x)


def test_sort_prints_as_a_gather_at_argsort():
    x = np.zeros(5)
    assert str(sd.trace(lambda v: np.sort(v), x).formula()) == "v[argsort(v)[i]]"
    assert "argsort(v)[j]" in str(sd.grad(lambda v: np.sum(np.sort(v) * np.arange(5.0))).trace(x).formula())


def test_sort_of_100000_elements_is_numpys_and_fast():
    import time

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(100_000), rng.standard_normal(100_000)
    x[::1000] = x[1]  # ties
    f = sd.trace(lambda v: np.sum(np.sort(v) * w), x)
    g = sd.grad(lambda v: np.sum(np.sort(v) * w)).trace(x)
    assert f(x) == np.sum(np.sort(x) * w)
    np.testing.assert_array_equal(g(x), _placed_back(x, w, -1))
    start = time.perf_counter()
    for _ in range(5):
        g(x)
    # the n**2 pair arrays of old would need 10**10 elements; a sort is a few ms
    assert (time.perf_counter() - start) / 5 < 0.5
