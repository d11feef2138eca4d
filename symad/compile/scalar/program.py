"""The compiler's program: a Graph renumbered into plain integers, and the passes over it.

A :class:`Program` is the Graph with SymPy taken out: every value (input or
node result) is an integer ``v0, v1, ...`` (inputs first), every operand is
either such a value or a :class:`Constant`. The passes are small functions
over it, each named for what it does, run in this order by
:func:`compile_program`:

1. :func:`eliminate_dead_code` -- instructions no output depends on are dropped
   (the Graph builder already does this; the pass keeps the compiler correct
   on any Graph it is given).
2. :func:`schedule_depth_first` -- reorders the instructions so that each
   output is computed right after what it needs (shorter live ranges).
3. :func:`fuse_regions` -- groups instructions into regions, each a small DAG
   with one result, for numexpr's virtual machine (values shared inside a
   region stay in registers); :func:`fuse` does the same with trees, for
   numexpr strings. What is left are *steps*: one evaluation each, reading
   materialized values only.
4. :func:`liveness` -- for every step, the values whose last use it is, so a
   backend frees (or reuses the buffer of) each temporary as early as possible.

Constant folding and common subexpressions need no pass here: the Graph
builder folds constant operands and hash-conses equal nodes as it records.

>>> import sympy
>>> from symad.graph import GraphBuilder
>>> from symad.primitives import sin_p, mul_p, exp_p
>>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
>>> s = b.record(sin_p, (x,))
>>> graph = b.finish([b.record(mul_p, (b.record(exp_p, (s,)), s))])
>>> program = compile_program(graph, lambda instruction: True)
>>> [(step.result, step.leaves) for step in program.steps]   # exp(v1) is inlined into v3
[(1, (0,)), (3, (1,))]
>>> program.frees
((), (1,))
"""

from __future__ import annotations

import ctypes
import itertools
import math
import operator
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from symad.errors import CompileError
from symad.graph import Graph, constant_value
from symad.ir.primitive import ARITHMETIC
from symad.primitives import pow_p

__all__ = [
    "Constant",
    "Instruction",
    "OperandTable",
    "Program",
    "Step",
    "build_program",
    "compile_program",
    "eliminate_dead_code",
    "fuse",
    "fuse_regions",
    "schedule_depth_first",
    "liveness",
    "safe_comment",
    "safe_comments",
]

#: A fused expression holds at most this many operations and distinct leaves: numexpr
#: numbers its registers with one byte and NumPy's iterator takes at most 64 operands.
MAX_FUSED_OPERATIONS = 48
MAX_FUSED_LEAVES = 24
#: Shared values this cheap (arithmetic, at most this many operations) are recomputed
#: in each consumer instead of being stored.
CHEAP_OPERATIONS = 2


@dataclass(frozen=True)
class Constant:
    """A constant operand: a Python float or bool."""

    value: float | bool


class Instruction(NamedTuple):
    """``v{result} = primitive(*operands, **params)``; operands are ints (values) or Constants.

    A named tuple rather than a frozen dataclass: the compiler makes one per
    node, and a tuple is several times cheaper to create.
    """

    result: int
    primitive: object
    operands: tuple
    params: tuple
    boolean: bool


class Step(NamedTuple):
    """One evaluation: ``instruction`` with its inlined operands, reading ``leaves`` only.

    ``body`` (set by :func:`fuse_regions` only): every instruction the step
    computes, in order, ending with ``instruction`` -- a small DAG whose shared
    values stay in registers instead of full-size temporaries.
    """

    result: int
    instruction: Instruction
    leaves: tuple[int, ...]
    body: tuple = ()


