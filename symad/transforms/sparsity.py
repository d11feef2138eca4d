"""Structural sparsity: which outputs depend on which inputs, read off the graph without unrolling it.

Each atom gets a *pattern*: one row per element of the atom (flattened,
leading dimensions included), one column per element of the inputs, a one
where the element depends on that input element at all. One pass over the
nodes in topological order maps each node's operands' patterns to its own
through the primitive's index map, never element by element, so the pass
costs what the graph's operations cost, not what its arrays' elements would.

* An array's pattern is a boolean ``scipy.sparse.csr_matrix``. A primitive's
  index map is a *link*: pairs (output element, operand element) saying which
  operand elements each output element reads, built with NumPy index
  arithmetic on ``np.arange`` codes. The node's pattern is ``L @ P``, where
  ``P`` stacks its operands' patterns and ``L`` is the link as a sparse
  selection matrix, in boolean arithmetic (a sum is an OR). The moving
  primitives (reshape, transpose, broadcast, slices, ``take``,
  ``concatenate``, ``pack``, ``scatter``, ``unslice``) apply their own NumPy
  implementation to arrays of element codes: each output element receives
  the code of the operand element it copies, so each index map is the
  primitive's own, written nowhere twice.
* A scalar is a one-element array, and its one row is kept in the cheapest
  form a row has: a Python ``int`` with bit ``i`` set for column ``i``. A
  scalar node of scalars ORs its operands' masks (a few machine words, no
  library call), which keeps a graph of 10^5 scalar nodes as fast as it ever
  was; where scalars meet arrays, masks are stacked as rows.
* Constants the graph knows decide elements as the builder's identities do
  for scalars (``0 * x`` is recorded as 0): a Jacobian's identity seeds are
  zero off the diagonal, ``unslice`` pads with zeros. Nodes known in part
  keep ``(known, value)`` arrays, and a known element depends on nothing; so
  a pattern is the one the unrolled graph (``F.expand()``) would give.

>>> import symad as sd, numpy as np
>>> F = sd.trace(lambda u: np.sum(u[1:] * u[:-1]) + u ** 2, np.zeros(3))
>>> F.sparsity().toarray().tolist()
[[1, 1, 1], [1, 1, 1], [1, 1, 1]]
>>> sd.trace(lambda u: u[1:] - u[:-1], np.zeros(3)).sparsity().toarray().tolist()
[[1, 1, 0], [0, 1, 1]]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from symad import array_primitives as A
from symad import linalg_primitives as L
from symad import primitives as P
from symad.atoms import constant_value
from symad.errors import SymadError
from symad.graph import ArrayInput, Node, atom_shape
from symad.ir.primitive import RuleTable

__all__ = ["set_bits", "array_patterns", "sparsity_pattern", "Patterns"]


def set_bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of ``mask``, lowest first.

    >>> list(set_bits(0b10110))
    [1, 2, 4]
    """
    while mask:
        lowest = mask & -mask
        yield lowest.bit_length() - 1
        mask ^= lowest


