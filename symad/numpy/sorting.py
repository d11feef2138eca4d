"""Sorting (``sort``, ``argsort``, ``median``) and gathers at indices computed from traced
values (``take_along_axis(x, argsort(x))``, ``x[argsort(x)]``).

Part of :mod:`symad.numpy`, which re-exports its public names.

A sort's result is a permutation of its operand that depends on the operand's values, and its
derivative permutes the tangent the same way (JAX's convention: ``d sort(x) = dx[argsort(x)]``).
A traced graph is evaluated at other points than the one it was traced at, so the permutation
cannot be fixed while tracing; it is computed by the graph itself, from comparisons:

* the **rank** of element ``j`` along the axis is the number of elements that come before it
  in sorted order -- smaller ones, and equal ones of smaller index (a stable sort, as NumPy's
  ``kind="stable"``; NaN after every number, as NumPy sorts it);
* ``sort(x)[k]`` is the sum over ``j`` of ``where(rank[j] == k, x[j], 0)``: exactly one term
  is ``x[j]``, so the values are NumPy's bit for bit, and the derivative flows through
  ``where`` to the element that lands at ``k``;
* ``argsort(x)[k]`` is the same sum of ``j``; a gather at traced indices ``i`` is the sum over
  ``j`` of ``where(i[k] == j, x[j], 0)``. Indices are traced as floats holding integers; their
  derivative is zero, as an integer's is.

No new primitive: comparisons, ``where`` and a sum, whose rules already exist, so every
transform and backend handles them. The graph has the same few nodes whatever ``n``; the cost
is the comparison of every pair along the sorted axis, ``n**2`` elements per sorted row:
the value or gradient of ``sum(sort(x) * w)`` took 0.17 / 0.41 ms at n = 100 and 55 / 56 ms
at n = 1,000 (NumPy's sort: 0.005 and 0.016 ms; 2-core box under load, 2026-11-28). Axes
past :data:`MAX_PAIRED` elements are refused rather than fill memory with ``n**2`` arrays.
"""

from __future__ import annotations

import numpy as _np

from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.numpy.elementwise import (
    add,
    concrete,
    equal,
    less,
    logical_and,
    logical_not,
    logical_or,
    multiply,
    not_equal,
    where,
)
from symad.numpy.reductions import max as _max
from symad.numpy.reductions import min as _min
from symad.numpy.reductions import sum as _sum
from symad.numpy.shapes import asarray, expand_dims, moveaxis, ndim, ravel, shape, traced_inputs
from symad.tracer import TracedIndices

#: The longest axis sorted or gathered along: its pair arrays hold 2,048**2 elements
#: (32 MB of float64 each, several at once during a gradient).
MAX_PAIRED = 2048

#: The names symad.numpy re-exports from this family.
__all__ = ["sort", "argsort", "median", "argmax", "argmin", "gather_along", "gather_first"]


def _along_last(a, axis):
    """``(x with axis last, the axis)``; ``axis=None`` sorts the flattened array."""
    a = asarray(a)
    if axis is None:
        return ravel(a), -1
    if ndim(a) == 0:
        raise TracingError(f"function {traced_function_name()!r} sorts a 0-d traced value along "
                           f"axis {axis}; NumPy needs an axis to sort along (axis=None sorts it "
                           "as one element)")
    return moveaxis(a, axis, -1), axis


def _paired(n: int, what: str) -> int:
    if n > MAX_PAIRED:
        raise TracingError(
            f"function {traced_function_name()!r} calls {what} along an axis of {n} elements: "
            f"symad traces it by comparing every pair ({n}**2 elements per row), up to "
            f"{MAX_PAIRED} elements; sort outside the traced function, or split the axis")
    return n


def _ranks(x):
    """Each element's position in the stable sorted order along the last axis (as floats)."""
    n = _paired(shape(x)[-1], "a sort")
    row, column = expand_dims(x, -1), expand_dims(x, -2)  # [..., j, i]: x_j down, x_i across
    nan_row, nan_column = not_equal(row, row), not_equal(column, column)
    # x_i before x_j: smaller, or a number before a NaN; ties (NaN with NaN) by index
    before = logical_or(less(column, row), logical_and(nan_row, logical_not(nan_column)))
    tie = logical_or(equal(column, row), logical_and(nan_row, nan_column))
    earlier = _np.tril(_np.ones((n, n), dtype=bool), -1)  # i < j
    counted = logical_or(before, logical_and(tie, earlier))
    return _sum(where(counted, 1.0, 0.0), axis=-1)


