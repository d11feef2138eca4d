"""Array programs: symad beside JAX ``jit`` (and CasADi where it fits), in one run.

    python benchmarks/arrays.py                 # every case
    python benchmarks/arrays.py --cases sum mlp # some of them

Cases (issue 19, docs/benchmarks.md §"Array programs"):

* ``sum``: ``grad`` of ``np.sum(np.sin(x) * np.exp(-x**2))`` at 10^4, 10^5, 10^6 elements;
* ``mlp``: ``grad`` of a 784-128-10 tanh MLP's mean squared error, parameters in a dict,
  batch 256;
* ``grid``: ``grad`` of a 256x256 grid energy (differences + double well);
* ``sparse``: the sparse Hessian of the grid energy at 100x100 and 200x200 (CasADi SX's
  sparse Hessian beside it).

For each: the first call (trace + differentiate + compile + evaluate, a new function object
each repetition; JAX's includes XLA's compile) and the call again (compiled) once the
default backend's tier is settled (it starts with numexpr and moves to numba once the
function has spent numba's compile time and numba proved faster: symad.compile.tiers; the
table says after how many calls), the call again with numexpr alone, the ratios to JAX, the
gradient's node count, and symad's peak memory for the first call (tracemalloc:
what Python and NumPy allocate). Medians of at least 5 repetitions after a warm-up; the
machine line gives the load.
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
import typing

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from benchmarks.harness import (  # noqa: E402
    format_table,
    machine_line,
    time_repeatedly,
    versions_line,
)

REPETITIONS = 7


def _ratio(a, b) -> str:
    if a is None or b is None or a.median_s is None or b.median_s is None:
        return "—"
    return f"{a.median_s / b.median_s:.2f}"


def _ms(timing) -> str:
    return "—" if timing is None or timing.median_s is None else f"{timing.median_s * 1e3:,.2f}"


def _peak_mb(call) -> float:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


# -- the programs -------------------------------------------------------------------


def sum_energy(np_):
    return lambda x: np_.sum(np_.sin(x) * np_.exp(-x ** 2))


def mlp_loss(np_, data, targets):
    def loss(p):
        hidden = np_.tanh(data @ p["W1"] + p["b1"])
        return np_.mean((hidden @ p["W2"] + p["b2"] - targets) ** 2)
    return loss


def grid_energy(np_):
    def energy(u):
        return (np_.sum((u[1:, :] - u[:-1, :]) ** 2) + np_.sum((u[:, 1:] - u[:, :-1]) ** 2)
                + np_.sum((u ** 2 - 1) ** 2))
    return energy


def mlp_problem():
    rng = np.random.default_rng(0)
    data, targets = rng.normal(size=(256, 784)), rng.normal(size=(256, 10))
    params = {"W1": rng.normal(size=(784, 128)) * 0.05, "b1": np.zeros(128),
              "W2": rng.normal(size=(128, 10)) * 0.1, "b2": np.zeros(10)}
    return data, targets, params


# -- symad, JAX, CasADi -----------------------------------------------------------------


def symad_row(make_function, argument):
    """symad's figures for one case: the first call, the call again once ``F(...)``'s tier is
    settled (symad.compile.tiers: numexpr, then numba if it proved faster), how it settled,
    the call again with numexpr alone, the node count and the first call's peak memory."""
    import time

    import symad as sd

    first = time_repeatedly(lambda: sd.grad(make_function()), lambda g: g(argument), REPETITIONS)
    gradient = sd.grad(make_function())
    start, calls = time.perf_counter(), 0
    while True:  # the first calls, until the default backend's tier is settled
        gradient(argument)
        calls += 1
        promotion = gradient.trace(argument)._promotion
        if promotion is None or promotion.decided or time.perf_counter() - start > 300:
            break
    function = gradient.trace(argument)
    settled = f"{function.tier} after {calls} calls, {time.perf_counter() - start:.1f} s"
    again = time_repeatedly(lambda: gradient, lambda g: g(argument), REPETITIONS * 3)
    numexpr_alone = function.compile("numexpr")
    numexpr_again = time_repeatedly(lambda: numexpr_alone, lambda g: g(argument), REPETITIONS * 3)
    nodes = function.stats()["nodes"]
    peak = _peak_mb(lambda: sd.grad(make_function())(argument))
    return SymadRow(first, again, numexpr_again, settled, nodes, peak, gradient(argument))


class SymadRow(typing.NamedTuple):
    first: object
    again: object
    numexpr_again: object
    settled: str
    nodes: int
    peak: float
    value: object

    def cells(self, name, jax_first, jax_again, casadi="—"):
        """The table's row: symad beside JAX."""
        return [name, _ms(self.first), _ms(jax_first), _ratio(self.first, jax_first),
                _ms(self.again), _ms(jax_again), _ratio(self.again, jax_again), self.settled,
                _ms(self.numexpr_again), _ratio(self.numexpr_again, jax_again), str(self.nodes),
                f"{self.peak:.0f}", casadi]


