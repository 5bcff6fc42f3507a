"""The manifest schema compiled into plain Python checks, for the common case: a valid file.

`jsonschema` reports every error with its path, which the messages need, but walking a valid
manifest through it costs about half a millisecond per file and importing it about 50-90 ms
per process: a tenth of a review's per-file cost and a fifth of a one-file review. The
checks compiled here answer one question, "would jsonschema find no error?", for the subset of
JSON Schema (Draft 2020-12) the manifest schema uses, with dpguard's integer rule (a bool or a
float is never an integer). They are sound by construction: `True` only where every keyword
holds under jsonschema's own semantics (its equality, which tells `true` from 1; `pattern` as
`re.search`; number keywords on numbers only), and `False` for anything else, after which the
caller runs jsonschema for the messages. A schema keyword outside the subset raises
`Unsupported` at compile time, so a schema that grows one falls back to jsonschema everywhere
rather than being checked in part. tests/test_fastschema.py holds the two to the same answer
on every manifest in the tests and on thousands of mutations of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sized
from typing import Any, cast

Check = Callable[[Any], bool]

# Keywords that annotate and never fail a document.
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "default", "deprecated"}
    | {"examples", "x-replaced-by", "readOnly", "writeOnly"}
)
_TYPES: dict[str, Check] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
}


class Unsupported(ValueError):
    """The schema uses a keyword (or a keyword value) outside the compiled subset."""


def compile_schema(schema: Any) -> Check:
    """The check for `schema` (raises Unsupported: then validate with jsonschema alone)."""
    if schema is True:
        return lambda x: True
    if schema is False:
        return lambda x: False
    if not isinstance(schema, Mapping):
        raise Unsupported(f"a schema must be a mapping or a boolean, not {schema!r}")
    checks: list[Check] = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or keyword in ("then", "else", "additionalProperties"):
            # `then`/`else` go with `if` (ignored without it, Draft 2020-12 §10.2.2),
            # additionalProperties with `properties`
            continue
        build = _KEYWORDS.get(keyword)
        if build is None:
            raise Unsupported(f"keyword {keyword!r}")
        checks.append(build(value, schema))
    if "additionalProperties" in schema and "properties" not in schema:
        checks.append(_properties({}, schema))
    if len(checks) == 1:
        return checks[0]
    return lambda x: all(check(x) for check in checks)


def _type(value: Any, _: Mapping[str, Any]) -> Check:
    names = value if isinstance(value, list) else [value]
    if not names or any(n not in _TYPES for n in names):
        raise Unsupported(f"type {value!r}")
    tests = tuple(_TYPES[n] for n in names)
    if len(tests) == 1:
        return tests[0]
    return lambda x: any(t(x) for t in tests)


def equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema's `_utils.equal` has it: `true` is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)


def _enum(value: Any, _: Mapping[str, Any]) -> Check:
    if not isinstance(value, list):
        raise Unsupported(f"enum {value!r}")
    options = tuple(value)
    if all(isinstance(o, str) for o in options):
        strings = frozenset(options)
        return lambda x: isinstance(x, str) and x in strings
    return lambda x: any(equal(x, o) for o in options)


def _const(value: Any, _: Mapping[str, Any]) -> Check:
    return lambda x: equal(x, value)


def _properties(value: Any, schema: Mapping[str, Any]) -> Check:
    if not isinstance(value, Mapping):
        raise Unsupported(f"properties {value!r}")
    known = {name: compile_schema(sub) for name, sub in value.items()}
    extra = schema.get("additionalProperties", True)
    others = None if extra is True else compile_schema(extra)

    def check(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for key, item in x.items():
            sub = known.get(key)
            if sub is not None:
                if not sub(item):
                    return False
            elif others is not None and not others(item):
                return False
        return True

    return check


def _required(value: Any, _: Mapping[str, Any]) -> Check:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Unsupported(f"required {value!r}")
    names = tuple(value)
    return lambda x: not isinstance(x, dict) or all(n in x for n in names)


def _number(op: Callable[[float, float], bool]) -> Callable[[Any, Mapping[str, Any]], Check]:
    def build(value: Any, _: Mapping[str, Any]) -> Check:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unsupported(f"bound {value!r}")
        return lambda x: not _TYPES["number"](x) or op(x, value)

    return build


def _size(kind: type, op: Callable[[int, int], bool]) -> Callable[[Any, Mapping[str, Any]], Check]:
    def build(value: Any, _: Mapping[str, Any]) -> Check:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Unsupported(f"size {value!r}")
        return lambda x: not isinstance(x, kind) or op(len(cast(Sized, x)), value)

    return build


def _pattern(value: Any, _: Mapping[str, Any]) -> Check:
    if not isinstance(value, str):
        raise Unsupported(f"pattern {value!r}")
    search = re.compile(value).search  # jsonschema's `pattern` is re.search
    return lambda x: not isinstance(x, str) or search(x) is not None


def _items(value: Any, _: Mapping[str, Any]) -> Check:
    each = compile_schema(value)
    return lambda x: not isinstance(x, list) or all(each(i) for i in x)


def _unique(value: Any, _: Mapping[str, Any]) -> Check:
    if value is not True:
        return lambda x: True

    def check(x: Any) -> bool:
        if not isinstance(x, list):
            return True
        return not any(equal(a, b) for i, a in enumerate(x) for b in x[i + 1 :])

    return check


def _schemas(value: Any) -> list[Check]:
    if not isinstance(value, list) or not value:
        raise Unsupported(f"subschemas {value!r}")
    return [compile_schema(v) for v in value]


def _all_of(value: Any, _: Mapping[str, Any]) -> Check:
    subs = _schemas(value)
    return lambda x: all(s(x) for s in subs)


def _any_of(value: Any, _: Mapping[str, Any]) -> Check:
    subs = _schemas(value)
    return lambda x: any(s(x) for s in subs)


def _one_of(value: Any, _: Mapping[str, Any]) -> Check:
    subs = _schemas(value)
    return lambda x: sum(1 for s in subs if s(x)) == 1


def _not(value: Any, _: Mapping[str, Any]) -> Check:
    sub = compile_schema(value)
    return lambda x: not sub(x)


def _if(value: Any, schema: Mapping[str, Any]) -> Check:
    test = compile_schema(value)
    then = compile_schema(schema.get("then", True))
    otherwise = compile_schema(schema.get("else", True))
    return lambda x: then(x) if test(x) else otherwise(x)


_KEYWORDS: dict[str, Callable[[Any, Mapping[str, Any]], Check]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "properties": _properties,
    "required": _required,
    "minimum": _number(lambda x, v: x >= v),
    "maximum": _number(lambda x, v: x <= v),
    "exclusiveMinimum": _number(lambda x, v: x > v),
    "exclusiveMaximum": _number(lambda x, v: x < v),
    "minLength": _size(str, lambda n, v: n >= v),
    "maxLength": _size(str, lambda n, v: n <= v),
    "minItems": _size(list, lambda n, v: n >= v),
    "maxItems": _size(list, lambda n, v: n <= v),
    "minProperties": _size(dict, lambda n, v: n >= v),
    "maxProperties": _size(dict, lambda n, v: n <= v),
    "pattern": _pattern,
    "items": _items,
    "uniqueItems": _unique,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
}
