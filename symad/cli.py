"""The ``symad`` command: derivatives of a formula typed on the command line.

::

    symad diff "log(x) + x*y - sin(y)" --wrt x y            # gradient, as formulas
    symad diff "exp(-x**2)" --wrt x --order 4 --latex       # 4th derivative, LaTeX
    symad hessian "x**2*y + y**3" --wrt x y --c             # Hessian, C source
    symad taylor "exp(sin(x))" --wrt x --order 3 --at 0     # Taylor coefficients

The expression is **never evaluated as Python**: it is parsed with
:func:`ast.parse` and walked with an allow-list (numbers, names, ``+ - * / **``,
unary ``-``/``+`` and calls of the functions in :data:`FUNCTIONS`: symad.numpy's
math functions and every function symad.special traces, ``gammaln``, ``jv``,
``zeta``, ...); each allowed node becomes a traced operation. Anything else
(attributes, subscripts, strings, lambdas, comprehensions, keyword arguments,
names starting with ``_``, exponents above 1000, input over 1000 characters)
is refused with a message and exit code 2.

The function's arguments are the ``--wrt`` names, in the order given, then
every other name in the order it first appears in the expression (``pi`` and
``e`` are constants; ``e**x`` is read as ``exp(x)``). A call with the wrong
number of arguments (``sin(x, y)``) and a ``--wrt`` name given twice are
refused with exit code 2.

Formulas are printed as ``F.latex()`` prints them (simplified for display, see
:mod:`symad.export.display`), as text or, with ``--latex``, as LaTeX.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import math
import sys
from collections.abc import Callable

__all__ = ["main", "parse_expression", "FUNCTIONS", "ExpressionError"]

MAX_LENGTH = 1000
MAX_NODES = 400
MAX_EXPONENT = 1000
MAX_ORDER = 20  # derivative formulas grow with the order; past this, use sd.derivative in Python


#: Helpers of symad.special that derivatives are written with, callable by their names too
#: (docs/special-functions.md lists them with the functions).
SPECIAL_HELPERS = ("polygamma_difference", "lambertw1p", "sinpi", "cospi")


def _functions() -> dict[str, Callable]:
    from symad import numpy as snp
    from symad import special as ssp
    from symad.ir.primitive import Primitive
    from symad.primitives import stop_gradient_p

    # symad.numpy's functions of numbers (each records the built-in primitive of its name)
    # that a formula calls by name: not those Python writes as operators (+, -, *, /, **,
    # negation), not truth-valued ones, not stop_gradient (no derivative to show).
    operators = {snp.add, snp.subtract, snp.multiply, snp.divide, snp.power, snp.negative}
    table = {
        name: function for name, function in vars(snp).items()
        if isinstance(getattr(function, "primitive", None), Primitive)
        and function.primitive.name == name and function.primitive.elementwise
        and function not in operators and not function.primitive.returns_boolean
        and not function.primitive.boolean_operands and function.primitive is not stop_gradient_p
    }
    elementary = list(table.values())
    # Every function symad.special traces, by its SciPy name (gamma, jv, zeta, ...), and the
    # helpers by their primitive's name: the same objects a Python caller traces.
    table.update({name: getattr(ssp, name) for name in ssp.__all__ if name != "SCIPY_UFUNCS"})
    by_primitive = {function.primitive.name: function for function in vars(ssp).values()
                    if isinstance(getattr(function, "primitive", None), Primitive)}
    table.update({name: by_primitive[name] for name in SPECIAL_HELPERS})
    # The names SymPy gives the same functions (asin, atan2, max: its classes' names), and ln.
    table.update({function.primitive._to_sympy.__name__.lower(): function
                  for function in elementary if isinstance(function.primitive._to_sympy, type)
                  and function.primitive._to_sympy.__name__.lower() not in table})
    table.update({"ln": table["log"], "yn": table["yv"]})
    return table


def _arity(function: Callable) -> tuple[int, int]:
    """The fewest and most positional arguments ``function`` takes (``zeta``: 1 or 2)."""
    positional = [p for p in inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return sum(1 for p in positional if p.default is p.empty), len(positional)


#: The functions an expression may call, by name (symad.numpy and symad.special functions).
FUNCTIONS = _functions()
#: How many arguments each function takes (fewest, most): checked before tracing, so a wrong count
#: is a one-line refusal rather than a TypeError from inside symad.
ARITY = {name: _arity(function) for name, function in FUNCTIONS.items()}
CONSTANTS = {"pi": math.pi, "e": math.e}


class ExpressionError(ValueError):
    """The expression uses something outside the allow-list (exit code 2)."""


# ---------------------------------------------------------------------------
# Parsing: an allow-list over Python's ast
# ---------------------------------------------------------------------------

_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.Pow: lambda a, b: a ** b}
_UNARY = {ast.USub: lambda a: -a, ast.UAdd: lambda a: a}


def _describe(node: ast.AST) -> str:
    kinds = {ast.Attribute: "attribute access is", ast.Subscript: "subscripts are",
             ast.Lambda: "lambdas are", ast.Compare: "comparisons are", ast.BoolOp: "and/or are",
             ast.IfExp: "conditional expressions are", ast.ListComp: "comprehensions are",
             ast.GeneratorExp: "comprehensions are", ast.Tuple: "tuples are", ast.List: "lists are",
             ast.Dict: "dicts are", ast.Starred: "starred arguments are",
             ast.NamedExpr: "assignments are", ast.Call: "calls are"}
    return kinds.get(type(node), f"{type(node).__name__} is")


def _constant_value(node: ast.AST) -> float | None:
    """The value of a subexpression made only of numbers and arithmetic, else None (bounded)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        inner = _constant_value(node.operand)
        return None if inner is None else _UNARY[type(node.op)](inner)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _constant_value(node.left), _constant_value(node.right)
        if left is None or right is None:
            return None
        try:
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                return math.inf
            return float(_BINARY[type(node.op)](left, right))
        except (OverflowError, ZeroDivisionError, ValueError):
            return math.inf
    return None


