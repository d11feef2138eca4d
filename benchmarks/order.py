"""Benchmark 3: n-th derivatives built and evaluated, and large sparse Hessians.

Two test functions, each differentiated n times w.r.t. its scalar argument,
*built and evaluated* (a fresh Python function every repetition, so no cache
helps):

* ``g(x) = exp(sin x) / (1 + x**2)`` at x = 0.7;
* the logistic map iterated 14 times, ``l <- 4 l (1 - l)``, at l = 0.3.

Contenders, side by side in one run (peers only if importable; each peer is
stopped for larger n once one order has taken a third of the step limit):

* symad: ``sd.derivative(f, n)(x)`` — Taylor mode; the node count of the
  derivative graph gives the growth curve;
* ``sympy.diff(f, x, n)`` evaluated with ``evalf`` (SymPy's cache cleared);
* SymEngine ``diff`` n times, evaluated with ``subs``;
* CasADi: ``ca.gradient`` nested n times on ``SX``, wrapped in a
  ``ca.Function`` and called; its ``n_nodes``;
* JAX: ``jax.grad`` nested n times under ``jit`` (float64), and
  ``jax.experimental.jet`` (Taylor mode in JAX) with an n-term series.

``--series``: Taylor coefficients to order 1,000 (issue 32), beside ``mpmath.taylor``
and SymPy's ``series``, checked against 60-digit series arithmetic.

Every symad value is checked against mpmath at 60 digits (g) or against
the map's Taylor series in 100-digit arithmetic (the logistic map), both at
the exact binary value of the float point.

Beside the table, symad alone sweeps every order n = 1 … 64 (nodes, and the
median time to build and evaluate): the largest time for n <= 32 and the
ratio nodes(32) / nodes(16) are printed for both functions, and these node
counts are the symad curves of the plot.

Then the Hessian of the N-dimensional Rosenbrock function for N = 10 … 1000:
``sd.hessian(f, sparse=True)``, its build (trace and Hessian graph), compile
and evaluation times, and its number of structural non-zeros (3N - 2, both
as stored in the returned matrix and as ``F.sparsity()`` of the gradient
reports it), beside CasADi's ``ca.hessian`` on ``SX``.

Then several variables and other precisions (issue 22):

* mixed partials ``d^2k f / dx^k dy^k`` of ``f = exp(sin(x) y) / (1 + x**2 + y**2)`` at
  (0.3, 0.4), k = 1 … 10: ``sd.derivative(f, (k, k))`` built and evaluated, its nodes,
  beside ``sympy.diff(f, x, k, y, k)`` evaluated at 30 digits (whose value is the
  reference) and the nodes of ``sd.grad`` nested 2k times (k <= 4);
* Taylor maps of two 4-variable functions to total orders 4 … 10 (1,001 coefficients at
  10): ``sd.taylor(f, n, argnum=(0, 1, 2, 3))`` built and evaluated, beside SymPy
  differentiating each coefficient's derivative from its parent's and evaluating all at
  30 digits; the largest error of a symad coefficient against SymPy's; and the compiled
  map evaluated at 10,000 points;
* the 30th derivative of ``g`` by the ``"mpmath"`` backend at 60 digits against
  ``mpmath.diff`` at 120, and the relative widths of the ``"interval"`` backend's
  enclosures at 30 digits.

Run from the project root::

    python benchmarks/order.py            # about ten minutes
    python benchmarks/order.py --quick    # n in (4, 8, 12), N in (10, 100), small k and n
    python benchmarks/order.py --multivariate   # only the issue-22 part

A log-scale plot of nodes against n is written to docs/images/order_nodes.png when
matplotlib is installed. The exit status is 1 if a symad value is off by
more than 1e-12 relative (1e-11 for the logistic map, whose float64 value is
itself off by 5e-12), a Hessian misses its 3N - 2 non-zeros, a mixed partial is off by
more than 1e-9 or a Taylor coefficient by more than 1e-12 (relative to max(1, |exact|)).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

import mpmath
import numpy as np
import sympy

PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

import symad as sd  # noqa: E402
from benchmarks.harness import (  # noqa: E402
    NO_VALUE,
    Timing,
    format_ms,
    format_table,
    machine_line,
    time_repeatedly,
)

FULL_ORDERS = (1, 2, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64)
QUICK_ORDERS = (4, 8, 12)
FULL_SIZES = (10, 30, 100, 300, 1000)
SWEEP_ORDERS = range(1, 65)
QUICK_SWEEP_ORDERS = range(1, 17)
QUICK_SIZES = (10, 100)
LOGISTIC_STEPS = 14
STEP_LIMIT_S = 30.0
# Past these orders a peer's step cannot be interrupted in time (CasADi's C++
# and JAX's compiler do not return to Python) and grows ~10x per two orders.
PEER_MAX_ORDER = {"sympy": 12, "symengine": 16, "casadi": 12, "jax grad": 10, "jax jet": 64}
CASE_BUDGET_S = 4.0
RTOL = 1e-12
PLOT_PATH = PROJECT_ROOT / "docs" / "images" / "order_nodes.png"


# --------------------------------------------------------------------------
# The two test functions, in every library's spelling
# --------------------------------------------------------------------------


class TestFunction:
    def __init__(self, name, point, make_numpy, build_expression, exact, rtol=RTOL):
        self.name = name
        self.rtol = rtol  # the relative error a float64 evaluation can reach
        self.point = point
        self.make_numpy = make_numpy  # () -> a fresh Python function of NumPy code
        self.build_expression = build_expression  # (library module, symbol) -> expression
        self.exact = exact  # n -> the exact n-th derivative at the point, as a float


def _g_numpy():
    def g(x):
        return np.exp(np.sin(x)) / (1 + x**2)

    return g


def _g_expression(lib, x):
    return lib.exp(lib.sin(x)) / (1 + x**2)


def _g_exact(n):
    with mpmath.workdps(60):
        series = mpmath.taylor(lambda t: mpmath.exp(mpmath.sin(t)) / (1 + t**2), mpmath.mpf(0.7), n)
        return float(series[n] * mpmath.factorial(n))


def _logistic_numpy():
    def logistic(l):
        for _ in range(LOGISTIC_STEPS):
            l = 4 * l * (1 - l)
        return l

    return logistic


def _logistic_expression(lib, l):
    for _ in range(LOGISTIC_STEPS):
        l = 4 * l * (1 - l)
    return l


def _logistic_exact(n):
    """The n-th derivative at the float 0.3 (its exact binary value, not 3/10).

    The Taylor series of the map in 100-digit arithmetic: the exact rationals
    would have 2**14-fold denominators, and 14 steps of a map whose
    derivative reaches 7.5e3 lose only ~4 of the 100 digits.
    """
    with mpmath.workdps(100):
        coefficients = [mpmath.mpf(0.3), mpmath.mpf(1)] + [mpmath.mpf(0)] * (n - 1)
        for _ in range(LOGISTIC_STEPS):
            square = [mpmath.fsum(coefficients[j] * coefficients[k - j] for j in range(k + 1))
                      for k in range(n + 1)]
            coefficients = [4 * (c - s) for c, s in zip(coefficients, square)]
        return float(coefficients[n] * mpmath.factorial(n))


FUNCTIONS = [
    TestFunction("g", 0.7, _g_numpy, _g_expression, _g_exact),
    # 14 steps of a chaotic map amplify rounding: the float64 value of the map itself is
    # off by 5.2e-12, and JAX's jet by 2.5e-12 on its derivatives, as symad's are.
    TestFunction("logistic14", 0.3, _logistic_numpy, _logistic_expression, _logistic_exact,
                 rtol=1e-11),
]


# --------------------------------------------------------------------------
# The contenders
# --------------------------------------------------------------------------


def timed(run, repetitions: int) -> tuple[Timing, object]:
    """Median time of ``run()`` and its last result."""
    holder = {}

    def run_and_keep(_):
        holder["value"] = run()

    timing = time_repeatedly(lambda: None, run_and_keep, repetitions, warmup=False,
                             budget_s=CASE_BUDGET_S, step_limit_s=STEP_LIMIT_S)
    return timing, holder.get("value")


def symad_case(function: TestFunction, n: int, repetitions: int):
    timing, value = timed(lambda: float(sd.derivative(function.make_numpy(), n)(function.point)),
                          repetitions)
    nodes = sd.derivative(function.make_numpy(), n).trace(function.point).stats()["nodes"]
    return timing, value, nodes


def sympy_case(function: TestFunction, n: int, repetitions: int):
    x = sympy.Symbol("x")

    def run():
        sympy.core.cache.clear_cache()
        derivative = sympy.diff(function.build_expression(sympy, x), x, n)
        return float(derivative.evalf(20, subs={x: sympy.Float(function.point)}))

    timing, value = timed(run, repetitions)
    return timing, value, None


def symengine_case(function: TestFunction, n: int, repetitions: int):
    import symengine as se

    x = se.Symbol("x")

    def run():
        derivative = function.build_expression(se, x)
        for _ in range(n):
            derivative = se.diff(derivative, x)
        return float(derivative.subs({x: function.point}))

    timing, value = timed(run, repetitions)
    return timing, value, None


def casadi_case(function: TestFunction, n: int, repetitions: int):
    import casadi as ca

    def build():
        x = ca.SX.sym("x")
        derivative = function.build_expression(ca, x)
        for _ in range(n):
            derivative = ca.gradient(derivative, x)
        return ca.Function("d", [x], [derivative])

    timing, value = timed(lambda: float(build()(function.point)), repetitions)
    return timing, value, build().n_nodes()


def jax_grad_case(function: TestFunction, n: int, repetitions: int):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    def run():
        derivative = lambda t: function.build_expression(jnp, t)  # noqa: E731
        for _ in range(n):
            derivative = jax.grad(derivative)
        return float(jax.jit(derivative)(function.point))

    timing, value = timed(run, repetitions)
    return timing, value, None


def jax_jet_case(function: TestFunction, n: int, repetitions: int):
    import jax
    import jax.numpy as jnp
    from jax.experimental import jet

    jax.config.update("jax_enable_x64", True)

    def run():
        # jet's series are derivatives: x(t) = x0 + sum_k x_k t^k / k!, so (1, 0, ...) seeds d/dx.
        series = [jnp.float64(1.0)] + [jnp.float64(0.0)] * (n - 1)
        _, out = jet.jet(lambda t: function.build_expression(jnp, t), (jnp.float64(function.point),),
                         (series,))
        return float(out[n - 1])

    timing, value = timed(run, repetitions)
    return timing, value, None


PEERS = {"sympy": sympy_case, "symengine": symengine_case, "casadi": casadi_case,
         "jax grad": jax_grad_case, "jax jet": jax_jet_case}
PEER_MODULES = {"sympy": "sympy", "symengine": "symengine", "casadi": "casadi",
                "jax grad": "jax", "jax jet": "jax"}


def available_peers() -> list[str]:
    names = []
    for name, module in PEER_MODULES.items():
        try:
            __import__(module)
            names.append(name)
        except ImportError:
            print(f"(peer {name} not installed: pip install -e '.[bench]')")
    return names


# --------------------------------------------------------------------------
# Sparse Hessians
# --------------------------------------------------------------------------


def rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def hessian_rows(sizes, peers) -> tuple[list[list[str]], list[int]]:
    from symad.derivatives import sparse_hessian_function

    rows, failures = [], []
    for size in sizes:
        point = np.linspace(-1.2, 1.2, size)
        function = lambda x: rosenbrock(x)  # noqa: E731  (a fresh function: no cache helps)
        start = time.perf_counter()
        hessian = sparse_hessian_function(sd.trace(function, point), 0)  # what sd.hessian builds
        built = time.perf_counter()
        hessian.compile()
        compiled = time.perf_counter()
        values = hessian(point)
        evaluated = time.perf_counter()
        symad_s = evaluated - start
        # The user's call, end to end, and the pattern F.sparsity() reports for the gradient.
        call_start = time.perf_counter()
        matrix = sd.hessian(lambda x: rosenbrock(x), sparse=True)(point)
        call_s = time.perf_counter() - call_start
        structural = sd.grad(lambda x: rosenbrock(x)).trace(point).sparsity().nnz
        exact = 3 * size - 2
        if not (matrix.nnz == structural == len(values) == exact):
            failures.append(size)
        row = [str(size), f"{matrix.nnz:,}", f"{structural:,}", f"{hessian.stats()['nodes']:,}",
               f"{(built - start) * 1e3:,.0f}", f"{(compiled - built) * 1e3:,.0f}",
               f"{(evaluated - compiled) * 1e3:,.1f}", f"{symad_s * 1e3:,.0f}",
               f"{call_s * 1e3:,.0f}"]
        if "casadi" in peers:
            import casadi as ca

            start = time.perf_counter()
            x = ca.SX.sym("x", size)
            f = ca.sum1(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
            hessian, _ = ca.hessian(f, x)
            evaluated = ca.Function("h", [x], [hessian])(point)
            casadi_s = time.perf_counter() - start
            row += [f"{evaluated.nnz():,}", f"{casadi_s * 1e3:,.0f}", f"{symad_s / casadi_s:,.1f}x"]
        rows.append(row)
        print(f"  Hessian N={size} done", file=sys.stderr)
    return rows, failures


# --------------------------------------------------------------------------
# Several variables and other precisions (issue 22)
# --------------------------------------------------------------------------

MIXED_ORDERS = (1, 2, 3, 4, 6, 8, 10)
QUICK_MIXED_ORDERS = (1, 2, 4)
MIXED_POINT = (0.3, 0.4)
MIXED_RTOL = 1e-9
NESTED_GRAD_MAX_K = 4
TAYLOR_ORDERS = (4, 6, 8, 10)
QUICK_TAYLOR_ORDERS = (4, 6)
TAYLOR_POINT = (0.1, 0.2, 0.3, 0.4)
TAYLOR_ATOL = 1e-12  # relative to max(1, |exact|)
EVALUATION_POINTS = 10_000
SYMPY_MULTIVARIATE_LIMIT_S = 300.0  # SymPy's step limit here: its order-20 mixed partial takes ~100 s


def mixed_numpy():
    def f(x, y):
        return np.exp(np.sin(x) * y) / (1 + x**2 + y**2)

    return f


def mixed_expression(lib, x, y):
    return lib.exp(lib.sin(x) * y) / (1 + x**2 + y**2)


def nested_grad_nodes(k: int) -> int:
    """Nodes of d^2k f / dx^k dy^k by sd.grad nested 2k times (x k times, then y k times)."""
    derivative = mixed_numpy()
    for argnum in [0] * k + [1] * k:
        derivative = sd.grad(derivative, argnum)
    return derivative.trace(*MIXED_POINT).stats()["nodes"]


def mixed_partial_rows(orders, repetitions: int, sympy_limit_s: float):
    header = ["k", "total order", "symad nodes", "symad ms", "sympy ms", "nested grad nodes",
              "symad rel. error", "reference"]
    rows, failures, sympy_stopped, node_counts = [], [], False, {}
    x, y = sympy.symbols("x y")
    for k in orders:
        timing, value = timed(lambda k=k: float(sd.derivative(mixed_numpy(), (k, k))(*MIXED_POINT)),
                              repetitions)
        nodes = sd.derivative(mixed_numpy(), (k, k)).trace(*MIXED_POINT).stats()["nodes"]
        exact, reference = None, "mpmath.diff, 40 digits"
        sympy_cell = NO_VALUE
        if not sympy_stopped:
            holder = {}

            def run_sympy(_, k=k, holder=holder):
                sympy.core.cache.clear_cache()
                derivative = sympy.diff(mixed_expression(sympy, x, y), x, k, y, k)
                holder["value"] = derivative.evalf(30, subs={x: sympy.Float(MIXED_POINT[0]),
                                                              y: sympy.Float(MIXED_POINT[1])})

            sympy_timing = time_repeatedly(lambda: None, run_sympy, 1 if k >= 6 else repetitions,
                                           warmup=False, budget_s=CASE_BUDGET_S, step_limit_s=sympy_limit_s)
            sympy_cell = format_ms(sympy_timing, sympy_limit_s)
            if sympy_timing.median_s is None:
                sympy_stopped = True
            else:
                sympy_cell += f" ({sympy_timing.median_s / timing.median_s:,.1f}x)"
                exact, reference = float(holder["value"]), "SymPy, exact, 30 digits"
        if exact is None:
            with mpmath.workdps(40):
                exact = float(mpmath.diff(lambda s, t: mpmath.exp(mpmath.sin(s) * t) / (1 + s**2 + t**2),
                                          tuple(map(mpmath.mpf, MIXED_POINT)), (k, k)))
        error = abs(value - exact) / abs(exact)
        if not error <= MIXED_RTOL:
            failures.append(k)
        nested = f"{nested_grad_nodes(k):,}" if k <= NESTED_GRAD_MAX_K else NO_VALUE
        rows.append([str(k), str(2 * k), f"{nodes:,}", format_ms(timing, STEP_LIMIT_S), sympy_cell,
                     nested, f"{error:.1e}", reference])
        node_counts[k] = nodes
        print(f"  mixed partial k={k} done", file=sys.stderr)
    growth = [f"nodes({2 * k}) / nodes({k}) = {node_counts[2 * k] / node_counts[k]:.2f} "
              f"(degree {math.log2(node_counts[2 * k] / node_counts[k]):.1f})"
              for k in orders if 2 * k in node_counts]
    return format_table(header, rows) + "\ngrowth: " + "; ".join(growth), failures


def taylor_a_numpy():
    def f(x, y, z, w):
        return np.exp(x + y / 2) * np.cos(z - 2 * w) / (2 + x - y)

    return f


def taylor_a_expression(x, y, z, w):
    return sympy.exp(x + y / 2) * sympy.cos(z - 2 * w) / (2 + x - y)


def taylor_b_numpy():
    def f(x, y, z, w):
        return np.exp(x * y + z) * np.sin(w + x) / (1 + y**2 + z**2 + w**2)

    return f


def taylor_b_expression(x, y, z, w):
    return sympy.exp(x * y + z) * sympy.sin(w + x) / (1 + y**2 + z**2 + w**2)


TAYLOR_FUNCTIONS = [
    ("exp(x + y/2) cos(z - 2w) / (2 + x - y)", taylor_a_numpy, taylor_a_expression),
    ("exp(xy + z) sin(w + x) / (1 + y² + z² + w²)", taylor_b_numpy, taylor_b_expression),
]


def sympy_taylor_map(expression_of, order: int) -> dict:
    """Every coefficient of total order <= ``order``, as SymPy computes them: each derivative
    from its parent's (one more diff), all evaluated at 30 digits, over k!."""
    variables = sympy.symbols("x y z w")
    keys = sorted((k for k in itertools.product(range(order + 1), repeat=4) if sum(k) <= order),
                  key=lambda k: (sum(k), k))
    derivatives = {(0, 0, 0, 0): expression_of(*variables)}
    for k in keys:
        if k not in derivatives:
            axis = max(i for i in range(4) if k[i])
            parent = k[:axis] + (k[axis] - 1,) + k[axis + 1:]
            derivatives[k] = sympy.diff(derivatives[parent], variables[axis])
    subs = {v: sympy.Float(p) for v, p in zip(variables, TAYLOR_POINT)}
    return {k: float(derivatives[k].evalf(30, subs=subs)) / math.prod(map(math.factorial, k))
            for k in keys}


