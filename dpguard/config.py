"""`.dpguard.yaml`: a repository's dpguard settings, found for each manifest by walking up from
the file's directory to the repository root (a directory containing ``.git``), never above it,
or to the filesystem root outside a repository; the nearest file wins, as in ruff, ESLint and
yamllint. ``--config PATH`` pins one file for every manifest. Commands without files (``rules``,
``explain``, ``lint-policies``) walk up from the current directory.

Keys (schemas/config.schema.json): ``policies`` (paths relative to the config file), ``disable``
(rule ids), ``waivers`` (path), ``fail_on`` (error|warning), ``defaults`` (manifest keys for
framework configs, by glob). Command-line flags win.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from dpguard import resources
from dpguard.confine import Outside, confined
from dpguard.errors import ConfigError
from dpguard.yamlsource import SourceDoc, YamlLoadError, load_file, root_scalars

FILENAME = ".dpguard.yaml"
SCHEMA_FILE = "config.schema.json"


@dataclass(frozen=True)
class Layer:
    """What one config under a governing one adds."""

    path: str
    policies: tuple[str, ...]
    waivers: str | None


@dataclass(frozen=True)
class Config:
    path: str  # the config file ("" when none was found)
    policies: tuple[str, ...] = ()  # resolved against the config file's directory
    disable: tuple[str, ...] = ()
    disable_at: tuple[str, ...] = ()  # file:line:col of each disable entry
    waivers: str | None = None
    fail_on: str | None = None
    defaults: tuple[tuple[str, SourceDoc], ...] = ()  # (glob, manifest keys) per entry
    governs: bool = False  # `governs: subtree`: configs below may only add to it
    # Below a governing config: the configs that only add (governing configs under the
    # topmost one, then the nearest), each (its path, its policy files, its waivers file),
    # layered over the topmost governing config's (`governed`; checked by dpguard.judges)
    authority: str = ""  # the topmost governing config's path
    added: tuple[Layer, ...] = ()

    def defaults_for(self, path: str) -> tuple[SourceDoc, ...]:
        """The `defaults:` entries whose glob matches `path`, in file order."""
        if not self.defaults:
            return ()
        try:
            relative = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return ()  # outside the configured tree
        return tuple(
            doc
            for pattern, doc in self.defaults
            if fnmatch.fnmatchcase(relative, pattern)
            or ("/" not in pattern and fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern))
        )

    @property
    def root(self) -> Path:
        return Path(self.path).parent if self.path else Path.cwd()


NO_CONFIG = Config("")


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(resources.schema(SCHEMA_FILE))


def find(start: Path | None = None) -> Path | None:
    """The nearest `.dpguard.yaml` from `start` up to the git root or the filesystem root."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / FILENAME
        if candidate.is_file():
            return candidate
        if (directory / ".git").exists():
            return None
    return None


def load(path: Path) -> Config:
    """Read and schema-check one config file; problems raise ConfigError (exit 2)."""
    from dpguard.validate import schema_problems

    name = str(path)
    try:
        doc = load_file(name)
    except YamlLoadError as exc:
        raise ConfigError(exc.message, f"{name}:{exc.position.line}:{exc.position.col}") from None
    problems = []
    for where, _code, message in schema_problems(_validator(), doc):
        problems.append(f"{doc.location(where)}: {message}")
    if problems:
        raise ConfigError("broken configuration:\n  " + "\n  ".join(problems))
    data = doc.data
    base = path.parent
    waivers = data.get("waivers")
    pointed = [(("policies", i), p) for i, p in enumerate(data.get("policies", ()))]
    for where, value in [*pointed, *([(("waivers",), waivers)] if waivers else [])]:
        target = str(base / value)
        # a directory's files too: a link in it must not lead out either
        files = sorted(str(f) for f in Path(target).glob("*.yaml")) if Path(target).is_dir() else []
        try:  # a .dpguard.yaml may come with a pull request: it reads only inside the repository
            for each in (target, *files):
                confined(each, name, f"{where[0]}: {str(value)[:80]!r}")
        except Outside as exc:
            raise ConfigError(str(exc), doc.location(where)) from None
    return Config(
        path=name,
        policies=tuple(str(base / p) for p in data.get("policies", ())),
        disable=tuple(data.get("disable", ())),
        disable_at=tuple(doc.location(("disable", i)) for i in range(len(data.get("disable", ())))),
        waivers=str(base / waivers) if waivers else None,
        fail_on=data.get("fail_on"),
        defaults=tuple(_defaults(doc)),
        governs=data.get("governs") == "subtree",
    )


# fail_on from the strictest: a config under a governing one may only move up this list
_STRICTNESS = ("never", "error", "warning")


