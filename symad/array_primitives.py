"""The array primitives: one node per operation on a whole array, whatever its size.

Every scalar primitive of :mod:`symad.primitives` is *elementwise*: recorded on
operands of any shapes, it broadcasts as NumPy does and its node has the
broadcast shape. This module adds the operations that are not elementwise,
JAX-``lax``-style: a small set that ``symad.numpy``'s wide surface maps onto
(``sum``, ``@``, ``einsum``, ``reshape``, slicing, ``concatenate``, ``pad``...),
each in one stanza with its shape rule and NumPy implementation. Their
derivative rules live in the rule tables, one per transform, keyed by these
primitives: :mod:`symad.rules.transposes` (reverse mode, as JAX's transpose
rules), :mod:`symad.rules.tangents` (forward mode), :mod:`symad.rules.taylor`.

**Leading dimensions.** A primitive's parameters describe what it does to the
*trailing* ("core") dimensions of its operands; any dimensions in front of
those are carried along untouched, as a batch. Axes are negative (counted
from the end), ``einsum`` subscripts name only core indices, and an
operation that needs to know its operand's core shape keeps it
(``in_shape``). So one recorded node serves a whole batch of points at run
time (the compiler puts the points in front) and a whole basis of seeds in a
Jacobian sweep (a leading axis of seeds), with no rule written twice.

**Parameters** are hashable tuples (the builder hash-conses on them): basic
indices as tuples of items (see :func:`basic_index`), constant arrays and
integer index arrays wrapped in :class:`ConstantArray`, which compares by
content.

>>> import numpy as np
>>> reduce_sum_p.shape_rule([(3, 4)], {"axes": (-1,)})
(3,)
>>> reduce_sum_p.numpy_impl(np.ones((2, 3, 4)), axes=(-1,)).shape   # a leading batch of 2
(2, 3)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
import sympy

from symad import array_runtime as rt
from symad.atoms import constant_value
from symad.errors import TracingError
from symad.ir.primitive import BUILDER_ROLES, Primitive, register

__all__ = [
    "ConstantArray", "array_primitive", "basic_index", "index_objects", "normalize_axes", "dummy_array", "part_shape",
    "constant_p", "reduce_sum_p", "amax_p", "amin_p", "reduce_logsumexp_p", "einsum_p",
    "reshape_p", "transpose_p", "broadcast_p", "slice_p", "unslice_p", "take_p", "take_add_p",
    "concatenate_p", "cumsum_p", "pack_p", "scatter_p", "real_p", "imag_p", "conj_p", "modulus_p", "fft_p",
    "rfft_p", "irfft_p", "argsort_p", "take_along_p", "take_along_add_p", "ARRAY_PRIMITIVES",
]


# ---------------------------------------------------------------------------
# Parameters that hold arrays
# ---------------------------------------------------------------------------


class ConstantArray:
    """A read-only NumPy array kept as a node parameter, equal to another by content.

    Two uses of the same data in one trace are one node (the builder
    hash-conses on parameters). An array holding one value everywhere is
    kept as that value and a shape, and evaluates to a broadcast view: the
    ``zeros_like(x)`` of a 10^6-element ``x`` costs no memory.

    >>> a, b = ConstantArray(np.arange(3.0)), ConstantArray(np.arange(3.0))
    >>> a == b, hash(a) == hash(b), ConstantArray(np.zeros((2, 2))).fill
    (True, True, 0.0)
    """

    __slots__ = ("array", "fill", "exact", "_key")

    def __init__(self, array, dtype=np.float64, exact=None):
        if np.iscomplexobj(array) or np.dtype(dtype).kind == "c":
            from symad.atoms import note_complex

            note_complex()
            if np.dtype(dtype).kind != "c":
                dtype = np.complex128  # a complex constant stays complex
        array = np.asarray(array, dtype=dtype)
        #: For an array filled with an exact SymPy number (the seed 1 of a gradient
        #: broadcast to a shape), that number: formulas then print 1, not 1.0.
        self.exact = exact
        self.fill = None
        if array.size and array.ndim:
            first = array.reshape(-1)[0]
            if first == first and bool((array == first).all()):  # NaN is never uniform
                self.fill = first.item()
                array = np.broadcast_to(array.reshape(-1)[:1].reshape(()), array.shape)
        elif array.ndim == 0:
            self.fill = array.item()
        if self.fill is None:
            array = array.copy()
            array.flags.writeable = False
        self.array = array
        if self.fill is not None:
            self._key = (array.shape, array.dtype.str, "fill", self.fill, exact)
        else:
            digest = hashlib.blake2b(np.ascontiguousarray(array).tobytes(), digest_size=16).hexdigest()
            self._key = (array.shape, array.dtype.str, digest)

    @property
    def shape(self) -> tuple:
        return self.array.shape

    def __eq__(self, other) -> bool:
        return isinstance(other, ConstantArray) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __reduce__(self):
        if self.fill is not None:
            return _restore_filled, (self.fill, self.array.shape, self.array.dtype.str, self.exact)
        return ConstantArray, (np.array(self.array), self.array.dtype.str)

    def __repr__(self) -> str:
        if self.fill is not None:
            return f"ConstantArray(fill={self.fill!r}, shape={self.array.shape})"
        return f"ConstantArray(shape={self.array.shape})"


def _restore_filled(fill, shape, dtype, exact=None) -> ConstantArray:
    return ConstantArray(np.full(shape, fill, dtype=dtype), dtype, exact)


# ---------------------------------------------------------------------------
# Shapes, axes and indices
# ---------------------------------------------------------------------------


def _where() -> str:
    """`` (in function 'f')`` for the function being traced, for error messages."""
    from symad.atoms import current_builder

    builder = current_builder()
    return f" (in function {builder.function_name!r})" if builder is not None else ""


def normalize_axes(axis, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None, an int or a sequence) as sorted negative axes of an ``ndim``-array.

    >>> normalize_axes(None, 3, "sum"), normalize_axes(1, 3, "sum"), normalize_axes((0, -1), 2, "sum")
    ((-3, -2, -1), (-2,), (-2, -1))
    """
    if axis is None:
        return tuple(range(-ndim, 0))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    normalized = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TracingError(f"{what}: axis must be an int or a tuple of ints, got {axis!r}" + _where())
        if not -ndim <= a < ndim:
            raise TracingError(f"{what}: axis {a} is out of bounds for an array of dimension {ndim}" + _where())
        normalized.append(int(a) % ndim - ndim)
    if len(set(normalized)) != len(normalized):
        raise TracingError(f"{what}: repeated axis in {axis!r}" + _where())
    return tuple(sorted(normalized))


