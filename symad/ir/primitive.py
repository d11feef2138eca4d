"""The Primitive type and its registry: the machinery every catalogue stanza is declared with.

A primitive is declared once, by a stanza of a catalogue (:mod:`symad.primitives` for
the scalar, elementwise primitives; :mod:`symad.array_primitives`, :mod:`symad.special`,
custom primitives and SymPy imports for the rest), through :func:`register`. This module
holds what those stanzas are made of and nothing they declare: the :class:`Primitive`
type, the registry (:data:`PRIMITIVES`, by name), the type of the transforms' rule tables
(:class:`RuleTable`, and :data:`PARTIALS`, the partials table), the backends a stanza
spells a primitive for (:data:`BACKENDS`) with the helpers that write spellings
(:func:`spell`, :func:`joined`, :func:`infix`, :func:`nested`, :func:`stacked`,
:func:`python_sum`), the cost classes, and :data:`BUILDER_ROLES`, the few operations the
graph builder records on its own account. It imports no other symad module, so that
the graph (:mod:`symad.graph`), every backend and every rule table can build on it
without importing a catalogue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy

__all__ = ["Primitive", "PRIMITIVES", "BACKENDS", "register", "spell", "joined", "infix", "nested",
           "stacked", "python_sum", "MAX_INFIX_TERMS", "FREE", "ARITHMETIC", "NATIVE", "CALL",
           "RuleTable", "PARTIALS", "PartialRule", "BuilderRoles", "BUILDER_ROLES"]

PartialRule = Callable[..., Any]

#: The backends a stanza spells a primitive for (keys of ``Primitive.spellings``):
#:
#: * ``"numpy"``, ``"numba"``, ``"c"``: source text. A template over the operands'
#:   texts, ``"np.tanh({0})"``, or a callable ``form(args, constants) -> text`` (see
#:   :func:`spell`); for C also ``(form, helper, ...)``, with the C helper functions the
#:   form calls. The NumPy spelling defaults to ``np.<numpy_name>(...)`` (or
#:   ``special.<numpy_name>``) where that function is ``numpy_impl`` itself.
#: * ``"numexpr"``: an expression in numexpr's language, as a tree ``(operator,
#:   operand, ...)``: the operator a numexpr function name (``"tanh"``) or operator
#:   (``"+"``, ``"<"``, ``"~"``, ``"-"`` with one operand for negation), each operand
#:   an int (the primitive's operand at that position), a string (a numeric literal,
#:   ``"1"``) or a tree; ``...`` as the only operand stands for all of them (``a + b + ...``),
#:   and a bare int is that operand itself. The numexpr backend writes both its string
#:   programs and its virtual machine's three-address code from it.
#: * ``"mpmath"``: a callable on mpmath numbers, with NumPy's real semantics.
#: * ``"interval"``: a callable on ``mpmath.iv`` intervals returning an enclosure, or a
#:   helper kind ``(kind, {parameter: value})`` that the interval backend builds from
#:   the primitive's mpmath spelling (``("monotone", {"lower": 0})``).
BACKENDS = ("numpy", "numexpr", "numba", "c", "mpmath", "interval")

#: ``Primitive.cost``, what one element costs, in classes the compilers compare against:
#: passes an operand through (stop_gradient);
FREE = 0
#: one arithmetic instruction (``+ - * /``, negation): the numexpr planner recomputes such
#: a shared value in each consumer rather than storing it;
ARITHMETIC = 1
#: a few machine instructions, no library call (abs, sign, maximum, sqrt, comparisons,
#: where): loop nests recompute such a value wherever it is read;
NATIVE = 2
#: a call of a mathematical library function (exp, sin, erf, ...): computed once and stored.
CALL = 3


class Primitive:
    """An operation the tracer records as one node.

    Args:
        name: the primitive's name, as printed in errors.
        to_sympy: builds the node's SymPy expression from operand atoms (a SymPy function
            class where there is one: ``sd.from_sympy`` imports that class as this
            primitive).
        numpy_impl: evaluates the primitive on NumPy arrays or floats.
        partials: usually registered later by :mod:`symad.rules.partials`
            (custom primitives pass theirs here): one rule per argument, each ``rule(out, *args) -> value or
            None`` (None: the partial is structurally zero), where ``out`` is
            the node's own result, as autograd's and JAX's rules take ``ans``;
            for a variadic primitive one ``rule(out, args) -> sequence``
            giving every operand's partial at once (so an n-ary node costs
            O(n), not O(n**2)); ``None`` if the primitive has no derivative rule.
        arity: the number of operands (ignored when ``variadic``).
        commutative: operands may be reordered (for hash-consing).
        simplify: ``simplify(builder, args) -> atom or None``, identities
            such as ``x * 1 -> x`` applied before recording.
        folds_constants: constant operands are evaluated exactly by SymPy.
        variadic: takes any number of operands.
        numpy_name: the name of ``numpy_impl`` in ``numpy`` or ``scipy.special``: generated
            NumPy code calls it by that name (unless the stanza gives a ``numpy`` spelling);
            None where ``numpy_impl`` is no such function (generated code then binds it).
        returns_boolean: the result is a truth value (comparisons).
        boolean_operands: operand positions that take truth values (the
            condition of ``where``); the builder converts other operands.
        kind: ``"elementwise"`` (every primitive of :mod:`symad.primitives`: operands
            broadcast as in NumPy, the result has the broadcast shape), or for
            the array primitives of :mod:`symad.array_primitives`
            ``"linear"`` (structural and linear operations: reshape,
            reductions by sum, slices, ...; reverse mode uses their
            ``transpose``), ``"bilinear"`` (``einsum``: linear in each
            operand) or ``"array"`` (other operations on whole arrays, with
            their own rules).
        shape_rule: ``shape_rule(operand_shapes, params) -> shape`` for an
            array primitive (elementwise ones broadcast).
        moves: for an array primitive that only moves elements, how: ``"gather"`` (each
            element of the result is one element of the operand, at an index map: reshape,
            transpose, broadcast, slice, take) or ``"place"`` (each element of the result is
            one operand element or a zero: unslice, concatenate, pack, scatter); None for a
            primitive that computes. Sparsity patterns apply the NumPy implementation to
            element codes; index notation inlines an index map.
        object_safe: for an array primitive, its NumPy implementation also works on object
            arrays of scalar atoms (it moves or adds elements and makes none of its own), so
            the per-element view (:mod:`symad.rules.unroll`) applies it to the elements.
        numpy, numexpr, numba, c, mpmath, interval: the primitive's spelling for each
            backend (see :data:`BACKENDS`); None where the backend has none.
        latex: how symad's LaTeX printer writes the SymPy form ``to_sympy`` builds: a
            function name (``r"\\sigma"``, printed ``\\sigma{\\left(x \\right)}``) or
            ``latex(printer, expr, exp) -> text`` (``exp``: a power to raise it to, or None);
            None: as SymPy prints it.
        printed: ``printed(*args) -> SymPy expression``, the form a formula shows the node
            as where it differs from ``to_sympy`` (sech as ``1/cosh``); None: ``to_sympy``.
        finite: the value is finite whenever the operands are (overflow aside): reverse
            mode keeps a ``where``'s mask through products with it.
        cost: what an element costs (:data:`FREE`, :data:`ARITHMETIC`, :data:`NATIVE` or
            :data:`CALL`).
        cost_ns: ``(numexpr, numpy)``: nanoseconds per float64 element in numexpr's machine
            and in NumPy, or None. Measured 2026-11-25 on the project's 2-core machine (AMD
            EPYC with AVX-512; numexpr 2.14.2 without Intel's VML, which calls libm once
            per element; NumPy 2.4.6, whose SIMD loops make most functions 4-13x faster),
            one thread, blocks of 2^16 points in cache; ``python benchmarks/eval.py
            --calibrate`` measures them again. The numexpr backend computes in NumPy what
            NumPy computes faster (``symad.compile.scalar.numexpr_backend.NUMPY_IS_FASTER``).
        complex_values: what the node holds when an operand is complex (see the attribute
            of that name); the default refuses complex operands of an elementwise primitive.
    """

    def __init__(
        self,
        name: str,
        to_sympy: Callable[..., sympy.Basic],
        numpy_impl: Callable[..., Any],
        partials: Sequence[PartialRule | None] | PartialRule | None = None,
        *,
        arity: int = 1,
        commutative: bool = False,
        simplify: Callable | None = None,
        folds_constants: bool = True,
        variadic: bool = False,
        numpy_name: str | None = None,
        returns_boolean: bool = False,
        boolean_operands: tuple[int, ...] = (),
        kind: str = "elementwise",
        shape_rule: Callable | None = None,
        moves: str | None = None,
        object_safe: bool = False,
        numpy: Any = None,
        numexpr: Any = None,
        numba: Any = None,
        c: Any = None,
        mpmath: Any = None,
        interval: Any = None,
        latex: str | Callable | None = None,
        printed: Callable | None = None,
        finite: bool = False,
        cost: int = CALL,
        cost_ns: tuple[float, float] | None = None,
        complex_values: Any = None,
    ):
        self.name = name
        self._to_sympy = to_sympy
        self.numpy_impl = numpy_impl
        if partials is not None:
            PARTIALS[self] = partials
        # True where every partial rule is written with broadcasting operations only, so
        # that the reverse sweep may call it once on arrays for a run of like nodes
        # (set for the rules of symad.rules.partials; a custom rule may not broadcast).
        self.broadcasting_partials = False
        self.arity = arity
        self.commutative = commutative
        self.simplify = simplify
        self.folds_constants = folds_constants
        self.variadic = variadic
        self.numpy_name = numpy_name
        self.returns_boolean = returns_boolean
        self.boolean_operands = boolean_operands
        self.kind = kind
        self.elementwise = kind == "elementwise"
        self.shape_rule = shape_rule
        self.moves = moves
        self.object_safe = object_safe
        given = {"numpy": numpy, "numexpr": numexpr, "numba": numba, "c": c, "mpmath": mpmath,
                 "interval": interval}
        #: backend name -> spelling (see BACKENDS); a backend missing here has none
        self.spellings: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        self.latex = latex
        self.printed = printed
        self.finite = finite
        self.cost = cost
        self.cost_ns = cost_ns
        #: What the node holds when an operand is complex: ``"follow"`` (complex if any
        #: operand is: holomorphic and linear operations), ``"real"`` (real whatever its
        #: operands: the real part, a comparison), ``"complex"`` (always complex: an FFT),
        #: a callable ``(params) -> bool`` (a constant), or ``"refuse"`` (defined on real
        #: values only: the default of elementwise primitives; array primitives follow).
        self.complex_values = complex_values or ("refuse" if self.elementwise else "follow")

    def to_sympy(self, args: Sequence, params: dict) -> sympy.Basic:
        return self._to_sympy(*args, **params)

    def spelling(self, backend: str):
        """This primitive's spelling for ``backend`` (one of :data:`BACKENDS`), or None.

        Every backend finds a primitive's spelling here, and only here: a primitive
        without one is that backend's one fallback (NumPy, or a clear refusal).
        """
        return self.spellings.get(backend)

    @property
    def partials(self):
        """This primitive's row of the :data:`PARTIALS` table, or None (no rule)."""
        return PARTIALS.get(self)

    @partials.setter
    def partials(self, rules) -> None:
        # Custom primitives give theirs late (defpartials): the table stays the one place.
        if rules is None:
            PARTIALS.pop(self, None)
        else:
            PARTIALS[self] = rules

    @property
    def has_partials(self) -> bool:
        return self in PARTIALS

    def partials_at(self, out, args: Sequence, indices: Sequence[int]) -> dict:
        """``{index: partial or None}`` w.r.t. the operands at ``indices`` (traced values).

        ``out`` is the node's own result (a traced value): rules that reuse it
        keep higher derivatives small and free of repeated powers.
        """
        if self.variadic:
            every_partial = self.partials(out, args)
            return {index: every_partial[index] for index in indices}
        rules = self.partials
        return {index: None if rules[index] is None else rules[index](out, *args)
                for index in indices}

    def __repr__(self) -> str:
        return f"Primitive({self.name!r})"


