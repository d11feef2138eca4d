"""Batch dimensions: the leading dimensions an argument has beyond its traced core shape."""

from __future__ import annotations

from symad.errors import TracingError

__all__ = ["batch_shape"]


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
