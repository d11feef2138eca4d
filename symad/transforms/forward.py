"""Forward mode: tangents pushed through the nodes in topological order."""

from __future__ import annotations

from collections.abc import Sequence

from symad.graph import GraphBuilder, Node, is_zero_constant
from symad.primitives import mul_p
from symad.transforms.terms import partial_atoms, sum_terms


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
        partials = partial_atoms(node, seeded, function_name)
        terms = [builder.record(mul_p, (partial, tangent_of[node.args[index]]))
                 for index, partial in partials.items()]
        total = sum_terms(builder, terms)
        if total is not None and not is_zero_constant(total):
            tangent_of[node.symbol] = total
    return tangent_of
