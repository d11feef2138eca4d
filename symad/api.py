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
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy

from symad.errors import DifferentiationError, TracingError
from symad.function import Function, argument_names, derive, function_name, trace
from symad.graph import current_builder
from symad.pytree import TreeDef, leaf_paths, tree_flatten, tree_unflatten
from symad.tracer import (
    Parameter,
    Tracer,
    active_input_names,
    fresh_symbol_array,
    substitute_atoms,
)
from symad.transforms import backpropagate, push_forward

__all__ = [
    "grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "jacobian", "hessian",
    "derivative", "vmap", "Transformed",
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
    return weights


def _check_differentiable(args: tuple, positions: Sequence[int], transform: str, fun) -> None:
    """Integer inputs in a differentiated position are an error, as in JAX."""
    names = argument_names(fun, len(args))
    for position in positions:
        leaves, treedef = tree_flatten(args[position])
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
    ):
        """``trace_at(args)`` gives the example arguments to trace at (default: the arguments)."""
        if not callable(fun):
            raise TracingError(f"{name}: expected a callable, got {type(fun).__name__}")
        self.fun = fun
        self._transform = transform
        self.name = name
        self._check_args = check_args
        self._trace_at = trace_at or (lambda args: args)
        self._cache: dict = {}
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
        examples = self._trace_at(args)
        # A traced Function keeps its core shapes, whatever batch the call has:
        # one transform serves every batch shape.
        key = len(examples) if self._traces_fixed_shapes else _signature(examples)
        cached = self._cache.get(key)
        if cached is not None and _parameters_unchanged(cached):
            return cached
        result = self._transform(self._primal(examples))
        if not result.closes_over_trace:  # closures over an outer trace can't be reused
            self._cache[key] = result
        return result

    def __call__(self, *args, **kwargs) -> Any:
        args = _bind_keywords(self.fun, args, kwargs, self.name)
        if self._check_args is not None:
            self._check_args(args)
        return self.trace(*args)(*args)

    def __repr__(self) -> str:
        return f"<symad transform {self.name}>"


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
    return all(parameter.shape == symbols.shape for parameter, symbols in function.parameters)


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
    if any(builder.is_boolean(atom) for leaf in leaves for atom in leaf.reshape(-1)):
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
    layout: list = []  # per differentiated tree: (treedef, [shapes])
    for position in positions or ():
        leaves = [function.in_symbols[i] for i in leaf_ranges[position]]
        layout.append((function.in_treedef.children[position], [leaf.shape for leaf in leaves]))
        for leaf in leaves:
            atoms.extend(leaf.reshape(-1))
    parameter_symbols = dict(function.parameters)
    for weight in weights:
        symbols = parameter_symbols.get(weight)
        if symbols is None:
            symbols = np.full(weight.shape, ZERO, dtype=object)
        layout.append((TreeDef("leaf"), [symbols.shape]))
        atoms.extend(symbols.reshape(-1))

    def pack(flat_values: Sequence, single: bool, per_value: Callable[[Any, tuple], Any]):
        trees, start = [], 0
        for treedef, shapes in layout:
            leaves = []
            for shape in shapes:
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

    def build(builder, primal_nodes, outputs):
        differentiated, aux = _split_outputs(function, outputs, has_aux, transform)
        _check_real_outputs(builder, differentiated, transform, function.name)
        seeds = [(atom, ONE) for leaf in tree_flatten(differentiated)[0] for atom in leaf.reshape(-1)]
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
    return Transformed(
        fun,
        lambda primal: grad_function(primal, argnums, has_aux, weights, with_value),
        f"{transform}({function_name(fun)})",
        check_args,
    )


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

    >>> import numpy as np
    >>> f = lambda x1, x2: np.log(x1) + x1 * x2 - np.sin(x2)
    >>> [float(g) for g in grad(f, argnums=(0, 1))(2.0, 5.0)]
    [5.5, 1.7163378145367738]
    >>> grad(f, argnums=(0, 1)).trace(2.0, 5.0).formula()
    (x2 + 1/x1, x1 - cos(x2))
    """
    return _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value=False)


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, *, weights=None,
                   grad_position=None) -> Transformed:
    """Like :func:`grad`, but the call returns ``(value, gradients)``; ``value`` is what ``fun`` returned.

    >>> value, gradient = value_and_grad(lambda x: x ** 2)(3.0)
    >>> float(value), float(gradient)
    (9.0, 6.0)
    """
    return _make_reverse(fun, argnums, has_aux, weights, grad_position, with_value=True)


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """Evaluate ``fun`` at ``primals`` and return ``(out, vjp_fn)`` (plus ``aux`` with has_aux).

    ``vjp_fn(cotangent)`` returns a tuple with one entry per primal: the
    cotangent pulled back through ``fun``.

    >>> import numpy as np
    >>> out, vjp_fn = vjp(lambda x, y: x * y, 2.0, 3.0)
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
    cotangent_symbols = [fresh_symbol_array(path, shape, taken) for path, shape in zip(paths, out_shapes)]
    positions = tuple(range(len(function.in_treedef.children)))

    def build(builder, primal_nodes, outputs):
        seeds = []
        for leaf, symbols in zip(outputs, cotangent_symbols):
            seeds.extend(zip(leaf.reshape(-1), symbols.reshape(-1)))
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

    >>> out, tangent = jvp(lambda x: x ** 3, (2.0,), (1.0,))
    >>> float(out), float(tangent)
    (8.0, 12.0)
    """
    primals, tangents = tuple(primals), tuple(tangents)
    name = function_name(fun)
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
    tangent_symbols = [fresh_symbol_array(path, s.shape, taken) for path, s in zip(paths, function.in_symbols)]

    def build(builder, primal_nodes, outputs):
        seeds = {}
        for symbols, tangents in zip(function.in_symbols, tangent_symbols):
            seeds.update(zip(symbols.reshape(-1), tangents.reshape(-1)))
        tangent_of = push_forward(builder, primal_nodes, seeds, function.name)
        zero_tangents = {atom: ZERO for leaf in outputs for atom in leaf.reshape(-1)
                         if atom not in tangent_of}
        tangent_outputs = [substitute_atoms(leaf, {**zero_tangents, **tangent_of}) for leaf in outputs]
        out_tree = tree_unflatten(function.out_treedef, outputs)
        tangent_tree = tree_unflatten(function.out_treedef, tangent_outputs)
        if has_aux:
            _, aux = _split_outputs(function, outputs, True, "jvp")
            return (out_tree[0], tangent_tree[0], aux)
        return (out_tree, tangent_tree)

    extra = (function.in_treedef, tangent_symbols)
    return derive(function, f"jvp({function.name})", build, extra_inputs=extra)


def _taken_names(function: Function) -> set[str]:
    """Names new input symbols of a transform of ``function`` must avoid."""
    return {symbol.name for symbol in function.graph.inputs} | active_input_names()


def _leaf_root(function: Function, position: int) -> str:
    symbols = function.in_symbols[_input_leaf_ranges(function)[position].start] if function.in_symbols else None
    if symbols is None or symbols.size == 0:
        return f"x{position}"
    name = symbols.reshape(-1)[0].name
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
            columns = [push_forward(builder, primal_nodes, {atom: ONE}, function.name)
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

        result.output_labels = jacobian_labels(function, _wrt_leaves(function, positions))
    return result


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
    return Transformed(
        fun,
        lambda primal: jacobian_function(primal, argnums, has_aux, mode),
        f"{transform}({function_name(fun)})",
        check_args,
    )


def jacrev(fun: Callable, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian of ``fun`` by reverse mode: shape ``out.shape + in.shape``.

    >>> import numpy as np
    >>> jacrev(lambda x: x ** 2)(np.array([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    return _make_jacobian(fun, argnums, has_aux, "rev")


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False) -> Transformed:
    """The Jacobian of ``fun`` by forward mode: shape ``out.shape + in.shape``.

    >>> import numpy as np
    >>> jacfwd(lambda x: x[::-1] * 3)(np.array([1.0, 2.0])).tolist()
    [[0.0, 3.0], [3.0, 0.0]]
    """
    return _make_jacobian(fun, argnums, has_aux, "fwd")


jacobian = jacrev


def hessian(fun: Callable, argnums=0, has_aux: bool = False) -> Transformed:
    """The Hessian of ``fun``: ``jacfwd(jacrev(fun))``, shape ``out.shape + in.shape + in.shape``.

    With ``has_aux`` the call returns ``(hessian, aux)``.

    >>> import numpy as np
    >>> hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 2.0])).tolist()
    [[4.0, 2.0], [2.0, 0.0]]
    """
    argnums = _normalize_argnums(argnums, None, None, "hessian", fun)

    check_args = _argument_checker(argnums, "hessian", fun)
    def transform(primal: Function) -> Function:
        gradient = jacobian_function(primal, argnums, has_aux, "rev", flat_aux=True)
        result = jacobian_function(gradient, argnums, has_aux, "fwd")
        if not has_aux and len(primal.out_shapes) == 1:
            from symad.export.latex import hessian_labels

            count = len(primal.in_treedef.children)
            positions = _resolve_argnums(argnums, count, "hessian", primal.name)
            result.output_labels = hessian_labels(primal, _wrt_leaves(primal, positions))
        return result

    return Transformed(fun, transform, f"hessian({function_name(fun)})", check_args)


# ---------------------------------------------------------------------------
# n-th derivatives
# ---------------------------------------------------------------------------


def derivative(fun: Callable, n: int = 1, argnum: int = 0) -> Transformed:
    """The ``n``-th derivative of ``fun`` w.r.t. the scalar argument ``argnum``, elementwise.

    ``fun`` is traced with scalar symbols for every argument; array arguments
    are evaluated elementwise with broadcasting. ``n=0`` gives ``fun``.

    >>> import numpy as np
    >>> np.allclose(derivative(np.sin, 3)(np.linspace(0, 3, 4)), -np.cos(np.linspace(0, 3, 4)))
    True
    """
    name = function_name(fun)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise DifferentiationError(f"derivative({name}): n must be a non-negative integer, got {n!r}")
    if isinstance(argnum, bool) or not isinstance(argnum, numbers.Integral):
        raise DifferentiationError(f"derivative({name}): argnum must be an integer, got {argnum!r}")

    def transform(primal: Function) -> Function:
        if any(shape != () for shape in primal.in_shapes):
            raise DifferentiationError(
                f"derivative({name}): every argument must be scalar; use sd.grad or sd.jacobian "
                "for functions of arrays"
            )
        result = primal
        for _ in range(int(n)):
            result = grad_function(result, int(argnum))
        if n and len(primal.out_shapes) == 1:
            from symad.export.latex import leaf_name, nth_derivative_label

            variable = leaf_name(primal.in_symbols[int(argnum) % len(primal.in_symbols)])
            result.output_labels = [nth_derivative_label(primal.name, variable, int(n))]
        return result

    check_args = _argument_checker(int(argnum), "derivative", fun, differentiates=bool(n))

    def scalar_examples(args: tuple) -> tuple:
        # Traced with scalar symbols; array arguments are then evaluated elementwise.
        return tuple(np.float64(0.0) for _ in args)

    return Transformed(fun, transform, f"derivative({name}, {n})", check_args, scalar_examples)


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

    >>> import numpy as np
    >>> vmap(lambda row: np.sum(row ** 2))(np.arange(6.0).reshape(3, 2)).tolist()
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

        if current_builder() is not None:
            # Inside a trace: unrolled, so closures and Parameters are recorded too.
            results = [fun(*element(index)) for index in range(size)]
            stacked = _stack_trees(results, snp.stack)
        else:
            examples = element(0)
            key = _signature(examples)
            function = cache.get(key)
            if function is None:
                function = cache[key] = trace(fun, *examples)
            stacked = function(*tree_unflatten(treedef, moved))
        out_leaves, out_treedef = tree_flatten(stacked)
        destinations = _axes_per_leaf(out_axes, stacked, "out_axes", name)
        return tree_unflatten(out_treedef, [leaf if axis in (0, None) else snp.moveaxis(leaf, 0, axis)
                                            for leaf, axis in zip(out_leaves, destinations)])

    mapped.__name__ = f"vmap({name})"
    return mapped


def _as_array(leaf):
    return leaf if isinstance(leaf, (Tracer, Parameter)) else np.asarray(leaf)


def _stack_trees(trees: list, stack):
    first_leaves, treedef = tree_flatten(trees[0])
    all_leaves = [tree_flatten(t)[0] for t in trees]
    return tree_unflatten(treedef, [stack([leaves[i] for leaves in all_leaves])
                                    for i in range(len(first_leaves))])
