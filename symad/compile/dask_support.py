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
    """``function(*leaves)`` as lazy dask arrays, one chunk of the batch at a time.

    Reached through ``Function.__call__`` when an argument is a dask array::

        >>> import numpy as np, symad as sd
        >>> import dask.array as da                       # doctest: +SKIP
        >>> F = sd.trace(lambda x: np.sin(x) * 2, 0.0)
        >>> F(da.ones(10, chunks=5)).compute()            # doctest: +SKIP
        array([1.68294197, ..., 1.68294197])
    """
    import dask.array as da

    from symad.compile.batch import batch_shape as _batch_shape
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
    evaluator = function.evaluator(backend, dtype)
    # Each chunk task carries the Function's Graph (data: primitives pickle by name),
    # never code: a worker process or a dask.distributed worker generates and loads
    # the module once and keeps it (see _load).
    chunk_task = _ChunkTask(
        function=function,
        module=evaluator.module,
        core_shapes=tuple(function.in_shapes),
        parameter_values=tuple(np.asarray(p.value, dtype) for p, _ in function.parameters),
        total=total,
        dtype=dtype,
        options=dict(options),
    )

    stacked = da.blockwise(
        chunk_task, batch_index + ("outputs",), *blockwise_args,
        new_axes={"outputs": total}, dtype=dtype, concatenate=True, align_arrays=True,
    )
    out_leaves, start = [], 0
    for shape, size, boolean in zip(function.out_shapes, sizes, _boolean_leaves(function, evaluator)):
        part = stacked[..., start:start + size].reshape(batch + shape)
        if size and boolean:
            part = part.astype(bool)
        out_leaves.append(part)
        start += size
    return tree_unflatten(function.out_treedef, out_leaves)


def _boolean_leaves(function, evaluator) -> list[bool]:
    """Per output leaf: True if every value of it is a truth value."""
    flags = list(evaluator.output_is_boolean)  # one per graph output atom
    leaves, start = [], 0
    for shape, whole in zip(function.out_shapes, function.out_whole):
        count = 1 if whole else math.prod(shape)
        leaves.append(bool(count) and all(flags[start:start + count]))
        start += count
    return leaves


class _ChunkTask:
    """Evaluate one chunk: the batch flattened, the generated module run, outputs stacked last."""

    def __init__(self, function, module, core_shapes, parameter_values, total, dtype, options):
        import hashlib

        self.graph, self.name = function.graph, function.name
        # The cache key of the loaded module in each worker (not code: never run).
        self.key = hashlib.sha256(module.source.encode()).hexdigest()
        self.backend = module.backend
        self.block_size = getattr(module, "block_size", None)
        # An array program evaluates whole arrays per point (symad.compile.arrays).
        self.array_program = function.is_array_program
        self.out_shapes, self.out_whole = function.out_shapes, function.out_whole
        self.core_shapes = core_shapes
        self.parameter_values = parameter_values
        self.total = total
        self.dtype = dtype
        self.options = options

    def __call__(self, *chunks):
        import symad.compile.threads as threads

        arrays = [np.asarray(chunk, self.dtype) for chunk in chunks]
        batch_shapes = [a.shape[: a.ndim - len(core)] for a, core in zip(arrays, self.core_shapes)]
        batch = np.broadcast_shapes(*batch_shapes) if batch_shapes else ()
        count = math.prod(batch)
        if self.array_program:
            return self._array_chunk(arrays, batch_shapes, batch, count)
        columns = []
        for array, batch_shape, core in zip(arrays, batch_shapes, self.core_shapes):
            flat = array.reshape(batch_shape + (math.prod(core),))
            for i in range(flat.shape[-1]):
                column = flat[..., i]
                if column.size == 1 and count != 1:
                    columns.append(column.reshape(()))
                else:
                    columns.append(np.broadcast_to(column, batch).reshape(-1))
        for value in self.parameter_values:
            columns.extend(np.asarray(element) for element in value.reshape(-1))
        stacked = np.empty((count, self.total), self.dtype)
        outputs = [stacked[:, j] for j in range(self.total)]
        evaluate = _load(self)
        block = self.options.get("block_size") or self.block_size
        if self.backend == "numexpr":
            with threads.numexpr_threads(self.options.get("num_threads"), count):
                evaluate(columns, outputs, count, block)
        else:
            evaluate(columns, outputs, count, block)
        return stacked.reshape(batch + (self.total,))


    def _array_chunk(self, arrays, batch_shapes, batch, count):
        from symad.compile.arrays.evaluator import array_program_leaves

        values = []
        for array, batch_shape, core in zip(arrays, batch_shapes, self.core_shapes):
            if math.prod(batch_shape) == 1:
                values.append(array.reshape((1,) + tuple(core)))
            else:
                values.append(np.broadcast_to(array, tuple(batch) + tuple(core)).reshape((count,) + tuple(core)))
        values.extend(value.reshape((1,) + value.shape) for value in self.parameter_values)
        leaves = array_program_leaves(_load(self), values, count, self.out_shapes, self.out_whole,
                                      self.options)
        flat = [leaf.reshape(count, -1) for leaf in leaves]
        return np.concatenate(flat, axis=-1).astype(self.dtype, copy=False).reshape(batch + (self.total,))


_LOADED: dict = {}


def _load(task: _ChunkTask):
    """The task's ``evaluate``, generated from its Graph once per process."""
    evaluate = _LOADED.get(task.key)
    if evaluate is None:
        if task.array_program:  # the loaded evaluator itself: it runs whole arrays
            from symad.compile.pipeline import ARRAYS, make_evaluator

            evaluate = _LOADED[task.key] = make_evaluator(
                task.graph, task.backend, np.dtype(task.dtype).name, task.name, kind=ARRAYS)
            return evaluate
        from symad.compile.pipeline import make_evaluator
        from symad.graph import scalar_input_graph

        evaluator = make_evaluator(scalar_input_graph(task.graph), task.backend,
                                   np.dtype(task.dtype).name, task.name)
        evaluate = _LOADED[task.key] = evaluator._evaluate
    return evaluate
