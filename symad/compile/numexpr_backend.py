"""Lowering to numexpr: fused expressions parsed once, blocked over the batch.

Single-use temporaries are inlined into their consumer (the ``fuse`` pass),
so most of a graph becomes a few ``numexpr.NumExpr`` programs, compiled when
the module loads and never re-parsed at call time. Each program writes into
a block-sized buffer (``out=``); the buffers are assigned at compile time by
a linear scan over the liveness information, so a buffer is reused as soon
as its value is dead and the working set is a handful of blocks.

Operations numexpr lacks (erf, logaddexp, sigmoid, cbrt, exp2, logsumexp,
custom primitives, ...) are steps of their own that call NumPy/SciPy inside
the same block loop: the user never sees the difference.

>>> import sympy
>>> from symad.graph import GraphBuilder
>>> from symad.primitives import sin_p, mul_p, add_p
>>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
>>> s = b.record(sin_p, (x,))
>>> out = b.record(add_p, (b.record(mul_p, (s, s)), x))
>>> module = lower_numexpr(b.finish([out]), "float64", "f")
>>> [line for line in module.source.splitlines() if line.startswith("_E")]
["_E0 = _program('sin(a0)', ['a0'], [False])", "_E1 = _program('(a0 + (a1 * a1))', ['a0', 'a1'], [False, False])"]
"""

from __future__ import annotations

import math

import numpy as np

from symad.compile.numpy_backend import external_call, unpack_lines
from symad.compile.program import MAX_FUSED_LEAVES, Constant, Instruction, Program, compile_program
from symad.compile.source import (
    DRIVER,
    GeneratedModule,
    block_size_for,
    first_output_positions,
    is_builtin_primitive,
    literal,
    module_header,
    numpy_spelling,
    operand_text,
    output_lines,
)

__all__ = ["lower_numexpr", "numexpr_form"]


# ---------------------------------------------------------------------------
# The translation table: symad primitive -> numexpr spelling
# ---------------------------------------------------------------------------

_INFIX = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "power": "**",
    "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=",
    "equal": "==", "not_equal": "!=", "logical_and": "&", "logical_or": "|",
}
_PREFIX = {"negative": "-", "logical_not": "~"}
#: symad primitive name -> numexpr function name; kept only if this numexpr has it
_FUNCTIONS = {
    name: name for name in (
        "sqrt", "exp", "expm1", "log", "log10", "log1p", "log2", "sin", "cos", "tan",
        "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh",
        "arccosh", "arctanh", "abs", "sign", "maximum", "minimum", "hypot", "where",
    )
}


def _numexpr_functions() -> set:
    try:
        from numexpr.expressions import functions
    except ImportError:
        return set()
    return set(functions)


_AVAILABLE = _numexpr_functions()


def numexpr_form(instruction: Instruction):
    """``format(args) -> text`` for this instruction in numexpr, or None if numexpr lacks it.

    >>> from symad.compile.program import Instruction
    >>> from symad.primitives import mul_p, erf_p
    >>> numexpr_form(Instruction(2, mul_p, (0, 1), (), False))(["v0", "v1"])
    '(v0 * v1)'
    >>> numexpr_form(Instruction(1, erf_p, (0,), (), False)) is None   # runs in SciPy
    True
    """
    primitive = instruction.primitive
    if instruction.params or not is_builtin_primitive(primitive):
        return None
    if all(isinstance(o, Constant) for o in instruction.operands):
        return None  # constants the builder left unfolded (1/0): NumPy gives inf at run time
    if len(instruction.operands) > MAX_FUSED_LEAVES:
        # One n-ary node (a 64-term sum in a 64th derivative) can exceed the inputs one
        # NumExpr program takes ("too many inputs"): NumPy adds it up instead.
        return None
    for o in instruction.operands:
        # numexpr has no literal for inf or nan: such steps run in NumPy instead.
        if isinstance(o, Constant) and not isinstance(o.value, bool) and not math.isfinite(o.value):
            return None
    name = primitive.name
    if name in _INFIX:
        symbol = f" {_INFIX[name]} "
        return lambda args: "(" + symbol.join(args) + ")"
    if name in _PREFIX:
        return lambda args, symbol=_PREFIX[name]: f"({symbol}{args[0]})"
    if name == "stop_gradient":
        return lambda args: args[0]
    if name == "sech":  # 1/cosh: inf past |x| = 710 gives the right 0
        return lambda args: f"(1 / cosh({args[0]}))"
    function = _FUNCTIONS.get(name)
    if function is not None and function in _AVAILABLE:
        return lambda args: f"{function}({', '.join(args)})"
    return None


def _render(step_instruction: Instruction, inlined: dict, leaf_names: dict) -> str:
    """The numexpr text of a step: its instruction with inlined operands expanded.

    Leaves are spelled by ``leaf_names`` (``a0, a1, ...`` in the step's leaf
    order), so steps that differ only in their inputs have the same text and
    share one compiled program. Expressions are capped in size by the fuse
    pass, so this recursion is shallow.
    """
    args = []
    for o in step_instruction.operands:
        if isinstance(o, Constant):
            args.append(literal(o.value))
        elif o in inlined:
            args.append(_render(inlined[o], inlined, leaf_names))
        else:
            args.append(leaf_names[o])
    return numexpr_form(step_instruction)(args)


# ---------------------------------------------------------------------------
# Buffers: a linear scan over liveness
# ---------------------------------------------------------------------------


