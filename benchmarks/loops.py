"""Array programs compiled to loop nests (symad/loopnest/) beside JAX ``jit``.

Re-evaluation of compiled gradients, the arrays already traced and compiled:

* ``grid``:  gradient of the 256x256 grid energy
  E(u) = sum((u[1:,:]-u[:-1,:])**2) + sum((u[:,1:]-u[:,:-1])**2) + sum((u**2-1)**2)
* ``grid_value``: value and gradient of the same
* ``wave``: gradient of sum(sin(x) * exp(-x**2)) at 10^4, 10^5 and 10^6 elements
* ``mlp``: gradient of a 784-128-10 tanh MLP's mean squared error, parameters in a
  dict, batch 256

for symad's numba loop kernels (``F.compile("numba")``), symad's numexpr array
evaluator (the default backend) and JAX ``jit(grad(...))`` with x64 enabled,
float64, default threads (symad: both cores for kernels with enough work, see
``symad.compile.arrays.numba_loops.PARALLEL_MIN_WORK``; JAX: XLA's own choice).
Then the first call of each: trace + differentiate + compile + evaluate (numba
into an empty cache directory; JAX's jit).

Machines here are shared and noisy: each round calls every system once, in turn,
and a figure is the median over the rounds (after two warm-up calls each), so
a change of load hits all systems alike. Read the ratios. Run from the project
root::

    python benchmarks/loops.py            # about a minute
    python benchmarks/loops.py --rounds 60
    python benchmarks/loops.py --calls-to-speed   # the grid's default F(...), call by call

``--calls-to-speed``: the grid gradient's default ``F(...)`` (no backend named) timed call
by call in a new process, twice: with an empty disk cache (a machine that never compiled
it) and again (its kernel cached by the first process); JAX's jit beside it. The disk
cache is on here, in a temporary directory: it is what moves the default early
(symad.compile.tiers.early_trial).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import symad as sd  # noqa: E402
from benchmarks.harness import format_table, interleaved, machine_line, versions_line  # noqa: E402


def grid_energy(u, np=np):
    return np.sum((u[1:, :] - u[:-1, :]) ** 2) + np.sum((u[:, 1:] - u[:, :-1]) ** 2) + np.sum((u ** 2 - 1) ** 2)


def wave(x, np=np):
    return np.sum(np.sin(x) * np.exp(-x ** 2))


def mlp_loss(params, data, targets, np=np):
    hidden = np.tanh(data @ params["w1"] + params["b1"])
    return np.mean((hidden @ params["w2"] + params["b2"] - targets) ** 2)


def cases():
    rng = np.random.default_rng(0)
    data, targets = rng.normal(size=(256, 784)), rng.normal(size=(256, 10))
    params = {"w1": rng.normal(size=(784, 128)) * 0.05, "b1": np.zeros(128),
              "w2": rng.normal(size=(128, 10)) * 0.1, "b2": np.zeros(10)}
    found = [
        ("grid 256x256, grad", lambda u, np=np: grid_energy(u, np), "grad", rng.normal(size=(256, 256))),
        ("grid 256x256, value_and_grad", lambda u, np=np: grid_energy(u, np), "value_and_grad",
         rng.normal(size=(256, 256))),
    ]
    for n in (10 ** 4, 10 ** 5, 10 ** 6):
        found.append((f"wave 10^{len(str(n)) - 1}, grad", wave, "grad", rng.normal(size=n)))
    found.append(("mlp 784-128-10, batch 256, grad",
                  lambda p, np=np: mlp_loss(p, data, targets, np), "grad", params))
    return found


def symad_function(fun, kind, argument):
    transform = sd.grad if kind == "grad" else sd.value_and_grad
    return transform(fun).trace(argument)


def jax_function(fun, kind):
    import jax
    import jax.numpy as jnp

    transform = jax.grad if kind == "grad" else jax.value_and_grad
    compiled = jax.jit(transform(lambda a: fun(a, jnp)))
    return lambda a: jax.block_until_ready(compiled(a))


def first_calls(fun, kind, argument, jax_argument) -> dict:
    """Seconds for trace + differentiate + compile + one evaluation, from nothing."""
    import jax

    with tempfile.TemporaryDirectory() as cache:
        previous = os.environ.get("SYMAD_CACHE_DIR")
        os.environ["SYMAD_CACHE_DIR"] = cache
        try:
            start = time.perf_counter()
            symad_function(fun, kind, argument).compile("numba")(argument)
            numba_first = time.perf_counter() - start
        finally:
            if previous is None:
                del os.environ["SYMAD_CACHE_DIR"]
            else:
                os.environ["SYMAD_CACHE_DIR"] = previous
    start = time.perf_counter()
    symad_function(fun, kind, argument)(argument)
    numexpr_first = time.perf_counter() - start
    jax.clear_caches()
    start = time.perf_counter()
    jax_function(fun, kind)(jax_argument)
    jax_first = time.perf_counter() - start
    return {"numba": numba_first, "numexpr": numexpr_first, "jax": jax_first}


def default_calls(calls: int) -> list:
    """Seconds of each of the first ``calls`` default calls of the grid gradient (in this process)."""
    argument = np.random.default_rng(0).normal(size=(256, 256))
    times = []
    start = time.perf_counter()
    F = sd.grad(grid_energy).trace(argument)
    for _ in range(calls):
        F(argument)
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
    return [times, F.tier]


def calls_to_speed(calls: int = 30) -> None:
    """The grid's default calls in two new processes sharing an empty cache, beside JAX."""
    import json
    import subprocess

    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    argument = jnp.asarray(np.random.default_rng(0).normal(size=(256, 256)))
    jax_call = jax_function(grid_energy, "grad")
    jax_again = interleaved({"jax": functools.partial(jax_call, argument)}, 50)["jax"]
    print(f"JAX jit(grad) again: {jax_again * 1e3:.3f} ms; symad's default F(u), ms per call "
          "(the first includes the trace and the gradient)")
    with tempfile.TemporaryDirectory() as cache:
        environment = dict(os.environ, SYMAD_CACHE_DIR=cache, SYMAD_CACHE="1", SYMAD_PROMOTE="1")
        for session in ("empty cache", "kernel cached"):
            code = (f"import json, sys; sys.path.insert(0, {ROOT!r}); from benchmarks.loops import "
                    f"default_calls; print(json.dumps(default_calls({calls})))")
            done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                                  text=True, check=True)
            times, tier = json.loads(done.stdout.strip().splitlines()[-1])
            within = next((k + 1 for k, t in enumerate(times) if t <= 1.5 * jax_again), None)
            shown = ", ".join(f"{t * 1e3:.2f}" for t in times[:4])
            print(f"  {session:14} calls 1-4: {shown}; call 20: {times[19] * 1e3:.3f} ms "
                  f"({times[19] / jax_again:.2f}x JAX); within 1.5x JAX from call {within}; tier {tier}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds of calls per case (default 30)")
    parser.add_argument("--no-first-call", action="store_true", help="skip the first-call figures")
    parser.add_argument("--calls-to-speed", action="store_true",
                        help="the grid's default calls, call by call, in new processes")
    options = parser.parse_args()
    if options.calls_to_speed:
        print(machine_line())
        calls_to_speed()
        return
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    print(machine_line())
    print(versions_line(("jax", "numba", "numexpr")))
    print(f"re-evaluation, median of {options.rounds} interleaved rounds (ms); ratios to JAX jit")
    rows, first_rows = [], []
    for name, fun, kind, argument in cases():
        F = symad_function(fun, kind, argument)
        numba_call, numexpr_call = F.compile("numba"), F.compile("numexpr")
        assert numba_call.note == "", numba_call.note
        jax_argument = jax.tree_util.tree_map(jnp.asarray, argument)
        jax_call = jax_function(fun, kind)
        want = jax.tree_util.tree_leaves(jax_call(jax_argument))
        for got in (numba_call(argument), numexpr_call(argument)):
            for a, b in zip(jax.tree_util.tree_leaves(got), want):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)
        times = interleaved({"numba": functools.partial(numba_call, argument),
                             "numexpr": functools.partial(numexpr_call, argument),
                             "jax": functools.partial(jax_call, jax_argument)}, options.rounds)
        rows.append([name, *(f"{times[k] * 1e3:.3f}" for k in ("numba", "numexpr", "jax")),
                     f"{times['numba'] / times['jax']:.2f}", f"{times['numexpr'] / times['jax']:.2f}"])
        print(format_table(["case", "numba", "numexpr", "JAX", "numba/JAX", "numexpr/JAX"], rows[-1:]).splitlines()[-1],
              flush=True)
        if not options.no_first_call:
            first = first_calls(fun, kind, argument, jax_argument)
            first_rows.append([name, *(f"{first[k]:.2f}" for k in ("numba", "numexpr", "jax")),
                               f"{first['numba'] / first['jax']:.1f}"])
    print()
    print(format_table(["case", "numba", "numexpr", "JAX", "numba/JAX", "numexpr/JAX"], rows))
    if first_rows:
        print("\nfirst call: trace + differentiate + compile + evaluate (s); numba into an empty cache")
        print(format_table(["case", "symad numba", "symad numexpr", "JAX jit", "numba/JAX"], first_rows))


if __name__ == "__main__":
    main()
