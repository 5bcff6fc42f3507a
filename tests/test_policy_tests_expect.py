"""`dpguard test`: coverage scoped to one set (`--coverage-of`), expectations on the fired
findings (`message`, `severity`, `waived`) and on the plan (`P`, `M`, `T`, `EP`, `schedule`),
and a "did you mean" for every unknown name in a test file."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest

from dpguard.cli import main

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team, version: 1.0.0}
rules:
  - id: TEAM001
    kind: advise
    title: big A100 runs book capacity
    when:
      all:
        - {fact: cluster.accelerator, equals: A100-80GB}
        - {fact: cluster.gpus, ge: 64}
    message: "{{ cluster.gpus }} A100s: book the capacity review"
    docs: capacity planning.
"""

BASE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: base}
cluster:
  gpus: 64
  gpus_per_node: 8
  accelerator: A100-80GB
  interconnect: {inter_node_gbps_per_gpu: 400}
model:
  architecture: dense
  total_params: 69B
  layers: 80
  hidden_size: 8192
  attention_heads: 64
  seq_len: 4096
  vocab_size: 32000
training: {tokens: 1T, global_batch_size: 1024, micro_batch_size: 1}
"""

CASES = """\
apiVersion: dpguard/v1
kind: PolicyTest
cases:
  - name: 64 A100s fire
    manifest: ../base.yaml
    expect:
      fired: [TEAM001]
      message: '^64 A100s: book'
      severity: warning
      waived: false
      plan: {P: 4, M: 256, T: 4, EP: 1, schedule: 1f1b}
  - name: the waiver covers runs/
    manifest: ../runs/big.yaml
    expect: {fired: [TEAM001], waived: true, severity: warning}
  - name: 32 stay silent
    manifest: ../base.yaml
    patch: {cluster: {gpus: 32}}
    expect: {not_fired: [TEAM001]}
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A training-config repository: a team set and its waivers in .dpguard.yaml, a manifest
    at the root and one under runs/ (which the waiver matches), and the team's cases."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "team.yaml").write_text(TEAM, encoding="utf-8")
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "big.yaml").write_text(BASE, encoding="utf-8")
    expires = (dt.date.today() + dt.timedelta(days=10)).isoformat()
    (tmp_path / "waivers.yaml").write_text(
        "apiVersion: dpguard/v1\nkind: Waivers\nwaivers:\n"
        "  - {rule: TEAM001, match: runs/*.yaml, reason: capacity booked, owner: platform, "
        f"expires: '{expires}'}}\n",
        encoding="utf-8",
    )
    (tmp_path / ".dpguard.yaml").write_text(
        "policies: [team.yaml]\nwaivers: waivers.yaml\n", encoding="utf-8"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "cases.yaml").write_text(CASES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(["test", *argv])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_expectations_on_findings_and_plan_pass(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "tests/cases.yaml") == (0, ["3 passed, 0 failed"], "")


def test_every_unmet_expectation_is_reported(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "tests" / "cases.yaml").write_text(
        CASES.replace("'^64 A100s: book'", "'A100 GPUs'")
        .replace("severity: warning\n      waived: false", "severity: error\n      waived: true")
        .replace(
            "{P: 4, M: 256, T: 4, EP: 1, schedule: 1f1b}", "{P: 2, M: 256, T: 8, schedule: zb1p}"
        )
        .replace(
            "{fired: [TEAM001], waived: true, severity: warning}",
            "{fired: [TEAM001], waived: false}",
        ),
        encoding="utf-8",
    )
    code, out, _err = run(capsys, "tests/cases.yaml")
    assert code == 1
    assert out == [
        "tests/cases.yaml:4:5: case 64 A100s fire: "
        "expected TEAM001 message matching 'A100 GPUs', got '64 A100s: book the capacity review'; "
        "expected TEAM001 severity error, got warning; "
        "expected TEAM001 waived, got not waived; "
        "expected plan P 2, got 4; expected plan T 8, got 4; expected plan schedule zb1p, got 1f1b",
        "tests/cases.yaml:12:5: case the waiver covers runs/: "
        "expected TEAM001 not waived, got waived",
        "1 passed, 2 failed",
    ]


def test_an_infeasible_plan_fails_plan_expectations_with_the_reason(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "tests" / "cases.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: dpguard/v1
            kind: PolicyTest
            cases:
              - name: 99 GPUs share no factor with the batch
                manifest: ../base.yaml
                patch: {cluster: {gpus: 99, gpus_per_node: 1}}
                expect: {plan: {P: 3}}
            """
        ),
        encoding="utf-8",
    )
    code, out, _err = run(capsys, "tests/cases.yaml")
    assert code == 1
    assert out[0].startswith(
        "tests/cases.yaml:4:5: case 99 GPUs share no factor with the batch: "
        "expected plan P 3, got no feasible plan (1f1b was not possible"
    )


def test_coverage_of_scopes_coverage_to_one_set(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Unscoped, every shipped rule the team's cases do not exercise is a gap...
    code, out, _err = run(capsys, "tests/cases.yaml", "--require-coverage")
    assert code == 1
    assert "coverage: HR003: no case in which it fires" in out
    assert not any("TEAM001" in line for line in out)
    # ...scoped to the team's set, only its own rules count (by name or by file).
    assert run(capsys, "tests/cases.yaml", "--coverage-of", "team") == (
        0,
        ["3 passed, 0 failed"],
        "",
    )
    assert run(capsys, "tests/cases.yaml", "--coverage-of", "team.yaml")[0] == 0
    # and a gap in the team's own rules still fails, alone
    (repo / "tests" / "cases.yaml").write_text(
        CASES.split("  - name: 32 stay silent")[0], encoding="utf-8"
    )
    code, out, _err = run(capsys, "tests/cases.yaml", "--coverage-of", "team")
    assert (code, out) == (
        1,
        ["coverage: TEAM001: no case in which it stays silent", "2 passed, 0 failed"],
    )


def test_coverage_of_an_unknown_set_is_a_usage_error_with_a_hint(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "tests/cases.yaml", "--coverage-of", "teem")
    assert (code, out) == (2, [])
    assert err == (
        "dpguard: error: --coverage-of teem: no loaded policy set has that name or path "
        "(did you mean 'team'?); loaded: dpguard-core, dpguard-planner, team\n"
    )


def test_unknown_names_are_a_broken_file_listed_in_position_order(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "tests" / "broken.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: dpguard/v1
            kind: PolicyTest
            manifests:
              dense: {apiVersion: dpguard/v1}
            cases:
              - name: misspelled base
                manifest: dens
                expect: {fired: [TEAM01]}
              - name: a decision row makes no finding
                manifest: dense
                expect: {fired: [DT004], message: x, plan: {schedule: dualpipe-v}}
              - name: a pattern that could backtrack
                manifest: dense
                expect: {fired: [TEAM001], message: '(a+)+', schedule: ZB1P}
              - name: severity of nothing
                manifest: dense
                expect: {severity: info}
            """
        ),
        encoding="utf-8",
    )
    code, out, err = run(capsys, "tests/broken.yaml")
    assert (code, out) == (2, [])
    f = "tests/broken.yaml"
    assert err.splitlines() == [
        "dpguard: error: broken policy test file:",
        f"  {f}:7:5: manifest dens is neither a name in manifests: (did you mean 'dense'?) nor a "
        "file (relative to the test file); names: dense",
        f"  {f}:8:22: unknown rule TEAM01 in fired (did you mean 'TEAM001'?)",
        f"  {f}:11:30: message tests the findings of the rules in fired, and fired names no rule "
        "that makes findings (a decision row makes none)",
        f"  {f}:11:49: 'dualpipe-v' is not a schedule (did you mean 'dualpipev'?); possible: "
        "gpipe, 1f1b, interleaved-1f1b, zb1p, dualpipe, dualpipev, none",
        f"  {f}:14:32: message pattern: a quantifier over a group that holds another quantifier "
        "or an alternation can backtrack exponentially; rewrite it without the nesting",
        f"  {f}:14:50: 'ZB1P' is not a schedule (did you mean 'zb1p'?); possible: "
        "gpipe, 1f1b, interleaved-1f1b, zb1p, dualpipe, dualpipev, none",
        f"  {f}:17:14: severity tests the findings of the rules in fired, and fired names no "
        "rule that makes findings (a decision row makes none)",
    ]


