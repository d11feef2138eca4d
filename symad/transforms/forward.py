"""Forward mode: tangents pushed through the nodes in topological order."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import sympy

from symad.graph import GraphBuilder, Node, atom_shape, is_zero_constant
from symad.primitives import mul_p
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
        rule = TANGENT.get(node.primitive)
        if rule is not None:
            total = tangent_by_rule(builder, node, rule, [tangent_of.get(arg) for arg in node.args], lead)
        else:  # the chain rule through the partials
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


def tangent_by_rule(builder: GraphBuilder, node: Node, rule, tangents: list, lead: int = 0):
    """The tangent of ``node`` by its ``rule`` of the tangent table
    (:data:`symad.rules.tangents.TANGENT`), given its operands' tangents (None: zero); an
    array primitive's rule gets them at their operands' full shapes."""
    if not node.primitive.elementwise:
        tangents = [None if t is None else full_shape(builder, t, atom_shape(arg), lead)
                    for t, arg in zip(tangents, node.args)]
    return rule(builder, node, tangents, lead)
