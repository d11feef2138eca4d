"""The display simplifier (symad/export/display.py): numbers, noise temporaries, the short form.

The corpus of textbook functions and the issue's figures are in tests/test_formula_corpus.py;
this file tests the mechanisms one at a time, on SymPy programs and on traced functions.
"""

import re

import numpy as np
import pytest
import sympy

import symad as sd
from symad.export import display
from symad.export.display import (
    DisplayOptions,
    display_numbers,
    exact_number,
    inline_noise,
    is_noise,
    named_constant,
    number_style,
    simplify_for_display,
)


def lines(text):
    return text[len("\\begin{aligned}\n"):-len("\n\\end{aligned}")].split(" \\\\\n")


# ---------------------------------------------------------------------------
# 1. Numbers
# ---------------------------------------------------------------------------


def test_a_block_prints_fractions_only_when_every_float_was_one():
    assert number_style([0.5, 0.25, 2.0, 1 / 3]) == "fractions"
    assert number_style([0.5, 0.7]) == "decimals"  # 7/10 is longer than 0.7: written as a decimal
    assert number_style([np.pi, 0.5]) == "fractions"  # NumPy's pi is pi, not a decimal
    assert number_style([0.5], "decimals") == "decimals"
    assert number_style([0.7], max_denominator=0) == "decimals"
    with pytest.raises(ValueError, match="numbers='roman'"):
        number_style([0.5], "roman")


def test_floats_become_the_exact_numbers_they_stand_for():
    assert exact_number(sympy.Float(0.7), "decimals") == sympy.Rational(7, 10)
    assert exact_number(sympy.Float(0.7 * 0.7), "decimals") == sympy.Rational(49, 100)  # folded
    assert exact_number(sympy.Float(0.7), "fractions") == sympy.Rational(7, 10)
    assert exact_number(sympy.Float(3.0), "decimals") == 3 and exact_number(sympy.Integer(3), "x") == 3
    assert exact_number(sympy.Float(2 * np.pi), "decimals") == 2 * sympy.pi
    assert exact_number(sympy.Float(6.02e23), "decimals") == sympy.Float(6.02e23)  # kept binary
    assert named_constant(np.sqrt(2 * np.pi)) == sympy.sqrt(2) * sympy.sqrt(sympy.pi)
    assert named_constant(-np.e / 2) == -sympy.E / 2
    assert named_constant(3.14) is None and named_constant(np.pi + 1e-12) is None


def test_decimal_blocks_print_decimals_and_keep_roots():
    x = sympy.Symbol("x")
    expression = sympy.Rational(49, 100) * x / (x + 1) ** 2 + sympy.sqrt(x) / 8
    shown = display_numbers(expression, "decimals")
    text = sympy.latex(shown)
    assert "0.49" in text and "0.125" in text and r"\sqrt{x}" in text
    assert not re.search(r"\\frac\{\d+\}", text)
    assert display_numbers(expression, "fractions") is expression


# ---------------------------------------------------------------------------
# 2. Noise temporaries
# ---------------------------------------------------------------------------


def test_the_issues_noise_temporaries_are_noise():
    t3, t6, y, epsilon = sympy.Dummy("t3"), sympy.Dummy("t6"), sympy.Symbol("y"), sympy.Symbol("epsilon")
    for noise in (-t3, 2 * y, 4 * epsilon, -sympy.Rational(7, 10) * t3, 12 * t6, t3 / 2, y,
                  sympy.Integer(3)):
        assert is_noise(noise), noise
    for value in (t3 + 1, t3 * y, sympy.sin(y), 1 / t3, y > 0):
        assert not is_noise(value), value


def test_noise_and_used_once_temporaries_are_written_out():
    x, y = sympy.symbols("x y")
    t = [sympy.Dummy(f"t{i}") for i in range(6)]
    program = [
        (t[0], sympy.exp(-x)),     # used three times (after t2 is written out): kept
        (t[1], t[0] + 1),          # used once: written out
        (t[2], -t[0]),             # a sign: written out
        (t[3], 2 * y),             # a number times an input: written out
        (t[4], t[3] * t[0] + x),   # used twice: kept
    ]
    assignments, outputs = inline_noise(program, [t[2] / t[1] ** 2 + t[4], t[4] ** 2])
    assert [symbol for symbol, _ in assignments] == [t[0], t[4]]
    assert assignments[1][1] == 2 * y * t[0] + x
    assert outputs == [-t[0] / (t[0] + 1) ** 2 + t[4], t[4] ** 2]


