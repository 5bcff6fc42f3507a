"""README's promises: the two Quick-start commands are the ones CI runs, and every document and
command it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from dpguard.cli import COMMANDS, main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def quick_start() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_quick_start_has_exactly_the_two_commands() -> None:
    assert quick_start() == [
        "pip install . && dpguard review examples/frontier-moe.yaml",
        "pip install '.[test]' && pytest",
    ]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pip install --quiet '.[test]'" in ci
    assert re.search(r"^pytest ", ci, re.M)


def test_quick_start_review_passes(capsys: object, monkeypatch: object) -> None:
    monkeypatch.chdir(REPO)  # type: ignore[attr-defined]
    assert main(["review", "examples/frontier-moe.yaml"]) == 0


def test_linked_files_exist() -> None:
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links, "README links nothing"
    for link in links:
        assert (REPO / link).exists(), link


def test_every_command_is_documented() -> None:
    commands = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    for name in COMMANDS:
        assert re.search(rf"`(dpguard )?{re.escape(name)}\b", commands), name
