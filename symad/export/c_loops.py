"""C export of array programs: the loop program (:mod:`symad.loopnest`) printed as C99.

The function keeps :mod:`symad.export.c`'s contract, ``void NAME(const double
*in, double *out)`` with every input and output flattened in order (the header
comment lists them with their shapes), but its body is loops: one loop nest per
kernel, so the source does not grow with the arrays' sizes (only constant
arrays a program holds, such as the indices of a fancy index, are written out
as data). Booleans are 1.0 and 0.0, as in the per-element export.

Temporaries (values read at several indices, reductions' results, matrices
arranged for a product) live in one block from ``malloc``; should it fail,
every output is set to NaN. Identifiers are symad's own (``i0``, ``o1``,
``t2``, ``v3``, ``j0``...); user names appear only in comments.

>>> import symad as sd, numpy as np
>>> source, _ = sd.grad(lambda u: np.sum((u[1:] - u[:-1]) ** 2)).trace(np.zeros(10 ** 6)).to_c("g")
>>> print(source[source.index("for (long"):].splitlines()[0])   # the first and last elements apart
for (long j0 = 1; j0 < 999999; j0++) {
>>> len(source) < 2000
True
"""

from __future__ import annotations

from symad import loopnest as L
from symad.errors import ExportError
from symad.export.c import c_comment_text, c_number, c_operation, c_spellable, translation_unit
from symad.graph import constant_value, is_constant

__all__ = ["function_c_loops"]


class _Printer(L.ExpressionPrinter):
    floor_division = "/"  # numerators are never negative where printed: C's / floors too
    conjunction = " && "

    def __init__(self, function_name: str):
        self.function_name = function_name
        self.helpers: set = set()
        self.lines: list[str] = []

    def number(self, value) -> str:
        return c_number(value)

    def minimum(self, a: str, b: str) -> str:
        return f"({a} < {b} ? {a} : {b})"

    def operation(self, primitive, exponent, args) -> str:
        constants = [None, constant_value(exponent)] if exponent is not None and is_constant(exponent) else []
        return c_operation(primitive, args, constants, self.function_name, self.helpers)

    def emit(self, statements, depth: int) -> None:
        pad = "    " * depth
        for statement in statements:
            cls = statement.__class__
            if cls is L.Let:
                kind = "long" if statement.kind == "int" else "double"
                self.lines.append(f"{pad}const {kind} {statement.name} = {self.expression(statement.expr)};")
            elif cls is L.Declare:
                self.lines.append(f"{pad}double {statement.name} = {self.operand(statement.init)};")
            elif cls is L.Assign:
                self.lines.append(f"{pad}{statement.name} = {self.expression(statement.expr)};")
            elif cls is L.Store or cls is L.Update:
                self.lines.append(f"{pad}{self.store(statement)};")
            elif cls is L.If:
                # A chain of ifs in else branches is one if / else if chain, not a nest that
                # grows with the number of a concatenation's operands.
                self.braced(f"if ({self.condition(statement.conds)}) ", statement.then, depth)
                orelse = statement.orelse
                while len(orelse) == 1 and orelse[0].__class__ is L.If:
                    self.lines[-1] += " else "
                    self.braced(f"if ({self.condition(orelse[0].conds)}) ", orelse[0].then, depth,
                                join=True)
                    orelse = orelse[0].orelse
                if orelse:
                    self.lines[-1] += " else {"
                    self.emit(orelse, depth + 1)
                    self.lines.append(f"{pad}}}")
            elif cls is L.Loop:
                self.braced(f"for ({self.loop_header(statement)}) ", statement.body, depth)
            elif cls is L.Parallel:  # one point, no threads: a plain loop
                var = statement.var
                self.braced(f"for (long {var} = 0; {var} < {self.ix(statement.count)}; {var}++) ",
                            statement.body, depth)
            elif cls is L.Block:
                self.braced("", statement.body, depth)
            elif cls is L.Combine:  # (only with threads: not written for C, which has none)
                size, chunks = statement.out.size, statement.chunks
                value = self.operation(statement.primitive, None, [
                    f"{statement.out.name}[k]", f"{statement.partial.name}[c * {size} + k]"])
                self.lines += [f"{pad}for (long k = 0; k < {size}; k++) {{",
                               f"{pad}    {statement.out.name}[k] = {statement.partial.name}[k];",
                               f"{pad}    for (long c = 1; c < {chunks}; c++) {statement.out.name}[k] = {value};",
                               f"{pad}}}"]
            elif cls is L.Comment:
                self.lines.append(f"{pad}/* {c_comment_text(statement.text)} */")
            else:  # pragma: no cover - the C lowering writes products as loops
                raise ExportError(f"to_c({self.function_name}): no C form for {cls.__name__}")

    def braced(self, head: str, body, depth: int, join: bool = False) -> None:
        """``head {`` body ``}``; with ``join``, the head continues the last line (``} else if``)."""
        pad = "    " * depth
        if join:
            self.lines[-1] += f"{head}{{"
        else:
            self.lines.append(f"{pad}{head}{{")
        self.emit(body, depth + 1)
        self.lines.append(f"{pad}}}")

    def loop_header(self, loop: L.Loop) -> str:
        start, stop = self.bound(loop.starts, ">"), self.bound(loop.stops, "<")
        var = loop.var
        if loop.reverse:
            return f"long {var} = {stop} - 1; {var} >= {start}; {var}--"
        return f"long {var} = {start}; {var} < {stop}; {var}++"

    def bound(self, values, keep: str) -> str:
        texts = [self.ix(v) for v in values]
        text = texts[0]
        for other in texts[1:]:
            text = f"(({text}) {keep} ({other}) ? ({text}) : ({other}))"
        return text


