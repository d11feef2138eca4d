"""Derivatives through loops: new loops whose bodies are derivatives of the body.

By recursion on the body, as JAX differentiates ``scan``:

* **Forward mode** (the tangent table): the tangent of a loop is a loop over the carry
  and its tangent, ``(c, ċ) -> (body(c), ∂body·ċ)``, whose body is the body's jvp
  (:func:`symad.derivatives.jvp_function`), again a traced Function.
* **Reverse mode** (the transpose table): one loop stores the carry before every step
  (the trajectory); a second runs the steps backwards, ``c̄_k = (∂body/∂c)ᵀ c̄_{k+1}``,
  over the stored carries, with the body's vjp as its body, accumulating the
  cotangents of the consts in its carry and stacking those of the scanned slices.
  With ``checkpoints=m`` the trajectory keeps one carry in ``ceil(n/m)`` and the
  backward loop's body recomputes each segment's carries from it (a loop in the
  loop), so memory is ``m + n/m`` carries instead of ``n``.
* ``while_loop`` has a tangent only: reverse mode raises, as JAX does.

Derived loops are made once per loop (cached on its :class:`~symad.loops.spec.LoopSpec`),
so the nodes the rules record for each operand hash-cons into one.
"""

from __future__ import annotations

import numpy as np
import sympy

from symad.array_primitives import record_concatenate, record_slice
from symad.errors import DifferentiationError
from symad.graph import atom_shape, current_builder
from symad.loops.body import loop_results, record_loop, trace_body
from symad.loops.spec import LoopSpec, loop_p, while_p
from symad.pytree import tree_flatten
from symad.rules.taylor import TAYLOR
from symad.rules.tangents import TANGENT
from symad.rules.transposes import TRANSPOSE
from symad.rules.unroll import UNROLL
from symad.export.index_rules import INDEX_RULES
from symad.transforms.series import SERIES
from symad.transforms.sparsity import PATTERN

__all__ = ["derived_spec", "body_function", "trajectory_spec", "adjoint_spec", "split", "zeros"]

ZERO = sympy.Integer(0)


def derived_spec(parent: LoopSpec, key, step, carry_shapes, x_shapes, const_shapes, length,
                 reverse: bool, name: str, kind: str | None = None, checkpoints=None,
                 lower: int | None = None) -> LoopSpec:
    """The loop of ``step(k, carry, xq) -> (carry', ys)``, traced once per ``parent`` and ``key``.

    ``carry`` is the list of carry leaves, ``xq`` the tuple of the step's slices and then
    the consts, all traced at their core shapes (the operands' leading dimensions are the
    node's business).
    """
    with parent.lock:
        spec = parent.derived.get(key)
        if spec is not None:
            return spec
    carry_def = tree_flatten([0.0] * len(carry_shapes))[1]
    xq_def = tree_flatten(tuple([0.0] * (len(x_shapes) + len(const_shapes))))[1]
    names = (["k"] + [f"c{i}" for i in range(len(carry_shapes))]
             + [f"x{i}" for i in range(len(x_shapes))] + [f"q{i}" for i in range(len(const_shapes))])
    kind = kind or parent.kind
    body, y_shapes, _, consts = trace_body(step, carry_shapes, carry_def,
                                           list(x_shapes) + list(const_shapes), xq_def, names, name,
                                           kind)
    if consts:  # a derived step reads only its inputs
        raise DifferentiationError(f"{kind} {parent.name!r}: a derived body read outside values")
    lower = parent.lower if lower is None else lower
    spec = LoopSpec(body, length, lower, reverse, carry_shapes, x_shapes, const_shapes,
                    y_shapes, name, kind, checkpoints)
    with parent.lock:
        return parent.derived.setdefault(key, spec)


def body_function(spec: LoopSpec, which: str):
    """The body's jvp or vjp Function, made once per loop."""
    from symad.derivatives import jvp_function, vjp_function

    with spec.lock:
        made = spec.derived.get(which)
    if made is None:
        made = (jvp_function if which == "jvp" else vjp_function)(spec.body, False)
        with spec.lock:
            made = spec.derived.setdefault(which, made)
    return made


