"""Products and contractions (matmul, dot, einsum, tensordot, trace, cumsum) and more
array operations (padding, shifts, differences, flips, take, tile, repeat).

Part of :mod:`symad.numpy`, which re-exports its public names.
"""

from __future__ import annotations

import builtins
import math

import numpy as _np

from symad import array_primitives as A
from symad import primitives as P
from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.graph import atom_shape, current_builder
from symad.numpy.elementwise import (
    abs,
    add,
    concrete,
    divide,
    greater,
    multiply,
    not_equal,
    subtract,
    where,
)
from symad.numpy.reductions import sum, sum_row  # noqa: A004 - snp.sum, as in the namespace
from symad.numpy.shapes import (
    active_builder,
    any_whole,
    asarray,
    broadcast_to,
    concatenate,
    moveaxis,
    ndim,
    numpy_when_concrete,
    ravel,
    reshape,
    shape,
    stack,
    traced_inputs,
    transpose,
    wrap_atom,
)
from symad.numpy.sorting import gather_along
from symad.tracer import Tracer, as_atom, as_atoms, contains_traced

#: The names symad.numpy re-exports from this family.
__all__ = [
    "matmul", "dot", "vdot", "inner", "outer", "trace", "diagonal", "cumsum", "einsum",
    "tensordot", "pad", "roll", "diff", "flip", "fliplr", "flipud", "take", "tile", "repeat",
    "tril", "triu", "diag", "rot90", "kron", "cross", "select", "nan_to_num", "cumprod",
    "gradient", "take_along_axis",
]

# ---------------------------------------------------------------------------
# Products
# ---------------------------------------------------------------------------


def _sum_of_products(builder, left_row, right_row):
    terms = [builder.record(P.mul_p, (a, b)) for a, b in zip(left_row, right_row)]
    return sum_row(builder, [t for t in terms if not (t.is_Number and t.is_zero)])


@numpy_when_concrete(_np.matmul)
def matmul(a, b):
    """Matrix product with NumPy's rules (1-D promotion, broadcast batch dimensions)."""
    if any_whole(a, b):
        return matmul_whole(a, b)
    left, right = as_atoms(a), as_atoms(b)
    if left.ndim == 0 or right.ndim == 0:
        raise TracingError(
            f"matmul: an operand is a scalar; use * for scalars (in function {traced_function_name()!r})"
        )
    squeeze_rows, squeeze_cols = left.ndim == 1, right.ndim == 1
    if squeeze_rows:
        left = left[None, :]
    if squeeze_cols:
        right = right[:, None]
    try:
        if left.shape[-1] != right.shape[-2]:
            raise ValueError(f"{left.shape[-1]} != {right.shape[-2]}")
        batch = _np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    except ValueError as error:
        raise TracingError(
            f"matmul: shapes {shape(a)} and {shape(b)} do not align ({error}) "
            f"(in function {traced_function_name()!r})"
        ) from None
    left = _np.broadcast_to(left, batch + left.shape[-2:])
    right = _np.broadcast_to(right, batch + right.shape[-2:])
    rows, cols = left.shape[-2], right.shape[-1]
    builder = current_builder()
    out = _np.empty(batch + (rows, cols), dtype=object)
    for batch_index in _np.ndindex(batch):
        left_matrix, right_matrix = left[batch_index], right[batch_index]
        for i in range(rows):
            for j in range(cols):
                out[batch_index + (i, j)] = _sum_of_products(
                    builder, left_matrix[i, :], right_matrix[:, j]
                )
    if squeeze_rows:
        out = out[..., 0, :]
    if squeeze_cols:
        out = out[..., 0]
    return Tracer(out)


@numpy_when_concrete(_np.dot)
def dot(a, b):
    """NumPy's ``dot``: scalars, vectors and matrices as ``matmul``; past two dimensions a
    sum over ``a``'s last axis and ``b``'s second to last (a 1-d ``b``: its only axis),
    shape ``a.shape[:-1] + b.shape[:-2] + b.shape[-1:]`` -- ``tensordot``, not ``matmul``'s
    broadcast batch.

    >>> import symad as sd, numpy as np
    >>> a, b = np.ones((2, 3, 4)), np.ones((5, 4, 6))
    >>> sd.trace(lambda a, b: sd.numpy.dot(a, b), a, b)(a, b).shape
    (2, 3, 5, 6)
    """
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    if ndim(a) > 2 or ndim(b) > 2:
        return tensordot(a, b, axes=([ndim(a) - 1], [builtins.max(ndim(b) - 2, 0)]))
    return matmul(a, b)


def vdot(a, b):
    """The dot product of two arrays flattened to vectors."""
    return dot(ravel(a), ravel(b))


