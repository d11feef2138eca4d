"""The array compiler: a graph of whole-array nodes -> one Python module of whole-array code.

A graph with array nodes (:mod:`symad.array_primitives`) is a short list of
operations on large arrays, the shape JAX's jaxprs have: evaluating it is a
matter of calling the right NumPy routine once per node, not of vectorising
many scalar nodes (what :mod:`symad.compile.scalar.program` does for scalar graphs).
Each node becomes one line of a generated module:

* **elementwise nodes** fuse: a node used once, by another elementwise node,
  is written into its consumer's expression, so a chain such as
  ``sin(x) * exp(-x**2)`` is one numexpr call on whole arrays (numexpr
  broadcasts, works in cache-sized blocks and uses every thread); with the
  ``"numpy"`` backend each is a NumPy call;
* **contractions** (``einsum``) are one batched matrix product (``np.matmul``,
  BLAS), whatever the indices;
* **structural operations** are NumPy views or copies (``reshape``,
  ``transpose``, slices, ``take``...);
* **large intermediates** are written into buffers kept between calls
  (``out=rt_buffer(...)``, given back by ``rt_release`` after the last line
  that reads them or a view of them): fresh large arrays cost a page fault per
  4 KB page on every call.

Values carry the batch of points in front: an input arrives as ``(points,) +
its core shape`` (or ``(1,) + core`` when it is the same at every point) and a
constant has no batch dimension; a scalar meeting an array in an elementwise
operation is viewed with size-1 axes (``v[:, None]``) so that NumPy's
right-aligned broadcasting lines the cores up. The array primitives take any
leading dimensions (their parameters describe the trailing core), so the
same implementation serves one point or a million.

The module is standalone: the runtime functions of
:mod:`symad.array_runtime` are copied into it, constants are
literals (large ones are bound through ``EXTERNALS``, listed at the top).
User text appears only in comments.

>>> import symad as sd, numpy as np
>>> wave = lambda x: np.sum(np.sin(x) * np.exp(-x ** 2))
>>> "ne.evaluate" in sd.trace(wave, np.zeros(10 ** 5)).source("numexpr")
True
>>> "ne.evaluate" in sd.trace(wave, np.zeros(4)).source("numexpr")   # too little work for numexpr
False
"""

from __future__ import annotations

import math
import re

import numpy as np

from symad import array_primitives as A
from symad.array_runtime import runtime_source
from symad.atoms import is_complex_atom
from symad.compile.modules import MAX_LITERAL_ELEMENTS, ArrayModule, is_builtin_primitive
from symad.compile.scalar.program import MAX_FUSED_LEAVES, Constant, Instruction, safe_comment
from symad.compile.scalar.source import (
    STANDARD_IMPORTS,
    literal,
    numpy_spelling,
)
from symad.errors import CompileError
from symad.graph import Node
from symad.lazy_scipy import resolved

__all__ = ["lower_whole_arrays", "WholeArrayLowering"]

#: An elementwise node goes into a numexpr expression when its work on one point's arrays
#: (elements times numexpr's nanoseconds per element, ``COST_NS``) reaches this; below it
#: NumPy's call is faster. A numexpr call costs about 8 us before its first element and,
#: on two threads, 50-100 us more to wake the second (measured 2026-11-25 on the project's
#: 2-core machine: 2*(a-b) over 65,536 elements took 30 us in NumPy, 63 us in numexpr on
#: one thread and 111 us on two; over 10^6, 0.58, 1.45 and 0.69 ms; the 256x256 grid
#: gradient 0.98 ms with every node in numexpr, 0.46 ms with every node in NumPy).
NUMEXPR_MIN_WORK_NS = 200_000
#: ns per element of an operation ``COST_NS`` does not list (comparisons, where...).
_DEFAULT_COST_NS = (0.5, 0.5)


def _numexpr_usable() -> bool:
    try:
        import numexpr  # noqa: F401
    except ImportError:
        return False
    return True


