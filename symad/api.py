"""The transformations: grad, value_and_grad, jvp, vjp, jacfwd, jacrev, hessian, derivative, vmap.

Each transform is a Graph -> Graph function (:func:`grad_function`,
:func:`jacobian_function`, ...) wrapped in a :class:`Transformed` callable
that traces the user's function once per argument signature, applies the
graph transform, caches the result and evaluates it. Called on traced
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
import sympy

from symad import array_primitives as A
from symad.errors import DifferentiationError, RetraceWarning, SymadError, TracingError
from symad.function import (
    Function,
    argument_names,
    derive,
    function_name,
    input_leaf,
    is_whole_leaf,
    leaf_atoms,
    leaf_elements,
    leaf_shape,
    trace,
)
from symad.graph import ArrayInput, atom_shape, current_builder, is_zero_constant, number_atom
from symad.outside import changed, snapshot
from symad.pytree import TreeDef, leaf_paths, tree_flatten, tree_unflatten
from symad.tracer import (
    Parameter,
    Tracer,
    active_input_names,
    constant_atom,
    element_atom,
    element_atoms,
    substitute_atoms,
)
from symad.transforms import backpropagate, push_forward
from symad.transforms.forward import consumer_index
from symad.transforms.reverse import full_shape
from symad.transforms.sparsity import array_patterns, set_bits, sparsity_pattern
from symad.transforms.taylor import Multivariate, taylor_series
from symad.transforms.series import SeriesUnsupported, taylor_call, wants_numbers

__all__ = [
    "grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "jacobian", "hessian",
    "derivative", "taylor", "vmap", "Transformed",
]

ONE = sympy.Integer(1)
ZERO = sympy.Integer(0)


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


def _resolve_argnums(argnums, count: int, transform: str, name: str) -> tuple[int, ...]:
    """Positions as non-negative ints, checked against the number of arguments."""
    entries = argnums if isinstance(argnums, tuple) else (argnums,)
    resolved = []
    for entry in entries:
        if not -count <= entry < count:
            raise DifferentiationError(
                f"{transform}({name}): argnums entry {entry} is out of range for a call "
                f"with {count} positional argument{'s' if count != 1 else ''}"
            )
        resolved.append(entry % count)
    if len(set(resolved)) != len(resolved):
        raise DifferentiationError(f"{transform}({name}): argnums {argnums} name the same argument twice")
    return tuple(resolved)


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
    _check_float_weights(weights, transform, name)
    return weights


def _check_float_weights(weights, transform: str, name: str) -> None:
    """Integer Parameters in ``weights`` are an error, as integer arguments are (and in JAX)."""
    for weight in weights:
        dtype = getattr(weight, "given_dtype", None)
        if dtype is not None and dtype.kind not in "fc":
            raise DifferentiationError(
                f"{transform}({name}): weight sd.Parameter {weight.name!r} holds dtype {dtype}; "
                "derivatives are taken with respect to float inputs only (give it float values: "
                "sd.Parameter(np.asarray(value, dtype=float)), or leave it out of weights=)"
            )


def _check_differentiable(args: tuple, positions: Sequence[int], transform: str, fun) -> None:
    """Integer inputs in a differentiated position are an error, as in JAX."""
    for position in positions:
        leaves, treedef = tree_flatten(args[position])
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
        positions = _resolve_argnums(argnums, len(args), transform, function_name(fun))
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


def _input_leaf_ranges(function: Function) -> list[range]:
    """For each top-level argument, the range of its leaves in ``function.in_symbols``."""
    ranges, start = [], 0
    for child in function.in_treedef.children:
        ranges.append(range(start, start + child.num_leaves))
        start += child.num_leaves
    return ranges


def _split_outputs(function: Function, outputs: list, has_aux: bool, transform: str):
    """(differentiated output tree, aux tuple or None) as pytrees of atom arrays."""
    tree = tree_unflatten(function.out_treedef, outputs)
    if not has_aux:
        return tree, None
    if function.out_treedef.kind not in ("tuple", "list") or not function.out_treedef.children:
        raise DifferentiationError(
            f"{transform}({function.name}, has_aux=True): the function must return a tuple "
            "(output, *aux), but it returned a single value"
        )
    return tree[0], tuple(tree[1:])


def _check_real_outputs(builder, outputs, transform: str, name: str) -> None:
    """Differentiated outputs must be real numbers: not None, not truth values (as in JAX)."""
    leaves = tree_flatten(outputs)[0]
    if not leaves:
        raise DifferentiationError(f"{transform}({name}): the function returned no value to differentiate")
    if any(builder.is_boolean(atom) for leaf in leaves for atom in leaf_atoms(leaf)):
        raise DifferentiationError(
            f"{transform}({name}): the differentiated output is a truth value (a comparison); "
            "derivatives are taken of real-valued outputs"
        )


def _wrt(function: Function, positions: tuple[int, ...] | None, weights: tuple[Parameter, ...]):
    """The atoms differentiated against, and a function that packs their cotangents into trees.

    Unused weights (the function never touches them) get exact zeros.
    """
    leaf_ranges = _input_leaf_ranges(function)
    atoms: list = []
    layout: list = []  # per differentiated tree: (treedef, [(shape, whole)])
    # A whole array is differentiated as one atom in an array program; in a program of
    # scalars (element-level code reading a few elements) element by element, as before.
    array_program = function.is_array_program
    for position in positions or ():
        leaves = [function.in_symbols[i] for i in leaf_ranges[position]]
        if not array_program:
            leaves = [leaf_elements(leaf) for leaf in leaves]
        layout.append((function.in_treedef.children[position],
                       [(leaf_shape(leaf), is_whole_leaf(leaf)) for leaf in leaves]))
        for leaf in leaves:
            atoms.extend(leaf_atoms(leaf))
    parameter_symbols = dict(function.parameters)
    for weight in weights:
        symbols = parameter_symbols.get(weight)
        if symbols is None:  # an unused weight: exact zeros
            symbols = np.full(weight.shape, ZERO, dtype=object)
        elif not array_program:
            symbols = leaf_elements(symbols)
        layout.append((TreeDef("leaf"), [(leaf_shape(symbols), is_whole_leaf(symbols))]))
        atoms.extend(leaf_atoms(symbols))

    def pack(flat_values: Sequence, single: bool, per_value: Callable[[Any, tuple], Any]):
        trees, start = [], 0
        for treedef, shapes in layout:
            leaves = []
            for shape, whole in shapes:
                if whole:  # one value of the whole array's shape
                    leaves.append(flat_values[start])
                    start += 1
                    continue
                count = int(np.prod(shape, dtype=int))
                leaves.append(per_value(flat_values[start:start + count], shape))
                start += count
            trees.append(tree_unflatten(treedef, leaves))
        position_trees = trees[: len(positions or ())]
        weight_trees = tuple(trees[len(positions or ()):])
        if positions is None:
            return weight_trees
        arg_part = position_trees[0] if single else tuple(position_trees)
        return (arg_part, weight_trees) if weights else arg_part

    return atoms, pack


def _atom_array(values: Sequence, shape: tuple) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array.reshape(shape)


def grad_function(function: Function, argnums, has_aux: bool = False, weights=(),
                  with_value: bool = False) -> Function:
    """Reverse mode on a traced Function: the Function computing its gradient.

    ``argnums`` is an int, a tuple of ints, or None (weights only). Several or
    non-scalar outputs differentiate the sum of all their elements.
    """
    transform = "value_and_grad" if with_value else "grad"
    count = len(function.in_treedef.children)
    positions = None if argnums is None else _resolve_argnums(argnums, count, transform, function.name)
    single = isinstance(argnums, int)
    weights = tuple(weights)
    _check_float_weights(weights, transform, function.name)  # the value may have been reassigned

    def build(builder, primal_nodes, outputs):
        differentiated, aux = _split_outputs(function, outputs, has_aux, transform)
        _check_real_outputs(builder, differentiated, transform, function.name)
        seeds = [(atom, ONE) for leaf in tree_flatten(differentiated)[0] for atom in leaf_atoms(leaf)]
        wrt_atoms, pack = _wrt(function, positions, weights)
        cotangents = backpropagate(builder, primal_nodes, seeds, wrt_atoms, function.name)
        grads = pack(cotangents, single, _atom_array)
        if with_value:
            return (tree_unflatten(function.out_treedef, outputs), grads)
        return (grads, aux) if has_aux else grads

    result = derive(function, f"{transform}({function.name})", build)
    if not with_value and not has_aux and positions is not None and not weights:
        result.output_labels, result.output_derivatives = _partial_labels(function, positions)
    return result


def _wrt_leaves(function: Function, positions: tuple[int, ...]) -> list:
    """The input symbol arrays of the arguments at ``positions``, leaf by leaf."""
    ranges = _input_leaf_ranges(function)
    return [function.in_symbols[i] for position in positions for i in ranges[position]]


def _partial_labels(function: Function, positions: tuple[int, ...]) -> tuple[list[str], list]:
    """LaTeX labels (d f / d x, nabla_w f) for the gradient leaves of the arguments at ``positions``,
    and what each leaf is the derivative of (so that grad(grad(f)) is labelled d2f/dx2)."""
    from symad.export.latex import gradient_labels

    return gradient_labels(function, _wrt_leaves(function, positions))


def _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value):
    transform = "value_and_grad" if with_value else "grad"
    argnums = _normalize_argnums(argnums, grad_position, weights, transform, fun)
    weights = _check_weights(weights, transform, function_name(fun))

    check_args = _argument_checker(argnums, transform, fun)
    result = Transformed(
        fun,
        lambda primal: grad_function(primal, argnums, has_aux, weights, with_value),
        f"{transform}({function_name(fun)})",
        check_args,
    )
    if not (has_aux or weights or with_value):
        result.first_derivative = (fun, argnums)
    return result


def grad(fun: Callable, argnums=0, has_aux: bool = False, *, weights=None,
         grad_position=None) -> Transformed:
    """The gradient of ``fun`` with respect to the arguments ``argnums`` (and ``weights``).

    Args:
        fun: a Python function, a traced Function or another transform.
        argnums: an int (one gradient back), a tuple of ints (a tuple back), or
            None together with ``weights``. ``grad_position`` is an alias.
        has_aux: ``fun`` returns ``(output, *aux)``; only ``output`` is
            differentiated and the call returns ``(gradients, aux)``.
        weights: ``sd.Parameter`` objects ``fun`` closes over; their gradients
            come back as a tuple (after the argument gradients, if any).

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
    return _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value=False)


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, *, weights=None,
                   grad_position=None) -> Transformed:
    """Like :func:`grad`, but the call returns ``(value, gradients)``; ``value`` is what ``fun`` returned.

    >>> import symad as sd
    >>> value, gradient = sd.value_and_grad(lambda x: x ** 2)(3.0)
    >>> float(value), float(gradient)
    (9.0, 6.0)
    """
    return _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value=True)


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
            function = cached["function"] = _vjp_function(out_function, has_aux)
        return function(primals, (cotangent,))

    vjp_fn.__name__ = f"vjp_fn({primal.name})"
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _vjp_function(function: Function, has_aux: bool) -> Function:
    leaves_tree = function.out_treedef
    if has_aux:
        leaves_tree = function.out_treedef.children[0]
    out_shapes = function.out_shapes[: leaves_tree.num_leaves]
    paths = leaf_paths(leaves_tree, "ct")
    taken = _taken_names(function)
    # A program of scalars keeps cotangents per element, as its outputs are.
    elements = not function.is_array_program
    cotangent_symbols = [input_leaf(path, shape, taken, elements) for path, shape in zip(paths, out_shapes)]
    positions = tuple(range(len(function.in_treedef.children)))

    def build(builder, primal_nodes, outputs):
        seeds = []
        for leaf, symbols in zip(outputs, cotangent_symbols):
            if isinstance(leaf, np.ndarray) and not isinstance(symbols, np.ndarray):
                # An output built element by element, seeded by a whole cotangent array.
                seeds.extend(zip(leaf.reshape(-1), _elements(builder, symbols)))
            elif not isinstance(leaf, np.ndarray) and isinstance(symbols, np.ndarray):
                seeds.append((leaf, symbols[()]))
            else:
                seeds.extend(zip(leaf_atoms(leaf), leaf_atoms(symbols)))
        wrt_atoms, pack = _wrt(function, positions, ())
        cotangents = backpropagate(builder, primal_nodes, seeds, wrt_atoms, function.name)
        return pack(cotangents, False, _atom_array)

    extra = (TreeDef("tuple", (leaves_tree,)), cotangent_symbols)
    return derive(function, f"vjp({function.name})", build, extra_inputs=extra)


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
    return _jvp_function(primal, has_aux)(primals, tangents)


