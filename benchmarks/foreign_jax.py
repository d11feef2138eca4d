"""JAX's ``lax_numpy_test`` gradient cases, run unchanged with symad computing the derivatives.

``benchmarks/foreign_suites.py`` calls this part (``--suite jax``). The test file is not in
this repository and is not downloaded: JAX's source distribution has no ``tests/`` and GitHub
is out of reach from the benchmark machine. It is the stored copy of
``jax-ml/jax/tests/lax_numpy_test.py`` at commit ``0001fb9b788442042ce11be7430ad3dad5b2ed4c``
(258,783 characters), assembled page by page into the script's cache directory
(``~/.cache/symad/foreign-suites/jax-0001fb9b-lax_numpy_test.py``) or given with
``--jax-tests FILE``. That copy carries an unresolved merge conflict in
``NumpySignaturesTest`` (a dict entry between ``<<<<<<<`` and ``>>>>>>>``); the loader keeps
the ``HEAD`` side so that the module compiles, and says so. No gradient case is touched.

**Gradient cases.** A test method is a gradient case when its body calls ``check_grads``,
``jax.grad``, ``jax.jvp``, ``jax.vjp``, ``jax.jacfwd``, ``jax.jacrev``, ``jax.hessian``,
``jax.value_and_grad`` or ``jax.linearize``, and does not call ``jax.jit`` or
``jax.make_jaxpr`` (those inspect jaxprs or JIT errors, not derivative values); every
parameterized case of such a method (absl names, as JAX's ``sample_product`` draws them with
``JAX_NUM_GENERATED_CASES=10``, float64 enabled) is counted once.

**Routing.** JAX is imported (the ``bench`` extra) to build the cases and to evaluate
functions at concrete points; symad computes every derivative. In the loaded module:

- ``check_grads`` is JAX's checker with the derivative side replaced: JAX's own
  ``check_jvp``/``check_vjp`` (central differences, its tolerances and dtype checks) compare
  against ``symad.jvp``/``symad.vjp``, forward and reverse, up to ``order``;
- ``jax`` is JAX with ``grad``, ``jvp``, ``vjp``, ``jacfwd``, ``jacrev``, ``hessian`` and
  ``value_and_grad`` taken from symad;
- ``jnp`` sends a call to ``symad.numpy`` when an argument holds a symad tracer, to
  ``jax.numpy`` otherwise (JAX arrays among traced arguments become NumPy arrays).
  Test parameters that hold ``jax.numpy`` functions themselves (``op=jnp.arcsinh``) are
  routed the same way when ``check_grads`` receives them.

Each case runs under a time limit and is counted once: pass, fail (an assertion), error (an
exception: a refusal, a missing ``symad.numpy`` function, a crash) or not applicable (JAX
skipped it).
"""

from __future__ import annotations

import ast
import functools
import re
import signal
import sys
import types
import unittest
from pathlib import Path

JAX_COMMIT = "0001fb9b788442042ce11be7430ad3dad5b2ed4c"
JAX_FILE_NAME = f"jax-{JAX_COMMIT[:8]}-lax_numpy_test.py"
JAX_FILE_CHARS = 258_783

#: Calls that make a test method a gradient case, and calls that exclude it again.
DERIVATIVE_CALLS = ("check_grads", "jax.grad", "jax.jvp", "jax.vjp", "jax.jacfwd", "jax.jacrev",
                    "jax.hessian", "jax.value_and_grad", "jax.linearize")
EXCLUDING_CALLS = ("jax.jit", "jax.make_jaxpr")
DEFINITION = (
    "gradient cases: every parameterized case of a test method whose body calls "
    + ", ".join(DERIVATIVE_CALLS) + " and not " + " or ".join(EXCLUDING_CALLS)
    + " (those inspect jaxprs or JIT errors, not derivative values)")

_CONFLICT = re.compile(r"^<<<<<<< [^\n]*\n(.*?)^=======\n.*?^>>>>>>> [^\n]*\n", re.S | re.M)


def resolve_conflicts(source: str) -> tuple[str, int]:
    """``source`` with each unresolved merge conflict replaced by its first (HEAD) side.

    >>> resolve_conflicts("a\\n<<<<<<< HEAD\\nb\\n=======\\nc\\n>>>>>>> x\\nd\\n")
    ('a\\nb\\nd\\n', 1)
    """
    return _CONFLICT.subn(r"\1", source)


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def gradient_methods(source: str) -> tuple[dict, dict]:
    """``({class: [method, ...]}, {"class.method": why excluded})`` by the definition above.

    >>> gradient_methods("class T:\\n  def testA(self):\\n    check_grads(f, (1.,), 1)\\n"
    ...                  "  def testB(self):\\n    jax.make_jaxpr(jax.grad(f))(1.)\\n")
    ({'T': ['testA']}, {'T.testB': 'calls jax.grad but also jax.make_jaxpr'})
    """
    chosen, excluded = {}, {}
    for cls in (n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)):
        for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            calls = {_dotted(n.func) for n in ast.walk(method) if isinstance(n, ast.Call)}
            derivative = [c for c in DERIVATIVE_CALLS if c in calls]
            if not derivative:
                continue
            excluding = [c for c in EXCLUDING_CALLS if c in calls]
            if excluding:
                excluded[f"{cls.name}.{method.name}"] = (
                    f"calls {derivative[0]} but also {excluding[0]}")
            else:
                chosen.setdefault(cls.name, []).append(method.name)
    return chosen, excluded


