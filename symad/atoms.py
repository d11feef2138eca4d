"""Atoms: what a node's operands may be -- input symbols, earlier nodes, or exact constants.

The lowest layer of the package: it imports nothing of symad, so the
primitive table and the graph can both build on it.

>>> import sympy
>>> is_constant(sympy.Integer(2)), is_constant(sympy.Symbol("x")), is_zero_constant(sympy.Float(0.0))
(True, False, True)
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import sympy

__all__ = ["is_constant", "number_atom", "is_zero_constant", "constant_value", "same_atom",
           "active_builders", "current_builder", "COMPLEX_SEEN", "note_complex", "is_complex_atom"]

#: ``[True]`` once this process has traced a complex value (an input, a constant): until
#: then no node asks whether its operands are complex, so real programs trace as fast as
#: before complex numbers existed.
COMPLEX_SEEN = [False]


def note_complex() -> None:
    """Record that complex values are being traced (see :data:`COMPLEX_SEEN`); it stays so.

    >>> note_complex(); COMPLEX_SEEN[0]
    True
    """
    COMPLEX_SEEN[0] = True


def is_complex_atom(atom) -> bool:
    """True if ``atom`` holds complex values: a complex input, node or constant.

    A node or an array input says so itself (its ``complex`` flag); a scalar input
    is complex when its symbol was made with ``complex=True``; a constant when it is
    a number that is not real (``2.0 + 1.0*I``).

    >>> is_complex_atom(sympy.Float(2.0)), is_complex_atom(sympy.Float(1.0) * sympy.I)
    (False, True)
    >>> is_complex_atom(sympy.Symbol("z", complex=True)), is_complex_atom(sympy.Symbol("x"))
    (True, False)
    """
    flag = getattr(atom, "complex", None)
    if flag is not None:
        return flag
    if not isinstance(atom, sympy.Expr):
        return False
    if atom.is_Symbol:
        return atom.is_complex is True and atom.is_extended_real is not True
    return atom.is_number and atom.is_extended_real is False


def is_constant(atom: sympy.Basic) -> bool:
    """True for exact constants (numbers, ``pi``, ``log(2)``, booleans); False for symbols and nodes."""
    if atom.is_Symbol:
        return False
    if isinstance(atom, sympy.logic.boolalg.BooleanAtom):
        return True
    return atom.is_number


# Float atoms by value: creating a sympy.Float costs about 10 us, and a traced
# loop uses the same few constants thousands of times. Bounded, so that tracing
# many distinct constants cannot grow it without limit. (sympy.Float keeps no
# sign of zero: Float(-0.0) is Float(0.0), so a -0.0 constant is +0.0 in a graph;
# see docs/how-it-works.md.)
_FLOAT_ATOMS: dict = {}
_FLOAT_ATOMS_LIMIT = 1 << 14


def number_atom(value: Any) -> sympy.Basic | None:
    """The exact atom for a Python or NumPy number or bool; None for anything else.

    A complex number is ``re + im*I`` (SymPy's ``I``); one whose imaginary part is 0 is real.

    >>> number_atom(2), number_atom(0.5), number_atom(True), number_atom("2")
    (2, 0.500000000000000, True, None)
    >>> number_atom(0.5) is number_atom(0.5)      # interned: one atom per float value
    True
    """
    if type(value) is float:  # the common case, in one lookup
        atom = _FLOAT_ATOMS.get(value)
        if atom is not None:
            return atom
    if isinstance(value, (bool, np.bool_)):
        return sympy.true if value else sympy.false
    if isinstance(value, (int, np.integer)):
        return sympy.Integer(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        atom = _FLOAT_ATOMS.get(value)  # (NaN is never found again, and never needs to be)
        if atom is None:
            if len(_FLOAT_ATOMS) >= _FLOAT_ATOMS_LIMIT:
                _FLOAT_ATOMS.clear()
            atom = _FLOAT_ATOMS[value] = sympy.Float(value)
        return atom
    if isinstance(value, (complex, np.complexfloating)):
        note_complex()
        value = complex(value)
        return sympy.Float(value.real) + sympy.Float(value.imag) * sympy.I
    return None


def is_zero_constant(atom: sympy.Basic) -> bool:
    """True for the exact numbers 0 and 0.0 (structural zeros)."""
    # ``not atom`` rather than ``atom.is_zero``: the assumption system takes
    # about 100 us to answer is_zero for a new Float, once per object.
    return atom.is_Number and not atom


def constant_value(atom: sympy.Basic) -> Any:
    """The Python value of a constant atom (float or bool) for numeric evaluation."""
    if isinstance(atom, sympy.logic.boolalg.BooleanAtom):
        return bool(atom)
    try:
        if atom.is_Integer:
            return float(int(atom))
        if not atom.is_Float and atom.is_extended_real is False:  # 2.0 + 1.0*I
            return complex(atom.evalf(17))
        return float(atom.evalf(17) if not atom.is_Float else atom)
    except OverflowError:  # an exact constant beyond float range
        return math.copysign(math.inf, float(sympy.sign(atom)))


def same_atom(a, b) -> bool:
    """True if ``a`` and ``b`` are the same atom: the same node, or equal SymPy atoms.

    A graph node is not a SymPy object and compares by identity; asking
    SymPy whether ``1.0 == node`` would have it try to convert the node.

    >>> same_atom(sympy.Float(2.0), sympy.Float(2.0)), same_atom(sympy.Symbol("x"), sympy.Integer(1))
    (True, False)
    """
    return a is b or (isinstance(a, sympy.Basic) and isinstance(b, sympy.Basic) and a == b)


# ---------------------------------------------------------------------------
# The builders recording in this thread (symad.graph.GraphBuilder.active pushes them)
# ---------------------------------------------------------------------------


class _TraceState(threading.local):
    """Per-thread stack of recording builders: traces in different threads never mix."""

    def __init__(self):
        self.builders: list = []


_STATE = _TraceState()


def active_builders() -> list:
    """The builders recording in this thread, outermost first."""
    return _STATE.builders


def current_builder():
    """The innermost builder that is recording in this thread, or None outside any trace."""
    builders = _STATE.builders
    return builders[-1] if builders else None
