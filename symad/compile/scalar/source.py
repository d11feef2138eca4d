"""Pieces shared by every lowering to Python source text.

Each backend writes one standalone Python module; this file holds what all
of them share: number literals, the NumPy spelling of each primitive, the
module header and the blocked driver (``evaluate`` and ``run``).

Safety rule for generated code: identifiers are symad's own (``v0``, ``b1``,
``o2``, ``_E3``), numbers are printed with ``repr(float)``, and the only text
that comes from a user -- function and symbol names -- appears in ``#``
comments with newlines and control characters removed. Nothing a user passes
in is ever executed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from symad.compile.modules import SCIPY_IMPORTS
from symad.compile.scalar.program import Constant, Instruction, Program, safe_comment, safe_comments
from symad.ir.primitive import PRIMITIVES, spell
from symad.lazy_scipy import is_scipy_special

__all__ = ["STANDARD_IMPORTS", "literal", "numpy_spelling", "module_header", "DRIVER", "RUN", "WORKING_SET_BYTES", "block_size_for",
           "SPECIAL_NUMPY_FORMS"]

#: The working set the blocked driver aims for: every live temporary of a block
#: together. Blocks are large rather than cache-sized because numexpr pays a
#: thread synchronisation per call (measured 20-140 us on a busy 2-core machine),
#: so fewer, longer calls win; the bound still holds whatever the graph size.
WORKING_SET_BYTES = 64 << 20
MIN_BLOCK, MAX_BLOCK = 1 << 12, 1 << 18


def block_size_for(temporaries: int, itemsize: int) -> int:
    """The batch block (a power of two) that keeps ``temporaries`` arrays within the working set.

    >>> block_size_for(4, 8), block_size_for(10_000, 8)
    (262144, 4096)
    """
    per_element = max(1, temporaries) * itemsize
    block = MAX_BLOCK
    while block > MIN_BLOCK and block * per_element > WORKING_SET_BYTES:
        block //= 2
    return block


def literal(value) -> str:
    """Python source for a constant: ``repr(float)``, or ``float("inf")`` and friends
    (a complex number: ``complex(re, im)``).

    >>> literal(0.1), literal(2.0), literal(True), literal(-math.inf)
    ('0.1', '2.0', 'True', '(-float("inf"))')
    """
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (complex, np.complexfloating)):
        return f"complex({literal(value.real)}, {literal(value.imag)})"
    number = float(value)
    if math.isnan(number):
        return 'float("nan")'
    if math.isinf(number):
        return 'float("inf")' if number > 0 else '(-float("inf"))'
    text = repr(number)
    return f"({text})" if number < 0 else text


def operand_text(operand, spelt: dict | None = None) -> str:
    """A materialized operand's source: a literal, ``spelt[n]`` if given there, else ``v{n}``."""
    if isinstance(operand, Constant):
        return literal(operand.value)
    return (spelt and spelt.get(operand)) or f"v{operand}"


# ---------------------------------------------------------------------------
# NumPy spellings: read from each primitive's stanza
# ---------------------------------------------------------------------------


def numpy_spelling(instruction: Instruction):
    """``format(args) -> source`` for this instruction in NumPy/SciPy, or None (use EXTERNALS).

    >>> from symad.compile.scalar.program import Instruction
    >>> from symad.primitives import erf_p
    >>> numpy_spelling(Instruction(1, erf_p, (0,), (), False))(["v0"])
    'special.erf(v0)'

    The primitive's stanza spells it (its ``"numpy"`` spelling), or else its
    ``numpy_name`` names exactly its ``numpy_impl`` in ``numpy`` or
    ``scipy.special``, so a spelling can never disagree with the implementation
    the NumPy evaluation has always used.
    """
    primitive = instruction.primitive
    if instruction.params:
        return None
    form = primitive.spelling("numpy")
    if form is not None:
        return lambda args: spell(form, args)
    name = primitive.numpy_name
    if name and name.isidentifier():
        if getattr(np, name, None) is primitive.numpy_impl:
            return lambda args, name=name: f"np.{name}({', '.join(args)})"
        if is_scipy_special(primitive.numpy_impl, name):
            return lambda args, name=name: f"special.{name}({', '.join(args)})"
    return None


def _special_numpy_forms() -> dict:
    return {name: primitive.spelling("numpy") for name, primitive in PRIMITIVES.items()
            if primitive.spelling("numpy") is not None}


#: The built-in primitives whose NumPy form is not ``np.<numpy_name>(...)``, by name (a view
#: of their stanzas' ``"numpy"`` spellings).
SPECIAL_NUMPY_FORMS = _special_numpy_forms()


# ---------------------------------------------------------------------------
# The module skeleton
# ---------------------------------------------------------------------------


