"""New arrays (zeros, ones, full, empty and their ``_like`` forms, copy) and ``shape``/``ndim``/``size``.

Part of :mod:`symad.numpy`, which re-exports its public names.
"""

from __future__ import annotations

import numpy as _np

from symad.atom_arrays import traced_function_name
from symad.errors import TracingError
from symad.graph import current_builder
from symad.numpy.elementwise import add, concrete, divide, multiply, subtract
from symad.numpy.refusals import float_dtype_only
from symad.numpy.shapes import any_whole, asarray, broadcast_to, concatenate, moveaxis, shape
from symad.tracer import Tracer, as_atoms, contains_traced

#: The names symad.numpy re-exports from this family.
__all__ = [
    "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "empty_like", "full_like",
    "copy", "linspace", "arange", "int8", "int16", "int32", "int64", "intp",
]

# ---------------------------------------------------------------------------
# New arrays: the way to fill an array element by element
#
# Inside a trace these give a traced array of constants, which accepts traced
# values by item assignment (``out[i] = v``, copy-on-write, see
# Tracer.__setitem__); outside a trace they are NumPy's. ``np.zeros(n, like=x)``
# and ``np.zeros_like(x)`` on a traced ``x`` come here through
# ``__array_function__``.
# ---------------------------------------------------------------------------


def _filled(shape_, value, dtype, numpy_function):
    if dtype is not None and _np.dtype(dtype).kind not in "biuf":
        raise TracingError(
            f"function {traced_function_name()!r} creates an array of dtype {_np.dtype(dtype)}; "
            "symad traces real numbers only"
        )
    if current_builder() is None and not contains_traced(value):
        return numpy_function()
    shape_ = (shape_,) if isinstance(shape_, int) or _np.ndim(shape_) == 0 else tuple(shape_)
    if any_whole(value):
        return broadcast_to(value, shape_)
    atom = as_atoms(value)
    if atom.ndim != 0:
        return Tracer(_np.array(_np.broadcast_to(atom, shape_)))
    out = _np.empty(shape_, dtype=object)
    out.fill(atom[()])
    return Tracer(out)


def zeros(shape, dtype=None, order="C", *, device=None):  # noqa: A002 - NumPy's names
    """An array of zeros; inside a trace, a traced array that accepts ``out[i] = value``.

    >>> import symad as sd, symad.numpy as snp
    >>> def f(x):
    ...     out = snp.zeros(3)
    ...     for i in range(3):
    ...         out[i] = x ** (i + 1)
    ...     return out
    >>> sd.trace(f, 2.0).formula()
    [x, x**2, x**3]
    >>> snp.zeros(2)      # outside a trace: NumPy's
    array([0., 0.])
    """
    return _filled(shape, 0, dtype, lambda: _np.zeros(shape, dtype=dtype))


def ones(shape, dtype=None, order="C", *, device=None):
    """An array of ones; inside a trace, a traced array that accepts item assignment.

    >>> import symad as sd, symad.numpy as snp
    >>> sd.trace(lambda x: snp.ones(2) * x, 3.0).formula()
    [x, x]
    """
    return _filled(shape, 1, dtype, lambda: _np.ones(shape, dtype=dtype))


def full(shape, fill_value, dtype=None, order="C", *, device=None):
    """An array filled with ``fill_value`` (which may be traced).

    >>> import symad as sd, symad.numpy as snp
    >>> sd.trace(lambda x: snp.full((2,), x ** 2), 3.0).formula()
    [x**2, x**2]
    """
    return _filled(shape, fill_value, dtype, lambda: _np.full(shape, concrete(fill_value), dtype=dtype))


def empty(shape, dtype=None, order="C", *, device=None):
    """Like :func:`zeros`: a traced array cannot hold garbage, so it holds zeros.

    >>> import symad as sd, symad.numpy as snp
    >>> sd.trace(lambda x: snp.empty(2) + x, 3.0).formula()
    [x, x]
    """
    return _filled(shape, 0, dtype, lambda: _np.empty(shape, dtype=dtype))


def zeros_like(x, dtype=None, order="K", subok=True, shape=None, *, device=None):  # noqa: A002
    """Zeros with the shape of ``x``; traced (assignable) when ``x`` is traced.

    >>> import symad as sd, numpy as np
    >>> def f(x):
    ...     out = np.zeros_like(x)     # dispatches here: a traced array
    ...     out[0] = x[1] * 2
    ...     return out
    >>> sd.trace(f, np.ones(2)).formula()
    [2*x[1], 0]
    """
    return _filled_like(x, 0, dtype, shape)


def ones_like(x, dtype=None, order="K", subok=True, shape=None, *, device=None):  # noqa: A002
    """Ones with the shape of ``x``; traced (assignable) when ``x`` is traced.

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: np.ones_like(x) * x[0], np.zeros(2)).formula()
    [x[0], x[0]]
    """
    return _filled_like(x, 1, dtype, shape)


def empty_like(x, dtype=None, order="K", subok=True, shape=None, *, device=None):  # noqa: A002
    """Zeros with the shape of ``x`` (see :func:`empty`).

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: np.empty_like(x) + x[1], np.zeros(2)).formula()
    [x[1], x[1]]
    """
    return _filled_like(x, 0, dtype, shape)


def full_like(x, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):  # noqa: A002
    """An array like ``x`` filled with ``fill_value`` (which may be traced).

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: np.full_like(x, x[0] + 1), np.zeros(2)).formula()
    [x[0] + 1, x[0] + 1]
    """
    return _filled_like(x, fill_value, dtype, shape)


