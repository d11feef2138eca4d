"""Snapshots of what symad prints, to check that a refactoring changed none of it.

Writes one JSON object mapping a case name to the text symad produced for it: the
formula, LaTeX and generated source (numexpr and NumPy backends) of each textbook
function's gradient and Hessian (``benchmarks/formula_corpus.py``), and the LaTeX,
index notation and array-program source of random whole-array programs and their
gradients (``tests/random_programs.py``). Compare two snapshots to see every case whose
text differs::

    python tools/snapshot.py --write /tmp/before.json      # on the code before the change
    python tools/snapshot.py --compare /tmp/before.json    # after it; exit status 1 on a difference

A case that raised is recorded as its exception's type and message, so a refusal that
changes shows up as well. Run with ``SYMAD_CACHE=0`` so nothing is read from the disk cache.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402

import symad as sd  # noqa: E402


def _text(make) -> str:
    """``make()`` as text, or the exception it raised, named."""
    try:
        return str(make())
    except Exception as error:  # noqa: BLE001 -- a changed refusal is a difference too
        return f"!{type(error).__name__}: {error}"


def _views(prefix: str, function, cases: dict, backends=("numexpr", "numpy")) -> None:
    cases[f"{prefix} formula"] = _text(function.formula)
    cases[f"{prefix} latex"] = _text(function.latex)
    for backend in backends:
        cases[f"{prefix} source[{backend}]"] = _text(lambda b=backend: function.source(b))


def corpus_cases(cases: dict) -> None:
    from benchmarks.formula_corpus import CORPUS

    for entry in CORPUS:
        function, point = entry[0], entry[1]
        name = function.__name__
        traced = sd.trace(function, *point)
        _views(f"{name}", traced, cases)
        argnums = tuple(range(len(point)))
        _views(f"{name} grad", sd.grad(function, argnums=argnums).trace(*point), cases)
        _views(f"{name} hessian", sd.hessian(function, argnums=argnums).trace(*point), cases)


def array_cases(cases: dict, count: int) -> None:
    from tests.random_programs import generate

    for seed in range(count):
        program = generate(seed)
        args = program.inputs()
        if args is None:
            continue
        function = program.function()
        try:
            traced = sd.trace(function, *args)
        except sd.SymadError as error:  # a refusal (issue 29's surface) is recorded as such
            cases[f"program {seed}"] = f"!{type(error).__name__}: {error}"
            continue
        _views(f"program {seed}", traced, cases, backends=())
        gradient = sd.grad(function, argnums=tuple(range(len(args)))).trace(*args)
        _views(f"program {seed} grad", gradient, cases, backends=("numpy",))
        cases[f"program {seed} grad stats"] = _text(lambda g=gradient: sorted(
            g.stats()["operations"].items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path)
    group.add_argument("--compare", type=Path)
    parser.add_argument("--programs", type=int, default=150, help="random array programs")
    options = parser.parse_args(argv)
    np.seterr(all="ignore")
    cases: dict[str, str] = {}
    corpus_cases(cases)
    array_cases(cases, options.programs)
    if options.write:
        options.write.write_text(json.dumps(cases, indent=1, sort_keys=True))
        print(f"{len(cases)} cases written to {options.write}")
        return 0
    before = json.loads(options.compare.read_text())
    differ = sorted(k for k in before.keys() | cases.keys() if before.get(k) != cases.get(k))
    for key in differ[:20]:
        print(f"--- {key}\nbefore: {before.get(key)!r:.600}\nafter:  {cases.get(key)!r:.600}")
    print(f"{len(cases)} cases, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
