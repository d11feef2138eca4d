"""Taylor coefficients as numbers: whole coefficient arrays pushed through the graph.

:mod:`symad.transforms.taylor` records every coefficient of every node as a node of
its own -- a graph of O(n**2) nodes per primitive that prints as formulas and compiles,
but that no one wants at order 1,000. Here the same recurrences run on numbers: each
atom's truncated series is one array ``S[atom]`` of shape ``(n + 1, P)``, its
coefficients ``u[0], ..., u[n]`` at ``P`` points at once, and a coefficient ``u[k]`` is
computed for all points by a few array operations. The graph this reads is the traced
function plus the partial derivatives of its nonlinear primitives (recorded once by the
same planning as the symbolic sweep): it does not grow with ``n``. The work is O(n**2)
per primitive (a Cauchy product's ``sum_j a[j] b[k-j]`` is one dot product per order).

Coefficients are normalised, ``f^(k)(x) / k!``, so they do not overflow where the
derivatives do: those of ``tanh`` at 0.5 fall to about 1e-217 by k = 1,000 and are still
computed to full relative precision.

The recurrences (Griewank & Walther, *Evaluating Derivatives*, 2nd ed., table 13.2),
for ``y`` the node and ``u``, ``a``, ``b`` its operands:

* products ``y[k] = sum_{j=0..k} a[j] b[k-j]``; quotients
  ``y[k] = (a[k] - sum_{j=1..k} b[j] y[k-j]) / b[0]``;
* ``log``, ``sqrt`` and constant powers by their classical recurrences;
* every other primitive by the chain rule on series, through its symbolic partials
  ``p_i`` (nodes of the same graph, whose own series come from the same sweep),
  ``y[k] = (1/k) sum_i sum_{j=1..k} j u_i[j] p_i[k-j]`` -- with partial rules that
  reuse their node's output (exp' = exp, tanh' = sech**2, sech' = -sech tanh) this is
  the textbook recurrence for exp, sin/cos, tanh and the rest.

**Several variables.** The series of ``f`` about ``x`` in ``d`` variables, to total
order ``n``, is the same sweep on *homogeneous parts*: coefficient ``k`` of an atom is
the part of total degree ``k`` (Euler's degree operator ``sum_i x_i d/dx_i`` turns the
one-variable chain rule ``k y[k] = sum_j j u[j] p[k-j]`` into the same identity on
parts), held dehomogenised as a ``(d - 1)``-dimensional array of its coefficients
(entry ``(a_2, ..., a_d)`` multiplies ``x_1**(k - a_2 - ...) x_2**a_2 ...``). Products
of parts are polynomial products, computed directly (no FFT: each coefficient keeps
its own relative accuracy however its neighbours' sizes differ).

Used by :func:`symad.api.taylor` where the symbolic graph would be large (high orders).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import math
import weakref
from collections.abc import Sequence

import mpmath
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from symad import primitives as P
from symad.atoms import constant_value, is_constant
from symad.errors import DifferentiationError
from symad.graph import GraphBuilder, Node, replay
from symad.ir.primitive import RuleTable
from symad.rules.taylor import TAYLOR
from symad.transforms.taylor import plan_sweep

__all__ = ["series_coefficients", "multivariate_coefficients", "SeriesUnsupported"]


#: About how many bytes of coefficient arrays a sweep holds at once (see series_coefficients).
WORKING_SET_BYTES = 64 * 2**20


class SeriesUnsupported(Exception):
    """A primitive with no numeric series rule (the caller takes the symbolic path)."""


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------


class _Planning:
    """What :func:`plan_sweep` reads and writes: which atoms vary, each node's partials."""

    def __init__(self, order: int, function_name: str, varying: Sequence):
        self.order = order
        self.function_name = function_name
        self.series = {atom: None for atom in varying}
        self.partials: dict = {}