def test_a_line_stays_as_small_as_max_inline_allows():
    x = sympy.Symbol("x")
    t1, t2 = sympy.Dummy("t1"), sympy.Dummy("t2")
    big = sum(sympy.sin(k * x) for k in range(1, 8))  # 21 operations
    program = [(t1, big), (t2, t1 * x + 1)]
    kept, _ = inline_noise(program, [t2 ** 2 + t2], max_inline=10)
    assert [symbol for symbol, _ in kept] == [t1, t2]  # t1 is used once, but too large
    written, _ = inline_noise(program, [t2 ** 2 + t2], max_inline=None)
    assert [symbol for symbol, _ in written] == [t2]


# ---------------------------------------------------------------------------
# 3. The short form, on any SymPy program
# ---------------------------------------------------------------------------


def test_polynomials_are_expanded_and_collected():
    x, y = sympy.symbols("x y")
    t1, t2 = sympy.Dummy("t1"), sympy.Dummy("t2")
    program = [(t1, x**2 + y - 11), (t2, 2 * t1)]
    assignments, outputs = simplify_for_display(program, [2 * t2 + 8 * x**2 + 2])
    assert assignments == [] and outputs == [12 * x**2 + 4 * y - 42]


def test_indexed_atoms_are_simplified_like_symbols():
    # The index-notation printer will hand the simplifier per-element and indexed
    # expressions: nothing may assume the atoms are Symbols.
    x = sympy.IndexedBase("x")
    i = sympy.Idx("i")
    t1 = sympy.Dummy("t1")
    assignments, outputs = simplify_for_display([(t1, x[i] ** 2 + 1)], [2 * t1 + 4 * t1])
    assert assignments == [] and outputs == [6 * x[i] ** 2 + 6]


def test_a_shared_subexpression_is_kept_only_where_it_shortens_the_block():
    x, y = sympy.symbols("x y")
    r = x**2 + y**2
    hessian = [(2 * x**2 - y**2) / r ** sympy.Rational(5, 2), 3 * x * y / r ** sympy.Rational(5, 2),
               3 * x * y / r ** sympy.Rational(5, 2), (2 * y**2 - x**2) / r ** sympy.Rational(5, 2)]
    assignments, outputs = simplify_for_display([], hessian)
    assert len(assignments) == 1  # (x^2 + y^2)^(-5/2), in all four entries
    assert [sympy.simplify(o.xreplace(dict(assignments)) - h) for o, h in zip(outputs, hessian)] == [0] * 4
    assignments, outputs = simplify_for_display([], hessian, DisplayOptions(max_temporaries=0))
    assert assignments == [] and [sympy.simplify(o - h) for o, h in zip(outputs, hessian)] == [0] * 4
    # -400 x0 twice is not worth a line: a number times a value
    x0, x1 = sympy.symbols("x0 x1")
    assignments, outputs = simplify_for_display([], [1200 * x0**2 - 400 * x1 + 2, -400 * x0, -400 * x0, sympy.Integer(200)])
    assert assignments == [] and outputs[1] == -400 * x0


def test_a_wrong_rewrite_is_refused(monkeypatch):
    # Rewrites are SymPy's, and each is also checked at two points: one that changes the
    # value (here a "rewrite" to a shorter, wrong expression) is never printed.
    x = sympy.Symbol("x")
    wrong = ("wrong", lambda expression: x, 1000, 1000)
    monkeypatch.setattr(display, "_REWRITES", (wrong,))
    expression = (x + 1) ** 2 - 1
    assert simplify_for_display([], [expression])[1] == [expression]
    right = ("right", sympy.expand, 1000, 1000)
    monkeypatch.setattr(display, "_REWRITES", (right,))
    assert simplify_for_display([], [expression])[1] == [x**2 + 2 * x]


def test_without_time_nothing_is_rewritten_but_noise_is_still_written_out():
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    H = sd.hessian(sigmoid, 0).trace(0.3)
    assert len(lines(H.latex(simplify=False))) == 7  # six temporaries, t_{5} = - t_{1} among them
    quick = lines(H.latex(simplify_time=0))  # no rewrite: the graph's terms, shared where that pays
    assert quick == [r"t_{1} &= 1 + e^{- x}",
                     r"\frac{\partial^{2} f}{\partial x^{2}} &= - \frac{e^{- x}}{t_{1}^{2}} + \frac{2 e^{- 2 x}}{t_{1}^{3}}"]
    assert lines(H.latex()) == [
        r"\frac{\partial^{2} f}{\partial x^{2}} &= \frac{- e^{2 x} + e^{x}}{\left(e^{x} + 1\right)^{3}}"]


def test_simplify_false_prints_the_graphs_own_structure():
    # The issue's "before": the Rosenbrock Hessian's t_{1} = -400 x_{0}.
    rosenbrock = lambda x0, x1: (1 - x0) ** 2 + 100 * (x1 - x0**2) ** 2  # noqa: E731
    H = sd.hessian(rosenbrock, (0, 1)).trace(1.0, 2.0)
    assert lines(H.latex(simplify=False))[0] == r"t_{1} &= - 400 x_{0}"


