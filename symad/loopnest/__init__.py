"""Loop nests for array programs: one lowering, printed as numba Python and as C.

Evaluated with NumPy, an array program makes one pass over memory per node:
for the gradient of a grid energy, ``u[1:] - u[:-1]``, its double, the zeros
it is padded back into and the sum of five such arrays are each a full-size
temporary. This module lowers the graph instead to a few **loop nests**
(kernels), the way XLA fuses:

* a node is **inlined** into whatever reads it: elementwise primitives (NumPy
  broadcasting is index arithmetic, a size-1 axis reads index 0) and the
  structural ones -- ``slice`` (``start + step * i``), ``broadcast_to``,
  ``transpose``, ``reshape`` (div/mod of a flat index, simplified away for
  contiguous shapes), ``take`` (a lookup in its index array) and the
  piecewise ``unslice`` (a condition on the index), ``concatenate`` (one
  index range per operand) and ``scatter``;
* a node is **materialized** (gets a buffer) when it is an output, a reduction
  (``reduce_sum``/``amax``/``amin``: accumulated in the loop over its
  operand), a contraction (``einsum``: its operands laid out as a batch of
  matrices, multiplied by BLAS or by loops when small), ``cumsum``,
  ``take_add`` or ``pack`` (their own small loops), or an expensive value
  (``exp``, ``sin``...) that inlining would compute more than once per
  element; ``reduce_logsumexp`` is rewritten as ``amax``, ``exp``,
  ``reduce_sum`` and ``log``;
* materialized nodes over the same index space and the same batch share one
  kernel: ``value_and_grad`` sums the value in the loop that writes the
  gradient.

Inside a kernel a value is computed once per index (common subexpressions
are found by node and index), at the outermost loop it depends on, and the
conditions of the piecewise primitives split the loops into ranges where
each is known (the gradient of ``sum((u[1:] - u[:-1])**2)`` has a first row,
a last row and the rows between), so inner loops have no branches.

The result, a :class:`LoopProgram`, is a short list of statement types
(loops, assignments, loads, stores, conditions, matrix products) that
:mod:`symad.compile.arrays.numba_loops` prints as a numba module and
:mod:`symad.export.c_loops` as C. Its size depends on the graph, not on the
shapes: the arrays' sizes are numbers in loop bounds.

**Batch.** With ``batch=True`` (numba), every value has a leading dimension
of points in front of its node shape, of runtime extent: an input's is its
``shape[0]`` (the points, or 1 when it is the same at every point), a node's
the largest of those of the inputs it depends on. Kernels loop over it too.
With ``batch=False`` (C) there is one point.

>>> import symad as sd, numpy as np
>>> G = sd.grad(lambda u: np.sum((u[1:] - u[:-1]) ** 2)).trace(np.zeros(1000))
>>> program = lower_loops(G.graph, batch=False, name="g")
>>> len(program.kernels), [b.shape for b in program.outputs]
(1, [(1000,)])

The package sits below both the compiler and the exporters: it reads the
graph and writes a loop program, which :mod:`symad.compile.arrays.numba_loops`
prints as numba Python and :mod:`symad.export.c_loops` as C; neither printer
imports the other's side. Its stages: :mod:`~symad.loopnest.ir` (the
representation), :mod:`~symad.loopnest.nodes` (the lowering's own nodes, such
as the batched matrix product), :mod:`~symad.loopnest.planning` (buffers and
kernels) and :mod:`~symad.loopnest.emission` (one kernel's statements).
"""

from __future__ import annotations

from symad.loopnest.ir import (
    CHUNK_ELEMENTS,
    MAX_INLINE_DEPTH,
    Assign,
    Block,
    Buffer,
    Combine,
    Comment,
    Declare,
    ExpressionPrinter,
    If,
    Ix,
    Let,
    Loop,
    LoopProgram,
    LoopsUnsupported,
    Matmul,
    Parallel,
    Store,
    Update,
    literal_operand,
    names_read,
    used_buffers,
)
from symad.loopnest.planning import lower_loops

__all__ = ["lower_loops", "LoopProgram", "Buffer", "LoopsUnsupported", "Ix", "ExpressionPrinter",
           "CHUNK_ELEMENTS", "MAX_INLINE_DEPTH", "Assign", "Block", "Combine", "Comment", "Declare",
           "If", "Let", "Loop", "Matmul", "Parallel", "Store", "Update", "literal_operand",
           "names_read", "used_buffers"]
