"""The Graph and its builder: hash-consing, identities, constant folding, dead code, replay."""

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp
from symad.graph import Graph, GraphBuilder, Node, eliminate_dead_nodes, replay
from symad.primitives import add_p, cos_p, div_p, mul_p, neg_p, pow_p, sin_p, sub_p
from tests.elements import element_trace

x, y = sympy.symbols("x y")


@pytest.fixture
def builder():
    b = GraphBuilder("test")
    b.add_input(x)
    b.add_input(y)
    return b


def test_same_primitive_on_same_operands_is_one_node(builder):
    first = builder.record(sin_p, (x,))
    assert builder.record(sin_p, (x,)) is first
    assert len(builder.nodes) == 1


def test_commutative_operands_are_ordered_canonically(builder):
    assert builder.record(mul_p, (x, y)) == builder.record(mul_p, (y, x))
    assert builder.record(add_p, (y, x)) == builder.record(add_p, (x, y))
    assert len(builder.nodes) == 2


def test_subtraction_is_not_treated_as_commutative(builder):
    assert builder.record(sub_p, (x, y)) != builder.record(sub_p, (y, x))


@pytest.mark.parametrize(
    ("primitive", "args", "expected"),
    [
        (mul_p, (x, sympy.Integer(1)), x),
        (mul_p, (sympy.Integer(0), x), sympy.Integer(0)),
        (add_p, (x, sympy.Integer(0)), x),
        (sub_p, (x, sympy.Integer(0)), x),
        (sub_p, (x, x), sympy.Integer(0)),
        (div_p, (x, sympy.Integer(1)), x),
        (pow_p, (x, sympy.Integer(1)), x),
        (pow_p, (x, sympy.Integer(0)), sympy.Integer(1)),
    ],
)
def test_identities_record_no_node(builder, primitive, args, expected):
    assert builder.record(primitive, args) == expected
    assert builder.nodes == []


def test_double_negation_cancels(builder):
    negated = builder.record(neg_p, (x,))
    assert builder.record(neg_p, (negated,)) == x
    assert builder.record(mul_p, (sympy.Integer(-1), x)) == negated


def test_constants_fold_exactly(builder):
    assert builder.record(sin_p, (sympy.Integer(0),)) == 0
    assert builder.record(mul_p, (sympy.Rational(1, 3), sympy.Integer(3))) == 1
    # cos(1) is not a rational number, but it is an exact constant: kept as a SymPy constant.
    assert builder.record(cos_p, (sympy.Integer(1),)) == sympy.cos(1)
    assert builder.nodes == []


def test_a_fold_is_remembered_and_exact_types_stay_apart(builder, monkeypatch):
    assert builder.record(sub_p, (sympy.Integer(2), sympy.Integer(1))) == 1
    folds = []
    original = sub_p.to_sympy
    monkeypatch.setattr(sub_p, "to_sympy", lambda *a: folds.append(a) or original(*a))
    assert builder.record(sub_p, (sympy.Integer(2), sympy.Integer(1))) is sympy.Integer(1)
    assert folds == []  # the second time, a dictionary hit
    # 2.0 - 1.0 is not 2 - 1: its own key, its own (float) result
    result = builder.record(sub_p, (sympy.Float(2.0), sympy.Float(1.0)))
    assert isinstance(result, sympy.Float) and float(result) == 1.0 and len(folds) == 1
    assert builder.nodes == []


def test_non_finite_constants_are_left_to_run_time(builder):
    atom = builder.record(div_p, (sympy.Integer(1), sympy.Integer(0)))
    assert atom.is_Symbol  # a node: NumPy gives inf at run time, as JAX would
    F = sd.trace(lambda t: t + 1 / (t - t), 0.0)  # t - t folds to 0: 1/0 stays a node
    assert np.isinf(F(1.0))


def test_dead_nodes_are_dropped(builder):
    live = builder.record(sin_p, (x,))
    builder.record(cos_p, (x,))
    graph = builder.finish([live])
    assert [node.primitive for node in graph.nodes] == [sin_p]
    assert eliminate_dead_nodes(builder.nodes, []) == []


