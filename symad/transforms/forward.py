"""Forward mode: tangents pushed through the nodes in topological order."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import sympy

from symad.errors import DifferentiationError
from symad.graph import GraphBuilder, Node, atom_shape, is_zero_constant
from symad.primitives import mul_p, select_p
from symad.rules.tangents import TANGENT, aligned
from symad.transforms.reverse import full_shape
from symad.transforms.terms import partial_atoms, sum_terms

ZERO = sympy.Integer(0)


def consumer_index(primal_nodes: Sequence[Node]) -> dict:
    """``{atom: [positions of the nodes using it]}`` over ``primal_nodes``, built once per graph.

    With it, :func:`push_forward` visits only the nodes a seed reaches (its
    cone of influence) instead of every node: a Jacobian column of a sparse
    function then costs what its non-zeros cost, not the whole graph.
    """
    consumers: dict = {}
    for position, node in enumerate(primal_nodes):
        for atom in node.args:
            users = consumers.setdefault(atom, [])
            if not users or users[-1] != position:
                users.append(position)
    return consumers


def push_forward(
    builder: GraphBuilder,
    primal_nodes: Sequence[Node],
    tangents: dict,
    function_name: str,
    consumers: dict | None = None,
    lead: int = 0,
) -> dict:
    """Tangents of every node reached from the seeded ``tangents`` (atom -> tangent atom).

    Atoms missing from the result have an exact zero tangent. Given the
    ``consumers`` of :func:`consumer_index`, only the seeds' cone of
    influence is visited, in topological order. ``lead``: the number of
    leading dimensions of seeds every tangent carries (a Jacobian's columns,
    pushed at once), in front of the full shape of its atom.
    """
    tangent_of = {atom: t for atom, t in tangents.items() if not is_zero_constant(t)}
    for node in _reached_nodes(primal_nodes, tangent_of, consumers):
        seeded = [index for index, arg in enumerate(node.args) if arg in tangent_of]
        if not seeded:
            continue
        if not node.primitive.elementwise:
            total = array_tangent(builder, node, [tangent_of.get(arg) for arg in node.args], lead)
        elif node.primitive is select_p:
            # The tangent of where(c, a, b) is where(c, a_dot, b_dot): the branch
            # not taken is discarded whole, with any nan or inf in its tangent
            # (a sum of products with 0/1 masks would give 0 * inf = nan).
            # With seeds in front, each branch's tangent gets the node's full rank first, so
            # that the condition (no seeds) broadcasts against its core, not the seeds.
            condition, if_true, if_false = node.args
            total = builder.record(select_p, (
                condition,
                aligned(builder, tangent_of.get(if_true, ZERO), len(node.shape), lead),
                aligned(builder, tangent_of.get(if_false, ZERO), len(node.shape), lead)))
        else:
            partials = partial_atoms(node, seeded, function_name)
            terms = [builder.record(mul_p, (partial, aligned(builder, tangent_of[node.args[index]],
                                                              len(node.shape), lead)))
                     for index, partial in partials.items()]
            total = sum_terms(builder, terms)
        if total is not None and not is_zero_constant(total):
            tangent_of[node] = total
    return tangent_of


def _reached_nodes(primal_nodes: Sequence[Node], seeded: dict, consumers: dict | None):
    """The nodes a forward sweep must visit, in topological order."""
    if consumers is None:
        yield from primal_nodes
        return
    pending = sorted({position for atom in seeded for position in consumers.get(atom, ())})
    queued = set(pending)
    while pending:
        position = heapq.heappop(pending)
        node = primal_nodes[position]
        yield node
        # The caller has recorded the node's tangent (or found it zero) by now.
        if node in seeded:
            for consumer in consumers.get(node, ()):
                if consumer not in queued:
                    queued.add(consumer)
                    heapq.heappush(pending, consumer)


def array_tangent(builder: GraphBuilder, node: Node, tangents: list, lead: int = 0):
    """The tangent of an array node given its operands' tangents (None: zero), by the
    primitive's rule in the tangent table (:data:`symad.rules.tangents.TANGENT`)."""
    rule = TANGENT.get(node.primitive)
    if rule is None:
        raise DifferentiationError(f"no forward-mode rule for the array operation {node.primitive.name!r}")
    tangents = [None if t is None else full_shape(builder, t, atom_shape(arg), lead)
                for t, arg in zip(tangents, node.args)]
    return rule(builder, node, tangents, lead)
