"""`dpguard rules`: list the loaded rules in evaluation order."""

from __future__ import annotations

import argparse

from dpguard.commands._policies import add_policy_option, config_of, load

HELP = "list the loaded policy rules (id, kind, severity, title, set@version)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_policy_option(parser)


def severity_name(rule: object) -> str:
    from dpguard.policy.model import KIND_SEVERITY, Rule

    assert isinstance(rule, Rule)
    if rule.severity is not None:
        return rule.severity.value
    if rule.kind == "refuse":
        return "error|info"  # error when it refuses the proposal, info when it only redirects
    return KIND_SEVERITY[rule.kind].value


def run(args: argparse.Namespace) -> int:
    from dpguard.policy.model import Policies

    policies = load(args.policy, config_of(args))
    assert isinstance(policies, Policies)
    versions = {s.name: s.version for s in policies.sets}
    rows = [
        (
            r.id,
            r.kind,
            severity_name(r),
            r.title,
            f"{r.policy}@{versions.get(r.policy, '?')}",
        )
        for r in policies.rules
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        print(f"{'  '.join(cells)}  {row[3]}  [{row[4]}]")
    return 0
