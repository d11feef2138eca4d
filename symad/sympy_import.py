"""``from_sympy``: SymPy expressions as a traced Function, so every transform applies.

The expression tree is walked once with memoisation, so subtrees SymPy
shares become shared nodes; each SymPy head maps to one primitive.
"""

from __future__ import annotations

import importlib

from collections.abc import Sequence
from typing import Any

import mpmath
import numpy as np
import sympy

from symad import primitives as P
from symad import special
from symad.errors import DifferentiationError, TracingError
from symad.function import Function, finish_function
from symad.graph import GraphBuilder, current_builder, is_constant, number_atom
from symad.ir.primitive import Primitive
from symad.pytree import tree_flatten, tree_unflatten
from symad.tracer import Tracer, as_atoms

__all__ = ["from_sympy"]

class _Importer:
    """Records a SymPy expression into ``builder``; ``bindings`` maps its symbols to atoms.

    ``from_sympy`` binds the input symbols to themselves; the partial rule of a SymPy
    function binds the dummy arguments of its ``fdiff`` to the node's operands.
    """

    def __init__(self, builder: GraphBuilder, bindings: dict):
        self.builder = builder
        self.bindings = bindings
        self.memo: dict = {}
        self.created: dict = {}  # atom -> when it was first recorded (orders products)

    def atom(self, expr: sympy.Basic):
        cached = self.memo.get(expr)
        if cached is None:
            cached = self.memo[expr] = self._convert(expr)
            self.created.setdefault(cached, len(self.created))
        return cached

    def _product(self, factors):
        """Multiply the factors oldest first, numbers last.

        SymPy flattens every product on its own (``4*l*(1 - l)`` inside
        ``-16*l*(1 - l)*(1 - 4*l*(1 - l))``) and sorts its factors by name.
        Multiplying in the order the factors were first recorded makes the
        product of the older factors a shared prefix, so the logistic map
        imports as a graph linear in its steps, not quadratic.
        """
        atoms = [self.atom(f) for f in factors]
        last = len(self.created)
        atoms.sort(key=lambda a: last if is_constant(a) else self.created.get(a, last))
        result = atoms[0]
        for atom in atoms[1:]:
            result = self.builder.record(P.mul_p, (result, atom))
        return result

    def _fold(self, primitive, args):
        result = self.atom(args[0])
        for arg in args[1:]:
            result = self.builder.record(primitive, (result, self.atom(arg)))
        return result

    def _convert(self, expr: sympy.Basic):
        record = self.builder.record
        if expr.is_Symbol:
            if expr not in self.bindings:
                raise TracingError(
                    f"from_sympy: the expression uses the symbol {expr} that is not among the "
                    "inputs; list every free symbol in `inputs`"
                )
            return self.bindings[expr]
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
            return self._product(expr.args)
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
        primitive = _PRIMITIVE_OF_CLASS.get(head)
        if primitive is not None:
            args = expr.args
            if primitive.variadic or len(args) == primitive.arity:
                return record(primitive, tuple(self.atom(a) for a in args))
            if primitive.arity == 2 and primitive.commutative and len(args) > 2:
                return self._fold(primitive, args)  # Max(a, b, c), And(p, q, r)
        if isinstance(expr, sympy.logic.boolalg.BooleanFunction):
            # ITE, Xor, Implies, ... (SymPy writes Piecewise conditions with them) in
            # terms of And, Or and Not.
            return self.atom(expr.to_nnf())
        if isinstance(expr, sympy.Piecewise):
            return self._piecewise(expr.args)
        from symad.custom import CUSTOM_PRIMITIVES

        custom = CUSTOM_PRIMITIVES.get(getattr(head, "__name__", ""))
        if custom is not None and isinstance(expr, sympy.core.function.AppliedUndef):
            return record(custom.primitive, tuple(self.atom(a) for a in expr.args))
        return self._special_function(expr)

    # -- special functions: symad.special, adapters, then any SymPy function ----------

    def _special_function(self, expr):
        head = type(expr)
        if not all(isinstance(a, sympy.Expr) for a in expr.args):
            raise TracingError(
                f"from_sympy: SymPy's {head.__name__} takes non-scalar parameters (in {expr}); "
                "symad imports functions of scalar arguments only. Register a custom primitive "
                "(@sd.primitive) for it"
            )
        args = [self.atom(a) for a in expr.args]
        adapter = _ADAPTERS.get(head)
        if adapter is not None:
            result = adapter(*map(Tracer.of_atom, args))
            if result is not None:
                return as_atoms(result)[()]
        if isinstance(expr, sympy.Function) and not isinstance(expr, sympy.core.function.AppliedUndef):
            return self.builder.record(sympy_function_primitive(head), tuple(args))
        raise TracingError(
            f"from_sympy: no symad primitive for SymPy's {head.__name__} (in {expr}). "
            f"Supported: the elementary functions, {', '.join(sorted(_supported_names()))}, "
            "and any SymPy function class with a derivative (fdiff) that SciPy, NumPy or "
            "mpmath evaluates; for others register a custom primitive (@sd.primitive)"
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
    >>> F = sd.from_sympy(x**2 * sympy.sin(y), [x, y])
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
    importer = _Importer(builder, {symbol: symbol for symbol in builder.inputs})
    out_atoms = []
    with builder.active():  # special functions are recorded through symad.special
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


# ---------------------------------------------------------------------------
# SymPy functions whose arguments differ from symad.special's, and piecewise constants
# ---------------------------------------------------------------------------


def _lambertw(x, k=None):
    if k is not None and not (is_constant(as_atoms(k)[()]) and as_atoms(k)[()] == 0):
        return None  # another branch: complex-valued off a small interval, not imported
    return special.lambertw(x)


def _elliptic_e(m, *rest):
    return special.ellipe(m) if not rest else None  # the incomplete E(phi, m): generic


def _betainc_regularized(a, b, x1, x2):
    upper = special.betainc(a, b, x2)
    return upper if is_constant(as_atoms(x1)[()]) and as_atoms(x1)[()] == 0 else (
        upper - special.betainc(a, b, x1))


def _betainc(a, b, x1, x2):
    return _betainc_regularized(a, b, x1, x2) * special.beta(a, b)


#: SymPy classes imported as compositions of symad.special functions (SymPy's SciPy
#: printer prints them the same way); an adapter returning None falls through.
_ADAPTERS = {
    sympy.zeta: lambda s, q=1: special._hurwitz(s, q),
    sympy.sinc: lambda y: special.sinc(y / sympy.pi),  # SymPy's sinc is unnormalised
    sympy.LambertW: _lambertw,
    sympy.lowergamma: lambda a, x: special.gamma(a) * special.gammainc(a, x),
    sympy.uppergamma: lambda a, x: special.gamma(a) * special.gammaincc(a, x),
    sympy.elliptic_e: _elliptic_e,
    sympy.betainc_regularized: _betainc_regularized,
    sympy.betainc: _betainc,
    sympy.factorial: lambda x: special.gamma(x + 1),
    sympy.harmonic: lambda n, *m: None if m else special.digamma(n + 1) + sympy.EulerGamma,
    sympy.beta: lambda a, b=None: special.beta(a, a if b is None else b),
}


def _mp_heaviside(x, at_zero):
    if mpmath.isnan(x):
        return mpmath.mpf("nan")
    return mpmath.mpf(0) if x < 0 else mpmath.mpf(1) if x > 0 else at_zero


def _piecewise_constant(name, sympy_form, numpy_impl, arity=1, **spellings) -> Primitive:
    # Zero derivative almost everywhere (and, as in JAX, at the jumps too).
    return P.register(Primitive(name, sympy_form, numpy_impl, (lambda out, *a: None,) * arity,
                                arity=arity, **spellings))


heaviside_p = _piecewise_constant("heaviside", sympy.Heaviside, np.heaviside, arity=2,
                                  mpmath=_mp_heaviside, interval=("heaviside", {}))
frac_p = P.register(Primitive(
    "frac", sympy.frac, lambda x: x - np.floor(x), (lambda out, x: sympy.Integer(1),),
    mpmath=lambda x: x - mpmath.floor(x), interval=("frac", {})))

#: SymPy function class -> the built-in primitive whose stanza records it (its ``to_sympy``
#: is that class): sin, Max, StrictLessThan, And, gamma, besselj, symad's sigmoid, ...
#: SymPy's n-ary Max, Min, And and Or fold into the binary primitives.
_PRIMITIVE_OF_CLASS: dict = {primitive._to_sympy: primitive for primitive in P.PRIMITIVES.values()
                             if primitive.elementwise and isinstance(primitive._to_sympy, type)}


def _heaviside(x, value_at_zero=None):
    # SymPy's Heaviside(x) is 1/2 at 0, like numpy.heaviside(x, 0.5).
    value_at_zero = sympy.Rational(1, 2) if value_at_zero is None else as_atoms(value_at_zero)[()]
    return Tracer.of_atom(current_builder().record(heaviside_p, (as_atoms(x)[()], value_at_zero)))


_ADAPTERS[sympy.Heaviside] = _heaviside

# ---------------------------------------------------------------------------
# Any other SymPy function: numeric implementation by name, partials from fdiff
# ---------------------------------------------------------------------------

#: SymPy functions SciPy evaluates through one element of a tuple-returning function
#: (SymPy's SciPy printer prints these as ``scipy.special.sici(x)[0]`` and so on).
_TUPLE_ELEMENTS = {
    "Si": ("sici", 0), "Ci": ("sici", 1), "fresnels": ("fresnel", 0), "fresnelc": ("fresnel", 1),
    "airyai": ("airy", 0), "airyaiprime": ("airy", 1), "airybi": ("airy", 2),
    "airybiprime": ("airy", 3),
}
#: SymPy functions whose SciPy function takes the arguments in another order.
_REORDERED = {"assoc_legendre": ("lpmv", (1, 0, 2))}  # lpmv(m, n, x) = P_n^m(x)

#: The modules SymPy's printer tables may name, imported when one is named (SciPy: 0.8 s).
_NUMERIC_MODULES = ("numpy", "scipy.special")
_SYMPY_FUNCTION_PRIMITIVES: dict = {}


def _real_valued(implementation):
    """``implementation`` with complex results made real (nan where not real), as symad is."""

    def real(*args):
        with np.errstate(all="ignore"):
            try:
                value = implementation(*args)
            except TypeError:  # e.g. eval_hermite(n, x) takes an integer n: give it one
                value = implementation(*(_as_integers_if_integral(a) for a in args))
        if np.iscomplexobj(value):
            value = np.where(np.imag(value) == 0, np.real(value), np.nan)
            value = value[()] if value.ndim == 0 else value
        return value

    return real


def _as_integers_if_integral(values):
    array = np.asarray(values)
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        return array.astype(np.int64)
    return values


def numeric_implementation(head) -> tuple[Any, str]:
    """``(vectorised implementation, where it comes from)`` of the SymPy class ``head``.

    Looked up by name, never by evaluating text: first in SymPy's SciPy/NumPy printer
    tables (the SciPy or NumPy function SymPy itself would print), then the tuple-valued
    and reordered SciPy functions above, and as the last resort SymPy's own ``evalf``
    (mpmath), point by point through ``np.frompyfunc``. ``(None, reason)`` if none.
    """
    from sympy.printing.numpy import SciPyPrinter

    name = head.__name__
    dotted = SciPyPrinter().known_functions.get(name)
    if dotted is not None:
        module, _, attribute = dotted.rpartition(".")
        loaded = importlib.import_module(module) if module in _NUMERIC_MODULES else None
        function = getattr(loaded, attribute, None)
        if function is not None:
            return _real_valued(function), dotted
    if name in _TUPLE_ELEMENTS:
        attribute, position = _TUPLE_ELEMENTS[name]
        function = getattr(importlib.import_module("scipy.special"), attribute)
        return _real_valued(lambda *a: function(*a)[position]), f"scipy.special.{attribute}[{position}]"
    if name in _REORDERED:
        attribute, order = _REORDERED[name]
        function = getattr(importlib.import_module("scipy.special"), attribute)
        return _real_valued(lambda *a: function(*(a[i] for i in order))), f"scipy.special.{attribute}"
    if _evalf_knows(head):
        return _evalf_implementation(head), "mpmath (SymPy's evalf)"
    return None, "neither SciPy, NumPy nor mpmath evaluates it"


def _evalf_knows(head) -> bool:
    from sympy.utilities.lambdify import MPMATH_TRANSLATIONS

    own_evalf = getattr(head, "_eval_evalf", None) is not sympy.Function._eval_evalf
    return own_evalf or hasattr(mpmath, MPMATH_TRANSLATIONS.get(head.__name__, head.__name__))


def _evalf_implementation(head):
    def point(*args):
        # Integral values as Integers: SymPy evaluates yn(1, x) but not yn(1.0, x).
        exact = (sympy.Integer(int(a)) if float(a).is_integer() else sympy.Float(float(a)) for a in args)
        value = head(*exact).evalf(17)
        try:
            return float(value)
        except TypeError:  # complex or not a number
            return float("nan")

    ufuncs: dict = {}

    def implementation(*args):
        ufunc = ufuncs.get(len(args))
        if ufunc is None:
            ufunc = ufuncs[len(args)] = np.frompyfunc(point, len(args), 1)
        value = np.asarray(ufunc(*args), dtype=np.float64)
        return value[()] if value.ndim == 0 else value

    return implementation


def sympy_function_primitive(head) -> Primitive:
    """The primitive recording the SymPy function class ``head`` (made once per class).

    Its partials are SymPy's own ``fdiff``, recorded into the graph by the same importer,
    with the function itself replaced by the node's output (``out``).
    """
    primitive = _SYMPY_FUNCTION_PRIMITIVES.get(head)
    if primitive is not None:
        return primitive
    implementation, source = numeric_implementation(head)
    if implementation is None:
        raise TracingError(
            f"from_sympy: SymPy's {head.__name__} has no numeric implementation symad knows "
            f"({source}); supported: {', '.join(sorted(_supported_names()))}, and SymPy "
            "functions that SciPy, NumPy or mpmath evaluate. Register a custom primitive "
            "(@sd.primitive) instead"
        )
    primitive = Primitive(
        f"sympy.{head.__name__}", head, implementation, _fdiff_partials(head), variadic=True)
    _SYMPY_FUNCTION_PRIMITIVES[head] = P.register(primitive)
    return primitive


def _fdiff_partials(head):
    return lambda out, operands: _LazyPartials(head, out, operands)


class _LazyPartials:
    """The partials of a SymPy function node, each built when the chain rule asks for it.

    A variadic rule gives every operand's partial, but only those asked for may be built:
    SymPy has none w.r.t. a constant operand such as a polynomial's degree (that raises).
    """

    def __init__(self, head, out, operands):
        self.head, self.out, self.operands = head, out, operands

    def __len__(self) -> int:
        return len(self.operands)

    def __iter__(self):
        return (self[index] for index in range(len(self.operands)))

    def __getitem__(self, index):
        if special._is_held_constant(self.operands[index]):
            return None  # a constant (or stop_gradient) operand: structurally zero
        derivative, dummies, out_dummy = _symbolic_partial(self.head, len(self.operands), index)
        bindings = {d: as_atoms(o)[()] for d, o in zip(dummies, self.operands)}
        bindings[out_dummy] = as_atoms(self.out)[()]
        return Tracer.of_atom(_Importer(current_builder(), bindings).atom(derivative))


_PARTIAL_CACHE: dict = {}


def _symbolic_partial(head, arity: int, index: int):
    """SymPy's derivative of ``head(a0, a1, ...)`` w.r.t. ``a<index>``, with ``head(...)`` as ``out``."""
    key = (head, arity, index)
    cached = _PARTIAL_CACHE.get(key)
    if cached is None:
        dummies = tuple(sympy.Dummy(f"a{i}", real=True) for i in range(arity))
        out_dummy = sympy.Dummy("out", real=True)
        applied = head(*dummies)
        try:
            derivative = sympy.diff(applied, dummies[index])
        except (sympy.core.function.ArgumentIndexError, NotImplementedError, TypeError):
            derivative = None
        if derivative is None or derivative.has(sympy.Derivative, sympy.Subs):
            cached = _PARTIAL_CACHE[key] = (None, dummies, out_dummy)
        else:
            cached = _PARTIAL_CACHE[key] = (derivative.xreplace({applied: out_dummy}), dummies, out_dummy)
    if cached[0] is None:
        raise DifferentiationError(
            f"SymPy's {head.__name__} has no closed-form derivative w.r.t. its argument "
            f"{index} (fdiff gives none); keep that argument constant (sd.stop_gradient) or "
            "register a custom primitive (@sd.primitive) with .defpartials"
        )
    return cached


def _supported_names() -> set:
    names = {getattr(head, "__name__", str(head)) for head in
             list(_PRIMITIVE_OF_CLASS) + list(_ADAPTERS)}
    names.discard("sympy_function")
    return names
