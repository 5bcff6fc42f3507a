"""The plain subset of rule messages, read without Jinja: literal text, `{{ dotted.fact }}`,
`{{ dotted.fact | filter }}` or `{{ dotted.fact | filter(1, 2) }}` (decimal integers), and
`{% if test %}...{% else %}...{% endif %}` blocks (not nested; `else` optional) whose test is
`dotted.fact`, `not dotted.fact`, `dotted.fact == 'text'`, `dotted.fact != 'text'`,
`dotted.fact is none` or `dotted.fact is not none`.

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
_PATH = rf"{_NAME}(?:\.{_NAME})*"
_INT = r"(?:0|[1-9][0-9]*)"  # as Jinja reads them: no sign, no leading zeros, no underscores
# `{{-`, `-}}`, strings, operators, subscripts, tests and chained filters do not match.
_TAG = re.compile(
    rf"\{{\{{\s*(?P<path>{_PATH})\s*"
    rf"(?:\|\s*(?P<filter>{_NAME})\s*(?:\(\s*(?P<args>{_INT}(?:\s*,\s*{_INT})*)?\s*\)\s*)?)?\}}\}}"
)
# A string without backslashes or line breaks: Jinja reads it as the text between the quotes.
_TEXT = r"'[^'\\\r\n]*'|\"[^\"\\\r\n]*\""
# `{%-`, `{%+`, `-%}`, `elif`, `and`/`or`, other tests and comparisons do not match.
_BLOCK = re.compile(
    rf"\{{%\s*(?:if\s+(?:(?P<negated>not)\s+(?P<falsy>{_PATH})|(?P<path>{_PATH})"
    rf"(?:\s*(?P<compare>==|!=)\s*(?P<text>{_TEXT})|\s+(?P<none>is\s+(?P<is_not>not\s+)?none))?)"
    r"|(?P<word>else|endif))\s*%\}"
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


class If:
    """`{% if test %}then{% else %}otherwise{% endif %}`. `test.path` is the fact read (its
    filter None); `op` what is asked of it: "" (true, as Python's bool), "not", "==" or "!="
    (`text`), "is none" or "is not none"."""

    __slots__ = ("op", "otherwise", "test", "text", "then")

    def __init__(self, test: Field, op: str, text: str | None) -> None:
        self.test = test
        self.op = op
        self.text = text
        self.then: list[str | Field] = []
        self.otherwise: list[str | Field] = []


Part = str | Field | If


def parse(source: str, roots: Container[str], filters: Container[str]) -> tuple[Part, ...] | None:
    """The message as literal text, fields and if blocks, or None when it is not in the plain
    subset: a fact's first name must be in `roots` and a filter in `filters`."""
    # As Jinja's lexer (keep_trailing_newline off): newlines as "\n", one trailing one dropped;
    # the text is what the output budget counts.
    source = _NEWLINES.sub("\n", source)
    source = source[:-1] if source.endswith("\n") else source
    parts: list[Part] = []
    block: If | None = None  # the if block being read
    into: list[Part] | list[str | Field] = parts  # where text and fields go
    at = 0
    while (found := _OPEN.search(source, at)) is not None:
        if found.start() > at:
            into.append(source[at : found.start()])
        tag = _TAG.match(source, found.start())
        if tag is not None:
            path = tuple(tag["path"].split("."))
            name = tag["filter"]
            if path[0] not in roots or (name is not None and name not in filters):
                return None
            args = tuple(int(a) for a in re.split(r"\s*,\s*", tag["args"])) if tag["args"] else ()
            into.append(Field(path, name, args))
            at = tag.end()
            continue
        statement = _BLOCK.match(source, found.start())
        if statement is None:
            return None
        word = statement["word"]
        if word is None:  # if
            if block is not None:
                return None
            block = _if(statement, roots)
            if block is None:
                return None
            into = block.then
        elif block is None or (word == "else" and into is block.otherwise):
            return None
        elif word == "else":
            into = block.otherwise
        else:  # endif
            parts.append(block)
            block, into = None, parts
        at = statement.end()
    if block is not None:
        return None
    if at < len(source):
        into.append(source[at:])
    return tuple(parts)


def _if(statement: re.Match[str], roots: Container[str]) -> If | None:
    """The if block a matched `{% if ... %}` opens, or None when its fact's root is not known."""
    path = tuple((statement["path"] or statement["falsy"]).split("."))
    if path[0] not in roots:
        return None
    if statement["negated"]:
        op = "not"
    elif statement["compare"]:
        op = statement["compare"]
    elif statement["none"]:
        op = "is not none" if statement["is_not"] else "is none"
    else:
        op = ""
    text = statement["text"][1:-1] if statement["text"] else None
    return If(Field(path, None, ()), op, text)
