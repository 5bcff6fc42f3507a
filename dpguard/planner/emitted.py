"""`plan --emit`: the plan in a framework's spelling, read back and judged by that framework's
own launch-time rules before it is printed, so that dpguard never hands a team a config the
framework refuses (FlagScale's DualPipeV for a model with MTP, FW008).

The emitted text is read with the framework's reader, composed over the manifest (less its
parallelism section, which the plan replaces) and judged by the policies; the rules the
framework's profile lists as its validations decide. When they refuse the plan's schedule,
the plan is made again without it, down to 1F1B, and the printed config says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpguard.catalog import load_catalog
from dpguard.findings import Finding, Severity
from dpguard.frameworks import profiles
from dpguard.frameworks.compose import compose
from dpguard.frameworks.emit import emit, schedules
from dpguard.frameworks.read import read
from dpguard.manifest import Manifest, build_manifest
from dpguard.planner.plan import Plan, make_plan
from dpguard.policy.engine import evaluate
from dpguard.policy.facts import manifest_facts
from dpguard.validate import validate
from dpguard.yamlevents import SourceDoc

if TYPE_CHECKING:
    from dpguard.policy.model import Policies

# A name for the emitted text, in the format its reader expects (nothing is written to disk)
_NAMES = {"megatron": "emitted.sh", "torchtitan": "emitted.toml"}


def launch_problems(plan: Plan, fmt: str, text: str, policies: Policies) -> tuple[Finding, ...]:
    """The errors `fmt`'s own launch checks (its profile's validations) find in `text`, the
    plan as emitted; empty when the framework runs it."""
    extract = read(_NAMES.get(fmt, "emitted.yaml"), fmt, text)
    source = plan.manifest.source
    base = SourceDoc(
        source.name,
        {k: v for k, v in source.data.items() if k not in ("parallelism", "source")},
        source.keys,
        source.values,
        source.files,
    )
    doc, found = compose(extract, None, [base])
    found += validate(doc, load_catalog(), composed=True)
    errors = [f for f in found if f.severity is Severity.ERROR]
    if errors:
        return tuple(errors)
    manifest = build_manifest(doc, load_catalog(), extract.format, extract.facts)
    outcome = evaluate(policies, manifest, manifest_facts(manifest))
    checks = set(profiles.profile(fmt).validations)
    return tuple(f for f in outcome.findings if f.code in checks and f.severity is Severity.ERROR)


def emit_checked(
    plan: Plan, manifest: Manifest, fmt: str, policies: Policies, notes: list[str]
) -> tuple[Plan, str]:
    """`plan` of the judged `manifest` among the schedules `fmt` runs that its launch checks
    accept, and its text; `notes` gains a line for each schedule left out on the way."""
    runs = list(schedules(fmt))
    if plan.schedule not in (None, "none", *runs):
        notes.append(
            f"dpguard recommends {plan.schedule}, which {fmt} does not run; this plan is the "
            f"best among {', '.join(runs)}"
        )
        # the manifest as judged: the plan's own may carry the recompute it switched
        plan = make_plan(manifest, plan.outcome, policies, tuple(runs))
    while True:
        text = emit(plan, fmt, notes)
        if plan.strategy is None:
            return plan, text
        problems = launch_problems(plan, fmt, text, policies)
        checks = profiles.profile(fmt).validations
        refused = bool(problems) and all(p.code in checks for p in problems)
        if not refused or plan.schedule not in runs or len(runs) == 1:
            notes.extend(f"{fmt} refuses this at launch: {p.code} {p.message}" for p in problems)
            return plan, emit(plan, fmt, notes) if problems else text
        runs.remove(plan.schedule)
        first = problems[0]
        notes.append(
            f"{fmt} refuses {plan.schedule} for this run ({first.code}: {first.message}); "
            f"planned among {', '.join(runs)}"
        )
        plan = make_plan(manifest, plan.outcome, policies, tuple(runs))
