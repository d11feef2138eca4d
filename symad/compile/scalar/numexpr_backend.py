"""Lowering to numexpr: fused programs built once, blocked over the batch.

The ``fuse_regions`` pass groups the graph into regions with one result
each; every region becomes one program of numexpr's virtual machine, written
here as three-address code and assembled when the module loads (never
parsed or re-parsed at call time). A value used several times inside a
region stays in a register, so a long chain of cheap arithmetic -- the
forward and reverse sweeps of an iterated map -- is one pass over memory.
Each program writes into a block-sized buffer (``out=``); the buffers are
assigned at compile time by a linear scan over the liveness information, so
a buffer is reused as soon as its value is dead and the working set is a
handful of blocks.

Each primitive's stanza spells it in numexpr's language (its ``"numexpr"``
spelling, an expression tree); this module knows that language, not the
primitives. Primitives with no such spelling (special functions, custom
primitives, ...), and those NumPy computes faster (their stanzas' measured
``cost_ns``: ``NUMPY_IS_FASTER``), are steps of their own that call
NumPy/SciPy inside the same block loop: the user never sees the difference.
If this numexpr's internals do not accept assembled programs (probed once),
the regions fall back to numexpr strings, which are trees (``fuse``).

>>> import sympy
>>> from symad.graph import GraphBuilder
>>> from symad.primitives import sin_p, mul_p, add_p
>>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
>>> s = b.record(sin_p, (x,))
>>> out = b.record(add_p, (b.record(mul_p, (s, s)), x))
>>> module = lower_numexpr(b.finish([out]), "float64", "f")
>>> start = module.source.index("_E0 = ")
>>> print(module.source[start:module.source.index("])", start) + 2])
_E0 = _vm(['a0'], 'd', (), 'd', [
    ('func_ddn', 't0', 'r1', 'sin_dd'),                 # v1 = sin
    ('mul_ddd', 't0', 't0', 't0'),                      # v2 = multiply
    ('add_ddd', 'o', 'r1', 't0'),                       # v3 = add
])
"""

from __future__ import annotations

import math

import numpy as np

from symad.compile.modules import GeneratedModule
from symad.compile.scalar.numpy_backend import external_call, unpack_lines
from symad.compile.scalar.program import (
    MAX_FUSED_LEAVES,
    Constant,
    Instruction,
    Program,
    build_program,
    compile_program,
    eliminate_dead_code,
    fuse_regions,
    liveness,
    schedule_depth_first,
    vm_operations,
)
from symad.compile.scalar.source import (
    DRIVER,
    block_size_for,
    first_output_positions,
    literal,
    module_header,
    numpy_spelling,
    operand_text,
    output_lines,
)
from symad.ir.primitive import PRIMITIVES
from symad.lazy_scipy import resolved

__all__ = ["lower_numexpr", "numexpr_form", "runs_in_numpy", "NUMPY_IS_FASTER", "COST_NS"]


# ---------------------------------------------------------------------------
# numexpr's language. Each primitive's stanza spells it as an expression tree (its
# "numexpr" spelling, see symad.primitives.BACKENDS); this is how numexpr writes those
# operators, as text and as operations of its virtual machine.
# ---------------------------------------------------------------------------

#: Operators written between their operands, and the machine's operation for each.
_INFIX = {"+": "add", "-": "sub", "*": "mul", "/": "div", "**": "pow", ">": "gt", ">=": "ge",
          "==": "eq", "!=": "ne", "&": "and", "|": "or"}
#: a < b is b > a: numexpr's machine has only gt and ge
_SWAPPED = {"<": "gt", "<=": "ge"}
#: Operators written before their one operand.
_PREFIX = {"-": "neg", "~": "invert"}
#: numexpr functions whose machine operation has another name.
_VM_FUNCTIONS = {"abs": "absolute"}
#: Operators whose result is a truth value.
_BOOLEAN = frozenset({"<", "<=", ">", ">=", "==", "!=", "&", "|", "~"})


def _numexpr_functions() -> set:
    try:
        from numexpr.expressions import functions
    except ImportError:
        return set()
    return set(functions)


_AVAILABLE = _numexpr_functions()


