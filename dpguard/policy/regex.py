"""Patterns for the `matches` operator: compiled once when a policy loads, and refused when they
could backtrack catastrophically.

Python's `re` has no timeout, and a thread cannot interrupt a running match, so the guard is
static, on the pattern's parse tree (the same one `re.compile` builds):

- at most `MAX_LENGTH` characters;
- no quantifier over a group that itself holds a quantifier or an alternation (`(a+)+`,
  `(\\w+\\s?)*`, `(a|ab)*`): the classic exponential cases;
- at most `MAX_UNBOUNDED` unbounded quantifiers (`*`, `+`, `{n,}`) in the whole pattern:
  `.*.*.*x` is already O(n^4) under search.

What a pattern is matched against is short: the facts `matches` can test are strings, and the
free-text ones (`metadata.name`, `metadata.owner`, `metadata.labels.<key>`) are bounded by the
manifest schema to 256 characters. Within those bounds the worst accepted pattern takes
milliseconds (tests/test_policy_matches.py times one).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

MAX_LENGTH = 256
MAX_UNBOUNDED = 2
# re's own parser (stable from 3.11, where sre_parse became re._parser): the tree re.compile
# uses, so what is checked is exactly what runs. Imported by name: typeshed has no stub for it.
_parser: Any = importlib.import_module("re._parser")
_REPEATS = frozenset(("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"))


class PatternProblem(ValueError):
    """A pattern that does not compile or that the guard refuses; the message says which."""


def _children(av: Any) -> list[Any]:
    """The sub-patterns nested anywhere in one node's arguments."""
    if isinstance(av, _parser.SubPattern):
        return [av]
    if isinstance(av, (list, tuple)):
        return [sub for item in av for sub in _children(item)]
    return []


def _walk(sub: Any, counts: dict[str, int]) -> None:
    for op, av in sub:
        name = str(op)
        if name in _REPEATS:
            _low, high, body = av
            if high == _parser.MAXREPEAT:
                counts["unbounded"] += 1
            if high > 1 and _risky(body):
                raise PatternProblem(
                    "a quantifier over a group that holds another quantifier or an "
                    "alternation can backtrack exponentially; rewrite it without the nesting"
                )
        for child in _children(av):
            _walk(child, counts)


def _risky(sub: Any) -> bool:
    for op, av in sub:
        if (str(op) in _REPEATS and av[1] > 1) or str(op) == "BRANCH":
            return True
        if any(_risky(child) for child in _children(av)):
            return True
    return False


def compile_pattern(source: str) -> re.Pattern[str]:
    """The compiled pattern, or PatternProblem saying what is wrong with it."""
    if len(source) > MAX_LENGTH:
        raise PatternProblem(f"pattern is {len(source)} characters long; at most {MAX_LENGTH}")
    try:
        compiled = re.compile(source)
        tree = _parser.parse(source)
    except re.error as exc:
        raise PatternProblem(f"invalid regular expression: {exc}") from None
    counts = {"unbounded": 0}
    _walk(tree, counts)
    if counts["unbounded"] > MAX_UNBOUNDED:
        raise PatternProblem(
            f"{counts['unbounded']} unbounded quantifiers (*, +, {{n,}}); at most "
            f"{MAX_UNBOUNDED}, so a match cannot backtrack for long"
        )
    return compiled
