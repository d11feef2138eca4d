"""NumPy implementations of the array primitives, with leading (batch) dimensions.

This module is the one implementation of each array primitive: the primitives'
``numpy_impl`` (:mod:`symad.array_primitives`) call these functions, and the
array compiler (:mod:`symad.compile.arrays`) copies this module's source text
into every module it generates, so ``F.source()`` stays standalone (NumPy and
SciPy only) and what runs is what the primitives define. Keep it free of
imports beyond NumPy and SciPy.

Every function takes its operands with any leading dimensions in front of the
core its parameters describe (axes are negative; ``in_shape`` is the operand's
core shape); those dimensions are carried along, broadcast against each other
where several operands meet.

>>> import numpy as np
>>> rt_einsum(np.ones((5, 2, 3)), np.ones((3, 4)), "ij,jk->ik").shape   # a batch of 5 products
(5, 2, 4)
"""

import math
import threading

import numpy as np
import scipy.special

# -- begin runtime (copied verbatim into generated modules) --


# Large intermediates of a generated module are written into buffers kept between calls
# (per thread: chunks of one evaluation may run on several). A fresh array of 512 KB or
# more comes from the operating system as untouched pages, and the first write to each
# page faults: on the project's machine 1,372 faults per call, 85 % of the time of the
# 256x256 grid gradient's NumPy evaluator. A buffer goes back to its thread's free list
# after the last line that reads it (or reads a view of it); outputs are never pooled.
# Arrays under RT_POOL_MIN_ELEMENTS (128 KB of float64, where the C library starts
# mapping fresh pages) are left to NumPy's allocator. Buffers of a shape the last
# RT_POOL_CALLS calls did not ask for are dropped when a call begins, so a pool holds
# what one or two calls need (blocked evaluations alternate a block and a last,
# smaller block), not every batch size it ever saw.
RT_POOL = threading.local()
RT_POOL_MIN_ELEMENTS = 1 << 14
RT_POOL_CALLS = 2


def rt_pool_begin():
    """Start a call: drop this thread's buffers of shapes recent calls did not use."""
    pool = RT_POOL.__dict__
    call = pool["call"] = pool.get("call", 0) + 1
    free, used = pool.setdefault("free", {}), pool.setdefault("used", {})
    for key in [key for key, last in used.items() if last <= call - 1 - RT_POOL_CALLS]:
        free.pop(key, None)
        del used[key]


def rt_buffer(dtype, *operands):
    """An array of ``dtype`` and the broadcast shape of ``operands``, from this thread's
    free list if one of that shape is there (its contents are garbage: it is an ``out=``),
    or None (NumPy allocates) when every operand is small."""
    if max([np.size(operand) for operand in operands]) < RT_POOL_MIN_ELEMENTS:
        return None
    return rt_pooled(dtype, np.broadcast_shapes(*[np.shape(operand) for operand in operands]))


def rt_pooled(dtype, shape):
    """An array of ``dtype`` and ``shape`` from this thread's free list (or a new one)."""
    pool = RT_POOL.__dict__
    key = (shape, dtype)
    pool.setdefault("used", {})[key] = pool.get("call", 0)
    stack = pool.setdefault("free", {}).get(key)
    if stack:
        return stack.pop()
    return np.empty(shape, dtype)


def rt_release(*buffers):
    """Give ``buffers`` (from :func:`rt_buffer`, read for the last time) back to this thread."""
    free = RT_POOL.__dict__.setdefault("free", {})
    for buffer in buffers:
        if buffer.size >= RT_POOL_MIN_ELEMENTS:
            free.setdefault((buffer.shape, buffer.dtype.type), []).append(buffer)


def rt_sech(x, out=None):
    """``1 / cosh(x)`` (the NumPy form of sech: the same operations) in one array, ``out``."""
    out = np.cosh(x, out=out)
    return np.divide(1.0, out, out=out)


def rt_lead(value, core_ndim):
    """The leading dimensions of ``value`` in front of ``core_ndim`` core dimensions."""
    return value.shape[: value.ndim - core_ndim]


def rt_broadcast_lead(value, lead, core_ndim):
    """``value`` with its leading dimensions broadcast to ``lead``."""
    core = value.shape[value.ndim - core_ndim:] if core_ndim else ()
    own = rt_lead(value, core_ndim)
    value = value.reshape((1,) * (len(lead) - len(own)) + tuple(own) + tuple(core))
    return np.broadcast_to(value, tuple(lead) + tuple(core))


