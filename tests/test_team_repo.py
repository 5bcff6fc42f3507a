"""A training-config repository set up as docs/frameworks.md and docs/ci.md describe
(examples/team-repo): manifests sourcing a Megatron-LM launch script, a torchtitan TOML, a
DeepSpeed JSON and a NeMo YAML, a team `.dpguard.yaml` with cluster defaults, a policy set with
its test cases, and a waivers file. Real pre-commit with the published hooks passes on it and
fails on a defect committed in a launch script alone, at the script's line; the composite
action's steps run on it and report the same.

The pre-commit runs install a snapshot of this checkout (conftest.hook_repo) into a hook
environment built once per test run (conftest.pre_commit_home)."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitrepo import git

from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent
TEAM = REPO / "examples" / "team-repo"
SCRIPT = "launch/pretrain_llama3_70b.sh"
BASH = [shutil.which("bash") or "bash", "--noprofile", "--norc", "-eo", "pipefail"]


def _env(**extra: str) -> dict[str, str]:
    """The environment of a CI runner or a developer's shell: nothing of this test run's git,
    pre-commit or Python settings leaks in; the test environment's dpguard is on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "PRE_COMMIT", "GITHUB_")) and k not in ("PYTHONPATH",)
    }
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(NO_COLOR="1", **extra)
    return env


