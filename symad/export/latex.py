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

import functools
import re
from collections.abc import Callable

import numpy as np
import sympy
from sympy.core.function import AppliedUndef
from sympy.printing.conventions import split_super_sub
from sympy.printing.latex import LatexPrinter

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
from symad.graph import is_constant, sympy_form
from symad.primitives import sech_p

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

# An array element's symbol name, as symad makes them: ``w[0, 1]``.
_INDEXED_NAME = re.compile(r"^(?P<base>.+)\[(?P<index>[0-9]+(?:, [0-9]+)*)\]$")
# Identifiers SymPy prints well: letters and digits in ``_``-separated parts, then primes.
# (A leading, trailing or doubled ``_`` would make SymPy print ``__`` or ``x^{}``.)
_PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*'*$")
_GREEK = {
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
    "chi", "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma",
    "Upsilon", "Phi", "Psi", "Omega",
}

_MAX_ORDERED_TERMS = 40

_TEXT_ESCAPES = {
    "\\": r"\backslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
    "^": r"\hat{}", "_": r"\_", "%": r"\%", "~": r"\sim{}", " ": r"\ ",
    "\n": r"\backslash{}n", "\r": r"\backslash{}r", "\t": r"\backslash{}t",
}


def _escape_text(text: str) -> str:
    """``text`` with every TeX special character (and control character) made literal."""
    pieces = []
    for ch in text:
        if ch in _TEXT_ESCAPES:
            pieces.append(_TEXT_ESCAPES[ch])
        elif not ch.isprintable():
            # Control characters and Unicode separators (U+2028 ends a line for
            # some parsers, KaTeX refuses it): shown as their code, never raw.
            code = f"x{ord(ch):02x}" if ord(ch) < 256 else f"u{ord(ch):04x}"
            pieces.append(rf"\backslash{{}}{code}")
        else:
            pieces.append(ch)
    return "".join(pieces)


def latex_text(text: str) -> str:
    """``text`` as upright LaTeX with every special character escaped.

    >>> print(latex_text("grad(f_1)"))
    \\mathrm{grad(f\\_1)}
    >>> print(latex_text("}\\\\input{x}"))
    \\mathrm{\\}\\backslash{}input\\{x\\}}
    >>> print(latex_text("a\\u2028b\\x07"))
    \\mathrm{a\\backslash{}u2028b\\backslash{}x07}
    """
    return r"\mathrm{" + _escape_text(text) + "}"


def display_name(name: str) -> str:
    """A function name for display: anonymous functions are called ``f``.

    >>> display_name("<lambda>")
    'f'
    """
    return name.replace("<lambda>", "f")


def _name_part(part: str) -> str:
    if part in _GREEK:
        return "\\" + part
    if len(part) == 1 or part.isdigit():
        return part
    return rf"\mathrm{{{part}}}"


def name_latex(name: str) -> str:
    """A function name in LaTeX: a letter with subscripts the SymPy way, words upright.

    >>> print(name_latex("f"), name_latex("g_x"), name_latex("f1"), name_latex("loss"))
    f g_{x} f_{1} \\mathrm{loss}
    >>> print(name_latex("spring_energy"))
    \\mathrm{spring\\_energy}
    """
    name = display_name(name)
    if not _PLAIN_NAME.match(name) or "'" in name:
        return latex_text(name)
    base, superscripts, subscripts = split_super_sub(name)
    if len(base) > 1 and base not in _GREEK:
        return latex_text(name)  # a word: one upright name, as in \mathrm{loss}
    text = _name_part(base)
    if subscripts:
        text += "_{" + " ".join(_name_part(s) for s in subscripts) + "}"
    return text


# ---------------------------------------------------------------------------
# The printer
# ---------------------------------------------------------------------------


