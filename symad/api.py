"""The transformations: grad, value_and_grad, jvp, vjp, jacfwd, jacrev, hessian, derivative, vmap.

Each transform is a Graph -> Graph builder of :mod:`symad.derivatives`
(:func:`~symad.derivatives.grad_function`,
:func:`~symad.derivatives.jacobian_function`, ...) wrapped here in a
:class:`Transformed` callable that checks the arguments, traces the user's
function once per argument signature, applies the builder, caches the result
and evaluates it. Called on traced
values (inside another trace), a transformed function inlines its graph
instead, so transforms nest freely: ``grad(grad(f))`` is reverse mode
applied to the graph that reverse mode produced.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from symad.derivatives import (
    check_float_weights,
    check_order_count,
    derivative_function,
    grad_function,
    hessian_function,
    jacobian_function,
    jvp_function,
    resolve_argnums,
    sparse_hessian_function,
    sparse_jacobian_function,
    taylor_function,
    vjp_function,
)
from symad.errors import DifferentiationError, RetraceWarning, TracingError
from symad.function import Function, argument_names, function_name, trace
from symad.graph import ArrayInput, current_builder, number_atom
from symad.leaves import leaf_atoms, leaf_shape
from symad.outside import changed, snapshot
from symad.pytree import leaf_paths, tree_flatten, tree_unflatten
from symad.series_calls import (
    MAX_TAYLOR_ORDER,
    check_graph_order,
    derivative_evaluator,
    taylor_evaluator,
)
from symad.tracer import (
    Parameter,
    Tracer,
    is_complex_value,
    is_traced,
)
from symad.transforms.batching import inline_batched

__all__ = [
    "grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "jacobian", "hessian",
    "derivative", "taylor", "vmap", "Transformed",
]


# ---------------------------------------------------------------------------
# Argument validation
# ---------------------------------------------------------------------------


def _normalize_argnums(argnums, grad_position, weights, transform: str, fun) -> tuple | int | None:
    """Validate ``argnums`` (alias ``grad_position``) at transform-creation time."""
    if grad_position is not None:
        if argnums not in (0, None) and argnums != grad_position:
            raise DifferentiationError(f"{transform}: pass argnums or grad_position, not both")
        argnums = grad_position
    name = function_name(fun)
    if argnums is None:
        if weights is None:
            raise DifferentiationError(
                f"{transform}({name}): argnums=None differentiates with respect to nothing; "
                "pass weights=[...] or an argument position"
            )
        return None
    entries = argnums if isinstance(argnums, (tuple, list)) else (argnums,)
    for entry in entries:
        if isinstance(entry, bool) or not isinstance(entry, numbers.Integral):
            raise DifferentiationError(
                f"{transform}({name}): argnums entry {entry!r} is not an integer; "
                "use an int or a tuple of ints"
            )
    seen = set()
    for entry in entries:
        if entry in seen:
            raise DifferentiationError(f"{transform}({name}): argnums entry {entry} appears twice")
        seen.add(entry)
    if isinstance(argnums, (tuple, list)):
        return tuple(int(e) for e in argnums)
    return int(argnums)


def _check_weights(weights, transform: str, name: str) -> tuple[Parameter, ...]:
    if weights is None:
        return ()
    weights = tuple(weights)
    for weight in weights:
        if not isinstance(weight, Parameter):
            raise DifferentiationError(
                f"{transform}({name}): weights must be sd.Parameter objects, got "
                f"{type(weight).__name__}; wrap the array as sd.Parameter(value, name=...)"
            )
    check_float_weights(weights, transform, name)
    return weights


def _check_differentiable(args: tuple, positions: Sequence[int], transform: str, fun) -> None:
    """Integer inputs in a differentiated position are an error, as in JAX (and complex
    ones for Taylor mode, whose series are real)."""
    for position in positions:
        leaves, treedef = tree_flatten(args[position])
        if transform in ("derivative", "taylor") and any(
                np.iscomplexobj(leaf) for leaf in leaves if not isinstance(leaf, (Tracer, Parameter))):
            raise DifferentiationError(
                f"{transform}({function_name(fun)}): argument {position} is complex; Taylor mode "
                "(sd.derivative, sd.taylor) expands in real arguments. For the complex derivative "
                "of a holomorphic function nest sd.grad(f, holomorphic=True)")
        if all(getattr(leaf, "dtype", None) is not None and leaf.dtype.kind in "fc"
               for leaf in leaves if not isinstance(leaf, (Tracer, Parameter))):
            continue  # every call of a working program: no names needed
        names = argument_names(fun, len(args))
        root = f"argument {names[position]!r} (position {position})"
        for path, leaf in zip(leaf_paths(treedef, root), leaves):
            if isinstance(leaf, (Tracer, Parameter)):
                continue
            dtype = np.asarray(leaf).dtype
            if dtype.kind not in "fc":
                raise DifferentiationError(
                    f"{transform}({function_name(fun)}): {path} has dtype {dtype}; derivatives "
                    "are taken with respect to float inputs only (pass 2.0 rather than 2, or "
                    "cast with .astype(float))"
                )


def _argument_checker(argnums, transform: str, fun, differentiates: bool = True) -> Callable:
    """A call-time check: ``argnums`` in range, and float inputs where derivatives are taken."""

    def check_args(args: tuple) -> None:
        if argnums is None:
            return
        positions = resolve_argnums(argnums, len(args), transform, function_name(fun))
        if differentiates:
            _check_differentiable(args, positions, transform, fun)

    return check_args


def _signature(args: tuple) -> tuple:
    """The cache key of a call: the structure and shapes of the arguments.

    The dtype is not part of it: a graph is the same for float32 and float64,
    and the evaluator follows the arguments' dtype.
    """
    leaves, treedef = tree_flatten(args)
    shapes = tuple(tuple(np.shape(leaf)) if not isinstance(leaf, (Tracer, Parameter))
                   else tuple(leaf.shape) for leaf in leaves)
    return treedef, shapes


# ---------------------------------------------------------------------------
# The transformed callable
# ---------------------------------------------------------------------------


class Transformed:
    """A transform applied to a function: call it to evaluate, ``.trace(*args)`` for the formula.

    The user's function is traced at the first call for each argument
    signature, the graph transform is applied once, and the result is
    cached; later calls only evaluate. Keyword arguments are bound to their
    positional parameters (so they are traced, and differentiable by position).
    """

    _is_symad_transform = True

    def __init__(
        self,
        fun: Callable,
        transform: Callable[[Function], Function],
        name: str,
        check_args: Callable[[tuple], None] | None = None,
        trace_at: Callable[[tuple], tuple] | None = None,
        finalize: Callable[[Function, Any], Any] | None = None,
        evaluate: Callable[[Function, tuple], Any] | None = None,
    ):
        """``trace_at(args)`` gives the example arguments to trace at (default: the arguments);
        ``finalize(function, result)`` turns an evaluation into what the call returns
        (a sparse matrix, say); ``evaluate(primal, args)`` computes a call from the traced
        primal without building the transformed graph (high-order Taylor series, whose
        graph grows with the order), or returns NotImplemented to take the graph."""
        if not callable(fun):
            raise TracingError(f"{name}: expected a callable, got {type(fun).__name__}")
        self.fun = fun
        self._transform = transform
        self.name = name
        self._check_args = check_args
        self._trace_at = trace_at or (lambda args: args)
        self._finalize = finalize
        self._evaluate = evaluate
        self._cache: dict = {}  # signature -> (Function, what the function read from outside)
        self._warned: set = set()  # names already warned about (once each)
        #: ``(fun, argnums)`` when this is a plain first derivative (grad, jacrev,
        #: jacfwd without aux or weights): a Jacobian of it is a Hessian of ``fun``.
        self.first_derivative: tuple | None = None
        functools.update_wrapper(self, fun, assigned=("__doc__",), updated=())
        self.__name__ = name

    def _primal(self, examples: tuple) -> Function:
        if getattr(self.fun, "_is_symad_transform", False):
            return self.fun.trace(*examples)
        return trace(self.fun, *examples)

    @property
    def _traces_fixed_shapes(self) -> bool:
        """True if the result does not depend on argument shapes (a traced Function inside)."""
        fun = self.fun
        return isinstance(fun, Function) or getattr(fun, "_traces_fixed_shapes", False)

    def trace(self, *args, **kwargs) -> Function:
        """The transformed function as a traced :class:`~symad.function.Function`."""
        args = _bind_keywords(self.fun, args, kwargs, self.name)
        return self._cached(self._trace_at(args), self._transform)

    def _cached(self, examples: tuple, transform: Callable[[Function], Function],
                kind: str = "transformed") -> Function:
        """``transform`` of the primal traced at ``examples``, cached per signature and kind."""
        # A traced Function keeps its core shapes, whatever batch the call has:
        # one transform serves every batch shape.
        key = (kind, len(examples) if self._traces_fixed_shapes else _signature(examples))
        cached = self._cache.get(key)
        if cached is not None:
            function, noted = cached
            stale = changed(noted)
            if stale is None and _parameters_unchanged(function):
                return function
            if stale is not None and stale not in self._warned:
                self._warned.add(stale)
                warnings.warn(
                    f"{self.name}: {stale!r}, which the function reads from outside, changed since "
                    "it was traced, so it is traced again (the trace holds the old value as a "
                    "constant). Pass values that change as arguments, or as sd.Parameter, to "
                    "evaluate without tracing again", RetraceWarning, stacklevel=4)
        # What the function reads from outside, as it is now: the trace is valid while it holds.
        noted = snapshot(self.fun)
        result = transform(self._primal(examples))
        if not result.closes_over_trace:  # closures over an outer trace can't be reused
            self._cache[key] = (result, noted)
        return result

    def __call__(self, *args, **kwargs) -> Any:
        args = _bind_keywords(self.fun, args, kwargs, self.name)
        if self._check_args is not None:
            self._check_args(args)
        if self._evaluate is not None:
            primal = self._cached(self._trace_at(args), lambda primal: primal, kind="primal")
            result = self._evaluate(primal, args)
            if result is not NotImplemented:
                return result
        function = self.trace(*args)
        result = function(*args)
        return result if self._finalize is None else self._finalize(function, result)

    def __repr__(self) -> str:
        return f"<symad transform {self.name}>"

    def __copy__(self) -> Transformed:
        return self  # nothing in it is changed by calls but its cache of traces

    def __deepcopy__(self, memo) -> Transformed:
        return self  # as functions are under copy.deepcopy

    def __reduce_ex__(self, protocol):
        # A transform holds the user's Python function (often a lambda or a closure,
        # which pickle cannot save); its traced Function is data and pickles.
        raise TypeError(
            f"{self.name} cannot be pickled: it holds the Python function it transforms. "
            "Pickle its traced Function instead, which is a graph: "
            f"{self.name}.trace(example_args) (call it, differentiate it or compile it after loading)"
        )


def _bind_keywords(fun: Callable, args: tuple, kwargs: dict, name: str) -> tuple:
    """``args`` with ``kwargs`` bound to their positional parameters of ``fun``."""
    if not kwargs:
        return args
    try:
        signature = inspect.signature(fun)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise TracingError(f"{name}: cannot bind the keyword arguments {sorted(kwargs)}: {error}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TracingError(
            f"{name}: keyword-only arguments {sorted(bound.kwargs)} are not supported; "
            "make them positional parameters or close over them"
        )
    return tuple(bound.args)


def _parameters_unchanged(function: Function) -> bool:
    return all(parameter.shape == leaf_shape(symbols) for parameter, symbols in function.parameters)


# ---------------------------------------------------------------------------
# Reverse mode: grad, value_and_grad, vjp, jacrev
# ---------------------------------------------------------------------------


def _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value, holomorphic=False):
    transform = "value_and_grad" if with_value else "grad"
    argnums = _normalize_argnums(argnums, grad_position, weights, transform, fun)
    weights = _check_weights(weights, transform, function_name(fun))

    check_args = _argument_checker(argnums, transform, fun)
    result = Transformed(
        fun,
        lambda primal: grad_function(primal, argnums, has_aux, weights, with_value, holomorphic),
        f"{transform}({function_name(fun)})",
        check_args,
    )
    if not (has_aux or weights or with_value or holomorphic):
        result.first_derivative = (fun, argnums)
    return result


def grad(fun: Callable, argnums=0, has_aux: bool = False, *, weights=None,
         grad_position=None, holomorphic: bool = False) -> Transformed:
    """The gradient of ``fun`` with respect to the arguments ``argnums`` (and ``weights``).

    Args:
        fun: a Python function, a traced Function or another transform.
        argnums: an int (one gradient back), a tuple of ints (a tuple back), or
            None together with ``weights``. ``grad_position`` is an alias.
        has_aux: ``fun`` returns ``(output, *aux)``; only ``output`` is
            differentiated and the call returns ``(gradients, aux)``.
        weights: ``sd.Parameter`` objects ``fun`` closes over; their gradients
            come back as a tuple (after the argument gradients, if any).
        holomorphic: ``fun`` is holomorphic in complex arguments and returns complex
            values: the result is the complex derivative f'(z), as JAX's. Without it a
            complex output is refused, and the gradient of a real output in a complex
            argument follows JAX's convention, df/dx - i df/dy (``grad(abs(z)**2)`` is
            ``2 conj(z)``).

    Returns:
        A callable with the arguments of ``fun``; ``.trace(*args)`` gives the
        gradient as a Function (formula, LaTeX, evaluator).

    >>> import symad as sd
    >>> import numpy as np
    >>> f = lambda x1, x2: np.log(x1) + x1 * x2 - np.sin(x2)
    >>> [float(g) for g in sd.grad(f, argnums=(0, 1))(2.0, 5.0)]
    [5.5, 1.7163378145367738]
    >>> sd.grad(f, argnums=(0, 1)).trace(2.0, 5.0).formula()
    (x2 + 1/x1, x1 - cos(x2))
    """
    return _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value=False,
                         holomorphic=holomorphic)


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, *, weights=None,
                   grad_position=None, holomorphic: bool = False) -> Transformed:
    """Like :func:`grad`, but the call returns ``(value, gradients)``; ``value`` is what ``fun`` returned.

    >>> import symad as sd
    >>> value, gradient = sd.value_and_grad(lambda x: x ** 2)(3.0)
    >>> float(value), float(gradient)
    (9.0, 6.0)
    """
    return _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value=True,
                         holomorphic=holomorphic)


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """Evaluate ``fun`` at ``primals`` and return ``(out, vjp_fn)`` (plus ``aux`` with has_aux).

    ``vjp_fn(cotangent)`` returns a tuple with one entry per primal: the
    cotangent pulled back through ``fun``.

    >>> import symad as sd
    >>> import numpy as np
    >>> out, vjp_fn = sd.vjp(lambda x, y: x * y, 2.0, 3.0)
    >>> float(out), [float(g) for g in vjp_fn(1.0)]
    (6.0, [3.0, 2.0])
    """
    _check_differentiable(primals, range(len(primals)), "vjp", fun)
    primal = trace(fun, *primals) if not isinstance(fun, Function) else fun
    result = primal(*primals)
    out, aux = (result[0], tuple(result[1:])) if has_aux else (result, None)
    out_function = primal
    cached: dict = {}

    def vjp_fn(cotangent):
        function = cached.get("function")
        if function is None:
            function = cached["function"] = vjp_function(out_function, has_aux)
        return _complex_where_primal_is(primals, function(primals, (cotangent,)))

    vjp_fn.__name__ = f"vjp_fn({primal.name})"
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _complex_where_primal_is(primals: tuple, cotangents: tuple) -> tuple:
    """Each cotangent leaf complex where its primal leaf is, as JAX's (a cotangent has its
    primal's dtype: a complex input ``fun`` does not depend on gets a complex zero)."""
    primal_leaves, _ = tree_flatten(tuple(primals))
    if not any(map(is_complex_value, primal_leaves)):
        return cotangents
    leaves, treedef = tree_flatten(tuple(cotangents))
    # Traced cotangents (a vjp inside a trace) are left as they are: only numbers are cast.
    leaves = [np.asarray(ct, dtype=np.complex128)[()] if is_complex_value(primal)
              and not is_traced(ct) and not np.iscomplexobj(ct) else ct
              for primal, ct in zip(primal_leaves, leaves)]
    return tree_unflatten(treedef, leaves)


