"""The precision backends: ``F.compile("mpmath", dps=...)`` and ``F.compile("interval", dps=...)``.

Every primitive is evaluated alone against SymPy's ``evalf`` of its own SymPy form
at 60 digits (mpmath backend: agreement to 35 digits at dps=40; interval backend:
containment at dps=30 with a width below 1e-25 relative). Whole derivative graphs
are checked against ``mpmath.diff`` at twice the working precision, and the
intervals of derivatives at random points against the exact values.
"""

import math
import pickle
import threading

import mpmath
import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp
import symad.special as ssp
from symad.atom_arrays import scalar_array
from symad.compile.precise.interval_backend import INTERVAL_TABLE, NO_ENCLOSURE
from symad.compile.precise.mpmath_backend import MPMATH_TABLE
from symad.function import finish_function
from symad.graph import GraphBuilder
from symad.primitives import PRIMITIVES
from symad.pytree import tree_flatten

make_mpf = mpmath.mp.make_mpf


def g(x):
    return np.exp(np.sin(x)) / (1 + x**2)


def mpmath_g(t):
    return mpmath.exp(mpmath.sin(t)) / (1 + t**2)


def endpoints(interval):
    """The exact endpoints of an mpmath interval (no rounding to iv's current precision)."""
    a, b = interval._mpi_
    return make_mpf(a), make_mpf(b)


def assert_encloses(interval, exact, max_relative_width, where=""):
    a, b = endpoints(interval)
    with mpmath.workdps(80):
        exact = mpmath.mpf(exact)
        assert a <= exact <= b, f"{where}: {exact} not in [{a}, {b}]"
        if exact != 0:
            assert (b - a) / abs(exact) < max_relative_width, f"{where}: width {(b - a) / abs(exact)}"
        else:
            assert b - a < max_relative_width, where


# ---------------------------------------------------------------------------
# Every primitive, alone
# ---------------------------------------------------------------------------

#: primitive name -> argument tuples to evaluate it at (inside its domain, and some at its edges).
SAMPLES = {
    "add": [(0.3, 0.7, -1.1)], "subtract": [(0.3, 0.7)], "multiply": [(0.3, -0.7)],
    "divide": [(0.3, 0.7)], "negative": [(0.3,)], "power": [(1.3, 0.7), (-1.5, 3), (0.5, -2)],
    "sqrt": [(0.3,)], "cbrt": [(-0.3,)], "exp": [(0.3,)], "exp2": [(0.3,)], "expm1": [(1e-5,)],
    "log": [(0.3,)], "log2": [(0.3,)], "log10": [(0.3,)], "log1p": [(1e-5,)],
    "sin": [(0.3,)], "cos": [(0.3,)], "tan": [(0.3,)], "arcsin": [(0.3,)], "arccos": [(0.3,)],
    "arctan": [(0.3,)], "arctan2": [(0.3, -0.7)], "sinh": [(0.3,)], "cosh": [(-0.3,)],
    "tanh": [(0.3,)], "sech": [(-0.3,)], "arcsinh": [(0.3,)], "arccosh": [(1.3,)],
    "arctanh": [(0.3,)], "one_minus_square": [(0.999,)],
    "abs": [(-0.3,)], "sign": [(-0.3,)], "maximum": [(0.3, 0.7)], "minimum": [(0.3, 0.7)],
    "reduce_max": [(0.3, 0.7, -0.1)], "reduce_min": [(0.3, 0.7, -0.1)], "hypot": [(0.3, 0.7)],
    "hypot_ratio": [(0.3, 0.7)], "logaddexp": [(0.3, 0.7)], "logaddexp2": [(0.3, 0.7)],
    "logsumexp": [(0.3, 0.7, -0.1)], "mod": [(0.7, 0.3), (-0.7, 0.3)], "fmod": [(-0.7, 0.3)],
    "floor": [(1.3,)], "ceiling": [(1.3,)], "frac": [(1.3,)], "heaviside": [(0.3, 0.5), (0.0, 0.5)],
    "where": [(1.0, 0.3, 0.7), (0.0, 0.3, 0.7)],
    "less": [(0.3, 0.7)], "less_equal": [(0.7, 0.7)], "greater": [(0.3, 0.7)],
    "greater_equal": [(0.3, 0.7)], "equal": [(0.3, 0.3)], "not_equal": [(0.3, 0.3)],
    "logical_and": [(1.0, 0.0)], "logical_or": [(1.0, 0.0)], "logical_not": [(1.0,)],
    "stop_gradient": [(0.3,)],
    "erf": [(0.3,)], "erfc": [(3.0,)], "erfinv": [(0.3,), (0.999999,)], "erfcinv": [(1e-20,), (1.5,)],
    "sigmoid": [(0.3,)], "softplus": [(-30.0,)], "ndtr": [(-3.0,)], "log_ndtr": [(-10.0,), (8.0,)],
    "ndtri": [(1e-10,), (0.7,)], "logit": [(0.3,), (0.5000001,)], "mills_excess": [(2, 5.0)],
    "xlogy": [(0.3, 0.7)], "xlog1py": [(0.3, 0.7)],
    "gamma": [(0.3,), (-1.5,)], "gammaln": [(0.3,), (-1.5,)], "digamma": [(0.3,)],
    "polygamma": [(2, 0.3)], "polygamma_difference": [(1, 1e5, 1e-3)], "beta": [(0.3, 0.7)],
    "betaln": [(0.3, 0.7)], "poch": [(0.3, 0.7)], "gammainc": [(1.5, 0.7)], "gammaincc": [(1.5, 0.7)],
    "betainc": [(1.5, 2.5, 0.3)],
    "jv": [(1, 0.7), (2.5, 0.7)], "yv": [(1, 0.7)], "iv": [(1, 0.7), (2, -0.7)], "kv": [(1, 0.7)],
    "spherical_jn": [(2, 0.7)],
    "sinpi": [(0.3,)], "cospi": [(0.3,)], "sinc": [(0.3,)],
    "zeta": [(2.5, 1), (2.5, 0.7)], "zeta_derivative": [(1, 2.5, 1)],
    "lambertw": [(0.3,), (-0.36787944117,)], "lambertw1p": [(0.3,), (-0.36787944117,)],
    "ellipk": [(0.3,)], "ellipe": [(0.3,)],
    "elliptic_k_derivative": [(2, 0.05)], "elliptic_e_derivative": [(2, 0.05)],
}


