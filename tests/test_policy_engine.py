"""Policy engine: operators and unset facts, malformed policies (positioned, exit 2), the
reachability check's soundness, refusal cycles, --fail-on, policy digests in reports, P001."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dpguard.catalog import load_catalog
from dpguard.check import judge
from dpguard.cli import main
from dpguard.manifest import build_manifest
from dpguard.policy import load as policy_load
from dpguard.policy.conditions import Condition, parse
from dpguard.policy.engine import evaluate
from dpguard.policy.facts import ALWAYS_SET, FACTS, LATE_FACTS, PLANNED, manifest_facts
from dpguard.policy.load import load_policies, shipped_paths
from dpguard.policy.model import Rule
from dpguard.policy.reach import unreachable_rows
from dpguard.validate import validate
from dpguard.yamlsource import load_file

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "small-dense.yaml")


@pytest.fixture(autouse=True)
def no_repo_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every command from a fresh repository, so no .dpguard.yaml layers leak in."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)


def cond(data: Any) -> Condition:
    return parse(data, ("when",))


# ---- Operators, on set and unset facts ----------------------------------------------------------

# (fact, operator, value, fact value, expected)
SET_CASES = [
    ("cluster.gpus", "equals", 500, 500, True),
    ("cluster.gpus", "equals", 500, 501, False),
    ("parallelism.schedule", "equals", "zb1p", "zb1p", True),
    ("parallelism.schedule", "equals", "zb1p", "1f1b", False),
    ("model.untie_embeddings", "equals", False, False, True),
    ("model.untie_embeddings", "equals", False, True, False),
    ("cluster.gpus", "not_equals", 500, 500, False),
    ("cluster.gpus", "not_equals", 500, 499, True),
    ("parallelism.schedule", "not_equals", "dualpipe", "dualpipev", True),
    ("cluster.gpus", "lt", 100, 99, True),
    ("cluster.gpus", "lt", 100, 100, False),
    ("cluster.gpus", "le", 500, 500, True),
    ("cluster.gpus", "le", 500, 501, False),
    ("cluster.gpus", "gt", 500, 501, True),
    ("cluster.gpus", "gt", 500, 500, False),
    ("cluster.gpus", "ge", 500, 500, True),
    ("cluster.gpus", "ge", 500, 499, False),
    ("derived.microbatches_per_rank", "lt", 8, 7.9, True),
    ("derived.microbatches_per_rank", "gt", 16, 16.0, False),
    ("cluster.interconnect.inter_node_gbps_per_gpu", "le", 200, 200.0, True),
    ("cluster.interconnect.inter_node_gbps_per_gpu", "le", 200, 201.0, False),
    ("parallelism.schedule", "in", ["zb1p", "1f1b"], "1f1b", True),
    ("parallelism.schedule", "in", ["zb1p", "1f1b"], "gpipe", False),
    ("cluster.gpus", "in", [64, 128], 128, True),
    ("parallelism.schedule", "not_in", ["zb1p", "1f1b"], "gpipe", True),
    ("parallelism.schedule", "not_in", ["zb1p", "1f1b"], "zb1p", False),
    ("parallelism.expert", "exists", True, 8, True),
    ("parallelism.expert", "exists", False, 8, False),
    ("derived.microbatches", "divisible_by", 2, 16, True),
    ("derived.microbatches", "divisible_by", 2, 17, False),
    ("derived.microbatches_per_rank", "divisible_by", 2, 4.0, True),
    ("derived.microbatches_per_rank", "divisible_by", 2, 2.5, False),
]


@pytest.mark.parametrize(("fact", "op", "value", "actual", "expected"), SET_CASES)
def test_operator_on_a_set_fact(
    fact: str, op: str, value: Any, actual: Any, expected: bool
) -> None:
    condition = cond({"fact": fact, op: value})
    assert condition.holds({fact: actual}) is expected
    assert cond({"not": {"fact": fact, op: value}}).holds({fact: actual}) is not expected


UNSET_CASES = [
    ("equals", 8),
    ("not_equals", 8),
    ("lt", 8),
    ("le", 8),
    ("gt", 8),
    ("ge", 8),
    ("in", [1, 8]),
    ("not_in", [1, 8]),
    ("exists", True),
    ("exists", False),
    ("divisible_by", 2),
]


@pytest.mark.parametrize(("op", "value"), UNSET_CASES)
@pytest.mark.parametrize("facts", [{"parallelism.expert": None}, {}], ids=["none", "absent"])
def test_only_exists_false_holds_on_an_unset_fact(
    op: str, value: Any, facts: dict[str, Any]
) -> None:
    expected = op == "exists" and value is False
    assert cond({"fact": "parallelism.expert", op: value}).holds(facts) is expected
    # `not` of any other test on an unset fact is true: that is how a policy counts unset as a
    # match (DT001: `not: {fact: parallelism.expert, le: 1}`).
    assert cond({"not": {"fact": "parallelism.expert", op: value}}).holds(facts) is not expected


A = {"fact": "cluster.gpus", "gt": 100}
B = {"fact": "model.architecture", "equals": "moe"}
C = {"fact": "parallelism.expert", "gt": 1}  # unset below


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"all": [A, B]}, True),
        ({"all": [A, C]}, False),
        ({"any": [C, B]}, True),
        ({"any": [C, {"not": B}]}, False),
        ({"not": {"all": [A, C]}}, True),
        ({"not": {"any": [A, C]}}, False),
        ({"all": [A, {"any": [C, {"not": C}]}]}, True),
        ({"any": [{"all": [A, C]}, {"all": [B, {"not": {"not": A}}]}]}, True),
        ({"all": [{"any": [C, {"fact": "cluster.gpus", "lt": 100}]}, B]}, False),
        ({"not": {"not": C}}, False),
        ({"all": [{"not": C}, {"fact": "parallelism.expert", "exists": False}]}, True),
    ],
)
def test_all_any_not_nesting(condition: dict[str, Any], expected: bool) -> None:
    facts = {"cluster.gpus": 512, "model.architecture": "moe", "parallelism.expert": None}
    assert cond(condition).holds(facts) is expected


TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {{name: team, version: 1.0.0}}
rules:
  - id: TEAM001
    kind: advise
    title: unset schedule
    when: {when}
    message: fired
    docs: d
"""