def rt_index(index):
    """The NumPy index of a normalised basic index, behind an Ellipsis for the lead."""
    objects = [Ellipsis]
    for item in index:
        if item[0] == "i":
            objects.append(item[1])
        elif item[0] == "s":
            objects.append(slice(item[1], item[2], item[3]))
        else:
            objects.append(None)
    return tuple(objects)


def rt_reduce_sum(x, axes):
    return np.sum(x, axis=axes)


def rt_amax(x, axes):
    return np.max(x, axis=axes)


def rt_amin(x, axes):
    return np.min(x, axis=axes)


def rt_logsumexp(x, axes):
    return scipy.special.logsumexp(x, axis=axes)


# A generated numexpr module sets this to numexpr: the broadcast multiplication of an
# einsum without a contracted index (a per-sample outer product, a scaling) of at least
# RT_NUMEXPR_MIN_ELEMENTS elements then runs on numexpr's threads. The per-sample
# gradient of an 8-32-1 MLP writes its 10^5 x 8 x 32 weight gradient so: 29 ms in
# NumPy, 16 ms in numexpr on two threads (2026-11-25, the project's 2-core machine).
RT_NUMEXPR = None
RT_NUMEXPR_MIN_ELEMENTS = 1 << 18


def rt_multiply(left, right, out=None):
    """``left * right`` broadcast (into ``out`` if given), on numexpr's threads when large."""
    if RT_NUMEXPR is not None and (out.size if out is not None else np.size(left) * np.size(right)
                                   ) >= RT_NUMEXPR_MIN_ELEMENTS:
        return RT_NUMEXPR.evaluate("a * b", local_dict={"a": left, "b": right}, out=out)
    return np.multiply(left, right, out=out)


def rt_einsum(a, b, subscripts, pooled=False):
    """``einsum`` of two operands as one batched matrix product (BLAS), leading dimensions broadcast.

    Each index is a batch index (in both operands and the output), a contracted
    one (in both operands only) or belongs to one operand and the output; the
    operands are transposed and reshaped to ``(..., M, K) @ (..., K, N)``. Without
    a contracted index that is a broadcast multiplication; with one matrix on the
    right, the left's leading dimensions fold into its rows (one BLAS call).
    ``pooled``: a large result whose indices come out in the product's order is
    written into a buffer of this thread's pool (see :func:`rt_buffer`).
    """
    inputs, out = subscripts.split("->")
    sa, sb = inputs.split(",")
    a, b = np.asarray(a), np.asarray(b)
    lead_a, lead_b = rt_lead(a, len(sa)), rt_lead(b, len(sb))
    size = dict(zip(sa, a.shape[a.ndim - len(sa):]))
    size.update(zip(sb, b.shape[b.ndim - len(sb):]))
    batch = [c for c in out if c in sa and c in sb]
    contracted = [c for c in sa if c in sb and c not in out]
    a_only = [c for c in sa if c not in sb]
    b_only = [c for c in sb if c not in sa]

    def arrange(x, letters, lead, first, second):
        order = [len(lead) + letters.index(c) for c in batch + first + second]
        x = np.transpose(x, list(range(len(lead))) + order)
        rows = 1
        for c in first:
            rows *= size[c]
        columns = 1
        for c in second:
            columns *= size[c]
        return x.reshape(tuple(lead) + tuple(size[c] for c in batch) + (rows, columns))

    left = arrange(a, sa, lead_a, a_only, contracted)
    right = arrange(b, sb, lead_b, contracted, b_only)
    produced = batch + a_only + b_only
    shape = tuple(np.broadcast_shapes(left.shape[:-2], right.shape[:-2])) + (left.shape[-2], right.shape[-1])
    buffer = None
    if pooled and produced == list(out) and math.prod(shape) >= RT_POOL_MIN_ELEMENTS:
        # The product in the output's order: a buffer of the result's shape (the shape it
        # goes back to the pool under) holds it, viewed as the product's.
        result_shape = shape[: len(shape) - len(batch) - 2] + tuple(size[c] for c in out)
        buffer = rt_pooled(np.result_type(left, right).type, result_shape).reshape(shape)
    if not contracted:
        # An outer product (K = 1): one broadcast multiplication, where matmul would loop
        # over a batch of tiny products (2-3x slower; the same numbers, a*b each).
        product = rt_multiply(left, right, out=buffer)
    elif not batch and right.ndim <= left.ndim and all(d == 1 for d in right.shape[:-2]):
        # One matrix on the right for a batch on the left (data @ weights, a batch of
        # points): the batch folds into the rows of one BLAS product instead of a loop
        # of small ones (4x faster for 35,000 products of 1x8 by 8x32).
        rows = left.shape[:-1]
        flat = None if buffer is None else buffer.reshape(-1, buffer.shape[-1])
        product = np.matmul(left.reshape(-1, left.shape[-1]), right.reshape(right.shape[-2:]), out=flat)
        product = product.reshape(rows + (right.shape[-1],))
    else:
        product = np.matmul(left, right, out=buffer)
    lead = product.shape[: product.ndim - len(batch) - 2]
    product = product.reshape(tuple(lead) + tuple(size[c] for c in produced))
    if produced == list(out):
        return product
    order = [len(lead) + produced.index(c) for c in out]
    return np.transpose(product, list(range(len(lead))) + order)


