"""The numba backend of array programs: the loop program (:mod:`symad.loopnest`) as numba.

The module holds one function, ``_program``, compiled by numba with
``parallel=True`` (``fastmath`` off, ``error_model="numpy"``: inf and nan as
NumPy gives them), cached on disk beside the module's file like the scalar
numba backend's kernels (:mod:`symad.compile.scalar.numba_backend`). Each kernel is
one ``numba.prange`` loop over the points of the batch times chunks of the
kernel's first axis; matrix products of einsums call ``np.dot`` (BLAS).

``run(*inputs)`` keeps the interface of the other array evaluators
(:mod:`symad.compile.arrays.lowering`): each input ``(points or 1,) + its core shape``,
a tuple of outputs ``(points or 1,) + shape`` back. It runs on one thread when
the work is small (:data:`PARALLEL_MIN_WORK`): a parallel region costs tens of
microseconds, and milliseconds when another process holds the second core.

>>> import symad as sd, numpy as np
>>> from symad.compile.arrays.numba_loops import numba_loops_module
>>> G = sd.grad(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))).trace(np.zeros(10))
>>> module = numba_loops_module(G.graph, "float64", "g")
>>> "numba.prange(" in module.source, module.source.count("numba.prange(")
(True, 1)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from symad import array_primitives as A
from symad import loopnest as L
from symad.compile.modules import MAX_LITERAL_ELEMENTS, ArrayModule
from symad.compile.registry import BackendUnsupported
from symad.compile.scalar import numba_backend
from symad.compile.scalar.numba_backend import scalar_form
from symad.compile.scalar.program import Instruction, safe_comment
from symad.compile.scalar.source import literal
from symad.graph import atom_shape

__all__ = ["numba_loops_module", "lower_numba_arrays", "numba_spellable", "NumbaLoopsModule", "PARALLEL_MIN_WORK"]

#: A kernel runs on threads when its work (elements times the cost of an element, in
#: additions: symad.loopnest.ir.CALL_COST per call of exp, sin...) reaches this: about
#: 2.5 ms of one core. A parallel region costs tens of microseconds on an idle machine,
#: and milliseconds when another process holds the second core (on the shared 2-core
#: machine the gradient of sum(sin(x) exp(-x**2)) at 10^5 elements took 1.3 ms on two
#: threads in one run and 7.1 ms in the next, 2.0 ms on one). The threshold is set for
#: the idle machine a user's workstation usually is (there the 10^5 gradient takes
#: 1.25-1.3 ms on two threads against 2.1 ms on one; with threads from 10 ms, 1.9x
#: JAX's time instead of 0.7x); a loaded machine loses those milliseconds.
PARALLEL_MIN_WORK = 1 << 22


def _instruction(primitive, count: int) -> Instruction:
    return Instruction(0, primitive, tuple(range(count)), (), primitive.returns_boolean)


def numba_spellable(node) -> bool:
    """True if this backend writes the elementwise ``node``: symad's own primitives without
    parameters (the lowering writes logsumexp from max, exp and log).

    >>> from symad.primitives import erf_p
    >>> from symad.graph import Node
    >>> numba_spellable(Node(erf_p, (), ()))
    True
    """
    if node.params:
        return False
    if node.primitive.name in ("logsumexp", "power"):
        return True
    return scalar_form(_instruction(node.primitive, len(node.args))) is not None


def _number(value) -> str:
    """A literal numba reads: NumPy's names for inf and nan."""
    return literal(value).replace('float("nan")', "np.nan").replace('float("inf")', "np.inf")