def taylor_map_rows(orders, repetitions: int, sympy_limit_s: float):
    header = ["function", "n", "coefficients", "symad nodes", "symad ms", "sympy ms",
              f"evaluate {EVALUATION_POINTS:,} points ms", "largest error"]
    rows, failures = [], []
    for label, make_numpy, expression_of in TAYLOR_FUNCTIONS:
        sympy_stopped = False
        for n in orders:
            def run_symad(n=n, make_numpy=make_numpy):
                return sd.taylor(make_numpy(), n, argnum=(0, 1, 2, 3))(*TAYLOR_POINT)

            timing, series = timed(run_symad, repetitions)
            traced = sd.taylor(make_numpy(), n, argnum=(0, 1, 2, 3)).trace(*TAYLOR_POINT)
            points = [np.random.default_rng(22).uniform(0.05, 0.15, EVALUATION_POINTS) + p
                      for p in np.array(TAYLOR_POINT) - 0.1]
            traced(*points)  # compiled once, outside the timing
            evaluation, _ = timed(lambda traced=traced, points=points: traced(*points), repetitions)
            sympy_cell, error_cell = NO_VALUE, NO_VALUE
            if not sympy_stopped:
                holder = {}

                def run_sympy(_, n=n, expression_of=expression_of, holder=holder):
                    sympy.core.cache.clear_cache()
                    holder["map"] = sympy_taylor_map(expression_of, n)

                sympy_timing = time_repeatedly(lambda: None, run_sympy, 1, warmup=False,
                                               budget_s=CASE_BUDGET_S, step_limit_s=sympy_limit_s)
                sympy_cell = format_ms(sympy_timing, sympy_limit_s)
                if sympy_timing.median_s is None:
                    sympy_stopped = True
                else:
                    sympy_cell += f" ({sympy_timing.median_s / timing.median_s:,.1f}x)"
                    worst = max(abs(float(series[k]) - exact) / max(1.0, abs(exact))
                                for k, exact in holder["map"].items())
                    error_cell = f"{worst:.1e}"
                    if not worst <= TAYLOR_ATOL:
                        failures.append((label, n))
            rows.append([label, str(n), f"{math.comb(n + 4, 4):,}", f"{traced.stats()['nodes']:,}",
                         format_ms(timing, STEP_LIMIT_S), sympy_cell,
                         format_ms(evaluation, STEP_LIMIT_S), error_cell])
            print(f"  Taylor map {label} n={n} done", file=sys.stderr)
    return format_table(header, rows), failures


