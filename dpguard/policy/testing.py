"""Policy test cases written in YAML (`kind: PolicyTest`), run without Python.

Each case names a manifest (a name from the file's top-level ``manifests:`` mapping, else a path
relative to the test file; or an inline mapping), an optional
`patch` deep-merged over it, and what to expect: the recommended `schedule`, the `decision` row,
rule ids that must fire and ids that must stay silent, or `valid: false` with validation `codes`;
and of the fired rules' findings their `message`, `severity` and `waived` state, and of the
planner's recommendation its `plan` (`dpguard.policy.expect`). The config's waivers apply as in
`review`, matched against the manifest's path (the test file's, for a named or inline one).

A rule *fires* when it produces a finding; a decision row fires when it is the row that matched.
A refusal that holds but redirects nothing produces no finding, so it does not fire: that is what
makes precedence testable (``not_fired: [RF002]`` when RF003 already refused everything).

The core never prints: `run_files` returns values that `dpguard.commands.test` formats.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path as FsPath
from typing import Any, NamedTuple

from dpguard import resources
from dpguard.catalog import Catalog, load_catalog
from dpguard.errors import ConfigError
from dpguard.findings import Finding, Severity
from dpguard.manifest import build_manifest
from dpguard.policy import expect as expectations
from dpguard.policy.model import Policies
from dpguard.policy.waivers import Waivers
from dpguard.validate import validate
from dpguard.yamlsource import Path, Position, SourceDoc, YamlLoadError, load_file

SCHEMA_FILE = "policytest.schema.json"


@dataclass(frozen=True)
class CaseResult:
    file: str
    line: int
    col: int
    name: str
    failures: tuple[str, ...]  # "expected X, got Y", one per unmet expectation
    fired: frozenset[str] = frozenset()
    evaluated: bool = False  # the manifest was valid and the policies judged it

    @property
    def passed(self) -> bool:
        return not self.failures

    def report_line(self) -> str | None:
        """One line per failing case, every unmet expectation in it (None when it passed)."""
        if self.passed:
            return None
        return f"{self.file}:{self.line}:{self.col}: case {self.name}: " + "; ".join(self.failures)


@dataclass(frozen=True)
class RunResult:
    cases: tuple[CaseResult, ...]
    uncovered: tuple[str, ...] = field(default=())  # "RULE: never fires" / "never stays silent"

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases if c.passed)

    @property
    def failed(self) -> int:
        return len(self.cases) - self.passed


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(resources.schema(SCHEMA_FILE))


def shipped_tests() -> list[str]:
    root = resources.packaged("dpguard.policies", "tests")
    return sorted(str(root / e.name) for e in root.iterdir() if e.name.endswith(".yaml"))


def merge(base: Any, patch: Any) -> Any:
    """Deep merge: mappings merge key by key, a None value deletes the key, anything else
    replaces. Neither argument is modified."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def source_from_data(data: dict[str, Any], name: str, at: Position) -> SourceDoc:
    """A SourceDoc for data built in memory: every key and value sits at `at` (the case)."""
    positions: dict[Path, Position] = {}

    def walk(node: Any, path: Path) -> None:
        items: Iterable[tuple[Any, Any]] = ()
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        for key, value in items:
            child = (*path, key)
            positions[child] = at
            walk(value, child)

    walk(data, ())
    return SourceDoc(name, data, positions, dict(positions))


def load_cases(path: str) -> SourceDoc:
    """Load and schema-check one test file; ConfigError (exit 2) lists every problem."""
    from dpguard.validate import schema_problems

    try:
        doc = load_file(path)
    except YamlLoadError as exc:
        raise ConfigError(exc.message, f"{path}:{exc.position.line}:{exc.position.col}") from None
    problems = [
        f"{doc.location(p)}: {message}" for p, _code, message in schema_problems(_validator(), doc)
    ]
    if problems:
        raise ConfigError("broken policy test file:\n  " + "\n  ".join(problems))
    return doc


