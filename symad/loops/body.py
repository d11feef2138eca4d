"""Tracing a loop's body once into a closed Function, and recording the loop node.

The user's body is traced at the carry's (and the scanned slices') core shapes,
inside the enclosing trace, so that it may read that trace's values (the
pendulum's ``k`` and ``c``). Those values show up as free symbols of the body's
graph; each becomes an input of the closed body (a *const*) and an operand of
the loop node, so derivatives reach them as they reach any operand.
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np

from symad.array_primitives import record_reshape, record_slice
from symad.atom_arrays import active_input_names, builder_parameter_atom, fresh_input
from symad.atoms import is_complex_atom
from symad.errors import TracingError
from symad.function import Function, finish_function, trace
from symad.graph import ArrayInput, GraphBuilder, Node, atom_shape, current_builder, replay
from symad.leaves import leaf_atoms
from symad.pytree import tree_flatten, tree_unflatten
from symad.tracer import Tracer, as_atom

__all__ = ["complex_loop_error", "trace_body", "close_over", "record_loop", "loop_results",
           "flat_treedef"]


def flat_treedef(count: int):
    """The treedef of a flat tuple of ``count`` leaves."""
    return tree_flatten(tuple(range(count)))[1]


def _example(shape: tuple):
    return np.zeros(shape) if shape else 0.0


def _free_order(atom) -> tuple:
    # Deterministic: nodes by their number, other symbols by name (never by hash).
    return (0, atom.number, "") if atom.__class__ is Node else (1, 0, str(atom))


def close_over(function: Function, name: str) -> tuple[Function, list]:
    """``function`` with the enclosing trace's values it reads made inputs: ``(closed, operands)``.

    ``operands`` are those values (atoms of the enclosing trace, and the atoms of the
    Parameters the body uses) in the order of the new trailing inputs.
    """
    free = sorted(function.graph.free_symbols(), key=_free_order)
    if not free and not function.parameters:
        return function, []
    outer = current_builder()
    taken = {s.name for s in function.graph.inputs} | active_input_names()
    builder = GraphBuilder(name)
    in_symbols = list(function.in_symbols)
    bindings, operands = {}, []
    for position, atom in enumerate(free):
        symbol = fresh_input(f"q{position}", atom_shape(atom), taken)
        taken.add(symbol.name)
        bindings[atom] = symbol
        in_symbols.append(_holder(symbol))
        operands.append(atom)
    for parameter, symbols in function.parameters:
        in_symbols.append(symbols)
        operands.append(builder_parameter_atom(outer, parameter))
    for symbols in in_symbols:
        for symbol in leaf_atoms(symbols):
            builder.add_input(symbol)
    with builder.active():
        env = replay(function.graph, builder, bindings)
        outputs = []
        for atoms in function.output_atoms():
            if isinstance(atoms, np.ndarray):
                outputs.append(np.vectorize(lambda a: env.get(a, bindings.get(a, a)) if a.is_Symbol
                                            else a, otypes=[object])(atoms))
            else:
                outputs.append(env.get(atoms, bindings.get(atoms, atoms)))
    closed = finish_function(builder, name, flat_treedef(len(in_symbols)), in_symbols, tuple(outputs))
    return closed, operands


def _holder(symbol):
    if symbol.__class__ is ArrayInput:
        return symbol
    holder = np.empty((), dtype=object)
    holder[()] = symbol
    return holder


def trace_body(step, carry_shapes, carry_def, x_shapes, x_def, names: list[str], name: str,
               kind: str):
    """Trace ``step(k, carry, x) -> (carry', y)`` once; ``(body, y_shapes, y_def, consts)``.

    ``body`` is the closed Function ``body(k, *carry, *x, *consts) -> (*carry', *y)``;
    ``consts`` the atoms of the enclosing trace it reads.
    """
    n_carry = len(carry_shapes)
    found = {}

    def flat(*leaves):
        carry = tree_unflatten(carry_def, list(leaves[1:1 + n_carry]))
        x = tree_unflatten(x_def, list(leaves[1 + n_carry:]))
        new_carry, y = step(leaves[0], carry, x)
        new_leaves, new_def = tree_flatten(new_carry)
        if new_def != carry_def:
            raise TracingError(
                f"{kind}: the body {name!r} returned a carry of structure {new_def.kind} with "
                f"{len(new_leaves)} leaves for an initial carry of {carry_def.kind} with "
                f"{n_carry}; return the carry in the structure it was given")
        y_leaves, found["y_def"] = tree_flatten(y)
        return tuple(new_leaves) + tuple(y_leaves)

    flat.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in _identifiers(names)])
    examples = [0.0] + [_example(s) for s in carry_shapes] + [_example(s) for s in x_shapes]
    traced = trace(flat, *examples, name=name)
    out_carry = traced.out_shapes[:n_carry]
    if tuple(out_carry) != tuple(carry_shapes):
        raise TracingError(
            f"{kind}: the body {name!r} changes the carry's shapes from {list(carry_shapes)} to "
            f"{list(out_carry)}; the carry must keep its shapes (broadcast the initial value "
            "to the shape the body returns)")
    if any(traced.complex_outputs):  # a carry or an output made complex inside the body
        raise complex_loop_error(kind, name)
    body, consts = close_over(traced, name)
    if any(is_complex_atom(atom) for atom in consts):  # a complex value read from outside
        raise complex_loop_error(kind, name)
    return body, traced.out_shapes[n_carry:], found["y_def"], consts


def complex_loop_error(kind: str, name: str) -> TracingError:
    """The refusal of complex values in a loop, saying what to write instead."""
    return TracingError(
        f"{kind} {name!r}: complex values in a loop's carry, its scanned arrays, its outputs "
        "or the values its body reads from outside are not traced (the loop's kernels and "
        "stored carries hold real numbers; complex values made and used up inside one step "
        "are); carry the real and imaginary parts as two real leaves, (z.real, z.imag), and "
        "form z = re + 1j * im inside the body or after the loop")


def _identifiers(names: list[str]) -> list[str]:
    """``names`` as distinct Python identifiers (a primed ``k'`` becomes ``k_``; repeats, as the
    tangent of a tangent ``cdot`` twice, are numbered)."""
    names = [re.sub(r"\W", "_", name) or "_" for name in names]
    names = [name if not name[0].isdigit() else "_" + name for name in names]
    seen, out = set(), []
    for name in names:
        candidate, count = name, 1
        while candidate in seen:
            count += 1
            candidate = f"{name}_{count}"
        seen.add(candidate)
        out.append(candidate)
    return out


def leaf_names(fun, carry_count: int, x_count: int, fori: bool) -> list[str]:
    """Readable input names for the body: the step index, the carry's and the slices' leaves
    (after the user's parameters: ``body(i, state)`` of fori_loop, ``f(carry, x)`` of scan)."""
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()]
    except (TypeError, ValueError):
        params = []
    params += ["_"] * 2
    if fori:
        index, carry, x = (params[0] if params[0] != "_" else "i"), params[1], "x"
    else:
        index, carry, x = "k", params[0], params[1]
    carry = "c" if carry == "_" else carry
    x = "x" if x == "_" else x

    def named(root, count):
        return [root] if count == 1 else [f"{root}{i}" for i in range(count)]

    return [index] + named(carry, carry_count) + named(x, x_count)


def record_loop(primitive, spec, operands: list):
    """Record the loop node over ``operands`` (traced values or atoms) in the active trace."""
    builder = current_builder()
    atoms = [a if _is_atom(a) else as_atom(a) for a in operands]
    in_shapes = tuple(atom_shape(a) for a in atoms)
    return builder.record(primitive, atoms, (("loop", spec), ("in_shapes", in_shapes)))


def _is_atom(value) -> bool:
    return getattr(value, "is_Symbol", False) and not isinstance(value, Tracer)


def loop_results(builder, node, spec, lead: int = 0) -> list:
    """The result leaves of a loop node as atoms: each a slice of its value, reshaped."""
    offsets = spec.result_offsets()
    out = []
    for shape, start in zip(spec.result_shapes, offsets):
        size = math.prod(shape)
        if shape == () and not lead:
            out.append(record_slice(builder, node, (("i", start),), lead))
            continue
        part = record_slice(builder, node, (("s", start, start + size, 1),), lead)
        out.append(record_reshape(builder, part, shape, lead))
    return out
