"""The tape backend (symad/compile/scalar/tape.py): any scalar graph run by one interpreter.

Every primitive with an opcode against its NumPy implementation (one point, a small batch,
a batch of several blocks), in both interpreters (C, symad/compile/scalar/tape_c.py, and
numba's); variadic sums of 1 to 10^4 operands; random whole-array programs, expanded to
scalar nodes, against NumPy's own evaluation and their gradients against the NumPy backend;
what it declines (special functions, array programs) and the fallback that takes over; and
where the default picks it (symad.compile.tiers.tape_serves). An interpreter whose
language this machine lacks (no C compiler, no numba) has its tests skipped.
"""

from __future__ import annotations

import functools
import logging

import numpy as np
import pytest
import sympy

import symad as sd
from symad.compile import tiers
from symad.compile.registry import numba_available
from symad.compile.scalar import tape as T
from symad.compile.scalar.tape_c import c_compiler
from symad.graph import GraphBuilder
from symad.primitives import add_p, sin_p
from tests.random_programs import generate
from tests.test_catalogue import one_node_graph, reference, sample

pytestmark = pytest.mark.skipif(not (numba_available() or c_compiler()),
                                reason="the tape needs a C compiler or numba")

#: The interpreters this machine can make, each a test parameter.
LANGUAGES = [pytest.param("c", marks=pytest.mark.skipif(c_compiler() is None, reason="no C compiler")),
             pytest.param("numba", marks=pytest.mark.skipif(not numba_available(), reason="no numba"))]
OPERATIONS = [operation.primitive.name for operation in T.operations()]
# One point, a small batch, and more points than one block holds (a one-node graph's block
# is TAPE_WORKING_SET_BYTES / (rows * 8): with about 4 rows, 10^5 points or more).
BATCHES = [1, 7, 300_000]


@pytest.fixture(params=LANGUAGES)
def language(request, monkeypatch):
    """Each test that takes it runs once per interpreter: the tape's lowering asks for it."""
    monkeypatch.setattr(T, "interpreter", functools.partial(T.interpreter, language=request.param))
    return request.param


def _run_module(graph, columns):
    module = T.lower_tape(graph, "float64")
    from symad.compile.evaluator import load_module

    return load_module(module)["run"](*columns)[0]


@pytest.mark.parametrize("name", OPERATIONS)
@pytest.mark.parametrize("points", BATCHES)
def test_every_opcode_agrees_with_numpy(name, points, language):
    orders, columns = sample(name, seed=points, points=points)
    graph, *_ = one_node_graph(name, orders)
    want = reference(name, orders, columns)
    inputs = [np.asarray(c, float) for c in columns if c is not None]
    got = _run_module(graph, inputs)
    assert got.shape == want.shape
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("spelling", ["numba", "c"])
def test_the_catalogue_walk_names_every_primitive_without_an_opcode(spelling):
    # Every elementwise primitive with a scalar spelling in the interpreter's language has an
    # opcode (a variadic one only if its spelling is a left fold), and no other; both
    # interpreters run the same operations.
    from symad.ir.primitive import PRIMITIVES

    names = {operation.primitive.name for operation in T.operations(spelling)}
    spelled = {p.name for p in PRIMITIVES.values() if p.elementwise and p.spelling(spelling) is not None}
    assert names == spelled - {p.name for p in PRIMITIVES.values() if p.variadic
                               and T._operation(p, spelling) is None}
    assert {"add", "reduce_max", "reduce_min", "where", "less", "erf"} <= names
    assert names == set(OPERATIONS)


@pytest.mark.parametrize("terms", [1, 2, 3, 129, 10_000])
def test_a_sum_of_any_number_of_operands_is_one_instruction(terms, language):
    symbols = sympy.symbols(f"x0:{terms}")
    builder = GraphBuilder("sum")
    for symbol in symbols:
        builder.add_input(symbol)
    with builder.active():
        sines = [builder.record(sin_p, (s,)) for s in symbols]
        out = builder.record(add_p, tuple(sines)) if terms > 1 else sines[0]
    tape = T.build_tape(builder.finish([out]))
    assert len(tape.opcodes) == terms + (terms > 1)
    rng = np.random.default_rng(terms)
    columns = [rng.uniform(-2, 2, 3) for _ in range(terms)]
    got = _run_module(builder.finish([out]), columns)
    np.testing.assert_allclose(got, np.sum(np.sin(columns), axis=0), rtol=1e-12)


