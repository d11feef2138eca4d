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

from typing import NamedTuple

import numpy as np
import sympy

from symad.errors import ExportError
from symad.graph import Node, sympy_form
from symad.loops.spec import BinomialSpec, LoopSpec

__all__ = ["loop_latex_lines", "Recurrence", "recurrence", "recurrence_text", "loop_head", "LoopLeaf",
           "loop_element"]


def _loops(function) -> list:
    # A loop node is the one whose parameter is a loop (symad.loops.nodes imports this
    # module for its formula heads, so the stanzas are not imported here).
    return [node for node in function.graph.nodes
            if node.params and isinstance(dict(node.params).get("loop"), (LoopSpec, BinomialSpec))]


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
        operands = [_printed_operand(atom) for atom in node.args]
        for spec, printed in dict(node.params)["loop"].printed_loops(operands):
            if spec in seen:
                continue
            seen.add(spec)
            lines += _latex_lines(recurrence(spec, printed), printer)
    return lines


def _expression(value) -> sympy.Basic:
    """A formula's output as a SymPy object (a number the body returns as itself: a Float)."""
    return value if isinstance(value, sympy.Basic) else sympy.Float(float(value))


def _text(text: str) -> str:
    from symad.export.latex_printer import latex_text

    return latex_text(text)


class Recurrence(NamedTuple):
    """A loop's recurrence as SymPy objects, for any printer.

    ``index``: the step index symbol; ``steps``: ``(first, last)`` in the order the loop
    takes them (None for a while_loop); ``equations``: ``(left, right)`` pairs -- each carry
    leaf's next value (``s[i + 1]``, or ``s[i]`` for a loop run backwards), then each stacked
    output ``y[i]`` (``while`` for a while_loop's condition); ``initial``: the carry leaves'
    first values, where known; ``accents``: ``{label: (accent, base label)}`` for the
    tangent's and cotangent's leaves (``s0bar`` is ``\\bar{s_0}``), ``shown``: the labels of
    the enclosing function's values, as themselves; ``note``: why no equation is given, or "";
    ``labels``: each leaf's name to its label.
    """

    kind: str
    name: str
    index: sympy.Symbol
    steps: tuple | None
    equations: list
    initial: list
    accents: dict
    shown: dict
    note: str
    labels: dict = {}


def recurrence(spec, operands: list) -> Recurrence:
    """The recurrence of the loop ``spec`` on ``operands`` (each a printable SymPy value, or
    None where it is an intermediate value the formula does not spell out)."""
    body = spec.body
    n_carry, n_x, _ = spec.counts()
    symbols = [s[()] if isinstance(s, np.ndarray) and s.ndim == 0 else s for s in body.in_symbols]
    index = sympy.Symbol(symbols[0].name)
    first, last = spec.lower, spec.lower + spec.length - 1
    steps = None if spec.kind == "while_loop" else ((last, first) if spec.reverse else (first, last))
    empty = Recurrence(spec.kind, spec.name, index, steps, [], [], {}, {}, "")
    if any(getattr(s, "shape", ()) != () for s in symbols):
        return empty._replace(note="a body of arrays: its recurrence is not printed")
    try:
        outputs = body.formula()
    except ExportError:
        return empty._replace(note="a body too large to print inlined")
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    before = index + 1 if spec.reverse else index
    after = index if spec.reverse else index + 1
    carry = symbols[1:1 + n_carry]
    xs = symbols[1 + n_carry:1 + n_carry + n_x]
    consts = symbols[1 + n_carry + n_x:]
    shown = {q.name: value for q, value in zip(consts, operands[n_carry + n_x:]) if value is not None}
    labels: dict = {}
    accents: dict = {}

    def base(name):  # s0bar: a cotangent's leaf, accented from s0's label
        if name not in labels:
            accent = None
            for suffix, mark in (("bar", "\\bar"), ("dot", "\\dot")):
                if name not in shown and name.endswith(suffix) and len(name) > len(suffix):
                    accent = (mark, base(name[:-len(suffix)]).label)
                    break
            # A label printed as something else is a Dummy: terms sort as they always have.
            label = sympy.Dummy(name) if accent or name in shown else sympy.Symbol(name)
            if accent:
                accents[label] = accent
            labels[name] = sympy.IndexedBase(label)
        return labels[name]

    replace = {symbols[0]: index}
    replace.update({c: base(c.name)[before] for c in carry})
    replace.update({x: base(x.name)[index] for x in xs})
    replace.update({q: base(q.name).label for q in consts})
    carry_bases = [base(c.name) for c in carry]
    equations = [(c[after], _expression(value).xreplace(replace))
                 for c, value in zip(carry_bases, outputs[:n_carry])]
    for position, value in enumerate(outputs[n_carry:]):
        left = (sympy.Symbol("while") if spec.kind == "while_loop"
                else sympy.IndexedBase(f"y{position}")[index])
        equations.append((left, _expression(value).xreplace(replace)))
    start = last + 1 if spec.reverse and spec.kind != "while_loop" else first
    initial = [(c[start], value) for c, value in zip(carry_bases, operands[:n_carry]) if value is not None]
    shown = {labels[name].label: value for name, value in shown.items() if name in labels}
    return Recurrence(spec.kind, spec.name, index, steps, equations, initial, accents, shown, "",
                      {name: base.label for name, base in labels.items()})


