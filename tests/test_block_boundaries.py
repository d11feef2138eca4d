"""Every point of a batch that spans several blocks, compared with NumPy.

The generated modules cut a batch into pieces: blocks of ``BLOCK_SIZE`` points
(symad/compile/scalar/source.py), strided columns staged 4,096 rows at a time, numba's
chunks of 4,096 points, array programs' blocks of points (symad/compile/arrays/),
and the blocks of each thread. A piece boundary off by one leaves one point per piece
unwritten: ``np.empty`` memory comes back at points 4095, 8191, ... while a spot check
of a few points, or a batch shorter than a block, passes. So these tests use strided,
non-contiguous column views (``X[:, 0]``, the layout of a batch of vectors, which is
staged) of 3 x 4096 + 17 points, with every backend, the default options, small blocks
and two threads, and compare *every* point.

Before the call under test, each evaluator runs once on other data, so memory it frees
and gets back holds other values, not the right answers of an earlier identical call.
"""

from __future__ import annotations

import numpy as np
import pytest

import symad as sd

POINTS = 3 * 4096 + 17
#: compile options: the defaults, blocks of 4,096 points (several per batch) and two threads
#: (each with its own blocks; a thread pays off from 4,096 points each).
OPTIONS = {"default": {}, "block-4096": {"block_size": 4096}, "threads-2": {"num_threads": 2}}
BACKENDS = sd.available_backends()
#: Values and derivatives here are of order 1; a derivative that crosses zero is compared
#: to ATOL (rounding of its order-1 terms), not to its own tiny size. An unwritten point
#: holds another value altogether.
RTOL, ATOL = 1e-12, 1e-12


def columns(seed: int, width: int) -> np.ndarray:
    """A C-ordered (POINTS, width) matrix: each column ``X[:, k]`` is a strided view."""
    return np.random.default_rng(seed).uniform(0.5, 2.0, (POINTS, width))


def assert_every_point_equal(got, want, what: str):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, what
    wrong = np.flatnonzero(~np.isclose(got, want, rtol=RTOL, atol=ATOL).reshape(got.shape[0], -1)
                           .all(axis=1))
    assert wrong.size == 0, (f"{what}: {wrong.size} of {got.shape[0]} points differ from NumPy, "
                             f"the first at {wrong[:8].tolist()}")


# ---------------------------------------------------------------------------
# A scalar function and its gradient, on two strided columns
# ---------------------------------------------------------------------------


def scalar(x, y):
    # Never zero on [0.5, 2]^2, so a point left as fresh (zeroed) memory shows too.
    return np.sin(x * y) * np.exp(-y) + x / (1 + y ** 2) + 2.0


def scalar_gradient(x, y):
    s, c, e = np.sin(x * y), np.cos(x * y), np.exp(-y)
    d = 1 + y ** 2
    return y * c * e + 1 / d, x * c * e - s * e - 2 * x * y / d ** 2


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scalar_function_and_its_gradient_on_strided_columns(backend, options):
    F = sd.trace(scalar, 0.0, 0.0)
    G = sd.grad(scalar, argnums=(0, 1)).trace(0.0, 0.0)
    f, g = F.compile(backend, **options), G.compile(backend, **options)
    other = columns(1, 3)
    f(other[:, 0], other[:, 1]), g(other[:, 0], other[:, 1])
    X = columns(2, 3)
    x, y = X[:, 0], X[:, 1]
    assert not x.flags.c_contiguous
    assert_every_point_equal(f(x, y), scalar(x.copy(), y.copy()), f"{backend} value")
    for got, want, name in zip(g(x, y), scalar_gradient(x.copy(), y.copy()), "xy"):
        assert_every_point_equal(got, want, f"{backend} d/d{name}")


def test_the_default_call_on_strided_columns():
    # F(...) without compile: the tier the function is at (numexpr in the test session).
    F = sd.trace(scalar, 0.0, 0.0)
    other = columns(3, 2)
    F(other[:, 0], other[:, 1])
    X = columns(4, 2)
    assert_every_point_equal(F(X[:, 0], X[:, 1]), scalar(X[:, 0].copy(), X[:, 1].copy()),
                             "F(...)")


# ---------------------------------------------------------------------------
# Array programs: one strided vector of POINTS elements, and a batch of POINTS vectors
# ---------------------------------------------------------------------------


def wave(v):
    # Whole-array operations: one node each, however long v is.
    return np.sin(v) * np.exp(-v ** 2) + v[::-1] / (1 + v ** 2) + 2.0


def energy(v):
    return np.sum(np.sin(v) * np.exp(-v ** 2))


def energy_gradient(v):
    return (np.cos(v) - 2 * v * np.sin(v)) * np.exp(-v ** 2)


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_array_program_and_its_gradient_on_a_strided_vector(backend, options):
    template = np.zeros(POINTS)
    W = sd.trace(wave, template)
    G = sd.grad(energy).trace(template)
    w, g = W.compile(backend, **options), G.compile(backend, **options)
    other = columns(5, 2)[:, 1]
    w(other), g(other)
    v = columns(6, 2)[:, 0]
    assert not v.flags.c_contiguous
    # Element i of the output is "point" i here: compare them as rows of one column.
    assert_every_point_equal(w(v)[:, None], wave(v.copy())[:, None], f"{backend} wave")
    assert_every_point_equal(g(v)[:, None], energy_gradient(v.copy())[:, None],
                             f"{backend} gradient of energy")


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_array_program_and_its_gradient_on_a_batch_of_strided_rows(backend, options):
    # Traced for one vector of 3; called on POINTS of them, every other column of a
    # (POINTS, 6) matrix: neither rows nor columns are contiguous.
    W = sd.trace(wave, np.zeros(3))
    G = sd.grad(energy).trace(np.zeros(3))
    w, g = W.compile(backend, **options), G.compile(backend, **options)
    other = columns(7, 6)[:, ::2]
    w(other), g(other)
    V = columns(8, 6)[:, ::2]
    want_wave = np.stack([wave(row) for row in V.copy()])
    assert_every_point_equal(w(V), want_wave, f"{backend} wave")
    assert_every_point_equal(g(V), energy_gradient(V.copy()), f"{backend} gradient of energy")