def _assign_buffers(program: Program, fused: set, targets: dict) -> tuple[dict, list]:
    """``{value: buffer index}`` for numexpr steps that are not outputs, and each buffer's kind."""
    free: dict[bool, list[int]] = {False: [], True: []}
    kinds: list[bool] = []
    buffer_of: dict[int, int] = {}
    for step, freed in zip(program.steps, program.frees):
        if step.result in fused and step.result not in targets:
            boolean = step.result in program.boolean_values
            if free[boolean]:
                buffer_of[step.result] = free[boolean].pop()
            else:
                buffer_of[step.result] = len(kinds)
                kinds.append(boolean)
        for value in freed:  # released after the step: a step never writes over its own input
            if value in buffer_of:
                free[kinds[buffer_of[value]]].append(buffer_of[value])
    return buffer_of, kinds


# ---------------------------------------------------------------------------
# The module
# ---------------------------------------------------------------------------

_NUMEXPR_SETUP = '''
import threading

import numexpr as ne

# A NumExpr program keeps its registers in the object itself: two threads running
# the same program at once corrupt each other (measured: wrong results, then a
# crash in free()). evaluate() holds this lock, so threads take turns.
_LOCK = threading.Lock()

# numexpr spells float64 as numpy.float64 and float32 as Python's float.
_FLOAT = np.float64 if DTYPE == np.float64 else float


def _program(text, names, boolean):
    """A numexpr program, parsed once, over the named leaves (``boolean`` marks truth values)."""
    signature = [(name, bool if is_boolean else _FLOAT) for name, is_boolean in zip(names, boolean)]
    return ne.NumExpr(text, signature=signature, truediv=True)


# Results are stored into DTYPE buffers: float64 constants in a float32 program may
# compute in float64, and "same_kind" lets numexpr store that as float32.
# numexpr >= 2.13 also asks whether a program uses Intel's VML: probed once per
# process (the answer is kept on the numexpr module, shared by generated modules).
_CALL = getattr(ne, "_generated_module_call_options", None)
if _CALL is None:
    _CALL = {"casting": "same_kind"}
    try:
        _program("v0", ["v0"], [False])(np.zeros(1, np.float64), ex_uses_vml=False, **_CALL)
        _CALL["ex_uses_vml"] = bool(getattr(ne, "use_vml", False))
    except TypeError:
        pass
    ne._generated_module_call_options = _CALL
'''


def lower_numexpr(graph, dtype, name: str = "function") -> GeneratedModule:
    """The numexpr evaluator module of ``graph`` at ``dtype`` (example: the module docstring)."""
    program = compile_program(graph, lambda instruction: numexpr_form(instruction) is not None, name)
    targets = first_output_positions(program)
    fused = {step.result for step in program.steps if numexpr_form(step.instruction) is not None}
    buffer_of, buffer_kinds = _assign_buffers(program, fused, targets)
    externals: list = []
    descriptions: list = []
    programs: list[str] = []
    # (text, boolean leaves) -> program index: a Hessian's 2,000 entries of the same
    # shape compile to a few NumExpr programs (each costs ~2 ms to parse), not 2,000.
    program_index: dict[tuple, int] = {}
    body: list[str] = []
    read = {leaf for step in program.steps for leaf in step.leaves}
    for step, freed in zip(program.steps, program.frees):
        position = targets.get(step.result)
        destination = f"o{position}" if position is not None else f"b{buffer_of.get(step.result)}"
        if step.result in fused:
            leaf_names = {leaf: f"a{j}" for j, leaf in enumerate(step.leaves)}
            text = _render(step.instruction, program.inlined, leaf_names)
            names = [leaf_names[leaf] for leaf in step.leaves]
            boolean = [leaf in program.boolean_values for leaf in step.leaves]
            index = program_index.get((text, tuple(boolean)))
            if index is None:
                index = program_index[text, tuple(boolean)] = len(programs)
                programs.append(f"_E{index} = _program({text!r}, {names!r}, {boolean!r})")
            arguments = ", ".join(f"v{leaf}" for leaf in step.leaves)
            body.append(f"    _E{index}({arguments}, out={destination}, **_CALL)")
            if step.result in read:
                body.append(f"    v{step.result} = {destination}")
        else:
            spelling = numpy_spelling(step.instruction)
            if spelling is None:
                call = external_call(step.instruction, externals, descriptions)
            else:
                call = spelling([operand_text(o) for o in step.instruction.operands])
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

    fallbacks = sum(1 for step in program.steps if step.result not in fused)
    itemsize = np.dtype(dtype).itemsize
    block_size = block_size_for(len(buffer_kinds) + fallbacks + 2, itemsize)
    header = module_header(
        program, "numexpr", dtype, [],
        [program.output_is_boolean(o) for o in program.outputs], buffer_kinds, descriptions,
        block_size,
    )
    driver = DRIVER.replace("    with np.errstate(all=\"ignore\"):", "    with _LOCK, np.errstate(all=\"ignore\"):")
    assert driver != DRIVER, "the blocked driver changed: put the lock back around its loop"
    source = "\n".join(
        header + [_NUMEXPR_SETUP] + programs + ["", ""] + unpack_lines(program, len(buffer_kinds)) + body
    ) + "\n" + driver
    note = f"{fallbacks} of {len(program.steps)} steps run in NumPy/SciPy" if fallbacks else ""
    return GeneratedModule(source, externals, "numexpr", dtype, block_size, program, note)