class _Printer(L.ExpressionPrinter):
    def __init__(self, program: L.LoopProgram, parallel: bool):
        self.program = program
        self.parallel = parallel
        self.lines: list[str] = []

    def number(self, value) -> str:
        return _number(value)

    def minimum(self, a: str, b: str) -> str:
        return f"min({a}, {b})"

    def subscript(self, index: L.Ix) -> str:
        """Unsigned: numba then skips the wrap-around of negative indices (a select per
        access, which kept LLVM from vectorizing the grid gradient's loop: 4.7x slower);
        the lowering reads only where indices are valid."""
        return self.ix(index) if index.is_const() else f"np.uint64({self.ix(index)})"

    def operation(self, primitive, exponent, args) -> str:
        if primitive.name == "power" and exponent is not None and not exponent.is_Symbol:
            value = L.literal_operand(exponent)[1]
            if value == 2:
                return f"({args[0]} * {args[0]})"
            if value == 1:
                return args[0]
            return f"({args[0]} ** {_number(value)})"
        if primitive.name == "power":
            return f"({args[0]} ** {args[1]})"
        form = scalar_form(_instruction(primitive, len(args)))
        return form(args)

    # -- statements -------------------------------------------------------------------

    def emit(self, statements, depth: int) -> None:
        pad = "    " * depth
        if not statements:
            self.lines.append(pad + "pass")
        for statement in statements:
            cls = statement.__class__
            if cls is L.Let or cls is L.Assign:
                self.lines.append(f"{pad}{statement.name} = {self.expression(statement.expr)}")
            elif cls is L.Declare:
                self.lines.append(f"{pad}{statement.name} = {self.operand(statement.init)}")
            elif cls is L.Store or cls is L.Update:
                self.lines.append(pad + self.store(statement))
            elif cls is L.If:
                # A chain of ifs in else branches (a concatenation of many operands) is one
                # if/elif chain: Python refuses more than 100 nested blocks.
                keyword = "if"
                while True:
                    self.lines.append(f"{pad}{keyword} {self.condition(statement.conds)}:")
                    self.emit(statement.then, depth + 1)
                    orelse = statement.orelse
                    if len(orelse) == 1 and orelse[0].__class__ is L.If:
                        statement, keyword = orelse[0], "elif"
                        continue
                    if orelse:
                        self.lines.append(f"{pad}else:")
                        self.emit(orelse, depth + 1)
                    break
            elif cls is L.Loop:
                self.lines.append(f"{pad}for {statement.var} in {self.range(statement)}:")
                self.emit(statement.body, depth + 1)
            elif cls is L.Parallel and self.parallel:
                # numba's prange index is unsigned; mixed with signed integers it would make
                # floats of index arithmetic.
                self.lines.append(f"{pad}for {statement.var}_ in numba.prange({self.ix(statement.count)}):")
                self.lines.append(f"{pad}    {statement.var} = np.int64({statement.var}_)")
                self.emit(statement.body, depth + 1)
            elif cls is L.Parallel:
                self.lines.append(f"{pad}for {statement.var} in range({self.ix(statement.count)}):")
                self.emit(statement.body, depth + 1)
            elif cls is L.Block:
                self.emit(statement.body, depth)
            elif cls is L.Matmul:
                self.matmul(statement, pad)
            elif cls is L.Comment:
                self.lines.append(f"{pad}# {safe_comment(statement.text)}")

    def range(self, loop: L.Loop) -> str:
        start = self.bound(loop.starts, "max")
        stop = self.bound(loop.stops, "min")
        if loop.reverse:
            return f"range({stop} - 1, {start} - 1, -1)"
        return f"range({start}, {stop})"

    def bound(self, values, combine: str) -> str:
        texts = [self.ix(v) for v in values]
        return texts[0] if len(texts) == 1 else f"{combine}({', '.join(texts)})"

    def matmul(self, statement: L.Matmul, pad: str) -> None:
        G, M, K, N = statement.shape
        out, a, b = statement.out, statement.a, statement.b
        lines = [f"for mp in range({out.ext or 1}):"]
        for name, buffer in (("ma", a), ("mb", b)):
            row = "0" if buffer.ext is None else ("mp" if buffer.ext == out.ext else f"min(mp, {buffer.ext} - 1)")
            lines.append(f"    {name} = {row} * {G}")
        lines += [
            f"    for mg in range({G}):",
            f"        np.dot({a.name}[(ma + mg) * {M * K}:(ma + mg + 1) * {M * K}].reshape(({M}, {K})),",
            f"               {b.name}[(mb + mg) * {K * N}:(mb + mg + 1) * {K * N}].reshape(({K}, {N})),",
            f"               {out.name}[(mp * {G} + mg) * {M * N}:(mp * {G} + mg + 1) * {M * N}]"
            f".reshape(({M}, {N})))",
        ]
        self.lines.extend(pad + line for line in lines)