def jax_row(make_function, argument):
    try:
        import jax
    except ImportError:
        return None, None, None
    jax.config.update("jax_enable_x64", True)

    def run(g):
        return jax.block_until_ready(g(argument))

    first = time_repeatedly(lambda: jax.jit(jax.grad(make_function())), run, REPETITIONS)
    compiled = jax.jit(jax.grad(make_function()))
    value = run(compiled)
    again = time_repeatedly(lambda: compiled, run, REPETITIONS * 3)
    return first, again, value


def casadi_sum(n):
    try:
        import casadi
    except ImportError:
        return None, None
    x_value = np.linspace(-2.0, 2.0, n)

    def build_and_evaluate(kind):
        x = kind.sym("x", n)
        energy = casadi.sum1(casadi.sin(x) * casadi.exp(-x ** 2))
        gradient = casadi.Function("g", [x], [casadi.gradient(energy, x)])
        return np.asarray(gradient(x_value)).ravel()

    sx = time_repeatedly(lambda: None, lambda _: build_and_evaluate(casadi.SX), REPETITIONS, budget_s=20)
    mx = time_repeatedly(lambda: None, lambda _: build_and_evaluate(casadi.MX), REPETITIONS, budget_s=20)
    return sx, mx


# -- cases -------------------------------------------------------------------------------


def case_sum(rows):
    import jax.numpy as jnp

    for n in (10 ** 4, 10 ** 5, 10 ** 6):
        x = np.linspace(-2.0, 2.0, n)
        row = symad_row(lambda: sum_energy(np), x)
        jfirst, jagain, jvalue = jax_row(lambda: sum_energy(jnp), x)
        assert np.allclose(row.value, jvalue, rtol=1e-12, atol=1e-15)
        sx, mx = casadi_sum(n) if n <= 10 ** 5 else (None, None)
        rows.append(row.cells(f"sum, {n:.0e}", jfirst, jagain,
                              f"SX {_ms(sx)} / MX {_ms(mx)}" if sx else "—"))


def case_mlp(rows):
    import jax.numpy as jnp

    data, targets, params = mlp_problem()
    row = symad_row(lambda: mlp_loss(np, data, targets), params)
    jfirst, jagain, jvalue = jax_row(lambda: mlp_loss(jnp, data, targets), params)
    assert all(np.allclose(row.value[k], jvalue[k], rtol=1e-10, atol=1e-14) for k in row.value)
    rows.append(row.cells("MLP 784-128-10, batch 256", jfirst, jagain))


def case_grid(rows):
    import jax.numpy as jnp

    u = np.random.default_rng(1).normal(size=(256, 256))
    row = symad_row(lambda: grid_energy(np), u)
    jfirst, jagain, jvalue = jax_row(lambda: grid_energy(jnp), u)
    assert np.allclose(row.value, jvalue, rtol=1e-12, atol=1e-12)
    rows.append(row.cells("grid energy 256x256", jfirst, jagain))


def case_sparse(rows):
    import symad as sd

    for n in (100, 200):
        u = np.random.default_rng(1).normal(size=(n, n))
        energy = grid_energy(np)
        first = time_repeatedly(lambda: sd.hessian(grid_energy(np), sparse=True),
                                lambda h, u=u: h(u), REPETITIONS, budget_s=30, step_limit_s=120)
        matrix = sd.hessian(energy, sparse=True)(u)
        casadi_timing = casadi_sparse_hessian(n, u) if n <= 100 else None
        rows.append([f"sparse Hessian {n}x{n} ({matrix.nnz:,} nnz)", _ms(first), "—", "—", "—", "—",
                     "—", "—", "—", "—", "—", "—",
                     f"SX {_ms(casadi_timing)} (ratio {_ratio(first, casadi_timing)})"
                     if casadi_timing else "—"])


def casadi_sparse_hessian(n, u_value):
    try:
        import casadi
    except ImportError:
        return None

    def build_and_evaluate(_):
        u = casadi.SX.sym("u", n, n)
        energy = (casadi.sum1(casadi.sum2((u[1:, :] - u[:-1, :]) ** 2))
                  + casadi.sum1(casadi.sum2((u[:, 1:] - u[:, :-1]) ** 2))
                  + casadi.sum1(casadi.sum2((u ** 2 - 1) ** 2)))
        flat = casadi.vec(u)
        hessian, _ = casadi.hessian(energy, flat)
        function = casadi.Function("h", [flat], [hessian])
        return function(u_value.ravel(order="F"))

    return time_repeatedly(lambda: None, build_and_evaluate, REPETITIONS, budget_s=30)


CASES = {"sum": case_sum, "mlp": case_mlp, "grid": case_grid, "sparse": case_sparse}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    arguments = parser.parse_args(argv)
    print(machine_line())
    print(versions_line(("jax", "casadi")))
    rows: list[list[str]] = []
    for name in arguments.cases:
        CASES[name](rows)
    header = ["case", "symad first ms", "JAX first ms", "ratio", "symad again ms", "JAX again ms",
              "ratio", "F(...) settled on", "numexpr alone again ms", "ratio", "nodes", "peak MB",
              "CasADi ms"]
    print(format_table(header, rows))


if __name__ == "__main__":
    main()