def numexpr_form(instruction: Instruction):
    """``format(args) -> text`` for this instruction in numexpr, or None if numexpr lacks it.

    >>> from symad.compile.scalar.program import Instruction
    >>> from symad.primitives import mul_p, erf_p
    >>> numexpr_form(Instruction(2, mul_p, (0, 1), (), False))(["v0", "v1"])
    '(v0 * v1)'
    >>> numexpr_form(Instruction(1, erf_p, (0,), (), False)) is None   # runs in SciPy
    True
    """
    tree = instruction.primitive.spelling("numexpr")
    if instruction.params or tree is None or not _available(tree):
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
    return lambda args: _text(tree, args, instruction.operands)


def _available(tree) -> bool:
    """Whether this numexpr has every function ``tree`` calls."""
    if not isinstance(tree, tuple):
        return True
    operator, *parts = tree
    if operator not in _INFIX and operator not in _SWAPPED and operator not in _PREFIX \
            and operator not in _AVAILABLE:
        return False
    return all(_available(part) for part in parts)


def _text(tree, args: list, operands) -> str:
    """The numexpr text of a spelling ``tree`` on the operand texts ``args``."""
    if isinstance(tree, int):
        return args[tree]
    if isinstance(tree, str):
        return tree  # a literal
    operator, *parts = tree
    texts = list(args) if parts == [...] else [_text(part, args, operands) for part in parts]
    if operator == "/" and len(parts) == 2 and isinstance(parts[1], int) \
            and isinstance(operands[parts[1]], Constant):
        divisor = operands[parts[1]].value
        if not isinstance(divisor, bool) and divisor != 0 and math.isfinite(divisor):
            mantissa, _ = math.frexp(divisor)
            if abs(mantissa) == 0.5 and math.isfinite(1.0 / divisor):
                # x / 2**k is exactly x * 2**-k, and a multiplication is several times cheaper
                return f"({texts[0]} * {literal(1.0 / divisor)})"
    if operator in _PREFIX and len(texts) == 1:
        return f"({operator}{texts[0]})"
    if operator in _INFIX or operator in _SWAPPED:
        return "(" + f" {operator} ".join(texts) + ")"
    return f"{operator}({', '.join(texts)})"


def _is_power(instruction: Instruction) -> bool:
    """Whether the instruction is numexpr's ``a ** b`` of its two operands."""
    return instruction.primitive.spelling("numexpr") == ("**", 0, 1)


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
# Regions as numexpr virtual-machine programs
# ---------------------------------------------------------------------------
#
# numexpr parses a string into a program for its virtual machine: one result
# (register 0), then inputs, constants and temporaries, each a chunk of a few
# thousand elements. A string is a tree, so a value used twice must be either
# written out twice or stored in a full-size temporary between two programs.
# The regions of ``fuse_regions`` are DAGs: symad writes their VM programs
# itself (three-address code, one line per operation, names resolved through
# numexpr's own opcode tables), so a shared value lives in a register, and the
# 67 operations of the logistic map's gradient are one pass over memory
# instead of nineteen. Where numexpr's internals do not take such a program
# (probed once, below), the string programs of ``fuse`` are used instead.

class _NotExpressible(Exception):
    pass


class _Region:
    """Three-address code of one region, in SSA form until :meth:`finish` assigns registers."""

    def __init__(self, float_kind: str, tables):
        self.float_kind = float_kind
        self.opcodes, self.funccodes = tables
        self.code: list = []          # (operation, destination, *operands, [function])
        self.kinds: list[str] = []    # kind of each SSA temporary
        self.constants: dict = {}     # (kind, repr) -> (index, value)
        self.leaves: dict = {}        # value -> input register name
        self.leaf_kinds: list[str] = []
        self.comments: list[str] = []

    def constant(self, value):
        kind = "b" if isinstance(value, bool) else self.float_kind
        key = (kind, repr(value))
        if key not in self.constants:
            self.constants[key] = (len(self.constants), value)
        return ("c", self.constants[key][0], kind)

    def leaf(self, value: int, boolean: bool):
        if value not in self.leaves:
            self.leaves[value] = ("r", len(self.leaves) + 1, "b" if boolean else self.float_kind)
            self.leaf_kinds.append(self.leaves[value][2])
        return self.leaves[value]

    def op(self, name: str, kind: str, *args):
        signature = kind + "".join(a[2] for a in args)
        destination = ("t", len(self.kinds), kind)
        opcode = f"{name}_{signature}".encode()
        if opcode in self.opcodes:
            self.code.append((opcode.decode(), destination, *args))
        elif opcode in self.funccodes:
            self.code.append((f"func_{signature}n", destination, *args, opcode.decode()))
        else:
            raise _NotExpressible(opcode)
        self.kinds.append(kind)
        self.comments.append("")
        return destination


