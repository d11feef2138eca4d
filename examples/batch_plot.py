"""A function and its first three derivatives over a grid, saved as a PNG.

Run:  python examples/batch_plot.py [--points N] [--output PATH] [--no-plot]

f(x) = exp(sin x) / (1 + x^2) on [-4, 4]. One Taylor-mode sweep gives
f, f', f'' and f''' on the whole grid at once (``sd.taylor(f, 3,
derivatives=True)``: the grid is a batch, traced once as a scalar). The script
checks f' and f'' against central differences, prints a summary and, when
matplotlib is installed, draws the four curves to PATH (default
``derivatives.png``).
"""

import argparse
from pathlib import Path

import numpy as np

import symad as sd


def f(x):
    return np.exp(np.sin(x)) / (1 + x ** 2)


def main(points: int, output: Path, plot: bool) -> None:
    x = np.linspace(-4.0, 4.0, points)
    curves = sd.taylor(f, 3, derivatives=True)(x)  # (f, f', f'', f''') on the grid

    # Central differences of the computed curves agree to O(h^2).
    h = x[1] - x[0]
    for order in (1, 2):
        difference = (curves[order - 1][2:] - curves[order - 1][:-2]) / (2 * h)
        error = np.max(np.abs(difference - curves[order][1:-1]))
        print(f"f^({order}) vs central difference of f^({order - 1}): max |error| = {error:.1e}")
    for order, values in enumerate(curves):
        print(f"f^({order}): min {values.min():+.4f}, max {values.max():+.4f}")

    if not plot:
        return
    try:
        import matplotlib
    except ModuleNotFoundError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    labels = ["$f$", "$f'$", "$f''$", "$f'''$"]
    for label, values in zip(labels, curves):
        axes.plot(x, values, label=label)
    axes.set_title(r"$f(x) = e^{\sin x} / (1 + x^2)$ and its first three derivatives")
    axes.set_xlabel("$x$")
    axes.axhline(0.0, color="grey", linewidth=0.5)
    axes.legend()
    figure.tight_layout()
    figure.savefig(output, dpi=100)
    plt.close(figure)
    print("wrote", output)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2001)
    parser.add_argument("--output", type=Path, default=Path("derivatives.png"))
    parser.add_argument("--no-plot", action="store_true")
    arguments = parser.parse_args()
    main(arguments.points, arguments.output, not arguments.no_plot)
