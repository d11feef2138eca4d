"""``symad.numpy``: the NumPy-like namespace of traceable operations.

Every function works on plain NumPy values (computing numerically, like
NumPy) and on traced values (recording nodes). Inside a traced function the
same-named NumPy functions dispatch here too, so ``np.sin(x)`` and
``snp.sin(x)`` are interchangeable.

>>> import symad as sd, symad.numpy as snp
>>> float(snp.sigmoid(0.0))
0.5
>>> sd.trace(lambda x: snp.sum(snp.exp(x)), [0.0, 1.0]).formula()
exp(x[0]) + exp(x[1])
"""

from __future__ import annotations

import builtins
import inspect
import math
from typing import Any

import numpy as _np
import sympy

from symad import primitives as P
from symad.errors import TracingError
from symad.graph import current_builder
from symad.tracer import Parameter, Tracer, apply, as_atoms, contains_traced

# ---------------------------------------------------------------------------
# Elementwise functions
# ---------------------------------------------------------------------------


def _concrete(value):
    return value.value if isinstance(value, Parameter) else value


def _elementwise(primitive, public_name: str, doc: str):
    def function(*operands):
        if builtins.any(contains_traced(operand) for operand in operands):
            return apply(primitive, *operands)
        with _np.errstate(all="ignore"):
            return primitive.numpy_impl(*(_np.asarray(_concrete(o)) for o in operands))

    function.__name__ = function.__qualname__ = public_name
    function.__doc__ = doc
    if not primitive.variadic:
        # Name the arguments like NumPy's ufuncs, so traced inputs read x (or x1, x2).
        names = ["x"] if len(primitive.partials) == 1 else [f"x{i + 1}" for i in range(len(primitive.partials))]
        function.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
        )
    return function


add = _elementwise(P.add_p, "add", "Elementwise ``a + b``.")
subtract = _elementwise(P.sub_p, "subtract", "Elementwise ``a - b``.")
multiply = _elementwise(P.mul_p, "multiply", "Elementwise ``a * b``.")
divide = _elementwise(P.div_p, "divide", "Elementwise ``a / b``.")
true_divide = divide
negative = _elementwise(P.neg_p, "negative", "Elementwise ``-x``.")
power = _elementwise(P.pow_p, "power", "Elementwise ``a ** b`` (the exponent may be traced too).")
sqrt = _elementwise(P.sqrt_p, "sqrt", "Elementwise square root.")
cbrt = _elementwise(P.cbrt_p, "cbrt", "Elementwise real cube root.")
exp = _elementwise(P.exp_p, "exp", "Elementwise exponential.")
exp2 = _elementwise(P.exp2_p, "exp2", "Elementwise ``2 ** x``.")
expm1 = _elementwise(P.expm1_p, "expm1", "Elementwise ``exp(x) - 1``, accurate near 0.")
log = _elementwise(P.log_p, "log", "Elementwise natural logarithm.")
log2 = _elementwise(P.log2_p, "log2", "Elementwise base-2 logarithm.")
log10 = _elementwise(P.log10_p, "log10", "Elementwise base-10 logarithm.")
log1p = _elementwise(P.log1p_p, "log1p", "Elementwise ``log(1 + x)``, accurate near 0.")
sin = _elementwise(P.sin_p, "sin", "Elementwise sine.")
cos = _elementwise(P.cos_p, "cos", "Elementwise cosine.")
tan = _elementwise(P.tan_p, "tan", "Elementwise tangent.")
arcsin = _elementwise(P.arcsin_p, "arcsin", "Elementwise inverse sine.")
arccos = _elementwise(P.arccos_p, "arccos", "Elementwise inverse cosine.")
arctan = _elementwise(P.arctan_p, "arctan", "Elementwise inverse tangent.")
arctan2 = _elementwise(P.arctan2_p, "arctan2", "Elementwise ``arctan(y / x)`` in the right quadrant.")
sinh = _elementwise(P.sinh_p, "sinh", "Elementwise hyperbolic sine.")
cosh = _elementwise(P.cosh_p, "cosh", "Elementwise hyperbolic cosine.")
tanh = _elementwise(P.tanh_p, "tanh", "Elementwise hyperbolic tangent.")
arcsinh = _elementwise(P.arcsinh_p, "arcsinh", "Elementwise inverse hyperbolic sine.")
arccosh = _elementwise(P.arccosh_p, "arccosh", "Elementwise inverse hyperbolic cosine.")
arctanh = _elementwise(P.arctanh_p, "arctanh", "Elementwise inverse hyperbolic tangent.")
abs = _elementwise(P.abs_p, "abs", "Elementwise absolute value.")  # noqa: A001
absolute = abs
sign = _elementwise(P.sign_p, "sign", "Elementwise sign (-1, 0 or 1); its derivative is zero.")
maximum = _elementwise(P.maximum_p, "maximum", "Elementwise maximum of two arrays.")
minimum = _elementwise(P.minimum_p, "minimum", "Elementwise minimum of two arrays.")
hypot = _elementwise(P.hypot_p, "hypot", "Elementwise ``sqrt(a**2 + b**2)`` without overflow.")
logaddexp = _elementwise(P.logaddexp_p, "logaddexp", "Elementwise ``log(exp(a) + exp(b))``, stably.")
erf = _elementwise(P.erf_p, "erf", "Elementwise error function.")
erfc = _elementwise(P.erfc_p, "erfc", "Elementwise complementary error function.")
sigmoid = _elementwise(P.sigmoid_p, "sigmoid", "Elementwise logistic function ``1/(1 + exp(-x))``.")
softplus = _elementwise(P.softplus_p, "softplus", "Elementwise ``log(1 + exp(x))``, stably.")
less = _elementwise(P.less_p, "less", "Elementwise ``a < b`` (for snp.where).")
less_equal = _elementwise(P.less_equal_p, "less_equal", "Elementwise ``a <= b``.")
greater = _elementwise(P.greater_p, "greater", "Elementwise ``a > b``.")
greater_equal = _elementwise(P.greater_equal_p, "greater_equal", "Elementwise ``a >= b``.")
equal = _elementwise(P.equal_p, "equal", "Elementwise ``a == b``.")
not_equal = _elementwise(P.not_equal_p, "not_equal", "Elementwise ``a != b``.")
_select = _elementwise(P.select_p, "where", "")
stop_gradient = _elementwise(
    P.stop_gradient_p, "stop_gradient",
    "``x`` itself, with no derivative of any order flowing through it.",
)


