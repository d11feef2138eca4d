"""Recording at scale: large graphs recorded, differentiated and inlined, beside CasADi and SymEngine.

The cases (each a fresh Python function, so no cache helps):

* ``logistic``: the 14-step logistic map ``l <- 4 l (1 - l)`` traced and its
  gradient built (``sd.grad(fn).trace(0.3)``); node counts of both graphs;
* ``sum``: the gradient of ``sum(sin(x) * exp(-x**2))`` over an array of N
  elements, written element by element (one scalar node per element and
  operation: the scalar graphs this benchmark measures; the same function on
  whole arrays is benchmarks/arrays.py's), built *and evaluated* once at a
  random point (the first call compiles the evaluator, which is part of what a
  user waits for), N = 10^3, 10^4, 10^5; checked against the analytic gradient;
* ``chain``: the gradient of a D-deep chain ``x <- sin(x) + 0.001 x`` built,
  D = 10^3, 10^4, 10^5 (3 function nodes per step), checked by evaluating it
  against the forward-mode product ``prod(cos(x_k) + 0.001)``;
* ``graph100k``: the same chain at depth 33,334, a function graph of 100,002
  nodes, recorded and differentiated;
* ``formula``: ``formula()`` of the 10^4-deep chain's gradient (built
  beforehand, not timed): a result or the inlining budget's ExportError.

Peers, where installed: CasADi ``SX`` (the expression built, ``ca.gradient``,
wrapped in a ``ca.Function``; ``sum`` is also evaluated once) and SymEngine
(the expression built, ``se.diff`` per variable; ``sum`` evaluated with
``se.Lambdify``). SymEngine has no reverse mode, so its gradient of a sum of N
terms is N derivatives of the whole sum: quadratic, and stopped by the step
limit at large N. Neither has an inlined formula of a DAG to compare with.

Every (tool, case, size) runs in its own Python process, so that its peak
memory (``ru_maxrss`` above the process's size after imports and set-up) is
its own and a crash or a hang is contained; a step longer than the step limit
is stopped. Times are medians of the repetitions that fit in the case budget
(one for the large sizes). symad's size limit on symbolic arrays
(``symad.function.MAX_SYMBOLIC_ELEMENTS``) is raised inside the ``sum``
worker where N exceeds it, to measure past it.

Run from the project root::

    python benchmarks/scale.py             # the full table, 10-20 minutes
    python benchmarks/scale.py --quick     # sizes 10^2..10^3, a smoke test (about a minute)
    python benchmarks/scale.py --sizes 1000 10000 --tools symad casadi --cases sum chain

The exit status is 1 if a computed gradient disagrees with its reference.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from benchmarks.harness import (  # noqa: E402
    NO_VALUE,
    format_table,
    least_squares_line,
    machine_line,
    time_repeatedly,
    versions_line,
)

X0 = 0.3
LOGISTIC_STEPS = 14
CHAIN_STEP = 0.001
GRAPH_100K_DEPTH = 33_334  # 3 function nodes per step: 100,002 nodes
FORMULA_DEPTH = 10_000

FULL_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000)
TOOLS = ("symad", "casadi", "symengine")
CASES = ("logistic", "sum", "chain", "graph100k", "formula")
TOOL_NAMES = {"symad": "symad", "casadi": "CasADi SX", "symengine": "SymEngine"}

STEP_LIMIT_S = 300.0   # one repetition longer than this is stopped
QUICK_STEP_LIMIT_S = 60.0
CASE_BUDGET_S = 5.0    # further repetitions stop once a case has used this
RTOL = 1e-9


# --------------------------------------------------------------------------
# The functions, written once for every tool (``lib`` supplies sin/exp/sum)
# --------------------------------------------------------------------------


def make_logistic(steps: int):
    def logistic(l):
        for _ in range(steps):
            l = 4 * l * (1 - l)
        return l

    return logistic


def make_chain(depth: int, sin):
    def chain(x):
        for _ in range(depth):
            x = sin(x) + CHAIN_STEP * x
        return x

    return chain


def chain_derivative(x: float, depth: int) -> float:
    """The chain's derivative by forward mode on floats: prod(cos(x_k) + 0.001)."""
    derivative = 1.0
    for _ in range(depth):
        derivative *= math.cos(x) + CHAIN_STEP
        x = math.sin(x) + CHAIN_STEP * x
    return derivative


