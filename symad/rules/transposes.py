"""Reverse mode of the array primitives: the transpose table, one rule per primitive.

A linear primitive's reverse mode is its transpose, as in JAX's
``ad.deflinear``: the cotangent of a ``reshape`` is reshaped back, that of a
``broadcast_to`` summed over the broadcast axes, a ``slice`` puts its cotangent
back into zeros (``unslice``) and ``unslice`` slices it out, ``take`` adds its
cotangent at the indices (``take_add``, repeated indices add up) and
``take_add`` takes, ``einsum`` contracts the cotangent with the other operand
(``ij,jk->ik``: ``ik,jk->ij`` for the first), ``concatenate`` slices, ``cumsum``
sums from the other end. Each pair of rules maps onto the other, so second and
higher derivatives stay within the same small set of primitives.

Complex values follow JAX's pairing of a cotangent with a tangent, ``Re(ct * t)`` (no
conjugation): ``real``'s transpose is the cotangent itself, ``imag``'s ``-i ct``,
``conj``'s ``conj(ct)``, the modulus' ``ct conj(z) / |z|`` (0 at 0), ``fft``'s ``fft``
(a symmetric matrix), and the real transforms' each other's.

The non-linear reductions have rules of the same shape: ``amax``/``amin``
share the cotangent equally among the elements equal to the extremum (JAX's
convention at ties) and ``logsumexp`` weighs it by the softmax ``exp(x - out)``.

Every rule is ``rule(builder, cotangent, node, index, lead)``: the cotangent
of operand ``index`` of ``node``, given the node's cotangent (its full shape,
behind ``lead`` leading dimensions of seeds), recorded with the helpers of
:mod:`symad.array_primitives` so the result is a graph again. ``None`` means a
structural zero (a constant operand).

>>> from symad import array_primitives as A
>>> A.reshape_p in TRANSPOSE and A.einsum_p in TRANSPOSE
True
"""

from __future__ import annotations

import math

import numpy as np
import sympy

from symad import array_primitives as A
from symad import primitives as P
from symad.atom_arrays import constant_atom
from symad.graph import atom_shape
from symad.ir.primitive import RuleTable

__all__ = ["TRANSPOSE", "unbroadcast", "array_weights", "broadcast_full", "modulus_weighted"]

ZERO, ONE = sympy.Integer(0), sympy.Integer(1)


def _params(node) -> dict:
    return dict(node.params)


def unbroadcast(builder, value, shape: tuple, lead: int = 0, from_shape: tuple | None = None):
    """The cotangent of an operand of ``shape`` that NumPy broadcast to ``from_shape``.

    ``value`` (behind ``lead`` leading dimensions of seeds) is the cotangent of
    the broadcast result, ``from_shape``; it may be stored smaller, broadcasting
    to it (the seed 1 of a sum is a scalar). Along each axis where the operand
    was repeated -- it lacks the axis or has size 1 there, and ``from_shape``
    does not -- the operand's cotangent is the sum of the repeats: a real sum
    where ``value`` varies along the axis, the axis length times ``value`` where
    ``value`` is constant along it (stored with size 1 or without the axis).
    Forgetting that second case drops the repeat count: ``sum(ones((2, 3)) + s)``
    would give 1 for each element of ``s`` instead of 2.

    The result broadcasts to ``shape``: axes the operand lacks are removed, and
    with ``lead`` the core has the operand's full rank (the seeds stay in front).
    ``from_shape`` defaults to ``value``'s own core shape.
    """
    core = atom_shape(value)[lead:]
    shape = tuple(shape)
    from_shape = core if from_shape is None else tuple(from_shape)
    rank = max(len(core), len(shape), len(from_shape))

    def padded(sizes):
        return (1,) * (rank - len(sizes)) + tuple(sizes)

    padded_value, padded_shape, padded_from = padded(core), padded(shape), padded(from_shape)
    repeated = [axis for axis in range(rank) if padded_shape[axis] == 1 and padded_from[axis] != 1]
    summed = tuple(axis - rank for axis in repeated if padded_value[axis] != 1)
    count = math.prod(padded_from[axis] for axis in repeated if padded_value[axis] == 1)
    if summed:
        value = A.record_reduction(builder, A.reduce_sum_p, value, summed)
    if count != 1:
        value = builder.record(P.mul_p, (value, sympy.Integer(count)))
    kept = tuple(1 if axis - rank in summed else size for axis, size in enumerate(padded_value))
    kept = kept[rank - len(shape):]
    now = atom_shape(value)[lead:]
    if lead:  # with seeds in front, the core keeps the operand's full rank
        return value if now == kept else A.record_reshape(builder, value, kept, lead)
    # Without seeds, leading size-1 axes are what broadcasting adds anyway.
    if len(now) <= len(shape) and _without_leading_ones(now) == _without_leading_ones(kept):
        return value
    return A.record_reshape(builder, value, _without_leading_ones(kept), lead)


