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

Several variables: the coefficients are indexed by multi-indices ``k = (k_1,
..., k_d)`` (``u[k]`` is the coefficient of ``dx_1**k_1 ... dx_d**k_d``), and
every recurrence is the one-variable recurrence read on them: a Cauchy
product sums over the splits ``k = l + m`` with ``l <= k`` componentwise, and
the derivative that the one-variable rules take (``y' = sum_i p_i u_i'``)
becomes the partial derivative along one axis ``a`` with ``k_a > 0``,

    y[k] = (1/k_a) * sum_i sum_{l <= k, l_a >= 1} l_a * u_i[l] * p_i[k - l],

the way TaylorSeries.jl and GTPSA propagate truncated multivariate series.
The axis is the one with the smallest positive ``k_a``: the sum skips every
split with ``l_a = 0``, a fraction ``1/(k_a + 1)`` of them. Which
coefficients are computed is a :class:`Multivariate` index set closed
downwards (every ``l <= k`` of a key is a key): all total orders up to ``n``
for a Taylor map, the box ``l <= (a, b, ...)`` for one mixed partial. With
one variable the index set is :class:`Univariate` and every rule records
exactly what it recorded before multi-indices existed.

Why order by order: ``y[k]`` needs ``p`` at total orders below ``|k|``, and
a partial may depend on ``y`` itself (exp' = exp), so all nodes get the
coefficients of total order ``g`` before any gets ``g + 1``. Within one order
the builder's recording order is a valid schedule: each node's operands were
recorded before it. Nothing here recurses along the graph, so a 10**5-deep
chain is fine.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import sympy

from symad.errors import DifferentiationError
from symad.graph import GraphBuilder, Node, is_zero_constant
from symad.primitives import add_p, div_p, mul_p, neg_p, sub_p
from symad.rules.taylor import TAYLOR, needs_partials
from symad.transforms.terms import partial_atoms

__all__ = ["TaylorSweep", "taylor_series", "Univariate", "Multivariate"]

ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)

#: How many nodes the partial rules of generic primitives may add before the
#: sweep gives up: a custom primitive whose partial is a new custom node every
#: time would otherwise expand without end.
MAX_PARTIAL_NODES = 200_000


# ---------------------------------------------------------------------------
# Which coefficients a sweep computes
# ---------------------------------------------------------------------------


class Univariate:
    """The coefficients ``0, 1, ..., order`` of a series in one variable; keys are ints.

    >>> index = Univariate(3)
    >>> index.keys, index.splits(2), index.axis(2), index.weight(2, 0)
    ([0, 1, 2, 3], [(0, 2), (1, 1), (2, 0)], 0, 2)
    """

    zero = 0
    positions = None  # a key is its own position in a series

    def __init__(self, order: int):
        self.order = order
        self.keys = list(range(order + 1))

    def grade(self, k: int) -> int:
        """The total order of key ``k``."""
        return k

    def keys_of_grade(self, grade: int) -> tuple:
        return (grade,)

    def splits(self, k: int) -> list:
        """Every ``(l, k - l)``, ``l`` ascending: the terms of a Cauchy product."""
        return [(j, k - j) for j in range(k + 1)]

    def axis(self, k: int) -> int:
        """The axis along which recurrences at ``k`` differentiate (the only one)."""
        return 0

    def weight(self, l: int, axis: int) -> int:
        """``l``'s exponent along ``axis``: the factor differentiation brings down."""
        return l