def _check(tree: ast.Expression) -> list[str]:
    """Refuse everything outside the allow-list; return the variable names in order of appearance."""
    names: list[str] = []
    count = 0
    for node in ast.walk(tree):
        count += 1
        if count > MAX_NODES:
            raise ExpressionError(f"the expression has more than {MAX_NODES} parts")
        if isinstance(node, (ast.Expression, ast.Load)) or type(node) in _BINARY \
                or type(node) in _UNARY:
            continue
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"only numbers are allowed as constants, not {node.value!r}")
        elif isinstance(node, ast.Name):
            if node.id.startswith("_"):
                raise ExpressionError(f"names starting with '_' are not allowed: {node.id!r}")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                raise ExpressionError(f"operator {type(node.op).__name__} is not allowed; "
                                      "use + - * / **")
            if isinstance(node.op, ast.Pow):
                exponent = _constant_value(node.right)
                if exponent is not None and not abs(exponent) <= MAX_EXPONENT:
                    raise ExpressionError(f"exponents are limited to {MAX_EXPONENT} in size")
        elif isinstance(node, ast.UnaryOp):
            if type(node.op) not in _UNARY:
                raise ExpressionError(f"operator {type(node.op).__name__} is not allowed")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                raise ExpressionError("only plain function names can be called, as in sin(x) "
                                      "(no attribute access, no calls of calls)")
            if node.func.id not in FUNCTIONS:
                raise ExpressionError(f"{node.func.id!r} is not a known function; known: "
                                      f"{', '.join(sorted(FUNCTIONS))}")
            if node.keywords:
                raise ExpressionError("keyword arguments are not allowed")
            fewest, most = ARITY[node.func.id]
            if not fewest <= len(node.args) <= most:
                expected = str(fewest) if fewest == most else f"{fewest} or {most}"
                plural = "argument" if expected == "1" else "arguments"
                raise ExpressionError(f"{node.func.id} takes {expected} {plural}, "
                                      f"got {len(node.args)}")
        else:
            raise ExpressionError(f"{_describe(node)} not allowed in an expression")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in FUNCTIONS and node.id not in CONSTANTS \
                and node.id not in names:
            names.append(node.id)
        elif isinstance(node, ast.Name) and node.id in FUNCTIONS and not _is_called(tree, node):
            raise ExpressionError(f"{node.id!r} is a function; call it, as in {node.id}(x)")
    return names


