"""Binomial checkpointing: a loop's reverse pass keeping at most ``s`` carries (revolve).

With ``checkpoints=("binomial", s)`` reverse mode stores no trajectory. It runs Griewank and
Walther's binomial schedule (*Algorithm 799: revolve*, ACM TOMS 26, 2000; *Evaluating
Derivatives*, 2nd ed., chapter 12) over the loop's steps taken in blocks: from the initial
carry it advances to a point, keeps the carry there, reverses the part after it with one
snapshot fewer, then the part before it with the same number, recursively. With ``s``
snapshots and ``t`` repetitions it reverses up to ``C(s + t, s)`` blocks and runs no block
forward more than ``t`` times besides its reversal, the fewest any schedule of ``s``
snapshots needs (Griewank 1992). A block (the last reversed first) is reversed from its
stored carries: the loop's trajectory over its steps, then the body's vjp backwards over
them, each a window of the loop's own compiled kernel (:func:`symad.loops.evaluation.run_window`).

So the node holds ``s + 1`` carries and one block's, where the store-all adjoint holds
``n`` and ``"sqrt"`` about ``2 sqrt(n)``. The blocks keep Python's share small: the
schedule makes about three kernel calls per block, and a loop's ``n`` steps form at most
:data:`MAX_BLOCKS` blocks unless the block length is given (``("binomial", s, block)``).

The reverse pass is **one** node (``binomial_adjoint``) whose value is what the store-all
adjoint's would be, bit for bit up to the order of its sums. Its derivative rules, for a
second order, differentiate that store-all form (:mod:`symad.loops.rules`), so a Hessian
through it stores the trajectory.

>>> import symad as sd
>>> f = lambda a: sd.fori_loop(0, 1000, lambda i, y: y - 1e-3 * a * y ** 3, 1.0,
...                            checkpoints=("binomial", 4))
>>> g = lambda a: sd.fori_loop(0, 1000, lambda i, y: y - 1e-3 * a * y ** 3, 1.0)
>>> abs(float(sd.grad(f)(0.5)) - float(sd.grad(g)(0.5))) < 1e-15
True
"""

from __future__ import annotations

import math

import numpy as np

from symad.graph import atom_shape
from symad.ir.primitive import Primitive, register
from symad.loops.body import loop_results, record_loop
from symad.loops.derived import adjoint_spec, split, trajectory_spec, zeros
from symad.loops.evaluation import broadcast_operands, run_window
from symad.loops.spec import BinomialSpec, LoopSpec, loop_shape, pack_results

__all__ = ["binomial_p", "binomial_cotangents", "is_binomial", "repetitions", "reverse_blocks",
           "block_length", "MAX_BLOCKS"]

#: The most blocks a loop's steps form when the block length is not given: about three
#: kernel calls per block, a few microseconds each, bound the schedule's Python time.
MAX_BLOCKS = 1024


def repetitions(length: int, snapshots: int) -> int:
    """The fewest forward runs per step that reverse ``length`` steps with ``snapshots``
    carries kept: the least ``t`` with ``C(snapshots + t, t) >= length``.

    >>> repetitions(10**6, 20), repetitions(10**6, 1000), repetitions(1, 3)
    (8, 3, 0)
    """
    if snapshots < 1:
        raise ValueError("binomial checkpointing keeps at least one carry")
    t = 0
    while math.comb(snapshots + t, t) < length:
        t += 1
    return t


def _advance_length(length: int, snapshots: int) -> int:
    """How far the schedule advances before keeping a carry: the part after it must be
    reversible with one snapshot fewer, the part before with one repetition fewer."""
    t = repetitions(length, snapshots)
    return max(1, length - math.comb(snapshots - 1 + t, t))


def reverse_blocks(carry, count: int, snapshots: int, advance, reverse) -> None:
    """Reverse blocks ``count - 1`` down to ``0`` by the binomial schedule.

    ``carry`` is the carry before block 0; ``advance(carry, a, b)`` returns the carry before
    block ``b`` from the one before block ``a``; ``reverse(carry, a)`` reverses block ``a``
    from the carry before it. At most ``snapshots`` carries besides ``carry`` are held at
    once (the recursion's depth), and no block is advanced more than
    ``repetitions(count, snapshots)`` times.

    >>> runs = []
    >>> reverse_blocks("c0", 6, 2, lambda c, a, b: runs.append((a, b)) or f"c{b}",
    ...                lambda c, a: runs.append(("reverse", a)))
    >>> runs
    [(0, 3), (3, 5), ('reverse', 5), (3, 4), ('reverse', 4), ('reverse', 3), (0, 1), (1, 2), ('reverse', 2), ('reverse', 1), ('reverse', 0)]
    """
    # Frames (carry before block ``first``, blocks ``first .. end - 1``, snapshots free) on a
    # list, not the call stack: with as many snapshots as blocks the schedule holds a carry
    # before every block, more than Python's recursion limit. The deepest frame runs first:
    # it advances to a carry it keeps, reverses the part after it (a new frame, one snapshot
    # fewer), then the part before it; a single block it reverses.
    frames = [(carry, 0, count, snapshots)] if count > 0 else []
    while frames:
        carry, first, end, free = frames[-1]
        if end - first > 1:
            middle = first + _advance_length(end - first, free)
            frames[-1] = (carry, first, middle, free)
            frames.append((advance(carry, first, middle), middle, end, free - 1))
        else:
            frames.pop()
            reverse(carry, first)


