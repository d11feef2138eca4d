"""Other projects' gradient tests, run unchanged through symad (issue 29).

    python benchmarks/foreign_suites.py                 # autograd's NumPy tests, then JAX's
    python benchmarks/foreign_suites.py --json out.json --show-failures

**autograd.** The script downloads autograd's source distribution (``pip download --no-deps
--no-binary :all: autograd==1.9.1``) into a cache directory, and runs five of its test files
-- ``test_numpy``, ``test_scalar_ops``, ``test_systematic``, ``test_linalg``,
``test_wrappers`` -- unchanged under pytest, with a package named ``autograd`` first on
``sys.path`` that it generates beside them: ``autograd.numpy`` is ``symad.numpy`` (what a
user porting autograd code imports in its place), and NumPy for the names symad.numpy does
not define (its ``random``, ``linalg``, ``fft`` are NumPy's, traced on symad's tracers); ``autograd.grad``,
``value_and_grad``, ``jacobian``, ``hessian``... are symad's transforms
(``benchmarks/foreign_checks.py``); ``autograd.test_util.check_grads`` compares symad's
``jvp`` and ``vjp`` with central differences, forward and reverse, up to ``order``. No
autograd code is kept in this repository, and none of autograd's differentiation runs.

**JAX.** ``--suite jax`` (or the default, both) runs the gradient cases of JAX's
``tests/lax_numpy_test.py`` through symad (``benchmarks/foreign_jax.py``: the definition of a
gradient case, and how ``jnp``, ``jax.grad``... and ``check_grads`` are routed to symad).
JAX's source distribution has no ``tests/`` and GitHub is out of reach from the benchmark
machine, so the file is the stored copy of ``jax-ml/jax`` at commit
``0001fb9b788442042ce11be7430ad3dad5b2ed4c``, assembled page by page into the cache directory
as ``jax-0001fb9b-lax_numpy_test.py`` (258,783 characters; never into this repository), or
any local copy given with ``--jax-tests FILE``. Without it the line says so and nothing is
counted. JAX itself (the ``bench`` extra) builds the cases; ``absl-py``, which JAX's test
utilities import, is installed into the cache directory with pip on first use.

Each test is counted once: **pass**, **fail** (an assertion: a derivative or value that
disagrees), **error** (an exception: a refusal or a crash) or **not applicable** -- a test
that exercises autograd itself rather than gradients (its own ``np.where`` wrapper's dtypes,
its primitive-definition API, its tracer's boxes), each with its reason in the report.
Failures are grouped by cause (the first line of the error, the traced function's name
elided). Each test runs under a time limit (``--timeout``, 120 s).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: benchmarks.foreign_jax is imported from here
    sys.path.insert(0, str(ROOT))

AUTOGRAD_VERSION = "1.9.1"
AUTOGRAD_FILES = ["test_numpy.py", "test_scalar_ops.py", "test_systematic.py", "test_linalg.py",
                  "test_wrappers.py"]
JAX_VERSION = "0.10.2"

#: Tests that check autograd itself, not derivatives: counted as not applicable, with why.
NOT_APPLICABLE = {
    "test_custom_where_dtypes": "checks the dtypes of autograd's own np.where wrapper, no derivative",
    "test_custom_where": "checks autograd's own np.where wrapper's keywords, no derivative",
    "test_partial": "checks that autograd.grad accepts a functools.partial, without calling it",
    "test_wrapped_name_and_docs": "checks the __name__ and __doc__ of autograd's own functions",
}

#: Failures where symad follows JAX's documented convention and autograd's test another:
#: still counted as failures, and listed apart in the report.
CONVENTIONS = {
    "test_abs": "abs'(0) = 1, JAX's convention (autograd's central difference at 0 gives 0)",
    "test_absolute": "abs'(0) = 1, JAX's convention (autograd's central difference at 0 gives 0)",
    "test_std": "the standard deviation of one element: JAX's derivative, not the central "
                "difference of a kink",
    # Not JAX's convention (JAX keeps float16, as autograd does) but symad's contract,
    # SPEC section 4: results are float64 unless every input is float32.
    "test_dtypes": "float16 inputs give float64 gradients: SPEC section 4's contract, float64 "
                   "unless every input is float32 (autograd and JAX keep float16)",
}
# eigh reads one triangle of the (non-symmetric) random matrix these tests pass: symad, as
# JAX, differentiates along symmetric directions (docs/tutorials/linalg.md); autograd's
# central differences move the unread triangle too, which changes nothing.
CONVENTIONS.update({name: "eigh of a non-symmetric matrix: the gradient along symmetric "
                          "directions (JAX's), not along the triangle NumPy reads"
                    for name in ("test_eigvalh_lower", "test_eigvalh_upper",
                                 "test_eigvalh_lower_broadcasting",
                                 "test_eigvalh_upper_broadcasting")})
CONVENTIONS.update({name: "eigh of a non-Hermitian complex matrix: the gradient along Hermitian "
                          "directions (JAX's), not along the triangle NumPy reads"
                    for name in ("test_eigvalh_lower_complex", "test_eigvalh_upper_complex")})

# ---------------------------------------------------------------------------
# The generated autograd package: thin modules that import benchmarks.foreign_checks
# ---------------------------------------------------------------------------

_SHIM = {
    "autograd/__init__.py": '''\
from builtins import dict, list, tuple
from benchmarks.foreign_checks import (
    checkpoint, elementwise_grad, grad, grad_and_aux, hessian, hessian_tensor_product, jacobian,
    make_ggnvp, make_hvp, make_jvp, make_vjp, tensor_jacobian_product, value_and_grad)
''',
    # autograd.numpy is what a user porting autograd code imports instead: symad.numpy, and
    # NumPy for the names it does not define (symad traces NumPy's functions on its tracers).
    "autograd/numpy/__init__.py": '''\
import sys as _sys
import numpy as _numpy
import symad.numpy as _snp
from numpy import *
if {symad}:
    from symad.numpy import *
from benchmarks.foreign_checks import not_applicable as _not_applicable
class _Merged(type(_sys)):
    """A submodule: symad.numpy's names (snp.linalg.norm), then NumPy's (np.linalg.svd)."""
    def __init__(self, name, *spaces):
        super().__init__(name)
        self._spaces = spaces
    def __getattr__(self, name):
        for space in self._spaces:
            if hasattr(space, name):
                return getattr(space, name)
        raise AttributeError(name)
# autograd.numpy.linalg's own helpers, which its tests call (test_pinv: np.linalg._dot,
# np.linalg.T): a matrix product and a transpose over the last two axes, in NumPy's terms,
# so they reach symad's tracers through NumPy's dispatch as any NumPy call does.
class _AutogradLinalgHelpers:
    _dot = staticmethod(lambda a, b: _numpy.matmul(a, b))
    T = staticmethod(lambda a: _numpy.swapaxes(a, -1, -2))
for _name in ("random", "linalg", "fft"):
    _spaces = ([getattr(_snp, _name)] if {symad} and hasattr(_snp, _name) else []) + [getattr(_numpy, _name)]
    if _name == "linalg":
        _spaces.append(_AutogradLinalgHelpers)
    _sys.modules[__name__ + "." + _name] = globals()[_name] = _Merged(__name__ + "." + _name, *_spaces)
def __getattr__(name):
    for _namespace in (_snp, _numpy) if {symad} else (_numpy,):
        if hasattr(_namespace, name):
            return getattr(_namespace, name)
    if name.startswith("__"):
        raise AttributeError(name)
    return _not_applicable(f"autograd.numpy.{name}", "autograd's own function, not NumPy's")
''',
    "autograd/scipy/__init__.py": "",
    "autograd/test_util.py": '''\
from benchmarks.foreign_checks import check_equivalent, check_grads, combo_check, scalar_close
''',
    "autograd/tracer.py": "from benchmarks.foreign_checks import isbox\n",
    "autograd/core.py": '''\
from benchmarks.foreign_checks import make_vjp, not_applicable
primitive = not_applicable("autograd.core.primitive", "autograd's primitive-definition API "
                           "(defvjp, defgrad); symad's is @sd.primitive with .defpartials")
''',
    "autograd/util.py": '''\
from benchmarks.foreign_checks import not_applicable
quick_grad_check = not_applicable("autograd.util.quick_grad_check", "a deprecated autograd helper")
''',
}


def cache_dir() -> Path:
    try:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("symad")) / "foreign-suites"
    except ImportError:
        base = Path(tempfile.gettempdir()) / "symad-foreign-suites"
    base.mkdir(parents=True, exist_ok=True)
    return base


def fetch_autograd(cache: Path) -> Path:
    """autograd's unpacked source distribution (downloaded once into ``cache``)."""
    unpacked = cache / f"autograd-{AUTOGRAD_VERSION}"
    if not (unpacked / "tests").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"autograd=={AUTOGRAD_VERSION}", "-d", str(cache)],
                       check=True)
        with tarfile.open(cache / f"autograd-{AUTOGRAD_VERSION}.tar.gz") as archive:
            archive.extractall(cache, filter="data")
    return unpacked