def _emit(region: _Region, instruction: Instruction, args: list):
    """Append ``instruction`` applied to the registers ``args``; its result's register."""
    tree = instruction.primitive.spelling("numexpr")
    if tree is None:
        raise _NotExpressible(instruction.primitive.name)
    return _emit_tree(region, tree, instruction, args, True)


def _emit_tree(region: _Region, tree, instruction: Instruction, args: list, top: bool):
    """The operations of the spelling ``tree`` on the registers ``args``; the result's register."""
    if isinstance(tree, int):
        return args[tree]  # an operand passed through (stop_gradient)
    if isinstance(tree, str):
        return region.constant(float(tree))
    f = region.float_kind
    operator, *parts = tree
    if top and operator == "**" and parts == [0, 1]:
        exponent = integral_exponent(instruction)
        if exponent is not None:
            return _integral_power(region, args[0], exponent)
    every = parts == [...]
    values = list(args) if every else [_emit_tree(region, p, instruction, args, False) for p in parts]
    kind = "b" if operator in _BOOLEAN or (top and instruction.boolean) else f
    if every:  # a + b + c ...: one operation per further operand
        if len(values) < 2:
            raise _NotExpressible(operator)
        result = values[0]
        for other in values[1:]:
            result = region.op(_INFIX[operator], f, result, other)
        return result
    if operator in _SWAPPED:
        return region.op(_SWAPPED[operator], "b", values[1], values[0])
    if operator in _PREFIX and len(values) == 1:
        return region.op(_PREFIX[operator], kind, values[0])
    if operator in _INFIX:
        return region.op(_INFIX[operator], kind, *values)
    return region.op(_VM_FUNCTIONS.get(operator, operator), kind, *values)


def _integral_power(region: _Region, base, exponent: float):
    """``base ** exponent`` for a (half-)integer exponent as numexpr writes it: multiplications."""
    f = region.float_kind
    n, half = int(abs(exponent)), int(abs(2 * exponent)) % 2
    result, power, mask = None, base, 1
    while True:
        if n & mask:
            result = power if result is None else region.op("mul", f, result, power)
        mask <<= 1
        if mask > n:
            break
        power = region.op("mul", f, power, power)
    if half:
        root = region.op("sqrt", f, base)
        result = root if result is None else region.op("mul", f, result, root)
    if exponent < 0:
        result = region.op("div", f, region.constant(1.0), result)
    return result


def _lower_region(step, program: Program, float_kind: str, tables) -> _Region:
    """The VM program of one region step (raises _NotExpressible)."""
    region = _Region(float_kind, tables)
    registers: dict[int, tuple] = {}
    for instruction in step.body:
        args = []
        for o in instruction.operands:
            if isinstance(o, Constant):
                value = o.value
                if not isinstance(value, bool) and math.isnan(float(value)):
                    raise _NotExpressible("nan")  # repr(nan) is no literal the module can print
                args.append(region.constant(bool(value) if isinstance(value, bool) else float(value)))
            elif o in registers:
                args.append(registers[o])
            else:
                args.append(region.leaf(o, o in program.boolean_values))
        before = len(region.code)
        registers[instruction.result] = _emit(region, instruction, args)
        if len(region.code) > before:
            region.comments[-1] = f"v{instruction.result} = {instruction.primitive.name}"
    result = registers[step.result]
    if result[0] != "t" or region.code[-1][1] != result:
        # a leaf or constant passed through (stop_gradient), or x**1.0 of an earlier
        # value: the result register is written by the last operation only
        region.op("copy", result[2], result)
    return region


