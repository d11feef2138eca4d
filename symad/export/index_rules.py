"""Index notation of each array primitive: the element of its result at given indices.

Every rule is ``rule(nb, node, index, scope) -> SymPy expression``: the element of
``node`` at the index expressions ``index``, built with the
:class:`~symad.export.index_notation.IndexNotation` ``nb`` (which gives each operand's
element, bound indices, sums and numbers) with ``scope`` the bound indices in scope.
An elementwise primitive is its operands' elements at the broadcast index.

>>> from symad import array_primitives as A
>>> A.reshape_p in INDEX_RULES, INDEX_RULES.reason_missing(A.constant_p)
(True, None)
"""

from __future__ import annotations

import math

import numpy as np
import sympy
from sympy.tensor.indexed import IndexedBase

from symad import array_primitives as A
from symad import linalg_primitives as L
from symad.export.index_forms import (
    ZERO,
    Maximum,
    Minimum,
    Sum,
    broadcast_index,
    tidy_index,
)
from symad.graph import ArrayInput, atom_shape
from symad.ir.primitive import RuleTable

__all__ = ["INDEX_RULES", "WHOLE_OPERANDS", "UNPRINTED", "index_rule", "elementwise_rule", "transposed_input",
           "whole_operands"]

#: Each primitive's element at given indices; an elementwise primitive without a rule of
#: its own (all of them) is its operands' elements at the broadcast index.
INDEX_RULES = RuleTable("index notation", default_reason=lambda primitive: (
    "elementwise: its operands' elements at the broadcast index" if primitive.elementwise
    else None))


#: The primitives whose formula names whole matrices (``inv(A)``), not elements: each of
#: their operands that is a node gets a line of its own (a temporary) to be named by.
WHOLE_OPERANDS: set = set()
#: The primitives whose nodes formulas never show on their own (``solve`` reads the LU
#: factors of its matrix; its formula names the matrix).
UNPRINTED: set = set()


def index_rule(primitive):
    """The index-notation rule of ``primitive``."""
    return INDEX_RULES.get(primitive, _elementwise)

# ---------------------------------------------------------------------------
# The rules: each primitive's element at ``index``
# ---------------------------------------------------------------------------


def elementwise_rule(nb, node, index: tuple, scope: tuple):
    """The node's primitive applied to its operands' elements at the broadcast index."""
    args = [nb.operand(atom, broadcast_index(index, atom_shape(atom), node.shape), scope)
            for atom in node.args]
    return nb.apply(node.primitive, args, node.params)


_elementwise = elementwise_rule


def _reduction(combine):
    def rule(nb, node, index: tuple, scope: tuple):
        (x,) = node.args
        shape = atom_shape(x)
        axes = {len(shape) + a for a in dict(node.params)["axes"]}
        free = iter(index)
        operand_index, limits = [], []
        for axis, size in enumerate(shape):
            if axis in axes:
                k, limit, scope = nb.bound(size, scope)
                operand_index.append(k)
                if limit is not None:
                    limits.append(limit)
            else:
                operand_index.append(next(free))
        body = nb.operand(x, tuple(operand_index), scope)
        return combine(nb, body, limits, scope) if limits else body
    return rule


def _logsumexp(nb, body, limits: list, scope: tuple):
    return sympy.log(Sum(sympy.exp(body), *limits))


def _einsum(nb, node, index: tuple, scope: tuple):
    (sa, sb), sc = A.parse_subscripts(dict(node.params)["subscripts"])
    a, b = node.args
    lead = len(node.shape) - len(sc)
    lead_shape, lead_index = node.shape[:lead], index[:lead]
    value = dict(zip(sc, index[lead:]))
    sizes = {}
    for atom, letters in ((a, sa), (b, sb)):
        shape = atom_shape(atom)
        sizes.update(zip(letters, shape[len(shape) - len(letters):]))
    limits = []
    for letter in dict.fromkeys(sa + sb):
        if letter not in value:
            value[letter], limit, scope = nb.bound(sizes[letter], scope)
            if limit is not None:
                limits.append(limit)

    def element(atom, letters):
        shape = atom_shape(atom)
        own_lead = shape[:len(shape) - len(letters)]
        at = broadcast_index(lead_index, own_lead, lead_shape) + tuple(value[c] for c in letters)
        return nb.operand(atom, at, scope)

    return nb.sum(element(a, sa) * element(b, sb), limits, scope)


