"""What values each fact can take, and the lint that uses it: comparisons no manifest can make
true (or false), and rules whose condition can never hold.

Enum facts (their `choices`, and cluster.accelerator's catalog ids) are checked when a policy
loads (`conditions`): a value outside the domain is an error. Numeric ranges come from the
manifest schema's minimum and maximum for what a manifest writes, and from what each derived
fact is (a fraction, a count); a comparison outside them is a *warning* from `lint-policies`
(`cluster.gpus lt: 1` is never true, `ge: 1` always is), since a range can be wider in a future
schema. A rule whose condition contradicts itself (`gpus lt: 8` and `gt: 16`; `equals: a` and
`not_equals: a`; `exists: false` beside a test) is an error on every load, like an unreachable
decision row.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from dpguard.policy.conditions import Leaf
from dpguard.policy.facts import FACTS, spec_of
from dpguard.policy.model import Rule
from dpguard.policy.reach import _dnf, _Opaque

Range = tuple[float, float]  # inclusive
_FRACTION: Range = (0.0, 1.0)
_COUNT: Range = (1.0, math.inf)
_NON_NEGATIVE: Range = (0.0, math.inf)
_ANY: Range = (-math.inf, math.inf)

# Derived facts and quantities the schema writes as strings ("13B"): what they are.
_DERIVED: dict[str, Range] = {
    "model.total_params": _COUNT,
    "model.active_params": _COUNT,
    "training.tokens": _COUNT,
    "cluster.scale_up_domain": _COUNT,
    "derived.nodes": _COUNT,
    "derived.tensor_domain": _COUNT,
    "derived.data_parallel": _COUNT,
    "derived.microbatches": _COUNT,
    "derived.stages": _COUNT,
    "derived.microbatches_per_rank": (0.0, math.inf),
    "derived.layers_per_stage": (0.0, math.inf),
    "framework.layers_dropped": _NON_NEGATIVE,
    "policy.memory_headroom": (0.0, 0.9),
    "policy.usable_memory_gb": _NON_NEGATIVE,
    "plan.recommended_saving_gpu_hours": _ANY,  # negative: the proposal's is cheaper
}


@cache
def ranges() -> Mapping[str, Range]:
    """Every numeric fact's possible values (inclusive), as far as they are known."""
    from dpguard import resources

    out: dict[str, Range] = {}

    def walk(node: Any, path: str) -> None:
        for key, sub in node.get("properties", {}).items():
            dotted = f"{path}.{key}" if path else key
            if "minimum" in sub or "maximum" in sub:
                out[dotted] = (sub.get("minimum", -math.inf), sub.get("maximum", math.inf))
            if isinstance(sub, dict):
                walk(sub, dotted)

    walk(resources.schema("manifest.schema.json"), "")
    out.update(_DERIVED)
    for path, spec in FACTS.items():
        if spec.type not in ("int", "number") or path in out:
            continue
        tail = path.rsplit(".", 1)[-1]
        if "delta" in tail:
            continue  # a change: either sign
        if tail.endswith("bubble"):
            out[path] = _FRACTION
        elif tail.endswith(("_gb", "gpu_hours")):
            out[path] = _NON_NEGATIVE
    return {p: r for p, r in out.items() if p in FACTS}


def _describe(path: str, lo: float, hi: float) -> str:
    def num(x: float) -> str:
        return f"{x:g}" if isinstance(x, float) else str(x)

    if hi == math.inf:
        return f"{path} is at least {num(lo)}"
    if lo == -math.inf:
        return f"{path} is at most {num(hi)}"
    return f"{path} is between {num(lo)} and {num(hi)}"


def leaf_warning(leaf: Leaf) -> str | None:
    """Why a numeric comparison is decided by the fact's range alone, or None."""
    span = ranges().get(leaf.fact)
    if span is None or leaf.op not in ("lt", "le", "gt", "ge", "equals", "in"):
        return None
    lo, hi = span
    op, v = leaf.op, leaf.value
    values = v if op == "in" else (v,)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
        return None
    never = {
        "lt": v <= lo if op == "lt" else False,
        "le": v < lo if op == "le" else False,
        "gt": v >= hi if op == "gt" else False,
        "ge": v > hi if op == "ge" else False,
        "equals": not lo <= v <= hi if op == "equals" else False,
        "in": all(not lo <= x <= hi for x in values) if op == "in" else False,
    }[op]
    always = {"lt": v > hi, "le": v >= hi, "gt": v < lo, "ge": v <= lo}.get(op, False)
    shown = f"{leaf.fact} {op} {list(v) if op == 'in' else v}"
    if never:
        return f"{shown} is never true: {_describe(leaf.fact, lo, hi)}"
    if always:
        return (
            f"{shown} is true whenever the fact is set: {_describe(leaf.fact, lo, hi)} "
            "(test exists: true if that is what is meant)"
        )
    return None


def _satisfiable(term: tuple[Leaf, ...], with_ranges: bool) -> bool:
    by_fact: dict[str, list[Leaf]] = {}
    for leaf in term:
        by_fact.setdefault(leaf.fact, []).append(leaf)
    for fact, tests in by_fact.items():
        exists = {bool(t.value) for t in tests if t.op == "exists"}
        others = [t for t in tests if t.op != "exists"]
        if len(exists) > 1 or (False in exists and others):
            return False
        lo, hi = ranges().get(fact, (-math.inf, math.inf)) if with_ranges else (-math.inf, math.inf)
        lo_open = hi_open = False
        allowed: set[Any] | None = None
        excluded: set[Any] = set()
        for t in others:
            op, v = t.op, t.value
            if op in ("gt", "ge") and (v > lo or (v == lo and op == "gt")):
                lo, lo_open = v, op == "gt"
            elif op in ("lt", "le") and (v < hi or (v == hi and op == "lt")):
                hi, hi_open = v, op == "lt"
            elif op in ("equals", "in"):
                values = {v} if op == "equals" else set(v)
                allowed = values if allowed is None else allowed & values
            elif op == "not_equals":
                excluded.add(v)
            elif op == "not_in":
                excluded |= set(v)
        if lo > hi or (lo == hi and (lo_open or hi_open)):
            return False
        spec = spec_of(fact)
        if allowed is None and spec is not None:
            if spec.type == "bool":
                allowed = {True, False}
            elif spec.choices:
                allowed = set(spec.choices)
        if allowed is not None:
            left = allowed - excluded
            numeric = [x for x in left if isinstance(x, (int, float)) and not isinstance(x, bool)]
            if numeric and len(numeric) == len(left):
                left = {
                    x
                    for x in numeric
                    if (x > lo or (x == lo and not lo_open))
                    and (x < hi or (x == hi and not hi_open))
                }
            if not left:
                return False
    return True


def never_true(rule: Rule, with_ranges: bool = False) -> bool:
    """Whether no manifest can make the rule's condition hold. Sound, not complete: a
    condition too large to expand, or with a negated divisibility or pattern, is not judged."""
    try:
        terms = _dnf(rule.when)
    except _Opaque:
        return False
    return all(not _satisfiable(term, with_ranges) for term in terms)


def leaves_with_paths(data: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Each leaf test of a condition as written, with its path in the policy document."""
    if not isinstance(data, dict):
        return
    for group in ("all", "any"):
        if isinstance(data.get(group), list):
            for i, item in enumerate(data[group]):
                yield from leaves_with_paths(item, (*path, group, i))
            return
    if "not" in data:
        yield from leaves_with_paths(data["not"], (*path, "not"))
    elif "fact" in data:
        yield path, data
