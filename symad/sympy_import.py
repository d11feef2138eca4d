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
from symad.graph import GraphBuilder, is_constant
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
        if isinstance(expr, sympy.logic.boolalg.BooleanAtom) or (
            isinstance(expr, sympy.Expr) and is_constant(expr)
        ):
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
        if condition == sympy.true or not rest:
            return self.atom(value)
        return self.builder.record(
            P.select_p, (self.atom(condition), self.atom(value), self._piecewise(rest))
        )


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
    in_symbols = []
    for entry in inputs:
        symbols = np.array(sympy.Array(entry).tolist() if not isinstance(entry, sympy.Symbol) else entry,
                           dtype=object)
        if not all(isinstance(s, sympy.Symbol) for s in symbols.reshape(-1)):
            raise TypeError(f"from_sympy: inputs must be Symbols or arrays of Symbols, got {entry!r}")
        for symbol in symbols.reshape(-1):
            builder.add_input(symbol)
        in_symbols.append(symbols)
    if len({s for arr in in_symbols for s in arr.reshape(-1)}) != len(builder.inputs):
        raise ValueError("from_sympy: an input symbol appears twice in `inputs`")

    if isinstance(exprs, (sympy.MatrixBase, sympy.NDimArray)):
        exprs = np.array(sympy.Array(exprs).tolist(), dtype=object)
    leaves, out_treedef = tree_flatten(exprs)
    importer = _Importer(builder, set(builder.inputs))
    out_atoms = []
    for leaf in leaves:
        expressions = np.empty((), dtype=object) if isinstance(leaf, sympy.Basic) else None
        if expressions is None:
            expressions = np.array(leaf, dtype=object)
        else:
            expressions[()] = leaf
        atoms = np.empty(expressions.shape, dtype=object)
        for index in np.ndindex(expressions.shape):
            atoms[index] = importer.atom(sympy.sympify(expressions[index]))
        out_atoms.append(atoms)
    in_treedef = tree_flatten(tuple(0 for _ in in_symbols))[1]
    result = tree_unflatten(out_treedef, out_atoms)
    return finish_function(builder, name, in_treedef, in_symbols, result)
