"""The pieces index-notation formulas are built from: reductions, tidied index expressions,
index arrays, named constants (:mod:`symad.export.index_notation` puts them together).

>>> i = index_symbol("i")
>>> tidy_index(sympy.floor(i / 1), {i: 4})
i
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import cache

import numpy as np
import sympy
from sympy.concrete.expr_with_limits import ExprWithLimits, _common_new
from sympy.tensor.indexed import Indexed

__all__ = ["INDEX_NAMES", "SMALL_CONSTANT", "Sum", "Maximum", "Minimum", "IndexedReduction",
           "IndexArray", "PrintedElement", "index_symbol", "tidy_index", "tidy_condition",
           "broadcast_index", "delta_of", "sparse_constant", "name_all", "rational_constant"]

#: The letters of index symbols, in the order they are given out. ``t`` (temporaries),
#: ``c`` and ``p`` (constants), ``f``/``o`` and ``x, y, z`` (usual input names) are left out.
INDEX_NAMES = ("i", "j", "k", "l", "m", "n", "q", "r", "s", "u", "v", "w", "a", "b", "d", "e",
               "g", "h")

#: Constant arrays of at most this many elements (and two axes) are written out in LaTeX.
SMALL_CONSTANT = 12

ZERO = sympy.S.Zero


@cache
def index_symbol(name: str) -> sympy.Symbol:
    """The index symbol called ``name``: an integer, non-negative SymPy symbol.

    >>> i = index_symbol("i")
    >>> i.is_integer, i.is_nonnegative, i == sympy.Symbol("i")
    (True, True, False)
    """
    return sympy.Symbol(name, integer=True, nonnegative=True)


# ---------------------------------------------------------------------------
# Reductions SymPy has no object for
# ---------------------------------------------------------------------------


def _new_without_folds_through_inner_sums(cls, function, *limits, **assumptions):
    """A sum (or max, min) over ``limits``, built as SymPy builds one, minus one step.

    SymPy's constructor (``_common_new``) folds every ``Piecewise`` of the summand
    up to its top level (``piecewise_fold``), and the fold does not stop at the
    sums nested inside: ``Sum(Sum(Piecewise((1, x[j, k] > 0), (0, True)), (k, 0, 2)), (j, 0, 1))``
    becomes a ``Piecewise`` whose condition names ``k`` outside the sum that
    binds it, a formula that no longer means anything. So the nested sums
    holding a ``Piecewise`` are hidden from the fold, then put back as they were.
    """
    hidden = ({inner: sympy.Dummy() for inner in function.atoms(ExprWithLimits)
               if inner.has(sympy.Piecewise)} if isinstance(function, sympy.Basic) else {})
    shown = {dummy: inner for inner, dummy in hidden.items()}
    built = _common_new(cls, function.xreplace(hidden), *limits, discrete=True, **assumptions)
    if not isinstance(built, tuple):  # nan, or an equation of two sums
        return built.xreplace(shown)
    function, limits, orientation = built
    function = (orientation * function).xreplace(shown)
    result = sympy.Expr.__new__(cls, **assumptions)
    result._args = (function, *limits)
    result.is_commutative = function.is_commutative
    return result


class Sum(sympy.Sum):
    """SymPy's ``Sum``, except that building one folds no ``Piecewise`` out of the sums inside.

    Every sum in an index-notation formula is one of these, so ``formula()``
    stays correct when the user substitutes indices or values into it (SymPy
    rebuilds each sum then). It is named ``Sum`` and equal to, hashed and
    ordered like the SymPy ``Sum`` of the same arguments, so comparisons with
    ``sympy.Sum(...)`` hold.

    >>> from sympy import IndexedBase
    >>> x, j, k = IndexedBase("x"), index_symbol("j"), index_symbol("k")
    >>> inner = Sum(sympy.Piecewise((1, x[j, k] > 0), (0, True)), (k, 0, 2))
    >>> Sum(inner ** 2, (j, 0, 1))
    Sum(Sum(Piecewise((1, x[j, k] > 0), (0, True)), (k, 0, 2))**2, (j, 0, 1))
    >>> Sum(x[j], (j, 0, 1)) == sympy.Sum(x[j], (j, 0, 1))
    True
    """

    def __new__(cls, function, *limits, **assumptions):
        return _new_without_folds_through_inner_sums(cls, function, *limits, **assumptions)

    def __eq__(self, other):
        if isinstance(other, sympy.Sum) and type(other) is not type(self):
            return self._hashable_content() == other._hashable_content()
        return super().__eq__(other)

    __hash__ = sympy.Sum.__hash__


class IndexedReduction(ExprWithLimits):
    """``max``/``min`` of an expression over ranges of bound indices, like ``sympy.Sum`` for ``+``."""

    _combine = None  # sympy.Max or sympy.Min
    _command = ""

    def __new__(cls, function, *limits, **assumptions):
        return _new_without_folds_through_inner_sums(cls, function, *limits, **assumptions)

    def doit(self, **hints):
        body = self.function.doit(**hints) if hints.get("deep", True) else self.function
        ranges = []
        for _, lower, upper in self.limits:
            if not (lower.is_Integer and upper.is_Integer):
                return self.func(body, *self.limits)
            ranges.append(range(int(lower), int(upper) + 1))
        variables = [limit[0] for limit in self.limits]
        values = [body.xreplace(dict(zip(variables, map(sympy.Integer, point))))
                  for point in itertools.product(*ranges)]
        return self._combine(*values)

    def _latex(self, printer):
        implicit = getattr(printer, "implicit_limits", False)
        under = []
        for variable, lower, upper in self.limits:
            name = printer._print(variable)
            under.append(name if implicit and lower == 0 and upper.is_Integer else
                         rf"{printer._print(lower)} \leq {name} \leq {printer._print(upper)}")
        body = printer._print(self.function)
        if isinstance(self.function, sympy.Add):
            body = rf"\left({body}\right)"
        return rf"{self._command}_{{{', '.join(under)}}} {body}"


class Maximum(IndexedReduction):
    """The largest value of an expression over index ranges: ``Maximum(x[i, k], (k, 0, 3))``.

    >>> from sympy import IndexedBase
    >>> x, k = IndexedBase("x"), index_symbol("k")
    >>> Maximum(x[k], (k, 0, 2)).doit()
    Max(x[0], x[1], x[2])
    """

    _combine = sympy.Max
    _command = r"\max"


class Minimum(IndexedReduction):
    """The smallest value of an expression over index ranges (see :class:`Maximum`).

    >>> from sympy import IndexedBase
    >>> x, k = IndexedBase("x"), index_symbol("k")
    >>> Minimum(x[k], (k, 0, 1)).doit()
    Min(x[0], x[1])
    """

    _combine = sympy.Min
    _command = r"\min"


# ---------------------------------------------------------------------------
# Index expressions: simplified with the ranges of the indices in them
# ---------------------------------------------------------------------------


def _linear_form(expr, ranges: dict):
    """``expr`` as ``({symbol: Rational}, Rational)`` if linear in indices of known range, else None."""
    if expr.is_Rational:
        return {}, expr
    coefficients, constant = {}, sympy.S.Zero
    for term, coefficient in expr.as_coefficients_dict().items():
        if not coefficient.is_Rational:
            return None
        if term is sympy.S.One:
            constant += coefficient
        elif term in ranges:
            coefficients[term] = coefficients.get(term, 0) + coefficient
        else:
            return None
    return coefficients, constant


def _span(form, ranges: dict) -> tuple:
    """The least and largest values of a linear form over its indices' ranges."""
    coefficients, constant = form
    low = high = constant
    for symbol, coefficient in coefficients.items():
        extreme = coefficient * (ranges[symbol] - 1)
        low, high = low + min(0, extreme), high + max(0, extreme)
    return low, high


