"""The one "did you mean" used by every message that names something unknown."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def hint(word: str, choices: Iterable[object]) -> str:
    """ " (did you mean 'x'?)" for the closest choice, or "" (see `closest`)."""
    match = closest(word, choices)
    return f" (did you mean {match!r}?)" if match is not None else ""


def closest(word: str, choices: Iterable[object], cutoff: float = 0.6) -> str | None:
    """The closest choice at least `cutoff` similar, ignoring case ("BF16" -> 'bf16'), or
    None. Equally close choices go to the first in sorted order (difflib would take the last:
    "HR03" -> 'HR013' rather than 'HR003')."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word.lower())
    best: tuple[float, str] | None = None
    for candidate in sorted(by_lower):
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() < cutoff or matcher.quick_ratio() < cutoff:
            continue
        score = matcher.ratio()
        if score >= cutoff and (best is None or score > best[0]):
            best = (score, candidate)
    return by_lower[best[1]] if best else None


# Operators people write from other languages, mapped to the dpguard operator that means the
# same: edit distance alone would turn `gte` (>=) into `gt` (>), silently changing the rule.
OPERATOR_SYNONYMS: dict[str, str] = {
    "gte": "ge",
    ">=": "ge",
    "greater_or_equal": "ge",
    "min": "ge",
    "lte": "le",
    "<=": "le",
    "less_or_equal": "le",
    "max": "le",
    ">": "gt",
    "greater_than": "gt",
    "<": "lt",
    "less_than": "lt",
    "eq": "equals",
    "==": "equals",
    "equal": "equals",
    "is": "equals",
    "neq": "not_equals",
    "ne": "not_equals",
    "!=": "not_equals",
    "not_equal": "not_equals",
    "nin": "not_in",
    "one_of": "in",
    "regex": "matches",
    "match": "matches",
    "pattern": "matches",
    "exist": "exists",
    "multiple_of": "divisible_by",
    "divisible": "divisible_by",
}


def operator_hint(word: str, operators: Iterable[str]) -> str:
    """The hint for an unknown operator: the synonym table first (`gte` is 'ge', never 'gt'),
    edit distance only for what the table does not know."""
    known = tuple(operators)
    synonym = OPERATOR_SYNONYMS.get(word.lower())
    if synonym is not None and synonym in known:
        return f" (did you mean {synonym!r}?)"
    return hint(word, known)


def _chip_tokens(name: str) -> tuple[str, str | None]:
    """(chip, memory) of an accelerator name: 'h100-80gb' -> ('h100', '80gb'),
    'Instinct-MI300X' -> ('mi300x', None), 'gaudi-3' -> ('gaudi3', None)."""
    import re

    tokens = [t for t in re.split(r"[-_\s]+", name.lower()) if t]
    memory = next((t for t in tokens if re.fullmatch(r"\d+gb", t)), None)
    chip = next((t for t in tokens if re.fullmatch(r"[a-z]+\d+[a-z]*", t)), None)
    return chip or "".join(tokens), memory


def accelerator_hint(name: str, entries: Iterable[tuple[str, Iterable[str]]]) -> str:
    """The hint for an unknown accelerator: the catalog entry (id, aliases) of the same chip,
    preferring the same memory variant; nothing when no entry is that chip: 'h100-80gb' is an
    H100, not the A100-80GB edit distance would pick, and 'H20' is no H200."""
    chip, memory = _chip_tokens(name)
    same: list[tuple[str, bool]] = []
    for entry_id, aliases in entries:
        names = [entry_id, *aliases]
        parsed = [_chip_tokens(n) for n in names]
        if any(c == chip for c, _ in parsed):
            same.append((entry_id, memory is not None and any(m == memory for _, m in parsed)))
    if not same:
        return ""
    exact = [i for i, hit in same if hit]
    if len(exact) == 1 or len(same) == 1:
        return f" (did you mean {(exact or [same[0][0]])[0]!r}?)"
    return " (did you mean " + " or ".join(repr(i) for i, _ in same) + "?)"