def _jvp_function(function: Function, has_aux: bool) -> Function:
    paths = []
    for position, child in enumerate(function.in_treedef.children):
        paths.extend(leaf_paths(child, f"{_leaf_root(function, position)}_dot"))
    taken = _taken_names(function)
    elements = not function.is_array_program
    tangent_symbols = [input_leaf(path, leaf_shape(s), taken, elements and isinstance(s, np.ndarray))
                       for path, s in zip(paths, function.in_symbols)]

    def build(builder, primal_nodes, outputs):
        seeds = {}
        for symbols, tangents in zip(function.in_symbols, tangent_symbols):
            if isinstance(symbols, np.ndarray) and not isinstance(tangents, np.ndarray):
                tangents = leaf_elements(tangents)  # an array of scalars, seeded element by element
            seeds.update(zip(leaf_atoms(symbols), leaf_atoms(tangents)))
            if symbols.__class__ is ArrayInput:  # its elements read by element-level code
                for symbol in symbols.made_elements():
                    seeds[symbol] = element_atom(builder, tangents, symbols.element_index(symbol))
        tangent_of = push_forward(builder, primal_nodes, seeds, function.name)
        tangent_outputs = [_output_tangent(builder, leaf, tangent_of) for leaf in outputs]
        out_tree = tree_unflatten(function.out_treedef, outputs)
        tangent_tree = tree_unflatten(function.out_treedef, tangent_outputs)
        if has_aux:
            _, aux = _split_outputs(function, outputs, True, "jvp")
            return (out_tree[0], tangent_tree[0], aux)
        return (out_tree, tangent_tree)

    extra = (function.in_treedef, tangent_symbols)
    return derive(function, f"jvp({function.name})", build, extra_inputs=extra)


