"""Lowering to numba: the whole program as one parallel loop over the batch.

Every node becomes one scalar statement inside one loop over the batch
(``numba.prange`` over chunks of ``CHUNK`` points, a plain loop inside each;
threads take the chunks one at a time), so no temporary array exists at all:
memory is exactly inputs + outputs, and both cores share the loop. The kernel is compiled with ``cache=True`` from a
file under :func:`symad.compile.evaluator.cache_directory`, so the machine
code is reused by later sessions (the first compile takes a second or more).

Graphs numba cannot take as a whole raise :class:`~symad.compile.registry.BackendUnsupported`
saying why, and the pipeline falls back to the numexpr module through the registry
(:mod:`symad.compile.registry`); the evaluator's ``note`` gives the reason: a primitive with no scalar spelling here
(logsumexp, custom primitives), an operation on more than
``MAX_NUMBA_OPERANDS`` operands, or a graph past ``MAX_NUMBA_NODES`` nodes,
which LLVM would take minutes to compile.
"""

from __future__ import annotations

from symad.compile.modules import GeneratedModule
from symad.compile.registry import BackendUnsupported
from symad.compile.scalar.program import Constant, Instruction, compile_program
from symad.compile.scalar.source import RUN, literal, module_header
from symad.ir.primitive import spell

__all__ = ["lower_numba", "scalar_form", "MAX_NUMBA_NODES", "MAX_NUMBA_OPERANDS",
           "MAX_NUMBA_ARRAYS"]

#: Larger graphs are evaluated with numexpr instead (LLVM time grows faster than linearly).
MAX_NUMBA_NODES = 2_000
#: So are graphs whose loop reads and writes more arrays (inputs and outputs) than this:
#: LLVM's time grows with the pairs of arrays one loop touches. Measured on the 2-core
#: machine: the 633-node 20th derivative of tanh(x) erf(x), 2 arrays, compiled in 3 s; the
#: 804-node gradient of an 8-32-1 MLP's loss (330 inputs, 321 outputs) in 47-52 s. Split
#: into kernels of 100 nodes (about 90 arrays each) it took 2-3 s per kernel, and called
#: from one parallel loop numba links them into it and compiles them all again (34-261 s).
MAX_NUMBA_ARRAYS = 128
#: So are graphs with an operation on more operands than this: numba's type inference
#: follows a long sum one term at a time and overflows the recursion limit (measured:
#: 700 terms compile, 1,000 do not), and a reduction spelled as nested calls meets
#: Python's limit of 200 nested parentheses.
MAX_NUMBA_OPERANDS = 128
#: Points per task of the parallel loop.
CHUNK = 4096


def scalar_form(instruction: Instruction):
    """``format(args) -> text`` of one element of this instruction in numba, or None.

    >>> from symad.compile.scalar.program import Instruction
    >>> from symad.primitives import select_p, erf_p
    >>> scalar_form(Instruction(3, select_p, (0, 1, 2), (), False))(["s0", "s1", "s2"])
    '(s1 if s0 else s2)'
    >>> scalar_form(Instruction(1, erf_p, (0,), (), False))(["s0"])
    'math.erf(s0)'
    """
    form = instruction.primitive.spelling("numba")
    if instruction.params or form is None:
        return None
    return lambda args: spell(form, args)


def _scalar_operand(operand) -> str:
    return literal(operand.value) if isinstance(operand, Constant) else f"s{operand}"


_NUMBA_DRIVER = '''

# LLVM vectorizes the loop one vector of points at a time; for a long body (the
# logistic map's gradient is 67 dependent steps) the core then waits on each
# step's latency. With four independent vectors in flight per iteration (the
# same operations in the same order for every point, so the same rounding) the
# logistic-map gradient ran 27 % faster. LLVM takes this only as a process-wide
# option: it is set while numba compiles this module's kernel (the first call
# with a new layout of arguments; a kernel loaded from numba's cache is not
# recompiled) and put back to LLVM's default, 0 (the vectorizer's own choice),
# after. Other numba code compiling in another thread meanwhile gets the option
# too (the same results, other machine code), and a value set by the user is
# reset to the default.
INTERLEAVE = 4
_COMPILED_LAYOUTS = set()
# One lock for every symad numba module in the process (kept on llvmlite's module, as
# the option it guards is process-wide): two kernels compiling in two threads must
# not reset the option under each other.
_COMPILE_LOCK = _llvm.__dict__.setdefault("_symad_interleave_lock", threading.Lock())
# Points per kernel call when evaluate() reports progress.
PROGRESS_POINTS = 1 << 20


def _layout(array):
    return (array.flags.c_contiguous, array.flags.writeable, array.flags.aligned)


def _arrays(inputs, n):
    return [x if x.ndim else np.broadcast_to(x, (n,)) for x in inputs]


def compile_kernel(inputs, outputs, n):
    """Compile the kernel for the layouts of these arguments, unless done already (numba
    loads the machine code from its cache when it has it). True if it compiled (or loaded)."""
    arrays = _arrays(inputs, n)
    layouts = tuple(_layout(a) for a in (*arrays, *outputs))
    if layouts in _COMPILED_LAYOUTS:
        return False
    with _COMPILE_LOCK:
        if layouts in _COMPILED_LAYOUTS:
            return False
        _llvm.set_option("", f"-force-vector-interleave={INTERLEAVE}")
        try:
            _kernel(*arrays, *outputs, 0, 0)  # on no points: it compiles for these types
        finally:
            _llvm.set_option("", "-force-vector-interleave=0")
        _COMPILED_LAYOUTS.add(layouts)
    return True


def evaluate(inputs, outputs, n, block_size=BLOCK_SIZE, threads=None, progress=None):
    """Fill ``outputs`` (1-D, length n) from ``inputs`` (1-D of length n, or 0-d): one parallel
    loop (``threads``: set by the caller with numba.set_num_threads; ``progress``, if given,
    is called with the points of each slice of PROGRESS_POINTS done)."""
    if len(inputs) != INPUT_COUNT:
        raise ValueError(f"expected {INPUT_COUNT} inputs, got {len(inputs)}")
    compile_kernel(inputs, outputs, n)
    arrays = _arrays(inputs, n)
    # Threads take chunks one at a time rather than an equal share each: on a busy
    # machine a thread that loses its core leaves its chunks to the others.
    with numba.parallel_chunksize(1):
        if progress is None:
            _kernel(*arrays, *outputs, 0, n)
        else:
            for first in range(0, n, PROGRESS_POINTS):
                last = min(first + PROGRESS_POINTS, n)
                _kernel(*arrays, *outputs, first, last)
                progress(last - first)
    return outputs
'''