PRIMITIVES: dict[str, Primitive] = {}


class RuleTable(dict):
    """One transform's rules, keyed by the primitive object, and why a primitive has none.

    Every transform keeps its rules in one such table (autograd's ``numpy_vjps.py``, JAX's
    ``ad.primitive_jvps``): :data:`PARTIALS` here, the Taylor, transpose, tangent, unroll,
    sparsity and index-notation tables beside their transforms. A primitive the table
    ``applies`` to has a rule or a named reason it has none (:meth:`no_rule`, or the
    table's ``default_reason``); ``tests/test_catalogue.py`` walks the whole catalogue
    through every table.

    >>> from symad.primitives import cos_p, sin_p, tan_p
    >>> table = RuleTable("example", applies=lambda p: not p.elementwise)
    >>> @table.register(sin_p, cos_p)
    ... def rule(node):
    ...     return node
    >>> table[sin_p] is rule, cos_p in table, table.reason_missing(tan_p)
    (True, True, None)
    >>> table.no_rule("not needed here", tan_p); table.reason_missing(tan_p)
    'not needed here'
    """

    def __init__(self, transform: str, *, applies: Callable[[Primitive], bool] = lambda p: True,
                 default_reason: Callable[[Primitive], str | None] | None = None):
        super().__init__()
        #: The transform's name, for messages.
        self.transform = transform
        #: ``applies(primitive)``: the primitives this table must cover.
        self.applies = applies
        #: primitive -> why it has no rule here
        self.reasons: dict[Primitive, str] = {}
        self.default_reason = default_reason

    def register(self, *primitives: Primitive) -> Callable:
        """A decorator: the decorated function is the rule of each of ``primitives``."""
        def add(rule):
            for primitive in primitives:
                self[primitive] = rule
            return rule
        return add

    def no_rule(self, reason: str, *primitives: Primitive) -> None:
        """Record that ``primitives`` have no rule in this table, and why."""
        for primitive in primitives:
            self.reasons[primitive] = reason

    def reason_missing(self, primitive: Primitive) -> str | None:
        """Why ``primitive`` has no rule here (None: no reason given)."""
        reason = self.reasons.get(primitive)
        if reason is None and self.default_reason is not None:
            reason = self.default_reason(primitive)
        return reason

    def __repr__(self) -> str:
        return f"RuleTable({self.transform!r}, {len(self)} rules)"


