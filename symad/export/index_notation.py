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

This module builds the expressions (:class:`IndexNotation`), plans the lines and
prints them; each primitive's element is its rule in the index-notation table
(:mod:`symad.export.index_rules`), and the reductions and index simplifications
they use are in :mod:`symad.export.index_forms`.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import sympy
from sympy.tensor.indexed import Indexed, IndexedBase

from symad import array_primitives as A
from symad.atoms import number_atom
from symad.export.index_forms import (
    INDEX_NAMES,
    SMALL_CONSTANT,
    ZERO,
    IndexArray,
    IndexedReduction,
    Maximum,
    Minimum,
    PrintedElement,
    Sum,
    delta_of,
    index_symbol,
    name_all,
    rational_constant,
    sparse_constant,
    tidy_condition,
    tidy_index,
)
from symad.export.index_rules import (
    UNPRINTED,
    WHOLE_OPERANDS,
    index_rule,
    transposed_input,
    whole_operands,
)
from symad.export.latex_printer import (
    SymadLatexPrinter,
    array_latex,
    check_inline_budget,
    printed_expression,
    symbol_latex,
    temporary_base,
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
        self.element = PrintedElement if latex else Indexed
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
        self._sparse_forms: dict = {}  # ConstantArray -> sparse_constant
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

    def sparse_form(self, value):
        """:func:`sparse_constant` of a ConstantArray, worked out once."""
        if value not in self._sparse_forms:
            self._sparse_forms[value] = sparse_constant(value.array)
        return self._sparse_forms[value]

    def _name_constants(self, taken: set[str]):
        """IndexedBases for the constant arrays and index arrays that have no closed form."""
        data, index_arrays = {}, {}
        # A constant that linear algebra reads whole (solve(A, c)) is named, filled or not.
        whole = {arg for node in self.graph.nodes if node.primitive in WHOLE_OPERANDS
                 for arg in whole_operands(node)}
        for node in self.graph.nodes:
            params = dict(node.params)
            if node.primitive is A.constant_p:
                value = params["value"]
                if value not in data and (node in whole or value.fill is None
                                          and self.sparse_form(value) is None):
                    data[value] = None
            elif node.primitive in (A.take_p, A.take_add_p):
                key = (params["indices"], params["in_shape"][params["axis"]])
                if key not in index_arrays:
                    array = IndexArray(params["indices"].array, key[1])
                    index_arrays[key] = array
        for value, name in zip(list(data), name_all(list(data), ("c", "a", "b", "C"), taken)):
            data[value] = IndexedBase(name, shape=value.shape)
        named = [a for a in index_arrays.values() if a.kind == "named"]
        for array, name in zip(named, name_all(named, ("p", "P", "idx"), taken | {
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
        become deltas (:func:`sparse_constant`): their contractions fold here.
        """
        ranges = self.ranges(scope)
        kept = []
        for limit in limits:
            found = delta_of(body, limit, ranges)
            if found is None:
                kept.append(limit)
                continue
            rest, value = found
            body = rest.xreplace({limit[0]: value})
        return Sum(body, *kept) if kept else body

    def condition(self, condition, scope: tuple):
        return tidy_condition(condition, self.ranges(scope))

    # -- values --------------------------------------------------------------

    def number(self, value):
        return self._number(number_atom(value) if not isinstance(value, sympy.Basic) else value)

    def apply(self, primitive, args: list, params: tuple = ()):
        return self._apply(primitive, args, params)

    def index_array(self, indices, axis_size: int) -> IndexArray:
        """The :class:`IndexArray` of a take's ``indices`` (a ConstantArray) along an axis."""
        return self._index_arrays[(indices, axis_size)]

    def constant_base(self, value):
        """The IndexedBase naming the constant array ``value`` (a ConstantArray)."""
        return self._constants[value]

    def note_index_array(self, indices: IndexArray) -> None:
        """Record that a named index array is read (LaTeX lists it)."""
        if indices.base is not None:
            self.used_constants.setdefault(indices.base.label.name, indices.base)

    def operand(self, atom, index: tuple, scope: tuple = ()):
        """The element of ``atom`` at ``index`` (index expressions), as a SymPy expression."""
        if not atom.is_Symbol:
            return self._number(atom)
        if index:
            ranges = self.ranges(scope)
            index = tuple(tidy_index(sympy.Integer(e) if isinstance(e, int) else e, ranges)
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
                rule = index_rule(node.primitive)
                value = rule(self, node, index, scope)
            self._memo[key] = value
        return value




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
    named = {arg for node in graph.nodes if node.primitive in WHOLE_OPERANDS
             for arg in whole_operands(node) if transposed_input(arg) is None}
    for node in graph.nodes:
        if node.primitive in UNPRINTED:  # read by other nodes' formulas, never shown
            size[node] = depth[node] = 0
            continue
        if node in named and node.primitive is not A.constant_p:  # inv(t) names t whole
            temporaries.append(node)
            size[node] = depth[node] = 0
            continue
        # Index maps (the stanza's moves == "gather") and constants are free to inline.
        own = 0 if node.primitive.moves == "gather" or node.primitive is A.constant_p else 1
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
    for leaf in nb.function.output_atoms():
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
              for leaf in function.output_atoms()]
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
    if isinstance(expr, (sympy.Sum, IndexedReduction)) and all(
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
        return f"{name} &= {array_latex(printer, elements, array.shape, matrix)}"
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
    base = temporary_base(temporaries, taken)
    names = [base] if len(dummies) == 1 else [f"{base}_{{{k}}}" for k in range(1, len(dummies) + 1)]
    printer = IndexLatexPrinter(settings, dict(zip(dummies, names)))

    values = nb.constant_values()
    used = set(nb.used_constants.values())
    lines = [_constant_line(printer, constant, values[constant], matrix, max_denominator)
             for constant in nb.constant_bases() if constant in used]
    lines += [f"{printer.doprint(lhs)} &= {printer.doprint(rhs)}" for lhs, rhs, _ in assignments]
    for label, leaf, free in zip(labels, leaves, indices):
        if isinstance(leaf, sympy.NDimArray):
            value = array_latex(printer, list(leaf), leaf.shape, matrix)
        else:
            value = printer.doprint(leaf)
        lines.append(f"{_indexed_label(label, free)} &= {value}")
    return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"

