"""Training memory of the worst GPU of a pipeline: model states + activations (pure functions).

Sources: /work/shared/docs/domain.md (b) and schedules.md §5. Decisions (the plan prints
`MemoryBreakdown.assumptions`):

* GB -> bytes with GiB (2**30): HBM capacities are binary (A100 80 GB = 81,920 MiB);
  `headroom_fraction` covers the CUDA context and fragmentation.
* Model states, mixed-precision Adam (domain.md b.1), bytes/param: weights 2 (fp8 training keeps
  bf16 weights and casts per GEMM, so fp8 counts as bf16); grads 4 for bf16/fp8 (Megatron's fp32
  main-grad buffer), 2 for fp16; optimizer = fp32 master 4 + two moments (4 each, 2 for
  DeepSeek-V3's BF16 moments) + for fp16 an fp32 main-grad copy 4. This reproduces Megatron's
  dist_optimizer.md: bf16 18 -> 6 + 12/d, fp16 20 -> 4 + 16/d. ZeRO (arXiv 1910.02054 Fig. 1)
  shards over d: stage 1 the optimizer, stage 2 + grads, stage 3 + weights.
* Sharding (domain.md b.1 "MoE placement"): dense weights / (TP x PP), ZeRO over d = DP x CP
  (Megatron's distributed optimizer uses the DP-with-CP group); expert weights / (EP x ETP x PP),
  ZeRO over TP x CP x DP / (EP x ETP) (torchtitan: dp_shard*cp*tp == efsdp*ep). ETP defaults to TP
  (Megatron's default); DeepSeek-style runs set 1.
* MoE split without the FFN width: per_expert = (total - active) / (experts - top_k),
  expert_total = experts x per_expert, dense = the rest (attention, shared experts, dense layers,
  embeddings). Experts are assumed spread evenly over the layers.
* Worst rank: v chunks of ceil(L / (P x v)) layers plus one vocab x hidden matrix, or both
  (embedding and LM head) when P = 1 or the placement is V-shaped; vocab-parallel (/TP). Uneven
  first/last stages (Llama 3 §3.3.2) are not modelled, which errs on the large side.
* Activations per layer (Korthikanti et al. arXiv 2205.05198 Table 2), sequence parallelism
  assumed on whenever TP > 1: sbh(c/t + 5as/(ht)), c = 34. `flash_attention=True` (default) drops
  the 5as/(ht) score term (domain.md b.2 caveat: no s x s tensors kept); False gives the paper's
  form. Selective: sbh*c/t. Full: 2sbh (layer input, not /t, as in Table 2) plus one layer's
  activations while it is recomputed (our addition). CP divides s.
* In-flight activations (domain.md b.3, schedules.md §5) come from the caller as units x layers
  per unit. The LM-head rank also keeps fp32 logits 4sbv/t (Korthikanti §4.3) for one micro-batch:
  the result is the larger of the worst rank's stash and one unit + logits.
* A second parameter copy (DualPipe, arXiv 2412.19437 Table 2) repeats weights, grads and
  optimizer states; DualPipeV on N ranks is 1 copy with v = 2 (schedules.md §5 caution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

Precision = Literal["bf16", "fp8", "fp16"]
Recompute = Literal["none", "selective", "full"]

GIB = 2**30
KORTHIKANTI_COEFFICIENT = 34.0  # arXiv 2205.05198 §4.1: 11 attention + 19 MLP + 4 LayerNorm


@dataclass(frozen=True)
class ModelShape:
    """Model facts. `active_params` None means dense (= total); `experts` 0 means no MoE."""

    total_params: float
    layers: int
    hidden_size: int
    attention_heads: int
    seq_len: int
    vocab_size: int
    active_params: float | None = None
    experts: int = 0
    experts_per_token: int = 0
    tied_embeddings: bool = False
    activation_coefficient: float = KORTHIKANTI_COEFFICIENT

    def __post_init__(self) -> None:
        ints = (self.layers, self.hidden_size, self.attention_heads, self.seq_len, self.vocab_size)
        if min(ints) < 1 or self.total_params <= 0 or self.activation_coefficient <= 0:
            raise ValueError("model sizes must be positive")
        if self.moe and not 0 < self.experts_per_token < self.experts:
            raise ValueError("MoE needs 0 < experts_per_token < experts")
        if self.moe and not 0 < self.active <= self.total_params:
            raise ValueError("MoE needs 0 < active_params <= total_params")

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def active(self) -> float:
        return self.total_params if self.active_params is None else self.active_params


@dataclass(frozen=True)
class ParallelDegrees:
    """Degrees of one run. `pipeline` counts pipeline *ranks* (devices), `virtual_stages` chunks
    per rank (2 for DualPipeV / ZBV). `expert_tensor` None = `tensor`. SP is on when tensor > 1."""

    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    expert: int = 1
    context: int = 1
    virtual_stages: int = 1
    expert_tensor: int | None = None

    def __post_init__(self) -> None:
        degrees = (self.tensor, self.pipeline, self.data, self.expert, self.context)
        if min(*degrees, self.virtual_stages, self.etp) < 1:
            raise ValueError("parallel degrees must be >= 1")

    @property
    def etp(self) -> int:
        return self.tensor if self.expert_tensor is None else self.expert_tensor

    @property
    def sequence_parallel(self) -> bool:
        return self.tensor > 1


@dataclass(frozen=True)
class TrainingSetup:
    """Precision, ZeRO stage (0..3), recompute mode and micro-batch size of one run."""

    precision: Precision = "bf16"
    zero_stage: int = 1
    activation_recompute: Recompute = "none"
    micro_batch_size: int = 1
    optimizer_moment_bytes: int = 4  # 2 for BF16 moments (DeepSeek-V3 §3.3.3)
    flash_attention: bool = True

    def __post_init__(self) -> None:
        if self.zero_stage not in (0, 1, 2, 3) or self.micro_batch_size < 1:
            raise ValueError("zero_stage must be 0..3 and micro_batch_size >= 1")
        if self.optimizer_moment_bytes not in (2, 4):
            raise ValueError("optimizer_moment_bytes must be 2 (bf16) or 4 (fp32)")


@dataclass(frozen=True)
class ScheduleMemory:
    """Schedule facts from the simulator: peak in-flight activation units on the worst rank,
    layers per unit (None = one chunk, ceil(L/(P*v))), parameter copies, V-shaped placement."""

    in_flight_units: float
    layers_per_unit: float | None = None
    param_copies: int = 1
    v_shape: bool = False

    def __post_init__(self) -> None:
        if self.in_flight_units < 0 or self.param_copies < 1:
            raise ValueError("in_flight_units >= 0 and param_copies >= 1 required")


@dataclass(frozen=True)
class StateBytes:
    """Model-state bytes per parameter."""

    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes on the worst GPU. weights/gradients/optimizer are one parameter copy."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    replication_extra: float
    parameters: float  # parameters held by the worst GPU for one copy (before ZeRO-3)
    assumptions: tuple[str, ...]
    total: float = field(init=False)

    def __post_init__(self) -> None:
        parts = (self.weights, self.gradients, self.optimizer, self.activations)
        object.__setattr__(self, "total", sum(parts) + self.replication_extra)


def state_bytes(precision: Precision, moment_bytes: int = 4) -> StateBytes:
    """Unsharded bytes/param (Megatron dist_optimizer.md: bf16/fp32 18 B, fp16/fp16 20 B)."""
    if precision == "fp16":
        return StateBytes(2.0, 2.0, 4.0 + 4.0 + 2.0 * moment_bytes)  # + fp32 main-grad copy
    return StateBytes(2.0, 4.0, 4.0 + 2.0 * moment_bytes)  # bf16 and fp8 (bf16 weights kept)


def zero_sharded(state: StateBytes, zero_stage: int, degree: float) -> StateBytes:
    """Per-GPU bytes/param after ZeRO over `degree` ranks (arXiv 1910.02054 Fig. 1)."""
    return StateBytes(
        state.weights / degree if zero_stage >= 3 else state.weights,
        state.gradients / degree if zero_stage >= 2 else state.gradients,
        state.optimizer / degree if zero_stage >= 1 else state.optimizer,
    )


def expert_params(model: ModelShape) -> float:
    """All routed-expert parameters: experts x (total - active) / (experts - top_k); 0 if dense."""
    if not model.moe:
        return 0.0
    per_expert = (model.total_params - model.active) / (model.experts - model.experts_per_token)
    return model.experts * per_expert


def embedding_params(model: ModelShape) -> float:
    """Input embedding plus LM head (one shared matrix when tied)."""
    return model.vocab_size * model.hidden_size * (1 if model.tied_embeddings else 2)


def layers_on_rank(model: ModelShape, parallel: ParallelDegrees) -> int:
    """Layers on the worst pipeline rank: v chunks of ceil(L / (P*v)) layers."""
    chunks = parallel.pipeline * parallel.virtual_stages
    return math.ceil(model.layers / chunks) * parallel.virtual_stages


def vocab_matrices_on_rank(model: ModelShape, parallel: ParallelDegrees, v_shape: bool) -> int:
    """vocab x hidden matrices on the worst rank for one parameter copy."""
    both_ends = parallel.pipeline == 1 or v_shape
    return 2 if both_ends and not model.tied_embeddings else 1


def _expert_data_degree(parallel: ParallelDegrees) -> float:
    ranks = parallel.tensor * parallel.context * parallel.data
    group = parallel.expert * parallel.etp
    if ranks % group:
        raise ValueError(f"EP x ETP = {group} must divide TP x CP x DP = {ranks}")
    return ranks / group


def activation_bytes_per_layer(
    model: ModelShape, parallel: ParallelDegrees, training: TrainingSetup
) -> float:
    """Stored activation bytes of one layer for one micro-batch (arXiv 2205.05198 Table 2)."""
    s = model.seq_len / parallel.context
    sbh = s * training.micro_batch_size * model.hidden_size
    t = parallel.tensor
    if training.activation_recompute == "full":
        return 2.0 * sbh
    per_token = model.activation_coefficient / t
    if training.activation_recompute == "none" and not training.flash_attention:
        # 5as/(ht): softmax, dropout mask and scores over all s keys (queries are s/cp)
        per_token += 5.0 * model.attention_heads * model.seq_len / (model.hidden_size * t)
    return sbh * per_token


def activation_bytes(
    model: ModelShape,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    schedule: ScheduleMemory,
) -> float:
    """Peak activation bytes on the worst rank (stash + recompute working set + fp32 logits)."""
    per_layer = activation_bytes_per_layer(model, parallel, training)
    unit_layers = schedule.layers_per_unit
    if unit_layers is None:
        unit_layers = math.ceil(model.layers / (parallel.pipeline * parallel.virtual_stages))
    working = 0.0
    if training.activation_recompute == "full":
        no_recompute = replace(training, activation_recompute="none")
        working = activation_bytes_per_layer(model, parallel, no_recompute)
    s = model.seq_len / parallel.context
    logits = 4.0 * s * training.micro_batch_size * model.vocab_size / parallel.tensor
    head_on_worst = parallel.pipeline == 1 or schedule.v_shape or schedule.param_copies > 1
    stash = schedule.in_flight_units * unit_layers * per_layer + (logits if head_on_worst else 0)
    last_rank = unit_layers * per_layer + logits  # LM-head rank: one unit, then its backward
    return max(stash, last_rank) + working


def memory_per_gpu(
    model: ModelShape,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    schedule: ScheduleMemory,
) -> MemoryBreakdown:
    """Memory of the worst GPU of one pipeline rank (see the module docstring)."""
    layer_share = layers_on_rank(model, parallel) / model.layers
    experts = expert_params(model)
    dense_layers = model.total_params - experts - embedding_params(model)
    if dense_layers <= 0:
        raise ValueError("total_params leave nothing for the dense layers after the embeddings")
    vocab = vocab_matrices_on_rank(model, parallel, schedule.v_shape)
    vocab *= model.vocab_size * model.hidden_size
    dense = (dense_layers * layer_share + vocab) / parallel.tensor
    expert = experts * layer_share / (parallel.expert * parallel.etp)

    unsharded = state_bytes(training.precision, training.optimizer_moment_bytes)
    dense_d = parallel.data * parallel.context
    per_dense = zero_sharded(unsharded, training.zero_stage, dense_d)
    per_expert = zero_sharded(unsharded, training.zero_stage, _expert_data_degree(parallel))
    weights = dense * per_dense.weights + expert * per_expert.weights
    grads = dense * per_dense.gradients + expert * per_expert.gradients
    optim = dense * per_dense.optimizer + expert * per_expert.optimizer
    extra = (schedule.param_copies - 1) * (weights + grads + optim)

    act_form = {
        "none": "sbh(c/t)" if training.flash_attention else "sbh(c/t + 5as/(ht))",
        "selective": "sbh(c/t)",
        "full": "2sbh + one layer's sbh(c/t) while recomputed",
    }[training.activation_recompute]
    expert_d = f", {_expert_data_degree(parallel):g} (expert)" if model.moe else ""
    assumptions = (
        f"model states {unsharded.total:g} B/param ({training.precision}: weights "
        f"{unsharded.weights:g} + grads {unsharded.gradients:g} + optimizer "
        f"{unsharded.optimizer:g}), ZeRO-{training.zero_stage} over {dense_d} (dense)"
        f"{expert_d} ranks",
        f"worst rank: {layers_on_rank(model, parallel)} of {model.layers} layers, "
        f"{dense:.4g} dense + {expert:.4g} expert params"
        + (f", x{schedule.param_copies} parameter copies" if schedule.param_copies > 1 else ""),
        f"activations Korthikanti {act_form}, c = {model.activation_coefficient:g}, SP "
        f"{'on' if parallel.sequence_parallel else 'off'}, {schedule.in_flight_units:g} "
        f"micro-batch{'' if schedule.in_flight_units == 1 else 'es'} in flight",
    )
    return MemoryBreakdown(
        weights=weights,
        gradients=grads,
        optimizer=optim,
        activations=activation_bytes(model, parallel, training, schedule),
        replication_extra=extra,
        parameters=dense + expert,
        assumptions=assumptions,
    )


def fits(breakdown: MemoryBreakdown, memory_gb: float, headroom_fraction: float = 0.1) -> bool:
    """True when the total stays under memory_gb GiB less `headroom_fraction` of it."""
    if not 0 <= headroom_fraction < 1:
        raise ValueError("headroom_fraction must be in [0, 1)")
    return breakdown.total <= memory_gb * GIB * (1.0 - headroom_fraction)


def single_gpu_breakdown(
    model: ModelShape, training: TrainingSetup, data_parallel: int = 1
) -> MemoryBreakdown:
    """Pure data parallel over `data_parallel` GPUs (ZeRO shards over them): the whole model's
    states plus one micro-batch of activations through all layers on one GPU."""
    parallel = ParallelDegrees(data=data_parallel)
    return memory_per_gpu(model, parallel, training, ScheduleMemory(1, model.layers))


def model_fits_one_gpu(
    model: ModelShape,
    training: TrainingSetup,
    memory_gb: float,
    headroom_fraction: float = 0.1,
    data_parallel: int = 1,
) -> bool:
    """Whether pipeline parallelism is unnecessary: see `single_gpu_breakdown`."""
    breakdown = single_gpu_breakdown(model, training, data_parallel)
    return fits(breakdown, memory_gb, headroom_fraction)
