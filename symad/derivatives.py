"""The Graph -> Graph builders the public transforms call.

Each builder takes a traced :class:`~symad.function.Function` and returns the
Function computing one of its derivatives: :func:`grad_function` (reverse
mode), :func:`jvp_function` and :func:`vjp_function`, :func:`jacobian_function`
and :func:`hessian_function`, the sparse Jacobian and Hessian, and the Taylor
builders :func:`taylor_function`, :func:`derivative_function` and
:func:`mixed_partial_function`. A builder reads a graph and writes a graph, so
builders nest: ``grad_function(grad_function(f, 0), 0)`` is reverse mode
applied to the graph reverse mode produced. :mod:`symad.api` wraps them in
the public transforms (argument checks on the user's call, tracing per
argument signature, caching); the checks kept here guard what a builder is
given, whoever calls it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy

from symad import array_primitives as A
from symad.atom_arrays import (
    active_input_names,
    constant_atom,
    element_atom,
    element_atoms,
    substitute_atoms,
)
from symad.atoms import is_complex_atom
from symad.errors import DifferentiationError
from symad.function import Function, derive
from symad.graph import ArrayInput, atom_shape, is_zero_constant
from symad.leaves import input_leaf, is_whole_leaf, leaf_atoms, leaf_elements, leaf_shape
from symad.pytree import TreeDef, leaf_paths, tree_flatten, tree_unflatten
from symad.tracer import Parameter
from symad.transforms import backpropagate, push_forward
from symad.transforms.forward import consumer_index
from symad.transforms.reverse import full_shape
from symad.transforms.sparsity import array_patterns, set_bits, sparsity_pattern
from symad.transforms.taylor import Multivariate, taylor_series

__all__ = [
    "grad_function", "vjp_function", "jvp_function", "jacobian_function", "hessian_function",
    "sparse_jacobian_function", "sparse_hessian_function", "taylor_function",
    "derivative_function", "mixed_partial_function",
]

ONE = sympy.Integer(1)
ZERO = sympy.Integer(0)

#: name -> ``(takes(function), taylor(function, order, argnum, derivatives, transform))``:
#: Taylor mode by other means for graphs the coefficient sweep does not go through (a
#: loop's: filled by :mod:`symad.loops.series`, which sits above this module).
TAYLOR_ALTERNATIVES: dict = {}


# ---------------------------------------------------------------------------
# Checks on what a builder is given
# ---------------------------------------------------------------------------


def resolve_argnums(argnums, count: int, transform: str, name: str) -> tuple[int, ...]:
    """Positions as non-negative ints, checked against the number of arguments."""
    entries = argnums if isinstance(argnums, tuple) else (argnums,)
    resolved = []
    for entry in entries:
        if not -count <= entry < count:
            raise DifferentiationError(
                f"{transform}({name}): argnums entry {entry} is out of range for a call "
                f"with {count} positional argument{'s' if count != 1 else ''}"
            )
        resolved.append(entry % count)
    if len(set(resolved)) != len(resolved):
        raise DifferentiationError(f"{transform}({name}): argnums {argnums} name the same argument twice")
    return tuple(resolved)


def check_float_weights(weights, transform: str, name: str) -> None:
    """Integer Parameters in ``weights`` are an error, as integer arguments are (and in JAX)."""
    for weight in weights:
        dtype = getattr(weight, "given_dtype", None)
        if dtype is not None and dtype.kind not in "fc":
            raise DifferentiationError(
                f"{transform}({name}): weight sd.Parameter {weight.name!r} holds dtype {dtype}; "
                "derivatives are taken with respect to float inputs only (give it float values: "
                "sd.Parameter(np.asarray(value, dtype=float)), or leave it out of weights=)"
            )


# ---------------------------------------------------------------------------
# Reverse mode: grad, vjp
# ---------------------------------------------------------------------------


def _input_leaf_ranges(function: Function) -> list[range]:
    """For each top-level argument, the range of its leaves in ``function.in_symbols``."""
    ranges, start = [], 0
    for child in function.in_treedef.children:
        ranges.append(range(start, start + child.num_leaves))
        start += child.num_leaves
    return ranges


def _split_outputs(function: Function, outputs: list, has_aux: bool, transform: str):
    """(differentiated output tree, aux tuple or None) as pytrees of atom arrays."""
    tree = tree_unflatten(function.out_treedef, outputs)
    if not has_aux:
        return tree, None
    if function.out_treedef.kind not in ("tuple", "list") or not function.out_treedef.children:
        raise DifferentiationError(
            f"{transform}({function.name}, has_aux=True): the function must return a tuple "
            "(output, *aux), but it returned a single value"
        )
    return tree[0], tuple(tree[1:])


def _check_complex(function: Function, outputs, positions, holomorphic: bool, transform: str) -> None:
    """JAX's rules for complex numbers: ``grad`` and ``jacrev`` differentiate real outputs
    (complex inputs are fine: their gradient is the conjugate-convention cotangent), ``jacfwd``
    real inputs; ``holomorphic=True`` wants complex inputs and outputs and gives f'(z)."""
    name = function.name
    complex_out = any(is_complex_atom(atom) for leaf in tree_flatten(outputs)[0]
                      for atom in leaf_atoms(leaf))
    complex_in = [position for position in positions or ()
                  if any(function.complex_inputs[i] for i in _input_leaf_ranges(function)[position])]
    if holomorphic:
        real_in = [p for p in positions or () if p not in complex_in]
        if real_in or not complex_out:
            what = (f"argument {real_in[0]} is real" if real_in else "the output is real")
            raise DifferentiationError(
                f"{transform}({name}, holomorphic=True): {what}; holomorphic differentiation "
                "takes complex inputs and outputs (as JAX): pass complex values (x + 0j), or "
                "drop holomorphic=True for a real-valued function")
        return
    if complex_out and transform != "jacfwd":
        raise DifferentiationError(
            f"{transform}({name}): the differentiated output is complex; {transform} requires "
            "real-valued outputs (as JAX). For a holomorphic function pass holomorphic=True "
            "(the result is f'(z)); otherwise differentiate np.real(...) and np.imag(...) "
            "separately, or use sd.vjp with a complex cotangent")
    if complex_in and transform == "jacfwd":
        raise DifferentiationError(
            f"jacfwd({name}): argument {complex_in[0]} is complex; jacfwd requires real-valued "
            "inputs (as JAX). For a holomorphic function pass holomorphic=True; for a real "
            "function of complex inputs use sd.jacrev or sd.grad (JAX's conjugate convention)")