def test_plan_keys_are_schema_checked(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "tests" / "cases.yaml").write_text(
        CASES.replace("{P: 4, M: 256,", "{p: 4, M: 0,"), encoding="utf-8"
    )
    assert run(capsys, "tests/cases.yaml") == (
        2,
        [],
        "dpguard: error: broken policy test file:\n"
        "  tests/cases.yaml:11:14: unknown key 'p' in cases[0].expect.plan (did you mean 'P'?)\n"
        "  tests/cases.yaml:11:20: cases[0].expect.plan.M is 0; it must be at least 1\n",
    )


def test_the_documented_team_set_and_cases_pass_with_their_own_coverage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/policies.md's example set and test file, laid out as the test file's paths say."""
    import re

    docs = (Path(__file__).resolve().parent.parent / "docs" / "policies.md").read_text("utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", docs, re.S)
    policy = next(b for b in blocks if "kind: PolicySet" in b)
    cases = next(b for b in blocks if "kind: PolicyTest" in b)
    (tmp_path / ".git").mkdir()
    (tmp_path / "acme.yaml").write_text(policy, encoding="utf-8")
    (tmp_path / "policies" / "tests").mkdir(parents=True)
    (tmp_path / "policies" / "tests" / "cases.yaml").write_text(cases, encoding="utf-8")
    (tmp_path / "runs").mkdir()
    examples = Path(__file__).resolve().parent.parent / "examples"
    (tmp_path / "runs" / "small.yaml").write_bytes((examples / "small-dense.yaml").read_bytes())
    monkeypatch.chdir(tmp_path)
    argv = ("policies/tests/cases.yaml", "--policy", "acme.yaml", "--coverage-of", "acme-training")
    assert run(capsys, *argv) == (0, ["7 passed, 0 failed"], "")