def function_c_loops(function, name: str) -> tuple:
    """The C source and header of an array program (see the module docstring)."""
    from symad.export.c import CCode

    def spellable(node) -> bool:
        return not node.params and c_spellable(node.primitive)

    try:
        program = L.lower_loops(function.graph, batch=False, name=function.name, spellable=spellable)
    except L.LoopsUnsupported as reason:
        raise ExportError(f"to_c({function.name}): {reason} in C; export the function without it, "
                          "or evaluate it in Python (F(...) or F.compile())") from None
    printer = _Printer(function.name)
    body: list[str] = []
    file_scope: list[str] = []
    for buffer in program.constants:
        kind = "long" if buffer.dtype == "int" else "double"
        values = ([str(int(v)) for v in buffer.data] if buffer.dtype == "int"
                  else [c_number(v) for v in buffer.data.tolist()]) or ["0"]
        file_scope.append(f"/* {c_comment_text(buffer.label)} */")
        file_scope.append(f"static const {kind} {buffer.name}[{len(values)}] = {{{', '.join(values)}}};")
    used = L.used_buffers(program.body)
    offset = 0
    for buffer in program.inputs:
        if buffer.name in used:
            body.append(f"    const double *{buffer.name} = in + {offset};  /* {c_comment_text(buffer.label)} */")
        offset += buffer.size
    if not any(b.name in used for b in program.inputs):
        body.append("    (void)in;")
    inputs = offset
    offset = 0
    for buffer in program.outputs:
        body.append(f"    double *{buffer.name} = out + {offset};")
        offset += buffer.size
    outputs = offset
    work = sum(b.size for b in program.temporaries)
    includes = []
    if work:
        includes.append("stdlib.h")
        body += [f"    double *work = malloc({work} * sizeof(double));",
                 "    if (work == NULL) {  /* no memory for the temporaries: every output NaN */",
                 f"        for (long k = 0; k < {outputs}; k++) out[k] = NAN;",
                 "        return;",
                 "    }"]
        at = 0
        for buffer in program.temporaries:
            body.append(f"    double *{buffer.name} = work + {at};")
            at += buffer.size
    for buffer in program.temporaries + program.outputs:
        if buffer.init is not None and buffer.size:
            body.append(f"    for (long k = 0; k < {buffer.size}; k++) {buffer.name}[k] = {c_number(buffer.init)};")
    printer.emit(program.body, 1)
    body += printer.lines
    if work:
        body.append("    free(work);")
    return CCode(*translation_unit(function, name, inputs, outputs, printer.helpers, body,
                                   includes, file_scope))
