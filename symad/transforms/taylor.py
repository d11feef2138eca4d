"""Taylor mode: truncated Taylor series pushed through the graph, one order at a time.

Every atom ``u`` that depends on the seeded inputs gets a list of normalised
Taylor coefficients ``u[0], u[1], ..., u[n]`` (``u[k]`` is the k-th
derivative along the seed direction divided by ``k!``), each an atom of the
builder. ``u[0]`` is the atom itself. Coefficients come from one recurrence
per primitive (:mod:`symad.rules.taylor`): Cauchy convolutions for products,
the classical recurrences for quotients, logarithms and roots, and for every
other primitive the chain rule ``y' = sum_i p_i u_i'`` written on series,

    y[k] = (1/k) * sum_i sum_{j=1..k} j * u_i[j] * p_i[k-j],

where ``p_i`` is the primitive's symbolic partial (a node of the same graph,
so its own series comes from the same sweep). Because the partial rules reuse
their node's output (exp' = out, sin' = cos, cos' = -sin), this one rule *is*
the textbook recurrence for exp, the sin/cos and sinh/cosh pairs, tan, tanh,
sigmoid and the rest, and it serves custom primitives too. The cost of order
``n`` is O(n**2) operations per primitive, where nesting reverse mode grows
exponentially.

Why order by order: ``y[k]`` needs ``p[k-1]`` at most, and a partial may
depend on ``y`` itself (exp' = exp), so all nodes get coefficient ``k``
before any gets ``k + 1``. Within one order the builder's recording order is
a valid schedule: each node's operands were recorded before it. Nothing here
recurses along the graph, so a 10**5-deep chain is fine.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from symad.errors import DifferentiationError
from symad.graph import GraphBuilder, Node, is_zero_constant
from symad.primitives import add_p, div_p, mul_p, neg_p, sub_p
from symad.rules.taylor import TAYLOR_RULES, needs_partials
from symad.transforms.terms import partial_atoms

__all__ = ["TaylorSweep", "taylor_series"]

ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)

#: How many nodes the partial rules of generic primitives may add before the
#: sweep gives up: a custom primitive whose partial is a new custom node every
#: time would otherwise expand without end.
MAX_PARTIAL_NODES = 200_000


class TaylorSweep:
    """The state of one Taylor-mode sweep: the series of every dependent atom.

    Rules (see :mod:`symad.rules.taylor`) read coefficients with
    :meth:`coefficient` and record new ones with the small arithmetic helpers
    below, which skip structural zeros without recording anything.
    """

    def __init__(self, builder: GraphBuilder, order: int, function_name: str):
        self.builder = builder
        self.order = order
        self.function_name = function_name
        self.series: dict = {}
        #: Per node: the partial atoms the generic rule uses ({index: atom}).
        self.partials: dict = {}
        #: Per node: auxiliary series a rule keeps (powers, logarithms).
        self.auxiliary: dict = {}
        self._weighted: dict = {}

    # -- reading coefficients ---------------------------------------------------

    def coefficient(self, atom, k: int):
        """``atom[k]``: its k-th Taylor coefficient (a constant or independent atom is flat)."""
        series = self.series.get(atom)
        if series is None:
            return atom if k == 0 else ZERO
        return series[k]

    def is_varying(self, atom) -> bool:
        """True if ``atom`` depends on the seeded inputs (its higher coefficients may be non-zero)."""
        return atom in self.series

    def weighted(self, atom, j: int):
        """``j * atom[j]``, recorded once and reused by every order that needs it."""
        key = (atom, j)
        value = self._weighted.get(key)
        if value is None:
            value = self._weighted[key] = self.product(sympy.Integer(j), self.coefficient(atom, j))
        return value

    # -- recording arithmetic, skipping structural zeros ----------------------------

    def product(self, a, b):
        if is_zero_constant(a) or is_zero_constant(b):
            return ZERO
        return self.builder.record(mul_p, (a, b))

    def quotient(self, a, b):
        if is_zero_constant(a):
            return ZERO
        return self.builder.record(div_p, (a, b))

    def negate(self, a):
        return ZERO if is_zero_constant(a) else self.builder.record(neg_p, (a,))

    def difference(self, a, b):
        if is_zero_constant(b):
            return a
        if is_zero_constant(a):
            return self.negate(b)
        return self.builder.record(sub_p, (a, b))

    def total(self, terms: Sequence):
        kept = [term for term in terms if not is_zero_constant(term)]
        if not kept:
            return ZERO
        if len(kept) == 1:
            return kept[0]
        return self.builder.record(add_p, kept)

    def scaled(self, factor, a):
        """``factor * a`` for an exact number ``factor``."""
        if factor == 1:
            return a
        return self.product(factor, a)

    def convolution(self, a_coefficient, b_coefficient, k: int):
        """``sum_{j=0..k} a[j] * b[k-j]`` (a Cauchy product) from two coefficient getters."""
        return self.total([self.product(a_coefficient(j), b_coefficient(k - j)) for j in range(k + 1)])

    def chain_rule(self, node: Node, k: int):
        """``y[k] = (1/k) sum_i sum_{j=1..k} j u_i[j] p_i[k-j]``: the generic rule."""
        terms = []
        for index, partial in self.partials[node].items():
            operand = node.args[index]
            for j in range(1, k + 1):
                term = self.product(self.weighted(operand, j), self.coefficient(partial, k - j))
                terms.append(term)
        return self.scaled(sympy.Rational(1, k), self.total(terms))


def taylor_series(
    builder: GraphBuilder,
    primal_nodes: Sequence[Node],
    seeds: dict,
    order: int,
    function_name: str,
) -> TaylorSweep:
    """Push the truncated series ``seeds`` (atom -> list of ``order + 1`` atoms) through the graph.

    Returns the sweep; ``sweep.coefficient(atom, k)`` gives any atom's
    coefficient. ``primal_nodes`` must be the builder's nodes (recorded in
    ``builder``), in topological order.
    """
    sweep = TaylorSweep(builder, order, function_name)
    for atom, coefficients in seeds.items():
        if len(coefficients) != order + 1:
            raise ValueError(f"seed of {atom} has {len(coefficients)} coefficients, expected {order + 1}")
        sweep.series[atom] = list(coefficients)
    schedule, depth = _plan(sweep, builder, primal_nodes)

    for k in range(1, order + 1):
        for node in schedule:
            if k > order - depth[node]:
                # Not needed at this order (see _plan); None makes any misuse fail loudly.
                sweep.series[node].append(None)
                continue
            rule = TAYLOR_RULES.get(node.primitive)
            value = rule(sweep, node, k) if rule is not None else sweep.chain_rule(node, k)
            sweep.series[node].append(value)
    # The rules' per-node state is closures over the sweep (a reference cycle that holds
    # the builder and its nodes until the cyclic collector runs, which tracing pauses);
    # every coefficient is recorded now, so the state is no longer needed.
    sweep.auxiliary.clear()
    return sweep


def _plan(sweep: TaylorSweep, builder: GraphBuilder, primal_nodes: Sequence[Node]):
    """The nodes to push series through, in recording order, and how deep each one sits.

    Generic primitives need their partials' series, and recording a partial
    can add nodes whose own partials are new again (gamma' needs digamma,
    digamma' needs polygamma(1, x), ...). A partial of a node at depth ``d``
    sits at depth ``d + 1`` and is needed to order ``n - d - 1`` only, so
    partials are expanded only while ``depth < n``: the expansion stops by
    itself after n levels. When a shallower node reuses a deeper one
    (hash-consing), the deeper one and everything it reads are raised to the
    shallower depth, expanding what then needs expanding.
    """
    order, function_name = sweep.order, sweep.function_name
    nodes = builder.nodes
    first_new = len(nodes)
    start = nodes.index(primal_nodes[0]) if primal_nodes else len(nodes)
    depth = {node: 0 for node in nodes[start:]}
    visited: set = set()
    schedule: list[Node] = []

    def expand(node: Node) -> None:
        """Record the node's partials; the nodes this adds sit one level deeper."""
        before = len(nodes)
        varying = [index for index, arg in enumerate(node.args) if arg in sweep.series]
        sweep.partials[node] = partial_atoms(node, varying, function_name)
        for new_node in nodes[before:]:
            depth.setdefault(new_node, depth[node] + 1)
        raise_depth(sweep.partials[node].values(), depth[node] + 1)
        if len(nodes) - first_new > MAX_PARTIAL_NODES:
            raise DifferentiationError(
                f"Taylor mode for {function_name!r}: the partial derivative rules keep adding "
                f"nodes (past {MAX_PARTIAL_NODES}); a custom primitive's partial probably "
                "calls a new custom primitive at every order. Use nested sd.grad instead"
            )

    def raise_depth(atoms, level: int) -> None:
        """Make ``atoms`` (and all they read) available to order ``n - level``."""
        stack = [(atom, level) for atom in atoms]
        while stack:
            atom, level = stack.pop()
            if depth.get(atom, -1) <= level:
                continue  # an input or constant, or already shallow enough
            depth[atom] = level
            node = builder.node_of(atom)
            stack.extend((arg, level) for arg in node.args)
            if node in sweep.partials:
                stack.extend((partial, level + 1) for partial in sweep.partials[node].values())
            elif node in visited and needs_partials(sweep, node) and level < order:
                expand(node)

    position = start
    while position < len(nodes):
        node = nodes[position]
        position += 1
        if node.primitive.returns_boolean:
            continue  # truth values are flat: a comparison has no Taylor coefficients
        if not any(arg in sweep.series for arg in node.args):
            continue
        sweep.series[node] = [node]
        visited.add(node)
        schedule.append(node)
        if needs_partials(sweep, node) and depth[node] < order:
            expand(node)
    # expand and raise_depth call each other, so each closure holds the other: a
    # cycle over depth, the sweep and the builder's nodes. Broken here, not left
    # to the cyclic collector.
    expand = raise_depth = None  # noqa: F811, F841 - clears the cells the closures share
    return schedule, depth
