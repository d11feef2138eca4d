"""The compiler: Graph -> passes -> a Python module per backend -> a cached evaluator.

This is the package's face: it re-exports the names the rest of symad uses.
Inside, the layers import only downwards:

* shared infrastructure: :mod:`~symad.compile.registry` (the backend table),
  :mod:`~symad.compile.modules` (what a lowering returns),
  :mod:`~symad.compile.evaluator`, :mod:`~symad.compile.disk_cache`,
  :mod:`~symad.compile.tiers`, :mod:`~symad.compile.threads`,
  :mod:`~symad.compile.progress`, :mod:`~symad.compile.memory`,
  :mod:`~symad.compile.batch`;
* the lowerings: :mod:`symad.compile.scalar` (graphs of scalar nodes: passes,
  levels, numexpr, NumPy and numba modules), :mod:`symad.compile.arrays` (array
  programs: whole-array code, and numba loop nests from :mod:`symad.loopnest`),
  :mod:`symad.compile.precise` (mpmath and interval interpreters);
* :mod:`~symad.compile.backends` (the built-in backends' records), then
  :mod:`~symad.compile.pipeline` (``make_evaluator``: backend check, disk cache,
  lowering with a loud fallback, loading) and :mod:`~symad.compile.dask_support`.
"""

from __future__ import annotations

from symad.compile.arrays.evaluator import array_program_leaves
from symad.compile.pipeline import (
    ARRAYS,
    SCALAR,
    generate_array_module,
    generate_module,
    make_array_evaluator,
    make_evaluator,
    make_precise_function,
)
from symad.compile.registry import DEFAULT_BACKEND, PRECISION_BACKENDS, available_backends
from symad.compile.threads import get_num_threads, set_num_threads

__all__ = ["available_backends", "make_evaluator", "make_array_evaluator", "generate_module",
           "generate_array_module", "DEFAULT_BACKEND", "set_num_threads", "get_num_threads",
           "PRECISION_BACKENDS", "make_precise_function", "SCALAR", "ARRAYS", "array_program_leaves"]
