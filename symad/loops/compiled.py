"""Loops iterated inside compiled code: the body's scalar kernel in a C or numba ``for`` loop.

For a body of scalars (every carry leaf, slice, const and ``y`` a scalar, no array
node), or a small body of arrays (at most :data:`MAX_KERNEL_ELEMENTS` elements in all,
expanded into one scalar per element: a Lorenz system's state vector), the body's
program is lowered by the scalar compiler's passes
(:func:`symad.compile.scalar.program.compile_program`) and spelled one statement per
instruction; around those statements go a loop over the steps, holding the carry in
local variables, and a loop over the points of the batch. Python then runs once per
loop, not once per step: the pendulum's 10^4 Euler steps and their gradient take tens of
microseconds.

Where the machine has a C compiler the kernel is C (:func:`loop_kernel_c_source`: each
statement the primitive's ``"c"`` spelling, as ``F.to_c`` writes it), built by
:func:`symad.compile.scalar.tape_c.build_library` and called through ctypes: the
pendulum's 10^4-step gradient (two kernels) is ready in 0.31 s, where numba's import and
compiles took 0.94 s on the same quiet machine (2026-11-29). Else it
is numba's (:func:`loop_kernel_source`, the numba backend's scalar forms), whose machine
code numba keeps beside the module (``cache=True``). Either is kept under symad's cache
directory, so another process loads it (``SYMAD_CACHE=0``: built, not kept). A larger
body of arrays runs, where there is a C compiler, in a C kernel that calls the body's own
C function (:func:`loop_body_c_source`: ``F.to_c``'s loop nests) once per step. A
while_loop's kernel (:func:`compiled_while`) steps each point until its condition fails,
returning to Python every :data:`WHILE_STEPS_PER_CALL` steps. Where neither takes the body,
:func:`run_compiled` returns None and the loop runs one call of the body's NumPy evaluator
per step (:mod:`symad.loops.evaluation`).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from symad.loops.spec import pack_results

__all__ = ["run_compiled", "compiled_window", "compiled_while", "WHILE_STEPS_PER_CALL",
           "loop_kernel_source", "loop_kernel_c_source", "loop_body_c_source",
           "MAX_BODY_INSTRUCTIONS", "MAX_KERNEL_ELEMENTS", "slots"]

#: Bodies of more instructions than this run step by step in NumPy (LLVM's time grows
#: faster than linearly with the statements of one function).
MAX_BODY_INSTRUCTIONS = 2_000

_UNSUPPORTED = object()
_LOG = logging.getLogger(__name__)


#: A body of arrays of at most this many elements in all (carry, slices, consts and ys
#: together) runs in a kernel too, expanded into one scalar per element: a state vector
#: (a Lorenz system's three coordinates, a small ODE system's) stays in local variables.
MAX_KERNEL_ELEMENTS = 256


def slots(spec) -> tuple[int, int, int, int]:
    """The kernel's scalar slots: the elements of the carry, of one step's slices, of the
    consts and of one step's ys (each leaf row-major, leaf after leaf)."""
    return tuple(sum(math.prod(shape) for shape in shapes) for shapes in (
        spec.carry_shapes, spec.x_shapes, spec.const_shapes, spec.y_shapes))


def _scalar_graph(spec):
    """The body's graph of scalars: itself for a body of scalars, its expansion into one
    scalar per element for a small body of arrays; None for a larger one."""
    shapes = spec.carry_shapes + spec.x_shapes + spec.const_shapes + spec.y_shapes
    if all(shape == () for shape in shapes) and not spec.body.is_array_program:
        return spec.body.graph
    if sum(slots(spec)) > MAX_KERNEL_ELEMENTS:
        return None
    from symad.errors import ExportError

    try:
        return spec.body.expand().graph
    except ExportError:  # a primitive with no per-element form (a factorisation, a loop)
        return None


def _scalar_program(spec):
    """The body's program of scalars (the scalar compiler's), or None where the loop's body
    is not one a kernel runs (array leaves too many to expand, too many instructions)."""
    from symad.compile.scalar.program import compile_program

    graph = _scalar_graph(spec)
    if graph is None:
        return None
    n_carry, n_x, n_q, n_y = slots(spec)
    n_y += spec.kind == "while_loop"  # a while loop's body returns its condition last
    program = compile_program(graph, lambda instruction: False, spec.name)
    if (len(program.instructions) > MAX_BODY_INSTRUCTIONS
            or program.input_count != 1 + n_carry + n_x + n_q
            or len(program.outputs) != n_carry + n_y):
        return None
    return program


