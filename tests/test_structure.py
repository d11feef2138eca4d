"""The package's shape stays as issue 28 left it: rooms of a readable size, primitives in
few places, and names shared between modules public.

Read with :mod:`ast`, so docstrings and comments do not count where code is meant:

* no module over 1,000 lines, except the catalogue's stanza modules (one declaration per
  primitive, which grow with the catalogue by design);
* no function over 80 lines (docstring included);
* a primitive's *footprint* -- the package files whose code names it -- has a median of
  at most 4 over the ten primitives issue 28 measured;
* no ``from symad.x import _private`` across modules.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import statistics
import tokenize
from pathlib import Path

import symad

PACKAGE = Path(symad.__file__).resolve().parent
MODULES = sorted(PACKAGE.rglob("*.py"))
#: The stanza modules: one declaration per primitive.
CATALOGUE_STANZAS = {"primitives.py", "special.py"}
#: The primitives issue 28 counted (median 12.5 files then).
FOOTPRINT_NAMES = ("tanh", "arctan2", "cumsum", "erf", "logaddexp", "sinh", "expm1", "hypot",
                   "cbrt", "maximum")


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.cache
def code_only(path: Path) -> str:
    """The module's tokens without comments and docstrings (module, class and function ones)."""
    source = path.read_text(encoding="utf-8")
    docstring_lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    kept = [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type != tokenize.COMMENT
            and not (token.type == tokenize.STRING and token.start[0] in docstring_lines)]
    return " ".join(kept)


def footprint(name: str) -> list[str]:
    """The package files whose code names ``name``."""
    pattern = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9])")
    return [_relative(path) for path in MODULES if pattern.search(code_only(path))]


def test_no_module_is_over_1000_lines_but_the_catalogues():
    long = {_relative(path): count for path in MODULES
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > 1000
            and _relative(path) not in CATALOGUE_STANZAS}
    assert not long, f"modules over 1,000 lines: {long}"


def test_no_function_is_over_80_lines():
    long = [f"{_relative(path)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in MODULES for node in ast.walk(_tree(path))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > 80]
    assert not long, f"functions over 80 lines: {long}"


def test_a_primitive_is_named_in_few_files():
    counts = {name: footprint(name) for name in FOOTPRINT_NAMES}
    median = statistics.median(len(files) for files in counts.values())
    assert median <= 4, {name: files for name, files in counts.items()}


def test_code_only_strips_docstrings_and_comments(tmp_path):
    module = tmp_path / "example.py"
    module.write_text('"""tanh in the module docstring."""\n\n\ndef f(x):\n    """tanh."""\n'
                      '    return x  # tanh\n\n\nNAMES = ["tanh"]\n')
    text = code_only(module)
    assert text.count("tanh") == 1 and '"tanh"' in text


def test_no_private_name_is_imported_across_modules():
    private = [f"{_relative(path)}: from {node.module} import {alias.name}"
               for path in MODULES for node in ast.walk(_tree(path))
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("symad")
               for alias in node.names if alias.name.startswith("_")]
    assert not private, private


def test_the_walkthrough_primitive_lives_in_three_files():
    # docs/adding-a-primitive.md: logaddexp2 is a stanza, a partials row and a namespace line.
    assert footprint("logaddexp2") == ["numpy/elementwise.py", "primitives.py", "rules/partials.py"]