class WholeArrayLowering:
    """One pass over the graph, writing a line per node (or per fused group of nodes)."""

    def __init__(self, graph, backend: str, dtype, name: str):
        from symad.graph import ArrayInput

        self.graph = graph
        self.backend = backend
        self.dtype = np.dtype(dtype)
        self.name = name
        self.lines: list[str] = []
        self.prelude: list[str] = []
        self.externals: list = []
        self.external_notes: list[str] = []
        self.text: dict = {}  # atom -> its name in the module
        self.has_lead: dict = {}  # atom -> True if it varies over the batch of points
        self.core_ndim: dict = {}
        self.element_counter = 0
        self.value_counter = len(graph.inputs)  # names v<k>, never reused
        for position, atom in enumerate(graph.inputs):
            self.text[atom] = f"i{position}"
            self.has_lead[atom] = True
            self.core_ndim[atom] = len(atom.shape) if atom.__class__ is ArrayInput else 0
        self.element_parent = {}
        for atom in graph.inputs:
            if atom.__class__ is ArrayInput:
                for symbol in atom.made_elements():
                    self.element_parent[symbol] = (atom, atom.element_index(symbol))
        uses: dict = {}
        for node in graph.nodes:
            for operand in node.args:
                if operand.is_Symbol:
                    uses[operand] = uses.get(operand, 0) + 1
        for atom in graph.outputs:
            if atom.is_Symbol:
                uses[atom] = uses.get(atom, 0) + 2  # an output is stored: never inlined
        self.uses = uses
        self.outputs = {atom for atom in graph.outputs if atom.is_Symbol}
        self.pooled: set[str] = set()  # names of values written into pooled buffers
        self.viewed: dict = {}  # value name -> the text of what it may be a view of
        self.sizes: dict = {}  # value name -> its elements at one point
        self.inlined: dict = {}  # node -> its numexpr expression tree, not yet written
        # Single-use unslices (the cotangent of a slice), kept unwritten: a sum that adds
        # them adds each into its region in place (rt_accumulate) instead of adding a
        # full-size array of zeros around it.
        self.deferred: dict = {}

    # -- operands -------------------------------------------------------------------

    def operand(self, atom) -> str:
        """The module's name for ``atom`` (written out first if it is an element or a leftover)."""
        if not atom.is_Symbol:
            return literal(_constant_value(atom))
        name = self.text.get(atom)
        if name is not None:
            return name
        parent = self.element_parent.get(atom)
        if parent is not None:
            array_input, index = parent
            name = f"e{self.element_counter}"
            self.element_counter += 1
            self.lines.append(f"    {name} = {self.text[array_input]}[:, {', '.join(map(str, index))}]")
            self.text[atom] = name
            self.has_lead[atom] = True
            self.core_ndim[atom] = 0
            return name
        if atom in self.inlined:  # a fused value needed on its own after all
            return self.write_inlined(atom)
        if atom in self.deferred:  # an unslice needed on its own after all
            value, params = self.deferred.pop(atom)
            return self.assign(atom, f"rt_unslice({self.operand(value)}, {params['in_shape']!r}, "
                                     f"{params['index']!r})", viewed="")
        raise CompileError(f"{self.name}: the graph reads {atom}, which is neither an input nor a "
                           "node before it (a value of an enclosing trace?)")

    def lead_of(self, atom) -> bool:
        """True if ``atom`` varies over the batch of points."""
        if not atom.is_Symbol:
            return False
        if atom not in self.has_lead:
            self.operand(atom)  # an element symbol gets its entry when first named
        return self.has_lead.get(atom, False)

    def aligned(self, atom, rank: int) -> str:
        """``atom`` viewed so its core lines up with a result of core rank ``rank``."""
        text = self.operand(atom)
        if not atom.is_Symbol or not self.has_lead.get(atom, False):
            return text
        missing = rank - self.core_ndim[atom]
        if missing <= 0:
            return text
        return f"{text}[:, {', '.join(['None'] * missing)}]"

    # -- nodes --------------------------------------------------------------------------

    def node(self, node) -> None:
        primitive = node.primitive
        if primitive.elementwise:
            self.elementwise(node)
        else:
            self.array_node(node)

    def poolable(self, node) -> bool:
        """True if the node's value may be written into a pooled buffer: a floating-point
        intermediate (outputs go to the caller, boolean values have their own dtype)."""
        return (node not in self.outputs and not node.primitive.returns_boolean
                and (self.backend == "numpy" or self.dtype == np.float64)
                and self.dtype.kind != "c")  # a complex program's values have their own dtypes

    def _fusible(self, node) -> bool:
        """True if the node may go into a numexpr expression: numexpr has it, and (by the scalar
        compiler's measured cost table) NumPy's own loop is not faster for it."""
        if self.backend != "numexpr" or not node.primitive.elementwise:
            return False
        if self.dtype.kind == "c":  # complex values: NumPy's ufuncs (numexpr's forms are real)
            return False
        from symad.compile.scalar.numexpr_backend import runs_in_numpy

        return _numexpr_form(node) is not None and not runs_in_numpy(_instruction(node))

    def elementwise(self, node) -> None:
        lead = any(self.lead_of(a) for a in node.args)
        self.has_lead[node] = lead
        self.core_ndim[node] = len(node.shape)
        if node.primitive.name == "add" and any(a in self.deferred and a.shape == node.shape
                                                for a in node.args if a.is_Symbol):
            self.accumulate(node)
            return
        if self._fusible(node):
            tree = ("op", node, [self._leaf_or_tree(a) for a in node.args])
            leaves = _tree_leaves(tree)
            if self.uses.get(node, 0) == 1 and len(leaves) <= MAX_FUSED_LEAVES:
                self.inlined[node] = tree  # written into its consumer's expression
                return
            self.write_tree(node, tree)
            return
        self.numpy_call(node)

    def numpy_call(self, node) -> str:
        """One elementwise node as a NumPy (or SciPy) call; its operands are written."""
        rank = len(node.shape)
        args = [self.aligned(a, rank) for a in node.args]
        ufunc = _ufunc_name(node)
        if _square_operand(node) is not None:  # x**2: NumPy's power takes 2.4x square's time
            ufunc, args = "np.square", args[:1]
        if (node.primitive.name == "sech" and is_builtin_primitive(node.primitive)
                and self.poolable(node)):
            # The derivative of tanh: 1 / cosh(x) into one pooled buffer, not two fresh
            # arrays (11 ms -> 4 ms for the 8-32-1 MLP's 10^5 x 32 hidden values).
            return self.assign(node, f"rt_sech({args[0]}, out={_buffer_call(args)})", pooled=True)
        if ufunc is not None and self.poolable(node):
            return self.assign(node, f"{ufunc}({', '.join(args)}, out={_buffer_call(args)})",
                               pooled=True)
        if ufunc is not None:  # a ufunc's result is a new array
            return self.assign(node, f"{ufunc}({', '.join(args)})", viewed="")
        spelling = numpy_spelling(_instruction(node))
        if spelling is None:
            index = self._external(node.primitive.numpy_impl, f"the numeric implementation of "
                                   f"{safe_comment(node.primitive.name)!r}")
            call = f"EXTERNALS[{index}]({', '.join(args)})"
        else:
            call = spelling(args)
        return self.assign(node, call)

    def accumulate(self, node) -> None:
        """A sum holding unslices: the other terms, then each unslice added into its region."""
        # Unslices of the sum's own shape add into their region; one broadcast by the
        # sum (a size-1 axis repeated) is a term like any other.
        parts = [a for a in node.args if a.is_Symbol and a in self.deferred and a.shape == node.shape]
        rest = [a for a in node.args if not (a.is_Symbol and a in parts)]
        if not rest:
            base, fresh = "0.0", False
        elif len(rest) == 1:
            if rest[0].is_Symbol and rest[0] in self.inlined:  # written now, read here alone
                self.write_inlined(rest[0])
            # Viewed with the sum's rank behind the points axis (a value of fewer axes, a
            # total, would otherwise broadcast against the points axis).
            base = self.aligned(rest[0], len(node.shape))
            # A value used by this sum alone and known to be a new array (a pooled buffer, a
            # ufunc's or numexpr's result) may be written in place; one that may be its
            # operand itself (stop_gradient is its argument, a custom primitive may return
            # its input) may not: it could be the caller's array.
            name = self.text.get(rest[0]) if rest[0].is_Symbol else None
            fresh = (self.uses.get(rest[0], 0) == 1 and name is not None
                     and (name in self.pooled or self.viewed.get(name) == ""))
        else:
            terms = [self._leaf_or_tree(a) for a in rest]
            if self.backend == "numexpr" and all(t[0] == "op" or _numexpr_ready(t) for t in terms):
                base = self.write_tree(node, ("op", _SUM, terms))
                self.text.pop(node)  # written under the node's name below, not as the node
            else:
                base = " + ".join(self.aligned(a, len(node.shape)) for a in rest)
            fresh = True
        if is_complex_atom(node) and not (rest and all(map(is_complex_atom, rest))):
            # complex parts added into a real base (0.0, a real term): rt_accumulate's
            # buffer takes the base's dtype, so the base is made complex first
            base, fresh = f"({base}) + 0j", True
        pieces = []
        for part in parts:
            value, params = self.deferred.pop(part)
            sign = 1.0
            if (value.__class__ is Node and value.primitive.name == "negative"
                    and self.uses.get(value, 0) == 1 and value in self.inlined):
                # -v added into a region: v subtracted there, no negated copy. The negation's
                # tree holds v's own tree when v was fused into it: v stays to be written.
                _, _, (inner,) = self.inlined.pop(value)
                if inner[0] == "op":
                    self.inlined[inner[1]] = inner
                value, sign = value.args[0], -1.0
            pieces.append(f"({self.operand(value)}, {params['in_shape']!r}, {params['index']!r}, "
                          f"{sign!r})")
        # In place into its base (when fresh), else a new array.
        self.assign(node, f"rt_accumulate({base}, [{', '.join(pieces)}], fresh={fresh})",
                    viewed=base)

    def _leaf_or_tree(self, atom):
        if atom.is_Symbol and atom in self.inlined:
            return self.inlined.pop(atom)
        return ("leaf", atom)

    def write_tree(self, node, tree) -> str:
        """One ``ne.evaluate`` call for a fused expression tree rooted at ``node`` (NumPy calls,
        one per node, when its work is too small to pay for numexpr's call)."""
        rank = len(node.shape)
        if _tree_work_ns(tree, node) < NUMEXPR_MIN_WORK_NS:
            if tree[1] is not _SUM:
                return self.write_numpy_tree(tree)
            terms = []
            for part in tree[2]:
                if part[0] == "op":
                    self.write_numpy_tree(part)
                terms.append(self.aligned(part[1], rank) if part[1].is_Symbol
                             else literal(_constant_value(part[1])))
            return self.assign(node, " + ".join(terms), viewed="")
        names: dict = {}
        local = []

        def render(part) -> str:
            if part[0] == "leaf":
                atom = part[1]
                if not atom.is_Symbol:
                    return literal(_constant_value(atom))
                if atom not in names:
                    names[atom] = f"a{len(names)}"
                    local.append(f"{names[atom]}={self.aligned(atom, rank)}")
                return names[atom]
            _, inner, parts = part
            if inner is _SUM:
                return "(" + " + ".join(render(p) for p in parts) + ")"
            return _numexpr_form(inner)([render(p) for p in parts])

        expression = render(tree)
        if not local:  # a constant expression (unusual): NumPy evaluates it
            return self.assign(node, f"np.asarray(ne.evaluate({expression!r}))", viewed="")
        call = f"ne.evaluate({expression!r}, local_dict=dict({', '.join(local)})"
        # numexpr computes in float64 whatever the inputs (its constants are doubles): a
        # float64 module's intermediates may go into a pooled buffer.
        root = tree[1]
        if root is _SUM or self.poolable(root):
            operands = [entry.split("=", 1)[1] for entry in local]
            return self.assign(node, f"{call}, out={_buffer_call(operands)})", pooled=True)
        return self.assign(node, call + ")", viewed="")

    def write_numpy_tree(self, tree) -> str:
        """A fused tree as NumPy calls, operands first."""
        _, node, parts = tree
        for part in parts:
            if part[0] == "op":
                self.write_numpy_tree(part)
        return self.numpy_call(node)

    def write_inlined(self, node) -> str:
        return self.write_tree(node, self.inlined.pop(node))

    def assign(self, node, call: str, *, pooled: bool = False, viewed: str | None = None) -> str:
        """Write ``v<k> = call`` for ``node``. ``pooled``: the call writes into a pooled
        buffer; ``viewed``: the text of what its result may be (a view of), "" for a new
        array (default: the whole call, any operand)."""
        name = f"v{self.value_counter}"
        self.value_counter += 1
        self.lines.append(f"    {name} = {call}")
        self.text[node] = name
        if pooled:
            self.pooled.add(name)
        self.viewed[name] = call if viewed is None else viewed
        self.sizes[name] = max(1, math.prod(getattr(node, "shape", ())))
        return name

    def array_node(self, node) -> None:
        primitive = node.primitive
        params = dict(node.params)
        self.core_ndim[node] = len(node.shape)
        if primitive is A.constant_p:
            self.has_lead[node] = False
            self.text[node] = self.constant_array(params["value"].array)
            return
        if primitive is A.unslice_p and self.uses.get(node, 0) == 1:
            self.has_lead[node] = self.lead_of(node.args[0])
            self.deferred[node] = (node.args[0], params)
            return
        args = [self.operand(a) for a in node.args]
        self.has_lead[node] = any(self.lead_of(a) for a in node.args)
        lower = _ARRAY_CALLS.get(primitive)
        if lower is None:  # a primitive with no spelling here: its NumPy implementation
            index = self._external(primitive.numpy_impl, f"the numeric implementation of "
                                   f"{safe_comment(primitive.name)!r}")
            keywords = ", ".join(f"{k}={self.parameter_text(v)}" for k, v in params.items())
            call = f"EXTERNALS[{index}]({', '.join(args)}{', ' if keywords else ''}{keywords})"
        else:
            call = lower(self, node, args, params)
            if call is None:  # the lowering wrote the node itself
                return
        self.assign(node, call, viewed="" if primitive in _NEW_ARRAY else None)

    def constant_array(self, array: np.ndarray, integer: bool = False) -> str:
        """A module-level name for a constant array: a literal if small, else an external."""
        name = f"C{len(self.prelude)}"
        dtype = "np.intp" if integer else "DTYPE"
        value_dtype = np.intp if integer else self.dtype
        if self.dtype.kind == "c" and not integer:  # in a complex program a real constant stays real
            value_dtype = np.dtype(np.complex128 if np.iscomplexobj(array) else np.float64)
            dtype = f"np.{value_dtype.name}"
        base = array
        if array.ndim and array.size and np.all(array == array.reshape(-1)[0]):
            value = array.reshape(-1)[0]
            self.prelude.append(f"{name} = np.full({array.shape!r}, {_number_literal(value, integer)}, "
                                f"dtype={dtype})")
        elif array.size <= MAX_LITERAL_ELEMENTS:
            values = ", ".join(_number_literal(v, integer) for v in np.asarray(base).reshape(-1).tolist())
            self.prelude.append(f"{name} = np.array([{values}], dtype={dtype}).reshape({array.shape!r})")
        else:
            index = self._external(
                np.ascontiguousarray(array, dtype=value_dtype),
                f"a constant array of shape {array.shape}")
            self.prelude.append(f"{name} = EXTERNALS[{index}]  # bound when the module is loaded")
        return name

    def parameter_text(self, value) -> str:
        """A node parameter as source: its repr if it is plain data, else an external.

        A loop's parameter holds its body (a traced Function): it is bound, never written
        out as code (nothing a user passes is executed as code).
        """
        if _plain_data(value):
            return repr(value)
        return f"EXTERNALS[{self._external(value, 'a parameter of ' + safe_comment(type(value).__name__))}]"

    def _external(self, value, note: str) -> int:
        self.externals.append(value)
        self.external_notes.append(note)
        return len(self.externals) - 1

    # -- the whole module ---------------------------------------------------------------

    def module(self) -> ArrayModule:
        for node in self.graph.nodes:
            self.node(node)
        outputs = []
        for atom in self.graph.outputs:
            if atom.is_Symbol and atom in self.inlined:
                self.write_inlined(atom)
            outputs.append(self.operand(atom) if atom.is_Symbol else
                           f"np.asarray({literal(_constant_value(atom))})")
        boolean = tuple(bool(atom.__class__ is Node and atom.primitive.returns_boolean)
                        or _is_boolean_constant(atom) for atom in self.graph.outputs)
        header = [
            f"# Generated by symad: the {self.backend} evaluator of array program "
            f"{safe_comment(self.name)} ({self.dtype.name}).",
            "# Standalone: it needs NumPy, SciPy" + (" and numexpr" if self.backend == "numexpr" else "")
            + ", not symad. run(*inputs): each input as (points,) + its core shape (or (1,) + core",
            "# when the same at every point), in the order of the graph's inputs.",
            *STANDARD_IMPORTS,
        ]
        if self.backend == "numexpr":
            header.append("import numexpr as ne")
        header.append(f"DTYPE = np.{self.dtype.name}")
        header.append(f"EXTERNALS = [None] * {len(self.externals)}")
        for index, note in enumerate(self.external_notes):
            header.append(f"# EXTERNALS[{index}]: {note}")
        header.append(f"OUTPUT_IS_BOOLEAN = {boolean!r}")
        header.append("")
        header.append(runtime_source(sorting=any(node.primitive in _SORTING for node in self.graph.nodes)))
        if self.backend == "numexpr":
            header.append("RT_NUMEXPR = ne  # large outer products on numexpr's threads (rt_multiply)")
        inputs = ", ".join(f"i{k}" for k in range(len(self.graph.inputs)))
        body = [f"def run({inputs}):"]
        if self.pooled:
            body.append("    rt_pool_begin()")
        body.extend(f"    {line}" for line in self.prelude)
        result = f"    return ({', '.join(outputs)}{',' if len(outputs) == 1 else ''})"
        lines = _with_releases(self.lines + [result], self.pooled, self.viewed)
        body.extend(lines)
        source = "\n".join(header + [""] + body) + "\n"
        returned = set(_VALUE_NAME.findall(result))
        per_point = _peak_live_elements(lines, self.sizes, self.pooled, returned) * self.dtype.itemsize
        return ArrayModule(source, self.externals, self.backend, self.dtype, "", boolean, per_point)


