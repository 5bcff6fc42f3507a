"""Read one YAML document into plain data plus the line and column of every key and value.

Loaders that build objects have two problems with hostile input: ruamel.yaml's round-trip
loader silently drops tags such as ``!!python/object/apply`` (the value loads as if the tag were
not there), and any loader hands back an alias bomb that explodes whenever someone walks it. So
this module builds the data itself from a YAML *event* stream, iteratively, and stops at the
first event that breaks a limit, with its position:

* one document per file, a mapping at the root, string keys, no duplicate keys;
* only the YAML 1.2 core tags (str, int, float, bool, null, map, seq): anything else is refused;
* at most ``MAX_DEPTH`` levels of nesting and ``MAX_VALUES`` values *after* alias expansion;
* files larger than ``MAX_BYTES`` are refused before they are read; UTF-8 only;
* numbers must be finite.

The events come from libyaml through PyYAML's C parser when PyYAML was built with it (about 40
times faster than a pure-Python scanner, which matters for a pre-commit hook that parses its own
policies on every call), else from ruamel.yaml's pure-Python parser; both give the same events
with the same marks, and the tests run every case through both.

Scalars resolve by the YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution),
so ``yes``/``on`` stay strings and dates stay strings; ``1_000`` is accepted as an integer as
ruamel and PyYAML both do. Merge keys (``<<``) are not special.

The folding itself (limits, tags, resolution, positions) is `dpguard.yamlevents`; this module
reads files, picks the event source and turns the libraries' errors into positioned findings.
The rest of dpguard never sees a YAML library: it gets a `SourceDoc` (plain data, positions).
"""

from __future__ import annotations

import codecs
import os
import stat
from typing import Any

from dpguard.errors import InputError
from dpguard.yamlevents import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_VALUES,
    Path,
    Position,
    SourceDoc,
    YamlLoadError,
    fold,
    position_of,
)

__all__ = [
    "FAST",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_VALUES",
    "Path",
    "Position",
    "SourceDoc",
    "YamlLoadError",
    "decoded",
    "load_file",
    "load_text",
    "read_regular",
    "read_text",
    "root_scalars",
]


def _line_col(text: str, index: int) -> Position:
    line = text.count("\n", 0, index) + 1
    return Position(line, index - (text.rfind("\n", 0, index) + 1) + 1)


def _events(text: str, fast: bool) -> Any:
    if fast:
        import yaml

        return yaml.parse(text, Loader=yaml.CSafeLoader)
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).parse(text)


def _libyaml() -> bool:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a dependency
        return False
    return bool(getattr(yaml, "__with_libyaml__", False))


FAST = _libyaml()


def load_text(text: str, name: str, fast: bool | None = None) -> SourceDoc:
    """Load one YAML document from `text`; `name` is used in positions. Raises YamlLoadError.

    `fast` picks the event source (default: libyaml when available); tests run both."""
    fast = FAST if fast is None else fast
    try:
        return fold(_events(text, fast), name)
    except YamlLoadError:
        raise
    except Exception as exc:
        # Both libraries' errors carry the same attributes: marks for syntax errors, a
        # character position for characters the reader refuses.
        if hasattr(exc, "position") and hasattr(exc, "character"):
            char = exc.character
            code = ord(char) if isinstance(char, str) else int(char)
            raise YamlLoadError(
                "Y009",
                f"character U+{code:04X} is not allowed in YAML",
                _line_col(text, exc.position),
            ) from None
        if not hasattr(exc, "problem_mark"):
            raise
        if fast and "maximum nesting depth" in str(getattr(exc, "problem", "")):
            # libyaml >= 0.2.6 (PyYAML 6.0.4 wheels) stops at 1,000 levels while its scanner
            # reads ahead, before dpguard's own limit sees an event: the pure-Python parser
            # finds where the file first goes deeper than MAX_DEPTH (Y008 at that bracket).
            return load_text(text, name, fast=False)
        mark = exc.problem_mark or getattr(exc, "context_mark", None)
        where = position_of(mark) if mark is not None else Position(1, 1)
        context = getattr(exc, "context", None)
        problem = getattr(exc, "problem", None) or context or "cannot parse"
        if (
            getattr(exc, "problem", None) and context
        ):  # e.g. "while parsing a flow sequence" and its start
            started = getattr(exc, "context_mark", None)
            at = f" that starts at line {started.line + 1}" if started is not None else ""
            problem += f" ({context}{at})"
        raise YamlLoadError("Y001", f"invalid YAML: {problem}", where) from None