def lead_of(shape: tuple, core_ndim: int) -> tuple:
    """The leading (batch) part of ``shape`` in front of ``core_ndim`` core dimensions."""
    return tuple(shape[: len(shape) - core_ndim])


def basic_index(index: tuple, shape: tuple) -> tuple:
    """A NumPy basic index (ints, slices, None, Ellipsis) normalised to hashable items.

    Items: ``("i", k)`` an integer (non-negative, checked against the axis),
    ``("s", start, stop, step)`` a slice with its bounds resolved, ``("n",)``
    a new axis. The result covers every axis of ``shape``.

    >>> basic_index((1, slice(None, None, -1)), (3, 4))
    (('i', 1), ('s', 3, -5, -1))
    """
    items = list(index)
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for an array of dimension {len(shape)}")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(shape) - consumed)
    else:
        items += [slice(None)] * (len(shape) - consumed)
    normalized, axis = [], 0
    for item in items:
        if item is None:
            normalized.append(("n",))
            continue
        size = shape[axis]
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step < 0 and stop < 0:
                stop = -size - 1  # "through index 0": as a slice bound, -1 would mean the last
            normalized.append(("s", start, stop, step))
        else:
            k = int(item)
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for axis {axis} with size {size}")
            normalized.append(("i", k % size))
        axis += 1
    return tuple(normalized)


def index_objects(index: tuple) -> tuple:
    """The NumPy index a normalised :func:`basic_index` stands for (the runtime's, without
    its leading Ellipsis: generated modules carry ``rt_index`` and cannot import symad)."""
    return rt.rt_index(index)[1:]


def dummy_array(shape: tuple) -> np.ndarray:
    """An array of ``shape`` with no memory behind it, to let NumPy work out result shapes."""
    return np.broadcast_to(np.zeros((), dtype=np.int8), shape)


# The old private name, which symad/numpy.py and symad/compile/loops.py (other owners) still
# read; they should move to dummy_array.


def part_shape(in_shape: tuple, index: tuple) -> tuple:
    """The core shape of ``x[index]`` for ``x`` of core shape ``in_shape`` and a normalised
    basic ``index`` (see :func:`basic_index`).

    >>> part_shape((3, 4), (("i", 1), ("s", 0, 4, 2)))
    (2,)
    """
    return dummy_array(in_shape)[index_objects(index)].shape


