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
import functools
import inspect
import math
import sys as _sys
from typing import Any

import numpy as _np
import sympy

from symad import array_primitives as A
from symad import primitives as P
from symad import tracer as _tracer_module
from symad.errors import TracingError
from symad.graph import atom_shape, current_builder
from symad.tracer import (
    Parameter,
    Tracer,
    apply,
    as_atom,
    as_atoms,
    contains_traced,
    record_scalars,
    traced_function_name,
)

# ---------------------------------------------------------------------------
# Elementwise functions
# ---------------------------------------------------------------------------


def _concrete(value):
    if isinstance(value, Parameter):
        return value.value
    if isinstance(value, (list, tuple)):
        return type(value)(_concrete(v) for v in value)
    return value


def _elementwise(primitive, public_name: str, doc: str):
    def function(*operands):
        scalar = record_scalars(primitive, operands)
        if scalar is not None:  # traced scalars and numbers: recorded without array logic
            return scalar
        if builtins.any(contains_traced(operand) for operand in operands):
            return apply(primitive, *operands)
        with _np.errstate(all="ignore"):
            return primitive.numpy_impl(*(_np.asarray(_concrete(o)) for o in operands))

    function.__name__ = function.__qualname__ = public_name
    function.__doc__ = doc
    function.primitive = primitive
    if not primitive.variadic:
        # Name the arguments like NumPy's ufuncs, so traced inputs read x (or x1, x2).
        names = ["x"] if primitive.arity == 1 else [f"x{i + 1}" for i in range(primitive.arity)]
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
logical_and = _elementwise(P.logical_and_p, "logical_and", "Elementwise ``a and b`` of conditions.")
logical_or = _elementwise(P.logical_or_p, "logical_or", "Elementwise ``a or b`` of conditions.")
logical_not = _elementwise(P.logical_not_p, "logical_not", "Elementwise ``not a`` of a condition.")
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
        raise TracingError(
            f"function {traced_function_name()!r} calls where(condition) with one argument, "
            "which gives indices that depend on the traced values and is not traced. Select "
            "with the three-argument form, snp.where(condition, if_true, if_false)"
        )
    return _select(condition, if_true, if_false)


def clip(x, a_min=None, a_max=None, *, min=None, max=None):  # noqa: A002 - NumPy 2's keywords
    """Elementwise ``x`` limited to ``[a_min, a_max]`` (either bound may be None).

    NumPy 2's keyword spellings ``min=`` and ``max=`` are accepted too.
    """
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
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


def _numpy_when_concrete(numpy_function):
    """Decorate the traced version of an array function: concrete inputs go to NumPy.

    Every ``symad.numpy`` array function works on plain arrays exactly like
    its NumPy namesake; only traced inputs reach the decorated body.
    """

    def decorate(traced_version):
        @functools.wraps(traced_version)
        def function(*args, **kwargs):
            if _traced_inputs(*args, *kwargs.values()):
                try:
                    return traced_version(*args, **kwargs)
                except (ValueError, IndexError) as error:  # NumPy's shape errors, on atoms
                    raise TracingError(
                        f"{traced_version.__name__} in function {traced_function_name()!r}: {error}"
                    ) from None
            return numpy_function(*_concrete(args), **{k: _concrete(v) for k, v in kwargs.items()})

        return function

    return decorate


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


@_numpy_when_concrete(_np.reshape)
def reshape(x, shape, order="C"):
    """Array ``x`` with a new shape."""
    if _any_whole(x):
        return _whole_reshape(x, shape, order)
    return Tracer(as_atoms(x).reshape(shape, order=order))


@_numpy_when_concrete(_np.transpose)
def transpose(x, axes=None):
    """Array ``x`` with its axes permuted (reversed by default)."""
    if _any_whole(x):
        return _whole_transpose(x, axes)
    return Tracer(_np.transpose(as_atoms(x), axes))


def ravel(x):
    """``x`` flattened to one dimension."""
    return reshape(x, (-1,))


@_numpy_when_concrete(_np.swapaxes)
def swapaxes(x, axis1, axis2):
    """``x`` with two axes interchanged."""
    if _any_whole(x):
        perm = list(range(ndim(x)))
        a, b = A.normalize_axes(axis1, ndim(x), "swapaxes")[0], A.normalize_axes(axis2, ndim(x), "swapaxes")[0]
        perm[a], perm[b] = perm[b], perm[a]
        return _whole_transpose(x, perm)
    return Tracer(_np.swapaxes(as_atoms(x), axis1, axis2))


@_numpy_when_concrete(_np.moveaxis)
def moveaxis(x, source, destination):
    """``x`` with axes moved to new positions."""
    if _any_whole(x):
        # The axes' new order, read off NumPy's own moveaxis on a shape of distinct sizes.
        order = _np.moveaxis(A._dummy(tuple(range(2, ndim(x) + 2))), source, destination).shape
        return _whole_transpose(x, tuple(size - 2 for size in order))
    return Tracer(_np.moveaxis(as_atoms(x), source, destination))


@_numpy_when_concrete(_np.expand_dims)
def expand_dims(x, axis):
    """``x`` with a new axis of length one."""
    if _any_whole(x):
        return _whole_reshape(x, _np.expand_dims(A._dummy(shape(x)), axis).shape)
    return Tracer(_np.expand_dims(as_atoms(x), axis))


@_numpy_when_concrete(_np.squeeze)
def squeeze(x, axis=None):
    """``x`` without axes of length one."""
    if _any_whole(x):
        return _whole_reshape(x, _np.squeeze(A._dummy(shape(x)), axis).shape)
    return Tracer(_np.squeeze(as_atoms(x), axis))


@_numpy_when_concrete(_np.broadcast_to)
def broadcast_to(x, shape):
    """``x`` broadcast to ``shape``."""
    if _any_whole(x):
        target = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
        return _wrap(A.record_broadcast(_builder(), as_atom(x), target))
    return Tracer(_np.array(_np.broadcast_to(as_atoms(x), shape)))


@_numpy_when_concrete(_np.concatenate)
def concatenate(arrays, axis=0):
    """Join arrays along an existing axis."""
    if _any_whole(*arrays):
        arrays = [ravel(a) for a in arrays] if axis is None else list(arrays)
        atoms = [as_atom(a) for a in arrays]
        first = atom_shape(atoms[0])
        if not first:
            raise TracingError("concatenate: zero-dimensional arrays cannot be concatenated")
        axis_ = A.normalize_axes(0 if axis is None else axis, len(first), "concatenate")[0]
        return _wrap(A.record_concatenate(_builder(), atoms, axis_))
    return Tracer(_np.concatenate([as_atoms(a) for a in arrays], axis=axis))


@_numpy_when_concrete(_np.stack)
def stack(arrays, axis=0):
    """Join arrays along a new axis."""
    arrays = list(arrays)
    if _any_whole(*arrays):
        shapes = {shape(a) for a in arrays}
        if len(shapes) != 1:
            raise TracingError(f"stack: all arrays must have the same shape, got {sorted(shapes)} "
                               f"(in function {traced_function_name()!r})")
        return concatenate([expand_dims(a, axis) for a in arrays], axis=axis)
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


