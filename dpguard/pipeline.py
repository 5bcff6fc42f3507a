"""`review`'s pipeline, in the core: the files are discovered (dpguard.discover), each is judged
by the nearest .dpguard.yaml's stack (dpguard.judges), loaded, composed with its framework
config and judged (dpguard.check), its waivers applied; the result is one Report that the
reporters only format. The command (commands/review.py) parses arguments, prints and writes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TypeVar

from dpguard import workers
from dpguard.catalog import load_catalog
from dpguard.check import FileResult, check_file
from dpguard.errors import InputError
from dpguard.isolation import STOPS, crashed, isolated, told
from dpguard.judges import judges, merge_used, unused_waiver_warnings
from dpguard.reporters import Part
from dpguard.reporters.model import Report, released
from dpguard.sourcing import through_manifests

# The reports that print each file's plan (the decision line, the plan data, the PR comment's
# plan): for the others (the hook's --quiet, SARIF, JUnit) review runs the planner's full search
# only where a rule reads its numbers (check.judge_unplanned).
SHOWS_PLAN = frozenset(("text", "json", "github", "markdown"))
# the formats whose report holds each plan's page data (every schedule, the policies' verdicts)
SHOWS_PAGE = frozenset(("json", "markdown"))
# The reports that print only findings and each file's decision line: the manifest, verdict
# and plan of a file are released as soon as it is judged (reporters.model.released).
LINES_ONLY = frozenset(("text", "github", "sarif", "junit"))


@dataclass(frozen=True)
class Reviewed:
    report: Report
    errors: tuple[str, ...]  # files that could not be read (exit 2), one message each
    warnings: tuple[str, ...]  # unused waivers
    internal: tuple[str, ...] = ()  # a bug met in a file (exit 3): one message, or traceback


def review(
    paths: Sequence[str],
    *,
    policies: Sequence[str] = (),
    config: str | None = None,
    fail_on: str | None = None,
    today: dt.date,
    shows_plan: bool = True,
    shows_page: bool = False,
    lines_only: bool = False,
    all_waivers: bool = False,
    debug: bool = False,
    part: Part | None = None,
    jobs: int | None = None,
) -> Reviewed:
    """Judge `paths` (files, as dpguard.discover.expand gives them). `policies` layer over each
    file's stack, `config` pins one .dpguard.yaml for all; a broken config, stack or waivers
    file raises before any file is judged. `shows_plan` / `shows_page` / `lines_only`: what
    the report prints (SHOWS_PLAN, SHOWS_PAGE, LINES_ONLY). `all_waivers`: warn about every
    waiver no finding used, not only those whose files were all checked in this call. A bug met
    in one file is that file's D001 finding and one `internal` message (its traceback with
    `debug`); the other files are still checked. `part` (reporters.PARTS): render each file's
    section of the report as soon as it is judged, keeping only the text, so memory stays flat
    over a batch. `jobs`: processes to judge the files in (dpguard.workers; default: one per
    usable core for a batch large enough), where each file is released or rendered."""
    paths = through_manifests(paths)  # a sourced config is judged as its manifests
    judge_of, here = judges(paths, policies, config, fail_on, today)
    first = here or next(iter(judge_of.values()))
    context = Report((), first.fail_on, first.policies)  # what a section reads of the report
    catalog = load_catalog()
    # Only what is released crosses from a worker (dpguard.workers): a whole result (its
    # manifest, plan and verdict, for a caller that reads them) is judged here.
    released_only = part is not None or lines_only
    processes = workers.jobs(len(paths), jobs) if released_only else 1

    def judged(path: str) -> _Judged:
        """One file judged, its waivers applied, released or rendered: a worker's task."""
        judge = judge_of[path]
        cfg = judge.config
        used: dict[str, set[int]] = {}
        check = partial(
            check_file,
            path,
            catalog,
            judge.policies,
            cfg.defaults_for(path),
            shows_plan,
            shows_page,
        )
        try:
            result, bug = isolated(path, check, debug)
        except InputError as exc:  # reported; the others are still checked; exit 2 at the end
            return _Judged(path, None, (), {}, str(exc))
        bugs: tuple[str, ...] = () if bug is None else (bug,)
        result = replace(result, findings=judge.waive(result.findings, used, path))
        result = replace(result, config=cfg.path, judged_by=judge.policies, fail_on=judge.fail_on)
        if part is not None:
            result, bug = _with_part(context, result, part, debug)
            bugs += () if bug is None else (bug,)
        elif lines_only:
            result = released(result)
        if processes > 1:  # its policy stack, the largest object it refers to, stays here
            result = replace(result, judged_by=None)
        return _Judged(path, result, bugs, used)

    used: dict[str, set[int]] = {}
    results: list[FileResult] = []
    unreadable: list[tuple[str, str]] = []
    internal: list[str] = []
    for one in workers.ordered(judged, paths, processes):
        if one.unreadable is not None:
            unreadable.append((one.path, one.unreadable))
            continue
        merge_used(used, one.used)
        internal += one.bugs
        assert one.result is not None
        if processes > 1:
            results.append(replace(one.result, judged_by=judge_of[one.path].policies))
        else:
            results.append(one.result)
    warnings = unused_waiver_warnings(judge_of, used, None if all_waivers else paths)
    report = Report(tuple(results), first.fail_on, first.policies, tuple(unreadable))
    errors = tuple(f"dpguard: error: {m}" for _, m in unreadable)
    return Reviewed(report, errors, warnings, tuple(internal))


@dataclass(frozen=True)
class _Judged:
    """One file as judged: its result (None when it could not be read: `unreadable` says why),
    what stderr says of a bug met in it, and the waivers its findings used."""

    path: str
    result: FileResult | None
    bugs: tuple[str, ...]
    used: dict[str, set[int]]
    unreadable: str | None = None


def _with_part(
    context: Report, result: FileResult, part: Part, debug: bool
) -> tuple[FileResult, str | None]:
    """`result` released, with its section of the report rendered; a reporter's bug in it is
    the file's D001 finding (whose section is rendered instead) and a message for stderr."""
    try:
        return released(replace(result, part=part(context, result))), None
    except STOPS:
        raise
    except Exception as exc:
        broken = crashed(result, exc)
        bug = told("rendering", result.path, debug)
    return released(replace(broken, part=part(context, broken))), bug


Rendered = TypeVar("Rendered")


def rendered(
    report: Report, render: Callable[[Report], Rendered], debug: bool = False
) -> tuple[Rendered, Report, tuple[str, ...]]:
    """`render(report)`, with per-file isolation of a reporter's bug: when rendering fails,
    each file is rendered alone, and one whose own rendering fails is replaced by its D001
    finding, so the others' findings still reach the report. (text, the report rendered, one
    message per file replaced). A failure no single file causes still raises."""
    try:
        return render(report), report, ()
    except STOPS:
        raise
    except Exception:
        pass
    results: list[FileResult] = []
    broken: list[str] = []
    for result in report.results:
        try:
            render(replace(report, results=(result,)))
            results.append(result)
        except STOPS:
            raise
        except Exception as exc:
            results.append(crashed(result, exc))
            broken.append(told("rendering", result.path, debug))
    kept = replace(report, results=tuple(results))
    return render(kept), kept, tuple(broken)
