"""The rules of the linear-algebra primitives (:mod:`symad.linalg_primitives`), one row per table.

Forward mode (``TANGENT``) and reverse mode (``TRANSPOSE``) are matrix calculus (Giles,
"Collected matrix derivative results"; JAX's ``linalg`` rules), written with the
linear-algebra primitives themselves, ``einsum`` and elementwise products, so that a
derivative differentiates again (Hessian-vector products through ``solve`` and
``slogdet``). With ``X = inv(A)``, ``x = solve(A, b)``, ``L = cholesky(A)``:

====================  ===================================  ======================================
primitive             tangent                              cotangent of the operands
====================  ===================================  ======================================
``inv``               ``-X dA X``                          ``-X^T C X^T``
``solve``             ``solve(A, db - dA x)``              ``b̄ = solve(A^T, c)``, ``Ā = -b̄ x^T``
``lu_factor``         (none: solve's rules go through A)   (none)
``det``               ``det(A) tr(X dA)``                  ``c det(A) X^T``
``slogdet`` (log|.|)  ``tr(X dA)``                         ``c X^T``
``slogdet`` (sign)    0                                    0
``cholesky``          ``L Φ(L^-1 sym(dA) L^-T)``           ``sym(L^-T Φ(L^T C) L^-1)``
``solve_triangular``  ``T^-1 (db - tri(dT) x)``            ``b̄ = T^-T c``, ``T̄ = -tri(b̄ x^T)``
``eigh`` (values w)   ``diag(V^T sym(dA) V)``              ``V diag(c) V^T``
``eigh`` (vectors V)  ``V (F ∘ V^T sym(dA) V)``            ``sym(V (F ∘ V^T C) V^T)``
``svd`` (values s)    ``diag(U^T dA V)``                   ``U diag(c) V^T``
``svd`` (U, V^T)      Townsend's, with ``F`` of ``s^2``    their transposes (thin SVD)
``expm``              ``[expm([[A, dA], [0, A]])]_12``     ``[expm([[A^T, C], [0, A^T]])]_12``
``qr`` (Q, R)         JAX's, with ``Y = dA R^-1``          its transpose (rows >= columns)
``pinv`` (P)          ``-P dA P + P P^T dA^T (I - A P)``   the transpose of the tangent map
                      ``+ (I - P A) dA^T P^T P``
``eig`` (values w)    ``diag(V^-1 dA V)``                  ``V^-T diag(c) V^T``
``eig`` (vectors V)   ``D - V Re diag(V^H D)``,            its transpose (complex: under the
                      ``D = V (F ∘ V^-1 dA V)``            pairing ``Re(ct * t)``)
``lstsq`` (x = P b)   ``P (db - dA x) + P P^T dA^T r``     ``b̄ = P^T c``; ``Ā = -b̄ x^T``
                      ``+ (I - P A) dA^T P^T x``           ``+ r (P b̄)^T + P^T x (c - A^T b̄)^T``
====================  ===================================  ======================================

``Φ`` keeps the lower triangle and halves the diagonal; ``sym(M) = (M + M^T) / 2``;
``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal, 0 on it (infinite for a repeated
eigenvalue, as JAX's: the eigenvectors of a degenerate eigenvalue have no derivative, the
eigenvalues do). ``cholesky`` and ``eigh`` read one triangle of their operand; the
derivative is that of the function at ``(A + A^T) / 2`` (JAX's convention): along
symmetric directions ``dA`` it is the derivative of NumPy's function, and the gradient is
a symmetric matrix. ``solve_triangular``
reads one triangle (without the diagonal if ``unit_diagonal``), and its derivative is taken
along that triangle only (``tri`` masks the others): the other elements do not change its
value.

**Complex matrices** (JAX's conventions: a cotangent pairs with a tangent as
``Re(sum(ct * t))``, no conjugation). ``inv``, ``solve``, ``det`` and ``expm`` are
holomorphic: their rules above hold as written, plain transposes included. The others
take conjugate transposes where a real matrix has transposes (``U^H dA V``, ``V^H dA V``,
``L L^H``, ``P^H``, ``sym`` becomes the Hermitian part), a real part where the value is
real (``s``, ``w``, ``log|det A|``), and JAX's phase terms (``svd``'s ``U``, ``qr``'s ``W``;
the phase of ``det``); each cotangent is the transpose of its tangent for that pairing.
A rule takes its complex branch only for a complex operand (:func:`_is_complex`), so a
real matrix's graph is what it was.

The unroll and Taylor tables name their reasons here; the sparsity pattern (dense within
each matrix) is :mod:`symad.transforms.sparsity`'s, the index notation (an element of
``inv(A)``, ``{A^{-1}}_{i j}``) :mod:`symad.export.index_rules`'s.

>>> from symad import linalg_primitives as L
>>> L.inv_p in TRANSPOSE and L.inv_p in TANGENT
True
"""

from __future__ import annotations

import numpy as np
import sympy

from symad import array_primitives as A
from symad import linalg_primitives as L
from symad import primitives as P
from symad.atoms import COMPLEX_SEEN, is_complex_atom
from symad.graph import atom_shape
from symad.rules.tangents import TANGENT, aligned
from symad.rules.taylor import TAYLOR
from symad.rules.transposes import TRANSPOSE
from symad.rules.unroll import UNROLL