def fetch_jax_tests(cache: Path, given: str | None) -> tuple[Path | None, str]:
    """``(lax_numpy_test.py, "")``, or ``(None, why there is none)``."""
    from benchmarks.foreign_jax import JAX_COMMIT, JAX_FILE_CHARS, JAX_FILE_NAME

    if given:
        return Path(given), ""
    target = cache / JAX_FILE_NAME
    if not target.exists():
        return None, (f"no copy: JAX's sdist has no tests/; assemble jax-ml/jax's "
                      f"tests/lax_numpy_test.py at commit {JAX_COMMIT} into {target}, or pass "
                      "--jax-tests FILE")
    size = len(target.read_text(encoding="utf-8"))
    if size != JAX_FILE_CHARS:
        return None, f"{target} has {size:,} characters, not {JAX_FILE_CHARS:,}: assemble it again"
    return target, ""


def run_jax(cache: Path, tests: Path, timeout: float) -> tuple[list[dict], str]:
    """JAX's gradient cases through symad, in a child process: ``(records, note)``."""
    site = cache / "site-absl"
    if not (site / "absl").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(site),
                        "absl-py"], check=True)
    with tempfile.TemporaryDirectory(prefix="symad-jax-") as work:
        output = Path(work) / "records.json"
        env = dict(os.environ, SYMAD_PROMOTE=os.environ.get("SYMAD_PROMOTE", "0"),
                   JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu",
                   PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "foreign_jax.py"), str(tests),
                        str(output), str(timeout)], cwd=work, env=env, stdout=subprocess.DEVNULL,
                       check=False)
        if not output.exists():
            return [], "the child process wrote no records (it crashed before the first case)"
        saved = json.loads(output.read_text())
        return saved["records"], saved["note"]


