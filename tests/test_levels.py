"""Wide graphs evaluated level by level (symad.compile.scalar.levels): same numbers, chosen when it pays."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

import symad as sd
from symad.compile.evaluator import Evaluator, load_module
from symad.compile.scalar import levels
from symad.compile.scalar.numexpr_backend import lower_numexpr
from symad.compile.scalar.numpy_backend import lower_numpy
from symad.compile.scalar.program import build_program
from tests.elements import element_trace
from tests.test_compile import ELEMENTWISE

WIDTH = 1000  # elements per array: every case below has at least 1,000 operations


def _points(n=WIDTH):
    rng = np.random.default_rng(11)
    return rng.uniform(0.1, 2.5, n), rng.uniform(0.1, 2.5, n)


def _region_lowering(F, backend, dtype="float64"):
    """The evaluator the backend would build without the level lowering."""
    lower = {"numexpr": lower_numexpr, "numpy": lower_numpy}[backend]
    module = lower(F.graph, dtype, F.name)
    return Evaluator(module, load_module(module))


def _evaluate(evaluator, F, *arrays):
    """``F``'s flat outputs from ``evaluator`` at one point (arrays of the traced shapes)."""
    columns = [np.asarray(v, evaluator.dtype).reshape(1) for a in arrays for v in np.ravel(a)]
    outputs = [np.empty(1, np.bool_ if b else evaluator.dtype) for b in evaluator.output_is_boolean]
    evaluator.evaluate_into(columns, outputs, 1)
    return np.array([o[0] for o in outputs])


@functools.cache
def _wide(case):
    x, y = _points()
    return element_trace(ELEMENTWISE[case][0], x, y)


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_every_primitive_level_by_level_matches_numpy(case, backend):
    F = _wide(case)
    x, y = _points()
    evaluator = F.evaluator(backend, np.float64)
    assert "level by level" in evaluator.note  # the case is wide: the lowering under test
    got = F.compile(backend)(x, y)
    with np.errstate(all="ignore"):
        want = ELEMENTWISE[case][1](x, y)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    if backend == "numpy":  # the same NumPy calls on the same values: identical bits
        np.testing.assert_array_equal(got, _evaluate(_region_lowering(F, "numpy"), F, x, y))


@pytest.mark.parametrize("case", sorted(ELEMENTWISE))
def test_wide_gradients_match_the_pointwise_gradient(case):
    fun = ELEMENTWISE[case][0]
    x, y = _points()
    G = sd.grad(element_trace(lambda x, y: np.sum(fun(x, y)), x, y), argnums=(0, 1)).trace(x, y)
    gx, gy = G(x, y)
    assert "level by level" in G.evaluator("numexpr", np.float64).note
    # The same derivative, traced on scalars (a narrow graph) and broadcast over the points.
    g = sd.grad(fun, argnums=(0, 1)).trace(1.0, 1.0)
    want_x, want_y = g.compile("numpy")(x, y)
    np.testing.assert_allclose(gx, want_x, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gy, want_y, rtol=1e-13, atol=1e-14)


def test_float32_level_by_level_is_the_numpy_backends_float32():
    F = _wide("trig")
    x, y = (a.astype(np.float32) for a in _points())
    got = F.compile("numpy")(x, y)
    assert got.dtype == np.float32
    want = _evaluate(_region_lowering(F, "numpy", "float32"), F, x, y)
    np.testing.assert_array_equal(got, want)
    assert F(x, y).dtype == np.float32  # numexpr's programs typed for float32 too
    np.testing.assert_allclose(F(x, y), got, rtol=1e-6)


def test_truth_values_where_and_boolean_outputs():
    def f(x, y):
        inside = (x > 1) & ~(y < 0.5)
        return snp_where(inside, np.sqrt(x - 1), -y), x > y, np.maximum(x, 1.5)

    from symad.numpy import where as snp_where

    x, y = _points()
    F = element_trace(f, x, y)
    values, above, clipped = F(x, y)
    assert "level by level" in F.evaluator("numexpr", np.float64).note
    assert above.dtype == np.bool_
    np.testing.assert_array_equal(above, x > y)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(values, np.where((x > 1) & ~(y < 0.5), np.sqrt(x - 1), -y),
                                   rtol=1e-15)
    np.testing.assert_array_equal(clipped, np.maximum(x, 1.5))
    # The gradient through where: no nan leaks from the untaken sqrt branch at x < 1.
    G = sd.grad(element_trace(lambda x, y: np.sum(f(x, y)[0]), x, y)).trace(x, y)
    gx = G(x, y)
    want = np.where((x > 1) & ~(y < 0.5), 0.5 / np.sqrt(np.where(x > 1, x - 1, 1.0)), 0.0)
    np.testing.assert_allclose(gx, want, rtol=1e-14)


