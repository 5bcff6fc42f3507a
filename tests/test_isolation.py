"""One file never loses the batch, whatever happens while it is judged or rendered: a bug is
that file's D001 finding (exit 3 once every file is reported), a file that runs past the
per-file time budget is its D002 finding (exit 1), and values a file makes huge are cut in
messages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import dpguard.pipeline
import dpguard.reporters.text
from dpguard.cli import main
from dpguard.findings import MAX_MESSAGE, MAX_WORD, Finding, Severity

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "small-dense.yaml"


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.chdir(tmp_path)
    names = [f"ok{i}.yaml" for i in range(3)] + ["bad.yaml"]
    for name in names:
        shutil.copy(EXAMPLE, tmp_path / name)
    return names


def test_a_file_past_the_time_budget_is_its_own_finding(
    files: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = dpguard.pipeline.check_file

    def endless(path: str, *args: Any, **kwargs: Any) -> Any:
        while path == "bad.yaml":  # interrupted by the budget's timer
            pass
        return real(path, *args, **kwargs)

    assert main(["review", "ok0.yaml"]) == 0  # imports and loads paid outside the budget
    monkeypatch.setattr(dpguard.pipeline, "check_file", endless)
    monkeypatch.setenv("DPGUARD_FILE_SECONDS", "2")
    code = main(["review", "--format", "json", "-o", "r.json", *files])
    assert code == 1
    report = json.loads(Path("r.json").read_text(encoding="utf-8"))
    found = {f["path"]: [x["code"] for x in f["findings"]] for f in report["files"]}
    assert found == {"ok0.yaml": [], "ok1.yaml": [], "ok2.yaml": [], "bad.yaml": ["D002"]}
    capsys.readouterr()


def test_a_reporter_bug_in_one_file_loses_no_other_file(
    files: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = dpguard.reporters.text.decision_line

    def fragile(result: Any) -> str | None:
        if result.path == "bad.yaml" and all(f.code != "D001" for f in result.findings):
            raise RuntimeError("cannot render")
        return real(result)

    monkeypatch.setattr(dpguard.reporters.text, "decision_line", fragile)
    code = main(["review", *files])
    out, err = capsys.readouterr()
    assert code == 3
    assert "bad.yaml:1:1: error D001 internal error while checking this file: RuntimeError" in out
    assert sum(line.startswith("ok") for line in out.splitlines()) == 3, out
    assert "internal error rendering bad.yaml" in err


def test_messages_cut_what_a_file_made_huge() -> None:
    finding = Finding("m.yaml", 1, 1, "F002", Severity.WARNING, "value " + "9" * 100_000)
    assert len(finding.message) < MAX_WORD + 60
    assert finding.message.endswith(f"({100_000 - MAX_WORD:,} more characters)")
    spaced = Finding("m.yaml", 1, 1, "F002", Severity.WARNING, "word " * 10_000)
    assert len(spaced.message) < MAX_MESSAGE + 60
    short = "a message that quotes nothing long"
    assert Finding("m.yaml", 1, 1, "F002", Severity.WARNING, short).message == short
