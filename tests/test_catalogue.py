"""The catalogue, walked whole: every primitive's stanza against what it claims.

Every primitive (built-in, a SymPy import, user-defined) has, in every transform's rule table
that applies to it (partials, Taylor, transpose, tangent, sparsity pattern, unroll, index
notation), a rule or a named reason it has none. Every backend spelling a stanza gives (``symad.primitives.BACKENDS``) is
evaluated at random points of the primitive's domain and compared with the primitive's NumPy
implementation: numexpr (its string programs and its virtual machine's programs, whether
or not the cost table sends the primitive there today), numba (one kernel for every
primitive it spells), C (one translation unit, compiled by the machine's C compiler),
mpmath and the interval enclosures. Every LaTeX spelling of a stanza is parsed back with
SymPy's ``parse_latex`` and evaluated at the same points.
"""

import ctypes
import shutil
import subprocess

import mpmath
import numpy as np
import pytest
import scipy.special
import sympy

import symad  # noqa: F401 - registers every built-in primitive
from symad.atom_arrays import scalar_array
from symad.compile import generate_module
from symad.compile.evaluator import load_module
from symad.compile.scalar import numexpr_backend as NE
from symad.compile.scalar.program import Instruction
from symad.export.index_rules import INDEX_RULES
from symad.export.latex_printer import symbol_latex
from symad.function import finish_function
from symad.graph import GraphBuilder
from symad.primitives import BACKENDS, PARTIALS, PRIMITIVES, Primitive, mul_p, select_p
from symad.pytree import tree_flatten
from symad.rules.tangents import TANGENT
from symad.rules.taylor import TAYLOR
from symad.rules.transposes import TRANSPOSE
from symad.rules.unroll import UNROLL
from symad.transforms.series import SERIES
from symad.transforms.sparsity import PATTERN

BUILTIN = sorted(name for name in PRIMITIVES if not name.startswith("sympy."))
ELEMENTWISE = [name for name in BUILTIN if PRIMITIVES[name].elementwise]

# ---------------------------------------------------------------------------
# Rules: in every table that applies to a primitive, a rule or a named reason
# ---------------------------------------------------------------------------

#: Every transform's table (each a RuleTable keyed by the primitive object).
TABLES = [PARTIALS, TAYLOR, SERIES, TRANSPOSE, TANGENT, PATTERN, UNROLL, INDEX_RULES]


def _sympy_import_primitive():
    """A primitive made by importing a SymPy function symad has no stanza for."""
    from symad.sympy_import import sympy_function_primitive

    return sympy_function_primitive(sympy.besselj)


def _user_primitives():
    """User-defined primitives (``@sd.primitive``): one with its partials, one without."""
    from symad.custom import CUSTOM_PRIMITIVES

    if "catalogue_bare" not in CUSTOM_PRIMITIVES:
        softsign = symad.primitive(lambda x: x / (1 + np.abs(x)), name="catalogue_softsign")
        softsign.defpartials(lambda x: (1 / (1 + abs(x)) ** 2,))
        symad.primitive(lambda x: x ** 3, name="catalogue_bare")
    return CUSTOM_PRIMITIVES["catalogue_softsign"], CUSTOM_PRIMITIVES["catalogue_bare"]


def _every_primitive() -> list:
    """The whole catalogue: built-in (scalar, array, special), a SymPy import and
    user-defined primitives (registered through ``register`` or ``@sd.primitive``)."""
    from symad.custom import CUSTOM_PRIMITIVES

    _sympy_import_primitive()
    _user_primitives()
    registered = list(PRIMITIVES.values())
    custom = [c.primitive for c in CUSTOM_PRIMITIVES.values() if c.primitive not in registered]
    return registered + custom


def _is_user_defined(primitive) -> bool:
    from symad.custom import CUSTOM_PRIMITIVES

    return any(custom.primitive is primitive for custom in CUSTOM_PRIMITIVES.values())


#: A user-defined primitive given no partials has no rule, on purpose: differentiating
#: through it raises a DifferentiationError naming it (checked below).
USER_WITHOUT_PARTIALS = "user-defined without .defpartials: differentiating raises, naming it"


def _missing(table, primitive) -> str | None:
    """What is wrong with ``primitive`` in ``table``: None if it has a rule or a reason."""
    if not table.applies(primitive) or primitive in table or table.reason_missing(primitive):
        return None
    if _is_user_defined(primitive) and primitive not in PARTIALS:
        return None  # USER_WITHOUT_PARTIALS (partials, and Taylor's chain rule through them)
    return f"{primitive.name}: no {table.transform} rule and no reason given"


