"""The autograd package that benchmarks/foreign_suites.py generates to run autograd's tests.

autograd's ``test_pinv`` calls two helpers of autograd's own ``numpy.linalg`` module,
``np.linalg._dot`` and ``np.linalg.T``; the generated ``autograd.numpy.linalg`` looked
names up in symad.numpy.linalg and NumPy's only, so the test stopped at
``AttributeError: _dot`` before it reached a derivative. These tests import the generated
package in a child process (it replaces ``autograd`` on ``sys.path``) and check the helpers'
values, traced and concrete.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.foreign_suites import prepare_autograd

ROOT = Path(__file__).resolve().parents[1]

# Runs in the child: the helpers on concrete arrays (a stack of two 3x2 matrices) and
# inside a traced function, whose gradient is checked against the analytic one.
CHILD = r'''
import numpy
import autograd.numpy as np
import symad as sd

rng = numpy.random.default_rng(0)
x = rng.standard_normal((2, 3, 2))
assert numpy.allclose(np.linalg.T(x), numpy.swapaxes(x, -1, -2))
assert numpy.allclose(np.linalg._dot(np.linalg.T(x), x), numpy.einsum("...ji,...jk->...ik", x, x))
assert numpy.linalg.svd(x) is not None  # NumPy's names are still reached
# sum(x^T x) = sum_j (sum_i x_ji)^2 per matrix: its gradient is 2 sum_k x_jk in row j
f = lambda x: np.sum(np.linalg._dot(np.linalg.T(x), x))
g = sd.grad(f)(x)
expected = 2 * x.sum(axis=-1, keepdims=True) * numpy.ones_like(x)
assert numpy.allclose(g, expected), (g, expected)
# The low-rank pinv of autograd's test_pinv, through the helpers: its jvp against central
# differences (x^T x has rank 2 of 3 for a 2x3 x, kept by every perturbation).
y = rng.standard_normal((2, 3))
v = rng.standard_normal((2, 3))
low_rank = lambda x: np.linalg.pinv(np.linalg._dot(np.linalg.T(x), x))
_, tangent = sd.jvp(low_rank, (y,), (v,))
h = 1e-6
central = (low_rank(y + h * v) - low_rank(y - h * v)) / (2 * h)
assert numpy.allclose(tangent, central, rtol=1e-5, atol=1e-7), numpy.abs(tangent - central).max()
try:
    np.linalg._not_a_helper
except AttributeError:
    pass
else:
    raise AssertionError("an unknown name should raise AttributeError")
print("ok")
'''


def _fake_autograd_source(directory: Path) -> Path:
    """The files prepare_autograd copies from autograd's sdist, empty (none is imported here)."""
    from benchmarks.foreign_suites import AUTOGRAD_FILES

    tests = directory / "source" / "tests"
    tests.mkdir(parents=True)
    for name in [*AUTOGRAD_FILES, "conftest.py", "numpy_utils.py"]:
        (tests / name).write_text("")
    return directory / "source"


def test_autograd_linalg_helpers_of_test_pinv(tmp_path):
    prepare_autograd(_fake_autograd_source(tmp_path), tmp_path / "work", "symad")
    env = dict(os.environ, SYMAD_PROMOTE="0", SYMAD_CACHE="0",
               PYTHONPATH=os.pathsep.join([str(tmp_path / "work" / "shim"), str(ROOT)]))
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
