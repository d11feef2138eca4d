"""``symad.numpy.fft``: NumPy's discrete Fourier transforms on traced arrays.

Each transform records one node (:data:`symad.array_primitives.fft_p`, ``rfft_p``,
``irfft_p``) evaluated by ``numpy.fft``; NumPy's ``n=`` and ``s=`` crop or pad the
operand with zeros first (a slice or an unslice node). The transforms are linear, and
reverse mode goes through their transposes (JAX's convention, the pairing Re(ct * t)):
``fft``'s is ``fft`` itself (its matrix is symmetric), ``rfft``'s an ``irfft`` of the
conjugated cotangent and ``irfft``'s the conjugate of an ``rfft``, each weighted per
frequency (1 or 2: how often ``irfft`` reads it) -- so spectral methods differentiate.
``fftshift``/``ifftshift`` are rolls. Inside a traced function ``np.fft.fft(x)`` lands
here too (NumPy's ``__array_function__``).

>>> import numpy as np, symad as sd
>>> energy = lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2)
>>> x = np.array([1.0, 2.0, 0.5, -1.0])
>>> bool(np.isclose(sd.trace(energy, x)(x), energy(x)))
True
"""

from __future__ import annotations

import numpy as _np

from symad import array_primitives as A
from symad.atoms import note_complex
from symad.errors import TracingError
from symad.graph import atom_shape, current_builder
from symad.numpy.products import roll
from symad.numpy.shapes import numpy_when_concrete
from symad.tracer import Tracer, as_atom, is_complex_value

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "fftshift",
           "ifftshift", "fftfreq", "rfftfreq", "NUMPY_FUNCTIONS"]

_NORMS = {None: "backward", "backward": "backward", "ortho": "ortho", "forward": "forward"}


def _norm(norm, what: str) -> str:
    if norm not in _NORMS:
        raise ValueError(f"{what}: invalid norm {norm!r}; NumPy's are None, 'backward', "
                         "'ortho' and 'forward'")
    return _NORMS[norm]


def _no_out(out, what: str) -> None:
    if out is not None:
        raise TracingError(f"{what}(..., out=...) writes into an array; a traced transform "
                           "returns a new value: drop out= and use the result")


def _operand(x, what: str):
    """The atom of a traced operand, which must have at least one axis."""
    atom = as_atom(x)
    if not atom_shape(atom):
        raise TracingError(f"{what}: the operand is 0-d; a Fourier transform needs an axis")
    return atom


def _resized(atom, size, axis: int, what: str):
    """``atom`` cropped, or padded with zeros, to ``size`` points along the negative ``axis``
    (NumPy's ``n=``); itself when ``size`` is None or its length."""
    shape = atom_shape(atom)
    if size is None or int(size) == shape[axis]:
        return atom
    size = int(size)
    if size < 1:
        raise ValueError(f"{what}: invalid number of data points ({size}) specified")
    builder = current_builder()
    if size < shape[axis]:
        return A.record_slice(builder, atom, _along(shape, axis, size))
    padded = list(shape)
    padded[axis] = size
    return A.record_unslice(builder, atom, tuple(padded), _along(padded, axis, shape[axis]))


def _along(shape, axis: int, stop: int) -> tuple:
    return tuple(("s", 0, stop if i == len(shape) + axis else length, 1)
                 for i, length in enumerate(shape))


def _record(primitive, atom, params: tuple) -> Tracer:
    note_complex()  # a transform makes complex values: nodes from here on ask about them
    return Tracer.of_atom(current_builder().record(primitive, (atom,), params))


def _axis(axis, atom, what: str) -> int:
    return A.normalize_axes(axis, len(atom_shape(atom)), what)[0]


def _transform(x, sizes, axes, norm, inverse: bool, what: str) -> Tracer:
    """fftn/ifftn over ``axes`` (None: NumPy's default) after resizing to ``sizes``."""
    atom = _operand(x, what)
    ndim = len(atom_shape(atom))
    if axes is None:
        axes = tuple(range(-len(sizes), 0)) if sizes is not None else tuple(range(-ndim, 0))
    axes = tuple(axes)
    if sizes is not None and len(sizes) != len(axes):
        raise ValueError(f"{what}: s and axes have different lengths ({len(sizes)} and {len(axes)})")
    normalized = [A.normalize_axes(a, ndim, what)[0] for a in axes]
    if len(set(normalized)) != len(normalized):
        raise TracingError(f"{what}: repeated axis in axes={axes!r}; transform once per axis")
    for k, axis in enumerate(normalized):
        atom = _resized(atom, None if sizes is None else sizes[k], axis, what)
    params = (("axes", tuple(sorted(normalized))), ("inverse", inverse), ("norm", _norm(norm, what)))
    return _record(A.fft_p, atom, params)


@numpy_when_concrete(_np.fft.fft)
def fft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.fft``: the discrete Fourier transform along ``axis`` (one node).

    >>> import numpy as np, symad as sd
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> bool(np.allclose(sd.trace(lambda x: fft(x), x)(x), np.fft.fft(x)))
    True
    """
    _no_out(out, "fft")
    return _transform(a, None if n is None else (n,), (axis,), norm, False, "fft")


@numpy_when_concrete(_np.fft.ifft)
def ifft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.ifft``: the inverse transform along ``axis`` (one node).

    >>> import numpy as np, symad as sd
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> bool(np.allclose(sd.trace(lambda x: np.fft.ifft(np.fft.fft(x)), x)(x), x))
    True
    """
    _no_out(out, "ifft")
    return _transform(a, None if n is None else (n,), (axis,), norm, True, "ifft")


