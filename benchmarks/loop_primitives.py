"""Loops that stay loops (issue 30): the damped pendulum through ``sd.fori_loop``/``sd.scan``.

theta'' = -k sin(theta) - c theta', explicit Euler, dt = 1e-3, from (theta, omega) = (1, 0);
the gradient of the final theta with respect to (k, c) at (2, 0.3), as a parameter fit
calls it. Side by side in one run:

* symad ``sd.fori_loop(0, n, body, init)`` and ``sd.scan(step, init, length=n)``;
* JAX ``jit(grad)`` over ``lax.fori_loop`` (x64);
* CasADi SX, the same plain Python loop on SX symbols, ``gradient`` then ``Function``.

Figures: the first call (trace or build + differentiate + compile + one evaluation, in a
fresh process each, imports excluded, symad with an empty cache directory), the call
again (median of interleaved rounds), the graph's size at 10 and 10^6 steps, the peak
memory and time of a gradient under each reverse-mode schedule (every carry stored,
``"sqrt"``, binomial with 10 and 30 snapshots; tracemalloc, in a fresh process each) for
the pendulum at 10^6 steps and for a heat equation's 10^4 steps on 1,000 points, the
pendulum by ``sd.while_loop`` (its kernel, NumPy per step, JAX), a batch of 1,000 points (symad's batch against ``jit(vmap(grad))``), and
the size of the gradient's LaTeX. Run from the project root::

    python benchmarks/loop_primitives.py              # about a minute
    python benchmarks/loop_primitives.py --rounds 60
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.harness import interleaved  # noqa: E402

STEPS = 10_000
DT = 1e-3
POINT = (2.0, 0.3)


# -- the pendulum, four ways -----------------------------------------------------------


def symad_fori(n=STEPS, checkpoints=None):
    import symad as sd

    def pendulum(k, c):
        def body(i, state):
            theta, omega = state
            return (theta + DT * omega, omega + DT * (-k * np.sin(theta) - c * omega))
        return sd.fori_loop(0, n, body, (1.0, 0.0), checkpoints=checkpoints)[0]
    return sd.grad(pendulum, argnums=(0, 1)), pendulum


def symad_scan(n=STEPS):
    import symad as sd

    def pendulum(k, c):
        def step(state, _):
            theta, omega = state
            return (theta + DT * omega, omega + DT * (-k * np.sin(theta) - c * omega)), None
        return sd.scan(step, (1.0, 0.0), length=n)[0][0]
    return sd.grad(pendulum, argnums=(0, 1)), pendulum


def jax_fori(n=STEPS):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    def pendulum(params):
        k, c = params[0], params[1]

        def body(i, state):
            theta, omega = state
            return (theta + DT * omega, omega + DT * (-k * jnp.sin(theta) - c * omega))
        return jax.lax.fori_loop(0, n, body, (1.0, 0.0))[0]
    gradient = jax.jit(jax.grad(pendulum))
    return lambda k, c: jax.block_until_ready(gradient(jnp.array([k, c])))


def casadi_sx(n=STEPS):
    import casadi

    k, c = casadi.SX.sym("k"), casadi.SX.sym("c")
    theta, omega = 1.0, 0.0
    for _ in range(n):
        theta, omega = theta + DT * omega, omega + DT * (-k * casadi.sin(theta) - c * omega)
    params = casadi.vertcat(k, c)
    gradient = casadi.Function("g", [params], [casadi.gradient(theta, params)])
    return lambda k_, c_: gradient([k_, c_])


SYSTEMS = {
    "symad fori_loop": lambda: symad_fori()[0],
    "symad scan": lambda: symad_scan()[0],
    "JAX jit(grad), lax.fori_loop": jax_fori,
    "CasADi SX, Python loop": casadi_sx,
}


# -- measurements in a fresh process ----------------------------------------------------


def _child(task: str) -> dict:
    """Run one measurement in this process (called as ``--child TASK``)."""
    import tracemalloc

    if task.startswith("first:"):
        name = task[len("first:"):]
        if name.startswith("symad"):
            import symad  # noqa: F401  (imports are not part of the first call)
        elif name.startswith("JAX"):
            import jax  # noqa: F401
        else:
            import casadi  # noqa: F401
        start = time.perf_counter()
        SYSTEMS[name]()(*POINT)
        return {"seconds": time.perf_counter() - start}
    _, program, schedule = task.split(":")
    checkpoints = SCHEDULES[schedule]
    if program == "pendulum":
        gradient, point = symad_fori(10 ** 6, checkpoints)[0], POINT
    else:
        gradient, point = heat_gradient(checkpoints), (0.2,)
    start = time.perf_counter()
    gradient(*point)  # traced and compiled: the evaluation's time and memory are measured
    first = time.perf_counter() - start
    start = time.perf_counter()
    gradient(*point)
    seconds = time.perf_counter() - start  # without tracemalloc, which slows allocations
    tracemalloc.start()
    value = gradient(*point)
    peak = tracemalloc.get_traced_memory()[1]
    return {"peak_mb": peak / 1e6, "seconds": seconds, "first": first,
            "value": np.asarray(value, dtype=float).reshape(-1).tolist()}


#: The reverse-mode schedules the memory figures compare, by name (a child process is told
#: a name, never an expression).
SCHEDULES = {"none": None, "sqrt": "sqrt", "binomial10": ("binomial", 10),
             "binomial30": ("binomial", 30)}


def heat_gradient(checkpoints, n=10_000, points=1000):
    """d/dkappa of sum(u_n^2), u the explicit heat equation on ``points`` grid points (reflecting
    ends) for ``n`` steps: a state of 1,000 numbers, whose trajectory takes 80 MB."""
    import symad as sd

    x = np.linspace(0.0, 1.0, points)
    u0 = np.exp(-100.0 * (x - 0.5) ** 2)

    def energy(kappa):
        def body(i, u):
            laplacian = np.concatenate([u[1:2] - u[:1], u[2:] - 2.0 * u[1:-1] + u[:-2],
                                        u[-2:-1] - u[-1:]])
            return u + kappa * laplacian
        return np.sum(sd.fori_loop(0, n, body, u0, checkpoints=checkpoints) ** 2)
    return sd.grad(energy)


def in_fresh_process(task: str, cache: str | None = None) -> dict:
    """``task`` in a new process: with an empty cache directory, or with ``cache`` kept on."""
    environment = dict(os.environ, SYMAD_CACHE="0" if cache is None else "1", SYMAD_PROMOTE="0",
                       PYTHONPATH=ROOT)
    with tempfile.TemporaryDirectory() as empty:
        environment["SYMAD_CACHE_DIR"] = cache or empty
        out = subprocess.run([sys.executable, __file__, "--child", task], env=environment,
                             capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm_first_call(name: str) -> float:
    """The first call in a new process once another process filled the cache directory."""
    with tempfile.TemporaryDirectory() as cache:
        in_fresh_process(f"first:{name}", cache)
        return in_fresh_process(f"first:{name}", cache)["seconds"]


def _batch_figures(rounds: int) -> tuple[float, float]:
    import jax
    import jax.numpy as jnp

    import symad as sd

    gradient, pendulum = symad_fori()
    traced = gradient.trace(*POINT)
    ks = np.linspace(1.5, 2.5, 1000)
    jax_grad = jax.jit(jax.vmap(jax.grad(lambda p: _jax_pendulum(p, jnp, jax))))
    points = jnp.stack([jnp.asarray(ks), jnp.full(1000, 0.3)], axis=1)
    times = interleaved({"symad": lambda: traced(ks, 0.3),
                         "jax": lambda: jax.block_until_ready(jax_grad(points))}, max(3, rounds // 5))
    del sd
    return times["symad"], times["jax"]


def _jax_pendulum(params, jnp, jax):
    k, c = params[0], params[1]

    def body(i, state):
        theta, omega = state
        return (theta + DT * omega, omega + DT * (-k * jnp.sin(theta) - c * omega))
    return jax.lax.fori_loop(0, STEPS, body, (1.0, 0.0))[0]


def _while_figures(rounds: int) -> None:
    """The pendulum integrated until t = 10 by ``sd.while_loop`` (10^4 steps), its value and
    its forward-mode derivative in k: the compiled kernel, the body's NumPy evaluator once per
    step, and JAX's ``jit`` over ``lax.while_loop``, side by side."""
    import jax
    import jax.numpy as jnp

    import symad as sd
    from benchmarks.harness import format_table
    from symad.loops import evaluation

    def pendulum(k, np_=np, loop=None):
        def body(s):
            t, theta, omega = s
            return (t + DT, theta + DT * omega, omega + DT * (-k * np_.sin(theta) - 0.3 * omega))
        return (loop or sd.while_loop)(lambda s: s[0] < 10.0, body, (0.0, 1.0, 0.0))[1]

    made = {"symad, compiled kernel": (sd.trace(pendulum, 2.0), sd.jacfwd(pendulum).trace(2.0))}
    jax_value = jax.jit(lambda k: pendulum(k, jnp, jax.lax.while_loop))
    jax_tangent = jax.jit(jax.jacfwd(lambda k: pendulum(k, jnp, jax.lax.while_loop)))
    made["JAX jit, lax.while_loop"] = (lambda k: jax_value(k).block_until_ready(),
                                       lambda k: jax_tangent(k).block_until_ready())
    calls = {}
    for name, (value, tangent) in made.items():
        value(2.0), tangent(2.0)
        calls[f"{name}|value"] = functools.partial(value, 2.0)
        calls[f"{name}|tangent"] = functools.partial(tangent, 2.0)
    times = interleaved(calls, max(3, rounds // 10))
    # The evaluation the kernels replace (the body's NumPy evaluator once per step), timed
    # apart: a call takes about a second.
    kept, evaluation.compiled_while = evaluation.compiled_while, lambda *arguments: None
    try:
        slow = "symad, NumPy per step"
        for which, function in (("value", made["symad, compiled kernel"][0]),
                                ("tangent", made["symad, compiled kernel"][1])):
            start = time.perf_counter()
            function(2.0)
            times[f"{slow}|{which}"] = time.perf_counter() - start
        made[slow] = None
    finally:
        evaluation.compiled_while = kept
    jax_name = "JAX jit, lax.while_loop"
    rows = [[name, f"{times[name + '|value'] * 1e3:.3f} ms", f"{times[name + '|tangent'] * 1e3:.3f} ms",
             f"{times[name + '|tangent'] / times[jax_name + '|tangent']:.2f}x"] for name in made]
    print("pendulum until t = 10 by while_loop (10^4 steps), at one point:")
    print(format_table(["", "value", "d/dk (jacfwd)", "d/dk / JAX"], rows))


def _memory_figures() -> None:
    """Peak memory and time of a gradient under each schedule, each in a fresh process: the
    pendulum at 10^6 steps (a state of two numbers) and a heat equation's 10^4 steps on
    1,000 points."""
    from benchmarks.harness import format_table

    for program, title in (("pendulum", "pendulum, 10^6 steps"),
                           ("heat", "heat equation, 1,000 points, 10^4 steps")):
        rows, reference = [], None
        for name, checkpoints in SCHEDULES.items():
            figures = in_fresh_process(f"memory:{program}:{name}")
            reference = reference or figures["value"]
            difference = max(abs(a - b) / max(abs(b), 1e-300)
                             for a, b in zip(figures["value"], reference))
            rows.append([repr(checkpoints), f"{figures['peak_mb']:.2f} MB",
                         f"{figures['first']:.2f} s", f"{figures['seconds'] * 1e3:.0f} ms",
                         f"{difference:.0e}"])
        print(f"gradient of the {title}, by schedule:")
        print(format_table(["checkpoints=", "peak (tracemalloc)", "first call", "again",
                            "rel. difference to stored"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds of calls (default 30)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(_child(options.child)))
        return
    os.environ.setdefault("SYMAD_CACHE", "0")
    os.environ.setdefault("SYMAD_PROMOTE", "0")
    import symad as sd
    from benchmarks.harness import format_table, machine_line, versions_line

    print(machine_line())
    print(versions_line(("casadi", "jax")))
    print(f"pendulum, explicit Euler, {STEPS} steps, gradient of the final angle w.r.t. (k, c)")
    first = {name: in_fresh_process(f"first:{name}")["seconds"] for name in SYSTEMS}
    made = {name: make() for name, make in SYSTEMS.items()}
    calls = {name: functools.partial(gradient, *POINT) for name, gradient in made.items()}
    again = interleaved(calls, options.rounds)
    casadi_again = again["CasADi SX, Python loop"]
    rows = [[name, f"{first[name]:.2f} s", f"{again[name] * 1e3:.3f} ms",
             f"{again[name] / casadi_again:.2f}x"] for name in SYSTEMS]
    print(format_table(["", "first call", "called again", "again / CasADi"], rows))

    print(f"symad fori_loop, first call in a new process with the disk cache warm: "
          f"{warm_first_call('symad fori_loop'):.2f} s")
    gradient = symad_fori()[0]
    values = [np.asarray(calls[name](), dtype=float).reshape(-1) for name in SYSTEMS]
    spread = max(float(np.max(np.abs(v - values[-1]))) for v in values)
    print(f"largest difference between the systems' gradients: {spread:.1e}")
    sizes = {n: symad_fori(n)[0].trace(*POINT).stats()["nodes"] for n in (10, 10 ** 6)}
    print(f"symad gradient graph: {sizes[10]} nodes at 10 steps, {sizes[10 ** 6]} at 10^6 steps")
    _memory_figures()
    _while_figures(options.rounds)
    symad_batch, jax_batch = _batch_figures(options.rounds)
    print(f"1,000 points at once: symad {symad_batch * 1e3:.1f} ms, JAX jit(vmap(grad)) "
          f"{jax_batch * 1e3:.1f} ms ({symad_batch / jax_batch:.2f}x)")
    latex = gradient.trace(*POINT).latex()
    print(f"LaTeX of the gradient: {len(latex)} characters")
    del sd


if __name__ == "__main__":
    main()
