"""The budget of inlining: how big a graph becomes as one SymPy tree, known before building it.

A graph shares subexpressions; an inlined formula copies each shared value
into every use, so its tree can be exponentially larger than the graph (the
gradient of a 14-step logistic map has 95 nodes, its inlined formula
hundreds of thousands of operations). SymPy also builds, prints and
compares trees recursively, so a tree nested more deeply than a few hundred
levels fails with ``RecursionError`` under Python's default recursion limit.

:func:`inlined_sizes` reads both numbers off the graph in one linear pass
with plain Python integers (no SymPy work), so ``Function.formula()`` can
refuse a tree past its budget at once, with a clear error, instead of
hanging. The defaults were measured (docs/benchmarks.md, "Recording at
scale"): SymPy builds an inlined formula at 150-1,000 µs per operation, so
``MAX_FORMULA_SIZE`` operations take about 0.4-2.5 s; and ``sin`` nested 200
deep can be built but no longer printed with the default recursion limit
of 1,000, hence ``MAX_FORMULA_DEPTH``.

>>> import symad as sd
>>> import numpy as np
>>> def chain(x):
...     for _ in range(30):
...         x = np.sin(x) + 0.001 * x      # x is used twice: the tree doubles per step
...     return x
>>> size, depth = inlined_sizes(sd.trace(chain, 0.3).graph)
>>> size > 10 ** 9, depth
(True, 60)
"""

from __future__ import annotations

from collections.abc import Iterable

from symad.errors import ExportError

__all__ = ["MAX_FORMULA_SIZE", "MAX_FORMULA_DEPTH", "inlined_sizes", "node_sizes", "check_budget",
           "describe_size"]

#: The most operations ``Function.formula()`` builds by default (its ``max_size=``).
MAX_FORMULA_SIZE = 2_500

#: The deepest nesting of operations ``Function.formula()`` builds by default
#: (its ``max_depth=``); ``cse()`` and ``latex()`` give a value its own line
#: rather than inline it deeper than this.
MAX_FORMULA_DEPTH = 100

# Sizes saturate here: the count is only compared with a budget and reported,
# and exact integers of 10,000 bits per node would make the pass quadratic.
_SATURATED = 2 ** 64


def node_sizes(graph) -> tuple[dict, dict]:
    """``(operations, depth)`` of every node's fully inlined tree, keyed by node.

    One pass in topological order: a node's tree has one operation plus its
    operands' trees, and is one level deeper than its deepest operand.
    Inputs and constants count zero. No recursion, no SymPy work.
    """
    size: dict = {}
    depth: dict = {}
    size_of, depth_of = size.get, depth.get
    for node in graph.nodes:
        args = node.args
        if len(args) == 1:  # the common case, without the loop
            operations, deepest = 1 + size_of(args[0], 0), depth_of(args[0], 0)
        else:
            operations = 1 + sum([size_of(atom, 0) for atom in args])
            deepest = max([depth_of(atom, 0) for atom in args], default=0)
        size[node] = operations if operations < _SATURATED else _SATURATED
        depth[node] = deepest + 1
    return size, depth


def inlined_sizes(graph, outputs: Iterable | None = None) -> tuple[int, int]:
    """Operations and depth of the inlined trees of ``outputs`` (default: the graph's outputs).

    The operations of all outputs are added up, the depth is the deepest one.
    """
    size, depth = node_sizes(graph)
    outputs = graph.outputs if outputs is None else outputs
    total = sum(size.get(atom, 0) for atom in outputs)
    deepest = max((depth.get(atom, 0) for atom in outputs), default=0)
    return min(total, _SATURATED), deepest


def describe_size(operations: int) -> str:
    """``12,345`` or, past the saturation point, ``over 1.8e+19``."""
    if operations >= _SATURATED:
        return f"over {float(_SATURATED):.1e}"
    return f"{operations:,}"


def check_budget(what: str, graph, max_size: float | None, max_depth: float | None,
                 advice: str) -> None:
    """Raise :class:`~symad.errors.ExportError` if inlining ``graph`` exceeds the budget.

    ``what`` names the call in the message (``"formula(f)"``); ``advice`` is
    the sentence that says what to do instead. ``None`` means the module's
    default (read at call time, so assigning ``symad.inlining.MAX_FORMULA_SIZE``
    changes it); ``math.inf`` switches a limit off.
    """
    max_size = MAX_FORMULA_SIZE if max_size is None else max_size
    max_depth = MAX_FORMULA_DEPTH if max_depth is None else max_depth
    operations, depth = inlined_sizes(graph)
    if operations > max_size:
        raise ExportError(
            f"{what}: the inlined formula would have {describe_size(operations)} operations "
            f"(estimated from the graph's {len(graph.nodes):,} nodes: every shared value is "
            f"copied into each use), more than max_size={max_size:,}. {advice}"
        )
    if depth > max_depth:
        raise ExportError(
            f"{what}: the inlined formula would be nested {depth:,} operations deep, more than "
            f"max_depth={max_depth:,} (SymPy builds and prints trees recursively, and deeper "
            f"trees exceed Python's recursion limit). {advice}"
        )
