"""Atoms: what a node's operands may be -- input symbols, node symbols, or exact constants.

The lowest layer of the package: it imports nothing of symad, so the
primitive table and the graph can both build on it.

>>> import sympy
>>> is_constant(sympy.Integer(2)), is_constant(sympy.Symbol("x")), is_zero_constant(sympy.Float(0.0))
(True, False, True)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy

__all__ = ["is_constant", "number_atom", "is_zero_constant", "constant_value"]


def is_constant(atom: sympy.Basic) -> bool:
    """True for exact constants (numbers, ``pi``, ``log(2)``, booleans); False for symbols."""
    if atom.is_Symbol:
        return False
    if isinstance(atom, sympy.logic.boolalg.BooleanAtom):
        return True
    return atom.is_number


def number_atom(value: Any) -> sympy.Basic | None:
    """The exact atom for a Python or NumPy real number or bool; None for anything else.

    >>> number_atom(2), number_atom(0.5), number_atom(True), number_atom("2")
    (2, 0.500000000000000, True, None)
    """
    if isinstance(value, (bool, np.bool_)):
        return sympy.true if value else sympy.false
    if isinstance(value, (int, np.integer)):
        return sympy.Integer(int(value))
    if isinstance(value, (float, np.floating)):
        return sympy.Float(float(value))
    return None


def is_zero_constant(atom: sympy.Basic) -> bool:
    """True for the exact numbers 0 and 0.0 (structural zeros)."""
    return atom.is_Number and atom.is_zero


def constant_value(atom: sympy.Basic) -> Any:
    """The Python value of a constant atom (float or bool) for numeric evaluation."""
    if isinstance(atom, sympy.logic.boolalg.BooleanAtom):
        return bool(atom)
    try:
        if atom.is_Integer:
            return float(int(atom))
        return float(atom.evalf(17) if not atom.is_Float else atom)
    except OverflowError:  # an exact constant beyond float range
        return math.copysign(math.inf, float(sympy.sign(atom)))
