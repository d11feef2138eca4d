"""numpy.fft traced: one node per transform, NumPy's values, derivatives through transposes.

Values against ``numpy.fft`` (with ``n=``/``s=``, ``axis=``/``axes=``, ``norm=``, shapes
with size-1 axes); gradients of real losses against central differences (real and
imaginary directions for complex input); exact identities (Parseval, ``ifft(fft(x)) = x``,
``irfft(rfft(x)) = x``); each transpose against its jvp under JAX's pairing; second order
(Hessians against differences of the gradient, Parseval's ``2 n I``); the graph does not
grow with the length.
"""

import numpy as np
import pytest

import symad as sd
import symad.numpy as snp
from symad.errors import TracingError

H = 1e-6
RNG = np.random.default_rng(29)


def _central_gradient(f, x):
    """Central differences; for complex x, df/dx - i df/dy (JAX's convention)."""
    x = np.asarray(x)
    grad = np.zeros(x.shape, dtype=x.dtype)
    for index in np.ndindex(x.shape):
        step = np.zeros(x.shape, dtype=x.dtype)
        step[index] = H
        grad[index] = (f(x + step) - f(x - step)) / (2 * H)
        if np.iscomplexobj(x):
            grad[index] -= 1j * (f(x + 1j * step) - f(x - 1j * step)) / (2 * H)
    return grad


#: (transform of a traced array, operand shape, operand complex?)
TRANSFORMS = {
    "fft": (lambda x: np.fft.fft(x), (5,), False),
    "fft_n_pad": (lambda x: np.fft.fft(x, n=7, norm="ortho"), (5,), True),
    "fft_n_crop_axis0": (lambda x: np.fft.fft(x, n=2, axis=0), (3, 2), False),
    "ifft": (lambda x: np.fft.ifft(x, norm="forward"), (4,), True),
    "ifft_size1_axis": (lambda x: np.fft.ifft(x, axis=0), (1, 3), True),
    "rfft_even": (lambda x: np.fft.rfft(x), (6,), False),
    "rfft_odd_n": (lambda x: np.fft.rfft(x, n=5, norm="ortho"), (6,), False),
    "rfft_axis0": (lambda x: np.fft.rfft(x, axis=0, norm="forward"), (4, 2), False),
    "irfft_default_n": (lambda x: np.fft.irfft(x), (4,), True),
    "irfft_odd_n": (lambda x: np.fft.irfft(x, n=7, norm="ortho"), (4,), True),
    "irfft_pad": (lambda x: np.fft.irfft(x, n=10, norm="forward"), (3,), True),
    "irfft_of_real": (lambda x: np.fft.irfft(x, n=6), (4,), False),
    "fft2": (lambda x: np.fft.fft2(x), (2, 3), False),
    "ifft2_s": (lambda x: np.fft.ifft2(x, s=(3, 2)), (2, 3), True),
    "fftn_default": (lambda x: np.fft.fftn(x, norm="ortho"), (2, 1, 3), True),
    "fftn_axes": (lambda x: np.fft.fftn(x, s=(4,), axes=(0,)), (3, 2), False),
    "ifftn_axes": (lambda x: np.fft.ifftn(x, axes=(-1, 0)), (2, 3), True),
    "fftshift": (lambda x: np.fft.fftshift(x), (5,), False),
    "ifftshift_axis": (lambda x: np.fft.ifftshift(x, axes=1), (2, 4), True),
    "snp_namespace": (lambda x: snp.fft.irfft(snp.fft.rfft(x) * 2j, n=4), (4,), False),
}