def _check_core(shape: tuple, in_shape: tuple, what: str) -> tuple:
    """The lead of an operand of ``shape`` whose core shape must be ``in_shape``."""
    core_ndim = len(in_shape)
    if len(shape) < core_ndim or tuple(shape[len(shape) - core_ndim:]) != tuple(in_shape):
        raise TracingError(f"{what}: operand of shape {shape} does not end in {in_shape}" + _where())
    return lead_of(shape, core_ndim)


def _common_lead(shapes: Sequence[tuple], core_ndims: Sequence[int], what: str) -> tuple:
    leads = [lead_of(shape, n) for shape, n in zip(shapes, core_ndims)]
    try:
        return tuple(np.broadcast_shapes(*leads))
    except ValueError:
        raise TracingError(f"{what}: leading dimensions {leads} do not broadcast" + _where()) from None


def _broadcast_lead(value: np.ndarray, lead: tuple, core_ndim: int) -> np.ndarray:
    """``value`` (lead + core) with its leading dimensions broadcast to ``lead``."""
    core = value.shape[value.ndim - core_ndim:] if core_ndim else ()
    own_lead = value.shape[: value.ndim - core_ndim]
    value = value.reshape((1,) * (len(lead) - len(own_lead)) + tuple(own_lead) + tuple(core))
    return np.broadcast_to(value, tuple(lead) + tuple(core))


# ---------------------------------------------------------------------------
# The primitives
# ---------------------------------------------------------------------------


def array_primitive(name, numpy_impl, shape_rule, *, kind, arity=1, variadic=False,
                    finite=True, moves=None, object_safe=False, complex_values=None,
                    to_sympy=None) -> Primitive:
    """Declare and register an array primitive (one stanza of this catalogue or of another
    family's, :mod:`symad.linalg_primitives`), listed in :data:`ARRAY_PRIMITIVES`."""
    # finite: every array primitive but a constant (whose values are what they are) is finite
    # where its operands are; reverse mode keeps a where's mask across it.
    primitive = Primitive(
        name, to_sympy or _no_scalar_form(name), numpy_impl, arity=arity, variadic=variadic,
        kind=kind, shape_rule=shape_rule, folds_constants=False, numpy_name=None, finite=finite,
        moves=moves, object_safe=object_safe, complex_values=complex_values)
    ARRAY_PRIMITIVES.append(primitive)
    return register(primitive)


def _no_scalar_form(name: str):
    def to_sympy(*args, **params):
        raise TypeError(f"the array primitive {name!r} has no scalar SymPy form; its formula is "
                        "indexed (symad.export.index_notation) or expanded per element")
    return to_sympy


ARRAY_PRIMITIVES: list[Primitive] = []

# -- constants ------------------------------------------------------------------


def _constant_impl(*, value: ConstantArray) -> np.ndarray:
    return value.array


constant_p = array_primitive(
    "constant", _constant_impl, lambda shapes, params: params["value"].shape,
    kind="linear", arity=0, finite=False,
    complex_values=lambda params: params["value"].array.dtype.kind == "c")


# -- reductions -------------------------------------------------------------------


def _reduced_shape(shapes, params) -> tuple:
    (shape,) = shapes
    axes = params["axes"]
    if axes and (len(shape) < -axes[0]):
        raise TracingError(f"reduction over axes {axes} of an array of shape {shape}" + _where())
    dropped = {len(shape) + a for a in axes}
    return tuple(size for axis, size in enumerate(shape) if axis not in dropped)


reduce_sum_p = array_primitive(
    "reduce_sum", lambda x, *, axes: rt.rt_reduce_sum(x, axes), _reduced_shape, kind="linear")
# max and min of complex values order them as NumPy does (real parts, then imaginary
# parts) and, as in JAX, carry the tangent of the element chosen (shared at ties).
amax_p = array_primitive(
    "amax", lambda x, *, axes: rt.rt_amax(x, axes), _reduced_shape, kind="array",
    complex_values="follow")
amin_p = array_primitive(
    "amin", lambda x, *, axes: rt.rt_amin(x, axes), _reduced_shape, kind="array",
    complex_values="follow")
reduce_logsumexp_p = array_primitive(
    "reduce_logsumexp", lambda x, *, axes: rt.rt_logsumexp(x, axes), _reduced_shape,
    kind="array", complex_values="refuse")


# -- contraction ----------------------------------------------------------------------


def parse_subscripts(subscripts: str) -> tuple[list[str], str]:
    """``"ij,jk->ik"`` as ``(["ij", "jk"], "ik")``."""
    inputs, output = subscripts.split("->")
    return inputs.split(","), output