def _mask_columns(mask: int, columns: int) -> np.ndarray:
    """The set bits of a mask as an index array (its bytes unpacked: no Python loop over the bits)."""
    bits = np.unpackbits(np.frombuffer(mask.to_bytes((columns + 7) // 8, "little"), dtype=np.uint8),
                         bitorder="little")
    return np.flatnonzero(bits[:columns])


def _as_mask(matrix) -> int:
    """A one-row pattern as a bit mask."""
    bits = np.zeros(matrix.shape[1], dtype=bool)
    bits[matrix.indices] = True
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def _stack(patterns: Sequence, sizes: Sequence[int], columns: int):
    """The operands' rows on top of each other as one ``csr_matrix`` (masks and matrices alike; an
    operand with no pattern: empty rows)."""
    import scipy.sparse

    counts, indices = [], []
    for pattern, size in zip(patterns, sizes):
        if pattern is None:
            counts.append(np.zeros(size, dtype=np.intp))
        elif isinstance(pattern, int):
            columns_of = _mask_columns(pattern, columns)
            counts.append(np.array([columns_of.size]))
            indices.append(columns_of)
        else:
            counts.append(np.diff(pattern.indptr))
            indices.append(pattern.indices)
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.intp)
    indices = np.concatenate(indices).astype(np.intp) if indices else np.zeros(0, dtype=np.intp)
    return scipy.sparse.csr_matrix((np.ones(indices.size, dtype=bool), indices, indptr),
                                   shape=(int(sum(sizes)), columns))


def _size(atom) -> int:
    return math.prod(atom_shape(atom))


def _codes(shape: tuple, start: int = 0) -> np.ndarray:
    """``start, start+1, ...`` laid out in ``shape``: each element's flat position (plus ``start``)."""
    return np.arange(start, start + math.prod(shape), dtype=np.intp).reshape(shape)


# -- constants the graph knows ------------------------------------------------------

#: The most elements a node's known values are worked out for (see :func:`_settled`);
#: a larger node is taken as unknown, which only makes its pattern wider.
MAX_KNOWN_ELEMENTS = 10**7


def _knowledge(atom, known: dict, shape: tuple):
    """``(known, value)`` of an operand, broadcast to ``shape``: where its value is known, and that value."""
    if not atom.is_Symbol:
        return np.ones(shape, dtype=bool), np.full(shape, constant_value(atom), dtype=np.float64)
    entry = known.get(atom)
    if entry is None:
        return np.zeros(shape, dtype=bool), np.zeros(shape)
    return np.broadcast_to(entry[0], shape), np.broadcast_to(entry[1], shape)


def _applied(node, values: list):
    """The primitive's own NumPy implementation on the operands' values (None if it fails)."""
    with np.errstate(all="ignore"):
        try:
            result = node.primitive.numpy_impl(*values, **dict(node.params))
            return np.array(np.broadcast_to(np.asarray(result, dtype=np.float64), node.shape))
        except Exception:  # noqa: BLE001 - a custom primitive's code: nothing known, a wider pattern
            return None


def _settled(node, operands: list) -> tuple:
    """The elements of an elementwise node known whatever its operands' unknown elements are, and
    where each operand's dependency reaches the node: ``((known, value), reaches)``.

    Known: where every operand is known (the primitive applied to them), and
    by the builder's identities (:data:`IDENTITIES`).
    """
    masks = [mask for mask, _ in operands]
    value = _applied(node, [np.where(mask, value, 1.0) for mask, value in operands])
    known = np.logical_and.reduce(masks) if value is not None else np.zeros(node.shape, dtype=bool)
    value = value if value is not None else np.zeros(node.shape)
    identity = IDENTITIES.get(node.primitive)
    if identity is None:
        return (known, value), [~known] * len(operands)
    return identity(known, value, operands)


#: The builder's identities that decide an element of an elementwise node from some of its
#: operands' known elements: ``rule(known, value, operands) -> ((known, value), reaches)``,
#: where ``operands`` holds each operand's ``(known, value)`` arrays.
IDENTITIES = RuleTable("sparsity identities", applies=lambda primitive: primitive.elementwise,
                       default_reason=lambda primitive: "no identity decides an element")


def _decided(decided, result: float):
    """An identity deciding the elements ``decided(masks, values)`` as ``result``."""
    def rule(known, value, operands):
        masks = [mask for mask, _ in operands]
        values = [value for _, value in operands]
        at = decided(masks, values)
        known, value = known | at, np.where(at, result, value)
        return (known, value), [~known] * len(operands)
    return rule


IDENTITIES.update({
    # 0 * x = 0
    P.mul_p: _decided(lambda masks, values: np.logical_or.reduce(
        [mask & (v == 0) for mask, v in zip(masks, values)]), 0.0),
    # 0 / x = 0 (unless x is a known 0)
    P.div_p: _decided(lambda masks, values: masks[0] & (values[0] == 0)
                      & ~(masks[1] & (values[1] == 0)), 0.0),
    # x ** 0 = 1, 1 ** x = 1
    P.pow_p: _decided(lambda masks, values: (masks[1] & (values[1] == 0))
                      | (masks[0] & (values[0] == 1)), 1.0),
})


@IDENTITIES.register(P.select_p)
def _select(known, value, operands):
    """``where(c, a, b)`` with a known ``c`` is ``a`` or ``b``, and reads only that branch."""
    (condition_known, condition), (true_known, if_true), (false_known, if_false) = operands
    taken, dropped = condition_known & (condition != 0), condition_known & (condition == 0)
    branch_known = condition_known & np.where(taken, true_known, false_known)
    known = known | branch_known
    value = np.where(branch_known, np.where(taken, if_true, if_false), value)
    unknown = ~known
    return (known, value), [unknown, unknown & ~dropped, unknown & ~taken]


# -- the index maps ---------------------------------------------------------------------
#
# A rule is ``rule(node, offsets, present, known) -> (out_rows, operand_rows, knowledge)``:
# the link as two index arrays, where operand ``k``'s element ``e`` is row ``offsets[k] + e``
# of the stacked operands (only operands with ``present[k]``, a pattern, need links), and
# the node's ``(known, value)`` or None.


def _pairs(links: list) -> tuple:
    if not links:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    return (np.concatenate([np.asarray(out, dtype=np.intp).reshape(-1) for out, _ in links]),
            np.concatenate([np.asarray(operand, dtype=np.intp).reshape(-1) for _, operand in links]))


def _elementwise(node, offsets, present, known):
    """Each output element reads the element of every operand that NumPy's broadcasting aligns with it,
    except where the node is known (:func:`_settled`)."""
    size = _size(node)
    knowledge, reaches = None, [None] * len(node.args)
    # (A number operand alone decides nothing: the builder has applied its identities already.)
    if size <= MAX_KNOWN_ELEMENTS and any(atom in known for atom in node.args):
        knowledge, reaches = _settled(node, [_knowledge(atom, known, node.shape) for atom in node.args])
    links = []
    for atom, offset, has, where in zip(node.args, offsets, present, reaches):
        if has:
            rows = np.broadcast_to(_codes(atom_shape(atom), offset), node.shape).reshape(-1)
            kept = np.arange(size) if where is None else np.flatnonzero(where)
            links.append((kept, rows[kept]))
    return (*_pairs(links), knowledge)


def _moved(node, offsets, present, known):
    """A primitive that copies elements: its own NumPy implementation applied to element codes.

    Operand ``k``'s elements get the codes ``1 + offsets[k] + flat position``;
    the implementation moves the codes where it moves the values, so each
    output element holds the code of the element it copies, or 0 where it
    holds a zero of its own (the padding of ``unslice``).
    """
    codes = [_codes(atom_shape(atom), 1 + offset).astype(np.float64) for atom, offset in zip(node.args, offsets)]
    moved = np.broadcast_to(np.asarray(node.primitive.numpy_impl(*codes, **dict(node.params))), node.shape)
    moved = moved.reshape(-1).astype(np.intp) - 1  # a stacked operand row; -1: padding
    rows = np.flatnonzero(moved >= 0)
    owner = np.searchsorted(np.asarray(offsets), moved[rows], side="right") - 1
    linked = np.asarray(present, dtype=bool)[owner]
    mask, value = moved < 0, np.zeros(moved.size)  # the padding: known zeros
    for k, atom in enumerate(node.args):
        if atom in known or not atom.is_Symbol:
            operand_known, operand_value = _knowledge(atom, known, atom_shape(atom))
            mine = rows[owner == k]
            sources = moved[mine] - offsets[k]
            mask[mine] = operand_known.reshape(-1)[sources]
            value[mine] = operand_value.reshape(-1)[sources]
    knowledge = (mask.reshape(node.shape), value.reshape(node.shape)) if mask.any() else None
    return rows[linked], moved[rows[linked]], knowledge


def _reduced(node, offsets, present, known):
    """Each output element: the OR of the operand elements reduced into it (known where they all are)."""
    (atom,), (offset,) = node.args, offsets
    in_shape = atom_shape(atom)
    axes = dict(node.params)["axes"]
    target = np.broadcast_to(np.expand_dims(_codes(node.shape), [len(in_shape) + axis for axis in axes]),
                             in_shape)
    knowledge = None
    if atom in known:
        operand_known, operand_value = _knowledge(atom, known, in_shape)
        mask = np.all(operand_known, axis=axes)
        value = _applied(node, [np.where(operand_known, operand_value, 0.0)]) if mask.any() else None
        knowledge = None if value is None else (mask, value)
    return target, _codes(in_shape, offset), knowledge


def _take_add(node, offsets, present, known):
    """Scatter-add: each operand element goes to the output element ``take`` would read it from."""
    (atom,), (offset,) = node.args, offsets
    params = dict(node.params)
    target = A.take_p.numpy_impl(_codes(node.shape), in_shape=params["in_shape"], indices=params["indices"],
                                 axis=params["axis"])
    return np.broadcast_to(target, atom_shape(atom)), _codes(atom_shape(atom), offset), None


def _cumsum(node, offsets, present, known):
    """A cumulative sum: element ``i`` along the axis reads the elements up to ``i`` (from ``i`` when reversed)."""
    params = dict(node.params)
    lines = np.moveaxis(_codes(node.shape), params["axis"], -1)
    lines = lines.reshape(-1, lines.shape[-1])
    later, earlier = np.tril_indices(lines.shape[-1])
    if params["reverse"]:
        later, earlier = earlier, later
    return lines[:, later], offsets[0] + lines[:, earlier], None


def _argsort(node, offsets, present, known):
    """Integer positions: piecewise constant, so no derivative links them to the operand."""
    return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp), None


