"""`dpguard review FILE...`: check training manifests and report findings."""

from __future__ import annotations

import argparse
import sys

from dpguard.commands._policies import add_policy_option, add_report_options
from dpguard.errors import DpguardError

HELP = "check training manifests (many files per call, as pre-commit passes them)"


# The report formats (dpguard.reporters.RENDERERS, which a test keeps in step): named here so
# that building the command line does not import every renderer, and with them the checker,
# for commands that never write a review report.
FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")
# The reports that print each file's plan (the decision line, the plan data, the PR comment's
# plan): for the others (the hook's --quiet, SARIF, JUnit) review runs the planner's full search
# only where a rule reads its numbers (check.judge).
SHOWS_PLAN = frozenset(("text", "json", "github", "markdown"))
# The reports that print only findings and each file's decision line: the manifest, verdict
# and plan of a file are released as soon as it is judged (reporters.model.released).
LINES_ONLY = frozenset(("text", "github", "sarif", "junit"))


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
        "--baseline",
        metavar="REV",
        default=None,
        help="also judge each file as it was at git revision REV (a file missing there is "
        "added, one missing now removed; git's rename detection pairs renames) and report what "
        "changed: layout, bubble, GPU-hours, memory, verdict, findings added and resolved "
        "(text, json, markdown, github; sarif and junit report the new versions)",
    )


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
    from dataclasses import replace

    from dpguard.catalog import load_catalog
    from dpguard.check import FileResult, check_file
    from dpguard.commands._judges import judges, warn_unused_waivers
    from dpguard.errors import InputError
    from dpguard.exitcodes import ExitCode
    from dpguard.reporters import Report, emit, render, write_atomic
    from dpguard.reporters.model import released

    today = args.date or dt.date.today()
    from dpguard.commands._files import expand

    paths, empty = expand(args.files, declares_manifest if args.only_manifests else None)
    for directory in empty:
        print(f"dpguard: {directory}: no manifest or framework config under it", file=sys.stderr)
    # Each file is judged by the nearest .dpguard.yaml above it (or --config); a broken policy,
    # config or waivers file any of them needs stops everything: exit 2.
    judge_of, here = judges(paths, args.policy, args.config, args.fail_on, today)
    used: dict[str, set[int]] = {}
    catalog = load_catalog()
    plan_shown = args.format in SHOWS_PLAN and not (args.quiet and args.format == "text")
    results: list[FileResult] = []
    unreadable: list[tuple[str, str]] = []
    for path in paths:
        judge = judge_of[path]
        cfg = judge.config
        try:
            result = check_file(path, catalog, judge.policies, cfg.defaults_for(path), plan_shown)
            if judge.waivers is not None:
                findings, hits = judge.waivers.apply(result.findings)
                used.setdefault(cfg.path, set()).update(hits)
                result = replace(result, findings=findings)
            result = replace(
                result, config=cfg.path, judged_by=judge.policies, fail_on=judge.fail_on
            )
            results.append(released(result) if args.format in LINES_ONLY else result)
        except InputError as exc:  # report it, keep checking the others, exit 2 at the end
            print(f"dpguard: error: {exc}", file=sys.stderr)
            unreadable.append((path, str(exc)))
    warn_unused_waivers(judge_of, used, None if args.report_unused_waivers else paths)
    first = here or next(iter(judge_of.values()))
    report = Report(tuple(results), first.fail_on, first.policies, tuple(unreadable))
    summary = report.summary()
    failed = ExitCode.FAILED if summary["failed"] else ExitCode.OK
    code = ExitCode.CANNOT_RUN if unreadable else failed
    to_stdout = args.output is None or args.output == "-"
    color = to_stdout and _color(sys.stdout)  # never in a file
    if args.quiet and args.format == "text":
        from dpguard.reporters.text import render_quiet

        text = render_quiet(report, color=color)
    else:
        text = render(report, args.format, color=color)
    if to_stdout:
        emit(text)
    else:
        write_atomic(args.output, text)
    return code


def _color(stream: object) -> bool:
    """Colour only on a terminal, never with NO_COLOR set to anything (https://no-color.org)."""
    import os

    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


OTHER_KINDS = frozenset({"PolicySet", "PolicyTest", "Waivers"})  # dpguard/v1 files, not manifests


def declares_manifest(path: str) -> bool:
    """Whether `--only-manifests` checks `path`: a framework config dpguard reads (by content:
    docs/frameworks.md), or YAML whose first document's root mapping has ``kind:
    TrainingManifest``, or an ``apiVersion: dpguard/...`` without another dpguard kind (so a
    typo in either key is reported, not skipped). Other files cost little and never fail
    here; a YAML file that cannot be read or is not YAML at all counts as a manifest, so
    review reports it."""
    import os

    from dpguard.frameworks.detect import sniff, yaml_format
    from dpguard.yamlsource import YamlLoadError, load_text, read_text, root_scalars

    if not path.endswith((".yaml", ".yml")) and os.path.isfile(path):
        try:
            return sniff(path, read_text(path)) is not None
        except (YamlLoadError, DpguardError):
            return False  # not text dpguard reads: not its business in hook mode
    keys = root_scalars(path, ("apiVersion", "kind"))
    if keys is None:
        return True
    api, kind = keys.get("apiVersion"), keys.get("kind")
    if kind == "TrainingManifest":
        return True
    if api is not None or kind is not None:
        return api is not None and api.startswith("dpguard/") and kind not in OTHER_KINDS
    try:
        return yaml_format(load_text(read_text(path), path).data) is not None
    except (YamlLoadError, DpguardError):
        return False
