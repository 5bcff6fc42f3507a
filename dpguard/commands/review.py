"""`dpguard review FILE...`: check training manifests and report findings."""

from __future__ import annotations

import argparse
import sys

from dpguard.commands._policies import add_policy_option
from dpguard.errors import DpguardError

HELP = "check training manifests (many files per call, as pre-commit passes them)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dpguard.reporters import formats

    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="manifests or framework configs to check"
    )
    parser.add_argument(
        "--format", choices=formats(), default="text", help="report format (default: text)"
    )
    parser.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        default=None,
        help="write the report to FILE (atomically: a temporary file, then a rename) "
        "instead of stdout",
    )
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
    from dpguard.commands._policies import load
    from dpguard.errors import InputError
    from dpguard.exitcodes import review_exit_code
    from dpguard.policy.waivers import load_waivers
    from dpguard.reporters import Report, emit, render, write_atomic

    cfg = config.discover()  # flags win: --policy layers after the config's sets
    fail_on = args.fail_on or cfg.fail_on or "error"
    # a broken policy, config or waivers file stops everything: exit 2
    policies = load(args.policy, cfg)
    today = args.date or dt.date.today()
    waivers = (
        load_waivers(cfg.waivers, policies, today, Path(cfg.path).parent.resolve())
        if cfg.waivers
        else None
    )
    used: set[int] = set()
    catalog = load_catalog()
    results: list[FileResult] = []
    unreadable: list[tuple[str, str]] = []
    paths = [p for p in args.files if declares_manifest(p)] if args.only_manifests else args.files
    for path in paths:
        try:
            result = check_file(path, catalog, policies, cfg.defaults_for(path))
            if waivers is not None:
                findings, hits = waivers.apply(result.findings)
                used |= hits
                result = replace(result, findings=findings)
            results.append(result)
        except InputError as exc:  # report it, keep checking the others, exit 2 at the end
            print(f"dpguard: error: {exc}", file=sys.stderr)
            unreadable.append((path, str(exc)))
    if waivers is not None:
        for warning in waivers.unused_warnings(used):
            print(warning, file=sys.stderr)
    report = Report(tuple(results), fail_on, policies, tuple(unreadable))
    code = review_exit_code(report.findings, len(unreadable), fail_on)
    if args.output is None or args.output == "-":
        emit(render(report, args.format, color=_color(sys.stdout)))
    else:
        write_atomic(args.output, render(report, args.format))
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
