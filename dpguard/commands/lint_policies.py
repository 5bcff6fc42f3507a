"""`dpguard lint-policies [PATH...]`: load and check policy sets, printing every problem."""

from __future__ import annotations

import argparse

HELP = "check policy sets (default: the shipped sets plus .dpguard.yaml layers)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="policy files or directories, layered over the shipped sets (default: .dpguard.yaml)",
    )


def run(args: argparse.Namespace) -> int:
    from dpguard import config
    from dpguard.exitcodes import ExitCode
    from dpguard.policy.load import PolicyError, load_policies

    cfg = config.NO_CONFIG if args.paths else config.discover()
    extra = list(args.paths) if args.paths else list(cfg.policies)
    try:
        policies = load_policies(extra, cfg.disable, cfg.disable_at)
    except PolicyError as exc:
        for problem in exc.problems:
            print(problem)
        return ExitCode.CANNOT_RUN
    print(f"{len(policies.sets)} policy sets, {len(policies.rules)} rules: ok")
    return ExitCode.OK
