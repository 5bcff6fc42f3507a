"""JSON and Markdown reports render each file's section as soon as the file is judged and keep
only that text (reporters.PARTS), so a batch's memory stays flat: the report must be byte for
byte the one rendered from the whole results at the end."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pytest

from dpguard.check import FileResult
from dpguard.pipeline import SHOWS_PAGE, review
from dpguard.reporters import PARTS, Report, render

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from corpus import write_realistic  # noqa: E402

TODAY = dt.date(2026, 11, 27)


def corpus(tmp_path: Path) -> list[str]:
    """The examples (one with errors), framework configs and published-run manifests as
    written, and 60 realistic variants (infeasible plans and advisories among them)."""
    files = sorted(str(p) for p in (REPO / "examples").glob("*.yaml"))
    files += sorted(str(p) for p in (REPO / "tests" / "data" / "frameworks").glob("*.*"))
    files += sorted(str(p) for p in (REPO / "tests" / "data" / "calibration").glob("*.yaml"))[:20]
    files += [str(p) for p in write_realistic(tmp_path, 60)]
    return [f for f in files if not f.endswith(".yaml") or "expected" not in f]


@pytest.mark.parametrize("fmt", sorted(PARTS))
def test_sections_rendered_early_are_the_report_rendered_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    monkeypatch.chdir(REPO)
    files = corpus(tmp_path)
    page = fmt in SHOWS_PAGE
    late = review(files, today=TODAY, shows_page=page)
    early = review(files, today=TODAY, shows_page=page, part=PARTS[fmt])
    assert all(
        r.part is not None and r.plan is None and r.manifest is None for r in early.report.results
    )
    assert render(early.report, fmt) == render(late.report, fmt)
    assert early.internal == late.internal == ()


def test_a_bug_rendering_one_section_is_that_files_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    files = [
        str(REPO / "examples" / "small-dense.yaml"),
        str(REPO / "examples" / "large-dense.yaml"),
    ]

    def part(report: Report, result: FileResult) -> str:
        crashed = any(f.code == "D001" for f in result.findings)
        if result.path.endswith("small-dense.yaml") and not crashed:
            raise RuntimeError("a reporter bug")
        return PARTS["json"](report, result)

    reviewed = review(files, today=TODAY, shows_page=True, part=part)
    assert len(reviewed.internal) == 1 and "small-dense.yaml" in reviewed.internal[0]
    small, large = reviewed.report.results
    assert [f.code for f in small.findings] == ["D001"]
    assert "D001" not in {f.code for f in large.findings}
    assert json.loads(render(reviewed.report, "json"))["summary"]["files"] == 2


@pytest.mark.parametrize("fmt", ["json", "text", "markdown"])
def test_a_report_written_in_pieces_is_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """`review` writes a JSON report piece by piece (render_pieces, output.deliver) rather than
    joined: the same bytes on stdout and in an --output file, and more than one piece."""
    from dpguard.reporters import render_pieces
    from dpguard.reporters.output import deliver

    monkeypatch.chdir(REPO)
    files = corpus(tmp_path)[:12]
    report = review(files, today=TODAY, shows_page=fmt in SHOWS_PAGE, part=PARTS.get(fmt)).report
    pieces = render_pieces(report, fmt)
    assert "".join(pieces) == render(report, fmt)
    assert (len(pieces) > 1) is (fmt == "json")
    out = tmp_path / f"report.{fmt}"
    deliver(pieces, str(out))
    assert out.read_text(encoding="utf-8") == render(report, fmt)
