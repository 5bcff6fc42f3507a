"""Check both versions of each file and pair them into a `ChangeReport`.

`against_revision` reads the old versions from git (`dpguard.gitrev`) into a private temporary
directory, laid out as in the repository so that a manifest's ``source:`` and a FlagScale
experiment's ``train/`` file resolve to their own old versions, and checks them exactly as
`review` checks files on disk, judged by the *same* policies as the new version: the report
isolates what the pull request changed in the manifests. `between_paths` does the same for two
files on disk (`dpguard diff OLD NEW`).

The core never prints: what it cannot read is returned in `unreadable`, as review does.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dpguard import workers
from dpguard.change.model import (
    Change,
    ChangeReport,
    Side,
    change_facts,
    changed_keys,
    compare_findings,
    currency,
    summarise,
)
from dpguard.check import FileResult, check_file
from dpguard.errors import InputError
from dpguard.gitrev import Baseline
from dpguard.isolation import INTERNAL, TIMED_OUT, isolated
from dpguard.judges import merge_used
from dpguard.reporters.model import released

if TYPE_CHECKING:
    from dpguard.catalog import Catalog
    from dpguard.config import Config
    from dpguard.findings import Finding
    from dpguard.policy.model import Policies


class Judge(Protocol):
    """Who judges a file (dpguard.judges.Judge): its config, policies, waivers."""

    @property
    def config(self) -> Config: ...
    @property
    def policies(self) -> Policies: ...
    @property
    def fail_on(self) -> str: ...
    def waive(
        self,
        findings: tuple[Finding, ...],
        used: dict[str, set[int]] | None,
        judged: str | None = None,
    ) -> tuple[Finding, ...]: ...


@dataclass(frozen=True)
class Entry:
    """One file to compare: where each version is read from and how it changed."""

    path: str  # display path now (the old one for a removed file)
    base_path: str | None  # display path at the baseline
    status: str
    disk: str | None  # the new version on disk (None: removed)
    base_disk: str | None  # the old version, written out (None: added)
    same_bytes: bool = False  # the old version is byte-identical and stands alone


@dataclass
class Run:
    """What one comparison needs besides the files; `used` collects waiver hits per config;
    `jobs`: processes to compare the files in (dpguard.workers; None: the default)."""

    judge_for: Callable[[str], Judge]
    catalog: Catalog
    used: dict[str, set[int]]
    jobs: int | None = None


def _check(run: Run, disk: str, display: str, judge: Judge, renames: Mapping[str, str]) -> Any:
    defaults = judge.config.defaults_for(display)
    result, _bug = isolated(  # a bug is this version's D001 finding (commands.diff tells it)
        display, partial(check_file, disk, run.catalog, judge.policies, defaults)
    )
    if any(f.code in (INTERNAL, TIMED_OUT) for f in result.findings):
        return result  # already at the display path
    if disk == display and not renames:
        return result

    def place(path: str) -> str:
        return renames.get(path, display if path == disk else path)

    findings = tuple(sorted(replace(f, path=place(f.path)) for f in result.findings))
    return replace(result, path=display, findings=findings)


def _waive(run: Run, result: FileResult, judge: Judge, record: bool) -> FileResult:
    return replace(
        result, findings=judge.waive(result.findings, run.used if record else None, result.path)
    )


def _judge_change(result: FileResult, judge: Judge, facts: Mapping[str, Any]) -> FileResult:
    """The new version with the rules that read ``change.*`` judged."""
    from dpguard.policy.engine import judge_change

    outcome, manifest = result.outcome, result.manifest
    if outcome is None or manifest is None:
        return result
    judged = judge_change(judge.policies, manifest, outcome, facts)
    new = set(judged.findings) - set(outcome.findings)
    return replace(result, outcome=judged, findings=tuple(sorted({*result.findings, *new})))


def compare(run: Run, entry: Entry, renames: Mapping[str, str]) -> Change:
    judge = run.judge_for(entry.path)
    fail_on = judge.fail_on
    after_raw = _check(run, entry.disk, entry.path, judge, {}) if entry.disk is not None else None
    before_result = None
    if entry.base_disk is not None and entry.base_path is not None:
        if entry.same_bytes and after_raw is not None:  # nothing to check twice
            before_result = replace(
                after_raw,
                path=entry.base_path,
                findings=tuple(replace(f, path=entry.base_path) for f in after_raw.findings)
                if entry.base_path != entry.path
                else after_raw.findings,
            )
        else:
            before_result = _check(run, entry.base_disk, entry.base_path, judge, renames)
        before_result = _waive(run, before_result, judge, record=False)
    before = summarise(before_result, judge.policies, fail_on) if before_result else None
    after, after_result = None, None
    if after_raw is not None:
        facts = change_facts(entry.status, before, summarise(after_raw, judge.policies, fail_on))
        after_result = _waive(run, _judge_change(after_raw, judge, facts), judge, record=True)
        after_result = replace(
            after_result, config=judge.config.path, judged_by=judge.policies, fail_on=fail_on
        )
        after = summarise(after_result, judge.policies, fail_on)
    added, resolved, unchanged = compare_findings(
        before.findings if before else (), after.findings if after else ()
    )
    manifest = after_raw.manifest if after_raw is not None else None
    keys = changed_keys(before, after, manifest.locate if manifest else lambda _k: ("", 1, 1))
    return Change(
        entry.path,
        entry.base_path,
        entry.status,
        before,
        after,
        added,
        resolved,
        unchanged,
        keys,
        after_result,
    )


def _compared(
    run: Run, displays: Mapping[str, str], in_worker: bool, entry: Entry
) -> tuple[Change | None, str | None, dict[str, set[int]]]:
    """`compare` for one entry, as a worker's task: the change (None when a version cannot
    be read: then why), and the waivers its findings used. From a worker the new version's
    result comes released (what the reports read of it: findings, config, decision), without
    its policy stack."""
    used: dict[str, set[int]] = {}
    try:
        change = compare(replace(run, used=used), entry, displays)
    except InputError as exc:
        return None, str(exc), used
    if in_worker and change.result is not None:
        change = replace(change, result=replace(released(change.result), judged_by=None))
    return change, None, used


def _same_manifest(
    run: Run, path: str, data: bytes | None, base_disk: str, displays: Mapping[str, str]
) -> bool:
    """Whether git's rename pair (`path` now, its old version written at `base_disk`) is one
    manifest moved. git pairs a deleted and an added file whose lines are at least half alike,
    and two manifests share most of their keys whatever they train: that alone would call a run
    of another model a rename. So a pair is a rename when the bytes are the same, or when both
    versions load and train the same model (architecture, parameters, layers, width), whatever
    else the edit changed (its budget, its layout, its metadata.name); otherwise the old file is
    removed and the new one added."""
    if data == Path(path).read_bytes():
        return True
    now = _model(run, path, path, path)
    return now is not None and now == _model(run, path, base_disk, displays[base_disk])


def _model(run: Run, path: str, disk: str, display: str) -> tuple[Any, ...] | None:
    """What tells one model from another, of the version of `path` read from `disk`: None when
    that version does not load and validate (or is missing), so nothing can be told."""
    defaults = run.judge_for(path).config.defaults_for(display)
    try:
        result, _bug = isolated(display, partial(check_file, disk, run.catalog, None, defaults))
    except InputError:
        return None
    if result.manifest is None:
        return None
    model = result.manifest.model
    return model.architecture, model.total_params, model.layers, model.hidden_size


def _companions(relative: str, data: bytes) -> list[str]:
    """Repository paths an old version reads besides itself: a manifest's ``source.path``
    (check.load_any) and a FlagScale experiment's ``train/NAME.yaml`` (frameworks.read)."""
    from dpguard.yamlsource import YamlLoadError, load_text

    try:
        doc = load_text(data.decode("utf-8-sig"), relative).data
    except (YamlLoadError, UnicodeDecodeError, ValueError):
        return []
    base = posixpath.dirname(relative)
    found = []
    source = doc.get("source")
    if isinstance(source, dict) and isinstance(source.get("path"), str):
        found.append(posixpath.join(base, source["path"]))
    for item in doc.get("defaults") or ():
        if isinstance(item, dict) and isinstance(item.get("train"), str):
            found.append(posixpath.join(base, "train", item["train"] + ".yaml"))
    normal = (posixpath.normpath(p) for p in found)
    return [p for p in normal if not p.startswith("../") and not posixpath.isabs(p)]