# ---------------------------------------------------------------------------
# The array primitives' calls, looked up by primitive: each writes the call that computes
# the node from its operands' names (``args``), or writes the node itself and gives None.
# ---------------------------------------------------------------------------


def _runtime_call(function: str, operands: int, *keys: str):
    """``function(<the first operands>, <the parameters named by keys>)``."""
    def lower(lowering, node, args, params):
        return f"{function}({', '.join(args[:operands] + [repr(params[key]) for key in keys])})"
    return lower


def _reduction(function: str):
    def lower(lowering, node, args, params):
        return f"{function}({args[0]}, axis={params['axes']!r})"
    return lower


def _einsum(lowering, node, args, params):
    # The operands' leading (batch) dimensions broadcast right-aligned, as in the graph:
    # each gets the result's batch rank behind the points axis, which stays in front.
    (letters_a, letters_b), letters_out = A.parse_subscripts(params["subscripts"])
    batch = len(node.shape) - len(letters_out)
    args = [lowering.aligned(node.args[0], batch + len(letters_a)),
            lowering.aligned(node.args[1], batch + len(letters_b))]
    if lowering.poolable(node):
        # An intermediate: into a pooled buffer (a fresh one page-faults each call).
        call = f"rt_einsum({args[0]}, {args[1]}, {params['subscripts']!r}, pooled=True)"
        lowering.assign(node, call, pooled=True)
        return None
    return f"rt_einsum({args[0]}, {args[1]}, {params['subscripts']!r})"


