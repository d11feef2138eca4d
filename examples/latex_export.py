"""Formulas out: a model's gradient and Hessian as LaTeX, and its gradient as C.

Run:  python examples/latex_export.py [output_dir]

Writes ``formulas.md`` (Markdown with display math, renders on GitHub or any
KaTeX/MathJax site) and ``spring_grad.c`` / ``spring_grad.h`` to output_dir
(default: the current directory) and prints the LaTeX.
"""

import sys
from pathlib import Path

import numpy as np

import symad as sd


def spring_energy(k, x1, x2):
    """Energy of a spring of stiffness k and rest length 1 between x1 and x2."""
    return 0.5 * k * (x2 - x1 - 1.0) ** 2


def lennard_jones(r, epsilon, sigma):
    """Lennard-Jones pair potential."""
    return 4.0 * epsilon * ((sigma / r) ** 12 - (sigma / r) ** 6)


def main(output_dir: Path) -> str:
    point = (2.0, 0.0, 1.5)
    energy = sd.trace(spring_energy, *point)
    gradient = sd.grad(spring_energy, argnums=(1, 2)).trace(*point)
    hessian = sd.hessian(spring_energy, argnums=(1, 2)).trace(*point)
    pair_force = sd.grad(lennard_jones).trace(1.1, 1.0, 1.0)

    sections = [
        ("Spring energy", energy.latex()),
        ("Its gradient", gradient.latex()),
        ("Its Hessian", hessian.latex()),
        ("Lennard-Jones force", pair_force.latex()),
    ]
    page = ["# Formulas exported by symad", ""]
    for title, latex in sections:
        page += [f"## {title}", "", "$$", latex, "$$", ""]
    text = "\n".join(page)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "formulas.md").write_text(text)

    source, header = gradient.to_c("spring_grad")
    (output_dir / "spring_grad.c").write_text('#include "spring_grad.h"\n' + source)
    (output_dir / "spring_grad.h").write_text(header)

    # The exported formulas are the evaluator's formulas: check one point.
    assert np.allclose(sd.grad(spring_energy, argnums=(1, 2))(*point), gradient(*point))
    return text


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")))
