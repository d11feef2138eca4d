"""Random whole-array programs through symad and JAX: do values, gradients and HVPs agree?

    python benchmarks/fuzz_vs_jax.py                      # 2 seeds x 1,000 programs
    python benchmarks/fuzz_vs_jax.py --seeds 5 --count 200 --shrink

The programs are those of ``tests/random_programs.py`` (issue 33), the same generator the
suite's ``tests/test_random_array_programs.py`` uses. Each runs, as the same Python source,
once with ``np`` bound to NumPy (traced by symad) and once with ``np`` bound to
``jax.numpy`` (float64: ``jax_enable_x64``). For each program the script compares the
value, the gradient w.r.t. every input and a Hessian-vector product (forward over reverse
in both libraries), and counts:

* **agree**: symad's three results match JAX's (``rtol`` 1e-8);
* **wrong number**: symad gives a number JAX does not (the line says which of the two the
  program's central differences side with);
* **raw error**: symad raises an exception that is not a ``symad.SymadError``;
* **refused**: symad raises a ``SymadError`` (a clear refusal, e.g. ``TracingError``);
* **JAX failed**: JAX itself raises (the program has no reference; not symad's count).

JAX is a benchmark dependency only: no test imports it.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from tests.random_programs import (  # noqa: E402
    _flat,
    _unit_direction,
    central_difference,
    compile_source,
    generate,
    numpy_namespace,
    report,
    shrink,
)

RTOL = 1e-8


def _jax_namespace():
    import jax
    import jax.numpy as jnp
    import jax.scipy.special

    jax.config.update("jax_enable_x64", True)

    class JaxSymadNumpy:
        """What the programs call from ``symad.numpy``, in JAX."""

        sigmoid = staticmethod(jax.nn.sigmoid)
        logsumexp = staticmethod(jax.scipy.special.logsumexp)
        softplus = staticmethod(jax.nn.softplus)

    return jax, {"np": jnp, "snp": JaxSymadNumpy}


def _close(got, want, rtol=RTOL) -> bool:
    got, want = _flat(got), _flat(want)
    if got.shape != want.shape:
        return False
    scale = 1.0 + float(np.max(np.abs(want), initial=0.0))
    return bool(np.all(np.abs(got - want) <= rtol * np.abs(want) + 1e-10 * scale))


def jax_results(jax, namespace, source, args, direction):
    """Value, gradient (a tuple over inputs) and forward-over-reverse HVP, by JAX."""
    function = compile_source(source, namespace)
    argnums = tuple(range(len(args)))

    @jax.jit  # one XLA compile per program: op-by-op dispatch compiles every op, 10x slower
    def all_three(jargs, jdirection):
        gradient = jax.grad(function, argnums=argnums)
        return function(*jargs), gradient(*jargs), jax.jvp(gradient, jargs, jdirection)[1]

    value, gradient, hvp = all_three(tuple(jax.numpy.asarray(a) for a in args),
                                     tuple(jax.numpy.asarray(d) for d in direction))
    return (np.asarray(value), tuple(np.asarray(g) for g in gradient),
            tuple(np.asarray(h) for h in hvp))


def symad_results(source, args, direction):
    import symad as sd

    function = compile_source(source, numpy_namespace())
    argnums = tuple(range(len(args)))
    value = sd.trace(function, *args)(*args)
    gradient = sd.grad(function, argnums=argnums)(*args)
    _, hvp = sd.jvp(sd.grad(function, argnums=argnums), tuple(args), tuple(direction))
    return np.asarray(value), tuple(gradient), tuple(hvp)


def compare(jax, namespace, program):
    """One program: ("agree" | "wrong" | "error" | "refused" | "jax failed" | "invalid", detail)."""
    import symad as sd

    args = program.inputs()
    if args is None:
        return "invalid", ""
    source = program.source()
    direction = _unit_direction(np.random.default_rng([program.seed, 5]), program.input_shapes)
    try:
        want = jax_results(jax, namespace, source, args, direction)
    except Exception as error:  # noqa: BLE001 - JAX has no reference for this program
        return "jax failed", f"{type(error).__name__}: {str(error)[:200]}"
    try:
        got = symad_results(source, args, direction)
    except sd.SymadError as error:
        return "refused", f"{type(error).__name__}: {str(error)[:200]}"
    except Exception as error:  # noqa: BLE001 - a raw error is a finding
        where = traceback.extract_tb(error.__traceback__)[-1]
        return "error", f"{type(error).__name__}: {str(error)[:200]} ({where.filename}:{where.lineno})"
    for what, g, w in zip(("value", "gradient", "HVP"), got, want):
        if not _close(g, w):
            return "wrong", f"{what}: symad {_flat(g)[:8]}, JAX {_flat(w)[:8]}; " \
                            f"{_referee(program, args, direction, what, g, w)}"
    return "agree", ""


def _referee(program, args, direction, what, got, want) -> str:
    """Which of the two the central differences side with (for gradients and HVPs)."""
    if what == "value":
        return f"NumPy gives {program.function()(*args)}"
    import symad as sd

    function = program.function()
    if what == "gradient":
        def along(t):
            return function(*[a + t * d for a, d in zip(args, direction)])
        fd = float(central_difference(along)[0])
        dot = [float(sum(np.sum(np.asarray(p) * d) for p, d in zip(r, direction)))
               for r in (got, want)]
    else:
        traced = sd.grad(function, argnums=tuple(range(len(args)))).trace(*args)
        fd = central_difference(
            lambda t: _flat(traced(*[a + t * d for a, d in zip(args, direction)])))[0]
        dot = [float(np.max(np.abs(_flat(r) - fd))) for r in (got, want)]
        return f"|symad - central differences| {dot[0]:.3g}, |JAX - central differences| {dot[1]:.3g}"
    return f"along the HVP direction: symad {dot[0]:.10g}, JAX {dot[1]:.10g}, central differences {fd:.10g}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2],
                        help="generator seeds; each gives --count programs")
    parser.add_argument("--count", type=int, default=1000, help="programs per seed")
    parser.add_argument("--shrink", action="store_true",
                        help="print the smallest program of each distinct failure")
    options = parser.parse_args(argv)
    os.environ.setdefault("SYMAD_PROMOTE", "0")  # no timing-dependent backend switch mid-run

    jax, namespace = _jax_namespace()
    counts = collections.Counter()
    findings = collections.defaultdict(list)
    start = time.perf_counter()
    for seed in options.seeds:
        for index in range(options.count):
            program = generate(seed * 1_000_000 + index)
            status, detail = compare(jax, namespace, program)
            counts[status] += 1
            if status not in ("agree", "invalid"):
                key = (status, detail.split(":")[0])
                findings[key].append((program, detail))
            if (index + 1) % 250 == 0:
                print(f"  seed {seed}: {index + 1} programs, {dict(counts)}", file=sys.stderr,
                      flush=True)
    elapsed = time.perf_counter() - start

    total = sum(counts.values())
    print(f"{total} programs (seeds {options.seeds}, {options.count} each) in {elapsed:.0f} s")
    for status in ("agree", "wrong", "error", "refused", "jax failed", "invalid"):
        label = {"wrong": "wrong number", "error": "raw error"}.get(status, status)
        print(f"  {label:>13}: {counts[status]}")
    for (status, kind), cases in sorted(findings.items()):
        print(f"\n{status} / {kind}: {len(cases)} programs, e.g. seed {cases[0][0].seed}")
        print(f"  {cases[0][1]}")
        if options.shrink and status in ("wrong", "error"):
            smallest = _shrink_against_jax(jax, namespace, cases[0][0], status)
            print(smallest)
    return 0


def _shrink_against_jax(jax, namespace, program, status):
    """Shrink with the comparison against JAX as the test (same status, same kind)."""
    from tests.random_programs import Verdict

    def test(candidate):
        result, detail = compare(jax, namespace, candidate)
        return Verdict(result, detail.split(":")[0], detail)

    first = test(program)
    shrunk = shrink(program, first, test, budget=200)
    return report(shrunk.program, shrunk.verdict)


if __name__ == "__main__":
    sys.exit(main())