@pytest.mark.parametrize(
    ("when", "fires"),
    [
        ("{fact: parallelism.schedule, not_equals: dualpipe}", False),
        ("{fact: parallelism.schedule, not_in: [dualpipe]}", False),
        ("{not: {fact: parallelism.schedule, equals: dualpipe}}", True),
        ("{fact: parallelism.schedule, exists: false}", True),
        ("{fact: parallelism.schedule, exists: true}", False),
    ],
)
def test_unset_semantics_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str, fires: bool
) -> None:
    """examples/small-dense.yaml proposes no parallelism: every parallelism.* fact is unset."""
    team = tmp_path / "team.yaml"
    team.write_text(TEAM.format(when=when), encoding="utf-8")
    assert main(["review", "--policy", str(team), EXAMPLE]) == 0
    assert ("warning TEAM001 fired" in capsys.readouterr().out) is fires


def test_late_facts_are_exactly_those_the_decision_stage_lacks() -> None:
    catalog = load_catalog()
    doc = load_file(str(REPO / "examples" / "frontier-moe.yaml"))
    assert validate(doc, catalog) == []
    manifest = build_manifest(doc, catalog)
    early = manifest_facts(manifest)
    assert set(FACTS) - set(early) == LATE_FACTS
    outcome = evaluate(load_policies(), manifest, early)
    # Per-schedule facts are computed only when a loaded rule reads them; no shipped rule does.
    # The planner's facts come after `evaluate` (check.judge adds them).
    lazy = {f for f in FACTS if f.startswith("schedules.")}
    assert set(outcome.facts) == set(FACTS) - lazy - PLANNED
    judged, _plan = judge(manifest, load_policies())
    assert set(judged.facts) == set(FACTS) - lazy


# ---- Malformed policies: a positioned message and exit code 2 ----------------------------------

