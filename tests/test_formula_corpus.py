"""Paper-ready formulas (issue 21): the gradient and Hessian of 25 textbook functions.

For each block (benchmarks/formula_corpus.py, also measured by benchmarks/formulas.py):
the LaTeX renders in KaTeX and parses back with SymPy's parse_latex to the exact
derivative's values; it is at most 1.3 times as long as SymPy's simplified
derivative, ``sympy.latex(sympy.simplify(sympy.diff(...)))`` (whitespace and output
labels aside); no temporary is used once or is a number times a value; and the block
prints one number style.
"""

import functools
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
import sympy

import symad as sd
from symad.export.latex import symbol_latex

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


corpus = _load(ROOT / "benchmarks" / "formula_corpus.py")
katex = _load(ROOT / "tests" / "test_katex.py")
latex_tests = _load(ROOT / "tests" / "test_latex.py")

CASES = [(function, point, kind) for function, point in corpus.CORPUS
         for kind in ("gradient", "hessian")]
IDS = [f"{function.__name__}-{kind}" for function, _, kind in CASES]
MAX_RATIO = 1.3


def traced(function, point, kind):
    transform = sd.grad if kind == "gradient" else sd.hessian
    return transform(function, tuple(range(len(point)))).trace(*point)


@functools.cache
def exported(index: int) -> dict:
    function, point, kind = CASES[index]
    F = traced(function, point, kind)
    text = F.latex()
    return {"F": F, "text": text, "dot": F.latex(mul_symbol="dot"),
            "decimals": bool(re.search(r"\d\.\d", text))}


