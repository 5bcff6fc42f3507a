"""The facts policies may test: the normalised manifest plus named derived facts.

Every fact a policy names is checked against `FACTS` when the policy loads, so a typo is a
positioned error, never a condition that silently evaluates false.

Unset facts: a fact is *unset* (None) when the manifest leaves it out and it has no default, e.g.
every ``parallelism.*`` fact when the manifest has no parallelism section, ``model.experts`` on a
dense model, ``derived.microbatches`` when nothing is proposed. Every leaf test on an unset fact
is false, ``not_equals`` and ``not_in`` included; only ``exists: false`` is true. Wrap a test in
``not`` to make an unset fact count as a match.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpguard import memory, perf, sizing
from dpguard.frameworks import profiles
from dpguard.manifest import DEPRECATED, Manifest
from dpguard.schedules.registry import SCHEDULES as SPECS

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb1p", "dualpipe", "dualpipev")
PLAN_SCHEDULES = (*SCHEDULES, "none")


@dataclass(frozen=True)
class FactSpec:
    path: str
    type: str  # int | number | bool | str
    description: str
    choices: tuple[str, ...] = ()
    anchor: str = ""  # manifest key a finding about this fact points at ("" = the fact itself)


def _f(
    path: str, type_: str, text: str, choices: tuple[str, ...] = (), anchor: str = ""
) -> FactSpec:
    return FactSpec(path, type_, text, choices, anchor)


_SPECS = (
    _f("metadata.name", "str", "run name"),
    _f("metadata.owner", "str", "owning team or person (unset: not written)"),
    _f("cluster.gpus", "int", "total accelerators"),
    _f("cluster.gpus_per_node", "int", "accelerators per node"),
    _f(
        "cluster.scale_up_domain",
        "int",
        "GPUs one scale-up fabric joins (catalog; gpus_per_node for custom)",
        anchor="cluster.accelerator",
    ),
    _f("cluster.accelerator", "str", "canonical catalog id, or custom"),
    _f(
        "cluster.vendor",
        "str",
        "accelerator vendor",
        ("nvidia", "amd", "intel", "custom"),
        "cluster.accelerator",
    ),
    _f(
        "cluster.family",
        "str",
        "accelerator family",
        ("ampere", "ada", "hopper", "blackwell", "cdna3", "gaudi", "custom"),
        "cluster.accelerator",
    ),
    _f("cluster.memory_gb", "number", "memory per accelerator, GiB", anchor="cluster.accelerator"),
    _f(
        "cluster.peak_tflops_bf16",
        "number",
        "dense BF16 peak per accelerator",
        anchor="cluster.accelerator",
    ),
    _f(
        "cluster.fp8",
        "bool",
        "the accelerator trains with FP8 GEMMs (catalog; unset for custom)",
        anchor="cluster.accelerator",
    ),
    _f("cluster.interconnect.inter_node_gbps_per_gpu", "number", "scale-out Gbit/s per GPU"),
    _f(
        "cluster.interconnect.intra_node",
        "str",
        "scale-up link",
        ("nvlink", "xgmi", "pcie", "other"),
    ),
    _f("model.architecture", "str", "moe or dense", ("moe", "dense")),
    _f("model.total_params", "int", "total parameters"),
    _f("model.active_params", "int", "parameters active per token"),
    _f("model.layers", "int", "transformer layers"),
    _f("model.hidden_size", "int", "hidden size"),
    _f("model.attention_heads", "int", "attention heads"),
    _f("model.seq_len", "int", "sequence length"),
    _f("model.vocab_size", "int", "vocabulary size"),
    _f("model.experts", "int", "routed experts (unset on dense models)"),
    _f("model.experts_per_token", "int", "experts per token (unset on dense models)"),
    _f("model.ffn_hidden_size", "int", "dense FFN width (4 x hidden unless written)"),
    _f("model.ffn_activation", "str", "feed-forward activation", ("gelu", "swiglu")),
    _f("model.kv_heads", "int", "key-value heads (attention_heads unless written)"),
    _f("model.attention", "str", "attention kind", ("mha", "mla")),
    _f("model.moe_ffn_hidden_size", "int", "routed expert FFN width (unset: derived)"),
    _f("model.shared_experts", "int", "shared experts per MoE layer"),
    _f("model.dense_layers", "int", "leading dense layers of an MoE model"),
    _f("model.mtp_layers", "int", "multi-token-prediction layers"),
    _f("training.tokens", "int", "training tokens"),
    _f("training.global_batch_size", "int", "sequences per optimizer step"),
    _f("training.micro_batch_size", "int", "sequences per micro-batch"),
    _f("training.precision", "str", "compute precision", ("bf16", "fp8", "fp16")),
    _f("training.zero_stage", "int", "ZeRO stage"),
    _f(
        "training.activation_recompute",
        "str",
        "recompute mode",
        ("none", "selective", "selective_op", "full"),
    ),
    _f(
        "training.recompute_method",
        "str",
        "layers full recompute covers: every one in groups, or the first of each stage",
        ("uniform", "block"),
    ),
    _f("training.recompute_num_layers", "int", "layers per group (uniform) or per stage (block)"),
    _f("training.sequence_parallel", "bool", "sequence parallelism as written (unset: on with TP)"),
    _f("training.activation_storage", "str", "activation storage precision", ("bf16", "fp8")),
    _f("training.activation_offload", "bool", "activations offloaded to host memory"),
    _f("training.optimizer_offload", "number", "fraction of optimizer states in host memory"),
    _f("training.optimizer_moment_dtype", "str", "Adam moment precision", ("fp32", "bf16")),
    _f("training.framework", "str", "framework as stated (unset: none named)"),
    _f("runtime.profile", "str", "framework profile the runtime traits come from"),
    _f("runtime.stated", "bool", "the framework was stated (else the default profile is assumed)"),
    _f("runtime.main_grad_dtype", "str", "gradient buffer precision", ("fp32", "bf16")),
    _f("runtime.bf16_grads_kept", "bool", "16-bit gradients kept beside the main grads"),
    _f("runtime.fp8_weight_cache", "bool", "TE keeps an FP8 copy of each weight over a step"),
    _f("runtime.fp8_param_gather", "bool", "weights kept in FP8 (FP8 primary weights)"),
    _f("runtime.parameter_transpose_cache", "bool", "TE caches each FP8 weight's transpose"),
    _f("runtime.flash_attention", "bool", "attention keeps no s x s scores"),
    _f(
        "runtime.cross_entropy",
        "str",
        "loss implementation",
        ("fused", "unfused", "chunked", "fused_linear"),
    ),
    _f("runtime.tensor_parallel_impl", "str", "tensor-parallel style", ("megatron", "dtensor")),
    _f(
        "runtime.fsdp_gradient_sync",
        "str",
        "FSDP reduces every micro-batch's gradients or holds them unsharded to the step's last",
        ("per_microbatch", "deferred"),
    ),
    _f(
        "runtime.master_weights",
        "str",
        "the optimizer's fp32 master weights, or only the low 16 bits a bf16 weight lacks",
        ("fp32", "bf16_remainder"),
    ),
    _f(
        "runtime.pipeline_parallel_impl",
        "str",
        "pipeline runtime",
        ("megatron", "torch", "deepspeed"),
    ),
    _f("parallelism.tensor", "int", "proposed tensor-parallel size (unset: nothing proposed)"),
    _f("parallelism.pipeline", "int", "proposed pipeline depth P"),
    _f("parallelism.virtual_stages", "int", "proposed virtual stages per rank"),
    _f("parallelism.expert", "int", "proposed expert-parallel size"),
    _f("parallelism.context", "int", "proposed context-parallel size"),
    _f(
        "parallelism.microbatches", "int", "micro-batch count as written (see derived.microbatches)"
    ),
    _f("parallelism.schedule", "str", "proposed schedule (unset: dpguard picks)", SCHEDULES),
    _f("model.untie_embeddings", "bool", "embedding and output weights untied"),
    _f("parallelism.account_for_embedding", "bool", "the pipeline split counts the embedding"),
    _f("parallelism.account_for_loss", "bool", "the pipeline split counts the output layer"),
    _f(
        "communication.all_to_all_kernel",
        "str",
        "expert-parallel all-to-all kernel",
        ("none", "nccl", "deepep", "pplx", "uccl-ep", "mori", "custom"),
    ),
    _f("derived.nodes", "int", "nodes = ceil(gpus / gpus_per_node)", anchor="cluster.gpus"),
    _f(
        "derived.tensor_domain",
        "int",
        "the most GPUs a tensor-parallel group may span: max(gpus_per_node, scale_up_domain)",
        anchor="cluster.gpus_per_node",
    ),
    _f(
        "derived.tensor_beyond_domain",
        "bool",
        "the proposal's tensor-parallel size is larger than derived.tensor_domain",
        anchor="parallelism.tensor",
    ),
    _f(
        "derived.framework_runs_schedule",
        "bool",
        "the stated framework runs the proposed schedule (unset: no framework or no schedule)",
        anchor="parallelism.schedule",
    ),
    _f("runtime.schedules", "str", "the schedules the framework profile runs, comma-separated"),
    _f("runtime.profile_file", "str", "the file the framework profile is defined in"),
    _f(
        "derived.proposed",
        "bool",
        "the manifest proposes a parallelism section",
        anchor="parallelism",
    ),
    _f(
        "derived.data_parallel", "int", "gpus / (tensor x pipeline x context)", anchor="parallelism"
    ),
    _f(
        "derived.microbatches",
        "int",
        "M = global_batch / (micro_batch x data_parallel)",
        anchor="parallelism.microbatches",
    ),
    _f("derived.microbatches_per_rank", "number", "M / P", anchor="parallelism.microbatches"),
    _f(
        "derived.stages",
        "int",
        "pipeline stages = P x virtual_stages",
        anchor="parallelism.pipeline",
    ),
    _f("derived.layers_per_stage", "number", "layers / stages", anchor="parallelism.pipeline"),
    _f(
        "derived.layers_per_stage_whole",
        "bool",
        "layers (plus the embedding and loss where the split counts them) divide over the stages",
        anchor="parallelism.pipeline",
    ),
    _f(
        "derived.memory_floor_gb",
        "number",
        "GiB per GPU no layout goes under: 16-bit weights (8-bit under FP8) and gradients "
        "sharded over every GPU, optimizer states in host memory",
        anchor="cluster.gpus",
    ),
    _f(
        "derived.fits_no_layout",
        "bool",
        "even the memory floor exceeds the usable memory: no layout fits on these GPUs",
        anchor="cluster.gpus",
    ),
    _f(
        "derived.gpus_for_floor",
        "int",
        "the fewest GPUs over which the memory floor fits the usable memory",
        anchor="cluster.gpus",
    ),
    _f(
        "derived.model_fits_one_gpu",
        "bool",
        "weights, grads and ZeRO-1-sharded optimizer states plus one micro-batch certainly "
        "fit one GPU (the estimate's high bound)",
        anchor="model.total_params",
    ),
    _f(
        "policy.memory_headroom",
        "number",
        "fraction of the catalog's usable memory the policy keeps free",
    ),
    _f(
        "policy.usable_memory_gb",
        "number",
        "GiB per GPU a run may use: the catalog's usable memory less the policy headroom",
        anchor="cluster.accelerator",
    ),
    _f(
        "proposal.schedule",
        "str",
        "schedule judged for the proposal: as written, else the plan's (unset: nothing proposed)",
        PLAN_SCHEDULES,
        anchor="parallelism.schedule",
    ),
    _f(
        "proposal.stage_memory_gb",
        "number",
        "GiB per GPU of the worst stage under the proposal",
        anchor="parallelism.pipeline",
    ),
    _f(
        "proposal.stage_fits",
        "bool",
        "the worst stage's central estimate fits the usable memory",
        anchor="parallelism.pipeline",
    ),
    _f(
        "proposal.memory_schedule",
        "str",
        "the schedule the memory facts were sized with: the judged one, or 1f1b when it cannot "
        "run at the proposal's P and M",
        PLAN_SCHEDULES,
        anchor="parallelism.schedule",
    ),
    _f(
        "proposal.memory_low_gb",
        "number",
        "low bound of the worst stage's GiB per GPU (the calibration's error band)",
        anchor="parallelism.pipeline",
    ),
    _f(
        "proposal.memory_high_gb",
        "number",
        "high bound of the worst stage's GiB per GPU",
        anchor="parallelism.pipeline",
    ),
    _f(
        "proposal.memory_verdict",
        "str",
        "fits, likely-oom (central estimate over the usable memory) or oom (low bound over)",
        ("fits", "likely-oom", "oom"),
        anchor="parallelism.pipeline",
    ),
    _f(
        "proposal.memory_remedies",
        "str",
        "the changes that cut the worst stage's memory, each with its estimate (unset when "
        "the stage fits)",
        anchor="parallelism.pipeline",
    ),
    _f(
        "proposal.memory_runtime",
        "str",
        "the runtime the memory estimate assumed: the framework profile, or with none named "
        "the profiles its band spans",
        anchor="parallelism.pipeline",
    ),
    _f(
        "proposal.replication_gb",
        "number",
        "GiB per GPU of DualPipe's second parameter copy",
        anchor="parallelism.schedule",
    ),
    _f(
        "proposal.bubble",
        "number",
        "exact bubble fraction of the proposal (simulated)",
        anchor="parallelism.schedule",
    ),
    _f(
        "proposal.gpu_hours",
        "number",
        "GPU-hours of the token budget under the proposal",
        anchor="parallelism.schedule",
    ),
    _f(
        "plan.bubble",
        "number",
        "exact bubble fraction of the plan's schedule at the proposal's P and M",
        anchor="parallelism.schedule",
    ),
    _f(
        "plan.gpu_hours",
        "number",
        "GPU-hours of the token budget with the plan's schedule at the proposal's P and M",
        anchor="parallelism.schedule",
    ),
    _f(
        "decision.schedule", "str", "the decision table's schedule, before refusals", PLAN_SCHEDULES
    ),
    _f("decision.rule", "str", "id of the decision row that matched"),
    _f(
        "plan.feasible",
        "bool",
        "the planner found a layout (set after planning: only rejects and advisories read it)",
        anchor="kind",
    ),
    _f(
        "plan.infeasible_reason",
        "str",
        "why the planner found no layout (unset when it found one)",
        anchor="kind",
    ),
    _f(
        "plan.recommended_schedule",
        "str",
        "the schedule the planner recommends: the policy's, or an acceptable one it falls back "
        "to when the policy's cannot run at any P (unset when nothing is feasible)",
        PLAN_SCHEDULES,
        anchor="parallelism.schedule",
    ),
    _f(
        "plan.proposal_recommended",
        "bool",
        "the proposed schedule is the planner's recommendation or acceptable to the decision "
        "row (unset: nothing proposed, or no feasible plan)",
        anchor="parallelism.schedule",
    ),
    _f(
        "plan.recommended_bubble",
        "number",
        "bubble share of dpguard's plan (the recommended schedule at its best layout), from the "
        "step-time model (unset when there is no plan or nothing to compare)",
        anchor="parallelism.schedule",
    ),
    _f(
        "plan.recommended_gpu_hours",
        "number",
        "GPU-hours of the token budget for dpguard's plan, from the step-time model (docs/"
        "performance.md)",
        anchor="parallelism.schedule",
    ),
    _f(
        "plan.recommended_saving_gpu_hours",
        "number",
        "GPU-hours dpguard's plan saves over the proposal, both priced by the step-time model at "
        "the same cluster and budget (negative: the proposal costs fewer; unset when either "
        "cannot be priced)",
        anchor="parallelism.schedule",
    ),
    _f(
        "proposal.refused",
        "bool",
        "a refusal refused the proposed schedule (its error says so; unset: nothing proposed)",
        anchor="parallelism.schedule",
    ),
    _f("plan.schedule", "str", "the recommended schedule after refusals", PLAN_SCHEDULES),
    _f(
        "plan.rule",
        "str",
        "id of the rule that chose plan.schedule: the last refusal that "
        "redirected it, else the decision row",
    ),
    _f(
        "plan.proposal_acceptable",
        "bool",
        "proposed schedule is the plan's or acceptable to its decision row (unset: none proposed)",
        anchor="parallelism.schedule",
    ),
)

# Per schedule, at the proposal's P, M, T, EP and C (unset when nothing is proposed or the
# schedule cannot run there). Computed only when a loaded rule names one (Policies.uses): six
# simulations and memory models per manifest are not free.
_PER_SCHEDULE = tuple(
    spec
    for name in SCHEDULES
    for spec in (
        _f(
            f"schedules.{name}.bubble",
            "number",
            f"exact bubble fraction of {name}",
            anchor="parallelism.pipeline",
        ),
        _f(
            f"schedules.{name}.gpu_hours",
            "number",
            f"GPU-hours of the token budget with {name}",
            anchor="parallelism.pipeline",
        ),
        _f(
            f"schedules.{name}.stage_memory_gb",
            "number",
            f"GiB per GPU of the worst stage under {name}",
            anchor="parallelism.pipeline",
        ),
        _f(
            f"schedules.{name}.stage_fits",
            "bool",
            f"the worst stage's central estimate fits the usable memory under {name}",
            anchor="parallelism.pipeline",
        ),
    )
)

FRAMEWORK_FORMATS = (
    "dpguard",
    "megatron",
    "nemo",
    "bridge",
    "flagscale",
    "torchtitan",
    "deepspeed",
    "nanotron",
)

# What a framework config asks for that the normalised manifest cannot say (frameworks.read);
# unset for dpguard manifests, so framework rules never fire on them.
FRAMEWORK = (
    _f(
        "framework.format",
        "str",
        "the file's format: dpguard or the framework read",
        FRAMEWORK_FORMATS,
        "kind",
    ),
    _f(
        "framework.layers_dropped",
        "int",
        "layers Megatron silently leaves out: num_layers minus PP x virtual stages x "
        "--num-layers-per-virtual-pipeline-stage",
        anchor="model.layers",
    ),
    _f(
        "framework.layout_problem",
        "str",
        "what Megatron-core refuses in a --pipeline-model-parallel-layout (stage count not a "
        "multiple of PP, decoder layers other than --num-layers, embedding and loss misplaced)",
        anchor="parallelism.pipeline",
    ),
    _f(
        "framework.moe_bias_problem",
        "str",
        "a Megatron-LM script's MoE that keeps linear biases (no --disable-bias-linear) with its "
        "experts split over more than one tensor-parallel rank",
        anchor="parallelism.expert",
    ),
    _f(
        "framework.custom_layout",
        "bool",
        "the config places the layers on the stages itself (Megatron's "
        "--pipeline-model-parallel-layout or uneven first/last stages)",
        anchor="parallelism.pipeline",
    ),
    _f(
        "framework.sequence_lengths",
        "str",
        "the sequence lengths one file sets, with their lines, when they disagree",
        anchor="model.seq_len",
    ),
    _f(
        "framework.expert_tensor_problem",
        "str",
        "a torchtitan expert_tensor_parallel_degree other than 1 or the tensor-parallel degree",
        anchor="parallelism.expert_tensor",
    ),
    _f(
        "framework.schedule_without_pipeline",
        "str",
        "the pipeline schedule a config names while its pipeline degree is 1",
        anchor="parallelism.pipeline",
    ),
    _f(
        "framework.shared_expert_overlap",
        "bool",
        "FlagScale moe_shared_expert_overlap with DualPipeV",
        anchor="parallelism.schedule",
    ),
    _f(
        "framework.uneven_odd_stage",
        "str",
        "FlagScale first/last-stage layer counts that are odd under DualPipeV",
        anchor="parallelism.schedule",
    ),
    _f(
        "framework.fb_overlap_with_grad_overlap",
        "bool",
        "FlagScale moe_fb_overlap with overlap_grad_reduce or overlap_param_gather",
        anchor="parallelism.schedule",
    ),
    _f(
        "framework.zero_with_pipeline",
        "bool",
        "a DeepSpeed config with a pipeline section and ZeRO stage 2 or 3",
        anchor="training.zero_stage",
    ),
)


CHANGE_STATUSES = ("added", "removed", "modified", "renamed", "unchanged")

# What a pull request changes, set only by `review --baseline REV` and `diff` (dpguard.change),
# which judge the head version once both versions are sized. Rules that read them are judged
# only there; in a plain review they neither fire nor stay silent: they are not judged.
CHANGE = (
    _f(
        "change.status",
        "str",
        "how the file changed since the baseline (only under review --baseline and diff)",
        CHANGE_STATUSES,
        "kind",
    ),
    _f(
        "change.gpu_hours_delta",
        "number",
        "GPU-hours of the token budget now less at the baseline (an added manifest: all of "
        "them; unset when either version cannot be sized)",
        anchor="parallelism",
    ),
    _f(
        "change.gpu_hours_delta_fraction",
        "number",
        "change.gpu_hours_delta / the baseline's GPU-hours (unset for an added manifest)",
        anchor="parallelism",
    ),
    _f(
        "change.bubble_delta_points",
        "number",
        "bubble now less at the baseline, in percentage points",
        anchor="parallelism.schedule",
    ),
    _f(
        "change.schedule_changed",
        "bool",
        "the pipeline schedule differs from the baseline's (unset for an added manifest)",
        anchor="parallelism.schedule",
    ),
)

# `metadata.labels.<key>`: one str fact per label key, unset when the manifest has no such label.
# Keys with a '.' cannot be named (the dots would read as nesting in conditions and messages).
LABELS = "metadata.labels."
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_/-]*")


def label_fact(path: str) -> bool:
    return path.startswith(LABELS) and _LABEL_KEY.fullmatch(path[len(LABELS) :]) is not None


def spec_of(path: str) -> FactSpec | None:
    """The fact `path` names, including any `metadata.labels.<key>`; None when unknown."""
    spec = FACTS.get(path)
    if spec is None and label_fact(path):
        return FactSpec(path, "str", f"label {path[len(LABELS) :]}")
    return spec


# The facts' old names (manifest.DEPRECATED), kept so that policies written before the runtime
# section still read them (`dpguard facts` marks them deprecated); their values are the new ones'.
_OLD_SPECS = tuple(
    FactSpec(old, spec.type, f"deprecated spelling of {new}", spec.choices, spec.anchor)
    for old, new in DEPRECATED.items()
    for spec in _SPECS
    if spec.path == new
)
FACTS: dict[str, FactSpec] = {
    spec.path: spec for spec in (*_SPECS, *_OLD_SPECS, *_PER_SCHEDULE, *FRAMEWORK, *CHANGE)
}
CHANGE_FACTS = frozenset(spec.path for spec in CHANGE)
ROOTS = frozenset(path.split(".")[0] for path in FACTS)
# Numeric facts every valid manifest sets (required, or defaulted): the reachability check may
# rely on them never being unset.
ALWAYS_SET = frozenset(
    (
        "cluster.gpus",
        "cluster.gpus_per_node",
        "cluster.memory_gb",
        "cluster.peak_tflops_bf16",
        "cluster.interconnect.inter_node_gbps_per_gpu",
        "model.total_params",
        "model.active_params",
        "model.layers",
        "model.hidden_size",
        "model.attention_heads",
        "model.seq_len",
        "model.vocab_size",
        "training.tokens",
        "training.global_batch_size",
        "training.micro_batch_size",
        "training.zero_stage",
        "derived.nodes",
        "derived.tensor_domain",
        "cluster.scale_up_domain",
    )
)

# Facts known only once the planner has run (after `evaluate`): rules that read them are judged
# by `engine.judge_planned`.
PLANNED = frozenset(
    {
        "plan.feasible",
        "plan.infeasible_reason",
        "plan.recommended_schedule",
        "plan.proposal_recommended",
        "plan.recommended_bubble",
        "plan.recommended_gpu_hours",
        "plan.recommended_saving_gpu_hours",
    }
)

# The derived facts that need the policy's settings (usable memory): set with the sized ones
SIZED_DERIVED = frozenset(
    {
        "derived.model_fits_one_gpu",
        "derived.memory_floor_gb",
        "derived.fits_no_layout",
        "derived.gpus_for_floor",
    }
)

# Facts the engine sets only after the decision table and the refusals have run (the decision,
# the plan, and `sized_facts`). Decision and refuse rules cannot test them: they would always be
# unset there, a condition that silently never holds.
LATE_FACTS = frozenset(
    path
    for path in FACTS
    if path.split(".")[0] in ("decision", "plan", "proposal", "policy", "schedules", "change")
    or path in SIZED_DERIVED
)


# (fact, attribute path) of the facts read straight from the manifest's sections, split once
_READ = tuple(
    (path, tuple(path.split(".")))
    for path in FACTS
    if path.partition(".")[0]
    in ("cluster", "model", "training", "runtime", "parallelism", "communication")
)


def manifest_facts(manifest: Manifest) -> dict[str, Any]:
    """Flat fact values read from the manifest (decision/plan facts come from the engine)."""
    facts: dict[str, Any] = {"metadata.name": manifest.name, "metadata.owner": manifest.owner}
    facts.update((LABELS + k, v) for k, v in manifest.labels.items() if label_fact(LABELS + k))
    for path, parts in _READ:
        # attribute by attribute: Manifest.to_dict (dataclasses.asdict) costs as much as the
        # rest of judging a file, twice per review
        node: Any = manifest
        for part in parts:
            node = getattr(node, part, None)
        facts[path] = list(node) if isinstance(node, tuple) else node
    for old, new in DEPRECATED.items():
        facts[old] = facts[new]
    for spec in FRAMEWORK:
        facts[spec.path] = manifest.framework.get(spec.path)
    facts["framework.format"] = manifest.source_format
    c, p = manifest.cluster, manifest.parallelism
    facts["derived.nodes"] = math.ceil(c.gpus / c.gpus_per_node)
    facts["derived.tensor_domain"] = manifest.tensor_domain
    facts["derived.tensor_beyond_domain"] = None if p is None else p.tensor > manifest.tensor_domain
    facts["derived.proposed"] = p is not None
    profile = profiles.profile(manifest.runtime.profile)
    facts["runtime.schedules"] = ", ".join(profile.schedules)
    facts["runtime.profile_file"] = profile.path
    facts["derived.framework_runs_schedule"] = (
        profile.runs(p.schedule)
        if p is not None and p.schedule and manifest.runtime.stated
        else None
    )
    facts["derived.data_parallel"] = manifest.data_parallel
    facts["derived.microbatches"] = manifest.microbatches
    facts["derived.microbatches_per_rank"] = None
    facts["derived.stages"] = None
    facts["derived.layers_per_stage"] = None
    facts["derived.layers_per_stage_whole"] = None
    if p is not None:
        # the schedule's own stage count: DualPipeV runs two per rank, whatever V says
        schedule = SPECS.get(p.schedule or "")
        stages = (
            schedule.stages(p.pipeline, schedule.virtual(p.virtual_stages))
            if schedule is not None
            else p.pipeline * p.virtual_stages
        )
        facts["derived.stages"] = stages
        facts["derived.layers_per_stage"] = manifest.model.layers / stages
        split = manifest.model.layers + p.accounted_layers
        facts["derived.layers_per_stage_whole"] = split % stages == 0
        if manifest.microbatches is not None:
            facts["derived.microbatches_per_rank"] = manifest.microbatches / p.pipeline
    return facts


def _floor_facts(manifest: Manifest, settings: Mapping[str, Any]) -> dict[str, Any]:
    floor, usable = sizing.memory_floor(manifest), sizing.usable_bytes(manifest, settings)
    total = floor * manifest.cluster.gpus
    return {
        "derived.memory_floor_gb": floor / sizing.GIB,
        "derived.fits_no_layout": floor > usable,
        "derived.gpus_for_floor": math.ceil(total / usable) if usable > 0 else None,
    }


# the proposal's simulated bubble and its GPU-hours by the step-time model
PRICED = frozenset(("proposal.bubble", "proposal.gpu_hours"))


def sized_facts(
    manifest: Manifest,
    settings: Mapping[str, Any],
    plan_schedule: str | None,
    uses: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Facts that need the memory model, the simulator and GPU-hours, once the plan's schedule
    is known. Proposal facts stay unset when nothing is proposed or the schedule's constraints
    reject the proposal (the hard rejects report that)."""
    facts: dict[str, Any] = {
        "derived.model_fits_one_gpu": sizing.model_fits_one_gpu(manifest, settings),
        **_floor_facts(manifest, settings),
        "policy.memory_headroom": float(settings["memory_headroom"]),
        "policy.usable_memory_gb": sizing.usable_bytes(manifest, settings) / sizing.GIB,
    }
    names = (
        "proposal.schedule",
        "proposal.stage_memory_gb",
        "proposal.stage_fits",
        "proposal.memory_schedule",
        "proposal.memory_low_gb",
        "proposal.memory_high_gb",
        "proposal.memory_verdict",
        "proposal.memory_remedies",
        "proposal.memory_runtime",
        "proposal.replication_gb",
        "proposal.bubble",
        "proposal.gpu_hours",
        "plan.bubble",
        "plan.gpu_hours",
    )
    facts.update(dict.fromkeys(names))
    facts.update(dict.fromkeys(sorted(CHANGE_FACTS)))  # set only by engine.judge_change
    per_schedule = any(f == "schedules" or f.startswith("schedules.") for f in uses)
    if per_schedule:
        facts.update(dict.fromkeys(spec.path for spec in _PER_SCHEDULE))
    p, micro = manifest.parallelism, manifest.microbatches
    schedule = (p.schedule or plan_schedule) if p is not None else None
    if p is None or micro is None or schedule is None:
        return facts
    if p.pipeline == 1 and p.schedule is None:
        schedule = "none"  # no pipeline proposed: nothing to schedule
    facts["proposal.schedule"] = schedule

    def strategy(name: str) -> sizing.Strategy:
        s = sizing.proposal(manifest, name)
        assert s is not None  # parallelism and micro-batches were checked above
        return s

    def sized(name: str) -> memory.MemoryEstimate | None:
        # the verdict reads the worst rank's band alone
        return sizing.stage_memory(manifest, strategy(name), settings, span=True, every_rank=False)

    sized_as = schedule
    estimate = sized(schedule)
    if estimate is None:
        # The judged schedule cannot run at this P and M (its hard rejects say so); the memory
        # verdict still matters for whatever schedule the team fixes that with: size it as 1F1B.
        sized_as = "1f1b"
        estimate = sized(sized_as)
    if estimate is not None:
        facts["proposal.memory_schedule"] = sized_as
        worst = estimate.worst
        verdict = sizing.verdict(manifest, estimate, settings)
        facts["proposal.stage_memory_gb"] = worst.total / sizing.GIB
        facts["proposal.memory_low_gb"] = worst.low / sizing.GIB
        facts["proposal.memory_high_gb"] = worst.high / sizing.GIB
        facts["proposal.memory_verdict"] = verdict
        facts["proposal.memory_runtime"] = estimate.runtime
        facts["proposal.stage_fits"] = verdict == "fits"
        facts["proposal.replication_gb"] = worst.replica / sizing.GIB
        if verdict != "fits" and "proposal.memory_remedies" in uses:
            priced = sizing.remedies(manifest, strategy(sized_as), settings)
            facts["proposal.memory_remedies"] = (
                "; ".join(f"{change} -> {gib:.1f} GiB" for change, gib in priced) or None
            )
    runs: list[tuple[str, str | None]] = [("proposal", schedule)] if PRICED & uses else []
    if {"plan.bubble", "plan.gpu_hours"} & uses:  # no shipped rule reads them: simulated lazily
        runs.append(("plan", plan_schedule))
    if per_schedule:
        runs += [(f"schedules.{name}", name) for name in SCHEDULES]
    for prefix, name in runs:
        if name is None or p.pipeline == 1:
            continue
        result = sizing.bubble(strategy(name), settings)
        if result is not None:
            bubble = result.fraction
            facts[f"{prefix}.bubble"] = bubble
            # the step-time model's GPU-hours (docs/performance.md); the 6ND estimate where it
            # cannot price the layout (a custom accelerator without bandwidths)
            timed = perf.predicted(manifest, strategy(name), manifest.training.micro_batch_size)
            facts[f"{prefix}.gpu_hours"] = (
                timed.gpu_hours if timed else sizing.gpu_hours(manifest, bubble, settings)
            )
        if prefix.startswith("schedules."):
            memory = sizing.stage_memory(manifest, strategy(name), settings)
            if memory is not None:
                facts[f"{prefix}.stage_memory_gb"] = memory.worst.total / sizing.GIB
                facts[f"{prefix}.stage_fits"] = sizing.fits(manifest, memory, settings)
    return facts