def test_free_symbols_found_by_the_live_sweep_match_a_full_walk(builder):
    # A builder nested in another records over the outer trace's values: those are the
    # graph's free symbols, whether found while sweeping for live nodes or by walking.
    outer = sympy.Symbol("outer")
    s = builder.record(sin_p, (outer,))
    builder.record(cos_p, (sympy.Symbol("dead_outer"),))  # dead: its operand is not free
    graph = builder.finish([builder.record(mul_p, (s, x)), sympy.Symbol("returned_outer")])
    walked = Graph(graph.inputs, graph.nodes, graph.outputs)
    assert graph.free_symbols() == walked.free_symbols() == {outer, sympy.Symbol("returned_outer")}
    assert builder.finish([builder.record(mul_p, (x, y))]).free_symbols() == set()


def test_a_closure_over_an_outer_trace_is_seen_as_such():
    seen = {}

    def outer(t):
        inner = sd.trace(lambda u: u * t, 1.0)  # closes over the outer tracer t
        seen["inner"] = inner.closes_over_trace
        return inner(t)

    F = sd.trace(outer, 2.0)
    assert seen["inner"] is True
    assert F.closes_over_trace is False
    assert F(3.0) == 9.0


def test_a_builder_finds_its_nodes_by_their_symbols_and_only_its_own(builder):
    import pickle

    s = builder.record(sin_p, (x,))
    product = builder.record(mul_p, (s, y))
    graph = builder.finish([product])
    assert builder.node_of(product) is graph.nodes[1] and builder.node_of(x) is None
    assert builder.node_of(sympy.Integer(2)) is None
    inner = GraphBuilder("inner")  # a nested trace recording over the outer values
    assert inner.node_of(s) is None
    inner.record(cos_p, (s,))
    assert inner.node_of(s) is None and builder.node_of(s) is graph.nodes[0]
    # A graph taken over by another builder (unpickled: new symbols) is found there.
    loaded = pickle.loads(pickle.dumps(graph))
    fresh = GraphBuilder("fresh")
    fresh.add_input(x)
    fresh.add_input(y)
    fresh.adopt(loaded.nodes)
    assert [fresh.node_of(node.symbol) for node in loaded.nodes] == list(loaded.nodes)
    assert loaded.nodes[1].args == (loaded.inputs[1], loaded.nodes[0].symbol)


def test_graphs_sharing_nodes_are_found_in_every_builder_that_adopts_them():
    # A function's graph and its gradient's share the primal nodes at other positions
    # (the gradient dropped dead ones). Adopting one must not change what a builder
    # that adopted the other finds: two threads may do both at once.
    def f(v):
        a = -v[0] * v[1]
        return a * a + np.sin(a - (-v[2])) - (-v[1]) * 3

    F = sd.trace(f, np.ones(3))
    G = sd.grad(F).trace(np.ones(3))
    shared = {node.symbol for node in F.graph.nodes} & {node.symbol for node in G.graph.nodes}
    assert shared and [n.symbol for n in G.graph.nodes if n.symbol in shared] != \
        [n.symbol for n in F.graph.nodes][:len(shared)]  # moved: the case under test
    first, second = GraphBuilder("first"), GraphBuilder("second")
    first.adopt(F.graph.nodes)
    second.adopt(G.graph.nodes)
    for builder, graph in ((first, F.graph), (second, G.graph)):
        assert [builder.node_of(node.symbol) for node in graph.nodes] == list(graph.nodes)
    # ... and the transforms of either give the same graphs as without the other.
    alone = len(sd.hessian(F).trace(np.ones(3)).graph.nodes)
    sd.jacfwd(G).trace(np.ones(3))
    assert len(sd.hessian(F).trace(np.ones(3)).graph.nodes) == alone


