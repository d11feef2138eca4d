"""dask arrays in, dask arrays out: evaluation chunk by chunk with ``dask.array.blockwise``.

A ``Function`` called with a ``dask.array.Array`` argument builds a lazy
dask array: each chunk of the batch is evaluated by the compiled evaluator
(numexpr by default) when dask computes it, on whatever scheduler is active
-- threads, processes or a ``dask.distributed`` cluster. Core dimensions
(the shapes the function was traced with) are kept whole in every chunk;
batch dimensions broadcast like NumPy's. dask is optional: without it no
argument is ever a dask array and this module is never used.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

__all__ = ["is_dask_array", "evaluate_dask"]


def is_dask_array(value: Any) -> bool:
    """True for a ``dask.array.Array`` (checked without importing dask).

    >>> is_dask_array([1.0])
    False
    """
    if "dask.array" not in sys.modules:
        return False
    import dask.array

    return isinstance(value, dask.array.Array)


def evaluate_dask(function, leaves: list, backend: str, options: dict) -> Any:
    """``function(*leaves)`` as lazy dask arrays, one chunk of the batch at a time."""
    import dask.array as da

    from symad.function import _batch_shape
    from symad.pytree import tree_unflatten

    arrays = [value if is_dask_array(value) else da.asarray(np.asarray(value)) for value in leaves]
    float32 = all(a.dtype == np.float32 for a in arrays) and all(
        np.asarray(p.value).dtype == np.float32 for p, _ in function.parameters)
    dtype = np.dtype(np.float32 if arrays and float32 else np.float64)
    batch_shapes = [_batch_shape(a.shape, core, function.name)
                    for a, core in zip(arrays, function.in_shapes)]
    batch = np.broadcast_shapes(*batch_shapes) if batch_shapes else ()
    batch_index = tuple(f"b{k}" for k in range(len(batch)))

    blockwise_args = []
    for position, (array, core, batch_shape) in enumerate(zip(arrays, function.in_shapes, batch_shapes)):
        # Core dimensions whole in every chunk; batch dimensions aligned to the right.
        array = array.rechunk({len(batch_shape) + k: -1 for k in range(len(core))})
        index = batch_index[len(batch) - len(batch_shape):] + tuple(
            f"c{position}_{k}" for k in range(len(core)))
        blockwise_args += [array, index]

    sizes = [math.prod(shape) for shape in function.out_shapes]
    total = sum(sizes)

    def evaluate_chunk(*chunks):
        chunk_leaves = [np.asarray(c) for c in chunks]
        chunk_batch = np.broadcast_shapes(*(
            _batch_shape(c.shape, core, function.name)
            for c, core in zip(chunk_leaves, function.in_shapes)))
        results = function._evaluate(_unflatten_inputs(function, chunk_leaves), backend, options)
        flat = [np.broadcast_to(np.asarray(r, dtype), chunk_batch + shape).reshape(chunk_batch + (-1,))
                for r, shape in zip(_flatten_outputs(function, results), function.out_shapes)]
        return np.concatenate(flat, axis=-1) if flat else np.zeros(chunk_batch + (0,), dtype)

    stacked = da.blockwise(
        evaluate_chunk, batch_index + ("outputs",), *blockwise_args,
        new_axes={"outputs": total}, dtype=dtype, concatenate=True, align_arrays=True,
    )
    out_leaves, start = [], 0
    boolean = function._evaluator(backend, dtype).output_is_boolean
    for shape, size in zip(function.out_shapes, sizes):
        part = stacked[..., start:start + size].reshape(batch + shape)
        if size and all(boolean[start:start + size]):
            part = part.astype(bool)
        out_leaves.append(part)
        start += size
    return tree_unflatten(function.out_treedef, out_leaves)


def _unflatten_inputs(function, chunk_leaves: list) -> list:
    return list(chunk_leaves)


def _flatten_outputs(function, results) -> list:
    from symad.pytree import tree_flatten

    return tree_flatten(results)[0]
