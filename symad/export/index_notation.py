r"""Index notation: an array program's formulas, one indexed expression per array.

An array program (:attr:`symad.Function.is_array_program`) records one node per
whole-array operation. Its formulas say what one element of each array is,
with SymPy's ``Indexed``/``IndexedBase`` objects and named index symbols, so
their size does not depend on the arrays' sizes:

>>> import symad as sd, numpy as np
>>> F = sd.grad(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))).trace(np.zeros(1000))
>>> F.formula()
-2*exp(-x[i]**2)*sin(x[i])*x[i] + exp(-x[i]**2)*cos(x[i])
>>> F.index_symbols
(i,)
>>> sd.trace(lambda X, W: X @ W, np.zeros((3, 4)), np.zeros((4, 2))).formula()
Sum(W[k, j]*X[i, k], (k, 0, 3))

Conventions (docs/formulas.md, "Index notation", says the same for users):

* **Free indices.** A whole array output is one expression in the free
  indices ``i, j, k, ...``, one per axis in the order of the axes
  (``F.index_symbols`` gives them, per output). A scalar output has none.
  Index symbols are integer and non-negative SymPy symbols, so
  ``sympy.Symbol("i")`` is not one of them: substitute with ``index_symbols``.
  Letters an input or a constant uses are skipped.
* **Bound indices.** Reductions and contractions are ``Sum`` (``Maximum`` /
  ``Minimum`` for ``max``/``min``) over bound indices with explicit limits
  ``(k, 0, n - 1)``; ``logsumexp`` is ``log(Sum(exp(...)))``. A bound index
  never reuses a letter of an index in scope. An axis of size 1 is no sum: its
  index is 0.
* **Broadcasting** maps indices right-aligned; an operand's size-1 axis that
  is broadcast reads index 0.
* **Index maps.** Slices are affine (``x[1:]`` -> ``x[i + 1]``, ``x[::2]`` ->
  ``x[2*i]``, ``x[::-1]`` -> ``x[n - 1 - i]``), transposes permute indices,
  reshapes split and merge indices with ``floor`` and ``Mod``, simplified
  where the index ranges allow (the diagonal taken through a flat reshape is
  ``X[i, i]``). Integer index arrays that follow a closed form become that form
  (``np.roll``: ``x[Mod(i + 3, 5)]``; ``np.repeat``: ``x[floor(i/2)]``); others
  are named constants ``p`` and read ``x[p[i]]``.
* **Pieces.** ``concatenate``/``stack``, ``pad`` and its kin (``unslice``),
  item assignment (``scatter``) and arrays assembled from scalars (``pack``)
  are ``Piecewise`` on index ranges; ``cumsum`` is a ``Sum`` up to the free
  index; the scatter-add that reverses an index array is a ``Sum`` with a
  ``KroneckerDelta``.
* **Constants.** An array constant holding one value everywhere is that value;
  an identity (the seeds of a Jacobian) is a product of ``KroneckerDelta``;
  any other is named ``c`` (several: ``c1, c2, ...``) with its values in
  ``F.formula_constants`` (the LaTeX lists small ones in full).

Everything stays exact: at integer indices, :func:`evaluate_element` (sums
written out, the arrays' values read) gives the function's value there, which
the tests check for every primitive and its gradient.
"""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction
from functools import cache

import numpy as np
import sympy
from sympy.concrete.expr_with_limits import ExprWithLimits, _common_new
from sympy.tensor.indexed import Indexed, IndexedBase

from symad import array_primitives as A
from symad.atoms import number_atom
from symad.export.latex_printer import (
    SymadLatexPrinter,
    _array_latex,
    _temporary_base,
    check_inline_budget,
    printed_expression,
    symbol_latex,
)
from symad.graph import ArrayInput, Node, atom_shape, fresh_symbols, sympy_form

__all__ = [
    "Maximum",
    "Minimum",
    "IndexLatexPrinter",
    "evaluate_element",
    "formula_constants",
    "index_cse",
    "index_formula",
    "index_latex",
    "index_symbol",
    "index_symbols",
]

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


class _IndexedReduction(ExprWithLimits):
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


class Maximum(_IndexedReduction):
    """The largest value of an expression over index ranges: ``Maximum(x[i, k], (k, 0, 3))``.

    >>> x, k = IndexedBase("x"), index_symbol("k")
    >>> Maximum(x[k], (k, 0, 2)).doit()
    Max(x[0], x[1], x[2])
    """

    _combine = sympy.Max
    _command = r"\max"


