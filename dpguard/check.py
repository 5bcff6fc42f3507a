"""Check manifest files: load, validate, normalise. One result per file, never an exception
for a problem inside a file, so one broken manifest never stops the others."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpguard.catalog import Catalog, load_catalog
from dpguard.findings import Finding, Severity
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

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity and not f.waived)


def check_file(
    path: str,
    catalog: Catalog | None = None,
    policies: Policies | None = None,
    defaults: Sequence[SourceDoc] = (),
) -> FileResult:
    """Raises InputError (missing file, directory); everything else is a finding. Policies
    judge only manifests that passed the schema and cross-field checks. `defaults` fill what
    a framework config cannot say (.dpguard.yaml ``defaults:`` matching this file)."""
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
    if any(f.severity is Severity.ERROR for f in findings):
        return FileResult(path, tuple(sorted(set(findings))), None, source_format=fmt)
    manifest = build_manifest(doc, catalog, fmt, facts)
    warnings = tuple(findings) + tuple(
        Finding(*manifest.locate(where), code, Severity.WARNING, message)
        for code, where, message in manifest_warnings(manifest)
    )
    if policies is None:
        return FileResult(path, tuple(sorted(warnings)), manifest, source_format=fmt)
    outcome, plan = judge(manifest, policies)
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
    base = os.path.dirname(doc.name)
    return os.path.join(base, source["path"]), source.get("format")


def judge(manifest: Manifest, policies: Policies) -> tuple[Outcome, Plan]:
    """The policies' verdict and the plan: the rules, the planner, then the rules that read
    what the planner found (ADV005: no feasible plan)."""
    from dpguard.planner.plan import make_plan
    from dpguard.policy.engine import evaluate, judge_planned
    from dpguard.policy.facts import manifest_facts

    outcome = evaluate(policies, manifest, manifest_facts(manifest))
    plan = make_plan(manifest, outcome, policies)
    return judge_planned(policies, manifest, outcome, planned_facts(plan, outcome, policies)), plan


def planned_facts(plan: Plan, outcome: Outcome, policies: Policies) -> dict[str, Any]:
    """What the planner found, as facts (policy.facts.PLANNED): feasibility and its reason, the
    schedule it recommends, the plan's bubble and GPU-hours and what it saves over the proposal
    (both priced by the step-time model), so ADV003 compares a proposal with what dpguard would
    actually run."""

    feasible = plan.status != "infeasible"
    recommended = plan.schedule if feasible else None
    facts: dict[str, Any] = {
        "plan.feasible": feasible,
        "plan.infeasible_reason": None if feasible else "; ".join(plan.notes),
        "plan.recommended_schedule": recommended,
        "plan.proposal_recommended": None,
        "plan.recommended_bubble": None,
        "plan.recommended_gpu_hours": None,
        "plan.recommended_saving_gpu_hours": None,
    }
    p = plan.manifest.parallelism
    proposed = p.schedule if p is not None else None
    if p is None or proposed is None or recommended is None:
        return facts
    decision = outcome.decision
    facts["plan.proposal_recommended"] = proposed == recommended or bool(
        decision and proposed in decision.acceptable
    )
    # the proposal against dpguard's plan, both priced by the step-time model at the same
    # cluster and budget (the plan is the best layout of the recommended schedule; never a
    # strawman at the proposal's own P and M)
    ours, theirs = plan.performance, plan.proposal_performance
    if ours is not None and theirs is not None and p.pipeline > 1:
        facts["plan.recommended_bubble"] = ours.bubble
        facts["plan.recommended_gpu_hours"] = ours.gpu_hours
        facts["plan.recommended_saving_gpu_hours"] = theirs.gpu_hours - ours.gpu_hours
    return facts
