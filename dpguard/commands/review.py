"""`dpguard review FILE...`: check training manifests and report findings."""

from __future__ import annotations

import argparse
import sys

HELP = "check training manifests (many files per call, as pre-commit passes them)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dpguard.report import formats

    parser.add_argument("files", nargs="+", metavar="FILE", help="manifest files to check")
    parser.add_argument(
        "--format", choices=formats(), default="text", help="report format (default: text)"
    )
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="PATH",
        help="extra policy set file or directory, layered over the shipped ones (repeatable)",
    )
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        default="error",
        help="which severities make the exit code 1 (default: error)",
    )


def run(args: argparse.Namespace) -> int:
    from dpguard.catalog import load_catalog
    from dpguard.check import FileResult, check_file
    from dpguard.errors import InputError
    from dpguard.exitcodes import review_exit_code
    from dpguard.policy.load import load_policies
    from dpguard.report import Report, render

    policies = load_policies(args.policy)  # a broken policy stops everything: exit 2
    catalog = load_catalog()
    results: list[FileResult] = []
    input_errors = 0
    for path in args.files:
        try:
            results.append(check_file(path, catalog, policies))
        except InputError as exc:  # report it, keep checking the others, exit 2 at the end
            print(f"dpguard: error: {exc}", file=sys.stderr)
            input_errors += 1
    report = Report(tuple(results), args.fail_on, policies)
    sys.stdout.write(render(report, args.format))
    return review_exit_code(report.findings, input_errors, args.fail_on)
