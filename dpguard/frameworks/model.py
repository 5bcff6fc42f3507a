"""What a framework reader returns: dpguard fields, where each was written, and notes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dpguard.findings import Severity
from dpguard.yamlevents import Position


class Origin(NamedTuple):
    file: str
    position: Position


class FrameworkError(Exception):
    """The file cannot be read as its format (syntax, limits): one positioned finding."""

    def __init__(self, code: str, message: str, origin: Origin, format: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.origin = origin
        self.format = format


@dataclass(frozen=True)
class Note:
    """A remark about the framework file, reported as a finding at `origin`."""

    origin: Origin
    code: str
    message: str
    severity: Severity = Severity.WARNING


@dataclass
class Values:
    """The one value-and-origin builder of every reader: dpguard fields by dotted path, each
    with where the config wrote it (none: where the file starts, as compose places it)."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)

    def put(self, dotted: str, value: Any, origin: Origin | None) -> None:
        """Set `dotted`; a None value (the file does not say) sets nothing."""
        if value is None:
            return
        self.values[dotted] = value
        if origin is not None:
            self.origins[dotted] = origin

    def get(self, dotted: str, default: Any = None) -> Any:
        return self.values.get(dotted, default)


@dataclass(frozen=True)
class Extract:
    """A framework config read into dpguard's terms.

    `values` maps dotted manifest paths (``parallelism.tensor``) to values; `origins` says
    where each was written (a value derived from several keys points at the first); `facts`
    are the framework facts the framework rules test (policy.facts, ``framework.*``);
    `undetermined` are fields the file writes in a way a static reader cannot follow (a
    command substitution, an unset variable), with where: never defaulted (compose)."""

    format: str
    path: str
    values: Mapping[str, Any]
    origins: Mapping[str, Origin]
    notes: tuple[Note, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    undetermined: Mapping[str, Origin] = field(default_factory=dict)
    # The batch one data-parallel replica takes per step, when the global batch follows from the
    # GPU count the file leaves to the launcher (torchtitan's local_batch_size with a shard
    # degree of -1): compose multiplies it by the data-parallel size once a manifest or the
    # defaults give the GPU count. With it, the steps that turn the batch into tokens.
    replica_batch: tuple[int, Origin] | None = None
    steps: tuple[int, Origin] | None = None


def section(node: Any, key: str) -> dict[str, Any]:
    """`node[key]` when both are mappings, else empty: a hostile or mistaken file may put a
    scalar where a section belongs (``tokens: true``)."""
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, dict) else {}
