"""Sorting as array primitives (issue 29): the value and the gradient of ``sum(sort(x) * w)``
through symad beside NumPy, in one run.

Peers: ``np.sort`` alone, NumPy's value, and NumPy's gradient written by hand (an argsort
and a scatter of ``w``). symad's functions are traced and compiled before timing (the
default backend); each figure is the best of 7 rounds, in milliseconds per call. Run from
the project root::

    SYMAD_CACHE=0 python benchmarks/sorting.py 100 1000 100000
"""

import sys
import timeit

import numpy as np

import symad as sd


def measure(n: int) -> dict:
    """Milliseconds per call of each peer at ``n`` elements."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(n), rng.standard_normal(n)
    value = sd.trace(lambda v: np.sum(np.sort(v) * w), x)
    gradient = sd.grad(lambda v: np.sum(np.sort(v) * w)).trace(x)
    value(x), gradient(x)  # compiled before timing
    number = max(1, 20000 // n)

    def numpy_gradient():
        out = np.empty_like(x)
        out[np.argsort(x, kind="stable")] = w
        return out

    peers = {"np.sort": lambda: np.sort(x, kind="stable"),
             "numpy value": lambda: np.sum(np.sort(x, kind="stable") * w),
             "numpy gradient": numpy_gradient,
             "symad value": lambda: value(x), "symad gradient": lambda: gradient(x)}
    return {name: min(timeit.repeat(call, number=number, repeat=7)) / number * 1e3
            for name, call in peers.items()}


if __name__ == "__main__":
    for size in [int(a) for a in sys.argv[1:]] or [100, 1000, 100000]:
        t = measure(size)
        print(f"n={size}: " + ", ".join(f"{k} {v:.4f} ms" for k, v in t.items())
              + f" | symad value / numpy value {t['symad value'] / t['numpy value']:.2f}x,"
                f" symad gradient / numpy gradient {t['symad gradient'] / t['numpy gradient']:.2f}x")
