"""A finding: one problem or remark about one manifest, at one position.

Findings are values, never exceptions, so one broken manifest cannot stop the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

# A message quotes values from files (a flag's value, a key, a path): one written to be huge
# must not make every report huge. A run without blanks longer than MAX_WORD, and a message
# longer than MAX_MESSAGE, is cut where it passes the limit, saying how much was left out.
MAX_WORD = 200
MAX_MESSAGE = 2000
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD + 1},}}")


def bounded(message: str) -> str:
    """`message` with over-long quoted values and tail cut (see MAX_WORD, MAX_MESSAGE)."""
    if len(message) <= MAX_WORD:
        return message
    message = _LONG_WORD.sub(lambda m: _cut(m.group(), MAX_WORD), message)
    return _cut(message, MAX_MESSAGE)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


class Severity(str, Enum):  # noqa: UP042 - StrEnum would change str(), which reports use
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class WaiverNote(NamedTuple):
    """The waiver that exempted a finding, as reports show it (SARIF's suppression)."""

    reason: str
    owner: str
    expires: str  # YYYY-MM-DD, the last day it applies
    location: str  # file:line:col of the waiver in the waivers file


@dataclass(frozen=True, order=True)
class Finding:
    """Sorts by file, then position, then code, so reports are stable."""

    path: str
    line: int
    col: int
    code: str
    severity: Severity
    message: str
    kind: str = "manifest"  # manifest | decision | reject | refuse | advise
    waived: bool = False
    # which waiver, when waived: not part of the finding's identity (order, equality, hash)
    waiver: WaiverNote | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if len(self.message) > MAX_WORD:
            object.__setattr__(self, "message", bounded(self.message))

    def format(self) -> str:
        """The grep-able one-line form: ``path:line:col: severity CODE message``."""
        waived = " (waived)" if self.waived else ""
        return (
            f"{self.path}:{self.line}:{self.col}: {self.severity.value} {self.code} "
            f"{self.message}{waived}"
        )


def split_location(location: str) -> tuple[str, int, int]:
    """``file:line:col`` -> (file, line, col); ("", 0, 0) when it is not one."""
    path, _, rest = location.rpartition(":")
    path, _, line = path.rpartition(":")
    if not (path and line.isdigit() and rest.isdigit()):
        return "", 0, 0
    return path, int(line), int(rest)


def shown_path(path: str) -> str:
    """`path` relative to the current directory when it is absolute and lies under it (reports
    show paths as the user gave them, not this machine's)."""
    p = Path(path)
    if not p.is_absolute():
        return path
    try:
        return p.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path


def relative_location(location: str) -> str:
    """``file:line:col`` with the file as `shown_path` shows it."""
    path, line, col = split_location(location)
    return f"{shown_path(path)}:{line}:{col}" if path else location


def finding_dict(finding: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": shown_path(finding.path),
        "code": finding.code,
        "kind": finding.kind,
        "severity": finding.severity.value,
        "message": finding.message,
        "line": finding.line,
        "column": finding.col,
        "waived": finding.waived,
    }
    waiver = finding.waiver
    if waiver is not None:  # who accepted it, why and until when (as SARIF's suppression)
        out["waiver"] = {
            "reason": waiver.reason,
            "owner": waiver.owner,
            "expires": waiver.expires,
            "location": relative_location(waiver.location),
        }
    return out
