"""dpguard's per-user cache: records that a file of dpguard's own loaded without a problem,
compiled page templates and exact simulation timings, so that later processes skip work whose
answer cannot have changed (as pre-commit and ruff keep per-user caches). Every entry is keyed
by the bytes it vouches for and dpguard's version; a cache that cannot be read or written only
costs the time it saves."""

from __future__ import annotations

import contextlib
import functools
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


# ---- What dpguard checked about its own files when they were built ---------------------------
#
# dpguard's shipped policies, schemas, profiles and performance model are checked once, when
# the record below is written (tests/test_cache.py keeps it current), not by the first process
# on every fresh CI runner: the record ships in the wheel beside the files it vouches for, keyed
# by their exact bytes, so an edited file is checked again. The per-user cache serves the rest
# (a team's own policy files, simulations).

SHIPPED = "data/shipped-checks.json"
_recording: dict[str, dict[str, str]] | None = None  # `shipped_record` collects here


def _digest(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


@functools.cache
def _shipped() -> dict[str, dict[str, str]]:
    from importlib import resources

    with contextlib.suppress(OSError, ValueError):
        record = json.loads(resources.files("dpguard").joinpath(SHIPPED).read_text("utf-8"))
        if isinstance(record, dict):
            return record
    return {}


def _from_record(kind: str, parts: tuple[bytes, ...]) -> str | None:
    if _recording is not None:  # recording: every check runs
        return None
    entry = _shipped().get(kind, {}).get(_digest(*parts))
    return entry if isinstance(entry, str) else None


def _record(kind: str, text: str, parts: tuple[bytes, ...]) -> None:
    if _recording is not None:
        _recording.setdefault(kind, {})[_digest(*parts)] = text


def vouched(kind: str, *parts: bytes) -> bool:
    """Whether `parts` passed `kind` before: in the shipped record, or in the per-user cache."""
    if _from_record(kind, parts) is not None:
        return True
    path = None if _recording is not None else marker(kind, *parts)
    return path is not None and path.is_file()


def vouch(kind: str, *parts: bytes) -> None:
    _record(kind, "", parts)
    path = marker(kind, *parts)
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
    """The text remembered under `parts` (shipped record first), or None."""
    shipped = _from_record(kind, parts)
    if shipped is not None:
        return shipped
    if _recording is not None:
        return None
    path = marker(kind, *parts)
    try:
        return path.read_text(encoding="utf-8") if path is not None else None
    except (OSError, UnicodeDecodeError):
        return None


def remember(kind: str, text: str, *parts: bytes) -> None:
    """Store `text` under `parts`: written whole to a temporary file, then renamed, so that a
    concurrent process never reads half an entry."""
    import tempfile

    _record(kind, text, parts)
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


# the kinds the shipped record holds: checks of dpguard's own files (simulations are keyed by
# what a manifest asks for, not by a shipped file)
SHIPPED_KINDS = ("valid-schemas", "validated-policies", "message-facts", "profiles", "performance")


def shipped_record() -> dict[str, dict[str, str]]:
    """Check every shipped file as a process with an empty cache would, and return what that
    proved, by kind and digest: the content of data/shipped-checks.json. Run it in a fresh
    process: what this one already loaded is not checked again."""
    global _recording
    from dpguard import validate
    from dpguard.frameworks import profiles
    from dpguard.perf import data
    from dpguard.policy.load import load_policies

    _recording = {}
    try:
        validate._validator()
        load_policies()
        profiles.load_profiles()
        data.load()
        return {
            k: dict(sorted(v.items())) for k, v in sorted(_recording.items()) if k in SHIPPED_KINDS
        }
    finally:
        _recording = None