@pytest.fixture
def team(tmp_path: Path, hook_repo: tuple[Path, str]) -> Path:
    """examples/team-repo committed into a fresh repository, with a .pre-commit-config.yaml
    whose hooks come from this checkout. The waiver's expiry moves to 30 days from today: a
    waiver may not run further ahead than the policy's max_waiver_days, and an expired one
    would bring its warning back."""
    root = tmp_path / "configs"
    shutil.copytree(TEAM, root)
    waivers = root / "waivers.yaml"
    expires = (dt.date.today() + dt.timedelta(days=30)).isoformat()
    text = re.sub(r"expires: \S+", f"expires: {expires}", waivers.read_text(encoding="utf-8"))
    waivers.write_text(text, encoding="utf-8")
    config = yaml.safe_load((TEAM / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    (hooks,) = config["repos"]
    assert [h["id"] for h in hooks["hooks"]] == [
        "dpguard-review",
        "dpguard-lint-policies",
        "dpguard-test",
    ]
    hooks.update(repo=str(hook_repo[0]), rev=hook_repo[1])  # this checkout, not a release
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the team's configs")
    return root


def pre_commit(root: Path, home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *argv, "--color", "never"],
        cwd=root,
        env=_env(PRE_COMMIT_HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=600,  # the first run of the test session builds the hook's environment
    )


def break_the_script(root: Path) -> str:
    """A real defect in the launch script alone, committed: tensor parallel 3 (64 heads and
    256 GPUs are not divisible by it). The commit before it."""
    base = git(root, "rev-parse", "HEAD")
    script = root / SCRIPT
    text = script.read_text(encoding="utf-8")
    assert "TP=${TP:-4}\n" in text
    script.write_text(text.replace("TP=${TP:-4}\n", "TP=${TP:-3}\n"), encoding="utf-8")
    git(root, "commit", "-q", "-am", "try TP 3")
    return base


def test_the_example_repository_passes_dpguard_directly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the hooks run, in process: every manifest passes (one verdict each), the waiver
    covers the torchtitan run's ADV001 at the TOML's line, and the policy tests pass."""
    monkeypatch.chdir(TEAM)
    assert main(["review", "--only-manifests", "--date", "2026-12-01", "runs", "launch"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "4 manifests checked: 4 passed, 0 failed (0 errors, 1 warning)"
    assert (
        "launch/llama3_70b.toml:28:27: warning ADV001 M/P = 8/4 = 2.00 is outside 8..16 (waived)"
        in out
    )
    assert "[config .dpguard.yaml]" in out
    assert main(["test", "policies/tests/"]) == 0
    assert main(["lint-policies"]) == 0
    capsys.readouterr()


def test_pre_commit_passes_then_fails_on_a_defect_in_a_launch_script(
    team: Path, pre_commit_home: Path
) -> None:
    done = pre_commit(team, pre_commit_home, "run", "--all-files")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("dpguard review", "dpguard lint-policies", "dpguard test"):
        assert re.search(rf"^{name}\.+Passed$", done.stdout, re.M), done.stdout

    break_the_script(team)
    # the commit changed only the script: the hook gets only it, and judges the manifest that
    # sources it, at the script's lines
    done = pre_commit(team, pre_commit_home, "run", "--from-ref", "HEAD~1", "--to-ref", "HEAD")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^dpguard review\.+Failed$", done.stdout, re.M), done.stdout
    lines = done.stdout.splitlines()
    assert (
        f"{SCRIPT}:9:10: error X010 attention_heads (64) is not divisible by tensor parallel size 3"
        in lines
    ), done.stdout
    assert not any(line.startswith("runs/") and " error " in line for line in lines)


# ---- the composite action (action.yml) ----------------------------------------------------------


def _inputs(**given: str) -> dict[str, str]:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    defaults = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    unknown = set(given) - set(defaults)
    assert not unknown, f"action.yml has no input {unknown}"
    return {**defaults, **given}


def run_action(root: Path, **given: str) -> tuple[dict[str, str], str]:
    """action.yml's steps in order, as the runner would: `${{ inputs.* }}` from the inputs,
    GITHUB_OUTPUT collected, GITHUB_ACTION_PATH this checkout. Two steps are not executed
    here but checked: actions/setup-python (this test's Python stands in for it) and the
    install (this environment's dpguard is the package it would install)."""
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    inputs = _inputs(**given)
    outputs: dict[str, str] = {}
    log = ""

    def expand(value: Any) -> str:
        return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs[m[1]], str(value))

    for i, step in enumerate(action["runs"]["steps"]):
        condition = step.get("if")
        if condition is not None:
            match = re.fullmatch(r"inputs\.([\w-]+) != ''", condition)
            assert match, f"unexpected condition {condition!r}"
            if inputs[match[1]] == "":
                continue
        if "uses" in step:
            assert step["uses"].startswith("actions/setup-python@")
            assert expand(step["with"]["python-version"]) == inputs["python-version"]
            continue
        if step.get("name") == "Install dpguard":
            assert '"$GITHUB_ACTION_PATH"' in step["run"] and "pip install" in step["run"]
            continue
        output = root.parent / f"action-output-{i}"
        output.write_text("", encoding="utf-8")
        env = _env(GITHUB_OUTPUT=str(output), GITHUB_ACTION_PATH=str(REPO))
        env.update({k: expand(v) for k, v in step.get("env", {}).items()})
        script = root.parent / f"action-step-{i}.sh"
        script.write_text(step["run"], encoding="utf-8")
        done = subprocess.run(
            [*BASH, str(script)], cwd=root, env=env, capture_output=True, text=True, timeout=300
        )
        log += done.stdout + done.stderr
        outputs.update(
            line.split("=", 1) for line in output.read_text(encoding="utf-8").splitlines()
        )
    return outputs, log


def test_the_action_reviews_a_change_to_a_launch_script(team: Path) -> None:
    base = break_the_script(team)
    outputs, log = run_action(team, baseline=base, format="github")
    assert outputs["exit-code"] == "1", log
    assert (
        f"::error file={SCRIPT},line=9,col=10,title=X010::attention_heads (64) is not divisible "
        "by tensor parallel size 3"
    ) in log
    # the change report: the manifest that sources the script, before and after
    assert "runs/llama3-70b-megatron.yaml" in log, log


def test_the_action_passes_on_the_whole_repository(team: Path) -> None:
    files = "\n".join(
        str(p.relative_to(team))
        for p in sorted(team.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    )
    outputs, log = run_action(team, files=files, format="text", **{"python-version": ""})
    assert outputs["exit-code"] == "0", log
    assert "4 manifests checked: 4 passed, 0 failed" in log