class _Loaded(NamedTuple):
    data: dict[str, Any]
    source_format: str = "dpguard"
    framework: Mapping[str, Any] = {}
    findings: tuple[Finding, ...] = ()  # of reading a framework config (F001-F005)
    path: str = ""  # the manifest file a path case names, which waivers match ("": none)


def _manifest_data(doc: SourceDoc, index: int, case: Mapping[str, Any]) -> _Loaded:
    """The case's manifest with its patch applied. A path may name a framework config (or a
    manifest with source:), read as review reads it, so framework rules are testable too."""
    from dpguard.check import load_any
    from dpguard.frameworks.read import FrameworkError

    source = case["manifest"]
    named = doc.data.get("manifests", {})
    loaded = _Loaded(source if isinstance(source, dict) else {})
    if isinstance(source, str) and source in named:
        loaded = _Loaded(named[source])
    elif isinstance(source, str):
        target = FsPath(doc.name).parent / source
        try:
            mdoc, fmt, found, facts = load_any(str(target))
            loaded = _Loaded(mdoc.data, fmt, facts, tuple(found), os.path.normpath(target))
        except (YamlLoadError, FrameworkError) as exc:
            raise ConfigError(
                f"manifest {source} cannot be loaded: {exc.message}",
                doc.location(("cases", index, "manifest")),
            ) from None
        except Exception as exc:  # InputError: missing file
            raise ConfigError(str(exc), doc.location(("cases", index, "manifest"))) from None
    return loaded._replace(data=merge(loaded.data, case.get("patch", {})))


def _ids(ids: Iterable[str]) -> str:
    listed = sorted(ids)
    return "[" + ", ".join(listed) + "]"


def run_case(
    doc: SourceDoc,
    index: int,
    policies: Policies,
    catalog: Catalog,
    waivers: Waivers | None = None,
) -> CaseResult:
    case = doc.data["cases"][index]
    line, col = doc.position(("cases", index, "name"))
    expect = case["expect"]
    loaded = _manifest_data(doc, index, case)
    mdoc = source_from_data(loaded.data, doc.name, Position(line, col))
    composed = loaded.source_format != "dpguard"
    findings = [
        f
        for f in (*loaded.findings, *validate(mdoc, catalog, composed))
        if f.severity is Severity.ERROR and f.code != "F003"  # the patch may add what was missing
    ]
    if composed:
        from dpguard.frameworks import compose

        findings += [
            Finding(doc.name, line, col, "F003", Severity.ERROR, f"{key} is missing")
            for key in compose.missing(loaded.data)
        ]
    failures: list[str] = []
    codes = {f.code for f in findings}
    result = CaseResult(doc.name, line, col, case["name"], ())
    if findings:
        if expect.get("valid", True):
            shown = "; ".join(f"{f.code} {f.message}" for f in findings)
            failures.append(f"expected a valid manifest, got {shown}")
        else:
            missing = set(expect.get("codes", ())) - codes
            if missing:
                failures.append(f"expected codes {_ids(missing)}, got {_ids(codes)}")
        return CaseResult(doc.name, line, col, case["name"], tuple(failures))
    if expect.get("valid", True) is False:
        failures.append("expected an invalid manifest, got a valid one")
        return CaseResult(doc.name, line, col, case["name"], tuple(failures))
    manifest = build_manifest(mdoc, catalog, loaded.source_format, loaded.framework)
    from dpguard.check import judge  # imports the planner, which imports this package

    outcome, plan = judge(manifest, policies)
    if "baseline" in case:
        before = _baseline(doc, index, case, policies, catalog)
        if isinstance(before, str):
            failures.append(before)
            return CaseResult(doc.name, line, col, case["name"], tuple(failures))
        outcome = _judge_change(before, manifest, outcome, plan, policies)
    judged = tuple(replace(f, path=loaded.path or f.path) for f in outcome.findings)
    if waivers is not None:
        judged, _used = waivers.apply(judged)
    fired = {f.code for f in judged}
    if outcome.decision is not None:
        fired.add(outcome.decision.id)
    if "schedule" in expect and expect["schedule"] != outcome.schedule:
        failures.append(f"expected schedule {expect['schedule']}, got {outcome.schedule}")
    got_decision = outcome.decision.id if outcome.decision else None
    if "decision" in expect and expect["decision"] != got_decision:
        failures.append(f"expected decision {expect['decision']}, got {got_decision}")
    missing = set(expect.get("fired", ())) - fired
    if missing:
        failures.append(f"expected fired {_ids(missing)}, got fired {_ids(fired)}")
    unexpected = set(expect.get("not_fired", ())) & fired
    if unexpected:
        failures.append(f"expected not fired {_ids(unexpected)}, got fired {_ids(fired)}")
    failures += expectations.finding_failures(expect, judged, policies)
    failures += expectations.plan_failures(expect, plan)
    return CaseResult(
        result.file, line, col, result.name, tuple(failures), frozenset(fired), evaluated=True
    )


