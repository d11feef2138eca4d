"""``symad.numpy``: the NumPy-like namespace of traceable operations.

Every function works on plain NumPy values (computing numerically, like
NumPy) and on traced values (recording nodes). Inside a traced function the
same-named NumPy functions dispatch here too, so ``np.sin(x)`` and
``snp.sin(x)`` are interchangeable.

The functions live in one module per family -- :mod:`~symad.numpy.elementwise`,
:mod:`~symad.numpy.shapes` (construction, shape manipulation, indexing),
:mod:`~symad.numpy.creation`, :mod:`~symad.numpy.reductions`,
:mod:`~symad.numpy.products` (products, contractions and more array operations),
:mod:`~symad.numpy.sorting` (sort, argsort, median, gathers at traced indices),
:mod:`~symad.numpy.fft` (``snp.fft``, NumPy's Fourier transforms),
:mod:`~symad.numpy.refusals` (what is not traced) -- and this package re-exports
them. The dispatch from NumPy's protocols stays here: it routes NumPy's names to
the whole namespace and suggests the nearest of its names.

>>> import symad as sd, symad.numpy as snp
>>> float(snp.sigmoid(0.0))
0.5
>>> sd.trace(lambda x: snp.sum(snp.exp(x)), [0.0, 1.0]).formula()
exp(x[0]) + exp(x[1])
"""

# This package re-exports its families' functions (and the names the namespace always had,
# snp.apply among them): an import here is a re-export, not an unused name.
# ruff: noqa: F401, F405

from __future__ import annotations

import builtins
import functools
import inspect
import math
import threading
from typing import Any

import numpy as _np
import sympy

from symad import array_primitives as A
from symad import primitives as P
from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.graph import atom_shape, current_builder
from symad.numpy import creation, elementwise, fft, linalg, products, reductions, shapes, sorting
from symad.numpy.creation import *  # noqa: F403 - the families' names are this namespace
from symad.numpy.elementwise import *  # noqa: F403
from symad.numpy.linalg import norm
from symad.numpy.products import *  # noqa: F403
from symad.numpy.reductions import *  # noqa: F403
from symad.numpy.refusals import float_dtype_only, untraceable
from symad.numpy.shapes import *  # noqa: F403
from symad.numpy.shapes import add_at as _add_at
from symad.numpy.shapes import getitem as _getitem
from symad.numpy.shapes import set_items as _set_items
from symad.numpy.sorting import *  # noqa: F403
from symad.array_protocol import ArrayProtocol, register_array_protocol
from symad.tracer import (
    Parameter,
    TracedIndices,
    Tracer,
    apply,
    as_atom,
    as_atoms,
    contains_traced,
    record_scalars,
)

# ---------------------------------------------------------------------------
# Dispatch from NumPy's protocols
# ---------------------------------------------------------------------------

#: NumPy's ufuncs by name, and ``ufunc.reduce`` of some of them, as each family declares them.
_UFUNCS = {**elementwise.NUMPY_UFUNCS, **products.NUMPY_UFUNCS}
_REDUCTIONS = reductions.UFUNC_REDUCTIONS


def scalar_ufuncs() -> dict:
    """``{ufunc: primitive}`` for NumPy's ufuncs whose traceable function is one primitive.

    The Tracer records such a ufunc on traced scalars directly; the result is
    the same as going through :func:`dispatch_ufunc` to the traceable function.

    >>> scalar_ufuncs()[_np.sin].name
    'sin'
    """
    table = {}
    for name, function in _UFUNCS.items():
        ufunc = getattr(_np, name, None)
        primitive = getattr(function, "primitive", None)
        if isinstance(ufunc, _np.ufunc) and primitive is not None:
            table[ufunc] = primitive
    return table


