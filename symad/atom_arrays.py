"""Atoms and object arrays of atoms, below the traced value.

What a :class:`~symad.tracer.Tracer` holds -- one atom (a scalar, or a whole
array) or an object array of scalar atoms -- is built and read here: constants
made atoms, the elements of a whole array, elements packed into one atom,
substitutions, and the fresh input symbols a trace or a transform names. None
of it needs the Tracer itself, so the tracer and the transforms import it from
below.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy

from symad.errors import TracingError
from symad.graph import (
    ArrayInput,
    GraphBuilder,
    active_builders,
    atom_shape,
    current_builder,
    number_atom,
    uncached_symbol,
)

__all__ = [
    "traced_function_name", "scalar_constant", "real_array", "constant_atom", "pack_elements",
    "element_atoms", "element_atom", "constant_elements", "check_unrolled_size", "scalar_array",
    "require_builder", "substitute_atoms", "symbol_array", "active_input_names",
    "fresh_symbol_array", "fresh_input", "size_limit_advice", "builder_parameter_atom",
    "builder_parameter_atoms", "assign_atoms",
]


def scalar_constant(value: Any) -> sympy.Basic:
    atom = number_atom(value)
    if atom is not None:
        return atom
    if isinstance(value, sympy.Basic):
        if value.free_symbols:
            raise TracingError(
                f"the SymPy expression {value} has free symbols; symad accepts only "
                "constant SymPy expressions as operands (use sd.from_sympy for formulas)"
            )
        return value
    raise TracingError(
        f"function {traced_function_name()!r} uses a value of type {type(value).__name__} in a "
        "traced computation; use floats, NumPy arrays of real numbers or traced values"
    )


def real_array(value: Any) -> np.ndarray:
    """``value`` as a NumPy array of numbers (real or complex), or a TracingError naming what it is."""
    array = np.asarray(value)
    if array.dtype.kind == "c":  # complex constants are traced too (the name is historical)
        from symad.atoms import note_complex

        note_complex()
        return array
    if array.dtype.kind not in "biuf":
        raise TracingError(
            f"function {traced_function_name()!r} uses a constant of dtype {array.dtype}; "
            "symad traces real numbers only"
        )
    return array


def constant_atom(builder: GraphBuilder, array: np.ndarray):
    """The atom of a constant NumPy array: an exact number for 0-d, else one constant node.

    A data array (the samples a loss is fitted to) is one node whatever its size,
    not one SymPy number per element.
    """
    if array.ndim == 0:
        return scalar_constant(array[()])
    from symad.array_primitives import ConstantArray, constant_p

    return builder.record(constant_p, (), (("value", ConstantArray(array)),))


def pack_elements(builder: GraphBuilder, elements: np.ndarray):
    """One atom for an object array of scalar atoms: a constant, or a ``pack`` node.

    Constant elements (the zeros of ``snp.zeros`` around a few assigned
    values) go into one constant array operand; only the others are operands
    of their own. A 0-d array is its element.
    """
    if elements.ndim == 0:
        return elements[()]
    from symad.array_primitives import ConstantArray, constant_p, pack_p
    from symad.atoms import constant_value, is_constant

    flat = elements.reshape(-1)
    positions = [position for position, atom in enumerate(flat) if not is_constant(atom)]
    constants = [(position, constant_value(atom)) for position, atom in enumerate(flat)
                 if is_constant(atom)]
    values = np.zeros(flat.size, complex if any(isinstance(v, complex) for _, v in constants) else float)
    for position, value in constants:
        values[position] = value
    base = ConstantArray(values.reshape(elements.shape))
    if not positions:
        return builder.record(constant_p, (), (("value", base),))
    operands = [flat[position] for position in positions]
    has_base = len(positions) < flat.size
    if has_base:
        operands.insert(0, builder.record(constant_p, (), (("value", base),)))
    params = (("shape", elements.shape), ("positions", tuple(positions)), ("has_base", has_base))
    return builder.record(pack_p, operands, params)


def element_atoms(atom, what: str = "this operation") -> np.ndarray:
    """The scalar atoms of an array atom's elements, as an object array (an unrolled view).

    An array input gives its element symbols, a packed array its elements, a
    constant its numbers; any other node one ``slice`` node per element. This
    is how element-level code reads whole arrays; it is bounded by
    ``symad.function.MAX_SYMBOLIC_ELEMENTS``.
    """
    shape = atom_shape(atom)
    if shape == ():
        return scalar_array(atom)
    if atom.__class__ is ArrayInput:
        check_unrolled_size(atom.size, what)
        return atom.elements()
    from symad.array_primitives import constant_p, pack_p

    size = math.prod(shape)
    check_unrolled_size(size, what)
    if atom.primitive is constant_p:
        return constant_elements(dict(atom.params)["value"].array)
    if atom.primitive is pack_p and len(shape) == len(dict(atom.params)["shape"]):
        params = dict(atom.params)
        operands = list(atom.args)
        out = (element_atoms(operands.pop(0)).reshape(-1).copy() if params["has_base"]
               else np.empty(size, dtype=object))
        for position, operand in zip(params["positions"], operands):
            out[position] = operand
        return out.reshape(shape)
    builder = require_builder("read the elements of an array")
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(shape):
        out[index] = element_atom(builder, atom, index)
    return out


def element_atom(builder: GraphBuilder, atom, index: tuple):
    """The scalar atom of one element of an array atom (``index``: non-negative ints)."""
    if atom.__class__ is ArrayInput:
        return atom.element(index)
    from symad.array_primitives import constant_p, slice_p

    if atom.primitive is constant_p:
        return scalar_constant(dict(atom.params)["value"].array[index])
    params = (("in_shape", atom.shape), ("index", tuple(("i", k) for k in index)))
    return builder.record(slice_p, (atom,), params)


def constant_elements(array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, dtype=object)
    flat = out.reshape(-1)
    for position, value in enumerate(np.asarray(array).reshape(-1).tolist()):
        flat[position] = scalar_constant(value)
    return out


def check_unrolled_size(size: int, what: str, builder: GraphBuilder | None = None) -> None:
    """Refuse to read more elements one at a time than the trace's limit allows.

    The limit is ``symad.function.MAX_SYMBOLIC_ELEMENTS``, which the trace put on its
    builder (``element_limit``) when it started.
    """
    builder = builder if builder is not None else current_builder()
    limit = None if builder is None else builder.element_limit
    if limit is not None and size > limit:
        raise TracingError(
            f"function {builder.function_name!r}: {what} reads an array of {size} elements one "
            f"element at a time, past the limit of {limit} (symad.function.MAX_SYMBOLIC_ELEMENTS). "
            "Write it with whole-array operations (slices, sums, @, np.where), which record one "
            f"node each whatever the size, or raise the limit: symad.function.MAX_SYMBOLIC_ELEMENTS = {size}"
        )


def scalar_array(atom) -> np.ndarray:
    array = np.empty((), dtype=object)
    array[()] = atom
    return array


def require_builder(action: str) -> GraphBuilder:
    builder = current_builder()
    if builder is None:
        raise TracingError(
            f"cannot {action} outside a trace: a traced value escaped the function that "
            "produced it (return it from the function instead of storing it)"
        )
    return builder


def substitute_atoms(atoms: np.ndarray, mapping: dict) -> np.ndarray:
    """A copy of the object array ``atoms`` with each atom replaced by ``mapping.get(atom, atom)``.

    >>> substitute_atoms(np.array([sympy.Symbol("a"), 2], dtype=object), {sympy.Symbol("a"): 1})
    array([1, 2], dtype=object)
    """
    out = np.empty(atoms.shape, dtype=object)
    flat = out.reshape(-1)
    for position, atom in enumerate(atoms.reshape(-1)):
        flat[position] = mapping.get(atom, atom)
    return out


def symbol_array(name: str, shape: tuple) -> np.ndarray:
    """An object array of SymPy symbols named ``name`` or ``name[i, j]``.

    >>> symbol_array("w", (1, 2))
    array([[w[0, 0], w[0, 1]]], dtype=object)
    """
    out = np.empty(shape, dtype=object)
    if shape == ():
        out[()] = sympy.Symbol(name)
        return out
    if len(shape) == 1:
        names = [f"{name}[{index}]" for index in range(shape[0])]
    else:
        names = [f"{name}[{', '.join(map(str, index))}]" for index in np.ndindex(shape)]
    out.reshape(-1)[:] = list(map(uncached_symbol, names))
    return out


def traced_function_name() -> str:
    """The name of the user's function being traced, for error messages."""
    builder = current_builder()
    return builder.function_name if builder is not None else "function"


