"""Loops iterated inside compiled code: the body's scalar kernel in a numba ``for`` loop.

For a body of scalars (every carry leaf, slice, const and ``y`` a scalar, no array
node), the body's program is lowered by the scalar compiler's passes
(:func:`symad.compile.scalar.program.compile_program`) and spelled with the numba
backend's scalar forms (:func:`symad.compile.scalar.numba_backend.scalar_form`), one
statement per instruction, as the numba backend writes its kernels; around those
statements go a loop over the steps, holding the carry in local variables, and a loop
over the points of the batch. Python then runs once per loop, not once per step: the
pendulum's 10^4 Euler steps and their gradient take tens of microseconds.

The module is written under symad's cache directory and numba keeps its machine code
beside it (``cache=True``), so another process loads it instead of compiling
(``SYMAD_CACHE=0``: compiled in memory, not kept). Where numba is missing or the
body is not a program of scalars, :func:`run_compiled` returns None and the loop runs
one call of the body's NumPy evaluator per step (:mod:`symad.loops.evaluation`).
"""

from __future__ import annotations

import math

import numpy as np

from symad.loops.spec import pack_results

__all__ = ["run_compiled", "loop_kernel_source", "MAX_BODY_INSTRUCTIONS"]

#: Bodies of more instructions than this run step by step in NumPy (LLVM's time grows
#: faster than linearly with the statements of one function).
MAX_BODY_INSTRUCTIONS = 2_000

_UNSUPPORTED = object()


def _scalar_body(spec) -> bool:
    shapes = spec.carry_shapes + spec.x_shapes + spec.const_shapes + spec.y_shapes
    return all(shape == () for shape in shapes) and not spec.body.is_array_program


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
    from symad.compile.scalar.program import compile_program

    if spec.kind == "while_loop" or not _scalar_body(spec):
        return None
    n_carry, n_x, n_q = spec.counts()
    n_y = len(spec.y_shapes)
    program = compile_program(spec.body.graph, lambda instruction: False, spec.name)
    forms = [scalar_form(instruction) for instruction in program.instructions]
    if (any(form is None for form in forms) or len(forms) > MAX_BODY_INSTRUCTIONS
            or program.input_count != 1 + n_carry + n_x + n_q
            or len(program.outputs) != n_carry + n_y):
        return None
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
    lines += ["        for j in range(n):", f"{inner}k = (n - 1 - j) if reverse else j",
              f"{inner}s0 = lower + k"]
    sources = ([f"a{i}" for i in range(n_carry)] + [f"xs[{i}, p, k]" for i in range(n_x)]
               + [f"q{i}" for i in range(n_q)])
    lines += [f"{inner}s{position + 1} = {source}" for position, source in enumerate(sources)]
    for instruction, form in zip(program.instructions, forms):
        lines.append(f"{inner}s{instruction.result} = {form([_operand(o) for o in instruction.operands])}")
    outputs = [_operand(o) for o in program.outputs]
    lines += [f"{inner}out_y[{i}, p, k] = {text}" for i, text in enumerate(outputs[n_carry:])]
    if n_carry:  # every new carry is read before any is written
        lines.append(f"{inner}{', '.join(f'a{i}' for i in range(n_carry))} = "
                     f"{', '.join(outputs[:n_carry])}")
    lines += [f"        out_carry[{i}, p] = a{i}" for i in range(n_carry)]
    lines.append("    return 0")
    return "\n".join(lines) + "\n"


def _operand(operand) -> str:
    from symad.compile.scalar.program import Constant
    from symad.compile.scalar.source import literal

    return literal(operand.value) if isinstance(operand, Constant) else f"s{operand}"


def _kernel(spec):
    """The loaded kernel of ``spec`` (made once per loop), or None."""
    kernel = spec.derived.get("numba kernel")
    if kernel is None:
        kernel = _UNSUPPORTED
        source = _available() and loop_kernel_source(spec)
        if source:
            from symad import config
            from symad.compile.evaluator import load_module
            from symad.compile.modules import GeneratedModule

            module = GeneratedModule(source, [], "numba", "float64", None, None)
            kernel = load_module(module, on_disk=config.cache_enabled())["loop"]
        spec.derived["numba kernel"] = kernel
    return None if kernel is _UNSUPPORTED else kernel


def _available() -> bool:
    from symad.compile.registry import numba_available

    return numba_available()


def run_compiled(spec, arrays: list, batch: tuple):
    """The loop's value by its numba kernel, or None where there is none (see the module)."""
    kernel = _kernel(spec)
    if kernel is None:
        return None
    n_carry, n_x, _ = spec.counts()
    points = math.prod(batch)

    def rows(values, tail=()):
        out = np.empty((len(values), points) + tail)
        for row, value in zip(out, values):
            row[...] = np.reshape(value, (points,) + tail)
        return out

    carry = rows(arrays[:n_carry])
    xs = rows(arrays[n_carry:n_carry + n_x], (spec.length,))
    consts = rows(arrays[n_carry + n_x:])
    out_carry = np.empty((n_carry, points))
    out_y = np.empty((len(spec.y_shapes), points, spec.length))
    kernel(carry, xs, consts, out_carry, out_y, float(spec.lower), spec.length, spec.reverse)
    return pack_results(spec, batch, [c.reshape(batch) for c in out_carry],
                        [y.reshape(batch + (spec.length,)) for y in out_y])
