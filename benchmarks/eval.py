"""Benchmark 2 of the project's benchmark brief: evaluating compiled derivatives, and their memory.

On 2,000,000 float64 points (``--points``), six cases:

* ``simple``:   gradient of log(x) + x*y - sin(y)
* ``mixed``:    gradient of tanh(x*y) * exp(-y**2) + log(1 + x**2) + sqrt(x + y) * cos(x - y)
* ``logistic``: d/dl0 of the logistic map l <- 4 l (1 - l), 10 iterations
* ``gauss``:    gradient of exp(-(x**2 + 2 y**2 + z**2)/2 + x*y/4) * (1 + x*y*z) / (1 + x**2 + y**2*z**2)
* ``rosenbrock``: gradient of the 6-D Rosenbrock function under vmap (a (points, 6) batch)
* ``derivative6``: the 6th derivative of exp(sin x) / (1 + x**2)

and the cases of issue 20 (graphs a new user tries; 10**6 points, the MLP 10**5 samples):

* ``tanh_erf20``: the 20th derivative of tanh(x) * erf(x) (633 nodes, a special function)
* ``expsin24``: the 24th derivative of exp(sin x) / (1 + x**2)
* ``rational30``: the 30th derivative of (1 + 2x + x**3) / (1 + x**2 + x**4 / 2)
* ``mlp``: the per-sample gradient of an 8-32-1 MLP's squared error w.r.t. its 321
  parameters, under vmap (804 nodes; JAX: ``jit(vmap(grad, in_axes=(None, 0, 0)))``)

Side by side in one run, each the median of --reps repetitions after one warm-up:

* symad's default, ``F(...)`` of the traced function (``F = sd.grad(f,
  argnums=...).trace(...)``, ``sd.derivative(g, n).trace(...)``), timed once its
  tier is settled: it starts with numexpr and moves to numba once it has spent
  numba's compile time and numba proved faster (symad.compile.tiers); the
  first call repeats until then, and the table says after how many calls;
* symad with every backend available here (numexpr, the default's first tier;
  numpy; numba), each through ``F.compile(backend)``;
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

With ``--threads``, each backend that uses threads (numexpr, numba) with 1 and
with 2 threads, round-robin; with ``--cache``, the first call (compile and
1,000 points) in a new process with an empty on-disk module cache, then in
another with the entry the first left (imports, tracing and the libraries' own
start -- BLAS's and numexpr's first calls, numba's first compile -- timed apart),
then the same calls split into their compile part (what the cache saves) and
their first evaluation, with its page faults and the time to write the results
into memory fresh from the kernel (what no cache can save); ``--calibrate``
measures the costs per element behind symad.compile.scalar.numexpr_backend.COST_NS.

Machines are shared and noisy: read the ratios (symad / JAX) measured in the
same run. Run from the project root::

    python benchmarks/eval.py                       # everything, several minutes
    python benchmarks/eval.py --threads --cache     # and the threads and cache tables
    python benchmarks/eval.py --quick               # 200,000 points, 3 reps, no memory part
"""

from __future__ import annotations

import argparse
import datetime
import functools
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


def tanh_erf(m, x):
    return m.tanh(x) * m.erf(x)


def rational(m, x):
    return (1 + 2 * x + x**3) / (1 + x * x + 0.5 * x**4)


#: The cases of issue 20 (graphs a new user tries): n-th derivatives by Taylor mode, a
#: special function, and the per-sample gradient of an 8-32-1 MLP's loss under vmap.
HIGH_ORDER = {"tanh_erf20": (tanh_erf, 20), "expsin24": (g, 24), "rational30": (rational, 30)}
MLP_SIZES = (8, 32)