def test_unpickled_graphs_keep_their_canonical_operand_order_in_any_pickle_order():
    import pickle

    def f(t):
        s, c, e = np.sin(t), np.cos(t), np.exp(t)
        return s * c * e + (s * c) ** 2 + s * e - c * e * s + (e * c) * t

    F = sd.trace(f, 0.4)
    # Pickle meets the nodes last to first, before the graph.
    _, loaded = pickle.loads(pickle.dumps(([n.symbol for n in reversed(F.graph.nodes)], F)))
    for transform in (lambda g: sd.derivative(g, 3), lambda g: sd.taylor(g, 4)):
        assert len(transform(loaded).trace(0.4).graph.nodes) == len(transform(F).trace(0.4).graph.nodes)
    assert float(sd.derivative(loaded, 3)(0.4)) == float(sd.derivative(F, 3)(0.4))
    # Nodes made afterwards never share a number with an unpickled one (nor do their symbols).
    numbers = [node.number for node in loaded.graph.nodes]
    assert sd.trace(f, 0.4).graph.nodes[0].number > max(numbers)
    assert [node.sympy_symbol.dummy_index for node in loaded.graph.nodes] == numbers


def test_a_graph_pickled_before_graphs_kept_their_free_symbols_still_answers():
    graph = sd.trace(lambda t: np.sin(t) * t, 1.0).graph
    older = Graph.__new__(Graph)  # what unpickling a graph of the previous layout makes
    older.__dict__.update(inputs=graph.inputs, nodes=graph.nodes, outputs=graph.outputs)
    assert older.free_symbols() == set()


@pytest.mark.parametrize("transform, point", [
    (lambda f: sd.grad(lambda v: np.sum(f(v))), np.zeros(50)),
    (lambda f: sd.hessian(lambda v: np.sum(f(v))), np.zeros(3)),
    (lambda f: sd.derivative(f, 4), 0.5),           # Taylor mode: power and log series
    (lambda f: sd.taylor(f, 3), 0.5),
])
def test_a_deleted_graph_is_freed_without_the_cyclic_collector(transform, point):
    # Nodes hold no reference cycle, and neither does anything that holds nodes while a
    # transform runs (the Taylor rules' state, pytree's flattening): a traced derivative's
    # memory is returned when it is deleted, not at the next full collection.
    import gc

    def f(v):
        return np.sin(v) * np.exp(-v**2) + v**2.5 + np.abs(v) ** v

    def node_count():
        return sum(1 for o in gc.get_objects() if type(o) is Node)

    gc.collect()
    before = node_count()
    gc.disable()
    try:
        G = transform(f).trace(point)
        assert node_count() - before >= len(G.graph.nodes) > 20
        del G
        assert node_count() == before
    finally:
        gc.enable()


def test_commutative_operands_are_in_one_order_in_every_builder(builder):
    # Node symbols are ordered by creation, the same in every builder: a builder that
    # adopts a graph finds its commutative nodes whichever way the operands come.
    a, b = builder.record(sin_p, (x,)), builder.record(cos_p, (y,))
    ab, xa = builder.record(mul_p, (b, a)), builder.record(mul_p, (a, x))
    assert builder.node_of(ab).args == (a, b)
    assert builder.node_of(xa).args == (x, a)  # other symbols before node symbols
    graph = builder.finish([ab, xa])
    fresh = GraphBuilder("fresh")
    fresh.add_input(y)  # inputs before node symbols, in whatever order they were added
    fresh.add_input(x)
    fresh.adopt(graph.nodes)
    assert fresh.record(mul_p, (a, b)) is ab and fresh.record(mul_p, (b, a)) is ab
    assert fresh.record(mul_p, (a, x)) is xa and fresh.record(mul_p, (x, a)) is xa
    assert len(fresh.nodes) == len(graph.nodes)


def test_traces_of_one_function_are_the_same_graph():
    def f(v):
        return np.sum(np.sin(v) * v[::-1] + np.exp(v) * np.cos(v)) * v[0]

    def shape(graph):  # operands named by the graph's own order: node names are process-wide
        index = {node: i for i, node in enumerate(graph.nodes)}
        return [(node.primitive.name, tuple(f"node {index[a]}" if a in index else str(a) for a in node.args))
                for node in graph.nodes]

    graphs = [sd.grad(f).trace(np.ones(4)).graph for _ in range(2)]
    assert shape(graphs[0]) == shape(graphs[1])


