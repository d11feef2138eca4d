"""Sparse Hessians of array programs by graph colouring, beside CasADi, in one run.

The case of issue 19: the grid energy ``E(u) = sum((u[1:,:] - u[:-1,:])**2)
+ sum((u[:,1:] - u[:,:-1])**2) + sum((u**2 - 1)**2)`` of an ``n x n`` array
``u``, whose Hessian is the 5-point stencil: ``n^2 + 4 n (n - 1)`` structural
non-zeros (49,600 at n = 100, 199,200 at n = 200).

Contenders, each *built and evaluated* from the Python function (a fresh
function every repetition, so no cache helps), median of ``--reps`` after a
warm-up:

* symad: ``sd.hessian(E, sparse=True)(u)`` -- traced as 16 array nodes, the
  gradient's sparsity propagated through them (no unrolling), star colouring,
  one forward sweep of the colours' seeds over the gradient graph, compiled
  and evaluated; a ``scipy.sparse.csr_matrix``;
* CasADi ``SX`` (scalar nodes): ``ca.hessian`` of the same expression over a
  vector of ``n^2`` symbols, wrapped in a ``ca.Function`` and called;
* CasADi ``MX`` (matrix nodes), the same (``--mx``; slow at n = 200).

Also: symad's stages once (trace and gradient, pattern, colouring, sweep,
compile, evaluate), and the colouring step beside ``networkx.greedy_color``
on the same column intersection graph (why symad colours with its own few
lines). Every Hessian is checked: symad's non-zeros equal CasADi's values and
the analytic ``2 L + diag(12 u^2 - 4)`` (``L`` the grid's Laplacian), with
exactly the structural count.

Run: ``python -m benchmarks.sparse`` (``--sizes 100 200``, ``--reps 5``).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import scipy.sparse

import symad as sd
from benchmarks.harness import format_ms, format_table, machine_line, time_repeatedly, versions_line

STEP_LIMIT_S = 120.0


def grid_energy(u):
    return (np.sum((u[1:, :] - u[:-1, :]) ** 2) + np.sum((u[:, 1:] - u[:, :-1]) ** 2)
            + np.sum((u ** 2 - 1) ** 2))


def structural_count(n: int) -> int:
    return n * n + 4 * n * (n - 1)


def analytic_hessian(u: np.ndarray):
    n = u.shape[0]
    degrees = np.full(n, 2.0)
    degrees[0] -= 1.0
    degrees[-1] -= 1.0
    path = scipy.sparse.diags([-np.ones(n - 1), degrees, -np.ones(n - 1)], [-1, 0, 1])
    identity = scipy.sparse.identity(n)
    laplacian = scipy.sparse.kron(path, identity) + scipy.sparse.kron(identity, path)
    return (2 * laplacian + scipy.sparse.diags(12 * u.ravel() ** 2 - 4)).tocsr()


def symad_hessian(u: np.ndarray):
    function = lambda v: grid_energy(v)  # noqa: E731  (a fresh function: no cache helps)
    return sd.hessian(function, sparse=True)(u)


def casadi_hessian(u: np.ndarray, kind: str):
    import casadi as ca

    n = u.shape[0]
    symbol = ca.SX.sym if kind == "SX" else ca.MX.sym
    x = symbol("x", n * n)
    grid = ca.reshape(x, n, n).T  # row-major, as NumPy's u.ravel()
    energy = (ca.sumsqr(grid[1:, :] - grid[:-1, :]) + ca.sumsqr(grid[:, 1:] - grid[:, :-1])
              + ca.sum1(ca.vec((grid ** 2 - 1) ** 2)))
    hessian, _ = ca.hessian(energy, x)
    return ca.Function("h", [x], [hessian])(u.ravel())


def as_scipy(matrix) -> scipy.sparse.csr_matrix:
    """A CasADi DM as a scipy.sparse matrix with its structural pattern."""
    sparsity = matrix.sparsity()
    rows, columns = sparsity.get_triplet()
    values = np.array(matrix.nonzeros())
    return scipy.sparse.csr_matrix((values, (rows, columns)), shape=matrix.shape)


def stages(u: np.ndarray) -> list[str]:
    """symad's steps once: what the first call spends its time on."""
    from symad.derivatives import grad_function, sparse_jacobian_function
    from symad.transforms.colouring import hessian_colouring
    from symad.transforms.sparsity import sparsity_pattern

    start = time.perf_counter()
    function = sd.trace(lambda v: grid_energy(v), u)
    gradient = grad_function(function, 0)
    traced = time.perf_counter()
    hessian = sparse_jacobian_function(gradient, 0, symmetric=True, compressed=True)
    built = time.perf_counter()
    hessian.compile()
    compiled = time.perf_counter()
    hessian(u)
    evaluated = time.perf_counter()
    # The build's two analyses, once more on their own.
    pattern = sparsity_pattern(gradient.graph.nodes, gradient.graph.inputs, gradient._output_atoms())
    patterned = time.perf_counter()
    colouring = hessian_colouring(pattern + pattern.T)
    coloured = time.perf_counter()
    return [f"{(traced - start) * 1e3:,.1f}", f"{(built - traced) * 1e3:,.1f}",
            f"{(patterned - evaluated) * 1e3:,.1f}",
            f"{(coloured - patterned) * 1e3:,.1f} ({colouring.method}, {colouring.count})",
            f"{(compiled - built) * 1e3:,.1f}", f"{(evaluated - compiled) * 1e3:,.1f}",
            f"{hessian.stats()['nodes']}"]