def _check_real_outputs(builder, outputs, transform: str, name: str) -> None:
    """Differentiated outputs must be real numbers: not None, not truth values (as in JAX)."""
    leaves = tree_flatten(outputs)[0]
    if not leaves:
        raise DifferentiationError(f"{transform}({name}): the function returned no value to differentiate")
    if any(builder.is_boolean(atom) for leaf in leaves for atom in leaf_atoms(leaf)):
        raise DifferentiationError(
            f"{transform}({name}): the differentiated output is a truth value (a comparison); "
            "derivatives are taken of real-valued outputs"
        )


def _wrt(function: Function, positions: tuple[int, ...] | None, weights: tuple[Parameter, ...]):
    """The atoms differentiated against, and a function that packs their cotangents into trees.

    Unused weights (the function never touches them) get exact zeros.
    """
    leaf_ranges = _input_leaf_ranges(function)
    atoms: list = []
    layout: list = []  # per differentiated tree: (treedef, [(shape, whole)])
    # A whole array is differentiated as one atom in an array program; in a program of
    # scalars (element-level code reading a few elements) element by element, as before.
    array_program = function.is_array_program
    for position in positions or ():
        leaves = [function.in_symbols[i] for i in leaf_ranges[position]]
        if not array_program:
            leaves = [leaf_elements(leaf) for leaf in leaves]
        layout.append((function.in_treedef.children[position],
                       [(leaf_shape(leaf), is_whole_leaf(leaf)) for leaf in leaves]))
        for leaf in leaves:
            atoms.extend(leaf_atoms(leaf))
    parameter_symbols = dict(function.parameters)
    for weight in weights:
        symbols = parameter_symbols.get(weight)
        if symbols is None:  # an unused weight: exact zeros
            symbols = np.full(weight.shape, ZERO, dtype=object)
        elif not array_program:
            symbols = leaf_elements(symbols)
        layout.append((TreeDef("leaf"), [(leaf_shape(symbols), is_whole_leaf(symbols))]))
        atoms.extend(leaf_atoms(symbols))

    def pack(flat_values: Sequence, single: bool, per_value: Callable[[Any, tuple], Any]):
        trees, start = [], 0
        for treedef, shapes in layout:
            leaves = []
            for shape, whole in shapes:
                if whole:  # one value of the whole array's shape
                    leaves.append(flat_values[start])
                    start += 1
                    continue
                count = int(np.prod(shape, dtype=int))
                leaves.append(per_value(flat_values[start:start + count], shape))
                start += count
            trees.append(tree_unflatten(treedef, leaves))
        position_trees = trees[: len(positions or ())]
        weight_trees = tuple(trees[len(positions or ()):])
        if positions is None:
            return weight_trees
        arg_part = position_trees[0] if single else tuple(position_trees)
        return (arg_part, weight_trees) if weights else arg_part

    return atoms, pack


def _atom_array(values: Sequence, shape: tuple) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array.reshape(shape)


def grad_function(function: Function, argnums, has_aux: bool = False, weights=(),
                  with_value: bool = False, holomorphic: bool = False) -> Function:
    """Reverse mode on a traced Function: the Function computing its gradient.

    ``argnums`` is an int, a tuple of ints, or None (weights only). Several or
    non-scalar outputs differentiate the sum of all their elements.
    """
    transform = "value_and_grad" if with_value else "grad"
    count = len(function.in_treedef.children)
    positions = None if argnums is None else resolve_argnums(argnums, count, transform, function.name)
    single = isinstance(argnums, int)
    weights = tuple(weights)
    check_float_weights(weights, transform, function.name)  # the value may have been reassigned

    def build(builder, primal_nodes, outputs):
        differentiated, aux = _split_outputs(function, outputs, has_aux, transform)
        _check_real_outputs(builder, differentiated, transform, function.name)
        _check_complex(function, differentiated, positions, holomorphic, transform)
        seeds = [(atom, ONE) for leaf in tree_flatten(differentiated)[0] for atom in leaf_atoms(leaf)]
        wrt_atoms, pack = _wrt(function, positions, weights)
        cotangents = backpropagate(builder, primal_nodes, seeds, wrt_atoms, function.name)
        grads = pack(cotangents, single, _atom_array)
        if with_value:
            return (tree_unflatten(function.out_treedef, outputs), grads)
        return (grads, aux) if has_aux else grads

    result = derive(function, f"{transform}({function.name})", build)
    if not with_value and not has_aux and positions is not None and not weights:
        result.output_labels, result.output_derivatives = _partial_labels(function, positions)
    return result


def _wrt_leaves(function: Function, positions: tuple[int, ...]) -> list:
    """The input symbol arrays of the arguments at ``positions``, leaf by leaf."""
    ranges = _input_leaf_ranges(function)
    return [function.in_symbols[i] for position in positions for i in ranges[position]]


def _partial_labels(function: Function, positions: tuple[int, ...]) -> tuple[list[str], list]:
    """LaTeX labels (d f / d x, nabla_w f) for the gradient leaves of the arguments at ``positions``,
    and what each leaf is the derivative of (so that grad(grad(f)) is labelled d2f/dx2)."""
    from symad.export.latex import gradient_labels

    return gradient_labels(function, _wrt_leaves(function, positions))