def test_graph_is_a_cse_shaped_list_of_assignments(builder):
    s = builder.record(sin_p, (x,))
    product = builder.record(mul_p, (s, y))
    graph = builder.finish([builder.record(add_p, (product, s))])
    pairs = list(graph.assignments())
    assert pairs[0] == (s.sympy_symbol, sympy.sin(x))
    assert pairs[1] == (product.sympy_symbol, s.sympy_symbol * y)
    assert all(isinstance(symbol, sympy.Dummy) for symbol, _ in pairs)
    # every expression refers only to inputs and earlier node symbols
    known = set(graph.inputs)
    for symbol, expression in pairs:
        assert expression.free_symbols <= known
        known.add(symbol)


def test_replay_into_a_builder_reuses_equal_nodes(builder):
    s = builder.record(sin_p, (x,))
    graph = builder.finish([builder.record(mul_p, (s, s))])
    other = GraphBuilder("other")
    other.add_input(x)
    other.add_input(y)
    existing = other.record(sin_p, (x,))
    env = replay(graph, other, {})
    assert env[s] is existing
    assert len(other.nodes) == 2


def test_shared_subexpressions_stay_shared_in_transforms():
    def f(t):
        s = snp.sin(t)
        return s * s + s

    F = sd.trace(f, 0.3)
    assert F.stats()["operations"]["sin"] == 1
    G = sd.grad(f).trace(0.3)
    assert G.stats()["operations"].get("sin", 0) == 1
    assert G.stats()["operations"].get("cos", 0) == 1


@pytest.mark.parametrize("iterations", [4, 8, 16, 32])
def test_gradient_graph_of_logistic_map_grows_linearly(iterations):
    def logistic(l):
        for _ in range(iterations):
            l = 4 * l * (1 - l)
        return l

    function_nodes = sd.trace(logistic, 0.3).stats()["nodes"]
    gradient_nodes = sd.grad(logistic).trace(0.3).stats()["nodes"]
    assert function_nodes == 3 * iterations
    assert gradient_nodes == 7 * iterations - 3  # at most 3x the function, as CasADi's 2.2x
    assert gradient_nodes <= 3 * function_nodes
    exact = np.prod([4 - 8 * v for v in _orbit(0.3, iterations)])
    np.testing.assert_allclose(sd.grad(logistic)(0.3), exact, rtol=1e-12)


def _orbit(start, iterations):
    values, l = [], start
    for _ in range(iterations):
        values.append(l)
        l = 4 * l * (1 - l)
    return values


# -- traced scalars hold their atom: no object array per scalar operation -------


def _count_scalar_arrays_in_partials(monkeypatch) -> list:
    """The 0-d object arrays made while partial derivative rules run."""
    import symad.atom_arrays as atom_arrays_module
    import symad.tracer as tracer_module
    import symad.transforms.reverse as reverse_module

    made, inside = [], []
    make_array, take_partials = tracer_module.scalar_array, reverse_module.partial_atoms

    def counting(atom):
        if inside:
            made.append(atom)
        return make_array(atom)

    def partials(*args):
        inside.append(True)
        try:
            return take_partials(*args)
        finally:
            inside.pop()

    # Both modules that make 0-d arrays of atoms (the tracer imports it from atom_arrays).
    monkeypatch.setattr(tracer_module, "scalar_array", counting)
    monkeypatch.setattr(atom_arrays_module, "scalar_array", counting)
    monkeypatch.setattr(reverse_module, "partial_atoms", partials)
    return made


