"""The ``"interval"`` backend: every node of the graph enclosed by an ``mpmath.iv`` interval.

``F.compile("interval", dps=30)`` walks ``F``'s graph node by node
(:mod:`symad.compile.precise.interpret`) with each primitive's enclosure (the ``"interval"``
spelling of its stanza; :data:`INTERVAL_TABLE` lists them), in interval
arithmetic at ``dps`` digits: each node's interval contains the exact value of
that node for every input in the input intervals, so each output contains the
exact value of the function (floats given as arguments are exact points; pass
``mpmath.iv.mpf([a, b])`` for a box).

How each primitive is enclosed is its stanza's ``"interval"`` spelling: a
callable, or a helper kind of this module (``("monotone", {"lower": 0})``,
``("corners", ...)``, ...) built from the primitive's ``"mpmath"`` spelling:

* by ``mpmath.iv``'s own rigorous operations (``+ - * /``, integer and real
  powers, ``exp``, ``log``, ``sqrt``, ``sin``, ``cos``, ``tan``, ``atan``,
  ``gamma``, ...) and what is composed of them (beta, the Pochhammer symbol,
  sin(pi x), sinc away from 0);
* on pieces where the function is monotone in each argument (the inverse
  trigonometric functions, digamma between its poles, the incomplete gamma and
  beta functions, Lambert W, the elliptic integrals, ...): its values at the
  corners of the box, each computed by mpmath's point function (the primitive's
  ``"mpmath"`` spelling) twice, at 30 and 60 bits beyond the working precision, and
  widened by twice their difference plus 2**-(p + 10) relative; the enclosure is
  as reliable as mpmath's point values are accurate, which mpmath gives to the
  last bits of its working precision;
* by a bound on the derivative (``|J_n'| <= 1``, ``|j_n'| <= 1``): the value at
  the midpoint, widened by the bound times the radius.

An argument outside a primitive's domain is first intersected with it (the exact
value, where it exists, lies in the intersection); an output whose exact value
is undefined (``log`` of a negative interval, a pole) is the whole line
``[-inf, +inf]``. A primitive with no enclosure at all -- a custom primitive, a
SymPy function from ``sd.from_sympy``, ``yv`` and the few others listed in
:data:`NO_ENCLOSURE`, or one outside the pieces it is enclosed on -- is never
evaluated at a point instead: its node is marked, a ``where`` whose condition is
decided drops the branch holding it, and a mark that reaches an output raises
:class:`~symad.errors.CompileError` naming the primitive.

>>> import symad as sd, numpy as np, mpmath
>>> f = sd.trace(lambda x: np.exp(np.sin(x)) * np.arctan(x), 0.5).compile("interval", dps=30)
>>> enclosure = f(0.5)
>>> with mpmath.workdps(50):
...     exact = mpmath.exp(mpmath.sin(mpmath.mpf(0.5))) * mpmath.atan(mpmath.mpf(0.5))
>>> exact in enclosure, enclosure.delta < 1e-29
(True, True)
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator

import mpmath
import sympy

from symad.compile.precise.interpret import Arithmetic, number_constant, scalar_argument
from symad.errors import CompileError
from symad.ir.primitive import PRIMITIVES

__all__ = ["IntervalArithmetic", "INTERVAL_TABLE", "NO_ENCLOSURE", "Unavailable", "interval_enclosure",
           "interval_value"]

iv = mpmath.iv
_make_mpf = mpmath.mp.make_mpf  # an mpf from libmp's raw tuple, without rounding
INF = mpmath.inf


class Unavailable:
    """A node the backend has no interval for: undefined there, or no enclosure known.

    ``undefined``: the exact value does not exist (a pole, outside the domain); it
    reaches an output as ``[-inf, +inf]``. Otherwise ``reason`` names the
    primitive that has no enclosure, and reaching an output raises.
    """

    __slots__ = ("reason", "undefined")

    def __init__(self, reason: str, undefined: bool):
        self.reason = reason
        self.undefined = undefined

    def __repr__(self) -> str:
        return f"Unavailable({self.reason!r})"


class _Undefined(Exception):
    """Raised inside an enclosure: the exact value is undefined (no part of the box is in the domain)."""


class _NoEnclosure(Exception):
    """Raised inside an enclosure: this part of the primitive's domain has none."""


# ---------------------------------------------------------------------------
# Endpoints and intervals
# ---------------------------------------------------------------------------


