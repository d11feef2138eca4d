"""Linear algebra: gradients through LAPACK's solves and determinants, symad beside JAX.

    python benchmarks/linalg.py            # n = 100 and 500
    python benchmarks/linalg.py --sizes 100

Cases (issue 29, docs/benchmarks.md §"Linear algebra"): the gradient of
``slogdet(A)[1]`` and of ``sum(solve(A, b))`` w.r.t. ``A`` (and ``b``), at a random
well-conditioned ``n x n`` matrix. For each: the first call (trace + differentiate +
compile + evaluate, a new function object each repetition; JAX's includes XLA's compile)
and the call again, beside JAX ``jit(grad)`` with float64, medians of at least 5
repetitions after a warm-up, in one run; the ratio symad / JAX, and the gradient's node
count (the same at every n). Set ``SYMAD_CACHE=0`` so that the first call compiles.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from benchmarks.harness import format_table, machine_line, time_repeatedly, versions_line  # noqa: E402

REPETITIONS = 7


def _ms(timing) -> str:
    return "—" if timing is None or timing.median_s is None else f"{timing.median_s * 1e3:,.2f}"


def _ratio(a, b) -> str:
    if a is None or b is None or a.median_s is None or b.median_s is None:
        return "—"
    return f"{a.median_s / b.median_s:.2f}"


def log_det(np_):
    return lambda a: np_.linalg.slogdet(a)[1]


def solve_sum(np_):
    return lambda a, b: np_.sum(np_.linalg.solve(a, b))


def problem(n: int):
    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, n)) + 2 * np.sqrt(n) * np.eye(n)
    return a, rng.normal(size=n)


def symad_times(make, args, argnums):
    import symad as sd

    first = time_repeatedly(lambda: sd.grad(make(np), argnums=argnums), lambda g: g(*args), REPETITIONS)
    gradient = sd.grad(make(np), argnums=argnums)
    value = gradient(*args)
    again = time_repeatedly(lambda: gradient, lambda g: g(*args), REPETITIONS * 3)
    nodes = gradient.trace(*args).stats()["nodes"]
    return first, again, nodes, value


def jax_times(make, args, argnums):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, None, None
    jax.config.update("jax_enable_x64", True)

    def run(g):
        return jax.block_until_ready(g(*args))

    first = time_repeatedly(lambda: jax.jit(jax.grad(make(jnp), argnums=argnums)), run, REPETITIONS)
    compiled = jax.jit(jax.grad(make(jnp), argnums=argnums))
    value = run(compiled)
    again = time_repeatedly(lambda: compiled, run, REPETITIONS * 3)
    return first, again, value


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500])
    options = parser.parse_args(argv)
    print(machine_line())
    print(versions_line(("jax", "jaxlib")))
    rows = []
    for n in options.sizes:
        a, b = problem(n)
        for name, make, args, argnums in (("grad slogdet(A)[1]", log_det, (a,), 0),
                                          ("grad sum(solve(A, b)), A and b", solve_sum, (a, b), (0, 1))):
            first, again, nodes, value = symad_times(make, args, argnums)
            jfirst, jagain, jvalue = jax_times(make, args, argnums)
            if jvalue is not None:
                for mine, theirs in zip(np.atleast_1d(value) if argnums == 0 else value,
                                        np.atleast_1d(jvalue) if argnums == 0 else jvalue):
                    assert np.allclose(mine, np.asarray(theirs), rtol=1e-9, atol=1e-12), name
            rows.append([f"{name}, n={n}", _ms(first), _ms(jfirst), _ratio(first, jfirst),
                         _ms(again), _ms(jagain), _ratio(again, jagain), str(nodes)])
    header = ["case", "symad first (ms)", "JAX first (ms)", "ratio", "symad again (ms)",
              "JAX again (ms)", "ratio", "gradient nodes"]
    print(format_table(header, rows))


if __name__ == "__main__":
    main()
