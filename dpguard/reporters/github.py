"""`github`: GitHub Actions workflow commands, so findings appear inline on the pull request.

``::error file=PATH,line=N,col=N,title=CODE::message`` (``::warning`` / ``::notice`` for the other
severities; waived findings become notices). Escaping follows the runner's
(actions/toolkit core/src/command.ts): in the message ``%``, CR and LF; in property values also
``:`` and ``,``. Each manifest's decision is a notice at the key the deciding rule tests; the
policy and summary lines follow as plain log lines.
"""

from __future__ import annotations

from dpguard.findings import Finding, Severity
from dpguard.reporters.model import Report, decision_finding, policy_lines, summary_line

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


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
    lines += policy_lines(report)
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"
