"""`markdown`: a pull-request comment: per manifest a findings table, the decision, and the
one-page plan (`dpguard.planner.render.render_markdown`, headings moved down three levels so that
they nest under the manifest's heading).

The first line is an HTML comment marker so a CI job can find and update its own comment.

Text from files never ends a table row, a code span or a line early: in a table cell it is
escaped (`cell`), in a heading's code span its control characters are, and each line of the plan
page (whose description is the manifest's free text) is made safe as a line of the text report
(`dpguard.reporters.safe`), since a CI job may print the comment into its log.
"""

from __future__ import annotations

import re

from dpguard.check import FileResult
from dpguard.reporters.model import Report, decision_text, policy_lines, summary_line
from dpguard.reporters.safe import escape_controls, safe_line, visible

MARKER = "<!-- dpguard-review -->"
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
_HEADING = re.compile(r"^(#{1,3}) ")
_FENCE = re.compile(r"^\s*(```|~~~)")


def cell(text: str) -> str:
    """Text that stays literal inside a GitHub-flavoured Markdown table cell, on one line: every
    whitespace run (line breaks included, which would end the row) as one space, the other
    controls shown as escapes (``\\x1b``), and every character Markdown would read (``|`` ends the
    cell, a backtick opens a code span, ``[`` a link, so no ``##[`` is left either) escaped with
    a backslash."""
    return _SPECIAL.sub(r"\\\1", escape_controls(" ".join(text.split())))


def code_span(text: str) -> str:
    """File text inside a single-backtick code span on one line: nothing is escaped inside a
    code span, so a backtick, which would close it, becomes a quote."""
    return visible(text).replace("`", "'")


def demote(markdown: str, levels: int = 3) -> str:
    """Move every ATX heading outside fenced code down `levels` levels (at most to ######)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def _manifest(report: Report, result: FileResult) -> list[str]:
    status = "failed" if report.failed(result) else "passed"
    lines = [f"### `{code_span(result.path)}`: {status}", ""]
    if result.findings:
        lines += ["| severity | rule | line:col | message |", "|---|---|---|---|"]
        for f in result.findings:
            severity = f.severity.value + (" (waived)" if f.waived else "")
            lines.append(f"| {severity} | {f.code} | {f.line}:{f.col} | {cell(f.message)} |")
    else:
        lines.append("No findings.")
    decision = decision_text(result)
    if decision is not None:
        lines += ["", cell(decision[:1].upper() + decision[1:]) + "."]
    policies = result.judged_by or report.policies
    if result.plan is not None and policies is not None:
        from dpguard.planner.render import render_markdown  # imports this package: import late

        page = demote(render_markdown(result.plan, policies)).rstrip("\n")
        lines += ["", *map(safe_line, page.split("\n"))]
    return lines


def markdown_part(report: Report, result: FileResult) -> str:
    """`result`'s section of the report (reporters.PARTS)."""
    return "\n".join(_manifest(report, result))


def render_markdown_report(report: Report, *, color: bool = False) -> str:
    lines = [MARKER, "## dpguard review", "", f"**{summary_line(report)}**"]
    for result in report.results:
        part = result.part if result.part is not None else markdown_part(report, result)
        lines += ["", part]
    lines += [line for text in policy_lines(report) for line in ("", f"<sub>{cell(text)}</sub>")]
    return "\n".join(lines) + "\n"
