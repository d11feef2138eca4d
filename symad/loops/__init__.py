"""Loops stay loops: ``sd.fori_loop``, ``sd.scan``, ``sd.while_loop`` and ``sd.checkpoint``.

With JAX's semantics (``jax.lax``): the body is traced **once** into a sub-graph
and the loop is **one** node of the enclosing graph, whatever the number of
steps (:mod:`symad.loops.spec`); the carry is a pytree of scalars and arrays.
Every transform goes through ``fori_loop`` and ``scan`` by recursion on the
body (:mod:`symad.loops.rules`): forward mode loops over the body's tangent,
reverse mode stores the carry trajectory and runs the body's vjp backwards
(``checkpoints=`` keeps fewer carries and recomputes the others). A
``while_loop`` differentiates in forward mode only, as in JAX.

>>> import numpy as np, symad as sd
>>> def power(x):   # x ** 8 by three squarings
...     return sd.fori_loop(0, 3, lambda i, y: y * y, x)
>>> float(power(2.0)), float(sd.grad(power)(2.0))
(256.0, 1024.0)
"""

from __future__ import annotations

import numbers

import numpy as np

from symad.errors import TracingError
from symad.function import function_name, trace
from symad.graph import atom_shape, current_builder
from symad.loops import formulas as _formulas  # noqa: F401  (recurrences in LaTeX)
from symad.loops import rules as _rules  # noqa: F401  (registers the derivative rules)
from symad.loops import series as _series  # noqa: F401  (Taylor mode through loops)
from symad.loops.body import (
    join_complex,
    leaf_names,
    loop_results,
    record_loop,
    split_complex,
    trace_body,
)
from symad.loops.nodes import loop_p, while_p
from symad.loops.spec import LoopSpec
from symad.pytree import tree_flatten, tree_unflatten
from symad.tracer import Tracer, is_complex_value, is_traced

__all__ = ["fori_loop", "scan", "while_loop", "checkpoint"]


def _bound(value, which: str, name: str) -> int:
    if is_traced(value):
        raise TracingError(
            f"fori_loop({name}): the {which} bound is a traced value; the bounds must be Python "
            "ints, known when the loop is traced (reverse mode stores one carry per step, as in "
            "JAX). Pass the count as a number, or use sd.while_loop (forward mode only) for a "
            "data-dependent count")
    if isinstance(value, numbers.Integral) or (isinstance(value, np.ndarray) and value.ndim == 0
                                               and np.issubdtype(value.dtype, np.integer)):
        return int(value)
    raise TypeError(f"fori_loop({name}): the {which} bound must be an int, got {value!r}")


def _marked(fun, checkpoints):
    """``checkpoints``, or the schedule ``sd.checkpoint`` marked ``fun`` with."""
    return getattr(fun, "symad_checkpoint", None) if checkpoints is None else checkpoints


def _check_checkpoints(checkpoints, name: str):
    if checkpoints is None or checkpoints is True or checkpoints == "sqrt":
        return checkpoints
    if isinstance(checkpoints, numbers.Integral) and not isinstance(checkpoints, bool) \
            and checkpoints >= 1:
        return int(checkpoints)
    def count(value, least: int) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= least

    if isinstance(checkpoints, tuple) and len(checkpoints) == 2 and checkpoints[0] == "levels" \
            and count(checkpoints[1], 2):
        return ("levels", int(checkpoints[1]))
    if isinstance(checkpoints, tuple) and len(checkpoints) in (2, 3) \
            and checkpoints[0] == "binomial" and all(count(v, 1) for v in checkpoints[1:]):
        return ("binomial",) + tuple(int(v) for v in checkpoints[1:])
    raise ValueError(f"{name}: checkpoints={checkpoints!r}; give None (store every carry), "
                     "'sqrt' (about sqrt(n) stored carries), a positive int (that many), "
                     "('levels', L) with L >= 2 (segments within segments, L deep), or "
                     "('binomial', s) or ('binomial', s, block) with s >= 1 (at most s carries "
                     "kept, the binomial schedule over blocks of steps)")


