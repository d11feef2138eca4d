"""The symad command line, run as a subprocess: outputs, exit codes, refused input."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symad.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "symad.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_diff_prints_the_gradient():
    result = run("diff", "log(x) + x*y - sin(y)", "--wrt", "x", "y")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["df/dx = y + 1/x", "df/dy = x - cos(y)"]


def test_diff_order_latex(run_here):
    result = run_here("diff", "exp(-x**2)", "--wrt", "x", "--order", "2", "--latex")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("\\begin{aligned}")
    assert "\\frac{d^{2} f}{d x^{2}} &=" in result.stdout


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def run_here(capsys):
    """The command in this process (fast); the subprocess tests cover the entry points."""
    def call(*args):
        try:
            code = main(list(args))
        except SystemExit as exit:  # argparse usage errors
            code = exit.code
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)
    return call


def test_hessian_and_c_output(run_here):
    result = run_here("hessian", "x**2*y + y**3", "--wrt", "x", "y")
    assert result.stdout.splitlines() == [
        "d2f/dxdx = 2*y", "d2f/dxdy = 2*x", "d2f/dydx = 2*x", "d2f/dydy = 6*y"]
    result = run_here("hessian", "x**2*y", "--wrt", "x", "y", "--c")
    assert result.returncode == 0 and "void symad_hessian(const double *in, double *out)" in result.stdout


def test_c_output_compiles_with_wall_werror_and_computes_the_hessian(run_here, tmp_path):
    import ctypes
    import shutil

    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler (cc/gcc/clang) on PATH")
    result = run_here("hessian", "x**2*y + sin(x*y)", "--wrt", "x", "y", "--c")
    assert result.returncode == 0, result.stderr
    (tmp_path / "h.c").write_text(result.stdout)
    subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-o", str(tmp_path / "libh.so"), str(tmp_path / "h.c"), "-lm"],
                   check=True, capture_output=True, text=True)
    function = ctypes.CDLL(str(tmp_path / "libh.so")).symad_hessian
    function.restype = None
    x, y = 0.7, -1.3
    inputs, outputs = (ctypes.c_double * 2)(x, y), (ctypes.c_double * 4)()
    function(inputs, outputs)
    s, c = math.sin(x * y), math.cos(x * y)
    assert outputs[:] == pytest.approx([2 * y - y * y * s, 2 * x + c - x * y * s,
                                        2 * x + c - x * y * s, -x * x * s], rel=1e-14)


def test_python_output_and_extra_names_come_after_wrt(run_here):
    result = run_here("diff", "a*x + log(x)", "--wrt", "x", "--python")
    assert result.returncode == 0, result.stderr
    namespace: dict = {}
    exec(result.stdout, namespace)  # noqa: S102 - the module symad just generated
    (derivative,) = namespace["run"](2.0, 3.0)  # x = 2, then a = 3: d/dx = a + 1/x
    assert float(derivative) == 3.5


def test_taylor_coefficients(run_here):
    result = run_here("taylor", "exp(sin(x))", "--wrt", "x", "--order", "3", "--at", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["c0 = 1.0", "c1 = 1.0", "c2 = 0.5", "c3 = 0.0"]
    result = run_here("taylor", "exp(x)", "--wrt", "x", "--order", "2")
    assert result.stdout.splitlines() == ["c0 = exp(x)", "c1 = exp(x)", "c2 = exp(x)/2"]


def test_python_m_symad_works_too():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "symad", "diff", "x**3", "--wrt", "x"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.stdout.strip() == "df/dx = 3*x**2"


@pytest.mark.parametrize("expression, message", [
    ("__import__('os').system('echo PWNED')", "function names"),
    ("x.real", "attribute access"),
    ("().__class__.__bases__", "attribute access"),
    ("x[0]", "subscripts"),
    ("(lambda: 1)()", "function names"),
    ("'a' + x", "numbers"),
    ("[x for x in y]", "comprehensions"),
    ("sin(x, out=x)", "keyword"),
    ("x if x else 1", "conditional"),
    ("9**9**9", "exponents"),
    ("x**2**2**2**2", "exponents"),
    ("open(x)", "not a known function"),
    ("_x + 1", "'_'"),
    ("x + " * 300 + "x", "longer than"),
    ("1/0 + x", "cannot be computed"),
    ("x +", "not a formula"),
    ("sin", "is a function"),
])
def test_refused_input_exits_with_2_and_a_message(expression, message, run_here):
    result = run_here("diff", expression, "--wrt", "x")
    assert result.returncode == 2
    assert message in result.stderr
    assert "PWNED" not in result.stdout and "Traceback" not in result.stderr


def test_hostile_input_is_refused_by_the_installed_entry_point():
    result = run("diff", "__import__('os').system('echo PWNED')", "--wrt", "x")
    assert result.returncode == 2 and "PWNED" not in result.stdout
    assert "function names" in result.stderr


def test_usage_errors_exit_with_2(run_here):
    assert run_here("diff", "x").returncode == 2  # --wrt missing
    result = run_here("diff", "x*y", "--wrt", "x", "y", "--order", "2")
    assert result.returncode == 2 and "one --wrt" in result.stderr
    result = run_here("diff", "x", "--wrt", "x", "--order", "1000")
    assert result.returncode == 2 and "--order" in result.stderr


def test_c_output_with_a_variable_exponent(run_here):
    result = run_here("diff", "x**y", "--wrt", "x", "y", "--c")
    assert result.returncode == 0, result.stderr
    assert "pow(in[0], in[1])" in result.stdout


@pytest.mark.parametrize("name", sorted(__import__("symad.cli").cli.FUNCTIONS))
def test_every_function_refuses_a_wrong_argument_count(name, run_here):
    from symad.cli import ARITY

    fewest, most = ARITY[name]
    expected = str(fewest) if fewest == most else f"{fewest} or {most}"  # zeta(x) or zeta(x, q)
    for count in {0, fewest - 1, most + 1} - {-1} - set(range(fewest, most + 1)):
        call = f"{name}({', '.join(['x'] * count)})"
        result = run_here("diff", call, "--wrt", "x")
        assert result.returncode == 2, (call, result.stderr)
        assert "Traceback" not in result.stderr
        plural = "argument" if expected == "1" else "arguments"
        assert result.stderr.strip() == f"symad: {name} takes {expected} {plural}, got {count}"


def test_wrong_arity_from_the_entry_point_is_one_line():
    result = run("diff", "sin(x, y)", "--wrt", "x")
    assert result.returncode == 2
    assert result.stderr.strip() == "symad: sin takes 1 argument, got 2"


def test_a_wrt_name_given_twice_is_refused(run_here):
    result = run_here("diff", "x", "--wrt", "x", "x")
    assert result.returncode == 2
    assert result.stderr.strip() == "symad: --wrt lists 'x' twice; name each variable once"


def test_e_to_a_power_reads_as_exp(run_here):
    assert run_here("diff", "e**x", "--wrt", "x").stdout.strip() == "df/dx = exp(x)"
    assert run_here("diff", "e**(2*x)", "--wrt", "x").stdout.strip() == "df/dx = 2*exp(2*x)"
    # A constant power of e stays a number, as before.
    result = run_here("taylor", "e**2*x", "--wrt", "x", "--order", "1", "--at", "0")
    assert result.stdout.splitlines()[1] == f"c1 = {math.e ** 2!r}"


def special_functions_in_the_docs() -> set[str]:
    """The functions docs/special-functions.md lists (read as benchmarks/formulas.py reads them)."""
    import importlib.util

    path = ROOT / "benchmarks" / "formula_corpus.py"
    spec = importlib.util.spec_from_file_location("formula_corpus", path)
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    return corpus.special_functions_listed((ROOT / "docs" / "special-functions.md").read_text())


def test_the_docs_list_of_special_functions_is_read_whole():
    names = special_functions_in_the_docs()
    assert {"gammaln", "psi", "jn", "y1", "zeta_derivative", "lambertw1p", "cospi", "exp2"} <= names
    assert len(names) >= 45


@pytest.mark.parametrize("name", sorted(special_functions_in_the_docs()))
def test_diff_accepts_every_special_function_the_docs_list(name, run_here):
    from symad.cli import ARITY, FUNCTIONS

    assert name in FUNCTIONS
    fewest, _ = ARITY[name]
    call = f"{name}({', '.join(['2'] * (fewest - 1) + ['x'])})"  # constant orders, then x
    result = run_here("diff", call, "--wrt", "x")
    assert result.returncode == 0, (call, result.stderr)
    assert result.stdout.startswith("df/dx = ")


def test_special_functions_differentiate_as_the_library_does(run_here):
    # The example: gammaln was "not a known function".
    assert run_here("diff", "gammaln(x)", "--wrt", "x").stdout == "df/dx = digamma(x)\n"
    assert run_here("diff", "jv(2, x)", "--wrt", "x").stdout == (
        "df/dx = (besselj(1, x) - besselj(3, x))/2\n")
    result = run_here("diff", "zeta(x, q)", "--wrt", "q")
    assert result.stdout == "df/dq = -x*zeta(x + 1, q)\n"
