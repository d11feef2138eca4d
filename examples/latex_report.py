"""A model's gradient and Hessian as a Markdown report with LaTeX, rendered to PNG.

Run:  python examples/latex_report.py [--output-dir DIR] [--no-render]

The model is the logistic-regression loss of a line ``w0 + w1*x`` on four
labelled points. The script writes ``DIR/report.md`` (display math between
``$$``, which GitHub, MkDocs with KaTeX/MathJax and Jupyter render) and, when
matplotlib is installed, ``DIR/report.png`` drawn with matplotlib's mathtext
(no TeX installation needed). It prints the paths it wrote.
"""

import argparse
from pathlib import Path

import numpy as np

import symad as sd

X = np.array([-1.0, 0.5, 2.0, 3.0])
Y = np.array([0.0, 1.0, 0.0, 1.0])


def loss(w0, w1):
    """Mean logistic loss: log(1 + e^z) - y z with z = w0 + w1 x."""
    z = w0 + w1 * X
    return np.mean(np.logaddexp(0.0, z) - Y * z)


def loss_of_vector(w):
    """The same loss with the weights as one vector, for matrix layout."""
    return loss(w[0], w[1])


def sections(point=(0.1, 0.2)):
    """(title, LaTeX) pairs of the report, and a check that the formulas are the numbers."""
    gradient = sd.grad(loss, argnums=(0, 1)).trace(*point)
    hessian = sd.hessian(loss, argnums=(0, 1)).trace(*point)
    reference = sd.hessian(loss_of_vector)(np.array(point))
    assert np.allclose(np.array(hessian(*point), dtype=float), reference)
    return [
        ("The loss", sd.trace(loss, *point).latex()),
        ("Its gradient", gradient.latex()),
        ("Its Hessian", hessian.latex()),
        ("The Hessian as a matrix", sd.hessian(loss_of_vector).trace(np.array(point)).latex(matrix="bmatrix")),
    ]


def markdown(parts) -> str:
    page = ["# Logistic regression: loss, gradient and Hessian", "",
            "Exported by symad: temporaries $t_i$ are shared subexpressions.", ""]
    for title, latex in parts:
        page += [f"## {title}", "", "$$", latex, "$$", ""]
    return "\n".join(page)


def aligned_lines(latex: str) -> list[str]:
    """The lines of an ``aligned`` block as ``label = value`` (mathtext has no ``aligned``)."""
    body = latex.split("\n", 1)[1].rsplit("\n", 1)[0]
    return [line.replace(" &= ", " = ") for line in body.split(" \\\\\n")]


def render(parts, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    for title, latex in parts:
        if "bmatrix" in latex:  # mathtext cannot draw matrices; the Markdown has them
            continue
        rows.append((title, None))
        rows += [(None, line) for line in aligned_lines(latex)]
    figure = plt.figure(figsize=(10, 0.45 * len(rows) + 0.3))
    for index, (title, line) in enumerate(rows):
        y = 1 - (index + 0.8) / len(rows)
        if title is not None:
            figure.text(0.02, y, title, fontsize=12, weight="bold")
        else:
            figure.text(0.05, y, f"${line}$", fontsize=13)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(output_dir: Path, draw: bool) -> None:
    parts = sections()
    output_dir.mkdir(parents=True, exist_ok=True)
    report = output_dir / "report.md"
    report.write_text(markdown(parts))
    print("wrote", report)
    if not draw:
        return
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        print("matplotlib is not installed: no PNG (pip install matplotlib)")
        return
    render(parts, output_dir / "report.png")
    print("wrote", output_dir / "report.png")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=Path("."))
    parser.add_argument("--no-render", action="store_true", help="skip the PNG")
    arguments = parser.parse_args()
    main(arguments.output_dir, not arguments.no_render)
