"""Formulas out (issue 8): how long exported LaTeX is, and how long ``latex()`` takes.

Two figures of the issue are measured here:

length
    The LaTeX of the 14-step logistic map's gradient against the function's
    own LaTeX (target: at most 3x), for the map as symad traces it from
    Python (``l = 4 * l * (1 - l)``) and for SymPy's tree of the same map
    imported with ``sd.from_sympy`` (SymPy flattens the products on the
    way, so that function is a different, quadratic-size program). For each
    also the number of lines (temporaries plus outputs).

time
    ``F.latex()`` against the size of the program, for the chain
    ``x = sin(x)·y + x/2`` repeated s times (4 nodes a step) and for its
    gradient (about 10 nodes a step): median wall-clock and CPU time of
    --reps calls (target: linear, 10^4 nodes under 2 s). The machine is
    shared: CPU time (``time.process_time``) is what the printer costs;
    wall-clock time also counts waiting for a core.

and, for the record, ``latex()`` of ``sd.derivative(g, n)`` for the n-th
derivative benchmark's ``g = exp(sin x) / (1 + x^2)`` (the issue saw
``derivative(g, 15)`` print 9 MB in 88 s).

Run from the project root::

    python benchmarks/formulas.py            # ~2 minutes on an idle 2-core machine
    python benchmarks/formulas.py --quick    # small sizes only, smoke test
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import sympy

PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

import symad as sd  # noqa: E402  (needs the sys.path line above)
from benchmarks.harness import format_table, machine_line  # noqa: E402

LOGISTIC_STEPS = 14
X0 = 0.3
FULL_STEPS = (625, 1250, 2500, 5000)  # 2,500 to 20,000 function nodes
QUICK_STEPS = (125, 250)


def logistic(l):
    for _ in range(LOGISTIC_STEPS):
        l = 4 * l * (1 - l)
    return l


def sympy_logistic_tree(symbol, steps):
    expr = symbol
    for _ in range(steps):
        expr = 4 * expr * (1 - expr)
    return expr


def length_rows() -> list[list[str]]:
    symbol = sympy.Symbol("l")
    imported = sd.from_sympy(sympy_logistic_tree(symbol, LOGISTIC_STEPS), [symbol], name="f")
    cases = [
        ("traced from Python", sd.trace(logistic, X0), sd.grad(logistic).trace(X0)),
        ("sd.from_sympy(SymPy tree)", imported, sd.grad(imported).trace(X0)),
    ]
    rows = []
    for label, function, gradient in cases:
        f_text, g_text = function.latex(), gradient.latex()
        assert np.isclose(float(gradient(X0)), float(sd.grad(logistic)(X0)), rtol=1e-9)
        rows.append([
            label, str(function.stats()["nodes"]), str(gradient.stats()["nodes"]),
            f"{len(f_text):,}", f"{len(g_text):,}", f"{len(g_text) / len(f_text):.2f}×",
            f"{f_text.count('&=')} / {g_text.count('&=')}",
        ])
    return rows


def chain(steps):
    def f(x, y):
        for _ in range(steps):
            x = np.sin(x) * y + 0.5 * x
        return x
    return f


def timed(function, repetitions: int) -> tuple[float, float, int]:
    walls, cpus = [], []
    for _ in range(repetitions):
        wall, cpu = time.perf_counter(), time.process_time()
        text = function.latex()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), len(text)


def time_rows(all_steps, repetitions: int) -> list[list[str]]:
    rows = []
    previous: dict[str, tuple[int, float]] = {}
    for steps in all_steps:
        programs = (("function", sd.trace(chain(steps), 0.1, 0.2)),
                    ("gradient", sd.grad(chain(steps), (0, 1)).trace(0.1, 0.2)))
        for kind, program in programs:
            nodes = len(program.graph.nodes)
            wall, cpu, characters = timed(program, repetitions)
            growth = "—"
            if kind in previous:
                last_nodes, last_cpu = previous[kind]
                growth = f"{cpu / last_cpu:.2f} for {nodes / last_nodes:.2f}× nodes"
            previous[kind] = (nodes, cpu)
            rows.append([f"{kind}, {steps:,} steps", f"{nodes:,}", f"{wall:.2f}", f"{cpu:.2f}",
                         f"{1e6 * cpu / nodes:.0f}", f"{characters:,}", growth])
    return rows


def g(x):
    """The n-th derivative benchmark's function (benchmarks/order.py)."""
    return np.exp(np.sin(x)) / (1 + x ** 2)


def derivative_rows(orders, repetitions: int) -> list[list[str]]:
    rows = []
    for order in orders:
        program = sd.derivative(g, order).trace(0.7)
        wall, cpu, characters = timed(program, repetitions)
        rows.append([f"derivative(g, {order})", f"{len(program.graph.nodes):,}", f"{wall:.2f}",
                     f"{cpu:.2f}", f"{characters:,}", str(program.latex().count("&="))])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (smoke test)")
    parser.add_argument("--reps", type=int, default=3, help="timed calls per program (median)")
    arguments = parser.parse_args(argv)
    print("symad formulas benchmark")
    print(machine_line() + ", load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    print()
    print(f"LaTeX length, {LOGISTIC_STEPS}-step logistic map l <- 4 l (1 - l) "
          "(target: gradient ≤ 3× function)")
    print(format_table(["program", "fn nodes", "grad nodes", "fn chars", "grad chars", "ratio",
                        "lines fn / grad"], length_rows()))
    print()
    print("latex() time against program size, chain x = sin(x)·y + x/2 "
          f"(median of {arguments.reps}; target: linear, 10^4 nodes under 2 s)")
    steps = QUICK_STEPS if arguments.quick else FULL_STEPS
    print(format_table(["program", "nodes", "wall s", "CPU s", "CPU µs/node", "characters",
                        "CPU growth"], time_rows(steps, arguments.reps)))
    print()
    print("derivative(g, n) of g = exp(sin x)/(1 + x^2): printed in 88 s (9 MB) before Taylor mode")
    orders = (4, 15) if arguments.quick else (4, 8, 15, 32)
    print(format_table(["program", "nodes", "wall s", "CPU s", "characters", "lines"],
                       derivative_rows(orders, arguments.reps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