__all__ = []

HALF = sympy.Rational(1, 2)


# ---------------------------------------------------------------------------
# Helpers: matrix products, transposes and masks, recorded
# ---------------------------------------------------------------------------


def _mm(builder, subscripts: str, a, b):
    return A.record_einsum(builder, subscripts, a, b)


def _t(builder, x):
    """The transpose of the last two dimensions."""
    return A.record_transpose(builder, x, (1, 0))


def _neg(builder, x):
    return builder.record(P.neg_p, (x,))


def _mul(builder, a, b):
    return builder.record(P.mul_p, (a, b))


def _sym(builder, x):
    return _mul(builder, builder.record(P.add_p, (x, _t(builder, x))), HALF)


def _is_complex(atom) -> bool:
    """True for a complex operand: its rules take conjugate transposes where a real
    operand's take transposes."""
    return COMPLEX_SEEN[0] and is_complex_atom(atom)


def _conj(builder, x, complex_: bool):
    """``conj(x)`` for a complex matrix, ``x`` itself for a real one (no node)."""
    return builder.record(A.conj_p, (x,)) if complex_ else x


def _ct(builder, x, complex_: bool):
    """The conjugate transpose ``x^H`` (for a real matrix the transpose)."""
    return _conj(builder, _t(builder, x), complex_)


def _real(builder, x, complex_: bool):
    """``Re(x)`` for a complex value, ``x`` itself for a real one."""
    return builder.record(A.real_p, (x,)) if complex_ else x


def _mask(builder, n: int, lower: bool, diagonal):
    """A constant ``n x n`` mask: ones on one triangle, ``diagonal`` on the diagonal."""
    mask = np.tril(np.ones((n, n)), -1) if lower else np.triu(np.ones((n, n)), 1)
    mask[np.diag_indices(n)] = diagonal
    return builder.record(A.constant_p, (), (("value", A.ConstantArray(mask)),))


def _per_matrix(builder, value, lead: int):
    """A value per matrix of a stack (behind ``lead`` seeds), given two trailing unit axes."""
    if not value.is_Symbol:  # a number broadcasts as it is (the seed 1 of a gradient)
        return value
    core = atom_shape(value)[lead:]
    return A.record_reshape(builder, value, core + (1, 1), lead)


def _aligned(builder, tangent, node, core: int, lead: int):
    """An operand's tangent, its core given the node's stack rank (seeds stay in front)."""
    if tangent is None:
        return None
    result_core = L.core_ranks(node)[0]
    return aligned(builder, tangent, len(node.shape) - result_core + core, lead)


def _product_subscripts(vector: bool, transposed: bool = False) -> str:
    """``M @ x`` for a matrix ``M`` (``M^T`` if ``transposed``) and a vector or matrix ``x``."""
    m = "ji" if transposed else "ij"
    return f"{m},j->i" if vector else f"{m},jk->ik"


def _outer_subscripts(vector: bool, transposed: bool = False) -> str:
    """``u v^T`` (``v u^T`` if ``transposed``) of two vectors, or of two matrices' columns."""
    if vector:
        return "j,i->ij" if transposed else "i,j->ij"
    return "jk,ik->ij" if transposed else "ik,jk->ij"


# ---------------------------------------------------------------------------
# Tangents (forward mode) and cotangents (reverse mode)
# ---------------------------------------------------------------------------


@TANGENT.register(L.inv_p)
def _inv_tangent(builder, node, tangents, lead):
    da = _aligned(builder, tangents[0], node, 2, lead)
    return _neg(builder, _mm(builder, "ij,jk->ik", _mm(builder, "ij,jk->ik", node, da), node))


@TRANSPOSE.register(L.inv_p)
def _inv_cotangent(builder, ct, node, index, lead):
    left = _mm(builder, "ji,jk->ik", node, ct)
    return _neg(builder, _mm(builder, "ik,lk->il", left, node))


@TANGENT.register(L.solve_p)
def _solve_tangent(builder, node, tangents, lead):
    params = dict(node.params)
    vector, transposed = params["vector"], bool(params["trans"])
    a, _, factors = node.args
    da = _aligned(builder, tangents[0], node, 2, lead)
    db = _aligned(builder, tangents[1], node, 1 if vector else 2, lead)
    rhs = None if da is None else _neg(builder, _mm(builder, _product_subscripts(vector, transposed), da, node))
    rhs = db if rhs is None else rhs if db is None else builder.record(P.add_p, (db, rhs))
    return builder.record(L.solve_p, (a, rhs, factors), node.params)


@TRANSPOSE.register(L.solve_p)
def _solve_cotangent(builder, ct, node, index, lead):
    if index == 2:
        return None  # the factors: the derivative goes through the matrix itself
    params = dict(node.params)
    a, _, factors = node.args
    flipped = tuple((k, 1 - v if k == "trans" else v) for k, v in node.params)
    b_bar = builder.record(L.solve_p, (a, ct, factors), flipped)
    if index == 1:
        return b_bar
    # -b̄ x^T, negated before the outer product: n, not n^2, negations.
    return _mm(builder, _outer_subscripts(params["vector"], bool(params["trans"])), _neg(builder, b_bar), node)


