"""Forward mode: the tangent table, for the primitives whose tangent is not the chain rule
through their partials (the array primitives, ``where``).

Every rule is ``rule(builder, node, tangents, lead) -> tangent of the node``, where
``tangents`` holds each operand's tangent at the operand's full shape (None: an exact
zero), behind ``lead`` leading dimensions of seeds. A linear primitive (the stanza's
``kind``, as JAX's ``deflinear``) applied to its operands' tangents is its tangent;
``einsum`` is bilinear (``da b + a db``); the other reductions weigh the tangent and sum
it (:func:`symad.rules.transposes.array_weights`); ``where`` picks the tangent of the branch
taken. Other elementwise primitives go through their partials
(:data:`symad.primitives.PARTIALS`).

>>> from symad import array_primitives as A
>>> A.reshape_p in TANGENT, TANGENT.reason_missing(A.constant_p)
(True, 'a constant array: it has no operands')
"""

from __future__ import annotations

import sympy

from symad import array_primitives as A
from symad.graph import GraphBuilder, atom_shape
from symad.ir.primitive import RuleTable
from symad.primitives import add_p, mul_p, select_p
from symad.rules.transposes import array_weights, modulus_weighted

__all__ = ["TANGENT", "aligned"]

ZERO = sympy.Integer(0)

TANGENT = RuleTable("tangent", default_reason=lambda primitive: (
    "the chain rule through its partials" if primitive.elementwise else None))
TANGENT.no_rule("a constant array: it has no operands", A.constant_p)


def aligned(builder: GraphBuilder, tangent, rank: int, lead: int):
    """A tangent with seeds in front, its core given size-1 axes up to ``rank`` so that
    NumPy's right-aligned broadcasting keeps the seeds apart from the core."""
    shape = atom_shape(tangent)
    if not lead or not tangent.is_Symbol or len(shape) - lead >= rank:
        return tangent
    core = shape[lead:]
    return A.record_reshape(builder, tangent, (1,) * (rank - len(core)) + core, lead)


def _zeros(builder: GraphBuilder, atom):
    shape = atom_shape(atom)
    return ZERO if not shape else A.broadcast_atom(builder, ZERO, shape)


@TANGENT.register(*[primitive for primitive in A.ARRAY_PRIMITIVES
                    if primitive.kind == "linear" and primitive is not A.constant_p])
def _linear(builder, node, tangents, lead):
    operands = [t if t is not None else _zeros(builder, arg) for t, arg in zip(tangents, node.args)]
    return builder.record(node.primitive, operands, node.params)


@TANGENT.register(A.einsum_p)
def _einsum(builder, node, tangents, lead):
    (a, b), (ta, tb) = node.args, tangents
    if lead:
        # Each tangent's leading (batch) dimensions get the rank of the result's, so that
        # the seeds in front broadcast against nothing of the other operand's.
        (letters_a, letters_b), letters_out = A.parse_subscripts(dict(node.params)["subscripts"])
        batch = len(node.shape) - len(letters_out)
        ta = None if ta is None else aligned(builder, ta, batch + len(letters_a), lead)
        tb = None if tb is None else aligned(builder, tb, batch + len(letters_b), lead)
    terms = []
    if ta is not None:
        terms.append(builder.record(node.primitive, (ta, b), node.params))
    if tb is not None:
        terms.append(builder.record(node.primitive, (a, tb), node.params))
    return terms[0] if len(terms) == 1 else builder.record(add_p, terms)


@TANGENT.register(A.amax_p, A.amin_p, A.reduce_logsumexp_p)
def _weighted_reduction(builder, node, tangents, lead):
    weights = array_weights(builder, node)
    weighted = builder.record(mul_p, (tangents[0], weights))
    return A.record_reduction(builder, A.reduce_sum_p, weighted, dict(node.params)["axes"])


@TANGENT.register(A.argsort_p)
def _argsort(builder, node, tangents, lead):
    return None  # piecewise constant


@TANGENT.register(A.take_along_p, A.take_along_add_p)
def _take_along(builder, node, tangents, lead):
    # Linear in its first operand; the indices (integers) carry no tangent.
    if tangents[0] is None:
        return None
    return builder.record(node.primitive, (tangents[0], node.args[1]), node.params)


@TANGENT.register(select_p)
def _select(builder, node, tangents, lead):
    # The tangent of where(c, a, b) is where(c, a_dot, b_dot): the branch
    # not taken is discarded whole, with any nan or inf in its tangent
    # (a sum of products with 0/1 masks would give 0 * inf = nan).
    # With seeds in front, each branch's tangent gets the node's full rank first, so
    # that the condition (no seeds) broadcasts against its core, not the seeds.
    condition, (_, if_true, if_false) = node.args[0], tangents
    return builder.record(select_p, (
        condition,
        aligned(builder, ZERO if if_true is None else if_true, len(node.shape), lead),
        aligned(builder, ZERO if if_false is None else if_false, len(node.shape), lead)))


@TANGENT.register(A.modulus_p)
def _modulus(builder, node, tangents, lead):
    (t,) = tangents
    return builder.record(A.real_p, (modulus_weighted(builder, node, t),))
