"""The one "did you mean" used by every message that names something unknown."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def hint(word: str, choices: Iterable[object]) -> str:
    """ " (did you mean 'x'?)" for the closest choice, ignoring case ("BF16" -> 'bf16'), or "".
    Equally close choices go to the first in sorted order (difflib would take the last:
    "HR03" -> 'HR013' rather than 'HR003')."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word.lower())
    best: tuple[float, str] | None = None
    for candidate in sorted(by_lower):
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() < 0.6 or matcher.quick_ratio() < 0.6:
            continue
        score = matcher.ratio()
        if score >= 0.6 and (best is None or score > best[0]):
            best = (score, candidate)
    return f" (did you mean {by_lower[best[1]]!r}?)" if best else ""
