"""Framework profiles: what each training framework runs, as data (policies/frameworks/*.yaml).

A profile names the pipeline schedules the framework runs, the runtime traits that set memory
(the gradient buffer's dtype, kept 16-bit gradients, FP8 weight caches, the attention kernel,
the loss, the TP and PP implementations), what it overlaps, the `plan --emit` format that writes
its config and the policy rules that mirror its launch-time checks. `extends` makes a variant
(NeMo, Megatron-Bridge, FlagScale over Megatron-core) that replaces its parent key by key.

A team adds its own profiles (an internal fork, a pinned version) without Python: profile files
listed among a `.dpguard.yaml`'s (or `--policy`'s) policy files join the shipped ones for the
manifests that config judges (`using`), under new names; `extends` may name a shipped one.

A trait a profile leaves out does not exist in that framework: the mechanism's neutral value
(`TRAITS`) applies, and a manifest may not override it (`manifest.runtime`). A broken profile is
dpguard's own broken data: `ConfigError`, exit 2.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache, lru_cache
from types import MappingProxyType
from typing import Any

import yaml

from dpguard import cache as user_cache
from dpguard import resources
from dpguard.errors import ConfigError
from dpguard.yamlsource import YamlLoadError, load_text

PACKAGE = "dpguard.policies"
FOLDER = "frameworks"
SCHEMA_FILE = "profile.schema.json"

# The runtime traits and their neutral value: what a framework without the mechanism does
# (no Transformer Engine: no FP8 weight cache and no transpose cache; no BF16_Optimizer: no
# kept bf16 gradients). Their meaning is documented in schemas/manifest.schema.json `runtime`.
TRAITS: Mapping[str, Any] = MappingProxyType(
    {
        "main_grad_dtype": "fp32",
        "bf16_grads_kept": False,
        "fp8_weight_cache": False,
        "fp8_param_gather": False,
        "parameter_transpose_cache": False,
        "flash_attention": True,
        "cross_entropy": "fused",
        "tensor_parallel_impl": "megatron",
        "pipeline_parallel_impl": "megatron",
        "fsdp_gradient_sync": "per_microbatch",
        "master_weights": "fp32",
    }
)


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    source: str
    default: bool
    schedules: tuple[str, ...]  # dpguard's names, in the profile's order
    traits: Mapping[str, Any]  # only the traits the framework has
    trait_sources: Mapping[str, str]
    # trait -> (the framework's flag that changes it, the value it sets)
    trait_switches: Mapping[str, tuple[str, Any]]
    overlap: Mapping[str, bool]  # communication kind -> overlapped by default
    # communication kind -> the only schedules under which it is overlapped (the rest: all)
    overlap_schedules: Mapping[str, tuple[str, ...]]
    emit: str | None
    validations: tuple[str, ...]
    sharded_gathers_per_layer: int = 1  # ZeRO-3 / FSDP collectives per layer and pass
    # process groups beyond one per parallel dimension (`process_groups`): groups over the
    # tensor-parallel ranks, and a model-parallel group for the gradient norm
    tensor_groups: int = 1
    model_parallel_group: bool = False
    # the routed experts' tensor-parallel size when a manifest writes none (`expert_tensor`):
    # the tensor size where it divides (Megatron-LM's default), else 1
    expert_tensor_follows_tensor: bool = True
    # the only expert tensor sizes the framework accepts (`expert_tensor.choices`: 1 and
    # "tensor"), where it refuses others at launch; empty: any
    expert_tensor_choices: tuple[int | str, ...] = ()
    path: str = ""  # the file it is defined in (policies/frameworks/NAME.yaml, or a team's)
    reads: str | None = None  # a team profile: the shipped framework whose configs it judges

    def runtime(
        self, overrides: Mapping[str, Any] = MappingProxyType({}), stated: bool = True
    ) -> dict[str, Any]:
        """Every trait's value for this framework: the profile's, the neutral value where it
        has none, then `overrides`: of the traits it has when the framework is `stated` (the
        manifest checks that, X034), of any trait when this profile is only assumed."""
        values = {name: self.traits.get(name, neutral) for name, neutral in TRAITS.items()}
        values.update({k: v for k, v in overrides.items() if k in self.traits or not stated})
        return values

    def switched(self, written: Sequence[str]) -> dict[str, Any]:
        """The traits a run can change by the framework's own flags (`trait_switches`) that
        the manifest leaves unset (not in `written`), at the values those flags set."""
        return {k: v for k, (_, v) in self.trait_switches.items() if k not in written}

    def runs(self, schedule: str) -> bool:
        return schedule in self.schedules


@cache
def _shipped() -> tuple[Mapping[str, tuple[str, dict[str, Any]]], Mapping[str, Profile]]:
    """The shipped profiles' checked data and the profiles, validated and with `extends`
    resolved, once per process."""
    files = sorted(
        e.name for e in resources.packaged(PACKAGE, FOLDER).iterdir() if e.name.endswith(".yaml")
    )
    texts = [resources.read_text(PACKAGE, f"{FOLDER}/{name}") for name in files]
    # Parsing and checking them costs ~10 ms a process: the checked data is remembered as JSON
    # under the digest of these very files and their schema (dpguard.cache.remembered_json)
    key = (resources.schema_text(SCHEMA_FILE).encode(), *(t.encode() for t in texts))

    def use(
        raw: Mapping[str, Any],
    ) -> tuple[dict[str, tuple[str, dict[str, Any]]], Mapping[str, Profile]]:
        checked = {name: (where, data) for name, (where, data) in raw.items()}
        return checked, _assembled(checked)

    return user_cache.remembered_json("profiles", key, lambda: _checked(files, texts), use)


# A team's profile files ((where, text) each) in effect for the manifest being judged: those
# its config's policy stack lists (`using`); none outside a judgement
_TEAM: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("team_profiles", default=())
# every team profile assembled in this process, by name: a page rendered after its judgement
# (a plan's alternatives, its rollback target) still finds the profile its manifest names
_SEEN: dict[str, Profile] = {}


def load_profiles() -> Mapping[str, Profile]:
    """Every profile by name: the shipped ones, and the team's in effect (`using`)."""
    team = _TEAM.get()
    return with_team(team) if team else _shipped()[1]


