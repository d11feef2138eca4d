"""The default backend in two tiers: numexpr from the first call, numba once a function is hot.

A :class:`~symad.function.Function` called without naming a backend (``F(x)``,
``sd.grad(f)(x)``, every transform) starts with numexpr, whose module is ready in
milliseconds. numexpr is an interpreter of whole-block operations: on graphs of
plain arithmetic (the logistic map's gradient, a 24th derivative by Taylor mode,
a grid's energy) numba's one compiled loop is 3-6 times faster per call, but
compiling it costs 0.5-3 s, more than most scripts ever spend evaluating.

:class:`Promotion` settles this the way a tiered JIT does. It adds up the time a
function spends evaluating in numexpr; once that reaches what numba's compile
is expected to cost (:func:`compile_estimate`), it compiles the numba evaluator
and times both tiers on the call at hand, alternately. numba takes over only
if it is clearly faster there (:data:`KEEP_RATIO`): a graph whose time goes to ``sin``/``cos`` (the same
C library calls in both) or to BLAS stays with numexpr. The rule is the ski
rental's: the compile is paid only after as much time has gone into the slower
tier, so a function never costs more than about twice what the better choice
would have in hindsight, and a function evaluated a few times never compiles.

Two kinds of function have their trial at the second call instead (:func:`early_trial`):
one whose compiled module an earlier process left in the disk cache (kernels are cached
across processes: its compile is paid), and, while that cache is on, an array program
whose loops numba fuses (no contraction): numba is known to win there by several times,
and its compile is paid once per machine. A 256x256 grid gradient runs in numba from
its third call.

The switch happens at most once per function and is logged (INFO, the
``"symad"`` logger); ``F.tier`` says which backend ``F(...)`` uses now.
numexpr and numba agree to rounding, not always to the last bit (a sum's
order of additions, a C library's ``exp`` against NumPy's): runs that must be
bit-for-bit reproducible name their backend (``F.compile("numexpr")``) or turn
promotion off (``sd.config.promote = False`` or ``SYMAD_PROMOTE=0``), as with
other auto-tuners (FFTW's measured plans, cuDNN's benchmark mode).

>>> promotion = Promotion("f", operations=10, target="numpy")
>>> promotion.compile_seconds = 0.0          # promote at the first chance (as a test would)
>>> [promotion.run(lambda backend: backend, key=("n", 3)) for call in range(2)]
['numexpr', 'numexpr']
>>> promotion.backend in ("numpy", "numexpr")  # numpy kept only if it was faster
True
"""

from __future__ import annotations

import contextvars
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from symad import config
from symad.compile.registry import backend_available

__all__ = ["Promotion", "compile_estimate", "promotion_enabled", "fallback_level", "KEEP_RATIO",
           "tape_serves", "early_trial", "fused_array_program", "second_tier", "tape_estimate",
           "TAPE_MIN_NODES", "TAPE_MAX_POINTS", "TAPE_WIDE_RATIO"]

#: The trial calls each tier this many times on the same arguments, alternately, so that
#: a busy moment of a shared machine slows both alike (a yardstick taken from earlier
#: calls was not: on a loaded machine a per-sample MLP gradient moved to numba at 1.8x
#: numexpr's time). The second tier takes over only if its fastest call takes at most
#: ``KEEP_RATIO`` of the first tier's fastest: a 10 % margin, so that noise does not
#: move a function whose tiers are equally fast.
TRIAL_CALLS = 3
KEEP_RATIO = 0.9

#: numba's compile of a module, in seconds: a fixed part and a part per graph operation.
#: Measured 2026-11-25 on the project's 2-core machine (numba 0.68.1): 0.37 s for the
#: 12-operation gradient of log(x) + xy - sin(y), 1.6 s for a 192-operation 30th
#: derivative, 3.4 s for a 24th derivative of 500 operations (cold caches).
COMPILE_FIXED_SECONDS = 0.3
COMPILE_SECONDS_PER_OPERATION = 0.006
#: ... and numba's own start in a process that has not imported it: the import (0.4 s)
#: and the NumPy support it loads on its first compile (0.2-0.3 s).
NUMBA_START_SECONDS = 0.6

