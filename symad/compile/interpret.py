"""Evaluating a graph node by node in another arithmetic: mpmath numbers, mpmath intervals.

The float64 backends generate code; the precision backends (``F.compile("mpmath",
dps=...)``, ``F.compile("interval", dps=...)``) walk the very graph the others
compile, ``graph.nodes`` in order, and apply each node's primitive through one
table keyed by the primitive's registered name (:class:`Arithmetic`). Nothing is inlined into a
formula first, so a derivative graph of 10^4 nodes with shared subexpressions
costs 10^4 operations at any precision, not the size of its expanded tree.

The table's entries take their operands' values (and the node's parameters as
keywords) and return the node's value. Today every primitive is elementwise and
every value a scalar; a primitive on whole arrays (``reduce_sum``, ``einsum``)
is one more entry taking and returning object arrays of the same numbers.

A batch of points (leading dimensions of the arguments beyond the traced core
shapes, broadcast like NumPy's) is a loop over points here: each point walks the
graph once, and the outputs come back as object arrays of the batch's shape.
"""

from __future__ import annotations

import fractions
import math
import numbers
import threading
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import sympy

from symad.compile.batch import batch_shape
from symad.errors import CompileError
from symad.graph import Node, is_constant
from symad.pytree import tree_flatten, tree_unflatten

__all__ = ["Arithmetic", "GraphProgram", "PreciseFunction", "PRECISION_LOCK", "scalar_argument",
           "number_constant"]

#: mpmath keeps its working precision in a context shared by the process (``mp.prec``,
#: ``iv.prec``); an evaluation sets it for its duration under this lock, so that two
#: threads evaluating at different precisions do not change each other's.
PRECISION_LOCK = threading.RLock()


class Arithmetic:
    """What a precision backend provides: its numbers, its table of primitives, its precision.

    Subclasses set ``name`` and define ``implementation(primitive)`` (from their
    table) and the conversions; None means there is none.
    """

    name = ""

    def __init__(self, dps: int):
        self.dps = dps

    def implementation(self, primitive) -> Callable | None:
        raise NotImplementedError

    def missing(self, primitive, function_name: str) -> str:
        """Why ``primitive`` cannot be evaluated here, and what to do (a CompileError's message)."""
        raise NotImplementedError

    def precision(self):
        """A context manager in which this backend computes at its working precision."""
        raise NotImplementedError

    def constant(self, atom) -> Any:
        """An exact constant of the graph (a SymPy number) at the working precision."""
        raise NotImplementedError

    def argument(self, value, where: str) -> Any:
        """One scalar a user passed, as this backend's number (a clear error if it is none)."""
        raise NotImplementedError

    def finish(self, value, where: str) -> Any:
        """An output value as returned to the user (a backend may refuse one here)."""
        return value


class GraphProgram:
    """A graph as a list of steps over numbered slots: the inputs, the constants, then the nodes.

    Built once per compiled function; :meth:`run` evaluates one point.
    """

    def __init__(self, graph, arithmetic: Arithmetic, function_name: str):
        free = graph.free_symbols()
        if free:
            raise CompileError(
                f"{function_name}: the graph uses values of an enclosing trace "
                f"({', '.join(sorted(map(str, free))[:3])}); it can only be inlined there, not "
                f"evaluated with the {arithmetic.name} backend")
        slot_of: dict = {symbol: position for position, symbol in enumerate(graph.inputs)}
        self.input_count = len(slot_of)
        with PRECISION_LOCK, arithmetic.precision():  # constants: at the working precision
            self.constants = []
            constant_slots: dict = {}
            for atom in [a for node in graph.nodes for a in node.args] + list(graph.outputs):
                if atom.__class__ is not Node and is_constant(atom):
                    key = (type(atom), atom)
                    if key not in constant_slots:
                        constant_slots[key] = self.input_count + len(self.constants)
                        self.constants.append(arithmetic.constant(atom))
        for position, node in enumerate(graph.nodes):
            slot_of[node] = self.input_count + len(self.constants) + position

        def slot(atom) -> int:
            if atom.__class__ is not Node and is_constant(atom):
                return constant_slots[(type(atom), atom)]
            return slot_of[atom]

        self.steps = []
        for node in graph.nodes:
            implementation = arithmetic.implementation(node.primitive)
            if implementation is None:
                raise CompileError(arithmetic.missing(node.primitive, function_name))
            self.steps.append((implementation, tuple(map(slot, node.args)), dict(node.params)))
        self.outputs = [slot(atom) for atom in graph.outputs]

    def run(self, inputs: list) -> list:
        """The outputs' values at one point, ``inputs`` in the order of ``graph.inputs``."""
        values = inputs + self.constants
        append = values.append
        for implementation, operands, params in self.steps:
            append(implementation(*[values[i] for i in operands], **params))
        return [values[i] for i in self.outputs]


