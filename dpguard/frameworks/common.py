"""Helpers the framework readers share: Megatron-family YAML arguments under a section (with
OmegaConf references and NeMo-Framework-Launcher's arithmetic resolvers), nodes x devices,
sequence lengths, and merging extra values into an extract; and what the Megatron-family YAML
emitters (NeMo's, FlagScale's) share: Megatron arguments written as YAML sections."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dpguard.frameworks import megatron
from dpguard.frameworks.megatron import Arg
from dpguard.frameworks.model import Extract, Note, Origin, Values
from dpguard.yamlevents import SourceDoc


def with_values(
    extract: Extract,
    origins: Mapping[str, Origin] = {},
    notes: Sequence[Note] = (),
    values: Mapping[str, Any] = {},
) -> Extract:
    merged_values = {**values, **extract.values}
    merged = {**origins, **extract.origins}
    return replace(
        extract,
        values=merged_values,
        origins={k: v for k, v in merged.items() if k in merged_values},
        notes=tuple(notes) + extract.notes,
    )


_INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


def section_args(
    doc: SourceDoc, section: tuple[str | int, ...], flatten: bool = False
) -> dict[str, Arg]:
    """The keys of one section as Megatron arguments, with OmegaConf ``${a.b}`` references
    resolved within the file (anything else stays unknown)."""
    node: Any = doc.data
    for key in section:
        node = node.get(key) if isinstance(node, dict) else None
    args: dict[str, Arg] = {}
    if not isinstance(node, dict):
        return args
    for key, value in node.items():
        path = (*section, key)
        if isinstance(value, dict) and flatten:
            args.update({k: v for k, v in section_args(doc, path).items() if k not in args})
            continue
        origin = Origin(doc.file(path), doc.value_position(path))
        resolved, why = _resolve(doc, value, section)
        if resolved is None and not why:
            continue  # null (or a reference to null): unset, the framework's default applies
        args[megatron.canonical(str(key))] = Arg(resolved, origin, why)
    return args


# The arithmetic resolvers NeMo-Framework-Launcher registers (main.py: multiply x*y,
# divide_ceil ceil(x/y), divide_floor x//y), used in its configs for derived sizes such as
# ffn_hidden_size: ${multiply:4, ${.hidden_size}}.
_ARITHMETIC = {
    "multiply": lambda x, y: x * y,
    "divide_ceil": lambda x, y: -(-x // y),
    "divide_floor": lambda x, y: x // y,
}


_RESOLVER = re.compile(r"\$\{(" + "|".join(_ARITHMETIC) + r"):(.*)\}", re.S)


def _arguments(text: str) -> list[str]:
    """A resolver's arguments: split at the commas outside nested ``${...}``."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return [*out, text[start:].strip()]


def _resolve(doc: SourceDoc, value: Any, section: tuple, depth: int = 0) -> tuple[Any, str]:
    if not isinstance(value, str) or "${" not in value:
        return value, ""
    arithmetic = _RESOLVER.fullmatch(value.strip())
    if arithmetic is not None and depth <= 8:
        operands = []
        for text in _arguments(arithmetic.group(2)):
            operand, why = (
                _resolve(doc, text, section, depth + 1)
                if "${" in text
                else (int(text) if re.fullmatch(r"-?[0-9]+", text) else None, "")
            )
            if not isinstance(operand, int) or isinstance(operand, bool):
                return None, why or f"the resolver {value!r} over a value that is not a number"
            operands.append(operand)
        if len(operands) == 2 and (operands[1] != 0 or arithmetic.group(1) == "multiply"):
            return _ARITHMETIC[arithmetic.group(1)](*operands), ""
        return None, f"the resolver {value!r}: two numbers expected, the divisor not 0"
    match = _INTERPOLATION.fullmatch(value.strip())
    if match is None or depth > 8:
        return None, f"the interpolation {value!r}"
    ref = match.group(1)
    if ref.startswith("."):  # relative to the section
        parts = (*section, *ref.lstrip(".").split("."))
    elif ":" in ref or not re.fullmatch(r"[A-Za-z_][\w.]*", ref):
        return None, f"the resolver {value!r}, which only the framework evaluates"
    else:
        parts = tuple(ref.split("."))
    node: Any = doc.data
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None, f"{value!r}, which refers to a key the file does not set"
        node = node[part]
    return _resolve(doc, node, parts[:-1], depth + 1)


def nodes_times_devices(
    nodes: Arg | None, devices: Arg | None
) -> tuple[dict[str, Any], dict[str, Origin]]:
    found = Values()
    per = devices.value if devices is not None else None
    count = nodes.value if nodes is not None else None
    if isinstance(per, int) and not isinstance(per, bool) and per > 0:
        found.put("cluster.gpus_per_node", per, devices.origin)  # type: ignore[union-attr]
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            found.put("cluster.gpus", per * count, nodes.origin)  # type: ignore[union-attr]
    return found.values, found.origins


def config_lengths(doc: SourceDoc, paths: tuple[tuple[str, ...], ...]) -> list[tuple[int, Origin]]:
    out = []
    for path in paths:
        node: Any = doc.data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        value, _ = _resolve(doc, node, path[:-1])
        if isinstance(value, int) and not isinstance(value, bool):
            out.append((value, Origin(doc.name, doc.value_position(path))))
    return out


def seq_facts(extract: Extract, lengths: list[tuple[int, Origin]]) -> Extract:
    distinct = sorted({v for v, _ in lengths})
    fact = None
    if len(distinct) > 1:
        fact = ", ".join(f"{v} (line {o.position.line})" for v, o in lengths)
    return replace(extract, facts={**extract.facts, "framework.sequence_lengths": fact})


def yaml_sections(sections: Iterable[tuple[str, list[tuple[str, Any]]]]) -> list[str]:
    """YAML lines of (section, [(key, value)]): a dict value is one nested level, and
    `megatron.OFF` is null (the framework's default)."""
    lines: list[str] = []
    for name, items in sections:
        lines.append(f"{name}:")
        for key, value in items:
            if isinstance(value, dict):
                lines.append(f"  {key}:")
                lines += [f"    {k}: {_yaml_value(v)}" for k, v in value.items()]
            else:
                lines.append(f"  {key}: {_yaml_value(value)}")
    return lines


def _yaml_value(value: Any) -> str:
    # JSON is valid YAML for the scalars and flat lists written here, and quotes strings
    # that YAML would otherwise read as something else
    return "null" if value == megatron.OFF else json.dumps(value)


def switches(args: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """`megatron.plan_args` for YAML: a switch that is on (None on a command line) is true."""
    return [(name, True if value is None else value) for name, value in args]