def inner(a, b):
    """Inner product over the last axes: shape ``a.shape[:-1] + b.shape[:-1]``, as NumPy."""
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    a_shape, b_shape = shape(a), shape(b)
    rows = reshape(a, (-1, a_shape[-1]))
    columns = transpose(reshape(b, (-1, b_shape[-1])))
    return reshape(matmul(rows, columns), a_shape[:-1] + b_shape[:-1])


@numpy_when_concrete(_np.outer)
def outer(a, b):
    """Outer product of two arrays flattened to vectors."""
    if any_whole(a, b):
        return einsum_whole("i,j->ij", ravel(a), ravel(b))
    left, right = as_atoms(a).reshape(-1), as_atoms(b).reshape(-1)
    builder = current_builder()
    out = _np.empty((left.size, right.size), dtype=object)
    for i, x in enumerate(left):
        for j, y in enumerate(right):
            out[i, j] = builder.record(P.mul_p, (x, y))
    return Tracer(out)


@numpy_when_concrete(_np.trace)
def trace(x, offset=0, axis1=0, axis2=1):
    """Sum along a diagonal."""
    if any_whole(x):
        return sum(diagonal(x, offset, axis1, axis2), axis=-1)
    return sum(Tracer(_np.diagonal(as_atoms(x), offset, axis1, axis2)), axis=-1)


@numpy_when_concrete(_np.diagonal)
def diagonal(x, offset=0, axis1=0, axis2=1):
    """A diagonal of ``x``."""
    if any_whole(x):
        x_shape = shape(x)
        positions = _np.diagonal(_np.arange(math.prod(x_shape)).reshape(x_shape), offset, axis1, axis2)
        flat = as_atom(reshape(x, (-1,)))
        return wrap_atom(A.record_take(active_builder(), flat, positions, -1))
    return Tracer(_np.array(_np.diagonal(as_atoms(x), offset, axis1, axis2)))


@numpy_when_concrete(_np.cumsum)
def cumsum(x, axis=None):
    """Cumulative sum along ``axis`` (flattened when None)."""
    if axis is None:
        x, axis = ravel(x), 0
    if any_whole(x):
        axis_ = A.normalize_axes(axis, ndim(x), "cumsum")[0]
        return wrap_atom(A.record_cumsum(active_builder(), as_atom(x), axis_))
    moved = moveaxis(x, axis, -1)
    running = [moved[..., 0]]
    for k in range(1, shape(moved)[-1]):
        running.append(add(running[-1], moved[..., k]))
    return moveaxis(stack(running, axis=-1), -1, axis)


# ---------------------------------------------------------------------------
# More array operations: contractions, padding, shifts, differences
# ---------------------------------------------------------------------------


