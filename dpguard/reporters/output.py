"""Write a report: to stdout, or to a file atomically (a temporary file in the same directory,
then a rename).

A reader never sees a half-written report, and on any error nothing is left behind: neither the
target (an existing one stays as it was) nor the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

from dpguard.errors import DpguardError


class OutputError(DpguardError):
    """The report file cannot be written (exit 2)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str, text: str) -> None:
    target = Path(path)
    directory = target.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
        raise


def emit(text: str) -> None:
    """Write to stdout. A reader that goes away (`dpguard review ... | head`) must not turn the
    review's verdict into a success or a traceback: the rest of the output is dropped and the
    caller still returns its exit code."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would flush stdout again at exit and fail the same way: point it at devnull.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