def positive(x):
    """Elementwise ``+x`` (``x`` itself)."""
    return x


def square(x):
    """Elementwise ``x ** 2``."""
    return power(x, 2)


def reciprocal(x):
    """Elementwise ``1 / x``."""
    return divide(1, x)


def where(condition, if_true=None, if_false=None):
    """Elementwise ``if_true`` where ``condition`` holds, else ``if_false``: the way to branch.

    >>> import symad as sd, symad.numpy as snp
    >>> relu = lambda x: snp.where(x > 0, x, 0.0)
    >>> float(sd.grad(relu)(2.0)), float(sd.grad(relu)(-2.0))
    (1.0, 0.0)
    """
    if if_true is None or if_false is None:
        raise TracingError("snp.where needs three arguments: where(condition, if_true, if_false)")
    return _select(condition, if_true, if_false)


def clip(x, a_min=None, a_max=None):
    """Elementwise ``x`` limited to ``[a_min, a_max]`` (either bound may be None)."""
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


# ---------------------------------------------------------------------------
# Array construction and shape manipulation (no nodes: the object array moves)
# ---------------------------------------------------------------------------


def _traced_inputs(*values) -> bool:
    return builtins.any(contains_traced(v) for v in values)


def asarray(value, dtype=None):
    """``value`` as an array; nested lists of traced values become one traced array."""
    if isinstance(value, Tracer):
        return value
    if isinstance(value, (list, tuple)):
        items = [asarray(item) for item in value]
        if builtins.any(isinstance(item, Tracer) for item in items):
            return stack(items)
    if isinstance(value, Parameter):
        return value._operand()
    return _np.asarray(value, dtype=dtype)


array = asarray


def _atoms_op(function, *values, **kwargs):
    return Tracer(function(*(as_atoms(v) for v in values), **kwargs))


