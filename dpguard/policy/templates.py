"""Rule messages: Jinja templates over the facts, in a sandbox, with undefined names as errors.

`check_message` runs when a policy loads, so a message that names a fact that does not exist is
a policy error at load time rather than a crash (or an empty string) during a review.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache, lru_cache
from typing import Any

from dpguard.hints import hint
from dpguard.policy.facts import FACTS, LABELS, ROOTS, label_fact

EXTRA_NAMES = frozenset({"rule"})


def pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage ("n/a" when unset): the `pct` filter, and the reports'."""
    return "n/a" if value is None else f"{float(value) * 100:.{digits}f}%"


def thousands(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


@cache
def environment() -> Any:
    """The environment rule messages render in."""
    return sandbox()


# Templates come from policy files and --templates directories, which a pull request can edit:
# the sandbox stops code execution, and these bounds stop `{{ 'a' * 10**10 }}` from taking the
# CI runner's memory or `{{ 9**9**9 }}` its time.
MAX_REPEAT = 100_000  # items a sequence repetition may produce
MAX_POWER_BITS = 100_000  # size of an integer power's result


def sandbox(**options: Any) -> Any:
    """A SandboxedEnvironment with StrictUndefined, the `pct` and `thousands` filters, and
    bounded `*` and `**`."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment, SecurityError

    def too_big(operator: str, left: Any, right: Any) -> str | None:
        ints = isinstance(left, int) and isinstance(right, int)
        if operator == "**" and ints and right > 0 and left.bit_length() * right > MAX_POWER_BITS:
            return f"{left.bit_length()}-bit number to the power {right} is too large"
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                sized = isinstance(seq, (str, list, tuple)) and isinstance(n, int)
                if sized and len(seq) * n > MAX_REPEAT:
                    return f"repetition would make {len(seq) * n} items (at most {MAX_REPEAT})"
        return None

    class Bounded(SandboxedEnvironment):
        intercepted_binops = frozenset(("*", "**"))

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            problem = too_big(operator, left, right)
            if problem:
                raise SecurityError(problem)
            return super().call_binop(context, operator, left, right)

    env = Bounded(undefined=StrictUndefined, autoescape=False, **options)
    env.filters["pct"] = pct
    env.filters["thousands"] = thousands
    return env


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


def render_message(source: str, facts: Mapping[str, Any], rule: Mapping[str, Any]) -> str:
    template = _compiled(source)
    roots = _roots(source)
    # by key: a fact computed on first read (engine.LazyFacts) is read only if the message
    # names its root
    context = nest({k: facts[k] for k in facts if _parts(k)[0] in roots})
    # A label the manifest does not write reads as none, like any unset fact.
    metadata = context.setdefault("metadata", {})
    metadata["labels"] = _Labels(metadata.get("labels", {}))
    return " ".join(template.render({**context, "rule": rule}).split())


class _Labels(dict[str, Any]):
    def __missing__(self, key: str) -> None:
        return None
