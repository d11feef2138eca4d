"""Loops in formulas: each loop's recurrence, printed with its step index.

``F.latex()`` of a function holding loops prints, after its own lines, one block per
loop: the loop's kind, name and range of the step index, then one line per carry leaf,
``s_{i+1} = f(s_{i}, x_{i})`` (``s_{i} = f(s_{i+1}, ...)`` for a loop that runs
backwards: the adjoint recurrence of reverse mode, ``\\bar{s}_{i} = ...``), one per
stacked output ``y_{i} = ...`` and the initial carry. The body's inputs are named after
the user's parameters (``body(i, state)``: ``i`` and ``state0``, ``state1``...); a
tangent is dotted (``\\dot{s}``), a cotangent barred (``\\bar{s}``). Values of the
enclosing function the body reads print as themselves when they are its inputs.
"""

from __future__ import annotations

import numpy as np
import sympy

from symad.errors import ExportError
from symad.graph import Node, sympy_form

__all__ = ["loop_latex_lines"]


def _loops(function) -> list:
    from symad.loops.nodes import loop_p, while_p

    return [node for node in function.graph.nodes if node.primitive in (loop_p, while_p)]


def _printed_operand(atom):
    """An operand as a formula: an input symbol or a constant as itself (a whole float as an
    integer, as the display prints it), else None."""
    if atom.__class__ is Node or getattr(atom, "shape", ()) != ():
        return None
    value = sympy_form(atom)
    if value.is_Float and float(value).is_integer():
        return sympy.Integer(int(value))
    return value


def loop_latex_lines(function, printer) -> list[str]:
    """The ``aligned`` lines of every loop's recurrence in ``function`` (none without loops).

    >>> import numpy as np, symad as sd
    >>> F = sd.trace(lambda a: sd.fori_loop(0, 10, lambda i, y: y * a + i, 1.0), 2.0)
    >>> print(F.latex())
    \\begin{aligned}
    f &= \\operatorname{fori\\_loop}{\\left(1, a \\right)} \\\\
    & \\mathrm{fori\\_loop\\ <lambda>:\\ } i = 0, \\ldots, 9 \\\\
    {y}_{i + 1} &= a {y}_{i} + i \\\\
    {y}_{0} &= 1
    \\end{aligned}
    """
    lines = []
    seen = set()
    for node in _loops(function):
        spec = dict(node.params)["loop"]
        if spec in seen:
            continue
        seen.add(spec)
        lines += _recurrence(spec, node, printer)
    return lines


def _expression(value) -> sympy.Basic:
    """A formula's output as a SymPy object (a number the body returns as itself: a Float)."""
    return value if isinstance(value, sympy.Basic) else sympy.Float(float(value))


def _text(text: str) -> str:
    from symad.export.latex_printer import latex_text

    return latex_text(text)


def _recurrence(spec, node, printer) -> list[str]:
    body = spec.body
    n_carry, n_x, n_q = spec.counts()
    symbols = [s[()] if isinstance(s, np.ndarray) and s.ndim == 0 else s for s in body.in_symbols]
    index_symbol = symbols[0]
    first, last = spec.lower, spec.lower + spec.length - 1
    if spec.kind == "while_loop":
        header = f"& {_text(f'while_loop {spec.name}: ')} {printer.doprint(index_symbol)} = 0, 1, \\ldots"
    else:
        header = (f"& {_text(f'{spec.kind} {spec.name}: ')} {printer.doprint(index_symbol)} = "
                  + (f"{last}, \\ldots, {first}" if spec.reverse else f"{first}, \\ldots, {last}"))
    if any(getattr(s, "shape", ()) != () for s in symbols):
        return [header, f"& {_text('(a body of arrays: its recurrence is not printed)')}"]
    try:
        outputs = body.formula()
    except ExportError:
        return [header, f"& {_text('(a body too large to print inlined)')}"]
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    index = sympy.Symbol(index_symbol.name)
    before = index + 1 if spec.reverse else index
    after = index if spec.reverse else index + 1
    carry = symbols[1:1 + n_carry]
    xs = symbols[1 + n_carry:1 + n_carry + n_x]
    consts = symbols[1 + n_carry + n_x:]
    shown = {}  # const name -> its LaTeX, where the enclosing function's input is known
    for q, operand in zip(consts, node.args[n_carry + n_x:]):
        value = _printed_operand(operand)
        if value is not None:
            shown[q.name] = printer.doprint(value)

    labels: dict = {}

    def base(name):  # s0bar -> \bar{s_{0}}, q0dot -> \dot{k} where q0 stands for k
        if name not in labels:
            text = shown.get(name)
            for suffix, accent in (("bar", "\\bar"), ("dot", "\\dot")):
                if text is None and name.endswith(suffix) and len(name) > len(suffix):
                    text = f"{accent}{{{printer.doprint(base(name[:-3]).label)}}}"
            label = sympy.Symbol(name) if text is None else sympy.Dummy(name)
            if text is not None:  # printed as this LaTeX (the printer's own table)
                printer.symbol_names[label] = text
            labels[name] = sympy.IndexedBase(label)
        return labels[name]

    replace = {index_symbol: index}
    replace.update({c: base(c.name)[before] for c in carry})
    replace.update({x: base(x.name)[index] for x in xs})
    replace.update({q: base(q.name).label for q in consts})
    carry_bases = [base(c.name) for c in carry]
    lines = [header]
    for c, value in zip(carry_bases, outputs[:n_carry]):
        lines.append(f"{printer.doprint(c[after])} &= "
                     f"{printer.doprint(_expression(value).xreplace(replace))}")
    for position, value in enumerate(outputs[n_carry:]):
        name = "\\text{while}" if spec.kind == "while_loop" else printer.doprint(
            sympy.IndexedBase(f"y{position}")[index])
        lines.append(f"{name} &= {printer.doprint(_expression(value).xreplace(replace))}")
    start = last + 1 if spec.reverse and spec.kind != "while_loop" else first
    for c, operand in zip(carry_bases, node.args[:n_carry]):
        value = _printed_operand(operand)
        if value is not None:
            lines.append(f"{printer.doprint(c[start])} &= {printer.doprint(value)}")
    return lines


def _register() -> None:
    from symad.export.latex import LATEX_APPENDICES

    LATEX_APPENDICES["loops"] = loop_latex_lines


_register()