def single_primitive_function(name: str, args: tuple):
    """The Function applying the primitive ``name`` to ``args``: one node, and the arguments it takes.

    Integer arguments (orders of Bessel functions, of polygamma, of derivatives) are
    constants of the graph, as tracing makes them; floats are its inputs.
    """
    symbols = [sympy.Symbol(f"a{i}") for i, a in enumerate(args) if not isinstance(a, int)]
    symbol_of = iter(symbols)
    operands = [sympy.Integer(a) if isinstance(a, int) else next(symbol_of) for a in args]
    builder = GraphBuilder(name)
    for symbol in symbols:
        builder.add_input(symbol)
    with builder.active():
        out = builder.record(PRIMITIVES[name], operands)
    treedef = tree_flatten(tuple(range(len(symbols))))[1]
    in_symbols, result = [scalar_array(symbol) for symbol in symbols], scalar_array(out)
    inputs = tuple(a for a in args if not isinstance(a, int))
    return finish_function(builder, name, treedef, in_symbols, result), inputs


def sympy_reference(name: str, args: tuple):
    """SymPy's value of the primitive's own SymPy form at 60 digits (integral ints stay exact)."""
    exact = [sympy.Integer(a) if isinstance(a, int) else sympy.Float(a, 70) for a in args]
    primitive = PRIMITIVES[name]
    if name in ("where", "logical_and", "logical_or", "logical_not"):
        return None  # truth values: compared with the float64 backend below
    if name == "erfcinv":  # SymPy leaves erfcinv(1e-20) unevaluated; erfinv(1 - y) at 200 digits
        with mpmath.workdps(200):
            return mpmath.erfinv(1 - mpmath.mpf(args[0]))
    if name == "gammaln":  # SciPy's gammaln is log|gamma| (SymPy's loggamma is complex for x < 0)
        return sympy.log(abs(sympy.gamma(exact[0]))).evalf(60)
    value = primitive.to_sympy(exact, {})
    if isinstance(value, sympy.logic.boolalg.BooleanAtom):
        return bool(value)
    return value.evalf(60)