class Multivariate:
    """A set of multi-indices closed downwards, ordered by total order: the keys of a sweep.

    Build one with :meth:`total_order` (every ``k`` with ``|k| <= n``, a Taylor
    map) or :meth:`box` (every ``k <= orders``, what one mixed partial needs).

    >>> index = Multivariate.total_order(2, 2)
    >>> index.keys
    [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0)]
    >>> index.splits((1, 1))
    [((0, 0), (1, 1)), ((0, 1), (1, 0)), ((1, 0), (0, 1)), ((1, 1), (0, 0))]
    >>> Multivariate.box((2, 1)).axis((2, 1)), Multivariate.box((2, 1)).weight((1, 1), 1)
    (1, 1)
    """

    def __init__(self, keys: Iterable[tuple[int, ...]]):
        keys = sorted(set(keys), key=lambda k: (sum(k), k))
        self.dimension = len(keys[0])
        self.zero = (0,) * self.dimension
        self.keys = keys
        self.order = max(map(sum, keys))
        self.positions = {k: position for position, k in enumerate(keys)}
        self._grades: list[list] = [[] for _ in range(self.order + 1)]
        for k in keys:
            self._grades[sum(k)].append(k)
        self._splits: dict = {}
        missing = [k for k in keys for l in self._lower_neighbours(k) if l not in self.positions]
        if missing or self.zero not in self.positions:
            raise ValueError(f"multi-indices not closed downwards (missing below {missing[:1]})")

    @classmethod
    def total_order(cls, dimension: int, order: int) -> Multivariate:
        """Every multi-index of ``dimension`` entries with total order at most ``order``."""
        return cls(k for k in itertools.product(range(order + 1), repeat=dimension) if sum(k) <= order)

    @classmethod
    def box(cls, orders: Sequence[int]) -> Multivariate:
        """Every multi-index ``k <= orders`` componentwise."""
        return cls(itertools.product(*(range(order + 1) for order in orders)))

    def _lower_neighbours(self, k: tuple) -> list:
        return [k[:i] + (k[i] - 1,) + k[i + 1:] for i in range(len(k)) if k[i]]

    def grade(self, k: tuple) -> int:
        return sum(k)

    def keys_of_grade(self, grade: int) -> list:
        return self._grades[grade]

    def splits(self, k: tuple) -> list:
        """Every ``(l, k - l)`` with ``l <= k`` componentwise (all keys: the set is closed downwards)."""
        found = self._splits.get(k)
        if found is None:
            found = self._splits[k] = [
                (l, tuple(a - b for a, b in zip(k, l)))
                for l in itertools.product(*(range(entry + 1) for entry in k))]
        return found

    def axis(self, k: tuple) -> int:
        """The axis with the smallest positive entry of ``k`` (the first of equals)."""
        return min((entry, axis) for axis, entry in enumerate(k) if entry)[1]

    def weight(self, l: tuple, axis: int) -> int:
        return l[axis]


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------


class TaylorSweep:
    """The state of one Taylor-mode sweep: the series of every dependent atom.

    Rules (see :mod:`symad.rules.taylor`) read coefficients with
    :meth:`coefficient` and record new ones with the small arithmetic helpers
    below, which skip structural zeros without recording anything. Keys are
    those of ``index`` (:class:`Univariate` or :class:`Multivariate`).
    """

    def __init__(self, builder: GraphBuilder, index, function_name: str):
        self.builder = builder
        self.index = index
        self.zero = index.zero
        self._positions = index.positions
        #: The highest total order computed.
        self.order = index.order
        self.function_name = function_name
        self.series: dict = {}
        #: Per node: the partial atoms the generic rule uses ({index: atom}).
        self.partials: dict = {}
        #: Per node: auxiliary series a rule keeps (powers, logarithms).
        self.auxiliary: dict = {}
        self._weighted: dict = {}

    # -- reading coefficients ---------------------------------------------------

    def coefficient(self, atom, k):
        """``atom[k]``: its coefficient at key ``k`` (a constant or independent atom is flat)."""
        series = self.series.get(atom)
        if series is None:
            return atom if k == self.zero else ZERO
        return series[k] if self._positions is None else series[self._positions[k]]

    def is_varying(self, atom) -> bool:
        """True if ``atom`` depends on the seeded inputs (its higher coefficients may be non-zero)."""
        return atom in self.series

    def weighted(self, atom, l, axis: int = 0):
        """``l_axis * atom[l]``, recorded once and reused by every order that needs it."""
        key = (atom, l, axis)
        value = self._weighted.get(key)
        if value is None:
            weight = self.index.weight(l, axis)
            value = self._weighted[key] = self.product(sympy.Integer(weight), self.coefficient(atom, l))
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

    def convolution(self, a_coefficient, b_coefficient, k):
        """``sum_{l <= k} a[l] * b[k-l]`` (a Cauchy product) from two coefficient getters."""
        return self.total([self.product(a_coefficient(l), b_coefficient(rest))
                           for l, rest in self.index.splits(k)])

    def chain_rule(self, node: Node, k):
        """``y[k] = (1/k_a) sum_i sum_{l <= k} l_a u_i[l] p_i[k-l]``: the generic rule."""
        index = self.index
        axis = index.axis(k)
        splits = index.splits(k)
        terms = []
        for operand_index, partial in self.partials[node].items():
            operand = node.args[operand_index]
            for l, rest in splits:
                if index.weight(l, axis) == 0 or is_zero_constant(self.coefficient(operand, l)):
                    continue  # l_a = 0, or a structural zero: no term
                terms.append(self.product(self.weighted(operand, l, axis), self.coefficient(partial, rest)))
        return self.scaled(sympy.Rational(1, index.weight(k, axis)), self.total(terms))


