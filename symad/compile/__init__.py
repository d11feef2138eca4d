"""The compiler: Graph -> passes -> a Python module per backend -> a cached evaluator.

``make_evaluator(graph, backend, dtype)`` runs the passes of
:mod:`symad.compile.program`, lowers the result to source text
(:mod:`~symad.compile.numexpr_backend`, :mod:`~symad.compile.numpy_backend`,
:mod:`~symad.compile.numba_backend`) and loads it (:mod:`~symad.compile.evaluator`).
"""

from __future__ import annotations

from symad.compile.threads import get_num_threads, set_num_threads

__all__ = ["available_backends", "make_evaluator", "generate_module", "DEFAULT_BACKEND",
           "set_num_threads", "get_num_threads", "PRECISION_BACKENDS", "make_precise_function"]

#: The backend ``F(...)`` and every transform evaluate with.
DEFAULT_BACKEND = "numexpr"


def _numba_usable() -> bool:
    from symad.compile.numba_backend import numba_available

    return numba_available()


def available_backends() -> list[str]:
    """The evaluation backends usable on this machine, the default first.

    ``"numexpr"`` (default) and ``"numpy"`` always; ``"numba"`` (one fused,
    multi-threaded loop) when numba is installed (``pip install symad[fast]``).

    >>> import symad as sd
    >>> sd.available_backends()[:2]
    ['numexpr', 'numpy']
    """
    backends = ["numexpr", "numpy"]
    if _numba_usable():
        backends.append("numba")
    return backends


#: Backends that evaluate the graph node by node in another arithmetic, at ``dps`` digits
#: (``F.compile("mpmath", dps=50)``); they are not among ``available_backends()``, which
#: evaluate in float64 on whole batches.
PRECISION_BACKENDS = ("mpmath", "interval")


def make_precise_function(function, backend: str, dps: int | None):
    """``function`` evaluated with a precision backend at ``dps`` digits (mpmath's current ones if None).

    ``"mpmath"``: :mod:`symad.compile.mpmath_backend`; ``"interval"``:
    :mod:`symad.compile.interval_backend`.
    """
    import numbers

    import mpmath

    from symad.errors import CompileError

    if dps is None:
        dps = mpmath.mp.dps
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral) or dps < 1:
        raise CompileError(f"{function.name}: dps must be a positive integer (decimal digits), got {dps!r}")
    if backend == "mpmath":
        from symad.compile.interpret import PreciseFunction
        from symad.compile.mpmath_backend import MpmathArithmetic

        return PreciseFunction(function, MpmathArithmetic(int(dps)))
    from symad.compile.interpret import PreciseFunction
    from symad.compile.interval_backend import IntervalArithmetic

    return PreciseFunction(function, IntervalArithmetic(int(dps)))


def _check_backend(backend: str) -> None:
    from symad.errors import CompileError

    # Only "numba" needs a look at what is installed: importing numba to list
    # the backends costs about 0.4 s, which the default backend must not pay.
    if backend in ("numexpr", "numpy"):
        return
    if backend in PRECISION_BACKENDS:
        raise CompileError(
            f"the {backend!r} backend evaluates the graph node by node and generates no module "
            f"or source; use F.compile({backend!r}, dps=...)")
    if backend not in available_backends():
        known = ("numexpr", "numpy", "numba")
        why = " (numba is not installed: pip install numba)" if backend == "numba" else ""
        if backend not in known:
            why = ""
        raise CompileError(
            f"unknown backend {backend!r}{why}; the backends available here are "
            f"{available_backends()}"
        )


def generate_module(graph, backend: str, dtype="float64", name: str = "function"):
    """Lower ``graph`` to the source module of ``backend`` at ``dtype`` (not yet loaded).

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import exp_p
    >>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
    >>> module = generate_module(builder.finish([builder.record(exp_p, (x,))]), "numpy")
    >>> "np.exp(v0)" in module.source, module.externals
    (True, [])
    """
    _check_backend(backend)
    if backend == "numba":
        from symad.compile.numba_backend import lower_numba

        return lower_numba(graph, dtype, name)
    from symad.compile.levels import lower_levels, wide_plan
    from symad.compile.program import build_program

    # A wide graph (a gradient over a large array: thousands of small independent
    # expressions) is evaluated level by level, one NumPy call per group of like
    # operations, whatever the backend: one line per region would cost more to
    # compile and to run than the arithmetic (symad.compile.levels).
    program = build_program(graph, name)
    plan = wide_plan(program)
    if plan is not None:
        return lower_levels(program, plan, dtype, backend)
    if backend == "numexpr":
        from symad.compile.numexpr_backend import lower_numexpr

        return lower_numexpr(graph, dtype, name, program=program)
    from symad.compile.numpy_backend import lower_numpy

    return lower_numpy(graph, dtype, name, program=program)


def make_evaluator(graph, backend: str, dtype="float64", name: str = "function"):
    """A loaded :class:`~symad.compile.evaluator.Evaluator` of ``graph`` for ``backend``.

    >>> import sympy, numpy as np
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import sin_p
    >>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
    >>> evaluator = make_evaluator(builder.finish([builder.record(sin_p, (x,))]), "numexpr")
    >>> out = np.empty(2)
    >>> evaluator.evaluate_into([np.array([0.0, np.pi / 2])], [out], 2)
    >>> out
    array([0., 1.])
    """
    from symad.compile import disk_cache
    from symad.compile.evaluator import Evaluator, check_loaded, load_module
    from symad.compile.progress import progress_bar
    from symad.graph import garbage_collection_paused

    _check_backend(backend)
    with garbage_collection_paused():  # many small acyclic objects per node, as in recording
        # A module another process generated for the same graph is loaded from the disk
        # cache, with its bytecode (and, for numba, the machine code beside it).
        key = disk_cache.entry_key(graph, backend, np.dtype(dtype).name, name)
        module = disk_cache.load_entry(key, graph) if key is not None else None
        cached = module is not None
        with contextlib.ExitStack() as stack:
            if not cached:  # a bar if this takes long (a deep graph of 10^5 nodes: seconds)
                stack.enter_context(progress_bar(
                    f"{backend}: generating the evaluator of {len(graph.nodes):,} operations",
                    ticking=True))
                module = generate_module(graph, backend, dtype, name)
            if module.backend != backend:  # numba asked for, numexpr given: say so
                from symad.compile.tiers import fallback_level

                _LOG.log(fallback_level(), "symad: %s: %s", name, module.note)
            namespace = load_module(module, on_disk=module.backend == "numba")
        if key is not None and not cached:
            disk_cache.store_entry(key, graph, module, getattr(module, "code", None))
    check_loaded(namespace, module.backend)
    evaluator = Evaluator(module, namespace, operations=len(graph.nodes))
    if module.backend == "numba":
        _LOG.info("symad: %s: numba machine code is compiled on first call and cached on disk "
                  "beside %s; later sessions load it instead of compiling", name,
                  evaluator.cached_at)
    return evaluator


import contextlib  # noqa: E402
import logging  # noqa: E402

import numpy as np  # noqa: E402

#: Messages of the compiler ("symad" logger): a backend falling back (warning), where
#: numba keeps its machine code (info).
_LOG = logging.getLogger("symad")