def test_long_sums_add_left_to_right():
    # 1e16 + 1 rounds back to 1e16 (ties to even), so adding the ones one at a time
    # leaves 1e16; pairwise summation would keep about 2,000 of them.
    terms = np.concatenate([[1e16], np.ones(2000)])
    F = element_trace(lambda x: np.sum(np.abs(x)), terms)
    sequential = functools.reduce(operator.add, terms.tolist())
    assert sequential == 1e16
    for backend in ("numexpr", "numpy"):
        assert "level by level" in F.evaluator(backend, np.float64).note
        assert float(F.compile(backend)(terms)) == sequential


def test_constants_inputs_and_repeated_values_as_outputs():
    x, _ = _points()
    F = element_trace(lambda x: (np.sin(x) * 3.0, x, np.float64(2.5), np.sin(x), np.zeros(3)), x)
    s, same_x, constant, s_again, zeros = F(x)
    assert "level by level" in F.evaluator("numexpr", np.float64).note
    np.testing.assert_allclose(s, np.sin(x) * 3.0, rtol=1e-15)
    np.testing.assert_array_equal(same_x, x)
    assert float(constant) == 2.5
    np.testing.assert_allclose(s_again, np.sin(x), rtol=1e-15)
    np.testing.assert_array_equal(zeros, np.zeros(3))


def test_custom_primitives_run_as_externals(softsign_primitive):
    softsign = softsign_primitive

    x, _ = _points()
    G = sd.grad(element_trace(lambda x: np.sum(softsign(x) * x), x)).trace(x)
    evaluator = G.evaluator("numexpr", np.float64)
    assert "level by level" in evaluator.note and evaluator.module.externals
    want = x / (1 + x) + x / (1 + x) ** 2  # x > 0 here
    np.testing.assert_allclose(G(x), want, rtol=1e-14)


@pytest.mark.parametrize("backend", ["numexpr", "numpy"])
@pytest.mark.parametrize("block_size", [1, 3, 64])
def test_batches_in_blocks_match_point_by_point(backend, block_size):
    x, y = _points(300)
    G = sd.grad(element_trace(lambda x, y: np.sum(np.sin(x * y) * np.exp(-x ** 2)), x, y), argnums=(0, 1)).trace(x, y)
    rng = np.random.default_rng(3)
    X, Y = rng.uniform(-1, 1, (7, 300)), rng.uniform(-1, 1, (7, 300))
    gx, gy = G.compile(backend, block_size=block_size)(X, Y)
    assert "level by level" in G._evaluators[(backend, "float64")].note
    for i in range(7):
        px, py = G.compile(backend)(X[i], Y[i])
        np.testing.assert_allclose(gx[i], px, rtol=1e-15, atol=1e-300)
        np.testing.assert_allclose(gy[i], py, rtol=1e-15, atol=1e-300)
    # A batch given for one argument only broadcasts against the other.
    hx, _ = G(X, y)
    np.testing.assert_allclose(hx[2], G(X[2], y)[0], rtol=1e-15)


def test_the_source_runs_without_symad():
    x, _ = _points()
    G = sd.grad(element_trace(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2)), x)).trace(x)
    source = G.source("numexpr")
    assert "level by level" in source and "symad" not in source.split("\n", 3)[3]
    namespace: dict = {}
    exec(source, namespace)
    outputs = namespace["run"](*x)
    want = np.cos(x) * np.exp(-x ** 2) - 2 * x * np.sin(x) * np.exp(-x ** 2)
    np.testing.assert_allclose(np.array(outputs, dtype=float), want, rtol=1e-14, atol=1e-16)