def test_outputs_may_be_inputs_constants_repeats_and_truth_values(language):
    F = sd.trace(lambda x, y: (x, 2.5, x * y, x * y, x > y, np.where(x > y, x, y)), 1.0, 2.0)
    C = F.compile("tape")
    assert C.note == ""
    x, y = np.array([1.0, 3.0, -1.0]), np.array([2.0, 0.5, -1.0])
    for got, want in zip(C(x, y), (x, 2.5, x * y, x * y, x > y, np.where(x > y, x, y))):
        np.testing.assert_array_equal(got, want)
    assert C(x, y)[4].dtype == bool


def test_a_graph_of_no_operations(language):
    C = sd.trace(lambda x: x, 0.0).compile("tape")
    np.testing.assert_array_equal(C(np.arange(5.0)), np.arange(5.0))


@pytest.mark.skipif(not numba_available(), reason="float32 tapes are numba's")
def test_float32_is_computed_in_float32():
    F = sd.grad(lambda x: np.sin(x) * x ** 2).trace(np.float32(0.5))
    x = np.linspace(0, 1, 9, dtype=np.float32)
    got = F.compile("tape")(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, F.compile("numpy")(x), rtol=1e-6)


def _euler(k, c, steps=300):
    theta, omega = 1.0, 0.0
    for _ in range(steps):
        theta, omega = theta + 1e-3 * omega, omega + 1e-3 * (-k * np.sin(theta) - c * omega)
    return theta


def test_an_unrolled_loop_gradient_against_numpy_and_central_differences(language):
    G = sd.grad(_euler, argnums=(0, 1)).trace(2.0, 0.3)
    k, c = np.array([2.0, 1.5, 0.7]), np.array([0.3, 0.0, 1.1])
    got = G.compile("tape")(k, c)
    want = G.compile("numpy")(k, c)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    h = 1e-6
    central = (_euler(2.0 + h, 0.3) - _euler(2.0 - h, 0.3)) / (2 * h)
    assert abs(G.compile("tape")(2.0, 0.3)[0] - central) < 1e-8


