"""Rule tables registered onto the primitives, one table per transform.

:mod:`symad.primitives` only names the primitives (SymPy form, NumPy
implementation, identities, spellings) and imports nothing traced. Each
transform keeps its rules in a module of its own, registered onto those
primitives the way autograd's ``numpy_vjps.py`` registers onto
``numpy_wrapper``: :mod:`symad.rules.partials` holds the symbolic partial
derivatives (written with traceable ``symad.numpy`` operations, reusing the
node's output), :mod:`symad.rules.taylor` the Taylor-coefficient recurrences
for the primitives that have a closed form cheaper or more robust than the
generic chain rule on series. ``tests/test_imports.py`` checks that no
import circle comes back.
"""
