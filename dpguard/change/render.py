"""Renderers of a `ChangeReport`: json (the contract, schemas/diff.schema.json), text, github
(annotations on the lines whose change moved the cost) and markdown (a pull-request comment,
templates/diff.md.j2). Each returns text, never prints, and is deterministic. Paths, keys and
values from files are escaped as in review's reports (`dpguard.reporters.safe`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from dpguard import __version__
from dpguard.change.model import Change, ChangeReport, KeyChange, Side
from dpguard.findings import Severity, finding_dict
from dpguard.manifest import format_quantity, parse_quantity
from dpguard.policy.templates import pct
from dpguard.reporters.safe import escape_data, escape_property, json_text, safe_line

DIFF_VERSION = 1
MARKER = "<!-- dpguard-diff -->"


# ---- json ----------------------------------------------------------------------------------


def side_dict(side: Side | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {
        "path": side.path,
        "state": side.state,
        "passed": side.passed,
        "errors": side.count(Severity.ERROR),
        "warnings": side.count(Severity.WARNING),
        "name": side.name,
        "accelerator": side.accelerator,
        "gpus": side.gpus,
        "pipeline": side.pipeline,
        "microbatches": side.microbatches,
        "tensor": side.tensor,
        "expert": side.expert,
        "schedule": side.schedule,
        "layout": side.layout,
        "bubble": side.bubble,
        "gpu_hours": side.gpu_hours,
        "memory_gib": side.memory_gib,
        "memory_verdict": side.memory_verdict,
        "cost": side.cost,
    }


def _value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def change_dict(change: Change) -> dict[str, Any]:
    d = change.delta
    return {
        "path": change.path,
        "base_path": change.base_path,
        "status": change.status,
        "config": change.result.config or None if change.result is not None else None,
        "before": side_dict(change.before),
        "after": side_dict(change.after),
        "delta": {
            "gpu_hours": d.gpu_hours,
            "gpu_hours_fraction": d.gpu_hours_fraction,
            "bubble_points": d.bubble_points,
            "memory_gib": d.memory_gib,
            "cost": d.cost,
        },
        "findings": {
            "added": [finding_dict(f) for f in change.added],
            "resolved": [finding_dict(f) for f in change.resolved],
            "unchanged": len(change.unchanged),
        },
        "changed_keys": [
            {
                "key": k.key,
                "before": _value(k.before),
                "after": _value(k.after),
                "path": k.path,
                "line": k.line,
                "column": k.col,
            }
            for k in change.keys
        ],
    }


def summary(report: ChangeReport) -> dict[str, int]:
    """Of the new versions, as `review`'s summary counts them (removed files are not checked)."""
    now = [c.after for c in report.changes if c.after is not None]
    return {
        "files": len(now),
        "failed": sum(1 for s in now if not s.passed),
        "errors": sum(s.count(Severity.ERROR) for s in now),
        "warnings": sum(s.count(Severity.WARNING) for s in now),
    }


def report_dict(report: ChangeReport) -> dict[str, Any]:
    sets = report.policies.sets if report.policies else ()
    return {
        "version": DIFF_VERSION,
        "tool": {"name": "dpguard", "version": __version__},
        "baseline": None
        if report.baseline is None
        else {"revision": report.baseline, "commit": report.commit},
        "policies": [{"name": s.name, "version": s.version, "digest": s.digest} for s in sets],
        "changes": [change_dict(c) for c in report.changes],
        "totals": report.totals(),
        "summary": summary(report),
        "unreadable": [{"path": p, "message": why} for p, why in report.unreadable],
    }


def render_json(report: ChangeReport, *, color: bool = False) -> str:
    return json_text(report_dict(report))


# ---- shared wording ------------------------------------------------------------------------


