"""`dpguard facts`: every fact a policy condition or message may use."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpguard.policy.facts import FactSpec

HELP = "list the facts policies may test (path, type, choices, description)"

_UNSET = (
    "every test is false except `exists: false`; wrap a test in `not` to count an unset fact "
    "as a match"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help='default: text; json: {"facts": [{"name", "type", "description", "choices"}], '
        '"unset_facts"}, in the order the text lists them',
    )


def specs() -> list[FactSpec]:
    """Every fact in registry order, then one line for the label facts, which the registry
    cannot list (one per label key): what both formats show."""
    from dpguard.policy.facts import FACTS, LABELS, FactSpec

    labels = FactSpec(
        f"{LABELS}<key>",
        "str",
        "the manifest's label <key> (letters, digits, _ / -; unset when not written)",
    )
    return [*FACTS.values(), labels]


def as_dict(spec: FactSpec) -> dict[str, Any]:
    return {
        "name": spec.path,
        "type": spec.type,
        "description": spec.description,
        "choices": list(spec.choices),
    }


def _text(facts: list[FactSpec]) -> str:
    width = max(len(spec.path) for spec in facts)
    type_width = max(len(spec.type) for spec in facts)
    lines = []
    for spec in facts:
        choices = f" (one of: {', '.join(spec.choices)})" if spec.choices else ""
        lines.append(
            f"{spec.path.ljust(width)}  {spec.type.ljust(type_width)}  {spec.description}{choices}"
        )
    return "\n".join([*lines, f"unset facts: {_UNSET}"]) + "\n"


def run(args: argparse.Namespace) -> int:
    facts = specs()
    if args.format == "json":
        data = {"facts": [as_dict(spec) for spec in facts], "unset_facts": _UNSET}
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(_text(facts), end="")
    return 0