def vjp_function(function: Function, has_aux: bool) -> Function:
    leaves_tree = function.out_treedef
    if has_aux:
        leaves_tree = function.out_treedef.children[0]
    out_shapes = function.out_shapes[: leaves_tree.num_leaves]
    paths = leaf_paths(leaves_tree, "ct")
    taken = _taken_names(function)
    # A program of scalars keeps cotangents per element, as its outputs are.
    elements = not function.is_array_program
    # A complex output's cotangent is complex (JAX's pairing Re(ct * t)).
    complex_outputs = function.complex_outputs if function.is_complex_program else ()
    cotangent_symbols = [input_leaf(path, shape, taken, elements,
                                    complex=bool(complex_outputs) and complex_outputs[i])
                         for i, (path, shape) in enumerate(zip(paths, out_shapes))]
    positions = tuple(range(len(function.in_treedef.children)))

    def build(builder, primal_nodes, outputs):
        seeds = []
        for leaf, symbols in zip(outputs, cotangent_symbols):
            if isinstance(leaf, np.ndarray) and not isinstance(symbols, np.ndarray):
                # An output built element by element, seeded by a whole cotangent array.
                seeds.extend(zip(leaf.reshape(-1), _elements(builder, symbols)))
            elif not isinstance(leaf, np.ndarray) and isinstance(symbols, np.ndarray):
                seeds.append((leaf, symbols[()]))
            else:
                seeds.extend(zip(leaf_atoms(leaf), leaf_atoms(symbols)))
        wrt_atoms, pack = _wrt(function, positions, ())
        cotangents = backpropagate(builder, primal_nodes, seeds, wrt_atoms, function.name)
        return pack(cotangents, False, _atom_array)

    extra = (TreeDef("tuple", (leaves_tree,)), cotangent_symbols)
    return derive(function, f"vjp({function.name})", build, extra_inputs=extra)


# ---------------------------------------------------------------------------
# Forward mode: jvp
# ---------------------------------------------------------------------------


def jvp_function(function: Function, has_aux: bool) -> Function:
    paths = []
    for position, child in enumerate(function.in_treedef.children):
        paths.extend(leaf_paths(child, f"{_leaf_root(function, position)}_dot"))
    taken = _taken_names(function)
    elements = not function.is_array_program
    complex_inputs = function.complex_inputs  # a complex input's tangent is complex
    tangent_symbols = [input_leaf(path, leaf_shape(s), taken, elements and isinstance(s, np.ndarray),
                                  complex=complex_inputs[i])
                       for i, (path, s) in enumerate(zip(paths, function.in_symbols))]

    def build(builder, primal_nodes, outputs):
        seeds = {}
        for symbols, tangents in zip(function.in_symbols, tangent_symbols):
            if isinstance(symbols, np.ndarray) and not isinstance(tangents, np.ndarray):
                tangents = leaf_elements(tangents)  # an array of scalars, seeded element by element
            seeds.update(zip(leaf_atoms(symbols), leaf_atoms(tangents)))
            if symbols.__class__ is ArrayInput:  # its elements read by element-level code
                for symbol in symbols.made_elements():
                    seeds[symbol] = element_atom(builder, tangents, symbols.element_index(symbol))
        tangent_of = push_forward(builder, primal_nodes, seeds, function.name)
        tangent_outputs = [_output_tangent(builder, leaf, tangent_of) for leaf in outputs]
        out_tree = tree_unflatten(function.out_treedef, outputs)
        tangent_tree = tree_unflatten(function.out_treedef, tangent_outputs)
        if has_aux:
            _, aux = _split_outputs(function, outputs, True, "jvp")
            return (out_tree[0], tangent_tree[0], aux)
        return (out_tree, tangent_tree)

    extra = (function.in_treedef, tangent_symbols)
    return derive(function, f"jvp({function.name})", build, extra_inputs=extra)


def _output_tangent(builder, leaf, tangent_of: dict):
    """The tangent of an output leaf: each atom's, exact zeros (at its shape) where none reached."""
    if isinstance(leaf, np.ndarray):
        return substitute_atoms(leaf, {atom: tangent_of.get(atom, ZERO) for atom in leaf.reshape(-1)
                                       if atom.is_Symbol or atom not in tangent_of})
    tangent = tangent_of.get(leaf, ZERO) if leaf.is_Symbol else ZERO
    if atom_shape(tangent) != atom_shape(leaf):
        tangent = A.broadcast_atom(builder, tangent, atom_shape(leaf))
    return tangent


def _elements(builder, atom) -> list:
    """The scalar atoms of a whole array's elements, in order."""
    return leaf_elements(atom).reshape(-1).tolist() if atom.__class__ is ArrayInput else [
        element_atom(builder, atom, index) for index in np.ndindex(atom_shape(atom))]


def _taken_names(function: Function) -> set[str]:
    """Names new input symbols of a transform of ``function`` must avoid."""
    return {symbol.name for symbol in function.graph.inputs} | active_input_names()


def _leaf_root(function: Function, position: int) -> str:
    symbols = function.in_symbols[_input_leaf_ranges(function)[position].start] if function.in_symbols else None
    if symbols is None or math.prod(leaf_shape(symbols)) == 0:
        return f"x{position}"
    name = leaf_atoms(symbols)[0].name
    return name.split("[")[0].split(".")[0]


# ---------------------------------------------------------------------------
# Jacobians and Hessians
# ---------------------------------------------------------------------------


