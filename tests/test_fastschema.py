"""The compiled manifest check (dpguard.fastschema) against jsonschema itself: never "valid"
where jsonschema finds an error, and "valid" for every valid manifest the tests hold, on the
tests' manifests and on thousands of seeded mutations of them (a key removed, a value of
every JSON type and of odd YAML ones put in its place, an unknown key added)."""

from __future__ import annotations

import copy
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dpguard import fastschema, validate
from dpguard.fastschema import Unsupported, compile_schema

ROOT = Path(__file__).parent.parent
SEED = 20261128
ODD = [None, True, False, 0, -1, 1, 1.5, 2.0, 10**18, -1e300, math.inf, math.nan, "", "abc"]
ODD += ["7B", "1.5T", [], [1, "a"], {}, {"x": 1}]


def _manifests() -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from corpus import seed_manifests

    docs = []
    paths = [*seed_manifests(), *ROOT.glob("tests/data/**/*.yaml"), *ROOT.glob("examples/*.yaml")]
    for path in sorted(set(paths)):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and doc.get("kind") == "TrainingManifest":
            docs.append(doc)
    return docs


def _valid(doc: Any) -> bool:
    return not any(validate._validator().iter_errors(doc))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _mutated(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    path = rng.choice(_paths(doc)[1:])
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    action = rng.random()
    if action < 0.2 and isinstance(parent, dict):
        del parent[last]
    elif action < 0.3 and isinstance(parent[last], dict):
        parent[last]["zz_unknown"] = rng.choice(ODD)
    elif action < 0.4 and isinstance(parent[last], str):
        parent[last] += "x"
    elif (
        action < 0.5
        and isinstance(parent[last], (int, float))
        and not isinstance(parent[last], bool)
    ):
        parent[last] = parent[last] * rng.choice([-1, 0, 0.5, 2, 1000, 1.0])
    else:
        parent[last] = copy.deepcopy(rng.choice(ODD))
    return doc


def test_the_shipped_schema_compiles() -> None:
    assert compile_schema(validate._schema())("not a manifest") is False


def test_every_valid_manifest_of_the_tests_is_valid_without_jsonschema() -> None:
    check = validate._valid()
    docs = _manifests()
    assert len(docs) > 100
    valid = [d for d in docs if _valid(d)]
    assert len(valid) > 100
    assert all(check(d) for d in valid)
    assert not any(check(d) for d in docs if not _valid(d))


def test_mutations_never_pass_where_jsonschema_finds_an_error() -> None:
    check = validate._valid()
    rng = random.Random(SEED)
    docs = _manifests()
    agree = invalid = 0
    for _ in range(3000):
        doc = _mutated(rng.choice(docs), rng)
        expected = _valid(doc)
        invalid += not expected
        assert not check(doc) or expected, doc
        agree += check(doc) == expected
    assert invalid > 1000  # the mutations do break documents
    assert agree >= 0.99 * 3000  # and the fast check falls back only on oddities (NaN)


# Every keyword of the compiled subset, against jsonschema on random instances
EVERY = {
    "type": "object",
    "additionalProperties": {"type": ["string", "null"], "maxLength": 3},
    "required": ["n"],
    "minProperties": 1,
    "maxProperties": 5,
    "properties": {
        "n": {"type": "number", "minimum": 0, "exclusiveMaximum": 10},
        "i": {"type": "integer", "exclusiveMinimum": -2, "maximum": 7},
        "e": {"enum": [1, "a", True, None, [1], {"k": 1}]},
        "c": {"const": 1.0},
        "s": {"type": "string", "minLength": 1, "pattern": "^[a-c]+$"},
        "l": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        "u": {"type": "array", "uniqueItems": True},
        "any": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
        "one": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
        "not": {"not": {"type": "boolean"}},
        "cond": {
            "if": {"type": "integer"},
            "then": {"minimum": 3},
            "else": {"type": "string"},
        },
        "all": {"allOf": [{"type": "string"}, {"maxLength": 2}]},
        "t": True,
        "f": False,
    },
}
VALUES = [*ODD, 3, 4, 5, 9.5, 10, -2, 7, 0.5, -0.5, 6.5, 7.5, "a", "ab", "abc", "abcd", "d"]
VALUES += [[1, 1], [1, True]]
VALUES += [[1.0, 1], [3], [1, 2, 3, 4], {"k": 1}, {"k": True}, [[1], [1]], ["a", "b"]]


def test_every_keyword_answers_as_jsonschema_does() -> None:
    from jsonschema import Draft202012Validator, validators

    strict = Draft202012Validator.TYPE_CHECKER.redefine("integer", validate._is_integer)
    reference = validators.extend(Draft202012Validator, type_checker=strict)(EVERY)
    check = compile_schema(EVERY)
    rng = random.Random(SEED)
    keys = [*EVERY["properties"], "extra", "x"]
    seen = set()
    for _ in range(5000):
        doc = {k: copy.deepcopy(rng.choice(VALUES)) for k in rng.sample(keys, rng.randint(0, 4))}
        expected = reference.is_valid(doc)
        seen.add(expected)
        if any(isinstance(v, float) and math.isnan(v) for v in doc.values()):
            assert not check(doc) or expected  # NaN compares false: the fast check declines
        else:
            assert check(doc) == expected, doc
    assert seen == {True, False}


@pytest.mark.parametrize(
    "schema",
    [{"$ref": "#/$defs/x"}, {"type": "strin"}, {"format": "email"}, {"minimum": "0"}, 3],
)
def test_a_keyword_outside_the_subset_is_not_checked_in_part(schema: Any) -> None:
    with pytest.raises(Unsupported):
        fastschema.compile_schema(schema)


def test_json_equality_tells_true_from_one() -> None:
    assert fastschema.equal(1, 1.0) and not fastschema.equal(True, 1)
    assert not fastschema.equal([True], [1]) and fastschema.equal({"a": [1]}, {"a": [1.0]})
    assert not fastschema.equal("1", 1) and not fastschema.equal([], {})