def logistic_derivative(x: float, steps: int) -> float:
    derivative = 1.0
    for _ in range(steps):
        derivative *= 4.0 - 8.0 * x
        x = 4.0 * x * (1.0 - x)
    return derivative


def sum_point(n: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-2.0, 2.0, n)


def sum_gradient(x: np.ndarray) -> np.ndarray:
    return (np.cos(x) - 2 * x * np.sin(x)) * np.exp(-x**2)


# --------------------------------------------------------------------------
# Workers: one (tool, case, size) per process. Each returns a dict:
# prepare/run for the timing, and "check" (value, reference) or "nodes".
# --------------------------------------------------------------------------


def symad_case(case: str, size: int) -> dict:
    import symad as sd
    import symad.function
    import symad.numpy as snp

    if case == "logistic":
        function_nodes = sd.trace(make_logistic(size), X0).stats()["nodes"]
        G = sd.grad(make_logistic(size)).trace(X0)
        return dict(prepare=lambda: make_logistic(size), run=lambda fn: sd.grad(fn).trace(X0),
                    nodes=G.stats()["nodes"], function_nodes=function_nodes,
                    check=(float(G(X0)), logistic_derivative(X0, size)))
    if case == "sum":
        symad.function.MAX_SYMBOLIC_ELEMENTS = max(symad.function.MAX_SYMBOLIC_ELEMENTS, size)
        point = sum_point(size)
        result = {}

        def run(fn):
            start = time.perf_counter()
            G = sd.grad(fn).trace(np.zeros(size))
            built = time.perf_counter()
            value = G(point)  # the first call compiles the evaluator
            first_call_s = time.perf_counter() - built
            # Nodes are counted in check(), outside the timed region: stats() walks the
            # graph (42 ms at 10^4 elements), which CasADi's n_nodes() does not.
            result.update(graph=G, value=value, build_s=built - start, first_call_s=first_call_s)
            return G

        def check():
            result["nodes"] = result.pop("graph").stats()["nodes"]
            return result["value"], sum_gradient(point)

        def prepare():
            result.pop("graph", None)  # the previous repetition's graph, freed before timing
            return lambda x: energy(x)

        def energy(x):
            # Element by element (a list of the element symbols, stacked), as issue 7
            # measured recording scalar graphs at scale: written with whole arrays the
            # same gradient is 11 nodes at any N (benchmarks/arrays.py).
            x = snp.stack(list(x))
            return np.sum(np.sin(x) * np.exp(-x**2))

        def repeated_call():
            G = sd.grad(energy).trace(np.zeros(size))
            G(point)
            return best_call_seconds(lambda: G(point))

        return dict(prepare=prepare, run=run, result=result, check=check,
                    repeated_call=repeated_call)
    if case in ("chain", "graph100k"):
        result = {}

        def run(fn):
            G = sd.grad(fn).trace(X0)
            result.update(graph=G)  # nodes counted in check(), outside the timed region
            return G

        def check():
            function_nodes = sd.trace(make_chain(size, np.sin), X0).stats()["nodes"]
            result["function_nodes"] = function_nodes
            graph = result.pop("graph")
            result["nodes"] = graph.stats()["nodes"]
            return float(graph(X0)), chain_derivative(X0, size)

        def prepare():
            result.pop("graph", None)  # the previous repetition's graph, freed before timing
            return make_chain(size, np.sin)

        return dict(prepare=prepare, run=run, result=result, check=check)
    if case == "formula":
        G = sd.grad(make_chain(size, np.sin)).trace(X0)
        result = {"nodes": G.stats()["nodes"]}

        def run(graph):
            try:
                graph.formula()
                result["outcome"] = "a formula"
            except sd.SymadError as error:
                result["outcome"] = f"{type(error).__name__}: {str(error)[:90]}..."

        return dict(prepare=lambda: G, run=run, result=result)
    raise ValueError(case)


