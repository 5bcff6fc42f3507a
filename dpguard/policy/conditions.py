"""Structured conditions: ``all``, ``any``, ``not`` and leaf tests ``{fact: PATH, OP: VALUE}``.

Parsed once when a policy loads (every fact path, operator and value type checked, with the
position of the offending key), then evaluated against flat fact dictionaries. No ``eval``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dpguard.hints import hint, operator_hint
from dpguard.policy.facts import FACTS, FactSpec, spec_of
from dpguard.policy.regex import MAX_SUBJECT, PatternProblem, compile_pattern
from dpguard.yamlsource import Path, SourceDoc

Operator = Callable[[Any, Any], bool]


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Each operator receives a *set* fact value (unset facts never reach an operator; see facts.py).
OPERATORS: dict[str, Operator] = {
    "equals": lambda fact, value: bool(fact == value),
    "not_equals": lambda fact, value: bool(fact != value),
    "lt": lambda fact, value: _num(fact) and fact < value,
    "le": lambda fact, value: _num(fact) and fact <= value,
    "gt": lambda fact, value: _num(fact) and fact > value,
    "ge": lambda fact, value: _num(fact) and fact >= value,
    "in": lambda fact, value: fact in value,
    "not_in": lambda fact, value: fact not in value,
    "divisible_by": lambda fact, value: (
        _num(fact) and float(fact).is_integer() and int(fact) % value == 0
    ),
    # `value` is the pattern compiled at load (policy.regex); search, as JSON Schema's pattern:
    # anchor with ^ and $ to match the whole value. Only the first MAX_SUBJECT characters: the
    # guard's bound on a match's work is computed for values that long (policy.regex).
    "matches": lambda fact, value: (
        isinstance(fact, str) and value.search(fact[:MAX_SUBJECT]) is not None
    ),
}
ORDERED = frozenset(("lt", "le", "gt", "ge", "divisible_by"))
ALL_OPERATORS = (*OPERATORS, "exists")


class ConditionProblem(Exception):
    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class Leaf:
    fact: str
    op: str
    value: Any

    def holds(self, facts: Mapping[str, Any]) -> bool:
        actual = facts.get(self.fact)
        if self.op == "exists":
            return (actual is not None) is bool(self.value)
        if actual is None:
            return False
        return OPERATORS[self.op](actual, self.value)


@dataclass(frozen=True)
class Group:
    op: str  # all | any | not
    items: tuple[Condition, ...]

    def holds(self, facts: Mapping[str, Any]) -> bool:
        if self.op == "all":
            return all(c.holds(facts) for c in self.items)
        if self.op == "any":
            return any(c.holds(facts) for c in self.items)
        return not self.items[0].holds(facts)


Condition = Leaf | Group


def leaves(condition: Condition) -> Iterator[Leaf]:
    if isinstance(condition, Leaf):
        yield condition
    else:
        for item in condition.items:
            yield from leaves(item)


def _check_value(spec: FactSpec, op: str, value: Any, path: Path) -> None:
    where = (*path, op)
    values = value if op in ("in", "not_in") else [value]
    if op in ORDERED and spec.type not in ("int", "number"):
        raise ConditionProblem(f"{op} needs a numeric fact; {spec.path} is {spec.type}", where)
    for item in values:
        ok = {
            "int": _num(item),
            "number": _num(item),
            "bool": isinstance(item, bool),
            "str": isinstance(item, str),
        }[spec.type]
        if op in ORDERED:
            ok = _num(item)
        if not ok:
            raise ConditionProblem(
                f"{spec.path} is {'an' if spec.type == 'int' else 'a'} {spec.type} fact; "
                f"{item!r} can never match it",
                where,
            )
        if spec.path == "cluster.accelerator" and op not in ORDERED:
            _accelerator(item, where)
        if spec.choices and op not in ORDERED and item not in spec.choices:
            raise ConditionProblem(
                f"{item!r} is not a possible value of {spec.path}{hint(str(item), spec.choices)}; "
                f"possible: {', '.join(spec.choices)}",
                where,
            )


def _accelerator(item: str, where: Path) -> None:
    """cluster.accelerator holds the catalog's canonical id (or `custom`) whatever the manifest
    wrote, so an alias, another case or an unknown name can never match: an error that names
    the id to write (`H100`, `h100-sxm` -> 'H100-SXM')."""
    from dpguard.catalog import load_catalog

    catalog = load_catalog()
    canonical = catalog.canonical(item)
    if canonical == item:
        return
    if canonical is not None:
        raise ConditionProblem(
            f"{item!r} can never match cluster.accelerator: manifests are normalised to the "
            f"catalog id, so write {canonical!r}",
            where,
        )
    raise ConditionProblem(
        f"{item!r} is not an accelerator in the catalog{catalog.hint(item)}; "
        f"possible: {', '.join(catalog.ids())}, custom",
        where,
    )


def parse(data: Any, path: Path, late: frozenset[str] = frozenset()) -> Condition:
    """Build a condition from policy data; raises ConditionProblem at the offending key.

    `late`: facts the rule's kind cannot see set (see facts.LATE_FACTS); naming one is an error."""
    if not isinstance(data, dict) or not data:
        raise ConditionProblem("a condition must be a mapping: all, any, not or a fact test", path)
    groups = [k for k in ("all", "any", "not") if k in data]
    if groups:
        if len(data) != 1:
            extra = sorted(set(data) - {groups[0]})[0]
            raise ConditionProblem(
                f"{groups[0]!r} cannot be combined with {extra!r}; nest them instead",
                (*path, extra),
            )
        op = groups[0]
        body = data[op]
        if op == "not":
            return Group("not", (parse(body, (*path, "not"), late),))
        if not isinstance(body, list) or not body:
            raise ConditionProblem(f"{op!r} takes a non-empty list of conditions", (*path, op))
        return Group(op, tuple(parse(c, (*path, op, i), late) for i, c in enumerate(body)))
    if "fact" not in data:
        key = sorted(data)[0]
        raise ConditionProblem(
            f"unknown condition key {key!r}{hint(key, ('all', 'any', 'not', 'fact'))}; "
            "use all, any, not or {fact: PATH, OPERATOR: VALUE}",
            (*path, key),
        )
    fact = data["fact"]
    spec = spec_of(fact) if isinstance(fact, str) else None
    if spec is None:
        raise ConditionProblem(
            f"unknown fact {fact!r}{hint(str(fact), FACTS)} (`dpguard facts` lists them)",
            (*path, "fact"),
        )
    if fact in late:
        known = (
            "is set only when review --baseline or diff compares a change"
            if fact.startswith("change.")
            else "is only known after the decision table and refusals have run"
        )
        raise ConditionProblem(
            f"fact {fact!r} {known}, so "
            "this rule would never see it set; test it in a reject or advise rule",
            (*path, "fact"),
        )
    ops = [k for k in data if k != "fact"]
    for op in ops:
        if op not in ALL_OPERATORS:
            raise ConditionProblem(
                f"unknown operator {op!r}{operator_hint(op, ALL_OPERATORS)}; "
                f"operators: {', '.join(ALL_OPERATORS)}",
                (*path, op),
            )
    if len(ops) != 1:
        raise ConditionProblem(
            f"a fact test needs exactly one operator, found {len(ops)}: {', '.join(ops) or 'none'}",
            path,
        )
    op, value = ops[0], data[ops[0]]
    if op == "exists":
        if not isinstance(value, bool):
            raise ConditionProblem("exists takes true or false", (*path, op))
    elif op in ("in", "not_in"):
        if not isinstance(value, list) or not value:
            raise ConditionProblem(f"{op} takes a non-empty list", (*path, op))
        _check_value(FACTS[fact], op, value, path)
        value = tuple(value)
    elif op == "divisible_by":
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise ConditionProblem("divisible_by takes a positive integer", (*path, op))
        _check_value(spec, op, value, path)
    elif op == "matches":
        if spec.type != "str":
            raise ConditionProblem(f"matches needs a str fact; {fact} is {spec.type}", (*path, op))
        if not isinstance(value, str):
            raise ConditionProblem("matches takes a regular expression (a string)", (*path, op))
        try:
            value = compile_pattern(value)
        except PatternProblem as exc:
            raise ConditionProblem(str(exc), (*path, op)) from None
    else:
        _check_value(spec, op, value, path)
    return Leaf(fact, op, value)


def position_of(doc: SourceDoc, path: Path) -> str:
    line, col = doc.position(path)
    return f"{doc.name}:{line}:{col}"
