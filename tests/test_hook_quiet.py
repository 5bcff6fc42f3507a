"""Quieter hooks: `review --quiet`, unused-waiver warnings only when every file a waiver could
match was checked (or `--report-unused-waivers`), and the published hooks dpguard-lint-policies
and dpguard-test under the real pre-commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gitrepo import git

from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "runs").mkdir()
    shutil.copy(EXAMPLES / "small-dense.yaml", tmp_path / "runs" / "good.yaml")
    shutil.copy(EXAMPLES / "frontier-moe.yaml", tmp_path / "runs" / "moe.yaml")
    shutil.copy(EXAMPLES / "mistakes.yaml", tmp_path / "runs" / "bad.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_quiet_prints_errors_and_warnings_then_one_summary(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["review", "runs/good.yaml", "runs/moe.yaml", "runs/bad.yaml"]) == 1
    loud = capsys.readouterr().out.splitlines()
    assert main(["review", "--quiet", "runs/good.yaml", "runs/moe.yaml", "runs/bad.yaml"]) == 1
    quiet = capsys.readouterr().out.splitlines()
    assert quiet == [line for line in loud if ": error " in line or ": warning " in line] + [
        loud[-1]
    ]
    assert len(quiet) > 2 and not any(": info " in line for line in quiet)
    assert not any(line.startswith("policies: ") for line in quiet)
    assert quiet[-1] == "3 manifests checked: 2 passed, 1 failed (7 errors, 3 warnings)"
    assert main(["review", "-q", "runs/good.yaml"]) == 0
    assert capsys.readouterr().out == (
        "1 manifest checked: 1 passed, 0 failed (0 errors, 0 warnings)\n"
    )


WAIVERS = """\
apiVersion: dpguard/v1
kind: Waivers
waivers:
  - {rule: ADV001, match: runs/moe.yaml, reason: loader, owner: platform, expires: '2026-02-01'}
  - {rule: ADV003, match: 'runs/*.yaml', reason: schedule, owner: platform, expires: '2026-02-01'}
"""


def test_unused_waivers_only_when_every_file_they_could_match_was_checked(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (runs / ".dpguard.yaml").write_text("waivers: waivers.yaml\n", encoding="utf-8")
    (runs / "waivers.yaml").write_text(WAIVERS, encoding="utf-8")
    review = ["review", "--date", "2026-01-15"]
    # a pre-commit batch with good.yaml only: moe.yaml and bad.yaml were not checked
    assert main([*review, "runs/good.yaml"]) == 0
    assert capsys.readouterr().err == ""
    # every file ADV003's glob matches checked, and none drew ADV003: unused
    main([*review, "runs/good.yaml", "runs/moe.yaml", "runs/bad.yaml"])
    err = capsys.readouterr().err
    where = "waivers.yaml"  # relative to the current directory, as the files are
    assert err == f"{where}:5:6: warning unused waiver for ADV003 (match runs/*.yaml)\n"
    # on request, every unused waiver, whatever was checked
    assert main([*review, "--report-unused-waivers", "runs/good.yaml"]) == 0
    assert capsys.readouterr().err == (
        f"{where}:4:6: warning unused waiver for ADV001 (match runs/moe.yaml)\n"
        f"{where}:5:6: warning unused waiver for ADV003 (match runs/*.yaml)\n"
    )


# ---- the published hooks under the real pre-commit -------------------------------------------

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team, version: 1.0.0}
rules:
  - id: TEAM001
    kind: advise
    title: big runs on H100
    when:
      all:
        - {fact: cluster.accelerator, equals: H100-SXM}
        - {fact: cluster.gpus, ge: 1024}
    message: "{{ cluster.gpus }} H100s: book the capacity review"
    docs: capacity planning.
"""