def test_narrow_and_small_graphs_keep_their_lowering():
    def chain(x):
        for _ in range(1500):
            x = np.sin(x) + 0.001 * x
        return x

    deep = sd.grad(chain).trace(0.3)
    assert len(deep.graph.nodes) > levels.WIDE_MIN_OPERATIONS
    assert not levels.plan_levels(build_program(deep.graph)).is_wide
    assert levels.wide_plan(build_program(deep.graph)) is None
    assert "level by level" not in deep.evaluator("numexpr", np.float64).note
    small = sd.grad(element_trace(lambda x: np.sum(np.sin(x)), np.zeros(50))).trace(np.zeros(50))
    assert "level by level" not in small.evaluator("numexpr", np.float64).note


def test_plan_groups_like_operations_of_one_level():
    x, _ = _points(1000)
    G = sd.grad(element_trace(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2)), x)).trace(x)
    plan = levels.plan_levels(build_program(G.graph))
    assert plan.is_wide and plan.instruction_count == len(G.graph.nodes) == 11_000
    assert len(plan.groups) == 10  # 1,000 members each (2,000 for one multiply)
    assert sum(group.operand_rows.shape[1] for group in plan.groups) == plan.instruction_count
    # Every group reads rows written before it: inputs, constants or earlier groups.
    for group in plan.groups:
        assert group.operand_rows.max() < group.first_row


def test_batches_broadcast_and_weights_reach_the_table_whole():
    # Arguments enter the table as whole matrices: a batch of (3, 1) against (4,),
    # an argument shared by every point, and a Parameter's values.
    n = 1200
    w = sd.Parameter(np.linspace(0.5, 1.5, n), name="w")
    G = sd.grad(element_trace(lambda x, y: np.sum(w * np.sin(x) * y), np.zeros(n), np.zeros(n)), argnums=(0, 1)).trace(np.zeros(n), np.zeros(n))
    rng = np.random.default_rng(5)
    X, Y = rng.uniform(-1, 1, (3, 1, n)), rng.uniform(-1, 1, (4, n))
    gx, gy = G(X, Y)
    assert "level by level" in G.evaluator("numexpr", np.float64).note
    assert gx.shape == gy.shape == (3, 4, n)
    np.testing.assert_allclose(gx, w.value * np.cos(X) * Y, rtol=1e-15)
    np.testing.assert_allclose(gy, w.value * np.sin(X) * np.ones_like(Y), rtol=1e-15)
    # The same through the column-by-column path every other lowering takes.
    narrow = _region_lowering(G, "numexpr")
    columns = [np.array([v]) for v in np.concatenate([X[1, 0], Y[2], w.value])]
    outputs = [np.empty(1) for _ in range(2 * n)]
    narrow.evaluate_into(columns, outputs, 1)
    np.testing.assert_allclose(np.concatenate(outputs), np.concatenate([gx[1, 2], gy[1, 2]]),
                               rtol=1e-15)
    # A Parameter changed in place is read at the next call.
    w.value = w.value * 2
    np.testing.assert_allclose(G(X, Y)[0], w.value * np.cos(X) * Y, rtol=1e-15)


def test_repeated_evaluation_reads_inputs_whole():
    # The evaluator of a wide graph is handed whole argument matrices, not 10^4 columns.
    x, _ = _points(3000)
    G = sd.grad(element_trace(lambda x: np.sum(np.sin(x) * x), x)).trace(x)
    G(x)
    evaluator = G.evaluator("numexpr", np.float64)
    assert evaluator._evaluate_matrices is not None
    seen = []
    original = evaluator._evaluate_matrices

    def spy(inputs, outputs, n, block):
        seen.append(([m.shape for m in inputs], [o.shape for o in outputs], n))
        return original(inputs, outputs, n, block)

    evaluator._evaluate_matrices = spy
    np.testing.assert_allclose(G(x), np.cos(x) * x + np.sin(x), rtol=1e-14)
    assert seen == [([(1, 3000)], [(1, 3000)], 1)]


@pytest.mark.skipif("numba" not in sd.available_backends(), reason="numba is not installed")
def test_numba_falls_back_to_numexpr_level_by_level_for_wide_graphs():
    x, _ = _points(1500)
    G = sd.grad(element_trace(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2)), x)).trace(x)
    np.testing.assert_allclose(G.compile("numba")(x), G(x), rtol=1e-15)
    note = G._evaluators[("numba", "float64")].note
    assert "evaluated with numexpr instead" in note and "level by level" in note


