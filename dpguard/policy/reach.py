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
    if op == "matches":
        return False  # no reasoning about patterns: never claim coverage (stays sound)
    if values is not None and all(isinstance(x, (int, float)) for x in values):
        return all(_implies(_Box(lo=x, hi=x, is_set=True), leaf) for x in values)
    if op == "gt":
        return box.lo > v or (box.lo == v and box.lo_open)
    if op == "ge":
        return box.lo >= v
    if op == "lt":
        return box.hi < v or (box.hi == v and box.hi_open)
    return box.hi <= v  # le


Piece = tuple[float, bool, float, bool]  # lo, lo_open, hi, hi_open


def _intervals_cover(pieces: list[Piece], target: Piece) -> bool:
    """Whether the union of `pieces` contains every real number in `target` (exact ends)."""
    lo, lo_open, hi, hi_open = target
    # Covered so far: everything below `at`, and `at` itself when `at_in`.
    at, at_in = lo, lo_open or lo == -math.inf
    for _ in range(len(pieces) + 1):
        if at > hi or (at == hi and (at_in or hi_open)):
            return True
        best: tuple[float, bool] | None = None
        for p_lo, p_lo_open, p_hi, p_hi_open in pieces:
            starts = p_lo < at or (p_lo == at and (at_in or not p_lo_open))
            reach = (p_hi, not p_hi_open)
            if starts and reach > (at, at_in) and (best is None or reach > best):
                best = reach
        if best is None:
            return False
        at, at_in = best
    return False


def _union_cover(
    earlier: list[tuple[Rule, Term]], term: Term, always_set: frozenset[str]
) -> set[str] | None:
    """The ids of earlier rows whose terms together cover `term` along one numeric fact f that
    is set whenever `term` holds: each is implied by `term` apart from an interval on f, and
    their intervals cover all of `term`'s range for f (DT003's `<= 500` with DT002's `> 500`).
    None when no fact gives such a cover."""
    boxes = _boxes(term)
    for fact in sorted({leaf.fact for _, t in earlier for leaf in t}):
        box = boxes.get(fact, _Box())
        if box.allowed is not None or box.excluded or box.divisors:
            continue
        if box.is_set is not True and fact not in always_set:
            continue  # `term` may hold while the fact is unset, where no interval test holds
        pieces: list[Piece] = []
        ids: set[str] = set()
        for rule, t in earlier:
            own = [x for x in t if x.fact == fact]
            others = [x for x in t if x.fact != fact]
            if any(x.op not in ("lt", "le", "gt", "ge", "exists") or x.value is False for x in own):
                continue
            if all(_implies(boxes.get(x.fact, _Box()), x) for x in others):
                b = _boxes(tuple(own)).get(fact, _Box())
                pieces.append((b.lo, b.lo_open, b.hi, b.hi_open))
                ids.add(rule.id)
        if pieces and _intervals_cover(pieces, (box.lo, box.lo_open, box.hi, box.hi_open)):
            return ids
    return None


def unreachable_rows(
    rows: Sequence[Rule], always_set: frozenset[str] = frozenset()
) -> list[tuple[Rule, tuple[Rule, ...]]]:
    """(row, the earlier rows that always win) for each decision row that can never match:
    one earlier row that covers it, or several whose ranges on one fact together do."""
    out: list[tuple[Rule, tuple[Rule, ...]]] = []
    forms: list[tuple[Rule, list[Term]]] = []
    for row in rows:
        try:
            form = _dnf(row.when)
        except _Opaque:
            continue  # an opaque row is never reported, and never used to shadow another
        winner = next((r for r, f in forms if _covers(f, form)), None)
        if winner is not None:
            out.append((row, (winner,)))
        else:
            terms = [(r, t) for r, f in forms for t in f]
            covers = [_union_cover(terms, term, always_set) for term in form]
            if forms and all(c is not None for c in covers):
                ids = set().union(*(c for c in covers if c is not None))
                out.append((row, tuple(r for r, _ in forms if r.id in ids)))
        forms.append((row, form))
    return out


def _covers(earlier: list[Term], later: list[Term]) -> bool:
    for term in later:
        boxes = _boxes(term)
        if not any(all(_implies(boxes.get(x.fact, _Box()), x) for x in t) for t in earlier):
            return False
    return True
