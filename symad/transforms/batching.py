"""Batching: a traced function's graph recorded once for a whole batch (``sd.vmap`` inside a trace).

Called on traced values, :func:`symad.vmap` does not trace the mapped
function once per point: it records the function's graph once, with every
value that depends on a mapped argument carrying the batch axis in front.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy

from symad import array_primitives as A
from symad.atom_arrays import builder_parameter_atom
from symad.graph import ArrayInput, atom_shape, current_builder
from symad.leaves import bind_input, leaf_atoms, leaf_shape
from symad.pytree import tree_unflatten
from symad.tracer import Tracer, as_atom, as_operand

__all__ = ["inline_batched", "BATCHED_PARAMS"]

#: The primitives whose parameters describe their operands' whole shapes, not only their
#: cores (a loop's ``in_shapes`` tell its seeds and mapped axes from a batch of points):
#: ``primitive -> rule(params, args)``, the parameters of the node recorded again over
#: operands that carry the batch axis. Filled by the modules that define them.
BATCHED_PARAMS: dict = {}


def inline_batched(function, leaves: list, batched: list[bool], size: int) -> Any:
    """Record ``function``'s graph once for a whole batch: ``sd.vmap`` inside a trace.

    Each leaf marked ``batched`` carries a leading axis of ``size`` points in
    front of the traced core shape. The graph is replayed with every value
    that depends on a batched leaf carrying that axis too: the array
    primitives take leading dimensions as they are (their parameters
    describe the core), and an elementwise operand is viewed with size-1
    axes so that the core shapes line up under NumPy's broadcasting. One
    node per node of the function, whatever the batch size. Outputs come
    back with the batch axis in front (those that do not depend on it,
    broadcast).
    """
    builder = current_builder()
    bindings: dict = {}
    carried: set = set()  # atoms of this builder that carry the batch axis
    for leaf, symbols, is_batched in zip(leaves, function.in_symbols, batched):
        operand = as_atom(leaf)
        shape = leaf_shape(symbols)
        if not is_batched:
            bind_input(builder, bindings, symbols, as_operand(leaf), function.name)
            continue
        if atom_shape(operand)[1:] != tuple(shape):
            operand = A.record_broadcast(builder, operand, tuple(shape), 1)
        carried.add(operand)
        for atom in leaf_atoms(symbols) if isinstance(symbols, np.ndarray) else [symbols]:
            if isinstance(symbols, np.ndarray):  # an array of scalar symbols: one slice each
                index = np.unravel_index(leaf_atoms(symbols).index(atom), shape) if shape else ()
                bindings[atom] = A.record_slice(builder, operand, tuple(("i", int(i)) for i in index), 1)
            else:
                bindings[atom] = operand
            carried.add(bindings[atom])
        if symbols.__class__ is ArrayInput:
            for symbol in symbols.made_elements():
                element = A.record_slice(builder, operand,
                                         tuple(("i", k) for k in symbols.element_index(symbol)), 1)
                bindings[symbol] = element
                carried.add(element)
    for parameter, symbols in function.parameters:
        bind_input(builder, bindings, symbols, builder_parameter_atom(builder, parameter), function.name)
    env = dict(bindings)
    for node in function.graph.nodes:
        args = [env.get(a, a) if a.is_Symbol else a for a in node.args]
        if not any(a in carried for a in args if a.is_Symbol):
            env[node] = builder.record(node.primitive, args, node.params)
            continue
        if node.primitive.elementwise:  # size-1 axes so the cores line up behind the batch
            rank = len(node.shape)
            args = [A.record_reshape(builder, a, (1,) * (rank - len(atom_shape(a)) + 1)
                                     + atom_shape(a)[1:], 1)
                    if a.is_Symbol and a in carried and len(atom_shape(a)) - 1 < rank else a
                    for a in args]
        rule = BATCHED_PARAMS.get(node.primitive)
        value = builder.record(node.primitive, args, node.params if rule is None else rule(node.params, args))
        env[node] = value
        carried.add(value)
    out_leaves = []
    for atoms, shape in zip(function.output_atoms(), function.out_shapes):
        if isinstance(atoms, np.ndarray):
            values = [env.get(a, a) if a.is_Symbol else a for a in atoms.reshape(-1)]
            values = [v if v.is_Symbol and v in carried else A.broadcast_atom(builder, v, (size,))
                      for v in values]
            if not values:
                out_leaves.append(Tracer.of_atom(
                    A.broadcast_atom(builder, sympy.Integer(0), (size,) + shape)))
                continue
            if not shape:  # a scalar: its value over the batch
                out_leaves.append(Tracer.of_atom(values[0]))
                continue
            params = (("shape", tuple(shape)), ("positions", tuple(range(len(values)))),
                      ("has_base", False))
            out_leaves.append(Tracer.of_atom(builder.record(A.pack_p, values, params)))
            continue
        value = env.get(atoms, atoms)
        if not (value.is_Symbol and value in carried):
            value = A.record_broadcast(builder, A.record_reshape(builder, value, (1,) + shape),
                                       (size,) + shape)
        out_leaves.append(Tracer.of_atom(value))
    return tree_unflatten(function.out_treedef, out_leaves)