def test_the_corpus_has_twenty_textbook_functions_or_more():
    names = {function.__name__ for function, _ in corpus.CORPUS}
    assert len(names) >= 20
    assert {"rosenbrock", "himmelblau", "gaussian", "logistic_loss", "softplus", "sigmoid",
            "spring", "lennard_jones", "pendulum", "polar_angle", "coulomb", "log_sum_exp",
            "cobb_douglas"} <= names


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_the_latex_parses_to_the_exact_derivative(index):
    pytest.importorskip("antlr4", reason="SymPy's parse_latex needs antlr4-python3-runtime 4.11 (the test extra)")
    function, point, kind = CASES[index]
    result = exported(index)
    F = result["F"]
    # the block printed with \cdot (SymPy's parser reads "x (y + 1)" as a call of x) is
    # the default block with its products marked: the same forms
    assert result["dot"].replace(r" \cdot ", " ") == result["text"]
    parsed = latex_tests.evaluate_parsed(result["dot"], F.graph.inputs, point)
    exact = [float(sympy.N(d.subs(dict(zip(F.graph.inputs, point))), 30))
             for d in corpus.sympy_reference(function, point, kind, exact=True, simplify=False)]
    assert parsed == pytest.approx(exact, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_the_block_is_as_short_as_sympys_simplified_derivative(index):
    function, point, kind = CASES[index]
    result = exported(index)
    reference = corpus.reference_length(
        corpus.sympy_reference(function, point, kind, exact=not result["decimals"]))
    assert corpus.block_length(result["text"]) <= MAX_RATIO * reference, result["text"]


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_no_temporary_is_noise_or_used_once(index):
    result = exported(index)
    rows = corpus.block_lines(result["text"])
    names = [label for label, _ in rows if corpus.is_temporary(label)]
    values = "|".join([re.escape(name) for name in names]
                      + [re.escape(symbol_latex(s.name)) for s in result["F"].graph.inputs])
    number = r"\d+(?:\.\d+)?"
    noise = re.compile(rf"(?:- )?(?:{number} )?(?:{values})|(?:- )?\\frac{{(?:{number} )?(?:{values})}}{{{number}}}")
    for position, (label, value) in enumerate(rows):
        if not corpus.is_temporary(label):
            continue
        uses = sum(len(re.findall(re.escape(label), later)) for _, later in rows[position + 1:])
        assert uses >= 2, f"{label} is used {uses} time(s): {result['text']}"
        assert not noise.fullmatch(value), f"{label} = {value} is a number times a value"


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_one_number_style_per_block(index):
    result = exported(index)
    text = result["text"]
    if result["decimals"]:
        # no number under a fraction bar: 0.84 t, not \frac{21 t}{25}; 0.7/(t + 1), not 7/(10 t + 10)
        assert not [den for den in fraction_denominators(text) if den[:1].isdigit()], text
    else:
        assert not re.search(r"\d\.\d", text), text


def fraction_denominators(text: str) -> list[str]:
    """The denominator of every ``\\frac{...}{...}`` in ``text`` (braces matched)."""
    found = []
    for match in re.finditer(r"\\frac", text):
        position, groups = match.end(), []
        while len(groups) < 2:
            assert text[position] == "{"
            depth, start = 0, position
            while True:
                depth += {"{": 1, "}": -1}.get(text[position], 0)
                position += 1
                if depth == 0:
                    break
            groups.append(text[start + 1:position - 1])
        found.append(groups[1])
    return found


def test_every_corpus_block_renders_in_katex():
    katex.require_katex()
    texts = [exported(index)["text"] for index in range(len(CASES))]
    assert katex.katex_errors(texts) == []


def test_rosenbrock_and_himmelblau_hessians_are_expanded_polynomials():
    rosenbrock = exported(IDS.index("rosenbrock-hessian"))["text"]
    assert [value for _, value in corpus.block_lines(rosenbrock)] == [
        "1200 x_{0}^{2} - 400 x_{1} + 2", "- 400 x_{0}", "- 400 x_{0}", "200"]
    himmelblau = exported(IDS.index("himmelblau-hessian"))["text"]
    assert [value for _, value in corpus.block_lines(himmelblau)] == [
        "12 x^{2} + 4 y - 42", "4 x + 4 y", "4 x + 4 y", "4 x + 12 y^{2} - 26"]


def test_the_issues_examples_print_short():
    sigmoid = exported(IDS.index("sigmoid-hessian"))["text"]
    assert corpus.block_lines(sigmoid) == [
        (r"\frac{\partial^{2} \mathrm{sigmoid}}{\partial x^{2}}",
         r"\frac{- e^{2 x} + e^{x}}{\left(e^{x} + 1\right)^{3}}")]  # six temporaries before
    coulomb = corpus.block_lines(exported(IDS.index("coulomb-hessian"))["text"])
    assert sum(corpus.is_temporary(label) for label, _ in coulomb) == 1  # fourteen before
    assert coulomb[1][1] == r"t_{1} \left(2 x^{2} - y^{2}\right)"
    loss = exported(IDS.index("logistic_loss-gradient"))["text"]
    assert "0.7" in loss and "1.2" in loss and "frac{6" not in loss  # the data as written


def logistic_map(x, r):
    for _ in range(14):
        x = r * x * (1 - x)
    return x


def test_the_logistic_maps_gradient_is_at_most_three_times_the_function():
    function = sd.trace(logistic_map, 0.3, 3.7).latex()
    gradient = sd.grad(logistic_map, (0, 1)).trace(0.3, 3.7).latex()
    assert len(gradient) <= 3 * len(function)
    assert np.isfinite(float(sd.grad(logistic_map, (0, 1))(0.3, 3.7)[1]))


def test_large_programs_print_without_sympys_rewrites(monkeypatch):
    # Past the budgets a program keeps its shared temporaries and gets only the linear
    # passes: printing stays linear in its size (the 10^4-node timing: benchmarks/formulas.py).
    from symad.export import display

    G = sd.grad(corpus.chain(400), (0, 1)).trace(0.1, 0.2)
    assert len(G.graph.nodes) > 3500

    def refuse(*args, **kwargs):
        raise AssertionError("a SymPy rewrite was tried on a large program")

    monkeypatch.setattr(display, "_rewrites", refuse)
    text = G.latex()
    assert text.count("&=") >= 1000
    assert not re.search(r"&= - t_\{\d+\} \\\\", text)  # noise written out all the same
