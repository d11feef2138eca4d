"""The nodes the loop lowering rewrites a graph into, beside the graph's own.

The loops' private primitive ``matmul_p`` (every einsum becomes a batch of
matrix products), how each reduction combines partial results, and small
node makers shared by the kernel planning and the kernel writing.
"""

from __future__ import annotations

import math

from symad import array_primitives as A
from symad.graph import Node
from symad.ir.primitive import NATIVE, Primitive
from symad.loopnest.ir import literal_operand
from symad.primitives import (
    add_p,
    reduce_max_p,
    reduce_min_p,
)

__all__ = ["matmul_p", "REDUCTIONS", "IDENTITY", "make_node", "is_constant_array", "node_maker", "is_cheap"]

# Elementwise primitives cheap enough to compute again wherever they are read are those
# whose stanza's cost is at most NATIVE (a few cycles, no library call; XLA duplicates the
# same kind into each consumer). Others (exp, sin, log, special functions...) are computed
# once and stored when read more than once per element.



#: The loops' own primitive: a batch of matrix products, the form every einsum is put in.
matmul_p = Primitive("batched_matmul", None, None, arity=2, kind="bilinear", shape_rule=None,
                     folds_constants=False, numpy_name=None)

REDUCTIONS = {
    # primitive: (how two partial results combine, the identity)
    A.reduce_sum_p: (add_p, 0.0),
    A.amax_p: (reduce_max_p, -math.inf),
    A.amin_p: (reduce_min_p, math.inf),
}
#: What a buffer accumulated into by each combining primitive starts at.
IDENTITY = {add_p: 0.0, reduce_max_p: -math.inf, reduce_min_p: math.inf}


def make_node(primitive, args, params=(), shape=()) -> Node:
    return Node(primitive, tuple(args), tuple(params), shape=tuple(shape))


def is_constant_array(atom) -> bool:
    """A constant node with data (not one value everywhere): read from its own buffer."""
    return (atom.__class__ is Node and atom.primitive is A.constant_p
            and dict(atom.params)["value"].fill is None)


def is_cheap(node) -> bool:
    if node.primitive.name == "power":
        exponent = node.args[1]
        return not exponent.is_Symbol and literal_operand(exponent)[1] in (1.0, 2.0, -1.0, 0.5)
    return node.primitive.cost <= NATIVE


def node_maker(chain: list):
    """A node maker that also lists what it makes, in order (operands first)."""
    def make(primitive, args, params=(), shape=()):
        node = make_node(primitive, args, params, shape)
        chain.append(node)
        return node
    return make
