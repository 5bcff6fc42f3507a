"""Whole numbers written in framework configs, read the way the frameworks read them and
bounded. `str.isdigit` also takes superscripts ('²') that `int()` then refuses, and `int()`
refuses (or spends quadratic time on) more than 4,300 digits: a config's number goes through
here instead."""

from __future__ import annotations

import re

from dpguard.yamlevents import MAX_INT_DIGITS

_WHOLE = re.compile(r"-?[0-9]+(?:_[0-9]+)*")  # ASCII digits; argparse's int() takes 220_000_000


def whole(text: str) -> int | None:
    """`text` as an integer, or None when it is not one or has more than MAX_INT_DIGITS digits
    (no count a training config holds comes near it)."""
    text = text.strip()
    if len(text) > 2 * MAX_INT_DIGITS or not _WHOLE.fullmatch(text):
        return None
    digits = text.lstrip("-").replace("_", "")
    return int(text) if len(digits) <= MAX_INT_DIGITS else None


def too_long(text: str) -> bool:
    """Whether `text` is written as a whole number with more digits than MAX_INT_DIGITS."""
    text = text.strip()
    return (
        _WHOLE.fullmatch(text) is not None
        and len(text.lstrip("-").replace("_", "")) > MAX_INT_DIGITS
    )