def _slice(lowering, node, args, params):
    return f"{args[0]}[{_index_source(params['index'])}]"


def _take(lowering, node, args, params):  # take and take_add: rt_take, rt_take_add
    indices = lowering.constant_array(params["indices"].array, integer=True)
    return f"rt_{node.primitive.name}({args[0]}, {params['in_shape']!r}, {indices}, {params['axis']!r})"


def _concatenate(lowering, node, args, params):
    return f"rt_concatenate([{', '.join(args)}], {params['axis']!r}, {params['in_shapes']!r})"


def _pack(lowering, node, args, params):
    # Scalars with a batch are (points,); without one they are numbers.
    return (f"rt_pack([{', '.join(args)}], {params['shape']!r}, {params['positions']!r}, "
            f"{params['has_base']!r})")


def _fft(lowering, node, args, params):
    function = "np.fft.ifftn" if params["inverse"] else "np.fft.fftn"
    return f"{function}({args[0]}, axes={params['axes']!r}, norm={params['norm']!r})"


def _real_fft(lowering, node, args, params):  # rfft and irfft
    size = f", n={params['n']!r}" if "n" in params else ""
    return f"np.fft.{node.primitive.name}({args[0]}{size}, axis={params['axis']!r}, norm={params['norm']!r})"


_ARRAY_CALLS = {
    A.real_p: _runtime_call("np.real", 1),
    A.imag_p: _runtime_call("np.imag", 1),
    A.conj_p: _runtime_call("np.conjugate", 1),
    A.modulus_p: _runtime_call("np.abs", 1),
    A.fft_p: _fft,
    A.rfft_p: _real_fft,
    A.irfft_p: _real_fft,
    A.reduce_sum_p: _reduction("np.sum"),
    A.amax_p: _reduction("np.max"),
    A.amin_p: _reduction("np.min"),
    A.reduce_logsumexp_p: _runtime_call("rt_logsumexp", 1, "axes"),
    A.einsum_p: _einsum,
    A.reshape_p: _runtime_call("rt_reshape", 1, "in_shape", "shape"),
    A.transpose_p: _runtime_call("rt_transpose", 1, "perm"),
    A.broadcast_p: _runtime_call("rt_broadcast", 1, "in_shape", "shape"),
    A.slice_p: _slice,
    A.unslice_p: _runtime_call("rt_unslice", 1, "in_shape", "index"),
    A.take_p: _take,
    A.take_add_p: _take,
    A.concatenate_p: _concatenate,
    A.cumsum_p: _runtime_call("rt_cumsum", 1, "axis", "reverse"),
    A.argsort_p: _runtime_call("rt_argsort", 1, "axis"),
    A.take_along_p: _runtime_call("rt_take_along", 2, "axis"),
    A.take_along_add_p: _runtime_call("rt_take_along_add", 2, "in_shape", "axis"),
    A.pack_p: _pack,
    A.scatter_p: _runtime_call("rt_scatter", 2, "in_shape", "index"),
}
#: The primitives whose runtime functions are copied only into programs that use them.
_SORTING = frozenset({A.argsort_p, A.take_along_p, A.take_along_add_p})
#: Array primitives whose call returns a new array, never a view of an operand (their
#: operands' pooled buffers may be released after it).
_NEW_ARRAY = frozenset({A.reduce_sum_p, A.amax_p, A.amin_p, A.reduce_logsumexp_p, A.einsum_p,
                        A.unslice_p, A.take_p, A.take_add_p, A.concatenate_p, A.cumsum_p,
                        A.pack_p, A.fft_p, A.rfft_p, A.irfft_p,
                        A.argsort_p, A.take_along_add_p})


