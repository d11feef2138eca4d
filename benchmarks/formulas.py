"""Formulas out (issues 8 and 21): how short exported LaTeX is, and how long ``latex()`` takes.

The figures measured here:

corpus (issue 21)
    The gradient and the Hessian of each textbook function of
    ``benchmarks/formula_corpus.py`` as ``F.latex()`` prints them, against
    ``sympy.latex(sympy.simplify(sympy.diff(...)))`` for every entry: characters
    without whitespace and output labels (a temporary's ``t_{1} =`` counts),
    the ratio (target: at most 1.3), temporaries, number style, and the median
    CPU time of ``latex()``.

length
    The LaTeX of the 14-step logistic map's gradient against the function's
    own LaTeX (target: at most 3x): ``x <- r x (1 - x)`` w.r.t. both x and r
    (issue 21), and ``l = 4 l (1 - l)`` traced from Python and as SymPy's tree
    imported with ``sd.from_sympy`` (issue 8). For each also the number of lines.

time
    ``F.latex()`` against the size of the program, for the chain
    ``x = sin(x)·y + x/2`` repeated s times (4 nodes a step) and for its
    gradient (about 10 nodes a step): median wall-clock and CPU time of
    --reps calls (target: linear, 10^4 nodes under 2 s), with the display
    simplifier (the default) and without (``simplify=False``) for the
    10^4-node gradient. The machine is shared: CPU time (``time.process_time``)
    is what the printer costs; wall-clock time also counts waiting for a core.

and, for the record, ``latex()`` of ``sd.derivative(g, n)`` for the n-th
derivative benchmark's ``g = exp(sin x) / (1 + x^2)`` (the issue saw
``derivative(g, 15)`` print 9 MB in 88 s), and how many of the special functions
docs/special-functions.md lists ``symad diff`` accepts.

Run from the project root::

    python benchmarks/formulas.py            # ~3 minutes on an idle 2-core machine
    python benchmarks/formulas.py --quick    # small sizes only, smoke test
"""

from __future__ import annotations

import argparse
import os
import re
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
from benchmarks import formula_corpus  # noqa: E402
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


def logistic_map(x, r):
    for _ in range(LOGISTIC_STEPS):
        x = r * x * (1 - x)
    return x


def length_rows() -> list[list[str]]:
    symbol = sympy.Symbol("l")
    imported = sd.from_sympy(sympy_logistic_tree(symbol, LOGISTIC_STEPS), [symbol], name="f")
    cases = [
        ("x <- r x (1 - x), d/dx and d/dr", sd.trace(logistic_map, X0, 3.7),
         sd.grad(logistic_map, (0, 1)).trace(X0, 3.7)),
        ("l <- 4 l (1 - l), traced from Python", sd.trace(logistic, X0), sd.grad(logistic).trace(X0)),
        ("l <- 4 l (1 - l), sd.from_sympy(SymPy tree)", imported, sd.grad(imported).trace(X0)),
    ]
    rows = []
    for label, function, gradient in cases:
        f_text, g_text = function.latex(), gradient.latex()
        point = (X0, 3.7) if len(function.graph.inputs) == 2 else (X0,)
        np.testing.assert_allclose(np.ravel(gradient(*point)),
                                   np.ravel(sd.grad(function, tuple(range(len(point))))(*point)),
                                   rtol=1e-9)
        rows.append([
            label, str(function.stats()["nodes"]), str(gradient.stats()["nodes"]),
            f"{len(f_text):,}", f"{len(g_text):,}", f"{len(g_text) / len(f_text):.2f}×",
            f"{f_text.count('&=')} / {g_text.count('&=')}",
        ])
    return rows


def corpus_rows(repetitions: int) -> tuple[list[list[str]], float]:
    """One row per corpus block, and the largest ratio."""
    rows, worst = [], 0.0
    for function, point in formula_corpus.CORPUS:
        for kind, transform in (("gradient", sd.grad), ("Hessian", sd.hessian)):
            program = transform(function, tuple(range(len(point)))).trace(*point)
            cpus = []
            for _ in range(repetitions):
                cpu = time.process_time()
                text = program.latex()
                cpus.append(time.process_time() - cpu)
            decimals = bool(re.search(r"\d\.\d", text))
            reference = formula_corpus.reference_length(formula_corpus.sympy_reference(
                function, point, kind.lower(), exact=not decimals))
            length = formula_corpus.block_length(text)
            worst = max(worst, length / reference)
            temporaries = sum(formula_corpus.is_temporary(label)
                              for label, _ in formula_corpus.block_lines(text))
            rows.append([function.__name__.replace("_", " "), kind, f"{length:,}", f"{reference:,}",
                         f"{length / reference:.2f}", str(temporaries),
                         "decimals" if decimals else "fractions",
                         f"{1e3 * statistics.median(cpus):.0f}"])
    return rows, worst


