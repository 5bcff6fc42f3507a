"""The one "did you mean" used by every message that names something unknown."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def hint(word: str, choices: Iterable[object]) -> str:
    """ " (did you mean 'x'?)" for the closest choice, ignoring case ("BF16" -> 'bf16'), or ""."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""