def _filled_like(x, value, dtype, new_shape):
    shape_ = shape(x) if new_shape is None else new_shape
    if not contains_traced(x) and not contains_traced(value):
        return _np.full_like(_np.asarray(concrete(x)), concrete(value), dtype=dtype, shape=new_shape)
    return _filled(shape_, value, dtype, None)


def copy(x, order="K", subok=False):
    """A copy of ``x`` (traced arrays copy on write, so this is free).

    >>> import symad as sd, numpy as np
    >>> def f(x):
    ...     y = np.copy(x)
    ...     y[0] = 0.0
    ...     return x + y
    >>> sd.trace(f, np.zeros(2)).formula(expand=True)
    [x[0], 2*x[1]]
    """
    if isinstance(x, Tracer):
        return x.copy()
    return _np.copy(concrete(x))


# ---------------------------------------------------------------------------
# The NumPy names this family implements (symad.numpy dispatches them here)
# ---------------------------------------------------------------------------

def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``np.linspace`` with traced ``start`` and ``stop`` (scalars or arrays).

    NumPy's own arithmetic, in its order: ``i * step + start`` with ``step = (stop -
    start) / (num - 1)`` (``/ num`` without the endpoint), and the last sample ``stop``
    itself. The derivative of sample ``i`` is ``1 - i / (num - 1)`` in ``start`` and
    ``i / (num - 1)`` in ``stop`` (``num`` and ``endpoint`` are not traced).

    >>> import symad as sd, numpy as np
    >>> sd.grad(lambda a, b: np.sum(np.linspace(a, b, 5) ** 2), argnums=(0, 1))(1.0, 2.0)
    (np.float64(6.25), np.float64(8.75))
    """
    float_dtype_only({"dtype": dtype}, "linspace")
    num = int(num)
    if num < 0:
        raise TracingError(f"linspace: num must be non-negative, got {num} "
                           f"(in function {traced_function_name()!r})")
    divisions = num - 1 if endpoint else num
    delta = subtract(stop, start)
    index = _np.arange(num, dtype=float).reshape((-1,) + (1,) * len(shape(delta)))
    step = divide(delta, divisions) if divisions > 0 else None
    samples = add(multiply(index, step if step is not None else delta), start)
    if endpoint and num > 1:  # NumPy sets the last sample to stop exactly
        last = broadcast_to(stop, (1,) + shape(samples)[1:])
        samples = concatenate([samples[:-1], last], axis=0)
    if axis != 0:
        samples = moveaxis(samples, 0, axis)
    if retstep:
        return samples, step if step is not None else _np.nan
    return samples


NUMPY_FUNCTIONS = {
    _np.zeros_like: zeros_like, _np.ones_like: ones_like, _np.full_like: full_like,
    _np.empty_like: empty_like, _np.copy: copy, _np.zeros: zeros, _np.ones: ones,
    _np.full: full, _np.empty: empty, _np.linspace: linspace,
}
#: The functions that make arrays: an integer ``dtype=`` is fine for them (not for a sum).
CONSTRUCTORS = {zeros, ones, full, empty, zeros_like, ones_like, full_like, empty_like}


def arange(start, stop=None, step=None, dtype=None, *, device=None, like=None):
    """NumPy's ``arange`` of numbers; traced endpoints are refused, saying why.

    An ``arange``'s length depends on its endpoints, and a traced array's shape cannot
    depend on traced values (as in JAX, whose ``arange`` wants concrete endpoints too).

    >>> import symad as sd, symad.numpy as snp
    >>> snp.arange(3.0).tolist()
    [0.0, 1.0, 2.0]
    >>> sd.grad(lambda x: snp.sum(x + 0.5 * snp.arange(3)))(1.0)   # traced start: x + step * arange(n)
    np.float64(3.0)
    """
    if contains_traced([start, stop, step]):
        raise TracingError(
            f"function {traced_function_name()!r} calls arange with a traced endpoint or step: "
            "the number of elements would depend on traced values, and a traced array's shape "
            "cannot (as in JAX). Write start + step * snp.arange(n) with n a number, or "
            "np.linspace(start, stop, n), which traces")
    arguments = [a for a in (start, stop, step) if a is not None] if step is None else [start, stop, step]
    return _np.arange(*arguments, dtype=dtype)


# ---------------------------------------------------------------------------
# Integer scalar types that cast traced values (as jax.numpy's do): np.int64(x) on a
# traced x cannot reach symad (NumPy builds an ndarray from it first), snp.int64(x) can.
# ---------------------------------------------------------------------------


class _IntegerType(type):
    """The class of ``snp.int64`` and its kin: calling one casts (rounding towards zero, as
    NumPy's cast does), a traced value into indices with a zero derivative, a number as
    NumPy's type would; ``dtype=snp.int64`` and ``x.dtype == snp.int64`` read its ``dtype``.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> snp.int64(2.7), np.dtype(snp.int64), isinstance(np.int64(3), snp.int64)
    (np.int64(2), dtype('int64'), True)
    >>> f = lambda w: np.sum(w[snp.int64(w[-1:] * 2)])     # w[int(2 * w[-1])]
    >>> sd.grad(f)(np.array([5.0, 7.0, 0.6])).tolist()     # no derivative through the index
    [0.0, 1.0, 0.0]
    """

    def __call__(cls, value=0):
        if contains_traced(value):
            return asarray(value).astype(cls.dtype)
        return cls.dtype.type(value)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"symad.numpy.{cls.__name__}"


def _integer_type(name: str) -> _IntegerType:
    return _IntegerType(name, (), {"dtype": _np.dtype(getattr(_np, name)),
                                   "__doc__": f"NumPy's ``{name}``, casting traced values too."})


int8, int16, int32, int64, intp = map(_integer_type, ("int8", "int16", "int32", "int64", "intp"))