class SymadLatexPrinter(LatexPrinter):
    """SymPy's LaTeX printer, taught symad's symbol names, temporaries and functions.

    ``symbol_names`` maps symbols (temporaries) to the LaTeX they print as.

    >>> printer = SymadLatexPrinter()
    >>> print(printer.doprint(sympy.Symbol("w[0, 1]") + sympy.Symbol("g_x")))
    g_{x} + w_{0,1}
    """

    printmethod = "_latex"  # SymPy objects such as pi print themselves through it
    _default_settings = {**LatexPrinter._default_settings, "inv_trig_style": "full"}

    def __init__(self, settings=None, symbol_names: dict | None = None):
        super().__init__(settings)
        self.symbol_names = dict(symbol_names or {})

    def _as_ordered_terms(self, expr, order=None):
        # SymPy's printing order builds a monomial over every symbol of the sum
        # per term: quadratic for the long sums of accumulated adjoints. Past a
        # few dozen terms, SymPy's canonical argument order is used instead.
        if len(expr.args) > _MAX_ORDERED_TERMS:
            return list(expr.args)
        return super()._as_ordered_terms(expr, order)

    def _print_Symbol(self, expr, style="plain"):
        named = self.symbol_names.get(expr)
        if named is not None:
            return named
        return symbol_latex(expr.name)

    def _print_Dummy(self, expr, style="plain"):
        named = self.symbol_names.get(expr)
        return named if named is not None else symbol_latex(expr.name)

    def _print(self, expr, **kwargs):
        # A custom primitive's class is named by the user: it must not select a
        # printing hook by that name (a primitive called "Symbol" or "log").
        if isinstance(expr, AppliedUndef):
            return self._print_custom_primitive(expr, kwargs.get("exp"))
        return super()._print(expr, **kwargs)

    def _function_call(self, name: str, expr, exp=None) -> str:
        arguments = ", ".join(self._print(a) for a in expr.args)
        head = name if exp is None else f"{name}^{{{exp}}}"
        return rf"{head}{{\left({arguments} \right)}}"

    def _print_sigmoid(self, expr, exp=None):
        return self._function_call(r"\sigma", expr, exp)

    def _print_softplus(self, expr, exp=None):
        return self._function_call(r"\operatorname{softplus}", expr, exp)

    def _print_stop_gradient(self, expr, exp=None):
        return self._function_call(r"\operatorname{sg}", expr, exp)

    def _print_expm1(self, expr, exp=None):
        return self._function_call(r"\operatorname{expm1}", expr, exp)

    def _print_log1p(self, expr, exp=None):
        return self._function_call(r"\operatorname{log1p}", expr, exp)

    def _print_log(self, expr, exp=None):
        # SymPy prints log(x)**2 as \log{(x)}^{2}, which reads as log(x^2); write \log^{2} like \sin^{2}.
        return self._function_call(r"\ln" if self._settings["ln_notation"] else r"\log", expr, exp)

    def _print_sech(self, expr, exp=None):
        # 1/cosh: as readable as \operatorname{sech}, and every LaTeX reader knows \cosh.
        cosh = self._function_call(r"\cosh", expr, exp)
        return rf"\frac{{1}}{{{cosh}}}"

    def _print_cbrt(self, expr, exp=None):
        root = rf"\sqrt[3]{{{self._print(expr.args[0])}}}"
        return root if exp is None else rf"\left({root}\right)^{{{exp}}}"

    def _print_custom_primitive(self, expr, exp=None):
        name = type(expr).__name__  # the user's text: escaped, never a command
        return self._function_call(rf"\operatorname{{{_escape_text(name)}}}", expr, exp)


class _MeasuringPrinter(SymadLatexPrinter):
    """The printer whose output is measured: every temporary reads ``t_{1}``, as long as
    the names it will get (its Dummy's own name is a sort key, ``t0000012``)."""

    def _print_Dummy(self, expr, style="plain"):
        return "t_{1}"


@functools.lru_cache(maxsize=4096)
def symbol_latex(name: str) -> str:
    """How an input named ``name`` prints: the SymPy way for identifiers, escaped text otherwise.

    >>> print(symbol_latex("x1"), symbol_latex("w[0, 1]"), symbol_latex("a}b"))
    x_{1} w_{0,1} \\mathrm{a\\}b}
    """
    match = _INDEXED_NAME.match(name)
    if match:
        return f"{symbol_latex(match['base'])}_{{{match['index'].replace(' ', '')}}}"
    if _PLAIN_NAME.match(name):
        return LatexPrinter()._print_Symbol(sympy.Symbol(name))
    return latex_text(name)  # names from pytree paths (``p.w``), quotes, backslashes: verbatim


# Commands that print a word (their letters are what a reader sees); every other
# command prints one sign (\\frac a bar, \\sqrt a root, \\alpha a letter) or nothing.
_WORD_COMMANDS = {
    "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "log", "ln", "exp",
    "arcsin", "arccos", "arctan", "operatorname", "min", "max", "arg", "det", "mathrm",
}
_UNSEEN_COMMANDS = {"left", "right", "displaystyle", "limits", "quad", "qquad"}
_LATEX_TOKEN = re.compile(r"\\(begin|end)\{[^}]*\}|\\([A-Za-z]+)|\\(.)|([{}^_&\s])|(.)", re.S)