CASES = """\
apiVersion: dpguard/v1
kind: PolicyTest
metadata: {name: team}
manifests:
  base:
    apiVersion: dpguard/v1
    kind: TrainingManifest
    metadata: {name: case}
    cluster: {gpus: 1024, accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}
    model: {architecture: dense, total_params: 13B, layers: 40, hidden_size: 5120,
            attention_heads: 40, seq_len: 4096, vocab_size: 32000}
    training: {tokens: 1T, global_batch_size: 1024}
cases:
  - name: 1024 H100s fire
    manifest: base
    expect: {fired: [TEAM001]}
  - name: 512 do not
    manifest: base
    patch: {cluster: {gpus: 512}}
    expect: {not_fired: [TEAM001]}
"""


def pre_commit(*argv: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    # as tests/test_precommit.py: the hook's own environment, nothing of this one leaking in
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "PRE_COMMIT")) and k not in ("PYTHONPATH", "PYTHONHOME")
    }
    env.update(PRE_COMMIT_HOME=str(home), NO_COLOR="1")
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_published_hooks_are_valid_and_listed(tmp_path: Path) -> None:
    done = pre_commit(
        "validate-manifest", str(REPO / ".pre-commit-hooks.yaml"), cwd=REPO, home=tmp_path
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    by_id = {h["id"]: h for h in hooks}
    assert list(by_id) == ["dpguard-review", "dpguard-lint-policies", "dpguard-test"]
    assert by_id["dpguard-lint-policies"]["entry"] == "dpguard lint-policies"
    assert by_id["dpguard-test"]["entry"] == "dpguard test"
    for name in ("dpguard-lint-policies", "dpguard-test"):
        assert by_id[name]["pass_filenames"] is False
        assert by_id[name]["language"] == "python"


def test_lint_and_test_hooks_under_pre_commit(tmp_path: Path) -> None:
    # this checkout as a hook repository at a commit, as a team's config would pin it
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    hooks_repo = tmp_path / "dpguard"
    for name in sorted(set(filter(None, listed.split("\0")))):
        if (REPO / name).is_file():
            (hooks_repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, hooks_repo / name)
    git(hooks_repo, "init", "-q")
    git(hooks_repo, "add", "-A")
    git(hooks_repo, "commit", "-q", "-m", "snapshot")
    rev = git(hooks_repo, "rev-parse", "HEAD")

    work = tmp_path / "configs"
    (work / "policies" / "tests").mkdir(parents=True)
    (work / "policies" / "team.yaml").write_text(TEAM, encoding="utf-8")
    (work / "policies" / "tests" / "team.yaml").write_text(CASES, encoding="utf-8")
    (work / ".dpguard.yaml").write_text("policies: [policies/team.yaml]\n", encoding="utf-8")
    config = {
        "repos": [
            {
                "repo": str(hooks_repo),
                "rev": rev,
                "hooks": [
                    {"id": "dpguard-lint-policies"},
                    {"id": "dpguard-test", "args": ["policies/tests/"]},
                ],
            }
        ]
    }
    (work / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    git(work, "init", "-q")
    git(work, "add", "-A")
    home = tmp_path / "home"

    good = pre_commit("run", "--all-files", "--color", "never", cwd=work, home=home)
    assert good.returncode == 0, good.stdout + good.stderr
    lines = good.stdout.splitlines()
    assert any(
        line.startswith("dpguard lint-policies") and line.endswith("Passed") for line in lines
    )
    assert any(line.startswith("dpguard test") and line.endswith("Passed") for line in lines)

    # an alias in a condition can never match: the lint hook fails and says what to write
    broken = TEAM.replace("equals: H100-SXM", "equals: H100")
    (work / "policies" / "team.yaml").write_text(broken, encoding="utf-8")
    git(work, "add", "-A")
    bad = pre_commit("run", "--all-files", "--color", "never", cwd=work, home=home)
    assert bad.returncode == 1
    assert "- hook id: dpguard-lint-policies" in bad.stdout
    assert (
        f"{work.resolve() / 'policies' / 'team.yaml'}:10:39: 'H100' can never match "
        "cluster.accelerator: manifests are normalised to the catalog id, so write 'H100-SXM'"
    ) in bad.stdout