def _region_shape(step, boolean_values) -> tuple[tuple, tuple]:
    """``(shape, leaves)`` of a region step: equal shapes lower to the same VM program.

    The shape is the region's instructions with values renamed by position
    (leaves by first use, results by order), constants kept with their type;
    ``leaves`` are the values read, in the order :func:`_lower_region` binds them.

    >>> from symad.compile.scalar.program import Instruction, Step
    >>> from symad.primitives import mul_p
    >>> def square(v):
    ...     product = Instruction(v + 1, mul_p, (v, v), (), False)
    ...     return Step(v + 1, product, (v,), (product,))
    >>> _region_shape(square(0), set())[0] == _region_shape(square(7), set())[0]
    True
    """
    renamed: dict = {}
    leaves: dict = {}
    parts = []
    for instruction in step.body:
        operands = []
        for o in instruction.operands:
            if isinstance(o, Constant):
                operands.append((type(o.value), o.value))
            elif o in renamed:
                operands.append(renamed[o])
            else:
                if o not in leaves:
                    leaves[o] = ("leaf", len(leaves), o in boolean_values)
                operands.append(leaves[o])
        renamed[instruction.result] = ("value", len(renamed))
        parts.append((instruction.primitive, instruction.params, instruction.boolean, tuple(operands)))
    parts.append(renamed[step.result])
    return tuple(parts), tuple(leaves)


def _finish(region: _Region) -> tuple[list, str]:
    """Physical registers: the last operation writes the output, temporaries are reused."""
    last_use: dict = {}
    for index, (_, _destination, *operands) in enumerate(region.code):
        for operand in operands:
            if isinstance(operand, tuple) and operand[0] == "t":
                last_use[operand[1]] = index
    free: dict[str, list[int]] = {}
    physical: dict[int, int] = {}
    temp_kinds: list[str] = []
    lines = []
    final = len(region.code) - 1
    for index, (operation, destination, *operands) in enumerate(region.code):
        names = []
        for operand in operands:
            if isinstance(operand, tuple):
                kind, number, _ = operand
                names.append(f"t{physical[number]}" if kind == "t" else f"{kind}{number}")
            else:
                names.append(operand)  # a function name
        # In operand order (a dict, not a set: a set of tuples holding strings iterates in a
        # per-process hash order, and the registers chosen, so the generated module, varied).
        dying = dict.fromkeys(operand for operand in operands
                              if isinstance(operand, tuple) and operand[0] == "t"
                              and last_use[operand[1]] == index)
        for operand in dying:  # freed before the destination: element-wise, so safe
            free.setdefault(operand[2], []).append(physical[operand[1]])
        if index == final:
            target = "o"
        else:
            pool = free.setdefault(destination[2], [])
            if pool:
                physical[destination[1]] = pool.pop()
            else:
                physical[destination[1]] = len(temp_kinds)
                temp_kinds.append(destination[2])
            target = f"t{physical[destination[1]]}"
        lines.append((operation, target, *names))
    return lines, "".join(temp_kinds)


_VM_HELPER = r'''

def _vm(names, signature, constants, temporaries, code):
    """A numexpr virtual-machine program written out as three-address code.

    Registers: ``o`` the result, ``r1 ..`` the inputs ``names`` (kinds ``signature``:
    d float64, f float32, b bool), ``c0 ..`` the ``constants``, ``t0 ..`` temporaries
    (kinds ``temporaries``). Operation names are numexpr's own (``interpreter.opcodes``);
    ``func_*n`` calls the function named last (``interpreter.funccodes``).
    """
    first_constant, first_temporary = 1 + len(names), 1 + len(names) + len(constants)

    def register(name):
        if name == "o":
            return 0
        number = int(name[1:])
        return {"r": number, "c": first_constant + number, "t": first_temporary + number}[name[0]]

    program = bytearray()
    for operation, *operands in code:
        if operation.startswith("func_"):
            operands[-1] = _FUNCTIONS[operands[-1].encode()]
        operands = [o if isinstance(o, int) else register(o) for o in operands]
        quad = [_OPCODES[operation.encode()], *operands[:3]]
        rest = operands[3:]
        while True:  # arguments past the third follow in "noop" quadruples, as numexpr writes them
            program += bytes(quad + [255] * (4 - len(quad)))
            if not rest:
                break
            quad, rest = [_OPCODES[b"noop"], *rest[:3]], rest[3:]
    constants = tuple(np.float32(c) if kind == "f" else c
                      for c, kind in zip(constants, _constant_kinds(constants)))
    return _Interpreter(signature.encode(), temporaries.encode(), bytes(program), constants,
                        tuple(names))


def _constant_kinds(constants):
    floating = "f" if DTYPE == np.float32 else "d"
    return ["b" if isinstance(c, bool) else floating for c in constants]



from numexpr import interpreter as _interpreter  # noqa: E402

_Interpreter, _OPCODES, _FUNCTIONS = _interpreter.NumExpr, _interpreter.opcodes, _interpreter.funccodes
'''