def boolean_tuple_source(values: Sequence[bool]) -> str:
    """A Python expression for the tuple of truth values ``values``, short at any length.

    A literal of 10^5 ``False``s is 700 kB that Python's compiler parses into
    10^5 nodes (140 ms of loading a gradient over 10^5 elements); the common
    case, one value throughout, is written as a repetition, any other as bytes.

    >>> boolean_tuple_source([False] * 3), boolean_tuple_source([]), boolean_tuple_source([True, False])
    ('(False,) * 3', '()', "tuple(map(bool, bytes.fromhex('0100')))")
    >>> eval(boolean_tuple_source([True, False]))
    (True, False)
    """
    values = [bool(value) for value in values]
    if not values:
        return "()"
    if all(value == values[0] for value in values):
        return f"({values[0]},) * {len(values)}"
    return f"tuple(map(bool, bytes.fromhex({bytes(values).hex()!r})))"


#: The imports at the top of every generated module, scalar or array: whatever a spelling
#: or symad.array_runtime may call (the add primitive's NumPy spelling,
#: ``symad.primitives.python_sum``, needs functools and operator past
#: ``MAX_INFIX_TERMS`` terms, whichever pipeline generated the sum).
STANDARD_IMPORTS = (
    "import functools",
    "import math",
    "import operator",
    "import threading",
    "",
    "import numpy as np",
    *SCIPY_IMPORTS,
)


def module_header(program: Program, backend: str, dtype, imports: Sequence[str],
                  buffer_is_boolean: Sequence[bool], externals: Sequence[str],
                  block_size: int) -> list[str]:
    """The top of a generated module: provenance comments, imports and constants."""
    dtype_name = np.dtype(dtype).name
    lines = [
        f"# Generated by symad: the {backend} evaluator of {safe_comment(program.name)!s} ({dtype_name}).",
        "# Standalone: it needs NumPy, SciPy" + (" and numexpr" if backend == "numexpr" else "")
        + ", not symad.",
        "# run(*arrays) evaluates on broadcastable arrays, one per input, and returns a tuple;",
        "# evaluate(inputs, outputs, n) fills 1-D outputs of length n from 1-D (or 0-d) inputs,",
        "# in blocks of BLOCK_SIZE points so memory stays near inputs + outputs.",
        *STANDARD_IMPORTS,
        *imports,
        "",
        f"DTYPE = np.{dtype_name}",
        f"INPUT_COUNT = {program.input_count}",
        f"OUTPUT_IS_BOOLEAN = {boolean_tuple_source(program.outputs_are_boolean())}",
        f"BUFFER_IS_BOOLEAN = {boolean_tuple_source(buffer_is_boolean)}",
        f"BLOCK_SIZE = {int(block_size)}",
        "# Operations this module cannot spell itself: the caller binds them before use.",
        f"EXTERNALS = [None] * {len(externals)}",
    ]
    for index, description in enumerate(externals):
        lines.append(f"#   EXTERNALS[{index}]: {safe_comment(description)}")
    lines.append("# Inputs:")
    lines.extend(f"#   v{index}: {name}" for index, name in enumerate(safe_comments(program.input_names)))
    lines.append("")
    return lines


