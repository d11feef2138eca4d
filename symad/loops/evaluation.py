"""The value of a loop node: the body's compiled kernel, or its NumPy evaluator once per step.

The compiled path (:mod:`symad.loops.compiled`: a C or numba kernel that runs the steps,
a while loop's too, with no Python per step) serves every body it can spell; otherwise
each step is one call of the body's compiled NumPy evaluator on the whole batch (every
point, seed and mapped axis at once), so Python runs once per step, not once per point.
Binomial checkpointing runs a loop a window of steps at a time (:func:`run_window`).
"""

from __future__ import annotations

import numpy as np

from symad.loops.compiled import compiled_while, compiled_window
from symad.loops.spec import pack_results

__all__ = ["run_loop", "run_window", "run_while", "broadcast_operands"]


def broadcast_operands(spec, in_shapes, operands) -> tuple[list, tuple]:
    """The operands as float arrays whose leading dimensions are the node's whole batch.

    ``in_shapes`` are the operands' shapes in the graph (their seeds or vmap axes in front
    of the core); what an operand has in front of those at run time is the batch of points,
    in front of everything.
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in operands]
    if all(a.shape == core for a, core in zip(arrays, spec.operand_shapes)):
        return arrays, ()  # one point, no seeds: nothing to broadcast (the common case)
    graph_leads = [tuple(s[:len(s) - len(core)]) for s, core in zip(in_shapes, spec.operand_shapes)]
    lead = tuple(np.broadcast_shapes(*graph_leads)) if graph_leads else ()
    points = []
    for array, shape in zip(arrays, in_shapes):
        points.append(array.shape[:array.ndim - len(shape)])
    point_shape = tuple(np.broadcast_shapes(*points)) if points else ()
    batch = point_shape + lead
    out = []
    for array, shape, own_lead, core in zip(arrays, in_shapes, graph_leads, spec.operand_shapes):
        own_points = array.shape[:array.ndim - len(shape)]
        view = array.reshape((1,) * (len(point_shape) - len(own_points)) + own_points
                             + (1,) * (len(lead) - len(own_lead)) + tuple(own_lead) + tuple(core))
        target = batch + tuple(core)
        out.append(view if view.shape == target else np.broadcast_to(view, target))
    return out, batch


def run_loop(spec, in_shapes, operands) -> np.ndarray:
    """Run the loop ``spec`` on ``operands`` (NumPy arrays); the node's value."""
    arrays, batch = broadcast_operands(spec, in_shapes, operands)
    return pack_results(spec, batch, *run_window(spec, arrays, batch, 0, spec.length))


def run_window(spec, arrays: list, batch: tuple, start: int, count: int) -> tuple[list, list]:
    """Steps ``start .. start + count - 1`` of the loop (indices counted from 0, taken in the
    loop's order) from the carry in ``arrays``, whose scanned arrays are cut to those steps:
    ``(carry leaves, stacked ys of the window)``, each leaf with the batch in front."""
    found = compiled_window(spec, arrays, batch, start, count)
    return found if found is not None else _run_steps(spec, arrays, batch, start, count)


def body_evaluator(spec):
    """The body's compiled NumPy evaluator, made once per loop."""
    evaluator = spec.derived.get("numpy evaluator")
    if evaluator is None:
        evaluator = spec.derived["numpy evaluator"] = spec.body.compile("numpy")
    return evaluator


def _run_steps(spec, arrays: list, batch: tuple, start: int, count: int) -> tuple[list, list]:
    """One call of the body's compiled evaluator per step, on the whole batch."""
    n_carry, n_x, _ = spec.counts()
    carry = [np.array(a) for a in arrays[:n_carry]]
    xs = arrays[n_carry:n_carry + n_x]
    consts = arrays[n_carry + n_x:]
    ys = [np.empty(batch + (count,) + shape) for shape in spec.y_shapes]
    evaluate = body_evaluator(spec)
    axis = len(batch)
    steps = range(count - 1, -1, -1) if spec.reverse else range(count)
    for k in steps:
        step = [x[(slice(None),) * axis + (k,)] for x in xs]
        results = evaluate(np.float64(spec.lower + start + k), *carry, *step, *consts)
        if not isinstance(results, tuple):
            results = (results,)
        carry = [np.asarray(r) for r in results[:n_carry]]
        for y, value in zip(ys, results[n_carry:]):
            y[(slice(None),) * axis + (k,)] = value
    return carry, ys


def run_while(spec, in_shapes, operands) -> np.ndarray:
    """A while loop on a batch: each point steps until its condition fails (the others wait)."""
    arrays, batch = broadcast_operands(spec, in_shapes, operands)
    found = compiled_while(spec, arrays, batch)
    if found is not None:
        return pack_results(spec, batch, found, [])
    n_carry = len(spec.carry_shapes)
    carry = [np.array(a) for a in arrays[:n_carry]]
    consts = arrays[n_carry:]
    evaluate = body_evaluator(spec)
    k = 0
    while True:
        with np.errstate(all="ignore"):  # the points that are done compute a step they drop
            results = evaluate(np.float64(k), *carry, *consts)
        going = np.broadcast_to(np.asarray(results[n_carry], dtype=bool), batch)
        if not going.any():
            break
        carry = [np.where(going.reshape(batch + (1,) * len(shape)), new, old)
                 for new, old, shape in zip(results[:n_carry], carry, spec.carry_shapes)]
        k += 1
    return pack_results(spec, batch, carry, [])
