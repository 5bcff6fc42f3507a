"""The normalised training manifest: immutable, typed, defaults applied, units resolved.

`build_manifest` is called only on data that passed the schema and the cross-field checks
(`dpguard.validate`), so it converts without re-checking. Derived values (data-parallel size,
micro-batch count M) are computed here once; everything downstream reads them from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from decimal import Decimal
from functools import cached_property
from typing import Any

from dpguard.catalog import Accelerator, Catalog
from dpguard.frameworks import profiles
from dpguard.memory import MLA
from dpguard.yamlsource import Path, Position, SourceDoc

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
_MAX_DIGITS = 30
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)([KMBT]?)")

# Share of the marketed memory that PyTorch can use when the manifest writes memory_gb itself: an
# "80 GB" H100 reports 79.1 GiB of total_memory (torchtitan issue #1789 log: 73.32 GiB = 92.70 %).
_USABLE_SHARE = 79.1 / 80

# Vendor -> scale-up link when the manifest does not say (NVLink on NVIDIA, Infinity Fabric
# xGMI on AMD Instinct; domain.md (a)).
_DEFAULT_INTRA_NODE = {"nvidia": "nvlink", "amd": "xgmi"}


def parse_quantity(value: int | float | str) -> int:
    """``"671B"`` -> 671_000_000_000; ``"14.8T"`` -> 14_800_000_000_000; numbers pass through.

    Decimal arithmetic keeps "14.8T" exact (float would give 14799999999999.998). Fractions of
    one are dropped ("1.5" -> 1). Raises ValueError for anything that is not a count, and for
    counts of 10**30 or more: "1e999999T" would overflow Decimal and "1e5000" would make an int
    too long to print, and no real run comes near.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a count")
    if isinstance(value, str):
        match = _QUANTITY.fullmatch(value.strip())
        if match is None:
            raise ValueError(f"{value!r} is not a count")
        number, scale = Decimal(match.group(1)), _SUFFIX[match.group(2)]
    else:
        number, scale = Decimal(str(value)), 1
    if not number.is_finite() or number.adjusted() + len(str(scale)) - 1 >= _MAX_DIGITS:
        raise ValueError(f"{value!r} is too large to be a count")
    return int(number * scale)


def format_quantity(n: float, digits: int | None = None) -> str:
    """The reverse of `parse_quantity` for reports: 14.8e12 -> "14.8T" (to `digits`
    significant digits when given); under a million, with thousands separators."""
    spec = f".{digits}g" if digits else "g"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:{spec}}{unit}"
    return f"{n:,.0f}"


@dataclass(frozen=True)
class Interconnect:
    inter_node_gbps_per_gpu: float
    intra_node: str


@dataclass(frozen=True)
class Cluster:
    gpus: int
    gpus_per_node: int
    accelerator: str  # canonical catalog id, or "custom"
    vendor: str  # nvidia | amd | intel | custom
    family: str  # ampere | hopper | ... | custom
    memory_gb: float
    usable_gib: float  # what the framework can allocate (catalog), before the policy headroom
    fp8: bool | None  # FP8 training supported (catalog); None for a custom accelerator
    scale_up_domain: int  # GPUs one scale-up fabric joins (catalog); the node for custom
    peak_tflops_bf16: float
    interconnect: Interconnect
    hbm_tbps: float | None = None  # HBM bandwidth (catalog or manifest); None: not known
    scale_up_gbytes_per_s: float | None = None  # per GPU, unidirectional; None: not known


@dataclass(frozen=True)
class Model:
    architecture: str  # moe | dense
    total_params: int
    active_params: int
    layers: int
    hidden_size: int
    attention_heads: int
    seq_len: int
    vocab_size: int
    experts: int | None
    experts_per_token: int | None
    ffn_hidden_size: int  # 4 x hidden_size unless written
    ffn_activation: str  # gelu | swiglu
    kv_heads: int  # attention_heads unless written
    head_dim: int | None  # None: hidden_size / attention_heads
    attention: str  # mha | mla
    mla: MLA | None
    moe_ffn_hidden_size: int | None  # None: derived from the parameter totals
    shared_experts: int
    dense_layers: int
    mtp_layers: int
    untie_embeddings: bool = False

    @property
    def is_moe(self) -> bool:
        return self.architecture == "moe"


