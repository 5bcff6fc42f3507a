"""Per-file .dpguard.yaml discovery: the nearest config above each manifest, up to the repository
root and never above it; `--config PATH`; the report names the config that judged each file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dpguard.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

RULE = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {{name: {name}, version: 1.0.0}}
rules:
  - id: {id}
    kind: {kind}
    title: {name} rule
    when: {{fact: cluster.gpus, gt: 1}}
    message: {name} judged {{{{ cluster.gpus }}}} GPUs
    docs: a team's policy
"""


def team(directory: Path, name: str, rule_id: str, kind: str = "reject", extra: str = "") -> None:
    """A .dpguard.yaml in `directory` that layers one rule firing on every manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(
        RULE.format(name=name, id=rule_id, kind=kind), encoding="utf-8"
    )
    (directory / ".dpguard.yaml").write_text(f"policies: [{name}.yaml]\n{extra}", encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """repo/ (a git repository) with runs/x.yaml under the root config and teamb/y.yaml under
    its own."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "runs").mkdir()
    shutil.copy(EXAMPLES / "small-dense.yaml", root / "runs" / "x.yaml")
    team(root, "root", "ROOT001")
    team(root / "teamb", "teamb", "TEAMB001", kind="advise")
    shutil.copy(EXAMPLES / "small-dense.yaml", root / "teamb" / "y.yaml")
    return root


def test_config_found_from_the_file_not_the_working_directory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["review", str(repo / "runs" / "x.yaml")]) == 1
    out = capsys.readouterr().out
    assert "error ROOT001 root judged 64 GPUs" in out
    assert f"[config {repo / '.dpguard.yaml'}]" in out


