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
  loop), so memory is ``m + n/m`` carries instead of ``n``. With
  ``checkpoints=("binomial", s)`` the reverse pass is one ``binomial_adjoint`` node
  (:mod:`symad.loops.binomial`) whose own rules differentiate the store-all form.
* ``while_loop`` has a tangent only: reverse mode raises, as JAX does.

Derived loops are made once per loop (cached on its :class:`~symad.loops.spec.LoopSpec`),
so the nodes the rules record for each operand hash-cons into one.
"""

from __future__ import annotations

import sympy

from symad.array_primitives import record_concatenate, record_slice
from symad.errors import DifferentiationError
from symad.export.index_rules import INDEX_RULES, elementwise_rule
from symad.graph import Node, atom_shape
from symad.loops.binomial import binomial_cotangents, binomial_p, is_binomial
from symad.loops.body import loop_results, record_loop
from symad.loops.checkpoints import checkpointed_cotangents, segment_length
from symad.loops.derived import (
    adjoint_spec,
    body_function,
    derived_spec,
    input_names,
    split,
    trajectory_spec,
    zeros,
)
from symad.loops.formulas import loop_element
from symad.loops.nodes import loop_p, while_p
from symad.loops.spec import LoopSpec
from symad.rules.tangents import TANGENT, aligned
from symad.rules.taylor import TAYLOR
from symad.rules.transposes import TRANSPOSE
from symad.rules.unroll import UNROLL
from symad.transforms.batching import BATCHED_PARAMS
from symad.transforms.forward import push_forward
from symad.transforms.reverse import backpropagate
from symad.transforms.series import SERIES
from symad.transforms.sparsity import PATTERN

__all__ = ["loop_cotangents"]

ZERO = sympy.Integer(0)


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
    (index,), carry, x, q = input_names(spec)
    names = ([index] + carry + [f"{c}dot" for c in carry] + x + [f"{x[i]}dot" for i in active_x]
             + q + [f"{q[i]}dot" for i in active_q])
    return derived_spec(spec, ("tangent", active_x, active_q), step, spec.carry_shapes * 2, x_shapes,
                        q_shapes, spec.length, spec.reverse, f"jvp({spec.name})", names=names)


def _loop_tangent(builder, node, tangents, lead):
    spec = dict(node.params)["loop"]
    n_carry, n_x, n_q = spec.counts()
    c0, xs, q = split(node.args, n_carry, n_x, n_q)
    ct0, xt, qt = split(tangents, n_carry, n_x, n_q)
    active_x = tuple(i for i, t in enumerate(xt) if t is not None)
    active_q = tuple(i for i, t in enumerate(qt) if t is not None)
    tspec = _tangent_spec(spec, active_x, active_q)
    if lead:  # seeds in front of the node's own leading dimensions (a vmap axis), not beside
        own = len(node.shape) - 1
        ct0, xt, qt = ([None if t is None else aligned(builder, t, own + len(core), lead)
                        for t, core in zip(tangents, cores)]
                       for tangents, cores in ((ct0, spec.carry_shapes),
                                               (xt, spec.operand_shapes[n_carry:n_carry + n_x]),
                                               (qt, spec.const_shapes)))
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
    pieces = loop_results(builder, cotangent, spec, _lead(cotangent))
    cbar, ybar = pieces[:n_carry], pieces[n_carry:]
    if is_binomial(spec):
        found = binomial_cotangents(builder, spec, c0, xs, q, cbar, ybar)
    elif segment_length(spec) > 1:
        found = checkpointed_cotangents(builder, spec, c0, xs, q, cbar, ybar)
    else:
        adjoint = adjoint_spec(spec)
        operands = cbar + [zeros(s) for s in spec.const_shapes] + c0 + xs + ybar + q
        anode = _stored_adjoint(builder, spec, operands)
        results = loop_results(builder, anode, adjoint, _lead(anode))
        c_bar, q_bar, x_bar = split(results, n_carry, n_q, n_x)
        found = c_bar + x_bar + q_bar
    with spec.lock:
        spec.derived[key] = found
    return found


def _stored_adjoint(builder, spec: LoopSpec, operands: list):
    """The adjoint loop's node over the stored trajectory, from the operands of a
    ``binomial_adjoint`` node (:class:`~symad.loops.spec.BinomialSpec`'s layout)."""
    n_carry, n_x, n_q = spec.counts()
    cbar, qacc, c0, xs, ybar, q = split(operands, n_carry, n_q, n_carry, n_x, len(spec.y_shapes), n_q)
    trajectory = trajectory_spec(spec)
    tnode = record_loop(loop_p, trajectory, c0 + xs + q)
    carries = loop_results(builder, tnode, trajectory, _lead(tnode))[n_carry:]
    return record_loop(loop_p, adjoint_spec(spec), cbar + qacc + carries + xs + ybar + q)


def _expansion(builder, node):
    """The store-all form of a ``binomial_adjoint`` node, recorded in ``builder`` (once per
    node and builder): its value atom, which equals the node's, and the nodes between the
    node's operands and it."""
    binomial = dict(node.params)["loop"]
    key = ("expansion", node)
    with binomial.lock:
        found = binomial.derived.get(key)
    # One graph (a traced gradient) is differentiated by several transforms, each recording
    # into its own builder: nodes recorded in another's are not in this graph. (Only the
    # latest is kept: a builder is not held past its transform.)
    if found is None or builder.node_of(found[0]) is None:
        value = _stored_adjoint(builder, binomial.loop, list(node.args))
        found = (value, _nodes_between(value, node.args))
        with binomial.lock:
            binomial.derived[key] = found
    return found


def _nodes_between(output, inputs) -> list:
    """The nodes ``output`` is computed by from ``inputs``, in the order they were recorded."""
    stop, seen, pending = set(inputs), set(), [output]
    while pending:
        atom = pending.pop()
        if atom in stop or atom in seen or not isinstance(atom, Node):
            continue
        seen.add(atom)
        pending.extend(atom.args)
    return sorted(seen, key=lambda node: node.position)


def _binomial_tangent(builder, node, tangents, lead):
    # A second order through binomial checkpointing differentiates the store-all form.
    value, nodes = _expansion(builder, node)
    seeds = {arg: t for arg, t in zip(node.args, tangents) if t is not None}
    return push_forward(builder, nodes, seeds, node.primitive.name, lead=lead).get(value)


def _binomial_transpose(builder, cotangent, node, index, lead):
    value, nodes = _expansion(builder, node)
    key = ("cotangents", node, cotangent)
    binomial = dict(node.params)["loop"]
    with binomial.lock:
        found = binomial.derived.get(key)
    if found is None:
        found = backpropagate(builder, nodes, [(value, cotangent)], list(node.args),
                              node.primitive.name, lead=tuple(atom_shape(cotangent)[:lead]))
        with binomial.lock:
            found = binomial.derived.setdefault(key, found)
    return found[index]


TANGENT.register(binomial_p)(_binomial_tangent)
TRANSPOSE.register(binomial_p)(_binomial_transpose)


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


def _batched_params(params: tuple, args) -> tuple:
    # sd.vmap inside a trace records a loop again over operands with the mapped axis in
    # front: their shapes in the graph are those now (symad.loops.evaluation tells a batch
    # of points from them).
    return tuple((name, tuple(atom_shape(a) for a in args)) if name == "in_shapes" else (name, value)
                 for name, value in params)


BATCHED_PARAMS.update(dict.fromkeys((loop_p, while_p, binomial_p), _batched_params))

# The tables a loop has no rule in, and why.
_WHOLE = "a loop: its value comes from running its body, not from its elements"
PATTERN.no_rule("a loop: the sparsity of its steps' composition is not computed; F.sparsity() "
                "and sparse Jacobians refuse it", loop_p, while_p, binomial_p)
UNROLL.no_rule(_WHOLE, loop_p, while_p, binomial_p)
@INDEX_RULES.register(loop_p, while_p, binomial_p)
def _loop_element(nb, node, index: tuple, scope: tuple):
    # The loop's application (its operands as the elementwise rule reads them), and of it
    # the element at ``index``: the leaf it is (symad.loops.formulas.loop_element).
    application = elementwise_rule(nb, node, index, scope)
    return loop_element(application, index[0] if index else 0)
_SERIES = ("Taylor mode through a loop goes by nested forward mode (sd.derivative and "
           "sd.taylor of one argument, orders up to 8: symad.loops.series); multivariate series, "
           "directions and the numeric series of high orders do not go through loops")
TAYLOR.no_rule(_SERIES, loop_p, while_p, binomial_p)
SERIES.no_rule(_SERIES, loop_p, while_p, binomial_p)
