"""Leaves: an argument or result is a scalar, a whole array (one atom), or an array of
scalar atoms (built element by element, or a SymPy array brought in by from_sympy).

A :class:`~symad.function.Function` keeps one such leaf per flattened argument
and result; transforms read and make them with these helpers, and
:func:`bind_input` binds a traced function's input leaf to a value of an
enclosing trace when its graph is replayed there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symad.array_primitives import broadcast_atom
from symad.atom_arrays import element_atom, fresh_input, fresh_symbol_array
from symad.errors import TracingError
from symad.graph import ArrayInput, GraphBuilder, atom_shape
from symad.tracer import Parameter, Tracer, as_atom, is_complex_value

__all__ = ["holds_complex", "leaf_shape", "leaf_atoms", "is_whole_leaf", "leaf_elements", "input_leaf", "bind_input",
           "is_complex_leaf"]


def leaf_shape(leaf) -> tuple:
    """The shape of an input or output leaf: an object array of scalar atoms, or one atom."""
    return leaf.shape if isinstance(leaf, np.ndarray) else atom_shape(leaf)


def leaf_atoms(leaf) -> list:
    """The atoms a leaf contributes to a graph's flat inputs or outputs."""
    return leaf.reshape(-1).tolist() if isinstance(leaf, np.ndarray) else [leaf]


def is_whole_leaf(leaf) -> bool:
    """True for a leaf held as one array atom (not an array of scalar atoms)."""
    return not isinstance(leaf, np.ndarray) and atom_shape(leaf) != ()


def leaf_elements(leaf) -> np.ndarray:
    """A leaf as an object array of scalar atoms (a whole array input: its element symbols)."""
    if isinstance(leaf, np.ndarray):
        return leaf
    if leaf.__class__ is ArrayInput:
        return leaf.elements()
    out = np.empty((), dtype=object)
    out[()] = leaf
    return out


def input_leaf(path: str, shape: tuple, taken: set[str], elements: bool = False,
               complex: bool = False):
    """A new input leaf named ``path``: a 0-d array holding a symbol, or an ArrayInput
    (``elements``: an array of one symbol per element, for programs of scalars).

    Transforms make their extra inputs (tangents, cotangents) with it, primed
    past the names in ``taken``.
    """
    if elements and tuple(shape) != ():
        symbols = fresh_symbol_array(path, tuple(shape), taken)
        taken.update(symbol.name for symbol in symbols.reshape(-1))
        return symbols
    atom = fresh_input(path, tuple(shape), taken, complex)
    taken.add(atom.name)
    if atom.__class__ is ArrayInput:
        return atom
    holder = np.empty((), dtype=object)
    holder[()] = atom
    return holder


def bind_input(builder: GraphBuilder, bindings: dict, symbols, operand, name: str) -> None:
    """Bind a traced function's input leaf ``symbols`` to ``operand`` (an atom or an array of
    scalar atoms) for replaying its graph inside another trace."""
    shape = leaf_shape(symbols)
    operand_shape = operand.shape if isinstance(operand, np.ndarray) else atom_shape(operand)
    if operand_shape != shape:
        try:
            if np.broadcast_shapes(operand_shape, shape) != tuple(shape):
                raise ValueError
        except ValueError:
            raise TracingError(
                f"{name}: traced with an argument of shape {shape}, called inside a trace with "
                f"shape {operand_shape}; inside a trace the shapes must match (map over a batch "
                "with sd.vmap)") from None
        if isinstance(operand, np.ndarray):
            operand = np.array(np.broadcast_to(operand, shape))
        else:
            operand = broadcast_atom(builder, operand, shape)
    if isinstance(symbols, np.ndarray):
        elements = operand if isinstance(operand, np.ndarray) else _elements_of(builder, operand, shape)
        bindings.update(zip(symbols.reshape(-1), elements.reshape(-1)))
        return
    if symbols.__class__ is not ArrayInput:  # a scalar input symbol
        bindings[symbols] = operand[()] if isinstance(operand, np.ndarray) else operand
        return
    # An array input: whole uses read the operand as one atom, element symbols its elements.
    whole = as_atom(Tracer(operand)) if isinstance(operand, np.ndarray) else operand
    bindings[symbols] = whole
    for symbol in symbols.made_elements():
        index = symbols.element_index(symbol)
        bindings[symbol] = (operand[index] if isinstance(operand, np.ndarray)
                            else element_atom(builder, whole, index))


def _elements_of(builder: GraphBuilder, atom, shape: tuple) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(shape):
        out[index] = element_atom(builder, atom, index) if shape else atom
    return out


def is_complex_leaf(value: Any) -> bool:
    """True for a complex example argument (a Python/NumPy complex number or array, or a traced
    complex value): its input is traced as complex.

    >>> import numpy as np
    >>> is_complex_leaf(1j), is_complex_leaf(np.zeros(2)), is_complex_leaf(np.zeros(2, complex))
    (True, False, True)
    """
    dtype = getattr(value, "dtype", None)
    if dtype is not None and not isinstance(value, (Tracer, Parameter)):
        return np.dtype(dtype).kind == "c"  # a ShapeDtypeStruct-like example too
    return is_complex_value(value)


def holds_complex(input_symbols, parameter_symbols, graph) -> bool:
    """True if an input leaf, a Parameter or a node of ``graph`` holds complex numbers (one
    atom per leaf tells: a leaf is traced complex or real as a whole).

    >>> import symad as sd
    >>> F = sd.trace(lambda x, z: x * z, 1.0, 1j)
    >>> holds_complex(F.in_symbols, [], F.graph)
    True
    """
    from symad.atoms import is_complex_atom

    atoms = [atom for symbols in [*input_symbols, *parameter_symbols]
             for atom in leaf_atoms(symbols)[:1]]
    return any(map(is_complex_atom, atoms)) or any(node.complex for node in graph.nodes)
