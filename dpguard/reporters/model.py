"""The one report value every renderer reads, and the small helpers several renderers share.

The planner's page data (`dpguard.planner.render`) is imported by the renderers that print a
plan; the planner imports nothing from here (a finding and a policy set as data live with
them: `findings.finding_dict`, `policy.model.policy_line`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from dpguard import __version__
from dpguard.check import FileResult
from dpguard.codes import CODES
from dpguard.findings import Finding, Severity
from dpguard.planner.plan import Plan
from dpguard.policy.facts import FACTS
from dpguard.policy.model import KIND_SEVERITY, Policies, Rule, policy_line, provenance
from dpguard.policy.templates import pct

REPORT_VERSION = 1
INFORMATION_URI = "https://dpguard.dev/"

# Codes that are neither policy rules nor loading/schema/cross-field codes (dpguard.codes).
ENGINE_CODES = {
    "P001": "no decision row of the policies matches the manifest",
    "D001": "internal error while checking this file (a bug in dpguard; the other files were "
    "still checked)",
    "D002": "checking this file took longer than the per-file time budget (DPGUARD_FILE_SECONDS)",
}
CODE_FAMILIES = {
    "Y": "YAML loading",
    "S": "manifest schema",
    "X": "manifest cross-field check",
    "P": "policy engine",
    "D": "dpguard itself",
}


@dataclass(frozen=True)
class Report:
    results: tuple[FileResult, ...]
    fail_on: str = "error"
    policies: Policies | None = None
    unreadable: tuple[tuple[str, str], ...] = ()  # (path, why) for paths that are not files

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for r in self.results for f in r.findings)

    def failed(self, result: FileResult) -> bool:
        from dpguard.exitcodes import blocking

        fail_on = result.fail_on or self.fail_on
        return any(blocking(f, fail_on) for f in result.findings)

    def blocking(self, finding: Finding, result: FileResult | None = None) -> bool:
        """`result`: the file the finding belongs to, whose config may set its own fail_on."""
        from dpguard.exitcodes import blocking

        return blocking(finding, (result.fail_on if result else None) or self.fail_on)

    def summary(self) -> dict[str, int]:
        return {
            "files": len(self.results),
            "failed": sum(1 for r in self.results if self.failed(r)),
            "errors": sum(r.count(Severity.ERROR) for r in self.results),
            "warnings": sum(r.count(Severity.WARNING) for r in self.results),
        }

    def rule(self, code: str) -> Rule | None:
        stacks = [self.policies, *(g.policies for g in self.groups())]
        return next((r for p in stacks if p is not None for r in [p.get(code)] if r), None)

    def groups(self) -> tuple[ConfigGroup, ...]:
        """The files each config judged, in the order the files came; one group without a
        config when the results carry none (callers other than review)."""
        out: dict[tuple[str, int], ConfigGroup] = {}
        for r in self.results:
            policies = r.judged_by or self.policies
            if policies is None:
                continue
            key = (r.config, id(policies))
            group = out.get(key) or ConfigGroup(r.config, policies, ())
            out[key] = ConfigGroup(group.config, policies, (*group.paths, r.path))
        return tuple(out.values())


@dataclass(frozen=True)
class ConfigGroup:
    config: str  # the .dpguard.yaml ("" when none)
    policies: Policies
    paths: tuple[str, ...]


@dataclass(frozen=True)
class RuleInfo:
    """What a report says about a code: its title, its help text and its default severity."""

    id: str
    title: str
    help: str
    severity: Severity
    kind: str  # manifest | decision | reject | refuse | advise | engine
    policy: str = ""  # the policy set that defines it, for policy rules


def rule_info(report: Report, code: str) -> RuleInfo:
    rule = report.rule(code)
    if rule is not None:
        severity = rule.severity or KIND_SEVERITY.get(rule.kind, Severity.ERROR)
        return RuleInfo(
            code, rule.title, rule.docs.strip() or rule.title, severity, rule.kind, rule.policy
        )
    family = CODE_FAMILIES.get(code[:1], "dpguard")
    if code in CODES:
        title = CODES[code]
        help_ = f"{code}: {title}. A {family} code; docs/manifest.md explains every Y/S/X code."
        return RuleInfo(code, title, help_, Severity.ERROR, "manifest")
    title = ENGINE_CODES.get(code, f"dpguard finding {code}")
    return RuleInfo(code, title, f"{code}: {title} ({family}).", Severity.ERROR, "engine")


def relative_uri(path: str) -> str:
    """A URI reference for a finding's path: relative (forward slashes, percent-encoded) when the
    file lies under the current directory, a file: URI otherwise."""
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.relative_to(Path.cwd())
        except ValueError:
            return p.as_uri()
    # a name that is not UTF-8 comes as surrogateescape'd str: percent-encode its own bytes
    return quote(p.as_posix().replace(os.sep, "/"), safe="/", errors="surrogateescape")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(report: Report) -> str:
    s = report.summary()
    passed = s["files"] - s["failed"]
    return (
        f"{_plural(s['files'], 'manifest')} checked: {passed} passed, {s['failed']} failed "
        f"({_plural(s['errors'], 'error')}, {_plural(s['warnings'], 'warning')})"
    )


def decision_text(result: FileResult, with_rule: bool = True) -> str | None:
    """The policy decision, the plan, and the proposal beside it (no path)."""
    outcome, plan = result.outcome, result.plan
    if outcome is None or outcome.decision is None:
        return None
    chain = "".join(f" -> {r.recommend} ({r.id})" for r in outcome.redirects)
    rule = f" ({outcome.decision.id})" if with_rule else ""
    line = f"decision: {outcome.decision.recommend}{rule}{chain}"
    if plan is not None:
        if plan.excluded_by is not None:
            line += (
                f" ({plan.excluded_by} does not run {outcome.schedule}: planned among what it runs)"
            )
        line += f"; plan: {plan_summary(plan)}"
    facts, m = outcome.facts, result.manifest
    if m is not None and m.parallelism is not None and facts.get("proposal.schedule"):
        named = m.parallelism.schedule
        line += f"; proposal: P={m.parallelism.pipeline} M={m.microbatches}, " + (
            f"{named}, bubble {pct(facts.get('proposal.bubble'), 2)}"
            if named
            else "schedule left to dpguard"
        )
        if facts.get("proposal.stage_memory_gb") is not None:
            line += (
                f", memory {facts['proposal.stage_memory_gb']:.1f} GiB per GPU (band "
                f"{facts['proposal.memory_low_gb']:.1f}-{facts['proposal.memory_high_gb']:.1f}) "
                f"of {facts['policy.usable_memory_gb']:.1f} usable"
            )
    return line


def decision_finding(result: FileResult) -> Finding | None:
    """The decision as an info-level finding, at the manifest key the deciding rule tests first
    (e.g. model.architecture for DT001), so every format can place it like any finding."""
    if result.released:
        return result.decision
    text = decision_text(result, with_rule=False)
    if text is None or result.outcome is None or result.manifest is None:
        return None
    rule = result.outcome.decision
    assert rule is not None  # decision_text returned text
    spec = FACTS.get(rule.at)
    path, line, col = result.manifest.locate((spec.anchor if spec else "") or rule.at)
    return Finding(path, line, col, rule.id, Severity.INFO, text, kind="decision")


def released(result: FileResult) -> FileResult:
    """`result` with only what the text, GitHub, SARIF and JUnit reports print: its findings,
    its decision line and whether it passed the schema. review drops the rest as each file is
    judged, so a batch's memory stays flat."""
    return replace(
        result,
        manifest=None,
        outcome=None,
        plan=None,
        document=None,
        released=True,
        decision=decision_finding(result),
        valid=result.manifest is not None,
    )


