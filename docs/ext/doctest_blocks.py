"""A griffe extension for the API reference: bare doctests in docstrings become Python code blocks.

symad's docstrings keep their examples as plain ``>>>`` doctests (pytest runs
them). Markdown would read ``>>>`` as a quotation and ``[1.0, 2.0]`` in an
output as a link, so before rendering, each run of doctest lines (a ``>>>``
line and everything up to the next blank line) is fenced as ``pycon``.
"""

import griffe


def fence_doctests(text: str) -> str:
    out, inside = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if not inside and stripped.startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            inside = True
        elif inside and not stripped:
            out.append(f"{indent}```")
            inside = False
        out.append(line)
    if inside:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
