"""`github`: GitHub Actions workflow commands, so findings appear inline on the pull request.

``::error file=PATH,line=N,col=N,title=CODE::message`` (``::warning`` / ``::notice`` for the other
severities; waived findings become notices). Escaping follows the runner's
(actions/toolkit core/src/command.ts): in the message ``%``, CR and LF; in property values also
``:`` and ``,``; other control characters from files are shown as escapes first
(`dpguard.reporters.safe`). Each manifest's decision is a notice at the key the deciding rule
tests; the policy and summary lines follow as plain log lines, which must not be able to start a
command of their own.
"""

from __future__ import annotations

from dpguard.findings import Finding, Severity
from dpguard.reporters.model import Report, decision_finding, policy_lines, summary_line
from dpguard.reporters.safe import escape_data, escape_property, safe_line

# escape_data and escape_property are the runner's escaping, shared with `dpguard diff`
__all__ = ["COMMANDS", "annotation", "escape_data", "escape_property", "render_github"]

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def annotation(finding: Finding) -> str:
    command = "notice" if finding.waived else COMMANDS[finding.severity]
    message = finding.message + (" (waived)" if finding.waived else "")
    props = ",".join(
        f"{key}={escape_property(value)}"
        for key, value in (
            ("file", finding.path),
            ("line", str(finding.line)),
            ("col", str(finding.col)),
            ("title", finding.code),
        )
    )
    return f"::{command} {props}::{escape_data(message)}"


def render_github(report: Report, *, color: bool = False) -> str:
    lines = [annotation(f) for f in report.findings]
    lines += [annotation(f) for f in map(decision_finding, report.results) if f]
    # plain log lines: the config and file paths in them are file text
    lines += map(safe_line, [*policy_lines(report), summary_line(report)])
    return "\n".join(lines) + "\n"