def visible_length(text: str) -> int:
    """How long LaTeX ``text`` reads: the signs a reader sees, not the characters typed.

    Grouping braces, ``^``, ``_``, spaces, ``\\left``/``\\right`` count nothing; a
    function name counts its letters (``\\cos``: 3); any other command, one sign.
    A fraction inside a fraction costs two signs more per level: stacked
    fractions are harder to read than their signs say. This is the length the
    display simplifier minimises: by it, ``(e^{x} + 1)^{2}`` (7 signs) is
    shorter than ``e^{2 x} + 2 e^{x} + 1`` (9), as it reads.

    >>> visible_length(r"\\frac{e^{x}}{\\left(e^{x} + 1\\right)^{2}}")
    10
    >>> visible_length(r"\\cos{\\left(x \\right)}"), visible_length(r"\\operatorname{softplus}{\\left(x \\right)}")
    (6, 11)
    >>> visible_length(r"\\frac{\\frac{1}{x} + 1}{x}"), visible_length(r"\\frac{e^{x}}{\\frac{1}{x} + 1}")
    (9, 10)
    """
    total = 0
    groups: list[bool] = []  # per open brace: is it a fraction's numerator or denominator
    fractions: list[list[int]] = []  # per \\frac still reading its arguments: [depth, left]
    for match in _LATEX_TOKEN.finditer(text):
        environment, command, escaped, unseen, other = match.groups()
        if command is not None:
            if command == "frac":
                total += 1 + 2 * sum(groups)
                fractions.append([len(groups), 2])
            elif command in _WORD_COMMANDS:
                total += 0 if command in ("operatorname", "mathrm") else len(command)
            elif command not in _UNSEEN_COMMANDS:
                total += 1
        elif escaped is not None:
            total += escaped not in (",", " ", ";", "!", "\\")
        elif unseen == "{":
            argument = bool(fractions) and fractions[-1][0] == len(groups) and fractions[-1][1] > 0
            if argument:
                fractions[-1][1] -= 1
            groups.append(argument)
        elif unseen == "}" and groups:
            groups.pop()
            if fractions and fractions[-1] == [len(groups), 0]:
                fractions.pop()  # its denominator closed
        elif other is not None:
            total += 1
    return total


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


def printed_expression(primitive, args: list, params: tuple = ()) -> sympy.Basic:
    """``primitive`` applied to SymPy ``args`` the way LaTeX shows it (factors kept, no rewrites).

    The scalar program (:func:`latex_program`) and index notation
    (:mod:`symad.export.index_notation`) build each printed operation with it.
    """
    if primitive is sech_p:
        # 1/cosh as a power, so that a product prints it as a denominator: 2 tanh(x)/cosh^2(x),
        # not 2 tanh(x) (1/cosh^2(x)).
        return sympy.Pow(sympy.cosh(args[0], evaluate=False), -1, evaluate=False) \
            if not args[0].is_Number else primitive.to_sympy(args, {})
    function = getattr(primitive, "_to_sympy", None)
    if (isinstance(function, type) and issubclass(function, sympy.Function) and not params
            and not any(a.is_Number for a in args)):
        # sin(t) as it stands: SymPy's eval would only look for rewrites (sin(-t) = -sin(t),
        # I*t as a coefficient...), which cost more than printing; numbers are still evaluated.
        return function(*args, evaluate=False)
    return _keep_factored(primitive, args) or primitive.to_sympy(args, dict(params))


def _keep_factored(primitive, args: list) -> sympy.Basic | None:
    """``2 (x - 1)`` and ``(x - 1) / 2`` kept as written.

    SymPy distributes a number over a sum when it builds ``2 * (x - 1)``,
    giving ``2 x - 2``; the derivative of ``(x - 1)**2`` then prints as a
    sum of scaled terms. An unevaluated product keeps the factor (SymPy
    still merges numbers when the product is multiplied again).
    """
    from symad.primitives import div_p, mul_p

    if primitive is mul_p:
        number, other = (args[0], args[1]) if args[0].is_Number else (args[1], args[0])
        if number.is_Number and other.is_Add:
            return sympy.Mul(number, other, evaluate=False)
    elif primitive is div_p and args[1].is_Rational and not args[1].is_zero and args[0].is_Add:
        return sympy.Mul(1 / args[1], args[0], evaluate=False)
    return None


