"""LaTeX export: a Function's program as one ``aligned`` block a person would write.

The printer is SymPy's ``LatexPrinter`` with hooks for symad's names and
functions; nothing here edits LaTeX strings after the fact.

Decisions worth knowing:

* **Floats become fractions at print time.** A Python ``0.5`` is recorded in
  the graph as ``Float(0.5)`` (the graph is shared with the compilers, which
  want the float); when printing, a float that is exactly the double nearest
  to a fraction with a small denominator (``0.5``, ``2.0``, ``1/3``) and no
  longer to write than the decimal is printed as that fraction, and the node is rebuilt from the exact operands so
  SymPy's own simplification removes ``1.0 x`` and turns ``2.0 x / 4.0`` into
  ``x / 2``. Other floats print as floats.
* **One naming scheme for temporaries**, ``t_{1}, t_{2}, ...`` whatever the
  inputs are called (``temporaries="u"`` chooses another letter). If an input
  would read the same (an input ``t`` or ``t1``), the next free letter of
  ``t, u, v, s, q, \\tau`` is taken. Temporaries are SymPy Dummies, so they can
  never be confused with inputs inside SymPy either.
* **Linear time.** Each graph node is printed on exactly one line; a value
  used once is inlined into its consumer only while the inlined tree stays
  below ``max_inline`` operations, so no line (and no SymPy rebuild) grows
  with the size of the program.
* **Hostile names stay inert.** Names that are not plain identifiers are
  printed as upright text with every TeX special character escaped; a
  custom primitive's name is escaped the same way inside ``\\operatorname``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import sympy

from symad.errors import ExportError
from symad.export.display import (
    NUMBER_STYLES,
    DisplayOptions,
    exact_number,
    is_noise,
    number_style,
    simplify_for_display,
    temporary,
    written_out,
)
from symad.export.index_notation import index_latex
from symad.export.latex_printer import (
    INDEXED_NAME,
    MeasuringPrinter,
    SymadLatexPrinter,
    array_latex,
    check_inline_budget,
    display_name,
    latex_text,
    name_latex,
    printed_expression,
    symbol_latex,
    temporary_base,
    visible_length,
)
from symad.graph import is_constant, sympy_form

__all__ = [
    "SymadLatexPrinter",
    "display_formula",
    "display_name",
    "function_latex",
    "gradient_label",
    "hessian_label",
    "jacobian_label",
    "latex_text",
    "mixed_partial_label",
    "name_latex",
    "nth_derivative_label",
    "partial_label",
    "visible_length",
]

# ---------------------------------------------------------------------------
# Derivative labels
# ---------------------------------------------------------------------------


def _numerator(function_label: str) -> str:
    """A function's label as the numerator of a derivative (``f``, or ``(\\frac{...})``)."""
    return function_label if "\\frac" not in function_label else rf"\left({function_label}\right)"


def partial_label(function_name: str, wrt_name: str, *, function_label: str | None = None) -> str:
    """``\\frac{\\partial f}{\\partial x_{1}}`` for the derivative of ``function_name`` by ``wrt_name``.

    >>> print(partial_label("f", "x1"))
    \\frac{\\partial f}{\\partial x_{1}}
    """
    label = function_label or name_latex(function_name)
    if "\\frac" in label:
        return rf"\frac{{\partial}}{{\partial {symbol_latex(wrt_name)}}} {_numerator(label)}"
    return rf"\frac{{\partial {label}}}{{\partial {symbol_latex(wrt_name)}}}"


def gradient_label(function_name: str, wrt_name: str) -> str:
    """``\\nabla_{w} f``: the label of the gradient w.r.t. an array argument.

    >>> print(gradient_label("loss", "w"))
    \\nabla_{w} \\mathrm{loss}
    """
    return rf"\nabla_{{{symbol_latex(wrt_name)}}} {_numerator(name_latex(function_name))}"


