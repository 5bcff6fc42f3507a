"""A framework config that a manifest of its repository sources is judged as that manifest:
reviewing the config alone (what the hook does on a commit that changes only the config)
judges the manifest, reports at the config's lines, and gives one verdict however many of the
files are passed. A config no manifest sources is judged alone, with the F003 guidance."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dpguard.cli import main

FIXTURES = Path(__file__).resolve().parent / "data" / "frameworks"
RUN = """apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: run}
source: {path: ../configs/pretrain.sh}
cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "jobs").mkdir()
    (tmp_path / "configs").mkdir()
    shutil.copy(FIXTURES / "megatron_llama3_70b.sh", tmp_path / "configs" / "pretrain.sh")
    (tmp_path / "jobs" / "run.yaml").write_text(RUN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def review(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["review", "--format", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_a_sourced_config_is_judged_as_its_manifest(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = review(capsys, "configs/pretrain.sh")
    assert code == 0
    assert [f["path"] for f in report["files"]] == ["jobs/run.yaml"]
    assert not any(x["code"] == "F003" for f in report["files"] for x in f["findings"])


def test_one_verdict_however_many_of_its_files_are_passed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = review(capsys, "configs/pretrain.sh", "jobs/run.yaml", "configs/pretrain.sh")
    assert code == 0
    assert [f["path"] for f in report["files"]] == ["jobs/run.yaml"]


def test_a_defect_in_the_config_alone_fails_at_the_config_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = repo / "configs" / "pretrain.sh"
    text = script.read_text(encoding="utf-8")
    assert "TP=${TP:-4}" in text
    script.write_text(text.replace("TP=${TP:-4}", "TP=${TP:-3}"), encoding="utf-8")
    code = main(["review", "-q", "configs/pretrain.sh"])
    out = capsys.readouterr().out
    assert code == 1
    assert "configs/pretrain.sh:9:10: error X010 attention_heads (64) is not divisible" in out


def test_a_config_no_manifest_sources_is_judged_alone(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(FIXTURES / "megatron_llama3_8b_fp8.sh", repo / "configs" / "alone.sh")
    code, report = review(capsys, "configs/alone.sh")
    assert code == 1
    [entry] = report["files"]
    assert entry["path"] == "configs/alone.sh"
    assert "F003" in {x["code"] for x in entry["findings"]}  # the guidance: add the facts


def test_the_hook_passes_a_commit_that_changes_only_the_config(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["review", "--only-manifests", "--quiet", "configs/pretrain.sh"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[-1].startswith("1 manifest checked: 1 passed")


def test_a_change_to_the_config_alone_prices_its_manifest(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """review --baseline on a commit that changes only the script compares the manifest that
    sources it, each version with its own script."""
    import subprocess

    (repo / ".git").rmdir()
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    script = repo / "configs" / "pretrain.sh"
    script.write_text(
        script.read_text(encoding="utf-8").replace("TP=${TP:-4}", "TP=${TP:-8}"), encoding="utf-8"
    )
    code = main(["review", "--baseline", "HEAD", "--format", "json", "configs/pretrain.sh"])
    [change] = json.loads(capsys.readouterr().out)["changes"]
    assert code == 0
    assert (change["path"], change["status"]) == ("jobs/run.yaml", "modified")
    assert (change["before"]["tensor"], change["after"]["tensor"]) == (4, 8)