@numpy_when_concrete(_np.fft.fftn)
def fftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.fftn``: the transform over ``axes`` (all by default; ``s`` resizes them).

    >>> import numpy as np, symad as sd
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> bool(np.allclose(sd.trace(lambda x: fftn(x), x)(x), np.fft.fftn(x)))
    True
    """
    _no_out(out, "fftn")
    return _transform(a, s, axes, norm, False, "fftn")


@numpy_when_concrete(_np.fft.ifftn)
def ifftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.ifftn``: the inverse transform over ``axes``.

    >>> import numpy as np, symad as sd
    >>> z = np.arange(6.0).reshape(2, 3) * 1j
    >>> bool(np.allclose(sd.trace(lambda z: ifftn(z, axes=(0,)), z)(z), np.fft.ifftn(z, axes=(0,))))
    True
    """
    _no_out(out, "ifftn")
    return _transform(a, s, axes, norm, True, "ifftn")


@numpy_when_concrete(_np.fft.fft2)
def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.fft2``: :func:`fftn` over the last two axes.

    >>> import numpy as np, symad as sd
    >>> x = np.arange(8.0).reshape(2, 4)
    >>> bool(np.allclose(sd.trace(lambda x: fft2(x, s=(2, 3)), x)(x), np.fft.fft2(x, s=(2, 3))))
    True
    """
    _no_out(out, "fft2")
    return _transform(a, s, axes, norm, False, "fft2")


@numpy_when_concrete(_np.fft.ifft2)
def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.ifft2``: :func:`ifftn` over the last two axes.

    >>> import numpy as np, symad as sd
    >>> x = np.arange(8.0).reshape(2, 4)
    >>> bool(np.allclose(sd.trace(lambda x: ifft2(fft2(x)), x)(x), x))
    True
    """
    _no_out(out, "ifft2")
    return _transform(a, s, axes, norm, True, "ifft2")


@numpy_when_concrete(_np.fft.rfft)
def rfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.rfft``: the transform of a real array, its ``n // 2 + 1`` non-negative
    frequencies (one node).

    >>> import numpy as np, symad as sd
    >>> x = np.array([1.0, 2.0, 3.0, 5.0])
    >>> bool(np.allclose(sd.trace(lambda x: rfft(x), x)(x), np.fft.rfft(x)))
    True
    """
    _no_out(out, "rfft")
    if is_complex_value(a):
        raise TracingError("rfft of a complex value: NumPy would drop the imaginary part; "
                           "use np.fft.fft for complex input, or rfft(np.real(z))")
    atom = _operand(a, "rfft")
    axis = _axis(axis, atom, "rfft")
    atom = _resized(atom, n, axis, "rfft")
    params = (("axis", axis), ("norm", _norm(norm, "rfft")))
    return _record(A.rfft_p, atom, params)


@numpy_when_concrete(_np.fft.irfft)
def irfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.irfft``: ``n`` real values (default ``2 (m - 1)``) from the ``m`` non-negative
    frequencies of a Hermitian spectrum (one node; the imaginary parts of the zero and
    Nyquist frequencies are ignored, as NumPy does).

    >>> import numpy as np, symad as sd
    >>> x = np.array([1.0, 2.0, 3.0, 5.0, -1.0])
    >>> bool(np.allclose(sd.trace(lambda x: irfft(rfft(x), n=5), x)(x), x))
    True
    """
    _no_out(out, "irfft")
    atom = _operand(a, "irfft")
    axis = _axis(axis, atom, "irfft")
    size = 2 * (atom_shape(atom)[axis] - 1) if n is None else int(n)
    if size < 1:
        raise ValueError(f"irfft: invalid number of data points ({size}) specified")
    atom = _resized(atom, size // 2 + 1, axis, "irfft")
    params = (("axis", axis), ("n", size), ("norm", _norm(norm, "irfft")))
    return _record(A.irfft_p, atom, params)


def _shifted(x, axes, sign: int):
    shape = atom_shape(as_atom(x))
    axes = tuple(range(len(shape))) if axes is None else (axes if isinstance(axes, (tuple, list))
                                                           else (axes,))
    return roll(x, tuple(sign * (shape[a] // 2) for a in axes), tuple(axes))


@numpy_when_concrete(_np.fft.fftshift)
def fftshift(x, axes=None):
    """``np.fft.fftshift``: the zero frequency moved to the centre (a roll).

    >>> import numpy as np, symad as sd
    >>> x = np.arange(5.0)
    >>> sd.trace(lambda x: fftshift(x), x)(x).tolist()
    [3.0, 4.0, 0.0, 1.0, 2.0]
    """
    return _shifted(x, axes, 1)


@numpy_when_concrete(_np.fft.ifftshift)
def ifftshift(x, axes=None):
    """``np.fft.ifftshift``: the inverse of :func:`fftshift` (a roll the other way).

    >>> import numpy as np, symad as sd
    >>> x = np.arange(5.0)
    >>> sd.trace(lambda x: ifftshift(fftshift(x)), x)(x).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    """
    return _shifted(x, axes, -1)


#: The sample frequencies depend on sizes only: NumPy's own.
fftfreq = _np.fft.fftfreq
rfftfreq = _np.fft.rfftfreq

#: NumPy's array functions -> their traceable version (np.fft.fft(x) on a traced x).
NUMPY_FUNCTIONS = {_np.fft.fft: fft, _np.fft.ifft: ifft, _np.fft.fftn: fftn,
                   _np.fft.ifftn: ifftn, _np.fft.fft2: fft2, _np.fft.ifft2: ifft2,
                   _np.fft.rfft: rfft, _np.fft.irfft: irfft, _np.fft.fftshift: fftshift,
                   _np.fft.ifftshift: ifftshift}
