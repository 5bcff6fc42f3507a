"""Where a report goes: `--output` (review, diff) and `bubble --svg` write only a regular file or
create one. A symlink (even a dangling one), a device, a FIFO, a socket or a directory at the
target is refused with one message and exit 2, and the node stays as it was; an existing
report keeps its permissions; nothing temporary is left behind. A stdout that cannot be written
(`> /dev/full`) is one message and exit 2 too, never a traceback.
"""

from __future__ import annotations

import errno
import io
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpguard.cli import main
from dpguard.reporters import output
from dpguard.reporters.output import OutputError, emit, write_atomic

REPO = Path(__file__).resolve().parent.parent
MANIFEST = str(REPO / "examples" / "small-dense.yaml")


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative names keep a socket's path short


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _refused(path: str, kind: str) -> str:
    return (
        f"cannot write the report to {path}: it is {kind}, not a regular file; nothing was written"
    )


# ---- nodes that are not regular files ---------------------------------------------------------


def test_a_symlink_to_a_file_is_refused_and_both_stay(tmp_path: Path) -> None:
    Path("real.json").write_text("the old report\n", encoding="utf-8")
    os.chmod("real.json", 0o640)
    os.symlink("real.json", "link.json")
    with pytest.raises(OutputError) as caught:
        write_atomic("link.json", "new\n")
    assert str(caught.value) == _refused("link.json", "a symbolic link")
    assert os.readlink("link.json") == "real.json"
    assert Path("real.json").read_text(encoding="utf-8") == "the old report\n"
    assert stat.S_IMODE(os.stat("real.json").st_mode) == 0o640
    assert _listing(tmp_path) == ["link.json", "real.json"]


def test_a_dangling_symlink_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    os.symlink("elsewhere/report.json", "link.json")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(OutputError) as caught:
        write_atomic("link.json", "new\n")
    assert str(caught.value) == _refused("link.json", "a symbolic link")
    assert os.readlink("link.json") == "elsewhere/report.json"
    assert _listing(tmp_path) == ["elsewhere", "link.json"]
    assert _listing(tmp_path / "elsewhere") == []


def test_a_symlink_to_a_directory_as_the_target_is_refused(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    os.symlink("reports", "out")
    with pytest.raises(OutputError) as caught:
        write_atomic("out", "new\n")
    assert str(caught.value) == _refused("out", "a symbolic link")
    assert _listing(tmp_path) == ["out", "reports"] and _listing(tmp_path / "reports") == []


def test_a_symlinked_directory_on_the_way_is_fine(tmp_path: Path) -> None:
    """Only the last component must be a regular file: a directory reached through a link is
    where the report goes, as the user asked."""
    (tmp_path / "reports").mkdir()
    os.symlink("reports", "out")
    write_atomic("out/r.json", "new\n")
    assert (tmp_path / "reports" / "r.json").read_text(encoding="utf-8") == "new\n"
    assert _listing(tmp_path / "reports") == ["r.json"]


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "report").mkdir()
    with pytest.raises(OutputError) as caught:
        write_atomic("report", "new\n")
    assert str(caught.value) == _refused("report", "a directory")
    assert _listing(tmp_path) == ["report"] and _listing(tmp_path / "report") == []


