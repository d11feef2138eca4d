"""Draw docs/images/benchmark_*.png from the result tables of docs/benchmarks.md.

Run:  python docs/ext/plot_benchmarks.py     (needs matplotlib)

The page's tables are the record of each benchmark run; the plots are drawn
from them, so after pasting a new run's tables into the page, run this again.
"""

import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
PAGE = DOCS / "benchmarks.md"


def section(text: str, number: int) -> str:
    start = text.index(f"\n## {number}.")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def rows(lines) -> list[list[str]]:
    """Cells of every table row (Markdown or fixed-width with |), separators dropped."""
    found = []
    for line in lines:
        if "|" not in line or set(line.replace("|", "").strip()) <= set("-+: "):
            continue
        found.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return found


def number(cell: str) -> float | None:
    """A time in ms (``3.0 ms``, ``11.8 s``, ``1,447.83 (79.0x)``), or None for ``—``."""
    match = re.match(r"([\d,.]+)\s*(ms|s)?", cell)
    if not match:
        return None
    value = float(match.group(1).replace(",", ""))
    return value * 1000 if match.group(2) == "s" else value


def build_data(text: str):
    table = rows(line for line in section(text, 1).splitlines() if line.startswith("|"))
    header, body = table[0], table[1:]
    n = [int(row[0]) for row in body]
    return n, {header[4]: [number(row[4]) for row in body], "sympy.diff": [number(row[5]) for row in body]}


def nth_data(text: str):
    block = section(text, 3).split("```")[1]
    table = rows(block.splitlines())
    header = table[0]
    body = [row for row in table[1:] if row[0].isdigit()]
    n = [int(row[0]) for row in body]
    series = {}
    for column, name in enumerate(header):
        if name.endswith(" ms"):
            series[name[:-3]] = [number(row[column]) for row in body]
    return n, series


def plot(path: Path, title: str, n, series, xlabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for name, values in series.items():
        points = [(k, v) for k, v in zip(n, values) if v is not None]
        axes.plot([k for k, _ in points], [v for _, v in points], marker="o", label=name)
    axes.set_yscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel("time (ms, log scale)")
    axes.set_title(title)
    axes.grid(True, which="major", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main(out_dir: Path) -> list[Path]:
    text = PAGE.read_text()
    out_dir.mkdir(parents=True, exist_ok=True)
    n, series = build_data(text)
    build = out_dir / "benchmark_build.png"
    plot(build, "Gradient of the logistic map iterated n times: build time", n, series,
         "iterations n")
    n, series = nth_data(text)
    nth = out_dir / "benchmark_nth.png"
    plot(nth, "n-th derivative of exp(sin x)/(1+x²): build + evaluate", n, series, "order n")
    return [build, nth]


if __name__ == "__main__":
    for written in main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS / "images"):
        print("wrote", written)
