"""Checkpointed reverse mode: store one carry per segment, recompute the segment's steps.

With ``checkpoints=`` on a loop (or its body wrapped in ``sd.checkpoint``), reverse mode
splits the ``n`` steps into ``ceil(n / m)`` segments of ``m`` steps. The forward pass
keeps only the carry each segment starts with; the backward pass, segment by segment
from the last, runs the segment forward again from its stored carry (keeping its
``m`` carries) and then the body's vjp backwards over them. Memory is ``n/m + m``
carries instead of ``n`` (``2 sqrt(n)`` for ``m = sqrt(n)``, the schedule
``"sqrt"``), for one more forward pass: JAX's ``jax.checkpoint`` around a scan's body,
the two-level case of Griewank and Walther's binomial checkpointing.

Both passes are loops whose bodies hold loops (a segment's steps), so they are
differentiated again like any loop: a Hessian through a checkpointed loop works.

``checkpoints=("levels", L)`` nests the scheme: segments of about ``n ** (1/L)`` steps,
each segment's backward pass checkpointed again with ``("levels", L - 1)``, down to the
two-level case: about ``L n^(1/L)`` carries stored, ``L - 1`` more forward passes
(multi-level checkpointing with uniform segments; not the optimal binomial schedule).
When ``m`` does not divide ``n``, the scanned arrays are padded to whole segments and
a guard ``where(k < n, body(c), c)`` leaves the carry alone on the padded steps.
"""

from __future__ import annotations

import numpy as np

from symad.array_primitives import record_concatenate, record_reshape, record_slice
from symad.atom_arrays import constant_atom
from symad.graph import atom_shape, current_builder
from symad.loops.body import loop_results, record_loop
from symad.loops.derived import adjoint_spec, derived_spec, split, trajectory_spec, zeros
from symad.loops.nodes import loop_p
from symad.loops.spec import LoopSpec
from symad.tracer import Tracer, as_atom

__all__ = ["segment_length", "checkpointed_cotangents"]


