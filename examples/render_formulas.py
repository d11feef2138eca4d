"""Render exported LaTeX to a PNG with matplotlib's mathtext (no TeX installation needed).

Run:  python examples/render_formulas.py [out.png]   (needs matplotlib)

mathtext has no ``aligned`` or ``bmatrix`` environments, so each line of the
block is drawn on its own (scalar outputs only). This is how docs/formulas.png
was made.
"""

import sys

import numpy as np

import symad as sd


def block_lines(latex: str) -> list[str]:
    """The ``label &= value`` lines of an exported ``aligned`` block, as ``label = value``."""
    body = latex.split("\n", 1)[1].rsplit("\n", 1)[0]
    return [line.replace(" &= ", " = ") for line in body.split(" \\\\\n")]


def render(blocks: list[tuple[str, str]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    for title, latex in blocks:
        rows.append((title, None))
        rows.extend((None, line) for line in block_lines(latex))
    figure = plt.figure(figsize=(9, 0.42 * len(rows) + 0.3))
    for index, (title, line) in enumerate(rows):
        y = 1 - (index + 0.8) / len(rows)
        if title is not None:
            figure.text(0.02, y, title, fontsize=12, weight="bold")
        else:
            figure.text(0.06, y, f"${line}$", fontsize=14)
    figure.savefig(path, dpi=110)


def main(path: str) -> None:
    def spring_energy(k, x1, x2):
        return 0.5 * k * (x2 - x1 - 1.0) ** 2

    def pair(r, epsilon, sigma):
        return 4.0 * epsilon * ((sigma / r) ** 12 - (sigma / r) ** 6)

    blocks = [
        ("The gradient of a spring's energy", sd.grad(spring_energy, (1, 2)).trace(2.0, 0.0, 1.5).latex()),
        ("Lennard-Jones: the force", sd.grad(pair).trace(1.1, 1.0, 1.0).latex()),
        ("Second derivative of exp(-x^2)",
         sd.derivative(lambda x: np.exp(-x ** 2), 2).trace(0.0).latex()),
    ]
    render(blocks, path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "formulas.png")
