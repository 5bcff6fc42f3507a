"""A watchdog for the hostile-input tests (test_hostile.py, test_reader_fuzz.py)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def no_hang(seconds: float = 60.0) -> Iterator[None]:
    """A hang fails the test (TimeoutError) instead of stalling CI (there is no
    pytest-timeout); never a timing assertion: the limit is far above what any input the
    tests give takes. A watchdog thread signals the main thread
    (SIGUSR1, which interrupts a blocking open too), leaving SIGALRM to review's own per-file
    time budget (isolation.time_budget)."""
    if not hasattr(signal, "pthread_kill"):  # pragma: no cover - not POSIX
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no answer within {seconds:g} s: a hang")

    done = threading.Event()
    target = threading.get_ident()

    def watch() -> None:
        if not done.wait(seconds):
            signal.pthread_kill(target, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, fire)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGUSR1, previous)