def reshape(x, shape, order="C"):
    """Array ``x`` with a new shape."""
    if not _traced_inputs(x):
        return _np.reshape(_concrete(x), shape, order=order)
    return Tracer(as_atoms(x).reshape(shape, order=order))


def transpose(x, axes=None):
    """Array ``x`` with its axes permuted (reversed by default)."""
    if not _traced_inputs(x):
        return _np.transpose(_concrete(x), axes)
    return Tracer(_np.transpose(as_atoms(x), axes))


def ravel(x):
    """``x`` flattened to one dimension."""
    return reshape(x, (-1,))


def swapaxes(x, axis1, axis2):
    """``x`` with two axes interchanged."""
    if not _traced_inputs(x):
        return _np.swapaxes(_concrete(x), axis1, axis2)
    return Tracer(_np.swapaxes(as_atoms(x), axis1, axis2))


def moveaxis(x, source, destination):
    """``x`` with axes moved to new positions."""
    if not _traced_inputs(x):
        return _np.moveaxis(_concrete(x), source, destination)
    return Tracer(_np.moveaxis(as_atoms(x), source, destination))


def expand_dims(x, axis):
    """``x`` with a new axis of length one."""
    if not _traced_inputs(x):
        return _np.expand_dims(_concrete(x), axis)
    return Tracer(_np.expand_dims(as_atoms(x), axis))


def squeeze(x, axis=None):
    """``x`` without axes of length one."""
    if not _traced_inputs(x):
        return _np.squeeze(_concrete(x), axis)
    return Tracer(_np.squeeze(as_atoms(x), axis))


def broadcast_to(x, shape):
    """``x`` broadcast to ``shape``."""
    if not _traced_inputs(x):
        return _np.broadcast_to(_concrete(x), shape)
    return Tracer(_np.array(_np.broadcast_to(as_atoms(x), shape)))


def concatenate(arrays, axis=0):
    """Join arrays along an existing axis."""
    arrays = list(arrays)
    if not _traced_inputs(*arrays):
        return _np.concatenate([_concrete(a) for a in arrays], axis=axis)
    return Tracer(_np.concatenate([as_atoms(a) for a in arrays], axis=axis))


def stack(arrays, axis=0):
    """Join arrays along a new axis."""
    arrays = list(arrays)
    if not _traced_inputs(*arrays):
        return _np.stack([_concrete(a) for a in arrays], axis=axis)
    return Tracer(_np.stack([as_atoms(a) for a in arrays], axis=axis))


def hstack(arrays):
    """Join arrays column-wise (along axis 1, or 0 for 1-D arrays)."""
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1)


def vstack(arrays):
    """Join arrays row-wise."""
    return concatenate([atleast_2d(a) for a in arrays], axis=0)


def atleast_1d(x):
    """``x`` with at least one dimension."""
    x = asarray(x)
    return reshape(x, (1,)) if x.ndim == 0 else x


def atleast_2d(x):
    """``x`` with at least two dimensions."""
    x = atleast_1d(x)
    return reshape(x, (1,) + tuple(x.shape)) if x.ndim == 1 else x


def zeros_like(x, dtype=None):
    """Zeros with the shape of ``x`` (a concrete array: it carries no derivative)."""
    return _np.zeros(_np.shape(x) if not isinstance(x, Tracer) else x.shape)


def ones_like(x, dtype=None):
    """Ones with the shape of ``x``."""
    return _np.ones(_np.shape(x) if not isinstance(x, Tracer) else x.shape)


def shape(x):
    """The shape of ``x``."""
    return x.shape if isinstance(x, (Tracer, Parameter)) else _np.shape(x)


def ndim(x):
    """The number of dimensions of ``x``."""
    return len(shape(x))


def size(x):
    """The number of elements of ``x``."""
    return math.prod(shape(x))


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------


def _normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    normalized = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise _np.exceptions.AxisError(a, ndim)
        normalized.append(a % ndim)
    return tuple(normalized)


