"""Find decision-table rows that can never match because an earlier row always wins.

Row j is unreachable when every way j can match also matches some earlier row i. Conditions are
put in disjunctive normal form; a conjunction of leaf tests is read as a box of constraints per
fact (numeric interval, allowed values, excluded values, set/unset, divisors). Row i covers row j
when each of j's conjunctions implies one of i's. The check is sound (a reported row really is
unreachable) but not complete: tests it cannot reason about (a negated divisibility, very large
normal forms) make it report nothing rather than guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dpguard.policy.conditions import Condition, Leaf
from dpguard.policy.model import Rule

MAX_TERMS = 256
_NEGATE = {"equals": "not_equals", "not_equals": "equals", "in": "not_in", "not_in": "in"}
_NEGATE.update({"lt": "ge", "ge": "lt", "le": "gt", "gt": "le"})

Term = tuple[Leaf, ...]


class _Opaque(Exception):
    """A test this module cannot reason about."""


def _dnf(cond: Condition, negate: bool = False) -> list[Term]:
    if isinstance(cond, Leaf):
        if not negate:
            return [(cond,)]
        if cond.op == "exists":
            return [(Leaf(cond.fact, "exists", not cond.value),)]
        if cond.op not in _NEGATE:
            raise _Opaque
        # not(fact OP v) is true when the fact is unset as well (facts.py semantics).
        return [
            (Leaf(cond.fact, _NEGATE[cond.op], cond.value),),
            (Leaf(cond.fact, "exists", False),),
        ]
    op = cond.op
    if op == "not":
        return _dnf(cond.items[0], not negate)
    if (op == "all") != negate:  # all, or not(any): conjunction
        terms: list[Term] = [()]
        for item in cond.items:
            terms = [t + u for t in terms for u in _dnf(item, negate)]
            if len(terms) > MAX_TERMS:
                raise _Opaque
        return terms
    return [t for item in cond.items for t in _dnf(item, negate)]


@dataclass
class _Box:
    lo: float = -math.inf
    lo_open: bool = False
    hi: float = math.inf
    hi_open: bool = False
    allowed: set[Any] | None = None
    excluded: set[Any] = field(default_factory=set)
    is_set: bool | None = None
    divisors: set[int] = field(default_factory=set)


def _boxes(term: Term) -> dict[str, _Box]:
    boxes: dict[str, _Box] = {}
    for leaf in term:
        box = boxes.setdefault(leaf.fact, _Box())
        op, v = leaf.op, leaf.value
        if op == "exists":
            box.is_set = bool(v)
            continue
        box.is_set = True
        if op == "equals":
            box.allowed = {v} if box.allowed is None else box.allowed & {v}
        elif op == "in":
            box.allowed = set(v) if box.allowed is None else box.allowed & set(v)
        elif op == "not_equals":
            box.excluded.add(v)
        elif op == "not_in":
            box.excluded |= set(v)
        elif op in ("gt", "ge") and (v > box.lo or (v == box.lo and op == "gt")):
            box.lo, box.lo_open = v, op == "gt"
        elif op in ("lt", "le") and (v < box.hi or (v == box.hi and op == "lt")):
            box.hi, box.hi_open = v, op == "lt"
        elif op == "divisible_by":
            box.divisors.add(v)
    return boxes


def _implies(box: _Box, leaf: Leaf) -> bool:
    """Does every value admitted by `box` satisfy `leaf`?"""
    op, v = leaf.op, leaf.value
    if op == "exists":
        return box.is_set is bool(v)
    if box.is_set is not True:
        return False
    values = box.allowed
    if op == "equals":
        return values == {v}
    if op == "in":
        return values is not None and values <= set(v)
    if op == "not_equals":
        return v in box.excluded or (values is not None and v not in values)
    if op == "not_in":
        return set(v) <= box.excluded or (values is not None and not values & set(v))
    if op == "divisible_by":
        return any(d % v == 0 for d in box.divisors)
    if values is not None and all(isinstance(x, (int, float)) for x in values):
        return all(_implies(_Box(lo=x, hi=x, is_set=True), leaf) for x in values)
    if op == "gt":
        return box.lo > v or (box.lo == v and box.lo_open)
    if op == "ge":
        return box.lo >= v
    if op == "lt":
        return box.hi < v or (box.hi == v and box.hi_open)
    return box.hi <= v  # le


def _covers(earlier: list[Term], later: list[Term]) -> bool:
    for term in later:
        boxes = _boxes(term)
        if not any(all(_implies(boxes.get(x.fact, _Box()), x) for x in t) for t in earlier):
            return False
    return True


def unreachable_rows(rows: Sequence[Rule]) -> list[tuple[Rule, Rule]]:
    """(row, earlier row that always wins) for each decision row that can never match."""
    out: list[tuple[Rule, Rule]] = []
    forms: list[tuple[Rule, list[Term] | None]] = []
    for row in rows:
        try:
            form: list[Term] | None = _dnf(row.when)
        except _Opaque:
            form = None
        if form is not None:
            winner = next((r for r, f in forms if f is not None and _covers(f, form)), None)
            if winner is not None:
                out.append((row, winner))
        forms.append((row, form))
    return out