def precision_lines(repetitions: int) -> list[str]:
    """The 30th derivative of g at 60 digits, and interval widths at 30 digits."""
    g = FUNCTIONS[0].make_numpy()
    lines = []
    derivative = sd.derivative(g, 30).trace(0.7)
    compiled = derivative.compile("mpmath", dps=60)
    timing, value = timed(lambda: compiled(0.7), repetitions)
    with mpmath.workdps(120):
        start = time.perf_counter()
        exact = mpmath.diff(lambda t: mpmath.exp(mpmath.sin(t)) / (1 + t**2), mpmath.mpf(0.7), 30)
        diff_s = time.perf_counter() - start
        error = abs(value - exact) / abs(exact)
    lines.append(f"d^30 g/dx^30 at 0.7, mpmath backend at dps=60 ({derivative.stats()['nodes']:,} nodes): "
                 f"{format_ms(timing)} ms; relative error against mpmath.diff at 120 digits "
                 f"{mpmath.nstr(error, 2)} (mpmath.diff itself: {diff_s * 1e3:,.0f} ms)")
    for n in (0, 10, 20, 30):
        interval = sd.derivative(g, n).trace(0.7).compile("interval", dps=30)
        timing, enclosure = timed(lambda interval=interval: interval(0.7), repetitions)
        a, b = (mpmath.mp.make_mpf(end) for end in enclosure._mpi_)
        with mpmath.workdps(80):
            exact = mpmath.diff(lambda t: mpmath.exp(mpmath.sin(t)) / (1 + t**2), mpmath.mpf(0.7), n)
            contained = a <= exact <= b
            width = (b - a) / abs(exact)
        lines.append(f"d^{n} g/dx^{n} at 0.7, interval backend at dps=30: {format_ms(timing)} ms, "
                     f"width {mpmath.nstr(width, 2)} relative, contains the exact value: {contained}")
    return lines


