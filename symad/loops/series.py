"""Taylor coefficients through loops, by nested forward mode.

Taylor mode proper (:mod:`symad.transforms.taylor`) sweeps every node order by
order, which a loop -- whose coefficient of order k needs its body's series of
every order up to k at every step -- does not fit. For a function holding loops,
``sd.derivative(f, n)`` and ``sd.taylor(f, n)`` (one argument, graph orders) are
taken instead by forward mode n times over (``jacfwd`` of ``jacfwd`` ...): each
level is a loop carrying the previous level's carry and tangent, so the carry
doubles per order. Meant for low orders (the cost grows as 2^n; measured below).
"""

from __future__ import annotations

import math

import sympy

from symad.function import Function, trace

__all__ = ["holds_loop", "loop_taylor_function"]

#: Orders past this are refused: each order doubles the loop's carry.
MAX_LOOP_ORDER = 8


def holds_loop(function: Function) -> bool:
    """True if the graph holds a loop node (Taylor mode then goes by nested forward mode)."""
    from symad.loops.nodes import loop_p, while_p

    return any(node.primitive is loop_p or node.primitive is while_p for node in function.graph.nodes)


def loop_taylor_function(function: Function, order: int, argnum: int, derivatives: bool,
                         transform: str) -> Function:
    """Coefficients (or derivatives) of orders 0..``order`` along scalar argument ``argnum``.

    >>> import symad as sd
    >>> f = lambda a: sd.fori_loop(0, 3, lambda i, c: c * a, a)   # a ** 4
    >>> [float(d) for d in sd.taylor(f, 2, derivatives=True)(2.0)]
    [16.0, 32.0, 48.0]
    """
    from symad.derivatives import jacobian_function
    from symad.errors import DifferentiationError

    if order > MAX_LOOP_ORDER:
        raise DifferentiationError(
            f"{transform}({function.name}, {order}): through a loop, derivatives are taken by "
            f"nested forward mode, whose cost doubles per order; orders up to {MAX_LOOP_ORDER} "
            "are supported")
    levels = [function]
    for _ in range(order):
        levels.append(jacobian_function(levels[-1], argnum, mode="fwd"))
    count = len(function.in_treedef.children)

    def coefficients(*args):
        out = []
        for k, level in enumerate(levels):
            value = level(*args)
            scale = 1 if derivatives else sympy.Rational(1, math.factorial(k))
            out.append(value if scale == 1 else _scaled(value, scale))
        return tuple(out)

    return trace(coefficients, *([0.0] * count), name=f"{transform}({function.name})")


def _scaled(value, scale):
    from symad.pytree import tree_map

    return tree_map(lambda v: v * scale, value)


def _register() -> None:
    from symad.derivatives import TAYLOR_ALTERNATIVES

    TAYLOR_ALTERNATIVES["loops"] = (holds_loop, loop_taylor_function)


_register()
