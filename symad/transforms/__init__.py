"""The chain rule over a Graph: reverse mode and forward mode, each one small function.

Both sweeps run inside a :class:`~symad.graph.GraphBuilder` that already holds
the primal nodes, and record their derivative nodes into it, so a derivative
is again a graph and transforms nest.
"""

from symad.transforms.forward import push_forward
from symad.transforms.reverse import backpropagate

__all__ = ["backpropagate", "push_forward"]
