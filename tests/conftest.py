"""Shared test set-up: every test starts from the same random state."""

import os
import random

import numpy as np
import pytest

# Tests change the compiler's knobs (region sizes, probes) and look at what it generates:
# no module from an earlier test or run may stand in for it. The tests of the on-disk
# module cache turn it on, in a directory of their own (tests/test_disk_cache.py); the
# setting reaches the subprocesses tests start.
os.environ["SYMAD_CACHE"] = "0"
# F(...) moves a hot function from numexpr to numba when that proves faster, by timing
# (symad.compile.tiers): tests must not depend on how fast this machine is, so the suite
# runs with promotion off, and tests/test_tiers.py turns it on where it is the subject.
os.environ["SYMAD_PROMOTE"] = "0"


def pytest_addoption(parser):
    """``--long``: the long runs of randomized tests (tests/test_random_array_programs.py)."""
    parser.addoption("--long", action="store_true", default=False,
                     help="check thousands of random array programs instead of a few hundred")


@pytest.fixture(autouse=True)
def _seed_random_generators():
    random.seed(0)
    np.random.seed(0)  # legacy global generator, for code that still uses it
    yield


# ---------------------------------------------------------------------------
# Every LaTeX string the suite exports is rendered by KaTeX at the end
# (tests/test_katex.py::test_every_latex_string_the_suite_exported_renders).
# ---------------------------------------------------------------------------

EXPORTED_LATEX: list[str] = []  # in the order exported, duplicates dropped when rendered
KATEX_SUITE_TEST = "test_every_latex_string_the_suite_exported_renders"


def _record_latex(text: str) -> None:
    EXPORTED_LATEX.append(text)


@pytest.fixture(autouse=True, scope="session")
def _record_exported_latex():
    """Wrap the one function every LaTeX export goes through, and record what it returns."""
    import functools

    import symad.export.latex as module

    original = module.function_latex

    @functools.wraps(original)
    def recording(*args, **kwargs):
        text = original(*args, **kwargs)
        _record_latex(text)
        return text

    module.function_latex = recording
    yield
    module.function_latex = original


@pytest.fixture
def record_latex():
    """For LaTeX exported in a subprocess (an example script): record it for KaTeX too."""
    return _record_latex


@pytest.fixture
def exported_latex():
    return EXPORTED_LATEX


def pytest_collection_modifyitems(session, config, items):
    """The KaTeX check of everything exported runs last, after every other test exported."""
    last = [item for item in items if item.name == KATEX_SUITE_TEST]
    items[:] = [item for item in items if item.name != KATEX_SUITE_TEST] + last


@pytest.fixture(scope="session")
def softsign_primitive():
    """The SPEC's example of a custom primitive, softsign(x) = x / (1 + |x|), with its partial."""
    import symad as sd

    @sd.primitive
    def softsign(x):
        return x / (1 + np.abs(x))

    @softsign.defpartials
    def _(x):
        return (1 / (1 + abs(x)) ** 2,)

    return softsign