def _output_tangent(builder, leaf, tangent_of: dict):
    """The tangent of an output leaf: each atom's, exact zeros (at its shape) where none reached."""
    if isinstance(leaf, np.ndarray):
        return substitute_atoms(leaf, {atom: tangent_of.get(atom, ZERO) for atom in leaf.reshape(-1)
                                       if atom.is_Symbol or atom not in tangent_of})
    tangent = tangent_of.get(leaf, ZERO) if leaf.is_Symbol else ZERO
    if atom_shape(tangent) != atom_shape(leaf):
        tangent = builder.broadcast(tangent, atom_shape(leaf))
    return tangent


def _elements(builder, atom) -> list:
    """The scalar atoms of a whole array's elements, in order."""
    return leaf_elements(atom).reshape(-1).tolist() if atom.__class__ is ArrayInput else [
        element_atom(builder, atom, index) for index in np.ndindex(atom_shape(atom))]


def _taken_names(function: Function) -> set[str]:
    """Names new input symbols of a transform of ``function`` must avoid."""
    return {symbol.name for symbol in function.graph.inputs} | active_input_names()


def _leaf_root(function: Function, position: int) -> str:
    symbols = function.in_symbols[_input_leaf_ranges(function)[position].start] if function.in_symbols else None
    if symbols is None or math.prod(leaf_shape(symbols)) == 0:
        return f"x{position}"
    name = leaf_atoms(symbols)[0].name
    return name.split("[")[0].split(".")[0]


# ---------------------------------------------------------------------------
# Jacobians and Hessians
# ---------------------------------------------------------------------------


def jacobian_function(function: Function, argnums, has_aux: bool = False, mode: str = "rev",
                      flat_aux: bool = False) -> Function:
    """The Jacobian of a traced Function, by reverse (one sweep per output element) or forward mode.

    Each output leaf of shape ``So`` holds, per differentiated input leaf of
    shape ``Si``, an array of shape ``So + Si``.
    """
    transform = "jacrev" if mode == "rev" else "jacfwd"
    count = len(function.in_treedef.children)
    positions = _resolve_argnums(argnums, count, transform, function.name)
    single = isinstance(argnums, int)
    if function.is_array_program:
        result = _array_jacobian_function(function, positions, single, has_aux, mode, flat_aux)
        if not has_aux:
            from symad.export.latex import jacobian_labels

            result.output_labels, result.output_derivatives = jacobian_labels(
                function, _wrt_leaves(function, positions))
        return result

    def build(builder, primal_nodes, outputs):
        differentiated, aux = _split_outputs(function, outputs, has_aux, transform)
        _check_real_outputs(builder, differentiated, transform, function.name)
        out_leaves, out_treedef = tree_flatten(differentiated)
        wrt_atoms, pack = _wrt(function, positions, ())
        out_atoms = [atom for leaf in out_leaves for atom in leaf.reshape(-1)]
        # derivative[o][i] = d out_atoms[o] / d wrt_atoms[i]
        if mode == "rev":
            rows = [backpropagate(builder, primal_nodes, [(atom, ONE)], wrt_atoms, function.name)
                    for atom in out_atoms]
        else:
            consumers = consumer_index(primal_nodes)
            columns = [push_forward(builder, primal_nodes, {atom: ONE}, function.name, consumers)
                       for atom in wrt_atoms]
            rows = [[column.get(out, ZERO) for column in columns] for out in out_atoms]
        result_leaves, start = [], 0
        for leaf in out_leaves:
            block = rows[start:start + leaf.size]
            start += leaf.size
            result_leaves.append(pack(list(range(len(wrt_atoms))), single,
                                      functools.partial(_jacobian_block, block, leaf.shape)))
        jac = tree_unflatten(out_treedef, result_leaves)
        if not has_aux:
            return jac
        # flat_aux: (jac, *aux), so that a further has_aux transform sees the same aux tuple.
        return (jac, *aux) if flat_aux else (jac, aux)

    result = derive(function, f"{transform}({function.name})", build)
    if not has_aux:
        from symad.export.latex import jacobian_labels

        result.output_labels, result.output_derivatives = jacobian_labels(
            function, _wrt_leaves(function, positions))
    return result