def _allocation(buffer: L.Buffer) -> str:
    size = f"{buffer.ext} * {buffer.size}" if buffer.ext else str(buffer.size)
    dtype = "np.bool_" if buffer.dtype == "bool" else "DTYPE"
    if buffer.init is None:
        return f"np.empty({size}, {dtype})"
    if buffer.init == 0:
        return f"np.zeros({size}, {dtype})"
    return f"np.full({size}, {_number(buffer.init)}, {dtype})"


class NumbaLoopsModule(NamedTuple):
    """The numba module of an array program: its source, what to bind as ``EXTERNALS``,
    which outputs are truth values, and the bytes each point of a batch takes."""

    source: str
    externals: list
    output_is_boolean: tuple
    bytes_per_point: int
    program: L.LoopProgram


def numba_loops_module(graph, dtype, name: str = "function") -> NumbaLoopsModule:
    """The numba module of an array program.

    Each kernel's iterations (a point of the batch and a chunk of the kernel's first
    axis) are one small compiled function, ``_k<n>(first, last, ...)``. The program,
    ``_program``, is Python: it allocates the buffers, calls each kernel once over all
    its iterations (or, when there is work enough for threads, :data:`PARALLEL_MIN_WORK`,
    ``_p<n>``: a ``numba.prange`` loop over blocks of them), multiplies the matrices of
    einsums with ``np.matmul`` (BLAS) and combines per-chunk partial results. numba
    compiles each function on its first use (a parallel loop costs it most: only those
    a large evaluation needs are compiled) and caches it on disk.

    Raises :class:`~symad.loopnest.LoopsUnsupported` for a primitive numba cannot
    write here (the caller falls back to numexpr, with a note).
    """
    _check_size(graph)
    program = L.lower_loops(graph, batch=True, name=name, spellable=numba_spellable)
    dtype = np.dtype(dtype)
    externals, notes, literals = _constants(program, dtype)
    functions, driver = _kernels_and_driver(program)
    boolean = program.output_is_boolean
    header = _module_header(program, name, dtype, notes, literals, len(externals))
    source = "\n".join(header + functions + _program_function(program, driver)
                       + _run_function(program, externals)) + "\n"
    # Blocks are sized by the temporaries alone: the inputs are the caller's arrays and the
    # results are written into whole-batch arrays (ArrayEvaluator.evaluate_arrays), so
    # neither shrinks with the block (counting them cut the per-sample MLP gradient's 10^5
    # samples into three blocks, each allocating its 2.6 KB a sample of results afresh).
    per_point = sum(b.size for b in program.temporaries)
    return NumbaLoopsModule(source, [array for _, array in externals], tuple(boolean),
                            max(1, per_point) * dtype.itemsize, program)


def lower_numba_arrays(graph, dtype, name: str = "function") -> ArrayModule:
    """The numba backend's module of an array program (its loop nests, :mod:`symad.loopnest`);
    BackendUnsupported, saying why, when an operation has no loop form here (the pipeline
    then falls back to numexpr through the registry)."""
    if np.dtype(dtype).kind == "c":
        # The loop nests are written for real numbers (their spellings are real C/numba math).
        raise BackendUnsupported("numba backend: complex values have no loop form here")
    try:
        loops = numba_loops_module(graph, dtype, name)
    except L.LoopsUnsupported as reason:
        raise BackendUnsupported(f"numba backend: {reason}") from reason
    return ArrayModule(loops.source, loops.externals, "numba", dtype, "",
                       loops.output_is_boolean, loops.bytes_per_point)


