"""`dpguard rules`: list the loaded rules in evaluation order."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpguard.commands._policies import add_policy_option, config_of, load

HELP = "list the loaded policy rules (id, kind, severity, title, set@version)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_policy_option(parser)
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help='default: text; json: {"rules": [{"id", "kind", "severity", "title", "set", '
        '"version"}]}, in evaluation order',
    )


def severity_name(rule: object) -> str:
    from dpguard.policy.model import KIND_SEVERITY, Rule

    assert isinstance(rule, Rule)
    if rule.severity is not None:
        return rule.severity.value
    if rule.kind == "refuse":
        return "error|info"  # error when it refuses the proposal, info when it only redirects
    return KIND_SEVERITY[rule.kind].value


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The loaded rules in evaluation order (the order is the stack's meaning: kept as is)."""
    from dpguard.policy.model import Policies

    policies = load(args.policy, config_of(args))
    assert isinstance(policies, Policies)
    versions = {s.name: s.version for s in policies.sets}
    return [
        {
            "id": r.id,
            "kind": r.kind,
            "severity": severity_name(r),
            "title": r.title,
            "set": r.policy,
            "version": versions.get(r.policy, "?"),
        }
        for r in policies.rules
    ]


def run(args: argparse.Namespace) -> int:
    rules = rows(args)
    if args.format == "json":
        print(json.dumps({"rules": rules}, indent=2, sort_keys=True))
        return 0
    cols = ("id", "kind", "severity")
    widths = {c: max((len(r[c]) for r in rules), default=0) for c in cols}
    for r in rules:
        cells = "  ".join(r[c].ljust(widths[c]) for c in cols)
        print(f"{cells}  {r['title']}  [{r['set']}@{r['version']}]")
    return 0
