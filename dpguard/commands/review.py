"""`dpguard review FILE...`: check training manifests and report findings."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

HELP = "check training manifests (many files per call, as pre-commit passes them)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dpguard.reporters import formats

    parser.add_argument("files", nargs="+", metavar="FILE", help="manifest files to check")
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
        help="pass over YAML files that are not training manifests quietly (for pre-commit): "
        "check a file only if its first document's root mapping has kind: TrainingManifest, "
        "or an apiVersion: dpguard/... and no other dpguard kind; a file that is not YAML at "
        "all is still reported",
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
    from dpguard.reporters import Report, render, write_atomic

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
    paths = [p for p in args.files if declares_manifest(p)] if args.only_manifests else args.files
    for path in paths:
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
    if args.output is None or args.output == "-":
        sys.stdout.write(render(report, args.format, color=_color(sys.stdout)))
    else:
        write_atomic(args.output, render(report, args.format))
    return review_exit_code(report.findings, input_errors, fail_on)


def _color(stream: object) -> bool:
    """Colour only on a terminal, never with NO_COLOR set to anything (https://no-color.org)."""
    import os

    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


OTHER_KINDS = frozenset({"PolicySet", "PolicyTest", "Waivers"})  # dpguard/v1 files, not manifests


def declares_manifest(path: str) -> bool:
    """Whether `--only-manifests` checks `path`: its first YAML document's root mapping has
    ``kind: TrainingManifest``, or an ``apiVersion: dpguard/...`` without another dpguard kind
    (so a typo in either key is reported, not skipped). Reads YAML *events* only, up to the two
    keys, so other YAML (tags, several documents, anchors) costs little and never fails here.
    A file that cannot be read or is not YAML at all counts as a manifest: review reports it."""
    import yaml

    try:
        with open(path, "rb") as handle:
            keys = _root_keys(
                yaml.parse(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            )
    except (OSError, yaml.YAMLError):
        return True
    api, kind = keys.get("apiVersion"), keys.get("kind")
    if kind == "TrainingManifest":
        return True
    return api is not None and api.startswith("dpguard/") and kind not in OTHER_KINDS


def _root_keys(events: Iterable[Any]) -> dict[str, str]:
    """The scalar values of ``apiVersion`` and ``kind`` in the first document's root mapping."""
    import yaml

    stream = iter(events)
    for event in stream:
        if not isinstance(event, (yaml.StreamStartEvent, yaml.DocumentStartEvent)):
            if not isinstance(event, yaml.MappingStartEvent):
                return {}  # empty file, a scalar or a sequence at the root
            break
    found: dict[str, str] = {}
    nested, is_key, key = 0, True, None
    for event in stream:
        if isinstance(event, yaml.CollectionStartEvent):
            nested += 1
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            if nested == 0:
                break  # the end of the root mapping
            nested -= 1
            if nested:
                continue
            value = None  # a collection at the root level just ended
        elif nested:
            continue
        else:
            value = event.value if isinstance(event, yaml.ScalarEvent) else None
        if is_key:
            key = value
        elif key in ("apiVersion", "kind") and value is not None:
            found.setdefault(key, value)
            if len(found) == 2:
                break
        is_key = not is_key
    return found
