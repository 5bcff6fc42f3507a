"""Every snippet in docs/ci.md, exercised.

- The GitHub Actions workflow is parsed and its structure checked, then its job is played step by
  step in a temporary git repository whose last commit changes some manifests: each `run:` script
  goes through `bash --noprofile --norc -eo pipefail` (what `shell: bash` runs) with `${{ }}`
  expressions and `if:` conditions evaluated for the few forms the workflow uses, GITHUB_OUTPUT
  carried between steps, and `gh` replaced by a stub that records what it was asked to post.
  The `uses:` steps are not run: checkout is the temporary repository itself, the SARIF upload is
  replaced by validating the file against the OASIS SARIF 2.1.0 schema.
- The GitLab CI job likewise: its script lines run in one bash with `set -eo pipefail` (what the
  runner does), and the JUnit report is parsed.
- The pre-commit snippet runs under the real pre-commit, its `repo:`/`rev:` pointed at a snapshot
  of this checkout.
- The local shell block runs with the base branch replaced by the temporary repository's base.

The one command never run is `pip install "$DPGUARD_PIP_SPEC"` (the spec is a placeholder for
where an organisation gets dpguard); the test checks its form and uses the dpguard under test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from gitrepo import git

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "ci.md"
EXAMPLES = REPO / "examples"
SARIF_SCHEMA = json.loads(
    (REPO / "tests" / "schemas" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8")
)
INSTALL = 'python -m pip install "$DPGUARD_PIP_SPEC"'
K8S = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: trainer}\n"
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
GH_STUB = """\
#!/bin/sh
printf '%s\\n' "$@" > "$GH_RECORD/args"
printf '%s' "$GH_TOKEN" > "$GH_RECORD/token"
while [ $# -gt 0 ]; do
  if [ "$1" = --body-file ]; then cp "$2" "$GH_RECORD/body.md"; fi
  shift
done
"""


def blocks() -> dict[str, str]:
    """The fenced blocks of docs/ci.md, keyed by language and their first line."""
    found = re.findall(r"^```(\w+)\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S)
    return {f"{lang} {body.splitlines()[0]}": body for lang, body in found}


def test_every_block_is_one_this_file_tests() -> None:
    assert sorted(blocks()) == [
        "sh git diff --name-only -z --diff-filter=ACMR origin/main...HEAD -- '*.yaml' '*.yml' "
        "'*.sh' '*.bash' '*.toml' '*.json' > changed.txt",
        "yaml # .github/workflows/dpguard-cost.yaml",  # tests/test_diff.py plays these two
        "yaml # .github/workflows/dpguard.yaml",
        "yaml # .gitlab-ci.yml",
        "yaml # .gitlab-ci.yml (cost note)",
        "yaml # .pre-commit-config.yaml",
    ]


def test_readme_links_the_ci_docs() -> None:
    assert "](docs/ci.md)" in (REPO / "README.md").read_text(encoding="utf-8")


# ---- a repository whose last commit changes some files -----------------------------------------


@dataclass
class Change:
    root: Path
    base: str
    bin: Path
    record: Path
    env: dict[str, str] = field(default_factory=dict)


def _dpguard_bin() -> Path:
    found = shutil.which("dpguard", path=str(Path(sys.executable).parent)) or shutil.which(
        "dpguard"
    )
    assert found, "dpguard is not installed next to the running Python"
    return Path(found).parent


def make_change(tmp_path: Path, files: dict[str, str | Path]) -> Change:
    """Base commit: a Kubernetes file and a manifest; head commit: `files` (text or a copy)."""
    root = tmp_path / "repo"
    (root / "k8s").mkdir(parents=True)
    (root / "runs").mkdir()
    (root / "k8s" / "deploy.yaml").write_text(K8S, encoding="utf-8")
    shutil.copy(EXAMPLES / "frontier-moe.yaml", root / "runs" / "unchanged.yaml")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD")
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(content, root / name)
        else:
            (root / name).write_text(content, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "change")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(GH_STUB, encoding="utf-8")
    (bin_dir / "gh").chmod(0o755)
    record = tmp_path / "gh-record"
    record.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITHUB_", "CI_"))}
    env.pop("NO_COLOR", None)
    env.update(
        PATH=os.pathsep.join([str(bin_dir), str(_dpguard_bin()), env.get("PATH", "")]),
        GH_RECORD=str(record),
    )
    return Change(root, base, bin_dir, record, env)


BAD_AND_GOOD: dict[str, str | Path] = {
    "runs/bad run.yaml": EXAMPLES / "mistakes.yaml",  # a space: the file list is NUL-separated
    "runs/good.yaml": EXAMPLES / "small-dense.yaml",
    "k8s/deploy.yaml": K8S + "spec: {replicas: 2}\n",
    "notes.txt": "not yaml\n",
}


# ---- GitHub Actions ----------------------------------------------------------------------------


def github_workflow() -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load(blocks()["yaml # .github/workflows/dpguard.yaml"])
    return data


def test_github_workflow_structure() -> None:
    workflow = github_workflow()
    on = workflow[True]  # YAML 1.1: PyYAML reads the key `on` as true
    # every format the readers detect: a pull request changing only a launch script runs it
    assert on == {
        "pull_request": {"paths": ["**.yaml", "**.yml", "**.sh", "**.bash", "**.toml", "**.json"]}
    }
    job = workflow["jobs"]["review"]
    assert job["permissions"] == {
        "contents": "read",
        "security-events": "write",
        "pull-requests": "write",
    }
    assert job["defaults"] == {"run": {"shell": "bash"}}
    steps = job["steps"]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == [
        "actions/checkout",
        "actions/setup-python",
        "github/codeql-action/upload-sarif",
    ]
    assert steps[0]["with"] == {"fetch-depth": 0}
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/"))
    assert upload["with"] == {"sarif_file": "dpguard.sarif", "category": "dpguard"}
    assert upload["if"].startswith("always()")
    assert sum(1 for s in steps if s.get("run") == INSTALL) == 1
    comment = next(s for s in steps if "gh pr comment" in s.get("run", ""))
    assert "--body-file dpguard.md" in comment["run"]
    assert comment["env"]["GH_TOKEN"] == "${{ github.token }}"


@dataclass
class Job:
    ran: list[str]
    outputs: dict[str, dict[str, str]]
    failed: bool
    logs: dict[str, str]


def _expression(expr: str, context: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
    if match:
        return outputs.get(match[1], {}).get(match[2], "")
    return context[expr]  # an expression this test does not know fails here


def _condition(
    expr: str | None, cwd: Path, outputs: dict[str, dict[str, str]], failed: bool
) -> bool:
    """GitHub's `if:` for the forms the workflow uses; without a status function, success()."""
    if expr is None:
        return not failed
    py = re.sub(
        r"steps\.([\w-]+)\.outputs\.([\w-]+)",
        lambda m: repr(outputs.get(m[1], {}).get(m[2], "")),
        expr,
    )
    py = re.sub(r"hashFiles\('([^']+)'\)", lambda m: repr("h" if (cwd / m[1]).exists() else ""), py)
    always = "always()" in py
    py = py.replace("always()", "True").replace("&&", " and ").replace("||", " or ")
    assert re.fullmatch(r"[\w\s'=!]*", py), f"unexpected expression {expr!r}"
    value = bool(eval(py, {"__builtins__": {}}))  # only literals and operators remain
    return value if always else value and not failed


def play_github(change: Change) -> Job:
    job = github_workflow()["jobs"]["review"]
    context = {
        "github.event.pull_request.base.sha": change.base,
        "github.event.pull_request.number": "7",
        "github.token": "t0ken",
    }
    outputs: dict[str, dict[str, str]] = {}
    ran: list[str] = []
    logs: dict[str, str] = {}
    failed = False
    for i, step in enumerate(job["steps"]):
        name = step.get("id") or step.get("name") or step.get("uses")
        if not _condition(step.get("if"), change.root, outputs, failed):
            continue
        ran.append(name)
        if "uses" in step:
            continue
        if step["run"] == INSTALL:
            continue
        env = dict(change.env)
        for key, value in {**job.get("env", {}), **step.get("env", {})}.items():
            env[key] = re.sub(
                r"\$\{\{\s*(.*?)\s*\}\}", lambda m: _expression(m[1], context, outputs), str(value)
            )
        output_file = change.root.parent / f"github-output-{i}"
        output_file.write_text("", encoding="utf-8")
        env["GITHUB_OUTPUT"] = str(output_file)
        script = change.root.parent / f"step-{i}.sh"
        script.write_text(step["run"], encoding="utf-8")
        done = subprocess.run(
            [*BASH, str(script)],
            cwd=change.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        logs[name] = done.stdout + done.stderr
        outputs[step.get("id", name)] = dict(
            line.split("=", 1) for line in output_file.read_text(encoding="utf-8").splitlines()
        )
        if done.returncode:
            failed = True
            logs[name] += f"\nexit {done.returncode}"
    return Job(ran, outputs, failed, logs)


def test_github_job_with_a_bad_and_a_good_manifest(tmp_path: Path) -> None:
    change = make_change(tmp_path, BAD_AND_GOOD)
    job = play_github(change)
    assert job.ran == [
        "actions/checkout@v5",
        "actions/setup-python@v6",
        "Install dpguard",
        "changed",
        "review",
        "Upload SARIF",
        "Comment on the pull request",
        "Fail on blocking findings",
    ]
    assert job.outputs["changed"] == {"any": "true"}
    assert job.outputs["review"] == {"status": "1"}
    assert job.failed
    assert job.logs["Fail on blocking findings"] == "\nexit 1"
    annotations = [line for line in job.logs["review"].splitlines() if line.startswith("::")]
    assert annotations[0] == (
        "::error file=runs/bad run.yaml,line=7,col=3,title=X001::1000 GPUs is not divisible by "
        "tensor x pipeline x context = 3 x 8 x 1 = 24"
    )
    # 7 errors for the bad manifest, then the good manifest's decision as a notice.
    assert len(annotations) == 8
    assert annotations[-1].startswith("::notice file=runs/good.yaml,")
    assert "2 manifests checked: 1 passed, 1 failed (7 errors, 0 warnings)" in job.logs["review"]

    log = json.loads((change.root / "dpguard.sarif").read_text(encoding="utf-8"))
    assert list(jsonschema.Draft4Validator(SARIF_SCHEMA).iter_errors(log)) == []
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    }
    assert uris == {"runs/bad%20run.yaml"}

    args = (change.record / "args").read_text(encoding="utf-8").splitlines()
    assert args == [
        "pr",
        "comment",
        "7",
        "--body-file",
        "dpguard.md",
        "--edit-last",
        "--create-if-none",
    ]
    assert (change.record / "token").read_text(encoding="utf-8") == "t0ken"
    body = (change.record / "body.md").read_text(encoding="utf-8")
    assert body.startswith("<!-- dpguard-review -->\n## dpguard review\n\n**2 manifests checked")
    assert "### `runs/bad run.yaml`: failed" in body
    assert "### `runs/good.yaml`: passed" in body
    assert "#### Pipeline plan: small-dense" in body
    assert "k8s/deploy.yaml" not in body


def test_github_job_with_a_good_manifest(tmp_path: Path) -> None:
    change = make_change(tmp_path, {"runs/good.yaml": EXAMPLES / "small-dense.yaml"})
    job = play_github(change)
    assert job.outputs["review"] == {"status": "0"}
    assert not job.failed
    assert "Fail on blocking findings" not in job.ran
    assert "Comment on the pull request" in job.ran
    assert (change.record / "body.md").read_text(encoding="utf-8").count("### `") == 1


def test_github_job_with_only_other_yaml(tmp_path: Path) -> None:
    change = make_change(tmp_path, {"k8s/deploy.yaml": K8S + "spec: {replicas: 3}\n"})
    job = play_github(change)
    assert job.outputs["review"] == {"status": "0"}
    assert not job.failed
    assert "Upload SARIF" in job.ran  # an empty run clears earlier alerts
    assert "Comment on the pull request" not in job.ran  # no manifest: no comment
    assert not (change.record / "args").exists()


def test_github_job_without_yaml_changes(tmp_path: Path) -> None:
    job = play_github(make_change(tmp_path, {"notes.txt": "text\n"}))
    assert job.outputs["changed"] == {"any": "false"}
    assert job.ran[-1] == "changed"
    assert not job.failed


# ---- GitLab CI ---------------------------------------------------------------------------------


def gitlab_job() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(blocks()["yaml # .gitlab-ci.yml"])["dpguard"]
    return data


def test_gitlab_job_structure() -> None:
    job = gitlab_job()
    assert job["image"].startswith("python:3")
    assert job["rules"] == [
        {
            "if": '$CI_PIPELINE_SOURCE == "merge_request_event"',
            "changes": ["**/*.yaml", "**/*.yml", "**/*.sh", "**/*.bash", "**/*.toml", "**/*.json"],
        }
    ]
    assert job["variables"]["GIT_DEPTH"] == "0"
    assert job["artifacts"] == {
        "when": "always",
        "paths": ["dpguard-junit.xml"],
        "reports": {"junit": "dpguard-junit.xml"},
    }
    assert job["script"][0] == INSTALL


def play_gitlab(change: Change) -> subprocess.CompletedProcess[str]:
    job = gitlab_job()
    script = change.root.parent / "gitlab.sh"
    script.write_text("\n".join(job["script"][1:]) + "\n", encoding="utf-8")
    env = {
        **change.env,
        **job["variables"],
        "CI_MERGE_REQUEST_DIFF_BASE_SHA": change.base,
        "CI_PIPELINE_SOURCE": "merge_request_event",
    }
    return subprocess.run(
        [*BASH, str(script)], cwd=change.root, env=env, capture_output=True, text=True, timeout=120
    )


def test_gitlab_job_with_a_bad_and_a_good_manifest(tmp_path: Path) -> None:
    change = make_change(tmp_path, BAD_AND_GOOD)
    done = play_gitlab(change)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        "runs/bad run.yaml:7:3: error X001 1000 GPUs is not divisible by tensor x pipeline x "
        "context = 3 x 8 x 1 = 24"
    )
    root = ET.parse(change.root / "dpguard-junit.xml").getroot()
    suites = {s.attrib["name"]: s for s in root.iter("testsuite")}
    assert sorted(suites) == ["runs/bad run.yaml", "runs/good.yaml"]
    assert suites["runs/bad run.yaml"].attrib["failures"] == "7"
    assert [c.attrib["name"] for c in suites["runs/good.yaml"].iter("testcase")] == ["schema"]