#: The tape (:mod:`symad.compile.scalar.tape`) serves a default call of a scalar graph of at
#: least this many nodes, evaluated on at most ``TAPE_MAX_POINTS`` points, without a trial.
#: Measured 2026-11-28 on the 2-core machine, the 190,000-node gradient of a 10^4-step
#: Euler loop at one point: numexpr's module took 4.8 s to generate and 108 ms a call
#: (about 0.5 us of Python per node), the tape 0.3 s and 1.0 ms (5 ns per node and point).
#: The tape costs numba's start (0.6 s, then its cached interpreter), so it is the
#: default's choice only where numexpr's generation costs more than that: past about
#: 25,000 nodes (the largest graph of benchmarks/order.py, the 64th derivative of the
#: logistic map, has 18,248, and stays with numexpr).
TAPE_MIN_NODES = 25_000
#: ... on at most this many points: the tape's time grows with nodes x points, numexpr's
#: per-node overhead is shared by a block of points (equal near 300 points on the Euler
#: gradient, benchmarks/pendulum.py --batches).
TAPE_MAX_POINTS = 128
#: ... and not a wide graph, whose inputs and outputs number at least one per this many
#: nodes (the gradient of a sum over 10^5 elements): numexpr evaluates one of those level
#: by level, one NumPy call per group of like operations (symad.compile.scalar.levels).
TAPE_WIDE_RATIO = 64

_LOG = logging.getLogger(__name__)

#: True while a Promotion tries the second tier (in this thread): a numba that falls back
#: to numexpr then says so at INFO level, since nobody asked for numba.
_TRYING = contextvars.ContextVar("symad_trying_second_tier", default=False)


def fallback_level() -> int:
    """The level at which a backend falling back is logged: a warning if the user asked for
    it, INFO while a :class:`Promotion` tries it.

    >>> fallback_level() == logging.WARNING
    True
    """
    return logging.INFO if _TRYING.get() else logging.WARNING

#: States of a :class:`Promotion` besides the backends' names.
_WATCHING = "numexpr"


def compile_estimate(operations: int) -> float:
    """Seconds numba is expected to take to compile a graph of ``operations`` operations.

    >>> round(compile_estimate(100), 2) >= 0.9
    True
    """
    seconds = COMPILE_FIXED_SECONDS + COMPILE_SECONDS_PER_OPERATION * operations
    if "numba" not in sys.modules:
        seconds += NUMBA_START_SECONDS
    return seconds


#: What the tape backend's second tier costs before its first call: numba's start and the
#: interpreter's load from numba's cache (0.3-0.5 s once per process, measured 2026-11-28 on
#: the 2-core box), and making the tape (0.2 s for 190,000 nodes).
TAPE_LOAD_SECONDS = 0.5
TAPE_SECONDS_PER_OPERATION = 1e-6


def tape_estimate(operations: int) -> float:
    """Seconds the tape backend is expected to take before its first call on a graph of
    ``operations`` operations (no compile: numba's start and the tape's arrays).

    >>> 0.5 <= tape_estimate(100_000) < 2.0
    True
    """
    seconds = TAPE_LOAD_SECONDS + TAPE_SECONDS_PER_OPERATION * operations
    if "numba" not in sys.modules:
        seconds += NUMBA_START_SECONDS
    return seconds


def second_tier(operations: int, array_program: bool) -> str:
    """The backend a function's default calls may move to: numba, or for a scalar graph numba
    declines for its size (past ``MAX_NUMBA_NODES``), the tape, which has no size limit.

    >>> second_tier(100, False), second_tier(10_000, False), second_tier(10_000, True)
    ('numba', 'tape', 'numba')
    """
    from symad.compile.scalar.numba_backend import MAX_NUMBA_NODES

    return "tape" if not array_program and operations > MAX_NUMBA_NODES else "numba"


def promotion_enabled(target: str = "numba") -> bool:
    """Whether ``F(...)`` may move a function to ``target`` (numba, or the tape):
    ``sd.config.promote`` or ``$SYMAD_PROMOTE`` if set, else True where ``target`` runs here.

    >>> isinstance(promotion_enabled(), bool)
    True
    """
    switch = config.promote_enabled()
    if switch is False:
        return False
    return backend_available(target)