def _latex_lines(loop: Recurrence, printer) -> list[str]:
    for label, value in loop.shown.items():  # the enclosing function's values as themselves
        printer.symbol_names[label] = printer.doprint(value)
    for label, (accent, of) in loop.accents.items():
        printer.symbol_names[label] = f"{accent}{{{printer.doprint(of)}}}"
    index = printer.doprint(loop.index)
    if loop.steps is None:
        header = f"& {_text(f'while_loop {loop.name}: ')} {index} = 0, 1, \\ldots"
    else:
        header = f"& {_text(f'{loop.kind} {loop.name}: ')} {index} = {loop.steps[0]}, \\ldots, {loop.steps[1]}"
    if loop.note:
        return [header, f"& {_text(f'({loop.note})')}"]
    lines = [header]
    for left, right in loop.equations + loop.initial:
        left_text = "\\text{while}" if left == sympy.Symbol("while") else printer.doprint(left)
        lines.append(f"{left_text} &= {printer.doprint(right)}")
    return lines


def text_names(loop: Recurrence) -> dict:
    """``{label: what str() prints for it}``: the enclosing function's values as themselves,
    a tangent's or cotangent's leaf as its base's name with ``dot`` or ``bar`` after it."""
    names: dict = {}

    def name_of(label):
        if label not in names:
            if label in loop.shown:
                names[label] = loop.shown[label]
            elif label in loop.accents:
                accent, of = loop.accents[label]
                names[label] = sympy.Symbol(f"{name_of(of)}{accent[1:]}")
            else:
                names[label] = sympy.Symbol(label.name)
        return names[label]

    for label in loop.labels.values():
        name_of(label)
    return names


def recurrence_text(loop: Recurrence) -> str:
    """The recurrence as one line of text, as ``str()`` of a formula prints a loop.

    >>> import symad as sd
    >>> F = sd.trace(lambda a: sd.fori_loop(0, 10, lambda i, y: y * a + i, 1.0), 2.0)
    >>> print(F.formula())
    fori_loop(i = 0..9: y[i + 1] = a*y[i] + i; y[0] = 1)
    """
    names = text_names(loop)

    def text(expression) -> str:
        return str(expression.xreplace(names))

    if loop.steps is None:
        steps = f"{loop.index} = 0, 1, ..."
    else:
        steps = f"{loop.index} = {loop.steps[0]}..{loop.steps[1]}"
    if loop.note:
        return f"{loop.kind}({steps}: {loop.note})"
    equations = ", ".join(f"{text(left)} = {text(right)}" for left, right in loop.equations)
    initial = ", ".join(f"{text(left)} = {text(right)}" for left, right in loop.initial)
    return f"{loop.kind}({steps}: {equations}" + (f"; {initial})" if initial else ")")


# ---------------------------------------------------------------------------
# The loop node in formulas: its application, and each element of its value
# ---------------------------------------------------------------------------


class LoopApplication(sympy.Function):
    """A loop node applied to its operands in a formula (``fori_loop(1.0, a)``), its class
    made once per loop (:func:`loop_head`, which sets ``loop``). ``str()`` prints its
    recurrence (:func:`recurrence_text`); LaTeX prints the application, and the recurrence
    below the function's lines (:func:`loop_latex_lines`)."""

    loop = None

    def _sympystr(self, printer):
        return recurrence_text(self.recurrence())

    def recurrence(self) -> Recurrence:
        """This loop's :class:`Recurrence`, its operands printed where they are inputs or numbers
        (worked out once per loop and operands: each output of the loop prints it)."""
        operands = tuple(_printed_value(a) for a in self.args)
        key = ("recurrence", operands)
        found = self.loop.derived.get(key)
        if found is None:
            found = self.loop.derived.setdefault(key, recurrence(self.loop, list(operands)))
        return found

    def _latex(self, printer, exp=None):
        # As an undefined function of the loop's kind prints (\operatorname{fori\_loop}).
        return printer._print(sympy.Function(self.loop.kind)(*self.args), exp=exp)


