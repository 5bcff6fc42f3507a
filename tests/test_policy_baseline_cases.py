"""A team's rule on the change itself (change.* facts, judged by review --baseline and diff) is
tested like any other rule: a policy test case names the manifest as it was (`baseline:`), is
judged as a modified file, and counts for --require-coverage."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team-cost, version: 1.0.0}
rules:
  - id: COST001
    kind: advise
    title: A change that adds more than 10% GPU-hours needs sign-off
    when:
      all:
        - {fact: change.status, in: [modified, renamed]}
        - {fact: change.gpu_hours_delta_fraction, gt: 0.10}
    message: >-
      this change adds {{ change.gpu_hours_delta_fraction | pct }} GPU-hours
    docs: Budget owners sign off on large increases.
"""

CASES = """\
apiVersion: dpguard/v1
kind: PolicyTest
cases:
  - name: doubling the token budget doubles the GPU-hours
    manifest: {path}
    patch: {{training: {{tokens: 2T}}}}
    baseline: {path}
    expect: {{fired: [COST001], message: 'adds 100\\.0% GPU-hours', severity: warning}}
  - name: a change that costs nothing more
    manifest: {path}
    patch: {{metadata: {{description: reworded}}}}
    baseline: {path}
    expect: {{not_fired: [COST001]}}
  - name: a plain case judges no rule on the change
    manifest: {path}
    patch: {{training: {{tokens: 2T}}}}
    expect: {{not_fired: [COST001]}}
  - name: the baseline patched instead
    manifest: {path}
    baseline: {path}
    baseline_patch: {{training: {{tokens: 500B}}}}
    expect: {{fired: [COST001]}}
"""


def write(tmp_path: Path, cases: str = CASES) -> tuple[str, str]:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    tests = tmp_path / "team-tests.yaml"
    run = EXAMPLES / "small-dense.yaml"
    tests.write_text(cases.replace("{path}", str(run)).format(), encoding="utf-8")
    return str(team), str(tests)


def test_baseline_cases_judge_rules_on_the_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team, tests = write(tmp_path)
    code = main(["test", tests, "--policy", team, "--coverage-of", "team-cost"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "4 passed, 0 failed" in out


PLAIN = """\
apiVersion: dpguard/v1
kind: PolicyTest
cases:
  - name: without a baseline no rule on the change is judged
    manifest: {path}
    patch: {{training: {{tokens: 2T}}}}
    expect: {{not_fired: [COST001]}}
"""


def test_a_rule_on_the_change_without_a_baseline_case_is_uncovered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team, tests = write(tmp_path, PLAIN)
    code = main(["test", tests, "--policy", team, "--coverage-of", "team-cost"])
    captured = capsys.readouterr()
    assert code == 1
    assert "COST001" in captured.out + captured.err


def test_an_invalid_baseline_fails_the_case_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = CASES.replace(
        "baseline_patch: {{training: {{tokens: 500B}}}}",
        "baseline_patch: {{training: {{micro_batch_size: 0}}}}",
    )
    team, tests = write(tmp_path, broken)
    code = main(["test", tests, "--policy", team])
    out = capsys.readouterr().out
    assert code == 1
    assert "the baseline is not a valid manifest: S004" in out


def test_lint_says_which_rules_are_judged_only_on_a_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team, _ = write(tmp_path)
    odd = tmp_path / "odd.yaml"
    odd.write_text(
        TEAM.replace("team-cost", "odd")
        .replace("COST001", "ODD001")
        .replace(
            "      all:\n        - {fact: change.status, in: [modified, renamed]}\n"
            "        - {fact: change.gpu_hours_delta_fraction, gt: 0.10}\n",
            "      {fact: cluster.gpus, gt: 100000}\n",
        ),
        encoding="utf-8",
    )
    assert main(["lint-policies", team, str(odd)]) == 0
    out = capsys.readouterr().out
    assert "note COST001 (team-cost) tests change.* facts: judged only by review --baseline" in out
    assert "warning ODD001 (odd): its message uses change.gpu_hours_delta_fraction" in out
