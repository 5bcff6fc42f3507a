"""Write a report: to stdout, or to a file atomically (a temporary file in the same directory,
then a rename).

A reader never sees a half-written report, and on any error nothing is left behind: neither the
target (an existing one stays as it was) nor the temporary file.

Only a regular file is written, or created: a symlink (even a dangling one), a device, a FIFO, a
socket or a directory at the target is refused before anything is written. A rename would
replace the node itself (a link, `/dev/null` for a root user) instead of writing through it,
and writing through it instead would lose the atomicity; neither is what `--output` promises.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Sequence
from typing import TextIO

from dpguard.errors import DpguardError


class OutputError(DpguardError):
    """The report file cannot be written (exit 2)."""


# A document as one string, or as the pieces it is the concatenation of: a report of
# thousands of files is written piece by piece rather than joined first (held twice).
Text = str | Sequence[str]


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _existing(path: str, what: str) -> os.stat_result | None:
    """The target's own status (a link's, not its target's), None when there is none yet;
    OutputError when it is anything but a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OutputError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"cannot write {what} to {path}: it is {_kind(st.st_mode)}, not a regular file; "
            "nothing was written"
        )
    return st


def write_atomic(path: str, text: Text, what: str = "the report") -> None:
    """Write `text` to the regular file `path` (created if missing) in one rename. `what`
    names the content in messages. An existing file keeps its permission bits; a new one gets
    0666 less the umask, as any file a program creates (mkstemp's 0600 suits secrets)."""
    directory, name = os.path.split(path)
    if not name:  # `out/`: a directory's name, which Path() would silently strip
        raise OutputError(f"cannot write {what} to {path}: it names a directory, not a file")
    before = _existing(path, what)
    mode = stat.S_IMODE(before.st_mode) & 0o777 if before else 0o666 & ~_umask()
    try:
        # The name is only a hint to whoever finds a leftover: 40 characters (160 bytes at
        # most) keep a long name's temporary one within NAME_MAX.
        fd, tmp = tempfile.mkstemp(prefix=f".{name[:40]}.", suffix=".tmp", dir=directory or ".")
    except OSError as exc:
        raise OutputError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            _write(handle, text)
            handle.flush()
            os.fsync(handle.fileno())
        # Again at the last moment: a link or FIFO put there meanwhile is not replaced (what
        # remains is the instant between this check and the rename). Another regular file is:
        # two runs writing one report end with the last one's, as before.
        _existing(path, what)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
        raise


def deliver(text: Text, path: str | None, what: str = "the report") -> None:
    """`--output` of every command that writes one document: stdout when `path` is None or
    `-`, else the file `path`, atomically (`write_atomic`)."""
    if path is None or path == "-":
        emit(text)
    else:
        write_atomic(path, text, what)


def emit(text: Text) -> None:
    """Write to stdout. A reader that goes away (`dpguard review ... | head`) must not turn the
    review's verdict into a success or a traceback: the rest of the output is dropped and the
    caller still returns its exit code. Any other failure (a full disk, `> /dev/full`) is an
    OutputError: one message, exit 2."""
    stdout = sys.stdout
    if stdout is None:  # started with stdout closed (`>&-`)
        raise OutputError("cannot write the report to standard output: it is closed")
    try:
        _write(stdout, text)
        stdout.flush()
    except BrokenPipeError:
        drop_stdout()
    except OSError as exc:
        drop_stdout()
        raise OutputError(
            f"cannot write the report to standard output: {exc.strerror or exc}"
        ) from None


_SLICE = 1 << 20


def _write(stream: TextIO, text: Text) -> None:
    """`text` a mebibyte at a time: a text stream encodes what it is given at once, and a JSON
    report of thousands of files would otherwise be held twice (as text and encoded)."""
    for piece in (text,) if isinstance(text, str) else text:
        for start in range(0, len(piece), _SLICE):
            stream.write(piece[start : start + _SLICE])


def drop_stdout() -> None:
    """Point stdout at devnull: Python flushes what is still buffered again at exit, and would
    fail the same way (a second message, exit 120). A stdout with no descriptor (a test's
    capture) has nothing to point."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
