"""Traced values: arrays of graph atoms that record every operation.

A :class:`Tracer` wraps a NumPy object array whose elements are atoms of the
active :class:`~symad.graph.GraphBuilder` (input symbols, nodes or exact constants). Shape
logic -- broadcasting, indexing, reshaping, stacking -- is NumPy's own,
applied to the object array; only arithmetic records nodes. Python operators,
``symad.numpy`` functions and NumPy's own functions (through
``__array_ufunc__`` and ``__array_function__``) all end in :func:`apply`.

:class:`Parameter` is a named value a function may close over; inside a
trace it becomes an input of the graph, so assigning a new value later needs
no re-tracing.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import sympy
from sympy.core.sympify import CantSympify

from symad.atom_arrays import (
    assign_atoms,
    builder_parameter_atom,
    check_unrolled_size,
    constant_atom,
    constant_elements,
    element_atoms,
    pack_elements,
    real_array,
    require_builder,
    scalar_array,
    scalar_constant,
    traced_function_name,
)
from symad.array_protocol import ARRAY_PROTOCOL, array_method, numpy_call, untraceable_operator
from symad.atoms import COMPLEX_SEEN, is_complex_atom
from symad.errors import TracingError
from symad.tracing_errors import array_conversion_message, traced_index_message
from symad.graph import (
    active_builders,
    atom_shape,
    current_builder,
    number_atom,
)

__all__ = [
    "Tracer", "Parameter", "apply", "as_atoms", "as_atom", "as_operand", "contains_traced",
    "is_traced", "record_scalars", "scalar_atom", "is_complex_value",
]


def is_complex_value(value) -> bool:
    """True if ``value`` holds complex numbers: a traced complex value, a complex number or
    a complex NumPy array.

    >>> import numpy as np
    >>> is_complex_value(1j), is_complex_value(np.ones(2)), is_complex_value(np.ones(2) * 1j)
    (True, False, True)
    """
    if isinstance(value, Tracer):
        if value._atom is not None:
            return is_complex_atom(value._atom)
        return any(is_complex_atom(atom) for atom in value._array.reshape(-1))
    if isinstance(value, Parameter):
        return np.iscomplexobj(value.value)
    return bool(np.iscomplexobj(value))


# ---------------------------------------------------------------------------
# Converting operands to atoms
# ---------------------------------------------------------------------------


def as_operand(value: Any):
    """``value`` as an operand of a whole-array operation: one atom, or an object array of scalar atoms.

    A traced value holding one atom (a scalar, or a whole array) gives that
    atom; an array built element by element (``snp.zeros`` filled by item
    assignment, ``snp.stack`` of scalars) gives its object array; numbers and
    NumPy arrays give constants (one node for a whole array).
    """
    if type(value) in TRACER_TYPES:
        atom = value._atom
        return atom if atom is not None else value._array
    if type(value) in _PYTHON_NUMBERS:
        return number_atom(value)
    if isinstance(value, Parameter):
        return builder_parameter_atom(require_builder("use a Parameter"), value)
    if isinstance(value, sympy.Basic):
        return scalar_constant(value)
    if isinstance(value, (list, tuple)) and any(contains_traced(v) for v in value):
        return as_operand(numpy_call(np.stack, list(value)))
    array = np.asarray(value)
    if array.dtype == object:
        return as_atoms(value)
    return constant_atom(require_builder("use a constant array"), real_array(array))


def as_atom(value: Any):
    """``value`` as one atom: an array built element by element becomes one ``pack`` node."""
    operand = as_operand(value)
    if isinstance(operand, np.ndarray):
        return pack_elements(require_builder("assemble an array"), operand)
    return operand


def as_atoms(value: Any) -> np.ndarray:
    """``value`` as an object array of scalar atoms of the current builder (the element view)."""
    if isinstance(value, Tracer):
        return value.atoms
    if type(value) in _PYTHON_NUMBERS:  # the common constant, without NumPy's conversion
        return scalar_array(number_atom(value))
    if isinstance(value, Parameter):
        builder = require_builder("use a Parameter")
        return element_atoms(builder_parameter_atom(builder, value), "element-level code")
    if isinstance(value, sympy.Basic):
        return scalar_array(scalar_constant(value))
    if isinstance(value, (list, tuple)) and any(contains_traced(v) for v in value):
        return np.stack([as_atoms(v) for v in value])
    array = np.asarray(value)
    if array.dtype == object:
        # e.g. a list mixing traced values and numbers: convert each element.
        out = np.empty(array.shape, dtype=object)
        for index in np.ndindex(array.shape):
            element = array[index]
            out[index] = as_atoms(element)[()] if _is_atom_like(element) else scalar_constant(element)
        return out
    return constant_elements(real_array(array))


_PYTHON_NUMBERS = frozenset({float, int, bool})


def _is_atom_like(value) -> bool:
    return isinstance(value, (Tracer, Parameter, sympy.Basic))


def contains_traced(value: Any) -> bool:
    """True if ``value`` is traced or is a (nested) list or tuple holding a traced value."""
    if isinstance(value, (list, tuple)):
        return any(contains_traced(v) for v in value)
    return is_traced(value)


def is_traced(value: Any) -> bool:
    """True if ``value`` records into a graph (a Tracer, or a Parameter inside a trace)."""
    if isinstance(value, Tracer):
        return True
    return isinstance(value, Parameter) and current_builder() is not None


# ---------------------------------------------------------------------------
# Recording an elementwise primitive
# ---------------------------------------------------------------------------


def scalar_atom(value: Any):
    """The one atom of a traced value (a scalar, or a whole array), a Python number or a
    constant SymPy number; None for anything else (an array built element by element, a list).

    >>> scalar_atom(2.0), scalar_atom(Tracer.of_atom(sympy.Symbol("x"))), scalar_atom([1.0])
    (2.00000000000000, x, None)
    """
    kind = type(value)
    if kind is Tracer:
        atom = value._atom
        if atom is not None:
            return atom
        array = value._array
        return array[()] if array.ndim == 0 else None
    if kind in _PYTHON_NUMBERS:
        return number_atom(value)
    if isinstance(value, sympy.Basic):  # a rule's exact constant: 1, or 2/sqrt(pi)
        return value if value.is_Number else scalar_constant(value)
    return None


def record_scalars(primitive, operands: tuple, params: tuple = ()) -> Tracer | None:
    """The fast path of :func:`apply`: ``primitive`` on traced atoms and Python numbers.

    Returns None -- the caller then takes the general path -- unless every
    operand is one of those (or a constant SymPy number), at least one is
    traced and a trace is recording. A traced atom is a scalar or a whole
    array: either way one node is recorded (the builder broadcasts shapes).
    No object array is made: scalar arithmetic (a scalar trace, the operands
    of every partial derivative rule) costs the builder's ``record`` and
    little more.
    """
    builders = active_builders()
    if not builders:  # the general path says what escaped the trace
        return None
    atoms = []
    traced = False
    for operand in operands:
        atom = scalar_atom(operand)
        if atom is None:
            return None
        atoms.append(atom)
        traced = traced or type(operand) in TRACER_TYPES
    if not traced:
        return None
    return Tracer.of_atom(builders[-1].record(primitive, atoms, params))


def apply(primitive, *operands, params: tuple = ()) -> Tracer:
    """Record ``primitive`` elementwise over broadcast operands and return a Tracer.

    Whole arrays (and constants beside them) record one node. Arrays built
    element by element, with scalars and numbers only, record one node per
    element as before; beside a whole array they are packed into one.
    """
    scalar = record_scalars(primitive, operands, params)
    if scalar is not None:
        return scalar
    builder = require_builder(f"apply {primitive.name}")
    if not _element_level(operands):
        atoms = [as_atom(operand) for operand in operands]
        return Tracer.of_atom(builder.record(primitive, atoms, params))
    arrays = [as_atoms(operand) for operand in operands]
    if all(array.ndim == 0 for array in arrays):
        atom = builder.record(primitive, [array[()] for array in arrays], params)
        return Tracer.of_atom(atom)
    try:
        broadcast = np.broadcast_arrays(*arrays)
    except ValueError as error:
        shapes = ", ".join(str(array.shape) for array in arrays)
        raise TracingError(
            f"{primitive.name}: operands with shapes {shapes} do not broadcast "
            f"(in function {builder.function_name!r})"
        ) from error
    shape = broadcast[0].shape
    columns = [array.reshape(-1) for array in broadcast]
    count = len(columns[0])
    out = np.empty(shape, dtype=object)
    # One record per element, driven by map (no Python-level loop per element);
    # the atoms are then stored in one assignment.
    out.reshape(-1)[:] = list(map(builder.record, itertools.repeat(primitive, count),
                                  zip(*columns), itertools.repeat(params, count)))
    return Tracer(out)


def _element_level(operands: tuple) -> bool:
    """True if an elementwise operation on ``operands`` is recorded element by element.

    So it is when an operand is an array built element by element and no
    operand is a whole traced array: element-level code stays element-level
    (with numbers and NumPy constants beside it), as a trace of scalars.
    """
    element_array = False
    for operand in operands:
        if isinstance(operand, Parameter):
            operand = operand.operand()
        if type(operand) in TRACER_TYPES:
            if operand._atom is not None:
                if atom_shape(operand._atom) != ():
                    return False
            elif operand._array.ndim > 0:
                element_array = True
        elif isinstance(operand, (list, tuple)) and contains_traced(operand):
            if _holds_whole_array(operand):
                return False
            element_array = True
    return element_array


def _holds_whole_array(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_holds_whole_array(v) for v in value)
    return type(value) in TRACER_TYPES and value._atom is not None and atom_shape(value._atom) != ()


# ---------------------------------------------------------------------------
# NumPy's protocols (symad.array_protocol holds the handlers symad.numpy registers)
# ---------------------------------------------------------------------------


def _ufunc_operator(ufunc, *operands):
    """An operator as NumPy's ``ufunc``: traced scalars record directly, the rest dispatches."""
    primitive = ARRAY_PROTOCOL.scalar_ufuncs.get(ufunc)
    if primitive is not None and COMPLEX_SEEN[0] and primitive.complex_values == "refuse":
        primitive = None  # np.abs of a complex value is not abs_p: the namespace decides
    if primitive is not None:
        result = record_scalars(primitive, operands)
        if result is not None:
            return result
    return ARRAY_PROTOCOL.ufunc(ufunc, "__call__", operands, {})