def test_scalar_arithmetic_and_its_partials_make_no_object_arrays(monkeypatch):
    def f(x):
        for _ in range(5):
            x = np.sin(x) * 0.5 + snp.exp(-x) / (1.0 + x**2) - np.tanh(x) + snp.erf(x)
        return x

    made = _count_scalar_arrays_in_partials(monkeypatch)
    G = sd.grad(f).trace(0.3)
    # Every operand of every partial rule above is a traced scalar holding its atom.
    assert made == []
    # ...and the gradient is right (against Taylor mode, which takes no partials).
    assert float(G(0.3)) == pytest.approx(float(sd.derivative(f, 1)(0.3)), rel=1e-13)


def test_a_scalar_tracer_behaves_as_a_0d_array_when_shape_logic_needs_one():
    from symad.tracer import Tracer

    x = sympy.Symbol("x")
    builder = GraphBuilder()
    builder.add_input(x)
    with builder.active():
        t = Tracer.of_atom(x)
        assert (t.shape, t.ndim, t.size) == ((), 0, 1)
        assert t.reshape(1).shape == (1,)
        assert snp.stack([t, t]).shape == (2,)
        copy = t
        t = t.copy()
        t[()] = 2.0  # item assignment on a 0-d value, as on a NumPy 0-d array
        assert float(t.atoms[()]) == 2.0
        assert copy.atoms[()] is x  # the original is unchanged
        assert repr(Tracer.of_atom(x)) == "Tracer(x)"


# ---------------------------------------------------------------------------
# The garbage collector around a recording
# ---------------------------------------------------------------------------


def test_what_a_pause_made_is_not_walked_by_the_next_young_collection():
    import gc

    from symad.graph import garbage_collection_paused

    assert gc.isenabled()
    with garbage_collection_paused():
        made = [[index] for index in range(50_000)]  # tracked objects, as a graph's nodes are
    assert gc.isenabled()
    # Promoted to the oldest generation in one step, not left in the youngest for
    # its next collection to walk (which would move them to the middle one).
    target = made[-1]
    assert any(obj is target for obj in gc.get_objects(generation=2))
    del made, target


def test_objects_the_program_froze_stay_frozen():
    import gc

    from symad.graph import garbage_collection_paused

    # A frozen object lives in the permanent generation, outside every generation that
    # gc.get_objects lists. (The freeze count is no witness: other threads of the session,
    # a dask worker's say, may free frozen objects meanwhile.)
    sentinel = [object()]
    gc.freeze()
    try:
        with garbage_collection_paused():
            made = [[index] for index in range(1_000)]
        assert gc.get_freeze_count() > 0
        assert not any(obj is sentinel for obj in gc.get_objects())  # not unfrozen by the pause
        del made
    finally:
        gc.unfreeze()


def test_input_symbols_are_plain_sympy_symbols_made_without_sympys_cache():
    import sympy

    from symad.atom_arrays import symbol_array

    cached = getattr(sympy.Symbol, "_Symbol__xnew_cached_", None)
    before = cached.cache_info().currsize if cached is not None else None
    symbols = symbol_array("w", (2, 1500))
    if cached is not None:  # 3,000 names would have evicted the user's whole cache
        assert cached.cache_info().currsize == before
    made, plain = symbols[1, 7], sympy.Symbol("w[1, 7]")
    assert type(made) is sympy.Symbol and made == plain and hash(made) == hash(plain)
    assert made.is_real is None and made.is_commutative and plain.is_real is None
    assert (made + plain) == 2 * plain and sympy.diff(made**2, plain) == 2 * plain
    assert symbol_array("x", (3,))[2] == sympy.Symbol("x[2]")


@pytest.mark.parametrize("make, point", [
    # Subtraction and where compare operands (x - x -> 0, where(c, a, a) -> a), a traced
    # exponent asks whether it is the base: none of it may make a node's SymPy symbol.
    (lambda f: sd.hessian(lambda v: np.sum(np.where(v > 0.5, f(v) - 1.0, v - np.mean(v)))),
     np.linspace(0.1, 0.9, 4)),
    (lambda f: sd.derivative(lambda t: f(t) * (t - 0.25), 3), 0.4),
    (lambda f: sd.grad(lambda v: np.sum(v[0] ** np.sin(v))), np.linspace(0.1, 0.9, 4)),
])
def test_transforms_make_no_sympy_symbol_for_any_node(make, point):
    def f(v):
        return np.sin(v) * np.exp(-v**2) + 3 * np.cos(v)

    G = make(f).trace(point)
    G(point)
    assert all(node._symbol is None and node._expr is None for node in G.graph.nodes)