def test_a_name_ending_in_a_slash_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError) as caught:
        write_atomic("report/", "new\n")
    assert str(caught.value) == (
        "cannot write the report to report/: it names a directory, not a file"
    )
    assert _listing(tmp_path) == []


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A FIFO with a reader open (non-blocking), so that a writer that opened it by mistake
    would not hang the test but leave bytes to find."""
    os.mkfifo("report.json")
    reader = os.open("report.json", os.O_RDONLY | os.O_NONBLOCK)
    yield "report.json", reader
    os.close(reader)


def test_a_fifo_is_refused_without_opening_it(tmp_path: Path, fifo: tuple[str, int]) -> None:
    path, reader = fifo
    with pytest.raises(OutputError) as caught:
        write_atomic(path, "new\n")
    assert str(caught.value) == _refused(path, "a FIFO")
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    assert os.read(reader, 100) == b""  # no writer: end of file, and nothing was written
    assert _listing(tmp_path) == [path]


def test_a_socket_is_refused(tmp_path: Path) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("report.json")
        with pytest.raises(OutputError) as caught:
            write_atomic("report.json", "new\n")
    finally:
        server.close()
    assert str(caught.value) == _refused("report.json", "a socket")
    assert stat.S_ISSOCK(os.lstat("report.json").st_mode)
    assert _listing(tmp_path) == ["report.json"]


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_a_device_is_refused_and_stays_a_device(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.path.exists(device) or not stat.S_ISCHR(os.lstat(device).st_mode):
        pytest.skip(f"no {device} character device here")
    if not os.access(device, os.W_OK):
        pytest.skip(f"{device} is not writable here")

    def never(src: object, dst: object) -> None:  # whatever regresses, /dev stays as it is
        raise AssertionError(f"{src} would replace {dst}")

    monkeypatch.setattr(os, "replace", never)
    monkeypatch.setattr(os, "rename", never)
    before = sorted(os.listdir(os.path.dirname(device)))
    with pytest.raises(OutputError) as caught:
        write_atomic(device, "new\n")
    assert str(caught.value) == _refused(device, "a character device")
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert sorted(os.listdir(os.path.dirname(device))) == before  # no temporary file in /dev


def test_a_target_that_becomes_a_symlink_while_writing_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Path("secret").write_text("keep me\n", encoding="utf-8")
    Path("report.json").write_text("old\n", encoding="utf-8")
    real_fsync = os.fsync

    def swap(fd: int) -> None:
        real_fsync(fd)
        os.unlink("report.json")
        os.symlink("secret", "report.json")

    monkeypatch.setattr(os, "fsync", swap)
    with pytest.raises(OutputError) as caught:
        write_atomic("report.json", "new\n")
    assert str(caught.value) == _refused("report.json", "a symbolic link")
    assert os.readlink("report.json") == "secret"
    assert Path("secret").read_text(encoding="utf-8") == "keep me\n"
    assert _listing(tmp_path) == ["report.json", "secret"]  # no temporary file left


# ---- regular files ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o640, 0o600, 0o604, 0o660])
def test_an_existing_report_keeps_its_permissions(tmp_path: Path, mode: int) -> None:
    Path("report.json").write_text("old\n", encoding="utf-8")
    os.chmod("report.json", mode)
    old = os.umask(0o022)  # a new file would get 0644
    try:
        write_atomic("report.json", "new\n")
    finally:
        os.umask(old)
    assert Path("report.json").read_text(encoding="utf-8") == "new\n"
    assert stat.S_IMODE(os.lstat("report.json").st_mode) == mode
    assert _listing(tmp_path) == ["report.json"]


def test_a_new_report_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_atomic("report.json", "new\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.lstat("report.json").st_mode) == 0o600
    assert _listing(tmp_path) == ["report.json"]


def test_a_very_long_name_still_gets_a_temporary_file(tmp_path: Path) -> None:
    name = "é" * 120 + ".json"  # 245 bytes: within NAME_MAX, but not with a prefix and suffix
    write_atomic(name, "new\n")
    assert _listing(tmp_path) == [name]


@pytest.mark.parametrize("step", ["fchmod", "fsync", "replace"])
def test_no_temporary_file_is_left_on_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    Path("report.json").write_text("old\n", encoding="utf-8")

    def fail(*args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, step, fail)
    with pytest.raises(OutputError) as caught:
        write_atomic("report.json", "new\n")
    assert str(caught.value) == "cannot write the report to report.json: Input/output error"
    assert _listing(tmp_path) == ["report.json"]
    assert Path("report.json").read_text(encoding="utf-8") == "old\n"


# ---- through the commands ---------------------------------------------------------------------


def test_review_output_onto_a_symlink_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("real.txt").write_text("old\n", encoding="utf-8")
    os.symlink("real.txt", "report.txt")
    assert main(["review", "-o", "report.txt", MANIFEST]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"dpguard: error: {_refused('report.txt', 'a symbolic link')}\n")
    assert Path("real.txt").read_text(encoding="utf-8") == "old\n"
    assert os.readlink("report.txt") == "real.txt"


def test_diff_output_onto_a_fifo_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fifo: tuple[str, int]
) -> None:
    path, _ = fifo
    assert main(["diff", "-o", path, MANIFEST, MANIFEST]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"dpguard: error: {_refused(path, 'a FIFO')}\n")


def test_bubble_svg_onto_a_symlink_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.symlink("missing.svg", "t.svg")
    assert main(["bubble", "-s", "gpipe", "-p", "2", "-m", "2", "--svg", "t.svg"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "dpguard: error: cannot write the timeline to t.svg: it is a symbolic link, not a "
        "regular file; nothing was written\n"
    )
    assert _listing(tmp_path) == ["t.svg"]


def test_bubble_svg_keeps_the_file_s_permissions(tmp_path: Path) -> None:
    Path("t.svg").write_text("old\n", encoding="utf-8")
    os.chmod("t.svg", 0o640)
    assert main(["bubble", "-s", "gpipe", "-p", "2", "-m", "2", "--svg", "t.svg"]) == 0
    assert Path("t.svg").read_text(encoding="utf-8").startswith("<svg")
    assert stat.S_IMODE(os.lstat("t.svg").st_mode) == 0o640


# ---- stdout -----------------------------------------------------------------------------------


class _Full(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_emit_to_a_full_stdout_is_an_output_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", _Full())
    with pytest.raises(OutputError) as caught:
        emit("report\n")
    assert str(caught.value) == (
        "cannot write the report to standard output: No space left on device"
    )


def test_emit_to_a_closed_stdout_is_an_output_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output.sys, "stdout", None)
    with pytest.raises(OutputError) as caught:
        emit("report\n")
    assert str(caught.value) == "cannot write the report to standard output: it is closed"


def _dpguard(*argv: str, stdout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpguard", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("review", MANIFEST),
        ("review", "--format", "json", MANIFEST),
        ("diff", MANIFEST, MANIFEST),
    ],
    ids=["review", "review-json", "diff"],
)
def test_stdout_on_dev_full_exits_2_with_one_message(argv: tuple[str, ...]) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w", encoding="utf-8") as full:
        done = _dpguard(*argv, stdout=full.fileno())
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "dpguard: error: cannot write the report to standard output: No space left on device\n"
    )


def test_a_reader_that_goes_away_keeps_the_verdict() -> None:
    """A closed pipe is not an error of dpguard's: the review's exit code stands (0 here), and
    nothing is said."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = _dpguard("review", MANIFEST, stdout=write_end)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
