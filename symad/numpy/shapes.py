"""Array construction, shape manipulation and whole-array operations (reshape, transpose,
stack, indexing and index updates).

Part of :mod:`symad.numpy`, which re-exports its public names.
"""

from __future__ import annotations

import builtins
import functools
import math

import numpy as _np

from symad import array_primitives as A
from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.graph import atom_shape, current_builder
from symad.numpy.elementwise import add, concrete, multiply
from symad.tracer import TRACER_TYPES, Parameter, Tracer, as_atom, as_atoms, contains_traced

#: The names symad.numpy re-exports from this family.
__all__ = [
    "asarray", "array", "reshape", "transpose", "ravel", "swapaxes", "moveaxis", "expand_dims",
    "squeeze", "broadcast_to", "concatenate", "stack", "hstack", "vstack", "atleast_1d",
    "atleast_2d", "shape", "ndim", "size", "atleast_3d", "row_stack", "column_stack", "append",
    "split", "array_split", "vsplit", "hsplit", "dsplit", "rollaxis", "r_", "c_",
]

# ---------------------------------------------------------------------------
# Array construction and shape manipulation (no nodes: the object array moves)
# ---------------------------------------------------------------------------


def traced_inputs(*values) -> bool:
    return builtins.any(contains_traced(v) for v in values)


def numpy_when_concrete(numpy_function):
    """Decorate the traced version of an array function: concrete inputs go to NumPy.

    Every ``symad.numpy`` array function works on plain arrays exactly like
    its NumPy namesake; only traced inputs reach the decorated body.
    """

    def decorate(traced_version):
        @functools.wraps(traced_version)
        def function(*args, **kwargs):
            if traced_inputs(*args, *kwargs.values()):
                try:
                    return traced_version(*args, **kwargs)
                except (ValueError, IndexError) as error:  # NumPy's shape errors, on atoms
                    raise TracingError(
                        f"{traced_version.__name__} in function {traced_function_name()!r}: {error}"
                    ) from None
            return numpy_function(*concrete(args), **{k: concrete(v) for k, v in kwargs.items()})

        return function

    return decorate


def asarray(value, dtype=None, order=None, *, copy=None, device=None, like=None):
    """``value`` as an array; nested lists of traced values become one traced array.

    A traced value is returned as it is (traced arrays are never written in place, so
    ``copy`` changes nothing); a float ``dtype`` is accepted, an integer or boolean one
    refused (a TracingError: the values would be rounded and their derivative lost).
    Plain values go to NumPy's ``asarray``, keywords included.

    >>> import symad as sd, symad.numpy as snp
    >>> sd.grad(lambda x: snp.sum(snp.asarray([x, 2 * x], copy=True)))(1.5)
    np.float64(3.0)
    """
    if not contains_traced(value):
        keywords = {} if copy is None else {"copy": copy}  # NumPy 1.x's asarray has no copy
        return _np.asarray(_plain(value), dtype=dtype, order=order, **keywords)
    _float_dtype(dtype, "asarray")
    if isinstance(value, Tracer):
        return value
    if isinstance(value, Parameter):
        return value.operand()
    return stack([asarray(item) for item in value])


def array(value, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """NumPy's ``array``: as :func:`asarray`, with ``ndmin`` leading axes of size 1 added.

    >>> import symad as sd, symad.numpy as snp
    >>> sd.jacobian(lambda x: snp.array(x, copy=False, ndmin=2))(2.0)
    array([[1.]])
    """
    if not contains_traced(value):
        return _np.array(_plain(value), dtype=dtype, copy=copy, order=order, subok=subok,
                         ndmin=ndmin)
    _float_dtype(dtype, "array")
    result = asarray(value)
    missing = ndmin - ndim(result)
    return reshape(result, (1,) * missing + shape(result)) if missing > 0 else result


def _plain(value):
    """A Parameter's value (NumPy cannot read a Parameter nested in a list)."""
    if isinstance(value, Parameter):
        return value.value
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item) for item in value)
    return value


