"""How many threads symad's evaluators use, without changing other code's settings.

numexpr keeps one process-wide thread count (``numexpr.set_num_threads``).
symad keeps its own setting and, around each evaluation that numexpr would
split across threads, switches numexpr to it and back -- only when the two
differ, since numexpr rebuilds its thread pool on every change (about
0.2 ms). The caveat: numexpr's count is process-wide, so numexpr code running
in *another* Python thread during one of symad's evaluations sees symad's
count for that moment. numba's count is switched the same way (numba keeps it
per calling thread).
"""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["set_num_threads", "get_num_threads", "numexpr_threads", "numba_threads",
           "default_num_threads"]


def default_num_threads() -> int:
    """Every core this process may run on (both, on a 2-core machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_threads: int | None = None

#: Batches smaller than this run without touching thread settings: numexpr
#: would not split them across threads anyway, and switching costs more.
SMALL_BATCH = 1 << 14
#: numexpr runs a call on the calling thread alone below this many elements
#: (``2 * BLOCK_SIZE1`` in its interpreter), whatever its thread count.
NUMEXPR_SERIAL_BELOW = 2048


def set_num_threads(n: int | None) -> int:
    """Set the threads symad's evaluators use; ``None`` restores the default. Returns the old value.

    numexpr's own process-wide setting is left as it was for other code.

    >>> import symad as sd
    >>> previous = sd.set_num_threads(1)
    >>> sd.get_num_threads()
    1
    >>> _ = sd.set_num_threads(previous)
    """
    global _threads
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ValueError(f"set_num_threads: expected a positive int or None, got {n!r}")
    previous = get_num_threads()
    _threads = n
    return previous


def get_num_threads() -> int:
    """The threads symad's evaluators use (default: every core).

    >>> import symad as sd
    >>> sd.get_num_threads() >= 1
    True
    """
    return _threads if _threads is not None else default_num_threads()


# Evaluations running at once in several Python threads share one switch of
# numexpr's count: the first to start saves numexpr's value and sets symad's,
# the last to finish restores it (so concurrent evaluations cannot leave
# numexpr's global setting changed by restoring in the wrong order).
_switch_lock = threading.Lock()
_active = 0
_saved: int | None = None


@contextlib.contextmanager
def numexpr_threads(n: int | None, batch: int, small_batch: int | None = None):
    """Run the body with numexpr on ``n`` threads (symad's setting if None), then restore it;
    batches smaller than ``small_batch`` (default ``SMALL_BATCH``) leave numexpr's setting alone.

    >>> import numexpr
    >>> before = numexpr.get_num_threads()
    >>> with numexpr_threads(1, batch=10**6):
    ...     numexpr.get_num_threads()
    1
    >>> numexpr.get_num_threads() == before
    True
    """
    global _active, _saved
    if batch < (SMALL_BATCH if small_batch is None else small_batch):
        yield
        return
    import numexpr

    wanted = n if n is not None else get_num_threads()
    with _switch_lock:
        if _active == 0:
            current = numexpr.get_num_threads()
            if current != wanted:
                _saved = current
                numexpr.set_num_threads(wanted)
        _active += 1
    try:
        yield
    finally:
        with _switch_lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                numexpr.set_num_threads(_saved)
                _saved = None


@contextlib.contextmanager
def numba_threads(n: int | None):
    """Run the body with numba's parallel loops on ``n`` threads, then restore the setting.

    Needs numba (``pip install symad[fast]``).
    """
    import numba

    wanted = min(n if n is not None else get_num_threads(), numba.config.NUMBA_NUM_THREADS)
    previous = numba.get_num_threads()
    if previous == wanted:
        yield
        return
    numba.set_num_threads(wanted)
    try:
        yield
    finally:
        numba.set_num_threads(previous)
