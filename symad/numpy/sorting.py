"""Sorting (``sort``, ``argsort``, ``median``) and gathers at indices computed from traced
values (``take_along_axis(x, argsort(x))``, ``x[argsort(x)]``).

Part of :mod:`symad.numpy`, which re-exports its public names.

A sort's result is a permutation of its operand that depends on the operand's values, and its
derivative permutes the tangent the same way (JAX's convention: ``d sort(x) = dx[argsort(x)]``).
A traced graph is evaluated at other points than the one it was traced at, so the permutation
is computed by the graph itself, by two array primitives (:mod:`symad.array_primitives`):

* ``argsort`` -- NumPy's stable argsort along an axis (ties in order, NaN last), its positions
  held as floats holding integers (as :class:`~symad.tracer.TracedIndices` are), with no
  derivative;
* ``take_along`` -- ``np.take_along_axis(x, indices, axis)`` at indices the graph computes:
  linear in ``x`` (its tangent gathers the tangent; its transpose, ``take_along_add``,
  adds the cotangent back at the same indices, repeats summed), nothing to the indices.

``sort(x)`` is ``take_along(x, argsort(x))``; ``x[argsort(x)]`` and its slices, ``median``,
``quantile`` and ``np.take_along_axis`` at traced indices are gathers too. One node each
whatever ``n``, and NumPy's ``O(n log n)`` cost: the gradient of ``sum(sort(x) * w)`` at
n = 100,000 took 12.2 ms, NumPy's own (an argsort and a scatter) 10.4 ms (2-core box,
2026-11-28; ``benchmarks/sorting.py``).
"""

from __future__ import annotations

import builtins

import numpy as _np

from symad import array_primitives as A
from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.graph import current_builder
from symad.numpy.elementwise import (
    add,
    concrete,
    divide,
    equal,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_or,
    mod,
    multiply,
    not_equal,
    subtract,
    where,
)
from symad.numpy.elementwise import abs as _abs
from symad.numpy.reductions import max as _max
from symad.numpy.reductions import min as _min
from symad.numpy.reductions import sum as _sum
from symad.numpy.shapes import (
    asarray,
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    ndim,
    ravel,
    reshape,
    shape,
    traced_inputs,
)
from symad.tracer import TracedIndices, Tracer, as_atom, contains_traced

#: The names symad.numpy re-exports from this family.
__all__ = ["sort", "argsort", "partition", "argpartition", "median", "quantile", "percentile", "argmax",
           "argmin", "gather_along", "gather_first", "interp"]


def _sorted_axis(a, axis, name: str):
    """``(x, its negative axis)`` to sort ``a`` along; ``axis=None`` sorts the flattened array."""
    a = asarray(a)
    if axis is None:
        return ravel(a), -1
    if ndim(a) == 0:
        raise TracingError(f"function {traced_function_name()!r} calls {name} on a 0-d traced "
                           f"value along axis {axis}; NumPy needs an axis to sort along "
                           "(axis=None sorts it as one element)")
    return a, A.normalize_axes(axis, ndim(a), name)[0]


def _record(primitive, operands, params) -> Tracer:
    atoms = [as_atom(operand) for operand in operands]
    return Tracer.of_atom(current_builder().record(primitive, atoms, params))


def _argsort_along(x, axis: int) -> TracedIndices:
    """The ``argsort`` node of ``x`` along the negative ``axis``."""
    return TracedIndices.of(_record(A.argsort_p, (x,), (("axis", axis),)))