@pytest.mark.parametrize("table", TABLES, ids=[table.transform for table in TABLES])
def test_every_primitive_has_a_rule_or_a_named_reason_in_every_table(table):
    missing = [m for m in (_missing(table, p) for p in _every_primitive()) if m is not None]
    assert not missing, missing


@pytest.mark.parametrize("table", TABLES, ids=[table.transform for table in TABLES])
def test_rules_and_reasons_are_for_primitives_the_table_applies_to(table):
    for primitive in list(table) + list(table.reasons):
        assert table.applies(primitive), (table.transform, primitive.name)
    assert not set(table) & set(table.reasons), "a rule and a reason it has none"


@pytest.mark.parametrize("name", BUILTIN)
def test_every_partial_rule_has_one_entry_per_operand(name):
    rules = PARTIALS.get(PRIMITIVES[name])
    if rules is not None and not PRIMITIVES[name].variadic:
        assert len(rules) == PRIMITIVES[name].arity, (name, len(rules))


def test_a_user_primitive_without_partials_says_so_when_differentiated():
    softsign, bare = _user_primitives()
    assert softsign.primitive in PARTIALS and bare.primitive not in PARTIALS
    with pytest.raises(symad.DifferentiationError, match="catalogue_bare"):
        symad.grad(lambda x: bare(x) * 2.0)(1.5)


def test_the_tables_find_a_planted_missing_rule(monkeypatch):
    # Remove one rule (the transpose of cumsum): the walk names it.
    from symad.array_primitives import cumsum_p

    monkeypatch.delitem(TRANSPOSE, cumsum_p)
    assert _missing(TRANSPOSE, cumsum_p) == "cumsum: no transpose rule and no reason given"


@pytest.mark.parametrize("name", [name for name in BUILTIN if not PRIMITIVES[name].elementwise])
def test_array_stanza_facts_are_consistent(name):
    primitive = PRIMITIVES[name]
    assert primitive.shape_rule is not None
    assert primitive.moves in (None, "gather", "place"), primitive.moves
    if primitive.moves or primitive.object_safe:  # moving or adding elements is linear
        assert primitive.kind == "linear", (name, primitive.kind)
    # A constant's values are what they are; a solve or an inverse of a singular matrix, and
    # the log of its determinant, are infinite or NaN however finite the matrix is.
    # (eig_vectors_inv: the inverse of a defective matrix's eigenvectors.)
    singular = {"inv", "solve", "logabsdet", "cholesky", "solve_triangular", "eig_vectors_inv"}
    assert primitive.finite == (name != "constant" and name not in singular)


@pytest.mark.parametrize("name", BUILTIN)
def test_stanza_fields_are_well_formed(name):
    primitive = PRIMITIVES[name]
    assert set(primitive.spellings) <= set(BACKENDS)
    if primitive.cost_ns is not None:
        assert len(primitive.cost_ns) == 2 and all(t > 0 for t in primitive.cost_ns)
        assert primitive.spelling("numexpr") is not None, f"{name}: a numexpr timing, no numexpr spelling"
    if not primitive.elementwise:
        assert not primitive.spellings, "array primitives are lowered by the array pipeline"


# ---------------------------------------------------------------------------
# Domains: where each primitive is sampled (uniform on an interval, an integer order, a
# truth value, or a few values that make comparisons tie); two operands default to (-2, 2)
# ---------------------------------------------------------------------------

U = lambda lo, hi: ("uniform", lo, hi)  # noqa: E731
ORDER = lambda *values: ("order", values)  # noqa: E731 - a constant of the graph
BOOL = ("bool",)
TIES = ("choice", (-1.0, 0.0, 0.5, 1.0))
POSITIVE = U(0.05, 4.0)
UNIT = U(-0.95, 0.95)
DEFAULT = U(-2.0, 2.0)

