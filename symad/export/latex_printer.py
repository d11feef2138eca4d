"""The LaTeX vocabulary of symad: names, the printer, and how one operation prints.

:mod:`symad.export.latex` (scalar programs, one ``aligned`` block) and
:mod:`symad.export.index_notation` (array programs) both print with what is
here, so neither has to import the other's machinery: this module sits below
both.

* **Hostile names stay inert.** Names that are not plain identifiers are
  printed as upright text with every TeX special character escaped; a
  custom primitive's name is escaped the same way inside ``\\operatorname``.
"""

from __future__ import annotations

import functools
import re

import sympy
from sympy.core.function import AppliedUndef
from sympy.printing.conventions import split_super_sub
from sympy.printing.latex import LatexPrinter

from symad.errors import ExportError
from symad.ir.primitive import PRIMITIVES

# An array element's symbol name, as symad makes them: ``w[0, 1]``.
INDEXED_NAME = re.compile(r"^(?P<base>.+)\[(?P<index>[0-9]+(?:, [0-9]+)*)\]$")
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
    # The imaginary unit upright (\mathrm{i}): an index named i sits beside it in the sums
    # of a Fourier transform.
    _default_settings = {**LatexPrinter._default_settings, "inv_trig_style": "full",
                         "imaginary_unit": "ri"}

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
        spelling = _latex_spellings().get(type(expr))
        if spelling is not None:  # the LaTeX of a primitive's stanza
            if isinstance(spelling, str):
                return self._function_call(spelling, expr, kwargs.get("exp"))
            return spelling(self, expr, kwargs.get("exp"))
        return super()._print(expr, **kwargs)

    def _function_call(self, name: str, expr, exp=None) -> str:
        arguments = ", ".join(self._print(a) for a in expr.args)
        head = name if exp is None else f"{name}^{{{exp}}}"
        return rf"{head}{{\left({arguments} \right)}}"

    def _print_custom_primitive(self, expr, exp=None):
        name = type(expr).__name__  # the user's text: escaped, never a command
        return self._function_call(rf"\operatorname{{{_escape_text(name)}}}", expr, exp)


@functools.cache
def _latex_spellings_of(count: int) -> dict:
    return {primitive._to_sympy: primitive.latex for primitive in list(PRIMITIVES.values())
            if primitive.latex is not None and isinstance(primitive._to_sympy, type)}


def _latex_spellings() -> dict:
    """SymPy function class -> the LaTeX its primitive's stanza gives it (``latex``)."""
    return _latex_spellings_of(len(PRIMITIVES))


class MeasuringPrinter(SymadLatexPrinter):
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
    match = INDEXED_NAME.match(name)
    if match:
        return f"{symbol_latex(match['base'])}_{{{match['index'].replace(' ', '')}}}"
    if _PLAIN_NAME.match(name):
        return LatexPrinter()._print_Symbol(sympy.Symbol(name))
    return latex_text(name)  # names from pytree paths (``p.w``), quotes, backslashes: verbatim


# Commands that print a word (their letters are what a reader sees); every other
# command prints one sign (\\frac a bar, \\sqrt a root, \\alpha a letter) or nothing.
# These are LaTeX's own log-like function commands (\\sin ... \\det), plus \\operatorname
# and \\mathrm: facts about how LaTeX typesets, not about symad's primitives (\\cot, \\det,
# \\arg are none), whose own LaTeX spellings are stanza fields (Primitive.latex).
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


def printed_expression(primitive, args: list, params: tuple = ()) -> sympy.Basic:
    """``primitive`` applied to SymPy ``args`` the way LaTeX shows it (factors kept, no rewrites).

    The scalar program (:func:`symad.export.latex.latex_program`) and index notation
    (:mod:`symad.export.index_notation`) build each printed operation with it.
    """
    if primitive.printed is not None and not params:
        return primitive.printed(*args)
    function = getattr(primitive, "_to_sympy", None)
    if (isinstance(function, type) and issubclass(function, sympy.Function) and not params
            and not any(a.is_Number for a in args)):
        # sin(t) as it stands: SymPy's eval would only look for rewrites (sin(-t) = -sin(t),
        # I*t as a coefficient...), which cost more than printing; numbers are still evaluated.
        return function(*args, evaluate=False)
    return primitive.to_sympy(args, dict(params))


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

def temporary_base(requested: str, taken: set[str]) -> str:
    """The first of ``requested, t, u, v, ...`` whose ``base_{k}`` cannot be read as an input."""
    for base in (requested, "t", "u", "v", "s", "q", r"\tau", r"\xi", r"\zeta"):
        if not any(name == base or (name.startswith(base) and name[len(base):len(base) + 1] in "_^'{ ")
                   for name in taken):
            return base
    raise ExportError(f"latex: no free name for temporaries among the inputs {sorted(taken)}; "
                      "pass temporaries='...' with another letter")

def array_latex(printer: SymadLatexPrinter, elements: list, shape: tuple, matrix: str) -> str:
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