def fori_loop(lower, upper, body_fun, init_val, *, checkpoints=None):
    """``body_fun(i, val)`` applied for ``i`` from ``lower`` to ``upper - 1``: one node.

    As ``jax.lax.fori_loop``. The bounds are Python ints; ``i`` is a traced scalar
    (a float: use it in arithmetic, not as an index). ``checkpoints`` bounds the memory
    of reverse mode: None stores every carry, ``"sqrt"`` about ``2 sqrt(n)`` of them,
    an int ``m`` that many (the others are recomputed from the nearest one kept),
    ``("levels", L)`` about ``L n^(1/L)`` (segments of segments, ``L`` deep: each level
    recomputes its segment once more; ``("levels", 2)`` is ``"sqrt"``), and
    ``("binomial", s)`` at most ``s`` and one block's (the binomial schedule over at most
    1,024 blocks of steps, :mod:`symad.loops.binomial`; ``("binomial", s, block)`` sets the
    block's length).

    >>> import numpy as np, symad as sd
    >>> def euler(k):   # x' = -k x by explicit Euler, 1000 steps
    ...     return sd.fori_loop(0, 1000, lambda i, x: x - 1e-3 * k * x, 1.0)
    >>> round(float(euler(2.0)), 6), round(float(sd.grad(euler)(2.0)), 6)
    (0.135065, -0.135335)
    >>> sd.trace(euler, 2.0).stats()["nodes"] == sd.trace(euler, 2.0).stats()["nodes"]
    True
    """
    name = function_name(body_fun)
    lower = _bound(lower, "lower", name)
    upper = _bound(upper, "upper", name)
    checkpoints = _check_checkpoints(_marked(body_fun, checkpoints), f"fori_loop({name})")

    def step(i, carry, x):
        return body_fun(i, carry), None

    carry, _ = _loop(step, init_val, None, max(upper - lower, 0), lower, False, body_fun,
                     "fori_loop", checkpoints)
    return carry


def scan(f, init, xs=None, length=None, reverse=False, *, checkpoints=None):
    """``jax.lax.scan``: ``carry, y = f(carry, x)`` along the leading axis of ``xs``: one node.

    Returns ``(final carry, stacked ys)``. ``xs`` is a pytree of arrays scanned along
    axis 0 (or None, with ``length`` steps); ``reverse=True`` runs from the last step.

    >>> import numpy as np, symad as sd
    >>> def cumulative(x):
    ...     return sd.scan(lambda c, v: (c + v, c + v), 0.0, x)[1]
    >>> cumulative(np.array([1.0, 2.0, 3.0]))
    array([1., 3., 6.])
    >>> sd.jacobian(lambda x: np.sum(cumulative(x) ** 2))(np.array([1.0, 2.0, 3.0]))
    array([20., 18., 12.])
    """
    name = function_name(f)
    checkpoints = _check_checkpoints(_marked(f, checkpoints), f"scan({name})")
    x_leaves = tree_flatten(xs)[0]
    lengths = {int(np.shape(leaf)[0]) if np.ndim(leaf) else None for leaf in x_leaves}
    if None in lengths:
        raise TracingError(f"scan({name}): every leaf of xs must have a leading axis to scan along; "
                           "got a scalar")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) > 1:
        raise ValueError(f"scan({name}): the leaves of xs and length disagree on the number of "
                         f"steps: {sorted(lengths)}; give arrays of one leading length")
    if not lengths:
        raise ValueError(f"scan({name}): with xs=None give the number of steps as length=")

    def step(k, carry, x):
        return f(carry, x)

    return _loop(step, init, xs, lengths.pop(), 0, bool(reverse), f, "scan", checkpoints)


def _shape(leaf) -> tuple:
    return tuple(leaf.shape) if hasattr(leaf, "shape") else tuple(np.shape(leaf))