def _einsum_shape(shapes, params) -> tuple:
    (a, b), c = parse_subscripts(params["subscripts"])
    sizes: dict = {}
    leads = []
    for shape, letters in zip(shapes, (a, b)):
        if len(shape) < len(letters):
            raise TracingError(f"einsum {params['subscripts']!r}: operand of shape {shape} has "
                               f"fewer than {len(letters)} dimensions" + _where())
        leads.append(lead_of(shape, len(letters)))
        for letter, size in zip(letters, shape[len(shape) - len(letters):]):
            if sizes.setdefault(letter, size) != size:
                raise TracingError(f"einsum {params['subscripts']!r}: index {letter!r} has sizes "
                                   f"{sizes[letter]} and {size} in operands of shapes {shapes}" + _where())
    try:
        lead = np.broadcast_shapes(*leads)
    except ValueError:
        raise TracingError(f"einsum: leading dimensions {leads} do not broadcast" + _where()) from None
    return tuple(lead) + tuple(sizes[letter] for letter in c)


einsum_p = array_primitive(
    "einsum", lambda a, b, *, subscripts: rt.rt_einsum(a, b, subscripts), _einsum_shape,
    kind="bilinear", arity=2)


# -- structure ------------------------------------------------------------------------


def _reshape_shape(shapes, params) -> tuple:
    (shape,) = shapes
    lead = _check_core(shape, params["in_shape"], "reshape")
    return lead + tuple(params["shape"])


reshape_p = array_primitive(
    "reshape", lambda x, *, in_shape, shape: rt.rt_reshape(x, in_shape, shape), _reshape_shape,
    kind="linear", moves="gather", object_safe=True)


def _transpose_shape(shapes, params) -> tuple:
    (shape,) = shapes
    perm = params["perm"]
    lead = lead_of(shape, len(perm))
    core = shape[len(lead):]
    return lead + tuple(core[p] for p in perm)


transpose_p = array_primitive(
    "transpose", lambda x, *, perm: rt.rt_transpose(x, perm), _transpose_shape,
    kind="linear", moves="gather", object_safe=True)


def _broadcast_shape(shapes, params) -> tuple:
    (shape,) = shapes
    lead = _check_core(shape, params["in_shape"], "broadcast_to")
    return lead + tuple(params["shape"])


broadcast_p = array_primitive(
    "broadcast_to", lambda x, *, in_shape, shape: rt.rt_broadcast(x, in_shape, shape),
    _broadcast_shape, kind="linear", moves="gather", object_safe=True)


def _slice_shape(shapes, params) -> tuple:
    (shape,) = shapes
    lead = _check_core(shape, params["in_shape"], "slice")
    return lead + part_shape(params["in_shape"], params["index"])


slice_p = array_primitive(
    "slice", lambda x, *, in_shape, index: rt.rt_slice(x, in_shape, index), _slice_shape,
    kind="linear", moves="gather", object_safe=True)


def _unslice_shape(shapes, params) -> tuple:
    (shape,) = shapes
    part = part_shape(params["in_shape"], params["index"])
    return _check_core(shape, part, "unslice") + tuple(params["in_shape"])


#: ``unslice(v)`` is zeros of ``in_shape`` holding ``v`` at ``index``: the transpose of a slice
#: (and how ``pad`` with zeros is recorded).
unslice_p = array_primitive("unslice", lambda v, *, in_shape, index: rt.rt_unslice(v, in_shape, index),
                             _unslice_shape, kind="linear", moves="place")


def _take_shape(shapes, params) -> tuple:
    (shape,) = shapes
    in_shape, axis = params["in_shape"], params["axis"]
    lead = _check_core(shape, in_shape, "take")
    at = len(in_shape) + axis
    return lead + tuple(in_shape[:at]) + params["indices"].shape + tuple(in_shape[at + 1:])


take_p = array_primitive(
    "take", lambda x, *, in_shape, indices, axis: rt.rt_take(x, in_shape, indices.array, axis),
    _take_shape, kind="linear", moves="gather", object_safe=True)


def _take_add_shape(shapes, params) -> tuple:
    (shape,) = shapes
    in_shape, axis, indices = params["in_shape"], params["axis"], params["indices"]
    at = len(in_shape) + axis
    part = tuple(in_shape[:at]) + indices.shape + tuple(in_shape[at + 1:])
    return _check_core(shape, part, "take_add") + tuple(in_shape)


def _take_add_index(in_shape, indices, axis):
    at = len(in_shape) + axis
    return (Ellipsis,) + (slice(None),) * at + (indices.array,) + (slice(None),) * (-axis - 1)


