"""Lowering array programs (one node per whole-array operation): whole-array NumPy/numexpr
code (:mod:`~symad.compile.arrays.lowering`), numba loop nests
(:mod:`~symad.compile.arrays.numba_loops`, printing :mod:`symad.loopnest`), and the loaded
evaluator that runs a batch block by block (:mod:`~symad.compile.arrays.evaluator`)."""