def _along_lines(node, offsets, present, known):
    """take_along and its scatter-add at indices computed at run time: each output element
    may read any element of the first operand along the axis (at the same place off it)."""
    axis = dict(node.params)["axis"]
    out = np.moveaxis(_codes(node.shape), axis, -1)
    operand = np.moveaxis(_codes(atom_shape(node.args[0]), offsets[0]), axis, -1)
    operand = np.broadcast_to(operand, out.shape[:-1] + operand.shape[-1:])
    target = np.broadcast_to(out[..., :, None], out.shape + (operand.shape[-1],))
    source = np.broadcast_to(operand[..., None, :], out.shape + (operand.shape[-1],))
    return target, source, None


def _einsum(node, offsets, present, known):
    """Each output element reads, per term of its sum, the two operand elements multiplied.

    The terms are the points of the index space (the output's indices, then
    the contracted ones); a term with a factor known to be zero is no term
    (the unrolled sum skips it), and an output element whose every term is
    known is known.
    """
    (sa, sb), sc = A.parse_subscripts(dict(node.params)["subscripts"])
    lead = node.shape[: len(node.shape) - len(sc)]
    sizes = dict(zip(sc, node.shape[len(lead):]))
    for atom, letters in zip(node.args, (sa, sb)):
        sizes.update(zip(letters, atom_shape(atom)[len(atom_shape(atom)) - len(letters):]))
    space = tuple(sc) + tuple(letter for letter in dict.fromkeys(sa + sb) if letter not in sc)
    full = lead + tuple(sizes[letter] for letter in space)
    target = np.broadcast_to(_codes(node.shape).reshape(node.shape + (1,) * (len(space) - len(sc))), full)
    sources = []
    for atom, letters in zip(node.args, (sa, sb)):
        shape = atom_shape(atom)
        own_lead = shape[: len(shape) - len(letters)]
        in_space = [letter for letter in space if letter in letters]
        codes = np.transpose(_codes(shape), tuple(range(len(own_lead))) + tuple(
            len(own_lead) + letters.index(letter) for letter in in_space))
        codes = codes.reshape((1,) * (len(lead) - len(own_lead)) + own_lead + tuple(
            sizes[letter] if letter in letters else 1 for letter in space))
        sources.append(np.broadcast_to(codes, full).reshape(-1))
    target = target.reshape(-1)
    alive = np.ones(target.size, dtype=bool)
    unknown = np.zeros(target.size, dtype=bool)
    if any(atom in known or not atom.is_Symbol for atom in node.args):
        for atom, source in zip(node.args, sources):
            mask, value = _knowledge(atom, known, atom_shape(atom))
            mask, value = mask.reshape(-1)[source], value.reshape(-1)[source]
            alive &= ~(mask & (value == 0))
            unknown |= ~mask
    else:
        unknown[:] = True
    links = [(target[alive], offset + source[alive])
             for source, offset, has in zip(sources, offsets, present) if has]
    settled = np.bincount(target[alive & unknown], minlength=_size(node)) == 0
    knowledge = None
    if settled.any():
        value = _applied(node, [np.where(*_knowledge(atom, known, atom_shape(atom)), 0.0) for atom in node.args])
        knowledge = None if value is None else (settled.reshape(node.shape), value)
    return (*_pairs(links), knowledge)