CASES = {
    "simple": (simple, "log(x) + x*y − sin(y)"),
    "mixed": (mixed, "tanh(xy)·e^{−y²} + log(1+x²) + √(x+y)·cos(x−y)"),
    "logistic": (logistic, "logistic map, 10 iterations"),
    "gauss": (gauss, "3-variable Gaussian × rational"),
    "rosenbrock": (rosenbrock, "6-D Rosenbrock gradient under vmap"),
    "derivative6": (g, "6th derivative of exp(sin x)/(1+x²)"),
    "tanh_erf20": (tanh_erf, "20th derivative of tanh(x)·erf(x)"),
    "expsin24": (g, "24th derivative of exp(sin x)/(1+x²)"),
    "rational30": (rational, "30th derivative of (1+2x+x³)/(1+x²+x⁴/2)"),
    "mlp": (None, "per-sample gradient of an 8-32-1 MLP's loss under vmap"),
}
ARITY = {"simple": 2, "mixed": 2, "logistic": 1, "gauss": 3, "rosenbrock": 1, "derivative6": 1,
         "tanh_erf20": 1, "expsin24": 1, "rational30": 1, "mlp": 3}
#: The four gradients of the table before issue 20 (the JAX figures are about these).
GRADIENTS = ("simple", "mixed", "logistic", "gauss")
#: Points for the cases of issue 20 (its figures are at 10^6 points, the MLP at 10^5 samples).
POINTS = {"tanh_erf20": 1_000_000, "expsin24": 1_000_000, "rational30": 1_000_000, "mlp": 100_000}


def mlp_params(rng=None):
    rng = np.random.default_rng(5) if rng is None else rng
    inputs, hidden = MLP_SIZES
    return {"w1": rng.standard_normal((inputs, hidden)) / 3, "b1": rng.standard_normal(hidden) / 3,
            "w2": rng.standard_normal(hidden) / 6, "b2": np.array(0.1)}


def mlp_loss(m, params, x, y):
    h = m.tanh(x @ params["w1"] + params["b1"])
    return (h @ params["w2"] + params["b2"] - y) ** 2


class _NumpyErf:  # np with SciPy's erf, as the graphs are traced
    def __getattr__(self, name):
        import scipy.special

        return scipy.special.erf if name == "erf" else getattr(np, name)


NP = _NumpyErf()


def traced(case: str):
    """The symad Function of ``case`` (the evaluator is ``.compile(backend)`` of it)."""
    fun = CASES[case][0]
    if case in HIGH_ORDER:
        base, order = HIGH_ORDER[case]
        return sd.derivative(lambda x: base(NP, x), order).trace(0.7)
    if case == "mlp":
        return sd.grad(lambda p, x, y: mlp_loss(NP, p, x, y)).trace(
            mlp_params(), np.zeros(MLP_SIZES[0]), 0.0)
    if case == "derivative6":
        return sd.derivative(lambda x: fun(NP, x), 6).trace(0.7)
    if case == "rosenbrock":
        return sd.grad(lambda v: fun(NP, v)).trace(np.full(6, 0.7))
    arity = ARITY[case]
    return sd.grad(lambda *a: fun(NP, *a), argnums=tuple(range(arity))).trace(*([0.7] * arity))


