"""Loop nests for array programs: one lowering, printed as numba Python and as C.

Evaluated with NumPy, an array program makes one pass over memory per node:
for the gradient of a grid energy, ``u[1:] - u[:-1]``, its double, the zeros
it is padded back into and the sum of five such arrays are each a full-size
temporary. This module lowers the graph instead to a few **loop nests**
(kernels), the way XLA fuses:

* a node is **inlined** into whatever reads it: elementwise primitives (NumPy
  broadcasting is index arithmetic, a size-1 axis reads index 0) and the
  structural ones -- ``slice`` (``start + step * i``), ``broadcast_to``,
  ``transpose``, ``reshape`` (div/mod of a flat index, simplified away for
  contiguous shapes), ``take`` (a lookup in its index array) and the
  piecewise ``unslice`` (a condition on the index), ``concatenate`` (one
  index range per operand) and ``scatter``;
* a node is **materialized** (gets a buffer) when it is an output, a reduction
  (``reduce_sum``/``amax``/``amin``: accumulated in the loop over its
  operand), a contraction (``einsum``: its operands laid out as a batch of
  matrices, multiplied by BLAS or by loops when small), ``cumsum``,
  ``take_add`` or ``pack`` (their own small loops), or an expensive value
  (``exp``, ``sin``...) that inlining would compute more than once per
  element; ``reduce_logsumexp`` is rewritten as ``amax``, ``exp``,
  ``reduce_sum`` and ``log``;
* materialized nodes over the same index space and the same batch share one
  kernel: ``value_and_grad`` sums the value in the loop that writes the
  gradient.

Inside a kernel a value is computed once per index (common subexpressions
are found by node and index), at the outermost loop it depends on, and the
conditions of the piecewise primitives split the loops into ranges where
each is known (the gradient of ``sum((u[1:] - u[:-1])**2)`` has a first row,
a last row and the rows between), so inner loops have no branches.

The result, a :class:`LoopProgram`, is a short list of statement types
(loops, assignments, loads, stores, conditions, matrix products) that
:mod:`symad.compile.loops_numba` prints as a numba module and
:mod:`symad.export.c_loops` as C. Its size depends on the graph, not on the
shapes: the arrays' sizes are numbers in loop bounds.

**Batch.** With ``batch=True`` (numba), every value has a leading dimension
of points in front of its node shape, of runtime extent: an input's is its
``shape[0]`` (the points, or 1 when it is the same at every point), a node's
the largest of those of the inputs it depends on. Kernels loop over it too.
With ``batch=False`` (C) there is one point.

>>> import symad as sd, numpy as np
>>> G = sd.grad(lambda u: np.sum((u[1:] - u[:-1]) ** 2)).trace(np.zeros(1000))
>>> program = lower_loops(G.graph, batch=False, name="g")
>>> len(program.kernels), [b.shape for b in program.outputs]
(1, [(1000,)])
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import sympy

from symad import array_primitives as A
from symad.errors import CompileError
from symad.graph import ArrayInput, Node
from symad.primitives import (
    NATIVE,
    Primitive,
    add_p,
    equal_p,
    exp_p,
    log_p,
    logsumexp_p,
    mul_p,
    reduce_max_p,
    reduce_min_p,
    select_p,
    sub_p,
)

__all__ = ["lower_loops", "LoopProgram", "Buffer", "LoopsUnsupported", "Ix", "ExpressionPrinter",
           "CHUNK_ELEMENTS"]

#: A parallel kernel hands its threads chunks of its first axis of about this many elements.
CHUNK_ELEMENTS = 4096
#: At most this many copies of a kernel's innermost body, one per combination of known
#: conditions (ranges of the piecewise primitives); past it, the outer axes keep their
#: conditions as branches.
MAX_SPECIALISED_BODIES = 32
#: A value read at more than this many distinct indices is materialized, however cheap
#: (bounds the code a long chain of shifted slices would otherwise grow).
MAX_SITES = 8
#: The deepest nesting of inlined operations in one expression; a node deeper is
#: materialized (Python's recursion limit, about 1,000 frames, allows some 250).
MAX_INLINE_DEPTH = 32
#: einsum products of at least this many multiply-adds (per matrix of a batch) go to BLAS.
BLAS_MIN_FLOPS = 4096

# Elementwise primitives cheap enough to compute again wherever they are read are those
# whose stanza's cost is at most NATIVE (a few cycles, no library call; XLA duplicates the
# same kind into each consumer). Others (exp, sin, log, special functions...) are computed
# once and stored when read more than once per element.


class LoopsUnsupported(CompileError):
    """The graph holds an operation the loop lowering cannot write (the message says which)."""


# ---------------------------------------------------------------------------
# Index arithmetic: integer linear combinations of loop variables and a few
# non-linear atoms (floor division, remainder, a lookup in an index table)
# ---------------------------------------------------------------------------


class Var:
    """A loop variable (or a runtime integer such as an extent), ``lo <= v <= hi``."""

    __slots__ = ("name", "lo", "hi", "key")

    def __init__(self, name: str, lo: int | None = 0, hi: int | None = None):
        self.name, self.lo, self.hi, self.key = name, lo, hi, name

    def bounds(self, env: dict):
        return env.get(self.name, (self.lo, self.hi))

    def variables(self) -> set:
        return {self.name}


class Div:
    """``floor(ix / k)`` for a constant ``k > 0``."""

    __slots__ = ("ix", "k", "key")

    def __init__(self, ix: Ix, k: int):
        self.ix, self.k, self.key = ix, k, f"({ix.key})//{k}"

    def bounds(self, env: dict):
        lo, hi = ix_bounds(self.ix, env)
        return (None if lo is None else lo // self.k, None if hi is None else hi // self.k)

    def variables(self) -> set:
        return self.ix.variables()


class Mod:
    """``ix mod k`` for a constant ``k > 0`` (``ix`` non-negative where it is read)."""

    __slots__ = ("ix", "k", "key")

    def __init__(self, ix: Ix, k: int):
        self.ix, self.k, self.key = ix, k, f"({ix.key})%{k}"

    def bounds(self, env: dict):
        return (0, self.k - 1)

    def variables(self) -> set:
        return self.ix.variables()


class Gather:
    """``table[ix]``: an entry of a constant integer table (the indices of a ``take``)."""

    __slots__ = ("table", "ix", "lo", "hi", "key")

    def __init__(self, table: Buffer, ix: Ix, lo: int, hi: int):
        self.table, self.ix, self.lo, self.hi = table, ix, lo, hi
        self.key = f"{table.name}[{ix.key}]"

    def bounds(self, env: dict):
        return (self.lo, self.hi)

    def variables(self) -> set:
        return self.ix.variables()


class Ix:
    """An integer index: ``sum(coefficient * atom) + const``, kept simplified.

    >>> i, j = Ix.var("i", 0, 255), Ix.var("j", 0, 255)
    >>> flat = i * 256 + j
    >>> (flat // 256).key, (flat % 256).key, ((flat + 1) // 256).key
    ('i', 'j', '(j+1)//256+i')
    >>> ((flat // 256) * 256 + flat % 256).key   # a contiguous reshape and back
    '256*i+j'
    """

    __slots__ = ("terms", "const", "key")

    def __init__(self, terms: dict | None = None, const: int = 0):
        terms = {atom: c for atom, c in (terms or {}).items() if c}
        terms, extra = _merge_div_mod(terms)
        self.terms = tuple(sorted(terms.items(), key=lambda item: item[0].key))
        self.const = int(const) + extra
        parts = [(atom.key if c == 1 else f"{c}*{atom.key}") for atom, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        self.key = "+".join(parts)

    @staticmethod
    def var(name: str, lo: int | None = 0, hi: int | None = None) -> Ix:
        return Ix({Var(name, lo, hi): 1})

    @staticmethod
    def of(value) -> Ix:
        return value if isinstance(value, Ix) else Ix(None, int(value))

    def __add__(self, other) -> Ix:
        other = Ix.of(other)
        terms = dict(self.terms)
        by_key = {atom.key: atom for atom in terms}
        for atom, c in other.terms:
            atom = by_key.get(atom.key, atom)
            terms[atom] = terms.get(atom, 0) + c
            by_key[atom.key] = atom
        return Ix(terms, self.const + other.const)

    __radd__ = __add__

    def __sub__(self, other) -> Ix:
        return self + Ix.of(other) * -1

    def __mul__(self, k: int) -> Ix:
        k = int(k)
        return Ix({atom: c * k for atom, c in self.terms}, self.const * k)

    __rmul__ = __mul__

    def __floordiv__(self, k: int) -> Ix:
        if k == 1:
            return self
        quotient, rest, constant = _split(self, k)
        lo, hi = ix_bounds(rest, {})
        if lo is not None and hi is not None and 0 <= lo and hi < k:
            return quotient
        return quotient + Ix({Div(rest, k): 1})

    def __mod__(self, k: int) -> Ix:
        if k == 1:
            return Ix()
        _, rest, _ = _split(self, k)
        lo, hi = ix_bounds(rest, {})
        if lo is not None and hi is not None and 0 <= lo and hi < k:
            return rest
        return Ix({Mod(rest, k): 1})

    def variables(self) -> set:
        names: set = set()
        for atom, _ in self.terms:
            names |= atom.variables()
        return names

    def single_variable(self):
        """``(name, const)`` if this is ``v + const`` for one loop variable, else None."""
        if len(self.terms) == 1:
            atom, c = self.terms[0]
            if c == 1 and isinstance(atom, Var):
                return atom.name, self.const
        return None

    def is_const(self) -> bool:
        return not self.terms

    def __repr__(self) -> str:
        return f"Ix({self.key})"


def _split(ix: Ix, k: int):
    """``ix = k * quotient + rest`` with the multiples of ``k`` moved into ``quotient``."""
    quotient_terms, rest_terms = {}, {}
    for atom, c in ix.terms:
        if c % k == 0:
            quotient_terms[atom] = c // k
        else:
            rest_terms[atom] = c
    q, r = divmod(ix.const, k)
    return Ix(quotient_terms, q), Ix(rest_terms, r), r


def _merge_div_mod(terms: dict) -> tuple[dict, int]:
    """``c*k*(x // k) + c*(x % k)`` is ``c*x``: a flat index taken apart and put back together.

    Returns the terms and a constant to add.
    """
    mods = [(atom, c) for atom, c in terms.items() if isinstance(atom, Mod)]
    if not mods:
        return terms, 0
    divs = {(atom.ix.key, atom.k): atom for atom in terms if isinstance(atom, Div)}
    extra = 0
    for mod, c in mods:
        div = divs.get((mod.ix.key, mod.k))
        if div is None or terms.get(div) != c * mod.k:
            continue
        del terms[mod], terms[div]
        by_key = {atom.key: atom for atom in terms}
        for atom, coefficient in mod.ix.terms:
            atom = by_key.get(atom.key, atom)
            terms[atom] = terms.get(atom, 0) + c * coefficient
        extra += c * mod.ix.const
    return {atom: c for atom, c in terms.items() if c}, extra


def ix_bounds(ix: Ix, env: dict) -> tuple:
    """The least and greatest value of ``ix`` (None where unbounded), loop variables in ``env``."""
    lo = hi = ix.const
    for atom, c in ix.terms:
        a_lo, a_hi = atom.bounds(env)
        if c < 0:
            a_lo, a_hi = a_hi, a_lo
        lo = None if lo is None or a_lo is None else lo + c * a_lo
        hi = None if hi is None or a_hi is None else hi + c * a_hi
    return lo, hi


ZERO = Ix()


# ---------------------------------------------------------------------------
# The lowered program
# ---------------------------------------------------------------------------


class Buffer:
    """A flat array of the program: an input, a constant, a temporary or an output.

    ``shape`` is the node's shape; with a batch, ``ext`` names the runtime
    extent of the leading dimension in front of it (None: no batch dimension,
    a constant's data or everything in C). ``dtype`` is ``"float"``,
    ``"bool"`` or ``"int"`` (index tables); ``init`` a value to fill a
    temporary with before the kernels run (None: written before read).
    """

    __slots__ = ("name", "shape", "dtype", "kind", "ext", "init", "data", "label", "position", "owner")

    def __init__(self, name: str, shape: tuple, kind: str, *, dtype: str = "float", ext=None,
                 init=None, data=None, label: str = "", position: int = -1, owner=None):
        self.name, self.shape, self.kind, self.dtype = name, tuple(shape), kind, dtype
        self.ext, self.init, self.data, self.label, self.position = ext, init, data, label, position
        #: for another shape of the same memory (a reshape), the buffer that is allocated
        self.owner = owner

    def reshaped(self, shape: tuple) -> Buffer:
        """The same memory read with another shape (of as many elements)."""
        return Buffer(self.name, shape, "view", dtype=self.dtype, ext=self.ext, owner=self.owner or self)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.shape}, {self.kind})"


# Statements. Operands are ("lit", value) or ("name", local); expressions are operands,
# ("load", buffer, Ix), ("op", primitive, exponent atom or None, [operands]), ("ix", Ix),
# ("imin", Ix, Ix). Conditions are (Ix, lo, hi, step, offset): lo <= ix < hi and
# (ix - offset) % step == 0 (lo and hi None when the loop range already keeps ix within).


class Let:
    """``name = expr``, defined once (``kind``: "float", "bool" or "int")."""

    __slots__ = ("name", "expr", "kind")

    def __init__(self, name, expr, kind="float"):
        self.name, self.expr, self.kind = name, expr, kind


class Declare:
    """A variable assigned later (an accumulator, the value of a piecewise node)."""

    __slots__ = ("name", "kind", "init")

    def __init__(self, name, kind, init):
        self.name, self.kind, self.init = name, kind, init


class Assign:
    __slots__ = ("name", "expr")

    def __init__(self, name, expr):
        self.name, self.expr = name, expr


class Store:
    """``buffer[ix] = value``."""

    __slots__ = ("buffer", "ix", "value")

    def __init__(self, buffer, ix, value):
        self.buffer, self.ix, self.value = buffer, ix, value


class Update:
    """``buffer[ix] = primitive(buffer[ix], value)`` (add, or a max/min that keeps NaN)."""

    __slots__ = ("buffer", "ix", "primitive", "value")

    def __init__(self, buffer, ix, primitive, value):
        self.buffer, self.ix, self.primitive, self.value = buffer, ix, primitive, value


class If:
    __slots__ = ("conds", "then", "orelse")

    def __init__(self, conds, then, orelse):
        self.conds, self.then, self.orelse = conds, then, orelse


class Loop:
    """``for var in range(max(starts), min(stops))`` (downwards if ``reverse``)."""

    __slots__ = ("var", "starts", "stops", "body", "reverse")

    def __init__(self, var, starts, stops, body, reverse=False):
        self.var, self.starts, self.stops, self.body, self.reverse = var, starts, stops, body, reverse


class Parallel:
    """``for var in range(count)``, the iterations independent: the threads share them.

    ``elements`` is the size of the loop space one iteration covers; ``operations``
    how many operations its body writes (together, what an iteration costs).
    """

    __slots__ = ("var", "count", "body", "elements", "operations")

    def __init__(self, var, count, body, elements=1, operations=1):
        self.var, self.count, self.body = var, count, body
        self.elements, self.operations = elements, operations


class Block:
    """Statements in their own scope (C's braces)."""

    __slots__ = ("body",)

    def __init__(self, body):
        self.body = body


class Matmul:
    """``out[p, g] = a[p, g] @ b[p, g]`` for a batch of ``(m, k) @ (k, n)`` matrices (BLAS).

    ``a`` and ``b`` are ``(buffer, views)``: the operand is the buffer's array after the
    reshape, transpose and broadcast nodes ``views``, in order.
    """

    __slots__ = ("out", "a", "b", "shape")

    def __init__(self, out, a, b, shape):
        self.out, self.a, self.b, self.shape = out, a, b, shape


class Combine:
    """``out[p, k] = primitive(...primitive(partial[p, 0, k], partial[p, 1, k])..., partial[p, chunks - 1, k])``:
    the per-chunk partial results of a reduction combined in chunk order."""

    __slots__ = ("partial", "out", "chunks", "primitive")

    def __init__(self, partial, out, chunks, primitive):
        self.partial, self.out, self.chunks, self.primitive = partial, out, chunks, primitive


class Comment:
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


class LoopProgram:
    """What the printers print: buffers, runtime extents and statements."""

    def __init__(self, name, inputs, constants, temporaries, outputs, extents, body, kernels,
                 output_is_boolean):
        self.name = name
        #: one Buffer per graph input, in order
        self.inputs = inputs
        #: constant arrays and index tables (their data in ``.data``)
        self.constants = constants
        self.temporaries = temporaries
        #: one Buffer per graph output, in order
        self.outputs = outputs
        #: ``(name, [input buffers])``: the runtime extent ``name`` is the largest of theirs
        self.extents = extents
        self.body = body
        #: per kernel, in order: a one-line description, the elements of its loop space (per
        #: point) and the operations written in its loops
        self.kernels = kernels
        self.output_is_boolean = output_is_boolean


class ExpressionPrinter:
    """What the printers share: index arithmetic, subscripts, operands, expressions and
    conditions, which differ between languages only in spelling (the hooks below)."""

    #: floor division of index arithmetic (C's ``/`` floors: numerators are never negative)
    floor_division = "//"
    conjunction = " and "

    def number(self, value) -> str:
        raise NotImplementedError

    def operation(self, primitive, exponent, args: list) -> str:
        raise NotImplementedError

    def minimum(self, a: str, b: str) -> str:
        raise NotImplementedError

    def subscript(self, index: Ix) -> str:
        return self.ix(index)

    def ix(self, index: Ix) -> str:
        parts = [self.atom(atom) if c == 1 else f"{c} * {self.atom(atom)}" for atom, c in index.terms]
        if index.const or not parts:
            parts.append(str(index.const))
        return " + ".join(parts).replace("+ -", "- ")

    def atom(self, atom) -> str:
        if isinstance(atom, Var):
            return atom.name
        if isinstance(atom, Div):
            return f"(({self.ix(atom.ix)}) {self.floor_division} {atom.k})"
        if isinstance(atom, Mod):
            return f"(({self.ix(atom.ix)}) % {atom.k})"
        return f"{atom.table.name}[{self.subscript(atom.ix)}]"

    def operand(self, operand) -> str:
        return self.number(operand[1]) if operand[0] == "lit" else operand[1]

    def expression(self, expr) -> str:
        kind = expr[0]
        if kind in ("lit", "name"):
            return self.operand(expr)
        if kind == "load":
            return f"{expr[1].name}[{self.subscript(expr[2])}]"
        if kind == "ix":
            return self.ix(expr[1])
        if kind == "imin":
            return self.minimum(self.ix(expr[1]), self.ix(expr[2]))
        _, primitive, exponent, operands = expr
        return self.operation(primitive, exponent, [self.operand(o) for o in operands])

    def store(self, statement) -> str:
        """``buffer[ix] = value`` of a Store, or of an Update (the value combined with the old)."""
        target = f"{statement.buffer.name}[{self.subscript(statement.ix)}]"
        value = self.operand(statement.value)
        if statement.__class__ is Update:
            value = self.operation(statement.primitive, None, [target, value])
        return f"{target} = {value}"

    def condition(self, conds) -> str:
        parts = []
        for ix, lo, hi, step, offset in conds:
            text = self.ix(ix)
            if lo is not None and hi - lo == 1:
                parts.append(f"{text} == {lo}")
            elif lo is not None:
                parts += [f"{text} >= {lo}", f"{text} < {hi}"]
            if step > 1:
                parts.append(f"({text} - {offset}) % {step} == 0")
        return self.conjunction.join(f"({p})" for p in parts)


# ---------------------------------------------------------------------------
# Index maps of the inlined primitives: the operand's index at the node's index
# ---------------------------------------------------------------------------


def broadcast_index(ix: tuple, out_shape: tuple, in_shape: tuple) -> tuple:
    """NumPy broadcasting: the operand's index (axes aligned at the end, size 1 reads 0)."""
    offset = len(out_shape) - len(in_shape)
    return tuple(ZERO if in_shape[k] == 1 else ix[offset + k] for k in range(len(in_shape)))


def flat_index(ix: tuple, shape: tuple) -> Ix:
    flat, stride = Ix(), 1
    for k in range(len(shape) - 1, -1, -1):
        flat = flat + ix[k] * stride
        stride *= shape[k]
    return flat


def unflatten_index(flat: Ix, shape: tuple) -> tuple:
    out, stride = [], math.prod(shape)
    for k, size in enumerate(shape):
        stride //= size if size else 1
        part = flat // stride if stride > 1 else flat
        out.append(part % size if k and size else part)
    return tuple(out)


def _slice_count(start: int, stop: int, step: int) -> int:
    return len(range(start, stop, step))


def _slice_condition(ix: Ix, item: tuple):
    """The condition that axis index ``ix`` of the whole lies in ``item``'s selection, and
    the part's index there (None for an integer item, which leaves no axis)."""
    if item[0] == "i":
        return (ix, item[1], item[1] + 1, 1, 0), None
    _, start, stop, step = item
    count = _slice_count(start, stop, step)
    if count == 0:
        return (ix, 0, 0, 1, 0), ZERO
    if step > 0:
        lo, hi = start, start + (count - 1) * step + 1
        return (ix, lo, hi, step, start), (ix - start) // step
    lo, hi = start + (count - 1) * step, start + 1
    return (ix, lo, hi, -step, start), (ix * -1 + start) // (-step)


# ---------------------------------------------------------------------------
# The lowering
# ---------------------------------------------------------------------------


def _shape(atom) -> tuple:
    cls = atom.__class__
    return atom.shape if cls is Node or cls is ArrayInput else ()


def _literal(atom):
    """An operand for a constant atom (a SymPy number or truth value)."""
    if isinstance(atom, sympy.logic.boolalg.BooleanAtom):
        return ("lit", bool(atom))
    from symad.atoms import constant_value

    return ("lit", float(constant_value(atom)))


#: The loops' own primitive: a batch of matrix products, the form every einsum is put in.
matmul_p = Primitive("batched_matmul", None, None, arity=2, kind="bilinear", shape_rule=None,
                     folds_constants=False, numpy_name=None)

_REDUCTIONS = {
    # primitive: (how two partial results combine, the identity)
    A.reduce_sum_p: (add_p, 0.0),
    A.amax_p: (reduce_max_p, -math.inf),
    A.amin_p: (reduce_min_p, math.inf),
}
#: What a buffer accumulated into by each combining primitive starts at.
_IDENTITY = {add_p: 0.0, reduce_max_p: -math.inf, reduce_min_p: math.inf}
#: Primitives with a kernel of their own (they are not a value at one index of their inputs).
_OWN_KERNEL = (A.cumsum_p, A.take_add_p, A.pack_p, matmul_p)


def _node(primitive, args, params=(), shape=()) -> Node:
    return Node(primitive, tuple(args), tuple(params), shape=tuple(shape))


def _is_constant_array(atom) -> bool:
    """A constant node with data (not one value everywhere): read from its own buffer."""
    return (atom.__class__ is Node and atom.primitive is A.constant_p
            and dict(atom.params)["value"].fill is None)


def lower_loops(graph, *, batch: bool, name: str = "function", parallel: bool | None = None,
                blas: bool | None = None, spellable: Callable | None = None) -> LoopProgram:
    """The loop program of an array program's ``graph``.

    Args:
        batch: values carry a leading dimension of points (numba) or not (C).
        parallel: chunk each kernel's first axis for threads (default: ``batch``).
        blas: large einsums become :class:`Matmul` statements (default: ``batch``);
            otherwise every product is loops.
        spellable: ``spellable(node) -> bool`` for elementwise nodes, the printer's word on
            whether it can write them; a node it cannot write raises
            :class:`LoopsUnsupported` naming the primitive.
    """
    return _Lowering(graph, batch=batch, name=name,
                     parallel=batch if parallel is None else parallel,
                     blas=batch if blas is None else blas, spellable=spellable).lower()


class _Kernel:
    """One loop nest: its kind, space and batch extent, and what it computes there.

    A ``"fused"`` kernel's effects are ``("store", node)`` (the node's value at each
    index of the space, written to its buffer), ``("reduce", node, operand)`` (the
    operand's values accumulated) and ``("copy", position, atom)`` (an output that
    is no node's own buffer); the other kinds compute one ``node`` their own way.
    """

    __slots__ = ("kind", "space", "ext", "effects", "produced", "node", "index")

    def __init__(self, kind, space, ext, effects=(), node=None):
        self.kind, self.space, self.ext = kind, tuple(space), ext
        self.effects = list(effects)
        #: nodes this kernel stores: read at its own index they are computed, not loaded
        self.produced = {e[1] for e in self.effects if e[0] == "store"}
        self.node = node
        self.index = -1


class _Lowering:
    def __init__(self, graph, *, batch, name, parallel, blas, spellable):
        self.graph = graph
        self.batch = batch
        self.name = name
        self.parallel = parallel
        self.blas = blas
        self.spellable = spellable or (lambda node: True)
        self.alias: dict = {}
        self.counter = 0
        self.constant_buffers: dict = {}  # ConstantArray -> Buffer (data or index table)
        self.extents: dict = {}  # frozenset of input positions -> extent name
        self.extent_list: list = []
        self.materialized: set = set()
        self.buffers: dict = {}  # node -> Buffer, once the program is written

    # -- names --------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def resolve(self, atom):
        """``atom``, or what replaced it (an einsum's or logsumexp's result in loop form)."""
        while atom.is_Symbol and atom in self.alias:
            atom = self.alias[atom]
        return atom

    # -- the passes -------------------------------------------------------------------

    def lower(self) -> LoopProgram:
        self.setup_inputs()
        self.order = self.rewrite(self.graph.nodes)
        self.check_supported()
        self.find_dependencies()
        self.output_atoms = [self.resolve(a) if a.is_Symbol else a for a in self.graph.outputs]
        materialized = self.bounded_depth(self.required())
        # Buffers for expensive values that inlining would compute twice: each round can
        # change which kernels read what, so look again until nothing more is worth one.
        for _ in range(len(self.order) + 1):
            kernels = self.plan(materialized)
            more = self.expensive_duplicates(kernels) - materialized
            if not more:
                break
            materialized = self.bounded_depth(materialized | more)
        return self.write(kernels, materialized)

    def setup_inputs(self) -> None:
        self.input_buffer: dict = {}
        self.element_of: dict = {}
        self.inputs: list = []
        for position, atom in enumerate(self.graph.inputs):
            buffer = Buffer(f"i{position}", _shape(atom), "input", position=position,
                            label=str(getattr(atom, "name", atom)),
                            ext=f"n{position}" if self.batch else None)
            self.input_buffer[atom] = buffer
            self.inputs.append(buffer)
            if atom.__class__ is ArrayInput:
                for symbol in atom.made_elements():
                    self.element_of[symbol] = (buffer, atom.element_index(symbol))

    def rewrite(self, nodes) -> list:
        """The nodes in order, with logsumexp and einsum replaced by what the loops compute."""
        order = []
        for node in nodes:
            primitive = node.primitive
            if primitive is A.reduce_logsumexp_p:
                chain = self.logsumexp_chain(node)
            elif primitive is logsumexp_p:
                chain = self.variadic_logsumexp_chain(node)
            elif primitive is A.einsum_p:
                chain = self.einsum_chain(node)
            else:
                order.append(node)
                continue
            order.extend(chain)
            self.alias[node] = chain[-1]
        return order

    def operands(self, node) -> list:
        return [self.resolve(a) if a.is_Symbol else a for a in node.args]

    def logsumexp_chain(self, node) -> list:
        """``log(sum(exp(x - m))) + m``, ``m`` the max (0 where it is not finite), as SciPy."""
        (x,) = self.operands(node)
        shape = _shape(x)
        reduced = {len(shape) + a for a in dict(node.params)["axes"]}
        keep = tuple(1 if k in reduced else size for k, size in enumerate(shape))
        chain: list = []
        make = _maker(chain)
        top = make(A.amax_p, (x,), node.params, node.shape)
        m = top if keep == node.shape else make(
            A.reshape_p, (top,), (("in_shape", node.shape), ("shape", keep)), keep)
        shift = self._finite_or_zero(make, m, keep)
        shifted = make(exp_p, (make(sub_p, (x, shift), shape=shape),), shape=shape)
        total = make(A.reduce_sum_p, (shifted,), node.params, node.shape)
        shift_out = shift if keep == node.shape else make(
            A.reshape_p, (shift,), (("in_shape", keep), ("shape", node.shape)), node.shape)
        make(add_p, (make(log_p, (total,), shape=node.shape), shift_out), shape=node.shape)
        return chain

    def variadic_logsumexp_chain(self, node) -> list:
        """The elementwise logsumexp of several operands, the same way."""
        operands = self.operands(node)
        shape = node.shape
        chain: list = []
        make = _maker(chain)
        shift = self._finite_or_zero(make, make(reduce_max_p, operands, shape=shape), shape)
        total = make(add_p, [make(exp_p, (make(sub_p, (a, shift), shape=shape),), shape=shape)
                             for a in operands], shape=shape)
        make(add_p, (make(log_p, (total,), shape=shape), shift), shape=shape)
        return chain

    @staticmethod
    def _finite_or_zero(make, m, shape):
        """``m`` where it is finite, else 0 (``m - m`` is 0 exactly for finite ``m``)."""
        finite = make(equal_p, (make(sub_p, (m, m), shape=shape), sympy.Integer(0)), shape=shape)
        return make(select_p, (finite, m, sympy.Integer(0)), shape=shape)

    def einsum_chain(self, node) -> list:
        """``einsum`` as a batch of matrix products: operands arranged as ``(G, M, K)`` and
        ``(G, K, N)`` (G: leading and batch indices, M and N: each operand's own, K: the
        contracted ones), their product ``(G, M, N)`` put back in the output's order."""
        (sa, sb), sc = A.parse_subscripts(dict(node.params)["subscripts"])
        a, b = self.operands(node)
        lead = tuple(node.shape[: len(node.shape) - len(sc)])
        size: dict = {}
        for atom, letters in ((a, sa), (b, sb)):
            shape = _shape(atom) if atom.is_Symbol else ()
            size.update(zip(letters, shape[len(shape) - len(letters):]))
        batch = [c for c in sc if c in sa and c in sb]
        contracted = [c for c in sa if c in sb and c not in sc]
        a_only = [c for c in sa if c not in sb]
        b_only = [c for c in sb if c not in sa]
        G = math.prod(lead) * math.prod(size[c] for c in batch)
        M, K, N = (math.prod(size[c] for c in group) for group in (a_only, contracted, b_only))
        chain: list = []

        def arrange(atom, letters, first, second, rows, columns):
            if not atom.is_Symbol:  # a number: one value of the operand's shape
                atom = _node(A.constant_p, (), (("value", A.ConstantArray(
                    np.full(tuple(size[c] for c in letters), _literal(atom)[1]))),),
                    tuple(size[c] for c in letters))
                chain.append(atom)
            shape = _shape(atom)
            full = lead + tuple(size[c] for c in letters)
            if shape != full:
                atom = _node(A.broadcast_p, (atom,), (("in_shape", shape), ("shape", full)), full)
                chain.append(atom)
            perm = tuple(range(len(lead))) + tuple(len(lead) + letters.index(c)
                                                   for c in batch + first + second)
            if perm != tuple(range(len(full))):
                atom = _node(A.transpose_p, (atom,), (("perm", perm),), tuple(full[p] for p in perm))
                chain.append(atom)
            if _shape(atom) != (G, rows, columns):
                atom = _node(A.reshape_p, (atom,), (("in_shape", _shape(atom)), ("shape", (G, rows, columns))),
                             (G, rows, columns))
                chain.append(atom)
            return atom

        left = arrange(a, sa, a_only, contracted, M, K)
        right = arrange(b, sb, contracted, b_only, K, N)
        atom = _node(matmul_p, (left, right), (), (G, M, N))
        chain.append(atom)
        produced = lead + tuple(size[c] for c in batch + a_only + b_only)
        if produced != (G, M, N):
            atom = _node(A.reshape_p, (atom,), (("in_shape", (G, M, N)), ("shape", produced)), produced)
            chain.append(atom)
        letters = batch + a_only + b_only
        perm = tuple(range(len(lead))) + tuple(len(lead) + letters.index(c) for c in sc)
        if perm != tuple(range(len(produced))):
            chain.append(_node(A.transpose_p, (atom,), (("perm", perm),), node.shape))
        return chain

    def check_supported(self) -> None:
        unspellable = sorted({node.primitive.name for node in self.order
                              if node.primitive.elementwise and not self.spellable(node)})
        unknown = sorted({node.primitive.name for node in self.order
                          if not node.primitive.elementwise
                          and node.primitive not in A.ARRAY_PRIMITIVES and node.primitive is not matmul_p})
        if unspellable or unknown:
            raise LoopsUnsupported(f"no loop form for {', '.join(unspellable + unknown)}")
        for node in self.order:
            for atom in self.operands(node):
                if atom.is_Symbol and atom.__class__ is not Node and atom not in self.input_buffer \
                        and atom not in self.element_of:
                    raise CompileError(f"{self.name}: the graph reads {atom}, which is neither an "
                                       "input nor a node before it (a value of an enclosing trace?)")

    def find_dependencies(self) -> None:
        """For each node, the inputs it depends on (its batch extent is the largest of theirs)."""
        deps: dict = {}
        for atom, buffer in self.input_buffer.items():
            deps[atom] = frozenset([buffer.position])
        for symbol, (buffer, _) in self.element_of.items():
            deps[symbol] = frozenset([buffer.position])
        for node in self.order:
            found: frozenset = frozenset()
            for atom in self.operands(node):
                if atom.is_Symbol:
                    found |= deps[atom]
            deps[node] = found
        self.deps = deps

    def deps_of(self, atom) -> frozenset:
        return self.deps.get(atom, frozenset()) if atom.is_Symbol else frozenset()

    def extent(self, deps: frozenset):
        """The name of the runtime extent of values that depend on the inputs ``deps``."""
        if not self.batch:
            return None
        name = self.extents.get(deps)
        if name is None:
            if len(deps) == 1:
                name = f"n{next(iter(deps))}"
            else:  # the largest of the inputs' (1 for none: a value made of constants)
                name = f"e{len(self.extent_list)}"
                self.extent_list.append((name, [f"n{p}" for p in sorted(deps)]))
            self.extents[deps] = name
        return name

    # -- what gets a buffer -------------------------------------------------------------

    def required(self) -> set:
        """Nodes that need a buffer whatever the fusion: outputs and the non-inlinable."""
        needed = {atom for atom in self.output_atoms if atom.__class__ is Node}
        for node in self.order:
            if node.primitive in _REDUCTIONS or node.primitive in _OWN_KERNEL:
                needed.add(node)
            if node.primitive is matmul_p:
                for operand in node.args:
                    base = self.matmul_operand(operand)[0]
                    if base.__class__ is Node:
                        needed.add(base)
        return needed

    def bounded_depth(self, materialized: set) -> set:
        """``materialized`` and every node whose inlined expression would nest more than
        :data:`MAX_INLINE_DEPTH` operations (a long chain is written in pieces, each read
        from the last one's buffer: no recursion limit, whatever the chain)."""
        materialized = set(materialized)
        depth: dict = {}
        for node in self.order:
            if node in materialized:
                depth[node] = 0
                continue
            inner = max([depth.get(self.resolve(a), 0) for a in node.args if a.is_Symbol], default=0)
            if inner >= MAX_INLINE_DEPTH:
                materialized.add(node)
                depth[node] = 0
            else:
                depth[node] = inner + 1
        return materialized

    def matmul_operand(self, arranged):
        """What a matrix product reads: below the reshapes, transposes and broadcasts that
        arrange an operand (index maps, or NumPy views), the atom that needs a buffer;
        and those operations, in order."""
        views, atom = [], arranged
        while atom.__class__ is Node and atom.primitive in (A.reshape_p, A.transpose_p, A.broadcast_p):
            views.append(atom)
            atom = self.resolve(atom.args[0])
        return atom, views[::-1]

    def plan(self, materialized: set) -> list:
        """The kernels, in order, for this choice of buffers."""
        self.materialized = materialized
        kernels: list = []
        completed_in: dict = {}  # node -> the kernel after which its buffer is complete
        self.shared = {}  # a reshape -> the node whose buffer it reads with its own shape
        outputs = {atom for atom in self.output_atoms if atom.__class__ is Node}
        for node in self.order:
            if node not in materialized or _is_constant_array(node):
                continue
            primitive = node.primitive
            if primitive is A.reshape_p:
                source = self.resolve(node.args[0])
                if source in materialized and source.__class__ is Node and not _is_constant_array(source) \
                        and source not in outputs and source not in self.shared.values():
                    self.shared[node] = source  # the same memory: no kernel
                    completed_in[node] = completed_in[source]
                    continue
            ext = self.extent(self.deps[node])
            if primitive in _OWN_KERNEL:
                kernel = _Kernel(primitive.name, (), ext, node=node)
                kernel.index = len(kernels)
                kernels.append(kernel)
            elif primitive in _REDUCTIONS:
                (operand,) = self.operands(node)
                kernel = self.place(kernels, completed_in, ("reduce", node, operand), _shape(operand), ext)
            else:
                kernel = self.place(kernels, completed_in, ("store", node), node.shape, ext)
            completed_in[node] = kernel.index
        for position, atom in enumerate(self.output_atoms):
            if self.output_is_copy(position):
                space = _shape(atom) if atom.is_Symbol else ()
                self.place(kernels, completed_in, ("copy", position, atom), space,
                           self.extent(self.deps_of(atom)))
        return kernels

    def output_is_copy(self, position: int) -> bool:
        """True if output ``position`` is written by a copy (not as a node's own buffer)."""
        atom = self.output_atoms[position]
        if atom.__class__ is not Node or _is_constant_array(atom):
            return True
        return self.output_atoms.index(atom) != position

    def place(self, kernels, completed_in, effect, space, ext) -> _Kernel:
        """Put ``effect`` in the first kernel of its space and extent it can join, or a new one.

        It can join a kernel once every buffer it reads is complete before it, or
        is one that kernel stores, read at the kernel's own index (computed there).
        """
        candidate = _Kernel("fused", space, ext, [effect])
        reads = self.probe(candidate).reads
        identity = tuple(f"j{d}" for d in range(len(space)))
        first = max([completed_in[node] for node, _ in reads if node in completed_in], default=-1)
        for kernel in kernels[max(first, 0):]:
            if kernel.kind != "fused" or kernel.space != candidate.space or kernel.ext != ext:
                continue
            if all(completed_in.get(node, -1) < kernel.index
                   or (node in kernel.produced and key == identity) for node, key in reads):
                kernel.effects.append(effect)
                if effect[0] == "store":
                    kernel.produced.add(effect[1])
                return kernel
        candidate.index = len(kernels)
        kernels.append(candidate)
        return candidate

    def probe(self, kernel) -> _Emitter:
        emitter = _Emitter(self, kernel, probe=True)
        emitter.run()
        return emitter

    def expensive_duplicates(self, kernels) -> set:
        """Inlined nodes worth a buffer: expensive ones computed more than once per element,
        and any read at more than :data:`MAX_SITES` indices."""
        sites: dict = {}
        repeated: set = set()
        for kernel in kernels:
            for node, key, again in self.probe(kernel).sites:
                sites.setdefault(node, set()).add((kernel.index, key))
                if again:
                    repeated.add(node)
        chosen = set()
        for node, where in sites.items():
            if len(where) > MAX_SITES or not _is_cheap(node) and (len(where) > 1 or node in repeated):
                chosen.add(node)
        return chosen

    # -- writing the program ---------------------------------------------------------------

    def write(self, kernels, materialized) -> LoopProgram:
        self.materialized = materialized
        self.buffers = {}
        outputs, boolean = [], []
        for position, atom in enumerate(self.output_atoms):
            is_boolean = (atom.__class__ is Node and atom.primitive.returns_boolean) \
                or isinstance(atom, sympy.logic.boolalg.BooleanAtom)
            boolean.append(bool(is_boolean))
            buffer = Buffer(f"o{position}", _shape(atom) if atom.is_Symbol else (), "output",
                            dtype="bool" if is_boolean else "float", position=position,
                            ext=self.extent(self.deps_of(atom)))
            outputs.append(buffer)
            if not self.output_is_copy(position):
                self.buffers[atom] = buffer
        for reshaped, source in self.shared.items():  # an output reshaping a node: its memory
            if reshaped in self.buffers:
                self.buffers[source] = self.buffers[reshaped].reshaped(source.shape)
        temporaries = []
        for node in self.order:
            if node in self.shared:
                continue
            if node in materialized and node not in self.buffers and not _is_constant_array(node):
                buffer = Buffer(f"t{len(temporaries)}", node.shape, "temp",
                                dtype="bool" if node.primitive.returns_boolean else "float",
                                ext=self.extent(self.deps[node]))
                self.buffers[node] = buffer
                temporaries.append(buffer)
        for reshaped, source in self.shared.items():
            if reshaped not in self.buffers:
                self.buffers[reshaped] = self.buffers[source].reshaped(reshaped.shape)
        self.output_buffers = outputs
        body, descriptions = [], []
        for kernel in kernels:
            emitter = _Emitter(self, kernel, probe=False)
            statements = _prune(emitter.run())
            temporaries.extend(emitter.partials)
            descriptions.append((_describe(kernel), max(1, math.prod(emitter.space)),
                                 _operations(statements)))
            body.append(Comment(descriptions[-1][0]))
            body.extend(statements)
        used = _used_buffers(body)
        constants = [b for b in self.constant_buffers.values() if b.name in used]
        temporaries = [b for b in temporaries if b.name in used]
        return LoopProgram(self.name, self.inputs, constants, temporaries, outputs,
                           [(n, deps) for n, deps in self.extent_list], body, descriptions,
                           tuple(boolean))

    def constant_buffer(self, value) -> Buffer:
        """The buffer of a constant array (or of a take's index table), made once per content."""
        buffer = self.constant_buffers.get(value)
        if buffer is None:
            integer = value.array.dtype.kind in "iu"
            buffer = Buffer(f"c{len(self.constant_buffers)}",
                            (value.array.size,) if integer else value.shape,
                            "table" if integer else "const", dtype="int" if integer else "float",
                            data=np.asarray(value.array).reshape(-1),
                            label=(f"indices of shape {value.shape}" if integer
                                   else f"a constant array of shape {value.shape}"))
            self.constant_buffers[value] = buffer
        return buffer

    def buffer_of(self, atom) -> Buffer:
        """The buffer holding ``atom`` (a materialized node, an input or a constant array)."""
        if atom in self.input_buffer:
            return self.input_buffer[atom]
        if _is_constant_array(atom):
            return self.constant_buffer(dict(atom.params)["value"])
        return self.buffers[atom]


def _used_buffers(statements) -> set:
    """The names of the buffers the statements read or write."""
    used: set = set()

    def expression(expr):
        if expr[0] == "load":
            used.add(expr[1].name)
            ix(expr[2])
        elif expr[0] == "op":
            for operand in expr[3]:
                expression(operand)
        elif expr[0] == "ix":
            ix(expr[1])
        elif expr[0] == "imin":
            ix(expr[1])
            ix(expr[2])

    def ix(index):
        for atom, _ in index.terms:
            if isinstance(atom, Gather):
                used.add(atom.table.name)
            if isinstance(atom, (Div, Mod, Gather)):
                ix(atom.ix)

    def walk(body):
        for statement in body:
            cls = statement.__class__
            if cls is Let or cls is Assign:
                expression(statement.expr)
            elif cls is Store or cls is Update:
                used.add(statement.buffer.name)
                ix(statement.ix)
                expression(statement.value)
            elif cls is If:
                for cond in statement.conds:
                    ix(cond[0])
                walk(statement.then)
                walk(statement.orelse)
            elif cls is Loop:
                for bound in statement.starts + statement.stops:
                    ix(bound)
                walk(statement.body)
            elif cls is Parallel or cls is Block:
                walk(statement.body)
            elif cls is Matmul:
                used.update((statement.out.name, statement.a[0].name, statement.b[0].name))
            elif cls is Combine:
                used.update((statement.out.name, statement.partial.name))

    walk(statements)
    return used


def _prune(statements: list) -> list:
    """``statements`` without the locals nothing reads (a zero dropped from a sum)."""
    while True:
        read: set = set()
        _names_read(statements, read)
        removed = []
        kept = _without_unread(statements, read, removed)
        if not removed:
            return kept
        statements = kept


def _names_read(statements, read: set) -> None:
    def expression(expr):
        kind = expr[0]
        if kind == "name":
            read.add(expr[1])
        elif kind == "load":
            read.update(expr[2].variables())
        elif kind == "op":
            for operand in expr[3]:
                expression(operand)
        elif kind == "ix":
            read.update(expr[1].variables())
        elif kind == "imin":
            read.update(expr[1].variables() | expr[2].variables())

    for statement in statements:
        cls = statement.__class__
        if cls is Let or cls is Assign:
            expression(statement.expr)
        elif cls is Declare:
            expression(statement.init)
        elif cls is Store or cls is Update:
            read.update(statement.ix.variables())
            expression(statement.value)
        elif cls is If:
            for cond in statement.conds:
                read.update(cond[0].variables())
            _names_read(statement.then, read)
            _names_read(statement.orelse, read)
        elif cls is Loop:
            for bound in statement.starts + statement.stops:
                read.update(bound.variables())
            _names_read(statement.body, read)
        elif cls is Parallel or cls is Block:
            read.update(statement.count.variables() if cls is Parallel else ())
            _names_read(statement.body, read)


def _without_unread(statements, read: set, removed: list) -> list:
    kept = []
    for statement in statements:
        cls = statement.__class__
        if cls is Let and statement.name not in read:
            removed.append(statement.name)
            continue
        if cls is If:
            statement.then = _without_unread(statement.then, read, removed)
            statement.orelse = _without_unread(statement.orelse, read, removed)
        elif cls in (Loop, Parallel, Block):
            statement.body = _without_unread(statement.body, read, removed)
        kept.append(statement)
    return kept


#: What a call of a mathematical function (exp, sin...) costs, in additions: a loop of
#: additions vectorizes, calls of the C library do not.
CALL_COST = 16


def _operations(statements) -> int:
    """About what the statements cost per element of their loops, in additions: each
    statement once, and of consecutive loops (ranges of one axis, each with its copy of
    the body) or two branches the larger."""
    count, alternatives = 0, 0
    for statement in statements:
        cls = statement.__class__
        if (cls is Let or cls is Assign) and statement.expr[0] == "op":
            name = statement.expr[1].name
            cheap = statement.expr[1].cost <= NATIVE or name == "power" and statement.expr[2] is not None \
                and not statement.expr[2].is_Symbol and _literal(statement.expr[2])[1] == 2.0
            count += 1 if cheap else CALL_COST
        elif cls is Update:
            count += 1
        elif cls in (Loop, Parallel, Block):
            alternatives = max(alternatives, _operations(statement.body))
        elif cls is If:
            count += max(_operations(statement.then), _operations(statement.orelse))
        elif cls is Matmul:
            count += 2 * statement.shape[2] * statement.shape[3]
    return count + alternatives


def _describe(kernel) -> str:
    if kernel.kind == "fused":
        parts = []
        for effect in kernel.effects:
            parts.append(f"output {effect[1]}" if effect[0] == "copy" else effect[1].primitive.name)
        return f"loops over {kernel.space if kernel.space else 'one value'}: {', '.join(parts)}"
    return f"{kernel.kind} of shape {kernel.node.shape}"


def _is_cheap(node) -> bool:
    if node.primitive.name == "power":
        exponent = node.args[1]
        return not exponent.is_Symbol and _literal(exponent)[1] in (1.0, 2.0, -1.0, 0.5)
    return node.primitive.cost <= NATIVE


def _maker(chain: list):
    """A node maker that also lists what it makes, in order (operands first)."""
    def make(primitive, args, params=(), shape=()):
        node = _node(primitive, args, params, shape)
        chain.append(node)
        return node
    return make


# ---------------------------------------------------------------------------
# Writing one kernel: frames of nested loops, each value computed once per index
# ---------------------------------------------------------------------------


class _Frame:
    """The statements of one scope being written: a loop body, a branch, the top."""

    __slots__ = ("stmts", "memo", "var", "is_if", "bounds")

    def __init__(self, var=None, is_if=False, bounds=None):
        self.stmts, self.memo, self.var, self.is_if, self.bounds = [], {}, var, is_if, bounds


class _Emitter:
    """Writes one kernel's statements; with ``probe``, only records what it would read,
    compute and test (no buffer needs to exist yet)."""

    def __init__(self, lowering: _Lowering, kernel: _Kernel, probe: bool):
        self.low = lowering
        self.kernel = kernel
        self.probe = probe
        self.frames: list = []
        self.level: dict = {}  # loop variable or local -> index of the frame defining it
        self.uses: dict = {}  # local -> the loop variables its value depends on
        self.if_level = 0  # innermost branch: nothing computed inside moves out of it
        self.space: tuple = ()
        self.rows, self.chunks = 1, 1
        self.plans: list = []
        self.segments: list = []
        self.accumulators: dict = {}
        #: (node, index key) of every buffer read
        self.reads: set = set()
        #: (node, index key, True if an enclosing loop repeats it for the same index)
        self.sites: list = []
        self.conditions: list = []
        self.partials: list = []
        self.kinds: dict = {}  # local -> "float" or "bool"
        self.zeros: set = set()  # locals known to hold 0.0 (an unslice outside its part)

    # -- frames ---------------------------------------------------------------------

    def push(self, frame: _Frame) -> _Frame:
        self.frames.append(frame)
        if frame.var is not None:
            self.level[frame.var] = len(self.frames) - 1
        return frame

    def pop(self) -> _Frame:
        frame = self.frames.pop()
        if frame.var is not None:
            self.level.pop(frame.var, None)
        return frame

    def bounds(self) -> dict:
        return {frame.var: frame.bounds for frame in self.frames if frame.bounds is not None}

    def lookup(self, key):
        for frame in reversed(self.frames):
            found = frame.memo.get(key)
            if found is not None:
                return found
        return None

    def define(self, statement, name: str, names: set, key=None):
        """Add ``name``'s defining statement in the outermost frame where everything it
        uses (loop variables, locals) is defined, and no further out than a branch."""
        # Nothing above the point's frame: a kernel's iterations are self-contained.
        level = max(self.if_level, min(1, len(self.frames) - 1))
        depends: set = set()
        for used in names:
            # Runtime extents (n0, e1) are known everywhere; anything else not found is
            # assumed defined in the innermost frame.
            default = 0 if used[0] in "ne" else len(self.frames) - 1
            level = max(level, self.level.get(used, default))
            depends |= self.uses.get(used, {used} if used.startswith("j") else set())
        self.frames[level].stmts.append(statement)
        self.level[name] = level
        self.uses[name] = depends
        operand = ("name", name)
        if key is not None:
            self.frames[level].memo[key] = operand
        return operand, level

    def here(self, statement) -> None:
        if statement.__class__ is Update:
            # Accumulated into: starts at the identity of the accumulation.
            buffer = statement.buffer.owner or statement.buffer
            if buffer.init is None:
                buffer.init = _IDENTITY[statement.primitive]
        self.frames[-1].stmts.append(statement)

    def remember(self, key, operand):
        """Also find ``operand`` under ``key`` (a view's index: the same value)."""
        if operand[0] == "name" and operand[1] in self.level:
            level = self.level[operand[1]]
            if level < len(self.frames):
                self.frames[level].memo[key] = operand
        return operand

    # -- values ---------------------------------------------------------------------

    def value(self, atom, ix: tuple):
        """The operand holding ``atom`` (any atom) at index ``ix`` of its shape."""
        if not atom.is_Symbol:
            return _literal(atom)
        low = self.low
        atom = low.resolve(atom)
        key = (atom, tuple(i.key for i in ix))
        found = self.lookup(key)
        if found is not None:
            return found
        buffer = low.input_buffer.get(atom)
        if buffer is not None:
            return self.load(buffer, ix, key)
        element = low.element_of.get(atom)
        if element is not None:
            return self.load(element[0], tuple(Ix.of(k) for k in element[1]), key)
        primitive = atom.primitive
        params = dict(atom.params)
        if primitive is A.constant_p:
            constant = params["value"]
            if constant.fill is None:
                return self.load(low.constant_buffer(constant), ix, key)
            if isinstance(constant.exact, sympy.logic.boolalg.BooleanAtom):
                return ("lit", bool(constant.exact))
            return ("lit", float(constant.fill))
        if atom in low.materialized and atom not in self.kernel.produced:
            self.reads.add(key)
            if self.probe:
                return self.define(Comment("a buffer"), low.fresh("v"), self.index_names(ix), key)[0]
            return self.load(low.buffers[atom], ix, key)
        if primitive.elementwise:
            operands = [self.value(a, broadcast_index(ix, atom.shape, _shape(a)) if a.is_Symbol else ())
                        for a in atom.args]
            return self.operation(atom, operands, key)
        operand = atom.args[0] if atom.args else None
        if primitive is A.broadcast_p:
            lead = len(atom.shape) - len(params["shape"])
            core = broadcast_index(ix[lead:], params["shape"], params["in_shape"])
            return self.remember(key, self.value(operand, ix[:lead] + core))
        if primitive is A.reshape_p:
            lead = len(atom.shape) - len(params["shape"])
            flat = flat_index(ix[lead:], params["shape"])
            return self.remember(key, self.value(operand, ix[:lead] + unflatten_index(flat, params["in_shape"])))
        if primitive is A.transpose_p:
            perm = params["perm"]
            lead = len(atom.shape) - len(perm)
            core = [None] * len(perm)
            for k, p in enumerate(perm):
                core[p] = ix[lead + k]
            return self.remember(key, self.value(operand, ix[:lead] + tuple(core)))
        if primitive is A.slice_p:
            return self.remember(key, self.value(operand, _slice_operand_index(ix, atom, params)))
        if primitive is A.take_p:
            return self.remember(key, self.value(operand, self.take_index(ix, atom, params)))
        if primitive is A.unslice_p:
            return self.unslice(atom, ix, params, key)
        if primitive is A.concatenate_p:
            return self.concatenate(atom, ix, params, key)
        if primitive is A.scatter_p:
            return self.scatter(atom, ix, params, key)
        raise CompileError(f"{low.name}: {primitive.name} cannot be read at one index")  # pragma: no cover

    def index_names(self, ix: tuple) -> set:
        names: set = set(self.batch_names())
        for i in ix:
            names |= i.variables()
        return names

    def batch_names(self) -> set:
        return {"b"} if self.low.batch else set()

    def batch_index(self, buffer: Buffer):
        """The batch index of ``buffer`` at this kernel's point (None: it has no batch)."""
        if buffer.ext is None:
            return None
        if buffer.ext == self.kernel.ext:
            return Ix.var("b")
        key = ("batch", buffer.ext)
        found = self.lookup(key)
        if found is None:  # its extent is 1 or this kernel's: the point, or its only row
            name = self.low.fresh("p")
            found, _ = self.define(Let(name, ("imin", Ix.var("b"), Ix.var(buffer.ext, 1) - 1), "int"),
                                   name, {"b"}, key)
        return Ix.var(found[1])

    def flat(self, buffer: Buffer, ix: tuple) -> Ix:
        flat = flat_index(ix, buffer.shape)
        batch = self.batch_index(buffer)
        return flat if batch is None else flat + batch * buffer.size

    def load(self, buffer: Buffer, ix: tuple, key=None):
        """A local holding ``buffer`` at ``ix``."""
        flat = self.flat(buffer, ix)
        name = self.low.fresh("v")
        kind = "bool" if buffer.dtype == "bool" else "float"
        self.kinds[name] = kind
        return self.define(Let(name, ("load", buffer, flat), kind), name, flat.variables(), key)[0]

    def operation(self, node, operands, key):
        # Placed after every operand, including zeros dropped from a sum: those hold only
        # within the loop ranges that decided them.
        names = {operand[1] for operand in operands if operand[0] == "name"}
        if node.primitive is add_p:  # the zeros an unslice gives where it holds nothing
            kept = [o for o in operands if o != ("lit", 0.0) and not (o[0] == "name" and o[1] in self.zeros)]
            if len(kept) == 1 and kept[0][0] == "name" and len(kept) < len(operands):
                # The sum is the one operand, where the zeros are known to be zeros.
                if max(self.level[n] for n in names) == self.level[kept[0][1]]:
                    return self.remember(key, kept[0])
                name = self.low.fresh("v")
                return self.define(Let(name, kept[0], "float"), name, names, key)[0]
            operands = kept if len(kept) > 1 else operands
        name = self.low.fresh("v")
        kind = "bool" if node.primitive.returns_boolean else "float"
        exponent = node.args[1] if node.primitive.name == "power" else None
        operand, level = self.define(Let(name, ("op", node.primitive, exponent, operands), kind),
                                     name, names, key)
        self.kinds[name] = kind
        if self.probe:
            enclosing = {frame.var for frame in self.frames[: level + 1]
                         if frame.var is not None and frame.var.startswith("j")}
            self.sites.append((node, key[1], bool(enclosing - self.uses[name])))
        return operand

    def take_index(self, ix, node, params):
        in_shape, axis, indices = params["in_shape"], params["axis"], params["indices"]
        lead = len(node.shape) - (len(in_shape) - 1 + indices.array.ndim)
        at = lead + len(in_shape) + axis
        return ix[:at] + (self.gather(indices, ix[at: at + indices.array.ndim]),) + ix[at + indices.array.ndim:]

    def gather(self, indices, part: tuple) -> Ix:
        data = indices.array
        lo, hi = (int(data.min()), int(data.max())) if data.size else (0, 0)
        return Ix({Gather(self.low.constant_buffer(indices), flat_index(part, data.shape), lo, hi): 1})

    # -- piecewise values -------------------------------------------------------------

    def decide(self, cond):
        """True or False where the loop ranges decide ``cond``, else None (a branch)."""
        ix, lo, hi, step, offset = cond
        if self.probe:
            self.conditions.append(cond)
        if hi <= lo:
            return False
        a, b = ix_bounds(ix, self.bounds())
        if a is None or b is None:
            return None
        if b < lo or a >= hi:
            return False
        if a >= lo and b < hi:
            if step == 1:
                return True
            if a == b:
                return (a - offset) % step == 0
        return None

    def piecewise(self, key, branches, otherwise):
        """The value of the first branch whose conditions hold (``otherwise()`` if none).

        ``branches``: ``(conditions, thunk)``; a thunk computes its value when
        called, inside its branch, so nothing is read outside where it is valid.
        """
        live, decided = [], []
        for conds, thunk in branches:
            states = [self.decide(c) for c in conds]
            decided += [c for c, state in zip(conds, states) if state is not None]
            if False in states:
                continue
            dynamic = [self.residual(c) for c, s in zip(conds, states) if s is None]
            live.append((dynamic, thunk))
            if not dynamic:
                break
        else:
            live.append(([], otherwise))
        if not live[0][0]:
            return self.decided(key, live[0][1](), decided)
        name = self.low.fresh("v")
        self.here(Declare(name, "float", ("lit", 0.0)))
        level = len(self.frames) - 1
        self.here(self.branches(name, live))
        depends: set = set()
        for conds, _ in live:
            for cond in conds:
                depends |= {v for v in cond[0].variables() if v.startswith("j")}
        self.level[name], self.uses[name] = level, depends | set(self.batch_names())
        self.frames[level].memo[key] = ("name", name)
        return ("name", name)

    def residual(self, cond):
        """What is left to test of ``cond``: its step alone where the loop ranges keep the
        index within its bounds (a range of None: no test)."""
        ix, lo, hi, step, offset = cond
        a, b = ix_bounds(ix, self.bounds())
        if step > 1 and a is not None and b is not None and lo <= a and b < hi:
            return (ix, None, None, step, offset)
        return cond

    def decided(self, key, operand, conds):
        """A piecewise value known from the loop ranges: what it is holds only within the
        loops whose ranges decided it, so it gets a local there, and all computed from it
        stays inside them (the next range may decide otherwise)."""
        names = {v for cond in conds for v in cond[0].variables()}
        if not names:
            return self.remember(key, operand)
        if operand[0] == "name":
            inside = max([self.if_level] + [self.level.get(v, 0) for v in names])
            if self.level.get(operand[1], -1) >= inside:  # defined inside those loops already
                return self.remember(key, operand)
            names.add(operand[1])
        name = self.low.fresh("v")
        kind = "float" if operand[0] == "lit" else self.kinds.get(operand[1], "float")
        copy, _ = self.define(Let(name, operand, kind), name, names, key)
        if operand == ("lit", 0.0) or operand[0] == "name" and operand[1] in self.zeros:
            self.zeros.add(name)
        return copy

    def branches(self, name, live) -> If:
        conds, thunk = live[0]
        then = self.branch(lambda: self.here(Assign(name, thunk())))
        rest = live[1:]
        if not rest:
            return If(conds, then, [])
        if rest[0][0]:
            return If(conds, then, self.branch(lambda: self.here(self.branches(name, rest))))
        orelse = self.branch(lambda: self.here(Assign(name, rest[0][1]())))
        if len(orelse) == 1 and orelse[0].expr == ("lit", 0.0):
            orelse = []  # the declared value already
        return If(conds, then, orelse)

    def branch(self, body) -> list:
        frame = self.push(_Frame(is_if=True))
        outer, self.if_level = self.if_level, len(self.frames) - 1
        try:
            body()
        finally:
            self.if_level = outer
            self.pop()
        return frame.stmts

    def region(self, ix, lead, in_shape, index):
        """The conditions for ``ix`` (lead + whole) to lie in a basic ``index``'s selection,
        and the part's core index there."""
        conds, part, axis = [], [], lead
        for item in index:
            if item[0] == "n":
                part.append(ZERO)
                continue
            cond, inner = _slice_condition(ix[axis], item)
            if not (cond[1] <= 0 and cond[2] >= in_shape[axis - lead] and cond[3] == 1):
                conds.append(cond)
            if inner is not None:
                part.append(inner)
            axis += 1
        return conds, tuple(part)

    def unslice(self, node, ix, params, key):
        in_shape, index = params["in_shape"], params["index"]
        (operand,) = node.args
        lead = len(node.shape) - len(in_shape)
        conds, part = self.region(ix, lead, in_shape, index)
        return self.piecewise(key, [(conds, lambda: self.value(operand, ix[:lead] + part))],
                              lambda: ("lit", 0.0))

    def scatter(self, node, ix, params, key):
        in_shape, index = params["in_shape"], params["index"]
        x, v = node.args
        lead = len(node.shape) - len(in_shape)
        conds, part = self.region(ix, lead, in_shape, index)
        part_shape = tuple(node.shape[:lead]) + A._dummy(in_shape)[A.index_objects(index)].shape

        def inside():
            return self.value(v, broadcast_index(ix[:lead] + part, part_shape, _shape(v))
                              if v.is_Symbol else ())

        def outside():
            return self.value(x, broadcast_index(ix, node.shape, _shape(x)) if x.is_Symbol else ())

        return self.piecewise(key, [(conds, inside)], outside)

    def concatenate(self, node, ix, params, key):
        axis, cores = params["axis"], params["in_shapes"]
        position = len(node.shape) + axis
        branches, start = [], 0
        for operand, core in zip(node.args, cores):
            stop = start + core[axis]
            shifted = ix[:position] + (ix[position] - start,) + ix[position + 1:]

            def thunk(operand=operand, shifted=shifted):
                return self.value(operand, broadcast_index(shifted, node.shape, _shape(operand))
                                  if operand.is_Symbol else ())

            branches.append(([(ix[position], start, stop, 1, 0)], thunk))
            start = stop
        last = branches.pop()
        return self.piecewise(key, branches, last[1])

    # -- the loops of a kernel ------------------------------------------------------------

    def run(self) -> list:
        """The kernel's statements (and, probing, what they read and compute)."""
        kernel = self.kernel
        if kernel.kind == "fused":
            self.space = kernel.space
            reductions = [e for e in kernel.effects if e[0] == "reduce"]
            return self.nest(_Emitter.fused_body, reductions)
        node = kernel.node
        params = dict(node.params)
        if kernel.kind == "cumsum":
            self.space = node.shape
            axis = len(node.shape) + params["axis"]
            return self.nest(lambda emitter: emitter.cumsum_body(node, axis),
                             scan=(axis, params["reverse"]))
        if kernel.kind == "take_add":
            (operand,) = self.low.operands(node)
            self.space = _shape(operand) if operand.is_Symbol else ()
            lead = len(node.shape) - len(params["in_shape"])
            at = lead + len(params["in_shape"]) + params["axis"]
            # Threads may share the first axis only where different elements go to different places.
            return self.nest(lambda emitter: emitter.take_add_body(node, params, at), chunked=at > 0)
        if kernel.kind == "pack":
            return self.pack(node, params)
        return self.matmul(node)

    def nest(self, body, reductions=(), scan=None, chunked=True) -> list:
        """Loops over ``self.space`` (and the batch) around ``body(self)``."""
        space, low = self.space, self.low
        self.rows, self.chunks = (space[0] if space else 1), 1
        if low.parallel and space and chunked and not (scan and scan[0] == 0):
            rows = max(1, -(-CHUNK_ELEMENTS // max(1, math.prod(space[1:]))))
            if space[0] > rows:
                self.rows, self.chunks = rows, -(-space[0] // rows)
        self.plans = [self.reduction_plan(effect) for effect in reductions]
        self.segments = [[(0, size)] for size in space]
        if not self.probe:
            self.segments = self.split(body, scan)
        top = self.push(_Frame())
        frame = self.push(_Frame(var="b" if low.batch else None))
        if low.batch:
            self.level["c"] = self.level["t"] = len(self.frames) - 1
            if self.chunks > 1:
                frame.stmts.append(Let("b", ("ix", Ix.var("t") // self.chunks), "int"))
                frame.stmts.append(Let("c", ("ix", Ix.var("t") % self.chunks), "int"))
            else:
                frame.stmts.append(Let("b", ("ix", Ix.var("t")), "int"))
        self.axes(0, body, scan)
        self.pop()
        if low.batch:
            count = Ix.var(self.kernel.ext, 1) * self.chunks
            elements = self.rows * math.prod(space[1:]) if space else 1
            top.stmts.append(Parallel("t", count, frame.stmts, max(1, elements),
                                      max(1, _operations(frame.stmts))))
        else:
            top.stmts.append(Block(frame.stmts))
        self.pop()
        top.stmts.extend(self.combine_chunks())
        return top.stmts

    def split(self, body, scan) -> list:
        """Each axis cut into ranges at the bounds of the conditions tested on it, innermost
        axes first (their branches would run once per element), up to
        :data:`MAX_SPECIALISED_BODIES` copies of the body."""
        space = self.space
        probe = _Emitter(self.low, self.kernel, probe=True)
        probe.space, probe.rows, probe.chunks = space, self.rows, self.chunks
        probe.plans = [dict(plan, partial=None) for plan in self.plans]
        probe.segments = [[(0, size)] for size in space]
        probe.push(_Frame())
        probe.push(_Frame(var="b" if self.low.batch else None))
        probe.axes(0, body, scan)
        cuts = [set() for _ in space]
        for ix, lo, hi, _, _ in probe.conditions:
            single = ix.single_variable()
            if single is None or not single[0].startswith("j"):
                continue
            axis = int(single[0][1:])
            cuts[axis] |= {p for p in (lo - single[1], hi - single[1]) if 0 < p < space[axis]}
        segments = [[(0, size)] for size in space]
        budget = MAX_SPECIALISED_BODIES
        for axis in range(len(space) - 1, -1, -1):
            pieces = len(cuts[axis]) + 1
            if 1 < pieces <= budget:
                points = [0] + sorted(cuts[axis]) + [space[axis]]
                segments[axis] = list(zip(points[:-1], points[1:]))
                budget //= pieces
        return segments

    def axes(self, d: int, body, scan) -> None:
        if d == len(self.space):
            body(self)
            return
        self.open_reductions(d)
        reverse = bool(scan and scan[0] == d and scan[1])
        segments = self.segments[d][::-1] if reverse else self.segments[d]
        for lo, hi in segments:
            var = f"j{d}"
            self.push(_Frame(var=var, bounds=(lo, hi - 1)))
            self.axes(d + 1, body, scan)
            frame = self.pop()
            if not frame.stmts:
                continue
            if hi - lo == 1 and not (d == 0 and self.chunks > 1):
                # One iteration: the index is a number (less for the compiler to look at).
                self.here(Block([Let(var, ("ix", Ix.of(lo)), "int")] + frame.stmts))
                continue
            starts, stops = [Ix.of(lo)], [Ix.of(hi)]
            if d == 0 and self.chunks > 1:
                starts.append(Ix.var("c") * self.rows)
                stops.append(Ix.var("c") * self.rows + self.rows)
            self.here(Loop(var, starts, stops, frame.stmts, reverse))
        self.close_reductions(d)

    def identity_index(self) -> tuple:
        return tuple(Ix.var(f"j{d}", 0, size - 1) for d, size in enumerate(self.space))

    # -- reductions --------------------------------------------------------------------

    def reduction_plan(self, effect) -> dict:
        """How a reduction accumulates in this kernel's loops.

        Over a trailing run of axes (``suffix`` on), into a local started before
        the first of them and written after; over any other axis, into the
        buffer itself (started at the identity). Over the first axis when
        threads share it: into one partial result per chunk, combined after.
        """
        node, operand = effect[1], effect[2]
        ndim = len(self.space)
        axes = sorted(ndim + a for a in dict(node.params)["axes"])
        suffix = ndim
        while suffix > 0 and suffix - 1 in axes:
            suffix -= 1
        combine, identity = _REDUCTIONS[node.primitive]
        kept = [d for d in range(ndim) if d not in axes]
        across_chunks = bool(axes) and axes[0] == 0 and self.chunks > 1
        partial = None
        if across_chunks and not self.probe:
            partial = Buffer(self.low.fresh("s"), (self.chunks,) + tuple(self.space[d] for d in kept),
                             "partial", ext=self.kernel.ext, init=identity)
            self.partials.append(partial)
        return {"node": node, "operand": operand, "suffix": suffix, "kept": kept, "combine": combine,
                "identity": identity, "partial": partial, "across_chunks": across_chunks,
                "in_place": any(d < suffix for d in axes)}

    def open_reductions(self, d) -> None:
        for plan in self.plans:
            if plan["suffix"] == d:
                name = self.low.fresh("a")
                self.here(Declare(name, "float", ("lit", plan["identity"])))
                self.accumulators[id(plan)] = name

    def close_reductions(self, d) -> None:
        for plan in self.plans:
            if plan["suffix"] == d:
                self.finish(plan, ("name", self.accumulators.pop(id(plan))))

    def finish(self, plan, value) -> None:
        """Write (or accumulate) a reduction's value at the current kept index."""
        kept = tuple(Ix.var(f"j{d}", 0, self.space[d] - 1) for d in plan["kept"])
        if plan["across_chunks"]:
            buffer, ix = plan["partial"], (Ix.var("c", 0, self.chunks - 1),) + kept
        else:
            buffer, ix = (None if self.probe else self.low.buffers[plan["node"]]), kept
        if buffer is None:
            return
        if plan["in_place"]:
            self.here(Update(buffer, self.flat(buffer, ix), plan["combine"], value))
        else:
            self.here(Store(buffer, self.flat(buffer, ix), value))

    def combine_chunks(self) -> list:
        """After a kernel whose threads shared a reduced first axis: the chunks' partial
        results combined, in chunk order (the same result whatever the threads did)."""
        return [Combine(plan["partial"], self.low.buffers[plan["node"]], self.chunks, plan["combine"])
                for plan in self.plans if plan["partial"] is not None]

    # -- kernel bodies ------------------------------------------------------------------

    def fused_body(self) -> None:
        ix = self.identity_index()
        for effect in self.kernel.effects:
            if effect[0] == "store":
                node = effect[1]
                value = self.value(node, ix)
                if not self.probe:
                    buffer = self.low.buffers[node]
                    self.here(Store(buffer, self.flat(buffer, ix), value))
            elif effect[0] == "copy":
                value = self.value(effect[2], ix)
                if not self.probe:
                    buffer = self.low.output_buffers[effect[1]]
                    self.here(Store(buffer, self.flat(buffer, ix), value))
        for plan in self.plans:
            value = self.value(plan["operand"], ix)
            name = self.accumulators.get(id(plan))
            if name is not None:
                self.here(Assign(name, ("op", plan["combine"], None, [("name", name), value])))
            else:
                self.finish(plan, value)

    def cumsum_body(self, node, axis) -> None:
        """``out[i] = out[i - 1] + x[i]`` along the axis, in NumPy's order (the same rounding)."""
        ix = self.identity_index()
        (operand,) = self.low.operands(node)
        value = self.value(operand, ix)
        reverse = dict(node.params)["reverse"]
        size = self.space[axis]
        buffer = None if self.probe else self.low.buffers[node]
        previous = ix[:axis] + (ix[axis] + (1 if reverse else -1),) + ix[axis + 1:]
        condition = (ix[axis], 0, size - 1, 1, 0) if reverse else (ix[axis], 1, size, 1, 0)

        def with_previous():
            if buffer is None:
                return value
            before = self.load(buffer, previous)
            total = self.low.fresh("v")
            names = {o[1] for o in (before, value) if o[0] == "name"}
            return self.define(Let(total, ("op", add_p, None, [before, value]), "float"), total, names)[0]

        key = ("cumsum", tuple(i.key for i in ix))
        result = self.piecewise(key, [([condition], with_previous)], lambda: value)
        if buffer is not None:
            self.here(Store(buffer, self.flat(buffer, ix), result))

    def take_add_body(self, node, params, at) -> None:
        ix = self.identity_index()
        (operand,) = self.low.operands(node)
        value = self.value(operand, ix)
        indices = params["indices"]
        count = indices.array.ndim
        target = ix[:at] + (self.gather(indices, ix[at: at + count]),) + ix[at + count:]
        if not self.probe:
            buffer = self.low.buffers[node]
            self.here(Update(buffer, self.flat(buffer, target), add_p, value))

    def pack(self, node, params) -> list:
        """A packed array: its base (if any) copied, then each scalar stored at its position."""
        shape, positions = params["shape"], params["positions"]
        operands = self.low.operands(node)
        base = operands.pop(0) if params["has_base"] else None
        lead = tuple(node.shape[: len(node.shape) - len(shape)])
        buffer = None if self.probe else self.low.buffers[node]
        statements = []
        if base is not None:
            self.space = node.shape

            def copy_base(emitter):
                ix = emitter.identity_index()
                value = emitter.value(base, broadcast_index(ix, node.shape, _shape(base))
                                      if base.is_Symbol else ())
                if buffer is not None:
                    emitter.here(Store(buffer, emitter.flat(buffer, ix), value))

            statements.extend(self.nest(copy_base))
        self.space, self.rows, self.chunks = lead, 1, 1

        def put_elements(emitter):
            ix = emitter.identity_index()
            for position, operand in zip(positions, operands):
                value = emitter.value(operand, broadcast_index(ix, lead, _shape(operand))
                                      if operand.is_Symbol else ())
                if buffer is not None:
                    whole = ix + unflatten_index(Ix.of(position), shape)
                    emitter.here(Store(buffer, emitter.flat(buffer, whole), value))

        statements.extend(self.nest(put_elements))
        return statements

    def matmul(self, node) -> list:
        G, M, N = node.shape
        left, right = node.args
        K = _shape(left)[2]
        low = self.low
        operands = [low.matmul_operand(operand) for operand in (left, right)]
        if self.probe:
            self.reads |= {(base, None) for base, _ in operands}
            return []
        out = low.buffers[node]
        if low.blas and M * K * N >= BLAS_MIN_FLOPS:
            self.space = (G, M)
            a, b = ((low.buffer_of(base), views) for base, views in operands)
            return [Matmul(out, a, b, (G, M, K, N))]
        # Loops: out[g, m, :] += a[g, m, k] * b[g, k, :], the innermost along rows of b and out;
        # the operands read through their arrangement's index maps.
        self.space = (G, M, K, N)

        def product(emitter):
            g, m, k, n = emitter.identity_index()
            x, y = emitter.value(left, (g, m, k)), emitter.value(right, (g, k, n))
            name = low.fresh("v")
            names = {o[1] for o in (x, y) if o[0] == "name"}
            product, _ = emitter.define(Let(name, ("op", mul_p, None, [x, y]), "float"), name, names)
            emitter.here(Update(out, emitter.flat(out, (g, m, n)), add_p, product))

        return self.nest(product)


def _slice_operand_index(ix, node, params) -> tuple:
    """The operand's index under ``x[index]`` at the part's index ``ix``."""
    index = params["index"]
    lead = len(node.shape) - sum(1 for item in index if item[0] != "i")
    out, k = list(ix[:lead]), lead
    for item in index:
        if item[0] == "i":
            out.append(Ix.of(item[1]))
        elif item[0] == "s":
            out.append(ix[k] * item[3] + item[1])
            k += 1
        else:
            k += 1
    return tuple(out)
