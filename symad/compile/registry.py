"""The backend registry: each evaluation backend is one record, looked up by name.

A :class:`Backend` says what the pipeline (:mod:`symad.compile.pipeline`) needs
to know of a backend: whether it can run here, how it lowers a scalar graph and
an array program to a generated module, and which backend takes over, loudly,
when it cannot take a graph (it raises :class:`BackendUnsupported`). Precision
backends (``"mpmath"``, ``"interval"``) evaluate node by node instead: their
record gives the arithmetic at a number of digits.

This module is the bottom of the compiler: it names no backend module. The
built-in backends are registered by :mod:`symad.compile.backends`, which the
package imports; lookups here only read the table.

>>> import symad.compile  # registers the built-in backends
>>> available_backends()[:2]
['numexpr', 'numpy']
>>> backend_record("numba").fallback
'numexpr'
"""

from __future__ import annotations

import functools
import importlib.util

from collections.abc import Callable
from dataclasses import dataclass

from symad.errors import CompileError

__all__ = ["Backend", "BackendUnsupported", "register_backend", "backend_record", "check_backend",
           "available_backends", "backend_available", "numba_available", "DEFAULT_BACKEND", "PRECISION_BACKENDS"]

#: The backend ``F(...)`` and every transform evaluate with.
DEFAULT_BACKEND = "numexpr"

#: Backends that evaluate the graph node by node in another arithmetic, at ``dps`` digits
#: (``F.compile("mpmath", dps=50)``); they are not among ``available_backends()``, which
#: evaluate in float64 on whole batches.
PRECISION_BACKENDS = ("mpmath", "interval")


class BackendUnsupported(CompileError):
    """A backend cannot take this graph (the message says why): its fallback takes it."""


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Backend:
    """One evaluation backend.

    Attributes:
        name: what ``F.compile(name)`` asks for.
        lower_scalar: ``(graph, dtype, name) -> GeneratedModule`` for a graph of scalar
            nodes; may raise :class:`BackendUnsupported`.
        lower_arrays: the same for an array program (an ``ArrayModule``).
        available: whether it can run on this machine (called only when it is asked for).
        fallback: the backend that evaluates a graph this one cannot take, or None.
        missing: why it may be unavailable, appended to the error naming it.
        arithmetic: for a precision backend, ``dps -> Arithmetic`` (its interpreter's
            number type); None for a backend that generates a module.
        disk_cached: its modules are kept in the disk cache; False for one whose module
            is quicker to make than to key (the tape's is a few arrays).
    """

    name: str
    lower_scalar: Callable | None = None
    lower_arrays: Callable | None = None
    available: Callable[[], bool] = _always
    fallback: str | None = None
    missing: str = ""
    arithmetic: Callable | None = None
    disk_cached: bool = True


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> None:
    """Add ``backend`` to the table (in order: :func:`available_backends` lists them so)."""
    _BACKENDS[backend.name] = backend


def backend_record(name: str) -> Backend:
    """The registered record of ``name`` (a KeyError if there is none)."""
    return _BACKENDS[name]


def available_backends() -> list[str]:
    """The evaluation backends usable on this machine, the default first.

    ``"numexpr"`` (default) and ``"numpy"`` always; ``"numba"`` (one fused,
    multi-threaded loop) when numba is installed (``pip install symad[fast]``).

    >>> import symad as sd
    >>> sd.available_backends()[:2]
    ['numexpr', 'numpy']
    """
    return [record.name for record in _BACKENDS.values()
            if record.arithmetic is None and record.available()]


def backend_available(backend: str) -> bool:
    """True if ``backend`` is registered and runs here (what :func:`available_backends`
    lists, asked of one backend).

    >>> backend_available("numexpr"), backend_available("no such backend")
    (True, False)
    """
    record = _BACKENDS.get(backend)
    return record is not None and record.arithmetic is None and record.available()


def check_backend(backend: str) -> Backend:
    """The record of ``backend`` if it generates a module and runs here, else a CompileError."""
    record = _BACKENDS.get(backend)
    # Only "numba" needs a look at what is installed: importing numba to list
    # the backends costs about 0.4 s, which the default backend must not pay.
    if record is not None and record.arithmetic is not None:
        raise CompileError(
            f"the {backend!r} backend evaluates the graph node by node and generates no module "
            f"or source; use F.compile({backend!r}, dps=...)")
    if record is None or not record.available():
        why = record.missing if record is not None else ""
        raise CompileError(
            f"unknown backend {backend!r}{why}; the backends available here are "
            f"{available_backends()}"
        )
    return record


def numba_available() -> bool:
    """True if numba is installed here (found, not imported: its import takes 0.4 s and
    50 MB, which a process that never compiles with numba must not pay).

    >>> isinstance(numba_available(), bool)
    True
    """
    return _installed("numba")


@functools.lru_cache(maxsize=None)
def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
