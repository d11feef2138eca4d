"""Reverse mode: adjoints accumulated over the nodes in reverse topological order.

A ``where(c, a, b)`` node passes its cotangent to ``a`` only where ``c`` holds
and to ``b`` only where it does not. Multiplying the cotangent by the 0/1
indicator and then by the partials of the branch is not enough: a partial
that is infinite in the branch *not* taken (``1/(2*sqrt(x))`` at ``x = 0``)
turns ``0 * inf`` into ``nan``. So a cotangent that crossed a branch carries
the branch condition along as its **mask**, the chain-rule products are formed
inside the mask, and the mask is applied -- ``select(mask, product, 0)``,
outermost -- only where the cotangent stops being multiplied: where it meets
cotangents under another mask, and at the differentiated inputs. Whatever
nan or inf the untaken region produced is then discarded by the select.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sympy

from symad.graph import GraphBuilder, Node, is_zero_constant
from symad.primitives import logical_and_p, logical_not_p, mul_p, select_p
from symad.transforms.terms import partial_atoms, sum_terms

ZERO = sympy.Integer(0)

# A mask is None (no condition: the term holds everywhere) or a tuple of
# literals ``(condition_atom, taken)``, their conjunction: ``taken`` is True
# for the ``if_true`` branch of a where, False for ``if_false``.
_NEVER = "never"  # the conjunction of a condition and its negation


def backpropagate(
    builder: GraphBuilder,
    primal_nodes: Sequence[Node],
    seeds: Iterable[tuple],
    wrt: Sequence,
    function_name: str,
) -> list:
    """Cotangents of the ``wrt`` atoms, given cotangent ``seeds`` on output atoms.

    Args:
        builder: the active builder holding ``primal_nodes``; derivative nodes are recorded in it.
        primal_nodes: the nodes to differentiate through, in topological order.
        seeds: ``(atom, cotangent_atom)`` pairs; repeated atoms accumulate.
        wrt: the atoms (usually input symbols) whose cotangents are wanted.
        function_name: the user's function, for error messages.

    Returns:
        One atom per ``wrt`` entry; exact ``0`` where no path leads to the outputs.
    """
    # Only nodes that depend on a wrt atom can carry a non-zero adjoint to it.
    active = {atom for atom in wrt if atom.is_Symbol}  # a constant wrt entry has cotangent 0
    for node in primal_nodes:
        if any(arg in active for arg in node.args):
            active.add(node.symbol)

    # atom -> list of (cotangent term, mask) pairs still to be summed
    terms: dict = {}
    for atom, cotangent in seeds:
        if atom in active and not is_zero_constant(cotangent):
            terms.setdefault(atom, []).append((cotangent, None))

    for node in reversed(primal_nodes):
        if node.symbol not in terms:
            continue
        cotangent, mask = _combine(builder, terms.pop(node.symbol))
        wanted = [index for index, arg in enumerate(node.args) if arg in active]
        if node.primitive is select_p:
            # Each branch receives the cotangent under its own condition; the
            # condition itself (index 0) has no derivative.
            condition = node.args[0]
            for index in wanted:
                if index == 0:
                    continue
                branch_mask = _conjoin(builder, mask, (condition, index == 1))
                if branch_mask is not _NEVER:
                    terms.setdefault(node.args[index], []).append((cotangent, branch_mask))
            continue
        for index, partial in partial_atoms(node, wanted, function_name).items():
            term = builder.record(mul_p, (cotangent, partial))
            terms.setdefault(node.args[index], []).append((term, mask))

    results = []
    for atom in wrt:
        if atom in terms:
            total, mask = _combine(builder, terms[atom])
            results.append(_apply_mask(builder, total, mask))
        else:
            results.append(ZERO)
    return results


def _combine(builder: GraphBuilder, masked_terms: list) -> tuple:
    """One ``(cotangent, mask)`` from the terms reaching an atom.

    Terms under the same mask are summed and stay masked (the common case: a
    single where upstream). Terms under different masks are each masked
    first, then summed: from there on the sum is an ordinary cotangent.
    """
    by_mask: dict = {}
    for term, mask in masked_terms:
        by_mask.setdefault(mask, []).append(term)
    if len(by_mask) == 1:
        ((mask, group),) = by_mask.items()
        return sum_terms(builder, group), mask
    applied = [_apply_mask(builder, sum_terms(builder, group), mask) for mask, group in by_mask.items()]
    return sum_terms(builder, applied), None


def _conjoin(builder: GraphBuilder, mask, literal):
    """``mask`` and ``literal``, in a canonical order; ``_NEVER`` if they contradict."""
    if mask is None:
        return (literal,)
    condition, taken = literal
    if (condition, not taken) in mask:
        return _NEVER
    if literal in mask:
        return mask
    return tuple(sorted(mask + (literal,), key=lambda lit: (builder.sort_key(lit[0]), lit[1])))


def _apply_mask(builder: GraphBuilder, value, mask):
    """``value`` where ``mask`` holds, exact 0 elsewhere (nan and inf there are discarded)."""
    if mask is None:
        return value
    if len(mask) == 1:
        ((condition, taken),) = mask
        branches = (value, ZERO) if taken else (ZERO, value)
        return builder.record(select_p, (condition, *branches))
    holds = None
    for condition, taken in mask:
        literal = condition if taken else builder.record(logical_not_p, (condition,))
        holds = literal if holds is None else builder.record(logical_and_p, (holds, literal))
    return builder.record(select_p, (holds, value, ZERO))