def _array_jacobian_function(function: Function, positions: tuple, single: bool, has_aux: bool,
                             mode: str, flat_aux: bool) -> Function:
    """The Jacobian of an array program: one sweep per output leaf (reverse) or input leaf
    (forward), each carrying a leading axis of seeds -- the identity -- so every row (or
    column) comes from one sweep, as JAX's ``vmap`` of a vector-Jacobian product."""
    transform = "jacrev" if mode == "rev" else "jacfwd"

    def build(builder, primal_nodes, outputs):
        differentiated, aux = _split_outputs(function, outputs, has_aux, transform)
        _check_real_outputs(builder, differentiated, transform, function.name)
        out_leaves, out_treedef = tree_flatten(differentiated)
        wrt_atoms, pack = _wrt(function, positions, ())
        wrt_shapes = [atom_shape(atom) for atom in wrt_atoms]
        blocks = [[None] * len(wrt_atoms) for _ in out_leaves]  # blocks[out][wrt]
        if mode == "rev":
            for row, leaf in enumerate(out_leaves):
                out_shape = leaf_shape(leaf)
                size = math.prod(out_shape)
                # One output: the gradient itself, swept with no axis of seeds.
                lead = () if size == 1 else (size,)
                seeds = [(leaf_atoms(leaf)[0], ONE)] if size == 1 else _identity_seeds(builder, leaf, size)
                cotangents = backpropagate(builder, primal_nodes, seeds, wrt_atoms, function.name,
                                           lead=lead)
                for column, (cotangent, in_shape) in enumerate(zip(cotangents, wrt_shapes)):
                    cotangent = full_shape(builder, cotangent, in_shape, len(lead)) if cotangent.is_Symbol \
                        else builder.broadcast(cotangent, lead + in_shape)
                    blocks[row][column] = A.record_reshape(builder, cotangent, out_shape + in_shape)
        else:
            consumers = consumer_index(primal_nodes)
            for column, (atom, in_shape) in enumerate(zip(wrt_atoms, wrt_shapes)):
                size = math.prod(in_shape)
                tangent_of = push_forward(builder, primal_nodes, _identity_tangents(builder, atom, size),
                                          function.name, consumers, lead=1)
                for row, leaf in enumerate(out_leaves):
                    out_shape = leaf_shape(leaf)
                    tangent = _leaf_tangent(builder, leaf, tangent_of, size)
                    moved = A.record_transpose(builder, tangent, tuple(range(1, len(out_shape) + 1)) + (0,))
                    blocks[row][column] = A.record_reshape(builder, moved, out_shape + in_shape)
        result_leaves = [pack(row_blocks, single, lambda values, shape: values[0])
                         for row_blocks in blocks]
        jac = tree_unflatten(out_treedef, result_leaves)
        if not has_aux:
            return jac
        return (jac, *aux) if flat_aux else (jac, aux)

    return derive(function, f"{transform}({function.name})", build)


def _identity_seeds(builder, leaf, size: int) -> list:
    """Seeds for the rows of a Jacobian: the identity, one row per element of an output leaf."""
    identity = np.eye(size)
    if isinstance(leaf, np.ndarray):
        return [(atom, constant_atom(builder, identity[k])) for k, atom in enumerate(leaf.reshape(-1))]
    return [(leaf, constant_atom(builder, identity.reshape((size,) + atom_shape(leaf))))]


def _identity_tangents(builder, atom, size: int) -> dict:
    """Seeds for the columns of a Jacobian: the identity over one input's elements."""
    return _seed_tangents(builder, atom, np.eye(size))


def _seed_tangents(builder, leaf, seeds: np.ndarray) -> dict:
    """Tangents of one input leaf carrying a leading axis of seeds: ``seeds`` is ``(count, elements)``."""
    count = seeds.shape[0]
    if isinstance(leaf, np.ndarray):  # scalar atoms: each its column of seeds
        return {atom: constant_atom(builder, seeds[:, k]) for k, atom in enumerate(leaf.reshape(-1).tolist())}
    tangents = {leaf: constant_atom(builder, seeds.reshape((count,) + atom_shape(leaf)))}
    if leaf.__class__ is ArrayInput:  # element-level code reads its elements' symbols
        for symbol in leaf.made_elements():
            flat = int(np.ravel_multi_index(leaf.element_index(symbol), leaf.shape))
            tangents[symbol] = constant_atom(builder, seeds[:, flat])
    return tangents


def _leaf_tangent(builder, leaf, tangent_of: dict, size: int):
    """An output leaf's tangent with a leading axis of ``size`` seeds: ``(size,) + its shape``."""
    if isinstance(leaf, np.ndarray):
        elements = [tangent_of.get(atom, ZERO) if atom.is_Symbol else ZERO for atom in leaf.reshape(-1)]
        if all(is_zero_constant(t) for t in elements):
            return builder.broadcast(ZERO, (size,) + leaf.shape)
        elements = [builder.broadcast(t, (size,)) if not t.is_Symbol else t for t in elements]
        params = (("shape", leaf.shape), ("positions", tuple(range(len(elements)))), ("has_base", False))
        return builder.record(A.pack_p, elements, params)
    tangent = tangent_of.get(leaf, ZERO) if leaf.is_Symbol else ZERO
    if not tangent.is_Symbol:
        return builder.broadcast(tangent, (size,) + atom_shape(leaf))
    return full_shape(builder, tangent, atom_shape(leaf), 1)


def _jacobian_block(rows: list[list], out_shape: tuple, columns: Sequence[int], in_shape: tuple):
    """The array ``out_shape + in_shape`` of ``rows[o][i]`` for the wrt positions ``columns``."""
    block = np.empty((len(rows), len(columns)), dtype=object)
    for o, row in enumerate(rows):
        block[o, :] = [row[i] for i in columns]
    return block.reshape(tuple(out_shape) + tuple(in_shape))


def _make_jacobian(fun, argnums, has_aux, mode):
    transform = "jacrev" if mode == "rev" else "jacfwd"
    argnums = _normalize_argnums(argnums, None, None, transform, fun)

    check_args = _argument_checker(argnums, transform, fun)
    inner = getattr(fun, "first_derivative", None)
    if inner is not None and not has_aux and inner[1] == argnums:
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
        lambda primal: jacobian_function(primal, argnums, has_aux, mode),
        f"{transform}({function_name(fun)})",
        check_args,
    )
    if not has_aux:
        result.first_derivative = (fun, argnums)
    return result