class OperandTable(NamedTuple):
    """A program's instructions as flat integer arrays, for passes that work on all at once.

    Operand *codes* number values ``0 .. value_count-1`` (inputs first, then one
    per instruction) and constants after them: code ``value_count + k`` is
    ``constants[k]``. The operands of instruction ``i`` (result
    ``input_count + i``) are ``codes[offsets[i]:offsets[i] + arities[i]]``.
    :func:`build_program` makes it with a few bulk passes over the Graph, and a
    wide graph is planned from it (``symad.compile.scalar.levels``) without making an
    :class:`Instruction` per node.
    """

    input_count: int
    primitives: list
    params: list
    arities: np.ndarray
    offsets: np.ndarray
    codes: np.ndarray
    #: distinct Constant operands (one per atom), in order of first use by the operands, then the outputs
    constants: list
    #: the outputs' codes
    output_codes: np.ndarray
    #: instruction ``i``'s primitive is ``distinct_primitives[primitive_numbers[i]]``: passes
    #: that classify instructions by primitive do it per distinct primitive, with NumPy
    primitive_numbers: np.ndarray
    distinct_primitives: list

    @property
    def value_count(self) -> int:
        return self.input_count + len(self.primitives)

    @classmethod
    def from_instructions(cls, input_count: int, instructions: Sequence[Instruction],
                          outputs: Sequence) -> OperandTable:
        """The table of instructions numbered ``input_count, input_count + 1, ...`` in order."""
        # Codes number the instructions by position, whatever their results are
        # numbered (a pass may have reordered or dropped some).
        code_of_value = {instruction.result: input_count + index
                         for index, instruction in enumerate(instructions)}
        value_count = input_count + len(instructions)
        constant_code: dict = {}  # id(Constant) -> code
        constants: list = []

        def code(operand) -> int:
            if operand.__class__ is not Constant:
                return operand if operand < input_count else code_of_value[operand]
            found = constant_code.get(id(operand))
            if found is None:
                found = constant_code[id(operand)] = value_count + len(constants)
                constants.append(operand)
            return found

        codes = [code(operand) for instruction in instructions for operand in instruction.operands]
        output_codes = [code(operand) for operand in outputs]
        arities = np.array([len(instruction.operands) for instruction in instructions], np.int64)
        primitives = [instruction.primitive for instruction in instructions]
        return cls(input_count, primitives, [instruction.params for instruction in instructions],
                   arities, start_offsets(arities), np.array(codes, np.int64), constants,
                   np.array(output_codes, np.int64), *_numbered_primitives(primitives))

    def instructions(self) -> list[Instruction]:
        """The :class:`Instruction` of every row of the table, in order."""
        operand_of_code = list(range(self.value_count)) + self.constants
        flat = list(map(operand_of_code.__getitem__, self.codes.tolist()))
        bounds = self.offsets.tolist() + [len(flat)]
        operands = [tuple(flat[start:stop]) for start, stop in zip(bounds, bounds[1:])]
        returns_boolean = {p: bool(p.returns_boolean) for p in set(self.primitives)}
        # tuple.__new__ straight from C: a named tuple's own constructor is a Python
        # function, and this runs once per node.
        return list(map(tuple.__new__, itertools.repeat(Instruction),
                        zip(range(self.input_count, self.value_count), self.primitives, operands,
                            self.params, map(returns_boolean.__getitem__, self.primitives))))

    def boolean_values(self) -> set[int]:
        """The values that hold truth values (results of comparisons)."""
        returns_boolean = np.array([bool(p.returns_boolean) for p in self.distinct_primitives], bool)
        mask = returns_boolean[self.primitive_numbers]
        return set((np.flatnonzero(mask) + self.input_count).tolist())


def start_offsets(arities: np.ndarray) -> np.ndarray:
    """Where each instruction's operands start in the flat ``codes``."""
    starts = np.zeros(len(arities), np.int64)
    np.cumsum(arities[:-1], out=starts[1:])
    return starts


