"""Elementwise functions: one primitive per NumPy ufunc, ``where`` and ``clip``.

Part of :mod:`symad.numpy`, which re-exports its public names.
"""

from __future__ import annotations

import builtins
import inspect

import numpy as _np
import sympy

from symad import array_primitives as A
from symad import primitives as P
from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.graph import current_builder
from symad.tracer import (
    Parameter,
    Tracer,
    apply,
    as_atom,
    contains_traced,
    is_complex_value,
    record_scalars,
)

#: The names symad.numpy re-exports from this family.
__all__ = [
    "add", "subtract", "multiply", "divide", "true_divide", "negative", "power", "sqrt",
    "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
    "arctanh", "abs", "absolute", "sign", "maximum", "minimum", "hypot", "logaddexp",
    "logaddexp2", "erf",
    "erfc", "sigmoid", "softplus", "less", "less_equal", "greater", "greater_equal", "equal",
    "not_equal", "logical_and", "logical_or", "logical_not", "stop_gradient", "positive",
    "square", "reciprocal", "where", "clip", "deg2rad", "rad2deg", "radians", "degrees",
    "fmax", "fmin", "floor", "ceil", "trunc", "fix", "rint", "round", "around", "mod",
    "remainder", "fmod", "ldexp", "frexp", "real", "imag", "conj", "conjugate", "angle",
    "real_if_close",
]

# ---------------------------------------------------------------------------
# Elementwise functions
# ---------------------------------------------------------------------------


def concrete(value):
    if isinstance(value, Parameter):
        return value.value
    if isinstance(value, (list, tuple)):
        return type(value)(concrete(v) for v in value)
    return value


def elementwise_function(primitive, public_name: str, doc: str):
    def function(*operands):
        scalar = record_scalars(primitive, operands)
        if scalar is not None:  # traced scalars and numbers: recorded without array logic
            return scalar
        if builtins.any(contains_traced(operand) for operand in operands):
            return apply(primitive, *operands)
        with _np.errstate(all="ignore"):
            return primitive.numpy_impl(*(_np.asarray(concrete(o)) for o in operands))

    function.__name__ = function.__qualname__ = public_name
    function.__doc__ = doc
    function.primitive = primitive
    if not primitive.variadic:
        # Name the arguments like NumPy's ufuncs, so traced inputs read x (or x1, x2).
        names = ["x"] if primitive.arity == 1 else [f"x{i + 1}" for i in range(primitive.arity)]
        function.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
        )
    return function