@TANGENT.register(L.lu_factor_p)
def _lu_factor_tangent(builder, node, tangents, lead):
    return None  # read only by solve, whose rules differentiate through the matrix


@TRANSPOSE.register(L.lu_factor_p)
def _lu_factor_cotangent(builder, ct, node, index, lead):
    return None  # solve gives its factors no cotangent: none reaches here


def _trace_with_inverse(builder, node, tangents, lead):
    """``tr(A^{-1} dA)``, per matrix of a stack."""
    da = _aligned(builder, tangents[0], node, 2, lead)
    inverse = builder.record(L.inv_p, (node.args[0],))
    return _mm(builder, "ij,ji->", inverse, da)


def _inverse_transpose_times(builder, scale, node, lead):
    """``scale A^{-T}`` for a value ``scale`` per matrix of the stack."""
    inverse = builder.record(L.inv_p, (node.args[0],))
    return _mul(builder, _per_matrix(builder, scale, lead), _t(builder, inverse))


@TANGENT.register(L.logabsdet_p)
def _logabsdet_tangent(builder, node, tangents, lead):
    # log |det A| = Re log det A: the real part of tr(A^-1 dA); its transpose is c A^-T
    # for a complex matrix too (a real c pairs with the real part).
    return _real(builder, _trace_with_inverse(builder, node, tangents, lead), _is_complex(node.args[0]))


@TRANSPOSE.register(L.logabsdet_p)
def _logabsdet_cotangent(builder, ct, node, index, lead):
    return _inverse_transpose_times(builder, ct, node, lead)


@TANGENT.register(L.det_p)
def _det_tangent(builder, node, tangents, lead):
    return _mul(builder, node, _trace_with_inverse(builder, node, tangents, lead))


@TRANSPOSE.register(L.det_p)
def _det_cotangent(builder, ct, node, index, lead):
    return _inverse_transpose_times(builder, _mul(builder, ct, node), node, lead)


@TANGENT.register(L.det_sign_p)
def _det_sign_tangent(builder, node, tangents, lead):
    if not _is_complex(node.args[0]):
        return None  # piecewise constant: an exact zero
    # The phase det A / |det A| of a complex matrix: d sign = sign i Im tr(A^-1 dA).
    phase = builder.record(A.imag_p, (_trace_with_inverse(builder, node, tangents, lead),))
    return _mul(builder, node, _mul(builder, phase, sympy.I))


@TRANSPOSE.register(L.det_sign_p)
def _det_sign_cotangent(builder, ct, node, index, lead):
    if not _is_complex(node.args[0]):
        return None
    # Re(c sign i Im τ) = Re(i Im(c sign) τ): τ's cotangent i Im(c sign), then A^-T.
    weight = _mul(builder, builder.record(A.imag_p, (_mul(builder, ct, node),)), sympy.I)
    return _inverse_transpose_times(builder, weight, node, lead)


def _triangular(builder, lower_factor, b, *, trans: int, lower: bool = True, vector: bool = False,
                unit_diagonal: bool = False):
    params = (("lower", lower), ("trans", trans), ("unit_diagonal", unit_diagonal), ("vector", vector))
    return builder.record(L.solve_triangular_p, (lower_factor, b), params)


@TANGENT.register(L.cholesky_p)
def _cholesky_tangent(builder, node, tangents, lead):
    # A complex (Hermitian) matrix, L L^H = A: L Φ(L^-1 dA L^-H), conjugate transposes
    # where a real matrix's rule has transposes (JAX's).
    n = node.shape[-1]
    complex_ = _is_complex(node.args[0])
    da = _hermitian_part(builder, _aligned(builder, tangents[0], node, 2, lead), complex_)
    inner = _triangular(builder, node, da, trans=0)  # L^-1 dA
    inner = _triangular(builder, node, _ct(builder, inner, complex_), trans=0)  # L^-1 dA L^-H
    return _mm(builder, "ij,jk->ik", node, _mul(builder, inner, _mask(builder, n, True, 0.5)))


@TRANSPOSE.register(L.cholesky_p)
def _cholesky_cotangent(builder, ct, node, index, lead):
    # Complex: the Hermitian part of L^-T Φ(L^T C) conj(L^-1), the transpose for Re(ct * t).
    n = node.shape[-1]
    complex_ = _is_complex(node.args[0])
    phi = _mul(builder, _mm(builder, "ji,jk->ik", node, ct), _mask(builder, n, True, 0.5))
    left = _triangular(builder, node, phi, trans=1)  # L^-T Φ
    both = _ct(builder, _triangular(builder, node, _ct(builder, left, complex_), trans=1), complex_)
    return _hermitian_part(builder, both, complex_)


def _triangle_read(builder, node):
    """The mask of the elements of ``T`` that ``solve_triangular`` reads."""
    params = dict(node.params)
    return _mask(builder, atom_shape(node.args[0])[-1], params["lower"], 0.0 if params["unit_diagonal"] else 1.0)