def _same_position(node, offsets, present, known):
    """A complex part or conjugate: each output element reads the operand element at its place."""
    rows = _codes(node.shape)
    return rows, offsets[0] + rows, None


def _along_axes(node, offsets, present, known):
    """A Fourier transform: each output element reads every operand element that shares its
    coordinates off the transformed axes (dense along them, independent across them)."""
    params = dict(node.params)
    axes = params.get("axes") or (params["axis"],)
    moved = tuple(range(-len(axes), 0))
    out_lines = np.moveaxis(_codes(node.shape), axes, moved)
    in_lines = np.moveaxis(_codes(atom_shape(node.args[0])), axes, moved)
    count = math.prod(out_lines.shape[:-len(axes)])
    out_lines, in_lines = out_lines.reshape(count, -1), in_lines.reshape(count, -1)
    rows = np.broadcast_to(out_lines[:, :, None], out_lines.shape + in_lines.shape[-1:])
    columns = np.broadcast_to(in_lines[:, None, :], rows.shape)
    return rows.reshape(count, -1), offsets[0] + columns.reshape(count, -1), None


def _dense_within_matrices(node, offsets, present, known):
    """Linear algebra: each element of a result reads every element of the matrices (or
    right-hand sides) it is computed from, at the same place of the stack (stacks
    broadcast as in NumPy); the sign of a determinant reads nothing (its derivative is zero)."""
    out_core, operand_cores = L.core_ranks(node)
    batch = node.shape[: len(node.shape) - out_core]
    links = []
    for atom, offset, has, core in zip(node.args, offsets, present, operand_cores):
        if not has or node.primitive is L.det_sign_p:
            continue
        shape = atom_shape(atom)
        own_batch, own_core = shape[: len(shape) - core], shape[len(shape) - core:]
        full = node.shape + own_core
        out = _codes(node.shape).reshape(node.shape + (1,) * core)
        codes = _codes(shape, offset).reshape(
            (1,) * (len(batch) - len(own_batch)) + own_batch + (1,) * out_core + own_core)
        links.append((np.broadcast_to(out, full), np.broadcast_to(codes, full)))
    return (*_pairs(links), None)