def prepare_autograd(source: Path, work: Path, namespace: str) -> Path:
    """The test directory: autograd's five test files and helpers, and the shim package
    (whose ``autograd.numpy`` is symad.numpy then NumPy, or with ``namespace="numpy"`` NumPy
    alone)."""
    tests = work / "tests"
    tests.mkdir(parents=True)
    for name in [*AUTOGRAD_FILES, "conftest.py", "numpy_utils.py"]:
        shutil.copy(source / "tests" / name, tests / name)
    for relative, text in _SHIM.items():
        path = work / "shim" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{symad}", str(namespace == "symad")))
    return tests


# ---------------------------------------------------------------------------
# Running pytest (in a child process) and recording every test's outcome
# ---------------------------------------------------------------------------

def _cause(excinfo) -> str:
    """The first line of an error, with the traced function's name and numbers elided."""
    text = str(excinfo.value).strip().splitlines()
    line = text[0] if text else ""
    line = re.sub(r"function '[^']*'", "function '…'", line)
    line = re.sub(r"0x[0-9a-f]+", "0x…", line)
    line = re.sub(r"-?\d+\.\d+(e-?\d+)?", "…", line)
    return f"{excinfo.type.__name__}: {line}"[:160]


class Recorder:
    """A pytest plugin: one record per test (file, name, outcome, cause), and a time limit."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.records: dict = {}

    def _alarm(self, signum, frame):
        raise TimeoutError(f"over the time limit of {self.timeout:g} s")

    def pytest_runtest_call(self, item):
        signal.signal(signal.SIGALRM, self._alarm)
        signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def pytest_runtest_teardown(self, item):
        signal.setitimer(signal.ITIMER_REAL, 0)

    def pytest_collectreport(self, report):
        if report.failed:  # a file that does not import: one error, with its cause
            cause = str(report.longrepr).strip().splitlines()[-1][:160]
            self.records[report.nodeid] = {"file": report.nodeid.rsplit("/", 1)[-1],
                                           "test": "(collection)", "outcome": "error",
                                           "cause": cause}

    def pytest_runtest_makereport(self, item, call):
        if call.when == "teardown" or (call.when == "setup" and call.excinfo is None):
            return
        record = {"file": item.location[0].rsplit("/", 1)[-1], "test": item.name}
        if call.excinfo is None:
            record["outcome"] = "pass"
        elif call.excinfo.typename == "NotApplicable":
            record.update(outcome="n/a", cause=str(call.excinfo.value))
        else:
            failed = call.excinfo.errisinstance(AssertionError)
            record.update(outcome="fail" if failed else "error", cause=_cause(call.excinfo))
        self.records[item.nodeid] = classify(record)


def classify(record: dict) -> dict:
    """``record`` with the not-applicable and documented-convention tables applied."""
    name = record["test"].split("[")[0]
    if name in NOT_APPLICABLE:
        record.update(outcome="n/a", cause=NOT_APPLICABLE[name])
    elif name in CONVENTIONS and record["outcome"] == "fail":
        record["convention"] = CONVENTIONS[name]
    return record


def run_pytest_child(tests: str, output: str, timeout: float, files: list[str]) -> int:
    """In the child: run autograd's files under pytest and write the records as JSON."""
    import pytest

    recorder = Recorder(timeout)
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", tests,
                        "-W", "ignore::DeprecationWarning",
                        *files], plugins=[recorder])
    Path(output).write_text(json.dumps(list(recorder.records.values())))
    return 0 if code in (0, 1) else int(code)