def _ufunc_route(ufunc) -> tuple[str, Any]:
    """``(qualified name, traceable function or None)`` for a ufunc called on traced values.

    NumPy's ufuncs are looked up by name in ``_UFUNCS``, but only when the ufunc *is*
    NumPy's: SciPy's ufuncs share NumPy's names (``scipy.special.psi`` and ``jn`` are
    named ``psi``, ``jv``; others, like ``gamma``, would collide with any future NumPy
    name), so they are routed by identity through ``symad.special.SCIPY_UFUNCS`` and
    named after their real module in errors.
    """
    name = getattr(ufunc, "__name__", repr(ufunc))
    if getattr(_np, name, None) is ufunc:
        return f"numpy.{name}", _UFUNCS.get(name)
    for ufuncs, _, ufunc_name in _foreign_tables():
        if ufunc in ufuncs:
            return ufunc_name(ufunc), ufuncs[ufunc]
    module = getattr(ufunc, "__module__", None) or type(ufunc).__module__
    # Named by a table that routes ufuncs (scipy.special's), not one of functions only.
    names = [ufunc_name(ufunc) for ufuncs, _, ufunc_name in _foreign_tables() if ufuncs]
    return (names[0] if names else f"{module}.{name}"), None


#: Tables of other libraries' functions made traceable by modules built on this
#: one -- symad.special for scipy.special -- as ``(ufuncs, array_functions,
#: ufunc_name)``. They register here (this module cannot import them back
#: without an import circle); the tables are kept by reference.
_FOREIGN: list = []


_FOREIGN_LOADERS: list = []
_FOREIGN_LOCK = threading.Lock()


def register_foreign_functions(ufuncs: dict, array_functions: dict, ufunc_name, load=None) -> None:
    """Route ``ufuncs`` ({ufunc: traceable}) and ``array_functions`` ({function: traceable}).

    ``ufunc_name(ufunc)`` names a ufunc in error messages (``scipy.special.gamma``).
    ``load``, if given, is called once, before these tables are first looked in, to fill
    them: SciPy's tables import SciPy (0.8 s, 30 MB), which only a program that calls a
    function NumPy's tables do not hold pays.
    """
    _FOREIGN.append((ufuncs, array_functions, ufunc_name))
    if load is not None:
        _FOREIGN_LOADERS.append(load)


def _foreign_tables() -> list:
    """The foreign tables, filled: the loaders not run yet run now, once each."""
    if _FOREIGN_LOADERS:
        with _FOREIGN_LOCK:
            while _FOREIGN_LOADERS:
                _FOREIGN_LOADERS[0]()
                _FOREIGN_LOADERS.pop(0)
    return _FOREIGN



def _untraceable(what: str) -> TracingError:
    """The refusal of ``what``, with the nearest names of this namespace."""
    return untraceable(what, _nearest_supported)


def _nearest_supported(name: str) -> list[str]:
    """Supported names close to ``name`` (difflib): ``np.name`` where NumPy has it, else ``snp.name``.

    >>> _nearest_supported("arctan3"), _nearest_supported("sigmoidd")
    (['np.arctan', 'np.arctanh', 'np.arctan2'], ['snp.sigmoid'])
    """
    import difflib

    supported = set(_UFUNCS) | {function.__name__ for function in _FUNCTIONS} | set(__all__)
    supported = {n for n in supported if not n.startswith("_") and callable(globals().get(n, len))}
    transforms = {f.__name__: f"np.fft.{f.__name__}" for f in fft.NUMPY_FUNCTIONS.values()}
    return [transforms.get(n) or (f"np.{n}" if hasattr(_np, n) else f"snp.{n}")
            for n in difflib.get_close_matches(name, sorted(supported), n=3)]


def dispatch_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """Route a NumPy ufunc call on traced values to the matching traceable function.

    Keywords that would change the result (``out``, ``where``, ``initial``,
    a non-float ``dtype``) are refused rather than ignored.
    """
    name = getattr(ufunc, "__name__", repr(ufunc))
    qualified_name, traceable = _ufunc_route(ufunc)
    suffix = "" if method == "__call__" else f".{method}"
    what = f"the ufunc {qualified_name}{suffix}"
    kwargs = float_dtype_only(kwargs, what)
    out = kwargs.get("out")
    if out is None or (isinstance(out, tuple) and all(o is None for o in out)):
        kwargs.pop("out", None)  # scipy.special.zeta passes out=None positionally
    allowed = {"axis", "keepdims"} if method == "reduce" else set()
    if set(kwargs) - allowed:
        raise _untraceable(f"{what} with keywords {sorted(set(kwargs) - allowed)}")
    if method == "__call__" and traceable is not None:
        return traceable(*inputs)
    if method == "reduce" and qualified_name.startswith("numpy.") and name in _REDUCTIONS:
        (x,) = inputs
        return _REDUCTIONS[name](x, axis=kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False))
    raise _untraceable(what)