def _ends(x) -> tuple:
    """The endpoints of an interval as mpmath numbers (exact: no rounding)."""
    a, b = x._mpi_
    return _make_mpf(a), _make_mpf(b)


def _interval(lower, upper):
    """``[lower, upper]``, rounded outwards to the interval context's precision."""
    return iv.mpf((lower, upper))


def _is_point(x) -> bool:
    a, b = x._mpi_
    return a == b


def _clip(x, lower=-INF, upper=INF):
    """``x`` intersected with ``[lower, upper]``; :class:`_Undefined` if they do not meet."""
    a, b = _ends(x)
    a, b = max(a, lower), min(b, upper)
    if a > b or mpmath.isnan(a) or mpmath.isnan(b):
        raise _Undefined
    return a, b


def _point_enclosure(function, *point) -> tuple:
    """``(lower, upper)`` around ``function(*point)`` for mpmath numbers ``point`` (see the module)."""
    precision = iv.prec
    with mpmath.workprec(precision + 30):
        first = function(*point)
    with mpmath.workprec(precision + 60):
        second = function(*point)
        if isinstance(first, mpmath.mpc) or isinstance(second, mpmath.mpc) or \
                mpmath.isnan(first) or mpmath.isnan(second):
            raise _Undefined
        if mpmath.isinf(first) or mpmath.isinf(second):
            if first != second:
                return min(first, second), max(first, second)
            return first, first
        radius = 2 * abs(first - second) + abs(first) * mpmath.ldexp(1, -(precision + 10))
        return first - radius, first + radius


def _hull(bounds) -> tuple:
    bounds = list(bounds)
    return min(lower for lower, _ in bounds), max(upper for _, upper in bounds)


# ---------------------------------------------------------------------------
# Enclosures from mpmath's point functions
# ---------------------------------------------------------------------------


def _monotone(function, name: str, increasing: bool = True, lower=-INF, upper=INF):
    """The enclosure of ``f(*orders, x)``, monotone in ``x`` on ``[lower, upper]``, from its ends
    (``function``: f's mpmath implementation, ``name`` f's, for messages).

    Leading operands (a Bessel function's order, polygamma's ``n``) must be single
    numbers: constants of the graph.
    """
    lower, upper = mpmath.mpf(lower), mpmath.mpf(upper)

    def enclosure(*operands):
        *orders, x = operands
        constants = [_point_order(order, name) for order in orders]
        a, b = _clip(x, lower, upper)
        at_a = _point_enclosure(function, *constants, a)
        at_b = at_a if a == b else _point_enclosure(function, *constants, b)
        low, high = (at_a, at_b) if increasing else (at_b, at_a)
        return _interval(low[0], high[1])

    return enclosure


def _corners(function, domain):
    """The enclosure of a function (``function``: its mpmath implementation) monotone in each
    argument on the box ``domain(*xs)`` returns.

    Its extremes over a box are at corners: for each argument the function is
    monotone whatever the others are, so any point's value is between two
    corners' values.
    """

    def enclosure(*xs):
        box = domain(*xs)
        corners = itertools.product(*({a, b} for a, b in box))
        return _interval(*_hull(_point_enclosure(function, *corner) for corner in corners))

    return enclosure


def _of_absolute_value(function, name: str, increasing: bool):
    """An even function, monotone in ``|x|``."""
    inner = _monotone(function, name, increasing, lower=0)
    return lambda x: inner(abs(x))


def _endpoints(function):
    """A non-decreasing function computed exactly (sign, floor): its values at the ends."""

    def enclosure(x):
        a, b = _ends(x)
        return _interval(function(a), function(b))

    return enclosure


def _point_order(v, name: str):
    """The order of a Bessel function or of polygamma: a point interval (a constant of the graph)."""
    if not _is_point(v):
        raise _NoEnclosure(f"{name} with an order that is not a single number")
    return _ends(v)[0]


def _positive(x) -> bool:
    return _ends(x)[0] > 0


# ---------------------------------------------------------------------------
# Primitives enclosed by mpmath.iv's rigorous operations
# ---------------------------------------------------------------------------


def _power(base, exponent):
    if _is_point(exponent) and mpmath.isint(_ends(exponent)[0]):
        return base ** int(_ends(exponent)[0])  # iv's integer powers: even powers stay >= 0
    a, b = _clip(base, lower=mpmath.mpf(0))
    return _interval(a, b) ** exponent


