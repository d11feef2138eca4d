"""What JAX's lax_numpy_test gradient cases needed of symad (benchmarks/foreign_jax.py).

Single-precision complex values keep their dtype (NumPy's result dtype; JAX's check_grads
compares dtypes exactly), complex ``logaddexp``/``logaddexp2`` (JAX's values, holomorphic)
and ``interp`` with traced knots or a period. Numbers are checked against NumPy's values and
central differences.
"""

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp

SHAPES = [(), (1,), (3,), (2, 1), (2, 3)]


def _complex(shape, seed, dtype=np.complex128, scale=1.0):
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.2, 0.9, shape) + 1j * rng.uniform(-0.5, 0.5, shape)
    return (scale * values).astype(dtype)


def _holomorphic_difference(f, z, direction, h=1e-6):
    """(f(z + h v) - f(z - h v)) / 2h, in complex128."""
    z, direction = np.asarray(z, np.complex128), np.asarray(direction, np.complex128)
    return (f(z + h * direction) - f(z - h * direction)) / (2 * h)


# ---------------------------------------------------------------------------
# complex64 in, complex64 out
# ---------------------------------------------------------------------------

UNARY = [(snp.arccosh, np.arccosh, 2.0), (snp.arctanh, np.arctanh, 0.5), (snp.exp, np.exp, 1.0),
         (snp.log, np.log, 1.0), (snp.sin, np.sin, 1.0)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("function, reference, scale", UNARY)
def test_complex64_keeps_its_dtype(function, reference, scale, shape):
    z = _complex(shape, 1, np.complex64, scale) + (1.2 if function is snp.arccosh else 0)
    z = z.astype(np.complex64)
    v = _complex(shape, 2, np.complex64)
    value, tangent = sd.jvp(function, (z,), (v,))
    assert np.asarray(value).dtype == np.complex64 and np.asarray(tangent).dtype == np.complex64
    np.testing.assert_allclose(value, reference(z), rtol=1e-5)
    np.testing.assert_allclose(tangent, _holomorphic_difference(reference, z, v), rtol=1e-4,
                               atol=1e-5)
    out, pullback = sd.vjp(function, z)
    (cotangent,) = pullback(np.ones_like(out))
    assert np.asarray(cotangent).dtype == np.complex64


def test_complex128_and_real_outputs_keep_theirs():
    z = _complex((3,), 3)
    assert sd.jvp(snp.exp, (z,), (z,))[1].dtype == np.complex128
    z32 = z.astype(np.complex64)
    value, tangent = sd.jvp(snp.abs, (z32,), (z32,))  # a real output of a complex64 program
    assert value.dtype == np.float32 and tangent.dtype == np.float32
    np.testing.assert_allclose(value, np.abs(z32), rtol=1e-6)


# ---------------------------------------------------------------------------
# logaddexp and logaddexp2 of complex values: JAX's values, holomorphic
# ---------------------------------------------------------------------------

LOGADDEXPS = [(snp.logaddexp, lambda a, b: np.log(np.exp(a) + np.exp(b))),
              (snp.logaddexp2, lambda a, b: np.log2(np.exp2(a) + np.exp2(b)))]
PAIRS = [((), ()), ((3,), ()), ((), (3,)), ((2, 3), (3,)), ((1,), (2, 1)), ((2, 1), (1, 3))]


@pytest.mark.parametrize("shapes", PAIRS)
@pytest.mark.parametrize("function, reference", LOGADDEXPS)
def test_complex_logaddexp_values_and_derivatives(function, reference, shapes):
    a, b = _complex(shapes[0], 4, scale=2.0), _complex(shapes[1], 5, scale=-1.5)
    np.testing.assert_allclose(function(a, b), reference(a, b), rtol=1e-12)
    da, db = _complex(shapes[0], 6), _complex(shapes[1], 7)
    value, tangent = sd.jvp(function, (a, b), (da, db))
    np.testing.assert_allclose(value, reference(a, b), rtol=1e-12)
    h = 1e-6
    expected = (reference(a + h * da, b + h * db) - reference(a - h * da, b - h * db)) / (2 * h)
    np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-8)
    out, pullback = sd.vjp(function, a, b)
    u = _complex(np.shape(out), 8)
    ga, gb = pullback(u)
    # <u, J (da, db)> = <J^T u, (da, db)>, unconjugated pairing (JAX's)
    lhs = np.sum(u * tangent)
    rhs = np.sum(ga * da) + np.sum(gb * db)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


def test_complex_logaddexp_mixes_a_real_operand():
    z = _complex((3,), 9)
    np.testing.assert_allclose(snp.logaddexp(z, 0.5), np.log(np.exp(z) + np.exp(0.5)), rtol=1e-12)
    grad = sd.grad(lambda x: snp.logaddexp(x, 0.0), holomorphic=True)(0.3 + 0.4j)
    np.testing.assert_allclose(grad, np.exp(0.3 + 0.4j) / (np.exp(0.3 + 0.4j) + 1), rtol=1e-12)