#: NumPy's array functions -> their traceable versions, as each family declares them.
_FUNCTIONS = {**reductions.NUMPY_FUNCTIONS, **products.NUMPY_FUNCTIONS, **shapes.NUMPY_FUNCTIONS,
              **elementwise.NUMPY_FUNCTIONS, **creation.NUMPY_FUNCTIONS, **fft.NUMPY_FUNCTIONS,
              **sorting.NUMPY_FUNCTIONS, **linalg.NUMPY_FUNCTIONS}
_CONSTRUCTORS = creation.CONSTRUCTORS


def dispatch_function(func, args: tuple, kwargs: dict, what: str | None = None) -> Any:
    """Route a NumPy array function called on traced values to its traceable version.

    ``what`` names the call in errors when it is not ``func`` itself (``ndarray.sum``).
    """
    implementation = _FUNCTIONS.get(func)
    for _, array_functions, _ in _foreign_tables() if implementation is None else ():
        implementation = array_functions.get(func)  # numpy.sinc lives in symad.special
        if implementation is not None:
            break
    module = getattr(func, "__module__", "numpy") or "numpy"
    what = what or f"{module}.{func.__name__}"
    if implementation is None:
        raise _untraceable(what)
    if implementation not in _CONSTRUCTORS:  # an integer array of zeros is fine; a sum is not
        kwargs = float_dtype_only(kwargs, what)
    if "out" in kwargs and kwargs["out"] is None:  # NumPy's default, spelled out
        del kwargs["out"]
    check_arguments(implementation, args, kwargs, what)
    return implementation(*args, **kwargs)


def check_arguments(implementation, args: tuple, kwargs: dict, what: str) -> None:
    """Raise a TracingError naming the keyword (or count) ``implementation`` does not take."""
    signature = inspect.signature(implementation)
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        accepted = [n for n, p in signature.parameters.items()
                    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)][1:]
        unknown = [k for k in kwargs if k not in signature.parameters]
        which = (f"the keyword{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}"
                 if unknown else f"{len(args)} positional arguments")
        raise TracingError(
            f"function {traced_function_name()!r} calls {what} with {which}, which symad does "
            f"not trace; it takes ({', '.join(accepted)}). Drop the argument, or compute the "
            "same thing with symad.numpy operations (snp.where to select elements by value)"
        ) from None


# The families' names, and the few helpers this namespace has always exported (it was
# one module, whose __all__ was every public name of it).
__all__ = [
    *creation.__all__, *elementwise.__all__, *products.__all__, *reductions.__all__,
    *shapes.__all__, *sorting.__all__, "linalg", "norm", "A", "as_atom", "atom_shape",
    "dispatch_function", "dispatch_ufunc",
    "record_scalars", "register_foreign_functions", "scalar_ufuncs",
]


# scipy.linalg's solvers, by the registry symad.special uses for scipy.special.
_SCIPY_LINALG: dict = {}
register_foreign_functions({}, _SCIPY_LINALG, lambda ufunc: f"scipy.linalg.{ufunc.__name__}",
                           load=lambda: _SCIPY_LINALG.update(linalg.scipy_functions()))


def _whole_getitem(x, index):
    """``x[index]`` of a whole array, or of any array at traced indices (``x[np.argsort(x)]``)."""
    if isinstance(index, TracedIndices):
        return sorting.gather_first(x, index)
    return _getitem(x, index)


# The Tracer's NumPy protocols (operators, methods, np.f(tracer)) are traced by this namespace.
register_array_protocol(ArrayProtocol(
    ufunc=dispatch_ufunc, function=dispatch_function, scalar_ufuncs=scalar_ufuncs(),
    getitem=_whole_getitem, set_items=_set_items, add_at=_add_at,
))
