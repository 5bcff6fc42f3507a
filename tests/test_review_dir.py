"""`dpguard review DIR`: a directory stands for the manifests and framework configs under it,
selected as the published pre-commit hook selects them (its `types_or` through pre-commit's own
`identify`, then `--only-manifests`), with `.git` and hidden directories skipped."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import identify.identify
import pytest

from dpguard.cli import main
from dpguard.discover import declares_manifest, expand

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FRAMEWORKS = REPO / "policies" / "tests" / "frameworks"
HOOK_TYPES = {"yaml", "shell", "toml", "json"}  # .pre-commit-hooks.yaml, dpguard-review


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A training-config repository with everything a directory walk must tell apart."""

    def put(relative: str, source: Path | str, mode: int = 0o644) -> None:
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copyfile(source, target)
        else:
            target.write_text(source, encoding="utf-8")
        target.chmod(mode)

    put(".git/HEAD", "ref: refs/heads/main\n")
    put(".git/manifest.yaml", EXAMPLES / "small-dense.yaml")  # never inside .git
    put(".github/workflows/run.yaml", EXAMPLES / "small-dense.yaml")  # hidden directory
    put("runs/.draft.yaml", EXAMPLES / "mistakes.yaml")  # hidden file
    put("runs/a.yaml", EXAMPLES / "small-dense.yaml")
    put("runs/sub/b.yaml", EXAMPLES / "mistakes.yaml")
    put("runs/train.sh", FRAMEWORKS / "megatron-vpp.sh")
    put("runs/launch", FRAMEWORKS / "megatron-vpp.sh", 0o755)  # a shell script by its #! line
    put("runs/launch-copy", FRAMEWORKS / "megatron-vpp.sh")  # not executable: no type
    put("runs/titan.toml", FRAMEWORKS / "torchtitan-pp1.toml")
    put("runs/ds.json", FRAMEWORKS / "deepspeed-pipe.json")
    put("runs/notes.md", "# notes\n")
    put("runs/other.yaml", "foo: 1\n")  # YAML, but no manifest
    put("runs/package.json", '{"name": "x"}\n')
    put("policies/team.yaml", (REPO / "policies" / "core.yaml").read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


EXPECTED = [
    "runs/a.yaml",
    "runs/ds.json",
    "runs/launch",
    "runs/titan.toml",
    "runs/train.sh",
    "runs/sub/b.yaml",
]


def test_a_directory_stands_for_its_manifests_and_framework_configs(tree: Path) -> None:
    assert expand(["."]) == (EXPECTED, [])
    assert expand(["runs/sub", "runs/sub/b.yaml", "policies"]) == (
        ["runs/sub/b.yaml"],
        ["policies"],  # holds only a policy set
    )


def test_the_selection_is_the_hooks(tree: Path) -> None:
    """What pre-commit would pass the hook (identify's tags for types_or), kept by
    --only-manifests, outside hidden directories: the same files."""
    hook = []
    for directory, subdirs, names in os.walk("."):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        for name in names:
            path = os.path.normpath(os.path.join(directory, name))
            tags = identify.identify.tags_from_path(path)
            if not name.startswith(".") and tags & HOOK_TYPES and declares_manifest(path):
                hook.append(path)
    assert sorted(hook) == sorted(EXPECTED)


def test_review_of_a_directory(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review", "--format", "json", "."]) == 1  # runs/sub/b.yaml has mistakes
    captured = capsys.readouterr()
    assert [f["path"] for f in json.loads(captured.out)["files"]] == EXPECTED
    assert captured.err == ""


def test_an_empty_directory_says_so_and_passes(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tree / "empty").mkdir()
    assert main(["review", "empty"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "dpguard: empty: no manifest or framework config under it\n"
    assert captured.out.splitlines()[-1] == (
        "0 manifests checked: 0 passed, 0 failed (0 errors, 0 warnings)"
    )


def test_a_missing_directory_is_still_exit_2(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["review", "nowhere/"]) == 2
    assert "nowhere/" in capsys.readouterr().err
