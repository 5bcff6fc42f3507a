"""`dpguard review --baseline REV` against a plain `dpguard review` of the same files, in the same
run: a scratch git repository holds the corpus at its first commit and every file changed (a
larger token budget) at its second, so that the baseline run judges every file twice. The
target is a ratio of at most 2 (docs/ci.md); nothing asserts it, the suite reports it."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]


def _repository(directory: Path, corpus: list[Path]) -> list[str]:
    directory.mkdir(parents=True)
    subprocess.run([*GIT, "init", "-q"], cwd=directory, check=True)
    names = []
    for path in corpus:
        (directory / path.name).write_bytes(path.read_bytes())
        names.append(path.name)
    subprocess.run([*GIT, "add", "-A"], cwd=directory, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "base"], cwd=directory, check=True)
    for name in names:  # bytes differ, so both versions are judged: the costly case
        with open(directory / name, "a", encoding="utf-8") as handle:
            handle.write("# changed\n")
    subprocess.run([*GIT, "commit", "-q", "-am", "head"], cwd=directory, check=True)
    return names


def _cpu(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, status


def measure(dpguard: str, directory: Path, corpus: list[Path], runs: int) -> dict[str, Any]:
    names = _repository(directory, corpus)
    plain = [dpguard, "review", *names]
    baseline = [dpguard, "review", "--baseline", "HEAD~1", *names]
    _cpu(plain, directory)  # warm the file cache for both
    _cpu(baseline, directory)
    walls: list[float] = []
    cpus: list[float] = []
    codes: set[int] = set()
    for _ in range(runs):
        b_wall, b_cpu, status = _cpu(baseline, directory)
        p_wall, p_cpu, _ = _cpu(plain, directory)
        codes.add(os.waitstatus_to_exitcode(status))
        walls.append(b_wall / p_wall)
        cpus.append(b_cpu / p_cpu)
    return {
        "files": len(names),
        "runs": runs,
        "baseline_exit_codes": sorted(codes),
        "median_pair_ratio": statistics.median(walls),
        "median_pair_cpu_ratio": statistics.median(cpus),
    }
