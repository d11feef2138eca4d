"""Lowering graphs of scalar nodes: the passes (:mod:`~symad.compile.scalar.program`), the
level-by-level plan of wide graphs (:mod:`~symad.compile.scalar.levels`), the shared source
pieces (:mod:`~symad.compile.scalar.source`) and one module per backend
(:mod:`~symad.compile.scalar.numexpr_backend`, :mod:`~symad.compile.scalar.numpy_backend`,
:mod:`~symad.compile.scalar.numba_backend`)."""
