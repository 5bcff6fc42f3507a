"""The one place that decides dpguard's exit code.

0  every manifest passes
1  at least one manifest fails (unparseable, schema or cross-field errors, blocking findings)
2  dpguard cannot run as asked (usage, missing file, its own policy/schema/template broken)
3  internal error (a bug)
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from dpguard.findings import Finding, Severity


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    CANNOT_RUN = 2
    INTERNAL = 3


FAIL_ON = {"error": (Severity.ERROR,), "warning": (Severity.ERROR, Severity.WARNING)}


def blocking(finding: Finding, fail_on: str = "error") -> bool:
    return not finding.waived and finding.severity in FAIL_ON[fail_on]


def review_exit_code(
    findings: Iterable[Finding], input_errors: int = 0, fail_on: str = "error"
) -> ExitCode:
    """2 if any path could not be read at all, else 1 if any finding blocks, else 0."""
    if input_errors:
        return ExitCode.CANNOT_RUN
    if any(blocking(f, fail_on) for f in findings):
        return ExitCode.FAILED
    return ExitCode.OK