def _reshape_index(index: tuple, in_shape: tuple, out_shape: tuple) -> tuple:
    """The index into ``in_shape`` of the element at ``index`` of its reshape to ``out_shape``.

    Axes are matched in groups of equal size (size-1 axes read 0): an input
    axis made of several output axes is their flat position, and an output axis
    made of several input axes is split with ``floor`` and ``Mod``.
    """
    result = [ZERO] * len(in_shape)
    ins = [a for a, size in enumerate(in_shape) if size != 1]
    outs = [a for a, size in enumerate(out_shape) if size != 1]
    pi = po = 0
    while pi < len(ins):
        group_in, group_out = [ins[pi]], [outs[po]]
        size_in, size_out = in_shape[ins[pi]], out_shape[outs[po]]
        pi, po = pi + 1, po + 1
        while size_in != size_out:
            if size_in < size_out:
                group_in.append(ins[pi])
                size_in *= in_shape[ins[pi]]
                pi += 1
            else:
                group_out.append(outs[po])
                size_out *= out_shape[outs[po]]
                po += 1
        flat, stride = ZERO, 1
        for axis in reversed(group_out):
            flat += index[axis] * stride
            stride *= out_shape[axis]
        stride = 1
        for position, axis in reversed(list(enumerate(group_in))):
            size = in_shape[axis]
            if len(group_in) == 1:
                result[axis] = flat
            elif position == 0:
                result[axis] = sympy.floor(flat / stride)
            else:
                result[axis] = sympy.Mod(sympy.floor(flat / stride) if stride > 1 else flat, size)
            stride *= size
    return tuple(result)


