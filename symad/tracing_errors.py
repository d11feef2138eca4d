"""Explanations of errors met while tracing or calling a Function.

A user's function fails inside a trace in ways whose first message rarely
says what to change: array arithmetic on an argument passed as a list (a
pytree, as in JAX), a SciPy routine that converts a traced value to an
array, a structure of arguments unlike the traced one. :func:`symad.trace`
and :meth:`Function.__call__ <symad.function.Function>` turn those into
TracingErrors that name the function, the argument and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from symad.errors import SymadError, TracingError
from symad.pytree import TreeDef

__all__ = ["explain_container_argument", "library_equivalent", "explain_library_error",
           "describe_structure", "structure_mismatch_message", "array_conversion_message",
           "traced_index_message"]


#: A container of more items than this is described by its first few and a count.
_DESCRIBED_ITEMS = 4


def describe_structure(treedef: TreeDef) -> str:
    """The structure of arguments, ``*`` for each array: ``(*, [*, *])``; long containers
    are shortened (a nested list of 10^4 numbers is not written out).

    >>> from symad.pytree import tree_flatten
    >>> describe_structure(tree_flatten(([1.0] * 1000, 2.0))[1])
    '([*, *, *, *, ... (1000 items)], *)'
    """
    if treedef.kind == "leaf":
        return "*"
    if treedef.kind == "none":
        return "None"
    children = treedef.children
    parts = [describe_structure(child) for child in children[:_DESCRIBED_ITEMS]]
    if len(children) > _DESCRIBED_ITEMS:
        parts.append(f"... ({len(children)} items)")
    inner = ", ".join(parts)
    if treedef.kind == "tuple":
        return f"({inner}{',' if len(treedef.children) == 1 else ''})"
    if treedef.kind == "namedtuple":
        return f"{treedef.keys[0].__name__}({inner})"
    if treedef.kind == "list":
        return f"[{inner}]"
    items = [f"{k!r}: {describe_structure(c)}" for k, c in zip(treedef.keys[:_DESCRIBED_ITEMS], children)]
    if len(children) > _DESCRIBED_ITEMS:
        items.append(f"... ({len(children)} items)")
    return "{" + ", ".join(items) + "}"


# What Python says when an operation meets a list or tuple it cannot take: "unsupported
# operand type(s) for ** or pow(): 'list' and 'int'", "'tuple' object has no attribute
# 'shape'", "can only concatenate list (not "float") to list", "can't multiply sequence by
# non-int of type 'float'"; and what symad says when NumPy turns such a list of traced
# values into an array (np.sum(u), np.asarray(u)).
_CONTAINER_WORDS = re.compile(r"\b(list|tuple|sequence)\b")
_TO_ARRAY = "converts a traced value to a NumPy array"


def _containers(treedef: TreeDef, code: str) -> list[tuple[str, str, int]]:
    """(Python expression, "list" or "tuple", number of items) of every list and tuple in an
    argument: ``u``, ``params['w']``, ``xs[0]``."""
    found = []
    if treedef.kind in ("list", "tuple"):
        found.append((code, treedef.kind, len(treedef.children)))
    for index, child in enumerate(treedef.children):
        key = treedef.keys[index] if treedef.kind == "dict" else index
        found.extend(_containers(child, f"{code}[{key!r}]"))
    return found


def explain_container_argument(error: Exception, function_name: str, names: Sequence[str],
                                in_treedef: TreeDef) -> TracingError | None:
    """A TracingError for array arithmetic on an argument passed as a list or tuple.

    Lists, tuples and dicts are pytrees, as in JAX: ``sd.grad(f)([0.1, 0.2])`` traces
    ``u`` as a Python list of two traced scalars, and its gradient is a list. ``u ** 2``
    on that list is then Python's TypeError (JAX raises the same); this names the
    function and the argument, and says how to pass an array instead.
    """
    if isinstance(error, TracingError):
        if _TO_ARRAY not in str(error):
            return None
    elif not isinstance(error, (TypeError, AttributeError)) or isinstance(error, SymadError):
        return None
    match = _CONTAINER_WORDS.search(str(error))
    if match is None and not isinstance(error, TracingError):
        return None
    kinds = {"list", "tuple"} if match is None or match.group(1) == "sequence" else {match.group(1)}
    found = [(name, *container) for name, child in zip(names, in_treedef.children)
             for container in _containers(child, name) if container[1] in kinds]
    if not found:
        return None
    root, code, kind, count = found[0]
    nested = code != root
    where = f"{code} (in argument {root!r})" if nested else f"argument {root!r}"
    # The caller's own variable is unknown: the argument's name stands for it.
    fix = (f"an array as {code} (np.asarray of the {kind})" if nested
           else f"np.asarray({code}) in place of the {kind}")
    others = "".join(f"; {c} too ({k} of {n})" for _, c, k, n in found[1:])
    items = f"{count} item{'s' if count != 1 else ''}{others}"
    explanation = (
        f"symad treats lists and tuples as pytrees, as JAX does: each item is an input of its "
        f"own, so inside the function {code} is a Python {kind} of traced values, and its "
        f"derivative is a {kind} too. To differentiate with respect to an array, pass {fix} "
        f"at the call; to keep the {kind}, make an array of its items inside the function "
        f"with snp.asarray({code}) (import symad.numpy as snp)")
    if isinstance(error, TracingError):
        # NumPy met a traced value where it needed a number: maybe an item of the list it
        # was given, maybe another value; the original reason stays first.
        return TracingError(
            f"{str(error).rstrip('.')}. Note that {where} was passed as a {kind} of {items}: "
            f"if that is what NumPy was given (np.sum({code}), np.asarray({code})), {explanation}")
    return TracingError(
        f"function {function_name!r}: {where} was passed as a {kind} of {items}, and an "
        f"array operation on it failed ({type(error).__name__}: {error}). {explanation}")


# Library functions that take a traced value apart (np.asarray), with the symad.numpy
# operations that compute the same: (module prefix, function name) -> what to write.
_LIBRARY_EQUIVALENTS = {
    ("scipy.special", "logsumexp"): ("scipy.special.logsumexp",
                                     "snp.logsumexp(x, axis=..., keepdims=...)"),
    ("scipy.special", "softmax"): ("scipy.special.softmax",
                                   "np.exp(x - snp.logsumexp(x, axis=..., keepdims=True))"),
    ("scipy.special", "log_softmax"): ("scipy.special.log_softmax",
                                       "x - snp.logsumexp(x, axis=..., keepdims=True)"),
    # scipy.linalg: its traced forms (the same arguments) and NumPy's names for the rest.
    ("scipy.linalg", "solve_triangular"): ("scipy.linalg.solve_triangular",
                                           "snp.linalg.solve_triangular(a, b, trans=..., lower=...)"),
    ("scipy.linalg", "cho_factor"): ("scipy.linalg.cho_factor", "snp.linalg.cho_factor(a, lower=...)"),
    ("scipy.linalg", "cho_solve"): ("scipy.linalg.cho_solve", "snp.linalg.cho_solve((c, lower), b)"),
    ("scipy.linalg", "solve"): ("scipy.linalg.solve", "np.linalg.solve(a, b)"),
    ("scipy.linalg", "inv"): ("scipy.linalg.inv", "np.linalg.inv(a)"),
    ("scipy.linalg", "det"): ("scipy.linalg.det", "np.linalg.det(a)"),
    ("scipy.linalg", "cholesky"): ("scipy.linalg.cholesky",
                                   "np.linalg.cholesky(a, upper=not lower) (SciPy's default is upper)"),
    ("scipy.linalg", "eigh"): ("scipy.linalg.eigh", "np.linalg.eigh(a)"),
    ("scipy.linalg", "svd"): ("scipy.linalg.svd", "np.linalg.svd(a, full_matrices=...)"),
    ("scipy.linalg", "svdvals"): ("scipy.linalg.svdvals", "np.linalg.svd(a, compute_uv=False)"),
    ("scipy.linalg", "expm"): ("scipy.linalg.expm", "snp.linalg.expm(A)"),
}


def _called(frame) -> tuple[str, str]:
    """``(module, function)`` a traceback frame runs: SciPy's batching wrapper (which converts
    the arrays before calling ``scipy.linalg``'s function) stands for the function it wraps."""
    wrapped = frame.f_locals.get("f") if frame.f_code.co_name == "wrapper" else None
    if callable(wrapped) and hasattr(wrapped, "__module__") and hasattr(wrapped, "__name__"):
        return wrapped.__module__ or "", wrapped.__name__
    return frame.f_globals.get("__name__", ""), frame.f_code.co_name


