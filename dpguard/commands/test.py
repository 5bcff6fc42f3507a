"""`dpguard test [PATH...]`: run policy test cases written in YAML."""

from __future__ import annotations

import argparse
import sys

from dpguard.commands._policies import add_policy_option

HELP = "run policy test cases (kind: PolicyTest); default: the shipped cases"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="test files or directories of *.yaml files, judged by the repository's policies "
        "(.dpguard.yaml) plus --policy; default: the shipped cases, judged by the shipped sets "
        "plus --policy",
    )
    add_policy_option(parser)
    parser.add_argument(
        "--require-coverage",
        action="store_true",
        help="fail when a loaded rule has no case in which it fires or none in which it is silent",
    )


def run(args: argparse.Namespace) -> int:
    from dpguard import config
    from dpguard.commands._policies import config_of, load
    from dpguard.exitcodes import ExitCode
    from dpguard.policy.load import expand
    from dpguard.policy.testing import run_files, shipped_tests

    # A team's cases test the team's stack, as `review` would judge; the shipped cases test the
    # shipped sets, so a repository's overrides and disables cannot break them.
    # The nearest .dpguard.yaml above the first case file, as review would find for a manifest
    # there.
    cfg = config_of(args, args.paths[0]) if args.paths else config.NO_CONFIG
    policies = load(args.policy, cfg)
    paths = expand(args.paths) if args.paths else shipped_tests()
    result = run_files(paths, policies)
    for case in result.cases:
        if (line := case.report_line()) is not None:
            print(line)
    failed = result.failed > 0
    if args.require_coverage and result.uncovered:
        for gap in result.uncovered:
            print(f"coverage: {gap}")
        failed = True
    print(f"{result.passed} passed, {result.failed} failed")
    sys.stdout.flush()
    return ExitCode.FAILED if failed else ExitCode.OK