def _take_along(x, indices, axis: int) -> Tracer:
    """The ``take_along`` node: ``x`` and ``indices`` (same number of dimensions) are
    broadcast against each other off the negative ``axis`` first, as NumPy does."""
    x_shape, i_shape = list(shape(x)), list(shape(indices))
    x_shape[axis] = i_shape[axis] = 1
    common = list(_np.broadcast_shapes(tuple(x_shape), tuple(i_shape)))

    def along(size):  # the common shape, with the operand's own size along the axis
        common[axis] = size
        return tuple(common)

    x, indices = broadcast_to(x, along(shape(x)[axis])), broadcast_to(indices, along(shape(indices)[axis]))
    return _record(A.take_along_p, (x, indices), (("in_shape", shape(x)), ("axis", axis)))


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
    x, axis = _sorted_axis(a, axis, "sort")
    return _take_along(x, _argsort_along(x, axis), axis)


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
    x, axis = _sorted_axis(a, axis, "argsort")
    return _argsort_along(x, axis)


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
    x, last = _sorted_axis(a, axis, "median")
    x = moveaxis(x, last, -1)
    n = shape(x)[-1]
    ordered = _take_along(x, _argsort_along(x, -1), -1)
    middle = ordered[..., (n - 1) // 2]
    if n % 2 == 0:
        middle = multiply(add(middle, ordered[..., n // 2]), 0.5)
    if keepdims:
        full = asarray(a)
        kept = [1 if axis is None or d == axis % ndim(full) else size
                for d, size in enumerate(shape(full))]
        middle = middle.reshape(tuple(kept))
    return middle


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
             *, weights=None, interpolation=None):
    """NumPy's ``quantile`` (its default ``method="linear"``), traced through :func:`sort`: the
    two order statistics around ``q * (n - 1)`` interpolated as NumPy does (its formula, so
    its rounding); the derivative goes to those two elements. ``q`` is numbers.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda x: snp.quantile(x, 0.25))(np.array([3.0, 1.0, 2.0, 5.0, 4.0])).tolist()
    [0.0, 0.0, 1.0, 0.0, 0.0]
    """
    if not traced_inputs(a, q):
        return _np.quantile(concrete(a), q, axis=axis, method=method, keepdims=keepdims,
                            weights=weights)
    if traced_inputs(q) or out is not None or method != "linear" or weights is not None \
            or interpolation is not None:
        raise TracingError(
            f"quantile/percentile in function {traced_function_name()!r}: symad traces the "
            "quantiles of a traced array at numbers q, with NumPy's default method='linear', no "
            "out=, weights= or interpolation=; compute q outside the traced function")
    q = _np.asarray(q, dtype=float)
    if not bool(_np.all((q >= 0) & (q <= 1))):
        raise ValueError("Quantiles must be in the range [0, 1]")
    x, last = _sorted_axis(a, axis, "quantile")
    x = moveaxis(x, last, -1)
    n = shape(x)[-1]
    ordered = _take_along(x, _argsort_along(x, -1), -1)
    position = q * (n - 1)  # NumPy's virtual index for the linear method
    below = _np.clip(_np.floor(position), 0, n - 1).astype(_np.intp)
    above = _np.minimum(below + 1, n - 1)
    t = position - below
    low, high = ordered[..., below], ordered[..., above]  # shape: the other axes + q's
    step = subtract(high, low)
    value = where(t >= 0.5, subtract(high, multiply(step, 1 - t)), add(low, multiply(step, t)))
    value = where(not_equal(ordered[..., -1:], ordered[..., -1:]).reshape(
        shape(ordered)[:-1] + (1,) * q.ndim), _np.nan, value)  # a NaN makes the quantile NaN
    value = moveaxis(value, tuple(range(-q.ndim, 0)), tuple(range(q.ndim))) if q.ndim else value
    if keepdims:
        full = asarray(a)
        kept = [1 if axis is None or d == axis % ndim(full) else size
                for d, size in enumerate(shape(full))]
        value = value.reshape(q.shape + tuple(kept))
    return value


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
               *, weights=None, interpolation=None):
    """NumPy's ``percentile``: :func:`quantile` at ``q / 100``.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.percentile(x, 50.0), np.zeros(4))(np.array([4.0, 1.0, 3.0, 2.0])).item()
    2.5
    """
    if not traced_inputs(a, q):
        return _np.percentile(concrete(a), q, axis=axis, method=method, keepdims=keepdims,
                              weights=weights)
    if traced_inputs(q):
        return quantile(a, q, axis, out, method=method, keepdims=keepdims, weights=weights)  # refused
    return quantile(a, _np.true_divide(q, 100), axis, out, overwrite_input, method, keepdims,
                    weights=weights, interpolation=interpolation)


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
    x, last = _sorted_axis(full, axis, numpy_function.__name__)
    x = moveaxis(x, last, -1)
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

    An index outside ``[-n, n)`` raises IndexError when the graph is evaluated, as NumPy does.

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
    return _take_along(arr, indices, A.normalize_axes(axis, ndim(arr), "take_along_axis")[0])


def gather_first(arr, indices):
    """``arr[indices]`` at traced ``indices`` along the first axis (``x[argsort(x)]``): shape
    ``indices.shape + arr.shape[1:]``; as :func:`gather_along`, no derivative to the indices.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: x[snp.argsort(x)], np.zeros(3))(np.array([3.0, 1.0, 2.0])).tolist()
    [1.0, 2.0, 3.0]
    """
    arr, indices = asarray(arr), asarray(indices)
    rest = shape(arr)[1:]
    flat = reshape(indices, (-1,) + (1,) * len(rest))  # one row of indices per gathered element
    gathered = _take_along(arr, broadcast_to(flat, shape(flat)[:1] + rest), -ndim(arr))
    return reshape(gathered, shape(indices) + rest)


# -- interpolation: a gather when the knots are traced and a period given ------------


def interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's piecewise linear interpolation at ``x`` of the points ``(xp, fp)``; any of
    ``x``, ``xp``, ``fp``, ``left``, ``right`` may be traced, and a ``period`` given.

    With knots that are numbers: one ``where`` per interval, each the same
    ``slope * (x - xp[j]) + fp[j]`` NumPy computes. At a knot the derivative in ``x`` is the
    slope on its right (JAX's convention, from its ``searchsorted(side="right")``); below
    ``xp[0]`` and above ``xp[-1]`` it is zero. With traced knots or a period: one array
    expression over all intervals (:func:`_interp_masked`).

    >>> import symad as sd, numpy as np
    >>> [float(sd.grad(lambda x: np.interp(x, [0.0, 1.0, 3.0], [0.0, 2.0, 3.0]))(t))
    ...  for t in (0.5, 1.0, 2.0, 4.0)]
    [2.0, 0.5, 0.5, 0.0]
    >>> [float(round(g, 6)) for g in sd.grad(
    ...     lambda xp: np.interp(1.5, xp, np.array([0.0, 2.0, 3.0])))(np.array([0.0, 1.0, 3.0]))]
    [0.0, -0.375, -0.125]
    """
    if period is not None or contains_traced(xp):
        return _interp_masked(x, xp, fp, left, right, period)
    xp = _np.asarray(xp, dtype=float)
    if xp.ndim != 1 or len(xp) == 0 or builtins.len(fp) != len(xp):
        raise TracingError(f"function {traced_function_name()!r} calls interp with {len(xp)} "
                           f"knots and {builtins.len(fp)} values; give one value per knot")
    values = [fp[j] for j in range(len(xp))]
    out = where(greater(x, xp[-1]), values[-1] if right is None else right, values[-1])
    for j in range(len(xp) - 2, -1, -1):
        slope = divide(subtract(values[j + 1], values[j]), xp[j + 1] - xp[j])
        out = where(less(x, xp[j + 1]), add(multiply(slope, subtract(x, xp[j])), values[j]), out)
    out = where(less(x, xp[0]), values[0] if left is None else left, out)
    return where(not_equal(x, x), x, out)  # NaN stays NaN


#: Intervals narrower than this are steps (JAX's ``spacing(eps)`` of float64): their slope,
#: a difference over almost nothing, would overflow the derivative of the width.
_NARROW = float(_np.spacing(_np.finfo(float).eps))


def _interp_masked(x, xp, fp, left, right, period):
    """``interp`` for traced knots or a ``period``: a mask per interval (``xp[j] <= x <
    xp[j + 1]``) selects ``fp[j] + (x - xp[j]) / (xp[j + 1] - xp[j]) * (fp[j + 1] - fp[j])``,
    summed over the intervals -- one array expression, ``len(x) * len(xp)`` work. With a
    period, as NumPy: ``x`` and the knots are taken modulo it, the knots sorted (a gather
    at traced indices), one knot copied past each end, and ``left``/``right`` ignored."""
    xp, fp = asarray(xp), asarray(fp)
    if xp.ndim != 1 or xp.shape[0] == 0 or fp.shape != xp.shape:
        raise TracingError(f"function {traced_function_name()!r} calls interp with knots of shape "
                           f"{xp.shape} and values of shape {fp.shape}; give one value per knot")
    if period is not None:
        period = abs(period)
        x, xp = mod(x, period), mod(xp, period)
        order = argsort(xp)
        xp, fp = gather_along(xp, order, 0), gather_along(fp, order, 0)
        xp = concatenate([subtract(xp[-1:], period), xp, add(xp[:1], period)])
        fp = concatenate([fp[-1:], fp, fp[:1]])
        left = right = None
    low, width, rise = xp[:-1], subtract(xp[1:], xp[:-1]), subtract(fp[1:], fp[:-1])
    narrow = less_equal(_abs(width), _NARROW)
    # The double where: a narrow interval's line is built on width 1, so no 0/0 reaches
    # the derivative even though its value is not used.
    at = expand_dims(x, -1)
    line = add(fp[:-1], multiply(divide(subtract(at, low), where(narrow, 1.0, width)), rise))
    inside = logical_and(greater_equal(at, low), less(at, xp[1:]))
    out = _sum(where(inside, where(narrow, fp[:-1], line), 0.0), axis=-1)
    out = where(equal(x, xp[-1]), fp[-1], out)
    out = where(greater(x, xp[-1]), fp[-1] if right is None else right, out)
    out = where(less(x, xp[0]), fp[0] if left is None else left, out)
    return where(not_equal(x, x), x, out)  # NaN stays NaN


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


def _checked_kth(kth, size: int, name: str) -> None:
    """NumPy's checks of ``kth``: integers within the axis (a TracingError naming the bad one)."""
    for k in _np.atleast_1d(_np.asarray(kth)).reshape(-1).tolist():
        if not isinstance(k, int) or not -size <= k < size:
            raise TracingError(f"{name} in function {traced_function_name()!r}: kth={k!r} is not an "
                             f"integer within the axis of length {size}; give kth in "
                             f"[{-size}, {size})")


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """NumPy's ``partition``, traced as a full sort: the kth elements are NumPy's, and so is
    each side of them; where NumPy leaves the other elements unordered (its selection
    algorithm's choice), they come in ascending order, as ``np.sort`` puts them -- a valid
    partition for every ``kth`` at once. The derivative is sort's: the tangent permuted alike.

    >>> import symad as sd, numpy as np
    >>> F = sd.trace(lambda x: np.partition(x, 1), np.zeros(4))
    >>> F(np.array([3.0, 1.0, 4.0, 2.0])).tolist()
    [1.0, 2.0, 3.0, 4.0]
    >>> sd.grad(lambda x: np.partition(x, 1)[1])(np.array([3.0, 1.0, 4.0, 2.0])).tolist()
    [0.0, 0.0, 0.0, 1.0]
    """
    if not traced_inputs(a):
        return _np.partition(concrete(a), kth, axis=axis, kind=kind, order=order)
    _no_order(order, "partition")
    x, along = _sorted_axis(a, axis, "partition")
    _checked_kth(kth, shape(x)[along], "partition")
    return _take_along(x, _argsort_along(x, along), along)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """NumPy's ``argpartition``, traced as :func:`argsort` (see :func:`partition`): indices
    for gathers, with no derivative.

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: x[np.argpartition(x, 0)], np.zeros(3))(np.array([2.0, 3.0, 1.0])).tolist()
    [1.0, 2.0, 3.0]
    """
    if not traced_inputs(a):
        return _np.argpartition(concrete(a), kth, axis=axis, kind=kind, order=order)
    _no_order(order, "argpartition")
    x, along = _sorted_axis(a, axis, "argpartition")
    _checked_kth(kth, shape(x)[along], "argpartition")
    return _argsort_along(x, along)


#: NumPy's functions this family implements (symad.numpy dispatches them here).
NUMPY_FUNCTIONS = {_np.interp: interp, _np.sort: sort, _np.argsort: argsort, _np.median: median,
                   _np.quantile: quantile, _np.percentile: percentile, _np.argmax: argmax,
                   _np.argmin: argmin,
                   _np.partition: partition, _np.argpartition: argpartition}
