"""Derived loops: the loops the derivative rules record, traced once per loop.

A derived loop's body is a Python step over traced leaves that calls the loop's body
(or its jvp or vjp, themselves traced Functions) on them; :func:`derived_spec` traces it
once at the core shapes and keeps the result on the parent loop's
:class:`~symad.loops.spec.LoopSpec`, so the nodes recorded for each operand hash-cons.
"""

from __future__ import annotations

import numpy as np

from symad.errors import DifferentiationError
from symad.loops.body import trace_body
from symad.loops.spec import LoopSpec
from symad.pytree import tree_flatten

__all__ = ["derived_spec", "body_function", "trajectory_spec", "adjoint_spec", "split", "zeros",
           "input_names"]


def input_names(spec: LoopSpec) -> list[list[str]]:
    """The names of the body's inputs: ``[[index], carry, slices, consts]``."""
    names = [getattr(s, "name", None) or s[()].name for s in spec.body.in_symbols]
    n_carry, n_x, n_q = spec.counts()
    return split(names, 1, n_carry, n_x, n_q)


def derived_spec(parent: LoopSpec, key, step, carry_shapes, x_shapes, const_shapes, length,
                 reverse: bool, name: str, kind: str | None = None, checkpoints=None,
                 lower: int | None = None, names: list[str] | None = None) -> LoopSpec:
    """The loop of ``step(k, carry, xq) -> (carry', ys)``, traced once per ``parent`` and ``key``.

    ``carry`` is the list of carry leaves, ``xq`` the tuple of the step's slices and then
    the consts, all traced at their core shapes (the operands' leading dimensions are the
    node's business). ``names``: the inputs' names (index, carry, slices, consts), which
    the loop's recurrence prints (``sbar`` prints as s̄).
    """
    with parent.lock:
        spec = parent.derived.get(key)
        if spec is not None:
            return spec
    carry_def = tree_flatten([0.0] * len(carry_shapes))[1]
    xq_def = tree_flatten(tuple([0.0] * (len(x_shapes) + len(const_shapes))))[1]
    names = names or (["k"] + [f"c{i}" for i in range(len(carry_shapes))]
                      + [f"x{i}" for i in range(len(x_shapes))]
                      + [f"q{i}" for i in range(len(const_shapes))])
    kind = kind or parent.kind
    body, y_shapes, _, consts, _ = trace_body(step, carry_shapes, carry_def,
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


def trajectory_spec(spec: LoopSpec) -> LoopSpec:
    """The loop again, also stacking the carry it starts each step with."""
    n_carry, n_x, n_q = spec.counts()
    body = spec.body

    def step(k, carry, xq):
        out = body(k, *carry, *xq)
        out = out if isinstance(out, tuple) else (out,)
        return list(out[:n_carry]), tuple(carry)

    (index,), carry, x, q = input_names(spec)
    return derived_spec(spec, ("trajectory",), step, spec.carry_shapes, spec.x_shapes,
                        spec.const_shapes, spec.length, spec.reverse, f"forward({spec.name})",
                        names=[index] + carry + x + q)


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
    (index,), carry, x, q = input_names(spec)
    y = [f"y{i}" for i in range(ny)]
    names = ([index] + [f"{c}bar" for c in carry + q] + carry + x + [f"{v}bar" for v in y] + q)
    return derived_spec(spec, ("adjoint",), step, spec.carry_shapes + spec.const_shapes, x_shapes,
                        spec.const_shapes, spec.length, not spec.reverse, f"adjoint({spec.name})",
                        names=names)
