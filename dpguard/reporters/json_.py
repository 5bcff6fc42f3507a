"""`json`: a versioned document (``"version": 1``) whose shape is `schemas/report.schema.json`.

Written with sorted keys and a fixed indent so the same input gives byte-identical output, and
with every string escaped so that no line of it can be read as a CI workflow command
(`dpguard.reporters.safe.json_text`).
"""

from __future__ import annotations

from typing import Any

from dpguard.check import FileResult
from dpguard.config import display
from dpguard.findings import finding_dict
from dpguard.planner.plan import Plan
from dpguard.policy.model import Policies, provenance
from dpguard.reporters.model import REPORT_VERSION, TOOL, Report, policy_sets
from dpguard.reporters.safe import json_text


def decision_dict(result: FileResult) -> dict[str, Any] | None:
    outcome = result.outcome
    if outcome is None:
        return None
    return {
        "rule": outcome.decision.id if outcome.decision else None,
        "schedule": outcome.decision.recommend if outcome.decision else None,
        "redirects": [r.id for r in outcome.redirects],
        "recommended_schedule": outcome.schedule,
    }


def plan_data(plan: Plan | None, policies: Policies | None) -> dict[str, Any] | None:
    if plan is None or policies is None:
        return None
    from dpguard.planner.render import plan_dict  # a plan's page data: only where one is printed

    return plan_dict(plan, policies)


def plain(value: Any) -> Any:
    """`value` as JSON data: YAML's dates, timestamps and odd keys as their text."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def file_dict(report: Report, r: FileResult) -> dict[str, Any]:
    return {
        "path": r.path,
        "source_format": r.source_format,
        "valid": not report.failed(r),
        "findings": [finding_dict(f) for f in r.findings],
        "manifest": r.manifest.to_dict() if r.manifest else None,
        "extracted": plain(r.document) if r.document is not None else None,
        "decision": decision_dict(r),
        "plan": plan_data(r.plan, r.judged_by or report.policies),
        "config": display(r.config) if r.config else None,
        "policies": provenance(r.judged_by or report.policies),
    }


def _head(report: Report) -> dict[str, Any]:
    """The report without its files (render_json writes them in)."""
    return {
        "version": REPORT_VERSION,
        "tool": dict(TOOL),
        "policies": policy_sets(report),
        "files": [],
        "unreadable": [{"path": path, "message": why} for path, why in report.unreadable],
        "summary": report.summary(),
    }


def json_part(report: Report, r: FileResult) -> str:
    """`r`'s entry of the report as render_json writes it (reporters.PARTS): json_text of the
    entry alone, its lines shifted two levels in (the top object, its "files" list), as
    json.dumps writes a nested value."""
    return "    " + json_text(file_dict(report, r)).rstrip("\n").replace("\n", "\n    ")


# Sorted keys put "files" first: the head's empty list is the first line after the brace.
_EMPTY_FILES = '{\n  "files": [],\n'


def render_json(report: Report, *, color: bool = False) -> str:
    """The report, its entries the json_parts (rendered while each file was judged, or now):
    byte for byte what dumping the whole report at once gives."""
    return "".join(json_pieces(report))


def json_pieces(report: Report, *, color: bool = False) -> list[str]:
    """render_json's text as the pieces it joins: `review` writes them one by one, so that a
    report of thousands of files is not held a second time, joined."""
    head = json_text(_head(report))
    if not report.results:
        return [head]
    assert head.startswith(_EMPTY_FILES)
    pieces = ['{\n  "files": [\n']
    for i, r in enumerate(report.results):
        pieces += [",\n" if i else "", r.part if r.part is not None else json_part(report, r)]
    pieces += ["\n  ],\n", head[len(_EMPTY_FILES) :]]
    return pieces