def _operand(shape, is_complex, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    return x + 1j * rng.normal(size=shape) if is_complex else x


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_values_are_numpy_ffts(name):
    transform, shape, is_complex = TRANSFORMS[name]
    x = _operand(shape, is_complex)
    expected = transform(x)
    got = sd.trace(transform, x)(x)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_gradient_of_a_real_loss_against_central_differences(name):
    transform, shape, is_complex = TRANSFORMS[name]
    x = _operand(shape, is_complex, seed=1)
    out_shape = np.shape(transform(x))
    w1, w2 = RNG.normal(size=out_shape), RNG.normal(size=out_shape)

    def loss(x):
        y = transform(x)
        return np.sum(w1 * np.real(y) + w2 * np.imag(y) ** 2 + np.abs(y) ** 3)

    np.testing.assert_allclose(sd.grad(loss)(x), _central_gradient(loss, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_vjp_is_the_transpose_of_the_transform(name):
    # Linear: J t is the transform of t, and Re(sum(ct * J t)) == Re(sum(J^T ct * t)).
    transform, shape, is_complex = TRANSFORMS[name]
    x, t = _operand(shape, is_complex, 2), _operand(shape, is_complex, 3)
    out = transform(x)
    ct = _operand(out.shape, np.iscomplexobj(out), 4)
    _, tangent = sd.jvp(transform, (x,), (t,))
    np.testing.assert_allclose(tangent, transform(t), rtol=1e-13, atol=1e-13)
    (ct_x,) = sd.vjp(transform, x)[1](ct)
    assert np.iscomplexobj(ct_x) == is_complex
    assert np.isclose(np.real(np.sum(ct * tangent)), np.real(np.sum(ct_x * t)), rtol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_parseval_and_inverses_exactly(n):
    x = _operand((n,), False, 5)
    z = _operand((2, n), True, 6)
    F = sd.trace(lambda x, z: (np.fft.ifft(np.fft.fft(x)), np.fft.irfft(np.fft.rfft(x), n=n),
                               np.fft.ifftn(np.fft.fftn(z)), np.sum(np.abs(np.fft.fft(x)) ** 2) / n),
                 x, z)
    back, real_back, back2, energy = F(x, z)
    np.testing.assert_allclose(back, x, atol=1e-14)
    np.testing.assert_allclose(real_back, x, atol=1e-14)
    np.testing.assert_allclose(back2, z, atol=1e-14)
    assert np.isclose(energy, np.sum(x ** 2), rtol=1e-14)
    # Parseval's gradient and Hessian: d/dx sum|fft x|^2 = 2 n x, the Hessian 2 n I.
    def spectrum_energy(x):
        return np.sum(np.abs(np.fft.fft(x)) ** 2)

    np.testing.assert_allclose(sd.grad(spectrum_energy)(x), 2 * n * x, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(sd.hessian(spectrum_energy)(x), 2 * n * np.eye(n), atol=1e-12)


def _spectral_derivative(u):
    """du/dx of samples of a 2 pi-periodic function on a uniform grid, by FFT."""
    n = u.shape[-1]
    k = np.fft.fftfreq(n, d=1.0 / n)
    return np.real(np.fft.ifft(1j * k * np.fft.fft(u)))


@pytest.mark.parametrize("n", [8, 16])
def test_gradient_of_a_spectral_derivative(n):
    grid = 2 * np.pi * np.arange(n) / n
    a = 0.3 + 0.1 * np.cos(grid)

    def dirichlet_energy(a):  # sum of (d/dx of sin(x) a(x))^2
        return np.sum(_spectral_derivative(np.sin(grid) * a) ** 2)

    assert np.isclose(sd.trace(dirichlet_energy, a)(a), dirichlet_energy(a), rtol=1e-14)
    np.testing.assert_allclose(sd.grad(dirichlet_energy)(a), _central_gradient(dirichlet_energy, a),
                               rtol=1e-6, atol=1e-7)
    exact = np.cos(grid) * 1.0  # the spectral derivative of sin on the grid is exact
    np.testing.assert_allclose(sd.trace(_spectral_derivative, grid)(np.sin(grid)), exact, atol=1e-13)


def test_convolution_through_fft_first_and_second_order():
    n = 6
    kernel = np.array([0.5, -1.0, 2.0, 0.0, 0.25, 1.0])
    def circular(x):
        return np.array([np.sum(x * np.roll(kernel[::-1], k + 1)) for k in range(n)])


    def loss(x):
        y = np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(kernel), n=n)
        return np.sum(np.tanh(y) * np.arange(1.0, n + 1))

    x = _operand((n,), False, 7)
    y = sd.trace(lambda x: np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(kernel), n=n), x)(x)
    np.testing.assert_allclose(y, circular(x), atol=1e-13)
    g = sd.grad(loss)
    np.testing.assert_allclose(g(x), _central_gradient(loss, x), rtol=1e-6, atol=1e-7)
    columns = [(g(x + H * e) - g(x - H * e)) / (2 * H) for e in np.eye(n)]
    np.testing.assert_allclose(sd.hessian(loss)(x), np.stack(columns, axis=-1), rtol=1e-5, atol=1e-6)


def test_one_node_per_transform_whatever_the_length():
    def nodes(n):
        def loss(x):
            return np.sum(np.abs(np.fft.rfft(x)) ** 2) + np.sum(np.real(np.fft.ifft(np.fft.fft(x))))

        return (sd.trace(loss, np.zeros(n)).stats()["nodes"], sd.grad(loss).trace(np.zeros(n)).stats()["nodes"])

    assert nodes(8) == nodes(64) == nodes(4096)
    F = sd.trace(lambda x: np.fft.fft(x), np.zeros(6))
    assert [node.primitive.name for node in F.graph.nodes] == ["fft"]


def test_formula_is_the_transforms_sum():
    F = sd.trace(lambda x: np.fft.fft(x), np.zeros(4))
    text = F.latex()
    assert r"\sum" in text and "i" in text and "e^{" in text


@pytest.mark.parametrize("call, error, message", [
    (lambda: sd.trace(lambda z: np.fft.rfft(z), np.ones(4) * 1j), TracingError, "rfft of a complex value"),
    (lambda: sd.trace(lambda x: np.fft.fft(x, n=0), np.ones(4)), TracingError, "invalid number of data points"),
    (lambda: sd.trace(lambda x: np.fft.fft(x, norm="unitary"), np.ones(4)), TracingError, "invalid norm"),
    (lambda: sd.trace(lambda x: np.fft.fftn(x, axes=(0, 0)), np.ones((2, 2))), TracingError, "repeated axis"),
    (lambda: sd.trace(lambda x: np.fft.fft(x), 1.0), TracingError, "0-d"),
    (lambda: sd.trace(lambda x: np.fft.hfft(x), np.ones(4)), TracingError, "hfft"),
    (lambda: sd.trace(lambda x: np.fft.rfft2(x), np.ones((2, 4))), TracingError,
     r"rfft2, which symad cannot trace. The nearest operations symad traces: np\.fft\.rfft"),
], ids=["rfft_complex", "n0", "norm", "repeated_axis", "scalar", "hfft", "rfft2_nearest"])
def test_bad_transforms_are_refused_naming_the_problem(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_concrete_arrays_go_to_numpy():
    x = np.arange(4.0)
    np.testing.assert_array_equal(snp.fft.fft(x), np.fft.fft(x))
    np.testing.assert_array_equal(snp.fft.fftshift(x), np.fft.fftshift(x))
    assert snp.fft.fftfreq(4).tolist() == np.fft.fftfreq(4).tolist()
