"""The rules a file's standing errors do not touch, judged anyway: every problem at once.

A file with an error (a missing GPU count, a schema violation) never becomes a Manifest, so the
engine cannot judge it, and a rule about something else entirely (FlagScale's DualPipeV with
multi-token prediction, FW008) stayed silent until the first error was fixed. Here the rejects and
advisories are judged on the facts the document states as written, but only the rules whose every
fact is known without the manifest: a framework reader's own facts (the reader sets them or not,
whatever else is missing), and values the document writes in the fact's own type, at a position
no error points at. A rule that reads anything else (a default, a derived value, the catalog, the
plan) depends on what the errors leave unknown and waits for them to be fixed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpguard.findings import Finding
from dpguard.policy.engine import facts_tested, reads_change
from dpguard.policy.facts import FACTS, FRAMEWORK, LATE_FACTS, spec_of
from dpguard.policy.model import KIND_SEVERITY, Policies
from dpguard.policy.templates import render_message
from dpguard.yamlevents import SourceDoc

# Sections whose written values are the facts themselves (cluster facts come from the catalog,
# runtime ones from the framework profile: neither is known without the manifest).
_WRITTEN = ("model", "parallelism", "training")
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "number": (int, float),
    "str": (str,),
    "bool": (bool,),
}


def _written(doc: SourceDoc, errors: set[str]) -> dict[str, Any]:
    """The facts `doc` writes in their own type, away from every error's position."""
    out: dict[str, Any] = {}
    for path, spec in FACTS.items():
        parts = tuple(path.split("."))
        if parts[0] not in _WRITTEN or len(parts) != 2 or path in LATE_FACTS:
            continue
        section = doc.data.get(parts[0])
        value = section.get(parts[1]) if isinstance(section, Mapping) else None
        # (YAML's true is an int to Python, never a count)
        typed = isinstance(value, _TYPES[spec.type]) and (
            spec.type == "bool" or not isinstance(value, bool)
        )
        if not typed or (spec.choices and value not in spec.choices):
            continue
        if doc.location(parts) in errors:
            continue
        line, col = doc.value_position(parts)
        if f"{doc.file(parts)}:{line}:{col}" in errors:
            continue
        out[path] = value
    return out


def standing_findings(
    policies: Policies,
    doc: SourceDoc,
    framework: Mapping[str, Any],
    source_format: str,
    errors: Sequence[Finding],
) -> tuple[Finding, ...]:
    """Findings of the rejects and advisories that hold on what `doc` states, judged while
    `errors` stand (see the module docstring); `framework` holds the reader's facts."""
    facts: dict[str, Any] = {spec.path: framework.get(spec.path) for spec in FRAMEWORK}
    facts["framework.format"] = source_format
    facts.update(_written(doc, {f"{f.path}:{f.line}:{f.col}" for f in errors}))
    known = facts.keys()
    out: list[Finding] = []
    for rule in (*policies.by_kind("reject"), *policies.by_kind("advise")):
        if reads_change(rule) or not facts_tested(rule.when) <= known:
            continue
        if not rule.when.holds(facts):
            continue
        try:
            message = render_message(rule.message, facts, {"id": rule.id, "title": rule.title})
        except Exception:  # the message names a fact only the manifest knows: wait for it
            continue
        spec = spec_of(rule.at)
        where = tuple(((spec.anchor if spec else "") or rule.at).split("."))
        line, col = doc.position(where)
        severity = rule.severity or KIND_SEVERITY[rule.kind]
        out.append(Finding(doc.file(where), line, col, rule.id, severity, message, kind=rule.kind))
    return tuple(out)
