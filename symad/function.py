"""Traced functions: a Graph plus the structure of its arguments and results.

:func:`trace` (the first section below) runs a Python function on symbolic
arguments and returns a :class:`Function`. A Function is both sides of symad
at once: the formula (``formula``, ``cse``, ``latex``) and an evaluator
(``F(*args)``), and it is the unit every transform takes and returns. It
keeps the structure and the evaluation entry; its views are thin methods over
:mod:`symad.export.views` (and the LaTeX, C and index-notation exporters),
its leaves are handled by :mod:`symad.leaves`, and ``sd.vmap``'s batched
replay of its graph lives in :mod:`symad.transforms.batching`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy

from symad import config
from symad.atom_arrays import (
    active_input_names,
    builder_parameter_atom,
    check_unrolled_size,
    scalar_array,
    substitute_atoms,
)
from symad.atoms import is_complex_atom
from symad.compile import DEFAULT_BACKEND, PRECISION_BACKENDS, make_evaluator, make_precise_function
from symad.compile.batch import batch_shape as _batch_shape
from symad.compile.batch import common_batch, numeric_argument, single_precision, to_single
from symad.compile.dask_support import evaluate_dask, is_dask_array
from symad.compile.memory import output_array
from symad.compile.tiers import call_goes_to_tape
from symad.errors import CompileError, SymadError, TracingError
from symad.export import views
from symad.export.views import to_sympy_value
from symad.graph import (
    ArrayInput,
    Graph,
    GraphBuilder,
    Node,
    atom_shape,
    current_builder,
    replay,
    scalar_input_graph,
)
from symad.leaves import (
    bind_input,
    input_leaf,
    holds_complex,
    is_complex_leaf,
    is_whole_leaf,
    leaf_atoms,
    leaf_elements,
    leaf_shape,
)
from symad.pytree import TreeDef, leaf_paths, tree_flatten, tree_unflatten
from symad.tracer import Parameter, Tracer, apply, as_atoms, as_operand
from symad.tracing_errors import (
    structure_mismatch_message,
    explain_container_argument,
    explain_library_error,
    explain_numpy_store,
    library_equivalent,
)

__all__ = ["Function", "trace", "MAX_SYMBOLIC_ELEMENTS", "function_name"]

#: The most elements an array may have where it is read one element at a time: the
#: per-element view ``formula(expand=True)``, element-level code reading a whole array
#: (a Python loop over its elements, ``tolist()``), an operation with no array form.
#: Whole-array operations record one node whatever the size and need no limit.
MAX_SYMBOLIC_ELEMENTS = 50_000


# ---------------------------------------------------------------------------
# Tracing: trace(), the library's entry, and the frame every transform builds in
# (derive, finish_function)
# ---------------------------------------------------------------------------


def trace(fun: Callable, *example_args, name: str | None = None) -> Function:
    """Trace ``fun`` into a :class:`Function` at the shapes of ``example_args``.

    Args:
        fun: a Python function of arrays (NumPy or ``symad.numpy`` operations).
        example_args: values (or anything with ``.shape``) fixing each argument's
            core shape; pytrees (tuples, lists, dicts) of them are allowed.
        name: the function's name in messages and LaTeX (default: ``fun.__name__``).

    Returns:
        The traced :class:`Function`.

    >>> import symad as sd
    >>> import numpy as np
    >>> F = sd.trace(lambda w: np.sum(w ** 2), np.zeros(2))
    >>> F.formula(expand=True), F(np.array([3.0, 4.0]))
    (w[0]**2 + w[1]**2, np.float64(25.0))
    """
    if isinstance(fun, Function):
        return fun
    if getattr(fun, "_is_symad_transform", False):
        return fun.trace(*example_args)
    name = name or function_name(fun)
    leaves, in_treedef = tree_flatten(tuple(example_args))
    names = argument_names(fun, len(example_args))
    paths = []
    for argument_name, child in zip(names, in_treedef.children):
        paths.extend(leaf_paths(child, argument_name))

    builder = GraphBuilder(name)
    builder.element_limit = MAX_SYMBOLIC_ELEMENTS  # for element-level reads of whole arrays
    taken = active_input_names()  # grows as inputs are added, instead of recomputed per leaf
    in_symbols = []
    for path, leaf in zip(paths, leaves):
        symbols = input_leaf(path, _shape_of(leaf), taken, complex=is_complex_leaf(leaf))
        for atom in leaf_atoms(symbols):
            builder.add_input(atom)
        in_symbols.append(symbols)

    with builder.active():
        tracers = [Tracer.of_atom(leaf_atoms(symbols)[0]) for symbols in in_symbols]
        try:
            result = fun(*tree_unflatten(in_treedef, tracers))
        except SymadError as error:
            pointed = library_equivalent(error, name) or explain_container_argument(
                error, name, names, in_treedef)
            if pointed is None:
                raise
            raise pointed.with_traceback(error.__traceback__) from None
        except ValueError as error:
            explained = explain_numpy_store(error, name)
            if explained is None:
                explained = explain_library_error(error, name)
                if explained is None:
                    raise
                raise explained from error
            # NumPy's ValueError keeps the line of the store; the TracingError behind
            # it ("converts a traced value to a Python number") is not the story here.
            error.__cause__ = None
            error.__suppress_context__ = True
            raise explained from error
        except Exception as error:
            explained = (explain_container_argument(error, name, names, in_treedef)
                         or library_equivalent(error, name) or explain_library_error(error, name))
            if explained is None:
                raise
            raise explained from error
        return finish_function(
            builder, name, in_treedef, in_symbols, result, list(builder.parameters.items())
        )


def derive(
    function: Function,
    name: str,
    build: Callable[[GraphBuilder, list, list], Any],
    extra_inputs: tuple[TreeDef, list[np.ndarray]] | None = None,
) -> Function:
    """A new Function computed from ``function``'s graph: the frame of every transform.

    The primal graph is replayed into a fresh builder over the same input
    symbols; ``build(builder, primal_nodes, output_atom_arrays)`` then records
    the derived quantities and returns them as a pytree of atom arrays.
    ``extra_inputs`` (a treedef and symbol arrays, e.g. tangents) become a
    second argument: the new Function is called as ``G(args, extra)``.
    """
    builder = GraphBuilder(name)
    builder.element_limit = MAX_SYMBOLIC_ELEMENTS  # for element-level reads of whole arrays
    in_symbols = list(function.in_symbols)
    in_treedef = function.in_treedef
    if extra_inputs is not None:
        extra_treedef, extra_symbols = extra_inputs
        in_treedef = TreeDef("tuple", (function.in_treedef, extra_treedef))
        in_symbols += list(extra_symbols)
    for symbols in in_symbols:
        for symbol in leaf_atoms(symbols):
            builder.add_input(symbol)
    for parameter, symbols in function.parameters:
        builder.parameters[parameter] = symbols
        for symbol in leaf_atoms(symbols):
            builder.add_input(symbol)

    with builder.active():
        env = replay(function.graph, builder, {})
        primal_nodes = list(builder.nodes)
        outputs = [substitute_atoms(atoms, env) if isinstance(atoms, np.ndarray) else env.get(atoms, atoms)
                   for atoms in function.output_atoms()]
        result = build(builder, primal_nodes, outputs)
    return finish_function(builder, name, in_treedef, in_symbols, result, function.parameters)


def finish_function(
    builder: GraphBuilder,
    name: str,
    in_treedef: TreeDef,
    in_symbols: Sequence[np.ndarray],
    result: Any,
    parameters: Sequence[tuple[Parameter, np.ndarray]] = (),
) -> Function:
    """Freeze ``builder`` into a Function whose outputs are ``result``, a pytree of atom arrays."""
    out_leaves, out_treedef = tree_flatten(result)
    # Transforms hand over arrays of atoms (or whole-array atoms) already; a traced
    # function returns tracers, Parameters or constants (converted inside the active trace).
    out_leaves = [_output_leaf(leaf) for leaf in out_leaves]
    flat_outputs = [atom for leaf in out_leaves for atom in leaf_atoms(leaf)]
    return Function(
        builder.finish(flat_outputs),
        name=name,
        in_treedef=in_treedef,
        in_symbols=in_symbols,
        out_treedef=out_treedef,
        out_shapes=[leaf_shape(leaf) for leaf in out_leaves],
        parameters=parameters,
        out_whole=[is_whole_leaf(leaf) for leaf in out_leaves],
    )


def _is_atom(value) -> bool:
    return value.__class__ is Node or value.__class__ is ArrayInput


def _output_leaf(leaf):
    """A result leaf as a graph leaf: one atom for a whole array, else an array of scalar atoms."""
    if isinstance(leaf, np.ndarray) and leaf.dtype == object:
        return leaf
    if _is_atom(leaf):  # a whole array, or a scalar node (kept as a 0-d array)
        return leaf if atom_shape(leaf) != () else scalar_array(leaf)
    if isinstance(leaf, (Tracer, Parameter)) or _is_atom(leaf):
        operand = as_operand(leaf) if not _is_atom(leaf) else leaf
        if not isinstance(operand, np.ndarray) and atom_shape(operand) != ():
            return operand
    return as_atoms(leaf)


# ---------------------------------------------------------------------------
# Names and shapes of what the user passes (the leaves themselves: symad.leaves)
# ---------------------------------------------------------------------------


def is_array_graph(graph: Graph) -> bool:
    """True if the graph has array nodes or uses an array input whole (it needs the array compiler)."""
    for node in graph.nodes:
        if node.shape:
            return True
        for atom in node.args:
            if atom.__class__ is ArrayInput:
                return True
    return any(atom_shape(atom) != () for atom in graph.outputs)


def function_name(fun: Any) -> str:
    """A readable name for a user's callable."""
    if isinstance(fun, Function):
        return fun.name
    name = getattr(fun, "__name__", None)
    if name is None:
        name = type(fun).__name__
    return name


