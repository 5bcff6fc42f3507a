"""`dpguard facts`: every fact a policy condition or message may use."""

from __future__ import annotations

import argparse

HELP = "list the facts policies may test (path, type, choices, description)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    from dpguard.policy.facts import FACTS

    del args
    width = max(len(path) for path in FACTS)
    type_width = max(len(spec.type) for spec in FACTS.values())
    for path, spec in FACTS.items():
        choices = f" (one of: {', '.join(spec.choices)})" if spec.choices else ""
        print(f"{path.ljust(width)}  {spec.type.ljust(type_width)}  {spec.description}{choices}")
    print(
        f"{'metadata.labels.<key>'.ljust(width)}  {'str'.ljust(type_width)}  the manifest's "
        "label <key> (letters, digits, _ / -; unset when not written)"
    )
    print(
        "unset facts: every test is false except `exists: false`; wrap a test in `not` to "
        "count an unset fact as a match"
    )
    return 0
