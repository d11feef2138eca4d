"""The layer below the catalogue: what a primitive is and how one is registered.

:mod:`symad.ir.primitive` holds the :class:`~symad.ir.primitive.Primitive` type, the
registry and the rule tables' type; the catalogues (:mod:`symad.primitives`,
:mod:`symad.array_primitives`, :mod:`symad.special`) declare their stanzas through it, and
the graph (:mod:`symad.graph`) reads it without importing any catalogue. This package
imports nothing of its own here, so importing one of its modules runs no other.
"""