def _loop(step, init, xs, length, lower, reverse, fun, kind, checkpoints):
    if current_builder() is None:  # a plain call: trace the loop alone, then evaluate it
        def whole(init, xs):
            return _loop(step, init, xs, length, lower, reverse, fun, kind, checkpoints)

        return trace(whole, init, xs, name=function_name(fun))(init, xs)
    name = function_name(fun)
    carry_leaves, carry_def = tree_flatten(init)
    x_leaves, x_def = tree_flatten(xs)
    # Complex leaves go through the loop as their real and imaginary parts (symad.loops.body).
    carry_complex = [is_complex_value(leaf) for leaf in carry_leaves]
    x_complex = [is_complex_value(leaf) for leaf in x_leaves]
    carry_leaves, x_leaves = split_complex(carry_leaves, carry_complex), split_complex(x_leaves, x_complex)
    carry_shapes = [_shape(leaf) for leaf in carry_leaves]
    x_shapes = [_shape(leaf)[1:] for leaf in x_leaves]
    names = leaf_names(fun, len(carry_complex), len(x_complex), kind == "fori_loop")
    names = [names[0]] + _part_names(names[1:], carry_complex + x_complex)
    body, y_shapes, y_def, consts, y_complex = trace_body(
        step, carry_shapes, carry_def, x_shapes, x_def, names, name, kind, carry_complex, x_complex)
    spec = LoopSpec(body, length, lower, reverse, carry_shapes, x_shapes,
                    [atom_shape(c) for c in consts], y_shapes, name, kind, checkpoints)
    node = record_loop(loop_p, spec, carry_leaves + x_leaves + consts)
    results = [Tracer.of_atom(a) for a in loop_results(current_builder(), node, spec)]
    carry_count = len(carry_leaves)
    return (tree_unflatten(carry_def, join_complex(results[:carry_count], carry_complex)),
            tree_unflatten(y_def, join_complex(results[carry_count:], y_complex)))


def _part_names(names: list[str], complex_flags: list) -> list[str]:
    """A complex leaf's name as its two parts' (``z`` as ``z_re``, ``z_im``)."""
    out = []
    for leaf_name, is_complex in zip(names, complex_flags):
        out += [f"{leaf_name}_re", f"{leaf_name}_im"] if is_complex else [leaf_name]
    return out


def while_loop(cond_fun, body_fun, init_val):
    """``jax.lax.while_loop``: ``body_fun`` applied while ``cond_fun(val)`` holds: one node.

    Forward mode (``jvp``, ``jacfwd``) goes through it; reverse mode refuses, as in JAX
    (the number of carries to store is not known): use ``fori_loop`` with a fixed count.

    >>> import symad as sd
    >>> float(sd.while_loop(lambda x: x < 100.0, lambda x: 3.0 * x, 1.0))
    243.0
    """
    name = function_name(body_fun)
    if current_builder() is None:
        return trace(lambda v: while_loop(cond_fun, body_fun, v), init_val, name=name)(init_val)
    carry_leaves, carry_def = tree_flatten(init_val)
    carry_complex = [is_complex_value(leaf) for leaf in carry_leaves]
    carry_leaves = split_complex(carry_leaves, carry_complex)
    carry_shapes = [_shape(leaf) for leaf in carry_leaves]

    def step(k, carry, x):
        return body_fun(carry), cond_fun(carry)

    names = _part_names(leaf_names(body_fun, len(carry_complex), 0, False)[1:], carry_complex)
    body, pred_shapes, _, consts, pred_complex = trace_body(
        step, carry_shapes, carry_def, [], tree_flatten(None)[1], ["k"] + names, name,
        "while_loop", carry_complex)
    if any(pred_complex):
        raise TracingError(f"while_loop({name}): cond_fun must return a real truth value, not a "
                           "complex number")
    if list(pred_shapes) != [()]:
        raise TracingError(f"while_loop({name}): cond_fun must return one scalar truth value, got "
                           f"shapes {list(pred_shapes)}")
    spec = LoopSpec(body, 0, 0, False, carry_shapes, [], [atom_shape(c) for c in consts], [], name,
                    "while_loop")
    node = record_loop(while_p, spec, carry_leaves + consts)
    results = [Tracer.of_atom(a) for a in loop_results(current_builder(), node, spec)]
    return tree_unflatten(carry_def, join_complex(results, carry_complex))


def checkpoint(fun):
    """``fun`` marked for checkpointing: loops over it store about ``sqrt(n)`` carries.

    ``sd.fori_loop(0, n, sd.checkpoint(body), x)`` is ``checkpoints="sqrt"``: reverse
    mode keeps every ``sqrt(n)``-th carry and recomputes the others from the nearest one
    kept, as ``jax.checkpoint`` around a scan's body trades compute for memory.

    >>> import symad as sd
    >>> f = lambda x: sd.fori_loop(0, 100, sd.checkpoint(lambda i, y: y * 0.99 + x), 0.0)
    >>> round(float(sd.grad(f)(1.0)), 8)
    63.39676587
    """
    def checkpointed(*args, **kwargs):
        return fun(*args, **kwargs)

    checkpointed.__name__ = function_name(fun)
    checkpointed.__signature__ = _signature(fun)
    checkpointed.symad_checkpoint = "sqrt"
    return checkpointed


def _signature(fun):
    import inspect

    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None
