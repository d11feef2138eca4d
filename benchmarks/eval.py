"""Benchmark 2 of the project's benchmark brief: evaluating compiled derivatives, and their memory.

On 2,000,000 float64 points (``--points``), six cases:

* ``simple``:   gradient of log(x) + x*y - sin(y)
* ``mixed``:    gradient of tanh(x*y) * exp(-y**2) + log(1 + x**2) + sqrt(x + y) * cos(x - y)
* ``logistic``: d/dl0 of the logistic map l <- 4 l (1 - l), 10 iterations
* ``gauss``:    gradient of exp(-(x**2 + 2 y**2 + z**2)/2 + x*y/4) * (1 + x*y*z) / (1 + x**2 + y**2*z**2)
* ``rosenbrock``: gradient of the 6-D Rosenbrock function under vmap (a (points, 6) batch)
* ``derivative6``: the 6th derivative of exp(sin x) / (1 + x**2)

Side by side in one run, each the median of --reps repetitions after one warm-up:

* symad with every backend available here (numexpr is the default; numpy; numba),
  each through ``sd.grad(f, argnums=...).trace(...).compile(backend)`` (the
  Rosenbrock case with the default backend through ``sd.vmap(sd.grad(f))``; the
  6th derivative through ``sd.derivative(g, 6)``);
* SymPy ``lambdify(cse=True)`` (numpy module) of ``sympy.diff``, and SymPy
  ``lambdify`` with the numexpr module;
* JAX ``jit(vmap(grad(f, argnums)))`` with x64 enabled (if installed; six nested
  ``grad`` for the 6th derivative);
* PyTorch eager (if installed; never installed by symad's extras).

Then the memory figures, each in a fresh subprocess so peaks do not mix:
the tracemalloc peak of the evaluation call and the process peak RSS for
(a) the 6th derivative of exp(sin x)/(1 + x**2) on 10**6 points
(``sd.derivative(g, 6)``), blocked (default) and in one block, and (b) the
mixed-case gradient on 10**7 points, against the size of inputs + outputs.

Machines are shared and noisy: read the ratios (symad / JAX) measured in the
same run. Run from the project root::

    python benchmarks/eval.py             # everything, several minutes
    python benchmarks/eval.py --quick     # 200,000 points, 3 reps, no memory part
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import symad as sd  # noqa: E402

# ---------------------------------------------------------------------------
# The cases, written once for NumPy-like namespaces (numpy, jax.numpy, torch, sympy)
# ---------------------------------------------------------------------------


def simple(m, x, y):
    return m.log(x) + x * y - m.sin(y)


def mixed(m, x, y):
    return m.tanh(x * y) * m.exp(-y**2) + m.log(1 + x**2) + m.sqrt(x + y) * m.cos(x - y)


def logistic(m, l):
    for _ in range(10):
        l = 4 * l * (1 - l)
    return l


def gauss(m, x, y, z):
    return m.exp(-(x**2 + 2 * y**2 + z**2) / 2 + x * y / 4) * (1 + x * y * z) / (1 + x**2 + y**2 * z**2)


def rosenbrock(m, v):
    """The 6-D Rosenbrock function of one vector ``v`` (indexable: an array or a list)."""
    return sum(100 * (v[i + 1] - v[i] ** 2) ** 2 + (1 - v[i]) ** 2 for i in range(5))


def g(m, x):
    return m.exp(m.sin(x)) / (1 + x**2)


CASES = {
    "simple": (simple, "log(x) + x*y − sin(y)"),
    "mixed": (mixed, "tanh(xy)·e^{−y²} + log(1+x²) + √(x+y)·cos(x−y)"),
    "logistic": (logistic, "logistic map, 10 iterations"),
    "gauss": (gauss, "3-variable Gaussian × rational"),
    "rosenbrock": (rosenbrock, "6-D Rosenbrock gradient under vmap"),
    "derivative6": (g, "6th derivative of exp(sin x)/(1+x²)"),
}
ARITY = {"simple": 2, "mixed": 2, "logistic": 1, "gauss": 3, "rosenbrock": 1, "derivative6": 1}


def points(case: str, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if case == "logistic":
        return [rng.uniform(0.05, 0.95, n)]
    if case == "rosenbrock":
        return [rng.uniform(-2.0, 2.0, (n, 6))]
    if case == "derivative6":
        return [rng.uniform(-3.0, 3.0, n)]
    return [rng.uniform(0.5, 2.0, n) for _ in range(ARITY[case])]


# ---------------------------------------------------------------------------
# Runners: each returns a callable of the arrays giving a list of result arrays
# ---------------------------------------------------------------------------


def symad_runner(case: str, backend: str):
    fun = CASES[case][0]
    arity = ARITY[case]

    def f(*a):
        return fun(np, *a)

    if case == "derivative6":
        evaluator = sd.derivative(f, 6).trace(0.7).compile(backend)
    elif case == "rosenbrock":
        if backend == sd.available_backends()[0]:  # the default backend: sd.vmap itself
            evaluator = sd.vmap(sd.grad(f))
        else:
            evaluator = sd.grad(f).trace(np.full(6, 0.7)).compile(backend)
    else:
        evaluator = sd.grad(f, argnums=tuple(range(arity))).trace(*([0.7] * arity)).compile(backend)

    def run(*arrays):
        out = evaluator(*arrays)
        return list(out) if isinstance(out, tuple) else [out]

    return run


def sympy_runner(case: str, module: str):
    import sympy

    fun = CASES[case][0]

    class M:  # the sympy namespace under NumPy's names
        log, sin, tanh, exp, sqrt, cos = sympy.log, sympy.sin, sympy.tanh, sympy.exp, sympy.sqrt, sympy.cos

    if case == "rosenbrock":
        symbols = sympy.symbols("a0:6")
        expression = fun(M, list(symbols))
    else:
        symbols = sympy.symbols(f"a0:{ARITY[case]}")
        expression = fun(M, *symbols)
    if case == "derivative6":
        derivatives = [sympy.diff(expression, symbols[0], 6)]
    else:
        derivatives = [sympy.diff(expression, s) for s in symbols]
    if module == "numexpr":
        f = sympy.lambdify(symbols, derivatives, "numexpr")
    else:
        f = sympy.lambdify(symbols, derivatives, "numpy", cse=True)
    if case == "rosenbrock":
        return lambda X: [np.stack(f(*X.T), axis=-1)]
    return lambda *arrays: list(f(*arrays))


def jax_runner(case: str):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    fun = CASES[case][0]
    arity = ARITY[case]
    if case == "derivative6":
        h = lambda x: fun(jnp, x)  # noqa: E731
        for _ in range(6):
            h = jax.grad(h)
        g = jax.jit(jax.vmap(h))
    else:
        g = jax.jit(jax.vmap(jax.grad(lambda *a: fun(jnp, *a), argnums=tuple(range(arity)))))

    def run(*arrays):
        out = g(*arrays)
        jax.block_until_ready(out)
        return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]

    return run


def torch_runner(case: str):
    import torch

    fun = CASES[case][0]
    if case in ("rosenbrock", "derivative6"):
        raise NotImplementedError("only the four gradient cases are written for PyTorch")

    def run(*arrays):
        tensors = [torch.from_numpy(a).requires_grad_(True) for a in arrays]
        out = fun(torch, *tensors).sum()
        grads = torch.autograd.grad(out, tensors)
        return [g.numpy() for g in grads]

    return run


def available_peers() -> dict:
    peers = {f"symad {b}": (lambda case, b=b: symad_runner(case, b)) for b in sd.available_backends()}
    peers["sympy lambdify cse"] = lambda case: sympy_runner(case, "numpy")
    peers["sympy lambdify numexpr"] = lambda case: sympy_runner(case, "numexpr")
    try:
        import jax  # noqa: F401

        peers["jax jit(vmap(grad))"] = jax_runner
    except ImportError:
        pass
    try:
        import torch  # noqa: F401

        peers["torch eager"] = torch_runner
    except ImportError:
        pass
    return peers


# ---------------------------------------------------------------------------
# Memory: a fresh subprocess per figure
# ---------------------------------------------------------------------------

_MEMORY_CHILD = r"""
import sys, time, tracemalloc
sys.path.insert(0, {root!r})
import numpy as np, symad as sd
which, n, block = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if which == "derivative6":
    g = lambda x: np.exp(np.sin(x)) / (1 + x**2)
    F = sd.derivative(g, 6)
    F = F.trace(0.7) if hasattr(F, "trace") else F
    arrays = [np.linspace(-3, 3, n)]
