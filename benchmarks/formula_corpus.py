"""Textbook functions whose derivatives a person would print: the corpus of the formula figures.

Used by ``benchmarks/formulas.py`` (the figures of docs/benchmarks.md) and
``tests/test_formula_corpus.py`` (the same figures as assertions). Each entry is
``(function, example point)``; the parameter names are the names printed.
"""

from __future__ import annotations

import numpy as np


def cubic(x, y):
    return x**3 - 2 * x**2 * y + 3 * y**2 - x


def rosenbrock(x0, x1):
    return (1 - x0) ** 2 + 100 * (x1 - x0**2) ** 2


def himmelblau(x, y):
    return (x**2 + y - 11) ** 2 + (x + y**2 - 7) ** 2


def booth(x, y):
    return (x + 2 * y - 7) ** 2 + (2 * x + y - 5) ** 2


def beale(x, y):
    return (1.5 - x + x * y) ** 2 + (2.25 - x + x * y**2) ** 2 + (2.625 - x + x * y**3) ** 2


def gaussian(x, mu, sigma):
    return np.exp(-((x - mu) ** 2) / (2 * sigma**2)) / (sigma * np.sqrt(2 * np.pi))


def gaussian_2d(x, y):
    return np.exp(-(x**2 + y**2) / 2)


def logistic_loss(w0, w1):
    # one sample: features (0.7, -1.2), label 1
    return np.log(1 + np.exp(-(0.7 * w0 - 1.2 * w1)))


def softplus(x):
    return np.log(1 + np.exp(x))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def spring(k, x1, x2):
    return 0.5 * k * (x2 - x1 - 1.0) ** 2


def lennard_jones(r, epsilon):
    return 4 * epsilon * ((1 / r) ** 12 - (1 / r) ** 6)


def pendulum(theta, omega):
    # the Lagrangian of a pendulum of unit mass and length: kinetic minus potential energy
    return 0.5 * omega**2 + 9.81 * np.cos(theta)


def polar_angle(x, y):
    return np.arctan2(y, x)


def polar_radius(x, y):
    return np.sqrt(x**2 + y**2)


def coulomb(x, y):
    return 1 / np.sqrt(x**2 + y**2)


def log_sum_exp(x, y, z):
    return np.log(np.exp(x) + np.exp(y) + np.exp(z))


def cobb_douglas(K, L):
    return K**0.3 * L**0.7


def michaelis_menten(S, K):
    return 2.5 * S / (K + S)


def parallel_resistance(R1, R2):
    return R1 * R2 / (R1 + R2)


def binary_entropy(p):
    return -p * np.log(p) - (1 - p) * np.log(1 - p)


def damped_oscillation(t, omega):
    return np.exp(-0.1 * t) * np.cos(omega * t)


def normal_log_likelihood(mu, sigma):
    # one observation, 1.3
    return -np.log(sigma) - (1.3 - mu) ** 2 / (2 * sigma**2)


def gravity(x, y, z):
    return -1 / np.sqrt(x**2 + y**2 + z**2)


def tanh_unit(w, b):
    return np.tanh(0.5 * w + b)


def chain(steps: int):
    """``x = sin(x)·y + x/2`` repeated ``steps`` times (4 nodes a step, its gradient about 10):
    the large program whose ``latex()`` is timed."""
    def f(x, y):
        for _ in range(steps):
            x = np.sin(x) * y + 0.5 * x
        return x
    return f


#: ``(function, example point)``: every argument is differentiated.
CORPUS = [
    (cubic, (1.0, 2.0)), (rosenbrock, (1.0, 2.0)), (himmelblau, (1.0, 2.0)),
    (booth, (1.0, 2.0)), (beale, (1.0, 2.0)), (gaussian, (0.3, 0.1, 1.2)),
    (gaussian_2d, (0.3, 0.4)), (logistic_loss, (0.3, 0.4)), (softplus, (0.3,)),
    (sigmoid, (0.3,)), (spring, (2.0, 0.3, 1.7)), (lennard_jones, (1.1, 0.5)),
    (pendulum, (0.3, 0.4)), (polar_angle, (1.0, 2.0)), (polar_radius, (1.0, 2.0)),
    (coulomb, (1.0, 2.0)), (log_sum_exp, (0.1, 0.2, 0.3)), (cobb_douglas, (1.5, 2.5)),
    (michaelis_menten, (1.0, 2.0)), (parallel_resistance, (1.0, 2.0)),
    (binary_entropy, (0.3,)), (damped_oscillation, (0.5, 2.0)),
    (normal_log_likelihood, (0.2, 1.5)), (gravity, (1.0, 2.0, 3.0)), (tanh_unit, (0.3, 0.2)),
]


# ---------------------------------------------------------------------------
# Measures
# ---------------------------------------------------------------------------


def block_lines(text: str) -> list[tuple[str, str]]:
    """``(label, right-hand side)`` of every line of an exported ``aligned`` block."""
    body = text[len("\\begin{aligned}\n"):-len("\n\\end{aligned}")]
    return [tuple(line.split(" &= ", 1)) for line in body.split(" \\\\\n")]


def is_temporary(label: str) -> bool:
    return label.startswith("t_{")


def block_length(text: str) -> int:
    """Characters of a block without whitespace and output labels (a temporary's name counts)."""
    total = 0
    for label, value in block_lines(text):
        total += len("".join(value.split()))
        if is_temporary(label):
            total += len(label) + 1  # "t_{1}="
    return total


def sympy_reference(function, point, kind: str, exact: bool, simplify: bool = True):
    """SymPy's simplified derivatives of ``function``: ``[simplify(diff(f, v, ...)), ...]``.

    ``f`` is the traced function's formula; with ``exact``, its floats as the
    fractions they were written as (for blocks that print fractions). ``kind`` is
    ``"gradient"`` or ``"hessian"`` (row by row); ``simplify=False``: the derivatives
    as ``sympy.diff`` gives them.
    """
    import sympy

    import symad as sd

    traced = sd.trace(function, *point)
    expression = traced.formula()
    if exact:
        expression = sympy.nsimplify(expression, rational=True)
    variables = list(traced.graph.inputs)
    if kind == "gradient":
        derivatives = [sympy.diff(expression, v) for v in variables]
    else:
        derivatives = [sympy.diff(expression, v, w) for v in variables for w in variables]
    return [sympy.simplify(d) for d in derivatives] if simplify else derivatives


def reference_length(expressions) -> int:
    """Characters of ``sympy.latex`` of each expression, whitespace aside, added up."""
    import sympy

    return sum(len("".join(sympy.latex(e).split())) for e in expressions)


def special_functions_listed(page_text: str) -> set[str]:
    """The functions docs/special-functions.md lists: its table's first column, and the
    NumPy functions it says scipy.special shares (``expm1``, ...)."""
    import re

    table = page_text.split("## Supported functions")[1].split("### Decisions")[0]
    names = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([a-z_0-9]+)(?:\(|`)", line.split("|")[1]))
    shared = re.search(r"((?:`\w+`,? )+and `\w+`) of `scipy.special`", table)
    if shared:
        names.update(re.findall(r"`(\w+)`", shared.group(1)))
    return names
