"""The display simplifier: a program of SymPy assignments made short for people to read.

Printing (``F.latex()``, ``F.formula(simplify=True)``, the ``symad`` command) goes
through :func:`simplify_for_display`. It sees only SymPy expressions -- a list of
``(temporary, expression)`` assignments and the output expressions -- never the graph
the compilers evaluate: whatever it rewrites is a view for people, and the numbers a
Function computes do not change. Nothing here assumes the atoms are scalars beyond
what SymPy's own rewrites assume, so per-element and indexed expressions can be given
to it as well.

What it does, cheapest first:

1. **One number style per block** (:func:`number_style`). Either every number that
   is not an integer prints as a fraction, or every one prints as a decimal; the
   decimals the user wrote print as written. Inside, numbers are exact rationals
   either way (``0.7`` is ``7/10``), so ``0.7 * 1.2`` prints ``0.84``.
2. **No noise temporaries** (:func:`inline_noise`). A temporary that is a number, a
   value, or a number times a value (``-t_{3}``, ``2 y``, ``-0.7 t_{1}``) is written
   where it is used; so is one used once, unless that makes a line longer than
   ``max_inline`` operations.
3. **The short form**, for programs whose outputs, written out in full, have at most
   ``simplify_below`` operations: every output is written out and rewritten by
   SymPy's ``expand``, ``factor_terms``, ``cancel`` and ``factor`` (and a few
   combinations of them, :data:`_REWRITES`) and, when small, ``simplify``. The
   shortest form wins if it beats the form as built by ``_REWRITE_GAIN`` signs,
   measured as the LaTeX a reader sees (the caller's ``length``), and a rewrite is
   accepted only if it agrees with the original at two points. Shared
   subexpressions are then found again (``sympy.cse``) and each is kept only if it
   makes the block shorter (at most ``max_temporaries`` of them), and each line is
   rewritten once more with the temporaries as atoms. The block that results is
   compared with the shared form of step 2; the shorter is printed.
4. **Line by line**, for programs too large for the short form but with at most
   ``simplify_lines`` lines: the cheap rewrites (``expand``, ``factor_terms``) on each
   small line, with the temporaries as atoms, and a temporary is written out where
   that saves ``_REWRITE_GAIN`` signs.

Steps 3 and 4 share a time budget (``time_budget`` seconds of CPU time, checked
between rewrites; CPU time, so that other jobs on the machine do not change the
block): past it, the outputs not reached yet keep the form of step 2. Larger
programs get steps 1 and 2 only, which are linear in the program's size.

>>> import sympy
>>> x, y = sympy.symbols("x y")
>>> t1, t2 = sympy.Dummy("t1"), sympy.Dummy("t2")
>>> program = [(t1, x**2 + y - 11), (t2, 2 * t1)]
>>> simplify_for_display(program, [2 * t2 + 8 * x**2 + 2])[1]
[12*x**2 + 4*y - 42]
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

import sympy

from symad.inlining import MAX_FORMULA_DEPTH

__all__ = [
    "DisplayOptions", "NUMBER_STYLES", "display_numbers", "exact_number", "inline_noise",
    "is_noise", "named_constant", "number_style", "short_fraction", "simplify_for_display",
    "substitute", "temporary", "written_out",
]

#: The values of the ``numbers=`` option.
NUMBER_STYLES = ("auto", "fractions", "decimals")

# Significant digits of a decimal: what SymPy prints of a float (and so what the user
# saw before); a folded 0.7 * 0.7 = 0.48999999999999994 reads 0.49.
_DIGITS = 15
# Floats this large or small keep their binary value: as exact decimals they would
# print as 25-digit integers or fractions of powers of ten.
_LARGEST_DECIMAL, _SMALLEST_DECIMAL = 1e15, 1e-12


@dataclass(frozen=True)
class DisplayOptions:
    """How :func:`simplify_for_display` rewrites a program (see the module's docstring).

    >>> DisplayOptions(numbers="decimals").simplify
    True
    """

    #: False: numbers only (step 1); the program keeps the graph's structure.
    simplify: bool = True
    #: "auto", "fractions" or "decimals" (see :func:`number_style`).
    numbers: str = "auto"
    #: A float is a fraction (in "auto") only with at most this denominator.
    max_denominator: int = 1000
    #: The most shared temporaries the short form keeps (None: each that shortens the block).
    max_temporaries: int | None = None
    #: The short form is tried when the outputs written out have at most this many operations.
    simplify_below: int = 1000
    #: Line-by-line rewriting for programs of at most this many lines.
    simplify_lines: int = 200
    #: CPU seconds for the rewrites of steps 3 and 4 (checked between rewrites).
    time_budget: float = 2.0
    #: A temporary used once is written out only while its line stays this small.
    max_inline: int = 30


# ---------------------------------------------------------------------------
# 1. Numbers
# ---------------------------------------------------------------------------


def _decimal_text(value: float) -> str:
    return f"{value:.{_DIGITS}g}"


def short_fraction(value: float, max_denominator: int = 1000) -> Fraction | None:
    """``value`` as the fraction it was, or None.

    A float was the fraction p/q when q is at most ``max_denominator`` and either
    the float is the double nearest to p/q or its 15-digit decimal is exactly p/q,
    and ``p/q`` is no longer to write than the decimal (``0.5`` and ``1/3`` were
    fractions; ``0.1`` and ``0.7`` are decimals, as written).

    >>> short_fraction(0.5), short_fraction(1 / 3), short_fraction(0.7), short_fraction(1.2)
    (Fraction(1, 2), Fraction(1, 3), None, Fraction(6, 5))
    """
    if not math.isfinite(value) or not max_denominator or abs(value) >= 1e6:
        return None
    fraction = Fraction(value).limit_denominator(max_denominator)
    decimal = _decimal_text(value)
    if float(fraction) != value and fraction != Fraction(decimal):
        return None
    if fraction.denominator != 1 and len(str(fraction)) > len(repr(value)):
        return None
    return fraction


@functools.lru_cache(maxsize=1)
def _named_constants() -> list[tuple[float, sympy.Basic]]:
    bases = (sympy.pi, sympy.sqrt(sympy.pi), sympy.sqrt(2 * sympy.pi), sympy.E, sympy.sqrt(2),
             sympy.sqrt(3), sympy.log(2), sympy.log(10))
    factors = (1, 2, 3, 4, sympy.Rational(1, 2), sympy.Rational(1, 3), sympy.Rational(1, 4))
    return [(float(form), form) for base in bases for factor in factors
            for form in (factor * base, factor / base)]


def named_constant(value: float) -> sympy.Basic | None:
    """The constant ``value`` was computed as, if it is one of a few a formula would name.

    ``np.pi``, ``2 * np.pi``, ``np.sqrt(2 * np.pi)``, ``1 / np.sqrt(2 * np.pi)``,
    ``np.e``, ``np.log(2)``...: pi, sqrt(pi), sqrt(2 pi), e, sqrt(2), sqrt(3),
    log 2 and log 10, times or over 1, 2, 3, 4, 1/2, 1/3, 1/4, within 4 units in
    the last place (NumPy rounds each step). The graph keeps the float.

    >>> import numpy as np
    >>> named_constant(np.pi), named_constant(1 / np.sqrt(2 * np.pi)), named_constant(3.14)
    (pi, sqrt(2)/(2*sqrt(pi)), None)
    """
    if value == 0 or not math.isfinite(value):
        return None
    magnitude = abs(value)
    for number, form in _named_constants():
        if abs(magnitude - number) <= 4 * math.ulp(number):
            return form if value > 0 else -form
    return None


def number_style(floats: Iterable[float], numbers: str = "auto", max_denominator: int = 1000) -> str:
    """``"fractions"`` or ``"decimals"``: how a block holding these floats prints its numbers.

    ``numbers="auto"`` gives fractions when every float that is not a whole number
    was a fraction (:func:`short_fraction`), and decimals as soon as one was
    not: a block never mixes ``0.7`` with ``\\frac{6}{5}``.

    >>> number_style([0.5, 0.25]), number_style([0.7, -1.2]), number_style([])
    ('fractions', 'decimals', 'fractions')
    >>> number_style([0.7], "fractions")
    'fractions'
    """
    if numbers not in NUMBER_STYLES:
        raise ValueError(f"numbers={numbers!r} is not one of {NUMBER_STYLES}")
    if numbers != "auto":
        return numbers
    for value in floats:
        if math.isfinite(value) and not float(value).is_integer() \
                and short_fraction(value, max_denominator) is None and named_constant(value) is None:
            return "decimals"
    return "fractions"


def exact_number(value: sympy.Basic, style: str, max_denominator: int = 1000) -> sympy.Basic:
    """A float constant as the exact number it stands for in ``style``; anything else as is.

    Whole numbers become integers; in ``"fractions"`` a float becomes its short
    fraction (or, forced, the fraction of its decimal: ``0.7`` is ``7/10``); in
    ``"decimals"`` it becomes its 15-digit decimal as an exact rational, which
    :func:`display_numbers` prints as that decimal again.

    >>> exact_number(sympy.Float(2.0), "decimals"), exact_number(sympy.Float(0.7), "decimals")
    (2, 7/10)
    >>> exact_number(sympy.Float(1 / 3), "fractions"), exact_number(sympy.Float(0.7 * 0.7), "decimals")
    (1/3, 49/100)
    """
    if not isinstance(value, sympy.Float):
        return value
    number = float(value)
    if not math.isfinite(number):
        return value
    if number.is_integer() and abs(number) < _LARGEST_DECIMAL:
        return sympy.Integer(int(number))
    named = named_constant(number)
    if named is not None:
        return named
    if style == "fractions":
        fraction = short_fraction(number, max_denominator)
        if fraction is not None:
            return sympy.Rational(fraction.numerator, fraction.denominator)
    if not _SMALLEST_DECIMAL <= abs(number) < _LARGEST_DECIMAL:
        return value
    return sympy.Rational(_decimal_text(number))


def _is_root_exponent(exponent: sympy.Basic) -> bool:
    """±1/2 and ±1/3: exponents SymPy prints as roots, which read the same in both styles."""
    return exponent.is_Rational and abs(exponent.p) == 1 and exponent.q in (2, 3)


def display_numbers(expression: sympy.Basic, style: str) -> sympy.Basic:
    """``expression`` with its numbers in ``style``: in ``"decimals"``, fractions become decimals.

    Exponents printed as roots (``\\sqrt{x}``, ``\\sqrt[3]{x}``) stay; in
    ``"fractions"`` nothing changes (the numbers are exact already).

    >>> x = sympy.Symbol("x")
    >>> display_numbers(sympy.Rational(7, 10) * x + sympy.sqrt(x) / 4 + x ** sympy.Rational(3, 2), "decimals")
    0.25*sqrt(x) + 0.7*x + x**1.5
    """
    if style != "decimals":
        return expression
    return _decimals(expression, {})


def _decimals(expression, memo: dict):
    if expression.is_Rational:
        return expression if expression.is_Integer else sympy.Float(expression, _DIGITS)
    if expression.is_Atom:
        return expression
    done = memo.get(expression)
    if done is not None:
        return done
    if expression.is_Pow and _is_root_exponent(expression.exp):
        args = (_decimals(expression.base, memo), expression.exp)
    else:
        args = tuple(_decimals(arg, memo) for arg in expression.args)
    result = expression if args == expression.args else expression.func(*args)
    memo[expression] = result
    return result


def _float_values(expressions: Iterable[sympy.Basic]) -> list[float]:
    return [float(f) for expression in expressions for f in expression.atoms(sympy.Float)]


def _exact(expressions: list, style: str, max_denominator: int) -> list:
    floats = set().union(*(expression.atoms(sympy.Float) for expression in expressions))
    if not floats:
        return expressions
    exact = {f: exact_number(f, style, max_denominator) for f in floats}
    return [expression.xreplace(exact) for expression in expressions]


def temporary(number: int) -> sympy.Dummy:
    """The ``number``-th temporary: a Dummy whose name sorts as the number does.

    SymPy orders the factors of a product by name, so ``t10`` would print
    before ``t9``; ``t0000009`` does not.

    >>> sorted([temporary(10), temporary(9)], key=sympy.default_sort_key)
    [_t0000009, _t0000010]
    """
    return sympy.Dummy(f"t{number:07d}")


# ---------------------------------------------------------------------------
# 2. Noise temporaries
# ---------------------------------------------------------------------------


def is_noise(expression: sympy.Basic, fractions: bool = True) -> bool:
    """True for what is not worth a line: a number, a value, or a number times a value.

    ``fractions=False``: a fraction times a value (``t/6``) is not noise. Written
    where it is used, it puts a fraction bar inside each use (``\\frac{\\frac{t}{6}
    + s}{4}``): in a long program of Taylor coefficients that makes every line longer.

    >>> x, t = sympy.Symbol("x"), sympy.Dummy("t")
    >>> is_noise(-t), is_noise(2 * x), is_noise(-sympy.Rational(7, 10) * t), is_noise(x + 1)
    (True, True, True, False)
    >>> is_noise(t / 6), is_noise(t / 6, fractions=False)
    (True, False)
    """
    if not isinstance(expression, sympy.Expr):
        return False  # a condition (x > 0) is not a number
    if expression.is_number or expression.is_Symbol:
        return True
    coefficient, rest = expression.as_coeff_Mul()
    return coefficient.is_Number and rest.is_Symbol and (fractions or coefficient.is_Integer)


def _size(expression: sympy.Basic) -> int:
    """Operations in ``expression``: its nodes that are not atoms."""
    return sum(1 for node in sympy.preorder_traversal(expression) if node.args)


def substitute(expression: sympy.Basic, rule: dict) -> sympy.Basic:
    """``expression.xreplace(rule)``, keeping a number that stood before a sum there.

    SymPy multiplies a number into a sum when it builds the product of the two:
    substituting into ``(t_{1} + 2 t_{2})/8`` rebuilt it as ``t_{1}/8 + t_{2}/4``.
    Written where a value is used, a temporary must not change how its user reads;
    a number before the temporary itself (``t/4``) still multiplies into it.

    >>> x, y, t = sympy.symbols("x y t")
    >>> line = sympy.factor_terms(x / 8 + t / 4)
    >>> line.xreplace({t: 2 * y}), substitute(line, {t: 2 * y})
    (x/8 + y/2, (x + 4*y)/8)
    """
    memo: dict = {}

    def walk(node):
        if node in rule:
            return rule[node]
        if not node.args:
            return node
        done = memo.get(node)
        if done is not None:
            return done
        args = tuple(walk(arg) for arg in node.args)
        if args == node.args:
            result = node
        elif (node.is_Mul and len(args) == 2 and node.args[0].is_Rational and node.args[1].is_Add
              and args[1].is_Add):
            result = sympy.Mul(*args, evaluate=False)  # (a + b)/8 stays so (a temporary's own
            # 2 t/8 still merges: only a product that was a number times a sum stays one)
        else:
            result = node.func(*args)
        memo[node] = result
        return result

    return walk(expression)


def inline_noise(assignments: list, outputs: list, max_inline: int | None = None, *,
                 fractions: bool = True) -> tuple[list, list]:
    """Write out every noise temporary (:func:`is_noise`) and every one used once.

    A temporary used once stays a line when writing it out would make its
    consumer larger than ``max_inline`` operations (None: no limit), so a large
    program keeps lines of bounded size. ``fractions``: as :func:`is_noise`'s.

    >>> x = sympy.Symbol("x")
    >>> t1, t2, t3 = sympy.Dummy("t1"), sympy.Dummy("t2"), sympy.Dummy("t3")
    >>> program = [(t1, sympy.exp(-x)), (t2, t1 + 1), (t3, -t1)]
    >>> inline_noise(program, [t3 / t2**2, t1])
    ([(_t1, exp(-x))], [-_t1/(_t1 + 1)**2, _t1])
    """
    for _ in range(3):  # writing one out can leave another used once; settles at once in practice
        before = len(assignments)
        assignments, outputs = _inline_noise_once(assignments, list(outputs), fractions)
        assignments, outputs = _inline_used_once(assignments, outputs, max_inline)
        if len(assignments) == before:
            break
    return assignments, outputs


def _inline_noise_once(assignments: list, outputs: list, fractions: bool) -> tuple[list, list]:
    noise: dict = {}
    kept = []
    for symbol, expression in assignments:
        if noise:
            expression = substitute(expression, noise)
        if is_noise(expression, fractions):
            noise[symbol] = expression
        else:
            kept.append((symbol, expression))
    if noise:
        outputs = [substitute(output, noise) for output in outputs]
    return kept, outputs


def _inline_used_once(assignments: list, outputs: list, max_inline: int | None) -> tuple[list, list]:
    """Write each temporary that appears once into the line where it appears."""
    outputs = list(outputs)
    temporaries = {symbol: index for index, (symbol, _) in enumerate(assignments)}
    lines = [e for _, e in assignments] + outputs
    count: Counter = Counter()
    consumer: dict = {}
    for index, expression in enumerate(lines):
        for node in sympy.preorder_traversal(expression):
            if node in temporaries:
                count[node] += 1
                consumer[node] = index
    if all(count[symbol] > 1 for symbol in temporaries):
        return assignments, outputs
    size = None if max_inline is None else [_size(e) for e in lines]
    depth = [_depth(e) for e in lines]
    written: dict = {}  # temporary -> its expression, for the temporaries written out
    pending: dict = {}  # line index -> temporaries to write into it
    for symbol, index in temporaries.items():
        if count[symbol] != 1:
            continue
        target = consumer[symbol]
        if depth[index] + depth[target] >= MAX_FORMULA_DEPTH:
            continue  # SymPy prints recursively: lines stay as shallow as the builder made them
        if size is not None and size[index] + size[target] > max_inline:
            continue
        depth[target] += depth[index]
        if size is not None:
            size[target] += size[index]
        written[symbol] = None
        pending.setdefault(target, []).append(symbol)
    if not written:
        return assignments, outputs
    # In order: a line's own written-out temporaries are complete before it is written anywhere.
    result = []
    for index, expression in enumerate(lines):
        if index in pending:
            expression = substitute(expression, {s: written[s] for s in pending[index]})
        if index < len(assignments):
            symbol = assignments[index][0]
            if symbol in written:
                written[symbol] = expression
            else:
                result.append((symbol, expression))
        else:
            outputs[index - len(assignments)] = expression
    return result, outputs


# ---------------------------------------------------------------------------
# 3. and 4. Rewrites, measured
# ---------------------------------------------------------------------------


def _expand(expression):
    # Products and integer powers of sums multiplied out; exponentials and logarithms
    # left whole (e^{a+b} stays one exponential).
    return sympy.expand(expression, power_exp=False, power_base=False, log=False, deep=False)


def _expand_then_factor_terms(expression):
    return sympy.factor_terms(_expand(expression))


def _cancel_factor_denominator(expression):
    """One fraction, its numerator multiplied out and its denominator factored:
    ``(y^2 - x^2)/(x^2 + y^2)^2`` where ``cancel`` gives ``.../(x^4 + 2 x^2 y^2 + y^4)``."""
    numerator, denominator = sympy.fraction(sympy.cancel(expression))
    return sympy.expand(numerator) / sympy.factor(denominator)


def _rational_terms_together(expression):
    """The terms that are rational functions of the symbols as one factored fraction, the
    others as they are: ``2 x y/(x^2 + y^2)^2 - cos(y)`` rather than one fraction over all."""
    terms = sympy.Add.make_args(expression)
    rational = [term for term in terms if term.is_rational_function()]
    if len(rational) < 2 or len(rational) == len(terms):
        return expression  # one term, or all: factor on the whole does it
    rest = [term for term in terms if not term.is_rational_function()]
    return sympy.Add(sympy.factor(sympy.Add(*rational)), *rest)


#: The rewrites tried on each expression, cheapest first, with the largest expression
#: (operations, symbols) each is tried on: factoring costs grow fast with the number of
#: symbols (a sum of products of 40 temporaries takes SymPy's factor seconds).
_REWRITES: tuple[tuple[str, Callable, int, int], ...] = (
    ("factor_terms", sympy.factor_terms, 400, 1000),
    ("expand", _expand, 200, 1000),
    ("expand, factor_terms", _expand_then_factor_terms, 200, 1000),
    ("cancel", sympy.cancel, 150, 8),
    ("cancel, factor the denominator", _cancel_factor_denominator, 150, 6),
    ("rational terms together", _rational_terms_together, 150, 6),
    ("factor", sympy.factor, 150, 6),
    ("simplify", sympy.simplify, 16, 4),
)

# Powers of sums multiplied out only up to this exponent: (a + b)^50 has 51 terms.
_MAX_EXPANDED_POWER = 8


def _expandable(expression) -> bool:
    return not any(p.base.is_Add and p.exp.is_Integer and abs(p.exp) > _MAX_EXPANDED_POWER
                   for p in expression.atoms(sympy.Pow))


def _sample_points(symbols: list) -> list[dict]:
    """Two points with a different value in (0, 1) for each symbol (logs, roots, 1 - p defined)."""
    return [{s: sympy.Rational(i + 2, i + 7) for i, s in enumerate(symbols)},
            {s: sympy.Rational(2 * i + 3, 2 * i + 7) for i, s in enumerate(symbols)}]


def _agrees(original, rewritten) -> bool:
    """Whether ``rewritten`` has the value of ``original`` at two points (where both have one)."""
    symbols = sorted(original.free_symbols | rewritten.free_symbols, key=sympy.default_sort_key)
    for point in _sample_points(symbols):
        try:
            a = complex(original.xreplace(point).evalf(30))
            b = complex(rewritten.xreplace(point).evalf(30))
        except (TypeError, ValueError, ArithmeticError):
            continue  # no value here (an undefined function, a pole): the other point decides
        if not (math.isfinite(abs(a)) and math.isfinite(abs(b))):
            continue
        if abs(a - b) > 1e-9 * max(1.0, abs(a)):
            return False
    # A rewrite that cannot be checked at either point is still SymPy's own, exact rewrite.
    return True


class _Clock:
    """The time budget, in CPU seconds of this process: on a shared machine, other jobs
    make the wall clock run faster than the work, and the block would depend on them."""

    def __init__(self, seconds: float):
        self.deadline = time.process_time() + seconds

    def expired(self) -> bool:
        return time.process_time() > self.deadline


def _hide_decimals(expression) -> tuple[sympy.Basic, dict]:
    """``expression`` with each fractional number stood for by a symbol, and the way back.

    In a decimal block, rewrites must not clear denominators: ``cancel`` turns
    ``-0.7 / (t + 1)`` into ``-7 / (10 t + 10)``, where the decimal the user wrote
    is gone. With ``0.7`` a symbol, it stays one number.
    """
    symbols: dict = {}

    def hide(node):
        if node.is_Rational:
            if node.is_Integer:
                return node
            magnitude = abs(node)
            if magnitude not in symbols:
                symbols[magnitude] = sympy.Dummy("c")
            return symbols[magnitude] if node > 0 else -symbols[magnitude]
        if node.is_Atom:
            return node
        if node.is_Pow:
            return node.func(hide(node.base), node.exp)  # exponents stay numbers (roots)
        return node.func(*(hide(arg) for arg in node.args))

    hidden = hide(expression)
    return hidden, {symbol: number for number, symbol in symbols.items()}


def _has_exponentials(product) -> bool:
    return product.is_Mul and sum(1 for factor in product.args if isinstance(factor, sympy.exp)) > 1


def _splits_exponentials(expression) -> bool:
    return any(_has_exponentials(product) for product in expression.atoms(sympy.Mul))


def _join_exponentials(expression):
    """``e^{a} e^{b}`` as ``e^{a + b}`` in every product (SymPy's polynomial rewrites split them)."""
    def join(product):
        exponents = [factor.args[0] for factor in product.args if isinstance(factor, sympy.exp)]
        rest = [factor for factor in product.args if not isinstance(factor, sympy.exp)]
        return sympy.Mul(*rest, sympy.exp(sympy.Add(*exponents)))

    return expression.replace(_has_exponentials, join)


#: The rewrites that stay cheap on any line (no polynomial algebra): the line-by-line pass
#: of programs too large for the short form uses only these.
_CHEAP_REWRITES = ("factor_terms", "expand", "expand, factor_terms")


def _rewrites(expression, clock: _Clock, style: str = "fractions", cheap: bool = False) -> dict:
    """``{name: rewritten}`` for each rewrite of ``expression`` that is new and agrees with it."""
    found: dict = {}
    size = _size(expression)
    work, back = _hide_decimals(expression) if style == "decimals" else (expression, {})
    split_already = _splits_exponentials(work)
    seen = {expression}
    symbols = len(expression.free_symbols)
    for name, rewrite, largest, most_symbols in _REWRITES:
        if size > largest or symbols > most_symbols or clock.expired() or (
                cheap and name not in _CHEAP_REWRITES):
            continue
        if "expand" in name and not _expandable(expression):
            continue
        try:
            candidate = rewrite(work)
            if not split_already and _splits_exponentials(candidate):
                candidate = _join_exponentials(candidate)
        except Exception:  # noqa: BLE001 - a rewrite SymPy cannot do leaves the form we have
            continue
        if back:
            candidate = candidate.xreplace(back)
        if candidate in seen:
            continue
        seen.add(candidate)
        if _agrees(expression, candidate):
            found[name] = candidate
    return found


# A rewrite replaces the form as built only if it reads this many signs shorter: the
# built form follows the function as the user wrote it (t (1 - 4 t) for 4 t (1 - t)
# steps), and one sign is not worth losing that.
_REWRITE_GAIN = 2


def _best_form(expression, forms, length: Callable):
    """The shortest of ``forms``, if it beats ``expression`` by ``_REWRITE_GAIN`` signs.

    Of forms within one sign of the shortest, the one with the fewest operations
    wins: ``k (x_{1} - x_{2} + 1)`` over ``k x_{1} - k x_{2} + k``.
    """
    if not forms:
        return expression
    shortest = min(length(form) for form in forms)
    near = [form for form in forms if length(form) <= shortest + 1]
    best = min(near, key=lambda form: (sympy.count_ops(form), length(form)))
    return best if length(best) <= length(expression) - _REWRITE_GAIN else expression


def _shortest(expression, length: Callable, clock: _Clock, style: str = "fractions",
              cheap: bool = False):
    """The shortest of ``expression`` and its rewrites that agree with it (see _best_form)."""
    return _best_form(expression, list(_rewrites(expression, clock, style, cheap).values()), length)


# In the line-by-line pass, a temporary of more operations than this is never written
# out (used twice or more, it would rarely pay, and each trial reprints its users).
_LARGEST_WRITTEN_OUT = 6

# What a temporary's own line adds besides its expression, in signs: "t_{1} =" and the
# reader's trip to look it up.
_LINE_OVERHEAD = 4


def _block_length(assignments, outputs, length: Callable) -> int:
    return (sum(_LINE_OVERHEAD + length(e) for _, e in assignments)
            + sum(length(o) for o in outputs))


def _writing_out(index: int, lines: list, lengths: list, length: Callable,
                 allowed: Callable = lambda expression: True,
                 may_grow: Callable = lambda line: True) -> tuple[int, dict] | None:
    """What writing out temporary ``index`` of ``lines`` does: (change of length, new lines),
    or None if a line using it may not grow (``may_grow(i)``, asked first: rebuilding a
    long sum costs SymPy more than the question) or a changed line is not ``allowed``."""
    symbol, value = lines[index]
    users = [i for i in range(index + 1, len(lines)) if symbol in lines[i][1].free_symbols]
    if not all(may_grow(i) for i in users):
        return None
    rule = {symbol: value}
    changed = {i: substitute(lines[i][1], rule) for i in users}
    if not all(allowed(e) for e in changed.values()):
        return None
    delta = sum(length(e) - lengths[i] for i, e in changed.items()) - (_LINE_OVERHEAD + lengths[index])
    return delta, changed


def _prune_temporaries(assignments, outputs, length: Callable, clock: _Clock, *,
                       max_temporaries: int | None = None, max_inline: int | None = None,
                       small: bool = True, fractions: bool = True):
    """Write out noise temporaries, those used once, and those whose line costs more than it saves.

    ``small``: a short program (the short form's): the temporary whose writing
    out shortens the block most goes first, each round, and one whose line
    saves exactly what it costs is written out too. Otherwise one sweep, latest
    temporary first, per round (linear rounds for programs of hundreds of lines), and only
    where that saves ``_REWRITE_GAIN`` signs: the lines follow the program as written.
    ``max_inline``: never make a line larger than this many operations. ``fractions``:
    whether a fraction times a value is noise (:func:`is_noise`).
    """
    assignments, outputs = inline_noise(assignments, outputs, max_inline, fractions=fractions)
    lines = list(assignments) + [(None, o) for o in outputs]
    lengths = [length(e) for _, e in lines]

    def apply(index, changed):
        for i, expression in changed.items():
            lines[i] = (lines[i][0], expression)
            lengths[i] = length(expression)
        del lines[index], lengths[index]

    def temporaries():
        return sum(1 for symbol, _ in lines if symbol is not None)

    def allowed(expression) -> bool:
        return _depth(expression) < MAX_FORMULA_DEPTH and (
            max_inline is None or _size(expression) <= max_inline)

    def may_grow(line: int) -> bool:
        return max_inline is None or _size(lines[line][1]) < max_inline

    def trial(index):
        """(change of length, changed lines), or None where the limits forbid it."""
        if not small and _size(lines[index][1]) > _LARGEST_WRITTEN_OUT:
            return None  # in a long program, a large shared value stays shared (and unprinted)
        return _writing_out(index, lines, lengths, length, allowed, may_grow)

    changed_any = True
    # A short program's rounds are bounded by its temporaries (and cost printing, not SymPy's
    # rewrites): they always finish, so the block does not depend on the machine's load.
    while changed_any and (small or not clock.expired()):
        changed_any = False
        if small:
            # Most saving first; each is tried again just before (an earlier one may have
            # changed its lines), and applied if it still saves.
            ranked = sorted(((found[0], index) for index in range(temporaries())
                             if (found := trial(index)) is not None and found[0] <= 0),
                            key=lambda pair: pair[0])
            for symbol in [lines[index][0] for _, index in ranked]:
                index = next((i for i, (s, _) in enumerate(lines) if s is symbol), None)
                found = None if index is None else trial(index)
                if found is not None and found[0] <= 0:
                    apply(index, found[1])
                    changed_any = True
            continue
        # Latest first: writing out a late temporary never changes an earlier line.
        for index in reversed(range(temporaries())):
            if index >= temporaries() or clock.expired():
                continue
            found = trial(index)
            if found is not None and found[0] <= -_REWRITE_GAIN:
                apply(index, found[1])
                changed_any = True
    while max_temporaries is not None and temporaries() > max_temporaries:
        options = [(_writing_out(i, lines, lengths, length), i) for i in range(temporaries())]
        (_, changed), index = min(options, key=lambda option: option[0][0])
        apply(index, changed)
    count = temporaries()
    assignments, outputs = inline_noise(lines[:count], [e for _, e in lines[count:]], max_inline,
                                        fractions=fractions)
    return _plain_temporaries(assignments, outputs, length) if small else (assignments, outputs)


def _plain_temporaries(assignments, outputs, length: Callable):
    """A temporary that is a number times something becomes that something, its uses taking
    the number, where that makes the block no longer: ``t_{2} = -1/r^{3}`` read in
    ``- t_{2} - t_{3} x^{2}`` becomes ``t_{2} = 1/r^{3}`` and ``t_{2} - t_{3} x^{2}``;
    ``t_{2} = \\sigma(w)/4`` becomes ``\\sigma(w)``. (Not always: SymPy spreads a number
    over a sum, and ``(t_{1} + 2 t_{2})/8`` with ``t_{1}`` doubled reads ``t_{1}/4 + t_{2}/4``.)"""
    current = _block_length(assignments, outputs, length)
    for symbol, value in list(assignments):
        if not isinstance(value, sympy.Expr):
            continue
        coefficient, _ = value.as_coeff_Mul()
        if not coefficient.is_Rational or coefficient == 1:
            continue
        use = {symbol: coefficient * symbol}
        trial = ([(s, (e / coefficient if s is symbol else substitute(e, use))) for s, e in assignments],
                 [substitute(o, use) for o in outputs])
        trial_length = _block_length(*trial, length)
        if trial_length <= current:
            (assignments, outputs), current = trial, trial_length
    return assignments, outputs


def written_out(assignments: list, outputs: list) -> list:
    """The outputs with every temporary replaced by its expression.

    >>> x, t = sympy.Symbol("x"), sympy.Dummy("t")
    >>> written_out([(t, sympy.sin(x))], [t**2 + t])
    [sin(x)**2 + sin(x)]
    """
    values: dict = {}
    for symbol, expression in assignments:
        values[symbol] = substitute(expression, values) if values else expression
    return [substitute(output, values) for output in outputs] if values else list(outputs)


def _written_out_size(assignments, outputs, limit: int) -> tuple[int, int]:
    """Operations and nesting depth of the outputs with every temporary written out.

    Counted, not built; past ``limit`` operations the count stops (and exceeds it).
    """
    size: dict = {}
    depth: dict = {}
    for symbol, expression in assignments:
        size[symbol], depth[symbol] = _measure_with(expression, size, depth)
        if size[symbol] > limit:
            return limit + 1, depth[symbol]
    measured = [_measure_with(output, size, depth) for output in outputs]
    return sum(s for s, _ in measured), max((d for _, d in measured), default=0)


def _measure_with(expression, size: dict, depth: dict) -> tuple[int, int]:
    """(operations, depth) of ``expression`` with the temporaries in ``size`` written out."""
    total = deepest = 0
    stack = [(expression, 0)]
    while stack:
        node, level = stack.pop()
        if node.args:
            total += 1
            deepest = max(deepest, level + 1)
            stack.extend((arg, level + 1) for arg in node.args)
        elif node in size:
            total += size[node]
            deepest = max(deepest, level + depth[node])
    return total, deepest


def _depth(expression) -> int:
    return _measure_with(expression, {}, {})[1]


def _short_form(assignments, outputs, options: DisplayOptions, length, clock, style):
    """Every output written out and rewritten, then the shared subexpressions that pay kept.

    Besides the shortest form of each output, each rewrite applied to every
    output is tried as a block: the same form everywhere can share more (the two
    partial derivatives of a logistic loss over one denominator).
    """
    written = written_out(assignments, outputs)
    rewritten = {output: _rewrites(output, clock, style) for output in dict.fromkeys(written)}
    choices = [{output: _best_form(output, list(forms.values()), length)
                for output, forms in rewritten.items()}]
    for name, *_ in _REWRITES:
        choice = {output: forms.get(name, output) for output, forms in rewritten.items()}
        if choice not in choices:
            choices.append(choice)
    blocks = []
    for choice in choices:
        if clock.expired() and blocks:
            break
        simplified = [choice[output] for output in written]
        symbols = (temporary(i) for i in itertools.count(1))
        shared, reduced = sympy.cse(simplified, symbols=symbols, order="none")
        blocks.append(_prune_temporaries(list(shared), list(reduced), length, clock,
                                         max_temporaries=options.max_temporaries))
    best = min(blocks, key=lambda block: _block_length(*block, length))
    if _block_length(*best, length) > _block_length(*blocks[0], length) - _REWRITE_GAIN:
        best = blocks[0]  # the shortest form of each output, unless a uniform block reads clearly shorter
    # With the shared values named, each line can have a shorter form of its own
    # (t_{2} (t_{1}^{2} - \sigma^{2}) / \sigma^{4} once t_{1}, t_{2} stand for the long parts).
    assignments, outputs = best
    assignments = [(s, _shortest(e, length, clock, style)) for s, e in assignments]
    outputs = [_shortest(o, length, clock, style) for o in outputs]
    return _prune_temporaries(assignments, outputs, length, clock,
                              max_temporaries=options.max_temporaries)


def _line_by_line(assignments, outputs, options: DisplayOptions, length, clock, style):
    """Each line rewritten on its own, temporaries as atoms, between two prunings."""
    def prune(assignments, outputs):
        return _prune_temporaries(assignments, outputs, length, clock, max_inline=options.max_inline,
                                  small=False, fractions=style == "decimals")

    def rewritten(expression):
        # small lines only: a long sum is long for its terms, and rewriting it costs seconds
        if clock.expired() or _size(expression) > 2 * options.max_inline:
            return expression
        return _shortest(expression, length, clock, style, cheap=True)

    assignments, outputs = prune(assignments, outputs)
    assignments = [(s, rewritten(e)) for s, e in assignments]
    return prune(assignments, [rewritten(o) for o in outputs])


def simplify_for_display(
    assignments: list,
    outputs: list,
    options: DisplayOptions | None = None,
    *,
    length: Callable[[sympy.Basic], int] | None = None,
    style: str | None = None,
) -> tuple[list, list]:
    """The program ``(assignments, outputs)`` rewritten for people (see the module's docstring).

    Args:
        assignments: ``(temporary, expression)`` pairs in order; temporaries are
            SymPy symbols (``Dummy``) that later expressions and outputs use.
        outputs: the output expressions.
        options: a :class:`DisplayOptions`.
        length: how long an expression prints (the printed LaTeX without spaces,
            by default SymPy's ``latex``); temporaries should print as a name of
            their usual length.
        style: ``"fractions"`` or ``"decimals"`` if the caller has made the numbers
            exact already (with :func:`exact_number`); None: decided here from
            the floats in the expressions.

    Returns ``(assignments, outputs)`` of the same form, numbers in the block's style.
    """
    options = options or DisplayOptions()
    if length is None:
        length = _sympy_latex_length
    assignments, outputs = list(assignments), list(outputs)
    if style is None:
        expressions = [e for _, e in assignments] + outputs
        style = number_style(_float_values(expressions), options.numbers, options.max_denominator)
        exact = _exact(expressions, style, options.max_denominator)
        assignments = [(s, e) for (s, _), e in zip(assignments, exact)]
        outputs = exact[len(assignments):]

    @functools.lru_cache(maxsize=4096)
    def shown_length(expression) -> int:
        return length(display_numbers(expression, style))

    if options.simplify:
        # In the shared form a fraction times a value keeps its line (its fraction bar
        # would go into every use); the short form writes it out where that is shorter.
        assignments, outputs = inline_noise(assignments, outputs, options.max_inline,
                                            fractions=style == "decimals")
        clock = _Clock(options.time_budget)
        size, depth = _written_out_size(assignments, outputs, options.simplify_below)
        if size <= options.simplify_below and depth < MAX_FORMULA_DEPTH:
            short = _short_form(assignments, outputs, options, shown_length, clock, style)
            if _block_length(*short, shown_length) <= _block_length(assignments, outputs, shown_length):
                assignments, outputs = short
        elif len(assignments) <= options.simplify_lines:
            assignments, outputs = _line_by_line(assignments, outputs, options, shown_length, clock,
                                                 style)
    if style == "decimals":
        assignments = [(s, display_numbers(e, style)) for s, e in assignments]
        outputs = [display_numbers(o, style) for o in outputs]
    return assignments, outputs


def _sympy_latex_length(expression) -> int:
    return len("".join(sympy.latex(expression).split()))
