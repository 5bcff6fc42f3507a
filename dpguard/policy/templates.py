"""Rule messages: Jinja templates over the facts, in a sandbox, with undefined names as errors;
and the sandbox every template renders in (`sandbox`: the plan page and a team's --templates too).

`check_message` runs when a policy loads, so a message that names a fact that does not exist is
a policy error at load time rather than a crash (or an empty string) during a review.

Every rendering is held to a budget (`Limits`: MESSAGE for a rule message, PAGE for a page) of
work and of output, counted as the template runs; past it the sandbox's SecurityError names the
operation and the budget, which callers report as a configuration error (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import (
    Callable,
    Container,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sized,
    ValuesView,
)
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache, lru_cache, wraps
from typing import TYPE_CHECKING, Any

from dpguard.hints import hint
from dpguard.policy.facts import FACTS, LABELS, ROOTS, label_fact

if TYPE_CHECKING:
    from dpguard.policy import plain

EXTRA_NAMES = frozenset({"rule"})


MAX_DECIMALS = 100  # of pct and fixed: a policy's pct(10**9) would build a gigabyte first


def _decimals(digits: int, name: str) -> int:
    if not 0 <= digits <= MAX_DECIMALS:
        raise ValueError(f"{name} takes 0 to {MAX_DECIMALS} decimals, not {digits!r}")
    return digits


def pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage ("n/a" when unset): the `pct` filter, and the reports'."""
    return "n/a" if value is None else f"{float(value) * 100:.{_decimals(digits, 'pct')}f}%"