def special_function_row() -> str:
    """How many of the special functions docs/special-functions.md lists ``symad diff`` accepts."""
    import contextlib
    import io

    from symad.cli import ARITY, main

    names = formula_corpus.special_functions_listed(
        (PROJECT_ROOT / "docs" / "special-functions.md").read_text())
    accepted = []
    for name in sorted(names):
        fewest = ARITY.get(name, (1, 1))[0]
        call = f"{name}({', '.join(['2'] * (fewest - 1) + ['x'])})"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if main(["diff", call, "--wrt", "x"]) == 0:
                accepted.append(name)
    missing = sorted(names - set(accepted))
    return (f"symad diff accepts {len(accepted)} of the {len(names)} functions the table of "
            f"docs/special-functions.md lists" + (f" (not: {', '.join(missing)})" if missing else ""))


def timed(function, repetitions: int, **options) -> tuple[float, float, int]:
    walls, cpus = [], []
    for _ in range(repetitions):
        wall, cpu = time.perf_counter(), time.process_time()
        text = function.latex(**options)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), len(text)


def time_rows(all_steps, repetitions: int) -> list[list[str]]:
    rows = []
    previous: dict[str, tuple[int, float]] = {}
    for steps in all_steps:
        programs = (("function", sd.trace(formula_corpus.chain(steps), 0.1, 0.2)),
                    ("gradient", sd.grad(formula_corpus.chain(steps), (0, 1)).trace(0.1, 0.2)))
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


def gradient_10k_rows(repetitions: int) -> list[list[str]]:
    """``latex()`` of a gradient of about 10^4 nodes, with and without the display simplifier."""
    program = sd.grad(formula_corpus.chain(1000), (0, 1)).trace(0.1, 0.2)
    rows = []
    for label, options in (("simplify=True (default)", {}), ("simplify=False", {"simplify": False})):
        wall, cpu, characters = timed(program, repetitions, **options)
        rows.append([label, f"{len(program.graph.nodes):,}", f"{wall:.2f}", f"{cpu:.2f}",
                     f"{characters:,}"])
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
    print("Corpus: gradient and Hessian blocks against sympy.latex(sympy.simplify(sympy.diff(...))), "
          "characters without whitespace and output labels (target: ratio ≤ 1.3)")
    rows, worst = corpus_rows(1 if arguments.quick else arguments.reps)
    print(format_table(["function", "block", "symad", "SymPy simplified", "ratio", "temporaries",
                        "numbers", "latex() CPU ms"], rows))
    print(f"largest ratio: {worst:.2f}")
    print()
    print(special_function_row())
    print()
    print(f"LaTeX length, {LOGISTIC_STEPS}-step logistic map (target: gradient ≤ 3× function)")
    print(format_table(["program", "fn nodes", "grad nodes", "fn chars", "grad chars", "ratio",
                        "lines fn / grad"], length_rows()))
    print()
    print("latex() time against program size, chain x = sin(x)·y + x/2 "
          f"(median of {arguments.reps}; target: linear, 10^4 nodes under 2 s)")
    steps = QUICK_STEPS if arguments.quick else FULL_STEPS
    print(format_table(["program", "nodes", "wall s", "CPU s", "CPU µs/node", "characters",
                        "CPU growth"], time_rows(steps, arguments.reps)))
    print()
    print(f"latex() of the 1,000-step chain's gradient (median of {arguments.reps}; target: under 2 s)")
    print(format_table(["latex()", "nodes", "wall s", "CPU s", "characters"],
                       gradient_10k_rows(arguments.reps)))
    print()
    print("derivative(g, n) of g = exp(sin x)/(1 + x^2): printed in 88 s (9 MB) before Taylor mode")
    orders = (4, 15) if arguments.quick else (4, 8, 15, 32)
    print(format_table(["program", "nodes", "wall s", "CPU s", "characters", "lines"],
                       derivative_rows(orders, arguments.reps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