def _placed(ranks, values):
    """``out[..., k]`` = the ``values[..., j]`` whose rank is ``k`` (one term of a sum)."""
    n = shape(ranks)[-1]
    positions = _np.arange(n, dtype=float).reshape(n, 1)
    hot = equal(expand_dims(ranks, -2), positions)  # [..., k, j]
    return _sum(where(hot, expand_dims(values, -2), 0.0), axis=-1)


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's ``sort``, traced: the values in ascending order, the derivative permuted alike.

    Ties keep their order (a stable sort); NaN sorts last. ``kind`` and ``stable`` change
    nothing in the values. See the module's notes for how it is traced.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.jacobian(lambda x: snp.sort(x))(np.array([3.0, 1.0, 2.0])).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if not traced_inputs(a):
        return _np.sort(concrete(a), axis=axis, kind=kind, order=order)
    _no_order(order, "sort")
    x, axis = _along_last(a, axis)
    return moveaxis(_placed(_ranks(x), x), -1, axis)


def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """NumPy's ``argsort`` (stable), traced: the indices that sort ``a``, as floats holding
    integers, for :func:`gather_along` / ``np.take_along_axis`` / ``x[...]``; no derivative.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.argsort(x), np.zeros(3))(np.array([3.0, 1.0, 2.0])).tolist()
    [1.0, 2.0, 0.0]
    """
    if not traced_inputs(a):
        return _np.argsort(concrete(a), axis=axis, kind=kind or "stable", order=order)
    _no_order(order, "argsort")
    x, axis = _along_last(a, axis)
    positions = _placed(_ranks(x), _np.arange(shape(x)[-1], dtype=float))
    return TracedIndices.of(moveaxis(positions, -1, axis))


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """NumPy's ``median``, traced through :func:`sort`: the middle element, or the mean of the
    two middle ones (NumPy's formula); its derivative goes to them.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda x: snp.median(x))(np.array([3.0, 1.0, 2.0, 5.0])).tolist()
    [0.5, 0.0, 0.5, 0.0]
    """
    if not traced_inputs(a):
        return _np.median(concrete(a), axis=axis, keepdims=keepdims)
    if out is not None:
        raise TracingError(f"median in function {traced_function_name()!r}: out= is not traced; "
                           "use the returned value")
    x, last = _along_last(a, axis)
    n = shape(x)[-1]
    ordered = _placed(_ranks(x), x)
    middle = ordered[..., (n - 1) // 2]
    if n % 2 == 0:
        middle = multiply(add(middle, ordered[..., n // 2]), 0.5)
    if keepdims:
        full = asarray(a)
        kept = [1 if axis is None or d == axis % ndim(full) else size
                for d, size in enumerate(shape(full))]
        middle = middle.reshape(tuple(kept))
    return middle


def argmax(a, axis=None, out=None, *, keepdims=False):
    """NumPy's ``argmax``, traced: the first position of the maximum (of the first NaN, if
    any), as a float holding the integer, with no derivative; ``x[np.argmax(x)]`` gathers.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.argmax(x, axis=1), np.zeros((2, 3)))(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])).tolist()
    [1.0, 0.0]
    """
    return _arg_extreme(a, axis, out, keepdims, _np.argmax, _max)


def argmin(a, axis=None, out=None, *, keepdims=False):
    """NumPy's ``argmin``, traced as :func:`argmax` is.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> f = lambda x: x[snp.argmin(x)] * 2.0
    >>> sd.grad(f)(np.array([2.0, -1.0, 5.0])).tolist()
    [0.0, 2.0, 0.0]
    """
    return _arg_extreme(a, axis, out, keepdims, _np.argmin, _min)


def _arg_extreme(a, axis, out, keepdims, numpy_function, extreme):
    if not traced_inputs(a):
        return numpy_function(concrete(a), axis=axis, out=out, keepdims=keepdims)
    if out is not None:
        raise TracingError(f"{numpy_function.__name__} in function {traced_function_name()!r}: "
                           "out= is not traced; use the returned value")
    full = asarray(a)
    x, last = _along_last(full, axis)
    n = shape(x)[-1]
    best = extreme(x, axis=-1, keepdims=True)
    hit = logical_or(equal(x, best), not_equal(x, x))  # NaN wins, as in NumPy
    position = _min(where(hit, _np.arange(n, dtype=float), float(n)), axis=-1)
    if keepdims:
        kept = [1 if axis is None or d == axis % ndim(full) else size
                for d, size in enumerate(shape(full))]
        position = position.reshape(tuple(kept))
    return TracedIndices.of(asarray(position))


def gather_along(arr, indices, axis=-1):
    """``np.take_along_axis(arr, indices, axis)`` at traced ``indices`` (``argsort``'s): the
    derivative flows to the elements gathered, none to the indices (integers, to JAX too).

    An index that is not an integer in ``[-n, n)`` gathers 0 (NumPy would raise).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> f = lambda x: snp.gather_along(x, snp.argsort(-x))   # descending
    >>> sd.trace(f, np.zeros(3))(np.array([3.0, 1.0, 2.0])).tolist()
    [3.0, 2.0, 1.0]
    """
    _integer_positions(indices, "take_along_axis")
    arr, indices = asarray(arr), asarray(indices)
    if axis is None:
        arr, axis = ravel(arr), 0
    if ndim(indices) != ndim(arr):
        raise TracingError(f"take_along_axis in function {traced_function_name()!r}: the "
                           f"indices need {ndim(arr)} dimensions, as the array, not {ndim(indices)}")
    x, i = moveaxis(arr, axis, -1), moveaxis(indices, axis, -1)
    n = _paired(shape(x)[-1], "take_along_axis")
    i = where(less(i, 0.0), add(i, float(n)), i)  # NumPy's negative indices
    hot = equal(expand_dims(i, -1), _np.arange(n, dtype=float))  # [..., k, j]
    return moveaxis(_sum(where(hot, expand_dims(x, -2), 0.0), axis=-1), -1, axis)


def gather_first(arr, indices):
    """``arr[indices]`` at traced ``indices`` along the first axis (``x[argsort(x)]``): shape
    ``indices.shape + arr.shape[1:]``; as :func:`gather_along`, no derivative to the indices.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: x[snp.argsort(x)], np.zeros(3))(np.array([3.0, 1.0, 2.0])).tolist()
    [1.0, 2.0, 3.0]
    """
    arr, indices = asarray(arr), asarray(indices)
    n, rest = _paired(shape(arr)[0], "a gather at traced indices"), ndim(arr) - 1
    i = where(less(indices, 0.0), add(indices, float(n)), indices)
    hot = equal(expand_dims(i, -1), _np.arange(n, dtype=float))  # indices.shape + (n,)
    hot = hot.reshape(shape(hot) + (1,) * rest)
    return _sum(where(hot, arr, 0.0), axis=ndim(indices))


def _integer_positions(indices, name: str) -> None:
    if not isinstance(indices, TracedIndices):
        raise TracingError(
            f"{name} in function {traced_function_name()!r}: the indices are traced values "
            "that are not np.argsort's, so nothing says they are integers; symad gathers at "
            "numbers, or at the traced indices np.argsort returns (and their slices)")


def _no_order(order, name: str) -> None:
    if order is not None:
        raise TracingError(f"{name} in function {traced_function_name()!r}: order= sorts "
                           "structured arrays by field; traced arrays have no fields")


def partition_refusal(*args, **kwargs):
    """``np.partition`` / ``np.argpartition`` on traced values: a TracingError saying why."""
    raise TracingError(
        f"function {traced_function_name()!r} calls numpy.partition (or argpartition) on traced "
        "values, which symad does not trace: where NumPy leaves the elements other than the "
        "kth is its selection algorithm's choice, which a traced graph cannot reproduce. "
        "np.sort(x, axis) is a partition for every kth and traces (np.sort(x)[..., k] is the "
        "kth smallest)")


#: NumPy's functions this family implements (symad.numpy dispatches them here).
NUMPY_FUNCTIONS = {_np.sort: sort, _np.argsort: argsort, _np.median: median, _np.argmax: argmax,
                   _np.argmin: argmin,
                   _np.partition: partition_refusal, _np.argpartition: partition_refusal}