@TANGENT.register(L.solve_triangular_p)
def _solve_triangular_tangent(builder, node, tangents, lead):
    params = dict(node.params)
    vector, trans = params["vector"], params["trans"]
    dt = _aligned(builder, tangents[0], node, 2, lead)
    db = _aligned(builder, tangents[1], node, 1 if vector else 2, lead)
    rhs = None
    if dt is not None:
        dt = _mul(builder, dt, _triangle_read(builder, node))
        rhs = _neg(builder, _mm(builder, _product_subscripts(vector, bool(trans)), dt, node))
    rhs = db if rhs is None else rhs if db is None else builder.record(P.add_p, (db, rhs))
    return builder.record(L.solve_triangular_p, (node.args[0], rhs), node.params)


@TRANSPOSE.register(L.solve_triangular_p)
def _solve_triangular_cotangent(builder, ct, node, index, lead):
    params = dict(node.params)
    flipped = tuple((k, 1 - v if k == "trans" else v) for k, v in node.params)
    b_bar = builder.record(L.solve_triangular_p, (node.args[0], ct), flipped)
    if index == 1:
        return b_bar
    outer = _mm(builder, _outer_subscripts(params["vector"], bool(params["trans"])), b_bar, node)
    return _neg(builder, _mul(builder, outer, _triangle_read(builder, node)))


def _eigh_parts(builder, node):
    """``(w, V)`` of the symmetric operand of an eigen node (the other one recorded too)."""
    a = node.args[0]
    values = node if node.primitive is L.eigh_values_p else builder.record(L.eigh_values_p, (a,))
    vectors = node if node.primitive is L.eigh_vectors_p else builder.record(L.eigh_vectors_p, (a,))
    return values, vectors


def _gaps(builder, values):
    """``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal, 0 on it (JAX's: a repeated
    eigenvalue gives an infinite factor, so its eigenvectors' derivatives are not finite)."""
    core = atom_shape(values)
    n = core[-1]
    rows = A.record_reshape(builder, values, core[:-1] + (n, 1))
    columns = A.record_reshape(builder, values, core[:-1] + (1, n))
    identity = builder.record(A.constant_p, (), (("value", A.ConstantArray(np.eye(n))),))
    shifted = builder.record(P.add_p, (builder.record(P.sub_p, (columns, rows)), identity))
    return builder.record(P.sub_p, (builder.record(P.div_p, (sympy.Integer(1), shifted)), identity))


def _projected(builder, vectors, da, conjugated=None):
    """``V^T dA V``; with ``conjugated = conj(V)``, ``V^H dA V``."""
    left = vectors if conjugated is None else conjugated
    return _mm(builder, "ji,jk->ik", left, _mm(builder, "ij,jk->ik", da, vectors))


def _hermitian_part(builder, x, complex_: bool):
    """``(x + x^H) / 2`` (for a real matrix ``sym(x)``, the same nodes as before)."""
    if not complex_:
        return _sym(builder, x)
    return _mul(builder, builder.record(P.add_p, (x, _ct(builder, x, True))), HALF)


@TANGENT.register(L.eigh_values_p, L.eigh_vectors_p)
def _eigh_tangent(builder, node, tangents, lead):
    # A complex (Hermitian) matrix: V^H where a real one has V^T, JAX's (no phase term:
    # F's diagonal is 0, so each eigenvector's derivative is orthogonal to it).
    values, vectors = _eigh_parts(builder, node)
    complex_ = _is_complex(node.args[0])
    da = _hermitian_part(builder, _aligned(builder, tangents[0], node, 2, lead), complex_)
    conjugated = _conj(builder, vectors, complex_)
    if node.primitive is L.eigh_values_p:  # Re diag(V^H dA V)
        return _real(builder, _mm(builder, "ji,ji->i", conjugated, _mm(builder, "ij,jk->ik", da, vectors)),
                     complex_)
    inner = _mul(builder, _gaps(builder, values), _projected(builder, vectors, da, conjugated))
    return _mm(builder, "ij,jk->ik", vectors, inner)


@TRANSPOSE.register(L.eigh_values_p, L.eigh_vectors_p)
def _eigh_cotangent(builder, ct, node, index, lead):
    # Complex: conj(V) diag(w̄) V^T, and the Hermitian part of conj(V) (F o V^T V̄) V^T.
    values, vectors = _eigh_parts(builder, node)
    complex_ = _is_complex(node.args[0])
    conjugated = _conj(builder, vectors, complex_)
    if node.primitive is L.eigh_values_p:  # V diag(w̄) V^T
        core = atom_shape(ct)[lead:]
        scaled = _mul(builder, conjugated, A.record_reshape(builder, ct, core[:-1] + (1, core[-1]), lead))
        return _mm(builder, "ik,jk->ij", scaled, vectors)
    inner = _mul(builder, _gaps(builder, values), _mm(builder, "ji,jk->ik", vectors, ct))
    product = _mm(builder, "ik,jk->ij", _mm(builder, "ij,jk->ik", conjugated, inner), vectors)
    return _hermitian_part(builder, product, complex_)


def _svd_parts(builder, node):
    """``(s, U, Vh)`` of the operand of a singular-value node (the others recorded too)."""
    a = node.args[0]
    return tuple(node if node.primitive is p else builder.record(p, (a,))
                 for p in (L.svd_values_p, L.svd_u_p, L.svd_vh_p))


