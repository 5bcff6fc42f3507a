"""The `--policy` option and policy loading shared by the commands that judge manifests, so that
`review`, `plan`, `rules`, `explain` and `test` see the same layered stack: the shipped sets,
then the repository's .dpguard.yaml sets and disables, then the command line's --policy sets;
and the `--format`/`--output` options of the commands that write a document."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpguard.config import Config
    from dpguard.policy.model import Policies


def add_report_options(parser: argparse.ArgumentParser, formats: Sequence[str]) -> None:
    """--format and --output of the commands that write a report (review, diff)."""
    parser.add_argument(
        "--format", choices=formats, default="text", help="report format (default: text)"
    )
    add_output_option(parser, "the report")


def add_output_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--output of every command that writes one document (review, diff, plan, memory, perf):
    run() hands it to `dpguard.reporters.output.deliver`."""
    parser.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        default=None,
        help=f"write {what} to FILE (atomically: a temporary file, then a rename; only a "
        "regular file) instead of stdout; - is stdout",
    )


def add_policy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="PATH",
        help="extra policy set file or directory, layered over the shipped ones (repeatable)",
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=None,
        help="use this .dpguard.yaml for every file instead of the nearest one above each file "
        "(up to the repository root)",
    )


def config_of(args: argparse.Namespace, path: str | None = None) -> Config:
    """`--config` when given, else the nearest .dpguard.yaml above `path` (the current
    directory when there is no file)."""
    from dpguard import config

    discovery = config.Discovery(getattr(args, "config", None))
    return discovery.for_file(path) if path is not None else discovery.here()


def load(extra: Sequence[str], cfg: Config | None = None) -> Policies:
    """The layered stack; `cfg` defaults to the .dpguard.yaml found from the current directory."""
    from dpguard.frameworks import profiles
    from dpguard.judges import stack

    policies = stack(extra, cfg)
    profiles.activate(policies.profiles)
    return policies
