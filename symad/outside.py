"""What a traced function reads from outside: so that a kept trace can tell it went stale.

A transform traces a function once per argument signature and keeps the
trace (as ``jax.jit`` does), and a NumPy array the function reads from a
global or a closure becomes constants of that trace. If the program later
rebinds that name or writes into that array, the kept trace would go on
computing with the old values. :func:`snapshot` notes, at trace time, the
arrays and numbers the function reaches directly through its own global
names and closure cells, with a fingerprint of each (shape, dtype and a CRC
of the bytes); :func:`changed` tells, before a kept trace is reused, which
of them no longer matches, and the transform traces again.

What it cannot see, it does not claim to: values reached through containers
(a dict of parameters), attributes, or other functions the function calls.
Those are constants of the trace too (see the API reference).

>>> import numpy as np
>>> scale = np.array([1.0, 2.0])
>>> def f(x):
...     return x * scale
>>> noted = snapshot(f)
>>> changed(noted) is None
True
>>> scale[1] = 3.0
>>> changed(noted)
'scale'
"""

from __future__ import annotations

import numbers
import zlib
from typing import Any

import numpy as np

__all__ = ["snapshot", "changed"]

_MISSING = object()


def _root(fun: Any) -> Any:
    """The user's own function under transforms (``grad(grad(f))`` reads what ``f`` reads)."""
    while getattr(fun, "_is_symad_transform", False):
        fun = fun.fun
    return fun


def _fingerprint(value: Any):
    """Equal for two values exactly when a trace made with one is valid for the other; None: not watched."""
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return None
        return ("array", value.shape, value.dtype.str,
                zlib.crc32(np.ascontiguousarray(value).view(np.uint8).reshape(-1)))
    if isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, bool):
        return ("number", type(value).__name__, repr(value))
    return None


def _read(place, name: str):
    if isinstance(place, dict):
        return place.get(name, _MISSING)
    try:
        return place.cell_contents
    except ValueError:  # the cell was emptied
        return _MISSING


def snapshot(fun: Any) -> tuple:
    """``(place, name, fingerprint)`` of each array or number ``fun`` reads by a global or closure name."""
    fun = _root(fun)
    code = getattr(fun, "__code__", None)
    if code is None:  # a builtin, a partial, a callable object: nothing we can see
        return ()
    noted = []
    global_names = getattr(fun, "__globals__", None) or {}
    for name in code.co_names:  # also attribute names: a global of the same name is watched too
        value = global_names.get(name, _MISSING)
        fingerprint = None if value is _MISSING else _fingerprint(value)
        if fingerprint is not None:
            noted.append((global_names, name, fingerprint))
    for name, cell in zip(code.co_freevars, getattr(fun, "__closure__", None) or ()):
        value = _read(cell, name)
        fingerprint = None if value is _MISSING else _fingerprint(value)
        if fingerprint is not None:
            noted.append((cell, name, fingerprint))
    return tuple(noted)


def changed(noted: tuple) -> str | None:
    """The name of the first noted value that was rebound or written into since, else None."""
    for place, name, fingerprint in noted:
        value = _read(place, name)
        if value is _MISSING or _fingerprint(value) != fingerprint:
            return name
    return None
