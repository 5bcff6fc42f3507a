"""`dpguard lint-policies`, `rules`, `explain` and `facts`, run in-process through `main`."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dpguard.cli import main
from dpguard.policy.facts import FACTS
from dpguard.policy.load import shipped_paths

SEVERITY = {"decision": "info", "reject": "error", "advise": "warning", "refuse": "error|info"}


@pytest.fixture(autouse=True)
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh repository as the working directory: no stray .dpguard.yaml."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def shipped_sets() -> list[tuple[Path, dict[str, Any]]]:
    """The shipped policy files, read here with PyYAML rather than dpguard's loader."""
    return [(Path(p), yaml.safe_load(Path(p).read_text(encoding="utf-8"))) for p in shipped_paths()]


def shipped_rules() -> list[dict[str, Any]]:
    return [
        {**r, "set": data["metadata"]["name"], "version": data["metadata"]["version"]}
        for _, data in shipped_sets()
        for r in data["rules"]
    ]


# ---- lint-policies ------------------------------------------------------------------------------


def test_lint_shipped_policies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-policies"]) == 0
    sets, rules = len(shipped_sets()), len(shipped_rules())
    assert (sets, rules) == (2, 41)
    assert capsys.readouterr().out == f"{sets} policy sets, {rules} rules: ok\n"


def test_lint_a_shipped_file_by_path_loads_it_once(capsys: pytest.CaptureFixture[str]) -> None:
    """Naming a shipped set (or any file twice) must not layer it over itself."""
    core = shipped_paths()[0]
    assert main(["lint-policies", core, core]) == 0
    assert capsys.readouterr().out == "2 policy sets, 41 rules: ok\n"


TEAM_HEAD = "apiVersion: dpguard/v1\nkind: PolicySet\nmetadata: {name: team, version: 1.0.0}\n"


def advise(rule_id: str, when: str, message: str = "m") -> str:
    return (
        f"  - id: {rule_id}\n    kind: advise\n    title: t\n    when: {when}\n"
        f"    message: {message}\n    docs: d\n"
    )


OPERATORS = "equals, not_equals, lt, le, gt, ge, in, not_in, divisible_by, matches, exists"
SCHEDULES = "gpipe, 1f1b, interleaved-1f1b, zb1p, dualpipe, dualpipev"


def test_lint_lists_every_schema_problem_of_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        TEAM_HEAD
        + "rules:\n"
        + advise("TEAM001", "{fact: cluster.gpus, gt: 1}").replace("    message: m\n", ""),
        encoding="utf-8",
    )
    other = tmp_path / "other.yaml"
    other.write_text(TEAM_HEAD.replace("team", "other") + "rulez: []\n", encoding="utf-8")
    assert main(["lint-policies", str(broken), str(other)]) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"{broken}:5:5: rules[0] is missing the required key 'message'",
        # file by file in layering order, by position in each (tests/test_policy_errors_sorted.py)
        f"{other}:1:1: (top level) is missing the required key 'rules'",
        f"{other}:4:1: unknown key 'rulez' in (top level) (did you mean 'rules'?)",
    ]


def test_lint_lists_every_semantic_problem_of_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        TEAM_HEAD
        + "rules:\n"
        + advise("TEAM001", "{fact: cluster.gpus, gte: 1}")
        + advise("TEAM002", "{fact: parallelism.schedule, equals: dualpipe-v}")
        + advise("TEAM003", "{fact: cluster.gpus, gt: 1}", "'{{ model.layer }}'")
        + advise("TEAM003", "{fact: cluster.gpus, gt: 2}"),
        encoding="utf-8",
    )
    other = tmp_path / "other.yaml"
    other.write_text(
        TEAM_HEAD.replace("team", "other") + "settings: {disable: [ADV006]}\nrules: []\n",
        encoding="utf-8",
    )
    assert main(["lint-policies", str(broken), str(other)]) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"{broken}:8:32: unknown operator 'gte' (did you mean 'ge'?); operators: {OPERATORS}",
        f"{broken}:14:40: 'dualpipe-v' is not a possible value of parallelism.schedule "
        f"(did you mean 'dualpipev'?); possible: {SCHEDULES}",
        f"{broken}:21:5: message uses unknown fact 'model.layer' (did you mean 'model.layers'?)",
        f"{broken}:23:5: duplicate rule id TEAM003 (first at {broken}:17:5)",
        f"{other}:4:22: disable names unknown rule ADV006 (did you mean 'ADV001'?)",
    ]


