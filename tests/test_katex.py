"""Every kind of exported LaTeX renders in KaTeX (the renderer a docs site uses), run through node.

Skipped, with the reason, when node or the katex package is missing; to run it:
``npm install katex`` in some folder and set ``NODE_PATH=<folder>/node_modules``.
SymPy's parse_latex round trips (tests/test_latex.py) run everywhere; this adds the
commands SymPy's parser does not know (\\operatorname, bmatrix, cases, \\nabla).
"""

import json
import shutil
import subprocess

import numpy as np
import pytest
import sympy

import symad as sd
import symad.numpy as snp

NODE = shutil.which("node")

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


def require_katex():
    if NODE is None:
        pytest.skip("node is not installed")
    probe = subprocess.run([NODE, "-e", "require('katex')"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the katex npm package is not installed (npm install katex; set NODE_PATH)")


def katex_errors(texts):
    result = subprocess.run([NODE, "-e", RENDER], input=json.dumps(texts), capture_output=True,
                            text=True, check=True, timeout=120)
    return json.loads(result.stdout)


def exported_samples():
    f = lambda x1, x2: np.log(x1) + x1 * x2 - np.sin(x2)  # noqa: E731

    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    @softsign.defpartials
    def _(x):
        return (1 / (1 + abs(x)) ** 2,)

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
    ]
    for name in ["}\\input{/etc/passwd}", "a'b\"c", "x\ny", "$x$", "50%", "#1", "~^_&", "__"]:
        symbol = sympy.Symbol(name)
        F = sd.from_sympy(sympy.sin(symbol) * symbol, [symbol])
        F.name = name
        custom = sd.primitive(lambda y: y, name=name)
        p = sd.Parameter(2.0, name=name)
        samples += [F.latex(), sd.grad(F).trace(1.0).latex(),
                    sd.trace(lambda y, c=custom, q=p: c(y) ** 2 + y * q, 1.0, name=name).latex()]
    return samples


def test_every_exported_form_renders_in_katex():
    require_katex()
    assert katex_errors(exported_samples()) == []


def test_katex_would_catch_a_broken_formula():
    require_katex()
    assert len(katex_errors([r"\frac{1}{", r"\input{/etc/passwd}"])) == 2