def test_recording_differentiating_and_evaluating_make_no_sympy_object_per_node():
    # A node is its own atom; its SymPy symbol and expression are made only when asked for.
    def energy(v):
        return np.sum(np.sin(v) * np.exp(-v**2))

    G = sd.grad(element_trace(energy, np.zeros(20))).trace(np.zeros(20))
    point = np.linspace(-1.0, 1.0, 20)
    expected = (np.cos(point) - 2 * point * np.sin(point)) * np.exp(-point**2)
    for backend in sd.available_backends():
        np.testing.assert_allclose(G.compile(backend)(point), expected, rtol=1e-13)
    nodes = G.graph.nodes
    assert all(node._symbol is None and node._expr is None for node in nodes)
    # Formulas and programs are built from the operands' expressions, not from node symbols.
    assignments, (gradient,) = G.cse(expand=True)
    values = dict(zip(G.expand().graph.inputs, point.tolist()))
    program = {}
    for name, expression in assignments:
        program[name] = float(expression.xreplace(program).xreplace(values))
    assert [float(e.xreplace(program).xreplace(values)) for e in gradient] == pytest.approx(expected)
    assert all(node._symbol is None for node in nodes)
    # A node is not something SymPy converts: comparing makes no symbol, mixing it in fails.
    assert sympy.Float(1.0) != nodes[-1] and nodes[-1]._symbol is None
    with pytest.raises((sympy.SympifyError, TypeError)):
        sympy.sin(nodes[-1])
    # Graph.assignments() is what asks for the symbols: Dummies named after the positions.
    pairs = list(G.graph.assignments())
    assert [symbol for symbol, _ in pairs] == [node.sympy_symbol for node in nodes]
    assert all(isinstance(symbol, sympy.Dummy) for symbol, _ in pairs)
    assert [str(node) for node in nodes] == [str(symbol) for symbol, _ in pairs]
    assert len({str(symbol) for symbol, _ in pairs}) == len(pairs)
    used = {a for node in nodes for a in node.args if isinstance(a, Node)}
    assert all(expression.free_symbols <= set(G.graph.inputs) | {u.sympy_symbol for u in used}
               for _, expression in pairs)


def test_threads_asking_for_the_assignments_at_once_get_one_symbol_per_node():
    import threading

    G = sd.grad(element_trace(lambda v: np.sum(np.sin(v) * np.exp(-v**2)), np.zeros(300))).trace(
        np.zeros(300))
    results, start = [], threading.Barrier(4)

    def assignments():
        start.wait()
        results.append(list(G.graph.assignments()))

    threads = [threading.Thread(target=assignments) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = results[0]
    assert all([symbol for symbol, _ in other] == [symbol for symbol, _ in first] for other in results)
    defined = set(G.graph.inputs)
    for symbol, expression in first:
        assert expression.free_symbols <= defined  # every symbol used is an earlier assignment's
        defined.add(symbol)


def test_sympy_expressions_pickled_with_their_graph_still_name_its_nodes():
    import pickle

    F = sd.trace(lambda t: np.sin(t) * np.cos(t) + t, 0.3)
    pairs = list(F.graph.assignments())
    loaded, loaded_pairs = pickle.loads(pickle.dumps((F, pairs)))
    assert [node.sympy_symbol for node in loaded.graph.nodes] == [symbol for symbol, _ in loaded_pairs]
    assert float(loaded(0.3)) == pytest.approx(np.sin(0.3) * np.cos(0.3) + 0.3)


def test_unpickling_while_another_thread_records_never_repeats_a_node_number():
    import pickle
    import sys
    import threading

    from symad.graph import _FIRST_NUMBER, _number_past

    numbers: list = []
    done = threading.Event()

    def record():
        numbers.extend(Node(sin_p, (x,)).number for _ in range(100_000))
        done.set()

    def unpickle():  # what unpickling a node does, as often as it can
        while not done.is_set():
            _number_past(_FIRST_NUMBER)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=unpickle), threading.Thread(target=record)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(set(numbers)) == len(numbers)
    # An unpickled node keeps its number; nodes made after it number after it.
    F = sd.trace(lambda t: np.sin(t) * np.cos(t) + np.exp(t) * t, 0.3)
    loaded = pickle.loads(pickle.dumps(F))
    assert [node.number for node in loaded.graph.nodes] == [node.number for node in F.graph.nodes]
    assert sd.trace(np.sin, 0.3).graph.nodes[0].number > max(node.number for node in F.graph.nodes)


