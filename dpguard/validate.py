"""Validate a loaded manifest: JSON Schema, then the cross-field checks a schema cannot express.

Every problem is reported at once, each at the line and column of the offending key. Cross-field
checks run even when other parts of the manifest broke the schema: each check reads only values
that are present and valid, and stays silent otherwise (the schema finding already covers them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from dpguard import cache as dpguard_cache
from dpguard import fastschema, resources
from dpguard.catalog import Catalog
from dpguard.crossfield import Raw, cross_field_problems
from dpguard.errors import ConfigError
from dpguard.findings import Finding, Severity
from dpguard.hints import closest, hint
from dpguard.manifest import DEPRECATED
from dpguard.yamlevents import value_at
from dpguard.yamlsource import Path, SourceDoc

SCHEMA_FILE = "manifest.schema.json"
SCHEMA_PATH = f"schemas/{SCHEMA_FILE}"

_KEYWORD_CODES = {
    "additionalProperties": "S001",
    "required": "S002",
    "type": "S003",
    "minimum": "S004",
    "maximum": "S004",
    "exclusiveMinimum": "S004",
    "exclusiveMaximum": "S004",
    "minLength": "S004",
    "maxLength": "S004",
    "maxProperties": "S004",
    "enum": "S005",
    "const": "S005",
    "pattern": "S006",
}


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _schema() -> dict[str, Any]:
    """The manifest schema, checked against its metaschema once per schema: ~35 ms and the
    jsonschema import, which the shipped record (dpguard.cache) vouches for in advance."""
    schema = resources.schema(SCHEMA_FILE)
    checked = ("valid-schemas", resources.schema_text(SCHEMA_FILE).encode())
    if not dpguard_cache.vouched(*checked):
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:  # a broken schema is dpguard's own file: exit 2, not an internal error mid-review
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = dotted(tuple(exc.absolute_path))
            raise ConfigError(
                f"not a valid JSON Schema at {where}: {exc.message}", SCHEMA_PATH
            ) from None
        dpguard_cache.vouch(*checked)
    return schema


@cache
def _validator() -> Any:
    """The compiled manifest schema validator, built once per process.

    JSON Schema counts 2048.0 as an integer. Here a count must be written as one: a float would
    slip past the cross-field checks (which read ints) into the typed Manifest.
    """
    from jsonschema import Draft202012Validator, validators

    strict = Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer)
    validator = validators.extend(Draft202012Validator, type_checker=strict)
    return validator(_schema())


def forget() -> None:
    """Drop the checked schema and what was built from it (tests that swap the schema)."""
    for cached in (_schema, _validator, _valid):
        cached.cache_clear()


@cache
def _valid() -> fastschema.Check:
    """Whether a document has no schema error, without jsonschema (dpguard.fastschema): most
    files are valid, and only an invalid one needs jsonschema's errors for its messages. A
    schema keyword the compiled subset lacks sends every document to jsonschema."""
    try:
        return fastschema.compile_schema(_schema())
    except fastschema.Unsupported:
        return lambda data: False


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    if isinstance(value, str) and len(value) > 40:  # never echo a whole paragraph
        return repr(value[:37] + "...")
    return repr(value)


def _bound(keyword: str, where: str, value: Any, limit: Any) -> str:
    """The message for a violated minimum/maximum/length/size keyword."""
    if keyword == "minimum":
        return f"{where} is {_describe(value)}; it must be at least {limit}"
    if keyword == "maximum":
        return f"{where} is {_describe(value)}; it must be at most {limit}"
    if keyword == "exclusiveMinimum":
        return f"{where} is {_describe(value)}; it must be more than {limit}"
    if keyword == "exclusiveMaximum":
        return f"{where} is {_describe(value)}; it must be less than {limit}"
    if keyword == "minLength":
        return (
            f"{where} must not be empty"
            if limit == 1
            else f"{where} must be at least {limit} characters long"
        )
    if keyword == "maxLength":
        return f"{where} is {len(value)} characters long; it must be at most {limit}"
    if keyword in ("minItems", "minProperties"):
        return f"{where} has {len(value)} entries; it must have at least {limit}"
    return f"{where} has {len(value)} entries; it must have at most {limit}"


def _key_hint(schema: dict[str, Any], key: Any, where: str, allowed: Any) -> str:
    """The "did you mean" of a key unknown where it is written, and, for a key the schema
    defines in one or two other places, where it belongs: ``precision`` under ``model`` gets
    " (precision belongs under training)"; ``expert`` there " (did you mean 'experts'?
    expert belongs under parallelism)"."""
    near = hint(str(key), allowed)
    here = re.sub(r"\[\d+\]", "[]", where)
    everywhere = _homes(json.dumps(schema, sort_keys=True))
    homes = [h for h in everywhere.get(str(key), ()) if h != here]
    name = str(key)
    if not homes and not near:
        # misspelled and in the wrong section (`precison` under model): only a near-certain
        # spelling, as a key from another section is a bolder guess (`region` is no `precision`)
        guess = closest(name, everywhere, cutoff=0.85)
        homes = [h for h in everywhere.get(guess, ()) if h != here] if guess else []
        if 0 < len(homes) <= 2:
            name, near = str(guess), hint(name, [guess])
    if not homes or len(homes) > 2:
        return near
    places = " or ".join("at the top level" if h == "(top level)" else f"under {h}" for h in homes)
    belongs = f"{name} belongs {places}"
    return f"{near[:-1]} {belongs})" if near else f" ({belongs})"


