"""dpguard's per-user cache: records that a file of dpguard's own loaded without a problem,
compiled page templates and exact simulation timings, so that later processes skip work whose
answer cannot have changed (as pre-commit and ruff keep per-user caches). Every entry is keyed
by the bytes it vouches for and dpguard's version; a cache that cannot be read or written only
costs the time it saves."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def directory() -> Path | None:
    """`DPGUARD_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/dpguard`, else
    `~/.cache/dpguard`."""
    base = os.environ.get("DPGUARD_CACHE_DIR")
    if base is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "dpguard")
    return Path(base) if base else None


def marker(kind: str, *parts: bytes) -> Path | None:
    """Where to record that `parts` (a file's bytes and whatever judged them) passed `kind`."""
    from dpguard import __version__

    base = directory()
    if base is None:
        return None
    key = hashlib.sha256(b"\0".join((__version__.encode(), *parts))).hexdigest()
    return base / kind / key


def vouched(path: Path | None) -> bool:
    return path is not None and path.is_file()


def vouch(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):  # a read-only home only costs the time saved
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()


def template_bytecode() -> Any:
    """A Jinja bytecode cache for the page templates (compiling them costs ~60 ms a process);
    Jinja keys each entry by the template's source checksum. None when there is no cache."""
    from jinja2 import FileSystemBytecodeCache

    base = directory()
    if base is None:
        return None
    folder = base / "templates"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None

    class Quiet(FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: Any) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    return Quiet(str(folder))


def recall(kind: str, *parts: bytes) -> str | None:
    """The text remembered under `parts`, or None."""
    path = marker(kind, *parts)
    try:
        return path.read_text(encoding="utf-8") if path is not None else None
    except (OSError, UnicodeDecodeError):
        return None


def remember(kind: str, text: str, *parts: bytes) -> None:
    """Store `text` under `parts`: written whole to a temporary file, then renamed, so that a
    concurrent process never reads half an entry."""
    import tempfile

    path = marker(kind, *parts)
    if path is None:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.remove(tmp)


def remembered_json(
    kind: str, parts: tuple[bytes, ...], build: Callable[[], Any], use: Callable[[Any], T]
) -> T:
    """`use` of the checked data remembered as JSON under `parts` (the bytes it was checked
    from), else of `build()`'s, remembered once `use` took it. An entry is taken whole or not
    at all: one that does not decode, or that `use` cannot take, is built again."""
    text = recall(kind, *parts)
    if text is not None:
        try:
            return use(json.loads(text))
        except (ValueError, TypeError, AttributeError, KeyError):
            pass  # a broken entry: built again
    data = build()
    result = use(data)
    remember(kind, json.dumps(data, sort_keys=True), *parts)
    return result
