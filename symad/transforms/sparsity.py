"""Structural sparsity: which outputs depend on which inputs, read off the graph.

Each atom gets a bit mask (a Python int) of the inputs it depends on, one
pass over the nodes in topological order; an output's mask is one row of the
Jacobian's structural non-zero pattern. Masks are plain integers, so the
pass is linear in the graph and costs a few machine words per node for
thousands of inputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["dependency_masks", "set_bits", "sparsity_pattern"]


def dependency_masks(nodes: Sequence, inputs: Sequence) -> dict:
    """``{atom: mask}``: bit ``i`` set where the atom depends on ``inputs[i]`` (constants: absent).

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import mul_p, sin_p
    >>> x, y = sympy.symbols("x y"); builder = GraphBuilder()
    >>> s = builder.record(sin_p, (x,)); p = builder.record(mul_p, (s, y))
    >>> masks = dependency_masks(builder.nodes, [x, y])
    >>> masks[s], masks[p]
    (1, 3)
    """
    masks = {atom: 1 << index for index, atom in enumerate(inputs)}
    for node in nodes:
        mask = 0
        for atom in node.args:
            mask |= masks.get(atom, 0)
        if mask:
            masks[node] = mask
    return masks


def set_bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of ``mask``, lowest first."""
    while mask:
        lowest = mask & -mask
        yield lowest.bit_length() - 1
        mask ^= lowest


def sparsity_pattern(nodes: Sequence, inputs: Sequence, outputs: Sequence):
    """The ``len(outputs) x len(inputs)`` structural pattern as a ``scipy.sparse.csr_matrix`` of ones."""
    import scipy.sparse

    masks = dependency_masks(nodes, inputs)
    rows, columns = [], []
    for row, atom in enumerate(outputs):
        for column in set_bits(masks.get(atom, 0)):
            rows.append(row)
            columns.append(column)
    data = np.ones(len(rows), dtype=np.int8)
    return scipy.sparse.csr_matrix((data, (rows, columns)), shape=(len(outputs), len(inputs)))