#: The transpose of ``take``: zeros of ``in_shape`` with each slice of ``v`` added at its index.
take_add_p = array_primitive(
    "take_add", lambda v, *, in_shape, indices, axis: rt.rt_take_add(v, in_shape, indices.array, axis),
    _take_add_shape, kind="linear")


def _along_shapes(shapes, params) -> tuple:
    """``(lead, the indices' core)`` of take_along(x, indices) or take_along_add(v, indices):
    the indices' core matches ``in_shape`` off the axis; leading dimensions broadcast."""
    in_shape, axis = params["in_shape"], params["axis"]
    core_ndim = len(in_shape)
    lead = _common_lead(shapes, [core_ndim, core_ndim], "take_along_axis")
    index_core = tuple(shapes[1][len(shapes[1]) - core_ndim:])
    if len(shapes[1]) < core_ndim or any(a != b for d, (a, b) in enumerate(zip(index_core, in_shape))
                                         if d != core_ndim + axis):
        raise TracingError(f"take_along_axis: indices of shape {shapes[1]} for an array of "
                           f"core shape {in_shape} along axis {axis}" + _where())
    return lead, index_core


#: NumPy's stable ``argsort`` along a core ``axis`` (NaN last): the positions as floats
#: holding integers. Piecewise constant: no derivative.
argsort_p = array_primitive(
    "argsort", lambda x, *, axis: rt.rt_argsort(x, axis), lambda shapes, params: tuple(shapes[0]),
    kind="array")
#: ``np.take_along_axis(x, indices, axis)`` at indices computed in the graph (argsort's):
#: linear in ``x`` (its transpose is :data:`take_along_add_p`), no derivative in the indices.
take_along_p = array_primitive(
    "take_along", lambda x, indices, *, in_shape, axis: rt.rt_take_along(x, indices, axis),
    lambda shapes, params: sum(_along_shapes(shapes, params), ()), kind="array", arity=2)
#: Zeros of core shape ``in_shape`` with each element of ``v`` added at its index along
#: ``axis`` (repeats summed): take_along's transpose.
take_along_add_p = array_primitive(
    "take_along_add", lambda v, indices, *, in_shape, axis: rt.rt_take_along_add(v, indices, in_shape, axis),
    lambda shapes, params: _along_shapes(shapes, params)[0] + tuple(params["in_shape"]),
    kind="array", arity=2)


def _concatenate_shape(shapes, params) -> tuple:
    axis, cores = params["axis"], params["in_shapes"]
    lead = _common_lead(shapes, [len(c) for c in cores], "concatenate")
    for shape, core in zip(shapes, cores):
        _check_core(shape, core, "concatenate")
    first = list(cores[0])
    first[axis] = sum(core[axis] for core in cores)
    return lead + tuple(first)


concatenate_p = array_primitive(
    "concatenate", lambda *values, axis, in_shapes: rt.rt_concatenate(values, axis, in_shapes),
    _concatenate_shape, kind="linear", moves="place", object_safe=True, variadic=True)
cumsum_p = array_primitive(
    "cumsum", lambda x, *, axis, reverse: rt.rt_cumsum(x, axis, reverse),
    lambda shapes, params: tuple(shapes[0]), kind="linear", object_safe=True)


def _pack_shape(shapes, params) -> tuple:
    shape, has_base = params["shape"], params["has_base"]
    element_shapes = shapes[1:] if has_base else shapes
    leads = [tuple(s) for s in element_shapes]
    if has_base:
        leads.append(_check_core(shapes[0], shape, "pack"))
    return tuple(np.broadcast_shapes(*leads)) + tuple(shape) if leads else tuple(shape)


#: An array assembled from scalars: ``positions`` (flat) get the scalar operands, the rest
#: comes from a constant ``base`` operand (if ``has_base``). How element-level code
#: (``out[i] = v`` on ``snp.zeros``, ``snp.stack`` of scalars) meets whole-array operations.
pack_p = array_primitive(
    "pack", lambda *values, shape, positions, has_base: rt.rt_pack(values, shape, positions, has_base),
    _pack_shape, kind="linear", moves="place", variadic=True)


def _scatter_shape(shapes, params) -> tuple:
    x_shape, v_shape = shapes
    in_shape, index = params["in_shape"], params["index"]
    lead = _check_core(x_shape, in_shape, "scatter")
    part = part_shape(in_shape, index)
    v_core = v_shape[max(0, len(v_shape) - len(part)):]
    try:
        np.broadcast_shapes(v_core, part)
    except ValueError:
        raise TracingError(f"assigning a value of shape {v_shape} to elements of shape {part}" + _where()) from None
    v_lead = lead_of(v_shape, len(part)) if len(v_shape) > len(part) else ()
    return tuple(np.broadcast_shapes(lead, v_lead)) + tuple(in_shape)