def _vm_tables():
    try:
        from numexpr import interpreter

        return interpreter.opcodes, interpreter.funccodes
    except (ImportError, AttributeError):
        return None


def _vm_usable() -> bool:
    """Whether this numexpr takes programs written as three-address code (probed once)."""
    global _VM_USABLE
    if _VM_USABLE is None:
        _VM_USABLE = False
        if _vm_tables() is not None:
            try:
                namespace = {"np": np, "DTYPE": np.float64}
                exec(compile(NUMEXPR_SETUP + _VM_HELPER, "<symad numexpr probe>", "exec"), namespace)
                program = namespace["_vm"](
                    ["v0", "v1"], "dd", (2.0,), "d",
                    [("mul_ddd", "t0", "r1", "c0"), ("func_ddn", "t0", "t0", "sin_dd"),
                     ("func_dddn", "o", "t0", "r2", "arctan2_ddd")],
                )
                x, y = np.linspace(0, 1, 5), np.linspace(1, 2, 5)
                out = np.empty(5)
                program(x, y, out=out, **namespace["_CALL"])
                _VM_USABLE = bool(np.allclose(out, np.arctan2(np.sin(2 * x), y), rtol=1e-14))
            except Exception:  # an internal API changed: use numexpr's strings
                _VM_USABLE = False
    return _VM_USABLE


_VM_USABLE: bool | None = None


#: Nanoseconds per float64 element of the functions numexpr's machine can run, there and
#: in NumPy, by primitive name: a view of the stanzas' ``cost_ns`` (see
#: ``symad.primitives.Primitive``). ``"power"`` is a power with a variable or non-integral
#: exponent (integral ones are multiplications).
COST_NS = {name: primitive.cost_ns for name, primitive in PRIMITIVES.items()
           if primitive.cost_ns is not None}
#: A pass over a block of memory (a NumPy copy of a cached block: 0.18 ns per element). A
#: function taken out of a region costs its operand's and its result's passes.
PASS_NS = 0.18
#: ... and a step of its own, with a call from Python per block: NumPy must win by this
#: factor besides (division, 0.70 against 0.33 + 2 x 0.18 ns, stays in the region).
NUMPY_MARGIN = 0.75


def _numpy_is_faster(cost_ns) -> bool:
    """Whether NumPy computes a function faster than numexpr by more than the two passes
    over memory a step of its own costs (``cost_ns``: a stanza's measured nanoseconds)."""
    in_numexpr, in_numpy = cost_ns
    return in_numpy + 2 * PASS_NS < NUMPY_MARGIN * in_numexpr


#: Functions that run as NumPy steps (the plan never does in numexpr what NumPy does
#: faster), by name.
NUMPY_IS_FASTER = frozenset(name for name, cost in COST_NS.items() if _numpy_is_faster(cost))


def runs_in_numpy(instruction: Instruction) -> bool:
    """Whether the plan computes ``instruction`` in NumPy although numexpr could (see ``COST_NS``).

    >>> from symad.compile.scalar.program import Instruction, Constant
    >>> from symad.primitives import exp_p, mul_p, pow_p
    >>> runs_in_numpy(Instruction(1, exp_p, (0,), (), False))
    True
    >>> runs_in_numpy(Instruction(1, mul_p, (0, 0), (), False))
    False
    >>> runs_in_numpy(Instruction(1, pow_p, (0, Constant(3.0)), (), False))   # x*x*x in numexpr
    False
    """
    if _is_power(instruction) and integral_exponent(instruction) is not None:
        return False
    cost = instruction.primitive.cost_ns
    return cost is not None and _numpy_is_faster(cost)