def segment_length(spec: LoopSpec) -> int:
    """Steps between stored carries: 1 without checkpointing.

    >>> from symad.loops.spec import LoopSpec
    >>> spec = LoopSpec(None, 10**6, 0, False, [()], [], [], [], "f", checkpoints="sqrt")
    >>> segment_length(spec)
    1000
    """
    checkpoints, n = spec.checkpoints, max(spec.length, 1)
    if checkpoints is None:
        return 1
    if checkpoints in (True, "sqrt"):
        checkpoints = ("levels", 2)
    if isinstance(checkpoints, tuple):  # ("levels", L): segments of about n ** (1/L) steps
        levels = checkpoints[1]
        m = max(1, round(n ** (1 / levels)))
        while m ** levels < n:
            m += 1
        return m
    return max(1, -(-n // int(checkpoints)))


def _inner_levels(spec: LoopSpec):
    """What a segment's own reverse pass keeps: ``("levels", L - 1)`` of ``("levels", L)``
    for L > 2 (the segment is checkpointed again), else None (it stores every carry)."""
    checkpoints = spec.checkpoints
    if isinstance(checkpoints, tuple) and checkpoints[1] > 2:
        return ("levels", checkpoints[1] - 1)
    return None


def _guarded_spec(spec: LoopSpec, m: int, checkpoints=None) -> LoopSpec:
    """The body on a segment: step ``j`` of the segment starting at ``base`` (a const),
    the carry left alone past the loop's last step."""
    n_carry, n_x, n_q = spec.counts()
    body, end = spec.body, spec.lower + spec.length
    padded = (-spec.length) % m != 0

    def step(j, carry, xq):
        x, q, (base,) = split(xq, n_x, n_q, 1)
        k = j + base
        out = body(k, *carry, *x, *q)
        out = out if isinstance(out, tuple) else (out,)
        new = list(out[:n_carry])
        if padded:
            new = [np.where(k < end, a, b) for a, b in zip(new, carry)]
        return new, tuple(out[n_carry:])

    return derived_spec(spec, ("segment", m, checkpoints), step, spec.carry_shapes, spec.x_shapes,
                        spec.const_shapes + ((),), m, spec.reverse, f"segment({spec.name})",
                        lower=0, checkpoints=checkpoints)


def _run(spec: LoopSpec, operands: list) -> list:
    """A loop recorded inside a body being traced: its result leaves as traced values."""
    builder = current_builder()
    node = record_loop(loop_p, spec, operands)
    return [Tracer.of_atom(a) for a in loop_results(builder, node, spec, len(atom_shape(node)) - 1)]


def _outer_specs(spec: LoopSpec, m: int) -> tuple[LoopSpec, LoopSpec]:
    """The segment-level forward (stores segment starts) and backward loops."""
    n_carry, n_x, n_q = spec.counts()
    ny = len(spec.y_shapes)
    count = -(-spec.length // m)
    segment = _guarded_spec(spec, m, _inner_levels(spec))
    forward, backward = trajectory_spec(segment), adjoint_spec(segment)

    def base(s):  # the index of the segment's first step (segments run in the loop's order)
        return spec.lower + s * m

    def forward_step(s, carry, xq):
        x, q = split(xq, n_x, n_q)
        out = _run(segment, list(carry) + x + q + [base(s)])
        return out[:n_carry], tuple(carry)

    def backward_step(s, carry, xq):
        cbar, qacc = carry[:n_carry], carry[n_carry:]
        starts, x, ybar, q = split(xq, n_carry, n_x, ny, n_q)
        if segment.checkpoints is not None:  # the segment checkpointed again, one level down
            atoms = [as_atom(v) for v in starts + x + q + [base(s)] + cbar + ybar]
            c0_, x_, q_, cbar_, ybar_ = split(atoms, n_carry, n_x, n_q + 1, n_carry, ny)
            found = checkpointed_cotangents(current_builder(), segment, c0_, x_, q_, cbar_, ybar_)
            c_prev, x_bar, q_bar = split([Tracer.of_atom(a) for a in found], n_carry, n_x, n_q + 1)
            return c_prev + [a + b for a, b in zip(qacc, q_bar)], tuple(x_bar)
        carries = _run(forward, starts + x + q + [base(s)])[n_carry:]
        results = _run(backward, cbar + [zeros(s_) for s_ in segment.const_shapes] + carries + x
                       + ybar + q + [base(s)])
        c_prev, q_bar, x_bar = split(results, n_carry, n_q + 1, n_x)
        return c_prev + [a + b for a, b in zip(qacc, q_bar)], tuple(x_bar)

    stacked = tuple((m,) + s for s in spec.x_shapes)
    levels = _inner_levels(spec)
    outer_forward = derived_spec(spec, ("checkpointed forward", m, levels), forward_step, spec.carry_shapes,
                                 stacked, spec.const_shapes, count, spec.reverse,
                                 f"checkpoints({spec.name})", kind="scan", lower=0)
    outer_backward = derived_spec(
        spec, ("checkpointed adjoint", m, levels), backward_step, spec.carry_shapes + spec.const_shapes,
        spec.carry_shapes + stacked + tuple((m,) + s for s in spec.y_shapes), spec.const_shapes,
        count, not spec.reverse, f"adjoint({spec.name})", kind="scan", lower=0)
    return outer_forward, outer_backward


def _segments(builder, atom, step_shape: tuple, n: int, m: int, edge: bool = False):
    """A stacked operand (steps along its core's first axis) as ``(segments, m) + step_shape``,
    padded to whole segments: with zeros, or with ``edge`` copies of its last step.

    Scanned arrays take ``edge``: the body still runs on the padded steps (the guard drops
    their carry), and its vjp there is multiplied by the guard's zero. At zeros the body
    can be at a singular point (``norm(c * x)`` at ``x = 0``: a nan derivative, and
    ``0 * nan`` is nan in every gradient); the last step is a point the loop has visited.
    Cotangents of ys take zeros: the guard does not mask ys, so theirs must be 0."""
    count = -(-n // m)
    lead = len(atom_shape(atom)) - len(step_shape) - 1
    if count * m != n:
        if edge:
            last = (("s", n - 1, n, 1),) + tuple(("s", 0, size, 1) for size in step_shape)
            pad = [record_slice(builder, atom, last, lead)] * (count * m - n)
        else:
            pad = [constant_atom(builder, np.zeros((count * m - n,) + tuple(step_shape)))]
        atom = record_concatenate(builder, [atom, *pad],
                                  -len(step_shape) - 1, lead)
        lead = len(atom_shape(atom)) - len(step_shape) - 1
    return record_reshape(builder, atom, (count, m) + tuple(step_shape), lead)


def _unsegment(builder, atom, step_shape: tuple, n: int, m: int):
    """The inverse of :func:`_segments`: ``(n,) + step_shape``, padding dropped."""
    count = -(-n // m)
    lead = len(atom_shape(atom)) - len(step_shape) - 2
    flat = record_reshape(builder, atom, (count * m,) + tuple(step_shape), lead)
    if count * m == n:
        return flat
    index = (("s", 0, n, 1),) + tuple(("s", 0, size, 1) for size in step_shape)
    return record_slice(builder, flat, index, lead)


def checkpointed_cotangents(builder, spec: LoopSpec, c0, xs, q, cbar, ybar) -> list:
    """The operands' cotangents by the two-level schedule (see the module)."""
    m = segment_length(spec)
    n_carry, n_x, n_q = spec.counts()
    n = spec.length
    outer_forward, outer_backward = _outer_specs(spec, m)
    xs_seg = [_segments(builder, x, s, n, m, edge=True) for x, s in zip(xs, spec.x_shapes)]
    ybar_seg = [_segments(builder, y, s, n, m) for y, s in zip(ybar, spec.y_shapes)]
    fnode = record_loop(loop_p, outer_forward, c0 + xs_seg + q)
    starts = loop_results(builder, fnode, outer_forward, len(atom_shape(fnode)) - 1)[n_carry:]
    operands = cbar + [zeros(s) for s in spec.const_shapes] + starts + xs_seg + ybar_seg + q
    bnode = record_loop(loop_p, outer_backward, operands)
    results = loop_results(builder, bnode, outer_backward, len(atom_shape(bnode)) - 1)
    c_bar, q_bar, x_bar = split(results, n_carry, n_q, n_x)
    x_bar = [_unsegment(builder, x, s, n, m) for x, s in zip(x_bar, spec.x_shapes)]
    return c_bar + x_bar + q_bar
