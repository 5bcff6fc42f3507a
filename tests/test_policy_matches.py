"""Facts metadata.name, metadata.owner, metadata.labels.<key> and the `matches` operator: the
rules platform teams write first ("require an owner", "cost-centre must match ^cc-[0-9]+$")."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from dpguard.cli import main
from dpguard.policy.regex import PatternProblem, compile_pattern

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: acme, version: 1.0.0}
rules:
  - id: ACME001
    kind: reject
    title: every run has an owner
    when: {fact: metadata.owner, exists: false}
    message: run {{ metadata.name }} has no metadata.owner
    docs: on-call needs someone to page.
  - id: ACME002
    kind: reject
    title: every run names its cost centre
    when:
      not: {fact: metadata.labels.cost-centre, matches: '^cc-[0-9]+$'}
    message: >-
      label cost-centre is {{ metadata.labels['cost-centre'] or 'missing' }}; write cc-<digits>
    docs: Finance books GPU-hours by cost centre.
  - id: ACME003
    kind: advise
    title: experiment runs are named exp-
    when:
      all:
        - {fact: metadata.labels.stage, equals: experiment}
        - not: {fact: metadata.name, matches: '^exp-'}
    message: "{{ metadata.owner }}: experiment {{ metadata.name }} should be named exp-..."
    docs: naming convention.
"""


def manifest(tmp_path: Path, metadata: str) -> str:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    start = text.index("metadata:")
    end = text.index("cluster:", start)
    path = tmp_path / "run.yaml"
    path.write_text(text[:start] + f"metadata: {metadata}\n" + text[end:], encoding="utf-8")
    return str(path)


@pytest.fixture
def team(tmp_path: Path) -> str:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("metadata", "codes"),
    [
        ("{name: run1}", ["ACME001", "ACME002"]),
        ("{name: run1, owner: llm, labels: {cost-centre: cc-42}}", []),
        ("{name: run1, owner: llm, labels: {cost-centre: 'cc-42x'}}", ["ACME002"]),
        ("{name: run1, owner: llm, labels: {cost-centre: cc-1, stage: experiment}}", ["ACME003"]),
        ("{name: exp-1, owner: llm, labels: {cost-centre: cc-1, stage: experiment}}", []),
    ],
)
def test_metadata_facts_and_matches_judge_manifests(
    tmp_path: Path,
    team: str,
    capsys: pytest.CaptureFixture[str],
    metadata: str,
    codes: list[str],
) -> None:
    path = manifest(tmp_path, metadata)
    code = main(["review", "--policy", team, path])
    out = capsys.readouterr().out
    fired = sorted({c for c in re.findall(r" (ACME\d{3}) ", out)})
    assert fired == codes
    assert code == (1 if {"ACME001", "ACME002"} & set(codes) else 0)


def test_messages_read_labels_and_owner(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = manifest(tmp_path, "{name: run1}")
    main(["review", "--policy", team, path])
    out = capsys.readouterr().out
    assert "error ACME002 label cost-centre is missing; write cc-<digits>" in out
    assert "error ACME001 run run1 has no metadata.owner" in out
    path = manifest(tmp_path, "{name: r, owner: llm, labels: {cost-centre: x, stage: experiment}}")
    main(["review", "--policy", team, path])
    out = capsys.readouterr().out
    # the finding sits on the label it is about
    assert re.search(r"run\.yaml:\d+:\d+: error ACME002 label cost-centre is x;", out)
    assert "warning ACME003 llm: experiment r should be named exp-..." in out


def write_rule(tmp_path: Path, leaf: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(
        TEAM.split("  - id: ACME002")[0].replace(
            "when: {fact: metadata.owner, exists: false}", f"when: {leaf}"
        ),
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.parametrize(
    ("leaf", "message"),
    [
        ("{fact: metadata.owner, matches: '(cc'}", "invalid regular expression: missing ), "),
        ("{fact: metadata.owner, matches: '(a+)+$'}", "can backtrack exponentially"),
        ("{fact: metadata.owner, matches: '(a|ab)*c'}", "can backtrack exponentially"),
        ("{fact: metadata.owner, matches: '(a{1,2})+$'}", "can backtrack exponentially"),
        ("{fact: metadata.owner, matches: '.*.*.*x'}", "3 unbounded quantifiers"),
        ("{fact: cluster.gpus, matches: '^6'}", "matches needs a str fact; cluster.gpus is int"),
        ("{fact: metadata.owner, matches: 7}", "matches takes a regular expression"),
        ("{fact: metadata.labels.a.b, equals: x}", "unknown fact 'metadata.labels.a.b'"),
        ("{fact: metadata.ownr, exists: true}", "(did you mean 'metadata.owner'?)"),
    ],
)
def test_bad_patterns_are_positioned_policy_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], leaf: str, message: str
) -> None:
    path = write_rule(tmp_path, leaf)
    assert main(["lint-policies", path]) == 2
    out = capsys.readouterr().out
    assert f"{path}:8:" in out  # the line of the condition
    assert message in out


def test_the_guard_keeps_accepted_patterns_fast() -> None:
    # the worst shapes the guard accepts, on the longest value the schema allows
    for source in (r".*.*x", r"^(ab|cd)[a-z]*[0-9]*$", r"\w*\s*x", r"(ab)+$", r"^[a-z]+(-[a-z])*$"):
        pattern = compile_pattern(source)
        start = time.perf_counter()
        pattern.search("a" * 256)
        assert time.perf_counter() - start < 0.5, source
    with pytest.raises(PatternProblem, match="at most 256"):
        compile_pattern("a" * 257)


def test_explain_and_facts_show_them(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "--policy", team, "ACME002"]) == 0
    out = capsys.readouterr().out
    assert "fact: metadata.labels.cost-centre" in out
    assert "matches: '^cc-[0-9]+$'" in out
    assert main(["facts"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^metadata\.owner +str ", out, re.M)
    assert re.search(r"^metadata\.labels\.<key> +str ", out, re.M)