#: The symbolic partial derivatives, one row per primitive (see ``Primitive``'s ``partials``):
#: filled by :mod:`symad.rules.partials` for the built-in primitives, by the stanzas that
#: pass ``partials=`` (special functions, SymPy imports), and by ``defpartials`` for custom
#: primitives. A primitive missing here cannot be differentiated through.
PARTIALS = RuleTable("partials", applies=lambda primitive: primitive.elementwise)


def register(primitive: Primitive) -> Primitive:
    """Add ``primitive`` to the catalogue (:data:`PRIMITIVES`, by name) and return it.

    >>> double = register(Primitive("double_example", lambda x: 2 * x, lambda x: 2 * x,
    ...                             numba="(2.0 * {0})", c="2.0 * {0}"))
    >>> PRIMITIVES["double_example"] is double, spell(double.spelling("c"), ["t0"])
    (True, '2.0 * t0')
    >>> del PRIMITIVES["double_example"]
    """
    unknown = set(primitive.spellings) - set(BACKENDS)
    if unknown:
        raise ValueError(f"register({primitive.name!r}): no backend named {sorted(unknown)}; "
                         f"the backends are {', '.join(BACKENDS)}")
    PRIMITIVES[primitive.name] = primitive
    return primitive


# ---------------------------------------------------------------------------
# Source spellings: templates and the few forms a template cannot write
# ---------------------------------------------------------------------------