add = elementwise_function(P.add_p, "add", "Elementwise ``a + b``.")
subtract = elementwise_function(P.sub_p, "subtract", "Elementwise ``a - b``.")
multiply = elementwise_function(P.mul_p, "multiply", "Elementwise ``a * b``.")
divide = elementwise_function(P.div_p, "divide", "Elementwise ``a / b``.")
true_divide = divide
negative = elementwise_function(P.neg_p, "negative", "Elementwise ``-x``.")
power = elementwise_function(P.pow_p, "power", "Elementwise ``a ** b`` (the exponent may be traced too).")
sqrt = elementwise_function(P.sqrt_p, "sqrt", "Elementwise square root.")
cbrt = elementwise_function(P.cbrt_p, "cbrt", "Elementwise real cube root.")
exp = elementwise_function(P.exp_p, "exp", "Elementwise exponential.")
exp2 = elementwise_function(P.exp2_p, "exp2", "Elementwise ``2 ** x``.")
expm1 = elementwise_function(P.expm1_p, "expm1", "Elementwise ``exp(x) - 1``, accurate near 0.")
log = elementwise_function(P.log_p, "log", "Elementwise natural logarithm.")
log2 = elementwise_function(P.log2_p, "log2", "Elementwise base-2 logarithm.")
log10 = elementwise_function(P.log10_p, "log10", "Elementwise base-10 logarithm.")
log1p = elementwise_function(P.log1p_p, "log1p", "Elementwise ``log(1 + x)``, accurate near 0.")
sin = elementwise_function(P.sin_p, "sin", "Elementwise sine.")
cos = elementwise_function(P.cos_p, "cos", "Elementwise cosine.")
tan = elementwise_function(P.tan_p, "tan", "Elementwise tangent.")
arcsin = elementwise_function(P.arcsin_p, "arcsin", "Elementwise inverse sine.")
arccos = elementwise_function(P.arccos_p, "arccos", "Elementwise inverse cosine.")
arctan = elementwise_function(P.arctan_p, "arctan", "Elementwise inverse tangent.")
arctan2 = elementwise_function(P.arctan2_p, "arctan2", "Elementwise ``arctan(y / x)`` in the right quadrant.")
sinh = elementwise_function(P.sinh_p, "sinh", "Elementwise hyperbolic sine.")
cosh = elementwise_function(P.cosh_p, "cosh", "Elementwise hyperbolic cosine.")
tanh = elementwise_function(P.tanh_p, "tanh", "Elementwise hyperbolic tangent.")
arcsinh = elementwise_function(P.arcsinh_p, "arcsinh", "Elementwise inverse hyperbolic sine.")
arccosh = elementwise_function(P.arccosh_p, "arccosh", "Elementwise inverse hyperbolic cosine.")
arctanh = elementwise_function(P.arctanh_p, "arctanh", "Elementwise inverse hyperbolic tangent.")
_real_abs = elementwise_function(P.abs_p, "abs", "Elementwise absolute value.")
sign = elementwise_function(P.sign_p, "sign", "Elementwise sign (-1, 0 or 1); its derivative is zero.")
maximum = elementwise_function(P.maximum_p, "maximum", "Elementwise maximum of two arrays.")
minimum = elementwise_function(P.minimum_p, "minimum", "Elementwise minimum of two arrays.")
hypot = elementwise_function(P.hypot_p, "hypot", "Elementwise ``sqrt(a**2 + b**2)`` without overflow.")
floor = elementwise_function(P.floor_p, "floor", "Elementwise floor; its derivative is zero.")
ceil = elementwise_function(P.ceiling_p, "ceil", "Elementwise ceiling; its derivative is zero.")
mod = elementwise_function(
    P.mod_p, "mod",
    """Elementwise ``a % b`` with the sign of ``b`` (NumPy's ``mod``, ``remainder``, Python's ``%``).

    Piecewise linear: the derivative is 1 in ``a`` and ``-floor(a / b)`` in ``b`` (JAX's),
    also at the jumps, where ``a / b`` is an integer.

    >>> import symad as sd
    >>> [float(g) for g in sd.grad(lambda a, b: a % b, argnums=(0, 1))(0.7, 0.3)]
    [1.0, -2.0]
    """)
remainder = mod
fmod = elementwise_function(
    P.fmod_p, "fmod",
    "Elementwise C ``fmod(a, b)``: the remainder with the sign of ``a``; its derivative is 1 in "
    "``a`` and ``-trunc(a / b)`` in ``b`` (JAX's).")
_real_logaddexp = elementwise_function(P.logaddexp_p, "logaddexp",
                                       "Elementwise ``log(exp(a) + exp(b))``, stably.")
_real_logaddexp2 = elementwise_function(P.logaddexp2_p, "logaddexp2",
                                        "Elementwise ``log2(2**a + 2**b)``, stably.")


def _complex_capable(real_function, log_base):
    """``real_function`` on real operands; on complex ones (which NumPy's ufunc refuses) JAX's
    value, the principal ``log(b**x1 + b**x2) / log(b)``: holomorphic, so its derivatives
    follow JAX's convention for complex functions. Large real parts overflow there."""
    def function(x1, x2, /):
        if not (is_complex_value(x1) or is_complex_value(x2)):
            return real_function(x1, x2)
        if log_base == 1:
            return log(add(exp(x1), exp(x2)))
        total = add(exp(multiply(x1, log_base)), exp(multiply(x2, log_base)))
        return divide(log(total), log_base)
    function.__name__ = function.__qualname__ = real_function.__name__
    function.primitive = real_function.primitive
    return function


