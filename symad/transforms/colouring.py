"""Graph colouring for sparse Jacobians and Hessians: which columns one directional derivative can share.

A sparse ``m x n`` Jacobian ``J`` is recovered from the compressed product
``B = J S`` where the seed matrix ``S`` (``n x k``) has ``S[j, c] = 1`` for
the colour ``c`` of column ``j``: ``k`` forward-mode directional derivatives
instead of ``n``, all pushed through the graph in one sweep as a leading axis
of seeds.

* **Jacobians: distance-2 colouring** (Coleman and Moré's column partition).
  No two columns sharing a row get one colour, so ``J[i, j] = B[i, colour(j)]``
  for every structural non-zero. It is a distance-1 colouring of the column
  intersection graph ``G = P^T P``.
* **Hessians: star colouring** (Coleman and Moré's symmetric partition, as
  ColPack and CasADi compute it). A distance-1 colouring of the adjacency graph
  of the symmetric pattern in which every path on four vertices uses at least
  three colours; then for each non-zero ``(i, j)`` either ``colour(j)`` occurs
  once in row ``i`` or ``colour(i)`` occurs once in row ``j``, and symmetry gives
  ``H[i, j] = H[j, i]`` from that row of ``B = H S``. It needs fewer colours than
  distance-2 colouring (an arrowhead matrix: 2 instead of ``n``; a 5-point grid
  stencil: 6 against 7 here), at a higher cost to compute on dense patterns.
  :func:`hessian_colouring` chooses between the two.

Both colourings are greedy, visiting vertices by decreasing degree (ties in
natural order), which gives fewer colours than natural order on irregular
patterns. They are written here, a few lines over the CSR arrays, rather than
with ``networkx.greedy_color``: on the column intersection graph of a grid
Hessian, networkx (its graph built from the scipy matrix, then coloured)
took 271 ms at 100 x 100 and 1.4 s at 200 x 200, against 30 ms and 102 ms for
:func:`column_colouring` (intersection graph included) and 42 ms and 177 ms
for :func:`star_colouring` (``benchmarks/sparse.py``, 2026-11-25, this
project's 2-core machine, shared); and networkx has no star colouring.

>>> import numpy as np, scipy.sparse
>>> tridiagonal = scipy.sparse.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(6, 6), format="csr")
>>> column_colouring(tridiagonal).colours.tolist()
[1, 2, 0, 1, 2, 0]
>>> star_colouring(tridiagonal).count
3
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Colouring", "column_colouring", "star_colouring", "hessian_colouring", "jacobian_sources",
           "hessian_sources", "STAR_WORK_FACTOR"]

#: Star colouring is used for a Hessian while its estimated work is at most this many times the
#: distance-2 colouring's (see :func:`hessian_colouring`).
STAR_WORK_FACTOR = 8


class Colouring(NamedTuple):
    """A colouring of the columns: ``method`` (``"distance-2"`` or ``"star"``), ``colours`` (one
    per column, ``0 .. count - 1``) and ``count``."""

    method: str
    colours: np.ndarray
    count: int


def _boolean(pattern):
    import scipy.sparse

    pattern = scipy.sparse.csr_matrix(pattern, dtype=bool)
    pattern.sum_duplicates()
    pattern.eliminate_zeros()
    return pattern


def _without_diagonal(graph):
    """The adjacency of a pattern: its off-diagonal entries (as CSR)."""
    import scipy.sparse

    entries = graph.tocoo()
    off = entries.row != entries.col
    return scipy.sparse.csr_matrix((entries.data[off], (entries.row[off], entries.col[off])), shape=graph.shape)


def _order(graph) -> list[int]:
    """Vertices by decreasing degree, ties in natural order (largest first)."""
    return np.argsort(-np.diff(graph.indptr), kind="stable").tolist()


def _neighbours(graph) -> list[list[int]]:
    """Each vertex's neighbours as a Python list (the greedy passes index them in Python loops)."""
    indptr, indices = graph.indptr.tolist(), graph.indices.tolist()
    return [indices[indptr[v]:indptr[v + 1]] for v in range(graph.shape[0])]


