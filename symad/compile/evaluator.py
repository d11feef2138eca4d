"""Running a generated module: load it once, then call it on flattened batches.

:func:`load_module` turns a :class:`~symad.compile.scalar.numpy_backend.GeneratedModule`
into a namespace (``exec`` of the very source ``Function.source`` returns,
so what users read is what runs) and binds its ``EXTERNALS``.
:class:`Evaluator` is what ``Function`` caches per (backend, dtype).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
from collections.abc import Sequence

import numpy as np

import symad.compile.threads as threads
from symad.compile.progress import progress_bar
from symad.errors import CompileError

#: Evaluations of fewer points never get a progress bar (nor pay for making one).
PROGRESS_MIN_POINTS = 1 << 16

__all__ = ["Evaluator", "load_module", "cache_directory"]


def cache_directory() -> str:
    """Where symad keeps generated modules (and numba its machine code) between sessions.

    ``symad.config.cache_dir`` or ``$SYMAD_CACHE_DIR`` if set, else the platform's user
    cache directory (``$XDG_CACHE_HOME/symad`` or ``~/.cache/symad`` on Linux).

    >>> cache_directory().endswith("symad") or "SYMAD_CACHE_DIR" in os.environ
    True
    """
    from symad import config

    return config.cache_directory()


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
        module.path = path
    else:
        namespace = {"__name__": f"symad_generated_{module.backend}"}
        # A module from the disk cache brings its bytecode (module.code): not compiled again.
        if getattr(module, "code", None) is None:
            module.code = compile(module.source, f"<symad {module.backend} evaluator>", "exec")
        exec(module.code, namespace)  # noqa: S102 - our own generated text; see symad.compile.scalar.source
    namespace["EXTERNALS"][:] = module.externals
    return namespace


class Evaluator:
    """A loaded evaluator: ``evaluator.evaluate_into(inputs, outputs, n)``.

    Args:
        module: the generated module (``.source`` is the text that runs).
        namespace: its loaded namespace.
    """

    def __init__(self, module, namespace: dict, operations: int | None = None):
        self.module = module
        #: the graph's operations (what progress bars count)
        self.operations = operations
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
        #: numba: compiles its kernel for the layouts of the first call's arrays
        self._compile_kernel = namespace.get("compile_kernel")
        self._compiled_layouts: set = set()
        #: a module whose evaluate reports its progress itself (the tape's), after its block size
        self._reports_progress = namespace.get("REPORTS_PROGRESS", False)
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
        if self._compile_kernel is not None:  # numba: LLVM's compile, with a bar if it is long
            layouts = tuple((a.ndim, a.flags.c_contiguous, a.flags.writeable, a.flags.aligned)
                            for a in (*inputs, *outputs))
            if layouts not in self._compiled_layouts:
                self._compile_with_progress(inputs, outputs, n)
                self._compiled_layouts.add(layouts)
        with contextlib.ExitStack() as stack:
            done = None
            if n >= PROGRESS_MIN_POINTS and (self._threads_share_blocks or self._reports_progress
                                             or self._compile_kernel is not None):
                done = stack.enter_context(progress_bar(
                    f"{self.backend}: evaluating {self._operations_text()} operations",
                    total=n, unit="points"))
            if self.backend == "numexpr" and self._threads_share_blocks:
                # symad's threads take blocks; each numexpr call then runs in the thread
                # that makes it (numexpr's own threads would wait for each other per call).
                with threads.numexpr_threads(1, n, threads.NUMEXPR_SERIAL_BELOW):
                    evaluate(inputs, outputs, n, block,
                             num_threads if num_threads is not None else threads.get_num_threads(),
                             done)
            elif self.backend == "numexpr":
                with threads.numexpr_threads(num_threads, n):
                    evaluate(inputs, outputs, n, block)
            elif self.backend == "numba":
                with threads.numba_threads(num_threads):
                    evaluate(inputs, outputs, n, block, None, done)
            elif self._reports_progress:
                evaluate(inputs, outputs, n, block, done)
            elif self._threads_share_blocks:  # the numpy backend: the reference, on one thread
                evaluate(inputs, outputs, n, block, 1, done)
            else:
                evaluate(inputs, outputs, n, block)

    def _operations_text(self) -> str:
        return "?" if self.operations is None else f"{self.operations:,}"

    def _compile_with_progress(self, inputs, outputs, n: int) -> None:
        """numba's compile of the kernel (or its load from numba's cache) for a new layout of
        arguments: one call into LLVM, under a bar whose clock runs if it takes long."""
        description = f"numba: compiling {self._operations_text()} operations in one kernel"
        with progress_bar(description, total=1, ticking=True) as done:
            if self._compile_kernel(inputs, outputs, n):
                done(1)

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