logaddexp = _complex_capable(_real_logaddexp, 1)
logaddexp.__doc__ = """Elementwise ``log(exp(x1) + exp(x2))``, stably for real values; of complex
values (NumPy's ufunc takes none) JAX's value, the principal ``log(exp(x1) + exp(x2))``.

>>> import numpy as np, symad as sd, symad.numpy as snp
>>> complex(sd.grad(lambda a: snp.logaddexp(a, 0.0), holomorphic=True)(1j))
(0.5+0.27315124492189524j)
"""
logaddexp2 = _complex_capable(_real_logaddexp2, _np.log(2.0))
logaddexp2.__doc__ = """Elementwise ``log2(2**x1 + 2**x2)``, stably for real values; of complex
values JAX's value, the principal ``log2(2**x1 + 2**x2)`` (as :func:`logaddexp`)."""
erf = elementwise_function(P.erf_p, "erf", "Elementwise error function.")
erfc = elementwise_function(P.erfc_p, "erfc", "Elementwise complementary error function.")
sigmoid = elementwise_function(P.sigmoid_p, "sigmoid", "Elementwise logistic function ``1/(1 + exp(-x))``.")
softplus = elementwise_function(P.softplus_p, "softplus", "Elementwise ``log(1 + exp(x))``, stably.")
less = elementwise_function(P.less_p, "less", "Elementwise ``a < b`` (for snp.where).")
less_equal = elementwise_function(P.less_equal_p, "less_equal", "Elementwise ``a <= b``.")
greater = elementwise_function(P.greater_p, "greater", "Elementwise ``a > b``.")
greater_equal = elementwise_function(P.greater_equal_p, "greater_equal", "Elementwise ``a >= b``.")
equal = elementwise_function(P.equal_p, "equal", "Elementwise ``a == b``.")
not_equal = elementwise_function(P.not_equal_p, "not_equal", "Elementwise ``a != b``.")
logical_and = elementwise_function(P.logical_and_p, "logical_and", "Elementwise ``a and b`` of conditions.")
logical_or = elementwise_function(P.logical_or_p, "logical_or", "Elementwise ``a or b`` of conditions.")
logical_not = elementwise_function(P.logical_not_p, "logical_not", "Elementwise ``not a`` of a condition.")
_select = elementwise_function(P.select_p, "where", "")
stop_gradient = elementwise_function(
    P.stop_gradient_p, "stop_gradient",
    "``x`` itself, with no derivative of any order flowing through it.",
)


def positive(x):
    """Elementwise ``+x`` (``x`` itself)."""
    return x


def square(x):
    """Elementwise ``x ** 2``."""
    return power(x, 2)


def reciprocal(x):
    """Elementwise ``1 / x``."""
    return divide(1, x)


def deg2rad(x):
    """Elementwise ``x * (pi / 180)``: degrees to radians (NumPy's values exactly)."""
    return multiply(x, _DEGREE)


def rad2deg(x):
    """Elementwise ``x * (180 / pi)``: radians to degrees (NumPy's values exactly)."""
    return multiply(x, 1 / _DEGREE)


radians = deg2rad
degrees = rad2deg
# pi / 180 as SymPy prints it; float(pi / 180) and float(180 / pi) are NumPy's factors.
_DEGREE = sympy.pi / 180


