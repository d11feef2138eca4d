"""Benchmark 3 of BENCHMARKS.md: n-th derivatives, built and evaluated.

The test case is ``g(x) = exp(sin x) / (1 + x**2)`` and its n-th derivative
at x = 0.7, *built and evaluated* (a fresh Python function every repetition,
so no cache helps):

symad
    ``sd.derivative(g, n)(0.7)``: tracing, the Taylor-mode sweep, compiling
    the evaluator and one evaluation; the node count of the derivative graph
    (``.trace(0.7).stats()["nodes"]``) gives the growth curve.

peers, side by side in the same run (each if importable)
    * ``sympy.diff(g, x, n)`` evaluated with ``evalf`` at 0.7 (SymPy's cache
      cleared before every repetition);
    * SymEngine ``diff`` n times, evaluated with ``subs``;
    * CasADi: ``ca.gradient`` nested n times on ``SX``, wrapped in a
      ``ca.Function`` and called; its ``n_nodes``;
    * JAX: ``jax.grad`` nested n times under ``jax.jit``, compiled and called
      (float64). JAX's compile time grows about 8x per order, so it runs
      only while one step stays under the step limit.

Every value is checked against mpmath's Taylor expansion at 60 digits.

Run from the project root::

    python benchmarks/nth_derivative.py          # n = 2 ... 64, about a minute and a half
    python benchmarks/nth_derivative.py --quick  # n in (4, 8, 12)

The exit status is 1 if a symad value is off by more than 1e-12 relative.
"""

from __future__ import annotations

import argparse
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

POINT = 0.7
FULL_ORDERS = (2, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64)
QUICK_ORDERS = (4, 8, 12)
PEER_MAX_ORDER = {"sympy": 12, "symengine": 16, "casadi": 12, "jax": 8}
STEP_LIMIT_S = 30.0
CASE_BUDGET_S = 5.0
RTOL = 1e-12


def make_g():
    """A new Python function object each time, so that no per-function cache can help."""

    def g(x):
        return np.exp(np.sin(x)) / (1 + x**2)

    return g


def exact_derivative(n: int) -> float:
    with mpmath.workdps(60):
        coefficients = mpmath.taylor(lambda t: mpmath.exp(mpmath.sin(t)) / (1 + t**2), mpmath.mpf(POINT), n)
        return float(coefficients[n] * mpmath.factorial(n))


def timed(run, repetitions: int) -> tuple[Timing, object]:
    """Median time of ``run()`` (fresh state each time) and its last result."""
    holder = {}

    def run_and_keep(_):
        holder["value"] = run()

    timing = time_repeatedly(lambda: None, run_and_keep, repetitions, warmup=False,
                             budget_s=CASE_BUDGET_S, step_limit_s=STEP_LIMIT_S)
    return timing, holder.get("value")


# --------------------------------------------------------------------------
# The contenders
# --------------------------------------------------------------------------


def symad_case(n: int, repetitions: int):
    timing, value = timed(lambda: float(sd.derivative(make_g(), n)(POINT)), repetitions)
    nodes = sd.derivative(make_g(), n).trace(POINT).stats()["nodes"]
    return timing, value, nodes


def sympy_case(n: int, repetitions: int):
    x = sympy.Symbol("x")

    def run():
        sympy.core.cache.clear_cache()
        derivative = sympy.diff(sympy.exp(sympy.sin(x)) / (1 + x**2), x, n)
        return float(derivative.evalf(20, subs={x: sympy.Float(POINT)}))

    timing, value = timed(run, repetitions)
    return timing, value, None


def symengine_case(n: int, repetitions: int):
    import symengine as se

    x = se.Symbol("x")

    def run():
        derivative = se.exp(se.sin(x)) / (1 + x**2)
        for _ in range(n):
            derivative = se.diff(derivative, x)
        return float(derivative.subs({x: POINT}))

    timing, value = timed(run, repetitions)
    return timing, value, None


def casadi_case(n: int, repetitions: int):
    import casadi as ca

    def build():
        x = ca.SX.sym("x")
        derivative = ca.exp(ca.sin(x)) / (1 + x**2)
        for _ in range(n):
            derivative = ca.gradient(derivative, x)
        return ca.Function("d", [x], [derivative])

    timing, value = timed(lambda: float(build()(POINT)), repetitions)
    return timing, value, build().n_nodes()


def jax_case(n: int, repetitions: int):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    def run():
        derivative = lambda t: jnp.exp(jnp.sin(t)) / (1 + t**2)  # noqa: E731
        for _ in range(n):
            derivative = jax.grad(derivative)
        return float(jax.jit(derivative)(POINT))

    timing, value = timed(run, repetitions)
    return timing, value, None


PEERS = {"sympy": sympy_case, "symengine": symengine_case, "casadi": casadi_case, "jax": jax_case}


def available_peers() -> list[str]:
    names = ["sympy"]
    for name in ("symengine", "casadi", "jax"):
        try:
            __import__(name)
            names.append(name)
        except ImportError:
            print(f"(peer {name} not installed: pip install -e '.[bench]')")
    return names


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="orders 4, 8, 12 only")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per case (median)")
    arguments = parser.parse_args(argv)
    orders = QUICK_ORDERS if arguments.quick else FULL_ORDERS
    peers = available_peers()
    started = time.perf_counter()
    print(f"n-th derivative of exp(sin x)/(1+x^2) at {POINT}, built and evaluated; {machine_line()}")
    print(f"median of up to {arguments.reps} repetitions (ms); step limit {STEP_LIMIT_S:.0f} s\n")

    header = ["n", "symad nodes", "symad ms", *(f"{peer} ms" for peer in peers),
              "casadi nodes" if "casadi" in peers else "", "symad rel. error"]
    header = [cell for cell in header if cell]
    rows, failures, stopped = [], [], set()
    for n in orders:
        exact = exact_derivative(n)
        timing, value, nodes = symad_case(n, arguments.reps)
        error = abs(value - exact) / abs(exact)
        if not error <= RTOL:
            failures.append(n)
        row = [str(n), f"{nodes:,}", format_ms(timing, STEP_LIMIT_S)]
        casadi_nodes = NO_VALUE
        for peer in peers:
            if n > PEER_MAX_ORDER[peer] or peer in stopped:
                row.append(NO_VALUE)
                continue
            peer_timing, peer_value, peer_nodes = PEERS[peer](n, arguments.reps)
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
        if "casadi" in peers:
            row.append(casadi_nodes)
        row.append(f"{error:.1e}")
        rows.append(row)
        print(f"  n={n} done", file=sys.stderr)
    print(format_table(header, rows))
    print("\n(peer ms (Nx): the peer's time and its ratio to symad's; — not run: past the order where "
          "the previous one took a third of the step limit, or past the table of BENCHMARKS.md)")
    node_counts = [int(row[1].replace(",", "")) for row in rows]
    if len(orders) >= 3:
        a, b, c = np.polyfit(orders, node_counts, 2)
        print(f"growth: nodes ≈ {a:.2f}·n² + {b:.1f}·n + {c:.0f} (quadratic fit over n = {orders[0]}…{orders[-1]})")
    print(f"total benchmark time {time.perf_counter() - started:.1f} s")
    if failures:
        print(f"symad values off by more than {RTOL} at n = {failures}")
        return 1
    print(f"correctness: every symad value within {RTOL} of mpmath's 60-digit value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
