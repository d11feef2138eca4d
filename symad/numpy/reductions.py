"""Reductions: sum, mean, var, std, prod, max, min, logsumexp (``norm``: :mod:`symad.numpy.linalg`).

Part of :mod:`symad.numpy`, which re-exports its public names.
"""

from __future__ import annotations

import builtins
import math

import numpy as _np
import sympy

from symad import array_primitives as A
from symad import primitives as P
from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.graph import atom_shape, current_builder
from symad.numpy.creation import full
from symad.numpy.elementwise import conjugate, multiply, real, sqrt, subtract
from symad.numpy.refusals import float_dtype_only
from symad.numpy.shapes import (
    active_builder,
    any_whole,
    asarray,
    concatenate,
    moveaxis,
    ndim,
    numpy_when_concrete,
    reshape,
    shape,
    wrap_atom,
)
from symad.tracer import Tracer, as_atom, as_atoms, is_complex_value

#: The names symad.numpy re-exports from this family.
__all__ = [
    "sum", "mean", "var", "std", "prod", "max", "min", "amax", "amin", "logsumexp",
]

# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------


def _normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    normalized = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise TracingError(
                f"axis {a} is out of bounds for a traced array of dimension {ndim} "
                f"(in function {traced_function_name()!r})"
            )
        normalized.append(a % ndim)
    return tuple(normalized)


def _reduce(x, axis, keepdims, combine):
    """Reduce traced ``x`` over ``axis``, combining each row of atoms with ``combine``."""
    atoms = as_atoms(x)
    axes = _normalize_axes(axis, atoms.ndim)
    kept_axes = [a for a in range(atoms.ndim) if a not in axes]
    moved = _np.transpose(atoms, kept_axes + list(axes))
    out_shape = moved.shape[: len(kept_axes)]
    rows = moved.reshape(out_shape + (-1,))
    builder = current_builder()
    out = _np.empty(out_shape, dtype=object)
    for index in _np.ndindex(out_shape):
        out[index] = combine(builder, list(rows[index]))
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else atoms.shape[a] for a in range(atoms.ndim)))
    return Tracer(out)


def _variadic_row(primitive, empty_value=None, what: str = ""):
    """Combine a row with one variadic node (a single element is itself)."""

    def combine(builder, row):
        if not row:
            if empty_value is None:
                raise TracingError(f"{what} of an empty traced array (in function {traced_function_name()!r})")
            return empty_value
        return builder.record(primitive, row) if len(row) > 1 else row[0]

    return combine


def _prod_row(builder, row):
    # A chain of binary products: an n-ary product's partials (the product of
    # the others) would cost n**2 nodes.
    result = sympy.Integer(1)
    for atom in row:
        result = builder.record(P.mul_p, (result, atom))
    return result


sum_row = _variadic_row(P.add_p, empty_value=sympy.Integer(0))


@numpy_when_concrete(_np.sum)
def sum(x, axis=None, dtype=None, keepdims=False):  # noqa: A001
    """Sum of elements over ``axis`` (all by default)."""
    float_dtype_only({"dtype": dtype}, "sum")
    if any_whole(x):
        return reduce_whole(x, axis, keepdims, A.reduce_sum_p, "sum", empty_value=0)
    return _reduce(x, axis, keepdims, sum_row)


@numpy_when_concrete(_np.mean)
def mean(x, axis=None, dtype=None, keepdims=False):
    """Mean of elements over ``axis`` (all by default)."""
    float_dtype_only({"dtype": dtype}, "mean")
    x_shape = shape(x)
    count = math.prod(x_shape[a] for a in _normalize_axes(axis, len(x_shape)))
    if count == 0:  # NumPy's mean of nothing is nan
        if any_whole(x):
            return reduce_whole(x, axis, keepdims, A.reduce_sum_p, "mean", empty_value=sympy.nan)
        return _reduce(x, axis, keepdims, lambda builder, row: sympy.nan)
    return multiply(sum(x, axis=axis, keepdims=keepdims), sympy.Rational(1, count))


@numpy_when_concrete(_np.var)
def var(x, axis=None, dtype=None, keepdims=False, *, ddof=0):
    """Variance over ``axis``: the squared deviations from the mean over ``N - ddof``."""
    float_dtype_only({"dtype": dtype}, "var")
    deviation = subtract(x, mean(x, axis=axis, keepdims=True))
    # |d|**2, real, as NumPy's var of complex values (and JAX's: Re(d * conj(d)))
    square = (real(multiply(deviation, conjugate(deviation))) if is_complex_value(deviation)
              else multiply(deviation, deviation))
    if ddof == 0:
        return mean(square, axis=axis, keepdims=keepdims)
    x_shape = shape(x)
    count = math.prod(x_shape[a] for a in _normalize_axes(axis, len(x_shape)))
    squares = sum(square, axis=axis, keepdims=keepdims)
    # N - ddof <= 0 gives inf or nan, as NumPy's does (with a warning there).
    return multiply(squares, sympy.Rational(1, count - ddof) if count > ddof else sympy.nan)