def is_binomial(spec: LoopSpec) -> bool:
    """Whether reverse mode through ``spec`` follows the binomial schedule."""
    return isinstance(spec.checkpoints, tuple) and spec.checkpoints[0] == "binomial"


def block_length(spec: LoopSpec) -> int:
    """Steps per block of the schedule: the one ``("binomial", s, block)`` gives, else enough
    for at most :data:`MAX_BLOCKS` blocks.

    >>> block_length(LoopSpec(None, 10**6, 0, False, [()], [], [], [], "f",
    ...                       checkpoints=("binomial", 20)))
    977
    """
    options = spec.checkpoints
    if len(options) > 2:
        return int(options[2])
    return max(1, -(-spec.length // MAX_BLOCKS))


def _binomial_spec(spec: LoopSpec) -> BinomialSpec:
    with spec.lock:
        found = spec.derived.get("binomial")
    if found is None:
        found = BinomialSpec(spec, trajectory_spec(spec), adjoint_spec(spec), spec.checkpoints[1],
                             block_length(spec))
        with spec.lock:
            found = spec.derived.setdefault("binomial", found)
    return found


def binomial_cotangents(builder, spec: LoopSpec, c0, xs, q, cbar, ybar) -> list:
    """The operands' cotangents (initial carry, scanned arrays, consts) by one
    ``binomial_adjoint`` node (see the module)."""
    binomial = _binomial_spec(spec)
    n_carry, n_x, n_q = spec.counts()
    operands = cbar + [zeros(s) for s in spec.const_shapes] + c0 + xs + ybar + q
    node = record_loop(binomial_p, binomial, operands)
    results = loop_results(builder, node, binomial, len(atom_shape(node)) - 1)
    c_bar, q_bar, x_bar = split(results, n_carry, n_q, n_x)
    return c_bar + x_bar + q_bar


def run_binomial(binomial: BinomialSpec, in_shapes, operands) -> np.ndarray:
    """The node's value: the store-all adjoint's, by the binomial schedule over blocks."""
    loop, trajectory, adjoint = binomial.loop, binomial.trajectory, binomial.adjoint
    arrays, batch = broadcast_operands(binomial, in_shapes, operands)
    n_carry, n_x, n_q = loop.counts()
    cbar, qacc, c0, xs, ybar, q = split(arrays, n_carry, n_q, n_carry, n_x, len(loop.y_shapes), n_q)
    n, block = loop.length, binomial.block
    axis = len(batch)
    x_bar = [np.zeros(batch + (n,) + shape) for shape in loop.x_shapes]
    state = {"adjoint carry": [np.array(a) for a in cbar + qacc]}

    def window(first: int, end: int) -> tuple[int, int, tuple]:
        # Blocks [first, end) in the order the loop takes its steps, as step indices counted
        # from 0 (a loop run backwards takes its last steps first), and their slice.
        a, b = first * block, min(end * block, n)
        start = n - b if loop.reverse else a
        return start, b - a, (slice(None),) * axis + (slice(start, start + b - a),)

    def advance(carry, first: int, end: int):
        start, count, steps = window(first, end)
        return run_window(loop, carry + [x[steps] for x in xs] + q, batch, start, count)[0]

    def reverse(carry, first: int):
        start, count, steps = window(first, first + 1)
        x_window = [x[steps] for x in xs]
        carries = run_window(trajectory, carry + x_window + q, batch, start, count)[1]
        found, bars = run_window(adjoint, state["adjoint carry"] + carries + x_window
                                 + [y[steps] for y in ybar] + q, batch, start, count)
        state["adjoint carry"] = found
        for whole, part in zip(x_bar, bars):
            whole[steps] = part

    reverse_blocks([np.array(a) for a in c0], -(-n // block), binomial.snapshots, advance, reverse)
    return pack_results(adjoint, batch, state["adjoint carry"], x_bar)


def _binomial_sympy(*args, loop, in_shapes):
    # As the store-all adjoint prints: the schedule changes which carries are kept, not the
    # recurrence (symad.loops.formulas prints the forward and adjoint recurrences).
    from symad.loops.formulas import loop_head

    return loop_head(loop.adjoint)(*args)


def _binomial_impl(*operands, loop, in_shapes):
    return run_binomial(loop, in_shapes, operands)


#: A loop's reverse pass by the binomial schedule: one node, operands and value as
#: :class:`~symad.loops.spec.BinomialSpec` lays them out.
binomial_p = register(Primitive(
    "binomial_adjoint", _binomial_sympy, _binomial_impl, kind="array", shape_rule=loop_shape,
    variadic=True, folds_constants=False, finite=True))