def taylor_series(
    builder: GraphBuilder,
    primal_nodes: Sequence[Node],
    seeds: dict,
    order: int | Univariate | Multivariate,
    function_name: str,
) -> TaylorSweep:
    """Push the truncated series ``seeds`` (atom -> list of atoms, one per key) through the graph.

    ``order`` is the highest order of a series in one variable, or the index set
    of a multivariate one (:class:`Multivariate`); a seed lists its coefficients
    in the order of the index's ``keys``. Returns the sweep;
    ``sweep.coefficient(atom, k)`` gives any atom's coefficient. ``primal_nodes``
    must be the builder's nodes (recorded in ``builder``), in topological order.
    """
    index = Univariate(order) if isinstance(order, int) else order
    sweep = TaylorSweep(builder, index, function_name)
    for atom, coefficients in seeds.items():
        if len(coefficients) != len(index.keys):
            raise ValueError(f"seed of {atom} has {len(coefficients)} coefficients, "
                             f"expected {len(index.keys)}")
        sweep.series[atom] = list(coefficients)
    schedule, depth = plan_sweep(sweep, builder, primal_nodes)

    highest = index.order
    for grade in range(1, highest + 1):
        keys = index.keys_of_grade(grade)
        for node in schedule:
            series = sweep.series[node]
            if grade > highest - depth[node]:
                # Not needed at this order (see plan_sweep); None makes any misuse fail loudly.
                series.extend([None] * len(keys))
                continue
            rule = TAYLOR.get(node.primitive)
            for k in keys:
                series.append(rule(sweep, node, k) if rule is not None else sweep.chain_rule(node, k))
    # The rules' per-node state is closures over the sweep (a reference cycle that holds
    # the builder and its nodes until the cyclic collector runs, which tracing pauses);
    # every coefficient is recorded now, so the state is no longer needed.
    sweep.auxiliary.clear()
    return sweep


def plan_sweep(sweep: TaylorSweep, builder: GraphBuilder, primal_nodes: Sequence[Node]):
    """The nodes to push series through, in recording order, and how deep each one sits.

    Generic primitives need their partials' series, and recording a partial
    can add nodes whose own partials are new again (gamma' needs digamma,
    digamma' needs polygamma(1, x), ...). A partial of a node at depth ``d``
    sits at depth ``d + 1`` and is needed to order ``n - d - 1`` only, so
    partials are expanded only while ``depth < n``: the expansion stops by
    itself after n levels (with several variables n is the highest total order,
    and a node at depth ``d`` gets the coefficients of total order ``n - d`` and
    below). When a shallower node reuses a deeper one
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
        refused = TAYLOR.reasons.get(node.primitive)
        if refused is not None:  # a primitive Taylor mode does not go through (a loop)
            raise DifferentiationError(f"Taylor mode (sd.derivative, sd.taylor) for "
                                       f"{function_name!r}: {node.primitive.name}: {refused}")
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