def counted(n: int, noun: str) -> str:
    """ "1 file", "2 files": every count the change reports print (review's summary words)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def hours(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def signed(value: float | None, digits: int = 0, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:+,.{digits}f}"
    if text.lstrip("+-").strip("0.,") == "":
        text = f"{0:.{digits}f}"  # no "-0" or "+0"
    return text + unit


def fraction(value: float | None) -> str:
    return "" if value is None else f" ({signed(value * 100, 1, '%')})"


def money(value: float | None, currency: str | None, sign: bool = False) -> str:
    if value is None or currency is None:
        return "n/a"
    return f"{signed(value) if sign else f'{value:,.0f}'} {currency}"


def arrow(before: Any, after: Any) -> str:
    """ "a -> b", or just "a" when nothing changed."""
    b = "-" if before is None else str(before)
    a = "-" if after is None else str(after)
    return a if b == a else f"{b} -> {a}"


def layout(side: Side | None) -> str:
    if side is None:
        return "-"
    if side.state != "valid":
        return f"{side.state} ({counted(side.count(Severity.ERROR), 'error')})"
    if side.schedule is None:
        return "no feasible layout" if side.layout == "plan" else "not sized"
    return (
        f"{side.schedule} P={side.pipeline} M={side.microbatches} T={side.tensor} "
        f"EP={side.expert} on {side.gpus:,} {side.accelerator}"
        + (" (dpguard's plan)" if side.layout == "plan" else "")
    )


def memory(side: Side | None) -> str:
    if side is None or side.memory_gib is None:
        return "n/a"
    return f"{side.memory_gib:.1f} GiB ({side.memory_verdict})"


def verdict(side: Side | None) -> str:
    if side is None:
        return "-"
    return "passed" if side.passed else "failed"


def value_text(value: Any) -> str:
    """A manifest value as a person reads it: booleans as YAML writes them, counts of a
    million or more as the plan writes token counts ("15T", `format_quantity`) when that form
    is exact, else with thousands separators, as the reports write every other number."""
    if value is None:
        return "unset"
    if isinstance(value, bool):  # before int: True is an int
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(value_text, value)) + "]"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        # only an exact short form: "1.23457M" for 1,234,567 could hide the change it reports
        with contextlib.suppress(ValueError):  # past what parse_quantity reads: the digits
            if value >= 10**6 and parse_quantity(short := format_quantity(value)) == value:
                return short
        return f"{value:,}"
    return str(value)


def key_text(k: KeyChange) -> str:
    return f"{k.key} {value_text(k.before)} -> {value_text(k.after)}"


def change_text(delta: float | None, frac: float | None) -> str:
    """ " (+1,234, +5.0%)", or "" when there is nothing to say."""
    if delta is None:
        return ""
    parts = [signed(delta)] + ([] if frac is None else [signed(frac * 100, 1, "%")])
    return f" ({', '.join(parts)})"


def cost_line(change: Change, currency: str | None) -> str:
    b, a, d = change.before, change.after, change.delta
    text = "GPU-hours " + arrow(
        hours(b.gpu_hours) if b else None, hours(a.gpu_hours) if a else None
    )
    if b is not None and a is not None and b.gpu_hours != a.gpu_hours:
        text += change_text(d.gpu_hours, d.gpu_hours_fraction)
    if currency is not None:
        text += "; cost " + arrow(
            money(b.cost, currency) if b else None, money(a.cost, currency) if a else None
        )
    return text


def total_lines(report: ChangeReport) -> list[str]:
    t, cur = report.totals(), report.currency
    changed = sum(1 for c in report.changes if c.changed)
    same = len(report.changes) - changed
    unchanged = f" ({same} unchanged)" if same else ""
    if not changed:
        return [f"no file changed{unchanged}", summary_line(report)]
    total = (
        f"total over {counted(changed, 'changed file')}{unchanged}: GPU-hours "
        f"{hours(t['gpu_hours_before'])} -> {hours(t['gpu_hours_after'])}"
        + change_text(t["gpu_hours_delta"], t["gpu_hours_fraction"])
    )
    if t["unsized"]:
        total += f" ({t['unsized']} not sized, left out)"
    if cur is not None:
        total += (
            f"; cost {money(t['cost_before'], cur)} -> {money(t['cost_after'], cur)}"
            f" ({money(t['cost_delta'], cur, sign=True)})"
        )
    return [total, summary_line(report)]


def summary_line(report: ChangeReport) -> str:
    s = summary(report)
    return (
        f"{counted(s['files'], 'manifest')} checked now: {s['files'] - s['failed']} passed, "
        f"{s['failed']} failed ({counted(s['errors'], 'error')}, "
        f"{counted(s['warnings'], 'warning')})"
    )


def config_lines(report: ChangeReport) -> list[str]:
    """Which configuration judged the new versions: one line per .dpguard.yaml (with its files
    when there are several); none when no config judged them."""
    from dpguard.config import display

    groups: dict[str, list[str]] = {}
    for c in report.changes:
        if c.result is not None and c.result.config:
            groups.setdefault(c.result.config, []).append(c.path)
    many = len(groups) > 1
    return [
        f"config {display(config)}" + (f": {', '.join(paths)}" if many else "")
        for config, paths in groups.items()
    ]


def status_text(change: Change, report: ChangeReport) -> str:
    since = f" since {report.baseline}" if report.baseline else ""
    if change.status == "renamed":
        return f"renamed from {change.base_path}{since}"
    if change.status == "modified" and report.baseline is None:
        return f"modified (from {change.base_path})"
    return change.status + since


def unchanged_text(change: Change, report: ChangeReport) -> str:
    """How a file that is not `changed` is named: its status, and why an edited one is not."""
    text = status_text(change, report)
    return text if change.status == "unchanged" else f"{text}, nothing dpguard judges changed"


# ---- text ----------------------------------------------------------------------------------


def render_text(report: ChangeReport, *, color: bool = False) -> str:
    lines: list[str] = []
    cur = report.currency
    for c in report.changes:
        b, a = c.before, c.after
        if not c.changed:
            lines.append(f"{c.path}: {unchanged_text(c, report)} ({verdict(a)})")
            continue
        lines.append(f"{c.path}: {status_text(c, report)}")
        lines.append(f"  layout: {arrow(layout(b), layout(a))}")
        bubble = arrow(pct(b.bubble, 2) if b else None, pct(a.bubble, 2) if a else None)
        if c.delta.bubble_points is not None and b and a and b.bubble != a.bubble:
            bubble += f" ({signed(c.delta.bubble_points, 2, ' points')})"
        lines.append(f"  bubble {bubble}; {cost_line(c, cur)}")
        lines.append(
            f"  memory per GPU {arrow(memory(b), memory(a))}; "
            f"verdict {arrow(verdict(b), verdict(a))}"
        )
        lines += [f"  changed: {key_text(k)}" for k in c.keys]
        lines += [f"  + {f.format()}" for f in c.added]
        lines += [f"  - {f.format()} (resolved)" for f in c.resolved]
    for path, why in report.unreadable:
        lines.append(f"{path}: cannot be compared: {why}")
    lines += config_lines(report)
    lines += total_lines(report)
    # every line holds file text (paths, changed values, finding messages) and none is colored
    return "\n".join(map(safe_line, lines)) + "\n"


# ---- github --------------------------------------------------------------------------------


def render_github(report: ChangeReport, *, color: bool = False) -> str:
    """The new findings at their lines, and a notice on each changed key of a manifest whose
    cost moved, saying by how much."""
    from dpguard.reporters.github import annotation

    lines: list[str] = []
    for c in report.changes:
        lines += [annotation(f) for f in c.added]
        if not c.cost_moved or c.after is None:
            continue
        what = (
            f"{cost_line(c, report.currency)}; bubble "
            f"{arrow(pct(c.before.bubble, 2) if c.before else None, pct(c.after.bubble, 2))}; "
            f"layout {arrow(layout(c.before), layout(c.after))}"
        )
        keys = c.keys or (KeyChange("kind", None, None, c.path, 1, 1),)
        for k in keys:
            title = f"dpguard cost: {k.key}" if c.keys else "dpguard cost"
            message = (f"{key_text(k)} - " if c.keys else "") + f"this change moves {what}"
            props = (
                f"file={escape_property(k.path)},line={k.line},col={k.col},"
                f"title={escape_property(title)}"
            )
            lines.append(f"::notice {props}::{escape_data(message)}")
    # plain log lines (the config's path and the currency are file text)
    lines += map(safe_line, [*config_lines(report), *total_lines(report)])
    return "\n".join(lines) + "\n"