def lower_numba(graph, dtype, name: str = "function") -> GeneratedModule:
    """The numba module of ``graph``; BackendUnsupported (saying why) when numba can't take it.

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import logsumexp_p
    >>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
    >>> graph = builder.finish([builder.record(logsumexp_p, (x, sympy.Integer(2)))])
    >>> lower_numba(graph, "float64")
    Traceback (most recent call last):
    ...
    symad.compile.registry.BackendUnsupported: numba backend: no scalar form for logsumexp
    """
    program = compile_program(graph, lambda instruction: False, name)
    forms = [scalar_form(instruction) for instruction in program.instructions]
    missing = sorted({ins.primitive.name for ins, form in zip(program.instructions, forms)
                      if form is None})
    reason = ""
    if missing:
        reason = f"numba backend: no scalar form for {', '.join(missing)}"
    elif max((len(ins.operands) for ins in program.instructions), default=0) > MAX_NUMBA_OPERANDS:
        widest = max(program.instructions, key=lambda ins: len(ins.operands))
        reason = (f"numba backend: {widest.primitive.name} of {len(widest.operands)} operands "
                  f"exceeds {MAX_NUMBA_OPERANDS}")
    elif len(program.instructions) > MAX_NUMBA_NODES:
        reason = (f"numba backend: {len(program.instructions)} nodes exceed {MAX_NUMBA_NODES}, "
                  "too slow to compile")
    elif program.input_count + len(program.outputs) > MAX_NUMBA_ARRAYS:
        reason = (f"numba backend: {program.input_count} inputs and {len(program.outputs)} outputs "
                  f"exceed {MAX_NUMBA_ARRAYS} arrays in one loop, too slow to compile")
    if reason:
        raise BackendUnsupported(reason)

    body = _one_kernel(program, forms)
    header = module_header(
        program, "numba", dtype, ["import math", "", "import llvmlite.binding as _llvm", "import numba"],
        [], [], 1 << 20,
    )
    preamble = [
        f"CHUNK = {CHUNK}",
        "",
        "",
        "# numba caches machine code next to the module's file; source run with exec() has",
        "# no file (numba would fail with 'no locator available'), so it compiles uncached.",
        "_CACHE = '__file__' in globals()",
        "",
    ]
    source = "\n".join(header + ["", ""] + preamble + body) + "\n" + _NUMBA_DRIVER + RUN
    return GeneratedModule(source, [], "numba", dtype, 1 << 20, program)


def _one_kernel(program, forms) -> list[str]:
    """The whole program as the body of one parallel loop."""
    inputs = [f"v{i}" for i in range(program.input_count)]
    outputs = [f"o{i}" for i in range(len(program.outputs))]
    # prange over chunks of the batch, a plain loop inside each: LLVM vectorizes the
    # inner loop, which it did not do for a prange over single points (measured
    # 1.5-3x slower per thread on the logistic-map gradient).
    body = [
        "@numba.njit(parallel=True, cache=_CACHE, nogil=True, error_model='numpy')",
        f"def _kernel({', '.join(inputs + outputs + ['first', 'last'])}):",
        "    for chunk in numba.prange((last - first + CHUNK - 1) // CHUNK):",
        "        start = first + chunk * CHUNK",
        "        for i in range(start, min(start + CHUNK, last)):",
    ]
    indent = " " * 12
    body += [f"{indent}s{k} = v{k}[i]" for k in range(program.input_count)]
    for instruction, form in zip(program.instructions, forms):
        args = [_scalar_operand(o) for o in instruction.operands]
        body.append(f"{indent}s{instruction.result} = {form(args)}")
    for position, operand in enumerate(program.outputs):
        body.append(f"{indent}o{position}[i] = {_scalar_operand(operand)}")
    if not program.outputs:
        body.append(f"{indent}pass")
    return body


