"""Per-schedule facts (`schedules.<name>.*`): the exact numbers at the proposal's P and M,
computed only when a loaded rule reads them, and refused where they cannot be set yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.policy.load import load_policies
from dpguard.schedules import OpTimes, simulate

REPO = Path(__file__).resolve().parents[1]

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {{name: team, version: 1.0.0}}
rules:
  - id: TM001
    kind: {kind}
    title: per-schedule facts
    when: {{fact: schedules.zb1p.bubble, lt: 0.05}}
    recommend: {{schedule: zb1p}}
    message: >-
      zb1p {{{{ schedules.zb1p.bubble | pct }}}} with {{{{ '%.1f' |
      format(schedules.zb1p.stage_memory_gb) }}}} GiB per GPU
    docs: team rule
"""


def team(tmp_path: Path, kind: str = "advise") -> str:
    text = TEAM.format(kind=kind)
    if kind == "advise":
        text = text.replace("    recommend: {schedule: zb1p}\n", "")
    path = tmp_path / "team.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_values_are_the_simulated_ones_at_the_proposal(tmp_path: Path) -> None:
    policies = load_policies([team(tmp_path)])
    result = check_file(str(REPO / "examples" / "frontier-moe.yaml"), None, policies)
    assert result.outcome is not None
    facts = result.outcome.facts
    # frontier-moe proposes P=16 and M=120; the planner's ratios are F=1, B=2, W=1, F&B=3.
    expected = simulate("zb1p", 16, 120, OpTimes(1, 2, 1, 3))
    assert facts["schedules.zb1p.bubble"] == float(expected.bubble_fraction) == 15 / 375
    assert facts["schedules.dualpipe.bubble"] == facts["proposal.bubble"]
    # ZB-H1's later ranks defer up to P - 1 weight passes, each keeping the GEMM inputs and
    # output gradients of a stage of DeepSeek-V3's layers (eight routed copies per token)
    assert facts["schedules.zb1p.stage_fits"] is False
    assert facts["schedules.zb1p.stage_memory_gb"] > facts["proposal.stage_memory_gb"]
    # interleaved 1F1B needs v >= 2 and the proposal has v = 1: it cannot run, so unset.
    assert facts["schedules.interleaved-1f1b.bubble"] is None
    finding = next(f for f in result.findings if f.code == "TM001")
    assert finding.message.startswith("zb1p 4.0% with ")


def test_not_computed_when_no_rule_reads_them() -> None:
    policies = load_policies()
    assert not any(f.startswith("schedules.") for f in policies.uses)
    result = check_file(str(REPO / "examples" / "frontier-moe.yaml"), None, policies)
    assert result.outcome is not None
    assert not any(k.startswith("schedules.") for k in result.outcome.facts)


@pytest.mark.parametrize("kind", ["decision", "refuse"])
def test_early_rules_cannot_read_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = team(tmp_path, kind)
    if kind == "refuse":
        path_text = (
            Path(path)
            .read_text()
            .replace(
                "    docs: team rule\n",
                "    refuses: [dualpipe]\n    precedence: 1\n    docs: team rule\n",
            )
        )
        Path(path).write_text(path_text)
    assert main(["lint-policies", path]) == 2
    out = capsys.readouterr().out
    assert (
        "team.yaml:8:12: fact 'schedules.zb1p.bubble' is only known after the decision table "
        "and refusals have run, so this rule would never see it set; test it in a reject or "
        "advise rule"
    ) in out