def tape_serves(nodes: int, inputs: int, outputs: int, points: int) -> bool:
    """Whether a default call of a scalar graph (``nodes`` nodes, ``inputs`` scalar inputs and
    ``outputs`` scalar outputs) on ``points`` points goes to the tape backend.

    Only where promotion may use the tape (:func:`promotion_enabled`): turning promotion off
    keeps every default call in numexpr, bit for bit.

    >>> tape_serves(190_000, 2, 2, 1) == promotion_enabled("tape")
    True
    >>> tape_serves(190_000, 2, 2, 10_000), tape_serves(500_000, 10**5, 10**5, 1)
    (False, False)
    """
    if nodes < TAPE_MIN_NODES or points > TAPE_MAX_POINTS:
        return False
    if (inputs + outputs) * TAPE_WIDE_RATIO >= nodes:
        return False
    return promotion_enabled("tape")


def early_trial(graph, name: str, array_program: bool, target: str = "numba") -> bool:
    """True if :class:`Promotion` should try ``target`` at the second call (with the same
    shapes) instead of after numba's compile time spent in the first tier.

    * An earlier process left the compiled module of this graph in the disk cache
      (``symad.config.cache_dir``; float64): its compile is paid already.
    * An array program whose loops numba fuses (:func:`fused_array_program`: elementwise
      work, slices and reductions; no contraction, which BLAS runs alike in both tiers),
      while the disk cache is on: numba's loop kernels beat numexpr's whole-array passes by
      3-6x on such programs (the 256x256 grid's gradient: 0.07 ms against 0.39 ms, JAX 0.23
      ms), and the compile is paid once per machine, not per process, as the kernel is cached.

    The trial then decides as always: the second tier takes over only if it is faster on the
    call at hand. With the disk cache off (``SYMAD_CACHE=0``), only the first tier's time
    moves a function, as before.

    >>> import symad as sd
    >>> F = sd.trace(lambda x: x * x, 1.0)
    >>> early_trial(F.graph, "a function never compiled", False)
    False
    """
    if not config.cache_enabled() or not promotion_enabled(target):
        return False
    from symad.compile.disk_cache import module_cached
    from symad.graph import scalar_input_graph

    # The pipeline's labels of the two kinds of program (symad.compile.pipeline.ARRAYS and
    # SCALAR; the pipeline imports this module, so they are written out here).
    if array_program:
        return fused_array_program(graph) or module_cached(graph, target, "float64", name, "arrays")
    from symad.compile.scalar.numba_backend import MAX_NUMBA_NODES

    if len(graph.nodes) > MAX_NUMBA_NODES:
        return False
    return module_cached(scalar_input_graph(graph), target, "float64", name, "scalar")


#: An array program of more nodes than this waits for the first tier's time (its compile
#: grows with its nodes).
FUSED_MAX_NODES = 200


def fused_array_program(graph) -> bool:
    """True for an array program of at most :data:`FUSED_MAX_NODES` nodes with no contraction
    (``einsum``, ``matmul``: a "bilinear" primitive).

    >>> import numpy as np, symad as sd
    >>> fused_array_program(sd.grad(lambda u: np.sum(np.diff(u) ** 2)).trace(np.ones(4)).graph)
    True
    >>> fused_array_program(sd.grad(lambda w: np.sum(np.ones((2, 2)) @ w)).trace(np.ones(2)).graph)
    False
    """
    nodes = graph.nodes
    return len(nodes) <= FUSED_MAX_NODES and all(node.primitive.kind != "bilinear" for node in nodes)


