"""Binomial checkpointing, ``checkpoints=("binomial", s[, block])`` (issue 30's revolve schedule).

The schedule is checked as data (every block reversed once, last first; at most ``s``
carries held besides the first; no block run forward more than the binomial bound, which
is the least possible); the node's values against the store-all adjoint and the unrolled
Python loop for every test program, every block length, batches, vmap and a second order;
its memory against what the store-all trajectory would take.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import symad as sd
from symad.loops import binomial, evaluation
from symad.loops.binomial import repetitions, reverse_blocks
from tests.test_loop_primitives import LOOPS, PROGRAMS, TRANSFORMS, _both, _close


def _pair(name, n, checkpoints):
    """One program (its random data drawn once) as a loop by the binomial schedule and as a
    loop storing its trajectory, and its arguments."""
    program, args = PROGRAMS[name](n)
    return (lambda *a: program(*LOOPS["primitive"], checkpoints, *a),
            lambda *a: program(*LOOPS["primitive"], None, *a), args)


def _run_schedule(count: int, snapshots: int) -> tuple[list, int, dict]:
    """The schedule's reversals in order, the most carries held at once, and how often each
    block ran forward; the carries are the block numbers they stand before."""
    reversed_blocks, advanced = [], {}
    held = {"now": 0, "most": 0}

    class Carry(int):  # a carry that counts itself held while some frame keeps it
        def __new__(cls, block):
            held["now"] += 1
            held["most"] = max(held["most"], held["now"])
            return super().__new__(cls, block)

        def __del__(self):
            held["now"] -= 1

    def advance(carry, first, end):
        assert carry == first < end <= count
        for block in range(first, end):
            advanced[block] = advanced.get(block, 0) + 1
        return Carry(end)

    def reverse(carry, first):
        assert carry == first
        reversed_blocks.append(first)

    start = Carry(0)
    reverse_blocks(start, count, snapshots, advance, reverse)
    return reversed_blocks, held["most"] - 1, advanced


@pytest.mark.parametrize("snapshots", [1, 2, 3, 5, 8])
def test_the_schedule_reverses_every_block_once_within_its_bounds(snapshots):
    for count in list(range(1, 80)) + [200, 1000]:
        order, most_held, advanced = _run_schedule(count, snapshots)
        assert order == list(range(count - 1, -1, -1))
        assert most_held <= snapshots
        t = repetitions(count, snapshots)
        assert max(advanced.values(), default=0) <= t
        # t is the least possible: C(s + t - 1, t - 1) blocks are the most t - 1 runs reverse.
        assert t == 0 or math.comb(snapshots + t - 1, t - 1) < count


def test_the_schedule_with_one_snapshot_is_the_quadratic_one():
    order, most_held, advanced = _run_schedule(6, 1)
    assert most_held == 1 and advanced == {0: 5, 1: 4, 2: 3, 3: 2, 4: 1}


# The step counts with the options that matter at them (0 and 1 step: one block, whatever
# the options; 7: one snapshot, several, blocks of 2 not dividing 7, a block longer than 7).
STEPS_AND_OPTIONS = [(0, ("binomial", 1)), (1, ("binomial", 2)), (7, ("binomial", 1)),
                     (7, ("binomial", 3, 2)), (7, ("binomial", 2, 100))]


@pytest.mark.parametrize("n,checkpoints", STEPS_AND_OPTIONS, ids=str)
@pytest.mark.parametrize("transform", ["grad", "jacrev", "vjp", "hessian"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_binomial_reverse_mode_matches_the_unrolled_loop(name, n, transform, checkpoints):
    loop, unrolled, args = _both(name, n, checkpoints)
    _close(TRANSFORMS[transform](loop)(*args), TRANSFORMS[transform](unrolled)(*args), 1e-10)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_batch_of_points_and_vmap(name):
    loop, stored, args = _pair(name, 9, ("binomial", 2, 2))
    batch = [np.stack([np.asarray(a, dtype=float) * s for s in (1.0, 0.9, 1.1)]) for a in args]
    grad = lambda f: sd.grad(f, argnums=(0, 1))  # noqa: E731
    _close(sd.vmap(grad(loop))(*batch), sd.vmap(grad(stored))(*batch), 1e-12)
    G, H = grad(loop).trace(*args), grad(stored).trace(*args)
    _close(G(*batch), H(*batch), 1e-12)


@pytest.mark.parametrize("compiled", [True, False], ids=["kernel", "numpy-steps"])
def test_the_node_equals_the_store_all_adjoint_at_a_thousand_steps(compiled, monkeypatch):
    if not compiled:  # one NumPy evaluation per step, for every window the schedule runs
        monkeypatch.setattr(evaluation, "compiled_window", lambda *arguments: None)
    loop, stored, args = _pair("pendulum", 1000, ("binomial", 3))
    _close(sd.grad(loop, argnums=(0, 1))(*args), sd.grad(stored, argnums=(0, 1))(*args), 1e-13)


def test_formulas_are_the_store_all_adjoints():
    # The recurrences printed are the same; the binomial node's application reads the initial
    # carry where the store-all adjoint reads the stored trajectory.
    loop, stored, args = _pair("pendulum", 50, ("binomial", 3))
    G, H = sd.grad(loop, argnums=(0, 1)).trace(*args), sd.grad(stored, argnums=(0, 1)).trace(*args)
    recurrences = [F.latex()[F.latex().index("& \\mathrm"):] for F in (G, H)]
    assert recurrences[0] == recurrences[1] and "adjoint(body)" in recurrences[0]
    assert [str(o).split(")[")[0] for o in G.formula()] == [str(o).split(")[")[0] for o in H.formula()]
    # One node and no trajectory loop: the schedule runs the forward steps it needs itself.
    assert G.stats()["operations"]["binomial_adjoint"] == 1 and "loop" not in G.stats()["operations"]
    assert H.stats()["operations"]["loop"] == 2


def test_memory_is_the_snapshots_not_the_trajectory():
    # A 400-element state over 4,000 steps: the trajectory is 12.8 MB; the schedule keeps
    # 4 snapshots and one block of 4,000/1,024 -> 4 steps' carries.
    w = np.linspace(-1.0, 1.0, 400)

    def make(checkpoints):
        def f(a):
            body = lambda i, v: v + 1e-3 * (a * np.sin(v) - v * w)  # noqa: E731
            return np.sum(sd.fori_loop(0, 4000, body, np.ones(400), checkpoints=checkpoints) ** 2)
        return sd.grad(f).trace(0.3)

    binomial_gradient, stored_gradient = make(("binomial", 4)), make(None)
    peaks = []
    for G in (binomial_gradient, stored_gradient):
        G(0.3)  # compiled kernels made and loaded outside the measurement
        tracemalloc.start()
        value = G(0.3)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        peaks.append(value)
    assert abs(peaks[1] - peaks[3]) <= 1e-12 * abs(peaks[3])
    assert peaks[2] > 12_000_000 and peaks[0] < 1_000_000, peaks


def test_block_length_and_repetitions():
    from symad.loops.spec import LoopSpec

    def spec(n, options):
        return LoopSpec(None, n, 0, False, [()], [], [], [], "f", checkpoints=options)

    assert binomial.block_length(spec(10**6, ("binomial", 3))) == math.ceil(10**6 / binomial.MAX_BLOCKS)
    assert binomial.block_length(spec(10**6, ("binomial", 3, 50))) == 50
    assert binomial.block_length(spec(7, ("binomial", 3))) == 1
    assert [repetitions(n, 2) for n in (1, 2, 3, 4, 6, 7, 10, 11)] == [0, 1, 1, 2, 2, 3, 3, 4]


@pytest.mark.parametrize("bad", [("binomial",), ("binomial", 0), ("binomial", 2, 0),
                                 ("binomial", 2.5), ("binomial", True), ("binomial", 2, 3, 4)],
                         ids=str)
def test_bad_options_are_refused_naming_the_loop(bad):
    with pytest.raises(ValueError, match=r"fori_loop\(<lambda>\): checkpoints=.*'binomial', s"):
        sd.fori_loop(0, 3, lambda i, y: y * 2.0, 1.0, checkpoints=bad)


def test_scan_takes_it_too():
    f = lambda x: sd.scan(lambda c, v: (c * 0.9 + v * x, c), 0.0, np.arange(20.0),  # noqa: E731
                          checkpoints=("binomial", 2))[0]
    g = lambda x: sd.scan(lambda c, v: (c * 0.9 + v * x, c), 0.0, np.arange(20.0))[0]  # noqa: E731
    assert sd.grad(f)(1.5) == pytest.approx(sd.grad(g)(1.5), rel=1e-14)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("block", [1, 3, 40])
def test_cotangents_of_the_scanned_arrays(reverse, block):
    xs = (np.linspace(-1.0, 1.0, 23), np.cos(np.arange(46.0)).reshape(23, 2))

    def make(checkpoints):
        def f(x0, x1, c0):
            def step(c, x):
                c = np.tanh(c * 0.9 + x[0] * x[1])
                return c, np.sum(c) * x[0]
            carry, ys = sd.scan(step, c0, (x0, x1), reverse=reverse, checkpoints=checkpoints)
            return np.sum(carry ** 2) + np.sum(ys * np.arange(23.0))
        return sd.grad(f, argnums=(0, 1, 2))

    point = xs + (np.array([0.2, -0.4]),)
    _close(make(("binomial", 2, block))(*point), make(None)(*point), 1e-12)


def test_one_traced_gradient_differentiated_by_several_transforms():
    # The store-all form a second order differentiates is recorded in each transform's own
    # graph: a traced gradient taken apart by jacfwd, then jacrev, then jacfwd again (each
    # a new graph over the same binomial node) gives the stored Hessian every time.
    loop, stored, args = _pair("pendulum", 13, ("binomial", 2, 3))
    G, H = (sd.grad(f, argnums=(0, 1)).trace(*args) for f in (loop, stored))
    for transform in (sd.jacfwd, sd.jacrev, sd.jacfwd, sd.jacrev):
        _close(transform(G, argnums=(0, 1))(*args), transform(H, argnums=(0, 1))(*args), 1e-12)


@pytest.mark.parametrize("checkpoints", [None, ("binomial", 2, 3)], ids=str)
def test_grad_of_vmap_over_a_loop(checkpoints):
    # vmap inside a trace records the loop once for the mapped axis: the loop node's operand
    # shapes are the mapped ones (they were the traced point's: a crash at evaluation).
    loop, _, args = _pair("pendulum", 5, checkpoints)
    scales = np.array([1.0, 1.2])

    def mapped(k, c):
        return np.sum(sd.vmap(loop, in_axes=(0, None))(k * scales, c) * scales)

    def summed(k, c):
        return sum(loop(k * s, c) * s for s in scales)

    _close(sd.grad(mapped, argnums=(0, 1))(*args), sd.grad(summed, argnums=(0, 1))(*args), 1e-12)
    # Forward over reverse: the Jacobian's seeds go in front of the mapped axis, not beside it.
    _close(sd.hessian(mapped, argnums=(0, 1))(*args), sd.hessian(summed, argnums=(0, 1))(*args), 1e-12)
    F, points = sd.trace(mapped, *args), (np.array([2.0, 1.5]), np.array([0.3, 0.1]))
    _close(F(*points), np.array([summed(k, c) for k, c in zip(*points)]), 1e-12)


@pytest.mark.parametrize("checkpoints", [None, ("binomial", 2, 2)], ids=str)
def test_grad_of_vmap_over_a_scan_of_stacked_outputs(checkpoints):
    # The stacked ys are reshaped out of the loop's value: under vmap in a trace the reshape
    # has the mapped axis in front, which its transpose keeps in front (it reshaped it away).
    xs = np.cos(np.arange(18.0)).reshape(6, 3)

    def f(v, s):
        c, ys = sd.scan(lambda c, x: (np.tanh(c * s + x * v), c * v), v, xs, reverse=True,
                        checkpoints=checkpoints)
        return np.sum(c ** 2) + np.sum(ys * xs) + np.sum(np.broadcast_to(v, (2, 3)) * xs[:2])

    V = np.stack([np.linspace(-0.5, 0.5, 3) * s for s in (1.0, 0.5, -1.2, 2.0)])
    mapped = lambda V, s: np.sum(sd.vmap(f, in_axes=(0, None))(V, s) ** 2)  # noqa: E731
    summed = lambda V, s: sum(f(V[i], s) ** 2 for i in range(4))  # noqa: E731
    _close(sd.grad(mapped, argnums=(0, 1))(V, 0.7), sd.grad(summed, argnums=(0, 1))(V, 0.7), 1e-12)


def test_more_snapshots_than_python_recursion_allows():
    # With as many snapshots as blocks the schedule keeps a carry before every block: 2,000
    # carries held at once, deeper than Python's recursion limit (the schedule keeps them in
    # a list of its own, not in the call stack).
    order, most_held, advanced = _run_schedule(2000, 5000)
    assert order == list(range(1999, -1, -1)) and most_held == 1999
    assert max(advanced.values()) == 1
    f = lambda checkpoints: lambda k: sd.fori_loop(  # noqa: E731
        0, 3000, lambda i, y: y - 1e-3 * k * y, 1.0, checkpoints=checkpoints)
    assert sd.grad(f(("binomial", 2000)))(0.3) == pytest.approx(sd.grad(f(None))(0.3), rel=1e-13)


def test_views_of_a_gradient_holding_the_node():
    # What a Function offers beside its value: formulas and stats work, pickling keeps the
    # value, and the views with no form for a loop say so and why.
    import pickle

    from symad.errors import ExportError, SymadError

    loop, stored, args = _pair("scan_several_xs", 9, ("binomial", 2, 2))
    G = sd.grad(loop, argnums=(0, 1)).trace(*args)
    _close(pickle.loads(pickle.dumps(G))(*args), sd.grad(stored, argnums=(0, 1))(*args), 1e-13)
    assert "binomial_adjoint" in G.stats()["operations"] and G.latex() and G.formula()
    with pytest.raises(SymadError, match="'(loop|binomial_adjoint)': a loop: the sparsity"):
        G.sparsity()
    with pytest.raises(ExportError, match="binomial_adjoint"):
        G.to_c()
