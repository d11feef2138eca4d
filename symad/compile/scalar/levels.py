"""Wide graphs, evaluated level by level: one NumPy call per group of like operations.

The gradient of a function of a 1,000-element array is thousands of small
independent expressions. Lowered region by region, that is one line of
Python (one numexpr or NumPy call) per region, and both compiling those lines
and running them cost far more than the arithmetic: about 4 ms per evaluation
of 11,000 nodes at one point, and 0.1 s to compile them.

Here every value (input, constant or instruction result) gets a row of one
table of shape ``(rows, points)``. An instruction's *level* is one more than
the highest level among its operands (inputs and constants are level 0), so
the instructions of one level never read each other. Instructions of the same
level, primitive, parameters and number of operands form a *group*, evaluated
by one call: its operand rows are gathered (``T[index]``, shape ``(operands,
members, points)``) and its results written to its own contiguous rows. The
gradient of ``sum(sin(x) * exp(-x**2))`` over 10⁴ elements is 110,000
instructions in a few dozen groups.

The calls are each primitive's NumPy spelling (the numpy backend's table), so
values are exactly the numpy backend's. Sums of three or more terms are an
``np.add`` per term into the running total (``np.add.accumulate`` over the
stacked terms where they are short): the same additions, left to right, as
``a + b + c``.

:func:`wide_plan` decides: a graph is *wide* when it has at least
``WIDE_MIN_OPERATIONS`` instructions and its groups average at least
``WIDE_MIN_GROUP`` members. The numexpr and numpy backends lower wide graphs
this way (their module's ``note`` says so); other graphs keep their usual
lowering, whose regions suit long chains of few operations per level.

>>> import sympy
>>> from symad.graph import GraphBuilder
>>> from symad.compile.scalar.program import build_program
>>> from symad.primitives import sin_p, mul_p
>>> xs = sympy.symbols("x:3"); b = GraphBuilder()
>>> for x in xs: b.add_input(x)
>>> program = build_program(b.finish([b.record(mul_p, (b.record(sin_p, (x,)), x)) for x in xs]))
>>> plan = plan_levels(program)
>>> [(group.primitive.name, group.first_row, group.operand_rows.tolist()) for group in plan.groups]
[('sin', 3, [[0, 1, 2]]), ('multiply', 6, [[0, 1, 2], [3, 4, 5]])]
>>> plan.is_wide   # far too small to be worth it
False
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from symad.compile.modules import GeneratedModule, is_builtin_primitive
from symad.compile.scalar.program import Constant, Instruction, Program, safe_comment, start_offsets
from symad.compile.scalar.source import (
    MAX_BLOCK,
    RUN,
    WORKING_SET_BYTES,
    literal,
    module_header,
    numpy_spelling,
)

__all__ = ["LevelGroup", "LevelPlan", "plan_levels", "wide_plan", "lower_levels",
           "WIDE_MIN_OPERATIONS", "WIDE_MIN_GROUP"]

#: A graph is lowered level by level only from this many instructions on (smaller
#: graphs run as fast either way; 256 rather than 1,000 since issue 20: the per-sample
#: gradient of an 8-32-1 MLP, 804 instructions in 14 groups, ran 1.9x faster level by
#: level than region by region, 648 against 1,220 ms for 10^5 samples in one run) ...
WIDE_MIN_OPERATIONS = 256
#: ... and when its groups average at least this many instructions: below that,
#: the per-call cost of gathering is not repaid (a chain of 10^4 steps is 10^4
#: groups of one).
WIDE_MIN_GROUP = 16


class LevelGroup(NamedTuple):
    """Instructions evaluated by one call: same level, primitive, parameters and arity.

    ``operand_rows[j, i]`` (int32) is the table row of operand ``j`` of member ``i``;
    member ``i``'s result goes to row ``first_row + i``.
    """

    primitive: object
    params: tuple
    first_row: int
    operand_rows: np.ndarray
    boolean: bool


@dataclass
class LevelPlan:
    """The table layout and the groups of a program, in evaluation order."""

    row_count: int
    input_count: int
    #: (row, value) of each distinct constant operand, rows after the inputs
    constants: list
    groups: list
    #: the table row of each output operand
    output_rows: list
    instruction_count: int

    @property
    def is_wide(self) -> bool:
        """Worth lowering level by level (see the module docstring)."""
        return (self.instruction_count >= WIDE_MIN_OPERATIONS
                and self.instruction_count >= WIDE_MIN_GROUP * len(self.groups))


def wide_plan(program: Program) -> LevelPlan | None:
    """``program``'s plan if it is wide, else None -- found out early for a deep graph
    (planning a 210,000-node chain to its end took 1.8 s, for 180,000 groups of one).

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.compile.scalar.program import build_program
    >>> from symad.primitives import sin_p
    >>> x = sympy.Symbol("x"); b = GraphBuilder(); b.add_input(x)
    >>> atom = x
    >>> for _ in range(2000): atom = b.record(sin_p, (atom,))
    >>> wide_plan(build_program(b.finish([atom]))) is None
    True
    """
    count = program.instruction_count
    if count < WIDE_MIN_OPERATIONS:
        return None
    plan = plan_levels(program, max_groups=count // WIDE_MIN_GROUP)
    return plan if plan is not None and plan.is_wide else None


def plan_levels(program: Program, max_groups: int | None = None) -> LevelPlan | None:
    """Levels, groups and table rows of ``program``; None past ``max_groups`` groups.

    Inputs keep rows ``0 .. inputs-1``, constants follow, then each group's
    members take consecutive rows; groups are ordered by level, and within a
    level by first member. Every instruction is kept: a Graph holds live nodes
    only, and a dead one would merely be computed. The work is done on the
    program's :class:`~symad.compile.scalar.program.OperandTable` with NumPy: a wide
    gradient has 10^5 instructions, and a Python statement for each costs
    milliseconds.
    """
    table = program.operand_table()
    input_count, value_count = table.input_count, table.value_count
    instruction_count = len(table.primitives)
    constants, constant_rows = _constant_rows(table)
    first_instruction_row = input_count + len(constants)

    level = _levels(table, max_groups)
    if level is None:
        return None  # narrow: more levels than a wide graph has groups
    node_levels = level[input_count:value_count]
    parameters, distinct_parameters = _parameter_numbers(table)
    group_of, group_count = _row_numbers(instruction_count, [
        (node_levels, int(node_levels.max(initial=0)) + 1),
        (table.primitive_numbers, len(table.distinct_primitives)),
        (parameters, len(distinct_parameters) + 1),
        (table.arities, int(table.arities.max(initial=0)) + 1),
        (_exponent_numbers(table, constant_rows), len(constants) + 1),
    ])
    if max_groups is not None and group_count > max_groups:
        return None  # narrow
    members, sizes = _group_order(group_of, group_count, node_levels)
    first_rows = first_instruction_row + start_offsets(sizes)

    # Row of every code: inputs keep theirs, instructions follow their group, constants share.
    # Rows are int32, as the module stores them (a table of 2^31 rows would not fit in memory).
    row_of_code = np.empty(value_count + len(table.constants), np.int32)
    row_of_code[:input_count] = np.arange(input_count)
    row_of_code[input_count + members] = np.arange(first_instruction_row,
                                                   first_instruction_row + instruction_count)
    row_of_code[value_count:] = constant_rows
    return LevelPlan(
        row_count=first_instruction_row + instruction_count,
        input_count=input_count,
        constants=[(input_count + i, c.value) for i, c in enumerate(constants)],
        groups=_level_groups(table, members, sizes, first_rows - first_instruction_row, first_rows,
                             row_of_code),
        output_rows=row_of_code[table.output_codes].tolist(),
        instruction_count=instruction_count,
    )


def _constant_rows(table) -> tuple[list, list]:
    """The distinct constants by value, and the row of each of the table's constants.

    There is one Constant per distinct atom, but derivative rules make many atoms of one
    value (a gradient over 1,000 elements: 1,000 of -0.5); they share a row, so that a
    group reading one value reads it as a literal."""
    row_of_literal: dict = {}
    constants: list = []
    constant_rows = []
    for constant in table.constants:
        row = row_of_literal.get(literal(constant.value))
        if row is None:
            row = row_of_literal[literal(constant.value)] = table.input_count + len(constants)
            constants.append(constant)
        constant_rows.append(row)
    return constants, constant_rows


def _exponent_numbers(table, constant_rows: list) -> np.ndarray:
    """Per instruction: 1 + the number of its constant exponent (a power's), or 0.

    Part of the group key: NumPy computes ``x ** 0.5`` as ``sqrt`` (and ``x ** 2`` as
    ``square``, ``x ** -1`` as ``1 / x``) when the exponent is a scalar, and as ``pow``
    when it is an array: ``(-inf) ** 0.5`` is nan one way, inf the other. numexpr likewise
    rewrites a literal exponent (``x ** 3`` is ``x * x * x``). A group whose members share
    the exponent writes it as a literal, as the other lowerings do."""
    input_count, value_count = table.input_count, table.value_count
    exponent = np.zeros(len(table.primitives), np.int64)
    power_numbers = [number for number, primitive in enumerate(table.distinct_primitives)
                     if primitive.name == "power"]
    if power_numbers:
        powers = np.flatnonzero(np.isin(table.primitive_numbers, power_numbers) & (table.arities == 2))
        exponent_codes = table.codes[table.offsets[powers] + 1]
        constant = exponent_codes >= value_count
        exponent[powers[constant]] = np.asarray(constant_rows, np.int64)[
            exponent_codes[constant] - value_count] - (input_count - 1)
    return exponent


def _parameter_numbers(table) -> tuple[np.ndarray, list]:
    """Per instruction: 1 + the number of its parameters among the distinct ones, or 0 for none.

    Parameters are rare: numbered where an instruction has any, and looked for only
    when some instruction has (list.count compares by identity first)."""
    instruction_count = len(table.primitives)
    parameters = np.zeros(instruction_count, np.int64)
    distinct_parameters: list = []
    if table.params.count(()) < instruction_count:
        with_parameters = np.flatnonzero(np.fromiter(map(len, table.params), np.int64, instruction_count))
        numbers, distinct_parameters = _numbered([table.params[i] for i in with_parameters.tolist()])
        parameters[with_parameters] = numbers + 1
    return parameters, distinct_parameters


def _group_order(group_of: np.ndarray, group_count: int, node_levels: np.ndarray):
    """The instructions in evaluation order (by group) and each group's size, groups ordered
    by level and within a level by first member. Group numbers are few, so these stable
    sorts of them are radix sorts (see _small)."""
    by_group = np.argsort(_small(group_of, group_count), kind="stable")
    sizes = np.bincount(group_of, minlength=group_count)
    first_member = by_group[start_offsets(sizes)]
    order_of_group = np.lexsort((first_member, node_levels[first_member]))
    rank = np.empty(group_count, np.int64)
    rank[order_of_group] = np.arange(group_count)
    members = np.argsort(_small(rank[group_of], group_count), kind="stable")  # in instruction order
    return members, sizes[order_of_group]


def _level_groups(table, members, sizes, starts, first_rows, row_of_code) -> list:
    """One LevelGroup per group: its members (``starts`` into ``members``), first row and
    operand rows."""
    groups = []
    for rank_index in range(len(sizes)):
        start = int(starts[rank_index])
        group_members = members[start:start + int(sizes[rank_index])]
        first = int(group_members[0])
        arity = int(table.arities[first])
        positions = table.offsets[group_members][None, :] + np.arange(arity)[:, None]
        operand_rows = row_of_code[table.codes[positions]]
        primitive = table.primitives[first]
        groups.append(LevelGroup(primitive, table.params[first], int(first_rows[rank_index]),
                                 operand_rows, bool(primitive.returns_boolean)))
    return groups


def _row_numbers(length: int, columns: list) -> tuple[np.ndarray, int]:
    """``(numbers, count)``: the distinct rows of ``columns`` numbered ``0 .. count-1`` in
    increasing order (column by column), equal rows alike.

    ``columns`` are ``(values, bound)`` pairs, each values an integer array of ``length``
    in ``range(bound)``. A row is one integer in mixed radix, renumbered densely where
    its range would outgrow ``length`` (so it cannot overflow) and at the end: through a
    table over the range where that is small -- the usual case, a few thousand possible
    keys (levels x primitives x arities x exponents) over 10^6 instructions -- else by
    ``np.unique``, a sort of all of them.

    >>> _row_numbers(4, [(np.array([1, 0, 1, 1]), 2), (np.array([5, 7, 5, 6]), 8)])
    (array([1, 0, 1, 2]), 3)
    """
    key, bound = np.zeros(length, np.int64), 1
    for values, count in columns:
        if bound * count > max(length, 1):
            key, bound = _dense(key, bound)
        key *= count
        key += values
        bound *= count
    return _dense(key, bound)


def _dense(key: np.ndarray, bound: int) -> tuple[np.ndarray, int]:
    """``key`` (values in ``range(bound)``) renumbered ``0, 1, ...`` in increasing order, and the count."""
    if bound <= 4 * len(key) + 1024:
        present = np.zeros(bound, bool)
        present[key] = True
        number = np.cumsum(present) - 1
        return number[key], int(np.count_nonzero(present))
    distinct, inverse = np.unique(key, return_inverse=True)
    return inverse.reshape(-1), len(distinct)


def _numbered(objects: Sequence) -> tuple[np.ndarray, list]:
    """``(numbers, distinct)``: ``objects[i] == distinct[numbers[i]]``, distinct in order of first use.

    Two C-speed passes over ``objects`` (a dict of the distinct ones, then a look-up
    each), compared by equality (parameters: equal tuples are one kind).

    >>> _numbered(["a", "b", "a"])
    (array([0, 1, 0]), ['a', 'b'])
    """
    distinct = list(dict.fromkeys(objects))
    number = {item: index for index, item in enumerate(distinct)}
    return np.fromiter(map(number.__getitem__, objects), np.int64, len(objects)), distinct


def _small(numbers: np.ndarray, count: int) -> np.ndarray:
    """``numbers`` (in ``range(count)``) in the narrowest unsigned type: NumPy's stable sort
    of 8- and 16-bit integers is a radix sort, several times faster than of int64."""
    return numbers.astype(np.min_scalar_type(max(count - 1, 0)), copy=False)


#: Levels are found chunk by chunk of this many instructions, each by sweeps over all
#: its operands at once. Instructions come after their operands, so a chunk reads the
#: final levels of the chunks before it: one sweep finds its levels when none of its
#: instructions reads another of it (a wide gradient is recorded operation by
#: operation, so most chunks), else as many as it is deep plus one that changes nothing.
LEVEL_CHUNK = 1 << 12
#: A chunk still changing after this many sweeps is deep: the levels from it on are
#: found one instruction at a time (a 210,000-node chain: 24 sweeps over all of it
#: took 45 ms; over its first chunk, 1.5 ms).
LEVEL_SWEEPS = 24


def _sweep_levels(level: np.ndarray, table) -> int:
    """Levels into ``level``, chunk by chunk, as far as sweeps find them: how many
    instructions (from the first) have theirs."""
    input_count, count = table.input_count, len(table.arities)
    codes, offsets, arities = table.codes, table.offsets, table.arities
    for first in range(0, count, LEVEL_CHUNK):
        stop = min(first + LEVEL_CHUNK, count)
        start, end = int(offsets[first]), int(offsets[stop - 1] + arities[stop - 1])
        chunk_codes, chunk_offsets = codes[start:end], offsets[first:stop] - start
        levels = level[input_count + first:input_count + stop]  # a view: filled in place
        reads_itself = bool(np.any((chunk_codes >= input_count + first)
                                   & (chunk_codes < input_count + stop)))
        for _ in range(LEVEL_SWEEPS):
            highest = np.maximum.reduceat(level[chunk_codes], chunk_offsets)
            highest += 1
            settled = not reads_itself or np.array_equal(highest, levels)
            levels[:] = highest
            if settled:
                break
        else:
            levels[:] = 0
            return first
    return count


def _levels(table, max_groups: int | None):
    """Level of every code (inputs and constants 0, an instruction one more than its
    highest operand); None as soon as there are more than ``max_groups`` levels."""
    input_count, value_count = table.input_count, table.value_count
    level = np.zeros(value_count + len(table.constants), np.int64)
    # reduceat needs every instruction to have an operand (else a sequential pass).
    found = _sweep_levels(level, table) if table.arities.all() else 0
    if found == value_count - input_count:
        return level
    # A deep graph: one instruction after another, in order, stopping early.
    levels = level.tolist()
    start = int(table.offsets[found])
    code_list = table.codes[start:].tolist()
    bounds = (table.offsets[found:] - start).tolist() + [len(code_list)]
    limit = math.inf if max_groups is None else max_groups
    value = input_count + found
    for begin, stop in zip(bounds, bounds[1:]):
        highest = max(map(levels.__getitem__, code_list[begin:stop]), default=0) + 1
        if highest > limit:
            return None
        levels[value] = highest
        value += 1
    return np.array(levels, np.int64)


# ---------------------------------------------------------------------------
# Lowering
# ---------------------------------------------------------------------------


def _blob(array: np.ndarray) -> str:
    """Source for the 1-D ``array`` as base64 text: compact, and quick to compile."""
    text = base64.b64encode(np.ascontiguousarray(array)).decode("ascii")  # no copy to bytes
    return f'np.frombuffer(base64.b64decode("{text}"), np.{array.dtype.name})'


def _operands(group: LevelGroup, index_name: str, constant_of_row: dict) -> list:
    """Each operand of ``group``: a :class:`Constant` where every member reads the same
    constant (it is then written as a literal, as the other lowerings write it, and
    numexpr may simplify it: ``a ** 2.0`` is ``a * a``), else its source text -- one
    row broadcast, a slice of ``T`` where the rows are consecutive (a view: nothing
    copied), or a gather through ``index_name``."""
    operands = []
    for j, rows in enumerate(group.operand_rows):
        first = int(rows[0])
        uniform = bool(np.all(rows == first))
        if uniform and first in constant_of_row:
            operands.append(Constant(constant_of_row[first]))
        elif uniform:
            operands.append(f"T[{first}:{first + 1}]")
        elif bool(np.all(np.diff(rows) == 1)):
            operands.append(f"T[{first}:{first + len(rows)}]")
        else:
            operands.append(f"T[{index_name}[{j}]]")
    return operands


def _numpy_call(group: LevelGroup, index_name: str, operands: list, externals: list,
                descriptions: list) -> str:
    """The NumPy call evaluating ``group`` on ``operands`` (see :func:`_operands`)."""
    spelling = numpy_spelling(_probe(group, operands))
    if group.primitive.name == "add" and len(operands) > 2 and spelling is not None:
        # a + b + c ... left to right, as the numpy backend adds (see _SUM_ROWS).
        return f"_sum_rows(T[{index_name}])"
    args = [_text(operand) for operand in operands]
    if spelling is not None:
        return spelling(args)
    implementation = group.primitive.numpy_impl
    if group.params:
        implementation = functools.partial(implementation, **dict(group.params))
    externals.append(implementation)
    descriptions.append(f"the numeric implementation of {group.primitive.name!r}")
    if not is_builtin_primitive(group.primitive):
        # A user's implementation gets 1-D arrays, as the other lowerings give it.
        return f"_flat_call(EXTERNALS[{len(externals) - 1}], {', '.join(args)})"
    return f"EXTERNALS[{len(externals) - 1}]({', '.join(args)})"


def _numexpr_program(group: LevelGroup, operands: list):
    """``(text, arguments)``: the group as numexpr text over ``a0, a1, ...`` and the
    sources passed for them; None to use NumPy.

    Operations on truth values stay in NumPy: the table holds them as 0.0/1.0,
    which numexpr's ``where`` and ``&`` do not take.
    """
    from symad.compile.scalar.numexpr_backend import numexpr_form, runs_in_numpy

    probe = _probe(group, operands)
    if group.primitive.boolean_operands or runs_in_numpy(probe):
        return None
    form = numexpr_form(probe)
    if form is None:
        return None
    names, arguments = [], []
    for operand in operands:
        if isinstance(operand, Constant):
            names.append(literal(operand.value))
        else:
            names.append(f"a{len(arguments)}")
            arguments.append(operand)
    return form(names), arguments


def _text(operand) -> str:
    return literal(operand.value) if isinstance(operand, Constant) else operand


def _probe(group: LevelGroup, operands: list):
    """An instruction standing for the group, to ask the spelling tables."""
    probe_operands = tuple(operand if isinstance(operand, Constant) else j
                           for j, operand in enumerate(operands))
    return Instruction(0, group.primitive, probe_operands, group.params, group.boolean)


def _block_size(row_count: int, itemsize: int) -> int:
    """Points per block: the table, and a gathered group and its sums as large, within the working set."""
    block = MAX_BLOCK
    while block > 1 and 3 * block * row_count * itemsize > WORKING_SET_BYTES:
        block //= 2
    return block


def _calls(plan: LevelPlan) -> list:
    """The groups of ``plan``, cut into calls that gather at most a table's worth of operands.

    A group's gathered operands are ``operands x members`` values per point, which
    rows shared between members (a sliding window: ``np.sum(x[windows], axis=1)``)
    make far more than the table holds; and its sums and maxima stack them again.
    Consecutive members stay consecutive rows, so each call writes one slice.
    """
    calls = []
    for group in plan.groups:
        arity, count = group.operand_rows.shape
        step = max(1, plan.row_count // max(1, arity))
        if step >= count:
            calls.append(group)
            continue
        for start in range(0, count, step):
            calls.append(group._replace(first_row=group.first_row + start,
                                        operand_rows=group.operand_rows[:, start:start + step]))
    return calls


def lower_levels(program: Program, plan: LevelPlan, dtype, backend: str) -> GeneratedModule:
    """The module evaluating ``program`` level by level, labelled with the ``backend`` asked for.

    With the numexpr backend, each group numexpr can compute is one numexpr
    program over the gathered operands (on numexpr's threads); the other
    groups, and every group with the numpy backend, are NumPy calls. The
    module is standalone like every generated module; the table's index data
    are embedded as base64 text.
    """
    externals: list = []
    descriptions: list = []
    calls = _calls(plan)
    index_names, body, programs, all_rows = _group_lines(
        calls, dict(plan.constants), backend == "numexpr", externals, descriptions)
    # A call gathers at most max(rows, operands of one member) values per point.
    widest = max((group.operand_rows.shape[0] for group in calls), default=0)
    block_size = _block_size(max(plan.row_count, widest), np.dtype(dtype).itemsize)
    header = module_header(
        program, backend, dtype, ["import base64"], [], descriptions, block_size,
    )
    driver = _LEVEL_DRIVER
    if programs:
        from symad.compile.scalar.numexpr_backend import NUMEXPR_SETUP

        header.append(NUMEXPR_SETUP)
        # NumExpr programs keep their registers in the object: one evaluation at a time.
        header.append("_LOCK = threading.Lock()  # held by evaluate_matrices: one evaluation at a time")
        driver = driver.replace("    with np.errstate(", "    with _LOCK, np.errstate(")
        assert driver != _LEVEL_DRIVER, "the driver changed: put the lock back around its loop"
    else:
        header[1] = "# Standalone: it needs NumPy and SciPy, not symad."
    setup = _table_setup(plan, all_rows, index_names, programs, body)
    source = "\n".join(header + setup + [driver + RUN])  # one copy of 10 MB of index text, not three
    where = "numexpr and NumPy" if programs else "NumPy"
    note = f"wide graph: evaluated level by level with {where} ({len(plan.groups)} groups)"
    return GeneratedModule(source, externals, backend, dtype, block_size, program, note)


def _group_lines(calls: list, constant_of_row: dict, use_numexpr: bool, externals: list,
                 descriptions: list) -> tuple[list, list, list, np.ndarray]:
    """Per group: the line naming its operand rows, and the line of ``evaluate_table``
    computing it (a numexpr program, shared by groups of one text, or a NumPy call); the
    numexpr programs' lines, and every group's operand rows in one array."""
    programs: list[str] = []
    program_index: dict[str, int] = {}  # numexpr text -> its program's number
    index_data = [group.operand_rows.reshape(-1) for group in calls]
    offsets = np.cumsum([0] + [len(data) for data in index_data])
    index_names, body = [], []
    for number, group in enumerate(calls):
        arity, count = group.operand_rows.shape
        start, stop = offsets[number], offsets[number + 1]
        index_names.append(f"_G{number} = _ROWS[{start}:{stop}].reshape({arity}, {count})")
        rows = f"T[{group.first_row}:{group.first_row + count}]"
        comment = f"  # {safe_comment(group.primitive.name)}, {count}"
        operands = _operands(group, f"_G{number}", constant_of_row)
        numexpr_program = _numexpr_program(group, operands) if use_numexpr else None
        if numexpr_program is not None:
            text, arguments = numexpr_program
            index = program_index.get(text)
            if index is None:
                index = program_index[text] = len(programs)
                names = [f"a{j}" for j in range(len(arguments))]
                programs.append(f"_E{index} = _program({text!r}, {names!r}, "
                                f"{[False] * len(arguments)!r})")
            body.append(f"    _E{index}({', '.join(arguments)}, out={rows}, **_CALL){comment}")
        else:
            call = _numpy_call(group, f"_G{number}", operands, externals, descriptions)
            body.append(f"    {rows} = {call}{comment}")
    all_rows = np.concatenate(index_data) if index_data else np.zeros(0, np.int32)
    return index_names, body, programs, all_rows


def _table_setup(plan: LevelPlan, all_rows: np.ndarray, index_names: list, programs: list,
                 body: list) -> list:
    """The module's table layout, index data, numexpr programs and ``evaluate_table``."""
    constant_rows = [row for row, _ in plan.constants]
    constant_values = np.array([float(value) for _, value in plan.constants], dtype=np.float64)
    return [
        "# A wide graph, evaluated level by level: every value is a row of one table T",
        "# (rows x points); each line below evaluates one group of like operations whose",
        f"# operands are ready, gathering their rows. {len(plan.groups)} groups,"
        f" {plan.instruction_count} operations.",
        f"ROW_COUNT = {plan.row_count}",
        f"_ROWS = {_blob(all_rows.astype(np.int32, copy=False))}",
        f"CONSTANT_ROWS = slice({plan.input_count}, {plan.input_count + len(constant_rows)})",
        f"CONSTANT_VALUES = {_blob(constant_values)}.astype(DTYPE)[:, None]",
        f"OUTPUT_ROWS = {_blob(np.array(plan.output_rows, dtype=np.int64))}",
        *index_names,
        *programs,
        _SUM_ROWS,
        *([_FLAT_CALL] if any("_flat_call(" in line for line in body) else []),
        "",
        "def evaluate_table(T):",
        '    """Fill the rows of every operation, given the input and constant rows of ``T``."""',
        *body,
        "    return None",
    ]


_SUM_ROWS = '''

def _sum_rows(terms):
    """terms[0] + terms[1] + ... left to right, as a + b + c adds. One np.add per term
    into the total; np.add.accumulate only where a term is short (it walks each
    point's terms one at a time: 50x slower on a block of long rows)."""
    if terms[0].size < 64:
        return np.add.accumulate(terms, axis=0)[-1]
    total = terms[0] + terms[1]
    for term in terms[2:]:
        np.add(total, term, out=total)
    return total
'''


_FLAT_CALL = '''

def _flat_call(function, *args):
    """``function`` on the group's rows flattened to 1-D, as the other lowerings call a
    custom primitive's implementation (written for 1-D blocks, it may not take 2-D
    ones); literal constants are passed as they are. The result in the rows' shape."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flat = iter([np.broadcast_to(a, shape).reshape(-1) for a in arrays])
    result = function(*[next(flat) if isinstance(a, np.ndarray) else a for a in args])
    return np.broadcast_to(np.asarray(result), (int(np.prod(shape)),)).reshape(shape)
'''


_LEVEL_DRIVER = '''

def evaluate(inputs, outputs, n, block_size=BLOCK_SIZE):
    """Fill ``outputs`` (1-D, length n) from ``inputs`` (1-D of length n, or 0-d), block by block."""
    if len(inputs) != INPUT_COUNT:
        raise ValueError(f"expected {INPUT_COUNT} inputs, got {len(inputs)}")
    evaluate_matrices([x[:, None] if x.ndim else x.reshape(1, 1) for x in inputs],
                      [o[:, None] for o in outputs], n, block_size)
    return outputs


def evaluate_matrices(inputs, outputs, n, block_size=BLOCK_SIZE):
    """Fill ``outputs``, (n, k) arrays whose columns are the outputs in order, from
    ``inputs``, (n, k) arrays (or (1, k): the same at every point) whose columns are
    the inputs in order: a whole argument is copied into the table at once."""
    if sum(m.shape[1] for m in inputs) != INPUT_COUNT:
        raise ValueError(f"expected {INPUT_COUNT} input columns, got {sum(m.shape[1] for m in inputs)}")
    if any(external is None for external in EXTERNALS):
        raise RuntimeError("bind every entry of EXTERNALS (listed at the top) before evaluating")
    block_size = max(1, min(int(block_size), n))
    # One table for every block, contiguous whatever the block's length (numexpr
    # writes into its rows); groups never write the constant rows.
    storage = np.empty(ROW_COUNT * block_size, DTYPE)
    T = storage.reshape(ROW_COUNT, block_size)
    T[CONSTANT_ROWS] = CONSTANT_VALUES
    with np.errstate(all="ignore"):  # like JAX: inf and nan propagate silently
        for start in range(0, n, block_size):
            stop = min(start + block_size, n)
            if stop - start != T.shape[1]:  # the last, shorter block
                T = storage[:ROW_COUNT * (stop - start)].reshape(ROW_COUNT, stop - start)
                T[CONSTANT_ROWS] = CONSTANT_VALUES
            row = 0
            for m in inputs:
                T[row:row + m.shape[1]] = (m if m.shape[0] == 1 else m[start:stop]).T
                row += m.shape[1]
            evaluate_table(T)
            row = 0
            for o in outputs:
                o[start:stop] = T[OUTPUT_ROWS[row:row + o.shape[1]]].T
                row += o.shape[1]
    return outputs
'''