def loop_kernel_source(spec) -> str | None:
    """The numba module of the loop's kernel, or None if the body is not a program of scalars
    numba can spell.

    >>> import numpy as np, symad as sd
    >>> F = sd.trace(lambda a: sd.fori_loop(0, 3, lambda i, c: c * a + i, 1.0), 2.0)
    >>> spec = next(dict(n.params)["loop"] for n in F.graph.nodes if n.primitive.name == "loop")
    >>> print("\\n".join(loop_kernel_source(spec).splitlines()[-10:-2]))
            for j in range(n):
                k = (n - 1 - j) if reverse else j
                s0 = lower + k
                s1 = a0
                s2 = q0
                s3 = (s1 * s2)
                s4 = (s0 + s3)
                a0 = s4
    """
    from symad.compile.scalar.numba_backend import scalar_form

    program = _scalar_program(spec)
    if program is None:
        return None
    forms = [scalar_form(instruction) for instruction in program.instructions]
    if any(form is None for form in forms):
        return None
    n_carry, n_x, n_q, _ = slots(spec)
    inner = " " * 12
    lines = [
        "import math", "", "import numpy as np", "import numba", "from scipy import special", "",
        "EXTERNALS = []",
        "# numba keeps machine code beside the module's file; run with exec() it has none.",
        "_CACHE = '__file__' in globals()",
        "",
        "",
        "@numba.njit(cache=_CACHE, nogil=True, error_model='numpy')",
        "def loop(carry, xs, consts, out_carry, out_y, lower, n, reverse):",
        "    for p in range(carry.shape[1]):",
    ]
    lines += [f"        a{i} = carry[{i}, p]" for i in range(n_carry)]
    lines += [f"        q{i} = consts[{i}, p]" for i in range(n_q)]
    lines += ["        running = 1.0", "        for j in range(n):",
              f"{inner}k = (n - 1 - j) if reverse else j", f"{inner}s0 = lower + k"]
    sources = ([f"a{i}" for i in range(n_carry)] + [f"xs[{i}, p, k]" for i in range(n_x)]
               + [f"q{i}" for i in range(n_q)])
    lines += [f"{inner}s{position + 1} = {source}" for position, source in enumerate(sources)]
    for instruction, form in zip(program.instructions, forms):
        lines.append(f"{inner}s{instruction.result} = {form([_operand(o) for o in instruction.operands])}")
    outputs = [_operand(o) for o in program.outputs]
    if spec.kind == "while_loop":  # the condition on the carry the step was given
        lines += [f"{inner}if not ({outputs[n_carry]} != 0.0):", f"{inner}    running = 0.0",
                  f"{inner}    break"]
    else:
        lines += [f"{inner}out_y[{i}, p, k] = {text}" for i, text in enumerate(outputs[n_carry:])]
    if n_carry:  # every new carry is read before any is written
        lines.append(f"{inner}{', '.join(f'a{i}' for i in range(n_carry))} = "
                     f"{', '.join(outputs[:n_carry])}")
    lines += [f"        out_carry[{i}, p] = a{i}" for i in range(n_carry)]
    if spec.kind == "while_loop":
        lines.append("        out_y[0, p, 0] = running")
    lines.append("    return 0")
    return "\n".join(lines) + "\n"


def _operand(operand) -> str:
    from symad.compile.scalar.program import Constant
    from symad.compile.scalar.source import literal

    return literal(operand.value) if isinstance(operand, Constant) else f"s{operand}"