def integral_exponent(instruction: Instruction) -> float | None:
    """The constant (half-)integral exponent (at most 50 in size) that numexpr writes as
    multiplications (and a square root), or None."""
    exponent = instruction.operands[1] if len(instruction.operands) == 2 else None
    if isinstance(exponent, Constant) and not isinstance(exponent.value, bool):
        x = float(exponent.value)
        if math.isfinite(x) and 2 * x == int(2 * x) and abs(x) <= 50 and x != 0:
            return x
    return None


def _vm_fusible(program: Program, float_kind: str, tables):
    """Whether one instruction alone can be written for the VM (its operands as leaves).

    The answer depends on the primitive, its parameters, which operands are
    constants (and their values) and which hold truth values, so it is worked
    out once per such pattern: a graph of 10^5 nodes has a few dozen.
    """
    answers: dict = {}
    boolean_values = program.boolean_values

    def fusible(instruction: Instruction) -> bool:
        pattern = (instruction.primitive, instruction.params, instruction.boolean,
                   tuple((type(o.value), o.value) if isinstance(o, Constant) else o in boolean_values
                         for o in instruction.operands))  # typed: True == 1, but not as operands
        answer = answers.get(pattern)
        if answer is None:
            answer = answers[pattern] = fusible_alone(instruction)
        return answer

    def fusible_alone(instruction: Instruction) -> bool:
        if numexpr_form(instruction) is None or runs_in_numpy(instruction):
            return False
        region = _Region(float_kind, tables)
        args = []
        for o in instruction.operands:
            if isinstance(o, Constant):
                if not isinstance(o.value, bool) and math.isnan(float(o.value)):
                    return False
                args.append(region.constant(o.value))
            else:
                args.append(region.leaf(o, o in program.boolean_values))
        try:
            _emit(region, instruction, args)
        except _NotExpressible:
            return False
        return True
    return fusible


#: Points per block of a region module at most: its buffers then stay in the caches
#: between the steps that write and read them. Measured on the busy 2-core machine (2 x
#: 10^6 points, one thread, one run each): the Gaussian's gradient 196 ms in blocks of
#: 16,384 points against 268 ms in blocks of 262,144 (the numpy backend 218 ms); the
#: mixed case 80-123 ms against 131-171 ms; the simple case, two short programs, 67 ms
#: against 52 ms the other way; the Taylor-mode derivatives within noise. (When numexpr
#: split each call across its threads, large blocks amortized its synchronisation.)
MAX_REGION_BLOCK = 1 << 15


def _string_fusible(instruction: Instruction) -> bool:
    """Whether a numexpr string program computes ``instruction`` (where assembled programs
    are not usable): numexpr spells it, and NumPy is not faster."""
    return numexpr_form(instruction) is not None and not runs_in_numpy(instruction)


def _one_operation(step, inlined: dict) -> bool:
    """Whether a step computes one operation of numexpr's machine (a region of one product,
    say) on materialized values and constants (nothing inlined into it)."""
    instruction = step.instruction
    if len(step.body) > 1 or any(isinstance(o, int) and o in inlined for o in instruction.operands):
        return False
    return not _is_power(instruction) and vm_operations(instruction) == 1


def _ufunc_spelling(instruction: Instruction) -> bool:
    """Whether the NumPy step of ``instruction`` is one call of a NumPy/SciPy ufunc, which
    can write into a buffer (``out=``) instead of a fresh array for every block."""
    primitive = instruction.primitive
    implementation = resolved(primitive.numpy_impl)
    return (isinstance(implementation, np.ufunc) and implementation.nout == 1
            and primitive.spelling("numpy") is None
            and numpy_spelling(instruction) is not None)


# ---------------------------------------------------------------------------
# Buffers: a linear scan over liveness
# ---------------------------------------------------------------------------


def _assign_buffers(program: Program, fused: set, targets: dict) -> tuple[dict, list]:
    """``{value: buffer index}`` for the steps of ``fused`` (written into buffers) that are
    not outputs, and each buffer's kind."""
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

NUMEXPR_SETUP = '''
import numexpr as ne

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

#: How a region module's threads get programs of their own: a NumExpr program keeps its
#: registers in the object itself, so two threads running one program at once corrupt
#: each other (measured: wrong results, then a crash in free()). Each thread running
#: ``evaluate_block`` takes a list of copies, E, from ``_FREE_PROGRAMS`` and gives it back.
_PROGRAM_COPIES = '''

