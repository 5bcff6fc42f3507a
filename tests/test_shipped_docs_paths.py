"""The shipped rule docs (policies/*.yaml, printed by `dpguard explain`), docs/ and the README
speak for themselves: no mention of "the seed" (a design note users never see), no path that
leaves the repository, no link or document name that is not shipped beside them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent
FILES = sorted(
    [*REPO.glob("policies/*.yaml"), *REPO.glob("docs/*.md"), REPO / "README.md"],
)
IDS = [p.relative_to(REPO).as_posix() for p in FILES]


def prose(path: Path) -> str:
    """The text a reader takes as statements about this project: Markdown without its fenced
    code blocks (those are examples of a user's own repository), YAML whole."""
    text = path.read_text(encoding="utf-8")
    return re.sub(r"```.*?```", "", text, flags=re.S) if path.suffix == ".md" else text


def inside(path: Path) -> bool:
    return path.resolve().is_relative_to(REPO) and path.exists()


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_no_mention_of_the_seed(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [line for line in lines if re.search(r"\bseed\b", line, re.I)] == []


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_relative_path_and_link_is_shipped(path: Path) -> None:
    text = prose(path)
    missing = []
    # ../ paths, resolved from the file: never outside the repository (`.../x` is an ellipsis)
    for match in re.finditer(r"(?<![\w/.])((?:\.\./)+[\w./-]+)", text):
        if not inside(path.parent / match[1]):
            missing.append(match[1])
    # a document named on its own (`schedules.md`) is one of ours, in docs/ or at the top
    for match in re.finditer(r"(?<![\w/.-])([\w.-]+\.md)(?![\w.])", text):
        if not (inside(REPO / match[1]) or inside(REPO / "docs" / match[1])):
            missing.append(match[1])
    if path.suffix == ".md":
        for match in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if not match[1].startswith(("http://", "https://")) and not inside(
                path.parent / match[1]
            ):
                missing.append(match[1])
    assert missing == []


def test_explain_prints_no_seed(capsys: pytest.CaptureFixture[str]) -> None:
    """What users actually read: every shipped rule's explanation."""
    assert main(["rules"]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line[:1].isupper()]
    assert len(ids) > 20
    for rule_id in ids:
        assert main(["explain", rule_id]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\bseed\b", out, re.I)
    assert "domain.md" not in out and "../shared" not in out