class Minimum(_IndexedReduction):
    """The smallest value of an expression over index ranges (see :class:`Maximum`).

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


def _tidy_index(expr, ranges: dict):
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


def _tidy_condition(condition, ranges: dict):
    """A condition on indices, decided (``True``/``False``) where the ranges decide it."""
    if isinstance(condition, sympy.And):
        return sympy.And(*[_tidy_condition(c, ranges) for c in condition.args])
    decide = _RELATIONS.get(type(condition))
    if decide is None:
        return condition
    lhs, rhs = (_tidy_index(side, ranges) for side in condition.args)
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


def _delta_of(body, limit: tuple, ranges: dict):
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


def _broadcast_index(index: tuple, shape: tuple, target: tuple) -> tuple:
    """The index into an operand of ``shape`` broadcast (right-aligned) to ``target`` at ``index``."""
    offset = len(target) - len(shape)
    return tuple(ZERO if size == 1 and target[offset + axis] != 1 else index[offset + axis]
                 for axis, size in enumerate(shape))


# ---------------------------------------------------------------------------
# Integer index arrays (take, take_add): closed forms where there is one
# ---------------------------------------------------------------------------


class _IndexArray:
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


class _PrintedElement(Indexed):
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


def _sparse_constant(array: np.ndarray):
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


def _name_all(items: list, candidates: tuple, taken: set[str]) -> list[str]:
    """Names for ``items``: a single letter for one, the letter numbered from 1 for several."""
    if not items:
        return []
    prefix = _free_prefix(candidates, taken)
    if len(items) == 1:
        return [prefix]
    return [f"{prefix}{k}" for k in range(1, len(items) + 1)]


# ---------------------------------------------------------------------------
# The builder: each node's element at given indices
# ---------------------------------------------------------------------------


class IndexNotation:
    """Index-notation expressions of one Function's graph (shared by formula, cse and latex).

    ``latex=True`` builds what LaTeX prints (floats that were fractions made
    exact, factors kept as written, SymPy's rewrites skipped), else the exact
    SymPy expressions of ``formula()``. Names (constants, index letters) are
    given out once per Function, so every view agrees.
    """

    def __init__(self, function, *, latex: bool = False, max_denominator: int = 1000):
        self.function = function
        self.graph = function.graph
        self.element = _PrintedElement if latex else Indexed
        if latex:
            self._apply = printed_expression
            self._number = lambda atom: rational_constant(atom, max_denominator)
        else:
            self._apply = lambda primitive, args, params: primitive.to_sympy(args, dict(params))
            self._number = lambda atom: atom
        self.nodes = set(self.graph.nodes)
        self.temporaries: dict = {}  # node -> IndexedBase (array) or Symbol (scalar)
        self.used_constants: dict = {}  # name -> IndexedBase of the constants read so far
        self._memo: dict = {}
        self._ranges: dict = {}  # the current line's free index -> its axis size
        self._line_names: set = set()
        self._sparse_forms: dict = {}  # ConstantArray -> _sparse_constant
        self.fixed: dict = {}  # node -> its value where it is the same at every index

        taken = set()
        self._elements: dict = {}  # element symbol x[3] -> Indexed x[3]
        for atom in self.graph.inputs:
            taken.add(atom.name.split("[")[0])
            if atom.__class__ is ArrayInput:
                for symbol in atom.made_elements():
                    self._elements[symbol] = self.element(atom.indexed, *atom.element_index(symbol))
        self._constants, self._index_arrays = self._name_constants(taken)
        self.reserved = taken | {base.label.name for base in self.constant_bases()}

    # -- names ---------------------------------------------------------------

    def _sparse(self, value):
        """:func:`_sparse_constant` of a ConstantArray, worked out once."""
        if value not in self._sparse_forms:
            self._sparse_forms[value] = _sparse_constant(value.array)
        return self._sparse_forms[value]

    def _name_constants(self, taken: set[str]):
        """IndexedBases for the constant arrays and index arrays that have no closed form."""
        data, index_arrays = {}, {}
        for node in self.graph.nodes:
            params = dict(node.params)
            if node.primitive is A.constant_p:
                value = params["value"]
                if value.fill is None and value not in data and self._sparse(value) is None:
                    data[value] = None
            elif node.primitive in (A.take_p, A.take_add_p):
                key = (params["indices"], params["in_shape"][params["axis"]])
                if key not in index_arrays:
                    array = _IndexArray(params["indices"].array, key[1])
                    index_arrays[key] = array
        for value, name in zip(list(data), _name_all(list(data), ("c", "a", "b", "C"), taken)):
            data[value] = IndexedBase(name, shape=value.shape)
        named = [a for a in index_arrays.values() if a.kind == "named"]
        for array, name in zip(named, _name_all(named, ("p", "P", "idx"), taken | {
                b.label.name for b in data.values()})):
            array.base = IndexedBase(name, shape=array.array.shape)
        return data, index_arrays

    def constant_bases(self) -> list:
        """The IndexedBases of the named constants and index arrays, in the order named."""
        return list(self._constants.values()) + [
            a.base for a in self._index_arrays.values() if a.base is not None]

    def constant_values(self) -> dict:
        """``{IndexedBase: ndarray}`` of the named constants and index arrays."""
        values = {base: value.array for value, base in self._constants.items()}
        values.update({a.base: a.array for a in self._index_arrays.values() if a.base is not None})
        return values

    def free_indices(self, shape: tuple) -> tuple:
        """The free index symbols of an array of ``shape``: ``i, j, ...`` minus reserved letters."""
        names = [name for name in INDEX_NAMES if name not in self.reserved]
        names += [f"i{k}" for k in range(len(shape))]  # past the letters: i0, i1, ...
        return tuple(index_symbol(name) for name in names[:len(shape)])

    def start_line(self, shape: tuple) -> tuple:
        """Begin one expression (a temporary's or an output's): its free indices, fresh memo."""
        free = self.free_indices(shape)
        self._ranges = dict(zip(free, shape))
        self._line_names = {symbol.name for symbol in free}
        self._memo = {}
        return free

    def bound(self, size: int, scope: tuple):
        """A bound index over ``size`` values: ``(index, limit or None, scope)``; size 1 is index 0."""
        if size == 1:
            return ZERO, None, scope
        taken = self._line_names | {symbol.name for symbol, _ in scope} | self.reserved
        name = next((n for n in INDEX_NAMES if n not in taken), None)
        if name is None:
            name = next(f"k{k}" for k in itertools.count() if f"k{k}" not in taken)
        symbol = index_symbol(name)
        return symbol, (symbol, 0, size - 1), scope + ((symbol, size),)

    def ranges(self, scope: tuple) -> dict:
        return {**self._ranges, **dict(scope)} if scope else self._ranges

    def sum(self, body, limits: list, scope: tuple):
        """``Sum(body, *limits)``, each sum over a Kronecker delta's index done: sum_k f(k) delta_{a k} = f(a).

        Jacobians and Hessians seed their sweeps with identities, which
        become deltas (:func:`_sparse_constant`): their contractions fold here.
        """
        ranges = self.ranges(scope)
        kept = []
        for limit in limits:
            found = _delta_of(body, limit, ranges)
            if found is None:
                kept.append(limit)
                continue
            rest, value = found
            body = rest.xreplace({limit[0]: value})
        return Sum(body, *kept) if kept else body

    def condition(self, condition, scope: tuple):
        return _tidy_condition(condition, self.ranges(scope))

    # -- values --------------------------------------------------------------

    def number(self, value):
        return self._number(number_atom(value) if not isinstance(value, sympy.Basic) else value)

    def apply(self, primitive, args: list, params: tuple = ()):
        return self._apply(primitive, args, params)

    def note_index_array(self, indices: _IndexArray) -> None:
        """Record that a named index array is read (LaTeX lists it)."""
        if indices.base is not None:
            self.used_constants.setdefault(indices.base.label.name, indices.base)

    def operand(self, atom, index: tuple, scope: tuple = ()):
        """The element of ``atom`` at ``index`` (index expressions), as a SymPy expression."""
        if not atom.is_Symbol:
            return self._number(atom)
        if index:
            ranges = self.ranges(scope)
            index = tuple(_tidy_index(sympy.Integer(e) if isinstance(e, int) else e, ranges)
                          for e in index)
        cls = atom.__class__
        if cls is ArrayInput:
            return self.element(atom.indexed, *index)
        if cls is not Node:
            element = self._elements.get(atom)
            return atom if element is None else element
        if atom not in self.nodes:  # a value of an enclosing trace
            symbol = sympy_form(atom)
            return self.element(IndexedBase(symbol), *index) if index else symbol
        fixed = self.fixed.get(atom)
        if fixed is not None:
            return fixed
        temporary = self.temporaries.get(atom)
        if temporary is not None:
            return self.element(temporary, *index) if index else temporary
        return self.compute(atom, index, scope)

    def compute(self, node, index: tuple, scope: tuple = ()):
        """The node's own expression at ``index`` (not its temporary's name)."""
        key = (node, index, scope)
        value = self._memo.get(key)
        if value is None:
            if 0 in node.shape:
                value = ZERO  # an empty array has no element to describe
            else:
                rule = _RULES.get(node.primitive, _elementwise)
                value = rule(self, node, index, scope)
            self._memo[key] = value
        return value


# ---------------------------------------------------------------------------
# The rules: each primitive's element at ``index``
# ---------------------------------------------------------------------------


def _elementwise(nb: IndexNotation, node, index: tuple, scope: tuple):
    args = [nb.operand(atom, _broadcast_index(index, atom_shape(atom), node.shape), scope)
            for atom in node.args]
    return nb.apply(node.primitive, args, node.params)


def _reduction(combine):
    def rule(nb: IndexNotation, node, index: tuple, scope: tuple):
        (x,) = node.args
        shape = atom_shape(x)
        axes = {len(shape) + a for a in dict(node.params)["axes"]}
        free = iter(index)
        operand_index, limits = [], []
        for axis, size in enumerate(shape):
            if axis in axes:
                k, limit, scope = nb.bound(size, scope)
                operand_index.append(k)
                if limit is not None:
                    limits.append(limit)
            else:
                operand_index.append(next(free))
        body = nb.operand(x, tuple(operand_index), scope)
        return combine(nb, body, limits, scope) if limits else body
    return rule


def _logsumexp(nb: IndexNotation, body, limits: list, scope: tuple):
    return sympy.log(Sum(sympy.exp(body), *limits))


def _einsum(nb: IndexNotation, node, index: tuple, scope: tuple):
    (sa, sb), sc = A.parse_subscripts(dict(node.params)["subscripts"])
    a, b = node.args
    lead = len(node.shape) - len(sc)
    lead_shape, lead_index = node.shape[:lead], index[:lead]
    value = dict(zip(sc, index[lead:]))
    sizes = {}
    for atom, letters in ((a, sa), (b, sb)):
        shape = atom_shape(atom)
        sizes.update(zip(letters, shape[len(shape) - len(letters):]))
    limits = []
    for letter in dict.fromkeys(sa + sb):
        if letter not in value:
            value[letter], limit, scope = nb.bound(sizes[letter], scope)
            if limit is not None:
                limits.append(limit)

    def element(atom, letters):
        shape = atom_shape(atom)
        own_lead = shape[:len(shape) - len(letters)]
        at = _broadcast_index(lead_index, own_lead, lead_shape) + tuple(value[c] for c in letters)
        return nb.operand(atom, at, scope)

    return nb.sum(element(a, sa) * element(b, sb), limits, scope)


def _reshape_index(index: tuple, in_shape: tuple, out_shape: tuple) -> tuple:
    """The index into ``in_shape`` of the element at ``index`` of its reshape to ``out_shape``.

    Axes are matched in groups of equal size (size-1 axes read 0): an input
    axis made of several output axes is their flat position, and an output axis
    made of several input axes is split with ``floor`` and ``Mod``.
    """
    result = [ZERO] * len(in_shape)
    ins = [a for a, size in enumerate(in_shape) if size != 1]
    outs = [a for a, size in enumerate(out_shape) if size != 1]
    pi = po = 0
    while pi < len(ins):
        group_in, group_out = [ins[pi]], [outs[po]]
        size_in, size_out = in_shape[ins[pi]], out_shape[outs[po]]
        pi, po = pi + 1, po + 1
        while size_in != size_out:
            if size_in < size_out:
                group_in.append(ins[pi])
                size_in *= in_shape[ins[pi]]
                pi += 1
            else:
                group_out.append(outs[po])
                size_out *= out_shape[outs[po]]
                po += 1
        flat, stride = ZERO, 1
        for axis in reversed(group_out):
            flat += index[axis] * stride
            stride *= out_shape[axis]
        stride = 1
        for position, axis in reversed(list(enumerate(group_in))):
            size = in_shape[axis]
            if len(group_in) == 1:
                result[axis] = flat
            elif position == 0:
                result[axis] = sympy.floor(flat / stride)
            else:
                result[axis] = sympy.Mod(sympy.floor(flat / stride) if stride > 1 else flat, size)
            stride *= size
    return tuple(result)


def _reshape(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    lead = len(node.shape) - len(params["shape"])
    core = _reshape_index(index[lead:], params["in_shape"], params["shape"])
    return nb.operand(node.args[0], index[:lead] + core, scope)


def _transpose(nb: IndexNotation, node, index: tuple, scope: tuple):
    perm = dict(node.params)["perm"]
    lead = len(node.shape) - len(perm)
    core = [None] * len(perm)
    for axis, source in enumerate(perm):
        core[source] = index[lead + axis]
    return nb.operand(node.args[0], index[:lead] + tuple(core), scope)


def _broadcast(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    lead = len(node.shape) - len(params["shape"])
    core = _broadcast_index(index[lead:], params["in_shape"], params["shape"])
    return nb.operand(node.args[0], index[:lead] + core, scope)


def _slice(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    (x,) = node.args
    lead = len(atom_shape(x)) - len(params["in_shape"])
    free = iter(index[lead:])
    core = []
    for item in params["index"]:
        if item[0] == "i":
            core.append(sympy.Integer(item[1]))
        elif item[0] == "s":
            core.append(item[1] + item[3] * next(free))
        else:
            next(free)
    return nb.operand(x, index[:lead] + tuple(core), scope)


def _placed(nb: IndexNotation, basic_index: tuple, core: tuple, in_shape: tuple, scope: tuple):
    """Where ``array[basic_index]`` sits in ``array`` at ``core``: ``(part index, condition)``,
    or None if the index selects nothing."""
    part, conditions, axis = [], [], 0
    for item in basic_index:
        if item[0] == "n":
            part.append(ZERO)
            continue
        at, size = core[axis], in_shape[axis]
        axis += 1
        if item[0] == "i":
            conditions.append(sympy.Eq(at, item[1]))
            continue
        placed = _placement(at, range(size)[slice(*item[1:])], size)
        if placed is None:
            return None
        part.append(placed[0])
        conditions += placed[1]
    return tuple(part), nb.condition(sympy.And(*conditions), scope)


def _placement(at, positions: range, size: int):
    """``(index into the placed part, conditions on at)`` for the ``positions`` of an axis of
    ``size`` that hold the part's elements in order, or None if there are none."""
    if not positions:
        return None
    start, step = positions[0], positions.step
    low, high = min(start, positions[-1]), max(start, positions[-1])
    conditions = []
    if low > 0:
        conditions.append(sympy.Ge(at, low))
    if high < size - 1:
        conditions.append(sympy.Le(at, high))
    if abs(step) > 1:
        conditions.append(sympy.Eq(sympy.Mod(at - start, abs(step)), 0))
    part = at - start if step == 1 else start - at if step == -1 else (at - start) / step
    return part, conditions


