"""Linear algebra: ``numpy.linalg`` and ``scipy.linalg`` on traced matrices.

Part of :mod:`symad.numpy` (``snp.linalg``; ``np.linalg.solve(A, b)`` on traced values
dispatches here). Solves, inverses, determinants, the Cholesky factor and the symmetric
eigen- and singular value decompositions are one node each (one per part;
:mod:`symad.linalg_primitives`), evaluated by LAPACK, with matrix-calculus
derivative rules (:mod:`symad.rules.linalg`); the graph does not grow with the matrix
size. ``matrix_power``, ``multi_dot``, ``norm`` and ``cho_solve`` are written with them and
the other operations of ``symad.numpy``. Stacks of matrices (leading dimensions) work as
in NumPy.

``scipy.linalg`` reads its arguments with ``np.asarray``, which a traced value refuses: in
a traced function call ``snp.linalg.solve_triangular``, ``cho_factor``, ``cho_solve`` and
``expm`` (same arguments as SciPy's).

>>> import numpy as np, symad as sd
>>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
>>> g = sd.grad(lambda A: np.linalg.slogdet(A)[1])
>>> bool(np.allclose(g(A), np.linalg.inv(A).T))
True
>>> g.trace(A).formula()
inv(A)[j, i]
"""

from __future__ import annotations

import builtins
import collections
import math

import numpy as _np

from symad import linalg_primitives as L
from symad.atom_arrays import traced_function_name
from symad.atoms import note_complex
from symad.errors import TracingError
from symad.graph import atom_shape
from symad.numpy.elementwise import (
    absolute,
    conjugate,
    greater,
    multiply,
    not_equal,
    power,
    real,
    sqrt,
    subtract,
    where,
)
from symad.numpy.products import matmul
from symad.numpy.reductions import max, min, sum
from symad.numpy.shapes import (
    active_builder,
    asarray,
    moveaxis,
    ndim,
    numpy_when_concrete,
    reshape,
    shape,
    swapaxes,
    wrap_atom,
)
from symad.tracer import as_atom, is_complex_value

__all__ = ["solve", "inv", "det", "slogdet", "cholesky", "matrix_power", "multi_dot", "norm",
           "solve_triangular", "cho_factor", "cho_solve", "eigh", "eigvalsh", "SlogdetResult",
           "EighResult", "svd", "svdvals", "SVDResult", "pinv", "expm", "qr", "QRResult",
           "eig", "eigvals", "EigResult", "lstsq"]

#: What ``slogdet`` returns, as NumPy's result: ``sign`` and ``logabsdet``.
SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
#: What ``eigh`` returns, as NumPy's result.
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
#: What ``qr`` returns, as NumPy's result.
QRResult = collections.namedtuple("QRResult", ["Q", "R"])
#: What ``svd`` returns, as NumPy's result.
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])
#: What ``eig`` returns, as NumPy's result.
EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])


def _record(primitive, operands, params=()):
    builder = active_builder()
    return wrap_atom(builder.record(primitive, tuple(as_atom(o) for o in operands), tuple(params)))


def _check_matrix(a, what: str) -> None:
    a_shape = atom_shape(as_atom(a))
    if len(a_shape) < 2 or a_shape[-1] != a_shape[-2]:
        raise TracingError(f"{what} in function {traced_function_name()!r}: the argument 'a' must be "
                           f"a square matrix or a stack of them (last two dimensions equal), got "
                           f"shape {a_shape}")


@numpy_when_concrete(_np.linalg.solve)
def solve(a, b):
    """``x`` with ``a @ x = b`` (``b`` a vector if it is 1-D, else columns): LAPACK's LU
    factorisation and a solve from it, two nodes; reverse mode solves with ``a.T`` from the
    same factors (as JAX), so a gradient costs one factorisation.

    >>> import numpy as np, symad as sd
    >>> sd.grad(lambda b: np.sum(np.linalg.solve(np.diag([2.0, 4.0]), b)))(np.ones(2))
    array([0.5 , 0.25])
    """
    _check_matrix(a, "numpy.linalg.solve")
    factors = _record(L.lu_factor_p, (a,))
    return _record(L.solve_p, (a, b, factors), (("vector", ndim(b) == 1), ("trans", 0)))