def _clipped(function, lower=-INF, upper=INF):
    """``function`` (of ``mpmath.iv``) on its argument intersected with ``[lower, upper]``."""
    lower, upper = mpmath.mpf(lower), mpmath.mpf(upper)
    return lambda x: function(_interval(*_clip(x, lower, upper)))


_log = _clipped(iv.log, lower=0)


def _log_of_absolute_value(function):
    # log|gamma|, not iv.loggamma: mpmath 1.3's interval loggamma returned reversed ends at
    # x = 0.3 ([1.09579799481807556056299850030934, ...0309143] at 30 digits).
    return lambda *xs: _log(abs(function(*xs)))


#: sinc is at least this on the whole real line (its minimum, -0.2172 at x = +-1.4303).
_SINC_MINIMUM = mpmath.mpf("-0.2173")


def _sinc(sinc):
    def enclosure(x):
        a, b = _ends(x)
        if a > 0 or b < 0:
            return iv.sin(iv.pi * x) / (iv.pi * x)
        if a == b == 0:
            return iv.mpf(1)
        if -1 <= a and b <= 1:  # on [-1, 1] sinc rises to 1 at 0 and falls after: its least value is at an end
            return _interval(min(_point_enclosure(sinc, a)[0], _point_enclosure(sinc, b)[0]), mpmath.mpf(1))
        return _interval(_SINC_MINIMUM, mpmath.mpf(1))

    return enclosure


# ---------------------------------------------------------------------------
# Piecewise primitives, comparisons, selection
# ---------------------------------------------------------------------------


def _frac(x):
    a, b = _ends(x)
    whole = mpmath.floor(a)
    if mpmath.floor(b) == whole:
        return x - whole
    return _interval(mpmath.mpf(0), mpmath.mpf(1))


def _heaviside(x, at_zero):
    a, b = _ends(x)
    pieces = []
    if a < 0:
        pieces.append(iv.mpf(0))
    if a <= 0 <= b:
        pieces.append(at_zero)
    if b > 0:
        pieces.append(iv.mpf(1))
    return functools.reduce(_union, pieces)


def _union(x, y):
    (a, b), (c, d) = _ends(x), _ends(y)
    return _interval(min(a, c), max(b, d))


def _extremum(choose):
    def extremum(*xs):
        ends = [_ends(x) for x in xs]
        return _interval(choose(a for a, _ in ends), choose(b for _, b in ends))

    return extremum


def _less(x, y):
    (a, b), (c, d) = _ends(x), _ends(y)
    return True if b < c else False if a >= d else None


def _less_equal(x, y):
    (a, b), (c, d) = _ends(x), _ends(y)
    return True if b <= c else False if a > d else None


def _equal(x, y):
    (a, b), (c, d) = _ends(x), _ends(y)
    if b < c or d < a:
        return False
    return True if a == b == c == d else None


def _not(value):
    return None if value is None else not value


def _and(p, q):
    if p is False or q is False:
        return False
    return True if p is True and q is True else None


def _or(p, q):
    if p is True or q is True:
        return True
    return False if p is False and q is False else None


def _select(condition, if_true, if_false):
    """A decided condition picks its branch (the other may be unavailable); undecided, both."""
    if isinstance(condition, Unavailable):
        return condition  # a condition nothing encloses decides nothing
    if condition is True:
        return if_true
    if condition is False:
        return if_false
    for branch in (if_true, if_false):
        if isinstance(branch, Unavailable):
            return branch
    return _union(if_true, if_false)


# ---------------------------------------------------------------------------
# Special functions: domains and pieces
# ---------------------------------------------------------------------------


def _xlogy(x, y):
    if _is_point(x) and _ends(x)[0] == 0:
        return iv.mpf(0)
    return x * _log(y)


def _xlog1py(x, y):
    if _is_point(x) and _ends(x)[0] == 0:
        return iv.mpf(0)
    return x * _monotone(mpmath.log1p, "xlog1py", lower=-1)(y)


def _digamma(x):
    a, b = _ends(x)
    if b >= 0 >= a or (b < 0 and mpmath.floor(a) != mpmath.floor(b)) or (a <= 0 and mpmath.isint(a)):
        raise _Undefined  # a pole (0, -1, -2, ...) in the interval
    return _monotone(mpmath.digamma, "digamma")(x)