def _reduce(x, axis, keepdims, combine):
    """Reduce traced ``x`` over ``axis``, combining each row of atoms with ``combine``."""
    atoms = as_atoms(x)
    axes = _normalize_axes(axis, atoms.ndim)
    kept_axes = [a for a in range(atoms.ndim) if a not in axes]
    moved = _np.transpose(atoms, kept_axes + list(axes))
    out_shape = moved.shape[: len(kept_axes)]
    rows = moved.reshape(out_shape + (-1,))
    builder = current_builder()
    out = _np.empty(out_shape, dtype=object)
    for index in _np.ndindex(out_shape):
        out[index] = combine(builder, list(rows[index]))
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else atoms.shape[a] for a in range(atoms.ndim)))
    return Tracer(out)


def _sum_row(builder, row):
    if not row:
        return sympy.Integer(0)
    return builder.record(P.add_p, row) if len(row) > 1 else row[0]


def _fold_row(primitive, empty_error):
    def combine(builder, row):
        if not row:
            raise ValueError(empty_error)
        result = row[0]
        for atom in row[1:]:
            result = builder.record(primitive, (result, atom))
        return result

    return combine


def _prod_row(builder, row):
    return _fold_row(P.mul_p, "")(builder, row) if row else sympy.Integer(1)


def sum(x, axis=None, keepdims=False):  # noqa: A001
    """Sum of elements over ``axis`` (all by default)."""
    if not _traced_inputs(x):
        return _np.sum(_concrete(x), axis=axis, keepdims=keepdims)
    return _reduce(x, axis, keepdims, _sum_row)


def mean(x, axis=None, keepdims=False):
    """Mean of elements over ``axis`` (all by default)."""
    if not _traced_inputs(x):
        return _np.mean(_concrete(x), axis=axis, keepdims=keepdims)
    x_shape = shape(x)
    count = math.prod(x_shape[a] for a in _normalize_axes(axis, len(x_shape)))
    return multiply(sum(x, axis=axis, keepdims=keepdims), sympy.Rational(1, count))


def prod(x, axis=None, keepdims=False):
    """Product of elements over ``axis`` (all by default)."""
    if not _traced_inputs(x):
        return _np.prod(_concrete(x), axis=axis, keepdims=keepdims)
    return _reduce(x, axis, keepdims, _prod_row)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis``; the derivative follows the maximal element."""
    if not _traced_inputs(x):
        return _np.max(_concrete(x), axis=axis, keepdims=keepdims)
    return _reduce(x, axis, keepdims, _fold_row(P.maximum_p, "max of an empty array"))


def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis``."""
    if not _traced_inputs(x):
        return _np.min(_concrete(x), axis=axis, keepdims=keepdims)
    return _reduce(x, axis, keepdims, _fold_row(P.minimum_p, "min of an empty array"))


amax, amin = max, min


