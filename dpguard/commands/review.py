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
        default=None,
        help="severities that make the exit code 1 (default: .dpguard.yaml fail_on, else error)",
    )
    parser.add_argument(
        "--date",
        type=_date,
        default=None,
        metavar="YYYY-MM-DD",
        help="today's date for waiver expiry, so reports are reproducible (default: today)",
    )


def _date(text: str) -> object:
    import datetime as dt

    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a YYYY-MM-DD date") from None


def run(args: argparse.Namespace) -> int:
    import datetime as dt
    from dataclasses import replace
    from pathlib import Path

    from dpguard import config
    from dpguard.catalog import load_catalog
    from dpguard.check import FileResult, check_file
    from dpguard.errors import InputError
    from dpguard.exitcodes import review_exit_code
    from dpguard.policy.load import load_policies
    from dpguard.policy.waivers import load_waivers
    from dpguard.report import Report, render

    cfg = config.discover()  # flags win: --policy layers after the config's sets
    fail_on = args.fail_on or cfg.fail_on or "error"
    # a broken policy, config or waivers file stops everything: exit 2
    policies = load_policies([*cfg.policies, *args.policy], cfg.disable, cfg.disable_at)
    today = args.date or dt.date.today()
    waivers = (
        load_waivers(cfg.waivers, policies, today, Path(cfg.path).parent.resolve())
        if cfg.waivers
        else None
    )
    used: set[int] = set()
    catalog = load_catalog()
    results: list[FileResult] = []
    input_errors = 0
    for path in args.files:
        try:
            result = check_file(path, catalog, policies)
            if waivers is not None:
                findings, hits = waivers.apply(result.findings)
                used |= hits
                result = replace(result, findings=findings)
            results.append(result)
        except InputError as exc:  # report it, keep checking the others, exit 2 at the end
            print(f"dpguard: error: {exc}", file=sys.stderr)
            input_errors += 1
    if waivers is not None:
        for warning in waivers.unused_warnings(used):
            print(warning, file=sys.stderr)
    report = Report(tuple(results), fail_on, policies)
    sys.stdout.write(render(report, args.format))
    return review_exit_code(report.findings, input_errors, fail_on)
