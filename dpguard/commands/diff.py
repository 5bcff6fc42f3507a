"""`dpguard diff OLD NEW`: what changing one manifest into another costs; and the shared run of
`dpguard review --baseline REV FILE...` (review.py hands over to `run_baseline`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpguard.change.collect import Run
    from dpguard.change.model import ChangeReport

    Compare = Callable[[Run], ChangeReport]

HELP = (
    "compare two versions of a manifest: layout, bubble, GPU-hours, memory, verdict and "
    "findings before and after (review --baseline REV does it for files in git)"
)
FORMATS = ("text", "json", "markdown", "github")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dpguard.commands._policies import add_policy_option, add_report_options

    parser.add_argument("old", metavar="OLD", help="the manifest before the change")
    parser.add_argument("new", metavar="NEW", help="the manifest after the change")
    add_report_options(parser, FORMATS)
    add_policy_option(parser)
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "never"),
        default=None,
        help="severities of NEW's findings that make the exit code 1 (default: .dpguard.yaml "
        "fail_on, else error; never: report only)",
    )


def _run(args: argparse.Namespace, paths: list[str], compare: Compare) -> int:
    """Judge, compare, render, and decide the exit code as review does: from the new versions'
    findings only (the baseline's problems are not this change's)."""
    import datetime as dt

    from dpguard.catalog import load_catalog
    from dpguard.change import FORMATS as CHANGE_FORMATS
    from dpguard.change import render_change
    from dpguard.change.collect import Run
    from dpguard.exitcodes import ExitCode
    from dpguard.isolation import is_crashed
    from dpguard.judges import judges, unused_waiver_warnings
    from dpguard.reporters import Report
    from dpguard.reporters import render as render_review
    from dpguard.reporters.output import deliver
    from dpguard.reporters.safe import diagnostic

    today = getattr(args, "date", None) or dt.date.today()
    judge_of, here = judges(paths, args.policy, args.config, args.fail_on, today)
    fallback = here or next(iter(judge_of.values()))
    run = Run(lambda p: judge_of.get(p, fallback), load_catalog(), {}, getattr(args, "jobs", None))
    report = compare(run)
    # as a plain review: only the waivers whose every file was compared, unless asked for all
    checked = None if getattr(args, "report_unused_waivers", False) else paths
    for warning in unused_waiver_warnings(judge_of, run.used, checked, changes=True):
        print(diagnostic(warning), file=sys.stderr)
    for _path, why in report.unreadable:
        print(diagnostic(f"dpguard: error: {why}"), file=sys.stderr)
    failed = any(c.after is not None and not c.after.passed for c in report.changes)
    code = ExitCode.FAILED if failed else ExitCode.OK
    if report.unreadable:
        code = ExitCode.CANNOT_RUN
    crashes = [
        s.path for c in report.changes for s in (c.before, c.after) if s and is_crashed(s.findings)
    ]
    for path in crashes:
        print(
            diagnostic(f"dpguard: internal error in {path}: a bug in dpguard (its D001 finding)"),
            file=sys.stderr,
        )
    if crashes:  # after every file is compared and the report written
        code = ExitCode.INTERNAL
    if args.format in CHANGE_FORMATS:
        text = render_change(report, args.format)
    else:
        # SARIF and JUnit have no place for a before and an after: they report the new
        # versions, with the findings of the rules on the change.
        results = tuple(c.result for c in report.changes if c.result is not None)
        head = Report(results, fallback.fail_on, fallback.policies, report.unreadable)
        text = render_review(head, args.format)
    deliver(text, args.output)
    return code


def run(args: argparse.Namespace) -> int:
    from dpguard.change.collect import between_paths

    return _run(args, [args.new], lambda r: between_paths(args.old, args.new, r))


def run_baseline(args: argparse.Namespace) -> int:
    """`review --baseline REV FILE...` (every review format; see _run)."""
    from dpguard import gitrev
    from dpguard.change.collect import against_revision, files_against

    baseline = gitrev.resolve(args.baseline)
    files, keep = files_against(baseline, args.files, args.only_manifests)
    return _run(args, files, lambda r: against_revision(baseline, files, r, keep))
