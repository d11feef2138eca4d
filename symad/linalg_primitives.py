"""Linear algebra as array primitives: one node per factorisation or solve, evaluated by LAPACK.

Each stanza declares one operation of ``numpy.linalg`` or ``scipy.linalg`` on the trailing
two ("core") dimensions of its operands -- a matrix, or a stack of them in front, as NumPy
stacks them -- with its shape rule, its NumPy/SciPy implementation and the SymPy head its
formulas print with (``inv(A)``, LaTeX ``A^{-1}``). The derivative rules are matrix
calculus, written with these primitives and ``einsum`` so that they differentiate again:
:mod:`symad.rules.linalg`. The traceable functions users call are :mod:`symad.numpy.linalg`.

A right-hand side ``b`` is a vector or a matrix of columns, as NumPy decides from its
dimension; the decision is kept as the parameter ``vector``, since a batch in front (points,
seeds) must not change it.

>>> import numpy as np
>>> a = np.array([[4.0, 1.0], [1.0, 3.0]])
>>> solve_p.shape_rule([(5, 2, 2), (2,), (5, 2, 3)], {"vector": True, "trans": 0})
(5, 2)
>>> x = solve_p.numpy_impl(a, np.ones(2), lu_factor_p.numpy_impl(a), vector=True, trans=0)
>>> bool(np.allclose(x, np.linalg.solve(a, np.ones(2))))
True
"""

from __future__ import annotations

import math

import numpy as np
import sympy

from symad.array_primitives import array_primitive, lead_of
from symad.errors import TracingError

__all__ = [
    "inv_p", "solve_p", "det_p", "logabsdet_p", "det_sign_p", "cholesky_p", "solve_triangular_p",
    "eigh_values_p", "eigh_vectors_p", "lu_factor_p", "svd_values_p", "svd_u_p", "svd_vh_p", "pinv_p", "expm_p",
    "qr_q_p", "qr_r_p",
    "eig_values_p", "eig_vectors_p", "eig_vectors_inv_p", "lstsq_p",
    "LINALG_PRIMITIVES", "core_ranks", "MatrixHead", "Transposed",
]


# ---------------------------------------------------------------------------
# The printed heads: inv(A), det(A), ... as SymPy functions of whole matrices
# ---------------------------------------------------------------------------


class MatrixHead(sympy.Function):
    """A linear-algebra function of whole matrices, as formulas print it.

    Index notation names an element of its value ``inv(A)[i, j]`` (LaTeX
    ``{A^{-1}}_{i j}``): the operands are matrices (an input's or a temporary's
    name), never elements.
    """

    #: ``str`` form: the NumPy-like call name.
    call = ""

    def _sympystr(self, printer):
        return f"{self.call}({', '.join(printer._print(a) for a in self.args)})"

    def _latex(self, printer, exp=None):
        text = self.latex_form([printer._print(a) for a in self.args])
        return f"\\left({text}\\right)^{{{printer._print(exp)}}}" if exp is not None else text

    def latex_form(self, args: list) -> str:
        return rf"\operatorname{{{self.call}}}\left({', '.join(args)}\right)"


class Transposed(MatrixHead):
    """``A.T`` (the last two axes swapped), LaTeX ``A^{T}``: an operand of the others."""
    call = "transpose"

    def _sympystr(self, printer):
        return f"{printer._print(self.args[0])}.T"

    def latex_form(self, args):
        return f"{args[0]}^{{T}}"


def _inverse_latex(matrix, args: list, power: str = "-1") -> str:
    """``A^{-1}``; of a transposed input ``A^{-T}``."""
    if isinstance(matrix, Transposed):
        return f"{args[0][: -len('^{T}')]}^{{-T}}" if power == "-1" else f"{args[0]}^{{{power}}}"
    return f"{args[0]}^{{{power}}}"


class Inv(MatrixHead):
    """``inv(A)``, LaTeX ``A^{-1}``."""
    call = "inv"

    def latex_form(self, args):
        return _inverse_latex(self.args[0], args)


class Solve(MatrixHead):
    """``solve(A, B)``, LaTeX ``A^{-1} B``."""
    call = "solve"

    def latex_form(self, args):
        return f"{_inverse_latex(self.args[0], args)} {args[1]}"


