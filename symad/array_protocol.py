"""The handlers behind a traced value's NumPy protocols, and the Tracer methods built on them.

A Tracer speaks NumPy: ``x + y`` is ``np.add(x, y)``, ``x.sum()`` is ``np.sum(x)``, and
NumPy hands such calls on traced values to ``__array_ufunc__``/``__array_function__``
(NEP 13, NEP 18). *What* traces each NumPy function is symad.numpy's knowledge, and
symad.numpy is built on the tracer, so neither this module nor the tracer imports it: it
registers its handlers in this table when it loads instead, NEP 18's own pattern (a table
of the functions an array type handles, filled by the code that implements them). The
tracer names only NumPy's functions; it never holds or imports symad.numpy.
"""

from __future__ import annotations

from symad.atom_arrays import traced_function_name
from symad.errors import TracingError

__all__ = ["ArrayProtocol", "ARRAY_PROTOCOL", "register_array_protocol", "numpy_call",
           "array_method", "untraceable_operator"]


class ArrayProtocol:
    """The handlers behind a Tracer's NumPy protocols; :mod:`symad.numpy` registers them.

    ``ufunc(ufunc, method, inputs, kwargs)`` and ``function(func, args, kwargs, what)``
    trace a NumPy ufunc or array function; ``scalar_ufuncs`` maps the ufuncs that are one
    elementwise primitive to it (the scalar fast path); ``getitem``, ``set_items`` and
    ``add_at`` index whole arrays (one gather or scatter node; ``getitem`` also gathers at
    traced indices, ``x[np.argsort(x)]``).

    >>> import numpy as np, symad
    >>> ARRAY_PROTOCOL.scalar_ufuncs[np.sin].name
    'sin'
    """

    __slots__ = ("ufunc", "function", "scalar_ufuncs", "getitem", "set_items", "add_at")

    def __init__(self, *, ufunc, function, scalar_ufuncs: dict, getitem, set_items, add_at):
        self.ufunc, self.function, self.scalar_ufuncs = ufunc, function, scalar_ufuncs
        self.getitem, self.set_items, self.add_at = getitem, set_items, add_at


def _protocol_not_loaded(*_args, **_kwargs):
    raise RuntimeError("symad.numpy is not loaded; import symad first")


#: The registered handlers (placeholders that say what is missing until symad.numpy loads).
ARRAY_PROTOCOL = ArrayProtocol(
    ufunc=_protocol_not_loaded, function=_protocol_not_loaded, scalar_ufuncs={},
    getitem=_protocol_not_loaded, set_items=_protocol_not_loaded, add_at=_protocol_not_loaded,
)


def register_array_protocol(protocol: ArrayProtocol) -> None:
    """Install the handlers of the Tracer's NumPy protocols (called once, by symad.numpy)."""
    for name in ArrayProtocol.__slots__:
        setattr(ARRAY_PROTOCOL, name, getattr(protocol, name))


def numpy_call(function, *args, **kwargs):
    """``function(*args, **kwargs)`` of NumPy's, traced (a method's body: ``x.reshape`` is
    ``np.reshape(x, ...)``)."""
    return ARRAY_PROTOCOL.function(function, args, kwargs)


def array_method(function, name: str):
    """``x.name(...)`` as NumPy's ``function(x, ...)``; keywords symad does not trace
    (``out=``, ``where=``, ``initial=``...) raise a TracingError naming ``ndarray.name``."""

    def method(self, *args, **kwargs):
        return ARRAY_PROTOCOL.function(function, (self, *args), kwargs, what=f"ndarray.{name}")

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``np.{name}(x, ...)``: see :func:`symad.numpy.{name}`."
    return method


#: The traced spelling of each operator symad refuses (Python's returns an integer).
UNTRACEABLE_SPELLING = {"floordiv": "np.floor(x / y)", "divmod": "(np.floor(x / y), x % y)",
                         "round": "np.round(x)", "trunc": "np.trunc(x)",
                         "floor": "np.floor(x)", "ceil": "np.ceil(x)"}


def untraceable_operator(name: str):
    def method(self, *args):
        raise TracingError(
            f"function {traced_function_name()!r} applies `{name}` to a traced value; Python's "
            f"`{name}` gives an integer, which a traced value is not. Write "
            f"{UNTRACEABLE_SPELLING[name]}, which symad traces."
        )

    method.__name__ = f"__{name}__"
    return method