def lower_whole_arrays(graph, backend: str, dtype="float64", name: str = "function") -> ArrayModule:
    """Lower an array program to the source of its whole-array evaluator (not yet loaded):
    ``backend`` "numexpr" (NumPy where numexpr is not installed) or "numpy"."""
    if backend == "numexpr" and not _numexpr_usable():
        backend = "numpy"
    if backend not in ("numexpr", "numpy"):
        raise CompileError(f"unknown backend {backend!r} for an array program")
    return WholeArrayLowering(graph, backend, dtype, name).module()


class _Sum:
    """A stand-in node for the sum of an accumulation's other terms (rendered like add)."""

    from symad.primitives import add_p as primitive
    args = ()
    params = ()


_SUM = _Sum()


def _tree_work_ns(tree, root) -> float:
    """Nanoseconds numexpr would spend on one point's arrays of a fused tree (``COST_NS``)."""
    from symad.compile.scalar.numexpr_backend import COST_NS

    if tree[0] == "leaf":
        return 0.0
    _, node, parts = tree
    if node is _SUM:  # an accumulation's other terms, added up
        own = math.prod(root.shape) * COST_NS["add"][0] * (len(parts) - 1)
    elif _square_operand(node) is not None or (node.primitive.name == "power" and
                                               _integral_exponent(_instruction(node)) is not None):
        own = math.prod(node.shape) * COST_NS["multiply"][0]  # numexpr multiplies
    else:
        own = math.prod(node.shape) * COST_NS.get(node.primitive.name, _DEFAULT_COST_NS)[0]
    return own + sum(_tree_work_ns(part, root) for part in parts)


