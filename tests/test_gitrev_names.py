"""`review --baseline` reads the base versions of files with any name git can store: a newline,
a colon, a leading dash, glob characters, pathspec magic, spaces, tabs, quotes, non-ASCII and
bytes that are not UTF-8. No name may shift git's answers onto another file (a file named
``a\\nHEAD:m.yaml`` once made a changed m.yaml read as unchanged).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import git

from dpguard import gitrev
from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent
SMALL = (REPO / "examples" / "small-dense.yaml").read_text(encoding="utf-8")
CHANGED = SMALL.replace("tokens: 1T", "tokens: 2T")

# Each name is a file of the base commit, under runs/ and at the top.
NAMES = (
    "a\nHEAD:m.yaml",  # read line by line, this was two requests: `BASE:a` and `HEAD:m.yaml`
    "trailing-newline.yaml\n",
    "colon:name.yaml",
    "-leading-dash.yaml",
    "--end-of-options.yaml",
    "*.yaml",
    "?.yaml",
    "[ab].yaml",
    ":!m.yaml",  # pathspec magic: "everything but m.yaml"
    ":(top)x.yaml",
    "with space.yaml",
    " leading and trailing space.yaml ",
    "tab\there.yaml",
    'quote"and\\backslash.yaml',
    "naïve-日本語.yaml",
    "dir with space/nested:*?.yaml",
    "\udcffnot-utf-8.yaml",  # the byte 0xff, as Python names it (surrogateescape)
)


def _content(name: str) -> bytes:
    # distinct for every name; NULs and newlines so that sizes, not lines, must be honoured
    return b"\0\nbase of " + os.fsencode(name) + b"\n\n"


def _commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def _write(root: Path, name: str, data: bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A base commit holding every name and m.yaml, and a second commit that changes m.yaml
    (the work tree is that second commit)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    for name in NAMES:
        try:
            _write(root, name, _content(name))
        except (OSError, UnicodeError):
            pytest.skip(f"this file system cannot hold a file named {name!r}")
    _write(root, "m.yaml", b"m.yaml at the base\n")
    _write(root, "same.yaml", _content("m.yaml"))  # the same blob as no other: a shared id
    _write(root, "copy.yaml", _content("m.yaml"))
    base = _commit(root, "base")
    git(root, "tag", "base", base)
    _write(root, "m.yaml", b"m.yaml now\n")
    _commit(root, "head")
    return root


def test_every_name_reads_its_own_bytes(repo: Path) -> None:
    baseline = gitrev.resolve("base", repo)
    asked = [*NAMES, "m.yaml", "same.yaml", "copy.yaml"]
    got = baseline.read(asked)
    assert list(got) == asked
    for name in NAMES:
        assert got[name] == _content(name), name
    assert got["m.yaml"] == b"m.yaml at the base\n"  # not HEAD's version
    assert got["same.yaml"] == got["copy.yaml"] == _content("m.yaml")


@pytest.mark.parametrize(
    "absent",
    [
        "a",  # the part of "a\nHEAD:m.yaml" before the newline
        "HEAD:m.yaml",  # the part after it, which cat-file once read as a request
        "m.yaml\n",
        "*",  # a glob that matches every file, read literally matches none
        ":!x.yaml",
        "dir with space",  # a directory: not a file
        "dir with space/",
        "dir with space/*",
        ".",
        "",
        "./m.yaml",
        "runs/../m.yaml",
        "nul\0.yaml",
        "never-committed.yaml",
    ],
)
def test_what_is_not_a_file_at_the_base_reads_as_none(repo: Path, absent: str) -> None:
    got = gitrev.resolve("base", repo).read([absent, "m.yaml"])
    assert got == {absent: None, "m.yaml": b"m.yaml at the base\n"}


def test_a_submodule_entry_is_not_a_file(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},sub:*.yaml")
    commit = _commit(repo, "a gitlink")
    got = gitrev.resolve(commit, repo).read(["sub:*.yaml", "*.yaml"])
    assert got == {"sub:*.yaml": None, "*.yaml": _content("*.yaml")}


def test_many_paths_are_listed_in_several_commands(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, ...]] = []
    real = gitrev._git

    def counting(
        cwd: Path | str, *argv: str, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        return real(cwd, *argv, stdin=stdin)

    monkeypatch.setattr(gitrev, "LS_TREE_PATHS", 4)
    monkeypatch.setattr(gitrev, "_git", counting)
    asked = [*NAMES, "m.yaml", "never-committed.yaml"]
    got = gitrev.resolve("base", repo).read(asked)
    listed = [argv[argv.index("--") + 1 :] for argv in calls if argv[0] == "ls-tree"]
    assert [len(chunk) for chunk in listed] == [4, 4, 4, 4, 3]
    assert [p for chunk in listed for p in chunk] == asked
    assert [argv[0] for argv in calls].count("cat-file") == 1
    expected: dict[str, bytes | None] = {name: _content(name) for name in NAMES}
    expected.update({"m.yaml": b"m.yaml at the base\n", "never-committed.yaml": None})
    assert got == expected


def test_a_blob_missing_from_the_clone_is_an_error_not_an_added_file(repo: Path) -> None:
    blob = git(repo, "rev-parse", "base:m.yaml")
    objects = repo / ".git" / "objects"
    (objects / blob[:2] / blob[2:]).unlink()  # loose objects: the fresh repository is unpacked
    baseline = gitrev.resolve("base", repo)
    with pytest.raises(gitrev.RevisionError) as caught:
        baseline.read(["m.yaml", "*.yaml"])
    assert str(caught.value) == (
        f"cannot read m.yaml at base ({baseline.commit[:12]}): object {blob} is missing from "
        "this clone; fetch the base commit again"
    )


def test_a_git_failure_is_a_revision_error(repo: Path) -> None:
    baseline = gitrev.resolve("base", repo)
    gone = gitrev.Baseline(baseline.root, "gone", "0" * 40)
    with pytest.raises(gitrev.RevisionError) as caught:
        gone.read(["m.yaml"])
    assert str(caught.value).startswith("cannot list files at gone (000000000000): ")


# ---- through the CLI ------------------------------------------------------------------------

MANIFESTS = ("a\nHEAD:m.yaml", "-leading-dash.yaml", "*.yaml", ":!m.yaml", "naïve 日本.yaml")


@pytest.fixture
def manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """runs/ at the base: the manifests above and m.yaml; the next commit changes m.yaml,
    removes ``*.yaml`` and leaves the others as they were."""
    root = tmp_path / "repo"
    runs = root / "runs"
    runs.mkdir(parents=True)
    git(root, "init", "-q")
    for name in (*MANIFESTS, "m.yaml"):
        (runs / name).write_text(SMALL.replace("small-dense", f"run-{len(name)}"), "utf-8")
    _commit(root, "base")
    git(root, "tag", "base")
    (runs / "m.yaml").write_text(CHANGED, encoding="utf-8")
    (runs / "*.yaml").unlink()
    _commit(root, "head")
    monkeypatch.chdir(root)
    return root


def _review(capsys: pytest.CaptureFixture[str], *files: str) -> tuple[int, dict[str, str]]:
    code = main(["review", "--baseline", "base", "--format", "json", *files])
    out, err = capsys.readouterr()
    assert err == ""
    return code, {c["path"]: c["status"] for c in json.loads(out)["changes"]}


def test_review_baseline_sees_the_change_beside_any_name(
    manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [f"runs/{name}" for name in MANIFESTS if name != "*.yaml"]
    code, statuses = _review(capsys, *files, "runs/m.yaml")
    assert code == 0
    assert statuses == {**{f: "unchanged" for f in files}, "runs/m.yaml": "modified"}


def test_review_baseline_of_a_directory_lists_and_reads_any_name(
    manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, statuses = _review(capsys, "runs")
    assert code == 0
    expected = {f"runs/{name}": "unchanged" for name in MANIFESTS}
    assert statuses == {**expected, "runs/m.yaml": "modified", "runs/*.yaml": "removed"}


def test_review_baseline_in_a_subprocess_with_a_dash_name(manifests: Path) -> None:
    """The names travel through a real command line too (a leading dash after ./)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpguard",
            "review",
            "--baseline",
            "base",
            "--format",
            "json",
            "./runs/-leading-dash.yaml",
            "runs/a\nHEAD:m.yaml",
            "runs/m.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    statuses = {c["path"]: c["status"] for c in json.loads(done.stdout)["changes"]}
    assert statuses == {
        "./runs/-leading-dash.yaml": "unchanged",
        "runs/a\nHEAD:m.yaml": "unchanged",
        "runs/m.yaml": "modified",
    }