def _printed_value(value):
    """An operand in a formula's text: an input or a number (a whole float as an integer), or
    None for an intermediate value."""
    if value.is_Float and float(value).is_integer():
        return sympy.Integer(int(value))
    return value if value.is_Symbol or value.is_Number else None


def loop_head(spec) -> type:
    """The :class:`LoopApplication` class of the loop ``spec``, named after its kind."""
    with spec.lock:
        head = spec.derived.get("formula head")
        if head is None:
            head = spec.derived["formula head"] = type(spec.kind, (LoopApplication,), {"loop": spec})
    return head


def _position(position) -> sympy.Basic:
    # A position is an int or an index expression: never a string, nothing is parsed.
    return sympy.Integer(position) if isinstance(position, (int, np.integer)) else position


def _leaf_of(spec, position) -> tuple | None:
    """``(leaf name, step)`` of the element at ``position`` of the loop's value: a carry
    leaf after the last step, or a stacked output at its step (``position`` may hold a free
    index: ``start + i`` is element ``i`` of the output that starts at ``start``); None for
    an array leaf, or a position this cannot place."""
    position = _position(position)
    first = position.xreplace({symbol: sympy.Integer(0) for symbol in position.free_symbols})
    if not first.is_Integer:
        return None
    symbols = spec.body.in_symbols
    n_carry = len(spec.carry_shapes)
    offsets = spec.result_offsets()
    for leaf, (start, end) in enumerate(zip(offsets, offsets[1:])):
        if start <= int(first) < end:
            if leaf < n_carry:
                if spec.carry_shapes[leaf] != () or position.free_symbols:
                    return None
                symbol = symbols[1 + leaf]
                symbol = symbol[()] if isinstance(symbol, np.ndarray) else symbol
                return symbol.name, spec.lower if spec.reverse else spec.lower + spec.length
            if spec.y_shapes[leaf - n_carry] != ():
                return None
            return f"y{leaf - n_carry}", spec.lower + position - start
    return None


class LoopLeaf(sympy.Function):
    """One element of a loop's value in a formula: ``LoopLeaf(application, position)``,
    printed as the leaf it is, ``s0[100]`` (a carry after the last step) or ``y0[3]`` (a
    stacked output at a step), after the recurrence in ``str()``, alone in LaTeX, where the
    recurrence is printed below."""

    nargs = 2

    def _leaf(self):
        application, position = self.args
        return _leaf_of(application.loop, position)

    def _sympystr(self, printer):
        name, step = self._leaf()
        loop = self.args[0].recurrence()
        label = text_names(loop).get(loop.labels.get(name), name)
        return f"{printer.doprint(self.args[0])}[{label}[{printer.doprint(step)}]]"

    def _latex(self, printer, exp=None):
        name, step = self._leaf()
        text = _leaf_latex(name, printer)
        return f"{{{text}}}_{{{printer.doprint(step)}}}" + (f"^{{{exp}}}" if exp else "")


def _leaf_latex(name: str, printer) -> str:
    """A leaf's name in LaTeX, as the recurrence prints it: ``s0bar`` is ``\\bar{s_{0}}``."""
    for suffix, accent in (("bar", "\\bar"), ("dot", "\\dot")):
        if name.endswith(suffix) and len(name) > len(suffix):
            return f"{accent}{{{_leaf_latex(name[:-len(suffix)], printer)}}}"
    return printer.doprint(sympy.Symbol(name))


def loop_element(application, position):
    """The element at ``position`` of a loop's value, from the loop's ``application``: the
    application itself where the value is one element, else a :class:`LoopLeaf`."""
    spec = application.loop
    if spec.size == 1 or spec.kind == "while_loop" or _leaf_of(spec, position) is None:
        return application
    return LoopLeaf(application, _position(position))


def _register() -> None:
    from symad.export.latex import LATEX_APPENDICES

    LATEX_APPENDICES["loops"] = loop_latex_lines


_register()
