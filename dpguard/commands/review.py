"""`dpguard review FILE...`: check training manifests and report findings."""

from __future__ import annotations

import argparse
import sys

from dpguard.commands._policies import add_policy_option, add_report_options

HELP = "check training manifests (many files per call, as pre-commit passes them)"


# The report formats (dpguard.reporters.RENDERERS, which a test keeps in step): named here so
# that building the command line does not import every renderer, and with them the checker,
# for commands that never write a review report.
FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="manifests or framework configs to check; a directory stands for the manifests "
        "and framework configs under it, as the pre-commit hook selects them (--only-manifests; "
        ".git and hidden directories skipped)",
    )
    add_report_options(parser, FORMATS)
    parser.add_argument(
        "--only-manifests",
        action="store_true",
        help="pass over files that are neither training manifests nor framework configs "
        "quietly (for pre-commit): check YAML only if its first document's root mapping has "
        "kind: TrainingManifest, or an apiVersion: dpguard/... and no other dpguard kind, or "
        "it is a framework config (docs/frameworks.md); shell, TOML and JSON only when they "
        "are framework configs; a .yaml file that is not YAML at all is still reported",
    )
    add_policy_option(parser)
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "never"),
        default=None,
        help="severities that make the exit code 1 (default: .dpguard.yaml fail_on, else "
        "error); never: report only, for an advisory rollout",
    )
    parser.add_argument(
        "--date",
        type=_date,
        default=None,
        metavar="YYYY-MM-DD",
        help="today's date for waiver expiry, so reports are reproducible (default: today)",
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="text format: only unwaived errors and warnings, then the summary line (no info, "
        "decision or policy lines), for hooks",
    )
    parser.add_argument(
        "--report-unused-waivers",
        action="store_true",
        help="warn about every waiver no finding used (default: only waivers every file they "
        "could match was checked in this call, so a partial pre-commit run stays quiet)",
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=_jobs,
        default=None,
        metavar="N",
        help="processes to judge the files in (default: DPGUARD_JOBS, else one per usable "
        "core, one per 16 files at most, and one under pre-commit, which already runs one "
        "dpguard per core); the report is the same at any N",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        default=None,
        help="also judge each file as it was at git revision REV (a file missing there is "
        "added, one missing now removed; git's rename detection pairs renames) and report what "
        "changed: layout, bubble, GPU-hours, memory, verdict, findings added and resolved "
        "(text, json, markdown, github; sarif and junit report the new versions)",
    )


def _jobs(text: str) -> int:
    from dpguard.workers import MAX_JOBS, parse_jobs

    count = parse_jobs(text)
    if count is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of processes from 1 to {MAX_JOBS}"
        )
    return count


def _date(text: str) -> object:
    import datetime as dt

    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a YYYY-MM-DD date") from None


def run(args: argparse.Namespace) -> int:
    if args.baseline is not None:
        from dpguard.commands.diff import run_baseline

        return run_baseline(args)
    import datetime as dt

    from dpguard.discover import declares_manifest, expand
    from dpguard.exitcodes import ExitCode
    from dpguard.pipeline import LINES_ONLY, SHOWS_PAGE, SHOWS_PLAN, rendered, review
    from dpguard.reporters import PARTS, render_pieces
    from dpguard.reporters.output import Text, deliver
    from dpguard.reporters.safe import diagnostic

    paths, empty = expand(args.files, declares_manifest if args.only_manifests else None)
    for directory in empty:
        print(
            diagnostic(f"dpguard: {directory}: no manifest or framework config under it"),
            file=sys.stderr,
        )
    quiet = args.quiet and args.format == "text"
    reviewed = review(
        paths,
        policies=args.policy,
        config=args.config,
        fail_on=args.fail_on,
        today=args.date or dt.date.today(),
        shows_plan=args.format in SHOWS_PLAN and not quiet,
        shows_page=args.format in SHOWS_PAGE,
        lines_only=args.format in LINES_ONLY,
        all_waivers=args.report_unused_waivers,
        debug=args.debug,
        part=None if quiet else PARTS.get(args.format),
        jobs=args.jobs,
    )
    to_stdout = args.output is None or args.output == "-"
    color = to_stdout and _color(sys.stdout)  # never in a file
    text: Text
    if quiet:
        from dpguard.reporters.text import render_quiet

        text, report, broken = rendered(
            reviewed.report, lambda r: render_quiet(r, color=color), args.debug
        )
    else:
        text, report, broken = rendered(
            reviewed.report, lambda r: render_pieces(r, args.format, color=color), args.debug
        )
    for line in (*reviewed.errors, *reviewed.internal, *broken, *reviewed.warnings):
        print(diagnostic(line), file=sys.stderr)
    failed = ExitCode.FAILED if report.summary()["failed"] else ExitCode.OK
    code = ExitCode.CANNOT_RUN if report.unreadable else failed
    if reviewed.internal or broken:  # after every file is reported and the report written
        code = ExitCode.INTERNAL
    deliver(text, args.output)
    return code


def _color(stream: object) -> bool:
    """Colour only on a terminal, never with NO_COLOR set to anything (https://no-color.org)."""
    import os

    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")