class Program:
    """Inputs ``v0 .. v{input_count-1}``, instructions in order, and output operands.

    A program from :func:`build_program` holds its :class:`OperandTable` and makes
    its ``instructions`` from it only when they are first asked for: a wide
    graph is planned and lowered from the table alone. Assigning
    ``instructions`` (as the passes do) drops the table, which no longer describes them.
    """

    def __init__(self, name: str, input_count: int, input_names: tuple[str, ...],
                 instructions: list[Instruction] | None, outputs: tuple,
                 boolean_values: set[int] | None = None, table: OperandTable | None = None):
        if instructions is None and table is None:
            raise ValueError("a Program needs its instructions or their OperandTable")
        self.name = name
        self.input_count = input_count
        self.input_names = input_names
        self._instructions = instructions
        #: the instructions as flat arrays, while it still describes them (else None)
        self.table = table
        self.outputs = outputs
        #: values that hold truth values (comparison results), for buffer and output types
        self.boolean_values = set() if boolean_values is None else boolean_values
        #: filled by ``fuse``: the materialized evaluations, and the inlined instructions by result
        self.steps: list[Step] = []
        self.inlined: dict[int, Instruction] = {}
        #: filled by ``liveness``: per step, the values read for the last time by it
        self.frees: tuple = ()

    @property
    def instructions(self) -> list[Instruction]:
        if self._instructions is None:
            self._instructions = self.table.instructions()
        return self._instructions

    @instructions.setter
    def instructions(self, instructions: list[Instruction]) -> None:
        self._instructions = instructions
        self.table = None

    @property
    def instruction_count(self) -> int:
        return len(self._instructions) if self._instructions is not None else len(self.table.primitives)

    def operand_table(self) -> OperandTable:
        """The instructions as an :class:`OperandTable` (made from them if not kept)."""
        if self.table is None:
            self.table = OperandTable.from_instructions(self.input_count, self._instructions,
                                                        self.outputs)
        return self.table

    def outputs_are_boolean(self) -> list[bool]:
        """Whether each output, in order, is a truth value (a wide gradient has 10^5 outputs)."""
        boolean = self.boolean_values
        return [isinstance(o.value, bool) if o.__class__ is Constant else o in boolean
                for o in self.outputs]

    def __repr__(self) -> str:
        return (f"<Program {self.name!r}: {self.input_count} inputs, "
                f"{self.instruction_count} instructions, {len(self.outputs)} outputs>")


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def safe_comment(text: str, limit: int = 60) -> str:
    """``text`` made safe for a one-line comment: control characters and newlines removed.

    >>> safe_comment("x\\n__import__('os')")
    "x__import__('os')"
    """
    return _UNPRINTABLE.sub("", str(text))[:limit]


def safe_comments(texts: Sequence, limit: int = 60) -> list[str]:
    """:func:`safe_comment` of each of ``texts``; one search over all of them finds that
    none needs cleaning, as names nearly always do not (10^5 input names, one by one,
    took 50 ms).

    >>> safe_comments(["x[0]", "y\\n"])
    ['x[0]', 'y']
    """
    texts = list(map(str, texts))
    if _UNPRINTABLE.search("".join(texts)) is None:
        return [text[:limit] for text in texts]
    return [safe_comment(text, limit) for text in texts]


# ---------------------------------------------------------------------------
# Graph -> Program
# ---------------------------------------------------------------------------


def build_program(graph: Graph, name: str = "function") -> Program:
    """Number the Graph's values and turn its constants into Python values.

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import mul_p
    >>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
    >>> program = build_program(b.finish([b.record(mul_p, (x, sympy.Float(0.5)))]))
    >>> program.instructions[0].operands
    (Constant(value=0.5), 0)
    """
    inputs, nodes = graph.inputs, graph.nodes
    input_count, value_count = len(inputs), len(inputs) + len(nodes)
    # A wide gradient has 10^5 nodes, and a Python statement per node or operand
    # costs milliseconds: the table is made with bulk passes (map, zip, NumPy),
    # and only the atoms that are not an input or a node by identity --
    # constants, few and shared, and anything unusual -- are looked at one by one.
    values = _IdentityIndex(itertools.chain(inputs, nodes), value_count)  # a node is its atom
    args = list(map(_ARGS, nodes))
    arities = np.fromiter(map(len, args), np.int64, len(nodes))
    offsets = start_offsets(arities)
    codes, ids = values.find(itertools.chain.from_iterable(args), int(arities.sum()))
    # An operand must be an earlier value: a later node is looked at below.
    owner = np.repeat(np.arange(input_count, value_count, dtype=np.int32), arities)
    codes[codes >= owner] = -1
    resolver = _AtomResolver(graph, value_count)
    unresolved = np.flatnonzero(codes < 0)
    if len(unresolved):
        # Each distinct atom once, in order of first use (so constants are numbered so).
        _, first, inverse = np.unique(ids[unresolved], return_index=True, return_inverse=True)
        code_of_distinct = np.empty(len(first), np.int64)
        for distinct in np.argsort(first, kind="stable").tolist():
            position = int(unresolved[first[distinct]])
            node_value = int(owner[position])
            node = node_value - input_count
            atom = args[node][position - int(offsets[node])]
            code_of_distinct[distinct] = resolver.code(atom, before=node_value)
        codes[unresolved] = code_of_distinct[inverse.reshape(-1)]
    del ids, owner  # 2 x 10^6 operands: each array is tens of MB
    output_codes, _ = values.find(graph.outputs, len(graph.outputs))
    for position in np.flatnonzero(output_codes < 0).tolist():
        output_codes[position] = resolver.code(graph.outputs[position], before=value_count)
    primitives = list(map(_PRIMITIVE, nodes))
    # A node's params are a tuple already (the builder hashes them to share equal nodes).
    table = OperandTable(input_count, primitives, list(map(_PARAMS, nodes)),
                         arities, offsets, codes, resolver.constants, output_codes,
                         *_numbered_primitives(primitives))
    outputs = output_codes.tolist()
    for position in np.flatnonzero(output_codes >= value_count).tolist():
        outputs[position] = resolver.constants[outputs[position] - value_count]
    return Program(
        name=name,
        input_count=input_count,
        input_names=tuple(map(_NAME, inputs)),
        instructions=None,
        outputs=tuple(outputs),
        boolean_values=table.boolean_values(),
        table=table,
    )


