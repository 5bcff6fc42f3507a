"""Check manifest files: load, validate, normalise. One result per file, never an exception
for a problem inside a file, so one broken manifest never stops the others."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dpguard.catalog import Catalog, load_catalog
from dpguard.findings import Finding, Severity
from dpguard.frameworks import profiles
from dpguard.frameworks.detect import SHELL_SUFFIXES, sniff, yaml_format
from dpguard.frameworks.model import Extract, FrameworkError, Origin
from dpguard.manifest import Manifest, build_manifest
from dpguard.sizing import manifest_warnings
from dpguard.validate import validate
from dpguard.yamlevents import Position
from dpguard.yamlsource import SourceDoc, YamlLoadError, load_text, read_text

if TYPE_CHECKING:  # judging imports the engine and the planner: only when policies are given
    from dpguard.planner.plan import Plan
    from dpguard.policy.engine import Outcome
    from dpguard.policy.model import Policies


@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...]
    manifest: Manifest | None  # None when the file could not be loaded or validated
    outcome: Outcome | None = None  # policy evaluation, when policies were given
    plan: Plan | None = None  # the recommended strategy, when policies were given
    source_format: str = "dpguard"  # or the framework whose config was read (frameworks.read)
    # Set by review, which judges each file by the nearest .dpguard.yaml (dpguard.config):
    config: str = ""  # the config file that judged it ("" when none)
    judged_by: Policies | None = None  # that config's layered stack
    fail_on: str | None = None  # that config's fail_on (or --fail-on); None: the report's
    # Set by reporters.model.released, for the reports that print only findings and the
    # decision line: the manifest, verdict and plan are dropped as each file is judged (flat
    # memory over a batch), what those reports read of them kept here.
    released: bool = False
    decision: Finding | None = None  # the decision line, as an info finding
    valid: bool = False  # the file passed the schema and cross-field checks
    part: str | None = None  # its section of a JSON or Markdown report (reporters.PARTS)
    # What was read when it could not become a manifest (the document as written, or a
    # framework config's values composed with its source manifest and defaults), so a report
    # still shows it beside the errors.
    document: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def passed_schema(self) -> bool:
        return self.valid if self.released else self.manifest is not None

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity and not f.waived)


def check_file(
    path: str,
    catalog: Catalog | None = None,
    policies: Policies | None = None,
    defaults: Sequence[SourceDoc] = (),
    plan_shown: bool = True,
    plan_page: bool = False,
) -> FileResult:
    """Raises InputError (missing file, directory); everything else is a finding. Policies
    judge only manifests that passed the schema and cross-field checks. `defaults` fill what
    a framework config cannot say (.dpguard.yaml ``defaults:`` matching this file). Without
    `plan_shown` the result carries no plan (`judge_unplanned`); with `plan_page` its plan
    carries everything the plan page shows (`planner.plan.with_page`). The team's framework
    profiles among `policies`' files join the shipped ones for this file."""
    with profiles.using(policies.profiles if policies is not None else ()):
        return _checked(path, catalog, policies, defaults, plan_shown, plan_page)


def _checked(
    path: str,
    catalog: Catalog | None,
    policies: Policies | None,
    defaults: Sequence[SourceDoc],
    plan_shown: bool,
    plan_page: bool,
) -> FileResult:
    catalog = catalog or load_catalog()
    try:
        doc, fmt, found, facts = load_any(path, defaults)
    except YamlLoadError as exc:
        line, col = exc.position
        return FileResult(
            path, (Finding(path, line, col, exc.code, Severity.ERROR, exc.message),), None
        )
    except FrameworkError as exc:
        where = exc.origin
        return FileResult(
            path,
            (Finding(where.file, *where.position, exc.code, Severity.ERROR, exc.message),),
            None,
            source_format=exc.format or "dpguard",
        )
    findings = found + validate(doc, catalog, composed=fmt != "dpguard")
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        if policies is not None:  # every problem at once: the rules the errors leave judgeable
            from dpguard.policy.partial import standing_findings

            findings += standing_findings(policies, doc, facts, fmt, errors)
        return FileResult(
            path, tuple(sorted(set(findings))), None, source_format=fmt, document=doc.data
        )
    manifest = build_manifest(doc, catalog, fmt, facts)
    warnings = tuple(findings) + tuple(
        Finding(*manifest.locate(where), code, Severity.WARNING, message)
        for code, where, message in manifest_warnings(manifest)
    )
    if policies is None:
        return FileResult(path, tuple(sorted(warnings)), manifest, source_format=fmt)
    if policies.silenced:
        warnings = tuple(f for f in warnings if f.code not in policies.silenced)
    if plan_shown:
        outcome, plan = judge(manifest, policies, plan_page)
    else:
        outcome, plan = judge_unplanned(manifest, policies), None
    return FileResult(
        path, tuple(sorted(warnings + outcome.findings)), manifest, outcome, plan, fmt
    )


