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