# ---------------------------------------------------------------------------
# Forward mode: jvp, jacfwd
# ---------------------------------------------------------------------------


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """Evaluate ``fun`` and its directional derivative: ``(out, tangent_out)`` (``+ (aux,)``).

    >>> import symad as sd
    >>> out, tangent = sd.jvp(lambda x: x ** 3, (2.0,), (1.0,))
    >>> float(out), float(tangent)
    (8.0, 12.0)
    """
    name = function_name(fun)
    # As JAX: one primal per argument, in a tuple or list. An array is not taken apart
    # into arguments (its rows would become separate arguments).
    for label, given in (("primals", primals), ("tangents", tangents)):
        if not isinstance(given, (tuple, list)):
            raise TracingError(
                f"sd.jvp({name}): {label} must be a tuple or list with one entry per argument of "
                f"the function, got {type(given).__name__}; for a function of one argument x "
                f"write sd.jvp(f, (x,), (v,))")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise TracingError(f"jvp({name}): {len(primals)} primals but {len(tangents)} tangents")
    for position, (p, t) in enumerate(zip(primals, tangents)):
        p_leaves, p_tree = tree_flatten(p)
        t_leaves, t_tree = tree_flatten(t)
        if p_tree != t_tree or any(np.shape(a) != np.shape(b) for a, b in zip(p_leaves, t_leaves)
                                   if not isinstance(a, Tracer) and not isinstance(b, Tracer)):
            raise TracingError(
                f"jvp({name}): tangent {position} does not have the structure and shapes of primal {position}"
            )
    _check_differentiable(primals, range(len(primals)), "jvp", fun)
    primal = trace(fun, *primals) if not isinstance(fun, Function) else fun
    out, tangent, *aux = jvp_function(primal, has_aux)(primals, tangents)
    # A tangent has its output's dtype, as JAX's: a complex output whose tangent came out
    # real (a real cotangent pulled back to a complex input, then differentiated) is complex.
    (tangent,) = _complex_where_primal_is((out,), (tangent,))
    return (out, tangent, *aux)


