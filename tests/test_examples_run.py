"""Smoke tests: every example in examples/ runs as a script, small and fast, and says the right thing.

Each runs in a subprocess (as a user would run it) in a temporary directory,
with the repository on PYTHONPATH so an uninstalled checkout works too. The
pictures are drawn when matplotlib is installed; without it the examples say
so, and the tests check that message instead.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run(script: str, *arguments: str, cwd: Path) -> str:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *arguments], cwd=cwd,
                            env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_every_example_has_a_smoke_test():
    tested = {"demo.py", "quickstart.py", "latex_report.py", "nth_derivatives.py", "batch_plot.py",
              "latex_export.py", "render_formulas.py"}  # the last two: tests/test_latex.py
    assert {path.name for path in EXAMPLES.glob("*.py")} <= tested


def test_quickstart(tmp_path):
    out = run("quickstart.py", "--points", "1000", cwd=tmp_path)
    assert "1. grad f(2, 5)        = (5.5, 1.716337814537)" in out
    assert "formula             = (x2 + 1/x1, x1 - cos(x2))" in out
    assert "1,000 points, max |error| = 0.0e+00" in out
    assert "forward == reverse  : True" in out
    assert "d^10/dx^10 (1/x) at 2 = 1771.875" in out
    assert "check_grads(f, order=2): passed" in out


def test_demo_the_readme_runs_first(tmp_path):
    out = run("demo.py", cwd=tmp_path)
    assert "grad f(2, 5)" in out and "\\begin{aligned}" in out


def test_latex_report(tmp_path, record_latex):
    out = run("latex_report.py", "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.count("$$") == 8
    for block in report.split("$$")[1::2]:
        record_latex(block.strip())  # rendered by KaTeX at the end (tests/test_katex.py)
    assert "\\frac{\\partial \\mathrm{loss}}{\\partial w_{0}}" in report
    assert "\\frac{\\partial^{2} \\mathrm{loss}}{\\partial w_{0} \\partial w_{1}}" in report
    assert "\\begin{bmatrix}" in report
    if HAS_MATPLOTLIB:
        assert (tmp_path / "out" / "report.png").read_bytes().startswith(b"\x89PNG")
    else:
        assert "matplotlib is not installed" in out


def test_nth_derivatives_reproduce_hermite_polynomials(tmp_path):
    out = run("nth_derivatives.py", "--max-order", "8", "--points", "101", cwd=tmp_path)
    assert "exp(x^2) d^4/dx^4 exp(-x^2) = 16*x**4 - 48*x**2 + 12" in out
    assert "all orders agree to 1e-10: True" in out
    errors = [float(line.split("|")[2]) for line in out.splitlines()
              if line[:2].strip().isdigit() and line.count("|") == 2]
    assert len(errors) == 9 and max(errors) < 1e-12


def test_batch_plot(tmp_path):
    out = run("batch_plot.py", "--points", "401", "--output", "plot.png", cwd=tmp_path)
    differences = [float(line.rsplit("=", 1)[1]) for line in out.splitlines() if "central" in line]
    assert len(differences) == 2 and max(differences) < 2e-3  # O(h^2) with h = 0.02
    if HAS_MATPLOTLIB:
        assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")
    else:
        assert "matplotlib is not installed" in out