def test_each_file_is_judged_by_its_nearest_config(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    assert main(["review", "teamb/y.yaml"]) == 0  # teamb's advisory, not the root's reject
    out = capsys.readouterr().out
    assert "warning TEAMB001 teamb judged 64 GPUs" in out
    assert "ROOT001" not in out
    policy_line = out.splitlines()[-2]
    assert policy_line.startswith("policies: dpguard-core ")
    assert ", teamb 1.0.0 (sha256:" in policy_line
    assert policy_line.endswith(") [config teamb/.dpguard.yaml]")

    assert main(["review", "runs/x.yaml", "teamb/y.yaml"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("runs/x.yaml:") and "ROOT001" in line for line in lines)
    assert any(line.startswith("teamb/y.yaml:") and "TEAMB001" in line for line in lines)
    assert not any(line.startswith("teamb/y.yaml:") and "ROOT001" in line for line in lines)
    policy_lines = [line for line in lines if line.startswith("policies: ")]
    assert len(policy_lines) == 2
    assert policy_lines[0].endswith("[config .dpguard.yaml: runs/x.yaml]")
    assert ", root 1.0.0 (" in policy_lines[0] and "teamb" not in policy_lines[0]
    assert policy_lines[1].endswith("[config teamb/.dpguard.yaml: teamb/y.yaml]")
    assert lines[-1] == "2 manifests checked: 1 passed, 1 failed (1 error, 1 warning)"


def test_json_names_each_files_config_and_policies(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from jsonschema import Draft202012Validator

    from dpguard import resources

    monkeypatch.chdir(repo / "teamb")
    assert main(["review", "--format", "json", "../runs/x.yaml", "y.yaml"]) == 1
    data = json.loads(capsys.readouterr().out)
    Draft202012Validator(resources.schema("report.schema.json")).validate(data)
    files = {f["path"]: f for f in data["files"]}
    # outside the current directory the path stays absolute; under it, relative
    assert files["../runs/x.yaml"]["config"] == str(repo / ".dpguard.yaml")
    assert files["y.yaml"]["config"] == ".dpguard.yaml"
    assert [s["name"] for s in files["../runs/x.yaml"]["policies"]][-1] == "root"
    assert [s["name"] for s in files["y.yaml"]["policies"]][-1] == "teamb"
    assert (files["../runs/x.yaml"]["valid"], files["y.yaml"]["valid"]) == (False, True)


def test_each_config_keeps_its_own_fail_on(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    team(repo / "teamb", "teamb", "TEAMB001", kind="advise", extra="fail_on: warning\n")
    team(repo / "teamc", "teamc", "TEAMC001", kind="advise")
    shutil.copy(EXAMPLES / "small-dense.yaml", repo / "teamc" / "z.yaml")
    monkeypatch.chdir(repo)
    assert main(["review", "teamc/z.yaml"]) == 0
    assert main(["review", "teamc/z.yaml", "teamb/y.yaml"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "2 manifests checked: 1 passed, 1 failed (0 errors, 2 warnings)"
    # --fail-on on the command line wins over every config
    assert main(["review", "--fail-on", "error", "teamc/z.yaml", "teamb/y.yaml"]) == 0


def test_config_pins_one_file_for_every_manifest(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    assert main(["review", "--config", "teamb/.dpguard.yaml", "runs/x.yaml"]) == 0
    out = capsys.readouterr().out
    assert "TEAMB001" in out and "ROOT001" not in out
    assert out.splitlines()[-2].endswith("[config teamb/.dpguard.yaml]")
    assert main(["rules", "--config", "teamb/.dpguard.yaml"]) == 0
    out = capsys.readouterr().out
    assert "TEAMB001" in out and "ROOT001" not in out
    assert main(["review", "--config", "nowhere.yaml", "runs/x.yaml"]) == 2
    assert capsys.readouterr().err == (
        "dpguard: error: nowhere.yaml: no such config file (--config)\n"
    )


def test_plan_uses_the_files_config(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Disabling DT004 sends the 64-GPU run to DT003 (Zero Bubble): seen from anywhere.
    (repo / "teamb" / ".dpguard.yaml").write_text("disable: [DT004]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--format", "json", str(repo / "teamb" / "y.yaml")]) == 0
    assert json.loads(capsys.readouterr().out)["schedule"] == "zb1p"
    (repo / ".dpguard.yaml").unlink()
    assert main(["plan", "--format", "json", str(repo / "runs" / "x.yaml")]) == 0
    assert json.loads(capsys.readouterr().out)["schedule"] == "1f1b"


def test_a_broken_discovered_config_is_exit_2_with_its_position(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "teamb" / ".dpguard.yaml").write_text("policies: [teamb.yaml]\nfail_on: sometimes\n")
    monkeypatch.chdir(repo)
    assert main(["review", "runs/x.yaml"]) == 1  # teamb's config judges nothing here
    capsys.readouterr()
    assert main(["review", "runs/x.yaml", "teamb/y.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing is reported before every config loaded
    assert f"{repo / 'teamb' / '.dpguard.yaml'}:2:1: fail_on is 'sometimes'" in err
    (repo / "teamb" / ".dpguard.yaml").write_text("policies: [teamb.yaml\n")
    assert main(["review", "teamb/y.yaml"]) == 2
    assert f"{repo / 'teamb' / '.dpguard.yaml'}:2:1: " in capsys.readouterr().err


def test_a_config_above_the_repository_root_is_never_read(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".dpguard.yaml").write_text("fail_on: sometimes\n", encoding="utf-8")  # broken
    (repo / ".dpguard.yaml").unlink()
    monkeypatch.chdir(repo / "runs")
    assert main(["review", "x.yaml"]) == 0
    out = capsys.readouterr().out
    assert "[config" not in out  # judged by the shipped sets alone
    assert main(["review", "--format", "json", "x.yaml"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["config"] is None
    assert main(["rules"]) == 0  # commands without files stop at the root too
    capsys.readouterr()


def test_waivers_belong_to_their_config(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    waived = RULE.format(name="teamb", id="TEAMB001", kind="advise")
    (repo / "teamb" / "teamb.yaml").write_text(
        waived.replace("    docs:", "    waivable: true\n    docs:"), encoding="utf-8"
    )
    (repo / "teamb" / "waivers.yaml").write_text(
        "apiVersion: dpguard/v1\nkind: Waivers\nwaivers:\n"
        "  - {rule: TEAMB001, match: 'y.yaml', reason: known, owner: teamb, "
        "expires: '2026-01-31'}\n",
        encoding="utf-8",
    )
    (repo / "teamb" / ".dpguard.yaml").write_text(
        "policies: [teamb.yaml]\nwaivers: waivers.yaml\nfail_on: warning\n", encoding="utf-8"
    )
    monkeypatch.chdir(repo)
    assert main(["review", "--date", "2026-01-15", "teamb/y.yaml"]) == 0
    out, err = capsys.readouterr()
    assert "warning TEAMB001 teamb judged 64 GPUs (waived)" in out
    assert err == ""
