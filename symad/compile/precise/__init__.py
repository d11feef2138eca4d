"""Precision backends: the graph interpreted node by node (:mod:`~symad.compile.precise.interpret`)
in mpmath's arithmetic (:mod:`~symad.compile.precise.mpmath_backend`) or in intervals that
enclose the exact value (:mod:`~symad.compile.precise.interval_backend`)."""
