"""The one place that reads dpguard's packaged data (schemas, policies, templates, catalog).

The top-level policies/, schemas/ and templates/ directories are mapped into the package by
pyproject (``dpguard.policies`` etc.), so the same code works from a wheel, an editable install
and a source checkout.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from dpguard.errors import ConfigError

if TYPE_CHECKING:  # importlib.resources.abc only exists from Python 3.11
    from importlib.abc import Traversable


def packaged(package: str, name: str = "") -> Traversable:
    """A file or directory shipped in `package` (e.g. "dpguard.schemas")."""
    root = resources.files(package)
    return root / name if name else root


def optional_json(package: str, name: str) -> Any:
    """A packaged JSON file's data, or None when it is missing or not JSON: for data that only
    saves work (the shipped checks, the reference simulations), whose loss costs time, never a
    review."""
    try:
        return json.loads(packaged(package, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_text(package: str, name: str) -> str:
    try:
        return packaged(package, name).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"packaged file {package}/{name} cannot be read: {exc}") from None


@cache
def schema_text(name: str) -> str:
    """A packaged JSON Schema's text, read once per process (it also keys the per-user cache)."""
    return read_text("dpguard.schemas", name)


@cache
def schema(name: str) -> dict[str, Any]:
    """A packaged JSON Schema, parsed once per process."""
    try:
        loaded: dict[str, Any] = json.loads(schema_text(name))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{exc.msg}", f"schemas/{name}:{exc.lineno}:{exc.colno}") from None
    return loaded