#: The index map of each non-elementwise primitive (see the rules above): the primitives
#: that only move elements (the stanza's ``moves``) by their own NumPy implementation.
PATTERN = RuleTable("sparsity pattern", applies=lambda primitive: not primitive.elementwise)
PATTERN.update({A.reduce_sum_p: _reduced, A.amax_p: _reduced, A.amin_p: _reduced,
                A.reduce_logsumexp_p: _reduced, A.einsum_p: _einsum, A.take_add_p: _take_add,
                A.cumsum_p: _cumsum, A.real_p: _same_position, A.imag_p: _same_position,
                A.conj_p: _same_position, A.modulus_p: _same_position, A.fft_p: _along_axes, A.rfft_p: _along_axes,
                A.irfft_p: _along_axes, A.argsort_p: _argsort, A.take_along_p: _along_lines,
                A.take_along_add_p: _along_lines})
PATTERN.register(*L.LINALG_PRIMITIVES)(_dense_within_matrices)
PATTERN.register(*[primitive for primitive in A.ARRAY_PRIMITIVES if primitive.moves])(_moved)
PATTERN.no_rule("a constant array: its value is known whole, it depends on nothing",
                A.constant_p)


def _linked(size: int, out_rows, operand_rows, patterns: list, sizes: list, offsets: list, columns: int):
    """``L @ P``: the node's pattern from its link and its operands' patterns (stacked)."""
    import scipy.sparse

    out_rows = np.asarray(out_rows, dtype=np.intp).reshape(-1)
    operand_rows = np.asarray(operand_rows, dtype=np.intp).reshape(-1)
    if not out_rows.size:
        return None
    # An identity link to one array operand (an elementwise function of it): its own pattern.
    alone = [k for k, pattern in enumerate(patterns) if pattern is not None]
    if (len(alone) == 1 and not isinstance(patterns[alone[0]], int) and out_rows.size == size == sizes[alone[0]]
            and np.array_equal(out_rows, np.arange(size))
            and np.array_equal(operand_rows, np.arange(offsets[alone[0]], offsets[alone[0]] + size))):
        return patterns[alone[0]]
    stacked = _stack(patterns, sizes, columns)
    link = scipy.sparse.csr_matrix((np.ones(out_rows.size, dtype=bool), (out_rows, operand_rows)),
                                   shape=(size, stacked.shape[0]))
    return link @ stacked


