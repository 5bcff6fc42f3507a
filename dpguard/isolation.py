"""One file's problem stays that file's (a step of dpguard.pipeline and of `review --baseline`):
whatever checking a file makes dpguard do, the other files are still checked and reported.

- a bug met while checking a file is that file's D001 finding, and the call ends with exit 3
  once every file is reported (the traceback on stderr with --debug);
- a file that runs past the per-file time budget is its D002 finding (exit 1 for it);
- what means dpguard cannot run as asked (its own configuration broken, a file it cannot read)
  still stops the call: ConfigError, UsageError, InputError propagate.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from dpguard.check import FileResult
from dpguard.errors import ConfigError, InputError, UsageError
from dpguard.findings import Finding, Severity

INTERNAL = "D001"  # a bug met in one file (reporters.model.ENGINE_CODES)
TIMED_OUT = "D002"  # a file past the per-file time budget
FILE_SECONDS = 30.0  # ~1,000x what a real manifest or config takes on a 2-core CI runner
MAX_FILE_SECONDS = 86_400.0  # what DPGUARD_FILE_SECONDS may ask (setitimer refuses far more)
STOPS = (ConfigError, UsageError, InputError)


class OverBudget(BaseException):
    """Raised into the code checking a file when its time budget runs out. A BaseException, so
    that no `except Exception` in that code (a rule message's rendering, a reader's fallback)
    takes it for the code's own failure."""


def budget_seconds() -> float:
    """DPGUARD_FILE_SECONDS (0: no budget), else FILE_SECONDS; a value that is not a finite
    number of seconds up to MAX_FILE_SECONDS counts as the default."""
    try:
        seconds = float(os.environ.get("DPGUARD_FILE_SECONDS", FILE_SECONDS))
    except ValueError:
        return FILE_SECONDS
    return seconds if math.isfinite(seconds) and 0 <= seconds <= MAX_FILE_SECONDS else FILE_SECONDS


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Interrupt the code in the block after `seconds` with OverBudget. A POSIX interval
    timer, so only in the main thread and where it exists; elsewhere the readers' own size
    limits are the bound."""
    usable = (
        seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise OverBudget(seconds)

    previous = signal.getsignal(signal.SIGALRM)
    try:
        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def isolated(
    path: str, check: Callable[[], FileResult], debug: bool = False
) -> tuple[FileResult, str | None]:
    """`check()` under the per-file time budget: (its result, None); past the budget: (the
    file's D002 result, None); a bug: (the file's D001 result, what to tell stderr: one line,
    or the traceback with `debug`). What stops the call (ConfigError, UsageError, InputError)
    propagates."""
    seconds = budget_seconds()
    try:
        with time_budget(seconds):
            return check(), None
    except OverBudget:
        message = (
            f"checking this file took longer than {seconds:g} s, the per-file time budget "
            "(DPGUARD_FILE_SECONDS): it was stopped and the other files were checked"
        )
        return _only(FileResult(path, (), None), TIMED_OUT, message), None
    except STOPS:
        raise
    except Exception as exc:
        return crashed(FileResult(path, (), None), exc), told("in", path, debug)


def told(where: str, path: str, debug: bool) -> str:
    """What stderr says of a bug met `where` ("in", "rendering") a file: one line, or the
    traceback being handled with `debug`."""
    if debug:
        return traceback.format_exc().rstrip()
    return (
        f"dpguard: internal error {where} {path} (a bug in dpguard, its D001 finding): rerun "
        "with --debug for the traceback"
    )


def crashed(result: FileResult, exc: BaseException) -> FileResult:
    """`result` (which config judged it stays) with only its D001 finding for the bug `exc`."""
    message = (
        f"internal error while checking this file: {type(exc).__name__}: {exc} "
        "(this is a bug in dpguard)"
    )
    return _only(result, INTERNAL, message)


def _only(result: FileResult, code: str, message: str) -> FileResult:
    finding = Finding(result.path, 1, 1, code, Severity.ERROR, message)
    return replace(
        result,
        findings=(finding,),
        manifest=None,
        outcome=None,
        plan=None,
        decision=None,
        valid=False,
    )


def is_crashed(findings: Iterable[Finding]) -> bool:
    return any(f.code == INTERNAL for f in findings)