def logsumexp(x, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis``, evaluated stably; its formula reads as written."""
    if not _traced_inputs(x):
        import scipy.special

        return scipy.special.logsumexp(_concrete(x), axis=axis, keepdims=keepdims)

    def combine(builder, row):
        if not row:
            raise ValueError("logsumexp of an empty array")
        return builder.record(P.logsumexp_p, row) if len(row) > 1 else row[0]

    return _reduce(x, axis, keepdims, combine)


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    """The 2-norm of a vector or the Frobenius norm of a matrix (``sqrt(sum(x**2))``)."""
    if not _traced_inputs(x):
        return _np.linalg.norm(_concrete(x), ord=ord, axis=axis, keepdims=keepdims)
    x_ndim = ndim(x)
    matrix_norm = (axis is None and x_ndim == 2) or (isinstance(axis, tuple) and len(axis) == 2)
    if not (ord is None or ord == "fro" and matrix_norm or ord == 2 and not matrix_norm):
        raise TracingError(
            f"norm(ord={ord!r}) is not traceable; symad traces the 2-norm of vectors and the "
            "Frobenius norm of matrices (ord=None)"
        )
    return sqrt(sum(multiply(x, x), axis=axis, keepdims=keepdims))


class linalg:  # noqa: N801 - mirrors ``numpy.linalg``
    """``snp.linalg.norm``, for code written against ``np.linalg``."""

    norm = staticmethod(norm)


# ---------------------------------------------------------------------------
# Products
# ---------------------------------------------------------------------------


def _sum_of_products(builder, left_row, right_row):
    terms = [builder.record(P.mul_p, (a, b)) for a, b in zip(left_row, right_row)]
    return _sum_row(builder, [t for t in terms if not (t.is_Number and t.is_zero)])


def matmul(a, b):
    """Matrix product with NumPy's rules (1-D promotion, broadcast batch dimensions)."""
    if not _traced_inputs(a, b):
        return _np.matmul(_concrete(a), _concrete(b))
    left, right = as_atoms(a), as_atoms(b)
    if left.ndim == 0 or right.ndim == 0:
        raise ValueError("matmul: an operand is a scalar; use * for scalars")
    squeeze_rows, squeeze_cols = left.ndim == 1, right.ndim == 1
    if squeeze_rows:
        left = left[None, :]
    if squeeze_cols:
        right = right[:, None]
    if left.shape[-1] != right.shape[-2]:
        raise ValueError(
            f"matmul: shapes {shape(a)} and {shape(b)} do not align "
            f"({left.shape[-1]} != {right.shape[-2]})"
        )
    batch = _np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    left = _np.broadcast_to(left, batch + left.shape[-2:])
    right = _np.broadcast_to(right, batch + right.shape[-2:])
    rows, cols = left.shape[-2], right.shape[-1]
    builder = current_builder()
    out = _np.empty(batch + (rows, cols), dtype=object)
    for batch_index in _np.ndindex(batch):
        left_matrix, right_matrix = left[batch_index], right[batch_index]
        for i in range(rows):
            for j in range(cols):
                out[batch_index + (i, j)] = _sum_of_products(
                    builder, left_matrix[i, :], right_matrix[:, j]
                )
    if squeeze_rows:
        out = out[..., 0, :]
    if squeeze_cols:
        out = out[..., 0]
    return Tracer(out)


def dot(a, b):
    """NumPy's ``dot`` for scalars, vectors and matrices."""
    if not _traced_inputs(a, b):
        return _np.dot(_concrete(a), _concrete(b))
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    if ndim(a) > 2 or ndim(b) > 2:
        raise TracingError("dot of arrays with more than 2 dimensions is not traced; use matmul")
    return matmul(a, b)


def vdot(a, b):
    """The dot product of two arrays flattened to vectors."""
    return dot(ravel(a), ravel(b))


def inner(a, b):
    """Inner product over the last axes (vectors: the dot product)."""
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    return matmul(a, swapaxes(b, -1, -2)) if ndim(b) > 1 else matmul(a, b)


def outer(a, b):
    """Outer product of two arrays flattened to vectors."""
    if not _traced_inputs(a, b):
        return _np.outer(_concrete(a), _concrete(b))
    left, right = as_atoms(a).reshape(-1), as_atoms(b).reshape(-1)
    builder = current_builder()
    out = _np.empty((left.size, right.size), dtype=object)
    for i, x in enumerate(left):
        for j, y in enumerate(right):
            out[i, j] = builder.record(P.mul_p, (x, y))
    return Tracer(out)


def trace(x, offset=0, axis1=0, axis2=1):
    """Sum along a diagonal."""
    if not _traced_inputs(x):
        return _np.trace(_concrete(x), offset, axis1, axis2)
    return sum(Tracer(_np.diagonal(as_atoms(x), offset, axis1, axis2)), axis=-1)


def diagonal(x, offset=0, axis1=0, axis2=1):
    """A diagonal of ``x``."""
    if not _traced_inputs(x):
        return _np.diagonal(_concrete(x), offset, axis1, axis2)
    return Tracer(_np.array(_np.diagonal(as_atoms(x), offset, axis1, axis2)))


def cumsum(x, axis=None):
    """Cumulative sum along ``axis`` (flattened when None)."""
    if not _traced_inputs(x):
        return _np.cumsum(_concrete(x), axis=axis)
    if axis is None:
        x, axis = ravel(x), 0
    moved = moveaxis(x, axis, -1)
    running = [moved[..., 0]]
    for k in range(1, shape(moved)[-1]):
        running.append(add(running[-1], moved[..., k]))
    return moveaxis(stack(running, axis=-1), -1, axis)


# ---------------------------------------------------------------------------
# Dispatch from NumPy's protocols
# ---------------------------------------------------------------------------

_UFUNCS = {
    "add": add, "subtract": subtract, "multiply": multiply, "divide": divide,
    "true_divide": divide, "negative": negative, "positive": positive, "power": power,
    "float_power": power, "square": square, "reciprocal": reciprocal, "sqrt": sqrt,
    "cbrt": cbrt, "exp": exp, "exp2": exp2, "expm1": expm1, "log": log, "log2": log2,
    "log10": log10, "log1p": log1p, "sin": sin, "cos": cos, "tan": tan, "arcsin": arcsin,
    "arccos": arccos, "arctan": arctan, "arctan2": arctan2, "sinh": sinh, "cosh": cosh,
    "tanh": tanh, "arcsinh": arcsinh, "arccosh": arccosh, "arctanh": arctanh,
    "absolute": abs, "fabs": abs, "sign": sign, "maximum": maximum, "minimum": minimum,
    "fmax": maximum, "fmin": minimum, "hypot": hypot, "logaddexp": logaddexp, "erf": erf,
    "erfc": erfc, "expit": sigmoid, "less": less, "less_equal": less_equal,
    "greater": greater, "greater_equal": greater_equal, "equal": equal,
    "not_equal": not_equal, "matmul": matmul,
}

_REDUCTIONS = {"add": sum, "multiply": prod, "maximum": max, "minimum": min}


def _untraceable(what: str) -> TracingError:
    builder = current_builder()
    function_name = builder.function_name if builder is not None else "function"
    return TracingError(
        f"function {function_name!r} calls {what}, which symad cannot trace. Use the "
        "operations of symad.numpy, or wrap a numeric implementation with @sd.primitive "
        "and give it partial derivatives with .defpartials."
    )


def dispatch_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """Route a NumPy ufunc call on traced values to the matching traceable function."""
    name = getattr(ufunc, "__name__", repr(ufunc))
    if kwargs.get("out") is not None:
        raise _untraceable(f"numpy.{name} with out=")
    if method == "__call__" and name in _UFUNCS:
        return _UFUNCS[name](*inputs)
    if method == "reduce" and name in _REDUCTIONS:
        (x,) = inputs
        return _REDUCTIONS[name](x, axis=kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False))
    suffix = "" if method == "__call__" else f".{method}"
    raise _untraceable(f"the ufunc numpy.{name}{suffix}")


