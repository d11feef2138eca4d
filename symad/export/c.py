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


# Helpers emitted only when used: NumPy's semantics where C's differ, stable forms.
_HELPERS = {
    "maximum": "static double symad_maximum(double a, double b) "
               "{ return (a != a || b != b) ? a + b : (a > b ? a : b); }",
    "minimum": "static double symad_minimum(double a, double b) "
               "{ return (a != a || b != b) ? a + b : (a < b ? a : b); }",
    "sign": "static double symad_sign(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x); }",
    "sigmoid": "static double symad_sigmoid(double x) "
               "{ if (x >= 0.0) return 1.0 / (1.0 + exp(-x)); double e = exp(x); return e / (1.0 + e); }",
    "softplus": "static double symad_softplus(double x) "
                "{ return (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x))); }",
    "logaddexp": "static double symad_logaddexp(double a, double b) "
                 "{ if (a == b) return a + 0.69314718055994530942; "
                 "double m = a > b ? a : b; return m + log1p(exp(-fabs(a - b))); }",
    "logsumexp": "static double symad_logsumexp(int n, const double *v) "
                 "{ double m = v[0], s = 0.0; int i; "
                 "for (i = 1; i < n; i++) if (v[i] > m || v[i] != v[i]) m = v[i]; "
                 "if (m != m || m == HUGE_VAL || m == -HUGE_VAL) return m; "
                 "for (i = 0; i < n; i++) s += exp(v[i] - m); return m + log(s); }",
}

# Primitive name -> (template over operands a, b, c, helper needed). Operands are atoms
# (temporaries, inputs, literals), so no template needs extra parentheses around them.
_MATH_H = {
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "sinh", "cosh", "tanh", "erf", "erfc", "hypot",
}
_TEMPLATES = {
    "subtract": "{0} - {1}", "multiply": "{0} * {1}", "divide": "{0} / {1}", "negative": "-{0}",
    "arcsin": "asin({0})", "arccos": "acos({0})", "arctan": "atan({0})", "arctan2": "atan2({0}, {1})",
    "arcsinh": "asinh({0})", "arccosh": "acosh({0})", "arctanh": "atanh({0})", "abs": "fabs({0})",
    "sign": "symad_sign({0})", "maximum": "symad_maximum({0}, {1})",
    "minimum": "symad_minimum({0}, {1})", "sigmoid": "symad_sigmoid({0})",
    "softplus": "symad_softplus({0})", "logaddexp": "symad_logaddexp({0}, {1})",
    "sech": "1.0 / cosh({0})",
    "one_minus_square": "(1.0 - {0}) * (1.0 + {0})", "hypot_ratio": "{0} / hypot({0}, {1})",
    "where": "{0} != 0.0 ? {1} : {2}", "stop_gradient": "{0}",
    "less": "{0} < {1} ? 1.0 : 0.0", "less_equal": "{0} <= {1} ? 1.0 : 0.0",
    "greater": "{0} > {1} ? 1.0 : 0.0", "greater_equal": "{0} >= {1} ? 1.0 : 0.0",
    "equal": "{0} == {1} ? 1.0 : 0.0", "not_equal": "{0} != {1} ? 1.0 : 0.0",
    "logical_and": "({0} != 0.0 && {1} != 0.0) ? 1.0 : 0.0",
    "logical_or": "({0} != 0.0 || {1} != 0.0) ? 1.0 : 0.0", "logical_not": "{0} == 0.0 ? 1.0 : 0.0",
}


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


def _power(base: str, exponent, exponent_text: str) -> str:
    """C for ``base ** exponent``; ``exponent`` is the atom, ``exponent_text`` its C operand."""
    if is_constant(exponent):
        # Exactly rounded either way: x**1, x**2 and x**-1 need no pow() call.
        value = constant_value(exponent)
        if value == 1:
            return base
        if value == 2:
            return f"{base} * {base}"
        if value == -1:
            return f"1.0 / {base}"
    # A traced exponent (x**y, 2.0**y) is a temporary or an input: pow() as NumPy computes it.
    return f"pow({base}, {exponent_text})"


def _statement(node, operand: callable, function_name: str, helpers: set) -> str:
    name = node.primitive.name
    args = [operand(a) for a in node.args]
    if node.params:
        raise ExportError(f"to_c({function_name}): primitive {name!r} with parameters "
                          f"{dict(node.params)} has no C translation")
    exponent = node.args[1] if name == "power" else None
    return c_operation(name, args, exponent, function_name, helpers)


def c_spellable(name: str) -> bool:
    """True if :func:`c_operation` writes the primitive called ``name``."""
    return name in ("add", "power", "reduce_max", "reduce_min", "logsumexp") or name in _MATH_H \
        or name in _TEMPLATES


def c_operation(name: str, args: list, exponent, function_name: str, helpers: set) -> str:
    """C for primitive ``name`` on operand texts ``args`` (atoms: temporaries, inputs,
    literals); ``exponent`` is a power's exponent atom. Adds the helpers it needs.

    >>> c_operation("hypot_ratio", ["a", "b"], None, "f", set())
    'a / hypot(a, b)'
    """
    if name == "add":
        return " + ".join(args)
    if name == "power":
        return _power(args[0], exponent, args[1])
    if name in ("reduce_max", "reduce_min"):
        helper = "maximum" if name == "reduce_max" else "minimum"
        helpers.add(helper)
        text = args[0]
        for arg in args[1:]:
            text = f"symad_{helper}({text}, {arg})"
        return text
    if name == "logsumexp":
        helpers.add("logsumexp")
        return f"symad_logsumexp({len(args)}, (const double[]){{{', '.join(args)}}})"
    if name in _MATH_H:
        return f"{name}({', '.join(args)})"
    template = _TEMPLATES.get(name)
    if template is None:
        raise ExportError(
            f"to_c({function_name}): primitive {name!r} has no C translation; export the "
            "function without it, or evaluate it in Python (F(...) or F.compile())"
        )
    if name in _HELPERS:
        helpers.add(name)
    return template.format(*args)


def _check_name(name: str, function_name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name) or name in _C_KEYWORDS:
        raise ExportError(
            f"to_c({function_name}): {name!r} is not a usable C identifier; pass a name made of "
            "letters, digits and underscores, not starting with a digit (e.g. to_c('model_grad'))"
        )
    return name


def _default_name(function_name: str) -> str:
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
    name = _check_name(name, function.name) if name is not None else _default_name(function.name)
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
        *[_HELPERS[h] for h in sorted(helpers)], *([""] if helpers else []),
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