def _square_operand(node):
    """The base of ``x ** 2`` (a constant exponent 2), else None."""
    if node.primitive.name == "power" and len(node.args) == 2 and not node.args[1].is_Symbol:
        if _constant_value(node.args[1]) == 2:
            return node.args[0]
    return None


def _integral_exponent(instruction):
    from symad.compile.scalar.numexpr_backend import integral_exponent as integral

    return integral(instruction)


def _ufunc_name(node) -> str | None:
    """``np.<name>``/``special.<name>`` when the node is one call of a NumPy or SciPy ufunc
    (which takes ``out=``), else None."""
    from symad.compile.scalar.source import SPECIAL_NUMPY_FORMS

    primitive = node.primitive
    if node.params:
        return None
    if primitive.name == "add" and len(node.args) == 2 and is_builtin_primitive(primitive):
        return "np.add"  # (the primitive's own implementation adds any number of terms)
    if not isinstance(resolved(primitive.numpy_impl), np.ufunc):
        return None
    if primitive.name in SPECIAL_NUMPY_FORMS and is_builtin_primitive(primitive):
        return None
    spelling = numpy_spelling(_instruction(node))
    if spelling is None:
        return None
    text = spelling(["_"])
    name = text[: -len("(_)")]
    return name if text == f"{name}(_)" and name.replace(".", "").isidentifier() else None


