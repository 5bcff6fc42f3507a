"""A .dpguard.yaml that declares `governs: subtree` keeps its rules over every directory below
it: a nested config (say, one a pull request adds) may add policy sets, waivers and a stricter
fail_on, never disable, override or loosen. Also: everything a config or `--templates` points at
stays inside the repository (dpguard.confine), and every report names the config that judged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dpguard.cli import main

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "large-dense.yaml"  # ADV001 + ADV004 warnings, no error
TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
TEAM_RULE = """apiVersion: dpguard/v1
kind: PolicySet
metadata: {{name: team, version: "1.0.0"}}
rules:
  - id: {id}
    kind: advise
{override}    title: team rule
    when: {{fact: cluster.gpus, ge: 1}}
    message: "team rule"
    docs: https://example.com
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "team" / "sub").mkdir(parents=True)
    shutil.copy(EXAMPLE, tmp_path / "team" / "sub" / "m.yaml")
    (tmp_path / ".dpguard.yaml").write_text("governs: subtree\nfail_on: warning\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def review(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["review", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def nested(repo: Path, text: str) -> None:
    (repo / "team" / "sub" / ".dpguard.yaml").write_text(text, "utf-8")


def test_a_nested_config_cannot_disable_a_rule(repo: Path, capsys: pytest.CaptureFixture) -> None:
    nested(repo, "disable: [ADV004]\n")
    code, out, err = review(capsys, "-q", "team/sub/m.yaml")
    assert (code, out) == (2, "")
    assert "is governed by" in err and "not disable rules" in err


@pytest.mark.parametrize("looser", ["error", "never"])
def test_a_nested_config_cannot_loosen_fail_on(
    repo: Path, capsys: pytest.CaptureFixture, looser: str
) -> None:
    nested(repo, f"fail_on: {looser}\n")
    code, _out, err = review(capsys, "-q", "team/sub/m.yaml")
    assert code == 2
    assert f"fail_on {looser} is looser than the governing fail_on warning" in err


def test_without_governs_the_nearest_config_judges_alone(
    repo: Path, capsys: pytest.CaptureFixture
) -> None:
    (repo / ".dpguard.yaml").write_text("fail_on: warning\n", "utf-8")
    nested(repo, "disable: [ADV001, ADV004]\n")
    code, out, _err = review(capsys, "-q", "team/sub/m.yaml")
    assert code == 0
    assert "ADV004" not in out


def test_a_nested_config_adds_rules_and_tightens(repo: Path, capsys: pytest.CaptureFixture) -> None:
    (repo / "team" / "sub" / "team.yaml").write_text(
        TEAM_RULE.format(id="TEAM001", override=""), "utf-8"
    )
    nested(repo, "policies: [team.yaml]\n")
    code, out, _err = review(capsys, "-q", "team/sub/m.yaml")
    assert code == 1  # the governing fail_on: warning stands
    assert "TEAM001" in out and "ADV004" in out
    assert "config team/sub/.dpguard.yaml" in out.splitlines()[-2]


def test_a_nested_policy_set_cannot_override_or_disable(
    repo: Path, capsys: pytest.CaptureFixture
) -> None:
    sub = repo / "team" / "sub"
    (sub / "team.yaml").write_text(
        TEAM_RULE.format(id="ADV004", override="    override: true\n"), "utf-8"
    )
    nested(repo, "policies: [team.yaml]\n")
    code, _out, err = review(capsys, "-q", "team/sub/m.yaml")
    assert code == 2
    assert "overrides ADV004" in err and "not override or disable" in err


def test_config_paths_stay_inside_the_repository(repo: Path, capsys: pytest.CaptureFixture) -> None:
    outside = repo.parent / "elsewhere.yaml"
    outside.write_text(f"token: {TOKEN}\n", "utf-8")
    for key in ("policies: [../../../elsewhere.yaml]", "waivers: ../../../elsewhere.yaml"):
        nested(repo, key + "\n")
        code, out, err = review(capsys, "team/sub/m.yaml")
        assert code == 2
        assert "leads outside the repository" in err
        assert TOKEN not in out + err
    outside.unlink()  # the same message whether the target exists or not
    code, _out, err_missing = review(capsys, "team/sub/m.yaml")
    assert err_missing == err
    # a policy directory inside whose file is a link out
    outside.write_text(f"token: {TOKEN}\n", "utf-8")
    (repo / "team" / "sub" / "pol").mkdir()
    (repo / "team" / "sub" / "pol" / "leak.yaml").symlink_to(outside)
    nested(repo, "policies: [pol]\n")
    code, out, err = review(capsys, "team/sub/m.yaml")
    assert code == 2
    assert "leads outside the repository" in err and TOKEN not in out + err


def test_sarif_and_junit_name_the_config(repo: Path, capsys: pytest.CaptureFixture) -> None:
    nested(repo, "fail_on: warning\n")
    review(capsys, "--format", "sarif", "-o", "r.sarif", "team/sub/m.yaml")
    configs = json.loads(Path("r.sarif").read_text("utf-8"))["runs"][0]["properties"]["configs"]
    assert [c["config"] for c in configs] == [str(repo / "team" / "sub" / ".dpguard.yaml")]
    review(capsys, "--format", "junit", "-o", "r.xml", "team/sub/m.yaml")
    assert 'name="dpguard.config"' in Path("r.xml").read_text("utf-8")


def test_team_templates_read_only_inside_their_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(REPO / "templates", templates)
    secret = tmp_path / "secret.txt"
    secret.write_text(TOKEN, "utf-8")
    (templates / "leak.j2").symlink_to(secret)
    with (templates / "plan.md.j2").open("a", encoding="utf-8") as page:
        page.write('{% include "leak.j2" %}\n')
    code = main(["plan", str(EXAMPLE), "--templates", str(templates), "--format", "markdown"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "leads outside" in err
    assert TOKEN not in out + err


WAIVE = (
    "apiVersion: dpguard/v1\nkind: Waivers\nwaivers:\n"
    "  - {{rule: {rule}, match: m.yaml, reason: r, owner: o, expires: 2030-01-01}}\n"
)


def test_a_nested_waivers_file_waives_only_its_own_rules(
    repo: Path, capsys: pytest.CaptureFixture
) -> None:
    sub = repo / "team" / "sub"
    (sub / "team.yaml").write_text(TEAM_RULE.format(id="TEAM001", override=""), "utf-8")
    (sub / "waivers.yaml").write_text(WAIVE.format(rule="ADV004"), "utf-8")
    nested(repo, "policies: [team.yaml]\nwaivers: waivers.yaml\n")
    code, _out, err = review(capsys, "-q", "--date", "2029-12-01", "team/sub/m.yaml")
    assert code == 2
    assert "waives ADV004" in err and "only the rules its own policy sets add" in err
    (sub / "waivers.yaml").write_text(WAIVE.format(rule="TEAM001"), "utf-8")
    code, out, _err = review(capsys, "-q", "--date", "2029-12-01", "team/sub/m.yaml")
    assert code == 1  # ADV004 stands
    assert "TEAM001" not in out and "ADV004" in out


def test_a_nested_policy_set_cannot_change_settings(
    repo: Path, capsys: pytest.CaptureFixture
) -> None:
    sub = repo / "team" / "sub"
    text = TEAM_RULE.format(id="TEAM001", override="") + "settings: {memory_headroom: 0.0}\n"
    (sub / "team.yaml").write_text(text, "utf-8")
    nested(repo, "policies: [team.yaml]\n")
    code, _out, err = review(capsys, "-q", "team/sub/m.yaml")
    assert code == 2
    assert "sets settings" in err


def test_every_governing_config_on_the_way_down_stands(
    repo: Path, capsys: pytest.CaptureFixture
) -> None:
    """root governs, team/ governs and adds a rule, team/sub/ adds nothing: team's rule stands
    for team/sub/ (the topmost governing config alone would drop it)."""
    team = repo / "team"
    (team / "team.yaml").write_text(TEAM_RULE.format(id="TEAM001", override=""), "utf-8")
    (team / ".dpguard.yaml").write_text("governs: subtree\npolicies: [team.yaml]\n", "utf-8")
    nested(repo, "defaults: []\n")
    code, out, _err = review(capsys, "-q", "team/sub/m.yaml")
    assert code == 1
    assert "TEAM001" in out


def test_a_config_no_file_is_governed_by_is_not_read(
    repo: Path, capsys: pytest.CaptureFixture
) -> None:
    """Without governs, a config above the nearest one is not read (only peeked at for the key):
    a schema problem in it changes nothing for the files below the nearest config. (One that
    is not YAML at all is read, and its problem reported: it might have meant to govern.)"""
    (repo / ".dpguard.yaml").write_text("fail_on: 7\n", "utf-8")
    (repo / "team" / ".dpguard.yaml").write_text("fail_on: error\n", "utf-8")
    nested(repo, "fail_on: warning\n")
    code, _out, err = review(capsys, "-q", "team/sub/m.yaml")
    assert (code, err) == (1, "")


def test_a_change_report_names_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess

    monkeypatch.chdir(tmp_path)
    run = lambda *argv: subprocess.run(["git", *argv], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("config", "user.email", "t@example.com")
    run("config", "user.name", "t")
    shutil.copy(EXAMPLE, "m.yaml")
    Path(".dpguard.yaml").write_text("fail_on: error\n", "utf-8")
    run("add", "-A")
    run("commit", "-qm", "base")
    for fmt in ("text", "github", "markdown"):
        main(["review", "--baseline", "HEAD", "--format", fmt, "m.yaml"])
        assert "config .dpguard.yaml" in capsys.readouterr().out
    main(["review", "--baseline", "HEAD", "--format", "json", "m.yaml"])
    [change] = json.loads(capsys.readouterr().out)["changes"]
    assert change["config"].endswith(".dpguard.yaml")