# ---------------------------------------------------------------------------
# Routing: jnp to symad.numpy on tracers, jax's transforms and check_grads to symad
# ---------------------------------------------------------------------------

def _holds_tracer(value) -> bool:
    from symad.tracer import Tracer

    if isinstance(value, Tracer):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tracer(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tracer(v) for v in value.values())
    return False


def _to_numpy(value):
    """JAX arrays (anywhere in lists, tuples, dicts) as NumPy arrays; the rest unchanged."""
    import jax
    import numpy as np

    if isinstance(value, jax.Array):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_numpy(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_numpy(v) for k, v in value.items()}
    return value


def dispatching(name: str):
    """``jnp.<name>`` that runs ``symad.numpy.<name>`` on traced arguments, JAX's otherwise.

    >>> import numpy as np, symad as sd
    >>> sin = dispatching("sin")
    >>> float(sd.grad(sin)(0.0)), type(sin(np.zeros(2))).__name__
    (1.0, 'ArrayImpl')
    """
    import jax.numpy as jnp

    import symad.numpy as snp

    real = getattr(jnp, name)

    @functools.wraps(real)
    def call(*args, **kwargs):
        if not (_holds_tracer(args) or _holds_tracer(kwargs)):
            return real(*args, **kwargs)
        if not callable(getattr(snp, name, None)):
            raise AttributeError(f"symad.numpy has no function '{name}' (called on a traced value)")
        return getattr(snp, name)(*_to_numpy(args), **_to_numpy(kwargs))
    call.symad_dispatch = name
    return call


class JnpOnSymad(types.ModuleType):
    """The test module's ``jnp``: functions dispatch (``dispatching``), the rest is JAX's."""

    def __init__(self):
        super().__init__("jnp_on_symad")

    def __getattr__(self, name):
        import jax.numpy as jnp

        real = getattr(jnp, name)
        if callable(real) and not isinstance(real, type) and not name.startswith("_"):
            return dispatching(name)
        return real


def _on_numpy_inputs(transform):
    """A symad transform whose transformed function receives JAX arrays as NumPy arrays."""
    @functools.wraps(transform)
    def wrapped(fun, *args, **kwargs):
        if transform.__name__ in ("jvp", "vjp"):  # these take the point itself
            return transform(_routed(fun), *_to_numpy(args), **kwargs)
        inner = transform(_routed(fun), *args, **kwargs)
        return lambda *xs, **kws: inner(*_to_numpy(xs), **_to_numpy(kws))
    return wrapped


def _routed(fun):
    """``fun`` itself, or its dispatching version when it is a ``jax.numpy`` function."""
    import jax.numpy as jnp

    name = getattr(fun, "__name__", None)
    if name and getattr(jnp, name, None) is fun and not isinstance(fun, type):
        return dispatching(name)
    return fun


class JaxOnSymad(types.ModuleType):
    """The test module's ``jax``: JAX, with the differentiation transforms taken from symad."""

    TRANSFORMS = ("grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian", "value_and_grad")

    def __init__(self):
        super().__init__("jax_on_symad")
        self.numpy = JnpOnSymad()

    def __getattr__(self, name):
        import jax

        import symad as sd

        if name in self.TRANSFORMS:
            return _on_numpy_inputs(getattr(sd, name))
        return getattr(jax, name)


def _sd_jvp(f, primals, tangents):
    import symad as sd

    return sd.jvp(f, tuple(_to_numpy(primals)), tuple(_to_numpy(tangents)))


def _sd_vjp(f, *primals):
    import symad as sd

    return sd.vjp(f, *_to_numpy(primals))


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """JAX's ``check_grads`` with symad's ``jvp``/``vjp`` as the derivatives under test.

    JAX's ``check_jvp``/``check_vjp`` supply the central differences, the tolerances and the
    dtype checks; order 2 checks the JVP (and the VJP applied to the output) as functions.

    >>> import numpy as np
    >>> check_grads(lambda x: x ** 3, (np.array([0.5, 2.0]),), order=2)  # no AssertionError
    """
    from jax._src import public_test_util as ptu

    eps = eps or ptu.EPS
    check_jvp = functools.partial(ptu.check_jvp, atol=atol, rtol=rtol, eps=eps)
    check_vjp = functools.partial(ptu.check_vjp, atol=atol, rtol=rtol, eps=eps)

    def check(fun, point, remaining, what):
        if "fwd" in modes:
            jvp = functools.partial(_sd_jvp, fun)
            check_jvp(fun, jvp, point, err_msg=f"JVP of {what}")
            if remaining > 1:
                check(jvp, (point, point), remaining - 1, f"JVP of {what}")
        if "rev" in modes:
            check_vjp(fun, functools.partial(_sd_vjp, fun), point, err_msg=f"VJP of {what}")
            if remaining > 1:
                def pulled_back(*xs):
                    out, pullback = _sd_vjp(fun, *xs)
                    return pullback(out)
                check(pulled_back, point, remaining - 1, f"VJP of {what}")

    check(_routed(f), tuple(args), order, getattr(f, "__name__", "f"))