def _floor_of(form, ranges: dict):
    """``floor`` of a linear form as a linear expression, if its fractional part's floor is constant."""
    coefficients, constant = form
    denominator = math.lcm(*(int(c.q) for c in coefficients.values()), int(sympy.Rational(constant).q))
    whole, rest = [], {}
    for symbol, coefficient in coefficients.items():
        numerator = int(coefficient * denominator)
        whole.append((numerator // denominator) * symbol)
        rest[symbol] = sympy.Integer(numerator % denominator)
    low, high = _span((rest, constant * denominator), ranges)
    if low // denominator != high // denominator:
        return None
    return sympy.Add(*whole) + low // denominator


def _tidy_floor_mod(expr, ranges: dict):
    if isinstance(expr, sympy.floor):
        form = _linear_form(expr.args[0], ranges)
        value = _floor_of(form, ranges) if form is not None else None
        return expr if value is None else value
    dividend, divisor = expr.args
    form = _linear_form(dividend, ranges)
    if form is None or not divisor.is_Integer or divisor <= 0:
        return expr
    coefficients, constant = form
    quotient = _floor_of(({s: c / divisor for s, c in coefficients.items()}, constant / divisor), ranges)
    return expr if quotient is None else dividend - divisor * quotient


def tidy_index(expr, ranges: dict):
    """An index expression with ``floor``/``Mod`` resolved where the ranges decide them."""
    if expr.is_Symbol or expr.is_Integer or not expr.has(sympy.floor, sympy.Mod):
        return expr
    return expr.replace(lambda e: isinstance(e, (sympy.floor, sympy.Mod)),
                        lambda e: _tidy_floor_mod(e, ranges))


_RELATIONS = {
    sympy.Eq: lambda low, high: True if low == high == 0 else False if low > 0 or high < 0 else None,
    sympy.Ne: lambda low, high: False if low == high == 0 else True if low > 0 or high < 0 else None,
    sympy.Lt: lambda low, high: True if high < 0 else False if low >= 0 else None,
    sympy.Le: lambda low, high: True if high <= 0 else False if low > 0 else None,
    sympy.Gt: lambda low, high: True if low > 0 else False if high <= 0 else None,
    sympy.Ge: lambda low, high: True if low >= 0 else False if high < 0 else None,
}


def tidy_condition(condition, ranges: dict):
    """A condition on indices, decided (``True``/``False``) where the ranges decide it."""
    if isinstance(condition, sympy.And):
        return sympy.And(*[tidy_condition(c, ranges) for c in condition.args])
    decide = _RELATIONS.get(type(condition))
    if decide is None:
        return condition
    lhs, rhs = (tidy_index(side, ranges) for side in condition.args)
    form = _linear_form(lhs - rhs, ranges)
    verdict = decide(*_span(form, ranges)) if form is not None else None
    if verdict is None:
        return type(condition)(lhs, rhs)
    return sympy.true if verdict else sympy.false


def _within(expr, lower, upper, ranges: dict) -> bool:
    """True if the index expression ``expr`` stays within ``[lower, upper]`` over the ranges."""
    if isinstance(expr, sympy.Mod) and expr.args[1].is_Integer:
        return lower <= 0 and expr.args[1] - 1 <= upper
    form = _linear_form(expr, ranges)
    if form is None:
        return False
    low, high = _span(form, ranges)
    return lower <= low and high <= upper


def delta_of(body, limit: tuple, ranges: dict):
    """``(body without the delta, a)`` if ``body`` has a factor ``KroneckerDelta(a, k)`` for the
    bound index ``k`` of ``limit`` with ``a`` in its range, else None."""
    k, lower, upper = limit
    factors = sympy.Mul.make_args(body)
    for position, factor in enumerate(factors):
        if not isinstance(factor, sympy.KroneckerDelta):
            continue
        a, b = factor.args
        other = b if a == k else a if b == k else None
        if other is not None and not other.has(k) and _within(other, lower, upper, ranges):
            return sympy.Mul(*(factors[:position] + factors[position + 1:])), other
    return None


def broadcast_index(index: tuple, shape: tuple, target: tuple) -> tuple:
    """The index into an operand of ``shape`` broadcast (right-aligned) to ``target`` at ``index``."""
    offset = len(target) - len(shape)
    return tuple(ZERO if size == 1 and target[offset + axis] != 1 else index[offset + axis]
                 for axis, size in enumerate(shape))


# ---------------------------------------------------------------------------
# Integer index arrays (take, take_add): closed forms where there is one
# ---------------------------------------------------------------------------


class IndexArray:
    """An integer index array as an index expression of the positions it is read at."""

    def __init__(self, indices: np.ndarray, axis_size: int):
        self.array = indices
        self.kind, self.form = self._closed_form(indices, axis_size)
        self.base = None  # an IndexedBase, for kind "named"

    @staticmethod
    def _closed_form(indices: np.ndarray, size: int):
        if indices.ndim == 0:
            return "scalar", int(indices)
        if indices.size == 0:
            return "named", None
        first = int(indices.reshape(-1)[0])
        steps = []
        for axis in range(indices.ndim):
            step = 0
            if indices.shape[axis] > 1:
                step = int(indices[(0,) * axis + (1,) + (0,) * (indices.ndim - axis - 1)]) - first
            steps.append(step)
        grid = np.indices(indices.shape)
        if np.array_equal(indices, first + np.tensordot(steps, grid, axes=1)):
            return "affine", (first, tuple(steps))
        if indices.ndim == 1 and size:
            positions = np.arange(len(indices))
            step = (int(indices[1]) - first) % size
            if np.array_equal(indices, (first + step * positions) % size):
                return "mod", (first, step, size)
            run = int(np.argmax(indices != first)) if (indices != first).any() else len(indices)
            step = int(indices[run]) - first if run < len(indices) else 0
            if np.array_equal(indices, first + step * (positions // run)):
                return "repeat", (first, step, run)
        return "named", None

    def at(self, positions: tuple, element=Indexed):
        """The index stored at ``positions`` (one index expression per axis of the array)."""
        if self.kind == "scalar":
            return sympy.Integer(self.form)
        if self.kind == "affine":
            first, steps = self.form
            return first + sum((step * p for step, p in zip(steps, positions)), ZERO)
        if self.kind == "mod":
            first, step, size = self.form
            return sympy.Mod(first + step * positions[0], size)
        if self.kind == "repeat":
            first, step, run = self.form
            return first + step * sympy.floor(positions[0] / run)
        return element(self.base, *positions)


class PrintedElement(Indexed):
    """An ``Indexed`` as LaTeX lines hold it: ordered among the symbols, by its indices.

    SymPy orders a product's factors by class, so ``sin(x[i])`` would come
    before ``x[i]``, and ``Indexed`` factors by their base's name
    (``W[k, j] X[i, k]``). Printed elements sort like symbols, by their
    indices first: ``t_{i} x_{i} \\sin{...}`` and ``X_{i k} W_{k j}``, the
    order a contraction is read in. Only LaTeX uses it; ``formula()`` holds
    plain ``Indexed`` objects.
    """

    @classmethod
    def class_key(cls):
        return sympy.Symbol.class_key()

    def sort_key(self, order=None):
        # After symbols (1, ...) and dummies (2, ...); then by the indices, then the name.
        keys = tuple((0, sympy.default_sort_key(k, order)) for k in self.indices)
        return self.class_key(), (3, keys + ((1, str(self.base)),)), sympy.S.One.sort_key(), sympy.S.One


def sparse_constant(array: np.ndarray):
    """A constant array that Kronecker deltas describe, as ``(kind, detail)``, or None.

    ``("identity", s)``: the array is an identity between its first ``s`` axes
    and the rest (the seeds of a Jacobian sweep, reshaped or not);
    ``("one-hot", (index, value))``: one element is non-zero.
    """
    nonzero = np.count_nonzero(array)
    if nonzero == 1:
        index = tuple(int(k) for k in np.argwhere(array)[0])
        return "one-hot", (index, array[index].item())
    for split in range(1, array.ndim):
        count = math.prod(array.shape[:split])
        if count != math.prod(array.shape[split:]) or nonzero != count:
            continue
        square = array.reshape(count, count)
        if np.all(np.diagonal(square) == 1):
            return "identity", split
    return None


def _free_prefix(candidates: tuple, taken: set[str]) -> str:
    """The first of ``candidates`` that no name in ``taken`` is, alone or followed by digits."""
    def used(prefix: str) -> bool:
        return any(name == prefix or (name.startswith(prefix) and name[len(prefix):].isdigit())
                   for name in taken)

    for prefix in candidates:
        if not used(prefix):
            return prefix
    prefix = candidates[0]
    while used(prefix):
        prefix += "_"
    return prefix


def name_all(items: list, candidates: tuple, taken: set[str]) -> list[str]:
    """Names for ``items``: a single letter for one, the letter numbered from 1 for several."""
    if not items:
        return []
    prefix = _free_prefix(candidates, taken)
    if len(items) == 1:
        return [prefix]
    return [f"{prefix}{k}" for k in range(1, len(items) + 1)]



def rational_constant(value: sympy.Basic, max_denominator: int = 1000) -> sympy.Basic:
    """``value`` as an exact number if it is a float that was one, else ``value`` itself.

    A float counts as the fraction p/q when it is exactly the double nearest
    to p/q with q at most ``max_denominator`` and |p/q| below a million, and
    ``p/q`` is no longer to write than the decimal (``0.5`` and ``1/3`` become
    fractions; ``0.1`` and ``0.333`` stay decimals, as written; a measured
    ``3.14159`` stays a float). Whole numbers always become integers.

    >>> rational_constant(sympy.Float(0.5)), rational_constant(sympy.Float(4.0))
    (1/2, 4)
    >>> rational_constant(sympy.Float(1 / 3)), rational_constant(sympy.Float(0.1))
    (1/3, 0.100000000000000)
    """
    if not isinstance(value, sympy.Float) or not max_denominator:
        return value
    number = float(value)
    if not np.isfinite(number) or abs(number) >= 1e6:
        return value
    fraction = Fraction(number).limit_denominator(max_denominator)
    if float(fraction) != number:
        return value
    if fraction.denominator != 1 and len(str(fraction)) > len(repr(number)):
        return value
    return sympy.Rational(fraction.numerator, fraction.denominator)