BLOCKED_EVALUATE = '''

# Batches shorter than this read strided columns in place rather than staging them.
STAGE_MIN_POINTS = 256
# Threads share a batch only if each gets this many points, in blocks at least as large
# (unless block_size asks for smaller ones).
PARALLEL_MIN_BLOCK = 4096


def evaluate(inputs, outputs, n, block_size=BLOCK_SIZE, threads=1, progress=None):
    """Fill ``outputs`` (1-D, length n) from ``inputs`` (1-D of length n, or 0-d), block by block.

    ``threads`` Python threads share the blocks, each taking the next block when it is
    done with one (NumPy and numexpr release the GIL while they compute); ``progress``,
    if given, is called with the number of points of each block finished.
    """
    if len(inputs) != INPUT_COUNT:
        raise ValueError(f"expected {INPUT_COUNT} inputs, got {len(inputs)}")
    if any(external is None for external in EXTERNALS):
        raise RuntimeError("bind every entry of EXTERNALS (listed at the top) before evaluating")
    block_size = max(1, min(int(block_size), n))
    workers = max(1, min(int(threads), n // PARALLEL_MIN_BLOCK))  # a thread pays off past that
    if workers > 1:
        # Each thread has its own buffers: together they keep to one thread's working set,
        # and each gets about four blocks, so one that loses its core to another process
        # leaves its blocks to the others instead of making the call wait for it.
        block_size = max(min(block_size, PARALLEL_MIN_BLOCK),
                         min(block_size // workers, -(-n // (4 * workers))))
        workers = min(workers, -(-n // block_size))
    starts = iter(range(0, n, block_size))
    taking = threading.Lock()
    failures = []

    def next_start():
        with taking:
            return None if failures else next(starts, None)

    def work():
        programs = _take_programs()
        try:
            _evaluate_blocks(inputs, outputs, n, block_size, next_start, programs, progress)
        except BaseException as error:  # the caller re-raises it; the other threads stop
            failures.append(error)
        finally:
            _FREE_PROGRAMS.append(programs)

    helpers = [threading.Thread(target=work, daemon=True) for _ in range(workers - 1)]
    for helper in helpers:
        helper.start()
    work()
    for helper in helpers:
        helper.join()
    if failures:
        raise failures[0]
    return outputs


def _take_programs():
    """Programs for one thread: a numexpr program keeps its registers in itself, so two
    threads never run the same one at once (assembled again when none is free)."""
    try:
        return _FREE_PROGRAMS.pop()
    except IndexError:
        return _programs()


def _evaluate_blocks(inputs, outputs, n, block_size, next_start, programs, progress):
    """Evaluate the blocks starting at ``next_start()`` until it says None, with this
    thread's buffers."""
    buffers = [np.empty(block_size, np.bool_ if b else DTYPE) for b in BUFFER_IS_BOOLEAN]
    # Strided columns (one coordinate of a batch of vectors) are copied through a
    # contiguous block, once per block, instead of being gathered by every step;
    # a short batch is read in place (a gradient over 10^4 elements at one point
    # would otherwise stage 10^4 columns of one number).
    stage = n >= STAGE_MIN_POINTS
    staged_in = [np.empty(block_size, x.dtype) if stage and x.ndim and x.strides[0] != x.itemsize
                 else None for x in inputs]
    staged_out = [np.empty(block_size, o.dtype) if stage and o.strides[0] != o.itemsize else None
                  for o in outputs]
    with np.errstate(all="ignore"):  # like JAX: inf and nan propagate silently
        start = next_start()
        while start is not None:
            stop = min(start + block_size, n)
            _stage(inputs, staged_in, start, stop, into_stage=True)
            block_in = [(x[start:stop] if x.ndim else x) if staged is None else staged[:stop - start]
                        for x, staged in zip(inputs, staged_in)]
            block_out = [o[start:stop] if staged is None else staged[:stop - start]
                         for o, staged in zip(outputs, staged_out)]
            evaluate_block(block_in, block_out, [b[:stop - start] for b in buffers], programs)
            _stage(outputs, staged_out, start, stop, into_stage=False)
            if progress is not None:
                progress(stop - start)
            start = next_start()


def _stage(arrays, staged, start, stop, into_stage, step=4096):
    """Copy strided columns to (or from) their contiguous blocks, a few thousand rows at a
    time, so the columns of one batch of vectors are copied while its rows are in cache."""
    pairs = [(a, s) for a, s in zip(arrays, staged) if s is not None]
    for first in range(start, stop, step) if pairs else ():
        last = min(first + step, stop)
        for a, s in pairs:
            if into_stage:
                s[first - start:last - start] = a[first:last]
            else:
                a[first:last] = s[first - start:last - start]
'''

RUN = '''

def run(*arrays):
    """Evaluate on broadcastable arrays, one per input; a tuple of arrays of the broadcast shape."""
    arrays = [np.asarray(a, dtype=DTYPE) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
    n = 1
    for extent in shape:
        n *= extent
    flat = []
    for a in arrays:
        if a.size == 1 and n != 1:
            flat.append(a.reshape(()))
        else:
            flat.append(np.broadcast_to(a, shape).reshape(-1))
    outputs = [np.empty(n, np.bool_ if b else DTYPE) for b in OUTPUT_IS_BOOLEAN]
    evaluate(flat, outputs, n)
    return tuple(o.reshape(shape) for o in outputs)
'''

#: The driver of backends that evaluate block by block: ``evaluate`` and ``run``.
DRIVER = BLOCKED_EVALUATE + RUN


def output_lines(program: Program, computed_into: dict[int, int], indent: str = "    ") -> list[str]:
    """Fill every output slot that no step wrote directly: constants, inputs, repeated values."""
    lines = []
    for position, operand in enumerate(program.outputs):
        if isinstance(operand, int) and computed_into.get(operand) == position:
            continue
        if isinstance(operand, int) and operand in computed_into:
            lines.append(f"{indent}o{position}[...] = o{computed_into[operand]}")
        else:
            lines.append(f"{indent}o{position}[...] = {operand_text(operand)}")
    return lines


def first_output_positions(program: Program) -> dict[int, int]:
    """For each computed value that is an output: the first output slot holding it."""
    inputs = set(range(program.input_count))
    positions: dict[int, int] = {}
    for position, operand in enumerate(program.outputs):
        if isinstance(operand, int) and operand not in inputs:
            positions.setdefault(operand, position)
    return positions