def _write(root: Path, relative: str, data: bytes) -> str:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return str(target)


@contextlib.contextmanager
def _standing_for_root(directory: str) -> Iterator[None]:
    """The baseline's files, written out, read only among themselves (dpguard.confine): their
    directory stands for the repository root while they are judged."""
    from dpguard import confine

    confine.add_root(directory)
    try:
        yield
    finally:
        confine.remove_root(directory)


def files_against(
    baseline: Baseline, given: Sequence[str], only_manifests: bool
) -> tuple[list[str], Callable[[str], bool] | None]:
    """The files `review --baseline` compares, and which of them count (None: all). A
    directory stands for what the hook would pass of it, now and at the baseline: its files
    that are gone now are compared as removed. A sourced config is compared as its manifests
    (dpguard.sourcing)."""
    from dpguard.discover import EXTENSIONS, declares_manifest, expand
    from dpguard.sourcing import through_manifests

    directories = [path for path in given if os.path.isdir(path)]
    keep = declares_manifest if only_manifests or directories else None
    files = list(given)
    if directories:
        files, _ = expand(given)
        for directory in directories:
            for rel in baseline.files_under(directory):
                hidden = any(part.startswith(".") for part in rel.split("/"))
                shown = baseline.display(rel)
                if not hidden and rel.endswith(EXTENSIONS) and not os.path.exists(shown):
                    files.append(shown)
    return through_manifests(list(dict.fromkeys(files))), keep