# -- the pass -------------------------------------------------------------------------


def _block(start: int, size: int, columns: int):
    """Rows ``0..size-1`` with a one in columns ``start..start+size-1``: an input's identity block."""
    import scipy.sparse

    return scipy.sparse.csr_matrix(
        (np.ones(size, dtype=bool), np.arange(start, start + size), np.arange(size + 1)), shape=(size, columns))


class Patterns(dict):
    """``{atom: pattern}`` (a scalar's: a bit mask; an array's: a ``csr_matrix``; none: absent) and
    ``columns``, the number of input elements.

    Starts from the inputs, each input's elements the next columns; an array
    input's element symbol, the first time it is asked for, is the column of
    its element (looked up then: an input may have made all its elements'
    symbols, and only those the graph reads are wanted).
    """

    def __init__(self, inputs: Sequence):
        super().__init__()
        offsets = np.cumsum([0] + [_size(atom) for atom in inputs]).tolist()
        self.columns = offsets[-1]
        self.arrays = []
        for atom, offset in zip(inputs, offsets):
            if atom_shape(atom) == ():
                self[atom] = 1 << offset
            else:
                self[atom] = _block(offset, _size(atom), self.columns)
                if atom.__class__ is ArrayInput:
                    self.arrays.append((atom, offset))
        self.looked_up: set = set()

    def __missing__(self, atom):
        if atom.__class__ is not Node and atom not in self.looked_up:
            self.looked_up.add(atom)
            for array, offset in self.arrays:
                index = array.element_index(atom)
                if index is not None:
                    mask = self[atom] = 1 << (offset + int(np.ravel_multi_index(index, array.shape)))
                    return mask
        return None


