"""Who judges each file of one `review` (a step of dpguard.pipeline): the nearest .dpguard.yaml
above it (or `--config`), with that config's layered policies, waivers and fail_on. Manifests
under different configs in one call are each judged by their own, as ruff, ESLint and
yamllint do.

Every config, stack and waivers file the files need is loaded before any file is checked, so a
broken one stops the whole call (exit 2) before a report is half written."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dpguard.errors import ConfigError

if TYPE_CHECKING:
    from dpguard.config import Config, Layer
    from dpguard.findings import Finding
    from dpguard.policy.model import Policies, PolicySet
    from dpguard.policy.waivers import Waivers


@dataclass(frozen=True)
class Judge:
    config: Config
    policies: Policies
    waivers: tuple[Waivers, ...]  # the config's waivers file(s), applied in order
    fail_on: str

    def waive(
        self,
        findings: tuple[Finding, ...],
        used: dict[str, set[int]] | None,
        judged: str | None = None,
    ) -> tuple[Finding, ...]:
        """`findings` of the file `judged` with the waivers applied; the waivers that matched
        recorded in `used` (by waivers file, for the unused-waiver warnings), unless None."""
        for waivers in self.waivers:
            findings, hits = waivers.apply(findings, judged)
            if used is not None:
                merge_used(used, {waivers.path: hits})
        return findings


def judges(
    paths: Sequence[str],
    extra: Sequence[str],
    pin: str | None,
    fail_on: str | None,
    today: dt.date,
) -> tuple[dict[str, Judge], Judge | None]:
    """(the judge of each path, the judge of the current directory when there are no paths:
    its stack still names the policies in the report, and a broken one is still exit 2)."""
    from dpguard import config
    from dpguard.policy.waivers import load_waivers

    discovery = config.Discovery(pin)
    by_config: dict[str, Judge] = {}

    def judge_of(cfg: Config) -> Judge:
        if cfg.path not in by_config:
            policies = stack(extra, cfg)  # flags win: --policy layers after the config's sets
            root = (
                Path(cfg.authority).parent if cfg.authority else Path(cfg.path).parent
            ).resolve()
            owned = [(cfg.waivers, root, None)] + [
                (layer.waivers, Path(layer.path).parent.resolve(), layer) for layer in cfg.added
            ]
            waivers = tuple(
                _checked(load_waivers(path, policies, today, where), policies, layer)
                for path, where, layer in owned
                if path
            )
            by_config[cfg.path] = Judge(cfg, policies, waivers, fail_on or cfg.fail_on or "error")
        return by_config[cfg.path]

    per_path = {path: judge_of(discovery.for_file(path)) for path in paths}
    return per_path, (None if paths else judge_of(discovery.here()))


def stack(extra: Sequence[str], cfg: Config | None = None) -> Policies:
    """The layered stack of `cfg` (default: the .dpguard.yaml found from the current
    directory), with `extra` sets layered last."""
    from dpguard import config
    from dpguard.policy.load import load_policies

    cfg = config.discover() if cfg is None else cfg
    policies = load_policies([*cfg.policies, *extra], cfg.disable, cfg.disable_at)
    for layer in cfg.added:
        _only_adds(policies, layer, cfg.authority)
    return policies


def _checked(waivers: Waivers, policies: Policies, layer: Layer | None) -> Waivers:
    """`waivers` as loaded; when a config under a governing one (`layer`) owns them, they may
    waive only the rules that config's own sets add: the governing config's rules are waived
    in the governing config's waivers (config.governed)."""
    if layer is None:
        return waivers
    own = {r.id for s in _added_sets(policies, layer) for r in s.rules}
    foreign = sorted({w.rule for w in waivers.items if w.rule not in own})
    if foreign:
        raise ConfigError(
            f"{waivers.path} waives {', '.join(foreign)}, but {layer.path} is under a governing "
            "config (governs: subtree): its waivers may waive only the rules its own policy "
            "sets add"
        )
    return waivers


def _added_sets(policies: Policies, layer: Layer) -> list[PolicySet]:
    """The policy sets `layer` adds."""
    from dpguard.policy.load import expand

    added = {os.path.realpath(p) for p in expand(layer.policies)}
    return [s for s in policies.sets if os.path.realpath(s.path) in added]


def _only_adds(policies: Policies, layer: Layer, authority: str) -> None:
    """The sets a config under a governing one adds: new rules only. One that overrides a
    rule, disables one or sets settings (headroom, waiver days) is a configuration error."""
    for policy_set in _added_sets(policies, layer):
        overriding = [r.id for r in policy_set.rules if r.override]
        problem = (
            f"disables {', '.join(policy_set.disable)}"
            if policy_set.disable
            else f"overrides {', '.join(overriding)}"
            if overriding
            else "sets settings"
            if policy_set.settings or policy_set.max_waiver_days is not None
            else None
        )
        if problem:
            raise ConfigError(
                f"{policy_set.path} {problem}, but {layer.path} is governed by {authority} "
                "(governs: subtree): a nested config may add rules, not override or disable "
                "them or change the settings that judge them"
            )


def merge_used(into: dict[str, set[int]], more: Mapping[str, set[int]]) -> None:
    """The waiver hits `more` recorded (a file judged apart, in a worker) added to `into`."""
    for waivers, hits in more.items():
        into.setdefault(waivers, set()).update(hits)


def unused_waiver_warnings(
    judge_of: Mapping[str, Judge],
    used: Mapping[str, set[int]],
    checked: Sequence[str] | None,
    changes: bool = False,
) -> tuple[str, ...]:
    """The unused-waiver warnings of every waivers file that judged a file, once each (a
    governing config's file serves several configs; `used` is keyed by waivers file; `checked`
    and `changes` (a --baseline review): see Waivers.unused_warnings)."""
    files = {w.path: w for judge in judge_of.values() for w in judge.waivers}
    out: list[str] = []
    for path, waivers in files.items():
        out += waivers.unused_warnings(used.get(path, set()), checked, changes)
    return tuple(out)
