"""What a policy test case may expect beyond which rules fired, and the checks that make a test
file broken (exit 2) before any case runs.

- ``message`` (a regular expression, searched as `matches` searches), ``severity`` and
  ``waived`` apply to the findings of the rules the case lists in ``fired`` (decision rows make
  no finding and are left out): each of those rules must have a finding that meets each one.
- ``plan`` (``P``, ``M``, ``T``, ``EP``, ``schedule``) is the planner's recommendation: pipeline
  depth, micro-batches per step, tensor and expert parallel sizes, and its schedule (``none``:
  no pipeline). The top-level ``schedule`` stays the policies' recommendation after refusals.

A name that no loaded rule, set, schedule or base manifest has is a broken test, never a case
that fails or passes by accident; each gets a "did you mean".
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpguard.findings import Finding
from dpguard.hints import hint
from dpguard.policy.facts import SCHEDULES
from dpguard.policy.regex import PatternProblem, compile_pattern
from dpguard.yamlevents import value_at

if TYPE_CHECKING:
    from dpguard.planner.plan import Plan
    from dpguard.policy.model import Policies
    from dpguard.yamlsource import SourceDoc

FINDING_KEYS = ("message", "severity", "waived")
# expect.plan key -> (Plan attribute, what a failure calls it)
PLAN_NUMBERS = {"P": "pipeline", "M": "microbatches", "T": "tensor", "EP": "expert"}
SCHEDULE_CHOICES = (*SCHEDULES, "none")


def _ids(ids: Iterable[str]) -> str:
    return "[" + ", ".join(sorted(ids)) + "]"


def problems(doc: SourceDoc, policies: Policies) -> list[str]:
    """Every reason the test file cannot be run as written, in file order: unknown rule ids,
    decision ids that are not decision rows, finding expectations without a rule in fired that
    makes findings, message patterns that do not compile, schedules that do not exist, base
    names that are neither a name in ``manifests:`` nor a file."""
    rules = {r.id: r for r in policies.rules}
    rows = [r.id for r in policies.rules if r.kind == "decision"]
    named = doc.data.get("manifests", {})
    found: list[tuple[tuple[str | int, ...], str]] = []  # (path in the file, message)
    for index, case in enumerate(doc.data["cases"]):
        expect = case["expect"]
        here = ("cases", index)
        for key in ("fired", "not_fired"):
            for j, rule_id in enumerate(expect.get(key, ())):
                if rule_id not in rules:
                    message = f"unknown rule {rule_id} in {key}{hint(rule_id, rules)}"
                    found.append(((*here, "expect", key, j), message))
        decision = expect.get("decision")
        if decision is not None and (decision not in rules or rules[decision].kind != "decision"):
            message = f"{decision} is not a loaded decision rule{hint(decision, rows)}"
            found.append(((*here, "expect", "decision"), message))
        given = [k for k in FINDING_KEYS if k in expect]
        fired = expect.get("fired", ())
        finders = [i for i in fired if i in rules and rules[i].kind != "decision"]
        if given and not finders and all(i in rules for i in fired):  # unknown: reported above
            found.append(
                (
                    (*here, "expect", given[0]),
                    f"{', '.join(given)} {'test' if len(given) > 1 else 'tests'} the findings "
                    "of the rules in fired, and fired names "
                    "no rule that makes findings (a decision row makes none)",
                )
            )
        if "message" in expect:
            try:
                compile_pattern(expect["message"])
            except PatternProblem as exc:
                found.append(((*here, "expect", "message"), f"message pattern: {exc}"))
        for keys in (("expect", "schedule"), ("expect", "plan", "schedule")):
            value = value_at(case, keys)
            if value is not None and value not in SCHEDULE_CHOICES:
                choices = ", ".join(SCHEDULE_CHOICES)
                message = f"{value!r} is not a schedule{hint(value, SCHEDULE_CHOICES)}; possible: "
                found.append(((*here, *keys), message + choices))
        base = case["manifest"]
        if isinstance(base, str) and base not in named and not _is_file(doc.name, base):
            found.append(
                (
                    (*here, "manifest"),
                    f"manifest {base} is neither a name in manifests:{hint(base, named)} nor a "
                    f"file (relative to the test file); names: {', '.join(named) or 'none'}",
                )
            )
    found.sort(key=lambda item: doc.position(item[0]))
    return [f"{doc.location(path)}: {message}" for path, message in found]


def _is_file(test_file: str, path: str) -> bool:
    return os.path.isfile(os.path.join(os.path.dirname(test_file), path))


def finding_failures(
    expect: Mapping[str, Any], findings: Sequence[Finding], policies: Policies
) -> list[str]:
    """Unmet ``message``, ``severity`` and ``waived`` expectations: each rule in ``fired`` that
    makes findings must have one that meets each given key. A rule that did not fire at all is
    already a ``fired`` failure and is not repeated here."""
    failures: list[str] = []
    for rule_id in expect.get("fired", ()):
        rule = policies.get(rule_id)
        mine = [f for f in findings if f.code == rule_id]
        if rule is None or rule.kind == "decision" or not mine:
            continue
        if "message" in expect and not any(re.search(expect["message"], f.message) for f in mine):
            got = " | ".join(repr(f.message) for f in mine)
            failures.append(f"expected {rule_id} message matching {expect['message']!r}, got {got}")
        if "severity" in expect and all(f.severity.value != expect["severity"] for f in mine):
            got = ", ".join(sorted({f.severity.value for f in mine}))
            failures.append(f"expected {rule_id} severity {expect['severity']}, got {got}")
        if "waived" in expect and all(f.waived != expect["waived"] for f in mine):
            want, got = ("waived", "not waived") if expect["waived"] else ("not waived", "waived")
            failures.append(f"expected {rule_id} {want}, got {got}")
    return failures


def plan_failures(expect: Mapping[str, Any], plan: Plan) -> list[str]:
    """Unmet ``plan`` expectations; an infeasible plan fails every one, with the reason."""
    wanted = expect.get("plan")
    if not wanted:
        return []
    if plan.status == "infeasible":
        why = "; ".join(plan.notes) or "no layout fits"
        shown = ", ".join(f"{k} {v}" for k, v in wanted.items())
        return [f"expected plan {shown}, got no feasible plan ({why})"]
    failures = []
    for key, attribute in PLAN_NUMBERS.items():
        if key in wanted and wanted[key] != getattr(plan, attribute):
            failures.append(f"expected plan {key} {wanted[key]}, got {getattr(plan, attribute)}")
    got_schedule = plan.schedule or "none"
    if "schedule" in wanted and wanted["schedule"] != got_schedule:
        failures.append(f"expected plan schedule {wanted['schedule']}, got {got_schedule}")
    return failures


def coverage_sets(names: Sequence[str], policies: Policies) -> frozenset[str]:
    """The set names `--coverage-of` scopes coverage to: each a set's ``metadata.name`` or the
    path of a loaded set file. An unknown one is a usage error (exit 2) with a hint."""
    from pathlib import Path

    from dpguard.errors import UsageError

    by_path = {str(Path(s.path).resolve()): s.name for s in policies.sets}
    known = [s.name for s in policies.sets]
    out = set()
    for name in names:
        if name in known:
            out.add(name)
        elif str(Path(name).resolve()) in by_path:
            out.add(by_path[str(Path(name).resolve())])
        else:
            raise UsageError(
                f"--coverage-of {name}: no loaded policy set has that name or path"
                f"{hint(name, known)}; loaded: {', '.join(known)}"
            )
    return frozenset(out)