# ---------------------------------------------------------------------------
# Jacobians and Hessians
# ---------------------------------------------------------------------------


def _make_jacobian(fun, argnums, has_aux, mode, holomorphic=False):
    transform = "jacrev" if mode == "rev" else "jacfwd"
    argnums = _normalize_argnums(argnums, None, None, transform, fun)

    check_args = _argument_checker(argnums, transform, fun)
    inner = getattr(fun, "first_derivative", None)
    if inner is not None and not has_aux and not holomorphic and inner[1] == argnums:
        # jacfwd(jacrev(f)), jacrev(jacfwd(f)), jacfwd(grad(f)) ... w.r.t. the same
        # arguments are the Hessian of f: built as hessian() builds it, so each
        # symmetric pair is one node, evaluated once, and the result is exactly symmetric.
        inner_fun = inner[0]
        return Transformed(
            inner_fun,
            lambda primal: hessian_function(primal, argnums),
            f"{transform}({function_name(fun)})",
            _argument_checker(argnums, transform, inner_fun),
        )
    result = Transformed(
        fun,
        lambda primal: jacobian_function(primal, argnums, has_aux, mode, holomorphic=holomorphic),
        f"{transform}({function_name(fun)})",
        check_args,
    )
    if not has_aux and not holomorphic:
        result.first_derivative = (fun, argnums)
    return result


