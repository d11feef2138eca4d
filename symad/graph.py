"""The Graph: an SSA list of operations, each a small SymPy expression on request.

A :class:`Graph` is what every other layer works on. Its nodes are recorded
in topological order; each node applies one :class:`~symad.ir.primitive.Primitive`
to *atoms* -- input symbols, earlier nodes, or exact constants -- so
:meth:`Graph.assignments`' ``(symbol, expression)`` pairs have exactly the
shape ``sympy.cse`` returns. Nothing here is a nested tree: a derivative that
refers to a subexpression refers to its node, which is why derivatives do not
swell. A node is a plain Python object; its SymPy symbol and expression are
made only when asked for (:class:`Node`).

:class:`GraphBuilder` records nodes. It hash-conses (the same primitive on the
same operands returns the existing node), folds constants exactly, and
applies each primitive's own algebraic identities (``x * 1 -> x``), so that
structural zeros of derivatives stay exact zeros and shared subexpressions
stay shared.

>>> import sympy
>>> from symad.primitives import sin_p, mul_p
>>> x = sympy.Symbol("x")
>>> builder = GraphBuilder("demo")
>>> builder.add_input(x)
>>> s = builder.record(sin_p, (x,))
>>> builder.record(sin_p, (x,)) is s         # hash-consed
True
>>> builder.record(mul_p, (s, sympy.Integer(1))) is s   # x * 1 -> x
True
>>> graph = builder.finish([builder.record(mul_p, (s, s))])
>>> [str(expr) for _, expr in graph.assignments()] == ["sin(x)", f"{s}**2"]
True
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import math
import threading
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import sympy

from symad.atoms import (
    COMPLEX_SEEN,
    active_builders,
    constant_value,
    current_builder,
    is_complex_atom,
    is_constant,
    is_zero_constant,
    note_complex,
    number_atom,
)
from symad.gc_pause import garbage_collection_paused
from symad.ir.primitive import BUILDER_ROLES

__all__ = [
    "ArrayInput",
    "atom_shape",
    "Node",
    "Graph",
    "GraphBuilder",
    "active_builders",
    "current_builder",
    "garbage_collection_paused",
    "live_graph",
    "is_constant",
    "is_zero_constant",
    "number_atom",
    "constant_value",
]


# ---------------------------------------------------------------------------
# Atoms: what a node's operands may be
# ---------------------------------------------------------------------------


def _is_foldable(value: sympy.Basic) -> bool:
    """A folded constant is kept only if it is a finite real number or a boolean.

    ``1/0`` (zoo), ``log(-1)`` (complex) and NaN are left as nodes so that the
    numeric backends produce NumPy's inf/nan exactly as they would at run time.
    """
    if isinstance(value, sympy.logic.boolalg.BooleanAtom):
        return True
    if not isinstance(value, sympy.Expr) or not value.is_number:
        return False
    return bool(value.is_extended_real) and bool(value.is_finite)


def _exact_identity(constant: sympy.Basic):
    """A cheaply hashed value equal for two constants exactly when they are the same number.

    ``sympy.Float.__hash__`` converts to a Python float at every call; the
    mantissa-exponent tuple hashes as plain ints.
    """
    if constant.is_Float:
        return ("Float", constant._mpf_)
    if constant.is_Rational:  # Integer included
        return ("Rational", constant.p, constant.q)
    return constant  # pi, sqrt(2), booleans: rare, hashed by SymPy


# ---------------------------------------------------------------------------
# Nodes and graphs
# ---------------------------------------------------------------------------


class NodeSymbol(sympy.Dummy):
    """The SymPy face of a graph node: a ``sympy.Dummy`` made about 5x faster, on request.

    A graph's atoms are :class:`Node` objects, which SymPy does not know; a
    node's ``NodeSymbol`` is made when something asks for it
    (:attr:`Node.sympy_symbol`, ``Node.expr``, ``Graph.assignments``), never
    by recording, differentiating or compiling.

    ``Dummy(name)`` builds a fresh assumption base for every symbol (sorting
    and deducing facts); node symbols all carry the same assumptions (none but
    commutativity), so they share those of one template Dummy. Printing and
    pickling are the Dummy's own. Equality and hashing are by identity, at C
    speed: each node symbol stands for one node. Its ``dummy_index`` is its
    node's number (:attr:`Node.number`), so SymPy orders node symbols as the
    graph orders its nodes.

    >>> a, b = NodeSymbol("n0"), NodeSymbol("n0")
    >>> a == b, a == a, isinstance(a, sympy.Dummy), (a + 1).free_symbols == {a}
    (False, True, True, True)
    >>> a.dummy_index < b.dummy_index
    True
    """

    __slots__ = ()
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__

    def __new__(cls, name: str, dummy_index: int | None = None, **assumptions):
        if dummy_index is not None:  # unpickled: keep the number, so the order holds
            _number_past(dummy_index)
        if assumptions or _SHARED_ASSUMPTIONS is None:  # not a plain node name: SymPy's way
            return sympy.Dummy.__new__(cls, name, dummy_index, **assumptions)
        return _plain_node_symbol(cls, name, dummy_index)


def _plain_node_symbol(cls, name: str, dummy_index: int | None = None) -> NodeSymbol:
    """A node symbol with the shared assumptions, made without SymPy's constructors.

    ``sympy.Basic.__new__``'s three assignments are made here: its call chain was
    a third of a node symbol's cost, and a graph's assignments make one per node.
    """
    symbol = _object_new(cls)
    symbol._mhash = None
    symbol._args = ()
    symbol.name = name
    symbol._assumptions, symbol._assumptions_orig, symbol._assumptions0 = _SHARED_ASSUMPTIONS
    # The number of a node symbol is its node's (from the counter below); one made
    # by hand gets a new one. Not Dummy's own counter: Dummy counts in a class
    # attribute, and every write to a class attribute invalidates CPython's
    # attribute cache for the class and its subclasses.
    symbol.dummy_index = next(_NODE_NUMBERS) if dummy_index is None else dummy_index
    return symbol


_object_new = object.__new__

_FIRST_NUMBER = 2**40  # node numbers sort after any count of other symbols a builder keeps
_NODE_NUMBERS = itertools.count(_FIRST_NUMBER)
_SYMBOLS_LOCK = threading.Lock()


def _number_past(number: int) -> None:
    """Number later nodes after ``number``, one an unpickled node (or its symbol) keeps.

    Unpickled nodes keep their numbers, so the operands a graph stores stay in
    canonical order whatever order pickle met its nodes in; nodes made
    afterwards sort after them and never share a number with them.

    The counter is advanced, never replaced: a thread recording meanwhile may
    hold it, and a replaced counter would hand out numbers the new one hands
    out again. The skipped numbers are consumed in C (``islice`` drained by a
    zero-length deque), which no other Python thread interleaves with; it
    costs about 15 ns per number skipped, and only a pickle from another
    process that made more nodes skips any.
    """
    upcoming = next(_NODE_NUMBERS)
    if number >= upcoming:
        collections.deque(itertools.islice(_NODE_NUMBERS, number - upcoming + 1), maxlen=0)


def shared_assumptions(template: sympy.Symbol) -> tuple | None:
    """The assumption attributes of ``template``, a symbol with no assumptions, to share.

    Every symbol made with no assumptions holds equal ones, and the facts SymPy
    deduces into them later hold for all such symbols alike, so many symbols can
    share one set instead of building it each time (node symbols, the input
    symbols of array arguments). None where this SymPy lays symbols out otherwise.
    """
    names = ("_assumptions", "_assumptions_orig", "_assumptions0")
    if not all(hasattr(template, name) for name in names) or template._assumptions_orig:
        return None
    return tuple(getattr(template, name) for name in names)


_SHARED_ASSUMPTIONS = shared_assumptions(sympy.Dummy("template"))
# From a template made by SymPy's uncached constructor: no user symbol shares them.
_PLAIN_SYMBOL_ASSUMPTIONS = (
    shared_assumptions(sympy.Symbol.__xnew__(sympy.Symbol, "template"))
    if hasattr(sympy.Symbol, "__xnew__") else None)


class Node:
    """One operation, ``primitive(*args, **params)``; the node is also the atom naming its value.

    A node is a plain Python object of seven slots, and it stands for itself
    wherever atoms go: later nodes' ``args``, a graph's outputs, the tracer's
    arrays, hash-consing keys. It says ``is_Symbol`` (an atom is an input
    symbol, a node or an exact constant, and the layers that take atoms ask
    that), compares and hashes by identity, and carries two numbers:

    * ``number``, from one counter in order of creation, which orders nodes as
      operands of commutative primitives (:meth:`GraphBuilder.sort_key`), the
      same in every builder;
    * ``position``, its index in the builder that recorded it (-1 for none),
      where :meth:`GraphBuilder.node_of` looks for it.

    Its name, ``n<k>``, is its number counted from the first node of the
    process: unique, so a program that mixes nodes of several builders (a
    nested gradient keeps the inner one's nodes; an inner trace reads an
    outer one's values) never names two nodes alike.

    Its SymPy side is made only when asked for: :attr:`sympy_symbol` (a
    :class:`NodeSymbol`) and :attr:`expr`, the operation as a small SymPy
    expression over its operands' symbols. ``Graph.assignments`` asks for
    both; formulas, ``cse()`` programs and LaTeX build expressions from the
    operands' (:meth:`expr_with`) and need neither. A node is deliberately not
    something SymPy converts (it has no ``_sympy_``): ``1.0 == node`` is False
    at once instead of making a symbol to compare, and a node that reaches SymPy
    unconverted fails loudly. So recording, differentiating and compiling make
    no SymPy object per node, and a graph of 10^6 nodes holds none.

    >>> import sympy
    >>> from symad.primitives import sin_p
    >>> x = sympy.Symbol("x")
    >>> node = Node(sin_p, (x,), position=0)
    >>> node.is_Symbol, node.expr, sympy.Float(1.0) == node
    (True, sin(x), False)
    >>> str(node) == str(node.sympy_symbol) == f"_n{node.number - _FIRST_NUMBER}"
    True
    """

    __slots__ = ("primitive", "args", "params", "number", "position", "shape", "_expr", "_symbol",
                 "complex")

    # An atom is an input symbol, a node or a constant; a node answers what is asked of atoms
    # as a symbol does.
    is_Symbol = True
    is_Number = is_number = is_Float = is_Rational = is_Integer = False

    def __init__(self, primitive, args: tuple, params: tuple = (), position: int = -1,
                 number: int | None = None, shape: tuple = ()):
        self.primitive = primitive
        self.args = args
        self.params = params
        self.number = next(_NODE_NUMBERS) if number is None else number
        self.position = position
        #: The node's array shape; ``()`` for a scalar (every node of a scalar program).
        self.shape = shape
        self._expr = None
        self._symbol = None
        #: True if the node holds complex values (asked only once complex values were traced).
        self.complex = COMPLEX_SEEN[0] and complex_result(primitive, args, params)

    @property
    def symbol(self) -> Node:
        """The atom that names this node's value: the node itself."""
        return self

    @property
    def name(self) -> str:
        """``n<k>``, unique in the process: the name of its SymPy symbol (printed ``_n<k>``, a Dummy)."""
        return f"n{self.number - _FIRST_NUMBER}"

    @property
    def sympy_symbol(self) -> NodeSymbol:
        """The SymPy symbol that stands for this node in SymPy expressions (made on first request)."""
        symbol = self._symbol
        if symbol is None:
            # Under a lock: two threads asking at once (two Graph.assignments() of one
            # graph) must get the same symbol, or expressions would use one that no
            # assignment defines.
            with _SYMBOLS_LOCK:
                symbol = self._symbol
                if symbol is None:
                    symbol = self._symbol = NodeSymbol(self.name, self.number)
        return symbol

    @property
    def expr(self) -> sympy.Basic:
        """The node as a small SymPy expression over its operands' symbols (built lazily)."""
        if self._expr is None:
            self._expr = self.expr_with({})
        return self._expr

    def expr_with(self, replacement: dict) -> sympy.Basic:
        """The node's SymPy expression with the operands in ``replacement`` replaced.

        ``replacement`` maps atoms (nodes, input symbols) to SymPy expressions;
        other nodes appear as their symbols. How formulas are inlined: one
        call per node, in topological order, with no ``xreplace`` walk.
        """
        operands = []
        for atom in self.args:
            if atom.is_Symbol:
                value = replacement.get(atom)
                atom = sympy_form(atom) if value is None else value
            operands.append(atom)
        return self.primitive.to_sympy(tuple(operands), dict(self.params))

    def __reduce__(self):
        # Pickled as its fields, operands included. A graph pickles its nodes in
        # topological order, so each node's operands are already in the pickle and
        # pickling a graph (or a Function) never recurses along a chain. A node pickled
        # on its own, before its graph, brings its operands recursively: pickle graphs,
        # not atoms. Its symbol, if made, travels along, so that SymPy expressions
        # pickled with the graph still name its nodes.
        return _restore_node, (self.primitive, self.args, self.params, self.position, self.number,
                               self._symbol, self.shape, self.complex)

    def __str__(self) -> str:
        return "_" + self.name

    __repr__ = __str__


def _restore_node(primitive, args: tuple, params: tuple, position: int, number: int,
                  symbol: NodeSymbol | None = None, shape: tuple = (), complex_flag=False) -> Node:
    """An unpickled node: its number (and symbol, if it had one) kept, later nodes numbered after it."""
    _number_past(number)
    node = Node(primitive, args, params, position, number, shape)
    node._symbol = symbol
    if complex_flag:
        note_complex()
        node.complex = True
    return node


def complex_result(primitive, args: tuple, params: tuple) -> bool:
    """True if ``primitive`` applied to ``args`` gives complex values (its ``complex_values``);
    a TracingError if the primitive is defined on real values only and an operand is complex.

    >>> from symad.primitives import exp_p, sign_p
    >>> z = sympy.Symbol("z", complex=True)
    >>> complex_result(exp_p, (z,), ()), complex_result(exp_p, (sympy.Symbol("x"),), ())
    (True, False)
    >>> complex_result(sign_p, (z,), ())
    Traceback (most recent call last):
    ...
    symad.errors.TracingError: sign of a complex value: symad traces sign on real values only (it has no complex form with JAX's conventions here); apply it to the real and imaginary parts (np.real(z), np.imag(z)) or to np.abs(z)
    """
    rule = primitive.complex_values
    if rule == "complex":
        return True
    if callable(rule):
        return rule(dict(params))
    if not any(is_complex_atom(atom) for atom in args):
        return False
    if rule == "follow":
        return True
    if rule == "real":
        return False
    from symad.errors import TracingError

    builder = current_builder()
    where = f"function {builder.function_name!r}: " if builder is not None else ""
    raise TracingError(
        f"{where}{primitive.name} of a complex value: symad traces {primitive.name} on real "
        "values only (it has no complex form with JAX's conventions here); apply it to the real "
        "and imaginary parts (np.real(z), np.imag(z)) or to np.abs(z)")


def sympy_form(atom):
    """``atom`` as SymPy sees it: a node's symbol, an array input's ``IndexedBase``, or the atom
    itself (input symbol, constant)."""
    cls = atom.__class__
    if cls is Node:
        return atom.sympy_symbol
    if cls is ArrayInput:
        return atom.indexed
    return atom


def uncached_symbol(name: str) -> sympy.Symbol:
    """``sympy.Symbol(name)`` (an equal symbol), made without SymPy's cache.

    The cache holds 1,000 entries: past that every new name evicts one, and
    the 10^5 symbols of an array argument took 4 us each (0.4 s). Made here
    the way SymPy's uncached constructor makes it, with the assumptions of
    a plain symbol shared (as node symbols share theirs): 0.5 us, and the
    user's cache is left as it was.

    >>> uncached_symbol("x[0]") == sympy.Symbol("x[0]")
    True
    """
    if _PLAIN_SYMBOL_ASSUMPTIONS is None:  # SymPy lays symbols out otherwise: its own way
        return sympy.Symbol(name)
    symbol = sympy.Expr.__new__(sympy.Symbol)
    symbol.name = name
    symbol._assumptions, symbol._assumptions_orig, symbol._assumptions0 = _PLAIN_SYMBOL_ASSUMPTIONS
    return symbol


def fresh_symbols(inputs: Sequence[sympy.Symbol]):
    """``x0, x1, ...`` with a prefix no input uses, in SymPy or in LaTeX.

    ``x0`` and the array element ``x[0]`` both print as ``x_{0}``, so a prefix
    is free only if no input's base name is the prefix or the prefix plus digits.
    """
    bases = {symbol.name.split("[")[0] for symbol in inputs}

    def taken(prefix: str) -> bool:
        return any(base == prefix or (base.startswith(prefix) and base[len(prefix):].isdigit())
                   for base in bases)

    prefix = next((p for p in ("x", "t", "c", "u", "v", "w") if not taken(p)), None)
    if prefix is None:
        prefix = "x" + "_" * max(len(b) for b in bases)
    # Symbols equal to sympy.Symbol(name), made without SymPy's cache: a program of
    # 10^4 assignments would evict the user's cache and build each symbol's assumptions.
    names = {symbol.name for symbol in inputs}
    return (uncached_symbol(f"{prefix}{index}") for index in itertools.count()
            if f"{prefix}{index}" not in names)


def element_name(name: str, index: tuple) -> str:
    """The name of one element of an array called ``name``: ``x[3]``, ``w[0, 1]``."""
    return f"{name}[{', '.join(map(str, index))}]"


class ArrayInput:
    """An array argument (or Parameter) of a traced function: one atom for the whole array.

    Operations on the whole array record one node each with this atom as
    operand, whatever the array's size. Element-level code reads single
    elements: :meth:`element` gives the scalar input symbol ``x[i, j]`` of
    one element (made on request, once), which is an atom too, so a loop
    over elements records per-element scalar nodes exactly as a trace of
    scalars does. Like a node, it compares and hashes by identity.

    >>> x = ArrayInput("x", (2, 3))
    >>> x.element((1, 2)), x.shape, x.element((1, 2)) is x.element((1, 2))
    (x[1, 2], (2, 3), True)
    >>> x.element_index(x.element((1, 2)))
    (1, 2)
    """

    __slots__ = ("name", "shape", "_elements", "_index_of", "_indexed", "complex", "__weakref__")

    is_Symbol = True
    is_Number = is_number = is_Float = is_Rational = is_Integer = False

    def __init__(self, name: str, shape: tuple, complex: bool = False):
        self.name = name
        self.shape = tuple(int(size) for size in shape)
        #: True for a complex argument (its element symbols are made ``complex=True``).
        self.complex = complex
        if complex:
            note_complex()
        self._elements: dict = {}  # index tuple -> element symbol
        self._index_of: dict = {}  # element symbol -> index tuple
        self._indexed = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def element(self, index: tuple) -> sympy.Symbol:
        """The scalar input symbol of the element at ``index`` (a tuple of non-negative ints)."""
        symbol = self._elements.get(index)
        if symbol is None:
            name = element_name(self.name, index)
            symbol = sympy.Symbol(name, complex=True) if self.complex else uncached_symbol(name)
            self._elements[index] = symbol
            self._index_of[symbol] = index
        return symbol

    def elements(self):
        """Every element's symbol, as an object array of this input's shape (made on request)."""
        import numpy as np

        out = np.empty(self.shape, dtype=object)
        flat = out.reshape(-1)
        for position, index in enumerate(np.ndindex(self.shape)):
            flat[position] = self.element(index)
        return out

    def made_elements(self) -> list:
        """The element symbols made so far (those element-level code has read)."""
        return list(self._index_of)

    def element_index(self, symbol) -> tuple | None:
        """The index of ``symbol`` if it is one of this input's element symbols, else None."""
        return self._index_of.get(symbol)

    @property
    def indexed(self) -> sympy.IndexedBase:
        """The array as a ``sympy.IndexedBase`` (the formula side of index notation)."""
        if self._indexed is None:
            self._indexed = sympy.IndexedBase(self.name, shape=self.shape)
        return self._indexed

    def __reduce__(self):
        return _restore_array_input, (self.name, self.shape, tuple(self._elements.items()),
                                      self.complex)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"ArrayInput({self.name!r}, {self.shape})"


def _restore_array_input(name: str, shape: tuple, elements: tuple, complex: bool = False) -> ArrayInput:
    array_input = ArrayInput(name, shape, complex)
    for index, symbol in elements:
        array_input._elements[index] = symbol
        array_input._index_of[symbol] = index
    return array_input


def atom_shape(atom) -> tuple:
    """The shape of an atom: a node's or array input's own, ``()`` for scalars and constants."""
    cls = atom.__class__
    if cls is Node or cls is ArrayInput:
        return atom.shape
    return ()


def input_atoms(inputs: Iterable) -> set:
    """``inputs`` and the element symbols made of their array inputs: the atoms a graph takes in."""
    atoms = set(inputs)
    for atom in inputs:
        if atom.__class__ is ArrayInput:
            atoms.update(atom.made_elements())
    return atoms


class Graph:
    """Inputs, topologically ordered nodes, and output atoms.

    ``inputs`` are SymPy symbols; ``outputs`` are atoms (input symbols, nodes
    or constants). A graph never mutates after construction.
    """

    # Known already when the graph comes from live_graph's sweep, else found on first
    # request (also for graphs pickled before graphs kept them).
    _free_symbols: frozenset | None = None

    def __init__(self, inputs: Sequence[sympy.Symbol], nodes: Sequence[Node], outputs: Sequence,
                 free_symbols: Iterable | None = None):
        self.inputs = tuple(inputs)
        self.nodes = tuple(nodes)
        self.outputs = tuple(outputs)
        self._free_symbols = None if free_symbols is None else frozenset(free_symbols)

    def assignments(self) -> Iterator[tuple[sympy.Symbol, sympy.Basic]]:
        """``(symbol, expression)`` pairs in topological order."""
        for node in self.nodes:
            yield node.sympy_symbol, node.expr

    def free_symbols(self) -> set:
        """Atoms used by nodes or outputs that are neither constants, inputs nor its nodes.

        They appear when a function closes over the traced values of an
        enclosing trace; such a graph is only meaningful inside that trace.
        """
        if self._free_symbols is None:
            known = input_atoms(self.inputs) | set(self.nodes)
            used = {a for node in self.nodes for a in node.args if a.is_Symbol}
            used |= {a for a in self.outputs if a.is_Symbol}
            self._free_symbols = frozenset(used - known)
        return set(self._free_symbols)

    def use_counts(self) -> dict:
        """How many times each atom is used by nodes and outputs (a node: its uses)."""
        counts: dict = {}
        for node in self.nodes:
            for atom in node.args:
                counts[atom] = counts.get(atom, 0) + 1
        for atom in self.outputs:
            counts[atom] = counts.get(atom, 0) + 1
        return counts

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"<Graph: {len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs>"


def eliminate_dead_nodes(nodes: Sequence[Node], outputs: Iterable) -> list[Node]:
    """Keep only the nodes that the outputs depend on, in their original order."""
    return _sweep_live_nodes(nodes, outputs)[0]


def live_graph(inputs: Sequence[sympy.Symbol], nodes: Sequence[Node], outputs: Sequence) -> Graph:
    """The Graph of the ``nodes`` that ``outputs`` depend on (and knowing its free symbols).

    >>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
    >>> from symad.primitives import sin_p, cos_p
    >>> s, c = builder.record(sin_p, (x,)), builder.record(cos_p, (x,))
    >>> graph = live_graph(builder.inputs, builder.nodes, [c])
    >>> len(graph.nodes), graph.free_symbols()
    (1, set())
    """
    outputs = tuple(outputs)
    kept, used_outside = _sweep_live_nodes(nodes, outputs)
    # What the kept nodes and the outputs use but no kept node defines: inputs, or
    # values of an enclosing trace. Found by the sweep instead of a second walk of
    # the graph (Function.closes_over_trace asks of every traced function).
    used_outside.difference_update(input_atoms(inputs))
    return Graph(inputs, kept, outputs, free_symbols=used_outside)


def _sweep_live_nodes(nodes: Sequence[Node], outputs: Iterable) -> tuple[list[Node], set]:
    """The live nodes in order, and the non-constant atoms they and ``outputs`` use that are none of them."""
    live = {atom for atom in outputs if atom.is_Symbol}
    kept: list[Node] = []
    add, remove = live.add, live.remove
    for node in reversed(nodes):
        if node in live:
            remove(node)  # defined here: no earlier node can use it (the nodes are in SSA order)
            kept.append(node)
            for atom in node.args:  # symbols only: hashing a Float constant costs microseconds
                if atom.is_Symbol:
                    add(atom)
    kept.reverse()
    return kept, live


def _elementwise_shape(args: tuple, primitive, function_name: str) -> tuple:
    """The shape of an elementwise operation on ``args``: their NumPy broadcast."""
    shape = ()
    for atom in args:
        cls = atom.__class__
        if (cls is Node or cls is ArrayInput) and atom.shape and atom.shape != shape:
            if not shape:
                shape = atom.shape
                continue
            try:
                shape = np.broadcast_shapes(shape, atom.shape)
            except ValueError:
                shapes = ", ".join(str(atom_shape(a)) for a in args)
                from symad.errors import TracingError

                raise TracingError(
                    f"{primitive.name}: operands with shapes {shapes} do not broadcast (in function "
                    f"{function_name!r}); make the shapes equal, or 1 along the axes to repeat "
                    "(x[:, None] or x.reshape(...)), as NumPy requires") from None
    return shape


def scalar_input_graph(graph: Graph) -> Graph:
    """``graph`` with each array input replaced by its element symbols (a graph of scalars).

    How a graph with no array node reaches the scalar compiler: one column per element.
    """
    if not any(atom.__class__ is ArrayInput for atom in graph.inputs):
        return graph
    inputs = []
    for atom in graph.inputs:
        inputs.extend(atom.elements().reshape(-1).tolist() if atom.__class__ is ArrayInput else [atom])
    return Graph(inputs, graph.nodes, graph.outputs, free_symbols=graph.free_symbols())


def replay(graph: Graph, builder: GraphBuilder, bindings: dict) -> dict:
    """Record ``graph``'s nodes again in ``builder`` with inputs replaced per ``bindings``.

    Returns the map from the graph's nodes to the builder's atoms. Because
    the builder hash-conses and simplifies, replaying into a builder that
    already holds equal nodes reuses them. Free symbols (values of an
    enclosing trace) map to themselves.
    """
    if not bindings and not builder.nodes:
        # Into a fresh builder over the same atoms: every node would be
        # recorded again as itself, so take the nodes over as they are.
        builder.adopt(graph.nodes)
        return {}
    env = dict(bindings)
    for node in graph.nodes:
        args = tuple(env.get(a, a) for a in node.args)
        env[node] = builder.record(node.primitive, args, node.params)
    return env


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------

# The per-thread stack of recording builders lives in symad.atoms (the lowest layer, so that
# the primitive tables can name the function being traced in their errors).


class GraphBuilder:
    """Records nodes, hash-consed and simplified, for one trace or one transform."""

    def __init__(self, function_name: str = "function"):
        self.function_name = function_name
        self.inputs: list[sympy.Symbol] = []
        self.nodes: list[Node] = []
        # Hash-consing: one table per primitive (and parameters), from the operands'
        # keys to the node or the constant the operation folded to. Keyed by
        # the operand tuple itself where every operand is a symbol, the tuple the node
        # keeps: a key tuple per node was 64 bytes of each of 10^6 nodes.
        self._tables: dict = {}
        # The order of the symbols that are not nodes (inputs, values of an enclosing
        # trace), numbered as first met; nodes carry their number.
        self._order: dict = {}
        # Adopted nodes that are not at the position they were recorded at (those
        # are found there).
        self._moved_nodes: set = set()
        # Atoms holding truth values: boolean constants and comparison nodes.
        self._boolean_atoms: set = {sympy.true, sympy.false}
        # Parameters met while tracing: Parameter -> object array of its symbols here.
        self.parameters: dict = {}
        # The most elements a Parameter may bring in as inputs (None: no limit); the
        # trace of a user's function sets symad.function.MAX_SYMBOLIC_ELEMENTS here.
        self.element_limit: int | None = None
        # id(constant atom) -> (atom, plain key). Hashing a sympy.Float converts it
        # to a float each time (microseconds); the plain key hashes in nanoseconds.
        # The atom is held so that its id cannot be reused while it is cached.
        self._constant_keys: dict = {}

    # -- context -----------------------------------------------------------

    @contextlib.contextmanager
    def active(self):
        """Make this builder the one that traced operations record into.

        The cyclic garbage collector is paused meanwhile
        (:func:`garbage_collection_paused`): collections triggered by the many
        small objects of a recording would walk the user's whole heap
        (measured: 15-60% of build time next to large SymPy trees).
        """
        with garbage_collection_paused():
            active_builders().append(self)
            try:
                yield self
            finally:
                active_builders().pop()

    # -- inputs ------------------------------------------------------------

    def add_input(self, symbol: sympy.Symbol) -> None:
        self._order[symbol] = len(self._order)
        self.inputs.append(symbol)

    def input_names(self) -> set[str]:
        return {symbol.name for symbol in self.inputs}

    # -- nodes -------------------------------------------------------------

    def node_of(self, atom) -> Node | None:
        """``atom`` if it is a node of this builder (recorded or adopted here), else None.

        Not every node is: one of an enclosing trace's builder is a value from
        outside, as an input symbol is.
        """
        if atom.__class__ is not Node:
            return None
        position = atom.position
        if 0 <= position < len(self.nodes) and self.nodes[position] is atom:
            return atom
        # Adopted elsewhere than recorded, or a node of another builder (an enclosing trace's).
        return atom if atom in self._moved_nodes else None

    def sort_key(self, atom) -> tuple:
        """Deterministic operand order for commutative primitives.

        Constants come first (by value), then the other symbols in the order
        this builder first saw them, then nodes in the order they were
        made (by any builder: an adopted node keeps its operands in an order
        that is still canonical here). Never by ``hash``, which varies between runs.
        """
        if is_constant(atom):
            return self._constant_key(atom)[0]
        return (1, self._symbol_number(atom), "")

    def _symbol_number(self, symbol) -> int:
        """``symbol``'s place in the order of :meth:`sort_key`."""
        if symbol.__class__ is Node:
            return symbol.number  # numbered from 2**40: after every other symbol
        order = self._order.get(symbol)
        if order is None:  # a symbol of an enclosing trace
            order = self._order[symbol] = len(self._order)
        return order

    def _constant_key(self, atom) -> tuple:
        """Plain-Python keys of a constant atom: ``(sort key, identity key)``.

        The sort key orders constants by value, the type name breaking ties
        such as 2 (Integer) against 2.0 (Float). The identity key tells exact
        constants apart even where their float values coincide.
        """
        entry = self._constant_keys.get(id(atom))
        if entry is None:
            value = constant_value(atom)
            if isinstance(value, complex):  # after the real numbers, by real then imaginary part
                sort_key = (0, math.inf, value.real, value.imag, type(atom).__name__)
            else:
                sort_key = (0, float(value), type(atom).__name__)
            entry = self._constant_keys[id(atom)] = (atom, (sort_key, _exact_identity(atom)))
        return entry[1]

    def _canonical_order(self, args: tuple) -> tuple:
        """``args`` in :meth:`sort_key`'s order: constants, other symbols, nodes.

        Two operands, the common case, are compared directly; an input met
        beside a constant is then numbered when it is first compared with
        another symbol, which keeps the order deterministic.
        """
        if len(args) != 2:
            return tuple(sorted(args, key=self.sort_key))
        first, second = args
        first_is_symbol, second_is_symbol = first.is_Symbol, second.is_Symbol
        if first_is_symbol != second_is_symbol:  # constants sort before symbols
            return args if second_is_symbol else (second, first)
        if first_is_symbol:
            number = self._symbol_number
            return args if number(first) <= number(second) else (second, first)
        return args if self.sort_key(first) <= self.sort_key(second) else (second, first)

    def _any_truth_value(self, args: tuple) -> bool:
        """True if an operand holds truth values (then :meth:`_coerce_operands` has work)."""
        booleans = self._boolean_atoms
        # Symbols are looked up only once a comparison was recorded: the lookup hashes
        # input symbols in Python, a fifth of the cost of recording a node.
        symbols_may_be_boolean = len(booleans) > 2
        for atom in args:
            if atom.is_Symbol:
                if symbols_may_be_boolean and atom in booleans:
                    return True
            elif isinstance(atom, sympy.logic.boolalg.BooleanAtom):
                return True
        return False

    def _operand_key(self, atom):
        """What a node's operand contributes to its hash-consing key."""
        return atom if atom.is_Symbol else self._constant_key(atom)

    def _table(self, primitive, params: tuple) -> dict:
        """The hash-consing table of ``primitive`` with ``params``: operand keys -> atom."""
        kind = (primitive, params) if params else primitive
        table = self._tables.get(kind)
        if table is None:
            table = self._tables[kind] = {}
        return table

    def record(self, primitive, args: Sequence, params: tuple = ()) -> Node | sympy.Basic:
        """Apply ``primitive`` to ``args`` and return the resulting atom."""
        args = tuple(args)
        # Most operations are on symbols only (every elementwise step of an array trace):
        # they need neither the truth-value check (unless a comparison was recorded) nor
        # constant keys, since symbols are their own operand keys.
        all_symbols = True
        for atom in args:
            if not atom.is_Symbol:
                all_symbols = False
                break
        if primitive.boolean_operands or (
            (not all_symbols or len(self._boolean_atoms) > 2) and self._any_truth_value(args)
        ):
            args = self._coerce_operands(primitive, args)
            all_symbols = all(atom.is_Symbol for atom in args)
        if primitive.commutative and len(args) > 1:
            first, second = args[0], args[1]
            if len(args) == 2 and first.__class__ is Node and second.__class__ is Node:
                # The common case of _canonical_order, inline: two nodes.
                if second.number < first.number:
                    args = (second, first)
            else:
                args = self._canonical_order(args)
        if primitive.elementwise:
            shape = _elementwise_shape(args, primitive, self.function_name)
        else:
            shape = primitive.shape_rule([atom_shape(a) for a in args], dict(params))
        if primitive.simplify is not None:
            simplified = primitive.simplify(self, args)
            if simplified is not None:
                # An identity keeps the value, not always the shape: x - x is 0 for an
                # array x too, and where(c, a, a) has c's shape. (Broadcasting is the array
                # catalogue's, found by role: the graph imports no catalogue.)
                if shape and atom_shape(simplified) != shape:
                    return BUILDER_ROLES.broadcast(self, simplified, shape)
                return simplified
        # The hash-consing key, on plain Python values; on the way, whether every
        # operand is a constant (atoms are symbols or constants), to fold it exactly.
        if all_symbols:
            key = args
            all_constant = False
        else:
            operand_keys = []
            all_constant = True
            for a in args:
                if a.is_Symbol:
                    operand_keys.append(a)
                    all_constant = False
                else:
                    operand_keys.append(self._constant_key(a))
            key = tuple(operand_keys)
        table = self._table(primitive, params)
        existing = table.get(key)
        if existing is not None:  # the node, or the constant this operation folded to before
            return existing
        if all_constant and primitive.folds_constants and all(map(is_constant, args)):
            try:
                value = primitive.to_sympy(args, dict(params))
            except (TypeError, ValueError):  # e.g. SymPy refuses to compare nan
                value = None
            if value is not None and _is_foldable(value):
                # Remembered under the key: folding through SymPy costs microseconds,
                # and a partial rule folds the same constants at every element
                # (``b - 1`` of ``b * a**(b - 1)``).
                table[key] = value
                return value
        node = Node(primitive, args, params, len(self.nodes), shape=shape)
        self.nodes.append(node)
        table[key] = node
        if primitive.returns_boolean:
            self._boolean_atoms.add(node)
        return node

    def adopt(self, nodes: Iterable[Node]) -> None:
        """Take over nodes recorded by another builder over this builder's atoms, unchanged.

        They were hash-consed and simplified when first recorded; here they are
        only registered, so that later records find them (a fraction of what
        recording them again costs).
        """
        own_nodes = self.nodes
        for node in nodes:
            operand_keys = node.args  # symbols are their own keys, as in record
            for atom in operand_keys:
                if not atom.is_Symbol:
                    operand_keys = tuple(map(self._operand_key, node.args))
                    break
            self._table(node.primitive, node.params).setdefault(operand_keys, node)
            if node.position != len(own_nodes):
                # Past a dead node of the recording, or from another builder: looked up here.
                self._moved_nodes.add(node)
            own_nodes.append(node)
            if node.primitive.returns_boolean:
                self._boolean_atoms.add(node)

    def is_boolean(self, atom) -> bool:
        """True if ``atom`` holds truth values (a comparison or a boolean constant)."""
        return atom in self._boolean_atoms

    def _coerce_operands(self, primitive, args: tuple) -> tuple:
        """Booleans used as numbers become 0/1, numbers used as conditions become ``!= 0``.

        NumPy does the same implicitly (``np.sum(x > 1)`` counts); a graph must
        say it, because SymPy's relations are not numbers and ``Piecewise``
        needs a relation as its condition. The two primitives are the catalogue's,
        found by role (:data:`~symad.ir.primitive.BUILDER_ROLES`).
        """
        coerced = list(args)
        for index, atom in enumerate(args):
            wants_boolean = index in primitive.boolean_operands
            if wants_boolean == self.is_boolean(atom):
                continue
            if wants_boolean:
                coerced[index] = self.record(BUILDER_ROLES.truth, (atom, sympy.Integer(0)))
            elif isinstance(atom, sympy.logic.boolalg.BooleanAtom):
                coerced[index] = sympy.Integer(int(bool(atom)))
            else:
                coerced[index] = self.record(BUILDER_ROLES.number,
                                             (atom, sympy.Integer(1), sympy.Integer(0)))
        return tuple(coerced)

    def finish(self, outputs: Sequence) -> Graph:
        """Freeze the recording into a Graph holding only the live nodes."""
        return live_graph(self.inputs, self.nodes, outputs)