def _check_size(graph) -> None:
    """LoopsUnsupported if the graph would take numba too long to compile."""
    limit = numba_backend.MAX_NUMBA_NODES  # as for scalar graphs: LLVM would take minutes
    if len(graph.nodes) > limit:
        raise L.LoopsUnsupported(f"{len(graph.nodes)} nodes exceed {limit}, too slow to compile")
    # Outputs held element by element (a constant array returned beside the result: one
    # scalar output per element) each get a store in the module; past MAX_NUMBA_ARRAYS
    # numba's compile time runs away as for scalar graphs (1,000 elements: 35 s).
    scalars = sum(1 for atom in graph.outputs if atom_shape(atom) == ())
    if scalars > numba_backend.MAX_NUMBA_ARRAYS:
        raise L.LoopsUnsupported(f"{scalars} scalar outputs exceed {numba_backend.MAX_NUMBA_ARRAYS}"
                                 " (an array returned element by element?), too slow to compile")


def _constants(program, dtype) -> tuple[list, list, list]:
    """The program's constant arrays: ``(name, array)`` externals with their notes, and the
    literal lines of the small ones."""
    externals, notes, literals = [], [], []
    for buffer in program.constants:
        numbers = buffer.data.reshape(-1)
        if numbers.size <= MAX_LITERAL_ELEMENTS:
            if buffer.dtype == "int":
                values = ", ".join(str(int(v)) for v in numbers)
                literals.append(f"{buffer.name} = np.array([{values}], dtype=np.int64)")
            else:
                values = ", ".join(_number(v) for v in numbers.tolist())
                literals.append(f"{buffer.name} = np.array([{values}], dtype=DTYPE)")
        else:
            externals.append((buffer.name, np.ascontiguousarray(
                numbers, dtype=np.int64 if buffer.dtype == "int" else dtype)))
            notes.append(buffer.label)
    return externals, notes, literals


def _kernels_and_driver(program) -> tuple[list, list]:
    """The compiled kernel functions, and the lines of ``_program`` that call them."""
    functions, driver = [], []
    number = 0
    for statement in program.body:
        cls = statement.__class__
        if cls is L.Parallel:
            number += 1
            arguments = _free_names(statement.body)
            functions += _kernel_functions(program, statement, number, arguments)
            driver += _dispatch(statement, number, arguments)
        elif cls is L.Matmul:
            driver += _matmul(statement)
        elif cls is L.Combine:
            driver += _combine(statement)
        elif cls is L.Comment:
            driver.append(f"    # {safe_comment(statement.text)}")
        else:  # pragma: no cover - the lowering puts nothing else outside a kernel
            raise L.LoopsUnsupported(f"no numba form for a {cls.__name__} outside a kernel")
    return functions, driver


def _module_header(program, name: str, dtype, notes: list, literals: list, externals: int) -> list:
    """The module's comments, imports, constants and kernel descriptions."""
    return [
        f"# Generated by symad: the numba loops of array program {safe_comment(name)} ({dtype.name}).",
        "# Standalone: it needs NumPy and numba, not symad. run(*inputs): each input as",
        "# (points,) + its core shape (or (1,) + core when the same at every point), in the order",
        "# of the graph's inputs; a tuple of outputs (points or 1,) + shape back.",
        "import numpy as np",
        "import numba",
        "",
        f"DTYPE = np.{dtype.name}",
        f"EXTERNALS = [None] * {externals}",
        *[f"# EXTERNALS[{k}]: {safe_comment(note)}" for k, note in enumerate(notes)],
        f"OUTPUT_IS_BOOLEAN = {tuple(program.output_is_boolean)!r}",
        "# A kernel runs on threads when its iterations hold this much work (operations",
        "# times elements) in all: a parallel region costs tens of microseconds, and",
        "# milliseconds when another process holds a core.",
        f"PARALLEL_MIN_WORK = {PARALLEL_MIN_WORK}",
        f"WORK_PER_POINT = {sum(space * max(1, operations) for _, space, operations in program.kernels)}",
        "# numba caches machine code next to the module's file; source run with exec() has",
        "# no file, so it compiles uncached.",
        "_CACHE = '__file__' in globals()",
        "",
        *literals,
        "",
        *_kernel_comments(program),
    ]


