"""Judge a batch of files on every core the call may use, in order.

A review's files are independent, and on a CI runner or a laptop the second core is idle
while one process judges 500 files one by one. `ordered` maps a task over the files in
forked worker processes and yields the results in the files' order, so the report, its exit
code and every byte of it are what one process gives (tests/test_workers.py). What decides
how many processes (`jobs`):

- `--jobs N` / DPGUARD_JOBS, else one per usable core (the affinity mask, not the machine's
  core count: a container pinned to 2 of 64 cores gets 2);
- at least MIN_FILES_PER_JOB files per process: forking and collecting cost about as much as
  judging a few files, so a small call (a single file, a pre-commit run over a commit's few
  files) stays in one process;
- one process under pre-commit (PRE_COMMIT is set in its hooks' environment): the hook is
  `require_serial: false`, so pre-commit already runs one dpguard per core over its share of
  the files, and more processes would only compete with each other;
- one process where `fork` is not the platform's own start method (macOS, Windows): a
  spawned worker would import and load everything again, which costs more than it saves;
- one process when the caller runs threads (a library caller's): a fork copies only the
  calling thread, and a lock another thread held stays held in the child.

A worker that dies (killed, out of memory) loses nothing: the files it had not returned are
judged here, one by one, as without workers. A worker dies with the process that forked it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Measured on the benchmark's realistic corpus (benchmarks/bench_review.py): a worker costs
# about what judging three or four files does (fork, the pool's pipes, the results' pickles).
MIN_FILES_PER_JOB = 16
# Files a worker is sent at a time: enough to amortise a round trip, few enough that two
# workers finish together when some files cost 10x the median.
CHUNK = 8
MAX_JOBS = 256

# The task the forked workers run: set before the pool forks, so it reaches them by
# inheritance and need not be pickled (it is a closure over the call's judges and catalog).
_TASK: Callable[[Any], Any] | None = None


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def requested(environ: Mapping[str, str] | None = None) -> int | None:
    """DPGUARD_JOBS as a count of processes (1: none forked), None when unset, empty, or not a
    whole number from 1 to MAX_JOBS (then the default holds, as for the other variables)."""
    text = (os.environ if environ is None else environ).get("DPGUARD_JOBS", "").strip()
    if text.isdigit() and 1 <= int(text) <= MAX_JOBS:
        return int(text)
    return None


def jobs(files: int, asked: int | None = None, environ: Mapping[str, str] | None = None) -> int:
    """How many processes judge `files` files: `asked` (--jobs) or DPGUARD_JOBS, else the
    usable cores; never more than one per MIN_FILES_PER_JOB files, and one under pre-commit or
    where workers cannot be forked safely (module docstring)."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux") or threading.active_count() > 1:
        return 1
    wanted = asked or requested(env)
    if wanted is None:
        if env.get("PRE_COMMIT"):
            return 1
        wanted = usable_cores()
    return max(1, min(wanted, files // MIN_FILES_PER_JOB))


# prctl(2): deliver a signal to this process when the one that forked it dies
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """A worker's first step: it dies with the process that forked it. A parent killed alone
    (a CI timeout signals one process, not its group) would otherwise leave its workers
    waiting on the task queue forever, and holding the job's output pipes open."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl: the parent's own shutdown is the bound
        pass
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)


def _run(chunk: Sequence[Any]) -> list[Any]:
    """In a worker: the task over one chunk of items."""
    assert _TASK is not None, "workers are forked after the task is set"
    return [_TASK(item) for item in chunk]


def ordered(
    task: Callable[[Item], Result], items: Sequence[Item], processes: int
) -> Iterator[Result]:
    """`task` over `items`, in order: in this process when `processes` is 1, else in that many
    forked workers. What `task` raises in a worker is raised here when its result is due; its
    results must pickle."""
    if processes <= 1:
        yield from map(task, items)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    global _TASK
    chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]
    # A forked worker flushes the streams it inherited when it exits: anything still buffered
    # here would be printed twice.
    sys.stdout.flush()
    sys.stderr.flush()
    _TASK = task
    done = 0
    pool = None
    try:
        pool = ProcessPoolExecutor(
            processes,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_die_with,
            initargs=(os.getpid(),),
        )
        for chunk in pool.map(_run, chunks):  # forks the workers
            for result in chunk:
                done += 1
                yield result
    except (BrokenProcessPool, OSError, ImportError, NotImplementedError):
        # A worker died, or none could start (no process-shared semaphores in a container
        # without /dev/shm, fork refused): what is left is judged here, as without workers.
        yield from map(task, items[done:])
    finally:
        _TASK = None
        if pool is not None:
            # what is pending is dropped (the call stopped early); a chunk a worker is
            # judging ends within the per-file time budget
            pool.shutdown(cancel_futures=True)
