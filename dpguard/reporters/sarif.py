"""`sarif`: SARIF 2.1.0 for code-scanning upload (GitHub `upload-sarif`, GitLab, IDE viewers).

One run; `tool.driver.rules` lists every rule that produced a result, sorted by id, with the
policy's `docs` as help text (or the code's description for the Y/S/X loading, schema and
cross-field codes); each result points at its rule by id and index and at the file by a relative
URI and a 1-based line and column. Waived findings carry an accepted external suppression, so
code scanning shows them as dismissed rather than open, justified by the waiver's reason, owner
and expiry and located at the waiver. Written as the JSON report is
(`dpguard.reporters.safe.json_text`): every string exact, no line a CI workflow command.
"""

from __future__ import annotations

from typing import Any

from dpguard.findings import Finding, Severity, split_location
from dpguard.reporters.model import (
    INFORMATION_URI,
    TOOL,
    Report,
    RuleInfo,
    policy_sets,
    relative_uri,
    rule_info,
)
from dpguard.reporters.safe import json_text

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule(info: RuleInfo) -> dict[str, Any]:
    properties: dict[str, Any] = {"kind": info.kind, "tags": ["dpguard", info.kind]}
    if info.policy:
        properties["policy"] = info.policy
    return {
        "id": info.id,
        "shortDescription": {"text": info.title},
        "help": {"text": info.help},
        "defaultConfiguration": {"level": LEVELS[info.severity]},
        "properties": properties,
    }


def _result(finding: Finding, index: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": relative_uri(finding.path)},
                    "region": {"startLine": finding.line, "startColumn": finding.col},
                }
            }
        ],
        "properties": {"kind": finding.kind},
    }
    if finding.waived:
        result["suppressions"] = [_suppression(finding)]
    return result


def _suppression(finding: Finding) -> dict[str, Any]:
    """An accepted external suppression whose justification is the waiver's reason, owner and
    expiry (also as properties), located at the waiver in the waivers file."""
    waiver = finding.waiver
    if waiver is None:  # waived without a recorded waiver: say no more than that
        return {"kind": "external", "status": "accepted", "justification": "waived (dpguard)"}
    suppression: dict[str, Any] = {
        "kind": "external",
        "status": "accepted",
        "justification": (
            f"{waiver.reason} (owner {waiver.owner}, waiver expires {waiver.expires})"
        ),
        "properties": {
            "reason": waiver.reason,
            "owner": waiver.owner,
            "expires": waiver.expires,
        },
    }
    path, line, col = split_location(waiver.location)
    if path:
        suppression["location"] = {
            "physicalLocation": {
                "artifactLocation": {"uri": relative_uri(path)},
                "region": {"startLine": line, "startColumn": col},
            }
        }
    return suppression


def sarif_dict(report: Report) -> dict[str, Any]:
    codes = sorted({f.code for f in report.findings})
    index = {code: i for i, code in enumerate(codes)}
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL["name"],
                        "version": TOOL["version"],
                        "semanticVersion": TOOL["version"],
                        "informationUri": INFORMATION_URI,
                        "rules": [_rule(rule_info(report, code)) for code in codes],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": [_result(f, index[f.code]) for f in report.findings],
                "properties": {"policies": policy_sets(report), "configs": _configs(report)},
            }
        ],
    }


def _configs(report: Report) -> list[dict[str, Any]]:
    """Which configuration judged which files (none: no .dpguard.yaml judged them)."""
    return [{"config": g.config, "files": list(g.paths)} for g in report.groups() if g.config]


def render_sarif(report: Report, *, color: bool = False) -> str:
    return json_text(sarif_dict(report))