def _polygamma(function):
    def enclosure(n, x):
        order = _point_order(n, "polygamma")
        if order == 0:
            return _digamma(x)
        if not _positive(x):
            raise _NoEnclosure("polygamma(n, x) for x <= 0 (it is not monotone between its poles there)")
        # psi^(n) has the sign (-1)^(n+1) on x > 0 and its derivative the opposite: odd n falls.
        return _monotone(function, "polygamma", increasing=int(order) % 2 == 0)(n, x)

    return enclosure


def _polygamma_difference_box(n, a, b):
    order = _point_order(n, "polygamma_difference")
    if not (_positive(a) and _positive(a + b)):
        raise _NoEnclosure("polygamma_difference(n, a, b) outside a > 0, a + b > 0")
    return [(order, order), _ends(a), _ends(b)]


def _incomplete_gamma_box(a, x):
    if not _positive(a):
        raise _NoEnclosure("the incomplete gamma function for a shape a <= 0")
    return [_ends(a), _clip(x, lower=mpmath.mpf(0))]


def _incomplete_beta_box(a, b, x):
    if not (_positive(a) and _positive(b)):
        raise _NoEnclosure("the incomplete beta function for shapes a <= 0 or b <= 0")
    return [_ends(a), _ends(b), _clip(x, lower=mpmath.mpf(0), upper=mpmath.mpf(1))]


def _zeta_box(s, q):
    if not (_ends(s)[0] > 1 and _positive(q)):
        raise _NoEnclosure("zeta(s, q) outside s > 1, q > 0 (it is not monotone there)")
    return [_ends(s), _ends(q)]


def _derivative_bound(function, name: str, bound: int):
    """``f(n, x)`` with ``|df/dx| <= bound``: the midpoint's value, widened by ``bound`` times the radius."""

    def enclosure(n, x):
        order = _point_order(n, name)
        a, b = _ends(x)
        if mpmath.isinf(a) or mpmath.isinf(b):
            return _interval(-1, 1)  # |J_v| <= 1 (v >= 0 or an integer), |j_n| <= 1
        with mpmath.workprec(iv.prec + 30):
            middle, radius = (a + b) / 2, (b - a) / 2
        low, high = _point_enclosure(function, order, middle)
        with mpmath.workprec(iv.prec + 30):
            spread = bound * radius * (1 + mpmath.ldexp(1, -iv.prec))
            return _interval(low - spread, high + spread)

    return enclosure


def _bessel_j(function, name: str):
    bounded = _derivative_bound(function, name, 1)

    def enclosure(v, x):
        # |J_v| <= 1 for v >= 0, and J_v' = (J_{v-1} - J_{v+1})/2: |J_v'| <= 1 for integer v
        # (J_{-n} = (-1)^n J_n) and for v >= 1.
        order = _point_order(v, name)
        if not (mpmath.isint(order) or order >= 1):
            raise _NoEnclosure(f"{name} of order {order} (only integer orders and orders >= 1 have "
                               "the bound |J_v'| <= 1 it is enclosed with)")
        if not mpmath.isint(order):
            x = _interval(*_clip(x, lower=mpmath.mpf(0)))  # J_v(x) is not real for x < 0
        return bounded(v, x)

    return enclosure


def _bessel_i(function, name: str):
    def enclosure(v, x):
        order = _point_order(v, name)
        if mpmath.isint(order):
            if int(order) % 2 == 0:  # I_n(-x) = I_n(x): increasing in |x|
                return _monotone(function, name, lower=0)(v, abs(x))
            return _monotone(function, name)(v, x)  # odd n: an odd function increasing everywhere
        if order < 0:
            raise _NoEnclosure(f"{name}(v, x) of a negative non-integer order")
        return _monotone(function, name, lower=0)(v, x)  # not real for x < 0

    return enclosure


def _lambertw_enclosure(function, at_branch_point: int):
    """W (or 1 + W), increasing on [-1/e, inf), where it is -1 (or 0)."""

    def enclosure(x):
        a, b = _ends(x)
        with mpmath.workprec(iv.prec + 30):
            branch = -mpmath.exp(-1)
            margin = abs(branch) * mpmath.ldexp(1, -(iv.prec + 20))  # beyond -1/e's rounding
        if b < branch - margin:
            raise _Undefined
        if a > branch + margin:
            low = _point_enclosure(function, a)[0]
        else:  # at or next to the branch point, where W = -1 is its least value
            low = mpmath.mpf(at_branch_point)
        high = _point_enclosure(function, max(b, branch + margin))[1]
        return _interval(low, high)

    return enclosure


