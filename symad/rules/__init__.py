"""Rule tables, one per transform, each keyed by the primitive object.

:mod:`symad.primitives` only declares the primitives (SymPy form, NumPy
implementation, identities, spellings, structural facts) and imports nothing
traced. Each transform keeps its rules in one :class:`~symad.primitives.RuleTable`,
the way autograd's ``numpy_vjps.py`` and JAX's ``ad.primitive_jvps`` do:
:data:`symad.primitives.PARTIALS` (filled by :mod:`symad.rules.partials`: symbolic
partial derivatives written with traceable ``symad.numpy`` operations, reusing the
node's output), :mod:`symad.rules.taylor` (Taylor-coefficient recurrences where
they are cheaper or more robust than the generic chain rule on series),
:mod:`symad.rules.transposes` and :mod:`symad.rules.tangents` (reverse and forward
mode of the array primitives) and :mod:`symad.rules.unroll` (the per-element
view). ``tests/test_catalogue.py`` walks the catalogue through every table;
``tests/test_imports.py`` checks that no import circle comes back.
"""