def rt_reshape(x, in_shape, shape):
    x = np.asarray(x)
    return np.reshape(x, rt_lead(x, len(in_shape)) + tuple(shape))


def rt_transpose(x, perm):
    x = np.asarray(x)
    lead = x.ndim - len(perm)
    return np.transpose(x, tuple(range(lead)) + tuple(lead + p for p in perm))


def rt_broadcast(x, in_shape, shape):
    x = np.asarray(x)
    lead = rt_lead(x, len(in_shape))
    aligned = x.reshape(tuple(lead) + (1,) * (len(shape) - len(in_shape)) + tuple(in_shape))
    return np.broadcast_to(aligned, tuple(lead) + tuple(shape))


def rt_slice(x, in_shape, index):
    return np.asarray(x)[rt_index(index)]


def rt_part_ndim(in_shape, index):
    """The number of core dimensions of ``x[index]`` for ``x`` of core shape ``in_shape``."""
    return sum(1 for item in index if item[0] != "i")


def rt_unslice(v, in_shape, index):
    v = np.asarray(v)
    lead = rt_lead(v, rt_part_ndim(in_shape, index))
    out = np.zeros(tuple(lead) + tuple(in_shape), dtype=np.result_type(v.dtype, np.float32))
    out[rt_index(index)] = v
    return out


def rt_accumulate(base, parts, fresh=False):
    """``base`` plus each unslice ``(v, in_shape, index, sign)`` of ``parts``: ``v`` added
    (or, with sign -1, subtracted) into its region, in place where ``base`` is a fresh
    array of the full (broadcast) shape -- the sum of a slice's cotangents, without the
    arrays of zeros around each."""
    base = np.asarray(base)
    shapes = [base.shape]
    for value, in_shape, index, _ in parts:
        value = np.asarray(value)
        shapes.append(tuple(rt_lead(value, rt_part_ndim(in_shape, index))) + tuple(in_shape))
    full = tuple(np.broadcast_shapes(*shapes))
    if fresh and base.shape == full and base.flags.writeable:
        out = base
    else:
        out = np.empty(full, dtype=np.result_type(base.dtype, np.float32))
        out[...] = base
    for value, _, index, sign in parts:
        if sign < 0:
            out[rt_index(index)] -= value
        else:
            out[rt_index(index)] += value
    return out


def rt_take(x, in_shape, indices, axis):
    return np.take(x, indices, axis=axis)


def rt_take_add(v, in_shape, indices, axis):
    v = np.asarray(v)
    lead = rt_lead(v, len(in_shape) - 1 + np.ndim(indices))
    out = np.zeros(tuple(lead) + tuple(in_shape), dtype=np.result_type(v.dtype, np.float32))
    at = len(in_shape) + axis
    index = (Ellipsis,) + (slice(None),) * at + (indices,) + (slice(None),) * (-axis - 1)
    if len(in_shape) == 1 and v.ndim == 1 and not lead and v.dtype != object:
        return np.bincount(indices.reshape(-1), weights=v.reshape(-1), minlength=in_shape[0]).astype(out.dtype)
    np.add.at(out, index, v)
    return out


def rt_concatenate(values, axis, in_shapes):
    values = [np.asarray(v) for v in values]
    lead = np.broadcast_shapes(*[rt_lead(v, len(c)) for v, c in zip(values, in_shapes)])
    return np.concatenate([rt_broadcast_lead(v, lead, len(c)) for v, c in zip(values, in_shapes)],
                          axis=axis)