#: ``x`` with the elements at a basic ``index`` replaced by ``v``: item assignment and
#: ``x.at[index].set(v)`` on a whole array. Linear in ``(x, v)`` together.
scatter_p = array_primitive(
    "scatter", lambda x, v, *, in_shape, index: rt.rt_scatter(x, v, in_shape, index), _scatter_shape,
    kind="linear", moves="place", arity=2)


# -- complex parts and discrete Fourier transforms -------------------------------------
#
# Linear over the reals but not multiplications by a partial -- conj is not complex-linear,
# real and imag map complex to real, a transform mixes elements -- so their reverse mode
# is a transpose (symad.rules.transposes), for JAX's pairing Re(ct * t) of cotangents
# with tangents, as for the structural primitives. The transforms act along negative
# core axes at their operand's own length (cropping and zero-padding, NumPy's ``n=``,
# are slices and unslices around them).


def _same_shape(shapes, params) -> tuple:
    return tuple(shapes[0])


real_p = array_primitive("real", np.real, _same_shape, kind="linear", complex_values="real",
                          to_sympy=sympy.re)
imag_p = array_primitive("imag", np.imag, _same_shape, kind="linear", complex_values="real",
                          to_sympy=sympy.im)
conj_p = array_primitive("conj", np.conjugate, _same_shape, kind="linear",
                          to_sympy=sympy.conjugate)
#: ``np.abs`` of a complex operand (the modulus, real); its derivative is JAX's,
#: conj(z)/|z| with 0 at z = 0 (symad.rules.transposes), not hypot's 0/0 there.
modulus_p = array_primitive("modulus", np.abs, _same_shape, kind="array", complex_values="real",
                             to_sympy=sympy.Abs)


def _fft_impl(x, *, axes, inverse, norm):
    return (np.fft.ifftn if inverse else np.fft.fftn)(x, axes=axes, norm=norm)


def _rfft_shape(shapes, params) -> tuple:
    shape = list(shapes[0])
    shape[params["axis"]] = shape[params["axis"]] // 2 + 1
    return tuple(shape)


def _irfft_shape(shapes, params) -> tuple:
    shape = list(shapes[0])
    shape[params["axis"]] = params["n"]
    return tuple(shape)


#: ``np.fft.fftn`` (``inverse``: ``ifftn``) over the negative ``axes``, with NumPy's ``norm``.
fft_p = array_primitive("fft", _fft_impl, _same_shape, kind="linear", complex_values="complex")
#: ``np.fft.rfft`` of a real operand along ``axis``: ``n // 2 + 1`` complex values.
rfft_p = array_primitive(
    "rfft", lambda x, *, axis, norm: np.fft.rfft(x, axis=axis, norm=norm), _rfft_shape,
    kind="linear", complex_values="complex")
#: ``np.fft.irfft`` to ``n`` real values along ``axis`` from ``n // 2 + 1`` complex ones.
irfft_p = array_primitive(
    "irfft", lambda x, *, axis, n, norm: np.fft.irfft(x, n=n, axis=axis, norm=norm), _irfft_shape,
    kind="linear", complex_values="real")


# ---------------------------------------------------------------------------
# Recording, with each primitive's identities
#
# ``symad.numpy`` and the derivative rules record array primitives through these
# functions, never through ``builder.record`` directly: they apply the identities
# (a reshape to the same shape is no node, a slice of a constant is a constant, an
# element of an array input is its element symbol) in one place. ``lead`` is the
# number of leading (batch or seed) dimensions in front of the core the operation
# acts on.
# ---------------------------------------------------------------------------


def _shape(atom) -> tuple:
    # A node's or array input's own shape; scalars and constants have none (as
    # symad.graph.atom_shape says; this module needs no more of the graph).
    return getattr(atom, "shape", ()) if atom.is_Symbol else ()


def _constant_of(atom):
    """The ConstantArray of a constant node, or None."""
    primitive = getattr(atom, "primitive", None)
    if primitive is constant_p:
        return dict(atom.params)["value"]
    return None


def _record_constant(builder, array: np.ndarray):
    if array.ndim == 0:
        from symad.atoms import number_atom

        return number_atom(array.item())
    return builder.record(constant_p, (), (("value", ConstantArray(array)),))