def test_powers_group_by_exponent_like_the_other_lowerings():
    # NumPy takes x ** 0.5 as sqrt for a scalar exponent, as pow for an array of them:
    # (-inf) ** 0.5 is nan one way and inf the other, (-0.0) ** 0.5 is -0.0 against 0.0.
    x = np.linspace(-3.0, 3.0, 1500)
    x[::7], x[1::7], x[2::7] = -np.inf, -0.0, np.inf
    F = element_trace(lambda x: (x ** 3, x ** 2, x ** 0.5, x ** -1.0, x ** 2.5), x)
    plan = levels.plan_levels(build_program(F.graph))
    assert plan.is_wide and len(plan.groups) == 5  # one per exponent, not one for all
    for backend in ("numpy", "numexpr"):
        assert "level by level" in F.evaluator(backend, np.float64).note
        got = np.concatenate(F.compile(backend)(x))
        want = _evaluate(_region_lowering(F, backend), F, x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    with np.errstate(invalid="ignore"):
        assert np.isnan(F(x)[2][0]) and np.isnan(np.sqrt(-np.inf))
    # Derivative rules make a new atom per element (1,000 of 0.5 here): one row, one
    # literal, so the gradient's (-0.0) ** 0.5 is sqrt's -0.0 too.
    G = sd.grad(element_trace(lambda x: np.sum(x ** 1.5), x)).trace(x)
    plan = levels.plan_levels(build_program(G.graph))
    assert len(plan.constants) < 10
    for backend in ("numpy", "numexpr"):
        got = G.compile(backend)(x)
        want = _evaluate(_region_lowering(G, backend), G, x)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("reduction", [np.sum, np.max])
def test_sliding_windows_gather_at_most_a_table_per_call(reduction):
    # 1,800 windows of 200 elements: one group reading 360,000 operands per point from
    # a table of 3,800 rows. Gathered whole (and stacked again for the sum), a block of
    # 512 points took 3 GB; cut into calls of at most a table's worth, memory stays
    # near the table's.
    n, k = 2000, 200
    windows = np.arange(n - k)[:, None] + np.arange(k)
    x = np.random.default_rng(7).uniform(size=n)
    F = element_trace(lambda x: reduction(x[windows], axis=1), x)
    plan = levels.plan_levels(build_program(F.graph))
    assert plan.is_wide and [g.operand_rows.shape for g in plan.groups] == [(k, n - k)]
    calls = levels._calls(plan)
    assert len(calls) > 1 and all(c.operand_rows.size <= plan.row_count for c in calls)
    assert np.array_equal(np.concatenate([c.operand_rows for c in calls], axis=1),
                          plan.groups[0].operand_rows)
    X = np.random.default_rng(8).uniform(size=(300, n))
    got = F.compile("numpy")(X)
    assert "level by level" in F._evaluators[("numpy", "float64")].note
    want = np.stack([functools.reduce(np.add if reduction is np.sum else np.maximum,
                                      list(X[:, windows[i]].T)) for i in range(n - k)], axis=1)
    np.testing.assert_array_equal(got, want)  # the sums added left to right


def test_long_sums_add_left_to_right_over_a_batch():
    # Blocks of many points add one term at a time (np.add.accumulate walks each
    # point's terms separately, 50x slower there): still left to right.
    terms = np.concatenate([[1e16], np.ones(2000)])
    F = element_trace(lambda x: np.sum(np.abs(x) * np.ones((3, 1)), axis=1), terms)
    assert "level by level" in F.evaluator("numpy", np.float64).note
    batch = np.tile(terms, (100, 1))
    for backend in ("numexpr", "numpy"):
        np.testing.assert_array_equal(F.compile(backend)(batch), np.full((100, 3), 1e16))


def test_custom_implementations_get_one_dimensional_arrays():
    # The other lowerings call a custom primitive on 1-D blocks; an implementation
    # written for those (a loop over the elements) must not meet the (members, points)
    # rows of a group.
    import math

    @sd.primitive
    def erf_by_element(x):
        return np.array([math.erf(v) for v in np.atleast_1d(x)])

    @erf_by_element.defpartials
    def _(x):
        return (2 / np.sqrt(np.pi) * np.exp(-x ** 2),)

    x, _ = _points()
    G = sd.grad(element_trace(lambda x: np.sum(erf_by_element(x) * x + erf_by_element(0.5)), x)).trace(x)
    assert "level by level" in G.evaluator("numpy", np.float64).note
    want = np.vectorize(math.erf)(x) + 2 / np.sqrt(np.pi) * np.exp(-x ** 2) * x
    for backend in ("numexpr", "numpy"):
        np.testing.assert_allclose(G.compile(backend, block_size=3)(x), want, rtol=1e-14)
        np.testing.assert_allclose(G.compile(backend)(np.stack([x, x])), [want, want], rtol=1e-14)


def _reference_plan(program):
    """The plan's levels, groups and rows as the definition states them, one
    instruction at a time: what plan_levels computes with NumPy over its table."""
    from symad.compile.scalar.program import Constant
    from symad.compile.scalar.source import literal

    instructions = program.instructions
    row_of_literal, constant_row = {}, {}
    for operand in [o for ins in instructions for o in ins.operands] + list(program.outputs):
        if isinstance(operand, Constant) and id(operand) not in constant_row:
            key = literal(operand.value)
            row_of_literal.setdefault(key, program.input_count + len(row_of_literal))
            constant_row[id(operand)] = row_of_literal[key]
    level, members = {}, {}
    for ins in instructions:
        level[ins.result] = 1 + max((level.get(o, 0) for o in ins.operands
                                     if not isinstance(o, Constant)), default=0)
        exponent = ins.operands[1] if ins.primitive.name == "power" else None
        key = (level[ins.result], ins.primitive, ins.params, len(ins.operands),
               constant_row[id(exponent)] if isinstance(exponent, Constant) else None)
        members.setdefault(key, []).append(ins)
    row = {v: v for v in range(program.input_count)}
    next_row = program.input_count + len(row_of_literal)
    keys = sorted(members, key=lambda key: key[0])
    for key in keys:
        for ins in members[key]:
            row[ins.result], next_row = next_row, next_row + 1

    def row_of(o):
        return constant_row[id(o)] if isinstance(o, Constant) else row[o]

    groups = [(members[k][0].primitive.name, row[members[k][0].result],
               [[row_of(o) for o in ins.operands] for ins in members[k]]) for k in keys]
    return next_row, groups, [row_of(o) for o in program.outputs]


def _plan_summary(plan):
    groups = [(g.primitive.name, g.first_row, g.operand_rows.T.tolist()) for g in plan.groups]
    return plan.row_count, groups, plan.output_rows


def _mixed_graph():
    """Wide at first, then a chain of 60 levels: powers of several exponents, shared
    constants, where and comparisons, and an output that is a constant."""
    def f(x):
        y = np.where(x > 0.5, x ** 2, x ** 0.5) * 3.0 + np.exp(-x ** 2)
        total = np.sum(y)
        for _ in range(60):
            total = np.sin(total) * 0.5 + total ** 3
        return total, y[0] ** 1.5, 2.0

    x = np.linspace(0.1, 1.0, 600)
    return sd.grad(element_trace(lambda x: f(x)[0] + f(x)[1], x)).trace(x), f


@pytest.mark.parametrize("sweeps, chunk", [(levels.LEVEL_SWEEPS, levels.LEVEL_CHUNK),
                                           (levels.LEVEL_SWEEPS, 7), (3, 7), (0, levels.LEVEL_CHUNK)])
def test_plan_from_the_operand_table_is_the_plan_by_definition(sweeps, chunk, monkeypatch):
    # plan_levels finds levels by NumPy sweeps chunk by chunk (here also chunks of 7
    # instructions: many chunks read values of their own), or one instruction at a time
    # from a deep chunk on (here forced: fewer sweeps than the graph is deep, or none),
    # and groups and rows with NumPy: the plan is the one the definition gives, either way.
    monkeypatch.setattr(levels, "LEVEL_SWEEPS", sweeps)
    monkeypatch.setattr(levels, "LEVEL_CHUNK", chunk)
    G, _ = _mixed_graph()
    F = element_trace(lambda x: _mixed_graph()[1](x), np.linspace(0.1, 1.0, 600))
    for graph in (G.graph, F.graph):
        program = build_program(graph)
        assert program.table is not None and program._instructions is None
        plan = levels.plan_levels(program)
        assert program._instructions is None  # planned from the table alone
        assert _plan_summary(plan) == _reference_plan(build_program(graph))
        # A program whose instructions a pass replaced is planned from them.
        reordered = build_program(graph)
        reordered.instructions = list(reordered.instructions)
        assert reordered.table is None
        assert _plan_summary(levels.plan_levels(reordered)) == _plan_summary(plan)
        assert (levels.plan_levels(build_program(graph), max_groups=len(plan.groups)) is not None
                and levels.plan_levels(build_program(graph), max_groups=len(plan.groups) - 1) is None)


def test_wide_graph_with_a_deep_tail_matches_the_numpy_backend(monkeypatch):
    G, f = _mixed_graph()
    x = np.linspace(0.1, 1.0, 600)
    want = _evaluate(_region_lowering(G, "numpy"), G, x)
    for sweeps in (levels.LEVEL_SWEEPS, 2):
        monkeypatch.setattr(levels, "LEVEL_SWEEPS", sweeps)
        for backend in ("numpy", "numexpr"):
            module = levels.lower_levels(build_program(G.graph),
                                         levels.plan_levels(build_program(G.graph)),
                                         np.float64, backend)
            got = _evaluate(Evaluator(module, load_module(module)), G, x)
            if backend == "numpy":
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-13)


