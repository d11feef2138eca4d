"""The ``"mpmath"`` backend: every node of the graph evaluated by mpmath at ``dps`` digits.

``F.compile("mpmath", dps=50)`` walks ``F``'s graph node by node
(:mod:`symad.compile.precise.interpret`) with each primitive's mpmath implementation
(the ``"mpmath"`` spelling of its stanza; :data:`MPMATH_TABLE` lists them), the
special functions of :mod:`symad.special` included, each computed by mpmath's
own function at the working precision. The
graph's constants are exact SymPy numbers and are converted at that precision
(a float written in the function, ``0.1``, is the double it always was: its
binary value, exactly).

The implementations keep NumPy's real semantics, so a graph means the same here
as in float64: a result that is not real (``log(-1)``, ``sqrt(-2)``) is nan, a
division by zero is a signed infinity (nan for ``0/0``), a pole is nan or an
infinity as SciPy gives it. Where a formula would cancel at the working
precision (``polygamma(n, a + b) - polygamma(n, a)`` for small ``b``, ``1 + W(x)``
next to ``x = -1/e``, ``erfc^-1`` of a tiny number) the entry computes with as
many extra bits as the cancellation costs, so each node's value is correct to the
working precision: the error of a result is the graph's own conditioning, not
its primitives'.

>>> import symad as sd, numpy as np, mpmath
>>> f = sd.derivative(lambda x: np.exp(np.sin(x)), 5).trace(0.5).compile("mpmath", dps=40)
>>> value = f(mpmath.mpf("0.5"))
>>> print(mpmath.nstr(value, 30))
1.18841913019349353050638962666
>>> with mpmath.workdps(60):
...     print(mpmath.nstr(mpmath.diff(lambda t: mpmath.exp(mpmath.sin(t)), mpmath.mpf("0.5"), 5), 30))
1.18841913019349353050638962666
"""

from __future__ import annotations

import mpmath
import sympy
from mpmath.libmp import NoConvergence  # not at mpmath's top level in mpmath 1.3

from symad.compile.precise.interpret import Arithmetic, number_constant, scalar_argument
from symad.errors import CompileError
from symad.ir.primitive import PRIMITIVES

__all__ = ["MpmathArithmetic", "MPMATH_TABLE", "mpmath_implementation", "mpmath_value"]

NAN = mpmath.mpf("nan")


def _real(value):
    """A complex result is nan (NumPy's real functions give nan where the result is not real)."""
    if isinstance(value, mpmath.mpc):
        return value.real if value.imag == 0 else NAN
    return value


def _total(function):
    """``function`` returning nan instead of raising at a pole or outside its domain.

    A graph evaluates both branches of a ``where`` (the double-``where`` of the
    derivative rules sends the branch not taken a harmless point, but not always
    one mpmath accepts): as in NumPy, an undefined value is nan, not an exception.
    """

    def evaluate(*args):
        try:
            return _real(function(*args))
        except (ZeroDivisionError, ValueError, NoConvergence):
            return NAN

    evaluate.__name__ = getattr(function, "__name__", "evaluate")
    return evaluate


def _sympy_evalf(head):
    """A SymPy function with no mpmath counterpart here, through SymPy's own evalf (mpmath)."""

    def evaluate(*args):
        digits = mpmath.mp.dps + 5
        exact = [sympy.Integer(int(a)) if mpmath.isint(a) else sympy.Float(a, digits) for a in args]
        value = head(*exact).evalf(digits)
        if not (value.is_Number and value.is_extended_real):
            return NAN
        return mpmath.mpf(value._to_mpmath(mpmath.mp.prec + 10)) if value.is_Float else mpmath.mpf(value)

    return evaluate


# ---------------------------------------------------------------------------
# The implementations: each primitive's "mpmath" spelling
# ---------------------------------------------------------------------------

_IMPLEMENTATIONS: dict = {}  # primitive -> its spelling made total (built on first use)


def mpmath_implementation(primitive):
    """``primitive``'s mpmath implementation (its stanza's ``"mpmath"`` spelling), made total:
    nan, not an exception, where its value is undefined; None if it has none. Truth values
    (comparisons, logical operations, ``where``) are passed through as they are."""
    found = _IMPLEMENTATIONS.get(primitive)
    if found is None:
        spelling = primitive.spelling("mpmath")
        if spelling is None:
            return None
        truth_values = primitive.returns_boolean or primitive.boolean_operands
        found = _IMPLEMENTATIONS[primitive] = spelling if truth_values else _total(spelling)
    return found


#: A built-in primitive's name -> its mpmath implementation: a view of the stanzas, for
#: listing (the backend reads each primitive's own spelling, :func:`mpmath_implementation`).
MPMATH_TABLE: dict = {name: mpmath_implementation(primitive) for name, primitive in PRIMITIVES.items()
                      if primitive.spelling("mpmath") is not None}


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------


def mpmath_value(constant) -> mpmath.mpf | bool:
    """An exact SymPy constant of a graph as an mpmath number at the working precision.

    >>> with mpmath.workdps(30):
    ...     print(mpmath_value(sympy.Rational(1, 3)), mpmath_value(sympy.sqrt(sympy.pi) / 2))
    0.333333333333333333333333333333 0.886226925452758013649083741671
    """
    exact = number_constant(constant, mpmath.mpf)
    if exact is not None:
        return exact
    value = constant.evalf(mpmath.mp.dps + 10)
    if not (value.is_Number and value.is_extended_real):
        raise CompileError(f"the graph constant {constant} is not a real number")
    return +mpmath.mpf(value._to_mpmath(mpmath.mp.prec + 30))


def _argument(value, where: str) -> mpmath.mpf:
    """One number a user passed, as an exact mpmath number (floats keep their binary value).

    A decimal string is parsed by mpmath at the working precision (``"0.7"`` is the
    decimal 0.7 to ``dps`` digits, where the float 0.7 is a double).
    """
    return scalar_argument(
        value, where, mpmath.mpf, mpmath_value,
        "the mpmath backend takes real numbers: floats, ints, mpmath.mpf, decimal strings "
        "('0.7': the decimal at full precision), fractions.Fraction, SymPy numbers, or arrays of them")


class MpmathArithmetic(Arithmetic):
    """mpmath's real numbers at ``dps`` decimal digits (``mpmath.mp``, set during each evaluation)."""

    name = "mpmath"

    def implementation(self, primitive):
        found = mpmath_implementation(primitive)
        if found is None and primitive.name.startswith("sympy."):
            # A SymPy function recorded by sd.from_sympy: its class is its SymPy form.
            found = _total(_sympy_evalf(primitive._to_sympy))
        return found

    def missing(self, primitive, function_name: str) -> str:
        return (
            f"{function_name}: the mpmath backend has no implementation of the primitive "
            f"{primitive.name!r} (a custom primitive's numeric implementation works in float64 "
            "only). Write it with traceable operations (np.exp, ...) instead of @sd.primitive, "
            "so that every backend evaluates it, or evaluate with the float64 backends")

    def precision(self):
        return mpmath.workdps(self.dps)

    def constant(self, atom):
        return mpmath_value(atom)

    def argument(self, value, where: str):
        return _argument(value, where)
