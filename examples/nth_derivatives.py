"""Hermite polynomials from derivatives of exp(-x^2), checked against NumPy.

Run:  python examples/nth_derivatives.py [--max-order N] [--points M]

Rodrigues' formula gives the physicists' Hermite polynomials as derivatives,

    H_n(x) = (-1)^n exp(x^2) d^n/dx^n exp(-x^2),

so a differentiation tool that is exact at high order reproduces
``numpy.polynomial.hermite``. symad's Taylor mode computes every order up to
N in one sweep (``sd.taylor(..., derivatives=True)``); ``sd.derivative``
gives one order, and its traced Function has a formula. The script prints,
for each order, the largest error relative to max |H_n| on the grid, and
exits with status 1 if any exceeds 1e-10.
"""

import argparse
import sys
import time

import numpy as np
import sympy
from numpy.polynomial import hermite

import symad as sd


def gaussian(x):
    return np.exp(-x ** 2)


def hermite_by_derivatives(max_order: int, x: np.ndarray) -> list[np.ndarray]:
    """H_0..H_max_order on x, from one Taylor-mode sweep over exp(-x^2)."""
    derivatives = sd.taylor(gaussian, max_order, derivatives=True)(x)
    weight = np.exp(x ** 2)
    return [(-1) ** n * weight * d for n, d in enumerate(derivatives)]


def main(max_order: int, points: int) -> int:
    x = np.linspace(-3.0, 3.0, points)
    start = time.perf_counter()
    ours = hermite_by_derivatives(max_order, x)
    seconds = time.perf_counter() - start
    print(f"H_0..H_{max_order} on {points:,} points in {seconds:.2f} s (one Taylor-mode sweep)")
    print(" n | max |H_n| on [-3, 3] | relative error vs numpy.polynomial.hermite")
    worst = 0.0
    for n, values in enumerate(ours):
        reference = hermite.hermval(x, [0.0] * n + [1.0])
        scale = np.max(np.abs(reference))
        error = np.max(np.abs(values - reference)) / scale
        worst = max(worst, error)
        print(f"{n:2d} | {scale:20.6g} | {error:.1e}")

    # One order on its own, as a formula: d^4/dx^4 exp(-x^2) = (16x^4 - 48x^2 + 12) exp(-x^2).
    formula = sd.derivative(gaussian, 4).trace(0.0).formula()
    symbol = sympy.Symbol("x")
    polynomial = sympy.Poly(sympy.expand(sympy.simplify(formula * sympy.exp(symbol ** 2))), symbol)
    print("exp(x^2) d^4/dx^4 exp(-x^2) =", polynomial.as_expr())
    print("H_4 coefficients, NumPy     =", hermite.herm2poly([0, 0, 0, 0, 1]).tolist(), "(low to high)")
    ok = worst < 1e-10
    print("all orders agree to 1e-10:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-order", type=int, default=20)
    parser.add_argument("--points", type=int, default=100_001)
    arguments = parser.parse_args()
    sys.exit(main(arguments.max_order, arguments.points))