def jacrev(fun: Callable, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian of ``fun`` by reverse mode: shape ``out.shape + in.shape``.

    >>> import symad as sd
    >>> import numpy as np
    >>> sd.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    return _make_jacobian(fun, argnums, has_aux, "rev")


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian of ``fun`` by forward mode: shape ``out.shape + in.shape``.

    >>> import symad as sd
    >>> import numpy as np
    >>> sd.jacfwd(lambda x: x[::-1] * 3)(np.array([1.0, 2.0])).tolist()
    [[0.0, 3.0], [3.0, 0.0]]
    """
    return _make_jacobian(fun, argnums, has_aux, "fwd")


def jacobian(fun: Callable, argnums=0, has_aux: bool = False, *, sparse: bool = False) -> Transformed:
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
        return jacrev(fun, argnums, has_aux)
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


def sparse_jacobian_function(function: Function, argnum: int, symmetric: bool = False,
                             compressed: bool | None = None) -> Function:
    """The structural non-zeros of ``function``'s Jacobian w.r.t. one argument, as a Function.

    Outputs one vector: the non-zero values in row-major (CSR) order; the
    Function's ``sparse_layout`` is ``(rows, columns, shape)``. With
    ``symmetric`` (a Hessian: ``function`` is a gradient), ``(i, j)`` and
    ``(j, i)`` are one value, computed once.

    ``compressed`` (default: for array programs) computes them from a few
    directional derivatives chosen by graph colouring, in one forward sweep
    (:func:`_compressed_jacobian_function`); its ``sparse_colouring`` says
    which colouring and how many colours. Otherwise each input element gets
    its own forward sweep over its cone of influence, and each non-zero is a
    scalar atom with its own formula, as for scalar programs, whose graphs
    stay scalar this way (``sparse_colouring`` is None).
    """
    transform = "hessian" if symmetric else "jacobian"
    (position,) = _resolve_argnums(argnum, len(function.in_treedef.children), transform, function.name)
    leaf_range = _input_leaf_ranges(function)[position]
    if len(leaf_range) != 1:
        raise DifferentiationError(
            f"{transform}({function.name}, sparse=True): argument {position} is a pytree; sparse "
            "Jacobians and Hessians take one array argument (concatenate the parameters)")
    wrt_leaf = function.in_symbols[leaf_range.start]
    if (function.is_array_program if compressed is None else compressed):
        return _compressed_jacobian_function(function, wrt_leaf, transform, symmetric)
    wrt = leaf_elements(wrt_leaf).reshape(-1).tolist()
    layout = {}

    def build(builder, primal_nodes, outputs):
        _check_real_outputs(builder, outputs, transform, function.name)
        out_atoms = [atom for leaf in outputs for atom in
                     (leaf if isinstance(leaf, np.ndarray) else element_atoms(leaf)).reshape(-1).tolist()]
        masks = array_patterns(primal_nodes, wrt, out_atoms)
        consumers = consumer_index(primal_nodes)
        rows_of_column: dict = {}
        for row, out in enumerate(out_atoms):
            for column in set_bits((masks[out] if out.is_Symbol else None) or 0):
                rows_of_column.setdefault(column, []).append(row)
        entries = {}
        for column, rows in sorted(rows_of_column.items()):
            atom = wrt[column]
            tangents = push_forward(builder, primal_nodes, {atom: ONE}, function.name, consumers)
            for row in rows:
                entries[row, column] = tangents.get(out_atoms[row], ZERO)
        if symmetric:
            for (row, column) in entries:
                if row > column and (column, row) in entries:
                    entries[row, column] = entries[column, row]
        ordered = sorted(entries)
        layout["value"] = (np.array([r for r, _ in ordered], dtype=np.intp),
                           np.array([c for _, c in ordered], dtype=np.intp),
                           (len(out_atoms), len(wrt)))
        return _atom_array([entries[key] for key in ordered], (len(ordered),))

    result = derive(function, f"{transform}({function.name}, sparse)", build)
    result.sparse_layout = layout["value"]
    result.sparse_colouring = None
    return result


def _compressed_jacobian_function(function: Function, wrt_leaf, transform: str, symmetric: bool) -> Function:
    """The structural non-zeros of an array program's Jacobian from compressed directional derivatives.

    The pattern comes from the graph (:mod:`symad.transforms.sparsity`, no
    unrolling); the columns are coloured (:mod:`symad.transforms.colouring`:
    distance-2 for a Jacobian, star or distance-2 for a Hessian) and one
    forward sweep pushes the ``k`` seeds ``S[:, c]`` (ones on the columns of
    colour ``c``) at once, as a leading axis of seeds: the compressed ``J S``,
    ``k`` rows of every output. One ``take`` node reads each non-zero from it.
    """
    import scipy.sparse

    from symad.transforms.colouring import (
        column_colouring,
        hessian_colouring,
        hessian_sources,
        jacobian_sources,
    )

    layout = {}

    def build(builder, primal_nodes, outputs):
        _check_real_outputs(builder, outputs, transform, function.name)
        pattern = sparsity_pattern(primal_nodes, leaf_atoms(wrt_leaf), outputs)
        if symmetric:
            pattern = scipy.sparse.csr_matrix(pattern + pattern.T, dtype=bool)
            pattern.sort_indices()
            colouring = hessian_colouring(pattern)
            sources = hessian_sources(pattern, colouring)
        else:
            colouring = column_colouring(pattern)
            sources = jacobian_sources(pattern, colouring)
        rows = np.repeat(np.arange(pattern.shape[0], dtype=np.intp), np.diff(pattern.indptr))
        layout["value"] = (rows, pattern.indices.astype(np.intp), pattern.shape)
        layout["colouring"] = colouring
        if not sources.size:
            return constant_atom(builder, np.zeros(0))
        seeds = np.zeros((colouring.count, pattern.shape[1]))
        seeds[colouring.colours, np.arange(pattern.shape[1])] = 1.0
        tangent_of = push_forward(builder, primal_nodes, _seed_tangents(builder, wrt_leaf, seeds),
                                  function.name, consumer_index(primal_nodes), lead=1)
        blocks = [A.record_reshape(builder, _leaf_tangent(builder, leaf, tangent_of, colouring.count),
                                   (math.prod(leaf_shape(leaf)),), lead=1) for leaf in outputs]
        compressed = A.record_concatenate(builder, blocks, -1, lead=1)
        flat = A.record_reshape(builder, compressed, (colouring.count * pattern.shape[0],))
        return A.record_take(builder, flat, sources, -1)

    result = derive(function, f"{transform}({function.name}, sparse)", build)
    result.sparse_layout = layout["value"]
    result.sparse_colouring = layout["colouring"]
    return result


def sparse_hessian_function(function: Function, argnum: int) -> Function:
    """The structural non-zeros of the Hessian: a sparse Jacobian of the gradient, symmetric.

    Compressed (star colouring) when ``function`` is an array program; a
    scalar program's gradient keeps one sweep per column. A function with
    several or non-scalar outputs has one Hessian per output element, as the
    dense ``hessian`` gives them (shape ``out.shape + in.shape + in.shape``):
    the sparse Jacobian of its Jacobian, whose rows are the pairs (output
    element, first derivative) in row-major order, so that its dense form
    reshaped to the dense Hessian's shape is the dense Hessian. (The Hessian
    of the sum of the outputs, which ``grad``'s convention would give, is
    ``hessian(lambda x: np.sum(f(x)), sparse=True)``.)
    """
    if function.out_treedef.num_leaves == 1 and function.out_shapes[0] == ():
        gradient = grad_function(function, argnum)
        return sparse_jacobian_function(gradient, argnum, symmetric=True,
                                        compressed=function.is_array_program)
    jacobian = jacobian_function(function, argnum, False, "rev")
    return sparse_jacobian_function(jacobian, argnum, compressed=function.is_array_program)


def hessian(fun: Callable, argnums=0, has_aux: bool = False, *, sparse: bool = False) -> Transformed:
    """The Hessian of ``fun``: ``jacfwd(jacrev(fun))``, shape ``out.shape + in.shape + in.shape``.

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
    if sparse:
        return _make_sparse(fun, argnums, has_aux, "hessian", sparse_hessian_function)
    argnums = _normalize_argnums(argnums, None, None, "hessian", fun)
    check_args = _argument_checker(argnums, "hessian", fun)
    return Transformed(fun, lambda primal: hessian_function(primal, argnums, has_aux),
                       f"hessian({function_name(fun)})", check_args)


