"""One report value, several renderers (a registry keyed by format name).

Renderers return text and never print; JSON is written with sorted keys so the same input always
gives byte-identical output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dpguard import __version__
from dpguard.check import FileResult
from dpguard.findings import Finding, Severity
from dpguard.planner.plan import Plan
from dpguard.policy.model import Policies

REPORT_VERSION = 1


@dataclass(frozen=True)
class Report:
    results: tuple[FileResult, ...]
    fail_on: str = "error"
    policies: Policies | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for r in self.results for f in r.findings)

    def failed(self, result: FileResult) -> bool:
        from dpguard.exitcodes import blocking

        return any(blocking(f, self.fail_on) for f in result.findings)

    def summary(self) -> dict[str, int]:
        return {
            "files": len(self.results),
            "failed": sum(1 for r in self.results if self.failed(r)),
            "errors": sum(r.count(Severity.ERROR) for r in self.results),
            "warnings": sum(r.count(Severity.WARNING) for r in self.results),
        }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.2f}%"


def decision_line(result: FileResult) -> str | None:
    """One line per manifest: the policy decision, the plan, and the proposal beside it."""
    outcome, plan = result.outcome, result.plan
    if outcome is None or outcome.decision is None:
        return None
    chain = "".join(f" -> {r.recommend} ({r.id})" for r in outcome.redirects)
    line = f"{result.path}: decision: {outcome.decision.recommend} ({outcome.decision.id}){chain}"
    if plan is not None:
        line += f"; plan: {plan_summary(plan)}"
    facts = outcome.facts
    if result.manifest and result.manifest.parallelism and facts.get("proposal.schedule"):
        line += (
            f"; proposal: {facts['proposal.schedule']} P={result.manifest.parallelism.pipeline} "
            f"M={result.manifest.microbatches}, bubble {_pct(facts.get('proposal.bubble'))}"
        )
    return line


def plan_summary(plan: Plan) -> str:
    if plan.status == "infeasible":
        return "no feasible pipeline plan (" + "; ".join(plan.notes) + ")"
    if plan.status in ("refused", "no-pipeline"):
        return f"no pipeline ({plan.status}), tensor {plan.tensor} x data {plan.data_parallel}"
    chosen, baseline = plan.numbers(plan.schedule), plan.numbers("1f1b")
    text = (
        f"{plan.schedule} P={plan.pipeline} M={plan.microbatches} T={plan.tensor} "
        f"EP={plan.expert}, bubble {_pct(chosen.bubble if chosen else None)}"
    )
    if (
        plan.schedule != "1f1b"
        and chosen is not None
        and chosen.gpu_hours is not None
        and baseline is not None
        and baseline.gpu_hours is not None
    ):
        saved = baseline.gpu_hours - chosen.gpu_hours
        text += f" (1F1B {_pct(baseline.bubble)}), {saved:,.0f} GPU-hours saved vs 1F1B"
    return text


def policy_line(policies: Policies) -> str:
    return "policies: " + ", ".join(f"{s.name} {s.version} ({s.digest})" for s in policies.sets)


def render_text(report: Report) -> str:
    lines = [f.format() for f in report.findings]
    lines += [line for line in map(decision_line, report.results) if line]
    if report.policies is not None:
        lines.append(policy_line(report.policies))
    s = report.summary()
    passed = s["files"] - s["failed"]
    lines.append(
        f"{_plural(s['files'], 'manifest')} checked: {passed} passed, {s['failed']} failed "
        f"({_plural(s['errors'], 'error')}, {_plural(s['warnings'], 'warning')})"
    )
    return "\n".join(lines) + "\n"


def finding_dict(finding: Finding) -> dict[str, Any]:
    return {
        "code": finding.code,
        "kind": finding.kind,
        "severity": finding.severity.value,
        "message": finding.message,
        "line": finding.line,
        "column": finding.col,
        "waived": finding.waived,
    }


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
    from dpguard.planner.render import plan_dict

    return plan_dict(plan, policies)


def report_dict(report: Report) -> dict[str, Any]:
    sets = report.policies.sets if report.policies else ()
    return {
        "version": REPORT_VERSION,
        "tool": {"name": "dpguard", "version": __version__},
        "policies": [{"name": s.name, "version": s.version, "digest": s.digest} for s in sets],
        "files": [
            {
                "path": r.path,
                "valid": not report.failed(r),
                "findings": [finding_dict(f) for f in r.findings],
                "manifest": r.manifest.to_dict() if r.manifest else None,
                "decision": decision_dict(r),
                "plan": plan_data(r.plan, report.policies),
            }
            for r in report.results
        ],
        "summary": report.summary(),
    }


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, sort_keys=True) + "\n"


RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": render_text,
    "json": render_json,
}


def render(report: Report, fmt: str) -> str:
    return RENDERERS[fmt](report)


def formats() -> Sequence[str]:
    return tuple(RENDERERS)
