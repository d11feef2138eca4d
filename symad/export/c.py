"""C export: a C99 function computing every output of a Function, one statement per node.

The generated function is ``void NAME(const double *in, double *out)``:
``in`` holds the inputs flattened in order (the arguments, then any
Parameters), ``out`` receives the outputs flattened in order, arrays in
row-major order. The header lists both layouts in a comment.

Identifiers in the code come only from symad (``in``, ``out``, ``t0``,
``t1``... and the ``NAME`` the caller passes, checked to be a C identifier).
User names (argument, Parameter and function names) appear only inside
comments, with every character that could end a comment or a line replaced.
Each graph node is one ``const double`` temporary, so shared
subexpressions are computed once and the code is linear in the graph's size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from symad.errors import ExportError
from symad.graph import atom_shape, constant_value, is_constant
from symad.ir.primitive import spell

__all__ = ["CCode", "function_c", "c_comment_text", "c_number", "c_operation", "c_spellable",
           "translation_unit"]

_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
    "typedef", "union", "unsigned", "void", "volatile", "while", "main",
}


class CCode(NamedTuple):
    """The result of ``F.to_c(name)``: unpack as ``source, header = F.to_c("f")``.

    ``source`` is a self-contained C99 translation unit (it includes
    ``<math.h>``; link with ``-lm``); ``header`` declares the function.
    """

    source: str
    header: str


def c_comment_text(text: str) -> str:
    """``text`` safe inside a ``/* ... */`` comment on one line.

    >>> c_comment_text("a */ b\\nc")
    'a * / b?c'
    """
    kept = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    # No comment end or start, no trigraph, no line splice.
    return kept.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?").replace("\\", "/")


def _literal(atom) -> str:
    return c_number(constant_value(atom))


def c_number(value) -> str:
    """C for a number (``NAN``, ``HUGE_VAL`` for nan and inf).

    >>> c_number(-0.5), c_number(float("inf"))
    ('(-0.5)', 'HUGE_VAL')
    """
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "HUGE_VAL" if value > 0 else "(-HUGE_VAL)"
    text = repr(value)  # shortest round-tripping form
    return f"({text})" if value < 0 else text


def _statement(node, operand: callable, function_name: str, helpers: set) -> str:
    args = [operand(a) for a in node.args]
    if node.params:
        raise ExportError(f"to_c({function_name}): primitive {node.primitive.name!r} with parameters "
                          f"{dict(node.params)} has no C translation")
    constants = [constant_value(a) if is_constant(a) else None for a in node.args]
    return c_operation(node.primitive, args, constants, function_name, helpers)


def c_spellable(primitive) -> bool:
    """True if :func:`c_operation` writes ``primitive`` (its stanza spells it in C)."""
    return primitive.spelling("c") is not None


def c_operation(primitive, args: list, constants, function_name: str, helpers: set) -> str:
    """C for ``primitive`` on operand texts ``args`` (atoms: temporaries, inputs, literals),
    from its stanza's ``"c"`` spelling; ``constants`` holds the operands' values where they
    are constants (None where not). Adds the C helper functions it needs to ``helpers``.

    >>> from symad.primitives import hypot_ratio_p, pow_p
    >>> c_operation(hypot_ratio_p, ["a", "b"], [], "f", set())
    'a / hypot(a, b)'
    >>> c_operation(pow_p, ["a", "2.0"], [None, 2.0], "f", set())
    'a * a'
    """
    spelling = primitive.spelling("c")
    if spelling is None:
        raise ExportError(
            f"to_c({function_name}): primitive {primitive.name!r} has no C translation; export the "
            "function without it, or evaluate it in Python (F(...) or F.compile())"
        )
    form, *needed = spelling if isinstance(spelling, tuple) else (spelling,)
    helpers.update(needed)
    return spell(form, args, constants)


def check_name(name: str, function_name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name) or name in _C_KEYWORDS:
        raise ExportError(
            f"to_c({function_name}): {name!r} is not a usable C identifier; pass a name made of "
            "letters, digits and underscores, not starting with a digit (e.g. to_c('model_grad'))"
        )
    return name


def default_name(function_name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]+", "_", function_name).strip("_")
    if not cleaned or cleaned[0].isdigit() or cleaned in _C_KEYWORDS:
        cleaned = "symad_" + cleaned
    return cleaned[:63]


def _slots(array: str, start: int, count: int) -> str:
    return f"{array}[{start}]" if count == 1 else f"{array}[{start}..{start + count - 1}]"


def _layout_comment(function) -> list[str]:
    """Comment lines saying which ``in``/``out`` slots hold which argument and output."""
    lines = [f" * {c_comment_text(function.name)}, exported by symad.", " *", " * Inputs (in[]):"]
    start = 0
    for symbols in function.in_symbols:
        if isinstance(symbols, np.ndarray):
            names = [s.name for s in symbols.reshape(-1)]
            first = names[0] if len(names) == 1 else f"{names[0]} ... {names[-1]}" if names else ""
            count, shape = len(names), tuple(symbols.shape)
        else:  # one whole array (an array program's input)
            count, shape = math.prod(atom_shape(symbols)), atom_shape(symbols)
            first = f"{symbols.name}, row-major"
        if count:
            lines.append(f" *   {_slots('in', start, count)}: {c_comment_text(first)} (shape {shape})")
        start += count
    for parameter, symbols in function.parameters:
        shape = tuple(symbols.shape) if isinstance(symbols, np.ndarray) else atom_shape(symbols)
        lines.append(f" *   {_slots('in', start, math.prod(shape))}: Parameter "
                     f"{c_comment_text(parameter.name)} (shape {shape})")
        start += math.prod(shape)
    lines.append(" * Outputs (out[]):")
    start = 0
    for index, shape in enumerate(function.out_shapes):
        count = math.prod(shape)
        lines.append(f" *   {_slots('out', start, count)}: output {index} (shape {tuple(shape)}, row-major)")
        start += count
    return lines


def function_c(function, name: str | None = None) -> CCode:
    """C99 source and header for ``function`` (see the module docstring for the layout).

    >>> import symad as sd, numpy as np
    >>> source, header = sd.trace(lambda x: np.sin(x) ** 2, 0.0).to_c("sin_squared")
    >>> print(source.split("{", 1)[1].strip())
    const double t0 = sin(in[0]);
        const double t1 = t0 * t0;
        out[0] = t1;
    }
    """
    name = check_name(name, function.name) if name is not None else default_name(function.name)
    graph = function.graph
    if graph.free_symbols():
        raise ExportError(f"to_c({function.name}): the function uses values of an enclosing "
                          "trace; export it from outside that trace")
    place = {symbol: f"in[{i}]" for i, symbol in enumerate(graph.inputs)}

    def operand(atom) -> str:
        return _literal(atom) if is_constant(atom) else place[atom]

    helpers: set = set()
    body = []
    for index, node in enumerate(graph.nodes):
        expression = _statement(node, operand, function.name, helpers)
        place[node] = f"t{index}"
        body.append(f"    const double t{index} = {expression};")
    for index, atom in enumerate(graph.outputs):
        body.append(f"    out[{index}] = {operand(atom)};")

    return translation_unit(function, name, len(graph.inputs), len(graph.outputs), helpers, body)


def translation_unit(function, name: str, inputs: int, outputs: int, helpers: set, body: list,
                     includes: Sequence[str] = (), file_scope: Sequence[str] = ()) -> CCode:
    """The source and header around a function ``body`` (its lines, indented): the layout
    comment, includes, the ``helpers`` used, ``file_scope`` declarations (constant data)."""
    signature = f"void {name}(const double *in, double *out)"
    comment = ["/*", *_layout_comment(function), *_sparse_layout_comment(function, name), " */"]
    guard = f"SYMAD_{name.upper()}_H"
    layout_declarations, layout_data = _sparse_layout_arrays(function, name)
    header = "\n".join([
        *comment, f"#ifndef {guard}", f"#define {guard}",
        f"#define {name.upper()}_N_INPUTS {inputs}",
        f"#define {name.upper()}_N_OUTPUTS {outputs}",
        *layout_declarations,
        f"{signature};", f"#endif /* {guard} */\n"])
    source = "\n".join([
        *comment, "#include <math.h>", *[f"#include <{i}>" for i in includes], "",
        *sorted(helpers), *([""] if helpers else []),
        *file_scope, *([""] if file_scope else []), *layout_data,
        f"{signature};", "", f"{signature}", "{", *body, "}", ""])
    return CCode(source, header)


def _sparse_layout_comment(function, name: str) -> list[str]:
    """Where a sparse Jacobian's or Hessian's values go, for the header's reader."""
    layout = getattr(function, "sparse_layout", None)
    if layout is None:
        return []
    rows, columns, (row_count, column_count) = layout
    return [" *", f" * A sparse {row_count} x {column_count} matrix: out[k] is its entry at row "
            f"{name}_rows[k], column {name}_columns[k]", f" * ({len(rows)} structural non-zeros "
            "in row-major order: CSR's, as scipy.sparse.csr_matrix((out, (rows, columns))))."]


def _sparse_layout_arrays(function, name: str) -> tuple[list[str], list[str]]:
    """The header's declarations and the source's definitions of a sparse matrix's row and
    column index arrays (none for a dense function)."""
    layout = getattr(function, "sparse_layout", None)
    if layout is None:
        return [], []
    rows, columns, (row_count, column_count) = layout
    upper = name.upper()
    declarations = [f"#define {upper}_N_ROWS {row_count}", f"#define {upper}_N_COLUMNS {column_count}",
                    f"extern const long {name}_rows[{max(1, len(rows))}];",
                    f"extern const long {name}_columns[{max(1, len(columns))}];"]

    def table(label, values):
        numbers = [str(int(v)) for v in values] or ["0"]  # C has no empty array
        lines = [", ".join(numbers[k:k + 16]) for k in range(0, len(numbers), 16)]
        return [f"const long {name}_{label}[{len(numbers)}] = {{", *(f"    {line}," for line in lines), "};"]

    return declarations, [*table("rows", rows), *table("columns", columns), ""]