@dataclass(frozen=True)
class Training:
    tokens: int
    global_batch_size: int
    micro_batch_size: int
    precision: str
    zero_stage: int
    activation_recompute: str
    sequence_parallel: bool | None  # None: on when tensor parallel > 1
    recompute_modules: tuple[str, ...]  # used with activation_recompute: selective
    recompute_method: str  # uniform | block, with activation_recompute: full
    recompute_num_layers: int  # layers per group (uniform) or recomputed per stage (block)
    activation_storage: str  # bf16 | fp8
    activation_offload: bool
    optimizer_offload: float
    optimizer_moment_dtype: str  # fp32 | bf16
    framework: str | None  # training.framework as written (or read); None: unstated


@dataclass(frozen=True)
class Runtime:
    """The runtime traits that price memory: the framework profile's values
    (policies/frameworks), then the manifest's `runtime:` overrides. `profile` is the profile
    they came from: the stated framework's, or the default one when none is stated."""

    profile: str
    stated: bool  # the framework was stated (training.framework or a framework reader)
    overrides: tuple[str, ...]  # the traits the manifest itself sets, sorted
    main_grad_dtype: str  # fp32 | bf16
    bf16_grads_kept: bool  # DeepSpeed's BF16_Optimizer keeps the bf16 grads beside its fp32 ones
    fp8_weight_cache: bool  # TE keeps an FP8 copy of each weight over a step (no FP8 params)
    fp8_param_gather: bool  # FP8 primary weights
    parameter_transpose_cache: bool  # TE keeps each FP8 weight's transpose
    flash_attention: bool
    cross_entropy: str  # fused | unfused
    tensor_parallel_impl: str  # megatron | dtensor
    pipeline_parallel_impl: str  # megatron | torch | deepspeed
    fsdp_gradient_sync: str  # per_microbatch | deferred
    master_weights: str  # fp32 | bf16_remainder (Apex distributed Adam under NeMo 1)
    # communication kind -> overlapped with compute: the profile's `overlap`, then the
    # manifest's runtime.overlap (the step-time model reads it, dpguard.perf)
    overlap: Mapping[str, bool] = field(default_factory=dict, compare=False)
    # communication kind -> the only schedules the profile overlaps it under (Megatron-LM
    # overlaps pipeline sends in its interleaved schedule only); none for a kind the manifest sets
    overlap_schedules: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    sharded_gathers_per_layer: int = 1  # the profile's ZeRO-3 / FSDP collectives per layer
    # the profile's process groups beyond one per parallel dimension (its `process_groups`)
    tensor_groups: int = 1
    model_parallel_group: bool = False
    # the profile's default expert tensor-parallel size: the tensor size where it divides
    # (Megatron-LM), else 1 (torchtitan, DeepSpeed); a manifest's parallelism.expert_tensor wins
    expert_tensor_follows_tensor: bool = True

    def overlapped(self, schedule: str) -> dict[str, bool]:
        """What the framework overlaps under `schedule`, kind by kind."""
        only = self.overlap_schedules
        return {k: v and (k not in only or schedule in only[k]) for k, v in self.overlap.items()}


@dataclass(frozen=True)
class Parallelism:
    tensor: int
    pipeline: int
    virtual_stages: int
    expert: int
    context: int
    microbatches: int | None  # as written; the effective M is Manifest.microbatches
    schedule: str | None
    accumulation_steps: int = 1  # pipeline schedules run per optimizer step (torchtitan)
    account_for_embedding: bool = False  # the split counts the embedding as a layer
    account_for_loss: bool = False  # ... and the output layer + loss as another
    stage_layers: tuple[int, ...] | None = None  # layers per stage, when set by hand
    expert_tensor: int | None = None  # as written; None: the framework profile's default

    @property
    def accounted_layers(self) -> int:
        """Non-transformer layers the pipeline split counts (0, 1 or 2)."""
        return int(self.account_for_embedding) + int(self.account_for_loss)


@dataclass(frozen=True)
class Communication:
    all_to_all_kernel: str