def argument_names(fun: Callable, count: int) -> list[str]:
    """Names for ``count`` positional arguments, taken from the Python signature."""
    try:
        parameters = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):  # builtins and ufuncs have no signature
        parameters = []
    names: list[str] = []
    for parameter in parameters:
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
        elif parameter.kind == parameter.VAR_POSITIONAL:
            names.extend(f"{parameter.name}{i}" for i in range(count - len(names)))
            break
    if len(names) < count:
        default = ["x"] if count == 1 else [f"x{i}" for i in range(count)]
        names = names + default[len(names):]
    return names[:count]


def _shape_of(value: Any) -> tuple:
    if isinstance(value, (Tracer, Parameter)):
        return tuple(value.shape)
    return tuple(np.shape(value))


class Function:
    """A traced function: its Graph, argument structure and result structure.

    Call it to evaluate (NumPy arrays in, NumPy arrays out; extra leading
    dimensions are a batch), or call it on traced values inside another
    trace to inline it. Build one with :func:`trace` or ``transform.trace``.

    >>> import symad as sd
    >>> import numpy as np
    >>> F = sd.trace(lambda x1, x2: np.log(x1) + x1 * x2 - np.sin(x2), 2.0, 5.0)
    >>> F.inputs
    (x1, x2)
    >>> F.formula()
    x1*x2 + log(x1) - sin(x2)
    >>> float(F(2.0, 5.0))
    11.652071455223084
    """

    #: the default backend's tiers (symad.compile.tiers), made on the first default call; a
    #: class default too, so that a Function pickled before tiers existed loads and works
    _promotion = None

    def __init__(
        self,
        graph: Graph,
        *,
        name: str,
        in_treedef: TreeDef,
        in_symbols: Sequence[np.ndarray],
        out_treedef: TreeDef,
        out_shapes: Sequence[tuple],
        parameters: Sequence[tuple[Parameter, Any]] = (),
        out_whole: Sequence[bool] | None = None,
    ):
        self.graph = graph
        self.name = name
        self.in_treedef = in_treedef
        #: One entry per input leaf: an object array of scalar symbols (a scalar is 0-d), or an
        #: :class:`~symad.graph.ArrayInput` standing for a whole array.
        self.in_symbols = tuple(in_symbols)
        self.in_shapes = tuple(leaf_shape(s) for s in self.in_symbols)
        self.out_treedef = out_treedef
        self.out_shapes = tuple(tuple(s) for s in out_shapes)
        #: Per output leaf: True if it is one array atom (graph.outputs holds the atom), False
        #: if it is an array of scalar atoms (graph.outputs holds each element).
        self.out_whole = tuple(out_whole) if out_whole is not None else (False,) * len(self.out_shapes)
        self.parameters = tuple(parameters)
        self._evaluators: dict = {}
        self._promotion = None
        #: LaTeX labels of the output leaves (set by transforms, e.g. partial derivatives).
        self.output_labels: list[str] | None = None
        #: Per output leaf, ``(function name, variables)`` if it is a partial derivative (for labels).
        self.output_derivatives: list | None = None
        self._closes_over_trace: bool | None = None

    # -- structure -----------------------------------------------------------

    @property
    def inputs(self) -> Any:
        """The input symbols, in the structure of the arguments (arrays as ``sympy.Array`` of
        their element symbols ``x[0]``, ``x[1]``... made on request)."""
        return tree_unflatten(self.in_treedef, [to_sympy_value(leaf_elements(s)) for s in self.in_symbols])

    @property
    def parameter_symbols(self) -> dict:
        """``{Parameter: symbols}`` for the Parameters this function closes over."""
        return {parameter: to_sympy_value(leaf_elements(atom)) for parameter, atom in self.parameters}

    def output_atoms(self) -> list:
        """Per output leaf: an object array of scalar atoms, or the one atom of a whole array."""
        leaves, start = [], 0
        for shape, whole in zip(self.out_shapes, self.out_whole):
            if whole:
                leaves.append(self.graph.outputs[start])
                start += 1
                continue
            count = math.prod(shape)
            flat = np.empty(count, dtype=object)
            flat[:] = list(self.graph.outputs[start:start + count])
            leaves.append(flat.reshape(shape))
            start += count
        return leaves


    @property
    def closes_over_trace(self) -> bool:
        """True if the graph uses values of an enclosing trace (it then only inlines)."""
        if self._closes_over_trace is None:
            self._closes_over_trace = bool(self.graph.free_symbols())
        return self._closes_over_trace

    def trace(self, *args) -> Function:
        """A Function is already traced: ``F.trace(...)`` is ``F``."""
        return self

    def __repr__(self) -> str:
        return (
            f"<symad.Function {self.name!r}: {len(self.graph.inputs)} inputs, "
            f"{len(self.graph.nodes)} nodes, {len(self.graph.outputs)} outputs>"
        )

    # -- the formula side ------------------------------------------------------

    def expand(self) -> Function:
        """The per-element view: this Function with every array taken apart into its elements.

        Array inputs become the symbols of their elements (``x[0]``, ``x[1]``...) and
        each array node the scalar nodes of its elements, as a trace written element
        by element would give (:func:`unroll`). It grows with the
        number of elements, up to ``MAX_SYMBOLIC_ELEMENTS`` per array.

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: np.sum(x ** 2), np.zeros(2)).expand().formula()
        x[0]**2 + x[1]**2
        """
        return unroll(self)

    def formula(self, *, max_size: float | None = None, max_depth: float | None = None,
                expand: bool = False, simplify: bool = False, numbers: str = "auto") -> Any:
        """The outputs as SymPy expressions, shared subexpressions inlined.

        A scalar output is a ``sympy.Expr``, an array output a ``sympy.Array``
        of the same shape; several outputs keep the function's structure. An
        array program (:attr:`is_array_program`) gives each whole array output
        as one expression in index notation instead (``Indexed`` elements, free
        indices :attr:`index_symbols`, ``Sum`` over bound ones; see
        :mod:`symad.export.index_notation`); ``expand=True`` gives its
        per-element view, a ``sympy.Array`` of the elements' formulas.
        With ``simplify=True``, the expressions :meth:`latex` prints (the
        display simplifier's, :mod:`symad.export.display`), temporaries written
        out, numbers in the block's style (``numbers``: "auto", "fractions" or
        "decimals"); the default gives the graph's own expressions. (Index
        notation is printed as built: the simplifier works on programs of scalars.)

        Inlining copies every shared value into each of its uses, so the tree
        can be exponentially larger than the graph. Its size is estimated
        from the graph first (a linear count, no SymPy work); past the budget
        ``ExportError`` says how large it would be and points to :meth:`cse`
        and :meth:`latex`, which keep shared values shared.

        Args:
            max_size: the most operations to build (default
                ``symad.inlining.MAX_FORMULA_SIZE``, 2,500: SymPy takes about
                0.4-2.5 s for that many); ``math.inf`` for no limit.
            max_depth: the deepest nesting to build (default
                ``symad.inlining.MAX_FORMULA_DEPTH``, 100: SymPy prints deeper
                trees only with a raised ``sys.setrecursionlimit``).

        >>> import symad as sd
        >>> import numpy as np
        >>> def chain(x):
        ...     for _ in range(40):
        ...         x = np.sin(x) + 0.001 * x
        ...     return x
        >>> sd.grad(chain).trace(0.3).formula()
        Traceback (most recent call last):
        ...
        symad.errors.ExportError: formula(grad(chain)): the inlined formula would have ...
        >>> himmelblau = lambda x, y: (x**2 + y - 11)**2 + (x + y**2 - 7)**2
        >>> sd.hessian(himmelblau, (0, 1)).trace(1.0, 2.0).formula(simplify=True)[0]
        (12*x**2 + 4*y - 42, 4*x + 4*y)
        """
        return views.formula(self, max_size=max_size, max_depth=max_depth, expand=expand,
                             simplify=simplify, numbers=numbers)

    def cse(self, *, expand: bool = False) -> tuple[list[tuple[sympy.Symbol, sympy.Basic]], Any]:
        """The shared-subexpression program, in the form ``sympy.cse`` returns.

        Nodes used once are inlined into their consumer; nodes used more than
        once become assignments ``x0, x1, ...`` (a prefix that no input uses),
        and so does a node whose inlined expression would nest
        ``symad.inlining.MAX_FORMULA_DEPTH`` (100) operations deep, so that
        no expression is deeper than SymPy can print: the program grows
        linearly with the graph, whatever its shape.
        Returns ``(assignments, outputs)``: ``assignments`` a list of
        ``(symbol, expression)`` pairs in order, ``outputs`` a list with one
        entry per output leaf (an expression, or a ``sympy.Array``), exactly
        as ``sympy.cse`` returns for a list of expressions. In an array
        program a shared array is an indexed assignment ``(x0[i], ...)`` and
        the outputs are as :meth:`formula` gives them; ``expand=True`` gives
        the per-element program.

        >>> import symad as sd
        >>> import numpy as np
        >>> sd.trace(lambda t: np.sin(t) ** 2 + np.sin(t), 0.0).cse()
        ([(x0, sin(t))], [x0**2 + x0])
        """
        return views.cse(self, expand=expand)

    @property
    def index_symbols(self) -> Any:
        """The free index symbols of an array program's ``formula()``, per output leaf.

        A whole array output is one indexed expression in ``i, j, ...`` (one
        per axis, in order; integer SymPy symbols, so substitute these, not
        ``sympy.Symbol("i")``); a scalar output, or one built element by
        element, has ``()``. See :mod:`symad.export.index_notation`.

        >>> import symad as sd, numpy as np
        >>> F = sd.trace(lambda x: np.sin(x[1:]), np.zeros(4))
        >>> (i,) = F.index_symbols
        >>> F.formula(), F.formula().subs(i, 0)
        (sin(x[i + 1]), sin(x[1]))
        """
        from symad.export.index_notation import index_symbols

        return index_symbols(self)

    @property
    def formula_constants(self) -> dict:
        """``{IndexedBase: ndarray}``: the constant arrays an array program's ``formula()`` names.

        >>> import symad as sd, numpy as np
        >>> sd.trace(lambda x: x @ np.array([[1.0, 2.0], [3.0, 4.0]]), np.zeros(2)).formula_constants
        {c: array([[1., 2.],
               [3., 4.]])}
        """
        from symad.export.index_notation import formula_constants

        return formula_constants(self)

    def latex(self, **options) -> str:
        """LaTeX of the program: one ``aligned`` block, shared temporaries then outputs.

        Options (see :func:`symad.export.latex.function_latex`): ``output_names``,
        ``temporaries="t"``, ``inline_below``, ``max_inline``, ``matrix="bmatrix"``,
        ``max_denominator``, plus SymPy ``latex()`` settings (``mul_symbol="dot"``).
        An array program prints in index notation, one line per kept array
        node (``t_{i} = ...``, ``\\sum_{k} X_{i k} W_{k j}``); ``expand=True``
        prints its elements one by one.

        >>> import symad as sd
        >>> import numpy as np
        >>> print(sd.trace(lambda k, d: 0.5 * k * (d - 1.0) ** 2, 1.0, 2.0).latex())
        \\begin{aligned}
        f &= \\frac{k \\left(d - 1\\right)^{2}}{2}
        \\end{aligned}
        """
        from symad.export.latex import function_latex

        expand = options.pop("expand", False)
        return function_latex(self.expand() if expand else self, **options)

    def _repr_latex_(self) -> str:
        """The LaTeX for notebooks (Jupyter renders ``aligned`` in display math)."""
        return f"$\\displaystyle {self.latex()}$"

    def sparsity(self):
        """The structural non-zero pattern of the outputs w.r.t. the inputs: a ``scipy.sparse`` matrix.

        Rows are the flattened outputs, columns the flattened inputs (in the
        order of ``graph.inputs``: the arguments, then any Parameters); entry
        ``(o, i)`` is 1 where output ``o`` depends on input ``i`` at all,
        read off the graph without evaluating anything. Array nodes pass
        their patterns on whole, through their index maps
        (:mod:`symad.transforms.sparsity`): nothing is unrolled, so the
        pattern of a 200 x 200 grid's gradient comes from its 20 nodes.

        >>> import symad as sd
        >>> import numpy as np
        >>> sd.trace(lambda v: v[1:] * v[:-1], np.zeros(3)).sparsity().toarray().tolist()
        [[1, 1, 0], [0, 1, 1]]
        """
        return views.sparsity(self)

    def to_c(self, name: str | None = None):
        """C99 source and header of a function computing every output (see :mod:`symad.export.c`).

        Returns a :class:`~symad.export.c.CCode` ``(source, header)``; the
        function is ``void name(const double *in, double *out)`` with inputs
        and outputs flattened in order (the header's comment lists them).

        >>> import symad as sd
        >>> code = sd.trace(lambda x: x * x + 1.0, 0.0).to_c("square_plus_one")
        >>> print(code.header.splitlines()[-2])
        void square_plus_one(const double *in, double *out);
        """
        return views.to_c(self, name)

    def stats(self) -> dict:
        """Sizes of the graph: ``nodes`` (operations), ``inputs``, ``outputs``, ``operations``."""
        return views.stats(self)

    # -- the numeric side ---------------------------------------------------------

    def compile(self, backend: str = DEFAULT_BACKEND, *, num_threads: int | None = None,
                block_size: int | None = None, dps: int | None = None) -> Callable:
        """An evaluator of this function with ``backend`` (see ``sd.available_backends()``).

        Args:
            backend: ``"numexpr"`` (default), ``"numpy"``, or ``"numba"`` where installed;
                or a precision backend, which evaluates the same graph node by node:
                ``"mpmath"`` (results ``mpmath.mpf`` correct to ``dps`` digits at every
                node, object arrays for arrays) or ``"interval"`` (``mpmath.iv``
                intervals guaranteed to contain the exact values).
            num_threads: threads for this evaluator (default: ``sd.get_num_threads()``).
            block_size: points per block of the batch (default: chosen from the graph so
                all live temporaries of a block fit in 64 MiB).
            dps: the working precision of ``"mpmath"`` and ``"interval"``, in decimal
                digits (default: mpmath's current ``mp.dps``).

        The returned function has ``.note``: why its evaluator differs from what was
        asked, or ``""`` (numba falls back to numexpr for a primitive it cannot spell
        or a graph too large to compile quickly; the fall-back is also logged as a
        warning of the ``"symad"`` logger), and ``.cached_at``: for numba, the file
        beside which its machine code is cached on disk, so later sessions skip the
        compile (logged at INFO level), else None.

        >>> import symad as sd
        >>> import numpy as np
        >>> F = sd.trace(lambda x: np.sin(x) ** 2, 0.0)
        >>> f = F.compile("numpy", block_size=2)
        >>> f(np.array([0.0, np.pi / 2, np.pi / 2]))
        array([0., 1., 1.])
        """
        if backend in PRECISION_BACKENDS:
            if num_threads is not None or block_size is not None:
                raise CompileError(
                    f"{self.name}: num_threads and block_size are options of the float64 "
                    f"backends; the {backend} backend evaluates one point at a time")
            return make_precise_function(self, backend, dps)
        if dps is not None:
            raise CompileError(
                f"{self.name}: dps={dps} is the precision of the 'mpmath' and 'interval' "
                f"backends; the {backend} backend computes in float64 (or float32)")
        evaluator = self.evaluator(backend, np.float64)  # compile now, so errors surface here
        compiled = CompiledFunction(self, backend, num_threads, block_size)
        #: why the evaluator differs from what was asked ("" if it does not), e.g. numba
        #: falling back to numexpr; also logged as a warning of the "symad" logger
        compiled.note = evaluator.note
        #: where numba keeps this module and its machine code (None for other backends)
        compiled.cached_at = evaluator.cached_at
        return compiled

    def __getstate__(self) -> dict:
        # Pickled by its graph: the compiled modules are dropped and rebuilt on use.
        state = dict(self.__dict__)
        state["_evaluators"] = {}
        state["_promotion"] = None
        return state

    def source(self, backend: str = DEFAULT_BACKEND, dtype: Any = "float64") -> str:
        """The generated Python module that evaluates this function with ``backend``.

        It is exactly the text the evaluator runs, and it runs without symad:
        ``run(*arrays)`` takes one broadcastable array per scalar input (in the
        order of ``F.graph.inputs``) and returns a tuple of arrays, one per
        scalar output. Names from the user appear only in comments.

        >>> import symad as sd
        >>> import numpy as np
        >>> F = sd.trace(lambda x, y: np.exp(x) * y, 0.0, 0.0)
        >>> namespace = {}
        >>> exec(F.source("numexpr"), namespace)
        >>> [float(v) for v in namespace["run"](0.0, 2.0)[0].reshape(-1)]
        [2.0]
        """
        return self.evaluator(backend, np.dtype(dtype).type).source

    def evaluator(self, backend: str, dtype: Any):
        """The compiled evaluator for ``backend`` and ``dtype``, made once and kept.

        >>> import symad as sd
        >>> F = sd.trace(lambda x: x ** 2, 1.0)
        >>> F.evaluator("numpy", float) is F.evaluator("numpy", float)
        True
        """
        if self.is_complex_program:
            dtype = np.complex128  # real inputs and outputs stay real inside (NumPy's dtypes)
        key = (backend, np.dtype(dtype).name)
        evaluator = self._evaluators.get(key)
        if evaluator is None:
            if self.is_array_program:
                from symad.compile import make_array_evaluator

                evaluator = make_array_evaluator(self.graph, backend, np.dtype(dtype).name, self.name)
            else:
                evaluator = make_evaluator(
                    scalar_input_graph(self.graph), backend, np.dtype(dtype).name, self.name)
            self._evaluators[key] = evaluator
        return evaluator

    @property
    def is_array_program(self) -> bool:
        """True if the graph holds array nodes (one node per whole-array operation)."""
        flag = self.__dict__.get("_is_array_program")
        if flag is None:
            # A complex program is evaluated by the array compiler (NumPy's complex dtypes).
            flag = is_array_graph(self.graph) or self.is_complex_program
            self.__dict__["_is_array_program"] = flag
        return flag

    @property
    def is_complex_program(self) -> bool:
        """True if an input, a Parameter or a node holds complex numbers.

        >>> import symad as sd
        >>> F = sd.trace(lambda x, z: (x * z, abs(z)), 1.0, 1j)
        >>> F.is_complex_program, F.complex_inputs, F.complex_outputs
        (True, (False, True), (True, False))
        """
        flag = self.__dict__.get("_is_complex_program")
        if flag is None:
            flag = self.__dict__["_is_complex_program"] = holds_complex(
                self.in_symbols, [symbols for _, symbols in self.parameters], self.graph)
        return flag

    @property
    def complex_inputs(self) -> tuple:
        """Per input leaf: True if it was traced complex."""
        return tuple(is_complex_atom(leaf_atoms(symbols)[0]) for symbols in self.in_symbols)

    @property
    def complex_outputs(self) -> tuple:
        """Per output leaf: True if it holds complex numbers."""
        return tuple(any(map(is_complex_atom, np.ravel(a))) for a in self.output_atoms())

    def __call__(self, *args) -> Any:
        return self._call(args, None)

    @property
    def tier(self) -> str:
        """The backend ``F(...)`` evaluates with now: ``"numexpr"``, or ``"numba"`` once this
        function has spent numba's compile time in numexpr and numba proved faster on its
        arguments (:mod:`symad.compile.tiers`; ``sd.config.promote = False`` keeps numexpr).

        >>> import symad as sd
        >>> sd.trace(lambda x: x * x, 1.0).tier
        'numexpr'
        """
        return DEFAULT_BACKEND if self._promotion is None else self._promotion.backend

    def _call(self, args: tuple, backend: str | None, options: dict | None = None) -> Any:
        """Evaluate (or record, inside a trace) on ``args``; ``backend`` None: the default,
        whose tier may change (:mod:`symad.compile.tiers`)."""
        leaves, treedef = tree_flatten(tuple(args))
        if treedef != self.in_treedef:
            raise TracingError(structure_mismatch_message(self.name, treedef, self.in_treedef))
        # Inside a trace, a function whose value depends on the trace (traced
        # arguments, Parameters, values it closes over) is recorded, not evaluated.
        if current_builder() is not None and (
            self.closes_over_trace
            or self.parameters
            or any(isinstance(leaf, (Tracer, Parameter)) for leaf in leaves)
        ):
            return self._inline(leaves)
        if any(is_dask_array(leaf) for leaf in leaves):
            return evaluate_dask(self, leaves, backend or DEFAULT_BACKEND, options or {})
        if backend is None:
            return self._evaluate_by_tier(leaves)
        return self._evaluate(leaves, backend, options or {})

    def _evaluate_by_tier(self, leaves: list) -> Any:
        """A default call: numexpr, or numba once this function is hot (symad.compile.tiers)."""
        if config.promote_enabled() is False:
            return self._evaluate(leaves, DEFAULT_BACKEND, {})
        serves = (False if self.is_array_program or len(self.graph.nodes) < 1000  # at once
                  else call_goes_to_tape(self.graph, self.in_shapes, leaves))
        if serves:
            return self._evaluate(leaves, "tape", {})
        promotion = self._promotion
        if promotion is None:
            from symad.compile.tiers import Promotion, early_trial, second_tier

            nodes, arrays = len(self.graph.nodes), self.is_array_program
            promotion = self._promotion = Promotion(self.name, nodes, second_tier(nodes, arrays),
                                                    early_trial(self.graph, self.name, arrays))
        if promotion.decided or (serves is None and promotion.target == "tape"):
            # Settled, or too many points to time the tape on: no timing.
            return self._evaluate(leaves, promotion.backend, {})
        # Calls time alike when their arguments have the same shapes and types.
        key = tuple((getattr(leaf, "shape", None), getattr(leaf, "dtype", type(leaf)))
                    for leaf in leaves)
        return promotion.run(lambda backend: self._evaluate(leaves, backend, {}), key,
                             self._serving_backend)

    def _serving_backend(self, backend: str) -> str:
        """The backend whose module serves ``backend`` here (numba may have fallen back)."""
        served = {evaluator.backend for (asked, _), evaluator in self._evaluators.items()
                  if asked == backend}
        return served.pop() if len(served) == 1 else backend

    def _inline(self, leaves: list) -> Any:
        """Record this function's graph into the active trace, applied to ``leaves``."""
        builder = current_builder()
        bindings: dict = {}
        for leaf, symbols in zip(leaves, self.in_symbols):
            bind_input(builder, bindings, symbols, as_operand(leaf), self.name)
        for parameter, symbols in self.parameters:
            bind_input(builder, bindings, symbols, builder_parameter_atom(builder, parameter), self.name)
        env = replay(self.graph, builder, bindings)
        out_leaves = [Tracer(substitute_atoms(atoms, env)) if isinstance(atoms, np.ndarray)
                      else Tracer.of_atom(env.get(atoms, atoms)) for atoms in self.output_atoms()]
        return tree_unflatten(self.out_treedef, out_leaves)

    def _evaluate(self, leaves: list, backend: str, options: dict) -> Any:
        """Evaluate on NumPy values: flatten the batch, run the compiled blocks, reshape."""
        complex_program = self.is_complex_program
        complex_inputs = self.complex_inputs if complex_program else ()
        arrays = [numeric_argument(leaf, self.name, i, complex_program and complex_inputs[i])
                  for i, leaf in enumerate(leaves)]
        parameter_values = []
        for parameter, symbols in self.parameters:
            if parameter.shape != leaf_shape(symbols):
                raise CompileError(
                    f"{self.name}: Parameter {parameter.name!r} now has shape {parameter.shape} "
                    f"but was traced with shape {leaf_shape(symbols)}; trace the function again")
            parameter_values.append(parameter.value)
        all_float32 = all(a.dtype == np.float32 for a in arrays + parameter_values)
        dtype = np.float32 if (arrays or parameter_values) and all_float32 else np.float64
        single = complex_program and single_precision(leaves, parameter_values)
        dtype = np.complex128 if complex_program else dtype
        batch_shapes = [_batch_shape(array.shape, core_shape, self.name)
                        for array, core_shape in zip(arrays, self.in_shapes)]
        batch = common_batch(batch_shapes, arrays, self.in_shapes, self.name)
        evaluate = self._evaluate_arrays if self.is_array_program else self._evaluate_scalars
        leaves = evaluate(arrays, batch_shapes, parameter_values, batch, dtype, backend, options)
        results = []
        complex_outputs = self.complex_outputs if complex_program else (True,) * len(leaves)
        for leaf, shape, is_complex in zip(leaves, self.out_shapes, complex_outputs):
            value = leaf.reshape(batch + tuple(shape))
            if not is_complex and value.dtype.kind == "c":  # a real output computed beside complex ones
                value = value.real.copy()
            value = to_single(value) if single else value  # NumPy's dtype
            results.append(value[()] if value.ndim == 0 else value)
        return tree_unflatten(self.out_treedef, results)

    def _evaluate_scalars(self, arrays: list, batch_shapes: list, parameter_values: list,
                          batch: tuple, dtype, backend: str, options: dict) -> list:
        """The output leaves of a scalar program, as ``(points, elements)`` arrays."""
        count = math.prod(batch)
        # Every argument becomes a matrix of (points, scalar inputs) -- one row when it
        # is the same for every point -- and every output leaf a (points, scalar
        # outputs) array that the evaluator fills in place.
        matrices = []
        for array, batch_shape, core_shape in zip(arrays, batch_shapes, self.in_shapes):
            flat = array.astype(dtype, copy=False).reshape(batch_shape + (math.prod(core_shape),))
            matrices.append(_points_matrix(flat, batch, count))
        for value in parameter_values:
            matrices.append(value.astype(dtype, copy=False).reshape(1, -1))

        evaluator = self.evaluator(backend, dtype)
        output_boolean = evaluator.output_is_boolean
        out_leaves, start = [], 0
        for shape in self.out_shapes:
            size = math.prod(shape)
            boolean = size > 0 and all(output_boolean[start:start + size])
            out_leaves.append(output_array((count, size), np.bool_ if boolean else dtype))
            start += size
        evaluator.evaluate_matrices(matrices, out_leaves, count, **options)
        return out_leaves

    def _evaluate_arrays(self, arrays: list, batch_shapes: list, parameter_values: list,
                         batch: tuple, dtype, backend: str, options: dict) -> list:
        """The output leaves of an array program: each argument as ``(points,) + core shape``,
        evaluated in one go."""
        count = math.prod(batch)
        values = []
        for array, batch_shape, core_shape in zip(arrays, batch_shapes, self.in_shapes):
            if array.dtype.kind != "c":  # in a complex program, a real input stays real
                array = array.astype(np.float64 if np.dtype(dtype).kind == "c" else dtype, copy=False)
            if math.prod(batch_shape) == 1:
                values.append(array.reshape((1,) + tuple(core_shape)))
            else:
                if batch_shape != batch:
                    array = np.broadcast_to(array, batch + tuple(core_shape))
                values.append(array.reshape((count,) + tuple(core_shape)))
        for value in parameter_values:
            values.append(value.astype(dtype, copy=False).reshape((1,) + value.shape))
        evaluator = self.evaluator(backend, dtype)
        from symad.compile import array_program_leaves

        return array_program_leaves(evaluator, values, count, self.out_shapes, self.out_whole, options)