@numpy_when_concrete(_np.linalg.inv)
def inv(a):
    """The inverse of a matrix (or of each matrix of a stack).

    >>> import numpy as np, symad as sd
    >>> sd.trace(lambda a: np.linalg.inv(a), np.eye(2)).formula()
    inv(a)[i, j]
    """
    _check_matrix(a, "numpy.linalg.inv")
    return _record(L.inv_p, (a,))


@numpy_when_concrete(_np.linalg.det)
def det(a):
    """The determinant; its gradient is ``det(a) inv(a).T``.

    >>> import numpy as np, symad as sd
    >>> float(sd.grad(np.linalg.det)(np.diag([2.0, 3.0]))[0, 0])
    3.0
    """
    _check_matrix(a, "numpy.linalg.det")
    return _record(L.det_p, (a,))


@numpy_when_concrete(_np.linalg.slogdet)
def slogdet(a):
    """``(sign, logabsdet)`` of the determinant; the sign's derivative is zero.

    >>> import numpy as np, symad as sd
    >>> float(sd.grad(lambda a: np.linalg.slogdet(a)[1])(np.diag([2.0, 4.0]))[1, 1])
    0.25
    """
    _check_matrix(a, "numpy.linalg.slogdet")
    return SlogdetResult(_record(L.det_sign_p, (a,)), _record(L.logabsdet_p, (a,)))


@numpy_when_concrete(_np.linalg.cholesky)
def cholesky(a, upper=False):
    """The Cholesky factor ``L`` (``L @ L.T = a``; ``upper``: ``U`` with ``U.T @ U = a``;
    for a complex ``a`` conjugate transposes).

    NumPy reads one triangle of ``a`` (the lower; the upper with ``upper=True``). The
    derivative is that of ``cholesky((a + a.T) / 2)`` (complex: ``(a + a^H) / 2``), as
    JAX's: along symmetric (Hermitian) directions it is NumPy's function's, and gradients
    are symmetric (Hermitian) matrices.

    >>> import numpy as np, symad as sd
    >>> float(sd.grad(lambda a: np.linalg.cholesky(a)[0, 0])(np.diag([4.0, 9.0]))[0, 0])
    0.25
    """
    _check_matrix(a, "numpy.linalg.cholesky")
    if upper:  # U = L^H of the Hermitian matrix the upper triangle stands for
        return _adjoint(_record(L.cholesky_p, (_adjoint(a),)))
    return _record(L.cholesky_p, (a,))


def _adjoint(a):
    """The conjugate transpose of the last two axes (of a real matrix the transpose)."""
    return conjugate(swapaxes(a, -1, -2)) if is_complex_value(a) else swapaxes(a, -1, -2)


def _lower_triangle_read(a, UPLO: str, what: str):  # noqa: N803 - NumPy's name
    """``a``, or for ``UPLO='U'`` its transpose (of a complex matrix the conjugate transpose:
    the Hermitian matrix its upper triangle stands for): the primitives read the lower triangle."""
    if UPLO not in ("L", "U"):
        raise TracingError(f"{what} in function {traced_function_name()!r}: UPLO must be 'L' or 'U', "
                           f"got {UPLO!r}")
    _check_matrix(a, what)
    return a if UPLO == "L" else _adjoint(a)


@numpy_when_concrete(_np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):  # noqa: N803 - NumPy's name
    """The eigenvalues of a symmetric (complex: Hermitian) matrix, ascending, from one
    triangle (``UPLO``).

    The derivative is taken along symmetric (Hermitian) directions, as JAX's (that of the
    function at ``(a + a.T) / 2``, ``(a + a^H) / 2``); a repeated eigenvalue has one (the
    eigenvectors' is not finite).

    >>> import numpy as np, symad as sd
    >>> sd.grad(lambda a: np.linalg.eigvalsh(a)[1])(np.diag([1.0, 2.0]))
    array([[0., 0.],
           [0., 1.]])
    """
    return _record(L.eigh_values_p, (_lower_triangle_read(a, UPLO, "numpy.linalg.eigvalsh"),))