def _as_row(builder, values, reciprocal: bool = False, column: bool = False):
    """Singular values ``(..., k)`` as ``(..., 1, k)`` (``column``: ``(..., k, 1)``), or their
    reciprocals."""
    core = atom_shape(values)
    if reciprocal:
        values = builder.record(P.div_p, (sympy.Integer(1), values))
    return A.record_reshape(builder, values, core[:-1] + ((core[-1], 1) if column else (1, core[-1])))


@TANGENT.register(L.svd_values_p, L.svd_u_p, L.svd_vh_p)
def _svd_tangent(builder, node, tangents, lead):
    # A complex matrix: conjugate transposes where a real one has transposes (uc, vc are
    # conj(U), conj(Vh); for a real matrix U and Vh themselves, and the graph is as before).
    s, u, vh = _svd_parts(builder, node)
    complex_ = _is_complex(node.args[0])
    uc, vc = _conj(builder, u, complex_), _conj(builder, vh, complex_)
    m, n = atom_shape(node.args[0])[-2:]
    da = _aligned(builder, tangents[0], node, 2, lead)
    dav = _mm(builder, "ij,kj->ik", da, vc)  # dA V
    if node.primitive is L.svd_values_p:  # Re diag(U^H dA V)
        return _real(builder, _mm(builder, "ji,ji->i", uc, dav), complex_)
    ds = _mm(builder, "ji,jk->ik", uc, dav)  # U^H dA V
    gaps = _gaps(builder, _mul(builder, s, s))  # 1 / (s_j^2 - s_i^2)
    if node.primitive is L.svd_u_p:
        scaled = _mul(builder, ds, _as_row(builder, s))  # dS S
        inner = _mul(builder, gaps, builder.record(P.add_p, (scaled, _ct(builder, scaled, complex_))))
        if complex_:  # JAX's gauge: U's phases take i Im(dS_ii) / s_i
            inner = builder.record(P.add_p, (inner, _phase_term(builder, ds, s)))
        du = _mm(builder, "ij,jk->ik", u, inner)
        if m > n:  # the part of dA V outside U's columns
            rest = builder.record(P.sub_p, (dav, _mm(builder, "ij,jk->ik", u, ds)))
            du = builder.record(P.add_p, (du, _mul(builder, rest, _as_row(builder, s, True))))
        return du
    scaled = _mul(builder, _as_row(builder, s, column=True), ds)  # S dS
    inner = _mul(builder, gaps, builder.record(P.add_p, (scaled, _ct(builder, scaled, complex_))))
    dvh = _mm(builder, "ji,jk->ik", _conj(builder, inner, complex_), vh)
    if n > m:  # the part of U^H dA outside Vh's rows
        rest = builder.record(P.sub_p, (_mm(builder, "ji,jk->ik", uc, da), _mm(builder, "ij,jk->ik", ds, vh)))
        dvh = builder.record(P.add_p, (dvh, _mul(builder, rest, _as_row(builder, s, True, column=True))))
    return dvh


def _imaginary_diagonal(builder, x):
    """``diag(i Im(x_ii))`` = ``I o (x - x^H) / 2`` of a square complex matrix: a map that
    is its own transpose for the pairing Re(ct * t)."""
    k = atom_shape(x)[-1]
    half_identity = builder.record(A.constant_p, (), (("value", A.ConstantArray(np.eye(k) / 2)),))
    return _mul(builder, builder.record(P.sub_p, (x, _ct(builder, x, True))), half_identity)


def _phase_term(builder, x, s):
    """``diag(i Im(x_ii) / s_i)``: the diagonal of ``U^H dU`` that JAX's SVD tangent gives
    to ``U`` for a complex matrix (the phases of a singular pair are free; only ``U``'s
    move), and the same map's transpose (it is its own)."""
    return _mul(builder, _imaginary_diagonal(builder, x), _as_row(builder, s, True))


@TRANSPOSE.register(L.svd_values_p, L.svd_u_p, L.svd_vh_p)
def _svd_cotangent(builder, ct, node, index, lead):
    # The transposes of the tangents above for the pairing Re(ct * t): a complex matrix's
    # cotangent is conj(U) (...) conj(Vh), where a real one's is U (...) Vh.
    s, u, vh = _svd_parts(builder, node)
    complex_ = _is_complex(node.args[0])
    uc, vc = _conj(builder, u, complex_), _conj(builder, vh, complex_)
    m, n = atom_shape(node.args[0])[-2:]
    if node.primitive is L.svd_values_p:  # conj(U diag(c) Vh)
        core = atom_shape(ct)[lead:]
        scaled = _mul(builder, uc, A.record_reshape(builder, ct, core[:-1] + (1, core[-1]), lead))
        return _mm(builder, "ik,kj->ij", scaled, vc)
    gaps = _gaps(builder, _mul(builder, s, s))
    if node.primitive is L.svd_u_p:
        projected = _mm(builder, "ji,jk->ik", u, ct)  # U^T Ū
        g = _mul(builder, gaps, projected)
        inner = _mul(builder, builder.record(P.add_p, (g, _ct(builder, g, complex_))), _as_row(builder, s))
        if complex_:
            inner = builder.record(P.add_p, (inner, _phase_term(builder, projected, s)))
        left = _mm(builder, "ij,jk->ik", uc, inner)
        if m > n:
            rest = builder.record(P.sub_p, (ct, _mm(builder, "ij,jk->ik", uc, projected)))
            left = builder.record(P.add_p, (left, _mul(builder, rest, _as_row(builder, s, True))))
        return _mm(builder, "ik,kj->ij", left, vc)
    projected = _mm(builder, "ik,jk->ij", vh, ct)  # Vh (Vh̄)^T
    h = _mul(builder, gaps, projected)
    # S (h^T + conj(h)): for a real matrix S (h + h^T)
    both = builder.record(P.add_p, (h, _ct(builder, h, complex_)))
    right = _mm(builder, "ij,jk->ik", _mul(builder, _as_row(builder, s, column=True),
                                           _t(builder, both) if complex_ else both), vc)
    if n > m:
        rest = builder.record(P.sub_p, (ct, _mm(builder, "ji,jk->ik", projected, vc)))
        right = builder.record(P.add_p, (right, _mul(builder, rest, _as_row(builder, s, True, column=True))))
    return _mm(builder, "ik,kj->ij", uc, right)


