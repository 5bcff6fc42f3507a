"""DeepSpeed JSON (`deepspeed`): batch sizes, ZeRO, precision and activation checkpointing,
read with every key's position (docs/frameworks.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from dpguard.findings import Severity
from dpguard.frameworks.model import Extract, FrameworkError, Note, Origin, Values
from dpguard.yamlevents import MAX_DEPTH, MAX_INT_DIGITS, MAX_KEY, Position


def read(path: str, text: str) -> Extract:
    data, positions = load_json(path, text)
    found = Values()

    def put(dotted: str, value: Any, *at: str) -> None:
        if value is not None:
            found.put(dotted, value, Origin(path, positions.get(at, Position(1, 1))))

    notes: list[Note] = []

    def number(key: str) -> int | None:
        value = data.get(key)
        if value == "auto":
            notes.append(
                Note(
                    Origin(path, positions.get((key,), Position(1, 1))),
                    "F002",
                    f'"{key}" is "auto": the trainer fills it in, so dpguard cannot read it',
                    Severity.INFO,
                )
            )
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    for key, dotted in (
        ("train_batch_size", "training.global_batch_size"),
        ("train_micro_batch_size_per_gpu", "training.micro_batch_size"),
    ):
        put(dotted, number(key), key)
    number("gradient_accumulation_steps")
    zero = data.get("zero_optimization")
    if isinstance(zero, dict) and isinstance(zero.get("stage"), int):
        put("training.zero_stage", zero["stage"], "zero_optimization", "stage")
        offload = zero.get("offload_optimizer")
        if isinstance(offload, dict) and offload.get("device") in ("cpu", "nvme"):
            put("training.optimizer_offload", 1.0, "zero_optimization", "offload_optimizer")
    elif zero is None:
        # DeepSpeed's own default without the section (runtime/zero/config.py: stage 0), not
        # dpguard's manifest default (1): the file says what runs
        found.put("training.zero_stage", 0, Origin(path, Position(1, 1)))
    for key, precision in (("bf16", "bf16"), ("bfloat16", "bf16"), ("fp16", "fp16")):
        section = data.get(key)
        if isinstance(section, dict) and section.get("enabled") is True:
            put("training.precision", precision, key)
    if "training.precision" not in found.values:
        # no bf16/fp16 section enabled: DeepSpeed trains in fp32, which dpguard does not model
        notes.append(
            Note(
                Origin(path, Position(1, 1)),
                "F002",
                "no bf16 or fp16 section is enabled, so DeepSpeed trains in fp32, which dpguard "
                "does not model: the verdict is for bf16 (memory and time read low)",
            )
        )
    if isinstance(data.get("activation_checkpointing"), dict):
        put("training.activation_recompute", "full", "activation_checkpointing")
    facts = {
        "framework.zero_with_pipeline": isinstance(data.get("pipeline"), dict)
        and found.get("training.zero_stage", 0) >= 2
    }
    return Extract("deepspeed", path, found.values, found.origins, tuple(notes), facts)


def load_json(path: str, text: str) -> tuple[dict[str, Any], dict[tuple, Position]]:
    """A JSON object with the position of every key, refusing duplicate keys and nesting
    deeper than MAX_DEPTH (the limits the YAML loader applies)."""
    positions: dict[tuple, Position] = {}
    depth = 0
    for match in re.finditer(r'[\[{]|[\]}]|"(?:[^"\\]|\\.)*"', text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise FrameworkError(
                    "F001",
                    f"nesting deeper than {MAX_DEPTH} levels",
                    Origin(path, _pos(text, match.start())),
                )
        elif token in "]}":
            depth -= 1

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if len(key) > MAX_KEY:
                raise _Refused(
                    f"a key of {len(key):,} characters: the limit is {MAX_KEY}",
                    f'"[^"]{{{MAX_KEY + 1},}}"',
                )
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen[key] = value
        return seen

    try:
        data = json.loads(
            text, object_pairs_hook=pairs, parse_constant=_no_constant, parse_int=_whole
        )
    except json.JSONDecodeError as exc:
        raise FrameworkError(
            "F001", f"invalid JSON: {exc.msg}", Origin(path, Position(exc.lineno, exc.colno))
        ) from None
    except _Refused as exc:  # a limit: at the first text that breaks it
        found = re.search(exc.locate, text)
        raise FrameworkError(
            "F001", str(exc), Origin(path, _pos(text, found.start() if found else 0))
        ) from None
    except ValueError as exc:
        key = str(exc).split("'")[1] if "'" in str(exc) else ""
        at = text.rfind(f'"{key}"')
        raise FrameworkError(
            "F001", f"invalid JSON: {exc}", Origin(path, _pos(text, max(at, 0)))
        ) from None
    if not isinstance(data, dict):
        raise FrameworkError(
            "F001", "the top level is not a JSON object", Origin(path, Position(1, 1))
        )
    _positions(text, data, positions)
    return data, positions


class _Refused(ValueError):
    """A value over one of the reader's limits; `locate`: a pattern finding it in the text."""

    def __init__(self, message: str, locate: str) -> None:
        super().__init__(message)
        self.locate = locate


def _whole(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(
            f"a number of {len(text)} digits: the limit is {MAX_INT_DIGITS}",
            f"[0-9]{{{MAX_INT_DIGITS + 1},}}",
        )
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _pos(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    return Position(line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


def _positions(text: str, data: dict[str, Any], out: dict[tuple, Position]) -> None:
    """Key positions: the strings followed by ``:`` are exactly the keys, in document order,
    which is the order a depth-first walk of the parsed objects meets them. Each is decoded as
    JSON decodes it, so a key written with escapes (``"\\u0074rain..."``) still matches."""
    keys = [m for m in _STRING.finditer(text) if _COLON.match(text, m.end())]
    found = iter(keys)

    def walk(node: Any, prefix: tuple) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, prefix)
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            match = next(found, None)
            if match is not None and json.loads(match.group()) == key:
                out[(*prefix, key)] = _pos(text, match.start())
            walk(value, (*prefix, key))

    walk(data, ())


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_COLON = re.compile(r"\s*:")
