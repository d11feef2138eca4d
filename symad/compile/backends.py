"""The built-in backends, registered in the backend registry (:mod:`symad.compile.registry`).

Each row is one :class:`~symad.compile.registry.Backend`: how it lowers a
scalar graph (:mod:`symad.compile.scalar`) and an array program
(:mod:`symad.compile.arrays`), when it is available, and which backend takes
over a graph it cannot take. The lowerings are imported when first used, so
``import symad`` pays for none of them (numba alone costs 0.4 s).
"""

from __future__ import annotations

from symad.compile.registry import Backend, numba_available, register_backend

__all__ = ["register_builtin_backends"]


def _levels_or(lower, backend: str, graph, dtype, name: str):
    """``lower(graph, ...)`` for a narrow graph; a wide one is lowered level by level."""
    from symad.compile.scalar.levels import lower_levels, wide_plan
    from symad.compile.scalar.program import build_program

    # A wide graph (a gradient over a large array: thousands of small independent
    # expressions) is evaluated level by level, one NumPy call per group of like
    # operations, whatever the backend: one line per region would cost more to
    # compile and to run than the arithmetic (symad.compile.scalar.levels).
    program = build_program(graph, name)
    plan = wide_plan(program)
    if plan is not None:
        return lower_levels(program, plan, dtype, backend)
    return lower(graph, dtype, name, program=program)


def _numexpr_scalar(graph, dtype, name):
    from symad.compile.scalar.numexpr_backend import lower_numexpr

    return _levels_or(lower_numexpr, "numexpr", graph, dtype, name)


def _numpy_scalar(graph, dtype, name):
    from symad.compile.scalar.numpy_backend import lower_numpy

    return _levels_or(lower_numpy, "numpy", graph, dtype, name)


def _numba_scalar(graph, dtype, name):
    from symad.compile.scalar.numba_backend import lower_numba

    return lower_numba(graph, dtype, name)


def _tape_scalar(graph, dtype, name):
    from symad.compile.scalar.tape import lower_tape

    return lower_tape(graph, dtype, name)


def _tape_available() -> bool:
    # The tape's interpreter is C where a compiler is found, else numba's (tape_c, tape).
    from symad.compile.scalar.tape_c import c_compiler

    return c_compiler() is not None or numba_available()


def _tape_arrays(graph, dtype, name):
    from symad.compile.scalar.tape import decline_arrays

    return decline_arrays(graph, dtype, name)


def _whole_arrays(backend: str):
    def lower(graph, dtype, name):
        from symad.compile.arrays.lowering import lower_whole_arrays

        return lower_whole_arrays(graph, backend, dtype, name)
    return lower


def _numba_arrays(graph, dtype, name):
    from symad.compile.arrays.numba_loops import lower_numba_arrays

    return lower_numba_arrays(graph, dtype, name)


def _mpmath_arithmetic(dps: int):
    from symad.compile.precise.mpmath_backend import MpmathArithmetic

    return MpmathArithmetic(dps)


def _interval_arithmetic(dps: int):
    from symad.compile.precise.interval_backend import IntervalArithmetic

    return IntervalArithmetic(dps)


def register_builtin_backends() -> None:
    """Fill the registry with symad's backends (the default, numexpr, first)."""
    register_backend(Backend("numexpr", _numexpr_scalar, _whole_arrays("numexpr")))
    register_backend(Backend("numpy", _numpy_scalar, _whole_arrays("numpy")))
    register_backend(Backend("numba", _numba_scalar, _numba_arrays, available=numba_available,
                             fallback="numexpr", missing=" (numba is not installed: pip install numba)"))
    # The tape: any scalar graph, no per-graph compile (symad.compile.scalar.tape); what the
    # default calls for a large graph at one point or a few (symad.compile.tiers.tape_serves).
    register_backend(Backend("tape", _tape_scalar, _tape_arrays, available=_tape_available,
                             fallback="numexpr", missing=" (it needs a C compiler or numba: pip install numba)",
                             disk_cached=False))
    register_backend(Backend("mpmath", arithmetic=_mpmath_arithmetic))
    register_backend(Backend("interval", arithmetic=_interval_arithmetic))