def governed(chain: list[Config]) -> Config:
    """The nearest config (`chain[-1]`) as it judges under the topmost governing config above
    it (`chain[0]`, ``governs: subtree``), with the governing configs between them in order:
    the topmost one's policies, disable list, waivers and fail_on stand; each config below
    adds policy sets and a waivers file, and may make fail_on stricter. Disabling a rule or
    loosening fail_on is a configuration error naming both files: a pull request that adds a
    config in its own directory must not silence the team's rules there (what its sets and
    waivers may do is checked when they load, dpguard.judges)."""
    top, fail_on, added = chain[0], chain[0].fail_on, []
    for nested in chain[1:]:
        where = f"{nested.path} is governed by {top.path} (governs: subtree)"
        if nested.disable:
            raise ConfigError(
                f"{where}: a nested config may add policies and waivers, not disable rules",
                nested.disable_at[0] if nested.disable_at else nested.path,
            )
        theirs = fail_on or "error"
        if nested.fail_on and _STRICTNESS.index(nested.fail_on) < _STRICTNESS.index(theirs):
            raise ConfigError(
                f"{where}: fail_on {nested.fail_on} is looser than the governing fail_on {theirs}"
            )
        fail_on = nested.fail_on or fail_on
        added.append(Layer(nested.path, nested.policies, nested.waivers))
    nearest = chain[-1]
    return replace(
        top,
        path=nearest.path,
        policies=tuple(p for c in chain for p in c.policies),
        fail_on=fail_on,
        defaults=nearest.defaults,  # facts about the files: the nearest config's, as without
        governs=nearest.governs,
        authority=top.path,
        added=tuple(added),
    )


def _declares_governs(path: Path) -> bool:
    """A peek at the root `governs` key; a file that cannot be peeked at is loaded (and its
    problem reported) rather than taken for one that governs nothing."""

    keys = root_scalars(str(path), ("governs",))
    return keys is None or keys.get("governs") == "subtree"


def _defaults(doc: SourceDoc) -> list[tuple[str, SourceDoc]]:
    """Each `defaults:` entry's manifest keys as a document of their own, keeping their
    positions in the config file (a finding about a default points there, by the path the
    reports show: relative to the current directory, as the files given are, so a CI
    annotation names the repository's file and not the runner's absolute path)."""
    out = []
    name = display(doc.name)
    for i, entry in enumerate(doc.data.get("defaults", ())):
        prefix = ("defaults", i, "manifest")
        keys = {p[3:]: at for p, at in doc.keys.items() if p[:3] == prefix and len(p) > 3}
        values = {p[3:]: at for p, at in doc.values.items() if p[:3] == prefix and len(p) > 3}
        out.append((entry["files"], SourceDoc(name, entry["manifest"], keys, values)))
    return out


def discover(start: Path | None = None) -> Config:
    """The repository's config, or NO_CONFIG when there is none."""
    path = find(start)
    return load(path) if path is not None else NO_CONFIG


def pinned(path: str) -> Config:
    """The config `--config PATH` names, for every file; a missing one cannot be guessed around."""
    target = Path(path)
    if not target.is_file():
        raise ConfigError(f"{path}: no such config file (--config)")
    return load(target.resolve())


class Discovery:
    """The config for each file of one command: `--config` when given, else the nearest
    `.dpguard.yaml` above the file. Each directory is walked and each config file loaded once
    per call, never cached across calls (a test or a long-lived caller may edit them)."""

    def __init__(self, pin: str | None = None) -> None:
        self._pinned = pinned(pin) if pin else None
        self._found: dict[Path, Path | None] = {}
        self._raw: dict[Path, Config] = {}  # each file as written
        self._loaded: dict[Path, Config] = {}  # as it judges (under its authority, if any)

    def for_file(self, path: str) -> Config:
        if self._pinned is not None:
            return self._pinned
        target = Path(path)
        directory = (target if target.is_dir() else target.parent).resolve()
        if directory not in self._found:
            self._found[directory] = find(directory)
        found = self._found[directory]
        if found is None:
            return NO_CONFIG
        if found not in self._loaded:
            nearest = self._load(found)
            chain = [*self._governing(found.parent), nearest]
            self._loaded[found] = governed(chain) if len(chain) > 1 else nearest
        return self._loaded[found]

    def _load(self, path: Path) -> Config:
        if path not in self._raw:
            self._raw[path] = load(path)
        return self._raw[path]

    def _governing(self, directory: Path) -> list[Config]:
        """The configs above `directory` (up to the repository root) that declare
        ``governs: subtree``, topmost first. The others are not loaded: a config the nearest
        one shadows is not read (a peek at its `governs` key only)."""
        found: list[Config] = []
        if (directory / ".git").exists():
            return found  # the nearest config is the repository's own
        for above in directory.parents:
            candidate = above / FILENAME
            if candidate.is_file() and _declares_governs(candidate):
                found.insert(0, self._load(candidate))
            if (above / ".git").exists():
                break
        return found

    def here(self) -> Config:
        """The config for a command without files: pinned, else found from the current directory."""
        return self._pinned if self._pinned is not None else self.for_file(str(Path.cwd()))


def display(path: str) -> str:
    """A config path as reports show it: relative to the current directory when under it."""
    if not path:
        return "none"
    try:
        return Path(path).relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path