def test_build_program_resolves_equal_symbols_constants_and_later_nodes():
    import sympy

    from symad.errors import CompileError
    from symad.graph import Graph, GraphBuilder, Node
    from symad.primitives import add_p, mul_p, sin_p

    x = sympy.Symbol("x")
    builder = GraphBuilder()
    builder.add_input(x)
    s = builder.record(sin_p, (x,))
    m = builder.record(mul_p, (s, sympy.Float(0.5)))
    graph = builder.finish([builder.record(add_p, (m, x)), sympy.Float(0.5), x])
    program = build_program(graph)
    half = program.outputs[1]
    assert half.value == 0.5 and program.outputs[0] == 3 and program.outputs[2] == 0
    assert [sorted(ins.operands, key=str) for ins in program.instructions] == [
        [0], [1, half], [0, 2]]
    # The input read through a symbol equal to it but not the same object.
    equal = sympy.Symbol.__xnew__(sympy.Symbol, "x")
    assert equal == x and equal is not x

    def rebuilt(inputs, outputs):
        copies = {}  # each node, and its copy that reads `equal` for x
        for n in graph.nodes:
            args = tuple(equal if a is x else copies.get(a, a) if a.is_Symbol else a for a in n.args)
            copies[n] = Node(n.primitive, args, n.params)
        return Graph(inputs, list(copies.values()), [copies.get(a, a) for a in outputs])

    same = build_program(rebuilt((x,), (graph.outputs[0], equal)))
    assert same.instructions == program.instructions and same.outputs[1] == 0
    with pytest.raises(CompileError, match="enclosing trace"):
        build_program(rebuilt((sympy.Symbol("y"),), graph.outputs))  # x: a free symbol
    # A node reading a later node's value is malformed, not a free symbol.
    first = Node(sin_p, (x,))
    second = Node(mul_p, (first, sympy.Float(0.5)))
    first.args = (second,)
    later = Graph((x,), [first, second], (first,))
    with pytest.raises(KeyError):
        build_program(later)


@pytest.mark.parametrize("bound", [3, 10**9])
def test_row_numbers_number_distinct_rows_in_order(bound):
    # Small ranges are renumbered through a table, large ones by np.unique: alike.
    rng = np.random.default_rng(3)
    columns = [(rng.integers(0, b, 500), b) for b in (5, bound, 2, bound)]
    numbers, count = levels._row_numbers(500, columns)
    rows = list(zip(*(values.tolist() for values, _ in columns)))
    distinct = sorted(set(rows))
    assert count == len(distinct)
    assert numbers.tolist() == [distinct.index(row) for row in rows]


def test_build_program_reads_a_repeated_input_as_its_last_position():
    import sympy

    from symad.graph import Graph, Node
    from symad.primitives import sin_p

    x = sympy.Symbol("x")
    s = Node(sin_p, (x,))
    program = build_program(Graph((x, x), [s], (s, x)))
    assert program.instructions[0].operands == (1,) and program.outputs == (2, 1)