def decision_line(result: FileResult) -> str | None:
    """One grep-able line per manifest: ``path:line:col: info RULE decision: ...``."""
    finding = decision_finding(result)
    return None if finding is None else finding.format()


def plan_summary(plan: Plan) -> str:
    if plan.status == "infeasible":
        return "no feasible pipeline plan (" + "; ".join(plan.notes) + ")"
    if plan.status in ("refused", "no-pipeline"):
        why = {
            "one-gpu": "the model fits one GPU",
            "sharded": f"ZeRO-{plan.manifest.training.zero_stage} shards the model states",
            "parallel": "the model fits without one",
        }.get(plan.unpipelined, "refused")
        sizes = f"tensor {plan.tensor}"
        sizes += f" x context {plan.context}" if plan.context > 1 else ""
        sizes += f" x expert {plan.expert}" if plan.expert > 1 else ""
        return f"no pipeline ({why}): {sizes} x data {plan.data_parallel}"
    chosen, baseline = plan.numbers(plan.schedule), plan.numbers("1f1b")
    text = (
        f"{plan.schedule} P={plan.pipeline} M={plan.microbatches} T={plan.tensor} "
        f"EP={plan.expert}, bubble {pct(chosen.bubble if chosen else None, 2)}"
    )
    if (
        plan.schedule != "1f1b"
        and chosen is not None
        and chosen.gpu_hours is not None
        and baseline is not None
        and baseline.gpu_hours is not None
    ):
        saved = baseline.gpu_hours - chosen.gpu_hours
        text += f" (1F1B {pct(baseline.bubble, 2)}), {saved:,.0f} GPU-hours saved vs 1F1B"
    return text


def policy_lines(report: Report) -> list[str]:
    """Which rules judged: one line per config, naming the config (and, when files in one call
    were judged by different configs, which files each judged)."""
    from dpguard.config import display

    groups = report.groups()
    if not groups:
        return [policy_line(report.policies)] if report.policies is not None else []
    if len(groups) == 1 and not groups[0].config:
        return [policy_line(groups[0].policies)]
    lines = []
    for group in groups:
        which = f": {', '.join(group.paths)}" if len(groups) > 1 else ""
        lines.append(f"{policy_line(group.policies)} [config {display(group.config)}{which}]")
    return lines


def config_lines(report: Report) -> list[str]:
    """The configuration that judged the files, for the hook's --quiet: nothing when no
    .dpguard.yaml judged them, one line per config otherwise (with its files when several)."""
    from dpguard.config import display

    groups = [g for g in report.groups() if g.config]
    many = len(report.groups()) > 1
    return [
        f"config {display(g.config)}" + (f": {', '.join(g.paths)}" if many else "") for g in groups
    ]


def policy_sets(report: Report) -> list[dict[str, str]]:
    return provenance(report.policies)


TOOL = {"name": "dpguard", "version": __version__}
