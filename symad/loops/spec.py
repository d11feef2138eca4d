"""The loop primitive: one node holding a traced body, whatever the number of steps.

A loop (``sd.fori_loop``, ``sd.scan``) is recorded as **one** node of the
``loop`` primitive, as JAX's ``scan_p`` holds a jaxpr and CasADi's ``mapaccum``
a function. Its parameter is a :class:`LoopSpec`: the body, traced once into a
closed :class:`~symad.function.Function` of

    ``body(k, *carry, *x, *consts) -> (*carry', *y)``

(``k`` the step index as a float, ``x`` the step's slices of the scanned
arrays, ``consts`` the values of the enclosing trace the body reads), the
number of steps, the first index and the direction. Its operands are the
initial carry's leaves, the scanned arrays' leaves (steps along their first
core axis) and the consts. Its value is every result leaf flattened and joined
into one vector -- the final carry, then the stacked ``y`` -- from which
``slice`` and ``reshape`` nodes take the leaves (a node has one value).

Leading dimensions in front of an operand's core (a batch of points, the seeds
of a Jacobian sweep, a ``vmap`` axis) broadcast and are carried through every
step, as for every array primitive: the body is evaluated on the whole batch.
The numeric value comes from :mod:`symad.loops.evaluation`; the derivative
rules (a loop of the body's tangent; a loop of the body's vjp run backwards over
the stored carries) from :mod:`symad.loops.rules`.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from symad.errors import TracingError

__all__ = ["LoopSpec", "BinomialSpec", "loop_shape", "pack_results"]


class LoopSpec:
    """What a loop node computes: its body, its steps and the layout of its operands and value.

    Compared by identity (the builder hash-conses on parameters): two loops are one node
    only if they are the same loop on the same operands.

    Args:
        body: the closed body Function ``body(k, *carry, *x, *consts) -> (*carry', *y)``.
        length: the number of steps.
        lower: the step index of the first step (``fori_loop``'s lower bound; 0 for scan).
        reverse: run the steps from the last to the first (the index counts down, ``x`` and
            ``y`` are read and written at the step's index, as ``jax.lax.scan(reverse=True)``).
        carry_shapes, x_shapes, const_shapes, y_shapes: core shapes of the leaves.
        name: the loop's name in messages and formulas.
        kind: ``"fori_loop"`` or ``"scan"`` (how formulas name the step variable).
        checkpoints: how many carries reverse mode keeps (None: all of them).
    """

    def __init__(self, body, length: int, lower: int, reverse: bool, carry_shapes, x_shapes,
                 const_shapes, y_shapes, name: str, kind: str = "scan", checkpoints=None):
        self.body = body
        self.length = int(length)
        self.lower = int(lower)
        self.reverse = bool(reverse)
        self.carry_shapes = tuple(tuple(s) for s in carry_shapes)
        self.x_shapes = tuple(tuple(s) for s in x_shapes)
        self.const_shapes = tuple(tuple(s) for s in const_shapes)
        self.y_shapes = tuple(tuple(s) for s in y_shapes)
        self.name = name
        self.kind = kind
        self.checkpoints = checkpoints
        #: Derived loops and bodies (tangent, trajectory, adjoint), made once per spec so that
        #: their nodes hash-cons.
        self.derived: dict = {}
        self.lock = threading.Lock()

    # -- layout -------------------------------------------------------------------------

    @property
    def operand_shapes(self) -> tuple:
        """Core shapes of the operands: carry leaves, scanned arrays (steps in front), consts."""
        return (self.carry_shapes + tuple((self.length,) + s for s in self.x_shapes)
                + self.const_shapes)

    @property
    def result_shapes(self) -> tuple:
        """Core shapes of the results: the final carry's leaves, then each stacked ``y``."""
        return self.carry_shapes + tuple((self.length,) + s for s in self.y_shapes)

    @property
    def size(self) -> int:
        """The length of the node's value: every result leaf flattened, joined."""
        return sum(math.prod(s) for s in self.result_shapes)

    def result_offsets(self) -> list[int]:
        offsets, start = [], 0
        for shape in self.result_shapes:
            offsets.append(start)
            start += math.prod(shape)
        return offsets + [start]

    def counts(self) -> tuple[int, int, int]:
        return len(self.carry_shapes), len(self.x_shapes), len(self.const_shapes)

    def steps(self) -> range:
        """The step indices in the order the loop takes them (counted from 0)."""
        return range(self.length - 1, -1, -1) if self.reverse else range(self.length)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name}: {self.length} steps>"

    def __reduce__(self):
        return _restore_spec, (self.body, self.length, self.lower, self.reverse, self.carry_shapes,
                               self.x_shapes, self.const_shapes, self.y_shapes, self.name, self.kind,
                               self.checkpoints)

    def printed_loops(self, operands: list) -> list:
        """The loops a formula prints for this node, each with its printed operands."""
        return [(self, operands)]


def _restore_spec(*fields) -> LoopSpec:
    return LoopSpec(*fields)


class BinomialSpec:
    """What a loop's reverse pass by binomial checkpointing computes (:mod:`symad.loops.binomial`).

    The node's operands are the adjoint's initial carry (the final carry's cotangent, then a
    zero accumulator per const), the loop's initial carry, its scanned arrays, the stacked
    outputs' cotangents and its consts; its value is the store-all adjoint loop's
    (``adjoint``): the initial carry's and the consts' cotangents, then the scanned slices'.

    Args:
        loop: the loop differentiated.
        trajectory, adjoint: its derived loops (the carry stacked per step; the body's vjp
            run backwards), run here a window of steps at a time.
        snapshots: how many carries the schedule keeps at once, besides the initial one.
        block: steps per unit of the schedule (a unit is reversed from its stored carries).
    """

    kind = "binomial"

    def __init__(self, loop: LoopSpec, trajectory: LoopSpec, adjoint: LoopSpec, snapshots: int,
                 block: int):
        self.loop, self.trajectory, self.adjoint = loop, trajectory, adjoint
        self.snapshots, self.block = int(snapshots), int(block)
        self.name = adjoint.name
        self.derived: dict = {}
        self.lock = threading.Lock()

    @property
    def operand_shapes(self) -> tuple:
        loop = self.loop
        n = loop.length
        return (self.adjoint.carry_shapes + loop.carry_shapes + tuple((n,) + s for s in loop.x_shapes)
                + tuple((n,) + s for s in loop.y_shapes) + loop.const_shapes)

    @property
    def result_shapes(self) -> tuple:
        return self.adjoint.result_shapes

    @property
    def size(self) -> int:
        return self.adjoint.size

    def result_offsets(self) -> list[int]:
        return self.adjoint.result_offsets()

    def printed_loops(self, operands: list) -> list:
        """The forward recurrence the adjoint reads, then the adjoint recurrence: the
        schedule changes which carries are kept, not the equations."""
        n_carry, n_x, n_q = self.loop.counts()
        start = n_carry + n_q
        forward = operands[start:start + n_carry + n_x] + operands[len(operands) - n_q:]
        return [(self.trajectory, forward), (self.adjoint, operands)]

    def __repr__(self) -> str:
        return (f"<binomial {self.name}: {self.loop.length} steps, {self.snapshots} snapshots, "
                f"blocks of {self.block}>")

    def __reduce__(self):
        return BinomialSpec, (self.loop, self.trajectory, self.adjoint, self.snapshots, self.block)


def loop_shape(shapes, params) -> tuple:
    """The node's shape: the operands' leading dimensions (broadcast), then the value's length."""
    spec = params["loop"]
    in_shapes = params["in_shapes"]
    leads = []
    for shape, core in zip(in_shapes, spec.operand_shapes):
        if tuple(shape[len(shape) - len(core):]) != tuple(core) or len(shape) < len(core):
            raise TracingError(f"{spec.kind} {spec.name!r}: an operand of shape {tuple(shape)} where "
                               f"the body was traced at {tuple(core)}")
        leads.append(tuple(shape[:len(shape) - len(core)]))
    try:
        lead = tuple(np.broadcast_shapes(*leads)) if leads else ()
    except ValueError:
        raise TracingError(f"{spec.kind} {spec.name!r}: leading dimensions {leads} do not "
                           "broadcast") from None
    return lead + (spec.size,)


def pack_results(spec, batch: tuple, carry: list, ys: list) -> np.ndarray:
    """The node's value: every result leaf flattened behind the batch, joined."""
    # Sizes spelled out, not -1: a batch with a 0-long axis (the Hessian's rows for an
    # empty scanned array) leaves -1 undetermined and NumPy refuses the reshape.
    if batch:
        parts = [(c if np.shape(c) == batch + shape else np.broadcast_to(c, batch + shape))
                 .reshape(batch + (math.prod(shape),)) for c, shape in zip(carry, spec.carry_shapes)]
    else:
        parts = [np.ravel(c) for c in carry]
    parts += [y.reshape(batch + (math.prod(np.shape(y)[len(batch):]),)) for y in ys]
    if not parts:
        return np.zeros(batch + (0,))
    return np.concatenate(parts, axis=-1) if len(parts) > 1 else np.array(parts[0])