def test_real_logaddexp_is_unchanged():
    a = np.array([-800.0, 0.0, 3.0, 800.0])
    np.testing.assert_array_equal(snp.logaddexp(a, 1.0), np.logaddexp(a, 1.0))
    assert np.isfinite(sd.grad(lambda x: snp.sum(snp.logaddexp(x, 1.0)))(a)).all()
    # np.logaddexp on a traced complex value reaches the same function
    z = np.array([0.2 + 1j, -0.3j])
    np.testing.assert_allclose(sd.jvp(lambda w: np.logaddexp(w, 1.0), (z,), (np.ones(2) + 0j,))[0],
                               np.log(np.exp(z) + np.e), rtol=1e-12)


# ---------------------------------------------------------------------------
# interp with traced knots, or a period
# ---------------------------------------------------------------------------

def _knots(seed, n=6):
    rng = np.random.default_rng(seed)
    return np.sort(rng.uniform(0.0, 5.0, n)), rng.normal(size=n)


def _between_knots(xp, seed, shape):
    """Points away from the knots (where interp has kinks), some outside [xp[0], xp[-1]]."""
    x = np.random.default_rng(seed).uniform(-1.0, 6.0, shape)
    return np.where(np.min(np.abs(x[..., None] - xp), axis=-1) < 1e-3, x + 2e-3, x)


def _central_jacobian(f, point, h=1e-6):
    columns = []
    for k in range(point.size):
        step = np.zeros(point.size)
        step[k] = h
        columns.append((f(point + step.reshape(point.shape)) - f(point - step.reshape(point.shape)))
                       / (2 * h))
    return np.stack(columns, axis=-1)


INTERP_OPTIONS = [{}, {"left": -3.0, "right": 7.0}, {"period": 1.7}, {"period": -2.5}]


@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 3)])
@pytest.mark.parametrize("options", INTERP_OPTIONS)
def test_interp_with_traced_knots(options, shape):
    xp, fp = _knots(10)
    x = _between_knots(xp, 11, shape)
    if "period" in options:  # no x may sit on a knot modulo the period either
        x = _between_knots(np.mod(xp, abs(options["period"])), 11, shape)
    function = lambda knots, values: snp.interp(x, knots, values, **options)
    np.testing.assert_allclose(sd.trace(function, xp, fp)(xp, fp), np.interp(x, xp, fp, **options),
                               rtol=1e-12, atol=1e-12)
    by_knots, by_values = sd.jacobian(function, argnums=(0, 1))(xp, fp)
    np.testing.assert_allclose(
        by_knots, _central_jacobian(lambda k: np.interp(x, k, fp, **options), xp), atol=1e-6)
    np.testing.assert_allclose(
        by_values, _central_jacobian(lambda v: np.interp(x, xp, v, **options), fp), atol=1e-6)


def test_interp_with_traced_knots_in_x_too():
    xp, fp = _knots(12)
    x = _between_knots(xp, 13, (9,))
    by_x = sd.jacobian(lambda t, k: snp.interp(t, k, fp), argnums=0)(x, xp)
    expected = _central_jacobian(lambda t: np.interp(t, xp, fp), x)
    np.testing.assert_allclose(by_x, expected, atol=1e-6)
    # at a knot, the slope on its right (JAX's convention), as with knots that are numbers
    at_knot = sd.grad(lambda t, k: snp.interp(t, k, fp))(xp[2], xp)
    np.testing.assert_allclose(at_knot, (fp[3] - fp[2]) / (xp[3] - xp[2]), rtol=1e-12)


def test_interp_at_knots_nearly_together_has_finite_gradients():
    # JAX's testInterpGradNan: x and the knots the same tiny, close values
    for dtype in (np.float32, np.float64):
        z = np.exp(np.linspace(-90, -20, 200)).astype(dtype)
        for options in ({}, {"period": 0.59}):
            gradient = sd.grad(lambda w: snp.sum(snp.interp(w, w, snp.ones_like(w), **options)))(z)
            assert np.all(np.isfinite(gradient)), (dtype, options)


def test_interp_refuses_mismatched_knots_and_values():
    from symad.errors import TracingError

    with pytest.raises(TracingError, match="one value per knot"):
        sd.grad(lambda k: snp.sum(snp.interp(0.5, k, np.ones(3))))(np.arange(4.0))


# ---------------------------------------------------------------------------
# snp.sinc: numpy.sinc, in the namespace too
# ---------------------------------------------------------------------------

def test_sinc_is_in_the_namespace_and_differentiates_at_zero():
    x = np.array([-2.5, -1.0, -0.3, 0.0, 1e-9, 0.25, 3.0])
    np.testing.assert_allclose(snp.sinc(x), np.sinc(x), rtol=1e-14, atol=1e-16)
    assert "sinc" in snp.__all__
    gradient = sd.grad(lambda v: snp.sum(snp.sinc(v)))(x)
    h = 1e-6
    np.testing.assert_allclose(gradient, (np.sinc(x + h) - np.sinc(x - h)) / (2 * h), atol=1e-8)
    # JAX's testSincAtZero: the Maclaurin coefficients times k!, up to order 4
    derivative = snp.sinc
    for expected in (0.0, -np.pi**2 / 3, 0.0, np.pi**4 / 5):
        derivative = sd.grad(derivative)
        np.testing.assert_allclose(derivative(0.0), expected, atol=1e-12)
