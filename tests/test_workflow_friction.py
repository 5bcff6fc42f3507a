"""The rough edges a training-config repository hits daily: waivers of sourced configs and of
change rules, the judgement-call checks a team may switch off, findings a standing error used to
hide, paths a CI annotation can match, and the JSON report's file data."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FRAMEWORKS = REPO / "tests" / "data" / "frameworks"
FLAGSCALE = REPO / "policies" / "tests" / "frameworks" / "flagscale"
DATE = ["--date", "2026-11-27"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def waivers(*entries: tuple[str, str]) -> str:
    body = "".join(
        f"  - {{rule: {rule}, match: '{match}', reason: r, owner: o, expires: 2026-12-20}}\n"
        for rule, match in entries
    )
    return f"apiVersion: dpguard/v1\nkind: Waivers\nwaivers:\n{body}"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---- waivers ------------------------------------------------------------------------------------

TITAN_RUN = """\
    apiVersion: dpguard/v1
    kind: TrainingManifest
    metadata: {name: llama3-70b-titan}
    source: {path: ../launch/llama3_70b.toml}
    cluster: {gpus: 256, accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}
    training: {tokens: 2T}
    """


def test_a_waiver_of_the_manifest_covers_findings_at_its_sourced_config(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "launch").mkdir()
    shutil.copy(FRAMEWORKS / "torchtitan_llama3_70b.toml", repo / "launch" / "llama3_70b.toml")
    write(repo / "runs/titan.yaml", TITAN_RUN)
    write(repo / ".dpguard.yaml", "waivers: waivers.yaml\n")
    write(repo / "waivers.yaml", waivers(("ADV001", "runs/*.yaml")))
    _, out, err = run(capsys, "review", "runs/titan.yaml", "launch/llama3_70b.toml", *DATE)
    # the finding stays at the TOML's line (where the value is), waived by the manifest's glob
    assert "launch/llama3_70b.toml:28:27: warning ADV001 M/P = 8/4 = 2.00" in out
    assert "(waived)" in out.split("ADV001", 1)[1].splitlines()[0]
    assert "unused waiver" not in err


COST_POLICY = """\
    apiVersion: dpguard/v1
    kind: PolicySet
    metadata: {name: budget, version: 1.0.0}
    rules:
      - id: COST001
        kind: reject
        waivable: true
        title: A change that adds more than 10% GPU-hours needs a waiver
        when:
          all:
            - {fact: change.status, in: [modified, renamed]}
            - {fact: change.gpu_hours_delta_fraction, gt: 0.10}
        message: "this change adds {{ change.gpu_hours_delta | thousands }} GPU-hours"
        docs: Budget owners sign off on large increases.
    """


def test_waivers_of_change_rules_are_not_unused_in_a_plain_review(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "runs").mkdir()
    shutil.copy(EXAMPLES / "small-dense.yaml", repo / "runs" / "a.yaml")
    write(repo / "policies/budget.yaml", COST_POLICY)
    write(repo / ".dpguard.yaml", "policies: [policies/budget.yaml]\nwaivers: waivers.yaml\n")
    write(repo / "waivers.yaml", waivers(("COST001", "runs/a.yaml"), ("ADV001", "runs/a.yaml")))
    code, _out, err = run(capsys, "review", "runs/a.yaml", *DATE)
    assert code == 0
    # no rule on change.* facts was judged, so its waiver cannot have been used; ADV001's could
    assert "COST001" not in err
    assert err.strip() == "waivers.yaml:5:6: warning unused waiver for ADV001 (match runs/a.yaml)"
    code, _out, err = run(capsys, "review", "runs/a.yaml", "--report-unused-waivers", *DATE)
    assert "COST001" not in err


# ---- judgement-call checks: disable and waive ----------------------------------------------------


def _unusual(repo: Path) -> None:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    # a prime global batch (X027) and a shape that is not 13B (X025)
    text = text.replace("global_batch_size: 1024", "global_batch_size: 1021")
    text = text.replace("total_params: 13B", "total_params: 40B")
    write(repo / "runs/odd.yaml", text)


def test_x_checks_fire_without_configuration(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unusual(repo)
    _, out, _ = run(capsys, "review", "runs/odd.yaml", *DATE)
    assert "warning X025" in out and "warning X027" in out


def test_a_config_disables_a_judgement_call_check(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unusual(repo)
    write(repo / ".dpguard.yaml", "disable: [X025]\n")
    _, out, err = run(capsys, "review", "runs/odd.yaml", *DATE)
    assert err == ""
    assert "X025" not in out and "warning X027" in out


def test_a_waiver_exempts_a_file_from_a_judgement_call_check(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _unusual(repo)
    write(repo / ".dpguard.yaml", "waivers: waivers.yaml\n")
    write(repo / "waivers.yaml", waivers(("X027", "runs/*.yaml")))
    _, out, err = run(capsys, "review", "runs/odd.yaml", "--fail-on", "warning", *DATE)
    line = next(x for x in out.splitlines() if " X027 " in x)
    assert line.endswith("(waived)")
    assert err == ""


@pytest.mark.parametrize("code", ["X001", "S001"])
def test_checks_that_mark_a_broken_manifest_stay(
    repo: Path, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    (repo / "runs").mkdir()
    shutil.copy(EXAMPLES / "small-dense.yaml", repo / "runs" / "a.yaml")
    write(repo / ".dpguard.yaml", f"disable: [{code}]\n")
    status, _out, err = run(capsys, "review", "runs/a.yaml", *DATE)
    assert status == 2
    assert f"disable names unknown rule {code}" in err


# ---- every problem at once ----------------------------------------------------------------------


def test_a_framework_rule_is_reported_while_another_error_stands(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(FLAGSCALE, repo / "fs")
    model = repo / "fs" / "train" / "moe_16b.yaml"
    text = model.read_text(encoding="utf-8")
    model.write_text(text.replace("  num_layers: 24\n", "  num_layers: 24\n  mtp_num_layers: 1\n"))
    code, out, _ = run(capsys, "review", "fs/train_dualpipev.yaml", *DATE)
    assert code == 1
    # the accelerator is missing (F003), and FlagScale's DualPipeV refuses MTP (FW008): both
    assert "error F003 cluster.accelerator is not in train_dualpipev.yaml" in out
    assert "fs/train/moe_16b.yaml:13:19: error FW008" in out
    # a rule that needs what the error leaves unknown waits: no memory or plan verdict
    assert "HR009" not in out and "ADV004" not in out


def test_a_rule_on_a_value_an_error_points_at_is_not_judged(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    # a wrong type for the tensor degree: nothing that reads it is judged
    text = text.replace("  micro_batch_size: 1\n", "  micro_batch_size: 1\n  precison: bf16\n")
    text += "parallelism: {tensor: '8', pipeline: 4}\n"
    write(repo / "runs/a.yaml", text)
    _, out, _ = run(capsys, "review", "runs/a.yaml", *DATE)
    assert "S001" in out and "S003" in out
    assert not any(f" {c}" in out for c in ("HR002", "X010"))


# ---- paths a CI annotation matches; the JSON report ---------------------------------------------


def test_findings_at_dpguard_yaml_defaults_use_the_relative_path(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "launch").mkdir()
    shutil.copy(FRAMEWORKS / "torchtitan_llama3_70b.toml", repo / "launch")
    write(
        repo / ".dpguard.yaml",
        """\
        defaults:
          - files: "*.toml"
            manifest:
              cluster:
                gpus: 256
                accelerator: H100-SXM
                interconnect: {inter_node_gbps_per_gpu: 400}
              training: {tokens: 2T}
        """,
    )
    _, out, _ = run(
        capsys, "review", "launch/torchtitan_llama3_70b.toml", "--format", "github", *DATE
    )
    assert str(repo) not in out
    assert "file=.dpguard.yaml,line=5" in out  # the decision reads cluster.gpus, a default


def test_json_report_keeps_what_was_read_and_every_finding_path(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(FLAGSCALE, repo / "fs")
    _, out, _ = run(capsys, "review", "fs/train_dualpipev.yaml", "--format", "json", *DATE)
    report = json.loads(out)
    (entry,) = report["files"]
    assert entry["valid"] is False and entry["manifest"] is None
    extracted = entry["extracted"]
    assert extracted["parallelism"]["schedule"] == "dualpipev"
    assert extracted["model"]["layers"] == 24  # read from train/moe_16b.yaml
    assert {f["path"] for f in entry["findings"]} == {"fs/train_dualpipev.yaml"}
    # a valid file has its normalised manifest and no extracted copy
    shutil.copy(EXAMPLES / "small-dense.yaml", repo / "ok.yaml")
    _, out, _ = run(capsys, "review", "ok.yaml", "--format", "json", *DATE)
    (entry,) = json.loads(out)["files"]
    assert entry["manifest"]["name"] == "small-dense" and entry["extracted"] is None
    assert {f["path"] for f in entry["findings"]} <= {"ok.yaml"}


def test_diff_accepts_fail_on_never(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(repo / "old.yaml", (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8"))
    bad = (EXAMPLES / "mistakes.yaml").read_text(encoding="utf-8")
    write(repo / "new.yaml", bad)
    assert run(capsys, "diff", "old.yaml", "new.yaml")[0] == 1
    assert run(capsys, "diff", "old.yaml", "new.yaml", "--fail-on", "never")[0] == 0
