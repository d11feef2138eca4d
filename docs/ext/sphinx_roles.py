"""A griffe extension for the API reference: Sphinx roles in docstrings become code spans.

symad's docstrings name other objects the Sphinx way (``:class:`~symad.function.Function```,
``:func:`trace```, ``:mod:`symad.compile.tiers```), which reads well in ``help()``.
mkdocstrings renders Markdown, where such a role showed as raw text. Before rendering,
each role becomes a code span of what Sphinx would display: the last component for
``~target``, the title for ``title <target>``, else the target as written.
Not links: most targets (symad.compile.tiers, a Function attribute) have no page of
their own in the reference, and a link to a missing anchor fails the strict build.

>>> plain_roles("a traced :class:`~symad.function.Function`; see :mod:`symad.export`")
'a traced `Function`; see `symad.export`'
>>> plain_roles(":func:`the trace <symad.trace>` or :meth:`Function.compile`")
'`the trace` or `Function.compile`'
"""

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`([^`]+)`")


def _shown(target: str) -> str:
    titled = re.fullmatch(r"(.+?)\s*<[^>]+>", target)
    if titled:
        return titled.group(1)
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def plain_roles(text: str) -> str:
    return ROLE.sub(lambda match: f"`{_shown(match.group(1))}`", text)


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ":`" in obj.docstring.value:
            obj.docstring.value = plain_roles(obj.docstring.value)