def jacrev(fun: Callable, argnums=0, has_aux: bool = False, *, holomorphic: bool = False) -> Transformed:
    """The Jacobian of ``fun`` by reverse mode: shape ``out.shape + in.shape``.

    ``holomorphic=True``: complex inputs and outputs, the complex derivative (as JAX);
    without it, outputs must be real (see :func:`grad`).

    >>> import symad as sd
    >>> import numpy as np
    >>> sd.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    return _make_jacobian(fun, argnums, has_aux, "rev", holomorphic)


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False, *, holomorphic: bool = False) -> Transformed:
    """The Jacobian of ``fun`` by forward mode: shape ``out.shape + in.shape``.

    ``holomorphic=True``: complex inputs and outputs, the complex derivative (as JAX);
    without it, inputs must be real.

    >>> import symad as sd
    >>> import numpy as np
    >>> sd.jacfwd(lambda x: x[::-1] * 3)(np.array([1.0, 2.0])).tolist()
    [[0.0, 3.0], [3.0, 0.0]]
    """
    return _make_jacobian(fun, argnums, has_aux, "fwd", holomorphic)


def jacobian(fun: Callable, argnums=0, has_aux: bool = False, *, sparse: bool = False,
             holomorphic: bool = False) -> Transformed:
    """The Jacobian of ``fun`` (reverse mode, as :func:`jacrev`); ``sparse=True`` gives ``scipy.sparse``.

    With ``sparse=True`` the argument ``argnums`` (an int) must be one array
    or scalar; the call returns a ``scipy.sparse.csr_matrix`` of shape
    ``(out.size, in.size)`` holding exactly the structural non-zeros (from
    the graph's dependencies, :meth:`Function.sparsity`), and only those are
    computed. For an array program the columns are coloured (no two columns
    sharing a row alike) and one forward sweep pushes one seed per colour;
    for a graph of scalars a forward sweep per input visits only the nodes
    that input reaches. ``.trace(x)`` gives the Function of the non-zero
    values, with ``.sparse_layout`` ``(rows, columns, shape)`` and
    ``.sparse_colouring`` (the colouring used; None for a graph of scalars).

    >>> import symad as sd
    >>> import numpy as np
    >>> sd.jacobian(lambda x: x ** 2, sparse=True)(np.array([1.0, 2.0, 3.0])).toarray().tolist()
    [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 6.0]]
    """
    if not sparse:
        return jacrev(fun, argnums, has_aux, holomorphic=holomorphic)
    return _make_sparse(fun, argnums, has_aux, "jacobian", sparse_jacobian_function)


def _make_sparse(fun, argnums, has_aux: bool, transform: str, build: Callable) -> Transformed:
    name = function_name(fun)
    if has_aux:
        raise DifferentiationError(f"{transform}({name}, sparse=True): has_aux is not supported "
                                   "with sparse=True; return the auxiliary values from a second function")
    if isinstance(argnums, bool) or not isinstance(argnums, numbers.Integral):
        raise DifferentiationError(
            f"{transform}({name}, sparse=True): argnums must be one int (the sparse matrix is "
            f"rows = outputs, columns = that argument's elements), got {argnums!r}")
    check_args = _argument_checker(int(argnums), transform, fun)
    return Transformed(fun, lambda primal: build(primal, int(argnums)),
                       f"{transform}({name}, sparse=True)", check_args, finalize=_to_sparse_matrix)


def _to_sparse_matrix(function: Function, values) -> Any:
    import scipy.sparse

    rows, columns, shape = function.sparse_layout
    values = np.asarray(values)
    if values.ndim != 1:
        raise DifferentiationError(
            f"{function.name}: sparse=True evaluates one point at a time (got a batch of shape "
            f"{values.shape[:-1]}); for the non-zero values over a batch call "
            "transform.trace(x)(xs), whose .sparse_layout gives their positions")
    return scipy.sparse.csr_matrix((values, (rows, columns)), shape=shape)


def hessian(fun: Callable, argnums=0, has_aux: bool = False, *, sparse: bool = False,
            holomorphic: bool = False) -> Transformed:
    """The Hessian of ``fun``: ``jacfwd(jacrev(fun))``, shape ``out.shape + in.shape + in.shape``.

    ``holomorphic=True``: the second complex derivative of a holomorphic function (as JAX).

    With ``has_aux`` the call returns ``(hessian, aux)``. With ``sparse=True``
    (a function of one array argument) the call returns a
    ``scipy.sparse.csr_matrix`` of the structural non-zeros, computing only
    those (see :func:`jacobian`); for a scalar array program from a few
    Hessian-vector products chosen by star colouring, exactly symmetric. For
    a function with several or non-scalar outputs, each output element's
    Hessian is a block of rows: the matrix has ``out.size * n`` rows and
    ``n`` columns, and its dense form reshaped to the dense Hessian's shape
    is the dense Hessian.

    >>> import symad as sd
    >>> import numpy as np
    >>> sd.hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 2.0])).tolist()
    [[4.0, 2.0], [2.0, 0.0]]
    >>> sd.hessian(lambda x: np.sum(x ** 3), sparse=True)(np.array([1.0, 2.0])).nnz
    2
    >>> sd.hessian(lambda x: x ** 3, sparse=True)(np.array([1.0, 2.0])).toarray().tolist()
    [[6.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 12.0]]
    """
    if sparse and holomorphic:
        raise DifferentiationError(f"hessian({function_name(fun)}, sparse=True): holomorphic=True "
                                   "is for dense Hessians; drop sparse=True")
    if sparse:
        return _make_sparse(fun, argnums, has_aux, "hessian", sparse_hessian_function)
    argnums = _normalize_argnums(argnums, None, None, "hessian", fun)
    check_args = _argument_checker(argnums, "hessian", fun)
    return Transformed(fun, lambda primal: hessian_function(primal, argnums, has_aux, holomorphic),
                       f"hessian({function_name(fun)})", check_args)


# ---------------------------------------------------------------------------
# n-th derivatives
# ---------------------------------------------------------------------------


def _check_direction(direction, argnum, name: str) -> tuple | None:
    """The direction of a directional series as exact atoms, checked against ``argnum``.

    None when there is none: with a tuple ``argnum`` the series is then multivariate.
    """
    if isinstance(argnum, int):
        if direction is not None:
            raise DifferentiationError(
                f"taylor({name}): direction is for a tuple argnum (a series along several "
                "arguments); with one argument the series runs along it"
            )
        return None
    if direction is None:
        return None
    direction = tuple(direction)
    if len(direction) != len(argnum):
        raise DifferentiationError(
            f"taylor({name}): direction has {len(direction)} entries but argnum has {len(argnum)}"
        )
    atoms = []
    for entry in direction:
        atom = number_atom(entry)
        if (atom is None or isinstance(entry, (bool, np.bool_, complex, np.complexfloating))
                or not math.isfinite(float(entry))):
            raise DifferentiationError(
                f"taylor({name}): direction entries must be finite real numbers, got {entry!r}"
            )
        atoms.append(atom)
    return tuple(atoms)


def _check_dps(dps, argnum, direction, name: str) -> int | None:
    """``taylor``'s ``dps``: None, or a positive number of digits for a one-variable series."""
    if dps is None:
        return None
    if isinstance(dps, bool) or not isinstance(dps, numbers.Integral) or dps < 1:
        raise DifferentiationError(
            f"taylor({name}): dps must be a positive integer (decimal digits), got {dps!r}")
    if isinstance(argnum, (tuple, list)) and len(argnum) > 1 and direction is None:
        raise DifferentiationError(
            f"taylor({name}): dps is for a series in one variable or along a direction; "
            "for several variables give direction=..., or compile the traced series with "
            ".trace(...).compile('mpmath', dps=...)")
    return int(dps)


