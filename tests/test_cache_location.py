"""Where the on-disk cache lives: the user's cache by default, a temporary one in the tests.

The test session sets ``SYMAD_CACHE_DIR`` to a directory of its own (conftest.py at the
repository root); a test run once left 52 MB in ``~/.cache/symad``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import platformdirs
import pytest

import symad as sd
from symad import config


def users_cache() -> Path:
    """The directory symad uses when nothing is configured (platformdirs' user cache)."""
    return Path(platformdirs.user_cache_dir("symad", appauthor=False))


def snapshot(directory: Path) -> set:
    """Every file under ``directory`` with its size and modification time (empty if none)."""
    if not directory.exists():
        return set()
    return {(str(path.relative_to(directory)), path.stat().st_size, path.stat().st_mtime_ns)
            for path in directory.rglob("*") if path.is_file()}


def test_the_session_cache_is_a_temporary_directory_not_the_users():
    session = Path(config.cache_directory()).resolve()
    assert os.environ.get("SYMAD_CACHE_DIR") == str(session)
    assert session != users_cache().resolve() and users_cache().resolve() not in session.parents


def test_a_compile_during_the_tests_leaves_the_users_cache_untouched(monkeypatch):
    monkeypatch.setattr(config, "cache", True)  # the module cache on, as outside the tests
    session = Path(config.cache_directory())
    before, session_before = snapshot(users_cache()), snapshot(session)
    # A constant no earlier run used, so the modules are new and must be written somewhere.
    scale = 1.0 + int.from_bytes(os.urandom(4), "little") / 2 ** 40
    F = sd.grad(lambda x, y: np.sin(x * y) * scale + x ** 2, argnums=(0, 1)).trace(0.5, 0.5)
    x = np.linspace(0.1, 1.0, 50)
    for backend in sd.available_backends():  # numba writes its source and machine code too
        dx, _ = F.compile(backend)(x, x)
        np.testing.assert_allclose(dx, x * np.cos(x * x) * scale + 2 * x, rtol=1e-12)
    written = {name for name, _, _ in snapshot(session) - session_before}
    assert written, "the compile wrote nothing to the session's cache"
    # What this compile wrote (files named by digests of this test's new modules) is not in
    # the user's cache. Other files there are other processes' (a benchmark or a second
    # test run on the same machine), which a snapshot of the whole directory took for ours.
    assert not written & {name for name, _, _ in snapshot(users_cache()) - before}


def test_the_default_location_is_the_platforms_user_cache_directory(monkeypatch, tmp_path):
    # Only where it would be: nothing is written.
    monkeypatch.delenv("SYMAD_CACHE_DIR", raising=False)
    monkeypatch.setattr(config, "cache_dir", None)
    assert config.cache_directory() == platformdirs.user_cache_dir("symad", appauthor=False)
    if sys.platform.startswith("linux"):  # the XDG convention platformdirs follows there
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        assert config.cache_directory() == str(tmp_path / "symad")
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "chosen"))
    assert config.cache_directory() == str(tmp_path / "chosen")


@pytest.mark.parametrize("setting", ["environment", "attribute"])
def test_a_configured_directory_is_used(monkeypatch, tmp_path, setting):
    monkeypatch.setattr(config, "cache", True)
    if setting == "environment":
        monkeypatch.setenv("SYMAD_CACHE_DIR", str(tmp_path))
    else:
        monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    scale = 2.0 + int.from_bytes(os.urandom(4), "little") / 2 ** 40
    sd.trace(lambda x: np.cos(x) * scale, 0.0).compile("numexpr")(np.zeros(3))
    assert any((tmp_path / "modules").iterdir())