def casadi_case(case: str, size: int) -> dict:
    import casadi as ca

    if case == "logistic":
        symbol = ca.SX.sym("l")

        def run(_):
            return ca.Function("g", [symbol], [ca.gradient(make_logistic(size)(symbol), symbol)])

        G = run(None)
        function = ca.Function("f", [symbol], [make_logistic(size)(symbol)])
        return dict(prepare=lambda: None, run=run, nodes=G.n_nodes(), function_nodes=function.n_nodes(),
                    check=(float(G(X0)), logistic_derivative(X0, size)))
    if case == "sum":
        point = sum_point(size)
        result = {}

        def run(_):
            x = ca.SX.sym("x", size)
            G = ca.Function("g", [x], [ca.gradient(ca.sum1(ca.sin(x) * ca.exp(-x**2)), x)])
            result.update(graph=G, value=np.asarray(G(point)).reshape(-1))  # nodes: in check()
            return G

        def check():
            result["nodes"] = result.pop("graph").n_nodes()
            return result["value"], sum_gradient(point)

        def repeated_call():
            G = run(None)
            return best_call_seconds(lambda: G(point))

        def prepare():
            result.pop("graph", None)  # freed before timing, as for symad
            return None

        return dict(prepare=prepare, run=run, result=result, check=check, repeated_call=repeated_call)
    if case in ("chain", "graph100k"):
        result = {}

        def run(_):
            x = ca.SX.sym("x")
            G = ca.Function("g", [x], [ca.gradient(make_chain(size, ca.sin)(x), x)])
            result.update(graph=G)  # nodes counted in check(), as for symad
            return G

        def check():
            x = ca.SX.sym("x")
            result["function_nodes"] = ca.Function("f", [x], [make_chain(size, ca.sin)(x)]).n_nodes()
            graph = result.pop("graph")
            result["nodes"] = graph.n_nodes()
            return float(graph(X0)), chain_derivative(X0, size)

        def prepare():
            result.pop("graph", None)  # freed before timing, as for symad
            return None

        return dict(prepare=prepare, run=run, result=result, check=check)
    return {}


def symengine_case(case: str, size: int) -> dict:
    import symengine as se

    if case == "logistic":
        symbol = se.Symbol("l")

        def run(_):
            return se.diff(make_logistic(size)(symbol), symbol)

        return dict(prepare=lambda: None, run=run,
                    check=(float(run(None).subs({symbol: X0})), logistic_derivative(X0, size)))
    if case == "sum":
        point = sum_point(size)
        result = {}

        def run(_):
            xs = se.symbols(f"x0:{size}")
            total = se.Add(*[se.sin(x) * se.exp(-x**2) for x in xs])
            gradient = [se.diff(total, x) for x in xs]
            result["value"] = np.asarray(se.Lambdify(xs, gradient)(point)).reshape(-1)

        return dict(prepare=lambda: None, run=run, result=result,
                    check=lambda: (result["value"], sum_gradient(point)))
    if case in ("chain", "graph100k"):
        result = {}

        def run(_):
            x = se.Symbol("x")
            result.update(derivative=se.diff(make_chain(size, se.sin)(x), x), x=x)

        def check():
            return float(result["derivative"].subs({result["x"]: X0})), chain_derivative(X0, size)

        def prepare():
            result.pop("graph", None)  # freed before timing, as for symad
            return None

        return dict(prepare=prepare, run=run, result=result, check=check)
    return {}


WORKERS = {"symad": symad_case, "casadi": casadi_case, "symengine": symengine_case}


