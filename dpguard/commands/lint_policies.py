"""`dpguard lint-policies [PATH...]`: load and check policy sets, printing every problem."""

from __future__ import annotations

import argparse
import re
from typing import Any

HELP = "check policy sets (default: the shipped sets plus .dpguard.yaml layers)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="policy files or directories, layered over the shipped sets (default: .dpguard.yaml)",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=None,
        help="the .dpguard.yaml whose layers to check (default: the nearest one above the "
        "current directory)",
    )


def run(args: argparse.Namespace) -> int:
    from dpguard import config
    from dpguard.exitcodes import ExitCode
    from dpguard.policy.load import PolicyError, load_policies

    cfg = config.NO_CONFIG if args.paths else config.Discovery(args.config).here()
    extra = list(args.paths) if args.paths else list(cfg.policies)
    try:
        policies = load_policies(extra, cfg.disable, cfg.disable_at)
    except PolicyError as exc:
        for problem in exc.problems:
            print(problem)
        return ExitCode.CANNOT_RUN
    warnings = domain_warnings(policies)
    for warning in warnings:
        print(warning)
    for note in change_notes(policies):
        print(note)
    noted = f" ({len(warnings)} warning{'' if len(warnings) == 1 else 's'})" if warnings else ""
    team = len(policies.profiles)
    profiles = f", {team} framework profile{'s' if team > 1 else ''}" if team else ""
    print(f"{len(policies.sets)} policy sets, {len(policies.rules)} rules{profiles}: ok{noted}")
    return ExitCode.OK


def domain_warnings(policies: Any) -> list[str]:
    """Comparisons a fact's range decides on its own, and rules that range makes dead
    (policy.domains), at each test's position; warnings: the sets still load."""
    from dpguard.policy.conditions import Leaf
    from dpguard.policy.domains import leaf_warning, leaves_with_paths, never_true
    from dpguard.yamlsource import YamlLoadError, load_file

    out: list[str] = []
    effective = {r.id: r for r in policies.rules}
    for policy_set in policies.sets:
        try:
            doc = load_file(policy_set.path) if policy_set.path else None
        except YamlLoadError:
            doc = None
        if doc is None:
            continue
        for i, data in enumerate(doc.data.get("rules", ())):
            for where, leaf in leaves_with_paths(data.get("when"), ("rules", i, "when")):
                ops = [k for k in leaf if k != "fact"]
                if len(ops) != 1:
                    continue
                value = leaf[ops[0]]
                value = tuple(value) if isinstance(value, list) else value
                problem = leaf_warning(Leaf(leaf["fact"], ops[0], value))
                if problem is not None:
                    at = doc.location((*where, ops[0]))
                    out.append(f"{at}: warning {data.get('id')}: {problem}")
            rule = effective.get(data.get("id"))
            if rule is not None and rule.policy == policy_set.name and never_true(rule, True):
                out.append(
                    f"{doc.location(('rules', i))}: warning {rule.id} can never fire: no "
                    "manifest's facts are in range for every test of any branch"
                )
    return out


_CHANGE_IN_MESSAGE = re.compile(r"\bchange\.[a-z_]+")


def change_notes(policies: Any) -> list[str]:
    """Rules on the change (change.* facts) are judged only when two versions are compared:
    lint says which, and warns about a message that reads a change fact its rule never
    tests (it would render as nothing in a plain review)."""
    from dpguard.policy.engine import reads_change

    out: list[str] = []
    for rule in sorted(policies.rules, key=lambda r: r.id):
        if reads_change(rule):
            out.append(
                f"note {rule.id} ({rule.policy}) tests change.* facts: judged only by review "
                "--baseline, diff and policy test cases with a baseline"
            )
        elif used := sorted(set(_CHANGE_IN_MESSAGE.findall(rule.message))):
            out.append(
                f"warning {rule.id} ({rule.policy}): its message uses {', '.join(used)}, set "
                "only for rules whose condition tests a change.* fact"
            )
    return out
