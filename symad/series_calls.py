"""What a call of ``sd.taylor`` or ``sd.derivative`` computes as numbers, past their graphs.

A Taylor-mode *graph* has a node per coefficient; it is built up to order
:data:`MAX_TAYLOR_ORDER` (170, the last n whose n! fits in float64) and compiled for
fast repeated calls. A *call* at a high order instead pushes coefficient arrays through
the traced primal (:mod:`symad.transforms.series`): from order 48 on for coefficients
(where the graph's build costs more than it saves), at any order. These are the
``evaluate`` hooks :class:`symad.api.Transformed` runs before falling back to the graph:

* :func:`taylor_evaluator` -- coefficients in float64 or in mpmath (``dps``); float64
  derivatives past 170 computed in mpmath and returned where they fit;
* :func:`derivative_evaluator` -- ``sd.derivative(f, n)`` past 170, the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from symad.derivatives import resolve_argnums
from symad.errors import DifferentiationError, SymadError
from symad.transforms.series import Float64, Mpmath, SeriesUnsupported, taylor_call, wants_numbers

__all__ = ["MAX_TAYLOR_ORDER", "DERIVATIVE_DPS", "check_graph_order", "series_numbers",
           "taylor_evaluator", "derivative_evaluator"]

#: The highest order of a Taylor-mode graph: 170! is the last factorial below float64's
#: largest value, and a graph holds derivatives as well as coefficients.
MAX_TAYLOR_ORDER = 170
#: Digits of the mpmath series behind float64 derivatives past MAX_TAYLOR_ORDER: float64's
#: 16, and a margin for what the recurrences lose to cancellation.
DERIVATIVE_DPS = 30


def check_graph_order(n: int, what: str) -> None:
    """Refuse to build a Taylor-mode graph past :data:`MAX_TAYLOR_ORDER`, saying what works.

    >>> check_graph_order(171, "taylor(f, 171)")
    Traceback (most recent call last):
    ...
    symad.errors.DifferentiationError: taylor(f, 171).trace(): Taylor-mode graphs (and their formulas) are built up to order 170, where n! still fits in float64; call it, taylor(f, 171)(x), for values at any order, computed as numbers
    """
    if n > MAX_TAYLOR_ORDER:
        raise DifferentiationError(
            f"{what}.trace(): Taylor-mode graphs (and their formulas) are built up to order "
            f"{MAX_TAYLOR_ORDER}, where n! still fits in float64; call it, "
            f"{what}(x), for values at any order, computed as numbers")


def series_numbers(dps: int | None):
    """The numbers a series is computed in: float64, or mpmath at ``dps`` digits.

    >>> type(series_numbers(None)).__name__, type(series_numbers(30)).__name__
    ('Float64', 'Mpmath')
    """
    if dps is None:
        return Float64()
    from symad.compile.precise.interpret import PRECISION_LOCK
    from symad.compile.precise.mpmath_backend import MpmathArithmetic

    return Mpmath(MpmathArithmetic(dps), PRECISION_LOCK)


def _numbers_or_graph(call: Callable, primal, what: str, graph_covers: bool):
    """``call(primal)``; with whole-array steps, on the per-element version; else the graph
    (NotImplemented) where it covers the order, or a refusal saying why."""
    try:
        return call(primal)
    except SeriesUnsupported:
        pass
    try:  # whole-array steps inside the scalar function: one scalar node per element
        return call(primal.expand())
    except (SeriesUnsupported, SymadError) as unsupported:
        if graph_covers:
            return NotImplemented  # the graph's recurrences cover it
        raise DifferentiationError(
            f"{what}: {unsupported} has no recurrence on coefficient arrays, so orders above "
            f"{MAX_TAYLOR_ORDER} are not computed for it") from None


def taylor_evaluator(n: int, argnum, derivatives: bool, steps, dps: int | None, name: str):
    """The ``evaluate(primal, args)`` hook of ``sd.taylor(f, n, ...)`` (see the module docstring)."""
    what = f"taylor({name}, {n})"

    def evaluate(primal, args: tuple):
        multivariate = isinstance(argnum, tuple) and steps is None
        positions = resolve_argnums(argnum, len(args), "taylor", name)
        if (n <= MAX_TAYLOR_ORDER and dps is None
                and not wants_numbers(n, len(positions) if multivariate else None)):
            return NotImplemented
        # Float64 derivatives past 170: computed in mpmath (whose exponent range holds any
        # k!), then returned as float64 where they fit.
        past_factorials = derivatives and dps is None and n > MAX_TAYLOR_ORDER
        numbers = series_numbers(DERIVATIVE_DPS if past_factorials else dps)

        def call(function):
            return taylor_call(function, order=n, positions=positions, args=args,
                               multivariate=multivariate, derivatives=derivatives, steps=steps,
                               what=what, numbers=numbers, as_float64=past_factorials)

        return _numbers_or_graph(call, primal, what, n <= MAX_TAYLOR_ORDER and dps is None)

    return evaluate


def derivative_evaluator(n: int, argnum: int, name: str):
    """The ``evaluate(primal, args)`` hook of ``sd.derivative(f, n)``: past order 170, n!
    leaves float64 but the derivative may not (sin's never does), so the series is computed
    in mpmath and its n-th coefficient times n! returned where it fits in float64."""
    what = f"derivative({name}, {n})"

    def evaluate(primal, args: tuple):
        if n <= MAX_TAYLOR_ORDER:
            return NotImplemented
        positions = resolve_argnums(argnum, len(args), "derivative", name)

        def call(function):
            return taylor_call(function, order=n, positions=positions, args=args,
                               multivariate=False, derivatives=True, what=what,
                               numbers=series_numbers(DERIVATIVE_DPS), as_float64=True)[n]

        return _numbers_or_graph(call, primal, what, graph_covers=False)

    return evaluate
