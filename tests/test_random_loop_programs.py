"""Random loop programs: sd.fori_loop / sd.scan against the unrolled Python loop (issue 30).

Each program comes from ``tests/random_loops.py`` (fixed seeds): a ``fori`` or ``scan``
loop of 0, 1, 2, 3, 7 or 40 steps (scans forward and ``reverse``, over 0-d steps, size-1
axes and several arrays, ys returned or ignored), carrying a scalar, a small array, an
array of more than 256 elements or a tuple/dict of them (complex leaves now and then), a
body in the array vocabulary of ``tests/random_programs.py`` that reads outer values and
sometimes runs inside an inner loop, under every ``checkpoints=`` schedule. The loop
version's value, gradient w.r.t. every argument (also against central differences), jvp,
vjp, Hessian (small programs), vmap of the gradient over 2-3 points and the traced
gradient on a batch are compared with the same program run with plain Python loops
(which unroll). A failing program is shrunk, and its source is the assertion message.

By default the suite checks :data:`QUICK` programs; contributors changing loops run::

    python -m pytest tests/test_random_loop_programs.py --long -q -p no:cacheprovider

``--long`` (an option of ``tests/conftest.py``) checks :data:`LONG` programs. A
``SymadError`` is a refusal, not a failure, but refusals must stay rare.
"""

from __future__ import annotations

import pytest

from tests.random_loops import check, generate, report, shrink

#: Programs checked by default, and with ``--long``.
QUICK, LONG = 150, 3000
#: Largest share of refusals (SymadError) tolerated among the programs checked.
MAX_REFUSED = 0.03

#: Verdicts of the programs checked in this session, for test_refusals_are_rare.
VERDICTS: dict[int, object] = {}


def pytest_generate_tests(metafunc):
    if "loop_seed" in metafunc.fixturenames:
        count = LONG if metafunc.config.getoption("--long", default=False) else QUICK
        metafunc.parametrize("loop_seed", range(count))


def test_random_loop_program(loop_seed):
    program = generate(loop_seed)
    verdict = check(program)
    VERDICTS[loop_seed] = verdict
    if verdict.failed:
        shrunk = shrink(program, verdict)
        pytest.fail(f"random loop program {loop_seed}: " + report(shrunk.program, shrunk.verdict),
                    pytrace=False)


def test_refusals_are_rare():
    # Runs after the programs above (file order) and reads their verdicts.
    if len(VERDICTS) < 100:
        pytest.skip("too few random loop programs checked in this session")
    refused = {seed: v for seed, v in VERDICTS.items() if v.status == "refused"}
    listing = "\n".join(f"  {seed}: {v.check}: {v.message[:160]}" for seed, v in refused.items())
    assert len(refused) <= MAX_REFUSED * len(VERDICTS), \
        f"{len(refused)} of {len(VERDICTS)} random loop programs refused:\n{listing}"
