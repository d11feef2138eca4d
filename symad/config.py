"""Switches for what symad does besides computing: progress bars and the on-disk cache.

Each is an attribute of this module, read when it is used. ``None`` (the
default) means "as the environment variable says, else the default":

======================  ==========================  ==============================================
attribute               environment variable        meaning
======================  ==========================  ==============================================
``progress``            ``SYMAD_PROGRESS``          ``True``: a progress bar for long compiles and
                                                    evaluations (past ``progress_after`` seconds);
                                                    ``False``: never; ``None``/``auto``: only on an
                                                    interactive terminal (tqdm's own test)
``progress_after``      ``SYMAD_PROGRESS_AFTER``    seconds before a bar appears (default 2.0)
``cache``               ``SYMAD_CACHE``             ``False``/``0``: no on-disk cache of generated
                                                    modules (numba keeps its own machine-code cache)
``cache_dir``           ``SYMAD_CACHE_DIR``         where the cache lives (default: the platform's
                                                    user cache directory, via platformdirs)
``cache_max_bytes``     ``SYMAD_CACHE_MAX_BYTES``   size bound of the module cache (default 1 GiB)
``promote``             ``SYMAD_PROMOTE``           ``False``/``0``: ``F(...)`` always evaluates with
                                                    numexpr; otherwise (default) a function that
                                                    has spent numba's compile time in numexpr
                                                    moves to numba if that is faster
                                                    (:mod:`symad.compile.tiers`)
======================  ==========================  ==============================================

>>> import symad as sd
>>> sd.config.progress = False      # no bars in this process, whatever the terminal
>>> sd.config.progress_enabled()
False
>>> sd.config.progress = None
"""

from __future__ import annotations

import os

__all__ = ["progress", "progress_after", "cache", "cache_dir", "cache_max_bytes",
           "progress_enabled", "progress_delay", "cache_enabled", "cache_directory",
           "cache_size_bound", "promote", "promote_enabled"]

progress: bool | None = None
progress_after: float | None = None
cache: bool | None = None
cache_dir: str | None = None
cache_max_bytes: int | None = None
promote: bool | None = None

_FALSE = {"0", "false", "no", "off"}
_TRUE = {"1", "true", "yes", "on"}


def _switch(value: bool | None, variable: str) -> bool | None:
    """``value`` if set, else the environment variable as True/False, else None."""
    if value is not None:
        return bool(value)
    text = os.environ.get(variable, "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def progress_enabled() -> bool | None:
    """True (always show bars), False (never) or None (on an interactive terminal only).

    >>> progress_enabled() in (True, False, None)
    True
    """
    return _switch(progress, "SYMAD_PROGRESS")


def progress_delay() -> float:
    """Seconds a piece of work must take before its bar appears.

    >>> progress_delay() >= 0
    True
    """
    if progress_after is not None:
        return float(progress_after)
    try:
        return float(os.environ.get("SYMAD_PROGRESS_AFTER", "2.0"))
    except ValueError:
        return 2.0


def cache_enabled() -> bool:
    """Whether generated modules are kept on disk and reused by later processes (default True).

    >>> isinstance(cache_enabled(), bool)
    True
    """
    return _switch(cache, "SYMAD_CACHE") is not False


def cache_directory() -> str:
    """The cache's directory: ``cache_dir``, ``$SYMAD_CACHE_DIR``, else the platform's user
    cache directory for symad (``~/.cache/symad`` on Linux, honouring ``$XDG_CACHE_HOME``).

    >>> cache_directory().endswith("symad") or bool(cache_dir or os.environ.get("SYMAD_CACHE_DIR"))
    True
    """
    configured = cache_dir or os.environ.get("SYMAD_CACHE_DIR")
    if configured:
        return configured
    import platformdirs

    return platformdirs.user_cache_dir("symad", appauthor=False)


def cache_size_bound() -> int:
    """Bytes the module cache may hold before its least recently used entries are removed.

    >>> cache_size_bound() > 0
    True
    """
    if cache_max_bytes is not None:
        return int(cache_max_bytes)
    try:
        return int(os.environ.get("SYMAD_CACHE_MAX_BYTES", str(1 << 30)))
    except ValueError:
        return 1 << 30


def promote_enabled() -> bool | None:
    """False if ``F(...)`` must stay with numexpr, else True or None (the default: promote).

    >>> promote_enabled() in (True, False, None)
    True
    """
    return _switch(promote, "SYMAD_PROMOTE")