@lru_cache(maxsize=16)
def with_team(team: tuple[tuple[str, str], ...]) -> Mapping[str, Profile]:
    """The shipped profiles and a team's (`(where, text)` each), checked together: a team
    profile has a new name, is not the default and may extend any of them."""
    shipped, _ = _shipped()
    raw = dict(shipped)
    for where, text in team:
        data = _validated(text, where)
        name = data["metadata"]["name"]
        if name in raw:
            raise ConfigError(
                f"profile {name!r} is defined twice (also {raw[name][0]}): a team profile "
                "takes a new name and may extend the one it changes",
                where,
            )
        if data["metadata"].get("default"):
            raise ConfigError("a team profile cannot be the default (metadata.default)", where)
        _check_reads(data["metadata"].get("reads"), shipped, raw, where)
        raw[name] = (where, data)
    out = _assembled(raw)
    _SEEN.update({name: out[name] for name in raw if name not in shipped})
    return out


def _check_reads(
    reads: str | None,
    shipped: Mapping[str, tuple[str, dict[str, Any]]],
    raw: Mapping[str, tuple[str, dict[str, Any]]],
    where: str,
) -> None:
    """A team profile's `metadata.reads` names a shipped profile no other team profile reads."""
    if reads is None:
        return
    if reads not in shipped:
        raise ConfigError(
            f"metadata.reads names no shipped profile: {reads!r} (shipped: {', '.join(shipped)})",
            where,
        )
    for other, (there, data) in raw.items():
        if other not in shipped and data["metadata"].get("reads") == reads:
            raise ConfigError(f"{reads!r} configs are read as {other!r} already ({there})", where)


def read_as(framework: str) -> str:
    """The profile that judges the configs `framework`'s reader reads: the team profile in
    effect that `reads` them (a fork run from the same launch scripts), else `framework`."""
    if not _TEAM.get():
        return framework
    return next((p.name for p in load_profiles().values() if p.reads == framework), framework)


def team() -> tuple[tuple[str, str], ...]:
    """The team profiles in effect ((where, text) each)."""
    return _TEAM.get()


def activate(team: Sequence[tuple[str, str]]) -> None:
    """The team's profiles join the shipped ones for the rest of this command: one that judges
    a single config's files (plan, memory, perf, test) and prices after judging."""
    if team:
        _TEAM.set(tuple(team))


@contextmanager
def using(team: Sequence[tuple[str, str]]) -> Iterator[None]:
    """The team's profiles join the shipped ones within the block (a no-op without any)."""
    if not team:
        yield
        return
    token = _TEAM.set(tuple(team))
    try:
        yield
    finally:
        _TEAM.reset(token)


