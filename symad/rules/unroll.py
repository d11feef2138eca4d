"""Each array primitive element by element: the rules of the unrolling transform.

:func:`symad.function.unroll` turns an array program into the graph a
trace of its elements would record: every array becomes an object array of
scalar atoms, every array node the scalar nodes of its elements. It is the
per-element view of a Function (``F.expand()``, ``F.formula(expand=True)``):
small arrays read element by element, and code that only knows scalar graphs
(the C export, the scalar compiler) takes array programs through it.

A rule is ``rule(operands, **params) -> object array of scalar atoms``, where
``operands`` are object arrays of scalar atoms (with any leading dimensions
the node's operands had). Sums and products record one n-ary node per output
element, as the element-level code of ``symad.numpy`` does, so an unrolled
``x @ w`` is the graph the elements would have given.

A primitive whose stanza is ``object_safe`` (reshape, slices, ``take``, concatenation, a
cumulative sum: NumPy code that only moves or adds elements) has no rule written here:
its own NumPy implementation runs on the elements.

>>> from symad import array_primitives as A
>>> A.reduce_sum_p in UNROLL
True
"""

from __future__ import annotations

import numpy as np
import sympy

from symad import array_primitives as A
from symad import numpy as snp
from symad import primitives as P
from symad.graph import current_builder
from symad.ir.primitive import RuleTable
from symad.tracer import Tracer, as_atoms

__all__ = ["UNROLL"]

ZERO = sympy.Integer(0)


def _atoms(value) -> np.ndarray:
    """An element-level traced value (or object array of tracers) as an object array of atoms."""
    if isinstance(value, Tracer):
        return value.atoms
    out = np.empty(np.shape(value), dtype=object)
    flat = out.reshape(-1)
    for position, element in enumerate(np.asarray(value, dtype=object).reshape(-1)):
        flat[position] = element.atoms[()] if isinstance(element, Tracer) else element
    return out


def _tracers(atoms: np.ndarray) -> np.ndarray:
    """Object array of scalar tracers, so NumPy's object-array arithmetic records nodes."""
    out = np.empty(atoms.shape, dtype=object)
    flat = out.reshape(-1)
    for position, atom in enumerate(atoms.reshape(-1)):
        flat[position] = Tracer.of_atom(atom) if atom.is_Symbol else atom
    return out


def _reduction(function):
    def rule(x, *, axes):
        return _atoms(function(Tracer(x), axis=axes))
    return rule


def _einsum(a, b, *, subscripts):
    """Each output element: one n-ary sum of the products of its terms, zero constants skipped."""
    builder = current_builder()
    (sa, sb), sc = A.parse_subscripts(subscripts)
    lead_a, lead_b = a.shape[: a.ndim - len(sa)], b.shape[: b.ndim - len(sb)]
    lead = np.broadcast_shapes(lead_a, lead_b)
    sizes = dict(zip(sa, a.shape[a.ndim - len(sa):]))
    sizes.update(zip(sb, b.shape[b.ndim - len(sb):]))
    contracted = [c for c in dict.fromkeys(sa + sb) if c not in sc]
    out_shape = tuple(sizes[c] for c in sc)
    a = np.broadcast_to(a, lead + a.shape[a.ndim - len(sa):])
    b = np.broadcast_to(b, lead + b.shape[b.ndim - len(sb):])
    out = np.empty(lead + out_shape, dtype=object)
    for lead_index in np.ndindex(lead):
        for out_index in np.ndindex(out_shape):
            place = dict(zip(sc, out_index))
            terms = []
            for summed in np.ndindex(tuple(sizes[c] for c in contracted)):
                place.update(zip(contracted, summed))
                left = a[lead_index + tuple(place[c] for c in sa)]
                right = b[lead_index + tuple(place[c] for c in sb)]
                term = builder.record(P.mul_p, (left, right))
                if not (term.is_Number and term.is_zero):
                    terms.append(term)
            out[lead_index + out_index] = (ZERO if not terms else terms[0] if len(terms) == 1
                                           else builder.record(P.add_p, terms))
    return out