# ---------------------------------------------------------------------------
# Whole arrays: one node per operation
#
# A traced value is either one atom -- a scalar, or a whole array (an array
# argument, or any operation on one) -- or an array built element by element
# (snp.zeros filled by item assignment, snp.stack of scalars). Operations on
# whole arrays record one array primitive (symad.array_primitives) whatever the
# size; element-level arrays keep their per-element code below, as a trace of
# scalars does. An element-level array meeting a whole one is packed into one node.
# ---------------------------------------------------------------------------


def _is_whole(value) -> bool:
    """True for a whole traced array (or a Parameter array inside a trace)."""
    if isinstance(value, Parameter):
        return value.ndim > 0 and current_builder() is not None
    return type(value) is Tracer and value.is_whole


def _any_whole(*values) -> bool:
    for value in values:
        if isinstance(value, (list, tuple)):
            if _any_whole(*value):
                return True
        elif _is_whole(value):
            return True
    return False


def _builder():
    return current_builder()


def _wrap(atom) -> Tracer:
    return Tracer.of_atom(atom)


def _resolve_shape(size: int, new_shape, what: str = "reshape") -> tuple:
    """``new_shape`` (an int or tuple, one entry may be -1) for an array of ``size`` elements."""
    new_shape = (new_shape,) if isinstance(new_shape, (int, _np.integer)) else tuple(new_shape)
    new_shape = tuple(int(n) for n in new_shape)
    unknown = [i for i, n in enumerate(new_shape) if n == -1]
    if len(unknown) > 1 or builtins.any(n < -1 for n in new_shape):
        raise TracingError(f"{what}: invalid shape {new_shape} (in function {traced_function_name()!r})")
    if unknown:
        known = math.prod(n for n in new_shape if n != -1)
        if known == 0 or size % known:
            raise TracingError(f"{what}: cannot reshape an array of {size} elements into {new_shape} "
                               f"(in function {traced_function_name()!r})")
        new_shape = tuple(size // known if n == -1 else n for n in new_shape)
    if math.prod(new_shape) != size:
        raise TracingError(f"{what}: cannot reshape an array of {size} elements into shape {new_shape} "
                           f"(in function {traced_function_name()!r})")
    return new_shape


def _whole_reshape(x, new_shape, order="C") -> Tracer:
    atom = as_atom(x)
    size = math.prod(atom_shape(atom))
    target = _resolve_shape(size, new_shape)
    if order == "F":  # column-major: reverse the axes on both sides of a row-major reshape
        reversed_atom = A.record_transpose(_builder(), atom, tuple(reversed(range(len(atom_shape(atom))))))
        flat = A.record_reshape(_builder(), reversed_atom, tuple(reversed(target)))
        return _wrap(A.record_transpose(_builder(), flat, tuple(reversed(range(len(target))))))
    if order not in ("C", "A", "K"):
        raise TracingError(f"reshape: order={order!r} is not traced (use 'C' or 'F')")
    return _wrap(A.record_reshape(_builder(), atom, target))


def _whole_transpose(x, axes=None) -> Tracer:
    atom = as_atom(x)
    ndim = len(atom_shape(atom))
    if axes is None:
        perm = tuple(reversed(range(ndim)))
    else:
        perm = tuple(int(a) % ndim if -ndim <= a < ndim else a for a in axes)
        if sorted(perm) != list(range(ndim)):
            raise TracingError(f"transpose: axes {axes} are not a permutation of {ndim} axes "
                               f"(in function {traced_function_name()!r})")
    return _wrap(A.record_transpose(_builder(), atom, perm))


def _reduce_whole(x, axis, keepdims, primitive, what: str, empty_value=None) -> Tracer:
    atom = as_atom(x)
    x_shape = atom_shape(atom)
    axes = A.normalize_axes(axis, len(x_shape), what)
    builder = _builder()
    if builtins.any(x_shape[a] == 0 for a in axes):
        if empty_value is None:
            raise TracingError(f"{what} of an empty traced array over axis {axis} (in function "
                               f"{traced_function_name()!r}): the result has no value; NumPy raises too")
        kept = tuple(size for i, size in enumerate(x_shape) if i - len(x_shape) not in axes)
        empty = sympy.nan if empty_value is sympy.nan else sympy.Integer(empty_value)
        reduced = builder.broadcast(empty, kept) if kept else empty
    else:
        reduced = A.record_reduction(builder, primitive, atom, axes)
    if keepdims:
        kept_shape = tuple(1 if i - len(x_shape) in axes else size for i, size in enumerate(x_shape))
        reduced = A.record_reshape(builder, reduced, kept_shape)
    return _wrap(reduced)


def _prod_whole(x, axis, keepdims) -> Tracer:
    """The product over axes by halving: pairs of halves multiplied elementwise, log2(n) times.

    Exact at zeros and differentiable to every order with the rules of
    multiply (a partial ``out / x`` would be 0/0 at a zero factor).
    """
    x = asarray(x)
    axes = A.normalize_axes(axis, ndim(x), "prod")
    moved = moveaxis(x, axes, tuple(range(-len(axes), 0)))
    kept = shape(moved)[: ndim(moved) - len(axes)]
    flat = reshape(moved, kept + (-1,))
    while shape(flat)[-1] > 1:
        half = shape(flat)[-1] // 2
        paired = multiply(flat[..., :half], flat[..., half:2 * half])
        flat = concatenate([paired, flat[..., 2 * half:]], axis=-1) if shape(flat)[-1] % 2 else paired
    result = flat[..., 0] if shape(flat)[-1] == 1 else full(kept, 1.0)
    if keepdims:
        result = reshape(result, tuple(1 if i - len(shape(x)) in axes else n for i, n in enumerate(shape(x))))
    return result


def _letters(count: int, taken: str = "") -> str:
    import string

    return "".join([c for c in string.ascii_letters if c not in taken][:count])


def _einsum_pair(sa: str, a, sb: str, b, keep: str):
    """``einsum(sa,sb->out)`` of two atoms, ``out`` the letters of ``keep`` they hold, in order."""
    builder = _builder()
    a, sa = _prepare_operand(a, sa, sb + keep)
    b, sb = _prepare_operand(b, sb, sa + keep)
    out = "".join(c for c in keep if c in sa or c in sb)
    if not sa and not sb:
        return multiply(_wrap(a), _wrap(b)), out
    if not sa or not sb:  # a scalar operand: a product, with the other's axes reordered
        other, letters = (b, sb) if not sa else (a, sa)
        product = multiply(_wrap(a), _wrap(b))
        perm = tuple(letters.index(c) for c in out)
        return _wrap(A.record_transpose(builder, as_atom(product), perm)), out
    return _wrap(A.record_einsum(builder, f"{sa},{sb}->{out}", a, b)), out


def _prepare_operand(atom, letters: str, elsewhere: str):
    """``atom`` with repeated letters reduced to their diagonal and letters used nowhere else summed."""
    builder = _builder()
    while len(set(letters)) != len(letters):
        repeated = next(c for c in letters if letters.count(c) > 1)
        first = letters.index(repeated)
        second = letters.index(repeated, first + 1)
        atom = as_atom(diagonal(_wrap(atom), 0, first, second))
        letters = letters[:first] + letters[first + 1:second] + letters[second + 1:] + repeated
    summed = tuple(i - len(letters) for i, c in enumerate(letters) if c not in elsewhere)
    if summed:
        atom = A.record_reduction(builder, A.reduce_sum_p, atom, summed)
        letters = "".join(c for c in letters if c in elsewhere)
    return atom, letters


def _parse_einsum(subscripts: str, shapes: list) -> tuple[list[str], str]:
    """Explicit per-operand letters (ellipses spelled out) and the output letters."""
    text = subscripts.replace(" ", "")
    if "->" in text:
        inputs, output = text.split("->")
        explicit = True
    else:
        inputs, output, explicit = text, None, False
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise TracingError(f"einsum {subscripts!r}: {len(terms)} operand subscripts for "
                           f"{len(shapes)} operands (in function {traced_function_name()!r})")
    used = "".join(c for c in inputs + (output or "") if c.isalpha())
    ellipsis_ndim = 0
    for term, operand_shape in zip(terms, shapes):
        if "..." in term:
            ellipsis_ndim = builtins.max(ellipsis_ndim, len(operand_shape) - len(term.replace("...", "")))
    ellipsis_letters = _letters(ellipsis_ndim, used)
    spelled = []
    for term, operand_shape in zip(terms, shapes):
        if not builtins.all(c.isalpha() or c == "." for c in term) or term.count(".") not in (0, 3):
            raise TracingError(f"einsum {subscripts!r}: the subscripts must be letters, commas, "
                               f"'...' and '->' (in function {traced_function_name()!r})")
        if "..." in term:
            count = len(operand_shape) - len(term.replace("...", ""))
            term = term.replace("...", ellipsis_letters[ellipsis_ndim - count:] if count else "")
        if len(term) != len(operand_shape):
            raise TracingError(f"einsum {subscripts!r}: subscripts {term!r} for an operand of shape "
                               f"{operand_shape} (in function {traced_function_name()!r})")
        spelled.append(term)
    if explicit:
        output = output.replace("...", ellipsis_letters)
        if not builtins.all(c.isalpha() for c in output) or len(set(output)) != len(output):
            raise TracingError(f"einsum {subscripts!r}: invalid output subscripts {output!r}")
        missing = [c for c in output if not builtins.any(c in t for t in spelled)]
        if missing:
            raise TracingError(f"einsum {subscripts!r}: output index {missing[0]!r} appears in no operand")
    else:
        joined = "".join(spelled)
        output = ellipsis_letters + "".join(sorted(c for c in set(joined) if joined.count(c) == 1
                                                   and c not in ellipsis_letters))
    sizes: dict = {}
    for term, operand_shape in zip(spelled, shapes):
        for c, n in zip(term, operand_shape):
            if sizes.setdefault(c, n) != n:
                raise TracingError(f"einsum {subscripts!r}: index {c!r} has sizes {sizes[c]} and {n} "
                                   f"in operands of shapes {shapes} (in function {traced_function_name()!r})")
    return spelled, output


def _einsum_whole(subscripts: str, *operands) -> Tracer:
    atoms = [as_atom(o) for o in operands]
    letters, output = _parse_einsum(subscripts, [atom_shape(a) for a in atoms])
    if len(atoms) == 1:
        atom, term = _prepare_operand(atoms[0], letters[0], output)
        return _wrap(A.record_transpose(_builder(), atom, tuple(term.index(c) for c in output)))
    value, term = _wrap(atoms[0]), letters[0]
    for index in range(1, len(atoms)):
        later = "".join(letters[index + 1:]) + output
        value, term = _einsum_pair(term, as_atom(value), letters[index], atoms[index], later)
    perm = tuple(term.index(c) for c in output)
    return _wrap(A.record_transpose(_builder(), as_atom(value), perm))


def _matmul_whole(a, b) -> Tracer:
    left, right = as_atom(a), as_atom(b)
    ls, rs = atom_shape(left), atom_shape(right)
    if not ls or not rs:
        raise TracingError(
            f"matmul: an operand is a scalar; use * for scalars (in function {traced_function_name()!r})")
    if ls[-1] != rs[-2 if len(rs) > 1 else -1]:
        raise TracingError(f"matmul: shapes {ls} and {rs} do not align ({ls[-1]} != "
                           f"{rs[-2 if len(rs) > 1 else -1]}) (in function {traced_function_name()!r})")
    try:
        batch = _np.broadcast_shapes(ls[:-2], rs[:-2])
    except ValueError:
        raise TracingError(f"matmul: the batch dimensions of shapes {ls} and {rs} do not broadcast "
                           f"(in function {traced_function_name()!r})") from None
    builder = _builder()
    batch_letters = _letters(len(batch), "ijk")
    terms = []
    for atom, operand_shape, core in ((left, ls, "ij"), (right, rs, "jk")):
        if len(operand_shape) == 1:
            terms.append((atom, "j"))
            continue
        own = operand_shape[:-2]
        if own and tuple(own) != tuple(batch[len(batch) - len(own):]):
            atom = A.record_broadcast(builder, atom, batch[len(batch) - len(own):] + operand_shape[-2:])
        letters = batch_letters[len(batch) - len(own):] + core
        terms.append((atom, letters))
    (a_atom, sa), (b_atom, sb) = terms
    out = (batch_letters if (len(ls) > 2 or len(rs) > 2) else "")
    out = "".join(c for c in out if c in sa or c in sb)
    out += ("i" if "i" in sa else "") + ("k" if "k" in sb else "")
    return _wrap(A.record_einsum(builder, f"{sa},{sb}->{out}", a_atom, b_atom))


def _index_items(index) -> tuple:
    return index if isinstance(index, tuple) else (index,)


def _is_basic(index: tuple) -> bool:
    return builtins.all(item is None or item is Ellipsis or isinstance(item, slice)
                        or (isinstance(item, (int, _np.integer)) and not isinstance(item, bool))
                        for item in index)


def _flat_positions(x_shape: tuple, index) -> _np.ndarray:
    """For each element ``x[index]`` selects, its flat position in ``x`` (NumPy's own indexing)."""
    positions = _np.arange(math.prod(x_shape), dtype=_np.intp).reshape(x_shape)
    try:
        return _np.asarray(positions[index])
    except (IndexError, ValueError, TypeError) as error:
        raise TracingError(f"function {traced_function_name()!r} indexes a traced array of shape "
                           f"{x_shape} with {index!r}: {error}") from None


def _getitem(x, index) -> Tracer:
    """``x[index]`` of a whole traced array: a slice node for basic indices, a gather (``take``)
    of the selected flat positions for integer-array and boolean indices."""
    atom = as_atom(x)
    x_shape = atom_shape(atom)
    items = _index_items(index)
    builder = _builder()
    if _is_basic(items):
        normalized = _normalized_index(items, x_shape, index, "indexes")
        return _wrap(A.record_slice(builder, atom, normalized))
    positions = _flat_positions(x_shape, index)
    flat = A.record_reshape(builder, atom, (math.prod(x_shape),))
    if positions.ndim == 0:
        return _wrap(A.record_slice(builder, flat, (("i", int(positions)),)))
    return _wrap(A.record_take(builder, flat, positions, -1))


def _normalized_index(items, x_shape: tuple, index, action: str) -> tuple:
    """``A.basic_index`` of ``items``, its IndexError or TypeError a TracingError naming the
    function, what it does (``action``: "indexes", "assigns into"...) and the index."""
    try:
        return A.basic_index(items, x_shape)
    except (IndexError, TypeError) as error:
        raise TracingError(f"function {traced_function_name()!r} {action} a traced array of "
                           f"shape {x_shape} at {index!r}: {error}") from None


def _set_items(x, index, value) -> Tracer:
    """``x`` with ``x[index] = value`` (x unchanged): one scatter node for a basic index."""
    atom = as_atom(x)
    x_shape = atom_shape(atom)
    builder = _builder()
    items = _index_items(index)
    if _is_basic(items):
        normalized = _normalized_index(items, x_shape, index, "assigns into")
        part = A._dummy(x_shape)[A.index_objects(normalized)].shape
        v = as_atom(value)
        try:
            _np.broadcast_shapes(atom_shape(v), part)
            if len(atom_shape(v)) > len(part):
                raise ValueError
        except ValueError:
            raise TracingError(
                f"function {traced_function_name()!r} assigns a value of shape {atom_shape(v)} to "
                f"the elements {index!r} of a traced array of shape {x_shape}, which have shape "
                f"{part}; the shapes must broadcast") from None
        params = (("in_shape", x_shape), ("index", normalized))
        return _wrap(builder.record(A.scatter_p, (atom, v), params))
    positions = _flat_positions(x_shape, index)
    flat_positions = positions.reshape(-1)
    values = ravel(broadcast_to(value, positions.shape))
    # Repeated positions keep their last value, as NumPy's assignment does.
    reversed_unique, first_from_end = _np.unique(flat_positions[::-1], return_index=True)
    last = len(flat_positions) - 1 - first_from_end
    size = math.prod(x_shape)
    mask = _np.ones(size)
    mask[reversed_unique] = 0.0
    kept = multiply(reshape(x, (size,)), mask)
    placed = A.record_take_add(builder, as_atom(_getitem(values, last)), (size,),
                               A.ConstantArray(reversed_unique, _np.intp), -1)
    return reshape(add(kept, _wrap(placed)), x_shape)


def _add_at(x, index, value) -> Tracer:
    """``x`` with ``value`` added at ``index``; repeated indices add up (``np.add.at``)."""
    x_shape = shape(x)
    items = _index_items(index)
    builder = _builder()
    if _is_basic(items):
        normalized = _normalized_index(items, x_shape, index, "adds into")
        part = A._dummy(x_shape)[A.index_objects(normalized)].shape
        v = as_atom(broadcast_to(value, part))
        return add(x, _wrap(A.record_unslice(builder, v, x_shape, normalized)))
    positions = _flat_positions(x_shape, index)
    values = as_atom(ravel(broadcast_to(value, positions.shape)))
    size = math.prod(x_shape)
    placed = A.record_take_add(builder, values, (size,),
                               A.ConstantArray(positions.reshape(-1), _np.intp), -1)
    return add(x, reshape(_wrap(placed), x_shape))


# -- new arrays: the way to fill an array element by element ------------------
#
# Inside a trace these give a traced array of constants, which accepts traced
# values by item assignment (``out[i] = v``, copy-on-write, see
# Tracer.__setitem__); outside a trace they are NumPy's. ``np.zeros(n, like=x)``
# and ``np.zeros_like(x)`` on a traced ``x`` come here through
# ``__array_function__``.


def _filled(shape_, value, dtype, numpy_function):
    if dtype is not None and _np.dtype(dtype).kind not in "biuf":
        raise TracingError(
            f"function {traced_function_name()!r} creates an array of dtype {_np.dtype(dtype)}; "
            "symad traces real numbers only"
        )
    if current_builder() is None and not contains_traced(value):
        return numpy_function()
    shape_ = (shape_,) if isinstance(shape_, int) or _np.ndim(shape_) == 0 else tuple(shape_)
    if _any_whole(value):
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
    return _filled(shape, fill_value, dtype, lambda: _np.full(shape, _concrete(fill_value), dtype=dtype))


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
        return _np.full_like(_np.asarray(_concrete(x)), _concrete(value), dtype=dtype, shape=new_shape)
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
    return _np.copy(_concrete(x))


def shape(x):
    """The shape of ``x``."""
    return tuple(x.shape) if isinstance(x, (Tracer, Parameter)) else _np.shape(x)


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
            raise TracingError(
                f"axis {a} is out of bounds for a traced array of dimension {ndim} "
                f"(in function {traced_function_name()!r})"
            )
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


def _variadic_row(primitive, empty_value=None, what: str = ""):
    """Combine a row with one variadic node (a single element is itself)."""

    def combine(builder, row):
        if not row:
            if empty_value is None:
                raise TracingError(f"{what} of an empty traced array (in function {traced_function_name()!r})")
            return empty_value
        return builder.record(primitive, row) if len(row) > 1 else row[0]

    return combine


def _prod_row(builder, row):
    # A chain of binary products: an n-ary product's partials (the product of
    # the others) would cost n**2 nodes.
    result = sympy.Integer(1)
    for atom in row:
        result = builder.record(P.mul_p, (result, atom))
    return result


_sum_row = _variadic_row(P.add_p, empty_value=sympy.Integer(0))


@_numpy_when_concrete(_np.sum)
def sum(x, axis=None, dtype=None, keepdims=False):  # noqa: A001
    """Sum of elements over ``axis`` (all by default)."""
    _float_dtype_only({"dtype": dtype}, "sum")
    if _any_whole(x):
        return _reduce_whole(x, axis, keepdims, A.reduce_sum_p, "sum", empty_value=0)
    return _reduce(x, axis, keepdims, _sum_row)


@_numpy_when_concrete(_np.mean)
def mean(x, axis=None, dtype=None, keepdims=False):
    """Mean of elements over ``axis`` (all by default)."""
    _float_dtype_only({"dtype": dtype}, "mean")
    x_shape = shape(x)
    count = math.prod(x_shape[a] for a in _normalize_axes(axis, len(x_shape)))
    if count == 0:  # NumPy's mean of nothing is nan
        if _any_whole(x):
            return _reduce_whole(x, axis, keepdims, A.reduce_sum_p, "mean", empty_value=sympy.nan)
        return _reduce(x, axis, keepdims, lambda builder, row: sympy.nan)
    return multiply(sum(x, axis=axis, keepdims=keepdims), sympy.Rational(1, count))


@_numpy_when_concrete(_np.var)
def var(x, axis=None, dtype=None, keepdims=False, *, ddof=0):
    """Variance over ``axis``: the squared deviations from the mean over ``N - ddof``."""
    _float_dtype_only({"dtype": dtype}, "var")
    deviation = subtract(x, mean(x, axis=axis, keepdims=True))
    if ddof == 0:
        return mean(multiply(deviation, deviation), axis=axis, keepdims=keepdims)
    x_shape = shape(x)
    count = math.prod(x_shape[a] for a in _normalize_axes(axis, len(x_shape)))
    squares = sum(multiply(deviation, deviation), axis=axis, keepdims=keepdims)
    # N - ddof <= 0 gives inf or nan, as NumPy's does (with a warning there).
    return multiply(squares, sympy.Rational(1, count - ddof) if count > ddof else sympy.nan)


@_numpy_when_concrete(_np.std)
def std(x, axis=None, dtype=None, keepdims=False, *, ddof=0):
    """Standard deviation over ``axis`` (``ddof`` as in NumPy)."""
    return sqrt(var(x, axis=axis, dtype=dtype, keepdims=keepdims, ddof=ddof))


@_numpy_when_concrete(_np.prod)
def prod(x, axis=None, dtype=None, keepdims=False):
    """Product of elements over ``axis`` (all by default)."""
    _float_dtype_only({"dtype": dtype}, "prod")
    if _any_whole(x):
        return _prod_whole(x, axis, keepdims)
    return _reduce(x, axis, keepdims, _prod_row)


@_numpy_when_concrete(_np.max)
def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis``; at ties the derivative is shared equally (as in JAX)."""
    if _any_whole(x):
        return _reduce_whole(x, axis, keepdims, A.amax_p, "max")
    return _reduce(x, axis, keepdims, _variadic_row(P.reduce_max_p, what="max"))


@_numpy_when_concrete(_np.min)
def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis``; at ties the derivative is shared equally (as in JAX)."""
    if _any_whole(x):
        return _reduce_whole(x, axis, keepdims, A.amin_p, "min")
    return _reduce(x, axis, keepdims, _variadic_row(P.reduce_min_p, what="min"))


amax, amin = max, min


def _scipy_logsumexp(x, axis=None, keepdims=False):
    import scipy.special

    return scipy.special.logsumexp(x, axis=axis, keepdims=keepdims)


@_numpy_when_concrete(_scipy_logsumexp)
def logsumexp(x, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis``, evaluated stably; its formula reads as written."""
    if _any_whole(x):
        return _reduce_whole(x, axis, keepdims, A.reduce_logsumexp_p, "logsumexp")
    return _reduce(x, axis, keepdims, _variadic_row(P.logsumexp_p, what="logsumexp"))


@_numpy_when_concrete(_np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
    """The 2-norm of a vector or the Frobenius norm of a matrix (``sqrt(sum(x**2))``)."""
    x_ndim = ndim(x)
    matrix_norm = (axis is None and x_ndim == 2) or (isinstance(axis, tuple) and len(axis) == 2)
    if not (ord is None or ord == "fro" and matrix_norm or ord == 2 and not matrix_norm):
        raise TracingError(
            f"function {traced_function_name()!r} calls norm(ord={ord!r}), which symad does not "
            "trace; it traces the 2-norm of vectors and the Frobenius norm of matrices "
            "(ord=None). Write other norms out: np.sum(np.abs(x)) for ord=1, "
            "np.max(np.abs(x)) for ord=inf"
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


@_numpy_when_concrete(_np.matmul)
def matmul(a, b):
    """Matrix product with NumPy's rules (1-D promotion, broadcast batch dimensions)."""
    if _any_whole(a, b):
        return _matmul_whole(a, b)
    left, right = as_atoms(a), as_atoms(b)
    if left.ndim == 0 or right.ndim == 0:
        raise TracingError(
            f"matmul: an operand is a scalar; use * for scalars (in function {traced_function_name()!r})"
        )
    squeeze_rows, squeeze_cols = left.ndim == 1, right.ndim == 1
    if squeeze_rows:
        left = left[None, :]
    if squeeze_cols:
        right = right[:, None]
    try:
        if left.shape[-1] != right.shape[-2]:
            raise ValueError(f"{left.shape[-1]} != {right.shape[-2]}")
        batch = _np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    except ValueError as error:
        raise TracingError(
            f"matmul: shapes {shape(a)} and {shape(b)} do not align ({error}) "
            f"(in function {traced_function_name()!r})"
        ) from None
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


@_numpy_when_concrete(_np.dot)
def dot(a, b):
    """NumPy's ``dot`` for scalars, vectors and matrices."""
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    if ndim(a) > 2 or ndim(b) > 2:
        raise TracingError("dot of arrays with more than 2 dimensions is not traced; use matmul")
    return matmul(a, b)


def vdot(a, b):
    """The dot product of two arrays flattened to vectors."""
    return dot(ravel(a), ravel(b))


def inner(a, b):
    """Inner product over the last axes: shape ``a.shape[:-1] + b.shape[:-1]``, as NumPy."""
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    a_shape, b_shape = shape(a), shape(b)
    rows = reshape(a, (-1, a_shape[-1]))
    columns = transpose(reshape(b, (-1, b_shape[-1])))
    return reshape(matmul(rows, columns), a_shape[:-1] + b_shape[:-1])


@_numpy_when_concrete(_np.outer)
def outer(a, b):
    """Outer product of two arrays flattened to vectors."""
    if _any_whole(a, b):
        return _einsum_whole("i,j->ij", ravel(a), ravel(b))
    left, right = as_atoms(a).reshape(-1), as_atoms(b).reshape(-1)
    builder = current_builder()
    out = _np.empty((left.size, right.size), dtype=object)
    for i, x in enumerate(left):
        for j, y in enumerate(right):
            out[i, j] = builder.record(P.mul_p, (x, y))
    return Tracer(out)


@_numpy_when_concrete(_np.trace)
def trace(x, offset=0, axis1=0, axis2=1):
    """Sum along a diagonal."""
    if _any_whole(x):
        return sum(diagonal(x, offset, axis1, axis2), axis=-1)
    return sum(Tracer(_np.diagonal(as_atoms(x), offset, axis1, axis2)), axis=-1)


@_numpy_when_concrete(_np.diagonal)
def diagonal(x, offset=0, axis1=0, axis2=1):
    """A diagonal of ``x``."""
    if _any_whole(x):
        x_shape = shape(x)
        positions = _np.diagonal(_np.arange(math.prod(x_shape)).reshape(x_shape), offset, axis1, axis2)
        flat = as_atom(reshape(x, (-1,)))
        return _wrap(A.record_take(_builder(), flat, positions, -1))
    return Tracer(_np.array(_np.diagonal(as_atoms(x), offset, axis1, axis2)))


@_numpy_when_concrete(_np.cumsum)
def cumsum(x, axis=None):
    """Cumulative sum along ``axis`` (flattened when None)."""
    if axis is None:
        x, axis = ravel(x), 0
    if _any_whole(x):
        axis_ = A.normalize_axes(axis, ndim(x), "cumsum")[0]
        return _wrap(A.record_cumsum(_builder(), as_atom(x), axis_))
    moved = moveaxis(x, axis, -1)
    running = [moved[..., 0]]
    for k in range(1, shape(moved)[-1]):
        running.append(add(running[-1], moved[..., k]))
    return moveaxis(stack(running, axis=-1), -1, axis)


# ---------------------------------------------------------------------------
# More array operations: contractions, padding, shifts, differences
# ---------------------------------------------------------------------------


def einsum(subscripts, *operands, optimize=False):
    """Einstein summation (``np.einsum``): one contraction node per pair of operands.

    Subscripts may use ``...``, omit the output (NumPy's implicit form) or
    repeat an index within an operand (a diagonal). Several operands are
    contracted pairwise, left to right.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda w: snp.einsum("ij,j->", w, np.ones(2)))(np.ones((2, 2))).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    if not isinstance(subscripts, str):
        raise TracingError("einsum: give the subscripts as a string (the interleaved operand/"
                           "subscript-list form is not traced)")
    if not _traced_inputs(*operands):
        return _np.einsum(subscripts, *[_concrete(o) for o in operands], optimize=optimize)
    if not _any_whole(*operands):  # element-level arrays: contract their elements
        return _einsum_whole(subscripts, *[_wrap(as_atom(o)) for o in operands])
    return _einsum_whole(subscripts, *operands)


@_numpy_when_concrete(_np.tensordot)
def tensordot(a, b, axes=2):
    """``np.tensordot``: sum products over the last ``axes`` of ``a`` and the first of ``b``
    (or the two lists of axes given).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> float(sd.grad(lambda x: snp.tensordot(x, x))(np.ones((2, 2)))[0, 0])
    2.0
    """
    a_ndim, b_ndim = ndim(a), ndim(b)
    if isinstance(axes, (int, _np.integer)):
        a_axes = list(range(a_ndim - int(axes), a_ndim))
        b_axes = list(range(int(axes)))
    else:
        a_axes, b_axes = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                          [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    if len(a_axes) != len(b_axes):
        raise TracingError(f"tensordot: axes {axes!r} pair {len(a_axes)} axes with {len(b_axes)}")
    a_letters = _letters(a_ndim)
    b_letters = list(_letters(b_ndim, a_letters))
    for a_axis, b_axis in zip(a_axes, b_axes):
        b_letters[b_axis % b_ndim] = a_letters[a_axis % a_ndim]
    b_letters = "".join(b_letters)
    output = "".join(c for c in a_letters if c not in b_letters) + "".join(
        c for c in b_letters if c not in a_letters)
    return einsum(f"{a_letters},{b_letters}->{output}", a, b)


def _pad_widths(pad_width, x_ndim: int) -> list[tuple[int, int]]:
    widths = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.intp), (x_ndim, 2))
    if (widths < 0).any():
        raise TracingError(f"pad: negative pad width {pad_width!r}")
    return [tuple(int(w) for w in row) for row in widths]


@_numpy_when_concrete(_np.pad)
def pad(x, pad_width, mode="constant", constant_values=0):
    """``np.pad`` with ``mode`` ``"constant"``, ``"edge"``, ``"reflect"``, ``"symmetric"`` or ``"wrap"``.

    A constant pad places ``x`` inside zeros (its transpose is the slice that
    takes it out again) plus the constant; the other modes gather elements of
    ``x`` by index, one axis at a time.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.pad(x, 1) * 2, np.zeros(2))(np.array([1.0, 2.0])).tolist()
    [0.0, 2.0, 4.0, 0.0]
    """
    x = asarray(x)
    x_shape = shape(x)
    widths = _pad_widths(pad_width, len(x_shape))
    if mode == "constant":
        if not _np.isscalar(constant_values) and _np.ndim(constant_values) != 0:
            raise TracingError("pad: give constant_values as one number (per-axis values are not traced)")
        out_shape = tuple(before + n + after for n, (before, after) in zip(x_shape, widths))
        index = tuple(("s", before, before + n, 1) for n, (before, _) in zip(x_shape, widths))
        placed = _wrap(A.record_unslice(_builder(), as_atom(x), out_shape, index))
        if constant_values == 0:
            return placed
        border = _np.full(out_shape, float(constant_values))
        border[tuple(slice(before, before + n) for n, (before, _) in zip(x_shape, widths))] = 0.0
        return add(placed, border)
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise TracingError(f"pad: mode={mode!r} is not traced; use 'constant', 'edge', 'reflect', "
                           "'symmetric' or 'wrap'")
    for axis, (before, after) in enumerate(widths):
        if before == after == 0:
            continue
        n = x_shape[axis]
        indices = _np.pad(_np.arange(n), (before, after), mode=mode)
        x = _wrap(A.record_take(_builder(), as_atom(x), indices, axis - len(x_shape)))
    return x


@_numpy_when_concrete(_np.roll)
def roll(x, shift, axis=None):
    """``np.roll``: elements shifted along ``axis`` (the flattened array if None), wrapping around.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.roll(x, 1), np.zeros(3))(np.array([1.0, 2.0, 3.0])).tolist()
    [3.0, 1.0, 2.0]
    """
    x = asarray(x)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), shape(x))
    shifts = (shift,) if _np.ndim(shift) == 0 else tuple(shift)
    axes = (axis,) if _np.ndim(axis) == 0 else tuple(axis)
    for s_, a in _np.broadcast(shifts, axes):
        a = A.normalize_axes(int(a), ndim(x), "roll")[0]
        n = shape(x)[a]
        if n:
            indices = (_np.arange(n) - int(s_)) % n
            x = _wrap(A.record_take(_builder(), as_atom(x), indices, a))
    return x


@_numpy_when_concrete(_np.diff)
def diff(x, n=1, axis=-1):
    """``np.diff``: the ``n``-th differences along ``axis``, by slicing.

    >>> import symad as sd, numpy as np
    >>> sd.trace(lambda x: np.diff(x), np.zeros(3))(np.array([1.0, 4.0, 9.0])).tolist()
    [3.0, 5.0]
    """
    x = asarray(x)
    a = A.normalize_axes(axis, ndim(x), "diff")[0]
    for _ in range(n):
        upper = [slice(None)] * ndim(x)
        lower = [slice(None)] * ndim(x)
        upper[a], lower[a] = slice(1, None), slice(None, -1)
        x = subtract(x[tuple(upper)], x[tuple(lower)])
    return x


@_numpy_when_concrete(_np.flip)
def flip(x, axis=None):
    """``np.flip``: the order of elements reversed along ``axis`` (every axis if None).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda x: np.sum(snp.flip(x) * np.arange(3.0)))(np.zeros(3)).tolist()
    [2.0, 1.0, 0.0]
    """
    x = asarray(x)
    axes = A.normalize_axes(axis, ndim(x), "flip")
    index = [slice(None)] * ndim(x)
    for a in axes:
        index[a] = slice(None, None, -1)
    return x[tuple(index)]


def fliplr(x):
    """``np.fliplr``: columns reversed.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(snp.fliplr, np.zeros((1, 2)))(np.array([[1.0, 2.0]])).tolist()
    [[2.0, 1.0]]
    """
    return flip(x, 1)


def flipud(x):
    """``np.flipud``: rows reversed.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(snp.flipud, np.zeros((2, 1)))(np.array([[1.0], [2.0]])).tolist()
    [[2.0], [1.0]]
    """
    return flip(x, 0)


@_numpy_when_concrete(_np.take)
def take(x, indices, axis=None):
    """``np.take``: elements at integer ``indices`` along ``axis`` (of the flattened array if None).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.grad(lambda x: np.sum(snp.take(x, [2, 0, 2])))(np.zeros(3)).tolist()
    [1.0, 0.0, 2.0]
    """
    x = asarray(x)
    if axis is None:
        return ravel(x)[_np.asarray(indices)]
    a = A.normalize_axes(axis, ndim(x), "take")[0]
    index = [slice(None)] * ndim(x)
    index[a] = _np.asarray(indices)
    if _np.ndim(indices) == 0:
        index[a] = int(indices)
    return x[tuple(index)]


@_numpy_when_concrete(_np.tile)
def tile(x, reps):
    """``np.tile``: ``x`` repeated ``reps`` times along each axis.

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.tile(x, 2), np.zeros(2))(np.array([1.0, 2.0])).tolist()
    [1.0, 2.0, 1.0, 2.0]
    """
    x = asarray(x)
    reps = (reps,) if _np.ndim(reps) == 0 else tuple(reps)
    x_shape = (1,) * (len(reps) - ndim(x)) + shape(x)
    reps = (1,) * (len(x_shape) - len(reps)) + reps
    x = reshape(x, x_shape)
    interleaved = reshape(x, tuple(v for n in x_shape for v in (1, n)))
    tiled = broadcast_to(interleaved, tuple(v for r, n in zip(reps, x_shape) for v in (r, n)))
    return reshape(tiled, tuple(r * n for r, n in zip(reps, x_shape)))


@_numpy_when_concrete(_np.repeat)
def repeat(x, repeats, axis=None):
    """``np.repeat``: each element repeated ``repeats`` times along ``axis`` (flattened if None).

    >>> import symad as sd, symad.numpy as snp, numpy as np
    >>> sd.trace(lambda x: snp.repeat(x, 2), np.zeros(2))(np.array([1.0, 2.0])).tolist()
    [1.0, 1.0, 2.0, 2.0]
    """
    x = asarray(x)
    if axis is None:
        x, axis = ravel(x), 0
    a = A.normalize_axes(axis, ndim(x), "repeat")[0] % ndim(x)
    indices = _np.repeat(_np.arange(shape(x)[a]), repeats)
    return take(x, indices, axis=a)


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
    "hypot": hypot, "logaddexp": logaddexp, "less": less, "less_equal": less_equal,
    "greater": greater, "greater_equal": greater_equal, "equal": equal,
    "not_equal": not_equal, "matmul": matmul, "logical_and": logical_and,
    "logical_or": logical_or, "logical_not": logical_not, "bitwise_and": logical_and,
    "bitwise_or": logical_or, "invert": logical_not,
}

_REDUCTIONS = {"add": sum, "multiply": prod, "maximum": max, "minimum": min}


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
    for ufuncs, _, ufunc_name in _FOREIGN:
        if ufunc in ufuncs:
            return ufunc_name(ufunc), ufuncs[ufunc]
    module = getattr(ufunc, "__module__", None) or type(ufunc).__module__
    names = [ufunc_name(ufunc) for _, _, ufunc_name in _FOREIGN]
    return (names[0] if names else f"{module}.{name}"), None


#: Tables of other libraries' functions made traceable by modules built on this
#: one -- symad.special for scipy.special -- as ``(ufuncs, array_functions,
#: ufunc_name)``. They register here (this module cannot import them back
#: without an import circle); the tables are kept by reference.
_FOREIGN: list = []


def register_foreign_functions(ufuncs: dict, array_functions: dict, ufunc_name) -> None:
    """Route ``ufuncs`` ({ufunc: traceable}) and ``array_functions`` ({function: traceable}).

    ``ufunc_name(ufunc)`` names a ufunc in error messages (``scipy.special.gamma``).
    """
    _FOREIGN.append((ufuncs, array_functions, ufunc_name))


#: How to write common NumPy functions symad does not trace with ones it does.
_REWRITES = {
    "ediff1d": "x[1:] - x[:-1]",
    "average": "np.sum(w * x) / np.sum(w)",
    "gradient": "central differences by slicing: (x[2:] - x[:-2]) / (2 * h), one-sided at the ends",
    "solve": "Linear algebra beyond @ has no traced form: for a small fixed system write it out, "
             "else wrap the solve with @sd.primitive and give its partials",
    "append": "snp.concatenate([x, values])",
    "insert": "snp.concatenate of slices and values",
    "split": "slices x[a:b]",
    "array_split": "slices x[a:b]",
    "column_stack": "snp.stack([a, b], axis=1)",
    "polyval": "Horner's rule in a loop: y = y * x + c",
    "trapezoid": "np.sum((y[1:] + y[:-1]) / 2 * np.diff(t)) with a constant t",
    "trapz": "np.sum((y[1:] + y[:-1]) / 2 * np.diff(t)) with a constant t",
    "ptp": "np.max(x) - np.min(x)",
    "count_nonzero": "np.sum(x != 0)",
    "heaviside": "snp.where(x > 0, 1.0, 0.0)",
    "deg2rad": "x * (np.pi / 180)",
    "radians": "x * (np.pi / 180)",
    "rad2deg": "x * (180 / np.pi)",
    "degrees": "x * (180 / np.pi)",
    "triu": "x * np.triu(np.ones(shape)) (a constant mask)",
    "tril": "x * np.tril(np.ones(shape)) (a constant mask)",
    "kron": "np.outer(a, b) and a reshape",
    "cross": "its three components, written out with * and -",
    "fmax": "np.maximum (NaN aside)",
    "fmin": "np.minimum (NaN aside)",
    "nansum": "np.sum (on data without NaN)",
    "nanmean": "np.mean (on data without NaN)",
    "nanmax": "np.max (on data without NaN)",
    "nanmin": "np.min (on data without NaN)",
    "cumprod": "snp.stack([np.prod(x[:k + 1]) for k in range(n)])",
    "interp": "snp.where over the intervals of constant knots",
    "float_power": "x ** y",
    "true_divide": "x / y",
    "sort": "np.minimum/np.maximum for two values (sorting more has no traced form)",
    "median": "np.minimum/np.maximum for two values (sorting more has no traced form)",
    "round": "Rounding is piecewise constant (no useful derivative): round outside the traced function",
    "around": "Rounding is piecewise constant (no useful derivative): round outside the traced function",
    "rint": "Rounding is piecewise constant (no useful derivative): round outside the traced function",
    "floor": "Floor is piecewise constant (no useful derivative): apply it outside the traced function",
    "ceil": "Ceil is piecewise constant (no useful derivative): apply it outside the traced function",
    "trunc": "Trunc is piecewise constant (no useful derivative): apply it outside the traced function",
    "all": "a condition for snp.where, e.g. np.min(x) > 0",
    "any": "a condition for snp.where, e.g. np.max(x) > 0",
    "isclose": "a condition for snp.where: np.abs(a - b) <= tol",
    # numpy.linalg (and scipy.linalg): near names (np.invert for inv) would mislead.
    "inv": "The matrix inverse is not traced: for a small fixed size write it out "
           "(2x2: [[d, -b], [-c, a]] / (a*d - b*c)), or solve with explicit formulas, or wrap a "
           "numeric inverse with @sd.primitive and give its partials",
    "pinv": "The pseudo-inverse is not traced: write the formula out for a small fixed size "
            "(e.g. (A.T @ A) written out and inverted by hand), or wrap it with @sd.primitive",
    "det": "The determinant is not traced: for a small fixed size write it out "
           "(2x2: a*d - b*c; 3x3: the rule of Sarrus)",
    "slogdet": "The determinant is not traced: for a small fixed size write it out "
               "(2x2: a*d - b*c) and take np.log(np.abs(...))",
    "multi_dot": "a @ b @ c",
    "matrix_power": "repeated @: x @ x @ x",
}
for _decomposition in ("eig", "eigh", "eigvals", "eigvalsh", "svd", "svdvals", "cholesky", "qr",
                       "lstsq", "matrix_rank", "cond", "tensorinv", "tensorsolve", "lu", "expm"):
    _REWRITES[_decomposition] = (
        "Matrix decompositions and solvers are not traced: for a small fixed size write the "
        "formula out, or wrap a numeric implementation with @sd.primitive and give its partials")
_REWRITES.update({
    "allclose": "a condition for snp.where: np.max(np.abs(a - b)) <= tol",
})


def _untraceable(what: str) -> TracingError:
    # ``what`` names the call ("numpy.sort", "the ufunc numpy.fmax"); a bare name
    # (not "... with keywords ...") also gets the nearest names symad does trace.
    name = what.rsplit(" ", 1)[-1].split(".")[-1] if " with " not in what else None
    # No near names for linear algebra: nothing symad traces is near a decomposition.
    nearest = _nearest_supported(name) if name and "linalg." not in what else []
    hint = f" The nearest operations symad traces: {', '.join(nearest)}." if nearest else ""
    if name in _REWRITES:  # a rewrite in traced operations says more than a near name
        rewrite = _REWRITES[name]
        hint = f" {rewrite}." if rewrite[0].isupper() else f" Write it as {rewrite}."
    elif "linalg." in what:
        hint = (" Linear algebra beyond @ is not traced: for a small fixed size write the "
                "formula out.")
    return TracingError(
        f"function {traced_function_name()!r} calls {what}, which symad cannot trace.{hint} Use "
        "the operations of symad.numpy, or wrap a numeric implementation with @sd.primitive "
        "and give it partial derivatives with .defpartials."
    )


def _nearest_supported(name: str) -> list[str]:
    """Supported names close to ``name`` (difflib): ``np.name`` where NumPy has it, else ``snp.name``.

    >>> _nearest_supported("arctan3"), _nearest_supported("sigmoidd")
    (['np.arctan', 'np.arctanh', 'np.arctan2'], ['snp.sigmoid'])
    """
    import difflib

    supported = set(_UFUNCS) | {function.__name__ for function in _FUNCTIONS} | set(__all__)
    supported = {n for n in supported if not n.startswith("_") and callable(globals().get(n, len))}
    return [f"np.{n}" if hasattr(_np, n) else f"snp.{n}"
            for n in difflib.get_close_matches(name, sorted(supported), n=3)]


def _float_dtype_only(kwargs: dict, what: str) -> dict:
    """``kwargs`` without a float ``dtype=`` (traced values are real numbers already)."""
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    if dtype is not None and _np.dtype(dtype).kind != "f":
        raise _untraceable(f"{what} with dtype={dtype}")
    return kwargs


def dispatch_ufunc(ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """Route a NumPy ufunc call on traced values to the matching traceable function.

    Keywords that would change the result (``out``, ``where``, ``initial``,
    a non-float ``dtype``) are refused rather than ignored.
    """
    name = getattr(ufunc, "__name__", repr(ufunc))
    qualified_name, traceable = _ufunc_route(ufunc)
    suffix = "" if method == "__call__" else f".{method}"
    what = f"the ufunc {qualified_name}{suffix}"
    kwargs = _float_dtype_only(kwargs, what)
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


def _function_table() -> dict:
    table = {
        _np.sum: sum, _np.mean: mean, _np.var: var, _np.std: std, _np.prod: prod, _np.max: max, _np.min: min,
        _np.amax: max, _np.amin: min, _np.dot: dot, _np.vdot: vdot, _np.inner: inner,
        _np.outer: outer, _np.transpose: transpose, _np.reshape: reshape, _np.ravel: ravel,
        _np.concatenate: concatenate, _np.stack: stack, _np.hstack: hstack,
        _np.vstack: vstack, _np.broadcast_to: broadcast_to, _np.expand_dims: expand_dims,
        _np.squeeze: squeeze, _np.swapaxes: swapaxes, _np.moveaxis: moveaxis,
        _np.where: where, _np.clip: clip, _np.linalg.norm: norm, _np.shape: shape,
        _np.ndim: ndim, _np.size: size, _np.zeros_like: zeros_like,
        _np.ones_like: ones_like, _np.full_like: full_like, _np.empty_like: empty_like,
        _np.copy: copy, _np.zeros: zeros, _np.ones: ones, _np.full: full, _np.empty: empty,
        _np.trace: trace, _np.diagonal: diagonal,
        _np.cumsum: cumsum, _np.atleast_1d: atleast_1d, _np.atleast_2d: atleast_2d,
        _np.einsum: einsum, _np.tensordot: tensordot, _np.pad: pad, _np.roll: roll,
        _np.diff: diff, _np.flip: flip, _np.fliplr: fliplr, _np.flipud: flipud, _np.take: take,
        _np.tile: tile, _np.repeat: repeat,
    }
    if hasattr(_np, "matmul") and not isinstance(_np.matmul, _np.ufunc):
        table[_np.matmul] = matmul
    return table


_FUNCTIONS = _function_table()
_CONSTRUCTORS = {zeros, ones, full, empty, zeros_like, ones_like, full_like, empty_like}


def dispatch_function(func, args: tuple, kwargs: dict) -> Any:
    """Route a NumPy array function called on traced values to its traceable version."""
    implementation = _FUNCTIONS.get(func)
    for _, array_functions, _ in _FOREIGN if implementation is None else ():
        implementation = array_functions.get(func)  # numpy.sinc lives in symad.special
        if implementation is not None:
            break
    module = getattr(func, "__module__", "numpy") or "numpy"
    if implementation is None:
        raise _untraceable(f"{module}.{func.__name__}")
    if implementation not in _CONSTRUCTORS:  # an integer array of zeros is fine; a sum is not
        kwargs = _float_dtype_only(kwargs, f"{module}.{func.__name__}")
    if "out" in kwargs and kwargs["out"] is None:  # NumPy's default, spelled out
        del kwargs["out"]
    _check_arguments(implementation, args, kwargs, f"{module}.{func.__name__}")
    return implementation(*args, **kwargs)


def _check_arguments(implementation, args: tuple, kwargs: dict, what: str) -> None:
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


__all__ = [name for name in dir() if not name.startswith("_") and name not in {
    "annotations", "builtins", "math", "sympy", "Any", "P", "TracingError", "current_builder",
    "Parameter", "Tracer", "as_atoms", "contains_traced", "is_traced", "apply", "functools",
    "inspect", "traced_function_name",
}]


_tracer_module.bind_numpy_namespace(_sys.modules[__name__])
