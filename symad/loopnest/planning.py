"""Planning the loop program: which nodes are materialized, and which share a kernel.

:func:`lower_loops` walks the graph once (:class:`LoopLowering`), decides
the buffers and groups the materialized nodes into kernels
(:class:`Kernel`), then has :mod:`symad.loopnest.emission` write each
kernel's statements.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import sympy

from symad import array_primitives as A
from symad.errors import CompileError
from symad.linalg_primitives import LINALG_PRIMITIVES
from symad.graph import ArrayInput, Node
from symad.loopnest.emission import OWN_KERNEL, KernelEmitter
from symad.loopnest.ir import (
    MAX_INLINE_DEPTH,
    MAX_SITES,
    Buffer,
    Comment,
    LoopProgram,
    LoopsUnsupported,
    literal_operand,
    operation_count,
    prune,
    shape_of,
    used_buffers,
)
from symad.loopnest.nodes import (
    REDUCTIONS,
    is_cheap,
    is_constant_array,
    make_node,
    matmul_p,
    node_maker,
)
from symad.primitives import (
    add_p,
    equal_p,
    exp_p,
    log_p,
    logsumexp_p,
    reduce_max_p,
    select_p,
    sub_p,
)

#: Array primitives the loop nests do not write yet: a sort needs a stable merge sort per row
#: (and its gathers read a position computed at run time), so numba falls back to numexpr,
#: loudly, and C export names them.
#: Array primitives the loop nests have no form for: the numba backend falls back for them.
NO_LOOP_FORM = frozenset({A.argsort_p, A.take_along_p, A.take_along_add_p, *LINALG_PRIMITIVES})

__all__ = ["lower_loops", "LoopLowering", "Kernel"]


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
    return LoopLowering(graph, batch=batch, name=name,
                     parallel=batch if parallel is None else parallel,
                     blas=batch if blas is None else blas, spellable=spellable).lower()


class Kernel:
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


class LoopLowering:
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
            buffer = Buffer(f"i{position}", shape_of(atom), "input", position=position,
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
        shape = shape_of(x)
        reduced = {len(shape) + a for a in dict(node.params)["axes"]}
        keep = tuple(1 if k in reduced else size for k, size in enumerate(shape))
        chain: list = []
        make = node_maker(chain)
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
        make = node_maker(chain)
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
            shape = shape_of(atom) if atom.is_Symbol else ()
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
                atom = make_node(A.constant_p, (), (("value", A.ConstantArray(
                    np.full(tuple(size[c] for c in letters), literal_operand(atom)[1]))),),
                    tuple(size[c] for c in letters))
                chain.append(atom)
            shape = shape_of(atom)
            full = lead + tuple(size[c] for c in letters)
            if shape != full:
                atom = make_node(A.broadcast_p, (atom,), (("in_shape", shape), ("shape", full)), full)
                chain.append(atom)
            perm = tuple(range(len(lead))) + tuple(len(lead) + letters.index(c)
                                                   for c in batch + first + second)
            if perm != tuple(range(len(full))):
                atom = make_node(A.transpose_p, (atom,), (("perm", perm),), tuple(full[p] for p in perm))
                chain.append(atom)
            if shape_of(atom) != (G, rows, columns):
                atom = make_node(A.reshape_p, (atom,), (("in_shape", shape_of(atom)), ("shape", (G, rows, columns))),
                             (G, rows, columns))
                chain.append(atom)
            return atom

        left = arrange(a, sa, a_only, contracted, M, K)
        right = arrange(b, sb, contracted, b_only, K, N)
        atom = make_node(matmul_p, (left, right), (), (G, M, N))
        chain.append(atom)
        produced = lead + tuple(size[c] for c in batch + a_only + b_only)
        if produced != (G, M, N):
            atom = make_node(A.reshape_p, (atom,), (("in_shape", (G, M, N)), ("shape", produced)), produced)
            chain.append(atom)
        letters = batch + a_only + b_only
        perm = tuple(range(len(lead))) + tuple(len(lead) + letters.index(c) for c in sc)
        if perm != tuple(range(len(produced))):
            chain.append(make_node(A.transpose_p, (atom,), (("perm", perm),), node.shape))
        return chain

    def check_supported(self) -> None:
        unspellable = sorted({node.primitive.name for node in self.order
                              if node.primitive.elementwise and not self.spellable(node)})
        # Linear algebra is LAPACK's, never loops: the backend registry falls back (loudly).
        unknown = sorted({node.primitive.name for node in self.order
                          if not node.primitive.elementwise and node.primitive is not matmul_p
                          and (node.primitive not in A.ARRAY_PRIMITIVES or node.primitive in NO_LOOP_FORM)})
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
            if node.primitive in REDUCTIONS or node.primitive in OWN_KERNEL:
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
            if node not in materialized or is_constant_array(node):
                continue
            primitive = node.primitive
            if primitive is A.reshape_p:
                source = self.resolve(node.args[0])
                if source in materialized and source.__class__ is Node and not is_constant_array(source) \
                        and source not in outputs and source not in self.shared.values():
                    self.shared[node] = source  # the same memory: no kernel
                    completed_in[node] = completed_in[source]
                    continue
            ext = self.extent(self.deps[node])
            if primitive in OWN_KERNEL:
                kernel = Kernel(primitive.name, (), ext, node=node)
                kernel.index = len(kernels)
                kernels.append(kernel)
            elif primitive in REDUCTIONS:
                (operand,) = self.operands(node)
                kernel = self.place(kernels, completed_in, ("reduce", node, operand), shape_of(operand), ext)
            else:
                kernel = self.place(kernels, completed_in, ("store", node), node.shape, ext)
            completed_in[node] = kernel.index
        for position, atom in enumerate(self.output_atoms):
            if self.output_is_copy(position):
                space = shape_of(atom) if atom.is_Symbol else ()
                self.place(kernels, completed_in, ("copy", position, atom), space,
                           self.extent(self.deps_of(atom)))
        return kernels

    def output_is_copy(self, position: int) -> bool:
        """True if output ``position`` is written by a copy (not as a node's own buffer)."""
        atom = self.output_atoms[position]
        if atom.__class__ is not Node or is_constant_array(atom):
            return True
        return self.output_atoms.index(atom) != position

    def place(self, kernels, completed_in, effect, space, ext) -> Kernel:
        """Put ``effect`` in the first kernel of its space and extent it can join, or a new one.

        It can join a kernel once every buffer it reads is complete before it, or
        is one that kernel stores, read at the kernel's own index (computed there).
        """
        candidate = Kernel("fused", space, ext, [effect])
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

    def probe(self, kernel) -> KernelEmitter:
        emitter = KernelEmitter(self, kernel, probe=True)
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
            if len(where) > MAX_SITES or not is_cheap(node) and (len(where) > 1 or node in repeated):
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
            buffer = Buffer(f"o{position}", shape_of(atom) if atom.is_Symbol else (), "output",
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
            if node in materialized and node not in self.buffers and not is_constant_array(node):
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
            emitter = KernelEmitter(self, kernel, probe=False)
            statements = prune(emitter.run())
            temporaries.extend(emitter.partials)
            descriptions.append((_describe(kernel), max(1, math.prod(emitter.space)),
                                 operation_count(statements)))
            body.append(Comment(descriptions[-1][0]))
            body.extend(statements)
        used = used_buffers(body)
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
        if is_constant_array(atom):
            return self.constant_buffer(dict(atom.params)["value"])
        return self.buffers[atom]


def _describe(kernel) -> str:
    if kernel.kind == "fused":
        parts = []
        for effect in kernel.effects:
            parts.append(f"output {effect[1]}" if effect[0] == "copy" else effect[1].primitive.name)
        return f"loops over {kernel.space if kernel.space else 'one value'}: {', '.join(parts)}"
    return f"{kernel.kind} of shape {kernel.node.shape}"