# ---------------------------------------------------------------------------
# Through the Function: formula(simplify=True), the graph untouched, options
# ---------------------------------------------------------------------------


def test_formula_simplify_gives_the_printed_expressions():
    loss = lambda w0, w1: np.log(1 + np.exp(-(0.7 * w0 - 1.2 * w1)))  # noqa: E731
    H = sd.hessian(loss, (0, 1)).trace(0.3, 0.4)
    simplified = H.formula(simplify=True)
    plain = H.formula()
    w0, w1 = H.graph.inputs
    point = {w0: 0.3, w1: -0.8}
    for row_simplified, row_plain in zip(simplified, plain):
        for a, b in zip(row_simplified, row_plain):
            assert float(a.subs(point)) == pytest.approx(float(b.subs(point)), rel=1e-12)
            # one number style: decimals are Floats, no fraction is left
            assert a.atoms(sympy.Float) and not [r for r in a.atoms(sympy.Rational) if not r.is_Integer]
    # the same expressions as latex(): its temporaries written out
    from symad.export.latex import display_program

    assignments, outputs = display_program(H, DisplayOptions())
    values = dict()
    for symbol, expression in assignments:
        values[symbol] = expression.xreplace(values)
    assert [o.xreplace(values) for o in outputs] == [e for row in simplified for e in row]
    himmelblau = lambda x, y: (x**2 + y - 11) ** 2 + (x + y**2 - 7) ** 2  # noqa: E731
    x, y = sympy.symbols("x y")
    assert sd.hessian(himmelblau, (0, 1)).trace(1.0, 2.0).formula(simplify=True) == (
        (12 * x**2 + 4 * y - 42, 4 * x + 4 * y), (4 * x + 4 * y, 4 * x + 12 * y**2 - 26))
    with pytest.raises(sd.ExportError, match=r"formula\(.*numbers='roman'.*must be"):
        H.formula(simplify=True, numbers="roman")


def test_printing_never_changes_the_evaluated_graph():
    f = lambda x, y: np.exp(-(x**2 + y**2) / 2) * (1 + 0.7 * x)  # noqa: E731
    H = sd.hessian(f, (0, 1)).trace(0.3, 0.4)
    nodes, outputs = list(H.graph.nodes), list(H.graph.outputs)
    before = np.array(H(0.3, 0.4), dtype=float)
    source = H.source("numpy")
    H.latex(), H.formula(simplify=True), H.latex(numbers="fractions", max_temporaries=0)
    assert list(H.graph.nodes) == nodes and list(H.graph.outputs) == outputs
    assert H.source("numpy") == source
    np.testing.assert_array_equal(np.array(H(0.3, 0.4), dtype=float), before)


@pytest.mark.parametrize("options, named", [
    ({"simplify": "yes"}, "simplify='yes'"),
    ({"numbers": "roman"}, "numbers='roman'"),
    ({"max_temporaries": -1}, "max_temporaries=-1"),
    ({"max_temporaries": 1.5}, "max_temporaries=1.5"),
    ({"simplify_below": -1}, "simplify_below=-1"),
    ({"simplify_time": -1}, "simplify_time=-1"),
    ({"simplify_time": float("nan")}, "simplify_time=nan"),
])
def test_bad_display_options_are_refused_naming_the_option(options, named):
    F = sd.trace(lambda x: np.sin(x) * np.cos(x) + np.sin(x), 1.0)
    with pytest.raises(sd.ExportError, match=rf"latex\(<lambda>\): {named} is not allowed; .* must be"):
        F.latex(**options)


def test_max_temporaries_and_simplify_below_choose_the_form():
    coulomb = lambda x, y: 1 / np.sqrt(x**2 + y**2)  # noqa: E731
    H = sd.hessian(coulomb, (0, 1)).trace(1.0, 2.0)
    assert sum(line.startswith("t_") for line in lines(H.latex())) == 1
    written = lines(H.latex(max_temporaries=0))
    assert not any(line.startswith("t_") for line in written)
    assert written[0].endswith(r"&= \frac{2 x^{2} - y^{2}}{\left(x^{2} + y^{2}\right)^{\frac{5}{2}}}")
    # past simplify_below the short form is not tried: the shared form, noise written out
    shared = lines(H.latex(simplify_below=5))
    assert sum(line.startswith("t_") for line in shared) > 1
    assert not any(re.search(r"&= - t_\{\d+\}$", line) for line in shared)


def test_settings_change_how_a_block_prints_not_which_form():
    michaelis = lambda S, K: 2.5 * S / (K + S)  # noqa: E731
    H = sd.hessian(michaelis, (0, 1)).trace(1.0, 2.0)
    assert H.latex(mul_symbol="dot").replace(r" \cdot ", " ") == H.latex()