def multivariate_report(quick: bool, repetitions: int, sympy_limit_s: float) -> list:
    print("\nMixed partials d^2k f/dx^k dy^k of exp(sin(x) y)/(1 + x^2 + y^2) at (0.3, 0.4), "
          "built and evaluated (ms; peer ms (Nx): its time and ratio to symad's)")
    table, mixed_failures = mixed_partial_rows(QUICK_MIXED_ORDERS if quick else MIXED_ORDERS,
                                               repetitions, sympy_limit_s)
    print(table)
    print("\nTaylor maps of 4-variable functions at (0.1, 0.2, 0.3, 0.4) to total order n, built "
          "and evaluated (ms); SymPy: each coefficient's derivative from its parent's, evaluated at "
          f"30 digits, one run, stopped past {sympy_limit_s:.0f} s")
    table, taylor_failures = taylor_map_rows(QUICK_TAYLOR_ORDERS if quick else TAYLOR_ORDERS,
                                             repetitions, sympy_limit_s)
    print(table)
    print()
    for line in precision_lines(repetitions):
        print(line)
    return [("mixed", k) for k in mixed_failures] + [("taylor", case) for case in taylor_failures]


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------


def order_table(function: TestFunction, orders, peers, repetitions: int):
    header = ["n", "symad nodes", "symad ms", *(f"{peer} ms" for peer in peers)]
    if "casadi" in peers:
        header.append("casadi nodes")
    header.append("symad rel. error")
    rows, failures, stopped, nodes = [], [], set(), {"symad": [], "casadi": []}
    for n in orders:
        exact = function.exact(n)
        timing, value, symad_nodes = symad_case(function, n, repetitions)
        error = abs(value - exact) / abs(exact) if exact else abs(value)
        if not error <= function.rtol:
            failures.append(n)
        nodes["symad"].append((n, symad_nodes))
        row = [str(n), f"{symad_nodes:,}", format_ms(timing, STEP_LIMIT_S)]
        casadi_nodes = NO_VALUE
        for peer in peers:
            if peer in stopped or n > PEER_MAX_ORDER[peer]:
                row.append(NO_VALUE)
                continue
            peer_timing, peer_value, peer_nodes = PEERS[peer](function, n, repetitions)
            if peer_timing.median_s is None or peer_timing.median_s > STEP_LIMIT_S / 3:
                stopped.add(peer)  # the next order would only time out
            cell = format_ms(peer_timing, STEP_LIMIT_S)
            if peer_value is not None and not math.isclose(peer_value, exact, rel_tol=1e-8):
                cell += " (wrong)"
            if peer_timing.median_s and timing.median_s:
                cell += f" ({peer_timing.median_s / timing.median_s:,.1f}x)"
            row.append(cell)
            if peer == "casadi" and peer_nodes is not None:
                casadi_nodes = f"{peer_nodes:,}"
                nodes["casadi"].append((n, peer_nodes))
        if "casadi" in peers:
            row.append(casadi_nodes)
        row.append(f"{error:.1e}")
        rows.append(row)
        print(f"  {function.name} n={n} done", file=sys.stderr)
    return format_table(header, rows), failures, nodes