def loop_kernel_c_source(spec) -> str | None:
    """The C translation unit of the loop's kernel (``symad_loop``), or None if the body is
    not a program of scalars whose every primitive has a C spelling.

    >>> import numpy as np, symad as sd
    >>> F = sd.trace(lambda a: sd.fori_loop(0, 3, lambda i, c: c * a + i, 1.0), 2.0)
    >>> spec = next(dict(n.params)["loop"] for n in F.graph.nodes if n.primitive.name == "loop")
    >>> print("\\n".join(loop_kernel_c_source(spec).splitlines()[-10:-5]))
                const double s1 = a0;
                const double s2 = q0;
                const double s3 = s1 * s2;
                const double s4 = s0 + s3;
                a0 = s4;
    """
    from symad.compile.scalar.program import Constant
    from symad.export.c import c_number, c_operation, c_spellable

    program = _scalar_program(spec)
    if program is None or not all(c_spellable(i.primitive) and not i.params
                                   for i in program.instructions):
        return None
    n_carry, n_x, n_q, _ = slots(spec)

    def operand(o):
        return c_number(o.value) if isinstance(o, Constant) else f"s{o}"

    helpers: set = set()
    body = [f"const double s{position + 1} = {source};" for position, source in enumerate(
        [f"a{i}" for i in range(n_carry)] + [f"xs[((int64_t){i} * points + p) * n + k]" for i in range(n_x)]
        + [f"q{i}" for i in range(n_q)])]
    for instruction in program.instructions:
        constants = [o.value if isinstance(o, Constant) else None for o in instruction.operands]
        text = c_operation(instruction.primitive, [operand(o) for o in instruction.operands],
                           constants, spec.name, helpers)
        body.append(f"const double s{instruction.result} = {text};")
    outputs = [operand(o) for o in program.outputs]
    if spec.kind == "while_loop":  # the condition on the carry the step was given
        body.append(f"if (!({outputs[n_carry]} != 0.0)) {{ running = 0.0; break; }}")
    else:
        body += [f"out_y[((int64_t){i} * points + p) * n + k] = {text};"
                 for i, text in enumerate(outputs[n_carry:])]
    body += [f"a{i} = {text};" for i, text in enumerate(outputs[:n_carry])]
    lines = ["/* Generated by symad: a loop's kernel (symad.loops.compiled). */",
             "#include <math.h>", "#include <stdint.h>", "", *sorted(helpers), "",
             _C_SIGNATURE, "{", "    for (int64_t p = 0; p < points; p++) {"]
    lines += [f"        double a{i} = carry[(int64_t){i} * points + p];" for i in range(n_carry)]
    lines += [f"        const double q{i} = consts[(int64_t){i} * points + p];" for i in range(n_q)]
    declare, store = _c_running(spec)
    lines += declare + ["        for (int64_t j = 0; j < n; j++) {",
              "            const int64_t k = reverse ? n - 1 - j : j;",
              "            const double s0 = lower + (double)k;"]
    lines += [f"            {line}" for line in body]
    lines += ["        }"]
    lines += [f"        out_carry[(int64_t){i} * points + p] = a{i};" for i in range(n_carry)]
    lines += store + ["    }", "    return 0;", "}", ""]
    return "\n".join(lines)


def _c_running(spec) -> tuple[list[str], list[str]]:
    """A while loop's kernel writes, per point, whether it stopped for its step budget (1)
    rather than for its condition (0), so that the caller runs it on: the flag's declaration
    before the steps and its store after them (none for other loops)."""
    if spec.kind != "while_loop":
        return [], []
    return ["        double running = 1.0;"], ["        out_y[p] = running;"]


#: The C kernels' signature (both kinds): 0 on success, 1 where memory ran out.
_C_SIGNATURE = ("int symad_loop(const double *carry, const double *xs, const double *consts, "
                "double *out_carry, double *out_y, double lower, int64_t n, int64_t reverse, "
                "int64_t points)")