else:
    f = lambda x, y: np.tanh(x*y)*np.exp(-y**2) + np.log(1+x**2) + np.sqrt(x+y)*np.cos(x-y)
    F = sd.grad(f, argnums=(0, 1)).trace(0.7, 0.7)
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(0.5, 2.0, n), rng.uniform(0.5, 2.0, n)]
options = {{}} if block == "default" else {{"block_size": int(block)}}
evaluate = F.compile("numexpr", **options)
evaluate(*[a[:10] for a in arrays])  # compile outside the measurement
tracemalloc.start()
start = time.perf_counter()
out = evaluate(*arrays)
seconds = time.perf_counter() - start
_, traced_peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
# VmHWM, not ru_maxrss: on Linux ru_maxrss survives exec and would report the parent's peak.
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
inputs = sum(a.nbytes for a in arrays)
outputs = sum(np.asarray(o).nbytes for o in (out if isinstance(out, tuple) else (out,)))
print(F.stats()["nodes"], seconds, traced_peak, peak * 1024, inputs, outputs)
"""


def memory_figure(which: str, n: int, block: str) -> dict:
    script = _MEMORY_CHILD.format(root=ROOT)
    result = subprocess.run([sys.executable, "-c", script, which, str(n), block],
                            capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1] if result.stderr else "failed"}
    nodes, seconds, traced, rss, inputs, outputs = result.stdout.split()
    return {"nodes": int(nodes), "seconds": float(seconds), "tracemalloc": int(traced),
            "peak_rss": int(rss), "inputs": int(inputs), "outputs": int(outputs)}


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def _geomean(values) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    if args.quick:
        args.points, args.reps, args.no_memory = 200_000, 3, True

    print(f"# symad evaluation benchmark — {datetime.date.today()}, {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}")
    print(f"# gradients w.r.t. all inputs (and a 6th derivative), {args.points:,} float64 points, median of {args.reps} "
          f"after a warm-up; symad threads: {sd.get_num_threads()}")
    peers = available_peers()
    table: dict = {}
    fastest: dict = {}  # each peer's fastest repetition: the least disturbed by other processes
    failures = 0
    for case in args.cases:
        arrays = points(case, args.points)
        runners, reference = {}, None
        for peer, make in peers.items():
            try:
                run = make(case)
                result = run(*arrays)  # warm-up (and compile)
            except Exception as error:  # a peer that cannot run this case is reported, not fatal
                table[case, peer] = None
                print(f"  {case:9s} {peer:24s} failed: {type(error).__name__}: {error}")
                continue
            runners[peer] = run
            if reference is None:
                reference = result
                continue
            # the logistic map is chaotic: rounding differences grow like 2**10; a 6th
            # derivative cancels terms of its largest magnitude
            rtol, atol = (1e-6, 1e-9) if case == "logistic" else (1e-9, 1e-12)
            if case == "derivative6":
                atol = 1e-11 * max(float(np.max(np.abs(w))) for w in reference)
            if len(result) != len(reference) or not all(
                    np.allclose(g, w, rtol=rtol, atol=atol) for g, w in zip(result, reference)):
                failures += 1
                print(f"  {case:9s} {peer:24s} DISAGREES with symad numexpr")
        # Round robin: every repetition times each peer once, so a noisy moment on a
        # shared machine hits all of them alike.
        times: dict = {peer: [] for peer in runners}
        for _ in range(args.reps):
            for peer, run in runners.items():
                start = time.perf_counter()
                run(*arrays)
                times[peer].append(time.perf_counter() - start)
        for peer, measured in times.items():
            table[case, peer] = statistics.median(measured)
            fastest[case, peer] = min(measured)

    jax_name = "jax jit(vmap(grad))"
    peer_names = list(peers)
    print()
    header = "| case | " + " | ".join(peer_names) + " |"
    print(header)
    print("|" + "---|" * (len(peer_names) + 1))
    for case in args.cases:
        cells = []
        for peer in peer_names:
            seconds = table.get((case, peer))
            cells.append("failed" if seconds is None else f"{seconds * 1e3:,.1f} ms")
        print(f"| {CASES[case][1]} | " + " | ".join(cells) + " |")

    if jax_name in peers:
        print()
        print("Ratios to JAX (time / JAX time; below 1 is faster than JAX):")
        print("| case | " + " | ".join(p for p in peer_names if p != jax_name) + " |")
        print("|" + "---|" * len(peer_names))
        ratios: dict = {p: [] for p in peer_names}
        for case in args.cases:
            jax_time = table.get((case, jax_name))
            cells = []
            for peer in peer_names:
                if peer == jax_name:
                    continue
                seconds = table.get((case, peer))
                if seconds is None or jax_time is None:
                    cells.append("—")
                    continue
                ratio = seconds / jax_time
                ratios[peer].append(ratio)
                cells.append(f"{ratio:.2f}")
            print(f"| {case} | " + " | ".join(cells) + " |")
        cells = []
        for peer in peer_names:
            if peer == jax_name:
                continue
            values = ratios[peer]
            cells.append(f"{math.exp(sum(map(math.log, values)) / len(values)):.2f}" if values else "—")
        print("| geometric mean | " + " | ".join(cells) + " |")
        cells = [f"{max(ratios[p]):.2f}" if ratios[p] else "—" for p in peer_names if p != jax_name]
        print("| worst | " + " | ".join(cells) + " |")

        # The figures of the brief: symad's fastest backend per case against JAX,
        # and the default backend against JAX and against SymPy's lambdify.
        symad_peers = [p for p in peer_names if p.startswith("symad ")]
        best = []
        print()
        print("Fastest symad backend per case, time / JAX time (target: at most 1.0 on every case):")
        for case in args.cases:
            jax_time = table.get((case, jax_name))
            timed = [(table[case, p], p) for p in symad_peers if table.get((case, p)) is not None]
            if jax_time is None or not timed:
                continue
            seconds, peer = min(timed)
            best.append(seconds / jax_time)
            print(f"  {case:12s} {seconds / jax_time:.2f} ({peer})")
        if best:
            print(f"  geometric mean {_geomean(best):.2f}, worst {max(best):.2f}")
        default = f"symad {sd.available_backends()[0]}"
        if ratios.get(default):
            print(f"Default ({default}): geometric mean {_geomean(ratios[default]):.2f} × JAX "
                  "(target: within 2)")
    default = f"symad {sd.available_backends()[0]}"
    if "logistic" in args.cases and table.get(("logistic", default)):
        for peer in ("sympy lambdify cse", "sympy lambdify numexpr"):
            if table.get(("logistic", peer)):
                print(f"Logistic map: {peer} / default = "
                      f"{table['logistic', peer] / table['logistic', default]:.1f}× (target: at least 5; "
                      f"fastest runs: {fastest['logistic', peer] / fastest['logistic', default]:.1f}×)")

    if not args.no_memory:
        print()
        print("Memory (fresh subprocess each; MB = 10^6 bytes):")
        print("tracemalloc counts what the evaluation call allocates (outputs + working set);")
        print("the ratio is (inputs + that peak) / (inputs + outputs). Peak RSS is the whole process.")
        print("| figure | nodes | time | tracemalloc peak of the call | inputs + outputs | ratio | process peak RSS |")
        print("|---|---|---|---|---|---|---|")
        for label, which, n, block in (
            ("6th derivative, 10^6 points, blocked (default)", "derivative6", 1_000_000, "default"),
            ("6th derivative, 10^6 points, one block", "derivative6", 1_000_000, "1000000"),
            ("mixed gradient, 10^7 points, blocked (default)", "mixed", 10_000_000, "default"),
        ):
            figure = memory_figure(which, n, block)
            if "error" in figure:
                print(f"| {label} | failed: {figure['error']} | | | | |")
                continue
            io = figure["inputs"] + figure["outputs"]
            ratio = (figure["inputs"] + figure["tracemalloc"]) / io
            print(f"| {label} | {figure['nodes']:,} | {figure['seconds']:.2f} s | "
                  f"{figure['tracemalloc'] / 1e6:,.0f} MB | {io / 1e6:,.0f} MB | {ratio:.2f}× | "
                  f"{figure['peak_rss'] / 1e6:,.0f} MB |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