class PreciseFunction:
    """``F.compile("mpmath" | "interval", dps=...)``: call it like ``F``, get that arithmetic's numbers.

    Scalars come back as the backend's numbers, arrays as object arrays of them, in
    the structure ``F`` returns; extra leading dimensions of the arguments are a batch.
    """

    def __init__(self, function, arithmetic: Arithmetic):
        self.function = function
        self.arithmetic = arithmetic
        self.backend = arithmetic.name
        self.dps = arithmetic.dps
        self.program = GraphProgram(function.graph, arithmetic, function.name)
        self.__name__ = function.name
        self.__doc__ = f"{function.name}, evaluated with the {arithmetic.name} backend at {arithmetic.dps} digits."

    def __call__(self, *args):
        function = self.function
        leaves, treedef = tree_flatten(tuple(args))
        if treedef != function.in_treedef:
            raise CompileError(
                f"{function.name}: called with arguments structured otherwise than at the trace "
                f"({len(leaves)} arrays or numbers, {function.in_treedef.num_leaves} when traced); "
                "pass them in the same tuples, lists and dicts")
        arithmetic = self.arithmetic
        with PRECISION_LOCK, arithmetic.precision():
            arrays = [self._values(leaf, f"argument {position}") for position, leaf in enumerate(leaves)]
            batch = _batch(arrays, function)
            columns = [np.broadcast_to(array, batch + core).reshape(batch + (math.prod(core),))
                       for array, core in zip(arrays, function.in_shapes)]
            parameters = [self._values(parameter.value, f"sd.Parameter {parameter.name!r}").reshape(-1)
                          for parameter, _ in function.parameters]
            out_sizes = [math.prod(shape) for shape in function.out_shapes]
            results = [np.empty(batch + (size,), dtype=object) for size in out_sizes]
            for point in np.ndindex(*batch):
                inputs = [value for column in columns for value in column[point]]
                for values in parameters:
                    inputs.extend(values)
                outputs = self.program.run(inputs)
                start = 0
                for result, size in zip(results, out_sizes):
                    for offset in range(size):
                        result[point + (offset,)] = arithmetic.finish(
                            outputs[start + offset], f"output at batch index {point}")
                    start += size
        leaves_out = []
        for result, shape in zip(results, function.out_shapes):
            value = result.reshape(batch + shape)
            leaves_out.append(value[()] if value.ndim == 0 else value)
        return tree_unflatten(function.out_treedef, leaves_out)

    def _values(self, value, where: str) -> np.ndarray:
        """A user's argument (a number, array or nested list of them) as an object array of this
        backend's numbers."""
        array = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
        converted = np.empty(array.shape, dtype=object)
        flat = converted.reshape(-1)
        for index, element in enumerate(array.reshape(-1)):
            flat[index] = self.arithmetic.argument(element, f"{self.function.name}: {where}")
        return converted

    def __reduce__(self):
        return _recompile, (self.function, self.backend, self.dps)

    def __repr__(self) -> str:
        return f"<symad compiled function {self.function.name!r} ({self.backend}, dps={self.dps})>"


def number_constant(constant, number: Callable):
    """A truth value, or ``number`` of an exact rational or float constant of a graph (a float
    is its binary value, rounded to the backend's precision); None for other constants (pi,
    sqrt(2)), which each backend evaluates its own way."""
    if isinstance(constant, sympy.logic.boolalg.BooleanAtom):
        return bool(constant)
    if constant.is_Integer:
        return number(int(constant))
    if constant.is_Rational:
        return number(int(constant.p)) / int(constant.q)
    if constant.is_Float:
        return number(mpmath.mp.make_mpf(constant._mpf_))
    return None


def scalar_argument(value, where: str, number: Callable, sympy_number: Callable, accepted: str):
    """One scalar a user passed, as a backend's number: ``number`` makes one from an int, a
    float, an mpmath number or a decimal string (parsed by mpmath, never run), exactly
    where the backend's precision holds it; ``sympy_number`` converts a SymPy number.
    ``accepted`` finishes the error message for anything else."""
    if isinstance(value, str):
        try:
            return number(value)
        except ValueError:
            raise CompileError(f"{where} is the string {value!r}, which is not a number") from None
    if isinstance(value, (bool, np.bool_, numbers.Integral, np.integer)):
        return number(int(value))
    if isinstance(value, (float, np.floating)):
        if isinstance(value, np.longdouble):  # more bits than a double: its exact ratio
            numerator, denominator = value.as_integer_ratio()
            return number(numerator) / denominator
        return number(float(value))
    if isinstance(value, mpmath.mpf):
        return number(value)
    if isinstance(value, fractions.Fraction):
        return number(value.numerator) / value.denominator
    if isinstance(value, sympy.Basic) and value.is_Number and value.is_extended_real:
        return sympy_number(value)
    raise CompileError(f"{where} is {value!r} ({type(value).__name__}); {accepted}")


def _batch(arrays: list, function) -> tuple:
    """The batch shape of a call: the arguments' leading dimensions beyond their core shapes, broadcast."""
    batch_shapes = [batch_shape(array.shape, core, function.name)
                    for array, core in zip(arrays, function.in_shapes)]
    try:
        return np.broadcast_shapes(*batch_shapes) if batch_shapes else ()
    except ValueError:
        raise CompileError(
            f"{function.name}: the batch shapes of the arguments, {batch_shapes}, do not broadcast; "
            "leading dimensions beyond the traced shapes must broadcast like NumPy arrays") from None


def _recompile(function, backend: str, dps: int) -> PreciseFunction:
    return function.compile(backend, dps=dps)