def test_lint_without_paths_uses_the_repository_config(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "team.yaml").write_text(TEAM_HEAD + "rules: []\n", encoding="utf-8")
    (repo / ".dpguard.yaml").write_text(
        "policies: [team.yaml]\ndisable: [ADV001, ADV01]\n", encoding="utf-8"
    )
    assert main(["lint-policies"]) == 2
    assert capsys.readouterr().out == (
        f"{repo / '.dpguard.yaml'}:2:19: disable names unknown rule ADV01 "
        "(did you mean 'ADV002'?)\n"
    )
    (repo / ".dpguard.yaml").write_text(
        "policies: [team.yaml]\ndisable: [ADV001]\n", encoding="utf-8"
    )
    assert main(["lint-policies"]) == 0
    # shipped + team + the config's disable list
    assert capsys.readouterr().out == "4 policy sets, 40 rules: ok\n"


# ---- rules --------------------------------------------------------------------------------------

ROW = re.compile(r"^(\S+) +(\S+) +(\S+) +(.+?)  \[(.+)@(.+)\]$")


def test_rules_lists_every_shipped_rule_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    got = [m.groups() for m in map(ROW.match, lines) if m]
    assert len(got) == len(lines)
    expected = [
        (
            r["id"],
            r["kind"],
            r.get("severity", SEVERITY[r["kind"]]),
            " ".join(r["title"].split()),
            r["set"],
            r["version"],
        )
        for r in shipped_rules()
    ]
    assert got == expected
    ids = [g[0] for g in got]
    for rule_id in (
        *("DT001", "DT002", "DT003", "DT004", "RF001", "RF002", "RF003"),
        *(f"HR{n:03d}" for n in range(1, 12)),
        *("ADV001", "ADV002", "ADV003"),
    ):
        assert rule_id in ids


def test_rules_includes_layered_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        TEAM_HEAD
        + "rules:\n  - id: TEAM001\n    kind: reject\n    severity: warning\n"
        + "    title: team rule\n    when: {fact: cluster.gpus, gt: 1}\n"
        + "    message: m\n    docs: d\n",
        encoding="utf-8",
    )
    assert main(["rules", "--policy", str(team)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert ROW.match(last).groups() == (  # type: ignore[union-attr]
        "TEAM001",
        "reject",
        "warning",
        "team rule",
        "team",
        "1.0.0",
    )


# ---- explain ------------------------------------------------------------------------------------


def test_explain_prints_the_rules_docs(capsys: pytest.CaptureFixture[str]) -> None:
    core_path, core = shipped_sets()[0]
    hr003 = next(r for r in core["rules"] if r["id"] == "HR003")
    assert main(["explain", "HR003"]) == 0
    out = capsys.readouterr().out
    digest = hashlib.sha256(core_path.read_bytes()).hexdigest()[:16]
    head = out.split("when:\n")[0].splitlines()
    assert head[:4] == [
        f"HR003: {hr003['title']}",
        "kind: reject (severity error)",
        "waivable: no",
        f"set: dpguard-core {core['metadata']['version']} (sha256:{digest})",
    ]
    assert re.fullmatch(rf"location: {re.escape(str(core_path))}:\d+:5", head[4])
    docs = out.split("docs:\n")[1]
    assert docs == "".join(f"  {line}\n" for line in hr003["docs"].rstrip().splitlines())
    assert "DualPipeV has no such rule" in docs
    assert "  - not: {fact: derived.microbatches, divisible_by: 2}\n" in out


def test_explain_a_refusal_shows_redirect_and_precedence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "RF002"]) == 0
    out = capsys.readouterr().out
    assert "kind: refuse (severity error|info)\n" in out
    assert "recommend: zb1p\nrefuses: dualpipe (precedence 50)\n" in out