def hessian_function(function: Function, argnums, has_aux: bool = False) -> Function:
    """Forward over reverse mode, with each mixed pair computed once.

    ``H[i, j]`` and ``H[j, i]`` are the same output atom (the one first in
    output order), so evaluation computes the upper triangle only and the
    result is exactly symmetric. At kinks of ``where``/``maximum``, where the
    one-sided conventions could make the two orders of differentiation
    disagree, the upper triangle's value is the one returned.
    """
    gradient = jacobian_function(function, argnums, has_aux, "rev", flat_aux=True)
    full = jacobian_function(gradient, argnums, has_aux, "fwd")
    positions = _resolve_argnums(argnums, len(function.in_treedef.children), "hessian", function.name)
    if not has_aux and len(function.out_shapes) == 1:
        from symad.export.latex import hessian_labels

        full.output_labels = hessian_labels(function, _wrt_leaves(function, positions))
    if full.is_array_program:
        return full  # whole-array blocks: no pair of scalar entries to share
    leaf_ranges = _input_leaf_ranges(function)
    wrt_sizes = [math.prod(leaf_shape(function.in_symbols[i])) for p in positions for i in leaf_ranges[p]]
    differentiated = function.out_treedef.children[0] if has_aux else function.out_treedef
    out_sizes = [math.prod(shape) for shape in function.out_shapes[:differentiated.num_leaves]]

    outputs = list(full.graph.outputs)
    offsets, start = {}, 0
    for out_leaf, out_size in enumerate(out_sizes):
        for row, row_size in enumerate(wrt_sizes):
            for column, column_size in enumerate(wrt_sizes):
                offsets[out_leaf, row, column] = start
                start += out_size * row_size * column_size
    for (out_leaf, row, column), offset in offsets.items():
        if column < row:
            continue  # each block pair is visited once, from its upper block
        size, row_size, column_size = out_sizes[out_leaf], wrt_sizes[row], wrt_sizes[column]
        upper = offset + np.arange(size * row_size * column_size).reshape(size, row_size, column_size)
        lower = offsets[out_leaf, column, row] + np.arange(size * column_size * row_size).reshape(
            size, column_size, row_size).transpose(0, 2, 1)
        for kept, mirrored in zip(upper.ravel(), lower.ravel()):
            if mirrored > kept:
                outputs[mirrored] = outputs[kept]
    return _with_outputs(full, outputs)


def _with_outputs(function: Function, outputs: Sequence, out_treedef=None, out_shapes=None,
                  name: str | None = None) -> Function:
    """``function`` with other output atoms (and structure); nodes no output needs are dropped."""
    from symad.graph import live_graph

    graph = live_graph(function.graph.inputs, function.graph.nodes, outputs)
    result = Function(
        graph, name=name or function.name, in_treedef=function.in_treedef,
        in_symbols=function.in_symbols,
        out_treedef=function.out_treedef if out_treedef is None else out_treedef,
        out_shapes=function.out_shapes if out_shapes is None else out_shapes,
        parameters=function.parameters)
    if out_treedef is None:
        result.output_labels = function.output_labels
    return result


# ---------------------------------------------------------------------------
# n-th derivatives
# ---------------------------------------------------------------------------


def taylor_function(function: Function, order: int, argnum, derivatives: bool = False,
                    transform: str = "taylor", direction: tuple | None = None) -> Function:
    """Taylor mode on a traced Function of scalars: coefficients of orders 0..``order`` at once.

    With an int ``argnum`` the result returns a tuple with one entry per order
    ``k = 0..order``, each shaped like ``function``'s output: the normalised
    Taylor coefficient ``f^(k)(x) / k!`` along argument ``argnum``, or the
    derivative ``f^(k)`` itself with ``derivatives=True``. With a tuple
    ``argnum`` and a ``direction`` (one number per argument) the tuple holds the
    coefficients of ``t -> f(x + t * direction)``; with a tuple ``argnum`` and no
    direction, the result returns the multivariate series instead
    (:func:`_multivariate_taylor_function`).
    """
    _require_scalar_arguments(function, transform)
    count = len(function.in_treedef.children)
    positions = _resolve_argnums(argnum, count, transform, function.name)
    if isinstance(argnum, tuple) and direction is None:
        return _multivariate_taylor_function(function, order, positions, derivatives)
    steps = (ONE,) * len(positions) if direction is None else direction

    def build(builder, primal_nodes, outputs):
        variables = _variables(function, positions)
        seeds = {variable: ([variable, step] + [ZERO] * (order - 1) if order else [variable])
                 for variable, step in zip(variables, steps)}
        sweep = _sweep(function, builder, primal_nodes, outputs, seeds, order, transform)
        return tuple(_coefficients_out(function, sweep, outputs, k, math.factorial(k) if derivatives else 1)
                     for k in range(order + 1))

    return derive(function, f"{transform}({function.name})", build)