DOMAINS = {
    "power": (U(0.1, 3.0), DEFAULT), "divide": (DEFAULT, U(0.2, 2.0)),
    "sqrt": (POSITIVE,), "log": (POSITIVE,), "log2": (POSITIVE,), "log10": (POSITIVE,),
    "log1p": (U(-0.9, 3.0),), "arcsin": (UNIT,), "arccos": (UNIT,), "arctanh": (UNIT,),
    "arccosh": (U(1.05, 4.0),), "tan": (U(-1.2, 1.2),),
    "where": (BOOL, DEFAULT, DEFAULT), "logical_and": (BOOL, BOOL), "logical_or": (BOOL, BOOL),
    "logical_not": (BOOL,), "less": (TIES, TIES), "less_equal": (TIES, TIES),
    "greater": (TIES, TIES), "greater_equal": (TIES, TIES), "equal": (TIES, TIES),
    "not_equal": (TIES, TIES), "heaviside": (TIES, U(0.0, 1.0)),
    "erfinv": (U(-0.99, 0.99),), "erfcinv": (U(0.01, 1.99),), "ndtri": (U(0.01, 0.99),),
    "logit": (U(0.01, 0.99),), "log_ndtr": (U(-10.0, 5.0),), "mills_excess": (ORDER(0, 2), U(4.0, 9.0)),
    "xlogy": (DEFAULT, POSITIVE), "xlog1py": (DEFAULT, U(-0.9, 3.0)),
    "gamma": (U(0.1, 5.0),), "gammaln": (U(0.1, 5.0),), "digamma": (U(0.1, 5.0),),
    "polygamma": (ORDER(0, 2), U(0.1, 5.0)),
    "polygamma_difference": (ORDER(0, 1), U(0.5, 5.0), U(0.01, 1.0)),
    "beta": (U(0.1, 3.0), U(0.1, 3.0)), "betaln": (U(0.1, 3.0), U(0.1, 3.0)),
    "poch": (U(0.1, 3.0), U(0.1, 3.0)), "gammainc": (U(0.5, 3.0), U(0.0, 3.0)),
    "gammaincc": (U(0.5, 3.0), U(0.0, 3.0)), "betainc": (U(0.5, 3.0), U(0.5, 3.0), U(0.0, 1.0)),
    "jv": (ORDER(0, 1, 2), U(0.1, 5.0)), "yv": (ORDER(0, 1, 2), U(0.1, 5.0)),
    "iv": (ORDER(0, 1, 2), U(0.1, 5.0)), "kv": (ORDER(0, 1, 2), U(0.1, 5.0)),
    "spherical_jn": (ORDER(0, 1, 2), U(0.1, 5.0)),
    "zeta": (U(1.5, 4.0), U(0.5, 3.0)), "zeta_derivative": (ORDER(1, 2), U(1.5, 4.0), U(0.5, 3.0)),
    "lambertw": (U(-0.3, 3.0),), "lambertw1p": (U(-0.3, 3.0),),
    "ellipk": (U(-1.0, 0.95),), "ellipe": (U(-1.0, 0.95),),
    "elliptic_k_derivative": (ORDER(0, 2), U(-0.09, 0.09)),
    "elliptic_e_derivative": (ORDER(0, 2), U(-0.09, 0.09)),
}
POINTS = 12


def operand_count(primitive: Primitive) -> int:
    return 3 if primitive.variadic else primitive.arity


def domain(name: str) -> tuple:
    return DOMAINS.get(name, (DEFAULT,) * operand_count(PRIMITIVES[name]))


def sample(name: str, seed: int, points: int = POINTS):
    """``(orders, columns)``: a constant for each order operand (None elsewhere), and an array of
    ``points`` values for each other operand."""
    rng = np.random.default_rng([seed, *map(ord, name)])
    orders, columns = [], []
    for spec in domain(name):
        if spec[0] == "order":
            orders.append(int(rng.choice(spec[1])))
            columns.append(None)
            continue
        orders.append(None)
        if spec[0] == "uniform":
            columns.append(rng.uniform(spec[1], spec[2], points))
        elif spec[0] == "bool":
            columns.append(rng.integers(0, 2, points).astype(bool))
        else:
            columns.append(rng.choice(np.array(spec[1]), points))
    return orders, columns


def reference(name: str, orders, columns) -> np.ndarray:
    """The primitive's NumPy implementation at the sampled points."""
    operands = [o if o is not None else c for o, c in zip(orders, columns)]
    with np.errstate(all="ignore"):
        return np.asarray(PRIMITIVES[name].numpy_impl(*operands))