def ldexp(x1, x2):
    """Elementwise ``x1 * 2**x2`` for integer exponents ``x2`` (numbers, not traced): a
    product with the exact power of two, so NumPy's values."""
    if contains_traced(x2):
        raise TracingError(
            f"function {traced_function_name()!r} calls ldexp with a traced exponent; the "
            "exponent is an integer, with no derivative: pass numbers (or write x * 2.0 ** n)")
    exponent = _np.asarray(x2)
    if exponent.dtype.kind not in "iub" or exponent.size and not (
            -1074 <= exponent.min() and exponent.max() <= 1023):
        raise TracingError(
            f"function {traced_function_name()!r} calls ldexp with exponents {x2!r}; symad "
            "traces integer exponents from -1074 to 1023 (where 2**n is a float)")
    return multiply(x1, _np.ldexp(1.0, exponent))


def frexp(x):
    """NumPy's ``frexp``: ``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and
    ``0.5 <= |mantissa| < 1`` (both 0 at 0; ``x`` and 0 at inf and NaN).

    Traced, the exponent is a float holding NumPy's integer, with no derivative; the mantissa
    is ``x`` scaled by the exact power of two, so NumPy's values, and its derivative is
    ``2**-exponent`` (JAX's). The exponent is ``floor(log2|x|) + 1``, corrected by one where
    ``log2`` rounds across a power of two.

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: np.frexp(x), np.zeros(2))(np.array([12.0, -0.375]))
    (array([ 0.75, -0.75]), array([ 4., -1.]))
    >>> float(sd.grad(lambda x: np.frexp(x)[0])(12.0))
    0.0625
    """
    if not contains_traced(x):
        return _np.frexp(x)
    regular = logical_and(not_equal(x, 0.0), less(abs(x), _np.inf))  # not 0, inf or NaN
    safe = where(regular, x, 1.0)
    exponent = add(floor(log2(abs(safe))), 1.0)
    half = floor(multiply(exponent, -0.5))  # two exact scalings: 2**-e alone overflows at 2**-1074
    mantissa = multiply(multiply(safe, exp2(half)), exp2(subtract(negative(exponent), half)))
    low, high = less(abs(mantissa), 0.5), greater_equal(abs(mantissa), 1.0)
    mantissa = where(low, multiply(mantissa, 2.0), where(high, multiply(mantissa, 0.5), mantissa))
    exponent = where(low, subtract(exponent, 1.0), where(high, add(exponent, 1.0), exponent))
    return where(regular, mantissa, x), where(regular, exponent, 0.0)


def _is_nan(x):
    return not_equal(x, x)


def fmax(x1, x2):
    """Elementwise maximum ignoring nan: the other operand where one is nan (nan if both are).

    The derivative is :func:`maximum`'s (half to each operand at a tie, as JAX's ``fmax``);
    where one operand is nan it all goes to the other.
    """
    return where(_is_nan(x1), x2, where(_is_nan(x2), x1, maximum(x1, x2)))


def fmin(x1, x2):
    """Elementwise minimum ignoring nan, as :func:`fmax`."""
    return where(_is_nan(x1), x2, where(_is_nan(x2), x1, minimum(x1, x2)))


def trunc(x):
    """Elementwise rounding towards zero (``fix``); its derivative is zero."""
    return where(less(x, 0), ceil(x), floor(x))


fix = trunc


def rint(x):
    """Elementwise rounding to the nearest integer, halves to even (NumPy's values, signed
    zeros included); its derivative is zero.

    >>> import numpy as np, symad as sd
    >>> [float(v) for v in sd.trace(np.rint, np.array([-2.5, -0.5, 0.5, 1.5, 2.7]))(
    ...     np.array([-2.5, -0.5, 0.5, 1.5, 2.7]))]
    [-2.0, -0.0, 0.0, 2.0, 3.0]
    """
    below = floor(x)
    half = add(below, 0.5)  # exact below 2**52; above, x is an integer and rounds to itself
    odd = equal(mod(below, 2), 1)
    up = logical_or(greater(x, half), logical_and(equal(x, half), odd))
    rounded = where(up, add(below, 1), below)
    return where(equal(rounded, 0), trunc(x), rounded)  # -0.3 rounds to -0.0, as trunc does