@dataclass(frozen=True)
class Manifest:
    path: str
    name: str
    owner: str | None
    description: str | None
    cluster: Cluster
    model: Model
    training: Training
    runtime: Runtime
    parallelism: Parallelism | None  # None: the team asks dpguard to plan
    communication: Communication
    data_parallel: int | None  # gpus / (tensor x pipeline x context), when parallelism is given
    microbatches: int | None  # M per pipeline per optimizer step, when parallelism is given
    source: SourceDoc = field(repr=False, compare=False)
    source_format: str = "dpguard"  # or the framework whose config was read
    framework: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)  # metadata.labels

    def position(self, dotted: str) -> Position:
        """Where `dotted` (e.g. "parallelism.schedule") is written, or its nearest ancestor."""
        return self.source.position(_split(dotted))

    def locate(self, dotted: str) -> tuple[str, int, int]:
        """File, line and column of `dotted`: a value read from a framework config is placed
        in that file, not in the manifest that points at it."""
        path = _split(dotted)
        return (self.source.file(path), *self.source.position(path))

    @cached_property
    def content(self) -> ContentKey:
        """What the planner and the models read, without where it came from: the same run
        written in two files (a repository's copies, a batch cycling through a few configs) has
        one key, so a review computes each search and prediction once per call. Equality leaves
        out the file, the name and the written keys; the key adds which keys were written (a
        written micro-batch size is fixed, a default one is the planner's to choose) and the
        overlap table."""
        anonymous = replace(self, path="", name="", owner=None, description=None)
        return ContentKey(
            (anonymous, frozenset(self.source.keys), tuple(sorted(self.runtime.overlap.items())))
        )

    @property
    def tensor_domain(self) -> int:
        """The most GPUs a tensor-parallel group may span: the node, or a scale-up fabric that
        joins more GPUs than one node (GB200 NVL72)."""
        return max(self.cluster.gpus_per_node, self.cluster.scale_up_domain)

    def to_dict(self) -> dict[str, Any]:
        """The normalised values as plain data (for JSON reports and policy facts)."""
        # Field by field: asdict(self) would first deep-copy the source's position maps. Tuples
        # (recompute_modules) become lists, as JSON has them.
        return {
            f.name: asdict(value, dict_factory=_plain)
            if is_dataclass(value) and not isinstance(value, type)
            else value
            for f in fields(self)
            if f.name not in ("source", "path", "source_format", "framework", "labels")
            for value in (getattr(self, f.name),)
        }


class ContentKey:
    """A hashable key whose hash is computed once (a manifest's hash walks every field)."""

    __slots__ = ("_hash", "_value")

    def __init__(self, value: tuple[Any, ...]) -> None:
        self._value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, ContentKey)
            and self._hash == other._hash
            and self._value == other._value
        )


def _plain(items: list[tuple[str, Any]]) -> dict[str, Any]:
    def plain(v: Any) -> Any:
        if hasattr(v, "_asdict"):  # a NamedTuple such as the MLA ranks
            return dict(v._asdict())
        if isinstance(v, dict):  # runtime.overlap_schedules: kind -> schedules
            return {k: plain(x) for k, x in v.items()}
        return list(v) if isinstance(v, tuple) else v

    return {k: plain(v) for k, v in items}


def _split(dotted: str) -> Path:
    return tuple(dotted.split(".")) if dotted else ()


# The traits once written under `training` (runtime traits added since have no old spelling)
_OLD = frozenset(
    {
        "main_grad_dtype",
        "bf16_grads_kept",
        "fp8_weight_cache",
        "fp8_param_gather",
        "parameter_transpose_cache",
        "flash_attention",
        "cross_entropy",
        "tensor_parallel_impl",
        "pipeline_parallel_impl",
    }
)

# Deprecated spelling -> the key's new place (schemas/manifest.schema.json marks the old one
# `deprecated`, with `x-replaced-by`): the validator reports each (S008) and a conflict (X033),
# the policy facts keep the old names as aliases.
DEPRECATED = {
    **{f"training.{trait}": f"runtime.{trait}" for trait in profiles.TRAITS if trait in _OLD},
    "parallelism.untie_embeddings": "model.untie_embeddings",
}

# Keys of `parallelism:` that describe no layout: written alone, nothing is proposed (the
# deprecated place of untie_embeddings, a model property).
PROPOSAL_NEUTRAL = frozenset({"untie_embeddings"})


def untie_embeddings(data: Mapping[str, Any]) -> bool:
    """model.untie_embeddings, else its deprecated place under parallelism; False unwritten."""
    model = data.get("model") or {}
    if "untie_embeddings" in model:
        return bool(model["untie_embeddings"])
    return bool((data.get("parallelism") or {}).get("untie_embeddings", False))


def runtime_overrides(data: Mapping[str, Any]) -> dict[str, Any]:
    """The traits a manifest sets: `runtime:`, over the deprecated `training.*` spellings
    (validation reports them, and reports both written differently)."""
    training, runtime = data.get("training") or {}, data.get("runtime") or {}
    written = {k: training[k] for k in profiles.TRAITS if k in training}
    written.update({k: runtime[k] for k in profiles.TRAITS if k in runtime})
    return written


