"""Element-level traces for the tests of the machinery that serves scalar graphs.

Whole-array code records one node per array operation. The scalar compiler
(regions, levels), the reverse sweep's runs of like nodes and the scalar C
export serve graphs written element by element -- loops over elements, or an
array program taken apart with ``F.expand()`` -- and their tests build such
graphs here.
"""

import symad as sd


def element_trace(fun, *args):
    """``fun`` traced, then taken apart into its elements: a graph of scalar nodes."""
    return sd.trace(fun, *args).expand()
