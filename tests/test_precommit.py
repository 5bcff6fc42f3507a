"""The pre-commit hook: `.pre-commit-hooks.yaml` under the real pre-commit, and the
`--only-manifests` detection it relies on to pass over the other YAML a repository holds.

The pre-commit runs use a snapshot of this checkout's working tree (tracked and untracked,
ignored files left out) committed into a temporary git repository, so they test the code as it
is, not the last commit; PRE_COMMIT_HOME is a temporary directory, so the first `try-repo` builds
the hook's virtual environment (pip installs dpguard and its dependencies from PyPI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpguard.cli import main
from dpguard.discover import declares_manifest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
TIMEOUT = 600  # the first run builds the hook's environment

K8S = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
spec:
  template:
    spec:
      containers:
        - name: trainer
          image: ghcr.io/example/trainer:1.0
---
apiVersion: v1
kind: Service
metadata: {name: trainer}
"""
BAD_LINES = [
    "bad.yaml:7:3: error X001 1000 GPUs is not divisible by tensor x pipeline x context = "
    "3 x 8 x 1 = 24",
    "bad.yaml:26:3: error S001 unknown key 'precison' in training (did you mean 'precision'?)",
    "bad.yaml:28:3: error X010 attention_heads (64) is not divisible by tensor parallel size 3",
]


# ---- which files --only-manifests checks -------------------------------------------------------

MANIFEST = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("text", "checked"),
    [
        pytest.param(MANIFEST, True, id="manifest"),
        pytest.param("---\n" + MANIFEST, True, id="explicit-document-start"),
        pytest.param("kind: TrainingManifest\napiVersion: dpguard/v1\n", True, id="kind-first"),
        pytest.param(
            "metadata: {labels: {a: [1, {b: c}]}}\n? [x, y]\n: z\napiVersion: dpguard/v1\n"
            "kind: TrainingManifest\n",
            True,
            id="after-nested-values-and-a-complex-key",
        ),
        pytest.param("kind: TrainingManifest\n", True, id="kind-without-apiVersion"),
        pytest.param("apiVersion: dpguard/v1\nkind: TrainingManifst\n", True, id="typo-in-kind"),
        pytest.param("apiVersion: dpguard/v1\n", True, id="dpguard-apiVersion-without-kind"),
        pytest.param("apiVersion: dpguard/v2\nkind: TrainingManifest\n", True, id="other-version"),
        pytest.param("apiVersion: 'dpguard/v1'\nkind: \"TrainingManifest\"\n", True, id="quoted"),
        pytest.param("a: [1, 2\n", True, id="not-yaml-at-all"),
        pytest.param(K8S, False, id="kubernetes"),
        pytest.param("apiVersion: dpguard/v1\nkind: Waivers\nwaivers: []\n", False, id="waivers"),
        pytest.param("apiVersion: dpguard/v1\nkind: PolicySet\n", False, id="policy-set"),
        pytest.param("apiVersion: dpguard/v1\nkind: PolicyTest\n", False, id="policy-test"),
        pytest.param(
            "Resources:\n  B: {Type: 'AWS::S3::Bucket', Name: !Ref N}\n", False, id="custom-tags"
        ),
        pytest.param("base: &b {x: 1}\nother: *b\nlauncher: torchrun\n", False, id="anchors"),
        pytest.param(
            "metadata:\n  apiVersion: dpguard/v1\n  kind: TrainingManifest\n", False, id="nested"
        ),
        pytest.param("kind: [TrainingManifest]\napiVersion: dpguard/v1\n", True, id="kind-a-list"),
        pytest.param("- apiVersion: dpguard/v1\n  kind: TrainingManifest\n", False, id="a-list"),
        pytest.param("", False, id="empty"),
        pytest.param("# only a comment\n", False, id="comment"),
        pytest.param("just a string\n", False, id="scalar"),
        pytest.param(K8S + "---\n" + MANIFEST, False, id="manifest-not-first"),
        pytest.param(MANIFEST + "---\n" + K8S, True, id="manifest-first-of-several"),
    ],
)
def test_declares_manifest(tmp_path: Path, text: str, checked: bool) -> None:
    path = tmp_path / "file.yaml"
    path.write_text(text, encoding="utf-8")
    assert declares_manifest(str(path)) is checked


def test_unreadable_or_binary_files_are_checked(tmp_path: Path) -> None:
    (tmp_path / "latin1.yaml").write_bytes(b"kind: caf\xe9\n")
    assert declares_manifest(str(tmp_path / "latin1.yaml")) is True
    assert declares_manifest(str(tmp_path / "missing.yaml")) is True
    assert declares_manifest(str(tmp_path)) is True


