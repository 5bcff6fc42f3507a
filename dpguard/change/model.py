"""What one manifest costs at each of two versions, and what changed between them.

`summarise` reads a checked file (`dpguard.check.FileResult`) into a `Side`: the layout that
will run (the proposal when the manifest writes one, else the plan dpguard recommends), its
bubble, GPU-hours for the token budget, worst-rank memory and verdict. `Change` pairs two sides
with the findings each has and the other does not; `ChangeReport` is the one value every diff
renderer reads.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dpguard import sizing
from dpguard.check import FileResult
from dpguard.exitcodes import blocking
from dpguard.findings import Finding, Severity
from dpguard.policy.model import Policies

STATUSES = ("added", "removed", "modified", "renamed", "unchanged")
SECTIONS = ("cluster", "model", "training", "parallelism", "communication")


@dataclass(frozen=True)
class Side:
    """One version of one manifest. Numbers are None when that version cannot be sized: it
    did not load or validate, or no layout is feasible, or the schedule cannot run there."""

    path: str
    state: str  # valid | invalid (schema or cross-field errors) | unparseable (YAML, reading)
    passed: bool  # no blocking finding
    findings: tuple[Finding, ...]
    name: str | None = None
    accelerator: str | None = None
    gpus: int | None = None
    pipeline: int | None = None
    microbatches: int | None = None
    tensor: int | None = None
    expert: int | None = None
    schedule: str | None = None  # "none": no pipeline
    layout: str | None = None  # proposal (as written) | plan (dpguard's recommendation)
    bubble: float | None = None
    gpu_hours: float | None = None
    memory_gib: float | None = None  # worst rank, central estimate
    memory_verdict: str | None = None  # fits | likely-oom | oom
    cost: float | None = None  # gpu_hours x the policy's cost_per_gpu_hour, when set
    values: tuple[tuple[str, Any], ...] = ()  # the normalised manifest, flattened
    written: frozenset[str] = frozenset()  # the dotted keys the file writes

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity and not f.waived)


@dataclass(frozen=True)
class KeyChange:
    """A manifest key whose normalised value differs, placed where the new version writes it
    (or its nearest written ancestor; the old version's place for a key only it has)."""

    key: str
    before: Any
    after: Any
    path: str
    line: int
    col: int


@dataclass(frozen=True)
class Delta:
    gpu_hours: float | None
    gpu_hours_fraction: float | None
    bubble_points: float | None
    memory_gib: float | None
    cost: float | None


@dataclass(frozen=True)
class Change:
    path: str  # the file now (the old path for a removed file)
    base_path: str | None  # the file at the baseline (None: added)
    status: str  # one of STATUSES
    before: Side | None
    after: Side | None
    added: tuple[Finding, ...]  # findings the new version has and the old did not
    resolved: tuple[Finding, ...]
    unchanged: tuple[Finding, ...]
    keys: tuple[KeyChange, ...]
    result: FileResult | None = field(default=None, repr=False, compare=False)  # the new one

    @property
    def delta(self) -> Delta:
        return delta(self.status, self.before, self.after)

    @property
    def changed(self) -> bool:
        """Whether anything dpguard judges differs between the versions. Not for a byte-identical
        file, nor for an edit (a comment, key order, a quantity's spelling) after which both
        versions are valid, the same manifest once normalised, and judged the same: reports
        list such a file as unchanged and leave it out of the changed count and the totals.
        An invalid version is only as unchanged as its bytes: what it says cannot be read."""
        b, a = self.before, self.after
        if self.added or self.resolved:  # a rule on the change may judge even identical bytes
            return True
        if self.status == "unchanged":
            return False
        if self.status != "modified" or b is None or a is None:
            return True
        if b.state != "valid" or a.state != "valid":
            return True
        return _judged(b) != _judged(a)

    @property
    def cost_moved(self) -> bool:
        """GPU-hours, bubble, memory verdict or schedule differ between the versions."""
        b, a = self.before, self.after
        if b is None or a is None:
            return False
        d = self.delta
        return bool(
            (d.gpu_hours and abs(d.gpu_hours) > 1e-9)
            or (d.bubble_points and abs(d.bubble_points) > 1e-9)
            or b.memory_verdict != a.memory_verdict
            or b.schedule != a.schedule
            or b.gpus != a.gpus
        )


@dataclass(frozen=True)
class ChangeReport:
    changes: tuple[Change, ...]
    baseline: str | None  # the revision as given (None: `dpguard diff` of two paths)
    commit: str | None  # its commit id
    policies: Policies | None
    currency: str | None  # of every cost (None: no cost_per_gpu_hour setting)
    unreadable: tuple[tuple[str, str], ...] = ()

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The new versions' findings: what decides the exit code, as in `review`."""
        return tuple(f for c in self.changes if c.after is not None for f in c.after.findings)

    def totals(self) -> dict[str, Any]:
        """Sums over the changed files (`Change.changed`) whose versions could be sized;
        `unsized` counts the changed files left out because a version that exists could not be
        (invalid, infeasible, cannot run)."""

        def sized(c: Change) -> bool:
            return all(s is None or s.gpu_hours is not None for s in (c.before, c.after))

        changed = [c for c in self.changes if c.changed]
        counted = [c for c in changed if sized(c)]
        out: dict[str, Any] = {"unsized": len(changed) - len(counted)}
        for attr in ("gpu_hours", "cost"):
            for side in ("before", "after"):
                values = [getattr(getattr(c, side), attr) for c in counted if getattr(c, side)]
                unknown = not counted or any(v is None for v in values)
                known = None if unknown else float(sum(values))
                out[f"{attr}_{side}"] = known
            before, after = out[f"{attr}_before"], out[f"{attr}_after"]
            out[f"{attr}_delta"] = None if before is None or after is None else after - before
        before = out["gpu_hours_before"]
        out["gpu_hours_fraction"] = (
            out["gpu_hours_delta"] / before
            if before and out["gpu_hours_delta"] is not None
            else None
        )
        out["currency"] = self.currency
        return out


def _judged(side: Side) -> Side:
    """What dpguard judges of a version: all of it but where it is and where its findings are
    (they match by `identity`) and which keys it spells out rather than leaves to defaults."""
    return replace(side, path="", findings=(), written=frozenset())


def _rate(settings: Mapping[str, Any], accelerator: str) -> float | None:
    table = settings.get("cost_per_gpu_hour")
    if not table:
        return None
    rate = table.get(accelerator, table.get("default"))
    return None if rate is None else float(rate)


def currency(policies: Policies | None) -> str | None:
    table = policies.settings.get("cost_per_gpu_hour") if policies else None
    return str(table["currency"]) if table else None


def _flatten(node: Any, prefix: str) -> Iterable[tuple[str, Any]]:
    if isinstance(node, dict) and node:
        for key in sorted(node):
            yield from _flatten(node[key], f"{prefix}.{key}")
    else:
        yield prefix, node


def summarise(result: FileResult, policies: Policies | None, fail_on: str) -> Side:
    findings = result.findings
    passed = not any(blocking(f, fail_on) for f in findings)
    m = result.manifest
    if m is None:
        unparseable = any(f.code.startswith(("Y", "F")) for f in findings)
        state = "unparseable" if unparseable else "invalid"
        return Side(result.path, state, passed, findings)
    plain = m.to_dict()
    values = tuple(kv for section in SECTIONS for kv in _flatten(plain.get(section), section))
    side = Side(
        result.path,
        "valid",
        passed,
        findings,
        name=m.name,
        accelerator=m.cluster.accelerator,
        gpus=m.cluster.gpus,
        values=values,
        written=frozenset(".".join(map(str, key)) for key in m.source.keys),
    )
    if policies is None or result.outcome is None:
        return side
    settings = policies.settings
    facts, p, plan = result.outcome.facts, m.parallelism, result.plan
    numbers: dict[str, Any] = {}
    if p is not None:
        bubble = facts.get("proposal.bubble")
        hours = facts.get("proposal.gpu_hours")
        if p.pipeline == 1:  # no pipeline: no bubble
            bubble, hours = 0.0, sizing.ideal_gpu_hours(m, settings)
        numbers = dict(
            layout="proposal",
            pipeline=p.pipeline,
            microbatches=m.microbatches,
            tensor=p.tensor,
            expert=p.expert,
            schedule=facts.get("proposal.schedule"),
            bubble=bubble,
            gpu_hours=hours,
            memory_gib=facts.get("proposal.stage_memory_gb"),
            memory_verdict=facts.get("proposal.memory_verdict"),
        )
    elif plan is not None and plan.status != "infeasible":
        chosen = plan.numbers(plan.schedule)
        piped = plan.status == "planned"
        numbers = dict(
            layout="plan",
            pipeline=plan.pipeline,
            microbatches=plan.microbatches,
            tensor=plan.tensor,
            expert=plan.expert,
            schedule=plan.schedule if piped else "none",
            bubble=(chosen.bubble if chosen else None) if piped else 0.0,
            gpu_hours=(chosen.gpu_hours if chosen else None) if piped else plan.ideal_gpu_hours,
        )
        if plan.memory is not None:
            numbers["memory_gib"] = plan.memory.worst.total / sizing.GIB
            numbers["memory_verdict"] = sizing.verdict(plan.manifest, plan.memory, settings)
    elif plan is not None:
        numbers = dict(layout="plan")
    hours = numbers.get("gpu_hours")
    rate = _rate(settings, m.cluster.accelerator)
    if hours is not None and rate is not None:
        numbers["cost"] = hours * rate
    return replace(side, **numbers)


def delta(status: str, before: Side | None, after: Side | None) -> Delta:
    """After less before. A side that does not exist (added, removed) counts as zero GPU-hours
    and cost; a side that exists but cannot be sized leaves the delta unset."""

    def diff(attr: str) -> float | None:
        b = 0.0 if before is None else getattr(before, attr)
        a = 0.0 if after is None else getattr(after, attr)
        return None if a is None or b is None else a - b

    def both(attr: str) -> float | None:
        if before is None or after is None:
            return None
        b, a = getattr(before, attr), getattr(after, attr)
        return None if a is None or b is None else a - b

    hours = diff("gpu_hours")
    base = before.gpu_hours if before is not None else None
    bubble = both("bubble")
    return Delta(
        hours,
        hours / base if hours is not None and base else None,
        None if bubble is None else bubble * 100,
        both("memory_gib"),
        diff("cost"),
    )


def change_facts(status: str, before: Side | None, after: Side | None) -> dict[str, Any]:
    """The ``change.*`` facts (dpguard.policy.facts.CHANGE) of the new version."""
    d = delta(status, before, after)
    schedule_changed = None
    if before is not None and after is not None and before.state == after.state == "valid":
        schedule_changed = before.schedule != after.schedule
    return {
        "change.status": status,
        "change.gpu_hours_delta": d.gpu_hours,
        "change.gpu_hours_delta_fraction": d.gpu_hours_fraction,
        "change.bubble_delta_points": d.bubble_points,
        "change.schedule_changed": schedule_changed,
    }


_POSITION = re.compile(r"\b(lines?|column)\s+\d+(\s*(-|,|and)\s*\d+)*")


def identity(finding: Finding) -> tuple[str, str, str]:
    """What makes two findings the same problem whatever their position: the code, the
    severity and the message with line and column numbers taken out (a message may name where
    something else is written, e.g. "first defined at line 12")."""
    return finding.code, finding.severity.value, _POSITION.sub(r"\1 N", finding.message)


def compare_findings(
    before: Iterable[Finding], after: Iterable[Finding]
) -> tuple[tuple[Finding, ...], tuple[Finding, ...], tuple[Finding, ...]]:
    """(added, resolved, unchanged), matching by `identity` as multisets: moving a key or
    reordering a file changes positions, never which problems a manifest has."""
    old = Counter(identity(f) for f in before)
    added, unchanged = [], []
    for f in sorted(after):
        key = identity(f)
        if old[key] > 0:
            old[key] -= 1
            unchanged.append(f)
        else:
            added.append(f)
    new = Counter(identity(f) for f in after)
    resolved = []
    for f in sorted(before):
        key = identity(f)
        if new[key] > 0:
            new[key] -= 1
        else:
            resolved.append(f)
    return tuple(added), tuple(resolved), tuple(unchanged)


def changed_keys(before: Side | None, after: Side | None, locate: Any) -> tuple[KeyChange, ...]:
    """Keys either version writes whose normalised values differ; `locate(dotted) -> (path,
    line, col)` places each in the new version."""
    if before is None or after is None or not before.values or not after.values:
        return ()
    old, new = dict(before.values), dict(after.values)
    written = before.written | after.written  # not what the catalog derives (cluster.family)
    out = []
    for key in sorted((set(old) | set(new)) & written):
        b, a = old.get(key), new.get(key)
        if b != a:
            out.append(KeyChange(key, b, a, *locate(key)))
    return tuple(out)