def _function_table() -> dict:
    table = {
        _np.sum: sum, _np.mean: mean, _np.prod: prod, _np.max: max, _np.min: min,
        _np.amax: max, _np.amin: min, _np.dot: dot, _np.vdot: vdot, _np.inner: inner,
        _np.outer: outer, _np.transpose: transpose, _np.reshape: reshape, _np.ravel: ravel,
        _np.concatenate: concatenate, _np.stack: stack, _np.hstack: hstack,
        _np.vstack: vstack, _np.broadcast_to: broadcast_to, _np.expand_dims: expand_dims,
        _np.squeeze: squeeze, _np.swapaxes: swapaxes, _np.moveaxis: moveaxis,
        _np.where: where, _np.clip: clip, _np.linalg.norm: norm, _np.shape: shape,
        _np.ndim: ndim, _np.size: size, _np.zeros_like: zeros_like,
        _np.ones_like: ones_like, _np.trace: trace, _np.diagonal: diagonal,
        _np.cumsum: cumsum, _np.atleast_1d: atleast_1d, _np.atleast_2d: atleast_2d,
    }
    if hasattr(_np, "matmul") and not isinstance(_np.matmul, _np.ufunc):
        table[_np.matmul] = matmul
    return table


_FUNCTIONS = _function_table()


def dispatch_function(func, args: tuple, kwargs: dict) -> Any:
    """Route a NumPy array function called on traced values to its traceable version."""
    implementation = _FUNCTIONS.get(func)
    if implementation is None:
        module = getattr(func, "__module__", "numpy") or "numpy"
        raise _untraceable(f"{module}.{func.__name__}")
    return implementation(*args, **kwargs)


__all__ = [name for name in dir() if not name.startswith("_") and name not in {
    "annotations", "builtins", "math", "sympy", "Any", "P", "TracingError", "current_builder",
    "Parameter", "Tracer", "as_atoms", "contains_traced", "is_traced", "apply",
}]


def _give_tracers_operators() -> None:
    from symad.tracer import _install_operators

    _install_operators()


_give_tracers_operators()