def _no_enclosure(name: str, why: str):
    def enclosure(*operands):
        raise _NoEnclosure(f"{name} ({why})")

    return enclosure


# ---------------------------------------------------------------------------
# The enclosures: each primitive's "interval" spelling, a callable or a helper kind
# ---------------------------------------------------------------------------

#: The boxes of functions monotone in each argument (``("corners", {"domain": ...})``).
_DOMAINS = {
    "box": lambda *xs: [_ends(x) for x in xs],
    "polygamma_difference": _polygamma_difference_box,
    "incomplete_gamma": _incomplete_gamma_box,
    "incomplete_beta": _incomplete_beta_box,
    "zeta": _zeta_box,
}


def _point_function(primitive):
    return primitive.spelling("mpmath")


#: Helper kinds a stanza's interval spelling may name: ``kind(primitive, **parameters) ->
#: enclosure``; those from mpmath's point values read the primitive's "mpmath" spelling.
_KINDS = {
    "monotone": lambda p, increasing=True, lower=-INF, upper=INF: _monotone(
        _point_function(p), p.name, increasing, lower, upper),
    "even": lambda p, increasing: _of_absolute_value(_point_function(p), p.name, increasing),
    "corners": lambda p, domain="box": _corners(_point_function(p), _DOMAINS[domain]),
    "endpoints": lambda p: _endpoints(_point_function(p)),
    "clipped": lambda p, function, lower=-INF, upper=INF: _clipped(function, lower, upper),
    "log_abs": lambda p, of: _log_of_absolute_value(of),
    "power": lambda p: _power,
    "extremum": lambda p, choose: _extremum(choose),
    "less": lambda p, swapped=False: (lambda x, y: _less(y, x)) if swapped else _less,
    "less_equal": lambda p, swapped=False: (lambda x, y: _less_equal(y, x)) if swapped else _less_equal,
    "equal": lambda p, negated=False: (lambda x, y: _not(_equal(x, y))) if negated else _equal,
    "and": lambda p: _and,
    "or": lambda p: _or,
    "not": lambda p: _not,
    "select": lambda p: _select,
    "xlogy": lambda p: _xlogy,
    "xlog1py": lambda p: _xlog1py,
    "digamma": lambda p: _digamma,
    "polygamma": lambda p: _polygamma(_point_function(p)),
    "bessel_j": lambda p: _bessel_j(_point_function(p), p.name),
    "bessel_i": lambda p: _bessel_i(_point_function(p), p.name),
    "derivative_bound": lambda p, bound: _derivative_bound(_point_function(p), p.name, bound),
    "sinc": lambda p: _sinc(_point_function(p)),
    "lambertw": lambda p, at_branch_point: _lambertw_enclosure(_point_function(p), at_branch_point),
    "frac": lambda p: _frac,
    "heaviside": lambda p: _heaviside,
    "none": lambda p, why: _no_enclosure(p.name, why),
}
#: Kinds that take truth values or choose between branches: they see unavailable operands
#: themselves (``where`` drops the branch its decided condition does not take).
_SEES_UNAVAILABLE = {"select"}


def _guarded(name: str, enclosure, sees_unavailable: bool = False):
    """``enclosure`` made total: unavailable operands pass through, failures become marks."""

    def evaluate(*operands):
        if not sees_unavailable:
            for operand in operands:
                if isinstance(operand, Unavailable):
                    return operand
        try:
            return enclosure(*operands)
        except _Undefined:
            return Unavailable(f"{name} is undefined here", undefined=True)
        except _NoEnclosure as error:
            return Unavailable(f"{error}", undefined=False)
        except (ZeroDivisionError, ValueError, mpmath.libmp.ComplexResult):
            return Unavailable(f"{name} is undefined here", undefined=True)

    evaluate.__name__ = f"interval_{name}"
    return evaluate


_ENCLOSURES: dict = {}  # primitive -> its guarded enclosure (built on first use)


def interval_enclosure(primitive):
    """``primitive``'s enclosure, from its stanza's ``"interval"`` spelling (see
    :data:`symad.primitives.BACKENDS`), made total; None if it has none."""
    found = _ENCLOSURES.get(primitive)
    if found is None:
        spelling = primitive.spelling("interval")
        if spelling is None:
            return None
        kind = None
        if isinstance(spelling, tuple):
            kind, parameters = spelling
            spelling = _KINDS[kind](primitive, **parameters)
        found = _ENCLOSURES[primitive] = _guarded(primitive.name, spelling, kind in _SEES_UNAVAILABLE)
    return found