def symad_sweep(function: TestFunction, orders, repetitions: int):
    """Nodes and median build-and-evaluate time of symad's n-th derivative for every n in ``orders``."""
    points = []
    for n in orders:
        timing, value, nodes = symad_case(function, n, repetitions)
        exact = function.exact(n)
        error = abs(value - exact) / abs(exact) if exact else abs(value)
        points.append((n, nodes, timing.median_s, error))
    return points


def sweep_summary(function: TestFunction, points) -> str:
    nodes = {n: count for n, count, _, _ in points}
    up_to_32 = [(seconds, n) for n, _, seconds, _ in points if n <= 32]
    slowest, slowest_n = max(up_to_32)
    worst_error, worst_n = max((error, n) for n, _, _, error in points)
    lines = [f"{function.name}, symad alone, every n = {points[0][0]}…{points[-1][0]}: "
             f"slowest n <= 32 is n = {slowest_n} in {slowest * 1e3:,.1f} ms; "
             f"largest relative error {worst_error:.1e} (n = {worst_n})"]
    if 16 in nodes and 32 in nodes:
        lines.append(f"  nodes(16) = {nodes[16]:,}, nodes(32) = {nodes[32]:,}: "
                     f"ratio {nodes[32] / nodes[16]:.2f} (quadratic growth: 4)")
    if 64 in nodes:
        lines.append(f"  nodes(64) = {nodes[64]:,}: ratio to nodes(32) {nodes[64] / nodes[32]:.2f}")
    return "\n".join(lines)