def jacobian_function(function: Function, argnums, has_aux: bool = False, mode: str = "rev",
                      flat_aux: bool = False, holomorphic: bool = False) -> Function:
    """The Jacobian of a traced Function, by reverse (one sweep per output element) or forward mode.

    Each output leaf of shape ``So`` holds, per differentiated input leaf of
    shape ``Si``, an array of shape ``So + Si``.
    """
    transform = "jacrev" if mode == "rev" else "jacfwd"
    count = len(function.in_treedef.children)
    positions = resolve_argnums(argnums, count, transform, function.name)
    single = isinstance(argnums, int)
    if function.is_array_program:
        result = _array_jacobian_function(function, positions, single, has_aux, mode, flat_aux,
                                          holomorphic)
        if not has_aux:
            from symad.export.latex import jacobian_labels

            result.output_labels, result.output_derivatives = jacobian_labels(
                function, _wrt_leaves(function, positions))
        return result

    def build(builder, primal_nodes, outputs):
        differentiated, aux = _split_outputs(function, outputs, has_aux, transform)
        _check_real_outputs(builder, differentiated, transform, function.name)
        _check_complex(function, differentiated, positions, holomorphic, transform)
        out_leaves, out_treedef = tree_flatten(differentiated)
        wrt_atoms, pack = _wrt(function, positions, ())
        out_atoms = [atom for leaf in out_leaves for atom in leaf.reshape(-1)]
        # derivative[o][i] = d out_atoms[o] / d wrt_atoms[i]
        if mode == "rev":
            rows = [backpropagate(builder, primal_nodes, [(atom, ONE)], wrt_atoms, function.name)
                    for atom in out_atoms]
        else:
            consumers = consumer_index(primal_nodes)
            columns = [push_forward(builder, primal_nodes, {atom: ONE}, function.name, consumers)
                       for atom in wrt_atoms]
            rows = [[column.get(out, ZERO) for column in columns] for out in out_atoms]
        result_leaves, start = [], 0
        for leaf in out_leaves:
            block = rows[start:start + leaf.size]
            start += leaf.size
            result_leaves.append(pack(list(range(len(wrt_atoms))), single,
                                      functools.partial(_jacobian_block, block, leaf.shape)))
        jac = tree_unflatten(out_treedef, result_leaves)
        if not has_aux:
            return jac
        # flat_aux: (jac, *aux), so that a further has_aux transform sees the same aux tuple.
        return (jac, *aux) if flat_aux else (jac, aux)

    result = derive(function, f"{transform}({function.name})", build)
    if not has_aux:
        from symad.export.latex import jacobian_labels

        result.output_labels, result.output_derivatives = jacobian_labels(
            function, _wrt_leaves(function, positions))
    return result


def _array_jacobian_function(function: Function, positions: tuple, single: bool, has_aux: bool,
                             mode: str, flat_aux: bool, holomorphic: bool = False) -> Function:
    """The Jacobian of an array program: one sweep per output leaf (reverse) or input leaf
    (forward), each carrying a leading axis of seeds -- the identity -- so every row (or
    column) comes from one sweep, as JAX's ``vmap`` of a vector-Jacobian product."""
    transform = "jacrev" if mode == "rev" else "jacfwd"

    def build(builder, primal_nodes, outputs):
        differentiated, aux = _split_outputs(function, outputs, has_aux, transform)
        _check_real_outputs(builder, differentiated, transform, function.name)
        _check_complex(function, differentiated, positions, holomorphic, transform)
        out_leaves, out_treedef = tree_flatten(differentiated)
        wrt_atoms, pack = _wrt(function, positions, ())
        wrt_shapes = [atom_shape(atom) for atom in wrt_atoms]
        blocks = [[None] * len(wrt_atoms) for _ in out_leaves]  # blocks[out][wrt]
        if mode == "rev":
            for row, leaf in enumerate(out_leaves):
                out_shape = leaf_shape(leaf)
                size = math.prod(out_shape)
                # One output: the gradient itself, swept with no axis of seeds.
                lead = () if size == 1 else (size,)
                seeds = [(leaf_atoms(leaf)[0], ONE)] if size == 1 else _identity_seeds(builder, leaf, size)
                cotangents = backpropagate(builder, primal_nodes, seeds, wrt_atoms, function.name,
                                           lead=lead)
                for column, (cotangent, in_shape) in enumerate(zip(cotangents, wrt_shapes)):
                    cotangent = full_shape(builder, cotangent, in_shape, len(lead)) if cotangent.is_Symbol \
                        else A.broadcast_atom(builder, cotangent, lead + in_shape)
                    blocks[row][column] = A.record_reshape(builder, cotangent, out_shape + in_shape)
        else:
            consumers = consumer_index(primal_nodes)
            for column, (atom, in_shape) in enumerate(zip(wrt_atoms, wrt_shapes)):
                size = math.prod(in_shape)
                tangent_of = push_forward(builder, primal_nodes, _identity_tangents(builder, atom, size),
                                          function.name, consumers, lead=1)
                for row, leaf in enumerate(out_leaves):
                    out_shape = leaf_shape(leaf)
                    tangent = _leaf_tangent(builder, leaf, tangent_of, size)
                    moved = A.record_transpose(builder, tangent, tuple(range(1, len(out_shape) + 1)) + (0,))
                    blocks[row][column] = A.record_reshape(builder, moved, out_shape + in_shape)
        result_leaves = [pack(row_blocks, single, lambda values, shape: values[0])
                         for row_blocks in blocks]
        jac = tree_unflatten(out_treedef, result_leaves)
        if not has_aux:
            return jac
        return (jac, *aux) if flat_aux else (jac, aux)

    return derive(function, f"{transform}({function.name})", build)


def _identity_seeds(builder, leaf, size: int) -> list:
    """Seeds for the rows of a Jacobian: the identity, one row per element of an output leaf."""
    identity = np.eye(size)
    if isinstance(leaf, np.ndarray):
        return [(atom, constant_atom(builder, identity[k])) for k, atom in enumerate(leaf.reshape(-1))]
    return [(leaf, constant_atom(builder, identity.reshape((size,) + atom_shape(leaf))))]