def _baseline(
    doc: SourceDoc, index: int, case: Mapping[str, Any], policies: Policies, catalog: Catalog
) -> Any:
    """The case's baseline judged as review --baseline judges the version at the base
    revision (a change.model.Side), or a failure message when it is not a valid manifest."""
    from dpguard.change.model import summarise
    from dpguard.check import FileResult, judge

    pseudo = {"manifest": case["baseline"], "patch": case.get("baseline_patch", {})}
    loaded = _manifest_data(doc, index, pseudo)
    at = Position(*doc.position(("cases", index, "baseline")))
    bdoc = source_from_data(loaded.data, doc.name, at)
    errors = [
        f
        for f in (*loaded.findings, *validate(bdoc, catalog, loaded.source_format != "dpguard"))
        if f.severity is Severity.ERROR
    ]
    if errors:
        return "the baseline is not a valid manifest: " + "; ".join(
            f"{f.code} {f.message}" for f in errors
        )
    manifest = build_manifest(bdoc, catalog, loaded.source_format, loaded.framework)
    outcome, plan = judge(manifest, policies)
    result = FileResult(doc.name, outcome.findings, manifest, outcome, plan)
    return summarise(result, policies, "error")


def _judge_change(before: Any, manifest: Any, outcome: Any, plan: Any, policies: Policies) -> Any:
    """The outcome with the change facts of a modified file and the rules that read them."""
    from dpguard.change.model import change_facts, summarise
    from dpguard.check import FileResult
    from dpguard.policy.engine import judge_change

    after = summarise(FileResult("", outcome.findings, manifest, outcome, plan), policies, "error")
    return judge_change(policies, manifest, outcome, change_facts("modified", before, after))


def _check(doc: SourceDoc, policies: Policies) -> None:
    """Names that nothing loaded has are a broken test, never a silent pass (exit 2)."""
    problems = expectations.problems(doc, policies)
    if problems:
        raise ConfigError("broken policy test file:\n  " + "\n  ".join(problems))


def coverage_gaps(
    policies: Policies, cases: Sequence[CaseResult], sets: frozenset[str] | None = None
) -> tuple[str, ...]:
    """Each loaded rule (of the sets named in `sets`, when given: the set that defined or last
    overrode it) without a case in which it fires, or without one in which it stays silent."""
    judged = [c for c in cases if c.evaluated]
    gaps = []
    for rule in policies.rules:
        if sets is not None and rule.policy not in sets:
            continue
        if not any(rule.id in c.fired for c in judged):
            gaps.append(f"{rule.id}: no case in which it fires")
        if not any(rule.id not in c.fired for c in judged):
            gaps.append(f"{rule.id}: no case in which it stays silent")
    return tuple(gaps)


def run_files(
    paths: Sequence[str],
    policies: Policies,
    waivers: Waivers | None = None,
    coverage_of: frozenset[str] | None = None,
) -> RunResult:
    """Every case of every file; each file is checked whole (exit 2) before its cases run."""
    catalog = load_catalog()
    results: list[CaseResult] = []
    for path in paths:
        doc = load_cases(path)
        _check(doc, policies)
        results += [
            run_case(doc, i, policies, catalog, waivers) for i in range(len(doc.data["cases"]))
        ]
    return RunResult(tuple(results), coverage_gaps(policies, results, coverage_of))