def plot_nodes(curves: dict) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib not installed: no plot)"
    figure, axes = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label, points in curves.items():
        if points:
            orders, counts = zip(*points)
            axes.plot(orders, counts, marker="o", label=label)
    axes.set_yscale("log")
    axes.set_xlabel("order n")
    axes.set_ylabel("nodes of the n-th derivative graph")
    axes.set_title("Growth of the n-th derivative (log scale)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(PLOT_PATH)
    plt.close(figure)
    return f"plot written to {PLOT_PATH.relative_to(PROJECT_ROOT)}"


# --------------------------------------------------------------------------
# Series to order 1,000 (issue 32)
# --------------------------------------------------------------------------


def exact_series(order: int, point: float) -> list:
    """The Taylor coefficients of exp(sin x)/(1 + x**2) about ``point``, 60 digits, by series
    arithmetic (sin/cos pair, exp, quotient), exact at the binary value of the float point."""
    with mpmath.workdps(60):
        x0, n = mpmath.mpf(point), order + 1
        u = [x0, mpmath.mpf(1)] + [mpmath.mpf(0)] * (n - 2)
        s, c = [mpmath.sin(x0)] + [0] * (n - 1), [mpmath.cos(x0)] + [0] * (n - 1)
        for k in range(1, n):  # s' = c u', c' = -s u'
            s[k] = sum(j * u[j] * c[k - j] for j in range(1, k + 1)) / k
            c[k] = -sum(j * u[j] * s[k - j] for j in range(1, k + 1)) / k
        e = [mpmath.exp(s[0])] + [0] * (n - 1)
        for k in range(1, n):  # e' = e s'
            e[k] = sum(j * s[j] * e[k - j] for j in range(1, k + 1)) / k
        d = [1 + x0**2, 2 * x0, mpmath.mpf(1)] + [mpmath.mpf(0)] * max(0, n - 3)
        q = [0] * n
        for k in range(n):  # q = e / d
            q[k] = (e[k] - sum(d[j] * q[k - j] for j in range(1, min(k, 2) + 1))) / d[0]
        return q


def _largest_error(values, exact) -> float:
    return max(abs(float(v) - float(e)) / abs(float(e)) for v, e in zip(values, exact)
               if abs(float(e)) > 1e-280)


def _once(run) -> tuple[float, object]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def series_report(quick: bool) -> list:
    """Taylor coefficients to high order: symad against mpmath.taylor and SymPy's series."""
    from benchmarks.harness import format_table
    from symad.transforms import series as numeric

    point = 0.3
    orders = (8, 100, 170, 500) if quick else (8, 12, 20, 50, 100, 170, 500, 1000)
    exact = exact_series(max(orders), point)
    failures, rows = [], []
    x = sympy.Symbol("x")
    expression = sympy.exp(sympy.sin(x)) / (1 + x**2)
    peer_stopped = {"mpmath": False, "sympy": False}
    for n in orders:
        seconds, values = _once(lambda n=n: sd.taylor(_g_numpy(), n)(point))
        error = _largest_error(values, exact[:n + 1])
        if error > 1e-9:
            failures.append(("series", n))
        graph = NO_VALUE
        if n <= 170:  # the graph path of before, first call (a fresh function: nothing cached)
            saved = numeric.NUMERIC_FROM_ORDER
            numeric.NUMERIC_FROM_ORDER = 10**9
            try:
                graph_s, _ = _once(lambda n=n: sd.taylor(_g_numpy(), n)(point))
            finally:
                numeric.NUMERIC_FROM_ORDER = saved
            graph = f"{graph_s * 1e3:,.1f} ({graph_s / seconds:,.1f}x)"
        peers = []
        for name, run in (
            ("mpmath", lambda n=n: mpmath.taylor(
                lambda t: mpmath.exp(mpmath.sin(t)) / (1 + t**2), mpmath.mpf(point), n)),
            # SymPy's series refuses a Float point ("could not calculate 21 terms"): the
            # exact 3/10, whose terms it then evaluates to 30 digits
            ("sympy", lambda n=n: [term.evalf(30) for term in sympy.series(
                expression, x, sympy.Rational(3, 10), n + 1).removeO().as_ordered_terms()]),
        ):
            # SymPy's series grows ~3x per two orders (2.9 s at 8): run up to 12
            if peer_stopped[name] or (name == "sympy" and n > 12) or (name == "mpmath" and n > 170):
                peers.append(NO_VALUE)
                continue
            try:
                with mpmath.workdps(60):
                    peer_s, _ = _once(run)
            except Exception as error:  # noqa: BLE001 -- a peer that fails is reported as such
                peers.append(f"failed: {type(error).__name__}")
                peer_stopped[name] = True
                continue
            peer_stopped[name] = peer_s > 20.0
            peers.append(f"{peer_s * 1e3:,.1f} ({peer_s / seconds:,.1f}x)")
        rows.append([str(n), f"{seconds * 1e3:,.1f}", f"{error:.1e}", graph, *peers])
        print(f"  n = {n}: {' | '.join(rows[-1][1:])}", flush=True)
    print("Taylor coefficients of exp(sin x)/(1 + x^2) at 0.3, first call of a fresh function (ms); "
          "error: largest relative error against 60-digit series arithmetic over every "
          "coefficient above 1e-280; peers: ms (ratio to symad)")
    print(format_table(["n", "symad ms", "error", "graph path ms", "mpmath.taylor ms",
                        "sympy series ms"], rows))

    grid = np.linspace(-1.0, 1.0, 10_000)
    seconds, values = _once(lambda: sd.taylor(_g_numpy(), 200)(grid))
    spot = _largest_error([v[7_000] for v in values], exact_series(200, float(grid[7_000])))
    print(f"\norder 200 at 10,000 points: {seconds:.2f} s (largest error at point 7,000: {spot:.1e})")
    two = lambda x, y: np.exp(np.sin(x) * y) / (1 + x**2 + y**2)  # noqa: E731
    seconds, series = _once(lambda: sd.taylor(two, 100, argnum=(0, 1))(0.3, 0.4))
    print(f"two variables, exp(sin(x) y)/(1 + x^2 + y^2) to total order 100 ({len(series):,} "
          f"coefficients): {seconds:.2f} s")
    seconds, tanh_series = _once(lambda: sd.taylor(np.tanh, 1000)(0.5))
    print(f"tanh at 0.5 to order 1,000: {seconds:.2f} s; coefficient 1,000 = {tanh_series[1000]:.4e}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="orders 4, 8, 12 and N up to 100 only")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per case (median)")
    parser.add_argument("--multivariate", action="store_true",
                        help="only mixed partials, Taylor maps and the precision backends")
    parser.add_argument("--sympy-limit", type=float, default=SYMPY_MULTIVARIATE_LIMIT_S,
                        help="SymPy's step limit (s) for mixed partials and Taylor maps")
    parser.add_argument("--series", action="store_true",
                        help="only Taylor coefficients to order 1,000, beside mpmath and SymPy")
    arguments = parser.parse_args(argv)
    if arguments.series:
        print(f"series to order 1,000; {machine_line()}")
        failures = series_report(arguments.quick)
        print("correctness: " + ("every coefficient within 1e-9 of the exact value" if not failures
                                 else f"off by more than 1e-9 at {failures}"))
        return 1 if failures else 0
    if arguments.multivariate:
        print(f"mixed partials, Taylor maps and precision backends; {machine_line()}")
        failures = multivariate_report(arguments.quick, arguments.reps, arguments.sympy_limit)
        if failures:
            print(f"symad values off by more than their tolerance: {failures}")
            return 1
        print("correctness: every mixed partial within 1e-9, every Taylor coefficient within 1e-12 "
              "of SymPy's (or mpmath's) value")
        return 0
    orders = QUICK_ORDERS if arguments.quick else FULL_ORDERS
    sizes = QUICK_SIZES if arguments.quick else FULL_SIZES
    sweep_orders = QUICK_SWEEP_ORDERS if arguments.quick else SWEEP_ORDERS
    peers = available_peers()
    started = time.perf_counter()
    print(f"n-th derivatives, built and evaluated; {machine_line()}")
    print(f"median of up to {arguments.reps} repetitions (ms); step limit {STEP_LIMIT_S:.0f} s; "
          "peer ms (Nx) is the peer's time and its ratio to symad's; — not run (past a time limit)\n")
    failures = []
    curves = {}
    for function in FUNCTIONS:
        print(f"{function.name} at {function.point}")
        table, failed, nodes = order_table(function, orders, peers, arguments.reps)
        print(table)
        symad_points = nodes["symad"]
        if len(symad_points) >= 3:
            a, b, c = np.polyfit(*zip(*symad_points), 2)
            print(f"growth: nodes ≈ {a:.2f}·n² + {b:.1f}·n + {c:.0f}")
        print()
        failures += [(function.name, n) for n in failed]
        sweep = symad_sweep(function, sweep_orders, 3)
        print(sweep_summary(function, sweep))
        print()
        failures += [(function.name, n) for n, _, _, error in sweep if not error <= function.rtol]
        curves[f"symad, {function.name}"] = [(n, count) for n, count, _, _ in sweep]
        curves[f"CasADi nested gradient, {function.name}"] = nodes["casadi"]
    print(plot_nodes(curves))

    print("\nHessian of the N-dimensional Rosenbrock function, sd.hessian(f, sparse=True): "
          "build (trace + Hessian graph), compile, evaluate (ms, one run each)")
    header = ["N", "non-zeros", "F.sparsity() nnz", "nodes", "build ms", "compile ms",
              "evaluate ms", "total ms", "sd.hessian call ms"]
    if "casadi" in peers:
        header += ["casadi non-zeros", "casadi ms", "symad / casadi"]
    rows, hessian_failures = hessian_rows(sizes, peers)
    print(format_table(header, rows))
    failures += multivariate_report(arguments.quick, arguments.reps, arguments.sympy_limit)
    print(f"\ntotal benchmark time {time.perf_counter() - started:.1f} s")
    if failures or hessian_failures:
        print(f"symad values off by more than their tolerance: {failures}; "
              f"Hessians missing non-zeros: {hessian_failures}")
        return 1
    print("correctness: every symad derivative within "
          + ", ".join(f"{f.rtol:g} ({f.name})" for f in FUNCTIONS)
          + " of the exact value; every Hessian has exactly 3N - 2 structural non-zeros; every "
          "mixed partial within 1e-9, every Taylor coefficient within 1e-12 of the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
