"""Lowering to NumPy: one NumPy (or SciPy) call per node, blocked over the batch.

The reference backend: every node is its own step, so results are exactly
what each primitive's NumPy implementation gives. Liveness turns into ``del``
statements, so a block holds only the temporaries still needed.

>>> import sympy
>>> from symad.graph import GraphBuilder
>>> from symad.primitives import sin_p, mul_p
>>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
>>> s = b.record(sin_p, (x,))
>>> module = lower_numpy(b.finish([b.record(mul_p, (s, s))]), "float64", "f")
>>> lines = module.source.splitlines()
>>> start = lines.index("def evaluate_block(inputs, outputs, buffers, programs):")
>>> print("\\n".join(lines[start:start + 6]))
def evaluate_block(inputs, outputs, buffers, programs):
    [v0] = inputs
    [o0] = outputs
    v1 = np.sin(v0)
    o0[...] = np.multiply(v1, v1)
    del v1
"""

from __future__ import annotations

import functools

import numpy as np

from symad.compile.modules import GeneratedModule
from symad.compile.scalar.program import Program, compile_program, max_live
from symad.compile.scalar.source import (
    DRIVER,
    block_size_for,
    first_output_positions,
    module_header,
    numpy_spelling,
    operand_text,
    output_lines,
)

__all__ = ["lower_numpy", "unpack_lines", "external_call"]


#: The programs of a module whose steps are plain NumPy calls: none (see the driver).
NO_PROGRAMS = '''

def _programs():
    return []


_FREE_PROGRAMS = [_programs()]
'''


def unpack_lines(program: Program, buffer_count: int, programs: str = "programs") -> list[str]:
    """The first lines of ``evaluate_block``: names for inputs, outputs and buffers
    (``programs``: the name of its last parameter, the thread's programs)."""
    lines = [f"def evaluate_block(inputs, outputs, buffers, {programs}):"]
    if program.input_count:
        lines.append(f"    [{', '.join(f'v{i}' for i in range(program.input_count))}] = inputs")
    if program.outputs:
        lines.append(f"    [{', '.join(f'o{i}' for i in range(len(program.outputs)))}] = outputs")
    if buffer_count:
        lines.append(f"    [{', '.join(f'b{i}' for i in range(buffer_count))}] = buffers")
    return lines


def external_call(instruction, externals: list, descriptions: list,
                  spelt: dict | None = None) -> str:
    """Bind the instruction's NumPy implementation as an external; the call's source.

    ``spelt``: the source names of operands not spelt ``v{n}`` (see :func:`operand_text`).
    """
    implementation = instruction.primitive.numpy_impl
    if instruction.params:
        implementation = functools.partial(implementation, **dict(instruction.params))
    index = len(externals)
    externals.append(implementation)
    descriptions.append(f"the numeric implementation of {instruction.primitive.name!r}")
    args = ", ".join(operand_text(o, spelt) for o in instruction.operands)
    return f"EXTERNALS[{index}]({args})"


def lower_numpy(graph, dtype, name: str = "function", program: Program | None = None) -> GeneratedModule:
    """The NumPy evaluator module of ``graph`` at ``dtype`` (example: the module docstring).

    ``program``: ``build_program(graph, name)`` when the caller has it already.
    """
    program = compile_program(graph, lambda instruction: False, name, program)
    externals: list = []
    descriptions: list = []
    targets = first_output_positions(program)
    body = []
    read = {leaf for step in program.steps for leaf in step.leaves}
    for step, freed in zip(program.steps, program.frees):
        instruction = step.instruction
        spelling = numpy_spelling(instruction)
        if spelling is None:
            call = external_call(instruction, externals, descriptions)
        else:
            call = spelling([operand_text(o) for o in instruction.operands])
        position = targets.get(step.result)
        if position is None:
            body.append(f"    v{step.result} = {call}")
        else:
            body.append(f"    o{position}[...] = {call}")
            if step.result in read:
                body.append(f"    v{step.result} = o{position}")
        if freed:
            body.append(f"    del {', '.join(f'v{v}' for v in freed)}")
    body.extend(output_lines(program, targets))
    body.append("    return None")
    block_size = block_size_for(max_live(program) + 2, np.dtype(dtype).itemsize)
    header = module_header(
        program, "numpy", dtype, [], [], descriptions, block_size,
    )
    source = "\n".join(header + [NO_PROGRAMS] + unpack_lines(program, 0) + body) + "\n" + DRIVER
    return GeneratedModule(source, externals, "numpy", dtype, block_size, program)