class Promotion:
    """Which backend one function's default calls use, and when that changes (see the module).

    Args:
        name: the function's name (for the log).
        operations: its graph's operations (for :func:`compile_estimate`).
        target: the second tier's backend (``"numba"``; tests use ``"numpy"``, which
            is always there).
    """

    def __init__(self, name: str, operations: int, target: str = "numba", early: bool = False):
        self.name = name
        self.target = target
        #: seconds of evaluation in the first tier so far
        self.spent = 0.0
        #: seconds the second tier's compile is expected to take: the threshold of ``spent``;
        #: None for an ``early`` trial (:func:`early_trial`), at the second call with the
        #: same shapes.
        if early:
            self.compile_seconds = None
        elif target == "tape":
            self.compile_seconds = tape_estimate(operations)
        else:
            self.compile_seconds = compile_estimate(operations)
        #: the backend default calls use now: "numexpr" while watching, then the target or
        #: "numexpr" for good
        self.backend = _WATCHING
        #: True once the tier is settled (it changes at most once)
        self.decided = False
        self._seen: set = set()  # call signatures the first tier has compiled for
        self._trial = threading.Lock()  # one thread tries the second tier; others go on

    def run(self, evaluate: Callable[[str], Any], key: Hashable,
            serving: Callable[[str], str] | None = None) -> Any:
        """``evaluate(backend)`` with the backend of this tier; ``key`` says which calls time
        alike (the arguments' shapes and dtypes); ``serving(backend)`` names the backend that
        actually serves ``backend`` once used (numba falls back to numexpr on some graphs)."""
        if self.decided:
            return evaluate(self.backend)
        start = time.perf_counter()
        result = evaluate(_WATCHING)
        seconds = time.perf_counter() - start
        self.spent += seconds
        # A first call with new shapes may compile for them: the trial waits for the next
        # (arguments of ever new shapes: only the last few are remembered).
        seen = key in self._seen
        if not seen:
            if len(self._seen) >= 64:
                self._seen.clear()
            self._seen.add(key)
        due = self.compile_seconds is None or self.spent >= self.compile_seconds
        if seen and due and self._trial.acquire(blocking=False):
            try:
                if not self.decided:
                    self._try_target(evaluate, serving)
            finally:
                self._trial.release()
        return result  # this call's result is the first tier's: the switch shows from the next

    def _try_target(self, evaluate: Callable[[str], Any],
                    serving: Callable[[str], str] | None) -> None:
        """Compile the second tier, time both tiers on this call's arguments, keep the faster."""
        outcome = "numexpr"
        trying = _TRYING.set(True)
        try:
            if self.target in ("numba", "tape") and not promotion_enabled(self.target):
                return
            evaluate(self.target)  # the compile (and a first evaluation)
            if serving is not None and serving(self.target) != self.target:
                _LOG.info("symad: %s: %s cannot take this graph; numexpr stays", self.name,
                          self.target)
                return
            fastest = {_WATCHING: float("inf"), self.target: float("inf")}
            for _ in range(TRIAL_CALLS):
                for backend in fastest:
                    start = time.perf_counter()
                    evaluate(backend)
                    fastest[backend] = min(fastest[backend], time.perf_counter() - start)
            seconds, first = fastest[self.target], fastest[_WATCHING]
            if seconds <= KEEP_RATIO * first:
                outcome = self.target
            _LOG.info("symad: %s: after %.2f s in numexpr, one call takes %.3g s in %s against "
                      "%.3g s in numexpr: %s", self.name, self.spent, seconds, self.target, first,
                      f"{self.target} takes over" if outcome == self.target else "numexpr stays")
        except Exception as error:  # noqa: BLE001 - any failure of the second tier keeps the first
            _LOG.warning("symad: %s: %s could not take over from numexpr (%s: %s); numexpr stays",
                         self.name, self.target, type(error).__name__, error)
        finally:
            _TRYING.reset(trying)
            self.backend = outcome
            self.decided = True


def call_goes_to_tape(graph, in_shapes, leaves: list) -> bool | None:
    """True if a default call of a scalar ``graph`` on ``leaves`` goes to the tape (a large,
    narrow graph on a few points: :func:`tape_serves`); None past the tape's points.

    >>> import numpy as np, symad as sd
    >>> F = sd.trace(lambda x: x * 2, 1.0)
    >>> call_goes_to_tape(F.graph, F.in_shapes, [np.zeros(10 ** 4)])
    """
    import numpy as np

    points = 1
    for leaf, core_shape in zip(leaves, in_shapes):
        size, core = np.size(leaf), math.prod(core_shape)
        points = max(points, size // core if core else 0)
    if points > TAPE_MAX_POINTS:
        return None
    return tape_serves(len(graph.nodes), len(graph.inputs), len(graph.outputs), points)
