"""A batch judged in several processes reports what one process reports, byte for byte, in
every format, with or without --baseline (dpguard.workers, pipeline.review,
change.collect.against_revision): findings, decision lines, waivers used and unused, a bug's
D001 finding, exit codes. Whatever a worker does not return is judged in the parent: a worker
that dies or cannot be forked loses no file, and an error raised in a worker is raised in the
parent as itself."""

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
    framework configs) and, beside it, copies of every example manifest (the one full of
    mistakes too), a third of them at another batch, a file that is not YAML and one whose
    check raises (`boom.yaml`, where a test makes it)."""
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


@pytest.fixture(scope="module")
def changed(batch: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The batch as a git repository, then changed the way a pull request changes many files:
    batches doubled, a file removed, one added, one renamed, one broken."""
    from gitrepo import git

    root = tmp_path_factory.mktemp("changed")
    shutil.copytree(batch, root, dirs_exist_ok=True)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "before")
    for i, path in enumerate(sorted((root / "runs").glob("*.yaml"))):
        text = path.read_text(encoding="utf-8")
        if i % 2 == 0:
            path.write_text(text.replace("global_batch_size: ", "global_batch_size: 4", 1), "utf-8")
    (root / "runs" / "00-frontier-moe.yaml").unlink()
    shutil.copy(EXAMPLES / "large-dense.yaml", root / "runs" / "added.yaml")
    (root / "runs" / "02-mistakes.yaml").rename(root / "runs" / "moved.yaml")
    (root / "runs" / "09-small-dense.yaml").write_text("kind: [\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("form", ["text", "json", "markdown", "github", "sarif", "junit"])
def test_a_baseline_review_is_the_same_in_any_number_of_processes(
    changed: Path, form: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(changed)
    args = ["--baseline", "HEAD", "--format", form, "--date", "2026-12-01", "team-repo", "runs"]
    one = _review(["--jobs", "1", *args], capsys)
    assert one[0] in (1, 3) and "runs/added.yaml" in one[1]
    assert _review(["--jobs", "2", *args], capsys) == one


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
    """No fork allowed (a process limit): no error, no loss, every item judged here."""

    def refused() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    assert list(workers.ordered(_pid, list(range(40)), 2)) == [os.getpid()] * 40


def test_a_worker_that_cannot_be_forked_leaves_its_share_to_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first fork succeeds, the second is refused: one worker does the work, and the call
    ends (before, a half-started pool was joined at exit, for ever)."""
    real = os.fork
    forks: list[int] = []

    def once() -> int:
        if forks:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        forks.append(1)
        return real()

    monkeypatch.setattr(os, "fork", once)
    assert list(workers.ordered(_square, list(range(200)), 3)) == [i * i for i in range(200)]


def _square(item: int) -> int:
    return item * item


def _unpicklable_at_17(item: int) -> Any:
    import threading

    return threading.Lock() if item == 17 else item


def test_a_result_that_does_not_pickle_is_judged_here() -> None:
    results = list(workers.ordered(_unpicklable_at_17, list(range(60)), 2))
    assert [r for i, r in enumerate(results) if i != 17] == [i for i in range(60) if i != 17]
    assert type(results[17]).__name__ == "lock"


def _raises_schedule_error_at_30(item: int) -> int:
    from dpguard.errors import ScheduleError

    if item == 30:
        raise ScheduleError(["P=3 does not divide 8 layers"])
    return item


def test_an_error_raised_in_a_worker_is_raised_here_as_itself() -> None:
    """Not unpickled from the worker (ScheduleError's arguments are not its message: a
    pickled copy read 'P; =; 3; ...'): the chunk is judged again here and raises."""
    from dpguard.errors import ScheduleError

    with pytest.raises(ScheduleError) as raised:
        list(workers.ordered(_raises_schedule_error_at_30, list(range(60)), 2))
    assert str(raised.value) == "P=3 does not divide 8 layers"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cpu.max": "200000 100000\n"}, 2),
        ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cpu.max": "150000 100000\n"}, 2),
        ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cpu.max": "max 100000\n"}, None),
        (
            {
                "proc/self/cgroup": "0::/ci/job\n",
                "sys/fs/cgroup/ci/job/cpu.max": "400000 100000\n",
            },
            4,
        ),
        (
            {
                "proc/self/cgroup": "4:cpu,cpuacct:/\n",
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "300000\n",
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            },
            3,
        ),
        (
            {
                "proc/self/cgroup": "4:cpu,cpuacct:/\n",
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            },
            None,
        ),
        ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cpu.max": "garbage\n"}, None),
        ({}, None),
    ],
    ids=["v2-2", "v2-1.5", "v2-none", "v2-nested", "v1-3", "v1-none", "broken", "no-cgroup"],
)
def test_a_cpu_quota_bounds_the_cores(tmp_path: Path, files: dict[str, str], expected: Any) -> None:
    """`docker --cpus 2` on a 64-core host is 2 cores, not 64 (the affinity mask says 64)."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="ascii")
    assert workers._cpu_quota(str(tmp_path)) == expected


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
