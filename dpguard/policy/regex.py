"""Patterns for the `matches` operator: compiled once when a policy loads, and accepted only when
they belong to a subset of Python's `re` syntax that cannot backtrack super-linearly.

Python's `re` is a backtracking matcher with no linear-time mode and no timeout, and a thread
cannot interrupt a running match; policy files come from pull requests. So the guard is static,
on the parse tree `re.compile` itself builds (re._parser), and what it accepts is a subset:

- at most `MAX_LENGTH` characters;
- single characters: literals, `.`, classes `[...]` and `\\d \\w \\s` (negated too);
- anchors `^ $ \\A \\Z \\b \\B`; groups, capturing or not, and inline flags;
- alternation `a|b`, its branches anything in the subset;
- quantifiers (`? * + {m,n}`, greedy or lazy) over a single character or over a fixed string:
  a group with no quantifier (other than a fixed count `{m}`) and no alternation inside, at least
  one character wide (`(ab)+`, `(-[a-z])*`); counts at most `MAX_COUNT`;
- `?` (or `{0,1}`) over anything in the subset (`(-[a-z]+)?`): taken at most once, it is an
  alternation with an empty branch;
- nothing else: no backreferences, conditionals, lookahead/lookbehind, atomic groups or
  possessive quantifiers (none is needed by a subset that cannot backtrack far).

Why that is enough, and the bound. Call a *choice point* a quantifier whose count can vary or an
alternation. A backtracking matcher explores, from one start position, a tree whose branches
are the choices it makes at choice points; everything between two choice points is
deterministic. In the subset no choice point sits under a quantifier that can repeat (a
repeated body is a single character or a fixed string, whose iterations leave nothing to choose
but their count; a `?` body is entered at most once), so each choice point is met at most once
on a path from the root, and the tree has at most `ways` leaves, the product over the pattern
of, for a value of n characters:

- a quantifier `{lo,hi}` over a body w characters wide: the counts it can try,
  min(hi, n // w) - lo + 1; unbounded (`*`, `+`, `{lo,}`), n + 1 - lo whatever w is;
- an alternation: the sum of its branches' own products (one branch per path); `?` over a body:
  the body's product plus one;
- anything else: 1;

times the start positions `search` tries: 1 when the pattern begins with `^` or `\\A` (every
other start fails on the first item), else n + 1. Along one path the matcher reads each
character of the value and each item of the pattern a bounded number of times, so a match does
O(ways * (n + MAX_LENGTH)) steps: polynomial, never exponential.

The values `matches` tests are short: the free-text facts a manifest writes (`metadata.name`,
`metadata.owner`, `metadata.labels.<key>`) are bounded by the manifest schema to `MAX_SUBJECT`
= 256 characters, and the others are mostly names and enumerations; a longer value (a fact
dpguard composes, such as a list of remedies) is searched in its first `MAX_SUBJECT` characters
only (policy.conditions), so the bound below holds for every value. The guard computes `ways`
at n = 256 and refuses more than `MAX_WAYS` = 2**18, so a match does at most about
2**18 * 512 = 1.3e8 elementary steps (the worst accepted shapes take milliseconds). The budget
admits two unbounded quantifiers anchored (`^[a-z]+-[0-9]+$`: 256 * 256 ways) or one
unanchored (`-v[0-9]+$`: 257 * 256), and refuses three (`.*.*.*x`: about 257**4), as it
refuses `a?` forty times (257 * 2**40), though no group is nested. Since (n + 1)**3 is over the
budget, at most two factors grow with n: on a longer value the work grows at most as n**3.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

MAX_LENGTH = 256  # characters in a pattern
MAX_SUBJECT = 256  # characters in the longest value a pattern is matched against
MAX_COUNT = MAX_SUBJECT  # a larger repeat count can never match such a value
MAX_WAYS = 2**18
# re's own parser (stable from 3.11, where sre_parse became re._parser): the tree re.compile
# uses, so what is checked is exactly what runs. Imported by name: typeshed has no stub for it.
_parser: Any = importlib.import_module("re._parser")
_CHARACTER = frozenset(("LITERAL", "NOT_LITERAL", "ANY", "IN"))
_REPEATS = frozenset(("MAX_REPEAT", "MIN_REPEAT"))
_START = frozenset(("AT_BEGINNING", "AT_BEGINNING_STRING"))
_REFUSED = {
    "GROUPREF": "backreferences (\\1, (?P=name)) are not supported",
    "GROUPREF_EXISTS": "conditional groups ((?(1)...|...)) are not supported",
    "ASSERT": "lookahead and lookbehind ((?=...), (?<=...)) are not supported",
    "ASSERT_NOT": "negative lookahead and lookbehind ((?!...), (?<!...)) are not supported",
    "ATOMIC_GROUP": "atomic groups ((?>...)) are not supported",
    "POSSESSIVE_REPEAT": "possessive quantifiers (*+, ++, ?+) are not supported",
}
_NESTED = (
    "a quantifier over a group that holds another quantifier or an alternation can backtrack "
    "exponentially; rewrite it without the nesting"
)


class PatternProblem(ValueError):
    """A pattern that does not compile or that the guard refuses; the message says which."""


def _ways(sub: Any) -> int:
    """Leaves of the backtracking tree of one sequence, at n = MAX_SUBJECT (module docstring);
    PatternProblem for anything outside the subset."""
    total = 1
    for op, av in sub:
        name = str(op)
        if name in _REFUSED:
            raise PatternProblem(_REFUSED[name] + "; see docs/policies.md, `matches`")
        if name == "SUBPATTERN":
            total *= _ways(av[-1])
        elif name == "BRANCH":
            total *= sum(_ways(branch) for branch in av[1])
        elif name in _REPEATS:
            total *= _repeat_ways(*av)
        elif name not in _CHARACTER and name != "AT":
            raise PatternProblem(f"{name.lower()} is not supported; see docs/policies.md")
    return total


def _repeat_ways(low: int, high: int, body: Any) -> int:
    for count in (low, high):
        if count != _parser.MAXREPEAT and count > MAX_COUNT:
            raise PatternProblem(
                f"repeat count {count} is over {MAX_COUNT}: no value a pattern tests is longer"
            )
    inner = _ways(body)  # a construct outside the subset is named as such, not as nesting
    if high <= 1:
        return inner + (low == 0)  # taken at most once: an alternation with an empty branch
    width = _fixed_width(body)
    if width is None:
        raise PatternProblem(_NESTED)
    if width == 0:
        raise PatternProblem("a quantifier over something that matches no characters")
    if high == _parser.MAXREPEAT:  # counted as if one character wide: n + 1 - low, whatever
        return MAX_SUBJECT + 1 - low  # the width, so that it grows with n like `*` (docstring)
    return max(1, min(high, MAX_SUBJECT // width) - low + 1)


def _fixed_width(sub: Any) -> int | None:
    """The width of a sequence that leaves the matcher no choice, else None."""
    width = 0
    for op, av in sub:
        name = str(op)
        if name in _CHARACTER:
            width += 1
        elif name == "SUBPATTERN":
            inner = _fixed_width(av[-1])
            if inner is None:
                return None
            width += inner
        elif name in _REPEATS and av[0] == av[1]:
            inner = _fixed_width(av[2])
            if inner is None:
                return None
            width += av[0] * inner
        elif name != "AT":
            return None  # a choice (alternation, variable count) or a refused construct
    return width


def _anchored(sub: Any, multiline: bool) -> bool:
    """Whether every match must start at the beginning of the value: then `search` fails at
    every other start position on the first item."""
    if not len(sub):
        return False
    op, av = sub[0]
    name = str(op)
    if name == "AT":
        return str(av) == "AT_BEGINNING_STRING" or (str(av) in _START and not multiline)
    if name == "SUBPATTERN":
        return _anchored(av[-1], multiline or bool(av[1] & re.MULTILINE))
    if name == "BRANCH":
        return all(_anchored(branch, multiline) for branch in av[1])
    return False


def ways(source: str) -> int:
    """How many ways a match of `source` may try on a MAX_SUBJECT-character value (the bound in
    the module docstring); PatternProblem when it is invalid or outside the subset."""
    try:
        tree = _parser.parse(source)
    except re.error as exc:
        raise PatternProblem(f"invalid regular expression: {exc}") from None
    starts = 1 if _anchored(tree, bool(tree.state.flags & re.MULTILINE)) else MAX_SUBJECT + 1
    return starts * _ways(tree)


def compile_pattern(source: str) -> re.Pattern[str]:
    """The compiled pattern, or PatternProblem saying what is wrong with it."""
    if len(source) > MAX_LENGTH:
        raise PatternProblem(f"pattern is {len(source)} characters long; at most {MAX_LENGTH}")
    found = ways(source)
    if found > MAX_WAYS:
        raise PatternProblem(
            f"a match could try {found:,} ways on a {MAX_SUBJECT}-character value (at most "
            f"{MAX_WAYS:,}): bound the repeats ({{1,32}} rather than + or *), anchor it with ^, "
            "or use fewer quantifiers"
        )
    try:
        return re.compile(source)
    except re.error as exc:  # parsed but not compiled (a look-behind of variable width, ...)
        raise PatternProblem(f"invalid regular expression: {exc}") from None
