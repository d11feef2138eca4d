"""The benchmark scripts of BENCHMARKS.md, one per family, sharing :mod:`benchmarks.harness`."""