def active_input_names(extra: GraphBuilder | None = None) -> set[str]:
    """Names of the inputs of every active trace (and of ``extra``)."""
    builders = list(active_builders()) + ([extra] if extra is not None else [])
    return {name for builder in builders for name in builder.input_names()}


def fresh_symbol_array(name: str, shape: tuple, taken: set[str]) -> np.ndarray:
    """``symbol_array(name, shape)``, primed (``x'``) until no name is in ``taken``.

    Inputs of nested traces must be distinct symbols: SymPy symbols with equal
    names are equal, and a function that closes over an enclosing trace's
    ``x`` while taking its own ``x`` would otherwise confuse the two.

    >>> fresh_symbol_array("x", (), {"x"})
    array(x', dtype=object)
    """
    suffix = ""
    while True:
        symbols = symbol_array(name + suffix, shape)
        if not any(symbol.name in taken for symbol in symbols.reshape(-1)):
            return symbols
        suffix += "'"


def fresh_input(name: str, shape: tuple, taken: set[str], complex: bool = False):
    """The input atom of an argument: a scalar symbol for shape ``()``, else an :class:`ArrayInput`.

    Primed (``x'``) until its name is not ``taken`` by an enclosing trace. A ``complex``
    argument's symbol is made ``complex=True`` (an array's elements too).

    >>> fresh_input("x", (), {"x"}), fresh_input("w", (2, 3), set())
    (x', ArrayInput('w', (2, 3)))
    """
    while name in taken:
        name += "'"
    if tuple(shape) == ():
        if complex:
            from symad.atoms import note_complex

            note_complex()
            return sympy.Symbol(name, complex=True)
        return uncached_symbol(name)
    return ArrayInput(name, shape, complex)


