""".dpguard.yaml: discovery and policy layering (add, override, disable) in review."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dpguard.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {{name: team, version: 1.2.3}}
rules:
  - id: {id}
    kind: advise
    title: team rule
{extra}    when: {{fact: cluster.gpus, gt: 1}}
    message: team says {{{{ cluster.gpus }}}} GPUs
    docs: team policy
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    shutil.copy(EXAMPLES / "small-dense.yaml", tmp_path / "m.yaml")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    return tmp_path


def setup(repo: Path, rule_id: str, extra: str = "", disable: str = "") -> None:
    (repo / "team.yaml").write_text(TEAM.format(id=rule_id, extra=extra), encoding="utf-8")
    config = "policies: [team.yaml]\n" + (f"disable: [{disable}]\n" if disable else "")
    (repo / ".dpguard.yaml").write_text(config, encoding="utf-8")


def test_extra_set_adds_a_rule_and_is_reported(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup(repo, "TEAM001")
    assert main(["review", "../m.yaml"]) == 0
    out = capsys.readouterr().out
    assert "warning TEAM001 team says 64 GPUs" in out
    assert "dpguard-core 0.1.0 (sha256:" in out
    assert ", team 1.2.3 (sha256:" in out


def test_override_needs_override_true(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup(repo, "ADV002")
    assert main(["review", "../m.yaml"]) == 2
    err = capsys.readouterr().err
    assert f"{repo / 'team.yaml'}:5:5: rule ADV002 is already defined by dpguard-core" in err
    assert "set override: true to replace it" in err


def test_override_replaces_in_place(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup(repo, "ADV002", extra="    override: true\n")
    assert main(["rules"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids = [line.split()[0] for line in lines]
    assert ids.index("ADV002") == ids.index("ADV001") + 1
    assert lines[ids.index("ADV002")].endswith("team rule  [team@1.2.3]")


def test_disable_removes(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup(repo, "TEAM001", disable="TEAM001")
    assert main(["review", "../m.yaml"]) == 0
    assert "TEAM001" not in capsys.readouterr().out


def test_config_schema_error_is_positioned(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".dpguard.yaml").write_text("fail_on: sometimes\n", encoding="utf-8")
    assert main(["review", "../m.yaml"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{repo / '.dpguard.yaml'}:1:1: fail_on is 'sometimes'; allowed: error, warning, never"
        in err
    )


@pytest.mark.parametrize("command", ["plan", "review", "rules"])
def test_every_judging_command_sees_the_repository_stack(
    repo: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # Disabling DT004 (1F1B under 100 GPUs) sends the 64-GPU run to DT003 (Zero Bubble) in
    # `plan` exactly as in `review`: one layered stack for every command.
    setup(repo, "TM001", disable="DT004")
    args = {"plan": ["plan", "../m.yaml"], "review": ["review", "../m.yaml"], "rules": ["rules"]}
    assert main(args[command]) == 0
    out = capsys.readouterr().out
    assert "TM001" in out if command == "rules" else "DT003" in out
    assert "DT004" not in out
