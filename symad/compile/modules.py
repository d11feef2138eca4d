"""What every lowering hands the pipeline: the source text of one generated module.

A backend's lowering (:mod:`symad.compile.scalar`, :mod:`symad.compile.arrays`)
returns a :class:`GeneratedModule` (an array program's: an :class:`ArrayModule`);
the pipeline (:mod:`symad.compile.pipeline`) loads it (:mod:`symad.compile.evaluator`)
and keeps it in the disk cache (:mod:`symad.compile.disk_cache`), which rebuilds one
from its stored fields. ``program`` is the scalar lowering's
:class:`~symad.compile.scalar.program.Program` (None once loaded from the disk cache).
"""

from __future__ import annotations

import numpy as np

from symad.ir.primitive import PRIMITIVES

__all__ = ["GeneratedModule", "ArrayModule", "is_builtin_primitive", "MAX_LITERAL_ELEMENTS", "SCIPY_IMPORTS",
           "without_unused_scipy"]

#: Constant arrays up to this many elements are written into an array program's module as
#: literals; larger ones are bound through EXTERNALS (listed at the top of the module).
MAX_LITERAL_ELEMENTS = 256


#: How a generated module imports SciPy's special functions (its standard imports).
SCIPY_IMPORTS = ("import scipy.special", "from scipy import special")


def without_unused_scipy(source: str) -> str:
    """``source`` without the :data:`SCIPY_IMPORTS` lines if nothing else in it names SciPy:
    importing SciPy costs 0.8 s and 30 MB, which a module of sines and products must not
    make its process pay.

    >>> print(without_unused_scipy("import numpy as np\\nimport scipy.special\\nx = np.sin(1.0)"))
    import numpy as np
    x = np.sin(1.0)
    """
    lines = source.split("\n")
    rest = [line for line in lines if line not in SCIPY_IMPORTS]
    if len(rest) == len(lines) or any("special." in line or "scipy" in line for line in rest):
        return source
    return "\n".join(rest)


class GeneratedModule:
    """The Python source of one evaluator, and the callables it needs bound (``EXTERNALS``).
    Its SciPy imports are dropped where nothing in it uses them (:func:`without_unused_scipy`)."""

    def __init__(self, source: str, externals: list, backend: str, dtype, block_size: int,
                 program, note: str = ""):
        self.source = without_unused_scipy(source)
        self.externals = externals
        self.backend = backend
        self.dtype = np.dtype(dtype)
        self.block_size = block_size
        self.program = program
        #: why this module differs from what was asked (e.g. a fallback), or ""
        self.note = note


class ArrayModule(GeneratedModule):
    """The generated source of an array program's evaluator (:mod:`symad.compile.arrays`):
    no block size or scalar program, but which outputs are boolean and the bytes a point's
    values take (what the batch's blocks are sized by)."""

    def __init__(self, source: str, externals: list, backend: str, dtype, note: str,
                 output_is_boolean: tuple, bytes_per_point: int):
        super().__init__(source, externals, backend, dtype, None, None, note)
        self.output_is_boolean = output_is_boolean
        self.bytes_per_point = bytes_per_point


# A module spells symad's own primitives by name; a custom one (which may reuse a built-in
# name) is bound through EXTERNALS and keyed by more than its name in the disk cache.
def is_builtin_primitive(primitive) -> bool:
    """True for symad's own primitives (a custom primitive may reuse a built-in name)."""
    return PRIMITIVES.get(primitive.name) is primitive