def build_runtime(data: Mapping[str, Any], framework: str | None = None) -> Runtime:
    """The runtime traits of a validated manifest under its framework's profile (or under
    `framework`'s, which the band of a framework-less manifest tries one by one)."""
    stated = (data.get("training") or {}).get("framework")
    chosen = profiles.profile(framework or stated)
    written = runtime_overrides(data)
    applied = chosen.runtime(written, stated is not None)
    section = data.get("runtime") or {}
    written_overlap = section.get("overlap") or {}
    overlap = {**chosen.overlap, **written_overlap}
    return Runtime(
        profile=chosen.name,
        stated=stated is not None,
        overrides=tuple(sorted(k for k in written if applied[k] == written[k])),
        overlap=overlap,
        overlap_schedules={
            k: v for k, v in chosen.overlap_schedules.items() if k not in written_overlap
        },
        sharded_gathers_per_layer=section.get(
            "sharded_gathers_per_layer", chosen.sharded_gathers_per_layer
        ),
        tensor_groups=chosen.tensor_groups,
        model_parallel_group=chosen.model_parallel_group,
        expert_tensor_follows_tensor=chosen.expert_tensor_follows_tensor,
        **applied,
    )


def derived_sizes(
    gpus: int,
    tensor: int,
    pipeline: int,
    context: int,
    global_batch: int,
    micro_batch: int,
    accumulation: int = 1,
) -> tuple[int | None, int | None]:
    """Data-parallel size and M, or None where they are not whole numbers.

    Megatron-LM: DP = world / (TP x PP x CP) (megatron/training/arguments.py) and
    M = GBS / (mbs x DP) (megatron/core/num_microbatches_calculator.py). torchtitan runs its
    pipeline schedule once per local batch and accumulates `accumulation` of them per step
    (train.py: GAS = GBS / (local batch x DP)): M = GBS / (mbs x DP x GAS).
    """
    model_parallel = tensor * pipeline * context
    if gpus % model_parallel:
        return None, None
    dp = gpus // model_parallel
    if global_batch % (micro_batch * dp * accumulation):
        return dp, None
    return dp, global_batch // (micro_batch * dp * accumulation)


def _intra_node(acc: Accelerator | None, vendor: str, gpus_per_node: int) -> str:
    """How a node's GPUs talk when the manifest does not say: the vendor's fabric, except on a
    part whose scale-up fabric joins fewer GPUs than the node holds (H100 PCIe and NVL cards,
    bridged in pairs; the L40S, none): there most GPU pairs of the node meet over PCIe, so TP,
    EP and the kernel advice are priced that way unless the team writes `nvlink`."""
    if acc is not None and acc.scale_up_domain < gpus_per_node:
        return "pcie"
    return _DEFAULT_INTRA_NODE.get(vendor, "other")


def _cluster(c: Mapping[str, Any], catalog: Catalog) -> Cluster:
    """The cluster section with the catalog's figures for what it leaves out."""
    acc = catalog.lookup(c["accelerator"])
    if acc is None:  # validation admitted it, so it is `custom`
        accelerator, vendor, family = "custom", "custom", "custom"
        memory_gb, peak = float(c["memory_gb"]), float(c["peak_tflops_bf16"])
        hbm, link_gbytes = c.get("hbm_tbps"), c.get("scale_up_gbytes_per_s")
    else:
        accelerator, vendor, family = acc.id, acc.vendor, acc.family
        memory_gb = float(c.get("memory_gb", acc.memory_gb))
        peak = float(c.get("peak_tflops_bf16", acc.peak_tflops_bf16))
        hbm = c.get("hbm_tbps", acc.hbm_tbps)
        link_gbytes = c.get("scale_up_gbytes_per_s", acc.scale_up_gbytes_per_s)
    share = acc.usable_gib / acc.memory_gb if acc is not None else _USABLE_SHARE
    link = c["interconnect"]
    return Cluster(
        gpus=c["gpus"],
        gpus_per_node=c.get("gpus_per_node", 8),
        accelerator=accelerator,
        vendor=vendor,
        family=family,
        memory_gb=memory_gb,
        usable_gib=memory_gb * share,
        fp8=acc.fp8_training if acc is not None else None,
        scale_up_domain=acc.scale_up_domain if acc is not None else c.get("gpus_per_node", 8),
        peak_tflops_bf16=peak,
        interconnect=Interconnect(
            inter_node_gbps_per_gpu=float(link["inter_node_gbps_per_gpu"]),
            intra_node=link.get("intra_node", _intra_node(acc, vendor, c.get("gpus_per_node", 8))),
        ),
        hbm_tbps=None if hbm is None else float(hbm),
        scale_up_gbytes_per_s=None if link_gbytes is None else float(link_gbytes),
    )


