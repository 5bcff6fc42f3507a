"""Load, check and layer policy sets. Policies fail closed: every problem is reported with its
``file:line:col`` and the whole load fails (`PolicyError`, exit code 2), because a policy that
cannot judge must never pass a manifest vacuously."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path as FsPath
from typing import Any

from dpguard import cache as dpguard_cache
from dpguard import resources
from dpguard.codes import SILENCEABLE
from dpguard.errors import ConfigError, InputError
from dpguard.findings import Severity
from dpguard.frameworks import profiles
from dpguard.hints import hint
from dpguard.policy import templates
from dpguard.policy.conditions import ConditionProblem, leaves, parse
from dpguard.policy.facts import ALWAYS_SET, LATE_FACTS, spec_of
from dpguard.policy.model import Policies, PolicySet, Rule
from dpguard.policy.reach import unreachable_rows
from dpguard.yamlsource import Path, SourceDoc, YamlLoadError, decoded, load_text, read_regular

SCHEMA_FILE = "policy.schema.json"
DEFAULT_MAX_WAIVER_DAYS = 90
REQUIRED_SETTINGS = (
    "memory_headroom",
    "memory_uncertainty",
    "op_time_ratios",
    "efficiency",
    "planner",
    "rollback",
    "all_to_all_kernels",
)


class PolicyError(ConfigError):
    """One or more problems in policy files; each line is ``file:line:col: message``."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("broken policy:\n  " + "\n  ".join(self.problems))


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(resources.schema(SCHEMA_FILE))


def _schema_problems(doc: SourceDoc) -> list[str]:
    from dpguard.validate import schema_problems

    out = []
    for path, _code, message in schema_problems(_validator(), doc):
        # Conditions get precise messages from the condition parser instead of oneOf noise.
        if path[:1] == ("rules",) and "when" in path[2:]:
            continue
        out.append(f"{doc.location(path)}: {message}")
    return out


def _rule(
    doc: SourceDoc, index: int, data: dict[str, Any], set_name: str, lint: bool = True
) -> tuple[Rule | None, list[str]]:
    base: Path = ("rules", index)
    kind = data["kind"]
    # Decision rows and refusals run before the facts in LATE_FACTS exist.
    late = LATE_FACTS if kind in ("decision", "refuse") else frozenset()
    problems = [
        f"{doc.location((*base, 'message'))}: message {problem}"
        for problem in dict.fromkeys(templates.check_message(data["message"], late) if lint else ())
    ]
    try:
        when = parse(data["when"], (*base, "when"), late)
    except ConditionProblem as exc:
        return None, [f"{doc.location(exc.path)}: {exc}", *problems]
    first_fact = next((leaf.fact for leaf in leaves(when)), "")
    at = data.get("at", first_fact)
    if spec_of(at) is None:
        problems.append(f"{doc.location((*base, 'at'))}: unknown fact {at!r} in at")
    severity = data.get("severity")
    rule = Rule(
        id=data["id"],
        kind=kind,
        title=data["title"],
        severity=Severity(severity) if severity else None,
        when=when,
        message=data["message"],
        docs=data["docs"],
        waivable=data.get("waivable", kind != "reject"),
        at=at,
        recommend=data.get("recommend", {}).get("schedule"),
        acceptable=tuple(data.get("acceptable", ())),
        refuses=tuple(data.get("refuses", ())),
        precedence=data.get("precedence", 0),
        override=data.get("override", False),
        policy=set_name,
        location=doc.location(base),
    )
    return rule, problems


def _validated_key(raw: bytes) -> tuple[str, bytes, bytes]:
    """The cache entry that records that these exact policy bytes loaded without a problem, so
    that later processes skip the schema validation and the message-template lint (~60 ms).
    Keyed by the policy schema and the file's bytes: any change revalidates."""
    return ("validated-policies", resources.schema_text(SCHEMA_FILE).encode(), raw)