def _identity(builder, n: int):
    return builder.record(A.constant_p, (), (("value", A.ConstantArray(np.eye(n))),))


def _pinv_complements(builder, node):
    """``(I - A P, I - P A)`` for ``P = pinv(A)``: projections off the ranges."""
    a = node.args[0]
    m, n = atom_shape(a)[-2:]
    left = builder.record(P.sub_p, (_identity(builder, m), _mm(builder, "ij,jk->ik", a, node)))
    right = builder.record(P.sub_p, (_identity(builder, n), _mm(builder, "ij,jk->ik", node, a)))
    return left, right


@TANGENT.register(L.pinv_p)
def _pinv_tangent(builder, node, tangents, lead):
    # dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P, at constant rank (for a
    # complex matrix P^H, dA^H where a real one has transposes).
    complex_ = _is_complex(node.args[0])
    da = _aligned(builder, tangents[0], node, 2, lead)
    da_bar, p_bar = _conj(builder, da, complex_), _conj(builder, node, complex_)
    off_left, off_right = _pinv_complements(builder, node)
    first = _neg(builder, _mm(builder, "ij,jk->ik", _mm(builder, "ij,jk->ik", node, da), node))
    ppt = _mm(builder, "ik,jk->ij", node, p_bar)
    second = _mm(builder, "ij,jk->ik", _mm(builder, "ij,kj->ik", ppt, da_bar), off_left)
    ptp = _mm(builder, "ji,jk->ik", p_bar, node)
    third = _mm(builder, "ij,jk->ik", off_right, _mm(builder, "ji,jk->ik", da_bar, ptp))
    return builder.record(P.add_p, (first, second, third))


@TRANSPOSE.register(L.pinv_p)
def _pinv_cotangent(builder, ct, node, index, lead):
    # Ā = -P^T C P^T + (I - A P) C^T P P^T + P^T P C^T (I - P A); for a complex matrix the
    # last two conjugated, with P P^H and P^H P (the transpose of X dA^H Y is conj(Y C^T X)).
    complex_ = _is_complex(node.args[0])
    p_bar = _conj(builder, node, complex_)
    off_left, off_right = _pinv_complements(builder, node)
    first = _neg(builder, _mm(builder, "ik,lk->il", _mm(builder, "ji,jk->ik", node, ct), node))
    ppt = _mm(builder, "ik,jk->ij", node, p_bar)
    second = _conj(builder, _mm(builder, "ij,jk->ik", _mm(builder, "ij,kj->ik", off_left, ct), ppt), complex_)
    ptp = _mm(builder, "ji,jk->ik", p_bar, node)
    third = _conj(builder, _mm(builder, "ij,jk->ik", _mm(builder, "ij,kj->ik", ptp, ct), off_right), complex_)
    return builder.record(P.add_p, (first, second, third))


def _frechet(builder, a, e):
    """The derivative of ``expm`` at ``a`` in the direction ``e`` (full rank, seeds in front):
    the top right block of ``expm([[a, e], [0, a]])`` (Mathias' block form), recorded with
    ``expm`` itself, so it differentiates again."""
    rank, n = len(atom_shape(e)), atom_shape(a)[-1]

    def lifted(x):  # size-1 axes in front, so that every block has the same rank
        shape = atom_shape(x)
        return A.record_reshape(builder, x, (1,) * (rank - len(shape)) + shape) if len(shape) < rank else x

    zeros = builder.record(A.constant_p, (), (("value", A.ConstantArray(np.zeros((n, n)))),))
    top = A.record_concatenate(builder, [lifted(a), e], -1, rank - 2)
    bottom = A.record_concatenate(builder, [lifted(zeros), lifted(a)], -1, rank - 2)
    block = builder.record(L.expm_p, (A.record_concatenate(builder, [top, bottom], -2, rank - 2),))
    return A.record_slice(builder, block, (("s", 0, n, 1), ("s", n, 2 * n, 1)), rank - 2)


@TANGENT.register(L.expm_p)
def _expm_tangent(builder, node, tangents, lead):
    return _frechet(builder, node.args[0], _aligned(builder, tangents[0], node, 2, lead))


@TRANSPOSE.register(L.expm_p)
def _expm_cotangent(builder, ct, node, index, lead):
    # The adjoint of the Frechet derivative at A is the Frechet derivative at A^T.
    return _frechet(builder, _t(builder, node.args[0]), ct)


