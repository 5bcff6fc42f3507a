"""Evaluate loaded policies against one manifest's facts.

Order, documented in docs/policies.md:
1. Decision rows in order; the first whose condition holds picks the schedule. No match is an
   error finding (P001): a valid manifest must never get a silent "no recommendation".
2. Refusals by descending precedence (file order breaks ties). A firing refusal that refuses the
   schedule the manifest proposes is an error finding carrying the redirect. The recommendation
   is redirected by the highest-precedence firing refusal that refuses it, repeatedly, until no
   refusal applies (a cycle is a policy error); each redirect the manifest did not already cause
   is reported as information.
3. Rejects and advisories, with ``decision.*`` and ``plan.*`` facts available.
4. After the planner has run (`judge_planned`): the rejects and advisories that read what it
   found (``plan.feasible``, ``plan.infeasible_reason``).
5. Only when a baseline is compared (`judge_change`, from dpguard.change): the rejects and
   advisories that read ``change.*`` facts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dpguard.errors import ConfigError
from dpguard.findings import Finding, Severity
from dpguard.manifest import Manifest
from dpguard.policy.conditions import Condition, leaves
from dpguard.policy.facts import CHANGE_FACTS, PLANNED, PRICED, sized_facts, spec_of
from dpguard.policy.model import KIND_SEVERITY, Policies, Rule
from dpguard.policy.templates import render_message


@dataclass(frozen=True)
class Outcome:
    decision: Rule | None
    schedule: str | None  # the recommended schedule after refusals ("none": no pipeline)
    redirects: tuple[Rule, ...]
    findings: tuple[Finding, ...]
    facts: Mapping[str, Any]


def _proposal_refused(rule: Rule, facts: Mapping[str, Any]) -> bool:
    schedule = facts.get("parallelism.schedule")
    if schedule is not None:
        return rule.refuses_schedule(schedule)
    # Pipeline parallelism proposed without naming a schedule: refused only by `any`.
    return (facts.get("parallelism.pipeline") or 1) > 1 and "any" in rule.refuses


def _finding(
    rule: Rule,
    manifest: Manifest,
    facts: Mapping[str, Any],
    severity: Severity,
    worded: bool = True,
) -> Finding:
    """The rule's finding at its fact's position; `worded` False: without its message (for
    callers that keep only which rules fired)."""
    spec = spec_of(rule.at)  # metadata.labels.<key> included
    anchor = (spec.anchor or rule.at) if spec is not None else ""
    path, line, col = manifest.locate(anchor)
    if not worded:
        return Finding(path, line, col, rule.id, severity, "", kind=rule.kind)
    try:
        message = render_message(rule.message, facts, {"id": rule.id, "title": rule.title})
    except Exception as exc:  # a policy bug, never the manifest's
        raise ConfigError(
            f"message of rule {rule.id} cannot be rendered: {exc}", rule.location
        ) from None
    return Finding(path, line, col, rule.id, severity, message, kind=rule.kind)


def evaluate(
    policies: Policies,
    manifest: Manifest,
    base_facts: Mapping[str, Any],
    priced: bool = True,
    shown: bool = True,
) -> Outcome:
    """The decision, refusals and findings for `manifest`. `priced` False, for callers that
    keep only which rules fired, leaves out the memory remedies (four more estimates) and the
    findings' messages (one of them may need Jinja to render). `shown` False, for a report that
    prints no decision line or plan: the proposal's bubble and GPU-hours (a simulation and a
    step-time prediction) are computed only if a rule reads them."""
    facts = dict(base_facts)
    findings: list[Finding] = []
    decision = next((r for r in policies.by_kind("decision") if r.when.holds(facts)), None)
    if decision is None:
        findings.append(
            Finding(
                *manifest.locate("kind"),  # the document as a whole, not a comment line
                "P001",
                Severity.ERROR,
                "no decision row matches this manifest: the policy cannot recommend a schedule "
                "(add a row to the decision table)",
                kind="decision",
            )
        )
    refusals = sorted(
        (r for r in policies.by_kind("refuse") if r.when.holds(facts)),
        key=lambda r: -r.precedence,
    )
    reported: set[str] = set()
    proposal_refusal = next((r for r in refusals if _proposal_refused(r, facts)), None)
    if proposal_refusal is not None:
        severity = proposal_refusal.severity or Severity.ERROR
        findings.append(_finding(proposal_refusal, manifest, facts, severity, priced))
        reported.add(proposal_refusal.id)
    schedule = decision.recommend if decision else None
    redirects: list[Rule] = []
    seen = {schedule}
    while schedule is not None:
        rule = next((r for r in refusals if r.refuses_schedule(schedule)), None)
        if rule is None:
            break
        redirects.append(rule)
        schedule = rule.recommend
        if schedule in seen:
            raise ConfigError(
                f"refusals redirect in a cycle: {' -> '.join(r.id for r in redirects)}",
                rule.location,
            )
        seen.add(schedule)
        if rule.id not in reported:
            findings.append(_finding(rule, manifest, facts, rule.severity or Severity.INFO, priced))
            reported.add(rule.id)
    proposed = facts.get("parallelism.schedule")
    facts["decision.schedule"] = decision.recommend if decision else None
    facts["decision.rule"] = decision.id if decision else None
    facts["plan.schedule"] = schedule
    facts["plan.rule"] = redirects[-1].id if redirects else facts["decision.rule"]
    facts["plan.proposal_acceptable"] = (
        None
        if proposed is None or decision is None
        else proposed == schedule
        or (schedule == decision.recommend and proposed in decision.acceptable)
    )
    facts["proposal.refused"] = None if proposed is None else proposal_refusal is not None
    uses = policies.uses if priced else policies.uses - {"proposal.memory_remedies"}
    if shown:
        uses |= PRICED  # the decision line and the plan page print them
    facts.update(sized_facts(manifest, policies.settings, schedule, uses))
    findings += _judged(policies, manifest, facts, planned=False, worded=priced)
    return Outcome(decision, schedule, tuple(redirects), tuple(sorted(findings)), facts)


# Conditions are immutable and live as long as their policies: each is walked once, not once
# per rule per manifest (the walk was a tenth of a 500-file review). Keyed by identity, with
# the condition kept so that its id is never reused: hashing a condition tree costs as much
# as walking it.
_TESTED: dict[int, tuple[Condition, frozenset[str]]] = {}


def facts_tested(when: Condition) -> frozenset[str]:
    known = _TESTED.get(id(when))
    if known is None or known[0] is not when:
        known = _TESTED[id(when)] = (when, frozenset(leaf.fact for leaf in leaves(when)))
    return known[1]


def _reads_plan(rule: Rule) -> bool:
    return not facts_tested(rule.when).isdisjoint(PLANNED)


def reads_change(rule: Rule) -> bool:
    """The rule tests what a pull request changed: judged only by `judge_change`."""
    return not facts_tested(rule.when).isdisjoint(CHANGE_FACTS)


def _judged(
    policies: Policies,
    manifest: Manifest,
    facts: Mapping[str, Any],
    planned: bool,
    worded: bool = True,
) -> list[Finding]:
    """Findings of the rejects and advisories that hold: those that read the planner's facts
    when `planned`, the others when not (`worded`: with their messages)."""
    return [
        _finding(rule, manifest, facts, rule.severity or KIND_SEVERITY[rule.kind], worded)
        for rule in _judging(policies, planned)
        if rule.when.holds(facts)
    ]


# The rejects and advisories `_judged` tests, by policies (kept, so that an id is never
# mistaken for another's) and by whether they read the planner's facts: which rules those are
# depends only on the policies, and a review judges hundreds of files with one stack.
_JUDGING: dict[tuple[int, bool], tuple[Policies, tuple[Rule, ...]]] = {}


def _judging(policies: Policies, planned: bool) -> tuple[Rule, ...]:
    known = _JUDGING.get((id(policies), planned))
    if known is None or known[0] is not policies:
        if len(_JUDGING) >= 64:
            _JUDGING.clear()
        rules = tuple(
            rule
            for rule in policies.rules
            if rule.kind in ("reject", "advise")
            and _reads_plan(rule) is planned
            and not reads_change(rule)
        )
        known = _JUDGING[(id(policies), planned)] = (policies, rules)
    return known[1]


class LazyFacts(Mapping[str, Any]):
    """Facts of which some (`pending`) are computed when a condition or a message first reads
    one of them: the plan's numbers cost the planner's full search, which a review whose output
    shows no plan needs only when a rule actually compares them (ADV003)."""

    def __init__(
        self,
        known: Mapping[str, Any],
        pending: frozenset[str],
        resolve: Callable[[], Mapping[str, Any]],
    ) -> None:
        self._facts = {k: v for k, v in known.items() if k not in pending}
        self._pending = pending
        self._resolve = resolve

    def over(self, base: Mapping[str, Any]) -> LazyFacts:
        """These facts over `base`, still lazy."""
        return LazyFacts({**base, **self._facts}, self._pending, self._resolve)

    def __getitem__(self, key: str) -> Any:
        if key in self._pending:
            resolved = self._resolve()
            self._facts.update((k, resolved[k]) for k in self._pending)
            self._pending = frozenset()
        return self._facts[key]

    def __contains__(self, key: object) -> bool:
        return key in self._facts or key in self._pending

    def __iter__(self) -> Iterator[str]:
        yield from self._facts
        yield from sorted(self._pending)

    def __len__(self) -> int:
        return len(self._facts) + len(self._pending)


def judge_planned(
    policies: Policies, manifest: Manifest, outcome: Outcome, plan_facts: Mapping[str, Any]
) -> Outcome:
    """`outcome` with the planner's facts added and the rules that read them judged (a
    LazyFacts `plan_facts` stays lazy: its pending facts are computed only if read)."""
    facts: Mapping[str, Any] = (
        plan_facts.over(outcome.facts)
        if isinstance(plan_facts, LazyFacts)
        else {**outcome.facts, **plan_facts}
    )
    found = _judged(policies, manifest, facts, planned=True)
    findings = tuple(sorted((*outcome.findings, *found)))
    return Outcome(outcome.decision, outcome.schedule, outcome.redirects, findings, facts)


def judge_change(
    policies: Policies, manifest: Manifest, outcome: Outcome, change_facts: Mapping[str, Any]
) -> Outcome:
    """`outcome` with the change facts (``change.*``, set only when a baseline is compared)
    added and the rejects and advisories that read them judged."""
    facts = {**outcome.facts, **change_facts}
    found = [
        _finding(rule, manifest, facts, rule.severity or KIND_SEVERITY[rule.kind])
        for rule in policies.rules
        if rule.kind in ("reject", "advise") and reads_change(rule) and rule.when.holds(facts)
    ]
    findings = tuple(sorted((*outcome.findings, *found)))
    return Outcome(outcome.decision, outcome.schedule, outcome.redirects, findings, facts)
