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

The rest of dpguard never sees a YAML library: it gets a `SourceDoc` (plain data, positions).
"""

from __future__ import annotations

import codecs
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from dpguard.errors import InputError

MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_VALUES = 10_000
MAX_INT_DIGITS = 30

Path = tuple[str | int, ...]


class Position(NamedTuple):
    """1-based line and column."""

    line: int
    col: int


class YamlLoadError(Exception):
    """The file is not a loadable document; carries a stable code and a position.

    Internal to loading: callers turn it into a Finding for that one file.
    """

    def __init__(self, code: str, message: str, position: Position) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.position = position


@dataclass(frozen=True)
class SourceDoc:
    """A loaded document: plain data, and where each key and value stands in the file."""

    name: str
    data: dict[str, Any]
    keys: Mapping[Path, Position]
    values: Mapping[Path, Position]

    def position(self, path: Path) -> Position:
        """Position of the key at `path`, or of its nearest ancestor that has one."""
        path = tuple(path)
        while path:
            if path in self.keys:
                return self.keys[path]
            path = path[:-1]
        return Position(1, 1)

    def value_position(self, path: Path) -> Position:
        return self.values.get(tuple(path)) or self.position(path)


_CORE = "tag:yaml.org,2002:"
_INT = re.compile(r"[-+]?[0-9]+(?:_[0-9]+)*")
_OCT = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_INF = re.compile(r"[-+]?\.(?:inf|Inf|INF)")
_NAN = re.compile(r"\.(?:nan|NaN|NAN)")
_SCALAR_TAGS = tuple(_CORE + t for t in ("str", "int", "float", "bool", "null"))
_NULL = frozenset(("", "~", "null", "Null", "NULL"))
_TRUE = frozenset(("true", "True", "TRUE"))
_FALSE = frozenset(("false", "False", "FALSE"))


def _pos(mark: Any) -> Position:
    return Position(mark.line + 1, mark.column + 1)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag


def _number(text: str, kind: str, where: Position) -> int | float:
    digits = text.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise YamlLoadError("Y011", f"number {text[:20]}... has too many digits", where)
    if kind == "int":
        if _OCT.fullmatch(text):
            return int(text[2:], 8)
        if _HEX.fullmatch(text):
            return int(text[2:], 16)
        return int(text.replace("_", ""))
    value = float(text)
    if not math.isfinite(value):
        raise YamlLoadError("Y010", f"{text} is not a finite number", where)
    return value


def _resolve_plain(text: str, where: Position) -> Any:
    """YAML 1.2 core schema resolution of an untagged plain scalar."""
    if text in _NULL:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INT.fullmatch(text) or _OCT.fullmatch(text) or _HEX.fullmatch(text):
        return _number(text, "int", where)
    if _FLOAT.fullmatch(text):
        return _number(text, "float", where)
    if _INF.fullmatch(text) or _NAN.fullmatch(text):
        raise YamlLoadError("Y010", f"{text} is not a finite number", where)
    return text


def _resolve_tagged(text: str, tag: str, where: Position) -> Any:
    name = tag[len(_CORE) :]
    if name == "str":
        return text
    if name == "null" and text in _NULL:
        return None
    if name == "bool" and text in _TRUE | _FALSE:
        return text in _TRUE
    if name in ("int", "float"):
        value = _resolve_plain(text, where)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if name == "float":
                return float(value)
            if float(value).is_integer():
                return int(value)
    raise YamlLoadError("Y006", f"{text!r} is not a valid {_short_tag(tag)} value", where)


class _Frame:
    """An open mapping or sequence while the event stream is being folded into data."""

    __slots__ = ("anchor", "container", "key", "key_pos", "path", "size", "start")

    def __init__(
        self, container: dict[str, Any] | list[Any], path: Path, start: Position, anchor: str | None
    ) -> None:
        self.container = container
        self.path = path
        self.start = start
        self.anchor = anchor
        self.key: str | None = None
        self.key_pos = start
        self.size = 1


def _refuse_tag(tag: str | None, allowed: tuple[str, ...], where: Position) -> None:
    if tag and tag not in allowed:
        raise YamlLoadError(
            "Y006",
            f"tag {_short_tag(tag)} is not allowed: only plain YAML values are accepted",
            where,
        )


def _fold(events: Any, name: str) -> SourceDoc:
    keys: dict[Path, Position] = {}
    values: dict[Path, Position] = {}
    anchors: dict[str, tuple[Any, int]] = {}
    stack: list[_Frame] = []
    total = 0
    root: Any = None
    root_at = Position(1, 1)
    documents = 0

    def place(value: Any, size: int, where: Position) -> None:
        """Attach a finished value to the open container (or make it the root)."""
        nonlocal root, root_at, total
        total += size
        if total > MAX_VALUES:
            raise YamlLoadError(
                "Y007",
                f"document expands to more than {MAX_VALUES} values (an alias bomb?)",
                where,
            )
        if not stack:
            root, root_at = value, where
            return
        top = stack[-1]
        top.size += size
        if isinstance(top.container, list):
            path = (*top.path, len(top.container))
            keys[path] = values[path] = where
            top.container.append(value)
            return
        if top.key is None:  # this value is a key
            if not isinstance(value, str):
                raise YamlLoadError("Y005", "mapping keys must be strings", where)
            if value in top.container:
                first_path = (*top.path, value)
                first = keys[first_path]
                raise YamlLoadError(
                    "Y005",
                    f"duplicate key {value!r} (first defined at line {first.line})",
                    where,
                )
            top.key, top.key_pos = value, where
            return
        path = (*top.path, top.key)
        keys[path], values[path] = top.key_pos, where
        top.container[top.key] = value
        top.key = None

    def child_path() -> Path:
        if not stack:
            return ()
        top = stack[-1]
        if isinstance(top.container, list):
            return (*top.path, len(top.container))
        if top.key is None:
            return (*top.path, "<key>")
        return (*top.path, top.key)

    for event in events:
        where = _pos(event.start_mark)
        kind = type(event).__name__  # PyYAML and ruamel share the event class names
        if kind == "DocumentStartEvent":
            documents += 1
            if documents > 1:
                raise YamlLoadError(
                    "Y003", "more than one YAML document in the file: one document per file", where
                )
        elif kind == "ScalarEvent":
            if stack and isinstance(stack[-1].container, dict) and stack[-1].key is None:
                _refuse_tag(event.tag, (_CORE + "str",), where)
                value: Any = event.value  # keys are taken as written
            elif event.tag == "!":  # the non-specific tag: a string, never resolved
                value = event.value
            elif event.tag:
                _refuse_tag(event.tag, _SCALAR_TAGS, where)
                value = _resolve_tagged(event.value, event.tag, where)
            elif not event.style and event.implicit[0]:  # plain: None (ruamel) or "" (libyaml)
                value = _resolve_plain(event.value, where)
            else:
                value = event.value
            if event.anchor:
                anchors[event.anchor] = (value, 1)
            place(value, 1, where)
        elif kind in ("MappingStartEvent", "SequenceStartEvent"):
            is_map = kind == "MappingStartEvent"
            _refuse_tag(event.tag, (_CORE + ("map" if is_map else "seq"),), where)
            if stack and isinstance(stack[-1].container, dict) and stack[-1].key is None:
                raise YamlLoadError("Y005", "mapping keys must be strings", where)
            if len(stack) >= MAX_DEPTH:
                raise YamlLoadError("Y008", f"nesting deeper than {MAX_DEPTH} levels", where)
            stack.append(_Frame({} if is_map else [], child_path(), where, event.anchor))
        elif kind in ("MappingEndEvent", "SequenceEndEvent"):
            frame = stack.pop()
            if frame.anchor:
                anchors[frame.anchor] = (frame.container, frame.size)
            place(frame.container, frame.size, frame.start)
        elif kind == "AliasEvent":
            if event.anchor not in anchors:
                recursive = any(frame.anchor == event.anchor for frame in stack)
                problem = "refers to a node that contains it" if recursive else "is not defined"
                raise YamlLoadError("Y001", f"alias *{event.anchor} {problem}", where)
            value, size = anchors[event.anchor]
            place(value, size, where)

    if total == 0:
        raise YamlLoadError("Y002", "the file is empty: expected a mapping", Position(1, 1))
    if not isinstance(root, dict):
        raise YamlLoadError(
            "Y004", f"the top level must be a mapping, not a {_kind(root)}", root_at
        )
    return SourceDoc(name=name, data=root, keys=keys, values=values)


def _kind(value: Any) -> str:
    return {
        list: "list",
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)


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
        return _fold(_events(text, fast), name)
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
        mark = exc.problem_mark or getattr(exc, "context_mark", None)
        where = _pos(mark) if mark is not None else Position(1, 1)
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
    try:
        size = os.stat(path).st_size
        if os.path.isdir(path):
            raise InputError(f"{path}: is a directory, not a file")
        if size > MAX_BYTES:
            raise YamlLoadError(
                "Y012", f"file is {size} bytes; the limit is {MAX_BYTES} bytes", Position(1, 1)
            )
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:  # e.g. a name too long, a loop of symbolic links
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:  # st_size lied: a device, a pipe, a file still growing
        raise YamlLoadError(
            "Y012", f"file is larger than the limit of {MAX_BYTES} bytes", Position(1, 1)
        )
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
    return load_text(text, path)


def root_scalars(path: str, wanted: tuple[str, ...]) -> dict[str, str] | None:
    """The scalar values of `wanted` keys in the first document's root mapping, reading events
    only until they are found (a cheap sniff for pre-commit, which passes every YAML file of a
    repository). None when the file cannot be read or is not YAML at all."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return _root_scalars(_events(handle.read(MAX_BYTES), FAST), wanted)
    except (OSError, UnicodeDecodeError):
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