def _float_dtype(dtype, name: str) -> None:
    if dtype is not None and _np.dtype(dtype).kind not in "f":
        raise TracingError(
            f"function {traced_function_name()!r} calls np.{name} on traced values with "
            f"dtype={_np.dtype(dtype)}: symad traces real floating-point values only, and an "
            "integer or boolean cast of a traced value (a rounding, whose derivative is zero, "
            "or an index computed from traced values) is not traced. Keep the float values "
            "(np.trunc(x), np.rint(x) round them and trace), or compute the integers outside "
            "the traced function")


@numpy_when_concrete(_np.reshape)
def reshape(x, shape, order="C"):
    """Array ``x`` with a new shape."""
    if any_whole(x):
        return _whole_reshape(x, shape, order)
    return Tracer(as_atoms(x).reshape(shape, order=order))


@numpy_when_concrete(_np.transpose)
def transpose(x, axes=None):
    """Array ``x`` with its axes permuted (reversed by default)."""
    if any_whole(x):
        return _whole_transpose(x, axes)
    return Tracer(_np.transpose(as_atoms(x), axes))


def ravel(x):
    """``x`` flattened to one dimension."""
    return reshape(x, (-1,))


@numpy_when_concrete(_np.swapaxes)
def swapaxes(x, axis1, axis2):
    """``x`` with two axes interchanged."""
    if any_whole(x):
        perm = list(range(ndim(x)))
        a, b = A.normalize_axes(axis1, ndim(x), "swapaxes")[0], A.normalize_axes(axis2, ndim(x), "swapaxes")[0]
        perm[a], perm[b] = perm[b], perm[a]
        return _whole_transpose(x, perm)
    return Tracer(_np.swapaxes(as_atoms(x), axis1, axis2))


@numpy_when_concrete(_np.moveaxis)
def moveaxis(x, source, destination):
    """``x`` with axes moved to new positions."""
    if any_whole(x):
        # The axes' new order, read off NumPy's own moveaxis on a shape of distinct sizes.
        order = _np.moveaxis(A.dummy_array(tuple(range(2, ndim(x) + 2))), source, destination).shape
        return _whole_transpose(x, tuple(size - 2 for size in order))
    return Tracer(_np.moveaxis(as_atoms(x), source, destination))


@numpy_when_concrete(_np.expand_dims)
def expand_dims(x, axis):
    """``x`` with a new axis of length one."""
    if any_whole(x):
        return _whole_reshape(x, _np.expand_dims(A.dummy_array(shape(x)), axis).shape)
    return Tracer(_np.expand_dims(as_atoms(x), axis))


@numpy_when_concrete(_np.squeeze)
def squeeze(x, axis=None):
    """``x`` without axes of length one."""
    if any_whole(x):
        return _whole_reshape(x, _np.squeeze(A.dummy_array(shape(x)), axis).shape)
    return Tracer(_np.squeeze(as_atoms(x), axis))


@numpy_when_concrete(_np.broadcast_to)
def broadcast_to(x, shape):
    """``x`` broadcast to ``shape``."""
    if any_whole(x):
        target = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
        return wrap_atom(A.record_broadcast(active_builder(), as_atom(x), target))
    return Tracer(_np.array(_np.broadcast_to(as_atoms(x), shape)))


@numpy_when_concrete(_np.concatenate)
def concatenate(arrays, axis=0):
    """Join arrays along an existing axis."""
    if any_whole(*arrays):
        arrays = [ravel(a) for a in arrays] if axis is None else list(arrays)
        atoms = [as_atom(a) for a in arrays]
        first = atom_shape(atoms[0])
        if not first:
            raise TracingError("concatenate: zero-dimensional arrays cannot be concatenated")
        axis_ = A.normalize_axes(0 if axis is None else axis, len(first), "concatenate")[0]
        return wrap_atom(A.record_concatenate(active_builder(), atoms, axis_))
    return Tracer(_np.concatenate([as_atoms(a) for a in arrays], axis=axis))


@numpy_when_concrete(_np.stack)
def stack(arrays, axis=0):
    """Join arrays along a new axis."""
    arrays = list(arrays)
    if any_whole(*arrays):
        shapes = {shape(a) for a in arrays}
        if len(shapes) != 1:
            raise TracingError(f"stack: all arrays must have the same shape, got {sorted(shapes)} "
                               f"(in function {traced_function_name()!r})")
        return concatenate([expand_dims(a, axis) for a in arrays], axis=axis)
    return Tracer(_np.stack([as_atoms(a) for a in arrays], axis=axis))


