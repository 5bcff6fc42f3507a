"""`dpguard test [PATH...]`: run policy test cases written in YAML."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from dpguard.commands._policies import add_policy_option

if TYPE_CHECKING:
    from dpguard.config import Config
    from dpguard.policy.model import Policies
    from dpguard.policy.waivers import Waivers

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
    parser.add_argument(
        "--coverage-of",
        action="append",
        default=[],
        metavar="SET_NAME",
        help="require coverage of the rules of this policy set only (its metadata.name or file "
        "path; repeatable; implies --require-coverage): a team's cases need not cover the "
        "shipped rules",
    )


def run(args: argparse.Namespace) -> int:
    from dpguard import config
    from dpguard.commands._policies import config_of, load
    from dpguard.exitcodes import ExitCode
    from dpguard.policy.expect import coverage_sets
    from dpguard.policy.load import expand
    from dpguard.policy.testing import run_files, shipped_tests

    # A team's cases test the team's stack, as `review` would judge; the shipped cases test the
    # shipped sets, so a repository's overrides and disables cannot break them.
    # The nearest .dpguard.yaml above the first case file, as review would find for a manifest
    # there.
    cfg = config_of(args, args.paths[0]) if args.paths else config.NO_CONFIG
    policies = load(args.policy, cfg)
    scope = coverage_sets(args.coverage_of, policies) if args.coverage_of else None
    paths = expand(args.paths) if args.paths else shipped_tests()
    result = run_files(paths, policies, _waivers(cfg, policies), scope)
    for case in result.cases:
        if (line := case.report_line()) is not None:
            print(line)
    failed = result.failed > 0
    if (args.require_coverage or scope is not None) and result.uncovered:
        for gap in result.uncovered:
            print(f"coverage: {gap}")
        failed = True
    print(f"{result.passed} passed, {result.failed} failed")
    sys.stdout.flush()
    return ExitCode.FAILED if failed else ExitCode.OK


def _waivers(cfg: Config, policies: Policies) -> Waivers | None:
    """The config's waivers, as review applies them today, so `expect: {waived: ...}` tests them."""
    import datetime as dt
    from pathlib import Path

    from dpguard.policy.waivers import load_waivers

    if not cfg.waivers:
        return None
    return load_waivers(cfg.waivers, policies, dt.date.today(), Path(cfg.path).parent.resolve())
