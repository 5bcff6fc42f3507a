"""What review reports, file by file, on the tests' corpus and 600 realistic manifests: the
guard of every change that makes review cheaper (issue 28: "the findings must not change", and
a cut in the search that changes a plan is a bug).

The golden (tests/golden/review-equivalence.json) holds, per file, its findings, its decision
line (the plan's schedule, P, M, T, EP, bubble and GPU-hours saved) and the plan's notes (why
the search chose what it chose), written by the code before the review-cost work. A change
that is meant to move a number rewrites it with DPGUARD_UPDATE_GOLDEN=1, and the diff shows
every file it moved."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from dpguard.catalog import Catalog, load_catalog
from dpguard.check import check_file
from dpguard.policy.load import load_policies
from dpguard.policy.model import Policies
from dpguard.reporters.model import decision_line

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "review-equivalence.json"
FRAMEWORK_CONFIGS = ROOT / "tests" / "data" / "frameworks"
COUNT = 600  # the published-run manifests and examples (about 200), then variants of them


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from corpus import write_realistic
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    written = write_realistic(tmp_path_factory.mktemp("realistic"), COUNT)
    configs = sorted(
        p
        for p in FRAMEWORK_CONFIGS.rglob("*")
        if p.is_file()
        and p.suffix in (".sh", ".toml", ".json", ".yaml")
        and p.name != "expected.yaml"
    )
    return [*written, *configs, ROOT / "tests" / "data" / "impossible.yaml"]


def _name(path: Path) -> str:
    return path.name if not path.is_relative_to(ROOT) else str(path.relative_to(ROOT))


def _lines(path: Path, catalog: Catalog, policies: Policies) -> list[str]:
    result = check_file(str(path), catalog, policies)
    base = str(path.parent) + os.sep
    lines = [f.format() for f in result.findings]
    decision = decision_line(result)
    if decision:
        lines.append(decision)
    if result.plan is not None:  # what the plan page says of the search: its notes
        lines += [f"note: {note}" for note in result.plan.notes]
    return [line.replace(base, "") for line in lines]


def test_review_reports_what_it_reported_before(corpus: list[Path]) -> None:
    catalog, policies = load_catalog(), load_policies()
    seen = {_name(p): _lines(p, catalog, policies) for p in corpus}
    if os.environ.get("DPGUARD_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(seen, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    moved = sorted(
        name for name in expected.keys() | seen.keys() if expected.get(name) != seen.get(name)
    )
    assert not moved, f"{len(moved)} files report differently, first {moved[:5]}: " + "\n".join(
        f"{name}\n  was: {expected.get(name)}\n  now: {seen.get(name)}" for name in moved[:3]
    )


def test_a_review_that_shows_no_plan_reports_the_same_findings(corpus: list[Path]) -> None:
    """The hook's --quiet, SARIF and JUnit print no plan: review then takes feasibility and the
    schedule from the first layout that fits and runs the full search only when a rule reads
    the plan's numbers (ADV003). The findings are the same, file by file."""
    from dpguard import memo

    memo.forget()  # the full searches of the other tests must not stand in for these
    catalog, policies = load_catalog(), load_policies()
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    moved = []
    for path in corpus:
        result = check_file(str(path), catalog, policies, plan_shown=False)
        assert result.plan is None
        base = str(path.parent) + os.sep
        found = [f.format().replace(base, "") for f in result.findings]
        shown = [line for line in expected[_name(path)] if " decision: " not in line]
        if found != [line for line in shown if not line.startswith("note: ")]:
            moved.append(_name(path))
    assert not moved, f"{len(moved)} files report differently without a plan: {moved[:5]}"


def test_the_first_layout_that_fits_names_the_plans_schedule(corpus: list[Path]) -> None:
    """... and the one-pass probe (planner.plan.feasibility_shown) shows a fit only where the
    plan has one, and shows most of them (else it is cost without use)."""
    from dpguard.planner.plan import feasibility_shown, make_plan, recommended_schedule
    from dpguard.policy.engine import evaluate
    from dpguard.policy.facts import manifest_facts

    catalog, policies = load_catalog(), load_policies()
    checked = shown = feasible_plans = 0
    for path in corpus:
        result = check_file(str(path), catalog, policies)
        if result.manifest is None or result.plan is None:
            continue
        m = result.manifest
        outcome = evaluate(policies, m, manifest_facts(m))
        plan = make_plan(m, outcome, policies)
        feasible = plan.status != "infeasible"
        assert recommended_schedule(m, outcome, policies) == (
            plan.schedule if feasible else None
        ), _name(path)
        if feasibility_shown(m, outcome, policies):
            assert feasible, _name(path)
            shown += 1
        checked, feasible_plans = checked + 1, feasible_plans + feasible
    assert checked > 500
    assert shown > 0.9 * feasible_plans, (shown, feasible_plans)


def test_a_rule_that_reads_the_schedule_gets_the_plans_without_a_plan_shown(
    tmp_path: Path,
) -> None:
    """Without a proposal the shipped rules read only feasibility, so a review that shows no
    plan leaves the schedule pending; a team's rule that reads it gets the plan's."""
    team = tmp_path / "team.yaml"
    team.write_text(
        """apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team, version: 1.0.0, owner: platform}
rules:
  - id: TEAM001
    kind: advise
    title: names the planned schedule
    when: {fact: plan.feasible, equals: true}
    message: "planned {{ plan.recommended_schedule }}"
    docs: What the platform team runs is the plan.
""",
        encoding="utf-8",
    )
    policies = load_policies([str(team)])
    manifest = ROOT / "examples" / "large-dense.yaml"
    doc = manifest.read_text(encoding="utf-8").split("\nparallelism:")[0] + "\n"
    bare = tmp_path / "bare.yaml"
    bare.write_text(doc, encoding="utf-8")
    shown = check_file(str(bare), None, policies)
    quiet = check_file(str(bare), None, policies, plan_shown=False)
    assert shown.plan is not None and shown.plan.schedule
    said = [f.message for f in quiet.findings if f.code == "TEAM001"]
    assert said == [f"planned {shown.plan.schedule}"]
    assert [f.format() for f in quiet.findings] == [f.format() for f in shown.findings]