def test_the_sample_table_covers_every_primitive():
    # Every elementwise primitive has a scalar entry in both tables (the array primitives are
    # the same steps for both backends: test_array_programs_in_both_precision_backends).
    builtin = {name for name, primitive in PRIMITIVES.items()
               if not name.startswith("sympy.") and primitive.elementwise}
    assert builtin == set(SAMPLES)
    assert set(MPMATH_TABLE) == builtin
    assert set(INTERVAL_TABLE) == builtin


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_primitive_in_mpmath_matches_sympy_to_35_digits(name):
    for args in SAMPLES[name]:
        F, inputs = single_primitive_function(name, args)
        value = F.compile("mpmath", dps=40)(*inputs)
        float64 = F.compile("numpy")(*inputs)
        reference = sympy_reference(name, args)
        if isinstance(value, bool) or reference is None:
            assert bool(value) == bool(float64), (name, args)
            if reference is not None:
                assert value == reference, (name, args)
            continue
        assert isinstance(value, mpmath.mpf), (name, args, type(value))
        with mpmath.workdps(60):
            exact = mpmath.mpf(reference)
            error = abs(value - exact) / abs(exact) if exact else abs(value)
        assert error < 1e-35, (name, args, value, reference)
        assert math.isclose(float(value), float(float64), rel_tol=1e-12, abs_tol=1e-300), (name, args)


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - set(NO_ENCLOSURE)))
def test_each_primitive_in_intervals_contains_sympys_value(name):
    for args in SAMPLES[name]:
        F, inputs = single_primitive_function(name, args)
        value = F.compile("interval", dps=30)(*inputs)
        reference = sympy_reference(name, args)
        if reference is None or isinstance(reference, bool):
            expected = F.compile("mpmath", dps=30)(*inputs)
            assert value is expected or value == expected, (name, args, value)
            continue
        assert_encloses(value, reference, 1e-25, f"{name}{args}")


@pytest.mark.parametrize("name", NO_ENCLOSURE)
def test_primitives_without_an_enclosure_raise_naming_themselves(name):
    F, inputs = single_primitive_function(name, SAMPLES[name][0])
    with pytest.raises(sd.CompileError, match=f"no enclosure for {name}"):
        F.compile("interval", dps=30)(*inputs)


# ---------------------------------------------------------------------------
# Whole graphs: derivatives at high precision
# ---------------------------------------------------------------------------


def test_the_30th_derivative_at_60_digits_matches_mpmath_diff_at_120():
    value = sd.derivative(g, 30).trace(0.7).compile("mpmath", dps=60)(0.7)
    with mpmath.workdps(120):
        exact = mpmath.diff(mpmath_g, mpmath.mpf(0.7), 30)
        assert abs(value - exact) / abs(exact) < 1e-50


@pytest.mark.parametrize("n", [1, 4, 12, 20])
def test_derivatives_at_40_digits_match_mpmath_diff_at_80(n):
    functions = [
        (lambda x: np.log1p(x**2) * np.tanh(x) + ssp.erf(x / 2),
         lambda t: mpmath.log1p(t**2) * mpmath.tanh(t) + mpmath.erf(t / 2)),
        (lambda x: ssp.gamma(1 + x) * np.arctan(x) + np.sqrt(2 + np.cos(x)),
         lambda t: mpmath.gamma(1 + t) * mpmath.atan(t) + mpmath.sqrt(2 + mpmath.cos(t))),
        (lambda x: x**2.5 / (1 + np.exp(-x)) + np.hypot(x, 2.0),
         lambda t: t**mpmath.mpf(2.5) / (1 + mpmath.exp(-t)) + mpmath.hypot(t, 2)),
    ]
    point = mpmath.mpf(0.7)  # the double 0.7, exactly
    for function, reference in functions:
        value = sd.derivative(function, n).trace(0.7).compile("mpmath", dps=40)(point)
        with mpmath.workdps(80):
            exact = mpmath.diff(reference, point, n)
            assert abs(value - exact) / abs(exact) < 1e-33, (n, value, exact)