def _identity_tangents(builder, atom, size: int) -> dict:
    """Seeds for the columns of a Jacobian: the identity over one input's elements."""
    return _seed_tangents(builder, atom, np.eye(size))


def _seed_tangents(builder, leaf, seeds: np.ndarray) -> dict:
    """Tangents of one input leaf carrying a leading axis of seeds: ``seeds`` is ``(count, elements)``."""
    count = seeds.shape[0]
    if isinstance(leaf, np.ndarray):  # scalar atoms: each its column of seeds
        return {atom: constant_atom(builder, seeds[:, k]) for k, atom in enumerate(leaf.reshape(-1).tolist())}
    tangents = {leaf: constant_atom(builder, seeds.reshape((count,) + atom_shape(leaf)))}
    if leaf.__class__ is ArrayInput:  # element-level code reads its elements' symbols
        for symbol in leaf.made_elements():
            flat = int(np.ravel_multi_index(leaf.element_index(symbol), leaf.shape))
            tangents[symbol] = constant_atom(builder, seeds[:, flat])
    return tangents


def _leaf_tangent(builder, leaf, tangent_of: dict, size: int):
    """An output leaf's tangent with a leading axis of ``size`` seeds: ``(size,) + its shape``."""
    if isinstance(leaf, np.ndarray):
        elements = [tangent_of.get(atom, ZERO) if atom.is_Symbol else ZERO for atom in leaf.reshape(-1)]
        if all(is_zero_constant(t) for t in elements):
            return A.broadcast_atom(builder, ZERO, (size,) + leaf.shape)
        elements = [A.broadcast_atom(builder, t, (size,)) if not t.is_Symbol else t for t in elements]
        params = (("shape", leaf.shape), ("positions", tuple(range(len(elements)))), ("has_base", False))
        return builder.record(A.pack_p, elements, params)
    tangent = tangent_of.get(leaf, ZERO) if leaf.is_Symbol else ZERO
    if not tangent.is_Symbol:
        return A.broadcast_atom(builder, tangent, (size,) + atom_shape(leaf))
    return full_shape(builder, tangent, atom_shape(leaf), 1)


def _jacobian_block(rows: list[list], out_shape: tuple, columns: Sequence[int], in_shape: tuple):
    """The array ``out_shape + in_shape`` of ``rows[o][i]`` for the wrt positions ``columns``."""
    block = np.empty((len(rows), len(columns)), dtype=object)
    for o, row in enumerate(rows):
        block[o, :] = [row[i] for i in columns]
    return block.reshape(tuple(out_shape) + tuple(in_shape))


def sparse_jacobian_function(function: Function, argnum: int, symmetric: bool = False,
                             compressed: bool | None = None) -> Function:
    """The structural non-zeros of ``function``'s Jacobian w.r.t. one argument, as a Function.

    Outputs one vector: the non-zero values in row-major (CSR) order; the
    Function's ``sparse_layout`` is ``(rows, columns, shape)``. With
    ``symmetric`` (a Hessian: ``function`` is a gradient), ``(i, j)`` and
    ``(j, i)`` are one value, computed once.

    ``compressed`` (default: for array programs) computes them from a few
    directional derivatives chosen by graph colouring, in one forward sweep
    (:func:`_compressed_jacobian_function`); its ``sparse_colouring`` says
    which colouring and how many colours. Otherwise each input element gets
    its own forward sweep over its cone of influence, and each non-zero is a
    scalar atom with its own formula, as for scalar programs, whose graphs
    stay scalar this way (``sparse_colouring`` is None).
    """
    transform = "hessian" if symmetric else "jacobian"
    (position,) = resolve_argnums(argnum, len(function.in_treedef.children), transform, function.name)
    leaf_range = _input_leaf_ranges(function)[position]
    if len(leaf_range) != 1:
        raise DifferentiationError(
            f"{transform}({function.name}, sparse=True): argument {position} is a pytree; sparse "
            "Jacobians and Hessians take one array argument (concatenate the parameters)")
    wrt_leaf = function.in_symbols[leaf_range.start]
    if (function.is_array_program if compressed is None else compressed):
        return _compressed_jacobian_function(function, wrt_leaf, transform, symmetric)
    wrt = leaf_elements(wrt_leaf).reshape(-1).tolist()
    layout = {}

    def build(builder, primal_nodes, outputs):
        _check_real_outputs(builder, outputs, transform, function.name)
        out_atoms = [atom for leaf in outputs for atom in
                     (leaf if isinstance(leaf, np.ndarray) else element_atoms(leaf)).reshape(-1).tolist()]
        masks = array_patterns(primal_nodes, wrt, out_atoms)
        consumers = consumer_index(primal_nodes)
        rows_of_column: dict = {}
        for row, out in enumerate(out_atoms):
            for column in set_bits((masks[out] if out.is_Symbol else None) or 0):
                rows_of_column.setdefault(column, []).append(row)
        entries = {}
        for column, rows in sorted(rows_of_column.items()):
            atom = wrt[column]
            tangents = push_forward(builder, primal_nodes, {atom: ONE}, function.name, consumers)
            for row in rows:
                entries[row, column] = tangents.get(out_atoms[row], ZERO)
        if symmetric:
            for (row, column) in entries:
                if row > column and (column, row) in entries:
                    entries[row, column] = entries[column, row]
        ordered = sorted(entries)
        layout["value"] = (np.array([r for r, _ in ordered], dtype=np.intp),
                           np.array([c for _, c in ordered], dtype=np.intp),
                           (len(out_atoms), len(wrt)))
        return _atom_array([entries[key] for key in ordered], (len(ordered),))

    result = derive(function, f"{transform}({function.name}, sparse)", build)
    result.sparse_layout = layout["value"]
    result.sparse_colouring = None
    return result