def check_inline_budget(inline_below: int, max_inline: int) -> None:
    """Refuse inlining options past ``symad.inlining.MAX_FORMULA_SIZE`` before any work."""
    from symad.inlining import MAX_FORMULA_SIZE

    if max_inline > MAX_FORMULA_SIZE or inline_below > MAX_FORMULA_SIZE:
        # The operation counts are the budget: past this, SymPy would spend
        # seconds per line (and an exponential tree can hide behind a large
        # inline_below), so the request is refused before any work.
        raise ExportError(
            f"latex: max_inline={max_inline} and inline_below={inline_below} may be at most "
            f"symad.inlining.MAX_FORMULA_SIZE ({MAX_FORMULA_SIZE:,}) operations per line; "
            "shared values are printed once as temporaries, so smaller values lose nothing")


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


def _temporary_base(requested: str, taken: set[str]) -> str:
    """The first of ``requested, t, u, v, ...`` whose ``base_{k}`` cannot be read as an input."""
    for base in (requested, "t", "u", "v", "s", "q", r"\tau", r"\xi", r"\zeta"):
        if not any(name == base or (name.startswith(base) and name[len(base):len(base) + 1] in "_^'{ ")
                   for name in taken):
            return base
    raise ExportError(f"latex: no free name for temporaries among the inputs {sorted(taken)}; "
                      "pass temporaries='...' with another letter")


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


def _array_latex(printer: SymadLatexPrinter, elements: list, shape: tuple, matrix: str) -> str:
    """A 1-d array as a column, a 2-d array as a matrix (``bmatrix`` or SymPy's own)."""
    if matrix not in ("bmatrix", "pmatrix", "matrix"):
        raise ExportError(f"latex: matrix={matrix!r} is not one of 'bmatrix', 'pmatrix', 'matrix'")
    if len(shape) > 2 or 0 in shape:
        array = sympy.ImmutableDenseNDimArray(elements, shape)
        return printer.doprint(array)
    rows = [[e] for e in elements] if len(shape) == 1 else [
        elements[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]
    body = r" \\ ".join(" & ".join(printer.doprint(e) for e in row) for row in rows)
    if matrix == "matrix":
        return rf"\left[\begin{{matrix}}{body}\end{{matrix}}\right]"
    return rf"\begin{{{matrix}}}{body}\end{{{matrix}}}"


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


#: The LaTeX printer of array programs, in index notation. symad.export.index_notation builds
#: on this module, so this module cannot import it back: it registers itself here instead.
ARRAY_PRINTER: list = []


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
    measuring = _MeasuringPrinter()
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
        if not ARRAY_PRINTER:  # registered when symad.export.index_notation loads
            import importlib

            importlib.import_module("symad.export.index_notation")
        return ARRAY_PRINTER[0](function, labels, settings, temporaries=temporaries,
                                inline_below=inline_below, max_inline=max_inline, matrix=matrix,
                                max_denominator=max_denominator)
    options = DisplayOptions(simplify=simplify, numbers=numbers, max_denominator=max_denominator,
                             max_temporaries=max_temporaries, simplify_below=simplify_below,
                             time_budget=float(simplify_time), max_inline=max_inline)
    assignments, outputs = display_program(function, options, inline_below=inline_below,
                                           max_inline=max_inline)
    # Temporaries must not read like an input or an output label (output_names=["t_1"]).
    taken = {symbol_latex(symbol.name) for symbol in function.graph.inputs} | set(labels)
    base = _temporary_base(temporaries, taken)
    printer.symbol_names = {symbol: f"{base}_{{{i}}}" for i, (symbol, _) in enumerate(assignments, 1)}

    lines = [f"{printer.symbol_names[symbol]} &= {printer.doprint(value)}" for symbol, value in assignments]
    start = 0
    for label, shape in zip(labels, function.out_shapes):
        count = int(np.prod(shape, dtype=int))
        elements = outputs[start:start + count]
        start += count
        value = printer.doprint(elements[0]) if shape == () else _array_latex(printer, elements, shape, matrix)
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
    match = _INDEXED_NAME.match(name)
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


def jacobian_labels(function, wrt_leaves) -> list[str]:
    """One label per Jacobian block: ``J_{f}`` for one output and one argument, else ``J_{f_{k}, x}``."""
    outputs = len(function.out_shapes)
    if outputs == 1 and len(wrt_leaves) == 1:
        return [jacobian_label(function.name)]
    labels = []
    for k in range(outputs):
        name = function.name if outputs == 1 else f"{display_name(function.name)}{k}"
        labels.extend(jacobian_label(name, leaf_name(s)) for s in wrt_leaves)
    return labels


def hessian_labels(function, wrt_leaves) -> list[str]:
    """One label per Hessian block of a one-output function, row by row."""
    return [hessian_label(function.name, leaf_name(first), leaf_name(second),
                          array=first.shape != () and first is second)
            for first in wrt_leaves for second in wrt_leaves]
