"""Fold a YAML *event* stream into plain data plus the position of every key and value.

Iterative, one event at a time, so every limit stops at the first event that breaks it, with
its position: one document, a mapping at the root, string keys, no duplicates, only the YAML 1.2
core tags, at most MAX_DEPTH levels and MAX_VALUES values after alias expansion, finite numbers.
Scalars resolve by the YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
`dpguard.yamlsource` supplies the events (libyaml or ruamel) and reads the files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_VALUES = 10_000
MAX_KEY = 256  # characters in a mapping key: no schema or framework key comes near it
MAX_INT_DIGITS = 30

Path = tuple[str | int, ...]


def value_at(data: Any, path: Path | tuple[str, ...]) -> Any:
    """The value at `path` in nested mappings, None where a key is missing."""
    node = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


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
    """A loaded document: plain data, and where each key and value stands.

    A document composed from several files (a manifest and the framework config it points at)
    names, in `files`, the file of every path not written in `name`; a path's file is that of
    its nearest positioned ancestor, as its position is."""

    name: str
    data: dict[str, Any]
    keys: Mapping[Path, Position]
    values: Mapping[Path, Position]
    files: Mapping[Path, str] = field(default_factory=dict)
    # composed from a framework config: the paths a person wrote (the manifest beside it, the
    # defaults); the others the config gave, which the framework's own rules judge
    written: frozenset[Path] = frozenset()

    def _anchor(self, path: Path) -> Path:
        path = tuple(path)
        while path and path not in self.keys:
            path = path[:-1]
        return path

    def position(self, path: Path) -> Position:
        """Position of the key at `path`, or of its nearest ancestor that has one."""
        anchor = self._anchor(path)
        return self.keys[anchor] if anchor else Position(1, 1)

    def file(self, path: Path) -> str:
        """The file in which `path` (or its nearest positioned ancestor) is written."""
        return self.files.get(self._anchor(path), self.name)

    def location(self, path: Path) -> str:
        """``file:line:col`` of `path` (or its nearest positioned ancestor), for messages."""
        line, col = self.position(path)
        return f"{self.file(path)}:{line}:{col}"

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


def position_of(mark: Any) -> Position:
    """A YAML library mark (0-based) as a 1-based Position."""
    return Position(mark.line + 1, mark.column + 1)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag


def _number(text: str, kind: str, where: Position) -> int | float:
    digits = text.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise YamlLoadError(
            "Y011",
            f"number {text[:20]}... has too many digits (the limit is {MAX_INT_DIGITS})",
            where,
        )
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


def fold(events: Any, name: str) -> SourceDoc:
    """The one document of `events` as a SourceDoc named `name`; raises YamlLoadError."""
    keys: dict[Path, Position] = {}
    values: dict[Path, Position] = {}
    anchors: dict[str, tuple[Any, int]] = {}
    stack: list[_Frame] = []
    total = 0
    aliased = False  # an alias expanded: a bomb's doing, not a long file's
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
                f"document expands to more than {MAX_VALUES} values (an alias bomb?)"
                if aliased
                else f"document has more than {MAX_VALUES} values, the most dpguard reads in "
                "one document: split it into several files",
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
            _check_key(value, top, keys, where)
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
        where = position_of(event.start_mark)
        kind = type(event).__name__  # PyYAML and ruamel share the event class names
        if kind == "DocumentStartEvent":
            documents += 1
            if documents > 1:
                raise YamlLoadError(
                    "Y003", "more than one YAML document in the file: one document per file", where
                )
        elif kind == "ScalarEvent":
            is_key = bool(stack) and isinstance(stack[-1].container, dict) and stack[-1].key is None
            value = _scalar(event, is_key, where)
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
            aliased = True
            place(value, size, where)

    if total == 0:
        raise YamlLoadError("Y002", "the file is empty: expected a mapping", Position(1, 1))
    if not isinstance(root, dict):
        raise YamlLoadError(
            "Y004", f"the top level must be a mapping, not a {_kind(root)}", root_at
        )
    return SourceDoc(name=name, data=root, keys=keys, values=values)


def _check_key(value: Any, top: _Frame, keys: dict[Path, Position], where: Position) -> None:
    """A mapping key must be a string, not too long, and new in its mapping."""
    if not isinstance(value, str):
        raise YamlLoadError("Y005", "mapping keys must be strings", where)
    if len(value) > MAX_KEY:
        raise YamlLoadError(
            "Y013", f"a key of {len(value):,} characters: the limit is {MAX_KEY}", where
        )
    if value in top.container:
        first = keys[(*top.path, value)]
        raise YamlLoadError(
            "Y005", f"duplicate key {value!r} (first defined at line {first.line})", where
        )


def _scalar(event: Any, is_key: bool, where: Position) -> Any:
    """A scalar event's value: keys as written, tagged scalars by their (allowed) tag, plain
    scalars resolved as YAML 1.2's core schema does (_resolve_plain), quoted ones as text."""
    if is_key:
        _refuse_tag(event.tag, (_CORE + "str",), where)
        return event.value
    if event.tag == "!":  # the non-specific tag: a string, never resolved
        return event.value
    if event.tag:
        _refuse_tag(event.tag, _SCALAR_TAGS, where)
        return _resolve_tagged(event.value, event.tag, where)
    if not event.style and event.implicit[0]:  # plain: None (ruamel) or "" (libyaml)
        return _resolve_plain(event.value, where)
    return event.value


def _kind(value: Any) -> str:
    return {
        list: "list",
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)