@numpy_when_concrete(_np.linalg.eigh)
def eigh(a, UPLO="L"):  # noqa: N803 - NumPy's name
    """``(eigenvalues, eigenvectors)`` of a symmetric matrix, as NumPy orders and signs them.

    Two nodes (LAPACK runs once for each). Along symmetric directions the eigenvectors'
    derivative is ``V (F * (V.T dA V))`` with ``F[i, j] = 1 / (w[j] - w[i])``: not finite
    where eigenvalues repeat, as in JAX. A complex matrix is read as Hermitian (``V^H``
    for ``V.T``, Hermitian directions); its eigenvectors' phases are LAPACK's, and the
    derivative keeps ``V^H dV``'s diagonal zero (JAX's).

    >>> import numpy as np, symad as sd
    >>> w, v = sd.trace(lambda a: np.linalg.eigh(a), np.diag([2.0, 1.0]))(np.diag([2.0, 1.0]))
    >>> w
    array([1., 2.])
    """
    a = _lower_triangle_read(a, UPLO, "numpy.linalg.eigh")
    return EighResult(_record(L.eigh_values_p, (a,)), _record(L.eigh_vectors_p, (a,)))


def _check_stack(a, what: str) -> None:
    if ndim(a) < 2:
        raise TracingError(f"{what} in function {traced_function_name()!r}: the argument 'a' must be "
                           f"a matrix or a stack of them, got shape {shape(a)}")