def points(case: str, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    n = POINTS.get(case, n)
    if case == "mlp":
        return [rng.standard_normal((n, MLP_SIZES[0])), rng.standard_normal(n)]
    if case in HIGH_ORDER:
        return [rng.uniform(-2.0, 2.0, n)]
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


def symad_runner(case: str, backend: str, num_threads: int | None = None):
    fun = CASES[case][0]
    arity = ARITY[case]

    def f(*a):
        return fun(np, *a)

    if case in HIGH_ORDER or case == "mlp" or num_threads is not None:
        evaluator = traced(case).compile(backend, num_threads=num_threads)
        params = mlp_params()

        def run_traced(*arrays):
            out = evaluator(params, *arrays) if case == "mlp" else evaluator(*arrays)
            leaves = [out[k] for k in sorted(out)] if isinstance(out, dict) else out
            return list(leaves) if isinstance(leaves, (tuple, list)) else [leaves]

        return run_traced
    if case == "derivative6":
        evaluator = sd.derivative(f, 6).trace(0.7).compile(backend)
    elif case == "rosenbrock":
        evaluator = sd.grad(f).trace(np.full(6, 0.7)).compile(backend)
    else:
        evaluator = sd.grad(f, argnums=tuple(range(arity))).trace(*([0.7] * arity)).compile(backend)

    def run(*arrays):
        out = evaluator(*arrays)
        return list(out) if isinstance(out, tuple) else [out]

    return run


#: How ``F(...)`` settled per case: (its tier, calls and seconds until it settled).
SETTLED: dict = {}


def symad_default_runner(case: str):
    """``F(...)`` itself: the default backend, numexpr then numba once the function is hot
    (symad.compile.tiers). Its first call repeats until the tier is settled, so the timed
    calls are its steady state; how long that took is in ``SETTLED``."""
    function = traced(case)
    params = mlp_params()

    def call(arrays):
        out = function(params, *arrays) if case == "mlp" else function(*arrays)
        leaves = [out[k] for k in sorted(out)] if isinstance(out, dict) else out
        return list(leaves) if isinstance(leaves, (tuple, list)) else [leaves]

    def run(*arrays):
        if case not in SETTLED:
            start, calls = time.perf_counter(), 0
            while True:
                result = call(arrays)
                calls += 1
                promotion = function._promotion
                if promotion is None or promotion.decided or time.perf_counter() - start > 300:
                    break
            SETTLED[case] = (function.tier, calls, time.perf_counter() - start)
            return result
        return call(arrays)

    return run


def sympy_runner(case: str, module: str):
    import sympy

    if case in HIGH_ORDER or case == "mlp":
        raise NotImplementedError("sympy.diff of a 20th-30th derivative or of the MLP is not timed")

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
    if case in HIGH_ORDER:
        raise NotImplementedError("20-30 nested jax.grad do not compile in reasonable time")
    if case == "mlp":
        params = jax.tree_util.tree_map(jnp.asarray, mlp_params())
        gradient = jax.jit(jax.vmap(jax.grad(lambda p, x, y: mlp_loss(jnp, p, x, y)),
                                    in_axes=(None, 0, 0)))

        def run_mlp(x, y):
            out = gradient(params, x, y)
            jax.block_until_ready(out)
            return [np.asarray(out[k]) for k in sorted(out)]

        return run_mlp
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
    if case not in GRADIENTS:
        raise NotImplementedError("only the four gradient cases are written for PyTorch")

    def run(*arrays):
        tensors = [torch.from_numpy(a).requires_grad_(True) for a in arrays]
        out = fun(torch, *tensors).sum()
        grads = torch.autograd.grad(out, tensors)
        return [g.numpy() for g in grads]

    return run


def available_peers() -> dict:
    peers = {"symad default": symad_default_runner}
    peers.update({f"symad {b}": (lambda case, b=b: symad_runner(case, b)) for b in sd.available_backends()})
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
# Threads, and first calls with a cold and a warm cache
# ---------------------------------------------------------------------------


def round_robin(runners: dict, arrays: list, reps: int) -> dict:
    """Seconds of each of ``runners`` on ``arrays``, ``reps`` times: every repetition times
    each once, so a noisy moment on a shared machine hits all of them alike. Each repetition
    takes the systems in a new order (shuffled, seeded: the same in every run), so no system
    always runs right after the same other one. JAX's and OpenBLAS's threads keep spinning
    for a while after a call and slow whatever comes next: with the order only rotated, the
    MLP's numexpr column ran after JAX in most repetitions and read 92 ms there against
    77 ms after numba (helper's measurement, 2026-11-25)."""
    import random

    order = random.Random(20)
    times: dict = {key: [] for key in runners}
    keys = list(runners)
    for _ in range(reps):
        order.shuffle(keys)
        for key in keys:
            start = time.perf_counter()
            runners[key](*arrays)
            times[key].append(time.perf_counter() - start)
    return times


def thread_scaling(args) -> None:
    """Each symad backend that uses threads, on each case, with 1 and with 2 threads:
    round-robin in one run, median of --reps."""
    print()
    print("Threads: time with 1 thread ÷ time with 2 (target: at least 1.6 for the default backend "
          "on a 10^6-point high-order derivative); the machine's other load is in the header:")
    backends = [b for b in sd.available_backends() if b != "numpy"]
    print("| case | " + " | ".join(f"{b} 1 thread | {b} 2 threads | {b} speed-up" for b in backends) + " |")
    print("|---|" + "---|---|---|" * len(backends))
    for case in args.cases:
        arrays = points(case, args.points)
        runs = {(b, k): symad_runner(case, b, num_threads=k) for b in backends for k in (1, 2)}
        for run in runs.values():
            run(*arrays)
        times = round_robin(runs, arrays, args.reps)
        cells = []
        for b in backends:
            one, two = statistics.median(times[b, 1]), statistics.median(times[b, 2])
            cells += [f"{one * 1e3:,.1f} ms", f"{two * 1e3:,.1f} ms", f"{one / two:.2f}"]
        print(f"| {case} | " + " | ".join(cells) + " |")


_FIRST_CALL_CHILD = r"""
import mmap, resource, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {benchmarks!r})
import numpy as np, numexpr, symad as sd
import symad.compile.scalar.numexpr_backend, symad.compile.scalar.numpy_backend, symad.compile.scalar.levels
import symad.compile.disk_cache, symad.compile.progress, symad.compile.evaluator, symad.compile.arrays.lowering, platformdirs
if {backend!r} == "numba":
    import numba, symad.compile.scalar.numba_backend
import eval as bench
F = bench.traced({case!r})
arrays = [a[:1000] for a in bench.points({case!r}, 1000)]
params = bench.mlp_params()
def timed(call):
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
# The libraries' own start in a new process, not what the cache can save: BLAS's and
# einsum's first calls, numexpr's first call on its threads (which starts them), and
# numba's first compile, which loads its NumPy support.
started = time.perf_counter()
np.einsum("ij,jk->ik", np.ones((64, 8)), np.ones((8, 32)))
np.ones((64, 8)) @ np.ones((8, 32))
numexpr.evaluate("a * 2.0", local_dict={{"a": np.ones(1 << 18)}})
if {backend!r} == "numba":
    numba.njit(lambda v: v + 1.0)(1.0)
startup = time.perf_counter() - started
run = (lambda: evaluate(params, *arrays)) if {case!r} == "mlp" else (lambda: evaluate(*arrays))
start = time.perf_counter()
evaluate = F.compile({backend!r})
compiled = time.perf_counter()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
run()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
first = time.perf_counter()
steady = min(timed(run) for _ in range(5))  # the same evaluation once this process's memory is in use
def leaves(tree):
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in leaves(tree[key])]
    return [leaf for item in tree for leaf in leaves(item)] if isinstance(tree, (tuple, list)) else [tree]
# The floor no cache can lower: the results' bytes written into memory fresh from the kernel,
# as a new process's first evaluation writes them.
fresh = mmap.mmap(-1, max(8, sum(np.asarray(leaf).nbytes for leaf in leaves(run()))))
floor = timed(lambda: np.frombuffer(fresh, np.float64).fill(1.0))
print(first - start, startup, compiled - start, first - compiled, steady, faults, floor,
      evaluate.note.replace(" ", "_") or "-")
"""


def cache_first_calls(args) -> None:
    """The first call (compile + evaluation at 1,000 points) in a new process, with an empty
    cache and then with the entry the first process left; imports and tracing not counted.

    The call is also split: its compile part (lowering and compiling, or loading the cached
    entry: what the cache can save) and its first evaluation, beside the same evaluation
    again in that process and the minor page faults of the first (its fresh memory, which
    every new process pays and no cache can save)."""
    import tempfile

    print()
    print("First call in a new process (compile and evaluate 1,000 points; imports, tracing and "
          "the libraries' own start excluded), cold cache then warm cache (target: warm at most "
          "20 % of cold); the libraries' start in each process (BLAS's and numexpr's first calls; "
          "numba's first compile, which loads its NumPy support) is its own column, and the last "
          "column counts it:")
    print("| case | backend | cold | warm | warm ÷ cold | libraries' start (cold, warm) | "
          "warm ÷ cold with it | note |")
    print("|---|---|---|---|---|---|---|---|")
    parts = []
    for case in args.cases:
        for backend in sd.available_backends():
            with tempfile.TemporaryDirectory() as directory:
                script = _FIRST_CALL_CHILD.format(root=ROOT, benchmarks=os.path.dirname(__file__),
                                                  backend=backend, case=case)
                env = dict(os.environ, SYMAD_CACHE="1", SYMAD_CACHE_DIR=directory)
                runs, note = [], "-"
                for _ in range(2):
                    result = subprocess.run([sys.executable, "-c", script], capture_output=True,
                                            text=True, env=env, timeout=1800)
                    if result.returncode != 0:
                        runs.append([math.nan] * 7)
                        note = result.stderr.strip().splitlines()[-1][:60]
                        continue
                    *values, note = result.stdout.split()
                    runs.append([float(value) for value in values])
            cold, warm = runs
            print(f"| {case} | {backend} | {cold[0]:.3f} s | {warm[0]:.3f} s | {warm[0] / cold[0]:.0%} | "
                  f"{cold[1]:.3f} s, {warm[1]:.3f} s | "
                  f"{(warm[0] + warm[1]) / (cold[0] + cold[1]):.0%} | {note.replace('_', ' ')} |")
            parts.append((case, backend, cold, warm))
    print()
    print("The same first calls split: the compile part (lowering and compiling, or loading the "
          "cached entry: what the cache can save; numba compiles its kernels at their first call, "
          "so its first evaluation holds its compile), then the first evaluation of 1,000 points, "
          "the same evaluation again in that process (best of 5), the first one's minor page "
          "faults, and the results' bytes written into memory fresh from the kernel (what every "
          "new process pays, no cache can save) as a share of the cold first call:")
    print("| case | backend | compile cold | compile warm | warm ÷ cold | first evaluation "
          "(cold, warm) | again | page faults (cold, warm) | results into fresh memory | "
          "÷ cold first call |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case, backend, cold, warm in parts:
        print(f"| {case} | {backend} | {cold[2] * 1e3:.2f} ms | {warm[2] * 1e3:.2f} ms | "
              f"{warm[2] / cold[2]:.0%} | {cold[3] * 1e3:.2f} ms, {warm[3] * 1e3:.2f} ms | "
              f"{min(cold[4], warm[4]) * 1e3:.2f} ms | {cold[5]:.0f}, {warm[5]:.0f} | "
              f"{min(cold[6], warm[6]) * 1e3:.2f} ms | {min(cold[6], warm[6]) / cold[0]:.0%} |")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def calibrate() -> None:
    """Nanoseconds per float64 element of each function in numexpr's machine and in NumPy:
    one thread, 2^16 points (a cached block), the first quartile of 200 calls."""
    import numexpr

    from symad.compile.scalar.numexpr_backend import numexpr_form
    from symad.compile.scalar.program import Instruction
    from symad.primitives import PRIMITIVES

    numexpr.set_num_threads(1)
    n = 1 << 16
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n)
    out = np.empty(n)

    def per_element(call) -> float:
        call()
        samples = []
        for _ in range(200):
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        return sorted(samples)[len(samples) // 4] / n * 1e9

    # Every primitive with a measured cost (its stanza's cost_ns), by its own numexpr
    # spelling and its own NumPy implementation.
    print("name | numexpr ns | numpy ns | in the table")
    for name, primitive in PRIMITIVES.items():
        if primitive.cost_ns is None:
            continue
        count = 2 if primitive.variadic else primitive.arity
        instruction = Instruction(count, primitive, tuple(range(count)), (), False)
        text = numexpr_form(instruction)(["a", "b"][:count])
        x = a + 1.0 if name == "arccosh" else a
        operands = (x, b)[:count]
        program = numexpr.NumExpr(text, signature=[("a", np.float64), ("b", np.float64)][:count])
        in_numexpr = per_element(functools.partial(program, *operands, out=out, ex_uses_vml=False))
        implementation = primitive.numpy_impl
        if isinstance(implementation, np.ufunc):
            implementation = functools.partial(implementation, out=out)
        in_numpy = per_element(functools.partial(implementation, *operands))
        print(f"{name} | {in_numexpr:.2f} | {in_numpy:.2f} | {primitive.cost_ns}")
    print(f"copy | - | {per_element(lambda: np.copyto(out, a)):.2f} | PASS_NS")


def _geomean(values) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--threads", action="store_true",
                        help="also time each threaded backend with 1 and with 2 threads")
    parser.add_argument("--cache", action="store_true",
                        help="also time first calls in new processes, cold and warm cache")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure numexpr's and NumPy's cost per element of each function "
                             "(the primitives' cost_ns, symad.compile.scalar.numexpr_backend.COST_NS) "
                             "and stop")
    args = parser.parse_args()
    if args.calibrate:
        calibrate()
        return 0
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
            if case == "derivative6" or case in HIGH_ORDER:
                atol = (1e-11 if case == "derivative6" else 1e-9) * max(
                    float(np.max(np.abs(w))) for w in reference)
            if len(result) != len(reference) or not all(
                    np.allclose(g, w, rtol=rtol, atol=atol) for g, w in zip(result, reference)):
                failures += 1
                print(f"  {case:9s} {peer:24s} DISAGREES with {next(iter(runners))}")
        times = round_robin(runners, arrays, args.reps)
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
        default = "symad default"
        if ratios.get(default):
            print(f"Default ({default}): geometric mean {_geomean(ratios[default]):.2f} × JAX "
                  "(target: within 2)")
    default = "symad default"
    if "logistic" in args.cases and table.get(("logistic", default)):
        for peer in ("sympy lambdify cse", "sympy lambdify numexpr"):
            if table.get(("logistic", peer)):
                print(f"Logistic map: {peer} / default = "
                      f"{table['logistic', peer] / table['logistic', default]:.1f}× (target: at least 5; "
                      f"fastest runs: {fastest['logistic', peer] / fastest['logistic', default]:.1f}×)")

    if "numpy" in sd.available_backends():
        default, first_tier, reference = "symad default", "symad numexpr", "symad numpy"
        print()
        print("The default backend, F(...) once its tier is settled, against the numpy backend "
              "(target: at most 1.25) and numba (target: within 3), same run; then its first tier, "
              "numexpr, alone; and how the default settled (symad.compile.tiers):")
        for case in args.cases:
            mine, numpy_time = table.get((case, default)), table.get((case, reference))
            numba_time, numexpr_time = table.get((case, "symad numba")), table.get((case, first_tier))
            if mine and numpy_time:
                versus_numba = f", {mine / numba_time:.2f}× numba" if numba_time else ""
                alone = (f"; numexpr alone {numexpr_time / numpy_time:.2f}× numpy"
                         + (f", {numexpr_time / numba_time:.2f}× numba" if numba_time else "")
                         if numexpr_time else "")
                tier, calls, seconds = SETTLED.get(case, ("?", 0, 0.0))
                # The fastest repetitions too: a case that writes hundreds of MB of fresh
                # results a call (the MLP) varies by tens of percent with the kernel's paging.
                least_disturbed = fastest[case, default] / fastest[case, reference]
                print(f"  {case:12s} {mine / numpy_time:.2f}× numpy (fastest runs "
                      f"{least_disturbed:.2f}×){versus_numba}{alone}; "
                      f"settled on {tier} after {calls} calls, {seconds:.1f} s")
        if jax_name in peers:
            ratios = [table[c, default] / table[c, jax_name] for c in GRADIENTS
                      if table.get((c, default)) and table.get((c, jax_name))]
            if ratios:
                print(f"  the four gradients: default {_geomean(ratios):.2f}× JAX (geometric mean; "
                      "target: within 1.5)")

    if args.threads:
        thread_scaling(args)
    if args.cache:
        cache_first_calls(args)

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
