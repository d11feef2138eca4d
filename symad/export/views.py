"""The views of a traced Function: its formula, shared-subexpression program, C source,
sparsity pattern and sizes.

:class:`~symad.function.Function` keeps the graph and the structure of its
arguments and results; each of its views (``F.formula()``, ``F.cse()``,
``F.to_c()``, ``F.sparsity()``, ``F.stats()``) is a thin method calling the
function of the same name here, which reads the Function's graph and
output leaves and imports nothing above the graph.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import sympy

from symad.errors import CompileError, ExportError
from symad.graph import fresh_symbols, sympy_form
from symad.pytree import tree_unflatten

__all__ = ["formula", "simplified_formula", "cse", "sparsity", "to_c", "stats", "to_sympy_value",
           "sympy_outputs"]


def formula(function, *, max_size: float | None = None, max_depth: float | None = None,
            expand: bool = False, simplify: bool = False, numbers: str = "auto") -> Any:
    """The outputs as SymPy expressions, shared subexpressions inlined (:meth:`Function.formula`)."""
    from symad.inlining import check_budget

    if expand:
        expanded = function.expand()
        if expanded is not function:
            return expanded.formula(max_size=max_size, max_depth=max_depth, simplify=simplify,
                                    numbers=numbers)
    elif function.is_array_program:
        from symad.export.index_notation import index_formula

        return index_formula(function, max_size=max_size, max_depth=max_depth)
    check_budget(
        f"formula({function.name})", function.graph, max_size, max_depth,
        "Use F.cse() for the program with shared values kept as assignments, or "
        "F.latex() to print it; formula(max_size=..., max_depth=...) raises the limits.")
    if simplify:
        return simplified_formula(function, numbers)
    expression_of: dict = {}
    for node in function.graph.nodes:
        expression_of[node] = node.expr_with(expression_of)
    leaves = [to_sympy_value(sympy_outputs(atoms, expression_of))
              for atoms in function.output_atoms()]
    return tree_unflatten(function.out_treedef, leaves)


def simplified_formula(function, numbers: str) -> Any:
    """The formula as :meth:`Function.latex` prints it (``formula(simplify=True)``)."""
    from symad.export.display import NUMBER_STYLES
    from symad.export.latex import display_formula

    if not isinstance(numbers, str) or numbers not in NUMBER_STYLES:
        raise ExportError(f"formula({function.name}): numbers={numbers!r} is not allowed; numbers "
                          "must be 'auto', 'fractions' or 'decimals'")
    flat = display_formula(function, numbers=numbers)
    leaves, start = [], 0
    for shape in function.out_shapes:
        count = int(np.prod(shape, dtype=int))
        elements = np.empty(count, dtype=object)
        elements[:] = flat[start:start + count]
        start += count
        leaves.append(to_sympy_value(elements.reshape(shape)))
    return tree_unflatten(function.out_treedef, leaves)


def cse(function, *, expand: bool = False) -> tuple[list[tuple[sympy.Symbol, sympy.Basic]], Any]:
    """The shared-subexpression program, in the form ``sympy.cse`` returns (:meth:`Function.cse`)."""
    from symad.inlining import MAX_FORMULA_DEPTH

    if expand:
        expanded = function.expand()
        if expanded is not function:
            return expanded.cse()
    elif function.is_array_program:
        from symad.export.index_notation import index_cse

        return index_cse(function)
    uses = function.graph.use_counts()
    names = fresh_symbols(function.graph.inputs)
    assignments: list = []
    replacement: dict = {}
    depth: dict = {}  # nesting of each inlined node's expression (assignments are 0)
    for node in function.graph.nodes:
        expression = node.expr_with(replacement)
        level = 1 + max([depth.get(atom, 0) for atom in node.args], default=0)
        # A value used once is inlined, unless that nests deeper than SymPy can print.
        if uses.get(node, 0) > 1 or level >= MAX_FORMULA_DEPTH:
            name = next(names)
            assignments.append((name, expression))
            replacement[node] = name
        else:
            replacement[node] = expression
            depth[node] = level
    leaves = [to_sympy_value(sympy_outputs(atoms, replacement))
              for atoms in function.output_atoms()]
    return assignments, leaves


def sparsity(function):
    """The structural non-zero pattern of the outputs w.r.t. the inputs (:meth:`Function.sparsity`)."""
    from symad.transforms.sparsity import sparsity_pattern

    return sparsity_pattern(function.graph.nodes, function.graph.inputs, function.output_atoms())


def to_c(function, name: str | None = None):
    """C99 source and header of a function computing every output (:meth:`Function.to_c`)."""
    from symad.export.c import check_name, default_name, function_c

    if function.is_complex_program:
        raise CompileError(f"{function.name}: C export writes double arithmetic; this function "
                           "holds complex values. Export the real and imaginary parts as two "
                           "real functions, or evaluate it with F.compile('numpy')")
    if function.is_array_program:  # loops over the arrays, not a statement per element
        from symad.export.c_loops import function_c_loops

        if function.graph.free_symbols():
            return function_c(function, name)  # raises: values of an enclosing trace
        name = check_name(name, function.name) if name is not None else default_name(function.name)
        return function_c_loops(function, name)
    return function_c(function.expand(), name)


def stats(function) -> dict:
    """Sizes of the graph (:meth:`Function.stats`)."""
    operations = Counter(node.primitive.name for node in function.graph.nodes)
    uses = function.graph.use_counts()
    return {
        "nodes": len(function.graph.nodes),
        "inputs": len(function.graph.inputs),
        "outputs": len(function.graph.outputs),
        "shared": sum(1 for node in function.graph.nodes if uses.get(node, 0) > 1),
        "operations": dict(sorted(operations.items())),
    }


def sympy_outputs(atoms: np.ndarray, expression_of: dict) -> np.ndarray:
    """Output atoms as SymPy sees them: a node's expression from ``expression_of``, or the atom's
    own SymPy form (an input, a constant, or a node of an enclosing trace: its symbol)."""
    out = np.empty(atoms.shape, dtype=object)
    flat = out.reshape(-1)
    for position, atom in enumerate(atoms.reshape(-1)):
        value = expression_of.get(atom) if atom.is_Symbol else None
        flat[position] = sympy_form(atom) if value is None else value
    return out


def to_sympy_value(atoms: np.ndarray) -> Any:
    if atoms.ndim == 0:
        return atoms[()]
    return sympy.ImmutableDenseNDimArray(atoms.reshape(-1).tolist(), atoms.shape)
