"""A tour of symad in five steps: gradients, formulas, Jacobians, higher orders, checks.

Run:  python examples/quickstart.py [--points N]

Each step prints what it computed next to an independent reference, so the
output reads as its own proof. ``--points`` sets the batch size of step 2
(default 1,000,000; the smoke test uses a small one).
"""

import argparse

import numpy as np

import symad as sd
import symad.numpy as snp
from symad.testing import check_grads


def f(x1, x2):
    """The running example: log(x1) + x1*x2 - sin(x2)."""
    return np.log(x1) + x1 * x2 - np.sin(x2)


def main(points: int) -> None:
    # 1. Gradients, the functional way: transforms take a function, return a function.
    df = sd.grad(f, argnums=(0, 1))
    g1, g2 = df(2.0, 5.0)
    print(f"1. grad f(2, 5)        = ({float(g1)}, {float(g2):.12f})")
    print(f"   by hand             = ({5 + 1 / 2}, {2 - np.cos(5):.12f})")
    value, g1 = sd.value_and_grad(f)(2.0, 5.0)
    print(f"   value_and_grad      = {float(value):.12f}, d/dx1 = {float(g1)}")

    # 2. A traced gradient is a Function: a formula and a compiled batch evaluator.
    G = df.trace(2.0, 5.0)
    print("2. formula             =", G.formula())
    xs = np.linspace(1.0, 2.0, points)
    ys = np.linspace(0.0, 1.0, points)
    d1, d2 = G(xs, ys)
    error = max(np.max(np.abs(d1 - (ys + 1 / xs))), np.max(np.abs(d2 - (xs - np.cos(ys)))))
    print(f"   {points:,} points, max |error| = {error:.1e}")
    print("   LaTeX:")
    print(G.latex())

    # 3. Vector functions: the Jacobian, forward or reverse mode (same numbers).
    def polar(r, theta):
        return snp.asarray([r * np.cos(theta), r * np.sin(theta)])

    jf = sd.jacfwd(polar, argnums=(0, 1))(2.0, np.pi / 2)
    jr = sd.jacrev(polar, argnums=(0, 1))(2.0, np.pi / 2)
    print("3. Jacobian of polar   =", np.round(np.column_stack(jf), 12).tolist())
    print("   forward == reverse  :", all(np.allclose(a, b) for a, b in zip(jf, jr)))
    H = sd.hessian(f, argnums=(0, 1))(2.0, 5.0)
    print("   Hessian of f        =", np.round(np.array(H, dtype=float), 12).tolist())

    # 4. Higher orders: Taylor mode gives the n-th derivative exactly at any order.
    tenth = float(sd.derivative(lambda x: 1 / x, 10)(2.0))
    print(f"4. d^10/dx^10 (1/x) at 2 = {tenth} (exact: 10!/2^11 = {3628800 / 2**11})")
    coefficients = sd.taylor(np.exp, 4)(0.0)
    print("   Taylor series of exp at 0:", [round(float(c), 12) for c in coefficients])

    # 5. Check any gradient against finite differences before trusting it.
    check_grads(f, (2.0, 5.0), order=2)
    print("5. check_grads(f, order=2): passed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="batch size of step 2")
    main(parser.parse_args().points)