def jacobian_label(function_name: str, wrt_name: str | None = None) -> str:
    """``J_{f}`` (or ``J_{f, x}`` when the function has several differentiated arguments).

    >>> print(jacobian_label("f"), jacobian_label("f", "x"))
    J_{f} J_{f, x}
    """
    label = name_latex(function_name)
    return f"J_{{{label}}}" if wrt_name is None else f"J_{{{label}, {symbol_latex(wrt_name)}}}"


def hessian_label(function_name: str, first: str, second: str, *, array: bool) -> str:
    """The Hessian block of ``function_name`` w.r.t. ``first`` and ``second``.

    ``\\nabla^{2} f`` for one array argument, a second partial otherwise.

    >>> print(hessian_label("f", "x", "x", array=False), hessian_label("f", "x", "y", array=False))
    \\frac{\\partial^{2} f}{\\partial x^{2}} \\frac{\\partial^{2} f}{\\partial x \\partial y}
    >>> print(hessian_label("f", "w", "w", array=True))
    \\nabla^{2} f
    """
    label = name_latex(function_name)
    if first == second:
        if array:
            return rf"\nabla^{{2}} {label}"
        return rf"\frac{{\partial^{{2}} {label}}}{{\partial {symbol_latex(first)}^{{2}}}}"
    return (rf"\frac{{\partial^{{2}} {label}}}"
            rf"{{\partial {symbol_latex(first)} \partial {symbol_latex(second)}}}")


def nth_derivative_label(function_name: str, variable_name: str, order: int) -> str:
    """``\\frac{d^{n} f}{d x^{n}}``: the label of the ``order``-th derivative.

    >>> print(nth_derivative_label("f", "x", 3))
    \\frac{d^{3} f}{d x^{3}}
    >>> print(nth_derivative_label("g", "t", 1), nth_derivative_label("g", "t", 0))
    \\frac{d g}{d t} g
    """
    label = name_latex(function_name)
    variable = symbol_latex(variable_name)
    if order == 0:
        return label
    if order == 1:
        return rf"\frac{{d {label}}}{{d {variable}}}"
    return rf"\frac{{d^{{{order}}} {label}}}{{d {variable}^{{{order}}}}}"


# ---------------------------------------------------------------------------
# The program: which nodes get a line, which are inlined
# ---------------------------------------------------------------------------


def _node_expression(node, atoms: dict, exact: Callable) -> sympy.Basic:
    """The node's SymPy expression over printed atoms, its float constants made exact by ``exact``."""
    args = []
    for atom in node.args:
        if is_constant(atom):
            args.append(exact(atom))
        else:
            value = atoms.get(atom)  # a node of this graph, else an input or an enclosing trace's value
            args.append(sympy_form(atom) if value is None else value)
    return printed_expression(node.primitive, args, node.params)




def graph_number_style(graph, numbers: str = "auto", max_denominator: int = 1000) -> str:
    """The number style of ``graph``'s block (:func:`symad.export.display.number_style`)."""
    floats = {atom for node in graph.nodes for atom in node.args if isinstance(atom, sympy.Float)}
    floats.update(atom for atom in graph.outputs if isinstance(atom, sympy.Float))
    return number_style((float(f) for f in floats), numbers, max_denominator)


def _consumers(graph) -> dict:
    """How many nodes use each atom (a node using it twice, as in ``t * t``, once) and outputs."""
    counts: dict = {}
    for node in graph.nodes:
        for atom in set(node.args) if len(node.args) > 1 else node.args:
            counts[atom] = counts.get(atom, 0) + 1
    for atom in graph.outputs:
        counts[atom] = counts.get(atom, 0) + 1
    return counts