def load_file(path: str) -> SourceDoc:
    """Load one YAML file. A missing file or a directory raises InputError (dpguard cannot run
    as asked); anything wrong with the content raises YamlLoadError (that file fails)."""
    return load_text(read_text(path), path)


def read_text(path: str) -> str:
    """A file's text, for every format dpguard reads: at most MAX_BYTES, UTF-8 (a BOM is
    dropped). Raises InputError (missing, a directory, not a regular file, unreadable) or
    YamlLoadError (too large, not UTF-8)."""
    return decoded(read_regular(path))


def decoded(raw: bytes) -> str:
    """A file's bytes as text: UTF-8, a BOM dropped; YamlLoadError (Y009) at the first byte
    that is not UTF-8."""
    # The BOM is not part of the text: offsets and columns count from after it.
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        text = raw[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        head = raw[bom : bom + exc.start].decode("utf-8")
        raise YamlLoadError(
            "Y009",
            f"the file is not UTF-8 (byte 0x{raw[bom + exc.start]:02x} at offset "
            f"{bom + exc.start})",
            _line_col(head, len(head)),
        ) from None
    return text


def read_regular(path: str, limit: int = MAX_BYTES) -> bytes:
    """At most `limit` bytes of a regular file, opened without blocking: a FIFO, a device or a
    socket is refused before a byte is read (a FIFO named by a manifest would otherwise hang
    the review, /dev/zero fill memory). InputError for what is not a readable regular file,
    YamlLoadError (Y012) for a file over `limit`."""
    if "\0" in path:
        raise InputError(f"{path!r}: not a file name (it holds a NUL character)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:  # e.g. a name too long, a loop of symbolic links
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file (a device, FIFO or socket)")
        if info.st_size > limit:
            raise YamlLoadError(
                "Y012", f"file is {info.st_size} bytes; the limit is {limit} bytes", Position(1, 1)
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(raw) > limit:  # a file still growing
        raise YamlLoadError(
            "Y012", f"file is larger than the limit of {limit} bytes", Position(1, 1)
        )
    return raw


def root_scalars(path: str, wanted: tuple[str, ...]) -> dict[str, str] | None:
    """The scalar values of `wanted` keys in the first document's root mapping, reading events
    only until they are found (a cheap sniff for pre-commit, which passes every YAML file of a
    repository). None when the file cannot be read or is not YAML at all."""
    try:
        text = read_regular(path, MAX_BYTES).decode("utf-8-sig")
        return _root_scalars(_events(text, FAST), wanted)
    except (InputError, YamlLoadError, UnicodeDecodeError):
        return None
    except Exception as exc:
        if hasattr(exc, "problem_mark") or hasattr(exc, "position"):
            return None  # a YAML error from either library
        raise


def _root_scalars(events: Any, wanted: tuple[str, ...]) -> dict[str, str]:
    stream = iter(events)
    for event in stream:
        kind = type(event).__name__
        if kind not in ("StreamStartEvent", "DocumentStartEvent"):
            if kind != "MappingStartEvent":
                return {}  # empty file, a scalar or a sequence at the root
            break
    found: dict[str, str] = {}
    nested, is_key, key = 0, True, None
    for event in stream:
        kind = type(event).__name__
        if kind in ("MappingStartEvent", "SequenceStartEvent"):
            nested += 1
            continue
        if kind in ("MappingEndEvent", "SequenceEndEvent"):
            if nested == 0:
                break  # the end of the root mapping
            nested -= 1
            if nested:
                continue
            value = None  # a collection at the root level just ended
        elif nested:
            continue
        else:
            value = event.value if kind == "ScalarEvent" else None
        if is_key:
            key = value
        elif key in wanted and value is not None:
            found.setdefault(key, value)
            if len(found) == len(wanted):
                break
        is_key = not is_key
    return found
