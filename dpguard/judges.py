"""Who judges each file of one `review` (a step of dpguard.pipeline): the nearest .dpguard.yaml
above it (or `--config`), with that config's layered policies, waivers and fail_on. Manifests
under different configs in one call are each judged by their own, as ruff, ESLint and
yamllint do.

Every config, stack and waivers file the files need is loaded before any file is checked, so a
broken one stops the whole call (exit 2) before a report is half written."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpguard.config import Config
    from dpguard.policy.model import Policies
    from dpguard.policy.waivers import Waivers


@dataclass(frozen=True)
class Judge:
    config: Config
    policies: Policies
    waivers: Waivers | None
    fail_on: str


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
            waivers = None
            for owner, path in ((cfg.authority or cfg, cfg.waivers), (cfg, cfg.added_waivers)):
                if path:
                    more = load_waivers(path, policies, today, Path(owner.path).parent.resolve())
                    waivers = more if waivers is None else waivers.joined(more)
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
    if cfg.authority is not None:
        _only_adds(policies, cfg)
    return policies


def _only_adds(policies: Policies, cfg: Config) -> None:
    """A governed config's own policy sets add rules: one that overrides a rule or disables
    one is a configuration error (dpguard.config.governed)."""
    import os

    from dpguard.errors import ConfigError
    from dpguard.policy.load import expand

    added = {os.path.realpath(p) for p in expand(cfg.added_policies)}
    for policy_set in policies.sets:
        if os.path.realpath(policy_set.path) not in added:
            continue
        overriding = [r.id for r in policy_set.rules if r.override]
        if policy_set.disable or overriding:
            what = "disables" if policy_set.disable else "overrides"
            ids = ", ".join(policy_set.disable or tuple(overriding))
            raise ConfigError(
                f"{policy_set.path} {what} {ids}, but {cfg.path} is governed by "
                f"{cfg.authority.path if cfg.authority else ''} (governs: subtree): a nested "
                "config may add rules, not override or disable them"
            )


def unused_waiver_warnings(
    judge_of: Mapping[str, Judge], used: Mapping[str, set[int]], checked: Sequence[str] | None
) -> tuple[str, ...]:
    """The unused-waiver warnings of every config that judged a file (`checked`: see
    Waivers.unused_warnings)."""
    out: list[str] = []
    for judge in {j.config.path: j for j in judge_of.values()}.values():
        if judge.waivers is not None:
            hits = used.get(judge.config.path, set())
            out += judge.waivers.unused_warnings(hits, checked)
    return tuple(out)
