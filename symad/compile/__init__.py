"""Lowering a Graph to numeric evaluators."""

from symad.compile.numpy_backend import NumpyEvaluator

__all__ = ["NumpyEvaluator", "available_backends", "make_evaluator"]


def available_backends() -> list[str]:
    """The evaluation backends usable on this machine.

    >>> "numpy" in available_backends()
    True
    """
    return ["numpy"]


def make_evaluator(graph, backend: str):
    """An evaluator of ``graph`` for ``backend``: ``evaluator(input_values) -> output_values``."""
    from symad.errors import CompileError

    if backend == "numpy":
        return NumpyEvaluator(graph)
    raise CompileError(
        f"unknown backend {backend!r}; the backends available here are {available_backends()}"
    )