def _buffer_call(operands: list[str]) -> str:
    return f"rt_buffer(DTYPE, {', '.join(operands)})"


_VALUE_NAME = re.compile(r"\bv\d+\b")


def _with_releases(lines: list[str], pooled: set[str], viewed: dict) -> list[str]:
    """``lines`` (straight-line code ending in the return) with ``rt_release`` after the last
    line that needs each pooled buffer, and ``del`` after the last line that reads each other
    value (Python then frees it, or keeps it alive for as long as a view of it lives: a
    200-step loop over 10^6 elements otherwise held all 200 of its intermediates).

    A value that may be a view of pooled values (a slice, a reshape, an in-place
    accumulation: ``viewed``) keeps their buffers alive for as long as it is read; a buffer
    the return reads is never released (it goes to the caller).
    """
    holds: dict = {}  # value name -> the pooled buffers it may be (a view of)
    last: dict = {}  # pooled buffer -> index of the last line that needs it
    last_read: dict = {}  # value that is not pooled -> index of the last line reading it
    for position, line in enumerate(lines):
        target, equals, expression = line.strip().partition(" = ")
        if not equals:
            target, expression = None, line
        names = _VALUE_NAME.findall(expression)
        needed = set()
        for name in names:
            needed |= holds.get(name, set())
            if name not in pooled:
                last_read[name] = position
        for name in needed:
            last[name] = position
        if target in pooled:
            holds[target] = {target}
            last.setdefault(target, position)  # released at once if nothing reads it
        elif target is not None and _VALUE_NAME.fullmatch(target):
            holds[target] = set()
            for name in _VALUE_NAME.findall(viewed.get(target, expression)):
                holds[target] |= holds.get(name, set())
            last_read.setdefault(target, position)
    end = len(lines) - 1  # the return: what it reads is neither released nor deleted
    released: dict = {}
    for name, position in last.items():
        if position < end:
            released.setdefault(position, []).append(name)
    deleted: dict = {}
    for name, position in last_read.items():
        if position < end:
            deleted.setdefault(position, []).append(name)
    result = []
    for position, line in enumerate(lines):
        result.append(line)
        if position in released:
            result.append(f"    rt_release({', '.join(sorted(released[position], key=_value_number))})")
        if position in deleted:
            result.append(f"    del {', '.join(sorted(deleted[position], key=_value_number))}")
    return result


