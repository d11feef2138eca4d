"""The compile pipeline: one path from a graph to a loaded evaluator, whatever the backend.

``make_evaluator(graph, backend, dtype)`` takes the same steps for a scalar graph
and for an array program:

1. look the backend up in the registry (:mod:`symad.compile.registry`): known,
   installed, and one that generates a module;
2. key the graph (:func:`~symad.compile.disk_cache.entry_key`) and load the module
   another process generated for it from the disk cache, if there is one;
3. otherwise lower it with the backend's lowering for that kind of graph; a backend
   that cannot take the graph (:class:`~symad.compile.registry.BackendUnsupported`)
   hands it to its registered fallback, and the module's ``note`` says why (logged
   at :func:`~symad.compile.tiers.fallback_level`);
4. load the module (:mod:`symad.compile.evaluator`), store it in the disk cache, and
   wrap it: an :class:`~symad.compile.evaluator.Evaluator` for a scalar graph, an
   :class:`~symad.compile.arrays.evaluator.ArrayEvaluator` for an array program.

Precision backends (``"mpmath"``, ``"interval"``) generate no module: their
registry record gives an arithmetic, which :func:`make_precise_function` hands to
the node-by-node interpreter (:mod:`symad.compile.precise.interpret`).
"""

from __future__ import annotations

import contextlib
import logging
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from symad.compile.backends import register_builtin_backends
from symad.compile.registry import BackendUnsupported, backend_record, check_backend
from symad.errors import CompileError

__all__ = ["make_evaluator", "make_array_evaluator", "generate_module", "generate_array_module",
           "lower_module", "make_precise_function", "SCALAR", "ARRAYS"]

#: Messages of the compiler: a backend falling back (warning, or the level
#: tiers.fallback_level gives), where numba keeps its machine code (info).
_LOG = logging.getLogger(__name__)

register_builtin_backends()


@dataclass(frozen=True)
class ProgramKind:
    """What differs between the two kinds of graph along the one pipeline.

    Attributes:
        label: the disk cache's name for the compiler (part of the key).
        lower: the :class:`~symad.compile.registry.Backend` field that lowers this kind.
        wrap: ``(module, namespace, graph, name) -> evaluator`` once loaded.
        announce: pause the garbage collector and show a progress bar while lowering
            (a scalar graph has a node per operation: 10^5 nodes take seconds).
    """

    label: str
    lower: str
    wrap: Callable
    announce: bool


def _scalar_evaluator(module, namespace: dict, graph, name: str):
    from symad.compile.evaluator import Evaluator, check_loaded

    check_loaded(namespace, module.backend)
    evaluator = Evaluator(module, namespace, operations=len(graph.nodes))
    if module.backend == "numba":
        _LOG.info("symad: %s: numba machine code is compiled on first call and cached on disk "
                  "beside %s; later sessions load it instead of compiling", name,
                  evaluator.cached_at)
    return evaluator


def _array_evaluator(module, namespace: dict, graph, name: str):
    from symad.compile.arrays.evaluator import ArrayEvaluator

    return ArrayEvaluator(module, namespace)


#: A graph of scalar nodes (one node per scalar operation).
SCALAR = ProgramKind("scalar", "lower_scalar", _scalar_evaluator, announce=True)
#: An array program (one node per whole-array operation).
ARRAYS = ProgramKind("arrays", "lower_arrays", _array_evaluator, announce=False)


def lower_module(graph, record, kind: ProgramKind, dtype, name: str):
    """The module of ``graph`` lowered by the backend ``record`` for ``kind``, or by its
    fallback (with a note saying why) when the backend raises BackendUnsupported."""
    try:
        return getattr(record, kind.lower)(graph, dtype, name)
    except BackendUnsupported as reason:
        if record.fallback is None:
            raise
        module = lower_module(graph, backend_record(record.fallback), kind, dtype, name)
        module.note = "; ".join(filter(None, [f"{reason}; evaluated with {record.fallback} instead",
                                              module.note]))
        return module


