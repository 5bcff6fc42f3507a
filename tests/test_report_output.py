"""`dpguard review --output FILE`: written atomically (a temporary file in the same directory,
then a rename); on any error nothing is left behind and an existing report stays as it was."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dpguard import reporters
from dpguard.cli import main
from dpguard.reporters.output import write_atomic

REPO = Path(__file__).resolve().parent.parent
MANIFEST = str(REPO / "examples" / "small-dense.yaml")


@pytest.fixture(autouse=True)
def _in_empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["review", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_output_written_and_nothing_else(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "--format", "json", "--output", "out/report.json", MANIFEST)
    assert (code, out) == (2, "")
    assert err == (
        "dpguard: error: cannot write the report to out/report.json: No such file or directory\n"
    )
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "out").mkdir()
    code, out, err = run(capsys, "--format", "json", "--output", "out/report.json", MANIFEST)
    assert (code, out, err) == (0, "", "")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["report.json"]
    _, stdout_report, _ = run(capsys, "--format", "json", MANIFEST)
    assert (tmp_path / "out" / "report.json").read_text(encoding="utf-8") == stdout_report


def test_output_dash_is_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "-o", "-", MANIFEST)
    assert code == 0
    assert out.endswith("1 manifest checked: 1 passed, 0 failed (0 errors, 0 warnings)\n")
    assert list(tmp_path.iterdir()) == []


def test_output_file_mode_follows_the_umask(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = os.umask(0o027)
    try:
        assert run(capsys, "-o", "report.txt", MANIFEST)[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report.txt").stat().st_mode) == 0o640


def _boom(*args: object, **kwargs: object) -> str:
    raise RuntimeError("renderer exploded")


@pytest.mark.parametrize("existing", [False, True])
def test_a_failing_render_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    existing: bool,
) -> None:
    if existing:
        (tmp_path / "report.sarif").write_text("the previous report\n", encoding="utf-8")
    monkeypatch.setitem(reporters.RENDERERS, "sarif", _boom)
    code, out, err = run(capsys, "--format", "sarif", "--output", "report.sarif", MANIFEST)
    assert (code, out) == (3, "")
    assert err.startswith("dpguard: internal error: RuntimeError: renderer exploded")
    names = sorted(p.name for p in tmp_path.iterdir())
    if existing:
        assert names == ["report.sarif"]
        assert (tmp_path / "report.sarif").read_text(encoding="utf-8") == "the previous report\n"
    else:
        assert names == []


def test_a_failing_write_removes_the_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "report.json").write_text("old\n", encoding="utf-8")

    def fail(src: str, dst: object) -> None:
        assert Path(src).parent == tmp_path  # the temporary file sits beside the target
        assert Path(src).read_text(encoding="utf-8") == "new\n"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(reporters.output.OutputError) as caught:
        write_atomic(str(tmp_path / "report.json"), "new\n")
    assert str(caught.value) == (
        f"cannot write the report to {tmp_path / 'report.json'}: No space left on device"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    assert (tmp_path / "report.json").read_text(encoding="utf-8") == "old\n"


def test_an_interrupted_write_removes_the_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(str(tmp_path / "report.md"), "text\n")
    assert list(tmp_path.iterdir()) == []


def test_output_onto_a_directory_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "report").mkdir()
    code, out, err = run(capsys, "-o", "report", MANIFEST)
    assert (code, out) == (2, "")
    assert err == (
        "dpguard: error: cannot write the report to report: it is a directory, not a regular "
        "file; nothing was written\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["report"]
    assert list((tmp_path / "report").iterdir()) == []