def _without_leading_ones(sizes: tuple) -> tuple:
    start = 0
    while start < len(sizes) and sizes[start] == 1:
        start += 1
    return sizes[start:]


def _keepdims(builder, value, in_core: tuple, axes: tuple, lead: int):
    """A reduction's cotangent reshaped with size-1 axes where the reduction removed them."""
    kept = tuple(1 if axis - len(in_core) in axes else size for axis, size in enumerate(in_core))
    return A.record_reshape(builder, value, kept, lead)


def broadcast_full(builder, value, shape: tuple, lead: int):
    """``value`` (its core broadcastable to ``shape``) materialised to ``shape``."""
    core = atom_shape(value)[lead:]
    if core == shape:
        return value
    if not value.is_Symbol:  # a constant seed: a constant array
        return A.broadcast_atom(builder, value, shape)
    if lead:
        value = A.record_reshape(builder, value, (1,) * (len(shape) - len(core)) + core, lead)
    return A.record_broadcast(builder, value, shape, lead)


# -- the rules -----------------------------------------------------------------------

#: Reverse mode of each array primitive: ``rule(builder, cotangent, node, operand_index, lead)
#: -> cotangent of that operand`` (None: a structural zero).
TRANSPOSE = RuleTable("transpose", applies=lambda primitive: not primitive.elementwise)
TRANSPOSE.no_rule("a constant array: it has no operands", A.constant_p)



@TRANSPOSE.register(A.reduce_sum_p)
def _reduce_sum(builder, ct, node, index, lead):
    in_core = atom_shape(node.args[0])
    if lead == 0:
        if not node.shape:  # a total: the operand's cotangent is ct itself, broadcast
            return ct
        # Size-1 axes where the sum removed them: the cotangent broadcasts from there.
        return _keepdims(builder, ct, in_core, _params(node)["axes"], lead)
    return broadcast_full(builder, _keepdims(builder, ct, in_core, _params(node)["axes"], lead),
                           in_core, lead)


def array_weights(builder, node):
    """The partial derivative of a non-linear reduction w.r.t. each element of its operand.

    ``amax``/``amin``: the elements equal to the extremum share the derivative
    equally (JAX's convention at ties); ``reduce_logsumexp``: the softmax
    ``exp(x - out)``, never ``exp(x) / sum``, which overflows. Reverse mode
    multiplies the spread cotangent by these weights, forward mode sums the
    weighted tangent.
    """
    x = node.args[0]
    in_core = atom_shape(x)
    axes = _params(node)["axes"]
    out = _keepdims(builder, node, in_core, axes, 0)
    if node.primitive is A.reduce_logsumexp_p:
        return builder.record(P.exp_p, (builder.record(P.sub_p, (x, out)),))
    indicator = builder.record(P.select_p, (builder.record(P.equal_p, (x, out)),
                                            sympy.Integer(1), sympy.Integer(0)))
    count = _keepdims(builder, A.record_reduction(builder, A.reduce_sum_p, indicator, axes),
                      in_core, axes, 0)
    return builder.record(P.div_p, (indicator, count))


@TRANSPOSE.register(A.amax_p, A.amin_p, A.reduce_logsumexp_p)
def _weighted_reduction(builder, ct, node, index, lead):
    spread = _keepdims(builder, ct, atom_shape(node.args[0]), _params(node)["axes"], lead)
    return builder.record(P.mul_p, (spread, array_weights(builder, node)))


@TRANSPOSE.register(A.einsum_p)
def _einsum(builder, ct, node, index, lead):
    (sa, sb), sc = A.parse_subscripts(_params(node)["subscripts"])
    a, b = node.args
    if index == 0:
        return A.record_einsum(builder, f"{sc},{sb}->{sa}", ct, b)
    return A.record_einsum(builder, f"{sa},{sc}->{sb}", a, ct)


@TRANSPOSE.register(A.reshape_p)
def _reshape(builder, ct, node, index, lead):
    # The node's own leading dimensions (a vmap axis recorded in a trace) stay in front too.
    shape = _params(node)["shape"]
    return A.record_reshape(builder, ct, _params(node)["in_shape"], lead + len(node.shape) - len(shape))


