"""The loop primitives' stanzas: ``loop`` (fori_loop, scan) and ``while_loop``.

Each is an array primitive of kind ``"array"`` whose one parameter ``loop`` is a
:class:`~symad.loops.spec.LoopSpec` (with ``in_shapes``, its operands' shapes in the
graph); its value is computed by :mod:`symad.loops.evaluation`, its derivative rules sit
in :mod:`symad.loops.rules`.
"""

from __future__ import annotations

from symad.ir.primitive import Primitive, register
from symad.loops.evaluation import run_loop, run_while
from symad.loops.spec import loop_shape

__all__ = ["loop_p", "while_p"]


def _loop_sympy(*args, loop, in_shapes):
    # The node as a formula: an application named after the loop, whose str() is its
    # recurrence; LaTeX prints the recurrence below the function's lines (symad.loops.formulas).
    from symad.loops.formulas import loop_head

    return loop_head(loop)(*args)


def _loop_impl(*operands, loop, in_shapes):
    return run_loop(loop, in_shapes, operands)


loop_p = register(Primitive(
    "loop", _loop_sympy, _loop_impl, kind="array", shape_rule=loop_shape, variadic=True,
    folds_constants=False, finite=True))


def _while_impl(*operands, loop, in_shapes):
    return run_while(loop, in_shapes, operands)


#: ``while_loop``: the same layout with no scanned arrays and no stacked results; its body
#: returns the next carry and, last, the condition on the carry it was given.
while_p = register(Primitive(
    "while_loop", _loop_sympy, _while_impl, kind="array", shape_rule=loop_shape, variadic=True,
    folds_constants=False, finite=True))