@numpy_when_concrete(_np.std)
def std(x, axis=None, dtype=None, keepdims=False, *, ddof=0):
    """Standard deviation over ``axis`` (``ddof`` as in NumPy)."""
    return sqrt(var(x, axis=axis, dtype=dtype, keepdims=keepdims, ddof=ddof))


@numpy_when_concrete(_np.prod)
def prod(x, axis=None, dtype=None, keepdims=False):
    """Product of elements over ``axis`` (all by default)."""
    float_dtype_only({"dtype": dtype}, "prod")
    if any_whole(x):
        return prod_whole(x, axis, keepdims)
    return _reduce(x, axis, keepdims, _prod_row)


@numpy_when_concrete(_np.max)
def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis``; at ties the derivative is shared equally (as in JAX)."""
    if any_whole(x):
        return reduce_whole(x, axis, keepdims, A.amax_p, "max")
    return _reduce(x, axis, keepdims, _variadic_row(P.reduce_max_p, what="max"))


@numpy_when_concrete(_np.min)
def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis``; at ties the derivative is shared equally (as in JAX)."""
    if any_whole(x):
        return reduce_whole(x, axis, keepdims, A.amin_p, "min")
    return _reduce(x, axis, keepdims, _variadic_row(P.reduce_min_p, what="min"))


amax, amin = max, min


def _scipy_logsumexp(x, axis=None, keepdims=False):
    import scipy.special

    return scipy.special.logsumexp(x, axis=axis, keepdims=keepdims)


@numpy_when_concrete(_scipy_logsumexp)
def logsumexp(x, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis``, evaluated stably; its formula reads as written."""
    if any_whole(x):
        return reduce_whole(x, axis, keepdims, A.reduce_logsumexp_p, "logsumexp")
    return _reduce(x, axis, keepdims, _variadic_row(P.logsumexp_p, what="logsumexp"))


# ---------------------------------------------------------------------------


def reduce_whole(x, axis, keepdims, primitive, what: str, empty_value=None) -> Tracer:
    atom = as_atom(x)
    x_shape = atom_shape(atom)
    axes = A.normalize_axes(axis, len(x_shape), what)
    builder = active_builder()
    if builtins.any(x_shape[a] == 0 for a in axes):
        if empty_value is None:
            raise TracingError(f"{what} of an empty traced array over axis {axis} (in function "
                               f"{traced_function_name()!r}): the result has no value; NumPy raises too")
        kept = tuple(size for i, size in enumerate(x_shape) if i - len(x_shape) not in axes)
        empty = sympy.nan if empty_value is sympy.nan else sympy.Integer(empty_value)
        reduced = A.broadcast_atom(builder, empty, kept) if kept else empty
    else:
        reduced = A.record_reduction(builder, primitive, atom, axes)
    if keepdims:
        kept_shape = tuple(1 if i - len(x_shape) in axes else size for i, size in enumerate(x_shape))
        reduced = A.record_reshape(builder, reduced, kept_shape)
    return wrap_atom(reduced)


def prod_whole(x, axis, keepdims) -> Tracer:
    """The product over axes by halving: pairs of halves multiplied elementwise, log2(n) times.

    Exact at zeros and differentiable to every order with the rules of
    multiply (a partial ``out / x`` would be 0/0 at a zero factor).
    """
    x = asarray(x)
    axes = A.normalize_axes(axis, ndim(x), "prod")
    moved = moveaxis(x, axes, tuple(range(-len(axes), 0)))
    kept = shape(moved)[: ndim(moved) - len(axes)]
    flat = reshape(moved, kept + (-1,))
    while shape(flat)[-1] > 1:
        half = shape(flat)[-1] // 2
        paired = multiply(flat[..., :half], flat[..., half:2 * half])
        flat = concatenate([paired, flat[..., 2 * half:]], axis=-1) if shape(flat)[-1] % 2 else paired
    result = flat[..., 0] if shape(flat)[-1] == 1 else full(kept, 1.0)
    if keepdims:
        result = reshape(result, tuple(1 if i - len(shape(x)) in axes else n for i, n in enumerate(shape(x))))
    return result


# ---------------------------------------------------------------------------
# The NumPy names this family implements (symad.numpy dispatches them here)
# ---------------------------------------------------------------------------

NUMPY_FUNCTIONS = {
    _np.sum: sum, _np.mean: mean, _np.var: var, _np.std: std, _np.prod: prod, _np.max: max,
    _np.min: min, _np.amax: max, _np.amin: min,
}
#: ``ufunc.reduce`` of these NumPy ufuncs (by name) -> the traceable reduction.
UFUNC_REDUCTIONS = {"add": sum, "multiply": prod, "maximum": max, "minimum": min}