class SolveTriangular(MatrixHead):
    """``solve_triangular(T, B, trans)``, LaTeX ``T^{-1} B`` or ``T^{-T} B``."""
    call = "solve_triangular"

    def latex_form(self, args):
        return f"{args[0]}^{{{'-T' if args[2] == '1' else '-1'}}} {args[1]}"


def _head(name: str, call: str, latex: str | None, doc: str) -> type:
    """A head whose LaTeX is a template over its operands' (None: ``\\operatorname{call}(...)``)."""
    methods = {"call": call, "__doc__": doc}
    if latex is not None:
        methods["latex_form"] = lambda self, args: latex.format(*args)
    return type(name, (MatrixHead,), methods)


Det = _head("Det", "det", r"\det\left({0}\right)", "``det(A)``.")
LogAbsDet = _head("LogAbsDet", "logabsdet", r"\log\left|\det\left({0}\right)\right|",
                  "``logabsdet(A)``: the logarithm of ``|det A|``, NumPy's ``slogdet(A)[1]``.")
SignDet = _head("SignDet", "signdet", r"\operatorname{{sgn}}\det\left({0}\right)",
                "``signdet(A)``: the sign of ``det A``, NumPy's ``slogdet(A)[0]``.")
SingularValues = _head("SingularValues", "svdvals", r"\sigma\left({0}\right)",
                       "``svdvals(A)``: the singular values, descending.")
SingularLeft = _head("SingularLeft", "svd_u", None,
                     "``svd_u(A)``: the left singular vectors (columns), thin, as NumPy signs them.")
SingularRight = _head("SingularRight", "svd_vh", None,
                      "``svd_vh(A)``: the right singular vectors (rows), thin, as NumPy signs them.")
LUFactor = _head("LUFactor", "lu_factor", None,
                 "``lu_factor(A)``: the packed LU factors ``solve`` reads (never printed on its own).")
Cholesky = _head("Cholesky", "cholesky", None, "``cholesky(A)``: the lower triangular ``L`` with ``L L^T = A``.")
PseudoInverse = _head("PseudoInverse", "pinv", "{0}^{{+}}", "``pinv(A)``, LaTeX ``A^{+}``.")
MatrixExp = _head("MatrixExp", "expm", "e^{{{0}}}", "``expm(A)``, LaTeX ``e^{A}``.")
QRFactorQ = _head("QRFactorQ", "qr_q", None, "``qr_q(A)``: the orthonormal factor of ``A = Q R``.")
QRFactorR = _head("QRFactorR", "qr_r", None, "``qr_r(A)``: the upper triangular factor of ``A = Q R``.")
EigenValues = _head("EigenValues", "eigvalsh", r"\lambda\left({0}\right)",
                    "``eigvalsh(A)``: the eigenvalues of a symmetric matrix, ascending.")
EigenVectors = _head("EigenVectors", "eigvecsh", None,
                     "``eigvecsh(A)``: the eigenvectors (columns) of a symmetric matrix, as ``eigh`` "
                     "orders them.")


# ---------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------


def _where() -> str:
    from symad.atoms import current_builder

    builder = current_builder()
    return f" (in function {builder.function_name!r})" if builder is not None else ""


def _square(shape: tuple, what: str) -> int:
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise TracingError(f"{what}: the matrix operand must be square (its last two dimensions "
                           f"equal), got shape {shape}" + _where())
    return shape[-1]


def _same_shape(what: str):
    def rule(shapes, params) -> tuple:
        _square(shapes[0], what)
        return tuple(shapes[0])
    return rule


def _scalar_per_matrix(what: str):
    def rule(shapes, params) -> tuple:
        _square(shapes[0], what)
        return tuple(shapes[0][:-2])
    return rule


def _solved_shape(what: str):
    def rule(shapes, params) -> tuple:
        a, b = shapes[:2]  # (solve's third operand is the LU factorisation of the first)
        n = _square(a, what)
        core = 1 if params["vector"] else 2
        if len(b) < core or b[len(b) - core] != n:
            raise TracingError(f"{what}: the right-hand side of shape {b} does not fit a matrix of "
                               f"shape {a} (it needs {n} rows)" + _where())
        try:
            lead = np.broadcast_shapes(lead_of(a, 2), lead_of(b, core))
        except ValueError:
            raise TracingError(f"{what}: the stacks of shapes {a} and {b} do not broadcast" + _where()) from None
        return tuple(lead) + tuple(b[len(b) - core:])
    return rule


