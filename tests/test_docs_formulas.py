"""docs/formulas.md: every Python block runs, and the output shown after it is what it prints."""

import contextlib
import io
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "formulas.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def test_python_blocks_run_and_print_what_the_page_shows():
    blocks = BLOCK.findall(PAGE.read_text())
    namespace: dict = {}
    checked = 0
    for index, (language, code) in enumerate(blocks):
        if language != "python":
            continue
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(code, f"{PAGE.name} block {index}", "exec"), namespace)  # noqa: S102 - our own docs
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        if following and following[0] == "latex":
            assert output.getvalue().strip() == following[1].strip()
            checked += 1
        elif following and following[0] == "c":
            assert following[1].strip() in namespace["source"]
            checked += 1
    assert checked == 3


def test_the_console_examples_match_the_command(capsys):
    from symad.cli import main

    text = PAGE.read_text()
    console = BLOCK.findall(text)
    session = next(code for language, code in console if language == "console")
    command, expected = None, []
    for line in session.splitlines() + ["$ end"]:
        if line.startswith("$ "):
            if command and expected:
                assert main(_split(command)[1:]) == 0
                assert capsys.readouterr().out.splitlines() == expected
            command, expected = line[2:], []
        else:
            expected.append(line)


def _split(command):
    import shlex

    return shlex.split(command)


@pytest.mark.parametrize("option", ["output_names", "temporaries", "inline_below", "max_inline",
                                    "matrix", "max_denominator"])
def test_every_documented_option_exists(option):
    import inspect

    from symad.export.latex import function_latex

    assert option in inspect.signature(function_latex).parameters
    assert f"`{option}`" in PAGE.read_text()