def _variables(function: Function, positions: Sequence[int]) -> list:
    """The input symbols of the scalar arguments at ``positions``."""
    leaf_ranges = _input_leaf_ranges(function)
    return [function.in_symbols[leaf_ranges[position].start][()] for position in positions]


def _sweep(function: Function, builder, primal_nodes, outputs, seeds: dict, index, transform: str):
    """The Taylor sweep of ``seeds`` through the replayed graph, after checking the outputs are real."""
    _check_real_outputs(builder, tree_unflatten(function.out_treedef, outputs), transform, function.name)
    return taylor_series(builder, primal_nodes, seeds, index, function.name)


def _multivariate_seeds(variables: Sequence, index: Multivariate) -> dict:
    """Each variable's series: itself at the zero key, 1 at its own unit key, zeros elsewhere."""
    seeds = {}
    for axis, variable in enumerate(variables):
        unit = tuple(int(i == axis) for i in range(len(variables)))
        seeds[variable] = [variable if k == index.zero else ONE if k == unit else ZERO for k in index.keys]
    return seeds


def _coefficients_out(function: Function, sweep, outputs: list, k, scale: int):
    """The outputs' coefficients at key ``k`` times ``scale``, in the structure of the outputs."""
    factor = sympy.Integer(scale)
    per_atom = {atom: sweep.scaled(factor, sweep.coefficient(atom, k))
                for leaf in outputs for atom in leaf.reshape(-1)}
    return tree_unflatten(function.out_treedef, [substitute_atoms(leaf, per_atom) for leaf in outputs])


def _multi_factorial(k: tuple) -> int:
    return math.prod(math.factorial(entry) for entry in k)


def _multivariate_taylor_function(function: Function, order: int, positions: tuple[int, ...],
                                  derivatives: bool) -> Function:
    """The Taylor map of ``function`` in the arguments at ``positions``, to total order ``order``.

    The result returns a dict from every multi-index ``k`` with ``|k| <= order`` to the
    coefficient of ``dx_1**k_1 ... dx_d**k_d`` (each shaped like the output), or to the
    partial derivative ``k! * coefficient`` with ``derivatives=True``. One sweep of
    multivariate recurrences (:class:`~symad.transforms.taylor.Multivariate`) gives every
    coefficient.
    """
    index = Multivariate.total_order(len(positions), order)

    def build(builder, primal_nodes, outputs):
        seeds = _multivariate_seeds(_variables(function, positions), index)
        sweep = _sweep(function, builder, primal_nodes, outputs, seeds, index, "taylor")
        return {k: _coefficients_out(function, sweep, outputs, k, _multi_factorial(k) if derivatives else 1)
                for k in index.keys}

    result = derive(function, f"taylor({function.name}, {order})", build)
    if function.out_shapes == ((),):
        result.output_labels = _taylor_map_labels(function, positions, index, derivatives)
    return result


def _argument_names(function: Function, positions: Sequence[int]) -> list[str]:
    from symad.export.latex import leaf_name

    return [leaf_name(np.array(variable, dtype=object)) for variable in _variables(function, positions)]


def _differentiated_names(names: Sequence[str], orders: Sequence[int]) -> tuple[str, ...]:
    """The variables differentiated by, each as often as its order, the last argument first:
    a label (:func:`~symad.export.latex.mixed_partial_label`) then reads d x^2 d y, in argument order."""
    return tuple(name for axis in reversed(range(len(orders))) for name in [names[axis]] * orders[axis])


def _taylor_map_labels(function: Function, positions: Sequence[int], index: Multivariate,
                       derivatives: bool) -> list[str]:
    r"""One LaTeX label per entry of a Taylor map of a scalar function, in the order of its leaves
    (sorted keys): ``\frac{\partial^{3} f}{\partial x^{2} \partial y}``, over ``k!`` for a coefficient."""
    from symad.export.latex import mixed_partial_label, name_latex

    names = _argument_names(function, positions)
    labels = []
    for k in sorted(index.keys):
        if not any(k):
            labels.append(name_latex(function.name))
            continue
        label = mixed_partial_label(function.name, _differentiated_names(names, k))
        factorial = _multi_factorial(k)
        labels.append(label if derivatives or factorial == 1 else rf"\frac{{1}}{{{factorial}}} {label}")
    return labels


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
        if atom is None or isinstance(entry, (bool, np.bool_)) or not math.isfinite(float(entry)):
            raise DifferentiationError(
                f"taylor({name}): direction entries must be finite real numbers, got {entry!r}"
            )
        atoms.append(atom)
    return tuple(atoms)


def derivative_function(function: Function, n, argnum: int = 0) -> Function:
    """The ``n``-th derivative of a traced Function of scalars, by Taylor mode (O(n**2) per node).

    ``n`` may be a tuple of orders, one per leading argument: the mixed partial
    (:func:`mixed_partial_function`; ``argnum`` is then ignored).
    """
    if isinstance(n, tuple):
        return mixed_partial_function(function, n)
    if n == 0:
        _require_scalar_arguments(function, "derivative")
        return function
    all_orders = taylor_function(function, n, argnum, derivatives=True, transform="derivative")
    # Keep only the n-th order: the last entry of the tuple of orders.
    last = all_orders.out_treedef.children[-1]
    count = last.num_leaves
    leaf_count = sum(math.prod(shape) for shape in all_orders.out_shapes[len(all_orders.out_shapes) - count:])
    outputs = all_orders.graph.outputs[len(all_orders.graph.outputs) - leaf_count:]
    result = _with_outputs(all_orders, outputs, last, all_orders.out_shapes[len(all_orders.out_shapes) - count:],
                           name=f"derivative({function.name}, {n})")
    if len(function.out_shapes) == 1:
        from symad.export.latex import leaf_name, nth_derivative_label

        (position,) = _resolve_argnums(argnum, len(function.in_treedef.children), "derivative", function.name)
        variable = leaf_name(function.in_symbols[_input_leaf_ranges(function)[position].start])
        result.output_labels = [nth_derivative_label(function.name, variable, n)]
    return result