def spell(form, args: Sequence[str], constants: Sequence = ()) -> str:
    """The source text of ``form`` applied to the operand texts ``args``.

    ``form`` is a template (``"atan2({0}, {1})"``, formatted with ``args``) or a
    callable ``form(args, constants)``, where ``constants`` holds each operand's value
    if it is a constant (a float), None if not, as far as the caller knows them.

    >>> spell("atan2({0}, {1})", ["y", "x"]), spell(infix("+"), ["a", "b", "c"])
    ('atan2(y, x)', '(a + b + c)')
    """
    if isinstance(form, str):
        return form.format(*args)
    return form(args, constants)


def joined(separator: str) -> Callable:
    """``a<separator>b<separator>...``: an operator over any number of operands."""
    return lambda args, constants=(): separator.join(args)


def infix(symbol: str) -> Callable:
    """``(a <symbol> b <symbol> ...)``."""
    return lambda args, constants=(): "(" + f" {symbol} ".join(args) + ")"


def nested(function: str) -> Callable:
    """``function(function(a, b), c)``: a binary function folded over the operands."""

    def form(args, constants=()):
        text = args[0]
        for arg in args[1:]:
            text = f"{function}({text}, {arg})"
        return text

    return form


def stacked(reduction: str) -> Callable:
    """``reduction(np.stack(np.broadcast_arrays(a, b, ...)), axis=0)``."""
    return lambda args, constants=(): (f"{reduction}(np.stack(np.broadcast_arrays("
                                       f"{', '.join(args)})), axis=0)")


