"""``from_sympy``: SymPy expressions as a traced Function, so every transform applies.

The expression tree is walked once with memoisation, so subtrees SymPy
shares become shared nodes; each SymPy head maps to one primitive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sympy
from sympy.codegen.cfunctions import expm1 as sympy_expm1
from sympy.codegen.cfunctions import log1p as sympy_log1p

from symad import primitives as P
from symad.errors import TracingError
from symad.function import Function, finish_function
from symad.graph import GraphBuilder, is_constant, number_atom
from symad.pytree import tree_flatten, tree_unflatten

__all__ = ["from_sympy"]

_UNARY = {
    sympy.sin: P.sin_p, sympy.cos: P.cos_p, sympy.tan: P.tan_p, sympy.asin: P.arcsin_p,
    sympy.acos: P.arccos_p, sympy.atan: P.arctan_p, sympy.sinh: P.sinh_p, sympy.cosh: P.cosh_p,
    sympy.tanh: P.tanh_p, sympy.asinh: P.arcsinh_p, sympy.acosh: P.arccosh_p,
    sympy.atanh: P.arctanh_p, sympy.exp: P.exp_p, sympy.Abs: P.abs_p, sympy.sign: P.sign_p,
    sympy.erf: P.erf_p, sympy.erfc: P.erfc_p, P.sigmoid: P.sigmoid_p, P.softplus: P.softplus_p,
    P.cbrt: P.cbrt_p, P.stop_gradient: P.stop_gradient_p, sympy_expm1: P.expm1_p,
    sympy_log1p: P.log1p_p,
}
_BINARY = {sympy.atan2: P.arctan2_p}
_FOLDED = {sympy.Max: P.maximum_p, sympy.Min: P.minimum_p}
_LOGICAL = {sympy.And: P.logical_and_p, sympy.Or: P.logical_or_p}
_RELATIONS = {
    sympy.StrictLessThan: P.less_p, sympy.LessThan: P.less_equal_p,
    sympy.StrictGreaterThan: P.greater_p, sympy.GreaterThan: P.greater_equal_p,
    sympy.Equality: P.equal_p, sympy.Unequality: P.not_equal_p,
}


class _Importer:
    def __init__(self, builder: GraphBuilder, inputs: set):
        self.builder = builder
        self.inputs = inputs
        self.memo: dict = {}

    def atom(self, expr: sympy.Basic):
        cached = self.memo.get(expr)
        if cached is None:
            cached = self.memo[expr] = self._convert(expr)
        return cached

    def _fold(self, primitive, args):
        result = self.atom(args[0])
        for arg in args[1:]:
            result = self.builder.record(primitive, (result, self.atom(arg)))
        return result

    def _convert(self, expr: sympy.Basic):
        record = self.builder.record
        if expr.is_Symbol:
            if expr not in self.inputs:
                raise TracingError(
                    f"from_sympy: the expression uses the symbol {expr} that is not among the "
                    "inputs; list every free symbol in `inputs`"
                )
            return expr
        if isinstance(expr, sympy.logic.boolalg.BooleanAtom):
            return expr
        if isinstance(expr, sympy.Expr) and is_constant(expr):
            if expr.is_extended_real is False:
                raise TracingError(f"from_sympy: the constant {expr} is not real; symad is real-valued")
            return expr
        if expr.is_Add:
            return record(P.add_p, [self.atom(a) for a in expr.args])
        if expr.is_Mul:
            coefficient, rest = expr.as_coeff_Mul()
            if coefficient == -1:
                return record(P.neg_p, (self.atom(rest),))
            return self._fold(P.mul_p, expr.args)
        if expr.is_Pow:
            base, exponent = expr.args
            if exponent == sympy.Rational(1, 2):
                return record(P.sqrt_p, (self.atom(base),))
            if exponent == -1:
                return record(P.div_p, (sympy.Integer(1), self.atom(base)))
            if base == sympy.E:
                return record(P.exp_p, (self.atom(exponent),))
            return record(P.pow_p, (self.atom(base), self.atom(exponent)))
        head = type(expr)
        if head is sympy.log:
            return record(P.log_p, (self.atom(expr.args[0]),))
        if head in _UNARY:
            return record(_UNARY[head], (self.atom(expr.args[0]),))
        if head in _BINARY:
            return record(_BINARY[head], tuple(self.atom(a) for a in expr.args))
        if head in _FOLDED:
            return self._fold(_FOLDED[head], expr.args)
        if head in _LOGICAL:
            return self._fold(_LOGICAL[head], expr.args)
        if head is sympy.Not:
            return record(P.logical_not_p, (self.atom(expr.args[0]),))
        if head in _RELATIONS:
            return record(_RELATIONS[head], tuple(self.atom(a) for a in expr.args))
        if isinstance(expr, sympy.Piecewise):
            return self._piecewise(expr.args)
        from symad.custom import CUSTOM_PRIMITIVES

        custom = CUSTOM_PRIMITIVES.get(getattr(head, "__name__", ""))
        if custom is not None and isinstance(expr, sympy.core.function.AppliedUndef):
            return record(custom.primitive, tuple(self.atom(a) for a in expr.args))
        raise TracingError(
            f"from_sympy: no symad primitive for SymPy's {head.__name__} (in {expr}); "
            "rewrite the expression with elementary functions or register a custom primitive"
        )

    def _piecewise(self, pieces):
        (value, condition), rest = pieces[0], pieces[1:]
        if condition == sympy.true:
            return self.atom(value)
        # Past the last condition SymPy's Piecewise is undefined: nan, as SymPy evaluates it.
        otherwise = self._piecewise(rest) if rest else sympy.nan
        return self.builder.record(P.select_p, (self.atom(condition), self.atom(value), otherwise))


def from_sympy(exprs: Any, inputs: Sequence, name: str = "sympy_function") -> Function:
    """Wrap SymPy expressions as a traced Function of ``inputs``.

    Args:
        exprs: an expression, a Matrix/Array of them, or a tuple/list of those.
        inputs: the arguments, in order: each a Symbol (a scalar argument) or a
            Matrix/Array/list of Symbols (an array argument).
        name: the Function's name.

    >>> import sympy, symad as sd
    >>> x, y = sympy.symbols("x y")
    >>> F = from_sympy(x**2 * sympy.sin(y), [x, y])
    >>> sd.grad(F, argnums=(0, 1)).trace(1.0, 2.0).formula()
    (2*x*sin(y), x**2*cos(y))
    """
    builder = GraphBuilder(name)
    in_symbols = [_input_symbols(entry) for entry in inputs]
    for symbols in in_symbols:
        for symbol in symbols.reshape(-1):
            builder.add_input(symbol)
    if len(set(builder.inputs)) != len(builder.inputs):
        raise TracingError("from_sympy: an input symbol appears twice in `inputs`")

    if isinstance(exprs, (sympy.MatrixBase, sympy.NDimArray)):
        exprs = _object_array(exprs)
    leaves, out_treedef = tree_flatten(exprs)
    importer = _Importer(builder, set(builder.inputs))
    out_atoms = []
    for leaf in leaves:
        expressions = _object_array(leaf)
        atoms = np.empty(expressions.shape, dtype=object)
        for index in np.ndindex(expressions.shape):
            atoms[index] = importer.atom(_expression(expressions[index]))
        out_atoms.append(atoms)
    in_treedef = tree_flatten(tuple(0 for _ in in_symbols))[1]
    result = tree_unflatten(out_treedef, out_atoms)
    return finish_function(builder, name, in_treedef, in_symbols, result)


def _object_array(value: Any) -> np.ndarray:
    """``value`` (an expression, Matrix, Array, ndarray or nested list) as an object array.

    SymPy containers are unpacked with ``tolist()``; nothing is ever passed to
    ``sympify``, which would evaluate strings as code.
    """
    if isinstance(value, (sympy.MatrixBase, sympy.NDimArray)):
        value = value.tolist()
    if isinstance(value, (list, tuple, np.ndarray)):
        return np.array(value, dtype=object)
    array = np.empty((), dtype=object)
    array[()] = value
    return array


def _expression(value: Any) -> sympy.Basic:
    """A SymPy expression or a real number; anything else (strings included) is refused."""
    if isinstance(value, sympy.Basic):
        return value
    atom = number_atom(value)
    if atom is not None:
        return atom
    raise TracingError(
        f"from_sympy: expected SymPy expressions or real numbers, got {type(value).__name__} "
        f"{value!r}; build expressions with SymPy objects (strings are never parsed)"
    )


def _input_symbols(entry: Any) -> np.ndarray:
    symbols = _object_array(entry)
    if not all(isinstance(symbol, sympy.Symbol) for symbol in symbols.reshape(-1)):
        raise TracingError(f"from_sympy: inputs must be Symbols or arrays of Symbols, got {entry!r}")
    return symbols