def test_gitlab_job_with_a_good_manifest(tmp_path: Path) -> None:
    change = make_change(tmp_path, {"runs/good.yaml": EXAMPLES / "small-dense.yaml"})
    done = play_gitlab(change)
    assert done.returncode == 0, done.stdout + done.stderr
    root = ET.parse(change.root / "dpguard-junit.xml").getroot()
    assert (root.attrib["tests"], root.attrib["failures"]) == ("1", "0")


def test_gitlab_job_without_yaml_changes(tmp_path: Path) -> None:
    done = play_gitlab(make_change(tmp_path, {"notes.txt": "text\n"}))
    assert (done.returncode, done.stdout) == (0, "no manifest or config changed\n")


# ---- the local commands ------------------------------------------------------------------------


def test_local_commands(tmp_path: Path) -> None:
    change = make_change(tmp_path, BAD_AND_GOOD)
    (text,) = [body for key, body in blocks().items() if key.startswith("sh ")]
    script = tmp_path / "local.sh"
    script.write_text(text.replace("origin/main", change.base), encoding="utf-8")
    done = subprocess.run(
        [*BASH, str(script)],
        cwd=change.root,
        env=change.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "")  # the bad manifest fails
    body = (change.root / "dpguard.md").read_text(encoding="utf-8")
    assert "**2 manifests checked: 1 passed, 1 failed (7 errors, 0 warnings)**" in body