def mixed_partial_function(function: Function, orders: tuple[int, ...]) -> Function:
    """The mixed partial derivative of ``orders[i]``-th order in each leading argument ``i``.

    Taylor mode with multivariate recurrences over the box of multi-indices
    ``k <= orders`` (:class:`~symad.transforms.taylor.Multivariate`): the
    coefficient at ``orders`` times ``orders!``. The cost grows with the number of
    splits of the box, ``prod((a_i + 1)(a_i + 2) / 2)`` products per product of
    two full series: polynomial in the total order. Arguments of order 0 are not
    seeded; with one non-zero order the result is :func:`derivative_function`'s.
    """
    _require_scalar_arguments(function, "derivative")
    count = len(function.in_treedef.children)
    _check_order_count(orders, count, function.name)
    varying = [(position, order) for position, order in enumerate(orders) if order]
    if not varying:
        return function
    name = f"derivative({function.name}, {orders})"
    if len(varying) == 1:
        ((position, order),) = varying
        result = derivative_function(function, order, position)
        result.name = name
    else:
        positions = [position for position, _ in varying]
        target = tuple(order for _, order in varying)
        index = Multivariate.box(target)

        def build(builder, primal_nodes, outputs):
            seeds = _multivariate_seeds(_variables(function, positions), index)
            sweep = _sweep(function, builder, primal_nodes, outputs, seeds, index, "derivative")
            return _coefficients_out(function, sweep, outputs, target, _multi_factorial(target))

        result = derive(function, name, build)
    if len(function.out_shapes) == 1 and count > 1:
        from symad.export.latex import mixed_partial_label

        differentiated = _differentiated_names(_argument_names(function, range(len(orders))), orders)
        result.output_labels = [mixed_partial_label(function.name, differentiated)]
        result.output_derivatives = [(function.name, differentiated)]
    return result


def _check_order_count(orders: tuple, count: int, name: str) -> None:
    if len(orders) > count:
        raise DifferentiationError(
            f"derivative({name}, {orders}): {len(orders)} orders for a function of {count} "
            f"argument{'s' if count != 1 else ''}; give one order per leading argument"
        )


def _require_scalar_arguments(function: Function, transform: str) -> None:
    if any(shape != () for shape in function.in_shapes):
        raise DifferentiationError(
            f"{transform}({function.name}): every argument must be scalar; use sd.grad or "
            "sd.jacobian for functions of arrays (array arguments given at call time are "
            "evaluated elementwise)"
        )


def _check_order(n, transform: str, name: str, coefficients: bool = False) -> int:
    """``n`` as an int, checked; above :data:`MAX_TAYLOR_ORDER` only for Taylor coefficients."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise DifferentiationError(f"{transform}({name}): n must be a non-negative integer, got {n!r}")
    if isinstance(n, numbers.Integral) and n > MAX_TAYLOR_ORDER and not coefficients:
        raise DifferentiationError(
            f"{transform}({name}): order {n} is above {MAX_TAYLOR_ORDER}; n! overflows float64 "
            "past 170, and so do the derivatives of most functions (the Taylor coefficients "
            "f^(n)(x)/n! do not: sd.taylor(f, n) gives them at any order)"
        )
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


#: The highest order ``derivative`` and ``taylor`` accept: 170! is the last
#: factorial below float64's largest value.
MAX_TAYLOR_ORDER = 170


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
    rounding at any order.

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
            _check_order_count(orders, len(args), name)
            _check_differentiable(args, positions, "derivative", fun)

        return Transformed(fun, lambda primal: derivative_function(primal, orders),
                           f"derivative({name}, {orders})", check_args, _scalar_examples)
    n = _check_order(n, "derivative", name)
    argnum = _check_argnum(argnum, "derivative", name)
    check_args = _argument_checker(argnum, "derivative", fun, differentiates=bool(n))
    return Transformed(fun, lambda primal: derivative_function(primal, n, argnum),
                       f"derivative({name}, {n})", check_args, _scalar_examples)


def taylor(fun: Callable, n: int, argnum=0, derivatives: bool = False, *,
           direction=None) -> Transformed:
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
    """
    name = function_name(fun)
    n = _check_order(n, "taylor", name, coefficients=not derivatives)
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
        if n > MAX_TAYLOR_ORDER:
            raise DifferentiationError(
                f"taylor({name}, {n}).trace(): the formulas are built up to order "
                f"{MAX_TAYLOR_ORDER} (one node per coefficient); call sd.taylor({name}, {n})(x) "
                "for the coefficients' values, computed as numbers at any order")
        return taylor_function(primal, n, argnum, derivatives, direction=steps)

    def numbers_(primal: Function, args: tuple):
        multivariate = isinstance(argnum, tuple) and steps is None
        positions = _resolve_argnums(argnum, len(args), "taylor", name)
        if n <= MAX_TAYLOR_ORDER and not wants_numbers(n, len(positions) if multivariate else None):
            return NotImplemented
        call = functools.partial(taylor_call, order=n, positions=positions, args=args,
                                 multivariate=multivariate, derivatives=derivatives, steps=steps,
                                 what=f"taylor({name}, {n})")
        try:
            return call(primal)
        except SeriesUnsupported:
            pass
        try:  # whole-array steps inside the scalar function: one scalar node per element
            return call(primal.expand())
        except (SeriesUnsupported, SymadError) as unsupported:
            if n <= MAX_TAYLOR_ORDER:
                return NotImplemented  # the graph's recurrences cover it
            raise DifferentiationError(
                f"taylor({name}, {n}): {unsupported} has no recurrence on coefficient arrays, "
                f"so orders above {MAX_TAYLOR_ORDER} are not computed for it") from None

    return Transformed(fun, graph, f"taylor({name}, {n})", check_args, _scalar_examples,
                       evaluate=numbers_)


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
            stacked = function._inline_batched(moved, [axis is not None for axis in axes], size)
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
            for atoms in function._output_atoms()]


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