#: Sums of more terms than this are spelled without one nested expression per term.
MAX_INFIX_TERMS = 64


def python_sum(args: Sequence[str], constants: Sequence = ()) -> str:
    """``a + b + ...`` left to right, as NumPy evaluates the add primitive.

    Python's compiler recurses once per ``+`` of a chain and fails past about
    a thousand terms, so a longer sum is a ``functools.reduce`` over a flat
    tuple: the same additions in the same order, the same rounding.

    >>> python_sum(["v0", "v1"])
    '(v0 + v1)'
    >>> python_sum([f"v{i}" for i in range(100)])[:47]
    'functools.reduce(operator.add, (v0, v1, v2, v3,'
    """
    if len(args) <= MAX_INFIX_TERMS:
        return "(" + " + ".join(args) + ")"
    return f"functools.reduce(operator.add, ({', '.join(args)}))"


class BuilderRoles:
    """The operations the graph builder performs on its own account, found here by role.

    The graph (:mod:`symad.graph`) sits below the catalogue and imports none of it, yet
    recording needs three operations the catalogue defines; the catalogue names them here
    beside its stanzas:

    * ``truth``: the primitive recorded as ``x != 0`` where a number is used as a
      condition (``not_equal``, :mod:`symad.primitives`);
    * ``number``: the primitive recorded as ``select(c, 1, 0)`` where a truth value is
      used as a number (``select``, :mod:`symad.primitives`);
    * ``broadcast``: ``broadcast(builder, atom, shape) -> atom``, ``atom`` broadcast to
      ``shape`` (:func:`symad.array_primitives.broadcast_atom`), for an identity that kept
      a value but not its shape (``x - x`` is 0 for an array ``x`` too).

    >>> from symad.array_primitives import broadcast_atom
    >>> from symad.primitives import not_equal_p, select_p
    >>> BUILDER_ROLES.truth is not_equal_p, BUILDER_ROLES.number is select_p
    (True, True)
    >>> BUILDER_ROLES.broadcast is broadcast_atom
    True
    """

    __slots__ = ("truth", "number", "broadcast")

    def __init__(self) -> None:
        self.truth: Primitive | None = None
        self.number: Primitive | None = None
        self.broadcast: Callable | None = None


#: The graph builder's own operations, filled by the catalogue (see :class:`BuilderRoles`).
BUILDER_ROLES = BuilderRoles()
