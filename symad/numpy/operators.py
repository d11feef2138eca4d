"""The operators and reduction methods of a traced value, backed by this namespace.

``x + y``, ``x < y``, ``-x``, ``x.sum(axis=0)`` on a
:class:`~symad.tracer.Tracer` call the functions of :mod:`symad.numpy`
(after the tracer's own fast path for traced scalars). Those functions are
built on the tracer, so the tracer cannot import them; this module, which
can, gives them to the Tracer class when :mod:`symad.numpy` loads (the
remaining binding from above: see docs/how-it-works.md, "Layers").
"""

from __future__ import annotations

from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.tracer import (
    BINARY_OPERATORS,
    COMPARISONS,
    UNTRACEABLE_OPERATORS,
    Tracer,
    record_scalars,
)

__all__ = ["install_operators"]


def install_operators(snp) -> None:
    """Give Tracer the arithmetic and comparison operators of a NumPy array."""
    binary = dict(zip(BINARY_OPERATORS, (snp.add, snp.subtract, snp.multiply, snp.divide,
                                          snp.power, snp.matmul)))
    binary["mod"] = snp.mod  # piecewise linear: x % y is traced
    for name, function in binary.items():
        primitive = getattr(function, "primitive", None)
        if primitive is None:  # matmul: no scalar form
            setattr(Tracer, f"__{name}__", lambda self, other, f=function: f(self, other))
            setattr(Tracer, f"__r{name}__", lambda self, other, f=function: f(other, self))
            continue
        setattr(Tracer, f"__{name}__", _scalar_operator(primitive, function, reflected=False))
        setattr(Tracer, f"__r{name}__", _scalar_operator(primitive, function, reflected=True))
    comparisons = dict(zip(COMPARISONS, (snp.less, snp.less_equal, snp.greater,
                                           snp.greater_equal, snp.equal, snp.not_equal)))
    for name, function in comparisons.items():
        setattr(Tracer, f"__{name}__", lambda self, other, f=function: f(self, other))
    logical = dict(zip(("and", "or"), (snp.logical_and, snp.logical_or)))
    for name, function in logical.items():  # & and | combine conditions, as on NumPy bools
        setattr(Tracer, f"__{name}__", lambda self, other, f=function: f(self, other))
        setattr(Tracer, f"__r{name}__", lambda self, other, f=function: f(other, self))
    Tracer.__invert__ = lambda self: snp.logical_not(self)
    Tracer.__neg__ = _scalar_operator_unary(snp.negative)
    Tracer.__pos__ = lambda self: self
    Tracer.__abs__ = lambda self: snp.abs(self)
    # Reductions as methods: x.sum(axis=0) is snp.sum(x, axis=0), and so on.
    for name in ("sum", "mean", "var", "std", "prod", "max", "min", "clip"):
        setattr(Tracer, name, _array_method(snp, name))
    for name in UNTRACEABLE_OPERATORS:
        setattr(Tracer, f"__{name}__", _untraceable_operator(name))
        if name in ("floordiv", "divmod"):
            setattr(Tracer, f"__r{name}__", _untraceable_operator(name))


def _scalar_operator(primitive, function, reflected: bool):
    """A binary operator taking :func:`record_scalars`' fast path before ``function``'s."""
    if reflected:
        def operator(self, other):
            result = record_scalars(primitive, (other, self))
            return function(other, self) if result is None else result
    else:
        def operator(self, other):
            result = record_scalars(primitive, (self, other))
            return function(self, other) if result is None else result
    return operator


def _scalar_operator_unary(function):
    """A unary operator taking :func:`record_scalars`' fast path before ``function``'s."""
    primitive = function.primitive

    def operator(self):
        result = record_scalars(primitive, (self,))
        return function(self) if result is None else result
    return operator


def _array_method(snp, name: str):
    """``x.name(...)`` as ``snp.name(x, ...)``, NumPy's positional order; keywords symad
    does not trace (``out=``, ``where=``, ``initial=``...) raise a TracingError naming them."""
    function = getattr(snp, name)

    def method(self, *args, **kwargs):
        if "out" in kwargs and kwargs["out"] is None:
            del kwargs["out"]
        snp.check_arguments(function, (self, *args), kwargs, f"ndarray.{name}")
        return function(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``snp.{name}(x, ...)``: see :func:`symad.numpy.{name}`."
    return method


#: The traced spelling of each operator symad refuses (Python's returns an integer).
_SPELLING = {"floordiv": "np.floor(x / y)", "divmod": "(np.floor(x / y), x % y)",
             "round": "np.round(x)", "trunc": "np.trunc(x)", "floor": "np.floor(x)",
             "ceil": "np.ceil(x)"}


def _untraceable_operator(name: str):
    def method(self, *args):
        raise TracingError(
            f"function {traced_function_name()!r} applies `{name}` to a traced value; Python's "
            f"`{name}` gives an integer, which a traced value is not. Write {_SPELLING[name]}, "
            "which symad traces."
        )

    return method