def latex_program(graph, *, inline_below: int = 0, max_inline: int = 30, style: str = "fractions",
                  max_denominator: int = 1000, tidy: bool = True):
    """``(assignments, outputs)``: the lines to print for ``graph``.

    A node gets its own temporary if it is used more than once and its
    inlined form has more than ``inline_below`` operations, or if inlining it
    would make a tree of more than ``max_inline`` operations; otherwise it is
    inlined into its consumer. A value that would nest more than
    ``symad.inlining.MAX_FORMULA_DEPTH`` operations deep gets its own line
    too (SymPy prints recursively). Temporaries are ``sympy.Dummy`` symbols;
    float constants are exact numbers in the number ``style`` (see
    :func:`symad.export.display.exact_number`).

    ``tidy`` (the display simplifier's first step, done here where it costs
    nothing): a node used twice by one consumer (``t * t``) counts as used
    once, and a node that is a whole number (or, in decimals, any number) times
    a value (``-t``, ``2 y``) is never a temporary.
    """
    from symad.inlining import MAX_FORMULA_DEPTH

    check_inline_budget(inline_below, max_inline)

    def exact(constant):
        return exact_number(constant, style, max_denominator)

    uses = _consumers(graph) if tidy else graph.use_counts()
    atoms: dict = {}  # node -> what consumers see: a temporary or the inlined expression
    size: dict = {}   # node -> operations in that inlined expression
    depth: dict = {}  # node -> nesting of that inlined expression
    assignments = []
    for node in graph.nodes:
        operations = 1 + sum(size.get(a, 0) for a in node.args)
        level = 1 + max([depth.get(a, 0) for a in node.args], default=0)
        shared = uses.get(node, 0) > 1 and operations > inline_below
        expression = _node_expression(node, atoms, exact)
        if shared and tidy and is_noise(expression, fractions=style == "decimals"):
            shared = False
        if (shared or operations > max_inline or level >= MAX_FORMULA_DEPTH) and not is_constant(expression):
            symbol = temporary(len(assignments) + 1)
            assignments.append((symbol, expression))
            atoms[node], size[node], depth[node] = symbol, 0, 0
        else:
            atoms[node], size[node], depth[node] = expression, operations, level
    outputs = []
    for atom in graph.outputs:
        if is_constant(atom):
            value = exact(atom)
        else:
            value = atoms.get(atom)
            value = sympy_form(atom) if value is None else value
        outputs.append(value)
    return assignments, outputs



# ---------------------------------------------------------------------------
# Outputs: labels and array layout
# ---------------------------------------------------------------------------


def _output_labels(function, count: int, names) -> list[str]:
    if names is not None:
        names = [names] if isinstance(names, str) else list(names)  # one name, not its letters
        if len(names) != count:
            raise ExportError(
                f"latex({function.name}): output_names has {len(names)} names for {count} outputs; "
                "give one name per output leaf"
            )
        return [name_latex(str(n)) for n in names]
    if function.output_labels is not None and len(function.output_labels) == count:
        return list(function.output_labels)
    base = name_latex(function.name)
    if count == 1:
        return [base]
    return [f"{_numerator(base)}_{{{i}}}" for i in range(count)]



def _check_options(name, output_names, temporaries, matrix, numbers, simplify, max_temporaries,
                   simplify_time, **counts) -> None:
    """Refuse a bad option before any work, naming it and what it may be."""
    def refuse(option, value, allowed):
        raise ExportError(f"latex({name}): {option}={value!r} is not allowed; {option} must be "
                          f"{allowed}")

    if not isinstance(temporaries, str) or not re.fullmatch(r"\\?[A-Za-z]+", temporaries):
        refuse("temporaries", temporaries, "a letter or a command such as '\\tau' (a string)")
    for option, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            refuse(option, value, "an integer >= 0")
    if max_temporaries is not None and (isinstance(max_temporaries, bool) or not isinstance(
            max_temporaries, (int, np.integer)) or max_temporaries < 0):
        refuse("max_temporaries", max_temporaries, "an integer >= 0, or None (as many as shorten "
               "the block)")
    if not isinstance(simplify, bool):
        refuse("simplify", simplify, "True or False")
    if isinstance(simplify_time, bool) or not isinstance(simplify_time, (int, float)) \
            or not 0 <= simplify_time < float("inf"):
        refuse("simplify_time", simplify_time, "a number of seconds >= 0")
    if not isinstance(numbers, str) or numbers not in NUMBER_STYLES:
        refuse("numbers", numbers, "'auto', 'fractions' or 'decimals'")
    if not isinstance(matrix, str) or matrix not in ("bmatrix", "pmatrix", "matrix"):
        refuse("matrix", matrix, "'bmatrix', 'pmatrix' or 'matrix'")
    if output_names is not None and not isinstance(output_names, str) \
            and not isinstance(output_names, (list, tuple)):
        refuse("output_names", output_names, "a list of strings, one per output leaf (or one "
               "string for a function with one output)")