class Float64:
    """Numbers as float64 arrays: each primitive's NumPy implementation."""

    dtype = float

    def context(self):
        return contextlib.nullcontext()

    def argument(self, values) -> np.ndarray:
        return np.asarray(values, dtype=float)

    def constant(self, atom, points: int) -> np.ndarray:
        return np.full(points, constant_value(atom))

    def apply(self, node: Node, operands: list):
        params = dict(node.params) if node.params else {}
        return node.primitive.numpy_impl(*operands, **params)

    def log(self, values):
        return np.log(values)

    def factorial(self, k: int):
        return math.factorial(k)


class Mpmath:
    """Numbers as object arrays of ``mpmath.mpf``: a precision backend's arithmetic
    (``symad.compile``'s mpmath backend at some dps), and the lock that guards mpmath's
    process-wide precision while it computes."""

    dtype = object

    def __init__(self, arithmetic, lock):
        self.arithmetic, self.lock = arithmetic, lock

    @contextlib.contextmanager
    def context(self):
        with self.lock, self.arithmetic.precision():
            yield

    def argument(self, values) -> np.ndarray:
        converted = np.frompyfunc(lambda v: self.arithmetic.argument(v, "taylor"), 1, 1)(
            np.asarray(values, dtype=object))
        return np.asarray(converted, dtype=object)

    def constant(self, atom, points: int) -> np.ndarray:
        return np.full(points, self.arithmetic.constant(atom), dtype=object)

    def apply(self, node: Node, operands: list):
        implementation = self.arithmetic.implementation(node.primitive)
        if implementation is None or not node.primitive.elementwise:
            raise SeriesUnsupported(node.primitive.name)
        if node.params:
            implementation = functools.partial(implementation, **dict(node.params))
        return np.frompyfunc(implementation, len(operands), 1)(*operands)

    def log(self, values):
        return np.frompyfunc(mpmath.log, 1, 1)(values)

    def factorial(self, k: int):
        return mpmath.factorial(k)