def array_patterns(nodes: Sequence, inputs: Sequence, keep: Sequence = ()) -> Patterns:
    """The dependency patterns of the atoms in ``keep`` (and the inputs) on the elements of ``inputs``.

    Patterns of other nodes are dropped once their last user has read them, so
    memory holds only the live ones.

    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import mul_p
    >>> x = ArrayInput("x", (3,)); builder = GraphBuilder()
    >>> head = A.record_slice(builder, x, (("s", 1, 3, 1),))
    >>> product = builder.record(mul_p, (head, x.element((0,))))
    >>> patterns = array_patterns(builder.nodes, [x], [product])
    >>> patterns[product].toarray().astype(int).tolist(), patterns[x.element((1,))]
    ([[1, 1, 0], [1, 0, 1]], 2)
    """
    patterns = Patterns(inputs)
    known: dict = {}  # the nodes known in part: (known, value)
    kept = set(keep)
    remaining: dict = {}
    for node in nodes:
        for atom in node.args:
            if atom.is_Symbol:
                remaining[atom] = remaining.get(atom, 0) + 1
    for node in nodes:
        if not node.shape and node.primitive.elementwise and not any(atom in known for atom in node.args):
            # A scalar of scalars: the OR of the operands' masks.
            mask = 0
            for atom in node.args:
                if atom.is_Symbol:
                    mask |= patterns[atom] or 0
            if mask:
                patterns[node] = mask
        else:
            _visit(node, patterns, known)
        for atom in node.args:
            if atom.is_Symbol:
                left = remaining[atom] = remaining[atom] - 1
                if left == 0 and atom not in kept and atom.__class__ is Node:
                    patterns.pop(atom, None)
                    known.pop(atom, None)
    return patterns


def _visit(node, patterns: Patterns, known: dict) -> None:
    """Record the pattern (and what is known) of one node from its operands'."""
    operands = [patterns[atom] if atom.is_Symbol else None for atom in node.args]
    if all(pattern is None for pattern in operands) and all(
            not atom.is_Symbol or (atom in known and known[atom][0].all()) for atom in node.args):
        # Constants alone (a constant node too): the value, worked out whole.
        value = (_applied(node, [_knowledge(atom, known, atom_shape(atom))[1] for atom in node.args])
                 if _size(node) <= MAX_KNOWN_ELEMENTS else None)
        if value is not None:
            known[node] = (np.ones(node.shape, dtype=bool), value)
        return
    rule = _elementwise if node.primitive.elementwise else PATTERN.get(node.primitive)
    if rule is None:
        reason = PATTERN.reason_missing(node.primitive)  # why, where the table says (a loop)
        raise SymadError(f"sparsity: no dependency rule for the primitive {node.primitive.name!r}"
                         + (f": {reason}" if reason else ""))
    sizes = [_size(atom) if atom.is_Symbol else 1 for atom in node.args]
    offsets = np.cumsum([0] + sizes[:-1]).tolist()
    out_rows, operand_rows, knowledge = rule(node, offsets, [p is not None for p in operands], known)
    if knowledge is not None and knowledge[0].any():
        known[node] = knowledge
    pattern = _linked(_size(node), out_rows, operand_rows, operands, sizes, offsets, patterns.columns)
    if pattern is not None and pattern.nnz:
        pattern.sum_duplicates()  # sorted, no duplicate entries: CSR in canonical form
        patterns[node] = _as_mask(pattern) if not node.shape else pattern


def sparsity_pattern(nodes: Sequence, inputs: Sequence, leaves: Sequence):
    """The structural pattern of the output ``leaves`` (rows: their elements, flattened in order) on
    the elements of ``inputs`` (columns): a ``scipy.sparse.csr_matrix`` of ``int8`` ones.

    A leaf is one atom (a whole array or a scalar) or an object array of scalar atoms.

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import mul_p, sin_p
    >>> x, y = sympy.symbols("x y"); builder = GraphBuilder()
    >>> s = builder.record(sin_p, (x,)); p = builder.record(mul_p, (s, y))
    >>> sparsity_pattern(builder.nodes, [x, y], [s, p]).toarray().tolist()
    [[1, 0], [1, 1]]
    """
    atoms = [atom for leaf in leaves for atom in (leaf.reshape(-1).tolist() if isinstance(leaf, np.ndarray)
                                                  else [leaf])]
    patterns = array_patterns(nodes, inputs, atoms)
    pattern = _stack([patterns[atom] if atom.is_Symbol else None for atom in atoms],
                     [_size(atom) if atom.is_Symbol else 1 for atom in atoms], patterns.columns)
    pattern = pattern.astype(np.int8)
    pattern.sum_duplicates()
    return pattern
