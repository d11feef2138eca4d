"""The small timing and table harness every benchmark script shares.

Machines here are shared and noisy: a figure is the median of several
repetitions after a warm-up, every step runs under a wall-clock limit, and
scripts print ratios measured side by side in one run.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

NO_VALUE = "—"


class StepTimeout(BaseException):
    """A timed step overran its limit.

    Derives from BaseException so that a broad ``except Exception`` inside
    the code being timed cannot swallow it.
    """


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the enclosed block after ``seconds`` (POSIX main thread only).

    Where SIGALRM is unavailable the block simply runs to completion; the
    per-case budgets still bound the number of repetitions.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise StepTimeout(f"step exceeded {seconds:.0f} s")

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)


@dataclass
class Timing:
    """Median of the repetitions that fit in the budget (None: timed out)."""

    median_s: float | None
    repetitions: int
    timed_out: bool = False  # a repetition hit the step limit


def time_repeatedly(
    prepare: Callable[[], object],
    run: Callable[[object], object],
    repetitions: int,
    warmup: bool = True,
    budget_s: float = 8.0,
    step_limit_s: float = 40.0,
) -> Timing:
    """Time ``run(prepare())``, timing only ``run``.

    ``prepare`` is called afresh before each repetition (new function
    object, cleared caches...) outside the timed region, and what ``run``
    returns is freed outside it too. At least one
    repetition is always made; further ones stop once ``budget_s`` of timed
    work has accumulated. A step longer than ``step_limit_s`` is interrupted.
    """
    samples: list[float] = []
    timed_out = False
    try:
        if warmup:
            with time_limit(step_limit_s):
                run(prepare())
        for _ in range(repetitions):
            argument = prepare()
            with time_limit(step_limit_s):
                start = time.perf_counter()
                outcome = run(argument)
                samples.append(time.perf_counter() - start)
            # What run built is freed here, outside the timed region (a Python graph of
            # 10^5 nodes takes a tenth of a second to free; C++ objects much less).
            del outcome, argument
            if sum(samples) > budget_s:
                break
    except StepTimeout:
        timed_out = True  # keep whatever repetitions completed
    if not samples:
        return Timing(None, 0, timed_out)
    return Timing(statistics.median(samples), len(samples), timed_out)


def interleaved(calls: dict, rounds: int) -> dict:
    """Median seconds per call of each callable, calling each once per round, in turn (after
    two warm-up calls each), so that a change of the machine's load hits every system alike."""
    for call in calls.values():
        call()
        call()
    samples = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def format_ms(timing: Timing | None, step_limit_s: float = 40.0) -> str:
    """A timing in milliseconds for a table; ``> limit`` if it timed out, a dash if not run."""
    if timing is None:
        return NO_VALUE
    if timing.median_s is None:
        return f"> {step_limit_s * 1e3:,.0f}" if timing.timed_out else NO_VALUE
    return f"{timing.median_s * 1e3:,.2f}"


def format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return " | ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))

    rule = "-+-".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def least_squares_line(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Slope, intercept and largest absolute residual of a straight-line fit (a linearity check)."""
    import numpy as np

    slope, intercept = np.polyfit(xs, ys, 1)
    residual = max(abs(y - (slope * x + intercept)) for x, y in zip(xs, ys, strict=True))
    return float(slope), float(intercept), float(residual)


def versions_line(peers: tuple[str, ...] = ("casadi", "symengine")) -> str:
    """Versions of symad, SymPy, NumPy and of the peers that are installed."""
    import importlib.metadata

    parts = []
    for package in ("symad", "sympy", "numpy", *peers):
        try:
            parts.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{package} not installed")
    return "versions: " + ", ".join(parts)


def machine_line() -> str:
    """Date, cores and Python, for the head of every report."""
    return (f"{datetime.datetime.now().isoformat(timespec='seconds')}, {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f}, "
            f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}")