def _latex_printer(name: str, settings: dict) -> SymadLatexPrinter:
    """The printer for ``settings``, which are tried once on a small expression first."""
    try:
        printer = SymadLatexPrinter(settings)
        # SymPy reads most settings only while printing: a wrong type (mul_symbol=3) would
        # fail deep inside the printer, so try them once on a small expression first.
        probe_x, probe_y = sympy.symbols("x y")
        printer.doprint(probe_x * sympy.log(probe_y) / probe_y * sympy.sin(probe_x) ** 2
                        + sympy.Float(0.5) * sympy.asin(probe_x) + sympy.Matrix([[probe_x]])[0])
    except (TypeError, ValueError, AttributeError, KeyError) as error:
        raise ExportError(f"latex({name}): the SymPy latex() settings "
                          f"{sorted(settings)} were not accepted ({error}); see sympy.latex for "
                          "their values") from None
    return printer


def display_program(function, options: DisplayOptions, *, inline_below: int = 0,
                    max_inline: int = 30):
    """``(assignments, outputs)`` of ``function`` as printed: built, then simplified for display.

    Lengths are measured as SymPy's default settings print: settings such as
    ``mul_symbol="dot"`` change how a block prints, not which form it prints.
    The outputs are the flattened output leaves.
    """
    measuring = MeasuringPrinter()
    style = graph_number_style(function.graph, options.numbers, options.max_denominator)
    assignments, outputs = latex_program(
        function.graph, inline_below=inline_below, max_inline=max_inline, style=style,
        max_denominator=options.max_denominator, tidy=options.simplify)

    def length(expression) -> int:
        return visible_length(measuring.doprint(expression))

    return simplify_for_display(assignments, outputs, options, length=length, style=style)


def display_formula(function, *, numbers: str = "auto") -> list:
    """The outputs as ``latex()`` prints them, temporaries written out: flattened SymPy expressions.

    Numbers are in the block's style: decimals are SymPy ``Float``s, fractions ``Rational``s.
    """
    assignments, outputs = display_program(function, DisplayOptions(numbers=numbers))
    return written_out(assignments, outputs)


#: name -> ``appendix(function, printer) -> lines``: lines an array program's LaTeX adds
#: after its own, for nodes that print as more than one line (a loop's recurrence: filled
#: by :mod:`symad.loops.formulas`, which sits above this module).
LATEX_APPENDICES: dict = {}


