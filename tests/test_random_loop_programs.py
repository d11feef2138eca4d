"""Random loop programs: sd.fori_loop / sd.scan against the unrolled Python loop (issue 30).

Each program comes from ``tests/random_loops.py`` (fixed seeds): a ``fori`` or ``scan``
loop of 0, 1, 2, 3, 7 or 40 steps (scans forward and ``reverse``, over 0-d steps, size-1
axes and several arrays, ys returned or ignored), carrying a scalar, a small array, an
array of more than 256 elements or a tuple/dict of them (complex leaves now and then), a
body in the array vocabulary of ``tests/random_programs.py`` that reads outer values and
sometimes runs inside an inner loop, under every ``checkpoints=`` schedule. The loop
version's value, gradient w.r.t. every argument (also against central differences), jvp,
vjp, Hessian (small programs), vmap of the gradient over 2-3 points and the traced
gradient on a batch (by default one group of these per program, in turn; all with
``--long``) are compared with the same program run with plain Python loops
(which unroll). A failing program is shrunk, and its source is the assertion message.

By default the suite checks :data:`QUICK` programs; contributors changing loops run::

    python -m pytest tests/test_random_loop_programs.py --long -q -p no:cacheprovider

``--long`` (an option of ``tests/conftest.py``) checks :data:`LONG` programs. A
``SymadError`` is a refusal, not a failure, but refusals must stay rare.
"""

from __future__ import annotations

import pytest

from tests.random_loops import GROUPS, check, generate, report, shrink

#: Programs checked by default (about 60 s on the 2-core box, 2026-11-29), and with ``--long``.
QUICK, LONG = 80, 3000
#: Largest share of refusals (SymadError) tolerated among the programs checked.
MAX_REFUSED = 0.03
#: Candidates the shrinker checks for a failing program.
SHRINK_BUDGET = 80

#: Verdicts of the programs checked in this session, for test_refusals_are_rare.
VERDICTS: dict[int, object] = {}


def pytest_generate_tests(metafunc):
    if "loop_seed" in metafunc.fixturenames:
        count = LONG if metafunc.config.getoption("--long", default=False) else QUICK
        metafunc.parametrize("loop_seed", range(count))


@pytest.fixture(scope="module")
def long_run(request) -> bool:
    return bool(request.config.getoption("--long", default=False))


def test_random_loop_program(loop_seed, long_run):
    program = generate(loop_seed)
    # Every comparison in a long run; in the suite's share, values, gradients and central
    # differences, then one group of the others in turn (each group every third program),
    # so that the suite's share stays near a minute.
    groups = GROUPS if long_run else (GROUPS[loop_seed % len(GROUPS)],)
    verdict = check(program, groups=groups)
    VERDICTS[loop_seed] = verdict
    if verdict.failed:
        # a bounded shrink: each candidate costs a full check (about a second under load)
        shrunk = shrink(program, verdict, budget=SHRINK_BUDGET)
        pytest.fail(f"random loop program {loop_seed}: " + report(shrunk.program, shrunk.verdict),
                    pytrace=False)


def test_refusals_are_rare():
    # Runs after the programs above (file order) and reads their verdicts: those of its own
    # process, about half of them under the suite's two xdist workers (70 skipped it there).
    if len(VERDICTS) < QUICK // 4:
        pytest.skip("too few random loop programs checked in this session")
    refused = {seed: v for seed, v in VERDICTS.items() if v.status == "refused"}
    listing = "\n".join(f"  {seed}: {v.check}: {v.message[:160]}" for seed, v in refused.items())
    assert len(refused) <= MAX_REFUSED * len(VERDICTS), \
        f"{len(refused)} of {len(VERDICTS)} random loop programs refused:\n{listing}"