def _compressed_jacobian_function(function: Function, wrt_leaf, transform: str, symmetric: bool) -> Function:
    """The structural non-zeros of an array program's Jacobian from compressed directional derivatives.

    The pattern comes from the graph (:mod:`symad.transforms.sparsity`, no
    unrolling); the columns are coloured (:mod:`symad.transforms.colouring`:
    distance-2 for a Jacobian, star or distance-2 for a Hessian) and one
    forward sweep pushes the ``k`` seeds ``S[:, c]`` (ones on the columns of
    colour ``c``) at once, as a leading axis of seeds: the compressed ``J S``,
    ``k`` rows of every output. One ``take`` node reads each non-zero from it.
    """
    import scipy.sparse

    from symad.transforms.colouring import (
        column_colouring,
        hessian_colouring,
        hessian_sources,
        jacobian_sources,
    )

    layout = {}

    def build(builder, primal_nodes, outputs):
        _check_real_outputs(builder, outputs, transform, function.name)
        pattern = sparsity_pattern(primal_nodes, leaf_atoms(wrt_leaf), outputs)
        if symmetric:
            pattern = scipy.sparse.csr_matrix(pattern + pattern.T, dtype=bool)
            pattern.sort_indices()
            colouring = hessian_colouring(pattern)
            sources = hessian_sources(pattern, colouring)
        else:
            colouring = column_colouring(pattern)
            sources = jacobian_sources(pattern, colouring)
        rows = np.repeat(np.arange(pattern.shape[0], dtype=np.intp), np.diff(pattern.indptr))
        layout["value"] = (rows, pattern.indices.astype(np.intp), pattern.shape)
        layout["colouring"] = colouring
        if not sources.size:
            return constant_atom(builder, np.zeros(0))
        seeds = np.zeros((colouring.count, pattern.shape[1]))
        seeds[colouring.colours, np.arange(pattern.shape[1])] = 1.0
        tangent_of = push_forward(builder, primal_nodes, _seed_tangents(builder, wrt_leaf, seeds),
                                  function.name, consumer_index(primal_nodes), lead=1)
        blocks = [A.record_reshape(builder, _leaf_tangent(builder, leaf, tangent_of, colouring.count),
                                   (math.prod(leaf_shape(leaf)),), lead=1) for leaf in outputs]
        compressed = A.record_concatenate(builder, blocks, -1, lead=1)
        flat = A.record_reshape(builder, compressed, (colouring.count * pattern.shape[0],))
        return A.record_take(builder, flat, sources, -1)

    result = derive(function, f"{transform}({function.name}, sparse)", build)
    result.sparse_layout = layout["value"]
    result.sparse_colouring = layout["colouring"]
    return result


def sparse_hessian_function(function: Function, argnum: int) -> Function:
    """The structural non-zeros of the Hessian: a sparse Jacobian of the gradient, symmetric.

    Compressed (star colouring) when ``function`` is an array program; a
    scalar program's gradient keeps one sweep per column. A function with
    several or non-scalar outputs has one Hessian per output element, as the
    dense ``hessian`` gives them (shape ``out.shape + in.shape + in.shape``):
    the sparse Jacobian of its Jacobian, whose rows are the pairs (output
    element, first derivative) in row-major order, so that its dense form
    reshaped to the dense Hessian's shape is the dense Hessian. (The Hessian
    of the sum of the outputs, which ``grad``'s convention would give, is
    ``hessian(lambda x: np.sum(f(x)), sparse=True)``.)
    """
    if function.out_treedef.num_leaves == 1 and function.out_shapes[0] == ():
        gradient = grad_function(function, argnum)
        return sparse_jacobian_function(gradient, argnum, symmetric=True,
                                        compressed=function.is_array_program)
    jacobian = jacobian_function(function, argnum, False, "rev")
    return sparse_jacobian_function(jacobian, argnum, compressed=function.is_array_program)


def hessian_function(function: Function, argnums, has_aux: bool = False,
                     holomorphic: bool = False) -> Function:
    """Forward over reverse mode, with each mixed pair computed once.

    ``H[i, j]`` and ``H[j, i]`` are the same output atom (the one first in
    output order), so evaluation computes the upper triangle only and the
    result is exactly symmetric. At kinks of ``where``/``maximum``, where the
    one-sided conventions could make the two orders of differentiation
    disagree, the upper triangle's value is the one returned.
    """
    gradient = jacobian_function(function, argnums, has_aux, "rev", flat_aux=True,
                                 holomorphic=holomorphic)
    full = jacobian_function(gradient, argnums, has_aux, "fwd", holomorphic=holomorphic)
    positions = resolve_argnums(argnums, len(function.in_treedef.children), "hessian", function.name)
    if not has_aux and len(function.out_shapes) == 1:
        from symad.export.latex import hessian_labels

        full.output_labels = hessian_labels(function, _wrt_leaves(function, positions))
    if full.is_array_program:
        return full  # whole-array blocks: no pair of scalar entries to share
    leaf_ranges = _input_leaf_ranges(function)
    wrt_sizes = [math.prod(leaf_shape(function.in_symbols[i])) for p in positions for i in leaf_ranges[p]]
    differentiated = function.out_treedef.children[0] if has_aux else function.out_treedef
    out_sizes = [math.prod(shape) for shape in function.out_shapes[:differentiated.num_leaves]]

    outputs = list(full.graph.outputs)
    offsets, start = {}, 0
    for out_leaf, out_size in enumerate(out_sizes):
        for row, row_size in enumerate(wrt_sizes):
            for column, column_size in enumerate(wrt_sizes):
                offsets[out_leaf, row, column] = start
                start += out_size * row_size * column_size
    for (out_leaf, row, column), offset in offsets.items():
        if column < row:
            continue  # each block pair is visited once, from its upper block
        size, row_size, column_size = out_sizes[out_leaf], wrt_sizes[row], wrt_sizes[column]
        upper = offset + np.arange(size * row_size * column_size).reshape(size, row_size, column_size)
        lower = offsets[out_leaf, column, row] + np.arange(size * column_size * row_size).reshape(
            size, column_size, row_size).transpose(0, 2, 1)
        for kept, mirrored in zip(upper.ravel(), lower.ravel()):
            if mirrored > kept:
                outputs[mirrored] = outputs[kept]
    return _with_outputs(full, outputs)


