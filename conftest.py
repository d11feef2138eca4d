"""pytest set-up for the whole repository: the tests under tests/ and the doctests under symad/.

(tests/conftest.py holds the set-up of the tests themselves; this file is at the root
because pytest applies a conftest.py only to what lies under its folder, and the
doctests of symad/ must get the same cache directory.)
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_SAVED = pytest.StashKey[tuple]()


def pytest_configure(config):
    """Keep symad's on-disk cache in a new temporary directory for the whole session.

    By default the cache is the user's (``~/.cache/symad``): a test run left 52 MB of
    numba machine code and generated modules there, and a test could reuse modules an
    earlier run (or the user's own work) left behind. ``SYMAD_CACHE_DIR`` is set here,
    before collection (importing test and doctest modules may already compile), so it
    holds for every test, doctest and subprocess a test starts; an earlier value, the
    user's, is put back at the end and the directory removed. Tests of the cache itself
    still use directories of their own (tests/test_disk_cache.py), and tests of the
    default location unset the variable (tests/test_cache_location.py).
    """
    directory = tempfile.mkdtemp(prefix="symad-test-cache-")
    config.stash[_SAVED] = (directory, os.environ.get("SYMAD_CACHE_DIR"))
    os.environ["SYMAD_CACHE_DIR"] = directory


def pytest_unconfigure(config):
    directory, previous = config.stash.get(_SAVED, (None, None))
    if directory is None:
        return
    if previous is None:
        os.environ.pop("SYMAD_CACHE_DIR", None)
    else:
        os.environ["SYMAD_CACHE_DIR"] = previous
    shutil.rmtree(directory, ignore_errors=True)
