"""Reverse mode: adjoints accumulated over the nodes in reverse topological order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sympy

from symad.graph import GraphBuilder, Node, is_zero_constant
from symad.primitives import mul_p
from symad.transforms.terms import partial_atoms, sum_terms


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

    terms: dict = {}
    for atom, cotangent in seeds:
        if atom in active and not is_zero_constant(cotangent):
            terms.setdefault(atom, []).append(cotangent)

    for node in reversed(primal_nodes):
        if node.symbol not in terms:
            continue
        cotangent = sum_terms(builder, terms.pop(node.symbol))
        wanted = [index for index, arg in enumerate(node.args) if arg in active]
        for index, partial in partial_atoms(node, wanted, function_name).items():
            term = builder.record(mul_p, (cotangent, partial))
            terms.setdefault(node.args[index], []).append(term)

    zero = sympy.Integer(0)
    return [sum_terms(builder, terms.get(atom)) if atom in terms else zero for atom in wrt]
