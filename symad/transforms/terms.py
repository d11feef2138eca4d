"""Pieces both sweeps share: a node's partial as an atom, and sums of chain-rule terms."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from symad.errors import DifferentiationError
from symad.graph import GraphBuilder, Node, is_zero_constant
from symad.primitives import add_p, neg_p, sub_p
from symad.rules import partials as _registers_partial_rules  # noqa: F401  (fills Primitive.partials)
from symad.tracer import Tracer, as_atom, as_atoms, scalar_atom


def partial_atoms(node: Node, indices: Sequence[int], function_name: str) -> dict:
    """``{index: partial}`` of ``node`` w.r.t. the operands at ``indices``; zeros are left out.

    The rules receive the operands as traced scalars (each holding its atom,
    with no object array behind it), made once per node, not once per
    partial: an n-ary sum would otherwise cost n**2.
    """
    primitive = node.primitive
    if not indices:
        return {}
    if not primitive.elementwise and primitive.kind == "array" and "axes" not in dict(node.params):
        # Linear algebra (inv, solve, ...): no partial is one array of the operand's shape.
        raise DifferentiationError(
            f"Taylor mode (sd.derivative, sd.taylor) has no rule for {primitive.name!r}, needed to "
            f"differentiate function {function_name!r}: its derivative is a matrix product, not "
            "one weight per element. Nest sd.jvp (or sd.grad) for higher derivatives through it")
    if not primitive.elementwise and primitive.kind == "array":
        # A non-linear reduction: its operand's partial is each element's weight.
        from symad.graph import current_builder
        from symad.rules.transposes import array_weights

        return {0: array_weights(current_builder(), node)}
    if not primitive.has_partials:
        raise DifferentiationError(
            f"no partial derivative of {primitive.name!r} w.r.t. argument {indices[0]}, needed "
            f"to differentiate function {function_name!r}; give the primitive its partials with "
            f"@{primitive.name}.defpartials, or wrap the value in sd.stop_gradient"
        )
    operands = [Tracer.of_atom(atom) for atom in node.args]
    partials = {}
    out = Tracer.of_atom(node)
    for index, partial in primitive.partials_at(out, operands, indices).items():
        if partial is None:
            continue
        atom = scalar_atom(partial)  # a traced atom or a number: no array to look into
        if atom is None:
            atoms = as_atoms(partial)
            if atoms.ndim != 0 and not node.shape:
                raise DifferentiationError(
                    f"the partial derivative rule of {primitive.name!r} w.r.t. argument {index} "
                    f"returned shape {atoms.shape}; a partial of a scalar primitive must be a scalar"
                )
            atom = atoms[()] if atoms.ndim == 0 else as_atom(partial)
        if not is_zero_constant(atom):
            partials[index] = atom
    return partials


def partial_atom_columns(nodes: Sequence[Node], indices: Sequence[int], function_name: str) -> dict:
    """``{index: [partial, ...]}``, one partial per node, for like nodes (one primitive and params).

    The primitive's rules must broadcast (``Primitive.broadcasting_partials``):
    each is called once, on arrays holding the nodes' operands and results,
    so a run of ``n`` nodes costs ``n`` records and one rule call, not ``n``
    rule calls. Partials that are structurally zero for every node are left out.
    """
    primitive = nodes[0].primitive
    count = len(nodes)
    operands = [_operand_column([node.args[position] for node in nodes])
                for position in range(len(nodes[0].args))]
    out = Tracer(_object_column([node for node in nodes]))
    columns = {}
    for index, partial in primitive.partials_at(out, operands, indices).items():
        if partial is None:
            continue
        atoms = as_atoms(partial)
        if atoms.shape == (count,):
            columns[index] = atoms.tolist()
        elif atoms.ndim == 0:  # the same partial for every node (a constant)
            columns[index] = [atoms[()]] * count
        else:
            raise DifferentiationError(
                f"the partial derivative rule of {primitive.name!r} w.r.t. argument {index} "
                f"returned shape {atoms.shape} for {count} operands, in function {function_name!r}"
            )
    return columns


def _operand_column(atoms: list) -> Tracer:
    """The traced array of ``atoms``, or a traced scalar where they are all one atom.

    One atom for every node is usually a constant (the exponent 2 of a run of
    squares): as a scalar, what the rule computes from it alone (``2 - 1``) is
    recorded once instead of once per node.
    """
    first = atoms[0]
    if all(atom is first for atom in atoms):
        return Tracer.of_atom(first)
    return Tracer(_object_column(atoms))


def _object_column(atoms: list) -> np.ndarray:
    column = np.empty(len(atoms), dtype=object)
    column[:] = atoms
    return column


def sum_terms(builder: GraphBuilder, terms: Sequence | None):
    """The sum of chain-rule ``terms`` (None when there are none).

    Negated terms are subtracted rather than negated and added, so that
    ``a - b`` costs one node, not two.
    """
    if not terms:
        return None
    positive, negative = [], []
    for term in terms:
        node = builder.node_of(term)
        if node is not None and node.primitive is neg_p:
            negative.append(node.args[0])
        elif term.is_Number and term.is_negative:
            negative.append(-term)
        else:
            positive.append(term)
    plus = _add_all(builder, positive)
    minus = _add_all(builder, negative)
    if minus is None:
        return plus
    if plus is None:
        return builder.record(neg_p, (minus,))
    return builder.record(sub_p, (plus, minus))


def _add_all(builder: GraphBuilder, atoms: list):
    if not atoms:
        return None
    if len(atoms) == 1:
        return atoms[0]
    return builder.record(add_p, atoms)

