"""Forward mode: tangents pushed through the nodes in topological order."""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from symad.graph import GraphBuilder, Node, is_zero_constant
from symad.primitives import mul_p, select_p
from symad.transforms.terms import partial_atoms, sum_terms

ZERO = sympy.Integer(0)


def push_forward(
    builder: GraphBuilder,
    primal_nodes: Sequence[Node],
    tangents: dict,
    function_name: str,
) -> dict:
    """Tangents of every node reached from the seeded ``tangents`` (atom -> tangent atom).

    Atoms missing from the result have an exact zero tangent.
    """
    tangent_of = {atom: t for atom, t in tangents.items() if not is_zero_constant(t)}
    for node in primal_nodes:
        seeded = [index for index, arg in enumerate(node.args) if arg in tangent_of]
        if not seeded:
            continue
        if node.primitive is select_p:
            # The tangent of where(c, a, b) is where(c, a_dot, b_dot): the branch
            # not taken is discarded whole, with any nan or inf in its tangent
            # (a sum of products with 0/1 masks would give 0 * inf = nan).
            condition, if_true, if_false = node.args
            total = builder.record(select_p, (condition, tangent_of.get(if_true, ZERO),
                                              tangent_of.get(if_false, ZERO)))
        else:
            partials = partial_atoms(node, seeded, function_name)
            terms = [builder.record(mul_p, (partial, tangent_of[node.args[index]]))
                     for index, partial in partials.items()]
            total = sum_terms(builder, terms)
        if total is not None and not is_zero_constant(total):
            tangent_of[node.symbol] = total
    return tangent_of