@TRANSPOSE.register(A.transpose_p)
def _transpose(builder, ct, node, index, lead):
    perm = _params(node)["perm"]
    inverse = tuple(int(i) for i in np.argsort(perm))
    return A.record_transpose(builder, ct, inverse)


@TRANSPOSE.register(A.broadcast_p)
def _broadcast(builder, ct, node, index, lead):
    params = _params(node)
    in_shape, shape = params["in_shape"], params["shape"]
    extra = len(shape) - len(in_shape)
    axes = [axis for axis in range(extra)]
    axes += [extra + axis for axis, size in enumerate(in_shape) if size == 1 and shape[extra + axis] != 1]
    summed = A.record_reduction(builder, A.reduce_sum_p, ct, tuple(a - len(shape) for a in axes))
    return A.record_reshape(builder, summed, in_shape, lead + len(node.shape) - len(shape))


@TRANSPOSE.register(A.slice_p)
def _slice(builder, ct, node, index, lead):
    params = _params(node)
    return A.record_unslice(builder, ct, params["in_shape"], params["index"])


@TRANSPOSE.register(A.unslice_p)
def _unslice(builder, ct, node, index, lead):
    params = _params(node)
    return A.record_slice(builder, ct, params["index"], lead)


@TRANSPOSE.register(A.take_p)
def _take(builder, ct, node, index, lead):
    params = _params(node)
    return A.record_take_add(builder, ct, params["in_shape"], params["indices"], params["axis"])


@TRANSPOSE.register(A.take_add_p)
def _take_add(builder, ct, node, index, lead):
    params = _params(node)
    return A.record_take(builder, ct, params["indices"].array, params["axis"], lead)


@TRANSPOSE.register(A.argsort_p)
def _argsort(builder, ct, node, index, lead):
    return None  # integer positions, piecewise constant: no cotangent reaches the operand


@TRANSPOSE.register(A.take_along_p, A.take_along_add_p)
def _take_along(builder, ct, node, index, lead):
    # A gather and its scatter-add are each other's transpose; the indices (the second
    # operand, integers) get none.
    if index == 1:
        return None
    other = A.take_along_add_p if node.primitive is A.take_along_p else A.take_along_p
    return builder.record(other, (ct, node.args[1]), node.params)


@TRANSPOSE.register(A.concatenate_p)
def _concatenate(builder, ct, node, index, lead):
    params = _params(node)
    axis, in_shapes = params["axis"], params["in_shapes"]
    ndim = len(in_shapes[0])
    start = sum(shape[axis] for shape in in_shapes[:index])
    stop = start + in_shapes[index][axis]
    items = tuple(("s", start, stop, 1) if i == ndim + axis else ("s", 0, size, 1)
                  for i, size in enumerate(in_shapes[index]))
    return A.record_slice(builder, ct, items, lead)


@TRANSPOSE.register(A.cumsum_p)
def _cumsum(builder, ct, node, index, lead):
    params = _params(node)
    return A.record_cumsum(builder, ct, params["axis"], not params["reverse"])


@TRANSPOSE.register(A.pack_p)
def _pack(builder, ct, node, index, lead):
    params = _params(node)
    if params["has_base"]:
        if index == 0:
            return None  # the constant base
        index -= 1
    position = params["positions"][index]
    element = np.unravel_index(position, params["shape"])
    return A.record_slice(builder, ct, tuple(("i", int(i)) for i in element), lead)


@TRANSPOSE.register(A.scatter_p)
def _scatter(builder, ct, node, index, lead):
    params = _params(node)
    in_shape, item_index = params["in_shape"], params["index"]
    if index == 0:  # x: the cotangent, with zeros where v replaced x
        return builder.record(A.scatter_p, (ct, sympy.Integer(0)),
                              (("in_shape", in_shape), ("index", item_index)))
    taken = A.record_slice(builder, ct, item_index, lead)
    return unbroadcast(builder, taken, atom_shape(node.args[1]), lead)


# -- complex parts and Fourier transforms: transposes for JAX's pairing Re(ct * t) --------


@TRANSPOSE.register(A.real_p)
def _real(builder, ct, node, index, lead):
    return ct  # Re(ct * t) = ct * Re(t) for a real ct: the real cotangent, as a complex one


@TRANSPOSE.register(A.imag_p)
def _imag(builder, ct, node, index, lead):
    return builder.record(P.mul_p, (ct, -sympy.I))  # ct * Im(t) = Re(-i ct * t)


