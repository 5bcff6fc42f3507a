"""dpguard's per-user cache: records that a file of dpguard's own loaded without a problem and
exact simulation timings, so that later processes skip work whose answer cannot have changed
(as pre-commit and ruff keep per-user caches). Every entry is keyed by the bytes it vouches for
and dpguard's version; a cache that cannot be read or written only costs the time it saves.

The cache directory is not trusted: a shared CI runner, or a CI cache restored from a pull
request, lets others write it, and an entry decides whether a team's policy file is validated
and which bubble fraction a review prints. So:

- Only text is stored (JSON or plain text), never bytecode or pickles: reading an entry runs
  nothing.
- Every entry is authenticated. Its file holds a header line `dpguard-cache-v1 <hmac>` and
  then its text; the HMAC-SHA256 covers the kind, the entry's name (the digest of dpguard's
  version and the keyed bytes) and the text, so an entry copied to another name or kind fails
  too. Its key is 32 random bytes per user in `DPGUARD_CACHE_KEY_FILE`, else
  `$XDG_CONFIG_HOME/dpguard/cache-key`, else `~/.config/dpguard/cache-key`: outside the cache
  directory, so restoring or sharing that directory does not carry the key (a key file inside
  the cache directory is refused). The key is written whole under a temporary name (mkstemp:
  O_CREAT | O_EXCL, mode 0600) and linked into place, so a crash or a concurrent process never
  leaves a short key, and an existing one is never replaced.
- A marker ("these bytes passed validation", `vouch`) is an authenticated entry with empty
  text: an empty or forged file never skips a validation.
- The key file is used only if it is a regular file (not followed through a symlink) owned by
  this user with no group or other permissions, holding exactly 32 bytes; otherwise, or where
  that cannot be checked (no POSIX ownership, as on Windows), there is no cache, silently.
- Files are opened without following a symlink, without blocking (a FIFO planted in the cache
  returns at once) and only read when fstat says a regular file of at most MAX_ENTRY bytes.
- An entry that is unreadable, unauthenticated, undecodable or not what its user expects is a
  miss: the work is done and the entry written again over it. Users check what they take where
  that is cheap (sizing._simulate: token sizes and the timing's own identities); the HMAC is the
  main defence, so that forging an entry needs the key.
- The cache directory itself may be shared; only the kind folders dpguard writes into must not
  be symlinks, so that a planted link does not send new entries elsewhere.

`DPGUARD_CACHE_DIR` moves the cache (empty: none), `DPGUARD_CACHE_KEY_FILE` the key (empty:
no cache)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MAGIC = b"dpguard-cache-v1"
MAX_ENTRY = 16 * 1024 * 1024  # bytes of text: the largest entries (profiles) are ~100 KiB
KEY_BYTES = 32
# never follow a planted symlink; never block on a planted FIFO (0 where the OS lacks them)
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def directory() -> Path | None:
    """`DPGUARD_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/dpguard`, else
    `~/.cache/dpguard`."""
    base = os.environ.get("DPGUARD_CACHE_DIR")
    if base is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "dpguard")
    return Path(base) if base else None


def key_file() -> Path | None:
    """`DPGUARD_CACHE_KEY_FILE` (empty: no cache), else `$XDG_CONFIG_HOME/dpguard/cache-key`,
    else `~/.config/dpguard/cache-key`: configuration, not cache, so that a restored or shared
    cache directory does not bring the key with it."""
    path = os.environ.get("DPGUARD_CACHE_KEY_FILE")
    if path is None:
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        path = os.path.join(xdg, "dpguard", "cache-key")
    return Path(path) if path else None


def marker(kind: str, *parts: bytes) -> Path | None:
    """Where the entry for `parts` (a file's bytes and whatever judged them) of `kind` lives."""
    from dpguard import __version__

    base = directory()
    if base is None:
        return None
    key = hashlib.sha256(b"\0".join((__version__.encode(), *parts))).hexdigest()
    return base / kind / key


# ---- Reading files that someone else may have planted ------------------------------------


def _read_regular(path: Path, limit: int) -> tuple[bytes, os.stat_result] | None:
    """The bytes of `path` and its status if it is a regular file (not reached through a final
    symlink) of at most `limit` bytes; None otherwise. Raises OSError when it cannot be opened
    (FileNotFoundError when there is nothing there)."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # the file may grow after fstat: read at most one byte more
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return (b"".join(chunks), status) if size <= limit else None
    finally:
        os.close(fd)


# ---- The key ------------------------------------------------------------------------------


def _inside(path: Path, folder: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def _read_key(path: Path) -> bytes | None:
    """The key in `path`, or None when the file is not one only this user controls. Raises
    OSError when it cannot be opened."""
    read = _read_regular(path, KEY_BYTES)
    if read is None:
        return None
    data, status = read
    private = status.st_uid == os.geteuid() and not status.st_mode & 0o077
    return data if private and len(data) == KEY_BYTES else None


def _create_key(path: Path) -> None:
    """Write a new key whole under a temporary name and link it into place: the name appears
    only complete, and a key another process created meanwhile wins (never replaced)."""
    import tempfile

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cache-key.")  # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.remove(tmp)


def _secret(base: Path, create: bool) -> bytes | None:
    """The HMAC key for the cache in `base`, created if missing and `create`; None (no cache)
    when there is none, it is refused, or it would live inside the cache directory."""
    path = key_file()
    if path is None or not hasattr(os, "geteuid") or _inside(path, base):
        return None  # (no geteuid: no POSIX ownership to check the key file by)
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:  # nothing can be authenticated yet: a miss, and no file written
            return None
    except OSError:  # unreadable, a symlink (ELOOP), ...
        return None
    try:
        _create_key(path)
        return _read_key(path)
    except OSError:  # a read-only home: no cache
        return None


# ---- Entries ------------------------------------------------------------------------------


def _mac(secret: bytes, kind: str, name: str, body: bytes) -> bytes:
    # kind and name (a hex digest) hold no NUL, and the body comes last: the message is
    # unambiguous
    message = b"\0".join((MAGIC, kind.encode(), name.encode(), body))
    return hmac.new(secret, message, hashlib.sha256).hexdigest().encode()


def _read_entry(kind: str, parts: tuple[bytes, ...]) -> str | None:
    """The authenticated text of the entry for `parts`, or None (a miss)."""
    path = marker(kind, *parts)
    secret = None if path is None else _secret(path.parent.parent, create=False)
    if path is None or secret is None:
        return None
    try:
        read = _read_regular(path, len(MAGIC) + 66 + MAX_ENTRY)  # header: space, hex, newline
    except OSError:
        return None
    if read is None:
        return None
    header, newline, body = read[0].partition(b"\n")
    tag, space, mac = header.partition(b" ")
    if tag != MAGIC or not space or not newline:
        return None
    if not hmac.compare_digest(mac, _mac(secret, kind, path.name, body)):
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _write_entry(kind: str, text: str, parts: tuple[bytes, ...]) -> None:
    """Write the entry whole to a temporary file, then rename it over whatever was there (a
    forged entry, a FIFO): a concurrent process never reads half an entry. An unwritable cache
    only costs the time saved."""
    import tempfile

    path = marker(kind, *parts)
    body = text.encode("utf-8")
    if path is None or len(body) > MAX_ENTRY:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not stat.S_ISDIR(os.lstat(path.parent).st_mode):  # a planted symlink
            return
        secret = _secret(path.parent.parent, create=True)  # a key only for a usable cache
        if secret is None:
            return
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + b" " + _mac(secret, kind, path.name, body) + b"\n" + body)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.remove(tmp)


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
    from dpguard import resources

    record = resources.optional_json("dpguard", SHIPPED)
    return record if isinstance(record, dict) else {}


def _from_record(kind: str, parts: tuple[bytes, ...]) -> str | None:
    if _recording is not None:  # recording: every check runs
        return None
    entry = _shipped().get(kind, {}).get(_digest(*parts))
    return entry if isinstance(entry, str) else None


def _record(kind: str, text: str, parts: tuple[bytes, ...]) -> None:
    if _recording is not None:
        _recording.setdefault(kind, {})[_digest(*parts)] = text


def vouched(kind: str, *parts: bytes) -> bool:
    """Whether `parts` passed `kind` before: in the shipped record, or in an authenticated
    per-user cache entry (a marker: empty text)."""
    if _from_record(kind, parts) is not None:
        return True
    return _recording is None and _read_entry(kind, parts) == ""


def vouch(kind: str, *parts: bytes) -> None:
    """Record that `parts` passed `kind`."""
    _record(kind, "", parts)
    _write_entry(kind, "", parts)


def recall(kind: str, *parts: bytes) -> str | None:
    """The text remembered under `parts` (shipped record first), or None."""
    shipped = _from_record(kind, parts)
    if shipped is not None:
        return shipped
    return None if _recording is not None else _read_entry(kind, parts)


def remember(kind: str, text: str, *parts: bytes) -> None:
    """Store `text` under `parts`."""
    _record(kind, text, parts)
    _write_entry(kind, text, parts)


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
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError):
            pass  # a broken entry (RecursionError: nested too deep to decode): built again
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
        validate._schema()
        load_policies()
        profiles.load_profiles()
        data.load()
        return {
            k: dict(sorted(v.items())) for k, v in sorted(_recording.items()) if k in SHIPPED_KINDS
        }
    finally:
        _recording = None
