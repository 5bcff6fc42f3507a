"""The plain subset of rule messages, read without Jinja: literal text and `{{ dotted.fact }}`,
`{{ dotted.fact | filter }}` or `{{ dotted.fact | filter(1, 2) }}` (decimal integers).

Most shipped messages are only that, and importing Jinja costs a review process more than
rendering them (templates.render_message). `parse` reads a message as Jinja's lexer would and
says None for anything else; the caller decides what the names mean. It lives apart from
templates.py, whose source stamps the compiled page templates, so that a change here does not
make them stale.
"""

from __future__ import annotations

import re
from collections.abc import Container

# What opens a Jinja tag, comment or statement: literal text runs up to the first of them.
_OPEN = re.compile(r"\{[{%#]")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_INT = r"(?:0|[1-9][0-9]*)"  # as Jinja reads them: no sign, no leading zeros, no underscores
# `{{-`, `-}}`, strings, operators, subscripts, tests and chained filters do not match.
_TAG = re.compile(
    rf"\{{\{{\s*(?P<path>{_NAME}(?:\.{_NAME})*)\s*"
    rf"(?:\|\s*(?P<filter>{_NAME})\s*(?:\(\s*(?P<args>{_INT}(?:\s*,\s*{_INT})*)?\s*\)\s*)?)?\}}\}}"
)
_NEWLINES = re.compile(r"\r\n?")


class Field:
    """`{{ path | filter(args) }}`: a value read through dicts, then a filter, if any. (A class
    of its own rather than a dataclass: making one costs more than this module's other work
    at import.)"""

    __slots__ = ("args", "filter", "path")

    def __init__(self, path: tuple[str, ...], filter: str | None, args: tuple[int, ...]) -> None:
        self.path = path
        self.filter = filter
        self.args = args


Part = str | Field


def parse(source: str, roots: Container[str], filters: Container[str]) -> tuple[Part, ...] | None:
    """The message as literal text and fields, or None when it is not in the plain subset: a
    field's first name must be in `roots` and its filter in `filters`."""
    # As Jinja's lexer (keep_trailing_newline off): newlines as "\n", one trailing one dropped;
    # the text is what the output budget counts.
    source = _NEWLINES.sub("\n", source)
    source = source[:-1] if source.endswith("\n") else source
    parts: list[Part] = []
    at = 0
    while (found := _OPEN.search(source, at)) is not None:
        tag = _TAG.match(source, found.start())
        if tag is None:
            return None
        path = tuple(tag["path"].split("."))
        name = tag["filter"]
        if path[0] not in roots or (name is not None and name not in filters):
            return None
        if found.start() > at:
            parts.append(source[at : found.start()])
        args = tuple(int(a) for a in re.split(r"\s*,\s*", tag["args"])) if tag["args"] else ()
        parts.append(Field(path, name, args))
        at = tag.end()
    if at < len(source):
        parts.append(source[at:])
    return tuple(parts)