class NumericSweep:
    """Coefficient arrays ``S[atom]`` of shape ``(order + 1, *box, points)``, filled order by order.

    ``box`` is the shape of one coefficient at one point: ``()`` in one variable, the
    dehomogenised part's ``(order + 1,) * (d - 1)`` in ``d`` variables.
    """

    def __init__(self, order: int, values: dict, points: int, numbers, box: tuple = ()):
        self.order = order
        self.values = values            # atom -> its value at the points (order 0)
        self.points = points
        self.numbers = numbers
        self.dtype = numbers.dtype
        self.box = box
        self.part_shape = box + (points,)
        self.series: dict = {}          # varying atom -> (order + 1, *box, points) array
        self.partials: dict = {}        # node -> {operand index: partial atom}
        self.auxiliary: dict = {}       # node -> a rule's own state (powers, logarithms)
        # j, broadcast over a part: the factor the degree operator brings down
        self.weights = np.arange(order + 1, dtype=float).reshape((-1,) + (1,) * len(self.part_shape))

    def value(self, atom) -> np.ndarray:
        """``atom``'s value at the points (the constant term of its series)."""
        value = self.values.get(atom)
        if value is None:  # an exact constant no node reads (an output such as 3.0)
            value = self.values[atom] = self.numbers.constant(atom, self.points)
        return value

    def constant_part(self, value) -> np.ndarray:
        """A part of degree 0: ``value`` at the box's origin, zeros elsewhere."""
        part = np.zeros(self.part_shape, dtype=self.dtype)
        part[(0,) * len(self.box)] = value
        return part

    def new_series(self, value) -> np.ndarray:
        series = np.zeros((self.order + 1,) + self.part_shape, dtype=self.dtype)
        series[0] = self.constant_part(value)
        return series

    def coefficients(self, atom, k: int) -> np.ndarray:
        """``atom[0..k]`` as a ``(k + 1, *box, points)`` array (zeros past order 0 if flat)."""
        series = self.series.get(atom)
        if series is not None:
            return series[:k + 1]
        flat = np.zeros((k + 1,) + self.part_shape, dtype=self.dtype)
        flat[0] = self.constant_part(self.value(atom))
        return flat

    def coefficient(self, atom, k: int) -> np.ndarray:
        series = self.series.get(atom)
        if series is not None:
            return series[k]
        if k == 0:
            return self.constant_part(self.value(atom))
        return np.zeros(self.part_shape, dtype=self.dtype)

    def is_varying(self, atom) -> bool:
        return atom in self.series


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``sum_j a[j] * b[j]`` over the leading axis, for every point; parts multiply as polynomials.

    Arrays are ``(m, *box, points)``. With a box (several variables) ``a[j] * b[j]`` is
    the product of two dehomogenised parts, ``sum_t a[j, t] b[j, s - t]``, truncated to
    the box (a product of degree at most the order never leaves it): written as one
    ``einsum`` over sliding windows of ``b``, no copy.
    """
    rank = a.ndim - 2
    if rank == 0:
        return np.einsum("j...,j...->...", a, b) if a.dtype != object else (a * b).sum(axis=0)
    size = a.shape[1]
    padded = np.pad(b, [(0, 0)] + [(size - 1, 0)] * rank + [(0, 0)])
    windows = sliding_window_view(padded, (size,) * rank, axis=tuple(range(1, rank + 1)))
    # windows[j, s, p, w] = padded[j, s + w, p]; w = size - 1 - t gives b[j, s - t, p]
    flipped = windows[(...,) + (slice(None, None, -1),) * rank]
    t, s = "tuvw"[:rank], "stuvw".upper()[:rank]
    return np.einsum(f"j{t}p,j{s}p{t}->{s}p", a, flipped)


def _cauchy(sweep: NumericSweep, a, b, k: int, start: int = 0) -> np.ndarray:
    """``sum_{j=start..k-start} a[j] b[k-j]`` for atoms (or coefficient arrays) ``a``, ``b``."""
    left = a[:k + 1] if isinstance(a, np.ndarray) else sweep.coefficients(a, k)
    right = b[:k + 1] if isinstance(b, np.ndarray) else sweep.coefficients(b, k)
    return _dot(left[start:k + 1 - start], right[k - start::-1][:k + 1 - 2 * start])


def _chain(sweep: NumericSweep, u, p, k: int) -> np.ndarray:
    """``(1/k) sum_{j=1..k} j u[j] p[k-j]``: the series of y with y' = p u'."""
    left = u[:k + 1] if isinstance(u, np.ndarray) else sweep.coefficients(u, k)
    right = p[:k + 1] if isinstance(p, np.ndarray) else sweep.coefficients(p, k)
    return _dot(sweep.weights[1:k + 1] * left[1:], right[k - 1::-1]) / k


# -- rules: rule(sweep, node, k) -> y[k] at every point ---------------------------------


def _add(sweep, node, k):
    return sum(sweep.coefficient(arg, k) for arg in node.args)


def _subtract(sweep, node, k):
    a, b = node.args
    return sweep.coefficient(a, k) - sweep.coefficient(b, k)


def _negative(sweep, node, k):
    return -sweep.coefficient(node.args[0], k)


def _flat(sweep, node, k):
    return np.zeros(sweep.part_shape, dtype=sweep.dtype)


def _select(sweep, node, k):
    condition, if_true, if_false = node.args
    return np.where(sweep.values[condition], sweep.coefficient(if_true, k),
                    sweep.coefficient(if_false, k))


def _multiply(sweep, node, k):
    a, b = node.args
    return _cauchy(sweep, a, b, k)


def _divide(sweep, node, k):
    a, b = node.args
    if not sweep.is_varying(b):
        return sweep.coefficient(a, k) / sweep.values[b]
    correction = _dot(sweep.series[b][1:k + 1], sweep.series[node][k - 1::-1])
    return (sweep.coefficient(a, k) - correction) / sweep.values[b]


def _log(sweep, node, k):
    # y = log(u):  y[k] = (u[k] - (1/k) sum_{j=1..k-1} j y[j] u[k-j]) / u[0]
    (u,) = node.args
    y, series_u = sweep.series[node], sweep.coefficients(u, k)
    inner = _dot(sweep.weights[1:k] * y[1:k], series_u[k - 1:0:-1]) / k if k > 1 else 0
    return (series_u[k] - inner) / sweep.values[u]


def _sqrt(sweep, node, k):
    # y = sqrt(u):  y[k] = (u[k] - sum_{j=1..k-1} y[j] y[k-j]) / (2 y[0])
    (u,) = node.args
    square_part = _cauchy(sweep, node, node, k, start=1) if k > 1 else 0
    return (sweep.coefficient(u, k) - square_part) / (2 * sweep.values[node])


def _generic(sweep, node, k):
    return sum(_chain(sweep, node.args[i], partial, k) for i, partial in sweep.partials[node].items())


def _power(sweep, node, k):
    state = sweep.auxiliary.get(node)
    if state is None:
        state = sweep.auxiliary[node] = _PowerSeries(sweep, node)
    return state(k)


class _PowerSeries:
    """``y = a ** b``, one coefficient per call, in increasing order."""

    def __init__(self, sweep: NumericSweep, node: Node):
        self.sweep, self.node = sweep, node
        base, exponent = node.args
        order = sweep.order
        self.y = sweep.series[node]
        self.base = sweep.coefficients(base, order) if sweep.is_varying(base) else None
        if sweep.is_varying(exponent):
            # y = exp(w), w = b log a:  y[k] = (1/k) sum_{j=1..k} j w[j] y[k-j]
            self.kind = "exponential"
            self.log = sweep.new_series(sweep.numbers.log(sweep.value(base)))
            self.w = np.zeros_like(self.log)
            self.base_value = sweep.value(base)
            self.exponent = sweep.coefficients(exponent, order)
            return
        self.r = sweep.value(exponent)[0] if is_constant(exponent) else sweep.values[exponent]
        self.kind = "constant"
        self.base_value = sweep.value(base)
        if np.ndim(self.r) == 0 and float(self.r).is_integer() and 0 < abs(self.r) <= 2**20:
            # Integer powers by repeated squaring of series (Cauchy products): no division by
            # u[0], and no cancellation -- the classical recurrence below lost 5 digits on
            # the 24th coefficient of cos(x)**2.
            self.kind = "integer"
            self.steps = _binary_powering(abs(int(self.r)))
            self.powers = {1: self.base}
            for _, _, target in self.steps:
                self.powers[target] = np.zeros_like(self.base)

    def __call__(self, k: int):
        sweep, base = self.sweep, self.base
        if self.kind == "exponential":
            if base is not None:  # log(a)[k] = (a[k] - (1/k) sum_{j=1..k-1} j log[j] a[k-j]) / a[0]
                inner = _dot(sweep.weights[1:k] * self.log[1:k], base[k - 1:0:-1]) / k if k > 1 else 0
                self.log[k] = (base[k] - inner) / self.base_value
            self.w[k] = _cauchy(sweep, self.exponent, self.log, k)
            return _chain(sweep, self.w, self.y, k)
        if self.kind == "integer":
            if k == 1:  # order 0 of every power
                for left, right, target in self.steps:
                    self.powers[target][0] = self.powers[left][0] * self.powers[right][0]
            for left, right, target in self.steps:
                self.powers[target][k] = _cauchy(sweep, self.powers[left], self.powers[right], k)
            power = self.powers[abs(int(self.r))]
            if self.r >= 0:
                return power[k]
            # y = 1 / v:  y[k] = -(sum_{j=1..k} v[j] y[k-j]) / v[0]
            return -_dot(power[1:k + 1], self.y[k - 1::-1]) / self.base_value ** abs(int(self.r))
        # u**r:  y[k] = (1 / (k u[0])) sum_{j=0..k-1} (r (k - j) - j) u[k-j] y[j]
        r = self.r
        j = sweep.weights[:k]
        terms = _dot((r * (k - j) - j) * self.y[:k], base[k:0:-1])
        with np.errstate(divide="ignore", invalid="ignore"):
            value = terms / (k * self.base_value)
        at_zero = self.base_value == 0
        if np.any(at_zero):  # u**r, r not an integer, at u[0] = 0: 0 below order r, inf above
            value = np.where(at_zero, 0.0 if k < r else np.inf, value)
        return value


def _binary_powering(exponent: int) -> list:
    """Steps ``(a, b, a + b)``: the powers to multiply, in order, to reach ``u**exponent``."""
    steps, result, square = [], None, 1
    while exponent:
        if exponent & 1:
            if result is None:
                result = square
            else:
                steps.append((result, square, result + square))
                result += square
        exponent >>= 1
        if exponent:
            steps.append((square, square, 2 * square))
            square *= 2
    return steps


#: The recurrences on coefficient arrays. A primitive missing here that Taylor mode's
#: symbolic table (:data:`symad.rules.taylor.TAYLOR`) has no rule for either goes through
#: the generic chain rule on series (:func:`_generic`), as there; the whole-array
#: primitives Taylor mode has rules for are computed on the per-element version.
SERIES = RuleTable("series", default_reason=lambda primitive: (
    "the chain rule on series through its partials"
    if primitive.has_partials and primitive not in TAYLOR else
    "a whole-array primitive: computed on the function's per-element version"
    if not primitive.elementwise else None))
SERIES.update({
    P.add_p: _add,
    P.sub_p: _subtract,
    P.neg_p: _negative,
    P.mul_p: _multiply,
    P.div_p: _divide,
    P.pow_p: _power,
    P.log_p: _log,
    P.sqrt_p: _sqrt,
    P.select_p: _select,
    P.sign_p: _flat,
    P.stop_gradient_p: _flat,
})


def _rule(node: Node):
    rule = SERIES.get(node.primitive)
    if rule is not None:
        return rule
    if node.primitive in TAYLOR or not node.primitive.elementwise:
        raise SeriesUnsupported(node.primitive.name)
    return _generic


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


def _evaluate(nodes: Sequence[Node], inputs: dict, points: int, numbers) -> dict:
    """Every atom's value at the points (order 0): inputs, constants and the nodes in order."""
    values = dict(inputs)
    with np.errstate(all="ignore"):
        for node in nodes:
            for arg in node.args:
                if arg not in values:
                    if not is_constant(arg):
                        raise DifferentiationError(f"taylor: the value of {arg} is unknown")
                    values[arg] = numbers.constant(arg, points)
            value = numbers.apply(node, [values[arg] for arg in node.args])
            values[node] = np.broadcast_to(np.asarray(value, dtype=numbers.dtype
                                                      if numbers.dtype is object else None), (points,))
    return values


