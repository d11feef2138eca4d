"""C export: compile with the machine's C compiler, call through ctypes, compare with F(...)."""

import ctypes
import math
import shutil
import subprocess

import numpy as np
import pytest
import scipy.sparse

import symad as sd
import symad.numpy as snp
from symad.graph import atom_shape
from symad.pytree import tree_flatten

COMPILER = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_compiler = pytest.mark.skipif(COMPILER is None, reason="no C compiler (cc/gcc/clang) on PATH")


def compile_c(F, name, tmp_path):
    """Build F.to_c(name) as a shared library with -Wall -Werror; return a Python caller."""
    source, header = F.to_c(name)
    (tmp_path / f"{name}.h").write_text(header)
    (tmp_path / f"{name}.c").write_text(f'#include "{name}.h"\n' + source)
    library = tmp_path / f"lib{name}.so"
    subprocess.run([COMPILER, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-o", str(library), str(tmp_path / f"{name}.c"), "-lm"],
                   check=True, capture_output=True, text=True)
    function = getattr(ctypes.CDLL(str(library)), name)
    function.restype = None
    # The C function takes every input and output flattened, in order.
    n_in = sum(math.prod(atom_shape(atom)) for atom in F.graph.inputs)
    n_out = sum(math.prod(atom_shape(atom)) if atom.is_Symbol else 1 for atom in F.graph.outputs)

    def call(*flat_inputs):
        inputs = (ctypes.c_double * n_in)(*flat_inputs)
        outputs = (ctypes.c_double * n_out)()
        function(inputs, outputs)
        return np.array(outputs[:])

    return call


def flat_outputs(F, *args):
    leaves = tree_flatten(F(*args))[0]
    return np.concatenate([np.ravel(np.asarray(leaf, dtype=float)) for leaf in leaves])


def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


POINTS = [(2.0, 5.0), (0.5, -1.25), (3.0, 0.1)]


@needs_compiler
def test_function_gradient_and_hessian_match_the_evaluator(tmp_path):

    for name, F in [("f", sd.trace(f, 2.0, 5.0)),
                    ("grad_f", sd.grad(f, (0, 1)).trace(2.0, 5.0)),
                    ("hess_f", sd.hessian(f, (0, 1)).trace(2.0, 5.0))]:
        call = compile_c(F, name, tmp_path)
        for point in POINTS:
            np.testing.assert_allclose(call(*point), flat_outputs(F, *point), rtol=1e-13, atol=1e-15)


@needs_compiler
def test_array_function_with_many_primitives(tmp_path):

    def model(w, x):
        z = w @ x
        return (snp.sigmoid(z[0]) + snp.softplus(z[1]) + np.logaddexp(z[0], z[1])
                + np.hypot(x[0], x[1]) + np.cbrt(x[0]) + np.expm1(x[1]) + np.log1p(x[0] ** 2)
                + sd.numpy.erf(z[0]) + snp.erfc(z[1]) + np.arctan2(x[0], x[1]) + np.sign(x[0])
                + np.maximum(x[0], x[1]) - np.minimum(z[0], 1.0) + np.abs(z[1])
                + snp.where(x[0] > x[1], np.tanh(x[0]), np.arcsinh(x[1])) + np.exp2(x[0]) / 3.0
                + np.log10(np.abs(x[1]) + 1) + snp.logsumexp(z) + np.max(x))

    w, x = np.array([[0.3, -1.2], [0.8, 0.5]]), np.array([0.7, -0.4])
    for name, F in [("model", sd.trace(model, w, x)),
                    ("grad_model", sd.grad(model, (0, 1)).trace(w, x))]:
        call = compile_c(F, name, tmp_path)
        rng = np.random.default_rng(0)
        for _ in range(4):
            w_point, x_point = rng.normal(size=(2, 2)), rng.normal(size=2)
            np.testing.assert_allclose(call(*w_point.ravel(), *x_point),
                                       flat_outputs(F, w_point, x_point), rtol=1e-12, atol=1e-14)


@needs_compiler
def test_parameters_come_after_arguments(tmp_path):

    p = sd.Parameter(np.array([2.0, 3.0]), name="weights")
    F = sd.trace(lambda x: np.sum(p * x ** 2), np.zeros(2))
    call = compile_c(F, "weighted", tmp_path)
    assert call(1.0, 2.0, 2.0, 3.0)[0] == pytest.approx(14.0)


@needs_compiler
def test_stable_forms_at_extremes(tmp_path):
    F = sd.trace(lambda x: snp.sigmoid(x) + snp.softplus(x) + np.logaddexp(x, x), 0.0)
    call = compile_c(F, "extreme", tmp_path)
    for x in (-800.0, -30.0, 0.0, 30.0, 800.0):
        assert call(x)[0] == pytest.approx(float(F(x)), rel=1e-14)


HOSTILE = ["*/ int evil; /*", "x\n#include <stdlib.h>", "a??/", "back\\", "}\\input{/etc/passwd}"]


@needs_compiler
@pytest.mark.parametrize("name", HOSTILE)
def test_user_names_appear_only_in_comments(name, tmp_path):
    import sympy

    x = sympy.Symbol(name)
    F = sd.from_sympy(sympy.sin(x) * 2, [x])
    F.name = name
    source, header = F.to_c("safe")
    for text in (source, header):
        for line in text.splitlines():
            assert name not in line
            if "*/" in line[line.find("/*") + 2:-2] if line.lstrip().startswith("/*") else False:
                raise AssertionError(line)
    assert "evil" not in "".join(line for line in source.splitlines() if not line.startswith(" *"))
    call = compile_c(F, "safe", tmp_path)
    assert call(0.5)[0] == pytest.approx(2 * np.sin(0.5))


def test_bad_names_and_unsupported_primitives_raise_export_error():
    F = sd.trace(lambda x: x, 1.0)
    for bad in ("1abc", "a-b", "int", "x;y", ""):
        with pytest.raises(sd.ExportError, match="C identifier"):
            F.to_c(bad)

    @sd.primitive
    def mystery(x):
        return x

    with pytest.raises(sd.ExportError, match="'mystery'"):
        sd.trace(lambda x: mystery(x) + 1, 1.0).to_c("g")


def test_default_name_comes_from_the_function():
    source, header = sd.trace(f, 1.0, 1.0).to_c()
    assert "void f(const double *in, double *out);" in header
    assert "#define F_N_INPUTS 2" in header


@needs_compiler
def test_traced_exponents_use_pow_and_match_the_evaluator(tmp_path):
    # x**y with a traced exponent once crashed the exporter (only constant exponents worked).

    def powers(x, y):
        return x ** y + 2.0 ** y + np.abs(x) ** y + x ** -1.5 + x ** 3

    for name, F in [("powers", sd.trace(powers, 0.5, 0.5)),
                    ("grad_powers", sd.grad(powers, (0, 1)).trace(0.5, 0.5))]:
        source, _ = F.to_c(name)
        assert "pow(" in source
        call = compile_c(F, name, tmp_path)
        for point in [(0.5, 0.5), (2.0, -1.25), (3.0, 2.5)]:
            np.testing.assert_allclose(call(*point), flat_outputs(F, *point), rtol=1e-13)


@needs_compiler
def test_array_programs_export_loops_over_whole_arrays(tmp_path):
    # Arrays stay arrays: loops over the grid, the layout comment names each whole array.
    weights = sd.Parameter(np.linspace(0.5, 1.5, 12).reshape(3, 4), name="weights")

    def energy(u, shift):
        return np.sum(weights * np.tanh(u - shift) ** 2) + np.sum((u[1:] - u[:-1]) ** 2)

    u = np.random.default_rng(5).normal(size=(3, 4))
    F = sd.grad(energy, (0, 1)).trace(u, 0.25)
    source, header = F.to_c("energy_gradient")
    assert "for (long" in source and source.count(";") < 120
    assert "in[0..11]: u, row-major (shape (3, 4))" in header
    assert "in[13..24]: Parameter weights (shape (3, 4))" in header
    assert "#define ENERGY_GRADIENT_N_INPUTS 25" in header
    assert "#define ENERGY_GRADIENT_N_OUTPUTS 13" in header
    call = compile_c(F, "energy_gradient", tmp_path)
    for shift in (0.25, -1.0):
        np.testing.assert_allclose(call(*u.ravel(), shift, *weights.value.ravel()),
                                   flat_outputs(F, u, shift), rtol=1e-13, atol=1e-14)


@needs_compiler
@pytest.mark.parametrize("name", HOSTILE)
def test_user_names_of_array_programs_appear_only_in_comments(name, tmp_path):
    weights = sd.Parameter(np.array([2.0, -1.0, 0.5]), name=name)
    F = sd.trace(lambda x: np.sum(weights * np.sin(x)), np.zeros(3))
    source, header = F.to_c("safe_array")
    for text in (source, header):
        assert name not in text
    import re

    code = re.sub(r"/\*.*?\*/", "", source, flags=re.DOTALL)  # what C reads outside comments
    assert "evil" not in code and "passwd" not in code
    assert {line for line in code.splitlines() if "#" in line} <= {"#include <math.h>", "#include <stdlib.h>"}
    call = compile_c(F, "safe_array", tmp_path)
    x = np.array([0.3, -0.2, 1.1])
    assert call(*x, *weights.value)[0] == pytest.approx(float(np.sum(weights.value * np.sin(x))), rel=1e-14)


def _values(result, backend):
    result = np.asarray(result)
    if backend == "interval":  # an enclosure: its midpoint, within rounding of the value
        result = np.vectorize(lambda interval: float(interval.mid))(result)
    return result.astype(float)


ALL_BACKENDS = [*sd.available_backends(), "mpmath", "interval"]


def test_sums_of_hundreds_of_terms_in_every_backend(tmp_path):
    # The gradient of a sum of 300 terms is one add of 300 operands: past MAX_INFIX_TERMS (64)
    # it is spelled with functools.reduce, which array modules once did not import ("name
    # 'functools' is not defined"). Every backend, the precise interpreters and the C export.
    x = np.array([0.0, 0.4, -1.3])
    ks = np.arange(1.0, 301.0)
    program = lambda v: np.sum(sum(np.sin(v * k) for k in ks))  # noqa: E731
    G = sd.grad(program).trace(x)
    assert max(len(node.args) for node in G.graph.nodes if node.primitive.name == "add") >= 300
    want = np.sum(ks[:, None] * np.cos(ks[:, None] * x), axis=0)
    for backend in ALL_BACKENDS:
        np.testing.assert_allclose(_values(G.compile(backend)(x), backend), want, rtol=1e-12,
                                   err_msg=backend)
    sums = sd.trace(lambda *values: sum(values), *([1.0] * 300))  # scalar code, one add node
    for backend in ALL_BACKENDS:
        assert float(_values(sums.compile(backend)(*range(300)), backend)) == 300 * 299 / 2
    if COMPILER is not None:
        call = compile_c(G, "gradient_of_300_terms", tmp_path)
        np.testing.assert_allclose(call(*x), want, rtol=1e-12)


def test_concatenations_of_over_a_hundred_operands_in_every_backend(tmp_path):
    # A concatenation of 110 operands is a chain of 110 index ranges in a loop nest: numba's
    # source once nested one block per operand, past Python's limit of 100 blocks, and its
    # gradient is an add of 110 slices. The function and its gradient, every backend and C.
    copies = 110
    x = np.array([0.0, 0.4, -1.3])
    program = lambda v: np.sum(np.sin(np.concatenate([v] * copies)))  # noqa: E731
    for name, F, want in [("concatenation", sd.trace(program, x), copies * np.sum(np.sin(x))),
                          ("concatenation_gradient", sd.grad(program).trace(x), copies * np.cos(x))]:
        for backend in ALL_BACKENDS:
            np.testing.assert_allclose(_values(F.compile(backend)(x), backend), want,
                                       rtol=1e-12, atol=1e-12, err_msg=backend)
        if COMPILER is not None:
            np.testing.assert_allclose(compile_c(F, name, tmp_path)(*x),
                                       np.ravel(want), rtol=1e-12, atol=1e-12)


@needs_compiler
@pytest.mark.parametrize("kind", ["hessian", "jacobian"])
def test_sparse_matrices_export_where_their_values_go(kind, tmp_path):
    # A sparse Hessian's C function fills out[] with its non-zeros; the header once did not
    # say where they belong. It declares name_rows[] and name_columns[], which the source
    # defines: rebuilt with them, the matrix equals the one symad returns.
    def chain(x):
        return np.sum(x[1:] * x[:-1] ** 2) + np.sum(np.sin(x))

    x = np.array([0.3, -0.7, 1.1, 0.4, 2.0])
    transform = sd.hessian(chain, sparse=True) if kind == "hessian" else \
        sd.jacobian(lambda v: np.sin(v[1:]) * v[:-1], sparse=True)
    F = transform.trace(x)
    name = f"sparse_{kind}"
    source, header = F.to_c(name)
    for declaration in (f"extern const long {name}_rows[", f"extern const long {name}_columns[",
                        f"#define {name.upper()}_N_ROWS", f"#define {name.upper()}_N_COLUMNS"):
        assert declaration in header
    call = compile_c(F, name, tmp_path)
    library = ctypes.CDLL(str(tmp_path / f"lib{name}.so"))
    count = len(F.sparse_layout[0])
    rows = np.array((ctypes.c_long * count).in_dll(library, f"{name}_rows")[:])
    columns = np.array((ctypes.c_long * count).in_dll(library, f"{name}_columns")[:])
    rebuilt = scipy.sparse.csr_matrix((call(*x), (rows, columns)), shape=F.sparse_layout[2])
    np.testing.assert_allclose(rebuilt.toarray(), transform(x).toarray(), rtol=1e-13, atol=1e-15)