def zeros(shape: tuple):
    return np.zeros(shape) if shape else 0.0


def split(values, *counts) -> list:
    parts, start = [], 0
    for count in counts:
        parts.append(list(values[start:start + count]))
        start += count
    return parts


def _lead(atom) -> int:
    return len(atom_shape(atom)) - 1


# ---------------------------------------------------------------------------
# Forward mode
# ---------------------------------------------------------------------------


def _tangent_spec(spec: LoopSpec, active_x: tuple, active_q: tuple) -> LoopSpec:
    """The loop of ``(c, ċ)`` with the body's jvp; tangents of the inactive slices and consts are 0."""
    n_carry, n_x, n_q = spec.counts()
    jvp = body_function(spec, "jvp")
    is_while = spec.kind == "while_loop"

    def step(k, carry, xq):
        c, ct = carry[:n_carry], carry[n_carry:]
        x, xt, q, qt = split(xq, n_x, len(active_x), n_q, len(active_q))
        x_tangents = [zeros(s) for s in spec.x_shapes]
        for position, value in zip(active_x, xt):
            x_tangents[position] = value
        q_tangents = [zeros(s) for s in spec.const_shapes]
        for position, value in zip(active_q, qt):
            q_tangents[position] = value
        out, tangent = jvp((k, *c, *x, *q), (0.0, *ct, *x_tangents, *q_tangents))
        # A while loop's last output is its condition: it has no tangent to carry.
        ys = tuple(out[n_carry:]) + (() if is_while else tuple(tangent[n_carry:]))
        return list(out[:n_carry]) + list(tangent[:n_carry]), ys

    x_shapes = spec.x_shapes + tuple(spec.x_shapes[i] for i in active_x)
    q_shapes = spec.const_shapes + tuple(spec.const_shapes[i] for i in active_q)
    return derived_spec(spec, ("tangent", active_x, active_q), step, spec.carry_shapes * 2, x_shapes,
                        q_shapes, spec.length, spec.reverse, f"jvp({spec.name})")


def _loop_tangent(builder, node, tangents, lead):
    spec = dict(node.params)["loop"]
    n_carry, n_x, n_q = spec.counts()
    c0, xs, q = split(node.args, n_carry, n_x, n_q)
    ct0, xt, qt = split(tangents, n_carry, n_x, n_q)
    active_x = tuple(i for i, t in enumerate(xt) if t is not None)
    active_q = tuple(i for i, t in enumerate(qt) if t is not None)
    tspec = _tangent_spec(spec, active_x, active_q)
    carry_tangents = [t if t is not None else zeros(s) for t, s in zip(ct0, spec.carry_shapes)]
    operands = (c0 + carry_tangents + xs + [xt[i] for i in active_x] + q + [qt[i] for i in active_q])
    tnode = record_loop(node.primitive, tspec, operands)
    offsets = tspec.result_offsets()
    ny = len(spec.y_shapes)
    # The tangent's value, in the node's layout: the carry's tangents, then the ys'.
    blocks = [(offsets[n_carry], offsets[2 * n_carry])]
    if ny and node.primitive is loop_p:
        blocks.append((offsets[2 * n_carry + ny], offsets[-1]))
    parts = [record_slice(builder, tnode, (("s", a, b, 1),), _lead(tnode)) for a, b in blocks if b > a]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else record_concatenate(builder, parts, -1, _lead(tnode))


TANGENT.register(loop_p, while_p)(_loop_tangent)


# ---------------------------------------------------------------------------
# Reverse mode
# ---------------------------------------------------------------------------


def trajectory_spec(spec: LoopSpec) -> LoopSpec:
    """The loop again, also stacking the carry it starts each step with."""
    n_carry, n_x, n_q = spec.counts()
    body = spec.body

    def step(k, carry, xq):
        out = body(k, *carry, *xq)
        out = out if isinstance(out, tuple) else (out,)
        return list(out[:n_carry]), tuple(carry)

    return derived_spec(spec, ("trajectory",), step, spec.carry_shapes, spec.x_shapes,
                        spec.const_shapes, spec.length, spec.reverse, f"forward({spec.name})")


