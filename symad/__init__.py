"""symad: symbolic-plus-numeric hybrid differentiation.

A function is traced into a SymPy expression DAG with shared subexpressions;
derivatives are stitched by the chain rule over the DAG from each
primitive's symbolic partials, and the result is both a formula (SymPy,
LaTeX) and a compiled evaluator.

>>> import numpy as np, symad as sd
>>> f = lambda x1, x2: np.log(x1) + x1 * x2 - np.sin(x2)
>>> df = sd.grad(f, argnums=(0, 1))
>>> [round(float(g), 6) for g in df(2.0, 5.0)]
[5.5, 1.716338]
>>> df.trace(2.0, 5.0).formula()
(x2 + 1/x1, x1 - cos(x2))
"""

from symad import (
    config,  # switches: progress bars, the on-disk cache of generated modules
    special,  # registers SciPy's special functions as primitives
)
from symad.rules import linalg as _linalg_rules  # noqa: F401 - the linear-algebra rule rows
from symad.api import (
    Transformed,
    derivative,
    grad,
    hessian,
    jacfwd,
    jacobian,
    jacrev,
    jvp,
    taylor,
    value_and_grad,
    vjp,
    vmap,
)
from symad.compile import available_backends, get_num_threads, set_num_threads
from symad.custom import primitive
from symad.errors import (
    CompileError,
    DifferentiationError,
    ExportError,
    RetraceWarning,
    SymadError,
    TracingError,
)
from symad.function import Function, trace
from symad.loops import checkpoint, fori_loop, scan, while_loop
from symad.numpy import stop_gradient as _stop_gradient_elementwise
from symad.pytree import tree_map as _tree_map
from symad.sympy_import import from_sympy
from symad.tracer import Parameter

__version__ = "0.1.0"


def stop_gradient(x):
    """``x`` itself, with no derivative of any order flowing through it (pytrees too).

    >>> import symad as sd
    >>> float(sd.grad(lambda x: x * sd.stop_gradient(x))(3.0))
    3.0
    """
    return _tree_map(_stop_gradient_elementwise, x)


def latex(fun, *args, **options) -> str:
    """``sd.trace(fun, *args).latex(**options)``.

    >>> import numpy as np, symad as sd
    >>> print(sd.latex(lambda x: np.sin(x) ** 2, 0.0))
    \\begin{aligned}
    f &= \\sin^{2}{\\left(x \\right)}
    \\end{aligned}
    """
    return trace(fun, *args).latex(**options)


__all__ = [
    "CompileError", "DifferentiationError", "ExportError", "Function", "Parameter", "RetraceWarning",
    "SymadError", "checkpoint", "fori_loop", "scan", "while_loop",
    "TracingError", "Transformed", "available_backends", "config", "derivative", "from_sympy",
    "get_num_threads", "grad", "hessian", "jacfwd", "jacobian", "jacrev", "jvp", "latex",
    "primitive", "set_num_threads", "special", "stop_gradient", "taylor", "trace",
    "value_and_grad", "vjp", "vmap",
]