def _program_function(program, driver: list) -> list:
    """``_program``: the extents, the buffers, the driver's calls, the reshaped outputs."""
    signature = ["threads"] + [f"n{k}" for k in range(len(program.inputs))] + [
        b.name for b in program.inputs] + [b.name for b in program.constants]
    body = [f"    {n} = {f'max({chr(44).join(deps)})' if len(deps) > 1 else (deps[0] if deps else '1')}"
            for n, deps in program.extents]
    body += [f"    {b.name} = {_allocation(b)}" for b in program.temporaries + program.outputs]
    body += driver
    results = [f"{b.name}.reshape(({', '.join([b.ext] + [str(n) for n in b.shape])}{',' if not b.shape else ''}))"
               for b in program.outputs]
    body.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    return ["", "", f"def _program({', '.join(signature)}):", *body]


def _run_function(program, externals: list) -> list:
    """``run(*inputs)``: checks, binds the externals, and picks one thread or many."""
    bound = [f"    {buffer} = EXTERNALS[{k}]" for k, (buffer, _) in enumerate(externals)]
    return [
        "",
        "",
        "def run(*inputs):",
        '    """Evaluate on inputs (points or 1,) + core; a tuple of outputs (points or 1,) + shape."""',
        f"    if len(inputs) != {len(program.inputs)}:",
        f"        raise ValueError(f'expected {len(program.inputs)} inputs, got {{len(inputs)}}')",
        "    if any(external is None for external in EXTERNALS):",
        "        raise RuntimeError('bind every entry of EXTERNALS (listed at the top) before evaluating')",
        *bound,
        "    arrays = [np.ascontiguousarray(x, dtype=DTYPE) for x in inputs]",
        "    points = [x.shape[0] for x in arrays]",
        "    flat = [x.reshape(-1) for x in arrays]",
        f"    arguments = (*points, *flat{''.join(', ' + b.name for b in program.constants)})",
        "    if max(points) * WORK_PER_POINT < PARALLEL_MIN_WORK or numba.get_num_threads() == 1:",
        "        return _program(False, *arguments)",
        "    # Threads take blocks of iterations one at a time: on a busy machine, a thread",
        "    # that loses its core leaves its blocks to the others.",
        "    with numba.parallel_chunksize(1):",
        "        return _program(True, *arguments)",
    ]


def _free_names(statements) -> list:
    """The buffers and runtime extents ``statements`` use but do not define, in order."""
    read: set = set()
    L.names_read(statements, read)
    read |= L.used_buffers(statements)
    defined: set = {"t"}
    _defined_names(statements, defined)
    return sorted(read - defined)


def _defined_names(statements, defined: set) -> None:
    for statement in statements:
        cls = statement.__class__
        if cls is L.Let or cls is L.Declare:
            defined.add(statement.name)
        elif cls is L.Loop:
            defined.add(statement.var)
        for part in ("body", "then", "orelse"):
            inner = getattr(statement, part, None)
            if inner:
                _defined_names(inner, defined)


_DECORATOR = "@numba.njit(cache=_CACHE, nogil=True, error_model='numpy')"