def test_only_manifests_in_review(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k8s.yaml").write_text(K8S, encoding="utf-8")
    (tmp_path / "broken.yaml").write_text("a: [1, 2\n", encoding="utf-8")
    shutil.copy(EXAMPLES / "small-dense.yaml", tmp_path / "good.yaml")
    assert main(["review", "--only-manifests", "k8s.yaml"]) == 0
    out, err = capsys.readouterr()
    assert (out.splitlines()[-1], err) == (
        "0 manifests checked: 0 passed, 0 failed (0 errors, 0 warnings)",
        "",
    )
    assert main(["review", "--only-manifests", "k8s.yaml", "broken.yaml", "good.yaml"]) == 1
    out, _ = capsys.readouterr()
    assert out.splitlines()[0].startswith("broken.yaml:2:1: error Y001 invalid YAML: ")
    assert out.splitlines()[-1] == "2 manifests checked: 1 passed, 1 failed (1 error, 0 warnings)"
    assert "k8s.yaml" not in out
    assert main(["review", "k8s.yaml"]) == 1  # without the flag every file is a manifest
    out, _ = capsys.readouterr()
    assert out.startswith("k8s.yaml:11:1: error Y003 more than one YAML document in the file")
    assert main(["review", "--only-manifests", "k8s.yaml", "missing.yaml"]) == 2
    assert capsys.readouterr().err == "dpguard: error: missing.yaml: no such file\n"


# ---- the hook manifest ------------------------------------------------------------------------


def pre_commit(*argv: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    # The hook runs in its own environment: nothing of the running one may leak into it.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "PRE_COMMIT")) and k not in ("PYTHONPATH", "PYTHONHOME")
    }
    env.update(
        PRE_COMMIT_HOME=str(home),
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
        NO_COLOR="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def git(cwd: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *argv],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_hook_manifest_is_valid(tmp_path: Path) -> None:
    done = pre_commit(
        "validate-manifest", str(REPO / ".pre-commit-hooks.yaml"), cwd=REPO, home=tmp_path
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    hook, *_ = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "dpguard-review"
    assert hook["entry"] == "dpguard review --only-manifests --quiet"
    assert (hook["language"], hook["types_or"]) == ("python", ["yaml", "shell", "toml", "json"])
    assert hook.get("pass_filenames", True) is True


@pytest.fixture
def snapshot(hook_repo: tuple[Path, str]) -> Path:
    return hook_repo[0]


@pytest.fixture
def home(pre_commit_home: Path) -> Path:
    return pre_commit_home


@pytest.fixture
def config_repo(tmp_path: Path) -> Path:
    """A training-config repository: a good and a bad manifest, a Kubernetes file."""
    work = tmp_path / "configs"
    work.mkdir()
    shutil.copy(EXAMPLES / "small-dense.yaml", work / "good.yaml")
    shutil.copy(EXAMPLES / "mistakes.yaml", work / "bad.yaml")
    (work / "k8s.yaml").write_text(K8S, encoding="utf-8")
    (work / "README.md").write_text("configs\n", encoding="utf-8")
    git(work, "init", "-q")
    git(work, "add", "-A")
    return work


def test_hook_under_pre_commit(snapshot: Path, home: Path, config_repo: Path) -> None:
    def try_repo(*files: str) -> subprocess.CompletedProcess[str]:
        return pre_commit(
            "try-repo",
            "--color",
            "never",
            str(snapshot),
            "dpguard-review",
            "--files",
            *files,
            cwd=config_repo,
            home=home,
        )

    good = try_repo("good.yaml", "k8s.yaml", "README.md")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "dpguard review..." in good.stdout
    assert good.stdout.rstrip().endswith("Passed")

    bad = try_repo("bad.yaml", "k8s.yaml", "good.yaml")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    lines = bad.stdout.splitlines()
    assert "- hook id: dpguard-review" in lines
    assert "- exit code: 1" in lines
    for line in BAD_LINES:
        assert line in lines
    assert "2 manifests checked: 1 passed, 1 failed (7 errors, 0 warnings)" in lines
    assert not any(line.startswith("k8s.yaml") for line in lines)


# ---- the project's own .pre-commit-config.yaml -------------------------------------------------


def test_project_config_is_valid(tmp_path: Path) -> None:
    done = pre_commit(
        "validate-config", str(REPO / ".pre-commit-config.yaml"), cwd=REPO, home=tmp_path
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_project_config_hooks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    (local,) = config["repos"]
    assert local["repo"] == "local"  # GitHub-hosted hook repositories are not fetched
    hooks = {h["id"]: h for h in local["hooks"]}
    assert list(hooks) == [
        "ruff-check",
        "ruff-format",
        "dpguard-review-examples",
        "dpguard-test-policies",
    ]
    for name in ("ruff-check", "ruff-format"):
        assert hooks[name]["language"] == "python"
        assert [re.sub(r"==.*", "", d) for d in hooks[name]["additional_dependencies"]] == ["ruff"]
    assert hooks["ruff-check"]["entry"].startswith("ruff check")
    assert hooks["ruff-format"]["entry"].startswith("ruff format")

    # The dpguard hooks pass on this tree: run their entries over the files they select.
    review = hooks["dpguard-review-examples"]
    examples = sorted(p.relative_to(REPO).as_posix() for p in EXAMPLES.glob("*"))
    selected = [
        e for e in examples if re.search(review["files"], e) and not re.search(review["exclude"], e)
    ]
    assert selected == [
        "examples/frontier-moe.yaml",
        "examples/large-dense.yaml",
        "examples/no-pipeline.yaml",
        "examples/small-dense.yaml",
    ]
    monkeypatch.chdir(REPO)
    entry = review["entry"].split()
    assert entry[0] == "dpguard"
    assert main([*entry[1:], *selected]) == 0
    assert main([*entry[1:], "examples/mistakes.yaml"]) == 1  # why it is excluded
    policy = hooks["dpguard-test-policies"]
    assert policy["pass_filenames"] is False
    assert re.search(policy["files"], "policies/core.yaml")
    entry = policy["entry"].split()
    assert entry[:2] == ["dpguard", "test"]
    assert main(entry[1:]) == 0
    capsys.readouterr()