@cache
def _homes(schema_text: str) -> dict[str, tuple[str, ...]]:
    """Every property name of a schema -> the places (dotted, list items as ``[]``) that define
    it, following local ``$ref``s once each and the branches of ``allOf``/``anyOf``/``oneOf``."""
    schema = json.loads(schema_text)
    found: dict[str, list[str]] = {}

    def walk(node: Any, place: str, refs: frozenset[str]) -> None:
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and ref not in refs:
            target: Any = schema
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            walk(target, place, refs | {ref})
        for name, sub in node.get("properties", {}).items():
            homes = found.setdefault(name, [])
            if (place or "(top level)") not in homes:
                homes.append(place or "(top level)")
            walk(sub, f"{place}.{name}" if place else name, refs)
        walk(node.get("items"), f"{place or '(top level)'}[]", refs)
        for branch in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(branch, ()):
                walk(sub, place, refs)

    walk(schema, "", frozenset())
    return {name: tuple(homes) for name, homes in found.items()}


def _quantity_branches(alternatives: Any) -> dict[str, Any] | None:
    """For a quantity's ``oneOf: [number, string]``, its number branch; else None."""
    types = {branch.get("type"): branch for branch in alternatives if isinstance(branch, dict)}
    return types["number"] if set(types) == {"number", "string"} else None


_BOUNDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength"}
    | {"minItems", "maxItems", "minProperties", "maxProperties"}
)
_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string"}
_TYPE_NAMES.update({"boolean": "true or false", "object": "a mapping", "array": "a list"})


def schema_problems(validator: Any, doc: SourceDoc) -> Iterator[tuple[Path, str, str]]:
    """(path, code, message) for every schema violation; unknown keys one by one.

    Shared by manifests and policy files so both get the same positioned, readable messages."""
    for error in validator.iter_errors(doc.data):
        path: Path = tuple(error.absolute_path)
        where = dotted(path)
        keyword = error.validator
        if keyword == "additionalProperties":
            allowed = error.schema.get("properties", {})
            for key in sorted(set(error.instance) - set(allowed)):
                yield (
                    (*path, key),
                    "S001",
                    f"unknown key {_describe(key)} in {where}"
                    f"{_key_hint(validator.schema, key, where, allowed)}",
                )
        elif keyword == "required":
            missing = error.message.split("'")[1]
            yield path, "S002", f"{where} is missing the required key {missing!r}"
        elif keyword == "type":
            types = error.validator_value
            names = [
                str(_TYPE_NAMES.get(t, t)) for t in (types if isinstance(types, list) else [types])
            ]
            expected = " or ".join(names)
            yield path, "S003", f"{where} must be {expected}, not {_describe(error.instance)}"
        elif keyword in ("enum", "const"):
            options = error.validator_value if keyword == "enum" else [error.validator_value]
            listed = ", ".join(str(o) for o in options)
            yield (
                path,
                "S005",
                f"{where} is {_describe(error.instance)}; allowed: {listed}"
                f"{hint(str(error.instance), options)}",
            )
        elif keyword == "oneOf" and (number := _quantity_branches(error.validator_value)):
            # Quantities: a bounded number or a suffixed string. Say which half failed.
            value = error.instance
            if isinstance(value, str):
                yield (
                    path,
                    "S006",
                    f"{where} is {_describe(value)}: write a number or a count with a "
                    "K/M/B/T suffix, such as '671B' or '14.8T'",
                )
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                yield (
                    path,
                    "S004",
                    f"{where} is {value:g}; it must be between "
                    f"{number['minimum']:g} and {number['maximum']:g}",
                )
            else:
                yield (
                    path,
                    "S003",
                    f"{where} must be a number or a count such as '671B', not {_describe(value)}",
                )
        elif keyword in _BOUNDS:
            yield path, "S004", _bound(str(keyword), where, error.instance, error.validator_value)
        elif keyword == "pattern":
            yield (
                path,
                "S006",
                f"{where} is {_describe(error.instance)}; it must match {error.validator_value}",
            )
        else:
            code = _KEYWORD_CODES.get(str(keyword), "S007")
            yield path, code, f"{where}: {error.message}"


def validate(doc: SourceDoc, catalog: Catalog, composed: bool = False) -> list[Finding]:
    """Every schema and cross-field problem in `doc`, sorted by position. A document composed
    from a framework config has had its missing keys reported already (F003), so S002 is
    left out, and so is X029: its counts are read or derived from the config (a debug model
    of 800K parameters), not bare numbers a person wrote without a suffix. X035 too: the
    framework's own rule (FW014) judges the experts' tensor size a config sets, at its key.
    Both still judge what the manifest beside the config or the defaults write
    (`SourceDoc.written`)."""
    findings: list[Finding] = []
    broken: set[Path] = set()
    problems = () if _valid()(doc.data) else schema_problems(_validator(), doc)
    for path, code, message in problems:
        broken.add(path)
        if composed and code == "S002":
            continue
        findings.append(Finding(doc.file(path), *doc.position(path), code, Severity.ERROR, message))
    for old, new in DEPRECATED.items():
        path = tuple(old.split("."))
        if value_at(doc.data, path) is not None and path not in broken:
            findings.append(
                Finding(
                    doc.file(path),
                    *doc.position(path),
                    "S008",
                    Severity.INFO,
                    f"{old} is deprecated: write it as {new} (same meaning)",
                )
            )
    for where, code, message in cross_field_problems(Raw(doc, broken), catalog):
        path = tuple(where.split("."))
        if composed and code in ("X029", "X035") and path not in doc.written:
            continue
        findings.append(Finding(doc.file(path), *doc.position(path), code, Severity.ERROR, message))
    return sorted(set(findings))