def round(a, decimals=0):  # noqa: A001 - NumPy's name
    """Elementwise rounding to ``decimals`` decimals (halves to even, :func:`rint` of a
    scaled value, as NumPy computes it); its derivative is zero."""
    if not isinstance(decimals, int):
        raise TracingError(
            f"function {traced_function_name()!r} calls round with decimals={decimals!r}; "
            "symad traces round with a Python integer number of decimals")
    if decimals == 0:
        return rint(a)
    if decimals > 0:
        return divide(rint(multiply(a, 10.0 ** decimals)), 10.0 ** decimals)
    return multiply(rint(divide(a, 10.0 ** -decimals)), 10.0 ** -decimals)


around = round


def where(condition, if_true=None, if_false=None):
    """Elementwise ``if_true`` where ``condition`` holds, else ``if_false``: the way to branch.

    >>> import symad as sd, symad.numpy as snp
    >>> relu = lambda x: snp.where(x > 0, x, 0.0)
    >>> float(sd.grad(relu)(2.0)), float(sd.grad(relu)(-2.0))
    (1.0, 0.0)
    """
    if if_true is None or if_false is None:
        raise TracingError(
            f"function {traced_function_name()!r} calls where(condition) with one argument, "
            "which gives indices that depend on the traced values and is not traced. Select "
            "with the three-argument form, snp.where(condition, if_true, if_false)"
        )
    return _select(condition, if_true, if_false)


def clip(x, a_min=None, a_max=None, *, min=None, max=None):  # noqa: A002 - NumPy 2's keywords
    """Elementwise ``x`` limited to ``[a_min, a_max]`` (either bound may be None).

    NumPy 2's keyword spellings ``min=`` and ``max=`` are accepted too.
    """
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


# ---------------------------------------------------------------------------
# Complex parts. A real traced value is its own real part and conjugate and has
# imaginary part 0 (no node); a complex one records real/imag/conj/modulus
# (symad.array_primitives), and its angle is arctan2 of its parts, as NumPy computes it.
# ---------------------------------------------------------------------------


def _traced_complex(x) -> bool:
    return contains_traced(x) and is_complex_value(x)


def _record_part(primitive, x):
    return Tracer.of_atom(current_builder().record(primitive, (as_atom(x),)))


def real(x):
    """``np.real``: the real part (of a real traced value, the value itself).

    >>> import symad as sd, numpy as np
    >>> sd.grad(lambda x: np.sum(np.real(x) ** 2))(np.array([1.0, 2.0])).tolist()
    [2.0, 4.0]
    >>> complex(sd.grad(lambda z: np.real(z) ** 2)(3 + 4j))   # JAX's convention
    (6+0j)
    """
    if _traced_complex(x):
        return _record_part(A.real_p, x)
    return x if contains_traced(x) else _np.real(concrete(x))


def imag(x):
    """``np.imag``: the imaginary part (of a real traced value, exact zeros of its shape).

    >>> import symad as sd
    >>> complex(sd.grad(lambda z: imag(z) ** 2)(3 + 4j))   # JAX: d/dz conj-convention
    -8j
    """
    if _traced_complex(x):
        return _record_part(A.imag_p, x)
    return subtract(x, x) if contains_traced(x) else _np.imag(concrete(x))


def conjugate(x):
    """``np.conjugate`` (``np.conj``): the complex conjugate (of a real value, the value).

    >>> import symad as sd
    >>> sd.trace(lambda z: conjugate(z) * z, 1j).formula()
    z*conjugate(z)
    """
    if _traced_complex(x):
        return _record_part(A.conj_p, x)
    return x if contains_traced(x) else _np.conjugate(concrete(x))


conj = conjugate