def broadcast_atom(builder, atom, shape: tuple):
    """``atom`` broadcast to ``shape`` (NumPy's rules): a constant array for a constant.

    The graph builder broadcasts with it too (an identity keeps a value, not always its
    shape), finding it by role: :data:`~symad.ir.primitive.BUILDER_ROLES`.
    """
    if not atom.is_Symbol:
        number = constant_value(atom)
        value = ConstantArray(np.full(shape, number if isinstance(number, complex) else float(number)),
                              exact=atom if getattr(atom, "is_Rational", False) else None)
        return builder.record(constant_p, (), (("value", value),))
    return builder.record(broadcast_p, (atom,), (("in_shape", _shape(atom)), ("shape", tuple(shape))))


BUILDER_ROLES.broadcast = broadcast_atom


def record_reshape(builder, atom, shape: tuple, lead: int = 0):
    """``atom`` with its core (all but ``lead`` leading dimensions) reshaped to ``shape``."""
    full = _shape(atom)
    core, shape = full[lead:], tuple(shape)
    if core == shape:
        return atom
    if math.prod(core) != math.prod(shape):
        raise TracingError(f"cannot reshape an array of shape {core} into shape {shape}" + _where())
    if not atom.is_Symbol:  # a scalar constant: a constant array of one element
        return broadcast_atom(builder, atom, shape)
    constant = _constant_of(atom)
    if constant is not None:
        return _record_constant(builder, constant.array.reshape(full[:lead] + shape))
    if getattr(atom, "primitive", None) is reshape_p and len(dict(atom.params)["shape"]) == len(core):
        # A reshape of a reshape over the same core (the same leading dimensions): one
        # reshape of the original.
        inner = atom.args[0]
        return record_reshape(builder, inner, shape, len(_shape(inner)) - len(dict(atom.params)["in_shape"]))
    if not core and not shape:
        return atom
    return builder.record(reshape_p, (atom,), (("in_shape", core), ("shape", shape)))


def record_transpose(builder, atom, perm: tuple):
    """``atom`` with its last ``len(perm)`` dimensions permuted by ``perm``."""
    perm = tuple(int(p) for p in perm)
    if perm == tuple(range(len(perm))):
        return atom
    constant = _constant_of(atom)
    if constant is not None:
        lead = constant.array.ndim - len(perm)
        return _record_constant(builder, np.transpose(
            constant.array, tuple(range(lead)) + tuple(lead + p for p in perm)))
    if getattr(atom, "primitive", None) is transpose_p and len(dict(atom.params)["perm"]) == len(perm):
        inner_perm = dict(atom.params)["perm"]
        return record_transpose(builder, atom.args[0], tuple(inner_perm[p] for p in perm))
    return builder.record(transpose_p, (atom,), (("perm", perm),))


def record_broadcast(builder, atom, shape: tuple, lead: int = 0):
    """``atom`` with its core broadcast (NumPy's rules) to ``shape``."""
    full = _shape(atom)
    core, shape = full[lead:], tuple(shape)
    if core == shape:
        return atom
    try:
        if np.broadcast_shapes(core, shape) != shape:
            raise ValueError
    except ValueError:
        raise TracingError(f"cannot broadcast an array of shape {core} to shape {shape}" + _where()) from None
    if not atom.is_Symbol:  # a scalar constant: a filled constant array
        return broadcast_atom(builder, atom, shape)
    constant = _constant_of(atom)
    if constant is not None and constant.fill is not None:
        return _record_constant(builder, np.full(full[:lead] + shape, constant.fill))
    return builder.record(broadcast_p, (atom,), (("in_shape", core), ("shape", shape)))


def record_reduction(builder, primitive, atom, axes: tuple):
    """``primitive`` (``reduce_sum_p``, ``amax_p``...) of ``atom`` over the negative ``axes``."""
    if not axes:
        return atom
    return builder.record(primitive, (atom,), (("axes", tuple(sorted(axes))),))


def record_slice(builder, atom, index: tuple, lead: int = 0):
    """``atom[..., index]`` for a normalised basic ``index`` (see :func:`basic_index`) of its core."""
    full = _shape(atom)
    core = full[lead:]
    if all(item[0] == "s" and item[1] == 0 and item[2] == size and item[3] == 1
           for item, size in zip(index, core)) and len(index) == len(core):
        return atom
    if lead == 0 and all(item[0] == "i" for item in index) and len(index) == len(core):
        element = _element_of(builder, atom, tuple(item[1] for item in index))
        if element is not None:
            return element
    constant = _constant_of(atom)
    if constant is not None:
        return _record_constant(builder, np.asarray(constant.array[rt.rt_index(index)]))
    return builder.record(slice_p, (atom,), (("in_shape", core), ("index", tuple(index))))