def test_interval_derivatives_contain_the_exact_value_at_random_points():
    rng = np.random.default_rng(22)
    cases = [
        (g, mpmath_g, 30),
        (lambda x: np.log1p(x**2) * np.tanh(x) + ssp.erf(x / 2),
         lambda t: mpmath.log1p(t**2) * mpmath.tanh(t) + mpmath.erf(t / 2), 12),
        (lambda x: ssp.gamma(1 + x) * np.arctan(x) / np.sqrt(2 + np.cos(x)),
         lambda t: mpmath.gamma(1 + t) * mpmath.atan(t) / mpmath.sqrt(2 + mpmath.cos(t)), 10),
        (lambda x: np.where(x > 0.5, np.exp(-x) * np.sin(3 * x), x**3),
         lambda t: mpmath.exp(-t) * mpmath.sin(3 * t) if t > 0.5 else t**3, 8),
    ]
    for function, reference, top in cases:
        for n in (0, 1, top // 2, top):
            compiled = sd.derivative(function, n).trace(0.7).compile("interval", dps=30)
            for point in rng.uniform(0.55, 1.5, size=3):
                with mpmath.workdps(60):
                    exact = mpmath.diff(reference, mpmath.mpf(point), n)
                assert_encloses(compiled(point), exact, 1e-20, f"order {n} at {point}")


def test_an_interval_box_encloses_every_point_in_it():
    compiled = sd.derivative(g, 3).trace(0.7).compile("interval", dps=30)
    box = mpmath.iv.mpf(["0.69", "0.71"])
    enclosure = compiled(box)
    for t in np.linspace(0.69, 0.71, 7):
        with mpmath.workdps(40):
            assert_encloses(enclosure, mpmath.diff(mpmath_g, mpmath.mpf(t), 3), 10.0, f"at {t}")


# ---------------------------------------------------------------------------
# Semantics: constants, structure, batches, branches, errors
# ---------------------------------------------------------------------------


def test_constants_are_exact_and_floats_keep_their_binary_value():
    third = sd.from_sympy(sympy.Symbol("x") / 3 + sympy.pi, [sympy.Symbol("x")])
    with mpmath.workdps(50):
        value = third.compile("mpmath", dps=50)(1)
        assert abs(value - (mpmath.mpf(1) / 3 + mpmath.pi)) < mpmath.mpf(10) ** -49
        tenth = sd.trace(lambda x: x * 0.1, 1.0).compile("mpmath", dps=50)(1)
        assert tenth == mpmath.mpf(0.1)  # the double 0.1, exactly
        decimal = sd.trace(lambda x: x * 2, 1.0).compile("mpmath", dps=50)(mpmath.mpf("0.1"))
        assert abs(decimal - mpmath.mpf("0.2")) < mpmath.mpf(10) ** -49
    # A decimal string is the decimal at the working precision (an mpf made outside a workdps
    # would be rounded to mpmath's 53 bits first).
    from_string = sd.trace(lambda x: x * 3, 1.0).compile("mpmath", dps=50)(np.array(["0.1", "1e-60"]))
    with mpmath.workdps(60):
        assert abs(from_string[0] - mpmath.mpf("0.3")) < mpmath.mpf(10) ** -49
        assert abs(from_string[1] / mpmath.mpf("3e-60") - 1) < mpmath.mpf(10) ** -49
        assert_encloses(sd.trace(lambda x: x * 3, 1.0).compile("interval", dps=30)("0.1"),
                        mpmath.mpf("0.3"), 1e-28)
    with mpmath.workdps(60):
        exact = mpmath.mpf(1) / 3 + mpmath.pi
    assert_encloses(third.compile("interval", dps=30)(1), exact, 1e-28)


def test_structure_batches_and_parameters():
    weight = sd.Parameter(np.array([2.0, 3.0]), name="w")

    def f(x, pair):
        return {"sum": x * weight + pair[0], "product": x * pair[1]}, x > 0.5

    F = sd.trace(f, np.zeros(2), (0.0, 0.0))
    compiled = F.compile("mpmath", dps=30)
    out, flag = compiled(np.array([0.25, 1.0]), (1.0, 2.0))
    assert out["sum"].dtype == object and out["sum"].shape == (2,)
    assert list(out["sum"]) == [mpmath.mpf(1.5), mpmath.mpf(4)]
    assert list(out["product"]) == [mpmath.mpf(0.5), mpmath.mpf(2)]
    assert list(flag) == [False, True]
    batch, _ = compiled(np.array([[0.25, 1.0], [0.5, 0.5]]), (1.0, 2.0))
    assert batch["sum"].shape == (2, 2) and batch["sum"][1, 0] == mpmath.mpf(2)
    scalar = sd.trace(lambda x: x * x, 0.0).compile("mpmath", dps=30)(3)
    assert isinstance(scalar, mpmath.mpf) and scalar == 9
    intervals = sd.trace(lambda x: x * x, 0.0).compile("interval", dps=30)(np.array([1.0, 2.0]))
    assert intervals.dtype == object and intervals[1] == mpmath.iv.mpf(4)


def test_numpy_semantics_of_undefined_values():
    compiled = sd.trace(lambda x, y: (np.log(x), x / y, np.sqrt(x), np.arcsin(x)), 0.0, 0.0).compile("mpmath", dps=30)
    log, quotient, root, arcsin = compiled(-2.0, 0.0)
    assert mpmath.isnan(log) and quotient == -mpmath.inf and mpmath.isnan(root) and mpmath.isnan(arcsin)
    log, quotient, _, _ = compiled(0.0, 0.0)
    assert log == -mpmath.inf and mpmath.isnan(quotient)
    interval = sd.trace(np.log, 0.0).compile("interval", dps=30)(-1.0)
    assert endpoints(interval) == (-mpmath.inf, mpmath.inf)  # undefined: the whole line


def test_a_where_drops_the_branch_it_does_not_take_in_intervals():
    # log_ndtr's derivatives hold mills_excess (no enclosure) in the branch for x < -4.
    compiled = sd.derivative(ssp.log_ndtr, 3).trace(0.5).compile("interval", dps=30)
    with mpmath.workdps(60):
        exact = mpmath.diff(lambda t: mpmath.log(mpmath.ncdf(t)), mpmath.mpf(0.5), 3)
    assert_encloses(compiled(0.5), exact, 1e-25)
    with pytest.raises(sd.CompileError, match="no enclosure for mills_excess"):
        compiled(-6.0)
    undecided = sd.trace(lambda x: np.where(x > 0, x, -x), 0.0).compile("interval", dps=30)
    assert endpoints(undecided(mpmath.iv.mpf([-1, 2]))) == (-2, 2)  # both branches, joined
    # A condition computed from a primitive with no enclosure decides nothing: it raises.
    on_yv = sd.trace(lambda x: np.where(ssp.yv(1, x) > 0, x, -x), 1.0).compile("interval", dps=30)
    with pytest.raises(sd.CompileError, match="no enclosure for yv"):
        on_yv(3.0)


def test_precision_backend_errors():
    @sd.primitive
    def opaque(x):
        return x

    @opaque.defpartials
    def _(x):
        return (1.0,)

    custom = sd.trace(lambda x: opaque(x) + 1, 0.0)
    with pytest.raises(sd.CompileError, match="mpmath backend has no implementation of the primitive 'opaque'"):
        custom.compile("mpmath", dps=30)
    with pytest.raises(sd.CompileError, match="interval backend has no enclosure of the primitive 'opaque'"):
        custom.compile("interval", dps=30)
    F = sd.trace(np.sin, 0.0)
    with pytest.raises(sd.CompileError, match="dps must be a positive integer"):
        F.compile("mpmath", dps=0)
    with pytest.raises(sd.CompileError, match="dps=30 is the precision of the 'mpmath' and 'interval'"):
        F.compile("numpy", dps=30)
    with pytest.raises(sd.CompileError, match="num_threads and block_size"):
        F.compile("mpmath", dps=30, num_threads=2)
    with pytest.raises(sd.CompileError, match="generates no module or source"):
        F.source("mpmath")
    with pytest.raises(sd.CompileError, match="the string 'half', which is not a number"):
        F.compile("mpmath", dps=30)("half")
    with pytest.raises(sd.CompileError, match="takes real numbers"):
        F.compile("mpmath", dps=30)(object())
    with pytest.raises(sd.CompileError, match="takes real numbers"):
        F.compile("interval", dps=30)(1j)
    with pytest.raises(sd.CompileError, match="structured otherwise than at the trace"):
        F.compile("mpmath", dps=30)(1.0, 2.0)


def test_precision_is_restored_and_threads_do_not_mix_precisions():
    before = (mpmath.mp.prec, mpmath.iv.prec)
    low = sd.trace(lambda x: x / 3, 0.0).compile("mpmath", dps=20)
    high = sd.trace(lambda x: x / 3, 0.0).compile("mpmath", dps=80)
    results = {}

    def run(name, compiled):
        results[name] = [compiled(1) for _ in range(50)]

    threads = [threading.Thread(target=run, args=(n, c)) for n, c in (("low", low), ("high", high))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (mpmath.mp.prec, mpmath.iv.prec) == before
    with mpmath.workdps(100):
        third = mpmath.mpf(1) / 3
        assert all(abs(v - third) > mpmath.mpf(10) ** -25 for v in results["low"])
        assert all(abs(v - third) < mpmath.mpf(10) ** -79 for v in results["high"])


def test_compiled_precise_functions_pickle():
    compiled = sd.derivative(g, 5).trace(0.7).compile("mpmath", dps=40)
    again = pickle.loads(pickle.dumps(compiled))
    assert again.dps == 40 and again(0.7) == compiled(0.7)
    assert "mpmath, dps=40" in repr(again)


def test_sympy_functions_from_from_sympy_evaluate_through_sympys_evalf():
    x = sympy.Symbol("x")
    F = sd.from_sympy(sympy.Si(x) * sympy.exp(x), [x])
    value = F.compile("mpmath", dps=40)(0.7)
    with mpmath.workdps(60):
        exact = mpmath.si(mpmath.mpf(0.7)) * mpmath.exp(mpmath.mpf(0.7))
        assert abs(value - exact) / exact < 1e-38
    with pytest.raises(sd.CompileError, match="no enclosure of the primitive 'sympy.Si'"):
        F.compile("interval", dps=30)


def test_array_programs_in_both_precision_backends():
    # Whole arrays: contractions, reductions (sum, max, logsumexp), slices, scatter-adds and
    # broadcasting, and the gradient through all of them; against float64 and against
    # 60-digit values of the same graph.
    def f(x, w):
        return (np.sum(np.tanh(x @ w) * np.exp(-x[0])) + np.max(w) + snp.logsumexp(x)
                + np.sum(np.cumsum(x)[::2] ** 2) + x[1:] @ x[:-1])

    x = np.array([0.3, -0.2, 0.7])
    w = np.array([[0.1, 0.4], [0.5, -0.3], [0.2, 0.9]])
    G = sd.grad(f, argnums=(0, 1)).trace(x, w)
    assert G.is_array_program
    reference = G(x, w)
    digits30 = G.compile("mpmath", dps=30)(x, w)
    digits60 = G.compile("mpmath", dps=60)(x, w)
    intervals = G.compile("interval", dps=30)(x, w)
    for low, high, box, float64 in zip(digits30, digits60, intervals, reference):
        assert low.dtype == object and low.shape == float64.shape
        np.testing.assert_allclose(np.array(low, dtype=float), float64, rtol=1e-13, atol=1e-15)
        for a, b, enclosure in zip(low.reshape(-1), high.reshape(-1), box.reshape(-1)):
            assert isinstance(a, mpmath.mpf) and abs(a - b) < mpmath.mpf(10) ** -28
            assert b in enclosure and enclosure.delta < mpmath.mpf(10) ** -25


@pytest.mark.parametrize("error", [ZeroDivisionError, ValueError, mpmath.libmp.NoConvergence])
def test_an_mpmath_function_that_raises_gives_nan(error):
    # mpmath 1.3 has no mpmath.NoConvergence: the handler named it, so any error inside a
    # wrapped function became AttributeError when the except clause was evaluated.
    from symad.compile.precise import mpmath_backend

    def failing(x):
        raise error("undefined here")

    assert mpmath.isnan(mpmath_backend._total(failing)(mpmath.mpf(1)))


FLOAT_ONLY_ARRAY_OPERATIONS = {
    "det": lambda a: np.linalg.det(a),
    "fft": lambda a: np.sum(np.real(np.fft.fft(a[0]))),
    "loop": lambda a: sd.fori_loop(0, 2, lambda i, y: y * a[0, 0], 1.0),
    "expm": lambda a: snp.linalg.expm(a)[0, 0],
}


@pytest.mark.parametrize("backend", ["mpmath", "interval"])
@pytest.mark.parametrize("name", list(FLOAT_ONLY_ARRAY_OPERATIONS))
def test_array_operations_computed_in_floats_are_refused_by_the_precise_backends(name, backend):
    # Before: det and fft raised NumPy's TypeError; a loop and expm returned their float64
    # value as if it were precise (a point where the interval backend promises an enclosure).
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    F = sd.trace(FLOAT_ONLY_ARRAY_OPERATIONS[name], a)
    with pytest.raises(sd.CompileError, match=rf"the {backend} backend: the array operation '\w+' is "
                                              r"computed in floating point.*F\.compile\('numpy'\)"):
        F.compile(backend)(a)


def test_sorting_and_elements_of_arrays_evaluate_precisely():
    # Sorting compares the backend's numbers; an element taken from an array is a number (a
    # 0-d object array reached mpmath's functions, which refused it).
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    f = lambda a: np.sort(a[0])[0] * np.median(a) + np.sum(a ** 2)  # noqa: E731
    G = sd.grad(f).trace(a)
    exact = G(a)
    precise = G.compile("mpmath", dps=30)(a)
    assert all(isinstance(v, mpmath.mpf) for v in precise.ravel())
    np.testing.assert_array_equal(np.asarray(precise, dtype=float), exact)
    enclosure = sd.trace(f, a).compile("interval")(a)
    assert enclosure.a <= f(a) <= enclosure.b