def load_set(path: str) -> tuple[PolicySet | None, list[str]]:
    """Parse one policy file; returns the set (None if unusable) and its problems."""
    try:
        raw = read_regular(path)  # once: the document and the digest come from the same bytes
        doc = load_text(decoded(raw), path)
    except YamlLoadError as exc:
        return None, [f"{path}:{exc.position.line}:{exc.position.col}: {exc.message}"]
    validated = _validated_key(raw)
    trusted = dpguard_cache.vouched(*validated)
    problems = [] if trusted else _schema_problems(doc)
    if problems:
        return None, problems
    data = doc.data
    name = data["metadata"]["name"]
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for index, rule_data in enumerate(data["rules"]):
        rule, rule_problems = _rule(doc, index, rule_data, name, lint=not trusted)
        problems += rule_problems
        if rule is None:
            continue
        if rule.id in seen:
            problems.append(
                f"{rule.location}: duplicate rule id {rule.id} (first at {seen[rule.id]})"
            )
            continue  # reported once here, not again as an override without override: true
        seen[rule.id] = rule.location
        rules.append(rule)
    settings = data.get("settings", {})
    if "op_time_ratios" in settings:
        # The schema types the ratios; whether they are physical (W < B, F&B within
        # [max(F, B), F + B]) is the simulator's rule, checked here so a bad set fails to load
        # with its position instead of failing the first review that simulates.
        problems += [
            f"{doc.location(('settings', 'op_time_ratios'))}: op_time_ratios: {problem}"
            for problem in _ratio_problems(settings["op_time_ratios"])
        ]
    for table in ("efficiency", "cost_per_gpu_hour"):
        # keyed by accelerator: a key no manifest can carry would silently fall to `default`
        if isinstance(settings.get(table), dict):
            problems += [
                f"{doc.location(('settings', table, key))}: {table}: {problem}"
                for key, problem in _accelerator_key_problems(settings[table])
            ]
    policy_set = PolicySet(
        name=name,
        version=data["metadata"]["version"],
        digest="sha256:" + hashlib.sha256(raw).hexdigest()[:16],
        path=path,
        rules=tuple(rules),
        disable=tuple(settings.get("disable", ())),
        disable_at=tuple(
            doc.location(("settings", "disable", i))
            for i in range(len(settings.get("disable", ())))
        ),
        max_waiver_days=settings.get("max_waiver_days"),
        settings={k: v for k, v in settings.items() if k not in ("disable", "max_waiver_days")},
    )
    if not trusted and not problems:
        dpguard_cache.vouch(*validated)
    return policy_set, problems


