"""Progress bars for long compiles and evaluations (tqdm), shown only where they help.

:func:`progress_bar` yields a function to call with the work done. A bar
appears once the work has taken ``symad.config.progress_delay()`` seconds
(2 s by default): short work prints nothing. Where it appears is
``symad.config.progress_enabled()``: by default only on an interactive
terminal (tqdm's own test of its output stream), so logs of batch jobs and
test runs stay clean; ``symad.config.progress = True`` (or
``SYMAD_PROGRESS=1``) shows bars anywhere, ``False`` (``SYMAD_PROGRESS=0``)
never. A work with no steps to count (a numba compile, one call into LLVM)
gets a bar whose clock keeps running, so a long wait says what it waits for.

>>> with progress_bar("numpy: evaluating 3 operations", total=10, unit="points") as done:
...     done(10)
"""

from __future__ import annotations

import contextlib
import sys
import threading

from symad import config

__all__ = ["progress_bar"]

#: How often (seconds) the clock of a bar with no steps to count is redrawn.
TICK = 0.5


@contextlib.contextmanager
def progress_bar(description: str, total: int | None = None, unit: str = "it",
                 ticking: bool = False):
    """A tqdm bar saying ``description``; yields ``done(amount)`` (callable from any thread).

    ``ticking``: redraw the bar every ``TICK`` seconds (work with no steps of its own).
    With bars turned off it yields a function that does nothing.
    """
    enabled = config.progress_enabled()
    if enabled is False:
        yield _nothing
        return
    from tqdm.std import tqdm

    # disable=None: tqdm shows the bar only when its stream is a terminal.
    bar = tqdm(total=total, desc=description, unit=unit, delay=config.progress_delay(),
               disable=None if enabled is None else False, leave=False, file=sys.stderr,
               unit_scale=unit == "points", dynamic_ncols=True)
    lock = threading.Lock()

    def done(amount: int = 1) -> None:
        with lock:
            bar.update(amount)

    finished = threading.Event()
    ticker = None
    if ticking and not bar.disable:
        def tick():
            while not finished.wait(TICK):
                done(0)

        ticker = threading.Thread(target=tick, name="symad progress", daemon=True)
        ticker.start()
    try:
        yield done
    finally:
        finished.set()
        if ticker is not None:
            ticker.join()
        bar.close()


def _nothing(amount: int = 1) -> None:
    return None
