"""Framework profiles: what each training framework runs, as data (policies/frameworks/*.yaml).

A profile names the pipeline schedules the framework runs, the runtime traits that set memory
(the gradient buffer's dtype, kept 16-bit gradients, FP8 weight caches, the attention kernel,
the loss, the TP and PP implementations), what it overlaps, the `plan --emit` format that writes
its config and the policy rules that mirror its launch-time checks. `extends` makes a variant
(NeMo, Megatron-Bridge, FlagScale over Megatron-core) that replaces its parent key by key.

A trait a profile leaves out does not exist in that framework: the mechanism's neutral value
(`TRAITS`) applies, and a manifest may not override it (`manifest.runtime`). A broken profile is
dpguard's own broken data: `ConfigError`, exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
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
    overlap: Mapping[str, bool]  # communication kind -> overlapped by default
    # communication kind -> the only schedules under which it is overlapped (the rest: all)
    overlap_schedules: Mapping[str, tuple[str, ...]]
    emit: str | None
    validations: tuple[str, ...]
    sharded_gathers_per_layer: int = 1  # ZeRO-3 / FSDP collectives per layer and pass

    def runtime(
        self, overrides: Mapping[str, Any] = MappingProxyType({}), stated: bool = True
    ) -> dict[str, Any]:
        """Every trait's value for this framework: the profile's, the neutral value where it
        has none, then `overrides`: of the traits it has when the framework is `stated` (the
        manifest checks that, X034), of any trait when this profile is only assumed."""
        values = {name: self.traits.get(name, neutral) for name, neutral in TRAITS.items()}
        values.update({k: v for k, v in overrides.items() if k in self.traits or not stated})
        return values

    def runs(self, schedule: str) -> bool:
        return schedule in self.schedules


@cache
def load_profiles() -> Mapping[str, Profile]:
    """Every shipped profile by name, validated and with `extends` resolved, once per process."""
    files = sorted(
        e.name for e in resources.packaged(PACKAGE, FOLDER).iterdir() if e.name.endswith(".yaml")
    )
    texts = [resources.read_text(PACKAGE, f"{FOLDER}/{name}") for name in files]
    # Parsing and checking them costs ~10 ms a process: the checked data is remembered as JSON
    # under the digest of these very files and their schema (dpguard.cache.remembered_json)
    key = (resources.schema_text(SCHEMA_FILE).encode(), *(t.encode() for t in texts))
    return user_cache.remembered_json(
        "profiles",
        key,
        lambda: _checked(files, texts),
        lambda raw: _assembled({name: (where, data) for name, (where, data) in raw.items()}),
    )


def _checked(files: list[str], texts: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each profile's checked data by name, with the file it came from."""
    raw: dict[str, tuple[str, dict[str, Any]]] = {}
    for entry, text in zip(files, texts, strict=True):
        where = f"policies/{FOLDER}/{entry}"
        data = _validated(text, where)
        name = data["metadata"]["name"]
        if name in raw:
            raise ConfigError(f"profile {name!r} is defined twice", where)
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
    """The named profile, or the default one for None (the schema admits known names only)."""
    return default_profile() if name is None else load_profiles()[name]


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
    return Profile(
        name=name,
        title=meta["title"],
        source=meta["source"],
        default=bool(meta.get("default", False)),
        schedules=tuple(r["schedule"] for r in rows),
        traits=MappingProxyType({k: v["value"] for k, v in traits.items()}),
        trait_sources=MappingProxyType({k: v["source"] for k, v in traits.items()}),
        overlap=MappingProxyType({k: v["overlapped"] for k, v in overlap.items()}),
        overlap_schedules=MappingProxyType(
            {k: tuple(v["schedules"]) for k, v in overlap.items() if "schedules" in v}
        ),
        emit=data.get("emit"),
        validations=tuple(data.get("validations", ())),
        sharded_gathers_per_layer=int(data.get("sharded_gathers_per_layer", {}).get("value", 1)),
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