class CompiledFunction:
    """``F.compile(backend)``: call it like ``F``; it pickles as ``F``'s graph and options."""

    def __init__(self, function: Function, backend: str, num_threads: int | None = None,
                 block_size: int | None = None):
        self.function, self.backend = function, backend
        self.options = {"num_threads": num_threads, "block_size": block_size}
        self.__name__ = function.name
        self.__doc__ = f"{function.name}, compiled for the {backend} backend."

    def __call__(self, *args):
        return self.function._call(args, self.backend, self.options)

    def __reduce__(self):
        return _recompile, (self.function, self.backend, self.options["num_threads"],
                            self.options["block_size"])

    def __repr__(self) -> str:
        return f"<symad compiled function {self.function.name!r} ({self.backend})>"


def _recompile(function: Function, backend: str, num_threads, block_size) -> CompiledFunction:
    return function.compile(backend, num_threads=num_threads, block_size=block_size)


def _points_matrix(flat: np.ndarray, batch: tuple, count: int) -> np.ndarray:
    """An argument's values as ``(count, size)``, or ``(1, size)`` if the same at every point.

    ``flat`` is the argument as ``its batch shape + (size,)``; a batch shape that
    only broadcasts against ``batch`` is expanded (a copy).
    """
    size = flat.shape[-1]
    if flat.size == size:  # one point's worth: shared by every point
        return flat.reshape(1, size)
    if flat.shape[:-1] != batch:
        flat = np.broadcast_to(flat, batch + (size,))
    return flat.reshape(count, size)