def run_autograd(cache: Path, timeout: float, files: list[str], namespace: str) -> list[dict]:
    source = fetch_autograd(cache)
    with tempfile.TemporaryDirectory(prefix="symad-autograd-") as work:
        tests = prepare_autograd(source, Path(work), namespace)
        output = Path(work) / "records.json"
        env = dict(os.environ, SYMAD_PROMOTE=os.environ.get("SYMAD_PROMOTE", "0"),
                   PYTHONPATH=os.pathsep.join([str(Path(work) / "shim"), str(tests), str(ROOT)]))
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(tests),
                        str(output), "--timeout", str(timeout), "--files", *files], cwd=tests, env=env,
                       stdout=subprocess.DEVNULL, check=False)
        return json.loads(output.read_text()) if output.exists() else []


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

OUTCOMES = ("pass", "fail", "error", "n/a")


def report(records: list[dict], show_failures: bool) -> str:
    lines = [f"{'file':24} {'tests':>6} " + " ".join(f"{o:>6}" for o in OUTCOMES) + "   pass %"]
    per_file = collections.defaultdict(collections.Counter)
    for record in records:
        per_file[record["file"]][record["outcome"]] += 1
    total = collections.Counter()
    for name in [*AUTOGRAD_FILES, *sorted(set(per_file) - set(AUTOGRAD_FILES))]:
        counts = per_file.get(name)
        if counts:
            total.update(counts)
            lines.append(_row(name, counts))
    lines.append(_row("all", total))
    causes = collections.Counter(r.get("convention") and f"(documented convention) {r['convention']}"
                                 or r["cause"] for r in records if r["outcome"] in ("fail", "error"))
    lines.append(f"\n{sum(causes.values())} failing tests by cause:")
    lines += [f"{count:5}  {cause}" for cause, count in causes.most_common()]
    not_applicable = collections.Counter(r["cause"] for r in records if r["outcome"] == "n/a")
    lines.append(f"\n{sum(not_applicable.values())} not applicable:")
    lines += [f"{count:5}  {cause}" for cause, count in not_applicable.most_common()]
    if show_failures:
        lines.append("\nfailing tests:")
        lines += [f"  {r['file']}::{r['test']}  {r['outcome']}: {r['cause']}"
                  for r in records if r["outcome"] in ("fail", "error")]
    return "\n".join(lines)


