"""Waivers: exemptions from policy rules, in a file the platform team owns (``waivers:`` in
`.dpguard.yaml`), never in a manifest, so a pull request cannot exempt itself.

A matching unexpired waiver keeps its finding but marks it waived; an expired one brings the
finding back with a note. A waiver of an unknown or non-waivable rule, or one that expires
further ahead than the policy allows (``max_waiver_days``), is a ConfigError (exit 2). An unused
waiver is a warning, never a failure, and only when every file it could match was checked.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import Any

from dpguard import resources
from dpguard.codes import SILENCEABLE
from dpguard.errors import ConfigError
from dpguard.findings import Finding, WaiverNote
from dpguard.hints import hint
from dpguard.policy.model import Policies
from dpguard.yamlsource import YamlLoadError, load_file

SCHEMA_FILE = "waivers.schema.json"


@dataclass(frozen=True)
class Waiver:
    rule: str
    match: str
    reason: str
    owner: str
    expires: dt.date
    location: str  # file:line:col of the waiver
    on_change: bool = False  # its rule reads change.* facts: only a --baseline review judges it

    def matches(self, finding: Finding, root: Path | None, judged: str | None = None) -> bool:
        """Whether this waiver exempts `finding`. The glob is tried on the file the finding
        points into and on the file judged (`judged`): a config sourced by a manifest is
        judged as that manifest, so a waiver of `runs/*.yaml` covers the findings at the
        launch script's lines too."""
        if finding.code != self.rule:
            return False
        paths = {finding.path, judged or finding.path}
        if root is not None:
            paths |= {os.path.relpath(os.path.abspath(p), root).replace(os.sep, "/") for p in paths}
        return any(fnmatchcase(c, self.match) for c in paths)


@dataclass(frozen=True)
class Waivers:
    path: str
    items: tuple[Waiver, ...]
    today: dt.date
    root: Path | None = None  # the .dpguard.yaml directory, for relative matches

    def apply(
        self, findings: Iterable[Finding], judged: str | None = None
    ) -> tuple[tuple[Finding, ...], set[int]]:
        """Findings of the file `judged` with waivers applied, and the indexes of the waivers
        that matched (a finding another waivers file already waived is left as it is)."""
        used: set[int] = set()
        out = []
        for finding in findings:
            index = None
            if not finding.waived:
                index = next(
                    (i for i, w in enumerate(self.items) if w.matches(finding, self.root, judged)),
                    None,
                )
            if index is not None:
                used.add(index)
                waiver = self.items[index]
                if waiver.expires < self.today:
                    note = f" (waiver expired {waiver.expires.isoformat()})"
                    finding = replace(finding, message=finding.message + note)
                else:
                    which = WaiverNote(
                        waiver.reason, waiver.owner, waiver.expires.isoformat(), waiver.location
                    )
                    finding = replace(finding, waived=True, waiver=which)
            out.append(finding)
        return tuple(out), used

    def unused_warnings(
        self, used: set[int], checked: Iterable[str] | None = None, changes: bool = False
    ) -> list[str]:
        """Warnings for the waivers no finding used. With `checked` (the paths this call
        judged), only for waivers every file they could match was among them: a pre-commit
        run passes a few changed files, in batches, and a waiver of an unchanged file is not
        unused. None: every unused waiver (`--report-unused-waivers`). Without `changes` (a
        plain review, not --baseline) a waiver of a rule on change.* facts cannot have been
        used: no rule on those facts was judged, so it is not reported."""
        from dpguard.findings import relative_location

        unused = [
            (i, w)
            for i, w in enumerate(self.items)
            if i not in used and (changes or not w.on_change)
        ]
        if checked is not None and unused:
            seen = {os.path.abspath(p) for p in checked}
            files = self._files()
            unused = [
                (i, w)
                for i, w in unused
                if all(f in seen for f in files if fnmatchcase(self._relative(f), w.match))
            ]
        return [
            f"{relative_location(w.location)}: warning unused waiver for {w.rule} (match {w.match})"
            for _, w in unused
        ]

    def _relative(self, path: str) -> str:
        root = self.root if self.root is not None else Path.cwd()
        return os.path.relpath(path, root).replace(os.sep, "/")

    def _files(self) -> list[str]:
        """Every file under the waivers' root (the .dpguard.yaml directory), .git left out."""
        root = self.root if self.root is not None else Path.cwd()
        out = []
        for directory, subdirs, names in os.walk(root):
            subdirs[:] = [d for d in subdirs if d != ".git"]
            out += [os.path.abspath(os.path.join(directory, n)) for n in names]
        return out


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(resources.schema(SCHEMA_FILE))


def load_waivers(
    path: str, policies: Policies, today: dt.date, root: Path | None = None
) -> Waivers:
    """Read and check a waivers file against the loaded policies; every problem is listed."""
    from dpguard.policy.engine import reads_change
    from dpguard.validate import schema_problems

    try:
        doc = load_file(path)
    except YamlLoadError as exc:
        raise ConfigError(exc.message, f"{path}:{exc.position.line}:{exc.position.col}") from None

    def at(*keys: str | int) -> str:
        return doc.location(tuple(keys))

    problems = [f"{at(*p)}: {message}" for p, _code, message in schema_problems(_validator(), doc)]
    if problems:
        raise ConfigError("broken waivers file:\n  " + "\n  ".join(problems))
    limit = today + dt.timedelta(days=policies.max_waiver_days)
    items = []
    for index, data in enumerate(doc.data["waivers"]):
        rule = policies.get(data["rule"])
        if rule is None and data["rule"] not in SILENCEABLE:  # those: waivable as advisories
            known = hint(data["rule"], [*(r.id for r in policies.rules), *sorted(SILENCEABLE)])
            problems.append(
                f"{at('waivers', index, 'rule')}: waiver of unknown rule {data['rule']}{known}"
            )
        elif rule is not None and not rule.waivable:
            problems.append(
                f"{at('waivers', index, 'rule')}: rule {rule.id} is not waivable "
                f"({rule.kind} rules are waivable only when the policy says waivable: true)"
            )
        try:
            expires = dt.date.fromisoformat(data["expires"])
        except ValueError:
            problems.append(f"{at('waivers', index, 'expires')}: {data['expires']} is not a date")
            continue
        if expires > limit:
            problems.append(
                f"{at('waivers', index, 'expires')}: waiver expires {expires.isoformat()}, more "
                f"than {policies.max_waiver_days} days after {today.isoformat()} "
                f"(latest allowed: {limit.isoformat()})"
            )
        items.append(
            Waiver(
                data["rule"],
                data["match"],
                data["reason"],
                data["owner"],
                expires,
                at("waivers", index, "rule"),
                rule is not None and reads_change(rule),
            )
        )
    if problems:
        raise ConfigError("broken waivers file:\n  " + "\n  ".join(problems))
    return Waivers(path, tuple(items), today, root)