def _checked(files: list[str], texts: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each profile's checked data by name, with the file it came from."""
    raw: dict[str, tuple[str, dict[str, Any]]] = {}
    for entry, text in zip(files, texts, strict=True):
        where = f"policies/{FOLDER}/{entry}"
        data = _validated(text, where)
        name = data["metadata"]["name"]
        if name in raw:
            raise ConfigError(f"profile {name!r} is defined twice", where)
        if "reads" in data["metadata"]:
            raise ConfigError("metadata.reads is for a team profile (its fork's configs)", where)
        raw[name] = (where, data)
    return raw


def _assembled(raw: Mapping[str, tuple[str, dict[str, Any]]]) -> Mapping[str, Profile]:
    """The profiles of checked data, `extends` resolved; exactly one is the default."""
    if not raw:
        raise ConfigError(f"no framework profile in policies/{FOLDER}")
    profiles = {name: _build(name, raw) for name in raw}
    defaults = [p.name for p in profiles.values() if p.default]
    if len(defaults) != 1:
        raise ConfigError(
            f"exactly one framework profile must set metadata.default (found {defaults or 'none'})",
            f"policies/{FOLDER}",
        )
    return MappingProxyType(profiles)


def default_profile() -> Profile:
    """The most common framework: the central estimate of a manifest that names none."""
    return next(p for p in load_profiles().values() if p.default)


def profile(name: str | None) -> Profile:
    """The named profile, or the default one for None (X032 admits known names only)."""
    if name is None:
        return default_profile()
    known = load_profiles()
    return known[name] if name in known else _SEEN[name]


def names() -> tuple[str, ...]:
    return tuple(load_profiles())


def _validated(text: str, where: str) -> dict[str, Any]:
    """The profile's data, checked against its schema. Parsed with PyYAML's C loader; the
    positioned loader runs only to say where a problem is."""
    # validate (schema_problems) builds manifests, whose runtime comes from here: read only
    # to place a problem
    from dpguard.validate import schema_problems

    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if isinstance(data, dict) and not any(_schema_validator().iter_errors(data)):
            return data
    except yaml.YAMLError:
        pass
    try:
        doc = load_text(text, where)
    except YamlLoadError as exc:
        raise ConfigError(f"invalid YAML: {exc.message}", f"{where}:{exc.position.line}") from None
    for path, _code, message in schema_problems(_schema_validator(), doc):
        line, col = doc.position(path)
        raise ConfigError(message, f"{where}:{line}:{col}")
    raise ConfigError("not a framework profile", where)  # pragma: no cover - C and ruamel agree


@cache
def _schema_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(resources.schema(SCHEMA_FILE))


def _build(name: str, raw: Mapping[str, tuple[str, dict[str, Any]]]) -> Profile:
    data = _merged(name, raw, ())
    where = raw[name][0]
    if "schedules" not in data:
        raise ConfigError("a profile without `extends` must list its schedules", where)
    meta, rows = raw[name][1]["metadata"], data["schedules"]
    traits, overlap = data.get("traits", {}), data.get("overlap", {})
    groups = data.get("process_groups", {})
    return Profile(
        path=where,
        name=name,
        title=meta["title"],
        source=meta["source"],
        default=bool(meta.get("default", False)),
        schedules=tuple(r["schedule"] for r in rows),
        traits=MappingProxyType({k: v["value"] for k, v in traits.items()}),
        trait_sources=MappingProxyType({k: v["source"] for k, v in traits.items()}),
        trait_switches=MappingProxyType(
            {k: (v["switch"], v["alternative"]) for k, v in traits.items() if "switch" in v}
        ),
        overlap=MappingProxyType({k: v["overlapped"] for k, v in overlap.items()}),
        overlap_schedules=MappingProxyType(
            {k: tuple(v["schedules"]) for k, v in overlap.items() if "schedules" in v}
        ),
        emit=data.get("emit"),
        validations=tuple(data.get("validations", ())),
        sharded_gathers_per_layer=int(data.get("sharded_gathers_per_layer", {}).get("value", 1)),
        tensor_groups=int(groups.get("tensor", 1)),
        model_parallel_group=bool(groups.get("model_parallel", False)),
        expert_tensor_follows_tensor=data.get("expert_tensor", {}).get("default", "tensor")
        == "tensor",
        expert_tensor_choices=tuple(data.get("expert_tensor", {}).get("choices", ())),
        reads=meta.get("reads"),
    )


def _merged(
    name: str, raw: Mapping[str, tuple[str, dict[str, Any]]], seen: tuple[str, ...]
) -> dict[str, Any]:
    """A profile's data over its parent's, key by key (traits and overlap entry by entry)."""
    where, data = raw[name]
    if "extends" not in data:
        return data
    base = data["extends"]
    if base not in raw:
        raise ConfigError(f"extends unknown profile {base!r} (known: {', '.join(raw)})", where)
    if base in (*seen, name):
        raise ConfigError(f"extends forms a cycle: {' -> '.join((*seen, name, base))}", where)
    parent = _merged(base, raw, (*seen, name))
    merged = {**parent, **data}
    for key in ("traits", "overlap"):
        merged[key] = {**parent.get(key, {}), **data.get(key, {})}
    return merged
