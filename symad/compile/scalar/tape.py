"""The tape backend: any scalar graph run from an instruction tape by one interpreter.

Every other lowering writes a program per graph, and pays for it per graph: numexpr
one call per region and step (a 190,000-node unrolled loop: 4.8 s to generate, 0.1 s
per call at one point), numba an LLVM compile that grows faster than the graph (past
:data:`~symad.compile.scalar.numba_backend.MAX_NUMBA_NODES` it declines). The tape
backend writes none. A graph becomes plain arrays -- the *tape*:

* ``opcodes[i]``: what instruction ``i`` computes, an index into :func:`operations`;
* ``arities[i]``, ``offsets[i]``: where its operands' codes are in ``codes``;
* ``codes``: operand codes, as :class:`~symad.compile.scalar.program.OperandTable`
  numbers them (inputs, then one per instruction, then the constants);
* ``constants`` and ``output_codes``.

and one interpreter, :func:`interpreter`, compiled once for every graph, walks the tape
over a table of values with a row per code and a column per point: in C where the machine
has a C compiler (:mod:`symad.compile.scalar.tape_c`; float64), else in numba (its machine
code cached on disk, ``cache=True``). A new graph is new arrays: nothing is compiled. This
is CasADi's SX virtual machine.

The interpreter's operations are read from the catalogue: each elementwise primitive
whose stanza gives a ``numba`` (or ``c``) spelling, a template of scalar operands, is one opcode,
spelled by it; a variadic one (``add``, ``reduce_max``...) folds its binary spelling
over any number of operands, so a sum of 9,998 terms is one instruction. A graph with a
primitive that has no such spelling (special functions, custom primitives) or with
parameters is declined (:class:`~symad.compile.registry.BackendUnsupported`), and the
registry hands it to the fallback, numexpr, saying why.

>>> import sympy
>>> from symad.graph import GraphBuilder
>>> from symad.primitives import add_p, mul_p, sin_p
>>> x, y = sympy.symbols("x y"); b = GraphBuilder(); b.add_input(x); b.add_input(y)
>>> tape = build_tape(b.finish([b.record(add_p, (b.record(sin_p, (x,)), b.record(mul_p, (x, y)), y))]))
>>> [operations()[op].primitive.name for op in tape.opcodes], tape.arities.tolist()
(['sin', 'multiply', 'add'], [1, 2, 3])
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from symad.compile.modules import GeneratedModule
from symad.compile.registry import BackendUnsupported
from symad.compile.scalar.program import build_program, safe_comment
from symad.ir.primitive import PRIMITIVES, spell

__all__ = ["Operation", "Tape", "operations", "interpreter", "build_tape", "lower_tape",
           "TAPE_WORKING_SET_BYTES"]

#: The table of values a block of points takes (a row per value, a column per point):
#: blocks are as wide as this allows, at least one point. Small, so that the table stays
#: in the caches; the tape serves graphs at one point or small batches.
TAPE_WORKING_SET_BYTES = 4 << 20

_LOG = logging.getLogger(__name__)


class Operation(NamedTuple):
    """One opcode of an interpreter: the primitive, and its spelling in the interpreter's
    language over operands named ``x0, x1, ...`` (a variadic primitive's over ``acc`` and
    ``x``, folded); ``helpers``, the C helper functions the spelling calls (none in numba)."""

    primitive: object
    text: str
    variadic: bool
    helpers: tuple = ()


def _operation(primitive, language: str) -> Operation | None:
    """The interpreter's operation for ``primitive``, or None if its stanza has no scalar
    spelling in ``language`` ("numba" or "c") the interpreter can use."""
    form = primitive.spelling(language)
    if form is None or not primitive.elementwise:
        return None
    form, *helpers = form if isinstance(form, tuple) else (form,)  # C: (form, *helpers)
    if not primitive.variadic:
        text = spell(form, [f"x{k}" for k in range(primitive.arity)], [None] * primitive.arity)
        return Operation(primitive, text, False, tuple(helpers))
    # A variadic spelling is folded two operands at a time: only one that is a left fold
    # (a + b + c, max(max(a, b), c)) gives the same value so.
    folded = spell(form, [spell(form, ["a", "b"]), "c"])
    whole = spell(form, ["a", "b", "c"])
    if folded.replace("(", "").replace(")", "") != whole.replace("(", "").replace(")", ""):
        return None
    return Operation(primitive, spell(form, ["acc", "x"]), True, tuple(helpers))


def operations(language: str = "numba") -> list[Operation]:
    """An interpreter's operations, in opcode order: the catalogue's elementwise primitives
    with a scalar spelling in ``language`` ("numba" or "c"), in the order they were registered.

    >>> names = [operation.primitive.name for operation in operations()]
    >>> names[:3], "erf" in names, "gammaln" in names   # gammaln has no numba spelling
    (['add', 'subtract', 'multiply'], True, False)
    """
    found = [_operation(primitive, language) for primitive in list(PRIMITIVES.values())]
    return [operation for operation in found if operation is not None]


# ---------------------------------------------------------------------------
# The interpreter: generated once from the catalogue, compiled once by numba
# ---------------------------------------------------------------------------

_HEADER = '''\
# Generated by symad: the tape interpreter, one branch per opcode (symad.compile.scalar.tape).
import math

import numba
import numpy as np

EXTERNALS = []


@numba.njit(cache=True, nogil=True, error_model="numpy")
def interpret(opcodes, arities, offsets, codes, first_result, values):
    """Run the tape: instruction i writes row first_result + i of values (rows: codes,
    columns: points), reading the rows its operand codes name."""
    points = values.shape[1]
    for i in range(opcodes.shape[0]):
        op = opcodes[i]
        o = offsets[i]
        r = first_result + i
'''


_ONE_POINT = '''

@numba.njit(cache=True, nogil=True, error_model="numpy")
def interpret_one(opcodes, arities, offsets, codes, first_result, values):
    """interpret() at one point: values is one column, as a vector (no loop over points
    inside each instruction: a third of the time per instruction at one point)."""
    for i in range(opcodes.shape[0]):
        op = opcodes[i]
        o = offsets[i]
        r = first_result + i
'''


def _branch_one(opcode: int, operation: Operation) -> list[str]:
    """The branch of ``interpret_one`` for ``opcode``."""
    keyword = "if" if opcode == 0 else "elif"
    lines = [f"        {keyword} op == {opcode}:  # {safe_comment(operation.primitive.name)}"]
    if operation.variadic:
        return lines + ["            acc = values[codes[o]]",
                        "            for j in range(o + 1, o + arities[i]):",
                        "                x = values[codes[j]]",
                        f"                acc = {operation.text}",
                        "            values[r] = acc"]
    arity = operation.primitive.arity
    lines += [f"            x{k} = values[codes[o + {k}]]" for k in range(arity)]
    lines.append(f"            values[r] = {operation.text}")
    return lines


def _branch(opcode: int, operation: Operation) -> list[str]:
    keyword = "if" if opcode == 0 else "elif"
    lines = [f"        {keyword} op == {opcode}:  # {safe_comment(operation.primitive.name)}"]
    if operation.variadic:
        lines += ["            last = o + arities[i]",
                  "            for p in range(points):",
                  "                acc = values[codes[o], p]",
                  "                for j in range(o + 1, last):",
                  "                    x = values[codes[j], p]",
                  f"                    acc = {operation.text}",
                  "                values[r, p] = acc"]
        return lines
    arity = operation.primitive.arity
    lines += [f"            c{k} = codes[o + {k}]" for k in range(arity)]
    lines.append("            for p in range(points):")
    lines += [f"                x{k} = values[c{k}, p]" for k in range(arity)]
    lines.append(f"                values[r, p] = {operation.text}")
    return lines


def interpreter_source(table: list[Operation]) -> str:
    """The interpreter's module text for the operations ``table`` (one branch each).

    >>> "np.sin(x0)" in interpreter_source(operations())
    True
    """
    lines = [_HEADER]
    for opcode, operation in enumerate(table):
        lines.extend(_branch(opcode, operation))
    lines.append(_ONE_POINT)
    for opcode, operation in enumerate(table):
        lines.extend(_branch_one(opcode, operation))
    return "\n".join(lines) + "\n"


_INTERPRETERS: dict = {}  # (language, source digest) -> (operations, interpret, interpret_one)
_INTERPRETERS_LOCK = threading.Lock()


def interpreter(dtype="float64", language: str | None = None) -> tuple[list[Operation], object, object]:
    """``(operations, interpret, interpret_one)`` for tapes of ``dtype``: the catalogue's
    operations and the functions that run a tape of them (on a table of values, or on one
    point's vector). Made once per process and catalogue.

    float64 tapes are run by the C interpreter (:mod:`symad.compile.scalar.tape_c`: no
    numba import, a millisecond to load) where the machine has a C compiler, else, like
    every other dtype, by numba's, whose machine code numba keeps on disk beside the module
    (under ``symad.config.cache_dir``), so later processes load it. BackendUnsupported,
    saying why, if neither can be made. ``language`` ("c" or "numba") asks for one of them.

    >>> table, interpret, interpret_one = interpreter("float32")   # numba's
    >>> [operation.primitive.name for operation in table][:2]
    ['add', 'subtract']
    """
    reasons = []
    if language in (None, "c"):
        from symad.compile.scalar.tape_c import c_interpreter

        try:
            if np.dtype(dtype) != np.float64:
                raise BackendUnsupported(f"tape backend: the C interpreter runs float64, not {np.dtype(dtype)}")
            return _made("c", c_interpreter)
        except BackendUnsupported as error:
            if language == "c":
                raise
            reasons.append(str(error))
            _LOG.info("symad: %s; numba's interpreter runs the tape instead", error)
    try:
        return _made("numba", _numba_interpreter)
    except BackendUnsupported as error:
        raise BackendUnsupported("; ".join([*reasons, str(error)])) from error


def _made(language: str, make) -> tuple[list[Operation], object, object]:
    """The interpreter in ``language`` for the catalogue's current operations, made by
    ``make(table)`` the first time in this process."""
    table = operations(language)
    digest = hashlib.sha256("\n".join(f"{op.primitive.name}:{op.text}" for op in table).encode()).hexdigest()
    with _INTERPRETERS_LOCK:
        found = _INTERPRETERS.get((language, digest))
        if found is None:
            interpret, interpret_one = make(table)
            found = _INTERPRETERS[(language, digest)] = (table, interpret, interpret_one)
    return found


def _numba_interpreter(table: list[Operation]) -> tuple:
    """numba's ``(interpret, interpret_one)`` for ``table``, compiled or loaded from numba's
    cache (BackendUnsupported, saying why, where numba cannot)."""
    from symad.compile.evaluator import load_module

    try:
        namespace = load_module(GeneratedModule(interpreter_source(table), [], "tape", "float64", 0, None),
                                on_disk=True)
        interpret, interpret_one = namespace["interpret"], namespace["interpret_one"]
        _load_machine_code(interpret, interpret_one)
    except Exception as error:  # noqa: BLE001 - numba's errors, an unwritable cache
        # Here, not at the first evaluation: a tape that cannot run is declined while
        # the registry can still hand the graph to numexpr, saying why.
        raise BackendUnsupported(f"tape backend: its interpreter could not be made here "
                                 f"({type(error).__name__}: {error})") from error
    return interpret, interpret_one


def _load_machine_code(interpret, interpret_one) -> None:
    """numba's compile of both interpreters for the drivers' argument types (or their load from
    numba's cache: 0.3-0.5 s, numba's start), on an empty tape."""
    empty = np.zeros(0, np.int64)
    interpret(np.zeros(0, np.int32), empty, empty, empty, 0, np.zeros((0, 1)))
    interpret_one(np.zeros(0, np.int32), empty, empty, empty, 0, np.zeros(0))


# ---------------------------------------------------------------------------
# Graph -> tape
# ---------------------------------------------------------------------------


@dataclass
class Tape:
    """A graph as the interpreter's arrays (see the module); ``input_count`` inputs first."""

    opcodes: np.ndarray
    arities: np.ndarray
    offsets: np.ndarray
    codes: np.ndarray
    constants: np.ndarray
    output_codes: np.ndarray
    input_count: int
    output_is_boolean: tuple

    @property
    def rows(self) -> int:
        """Rows of the table of values: inputs, one per instruction, constants."""
        return self.input_count + len(self.opcodes) + len(self.constants)


def build_tape(graph, table: list[Operation] | None = None) -> Tape:
    """The tape of ``graph`` (scalar nodes) for the operations ``table`` (:func:`operations`).

    Raises BackendUnsupported, naming them, if a primitive has no opcode or a node has
    parameters.
    """
    table = operations() if table is None else table
    program = build_program(graph)
    operands = program.operand_table()
    opcode_of = {operation.primitive: opcode for opcode, operation in enumerate(table)}
    missing = sorted({p.name for p in operands.distinct_primitives if p not in opcode_of})
    if missing:
        raise BackendUnsupported(f"tape backend: no opcode for {', '.join(missing)} (its stanza "
                                 "has no scalar spelling in the interpreter's language)")
    with_params = sorted({p.name for p, params in zip(operands.primitives, operands.params) if params})
    if with_params:
        raise BackendUnsupported(f"tape backend: {', '.join(with_params)} with parameters")
    distinct = np.array([opcode_of[p] for p in operands.distinct_primitives], np.int32)
    opcodes = distinct[operands.primitive_numbers] if len(distinct) else np.zeros(0, np.int32)
    # Not astype, which copies: the operand table's arrays are int64 already, and a 10^4-step
    # gradient's are megabytes, at the moment its process's memory peaks.
    return Tape(np.ascontiguousarray(opcodes, np.int32), np.ascontiguousarray(operands.arities, np.int64),
                np.ascontiguousarray(operands.offsets, np.int64), np.ascontiguousarray(operands.codes, np.int64),
                np.array([float(c.value) for c in operands.constants], np.float64),
                np.ascontiguousarray(operands.output_codes, np.int64), operands.input_count,
                tuple(program.outputs_are_boolean()))


_DRIVER = '''
_LOCAL = threading.local()  # each thread its own tables of values


def _table(points):
    """This thread's table of values for blocks of ``points`` points, constants filled in."""
    tables = getattr(_LOCAL, "tables", None)
    if tables is None:
        tables = _LOCAL.tables = {}
    values = tables.get(points)
    if values is None:
        if len(tables) > 3:
            tables.clear()
        values = tables[points] = np.empty((ROWS, points), DTYPE)
        values[ROWS - len(EXTERNALS[5]):] = EXTERNALS[5].astype(DTYPE)[:, None]
    return values


def _run_block(fill, outputs, first, points):
    interpret, opcodes, arities, offsets, codes, constants, output_codes, interpret_one = EXTERNALS
    values = _table(points)
    fill(values, first, points)
    if points == 1:
        interpret_one(opcodes, arities, offsets, codes, INPUT_COUNT, values.reshape(ROWS))
    else:
        interpret(opcodes, arities, offsets, codes, INPUT_COUNT, values)
    column = 0
    for output in outputs:
        width = 1 if output.ndim == 1 else output.shape[1]
        rows = values[output_codes[column:column + width], :points]
        if output.ndim == 1:
            output[first:first + points] = rows[0]
        else:
            output[first:first + points] = rows.T
        column += width


def _run_blocks(fill, outputs, n, block_size, progress):
    for first in range(0, n, block_size):
        points = min(block_size, n - first)
        _run_block(fill, outputs, first, points)
        if progress is not None:
            progress(points)


def evaluate(inputs, outputs, n, block_size=BLOCK_SIZE, progress=None):
    """Fill 1-D ``outputs`` of length n from 1-D (length n) or 0-d ``inputs`` (``progress``, if
    given, is called with the points of each block done)."""
    if len(inputs) != INPUT_COUNT:
        raise ValueError(f"expected {INPUT_COUNT} inputs, got {len(inputs)}")

    def fill(values, first, points):
        for row, x in enumerate(inputs):
            values[row] = x if x.ndim == 0 else x[first:first + points]

    _run_blocks(fill, outputs, n, block_size, progress)
    return outputs


def evaluate_matrices(inputs, outputs, n, block_size=BLOCK_SIZE, progress=None):
    """Fill ``(n, k)`` outputs from ``(n, k)`` or ``(1, k)`` inputs (one row: every point)."""

    def fill(values, first, points):
        row = 0
        for matrix in inputs:
            width = matrix.shape[1]
            if matrix.shape[0] == 1 and n != 1:
                values[row:row + width] = matrix[0][:, None]
            else:
                values[row:row + width] = matrix[first:first + points].T
            row += width

    _run_blocks(fill, outputs, n, block_size, progress)
    return outputs
'''


def lower_tape(graph, dtype, name: str = "function") -> GeneratedModule:
    """The tape module of ``graph``: a short driver, the tape and the interpreter bound as its
    ``EXTERNALS``; BackendUnsupported (saying why) for a graph the tape cannot run.

    >>> import numpy as np, sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.compile.evaluator import load_module
    >>> from symad.primitives import mul_p, sin_p
    >>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
    >>> module = lower_tape(b.finish([b.record(mul_p, (b.record(sin_p, (x,)), x))]), "float64")
    >>> load_module(module)["run"](np.array([0.5, 2.0]))[0].round(6).tolist()
    [0.239713, 1.818595]
    """
    from symad.compile.scalar.source import RUN, boolean_tuple_source

    dtype = np.dtype(dtype)
    table, interpret, interpret_one = interpreter(dtype)
    tape = build_tape(graph, table)
    block = max(1, TAPE_WORKING_SET_BYTES // (tape.rows * dtype.itemsize))
    lines = [
        f"# Generated by symad: the tape evaluator of {safe_comment(name)} ({dtype.name}).",
        f"# {len(tape.opcodes):,} instructions, run by an interpreter compiled once for every graph:",
        "# EXTERNALS = [interpret, opcodes, arities, offsets, codes, constants, output_codes,",
        "# interpret_one].",
        "import threading",
        "",
        "import numpy as np",
        "",
        f"DTYPE = np.{dtype.name}",
        f"INPUT_COUNT = {tape.input_count}",
        f"ROWS = {tape.rows}",
        f"OUTPUT_IS_BOOLEAN = {boolean_tuple_source(tape.output_is_boolean)}",
        f"BLOCK_SIZE = {block}",
        "REPORTS_PROGRESS = True",
        "EXTERNALS = [None] * 8",
    ]
    source = "\n".join(lines) + "\n" + _DRIVER + RUN
    externals = [interpret, tape.opcodes, tape.arities, tape.offsets, tape.codes, tape.constants,
                 tape.output_codes, interpret_one]
    return GeneratedModule(source, externals, "tape", dtype, block, None)


def decline_arrays(graph, dtype, name: str = "function"):
    """An array program is not a tape's: BackendUnsupported, so numexpr takes it."""
    raise BackendUnsupported("tape backend: runs graphs of scalar nodes, not array programs")

