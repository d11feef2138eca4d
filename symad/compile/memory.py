"""Allocating the arrays an evaluation returns.

An output array larger than glibc's largest mmap threshold (32 MiB on 64-bit
Linux) is a fresh memory mapping on every call: malloc never recycles it, so
the evaluation that first writes it also pays the kernel for every page.
NumPy asks Linux to back such arrays with transparent huge pages
(``madvise(MADV_HUGEPAGE)``), i.e. 2 MiB pages zeroed at the first touch.
On the development machine (a virtual machine whose host takes back freed
guest memory) that first touch cost anywhere from 12 ms to 270 ms for a
96 MB output, depending on what was freed just before; with ordinary 4 KiB
pages it cost 55-72 ms every time (docs/benchmarks.md, section 2). symad
prefers the predictable cost for its large outputs: :func:`output_array`
marks them ``MADV_NOHUGEPAGE``. Smaller outputs, and every platform other
than Linux, get exactly what ``np.empty`` gives.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys

import numpy as np

__all__ = ["output_array", "SMALL_PAGES_FROM"]

#: Outputs of at least this many bytes are kept off transparent huge pages (None: never).
SMALL_PAGES_FROM: int | None = 32 << 20

_MADV_NOHUGEPAGE = 15  # <asm-generic/mman-common.h>, the same on every Linux architecture
_PAGE = 4096


def _find_madvise():
    if not sys.platform.startswith("linux"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        madvise.restype = ctypes.c_int
        return madvise
    return None


_madvise = _find_madvise()


def output_array(shape: tuple, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``; if it is large, in ordinary pages rather than huge pages.

    The values and the array are NumPy's own (it owns its memory, pickles and
    frees as usual); only the kernel's paging hint differs, and a refused
    hint is ignored.

    >>> out = output_array((4, 6), np.float64)
    >>> out.shape, out.dtype, out.flags.owndata
    ((4, 6), dtype('float64'), True)
    """
    array = np.empty(shape, dtype)
    if _madvise is not None and SMALL_PAGES_FROM is not None and array.nbytes >= SMALL_PAGES_FROM:
        # madvise takes whole pages: the pages entirely inside the array.
        start = -(-array.ctypes.data // _PAGE) * _PAGE
        end = (array.ctypes.data + array.nbytes) // _PAGE * _PAGE
        if end > start:
            _madvise(start, end - start, _MADV_NOHUGEPAGE)
    return array