def one_node_graph(name: str, orders, wrap=None):
    """The graph of the primitive on inputs ``x0, x1, ...`` (order operands as constants);
    ``wrap(builder, node) -> output`` puts another operation around it."""
    primitive = PRIMITIVES[name]
    builder = GraphBuilder(name)
    operands, symbols = [], []
    for index, order in enumerate(orders):
        if order is not None:
            operands.append(sympy.Integer(order))
            continue
        symbol = sympy.Symbol(f"x{index}")
        builder.add_input(symbol)
        symbols.append(symbol)
        if index in primitive.boolean_operands:  # a truth value: x != 0 (the input is 0.0 or 1.0)
            operands.append(builder.record(PRIMITIVES["not_equal"], (symbol, sympy.Integer(0))))
        else:
            operands.append(symbol)
    with builder.active():
        node = builder.record(primitive, tuple(operands))
        out = wrap(builder, node) if wrap is not None else node
    return builder.finish([out]), builder, symbols, out


def inputs_of(orders, columns) -> list:
    return [c.astype(float) for o, c in zip(orders, columns) if o is None]


def assert_agrees(name: str, backend: str, got, want, columns, rtol=1e-12):
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    close = np.isclose(got, want, rtol=rtol, atol=1e-300, equal_nan=True)
    assert close.all(), (
        f"{name}: its {backend} spelling disagrees with its NumPy implementation at "
        f"{[np.asarray(c)[~close][:3].tolist() for c in columns if c is not None]}: "
        f"{got[~close][:3].tolist()} against {want[~close][:3].tolist()}")


def spelled(backend: str) -> list:
    return [name for name in ELEMENTWISE if PRIMITIVES[name].spelling(backend) is not None]


# ---------------------------------------------------------------------------
# numexpr: string programs and the virtual machine, at every primitive it spells
# ---------------------------------------------------------------------------


def _doubled(builder, node):
    """node * 2 (exact), or where(node, 2, 3) for a truth value: a region of two operations,
    so that the lowering writes it into a numexpr program (one operation that NumPy has
    as a ufunc of its own is a NumPy call)."""
    if node.primitive.returns_boolean:
        return builder.record(select_p, (node, sympy.Float(2.0), sympy.Float(3.0)))
    return builder.record(mul_p, (sympy.Float(2.0), node))


@pytest.mark.parametrize("name", spelled("numexpr"))
def test_numexpr_string_spelling_matches_numpy(name):
    numexpr = pytest.importorskip("numexpr")
    primitive = PRIMITIVES[name]
    orders, columns = sample(name, 1)
    n = operand_count(primitive)
    form = NE.numexpr_form(Instruction(n, primitive, tuple(range(n)), (), primitive.returns_boolean))
    assert form is not None, f"{name}: this numexpr lacks a function its spelling calls"
    names = [f"a{i}" for i in range(n)]
    values = {f"a{i}": c for i, c in enumerate(columns)}
    got = numexpr.evaluate(form(names), local_dict=values)
    assert_agrees(name, "numexpr (string)", got, reference(name, orders, columns), columns)


@pytest.mark.parametrize("name", spelled("numexpr"))
def test_numexpr_machine_spelling_matches_numpy(name, monkeypatch):
    pytest.importorskip("numexpr")
    if not NE._vm_usable():
        pytest.skip("this numexpr takes no assembled programs")
    # Whether numexpr or NumPy computes a primitive is the cost table's choice: here numexpr
    # computes every primitive it spells.
    monkeypatch.setattr(NE, "runs_in_numpy", lambda instruction: False)
    orders, columns = sample(name, 2)
    graph, *_ = one_node_graph(name, orders, _doubled)
    module = generate_module(graph, "numexpr", "float64", name)
    assert module.note == "", f"{name}: {module.note}"
    if isinstance(PRIMITIVES[name].spelling("numexpr"), tuple):  # (not an operand passed through)
        assert f"= {name}" in module.source, f"{name}: no machine program computes it"
    got = load_module(module)["run"](*inputs_of(orders, columns))[0]
    want = reference(name, orders, columns)
    want = np.where(want, 2.0, 3.0) if PRIMITIVES[name].returns_boolean else 2.0 * want
    assert_agrees(name, "numexpr (machine)", got, want, columns)


# ---------------------------------------------------------------------------
# numba: one kernel for every primitive it spells
# ---------------------------------------------------------------------------


