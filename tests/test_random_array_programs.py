"""Random whole-array programs: values and derivatives against independent references (issue 33).

Each program comes from ``tests/random_programs.py`` (fixed seeds): 1-3 inputs of random
shapes, 0-d to 3-d with many size-1 axes, and up to 8 steps of traced NumPy (broadcasting
arithmetic, elementwise functions, reductions with and without ``axis``/``keepdims``,
``where``, ``einsum``/``@``/``dot``/``tensordot``/``outer``, reshapes, transposes,
``broadcast_to``, slicing, fancy indexing, concatenation, ...), ending in a weighted sum.
symad's value (numexpr and NumPy backends), gradient w.r.t. every input and w.r.t. one,
forward-mode directional derivative, Hessian-vector product (forward over reverse and
reverse over forward, alternately), the vjp of the arrays before the final sum, the dense,
sparse and forward/reverse Jacobians and Hessians of small programs, and the gradient traced
once then evaluated at new inputs and on a batch of two points, are compared with NumPy's
value, the per-element version (``sd.trace(program, *args).expand()``) and central
differences (:class:`tests.random_programs.Checker`). A failing program is shrunk to the
smallest one that fails the same way, and that program's source is the assertion message.

By default the suite checks :data:`QUICK` programs (35-65 s on two cores). Contributors
changing transforms, rules or the array compiler should run thousands::

    python -m pytest tests/test_random_array_programs.py --long -q -p no:cacheprovider

``--long`` (an option of ``tests/conftest.py``) checks :data:`LONG` programs (seeds 0 to
LONG - 1, the quick ones first) and compiles every 20th program's gradient with numba too.
A ``TracingError``/``DifferentiationError`` is a refusal, not a failure, but refusals must
stay rare (:func:`test_refusals_are_rare`).

The table of :data:`EXAMPLES` holds the programs that found issue 33's bugs, each with its
gradient worked out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import symad as sd
from symad.compile.registry import numba_available
from tests.random_programs import Options, check, generate, report, shrink

#: Programs checked by default, and with ``--long``.
QUICK, LONG = 300, 4000
#: Largest share of refusals (SymadError) tolerated among the programs checked.
MAX_REFUSED = 0.03

#: Verdicts of the programs checked in this session, for test_refusals_are_rare.
VERDICTS: dict[int, object] = {}


def pytest_generate_tests(metafunc):
    if "program_seed" in metafunc.fixturenames:
        count = LONG if metafunc.config.getoption("--long", default=False) else QUICK
        metafunc.parametrize("program_seed", range(count))


@pytest.fixture(scope="module")
def long_run(request) -> bool:
    return bool(request.config.getoption("--long", default=False))


def _options(seed: int, long_run: bool) -> Options:
    """Forward-over-reverse and reverse-over-forward Hessian-vector products, alternately;
    in a long run, every 20th program's gradient through numba too (a second per compile)."""
    return Options(hvp_mode="fwd-rev" if seed % 2 == 0 else "rev-fwd",
                   numba=long_run and seed % 20 == 0 and numba_available())


def test_random_program(program_seed, long_run):
    program = generate(program_seed)
    options = _options(program_seed, long_run)
    verdict = check(program, options)
    VERDICTS[program_seed] = verdict
    if verdict.failed:
        shrunk = shrink(program, verdict, lambda candidate: check(candidate, options))
        pytest.fail(f"random program {program_seed} (shrunk from {len(program.steps)} steps): "
                    + report(shrunk.program, shrunk.verdict), pytrace=False)


def test_refusals_are_rare():
    # Runs after the programs above (file order) and reads their verdicts; a session that
    # selected only a few of them has nothing to judge.
    if len(VERDICTS) < 100:
        pytest.skip("too few random programs checked in this session")
    refused = {seed: v for seed, v in VERDICTS.items() if v.status == "refused"}
    listing = "\n".join(f"  {seed}: {v.check}: {v.message[:160]}" for seed, v in refused.items())
    assert len(refused) <= MAX_REFUSED * len(VERDICTS), \
        f"{len(refused)} of {len(VERDICTS)} random programs refused:\n{listing}"


# ---------------------------------------------------------------------------
# The programs that found issue 33's bugs, with their gradients by hand
# ---------------------------------------------------------------------------

WHERE_CONDITION = np.array([1.0, -1.0, 0.5]).reshape(3, 1, 1)
SLAB = np.array([1.0, 0.0, 1.0]).reshape(3, 1, 1) * np.ones((3, 2, 2))  # where x1 > 0