def hstack(arrays, *, dtype=None, casting="same_kind"):
    """Join arrays column-wise (along axis 1, or 0 for 1-D arrays).

    ``dtype`` (a float dtype: the namespace's dispatch refuses others) and ``casting`` change
    nothing for traced values, which are real numbers.
    """
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1)


def vstack(arrays, *, dtype=None, casting="same_kind"):
    """Join arrays row-wise (``np.row_stack`` too). ``dtype`` and ``casting`` as :func:`hstack`."""
    return concatenate([atleast_2d(a) for a in arrays], axis=0)


def atleast_1d(x):
    """``x`` with at least one dimension."""
    x = asarray(x)
    return reshape(x, (1,)) if x.ndim == 0 else x


def atleast_2d(x):
    """``x`` with at least two dimensions."""
    x = atleast_1d(x)
    return reshape(x, (1,) + tuple(x.shape)) if x.ndim == 1 else x


row_stack = vstack


def atleast_3d(x):
    """``x`` with at least three dimensions: ``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` becomes
    ``(m, n, 1)``, as NumPy's."""
    x = asarray(x)
    if x.ndim == 0:
        return reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return reshape(x, (1, shape(x)[0], 1))
    return reshape(x, (*shape(x), 1)) if x.ndim == 2 else x


def column_stack(arrays):
    """Join 1-D arrays as columns (and 2-D arrays as they are) along axis 1."""
    arrays = [asarray(a) for a in arrays]
    return concatenate([reshape(a, (-1, 1)) if a.ndim < 2 else a for a in arrays], axis=1)


def append(arr, values, axis=None):
    """``values`` after ``arr`` along ``axis`` (both flattened when None), as NumPy's."""
    if axis is None:
        return concatenate([ravel(asarray(arr)), ravel(asarray(values))], axis=0)
    return concatenate([arr, values], axis=axis)


def _split(numpy_split, x, indices_or_sections, axis: int) -> list:
    """The pieces of ``x`` along ``axis``: slices, cut where ``numpy_split`` cuts an index range
    (its errors, an unequal division for ``np.split``, are NumPy's)."""
    x = asarray(x)
    a = A.normalize_axes(axis, ndim(x), "split")[0]
    pieces = numpy_split(_np.arange(shape(x)[a]), indices_or_sections)
    bounds = _np.cumsum([0] + [len(piece) for piece in pieces])
    index = [slice(None)] * ndim(x)
    parts = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        index[a] = slice(int(start), int(stop))
        parts.append(x[tuple(index)])
    return parts


@numpy_when_concrete(_np.split)
def split(x, indices_or_sections, axis=0):
    """``x`` cut into equal sections, or at the given indices, along ``axis``: a list of slices."""
    return _split(_np.split, x, indices_or_sections, axis)


@numpy_when_concrete(_np.array_split)
def array_split(x, indices_or_sections, axis=0):
    """As :func:`split`, the sections allowed to differ in size (NumPy's rule)."""
    return _split(_np.array_split, x, indices_or_sections, axis)


def _split_at_least(x, dimensions: int, axis: int, name: str, indices_or_sections) -> list:
    if ndim(x) < dimensions:
        raise TracingError(f"{name} in function {traced_function_name()!r}: it only works on "
                           f"arrays of {dimensions} or more dimensions, not {ndim(x)}")
    return split(x, indices_or_sections, axis)


def vsplit(x, indices_or_sections):
    """:func:`split` along axis 0 of an array of two or more dimensions."""
    return _split_at_least(asarray(x), 2, 0, "vsplit", indices_or_sections)


def hsplit(x, indices_or_sections):
    """:func:`split` along axis 1 (axis 0 of a 1-D array)."""
    x = asarray(x)
    return _split_at_least(x, 1, 1 if ndim(x) > 1 else 0, "hsplit", indices_or_sections)


def dsplit(x, indices_or_sections):
    """:func:`split` along axis 2 of an array of three or more dimensions."""
    return _split_at_least(asarray(x), 3, 2, "dsplit", indices_or_sections)