def einsum(subscripts, *operands, optimize=False):
    """Einstein summation (``np.einsum``): one contraction node per pair of operands.

    Subscripts may use ``...``, omit the output (NumPy's implicit form) or
    repeat an index within an operand (a diagonal), or come interleaved with
    the operands as lists of ints (``einsum(a, [0, 1], b, [1, 2], [0, 2])``).
    Several operands are contracted pairwise, left to right.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda w: snp.einsum("ij,j->", w, np.ones(2)))(np.ones((2, 2))).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    if not isinstance(subscripts, str):  # the interleaved form: op, [0, 1], op, [1, 2], [0, 2]
        subscripts, operands = _interleaved_einsum((subscripts, *operands))
    if not traced_inputs(*operands):
        return _np.einsum(subscripts, *[concrete(o) for o in operands], optimize=optimize)
    if not any_whole(*operands):  # element-level arrays: contract their elements
        return einsum_whole(subscripts, *[wrap_atom(as_atom(o)) for o in operands])
    return einsum_whole(subscripts, *operands)


@numpy_when_concrete(_np.tensordot)
def tensordot(a, b, axes=2):
    """``np.tensordot``: sum products over the last ``axes`` of ``a`` and the first of ``b``
    (or the two lists of axes given).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> float(sd.grad(lambda x: snp.tensordot(x, x))(np.ones((2, 2)))[0, 0])
    2.0
    """
    a_ndim, b_ndim = ndim(a), ndim(b)
    if isinstance(axes, (int, _np.integer)):
        a_axes = list(range(a_ndim - int(axes), a_ndim))
        b_axes = list(range(int(axes)))
    else:
        a_axes, b_axes = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                          [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    if len(a_axes) != len(b_axes):
        raise TracingError(f"tensordot: axes {axes!r} pair {len(a_axes)} axes with {len(b_axes)}")
    a_letters = free_letters(a_ndim)
    b_letters = list(free_letters(b_ndim, a_letters))
    for a_axis, b_axis in zip(a_axes, b_axes):
        b_letters[b_axis % b_ndim] = a_letters[a_axis % a_ndim]
    b_letters = "".join(b_letters)
    output = "".join(c for c in a_letters if c not in b_letters) + "".join(
        c for c in b_letters if c not in a_letters)
    return einsum(f"{a_letters},{b_letters}->{output}", a, b)


def _pad_widths(pad_width, x_ndim: int) -> list[tuple[int, int]]:
    widths = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.intp), (x_ndim, 2))
    if (widths < 0).any():
        raise TracingError(f"pad: negative pad width {pad_width!r}")
    return [tuple(int(w) for w in row) for row in widths]


@numpy_when_concrete(_np.pad)
def pad(x, pad_width, mode="constant", constant_values=0):
    """``np.pad`` with ``mode`` ``"constant"``, ``"edge"``, ``"reflect"``, ``"symmetric"`` or ``"wrap"``.

    A constant pad places ``x`` inside zeros (its transpose is the slice that
    takes it out again) plus the constant; the other modes gather elements of
    ``x`` by index, one axis at a time.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.pad(x, 1) * 2, np.zeros(2))(np.array([1.0, 2.0])).tolist()
    [0.0, 2.0, 4.0, 0.0]
    """
    x = asarray(x)
    x_shape = shape(x)
    widths = _pad_widths(pad_width, len(x_shape))
    if mode == "constant":
        if not _np.isscalar(constant_values) and _np.ndim(constant_values) != 0:
            raise TracingError("pad: give constant_values as one number (per-axis values are not traced)")
        out_shape = tuple(before + n + after for n, (before, after) in zip(x_shape, widths))
        index = tuple(("s", before, before + n, 1) for n, (before, _) in zip(x_shape, widths))
        placed = wrap_atom(A.record_unslice(active_builder(), as_atom(x), out_shape, index))
        if constant_values == 0:
            return placed
        border = _np.full(out_shape, float(constant_values))
        border[tuple(slice(before, before + n) for n, (before, _) in zip(x_shape, widths))] = 0.0
        return add(placed, border)
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise TracingError(f"pad: mode={mode!r} is not traced; use 'constant', 'edge', 'reflect', "
                           "'symmetric' or 'wrap'")
    for axis, (before, after) in enumerate(widths):
        if before == after == 0:
            continue
        n = x_shape[axis]
        indices = _np.pad(_np.arange(n), (before, after), mode=mode)
        x = wrap_atom(A.record_take(active_builder(), as_atom(x), indices, axis - len(x_shape)))
    return x


@numpy_when_concrete(_np.roll)
def roll(x, shift, axis=None):
    """``np.roll``: elements shifted along ``axis`` (the flattened array if None), wrapping around.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.roll(x, 1), np.zeros(3))(np.array([1.0, 2.0, 3.0])).tolist()
    [3.0, 1.0, 2.0]
    """
    x = asarray(x)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), shape(x))
    shifts = (shift,) if _np.ndim(shift) == 0 else tuple(shift)
    axes = (axis,) if _np.ndim(axis) == 0 else tuple(axis)
    for s_, a in _np.broadcast(shifts, axes):
        a = A.normalize_axes(int(a), ndim(x), "roll")[0]
        n = shape(x)[a]
        if n:
            indices = (_np.arange(n) - int(s_)) % n
            x = wrap_atom(A.record_take(active_builder(), as_atom(x), indices, a))
    return x


#: diff's "not given" (None is a value NumPy would join)
_NO_VALUE = object()


@numpy_when_concrete(_np.diff)
def diff(x, n=1, axis=-1, prepend=_NO_VALUE, append=_NO_VALUE):
    """``np.diff``: the ``n``-th differences along ``axis``, by slicing (after ``prepend`` and
    ``append`` are joined to ``x`` along it, a number standing for one slice of it).

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: np.diff(x), np.zeros(3))(np.array([1.0, 4.0, 9.0])).tolist()
    [3.0, 5.0]
    """
    x = asarray(x)
    a = A.normalize_axes(axis, ndim(x), "diff")[0] % ndim(x)
    ends = []
    for value in (prepend, append):
        if value is not _NO_VALUE:
            value = asarray(value)
            if ndim(value) == 0:
                value = broadcast_to(value, shape(x)[:a] + (1,) + shape(x)[a + 1:])
        ends.append(value)
    pieces = [piece for piece in (ends[0], x, ends[1]) if piece is not _NO_VALUE]
    if len(pieces) > 1:
        x = concatenate(pieces, axis=a)
    for _ in range(n):
        upper = [slice(None)] * ndim(x)
        lower = [slice(None)] * ndim(x)
        upper[a], lower[a] = slice(1, None), slice(None, -1)
        x = subtract(x[tuple(upper)], x[tuple(lower)])
    return x


@numpy_when_concrete(_np.flip)
def flip(x, axis=None):
    """``np.flip``: the order of elements reversed along ``axis`` (every axis if None).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda x: np.sum(snp.flip(x) * np.arange(3.0)))(np.zeros(3)).tolist()
    [2.0, 1.0, 0.0]
    """
    x = asarray(x)
    axes = A.normalize_axes(axis, ndim(x), "flip")
    index = [slice(None)] * ndim(x)
    for a in axes:
        index[a] = slice(None, None, -1)
    return x[tuple(index)]


def fliplr(x):
    """``np.fliplr``: columns reversed.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(snp.fliplr, np.zeros((1, 2)))(np.array([[1.0, 2.0]])).tolist()
    [[2.0, 1.0]]
    """
    return flip(x, 1)


def flipud(x):
    """``np.flipud``: rows reversed.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(snp.flipud, np.zeros((2, 1)))(np.array([[1.0], [2.0]])).tolist()
    [[2.0], [1.0]]
    """
    return flip(x, 0)


@numpy_when_concrete(_np.take)
def take(x, indices, axis=None):
    """``np.take``: elements at integer ``indices`` along ``axis`` (of the flattened array if None).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda x: np.sum(snp.take(x, [2, 0, 2])))(np.zeros(3)).tolist()
    [1.0, 0.0, 2.0]
    """
    x = asarray(x)
    if axis is None:
        return ravel(x)[_np.asarray(indices)]
    a = A.normalize_axes(axis, ndim(x), "take")[0]
    index = [slice(None)] * ndim(x)
    index[a] = _np.asarray(indices)
    if _np.ndim(indices) == 0:
        index[a] = int(indices)
    return x[tuple(index)]


@numpy_when_concrete(_np.tile)
def tile(x, reps):
    """``np.tile``: ``x`` repeated ``reps`` times along each axis.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.tile(x, 2), np.zeros(2))(np.array([1.0, 2.0])).tolist()
    [1.0, 2.0, 1.0, 2.0]
    """
    x = asarray(x)
    reps = (reps,) if _np.ndim(reps) == 0 else tuple(reps)
    x_shape = (1,) * (len(reps) - ndim(x)) + shape(x)
    reps = (1,) * (len(x_shape) - len(reps)) + reps
    x = reshape(x, x_shape)
    interleaved = reshape(x, tuple(v for n in x_shape for v in (1, n)))
    tiled = broadcast_to(interleaved, tuple(v for r, n in zip(reps, x_shape) for v in (r, n)))
    return reshape(tiled, tuple(r * n for r, n in zip(reps, x_shape)))


@numpy_when_concrete(_np.repeat)
def repeat(x, repeats, axis=None):
    """``np.repeat``: each element repeated ``repeats`` times along ``axis`` (flattened if None).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.repeat(x, 2), np.zeros(2))(np.array([1.0, 2.0])).tolist()
    [1.0, 1.0, 2.0, 2.0]
    """
    x = asarray(x)
    if axis is None:
        x, axis = ravel(x), 0
    a = A.normalize_axes(axis, ndim(x), "repeat")[0] % ndim(x)
    indices = _np.repeat(_np.arange(shape(x)[a]), repeats)
    return take(x, indices, axis=a)


def take_along_axis(arr, indices, axis=-1):
    """``arr``'s elements at integer ``indices`` along ``axis``, matched along the other axes
    (a gather, as ``np.take_along_axis``); ``axis=None`` takes from the flattened array.
    Traced indices (``np.argsort``'s) gather through :func:`symad.numpy.sorting.gather_along`."""
    if contains_traced(indices):
        return gather_along(arr, indices, axis)
    arr, indices = asarray(arr), _np.asarray(indices)
    if axis is None:
        arr, axis = ravel(arr), 0
    n = ndim(arr)
    a = A.normalize_axes(axis, n, "take_along_axis")[0] % n
    if indices.ndim != n:
        raise TracingError(f"take_along_axis in function {traced_function_name()!r}: the "
                           f"indices need {n} dimensions, as the array, not {indices.ndim}")
    index = [_np.arange(size).reshape([-1 if d == k else 1 for d in range(n)])
             for k, size in enumerate(shape(arr))]
    index[a] = indices
    return arr[tuple(index)]


def _gradient_along(f, a: int, spacing, edge_order: int):
    """``np.gradient`` along axis ``a`` with a number ``spacing`` or coordinates (NumPy's
    formulas and order of operations: central inside, one-sided at the ends)."""
    def at(k):
        index = [slice(None)] * ndim(f)
        index[a] = k
        return f[tuple(index)]

    if _np.ndim(spacing) != 0:
        dx = _np.diff(_np.asarray(spacing, dtype=float))
        if len(dx) + 1 != shape(f)[a]:
            raise TracingError(f"gradient in function {traced_function_name()!r}: coordinates "
                               f"of {len(dx) + 1} points for an axis of {shape(f)[a]}")
        spacing = dx[0] if (dx == dx[0]).all() else spacing  # evenly spaced: as one number
    uniform = _np.ndim(spacing) == 0
    if uniform:
        inner = divide(subtract(at(slice(2, None)), at(slice(None, -2))), 2.0 * spacing)
        dx = (spacing, spacing, spacing, spacing)
    else:
        dx1, dx2 = dx[:-1], dx[1:]
        column = [-1 if d == a else 1 for d in range(ndim(f))]
        weights = [w.reshape(column) for w in (-dx2 / (dx1 * (dx1 + dx2)),
                                               (dx2 - dx1) / (dx1 * dx2), dx1 / (dx2 * (dx1 + dx2)))]
        inner = _weighted(weights, [at(slice(None, -2)), at(slice(1, -1)), at(slice(2, None))])
        dx = (dx[0], dx[1], dx[-2], dx[-1])
    if edge_order == 1:
        first = divide(subtract(at(slice(1, 2)), at(slice(0, 1))), dx[0])
        last = divide(subtract(at(slice(-1, None)), at(slice(-2, -1))), dx[3])
    else:
        first_weights, last_weights = _second_order_edges(dx, uniform)
        first = _weighted(first_weights, [at(slice(0, 1)), at(slice(1, 2)), at(slice(2, 3))])
        last = _weighted(last_weights, [at(slice(-3, -2)), at(slice(-2, -1)), at(slice(-1, None))])
    return concatenate([first, inner, last], axis=a)


def _weighted(weights, terms):
    """``w0 * t0 + w1 * t1 + w2 * t2``, summed left to right as NumPy's gradient does."""
    return add(add(multiply(weights[0], terms[0]), multiply(weights[1], terms[1])),
               multiply(weights[2], terms[2]))


def _second_order_edges(dx, uniform: bool):
    """NumPy's one-sided second-order weights at the two ends, from the end spacings."""
    if uniform:
        h = dx[0]
        return (-1.5 / h, 2. / h, -0.5 / h), (0.5 / h, -2. / h, 1.5 / h)
    d1, d2, e1, e2 = dx
    return ((-(2. * d1 + d2) / (d1 * (d1 + d2)), (d1 + d2) / (d1 * d2), -d1 / (d2 * (d1 + d2))),
            (e2 / (e1 * (e1 + e2)), -(e2 + e1) / (e1 * e2), (2. * e2 + e1) / (e2 * (e1 + e2))))


def gradient(f, *varargs, axis=None, edge_order=1):
    """``np.gradient``: finite differences of ``f`` (central inside, one-sided at the ends),
    with unit spacing, one number, or one number or coordinate array per axis.

    The spacings are numbers (not traced). A tuple, one array per axis, when there are
    several axes, as NumPy's.
    """
    f = asarray(f)
    axes = A.normalize_axes(axis, ndim(f), "gradient") if axis is not None else tuple(range(ndim(f)))
    axes = tuple(a % ndim(f) for a in axes)
    if contains_traced(varargs):
        raise TracingError(f"gradient in function {traced_function_name()!r}: the spacings "
                           "must be numbers, not traced values")
    spacings = ([1.0] * len(axes) if not varargs else list(varargs) * len(axes)
                if len(varargs) == 1 and _np.ndim(varargs[0]) == 0 else list(varargs))
    if len(spacings) != len(axes) or edge_order not in (1, 2):
        raise TracingError(f"gradient in function {traced_function_name()!r}: give one spacing "
                           "per axis (or one number), and edge_order 1 or 2")
    for a in axes:
        if shape(f)[a] < edge_order + 1:
            raise TracingError(f"gradient in function {traced_function_name()!r}: axis {a} has "
                               f"{shape(f)[a]} elements; at least edge_order + 1 are needed")
    results = [_gradient_along(f, a, s, edge_order) for a, s in zip(axes, spacings)]
    return results[0] if len(results) == 1 else tuple(results)


# ---------------------------------------------------------------------------
# Triangles, diagonals, rotations, products of blocks: compositions of the above
# ---------------------------------------------------------------------------


def _triangle(x, k: int, lower: bool):
    x = asarray(x)
    mask = _np.tri(*shape(x)[-2:], k=k if lower else k - 1, dtype=bool)
    return where(mask if lower else ~mask, x, 0.0)  # NumPy's where(mask, m, zeros(1))


def tril(m, k=0):
    """``m`` with the elements above the ``k``-th diagonal zeroed (of the last two axes)."""
    return _triangle(m, k, lower=True)


def triu(m, k=0):
    """``m`` with the elements below the ``k``-th diagonal zeroed (of the last two axes)."""
    return _triangle(m, k, lower=False)


def diag(v, k=0):
    """The ``k``-th diagonal of a 2-D ``v``; or, of a 1-D ``v``, the square array with ``v``
    on its ``k``-th diagonal and zeros elsewhere (a gather from ``v`` and one zero)."""
    v = asarray(v)
    if ndim(v) == 2:
        return diagonal(v, k)
    if ndim(v) != 1:
        raise TracingError(f"diag in function {traced_function_name()!r}: the input must be "
                           f"1-D or 2-D, not {ndim(v)}-D")
    n = shape(v)[0]
    size = n + builtins.abs(k)
    positions = _np.full((size, size), n)  # n: the zero after v
    rows = _np.arange(n) + builtins.max(-k, 0)
    positions[rows, rows + k] = _np.arange(n)
    return take(concatenate([v, _np.zeros(1)]), positions)


def rot90(m, k=1, axes=(0, 1)):
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes`` (flips and a transpose,
    as NumPy's)."""
    m = asarray(m)
    if len(axes) != 2 or axes[0] == axes[1] or builtins.abs(axes[0] - axes[1]) == ndim(m):
        raise TracingError(f"rot90 in function {traced_function_name()!r}: axes {axes} must "
                           "be two different axes")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, axes[0]), axes[1])
    order = list(range(ndim(m)))
    order[axes[0]], order[axes[1]] = order[axes[1]], order[axes[0]]
    if k == 1:
        return transpose(flip(m, axes[1]), order)
    return flip(transpose(m, order), axes[1])