def loop_body_c_source(spec) -> str | None:
    """A C kernel that calls the body's own C function (``F.to_c``: loop nests over its
    arrays) once per step, for a body of arrays too large to expand into scalars; None where
    the body has no C form (a while_loop, complex values, a primitive C cannot spell).

    >>> import numpy as np, symad as sd
    >>> F = sd.trace(lambda a: sd.fori_loop(0, 3, lambda i, u: u * a + np.roll(u, 1), np.ones(300)), 2.0)
    >>> spec = next(dict(n.params)["loop"] for n in F.graph.nodes if n.primitive.name == "loop")
    >>> print(loop_body_c_source(spec).splitlines()[-10])
                symad_body(in, out);
    """
    from symad.errors import ExportError

    try:
        body, _ = spec.body.to_c("symad_body")
    except ExportError:
        return None
    n_carry, n_x, n_q, n_y = slots(spec)
    x_at, q_at = 1 + n_carry, 1 + n_carry + n_x
    declare, store = _c_running(spec)
    if spec.kind == "while_loop":  # the condition on the carry the step was given
        outputs = [f"            if (!(out[{n_carry}] != 0.0)) {{ running = 0.0; break; }}"]
    else:
        outputs = [f"            for (int64_t e = 0; e < {n_y}; e++) "
                   f"out_y[(e * points + p) * n + k] = out[{n_carry} + e];"]
    return "\n".join([
        body, "#include <stdint.h>", "#include <stdlib.h>", "", _C_SIGNATURE, "{",
        f"    double *in = malloc(sizeof(double) * {1 + n_carry + n_x + n_q});",
        f"    double *out = malloc(sizeof(double) * {max(1, n_carry + n_y)});",
        "    if (in == NULL || out == NULL) { free(in); free(out); return 1; }",
        "    for (int64_t p = 0; p < points; p++) {",
        f"        for (int64_t e = 0; e < {n_carry}; e++) in[1 + e] = carry[e * points + p];",
        f"        for (int64_t e = 0; e < {n_q}; e++) in[{q_at} + e] = consts[e * points + p];",
        *declare,
        "        for (int64_t j = 0; j < n; j++) {",
        "            const int64_t k = reverse ? n - 1 - j : j;",
        "            in[0] = lower + (double)k;",
        f"            for (int64_t e = 0; e < {n_x}; e++) in[{x_at} + e] = xs[(e * points + p) * n + k];",
        "            symad_body(in, out);",
        *outputs,
        f"            for (int64_t e = 0; e < {n_carry}; e++) in[1 + e] = out[e];",
        "        }",
        f"        for (int64_t e = 0; e < {n_carry}; e++) out_carry[e * points + p] = in[1 + e];",
        *store,
        "    }",
        "    free(in);", "    free(out);", "    return 0;", "}", ""])


def _c_kernel(spec):
    """The loop's kernel in C, called as numba's is; None where there is no C compiler, the
    body has no C form, or the build fails (then numba's, or NumPy step by step)."""
    import ctypes

    from symad import config
    from symad.compile.registry import BackendUnsupported
    from symad.compile.scalar.tape_c import build_library, c_compiler

    source = c_compiler() is not None and (loop_kernel_c_source(spec) or loop_body_c_source(spec))
    if not source:
        return None
    try:
        function = build_library(source, "loops", keep=config.cache_enabled()).symad_loop
    except BackendUnsupported as error:
        _LOG.info("symad: %s: %s; numba's kernel instead", spec.name, error)
        return None
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_double] + [ctypes.c_int64] * 3

    def kernel(carry, xs, consts, out_carry, out_y, lower, n, reverse):
        arrays = [np.ascontiguousarray(a, np.float64) for a in (carry, xs, consts)]
        if function(*(a.ctypes.data for a in arrays), out_carry.ctypes.data, out_y.ctypes.data,
                    lower, n, int(reverse), carry.shape[1]):
            raise MemoryError(f"loop {spec.name!r}: its kernel could not allocate its step's values")
        return 0

    return kernel


def _kernel(spec):
    """The loaded kernel of ``spec`` (made once per loop): C where there is a compiler, else
    numba's; None where neither takes the body."""
    kernel = spec.derived.get("kernel")
    if kernel is None and spec.body.is_complex_program:  # complex values inside the body:
        kernel = spec.derived["kernel"] = _UNSUPPORTED    # the kernels hold doubles
    if kernel is None:
        kernel = _c_kernel(spec) or _UNSUPPORTED
        source = kernel is _UNSUPPORTED and _available() and loop_kernel_source(spec)
        if source:
            from symad import config
            from symad.compile.evaluator import load_module
            from symad.compile.modules import GeneratedModule

            module = GeneratedModule(source, [], "numba", "float64", None, None)
            kernel = load_module(module, on_disk=config.cache_enabled())["loop"]
        spec.derived["kernel"] = kernel
    return None if kernel is _UNSUPPORTED else kernel


def _available() -> bool:
    from symad.compile.registry import numba_available

    return numba_available()


def run_compiled(spec, arrays: list, batch: tuple):
    """The loop's value by its compiled kernel, or None where there is none (see the module)."""
    found = compiled_window(spec, arrays, batch, 0, spec.length)
    return None if found is None else pack_results(spec, batch, *found)