def _is_called(tree: ast.AST, name: ast.Name) -> bool:
    return any(isinstance(n, ast.Call) and n.func is name for n in ast.walk(tree))


def parse_expression(text: str, wrt: list[str] | None = None) -> Callable:
    """A traceable Python function computing the expression ``text``.

    Its positional parameters are ``wrt`` then the other names in order of
    appearance. Nothing in ``text`` is executed.

    >>> import symad as sd
    >>> f = parse_expression("log(x) + x*y - sin(y)", ["x", "y"])
    >>> list(__import__("inspect").signature(f).parameters)
    ['x', 'y']
    >>> sd.grad(f, (0, 1)).trace(1.0, 1.0).formula()
    (y + 1/x, x - cos(y))
    >>> parse_expression("x.__class__")
    Traceback (most recent call last):
    ...
    symad.cli.ExpressionError: attribute access is not allowed in an expression
    """
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the expression is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"not a formula: {error.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionError("the expression is nested too deeply") from None
    found = _check(tree)
    wrt = list(wrt or [])
    for index, name in enumerate(wrt):
        if not name.isidentifier() or name.startswith("_"):
            raise ExpressionError(f"--wrt name {name!r} is not a variable name")
        if name in FUNCTIONS or name in CONSTANTS:
            raise ExpressionError(f"--wrt name {name!r} is a function or constant")
        if name in wrt[:index]:
            raise ExpressionError(f"--wrt lists {name!r} twice; name each variable once")
    variables = wrt + [name for name in found if name not in wrt]

    def evaluate(node, env):
        if isinstance(node, ast.Expression):
            return evaluate(node.body, env)
        if isinstance(node, ast.Constant):
            return node.value  # ints stay exact: x**2 is a square, not x**2.0
        if isinstance(node, ast.Name):
            return env[node.id] if node.id in env else CONSTANTS[node.id]
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow) and isinstance(node.left, ast.Name) \
                    and node.left.id == "e" and _constant_value(node.right) is None:
                # e is the float 2.718...; e**x as exp(x) reads as the user meant it
                # (and differentiates to exp(x), not 2.718...**x*log(2.718...)).
                return FUNCTIONS["exp"](evaluate(node.right, env))
            return _BINARY[type(node.op)](evaluate(node.left, env), evaluate(node.right, env))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](evaluate(node.operand, env))
        if isinstance(node, ast.Call):
            return FUNCTIONS[node.func.id](*[evaluate(a, env) for a in node.args])
        raise ExpressionError(f"{_describe(node)} not allowed")  # unreachable after _check

    def expression(*args):
        return evaluate(tree, dict(zip(variables, args)))

    expression.__signature__ = inspect.Signature(
        [inspect.Parameter(v, inspect.Parameter.POSITIONAL_OR_KEYWORD) for v in variables])
    expression.__name__ = "f"
    return expression


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def _python_text(F) -> str:
    if hasattr(F, "source"):  # the compiler's standalone module, where it exists
        return F.source("numpy")
    assignments, outputs = F.cse()
    lines = [f"{symbol} = {value}" for symbol, value in assignments]
    labels = [f"out{i}" for i in range(len(outputs))]
    lines += [f"{label} = {value}" for label, value in zip(labels, outputs)]
    return "\n".join(lines)


def _formula(F):
    """``F.formula(simplify=True)`` (what ``--latex`` prints), its size-limit error reworded
    for the command line."""
    from symad.errors import ExportError

    try:
        return F.formula(simplify=True)
    except ExportError as error:
        message = str(error).split(" Use F.cse()")[0]
        raise ExportError(f"{message} Print the program with shared values kept as "
                          "temporaries instead: --python or --latex") from None