HEAD = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team, version: 1.0.0}
"""


def rule(
    when: str = "{fact: cluster.gpus, gt: 1}",
    rule_id: str = "TEAM001",
    kind: str = "advise",
    message: str = "m",
    extra: str = "",
) -> str:
    return (
        f"  - id: {rule_id}\n    kind: {kind}\n    title: t\n    when: {when}\n"
        f"    message: {message}\n    docs: d\n{extra}"
    )


def decision(rule_id: str, when: str, schedule: str = "zb1p") -> str:
    return rule(when, rule_id, "decision", extra=f"    recommend: {{schedule: {schedule}}}\n")


def shipped(rule_id: str) -> str:
    """Where a shipped rule is defined (file:line:col), read from the loaded policies."""
    found = load_policies().get(rule_id)
    assert found is not None
    return found.location


OPERATORS = "equals, not_equals, lt, le, gt, ge, in, not_in, divisible_by, matches, exists"
SCHEDULES = "gpipe, 1f1b, interleaved-1f1b, zb1p, dualpipe, dualpipev"

# (case id, policy text, expected problems; {p} is the policy path)
MALFORMED: list[tuple[str, str, list[str]]] = [
    (
        "bad yaml",
        HEAD + "rules: 'abc\n",
        [
            "{p}:5:1: invalid YAML: found unexpected end of stream (while scanning a quoted "
            "scalar that starts at line 4)"
        ],
    ),
    (
        "duplicate yaml key",
        HEAD + "rules: []\nrules: []\n",
        ["{p}:5:1: duplicate key 'rules' (first defined at line 4)"],
    ),
    (
        "unknown top-level key",
        HEAD + "rulez: []\nrules:\n" + rule(),
        ["{p}:4:1: unknown key 'rulez' in (top level) (did you mean 'rules'?)"],
    ),
    (
        "unknown operator with a hint",
        HEAD + "rules:\n" + rule("{fact: cluster.gpus, gte: 1}"),
        [f"{{p}}:8:32: unknown operator 'gte' (did you mean 'ge'?); operators: {OPERATORS}"],
    ),
    (
        "unknown operator without a close match",
        HEAD + "rules:\n" + rule("{fact: cluster.gpus, bigger: 1}"),
        [f"{{p}}:8:32: unknown operator 'bigger'; operators: {OPERATORS}"],
    ),
    (
        "unknown fact",
        HEAD + "rules:\n" + rule("{fact: parallelism.schedul, equals: zb1p}"),
        [
            "{p}:8:12: unknown fact 'parallelism.schedul' (did you mean 'parallelism.schedule'?) "
            "(`dpguard facts` lists them)"
        ],
    ),
    (
        "unknown fact nested in all/not",
        HEAD
        + "rules:\n"
        + rule("{all: [{fact: cluster.gpus, gt: 1}, {not: {fact: cluster.gpu, lt: 2}}]}"),
        [
            "{p}:8:54: unknown fact 'cluster.gpu' (did you mean 'cluster.gpus'?) "
            "(`dpguard facts` lists them)"
        ],
    ),
    (
        "string for an int fact",
        HEAD + "rules:\n" + rule("{fact: cluster.gpus, equals: many}"),
        ["{p}:8:32: cluster.gpus is an int fact; 'many' can never match it"],
    ),
    (
        "number for a bool fact",
        HEAD + "rules:\n" + rule("{fact: parallelism.untie_embeddings, equals: 1}"),
        ["{p}:8:48: parallelism.untie_embeddings is a bool fact; 1 can never match it"],
    ),
    (
        "ordering a string fact",
        HEAD + "rules:\n" + rule("{fact: cluster.accelerator, lt: 3}"),
        ["{p}:8:39: lt needs a numeric fact; cluster.accelerator is str"],
    ),
    (
        "divisible_by needs a positive integer",
        HEAD + "rules:\n" + rule("{fact: derived.microbatches, divisible_by: 0}"),
        ["{p}:8:40: divisible_by takes a positive integer"],
    ),
    (
        "impossible enum value",
        HEAD + "rules:\n" + rule("{fact: parallelism.schedule, equals: dualpipe-v}"),
        [
            "{p}:8:40: 'dualpipe-v' is not a possible value of parallelism.schedule "
            f"(did you mean 'dualpipev'?); possible: {SCHEDULES}"
        ],
    ),
    (
        "impossible enum value in a list",
        HEAD + "rules:\n" + rule("{fact: communication.all_to_all_kernel, in: [none, deep-ep]}"),
        [
            "{p}:8:51: 'deep-ep' is not a possible value of communication.all_to_all_kernel "
            "(did you mean 'deepep'?); possible: none, nccl, deepep, pplx, uccl-ep, mori, custom"
        ],
    ),
    (
        "duplicate id in one file",
        HEAD + "rules:\n" + rule() + rule(),
        ["{p}:11:5: duplicate rule id TEAM001 (first at {p}:5:5)"],
    ),
    (
        "duplicate of a shipped id without override",
        HEAD + "rules:\n" + rule(rule_id="HR003"),
        [
            "{p}:5:5: rule HR003 is already defined by dpguard-core ({HR003}); "
            "set override: true to replace it"
        ],
    ),
    (
        "override with nothing to override",
        HEAD + "rules:\n" + rule(extra="    override: true\n"),
        ["{p}:5:5: override of TEAM001, which no earlier set defines"],
    ),
    (
        "disable of an unknown id",
        HEAD + "settings:\n  disable: [ADV001, HR033]\nrules: []\n",
        ["{p}:5:21: disable names unknown rule HR033 (did you mean 'HR003'?)"],
    ),
    (
        "missing message",
        HEAD + "rules:\n" + rule().replace("    message: m\n", ""),
        ["{p}:5:5: rules[0] is missing the required key 'message'"],
    ),
    (
        "message with an unknown fact",
        HEAD + "rules:\n" + rule(message="'{{ cluster.gpu }} GPUs'"),
        ["{p}:9:5: message uses unknown fact 'cluster.gpu' (did you mean 'cluster.gpus'?)"],
    ),
    (
        "message with an undefined name",
        HEAD + "rules:\n" + rule(message="'{{ clustr.gpus }} GPUs'"),
        ["{p}:9:5: message uses undefined name 'clustr' (did you mean 'cluster'?)"],
    ),
    (
        "message with invalid Jinja",
        HEAD + "rules:\n" + rule(message="'{{ cluster.gpus '"),
        [
            "{p}:9:5: message is not a valid template: unexpected end of template, expected "
            "'end of print statement'. (template line 1)"
        ],
    ),
    (
        "decision row testing a fact computed after the decision",
        HEAD + "rules:\n" + decision("TD001", "{fact: derived.model_fits_one_gpu, equals: true}"),
        [
            "{p}:8:12: fact 'derived.model_fits_one_gpu' is only known after the decision "
            "table and refusals have run, so this rule would never see it set; test it in a "
            "reject or advise rule"
        ],
    ),
    (
        "refusal message using a fact computed after the refusals",
        HEAD
        + "rules:\n"
        + rule(
            rule_id="TR001",
            kind="refuse",
            message="'{{ plan.schedule }}'",
            extra="    refuses: [zb1p]\n    recommend: {schedule: 1f1b}\n    precedence: 1\n",
        ),
        [
            "{p}:9:5: message uses fact 'plan.schedule', which is only known after the "
            "decision table and refusals have run"
        ],
    ),
    (
        "unreachable decision row in one file",
        # The shipped rows together match every manifest (DT003 <= 500 < DT002), so a team table
        # that stands on its own disables them first.
        HEAD
        + "settings:\n  disable: [DT001, DT002, DT003, DT004]\n"
        + "rules:\n"
        + decision("TD001", "{fact: cluster.gpus, gt: 100}")
        + decision("TD002", "{fact: cluster.gpus, gt: 200}"),
        [
            "{p}:14:5: decision row TD002 can never match: the earlier row TD001 ({p}:7:5) "
            "always wins"
        ],
    ),
    (
        "decision row shadowed by a shipped row",
        HEAD + "rules:\n" + decision("TD001", "{fact: cluster.gpus, gt: 1000}", "dualpipe"),
        [
            "{p}:5:5: decision row TD001 can never match: the earlier row DT002 ({DT002}) "
            "always wins"
        ],
    ),
    (
        "no decision rows",
        HEAD + "settings: {disable: [DT001, DT002, DT003, DT004]}\nrules: []\n",
        ["no decision rules are loaded: dpguard cannot recommend a schedule"],
    ),
    (
        "refusal without precedence",
        HEAD + "rules:\n" + rule(rule_id="TR001", kind="refuse", extra="    refuses: [zb1p]\n"),
        [
            "{p}:5:5: rules[0] is missing the required key 'recommend'",
            "{p}:5:5: rules[0] is missing the required key 'precedence'",
        ],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_malformed_policy_is_positioned_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: list[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    problems = [
        line.format(p=path, HR003=shipped("HR003"), DT002=shipped("DT002")) for line in expected
    ]
    assert main(["review", "--policy", str(path), EXAMPLE]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "dpguard: error: broken policy:\n  " + "\n  ".join(problems) + "\n"
    assert "Traceback" not in err


def test_every_problem_of_a_file_is_listed_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        HEAD
        + "rules:\n"
        + rule("{fact: cluster.gpus, gte: 1}", "TEAM001")
        + rule(rule_id="TEAM002", message="'{{ cluster.gpu }}'")
        + rule(rule_id="TEAM002"),
        encoding="utf-8",
    )
    assert main(["review", "--policy", str(path), EXAMPLE]) == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        f"  {path}:8:32: unknown operator 'gte' (did you mean 'ge'?); operators: {OPERATORS}",
        f"  {path}:15:5: message uses unknown fact 'cluster.gpu' (did you mean 'cluster.gpus'?)",
        f"  {path}:17:5: duplicate rule id TEAM002 (first at {path}:11:5)",
    ]


def test_missing_required_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped planner set provides the settings; a stack without one of them cannot run."""
    core, planner = shipped_paths()
    assert Path(core).name == "core.yaml" and Path(planner).name == "planner.yaml"
    text = Path(planner).read_text(encoding="utf-8")
    stripped = re.sub(r"(?m)^  memory_headroom:.*\n", "", text)
    assert stripped != text
    partial = tmp_path / "planner.yaml"
    partial.write_text(stripped, encoding="utf-8")
    monkeypatch.setattr(policy_load, "shipped_paths", lambda: [core, str(partial)])
    assert main(["review", EXAMPLE]) == 2
    assert capsys.readouterr().err == (
        "dpguard: error: broken policy:\n  no policy set provides the settings: memory_headroom\n"
    )