def angle(z, deg=False):
    """``np.angle``: ``arctan2(imag(z), real(z))``, as NumPy computes it. Of a real traced
    value: 0 for positive values, pi (180 with ``deg``) for negative ones and -0.0, nan for
    nan, with a derivative of exactly zero, also at 0 (where arctan2's partial would be 0/0).

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda z: np.angle(z), np.ones(3))(np.array([2.0, -1.0, -0.0])).tolist()
    [0.0, 3.141592653589793, 3.141592653589793]
    >>> float(sd.trace(lambda z: np.angle(z), 1j)(-1 + 1j))
    2.356194490192345
    """
    if _traced_complex(z):
        radians = arctan2(imag(z), real(z))
    elif contains_traced(z):
        radians = stop_gradient(arctan2(subtract(z, z), z))
    else:
        return _np.angle(concrete(z), deg)
    return multiply(radians, 180 / _np.pi) if deg else radians


def abs(x):  # noqa: A001
    """Elementwise absolute value; of a complex value its modulus (NumPy's ``np.abs``), whose
    derivative is JAX's: ``Re(conj(z) t) / |z|``, 0 at ``z = 0``.

    >>> import symad as sd
    >>> complex(sd.grad(lambda z: abs(z) ** 2)(3 + 4j))   # 2 conj(z), as jax.grad gives
    (6-8j)
    """
    if _traced_complex(x):
        return _record_part(A.modulus_p, x)
    return _real_abs(x)


abs.primitive = P.abs_p  # NumPy's np.abs of a real traced scalar: recorded directly
absolute = abs


def real_if_close(x, tol=100):
    """``np.real_if_close`` of a traced value: the value itself (a complex value stays
    complex: whether it is close to real is known only at evaluation)."""
    return x


# ---------------------------------------------------------------------------
# The NumPy names this family implements (symad.numpy dispatches them here)
# ---------------------------------------------------------------------------

#: NumPy's ufuncs by name -> their traceable function.
NUMPY_UFUNCS = {
    "add": add, "subtract": subtract, "multiply": multiply, "divide": divide,
    "true_divide": divide, "negative": negative, "positive": positive, "power": power,
    "float_power": power, "square": square, "reciprocal": reciprocal, "sqrt": sqrt,
    "cbrt": cbrt, "exp": exp, "exp2": exp2, "expm1": expm1, "log": log, "log2": log2,
    "log10": log10, "log1p": log1p, "sin": sin, "cos": cos, "tan": tan, "arcsin": arcsin,
    "arccos": arccos, "arctan": arctan, "arctan2": arctan2, "sinh": sinh, "cosh": cosh,
    "tanh": tanh, "arcsinh": arcsinh, "arccosh": arccosh, "arctanh": arctanh,
    "absolute": abs, "fabs": abs, "sign": sign, "maximum": maximum, "minimum": minimum,
    "hypot": hypot, "frexp": frexp, "logaddexp": logaddexp, "logaddexp2": logaddexp2, "less": less, "less_equal": less_equal,
    "greater": greater, "greater_equal": greater_equal, "equal": equal,
    "not_equal": not_equal, "logical_and": logical_and,
    "logical_or": logical_or, "logical_not": logical_not, "bitwise_and": logical_and,
    "bitwise_or": logical_or, "invert": logical_not, "deg2rad": deg2rad, "rad2deg": rad2deg,
    "radians": deg2rad, "degrees": rad2deg, "fmax": fmax, "fmin": fmin, "floor": floor,
    "ceil": ceil, "trunc": trunc, "rint": rint, "mod": mod, "remainder": mod, "fmod": fmod,
    "ldexp": ldexp, "conjugate": conjugate,
}
#: NumPy's array functions -> their traceable function.
NUMPY_FUNCTIONS = {_np.where: where, _np.clip: clip, _np.round: round, _np.fix: fix,
                   _np.real: real, _np.imag: imag, _np.angle: angle,
                   _np.real_if_close: real_if_close}
if hasattr(_np, "around"):  # an alias of round, deprecated in NumPy 2
    NUMPY_FUNCTIONS[_np.around] = round