def library_equivalent(error: BaseException, function_name: str) -> TracingError | None:
    """A TracingError pointing to symad's own form of a library function the error passed through.

    ``scipy.special.logsumexp(x)`` on a traced ``x`` fails at its ``np.asarray``
    with the generic "converts a traced value to a NumPy array"; the frames of the
    traceback (of the error or of a TracingError in its chain) tell which library
    function it was.
    """
    seen, current = set(), error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback = current.__traceback__
        while traceback is not None:
            module, name = _called(traceback.tb_frame)
            for (prefix, function), (qualified, equivalent) in _LIBRARY_EQUIVALENTS.items():
                if name == function and module.startswith(prefix):
                    return TracingError(
                        f"function {function_name!r} calls {qualified} on a traced value, which "
                        f"it converts to a NumPy array, so symad cannot trace it. Use "
                        f"{equivalent} (import symad.numpy as snp): it traces, and is as stable")
            traceback = traceback.tb_next
        current = current.__cause__ or current.__context__
    return None


def explain_library_error(error: Exception, function_name: str) -> TracingError | None:
    """A TracingError for a library that met a traced value and raised its own error.

    ``scipy.optimize.minimize(lambda t: (t - x) ** 2, 0.0)`` inside a traced
    function calls ``np.asarray`` on a traced value; the TracingError that
    raises is replaced by SciPy with a ValueError of its own. Only builtin
    exception types whose chain holds a TracingError are explained: an
    exception class of the user's own passes through unchanged.
    """
    if type(error).__module__ != "builtins":
        return None
    seen, inner = set(), error.__cause__ or error.__context__
    while inner is not None and id(inner) not in seen and not isinstance(inner, TracingError):
        seen.add(id(inner))
        inner = inner.__cause__ or inner.__context__
    if inner is None or id(inner) in seen:
        return None
    return TracingError(
        f"function {function_name!r} passes a traced value to code that needs numbers, which "
        f"raised {type(error).__name__}: {str(error).rstrip('.')}. The cause: "
        f"{str(inner).rstrip('.')}. Call such routines "
        "(SciPy solvers, integrators, ...) outside the traced function, on numbers; inside it "
        "write the computation with symad.numpy operations, or wrap it with @sd.primitive "
        "and give it partial derivatives"
    )


