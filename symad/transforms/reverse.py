"""Reverse mode: adjoints accumulated over the nodes in reverse topological order.

A ``where(c, a, b)`` node passes its cotangent to ``a`` only where ``c`` holds
and to ``b`` only where it does not. Multiplying the cotangent by the 0/1
indicator and then by the partials of the branch is not enough: a partial
that is infinite in the branch *not* taken (``1/(2*sqrt(x))`` at ``x = 0``)
turns ``0 * inf`` into ``nan``. So a cotangent that crossed a branch carries
the branch condition along as its **mask**, the chain-rule products are formed
inside the mask, and the mask is applied -- ``select(mask, product, 0)``,
outermost -- where the cotangent meets cotangents under another mask, and at
the differentiated inputs. Whatever nan or inf the untaken region produced is
then discarded by the select.

Once applied, a mask is still remembered: the masked value is an exact 0
outside it, which stays 0 under multiplication by a finite partial, but not
by one that may be infinite there. Multiplying by such a partial makes the
mask pending again, so the sum of cotangents of several where's, later
multiplied by ``1/(2*sqrt(x))``, is still 0 where no branch was taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import sympy

from symad import array_primitives as A
from symad.array_primitives import broadcast_atom
from symad.atoms import COMPLEX_SEEN, is_complex_atom
from symad.graph import ArrayInput, GraphBuilder, Node, atom_shape, is_constant, is_zero_constant
from symad.primitives import (
    add_p,
    logical_and_p,
    logical_not_p,
    logical_or_p,
    mul_p,
    pow_p,
    select_p,
)
from symad.rules.transposes import TRANSPOSE, unbroadcast
from symad.transforms.terms import partial_atom_columns, partial_atoms, sum_terms

ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)

# A cotangent term is ``(value, pending, applied)``, two masks:
#   * ``pending``: the term is ``value`` where it holds and 0 elsewhere; the
#     select that says so is recorded only when the term is summed with terms
#     under another mask, or reaches a differentiated input;
#   * ``applied``: outside it, the term is already an exact 0 (a select was
#     recorded upstream); it becomes pending again when the term is multiplied
#     by a partial that may be infinite there.
#
# A mask is None (it holds everywhere) or a tuple of parts whose conjunction
# it is; a part is a literal ``(condition_atom, taken)`` -- ``taken`` True for
# the ``if_true`` branch of a where, False for ``if_false`` -- or an
# ``_AnyOf`` of masks, the disjunction left behind where masked terms meet.
_NEVER = "never"  # a condition conjoined with its own negation

# An applied mask with more literals than this is forgotten: protection then
# stops there (as without where), and the bookkeeping stays linear in deep
# chains of where's.
_MAX_MASK_LITERALS = 16

class _AnyOf(tuple):
    """A mask part: the disjunction of the masks it holds."""


def backpropagate(
    builder: GraphBuilder,
    primal_nodes: Sequence[Node],
    seeds: Iterable[tuple],
    wrt: Sequence,
    function_name: str,
    lead: tuple = (),
) -> list:
    """Cotangents of the ``wrt`` atoms, given cotangent ``seeds`` on output atoms.

    Args:
        builder: the active builder holding ``primal_nodes``; derivative nodes are recorded in it.
        primal_nodes: the nodes to differentiate through, in topological order.
        seeds: ``(atom, cotangent_atom)`` pairs; repeated atoms accumulate.
        wrt: the atoms (usually input symbols) whose cotangents are wanted.
        function_name: the user's function, for error messages.
        lead: the shape of a leading axis of seeds every cotangent carries (a Jacobian's
            rows, swept at once: ``vmap`` of the vector-Jacobian product); ``()`` for one.

    Returns:
        One atom per ``wrt`` entry; exact ``0`` where no path leads to the outputs. With
        ``lead``, a differentiated array's cotangent has shape ``lead + its shape``.
    """
    # Only nodes that depend on a wrt atom can carry a non-zero adjoint to it.
    # Membership is asked of symbols only: hashing a sympy.Float constant costs
    # microseconds, and constants are never active.
    active = {atom for atom in wrt if atom.is_Symbol}  # a constant wrt entry has cotangent 0
    for atom in wrt:
        if atom.__class__ is ArrayInput:  # element-level code reads its elements' symbols
            active.update(atom.made_elements())
    for node in primal_nodes:
        for arg in node.args:
            if arg.is_Symbol and arg in active:
                active.add(node)
                break

    masks = _Masks(builder)
    terms: dict = {}  # atom -> the (value, pending, applied) terms still to be summed
    for atom, cotangent in seeds:
        if atom in active and not is_zero_constant(cotangent):
            terms.setdefault(atom, []).append((cotangent, None, None))

    # Nodes are taken in runs of like operations (one elementwise array operation records
    # one such run): a run's partials come from one call of the primitive's rule on arrays.
    for run in _runs_of_like_nodes(reversed(primal_nodes), terms):
        if len(run) >= _MIN_RUN:
            run = _backpropagate_run(builder, run, terms, masks, active, function_name)
        for node in run:
            if node.shape == () and node.primitive.elementwise:
                _backpropagate_node(builder, node, terms, masks, active, function_name)
            elif node.primitive.elementwise:
                _backpropagate_elementwise_array(builder, node, terms, masks, active, function_name,
                                                 len(lead))
            else:
                _backpropagate_array_node(builder, node, terms, masks, active, function_name,
                                          len(lead))

    return [_input_cotangent(builder, atom, terms, masks, lead) for atom in wrt]


def _input_cotangent(builder, atom, terms: dict, masks, lead: tuple = ()) -> object:
    """The cotangent of one differentiated atom, at its full shape (exact 0 if none reaches it).

    An array input's cotangent gathers what reached it whole and what reached
    the symbols of its elements that element-level code read.
    """
    value = None
    if atom.is_Symbol and atom in terms:
        combined, pending, _ = masks.combine(terms[atom])
        value = masks.apply(combined, pending)
        if COMPLEX_SEEN[0] and is_complex_atom(atom) and not is_complex_atom(value):
            value = _as_complex(builder, value)
    if value is None and COMPLEX_SEEN[0] and is_complex_atom(atom):
        value = _as_complex(builder, ZERO)  # a complex zero: a cotangent has its input's dtype
    if atom.__class__ is not ArrayInput:
        return ZERO if value is None else value
    element_terms = {}
    for symbol in atom.made_elements():
        if symbol in terms:
            combined, pending, _ = masks.combine(terms[symbol])
            element_terms[atom.element_index(symbol)] = masks.apply(combined, pending)
    if element_terms:
        import numpy as np

        from symad.atom_arrays import pack_elements

        elements = np.full(atom.shape, ZERO, dtype=object)
        for index, element in element_terms.items():
            elements[index] = element
        packed = pack_elements(builder, elements)
        value = packed if value is None else builder.record(add_p, (value, packed))
    if value is None:
        return broadcast_atom(builder, ZERO, lead + atom.shape)
    return full_shape(builder, value, atom.shape, len(lead))


def _as_complex(builder, value):
    """A real cotangent of a complex input, as a complex value (JAX's dtype: ``value + 0j``)."""
    import numpy as np

    zero = builder.record(A.constant_p, (), (("value", A.ConstantArray(np.zeros((), complex))),))
    return builder.record(add_p, (value, zero))


def full_shape(builder, value, shape: tuple, lead: int):
    """``value`` (``lead`` leading dimensions, then a core that broadcasts to ``shape``) at
    its full shape: a broadcast view, or the value itself."""
    from symad.rules.transposes import broadcast_full

    if lead == 0:
        return value if atom_shape(value) == shape else broadcast_atom(builder, value, shape)
    return broadcast_full(builder, value, shape, lead)



# A run shorter than this is swept node by node: the array rule's set-up costs more
# than it saves below a handful of nodes (and scalar code then records exactly as before).
_MIN_RUN = 8


def _runs_of_like_nodes(nodes: Iterable[Node], terms: dict) -> Iterator[list[Node]]:
    """The nodes that receive a cotangent, in runs of one primitive and parameters.

    A run never holds a node together with a node that uses it: the run is
    swept at once, so every cotangent reaching its nodes must be complete.
    """
    run: list[Node] = []
    run_kind = None
    used_by_run: set = set()
    for node in nodes:
        if node in used_by_run:  # its cotangent is complete once the run is swept
            yield run
            run, used_by_run = [], set()
        if node not in terms:
            continue
        if node.shape or not node.primitive.elementwise:  # an array node is swept alone
            if run:
                yield run
                run, used_by_run = [], set()
            yield [node]
            continue
        kind = (node.primitive, node.params)
        if run and kind != run_kind:
            yield run
            run, used_by_run = [], set()
        run.append(node)
        run_kind = kind
        for arg in node.args:
            if arg.is_Symbol:
                used_by_run.add(arg)
    if run:
        yield run


def _backpropagate_node(builder, node, terms, masks, active, function_name) -> None:
    """Pass ``node``'s cotangent on to its operands, times its partials."""
    cotangent, pending, applied = masks.combine(terms.pop(node))
    wanted = _active_operands(node.args, active)
    if node.primitive is select_p:
        # Each branch receives the cotangent under its own condition; the
        # condition itself (index 0) has no derivative.
        condition = node.args[0]
        for index in wanted:
            if index == 0:
                continue
            branch = masks.conjoin(pending, ((condition, index == 1),))
            if branch is not _NEVER:
                terms.setdefault(node.args[index], []).append((cotangent, branch, applied))
        return
    for index, partial in partial_atoms(node, wanted, function_name).items():
        term = _chain_rule_product(builder, cotangent, partial)
        if node.complex:
            term = real_projection(builder, node.args[index], term)
        if applied is None or masks.is_finite(partial):
            masked = (term, pending, applied)
        else:  # 0 * inf outside `applied`: the select must come after this product
            masked = (term, masks.conjoin(pending, applied), None)
            if masked[1] is _NEVER:  # zero everywhere
                continue
        terms.setdefault(node.args[index], []).append(masked)


def _backpropagate_elementwise_array(builder, node, terms, masks, active, function_name,
                                     lead: int) -> None:
    """An elementwise node on arrays: as a scalar node, then each operand's share is summed
    over the axes broadcasting added to it (after its mask is applied)."""
    cotangent, pending, applied = masks.combine(terms.pop(node))
    wanted = _active_operands(node.args, active)
    if node.primitive is select_p:
        condition = node.args[0]
        for index in wanted:
            if index == 0:
                continue
            branch = masks.conjoin(pending, ((condition, index == 1),))
            if branch is not _NEVER:
                _add_term(builder, masks, terms, node.args[index], (cotangent, branch, applied), lead,
                          node.shape)
        return
    for index, partial in partial_atoms(node, wanted, function_name).items():
        term = _chain_rule_product(builder, cotangent, partial)
        if node.complex:
            term = real_projection(builder, node.args[index], term)
        if applied is None or masks.is_finite(partial):
            masked = (term, pending, applied)
        else:
            masked = (term, masks.conjoin(pending, applied), None)
            if masked[1] is _NEVER:
                continue
        _add_term(builder, masks, terms, node.args[index], masked, lead, node.shape)


def _add_term(builder, masks, terms: dict, operand, masked: tuple, lead: int = 0,
              from_shape: tuple | None = None) -> None:
    """Add a cotangent term for ``operand``, summed down to its shape where it is larger.

    ``from_shape`` is the shape the term stands for: that of the elementwise
    node the operand was broadcast into (None: the term's own shape, as a
    transpose rule returns it). A term stored smaller than that (the seed 1 of
    a sum) is kept as it is where the operand has the node's shape: it
    broadcasts. Where broadcasting repeated the operand, or a mask's condition
    is larger than the operand, the term is masked first and then summed over
    the repeats (:func:`symad.rules.transposes.unbroadcast`).
    """
    value, pending, applied = masked
    shape = atom_shape(operand)
    repeated = from_shape is not None and _was_repeated(shape, from_shape)
    if (not repeated and _fits(atom_shape(value), shape, lead) and _mask_fits(pending, shape)
            and _mask_fits(applied, shape)):
        terms.setdefault(operand, []).append(masked)
        return
    value = masks.apply(value, pending)
    value = unbroadcast(builder, value, shape, lead, from_shape)
    terms.setdefault(operand, []).append((value, None, None))


def _was_repeated(shape: tuple, from_shape: tuple) -> bool:
    """True if broadcasting an operand of ``shape`` to ``from_shape`` repeats its elements."""
    if len(shape) > len(from_shape):
        return False
    return any(size == 1 and target != 1
               for size, target in zip(((1,) * (len(from_shape) - len(shape)) + shape), from_shape))


def _fits(value_shape: tuple, shape: tuple, lead: int = 0) -> bool:
    """True if a term of ``value_shape`` (behind ``lead`` dimensions of seeds) broadcasts to
    exactly ``shape``; with seeds its core must have the full rank, so that the seeds
    stay in front."""
    if lead:
        core = value_shape[lead:]
        return core == shape or (len(core) == len(shape) and all(v in (1, s) for v, s in zip(core, shape)))
    if value_shape == shape or not value_shape:
        return True
    if len(value_shape) > len(shape):
        return False
    return all(v == s or v == 1 for v, s in zip(value_shape[::-1], shape[::-1]))


def _mask_fits(mask, shape: tuple) -> bool:
    if mask is None or mask is _NEVER:
        return True
    for part in mask:
        if isinstance(part, _AnyOf):
            if not all(_mask_fits(alternative, shape) for alternative in part):
                return False
        elif not _fits(atom_shape(part[0]), shape):
            return False
    return True


def _backpropagate_array_node(builder, node, terms, masks, active, function_name,
                              lead: int) -> None:
    """A linear or array node: its cotangent, masked and at its full shape, through the
    primitive's transpose rule (symad.rules.transposes) to each operand."""
    cotangent, pending, _ = masks.combine(terms.pop(node))
    cotangent = full_shape(builder, masks.apply(cotangent, pending), node.shape, lead)
    rule = TRANSPOSE.get(node.primitive)
    if rule is None:
        from symad.errors import DifferentiationError

        raise DifferentiationError(
            f"no reverse-mode rule for the array operation {node.primitive.name!r}, needed to "
            f"differentiate function {function_name!r}")
    for index in _active_operands(node.args, active):
        share = rule(builder, cotangent, node, index, lead)
        if share is not None and COMPLEX_SEEN[0]:
            share = real_projection(builder, node.args[index], share)
        if share is not None and not is_zero_constant(share):
            _add_term(builder, masks, terms, node.args[index], (share, None, None), lead)


def _backpropagate_run(builder, run, terms, masks, active, function_name) -> list[Node]:
    """Sweep the unmasked nodes of a run at once; return the nodes left for one by one.

    The same products as node by node, recorded in a different order: the
    primitive's rule is called once on arrays of the run's operands (only rules
    written with broadcasting ``symad.numpy`` operations, those of
    ``Primitive.broadcasting_partials``), then each partial is multiplied by
    its node's cotangent.
    """
    primitive = run[0].primitive
    if (not primitive.broadcasting_partials or primitive.variadic or primitive is select_p
            or run[0].shape or not primitive.elementwise):
        return run
    left: list[Node] = []
    by_wanted: dict = {}  # the operand positions that need a partial -> [(node, cotangent)]
    for node in run:
        masked_terms = terms.pop(node)
        # One path reaches most nodes of a run (every element of an elementwise chain).
        cotangent, pending, applied = (masked_terms[0] if len(masked_terms) == 1
                                       else masks.combine(masked_terms))
        if pending is not None or applied is not None:
            terms[node] = [(cotangent, pending, applied)]  # combined: swept alone
            left.append(node)
            continue
        by_wanted.setdefault(_active_operands(node.args, active), []).append((node, cotangent))
    for wanted, members in by_wanted.items():
        if not wanted:
            continue
        nodes = [node for node, _ in members]
        for index, partials in partial_atom_columns(nodes, wanted, function_name).items():
            for (node, cotangent), partial in zip(members, partials):
                if not is_zero_constant(partial):
                    term = _chain_rule_product(builder, cotangent, partial)
                    if node.complex:
                        term = real_projection(builder, node.args[index], term)
                    terms.setdefault(node.args[index], []).append((term, None, None))
    return left


def _active_operands(args: tuple, active: set) -> tuple:
    """The positions of the operands that depend on a differentiated input."""
    if len(args) == 1:  # the common case, without a generator
        return (0,) if args[0].is_Symbol and args[0] in active else ()
    return tuple(index for index, arg in enumerate(args) if arg.is_Symbol and arg in active)


def real_projection(builder: GraphBuilder, operand, term):
    """``term``, or its real part where a complex term reaches a real ``operand``: the
    transpose of the real numbers' embedding in the complex ones (JAX's pairing
    Re(ct * t): a real tangent t pairs with Re(ct) only).

    >>> import symad as sd, numpy as np   # x real, x * 1j complex: x's gradient is real
    >>> float(sd.grad(lambda x: np.real(np.exp(1j * x)))(0.5)) == -float(np.sin(0.5))
    True
    """
    if is_complex_atom(term) and not is_complex_atom(operand):
        return builder.record(A.real_p, (term,))
    return term


def _chain_rule_product(builder: GraphBuilder, cotangent, partial):
    """``cotangent * partial``; a factor of exactly 1 (every partial of a sum, the seed)
    is what the builder's own identity would drop, so no product is recorded at all."""
    if partial is ONE:
        return cotangent
    if cotangent is ONE:
        return partial
    return builder.record(mul_p, (cotangent, partial))


class _Masks:
    """The mask bookkeeping of one reverse sweep, recording into ``builder``."""

    def __init__(self, builder: GraphBuilder):
        self.builder = builder
        self._conditions: dict = {}  # mask -> its truth-valued atom, once recorded
        self._finite = set(builder.inputs)  # atoms known finite for finite inputs
        self._classified = 0  # builder.nodes before this index have been classified

    def combine(self, masked_terms: list) -> tuple:
        """One ``(value, pending, applied)`` term from the terms reaching an atom.

        Terms with the same pending mask are summed and stay pending (the
        common case: one where upstream). Otherwise each is masked, then
        summed: the sum is 0 wherever none of their masks holds.
        """
        if len(masked_terms) == 1:  # one path reaches the atom (every step of a chain)
            return masked_terms[0]
        if all(pending is None and applied is None for _, pending, applied in masked_terms):
            # No where upstream (the common case): a plain sum.
            return sum_terms(self.builder, [value for value, _, _ in masked_terms]), None, None
        by_pending: dict = {}
        for value, pending, applied in masked_terms:
            by_pending.setdefault(pending, []).append((value, applied))
        builder = self.builder
        if len(by_pending) == 1:
            ((pending, group),) = by_pending.items()
            value = sum_terms(builder, [value for value, _ in group])
            return value, pending, self._union([applied for _, applied in group])
        values, zero_outside = [], []
        for pending, group in by_pending.items():
            value = sum_terms(builder, [value for value, _ in group])
            values.append(self.apply(value, pending))
            applied = self._union([applied for _, applied in group])
            both = self.conjoin(pending, applied)
            zero_outside.append(pending if both is _NEVER else both)
        return sum_terms(builder, values), None, self._union(zero_outside)

    def conjoin(self, first, second):
        """The conjunction of two masks; ``_NEVER`` if a condition meets its negation."""
        if first is None or second is None:
            return second if first is None else first
        literals = {part for part in first + second if not isinstance(part, _AnyOf)}
        if any((condition, not taken) in literals for condition, taken in literals):
            return _NEVER
        ordered = sorted(literals, key=lambda lit: (self.builder.sort_key(lit[0]), lit[1]))
        alternatives = [part for part in first + second if isinstance(part, _AnyOf)]
        return tuple(ordered) + tuple(dict.fromkeys(alternatives))

    def _union(self, masks: list):
        """The disjunction of ``masks`` (None: nothing known), forgotten past the size limit."""
        distinct = list(dict.fromkeys(masks))
        if None in distinct:
            return None
        if len(distinct) == 1:
            return distinct[0]
        union = (_AnyOf(distinct),)
        return union if _literal_count(union) <= _MAX_MASK_LITERALS else None

    def apply(self, value, mask):
        """``value`` where ``mask`` holds, exact 0 elsewhere (nan and inf there are discarded)."""
        if mask is None or is_zero_constant(value):
            return value
        builder = self.builder
        if len(mask) == 1 and not isinstance(mask[0], _AnyOf):
            ((condition, taken),) = mask
            branches = (value, ZERO) if taken else (ZERO, value)
            return builder.record(select_p, (condition, *branches))
        return builder.record(select_p, (self._condition(mask), value, ZERO))

    def _condition(self, mask):
        """The truth-valued atom of ``mask`` (nested at most _MAX_MASK_LITERALS deep)."""
        atom = self._conditions.get(mask)
        if atom is not None:
            return atom
        builder = self.builder
        for part in mask:
            if isinstance(part, _AnyOf):
                holds = None
                for alternative in part:
                    option = self._condition(alternative)
                    holds = option if holds is None else builder.record(logical_or_p, (holds, option))
            else:
                condition, taken = part
                holds = condition if taken else builder.record(logical_not_p, (condition,))
            atom = holds if atom is None else builder.record(logical_and_p, (atom, holds))
        self._conditions[mask] = atom
        return atom

    def is_finite(self, atom) -> bool:
        """True if ``atom`` is finite wherever the inputs are (a conservative answer)."""
        if is_constant(atom):
            return isinstance(atom, sympy.logic.boolalg.BooleanAtom) or bool(atom.is_finite)
        finite, nodes = self._finite, self.builder.nodes
        # Classify the nodes recorded since the last call, in topological order.
        while self._classified < len(nodes):
            node = nodes[self._classified]
            self._classified += 1
            if _keeps_finite(node) and all(is_constant(a) or a in finite for a in node.args):
                finite.add(node)
        return atom in finite


def _keeps_finite(node: Node) -> bool:
    name = node.primitive.name
    if name == "constant":  # a constant array: finite if every value is
        import numpy as np

        return bool(np.isfinite(dict(node.params)["value"].array).all())
    # A primitive whose stanza says it is finite where its operands are (overflow aside): a
    # partial built only from such nodes and the inputs cannot be the infinity of an
    # untaken branch, so multiplying by it keeps a mask applied.
    if node.primitive.finite:
        return True
    # x**k with a constant non-negative integer k is a polynomial.
    exponent = node.args[1] if node.primitive is pow_p else None
    return exponent is not None and exponent.is_Number and exponent >= 0 and float(exponent).is_integer()


def _literal_count(mask) -> int:
    if mask is None:
        return 0
    return sum(sum(_literal_count(m) for m in part) if isinstance(part, _AnyOf) else 1
               for part in mask)