# ---------------------------------------------------------------------------
# Evaluation helpers: checking and shaping the numbers a Function is called on
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# The per-element view (Function.expand): arrays taken apart into their elements.
# Array inputs become the symbols of their elements (x[0], x[1], ...) and every
# array node the scalar nodes of its elements (the rules of symad.rules.unroll), as
# a trace written element by element would record; every layer that works on
# scalar graphs takes the result. It grows with the elements, so it is bounded by
# MAX_SYMBOLIC_ELEMENTS per array.
# ---------------------------------------------------------------------------


def unroll(function: Function) -> Function:
    """``function`` with its arrays taken apart into elements (itself if it has none whole)."""
    if not function.is_array_program and not any(
            atom.__class__ is ArrayInput for atom in function.graph.inputs):
        return function
    cached = function.__dict__.get("_unrolled")
    if cached is not None:
        return cached
    builder = GraphBuilder(function.name)
    builder.element_limit = MAX_SYMBOLIC_ELEMENTS
    in_symbols = []
    for leaf in function.in_symbols:
        if leaf.__class__ is ArrayInput:
            check_unrolled_size(leaf.size, f"the per-element view of {function.name}", builder)
        elements = leaf_elements(leaf)
        in_symbols.append(elements)
        for symbol in elements.reshape(-1):
            builder.add_input(symbol)
    parameters = []
    for parameter, atom in function.parameters:
        elements = leaf_elements(atom)
        parameters.append((parameter, elements))
        builder.parameters[parameter] = elements
        for symbol in elements.reshape(-1):
            builder.add_input(symbol)
    env: dict = {}
    for atom in function.graph.inputs:
        if atom.__class__ is ArrayInput:
            env[atom] = atom.elements()
    with builder.active():
        for node in function.graph.nodes:
            env[node] = _unrolled_node(builder, node, env)
        outputs = []
        for leaf in function.output_atoms():
            if isinstance(leaf, np.ndarray):
                out = np.empty(leaf.shape, dtype=object)
                for index in np.ndindex(leaf.shape):
                    out[index] = _element(env, leaf[index])
                outputs.append(out)
            else:
                outputs.append(_as_array(env.get(leaf, leaf)))
    result = finish_function(builder, function.name, function.in_treedef, in_symbols,
                             tree_unflatten(function.out_treedef, outputs), parameters)
    result.output_labels = function.output_labels
    result.output_derivatives = function.output_derivatives
    function.__dict__["_unrolled"] = result
    return result