def best_call_seconds(call, repetitions: int = 7) -> float:
    """The fastest of ``repetitions`` calls of ``call``: the cost of evaluating a built gradient again."""
    best = math.inf
    for _ in range(repetitions):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def peak_rss_mb() -> float:
    """The peak resident memory of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(tool: str, case: str, size: int, repetitions: int, step_limit_s: float) -> dict:
    """Measure one (tool, case, size) in this process; the result as a JSON-able dict."""
    try:
        spec = WORKERS[tool](case, size)
    except ImportError:
        return {"error": "not installed"}
    if not spec:
        return {"error": "no such case"}
    baseline = peak_rss_mb()
    timing = time_repeatedly(spec["prepare"], spec["run"], repetitions, warmup=size <= 1_000,
                             budget_s=CASE_BUDGET_S, step_limit_s=step_limit_s)
    report = {"median_s": timing.median_s, "reps": timing.repetitions, "timed_out": timing.timed_out,
              "peak_mb": peak_rss_mb() - baseline}
    result = spec.get("result", {})
    if timing.median_s is not None:
        check = spec.get("check")
        if check is not None:
            value, reference = check() if callable(check) else check
            report["max_rel_error"] = float(np.max(np.abs(np.asarray(value) - reference)
                                                   / np.maximum(np.abs(reference), 1e-300)))
    for key in ("nodes", "function_nodes", "outcome", "build_s", "first_call_s"):
        if key in spec or key in result:
            report[key] = spec.get(key, result.get(key))
    if timing.median_s is not None and "repeated_call" in spec:  # after the memory was read
        report["repeated_call_s"] = spec["repeated_call"]()
    return report


# --------------------------------------------------------------------------
# The driver: one process per measurement, then the tables
# --------------------------------------------------------------------------


@dataclass
class Measurement:
    tool: str
    case: str
    size: int
    data: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float | None:
        return self.data.get("median_s")

    def time_text(self) -> str:
        if self.data.get("error"):
            return self.data["error"][:40]
        if self.seconds is None:
            return f"> {self.data.get('limit_s', STEP_LIMIT_S):.0f} s" if self.data.get("timed_out") else NO_VALUE
        return f"{self.seconds:.3g} s" if self.seconds >= 1 else f"{self.seconds * 1e3:.3g} ms"

    def memory_text(self) -> str:
        peak = self.data.get("peak_mb")
        return NO_VALUE if peak is None or self.seconds is None else f"{peak:,.0f}"

    @property
    def correct(self) -> bool:
        error = self.data.get("max_rel_error")
        return error is None or error <= RTOL


def measure(tool: str, case: str, size: int, repetitions: int, step_limit_s: float) -> Measurement:
    print(f"  {tool} {case} {size:,} ...", file=sys.stderr, flush=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", tool, case, str(size),
               "--reps", str(repetitions), "--step-limit", str(step_limit_s)]
    # The worker stops a step past the limit with SIGALRM, which compiled code
    # (SymEngine's diff) does not see until it returns: the process is killed
    # here instead, after the limit plus the set-up and check it may need.
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=2 * step_limit_s + 60)
    except subprocess.TimeoutExpired:
        return Measurement(tool, case, size, {"timed_out": True, "limit_s": step_limit_s})
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode != 0 or not lines:
        crash = f"crashed (signal {-completed.returncode})" if completed.returncode < 0 else "crashed"
        last = (completed.stderr.strip().splitlines() or [crash])[-1]
        return Measurement(tool, case, size, {"error": last})
    data = json.loads(lines[-1])
    data["limit_s"] = step_limit_s
    return Measurement(tool, case, size, data)


def ratio_text(numerator: Measurement | None, denominator: Measurement | None) -> str:
    if numerator is None or denominator is None or not numerator.seconds or not denominator.seconds:
        return NO_VALUE
    return f"{numerator.seconds / denominator.seconds:,.1f}×"


def print_report(results: dict, sizes: tuple, tools: tuple, elapsed_s: float, machine: str) -> None:
    def get(tool, case, size):
        return results.get((tool, case, size))

    print("Recording at scale: graphs recorded, differentiated and inlined")
    print(machine)
    print(versions_line())
    print()
    header = ["case", "size", "symad nodes", "symad", "symad MB", "µs/node"]
    for tool in tools[1:]:
        header += [TOOL_NAMES[tool], f"{TOOL_NAMES[tool]} MB"]
    if "casadi" in tools:
        header += ["CasADi nodes", "symad ÷ CasADi"]
    rows = []
    plan = [("logistic", LOGISTIC_STEPS)] + [("sum", n) for n in sizes] + [("chain", n) for n in sizes]
    plan += [("graph100k", graph_depth(sizes))]
    for case, size in plan:
        ours = get("symad", case, size)
        if ours is None:
            continue
        nodes = ours.data.get("nodes")
        per_node = (f"{ours.seconds / nodes * 1e6:.1f}" if nodes and ours.seconds else NO_VALUE)
        row = [case, f"{size:,}", f"{nodes:,}" if nodes else NO_VALUE, ours.time_text(),
               ours.memory_text(), per_node]
        for tool in tools[1:]:
            peer = get(tool, case, size)
            row += [peer.time_text(), peer.memory_text()] if peer else [NO_VALUE, NO_VALUE]
        if "casadi" in tools:
            peer = get("casadi", case, size)
            peer_nodes = peer.data.get("nodes") if peer else None
            row += [f"{peer_nodes:,}" if peer_nodes else NO_VALUE, ratio_text(ours, peer)]
        rows.append(row)
    print(format_table(header, rows))
    print("(times: median of the repetitions that fit in the budget; MB: peak resident memory "
          "above the worker's size after set-up; µs/node: symad's time per gradient node)")
    print()

    # The gradient's size against the function's, symad and CasADi.
    for tool in ("symad", "casadi"):
        m = get(tool, "logistic", LOGISTIC_STEPS)
        if m and m.data.get("nodes") and m.data.get("function_nodes"):
            print(f"logistic map, {LOGISTIC_STEPS} steps, {TOOL_NAMES[tool]}: gradient {m.data['nodes']} nodes / "
                  f"function {m.data['function_nodes']} = {m.data['nodes'] / m.data['function_nodes']:.2f}×")

    # Linear growth: the time per node should not grow with the size.
    for case in ("sum", "chain"):
        points = [(m.data["nodes"], m.seconds) for n in sizes
                  if (m := get("symad", case, n)) and m.seconds and m.data.get("nodes")]
        if len(points) >= 2:
            per_node = [seconds / nodes * 1e6 for nodes, seconds in points]
            text = ", ".join(f"{n:,} nodes {p:.1f} µs" for (n, _), p in zip(points, per_node))
            growth = max(per_node) / min(per_node)
            print(f"linear growth, {case}: {text}; largest/smallest time per node {growth:.2f}")
            if len(points) >= 3:
                slope, intercept, residual = least_squares_line([float(n) for n, _ in points],
                                                                [s for _, s in points])
                print(f"  fit: time = {slope * 1e6:.2f} µs·nodes {intercept:+.2f} s "
                      f"(largest residual {residual:.2f} s)")

    split = [f"{n:,}: built {m.data['build_s']:.3g} s + first call {m.data['first_call_s']:.3g} s"
             for n in sizes if (m := get("symad", "sum", n)) and m.data.get("build_s") is not None]
    if split:
        print("symad sum, the last repetition split (the first call compiles the evaluator): "
              + "; ".join(split))
    repeated = [f"{n:,}: symad {_ms(m.data['repeated_call_s'])}, CasADi "
                f"{_ms(c.data['repeated_call_s']) if c and c.data.get('repeated_call_s') else NO_VALUE}"
                for n in sizes
                if (m := get("symad", "sum", n)) and m.data.get("repeated_call_s") is not None
                for c in [get("casadi", "sum", n)]]
    if repeated:
        print("sum, the built gradient evaluated again at the point (fastest of 7 calls): "
              + "; ".join(repeated))
    m = get("symad", "graph100k", graph_depth(sizes))
    if m is not None:
        function_nodes = m.data.get("function_nodes")
        print(f"a {function_nodes or '?':,}-node function graph recorded and differentiated: {m.time_text()}"
              if function_nodes else f"graph100k: {m.time_text()}")
    m = get("symad", "formula", formula_depth(sizes))
    if m is not None:
        print(f"formula() of the {formula_depth(sizes):,}-deep chain's gradient "
              f"({m.data.get('nodes', '?'):,} nodes): {m.time_text()}, {m.data.get('outcome', '')}")

    failures = [f"{m.tool} {m.case} {m.size}" for m in results.values() if not m.correct]
    if failures:
        print("CORRECTNESS FAILURE (relative error above 1e-9): " + "; ".join(failures))
    else:
        print(f"correctness: every gradient evaluated matches its reference (rtol {RTOL:g})")
    print(f"total benchmark time {elapsed_s:.0f} s")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def graph_depth(sizes: tuple) -> int:
    return GRAPH_100K_DEPTH if max(sizes) >= 100_000 else max(1, max(sizes) // 3)


def formula_depth(sizes: tuple) -> int:
    return FORMULA_DEPTH if max(sizes) >= FORMULA_DEPTH else max(sizes)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes 10^2 and 10^3 only (smoke test)")
    parser.add_argument("--sizes", type=int, nargs="+", help="array sizes and chain depths")
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per case (default 5)")
    parser.add_argument("--step-limit", type=float, default=None, help="seconds per step")
    parser.add_argument("--save", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--load", metavar="PATH", help="print the report of saved measurements")
    parser.add_argument("--worker", nargs=3, metavar=("TOOL", "CASE", "SIZE"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    step_limit = arguments.step_limit or (QUICK_STEP_LIMIT_S if arguments.quick else STEP_LIMIT_S)
    if arguments.worker:
        tool, case, size = arguments.worker
        print(json.dumps(worker(tool, case, int(size), arguments.reps, step_limit)))
        return 0
    if arguments.load:
        saved = json.loads(Path(arguments.load).read_text())
        results = {(m["tool"], m["case"], m["size"]): Measurement(**m) for m in saved["measurements"]}
        print_report(results, tuple(saved["sizes"]), tuple(saved["tools"]), saved["elapsed_s"],
                     saved["machine"])
        return 0 if all(m.correct for m in results.values()) else 1
    sizes = tuple(sorted(arguments.sizes or (QUICK_SIZES if arguments.quick else FULL_SIZES)))
    tools = tuple(["symad"] + [t for t in arguments.tools if t != "symad"])
    started = time.perf_counter()
    machine = machine_line()  # the load average as the run starts
    plan = [("logistic", LOGISTIC_STEPS)] + [("sum", n) for n in sizes] + [("chain", n) for n in sizes]
    plan += [("graph100k", graph_depth(sizes))]
    plan = [(case, size) for case, size in plan if case in arguments.cases]
    results = {}
    for case, size in plan:
        for tool in tools:
            previous = [m for (t, c, _), m in results.items() if t == tool and c == case]
            if previous and (previous[-1].data.get("timed_out") or (
                    tool != "symad" and (previous[-1].seconds or 0) > step_limit / 10)):
                # Ten times the size would overrun the step limit: not run.
                results[(tool, case, size)] = Measurement(tool, case, size, {"error": "not run"})
                continue
            results[(tool, case, size)] = measure(tool, case, size, arguments.reps, step_limit)
    if "formula" in arguments.cases:
        results[("symad", "formula", formula_depth(sizes))] = measure(
            "symad", "formula", formula_depth(sizes), arguments.reps, step_limit)
    elapsed_s = time.perf_counter() - started
    if arguments.save:
        Path(arguments.save).write_text(json.dumps({
            "sizes": sizes, "tools": tools, "elapsed_s": elapsed_s, "machine": machine,
            "measurements": [vars(m) for m in results.values()]}, indent=1))
    print_report(results, sizes, tools, elapsed_s, machine)
    return 0 if all(m.correct for m in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