def core_ranks(node) -> tuple[int, tuple[int, ...]]:
    """``(result core rank, operand core ranks)`` of a linear-algebra node: the dimensions
    one matrix operation reads and writes, behind any stack in front."""
    primitive, params = node.primitive, dict(node.params)
    rhs = 1 if params.get("vector") else 2
    return {inv_p: (2, (2,)), cholesky_p: (2, (2,)), det_p: (0, (2,)), logabsdet_p: (0, (2,)),
            eigh_values_p: (1, (2,)), eigh_vectors_p: (2, (2,)), svd_values_p: (1, (2,)),
            svd_u_p: (2, (2,)), svd_vh_p: (2, (2,)), pinv_p: (2, (2,)), expm_p: (2, (2,)),
            qr_q_p: (2, (2,)), qr_r_p: (2, (2,)),
            eig_values_p: (1, (2,)), eig_vectors_p: (2, (2,)), eig_vectors_inv_p: (2, (2,)),
            lstsq_p: (rhs, (2, rhs)),
            det_sign_p: (0, (2,)), solve_p: (rhs, (2, rhs, 2)), lu_factor_p: (2, (2,)),
            solve_triangular_p: (rhs, (2, rhs))}[primitive]


# ---------------------------------------------------------------------------
# Implementations
# ---------------------------------------------------------------------------


def _lu_factor(a):
    """LAPACK's LU factorisation (getrf, through SciPy), packed: ``n`` columns of ``L`` and
    ``U``, then a column of pivots, in column order. For a stack, nothing: NumPy's batched solve (its C loop over the
    stack) is faster there than a Python loop of factorisations, and :func:`_solve` uses it."""
    a = np.asarray(a)
    n, lead = a.shape[-1], a.shape[:-2]
    dtype = np.complex128 if np.iscomplexobj(a) else np.float64  # (pivots: a complex column then)
    if math.prod(lead) != 1:
        return np.broadcast_to(np.zeros((), dtype), lead + (n, n + 1))
    from scipy.linalg import lapack

    # One matrix (in front of it at most size-1 axes: the compiler's axis of one point).
    packed = np.empty((n, n + 1), dtype, order="F")  # LAPACK's column order: no copy either way
    packed[:, :n] = a.reshape(n, n)
    getrf = lapack.zgetrf if dtype is np.complex128 else lapack.dgetrf
    lu, pivots, info = getrf(packed[:, :n], overwrite_a=True)
    if info > 0:  # an exact zero pivot: NumPy's solve raises, so does this
        raise np.linalg.LinAlgError("Singular matrix")
    if not np.shares_memory(lu, packed):  # SciPy copied after all
        packed[:, :n] = lu
    packed[:, n] = pivots
    return packed.reshape(lead + (n, n + 1))


def _solve(a, b, lu, *, vector, trans):
    a, b, lu = np.asarray(a), np.asarray(b), np.asarray(lu)
    if vector:
        b = b[..., None]
    if math.prod(lu.shape[:-2]) == 1:  # one factorisation: every right-hand side in one getrs call
        import scipy.linalg

        n, lead, k = lu.shape[-2], b.shape[:-2], b.shape[-1]
        lu = lu.reshape(n, n + 1)
        columns = np.moveaxis(b, -2, 0).reshape(n, -1)
        x = scipy.linalg.lu_solve((lu[:, :n], lu[:, n].real.astype(np.intc)), columns, trans=trans,
                                  check_finite=False)
        x = np.moveaxis(x.reshape((n,) + lead + (k,)), 0, -2)
        x = x.reshape(np.broadcast_shapes(a.shape[:-2], lead) + x.shape[-2:])
    else:
        x = np.linalg.solve(np.swapaxes(a, -1, -2) if trans else a, b)
    return x[..., 0] if vector else x