def series_coefficients(function, order: int, positions: Sequence[int], args: Sequence,
                        steps: Sequence = None, numbers=None) -> tuple[list, tuple]:
    """Taylor coefficients of orders ``0..order`` of a traced scalar ``function`` at ``args``.

    The series is that of ``t -> f(x + t * steps)`` (``steps`` default: 1 for every
    argument at ``positions``); ``args`` and ``steps`` are broadcast against each other.
    Returns ``(coefficients, batch_shape)`` where ``coefficients[i]`` is the
    ``(order + 1, points)`` array of the function's ``i``-th output atom. ``numbers``:
    :class:`Float64` (default) or :class:`Mpmath`. Raises
    :class:`SeriesUnsupported` for a primitive without a numeric rule.

    >>> import symad as sd, numpy as np
    >>> F = sd.trace(np.exp, 0.0)
    >>> (series,), shape = series_coefficients(F, 4, (0,), (np.array([0.0, 1.0]),))
    >>> np.round(series[:, 0] * [1, 1, 2, 6, 24], 12).tolist(), shape
    ([1.0, 1.0, 1.0, 1.0, 1.0], (2,))
    """
    numbers = numbers or Float64()
    steps = [1.0] * len(positions) if steps is None else list(steps)
    with numbers.context():
        arrays = np.broadcast_arrays(*[numbers.argument(a) for a in args],
                                     *[numbers.argument(s) for s in steps])
        batch = arrays[0].shape
        flat = [a.reshape(-1) for a in arrays]
        arg_values, step_values = flat[:len(args)], flat[len(args):]
        # Points in blocks: each atom's series is (order + 1) numbers per point, so a block
        # keeps the working set near WORKING_SET_BYTES whatever the batch (10**6 points at
        # order 60 would otherwise hold gigabytes); only the outputs are whole.
        count = arrays[0].size
        per_point = 8 * (order + 1) * (len(_plan_of(function, order, positions).rules) + len(positions) + 1)
        block = builtins.max(1, WORKING_SET_BYTES // per_point)
        results = None
        for start in range(0, builtins.max(count, 1), block):
            chunk = slice(start, start + block)
            sweep = _sweep(function, order, positions, [a[chunk] for a in arg_values],
                           lambda sweep, i, chunk=chunk: step_values[i][chunk], (), numbers)
            if results is None:
                if count <= block:
                    return sweep.results, batch
                results = [np.empty((order + 1, count), dtype=r.dtype) for r in sweep.results]
            for result, part in zip(results, sweep.results):
                result[:, chunk] = part
    return results, batch


def multivariate_coefficients(function, order: int, positions: Sequence[int], args: Sequence):
    """The Taylor map of ``function`` in the arguments at ``positions``, to total order ``order``.

    Returns ``({multi-index: [coefficient at every point, per output atom]}, batch_shape)``
    for every multi-index of total order at most ``order`` (see the module docstring).

    >>> import symad as sd, numpy as np
    >>> F = sd.trace(lambda x, y: np.exp(x) * np.sin(y), 0.0, 0.0)
    >>> series, _ = multivariate_coefficients(F, 2, (0, 1), (0.0, 0.0))
    >>> {k: float(v[0][0]) for k, v in series.items() if v[0][0] != 0}
    {(0, 1): 1.0, (1, 1): 1.0}
    """
    d = len(positions)
    arrays = np.broadcast_arrays(*[np.asarray(a, dtype=float) for a in args])
    batch = arrays[0].shape
    box = (order + 1,) * (d - 1)

    def seed_part(sweep, i):
        # x_1 is the part's (0, ..., 0) entry (x_1**1); x_i, i > 1, the entry e_(i-1)
        part = np.zeros(sweep.part_shape, dtype=sweep.dtype)
        part[tuple(int(axis == i - 1) for axis in range(d - 1))] = 1
        return part

    sweep = _sweep(function, order, positions, [a.reshape(-1) for a in arrays], seed_part, box,
                   Float64())
    result: dict = {}
    for total in range(order + 1):
        for rest in _indices_up_to(d - 1, total):
            result[(total - sum(rest),) + rest] = [series[(total,) + rest] for series in sweep.results]
    return result, batch


class _Plan:
    """What a sweep needs besides numbers: the graph with its partials, and the schedule."""

    def __init__(self, function, order: int, positions):
        self.symbols = [leaf.reshape(-1)[0] if isinstance(leaf, np.ndarray) else leaf
                        for leaf in function.in_symbols]
        builder = GraphBuilder(f"series({function.name})")
        for symbol in self.symbols:
            builder.add_input(symbol)
        with builder.active():
            env = replay(function.graph, builder, {})
            primal_nodes = list(builder.nodes)
            self.outputs = [env.get(atom, atom) for atom in function.graph.outputs]
            planning = _Planning(order, function.name, [self.symbols[p] for p in positions])
            schedule, self.depth = plan_sweep(planning, builder, primal_nodes)
        self.nodes = list(builder.nodes)
        self.partials = planning.partials
        self.rules = [(node, _rule(node)) for node in schedule]


#: Plans by traced function, then by (order, positions): a function called again at new
#: points is only evaluated (recording the partials is most of a small call's time).
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plan_of(function, order: int, positions) -> _Plan:
    plans = _PLANS.setdefault(function, {})
    key = (order, tuple(positions))
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _Plan(function, order, positions)
    return plan


def _sweep(function, order: int, positions, arg_values, seed_part, box, numbers) -> NumericSweep:
    """Evaluate order 0 of the planned graph, then every order up to ``order``."""
    points = max(1, len(arg_values[0]) if arg_values else 1)
    plan = _plan_of(function, order, positions)
    symbols, depth = plan.symbols, plan.depth
    values = _evaluate(plan.nodes, dict(zip(symbols, arg_values)), points, numbers)
    sweep = NumericSweep(order, values, points, numbers, box)
    sweep.partials = plan.partials
    for i, position in enumerate(positions):
        series = sweep.series[symbols[position]] = sweep.new_series(values[symbols[position]])
        if order:
            series[1] = seed_part(sweep, i)
    for node, _ in plan.rules:
        sweep.series[node] = sweep.new_series(values[node])
    with np.errstate(all="ignore"):
        for k in range(1, order + 1):
            for node, rule in plan.rules:
                if k <= order - depth[node]:
                    sweep.series[node][k] = rule(sweep, node, k)
    sweep.results = [sweep.coefficients(atom, order) for atom in plan.outputs]
    # A power's state refers back to the sweep: a reference cycle holding every series of
    # the block until the cyclic collector runs (10**6 points in blocks reached 4 GB).
    sweep.auxiliary.clear()
    return sweep


def _indices_up_to(count: int, total: int):
    """Every tuple of ``count`` non-negative ints summing to at most ``total``."""
    if count == 0:
        yield ()
        return
    for first in range(total + 1):
        for rest in _indices_up_to(count - 1, total - first):
            yield (first,) + rest


# ---------------------------------------------------------------------------
# What sd.taylor's call returns
# ---------------------------------------------------------------------------

#: From this order on a Taylor *call* computes its coefficients here, as numbers, instead
#: of building and compiling a graph with one node per coefficient (O(n**2) nodes per
#: primitive; past order 170 only numbers are computed). Measured 2026-11-28 on the
#: project's 2-core machine, exp(sin x)/(1 + x**2): the graph's first call takes 0.19 s at
#: order 48 and 0.45 s at 100 (numbers: 0.007 s and 0.005 s), but once compiled it
#: evaluates 10,000 points 3-4x faster (46 ms against 171 ms at 48, 150 against 510 at 100):
#: below 48 the graph's build is cheap enough that its speed on batches wins.
NUMERIC_FROM_ORDER = 48
#: Two variables from this many coefficients on (order 30). A part of a multivariate series
#: is held as a dense (d - 1)-dimensional array and multiplied directly: cheap for d = 2
#: (order 100, 5,151 coefficients, in 0.7 s), costly for more variables, whose series keep
#: the graph (the 4-variable map to order 10 takes 0.4 s there).
NUMERIC_FROM_COEFFICIENTS = 496


def wants_numbers(order: int, dimension: int | None) -> bool:
    """True if a Taylor call of ``order`` (in ``dimension`` variables, None: one) is computed here."""
    if dimension is None:
        return order >= NUMERIC_FROM_ORDER
    return dimension <= 2 and math.comb(order + dimension, dimension) >= NUMERIC_FROM_COEFFICIENTS


def _structured(function, per_atom: Sequence[np.ndarray], batch: tuple):
    """The outputs' values in the structure of ``function``'s outputs, batch axes leading."""
    from symad.pytree import tree_unflatten

    leaves, start = [], 0
    for shape in function.out_shapes:
        count = math.prod(shape)
        if count == 1:  # a scalar output: a view of its coefficient row, not a copy
            values = np.asarray(per_atom[start])[..., None]
        else:
            values = np.stack(per_atom[start:start + count], axis=-1) if count else np.zeros(batch + (0,))
        start += count
        value = values.reshape(batch + tuple(shape))
        leaves.append(value[()] if value.ndim == 0 else value)
    return tree_unflatten(function.out_treedef, leaves)


def _factorial_scaled(coefficients: np.ndarray, orders, what: str) -> np.ndarray:
    """``coefficients * orders!`` (per multi-index: the product of factorials), refusing overflow."""
    log_factorial = sum(math.lgamma(k + 1) for k in orders)
    with np.errstate(over="ignore", invalid="ignore"):
        values = coefficients * math.exp(min(log_factorial, 709.0))
        if log_factorial > 709.0:
            values = np.sign(coefficients) * np.exp(np.log(np.abs(coefficients)) + log_factorial)
    overflow = ~np.isfinite(values) & np.isfinite(coefficients)
    if np.any(overflow):
        index = np.flatnonzero(overflow.reshape(-1))[0]
        coefficient = float(coefficients.reshape(-1)[index])
        exponent = math.log10(abs(coefficient)) + log_factorial / math.log(10)
        value = f"{'-' if coefficient < 0 else ''}{10 ** (exponent % 1):.1f}e{math.floor(exponent)}"
        raise DifferentiationError(
            f"{what}: the derivative of order {tuple(orders) if len(orders) > 1 else orders[0]} "
            f"is about {value}, beyond float64's range "
            "(1.8e308); ask for the Taylor coefficients (derivatives=False), which stay in range")
    return values


def taylor_call(function, *, order: int, positions: Sequence[int], args: Sequence,
                multivariate: bool, derivatives: bool, steps=None, what: str = "taylor",
                numbers=None, as_float64: bool = False):
    """What ``sd.taylor(f, order, ...)(*args)`` returns, computed by this module.

    ``function`` is the traced primal (scalar arguments); ``positions`` the arguments the
    series is in. Returns the tuple (one variable or a direction) or dict (several
    variables) of coefficients, or derivatives with ``derivatives=True``. ``numbers``:
    :class:`Float64` (default) or :class:`Mpmath` (one variable or a direction);
    ``as_float64``: computed in ``numbers`` (mpmath, whose exponent range holds any k!),
    returned as float64, refusing a value beyond float64's range by name.
    """
    if multivariate:
        from symad.transforms.taylor import Multivariate

        series, batch = multivariate_coefficients(function, order, positions, args)
        keys = Multivariate.total_order(len(positions), order).keys
        # keys sorted, as the graph path's dict comes out of tree_unflatten
        return {key: _structured(function, [_factorial_scaled(v, key, what) if derivatives else v
                                            for v in series[key]], batch) for key in sorted(keys)}
    numbers = numbers or Float64()
    coefficients, batch = series_coefficients(function, order, positions, args, steps, numbers)
    if numbers.dtype is object:
        with numbers.context():
            values = [[c[k] * numbers.factorial(k) if derivatives else c[k] for c in coefficients]
                      for k in range(order + 1)]
            if as_float64:
                values = [[_float64(v, k, what) for v in entries] for k, entries in enumerate(values)]
        return tuple(_structured(function, entries, batch) for entries in values)
    return tuple(_structured(function, [_factorial_scaled(c[k], (k,), what) if derivatives else c[k]
                                        for c in coefficients], batch)
                 for k in range(order + 1))


def _float64(values: np.ndarray, order: int, what: str) -> np.ndarray:
    """mpmath numbers as float64, refusing the first one beyond float64's range by name."""
    for value in values:
        if mpmath.isfinite(value) and abs(value) > np.finfo(float).max:
            raise DifferentiationError(
                f"{what}: the derivative of order {order} is about {mpmath.nstr(value, 2)}, beyond "
                "float64's range (1.8e308); ask for the Taylor coefficients (derivatives=False), "
                "which stay in range, or pass dps= for mpmath numbers")
    return np.array([float(value) for value in values], dtype=float)