@pytest.mark.parametrize("seed", list(range(12)))
def test_random_programs_expanded_agree_with_numpy(seed, language):
    program = generate(seed)
    args = program.inputs()
    if args is None:
        pytest.skip("no smooth point for this program")
    function = program.function()
    E = sd.trace(function, *args).expand()
    np.testing.assert_allclose(E.compile("tape")(*args), function(*args), rtol=1e-11, atol=1e-12)
    G = sd.grad(E, argnums=tuple(range(len(args)))).trace(*args)
    for got, want in zip(G.compile("tape")(*args), G.compile("numpy")(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_a_primitive_without_an_opcode_falls_back_to_numexpr_saying_why(caplog):
    import scipy.special

    F = sd.trace(lambda x: sd.special.gammaln(x) * x, 1.5)
    with caplog.at_level(logging.WARNING, logger="symad"):
        C = F.compile("tape")
    assert "no opcode for gammaln" in C.note and "numexpr" in C.note
    assert "no opcode for gammaln" in caplog.text
    x = np.array([0.5, 1.5, 4.0])
    np.testing.assert_allclose(C(x), scipy.special.gammaln(x) * x, rtol=1e-14)


def test_an_array_program_is_declined():
    C = sd.trace(lambda x: np.sum(np.sin(x)), np.ones(3)).compile("tape")
    assert "not array programs" in C.note
    assert np.isclose(C(np.ones(3)), 3 * np.sin(1.0))


def test_build_tape_refuses_unknown_primitives_by_name():
    from symad.compile.registry import BackendUnsupported
    from symad.primitives import PRIMITIVES

    x = sympy.Symbol("x")
    builder = GraphBuilder()
    builder.add_input(x)
    graph = builder.finish([builder.record(PRIMITIVES["logsumexp"], (x, sympy.Integer(2)))])
    with pytest.raises(BackendUnsupported, match="no opcode for logsumexp"):
        T.build_tape(graph)


# ---------------------------------------------------------------------------
# The default's choice
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("nodes, inputs, outputs, points, serves", [
    (tiers.TAPE_MIN_NODES, 2, 2, 1, True),
    (tiers.TAPE_MIN_NODES - 1, 2, 2, 1, False),
    (190_000, 2, 2, tiers.TAPE_MAX_POINTS, True),
    (190_000, 2, 2, tiers.TAPE_MAX_POINTS + 1, False),
    (100_000, 10_000, 10_000, 1, False),   # wide: numexpr's levels
])
def test_tape_serves(monkeypatch, nodes, inputs, outputs, points, serves):
    monkeypatch.setattr(tiers, "promotion_enabled", lambda target="numba": True)
    assert tiers.tape_serves(nodes, inputs, outputs, points) is serves
    monkeypatch.setattr(tiers, "promotion_enabled", lambda target="numba": False)
    assert tiers.tape_serves(nodes, inputs, outputs, points) is False


def _chain(x, depth=tiers.TAPE_MIN_NODES // 2):
    for _ in range(depth):
        x = np.sin(x) + 0.001 * x
    return x


def test_the_default_serves_a_large_graph_at_one_point_with_the_tape(monkeypatch):
    from symad import config

    monkeypatch.setattr(config, "promote", None, raising=False)
    monkeypatch.delenv("SYMAD_PROMOTE", raising=False)
    G = sd.grad(_chain).trace(0.3)
    assert len(G.graph.nodes) >= tiers.TAPE_MIN_NODES
    value = G(0.3)
    assert [backend for backend, _ in G._evaluators] == ["tape"]
    assert value == pytest.approx(G.compile("numexpr")(0.3), rel=1e-12)
    G(np.full(tiers.TAPE_MAX_POINTS + 1, 0.3))  # a large batch: not the tape
    assert "numexpr" in {backend for backend, _ in G._evaluators}


def test_promotion_off_keeps_the_default_in_numexpr(monkeypatch):
    monkeypatch.setenv("SYMAD_PROMOTE", "0")
    G = sd.grad(_chain).trace(0.3)
    G(0.3)
    assert [backend for backend, _ in G._evaluators] == ["numexpr"]


def test_the_interpreter_is_made_once_per_process():
    first = T.interpreter()
    assert T.interpreter()[1] is first[1]
    F = sd.trace(lambda x: np.cos(x) * x, 0.1)
    assert F.compile("tape").note == ""
    assert T.interpreter()[1] is first[1]


def test_an_interpreter_numba_cannot_compile_falls_back_to_numexpr(monkeypatch, tmp_path):
    # A catalogue spelling numba cannot compile (here a made-up one) declines the tape when
    # it is lowered, not at the first evaluation, so the registry's fallback still applies.
    from symad.ir.primitive import Primitive

    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path))
    made_up = Primitive("made_up_for_the_tape_test", lambda x: x, lambda x: x,
                        numba="no_such_function({0})")
    table = T.operations() + [T.Operation(made_up, "no_such_function(x0)", False)]
    original = T.operations
    monkeypatch.setattr(T, "operations", lambda language="numba": table if language == "numba" else original(language))
    monkeypatch.setattr(T, "interpreter", functools.partial(T.interpreter, language="numba"))
    C = sd.trace(lambda x: np.sin(x) * x, 0.5).compile("tape")
    assert "interpreter could not be made" in C.note and C.note.endswith("numexpr instead")
    assert C(0.5) == pytest.approx(np.sin(0.5) * 0.5, rel=1e-15)


# ---------------------------------------------------------------------------
# The C interpreter: built once per machine, and what happens without it
# ---------------------------------------------------------------------------


@pytest.mark.skipif(c_compiler() is None, reason="no C compiler")
def test_the_c_interpreter_is_kept_on_disk_and_loaded_by_a_fresh_process(tmp_path):
    import subprocess
    import sys

    script = ("import numpy as np, sys, symad as sd\n"
              "from symad.compile.scalar import tape\n"
              "C = sd.trace(lambda x: np.sin(x) * x, 0.5).compile('tape')\n"
              "assert C.note == '', C.note\n"
              "print(C(0.5), tape.interpreter()[1].__module__, 'numba' in sys.modules)\n")
    environment = {**__import__("os").environ, "SYMAD_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    for value, module, numba_imported in runs:
        assert float(value) == pytest.approx(np.sin(0.5) * 0.5, rel=1e-15)
        assert module == "symad.compile.scalar.tape_c" and numba_imported == "False"
    assert len(list((tmp_path / "tape").glob("symad_tape_*.so"))) == 1   # built once


def test_a_compiler_that_fails_hands_the_tape_to_numba_then_numexpr(monkeypatch, tmp_path, caplog):
    from symad.compile.scalar import tape_c

    monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(T, "_INTERPRETERS", {})
    monkeypatch.setattr(tape_c, "c_compiler", lambda: "/bin/false")
    with caplog.at_level(logging.INFO, logger="symad"):
        C = sd.trace(lambda x: np.cos(x) * x, 0.5).compile("tape")
    assert C(0.5) == pytest.approx(np.cos(0.5) * 0.5, rel=1e-15)
    assert "the C source did not compile" in caplog.text
    if numba_available():
        assert C.note == "" and T.interpreter()[1].__module__ != "symad.compile.scalar.tape_c"
    else:
        assert "the C source did not compile" in C.note and C.note.endswith("numexpr instead")