def _unslice(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    in_shape = params["in_shape"]
    lead = len(node.shape) - len(in_shape)
    placed = _placed(nb, params["index"], index[lead:], in_shape, scope)
    if placed is None:
        return ZERO
    part, condition = placed
    value = nb.operand(node.args[0], index[:lead] + part, scope)
    return sympy.Piecewise((value, condition), (ZERO, True))


def _scatter(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    x, v = node.args
    in_shape = params["in_shape"]
    lead = len(node.shape) - len(in_shape)
    lead_shape, lead_index, core = node.shape[:lead], index[:lead], index[lead:]
    x_shape = atom_shape(x)
    x_value = nb.operand(x, _broadcast_index(lead_index, x_shape[:len(x_shape) - len(in_shape)],
                                             lead_shape) + core, scope)
    placed = _placed(nb, params["index"], core, in_shape, scope)
    if placed is None:
        return x_value
    part, condition = placed
    part_shape = A._dummy(in_shape)[A.index_objects(params["index"])].shape
    v_shape = atom_shape(v)
    v_core = v_shape[max(0, len(v_shape) - len(part_shape)):]
    v_lead = v_shape[:len(v_shape) - len(v_core)]
    at = _broadcast_index(lead_index, v_lead, lead_shape) + _broadcast_index(part, v_core, part_shape)
    return sympy.Piecewise((nb.operand(v, at, scope), condition), (x_value, True))


def _take(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    in_shape, axis = params["in_shape"], params["axis"]
    (x,) = node.args
    lead = len(atom_shape(x)) - len(in_shape)
    at = len(in_shape) + axis
    indices = nb._index_arrays[(params["indices"], in_shape[axis])]
    core = index[lead:]
    count = indices.array.ndim
    nb.note_index_array(indices)
    position = indices.at(core[at:at + count], nb.element)
    return nb.operand(x, index[:lead] + core[:at] + (position,) + core[at + count:], scope)


def _take_add(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    in_shape, axis = params["in_shape"], params["axis"]
    (v,) = node.args
    lead = len(node.shape) - len(in_shape)
    at = len(in_shape) + axis
    indices = nb._index_arrays[(params["indices"], in_shape[axis])]
    core = index[lead:]
    target = core[at]
    before, after = index[:lead] + core[:at], core[at + 1:]
    if indices.kind == "scalar":
        condition = nb.condition(sympy.Eq(target, indices.form), scope)
        return sympy.Piecewise((nb.operand(v, before + after, scope), condition), (ZERO, True))
    if indices.kind == "affine" and indices.array.ndim == 1 and indices.form[1][0] != 0:
        first, (step,) = indices.form
        positions = range(first, first + step * len(indices.array), step)
        part, conditions = _placement(target, positions, in_shape[axis])
        condition = nb.condition(sympy.And(*conditions), scope)
        return sympy.Piecewise((nb.operand(v, before + (part,) + after, scope), condition),
                               (ZERO, True))
    # Any other index array: sum the slices whose index is the target.
    positions, limits = [], []
    for size in indices.array.shape:
        k, limit, scope = nb.bound(size, scope)
        positions.append(k)
        if limit is not None:
            limits.append(limit)
    nb.note_index_array(indices)
    delta = sympy.KroneckerDelta(indices.at(tuple(positions), nb.element), target)
    return nb.sum(delta * nb.operand(v, before + tuple(positions) + after, scope), limits, scope)


def _concatenate(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    axis, in_shapes = params["axis"], params["in_shapes"]
    lead = len(node.shape) - len(in_shapes[0])
    lead_shape, lead_index, core = node.shape[:lead], index[:lead], index[lead:]
    at = len(core) + axis
    target = core[at]
    pieces, offset = [], 0
    for position, (atom, in_shape) in enumerate(zip(node.args, in_shapes)):
        size = in_shape[at]
        shape = atom_shape(atom)
        own = _broadcast_index(lead_index, shape[:len(shape) - len(in_shape)], lead_shape)
        value = nb.operand(atom, own + core[:at] + (target - offset,) + core[at + 1:], scope)
        if position == len(in_shapes) - 1:
            condition = sympy.true
        elif size == 1:
            condition = nb.condition(sympy.Eq(target, offset), scope)
        else:
            condition = nb.condition(sympy.Lt(target, offset + size), scope)
        pieces.append((value, condition))
        offset += size
    return sympy.Piecewise(*pieces)


def _cumsum(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    at = len(node.shape) + params["axis"]
    size, target = node.shape[at], index[at]
    k, _, scope = nb.bound(size, scope)
    body = nb.operand(node.args[0], index[:at] + (k,) + index[at + 1:], scope)
    limit = (k, target, size - 1) if params["reverse"] else (k, 0, target)
    return Sum(body, limit)


def _pack(nb: IndexNotation, node, index: tuple, scope: tuple):
    params = dict(node.params)
    shape, positions = params["shape"], params["positions"]
    operands = list(node.args)
    base = operands.pop(0) if params["has_base"] else None
    lead = len(node.shape) - len(shape)
    lead_shape, lead_index, core = node.shape[:lead], index[:lead], index[lead:]
    pieces = []
    for position, atom in sorted(zip(positions, operands), key=lambda pair: pair[0]):
        target = np.unravel_index(position, shape)
        condition = nb.condition(sympy.And(*[sympy.Eq(at, int(t)) for at, t, size
                                             in zip(core, target, shape) if size != 1]), scope)
        value = nb.operand(atom, _broadcast_index(lead_index, atom_shape(atom), lead_shape), scope)
        pieces.append((value, condition))
    if base is not None:
        base_shape = atom_shape(base)
        own = _broadcast_index(lead_index, base_shape[:len(base_shape) - len(shape)], lead_shape)
        pieces.append((nb.operand(base, own + core, scope), sympy.true))
    elif len(positions) == math.prod(shape):
        pieces[-1] = (pieces[-1][0], sympy.true)
    else:
        pieces.append((ZERO, sympy.true))
    return sympy.Piecewise(*pieces)


def _constant(nb: IndexNotation, node, index: tuple, scope: tuple):
    value = dict(node.params)["value"]
    if value.fill is not None:
        return nb.number(value.fill)
    sparse = nb._sparse(value)
    if sparse is not None and sparse[0] == "one-hot":
        position, number = sparse[1]
        deltas = [sympy.KroneckerDelta(at, k) for at, k, size
                  in zip(index, position, value.shape) if size != 1]
        return nb.number(number) * sympy.Mul(*deltas)
    if sparse is not None:  # an identity: delta of each axis of the second part
        split = sparse[1]
        first, second = value.shape[:split], value.shape[split:]
        ranges = nb.ranges(scope)
        mapped = [_tidy_index(e, ranges) for e in _reshape_index(index[:split], second, first)]
        return sympy.Mul(*[sympy.KroneckerDelta(a, b) for a, b, size
                           in zip(mapped, index[split:], second) if size != 1])
    base = nb._constants[value]
    nb.used_constants.setdefault(base.label.name, base)
    return nb.element(base, *index)


_RULES = {
    A.constant_p: _constant,
    A.reduce_sum_p: _reduction(lambda nb, body, limits, scope: nb.sum(body, limits, scope)),
    A.amax_p: _reduction(lambda nb, body, limits, scope: Maximum(body, *limits)),
    A.amin_p: _reduction(lambda nb, body, limits, scope: Minimum(body, *limits)),
    A.reduce_logsumexp_p: _reduction(_logsumexp),
    A.einsum_p: _einsum,
    A.reshape_p: _reshape,
    A.transpose_p: _transpose,
    A.broadcast_p: _broadcast,
    A.slice_p: _slice,
    A.unslice_p: _unslice,
    A.take_p: _take,
    A.take_add_p: _take_add,
    A.concatenate_p: _concatenate,
    A.cumsum_p: _cumsum,
    A.pack_p: _pack,
    A.scatter_p: _scatter,
}

#: Primitives that only move elements (an index map): free to inline, never a line of their own.
_INDEX_MAPS = frozenset({A.constant_p, A.reshape_p, A.transpose_p, A.broadcast_p, A.slice_p, A.take_p})


# ---------------------------------------------------------------------------
# Which nodes get a line
# ---------------------------------------------------------------------------


def _plan_temporaries(graph, *, inline_below: int | None, max_inline: float) -> list:
    """The nodes that get their own line (a temporary), in graph order.

    The rule of the scalar views: a node used more than once (whose inlined
    form has more than ``inline_below`` operations; ``None``: any), or one
    whose inlined form would pass ``max_inline`` operations or nest
    ``MAX_FORMULA_DEPTH`` deep. Index maps (slices, transposes...) of inputs
    count no operation, so ``x[1:]`` used twice stays inlined.
    """
    from symad.inlining import MAX_FORMULA_DEPTH

    uses = graph.use_counts()
    size: dict = {}
    depth: dict = {}
    temporaries = []
    for node in graph.nodes:
        own = 0 if node.primitive in _INDEX_MAPS else 1
        operations = own + sum(size.get(a, 0) for a in node.args)
        level = 1 + max([depth.get(a, 0) for a in node.args], default=0)
        shared = uses.get(node, 0) > 1 and operations > (inline_below or 0)
        if node.primitive is not A.constant_p and not node.primitive.returns_boolean and (
                level >= MAX_FORMULA_DEPTH or operations and (shared or operations > max_inline)):
            temporaries.append(node)
            size[node] = depth[node] = 0
        else:
            size[node], depth[node] = operations, level
    return temporaries


def _lines(nb: IndexNotation, temporaries: list, make_name):
    """``(assignments, output leaves, free indices per leaf)``: the temporaries, then the outputs.

    ``make_name()`` gives the next temporary's symbol (an ``IndexedBase`` label
    for an array). An assignment is ``(left side, expression, free indices)``.
    A planned temporary whose value is a number is no line: its uses read the number.
    """
    assignments = []
    for node in temporaries:
        free = nb.start_line(node.shape)
        value = nb.compute(node, free)
        if value.is_Number:
            nb.fixed[node] = value
            continue
        label = make_name()
        if node.shape:
            base = IndexedBase(label, shape=node.shape)
            nb.temporaries[node] = base
            assignments.append((nb.element(base, *free), value, free))
        else:
            nb.temporaries[node] = label
            assignments.append((label, value, ()))
    leaves, indices = [], []
    for leaf in nb.function._output_atoms():
        if isinstance(leaf, np.ndarray):  # an array of scalar atoms (or a scalar)
            nb.start_line(())
            values = [nb.operand(atom, ()) for atom in leaf.reshape(-1)]
            leaves.append(values[0] if leaf.ndim == 0 else
                          sympy.ImmutableDenseNDimArray(values, leaf.shape))
            indices.append(())
            continue
        free = nb.start_line(atom_shape(leaf))
        leaves.append(nb.operand(leaf, free))
        indices.append(free)
    return assignments, leaves, indices


# ---------------------------------------------------------------------------
# The views: formula, cse, LaTeX
# ---------------------------------------------------------------------------


def index_formula(function, *, max_size=None, max_depth=None):
    """``function.formula()`` of an array program: one indexed expression per output leaf.

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: np.cumsum(x ** 2), np.zeros(4)).formula()
    Sum(x[j]**2, (j, 0, i))
    """
    from symad.inlining import check_budget
    from symad.pytree import tree_unflatten

    check_budget(
        f"formula({function.name})", function.graph, max_size, max_depth,
        "Use F.cse() for the program with shared values kept as assignments, or "
        "F.latex() to print it; formula(max_size=..., max_depth=...) raises the limits.")
    nb = IndexNotation(function)
    _, leaves, _ = _lines(nb, [], None)
    return tree_unflatten(function.out_treedef, leaves)


def index_symbols(function):
    """The free index symbols of ``formula()``: per output leaf, one per axis (``()`` for scalars).

    >>> import symad as sd, numpy as np
    >>> F = sd.trace(lambda X: (X.T, np.sum(X)), np.zeros((2, 3)))
    >>> F.index_symbols
    ((i, j), ())
    >>> F.formula()
    (X[j, i], Sum(X[i, j], (i, 0, 1), (j, 0, 2)))
    """
    from symad.pytree import tree_unflatten

    nb = IndexNotation(function)
    leaves = [() if isinstance(leaf, np.ndarray) else nb.free_indices(atom_shape(leaf))
              for leaf in function._output_atoms()]
    return tree_unflatten(function.out_treedef, leaves)


def formula_constants(function) -> dict:
    """``{IndexedBase: ndarray}``: the values of the constant arrays ``formula()`` names.

    >>> import symad as sd, numpy as np
    >>> F = sd.trace(lambda x: x * np.array([1.0, 2.0, 3.0]), np.zeros(3))
    >>> F.formula(), F.formula_constants
    (c[i]*x[i], {c: array([1., 2., 3.])})
    """
    return IndexNotation(function).constant_values()


def index_cse(function):
    """``function.cse()`` of an array program: shared array values as indexed assignments.

    An array temporary's assignment is ``(x0[i, j], expression)``, a scalar
    one's ``(x0, expression)``; the outputs are as :func:`index_formula`
    gives them, over the temporaries.

    >>> import symad as sd, numpy as np
    >>> sd.grad(lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))).trace(np.zeros(3)).cse()
    ([(t0[i], exp(-x[i]**2))], [-2*sin(x[i])*t0[i]*x[i] + cos(x[i])*t0[i]])
    """

    nb = IndexNotation(function)
    names = fresh_symbols(list(function.graph.inputs) + [base.label for base in nb.constant_bases()])
    temporaries = _plan_temporaries(function.graph, inline_below=None, max_inline=math.inf)
    assignments, leaves, _ = _lines(nb, temporaries, lambda: next(names))
    return [(lhs, rhs) for lhs, rhs, _ in assignments], leaves


def _expand_reductions(expr):
    """Sums, maxima and minima with integer limits written out term by term, outermost first.

    SymPy's own ``Sum.doit`` looks for closed forms (of sums over Kronecker
    deltas, say), which can leave conditions on the summation indices behind;
    writing the terms out is plain and exact.
    """
    if isinstance(expr, (sympy.Sum, _IndexedReduction)) and all(
            lower.is_Integer and upper.is_Integer for _, lower, upper in expr.limits):
        variables = [limit[0] for limit in expr.limits]
        ranges = [range(int(lower), int(upper) + 1) for _, lower, upper in expr.limits]
        terms = [_expand_reductions(expr.function.xreplace(dict(zip(variables, map(sympy.Integer, point)))))
                 for point in itertools.product(*ranges)]
        combine = sympy.Add if isinstance(expr, sympy.Sum) else expr._combine
        return combine(*terms)
    if not expr.args or isinstance(expr, IndexedBase):
        return expr
    return expr.func(*[_expand_reductions(arg) for arg in expr.args])


def evaluate_element(expr, indices: dict, arrays: dict):
    """The number an indexed expression stands for at integer ``indices``, given the ``arrays``.

    ``indices`` maps index symbols to integers; ``arrays`` maps ``IndexedBase``
    objects (or their names) to NumPy arrays (inputs, and
    ``F.formula_constants``); scalar symbols may be given there too.
    Sums, maxima and minima are written out term by term, pieces and index
    expressions evaluated by SymPy, then each element read from its array: a
    check, not a fast evaluator.

    >>> import symad as sd, numpy as np
    >>> F = sd.trace(lambda x: np.cumsum(x ** 2), np.zeros(4))
    >>> (i,) = F.index_symbols
    >>> evaluate_element(F.formula(), {i: 2}, {"x": np.array([1.0, 2.0, 3.0, 4.0])})
    14.0
    """
    by_name = {getattr(key, "name", None) or str(getattr(key, "label", key)): value
               for key, value in arrays.items()}
    if not isinstance(expr, sympy.Basic):  # a number: itself
        return float(expr)
    expr = expr.xreplace({symbol: sympy.Integer(v) for symbol, v in indices.items()})
    expr = _expand_reductions(expr)

    def element(indexed):
        array = by_name.get(str(indexed.base.label))
        if array is None or not all(k.is_Integer for k in indexed.indices):
            return indexed
        value = np.asarray(array)[tuple(int(k) for k in indexed.indices)]
        return sympy.Integer(int(value)) if value.dtype.kind in "iu" else sympy.Float(float(value), 17)

    expr = expr.replace(lambda e: isinstance(e, Indexed), element)
    scalars = {sympy.Symbol(name): value for name, value in by_name.items() if np.ndim(value) == 0}
    expr = (expr.subs(scalars) if scalars else expr).doit()
    return bool(expr) if isinstance(expr, sympy.logic.boolalg.Boolean) else float(expr)


# ---------------------------------------------------------------------------
# LaTeX
# ---------------------------------------------------------------------------


class IndexLatexPrinter(SymadLatexPrinter):
    """symad's LaTeX printer taught index notation: ``X_{i k}``, and ``\\sum_{k}`` over a whole axis.

    A sum (or max, min) whose limits are a whole axis, ``(k, 0, n - 1)``,
    prints without them; other limits (a cumulative sum's) are printed.

    >>> x, i = IndexedBase("x"), index_symbol("i")
    >>> print(IndexLatexPrinter().doprint(sympy.Sum(x[i] ** 2, (i, 0, 9))))
    \\sum_{i} x_{i}^{2}
    """

    implicit_limits = True

    def _print_Indexed(self, expr):
        base = self._print(expr.base.label)
        if not re.fullmatch(r"\\?[A-Za-z]+", base):
            base = "{" + base + "}"
        plain = all(isinstance(k, sympy.Symbol) for k in expr.indices)
        subscript = (" " if plain else ", ").join(self._print(k) for k in expr.indices)
        return f"{base}_{{{subscript}}}"

    def _print_IndexedBase(self, expr):
        return self._print(expr.label)

    def _print_Sum(self, expr):
        if all(lower == 0 and upper.is_Integer for _, lower, upper in expr.limits):
            head = r"\sum_{" + ", ".join(self._print(limit[0]) for limit in expr.limits) + "}"
        else:
            head = " ".join(rf"\sum_{{{self._print(v)}={self._print(lower)}}}^{{{self._print(upper)}}}"
                            for v, lower, upper in expr.limits)
        body = self._print(expr.function)
        if isinstance(expr.function, sympy.Add):
            body = rf"\left({body}\right)"
        return f"{head} {body}"

    # SymPy brackets any factor or term holding a Mod, for "a \\bmod b + c"; a Mod inside a
    # subscript (x_{(i + 2) \\bmod 5}) needs none: decide on the expression with elements masked.

    def _needs_mul_brackets(self, expr, first=False, last=False):
        return super()._needs_mul_brackets(_masked(expr), first=first, last=last)

    def _needs_add_brackets(self, expr):
        return super()._needs_add_brackets(_masked(expr))


def _masked(expr):
    """``expr`` with each indexed element and Kronecker delta replaced by a plain symbol."""
    if not expr.has(sympy.Mod):
        return expr
    hidden = {e: sympy.Dummy() for e in expr.find(lambda e: isinstance(e, (Indexed, sympy.KroneckerDelta)))}
    return expr.xreplace(hidden)


def _indexed_label(label: str, free: tuple) -> str:
    """An output's label with its free indices: ``f_{i}``, ``\\left(\\nabla_{x} f\\right)_{i}``."""
    if not free:
        return label
    subscript = " ".join(symbol.name for symbol in free)
    if re.fullmatch(r"\\?[A-Za-z]+", label):
        return f"{label}_{{{subscript}}}"
    return rf"\left({label}\right)_{{{subscript}}}"


def _constant_line(printer, base, array: np.ndarray, matrix: str, max_denominator: int) -> str:
    name = printer._print(base.label)
    if array.size <= SMALL_CONSTANT and 1 <= array.ndim <= 2:
        elements = [rational_constant(number_atom(v.item()), max_denominator) for v in array.reshape(-1)]
        return f"{name} &= {_array_latex(printer, elements, array.shape, matrix)}"
    field = r"\mathbb{Z}" if array.dtype.kind in "iu" else r"\mathbb{R}"
    dims = r" \times ".join(str(size) for size in array.shape)
    return rf"{name} &\in {field}^{{{dims}}}"


def index_latex(function, labels: list, settings: dict, *, temporaries: str, inline_below: int,
                max_inline: int, matrix: str, max_denominator: int) -> str:
    r"""LaTeX of an array program in index notation (called by ``function_latex``).

    One line per kept array node, shared temporaries indexed too, then the
    outputs with their free indices; small named constants are listed first
    with their values, larger ones with their shape. No line grows with the
    arrays' sizes.

    >>> import symad as sd, numpy as np
    >>> print(sd.trace(lambda X, W: np.sum(np.tanh(X @ W)), np.zeros((30, 50)), np.zeros((50, 40))).latex())
    \begin{aligned}
    f &= \sum_{i, j} \tanh{\left(\sum_{k} X_{i k} W_{k j} \right)}
    \end{aligned}
    """
    check_inline_budget(inline_below, max_inline)
    nb = IndexNotation(function, latex=True, max_denominator=max_denominator)
    planned = _plan_temporaries(function.graph, inline_below=inline_below, max_inline=max_inline)
    dummies: list = []

    def make_name():
        dummies.append(sympy.Dummy(f"t{len(dummies) + 1}"))
        return dummies[-1]

    assignments, leaves, indices = _lines(nb, planned, make_name)

    taken = ({symbol_latex(atom.name) for atom in function.graph.inputs} | set(labels)
             | {symbol_latex(base.label.name) for base in nb.constant_bases()})
    base = _temporary_base(temporaries, taken)
    names = [base] if len(dummies) == 1 else [f"{base}_{{{k}}}" for k in range(1, len(dummies) + 1)]
    printer = IndexLatexPrinter(settings, dict(zip(dummies, names)))

    values = nb.constant_values()
    used = set(nb.used_constants.values())
    lines = [_constant_line(printer, constant, values[constant], matrix, max_denominator)
             for constant in nb.constant_bases() if constant in used]
    lines += [f"{printer.doprint(lhs)} &= {printer.doprint(rhs)}" for lhs, rhs, _ in assignments]
    for label, leaf, free in zip(labels, leaves, indices):
        if isinstance(leaf, sympy.NDimArray):
            value = _array_latex(printer, list(leaf), leaf.shape, matrix)
        else:
            value = printer.doprint(leaf)
        lines.append(f"{_indexed_label(label, free)} &= {value}")
    return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"


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


