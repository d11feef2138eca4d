"""A damped pendulum integrated by explicit Euler, its gradient at one point (issue 30).

theta'' = -k sin(theta) - c theta', dt = 1e-3, ``--steps`` steps (default 10^4) from
(theta, omega) = (1, 0); the gradient of the final theta w.r.t. (k, c) at (2, 0.3), as a
parameter fit calls it: one point, again and again. Side by side in one run:

* CasADi SX, the same plain Python loop (unrolled; CasADi's SX virtual machine);
* JAX ``jit(grad)`` over ``lax.fori_loop`` (float64);
* symad, the plain Python loop (unrolled), ``sd.grad(f, argnums=(0, 1))`` called with
  the default backend (which picks the tape for such a graph: symad.compile.tiers), and
  again with promotion off (``SYMAD_PROMOTE=0``: numexpr, the path before the tape);
* symad, ``sd.fori_loop(0, n, body, init)`` -- "not available" where symad has none.

Each system runs in its own Python process: "first call" is building the derivative
(trace or expression, differentiate, compile) and one evaluation, after the imports;
"again" the median of ``--repeats`` later calls; "peak" the process's ``ru_maxrss``, and
beside it what the imports alone took (symad imports SymPy, and its tape numba). The
gradients of all systems are printed and must agree.

``--batches``: symad's tape against its numexpr evaluator on batches of 1 to 256
points (where the default's cost model moves from one to the other).

Run from the project root::

    python benchmarks/pendulum.py                 # about a minute
    python benchmarks/pendulum.py --steps 1000 --repeats 200
    python benchmarks/pendulum.py --batches
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DT, K, C, THETA0 = 1e-3, 2.0, 0.3, 1.0
SYSTEMS = ("casadi", "jax", "symad", "symad_numexpr", "symad_fori")
LABELS = {"casadi": "CasADi SX, the same Python loop",
          "jax": "JAX jit(grad) over lax.fori_loop",
          "symad": "symad, the Python loop (default: the tape)",
          "symad_numexpr": "symad, the Python loop, SYMAD_PROMOTE=0",
          "symad_fori": "symad, sd.fori_loop"}
#: Each system's environment beside the caller's: promotion off keeps symad's default in
#: numexpr, the path every call took before the tape backend (issue 30).
ENVIRONMENTS = {"symad_numexpr": {"SYMAD_PROMOTE": "0"}}


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def euler_step(theta, omega, k, c, sin):
    return theta + DT * omega, omega + DT * (-k * sin(theta) - c * omega)


def final_theta(k, c, steps, sin):
    theta, omega = THETA0, 0.0
    for _ in range(steps):
        theta, omega = euler_step(theta, omega, k, c, sin)
    return theta


def build_casadi(steps):
    import casadi as ca

    k, c = ca.SX.sym("k"), ca.SX.sym("c")
    gradient = ca.gradient(final_theta(k, c, steps, ca.sin), ca.vertcat(k, c))
    function = ca.Function("g", [k, c], [gradient])
    return lambda: [float(v) for v in function(K, C).full().ravel()]


def build_jax(steps):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    def final(parameters):
        k, c = parameters[0], parameters[1]
        body = lambda i, carry: euler_step(carry[0], carry[1], k, c, jnp.sin)  # noqa: E731
        return jax.lax.fori_loop(0, steps, body, (jnp.float64(THETA0), jnp.float64(0.0)))[0]

    gradient = jax.jit(jax.grad(final))
    point = jnp.array([K, C])
    return lambda: [float(v) for v in jax.block_until_ready(gradient(point))]


def build_symad(steps):
    import numpy as np

    import symad as sd

    gradient = sd.grad(lambda k, c: final_theta(k, c, steps, np.sin), argnums=(0, 1))
    return lambda: [float(v) for v in gradient(K, C)]


def build_symad_fori(steps):
    import numpy as np

    import symad as sd

    if not hasattr(sd, "fori_loop"):
        return None

    def final(k, c):
        body = lambda i, carry: euler_step(carry[0], carry[1], k, c, np.sin)  # noqa: E731
        return sd.fori_loop(0, steps, body, (THETA0, 0.0))[0]

    gradient = sd.grad(final, argnums=(0, 1))
    return lambda: [float(v) for v in gradient(K, C)]


def worker(system: str, steps: int, repeats: int) -> dict:
    """Imports, then the first call and the repeats, in this process."""
    import numpy  # noqa: F401

    if system == "casadi":
        import casadi  # noqa: F401
    elif system == "jax":
        import jax  # noqa: F401
    else:
        import symad  # noqa: F401
    imports = peak_mb()
    start = time.perf_counter()
    build = {"casadi": build_casadi, "jax": build_jax, "symad": build_symad,
             "symad_numexpr": build_symad, "symad_fori": build_symad_fori}[system]
    call = build(steps)
    if call is None:
        return {"available": False}
    value = call()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return {"available": True, "first": first, "again": statistics.median(times),
            "peak": peak_mb(), "imports": imports, "gradient": value}


def run_worker(system: str, steps: int, repeats: int) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--worker", system, "--steps", str(steps),
               "--repeats", str(repeats)]
    environment = dict(os.environ, **ENVIRONMENTS.get(system, {}))
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=environment)
    if done.returncode != 0:
        return {"available": False, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def batches(steps: int, repeats: int) -> None:
    """symad's tape against its numexpr evaluator on batches of points."""
    import numpy as np

    import symad as sd

    F = sd.grad(lambda k, c: final_theta(k, c, steps, np.sin), argnums=(0, 1)).trace(K, C)
    compiled = {backend: F.compile(backend) for backend in ("tape", "numexpr")}
    print(f"{len(F.graph.nodes):,} nodes; ms per call (median of {repeats}), tape / numexpr")
    for points in (1, 4, 16, 64, 128, 256):
        k, c = np.full(points, K), np.full(points, C)
        row = {}
        for backend, call in compiled.items():
            call(k, c)
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                call(k, c)
                samples.append(time.perf_counter() - start)
            row[backend] = statistics.median(samples) * 1e3
        print(f"{points:>5} points: tape {row['tape']:8.2f}  numexpr {row['numexpr']:8.2f}  "
              f"ratio {row['tape'] / row['numexpr']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000, help="Euler steps (default 10^4)")
    parser.add_argument("--repeats", type=int, default=50, help="calls timed after the first")
    parser.add_argument("--batches", action="store_true", help="tape against numexpr on batches")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        print(json.dumps(worker(options.worker, options.steps, options.repeats)))
        return
    if options.batches:
        batches(options.steps, max(3, options.repeats // 10))
        return
    from benchmarks.harness import machine_line, versions_line

    print(machine_line())
    print(versions_line(("casadi", "jax", "numba", "numexpr")))
    print(f"damped pendulum, explicit Euler, {options.steps:,} steps; gradient of the final angle "
          f"w.r.t. (k, c) at ({K}, {C}); each system in its own process")
    results = {system: run_worker(system, options.steps, options.repeats) for system in SYSTEMS}
    reference = results["casadi"].get("again")
    print(f"{'':44} {'first call':>11} {'again':>10} {'vs CasADi':>9} {'peak MB':>8} "
          f"{'imports MB':>10}  gradient")
    for system, result in results.items():
        if not result.get("available"):
            why = result.get("error") or ["not available"]
            print(f"{LABELS[system]:44} {why[0][:70]}")
            continue
        ratio = f"{result['again'] / reference:.1f}x" if reference else "-"
        print(f"{LABELS[system]:44} {result['first']:10.2f}s {result['again'] * 1e3:8.3f}ms "
              f"{ratio:>9} {result['peak']:8.0f} {result['imports']:10.0f}  "
              f"({result['gradient'][0]:.12g}, {result['gradient'][1]:.12g})")


if __name__ == "__main__":
    main()