def kron(a, b):
    """The Kronecker product: the blocks ``a[i, j] * b``, for any number of dimensions."""
    a, b = asarray(a), asarray(b)
    n = builtins.max(ndim(a), ndim(b))
    a_shape = (1,) * (n - ndim(a)) + shape(a)
    b_shape = (1,) * (n - ndim(b)) + shape(b)
    spread_a = reshape(a, tuple(v for size in a_shape for v in (size, 1)))
    spread_b = reshape(b, tuple(v for size in b_shape for v in (1, size)))
    return reshape(multiply(spread_a, spread_b), tuple(p * q for p, q in zip(a_shape, b_shape)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors (or the z component for 2-vectors) along the given axes.

    Vectors of 2 and 3 components together are not traced (NumPy takes the missing one as 0).
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(asarray(a), axisa, -1), moveaxis(asarray(b), axisb, -1)
    sizes = (shape(a)[-1], shape(b)[-1])
    if sizes == (2, 2):
        return subtract(multiply(a[..., 0], b[..., 1]), multiply(a[..., 1], b[..., 0]))
    if sizes != (3, 3):
        raise TracingError(f"cross in function {traced_function_name()!r}: symad traces the "
                           f"cross product of two 3-vectors or two 2-vectors, not {sizes}")
    components = [subtract(multiply(a[..., i], b[..., j]), multiply(a[..., j], b[..., i]))
                  for i, j in ((1, 2), (2, 0), (0, 1))]
    return moveaxis(stack(components, axis=-1), -1, axisc)


def select(condlist, choicelist, default=0):
    """``choicelist[i]`` where ``condlist[i]`` is the first true condition, else ``default``:
    nested :func:`where`, as NumPy fills it."""
    if len(condlist) != len(choicelist):
        raise TracingError(f"select in function {traced_function_name()!r}: condlist and "
                           "choicelist must have the same length")
    result = default
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        result = where(condition, choice, result)
    shapes = [shape(asarray(v)) for v in (*condlist, *choicelist, default)]
    return broadcast_to(asarray(result), _np.broadcast_shapes(*shapes))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """``x`` with nan, inf and -inf replaced (by 0 and the largest finite floats by default).

    The derivative is 1 at finite elements and 0 at replaced ones (as JAX's).
    """
    largest = float(_np.finfo(float).max)
    posinf = largest if posinf is None else posinf
    neginf = -largest if neginf is None else neginf
    infinite = where(greater(x, 0), posinf, neginf)
    return where(not_equal(x, x), nan, where(greater(abs(x), largest), infinite, x))


def cumprod(x, axis=None):
    """Cumulative product along ``axis`` (flattened when None): running products of slices,
    one multiplication per element along the axis, as NumPy's order.

    The derivative is the product rule at every step, exact at zeros (no division).
    """
    x = asarray(x)
    if axis is None:
        x, axis = ravel(x), 0
    moved = moveaxis(x, axis, -1)
    if shape(moved)[-1] == 0:
        return x
    running = [moved[..., 0]]
    for k in range(1, shape(moved)[-1]):
        running.append(multiply(running[-1], moved[..., k]))
    return moveaxis(stack(running, axis=-1), -1, axis)


# ---------------------------------------------------------------------------


def free_letters(count: int, taken: str = "") -> str:
    import string

    return "".join([c for c in string.ascii_letters if c not in taken][:count])


def _einsum_pair(sa: str, a, sb: str, b, keep: str):
    """``einsum(sa,sb->out)`` of two atoms, ``out`` the letters of ``keep`` they hold, in order."""
    builder = active_builder()
    a, sa = _prepare_operand(a, sa, sb + keep)
    b, sb = _prepare_operand(b, sb, sa + keep)
    # keep lists the letters later operands and the output read, repeats included (a later
    # "lli"): each kept letter once, in order of first appearance.
    out = "".join(dict.fromkeys(c for c in keep if c in sa or c in sb))
    if not sa and not sb:
        return multiply(wrap_atom(a), wrap_atom(b)), out
    if not sa or not sb:  # a scalar operand: a product, with the other's axes reordered
        other, letters = (b, sb) if not sa else (a, sa)
        product = multiply(wrap_atom(a), wrap_atom(b))
        perm = tuple(letters.index(c) for c in out)
        return wrap_atom(A.record_transpose(builder, as_atom(product), perm)), out
    return wrap_atom(A.record_einsum(builder, f"{sa},{sb}->{out}", a, b)), out


def _prepare_operand(atom, letters: str, elsewhere: str):
    """``atom`` with repeated letters reduced to their diagonal and letters used nowhere else summed."""
    builder = active_builder()
    while len(set(letters)) != len(letters):
        repeated = next(c for c in letters if letters.count(c) > 1)
        first = letters.index(repeated)
        second = letters.index(repeated, first + 1)
        atom = as_atom(diagonal(wrap_atom(atom), 0, first, second))
        letters = letters[:first] + letters[first + 1:second] + letters[second + 1:] + repeated
    summed = tuple(i - len(letters) for i, c in enumerate(letters) if c not in elsewhere)
    if summed:
        atom = A.record_reduction(builder, A.reduce_sum_p, atom, summed)
        letters = "".join(c for c in letters if c in elsewhere)
    return atom, letters


def _parse_einsum(subscripts: str, shapes: list) -> tuple[list[str], str]:
    """Explicit per-operand letters (ellipses spelled out) and the output letters."""
    text = subscripts.replace(" ", "")
    if "->" in text:
        inputs, output = text.split("->")
        explicit = True
    else:
        inputs, output, explicit = text, None, False
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise TracingError(f"einsum {subscripts!r}: {len(terms)} operand subscripts for "
                           f"{len(shapes)} operands (in function {traced_function_name()!r})")
    used = "".join(c for c in inputs + (output or "") if c.isalpha())
    ellipsis_ndim = 0
    for term, operand_shape in zip(terms, shapes):
        if "..." in term:
            ellipsis_ndim = builtins.max(ellipsis_ndim, len(operand_shape) - len(term.replace("...", "")))
    ellipsis_letters = free_letters(ellipsis_ndim, used)
    spelled = []
    for term, operand_shape in zip(terms, shapes):
        if not builtins.all(c.isalpha() or c == "." for c in term) or term.count(".") not in (0, 3):
            raise TracingError(f"einsum {subscripts!r}: the subscripts must be letters, commas, "
                               f"'...' and '->' (in function {traced_function_name()!r})")
        if "..." in term:
            count = len(operand_shape) - len(term.replace("...", ""))
            term = term.replace("...", ellipsis_letters[ellipsis_ndim - count:] if count else "")
        if len(term) != len(operand_shape):
            raise TracingError(f"einsum {subscripts!r}: subscripts {term!r} for an operand of shape "
                               f"{operand_shape} (in function {traced_function_name()!r})")
        spelled.append(term)
    if explicit:
        output = output.replace("...", ellipsis_letters)
        if not builtins.all(c.isalpha() for c in output) or len(set(output)) != len(output):
            raise TracingError(f"einsum {subscripts!r}: invalid output subscripts {output!r}")
        missing = [c for c in output if not builtins.any(c in t for t in spelled)]
        if missing:
            raise TracingError(f"einsum {subscripts!r}: output index {missing[0]!r} appears in no operand")
    else:
        joined = "".join(spelled)
        output = ellipsis_letters + "".join(sorted(c for c in set(joined) if joined.count(c) == 1
                                                   and c not in ellipsis_letters))
    sizes: dict = {}
    for term, operand_shape in zip(spelled, shapes):
        for c, n in zip(term, operand_shape):
            known = sizes.setdefault(c, n)
            if known == 1:  # NumPy broadcasts an index of size 1 against the other operands'
                sizes[c] = n
            elif known != n and n != 1:
                raise TracingError(f"einsum {subscripts!r}: index {c!r} has sizes {sizes[c]} and {n} "
                                   f"in operands of shapes {shapes} (in function {traced_function_name()!r})")
    return spelled, output


def _interleaved_einsum(arguments: tuple) -> tuple[str, tuple]:
    """NumPy's interleaved einsum arguments as a subscript string and the operands."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def term(sublist) -> str:
        try:
            return "".join("..." if entry is Ellipsis else letters[int(entry)] for entry in sublist)
        except (TypeError, ValueError, IndexError):
            raise TracingError(
                f"einsum: the interleaved form takes lists of ints below {len(letters)} (or ...) "
                f"after each operand, got {sublist!r} (in function {traced_function_name()!r})"
            ) from None

    operands = arguments[0::2][: len(arguments) // 2]
    terms = [term(sublist) for sublist in arguments[1::2]]
    output = "->" + term(arguments[-1]) if len(arguments) % 2 else ""
    return ",".join(terms) + output, tuple(operands)


def einsum_whole(subscripts: str, *operands) -> Tracer:
    atoms = [as_atom(o) for o in operands]
    letters, output = _parse_einsum(subscripts, [atom_shape(a) for a in atoms])
    atoms = _broadcast_indices(letters, atoms)
    if len(atoms) == 1:
        atom, term = _prepare_operand(atoms[0], letters[0], output)
        return wrap_atom(A.record_transpose(active_builder(), atom, tuple(term.index(c) for c in output)))
    value, term = wrap_atom(atoms[0]), letters[0]
    for index in range(1, len(atoms)):
        later = "".join(letters[index + 1:]) + output
        value, term = _einsum_pair(term, as_atom(value), letters[index], atoms[index], later)
    perm = tuple(term.index(c) for c in output)
    return wrap_atom(A.record_transpose(active_builder(), as_atom(value), perm))


def _broadcast_indices(letters: list[str], atoms: list) -> list:
    """The operands with each axis of size 1 broadcast to its index's size in the others
    (NumPy's einsum broadcasts them: ``einsum("i,i->i", ones(1), x)`` is ``x``)."""
    sizes: dict = {}
    for term, atom in zip(letters, atoms):
        for c, n in zip(term, atom_shape(atom)):
            sizes[c] = n if sizes.get(c, 1) == 1 else sizes[c]
    targets = [tuple(sizes[c] for c in term) for term in letters]
    return [atom if atom_shape(atom) == target else A.record_broadcast(active_builder(), atom, target)
            for atom, target in zip(atoms, targets)]


def matmul_whole(a, b) -> Tracer:
    left, right = as_atom(a), as_atom(b)
    ls, rs = atom_shape(left), atom_shape(right)
    if not ls or not rs:
        raise TracingError(
            f"matmul: an operand is a scalar; use * for scalars (in function {traced_function_name()!r})")
    if ls[-1] != rs[-2 if len(rs) > 1 else -1]:
        raise TracingError(f"matmul: shapes {ls} and {rs} do not align ({ls[-1]} != "
                           f"{rs[-2 if len(rs) > 1 else -1]}) (in function {traced_function_name()!r})")
    try:
        batch = _np.broadcast_shapes(ls[:-2], rs[:-2])
    except ValueError:
        raise TracingError(f"matmul: the batch dimensions of shapes {ls} and {rs} do not broadcast "
                           f"(in function {traced_function_name()!r})") from None
    builder = active_builder()
    batch_letters = free_letters(len(batch), "ijk")
    terms = []
    for atom, operand_shape, core in ((left, ls, "ij"), (right, rs, "jk")):
        if len(operand_shape) == 1:
            terms.append((atom, "j"))
            continue
        own = operand_shape[:-2]
        if own and tuple(own) != tuple(batch[len(batch) - len(own):]):
            atom = A.record_broadcast(builder, atom, batch[len(batch) - len(own):] + operand_shape[-2:])
        letters = batch_letters[len(batch) - len(own):] + core
        terms.append((atom, letters))
    (a_atom, sa), (b_atom, sb) = terms
    out = (batch_letters if (len(ls) > 2 or len(rs) > 2) else "")
    out = "".join(c for c in out if c in sa or c in sb)
    out += ("i" if "i" in sa else "") + ("k" if "k" in sb else "")
    return wrap_atom(A.record_einsum(builder, f"{sa},{sb}->{out}", a_atom, b_atom))


# ---------------------------------------------------------------------------
# The NumPy names this family implements (symad.numpy dispatches them here)
# ---------------------------------------------------------------------------

NUMPY_UFUNCS = {"matmul": matmul}
NUMPY_FUNCTIONS = {
    _np.dot: dot, _np.vdot: vdot, _np.inner: inner, _np.outer: outer, _np.trace: trace,
    _np.diagonal: diagonal, _np.cumsum: cumsum, _np.einsum: einsum, _np.tensordot: tensordot,
    _np.pad: pad, _np.roll: roll, _np.diff: diff, _np.flip: flip, _np.fliplr: fliplr,
    _np.flipud: flipud, _np.take: take, _np.tile: tile, _np.repeat: repeat, _np.tril: tril,
    _np.triu: triu, _np.diag: diag, _np.rot90: rot90, _np.kron: kron, _np.cross: cross,
    _np.select: select, _np.nan_to_num: nan_to_num, _np.cumprod: cumprod,
    _np.gradient: gradient, _np.take_along_axis: take_along_axis,
}
if hasattr(_np, "matmul") and not isinstance(_np.matmul, _np.ufunc):
    NUMPY_FUNCTIONS[_np.matmul] = matmul
