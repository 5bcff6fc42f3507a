"""`text`: ``path:line:col: severity CODE message`` lines, the decision per manifest, a summary.

Colour (ANSI SGR) only when the caller asks for it: `dpguard review` asks when stdout is a
terminal and ``NO_COLOR`` is unset or empty (https://no-color.org), never for ``--output``.

Paths, keys and values from files are shown with their control characters escaped, and no line
can start a GitHub workflow command (`dpguard.reporters.safe`): the report runs in CI logs.
"""

from __future__ import annotations

from dpguard.findings import Finding, Severity
from dpguard.reporters.model import (
    Report,
    config_lines,
    decision_line,
    policy_lines,
    summary_line,
)
from dpguard.reporters.safe import guard, safe_line, visible

RESET = "\x1b[0m"
STYLES = {
    Severity.ERROR: "\x1b[1;31m",  # bold red
    Severity.WARNING: "\x1b[33m",  # yellow
    Severity.INFO: "\x1b[36m",  # cyan
}
BOLD = "\x1b[1m"
DIM = "\x1b[2m"


def _finding(finding: Finding, color: bool) -> str:
    if not color:
        return safe_line(finding.format())
    # the file's text escaped before dpguard's own escape sequences go in around it
    severity = f"{STYLES[finding.severity]}{finding.severity.value}{RESET}"
    waived = f" {DIM}(waived){RESET}" if finding.waived else ""
    return guard(
        f"{visible(finding.path)}:{finding.line}:{finding.col}: {severity} "
        f"{BOLD}{visible(finding.code)}{RESET} {visible(finding.message)}{waived}"
    )


def render_text(report: Report, *, color: bool = False) -> str:
    """Each file's findings, then its decision line, file by file; the policy lines and the
    summary last."""
    lines = []
    for result in report.results:
        lines += [_finding(f, color) for f in result.findings]
        decision = decision_line(result)
        if decision:
            lines.append(safe_line(decision))
    lines += map(safe_line, policy_lines(report))
    summary = summary_line(report)  # counts only: nothing from a file
    if color:
        style = STYLES[Severity.ERROR] if report.summary()["failed"] else "\x1b[1;32m"
        summary = f"{style}{summary}{RESET}"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def render_quiet(report: Report, *, color: bool = False) -> str:
    """`review --quiet`: the unwaived errors and warnings, then the one summary line; nothing
    for a passing manifest but its share of the summary (pre-commit shows it all on failure)."""
    shown = (Severity.ERROR, Severity.WARNING)
    lines = [_finding(f, color) for f in report.findings if f.severity in shown and not f.waived]
    lines += map(safe_line, config_lines(report))
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"