def test_explain_a_decision_row_shows_acceptable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "DT003"]) == 0
    out = capsys.readouterr().out
    assert "recommend: zb1p\nacceptable: interleaved-1f1b\n" in out
    assert "when:\n  {fact: cluster.gpus, le: 500}\n" in out


def test_explain_unknown_rule_exits_2_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "HR03"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "dpguard: error: unknown rule HR03 (did you mean 'HR003'?)\n"


# ---- facts --------------------------------------------------------------------------------------


def test_facts_lists_every_fact(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facts"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[:-2]] == list(FACTS)
    assert lines[-2].split()[:2] == ["metadata.labels.<key>", "str"]  # one fact per label
    for line, spec in zip(lines[:-2], FACTS.values(), strict=True):
        assert line.split()[1] == spec.type
        assert spec.description in line
        if spec.choices:
            assert line.endswith(f"(one of: {', '.join(spec.choices)})")
    assert lines[-1] == (
        "unset facts: every test is false except `exists: false`; wrap a test in `not` to "
        "count an unset fact as a match"
    )


# ---- test: which policies judge the cases -------------------------------------------------------

TEAM_REJECT = TEAM_HEAD + (
    "rules:\n  - id: TEAM001\n    kind: reject\n    title: no fp8\n"
    "    when: {fact: training.precision, equals: fp8}\n    message: no fp8\n    docs: d\n"
)


def test_test_command_uses_the_repository_policies_for_given_paths(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = Path(__file__).resolve().parent.parent / "examples"
    (repo / "team.yaml").write_text(TEAM_REJECT, encoding="utf-8")
    (repo / ".dpguard.yaml").write_text(
        "policies: [team.yaml]\ndisable: [ADV001]\n", encoding="utf-8"
    )
    (repo / "cases.yaml").write_text(
        "apiVersion: dpguard/v1\nkind: PolicyTest\ncases:\n"
        f"  - name: fp8 is rejected\n    manifest: {examples / 'small-dense.yaml'}\n"
        "    patch: {training: {precision: fp8}}\n    expect: {fired: [TEAM001]}\n",
        encoding="utf-8",
    )
    assert main(["test", "cases.yaml"]) == 0
    assert capsys.readouterr().out == "1 passed, 0 failed\n"
    # The shipped cases are judged by the shipped sets: the repository's disable of ADV001
    # (whose cases expect it to fire) does not break them.
    assert main(["test"]) == 0
    assert capsys.readouterr().out.endswith(" passed, 0 failed\n")


# ---- docs/policies.md stays complete ------------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "policies.md"
SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def schema_keys(node: Any) -> set[str]:
    """Every property name a policy file may write, at any depth of the schema."""
    keys: set[str] = set()
    if isinstance(node, dict):
        keys |= set(node.get("properties", {}))
        for sub in node.values():
            keys |= schema_keys(sub)
    elif isinstance(node, list):
        for sub in node:
            keys |= schema_keys(sub)
    return keys


def test_policy_docs_name_every_key_fact_and_shipped_rule() -> None:
    import json

    text = DOCS.read_text(encoding="utf-8")
    schema = json.loads((SCHEMAS / "policy.schema.json").read_text(encoding="utf-8"))
    keys = schema_keys(schema)
    assert {"max_waiver_days", "all_to_all_kernels", "scale_up_domain_min", "divisible_by"} <= keys
    assert sorted(k for k in keys if f"`{k}`" not in text) == []
    assert [f for f in FACTS if f"`{f}`" not in text] == []
    assert [r["id"] for r in shipped_rules() if f"| {r['id']} |" not in text] == []
