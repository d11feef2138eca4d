"""Traced values: arrays of graph atoms that record every operation.

A :class:`Tracer` wraps a NumPy object array whose elements are atoms of the
active :class:`~symad.graph.GraphBuilder` (symbols or exact constants). Shape
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
from typing import Any

import numpy as np
import sympy
from sympy.core.sympify import CantSympify

from symad.errors import TracingError
from symad.graph import GraphBuilder, current_builder

__all__ = [
    "Tracer", "Parameter", "apply", "as_atoms", "contains_traced", "is_traced", "substitute_atoms",
    "symbol_array",
]


# ---------------------------------------------------------------------------
# Converting operands to atoms
# ---------------------------------------------------------------------------


def _constant_atom(value: Any) -> sympy.Basic:
    if isinstance(value, (bool, np.bool_)):
        return sympy.true if value else sympy.false
    if isinstance(value, (int, np.integer)):
        return sympy.Integer(int(value))
    if isinstance(value, (float, np.floating)):
        return sympy.Float(float(value))
    if isinstance(value, sympy.Basic):
        if value.free_symbols:
            raise TracingError(
                f"the SymPy expression {value} has free symbols; symad accepts only "
                "constant SymPy expressions as operands (use sd.from_sympy for formulas)"
            )
        return value
    raise TracingError(
        f"symad cannot use a value of type {type(value).__name__} in a traced computation; "
        "use floats, NumPy arrays of real numbers or traced values"
    )


def as_atoms(value: Any) -> np.ndarray:
    """``value`` as an object array of atoms of the current builder."""
    if isinstance(value, Tracer):
        return value.atoms
    if isinstance(value, Parameter):
        builder = _require_builder("use a Parameter")
        return builder_parameter_atoms(builder, value)
    if isinstance(value, sympy.Basic):
        return _scalar_array(_constant_atom(value))
    if isinstance(value, (list, tuple)) and any(contains_traced(v) for v in value):
        return np.stack([as_atoms(v) for v in value])
    array = np.asarray(value)
    if array.dtype == object:
        # e.g. a list mixing traced values and numbers: convert each element.
        out = np.empty(array.shape, dtype=object)
        for index in np.ndindex(array.shape):
            element = array[index]
            out[index] = as_atoms(element)[()] if _is_atom_like(element) else _constant_atom(element)
        return out
    if array.dtype.kind == "c":
        raise TracingError("symad traces real-valued functions only; got a complex constant")
    if array.dtype.kind not in "biuf":
        raise TracingError(f"symad cannot trace constants of dtype {array.dtype}")
    out = np.empty(array.shape, dtype=object)
    flat = out.reshape(-1)
    for position, element in enumerate(array.reshape(-1).tolist()):
        flat[position] = _constant_atom(element)
    return out


def _is_atom_like(value) -> bool:
    return isinstance(value, (Tracer, Parameter, sympy.Basic))


def _scalar_array(atom) -> np.ndarray:
    array = np.empty((), dtype=object)
    array[()] = atom
    return array


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


def _require_builder(action: str) -> GraphBuilder:
    builder = current_builder()
    if builder is None:
        raise TracingError(
            f"cannot {action} outside a trace: a traced value escaped the function that "
            "produced it (return it from the function instead of storing it)"
        )
    return builder


def substitute_atoms(atoms: np.ndarray, mapping: dict) -> np.ndarray:
    """A copy of the object array ``atoms`` with each atom replaced by ``mapping.get(atom, atom)``.

    >>> substitute_atoms(np.array([sympy.Symbol("a"), 2], dtype=object), {sympy.Symbol("a"): 1})
    array([1, 2], dtype=object)
    """
    out = np.empty(atoms.shape, dtype=object)
    flat = out.reshape(-1)
    for position, atom in enumerate(atoms.reshape(-1)):
        flat[position] = mapping.get(atom, atom)
    return out


def symbol_array(name: str, shape: tuple) -> np.ndarray:
    """An object array of SymPy symbols named ``name`` or ``name[i, j]``.

    >>> symbol_array("w", (1, 2))
    array([[w[0, 0], w[0, 1]]], dtype=object)
    """
    out = np.empty(shape, dtype=object)
    if shape == ():
        out[()] = sympy.Symbol(name)
        return out
    for index in np.ndindex(shape):
        out[index] = sympy.Symbol(f"{name}[{', '.join(map(str, index))}]")
    return out


# ---------------------------------------------------------------------------
# Recording an elementwise primitive
# ---------------------------------------------------------------------------


def apply(primitive, *operands, params: tuple = ()) -> Tracer:
    """Record ``primitive`` elementwise over broadcast operands and return a Tracer."""
    builder = _require_builder(f"apply {primitive.name}")
    arrays = [as_atoms(operand) for operand in operands]
    if all(array.ndim == 0 for array in arrays):
        atom = builder.record(primitive, [array[()] for array in arrays], params)
        return Tracer(_scalar_array(atom))
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
    out = np.empty(shape, dtype=object)
    flat = out.reshape(-1)
    record = builder.record
    for position, args in enumerate(zip(*columns)):
        flat[position] = record(primitive, args, params)
    return Tracer(out)


# ---------------------------------------------------------------------------
# The traced value
# ---------------------------------------------------------------------------


def _function_name() -> str:
    builder = current_builder()
    return builder.function_name if builder is not None else "function"


class Tracer(CantSympify):
    """A traced array (or scalar): an object array of graph atoms.

    Behaves like a NumPy array of floats: operators, methods, indexing and
    NumPy functions all work and record nodes in the graph being traced.
    """

    # CantSympify: SymPy's own operators then return NotImplemented, so
    # ``sympy.pi * tracer`` reaches Tracer.__rmul__ instead of failing in sympify.
    __slots__ = ("atoms",)
    # Higher than ndarray's, so ``ndarray + tracer`` defers to the tracer.
    __array_priority__ = 1000

    def __init__(self, atoms: np.ndarray):
        self.atoms = atoms

    # -- shape ---------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self.atoms.shape

    @property
    def ndim(self) -> int:
        return self.atoms.ndim

    @property
    def size(self) -> int:
        return self.atoms.size

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float64)

    @property
    def T(self) -> Tracer:  # noqa: N802 - NumPy's name
        return Tracer(self.atoms.T)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d traced value")
        for index in range(self.shape[0]):
            yield Tracer(self.atoms[index])

    def __getitem__(self, index) -> Tracer:
        _check_concrete_index(index)
        selected = self.atoms[index]
        if not isinstance(selected, np.ndarray):
            selected = _scalar_array(selected)
        return Tracer(selected)

    def __setitem__(self, index, value):
        raise TracingError(
            f"function {_function_name()!r} assigns into a traced array; traced arrays are "
            "immutable: build a new one with snp.where, snp.concatenate or snp.stack"
        )

    def __repr__(self) -> str:
        if self.ndim == 0:
            return f"Tracer({self.atoms[()]})"
        return f"Tracer(shape={self.shape})"

    # -- concreteness: Python control flow needs a value there is none of ----

    def __bool__(self):
        raise TracingError(
            f"function {_function_name()!r} uses a traced value in Python control flow "
            "(`if`, `while`, `and`/`or` or bool()); its value is symbolic while tracing. "
            "Branch with snp.where(condition, if_true, if_false) instead."
        )

    def _not_concrete(self, *args):
        raise TracingError(
            f"function {_function_name()!r} converts a traced value to a Python number "
            "(float(), int(), math.* or an index); use symad.numpy functions on it instead"
        )

    __float__ = __int__ = __index__ = __complex__ = _not_concrete

    def __array__(self, dtype=None, copy=None):
        raise TracingError(
            f"function {_function_name()!r} converts a traced value to a NumPy array "
            "(np.asarray/np.array on traced values); use snp.asarray, snp.stack or "
            "snp.concatenate to build arrays from traced values"
        )

    __hash__ = None  # ``==`` records a comparison, so tracers are not hashable

    # -- NumPy dispatch --------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from symad import numpy as snp

        return snp.dispatch_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from symad import numpy as snp

        return snp.dispatch_function(func, args, kwargs)

    # -- methods (the NumPy array API, as far as tracing goes) -----------------

    def reshape(self, *shape, order="C"):
        from symad import numpy as snp

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return snp.reshape(self, shape, order=order)

    def transpose(self, *axes):
        from symad import numpy as snp

        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return snp.transpose(self, axes or None)

    def ravel(self):
        return Tracer(self.atoms.ravel())

    flatten = ravel

    def squeeze(self, axis=None):
        return Tracer(self.atoms.squeeze(axis))

    def sum(self, axis=None, keepdims=False):
        from symad import numpy as snp

        return snp.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        from symad import numpy as snp

        return snp.mean(self, axis=axis, keepdims=keepdims)

    def prod(self, axis=None, keepdims=False):
        from symad import numpy as snp

        return snp.prod(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        from symad import numpy as snp

        return snp.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        from symad import numpy as snp

        return snp.min(self, axis=axis, keepdims=keepdims)

    def dot(self, other):
        from symad import numpy as snp

        return snp.dot(self, other)

    def clip(self, a_min=None, a_max=None):
        from symad import numpy as snp

        return snp.clip(self, a_min, a_max)

    def astype(self, dtype):
        if np.dtype(dtype).kind != "f":
            raise TracingError("traced values are real numbers; astype() accepts float dtypes only")
        return self


def _check_concrete_index(index) -> None:
    parts = index if isinstance(index, tuple) else (index,)
    for part in parts:
        if isinstance(part, (Tracer, Parameter)):
            raise TracingError(
                f"function {_function_name()!r} indexes with a traced value; indices must "
                "be concrete integers, slices or integer arrays (use snp.where to select by value)"
            )


def _install_operators() -> None:
    """Give Tracer the arithmetic and comparison operators of a NumPy array."""
    from symad import numpy as snp

    binary = {
        "add": snp.add, "sub": snp.subtract, "mul": snp.multiply, "truediv": snp.divide,
        "pow": snp.power, "matmul": snp.matmul,
    }
    for name, function in binary.items():
        setattr(Tracer, f"__{name}__", lambda self, other, f=function: f(self, other))
        setattr(Tracer, f"__r{name}__", lambda self, other, f=function: f(other, self))
    comparisons = {
        "lt": snp.less, "le": snp.less_equal, "gt": snp.greater, "ge": snp.greater_equal,
        "eq": snp.equal, "ne": snp.not_equal,
    }
    for name, function in comparisons.items():
        setattr(Tracer, f"__{name}__", lambda self, other, f=function: f(self, other))
    Tracer.__neg__ = lambda self: snp.negative(self)
    Tracer.__pos__ = lambda self: self
    Tracer.__abs__ = lambda self: snp.abs(self)


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
    >>> (w * 2).tolist(), w.shape
    ([2.0, 4.0], (2,))
    """

    __array_priority__ = 1001

    def __init__(self, value, name: str | None = None):
        self.name = name if name is not None else f"param{next(_parameter_counter)}"
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Parameter: name must be a non-empty string, got {name!r}")
        self.value = value
        self._symbols: dict = {}

    @property
    def value(self) -> np.ndarray:
        return self._value

    @value.setter
    def value(self, new_value) -> None:
        array = np.asarray(new_value)
        if array.dtype.kind not in "biuf":
            raise TypeError(
                f"Parameter {self.name!r}: value must be real numbers, got dtype {array.dtype}"
            )
        self._value = array.astype(np.float32 if array.dtype == np.float32 else np.float64)

    @property
    def shape(self) -> tuple:
        return self._value.shape

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    def symbols(self, shape: tuple | None = None) -> np.ndarray:
        """This parameter's input symbols for ``shape`` (default: its current shape)."""
        shape = self.shape if shape is None else tuple(shape)
        if shape not in self._symbols:
            self._symbols[shape] = symbol_array(self.name, shape)
        return self._symbols[shape]

    def _operand(self):
        """A Tracer inside a trace, the current value outside."""
        if current_builder() is not None:
            return Tracer(as_atoms(self))
        return self._value

    def __array__(self, dtype=None, copy=None):
        if current_builder() is not None:
            return Tracer(as_atoms(self)).__array__()
        return self._value if dtype is None else self._value.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(x._operand() if isinstance(x, Parameter) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        args = tuple(x._operand() if isinstance(x, Parameter) else x for x in args)
        return func(*args, **kwargs)

    def __getitem__(self, index):
        return self._operand()[index]

    def __len__(self):
        return len(self._value)

    def __repr__(self) -> str:
        return f"Parameter(name={self.name!r}, value={self._value!r})"

    @property
    def T(self):  # noqa: N802
        return self._operand().T

    def sum(self, *args, **kwargs):
        return self._operand().sum(*args, **kwargs)

    def mean(self, *args, **kwargs):
        return self._operand().mean(*args, **kwargs)

    def reshape(self, *args, **kwargs):
        return self._operand().reshape(*args, **kwargs)


def _install_parameter_operators() -> None:
    names = [
        "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "pow", "rpow",
        "matmul", "rmatmul", "lt", "le", "gt", "ge", "neg", "pos", "abs",
    ]
    for name in names:
        dunder = f"__{name}__"

        def method(self, *others, _dunder=dunder):
            operand = self._operand()
            others = tuple(o._operand() if isinstance(o, Parameter) else o for o in others)
            if isinstance(operand, np.ndarray) and _dunder in {"__neg__", "__pos__", "__abs__"}:
                return getattr(operand, _dunder)()
            return getattr(operand, _dunder)(*others)

        setattr(Parameter, dunder, method)


_install_parameter_operators()


def builder_parameter_atoms(builder: GraphBuilder, parameter: Parameter) -> np.ndarray:
    """The atoms standing for ``parameter`` in ``builder``, registering it as an input."""
    atoms = builder.parameters.get(parameter)
    if atoms is None:
        atoms = parameter.symbols()
        taken = builder.input_names()
        if any(symbol.name in taken for symbol in atoms.reshape(-1)):
            # Same name as an argument or another parameter: SymPy would make the two
            # symbols equal, so this builder gives the parameter primed names.
            suffix = "'"
            while any(
                f"{symbol.name}{suffix}" in taken for symbol in atoms.reshape(-1)
            ):
                suffix += "'"
            atoms = symbol_array(parameter.name + suffix, parameter.shape)
        builder.parameters[parameter] = atoms
        for symbol in atoms.reshape(-1):
            builder.add_input(symbol)
    return atoms
