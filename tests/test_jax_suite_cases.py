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
    return (scale * (rng.uniform(0.2, 0.9, shape) + 1j * rng.uniform(-0.5, 0.5, shape))).astype(dtype)


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
