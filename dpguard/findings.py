"""A finding: one problem or remark about one manifest, at one position.

Findings are values, never exceptions, so one broken manifest cannot stop the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):  # noqa: UP042 - StrEnum would change str(), which reports use
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


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

    def format(self) -> str:
        """The grep-able one-line form: ``path:line:col: severity CODE message``."""
        waived = " (waived)" if self.waived else ""
        return (
            f"{self.path}:{self.line}:{self.col}: {self.severity.value} {self.code} "
            f"{self.message}{waived}"
        )