def generate_module(graph, backend: str, dtype="float64", name: str = "function"):
    """Lower ``graph`` (scalar nodes) to the source module of ``backend`` at ``dtype`` (not yet loaded).

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import exp_p
    >>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
    >>> module = generate_module(builder.finish([builder.record(exp_p, (x,))]), "numpy")
    >>> "np.exp(v0)" in module.source, module.externals
    (True, [])
    """
    return lower_module(graph, check_backend(backend), SCALAR, dtype, name)


def generate_array_module(graph, backend: str, dtype="float64", name: str = "function"):
    """Lower an array program to the source of its evaluator (not yet loaded)."""
    return lower_module(graph, check_backend(backend), ARRAYS, dtype, name)


def make_evaluator(graph, backend: str, dtype="float64", name: str = "function",
                   kind: ProgramKind = SCALAR):
    """A loaded evaluator of ``graph`` for ``backend``: an
    :class:`~symad.compile.evaluator.Evaluator` (``kind=SCALAR``, the default) or, for an
    array program (``kind=ARRAYS``), an :class:`~symad.compile.arrays.evaluator.ArrayEvaluator`.

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
    # Imported here, not with the package: ``import symad`` should not pay for them.
    from symad.compile import disk_cache
    from symad.compile.evaluator import load_module
    from symad.compile.progress import progress_bar
    from symad.compile.tiers import fallback_level
    from symad.graph import garbage_collection_paused

    record = check_backend(backend)
    # Many small acyclic objects per node, as in recording: the collector would walk them all.
    paused = garbage_collection_paused() if kind.announce else contextlib.nullcontext()
    with paused:
        # A module another process generated for the same graph is loaded from the disk
        # cache, with its bytecode (and, for numba, the machine code beside it).
        key = (disk_cache.entry_key(graph, backend, np.dtype(dtype).name, name, compiler=kind.label)
               if record.disk_cached else None)
        module = disk_cache.load_entry(key, graph) if key is not None else None
        cached = module is not None
        with contextlib.ExitStack() as stack:
            if not cached:
                if kind.announce:  # a bar if this takes long (a deep graph of 10^5 nodes: seconds)
                    stack.enter_context(progress_bar(
                        f"{backend}: generating the evaluator of {len(graph.nodes):,} operations",
                        ticking=True))
                module = lower_module(graph, record, kind, dtype, name)
            if module.backend != backend:  # numba asked for, numexpr given: say so
                _LOG.log(fallback_level(), "symad: %s: %s", name, module.note)
            # numba's module is imported from a file, so numba keeps its machine code beside it.
            namespace = load_module(module, on_disk=module.backend == "numba")
        if key is not None and not cached:
            disk_cache.store_entry(key, graph, module, getattr(module, "code", None))
    return kind.wrap(module, namespace, graph, name)


def make_array_evaluator(graph, backend: str, dtype="float64", name: str = "function"):
    """``make_evaluator(graph, backend, dtype, name, kind=ARRAYS)``: an array program's evaluator."""
    return make_evaluator(graph, backend, dtype, name, kind=ARRAYS)


def make_precise_function(function, backend: str, dps: int | None):
    """``function`` evaluated with a precision backend at ``dps`` digits (mpmath's current ones if None).

    ``"mpmath"``: :mod:`symad.compile.precise.mpmath_backend`; ``"interval"``:
    :mod:`symad.compile.precise.interval_backend`.
    """
    import mpmath

    from symad.compile.precise.interpret import PreciseFunction

    if dps is None:
        dps = mpmath.mp.dps
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral) or dps < 1:
        raise CompileError(f"{function.name}: dps must be a positive integer (decimal digits), got {dps!r}")
    return PreciseFunction(function, backend_record(backend).arithmetic(int(dps)))