# ---- pre-commit --------------------------------------------------------------------------------


def test_pre_commit_snippet(
    tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    config = yaml.safe_load(blocks()["yaml # .pre-commit-config.yaml"])
    (repo,) = config["repos"]
    assert set(repo) == {"repo", "rev", "hooks"}
    assert repo["hooks"] == [{"id": "dpguard-review"}]
    published = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert repo["hooks"][0]["id"] in {h["id"] for h in published}

    # Run it: the snippet with repo/rev pointing at a snapshot of this checkout.
    repo.update(repo=str(hook_repo[0]), rev=hook_repo[1])
    change = make_change(tmp_path, BAD_AND_GOOD)
    (change.root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    git(change.root, "add", ".pre-commit-config.yaml")
    # The hook runs in its own environment: nothing of the running one may leak into it.
    env = {
        k: v
        for k, v in change.env.items()
        if not k.startswith("PRE_COMMIT") and k not in ("PYTHONPATH", "PYTHONHOME")
    }
    env["PRE_COMMIT_HOME"] = str(pre_commit_home)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
            cwd=change.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,  # the first run builds the hook's environment
        )

    done = run()
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "- hook id: dpguard-review" in lines
    assert (
        "runs/bad run.yaml:26:3: error S001 unknown key 'precison' in training "
        "(did you mean 'precision'?)"
    ) in lines
    assert not any(line.startswith("k8s/") for line in lines)
    git(change.root, "rm", "-q", "runs/bad run.yaml")
    done = run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("Passed")
