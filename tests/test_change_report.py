"""The change report's wording (`dpguard diff OLD NEW`, `dpguard review --baseline REV`): values
as the manifest writes them, readable counts, plurals, unchanged files kept out of the changed
count, and renames paired only when both versions train the same model. Real files on disk and
real scratch git repositories."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from gitrepo import git

from dpguard.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SMALL = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
# Another model with the same layout of keys: git's rename detection finds it similar enough
SEVEN = (
    SMALL.replace("name: small-dense", "name: seven")
    .replace("total_params: 13B", "total_params: 7B")
    .replace("layers: 40", "layers: 32")
    .replace("hidden_size: 5120", "hidden_size: 4096")
    .replace("attention_heads: 40", "attention_heads: 32")
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def write(path: str, text: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")


def commit_then(root: Path, base: dict[str, str], head: dict[str, str | None]) -> str:
    """A repository at `root` (the current directory) whose commit holds `base`; `head` is then
    written to the work tree (None deletes) and staged. Returns the commit id."""
    root.mkdir(parents=True)
    os.chdir(root)
    git(root, "init", "-q")
    for name, text in base.items():
        write(name, text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    for name, new in head.items():
        if new is None:
            os.remove(name)
        else:
            write(name, new)
    git(root, "add", "-A")
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no .dpguard.yaml of the checkout applies
    return tmp_path


def test_booleans_as_the_manifest_writes_them(here: Path, capsys: pytest.CaptureFixture[str]):
    write("old.yaml", SMALL)
    write("new.yaml", SMALL.replace("  tokens: 1T\n", "  tokens: 1T\n  activation_offload: true\n"))
    for fmt in ("text", "markdown"):
        _, out = run(capsys, "diff", "old.yaml", "new.yaml", "--format", fmt)
        assert "training.activation_offload false -> true" in out, fmt
        assert "True" not in out and "False" not in out, fmt
    _, out = run(capsys, "diff", "old.yaml", "new.yaml", "--format", "json")
    (key,) = json.loads(out)["changes"][0]["changed_keys"]
    assert (key["before"], key["after"]) == (False, True)  # the contract keeps JSON's own values


def test_counts_read_as_the_plan_reads_them(here: Path, capsys: pytest.CaptureFixture[str]):
    """Token and parameter counts in the plan's form (dpguard.manifest.format_quantity: 15T,
    13B), exact ones that form cannot say with thousands separators, other numbers too."""
    write("old.yaml", SMALL)
    write(
        "new.yaml",
        SMALL.replace("tokens: 1T", "tokens: 15T")
        .replace("total_params: 13B", "total_params: 13000000001")
        .replace("gpus: 64", "gpus: 1024"),
    )
    _, out = run(capsys, "diff", "old.yaml", "new.yaml")
    assert "changed: training.tokens 1T -> 15T" in out
    assert "changed: model.total_params 13B -> 13,000,000,001" in out
    assert "changed: cluster.gpus 64 -> 1,024" in out
    assert "000000000" not in out
    _, page = run(capsys, "plan", "new.yaml")
    assert "15T tokens" in page  # the plan's words for the same count
    for fmt in ("markdown", "github"):  # github: a notice on each key, as the cost moved
        _, out = run(capsys, "diff", "old.yaml", "new.yaml", "--format", fmt)
        assert "training.tokens 1T -> 15T" in out, fmt
        assert "cluster.gpus 64 -> 1,024" in out, fmt


def test_counts_are_pluralised(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write("old.yaml", SMALL.replace("  gpus: 64\n", "  gpus: [64\n"))  # one error: Y001
    write("new.yaml", SMALL.replace("tokens: 1T", "tokens: 2T"))
    _, out = run(capsys, "diff", "old.yaml", "new.yaml")
    lines = out.splitlines()
    assert "layout: unparseable (1 error) -> 1f1b P=2" in out
    assert lines[-2].startswith("total over 1 changed file: GPU-hours")
    assert "(1 not sized, left out)" in lines[-2]
    assert lines[-1] == "1 manifest checked now: 1 passed, 0 failed (0 errors, 0 warnings)"
    _, md = run(capsys, "diff", "old.yaml", "new.yaml", "--format", "markdown")
    assert "**1 manifest checked now: 1 passed, 0 failed (0 errors, 0 warnings)**" in md
    assert "1 changed file could not be sized and is left out of the total." in md
    mistakes = (EXAMPLES / "mistakes.yaml").read_text(encoding="utf-8")
    write("bad-old.yaml", mistakes)
    write("bad-new.yaml", mistakes.replace("name: ", "name: x", 1))  # 7 findings still
    _, md = run(capsys, "diff", "bad-old.yaml", "bad-new.yaml", "--format", "markdown")
    assert "7 findings unchanged." in md and "1 manifest checked now: 0 passed, 1 failed" in md
    assert "manifests checked" not in md and " 1 errors" not in md


def test_an_unchanged_file_is_not_a_change(here: Path, capsys: pytest.CaptureFixture[str]):
    """A file the pull request did not touch, and one whose edit changes nothing dpguard judges
    (a comment), are listed as unchanged: no details, no place in the changed count or the
    totals. The summary still counts every manifest checked now."""
    base = commit_then(
        here / "repo",
        {"a.yaml": SMALL, "same.yaml": SMALL, "noted.yaml": SMALL},
        {"a.yaml": SMALL.replace("tokens: 1T", "tokens: 2T"), "noted.yaml": "# why\n" + SMALL},
    )
    files = ("a.yaml", "same.yaml", "noted.yaml")
    _, out = run(capsys, "review", "--baseline", base, *files)
    lines = out.splitlines()
    assert f"same.yaml: unchanged since {base} (passed)" in lines
    assert f"noted.yaml: modified since {base}, nothing dpguard judges changed (passed)" in lines
    assert [line for line in lines if line.startswith("  layout:")] == [
        "  layout: 1f1b P=2 M=32 T=1 EP=1 on 64 A100-80GB (dpguard's plan)"
    ]  # a.yaml's details only
    assert lines[-2].startswith(
        "total over 1 changed file (2 unchanged): GPU-hours 113,739 -> 227,479 (+113,739, +100.0%)"
    )
    assert lines[-1] == "3 manifests checked now: 3 passed, 0 failed (0 errors, 0 warnings)"

    _, md = run(capsys, "review", "--baseline", base, "--format", "markdown", *files)
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `a.yaml`"]
    assert "Unchanged: `same.yaml` (passed), `noted.yaml` (passed)." in md
    assert "### `same.yaml`" not in md and "### `noted.yaml`" not in md
    assert "| **total** | | **113,739 -> 227,479** | **+113,739, +100.0%** |" in md

    _, data = run(capsys, "review", "--baseline", base, "--format", "json", *files)
    report = json.loads(data)
    statuses = {c["path"]: c["status"] for c in report["changes"]}
    # the contract's status stays the file's: unchanged is byte-identical (docs/policies.md)
    assert statuses == {"a.yaml": "modified", "same.yaml": "unchanged", "noted.yaml": "modified"}
    assert report["totals"]["gpu_hours_before"] == pytest.approx(113_739, abs=1)

    _, out = run(capsys, "review", "--baseline", base, "--format", "markdown", "same.yaml")
    assert "No manifest changed." in out and "| **total**" not in out


def test_diff_of_identical_files(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write("old.yaml", SMALL)
    write("new.yaml", SMALL)
    _, out = run(capsys, "diff", "old.yaml", "new.yaml")
    assert out.splitlines() == [
        "new.yaml: unchanged (passed)",
        "no file changed (1 unchanged)",
        "1 manifest checked now: 1 passed, 0 failed (0 errors, 0 warnings)",
    ]


def test_a_different_model_is_not_a_rename(here: Path, capsys: pytest.CaptureFixture[str]):
    """git pairs a deleted manifest with an added one whose text is similar enough; two
    manifests of different models are a removal and an addition all the same."""
    base = commit_then(here / "repo", {"old.yaml": SMALL}, {"old.yaml": None, "new.yaml": SEVEN})
    names = git(here / "repo", "diff", "-M", "--name-status", "-z", base, "--").split("\0")
    assert names[0].startswith("R") and names[1:3] == ["old.yaml", "new.yaml"]  # git pairs them
    _, data = run(capsys, "review", "--baseline", base, "--format", "json", "new.yaml", "old.yaml")
    changes = {c["path"]: c for c in json.loads(data)["changes"]}
    assert {p: c["status"] for p, c in changes.items()} == {
        "new.yaml": "added",
        "old.yaml": "removed",
    }
    assert changes["new.yaml"]["base_path"] is None
    _, out = run(capsys, "review", "--baseline", base, "new.yaml", "old.yaml")
    assert "renamed" not in out and "total over 2 changed files" in out
    _, out = run(capsys, "review", "--baseline", base, "new.yaml")  # only the new path passed
    assert out.startswith(f"new.yaml: added since {base}\n")


def test_a_rename_with_an_edit_is_still_a_rename(here: Path, capsys: pytest.CaptureFixture[str]):
    """The same model (architecture, parameters, layers, width) under a new name, with its
    budget and its metadata.name edited: one rename."""
    moved = SMALL.replace("tokens: 1T", "tokens: 2T").replace("small-dense", "moved")
    base = commit_then(here / "repo", {"old.yaml": SMALL}, {"old.yaml": None, "new.yaml": moved})
    _, data = run(capsys, "review", "--baseline", base, "--format", "json", "new.yaml", "old.yaml")
    (change,) = json.loads(data)["changes"]
    assert (change["path"], change["base_path"], change["status"]) == (
        "new.yaml",
        "old.yaml",
        "renamed",
    )