def _with_outputs(function: Function, outputs: Sequence, out_treedef=None, out_shapes=None,
                  name: str | None = None) -> Function:
    """``function`` with other output atoms (and structure); nodes no output needs are dropped."""
    from symad.graph import live_graph

    graph = live_graph(function.graph.inputs, function.graph.nodes, outputs)
    result = Function(
        graph, name=name or function.name, in_treedef=function.in_treedef,
        in_symbols=function.in_symbols,
        out_treedef=function.out_treedef if out_treedef is None else out_treedef,
        out_shapes=function.out_shapes if out_shapes is None else out_shapes,
        parameters=function.parameters)
    if out_treedef is None:
        result.output_labels = function.output_labels
    return result


# ---------------------------------------------------------------------------
# Taylor series and n-th derivatives
# ---------------------------------------------------------------------------


def taylor_function(function: Function, order: int, argnum, derivatives: bool = False,
                    transform: str = "taylor", direction: tuple | None = None) -> Function:
    """Taylor mode on a traced Function of scalars: coefficients of orders 0..``order`` at once.

    With an int ``argnum`` the result returns a tuple with one entry per order
    ``k = 0..order``, each shaped like ``function``'s output: the normalised
    Taylor coefficient ``f^(k)(x) / k!`` along argument ``argnum``, or the
    derivative ``f^(k)`` itself with ``derivatives=True``. With a tuple
    ``argnum`` and a ``direction`` (one number per argument) the tuple holds the
    coefficients of ``t -> f(x + t * direction)``; with a tuple ``argnum`` and no
    direction, the result returns the multivariate series instead
    (:func:`_multivariate_taylor_function`).
    """
    _require_scalar_arguments(function, transform)
    count = len(function.in_treedef.children)
    positions = resolve_argnums(argnum, count, transform, function.name)
    if isinstance(argnum, int) and direction is None:
        for takes, taylor in TAYLOR_ALTERNATIVES.values():  # graphs the sweep cannot take (loops)
            if takes(function):
                return taylor(function, order, argnum, derivatives, transform)
    if isinstance(argnum, tuple) and direction is None:
        return _multivariate_taylor_function(function, order, positions, derivatives)
    steps = (ONE,) * len(positions) if direction is None else direction

    def build(builder, primal_nodes, outputs):
        variables = _variables(function, positions)
        seeds = {variable: ([variable, step] + [ZERO] * (order - 1) if order else [variable])
                 for variable, step in zip(variables, steps)}
        sweep = _sweep(function, builder, primal_nodes, outputs, seeds, order, transform)
        return tuple(_coefficients_out(function, sweep, outputs, k, math.factorial(k) if derivatives else 1)
                     for k in range(order + 1))

    return derive(function, f"{transform}({function.name})", build)


def _variables(function: Function, positions: Sequence[int]) -> list:
    """The input symbols of the scalar arguments at ``positions``."""
    leaf_ranges = _input_leaf_ranges(function)
    return [function.in_symbols[leaf_ranges[position].start][()] for position in positions]


def _sweep(function: Function, builder, primal_nodes, outputs, seeds: dict, index, transform: str):
    """The Taylor sweep of ``seeds`` through the replayed graph, after checking the outputs are real."""
    _check_real_outputs(builder, tree_unflatten(function.out_treedef, outputs), transform, function.name)
    return taylor_series(builder, primal_nodes, seeds, index, function.name)


def _multivariate_seeds(variables: Sequence, index: Multivariate) -> dict:
    """Each variable's series: itself at the zero key, 1 at its own unit key, zeros elsewhere."""
    seeds = {}
    for axis, variable in enumerate(variables):
        unit = tuple(int(i == axis) for i in range(len(variables)))
        seeds[variable] = [variable if k == index.zero else ONE if k == unit else ZERO for k in index.keys]
    return seeds


def _coefficients_out(function: Function, sweep, outputs: list, k, scale: int):
    """The outputs' coefficients at key ``k`` times ``scale``, in the structure of the outputs."""
    factor = sympy.Integer(scale)
    per_atom = {atom: sweep.scaled(factor, sweep.coefficient(atom, k))
                for leaf in outputs for atom in leaf.reshape(-1)}
    return tree_unflatten(function.out_treedef, [substitute_atoms(leaf, per_atom) for leaf in outputs])


def _multi_factorial(k: tuple) -> int:
    return math.prod(math.factorial(entry) for entry in k)


def _multivariate_taylor_function(function: Function, order: int, positions: tuple[int, ...],
                                  derivatives: bool) -> Function:
    """The Taylor map of ``function`` in the arguments at ``positions``, to total order ``order``.

    The result returns a dict from every multi-index ``k`` with ``|k| <= order`` to the
    coefficient of ``dx_1**k_1 ... dx_d**k_d`` (each shaped like the output), or to the
    partial derivative ``k! * coefficient`` with ``derivatives=True``. One sweep of
    multivariate recurrences (:class:`~symad.transforms.taylor.Multivariate`) gives every
    coefficient.
    """
    index = Multivariate.total_order(len(positions), order)

    def build(builder, primal_nodes, outputs):
        seeds = _multivariate_seeds(_variables(function, positions), index)
        sweep = _sweep(function, builder, primal_nodes, outputs, seeds, index, "taylor")
        return {k: _coefficients_out(function, sweep, outputs, k, _multi_factorial(k) if derivatives else 1)
                for k in index.keys}

    result = derive(function, f"taylor({function.name}, {order})", build)
    if function.out_shapes == ((),):
        result.output_labels = _taylor_map_labels(function, positions, index, derivatives)
    return result