def function_latex(
    function,
    output_names=None,
    *,
    simplify: bool = True,
    numbers: str = "auto",
    temporaries: str = "t",
    max_temporaries: int | None = None,
    inline_below: int = 0,
    max_inline: int = 30,
    simplify_below: int = DisplayOptions.simplify_below,
    simplify_time: float = DisplayOptions.time_budget,
    matrix: str = "bmatrix",
    max_denominator: int = 1000,
    **settings,
) -> str:
    """LaTeX of ``function``: temporaries, then outputs, in one ``aligned`` block.

    An array program prints in index notation, with the same options
    (:func:`symad.export.index_notation.index_latex`).

    Args:
        output_names: labels for the output leaves (default: the function's
            name, or derivative labels such as ``\\frac{\\partial f}{\\partial x}``).
        simplify: simplify for display (:mod:`symad.export.display`): the short
            form for small functions, noise temporaries written out for all.
            False prints the graph's own structure.
        numbers: ``"auto"``, ``"fractions"`` or ``"decimals"``: one number style
            per block (``"auto"``: decimals as soon as the function holds a float
            that was not a short fraction, as ``0.7``; fractions otherwise).
        temporaries: the letter of the shared temporaries ``t_{1}, t_{2}, ...``.
        max_temporaries: the most temporaries the short form keeps (default:
            each one that makes the block shorter; 0: none).
        inline_below: inline shared values of at most this many operations too.
        max_inline: give a value used once its own line when inlining it
            would build a tree of more operations (keeps lines readable and
            printing linear in the program's size). ``max_inline`` and
            ``inline_below`` may be at most ``symad.inlining.MAX_FORMULA_SIZE``
            (2,500); a line nested ``MAX_FORMULA_DEPTH`` (100) deep is split.
        simplify_below: the short form is tried when the outputs, written out
            in full, have at most this many operations.
        simplify_time: CPU seconds SymPy's rewrites may take (checked between rewrites).
        matrix: ``"bmatrix"``, ``"pmatrix"`` or ``"matrix"`` (SymPy's) for array outputs.
        max_denominator: floats that are fractions with at most this
            denominator print as fractions (0: decimals).
        settings: SymPy ``latex()`` settings (``mul_symbol="dot"``, ``ln_notation=True``...).
    """
    _check_options(function.name, output_names, temporaries, matrix, numbers, simplify,
                   max_temporaries, simplify_time, inline_below=inline_below,
                   max_inline=max_inline, max_denominator=max_denominator,
                   simplify_below=simplify_below)
    printer = _latex_printer(function.name, settings)
    labels = _output_labels(function, len(function.out_shapes), output_names)
    if getattr(function, "is_array_program", False):
        text = index_latex(function, labels, settings, temporaries=temporaries,
                           inline_below=inline_below, max_inline=max_inline, matrix=matrix,
                           max_denominator=max_denominator)
        extra = [line for appendix in LATEX_APPENDICES.values() for line in appendix(function, printer)]
        if extra:  # inside the one aligned block, after the function's own lines
            text = text[:-len("\n\\end{aligned}")] + " \\\\\n" + " \\\\\n".join(extra) + "\n\\end{aligned}"
        return text
    options = DisplayOptions(simplify=simplify, numbers=numbers, max_denominator=max_denominator,
                             max_temporaries=max_temporaries, simplify_below=simplify_below,
                             time_budget=float(simplify_time), max_inline=max_inline)
    assignments, outputs = display_program(function, options, inline_below=inline_below,
                                           max_inline=max_inline)
    # Temporaries must not read like an input or an output label (output_names=["t_1"]).
    taken = {symbol_latex(symbol.name) for symbol in function.graph.inputs} | set(labels)
    base = temporary_base(temporaries, taken)
    printer.symbol_names = {symbol: f"{base}_{{{i}}}" for i, (symbol, _) in enumerate(assignments, 1)}

    lines = [f"{printer.symbol_names[symbol]} &= {printer.doprint(value)}" for symbol, value in assignments]
    start = 0
    for label, shape in zip(labels, function.out_shapes):
        count = int(np.prod(shape, dtype=int))
        elements = outputs[start:start + count]
        start += count
        value = printer.doprint(elements[0]) if shape == () else array_latex(printer, elements, shape, matrix)
        lines.append(f"{label} &= {value}")
    return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"


# ---------------------------------------------------------------------------
# Labels for the outputs of transforms (called by symad.api)
# ---------------------------------------------------------------------------


def leaf_name(symbols) -> str:
    """The name of an argument leaf: ``x1`` for a scalar, ``w`` for the array ``w[0], w[1], ...``.

    >>> leaf_name(np.array([sympy.Symbol("w[0]"), sympy.Symbol("w[1]")]))
    'w'
    """
    if not isinstance(symbols, np.ndarray):  # a whole array input: its own name
        return symbols.name
    if symbols.size == 0:
        return "x"
    name = symbols.reshape(-1)[0].name
    if symbols.shape == ():
        return name
    match = INDEXED_NAME.match(name)
    return match["base"] if match else name


