"""The exceptions symad raises.

Every library error derives from :class:`SymadError` and also from the
built-in exception a Python user would expect in that situation, so
``except TypeError`` keeps working around symad calls.

>>> issubclass(TracingError, TypeError) and issubclass(TracingError, SymadError)
True
"""

from __future__ import annotations

__all__ = ["SymadError", "TracingError", "DifferentiationError", "CompileError", "ExportError",
           "RetraceWarning"]


class SymadError(Exception):
    """Base class of every error raised by symad."""


class TracingError(SymadError, TypeError):
    """A function could not be traced into a graph.

    Raised for Python control flow on traced values (use ``snp.where``),
    unsupported NumPy functions, and arguments too large to trace
    symbolically (use ``sd.vmap``).
    """


class DifferentiationError(SymadError, TypeError, ValueError):
    """A derivative was asked for that cannot be formed.

    It is both a ``TypeError`` (wrong kind of input, e.g. integers in a
    differentiated position) and a ``ValueError`` (bad ``argnums``, a
    primitive without a partial derivative rule), so code that catches
    either, as it would around NumPy or JAX, catches it.
    """


class CompileError(SymadError, RuntimeError):
    """A graph could not be lowered to a backend."""


class ExportError(SymadError, ValueError):
    """A formula could not be exported as asked (e.g. the wrong number of output names)."""


class RetraceWarning(UserWarning):
    """A transform traced its function again: a value the function reads from outside changed.

    Issued once per transform and name. The new trace computes with the new
    value; to avoid tracing at every change, pass the value as an argument or
    as an ``sd.Parameter``.
    """