#: A built-in primitive's name -> its enclosure: a view of the stanzas, for listing (the
#: backend reads each primitive's own spelling, :func:`interval_enclosure`).
INTERVAL_TABLE: dict = {name: interval_enclosure(primitive) for name, primitive in PRIMITIVES.items()
                        if primitive.spelling("interval") is not None}

#: Primitives with no enclosure anywhere (their stanzas say why: an enclosure that raises,
#: so that a graph holding them in a branch a decided ``where`` drops still evaluates).
NO_ENCLOSURE = tuple(sorted(name for name, primitive in PRIMITIVES.items()
                            if isinstance(primitive.spelling("interval"), tuple)
                            and primitive.spelling("interval")[0] == "none"))


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------

_CONSTANTS = {sympy.pi: "pi", sympy.E: "e", sympy.EulerGamma: "euler", sympy.Catalan: "catalan",
              sympy.GoldenRatio: "phi"}


def interval_value(constant):
    """An exact SymPy constant of a graph as an interval containing it, at the working precision.

    >>> enclosure = interval_value(sympy.sqrt(2 * sympy.pi))
    >>> mpmath.sqrt(2 * mpmath.pi) in enclosure, enclosure.delta < 1e-14
    (True, True)
    """
    exact = number_constant(constant, iv.mpf)
    if exact is not None:
        return exact
    if constant in _CONSTANTS:
        return +getattr(iv, _CONSTANTS[constant])
    if constant.is_Add:
        return functools.reduce(operator.add, map(interval_value, constant.args))
    if constant.is_Mul:
        return functools.reduce(operator.mul, map(interval_value, constant.args))
    if constant.is_Pow:
        base, exponent = constant.args
        if exponent.is_Integer:
            return interval_value(base) ** int(exponent)
        if exponent == sympy.Rational(1, 2):
            return iv.sqrt(interval_value(base))
        return _power(interval_value(base), interval_value(exponent))
    if isinstance(constant, sympy.exp):
        return iv.exp(interval_value(constant.args[0]))
    if isinstance(constant, sympy.log) and len(constant.args) == 1:
        return _log(interval_value(constant.args[0]))
    raise CompileError(f"the graph constant {constant} has no interval enclosure in symad's "
                       "interval backend (it knows numbers, pi, e and their sums, products, "
                       "powers, exponentials and logarithms)")


def _argument(value, where: str):
    """One number (or interval) a user passed, as an interval containing it exactly.

    A decimal string (``"0.7"``, or an interval ``"[0.69, 0.71]"``) is parsed by
    mpmath into an enclosure of the decimal.
    """
    if hasattr(value, "_mpi_"):
        return iv.convert(value)
    return scalar_argument(
        value, where, iv.mpf, interval_value,
        "the interval backend takes real numbers (floats, ints, mpmath.mpf, fractions.Fraction, "
        "SymPy numbers: each an exact point; decimal strings: enclosed) or intervals "
        "mpmath.iv.mpf([a, b]), or arrays of them")


class IntervalArithmetic(Arithmetic):
    """``mpmath.iv`` intervals at ``dps`` decimal digits (``iv.prec``, set during each evaluation)."""

    name = "interval"

    def implementation(self, primitive):
        return interval_enclosure(primitive)

    def missing(self, primitive, function_name: str) -> str:
        return (
            f"{function_name}: the interval backend has no enclosure of the primitive "
            f"{primitive.name!r} (custom primitives and SymPy functions from sd.from_sympy have "
            "none); write it with traceable operations, or use the 'mpmath' backend for "
            "high-precision values without a guarantee")

    def precision(self):
        return _interval_precision(self.dps)

    def constant(self, atom):
        return interval_value(atom)

    def argument(self, value, where: str):
        return _argument(value, where)

    def finish(self, value, where: str):
        if isinstance(value, Unavailable):
            if value.undefined:
                return iv.mpf([-INF, INF])
            raise CompileError(
                f"the interval backend has no enclosure for {value.reason}, and it reaches the "
                f"{where}; the 'mpmath' backend evaluates it (without a guarantee)")
        return value


@contextlib.contextmanager
def _interval_precision(dps: int):
    """``mpmath.iv``'s working precision set to ``dps`` digits for a block (iv has no ``workdps``)."""
    saved = iv.prec
    iv.dps = dps
    try:
        yield
    finally:
        iv.prec = saved
