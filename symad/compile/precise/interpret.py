"""Evaluating a graph node by node in another arithmetic: mpmath numbers, mpmath intervals.

The float64 backends generate code; the precision backends (``F.compile("mpmath",
dps=...)``, ``F.compile("interval", dps=...)``) walk the very graph the others
compile, ``graph.nodes`` in order, and apply each node's primitive through one
table keyed by the primitive's registered name (:class:`Arithmetic`). Nothing is inlined into a
formula first, so a derivative graph of 10^4 nodes with shared subexpressions
costs 10^4 operations at any precision, not the size of its expanded tree.

The table's entries take their operands' values (and the node's parameters as
keywords) and return the node's value. An array program's values are object arrays of
the backend's numbers: an elementwise node applies its scalar entry to each element
(broadcasting as NumPy does), and the array primitives (:data:`ARRAY_STEPS`) are the
same for both backends -- NumPy's own functions moving and adding elements, and the
variadic scalar entries (``add``, ``reduce_max``, ``logsumexp``) for reductions.

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
from symad.graph import ArrayInput, Node, is_constant
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
        # The symbols of array inputs' elements that element-level code read: slots of their own,
        # filled from the array at each point.
        self.elements = []
        for position, atom in enumerate(graph.inputs):
            if atom.__class__ is ArrayInput:
                for symbol in atom.made_elements():
                    slot_of[symbol] = len(slot_of)
                    self.elements.append((position, atom.element_index(symbol)))
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
            if not node.primitive.elementwise:
                implementation = _array_step(node.primitive, arithmetic)
                if not node.shape:  # a scalar, as the scalar steps reading it take one
                    implementation = _unwrapped(implementation)
            else:
                implementation = arithmetic.implementation(node.primitive)
                if implementation is None:
                    raise CompileError(arithmetic.missing(node.primitive, function_name))
                if node.shape:  # each element, operands broadcast as NumPy does
                    implementation = _elementwise(implementation)
            self.steps.append((implementation, tuple(map(slot, node.args)), dict(node.params)))
        self.outputs = [slot(atom) for atom in graph.outputs]

    def run(self, inputs: list) -> list:
        """The outputs' values at one point, ``inputs`` in the order of ``graph.inputs``."""
        values = inputs + [inputs[position][index] for position, index in self.elements] + self.constants
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
            arrays = [np.broadcast_to(array, batch + core) for array, core in zip(arrays, function.in_shapes)]
            parameters = [self._values(parameter.value, f"sd.Parameter {parameter.name!r}")
                          for parameter, _ in function.parameters]
            leaves_in = list(function.in_symbols) + [symbols for _, symbols in function.parameters]
            results = [np.empty(batch + tuple(shape), dtype=object) for shape in function.out_shapes]
            for point in np.ndindex(*batch):
                inputs = []
                for leaf, value in zip(leaves_in, [a[point] for a in arrays] + parameters):
                    if isinstance(leaf, np.ndarray):  # scalars: one input each
                        inputs.extend(np.asarray(value, dtype=object).reshape(-1))
                    else:  # a whole array input: its object array
                        inputs.append(value)
                outputs = iter(self.program.run(inputs))
                for result, shape, whole in zip(results, function.out_shapes, function.out_whole):
                    if whole:
                        value = np.broadcast_to(np.asarray(next(outputs), dtype=object), shape)
                    else:
                        value = np.empty(math.prod(shape), dtype=object)
                        value[:] = [next(outputs) for _ in range(value.size)]
                    where = f"output at batch index {point}"
                    result[point] = np.reshape([arithmetic.finish(self._number(v), where)
                                                for v in value.reshape(-1)], shape) if shape else \
                        arithmetic.finish(self._number(value.reshape(-1)[0]), where)
        leaves_out = []
        for result in results:
            leaves_out.append(result[()] if result.ndim == 0 else result)
        return tree_unflatten(function.out_treedef, leaves_out)

    def _number(self, value):
        """A plain Python number left by an array step (the zeros around a slice) as this
        backend's number."""
        if isinstance(value, (bool, numbers.Number)) and not isinstance(value, np.bool_):
            return value if isinstance(value, bool) else self.arithmetic.argument(value, "a value")
        return value

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


# ---------------------------------------------------------------------------
# Array programs: elementwise entries over object arrays, and the array primitives
# ---------------------------------------------------------------------------