def rollaxis(x, axis, start=0):
    """``x`` with ``axis`` moved to before ``start`` (NumPy's older :func:`moveaxis`)."""
    x = asarray(x)
    n = ndim(x)
    axis = A.normalize_axes(axis, n, "rollaxis")[0] % n if n else 0
    start = start + n if start < 0 else start
    if not 0 <= start < n + 1:
        raise TracingError(f"rollaxis in function {traced_function_name()!r}: start {start} is "
                           f"out of bounds for an array of {n} dimensions")
    start = start - 1 if axis < start else start
    axes = [a for a in range(n) if a != axis]
    axes.insert(start, axis)
    return transpose(x, axes)


class _Concatenator:
    """``snp.r_[a, b, ...]`` and ``snp.c_[a, b, ...]``: NumPy's index-expression concatenation
    of arrays, traced values, numbers and ``start:stop:step`` ranges (no string directives).

    ``np.r_`` itself converts its items with ``np.array`` before anything can dispatch, so on
    traced values it is ``snp.r_`` (as ``autograd.numpy.r_``):

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.r_[x, 0.0, 1:3], np.zeros(2))(np.array([5.0, 6.0])).tolist()
    [5.0, 6.0, 0.0, 1.0, 2.0]
    >>> sd.trace(lambda x: snp.c_[x, 2 * x], np.zeros(2))(np.array([5.0, 6.0])).tolist()
    [[5.0, 10.0], [6.0, 12.0]]
    """

    def __init__(self, name: str, columns: bool):
        self.name, self.columns = name, columns

    def _item(self, item):
        if isinstance(item, slice):
            if isinstance(item.step, complex):  # NumPy's linspace spelling
                raise TracingError(f"snp.{self.name} takes arrays, numbers and integer ranges, "
                                   f"not {item!r}")
            item = _np.arange(item.start or 0, item.stop, item.step or 1)
        elif isinstance(item, str):
            raise TracingError(f"snp.{self.name} takes no string directives ({item!r}): write "
                               "snp.concatenate with the axis instead")
        item = asarray(item)
        if not self.columns:
            return atleast_1d(item)
        return reshape(item, shape(item) + (1,) * (2 - ndim(item))) if ndim(item) < 2 else item

    def __getitem__(self, items):
        items = items if isinstance(items, tuple) else (items,)
        return concatenate([self._item(item) for item in items], axis=-1 if self.columns else 0)


r_ = _Concatenator("r_", columns=False)
c_ = _Concatenator("c_", columns=True)


# ---------------------------------------------------------------------------
# Whole arrays: one node per operation
#
# A traced value is either one atom -- a scalar, or a whole array (an array
# argument, or any operation on one) -- or an array built element by element
# (snp.zeros filled by item assignment, snp.stack of scalars). Operations on
# whole arrays record one array primitive (symad.array_primitives) whatever the
# size; element-level arrays keep their per-element code below, as a trace of
# scalars does. An element-level array meeting a whole one is packed into one node.
# ---------------------------------------------------------------------------


def _is_whole(value) -> bool:
    """True for a whole traced array (or a Parameter array inside a trace)."""
    if isinstance(value, Parameter):
        return value.ndim > 0 and current_builder() is not None
    return type(value) in TRACER_TYPES and value.is_whole


def any_whole(*values) -> bool:
    for value in values:
        if isinstance(value, (list, tuple)):
            if any_whole(*value):
                return True
        elif _is_whole(value):
            return True
    return False


def active_builder():
    return current_builder()


def wrap_atom(atom) -> Tracer:
    return Tracer.of_atom(atom)