def _row(name: str, counts: collections.Counter) -> str:
    applicable = counts["pass"] + counts["fail"] + counts["error"]
    share = 100.0 * counts["pass"] / applicable if applicable else 0.0
    return (f"{name:24} {sum(counts.values()):6} " + " ".join(f"{counts[o]:6}" for o in OUTCOMES)
            + f"   {share:5.1f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=["autograd", "jax", "both"], default="both",
                        help="whose tests to run (default: both)")
    parser.add_argument("--json", help="save the per-test records here")
    parser.add_argument("--show-failures", action="store_true", help="list every failing test")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    parser.add_argument("--jax-tests", help="a local copy of JAX's tests/lax_numpy_test.py")
    parser.add_argument("--files", nargs="+", default=AUTOGRAD_FILES,
                        help="autograd's test files to run (default: the five)")
    parser.add_argument("--namespace", choices=["symad", "numpy"], default="symad",
                        help="autograd.numpy as symad.numpy then NumPy (default), or NumPy alone")
    parser.add_argument("--from-json", help="report a run saved with --json again")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child:
        return run_pytest_child(*arguments.child, arguments.timeout, arguments.files)
    if arguments.from_json:  # a saved run, reported again with today's tables
        saved = json.loads(Path(arguments.from_json).read_text())
        if saved.get("autograd"):
            print(report([classify(r) for r in saved["autograd"]], arguments.show_failures))
        if isinstance(saved.get("jax"), dict):
            print(report(saved["jax"]["records"], arguments.show_failures))
        return 0
    cache, saved = cache_dir(), {}
    if arguments.suite in ("autograd", "both"):
        started = time.perf_counter()
        saved["autograd"] = run_autograd(cache, arguments.timeout, arguments.files,
                                         arguments.namespace)
        print(f"autograd {AUTOGRAD_VERSION}'s NumPy gradient tests through symad, autograd.numpy "
              f"as {'symad.numpy, then NumPy' if arguments.namespace == 'symad' else 'NumPy'} "
              f"({time.perf_counter() - started:.0f} s):\n")
        print(report(saved["autograd"], arguments.show_failures))
    if arguments.suite in ("jax", "both"):
        saved["jax"] = _jax_part(cache, arguments)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(saved, indent=1))
    return 0


def _jax_part(cache: Path, arguments) -> dict | str:
    """Run and report JAX's gradient cases; what ``--json`` keeps of them."""
    from benchmarks.foreign_jax import DEFINITION, JAX_COMMIT

    tests, why = fetch_jax_tests(cache, arguments.jax_tests)
    if tests is None:
        print(f"\nJAX's lax_numpy_test gradient cases: {why}")
        return why
    started = time.perf_counter()
    records, note = run_jax(cache, tests, arguments.timeout)
    source = f"jax-ml/jax@{JAX_COMMIT[:8]}" if not arguments.jax_tests else str(tests)
    print(f"\nJAX's lax_numpy_test gradient cases ({source}, JAX {JAX_VERSION} builds them) "
          f"through symad ({time.perf_counter() - started:.0f} s):\n{DEFINITION}"
          + (f"\nnote: {note}" if note else "") + "\n")
    print(report(records, arguments.show_failures))
    return {"file": str(tests), "commit": JAX_COMMIT, "note": note, "records": records}


if __name__ == "__main__":
    sys.exit(main())