def _structural(function):
    """A rule that only moves elements: NumPy's own function on the object array (a copy, so
    that no read-only broadcast view of atoms is handed on)."""
    def rule(*operands, **params):
        return np.array(function(*operands, **params), dtype=object)
    return rule


def _arithmetic(function):
    """A rule that adds elements (a cumulative sum, a scatter-add): NumPy on scalar tracers."""
    def rule(*operands, **params):
        return _atoms(function(*[_tracers(o) for o in operands], **params))
    return rule


def _by_numpy_impl(primitive):
    """An object-safe stanza's own NumPy implementation, applied to the elements: on the
    atoms where it moves them, on scalar tracers (recording the sums) where it adds them."""
    wrap = _structural if primitive.moves else _arithmetic
    return wrap(primitive.numpy_impl)


def _unslice(v, *, in_shape, index):
    part = len(A.part_shape(in_shape, index))
    lead = v.shape[: v.ndim - part]
    out = np.full(lead + tuple(in_shape), ZERO, dtype=object)
    out[(Ellipsis,) + A.index_objects(index)] = v
    return out


def _take_add(v, *, in_shape, indices, axis):
    part = len(in_shape) - 1 + indices.array.ndim
    lead = v.shape[: v.ndim - part]
    out = np.full(lead + tuple(in_shape), ZERO, dtype=object)
    at = len(in_shape) + axis
    index = (Ellipsis,) + (slice(None),) * at + (indices.array,) + (slice(None),) * (-axis - 1)
    np.add.at(out, index, v)
    return out


def _pack(*operands, shape, positions, has_base):
    operands = list(operands)
    base = operands.pop(0) if has_base else None
    lead = np.broadcast_shapes(*[o.shape for o in operands],
                               *([base.shape[: base.ndim - len(shape)]] if base is not None else []))
    size = int(np.prod(shape))
    out = np.empty(lead + (size,), dtype=object)
    if base is not None:
        out[...] = np.broadcast_to(base.reshape(base.shape[: base.ndim - len(shape)] + (size,)),
                                   lead + (size,))
    for position, operand in zip(positions, operands):
        out[..., position] = np.broadcast_to(operand, lead)
    return out.reshape(lead + tuple(shape))


def _scatter(x, v, *, in_shape, index):
    out = np.array(x, dtype=object)
    out[(Ellipsis,) + A.index_objects(index)] = v
    return out


#: Each array primitive's rule, element by element.
UNROLL = RuleTable("unroll", applies=lambda primitive: not primitive.elementwise)
UNROLL.update({
    A.constant_p: lambda *, value: (as_atoms(value.array) if value.exact is None
                                    else np.full(value.array.shape, value.exact, dtype=object)),
    A.reduce_sum_p: _reduction(snp.sum),
    A.amax_p: _reduction(snp.max),
    A.amin_p: _reduction(snp.min),
    A.reduce_logsumexp_p: _reduction(snp.logsumexp),
    A.einsum_p: _einsum,
    A.unslice_p: _unslice,
    A.take_add_p: _arithmetic(_take_add),
    A.pack_p: _structural(_pack),
    A.scatter_p: _structural(_scatter),
})
UNROLL.update({primitive: _by_numpy_impl(primitive) for primitive in A.ARRAY_PRIMITIVES
               if primitive.object_safe})
# The complex parts, element by element (each element's own real/imag/conj node).
UNROLL.update({A.real_p: _arithmetic(np.vectorize(snp.real, otypes=[object])),
               A.imag_p: _arithmetic(np.vectorize(snp.imag, otypes=[object])),
               A.conj_p: _arithmetic(np.vectorize(snp.conj, otypes=[object])),
               A.modulus_p: _arithmetic(np.vectorize(snp.abs, otypes=[object]))})
UNROLL.no_rule("a Fourier transform: every element depends on a whole line, n**2 scalar terms; "
               "its array program evaluates it whole", A.fft_p, A.rfft_p, A.irfft_p)
UNROLL.no_rule("sorting: the permutation depends on the values, which element atoms do not "
               "have; it stays one whole-array node", A.argsort_p, A.take_along_p, A.take_along_add_p)
