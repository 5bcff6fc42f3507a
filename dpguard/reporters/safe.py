"""Escaping for text that comes from files, in every report format.

dpguard runs in pull-request CI on files written by whoever opens the pull request, and its
reports go to a terminal and to CI logs. A log is not inert: the GitHub Actions runner reads each
line of a step's output for workflow commands, ``::name props::data`` at the start of a line
(after leading whitespace) and the older ``##[name props]data`` anywhere in a line
(actions/runner ActionCommand.TryParseV2 and TryParse), and a terminal acts on escape sequences.
A file's path, key or value must reach the report as text to read, never as a command, so:

- in a line of human-readable text (text, Markdown, JUnit) a control character, a bidi
  override or a line separator from a file is shown as an escape (``\\n``, ``\\x1b``,
  ``\\u202e``) that a reviewer sees, and ``##[`` is broken up (`visible`); a line that would
  start with ``::`` gets its first colon escaped (`guard`);
- in a workflow command the runner's own escaping carries a line break as data (`escape_data`,
  `escape_property`), after the other controls are made visible;
- JSON escapes controls itself and can write ``#`` as ``\\u0023``, so a JSON report keeps every
  string exactly and still holds no ``##[`` (`json_text`).

dpguard's own text never holds any of these characters, so benign output is unchanged.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 controls, DEL and C1 controls (ESC and CSI among them); the bidi controls that reorder what
# a reviewer reads (Trojan Source: U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069); the
# line and paragraph separators some viewers break lines at; lone surrogates (a file name that
# is not UTF-8, decoded with surrogateescape, which stdout could not even encode); and the two
# noncharacters XML cannot carry.
_HIDDEN = r"\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
_UNSAFE = re.compile(rf"[\x00-\x1f{_HIDDEN}]")
_UNSAFE_BUT_LINE_BREAKS = re.compile(rf"[\x00-\x09\x0b\x0c\x0e-\x1f{_HIDDEN}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# The runner's old command syntax, which it finds anywhere in a line.
_OLD_COMMAND = "##["


def _show(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape_controls(text: str) -> str:
    """`text` with every control character, bidi control, line separator, lone surrogate and
    XML-invalid noncharacter shown as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``): a
    reviewer sees that the file holds it, and neither a terminal nor a log acts on it. For
    places with their own syntax escaping on top (Markdown table cells); a plain-text line
    uses `visible`."""
    return _UNSAFE.sub(_show, text)


def visible(text: str) -> str:
    """File text (a path, a key, a value, a message quoting them) for a line of human-readable
    output: controls escaped as `escape_controls` does, so it cannot end the line or drive the
    terminal, and ``##[`` written ``#\\x23[``, so the runner finds no old-style command in it."""
    return escape_controls(text).replace(_OLD_COMMAND, "#\\x23[")


def guard(line: str) -> str:
    """A whole output line, with the first colon escaped when the line would otherwise start,
    after leading whitespace (which the runner trims), with ``::``: a line that begins with a
    path, such as ``path:line:col: ...``, could be a workflow command when the path begins with
    ``:``. dpguard's own annotations are the only lines meant to start so, and never pass here.
    Python's whitespace includes every character .NET's TrimStart trims."""
    body = line.lstrip()
    if not body.startswith("::"):
        return line
    start = len(line) - len(body)
    return f"{line[:start]}\\x3a{line[start + 1 :]}"


def safe_line(text: str) -> str:
    """One line of plain-text output that holds file text: `visible`, then `guard`."""
    return guard(visible(text))


def diagnostic(message: str) -> str:
    """A message for stderr, which CI logs and the runner read as they read stdout: each line
    of it (a traceback has several) made a `safe_line`."""
    return "\n".join(safe_line(line) for line in message.splitlines() or [""])


def escape_data(text: str) -> str:
    """The message of a workflow command: controls other than CR and LF made visible, then the
    runner's escaping (actions/toolkit command.ts escapeData), under which CR and LF stay data
    of the annotation instead of ending the command line."""
    shown = _UNSAFE_BUT_LINE_BREAKS.sub(_show, text)
    return shown.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value of a workflow command (file, title): as `escape_data`, and ``:`` and
    ``,``, which would end the value, escaped too (command.ts escapeProperty)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def json_text(data: Any) -> str:
    """`data` as the reports' JSON (sorted keys, a fixed indent, a final newline). json.dumps
    already writes every control and non-ASCII character as an escape; ``#`` can occur only
    inside a string, where ``\\u0023`` is the same character, so ``##[`` is written
    ``#\\u0023[`` and every string still reads back exactly as it was."""
    text = json.dumps(data, indent=2, sort_keys=True)
    return text.replace(_OLD_COMMAND, "#\\u0023[") + "\n"