@TRANSPOSE.register(A.conj_p)
def _conj(builder, ct, node, index, lead):
    return builder.record(A.conj_p, (ct,))  # Re(ct * conj(t)) = Re(conj(ct) * t)


def modulus_weighted(builder, node, value):
    """``value * conj(z) / |z|`` for a modulus node ``|z|``, 0 at z = 0 (JAX's convention): the
    modulus' tangent is its real part for ``value = t``, its transpose it for ``value = ct``
    (the pairing Re(ct * t)). Multiplied before divided, as JAX, so |z|**2 gives 2 conj(z)
    exactly.

    >>> import symad as sd, numpy as np
    >>> abs(complex(sd.grad(lambda z: np.abs(z))(0j)))
    0.0
    >>> bool(np.isclose(sd.grad(lambda z: np.abs(z))(3 + 4j), 0.6 - 0.8j, rtol=1e-15))
    True
    """
    (z,) = node.args
    safe = builder.record(P.select_p, (builder.record(P.equal_p, (node, ZERO)), ONE, node))
    return builder.record(P.div_p, (builder.record(P.mul_p, (value, builder.record(A.conj_p, (z,)))),
                                    safe))


@TRANSPOSE.register(A.modulus_p)
def _modulus(builder, ct, node, index, lead):
    return modulus_weighted(builder, node, ct)


@TRANSPOSE.register(A.fft_p)
def _fft(builder, ct, node, index, lead):
    # The DFT matrix exp(-2 pi i j k / n) is symmetric, so it is its own transpose under
    # the bilinear pairing (the adjoint, conj(F)^T, is the inverse transform times n).
    return builder.record(A.fft_p, (ct,), node.params)


@TRANSPOSE.register(A.rfft_p)
def _rfft(builder, ct, node, index, lead):
    # rfft(x)_k = s_f sum_j x_j w^(jk) for k <= n/2 (w = e^(-2 pi i/n)), x real: the
    # transpose is Re(sum_k ct_k s_f w^(jk)) = Re(sum_k conj(ct_k) s_f w^(-jk)), which is irfft
    # of conj(ct) weighted s_f/s_i per frequency, halved where irfft reads a frequency twice
    # (s_f, s_i: the norm's forward and inverse scales) -- a real transform, half a complex one.
    params = _params(node)
    axis, norm = params["axis"], params["norm"]
    n = atom_shape(node.args[0])[axis]
    weights = _frequency_weights(n, axis, _scale(norm, n, False) / _scale(norm, n, True), 0.5)
    spectrum = builder.record(P.mul_p, (builder.record(A.conj_p, (ct,)), constant_atom(builder, weights)))
    return builder.record(A.irfft_p, (spectrum,), (("axis", axis), ("n", n), ("norm", norm)))


@TRANSPOSE.register(A.irfft_p)
def _irfft(builder, ct, node, index, lead):
    # irfft reads each c_k, 0 < k < n/2, twice (c_k and its mirror conj(c_k)) and c_0 (and
    # c_(n/2) for even n) once, real part only: the transpose is the inverse transform of the
    # real ct at those frequencies, weighted 2 or 1 -- conj(rfft(ct)) times s_i/s_f.
    params = _params(node)
    axis, n, norm = params["axis"], params["n"], params["norm"]
    weights = _frequency_weights(n, axis, _scale(norm, n, True) / _scale(norm, n, False), 2.0)
    spectrum = builder.record(A.rfft_p, (ct,), (("axis", axis), ("norm", norm)))
    return builder.record(P.mul_p, (builder.record(A.conj_p, (spectrum,)), constant_atom(builder, weights)))


def _scale(norm: str, n: int, inverse: bool) -> float:
    """NumPy's factor on a transform of ``n`` points: 1, 1/n or 1/sqrt(n)."""
    if norm == "ortho":
        return 1 / math.sqrt(n)
    return 1 / n if (norm == "forward") != inverse else 1.0


def _frequency_weights(n: int, axis: int, scale: float, twice: float) -> np.ndarray:
    """``scale`` at the n//2 + 1 frequencies of a real transform, times ``twice`` at those
    irfft reads twice (0 < k < n/2), shaped to broadcast along the negative ``axis``."""
    count = n // 2 + 1
    weights = np.full(count, scale * twice)
    weights[0] = scale
    if n % 2 == 0:
        weights[-1] = scale
    return weights.reshape((count,) + (1,) * (-axis - 1))
