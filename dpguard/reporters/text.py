"""`text`: ``path:line:col: severity CODE message`` lines, the decision per manifest, a summary.

Colour (ANSI SGR) only when the caller asks for it: `dpguard review` asks when stdout is a
terminal and ``NO_COLOR`` is unset or empty (https://no-color.org), never for ``--output``.
"""

from __future__ import annotations

from dpguard.findings import Finding, Severity
from dpguard.reporters.model import Report, decision_line, policy_lines, summary_line

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
        return finding.format()
    severity = f"{STYLES[finding.severity]}{finding.severity.value}{RESET}"
    waived = f" {DIM}(waived){RESET}" if finding.waived else ""
    return (
        f"{finding.path}:{finding.line}:{finding.col}: {severity} {BOLD}{finding.code}{RESET} "
        f"{finding.message}{waived}"
    )


def render_text(report: Report, *, color: bool = False) -> str:
    """Each file's findings, then its decision line, file by file; the policy lines and the
    summary last."""
    lines = []
    for result in report.results:
        lines += [_finding(f, color) for f in result.findings]
        decision = decision_line(result)
        if decision:
            lines.append(decision)
    lines += policy_lines(report)
    summary = summary_line(report)
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
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"
