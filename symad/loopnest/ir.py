"""The loop-nest representation: index arithmetic, buffers, statements, a program.

What :mod:`symad.loopnest.planning` produces and the printers read
(:mod:`symad.compile.arrays.numba_loops`, :mod:`symad.export.c_loops`): a
:class:`LoopProgram` of buffers and kernels, each a short list of statements
(loops, assignments, loads, stores, conditions, matrix products) over integer
index expressions (:class:`Ix`). Also the walks over statements that the
lowering and the printers share (which buffers they use, what they read).
"""

from __future__ import annotations

import math

import sympy

from symad.errors import CompileError
from symad.graph import ArrayInput, Node
from symad.ir.primitive import NATIVE

__all__ = ["LoopProgram", "Buffer", "LoopsUnsupported", "Ix", "ExpressionPrinter", "CHUNK_ELEMENTS",
           "used_buffers", "names_read", "prune", "literal_operand", "shape_of", "operation_count"]

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


def slice_condition(ix: Ix, item: tuple):
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


def shape_of(atom) -> tuple:
    cls = atom.__class__
    return atom.shape if cls is Node or cls is ArrayInput else ()


def literal_operand(atom):
    """An operand for a constant atom (a SymPy number or truth value)."""
    if isinstance(atom, sympy.logic.boolalg.BooleanAtom):
        return ("lit", bool(atom))
    from symad.atoms import constant_value

    return ("lit", float(constant_value(atom)))


def used_buffers(statements) -> set:
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


def prune(statements: list) -> list:
    """``statements`` without the locals nothing reads (a zero dropped from a sum)."""
    while True:
        read: set = set()
        names_read(statements, read)
        removed = []
        kept = _without_unread(statements, read, removed)
        if not removed:
            return kept
        statements = kept


def names_read(statements, read: set) -> None:
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
            names_read(statement.then, read)
            names_read(statement.orelse, read)
        elif cls is Loop:
            for bound in statement.starts + statement.stops:
                read.update(bound.variables())
            names_read(statement.body, read)
        elif cls is Parallel or cls is Block:
            read.update(statement.count.variables() if cls is Parallel else ())
            names_read(statement.body, read)


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


def operation_count(statements) -> int:
    """About what the statements cost per element of their loops, in additions: each
    statement once, and of consecutive loops (ranges of one axis, each with its copy of
    the body) or two branches the larger."""
    count, alternatives = 0, 0
    for statement in statements:
        cls = statement.__class__
        if (cls is Let or cls is Assign) and statement.expr[0] == "op":
            name = statement.expr[1].name
            cheap = statement.expr[1].cost <= NATIVE or name == "power" and statement.expr[2] is not None \
                and not statement.expr[2].is_Symbol and literal_operand(statement.expr[2])[1] == 2.0
            count += 1 if cheap else CALL_COST
        elif cls is Update:
            count += 1
        elif cls in (Loop, Parallel, Block):
            alternatives = max(alternatives, operation_count(statement.body))
        elif cls is If:
            count += max(operation_count(statement.then), operation_count(statement.orelse))
        elif cls is Matmul:
            count += 2 * statement.shape[2] * statement.shape[3]
    return count + alternatives
