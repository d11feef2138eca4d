"""The NumPy evaluator: one NumPy call per node, over whole batches at once.

Every scalar input of the graph is fed a NumPy array holding that element
for every point of the batch, so one pass over the node list evaluates the
whole batch. The program (which slot each node reads and writes) is worked
out once per graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from symad.graph import Graph, constant_value, is_constant


class NumpyEvaluator:
    """Evaluate a Graph's outputs from its inputs with NumPy.

    >>> import sympy, numpy as np
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import sin_p
    >>> x = sympy.Symbol("x"); builder = GraphBuilder()
    >>> builder.add_input(x)
    >>> evaluator = NumpyEvaluator(builder.finish([builder.record(sin_p, (x,))]))
    >>> evaluator([np.array([0.0, np.pi / 2])])[0]
    array([0., 1.])
    """

    def __init__(self, graph: Graph):
        slot_of = {symbol: slot for slot, symbol in enumerate(graph.inputs)}
        free = graph.free_symbols()
        if free:
            names = ", ".join(sorted(str(s) for s in free))
            from symad.errors import CompileError

            raise CompileError(
                f"the graph refers to values of an enclosing trace ({names}); it can only be "
                "evaluated inside that trace"
            )
        self.input_count = len(graph.inputs)
        program = []
        for node in graph.nodes:
            operands = tuple(self._operand(atom, slot_of) for atom in node.args)
            slot_of[node.symbol] = len(slot_of)
            program.append((node.primitive.numpy_impl, operands, dict(node.params)))
        self.program = program
        self.outputs = tuple(self._operand(atom, slot_of) for atom in graph.outputs)

    @staticmethod
    def _operand(atom, slot_of) -> tuple[bool, object]:
        """``(True, slot)`` for a computed value, ``(False, value)`` for a constant."""
        if is_constant(atom):
            return (False, constant_value(atom))
        return (True, slot_of[atom])

    def __call__(self, input_values: Sequence) -> list:
        values = list(input_values)
        with np.errstate(all="ignore"):  # like JAX: inf and nan propagate silently
            for implementation, operands, params in self.program:
                args = [values[ref] if is_slot else ref for is_slot, ref in operands]
                values.append(implementation(*args, **params))
        return [values[ref] if is_slot else ref for is_slot, ref in self.outputs]