def test_refusal_cycle_is_a_config_error_at_evaluation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = (
        "    refuses: [{refuses}]\n    recommend: {{schedule: {recommend}}}\n    precedence: 5\n"
    )
    path = tmp_path / "cycle.yaml"
    path.write_text(
        HEAD
        + "rules:\n"
        + rule(
            rule_id="TR001", kind="refuse", extra=refusal.format(refuses="1f1b", recommend="zb1p")
        )
        + rule(
            rule_id="TR002", kind="refuse", extra=refusal.format(refuses="zb1p", recommend="1f1b")
        ),
        encoding="utf-8",
    )
    assert main(["lint-policies", str(path)]) == 0  # a cycle depends on the facts: not a load error
    capsys.readouterr()
    # small-dense: 64 GPUs -> DT004 (1f1b) -> TR001 (zb1p) -> TR002 (1f1b again).
    assert main(["review", "--policy", str(path), EXAMPLE]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"dpguard: error: {path}:14:5: refusals redirect in a cycle: TR001 -> TR002\n"


# ---- Reachability: sound (a flagged row really is unreachable), not complete --------------------


def rows(*conditions: dict[str, Any]) -> list[Rule]:
    return [
        Rule(f"TD{i:03d}", "decision", "t", None, cond(c), "m", "d", True, "cluster.gpus", "zb1p")
        for i, c in enumerate(conditions, start=1)
    ]


def flagged(*conditions: dict[str, Any]) -> list[tuple[str, str]]:
    """(row, the winning rows joined by '+') for each unreachable row."""
    found = unreachable_rows(rows(*conditions), ALWAYS_SET)
    return [(row.id, "+".join(w.id for w in winners)) for row, winners in found]


GPUS = "cluster.gpus"
PIPE = "parallelism.pipeline"  # unset when nothing is proposed
SCHED = "parallelism.schedule"


@pytest.mark.parametrize(
    ("earlier", "later", "unreachable"),
    [
        # interval containment
        ({"fact": GPUS, "gt": 100}, {"fact": GPUS, "gt": 200}, True),
        ({"fact": GPUS, "gt": 200}, {"fact": GPUS, "gt": 100}, False),
        ({"fact": GPUS, "ge": 100}, {"fact": GPUS, "gt": 100}, True),
        ({"fact": GPUS, "gt": 100}, {"fact": GPUS, "ge": 100}, False),  # 100 reaches the later
        ({"fact": GPUS, "le": 500}, {"fact": GPUS, "lt": 500}, True),
        ({"fact": GPUS, "lt": 500}, {"fact": GPUS, "le": 500}, False),
        (
            {"fact": GPUS, "lt": 1000},
            {"all": [{"fact": GPUS, "gt": 100}, {"fact": GPUS, "le": 500}]},
            True,
        ),
        (
            {"all": [{"fact": GPUS, "gt": 100}, {"fact": GPUS, "le": 500}]},
            {"fact": GPUS, "lt": 1000},
            False,
        ),
        ({"fact": GPUS, "gt": 100}, {"fact": GPUS, "equals": 128}, True),
        ({"fact": GPUS, "gt": 100}, {"fact": GPUS, "in": [64, 128]}, False),
        # `in` subsets and equality
        ({"fact": SCHED, "in": ["zb1p", "1f1b"]}, {"fact": SCHED, "in": ["1f1b"]}, True),
        ({"fact": SCHED, "in": ["1f1b"]}, {"fact": SCHED, "in": ["zb1p", "1f1b"]}, False),
        ({"fact": SCHED, "in": ["zb1p", "1f1b"]}, {"fact": SCHED, "equals": "zb1p"}, True),
        ({"fact": SCHED, "not_in": ["gpipe"]}, {"fact": SCHED, "in": ["zb1p", "1f1b"]}, True),
        (
            {"fact": SCHED, "not_equals": "gpipe"},
            {"fact": SCHED, "not_in": ["gpipe", "zb1p"]},
            True,
        ),
        (
            {"fact": SCHED, "not_in": ["gpipe", "zb1p"]},
            {"fact": SCHED, "not_equals": "gpipe"},
            False,
        ),
        # `not`, and the unset case it admits
        ({"not": {"fact": GPUS, "le": 100}}, {"fact": GPUS, "gt": 200}, True),
        ({"fact": PIPE, "gt": 4}, {"not": {"fact": PIPE, "le": 4}}, False),  # unset P: later only
        ({"not": {"fact": PIPE, "le": 4}}, {"fact": PIPE, "gt": 4}, True),
        ({"not": {"fact": PIPE, "le": 4}}, {"fact": PIPE, "exists": False}, True),
        ({"fact": PIPE, "exists": True}, {"fact": PIPE, "ge": 1}, True),
        ({"fact": PIPE, "ge": 1}, {"fact": PIPE, "exists": True}, False),
        # any / all
        (
            {"any": [{"fact": GPUS, "lt": 100}, {"fact": GPUS, "gt": 500}]},
            {"fact": GPUS, "gt": 600},
            True,
        ),
        (
            {"any": [{"fact": GPUS, "lt": 100}, {"fact": GPUS, "gt": 500}]},
            {"fact": GPUS, "gt": 400},
            False,
        ),
        (
            {"all": [{"fact": GPUS, "gt": 100}, {"fact": SCHED, "equals": "zb1p"}]},
            {"fact": GPUS, "gt": 200},
            False,
        ),
        (
            {"fact": GPUS, "gt": 100},
            {"all": [{"fact": GPUS, "gt": 200}, {"fact": SCHED, "equals": "zb1p"}]},
            True,
        ),
        (
            {"fact": GPUS, "gt": 100},
            {"any": [{"fact": GPUS, "gt": 200}, {"fact": SCHED, "equals": "zb1p"}]},
            False,
        ),
        (
            {"not": {"all": [{"fact": GPUS, "le": 100}, {"fact": SCHED, "equals": "zb1p"}]}},
            {"all": [{"fact": GPUS, "gt": 100}, {"fact": SCHED, "equals": "1f1b"}]},
            True,
        ),
        # divisibility
        ({"fact": PIPE, "divisible_by": 2}, {"fact": PIPE, "divisible_by": 4}, True),
        ({"fact": PIPE, "divisible_by": 4}, {"fact": PIPE, "divisible_by": 2}, False),
    ],
)
def test_reachability_pairs(earlier: Any, later: Any, unreachable: bool) -> None:
    assert flagged(earlier, later) == ([("TD002", "TD001")] if unreachable else [])


@pytest.mark.parametrize(
    "conditions",
    [
        # Three earlier rows cover the later one only across two facts at once (dense by GPU
        # count, plus every MoE run): the check splits ranges along one fact only.
        (
            {"all": [{"fact": GPUS, "le": 500}, {"fact": "model.architecture", "equals": "dense"}]},
            {"all": [{"fact": GPUS, "gt": 500}, {"fact": "model.architecture", "equals": "dense"}]},
            {"fact": "model.architecture", "equals": "moe"},
            {"fact": GPUS, "ge": 1},
        ),
        # A negated divisibility is not reasoned about, even when the rows are identical.
        ({"not": {"fact": PIPE, "divisible_by": 2}}, {"not": {"fact": PIPE, "divisible_by": 2}}),
        # Integer facts: gt 100 and ge 101 admit the same counts; the check reasons on reals.
        ({"fact": GPUS, "ge": 101}, {"fact": GPUS, "gt": 100}),
    ],
)
def test_reachability_is_incomplete_not_unsound(conditions: tuple[Any, ...]) -> None:
    assert flagged(*conditions) == []


def test_shipped_decision_rows_are_all_reachable() -> None:
    decisions = [r for r in load_policies().rules if r.kind == "decision"]
    assert [r.id for r in decisions] == ["DT001", "DT004", "DT003", "DT002"]
    assert unreachable_rows(decisions) == []


NUM = "derived.microbatches_per_rank"
NUM_VALUES = [None, *(x / 2 for x in range(-2, 15))]
STR_VALUES = [None, "gpipe", "1f1b", "zb1p", "dualpipe"]


def random_leaf(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.6:
        op = rng.choice([op for op, _ in UNSET_CASES])
        value: Any = {
            "in": lambda: rng.sample(range(7), rng.randint(1, 3)),
            "not_in": lambda: rng.sample(range(7), rng.randint(1, 3)),
            "exists": lambda: rng.random() < 0.5,
            "divisible_by": lambda: rng.randint(1, 4),
        }.get(op, lambda: rng.randint(0, 6))()
        return {"fact": NUM, op: value}
    op = rng.choice(["equals", "not_equals", "in", "not_in", "exists"])
    if op in ("in", "not_in"):
        value = rng.sample(STR_VALUES[1:], rng.randint(1, 3))
    else:
        value = rng.random() < 0.5 if op == "exists" else rng.choice(STR_VALUES[1:])
    return {"fact": SCHED, op: value}


def random_condition(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    if depth > 2 or rng.random() < 0.4:
        return random_leaf(rng)
    op = rng.choice(["all", "any", "not"])
    if op == "not":
        return {"not": random_condition(rng, depth + 1)}
    return {op: [random_condition(rng, depth + 1) for _ in range(rng.randint(1, 3))]}


def test_reachability_is_sound_on_random_pairs() -> None:
    """Whenever a row is flagged, no assignment (unset included) matches it but not the
    earlier row. Thresholds are integers, so integers and halves cover every region."""
    rng = random.Random(20240601)
    assignments = [{NUM: n, SCHED: s} for n, s in itertools.product(NUM_VALUES, STR_VALUES)]
    checked = 0
    for _ in range(4000):
        earlier, later = random_condition(rng), random_condition(rng)
        if not flagged(earlier, later):
            continue
        checked += 1
        first, second = cond(earlier), cond(later)
        witness = next((f for f in assignments if second.holds(f) and not first.holds(f)), None)
        assert witness is None, (earlier, later, witness)
    assert checked > 100  # the check really ran on flagged pairs


# ---- Exit codes, the policy line, P001 ---------------------------------------------------------

WARN_ONLY = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: warn-only}
cluster:
  gpus: 10
  gpus_per_node: 1
  accelerator: A100-80GB
  interconnect: {inter_node_gbps_per_gpu: 400}
model:
  architecture: dense
  total_params: 13B
  layers: 42
  hidden_size: 5120
  attention_heads: 40
  seq_len: 4096
  vocab_size: 32000
training: {tokens: 1T, global_batch_size: 120, micro_batch_size: 1}
parallelism: {tensor: 1, pipeline: 10, context: 1, schedule: 1f1b}
"""


@pytest.mark.parametrize(
    ("flags", "code"), [([], 0), (["--fail-on", "error"], 0), (["--fail-on", "warning"], 1)]
)
def test_fail_on_with_advisories_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], code: int
) -> None:
    manifest = tmp_path / "warn.yaml"
    manifest.write_text(WARN_ONLY, encoding="utf-8")
    assert main(["review", str(manifest), *flags]) == code
    out = capsys.readouterr().out
    assert (
        f"{manifest}:12:3: warning ADV002 42 layers over 10 pipeline stages is 4.20 per stage"
        in out
    )
    assert " error " not in out
    assert out.endswith(
        f"1 manifest checked: {1 - code} passed, {code} failed (0 errors, 1 warning)\n"
    )


def expected_sets(*extra: Path) -> list[dict[str, str]]:
    """Name, version and sha256 digest of each set, computed here from the files' bytes."""
    out = []
    for path in [*map(Path, shipped_paths()), *extra]:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        meta = data["metadata"]
        out.append({"name": meta["name"], "version": meta["version"], "digest": digest})
    return out


def test_report_names_each_policy_set_with_version_and_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(HEAD + "rules:\n" + rule(), encoding="utf-8")
    sets = expected_sets(team)
    assert [s["name"] for s in sets] == ["dpguard-core", "dpguard-planner", "team"]
    assert all(re.fullmatch(r"sha256:[0-9a-f]{16}", s["digest"]) for s in sets)

    assert main(["review", "--policy", str(team), EXAMPLE]) == 0
    line = "policies: " + ", ".join(f"{s['name']} {s['version']} ({s['digest']})" for s in sets)
    assert line in capsys.readouterr().out.splitlines()

    assert main(["review", "--policy", str(team), "--format", "json", EXAMPLE]) == 0
    assert json.loads(capsys.readouterr().out)["policies"] == sets


def test_digest_changes_with_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    digests = []
    for message in ("one", "two"):
        team.write_text(HEAD + "rules:\n" + rule(message=message), encoding="utf-8")
        assert main(["review", "--policy", str(team), "--format", "json", EXAMPLE]) == 0
        digests.append(json.loads(capsys.readouterr().out)["policies"][-1]["digest"])
    assert digests[0] != digests[1]


NARROW = (
    HEAD
    + "settings: {disable: [DT001, DT002, DT003, DT004]}\nrules:\n"
    + decision("TD001", "{fact: cluster.gpus, ge: 1000}", "dualpipev")
)
P001 = (
    "no decision row matches this manifest: the policy cannot recommend a schedule "
    "(add a row to the decision table)"
)


def test_no_matching_decision_row_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "narrow.yaml"
    policy.write_text(NARROW, encoding="utf-8")
    assert main(["review", "--policy", str(policy), EXAMPLE]) == 1
    out = capsys.readouterr().out
    # At the `kind` key (line 4 of small-dense.yaml), not on the comment at 1:1.
    assert out.startswith(f"{EXAMPLE}:4:1: error P001 {P001}\n")
    assert out.endswith("1 manifest checked: 0 passed, 1 failed (1 error, 0 warnings)\n")

    assert main(["review", "--policy", str(policy), "--format", "json", EXAMPLE]) == 1
    result = json.loads(capsys.readouterr().out)["files"][0]
    assert result["decision"] == {
        "recommended_schedule": None,
        "redirects": [],
        "rule": None,
        "schedule": None,
    }
    assert [(f["code"], f["severity"], f["message"]) for f in result["findings"]] == [
        ("P001", "error", P001)
    ]


def test_the_narrow_row_still_decides_what_it_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "narrow.yaml"
    policy.write_text(NARROW, encoding="utf-8")
    manifest = tmp_path / "big.yaml"
    text = Path(EXAMPLE).read_text(encoding="utf-8")
    manifest.write_text(text.replace("gpus: 64", "gpus: 1024"), encoding="utf-8")
    assert main(["review", "--policy", str(policy), "--format", "json", str(manifest)]) == 0
    result = json.loads(capsys.readouterr().out)["files"][0]
    assert result["decision"]["rule"] == "TD001"
    assert "P001" not in [f["code"] for f in result["findings"]]


MOE_DUALPIPE_200G = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: moe-200g}
cluster:
  gpus: 64
  gpus_per_node: 8
  accelerator: H800
  interconnect: {inter_node_gbps_per_gpu: 200, intra_node: nvlink}
model:
  architecture: moe
  total_params: 99B
  active_params: 15B
  layers: 48
  hidden_size: 4096
  attention_heads: 32
  seq_len: 4096
  vocab_size: 32000
  experts: 64
  experts_per_token: 8
training: {tokens: 1T, global_batch_size: 128, micro_batch_size: 1}
parallelism: {tensor: 1, pipeline: 8, expert: 8, schedule: dualpipe, untie_embeddings: true}
communication: {all_to_all_kernel: deepep}
"""
ADV003 = re.compile(
    r"warning ADV003 proposed schedule (\S+) differs from dpguard's recommendation (\S+) "
    r"\(([A-Z]+\d+)\): the step-time model prices the proposal at ([\d,]+) GPU-hours more "
    r"over the token budget than dpguard's plan on the same cluster \(`dpguard plan` shows "
    r"both\)$"
)


def test_a_refused_proposal_draws_the_refusal_not_adv003(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """RF001 refuses DualPipe at 200 Gbps: that error says why; ADV003 does not also price the
    refused schedule against the redirect (issue 11: no contradicting advice)."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MOE_DUALPIPE_200G, encoding="utf-8")
    main(["review", str(manifest)])
    out = capsys.readouterr().out
    assert " error RF001 " in out and " ADV003 " not in out


def test_adv003_states_what_the_recommendation_saves_and_is_silent_when_it_saves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under DT004 (1F1B for < 100 GPUs) dpguard plans 1F1B at its fastest layout (P = 5).
    GPipe at P = 10 costs more by the step-time model: ADV003 fires with what the plan saves.
    DualPipeV at P = 2, M = 24 costs less than the plan (a smaller bubble on fewer stages):
    nothing to justify, ADV003 stays silent (its memory is other rules' business)."""
    lines = {}
    for schedule, layout in (("gpipe", "pipeline: 10"), ("dualpipev", "pipeline: 2")):
        manifest = tmp_path / f"{schedule}.yaml"
        text = WARN_ONLY.replace("schedule: 1f1b", f"schedule: {schedule}")
        manifest.write_text(text.replace("pipeline: 10", layout))
        main(["review", str(manifest)])
        out = capsys.readouterr().out.splitlines()
        lines[schedule] = [line for line in out if " ADV003 " in line]
    assert lines["dualpipev"] == []
    assert len(lines["gpipe"]) == 1
    match = ADV003.search(lines["gpipe"][0])
    assert match is not None, lines["gpipe"][0]
    assert match.groups()[:3] == ("gpipe", "1f1b", "DT004")
    assert int(match[4].replace(",", "")) > 0


def leaf(fact: str, op: str, value: Any) -> dict[str, Any]:
    return {"fact": fact, op: value}


DENSE_ARCH = leaf("model.architecture", "equals", "dense")


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        # Together the earlier rows cover every GPU count: the third can never match.
        ([leaf(GPUS, "le", 500), leaf(GPUS, "gt", 500), DENSE_ARCH], [("TD003", "TD001+TD002")]),
        (
            [leaf(GPUS, "lt", 500), leaf(GPUS, "ge", 500), leaf(GPUS, "gt", 7)],
            [("TD003", "TD001+TD002")],
        ),
        # A gap (400, 500] lets a manifest through: nothing to report.
        ([leaf(GPUS, "le", 400), leaf(GPUS, "gt", 500), DENSE_ARCH], []),
        # Open at both sides of 500: exactly 500 GPUs still reaches the third row.
        ([leaf(GPUS, "lt", 500), leaf(GPUS, "gt", 500), DENSE_ARCH], []),
        # An earlier row that also needs dense only covers dense rows.
        (
            [{"all": [DENSE_ARCH, leaf(GPUS, "le", 500)]}, leaf(GPUS, "gt", 500), DENSE_ARCH],
            [("TD003", "TD001+TD002")],
        ),
        (
            [
                {"all": [DENSE_ARCH, leaf(GPUS, "le", 500)]},
                leaf(GPUS, "gt", 500),
                leaf("model.architecture", "equals", "moe"),
            ],
            [],
        ),
        # parallelism.pipeline is unset without a proposal, where no interval test holds.
        (
            [
                leaf("parallelism.pipeline", "le", 8),
                leaf("parallelism.pipeline", "gt", 8),
                DENSE_ARCH,
            ],
            [],
        ),
        # ... unless the later row itself requires it to be set.
        (
            [
                leaf("parallelism.pipeline", "le", 8),
                leaf("parallelism.pipeline", "gt", 8),
                leaf("parallelism.pipeline", "ge", 2),
            ],
            [("TD003", "TD001+TD002")],
        ),
    ],
)
def test_reachability_by_several_earlier_rows(
    conditions: list[dict[str, Any]], expected: list[tuple[str, str]]
) -> None:
    assert flagged(*conditions) == expected