class _IdentityIndex:
    """Finds objects among ``values`` by identity: each one's position, the last if repeated.

    A dict keyed by ``id`` does this too, but at 10^6 values its build and look-ups
    were 0.55 s, most of a wide gradient's :func:`build_program` (a hash table far
    larger than the caches, and an int object per key); the ids as one sorted
    NumPy array, searched with ``np.searchsorted``, take a third of that. Objects
    allocated one after another mostly have increasing ids, so the sort is cheap.
    The values must stay alive while the index is used (ids are addresses).
    """

    def __init__(self, values, count: int):
        ids = _ids(values, count)
        self.order = np.argsort(ids, kind="stable")  # a repeated value: positions ascending
        self.sorted_ids = ids[self.order]

    def find(self, atoms, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, ids)`` of the ``count`` ``atoms``: -1 where an atom is no value."""
        ids = _ids(atoms, count)
        if not len(self.sorted_ids):
            return np.full(count, -1, np.int64), ids
        # The last equal id: that value's last position, as a dict built in order keeps it.
        found = np.searchsorted(self.sorted_ids, ids, side="right")
        found -= 1
        np.maximum(found, 0, out=found)
        missing = self.sorted_ids[found] != ids
        positions = self.order[found]
        positions[missing] = -1
        return positions, ids


def _numbered_primitives(primitives: list) -> tuple[np.ndarray, list]:
    """``(numbers, distinct)``: ``primitives[i] is distinct[numbers[i]]``, distinct in order
    of first use. A primitive is equal only to itself, so they are numbered by identity,
    through an :class:`_IdentityIndex` (a third faster than a dict look-up each)."""
    distinct = list(dict.fromkeys(primitives))
    numbers, _ = _IdentityIndex(distinct, len(distinct)).find(primitives, len(primitives))
    return numbers, distinct


def _ids(objects, count: int) -> np.ndarray:
    """The ``id`` of each of the ``count`` ``objects``, as an array.

    In CPython an object's id is its address, and an object array holds the
    addresses of its items: reading them there takes half the time of calling
    ``id`` per object, which makes an int object each (2.2 x 10^6 operands:
    120 ms). Elsewhere, ``id``.
    """
    if sys.implementation.name != "cpython":
        return np.fromiter(map(id, objects), np.uintp, count)
    held = np.fromiter(objects, object, count)
    addresses = (ctypes.c_size_t * count).from_address(held.ctypes.data)
    return np.frombuffer(addresses, np.uintp).copy()  # a copy: held frees its memory


_ARGS = operator.attrgetter("args")
_PRIMITIVE = operator.attrgetter("primitive")
_PARAMS = operator.attrgetter("params")
_NAME = operator.attrgetter("name")


class _AtomResolver:
    """Codes of the operands :func:`build_program` does not find by identity.

    Constants: one :class:`Constant` per distinct atom, numbered after the values
    in order of first use. A symbol equal to an input but not the
    same object: that value, if defined before its use. Anything else is a
    symbol of an enclosing trace (``CompileError``) or a malformed graph (``KeyError``).
    """

    def __init__(self, graph: Graph, value_count: int):
        self.graph = graph
        self.value_count = value_count
        self.constants: list[Constant] = []
        self._constant_code: dict = {}  # id(atom) -> code
        self._by_equality: dict | None = None

    def code(self, atom, before: int) -> int:
        if not atom.is_Symbol:
            found = self._constant_code.get(id(atom))
            if found is None:
                found = self._constant_code[id(atom)] = self.value_count + len(self.constants)
                self.constants.append(Constant(constant_value(atom)))
            return found
        if self._by_equality is None:
            symbols = itertools.chain(self.graph.inputs, self.graph.nodes)
            self._by_equality = {}
            for value, symbol in enumerate(symbols):
                self._by_equality.setdefault(symbol, value)
        value = self._by_equality.get(atom)
        if value is not None and value < before:
            return value
        free = self.graph.free_symbols()
        if not free:  # neither an input nor an earlier node, yet not free: a malformed graph
            raise KeyError(atom)
        names = ", ".join(sorted(str(s) for s in free))
        raise CompileError(
            f"the graph refers to values of an enclosing trace ({names}); it can only be "
            "evaluated inside that trace"
        )


# ---------------------------------------------------------------------------
# Passes
# ---------------------------------------------------------------------------


def eliminate_dead_code(program: Program) -> Program:
    """Drop instructions that no output depends on."""
    live = {o for o in program.outputs if isinstance(o, int)}
    kept = []
    for instruction in reversed(program.instructions):
        if instruction.result in live:
            kept.append(instruction)
            live.update(o for o in instruction.operands if isinstance(o, int))
    kept.reverse()
    program.instructions = kept
    return program


def schedule_depth_first(program: Program) -> Program:
    """Reorder instructions so each output is computed right after what it needs.

    The recorded order is forward pass first, then the whole reverse pass, so
    every forward value stays alive until the backward pass reaches it. A
    depth-first post-order from the outputs (iterative: no recursion limit)
    is still a topological order but computes, say, one gradient element at
    a time, so temporaries die sooner and fewer buffers are needed.
    """
    by_result = {ins.result: ins for ins in program.instructions}
    ordered: list[Instruction] = []
    placed: set[int] = set()
    for root in program.outputs:
        if not isinstance(root, int) or root not in by_result or root in placed:
            continue
        stack = [(root, False)]
        while stack:
            value, expanded = stack.pop()
            if value in placed:
                continue
            instruction = by_result[value]
            if expanded:
                placed.add(value)
                ordered.append(instruction)
                continue
            stack.append((value, True))
            for o in reversed(instruction.operands):
                if isinstance(o, int) and o in by_result and o not in placed:
                    stack.append((o, False))
    program.instructions = ordered
    return program


def fuse(program: Program, fusible: Callable[[Instruction], bool]) -> Program:
    """Inline single-use temporaries into their consumer where both are ``fusible``.

    A value used once, by a fusible consumer, and not an output, becomes part
    of its consumer's expression instead of a full-size temporary. Shared
    values (used twice or more) stay materialized -- recomputing them would
    cost more than reading them -- unless they are one or two arithmetic
    operations, which are recomputed in each consumer. Expressions are capped in size (see
    ``MAX_FUSED_OPERATIONS``); past the cap an operand is materialized.
    With ``fusible`` always False every instruction is its own step.
    """
    uses: dict[int, int] = {}
    consumers_fuse: dict[int, bool] = {}
    can_fuse = {ins.result: fusible(ins) for ins in program.instructions}
    for instruction in program.instructions:
        for o in instruction.operands:
            if isinstance(o, int):
                uses[o] = uses.get(o, 0) + 1
                consumers_fuse[o] = consumers_fuse.get(o, True) and can_fuse[instruction.result]
    outputs = {o for o in program.outputs if isinstance(o, int)}
    by_result = {ins.result: ins for ins in program.instructions}

    # For each instruction: (operation count, leaves) of the expression rooted at it.
    sizes: dict[int, tuple[int, frozenset]] = {}
    inlined: dict[int, Instruction] = {}
    for instruction in program.instructions:
        operations, leaves = 1, set()
        for o in instruction.operands:
            if not isinstance(o, int):
                operations += 1  # constants take a register too
                continue
            if o in inlined:  # a cheap shared value, recomputed in every consumer
                sub_operations, sub_leaves = sizes[o]
                operations += sub_operations
                leaves |= sub_leaves
                continue
            candidate = (
                can_fuse[instruction.result]
                and o in can_fuse and can_fuse[o]
                and uses[o] == 1 and o not in outputs
            )
            if candidate:
                sub_operations, sub_leaves = sizes[o]
                merged = leaves | sub_leaves
                if (operations + sub_operations <= MAX_FUSED_OPERATIONS
                        and len(merged) <= MAX_FUSED_LEAVES):
                    operations += sub_operations
                    leaves = merged
                    inlined[o] = by_result[o]
                    continue
            leaves.add(o)
        sizes[instruction.result] = (operations, frozenset(leaves))
        # A shared value costing at most CHEAP_OPERATIONS arithmetic operations is
        # recomputed inside each consumer rather than stored: an add or multiply in
        # registers costs far less than a full pass over memory (``4*l`` and ``1 - l``
        # of the logistic map, ``x*y`` feeding several functions).
        if (can_fuse[instruction.result] and uses.get(instruction.result, 0) > 1
                and consumers_fuse.get(instruction.result, False)
                and instruction.result not in outputs
                and _is_cheap(instruction)
                and operations <= CHEAP_OPERATIONS):
            inlined[instruction.result] = instruction

    program.inlined = inlined
    program.steps = [
        Step(ins.result, ins, _ordered_leaves(ins, inlined))
        for ins in program.instructions if ins.result not in inlined
    ]
    return program


#: A region (one step of :func:`fuse_regions`) holds at most this many operations of
#: numexpr's virtual machine and this many distinct materialized leaves; and it needs
#: at most ``MAX_REGION_REGISTERS`` registers (numexpr numbers them -- output, leaves,
#: constants, temporaries -- with one byte, 255 meaning "none"), counted exactly on
#: the region's live values.
MAX_REGION_OPERATIONS = 1024
MAX_REGION_REGISTERS = 250
#: A value shared by several regions is recomputed in each of them only when it is
#: one binary arithmetic operation sitting at most this many such operations above
#: materialized values, and read by at most ``RECOMPUTE_READERS`` regions (an n-ary
#: sum read by twenty regions -- a Taylor coefficient -- is stored once instead).
RECOMPUTE_DEPTH = 2
RECOMPUTE_READERS = 3


def fuse_regions(program: Program, fusible: Callable[[Instruction], bool]) -> Program:
    """Partition fusible instructions into regions with one result each: one step per region.

    Unlike :func:`fuse`, whose steps are trees, a region is a DAG: a value used
    several times *inside* one region is computed once there and kept in a
    register, so long chains of arithmetic whose values are reused (the forward
    and reverse sweeps of an iterated map, the coefficients of a Taylor series)
    become one evaluation with no full-size temporary at all.

    Regions grow from their results towards their operands, walking the
    instructions backwards: a value joins the region that reads it when every
    reader is in that one region and the region stays within
    ``MAX_REGION_OPERATIONS`` operations; otherwise it is materialized and
    starts a region of its own. So every instruction is computed once --
    except a shared binary arithmetic operation at most ``RECOMPUTE_DEPTH``
    such operations above stored values and read by at most
    ``RECOMPUTE_READERS`` regions, which is recomputed in each of them rather
    than stored. A region that then reads more than ``MAX_FUSED_LEAVES``
    leaves or needs more than ``MAX_REGION_REGISTERS`` registers (its live
    values, leaves and constants) is partitioned again, the same way, with
    half the operations. (Growing
    regions forwards and cutting them where too large, as this pass once did,
    computed the values a cut region shared with its neighbours in both: a
    20th derivative's 633 operations became 13,924, and numexpr ran 5x slower
    than NumPy.) Outputs, non-fusible results and the values non-fusible
    instructions read are always materialized.

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import add_p, mul_p, sin_p
    >>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
    >>> s = b.record(sin_p, (x,))
    >>> graph = b.finish([b.record(add_p, (b.record(mul_p, (s, s)), s))])
    >>> program = fuse_regions(build_program(graph), lambda instruction: True)
    >>> [(step.result, step.leaves, [i.result for i in step.body]) for step in program.steps]
    [(3, (0,), [1, 2, 3])]
    """
    instructions = program.instructions
    can_fuse = {ins.result: bool(fusible(ins)) for ins in instructions}
    # Materialized by necessity: outputs, non-fusible results, values a non-fusible reads.
    roots = {o for o in program.outputs if isinstance(o, int)}
    for instruction in instructions:
        if not can_fuse[instruction.result]:
            roots.update(o for o in instruction.operands if isinstance(o, int))
    fused = [ins for ins in instructions if can_fuse[ins.result]]
    members = _partition(fused, roots, MAX_REGION_OPERATIONS)
    # A region reading too many leaves, or whose live values outgrow the registers, is
    # partitioned again, smaller (a region's frontier is wide while it grows -- a
    # Taylor coefficient reads every earlier one -- and narrow once it is whole).
    pending = list(members)
    while pending:
        root = pending.pop()
        body = members[root]
        if len(body) == 1 or (len(_region_leaves(body)) <= MAX_FUSED_LEAVES
                              and _region_registers(body) <= MAX_REGION_REGISTERS):
            continue
        budget = max(1, sum(map(vm_operations, body)) // 2)
        smaller = _partition(body, {root}, budget)
        members.update(smaller)
        pending.extend(smaller)

    steps = []
    inlined: dict[int, Instruction] = {}
    for instruction in instructions:
        v = instruction.result
        if not can_fuse[v]:
            steps.append(Step(v, instruction, _ordered_leaves(instruction, {})))
        elif v in members:
            body = members[v]
            steps.append(Step(v, instruction, _region_leaves(body), tuple(body)))
        else:
            inlined[v] = instruction
    program.inlined = inlined
    program.steps = steps
    return program


def _partition(instructions: Sequence[Instruction], roots: set, budget: int) -> dict:
    """``{root: its region's instructions, in order}`` for ``instructions`` (in order; those
    whose results are read from outside them are in ``roots``): see :func:`fuse_regions`."""
    consumers: dict[int, list[int]] = {}
    for instruction in instructions:
        for o in instruction.operands:
            if isinstance(o, int):
                consumers.setdefault(o, []).append(instruction.result)
    regions_of: dict[int, tuple[int, ...]] = {}  # value -> roots of the regions computing it
    members: dict[int, list[Instruction]] = {}  # root -> its members, latest first
    operations: dict[int, int] = {}  # root -> VM operations of its members
    depth: dict[int, int] = {}  # recomputed values: cheap operations from here to a region root

    for instruction in reversed(instructions):
        v = instruction.result
        cost = vm_operations(instruction)
        if v not in roots:
            readers = consumers.get(v, ())
            owners = list(dict.fromkeys(root for c in readers for root in regions_of[c]))
            level = 1 + max((depth.get(c, 0) for c in readers), default=0)
            joins = len(owners) == 1 or (
                1 < len(owners) <= RECOMPUTE_READERS and len(instruction.operands) <= 2
                and _is_cheap(instruction) and level <= RECOMPUTE_DEPTH)
            if joins and all(operations[root] + cost <= budget for root in owners):
                for root in owners:
                    members[root].append(instruction)
                    operations[root] += cost
                regions_of[v] = tuple(owners)
                if len(owners) > 1:
                    depth[v] = level
                continue
        regions_of[v] = (v,)
        members[v], operations[v] = [instruction], cost
    return {root: body[::-1] for root, body in members.items()}


def _region_registers(body: Sequence[Instruction]) -> int:
    """The registers numexpr's machine needs for a region (``body`` in order, the last
    its result): the output, its leaves, its distinct constants, and its most values
    alive at once -- plus two for the intermediate steps of one instruction (a power's
    running product and square, an n-ary sum's running total)."""
    inside = {instruction.result for instruction in body}
    last_read: dict[int, int] = {}
    leaves, constants = set(), set()
    for index, instruction in enumerate(body):
        for o in instruction.operands:
            if isinstance(o, int):
                if o in inside:
                    last_read[o] = index
                else:
                    leaves.add(o)
            else:
                constants.add((type(o.value), o.value))
    alive = peak = 0
    dying = [0] * len(body)
    for index in last_read.values():
        dying[index] += 1
    for index in range(len(body) - 1):  # the last writes the output register
        alive += 1 - dying[index]
        peak = max(peak, alive)
    return 1 + len(leaves) + len(constants) + peak + 2


def vm_operations(instruction: Instruction) -> int:
    """At most how many operations of numexpr's machine ``instruction`` becomes (see
    ``numexpr_backend._emit``): one per operator of its numexpr spelling, one per binary
    step of an n-ary sum or product, the multiplications of a constant integral power;
    at least one."""
    return max(1, _tree_operations(instruction.primitive.spelling("numexpr"), instruction))


def _tree_operations(tree, instruction: Instruction) -> int:
    if not isinstance(tree, tuple):
        return 0  # an operand or a literal
    operator, *parts = tree
    if parts == [...]:
        return max(1, len(instruction.operands) - 1)
    if operator == "**" and parts == [0, 1] and len(instruction.operands) == 2:
        exponent = instruction.operands[1]
        if isinstance(exponent, Constant) and not isinstance(exponent.value, bool):
            x = abs(float(exponent.value))
            if math.isfinite(x) and x <= 50:
                return 2 * int(x).bit_length() + 3  # squarings, products, sqrt, reciprocal
    return 1 + sum(_tree_operations(part, instruction) for part in parts)


def _region_leaves(body: Sequence[Instruction]) -> tuple[int, ...]:
    """The values a region reads from outside itself, in first-use order."""
    inside = {instruction.result for instruction in body}
    leaves: dict[int, None] = {}
    for instruction in body:
        for o in instruction.operands:
            if isinstance(o, int) and o not in inside:
                leaves.setdefault(o)
    return tuple(leaves)


def _is_cheap(instruction: Instruction) -> bool:
    """Arithmetic, or a small constant integer power (numexpr turns ``x**2.0`` into ``x*x``)."""
    if instruction.primitive.cost <= ARITHMETIC:
        return True
    if instruction.primitive is pow_p:
        exponent = instruction.operands[1]
        return (isinstance(exponent, Constant) and not isinstance(exponent.value, bool)
                and float(exponent.value).is_integer() and 2 <= exponent.value <= 3)
    return False


def _ordered_leaves(root: Instruction, inlined: dict) -> tuple[int, ...]:
    """The materialized values an expression reads, in first-use order (no recursion)."""
    leaves: list[int] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        instruction = stack.pop()
        for o in reversed(instruction.operands):
            if not isinstance(o, int):
                continue
            if o in inlined:
                stack.append(inlined[o])
            elif o not in seen:
                seen.add(o)
                leaves.append(o)
    return tuple(leaves)


def liveness(program: Program) -> Program:
    """For each step, the temporaries read for the last time there (outputs are never freed)."""
    last_use: dict[int, int] = {}
    for index, step in enumerate(program.steps):
        for leaf in step.leaves:
            last_use[leaf] = index
    keep = {o for o in program.outputs if isinstance(o, int)} | set(range(program.input_count))
    frees: list[list[int]] = [[] for _ in program.steps]
    for value, index in last_use.items():
        if value not in keep:
            frees[index].append(value)
    program.frees = tuple(tuple(sorted(f)) for f in frees)
    return program


def compile_program(graph: Graph, fusible: Callable[[Instruction], bool],
                    name: str = "function", program: Program | None = None) -> Program:
    """Graph -> Program through every pass: dead code, fusion, liveness.

    ``program``: ``build_program(graph, name)`` when the caller has it already.
    """
    if program is None:
        program = build_program(graph, name)
    for compiler_pass in (eliminate_dead_code,
                          schedule_depth_first,
                          lambda p: fuse(p, fusible),
                          liveness):
        program = compiler_pass(program)
    return program


def max_live(program: Program, counted: Sequence[int] | None = None) -> int:
    """The most temporaries alive at once (the working set, in block-sized arrays)."""
    counted_set = None if counted is None else set(counted)
    alive, peak = 0, 0
    for step, freed in zip(program.steps, program.frees):
        if counted_set is None or step.result in counted_set:
            alive += 1
        peak = max(peak, alive)
        alive -= sum(1 for v in freed if counted_set is None or v in counted_set)
    return peak