def load_any(
    path: str, defaults: Sequence[SourceDoc] = ()
) -> tuple[SourceDoc, str, list[Finding], Mapping[str, Any]]:
    """(document, source format, findings of reading it, framework facts). A dpguard manifest
    loads as itself unless it has `source:`; a framework config is read and composed."""
    text = read_text(path)
    fmt = sniff(path, text)
    if fmt is not None:
        return _compose(lambda readers: readers.read(path, fmt), None, defaults)
    if path.endswith(SHELL_SUFFIXES) or text.startswith("#!"):
        raise FrameworkError(
            "F005",
            "a shell script without a Megatron-LM training command (no pretrain_*.py and no "
            "--num-layers or parallel-size flag): not a config dpguard reads",
            Origin(path, Position(1, 1)),
            "megatron",
        )
    doc = load_text(text, path)
    if "apiVersion" in doc.data or "kind" in doc.data:
        source = doc.data.get("source")
        if not isinstance(source, dict) or not isinstance(source.get("path"), str):
            return doc, "dpguard", [], {}
        target, named = _source(doc, source)
        return _compose(lambda readers: readers.read_source(target, named, doc), doc, defaults)
    found = yaml_format(doc.data)
    if found is None:
        return doc, "dpguard", [], {}
    return _compose(lambda readers: readers.read_doc(doc, found), None, defaults)


def _compose(
    read: Callable[[Any], Extract], manifest: SourceDoc | None, defaults: Sequence[SourceDoc]
) -> tuple[SourceDoc, str, list[Finding], Mapping[str, Any]]:
    """Read with the framework readers, imported only here (a plain manifest never loads
    them), and compose with the pointing manifest and the defaults."""
    from dpguard.frameworks import read as readers
    from dpguard.frameworks.compose import compose

    extract = read(readers)
    composed, findings = compose(extract, manifest, defaults)
    return composed, extract.format, findings, extract.facts


def _source(doc: SourceDoc, source: Mapping[str, Any]) -> tuple[str, str | None]:
    """The framework file a manifest's `source:` names, relative to the manifest."""
    joined = os.path.join(os.path.dirname(doc.name), source["path"])
    # named without `..` (`configs/pretrain.sh`, not `jobs/../configs/pretrain.sh`: reports and
    # annotations then match the file a diff shows), unless a link makes them different files
    tidy = os.path.normpath(joined)
    same = "\0" not in joined and os.path.realpath(tidy) == os.path.realpath(joined)
    return (tidy if same else joined), source.get("format")


def judge(manifest: Manifest, policies: Policies, page: bool = False) -> tuple[Outcome, Plan]:
    """The policies' verdict and the plan: the rules, the planner, then the rules that read
    what the planner found (ADV005: no feasible plan). The plan carries what a review's
    decision line prints, or with `page` everything the plan page and its data show."""
    from dpguard.planner.plan import make_plan, with_decision, with_page
    from dpguard.policy.engine import evaluate, judge_planned
    from dpguard.policy.facts import manifest_facts

    outcome = evaluate(policies, manifest, manifest_facts(manifest))
    plan = make_plan(manifest, outcome, policies)
    plan = with_page(plan) if page else with_decision(plan)
    return judge_planned(policies, manifest, outcome, planned_facts(plan, outcome)), plan


