"""The benchmark scripts, one per family of the project's benchmark brief, sharing :mod:`benchmarks.harness`."""