def explain_numpy_store(error: ValueError, function_name: str) -> TracingError | None:
    """The TracingError behind NumPy's "setting an array element with a sequence", if any.

    ``out = np.zeros(3); out[0] = traced`` makes NumPy call ``float()`` on the
    traced value; NumPy replaces the TracingError that raises with that
    ValueError. This names the real cause and the fix instead.
    """
    if not isinstance(error.__cause__, TracingError) or "array element" not in str(error):
        return None
    return TracingError(
        f"function {function_name!r} stores a traced value into a plain NumPy array (such as "
        "out[i] = value with out = np.zeros(n), or np.array([...], dtype=float)). A NumPy "
        "float array cannot hold a symbolic value. Create the array with snp.zeros(shape), "
        "snp.zeros_like(x) or np.zeros(shape, like=x): inside a trace these give a traced "
        "array that accepts out[i] = value; or build the result with snp.stack([...])"
    )


def array_conversion_message(function_name: str, dtype=None) -> str:
    """Why a traced value cannot become a NumPy array (of ``dtype``, if NumPy asked for one),
    and what to write instead.

    >>> "snp.stack" in array_conversion_message("f")
    True
    >>> "snp.int64(x)" in array_conversion_message("f", np.int64)    # np.int64(x)
    True
    """
    if dtype is not None and np.dtype(dtype).kind == "i":
        return _integer_conversion_message(function_name, np.dtype(dtype).name)
    return (
        f"function {function_name!r} converts a traced value to a NumPy array "
        "(np.asarray or np.array on it, or storing it into a NumPy array: out[i] = value "
        "with out = np.zeros(n), or a NumPy function given traced values in a Python sequence, "
        "np.mean([x, y]), which NumPy makes an array before symad sees the call). A NumPy "
        "float array cannot hold a symbolic value: build arrays with snp.asarray, snp.stack "
        "or snp.concatenate (np.mean(snp.stack([x, y])), or snp.mean([x, y])), and create "
        "arrays to fill with snp.zeros(shape), snp.zeros_like(x) or np.zeros(shape, like=x). "
        "np.arange with a traced endpoint is one such call: its length would depend on "
        "traced values, which no traced array can (as in JAX); write start + step * "
        "np.arange(n) with n a number, or np.linspace(start, stop, n), which traces"
    )


def _integer_conversion_message(function_name: str, dtype: str) -> str:
    """Why ``np.int64(x)`` of a traced ``x`` fails, and the spellings that trace."""
    return (
        f"function {function_name!r} casts a traced value to {dtype} with NumPy "
        f"(np.{dtype}(x) or np.asarray(x, dtype={dtype})), which makes a NumPy array of it "
        f"before symad sees the call; write snp.{dtype}(x) (symad.numpy's {dtype}, as "
        f"jax.numpy's) or x.astype(np.{dtype}), which trace: rounding towards zero, with a "
        "zero derivative"
    )


def traced_index_message(function_name: str) -> str:
    """Why a traced value cannot index, and what to write instead.

    >>> "one-hot" in traced_index_message("f")
    True
    """
    return (
        f"function {function_name!r} indexes with a traced value; indices must "
        "be concrete integers, slices or integer arrays. The arguments of a traced "
        "function are symbolic, integer ones too (class labels y in x[np.arange(n), y]), "
        "and so is an sd.Parameter: close over the labels instead (sd.grad(lambda x: "
        "loss(x, y)) with y a NumPy array), or pass them one-hot encoded (Y = "
        "np.eye(k)[y], made outside) and write np.sum(x * Y, axis=1); to select by a "
        "traced value use snp.where; indices computed from traced values (np.argsort's) "
        "gather with x[indices] alone or np.take_along_axis(x, indices, axis)"
    )


def structure_mismatch_message(name: str, called: TreeDef, traced: TreeDef) -> str:
    """Why a Function refuses arguments structured unlike the traced ones.

    >>> from symad.pytree import tree_flatten
    >>> structure_mismatch_message("f", tree_flatten((1.0,))[1], tree_flatten((1.0, 2.0))[1])[:47]
    'f: called with arguments structured as (*,), bu'
    """
    return (f"{name}: called with arguments structured as {describe_structure(called)}, but it "
            f"was traced with {describe_structure(traced)} (* is one array; pass a nested "
            "list as one array: np.asarray(...))")