def adjoint_spec(spec: LoopSpec) -> LoopSpec:
    """The backward loop: ``(c̄, q̄) -> ((∂body/∂c)ᵀ c̄ , q̄ + (∂body/∂q)ᵀ c̄)``, stacking x̄."""
    n_carry, n_x, n_q = spec.counts()
    ny = len(spec.y_shapes)
    vjp = body_function(spec, "vjp")

    def step(k, carry, xq):
        cbar, qacc = carry[:n_carry], carry[n_carry:]
        c, x, ybar, q = split(xq, n_carry, n_x, ny, n_q)
        cts = vjp((k, *c, *x, *q), (tuple(cbar) + tuple(ybar),))
        _, c_prev, x_bar, q_bar = split(cts, 1, n_carry, n_x, n_q)
        return c_prev + [a + b for a, b in zip(qacc, q_bar)], tuple(x_bar)

    x_shapes = spec.carry_shapes + spec.x_shapes + spec.y_shapes
    return derived_spec(spec, ("adjoint",), step, spec.carry_shapes + spec.const_shapes, x_shapes,
                        spec.const_shapes, spec.length, not spec.reverse, f"adjoint({spec.name})")


def loop_cotangents(builder, cotangent, node) -> list:
    """The cotangents of every operand of a loop node, given the node's (made once per pair)."""
    spec = dict(node.params)["loop"]
    key = ("cotangents", node, cotangent)
    with spec.lock:
        found = spec.derived.get(key)
    if found is not None:
        return found
    n_carry, n_x, n_q = spec.counts()
    c0, xs, q = split(node.args, n_carry, n_x, n_q)
    from symad.loops.checkpoints import checkpointed_cotangents, segment_length

    pieces = loop_results(builder, cotangent, spec, _lead(cotangent))
    cbar, ybar = pieces[:n_carry], pieces[n_carry:]
    if segment_length(spec) > 1:
        found = checkpointed_cotangents(builder, spec, c0, xs, q, cbar, ybar)
        with spec.lock:
            spec.derived[key] = found
        return found
    trajectory = trajectory_spec(spec)
    tnode = record_loop(loop_p, trajectory, c0 + xs + q)
    carries = loop_results(builder, tnode, trajectory, _lead(tnode))[n_carry:]
    adjoint = adjoint_spec(spec)
    operands = cbar + [zeros(s) for s in spec.const_shapes] + carries + xs + ybar + q
    anode = record_loop(loop_p, adjoint, operands)
    results = loop_results(builder, anode, adjoint, _lead(anode))
    c_bar, q_bar, x_bar = split(results, n_carry, n_q, n_x)
    found = c_bar + x_bar + q_bar
    with spec.lock:
        spec.derived[key] = found
    return found


def _loop_transpose(builder, cotangent, node, index, lead):
    return loop_cotangents(builder, cotangent, node)[index]


def _while_transpose(builder, cotangent, node, index, lead):
    spec = dict(node.params)["loop"]
    raise DifferentiationError(
        f"while_loop({spec.name}) is differentiable in forward mode only (jvp, jacfwd), as in "
        "JAX: reverse mode (grad, vjp, jacrev, hessian) would store a carry per step of a count "
        "known only at run time. Use sd.fori_loop(0, n, body, init) with a fixed count n")


TRANSPOSE.register(loop_p)(_loop_transpose)
TRANSPOSE.register(while_p)(_while_transpose)

# The tables a loop has no rule in, and why.
_WHOLE = "a loop: its value comes from running its body, not from its elements"
PATTERN.no_rule("a loop: the sparsity of its steps' composition is not computed (dense)", loop_p,
                while_p)
UNROLL.no_rule(_WHOLE + "; formula(expand=True) refuses it", loop_p, while_p)
INDEX_RULES.no_rule("a loop prints as its recurrence (symad.loops.formulas)", loop_p, while_p)
_SERIES = ("Taylor mode through a loop goes by nested forward mode (sd.derivative and "
           "sd.taylor of one argument, orders up to 8: symad.loops.series); multivariate series, "
           "directions and the numeric series of high orders do not go through loops")
TAYLOR.no_rule(_SERIES, loop_p, while_p)
SERIES.no_rule(_SERIES, loop_p, while_p)