def _peak_live_elements(lines: list[str], sizes: dict, pooled: set[str],
                        returned: set[str] = frozenset()) -> int:
    """The most elements (per point) the values of ``lines`` hold at once, besides the
    ``returned`` ones: what the blocks of a batch are sized by. A value counts from its line
    until its ``del`` (a view as if it were a copy); a pooled buffer stays allocated once
    taken, and a later pooled value of its size reuses it after its ``rt_release``.

    The results do not count: each block's results are copied into whole-batch arrays
    (:meth:`ArrayEvaluator.evaluate_arrays`), which exist in full however the batch is cut,
    so smaller blocks would not make them smaller. Counting them cut the per-sample MLP
    gradient's 10^5 samples (2.6 KB of results, 0.5 KB of intermediates a sample) into two
    blocks, whose copying took 20-60 ms of a 100-250 ms call.
    """
    held = peak = 0
    free: dict = {}  # size of a released pooled buffer -> how many such are free
    for line in lines:
        text = line.strip()
        if text.startswith("del "):
            held -= sum(sizes.get(name, 0) for name in _VALUE_NAME.findall(text))
            continue
        if text.startswith("rt_release("):
            for name in _VALUE_NAME.findall(text):
                free[sizes.get(name, 0)] = free.get(sizes.get(name, 0), 0) + 1
            continue
        target, equals, _ = text.partition(" = ")
        if not equals:
            continue
        size = sizes.get(target, 0) if target not in returned else 0
        if target in pooled and free.get(size):
            free[size] -= 1  # the pool hands back a buffer of this size
            continue
        held += size
        peak = max(peak, held)
    return max(peak, 1)


def _value_number(name: str) -> int:
    return int(name[1:])


def _numexpr_ready(part) -> bool:
    return part[0] == "leaf"


def _is_boolean_constant(atom) -> bool:
    import sympy

    return isinstance(atom, sympy.logic.boolalg.BooleanAtom)


def _constant_value(atom):
    from symad.atoms import constant_value

    return constant_value(atom)


def _number_literal(value, integer: bool) -> str:
    return repr(int(value)) if integer else literal(value)


def _index_source(index: tuple) -> str:
    parts = ["..."]
    for item in index:
        if item[0] == "i":
            parts.append(str(item[1]))
        elif item[0] == "s":
            parts.append(f"{item[1]}:{item[2]}:{item[3]}")
        else:
            parts.append("None")
    return ", ".join(parts)


def _instruction(node) -> Instruction:
    """The scalar compiler's view of an elementwise node, for its spelling tables."""
    operands = tuple(Constant(_constant_value(a)) if not a.is_Symbol else position
                     for position, a in enumerate(node.args))
    return Instruction(0, node.primitive, operands, node.params, node.primitive.returns_boolean)


def _numexpr_form(node):
    from symad.compile.scalar.numexpr_backend import numexpr_form

    return numexpr_form(_instruction(node))


def _tree_leaves(tree) -> set:
    if tree[0] == "leaf":
        return {tree[1]} if tree[1].is_Symbol else set()
    return set().union(*[_tree_leaves(part) for part in tree[2]]) if tree[2] else set()


def _plain_data(value) -> bool:
    """True for a parameter whose repr is a Python literal (numbers, strings, tuples of them)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, tuple):
        return all(_plain_data(item) for item in value)
    return False
