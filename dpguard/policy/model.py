"""Loaded policies as immutable records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from dpguard.findings import Severity
from dpguard.frameworks.profiles import with_team
from dpguard.policy.conditions import Condition

KIND_SEVERITY = {"decision": Severity.INFO, "reject": Severity.ERROR, "advise": Severity.WARNING}


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str  # decision | reject | refuse | advise
    title: str
    severity: Severity | None  # None: the kind's default (see KIND_SEVERITY; refuse decides late)
    when: Condition
    message: str  # Jinja template source
    docs: str
    waivable: bool
    at: str  # fact path whose manifest position a finding points at
    recommend: str | None = None
    acceptable: tuple[str, ...] = ()
    refuses: tuple[str, ...] = ()
    precedence: int = 0
    override: bool = False
    policy: str = ""  # name of the set that defined it
    location: str = ""  # file:line:col of the rule

    def refuses_schedule(self, schedule: str | None) -> bool:
        if schedule is None or schedule == "none":
            return False
        return schedule in self.refuses or "any" in self.refuses


@dataclass(frozen=True)
class PolicySet:
    name: str
    version: str
    digest: str  # sha256 of the file bytes, so a reviewer sees exactly which rules judged
    path: str
    rules: tuple[Rule, ...]
    disable: tuple[str, ...] = ()
    disable_at: tuple[str, ...] = ()  # file:line:col of each disable entry
    max_waiver_days: int | None = None
    settings: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Policies:
    """The effective rule list after layering sets in order (later sets override/disable)."""

    sets: tuple[PolicySet, ...]
    rules: tuple[Rule, ...]
    max_waiver_days: int
    settings: dict[str, Any] = field(default_factory=dict, compare=False)  # merged, later wins
    uses: frozenset[str] = frozenset()  # fact paths the rules read, so costly facts are lazy
    silenced: frozenset[str] = frozenset()  # checks switched off (codes.SILENCEABLE)
    # the team's framework profiles among the layered files, (path, text) each: they join the
    # shipped ones for the manifests these policies judge (frameworks.profiles.using)
    profiles: tuple[tuple[str, str], ...] = ()

    def by_kind(self, kind: str) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.kind == kind)

    def get(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)


def policy_line(policies: Policies) -> str:
    return "policies: " + ", ".join(
        f"{s['name']} {s['version']} ({s['digest']})"
        if "kind" not in s
        else f"framework profile {s['name']} ({s['digest']})"
        for s in provenance(policies)
    )


def provenance(policies: Policies | None) -> list[dict[str, str]]:
    """What judged: each policy set (name, version, digest of its file), then each team
    framework profile (name, kind, digest), in layering order; a report names them all."""
    if policies is None:
        return []
    out = [{"name": s.name, "version": s.version, "digest": s.digest} for s in policies.sets]
    if policies.profiles:  # checked with the shipped ones when the stack loaded
        named = {p.path: p.name for p in with_team(policies.profiles).values()}
        for path, text in policies.profiles:
            digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
            out.append({"name": named[path], "kind": "framework-profile", "digest": digest})
    return out