def rt_cumsum(x, axis, reverse):
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis)
    return np.cumsum(x, axis=axis)


def rt_pack(values, shape, positions, has_base):
    values = [np.asarray(v) for v in values]
    base = values[0] if has_base else None
    elements = values[1:] if has_base else values
    count = 1
    for extent in shape:
        count *= extent
    leads = [e.shape for e in elements]
    if base is not None:
        leads.append(rt_lead(base, len(shape)))
    lead = tuple(np.broadcast_shapes(*leads))
    dtype = np.result_type(*[v.dtype for v in values], np.float32)
    if base is None:
        out = np.empty(lead + (count,), dtype=dtype)
    else:
        flat_base = base.reshape(tuple(rt_lead(base, len(shape))) + (count,))
        out = np.array(np.broadcast_to(flat_base, lead + (count,)), dtype=dtype)
    for position, element in zip(positions, elements):
        out[..., position] = element
    return out.reshape(lead + tuple(shape))


def rt_scatter(x, v, in_shape, index):
    x, v = np.asarray(x), np.asarray(v)
    part_ndim = rt_part_ndim(in_shape, index)
    lead = tuple(np.broadcast_shapes(rt_lead(x, len(in_shape)), v.shape[: max(0, v.ndim - part_ndim)]))
    out = np.array(rt_broadcast_lead(x, lead, len(in_shape)), dtype=np.result_type(x, v, np.float32))
    out[rt_index(index)] = v
    return out


# -- end runtime --


# -- begin sorting runtime (copied into the generated modules of programs that sort) --


def rt_argsort(x, axis):
    # NumPy's stable sort (ties in order, NaN last); the positions as floats, as traced
    # indices are held (float64 holds every integer index exactly).
    return np.argsort(x, axis=axis, kind="stable").astype(np.float64)


def rt_take_along(x, indices, axis):
    # Leading (batch) dimensions of either operand broadcast against the other's.
    x, indices = np.asarray(x), np.asarray(indices).astype(np.intp)
    ndim = max(x.ndim, indices.ndim)
    x = x.reshape((1,) * (ndim - x.ndim) + x.shape)
    indices = indices.reshape((1,) * (ndim - indices.ndim) + indices.shape)
    return np.take_along_axis(x, indices, axis=axis)


def rt_take_along_add(v, indices, in_shape, axis):
    # take_along's transpose: each element of v added at its index, repeats summed (a
    # bincount over flat positions: np.put_along_axis would keep one of the repeats).
    v, indices = np.broadcast_arrays(np.asarray(v), np.asarray(indices))
    lead = v.shape[:v.ndim - len(in_shape)]
    size = in_shape[axis]
    moved_v, moved_i = np.moveaxis(v, axis, -1), np.moveaxis(indices, axis, -1).astype(np.intp)
    kept = moved_v.shape[:-1]
    rows = math.prod(kept)
    dtype = np.result_type(v.dtype, np.float32)
    if v.dtype == object or not rows or not size:
        out = np.zeros(kept + (size,), dtype=dtype if v.dtype != object else object)
        if moved_v.size:
            np.add.at(out.reshape(rows, size), (np.arange(rows)[:, None], moved_i.reshape(rows, -1) % size),
                      moved_v.reshape(rows, -1))
    else:
        flat = (moved_i.reshape(rows, -1) % size + (np.arange(rows) * size)[:, None]).reshape(-1)
        out = np.bincount(flat, weights=moved_v.reshape(-1), minlength=rows * size)
        out = out.reshape(kept + (size,)).astype(dtype, copy=False)
    out = np.moveaxis(out, -1, axis)
    return out.reshape(tuple(lead) + tuple(in_shape))


# -- end sorting runtime --


def runtime_source(sorting: bool = False) -> str:
    """The runtime functions' source text, for generated modules; with ``sorting``, the
    sorting primitives' functions too (only programs that sort carry them, so the source of
    every other program is what it was before they existed)."""
    import inspect
    import sys

    text = inspect.getsource(sys.modules[__name__])
    start = text.index("# -- begin runtime")
    source = text[start:text.index("# -- end runtime")]
    if sorting:
        begin = text.index("# -- begin sorting runtime")
        source += text[begin:text.index("# -- end sorting runtime")]
    return source