def _greedy(graph) -> np.ndarray:
    """A distance-1 colouring of ``graph`` (a CSR adjacency without diagonal): each vertex, in
    :func:`_order`, takes the smallest colour none of its neighbours has."""
    neighbours = _neighbours(graph)
    colour = [-1] * graph.shape[0]
    for vertex in _order(graph):
        used = {colour[neighbour] for neighbour in neighbours[vertex]}
        chosen = 0
        while chosen in used:
            chosen += 1
        colour[vertex] = chosen
    return np.array(colour, dtype=np.intp)


def _colouring(method: str, colours: np.ndarray) -> Colouring:
    return Colouring(method, colours, int(colours.max()) + 1 if colours.size else 0)


def column_colouring(pattern) -> Colouring:
    """A distance-2 colouring of the columns of ``pattern``: no two columns sharing a row alike.

    A pattern with a full row (every column in it) needs a colour per column:
    it gets them without building the column intersection graph (``n^2``
    entries).
    """
    pattern = _boolean(pattern)
    rows, columns = pattern.shape
    if pattern.nnz and np.diff(pattern.indptr).max() == columns:
        return _colouring("distance-2", np.arange(columns, dtype=np.intp))
    return _colouring("distance-2", _greedy(_without_diagonal(pattern.T.tocsr() @ pattern)))


def star_colouring(pattern) -> Colouring:
    """A star colouring of the adjacency graph of the symmetric ``pattern`` (its diagonal ignored).

    Greedy (Gebremedhin, Manne and Pothen, *What color is your Jacobian?*,
    SIAM Review 47 (2005), Algorithm 4.1): a vertex ``v`` may not take the colour
    of a neighbour ``w``, nor, through a ``w`` not yet coloured, the colour of
    any vertex two steps away, nor, through a coloured ``w``, the colour of an
    ``x ~ w`` on a path ``v - w - x - y`` whose ``y`` is coloured like ``w``
    (which would make that path two-coloured).

    Those colours are kept per vertex as vertices are coloured, instead of
    walking ``w``'s neighbours for every ``v``: ``around[w]``, the colours of
    ``w``'s coloured neighbours (with counts), and ``centres[w]``, the colours
    of the coloured ``x ~ w`` that have two neighbours coloured like ``w``. So a
    vertex costs its neighbours' colour sets, not their neighbourhoods: an
    arrowhead's hub, adjacent to every vertex, costs a few colours per vertex
    rather than a pass over all of them.
    """
    graph = _without_diagonal(_boolean(pattern))
    neighbours = _neighbours(graph)
    colour = [-1] * graph.shape[0]
    forbidden = [-1] * (graph.shape[0] + 1)  # forbidden[c] == v: v may not take colour c
    around: list[dict] = [{} for _ in neighbours]  # around[x][c]: x's neighbours coloured c
    centres: list[set] = [set() for _ in neighbours]  # see the docstring
    for v in _order(graph):
        near = neighbours[v]
        for w in near:
            colour_w = colour[w]
            if colour_w < 0:
                for taken in around[w]:
                    forbidden[taken] = v
            else:
                forbidden[colour_w] = v
                for taken in centres[w]:
                    forbidden[taken] = v
        chosen = 0
        while forbidden[chosen] == v:
            chosen += 1
        colour[v] = chosen
        # Keep around and centres up to date: v's neighbours now have one more neighbour coloured chosen.
        own = around[v]
        for u in near:
            colour_u = colour[u]
            counts = around[u]
            count = counts[chosen] = counts.get(chosen, 0) + 1
            if colour_u < 0:
                continue
            if count == 2:  # u is now a centre for every neighbour coloured chosen (v among them)
                for w in neighbours[u]:
                    if colour[w] == chosen:
                        centres[w].add(colour_u)
            elif count > 2:
                centres[v].add(colour_u)
            if own.get(colour_u, 0) >= 2:  # v is a centre for its neighbours coloured like u
                centres[u].add(chosen)
    return _colouring("star", np.array(colour, dtype=np.intp))