def _copy(program):
    """Another NumExpr object running ``program``, with registers of its own."""
    return ne.interpreter.NumExpr(program.signature, program.tempsig, program.program,
                                  program.constants, program.input_names)


def _programs():
    return [_copy(program) for program in _PROGRAMS]


_FREE_PROGRAMS = [list(_PROGRAMS)]
'''


def lower_numexpr(graph, dtype, name: str = "function", program=None) -> GeneratedModule:
    """The numexpr evaluator module of ``graph`` at ``dtype`` (example: the module docstring).

    ``program``: ``build_program(graph, name)`` when the caller has it already.
    """
    float_kind = "f" if np.dtype(dtype) == np.float32 else "d"
    tables = _vm_tables() if _vm_usable() else None
    program = _numexpr_passes(graph, name, program, float_kind, tables)
    targets = first_output_positions(program)
    # A region of one operation with a ufunc of its own is a NumPy call instead: NumPy's
    # call costs less than numexpr's (1.3 against 2.5 us for a product of 4,096 points).
    fused = {step.result for step in program.steps
             if (step.body if tables is not None else _string_fusible(step.instruction))
             and not (_one_operation(step, program.inlined) and _ufunc_spelling(step.instruction))}
    # NumPy steps that are one ufunc write into buffers too (``np.exp(b0, out=b1)``).
    into_buffer = fused | {step.result for step in program.steps
                           if step.result not in fused and _ufunc_spelling(step.instruction)}
    buffer_of, buffer_kinds = _assign_buffers(program, into_buffer, targets)
    externals: list = []
    descriptions: list = []
    programs = _NumexprPrograms(program, float_kind, tables)
    body = _block_lines(program, targets, fused, into_buffer, buffer_of, programs, externals,
                        descriptions)

    fallbacks = sum(1 for step in program.steps if step.result not in fused)
    itemsize = np.dtype(dtype).itemsize
    own_arrays = sum(1 for step in program.steps if step.result not in into_buffer)
    block_size = min(block_size_for(len(buffer_kinds) + own_arrays + 2, itemsize), MAX_REGION_BLOCK)
    header = module_header(
        program, "numexpr", dtype, [], buffer_kinds, descriptions, block_size,
    )
    setup = NUMEXPR_SETUP + (_VM_HELPER if tables is not None else "")
    listing = [f"_PROGRAMS = [{', '.join(f'_E{i}' for i in range(len(programs.lines)))}]",
               _PROGRAM_COPIES]
    source = "\n".join(
        header + [setup] + programs.lines + listing + ["", ""]
        + unpack_lines(program, len(buffer_kinds), "E") + body
    ) + "\n" + DRIVER
    note = f"{fallbacks} of {len(program.steps)} steps run in NumPy/SciPy" if fallbacks else ""
    return GeneratedModule(source, externals, "numexpr", dtype, block_size, program, note)


def _numexpr_passes(graph, name: str, program, float_kind: str, tables):
    """The compiled program: regions fused for numexpr's virtual machine when it is usable
    here, else for numexpr's expression strings."""
    if tables is None:
        return compile_program(graph, _string_fusible, name, program)
    if program is None:
        program = build_program(graph, name)
    for compiler_pass in (eliminate_dead_code, schedule_depth_first,
                          lambda p: fuse_regions(p, _vm_fusible(p, float_kind, tables)),
                          liveness):
        program = compiler_pass(program)
    return program


class _NumexprPrograms:
    """The module's numexpr programs (``_E<n> = ...`` lines), one per distinct region.

    Steps that differ only in their inputs share one program: their leaves are named
    a0, a1, ... in order, so a Hessian's 2,000 same-shaped entries become a few
    programs (each is assembled or parsed once at load)."""

    def __init__(self, program, float_kind: str, tables):
        self.program, self.float_kind, self.tables = program, float_kind, tables
        self.lines: list[str] = []
        self.index: dict[tuple, int] = {}  # a program's text -> its index in `lines`
        self.shape_index: dict[tuple, int] = {}  # a region's shape -> its program's index

    def call(self, step, spelt: dict) -> tuple[int, list]:
        """The number of the program computing ``step``, and the arguments it is called with."""
        leaf_names = {leaf: f"a{j}" for j, leaf in enumerate(step.leaves)}
        if self.tables is None:
            text = _render(step.instruction, self.program.inlined, leaf_names)
            names = [leaf_names[leaf] for leaf in step.leaves]
            boolean = [leaf in self.program.boolean_values for leaf in step.leaves]
            index = self._number(("text", text, tuple(boolean)),
                                 lambda i: f"_E{i} = _program({text!r}, {names!r}, {boolean!r})")
            return index, [spelt.get(leaf) or f"v{leaf}" for leaf in step.leaves]
        # Regions of the same shape (a gradient's 10^4 entries) are lowered once.
        shape, leaves = _region_shape(step, self.program.boolean_values)
        index = self.shape_index.get(shape)
        if index is None:
            index = self.shape_index[shape] = self._vm_program(step, leaf_names)
        return index, [spelt.get(leaf) or f"v{leaf}" for leaf in leaves]

    def _vm_program(self, step, leaf_names: dict) -> int:
        region = _lower_region(step, self.program, self.float_kind, self.tables)
        code, temporaries = _finish(region)
        names = [leaf_names[leaf] for leaf in region.leaves]
        constants = tuple(value for _, value in region.constants.values())
        kinds = "".join(region.leaf_kinds)

        def text(index: int) -> str:
            lines = [f"_E{index} = _vm({names!r}, {kinds!r}, "
                     f"({''.join(literal(c) + ', ' for c in constants)}), "
                     f"{temporaries!r}, ["]
            for operation, comment in zip(code, region.comments):
                line = f"    {operation!r},"
                lines.append(f"{line:<56s}# {comment}" if comment else line)
            lines.append("])")
            return "\n".join(lines)
        return self._number(("vm", tuple(names), kinds, constants, temporaries, tuple(code)), text)

    def _number(self, key: tuple, text) -> int:
        index = self.index.get(key)
        if index is None:
            index = self.index[key] = len(self.lines)
            self.lines.append(text(index))
        return index


def _block_lines(program, targets: dict, fused: set, into_buffer: set, buffer_of: dict,
                 programs: _NumexprPrograms, externals: list, descriptions: list) -> list[str]:
    """The body of ``evaluate_block``: a numexpr program, a ufunc into a buffer or a NumPy
    call per step, ``del`` of the NumPy steps' arrays after their last use, the outputs."""
    body: list[str] = []
    # A value written into a buffer or an output slot is spelt by that name wherever
    # it is read, not given a name of its own: a deep graph has 10^4-10^5 steps, and a
    # ``v5 = b0`` line after each, with a ``del`` of it later, was half the lines of
    # ``evaluate_block`` and of what compiling it costs (time, and the parser's
    # memory: about 8 KB per line). A buffer is reused only after its value is dead,
    # so the name is right for the value's whole life; a ``del`` of it would free nothing.
    spelt: dict[int, str] = {}
    for step, freed in zip(program.steps, program.frees):
        position = targets.get(step.result)
        destination = f"o{position}" if position is not None else f"b{buffer_of.get(step.result)}"
        if step.result in fused:
            index, arguments = programs.call(step, spelt)
            body.append(f"    E[{index}]({', '.join(arguments)}, out={destination}, **_CALL)")
            spelt[step.result] = destination
        elif step.result in into_buffer:
            arguments = [operand_text(o, spelt) for o in step.instruction.operands]
            body.append(f"    {numpy_spelling(step.instruction)(arguments + [f'out={destination}'])}")
            spelt[step.result] = destination
        else:
            spelling = numpy_spelling(step.instruction)
            if spelling is None:
                call = external_call(step.instruction, externals, descriptions, spelt)
            else:
                call = spelling([operand_text(o, spelt) for o in step.instruction.operands])
            if position is None:
                body.append(f"    v{step.result} = {call}")
            else:
                body.append(f"    o{position}[...] = {call}")
                spelt[step.result] = f"o{position}"
        named = [v for v in freed if spelt.pop(v, None) is None]  # the NumPy steps' own arrays
        if named:
            body.append(f"    del {', '.join(f'v{v}' for v in named)}")
    body.extend(output_lines(program, targets))
    body.append("    return None")
    return body
