"""symad in one screen: a gradient, its formula and its LaTeX from one call.

Run with ``python examples/demo.py``.
"""

import numpy as np

import symad as sd


def f(x1, x2):
    return np.log(x1) + x1 * x2 - np.sin(x2)


gradient = sd.grad(f, argnums=(0, 1))

# 1. Numbers: the gradient at one point, and over a batch of a million points.
print("grad f(2, 5)         =", tuple(float(g) for g in gradient(2.0, 5.0)))

traced = gradient.trace(2.0, 5.0)  # the same gradient as a traced Function
xs = np.linspace(1.0, 2.0, 1_000_000)
ys = np.linspace(0.0, 1.0, 1_000_000)
d_dx1, d_dx2 = traced(xs, ys)
print("batch of 10**6 points:", d_dx1.shape, "max |error| =",
      float(np.max(np.abs(d_dx1 - (1 / xs + ys)))))

# 2. The formula, as SymPy expressions (shared subexpressions inlined).
print("formula              =", traced.formula())

# 3. The LaTeX, ready for a paper.
print("LaTeX:")
print(traced.latex())

# 4. Higher orders by recursion: the 3rd derivative of sin on a grid is -cos.
grid = np.linspace(0.0, 3.0, 4)
print("d^3/dx^3 sin(x)      =", sd.derivative(np.sin, 3)(grid))
print("-cos(x)              =", -np.cos(grid))