def hessian_colouring(pattern) -> Colouring:
    """Star colouring of the symmetric ``pattern``, or distance-2 colouring where star is not worth it.

    The star colouring visits, per vertex, the colour sets of its neighbours:
    about ``sum_w deg(w) * min(deg(w), r)`` steps (``r`` the longest row),
    against the distance-2 colouring's pass over the column intersection graph,
    at most ``min(sum_i nnz(row i)^2, n^2)`` entries. The colours only set the
    length of the leading axis of one vectorised sweep, so a few more cost
    little at evaluation: star colouring is used while its work is at most
    ``STAR_WORK_FACTOR`` times the distance-2 work. It is on sparse patterns
    (bands, grid stencils, arrowheads: a few colours per vertex); not on dense
    ones, whose rows all meet and where both need one colour per column (a
    dense ``n x n`` pattern: ``n^3`` steps of star colouring for nothing).

    >>> import scipy.sparse
    >>> arrow = scipy.sparse.lil_matrix((50, 50)); arrow.setdiag(1); arrow[0, :] = 1; arrow[:, 0] = 1
    >>> hessian_colouring(arrow).count, column_colouring(arrow).count
    (2, 50)
    >>> hessian_colouring(np.ones((30, 30))).method
    'distance-2'
    """
    pattern = _boolean(pattern)
    graph = _without_diagonal(pattern)
    degrees = np.diff(graph.indptr).astype(np.float64)
    rows = np.diff(pattern.indptr).astype(np.float64)
    star_work = float(degrees @ np.minimum(degrees, rows.max(initial=0.0)))
    distance_2_work = min(float((rows ** 2).sum()), float(pattern.shape[1]) ** 2)
    if star_work <= STAR_WORK_FACTOR * distance_2_work:
        return star_colouring(pattern)
    return column_colouring(pattern)


def _positions(pattern) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of each stored entry of a canonical CSR pattern, in CSR order."""
    rows = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))
    return rows, pattern.indices.astype(np.intp)


def jacobian_sources(pattern, colouring: Colouring) -> np.ndarray:
    """For each non-zero of ``pattern`` (CSR order), its position in the compressed ``B^T`` flattened
    (``colour * rows + row``), for a distance-2 colouring: ``J[i, j] = B[i, colour(j)]``."""
    rows, columns = _positions(pattern)
    return colouring.colours[columns] * pattern.shape[0] + rows


def hessian_sources(pattern, colouring: Colouring) -> np.ndarray:
    """For each non-zero of the symmetric ``pattern`` (CSR order), its position in the compressed
    ``B^T`` flattened, read so that ``(i, j)`` and ``(j, i)`` are the same entry of ``B``.

    ``H[i, j]`` (``i <= j``) is ``B[i, colour(j)]`` when ``colour(j)`` occurs once in
    row ``i``, else ``B[j, colour(i)]``, which a star colouring (or a distance-2
    one) guarantees to hold it alone.
    """
    size = pattern.shape[0]
    rows, columns = _positions(pattern)
    colours, count = colouring.colours, max(colouring.count, 1)
    _, where, occurrences = np.unique(rows * count + colours[columns], return_inverse=True, return_counts=True)
    alone = occurrences[where] == 1  # B[row, colour(column)] is H[row, column] alone
    # The entry (j, i) of each (i, j): the CSR position of the transposed pattern's entries.
    mirror = np.empty(rows.size, dtype=np.intp)
    mirror[np.lexsort((rows, columns))] = np.arange(rows.size)
    own = colours[columns] * size + rows
    upper = rows <= columns
    chosen = np.where(alone, own, own[mirror])
    if not np.all(alone | alone[mirror]):
        raise AssertionError("hessian_sources: the colouring is not a star colouring of the pattern")
    # Both triangles read the upper entry's choice, so the matrix is exactly symmetric.
    return np.where(upper, chosen, chosen[mirror])
