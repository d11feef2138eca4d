"""``scipy.special``'s functions, imported when first called.

The catalogue names SciPy functions as the NumPy implementations of its special
functions (``erf``, ``gamma``, the Bessel families), and symad.special routes SciPy's
ufuncs on traced values. Importing ``scipy.special`` costs about 0.8 s and 30 MB
(2026-11-28, the project's 2-core box), which a program that never calls a special
function -- a 10^4-step simulation's gradient, run by the tape in 70 MB of its own --
should not pay. So the catalogue holds :class:`SciPyFunction` stand-ins, and
:data:`special` hands them out by name: the real function is looked up at the first call.

>>> erf = special.erf
>>> erf, erf is special.erf, round(float(erf(0.5)), 6)
(scipy.special.erf, True, 0.5205)
"""

from __future__ import annotations

import importlib
import sys
import threading

__all__ = ["SciPyFunction", "special", "resolved", "is_scipy_special"]


class SciPyFunction:
    """``scipy.special.<name>`` (a dotted name reaches inside: ``_ufuncs._zeta``), found
    and imported at the first call or :meth:`resolve`."""

    __slots__ = ("name", "_function")

    def __init__(self, name: str):
        self.name = name
        self._function = None

    def resolve(self):
        """The SciPy function itself."""
        function = self._function
        if function is None:
            function = importlib.import_module("scipy.special")
            for part in self.name.split("."):
                function = getattr(function, part)
            self._function = function
        return function

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, attribute: str):
        # A module reached through the namespace (``special._ufuncs``) hands out its
        # members the same way; dunder look-ups (pickle, copy) are not forwarded.
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return special.function(f"{self.name}.{attribute}")

    def __repr__(self) -> str:
        return f"scipy.special.{self.name}"

    def __reduce__(self):
        return (_named, (self.name,))


def _named(name: str) -> SciPyFunction:
    return special.function(name)


class _Namespace:
    """``special.<name>``: the one :class:`SciPyFunction` of each name."""

    def __init__(self):
        self._functions: dict[str, SciPyFunction] = {}
        self._lock = threading.Lock()

    def function(self, name: str) -> SciPyFunction:
        with self._lock:
            found = self._functions.get(name)
            if found is None:
                found = self._functions[name] = SciPyFunction(name)
        return found

    def __getattr__(self, name: str) -> SciPyFunction:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.function(name)


#: ``special.erf`` is a stand-in for ``scipy.special.erf``, the same object each time.
special = _Namespace()


def resolved(implementation):
    """``implementation`` itself, or the SciPy function a stand-in stands for (imported).

    >>> import numpy as np
    >>> resolved(np.sin) is np.sin, type(resolved(special.erf)).__name__
    (True, 'ufunc')
    """
    return implementation.resolve() if isinstance(implementation, SciPyFunction) else implementation


def is_scipy_special(implementation, name: str) -> bool:
    """True if ``implementation`` is ``scipy.special.<name>`` (or its stand-in), without
    importing SciPy for anything else.

    >>> import numpy as np
    >>> is_scipy_special(special.erf, "erf"), is_scipy_special(np.sin, "sin")
    (True, False)
    """
    if isinstance(implementation, SciPyFunction):
        return implementation.name == name
    loaded = sys.modules.get("scipy.special")
    return loaded is not None and getattr(loaded, name, None) is implementation