def _element_of(builder, atom, index: tuple):
    """The scalar atom of one element without a node, where there is one: an array input's
    element symbol, a packed scalar, a constant's number."""
    if hasattr(atom, "element"):  # an array input: its element symbol
        return atom.element(index)
    primitive = getattr(atom, "primitive", None)
    if primitive is pack_p:
        params = dict(atom.params)
        flat = int(np.ravel_multi_index(index, params["shape"]))
        operands = list(atom.args)
        base = operands.pop(0) if params["has_base"] else None
        if flat in params["positions"]:
            return operands[params["positions"].index(flat)]
        return _element_of(builder, base, index)
    constant = _constant_of(atom)
    if constant is not None:
        from symad.atoms import number_atom

        return number_atom(constant.array[index].item())
    return None


def record_take(builder, atom, indices: np.ndarray, axis: int, lead: int = 0):
    """``np.take(atom, indices, axis)`` along a core ``axis`` (negative)."""
    full = _shape(atom)
    core = full[lead:]
    indices = np.asarray(indices, dtype=np.intp)
    size = core[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise TracingError(f"index out of range: indices from {indices.min()} to {indices.max()} "
                           f"for an axis of size {size}" + _where())
    indices = indices % size if size else indices
    if indices.shape == (size,) and np.array_equal(indices, np.arange(size)):
        return atom
    constant = _constant_of(atom)
    if constant is not None:
        return _record_constant(builder, np.take(constant.array, indices, axis=axis))
    params = (("in_shape", core), ("indices", ConstantArray(indices, np.intp)), ("axis", axis))
    return builder.record(take_p, (atom,), params)


def record_concatenate(builder, atoms: Sequence, axis: int, lead: int = 0):
    """The atoms joined along the core ``axis`` (negative); leading dimensions broadcast."""
    atoms = list(atoms)
    cores = [_shape(a)[lead:] if _shape(a) else () for a in atoms]
    ndim = len(cores[0])
    for core in cores:
        if len(core) != ndim or any(c != f for i, (c, f) in enumerate(zip(core, cores[0]))
                                    if i != ndim + axis):
            raise TracingError(f"concatenate: the shapes {cores} differ off the joining axis {axis}" + _where())
    kept = [(a, c) for a, c in zip(atoms, cores) if c[axis] != 0]
    if len(kept) == 1 and lead == 0:
        return kept[0][0]
    if not kept:
        kept = [(atoms[0], cores[0])]
    params = (("axis", axis), ("in_shapes", tuple(c for _, c in kept)))
    return builder.record(concatenate_p, [a for a, _ in kept], params)


def record_cumsum(builder, atom, axis: int, reverse: bool = False):
    """Cumulative sums along a core ``axis`` (negative); ``reverse`` sums from the end."""
    if _shape(atom)[axis] <= 1:
        return atom
    return builder.record(cumsum_p, (atom,), (("axis", axis), ("reverse", bool(reverse))))


def record_unslice(builder, atom, in_shape: tuple, index: tuple):
    """Zeros of the core shape ``in_shape`` holding ``atom`` at the basic ``index`` (slice's transpose)."""
    if all(item[0] == "s" and item[1] == 0 and item[2] == size and item[3] == 1
           for item, size in zip(index, in_shape)) and len(index) == len(in_shape):
        return atom
    return builder.record(unslice_p, (atom,), (("in_shape", tuple(in_shape)), ("index", tuple(index))))


def record_take_add(builder, atom, in_shape: tuple, indices: ConstantArray, axis: int):
    """Zeros of core shape ``in_shape`` with the slices of ``atom`` added at ``indices`` (take's transpose)."""
    params = (("in_shape", tuple(in_shape)), ("indices", indices), ("axis", axis))
    return builder.record(take_add_p, (atom,), params)


def record_einsum(builder, subscripts: str, a, b):
    """``einsum(subscripts, a, b)`` for two operands, with ``a`` and ``b`` named by core indices.

    Every index of an operand must appear in the other operand or the
    output (sum it away first) and no index may repeat within an operand
    (take the diagonal first): then the transposes are einsums again.
    """
    (sa, sb), sc = parse_subscripts(subscripts)
    if a.is_Symbol is False and b.is_Symbol is False:  # two scalar constants
        raise TracingError("einsum of two constants" + _where())
    return builder.record(einsum_p, (a, b), (("subscripts", subscripts),))