def against_revision(
    baseline: Baseline,
    files: Sequence[str],
    run: Run,
    keep: Callable[[str], bool] | None = None,
) -> ChangeReport:
    """Compare each file with its version at `baseline`. `keep(path)` filters the files to
    compare (--only-manifests), asked of the old version for a removed file."""
    relative = {path: baseline.relative(path) for path in files}
    old = baseline.read(relative.values())
    unreadable: list[tuple[str, str]] = []
    now = {path: os.path.isfile(path) for path in files}
    renamed: dict[str, str] = {}
    if any(now[p] and old[relative[p]] is None for p in files):
        pairs = baseline.renames()
        renamed = {p: pairs[relative[p]] for p in files if now[p] and relative[p] in pairs}
        old.update(baseline.read(renamed.values()))
    with tempfile.TemporaryDirectory(prefix="dpguard-baseline-") as tmp, _standing_for_root(tmp):
        root = Path(tmp)
        written: dict[str, str] = {}  # repository path -> its old version on disk
        displays: dict[str, str] = {}  # old version on disk -> how reports name it
        companions: dict[str, list[str]] = {}
        for rel, data in old.items():
            if data is not None:
                companions[rel] = _companions(rel, data)
        extra = {c for cs in companions.values() for c in cs} - set(old)
        old.update(baseline.read(sorted(extra)))
        for rel, data in old.items():
            if data is not None:
                written[rel] = _write(root, rel, data)
                displays[written[rel]] = baseline.display(rel)
        renamed = {
            path: rel
            for path, rel in renamed.items()
            if rel in written and _same_manifest(run, path, old[rel], written[rel], displays)
        }
        gone = set(renamed.values())
        entries: list[Entry] = []
        for path in files:
            rel = renamed.get(path, relative[path])
            data = old.get(rel)
            if not now[path] and data is None:
                if os.path.exists(path):
                    unreadable.append((path, f"{path}: is not a file"))
                else:
                    unreadable.append(
                        (path, f"{path}: no such file, neither now nor at {baseline.name}")
                    )
                continue
            if not now[path]:
                if rel in gone:
                    continue  # the other half of a rename compared below
                if keep is not None and not keep(written[rel]):
                    continue
                entries.append(Entry(path, path, "removed", None, written[rel]))
                continue
            if keep is not None and not keep(path):
                continue
            if data is None:
                entries.append(Entry(path, None, "added", path, None))
                continue
            same = Path(path).read_bytes() == data and not companions.get(rel)
            status = "renamed" if path in renamed else ("unchanged" if same else "modified")
            base_path = baseline.display(rel)
            entries.append(Entry(path, base_path, status, path, written[rel], same))
        changes = []
        processes = workers.jobs(len(entries), run.jobs)
        task = partial(_compared, run, displays, processes > 1)
        for entry, (change, why, used) in zip(
            entries, workers.ordered(task, entries, processes), strict=True
        ):
            merge_used(run.used, used)
            if change is None:
                unreadable.append((entry.path, why or ""))
            elif processes > 1 and change.result is not None:  # its policy stack stayed here
                judged_by = run.judge_for(entry.path).policies
                changes.append(replace(change, result=replace(change.result, judged_by=judged_by)))
            else:
                changes.append(change)
    policies = run.judge_for(files[0]).policies if files else None
    return ChangeReport(
        tuple(changes),
        baseline.name,
        baseline.commit,
        policies,
        currency(policies),
        tuple(unreadable),
    )


def between_paths(old: str, new: str, run: Run) -> ChangeReport:
    """`dpguard diff OLD NEW`: two files on disk, OLD as the baseline of NEW."""
    for path in (old, new):
        if not os.path.isfile(path):
            why = "is a directory, not a file" if os.path.isdir(path) else "no such file"
            raise InputError(f"{path}: {why}")
    same = Path(old).read_bytes() == Path(new).read_bytes()
    entry = Entry(new, old, "unchanged" if same else "modified", new, old)
    change = compare(run, entry, {})
    policies = run.judge_for(new).policies
    return ChangeReport((change,), None, None, policies, currency(policies))


__all__ = ["Entry", "Judge", "Run", "Side", "against_revision", "between_paths", "compare"]
