"""Running a generated module: load it once, then call it on flattened batches.

:func:`load_module` turns a :class:`~symad.compile.numpy_backend.GeneratedModule`
into a namespace (``exec`` of the very source ``Function.source`` returns,
so what users read is what runs) and binds its ``EXTERNALS``.
:class:`Evaluator` is what ``Function`` caches per (backend, dtype).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Sequence

import numpy as np

from symad.compile import threads
from symad.errors import CompileError

__all__ = ["Evaluator", "load_module", "cache_directory"]


def cache_directory() -> str:
    """Where backends that compile slowly (numba) keep their compiled code between sessions.

    ``$SYMAD_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/symad`` or ``~/.cache/symad``.

    >>> cache_directory().endswith("symad") or "SYMAD_CACHE_DIR" in os.environ
    True
    """
    configured = os.environ.get("SYMAD_CACHE_DIR")
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "symad")


def load_module(module, on_disk: bool = False) -> dict:
    """Execute a generated module's source; its namespace, with ``EXTERNALS`` bound.

    ``on_disk``: write the source to a file named by its hash under
    :func:`cache_directory` and import it from there, so that numba's
    ``cache=True`` can find the source and keep the machine code beside it.

    >>> import numpy as np, sympy
    >>> from symad.compile import generate_module
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import sin_p
    >>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
    >>> namespace = load_module(generate_module(builder.finish([builder.record(sin_p, (x,))]), "numexpr"))
    >>> namespace["run"](np.array([0.0]))
    (array([0.]),)
    """
    if on_disk:
        digest = hashlib.sha256(module.source.encode()).hexdigest()[:24]
        directory = os.path.join(cache_directory(), module.backend)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"symad_{digest}.py")
        if not os.path.exists(path):
            temporary = f"{path}.{os.getpid()}.tmp"
            with open(temporary, "w") as handle:
                handle.write(module.source)
            os.replace(temporary, path)  # atomic: concurrent processes never see half a file
        spec = importlib.util.spec_from_file_location(f"symad_{module.backend}_{digest}", path)
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = loaded  # numba's cache looks the module up by name
        spec.loader.exec_module(loaded)
        namespace = vars(loaded)
    else:
        namespace = {"__name__": f"symad_generated_{module.backend}"}
        code = compile(module.source, f"<symad {module.backend} evaluator>", "exec")
        exec(code, namespace)  # noqa: S102 - our own generated text; see symad.compile.source
    namespace["EXTERNALS"][:] = module.externals
    return namespace


class Evaluator:
    """A loaded evaluator: ``evaluator.evaluate_into(inputs, outputs, n)``.

    Args:
        module: the generated module (``.source`` is the text that runs).
        namespace: its loaded namespace.
    """

    def __init__(self, module, namespace: dict):
        self.module = module
        self.backend = module.backend
        self.dtype = module.dtype
        self.source = module.source
        self.note = module.note
        self.block_size = module.block_size
        #: the file the module was loaded from when a backend caches on disk (numba), else None
        self.cached_at = namespace.get("__file__")
        self.output_is_boolean = namespace["OUTPUT_IS_BOOLEAN"]
        self._evaluate = namespace["evaluate"]
        #: a blocked module whose threads share the blocks (each with its own programs)
        self._threads_share_blocks = "_take_programs" in namespace
        self._evaluate_matrices = namespace.get("evaluate_matrices")
        self.run = namespace["run"]

    def evaluate_into(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], n: int,
                      *, num_threads: int | None = None, block_size: int | None = None) -> None:
        """Fill 1-D ``outputs`` of length ``n`` from 1-D (length ``n``) or 0-d ``inputs``."""
        self._run(self._evaluate, inputs, outputs, n, num_threads=num_threads,
                  block_size=block_size)

    def _run(self, evaluate, inputs, outputs, n: int, *, num_threads: int | None = None,
             block_size: int | None = None) -> None:
        """``evaluate(inputs, outputs, n, block)`` with this backend's threads set."""
        block = self.block_size if block_size is None else block_size
        if self.backend == "numexpr" and self._threads_share_blocks:
            # symad's threads take blocks; each numexpr call then runs in the thread
            # that makes it (numexpr's own threads would wait for each other per call).
            with threads.numexpr_threads(1, n, threads.NUMEXPR_SERIAL_BELOW):
                evaluate(inputs, outputs, n, block,
                         num_threads if num_threads is not None else threads.get_num_threads())
        elif self.backend == "numexpr":
            with threads.numexpr_threads(num_threads, n):
                evaluate(inputs, outputs, n, block)
        elif self.backend == "numba":
            with threads.numba_threads(num_threads):
                evaluate(inputs, outputs, n, block)
        else:
            evaluate(inputs, outputs, n, block)

    def evaluate_matrices(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], n: int,
                          **options) -> None:
        """Fill ``(n, k)`` ``outputs`` from ``(n, k)`` or ``(1, k)`` ``inputs`` (one row: every point).

        The columns of ``inputs``, in order, are the scalar inputs, and those of
        ``outputs`` the scalar outputs. A module that reads whole matrices (the
        level-by-level lowering: a gradient over 10^4 elements at one point has
        10^4 columns) gets them as they are; other modules get one column each.

        >>> import sympy
        >>> from symad.compile import make_evaluator
        >>> from symad.graph import GraphBuilder
        >>> from symad.primitives import mul_p
        >>> x, y = sympy.symbols("x y"); builder = GraphBuilder()
        >>> builder.add_input(x); builder.add_input(y)
        >>> evaluator = make_evaluator(builder.finish([builder.record(mul_p, (x, y))]), "numpy")
        >>> out = np.empty((3, 1))
        >>> evaluator.evaluate_matrices([np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])], [out], 3)
        >>> out.ravel().tolist()
        [2.0, 12.0, 30.0]
        """
        if self._evaluate_matrices is not None:
            self._run(self._evaluate_matrices, inputs, outputs, n, **options)
            return
        columns = []
        for matrix in inputs:
            shared = matrix.shape[0] == 1 and n != 1  # 0-d: the same at every point
            columns.extend(matrix[0, i].reshape(()) if shared else matrix[:, i]
                           for i in range(matrix.shape[1]))
        out_columns = [output[:, j] for output in outputs for j in range(output.shape[1])]
        self.evaluate_into(columns, out_columns, n, **options)

    def __repr__(self) -> str:
        return f"<symad evaluator: {self.backend}, {self.dtype.name}>"


def check_loaded(namespace: dict, backend: str) -> None:
    """A generated module must define the driver symad calls."""
    for name in ("evaluate", "run", "EXTERNALS", "OUTPUT_IS_BOOLEAN"):
        if name not in namespace:
            raise CompileError(f"the generated {backend} module lacks {name!r}")