def _all_in_one(names, seed):
    """One graph holding each primitive of ``names`` on inputs of its own, and the points."""
    builder = GraphBuilder("catalogue")
    outputs, inputs, expected, columns_of = [], [], {}, {}
    for name in names:
        primitive = PRIMITIVES[name]
        orders, columns = sample(name, seed)
        operands = []
        for index, order in enumerate(orders):
            if order is not None:
                operands.append(sympy.Integer(order))
                continue
            symbol = sympy.Symbol(f"{name}_{index}")
            builder.add_input(symbol)
            inputs.append(columns[index].astype(float))
            operands.append(builder.record(PRIMITIVES["not_equal"], (symbol, sympy.Integer(0)))
                            if index in primitive.boolean_operands else symbol)
        with builder.active():
            outputs.append(builder.record(primitive, tuple(operands)))
        expected[name] = reference(name, orders, columns)
        columns_of[name] = columns
    return builder, outputs, inputs, expected, columns_of


def test_numba_spellings_match_numpy():
    pytest.importorskip("numba")
    names = spelled("numba")
    # Kernels of at most 128 arrays (MAX_NUMBA_ARRAYS): a score of primitives each.
    for first in range(0, len(names), 20):
        chunk = names[first:first + 20]
        builder, outputs, inputs, expected, columns_of = _all_in_one(chunk, 3)
        module = generate_module(builder.finish(outputs), "numba", "float64", "catalogue")
        assert module.backend == "numba" and module.note == "", module.note
        results = load_module(module, on_disk=True)["run"](*inputs)
        for name, got in zip(chunk, results):
            assert_agrees(name, "numba", got, expected[name], columns_of[name])


# ---------------------------------------------------------------------------
# C: one translation unit for every primitive it spells
# ---------------------------------------------------------------------------

COMPILER = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