# ---------------------------------------------------------------------------
# The traced value
# ---------------------------------------------------------------------------


class Tracer(CantSympify):
    """A traced array (or scalar): an object array of graph atoms.

    Behaves like a NumPy array of floats: operators, methods, indexing and
    NumPy functions all work and record nodes in the graph being traced.
    """

    # CantSympify: SymPy's own operators then return NotImplemented, so
    # ``sympy.pi * tracer`` reaches Tracer.__rmul__ instead of failing in sympify.
    #
    # A traced scalar keeps its atom in ``_atom`` and no array (``_array`` is
    # None) until shape logic asks for one: most values of a scalar trace, and
    # every operand of a partial derivative rule, are scalars that only ever
    # meet arithmetic, which records them directly (``record_scalars``).
    __slots__ = ("_array", "_atom", "_private")
    # Higher than ndarray's, so ``ndarray + tracer`` defers to the tracer.
    __array_priority__ = 1000

    def __init__(self, atoms: np.ndarray):
        self._array = atoms
        self._atom = None
        # True once item assignment made a copy no other object can see, so
        # that later assignments may write in place (filling is then O(1) per item).
        self._private = False

    @classmethod
    def of_atom(cls, atom) -> Tracer:
        """A traced scalar holding one graph atom, without building an object array.

        >>> Tracer.of_atom(sympy.Symbol("x")).shape
        ()
        """
        scalar = cls.__new__(cls)
        scalar._array = None
        scalar._atom = atom
        scalar._private = False
        return scalar

    @property
    def _atoms(self) -> np.ndarray:
        array = self._array
        if array is None:
            atom = self._atom
            if atom_shape(atom) != ():  # a whole array: its elements (an unrolled view)
                return element_atoms(atom, "element-level code")
            array = self._array = scalar_array(atom)  # a scalar: its 0-d array, made once
        return array

    @_atoms.setter
    def _atoms(self, array: np.ndarray) -> None:
        self._array = array
        self._atom = None

    @property
    def atoms(self) -> np.ndarray:
        """The object array of scalar graph atoms, one per element (treat it as read-only)."""
        # Whoever reads the array may keep it or a view of it: the next item
        # assignment must copy first, so that no alias ever sees the change.
        self._private = False
        return self._atoms

    @property
    def is_whole(self) -> bool:
        """True if this is a whole array held as one atom (operations on it record one node)."""
        return self._atom is not None and atom_shape(self._atom) != ()

    # -- shape ---------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        if self._atom is not None:
            return atom_shape(self._atom)
        return self._array.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float64)

    @property
    def T(self) -> Tracer:  # noqa: N802 - NumPy's name
        return self.transpose()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TracingError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TracingError(
                f"function {traced_function_name()!r} iterates over a 0-d traced value (a "
                "scalar, like iter() of a NumPy scalar); iterate over arrays, or wrap the "
                "scalar in a list: [x]"
            )
        if self.is_whole and self.ndim == 1:  # one scalar at a time: element-level code
            check_unrolled_size(self.shape[0], "a loop over a traced array")
        for index in range(self.shape[0]):
            yield self[index]

    def __getitem__(self, index) -> Tracer:
        if isinstance(index, TracedIndices):  # x[np.argsort(x)]: a gather at traced indices
            return ARRAY_PROTOCOL.getitem(self, index)
        _check_concrete_index(index)
        if self.is_whole:
            return ARRAY_PROTOCOL.getitem(self, index)
        try:
            selected = self._atoms[index]
        except (IndexError, ValueError, TypeError) as error:
            raise TracingError(
                f"function {traced_function_name()!r} indexes a traced array of shape {self.shape} "
                f"with {index!r}: {error}"
            ) from None
        if not isinstance(selected, np.ndarray):
            return Tracer.of_atom(selected)
        if selected.base is not None:  # a view: later writes to self must not show through it
            self._private = False
        return Tracer(selected)

    def __setitem__(self, index, value) -> None:
        """``x[index] = value``: item assignment, changing ``x`` only.

        Copy-on-write: arrays sliced from ``x`` before, or that ``x`` was
        sliced from, never see the change (unlike NumPy views, like JAX's
        ``x.at[index].set(value)``, which is also available).

        >>> import symad as sd, symad.numpy as snp
        >>> def f(v):
        ...     out = snp.zeros(2)
        ...     out[0] = v ** 2
        ...     out[1] = 3 * v
        ...     return out
        >>> sd.trace(f, 1.0).formula()
        [v**2, 3*v]
        """
        if self.is_whole or (_holds_whole_array(value) and self.ndim > 0):
            # A whole array (or a whole value into an element array): one scatter node.
            updated = ARRAY_PROTOCOL.set_items(self, index, value)
            self._atom, self._array, self._private = updated._atom, updated._array, False
            return
        if not self._private:
            self._atoms = self._atoms.copy()
            self._private = True
        _check_concrete_index(index)
        assign_atoms(self._atoms, index, as_atoms(value))

    def __repr__(self) -> str:
        if self.ndim == 0:
            return f"Tracer({self._atoms[()]})"
        return f"Tracer(shape={self.shape})"


    # -- concreteness: Python control flow needs a value there is none of ----

    def __bool__(self):
        raise TracingError(
            f"function {traced_function_name()!r} uses a traced value in Python control flow "
            "(`if`, `while`, `and`/`or` or bool()); its value is symbolic while tracing. "
            "Branch with snp.where(condition, if_true, if_false) instead."
        )

    def _not_concrete(self, *args):
        # NumPy calls __float__ too when a traced value is stored into a float
        # array (out[i] = value), and turns this error into a ValueError; trace()
        # recognizes that case and explains it (see explain_numpy_store).
        raise TracingError(
            f"function {traced_function_name()!r} converts a traced value to a Python number "
            "(float(), int(), math.* or an index); use symad.numpy functions on it instead"
        )

    __float__ = __int__ = __index__ = __complex__ = _not_concrete

    def item(self, *args):
        """The Python number of a one-element array whose value is a constant.

        An element that depends on the inputs is a symbol while tracing, so it
        has no Python number: that is refused with a TracingError.

        >>> import symad as sd, symad.numpy as snp
        >>> sd.trace(lambda x: x * snp.zeros_like(x).item(), 1.0).formula()
        0
        >>> sd.trace(lambda x: x.item(), 1.0)
        Traceback (most recent call last):
        ...
        symad.errors.TracingError: function '<lambda>' calls item() on a traced value. ...
        """
        if args:  # NumPy's x.item(flat_index) and x.item(i, j, ...)
            return (self.ravel()[args[0]] if len(args) == 1 else self[args]).item()
        if self.size != 1:
            raise TracingError(
                f"function {traced_function_name()!r} calls item() on a traced array of shape "
                f"{self.shape}; item() needs exactly one element (index it first: x[i])"
            )
        atom = self._atom if self.ndim == 0 and self._atom is not None else self.atoms.reshape(-1)[0]
        if isinstance(atom, sympy.Number):  # a constant (inf and nan included)
            return float(atom)
        raise TracingError(
            f"function {traced_function_name()!r} calls item() on a traced value. While tracing, "
            "the value is a symbol that stands for every input at once, so it has no Python "
            "number (item() gives one only where the element is a constant); keep it as an array (x.reshape(()) or x[0] gives a traced scalar that "
            "works everywhere a number does)"
        )

    def tolist(self):
        """Nested lists of traced scalars (NumPy's gives Python numbers, which a trace has none of).

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: sum(x.tolist()), np.zeros(2)).formula()
        x[0] + x[1]
        """
        if self.ndim == 0:
            return self
        return [element.tolist() for element in self]

    def __array__(self, dtype=None, copy=None):
        raise TracingError(array_conversion_message(traced_function_name(), dtype))

    def __hash__(self):
        # ``==`` records a comparison instead of answering, so a traced value
        # cannot be a dict key or set member.
        raise TracingError(
            f"function {traced_function_name()!r} uses a traced value as a dict key or set "
            "member (or hashes it, e.g. for functools.lru_cache); traced values are symbolic "
            "and `==` on them builds a condition, so they are not hashable"
        )

    def __format__(self, spec: str) -> str:
        if not spec:
            return repr(self)
        raise TracingError(
            f"function {traced_function_name()!r} formats a traced value with {spec!r}; while "
            "tracing it is a symbol with no number to format. Print values outside the "
            "traced function, or look at the formula with sd.trace(f, ...).formula()"
        )

    def __getattr__(self, name: str):
        # Only reached for names Tracer lacks: an ndarray method symad does not
        # trace gets a clear error (still an AttributeError, so hasattr() works).
        if name.startswith("_") or not hasattr(np.ndarray, name):
            raise AttributeError(f"'Tracer' object has no attribute {name!r}")
        import difflib

        supported = [n for n in dir(Tracer) if not n.startswith("_")]
        nearest = difflib.get_close_matches(name, supported, n=3)
        hint = f" The nearest traced ones: {', '.join(nearest)}." if nearest else ""
        raise _UnsupportedArrayAttribute(
            f"function {traced_function_name()!r} uses ndarray.{name} on a traced array, which "
            f"symad does not trace.{hint} Use symad.numpy operations, or snp.where to select by value"
        )

    # -- NumPy dispatch --------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs:  # np.sin(x) of a traced scalar: the fast path
            return _ufunc_operator(ufunc, *inputs)
        return ARRAY_PROTOCOL.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return ARRAY_PROTOCOL.function(func, args, kwargs)

    # -- Python's operators: NumPy's ufuncs, as on an ndarray ------------------

    def __add__(self, other): return _ufunc_operator(np.add, self, other)
    def __radd__(self, other): return _ufunc_operator(np.add, other, self)
    def __sub__(self, other): return _ufunc_operator(np.subtract, self, other)
    def __rsub__(self, other): return _ufunc_operator(np.subtract, other, self)
    def __mul__(self, other): return _ufunc_operator(np.multiply, self, other)
    def __rmul__(self, other): return _ufunc_operator(np.multiply, other, self)
    def __truediv__(self, other): return _ufunc_operator(np.divide, self, other)
    def __rtruediv__(self, other): return _ufunc_operator(np.divide, other, self)
    def __pow__(self, other): return _ufunc_operator(np.power, self, other)
    def __rpow__(self, other): return _ufunc_operator(np.power, other, self)
    def __matmul__(self, other): return _ufunc_operator(np.matmul, self, other)
    def __rmatmul__(self, other): return _ufunc_operator(np.matmul, other, self)
    # x % y is piecewise linear, so it is traced (NumPy's remainder, the sign of y).
    def __mod__(self, other): return _ufunc_operator(np.remainder, self, other)
    def __rmod__(self, other): return _ufunc_operator(np.remainder, other, self)
    def __lt__(self, other): return _ufunc_operator(np.less, self, other)
    def __le__(self, other): return _ufunc_operator(np.less_equal, self, other)
    def __gt__(self, other): return _ufunc_operator(np.greater, self, other)
    def __ge__(self, other): return _ufunc_operator(np.greater_equal, self, other)
    def __eq__(self, other): return _ufunc_operator(np.equal, self, other)  # type: ignore[override]
    def __ne__(self, other): return _ufunc_operator(np.not_equal, self, other)  # type: ignore[override]
    # & and | combine conditions, as on NumPy's boolean arrays; ~ negates one.
    def __and__(self, other): return _ufunc_operator(np.logical_and, self, other)
    def __rand__(self, other): return _ufunc_operator(np.logical_and, other, self)
    def __or__(self, other): return _ufunc_operator(np.logical_or, self, other)
    def __ror__(self, other): return _ufunc_operator(np.logical_or, other, self)
    def __invert__(self): return _ufunc_operator(np.logical_not, self)
    def __neg__(self): return _ufunc_operator(np.negative, self)
    def __pos__(self): return self
    def __abs__(self): return _ufunc_operator(np.absolute, self)

    # Python's integer-valued operators have no traced meaning: each says what to write.
    __floordiv__ = __rfloordiv__ = untraceable_operator("floordiv")
    __divmod__ = __rdivmod__ = untraceable_operator("divmod")
    __round__ = untraceable_operator("round")
    __trunc__ = untraceable_operator("trunc")
    __floor__ = untraceable_operator("floor")
    __ceil__ = untraceable_operator("ceil")

    # Reductions as methods: x.sum(axis=0) is np.sum(x, axis=0), and so on.
    sum = array_method(np.sum, "sum")
    mean = array_method(np.mean, "mean")
    var = array_method(np.var, "var")
    std = array_method(np.std, "std")
    prod = array_method(np.prod, "prod")
    max = array_method(np.max, "max")
    min = array_method(np.min, "min")
    clip = array_method(np.clip, "clip")

    # -- methods (the NumPy array API, as far as tracing goes) -----------------

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return numpy_call(np.reshape, self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return numpy_call(np.transpose, self, axes or None)

    def ravel(self, order="C"):
        if self.is_whole:
            return self.reshape((-1,), order=order)
        return Tracer(self.atoms.ravel(order))

    flatten = ravel

    @property
    def real(self) -> Tracer:
        """The real part: ``np.real(self)`` (a real traced value is its own real part).

        >>> import symad as sd
        >>> sd.trace(lambda x: x.real + x.imag, 1.0).formula()
        x
        """
        return numpy_call(np.real, self)

    @property
    def imag(self) -> Tracer:
        """The imaginary part: ``np.imag(self)`` (zeros for a real traced value)."""
        return numpy_call(np.imag if is_complex_value(self) else np.zeros_like, self)

    def conj(self) -> Tracer:
        """The complex conjugate: ``np.conj(self)`` (a real traced value is its own).

        >>> import symad as sd
        >>> sd.trace(lambda x: x.conj() * x, 1.0).formula()
        x**2
        """
        return _ufunc_operator(np.conjugate, self)

    conjugate = conj

    def copy(self, order="C"):
        """A copy (free: the atoms are shared until either array is assigned into).

        >>> import symad as sd, numpy as np
        >>> def f(x):
        ...     y = x.copy()
        ...     y[1] = 5.0
        ...     return x + y
        >>> sd.trace(f, np.zeros(2)).formula(expand=True)
        [2*x[0], x[1] + 5.0]
        """
        if self._atom is not None:  # a traced value is never changed in place: share the atom
            return Tracer.of_atom(self._atom)
        return Tracer(self.atoms)

    def fill(self, value) -> None:
        """Set every element to ``value`` (a number or a traced scalar), in place.

        >>> import symad as sd, numpy as np
        >>> def f(x):
        ...     y = x.copy()
        ...     y.fill(x[0])
        ...     return y
        >>> sd.trace(f, np.zeros(2)).formula(expand=True)
        [x[0], x[0]]
        """
        self[...] = value

    def squeeze(self, axis=None):
        return numpy_call(np.squeeze, self, axis)

    def swapaxes(self, axis1, axis2):
        """``x`` with two axes interchanged.

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: x.swapaxes(0, 1), np.zeros((1, 2))).formula(expand=True)
        [[x[0, 0]], [x[0, 1]]]
        """
        return numpy_call(np.swapaxes, self, axis1, axis2)

    def cumsum(self, axis=None):
        """Cumulative sum (``snp.cumsum``).

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: x.cumsum(), np.zeros(2)).formula(expand=True)
        [x[0], x[0] + x[1]]
        """
        return numpy_call(np.cumsum, self, axis=axis)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        """A diagonal (``snp.diagonal``).

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: x.diagonal(), np.zeros((2, 2))).formula(expand=True)
        [x[0, 0], x[1, 1]]
        """
        return numpy_call(np.diagonal, self, offset, axis1, axis2)

    def trace(self, offset=0, axis1=0, axis2=1):
        """Sum along a diagonal (``snp.trace``).

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: x.trace(), np.zeros((2, 2))).formula(expand=True)
        x[0, 0] + x[1, 1]
        """
        return numpy_call(np.trace, self, offset, axis1, axis2)

    @property
    def at(self) -> _IndexUpdates:
        """JAX's functional updates: ``x.at[i].set(v)``, ``.add(v)``, ``.multiply(v)``...

        Each returns a new array and leaves ``x`` unchanged.

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda v: v.at[0].add(1.0), np.zeros(2)).formula(expand=True)
        [v[0] + 1.0, v[1]]
        """
        return _IndexUpdates(self)

    def dot(self, other):
        return numpy_call(np.dot, self, other)

    def astype(self, dtype, *args, **kwargs):
        """A copy; float dtypes keep the traced value, signed integer dtypes round it towards
        zero (NumPy's cast) into indices with a zero derivative (JAX's), others are refused.

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: x.astype(np.float32) * 2, 1.0).formula()
        2*x
        >>> sd.trace(lambda x: x[x.astype(int)], np.zeros(3))(np.array([2.7, -1.5, 0.2])).tolist()
        [0.2, 0.2, 2.7]
        """
        kind = np.dtype(dtype).kind
        if kind == "i":  # (unsigned: NumPy casts negative floats as C does.) trunc: zero derivative
            return TracedIndices.of(ARRAY_PROTOCOL.ufunc(np.trunc, "__call__", (self,), {}), np.dtype(dtype))
        if kind != "f":
            raise TracingError(
                f"function {traced_function_name()!r} calls astype({np.dtype(dtype).name}) on a "
                "traced value; only float and signed integer dtypes are traced (an integer cast "
                "has a zero derivative). Keep float values, or compare (x > 0) to get a condition "
                "for snp.where"
            )
        return Tracer(self.atoms)


class _UnsupportedArrayAttribute(TracingError, AttributeError):
    """An ndarray attribute that traced arrays lack: a TracingError that hasattr() understands."""


class _IndexUpdates:
    """``x.at``: indexing it gives the functional updates of those elements."""

    __slots__ = ("_tracer",)

    def __init__(self, tracer: Tracer):
        self._tracer = tracer

    def __getitem__(self, index) -> _IndexUpdate:
        _check_concrete_index(index)
        return _IndexUpdate(self._tracer, index)


class _IndexUpdate:
    """``x.at[index]``: ``set``, ``add``, ``subtract``, ``multiply``, ``divide``, ``power``, ``get``."""

    __slots__ = ("_tracer", "_index")

    def __init__(self, tracer: Tracer, index):
        self._tracer, self._index = tracer, index

    def get(self) -> Tracer:
        return self._tracer[self._index]

    def set(self, value) -> Tracer:
        updated = self._tracer.copy()
        updated[self._index] = value
        return updated

    def add(self, value) -> Tracer:
        """``value`` added at ``index``; a repeated index adds once per occurrence (as JAX)."""
        tracer = self._tracer
        if tracer.is_whole or _holds_whole_array(value):
            return ARRAY_PROTOCOL.add_at(tracer, self._index, value)
        updated = tracer.copy()
        positions = np.arange(updated.size).reshape(updated.shape)[self._index]
        values = np.broadcast_to(as_atoms(value), np.shape(positions))
        flat = updated.ravel()
        for position, element in zip(np.ravel(positions).tolist(), values.reshape(-1)):
            flat[position] = flat[position] + Tracer.of_atom(element)
        return flat.reshape(updated.shape)

    def subtract(self, value) -> Tracer:
        return self.set(self.get() - value)

    def multiply(self, value) -> Tracer:
        return self.set(self.get() * value)

    def divide(self, value) -> Tracer:
        return self.set(self.get() / value)

    def power(self, value) -> Tracer:
        return self.set(self.get() ** value)


class TracedIndices(Tracer):
    """Integer positions computed from traced values (``np.argsort``'s), traced as floats
    holding integers, with no derivative. Indexing an array with them alone gathers
    (``x[np.argsort(x)]``), as ``np.take_along_axis`` does; their slices (``[::-1]``,
    ``[:k]``) are indices still. Any other traced value used as an index is refused: its
    values need not be integers.

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: x[np.argsort(x)[::-1]], np.zeros(3))(np.array([2.0, 3.0, 1.0])).tolist()
    [3.0, 2.0, 1.0]
    """

    __slots__ = ("_dtype",)

    @classmethod
    def of(cls, tracer: Tracer, dtype: np.dtype | None = None) -> TracedIndices:
        indices = cls.__new__(cls)
        indices._array, indices._atom, indices._private = tracer._array, tracer._atom, False
        indices._dtype = np.dtype(np.intp) if dtype is None else dtype
        return indices

    @property
    def dtype(self) -> np.dtype:
        """The integer dtype the indices stand for (NumPy's ``intp`` for argsort's)."""
        return self._dtype

    def __getitem__(self, index) -> TracedIndices:
        return TracedIndices.of(Tracer.__getitem__(self, index), self._dtype)


#: The classes of traced values (``type(x) in TRACER_TYPES``: as fast as ``is``, subclass-aware).
TRACER_TYPES = frozenset({Tracer, TracedIndices})


def _check_concrete_index(index) -> None:
    parts = index if isinstance(index, tuple) else (index,)
    for part in parts:
        if isinstance(part, (Tracer, Parameter)):
            raise TracingError(traced_index_message(traced_function_name()))


# ---------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------

_parameter_counter = itertools.count()


class Parameter(CantSympify):
    """A named array (or scalar) that traced functions may close over.

    Outside a trace it behaves like its current ``value``; inside a trace it
    is an input of the graph, so ``sd.grad(f, weights=[p])`` differentiates
    with respect to it and assigning ``p.value = new`` changes later
    evaluations without re-tracing.

    >>> import numpy as np
    >>> w = Parameter(np.array([1.0, 2.0]), name="w")
    >>> (w * 2).tolist(), w.shape, (w == 2.0).tolist()
    ([2.0, 4.0], (2,), [False, True])
    """

    __array_priority__ = 1001
    # Parameters are dictionary keys of builders: identity, not value, decides equality
    # there, while ``==`` in user code compares values like NumPy.
    __hash__ = object.__hash__

    def __init__(self, value, name: str | None = None):
        self.name = name if name is not None else f"param{next(_parameter_counter)}"
        if not isinstance(self.name, str) or not self.name:
            raise TracingError(f"Parameter: name must be a non-empty string, got {name!r}")
        self.value = value

    @property
    def value(self) -> np.ndarray:
        return self._value

    @value.setter
    def value(self, new_value) -> None:
        array = np.asarray(new_value)
        if array.dtype.kind not in "biuf":
            raise TracingError(
                f"Parameter {self.name!r}: value must be real numbers, got dtype {array.dtype}; "
                "give a float or an array of floats (np.asarray(value, dtype=float))"
            )
        self._value = array.astype(np.float32 if array.dtype == np.float32 else np.float64)
        # Kept for grad(weights=...): an integer Parameter is not differentiated (as integer
        # arguments are not), though its value is stored as floats.
        self.given_dtype = array.dtype

    @property
    def shape(self) -> tuple:
        return self._value.shape

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    def operand(self):
        """A Tracer inside a trace, the current value outside."""
        builder = current_builder()
        if builder is not None:
            return Tracer.of_atom(builder_parameter_atom(builder, self))
        return self._value

    def __getattr__(self, name: str):
        # Array methods (sum, max, dot, reshape, T, ...) act on the traced or current value.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.operand(), name)

    def __array__(self, dtype=None, copy=None):
        if current_builder() is not None:
            return self.operand().__array__()
        return self._value if dtype is None else self._value.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(x.operand() if isinstance(x, Parameter) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        args = tuple(x.operand() if isinstance(x, Parameter) else x for x in args)
        return func(*args, **kwargs)

    def __getitem__(self, index):
        return self.operand()[index]

    def __len__(self):
        return len(self._value)

    def __iter__(self):
        return iter(self.operand())

    def __bool__(self):
        return bool(self.operand())

    def __float__(self):
        return float(self.operand())

    def __repr__(self) -> str:
        return f"Parameter(name={self.name!r}, value={self._value!r})"


# The operators both Tracer and Parameter have, as NumPy arrays do.
BINARY_OPERATORS = ("add", "sub", "mul", "truediv", "pow", "matmul")
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
UNARY_OPERATORS = ("neg", "pos", "abs")


def _install_parameter_operators() -> None:
    """Every operator of a Parameter applies to its traced or current value."""

    def forward(dunder):
        def method(self, *others):
            others = tuple(o.operand() if isinstance(o, Parameter) else o for o in others)
            return getattr(self.operand(), dunder)(*others)

        return method

    names = [f"__{n}__" for n in BINARY_OPERATORS] + [f"__r{n}__" for n in BINARY_OPERATORS]
    names += [f"__{n}__" for n in COMPARISONS + UNARY_OPERATORS]
    for dunder in names:
        setattr(Parameter, dunder, forward(dunder))


_install_parameter_operators()