def _rows(values, shapes, batch: tuple, steps: tuple = ()) -> np.ndarray:
    """Each leaf (batch + steps + its shape) as one row per element: ``(elements, points) +
    steps``, the kernel's layout (transpose, not np.moveaxis: binomial checkpointing makes
    thousands of these calls)."""
    points = math.prod(batch)
    front = (len(steps) + 1,) + tuple(range(len(steps) + 1))
    parts = []
    for value, shape in zip(values, shapes):
        value = np.asarray(value)
        if value.shape != batch + steps + shape:
            value = np.broadcast_to(value, batch + steps + shape)
        parts.append(value.reshape((points,) + steps + (math.prod(shape),)).transpose(front))
    if not parts:
        return np.empty((0, points) + steps)
    block = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return np.ascontiguousarray(block, np.float64)


def _leaves(block, shapes, batch: tuple, steps: tuple = ()) -> list:
    """The inverse of :func:`_rows`: each leaf as batch + steps + its shape."""
    back = tuple(range(1, block.ndim)) + (0,)
    out, start_row = [], 0
    for shape in shapes:
        size = math.prod(shape)
        part = block[start_row:start_row + size].transpose(back)
        out.append(part.reshape(batch + steps + shape))
        start_row += size
    return out


def compiled_window(spec, arrays: list, batch: tuple, start: int, count: int):
    """Steps ``start .. start + count - 1`` of the loop by its compiled kernel, from the carry
    in ``arrays`` (the scanned arrays cut to those steps): ``(carry leaves, stacked ys of the
    window)``, or None where there is no kernel. Binomial checkpointing runs windows of a
    loop (:mod:`symad.loops.binomial`); the whole loop is the window ``(0, length)``."""
    kernel = _kernel(spec)
    if kernel is None:
        return None
    n_carry, n_x, _ = spec.counts()
    steps = (count,)
    carry = _rows(arrays[:n_carry], spec.carry_shapes, batch)
    xs = _rows(arrays[n_carry:n_carry + n_x], spec.x_shapes, batch, steps)
    consts = _rows(arrays[n_carry + n_x:], spec.const_shapes, batch)
    n_carry_slots, _, _, n_y_slots = slots(spec)
    points = math.prod(batch)
    out_carry = np.empty((n_carry_slots, points))
    out_y = np.empty((n_y_slots, points, count))
    kernel(carry, xs, consts, out_carry, out_y, float(spec.lower + start), count, spec.reverse)
    return _leaves(out_carry, spec.carry_shapes, batch), _leaves(out_y, spec.y_shapes, batch, steps)


#: Steps a while loop's kernel takes per call before it returns to Python, which calls it
#: again where a point is still running: a loop that never ends stays interruptible.
WHILE_STEPS_PER_CALL = 1 << 20


def compiled_while(spec, arrays: list, batch: tuple):
    """A while loop's final carry leaves by its compiled kernel (each point stepping until
    its condition fails), or None where there is no kernel.

    >>> import symad as sd
    >>> F = sd.trace(lambda x: sd.while_loop(lambda v: v < 100.0, lambda v: 3.0 * v, x), 1.0)
    >>> spec = next(dict(n.params)["loop"] for n in F.graph.nodes if n.primitive.name == "while_loop")
    >>> [float(v) for v in compiled_while(spec, [np.array([1.0, 50.0, 200.0])], (3,))[0]]
    [243.0, 150.0, 200.0]
    """
    kernel = _kernel(spec)
    if kernel is None:
        return None
    n_carry = len(spec.carry_shapes)
    points = math.prod(batch)
    carry = _rows(arrays[:n_carry], spec.carry_shapes, batch)
    consts = _rows(arrays[n_carry:], spec.const_shapes, batch)
    xs, running = np.empty((0, points, 0)), np.empty((1, points, 1))
    taken = 0
    while True:
        out_carry = np.empty((carry.shape[0], points))
        kernel(carry, xs, consts, out_carry, running, float(taken), WHILE_STEPS_PER_CALL, False)
        taken += WHILE_STEPS_PER_CALL
        if not running.any():
            return _leaves(out_carry, spec.carry_shapes, batch)
        carry = out_carry
