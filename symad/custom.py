"""User-defined primitives: an opaque node with a numeric implementation and symbolic partials.

The way MindSpore registers a bprop and SymPy defines ``fdiff``::

    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))          # numeric: NumPy in, NumPy out

    @softsign.defpartials
    def _(x):
        return (1 / (1 + abs(x)) ** 2,)     # one symbolic partial per argument

The node prints as ``softsign(x)`` in formulas; its partials are traced, so
higher derivatives of a custom primitive work whenever its partials are made
of traceable operations.
"""

from __future__ import annotations

import copyreg
import inspect
from collections.abc import Callable

import numpy as np
import sympy

from symad.errors import DifferentiationError, TracingError
from symad.ir.primitive import PRIMITIVES, Primitive
from symad.tracer import apply, is_traced

__all__ = ["CustomPrimitive", "primitive", "CUSTOM_PRIMITIVES"]

#: Custom primitives by name, so ``sd.from_sympy`` can map ``softsign(x)`` back to one.
CUSTOM_PRIMITIVES: dict[str, CustomPrimitive] = {}


def primitive_named(name: str) -> Primitive:
    """The built-in or custom primitive called ``name`` (how pickled graphs find theirs)."""
    if name in PRIMITIVES:
        return PRIMITIVES[name]
    if name in CUSTOM_PRIMITIVES:
        return CUSTOM_PRIMITIVES[name].primitive
    raise TracingError(
        f"no primitive named {name!r} is defined in this process; a pickled function that uses "
        "a custom primitive needs it declared (@sd.primitive, with its partials) before loading"
    )


def _reduce_primitive(primitive: Primitive):
    # Pickled by name, like a function: graphs (and so traced Functions and their
    # evaluators) pickle as data; no rule or implementation travels.
    return primitive_named, (primitive.name,)


copyreg.pickle(Primitive, _reduce_primitive)


class CustomPrimitive:
    """A user primitive: call it on arrays (numeric) or traced values (records a node)."""

    def __init__(self, implementation: Callable, name: str | None = None):
        self.implementation = implementation
        self.name = name or implementation.__name__
        try:
            # Tracing names the inputs after the implementation's parameters.
            self.__signature__ = inspect.signature(implementation)
        except (TypeError, ValueError):
            pass
        if isinstance(implementation, np.ufunc):  # np.abs: nin operands (its signature adds out=...)
            self.__signature__ = inspect.Signature([
                inspect.Parameter(f"x{i}" if implementation.nin > 1 else "x",
                                  inspect.Parameter.POSITIONAL_ONLY)
                for i in range(implementation.nin)])
        signature = getattr(self, "__signature__", None)
        self.arity = None if signature is None else len(signature.parameters)
        self._partials_rule: Callable | None = None
        self.primitive = Primitive(
            self.name,
            sympy.Function(self.name),
            implementation,
            None,
            folds_constants=False,  # an opaque function has no exact value to fold to
            variadic=True,
        )
        self.__doc__ = implementation.__doc__
        self.__name__ = self.name
        CUSTOM_PRIMITIVES[self.name] = self

    def defpartials(self, rule: Callable) -> Callable:
        """Register ``rule(*args) -> tuple`` of partial derivatives, one per argument."""
        self._partials_rule = rule
        self.primitive.partials = self._partial
        return rule

    def _partial(self, out, args):
        # The user's rule sees the operands only (the SPEC's defpartials signature).
        try:
            inspect.signature(self._partials_rule).bind(*args)
        except TypeError:
            raise DifferentiationError(
                f"the partials rule {getattr(self._partials_rule, '__name__', 'rule')!r} given to "
                f"{self.name}.defpartials cannot take the primitive's {len(args)} argument(s); "
                f"define it as def rule({', '.join(f'x{i}' for i in range(len(args)))}) returning "
                "a tuple with one partial per argument"
            ) from None
        except ValueError:  # a builtin without a signature: let the call decide
            pass
        partials = self._partials_rule(*args)
        if not isinstance(partials, (tuple, list)) or len(partials) != len(args):
            raise DifferentiationError(
                f"the partials of primitive {self.name!r} must be a tuple with one entry per "
                f"argument ({len(args)}), got {partials!r}"
            )
        return partials

    def __call__(self, *args):
        signature = getattr(self, "__signature__", None)
        if signature is not None:
            try:
                signature.bind(*args)
            except TypeError as error:
                raise TracingError(f"{self.name}() called with {len(args)} arguments: {error}") from None
        if any(is_traced(arg) for arg in args):
            return apply(self.primitive, *args)
        return self.implementation(*args)

    def __repr__(self) -> str:
        return f"<symad primitive {self.name}>"


def primitive(implementation: Callable | None = None, *, name: str | None = None):
    """Declare a numeric function as an opaque primitive; add partials with ``.defpartials``.

    >>> import numpy as np, symad as sd
    >>> @sd.primitive
    ... def softsign(x):
    ...     return x / (1 + np.abs(x))
    >>> @softsign.defpartials
    ... def _(x):
    ...     return (1 / (1 + abs(x)) ** 2,)
    >>> float(sd.grad(softsign)(1.0))
    0.25
    >>> sd.trace(softsign, 0.5).formula()
    softsign(x)
    """
    if implementation is None:
        return lambda f: CustomPrimitive(f, name)
    return CustomPrimitive(implementation, name)