def _solve_triangular(a, b, *, lower, trans, unit_diagonal, vector):
    import scipy.linalg

    a, b = np.asarray(a), np.asarray(b)
    if vector:
        b = b[..., None]
    if a.ndim == 2 and b.ndim == 2:
        x = scipy.linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)
    else:  # a stack: SciPy loops over it (it does not broadcast a against b)
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = np.broadcast_to(a, lead + a.shape[-2:])
        b = np.broadcast_to(b, lead + b.shape[-2:])
        x = np.empty(lead + b.shape[-2:], np.result_type(a, b, 1.0))
        for index in np.ndindex(*lead):
            x[index] = scipy.linalg.solve_triangular(a[index], b[index], trans=trans, lower=lower,
                                                     unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def _thin_shape(part: str):
    def rule(shapes, params) -> tuple:
        shape = shapes[0]
        if len(shape) < 2:
            raise TracingError(f"svd: the argument must be a matrix or a stack of them, got shape "
                               f"{shape}" + _where())
        m, n = shape[-2:]
        k = min(m, n)
        return tuple(shape[:-2]) + {"s": (k,), "u": (m, k), "vh": (k, n)}[part]
    return rule


def _svd_u(a):
    return np.linalg.svd(a, full_matrices=False)[0]


def _svd_vh(a):
    return np.linalg.svd(a, full_matrices=False)[2]


def _pinv(a, *, rcond, rtol):
    options = {k: v for k, v in (("rcond", rcond), ("rtol", rtol)) if v is not None}
    return np.linalg.pinv(a, **options)


def _pinv_shape(shapes, params) -> tuple:
    shape = shapes[0]
    if len(shape) < 2:
        raise TracingError(f"pinv: the argument must be a matrix or a stack of them, got shape {shape}"
                           + _where())
    return tuple(shape[:-2]) + (shape[-1], shape[-2])


def _qr_shape(part: str):
    def rule(shapes, params) -> tuple:
        shape = shapes[0]
        if len(shape) < 2 or shape[-2] < shape[-1]:
            raise TracingError(f"qr: the argument must be a matrix (or a stack) with at least as many "
                               f"rows as columns, got shape {shape}" + _where())
        m, n = shape[-2:]
        return tuple(shape[:-2]) + ((m, n) if part == "q" else (n, n))
    return rule


def _expm(a):
    import scipy.linalg

    return scipy.linalg.expm(a)


def _eigenvectors(a):
    return np.linalg.eigh(a)[1]


def _logabsdet(a):
    return np.linalg.slogdet(a)[1]


def _det_sign(a):
    return np.linalg.slogdet(a)[0]


# ---------------------------------------------------------------------------
# The stanzas
# ---------------------------------------------------------------------------

#: ``inv(A)``: LAPACK's LU inverse (``numpy.linalg.inv``).
inv_p = array_primitive("inv", np.linalg.inv, _same_shape("inv"), kind="array", complex_values="follow", finite=False)
#: ``lu_factor(A)``: LAPACK's LU factorisation of ``A`` (getrf), packed with its pivots, for
#: ``solve`` to read: reverse mode solves with the transposed matrix from the same factors.
lu_factor_p = array_primitive("lu_factor", _lu_factor,
                              lambda shapes, params: _same_shape("solve")(shapes, params)[:-1]
                              + (shapes[0][-1] + 1,), kind="array", complex_values="follow")
#: ``solve(A, b, lu_factor(A))``: ``A^{-1} b`` (``trans=1``: ``A^{-T} b``) from the factors, as
#: ``numpy.linalg.solve`` computes it (getrf then getrs); ``vector``: ``b`` is a vector. The
#: derivative is taken through ``A``; the factors are how the value is computed.
solve_p = array_primitive("solve", _solve, _solved_shape("solve"), kind="array", complex_values="follow", arity=3, finite=False)
#: ``det(A)`` (``numpy.linalg.det``).
det_p = array_primitive("det", np.linalg.det, _scalar_per_matrix("det"), kind="array", complex_values="follow")
#: ``log |det A|``, ``numpy.linalg.slogdet(A)[1]`` (-inf for a singular matrix).
logabsdet_p = array_primitive("logabsdet", _logabsdet, _scalar_per_matrix("slogdet"), kind="array", complex_values="real",
                              finite=False)
#: The sign of ``det A``, ``numpy.linalg.slogdet(A)[0]``: piecewise constant.
det_sign_p = array_primitive("det_sign", _det_sign, _scalar_per_matrix("slogdet"), kind="array", complex_values="follow")
#: ``cholesky(A)``: lower ``L`` with ``L L^T = A`` (``L L^H`` for a complex ``A``), from ``A``'s
#: lower triangle (``numpy.linalg.cholesky``).
cholesky_p = array_primitive("cholesky", np.linalg.cholesky, _same_shape("cholesky"), kind="array", complex_values="follow",
                             finite=False)
#: ``solve_triangular(T, b)``: ``T^{-1} b`` (``trans=1``: ``T^{-T} b``) from the ``lower`` or
#: upper triangle of ``T`` (its diagonal taken as ones if ``unit_diagonal``), as
#: ``scipy.linalg.solve_triangular``.
solve_triangular_p = array_primitive("solve_triangular", _solve_triangular, _solved_shape("solve_triangular"),
                                     kind="array", complex_values="follow", arity=2, finite=False)
#: The eigenvalues of a symmetric (complex: Hermitian) matrix, ascending, real, from its lower
#: triangle (``numpy.linalg.eigvalsh``).
eigh_values_p = array_primitive("eigh_values", np.linalg.eigvalsh,
                                lambda shapes, params: _same_shape("eigvalsh")(shapes, params)[:-1],
                                kind="array", complex_values="real")
#: Their eigenvectors, as the columns of an orthogonal (unitary) matrix (``numpy.linalg.eigh(a)[1]``).
eigh_vectors_p = array_primitive("eigh_vectors", _eigenvectors, _same_shape("eigh"), kind="array",
                                 complex_values="follow")
#: The singular values, descending, real for a complex matrix too (``numpy.linalg.svd(a, compute_uv=False)``).
svd_values_p = array_primitive("svd_values", lambda a: np.linalg.svd(a, compute_uv=False),
                               _thin_shape("s"), kind="array", complex_values="real")
#: The thin left singular vectors ``U`` (``numpy.linalg.svd(a, full_matrices=False)[0]``).
svd_u_p = array_primitive("svd_u", _svd_u, _thin_shape("u"), kind="array", complex_values="follow")
#: The thin right singular vectors ``Vh`` (``numpy.linalg.svd(a, full_matrices=False)[2]``).
svd_vh_p = array_primitive("svd_vh", _svd_vh, _thin_shape("vh"), kind="array", complex_values="follow")
#: The pseudo-inverse (``numpy.linalg.pinv``: by SVD, singular values below the cutoff
#: ``rcond``/``rtol`` dropped); its derivative is that at constant rank (JAX's).
pinv_p = array_primitive("pinv", _pinv, _pinv_shape, kind="array", complex_values="follow")
#: The matrix exponential (``scipy.linalg.expm``: scaling and squaring with Padé).
expm_p = array_primitive("expm", _expm, _same_shape("expm"), kind="array", complex_values="follow")
#: The reduced QR factors of a matrix with at least as many rows as columns
#: (``numpy.linalg.qr(a)``, Householder's through LAPACK): ``Q`` and ``R``.
qr_q_p = array_primitive("qr_q", lambda a: np.linalg.qr(a)[0], _qr_shape("q"), kind="array", complex_values="follow")
qr_r_p = array_primitive("qr_r", lambda a: np.linalg.qr(a)[1], _qr_shape("r"), kind="array", complex_values="follow")

#: The primitives of this family, and the head each prints with.
LINALG_PRIMITIVES = {inv_p: Inv, solve_p: Solve, det_p: Det, logabsdet_p: LogAbsDet,
                     det_sign_p: SignDet, cholesky_p: Cholesky, solve_triangular_p: SolveTriangular,
                     eigh_values_p: EigenValues, eigh_vectors_p: EigenVectors, lu_factor_p: LUFactor,
                     svd_values_p: SingularValues, svd_u_p: SingularLeft, svd_vh_p: SingularRight,
                     pinv_p: PseudoInverse, expm_p: MatrixExp, qr_q_p: QRFactorQ, qr_r_p: QRFactorR}


# ---------------------------------------------------------------------------
# The general (non-symmetric) eigendecomposition and least squares
# ---------------------------------------------------------------------------

GeneralEigenValues = _head("GeneralEigenValues", "eigvals", r"\lambda\left({0}\right)",
                           "``eigvals(A)``: the eigenvalues of a general matrix, complex, as "
                           "``numpy.linalg.eig`` orders them.")
GeneralEigenVectors = _head("GeneralEigenVectors", "eigvecs", None,
                            "``eigvecs(A)``: the unit eigenvectors (columns) of a general matrix, "
                            "complex, as ``numpy.linalg.eig`` gives them.")
GeneralEigenVectorsInverse = _head("GeneralEigenVectorsInverse", "eigvecs_inv",
                                   r"\operatorname{{eigvecs}}\left({0}\right)^{{-1}}",
                                   "``eigvecs_inv(A)``: the inverse of ``eigvecs(A)`` (its rows: the "
                                   "left eigenvectors, scaled so that their product is the identity).")
LeastSquares = _head("LeastSquares", "lstsq", "{0}^{{+}} {1}",
                     "``lstsq(A, B)``: the minimum-norm least-squares solution, LaTeX ``A^{+} B``.")


def _eig(a) -> tuple:
    """NumPy's eigendecomposition, complex: NumPy returns real arrays when every eigenvalue of
    a real matrix is real, and a node's type cannot depend on its operand's values."""
    values, vectors = np.linalg.eig(a)
    return values.astype(np.result_type(values, 1j)), vectors.astype(np.result_type(vectors, 1j))


def _eig_vectors_inv(a):
    return np.linalg.inv(_eig(a)[1])


def _lstsq(a, b, *, vector, rcond):
    a, b = np.asarray(a), np.asarray(b)
    core = 1 if vector else 2
    if a.ndim == 2 and b.ndim == core:
        return np.linalg.lstsq(a, b, rcond=rcond)[0]
    # A stack (NumPy's lstsq takes one matrix): one solve per matrix, b broadcast against a.
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:b.ndim - core])
    a = np.broadcast_to(a, lead + a.shape[-2:])
    b = np.broadcast_to(b, lead + b.shape[b.ndim - core:])
    x = np.empty(lead + (a.shape[-1],) + b.shape[len(lead) + 1:])
    for index in np.ndindex(*lead):
        x[index] = np.linalg.lstsq(a[index], b[index], rcond=rcond)[0]
    return x