def _check_order(n, transform: str, name: str) -> int:
    """``n`` as an int, checked (any order: past :data:`MAX_TAYLOR_ORDER` calls compute numbers)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise DifferentiationError(f"{transform}({name}): n must be a non-negative integer, got {n!r}")
    return int(n)


def _check_orders(n, name: str) -> tuple[int, ...]:
    """A tuple of per-argument orders for a mixed partial, each checked, the total bounded."""
    if not n:
        raise DifferentiationError(
            f"derivative({name}): n=() gives no order; pass one non-negative integer per leading "
            "argument, e.g. n=(2, 1) for d^3 f / dx^2 dy")
    orders = []
    for entry in n:
        if isinstance(entry, bool) or not isinstance(entry, numbers.Integral) or entry < 0:
            raise DifferentiationError(
                f"derivative({name}): every entry of n={tuple(n)!r} must be a non-negative "
                f"integer (the order in one argument), got {entry!r}")
        orders.append(int(entry))
    if sum(orders) > MAX_TAYLOR_ORDER:
        raise DifferentiationError(
            f"derivative({name}): total order {sum(orders)} is above {MAX_TAYLOR_ORDER}; n! "
            "overflows float64 past 170, and so do the derivatives of most functions")
    return tuple(orders)



def _check_argnum(argnum, transform: str, name: str) -> int:
    if isinstance(argnum, bool) or not isinstance(argnum, numbers.Integral):
        raise DifferentiationError(f"{transform}({name}): argnum must be an integer, got {argnum!r}")
    return int(argnum)


def _scalar_examples(args: tuple) -> tuple:
    # Traced with scalar symbols; array arguments are then evaluated elementwise.
    return tuple(np.float64(0.0) for _ in args)


def derivative(fun: Callable, n: int | tuple[int, ...] = 1, argnum: int = 0) -> Transformed:
    r"""The ``n``-th derivative of ``fun`` w.r.t. the scalar argument ``argnum``, elementwise.

    ``fun`` is traced with scalar symbols for every argument; array arguments
    are evaluated elementwise with broadcasting. ``n=0`` gives ``fun``. The
    derivative is built by Taylor-mode recurrences: O(n**2) operations per
    primitive (nested ``grad`` grows exponentially), exact to float64
    rounding at any order. Past order 170, where n! leaves float64 though the
    derivative need not, a call computes the series in mpmath and returns the
    derivative where it fits in float64 (refusing, by its value, one that does
    not); ``.trace()`` builds graphs up to order 170.

    A tuple ``n = (a, b, ...)`` gives the mixed partial
    ``d^(a+b+...) f / dx^a dy^b ...`` over the leading positional arguments
    (``argnum`` is then ignored), by multivariate Taylor recurrences: the cost
    is polynomial in the total order (``prod((a_i + 1)(a_i + 2) / 2)`` products
    for each product of two full series), where nesting ``grad`` doubles the
    graph per order.

    >>> import symad as sd
    >>> import numpy as np
    >>> np.allclose(sd.derivative(np.sin, 3)(np.linspace(0, 3, 4)), -np.cos(np.linspace(0, 3, 4)))
    True
    >>> float(sd.derivative(lambda x: 1 / x, 10)(2.0))
    1771.875
    >>> float(sd.derivative(lambda x, y: x**3 * np.exp(2 * y), (2, 1))(1.0, 0.0))  # 6x * 2e^(2y)
    12.0
    >>> print(sd.derivative(lambda x, y: x**3 * np.exp(2 * y), (2, 1)).trace(1.0, 0.0).latex())
    \begin{aligned}
    \frac{\partial^{3} f}{\partial x^{2} \partial y} &= 12 x e^{2 y}
    \end{aligned}
    """
    name = function_name(fun)
    if isinstance(n, (tuple, list)):
        orders = _check_orders(n, name)
        positions = tuple(position for position, order in enumerate(orders) if order)

        def check_args(args: tuple) -> None:
            check_order_count(orders, len(args), name)
            _check_differentiable(args, positions, "derivative", fun)

        return Transformed(fun, lambda primal: derivative_function(primal, orders),
                           f"derivative({name}, {orders})", check_args, _scalar_examples)
    n = _check_order(n, "derivative", name)
    argnum = _check_argnum(argnum, "derivative", name)
    check_args = _argument_checker(argnum, "derivative", fun, differentiates=bool(n))
    what = f"derivative({name}, {n})"

    def graph(primal: Function) -> Function:
        check_graph_order(n, what)
        return derivative_function(primal, n, argnum)

    return Transformed(fun, graph, what, check_args, _scalar_examples,
                       evaluate=derivative_evaluator(n, argnum, name))


def taylor(fun: Callable, n: int, argnum=0, derivatives: bool = False, *,
           direction=None, dps: int | None = None) -> Transformed:
    """Taylor coefficients of orders 0..``n`` of ``fun`` along the scalar argument ``argnum``.

    The call returns a tuple of ``n + 1`` entries, entry ``k`` shaped like
    ``fun``'s output: ``f^(k)(x) / k!``, or ``f^(k)(x)`` with
    ``derivatives=True``. Arguments are traced as scalars and array arguments
    evaluated elementwise, as for :func:`derivative` (``np.stack`` the tuple
    for one array). All orders share one Taylor-mode sweep, like
    ``jax.experimental.jet``.

    With a tuple ``argnum`` the series is multivariate: the call returns a dict
    from every multi-index ``(i, j, ...)`` of total order at most ``n`` (one
    entry per argument in ``argnum``) to the coefficient of ``dx**i dy**j ...``
    in the expansion of ``f`` about the point, the Taylor map of GTPSA and
    TaylorSeries.jl (``derivatives=True``: the partial derivative
    ``d^(i+j+...) f / dx^i dy^j ...`` instead). There are ``C(n + d, d)``
    coefficients in ``d`` variables; a product of two full series costs
    ``C(n + 2d, 2d)`` multiplications, and the recurrences of exp, sin and the
    other functions fewer, as each differentiates along one variable and skips
    the terms without it: for ``d = 4, n = 10``, 1,001 coefficients, 43,758
    multiplications for a product and 24,710 for such a recurrence.

    With a tuple ``argnum`` and ``direction`` (one number per argument), the
    series is instead that of ``t -> f(x + t * direction)``: directional
    derivatives of every order, returned as a tuple.

    Any order: coefficients do not overflow where derivatives do (those of
    ``tanh`` at 0.5 fall to about 1e-217 at order 1,000), so ``n`` is not
    bounded for them. From order 48 on (and for two variables from 496
    coefficients on) the call computes them as numbers, whole coefficient
    arrays pushed through the traced function (:mod:`symad.transforms.series`),
    instead of a graph with a node per coefficient; ``.trace()`` builds that
    graph up to order 170. ``derivatives=True`` refuses a derivative beyond
    float64's range, naming it; past order 170 (where k! overflows though the
    derivative need not) the series is computed in mpmath and the derivatives
    returned as float64. ``dps``: compute in mpmath at that many digits
    instead (results ``mpmath.mpf``; one argument or a direction), where a
    float64 series cancels.

    >>> import symad as sd
    >>> import numpy as np
    >>> [float(c) for c in sd.taylor(np.exp, 3)(0.0)]
    [1.0, 1.0, 0.5, 0.16666666666666666]
    >>> [float(d) for d in sd.taylor(np.sin, 2, derivatives=True)(0.0)]
    [0.0, 1.0, -0.0]
    >>> [float(d) for d in sd.taylor(lambda x, y: x * y, 2, (0, 1), True, direction=(1.0, 2.0))(3.0, 5.0)]
    [15.0, 11.0, 4.0]
    >>> series = sd.taylor(lambda x, y: np.exp(x) * np.sin(y), 2, argnum=(0, 1))(0.0, 0.0)
    >>> {k: float(c) for k, c in series.items() if c != 0}
    {(0, 1): 1.0, (1, 1): 1.0}
    >>> c = sd.taylor(np.tanh, 1000)(0.5)
    >>> len(c), f"{c[1000]:.6e}"
    (1001, '5.748953e-218')
    >>> import mpmath
    >>> mpmath.nstr(sd.taylor(np.sin, 300, derivatives=True, dps=30)(0.5)[300], 25)  # sin(0.5)
    '0.4794255386042030002732879'
    """
    name = function_name(fun)
    dps = _check_dps(dps, argnum, direction, name)
    n = _check_order(n, "taylor", name)
    if isinstance(argnum, (tuple, list)):
        argnum = _normalize_argnums(tuple(argnum), None, None, "taylor", fun)
        if not argnum:
            raise DifferentiationError(
                f"taylor({name}): argnum=() names no argument; pass an int or a tuple of positions")
    else:
        argnum = _check_argnum(argnum, "taylor", name)
    steps = _check_direction(direction, argnum, name)
    check_args = _argument_checker(argnum, "taylor", fun, differentiates=bool(n))

    def graph(primal: Function) -> Function:
        check_graph_order(n, f"taylor({name}, {n})")
        return taylor_function(primal, n, argnum, derivatives, direction=steps)

    return Transformed(fun, graph, f"taylor({name}, {n})", check_args, _scalar_examples,
                       evaluate=taylor_evaluator(n, argnum, derivatives, steps, dps, name))


# ---------------------------------------------------------------------------
# vmap
# ---------------------------------------------------------------------------


def _axes_per_leaf(axes: Any, tree: Any, what: str, name: str) -> list:
    """One axis (int or None) per leaf of ``tree``, from an int/None or a matching pytree of them."""
    if axes is None or isinstance(axes, numbers.Integral):
        return [axes] * len(tree_flatten(tree)[0])
    if isinstance(axes, dict) and isinstance(tree, dict) and set(axes) == set(tree):
        leaves_tree = tree_flatten(tree)[1]
        return [a for key in leaves_tree.keys for a in _axes_per_leaf(axes[key], tree[key], what, name)]
    if isinstance(axes, (tuple, list)) and isinstance(tree, (tuple, list)) and len(axes) == len(tree):
        return [a for sub_axes, sub_tree in zip(axes, tree) for a in _axes_per_leaf(sub_axes, sub_tree, what, name)]
    raise TracingError(f"vmap({name}): {what} {axes!r} does not match the structure of the values")


def vmap(fun: Callable, in_axes=0, out_axes=0) -> Callable:
    """Map ``fun`` over an axis of its arguments.

    The function is traced once for a single element (core shapes without
    the mapped axis) and evaluated over the whole batch at once; inside a
    trace the map is unrolled.

    Args:
        in_axes: an int or None for every argument, or a tuple with one entry per
            argument, each an int, None or a pytree of them matching the argument.
        out_axes: where the mapped axis goes: an int, or a pytree matching the outputs.

    >>> import symad as sd
    >>> import numpy as np
    >>> sd.vmap(lambda row: np.sum(row ** 2))(np.arange(6.0).reshape(3, 2)).tolist()
    [1.0, 13.0, 41.0]
    """
    from symad import numpy as snp

    name = function_name(fun)
    cache: dict = {}

    def mapped(*args, **kwargs):
        args = _bind_keywords(fun, args, kwargs, f"vmap({name})")
        axes = _axes_per_leaf(in_axes, args, "in_axes", name)
        leaves, treedef = tree_flatten(args)
        try:
            moved = [leaf if axis is None else snp.moveaxis(_as_array(leaf), axis, 0)
                     for leaf, axis in zip(leaves, axes)]
        except (ValueError, IndexError) as error:  # NumPy's AxisError is both
            raise TracingError(f"vmap({name}): in_axes {in_axes!r} do not fit the arguments: {error}") from None
        sizes = {leaf.shape[0] for leaf, axis in zip(moved, axes) if axis is not None}
        if not sizes:
            raise TracingError(f"vmap({name}): in_axes maps no argument; give at least one an axis")
        if len(sizes) != 1:
            raise TracingError(f"vmap({name}): mapped axes have different sizes {sorted(sizes)}")
        (size,) = sizes
        if size == 0:
            raise TracingError(f"vmap({name}): the mapped axis is empty; there is nothing to map over")

        def element(index):
            return tree_unflatten(treedef, [leaf if axis is None else leaf[index]
                                            for leaf, axis in zip(moved, axes)])

        function = None
        if current_builder() is not None:
            # Inside a trace: traced once at one element's shapes, then recorded once for
            # the whole batch (each node carries the mapped axis in front).
            examples = element(0)
            function = trace(fun, *examples) if not isinstance(fun, Function) else fun
            stacked = inline_batched(function, moved, [axis is not None for axis in axes], size)
        else:
            examples = element(0)
            key = _signature(examples)
            function = cache.get(key)
            if function is None:
                function = cache[key] = trace(fun, *examples)
            stacked = function(*tree_unflatten(treedef, moved))
        out_leaves, out_treedef = tree_flatten(stacked)
        destinations = _axes_per_leaf(out_axes, stacked, "out_axes", name)
        varying: list = []
        if None in destinations:  # does each output read a mapped argument? (JAX asks the structure)
            if function is None:  # unrolled: traced once more, on symbols, to see the structure
                function = trace(fun, *element(0))
            varying = _outputs_depending_on(function, [axis is not None for axis in axes])
        return tree_unflatten(out_treedef, [
            _unmapped(leaf, index, name, varying[index]) if axis is None
            else leaf if axis == 0 else snp.moveaxis(leaf, 0, axis)
            for index, (leaf, axis) in enumerate(zip(out_leaves, destinations))])

    mapped.__name__ = f"vmap({name})"
    return mapped


def _outputs_depending_on(function, mapped: list) -> list:
    """For each output leaf of the traced ``function``: does it read an argument leaf marked ``mapped``?

    One sweep over the graph in order: a node depends on the mapped arguments
    if one of its operands does.
    """
    depends = set()
    for symbols, is_mapped in zip(function.in_symbols, mapped):
        if is_mapped:
            atoms = leaf_atoms(symbols)
            depends.update(atoms)
            if symbols.__class__ is ArrayInput:
                depends.update(symbols.made_elements())
    for node in function.graph.nodes:
        if any(atom in depends for atom in node.args if atom.is_Symbol):
            depends.add(node)
    return [any(atom.is_Symbol and atom in depends for atom in leaf_atoms(atoms))
            for atoms in function.output_atoms()]


def _unmapped(leaf, index: int, name: str, varies: bool):
    """An output with out_axes=None: one value, not one per element (as JAX).

    JAX refuses such an output when it depends on the mapped axis, whatever
    the values; so does this (``varies``: the traced output reads a mapped
    argument, see :func:`_outputs_depending_on`).
    """
    if varies:
        raise TracingError(
            f"vmap({name}): out_axes=None for output {index}, but that output depends on the "
            "mapped arguments (whatever their values); out_axes=None is for outputs that do not "
            "(as in JAX). Give it an axis (out_axes=0)")
    return leaf[0]


def _as_array(leaf):
    return leaf if isinstance(leaf, (Tracer, Parameter)) else np.asarray(leaf)


def _stack_trees(trees: list, stack):
    first_leaves, treedef = tree_flatten(trees[0])
    all_leaves = [tree_flatten(t)[0] for t in trees]
    return tree_unflatten(treedef, [stack([leaves[i] for leaves in all_leaves])
                                    for i in range(len(first_leaves))])
