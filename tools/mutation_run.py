#!/usr/bin/env python
"""Mutation run: how many plausible one-token bugs do the tests catch? For contributors, not CI.

A *mutant* is the source with one small change of the kind that slips past review: a
comparison flipped (``<`` to ``<=``), an operator swapped (``+`` to ``-``, ``*`` to
``/``), an integer off by one, a sign dropped, ``and`` for ``or``. For each mutant the
tests that should notice it run (with ``-x`` and a timeout); the mutant is *killed* if
they fail (or time out) and *survives* if they pass. The kill rate is killed / run.
A survivor is either a gap in the tests or an equivalent mutant (a change that computes
the same thing); the list printed at the end says which lines to look at.

*Equivalent* mutants are listed in EQUIVALENT below, each with the reason no test can
tell it apart (in the driver: a change of how many threads run, or how large the blocks
or the staging steps are, which changes speed, not results). The sample is drawn from
all candidates as before; a sampled mutant that matches an entry is not run (unless
``--run-equivalent``), is left out of the kill rate's denominator, and is listed by name
under "equivalent". ``--run-equivalent`` runs them anyway, as a check of the list: an
"equivalent" mutant that is killed is reported as a wrong entry. The list is for changes
shown to compute the same results; a survivor that merely has no test yet stays a survivor.

Where it mutates: **never the working tree**. The script copies the repository's files
(tracked and untracked-but-not-ignored, so uncommitted work is included) into a fresh
temporary directory, mutates files there one at a time, and runs the tests there
(``PYTHONPATH`` pointing at the copy, bytecode writing off so a stale ``.pyc`` of an
earlier mutant is never used). Each mutated file is written back after its run, in a
``finally`` clause, so an interrupt (Ctrl-C, SIGTERM) restores it too; at the end every
file of the copy is checked against its original and the copy is removed (``--keep``
keeps it).

What it mutates (TARGETS below): the derivative rules (symad/rules/partials.py,
symad/rules/transposes.py), the blocked batch driver (the ``BLOCKED_EVALUATE`` and
``RUN`` source of symad/compile/scalar/source.py, which every generated module contains) and
the argument checks of symad/api.py and symad/derivatives.py, each with the test files that
should catch its bugs.

Usage (from the repository root; on 2 cores a mutant took 12 s on average, a survivor up to
45 s, as it runs all of its tests; the unmutated baseline runs first, about 2 minutes)::

    python tools/mutation_run.py --sample 40            # 40 mutants, spread over the targets
    python tools/mutation_run.py --list                  # count the candidate mutants only
    python tools/mutation_run.py --files symad/api.py --sample 10 --seed 3
    python tools/mutation_run.py --mutant symad/api.py:1405:45:'>='   # this mutant only

docs/contributing.md ("Testing and mutation runs") records measured kill rates.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    """A file to mutate, which part of it, and the tests that should catch its bugs."""

    path: str
    tests: tuple[str, ...]
    #: mutate only inside these functions (by name, any nesting); empty: the whole file
    functions: tuple[str, ...] = ()
    #: mutate only the Python source held in these module-level string constants
    strings: tuple[str, ...] = ()


TARGETS = (
    Target("symad/rules/partials.py",
           ("tests/test_primitives.py", "tests/test_high_order.py", "tests/test_reverse.py",
            "tests/test_semantics.py")),
    Target("symad/rules/transposes.py",
           ("tests/test_arrays.py", "tests/test_sparse_arrays.py", "tests/test_jacobians.py",
            "tests/test_reverse.py")),
    # The driver is a string: every generated module's evaluate() and run().
    Target("symad/compile/scalar/source.py",
           ("tests/test_block_boundaries.py", "tests/test_compile.py"),
           strings=("BLOCKED_EVALUATE", "RUN")),
    Target("symad/api.py",
           ("tests/test_errors.py", "tests/test_examples.py", "tests/test_jacobians.py",
            "tests/test_multivariate.py"),
           functions=("_normalize_argnums", "_check_weights", "_check_differentiable",
                      "_argument_checker", "_check_argnum", "_check_order", "_check_orders",
                      "_check_direction")),
    # The checks a Graph -> Graph builder runs on what it is given, whoever calls it.
    Target("symad/derivatives.py",
           ("tests/test_errors.py", "tests/test_examples.py", "tests/test_jacobians.py",
            "tests/test_multivariate.py"),
           functions=("resolve_argnums", "check_float_weights", "check_order_count")),
)

# One replacement per operator: the likeliest slip, not every possible one.
OPERATOR_SWAPS = {
    "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==",
    "+": "-", "-": "+", "*": "/", "/": "*", "//": "*", "**": "*", "%": "//",
}
KEYWORD_SWAPS = {"and": "or", "or": "and", "True": "False", "False": "True"}
#: After these tokens a ``-`` is unary (a sign), a ``*``/``**`` unpacks (not a product).
PREFIX_CONTEXT = {"(", "[", "{", ",", "=", ":", "return", "lambda", "and", "or", "not", "in",
                  "if", "else", "elif", "while", "yield", "+", "-", "*", "/", "**", "<", ">",
                  "<=", ">=", "==", "!=", "+=", "-=", "*=", "/=", "->", "%", "//", "@"}


@dataclass(frozen=True)
class Equivalent:
    """Mutants that compute the same results as the original, so that no test can kill them.

    A mutant matches if it is in ``path``, its token lies inside an occurrence of ``site``
    (a piece of the source line) and it replaces ``before`` with one of ``after`` (empty:
    with anything the tool generates there).
    """

    path: str
    site: str
    before: str
    after: tuple[str, ...]
    reason: str

    def matches(self, mutant: Mutant) -> bool:
        if (mutant.path != self.path or mutant.before != self.before
                or (self.after and mutant.after not in self.after)):
            return False
        line, start = mutant.source_line, mutant.column
        index = line.find(self.site)
        while index != -1:
            if index <= start and start + len(mutant.before) <= index + len(self.site):
                return True
            index = line.find(self.site, index + 1)
        return False


_DRIVER = "symad/compile/scalar/source.py"
_SELECT = ("P.select_p: (None, lambda out, c, a, b: snp.where(c, 1, 0), "
           "lambda out, c, a, b: snp.where(c, 0, 1))")
_SPEED = "results are the same; only speed (or memory) differs"
#: Known-equivalent mutation sites, each with why. Keep it to changes that provably compute
#: the same outputs for every input; ``--run-equivalent`` checks that each still survives.
EQUIVALENT = (
    # How many threads share a batch. work() runs in the calling thread whatever ``workers``
    # is (range() of a count below 1 starts no helper), every thread takes blocks until none
    # is left, and each block is written by exactly one of them.
    Equivalent(_DRIVER, "PARALLEL_MIN_BLOCK = 4096", "4096", (), f"thread threshold; {_SPEED}"),
    Equivalent(_DRIVER, "threads=1", "1", (), f"default thread count; {_SPEED}"),
    Equivalent(_DRIVER, "workers = max(1, min(int(threads), n // PARALLEL_MIN_BLOCK))", "1", (),
               f"thread count; {_SPEED}"),
    Equivalent(_DRIVER, "workers = max(1, min(int(threads), n // PARALLEL_MIN_BLOCK))", "//",
               (), f"thread count; {_SPEED}"),
    Equivalent(_DRIVER, "workers = min(workers, -(-n // block_size))", "-", (),
               f"thread count (a negative one starts no helper); {_SPEED}"),
    Equivalent(_DRIVER, "workers = min(workers, -(-n // block_size))", "//", (),
               f"thread count (threads beyond the blocks find none left); {_SPEED}"),
    Equivalent(_DRIVER, "for _ in range(workers - 1)", "-", (), f"helper threads; {_SPEED}"),
    Equivalent(_DRIVER, "for _ in range(workers - 1)", "1", (), f"helper threads; {_SPEED}"),
    Equivalent(_DRIVER, "daemon=True", "True", (),
               "helper threads are joined before evaluate returns; daemon only matters at exit"),
    # Blocks of at least 2 points instead of 1: range() still covers 0..n-1 (stop is min()'d
    # with n), and an empty batch has no block either way.
    Equivalent(_DRIVER, "block_size = max(1, min(int(block_size), n))", "1", ("2",),
               f"smallest block size; {_SPEED}"),
    # The block size shared out between threads: whatever these give, block_size stays a
    # positive int (the max() with min(block_size, PARALLEL_MIN_BLOCK) >= 1 bounds it below,
    # and the float that '*' -> '/' makes never wins it), and blocks of any size fill the
    # same outputs.
    Equivalent(_DRIVER, "if workers > 1:", ">", (), f"per-thread block size; {_SPEED}"),
    Equivalent(_DRIVER, "if workers > 1:", "1", (), f"per-thread block size; {_SPEED}"),
    *(Equivalent(_DRIVER, "min(block_size // workers, -(-n // (4 * workers))))", before, (),
                 f"per-thread block size; {_SPEED}") for before in ("//", "-", "4", "*")),
    # Staging copies a strided column through a contiguous buffer; whether a column is
    # staged, and in steps of how many rows, changes only where the values pass through.
    Equivalent(_DRIVER, "STAGE_MIN_POINTS = 256", "256", (), f"staging threshold; {_SPEED}"),
    Equivalent(_DRIVER, "stage = n >= STAGE_MIN_POINTS", ">=", (),
               f"staging threshold; {_SPEED}"),
    Equivalent(_DRIVER, "x.strides[0] != x.itemsize", "!=", ("==",),
               f"which inputs are staged (contiguous ones instead of strided); {_SPEED}"),
    Equivalent(_DRIVER, "o.strides[0] != o.itemsize", "!=", ("==",),
               f"which outputs are staged (contiguous ones instead of strided); {_SPEED}"),
    Equivalent(_DRIVER, "if stage and o.strides[0]", "and", ("or",),
               f"strided outputs staged in short batches too; {_SPEED}"),
    Equivalent(_DRIVER, "step=4096", "4096", (), f"staging step; {_SPEED}"),
    # run(): an argument of one element is passed as a 0-d array (evaluate broadcasts it)
    # unless the batch has one point; passing it broadcast to n points instead, or 0-d when
    # n is 1, gives the same values.
    Equivalent(_DRIVER, "n != 1:", "!=", ("==",), f"0-d or broadcast size-1 argument; {_SPEED}"),
    Equivalent(_DRIVER, "n != 1:", "1", (), f"0-d or broadcast size-1 argument; {_SPEED}"),
    # NumPy (2.4, as installed) takes any negative size in reshape() as the one to infer.
    Equivalent(_DRIVER, "reshape(-1)", "1", ("2",), "reshape(-2) is reshape(-1) in NumPy"),
    # broadcast_full pads a cotangent's core with leading size-1 axes up to the operand's
    # rank. With seeds in front (the only case it pads in) every cotangent already has the
    # operand's full rank -- reverse mode keeps a term only if it does (_fits) and unbroadcast
    # restores it -- so the padding is () whatever its element. (An instrumented run of the
    # array, Jacobian, reverse, high-order, multivariate and loop tests never padded.)
    Equivalent("symad/rules/transposes.py", "(1,) * (len(shape) - len(core))", "1", (),
               "the padding of a full-rank core is empty"),
    # unbroadcast without seeds returns a value as it is, or reshaped to its shape without
    # leading size-1 axes; '<' for '<=' reshapes a value of the operand's rank that differs
    # from it only by such axes, which without seeds every consumer broadcasts the same
    # (the comment on that line; reached by tests/test_arrays.py, results unchanged).
    Equivalent("symad/rules/transposes.py", "if len(now) <= len(shape)", "<=", ("<",),
               "only leading size-1 axes differ, which broadcasting adds anyway"),
    # Its default: both callers (symad.transforms.reverse, the scatter transpose) pass lead.
    Equivalent("symad/rules/transposes.py", "lead: int = 0, from_shape", "0", (),
               "the default of lead is never used: every caller passes it"),
    Equivalent("symad/rules/partials.py", "reshape(-1)", "1", ("2",),
               "reshape(-2) is reshape(-1) in NumPy"),
    # select's partial rules are never called: forward, reverse and Taylor mode take the
    # tangents or cotangents of where()'s branches themselves (select_p is special-cased in
    # symad.transforms.forward and .reverse and in symad.rules.taylor), so that the branch
    # not taken, with any nan in it, is dropped whole. (Rules that raise instead were never
    # reached by the partials', array, Jacobian, loop and high-order tests.)
    *(Equivalent("symad/rules/partials.py", _SELECT, before, (),
                 "select's partial rules are never called") for before in ("1", "0")),
)


def equivalence(mutant: Mutant) -> str:
    """The reason ``mutant`` is known to be equivalent, or ""."""
    return next((entry.reason for entry in EQUIVALENT if entry.matches(mutant)), "")


@dataclass
class Mutant:
    path: str
    line: int  # 1-based, in the file
    column: int
    before: str
    after: str
    source_line: str
    outcome: str = ""
    seconds: float = 0.0
    tests: tuple[str, ...] = field(default=())
    #: why the mutant computes the same as the original (EQUIVALENT), or ""
    equivalent: str = ""

    def describe(self) -> str:
        change = f"{self.before!r} -> {self.after!r}"
        return f"{self.path}:{self.line}: {change}   {self.source_line.strip()}"


# ---------------------------------------------------------------------------
# Finding mutants
# ---------------------------------------------------------------------------


def regions(target: Target, text: str) -> list[tuple[int, int, bool]]:
    """(first line, last line, is string content) of the parts of the file to mutate."""
    if not target.functions and not target.strings:
        return [(1, text.count("\n") + 1, False)]
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if function and node.name in target.functions:
            found.append((node.lineno, node.end_lineno, False))
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in target.strings
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            # The lines strictly between the opening and the closing triple quotes; the
            # text holds no escapes (checked below), so it is the file's text as it stands.
            found.append((node.value.lineno + 1, node.value.end_lineno - 1, True))
    wanted = len(target.functions) + len(target.strings)
    if len(found) != wanted:
        raise SystemExit(f"{target.path}: found {len(found)} of the {wanted} regions "
                         "named in TARGETS")
    return found


def mutants_of(target: Target, text: str) -> list[Mutant]:
    lines = text.splitlines(keepends=True)
    mutants = []
    for first, last, is_string in regions(target, text):
        chunk = "".join(lines[first - 1:last])
        if is_string and "\\" in chunk:
            raise SystemExit(f"{target.path}: a mutated string region holds a backslash; "
                             "its text would not be the code that runs")
        offset = first - 1 if is_string else 0
        tokens = list(tokenize.generate_tokens(io.StringIO(chunk if is_string else text).readline))
        for index, token in enumerate(tokens):
            line = token.start[0] + offset
            if not first <= line <= last or token.start[0] != token.end[0]:
                continue
            for after in _replacements(tokens, index):
                mutants.append(Mutant(target.path, line, token.start[1], token.string, after,
                                      lines[line - 1], tests=target.tests))
    return [m for m in mutants if _compiles(apply(text, m), target.path)]


def _previous(tokens, index):
    for token in reversed(tokens[:index]):
        if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
                              tokenize.INDENT, tokenize.DEDENT):
            return token
    return None


def _inside_fstring(tokens, index) -> bool:
    start = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+ splits f-strings up
    if start is None:
        return False
    depth = 0
    for token in tokens[:index]:
        depth += (token.type == start) - (token.type == tokenize.FSTRING_END)
    return depth > 0


def _replacements(tokens, index) -> list[str]:
    token = tokens[index]
    if _inside_fstring(tokens, index):
        return []
    previous = _previous(tokens, index)
    prefix = previous is None or previous.string in PREFIX_CONTEXT
    if token.type == tokenize.OP:
        if token.string == "-" and prefix:
            return [""]  # drop a sign
        if token.string in ("*", "**") and prefix:
            return []  # *args / **kwargs unpacking, not arithmetic
        if token.string in ("+",) and prefix:
            return []
        swap = OPERATOR_SWAPS.get(token.string)
        return [swap] if swap else []
    if token.type == tokenize.NAME:
        swap = KEYWORD_SWAPS.get(token.string)
        return [swap] if swap else []
    if token.type == tokenize.NUMBER:
        try:
            value = int(token.string, 0)
        except ValueError:
            return []  # floats: no off-by-one
        return [str(value + 1)] + ([str(value - 1)] if value > 0 else [])
    return []


def apply(text: str, mutant: Mutant) -> str:
    lines = text.splitlines(keepends=True)
    line = lines[mutant.line - 1]
    assert line[mutant.column:mutant.column + len(mutant.before)] == mutant.before
    end = mutant.column + len(mutant.before)
    lines[mutant.line - 1] = line[:mutant.column] + mutant.after + line[end:]
    return "".join(lines)


def _compiles(text: str, path: str) -> bool:
    try:
        compile(text, path, "exec")
    except SyntaxError:
        return False
    return True


def sample(per_file: dict[str, list[Mutant]], count: int, seed: int) -> list[Mutant]:
    """``count`` mutants spread evenly over the files (round robin over shuffled lists)."""
    generator = random.Random(seed)
    pools = {path: generator.sample(mutants, len(mutants)) for path, mutants in per_file.items()}
    chosen: list[Mutant] = []
    while len(chosen) < count and any(pools.values()):
        for path in sorted(pools):
            if pools[path] and len(chosen) < count:
                chosen.append(pools[path].pop())
    return chosen


# ---------------------------------------------------------------------------
# Running the tests on a copy
# ---------------------------------------------------------------------------


def copy_repository(source: Path) -> Path:
    """The repository's files (tracked, and untracked but not ignored) in a new temporary dir."""
    listed = subprocess.run(["git", "-C", str(source), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    destination = Path(tempfile.mkdtemp(prefix="symad-mutation-"))
    for name in filter(None, listed.decode().split("\0")):
        path = source / name
        if path.is_file():  # a tracked file deleted in the working tree is left out
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination / name)
    return destination


def run_tests(copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, float]:
    """("killed" | "survived" | "timeout" | "error", seconds) of the tests on the copy."""
    cache = tempfile.mkdtemp(prefix="symad-mutation-cache-")
    environment = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1",
                       SYMAD_CACHE_DIR=cache)
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    started = time.monotonic()
    # A session of its own, so that a timeout or an interrupt ends pytest's children too.
    process = subprocess.Popen(command, cwd=copy, env=environment, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return "timeout", time.monotonic() - started
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    seconds = time.monotonic() - started
    # pytest: 0 all passed, 1 some failed; 2 interrupted, 3 internal error, 4 usage, 5 no tests.
    return {0: "survived", 1: "killed"}.get(code, "error"), seconds


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=40, help="mutants to run (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="which mutants (default 0)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds per mutant's tests; past it the mutant counts as killed")
    parser.add_argument("--files", nargs="*", help="only these targets (paths as in TARGETS)")
    parser.add_argument("--source", type=Path, default=ROOT,
                        help="the repository to copy (default: this one)")
    parser.add_argument("--list", action="store_true", help="count candidate mutants and stop")
    parser.add_argument("--mutant", action="append", metavar="PATH:LINE:COLUMN:AFTER",
                        help="run this mutant only (repeatable), e.g. to see a new test kill it")
    parser.add_argument("--run-equivalent", action="store_true",
                        help="run the sampled mutants listed in EQUIVALENT too (each should "
                             "survive; one that is killed is a wrong entry)")
    parser.add_argument("--json", type=Path, help="write every mutant's outcome here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    options = parser.parse_args(argv)

    targets = [t for t in TARGETS if not options.files or t.path in options.files]
    if not targets:
        parser.error(f"--files names none of {[t.path for t in TARGETS]}")
    source = options.source.resolve()
    if options.list:
        found = {t.path: mutants_of(t, (source / t.path).read_text()) for t in targets}
        for path, mutants in found.items():
            equivalent = [m for m in mutants if equivalence(m)]
            print(f"{path}: {len(mutants)} candidate mutants, {len(equivalent)} of them listed "
                  "as equivalent")
            for mutant in equivalent:
                print(f"  equivalent: {mutant.describe()}")
        check_equivalent_list(found)
        return 0

    # Ctrl-C and SIGTERM interrupt, so the finally clauses below restore the files. SIGINT's
    # handler is set explicitly: a process started in the background by a script inherits
    # SIGINT ignored, and would run on through an interrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    copy = copy_repository(source)
    assert copy.resolve() != source and source not in copy.resolve().parents
    # Mutants are found in the copy: the working tree may change while the run goes on.
    originals = {t.path: (copy / t.path).read_text() for t in targets}
    before = {path: digest(copy / path) for path in originals}
    per_file = {t.path: mutants_of(t, originals[t.path]) for t in targets}
    for path, mutants in per_file.items():
        equivalent = sum(bool(equivalence(m)) for m in mutants)
        print(f"{path}: {len(mutants)} candidate mutants ({equivalent} listed as equivalent)")
    check_equivalent_list(per_file)
    wanted = [parse_mutant(text) for text in options.mutant or ()]
    results: list[Mutant] = []
    interrupted = False
    try:
        print(f"copy: {copy}")
        usable = []
        for target in targets:  # the unmutated tests must pass, or no mutant can survive
            outcome, seconds = run_tests(copy, target.tests, options.timeout)
            print(f"baseline {target.path}: {'passes' if outcome == 'survived' else outcome} "
                  f"({seconds:.0f} s)")
            if outcome == "survived":
                usable.append(target.path)
            else:
                print(f"  skipping {target.path}: its tests do not pass unmutated")
        pools = {p: m for p, m in per_file.items() if p in usable}
        if wanted:
            chosen = [m for mutants in pools.values() for m in mutants
                      if (m.path, m.line, m.column, m.after) in wanted]
            if len(chosen) != len(wanted):
                print(f"--mutant: found {len(chosen)} of the {len(wanted)} mutants named "
                      "(see --list for the candidates)")
        else:
            chosen = sample(pools, options.sample, options.seed)
        for mutant in chosen:
            mutant.equivalent = equivalence(mutant)
        for number, mutant in enumerate(chosen, 1):
            path = copy / mutant.path
            if mutant.equivalent and not options.run_equivalent:
                mutant.outcome = "equivalent"
                results.append(mutant)
                print(f"[{number}/{len(chosen)}] {'equivalent':8}  (not run) "
                      f"{mutant.describe()}", flush=True)
                continue
            try:
                path.write_text(apply(originals[mutant.path], mutant))
                mutant.outcome, mutant.seconds = run_tests(copy, mutant.tests, options.timeout)
            finally:
                path.write_text(originals[mutant.path])
            results.append(mutant)
            print(f"[{number}/{len(chosen)}] {mutant.outcome:8} {mutant.seconds:5.0f} s  "
                  f"{mutant.describe()}", flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: the mutated file is restored; the counts below are partial")
    finally:
        for relative, text in originals.items():
            (copy / relative).write_text(text)
        changed = [p for p in originals if digest(copy / p) != before[p]]
        print(f"restored {len(originals)} files; "
              f"differing from their originals: {changed or 'none'}")
        if options.keep:
            print(f"kept {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)

    report(results)
    if options.json:
        options.json.write_text(json.dumps([vars(m) | {"tests": list(m.tests)} for m in results],
                                           indent=1))
    return 130 if interrupted else 0


def parse_mutant(text: str) -> tuple[str, int, int, str]:
    """``PATH:LINE:COLUMN:AFTER`` (as --list and the report print them) as a tuple."""
    try:
        path, line, column, after = text.split(":", 3)
        return path, int(line), int(column), after.strip("'\"")
    except ValueError:
        raise SystemExit(f"--mutant {text!r}: expected PATH:LINE:COLUMN:AFTER") from None


def check_equivalent_list(per_file: dict[str, list[Mutant]]) -> None:
    """Say which EQUIVALENT entries match no candidate: the code they describe has changed."""
    for entry in EQUIVALENT:
        if entry.path in per_file and not any(entry.matches(m) for m in per_file[entry.path]):
            print(f"warning: EQUIVALENT entry {entry.site!r} ({entry.before!r}) matches no "
                  f"candidate of {entry.path}; update or remove it")


def report(results: list[Mutant]) -> None:
    """Kill rates over the mutants that ran and are not listed as equivalent; then, by name,
    the survivors and the equivalent mutants (left out of the rates)."""
    if not results:
        print("no mutant ran")
        return
    equivalent = [m for m in results if m.equivalent]
    counted = [m for m in results if not m.equivalent
               and m.outcome in ("killed", "timeout", "survived")]
    print("\nkill rate per file (killed, incl. timeouts / run, equivalent mutants left out):")
    for path in sorted({m.path for m in results}):
        mine = [m for m in counted if m.path == path]
        killed = sum(m.outcome != "survived" for m in mine)
        rate = f" = {killed / len(mine):.0%}" if mine else ""
        same = sum(m.path == path for m in equivalent)
        print(f"  {path}: {killed}/{len(mine)}{rate}" + (f" (+{same} equivalent)" if same else ""))
    if counted:
        killed = sum(m.outcome != "survived" for m in counted)
        timeouts = sum(m.outcome == "timeout" for m in counted)
        errors = sum(not m.equivalent and m.outcome == "error" for m in results)
        print(f"total: {killed}/{len(counted)} = {killed / len(counted):.0%} killed "
              f"({timeouts} by timeout); {len(equivalent)} equivalent, left out; "
              f"{errors} not counted (test errors)")
    else:
        print("no mutant that is not listed as equivalent ran")
    survivors = [m for m in counted if m.outcome == "survived"]
    if survivors:
        print("survivors (a missing test, or an equivalent change not yet in EQUIVALENT):")
        for mutant in survivors:
            print(f"  {mutant.describe()}   [{mutant.path}:{mutant.line}:{mutant.column}:"
                  f"{mutant.after}]")
    if equivalent:
        print("equivalent (listed in EQUIVALENT; not in the rates):")
        for mutant in equivalent:
            ran = "" if mutant.outcome == "equivalent" else f" -- ran: {mutant.outcome}"
            print(f"  {mutant.describe()}   ({mutant.equivalent}){ran}")
        wrong = [m for m in equivalent if m.outcome in ("killed", "timeout")]
        if wrong:
            print(f"{len(wrong)} mutant(s) listed as equivalent were killed: check those "
                  "EQUIVALENT entries (a timeout may only be slowness)")

if __name__ == "__main__":
    sys.exit(main())