def _plain_text(F, labels: list[str]) -> str:
    formula = _formula(F)
    leaves = formula if isinstance(formula, tuple) else (formula,)
    flat = []
    for leaf in leaves:
        flat.extend(leaf if isinstance(leaf, tuple) else (leaf,))
    return "\n".join(f"{label} = {_text(value)}" for label, value in zip(labels, flat))


def _text(value) -> str:
    """A formula as text, decimals as short as they print in LaTeX (0.7, not 0.700000000000000)."""
    import sympy

    return sympy.sstr(value, full_prec=False)


def _emit(F, labels: list[str], options) -> str:
    if options.latex:
        return F.latex()
    if options.c:
        return F.to_c("symad_" + options.command).source
    if options.python:
        return _python_text(F)
    return _plain_text(F, labels)


def _run(options) -> str:
    import symad as sd

    f = parse_expression(options.expression, options.wrt)
    names = list(inspect.signature(f).parameters)
    point = [0.5] * len(names)
    positions = tuple(range(len(options.wrt)))
    if options.command == "diff":
        if options.order != 1:
            if len(options.wrt) != 1:
                raise ExpressionError("--order n needs exactly one --wrt variable")
            F = sd.derivative(f, options.order, 0).trace(*point)
            return _emit(F, [f"d^{options.order}f/d{options.wrt[0]}^{options.order}"], options)
        F = sd.grad(f, positions).trace(*point)
        return _emit(F, [f"df/d{name}" for name in options.wrt], options)
    if options.command == "hessian":
        F = sd.hessian(f, positions).trace(*point)
        return _emit(F, [f"d2f/d{a}d{b}" for a in options.wrt for b in options.wrt], options)
    # taylor: coefficients f^(k)(x)/k! for k = 0..n
    if len(options.wrt) != 1:
        raise ExpressionError("taylor needs exactly one --wrt variable")
    # One Taylor-mode sweep gives every order at once.
    T = sd.taylor(f, options.order, 0).trace(*point)
    labels = [f"c{k}" for k in range(options.order + 1)]
    if options.at is not None:
        values = [options.at] + point[1:]
        return "\n".join(f"{label} = {float(c)!r}" for label, c in zip(labels, T(*values)))
    if options.latex or options.c or options.python:
        return _emit(T, labels, options)
    return "\n".join(f"{label} = {_text(c)}" for label, c in zip(labels, _formula(T)))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symad", description="Derivatives of a formula, as formulas, LaTeX, Python or C. "
        "EXPR is parsed with an allow-list, never evaluated.")
    commands = parser.add_subparsers(dest="command", required=True)
    for command, text in (("diff", "gradient, or the n-th derivative with --order"),
                          ("hessian", "matrix of second derivatives"),
                          ("taylor", "Taylor coefficients f^(k)/k! up to --order")):
        sub = commands.add_parser(command, help=text)
        sub.add_argument("expression", metavar="EXPR")
        sub.add_argument("--wrt", nargs="+", required=True, metavar="NAME")
        sub.add_argument("--order", type=int, default=1 if command != "taylor" else 3)
        if command == "taylor":
            sub.add_argument("--at", type=float, default=None, help="evaluate the coefficients here")
        formats = sub.add_mutually_exclusive_group()
        formats.add_argument("--latex", action="store_true")
        formats.add_argument("--python", action="store_true")
        formats.add_argument("--c", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 symad error, 2 refused input).

    >>> main(["diff", "x**3", "--wrt", "x"])
    df/dx = 3*x**2
    0
    """
    from symad.errors import SymadError

    options = _parser().parse_args(argv)
    if not 0 <= options.order <= MAX_ORDER:
        print(f"symad: --order must be between 0 and {MAX_ORDER}", file=sys.stderr)
        return 2
    try:
        print(_run(options))
    except ExpressionError as error:
        print(f"symad: {error}", file=sys.stderr)
        return 2
    except (ZeroDivisionError, OverflowError, RecursionError) as error:
        print(f"symad: the expression cannot be computed: {error or type(error).__name__}",
              file=sys.stderr)
        return 2
    except SymadError as error:
        print(f"symad: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
