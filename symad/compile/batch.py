"""Batch dimensions: the leading dimensions an argument has beyond its traced core shape."""

from __future__ import annotations

from typing import Any

import numpy as np

from symad.errors import TracingError

__all__ = ["batch_shape", "numeric_argument", "common_batch"]


def batch_shape(shape: tuple, core_shape: tuple, name: str) -> tuple:
    """The leading dimensions of ``shape`` before the traced ``core_shape`` (a clear error if none fit).

    >>> batch_shape((5, 2, 3), (2, 3), "f")
    (5,)
    """
    core_rank = len(core_shape)
    if len(shape) < core_rank or tuple(shape[len(shape) - core_rank:]) != core_shape:
        raise TracingError(
            f"{name}: an argument has shape {shape}, but the function was traced with shape "
            f"{core_shape}; extra leading dimensions are a batch, the trailing ones must match"
        )
    return tuple(shape[: len(shape) - core_rank])


def single_precision(leaves: list, parameter_values: list) -> bool:
    """True if every argument is float32 or complex64 (a Parameter by its value): NumPy then
    gives single-precision results, and a complex program, computed in complex128, rounds
    its outputs to them (``to_single``).

    >>> single_precision([np.ones(2, np.complex64), np.float32(1)], [])
    True
    >>> single_precision([np.ones(2, np.complex64), 1.0], [])
    False
    """
    given = [np.asarray(getattr(leaf, "value", leaf)).dtype for leaf in leaves]
    given += [value.dtype for value in parameter_values]
    return bool(given) and all(dtype in (np.float32, np.complex64) for dtype in given)


def to_single(value: np.ndarray) -> np.ndarray:
    """``value`` as complex64 (complex) or float32 (real).

    >>> to_single(np.array([1j])).dtype, to_single(np.array([1.0])).dtype
    (dtype('complex64'), dtype('float32'))
    """
    return value.astype(np.complex64 if value.dtype.kind == "c" else np.float32)


def numeric_argument(value: Any, name: str, position: int = 0, complex: bool = False) -> np.ndarray:
    """An argument of a Function call as a NumPy array of its dtype: a Parameter's value, a
    complex array for an input traced complex (``complex``), else a real (float) array --
    or a TracingError saying what to pass.

    >>> numeric_argument(3, "f").dtype, numeric_argument(1.0, "f", complex=True).dtype
    (dtype('float64'), dtype('complex128'))
    """
    from symad.tracer import Parameter

    if isinstance(value, Parameter):
        return value.value
    array = np.asarray(value)
    if complex:
        if array.dtype.kind not in "biufc":
            raise TracingError(f"{name}: argument {position} has dtype {array.dtype}; it was traced "
                               "complex: pass complex numbers (np.asarray(value, dtype=complex))")
        return array.astype(np.complex128, copy=False)
    if array.dtype.kind == "c":
        raise TracingError(
            f"{name}: argument {position} is complex ({array.dtype}) but was traced real; trace "
            "the function with a complex example (sd.trace(f, 1j), or call the transform on "
            "complex values first) so that complex operations are recorded"
        )
    if array.dtype.kind not in "biuf":
        raise TracingError(
            f"{name}: argument {position} has dtype {array.dtype}; arguments must be real numbers "
            "or arrays of them (convert with np.asarray(value, dtype=float))"
        )
    if array.dtype.kind != "f":
        array = array.astype(np.float64)
    return array


def common_batch(batch_shapes: list, arrays: list, core_shapes: tuple, name: str) -> tuple:
    """The broadcast of the arguments' batch shapes, or a TracingError naming the clash.

    >>> common_batch([(5,), (1,)], [], ((), ()), "f")
    (5,)
    """
    try:
        return np.broadcast_shapes(*batch_shapes) if batch_shapes else ()
    except ValueError:
        described = "; ".join(
            f"argument {i} has shape {array.shape} = batch {batch} + core {core}"
            for i, (array, batch, core) in enumerate(zip(arrays, batch_shapes, core_shapes))
        )
        raise TracingError(
            f"{name}: the batch shapes of the arguments do not broadcast ({described}). Leading "
            "dimensions beyond the traced core shapes are a batch and must broadcast like NumPy "
            "arrays: give them equal sizes, or size 1 where one argument is shared"
        ) from None