def _kernel_functions(program, statement: L.Parallel, number: int, arguments: list) -> list:
    """``_k<n>``: iterations ``first`` to ``last`` of a kernel; ``_p<n>``: all of them,
    blocks of at least CHUNK elements shared by the threads."""
    printer = _Printer(program, parallel=False)
    printer.emit(statement.body, 2)
    rest = "".join(", " + a for a in arguments)
    group = max(1, L.CHUNK_ELEMENTS // statement.elements)
    blocks, first, last = "count", "np.int64(block)", "first + 1"  # prange's index is unsigned
    if group > 1:
        blocks, first, last = (f"(count + {group - 1}) // {group}", f"np.int64(block) * {group}",
                               f"min(count, first + {group})")
    return ["", "", _DECORATOR, f"def _k{number}(first, last{rest}):",
            f"    for {statement.var} in range(first, last):", *printer.lines,
            "", "", _DECORATOR.replace("njit(", "njit(parallel=True, "), f"def _p{number}(count{rest}):",
            f"    for block in numba.prange({blocks}):",
            f"        first = {first}",
            f"        _k{number}(first, {last}{rest})"]


def _dispatch(statement: L.Parallel, number: int, arguments: list) -> list:
    """The program's call of kernel ``number``: on threads when it has work enough."""
    rest = "".join(", " + a for a in arguments)
    count = _Printer(None, False).ix(statement.count)
    return [f"    count = {count}",
            f"    if threads and count * {statement.elements * statement.operations} >= PARALLEL_MIN_WORK:",
            f"        _p{number}(count{rest})",
            "    else:",
            f"        _k{number}(0, count{rest})"]


def _matmul(statement: L.Matmul) -> list:
    """A batch of matrix products with NumPy (BLAS); the points broadcast (1 against many)."""
    G, M, K, N = statement.shape
    out = statement.out
    return [f"    np.matmul({_view(*statement.a)}, {_view(*statement.b)}, "
            f"out={out.name}.reshape(({out.ext}, {G}, {M}, {N})))"]


def _view(buffer: L.Buffer, views: list) -> str:
    """``buffer`` (with its points in front) after reshape/transpose/broadcast nodes, as
    NumPy views (a reshape copies only where the memory does not allow a view)."""
    points = buffer.ext or "1"

    def shaped(shape):
        return f"({', '.join([points] + [str(n) for n in shape])}{',' if not shape else ''})"

    text = f"{buffer.name}.reshape({shaped(buffer.shape)})"
    for node in views:
        params = dict(node.params)
        if node.primitive is A.reshape_p:
            text = f"{text}.reshape({shaped(node.shape)})"
        elif node.primitive is A.transpose_p:
            perm = params["perm"]
            lead = len(node.shape) - len(perm)
            axes = (0,) + tuple(range(1, 1 + lead)) + tuple(1 + lead + p for p in perm)
            text = f"np.transpose({text}, {axes})"
        else:  # broadcast_to: the core's missing axes put in front of it, then repeated
            lead = node.shape[: len(node.shape) - len(params["shape"])]
            aligned = lead + (1,) * (len(params["shape"]) - len(params["in_shape"])) + params["in_shape"]
            text = f"np.broadcast_to({text}.reshape({shaped(aligned)}), {shaped(node.shape)})"
    return text


def _combine(statement: L.Combine) -> list:
    """Per-chunk partial results combined along the chunks, in order (NaN kept by max/min)."""
    reduction = {"add": "np.sum", "reduce_max": "np.max", "reduce_min": "np.min"}[statement.primitive.name]
    out, partial = statement.out, statement.partial
    return [f"    {reduction}({partial.name}.reshape(({partial.ext}, {statement.chunks}, {out.size})), "
            f"axis=1, out={out.name}.reshape(({out.ext}, {out.size})))"]


def _kernel_comments(program) -> list:
    lines = ["# Kernels (one loop nest each, in order):"]
    for description, _, _ in program.kernels:
        lines.append(f"#   {safe_comment(description)}")
    return lines