def _qr_parts(builder, node):
    a = node.args[0]
    return tuple(node if node.primitive is p else builder.record(p, (a,)) for p in (L.qr_q_p, L.qr_r_p))


def _strictly_lower(builder, x):
    return _mul(builder, x, _mask(builder, atom_shape(x)[-1], True, 0.0))


@TANGENT.register(L.qr_q_p, L.qr_r_p)
def _qr_tangent(builder, node, tangents, lead):
    # Y = dA R^-1, Z = Q^T Y, W = tril(Z, -1) - tril(Z, -1)^T: dQ = Q (W - Z) + Y, dR = (Z - W) R.
    # A complex matrix (JAX's): Z = Q^H Y, W = tril(Z, -1) - tril(Z, -1)^H + i Im diag(Z), so
    # that R's diagonal stays real, as LAPACK makes it.
    q, r = _qr_parts(builder, node)
    complex_ = _is_complex(node.args[0])
    da = _aligned(builder, tangents[0], node, 2, lead)
    y = _t(builder, _triangular(builder, r, _t(builder, da), trans=1, lower=False))
    z = _mm(builder, "ji,jk->ik", _conj(builder, q, complex_), y)
    low = _strictly_lower(builder, z)
    w = builder.record(P.sub_p, (low, _ct(builder, low, complex_)))
    if complex_:
        w = builder.record(P.add_p, (w, _imaginary_diagonal(builder, z)))
    if node.primitive is L.qr_q_p:
        return builder.record(P.add_p, (_mm(builder, "ij,jk->ik", q, builder.record(P.sub_p, (w, z))), y))
    return _mm(builder, "ij,jk->ik", builder.record(P.sub_p, (z, w)), r)


@TRANSPOSE.register(L.qr_q_p, L.qr_r_p)
def _qr_cotangent(builder, ct, node, index, lead):
    # With M = Q^T Q̄ - R̄ R^T: Ȳ = Q̄ + Q (tril(M - M^T, -1) - M) and Ā = Ȳ R^-T; for a
    # complex matrix Ȳ = Q̄ + conj(Q) (tril(M - M^H, -1) + i Im diag(M) - M).
    q, r = _qr_parts(builder, node)
    complex_ = _is_complex(node.args[0])
    if node.primitive is L.qr_q_p:
        m = _mm(builder, "ji,jk->ik", q, ct)
    else:
        m = _neg(builder, _mm(builder, "ij,kj->ik", ct, r))
    inner = builder.record(P.sub_p, (_strictly_lower(builder, builder.record(P.sub_p, (m, _ct(builder, m, complex_)))),
                                     m))
    if complex_:
        inner = builder.record(P.add_p, (inner, _imaginary_diagonal(builder, m)))
    y_bar = _mm(builder, "ij,jk->ik", _conj(builder, q, complex_), inner)
    if node.primitive is L.qr_q_p:
        y_bar = builder.record(P.add_p, (ct, y_bar))
    return _t(builder, _triangular(builder, r, _t(builder, y_bar), trans=0, lower=False))


# ---------------------------------------------------------------------------
# The general eigendecomposition (complex values) and least squares
# ---------------------------------------------------------------------------


def _eig_parts(builder, node):
    """``(w, V, V^{-1})`` of the operand of a general eigen node (the others recorded too)."""
    a = node.args[0]
    return tuple(node if node.primitive is p else builder.record(p, (a,))
                 for p in (L.eig_values_p, L.eig_vectors_p, L.eig_vectors_inv_p))


def _row_of(builder, values, lead: int):
    """Values per column ``(..., n)`` as ``(..., 1, n)``, behind ``lead`` seeds."""
    core = atom_shape(values)[lead:]
    return A.record_reshape(builder, values, core[:-1] + (1, core[-1]), lead)


def _column_real_part(builder, x, y, lead: int):
    """``Re(sum_i x[i, j] y[i, j])`` per column ``j``, as a row ``(..., 1, n)``."""
    return _row_of(builder, builder.record(A.real_p, (_mm(builder, "ij,ij->j", x, y),)), lead)


@TANGENT.register(L.eig_values_p, L.eig_vectors_p, L.eig_vectors_inv_p)
def _eig_tangent(builder, node, tangents, lead):
    # JAX's (eig_jvp): with G = V^-1 dA V, dw = diag(G); dV = V (F o G), then each column's
    # change of norm removed, dV - V Re(diag(V^H dV)), so the columns stay unit vectors
    # (their phase's derivative is this rule's, not LAPACK's "largest component real").
    w, v, v_inv = _eig_parts(builder, node)
    da = _aligned(builder, tangents[0], node, 2, lead)
    da_v = _mm(builder, "ij,jk->ik", da, v)
    if node.primitive is L.eig_values_p:
        return _mm(builder, "ij,ji->i", v_inv, da_v)
    g = _mm(builder, "ij,jk->ik", v_inv, da_v)
    dv = _mm(builder, "ij,jk->ik", v, _mul(builder, _gaps(builder, w), g))
    conj_v = builder.record(A.conj_p, (v,))
    dv = builder.record(P.sub_p, (dv, _mul(builder, v, _column_real_part(builder, conj_v, dv, lead))))
    if node.primitive is L.eig_vectors_p:
        return dv
    return _neg(builder, _mm(builder, "ij,jk->ik", v_inv, _mm(builder, "ij,jk->ik", dv, v_inv)))