@numpy_when_concrete(_np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """``(U, S, Vh)`` (or ``S`` alone with ``compute_uv=False``), as NumPy signs and orders them.

    One node per part (LAPACK runs once for each). The derivative is JAX's: the singular
    values' is ``diag(U^T dA V)``; the vectors' (Townsend's formulas) is not finite where
    singular values repeat or vanish. A non-square matrix needs ``full_matrices=False`` for
    its vectors: the extra columns of a full ``U`` have no derivative (JAX refuses them too).
    A complex matrix: ``Re diag(U^H dA V)``, and JAX's phase convention for the vectors
    (only ``U``'s phases move); differentiate what does not depend on the phases.

    >>> import numpy as np, symad as sd
    >>> sd.grad(lambda a: np.linalg.svd(a, compute_uv=False)[0])(np.diag([3.0, 1.0]))
    array([[1., 0.],
           [0., 0.]])
    """
    _check_stack(a, "numpy.linalg.svd")
    if hermitian:
        raise TracingError(f"numpy.linalg.svd in function {traced_function_name()!r}: hermitian=True "
                           "is not traced (NumPy then signs the vectors differently); drop it, or use "
                           "np.linalg.eigh for a symmetric matrix")
    values = _record(L.svd_values_p, (a,))
    if not compute_uv:
        return values
    m, n = shape(a)[-2:]
    if full_matrices and m != n:
        raise TracingError(f"numpy.linalg.svd in function {traced_function_name()!r}: the full "
                           f"singular vectors of a {m}x{n} matrix are not traced (the columns past "
                           "the rank have no derivative); pass full_matrices=False")
    return SVDResult(_record(L.svd_u_p, (a,)), values, _record(L.svd_vh_p, (a,)))


@numpy_when_concrete(_np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=None):
    """The pseudo-inverse, NumPy's value (by SVD, small singular values dropped).

    Its derivative is JAX's, at constant rank: finite where singular values repeat (as for
    ``pinv`` of an orthogonal matrix), unlike a derivative through ``svd``'s vectors.

    >>> import numpy as np, symad as sd
    >>> bool(np.allclose(sd.grad(lambda a: np.sum(np.linalg.pinv(a)))(np.eye(2)), -np.ones((2, 2))))
    True
    """
    _check_stack(a, "numpy.linalg.pinv")
    if hermitian:
        raise TracingError(f"numpy.linalg.pinv in function {traced_function_name()!r}: hermitian=True "
                           "is not traced; drop it (the value is the same)")
    return _record(L.pinv_p, (a,), (("rcond", rcond), ("rtol", rtol)))


@numpy_when_concrete(_np.linalg.qr)
def qr(a, mode="reduced"):
    """``(Q, R)`` (``mode='r'``: ``R``) of a matrix with at least as many rows as columns,
    NumPy's factors; two nodes. The derivative is JAX's.

    >>> import numpy as np, symad as sd
    >>> q, r = sd.trace(lambda a: np.linalg.qr(a), np.eye(2))(np.diag([2.0, 3.0]))
    >>> r
    array([[2., 0.],
           [0., 3.]])
    """
    _check_stack(a, "numpy.linalg.qr")
    m, n = shape(a)[-2:]
    if m < n or mode not in ("reduced", "r", "complete") or (mode == "complete" and m != n):
        raise TracingError(
            f"numpy.linalg.qr in function {traced_function_name()!r}: symad traces the reduced QR "
            f"factors (mode 'reduced' or 'r') of a matrix with at least as many rows as columns; "
            f"got a {m}x{n} matrix and mode={mode!r} (the factors of a wide matrix, a complete Q "
            "and the raw form have no derivative here)")
    r = _record(L.qr_r_p, (a,))
    return r if mode == "r" else QRResult(_record(L.qr_q_p, (a,)), r)


@numpy_when_concrete(_np.linalg.eig)
def eig(a):
    """``(eigenvalues, eigenvectors)`` of a general square matrix (or a stack), NumPy's values,
    always complex (as JAX's: NumPy gives real arrays when every eigenvalue of a real matrix
    is real; a traced value's type cannot depend on the values).

    Two nodes (LAPACK's geev runs once for each). The derivative is JAX's: with
    ``G = V^-1 dA V``, ``dw = diag(G)`` and ``dV = V (F * G)`` with ``F[i, j] = 1 / (w[j] -
    w[i])``, less each column's change of norm, so columns stay unit vectors. An
    eigenvector's phase is arbitrary (LAPACK makes its largest component real; the
    derivative does not follow that choice): differentiate quantities that do not depend on
    it, such as ``abs(v)`` or ``v v^H``. Not finite where eigenvalues repeat.

    >>> import numpy as np, symad as sd
    >>> a = np.array([[2.0, 1.0], [0.0, 3.0]])
    >>> sd.grad(lambda a: np.real(np.linalg.eig(a)[0][1]))(a)   # w = (2, 3): u v^T / (u^T v)
    array([[0., 0.],
           [1., 1.]])
    """
    _check_matrix(a, "numpy.linalg.eig")
    note_complex()  # eig makes complex values: nodes from here on ask about them
    return EigResult(_record(L.eig_values_p, (a,)), _record(L.eig_vectors_p, (a,)))


@numpy_when_concrete(_np.linalg.eigvals)
def eigvals(a):
    """The eigenvalues of a general square matrix, complex, in ``eig``'s order; their
    derivative is ``diag(V^-1 dA V)``.

    >>> import numpy as np, symad as sd
    >>> rotation = np.array([[0.0, -1.0], [1.0, 0.0]])   # eigenvalues +i and -i
    >>> sd.trace(np.linalg.eigvals, rotation)(rotation)
    array([0.+1.j, 0.-1.j])
    """
    _check_matrix(a, "numpy.linalg.eigvals")
    note_complex()
    return _record(L.eig_values_p, (a,))


@numpy_when_concrete(_np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """``(x, residuals, rank, s)`` as ``numpy.linalg.lstsq``: ``x`` minimises ``|a x - b|``
    (of least norm), one node, NumPy's value.

    ``x``'s derivative is that of ``pinv(a) @ b`` at constant rank (singular values at most
    ``rcond`` times the largest count as zero, as NumPy's cutoff): for a matrix of full
    column rank the derivative of the normal equations' solution; for a rank-deficient one,
    of the minimum-norm solution along perturbations that keep the rank (JAX's lstsq, by
    SVD, gives the same where it is finite). ``residuals`` are the squared norms of
    ``b - a x`` per column, shape ``(k,)`` (``(1,)`` for a vector ``b``), when ``a`` has more
    rows than columns, else empty, as NumPy decides from the shape (NumPy also returns
    them empty for a rank-deficient ``a``, a decision on values a traced shape cannot make);
    ``rank`` is the count of singular values above the cutoff, a traced number (a float, as
    traced values are); ``s`` the singular values, with ``svd``'s derivative.

    >>> import numpy as np, symad as sd
    >>> a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> x, residuals, rank, s = sd.trace(lambda b: np.linalg.lstsq(a, b), np.ones(3))(np.array([1.0, 2.0, 0.0]))
    >>> bool(np.allclose(x, [0.0, 1.0])), residuals, int(rank)
    (True, array([3.]), 2)
    """
    _check_matrix_shape(a, b, "numpy.linalg.lstsq")
    vector = ndim(b) == 1
    x = _record(L.lstsq_p, (a, b), (("vector", vector), ("rcond", None if rcond is None else float(rcond))))
    m, n = shape(a)
    s = svd(a, compute_uv=False)
    if m > n:
        squares = _squared_magnitude(subtract(b, matmul(a, x)))
        residuals = reshape(sum(squares), (1,)) if vector else sum(squares, axis=0)
    else:
        residuals = _np.zeros((0,))
    cutoff = (_np.finfo(float).eps * builtins.max(m, n) if rcond is None
              else _np.finfo(float).eps if rcond < 0 else float(rcond))
    rank = sum(where(greater(s, multiply(max(s), cutoff)), 1.0, 0.0))
    return x, residuals, rank, s


def _check_matrix_shape(a, b, what: str) -> None:
    """NumPy's lstsq takes one matrix ``a`` (M, N) and ``b`` (M,) or (M, K)."""
    a_shape, b_shape = shape(a), shape(b)
    if len(a_shape) != 2 or len(b_shape) not in (1, 2) or b_shape[0] != a_shape[0]:
        raise TracingError(f"{what} in function {traced_function_name()!r}: 'a' must be a matrix "
                           f"(M, N) and 'b' of shape (M,) or (M, K), as NumPy's; got shapes "
                           f"{a_shape} and {b_shape}")


def svdvals(x):
    """The singular values, descending (NumPy 2's ``numpy.linalg.svdvals``)."""
    return svd(x, compute_uv=False)


@numpy_when_concrete(_np.linalg.matrix_power)
def matrix_power(a, n):
    """``a`` to the integer power ``n``, by repeated squaring (``n < 0``: of ``inv(a)``).

    >>> import numpy as np, symad as sd
    >>> float(sd.grad(lambda a: np.sum(np.linalg.matrix_power(a, 3)))(np.eye(1) * 2.0)[0, 0])
    12.0
    """
    _check_matrix(a, "numpy.linalg.matrix_power")
    if isinstance(n, builtins.bool) or not isinstance(n, (int, _np.integer)):
        raise TracingError(f"numpy.linalg.matrix_power in function {traced_function_name()!r}: the "
                           f"exponent 'n' must be an integer, got {n!r}")
    n = int(n)
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    if result is None:  # a ** 0: the identity, stacked as a is
        return _np.broadcast_to(_np.eye(shape(a)[-1]), shape(a)).copy()
    return result


@numpy_when_concrete(_np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """``arrays[0] @ arrays[1] @ ...``, left to right."""
    if out is not None:
        raise TracingError(f"numpy.linalg.multi_dot in function {traced_function_name()!r}: "
                           "out= cannot hold traced values; drop it")
    result = arrays[0]
    for array in arrays[1:]:
        result = matmul(result, array)
    return result


# ---------------------------------------------------------------------------
# Norms
# ---------------------------------------------------------------------------


def _vector_norm(x, ord, axis: int):  # noqa: A002 - NumPy's name
    if ord is None or ord == 2:
        return sqrt(sum(_squared_magnitude(x), axis=axis, keepdims=True))
    if isinstance(ord, str):
        raise TracingError(f"numpy.linalg.norm in function {traced_function_name()!r}: ord={ord!r} "
                           "is a matrix norm; a vector takes a number (or inf, -inf)")
    magnitude = absolute(x)
    if ord == math.inf:
        return max(magnitude, axis=axis, keepdims=True)
    if ord == -math.inf:
        return min(magnitude, axis=axis, keepdims=True)
    if ord == 0:  # the count of nonzero elements: piecewise constant
        return sum(where(not_equal(x, 0.0), 1.0, 0.0), axis=axis, keepdims=True)
    if ord == 1:
        return sum(magnitude, axis=axis, keepdims=True)
    return power(sum(power(magnitude, float(ord)), axis=axis, keepdims=True), 1.0 / float(ord))


def _matrix_norm(x, ord, rows: int, cols: int):  # noqa: A002 - NumPy's name
    if ord is None or ord == "fro":
        return sqrt(sum(_squared_magnitude(x), axis=(rows, cols), keepdims=True))
    magnitude = absolute(x)
    if ord in (1, -1):  # the largest (smallest) column sum
        reduce = max if ord == 1 else min
        return reduce(sum(magnitude, axis=rows, keepdims=True), axis=cols, keepdims=True)
    if ord in (math.inf, -math.inf):  # the largest (smallest) row sum
        reduce = max if ord == math.inf else min
        return reduce(sum(magnitude, axis=cols, keepdims=True), axis=rows, keepdims=True)
    if ord in (2, -2, "nuc"):  # the largest, smallest or total singular value
        moved = moveaxis(x, (rows, cols), (-2, -1))
        values = svd(moved, compute_uv=False)
        reduce = {2: max, -2: min, "nuc": sum}[ord]
        kept = tuple(1 if axis in (rows, cols) else size for axis, size in enumerate(shape(x)))
        return reshape(reduce(values, axis=-1), kept)
    raise TracingError(f"numpy.linalg.norm in function {traced_function_name()!r}: invalid norm "
                       f"order {ord!r} for matrices (NumPy takes 'fro', 'nuc', 1, -1, 2, -2, inf, -inf)")


def _squared_magnitude(x):
    """``|x|**2`` elementwise: ``x * x`` for real values, ``Re(x * conj(x))`` for complex ones
    (NumPy's norms of complex arrays are real)."""
    if is_complex_value(x):
        return real(multiply(x, conjugate(x)))
    return multiply(x, x)


@numpy_when_concrete(_np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    """NumPy's vector and matrix norms, every ``ord``.

    Vectors: ``None``/2 (Euclidean), 1, ``inf``, ``-inf``, 0 (the count of nonzero
    elements, whose derivative is zero), any other ``p``; matrices: ``None``/``'fro'``, 1,
    -1, ``inf``, ``-inf``, and 2, -2, ``'nuc'`` by singular values. Maxima and minima share
    the derivative at ties, as JAX's.

    >>> import numpy as np, symad as sd
    >>> sd.grad(lambda x: np.linalg.norm(x, ord=1))(np.array([3.0, -4.0]))
    array([ 1., -1.])
    """
    x = asarray(x)  # a list of traced values too (np.linalg.norm([x, y]))
    x_ndim = ndim(x)
    if axis is None and ord is None:  # the 2-norm of all elements, whatever the dimension
        result = sqrt(sum(_squared_magnitude(x)))
        return reshape(result, (1,) * x_ndim) if keepdims else result
    if axis is None:
        if x_ndim not in (1, 2):
            raise TracingError(f"numpy.linalg.norm in function {traced_function_name()!r}: ord={ord!r} "
                               f"needs a vector or a matrix (or axis=), got {x_ndim} dimensions")
        axis = (0,) if x_ndim == 1 else (0, 1)
    axes = tuple(int(a) % x_ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if len(axes) == 1:
        result = _vector_norm(x, ord, axes[0])
    elif len(axes) == 2 and axes[0] != axes[1]:
        result = _matrix_norm(x, ord, *axes)
    else:
        raise TracingError(f"numpy.linalg.norm in function {traced_function_name()!r}: axis={axis!r} "
                           "must name one axis (a vector norm) or two different axes (a matrix norm)")
    if keepdims:
        return result
    kept = tuple(size for position, size in enumerate(shape(x)) if position not in axes)
    return reshape(result, kept)


# ---------------------------------------------------------------------------
# scipy.linalg
# ---------------------------------------------------------------------------


def _scipy(name: str):
    """SciPy's function for concrete arguments (SciPy is imported on first use)."""
    def call(*args, **kwargs):
        import scipy.linalg

        return getattr(scipy.linalg, name)(*args, **kwargs)
    call.__name__ = name
    return call


_TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}  # real matrices: 'C' is 'T'
_CONJUGATE_TRANS = (2, "C")  # a complex matrix: T^-H b = conj(T)^-T b


@numpy_when_concrete(_scipy("solve_triangular"))
def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """``scipy.linalg.solve_triangular``: ``a^{-1} b`` (``trans=1``: ``a^{-T} b``; ``trans=2`` or
    ``'C'``: ``a^{-H} b``) from one triangle.

    Only the triangle SciPy reads (without the diagonal if ``unit_diagonal``) has a
    derivative; the other elements do not change the value.

    >>> import numpy as np, symad as sd
    >>> T = np.array([[2.0, 0.0], [1.0, 4.0]])
    >>> sd.grad(lambda b: np.sum(solve_triangular(T, b, lower=True)))(np.ones(2))
    array([0.375, 0.25 ])
    """
    if trans not in _TRANS:
        raise TracingError(f"scipy.linalg.solve_triangular in function {traced_function_name()!r}: "
                           f"trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    _check_matrix(a, "scipy.linalg.solve_triangular")
    if trans in _CONJUGATE_TRANS and is_complex_value(a):
        a = conjugate(a)
    params = (("lower", builtins.bool(lower)), ("trans", _TRANS[trans]),
              ("unit_diagonal", builtins.bool(unit_diagonal)), ("vector", ndim(b) < ndim(a)))
    return _record(L.solve_triangular_p, (a, b), params)


@numpy_when_concrete(_scipy("cho_factor"))
def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` as ``scipy.linalg.cho_factor``, for :func:`cho_solve`.

    ``c`` is the Cholesky factor of the triangle read (the upper by default, as SciPy);
    its other triangle holds zeros, where SciPy leaves what was there.
    """
    _check_matrix(a, "scipy.linalg.cho_factor")
    return (cholesky(a) if lower else cholesky(a, upper=True)), builtins.bool(lower)


@numpy_when_concrete(_scipy("cho_solve"))
def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """``x`` with ``a @ x = b`` from ``(c, lower) = cho_factor(a)``: two triangular solves.

    >>> import numpy as np, symad as sd
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> f = lambda A, b: np.sum(cho_solve(cho_factor(A), b))
    >>> bool(np.allclose(sd.grad(f, argnums=1)(A, np.ones(2)), np.linalg.solve(A, np.ones(2))))
    True
    """
    c, lower = c_and_lower  # a = c c^H (lower) or c^H c: 'C' solves with c^H (c^T if real)
    if lower:
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans="C", lower=True)
    return solve_triangular(c, solve_triangular(c, b, trans="C"), trans=0)


@numpy_when_concrete(_scipy("expm"))
def expm(A):  # noqa: N803 - SciPy's name
    """``scipy.linalg.expm``: the matrix exponential, one node; its derivative is the
    Fréchet derivative, the top right block of ``expm([[A, dA], [0, A]])``.

    >>> import numpy as np, symad as sd
    >>> float(sd.grad(lambda t: expm(np.array([[0.0, 1.0], [0.0, 0.0]]) * t)[0, 1])(2.0))
    1.0
    """
    _check_matrix(A, "scipy.linalg.expm")
    return _record(L.expm_p, (A,))


#: NumPy's functions this family implements (symad.numpy dispatches them here).
NUMPY_FUNCTIONS = {
    _np.linalg.solve: solve, _np.linalg.inv: inv, _np.linalg.det: det, _np.linalg.slogdet: slogdet,
    _np.linalg.cholesky: cholesky, _np.linalg.matrix_power: matrix_power,
    _np.linalg.multi_dot: multi_dot, _np.linalg.norm: norm, _np.linalg.eigh: eigh,
    _np.linalg.eigvalsh: eigvalsh, _np.linalg.svd: svd, _np.linalg.svdvals: svdvals,
    _np.linalg.pinv: pinv, _np.linalg.qr: qr,
}
NUMPY_FUNCTIONS.update({_np.linalg.eig: eig, _np.linalg.eigvals: eigvals, _np.linalg.lstsq: lstsq})


def scipy_functions() -> dict:
    """``{scipy.linalg function: traceable version}``, for the foreign-function registry."""
    import scipy.linalg

    return {scipy.linalg.solve_triangular: solve_triangular, scipy.linalg.cho_factor: cho_factor,
            scipy.linalg.cho_solve: cho_solve, scipy.linalg.expm: expm}

