"""LaTeX export: the shared-subexpression program as one ``aligned`` block.

The printer is SymPy's ``LatexPrinter`` with hooks for symad's own names:
array elements ``w[0, 1]`` print as ``w_{0, 1}``, and symad's SymPy
functions (sigmoid, softplus, cbrt, stop_gradient, expm1, log1p) print as
mathematicians write them.
"""

from __future__ import annotations

import re

import sympy
from sympy.core.function import AppliedUndef
from sympy.printing.latex import LatexPrinter

from symad.errors import ExportError

__all__ = ["SymadLatexPrinter", "display_name", "function_latex", "latex_text", "partial_label"]

_INDEXED_NAME = re.compile(r"^(?P<base>[A-Za-z][A-Za-z0-9_]*)\[(?P<index>[0-9, ]+)\]$")


def latex_text(text: str) -> str:
    """``text`` as upright LaTeX with every special character escaped.

    >>> latex_text("grad(f_1)")
    '\\\\mathrm{grad(f\\\\_1)}'
    """
    specials = {
        "\\": r"\backslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
        "^": r"\hat{}", "_": r"\_", "%": r"\%", "~": r"\sim{}", " ": r"\ ",
    }
    return r"\mathrm{" + "".join(specials.get(ch, ch) for ch in text) + "}"


def display_name(name: str) -> str:
    """A function name for display: anonymous functions are called ``f``."""
    return name.replace("<lambda>", "f")


def name_latex(name: str) -> str:
    """A function name in LaTeX: one letter in math italic, longer names upright.

    >>> print(name_latex("f"), name_latex("loss"))
    f \\mathrm{loss}
    """
    name = display_name(name)
    return name if re.fullmatch(r"[A-Za-z]", name) else latex_text(name)


def partial_label(function_name: str, wrt_name: str, printer: LatexPrinter | None = None) -> str:
    """``\\frac{\\partial f}{\\partial x_{1}}`` for the derivative of ``function_name`` by ``wrt_name``.

    >>> print(partial_label("f", "x1"))
    \\frac{\\partial f}{\\partial x_{1}}
    """
    printer = printer or SymadLatexPrinter()
    numerator = name_latex(function_name)
    return rf"\frac{{\partial {numerator}}}{{\partial {printer.doprint(sympy.Symbol(wrt_name))}}}"


class SymadLatexPrinter(LatexPrinter):
    """SymPy's LaTeX printer, taught symad's symbol names and functions."""

    printmethod = "_symad_latex"

    def _print_Symbol(self, expr, style="plain"):
        match = _INDEXED_NAME.match(expr.name)
        if match:
            base = super()._print_Symbol(sympy.Symbol(match["base"]))
            return f"{base}_{{{match['index'].replace(' ', '')}}}"
        if re.fullmatch(r"[A-Za-z0-9_']+", expr.name):
            return super()._print_Symbol(expr, style)
        return latex_text(expr.name)  # names from pytree paths, quotes, dots: print verbatim

    def _print_Function(self, expr, exp=None):
        # A custom primitive is an undefined SymPy function named by the user;
        # SymPy splices such names into a %-format string, so a name that is
        # not a plain identifier is printed escaped instead.
        name = expr.func.__name__
        if isinstance(expr, AppliedUndef) and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            return self._with_power(self._function_call(latex_text(name), expr), exp)
        return super()._print_Function(expr, exp)

    def _function_call(self, name: str, expr) -> str:
        arguments = ", ".join(self._print(a) for a in expr.args)
        return rf"{name}\left({arguments}\right)"

    def _print_sigmoid(self, expr, exp=None):
        return self._with_power(self._function_call(r"\sigma", expr), exp)

    def _print_softplus(self, expr, exp=None):
        return self._with_power(self._function_call(r"\operatorname{softplus}", expr), exp)

    def _print_stop_gradient(self, expr, exp=None):
        return self._with_power(self._function_call(r"\operatorname{sg}", expr), exp)

    def _print_expm1(self, expr, exp=None):
        return self._with_power(self._function_call(r"\operatorname{expm1}", expr), exp)

    def _print_log1p(self, expr, exp=None):
        return self._with_power(self._function_call(r"\operatorname{log1p}", expr), exp)

    def _print_cbrt(self, expr, exp=None):
        return self._with_power(rf"\sqrt[3]{{{self._print(expr.args[0])}}}", exp)

    @staticmethod
    def _with_power(text: str, exp) -> str:
        return text if exp is None else rf"{{{text}}}^{{{exp}}}"


def _output_labels(function, count: int, names) -> list[str]:
    if names is not None:
        names = list(names)
        if len(names) != count:
            raise ExportError(f"latex: output_names has {len(names)} names for {count} outputs")
        return [latex_text(str(n)) for n in names]
    if function.output_labels is not None and len(function.output_labels) == count:
        return list(function.output_labels)
    base = name_latex(function.name)
    if count == 1:
        return [base]
    return [f"{base}_{{{i}}}" for i in range(count)]


def function_latex(function, output_names=None, **settings) -> str:
    """LaTeX of ``function.cse()``: intermediates, then outputs, in one aligned block."""
    printer = SymadLatexPrinter(settings)
    assignments, leaves = function.cse()
    lines = [f"{printer.doprint(symbol)} &= {printer.doprint(value)}" for symbol, value in assignments]
    for label, value in zip(_output_labels(function, len(leaves), output_names), leaves):
        lines.append(f"{label} &= {printer.doprint(value)}")
    return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"
