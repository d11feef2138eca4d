"""A loaded array program: its evaluator, run on a batch of points block by block.

The pipeline (:mod:`symad.compile.pipeline`) wraps each loaded array module
(:mod:`symad.compile.arrays.lowering`, :mod:`symad.compile.arrays.numba_loops`)
in an :class:`ArrayEvaluator`; :func:`array_program_leaves` shapes its outputs
into the function's result leaves.
"""

from __future__ import annotations

import math

import numpy as np

import symad.compile.threads as threads
from symad.compile.modules import ArrayModule

__all__ = ["ArrayEvaluator", "array_program_leaves", "ARRAY_WORKING_SET_BYTES"]

#: The batch is evaluated in blocks whose live values stay near this many bytes.
ARRAY_WORKING_SET_BYTES = 256 << 20


class ArrayEvaluator:
    """A loaded array-program evaluator: ``evaluate_arrays(values, points)``."""

    def __init__(self, module: ArrayModule, namespace: dict):
        self.module = module
        self.backend = module.backend
        self.dtype = module.dtype
        self.source = module.source
        self.note = module.note
        #: the file the module was loaded from (numba keeps its machine code beside it), else None
        self.cached_at = namespace.get("__file__")
        self.block_size = None
        self.output_is_boolean = module.output_is_boolean
        self.run = namespace["run"]

    def evaluate_arrays(self, values: list, points: int, *, num_threads: int | None = None,
                        block_size: int | None = None) -> list:
        """Every output as ``(points or 1,) + shape``, from inputs ``(points or 1,) + core``.

        The batch is cut into blocks so the values live at once stay near
        :data:`ARRAY_WORKING_SET_BYTES`; one point (the usual case of an array
        program) is one block.
        """
        if block_size is None:
            block_size = max(1, ARRAY_WORKING_SET_BYTES // max(1, self.module.bytes_per_point))
        block_size = max(1, min(int(block_size), points))
        if self.backend == "numba":
            switch = threads.numba_threads(num_threads)
        else:
            switch = threads.numexpr_threads(num_threads, points * max(1, self.module.bytes_per_point // 8))
        with switch, np.errstate(all="ignore"):
            if block_size >= points:
                return [self._typed(v, boolean) for v, boolean
                        in zip(self.run(*values), self.output_is_boolean)]
            # Each block's results go into arrays of the whole batch as soon as it is done, so
            # at most one block's results exist besides them (concatenating them at the end
            # held every block's results and the whole arrays at once: twice the results).
            outputs = varies = None
            for start, stop in _blocks(points, block_size):
                piece = self.run(*[v if v.shape[0] == 1 else v[start:stop] for v in values])
                if outputs is None:
                    parts = [np.asarray(part) for part in piece]
                    # An output that is the same at every point is kept from the first block.
                    varies = [part.ndim > 0 and part.shape[0] == stop - start for part in parts]
                    outputs = [np.empty((points,) + part.shape[1:], part.dtype) if whole else part
                               for part, whole in zip(parts, varies)]
                for output, part, whole in zip(outputs, piece, varies):
                    if whole:
                        output[start:stop] = part
                del piece
        return [self._typed(v, boolean) for v, boolean in zip(outputs, self.output_is_boolean)]

    def _typed(self, value, boolean: bool) -> np.ndarray:
        """An output in the evaluator's dtype (a float64 literal must not widen float32)."""
        value = np.asarray(value)
        if boolean or value.dtype == self.dtype:
            return value
        if self.dtype.kind == "c" and value.dtype.kind != "c":  # a complex program's real output
            return value.astype(np.float64, copy=False)
        return value.astype(self.dtype)

    def __repr__(self) -> str:
        return f"<symad array evaluator: {self.backend}, {self.dtype.name}>"


def _blocks(points: int, block_size: int):
    return [(start, min(start + block_size, points)) for start in range(0, points, block_size)]


def array_program_leaves(evaluator, values: list, count: int, out_shapes, out_whole,
                         options: dict) -> list[np.ndarray]:
    """Run an array program's evaluator on ``values`` (each ``(count or 1,) + core``); each
    output leaf as ``(count,) + its shape`` (an element-built leaf stacked from its scalars)."""
    outputs = evaluator.evaluate_arrays(values, count, **options)
    leaves, start = [], 0
    for shape, whole in zip(out_shapes, out_whole):
        if whole or not shape:
            value = outputs[start]
            start += 1
        else:
            size = math.prod(shape)
            # The elements in row-major order, then the leaf's own shape ((3, 1) from 3 scalars).
            value = (np.stack([np.broadcast_to(v, (count,)) for v in outputs[start:start + size]],
                              axis=-1) if size else np.zeros((count, 0), evaluator.dtype))
            value = value.reshape((count,) + tuple(shape))
            start += size
        target = (count,) + tuple(shape)
        value = np.asarray(value)
        # Results are ordinary arrays the caller may write to (as NumPy's are, and as the
        # scalar compiler's are): a value the same at every point, a read-only constant or
        # a view of an argument (the gradient of sum(x * y) by x is y) is copied.
        if (value.shape != target or not value.flags.writeable
                or any(np.may_share_memory(value, argument) for argument in values)):
            value = np.array(np.broadcast_to(value, target))
        leaves.append(value)
    return leaves


