"""Every LaTeX string symad exports renders in KaTeX (the docs site's renderer), run through node.

Two checks: a fixed set of samples covering every kind of output (labels, matrices,
cases, custom primitives, hostile names), and every LaTeX string the rest of the
test suite exported (recorded by tests/conftest.py; that test is moved to the end).

Where KaTeX comes from: ``.ci/run`` installs it (the version the site serves) with
npm into ``.ci/node_modules``, which git ignores; a folder on ``NODE_PATH`` works too.
Without node, or without the package, the tests skip and say so, except under
``SYMAD_REQUIRE_KATEX=1`` (set by ``.ci/run``), where a missing KaTeX fails them.
SymPy's parse_latex round trips (tests/test_latex.py) run everywhere; this adds the
commands SymPy's parser does not know (\\operatorname, bmatrix, cases, \\nabla).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp

NODE = shutil.which("node")
LOCAL_MODULES = Path(__file__).resolve().parents[1] / ".ci" / "node_modules"
INSTALL_HINT = ("run .ci/run, or: npm install --prefix .ci --no-save katex@0.16.11 "
                "(or put a folder holding katex on NODE_PATH)")

RENDER = r"""
const katex = require('katex');
const items = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const errors = [];
for (const tex of items) {
  try { katex.renderToString(tex, {displayMode: true, throwOnError: true, strict: 'error'}); }
  catch (e) { errors.push(String(e.message) + ' IN ' + tex); }
}
process.stdout.write(JSON.stringify(errors));
"""


def node_environment():
    paths = [str(LOCAL_MODULES), os.environ.get("NODE_PATH", "")]
    return dict(os.environ, NODE_PATH=os.pathsep.join(filter(None, paths)))


def missing(reason):
    if os.environ.get("SYMAD_REQUIRE_KATEX") == "1":
        pytest.fail(f"SYMAD_REQUIRE_KATEX=1 but {reason}")
    pytest.skip(reason)


def require_katex():
    if NODE is None:
        missing(f"node is not installed: KaTeX runs under node (install nodejs, then {INSTALL_HINT})")
    probe = subprocess.run([NODE, "-e", "console.log(require('katex').version)"],
                           capture_output=True, text=True, env=node_environment())
    if probe.returncode != 0:
        missing("the katex npm package is not installed: " + INSTALL_HINT)


def katex_errors(texts):
    result = subprocess.run([NODE, "-e", RENDER], input=json.dumps(texts), capture_output=True,
                            text=True, check=True, timeout=300, env=node_environment())
    return json.loads(result.stdout)


def cli_latex(command, expression, *wrt):
    """What ``symad COMMAND EXPR --wrt ... --latex`` prints (run in-process)."""
    import contextlib
    import io

    from symad.cli import main

    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert main([command, expression, "--wrt", *wrt, "--latex"]) == 0
    return output.getvalue().strip()


def exported_samples(softsign):
    f = lambda x1, x2: np.log(x1) + x1 * x2 - np.sin(x2)  # noqa: E731

    def model(w, x):
        z = w @ x
        return (snp.sigmoid(z[0]) + snp.softplus(z[1]) + np.cbrt(x[0]) + np.expm1(x[1])
                + np.log1p(x[0] ** 2) + snp.erf(z[0]) + np.arctan2(x[0], x[1]) + np.abs(z[1])
                + snp.where(x[0] > x[1], np.tanh(x[0]), np.arcsinh(x[1])) + softsign(x[0])
                + sd.stop_gradient(np.maximum(x[0], x[1])) + np.log2(x[1] ** 2) ** 2)

    w, x = np.ones((2, 2)), np.ones(2)
    samples = [
        sd.latex(f, 1.0, 1.0), sd.grad(f, (0, 1)).trace(1.0, 1.0).latex(),
        sd.hessian(f, (0, 1)).trace(1.0, 1.0).latex(), sd.latex(model, w, x),
        sd.grad(model, (0, 1)).trace(w, x).latex(), sd.hessian(model, 1).trace(w, x).latex(),
        sd.jacobian(lambda v: v ** 2 * v[0]).trace(x).latex(matrix="matrix"),
        sd.derivative(lambda t: np.exp(-t ** 2), 4).trace(0.0).latex(),
        sd.trace(f, 1.0, 1.0)._repr_latex_()[1:-1],
        *(cli_latex(command, expression, *wrt) for command, expression, *wrt in [
            ("diff", "log(x) + x*y - sin(y)", "x", "y"), ("hessian", "x**2*y + y**3/3", "x", "y"),
            ("taylor", "exp(sin(x))", "x")]),
    ]
    # Array programs in index notation: temporaries, sums, limits, pieces, deltas, constants.
    v, m = np.arange(5.0), np.ones((3, 4))
    samples += [
        sd.grad(lambda v: np.sum(np.sin(v) * np.exp(-v ** 2))).trace(v).latex(),
        sd.grad(lambda m, w: np.sum(np.tanh(m @ w)), (0, 1)).trace(m, np.ones((4, 2))).latex(),
        sd.trace(lambda v: (np.cumsum(v), np.roll(v, 2) * v, np.pad(v[::2], (1, 0)),
                            np.concatenate([v, v[:2]]), np.max(m, axis=0), snp.logsumexp(m)), v).latex(),
        sd.grad(lambda v: np.sum(v[[0, 2, 2, 4]] * np.array([0.5, 2.0, 3.0, 1.0]) + np.diff(v) ** 2)).trace(v).latex(),
        sd.jacobian(lambda v: np.sin(v) * v[0]).trace(v).latex(),
        sd.hessian(lambda m: np.sum(np.sin(m.reshape(-1)) ** 2)).trace(m).latex(),
        sd.trace(lambda v: np.where(v > 0, v, -v) + np.arange(25.0).reshape(5, 5) @ v, v).latex(),
    ]
    for name in ["}\\input{/etc/passwd}", "a'b\"c", "x\ny", "$x$", "50%", "#1", "~^_&", "__"]:
        symbol = sympy.Symbol(name)
        F = sd.from_sympy(sympy.sin(symbol) * symbol, [symbol])
        F.name = name
        custom = sd.primitive(lambda y: y, name=name)
        p = sd.Parameter(2.0, name=name)
        samples += [F.latex(), sd.grad(F).trace(1.0).latex(),
                    sd.trace(lambda y, c=custom, q=p: c(y) ** 2 + y * q, 1.0, name=name).latex(),
                    sd.grad(lambda d, key=name: np.sum(np.sin(d[key]) ** 2)).trace({name: v}).latex()]
    return samples


def test_every_exported_form_renders_in_katex(softsign_primitive):
    require_katex()
    assert katex_errors(exported_samples(softsign_primitive)) == []


def test_katex_would_catch_a_broken_formula():
    require_katex()
    assert len(katex_errors([r"\frac{1}{", r"\input{/etc/passwd}"])) == 2


def test_every_latex_string_the_suite_exported_renders(exported_latex, softsign_primitive):
    # Runs last (tests/conftest.py): by then every other test has exported its LaTeX.
    require_katex()
    if not exported_latex:  # run on its own: export the samples, through the recorder
        exported_samples(softsign_primitive)
    texts = list(dict.fromkeys(exported_latex))
    assert len(texts) >= 20, "the recorder in tests/conftest.py saw no exports"
    assert katex_errors(texts) == []