def _accelerator_key_problems(table: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Keys of a per-accelerator table that no manifest's accelerator can match: manifests are
    normalised to the catalog id (or `custom`)."""
    from dpguard.catalog import load_catalog

    catalog = load_catalog()
    for key in table:
        if key in ("default", "currency", "sources"):
            continue
        canonical = catalog.canonical(key)
        if canonical is None:
            yield key, f"unknown accelerator {key!r}{catalog.hint(key)}"
        elif canonical != key:
            yield key, f"{key!r} is {canonical!r} in the catalog: write {canonical!r}"


def _ratio_problems(ratios: dict[str, Any]) -> tuple[str, ...]:
    from dpguard.schedules import ConstraintError, OpTimes

    try:
        OpTimes(1, ratios["backward"], ratios["weight"], ratios["overlapped"])
    except ConstraintError as exc:
        return exc.violations
    return ()


def expand(paths: Iterable[str]) -> list[str]:
    """Files as given; directories contribute their *.yaml files in name order."""
    out: list[str] = []
    for path in paths:
        p = FsPath(path)
        if p.is_dir():
            out += sorted(str(f) for f in p.glob("*.yaml") if f.is_file())
        elif p.is_file():
            out.append(path)
        else:
            raise InputError(f"{path}: no such policy file or directory")
    return out


def shipped_paths() -> list[str]:
    root = resources.packaged("dpguard.policies")
    return sorted(
        str(root / entry.name) for entry in root.iterdir() if entry.name.endswith(".yaml")
    )


def layer(sets: Sequence[PolicySet]) -> tuple[Policies, list[str]]:
    """Apply sets in order: later sets add rules, override by id only with `override: true`,
    and disable rules by id."""
    problems: list[str] = []
    rules: dict[str, Rule] = {}
    silenced: set[str] = set()
    for policy_set in sets:
        for rule in policy_set.rules:
            if rule.id in rules and not rule.override:
                problems.append(
                    f"{rule.location}: rule {rule.id} is already defined by "
                    f"{rules[rule.id].policy} ({rules[rule.id].location}); set override: true "
                    "to replace it"
                )
                continue
            if rule.override and rule.id not in rules:
                problems.append(
                    f"{rule.location}: override of {rule.id}, which no earlier set defines"
                )
            rules[rule.id] = (
                rule  # dict keeps the first insertion position: overrides stay in place
            )
        for i, rule_id in enumerate(policy_set.disable):
            if rule_id in SILENCEABLE:
                silenced.add(rule_id)
            elif rules.pop(rule_id, None) is None:
                where = policy_set.disable_at[i] if i < len(policy_set.disable_at) else ""
                problems.append(
                    f"{where or policy_set.path}: disable names unknown rule {rule_id}"
                    f"{hint(rule_id, rules)}"
                )
    effective = tuple(rules.values())
    # On the layered table: a team's row can be shadowed by a shipped row, and disabling a
    # shipped row can make a row reachable again.
    decisions = [r for r in effective if r.kind == "decision"]
    for row, winners in unreachable_rows(decisions, ALWAYS_SET):
        if len(winners) == 1:
            why = f"the earlier row {winners[0].id} ({winners[0].location}) always wins"
        else:
            named = ", ".join(f"{w.id} ({w.location})" for w in winners)
            why = f"the earlier rows {named} together match every manifest it matches"
        problems.append(f"{row.location}: decision row {row.id} can never match: {why}")
    from dpguard.policy.domains import never_true  # imports this module's neighbours

    for rule in effective:
        if never_true(rule):
            problems.append(
                f"{rule.location}: rule {rule.id} can never fire: its condition contradicts "
                "itself (no value of its facts satisfies every test of any branch)"
            )
    settings: dict[str, Any] = {}
    for policy_set in sets:
        settings.update(policy_set.settings)
    missing = sorted(set(REQUIRED_SETTINGS) - set(settings))
    if missing:
        problems.append(f"no policy set provides the settings: {', '.join(missing)}")
    days = [s.max_waiver_days for s in sets if s.max_waiver_days is not None]
    if not any(r.kind == "decision" for r in effective):
        problems.append("no decision rules are loaded: dpguard cannot recommend a schedule")
    policies = Policies(
        tuple(sets),
        effective,
        days[-1] if days else DEFAULT_MAX_WAIVER_DAYS,
        settings,
        _uses(effective),
        frozenset(silenced),
    )
    return policies, problems


def _uses(rules: Sequence[Rule]) -> frozenset[str]:
    """Every fact path the rules read, in conditions and in messages."""
    used: set[str] = set()
    for rule in rules:
        used.update(leaf.fact for leaf in leaves(rule.when))
    return frozenset(used | _message_facts(tuple(rule.message for rule in rules)))


def _message_facts(messages: tuple[str, ...]) -> set[str]:
    """The facts the message templates read. Parsing them needs Jinja (~20 ms a process with
    its import), so the answer is remembered in the per-user cache, keyed by the messages."""
    key = "\0".join(messages).encode()
    known = dpguard_cache.recall("message-facts", key)
    if known is not None:
        return set(filter(None, known.split("\n")))
    found: set[str] = set()
    for message in messages:
        with contextlib.suppress(Exception):  # a broken message is reported by its own check
            found.update(templates.referenced_facts(message))
    dpguard_cache.remember("message-facts", "\n".join(sorted(found)), key)
    return found


def load_policies(
    extra: Sequence[str] = (), disable: Sequence[str] = (), disable_at: Sequence[str] = ()
) -> Policies:
    """The shipped sets, then `extra` sets in order, then the ids in `disable` (from
    .dpguard.yaml; `disable_at` their ``file:line:col``); raises PolicyError listing every
    problem."""
    problems: list[str] = []
    sets: list[PolicySet] = []
    # A file named twice (e.g. `lint-policies policies/core.yaml`, a shipped set) is loaded
    # once: layered over itself, every rule would clash with its own id.
    paths: dict[str, str] = {}
    shipped = shipped_paths()
    for path in [*shipped, *expand(extra)]:
        paths.setdefault(os.path.realpath(path), path)
    team: list[tuple[str, str]] = []
    for path in paths.values():
        profile_text = None if path in shipped else _profile_text(path)
        if profile_text is not None:
            team.append((path, profile_text))
            continue
        policy_set, set_problems = load_set(path)
        problems += set_problems
        if policy_set is not None:
            sets.append(policy_set)
    if disable:
        # The config's disable list judges too, so the report names it with its own digest.
        listed = ",".join(sorted(disable)).encode()
        digest = "sha256:" + hashlib.sha256(listed).hexdigest()[:16]
        name = "dpguard-config-disable"
        sets.append(
            PolicySet(name, "local", digest, ".dpguard.yaml", (), tuple(disable), tuple(disable_at))
        )
    policies, layer_problems = layer(sets)
    problems += layer_problems
    if team:
        try:  # checked with the shipped ones: names, `extends`, every trait
            profiles.with_team(tuple(team))
        except ConfigError as exc:
            problems.append(str(exc))
        policies = replace(policies, profiles=tuple(team))
    if problems:
        raise PolicyError(by_position(problems, list(paths.values())))
    return policies


def _profile_text(path: str) -> str | None:
    """The text of a framework profile file (`kind: FrameworkProfile`) among the policy files,
    None for anything else (a policy set, or what load_set reports as broken)."""
    try:
        raw = read_regular(path)
        if b"FrameworkProfile" not in raw:  # a policy set: parsed once, by load_set
            return None
        text = decoded(raw)
        data = load_text(text, path).data
    except (YamlLoadError, InputError):
        return None
    return text if isinstance(data, dict) and data.get("kind") == "FrameworkProfile" else None


_POSITION = re.compile(r"^(.*?):(\d+):(\d+): ")


def by_position(problems: Sequence[str], files: Sequence[str] = ()) -> list[str]:
    """Problems in reading order: file by file (`files` in the order they were layered, then
    any other file, such as .dpguard.yaml, by name), by line and column within each; problems
    without a position (missing settings, no decision rows) last, as they were. The first
    error in a file often causes the later ones, so it must come first."""
    order = {name: i for i, name in enumerate(files)}

    def key(item: tuple[int, str]) -> tuple[int, int, str, int, int, int]:
        index, problem = item
        match = _POSITION.match(problem)
        if match is None:
            return (2, 0, "", 0, 0, index)
        name, line, col = match[1], int(match[2]), int(match[3])
        known = name in order
        return (0 if known else 1, order.get(name, 0), name, line, col, index)

    return [problem for _, problem in sorted(enumerate(problems), key=key)]