def _lstsq_shape(shapes, params) -> tuple:
    """``solve``'s shape rule with ``a``'s ``m`` rows, then the ``m`` rows of the result
    replaced by ``a``'s ``n`` columns."""
    a, b = shapes
    if len(a) < 2:
        raise TracingError(f"lstsq: the matrix operand must have two dimensions, got shape {a}" + _where())
    solved = _solved_shape("lstsq")([tuple(a[:-1]) + (a[-2],), b], params)
    row = len(solved) - (1 if params["vector"] else 2)
    return solved[:row] + (a[-1],) + solved[row + 1:]


#: The eigenvalues of a general matrix (``numpy.linalg.eig(a)[0]``, LAPACK's geev), always
#: complex (a real matrix has complex conjugate pairs in general).
eig_values_p = array_primitive("eig_values", lambda a: _eig(a)[0],
                               lambda shapes, params: _same_shape("eig")(shapes, params)[:-1],
                               kind="array", complex_values="complex")
#: Their eigenvectors, the columns of ``numpy.linalg.eig(a)[1]``: unit norm, as LAPACK
#: normalises them (each with its largest component real).
eig_vectors_p = array_primitive("eig_vectors", lambda a: _eig(a)[1], _same_shape("eig"),
                                kind="array", complex_values="complex")
#: The inverse of the eigenvector matrix, which the derivative rules of the two above read
#: (``V^{-1} dA V``); infinite for a defective matrix.
eig_vectors_inv_p = array_primitive("eig_vectors_inv", _eig_vectors_inv, _same_shape("eig"),
                                    kind="array", complex_values="complex", finite=False)
#: The least-squares solution ``x`` minimising ``|a x - b|`` of least norm
#: (``numpy.linalg.lstsq(a, b, rcond)[0]``, LAPACK's gelsd; a stack solved matrix by
#: matrix); ``vector``: ``b`` is a vector. Its derivative is that of ``pinv(a) @ b`` at
#: constant rank.
lstsq_p = array_primitive("lstsq", _lstsq, _lstsq_shape, kind="array", complex_values="refuse", arity=2)

LINALG_PRIMITIVES.update({eig_values_p: GeneralEigenValues, eig_vectors_p: GeneralEigenVectors,
                          eig_vectors_inv_p: GeneralEigenVectorsInverse, lstsq_p: LeastSquares})
