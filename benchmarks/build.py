"""Benchmark 1 of the project's benchmark brief: building derivatives without expression swell.

The test case is the logistic map iterated n times, ``l <- 4 l (1 - l)``. Each
iteration uses its input twice, so as an expression *tree* the function
doubles in size every iteration and ``sympy.diff`` on that tree grows
exponentially. symad traces the function into a DAG with shared
subexpressions and builds the gradient by the chain rule over that DAG, so
both graphs should grow linearly in n and the gradient graph should stay a
small constant multiple of the function graph (the cheap-gradient principle).

What is measured, for n in 4, 8, 12, 14, 16, 20:

symad
    * ``sd.trace(fn, 0.3).stats()["nodes"]``: size of the function graph;
    * ``sd.grad(fn).trace(0.3).stats()["nodes"]``: size of the gradient graph,
      and their ratio;
    * build time: ``sd.grad(fn).trace(0.3)`` on a *fresh* Python function
      object (tracing plus gradient construction); also, separately, tracing
      alone and the gradient construction alone (``sd.grad(F).trace(0.3)``
      with ``F`` traced beforehand). Median of --reps repetitions after one
      warm-up; every repetition builds a new closure so that no cache keyed
      on the function object can help;
    * correctness: ``G(0.3)`` against a central finite difference of the
      plain-Python logistic map and against the exact chain-rule product
      ``prod(4 - 8 l_k)``. The first call of ``G`` (which compiles the
      evaluator) is timed as well, for information.

sympy (side by side, same run)
    * ``sympy.diff(expr, l)`` where ``expr`` is the map applied n times to
      ``sympy.Symbol('l')`` (the tree, not a polynomial expansion). SymPy's
      cache is cleared before every repetition. Fewer repetitions for large n
      (n = 14 takes ~10 s, one repetition); not run beyond n = 14.
    * ``sympy.count_ops`` of the derivative up to n = 12 (it is slow), and
      the operation count of ``sympy.cse`` of the n = 10 derivative.

symad on SymPy's tree (same run), at n = 14
    * ``sd.grad(sd.from_sympy(expr, [l])).trace(0.3)``: importing the
      SymPy tree that ``sympy.diff`` differentiates, and building its
      gradient (the target: under 0.5 s, against ~10 s for ``sympy.diff``).
      The tree is built, with SymPy's cache cleared, outside the timed region.

Optional peers at n = 14, if importable (``pip install -e ".[bench]"``):
SymEngine ``se.diff`` on the expanded expression, and CasADi
``ca.gradient`` on ``SX`` plus the ``n_nodes`` of the resulting
``ca.Function``.

Machines are shared and noisy: read the *ratios* measured side by side, not
absolute times. Every timed step runs under a wall-clock budget so the whole
script finishes in about two minutes.

Run from the project root::

    python benchmarks/build.py            # full table, ~2 minutes
    python benchmarks/build.py --quick    # n in (4, 8, 12) only, smoke test

The exit status is 1 if any symad gradient disagrees with the references.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sympy

# Benchmark the working tree this script lives in, even when another symad is
# installed (running ``python benchmarks/build.py`` puts benchmarks/, not the
# project root, on sys.path).
PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

import symad as sd  # noqa: E402  (needs the sys.path line above)
from benchmarks import harness  # noqa: E402
from benchmarks.harness import (  # noqa: E402
    NO_VALUE,
    StepTimeout,
    Timing,
    format_table,
    least_squares_line,
    machine_line,
    time_limit,
    versions_line,
)

X0 = 0.3  # the evaluation point used throughout the benchmark brief

FULL_ITERATIONS = (4, 8, 12, 14, 16, 20)
QUICK_ITERATIONS = (4, 8, 12)
HEADLINE_N = 14  # the case the benchmark brief quotes peer figures for
SYMPY_MAX_N = 14  # sympy.diff grows ~x2.6 per two iterations: 14 is ~10 s already
COUNT_OPS_MAX_N = 12  # count_ops on the n = 14 derivative alone takes longer than diff
CSE_N = 10  # the brief: 237 operations after cse, out of 82,176 raw

# Wall-clock limits, in seconds. A single step that overruns is interrupted;
# repetitions stop being added once a case has used its budget.
STEP_LIMIT_S = 40.0
CASE_BUDGET_S = 8.0

# Correctness tolerances (relative). The finite difference is limited by
# truncation and by the chaotic amplification of rounding error, hence looser.
EXACT_RTOL = 1e-9
FD_RTOL = 1e-4



# --------------------------------------------------------------------------
# The function under test
# --------------------------------------------------------------------------


def make_logistic(n_iterations: int) -> Callable:
    """Return a new ``logistic(l)`` applying ``l <- 4 l (1 - l)`` n times.

    A factory rather than a global function, because every timing repetition
    must see a Python function object that symad has never seen (otherwise a
    per-function cache would time a dictionary lookup).
    """

    def logistic(l):
        for _ in range(n_iterations):
            l = 4 * l * (1 - l)
        return l

    return logistic


def exact_logistic_derivative(x: float, n_iterations: int) -> float:
    """d/dx of the n-times logistic map by the chain rule: prod(4 - 8 l_k)."""
    derivative = 1.0
    for _ in range(n_iterations):
        derivative *= 4.0 - 8.0 * x
        x = 4.0 * x * (1.0 - x)
    return derivative


def central_difference(fn: Callable[[float], float], x: float, n_iterations: int) -> float:
    """Central finite difference with a step suited to the map's scale.

    After n iterations the map varies on a length scale of about 2**-n, so
    the step shrinks with n; a fixed step would be far too coarse at n = 20.
    """
    step = 1e-5 * 2.0**-n_iterations
    return (fn(x + step) - fn(x - step)) / (2.0 * step)


def sympy_logistic_tree(symbol: sympy.Symbol, n_iterations: int) -> sympy.Expr:
    """The map applied n times to a SymPy symbol: a tree of size ~2**n."""
    expr = symbol
    for _ in range(n_iterations):
        expr = 4 * expr * (1 - expr)
    return expr


# --------------------------------------------------------------------------
# symad measurements
# --------------------------------------------------------------------------


@dataclass
class SymadResult:
    n: int
    function_nodes: int
    gradient_nodes: int
    build: Timing  # sd.grad(fresh fn).trace(X0): tracing + gradient
    trace_only: Timing  # sd.trace(fresh fn, X0)
    gradient_only: Timing  # sd.grad(F).trace(X0), F traced beforehand
    first_call_s: float  # G(X0) the first time: includes compiling the evaluator
    value: float
    finite_difference: float
    exact: float

    @property
    def node_ratio(self) -> float:
        return self.gradient_nodes / self.function_nodes

    @property
    def correct(self) -> bool:
        return math.isclose(self.value, self.exact, rel_tol=EXACT_RTOL) and math.isclose(
            self.value, self.finite_difference, rel_tol=FD_RTOL
        )


def time_repeatedly(prepare, run, repetitions: int, warmup: bool = True,
                    budget_s: float = CASE_BUDGET_S) -> Timing:
    return harness.time_repeatedly(prepare, run, repetitions, warmup, budget_s, STEP_LIMIT_S)


def measure_symad(n: int, repetitions: int) -> SymadResult:
    function_graph = sd.trace(make_logistic(n), X0)
    gradient_graph = sd.grad(make_logistic(n)).trace(X0)

    build = time_repeatedly(
        prepare=lambda: make_logistic(n),
        run=lambda fn: sd.grad(fn).trace(X0),
        repetitions=repetitions,
    )
    trace_only = time_repeatedly(
        prepare=lambda: make_logistic(n),
        run=lambda fn: sd.trace(fn, X0),
        repetitions=repetitions,
    )
    # The traced Function is made outside the timed region, so this isolates
    # the cost of the chain-rule construction itself.
    gradient_only = time_repeatedly(
        prepare=lambda: sd.trace(make_logistic(n), X0),
        run=lambda traced: sd.grad(traced).trace(X0),
        repetitions=repetitions,
    )

    start = time.perf_counter()
    value = float(gradient_graph(X0))
    first_call_s = time.perf_counter() - start

    plain = make_logistic(n)  # on floats it is ordinary Python arithmetic
    return SymadResult(
        n=n,
        function_nodes=int(function_graph.stats()["nodes"]),
        gradient_nodes=int(gradient_graph.stats()["nodes"]),
        build=build,
        trace_only=trace_only,
        gradient_only=gradient_only,
        first_call_s=first_call_s,
        value=value,
        finite_difference=central_difference(plain, X0, n),
        exact=exact_logistic_derivative(X0, n),
    )


# --------------------------------------------------------------------------
# sympy measurements
# --------------------------------------------------------------------------

L_SYMBOL = sympy.Symbol("l")


def sympy_repetitions(n: int, requested: int) -> int:
    # Each step of two iterations costs ~2.6x more; keep the total bounded.
    if n <= 8:
        return requested
    if n <= 12:
        return min(requested, 3)
    return 1


def fresh_sympy_tree(n: int) -> sympy.Expr:
    # SymPy memoizes derivatives and constructors globally; without clearing
    # the cache, later repetitions would measure cache hits.
    sympy.core.cache.clear_cache()
    return sympy_logistic_tree(L_SYMBOL, n)


@dataclass
class SympyResult:
    n: int
    diff: Timing
    derivative_ops: int | None = None  # None: not counted (too slow) or timed out
    count_ops_s: float | None = None


def measure_sympy(n: int, repetitions: int) -> SympyResult:
    reps = sympy_repetitions(n, repetitions)
    # No warm-up for the expensive cases: a warm-up of a 10 s step is 10 s
    # of budget, and the one-off import costs were paid by the small cases.
    diff = time_repeatedly(
        prepare=lambda: fresh_sympy_tree(n),
        run=lambda expr: sympy.diff(expr, L_SYMBOL),
        repetitions=reps,
        warmup=n <= 8,
        budget_s=3 * CASE_BUDGET_S,
    )
    result = SympyResult(n=n, diff=diff)
    if n <= COUNT_OPS_MAX_N and diff.median_s is not None:
        derivative = sympy.diff(sympy_logistic_tree(L_SYMBOL, n), L_SYMBOL)
        try:
            with time_limit(STEP_LIMIT_S):
                start = time.perf_counter()
                result.derivative_ops = int(sympy.count_ops(derivative, visual=False))
                result.count_ops_s = time.perf_counter() - start
        except StepTimeout:
            pass
    return result


def cse_operation_counts(n: int) -> tuple[int, int] | None:
    """(raw ops, ops after sympy.cse) of the n-iteration sympy.diff tree."""
    try:
        with time_limit(STEP_LIMIT_S):
            derivative = sympy.diff(sympy_logistic_tree(L_SYMBOL, n), L_SYMBOL)
            raw = int(sympy.count_ops(derivative, visual=False))
            assignments, (reduced,) = sympy.cse(derivative)
            after = sum(int(sympy.count_ops(rhs, visual=False)) for _, rhs in assignments)
            after += int(sympy.count_ops(reduced, visual=False))
    except StepTimeout:
        return None
    return raw, after


# --------------------------------------------------------------------------
# Optional peers
# --------------------------------------------------------------------------


@dataclass
class PeerResult:
    name: str
    build: Timing | None = None  # None: not installed
    detail: str = ""
    error: str = ""


def measure_from_sympy(n: int, repetitions: int) -> PeerResult:
    """symad importing the SymPy tree (``from_sympy``) and building its gradient."""
    symbol = L_SYMBOL
    build = time_repeatedly(
        prepare=lambda: fresh_sympy_tree(n),
        run=lambda expr: sd.grad(sd.from_sympy(expr, [symbol])).trace(X0),
        repetitions=repetitions,
    )
    function = sd.from_sympy(sympy_logistic_tree(symbol, n), [symbol])
    gradient = sd.grad(function).trace(X0)
    value = float(gradient(X0))
    exact = exact_logistic_derivative(X0, n)
    ok = math.isclose(value, exact, rel_tol=EXACT_RTOL)
    return PeerResult(
        "symad from_sympy + grad",
        build,
        detail=(
            f"nodes: function {function.stats()['nodes']}, gradient {gradient.stats()['nodes']}; "
            f"d/dl at {X0} = {value:.10g} (exact {exact:.10g}){'' if ok else ' WRONG'}"
        ),
        error="" if ok else "disagrees with the exact derivative",
    )


def measure_symengine(n: int, repetitions: int) -> PeerResult:
    try:
        import symengine as se
    except ImportError:
        return PeerResult("SymEngine se.diff")
    symbol = se.Symbol("l")
    build = time_repeatedly(
        prepare=lambda: sympy_logistic_tree(symbol, n),
        run=lambda expr: se.diff(expr, symbol),
        repetitions=repetitions,
    )
    value = float(se.diff(sympy_logistic_tree(symbol, n), symbol).subs({symbol: X0}))
    return PeerResult(
        "SymEngine se.diff",
        build,
        detail=f"d/dl at {X0} = {value:.10g} (exact {exact_logistic_derivative(X0, n):.10g})",
    )


def measure_casadi(n: int, repetitions: int) -> PeerResult:
    try:
        import casadi as ca
    except ImportError:
        return PeerResult("CasADi SX gradient")
    symbol = ca.SX.sym("l")

    def build_gradient_function(expr):
        # The graph CasADi evaluates is the ca.Function; building it is part
        # of what n_nodes reports, so it is inside the timed region.
        return ca.Function("dlogistic", [symbol], [ca.gradient(expr, symbol)])

    build = time_repeatedly(
        prepare=lambda: sympy_logistic_tree(symbol, n),
        run=build_gradient_function,
        repetitions=repetitions,
    )
    expr = sympy_logistic_tree(symbol, n)
    function_nodes = ca.Function("logistic", [symbol], [expr]).n_nodes()
    gradient_nodes = build_gradient_function(expr).n_nodes()
    return PeerResult(
        "CasADi SX gradient",
        build,
        detail=(
            f"nodes: function {function_nodes}, gradient {gradient_nodes} "
            f"(ratio {gradient_nodes / function_nodes:.2f})"
        ),
    )


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------


def format_ms(timing: Timing | None) -> str:
    return harness.format_ms(timing, STEP_LIMIT_S)


def speed_ratio(symad_result: SymadResult, sympy_result: SympyResult | None) -> float | None:
    if sympy_result is None or sympy_result.diff.median_s is None:
        return None
    if symad_result.build.median_s is None:
        return None
    return sympy_result.diff.median_s / symad_result.build.median_s


def print_report(
    symad_results: list[SymadResult],
    sympy_results: dict[int, SympyResult],
    cse_counts: tuple[int, int] | None,
    symad_cse_n_nodes: int | None,
    peers: list[PeerResult],
    headline_n: int,
    elapsed_s: float,
) -> None:
    print("symad build benchmark: gradient of the logistic map l <- 4 l (1 - l)")
    print(machine_line())
    print(versions_line())
    print()

    # Main table. "symad build" is tracing + gradient from a fresh function;
    # the sympy time excludes building its input tree, so the speed ratio
    # is, if anything, in sympy's favour.
    header = [
        "iterations",
        "symad fn nodes",
        "symad grad nodes",
        "ratio",
        "symad build ms",
        "sympy.diff ms",
        "sympy/symad speed",
    ]
    rows = []
    for result in symad_results:
        sympy_result = sympy_results.get(result.n)
        ratio = speed_ratio(result, sympy_result)
        rows.append(
            [
                str(result.n),
                str(result.function_nodes),
                str(result.gradient_nodes),
                f"{result.node_ratio:.2f}",
                format_ms(result.build),
                format_ms(sympy_result.diff if sympy_result else None),
                f"{ratio:,.0f}×" if ratio is not None else NO_VALUE,
            ]
        )
    print(format_table(header, rows))
    print()

    # Details: the parts of the build, evaluator compilation, correctness.
    header = [
        "iterations",
        "trace ms",
        "grad-only ms",
        "1st call ms",
        "symad G(0.3)",
        "rel err exact",
        "rel err FD",
        "sympy.diff ops",
        "reps symad/sympy",
    ]
    rows = []
    for result in symad_results:
        sympy_result = sympy_results.get(result.n)
        ops = sympy_result.derivative_ops if sympy_result else None
        rows.append(
            [
                str(result.n),
                format_ms(result.trace_only),
                format_ms(result.gradient_only),
                f"{result.first_call_s * 1e3:,.1f}",
                f"{result.value:.10g}",
                f"{abs(result.value - result.exact) / abs(result.exact):.1e}",
                f"{abs(result.value - result.finite_difference) / abs(result.exact):.1e}",
                f"{ops:,}" if ops is not None else NO_VALUE,
                f"{result.build.repetitions}/"
                + (str(sympy_result.diff.repetitions) if sympy_result else NO_VALUE),
            ]
        )
    print(format_table(header, rows))
    print()

    # Linearity: a DAG adds the same handful of nodes per iteration, so
    # nodes/n tends to a constant and consecutive differences are exact.
    print("linearity (nodes per iteration; constant increments mean linear growth)")
    header = ["iterations", "fn nodes/n", "grad nodes/n", "Δfn nodes/Δn", "Δgrad nodes/Δn"]
    rows = []
    previous = None
    for result in symad_results:
        if previous is None:
            increments = [NO_VALUE, NO_VALUE]
        else:
            step = result.n - previous.n
            increments = [
                f"{(result.function_nodes - previous.function_nodes) / step:.2f}",
                f"{(result.gradient_nodes - previous.gradient_nodes) / step:.2f}",
            ]
        rows.append(
            [
                str(result.n),
                f"{result.function_nodes / result.n:.2f}",
                f"{result.gradient_nodes / result.n:.2f}",
                *increments,
            ]
        )
        previous = result
    print(format_table(header, rows))
    iterations = [float(r.n) for r in symad_results]
    for label, counts in (
        ("function", [float(r.function_nodes) for r in symad_results]),
        ("gradient", [float(r.gradient_nodes) for r in symad_results]),
    ):
        slope, intercept, residual = least_squares_line(iterations, counts)
        print(
            f"  {label} graph fit: nodes = {slope:.3f}·n {intercept:+.2f} "
            f"(largest residual {residual:.2f})"
        )
    print()

    if cse_counts is not None:
        raw, after = cse_counts
        symad_part = (
            f"; symad gradient graph: {symad_cse_n_nodes} nodes"
            if symad_cse_n_nodes is not None
            else ""
        )
        print(
            f"n={CSE_N}: sympy.diff tree {raw:,} operations, {after:,} after sympy.cse{symad_part}"
        )
        print()

    if peers:
        by_n = {r.n: r for r in symad_results}
        symad_build = by_n[HEADLINE_N].build.median_s if HEADLINE_N in by_n else None
        print(f"optional peers at n={HEADLINE_N}")
        for peer in peers:
            if peer.build is None:
                print(f"  {peer.name}: not installed")
                continue
            versus = ""
            if peer.build.median_s and symad_build:
                versus = (
                    f" (symad build time / peer time = {symad_build / peer.build.median_s:,.1f})"
                )
            print(f"  {peer.name}: {format_ms(peer.build)} ms{versus}; {peer.detail}")
            if peer.name.startswith("symad") and peer.build.median_s and HEADLINE_N in sympy_results:
                diff_s = sympy_results[HEADLINE_N].diff.median_s
                if diff_s:
                    print(f"    vs sympy.diff on the same tree {diff_s:.2f} s: "
                          f"{diff_s / peer.build.median_s:,.0f}× faster")
        print()

    by_n = {r.n: r for r in symad_results}
    headline = by_n.get(headline_n)
    if headline is not None:
        sympy_result = sympy_results.get(headline_n)
        ratio = speed_ratio(headline, sympy_result)
        build_ms = format_ms(headline.build)
        if ratio is not None:
            print(
                f"n={headline_n}: gradient graph {headline.node_ratio:.2f}× the function "
                f"graph; built in {build_ms} ms vs sympy.diff "
                f"{sympy_result.diff.median_s:.2f} s: {ratio:,.0f}× faster"
            )
        else:
            print(
                f"n={headline_n}: gradient graph {headline.node_ratio:.2f}× the function "
                f"graph; built in {build_ms} ms (sympy.diff not measured)"
            )

    failures = [r.n for r in symad_results if not r.correct]
    if failures:
        print(f"CORRECTNESS FAILURE: symad gradient disagrees with references at n={failures}")
    else:
        print(
            f"correctness: all symad gradients match the exact chain rule (rtol {EXACT_RTOL:g}) "
            f"and central differences (rtol {FD_RTOL:g})"
        )
    print(f"total benchmark time {elapsed_s:.1f} s")


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="only n in (4, 8, 12), no n=14 sympy run, no peers (smoke test)",
    )
    parser.add_argument(
        "--reps", type=int, default=5, help="timed repetitions per case (default 5)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if arguments.reps < 1:
        raise SystemExit("--reps must be at least 1")
    started = time.perf_counter()
    iterations = QUICK_ITERATIONS if arguments.quick else FULL_ITERATIONS
    headline_n = max(iterations) if arguments.quick else HEADLINE_N

    symad_results = []
    sympy_results: dict[int, SympyResult] = {}
    for n in iterations:
        print(f"measuring n={n} ...", file=sys.stderr, flush=True)
        symad_results.append(measure_symad(n, arguments.reps))
        if n <= SYMPY_MAX_N:
            sympy_results[n] = measure_sympy(n, arguments.reps)

    cse_counts = None
    symad_cse_n_nodes = None
    peers: list[PeerResult] = []
    if not arguments.quick:
        print(f"sympy.cse at n={CSE_N}, peers at n={HEADLINE_N} ...", file=sys.stderr, flush=True)
        cse_counts = cse_operation_counts(CSE_N)
        symad_cse_n_nodes = int(sd.grad(make_logistic(CSE_N)).trace(X0).stats()["nodes"])
        peers = [
            measure_from_sympy(HEADLINE_N, arguments.reps),
            measure_symengine(HEADLINE_N, arguments.reps),
            measure_casadi(HEADLINE_N, arguments.reps),
        ]

    print_report(
        symad_results,
        sympy_results,
        cse_counts,
        symad_cse_n_nodes,
        peers,
        headline_n,
        time.perf_counter() - started,
    )
    correct = all(result.correct for result in symad_results) and not any(p.error for p in peers)
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
