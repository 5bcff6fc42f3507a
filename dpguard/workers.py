"""Judge a batch of files on every core the call may use, in order.

A review's files are independent, and on a CI runner or a laptop the second core is idle
while one process judges 500 files one by one. `ordered` maps a task over the files in
forked worker processes and yields the results in the files' order, so the report, its exit
code and every byte of it are what one process gives (tests/test_workers.py). What decides
how many processes (`jobs`):

- `--jobs N` / DPGUARD_JOBS, else one per usable core: the affinity mask (a container pinned
  to 2 of 64 cores gets 2) and the cgroup's CPU quota (`docker --cpus 2`, a Kubernetes CPU
  limit), not the machine's core count;
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

How the workers run and what they do not return (judged here, in order) is dpguard.forked,
imported only when a batch forks them.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Measured on the benchmark's realistic corpus (benchmarks/bench_review.py): a worker costs
# about what judging three or four files does (the fork, its pipes, the results' pickles).
MIN_FILES_PER_JOB = 16
MAX_JOBS = 256


def usable_cores() -> int:
    """The cores this process may run on, bounded by its cgroup's CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = _cpu_quota()
    return max(1, min(cores, quota)) if quota else cores


def _cpu_quota(root: str = "") -> int | None:
    """The cgroup's CPU limit in whole cores, rounded up (cgroup v2 `cpu.max`, v1
    `cpu.cfs_quota_us` over `cpu.cfs_period_us`), None when there is none or it cannot be
    read. A container's own cgroup is its root; otherwise /proc/self/cgroup names it. `root`:
    where / is (the tests' fake trees)."""
    candidates = []
    try:
        with open(f"{root}/proc/self/cgroup", encoding="utf-8") as own:
            for line in own:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                path = path.rstrip("/")
                if controllers == "":
                    candidates.append(f"{root}/sys/fs/cgroup{path}/cpu.max")
                elif "cpu" in controllers.split(","):
                    candidates.append(f"{root}/sys/fs/cgroup/{controllers}{path}/cpu.cfs_quota_us")
    except (OSError, ValueError):
        pass
    candidates += [f"{root}/sys/fs/cgroup/cpu.max", f"{root}/sys/fs/cgroup/cpu/cpu.cfs_quota_us"]
    for path in candidates:
        try:
            with open(path, encoding="ascii") as limit:
                fields = limit.read().split()
            if path.endswith("cpu.max"):
                quota, period = fields[0], fields[1]
            else:
                period_path = path.removesuffix("cpu.cfs_quota_us") + "cpu.cfs_period_us"
                with open(period_path, encoding="ascii") as length:
                    quota, period = fields[0], length.read().strip()
        except (OSError, IndexError, ValueError):
            continue
        if quota in ("max", "-1"):
            return None
        try:
            return max(1, math.ceil(int(quota) / int(period)))
        except (ValueError, ZeroDivisionError):
            return None
    return None


def parse_jobs(text: str) -> int | None:
    """`text` as a count of processes (--jobs, DPGUARD_JOBS): a whole number from 1 to
    MAX_JOBS, else None."""
    text = text.strip()
    return int(text) if text.isdigit() and 1 <= int(text) <= MAX_JOBS else None


def requested(environ: Mapping[str, str] | None = None) -> int | None:
    """DPGUARD_JOBS as a count of processes (1: none forked), None when unset, empty, or not a
    whole number from 1 to MAX_JOBS (then the default holds, as for the other variables)."""
    return parse_jobs((os.environ if environ is None else environ).get("DPGUARD_JOBS", ""))


def jobs(files: int, asked: int | None = None, environ: Mapping[str, str] | None = None) -> int:
    """How many processes judge `files` files: `asked` (--jobs) or DPGUARD_JOBS, else the
    usable cores; never more than one per MIN_FILES_PER_JOB files, and one under pre-commit or
    where workers cannot be forked safely (module docstring)."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux") or _threads_running():
        return 1
    wanted = asked or requested(env)
    if wanted is None:
        if env.get("PRE_COMMIT"):
            return 1
        wanted = usable_cores()
    return max(1, min(wanted, files // MIN_FILES_PER_JOB))


def _threads_running() -> bool:
    """Whether threads besides this one run. Only `threading` starts them in dpguard and its
    callers' Python code: not imported, none were started (and a one-process review does not
    pay its import)."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


def ordered(
    task: Callable[[Item], Result], items: Sequence[Item], processes: int
) -> Iterator[Result]:
    """`task` over `items`, in order: in this process when `processes` is 1, else in up to
    that many forked workers (dpguard.forked)."""
    if processes <= 1:
        return map(task, items)
    from dpguard import forked

    return forked.ordered(task, items, processes)
