"""The step-time model's constants (policies/performance/model.yaml), checked against their schema.

Every number the model uses lives in that file with its source; this module only reads it. A
broken file is dpguard's own broken data: `ConfigError`, exit 2, at its line.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any

import yaml

from dpguard import cache as user_cache
from dpguard import resources
from dpguard.errors import ConfigError

FILE = "performance/model.yaml"
SCHEMA_FILE = "performance.schema.json"


@cache
def load() -> Mapping[str, Any]:
    """The model's constants, once per process. Parsing and checking them costs ~9 ms, which
    every `review` would pay: the checked data is remembered as JSON under the digest of the
    file and its schema (dpguard.cache.remembered_json), as the framework profiles are."""
    text = resources.read_text("dpguard.policies", FILE)
    key = (resources.schema_text(SCHEMA_FILE).encode(), text.encode())
    return user_cache.remembered_json("performance", key, lambda: _checked(text), MappingProxyType)


def _checked(text: str) -> dict[str, Any]:
    """The file's data, checked against its schema; ConfigError (exit 2) at the problem."""
    where = f"policies/{FILE}"
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"invalid YAML: {exc}", where + line) from None
    from jsonschema import Draft202012Validator

    errors = sorted(
        Draft202012Validator(resources.schema(SCHEMA_FILE)).iter_errors(data),
        key=lambda e: list(map(str, e.absolute_path)),
    )
    if errors:
        path = ".".join(map(str, errors[0].absolute_path)) or "(top level)"
        raise ConfigError(f"{path}: {errors[0].message}", where)
    return dict(data)


def by_family(table: Mapping[str, Any], family: str, precision: str) -> tuple[float, bool]:
    """(share, known): the family's entry for `precision`, or the `default` family's (known
    False: the prediction notes that the accelerator has no calibrated efficiency)."""
    row = table.get(family)
    if row is not None and precision in row:
        return float(row[precision]), True
    return float(table["default"][precision]), False