def thousands(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


def fixed(value: Any, digits: int = 1) -> str:
    """A number with `digits` decimals: the `fixed` filter, exactly `'%.2f' | format(value)`
    for fixed(2) (the same conversion: nan, inf, -0.00, bool, and its errors)."""
    return "%.*f" % (_decimals(digits, "fixed"), value)  # noqa: UP031  # printf's own rules


def number(value: Any) -> str:
    """A number at most six significant digits long, with no trailing zeros (200, 12.5): the
    `number` filter, exactly `'%g' | format(value)` (a float fact written as a whole number
    reads as one)."""
    return "%g" % (value,)  # noqa: UP031  # printf's own rules, as Jinja's format filter


# dpguard's own filters, added to Jinja's in every sandbox; the only ones a plain message (one
# rendered without Jinja, see render_message) may use: the same functions, without the import.
FILTERS: dict[str, Callable[..., str]] = {
    "pct": pct,
    "thousands": thousands,
    "fixed": fixed,
    "number": number,
}


@cache
def environment() -> Any:
    """The environment rule messages render in."""
    return sandbox(MESSAGE)


# Templates come from policy files and --templates directories, which a pull request can edit.
# The sandbox stops code execution; these bounds stop a template from taking the CI runner's
# memory or time. Each rendering gets a budget of work, counted as the template runs: a loop
# iteration or a call is one step, and whatever a template builds, reads whole or compares
# costs its size in characters or items (a list costs every item as often as it appears in it,
# so lists built of shared lists cost in full). What multiplies (`'a' * n`, `center(n)`, a
# `%9999s` width, `replace`, `join`, `indent`) is charged before it is built, so a refusal leaves
# it unbuilt; what is at most the size of its inputs is charged after. The rendered text is
# counted as it is produced. Past a bound the sandbox's SecurityError says which.


@dataclass(frozen=True)
class Limits:
    """What one rendering may spend."""

    what: str  # how messages name it: "a rule message", "a page"
    work: int  # steps: loop iterations, calls, characters and items built, read or compared
    output: int  # characters of rendered text


MESSAGE = Limits("a rule message", work=200_000, output=64 * 1024)
PAGE = Limits("a page", work=4_000_000, output=4 * 1024 * 1024)
_COMPILING = Limits("work outside a rendering", work=0, output=0)
MAX_DEPTH = 100  # nested calls: a macro calling itself without end stops here, with a message
MAX_REPEAT = 100_000  # items one sequence repetition may produce
MAX_POWER_BITS = 100_000  # bits of an integer power's or product's result
_ACTIVE: ContextVar[_Budget | None] = ContextVar("dpguard_template_budget", default=None)


def _refused(message: str) -> Exception:
    from jinja2.sandbox import SecurityError

    return SecurityError(message)


class _Budget:
    """What one rendering has left of its Limits."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.left = limits.work
        self.written = 0
        self.depth = 0

    def spend(self, amount: int, what: str) -> None:
        self.left -= amount
        if self.left < 0:
            raise _refused(
                f"{what} goes over the work budget of {self.limits.what} "
                f"({self.limits.work:,} steps: loop iterations, calls, characters built)"
            )

    def reserve(self, size: int, what: str) -> None:
        """Spend `size` before building something that big: a refusal leaves it unbuilt."""
        if size > self.left:
            raise _refused(
                f"{what} would build {size:,} characters, more than the {max(self.left, 0):,} "
                f"left of the work budget of {self.limits.what} ({self.limits.work:,})"
            )
        self.left -= size

    def write(self, chunks: Iterable[str]) -> Iterator[str]:
        """The rendered text, counted as the template yields it."""
        for chunk in chunks:
            self.written += len(chunk)
            if self.written > self.limits.output:
                raise _refused(
                    f"renders more than {self.limits.output:,} characters, the most "
                    f"{self.limits.what} may have"
                )
            yield chunk


_CONTAINERS = (list, tuple, set, frozenset, dict, KeysView, ValuesView, ItemsView)


def _leaf_size(value: Any) -> int:
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, int):
        return value.bit_length() * 3 // 10 + 1  # decimal digits, about
    return 1


def _is_container(value: Any) -> bool:
    # jinja2.utils.Namespace prints its attributes; by name, as jinja2 is imported lazily
    return isinstance(value, _CONTAINERS) or type(value).__name__ == "Namespace"


def _items(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    if type(node).__name__ == "Namespace":
        return _items(object.__getattribute__(node, "_Namespace__attrs"))
    return list(node)


def _size(value: Any, limit: int) -> int:
    """About len(str(value)) without building it, for charging: a container counts each item
    as often as it appears, so lists of shared lists count in full (a template can double a
    list's printed size with each `[x, x]`). Distinct containers are walked once, without
    recursion; past `limit` the walk stops and returns more than `limit`."""
    if not _is_container(value):
        return _leaf_size(value)
    sizes: dict[int, int] = {}
    pending: list[tuple[Any, bool]] = [(value, False)]
    walked = 0
    while pending:
        node, expanded = pending.pop()
        children = _items(node)
        if expanded:
            total = 2 + sum(sizes.get(id(c), _leaf_size(c)) + 2 for c in children)
            sizes[id(node)] = min(total, limit + 1)
        elif id(node) not in sizes:
            walked += len(children)
            if walked > limit:
                return limit + 1
            sizes[id(node)] = 5  # until expanded; a list that holds itself prints as [...]
            pending.append((node, True))
            pending.extend((c, False) for c in children if _is_container(c))
    return sizes[id(value)]


def _number(digits: str) -> int:
    """A width written in a format, without int() of thousands of digits."""
    return int(digits) if len(digits) <= 12 else 10**12


def _printf_widths(form: str) -> int:
    """The widths and precisions of a %-format summed, read as Python reads them (one pass)."""
    total, i, n = 0, 0, len(form)
    while (i := form.find("%", i)) != -1:
        i += 1
        if form.startswith("(", i):  # a mapping key, parentheses nested
            depth, i = 1, i + 1
            while i < n and depth:
                depth += {"(": 1, ")": -1}.get(form[i], 0)
                i += 1
        while i < n and form[i] in "-#0 +":
            i += 1
        for part in ("width", "precision"):
            if part == "precision":
                if not form.startswith(".", i):
                    break
                i += 1
            if form.startswith("*", i):
                raise _refused(f"a * {part} in a % format is not supported in templates")
            start = i
            while i < n and form[i] in "0123456789":
                i += 1
            total += _number(form[start:i] or "0")
        i += 1  # the conversion
    return total


_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d*))?")


def _format_widths(form: str) -> int:
    """The widths and precisions of a str.format template summed."""
    import string

    total = 0
    for _text, _field, spec, _conversion in string.Formatter().parse(form):
        if not spec:
            continue
        if "{" in spec:
            raise _refused("a field inside a format spec ({:{}}) is not supported in templates")
        found = _SPEC.match(spec)
        if found:
            total += _number(found.group(1) or "0") + _number(found.group(2) or "0")
    return total


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], at: int, name: str, default: Any) -> Any:
    return args[at] if len(args) > at else kwargs.get(name, default)


def _width(value: Any) -> int:
    return len(value) if isinstance(value, str) else int(value)


def _occurrences(text: Any, old: Any, count: Any) -> int:
    found = text.count(old) if old else len(text) + 1
    return found if count is None or count < 0 else min(found, int(count))


def _joined(items: list[Any], separator: Any, limit: int) -> int:
    """The length of the items joined by `separator`, counted until past `limit`."""
    total = len(str(separator)) * max(len(items) - 1, 0)
    for item in items:
        total += len(item) if isinstance(item, str) else len(str(item))
        if total > limit:
            break
    return total


def _summed(items: Any, start: Any, limit: int) -> int:
    """What summing copies: nothing for numbers; from a list or tuple `start`, the running
    total once per item (with the default start 0, lists do not add)."""
    if not isinstance(start, (list, tuple)):
        return 0
    return (len(items) + 1) * (_size(items, limit) + _size(start, limit))


# Filters whose result can outgrow their input: its size, from (value, args, kwargs, left).
Growth = Callable[[Any, tuple[Any, ...], Mapping[str, Any], int], int]
_FILTER_GROWTH: dict[str, Growth] = {
    "center": lambda v, a, k, _: max(len(str(v)), _width(_arg(a, k, 0, "width", 80))),
    "indent": lambda v, a, k, _: (
        len(str(v)) + (str(v).count("\n") + 1) * max(_width(_arg(a, k, 0, "width", 4)), 0)
    ),
    "wordwrap": lambda v, a, k, _: (
        (len(str(v)) + 1) * (1 + len(str(_arg(a, k, 2, "wrapstring", None) or "\n")))
    ),
    "replace": lambda v, a, k, _: (
        len(str(v))
        + _occurrences(str(v), str(_arg(a, k, 0, "old", "")), _arg(a, k, 2, "count", None))
        * len(str(_arg(a, k, 1, "new", "")))
    ),
    "format": lambda v, a, k, _: len(str(v)) + _printf_widths(str(v)),
    "join": lambda v, a, k, left: _joined(v, _arg(a, k, 0, "d", ""), left),
    "batch": lambda v, a, k, left: _size(v, left) + max(int(_arg(a, k, 0, "linecount", 0)), 0),
    "slice": lambda v, a, k, left: _size(v, left) + max(int(_arg(a, k, 0, "slices", 0)), 0),
    "sum": lambda v, a, k, left: _summed(v, _arg(a, k, 1, "start", 0), left),
    "urlize": lambda v, a, k, _: (
        (len(str(v)) + 1)
        * (64 + len(str(_arg(a, k, 2, "target", ""))) + len(str(_arg(a, k, 3, "rel", ""))))
    ),
}


def _method_growth(method: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """The size of what a str, bytes or int method that multiplies would build; 0 for others."""
    name, owner = getattr(method, "__name__", ""), getattr(method, "__self__", None)
    text: Any = owner  # str or bytes below: their methods take the same arguments
    if isinstance(owner, (str, bytes)):
        if name in ("center", "ljust", "rjust", "zfill"):
            return max(len(text), _width(_arg(args, kwargs, 0, "width", 0)))
        if name == "replace":
            old, new = _arg(args, kwargs, 0, "old", ""), _arg(args, kwargs, 1, "new", "")
            return len(text) + _occurrences(text, old, _arg(args, kwargs, 2, "count", -1)) * len(
                new
            )
        if name == "expandtabs":
            tab = "\t" if isinstance(owner, str) else b"\t"
            return len(text) + text.count(tab) * max(int(_arg(args, kwargs, 0, "tabsize", 8)), 0)
        if name == "translate":
            table = _arg(args, kwargs, 0, "table", None)
            values = table.values() if isinstance(table, dict) else table or ()
            longest = max((len(v) for v in values if isinstance(v, (str, bytes))), default=1)
            return len(text) * longest
    if isinstance(owner, int) and name == "to_bytes":
        return max(int(_arg(args, kwargs, 0, "length", 1)), 0)
    return 0


def _call_name(obj: Any) -> str:
    """How a refusal names what was called: a macro by its name, a function or method by its."""
    return str(getattr(obj, "name", None) or getattr(obj, "__name__", None) or "a function")


def _charge_call(
    budget: _Budget, obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    """Charge a call before it runs: one step, what it reads, what it would build. Returns the
    arguments, the iterable of a str.join read whole so that it could be sized."""
    what = f"calling {_call_name(obj)}"
    owner = getattr(obj, "__self__", None)
    if getattr(obj, "__name__", "") == "join" and isinstance(owner, (str, bytes)) and args:
        args = (list(args[0]), *args[1:])
        budget.reserve(_joined(args[0], owner, budget.left), what)
    read = sum(_size(v, budget.left) for v in (owner, *args, *kwargs.values()))
    budget.spend(1 + read, what)
    budget.reserve(_method_growth(obj, args, kwargs), what)
    return args


def sandbox(limits: Limits = PAGE, **options: Any) -> Any:
    """A SandboxedEnvironment with StrictUndefined, dpguard's FILTERS, and every rendering held
    to `limits` (see above); `lipsum` is gone (lipsum(10**9) is a loop)."""
    from jinja2 import StrictUndefined

    env = _bounded_class()(limits, undefined=StrictUndefined, autoescape=False, **options)
    env.globals.pop("lipsum", None)
    env.filters.update(FILTERS)
    env.filters = {
        name: _metered(env, f, f"the {name} filter", _FILTER_GROWTH.get(name))
        for name, f in env.filters.items()
    }
    env.tests = {name: _metered(env, f, f"the {name} test") for name, f in env.tests.items()}
    return env


def _metered(
    env: Any, func: Callable[..., Any], what: str, growth: Growth | None = None
) -> Callable[..., Any]:
    """A filter or test that charges what it reads, and what it builds: before, by `growth`,
    when that can outgrow its input; else after."""
    from jinja2.utils import _PassArg

    offset = 1 if _PassArg.from_obj(func) else 0  # the context/environment argument

    @wraps(func)
    def metered(*args: Any, **kwargs: Any) -> Any:
        budget = env.budget()
        if len(args) > offset:
            value = args[offset]
            if growth is not None and not isinstance(value, Sized):  # join, sum: read whole,
                value = list(value)  # to be sized before they run
                args = (*args[:offset], value, *args[offset + 1 :])
            budget.spend(1 + _size(value, budget.left), what)
            for other in (*args[offset + 1 :], *kwargs.values()):
                budget.spend(_size(other, budget.left), what)
            if growth is not None:
                budget.reserve(growth(value, args[offset + 1 :], kwargs, budget.left), what)
        result = func(*args, **kwargs)
        if growth is None and isinstance(result, (str, *_CONTAINERS)):
            budget.spend(_size(result, budget.left), what)
        return result

    return metered


@cache
def _bounded_class() -> type:
    """The sandboxed environment class (dpguard.policy.sandbox: jinja2 is imported only when a
    template is)."""
    from dpguard.policy.sandbox import Bounded

    return Bounded


def _too_big(operator: str, left: Any, right: Any) -> str | None:
    """A repetition or integer power/product past the per-operation caps."""
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and ints and right > 0 and left.bit_length() * right > MAX_POWER_BITS:
        return f"{left.bit_length()}-bit number to the power {right} is too large"
    if operator == "*" and ints and left.bit_length() + right.bit_length() > MAX_POWER_BITS:
        return f"{left.bit_length()}-bit number times {right.bit_length()}-bit number is too large"
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            sized = isinstance(seq, (str, list, tuple)) and isinstance(n, int)
            if sized and len(seq) * n > MAX_REPEAT:
                return f"repetition would make {len(seq) * n} items (at most {MAX_REPEAT})"
    return None


def _binop_size(operator: str, left: Any, right: Any, limit: int) -> int:
    """What an intercepted operator builds or reads, before it runs."""
    if operator == "%" and isinstance(left, str):
        return len(left) + _printf_widths(left) + _size(right, limit)
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                return _size(seq, limit) * max(n, 0)
    return _size(left, limit) + _size(right, limit)


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{"a.b": 1} -> {"a": {"b": 1}} for template access as a.b."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        *parents, leaf = _parts(path)
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


@lru_cache(maxsize=4096)  # the same few hundred fact paths, nested for every message rendered
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _chain(node: Any) -> list[str] | None:
    from jinja2 import nodes

    parts: list[str] = []
    while True:
        if isinstance(node, nodes.Getattr):
            parts.append(node.attr)
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            parts.append(str(node.arg.value))
            node = node.node
        elif isinstance(node, nodes.Name):
            parts.append(node.name)
            return parts[::-1]
        else:
            return None


def _references(ast: Any) -> Iterator[list[str]]:
    from jinja2 import nodes

    assigned = {n.name for n in ast.find_all(nodes.Name) if n.ctx in ("store", "param")}

    def visit(node: Any) -> Iterator[list[str]]:
        if isinstance(node, (nodes.Getattr, nodes.Getitem, nodes.Name)):
            chain = _chain(node)
            if chain is not None:
                if chain[0] not in assigned and node.ctx == "load":
                    yield chain
                return
        for child in node.iter_child_nodes():
            yield from visit(child)

    yield from visit(ast)


def _unknown(chain: list[str], late: frozenset[str]) -> str | None:
    root = chain[0]
    if root in EXTRA_NAMES:
        return None
    if root not in ROOTS:
        return f"uses undefined name {root!r}{hint(root, sorted(ROOTS | EXTRA_NAMES))}"
    for i in range(2, len(chain) + 1):
        path = ".".join(chain[:i])
        if path in late:
            return (
                f"uses fact {path!r}, which is only known after the decision table and "
                "refusals have run"
            )
        if path in FACTS or label_fact(path):
            return None  # anything further is an attribute of the value itself
        if path == LABELS.rstrip("."):
            return None  # metadata.labels['cost-centre']: any key, unset when not written
        if not any(fact.startswith(path + ".") for fact in FACTS):
            return f"uses unknown fact {path!r}{hint(path, FACTS)}"
    return None


def referenced_facts(source: str) -> set[str]:
    """The dotted names a (valid) message template reads, as far as they are written out."""
    return {".".join(chain) for chain in _references(environment().parse(source))}


def check_message(source: str, late: frozenset[str] = frozenset()) -> list[str]:
    """Problems with a message template: syntax errors, unknown facts, and facts in `late`
    (not yet set when the rule's message is rendered; see facts.LATE_FACTS)."""
    from jinja2 import TemplateSyntaxError

    try:
        ast = environment().parse(source)
    except TemplateSyntaxError as exc:
        return [f"is not a valid template: {exc.message} (template line {exc.lineno})"]
    return [p for p in (_unknown(c, late) for c in _references(ast)) if p is not None]


@lru_cache(maxsize=1024)
def _compiled(source: str) -> Any:
    """Compile each rule's message once per process, not once per finding."""
    return environment().from_string(source)


@lru_cache(maxsize=1024)
def _roots(source: str) -> frozenset[str]:
    """The top-level names a message reads: only those facts are nested for it."""
    return frozenset(chain[0] for chain in _references(environment().parse(source)))


@lru_cache(maxsize=1024)
def _plain(source: str) -> tuple[plain.Part, ...] | None:
    """The message as text and fields when it is in the plain subset (plain.py), else None.
    Labels and `rule` are left to Jinja."""
    from dpguard.policy import plain  # imported by the first message rendered

    parts = plain.parse(source, ROOTS, FILTERS)
    if parts is None or any(p.path[:2] == ("metadata", "labels") for p in _fields(parts)):
        return None
    return parts


def _fields(parts: Iterable[plain.Part]) -> Iterator[plain.Field]:
    """The fields of a plain message, and the facts its if blocks test."""
    from dpguard.policy.plain import If

    for part in parts:
        if isinstance(part, If):
            yield part.test
            yield from _fields((*part.then, *part.otherwise))
        elif not isinstance(part, str):
            yield part


def _render_plain(parts: tuple[plain.Part, ...], context: Mapping[str, Any]) -> str | None:
    """What Jinja renders for a plain message, charged to the same MESSAGE budget as the sandbox
    charges it (the filter's call, then finalize reading the value; an if block's comparison
    reading its fact, its `none` test's call); None where Jinja is to decide: a name that is not
    a key of a dict (undefined, or a dict's attribute), a filter or comparison that raises, a
    budget overrun. Jinja then renders, or raises what the caller reports."""
    from dpguard.policy.plain import If

    budget = _Budget(MESSAGE)
    out: list[str] = []
    try:
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, If):
                taken = _test(part, context, budget)
                for inner in part.then if taken else part.otherwise:
                    out.append(inner if isinstance(inner, str) else _field(inner, context, budget))
            else:
                out.append(_field(part, context, budget))
        return "".join(budget.write(out))
    except Exception:
        return None


class _ToJinja(Exception):
    """What the plain path leaves to Jinja (see _render_plain)."""


def _read(path: tuple[str, ...], context: Mapping[str, Any]) -> Any:
    value: Any = context
    for name in path:
        # the sandbox's getattr: an attribute first (dict.items...), then the key
        if not isinstance(value, dict) or hasattr(value, name):
            raise _ToJinja(name)
        value = value[name]
    return value


def _field(part: plain.Field, context: Mapping[str, Any], budget: _Budget) -> str:
    value = _read(part.path, context)
    if part.filter is not None:
        what = f"the {part.filter} filter"
        budget.spend(1 + _size(value, budget.left), what)
        for arg in part.args:
            budget.spend(_size(arg, budget.left), what)
        value = FILTERS[part.filter](value, *part.args)
        if isinstance(value, (str, *_CONTAINERS)):
            budget.spend(_size(value, budget.left), what)
    budget.spend(_size(value, budget.left), "reading a value")
    return str(value)


def _test(block: plain.If, context: Mapping[str, Any], budget: _Budget) -> bool:
    """An if block's test, as the sandbox's compiled code runs it: a truth test or `not` costs
    nothing, a comparison reads its fact (a constant it does not charge), a test is a call."""
    value = _read(block.test.path, context)
    if block.op == "":
        return bool(value)
    if block.op == "not":
        return not value
    if block.op in ("is none", "is not none"):
        budget.spend(1 + _size(value, budget.left), "the none test")
        return (value is None) is (block.op == "is none")
    budget.spend(_size(value, budget.left), "reading a value")
    return bool(value == block.text if block.op == "==" else value != block.text)


def render_message(source: str, facts: Mapping[str, Any], rule: Mapping[str, Any]) -> str:
    parts = _plain(source)
    if parts is None:
        template = _compiled(source)
        context = _context(_roots(source), facts)
    else:
        context = _context({p.path[0] for p in _fields(parts)}, facts)
        text = _render_plain(parts, context)
        if text is not None:
            return " ".join(text.split())
        template = _compiled(source)
    return " ".join(template.render({**context, "rule": rule}).split())


def _context(roots: Container[str], facts: Mapping[str, Any]) -> dict[str, Any]:
    # by key: a fact computed on first read (engine.LazyFacts) is read only if the message
    # names its root
    context = nest({k: facts[k] for k in facts if _parts(k)[0] in roots})
    # A label the manifest does not write reads as none, like any unset fact.
    metadata = context.setdefault("metadata", {})
    metadata["labels"] = _Labels(metadata.get("labels", {}))
    return context


class _Labels(dict[str, Any]):
    def __missing__(self, key: str) -> None:
        return None