def test_a_team_row_appended_after_the_shipped_table_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        HEAD + "rules:\n" + decision("TD001", "{fact: cluster.family, equals: gaudi}"),
        encoding="utf-8",
    )
    assert main(["lint-policies", str(path)]) == 2
    # Where the shipped set really is: the checkout when editable, site-packages from a wheel.
    core = next(p for p in shipped_paths() if p.endswith("core.yaml"))
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{path}:5:5: decision row TD001 can never match: the earlier rows "
        f"DT004 ({core}:34:5), DT003 ({core}:47:5), DT002 ({core}:69:5) together match every "
        "manifest it matches"
    )


def test_a_policy_message_cannot_exhaust_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Policy sets live in the repository a pull request edits; the sandbox bounds messages.
    path = tmp_path / "team.yaml"
    path.write_text(
        HEAD
        + "rules:\n"
        + "  - id: TM001\n    kind: advise\n    title: t\n"
        + "    when: {fact: cluster.gpus, gt: 1}\n"
        + "    message: \"{{ 'a' * 10**10 }}\"\n    docs: d\n",
        encoding="utf-8",
    )
    code = main(["review", "--policy", str(path), str(REPO / "examples" / "small-dense.yaml")])
    assert code == 2
    err = capsys.readouterr().err
    assert "message of rule TM001 cannot be rendered" in err
    assert "repetition would make 10000000000 items" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("ratios", "problem"),
    [
        ("{backward: 2.0, weight: 2.5, overlapped: 3.0}", "must be less than the full backward"),
        ("{backward: 2.0, weight: 1.0, overlapped: 1.5}", "overlapped"),
        ("{backward: 2.0, weight: 1.0, overlapped: 3.5}", "overlapped"),
        ("{backward: 0.0, weight: 0.0, overlapped: 1.0}", "backward"),
    ],
)
def test_unphysical_op_time_ratios_fail_the_policy_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ratios: str, problem: str
) -> None:
    # W > B (I < 0), F&B < max(F, B), F&B > F + B, no backward (schedules.md §8 item 11):
    # refused where the set is read, at its position, not by the first review that simulates.
    path = tmp_path / "team.yaml"
    path.write_text(HEAD + f"settings:\n  op_time_ratios: {ratios}\nrules: []\n", "utf-8")
    assert main(["lint-policies", str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"{path}:5:") and problem in out.splitlines()[0]