# ---------------------------------------------------------------------------
# Loading the module and running the cases (in a child process)
# ---------------------------------------------------------------------------

def _load_module(path: Path):
    """``(module, source, note)``: JAX's test file compiled (conflicts resolved), re-routed."""
    source, conflicts = resolve_conflicts(Path(path).read_text(encoding="utf-8"))
    sys.argv = [sys.argv[0]]  # absl parses the command line when the module loads
    module = types.ModuleType("lax_numpy_test")
    module.__file__ = str(path)
    sys.modules["lax_numpy_test"] = module
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - JAX's own test file
    module.jnp = JnpOnSymad()
    module.jax = JaxOnSymad()
    module.check_grads = check_grads
    note = (f"{conflicts} unresolved merge conflict(s) outside the gradient cases: kept the "
            "HEAD side" if conflicts else "")
    return module, source, note


def _base_name(name: str, methods: list[str]) -> str | None:
    """The test method a generated absl case name comes from (the longest matching prefix)."""
    matching = [m for m in methods if name == m or name.startswith(m)]
    return max(matching, key=len) if matching else None


class _Outcome(unittest.TestResult):
    """One test's outcome, with the exception object kept for its cause."""

    def __init__(self):
        super().__init__()
        self.outcome, self.error, self.reason = "pass", None, ""

    def addFailure(self, test, err):  # noqa: N802 - unittest's names
        self.outcome, self.error = "fail", err[1]

    def addError(self, test, err):  # noqa: N802
        if self.outcome == "pass":
            self.outcome, self.error = "error", err[1]

    def addSkip(self, test, reason):  # noqa: N802
        self.outcome, self.reason = "n/a", f"skipped by JAX: {reason}"


def _cause(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else ""
    line = re.sub(r"function '[^']*'", "function '…'", line)
    line = re.sub(r"-?\d+\.\d+(e-?\d+)?", "…", line)
    return f"{type(error).__name__}: {line}"[:160]


def _run_cases(module, source: str, timeout: float) -> list[dict]:
    """Every gradient case of ``module``, run once under ``timeout`` seconds, as records."""
    chosen, _ = gradient_methods(source)
    methods_in = {cls.name: [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]
                  for cls in ast.parse(source).body if isinstance(cls, ast.ClassDef)}
    records = []

    def alarm(signum, frame):
        raise TimeoutError(f"over the time limit of {timeout:g} s")

    for class_name, methods in chosen.items():
        cls = getattr(module, class_name)
        for name in unittest.TestLoader().getTestCaseNames(cls):
            base = _base_name(name, methods_in[class_name])
            if base not in methods:
                continue
            outcome = _Outcome()
            signal.signal(signal.SIGALRM, alarm)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                cls(name).run(outcome)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            record = {"file": "lax_numpy_test.py", "test": f"{class_name}.{name}",
                      "method": base, "outcome": outcome.outcome}
            if outcome.error is not None:
                record["cause"] = _cause(outcome.error)
            elif outcome.reason:
                record["cause"] = outcome.reason
            records.append(record)
    return records


def run_child(path: str, output: str, timeout: float) -> int:
    """In the child process: load JAX's file, run its gradient cases, write the records.

    >>> import json, pathlib, tempfile
    >>> source = ("import unittest\\nimport jax.numpy as jnp\\n"
    ...           "from jax.test_util import check_grads\\n"
    ...           "class T(unittest.TestCase):\\n  def testSin(self):\\n"
    ...           "    check_grads(jnp.sin, (0.5,), 2)\\n")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     test, out = pathlib.Path(folder) / "t.py", pathlib.Path(folder) / "out.json"
    ...     _ = test.write_text(source)
    ...     _ = run_child(str(test), str(out), 60.0)
    ...     [(r["test"], r["outcome"]) for r in json.loads(out.read_text())["records"]]
    [('T.testSin', 'pass')]
    """
    import json

    module, source, note = _load_module(Path(path))
    records = _run_cases(module, source, timeout)
    Path(output).write_text(json.dumps({"records": records, "note": note}))
    return 0


if __name__ == "__main__":
    sys.exit(run_child(sys.argv[1], sys.argv[2], float(sys.argv[3])))