def _reshape(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    lead = len(node.shape) - len(params["shape"])
    core = _reshape_index(index[lead:], params["in_shape"], params["shape"])
    return nb.operand(node.args[0], index[:lead] + core, scope)


def _transpose(nb, node, index: tuple, scope: tuple):
    perm = dict(node.params)["perm"]
    lead = len(node.shape) - len(perm)
    core = [None] * len(perm)
    for axis, source in enumerate(perm):
        core[source] = index[lead + axis]
    return nb.operand(node.args[0], index[:lead] + tuple(core), scope)


def _broadcast(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    lead = len(node.shape) - len(params["shape"])
    core = broadcast_index(index[lead:], params["in_shape"], params["shape"])
    return nb.operand(node.args[0], index[:lead] + core, scope)


def _slice(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    (x,) = node.args
    lead = len(atom_shape(x)) - len(params["in_shape"])
    free = iter(index[lead:])
    core = []
    for item in params["index"]:
        if item[0] == "i":
            core.append(sympy.Integer(item[1]))
        elif item[0] == "s":
            core.append(item[1] + item[3] * next(free))
        else:
            next(free)
    return nb.operand(x, index[:lead] + tuple(core), scope)


def _placed(nb, basic_index: tuple, core: tuple, in_shape: tuple, scope: tuple):
    """Where ``array[basic_index]`` sits in ``array`` at ``core``: ``(part index, condition)``,
    or None if the index selects nothing."""
    part, conditions, axis = [], [], 0
    for item in basic_index:
        if item[0] == "n":
            part.append(ZERO)
            continue
        at, size = core[axis], in_shape[axis]
        axis += 1
        if item[0] == "i":
            conditions.append(sympy.Eq(at, item[1]))
            continue
        placed = _placement(at, range(size)[slice(*item[1:])], size)
        if placed is None:
            return None
        part.append(placed[0])
        conditions += placed[1]
    return tuple(part), nb.condition(sympy.And(*conditions), scope)


def _placement(at, positions: range, size: int):
    """``(index into the placed part, conditions on at)`` for the ``positions`` of an axis of
    ``size`` that hold the part's elements in order, or None if there are none."""
    if not positions:
        return None
    start, step = positions[0], positions.step
    low, high = min(start, positions[-1]), max(start, positions[-1])
    conditions = []
    if low > 0:
        conditions.append(sympy.Ge(at, low))
    if high < size - 1:
        conditions.append(sympy.Le(at, high))
    if abs(step) > 1:
        conditions.append(sympy.Eq(sympy.Mod(at - start, abs(step)), 0))
    part = at - start if step == 1 else start - at if step == -1 else (at - start) / step
    return part, conditions


def _unslice(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    in_shape = params["in_shape"]
    lead = len(node.shape) - len(in_shape)
    placed = _placed(nb, params["index"], index[lead:], in_shape, scope)
    if placed is None:
        return ZERO
    part, condition = placed
    value = nb.operand(node.args[0], index[:lead] + part, scope)
    return sympy.Piecewise((value, condition), (ZERO, True))


def _scatter(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    x, v = node.args
    in_shape = params["in_shape"]
    lead = len(node.shape) - len(in_shape)
    lead_shape, lead_index, core = node.shape[:lead], index[:lead], index[lead:]
    x_shape = atom_shape(x)
    x_value = nb.operand(x, broadcast_index(lead_index, x_shape[:len(x_shape) - len(in_shape)],
                                             lead_shape) + core, scope)
    placed = _placed(nb, params["index"], core, in_shape, scope)
    if placed is None:
        return x_value
    part, condition = placed
    part_shape = A.part_shape(in_shape, params["index"])
    v_shape = atom_shape(v)
    v_core = v_shape[max(0, len(v_shape) - len(part_shape)):]
    v_lead = v_shape[:len(v_shape) - len(v_core)]
    at = broadcast_index(lead_index, v_lead, lead_shape) + broadcast_index(part, v_core, part_shape)
    return sympy.Piecewise((nb.operand(v, at, scope), condition), (x_value, True))


def _take(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    in_shape, axis = params["in_shape"], params["axis"]
    (x,) = node.args
    lead = len(atom_shape(x)) - len(in_shape)
    at = len(in_shape) + axis
    indices = nb.index_array(params["indices"], in_shape[axis])
    core = index[lead:]
    count = indices.array.ndim
    nb.note_index_array(indices)
    position = indices.at(core[at:at + count], nb.element)
    return nb.operand(x, index[:lead] + core[:at] + (position,) + core[at + count:], scope)


def _argsort(nb, node, index: tuple, scope: tuple):
    # The sorting permutation depends on every element at once: no element formula, so it
    # prints as an array argsort(x) (named by its operand's array or line) read at the index.
    x = node.args[0]
    named = getattr(x, "indexed", None) or nb.temporaries.get(x)
    label = named.label if isinstance(named, sympy.IndexedBase) else sympy.Symbol(str(named or x))
    return nb.element(sympy.IndexedBase(sympy.Function("argsort")(label)), *index)


def _read_at(nb, atom, index: tuple, shape: tuple, scope: tuple, axis=None, position=None):
    """``atom``'s element at ``index`` of the broadcast ``shape`` (right-aligned; a size-1 axis
    reads 0), with ``position`` read along the (negative) ``axis``."""
    atom_core = atom_shape(atom)
    offset = len(shape) - len(atom_core)
    items = []
    for a, size in enumerate(atom_core):
        if axis is not None and a - len(atom_core) == axis:
            items.append(position)
        else:
            items.append(ZERO if size == 1 and shape[offset + a] != 1 else index[offset + a])
    return nb.operand(atom, tuple(items), scope)


def _take_along(nb, node, index: tuple, scope: tuple):
    # x[..., argsort(x)[..., i, ...], ...]: the operand read at the position the indices hold.
    x, indices = node.args
    axis = dict(node.params)["axis"]
    position = _read_at(nb, indices, index, node.shape, scope)
    return _read_at(nb, x, index, node.shape, scope, axis, position)


def _take_along_add(nb, node, index: tuple, scope: tuple):
    # Sum over k along the axis of v[..., k, ...] where the index there is the target.
    v, indices = node.args
    axis = dict(node.params)["axis"]
    k, limit, scope = nb.bound(atom_shape(indices)[axis], scope)
    at = index[:len(index) + axis] + (k,) + (index[len(index) + axis + 1:])
    delta = sympy.KroneckerDelta(_read_at(nb, indices, at, node.shape, scope), index[axis])
    return nb.sum(delta * _read_at(nb, v, at, node.shape, scope), [limit] if limit is not None else [],
                  scope)


def _take_add(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    in_shape, axis = params["in_shape"], params["axis"]
    (v,) = node.args
    lead = len(node.shape) - len(in_shape)
    at = len(in_shape) + axis
    indices = nb.index_array(params["indices"], in_shape[axis])
    core = index[lead:]
    target = core[at]
    before, after = index[:lead] + core[:at], core[at + 1:]
    if indices.kind == "scalar":
        condition = nb.condition(sympy.Eq(target, indices.form), scope)
        return sympy.Piecewise((nb.operand(v, before + after, scope), condition), (ZERO, True))
    if indices.kind == "affine" and indices.array.ndim == 1 and indices.form[1][0] != 0:
        first, (step,) = indices.form
        positions = range(first, first + step * len(indices.array), step)
        part, conditions = _placement(target, positions, in_shape[axis])
        condition = nb.condition(sympy.And(*conditions), scope)
        return sympy.Piecewise((nb.operand(v, before + (part,) + after, scope), condition),
                               (ZERO, True))
    # Any other index array: sum the slices whose index is the target.
    positions, limits = [], []
    for size in indices.array.shape:
        k, limit, scope = nb.bound(size, scope)
        positions.append(k)
        if limit is not None:
            limits.append(limit)
    nb.note_index_array(indices)
    delta = sympy.KroneckerDelta(indices.at(tuple(positions), nb.element), target)
    return nb.sum(delta * nb.operand(v, before + tuple(positions) + after, scope), limits, scope)


def _concatenate(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    axis, in_shapes = params["axis"], params["in_shapes"]
    lead = len(node.shape) - len(in_shapes[0])
    lead_shape, lead_index, core = node.shape[:lead], index[:lead], index[lead:]
    at = len(core) + axis
    target = core[at]
    pieces, offset = [], 0
    for position, (atom, in_shape) in enumerate(zip(node.args, in_shapes)):
        size = in_shape[at]
        shape = atom_shape(atom)
        own = broadcast_index(lead_index, shape[:len(shape) - len(in_shape)], lead_shape)
        value = nb.operand(atom, own + core[:at] + (target - offset,) + core[at + 1:], scope)
        if position == len(in_shapes) - 1:
            condition = sympy.true
        elif size == 1:
            condition = nb.condition(sympy.Eq(target, offset), scope)
        else:
            condition = nb.condition(sympy.Lt(target, offset + size), scope)
        pieces.append((value, condition))
        offset += size
    return sympy.Piecewise(*pieces)


def _cumsum(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    at = len(node.shape) + params["axis"]
    size, target = node.shape[at], index[at]
    k, _, scope = nb.bound(size, scope)
    body = nb.operand(node.args[0], index[:at] + (k,) + index[at + 1:], scope)
    limit = (k, target, size - 1) if params["reverse"] else (k, 0, target)
    return Sum(body, limit)


def _pack(nb, node, index: tuple, scope: tuple):
    params = dict(node.params)
    shape, positions = params["shape"], params["positions"]
    operands = list(node.args)
    base = operands.pop(0) if params["has_base"] else None
    lead = len(node.shape) - len(shape)
    lead_shape, lead_index, core = node.shape[:lead], index[:lead], index[lead:]
    pieces = []
    for position, atom in sorted(zip(positions, operands), key=lambda pair: pair[0]):
        target = np.unravel_index(position, shape)
        condition = nb.condition(sympy.And(*[sympy.Eq(at, int(t)) for at, t, size
                                             in zip(core, target, shape) if size != 1]), scope)
        value = nb.operand(atom, broadcast_index(lead_index, atom_shape(atom), lead_shape), scope)
        pieces.append((value, condition))
    if base is not None:
        base_shape = atom_shape(base)
        own = broadcast_index(lead_index, base_shape[:len(base_shape) - len(shape)], lead_shape)
        pieces.append((nb.operand(base, own + core, scope), sympy.true))
    elif len(positions) == math.prod(shape):
        pieces[-1] = (pieces[-1][0], sympy.true)
    else:
        pieces.append((ZERO, sympy.true))
    return sympy.Piecewise(*pieces)


def _constant(nb, node, index: tuple, scope: tuple):
    value = dict(node.params)["value"]
    if value.fill is not None:
        return nb.number(value.fill)
    sparse = nb.sparse_form(value)
    if sparse is not None and sparse[0] == "one-hot":
        position, number = sparse[1]
        deltas = [sympy.KroneckerDelta(at, k) for at, k, size
                  in zip(index, position, value.shape) if size != 1]
        return nb.number(number) * sympy.Mul(*deltas)
    if sparse is not None:  # an identity: delta of each axis of the second part
        split = sparse[1]
        first, second = value.shape[:split], value.shape[split:]
        ranges = nb.ranges(scope)
        mapped = [tidy_index(e, ranges) for e in _reshape_index(index[:split], second, first)]
        return sympy.Mul(*[sympy.KroneckerDelta(a, b) for a, b, size
                           in zip(mapped, index[split:], second) if size != 1])
    base = nb.constant_base(value)
    nb.used_constants.setdefault(base.label.name, base)
    return nb.element(base, *index)


def _complex_part(function):
    def rule(nb, node, index: tuple, scope: tuple):
        return function(nb.operand(node.args[0], index, scope))
    return rule


def _norm_factor(norm, inverse: bool, size: int):
    """NumPy's scaling of a transform of ``size`` points: 1, 1/n or 1/sqrt(n)."""
    if norm == "ortho":
        return 1 / sympy.sqrt(size)
    return sympy.Rational(1, size) if (norm == "forward") != inverse else sympy.Integer(1)


def _dft(nb, node, index: tuple, scope: tuple):
    """fft, ifft, rfft: sum_k x_k exp(-+2 pi i j k / n) along each transformed axis, scaled."""
    params = dict(node.params)
    (x,) = node.args
    shape = atom_shape(x)
    inverse = params.get("inverse", False)
    operand_index, limits, phase, scale = list(index), [], sympy.Integer(0), sympy.Integer(1)
    for axis in params.get("axes") or (params["axis"],):
        at = len(shape) + axis
        k, limit, scope = nb.bound(shape[at], scope)
        phase += index[at] * k / sympy.Integer(shape[at])
        operand_index[at] = k
        if limit is not None:
            limits.append(limit)
        scale *= _norm_factor(params["norm"], inverse, shape[at])
    twiddle = sympy.exp((1 if inverse else -1) * 2 * sympy.pi * sympy.I * phase)
    body = nb.operand(x, tuple(operand_index), scope) * twiddle
    return scale * (Sum(body, *limits) if limits else body)


def _irfft(nb, node, index: tuple, scope: tuple):
    """irfft: NumPy's function of the half spectrum, its element named (no short sum)."""
    params = dict(node.params)
    line = sympy.Function(r"\mathcal{F}^{-1}_{\mathbb{R}}")
    return line(nb.operand(node.args[0], index, scope), sympy.Integer(params["n"]))


def transposed_input(atom):
    """The input ``A`` if ``atom`` is ``A`` with its last two axes swapped (printed ``A^T``
    where linear algebra reads it whole), else None."""
    if getattr(atom, "primitive", None) is A.transpose_p and atom.args[0].__class__ is ArrayInput:
        perm = dict(atom.params)["perm"]
        if perm[-2:] == (len(perm) - 1, len(perm) - 2) and perm[:-2] == tuple(range(len(perm) - 2)):
            return atom.args[0]
    return None


def _matrix_name(nb, atom, scope: tuple):
    """A whole matrix operand: an input's, a constant's or a temporary's name (LaTeX gives
    every node read whole a line of its own: ``WHOLE_OPERANDS``); in an inlined formula
    another linear-algebra value (``inv(cholesky(A))``), a transpose (``A.T``), or the
    array of its elements (``Lambda((k, l), 2*b[k])``)."""
    if atom.__class__ is ArrayInput:
        return atom.indexed
    primitive = getattr(atom, "primitive", None)
    if primitive is A.constant_p:
        base = nb.constant_base(dict(atom.params)["value"])
        nb.used_constants.setdefault(base.label.name, base)
        return base
    if atom in nb.temporaries:
        return nb.temporaries[atom]
    if primitive in L.LINALG_PRIMITIVES:
        return _matrix_value(nb, atom, scope)
    if primitive is A.transpose_p and dict(atom.params)["perm"] == (1, 0):
        return L.Transposed(_matrix_name(nb, atom.args[0], scope))
    indices = []
    for size in atom_shape(atom):
        k, _, scope = nb.bound(max(size, 2), scope)
        indices.append(k)
    return sympy.Lambda(tuple(indices), nb.operand(atom, tuple(indices), scope))


def whole_operands(node) -> tuple:
    """The operands a linear-algebra formula names: ``solve(A, b)``, not the factors of ``A``
    it computes from."""
    return node.args[:2] if node.primitive is L.solve_p else node.args


def _matrix_value(nb, node, scope: tuple):
    """The head of whole matrices a linear-algebra node computes: ``inv(A)``."""
    args = [_matrix_name(nb, atom, scope) for atom in whole_operands(node)]
    if node.primitive is L.solve_triangular_p:
        args.append(sympy.Integer(dict(node.params)["trans"]))
    if node.primitive is L.solve_p and dict(node.params)["trans"]:
        args[0] = L.Transposed(args[0])
    return L.LINALG_PRIMITIVES[node.primitive](*args)


def _matrix_function(nb, node, index: tuple, scope: tuple):
    """An element of ``inv(A)``, ``solve(A, b)``, ...: the head of whole matrices, indexed."""
    value = _matrix_value(nb, node, scope)
    return nb.element(IndexedBase(value), *index) if index else value

INDEX_RULES.update({
    A.real_p: _complex_part(sympy.re),
    A.imag_p: _complex_part(sympy.im),
    A.conj_p: _complex_part(sympy.conjugate),
    A.modulus_p: _complex_part(sympy.Abs),
    A.fft_p: _dft,
    A.rfft_p: _dft,
    A.irfft_p: _irfft,
    A.constant_p: _constant,
    A.reduce_sum_p: _reduction(lambda nb, body, limits, scope: nb.sum(body, limits, scope)),
    A.amax_p: _reduction(lambda nb, body, limits, scope: Maximum(body, *limits)),
    A.amin_p: _reduction(lambda nb, body, limits, scope: Minimum(body, *limits)),
    A.reduce_logsumexp_p: _reduction(_logsumexp),
    A.einsum_p: _einsum,
    A.reshape_p: _reshape,
    A.transpose_p: _transpose,
    A.broadcast_p: _broadcast,
    A.slice_p: _slice,
    A.unslice_p: _unslice,
    A.take_p: _take,
    A.take_add_p: _take_add,
    A.argsort_p: _argsort,
    A.take_along_p: _take_along,
    A.take_along_add_p: _take_along_add,
    A.concatenate_p: _concatenate,
    A.cumsum_p: _cumsum,
    A.pack_p: _pack,
    A.scatter_p: _scatter,
})
INDEX_RULES.register(*L.LINALG_PRIMITIVES)(_matrix_function)
WHOLE_OPERANDS.update(L.LINALG_PRIMITIVES)
UNPRINTED.add(L.lu_factor_p)