def colouring_rows(n: int, reps: int) -> list[list[str]]:
    """The distance-2 colouring of the grid Hessian's columns: symad's greedy pass beside networkx's."""
    import networkx

    from symad.transforms.colouring import column_colouring, star_colouring

    pattern = analytic_hessian(np.ones((n, n))) != 0
    intersection = (pattern.T @ pattern).tocsr()
    intersection.setdiag(False)
    intersection.eliminate_zeros()

    def networkx_colouring(graph):
        return networkx.greedy_color(networkx.from_scipy_sparse_array(graph), strategy="largest_first")

    rows = []
    for name, run, argument in [("symad distance-2 (incl. P^T P)", column_colouring, pattern),
                                ("symad star", star_colouring, pattern),
                                ("networkx: graph from the matrix, greedy_color largest_first", networkx_colouring,
                                 intersection)]:
        timing = time_repeatedly(lambda argument=argument: argument, run, reps, budget_s=20.0, step_limit_s=STEP_LIMIT_S)
        result = run(argument)
        count = result.count if hasattr(result, "count") else max(result.values()) + 1
        rows.append([str(n), name, format_ms(timing, STEP_LIMIT_S), str(count)])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200], help="grid sides n")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per case (median)")
    parser.add_argument("--mx", action="store_true", help="also CasADi MX")
    arguments = parser.parse_args(argv)
    try:
        import casadi  # noqa: F401

        kinds = ["SX", "MX"] if arguments.mx else ["SX"]
    except ImportError:
        print("(peer casadi not installed: pip install -e '.[bench]')")
        kinds = []
    print(f"Sparse Hessian of the n x n grid energy, built and evaluated; {machine_line()}")
    print(versions_line(("casadi", "scipy", "networkx")))
    print(f"median of {arguments.reps} repetitions after a warm-up (ms); ratio = symad / peer\n")
    header = ["n", "non-zeros", "symad ms"]
    for kind in kinds:
        header += [f"CasADi {kind} ms", f"symad / {kind}"]
    rows, failures, stage_rows, colour_rows = [], [], [], []
    for n in arguments.sizes:
        u = np.random.default_rng(n).standard_normal((n, n))
        symad_timing = time_repeatedly(lambda u=u: u, symad_hessian, arguments.reps, budget_s=60.0,
                                       step_limit_s=STEP_LIMIT_S)
        matrix = symad_hessian(u)
        expected = analytic_hessian(u)
        correct = (matrix.nnz == structural_count(n) and (matrix != 0).nnz == (expected != 0).nnz
                   and abs(matrix - expected).max() <= 1e-12 * max(1.0, abs(expected).max()))
        row = [str(n), f"{matrix.nnz:,}", format_ms(symad_timing, STEP_LIMIT_S)]
        for kind in kinds:
            timing = time_repeatedly(lambda u=u: u, lambda point, kind=kind: casadi_hessian(point, kind),
                                     arguments.reps, budget_s=60.0, step_limit_s=STEP_LIMIT_S)
            peer = as_scipy(casadi_hessian(u, kind))
            correct &= peer.nnz == matrix.nnz and abs(peer - matrix).max() <= 1e-12 * max(1.0, abs(peer).max())
            ratio = (f"{symad_timing.median_s / timing.median_s:.2f}x"
                     if symad_timing.median_s and timing.median_s else "—")
            row += [format_ms(timing, STEP_LIMIT_S), ratio]
        rows.append(row)
        if not correct:
            failures.append(n)
        stage_rows.append([str(n), *stages(u)])
        colour_rows += colouring_rows(n, arguments.reps)
        print(f"  n={n} done", file=sys.stderr)
    print(format_table(header, rows))
    print("\nsymad's stages, one first call (ms): trace + gradient graph; the sparse Hessian's graph "
          "(sparsity pattern without unrolling, colouring, one compressed sweep), of which the pattern and "
          "the colouring (method, colours) timed again alone; compile; evaluate; nodes of the result")
    print(format_table(["n", "trace+grad", "build", "pattern", "colouring", "compile", "evaluate", "nodes"],
                       stage_rows))
    print("\nColouring the columns of the grid Hessian (ms, median); colours")
    print(format_table(["n", "colouring", "ms", "colours"], colour_rows))
    if failures:
        print(f"\nWRONG: Hessians differ from the analytic one or from CasADi's at n = {failures}")
        return 1
    print("\ncorrectness: every Hessian has exactly n^2 + 4n(n-1) non-zeros and equals the analytic one "
          "(and CasADi's) to 1e-12")
    return 0


if __name__ == "__main__":
    sys.exit(main())