@pytest.mark.skipif(COMPILER is None, reason="no C compiler (cc/gcc/clang) on PATH")
def test_c_spellings_match_numpy(tmp_path):
    names = spelled("c")
    builder, outputs, inputs, expected, columns_of = _all_in_one(names, 4)
    graph = builder.finish(outputs)
    in_symbols = []
    for symbol in graph.inputs:
        array = np.empty((), dtype=object)
        array[()] = symbol
        in_symbols.append(array)
    result = tuple(outputs)
    treedef = tree_flatten(tuple(range(len(in_symbols))))[1]
    F = finish_function(builder, "catalogue", treedef, in_symbols, result)
    source, header = F.to_c("catalogue")
    (tmp_path / "catalogue.h").write_text(header)
    (tmp_path / "catalogue.c").write_text('#include "catalogue.h"\n' + source)
    library = tmp_path / "libcatalogue.so"
    subprocess.run([COMPILER, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-o", str(library), str(tmp_path / "catalogue.c"), "-lm"],
                   check=True, capture_output=True, text=True)
    function = ctypes.CDLL(str(library)).catalogue
    function.restype = None
    n_in, n_out = len(F.graph.inputs), len(F.graph.outputs)
    assert n_out == len(names)
    got = np.empty((POINTS, n_out))
    for point in range(POINTS):
        values = (ctypes.c_double * n_in)(*[float(column[point]) for column in inputs])
        out = (ctypes.c_double * n_out)()
        function(values, out)
        got[point] = out[:]
    for k, name in enumerate(names):
        assert_agrees(name, "C", got[:, k], expected[name], columns_of[name], rtol=1e-11)


# ---------------------------------------------------------------------------
# The interpreters: mpmath and interval
# ---------------------------------------------------------------------------


def _one_node_function(name, orders):
    graph, builder, symbols, out = one_node_graph(name, orders)
    treedef = tree_flatten(tuple(range(len(symbols))))[1]
    return finish_function(builder, name, treedef, [scalar_array(s) for s in symbols],
                           scalar_array(out))


#: Where NumPy's (SciPy's) own value is off by more than 1e-12 relative at some sampled points.
LOOSER = {"zeta_derivative": 1e-9, "mills_excess": 1e-9, "polygamma_difference": 1e-10,
          "gammaincc": 1e-10, "betainc": 1e-10, "gammainc": 1e-10}


@pytest.mark.parametrize("name", spelled("mpmath"))
def test_mpmath_spelling_matches_numpy(name):
    orders, columns = sample(name, 5, points=4)
    F = _one_node_function(name, orders)
    f = F.compile("mpmath", dps=30)
    inputs = inputs_of(orders, columns)
    got = [f(*(column[point] for column in inputs)) for point in range(4)]
    got = np.array([float(value) if not isinstance(value, bool) else value for value in got])
    operands = [o if o is not None else c for o, c in zip(orders, columns)]
    with np.errstate(all="ignore"):
        want = np.asarray(PRIMITIVES[name].numpy_impl(*operands))
    assert_agrees(name, "mpmath", got, want, columns, rtol=LOOSER.get(name, 1e-12))


@pytest.mark.parametrize("name", spelled("interval"))
def test_interval_spelling_encloses_numpy(name):
    from symad.compile.precise.interval_backend import NO_ENCLOSURE

    orders, columns = sample(name, 6, points=4)
    F = _one_node_function(name, orders)
    f = F.compile("interval", dps=30)
    inputs = inputs_of(orders, columns)
    operands = [o if o is not None else c for o, c in zip(orders, columns)]
    with np.errstate(all="ignore"):
        want = np.asarray(PRIMITIVES[name].numpy_impl(*operands))
    for point in range(4):
        arguments = [column[point] for column in inputs]
        if name in NO_ENCLOSURE:
            with pytest.raises(symad.CompileError, match=f"no enclosure for {name}"):
                f(*arguments)
            continue
        value = f(*arguments)
        if isinstance(value, bool) or value is None:
            assert value is None or value == bool(want[point]), (name, arguments, value)
            continue
        a, b = (mpmath.mp.make_mpf(end) for end in value._mpi_)
        slack = 1e-12 * abs(float(want[point])) + 1e-300
        assert float(a) - slack <= want[point] <= float(b) + slack, (
            f"{name}{tuple(arguments)}: its enclosure [{a}, {b}] misses NumPy's {want[point]}")


# ---------------------------------------------------------------------------
# LaTeX: every stanza's LaTeX spelling, parsed back
# ---------------------------------------------------------------------------

#: What the function names the stanzas print mean (an independent statement: a stanza
#: printing \operatorname{log1p} for expm1 would fail here).
HEADS = {
    r"\operatorname{expm1}": np.expm1, r"\operatorname{log1p}": np.log1p,
    r"\sigma": scipy.special.expit, r"\operatorname{softplus}": lambda x: np.logaddexp(0.0, x),
    r"\operatorname{sg}": lambda x: x,
}
LATEX_SPELLED = [name for name in ELEMENTWISE
                 if PRIMITIVES[name].latex is not None or PRIMITIVES[name].printed is not None]


def test_the_latex_spellings_are_the_ones_checked():
    assert {"cbrt", "expm1", "log", "log1p", "sech", "sigmoid", "softplus", "stop_gradient"} \
        <= set(LATEX_SPELLED)
    for name in LATEX_SPELLED:
        latex = PRIMITIVES[name].latex
        assert latex is None or callable(latex) or latex in HEADS, (name, latex)


@pytest.mark.parametrize("name", LATEX_SPELLED)
def test_latex_spelling_parses_back_to_the_same_numbers(name):
    pytest.importorskip("antlr4", reason="SymPy's parse_latex needs antlr4-python3-runtime 4.11 (the test extra)")
    from sympy.parsing.latex import parse_latex

    orders, columns = sample(name, 7)
    if name == "cbrt":  # SymPy reads \sqrt[3]{x} as x**(1/3), nan for x < 0 in NumPy
        columns = [np.abs(column) for column in columns]
    F = _one_node_function(name, orders)
    (line,) = [line for line in F.latex(mul_symbol="dot").splitlines() if " &= " in line]
    rhs = line.split(" &= ", 1)[1]
    # parse_latex reads F\left(x\right) as a call of F, not \operatorname{name}{...}
    functions = {}
    for k, (head, meaning) in enumerate(HEADS.items()):
        if head + r"{\left(" in rhs:
            letter = "FGHKM"[k]
            rhs = rhs.replace(head + r"{\left(", letter + r"\left(").replace(r" \right)}", r"\right)")
            functions[letter] = meaning
    expression = parse_latex(rhs)
    inputs = {parse_latex(symbol_latex(s.name)): column
              for s, column in zip(F.graph.inputs, inputs_of(orders, columns))}
    symbols = sorted(expression.free_symbols, key=lambda s: s.name)
    evaluate = sympy.lambdify(symbols, expression, modules=[functions, "numpy", "scipy"])
    with np.errstate(all="ignore"):
        got = np.broadcast_to(evaluate(*(inputs[s] for s in symbols)), (POINTS,))
    assert_agrees(name, "LaTeX", got, reference(name, orders, columns), columns, rtol=1e-9)
