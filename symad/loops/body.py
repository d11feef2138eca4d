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
from symad.tracer import Tracer, as_atom, is_complex_value

__all__ = ["split_complex", "join_complex", "complex_carry_error", "trace_body", "close_over",
           "record_loop", "loop_results", "flat_treedef"]


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
    bindings, operands, complex_parts = {}, [], {}
    for position, atom in enumerate(free):
        # A complex value read from outside comes in as its real and imaginary parts (the
        # loop's operands are real), joined again inside the body.
        parts = ("re", "im") if is_complex_atom(atom) else ("",)
        symbols = []
        for part in parts:
            symbol = fresh_input(f"q{position}{part}", atom_shape(atom), taken)
            taken.add(symbol.name)
            symbols.append(symbol)
            in_symbols.append(_holder(symbol))
        if len(symbols) == 2:
            complex_parts[atom] = symbols
            operands += [as_atom(part) for part in split_complex([Tracer.of_atom(atom)], [True])]
        else:
            bindings[atom] = symbols[0]
            operands.append(atom)
    for parameter, symbols in function.parameters:
        in_symbols.append(symbols)
        operands.append(builder_parameter_atom(outer, parameter))
    for symbols in in_symbols:
        for symbol in leaf_atoms(symbols):
            builder.add_input(symbol)
    with builder.active():
        for atom, (real, imaginary) in complex_parts.items():
            joined = join_complex([Tracer.of_atom(real), Tracer.of_atom(imaginary)], [True])[0]
            bindings[atom] = as_atom(joined)
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
               kind: str, carry_complex=None, x_complex=None):
    """Trace ``step(k, carry, x) -> (carry', y)`` once; ``(body, y_shapes, y_def, consts, y_complex)``.

    ``body`` is the closed Function ``body(k, *carry, *x, *consts) -> (*carry', *y)`` over
    real leaves: a complex leaf (``carry_complex``/``x_complex`` mark the carry's and the
    slices' leaves; ``y_complex`` is found) is two leaves, its real and imaginary parts, so
    the loop's kernels, stored carries and derived loops hold real numbers only.
    ``carry_shapes``, ``x_shapes`` and ``names`` are per real leaf; ``consts`` the atoms of
    the enclosing trace the body reads (a complex one as two: :func:`close_over`).
    """
    carry_complex = [False] * carry_def.num_leaves if carry_complex is None else list(carry_complex)
    x_complex = [False] * x_def.num_leaves if x_complex is None else list(x_complex)
    n_carry = len(carry_shapes)
    found = {}

    def flat(*leaves):
        carry = tree_unflatten(carry_def, join_complex(list(leaves[1:1 + n_carry]), carry_complex))
        x = tree_unflatten(x_def, join_complex(list(leaves[1 + n_carry:]), x_complex))
        new_carry, y = step(leaves[0], carry, x)
        new_leaves, new_def = tree_flatten(new_carry)
        if new_def != carry_def:
            raise TracingError(
                f"{kind}: the body {name!r} returned a carry of structure {new_def.kind} with "
                f"{len(new_leaves)} leaves for an initial carry of {carry_def.kind} with "
                f"{carry_def.num_leaves}; return the carry in the structure it was given")
        if any(is_complex_value(leaf) and not was for leaf, was in zip(new_leaves, carry_complex)):
            raise complex_carry_error(kind, name)
        y_leaves, found["y_def"] = tree_flatten(y)
        found["y_complex"] = [is_complex_value(leaf) for leaf in y_leaves]
        return (tuple(split_complex(new_leaves, carry_complex))
                + tuple(split_complex(y_leaves, found["y_complex"])))

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
    body, consts = close_over(traced, name)
    return body, traced.out_shapes[n_carry:], found["y_def"], consts, found["y_complex"]


def split_complex(leaves: list, complex_flags: list) -> list:
    """Each leaf marked complex as two real leaves, its real and imaginary parts."""
    out = []
    for leaf, is_complex in zip(leaves, complex_flags):
        out += [np.real(leaf), np.imag(leaf)] if is_complex else [leaf]
    return out


def join_complex(leaves: list, complex_flags: list) -> list:
    """The inverse of :func:`split_complex`: ``re + 1j * im`` for each leaf marked complex."""
    out, position = [], 0
    for is_complex in complex_flags:
        if is_complex:
            out.append(leaves[position] + 1j * leaves[position + 1])
            position += 2
        else:
            out.append(leaves[position])
            position += 1
    return out


def complex_carry_error(kind: str, name: str) -> TracingError:
    """The refusal of a real carry leaf the body makes complex (JAX refuses it too)."""
    return TracingError(
        f"{kind} {name!r}: the body returns a complex value for a real leaf of the carry; "
        "the carry keeps its type from step to step: start it complex (x + 0j)")


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