#: name: (function, arguments, gradient w.r.t. every argument). Each broke in symad
#: before the fixes of issue 33 (a wrong number or a crash).
EXAMPLES = {
    # a reduction right after a broadcast: s is repeated twice
    "ones_plus_vector": (lambda s: np.sum(np.ones((2, 3)) + s), (np.ones(3),),
                         (np.full(3, 2.0),)),
    # x1 (1, 7) is repeated 7 times down the rows
    "scaled_sum_of_row_broadcast": (
        lambda x0, x1: np.sum(-0.92 * (x1 + x0)), (np.ones((7, 7)), np.ones((1, 7))),
        (np.full((7, 7), -0.92), np.full((1, 7), -0.92 * 7))),
    # a 0-d x1 beside a (3, 2) array, then a reduction over one axis
    "sum_axis_with_0d": (
        lambda x0, x1: np.sum(0.21 * np.sum(x0 + x1, axis=0)), (np.ones((3, 2)), np.array(0.5)),
        (np.full((3, 2), 0.21), 0.21 * 6)),
    # x0 (3,) runs along q, x1 (2, 3, 1) is repeated along q: 'piq->i' sums over both
    "einsum_piq_of_broadcast": (
        lambda x0, x1: np.sum(np.einsum("piq->i", x1 - x0)),
        (np.linspace(0.1, 0.3, 3), np.linspace(-1, 1, 6).reshape(2, 3, 1)),
        (np.full(3, -6.0), np.full((2, 3, 1), 3.0))),
    # the condition (3, 1, 1) broadcasts against x2 (3, 2, 2); the 0-d x0 fills one slab of 4
    "where_with_column_condition": (
        lambda x0, x1, x2: np.sum(np.where(x1 > 0, x2, x0)),
        (np.array(0.7), WHERE_CONDITION, np.full((3, 2, 2), 0.3)),
        (4.0, np.zeros((3, 1, 1)), SLAB)),
    # a (1, 1, 1) array beside its own 0-d reshape: d/dx sum(sin(2x)) = 2 cos(2x)
    "reshape_to_0d": (
        lambda x0: np.sum(np.sin(x0 + np.reshape(x0, ()))), (np.full((1, 1, 1), 0.3),),
        (np.full((1, 1, 1), 2 * np.cos(0.6)),)),
    # a sum of more than 64 terms
    "concatenate_65_copies": (lambda x: np.sum(np.concatenate([x] * 65)), (np.array([0.5, -1.0]),),
                              (np.full(2, 65.0),)),
    # broadcast_to repeats x (3, 1) 6 times, and so does the addition of x
    "broadcast_to_plus_itself": (
        lambda x: np.sum(np.broadcast_to(x, (2, 3, 3)) + x), (np.array([[0.3], [-0.5], [0.8]]),),
        (np.full((3, 1), 12.0),)),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_issue_33_examples(name):
    function, args, expected = EXAMPLES[name]
    gradients = sd.grad(function, argnums=tuple(range(len(args))))(*args)
    for position, (got, want) in enumerate(zip(gradients, expected)):
        assert np.shape(got) == np.shape(args[position])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name}: gradient w.r.t. argument {position}")


def test_issue_33_vjp_of_operands_with_and_without_a_leading_axis():
    # (2,) + (1, 2): the cotangent of the (2,) operand drops the leading axis it lacks
    out, vjp_function = sd.vjp(lambda a, b: a + b, np.zeros(2), np.zeros((1, 2)))
    assert out.shape == (1, 2)
    cotangent_a, cotangent_b = vjp_function(np.array([[1.0, 2.0]]))
    np.testing.assert_array_equal(cotangent_a, [1.0, 2.0])
    np.testing.assert_array_equal(cotangent_b, [[1.0, 2.0]])


#: Programs whose gradient, traced once and called on a batch of points, mixed the points
#: (numexpr wrote a total into a slice's cotangent without the sum's axes behind the
#: points axis): the wrong numbers when the batch was as long as the array.
BATCHED = {
    "total_times_flip": (lambda x: np.sum(np.mean(x) * np.flip(x, axis=-1)),
                         np.array([0.5, -0.8]), np.array([1.1, 0.3])),
    "slice_over_its_product": (lambda x: np.sum(x[None] / (2.0 * x)) + np.sum(x ** 2),
                               np.array([0.5]), np.array([0.7])),
    "minimum_of_totals_plus_a_slice": (
        lambda x: np.minimum(np.sum(x), 2 * np.sum(x)) + np.sum(x[0:1:2]),
        np.array([0.5]), np.array([0.7])),
}


@pytest.mark.parametrize("backend", sd.available_backends())
@pytest.mark.parametrize("name", list(BATCHED))
def test_batched_gradients_keep_their_points_apart(name, backend):
    function, x, y = BATCHED[name]
    gradient = sd.grad(function).trace(x).compile(backend)
    batch = gradient(np.stack([x, y]))
    np.testing.assert_allclose(batch, np.stack([sd.grad(function)(x), sd.grad(function)(y)]),
                               rtol=1e-13, atol=1e-15)