def size_limit_advice(function_name: str, size: int) -> str:
    """The two ways past ``symad.function.MAX_SYMBOLIC_ELEMENTS``, for the error that meets it.

    >>> size_limit_advice("energy", 62500).startswith("Tracing unrolls")
    True
    """
    return (
        "Tracing unrolls an array into one symbol per element and one node per scalar "
        "operation. If the elements are independent points of a batch, trace one point and "
        f"map it: sd.vmap(sd.grad({function_name}))(points), or call a Function traced at "
        "points[0] on the whole array. If they are one coupled unknown (a grid, a parameter "
        f"vector), raise the limit: symad.function.MAX_SYMBOLIC_ELEMENTS = {size}"
    )


def builder_parameter_atom(builder: GraphBuilder, parameter):
    """The atom standing for ``parameter`` (a :class:`~symad.tracer.Parameter`) in ``builder``
    (an input symbol or an array input), registering it as an input of the trace the first
    time it is met."""
    atom = builder.parameters.get(parameter)
    if atom is None:
        atom = fresh_input(parameter.name, parameter.shape, active_input_names(builder))
        builder.parameters[parameter] = atom
        builder.add_input(atom)
    return atom


def builder_parameter_atoms(builder: GraphBuilder, parameter) -> np.ndarray:
    """The element atoms of ``parameter`` in ``builder`` (its element-level view)."""
    return element_atoms(builder_parameter_atom(builder, parameter), "element-level code")


def assign_atoms(target: np.ndarray, index, atoms: np.ndarray) -> None:
    """``target[index] = atoms`` for object arrays of atoms, ``atoms`` broadcast like NumPy;
    a TracingError names the traced function when the index or the shapes do not fit.

    >>> target = np.array([0, 0, 0], dtype=object)
    >>> assign_atoms(target, slice(1, None), np.array(5, dtype=object)); target.tolist()
    [0, 5, 5]
    """
    try:
        selected = target[index]
    except (IndexError, ValueError, TypeError) as error:
        raise TracingError(
            f"function {traced_function_name()!r} assigns into a traced array of shape "
            f"{target.shape} at {index!r}: {error}"
        ) from None
    slot_shape = selected.shape if isinstance(selected, np.ndarray) else ()
    try:
        atoms = np.broadcast_to(atoms, slot_shape)
    except ValueError:
        raise TracingError(
            f"function {traced_function_name()!r} assigns a value of shape {atoms.shape} to "
            f"the elements {index!r} of a traced array of shape {target.shape}, which have "
            f"shape {slot_shape}; the shapes must broadcast"
        ) from None
    if isinstance(selected, np.ndarray):
        target[index] = atoms
    else:
        target[index] = atoms[()]