def mixed_partial_label(function_name: str, variables: tuple[str, ...]) -> str:
    r"""``function_name`` differentiated by each of ``variables`` in turn.

    The denominator reads right to left, as in the usual notation:
    differentiating by x twice and then by y gives ``\partial y \partial x^{2}``.

    >>> print(mixed_partial_label("f", ("x", "x", "y")))
    \frac{\partial^{3} f}{\partial y \partial x^{2}}
    """
    groups: list[list] = []
    for variable in reversed(variables):
        if groups and groups[-1][0] == variable:
            groups[-1][1] += 1
        else:
            groups.append([variable, 1])
    denominator = " ".join(
        rf"\partial {symbol_latex(v)}" + (f"^{{{count}}}" if count > 1 else "") for v, count in groups)
    order = len(variables)
    power = f"^{{{order}}}" if order > 1 else ""
    return rf"\frac{{\partial{power} {name_latex(function_name)}}}{{{denominator}}}"


def gradient_labels(function, wrt_leaves) -> tuple[list[str], list]:
    r"""Labels of the gradient leaves, and what each is the derivative of.

    Returns ``(labels, derivatives)``: a label per leaf (``\frac{\partial f}{\partial x}``,
    ``\nabla_{w} f``, or ``\frac{\partial^{2} f}{\partial x^{2}}`` for the gradient of a
    gradient), and per leaf ``(function name, variables)`` or None, which the
    next gradient builds on.
    """
    previous = getattr(function, "output_derivatives", None)
    base = previous[0] if previous and len(previous) == 1 else None
    own = function.output_labels[0] if function.output_labels and len(function.output_labels) == 1 else None
    labels, derivatives = [], []
    for symbols in wrt_leaves:
        name = leaf_name(symbols)
        if symbols.shape != ():
            labels.append(gradient_label(function.name, name) if own is None
                          else partial_label(function.name, name, function_label=own))
            derivatives.append(None)
            continue
        function_name, variables = base if base is not None else (function.name, ())
        if base is None and own is not None:  # a derivative whose structure is unknown
            labels.append(partial_label(function.name, name, function_label=own))
            derivatives.append(None)
            continue
        labels.append(mixed_partial_label(function_name, variables + (name,)))
        derivatives.append((function_name, variables + (name,)))
    return labels, derivatives


def jacobian_labels(function, wrt_leaves) -> tuple[list[str], list]:
    r"""One label per Jacobian block, and what each block is the derivative of.

    Where every output of ``function`` is a known scalar derivative (a
    ``grad``'s: its ``output_derivatives``) and every argument a scalar, each
    block is one more partial derivative and is labelled as mathematics writes
    it: ``jacfwd(grad(L, 2), 0)`` gives ``rac{\partial^{2} L}{\partial 	heta
    \partial \omega}``, as ``hessian`` does. Otherwise ``J_{f}`` for one output
    and one argument, else ``J_{f_{k}, x}``. Returns ``(labels, derivatives)``
    as :func:`gradient_labels` does.
    """
    outputs = len(function.out_shapes)
    previous = getattr(function, "output_derivatives", None)
    if (previous is not None and len(previous) == outputs and None not in previous
            and all(shape == () for shape in function.out_shapes)
            and all(s.shape == () for s in wrt_leaves)):
        labels, derivatives = [], []
        for function_name, variables in previous:
            for symbols in wrt_leaves:
                differentiated = variables + (leaf_name(symbols),)
                labels.append(mixed_partial_label(function_name, differentiated))
                derivatives.append((function_name, differentiated))
        return labels, derivatives
    if outputs == 1 and len(wrt_leaves) == 1:
        return [jacobian_label(function.name)], [None]
    labels = []
    for k in range(outputs):
        name = function.name if outputs == 1 else f"{display_name(function.name)}{k}"
        labels.extend(jacobian_label(name, leaf_name(s)) for s in wrt_leaves)
    return labels, [None] * len(labels)


def hessian_labels(function, wrt_leaves) -> list[str]:
    """One label per Hessian block of a one-output function, row by row."""
    return [hessian_label(function.name, leaf_name(first), leaf_name(second),
                          array=first.shape != () and first is second)
            for first in wrt_leaves for second in wrt_leaves]
