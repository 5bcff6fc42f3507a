"""A batch judged in several processes reports what one process reports, byte for byte, in
every format (dpguard.workers, pipeline.review): findings, decision lines, waivers used and
unused, a bug's D001 finding, exit codes. A worker that dies loses no file; an error that
stops the call stops it from a worker too."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import dpguard.pipeline
from dpguard import workers
from dpguard.cli import main
from dpguard.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A training-config repository of 60 files: the team example (its policies, waivers and
    framework configs) and, beside it, copies of every example manifest with a changed batch
    or cluster, the manifest full of mistakes, a file that is not YAML and one that breaks."""
    root = tmp_path_factory.mktemp("batch")
    shutil.copytree(EXAMPLES / "team-repo", root / "team-repo")
    plain = root / "runs"
    plain.mkdir()
    examples = sorted(EXAMPLES.glob("*.yaml"))
    for i in range(52):
        source = examples[i % len(examples)]
        text = source.read_text(encoding="utf-8")
        if i % 3 == 1:  # another batch: 2048 -> 22048, and so on
            text = text.replace("global_batch_size: ", "global_batch_size: 2", 1)
        (plain / f"{i:02d}-{source.name}").write_text(text, encoding="utf-8")
    (plain / "broken.yaml").write_text("apiVersion: dpguard/v1\nkind: [\n", encoding="utf-8")
    (plain / "boom.yaml").write_text((EXAMPLES / "small-dense.yaml").read_text("utf-8"), "utf-8")
    return root


def _review(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["review", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--only-manifests", "--quiet"],
        ["--format", "json"],
        ["--format", "markdown"],
        ["--format", "sarif"],
        ["--format", "junit"],
        ["--format", "github"],
    ],
    ids=["text", "hook", "json", "markdown", "sarif", "junit", "github"],
)
def test_any_number_of_processes_gives_the_same_report(
    batch: Path,
    options: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(batch)
    real = dpguard.pipeline.check_file

    def fragile(path: str, *args: Any, **kwargs: Any) -> Any:
        if path.endswith("boom.yaml"):  # a bug met in one file, in whichever process judges it
            raise RuntimeError("a bug")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(dpguard.pipeline, "check_file", fragile)
    args = [*options, "--date", "2026-12-01", "--report-unused-waivers", "team-repo", "runs"]
    one = _review(["--jobs", "1", *args], capsys)
    assert one[0] == 3  # the bug's exit code, once every file is reported
    assert "D001" in one[1] + one[2] and "broken.yaml" in one[1]
    for processes in ("2", "3"):
        assert _review(["--jobs", processes, *args], capsys) == one


def test_the_time_budget_holds_in_a_worker(
    batch: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file past the per-file budget is its D002 finding in a worker too (the budget's timer
    is a signal to the process's main thread, which a worker's task runs in)."""
    monkeypatch.chdir(batch)
    real = dpguard.pipeline.check_file

    def endless(path: str, *args: Any, **kwargs: Any) -> Any:
        while path.endswith("boom.yaml"):  # interrupted by the budget's timer
            pass
        return real(path, *args, **kwargs)

    monkeypatch.setattr(dpguard.pipeline, "check_file", endless)
    monkeypatch.setenv("DPGUARD_FILE_SECONDS", "0.5")
    one = _review(["--jobs", "1", "runs"], capsys)
    assert one[0] == 1 and "D002" in one[1]
    assert _review(["--jobs", "2", "runs"], capsys) == one


def test_the_workers_run_in_other_processes() -> None:
    """The reports above are not one process's twice: with 2 jobs the items go elsewhere."""
    pids = {pid for pid in workers.ordered(_pid, list(range(40)), 2)}
    assert os.getpid() not in pids and pids


def _pid(_item: int) -> int:
    return os.getpid()


def _dies_in_a_worker(item: int, parent: int = os.getpid()) -> int:
    if item == 13 and os.getpid() != parent:
        os._exit(1)  # killed, out of memory: the pool breaks
    return item * item


def test_a_worker_that_dies_loses_no_item() -> None:
    items = list(range(60))
    assert list(workers.ordered(_dies_in_a_worker, items, 2)) == [i * i for i in items]


def test_without_workers_the_items_are_mapped_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container without /dev/shm cannot make the pool's semaphores: no error, no loss."""
    import concurrent.futures

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied: /dev/shm")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", refused)
    assert list(workers.ordered(_pid, list(range(40)), 2)) == [os.getpid()] * 40


def test_the_workers_die_with_the_process_that_forked_them() -> None:
    """A CI timeout that kills the review process alone leaves no worker behind holding the
    job's output open (before: they waited on the task queue forever)."""
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import os, time\n"
        "from dpguard import workers\n"
        "def task(i):\n"
        "    time.sleep(0.05)\n"
        "    return os.getpid()\n"
        "for pid in workers.ordered(task, list(range(2000)), 2):\n"
        "    print(pid, flush=True)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    seen: set[int] = set()
    while len(seen) < 2:
        seen.add(int(parent.stdout.readline()))
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in seen)
    parent.stdout.close()


def _alive(pid: int) -> bool:
    """Running or asleep, not gone and not a zombie nobody reaped yet."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _stops(item: int) -> int:
    if item == 30:
        raise ConfigError("message of rule X cannot be rendered", "policies/team.yaml:3:5")
    return item


def test_an_error_that_stops_the_call_stops_it_from_a_worker() -> None:
    with pytest.raises(ConfigError) as raised:
        list(workers.ordered(_stops, list(range(60)), 2))
    assert str(raised.value) == "policies/team.yaml:3:5: message of rule X cannot be rendered"


@pytest.mark.parametrize(
    ("files", "asked", "environ", "expected"),
    [
        (1, None, {}, 1),  # a single file: no worker
        (15, 8, {}, 1),  # fewer files than one worker's share
        (64, 8, {}, 4),  # one per 16 files at most
        (1000, 3, {}, 3),  # --jobs
        (1000, None, {"DPGUARD_JOBS": "2"}, 2),
        (1000, 5, {"DPGUARD_JOBS": "2"}, 5),  # the option over the variable
        (1000, None, {"PRE_COMMIT": "1"}, 1),  # pre-commit already runs one per core
        (1000, None, {"PRE_COMMIT": "1", "DPGUARD_JOBS": "2"}, 2),  # unless asked
        (1000, None, {"DPGUARD_JOBS": "0"}, "cores"),  # not a count: the default
        (1000, None, {"DPGUARD_JOBS": "two"}, "cores"),
        (1000, None, {}, "cores"),
    ],
)
def test_how_many_processes(
    files: int, asked: int | None, environ: dict[str, str], expected: Any
) -> None:
    if expected == "cores":
        expected = min(workers.usable_cores(), files // workers.MIN_FILES_PER_JOB)
    assert workers.jobs(files, asked, environ) == expected


def test_no_worker_is_forked_beside_a_thread() -> None:
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert workers.jobs(1000, 4, {}) == 1
    finally:
        stop.set()
        thread.join()