@TRANSPOSE.register(L.eig_values_p, L.eig_vectors_p, L.eig_vectors_inv_p)
def _eig_cotangent(builder, ct, node, index, lead):
    # The tangent map's transpose under the pairing Re(sum ct * t) (no conjugation):
    # G-bar = diag(w-bar) or F o (V^T C1) with C1 = C - conj(V) Re(diag(V^T C)), and
    # A-bar = V^-T G-bar V^T; the inverse's cotangent C' enters as C = -V^-T C' V^-T.
    w, v, v_inv = _eig_parts(builder, node)
    if node.primitive is L.eig_values_p:  # V^-T diag(w-bar) V^T
        core = atom_shape(ct)[lead:]
        scaled = _mul(builder, v_inv, A.record_reshape(builder, ct, core[:-1] + (core[-1], 1), lead))
        return _mm(builder, "ki,jk->ij", scaled, v)
    if node.primitive is L.eig_vectors_inv_p:
        ct = _neg(builder, _mm(builder, "ik,jk->ij", _mm(builder, "ji,jk->ik", v_inv, ct), v_inv))
    conj_v = builder.record(A.conj_p, (v,))
    ct = builder.record(P.sub_p, (ct, _mul(builder, conj_v, _column_real_part(builder, ct, v, lead))))
    g_bar = _mul(builder, _gaps(builder, w), _mm(builder, "ji,jk->ik", v, ct))
    return _mm(builder, "ik,jk->ij", _mm(builder, "ji,jk->ik", v_inv, g_bar), v)


def _lstsq_parts(builder, node):
    """``(P, r, y)``: ``P = pinv(A)`` at lstsq's cutoff, the residual ``r = b - A x`` and
    ``y = P^T x``, for the solution node ``x``."""
    a, b = node.args
    params = dict(node.params)
    vector, rcond = params["vector"], params["rcond"]
    m, n = atom_shape(a)[-2:]
    cutoff = rcond if rcond is not None and rcond >= 0 else float(np.finfo(float).eps) * (
        max(m, n) if rcond is None else 1)
    pinv = builder.record(L.pinv_p, (a,), (("rcond", None), ("rtol", cutoff)))
    residual = builder.record(P.sub_p, (b, _mm(builder, _product_subscripts(vector), a, node)))
    return pinv, residual, _mm(builder, _product_subscripts(vector, True), pinv, node)


@TANGENT.register(L.lstsq_p)
def _lstsq_tangent(builder, node, tangents, lead):
    # x = P b at constant rank: dx = P (db - dA x) + P P^T dA^T r + (I - P A) dA^T y.
    vector = dict(node.params)["vector"]
    a = node.args[0]
    pinv, residual, y = _lstsq_parts(builder, node)
    da = _aligned(builder, tangents[0], node, 2, lead)
    db = _aligned(builder, tangents[1], node, 1 if vector else 2, lead)
    times, times_transposed = _product_subscripts(vector), _product_subscripts(vector, True)
    rhs = None if da is None else _neg(builder, _mm(builder, times, da, node))
    rhs = db if rhs is None else rhs if db is None else builder.record(P.add_p, (db, rhs))
    dx = _mm(builder, times, pinv, rhs)
    if da is None:
        return dx
    back = _mm(builder, times_transposed, pinv, _mm(builder, times_transposed, da, residual))
    z = _mm(builder, times_transposed, da, y)
    off_range = builder.record(P.sub_p, (z, _mm(builder, times, pinv, _mm(builder, times, a, z))))
    return builder.record(P.add_p, (dx, _mm(builder, times, pinv, back), off_range))


@TRANSPOSE.register(L.lstsq_p)
def _lstsq_cotangent(builder, ct, node, index, lead):
    # b-bar = P^T c; A-bar = -b-bar x^T + r (P b-bar)^T + y (c - A^T b-bar)^T.
    vector = dict(node.params)["vector"]
    a = node.args[0]
    pinv, residual, y = _lstsq_parts(builder, node)
    times, times_transposed = _product_subscripts(vector), _product_subscripts(vector, True)
    b_bar = _mm(builder, times_transposed, pinv, ct)
    if index == 1:
        return b_bar
    outer = _outer_subscripts(vector)
    first = _mm(builder, outer, _neg(builder, b_bar), node)
    second = _mm(builder, outer, residual, _mm(builder, times, pinv, b_bar))
    off_range = builder.record(P.sub_p, (ct, _mm(builder, times_transposed, a, b_bar)))
    return builder.record(P.add_p, (first, second, _mm(builder, outer, y, off_range)))


# ---------------------------------------------------------------------------
# The table rows (the rules above register with their decorators)
# ---------------------------------------------------------------------------

_EVERY = tuple(L.LINALG_PRIMITIVES)
UNROLL.no_rule("a factorisation or solve has no per-element form: it stays one node", *_EVERY)
TAYLOR.no_rule("no Taylor recurrence for linear algebra: nest jvp for higher directional "
               "derivatives", *_EVERY)
