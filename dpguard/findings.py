"""A finding: one problem or remark about one manifest, at one position.

Findings are values, never exceptions, so one broken manifest cannot stop the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple


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

    def format(self) -> str:
        """The grep-able one-line form: ``path:line:col: severity CODE message``."""
        waived = " (waived)" if self.waived else ""
        return (
            f"{self.path}:{self.line}:{self.col}: {self.severity.value} {self.code} "
            f"{self.message}{waived}"
        )
