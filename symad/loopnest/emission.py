"""Writing one kernel: frames of nested loops, each value computed once per index.

:class:`KernelEmitter` turns one :class:`~symad.loopnest.planning.Kernel`
into the statements of :mod:`symad.loopnest.ir`.
"""

from __future__ import annotations

import math

import sympy

from symad import array_primitives as A
from symad.errors import CompileError
from symad.loopnest.ir import (
    BLAS_MIN_FLOPS,
    CHUNK_ELEMENTS,
    MAX_SPECIALISED_BODIES,
    ZERO,
    Assign,
    Block,
    Buffer,
    Combine,
    Comment,
    Declare,
    Gather,
    If,
    Ix,
    Let,
    Loop,
    Matmul,
    Parallel,
    Store,
    Update,
    broadcast_index,
    flat_index,
    ix_bounds,
    literal_operand,
    operation_count,
    shape_of,
    slice_condition,
    unflatten_index,
)
from symad.loopnest.nodes import IDENTITY, REDUCTIONS, matmul_p
from symad.primitives import (
    add_p,
    mul_p,
)

__all__ = ["KernelEmitter", "OWN_KERNEL"]

#: Primitives with a kernel of their own (they are not a value at one index of their inputs).
OWN_KERNEL = (A.cumsum_p, A.take_add_p, A.pack_p, matmul_p)

# ---------------------------------------------------------------------------
# Writing one kernel: frames of nested loops, each value computed once per index
# ---------------------------------------------------------------------------


class _Frame:
    """The statements of one scope being written: a loop body, a branch, the top."""

    __slots__ = ("stmts", "memo", "var", "is_if", "bounds")

    def __init__(self, var=None, is_if=False, bounds=None):
        self.stmts, self.memo, self.var, self.is_if, self.bounds = [], {}, var, is_if, bounds


class KernelEmitter:
    """Writes one kernel's statements; with ``probe``, only records what it would read,
    compute and test (no buffer needs to exist yet). ``lowering`` is the
    :class:`~symad.loopnest.planning.LoopLowering` that owns the buffers, ``kernel`` the
    :class:`~symad.loopnest.planning.Kernel` to write."""

    def __init__(self, lowering, kernel, probe: bool):
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
                buffer.init = IDENTITY[statement.primitive]
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
            return literal_operand(atom)
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
            operands = [self.value(a, broadcast_index(ix, atom.shape, shape_of(a)) if a.is_Symbol else ())
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
            cond, inner = slice_condition(ix[axis], item)
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
        part_shape = tuple(node.shape[:lead]) + A.dummy_array(in_shape)[A.index_objects(index)].shape

        def inside():
            return self.value(v, broadcast_index(ix[:lead] + part, part_shape, shape_of(v))
                              if v.is_Symbol else ())

        def outside():
            return self.value(x, broadcast_index(ix, node.shape, shape_of(x)) if x.is_Symbol else ())

        return self.piecewise(key, [(conds, inside)], outside)

    def concatenate(self, node, ix, params, key):
        axis, cores = params["axis"], params["in_shapes"]
        position = len(node.shape) + axis
        branches, start = [], 0
        for operand, core in zip(node.args, cores):
            stop = start + core[axis]
            shifted = ix[:position] + (ix[position] - start,) + ix[position + 1:]

            def thunk(operand=operand, shifted=shifted):
                return self.value(operand, broadcast_index(shifted, node.shape, shape_of(operand))
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
            return self.nest(KernelEmitter.fused_body, reductions)
        node = kernel.node
        params = dict(node.params)
        if kernel.kind == "cumsum":
            self.space = node.shape
            axis = len(node.shape) + params["axis"]
            return self.nest(lambda emitter: emitter.cumsum_body(node, axis),
                             scan=(axis, params["reverse"]))
        if kernel.kind == "take_add":
            (operand,) = self.low.operands(node)
            self.space = shape_of(operand) if operand.is_Symbol else ()
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
                                      max(1, operation_count(frame.stmts))))
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
        probe = KernelEmitter(self.low, self.kernel, probe=True)
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
        combine, identity = REDUCTIONS[node.primitive]
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
                value = emitter.value(base, broadcast_index(ix, node.shape, shape_of(base))
                                      if base.is_Symbol else ())
                if buffer is not None:
                    emitter.here(Store(buffer, emitter.flat(buffer, ix), value))

            statements.extend(self.nest(copy_base))
        self.space, self.rows, self.chunks = lead, 1, 1

        def put_elements(emitter):
            ix = emitter.identity_index()
            for position, operand in zip(positions, operands):
                value = emitter.value(operand, broadcast_index(ix, lead, shape_of(operand))
                                      if operand.is_Symbol else ())
                if buffer is not None:
                    whole = ix + unflatten_index(Ix.of(position), shape)
                    emitter.here(Store(buffer, emitter.flat(buffer, whole), value))

        statements.extend(self.nest(put_elements))
        return statements

    def matmul(self, node) -> list:
        G, M, N = node.shape
        left, right = node.args
        K = shape_of(left)[2]
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