def _argument_names(function: Function, positions: Sequence[int]) -> list[str]:
    from symad.export.latex import leaf_name

    return [leaf_name(np.array(variable, dtype=object)) for variable in _variables(function, positions)]


def _differentiated_names(names: Sequence[str], orders: Sequence[int]) -> tuple[str, ...]:
    """The variables differentiated by, each as often as its order, the last argument first:
    a label (:func:`~symad.export.latex.mixed_partial_label`) then reads d x^2 d y, in argument order."""
    return tuple(name for axis in reversed(range(len(orders))) for name in [names[axis]] * orders[axis])


def _taylor_map_labels(function: Function, positions: Sequence[int], index: Multivariate,
                       derivatives: bool) -> list[str]:
    r"""One LaTeX label per entry of a Taylor map of a scalar function, in the order of its leaves
    (sorted keys): ``\frac{\partial^{3} f}{\partial x^{2} \partial y}``, over ``k!`` for a coefficient."""
    from symad.export.latex import mixed_partial_label, name_latex

    names = _argument_names(function, positions)
    labels = []
    for k in sorted(index.keys):
        if not any(k):
            labels.append(name_latex(function.name))
            continue
        label = mixed_partial_label(function.name, _differentiated_names(names, k))
        factorial = _multi_factorial(k)
        labels.append(label if derivatives or factorial == 1 else rf"\frac{{1}}{{{factorial}}} {label}")
    return labels


def derivative_function(function: Function, n, argnum: int = 0) -> Function:
    """The ``n``-th derivative of a traced Function of scalars, by Taylor mode (O(n**2) per node).

    ``n`` may be a tuple of orders, one per leading argument: the mixed partial
    (:func:`mixed_partial_function`; ``argnum`` is then ignored).
    """
    if isinstance(n, tuple):
        return mixed_partial_function(function, n)
    if n == 0:
        _require_scalar_arguments(function, "derivative")
        return function
    all_orders = taylor_function(function, n, argnum, derivatives=True, transform="derivative")
    # Keep only the n-th order: the last entry of the tuple of orders.
    last = all_orders.out_treedef.children[-1]
    count = last.num_leaves
    leaf_count = sum(math.prod(shape) for shape in all_orders.out_shapes[len(all_orders.out_shapes) - count:])
    outputs = all_orders.graph.outputs[len(all_orders.graph.outputs) - leaf_count:]
    result = _with_outputs(all_orders, outputs, last, all_orders.out_shapes[len(all_orders.out_shapes) - count:],
                           name=f"derivative({function.name}, {n})")
    if len(function.out_shapes) == 1:
        from symad.export.latex import leaf_name, nth_derivative_label

        (position,) = resolve_argnums(argnum, len(function.in_treedef.children), "derivative", function.name)
        variable = leaf_name(function.in_symbols[_input_leaf_ranges(function)[position].start])
        result.output_labels = [nth_derivative_label(function.name, variable, n)]
    return result


def mixed_partial_function(function: Function, orders: tuple[int, ...]) -> Function:
    """The mixed partial derivative of ``orders[i]``-th order in each leading argument ``i``.

    Taylor mode with multivariate recurrences over the box of multi-indices
    ``k <= orders`` (:class:`~symad.transforms.taylor.Multivariate`): the
    coefficient at ``orders`` times ``orders!``. The cost grows with the number of
    splits of the box, ``prod((a_i + 1)(a_i + 2) / 2)`` products per product of
    two full series: polynomial in the total order. Arguments of order 0 are not
    seeded; with one non-zero order the result is :func:`derivative_function`'s.
    """
    _require_scalar_arguments(function, "derivative")
    count = len(function.in_treedef.children)
    check_order_count(orders, count, function.name)
    varying = [(position, order) for position, order in enumerate(orders) if order]
    if not varying:
        return function
    name = f"derivative({function.name}, {orders})"
    if len(varying) == 1:
        ((position, order),) = varying
        result = derivative_function(function, order, position)
        result.name = name
    else:
        positions = [position for position, _ in varying]
        target = tuple(order for _, order in varying)
        index = Multivariate.box(target)

        def build(builder, primal_nodes, outputs):
            seeds = _multivariate_seeds(_variables(function, positions), index)
            sweep = _sweep(function, builder, primal_nodes, outputs, seeds, index, "derivative")
            return _coefficients_out(function, sweep, outputs, target, _multi_factorial(target))

        result = derive(function, name, build)
    if len(function.out_shapes) == 1 and count > 1:
        from symad.export.latex import mixed_partial_label

        differentiated = _differentiated_names(_argument_names(function, range(len(orders))), orders)
        result.output_labels = [mixed_partial_label(function.name, differentiated)]
        result.output_derivatives = [(function.name, differentiated)]
    return result


def check_order_count(orders: tuple, count: int, name: str) -> None:
    if len(orders) > count:
        raise DifferentiationError(
            f"derivative({name}, {orders}): {len(orders)} orders for a function of {count} "
            f"argument{'s' if count != 1 else ''}; give one order per leading argument"
        )


def _require_scalar_arguments(function: Function, transform: str) -> None:
    if any(shape != () for shape in function.in_shapes):
        raise DifferentiationError(
            f"{transform}({function.name}): every argument must be scalar; use sd.grad or "
            "sd.jacobian for functions of arrays (array arguments given at call time are "
            "evaluated elementwise)"
        )