def _parallelism(data: Mapping[str, Any]) -> Parallelism | None:
    """The proposal, or None: no section, or one that proposes nothing (PROPOSAL_NEUTRAL)."""
    p = data.get("parallelism", {})
    if "parallelism" not in data or (p and set(p) <= PROPOSAL_NEUTRAL):
        return None
    return Parallelism(
        tensor=p.get("tensor", 1),
        pipeline=p.get("pipeline", 1),
        virtual_stages=p.get("virtual_stages", 1),
        expert=p.get("expert", 1),
        context=p.get("context", 1),
        microbatches=p.get("microbatches"),
        schedule=p.get("schedule"),
        accumulation_steps=p.get("accumulation_steps", 1),
        account_for_embedding=p.get("account_for_embedding", False),
        account_for_loss=p.get("account_for_loss", False),
        stage_layers=tuple(p["stage_layers"]) if "stage_layers" in p else None,
        expert_tensor=p.get("expert_tensor"),
    )


def build_manifest(
    doc: SourceDoc,
    catalog: Catalog,
    source_format: str = "dpguard",
    framework: Mapping[str, Any] | None = None,
) -> Manifest:
    """Normalise a document that passed validation into a `Manifest`. `framework` holds the
    facts a framework reader found (framework rules test them)."""
    data = doc.data
    meta, c, m, t = data["metadata"], data["cluster"], data["model"], data["training"]
    cluster = _cluster(c, catalog)
    total = parse_quantity(m["total_params"])
    model = Model(
        architecture=m["architecture"],
        total_params=total,
        active_params=parse_quantity(m["active_params"]) if "active_params" in m else total,
        layers=m["layers"],
        hidden_size=m["hidden_size"],
        attention_heads=m["attention_heads"],
        seq_len=m["seq_len"],
        vocab_size=m["vocab_size"],
        experts=m.get("experts"),
        experts_per_token=m.get("experts_per_token"),
        ffn_hidden_size=m.get("ffn_hidden_size", 4 * m["hidden_size"]),
        ffn_activation=m.get("ffn_activation", "gelu"),
        kv_heads=m.get("kv_heads", m["attention_heads"]),
        head_dim=m.get("head_dim"),
        attention=m.get("attention", "mha"),
        mla=MLA(**m["mla"]) if "mla" in m else None,
        moe_ffn_hidden_size=m.get("moe_ffn_hidden_size"),
        shared_experts=m.get("shared_experts", 0),
        dense_layers=m.get("dense_layers", 0),
        mtp_layers=m.get("mtp_layers", 0),
        untie_embeddings=untie_embeddings(data),
    )
    training = Training(
        tokens=parse_quantity(t["tokens"]),
        global_batch_size=t["global_batch_size"],
        micro_batch_size=t.get("micro_batch_size", 1),
        precision=t.get("precision", "bf16"),
        zero_stage=t.get("zero_stage", 1),
        activation_recompute=t.get("activation_recompute", "none"),
        sequence_parallel=t.get("sequence_parallel"),
        recompute_modules=tuple(t.get("recompute_modules", ("core_attn",))),
        recompute_method=t.get("recompute_method", "uniform"),
        recompute_num_layers=t.get("recompute_num_layers", 1),
        activation_storage=t.get("activation_storage", "bf16"),
        activation_offload=t.get("activation_offload", False),
        optimizer_offload=float(t.get("optimizer_offload", 0)),
        optimizer_moment_dtype=t.get("optimizer_moment_dtype", "fp32"),
        framework=t.get("framework"),
    )
    parallelism = _parallelism(data)
    dp, micro = (
        derived_sizes(
            cluster.gpus,
            parallelism.tensor,
            parallelism.pipeline,
            parallelism.context,
            training.global_batch_size,
            training.micro_batch_size,
            parallelism.accumulation_steps,
        )
        if parallelism is not None
        else (None, None)
    )
    return Manifest(
        path=doc.name,
        name=meta["name"],
        owner=meta.get("owner"),
        description=meta.get("description"),
        cluster=cluster,
        model=model,
        training=training,
        runtime=build_runtime(data),
        parallelism=parallelism,
        communication=Communication(
            all_to_all_kernel=data.get("communication", {}).get("all_to_all_kernel", "none")
        ),
        data_parallel=dp,
        microbatches=micro,
        source=doc,
        source_format=source_format,
        framework=dict(framework or {}),
        labels=dict(meta.get("labels", {})),
    )
