"""`dpguard explain ID`: one rule's title, kind, set, location, condition and docs."""

from __future__ import annotations

import argparse
from typing import Any

from dpguard.commands._policies import add_policy_option

HELP = "print one policy rule's documentation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rule", metavar="ID", help="rule id, e.g. HR003")
    add_policy_option(parser)


def condition_data(condition: Any) -> Any:
    """A parsed condition back as the plain data a policy file writes."""
    from dpguard.policy.conditions import Leaf

    if isinstance(condition, Leaf):
        value = getattr(condition.value, "pattern", condition.value)  # matches: the source
        return {"fact": condition.fact, condition.op: value}
    if condition.op == "not":
        return {"not": condition_data(condition.items[0])}
    return {condition.op: [condition_data(c) for c in condition.items]}


def dump_yaml(data: Any) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)  # keeps key order: fact first
    yaml.default_flow_style = None  # leaves inline, groups in block style
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


# Every code dpguard prints that is not a policy rule: dpguard.codes (Y, S, X, F), P001, D001.
FAMILIES = {
    "Y": ("YAML loading", "docs/manifest.md, hostile input"),
    "S": ("manifest schema", "docs/manifest.md and schemas/manifest.schema.json"),
    "X": ("manifest cross-field check", "docs/manifest.md, cross-field checks (with sources)"),
    "F": ("framework config reading", "docs/frameworks.md"),
    "P": ("policy engine", "docs/policies.md, how a manifest is judged"),
    "D": ("dpguard itself", "docs/security.md, reporting a problem"),
}


def explain_code(code: str) -> str | None:
    """What a built-in code means, or None when `code` is none of them."""
    from dpguard.codes import CODES
    from dpguard.reporters.model import ENGINE_CODES

    title = CODES.get(code) or ENGINE_CODES.get(code)
    if title is None:
        return None
    family, docs = FAMILIES[code[0]]
    severity = "warning" if "(warning)" in title else "error"
    if code == "F002":
        severity = "warning or info"
    return "\n".join(
        [
            f"{code}: {title}",
            f"kind: {family} (severity {severity})",
            "waivable: no (a built-in check, not a policy rule)",
            f"docs: {docs}",
        ]
    )


def run(args: argparse.Namespace) -> int:
    from dpguard.commands._policies import config_of, load
    from dpguard.commands.rules import severity_name
    from dpguard.errors import UsageError
    from dpguard.hints import hint

    policies = load(args.policy, config_of(args))
    rule = policies.get(args.rule)
    if rule is None:
        text = explain_code(args.rule.upper())
        if text is not None:
            print(text)
            return 0
        from dpguard.codes import CODES
        from dpguard.reporters.model import ENGINE_CODES

        ids = [r.id for r in policies.rules] + [*CODES, *ENGINE_CODES]
        raise UsageError(f"unknown rule {args.rule}{hint(args.rule, ids)}")
    policy_set = next(s for s in policies.sets if s.name == rule.policy)
    lines = [
        f"{rule.id}: {rule.title}",
        f"kind: {rule.kind} (severity {severity_name(rule)})",
        f"waivable: {'yes' if rule.waivable else 'no'}",
        f"set: {policy_set.name} {policy_set.version} ({policy_set.digest})",
        f"location: {rule.location}",
    ]
    if rule.recommend:
        lines.append(f"recommend: {rule.recommend}")
    if rule.refuses:
        lines.append(f"refuses: {', '.join(rule.refuses)} (precedence {rule.precedence})")
    if rule.acceptable:
        lines.append(f"acceptable: {', '.join(rule.acceptable)}")
    lines.append("when:")
    lines += ["  " + line for line in dump_yaml(condition_data(rule.when)).splitlines()]
    lines.append("docs:")
    lines += ["  " + line if line else "" for line in rule.docs.rstrip().splitlines()]
    print("\n".join(lines))
    return 0