def judge_unplanned(manifest: Manifest, policies: Policies) -> Outcome:
    """`judge`'s verdict for an output that prints no plan (the hook's --quiet, SARIF, JUnit):
    feasibility and the schedule come from the first layout that fits, and the planner's full
    search runs only if a rule reads the plan's numbers (ADV003's GPU-hours). Where the
    proposal's schedule is one the policy accepts, or there is none, the schedule decides
    nothing the shipped rules judge: one pass of the search that shows a fit settles it."""
    from dpguard.planner.plan import feasibility_shown, make_plan, recommended_schedule
    from dpguard.policy.engine import LazyFacts, evaluate, judge_planned
    from dpguard.policy.facts import manifest_facts

    outcome = evaluate(policies, manifest, manifest_facts(manifest), shown=False)

    def plan_facts() -> dict[str, Any]:
        return planned_facts(make_plan(manifest, outcome, policies), outcome)

    proposed = _proposed(manifest)
    if (proposed is None or _accepted(proposed, outcome)) and feasibility_shown(
        manifest, outcome, policies
    ):
        # Whatever schedule the plan names, the proposal is one the policy accepts (or there is
        # none): only feasibility decides the shipped rules, and a probe showed it. The
        # schedule is computed with the plan's numbers, if a rule reads it.
        facts = _outline_facts(manifest, outcome, "", None)  # "": some schedule, pending
        pending = _NUMBERS | {"plan.recommended_schedule"}
        return judge_planned(policies, manifest, outcome, LazyFacts(facts, pending, plan_facts))
    recommended = recommended_schedule(manifest, outcome, policies)
    if recommended is None:  # the reason needs the plan's notes; the search is remembered
        return judge_planned(policies, manifest, outcome, plan_facts())
    lazy = LazyFacts(_outline_facts(manifest, outcome, recommended, None), _NUMBERS, plan_facts)
    return judge_planned(policies, manifest, outcome, lazy)


# the planned facts that need the plan's and the proposal's predictions
_NUMBERS = frozenset(
    (
        "plan.recommended_bubble",
        "plan.recommended_gpu_hours",
        "plan.recommended_saving_gpu_hours",
    )
)


def _outline_facts(
    manifest: Manifest, outcome: Outcome, recommended: str | None, reason: str | None
) -> dict[str, Any]:
    """The planned facts that feasibility and the recommended schedule decide (None: nothing is
    feasible, for `reason`); the numbers unset."""
    facts: dict[str, Any] = {
        "plan.feasible": recommended is not None,
        "plan.infeasible_reason": reason,
        "plan.recommended_schedule": recommended,
        "plan.proposal_recommended": None,
        **dict.fromkeys(_NUMBERS),
    }
    proposed = _proposed(manifest)
    if proposed is not None and recommended is not None:
        facts["plan.proposal_recommended"] = proposed == recommended or _accepted(proposed, outcome)
    return facts


def _proposed(manifest: Manifest) -> str | None:
    p = manifest.parallelism
    return p.schedule if p is not None else None


def _accepted(proposed: str, outcome: Outcome) -> bool:
    """The decision lists the proposed schedule as acceptable: recommended whatever the plan
    names."""
    return outcome.decision is not None and proposed in outcome.decision.acceptable


def planned_facts(plan: Plan, outcome: Outcome) -> dict[str, Any]:
    """What the planner found, as facts (policy.facts.PLANNED): feasibility and its reason, the
    schedule it recommends, the plan's bubble and GPU-hours and what it saves over the proposal
    (both priced by the step-time model), so ADV003 compares a proposal with what dpguard would
    actually run."""
    feasible = plan.status != "infeasible"
    facts = _outline_facts(
        plan.manifest,
        outcome,
        plan.schedule if feasible else None,
        None if feasible else "; ".join(plan.notes),
    )
    p = plan.manifest.parallelism
    # the proposal against dpguard's plan, both priced by the step-time model at the same
    # cluster and budget (the plan is the best layout of the recommended schedule; never a
    # strawman at the proposal's own P and M)
    ours, theirs = plan.performance, plan.proposal_performance
    if facts["plan.proposal_recommended"] is not None and ours and theirs and p and p.pipeline > 1:
        facts["plan.recommended_bubble"] = ours.bubble
        facts["plan.recommended_gpu_hours"] = ours.gpu_hours
        facts["plan.recommended_saving_gpu_hours"] = theirs.gpu_hours - ours.gpu_hours
    return facts
