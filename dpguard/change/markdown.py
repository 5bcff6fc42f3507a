"""`markdown`: the pull-request comment of a `ChangeReport`, from templates/diff.md.j2: one
summary table of every changed file with the totals, then the details of each.

Numbers are worded here (the same words as the text format); the template only lays them out.
The first line is a marker, distinct from review's, so a CI job updates its own comment.
Text from files (paths, changed values, finding messages) is escaped here, as review's comment
escapes it (`dpguard.reporters.markdown.cell`, `code_span`): the template inserts it as it is.
"""

from __future__ import annotations

from typing import Any

from dpguard.change.model import Change, ChangeReport
from dpguard.change.render import (
    MARKER,
    arrow,
    change_text,
    config_lines,
    counted,
    hours,
    key_text,
    layout,
    memory,
    money,
    signed,
    status_text,
    summary,
    summary_line,
    total_lines,
    verdict,
)
from dpguard.errors import ConfigError
from dpguard.findings import Finding
from dpguard.policy.templates import pct
from dpguard.reporters.markdown import cell, code_span
from dpguard.reporters.safe import guard, visible

TEMPLATE = "diff.md.j2"


def pipe(text: str) -> str:
    """dpguard's own wording in a table cell (no `cell` escaping, so arrows stay arrows): only a
    pipe would break the row, and the file text in it (a path, a changed value) is `visible`,
    so it cannot break the line either."""
    return visible(text).replace("|", "\\|")


def _delta(value: float | None, frac: float | None) -> str:
    return "n/a" if value is None else change_text(value, frac).strip(" ()")


def _finding(f: Finding) -> dict[str, str]:
    return {
        "severity": f.severity.value + (" (waived)" if f.waived else ""),
        "code": f.code,
        "where": pipe(f"{f.path}:{f.line}:{f.col}"),
        "message": cell(f.message),
    }


def _change(c: Change, report: ChangeReport) -> dict[str, Any]:
    b, a, d = c.before, c.after, c.delta
    cur = report.currency
    both = b is not None and a is not None
    return {
        "path": code_span(c.path),
        "status": cell(status_text(c, report)),
        "layout": pipe(arrow(layout(b), layout(a))),
        "gpu_hours": arrow(hours(b.gpu_hours) if b else None, hours(a.gpu_hours) if a else None),
        "gpu_hours_delta": _delta(d.gpu_hours, d.gpu_hours_fraction),
        "cost": arrow(money(b.cost, cur) if b else None, money(a.cost, cur) if a else None)
        if cur
        else None,
        "cost_delta": money(d.cost, cur, sign=True) if cur else None,
        "bubble": arrow(pct(b.bubble, 2) if b else None, pct(a.bubble, 2) if a else None),
        "bubble_delta": signed(d.bubble_points, 2, " pts") if both else "n/a",
        "memory": arrow(memory(b), memory(a)),
        "verdict": arrow(verdict(b), verdict(a)),
        "changed": [pipe(key_text(k)) for k in c.keys],
        "added": [_finding(f) for f in c.added],
        "resolved": [_finding(f) for f in c.resolved],
        "unchanged": f"{counted(len(c.unchanged), 'finding')} unchanged." if c.unchanged else "",
    }


def _unsized(n: int) -> str:
    if not n:
        return ""
    verb = "is" if n == 1 else "are"
    return f"{counted(n, 'changed file')} could not be sized and {verb} left out of the total."


def context(report: ChangeReport) -> dict[str, Any]:
    t, cur = report.totals(), report.currency
    return {
        "marker": MARKER,
        "baseline": report.baseline,
        "commit": report.commit[:12] if report.commit else None,
        "currency": cur,
        "changes": [_change(c, report) for c in report.changes if c.changed],
        "unchanged": ", ".join(
            f"`{code_span(c.path)}` ({verdict(c.after)})" for c in report.changes if not c.changed
        ),
        "unreadable": [
            {"path": code_span(p), "message": cell(why)} for p, why in report.unreadable
        ],
        "totals": {
            "gpu_hours": f"{hours(t['gpu_hours_before'])} -> {hours(t['gpu_hours_after'])}",
            "gpu_hours_delta": _delta(t["gpu_hours_delta"], t["gpu_hours_fraction"]),
            "cost": f"{money(t['cost_before'], cur)} -> {money(t['cost_after'], cur)}"
            if cur
            else None,
            "cost_delta": money(t["cost_delta"], cur, sign=True) if cur else None,
            "unsized": _unsized(t["unsized"]),
        },
        "total_line": cell(total_lines(report)[0]),
        "summary": summary(report),
        "summary_line": summary_line(report),
        "policies": cell(
            "policies: "
            + ", ".join(f"{s.name} {s.version} ({s.digest})" for s in report.policies.sets)
            + "".join(f" [{line}]" for line in config_lines(report))
        )
        if report.policies
        else None,
    }


def render_markdown(report: ChangeReport, *, color: bool = False) -> str:
    from jinja2 import PackageLoader, TemplateError

    from dpguard.policy.templates import sandbox

    env = sandbox(loader=PackageLoader("dpguard.templates", ""), keep_trailing_newline=True)
    try:
        text: str = env.get_template(TEMPLATE).render(report=context(report))
    except TemplateError as exc:  # the shipped template is broken: dpguard cannot run
        raise ConfigError(f"template cannot be rendered: {exc}", TEMPLATE) from None
    lines: list[str] = []
    for line in text.splitlines():  # collapse the blank-line runs block tags leave
        if line.strip() or (lines and lines[-1].strip()):
            # the template places values at line starts too: none may start a workflow command
            lines.append(guard(line.rstrip()))
    return "\n".join(lines).strip() + "\n"