def _resolve_shape(size: int, new_shape, what: str = "reshape") -> tuple:
    """``new_shape`` (an int or tuple, one entry may be -1) for an array of ``size`` elements."""
    new_shape = (new_shape,) if isinstance(new_shape, (int, _np.integer)) else tuple(new_shape)
    new_shape = tuple(int(n) for n in new_shape)
    unknown = [i for i, n in enumerate(new_shape) if n == -1]
    if len(unknown) > 1 or builtins.any(n < -1 for n in new_shape):
        raise TracingError(f"{what}: invalid shape {new_shape} (in function {traced_function_name()!r})")
    if unknown:
        known = math.prod(n for n in new_shape if n != -1)
        if known == 0 or size % known:
            raise TracingError(f"{what}: cannot reshape an array of {size} elements into {new_shape} "
                               f"(in function {traced_function_name()!r})")
        new_shape = tuple(size // known if n == -1 else n for n in new_shape)
    if math.prod(new_shape) != size:
        raise TracingError(f"{what}: cannot reshape an array of {size} elements into shape {new_shape} "
                           f"(in function {traced_function_name()!r})")
    return new_shape


def _whole_reshape(x, new_shape, order="C") -> Tracer:
    atom = as_atom(x)
    size = math.prod(atom_shape(atom))
    target = _resolve_shape(size, new_shape)
    if order == "F":  # column-major: reverse the axes on both sides of a row-major reshape
        reversed_atom = A.record_transpose(active_builder(), atom, tuple(reversed(range(len(atom_shape(atom))))))
        flat = A.record_reshape(active_builder(), reversed_atom, tuple(reversed(target)))
        return wrap_atom(A.record_transpose(active_builder(), flat, tuple(reversed(range(len(target))))))
    if order not in ("C", "A", "K"):
        raise TracingError(f"reshape: order={order!r} is not traced (use 'C' or 'F')")
    return wrap_atom(A.record_reshape(active_builder(), atom, target))


def _whole_transpose(x, axes=None) -> Tracer:
    atom = as_atom(x)
    ndim = len(atom_shape(atom))
    if axes is None:
        perm = tuple(reversed(range(ndim)))
    else:
        perm = tuple(int(a) % ndim if -ndim <= a < ndim else a for a in axes)
        if sorted(perm) != list(range(ndim)):
            raise TracingError(f"transpose: axes {axes} are not a permutation of {ndim} axes "
                               f"(in function {traced_function_name()!r})")
    return wrap_atom(A.record_transpose(active_builder(), atom, perm))


def _index_items(index) -> tuple:
    return index if isinstance(index, tuple) else (index,)


def _is_basic(index: tuple) -> bool:
    return builtins.all(item is None or item is Ellipsis or isinstance(item, slice)
                        or (isinstance(item, (int, _np.integer)) and not isinstance(item, bool))
                        for item in index)


def _flat_positions(x_shape: tuple, index) -> _np.ndarray:
    """For each element ``x[index]`` selects, its flat position in ``x`` (NumPy's own indexing)."""
    positions = _np.arange(math.prod(x_shape), dtype=_np.intp).reshape(x_shape)
    try:
        return _np.asarray(positions[index])
    except (IndexError, ValueError, TypeError) as error:
        raise TracingError(f"function {traced_function_name()!r} indexes a traced array of shape "
                           f"{x_shape} with {index!r}: {error}") from None


def getitem(x, index) -> Tracer:
    """``x[index]`` of a whole traced array: a slice node for basic indices, a gather (``take``)
    of the selected flat positions for integer-array and boolean indices."""
    atom = as_atom(x)
    x_shape = atom_shape(atom)
    items = _index_items(index)
    builder = active_builder()
    if _is_basic(items):
        normalized = _normalized_index(items, x_shape, index, "indexes")
        return wrap_atom(A.record_slice(builder, atom, normalized))
    positions = _flat_positions(x_shape, index)
    flat = A.record_reshape(builder, atom, (math.prod(x_shape),))
    if positions.ndim == 0:
        return wrap_atom(A.record_slice(builder, flat, (("i", int(positions)),)))
    return wrap_atom(A.record_take(builder, flat, positions, -1))


def _normalized_index(items, x_shape: tuple, index, action: str) -> tuple:
    """``A.basic_index`` of ``items``, its IndexError or TypeError a TracingError naming the
    function, what it does (``action``: "indexes", "assigns into"...) and the index."""
    try:
        return A.basic_index(items, x_shape)
    except (IndexError, TypeError) as error:
        raise TracingError(f"function {traced_function_name()!r} {action} a traced array of "
                           f"shape {x_shape} at {index!r}: {error}") from None


def set_items(x, index, value) -> Tracer:
    """``x`` with ``x[index] = value`` (x unchanged): one scatter node for a basic index."""
    atom = as_atom(x)
    x_shape = atom_shape(atom)
    builder = active_builder()
    items = _index_items(index)
    if _is_basic(items):
        normalized = _normalized_index(items, x_shape, index, "assigns into")
        part = A.dummy_array(x_shape)[A.index_objects(normalized)].shape
        v = as_atom(value)
        try:
            _np.broadcast_shapes(atom_shape(v), part)
            if len(atom_shape(v)) > len(part):
                raise ValueError
        except ValueError:
            raise TracingError(
                f"function {traced_function_name()!r} assigns a value of shape {atom_shape(v)} to "
                f"the elements {index!r} of a traced array of shape {x_shape}, which have shape "
                f"{part}; the shapes must broadcast") from None
        params = (("in_shape", x_shape), ("index", normalized))
        return wrap_atom(builder.record(A.scatter_p, (atom, v), params))
    positions = _flat_positions(x_shape, index)
    flat_positions = positions.reshape(-1)
    values = ravel(broadcast_to(value, positions.shape))
    # Repeated positions keep their last value, as NumPy's assignment does.
    reversed_unique, first_from_end = _np.unique(flat_positions[::-1], return_index=True)
    last = len(flat_positions) - 1 - first_from_end
    size = math.prod(x_shape)
    mask = _np.ones(size)
    mask[reversed_unique] = 0.0
    kept = multiply(reshape(x, (size,)), mask)
    placed = A.record_take_add(builder, as_atom(getitem(values, last)), (size,),
                               A.ConstantArray(reversed_unique, _np.intp), -1)
    return reshape(add(kept, wrap_atom(placed)), x_shape)


def add_at(x, index, value) -> Tracer:
    """``x`` with ``value`` added at ``index``; repeated indices add up (``np.add.at``)."""
    x_shape = shape(x)
    items = _index_items(index)
    builder = active_builder()
    if _is_basic(items):
        normalized = _normalized_index(items, x_shape, index, "adds into")
        part = A.dummy_array(x_shape)[A.index_objects(normalized)].shape
        v = as_atom(broadcast_to(value, part))
        return add(x, wrap_atom(A.record_unslice(builder, v, x_shape, normalized)))
    positions = _flat_positions(x_shape, index)
    values = as_atom(ravel(broadcast_to(value, positions.shape)))
    size = math.prod(x_shape)
    placed = A.record_take_add(builder, values, (size,),
                               A.ConstantArray(positions.reshape(-1), _np.intp), -1)
    return add(x, reshape(wrap_atom(placed), x_shape))


def shape(x):
    """The shape of ``x`` (of the array a list of traced values makes, as ``snp.asarray``)."""
    if isinstance(x, (list, tuple)) and traced_inputs(x):
        x = asarray(x)
    return tuple(x.shape) if isinstance(x, (Tracer, Parameter)) else _np.shape(x)


def ndim(x):
    """The number of dimensions of ``x``."""
    return len(shape(x))


def size(x):
    """The number of elements of ``x``."""
    return math.prod(shape(x))


# ---------------------------------------------------------------------------
# The NumPy names this family implements (symad.numpy dispatches them here)
# ---------------------------------------------------------------------------

NUMPY_FUNCTIONS = {
    _np.transpose: transpose, _np.reshape: reshape, _np.ravel: ravel,
    _np.concatenate: concatenate, _np.stack: stack, _np.hstack: hstack,
    _np.vstack: vstack, _np.broadcast_to: broadcast_to, _np.expand_dims: expand_dims,
    _np.squeeze: squeeze, _np.swapaxes: swapaxes, _np.moveaxis: moveaxis, _np.shape: shape,
    _np.ndim: ndim, _np.size: size, _np.atleast_1d: atleast_1d, _np.atleast_2d: atleast_2d,
    _np.atleast_3d: atleast_3d, _np.column_stack: column_stack, _np.append: append,
    _np.split: split, _np.array_split: array_split, _np.vsplit: vsplit, _np.hsplit: hsplit,
    _np.dsplit: dsplit, _np.rollaxis: rollaxis,
}