def test_a_node_pickled_from_another_process_numbers_later_nodes_after_it():
    import pickle

    from symad.graph import _restore_node

    far_ahead = sd.trace(np.sin, 0.3).graph.nodes[0].number + 10**6
    node = pickle.loads(pickle.dumps(_restore_node(sin_p, (x,), (), 0, far_ahead)))
    assert node.number == far_ahead
    assert sd.trace(np.cos, 0.3).graph.nodes[0].number > far_ahead


def test_formulas_of_a_function_over_an_enclosing_traces_value_print_that_value():
    seen = {}

    def outer(v):
        z = np.sin(v)  # a node of the outer trace, a free value of the inner ones
        seen["alone"] = sd.trace(lambda y: y * 0.0 + z, 1.0)
        seen["mixed"] = sd.trace(lambda y: 2.0 * z + y, 1.0)
        z_symbol = seen["z"] = sd.trace(lambda y: y * 0.0 + z, 1.0).graph.outputs[0].sympy_symbol
        y = sympy.Symbol("y")
        assert seen["alone"].formula() == z_symbol and seen["alone"].cse() == ([], [z_symbol])
        assert seen["mixed"].formula() == 2.0 * z_symbol + y
        k = z_symbol.name[1:]  # the outer node's number: n<k>
        assert seen["alone"].latex() == f"\\begin{{aligned}}\nf &= n_{{{k}}}\n\\end{{aligned}}"
        assert f"2 n_{{{k}}} + y" in seen["mixed"].latex()
        return z

    sd.trace(outer, 0.5)
    assert "z" in seen


def test_a_deep_chain_held_by_its_last_node_alone_is_freed_without_overflowing():
    # A node holds its operands, so freeing the last node of a chain frees the chain
    # behind it; CPython's deallocation of nested objects is not limited by recursion.
    import gc
    import weakref

    class Marker:  # an operand that can say when it is freed
        pass

    marker = Marker()
    last = Node(sin_p, (marker,))
    for _ in range(200_000):
        last = Node(sin_p, (last,))
    freed = weakref.finalize(marker, lambda: None)
    del marker
    assert freed.alive
    gc.disable()
    try:
        del last
        assert not freed.alive
    finally:
        gc.enable()


def test_a_program_mixing_nodes_of_several_builders_names_each_node_once():
    # A nested gradient keeps the inner gradient's nodes and records its own; an inner
    # trace reads an outer one's values. Names by position in a builder collided there.
    def f(x, y):
        a = np.sin(x * y)
        return a * a + np.exp(a)

    G = sd.grad(sd.grad(f), argnums=1).trace(1.0, 2.0)
    names = [str(symbol) for symbol, _ in G.graph.assignments()]
    assert len(set(names)) == len(names)
    seen = {}

    def outer(v):
        a = np.sin(v)
        seen["names"] = [(str(symbol), str(expression)) for symbol, expression
                         in sd.trace(lambda y: a * np.cos(y), 1.0).graph.assignments()]
        seen["outer"] = str(a.atoms[()]) if hasattr(a, "atoms") else None
        return a

    sd.trace(outer, 1.0)
    (cos_name, _), (product_name, product) = seen["names"]
    assert len({cos_name, product_name, seen["outer"]}) == 3
    assert seen["outer"] in product and cos_name in product