def _elementwise(scalar: Callable) -> Callable:
    """A scalar entry applied to each element of its (broadcast) operands."""
    def over_elements(*operands):
        arrays = np.broadcast_arrays(*[np.asarray(o, dtype=object) for o in operands])
        out = np.empty(arrays[0].shape, dtype=object)
        flat = [a.reshape(-1) for a in arrays]
        for position in range(out.size):
            out.reshape(-1)[position] = scalar(*[a[position] for a in flat])
        return out
    return over_elements


def _rows(x, axes):
    """``x`` with ``axes`` (negative) moved last and merged: (rows, kept shape)."""
    x = np.asarray(x, dtype=object)
    kept = [a for a in range(x.ndim) if a - x.ndim not in axes]
    moved = np.transpose(x, kept + [x.ndim + a for a in axes])
    kept_shape = moved.shape[: len(kept)]
    return moved.reshape(kept_shape + (-1,)), kept_shape


def _reduction(entry: Callable) -> Callable:
    """A reduction over axes through a variadic scalar entry (one call per row)."""
    def reduce(x, *, axes):
        rows, kept_shape = _rows(x, axes)
        out = np.empty(kept_shape, dtype=object)
        for index in np.ndindex(kept_shape):
            out[index] = entry(*rows[index])
        return out[()] if out.ndim == 0 else out
    return reduce


def _unwrapped(step: Callable) -> Callable:
    """``step`` giving the number a 0-d array of its result holds (an element taken from an
    array: mpmath's functions refuse the array)."""
    def scalar(*operands, **params):
        out = step(*operands, **params)
        return out[()] if isinstance(out, np.ndarray) and out.ndim == 0 else out
    return scalar


def _array_step(primitive, arithmetic: Arithmetic) -> Callable:
    """The step of an array primitive over object arrays of ``arithmetic``'s numbers."""
    from symad import array_primitives as A

    def variadic(name):
        entry = arithmetic.implementation(_by_name(name))
        return lambda *row: entry(*row) if len(row) != 1 else row[0]

    if primitive is A.constant_p:
        def constant(*, value):
            numbers_ = (np.full(value.array.shape, arithmetic.constant(value.exact), dtype=object)
                        if value.exact is not None else
                        np.reshape([arithmetic.argument(v, "a constant") for v in value.array.reshape(-1).tolist()],
                                   value.array.shape))
            return np.asarray(numbers_, dtype=object)
        return constant
    reductions = {A.reduce_sum_p: "add", A.amax_p: "reduce_max", A.amin_p: "reduce_min",
                  A.reduce_logsumexp_p: "logsumexp"}
    if primitive in reductions:
        return _reduction(variadic(reductions[primitive]))
    if primitive is A.einsum_p:
        def einsum(a, b, *, subscripts):
            (sa, sb), sc = A.parse_subscripts(subscripts)
            return np.einsum(f"...{sa},...{sb}->...{sc}", np.asarray(a, dtype=object),
                             np.asarray(b, dtype=object))
        return einsum
    if primitive is A.argsort_p:  # positions, found by comparing the backend's numbers
        def argsort(x, *, axis):
            return np.argsort(np.asarray(x, dtype=object), axis=axis, kind="stable")
        return argsort
    # Structural and adding steps: the NumPy implementations, on object arrays.
    implementation = primitive.numpy_impl
    refusal = (f"the {arithmetic.name} backend: the array operation {primitive.name!r} is computed "
               "in floating point (by NumPy's or a compiled kernel: linear algebra, transforms, "
               "loops), not at this backend's precision; evaluate the function with "
               "F.compile('numpy') or the default backend")

    def structural(*operands, **params):
        try:
            out = implementation(*[np.asarray(o, dtype=object) for o in operands], **params)
        except TypeError as error:  # NumPy's numeric kernels take no object arrays
            raise CompileError(refusal) from error
        # An implementation that cast the numbers to floats (a loop's kernel, expm) computed
        # at double precision: its result would pass for a precise one (a point for an
        # interval). Indices (argsort's) are not numbers of the backend.
        if np.issubdtype(np.asarray(out).dtype, np.inexact):
            raise CompileError(refusal)
        return out
    return structural


def _by_name(name: str):
    from symad.ir.primitive import PRIMITIVES

    return PRIMITIVES[name]


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