def _element(env: dict, atom):
    value = env.get(atom, atom) if atom.is_Symbol else atom
    return value[()] if isinstance(value, np.ndarray) else value


def _as_array(value) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else scalar_array(value)


def _unrolled_node(builder: GraphBuilder, node, env: dict):
    """The node's value in the unrolled graph: a scalar atom, or an object array of them."""
    operands = [env.get(a, a) if a.is_Symbol else a for a in node.args]
    if node.shape and node.primitive.kind != "linear":  # one scalar node per element
        check_unrolled_size(int(np.prod(node.shape)), "the per-element view", builder)
    if node.primitive.elementwise:
        if not any(isinstance(o, np.ndarray) for o in operands):
            return builder.record(node.primitive, operands, node.params)
        traced = [Tracer(o) if isinstance(o, np.ndarray) else Tracer.of_atom(o) for o in operands]
        return apply(node.primitive, *traced, params=node.params).atoms
    from symad.rules.unroll import UNROLL

    rule = UNROLL.get(node.primitive)
    if rule is None:  # a loop: its steps are not unrolled into scalars
        from symad.errors import ExportError

        raise ExportError(f"the per-element view of {builder.function_name!r} has no form for "
                          f"{node.primitive.name!r}: {UNROLL.reason_missing(node.primitive)}; use "
                          "formula() or latex() without expand=True")
    result = rule(*[_as_array(o) for o in operands], **dict(node.params))
    result = np.asarray(result, dtype=object)
    assert result.shape == atom_shape(node), (node.primitive.name, result.shape, node.shape)
    return result[()] if result.ndim == 0 else result
