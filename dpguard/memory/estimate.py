"""Per-rank memory: stage placement, model states, activations in flight, the loss and the
runtime buffers, the error band and the verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple

from dpguard.memory.activations import layer_activation_bytes, layer_wgrad_bytes
from dpguard.memory.shape import GIB, Architecture, ParamLayout, PipelineImpl, layer_params
from dpguard.memory.states import (
    ParallelDegrees,
    StateBytes,
    TrainingSetup,
    sharded_bytes,
    state_bytes,
    step_copy_bytes,
)
from dpguard.schedules.registry import SCHEDULES

# ---- Per-rank memory --------------------------------------------------------------------------


class PipelineLayout(NamedTuple):
    """How a schedule places stages: `stages` in total over `ranks` devices, `stage_ranks[s]`
    the rank of stage s; `mirror` (DualPipe) keeps a second copy of stage P-1-r on rank r.
    `inflight[r]`: peak in-flight (stage, micro-batch) activations of rank r; `deferred_w`:
    the ZB-H1 order, whose rank r also keeps r deferred weight passes (inflight.zb1p_peak)."""

    ranks: int
    stages: int
    stage_ranks: tuple[int, ...]
    inflight: tuple[int, ...]
    mirror: bool = False
    lead: int = 0  # the split counts the embedding as a layer of the first stage
    tail: int = 0  # ... and the loss as a layer of the last stage
    counts: tuple[int, ...] = ()  # layers of each stage when set by hand (stage_layers)
    microbatches: int = 1  # M per step
    deferred_w: bool = False


def pipeline_layout(
    schedule: str, ranks: int, virtual: int, inflight: Sequence[int]
) -> PipelineLayout:
    """Stage placement of `schedule`, from its registry entry (dpguard.schedules): the stage
    count, each stage's rank, DualPipe's mirrored copy, ZB-H1's deferred weight passes."""
    spec = SCHEDULES[schedule]
    stages = spec.stages(ranks, spec.virtual(virtual))
    return PipelineLayout(
        ranks,
        stages,
        spec.placement(ranks, stages),
        tuple(inflight),
        mirror=spec.mirrored,
        deferred_w=spec.defers_weight,
    )


def stage_layers(
    layers: int, stages: int, lead: int = 0, tail: int = 0, counts: Sequence[int] = ()
) -> list[range]:
    """Layer indices of each stage: `counts` when they are given for every stage and add up to
    the layers (a split set by hand: Megatron's pipeline layout, or its first/last stage
    sizes), else an even split of `lead` + `layers` + `tail` slots, the remainder spread
    (Megatron needs exact division unless first/last stages are set by hand; ADV002 flags the
    uneven case). `lead`/`tail` are the embedding and the loss when the split counts them as
    layers (Megatron's account-for-embedding/loss; Llama 3 removes a layer from the first and
    the last stage, arXiv 2407.21783 §3.3.2)."""
    if len(counts) == stages and sum(counts) == layers:
        ends = list(accumulate(counts))
        return [range(end - n, end) for n, end in zip(counts, ends, strict=True)]
    slots = lead + layers + tail
    return [
        range(max(s * slots // stages - lead, 0), min((s + 1) * slots // stages - lead, layers))
        for s in range(stages)
    ]


class Uncertainty(NamedTuple):
    """Relative error bands (low, high) of each part, measured on the calibration runs."""

    states: tuple[float, float] = (0.03, 0.05)
    activations: tuple[float, float] = (0.40, 0.60)
    overhead_gib: float = 1.5  # CUDA context, cuBLAS/TE workspaces, allocator slack (central)
    # GiB of NCCL's buffers per communicator (`communicators`) and their band; where the
    # numbers come from: policies/planner.yaml, memory_uncertainty
    communicator_gib: float = 0.43
    communicators: tuple[float, float] = (0.70, 2.50)


DEFAULT_UNCERTAINTY = Uncertainty()


class RankMemory(NamedTuple):
    """Bytes on one GPU of pipeline rank `rank`. `replica` is DualPipe's second parameter copy
    (weights + gradients + optimizer states of the mirrored stage)."""

    rank: int
    weights: float
    gradients: float
    optimizer: float
    replica: float
    activations: float
    other: float  # logits, FSDP gather and gradient-reduction buffers, pipeline runtime
    # buffers, runtime overhead
    inflight: int
    layers: int
    parameters: float  # parameters this GPU holds, both copies under DualPipe (before ZeRO-3)
    low: float
    high: float
    communicators: float = 0.0  # NCCL's buffers (part of `other`), outside PyTorch's allocator

    @property
    def total(self) -> float:
        # states + activations + other, summed in that order (inlined: the planner reads it
        # for every rank of every layout it sizes)
        return (
            (self.weights + self.gradients + self.optimizer + self.replica)
            + self.activations
            + self.other
        )

    @property
    def states(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.replica

    def gib(self) -> dict[str, float | int]:
        """The JSON contract of `dpguard memory` (docs/memory.md), GiB to 0.01."""
        parts = {
            "weights_gib": self.weights,
            "gradients_gib": self.gradients,
            "optimizer_gib": self.optimizer,
            "replica_gib": self.replica,
            "activations_gib": self.activations,
            "other_gib": self.other,
            "communicators_gib": self.communicators,
            "total_gib": self.total,
            "low_gib": self.low,
            "high_gib": self.high,
        }
        out: dict[str, float | int] = {"rank": self.rank}
        out.update({k: round(v / GIB, 2) for k, v in parts.items()})
        out["inflight_microbatches"] = self.inflight
        return out


class MemoryEstimate(NamedTuple):
    ranks: tuple[RankMemory, ...]
    assumptions: tuple[str, ...]
    # the runtime it assumed, in words (sizing.stage_memory: the framework profile, or the
    # profiles a framework-less band spans); also the last of the assumptions
    runtime: str = ""

    @property
    def worst(self) -> RankMemory:
        """The rank with the most bytes in total, the lowest such rank on a tie."""
        totals = [r.total for r in self.ranks]
        most = max(totals)
        return min((r for r, t in zip(self.ranks, totals, strict=True) if t == most), key=_rank_of)


def _rank_of(r: RankMemory) -> int:
    return r.rank


def output_bytes(
    arch: Architecture, parallel: ParallelDegrees, training: TrainingSetup, tokens: float
) -> float:
    """The loss's peak on the last stage, by implementation (runtime.cross_entropy):
    - fused: Megatron's vocab-parallel cross-entropy keeps the fp32 logits (4 B each,
      Korthikanti §4.3);
    - unfused (torchtitan's `pred.float()` then F.cross_entropy) peaks as the backward pass
      starts: the fp32 log-probabilities, their gradient and the input's gradient, 12 B;
      DTensor's vocab-parallel log-softmax backward adds an exp temporary beside the gradient
      (torch/distributed/tensor/parallel/loss.py), 16 B;
    - chunked (torchtune's CEWithChunkedOutputLoss, 8 chunks): every chunk's bf16 logits stay
      for the backward pass (2 B) and one chunk at a time runs the unfused fp32 loss (12 B / 8);
    - fused_linear (Liger's LigerFusedLinearCrossEntropy, fused_linear_cross_entropy.py): the
      output projection and the loss run chunk by chunk in the forward pass, in chunks of
      BT / ceil(V / H) tokens so that a chunk's logits are the size of the hidden states; no
      full logits, but the input's gradient (2 B per hidden value), one chunk's bf16 logits
      (about as many) and the output weight's gradient (V x H / TP, 2 B) until the backward.
    DTensor also keeps the final norm's output all-gathered for the output projection."""
    t = parallel.tensor
    if training.loss == "fused_linear":
        out = 4.0 * tokens * arch.hidden_size + 2.0 * arch.vocab_size * arch.hidden_size / t
    else:
        per_logit = {"fused": 4.0, "chunked": 2.0 + 12.0 / _LOSS_CHUNKS}.get(training.loss, 12.0)
        if training.loss == "unfused" and training.dtensor_tp and t > 1:
            per_logit = 16.0
        out = per_logit * tokens * arch.vocab_size / t
    if training.dtensor_tp and t > 1:
        out += 2.0 * tokens * arch.hidden_size
    return out


# torchtune's TransformerDecoder.num_output_chunks with CEWithChunkedOutputLoss (its recipes)
_LOSS_CHUNKS = 8


def _stage_params(
    arch: Architecture, layout: ParamLayout, layers: range, first: bool, last: bool, pipeline: int
) -> tuple[float, float]:
    """(dense, expert) parameters of one stage, one copy, before any sharding."""
    moe = arch.moe_layers_in(layers)
    plain = len(layers) - moe
    dense = moe * layout.moe_layer.dense + plain * layout.dense_layer.dense
    expert = moe * layout.moe_layer.expert + plain * layout.dense_layer.expert
    vh = arch.vocab_size * arch.hidden_size
    if first:
        dense += vh
    if last and (pipeline > 1 or not arch.tied_embeddings):
        dense += vh  # output layer; with P > 1 Megatron keeps a copy of the tied embedding here
    if last:
        dense += layout.mtp.dense
        expert += layout.mtp.expert
    return dense, expert


class _StageStates(NamedTuple):
    """Bytes of one stage's states on one GPU, its parameters (before ZeRO-3), the gradients
    FSDP keeps on its reduce-scatter stream, and the step's fp32 gradient copy."""

    weights: float
    gradients: float
    optimizer: float
    params: float
    side: float
    step_copy: float


def _sum_states(parts: list[_StageStates]) -> _StageStates:
    return _StageStates(*map(sum, zip(*parts, strict=True)))


class _Sharded(NamedTuple):
    """Bytes per parameter on one GPU: dense and expert states, and the sharded gradients
    FSDP keeps reserved on its reduce-scatter stream beside them."""

    dense: StateBytes
    expert: StateBytes
    side_dense: float
    side_expert: float


def _sharded_states(
    parallel: ParallelDegrees, training: TrainingSetup, ranks: int, microbatches: int
) -> _Sharded:
    """Model-state bytes per parameter under ZeRO over data x context (dense) and the expert
    data-parallel group, as FSDP holds them across a step's micro-batches."""
    fsdp_pipe = training.zero_stage >= 3 and ranks > 1
    # FSDP under pipeline parallelism keeps parameters gathered and gradients unsharded
    # across the micro-batches of a step (torchtitan's default reshard policy with PP;
    # DeepSpeed refuses ZeRO-3 with PP): only the optimizer stays sharded.
    zero = 1 if fsdp_pipe else training.zero_stage
    dense_degree = parallel.data * parallel.context
    per_dense = sharded_bytes(training, dense_degree, zero)
    per_expert = sharded_bytes(training, parallel.expert_data, zero)
    deferred = (
        training.deferred_grad_sync
        and training.zero_stage >= 2
        and not fsdp_pipe
        and microbatches > 1
    )
    if deferred:
        # FSDP2 with set_requires_gradient_sync(False) (_fsdp_param_group.py post_backward,
        # _fsdp_param.py to_accumulated_grad_if_needed) keeps each parameter's unsharded
        # gradient, cast to the reduce dtype, from the first backward pass of a step to the
        # last: the gradients are not sharded, the weights and optimizer states still are
        per_dense = per_dense._replace(gradients=sharded_bytes(training, dense_degree, 1).gradients)
        per_expert = per_expert._replace(
            gradients=sharded_bytes(training, parallel.expert_data, 1).gradients
        )
    # torch FSDP2 reduce-scatters into gradients it allocates on its reduce-scatter stream
    # (_fsdp_collectives.py foreach_reduce), and the caching allocator hands a freed block
    # only to the stream that allocated it (CUDACachingAllocator.cpp get_free_block): those
    # blocks stay reserved beside the default stream's peak. Without PP they are the sharded
    # gradients the states count; under PP the states hold the unsharded accumulators, and
    # the sharded gradients (alive from the step's reduction to the next zero_grad) are
    # reserved memory besides, never live at the backward peak.
    side = fsdp_pipe or deferred
    side_dense = sharded_bytes(training, dense_degree).gradients if side else 0.0
    side_expert = sharded_bytes(training, parallel.expert_data).gradients if side else 0.0
    return _Sharded(per_dense, per_expert, side_dense, side_expert)


def states_floor(
    arch: Architecture,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    ranks: int,
    mirror: bool = False,
) -> float:
    """A lower bound of the largest model states a rank of a `ranks`-deep pipeline holds
    (RankMemory.states, so of the worst rank's total), in constant time: the mean over the
    ranks, which the worst one reaches at least. The planner skips a layout it rules out without
    estimating it. The model counted once (the second copy of a tied embedding under P > 1 left
    out), its gradients sharded as without deferred gradient sync: each choice only lowers the
    bound. `mirror`: DualPipe, whose ranks hold every stage twice over."""
    layout = layer_params(arch)
    dense, expert = _stage_params(arch, layout, range(arch.layers), True, True, 1)
    per_dense, per_expert, _, _ = _sharded_states(parallel, training, ranks, 1)
    total = dense / parallel.tensor * sum(per_dense)
    total += expert / (parallel.expert * parallel.etp) * sum(per_expert)
    copies = 2 if mirror else 1
    return copies * total / ranks * (1 - 1e-9)  # below the exact sums' rounding


# Remembered by every input (all frozen): a review sizes the same layout of the same model
# under the same setup again and again, within a file (the planner's passes, the verdict, its
# remedies) and across files that differ only in what memory does not read (a batch's variants).
@lru_cache(maxsize=1024)
def estimate(
    arch: Architecture,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    pipeline: PipelineLayout,
    uncertainty: Uncertainty = DEFAULT_UNCERTAINTY,
) -> MemoryEstimate:
    """Memory of one GPU of every pipeline rank (see the module docstring)."""
    stages, shared = _prepare(arch, parallel, training, pipeline)
    ranks = _ranks(stages, pipeline, training, parallel.tensor, shared, uncertainty, True)
    return MemoryEstimate(tuple(ranks.ranks), _assumptions(arch, parallel, training, pipeline))


@lru_cache(maxsize=1024)
def rank_estimate(
    arch: Architecture,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    pipeline: PipelineLayout,
    rank: int,
    uncertainty: Uncertainty = DEFAULT_UNCERTAINTY,
) -> RankMemory:
    """`estimate(...).ranks[rank]`, that rank alone (each rank's bytes depend on what it holds,
    never on the other ranks): a verdict's band across framework profiles reads one rank of
    each profile's estimate, not all 64 of a deep pipeline."""
    stages, shared = _prepare(arch, parallel, training, pipeline)
    computed = _ranks(
        stages, pipeline, training, parallel.tensor, shared, uncertainty, True, (rank,)
    )
    return computed.ranks[0]


class Peak(NamedTuple):
    """What the planner's search reads of an estimate that may not fit: the worst rank's
    bytes (MemoryEstimate.worst.total) and the most model-state bytes any rank holds."""

    total: float
    states: float


@lru_cache(maxsize=1024)
def peak(
    arch: Architecture,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    pipeline: PipelineLayout,
    uncertainty: Uncertainty = DEFAULT_UNCERTAINTY,
) -> Peak:
    """`estimate`'s worst total and largest states, the same bytes, without its bands, its
    per-rank records and its assumptions: the search sizes most layouts only to find that
    they do not fit, and builds the whole estimate for those that do."""
    stages, shared = _prepare(arch, parallel, training, pipeline)
    only = _contenders(arch, training, pipeline)
    ranks = _ranks(stages, pipeline, training, parallel.tensor, shared, uncertainty, False, only)
    return Peak(max(ranks.totals), max(ranks.states))


def _contenders(
    arch: Architecture, training: TrainingSetup, pipeline: PipelineLayout
) -> Sequence[int]:
    """The ranks among which the worst total and the largest states lie, for `peak`. Ranks
    holding the same kinds of stage (`_split`) differ only in their in-flight micro-batches,
    and every byte `_ranks` adds for them grows with those (each term a sum of non-negative
    parts, every float operation monotone), so of each such group the rank with the most in
    flight is enough: a deep 1F1B pipeline is two or three ranks, not 64. All ranks where a
    rank's bytes depend on more than that: ZB-H1's deferred weight passes (by rank), the
    block method's activations (by stage), fp16's step phase (a max that can shrink as the
    activations grow). tests/test_memory_peak.py holds `peak` to `estimate`."""
    block = training.activation_recompute == "full" and training.recompute_method == "block"
    deferred = pipeline.deferred_w and not training.activation_offload
    if block or deferred or step_copy_bytes(training):
        return range(pipeline.ranks)
    split = _split_of(arch, pipeline)
    return _representatives(
        split.kinds,
        pipeline.stage_ranks,
        pipeline.mirror,
        pipeline.inflight,
        training.pipeline_impl == "torch",
    )


@lru_cache(maxsize=1024)
def _representatives(
    kinds: tuple[int, ...],
    stage_ranks: tuple[int, ...],
    mirror: bool,
    inflight: tuple[int, ...],
    torch: bool,
) -> tuple[int, ...]:
    """`_contenders` for a layout's shape: of the ranks holding the same kinds of stage, the
    first with the most micro-batches in flight. Under torch's pipelining a rank whose stages
    receive more inputs than they send outputs keeps fewer buffers the more it has in flight
    (`_buffers`): such ranks (only the last stage's, whose kinds no other rank shares) stay."""
    best: dict[tuple[int, ...], int] = {}
    kept = []
    holdings = _holdings(stage_ranks, len(inflight), len(kinds), mirror)
    for r, holding in enumerate(holdings):
        if torch and holding.later > holding.earlier:
            kept.append(r)
            continue
        key = tuple(kinds[s] for s in holding.held)
        if key not in best or inflight[r] > inflight[best[key]]:
            best[key] = r
    return tuple(sorted([*kept, *best.values()]))


def _prepare(
    arch: Architecture, parallel: ParallelDegrees, training: TrainingSetup, pipeline: PipelineLayout
) -> tuple[list[_Stage], _Shared]:
    """Every stage's numbers and what every rank adds alike, for `_ranks`."""
    tokens = arch.seq_len / parallel.context * training.micro_batch_size
    logits = output_bytes(arch, parallel, training, tokens)
    if training.pipeline_impl == "torch" and pipeline.ranks > 1:
        # torch.distributed.pipelining's last stage keeps each micro-batch's output (bf16
        # logits, vocabulary-parallel over TP) until the step ends, to return them merged
        # (stage.py output_chunks; pytorch/pytorch#138504 detaches them, #159251 asks to stop):
        # all M, the one whose loss runs backward too (output_bytes prices its fp32 temporaries)
        logits += pipeline.microbatches * 2.0 * tokens * arch.vocab_size / parallel.tensor
    # a stage's input or output: one micro-batch's hidden states, sequence-sharded under SP
    boundary = 2.0 * tokens * arch.hidden_size / (parallel.tensor if parallel.sp else 1)
    act = {
        moe: layer_activation_bytes(arch, moe, parallel, training)
        for moe in ((False, True) if arch.moe else (False,))
    }
    working = 0.0
    kept = act  # a layer that full recompute's block method leaves out keeps everything
    group = 1  # layers recomputed together
    if training.activation_recompute in ("full", "selective_op"):
        no = _without_recompute(training)
        kept = {m: layer_activation_bytes(arch, m, parallel, no) for m in act}
        if training.activation_recompute == "full" and training.recompute_method == "uniform":
            group = training.recompute_num_layers
        # One group's recomputed activations while it runs its backward (its input is kept).
        working = max(group * kept[m] - act[m] for m in act)
    stages = _stages(arch, parallel, training, pipeline, _Acts(act, kept, group))
    if arch.dropout:
        # The embedding runs outside the recomputed blocks (Megatron-core's
        # LanguageModelEmbedding, DeepSpeed PipelineModule._is_checkpointable): its dropout
        # keeps a 1 B mask per element for each micro-batch in flight (Megatron-LM
        # theoretical_memory_usage.py, 'Dropout in embedding layer'): half a bf16 boundary.
        stages[0] = stages[0]._replace(act=stages[0].act + boundary / 2)
    shared = _Shared(
        working,
        arch.mtp_layers * act[arch.moe],
        logits,
        boundary,
        _gather_bytes(arch, parallel, training, pipeline),
        # DeepSpeed 0.6.2-0.14.0's pipeline engine all-reduces BF16_Optimizer's flat fp32
        # gradients through a bf16 copy of the whole buffer (pipe/engine.py _bf16_reduce_grads
        # -> engine.py allreduce_bucket, communication_data_type bf16): 2 B per parameter after
        # the last backward pass. No activation segment is that large, so the caching allocator
        # maps a new one and keeps it reserved beside the activations' (what nvidia-smi and
        # max_memory_reserved show); under memory pressure it frees its cache first, so only
        # the larger phase is certain.
        2.0 if _bf16_pipe_reduce(training, pipeline.ranks) else 0.0,
        communicators(parallel, training, pipeline.ranks, arch.tied_embeddings),
    )
    return stages, shared


def communicators(
    parallel: ParallelDegrees, training: TrainingSetup, pipeline_ranks: int, tied: bool
) -> tuple[int, int]:
    """The NCCL communicators one GPU holds (each keeps its buffers on the GPU, outside
    PyTorch's allocator: nvidia-smi shows them, torch.cuda.max_memory_* does not; NVIDIA/nccl
    #864, #986: more communicators, more memory, linear in channels), as (every rank's, more
    on the ranks holding the first or the last stage). The default group (start-up
    barriers; DeepSpeed's stage-to-stage sends), one per parallel dimension the rank
    communicates in (tensor, context, data, expert all-to-all and the expert gradients'
    own reduction, pipeline), the framework's extra groups (`process_groups`: DeepSpeed's
    slice group, a model-parallel group for the gradient norm), and the group that
    all-reduces tied embeddings between the first and the last stage. None on one GPU."""
    t, c, d, e = parallel.tensor, parallel.context, parallel.data, parallel.expert
    if t * c * d * pipeline_ranks == 1:
        return 0, 0
    every = (
        1
        + (training.tensor_groups if t > 1 else 0)
        + (c > 1)
        + (d * c > 1)
        + (e > 1)
        + (e > 1 and parallel.expert_data > 1)
        + (pipeline_ranks > 1)
        + (training.model_parallel_group and t * pipeline_ranks > 1)
    )
    return every, int(tied and pipeline_ranks > 1)


@lru_cache(maxsize=64)
def _without_recompute(training: TrainingSetup) -> TrainingSetup:
    """`training` keeping every activation (what a layer holds while it is recomputed);
    remembered: the planner sizes hundreds of layouts with one setup."""
    return replace(training, activation_recompute="none")


class _Acts(NamedTuple):
    """One micro-batch's activations per layer (keyed by `moe`): as the recompute policy keeps
    them, as a layer keeps them when nothing is recomputed, and the layers recomputed together."""

    act: dict[bool, float]
    kept: dict[bool, float]
    group: int


class _Stage(NamedTuple):
    """One pipeline stage as its ranks add it up: its states on one GPU, its layers, one
    micro-batch's activations through it, and what its deferred weight passes keep (ZB-H1)."""

    states: _StageStates
    layers: int
    act: float
    wgrad: float


def _stages(
    arch: Architecture,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    pipeline: PipelineLayout,
    acts: _Acts,
) -> list[_Stage]:
    """Every stage's states, layers and activations, each computed once per kind of stage
    (its size, its MoE layers, first or last): a deep pipeline has 64 stages and two or three
    kinds, and the planner sizes hundreds of layouts."""
    layout = layer_params(arch)
    per_dense, per_expert, side_dense, side_expert = _sharded_states(
        parallel, training, pipeline.ranks, pipeline.microbatches
    )
    split = _split_of(arch, pipeline)
    ranges = split.ranges
    last_stage = pipeline.stages - 1
    # the step's gradient copy is sharded like the optimizer states (ZeRO 1 and up)
    copy = step_copy_bytes(training)
    copy_dense = copy / (parallel.data * parallel.context) if training.zero_stage >= 1 else copy
    copy_expert = copy / parallel.expert_data if training.zero_stage >= 1 else copy
    act, kept, group = acts
    block = training.activation_recompute == "full" and training.recompute_method == "block"
    wgrad: dict[bool, float] = {}
    if pipeline.deferred_w and not training.activation_offload:
        wgrad = {m: layer_wgrad_bytes(arch, m, parallel, training) for m in act}

    def states(stage: int) -> _StageStates:
        dense, expert = _stage_params(
            arch, layout, ranges[stage], stage == 0, stage == last_stage, pipeline.ranks
        )
        dense /= parallel.tensor
        expert /= parallel.expert * parallel.etp
        return _StageStates(
            dense * per_dense.weights + expert * per_expert.weights,
            dense * per_dense.gradients + expert * per_expert.gradients,
            dense * per_dense.optimizer + expert * per_expert.optimizer,
            dense + expert,
            dense * side_dense + expert * side_expert,
            dense * copy_dense + expert * copy_expert,
        )

    def by_kind(per_layer: dict[bool, float], layers: range) -> float:
        """`per_layer` bytes (keyed by `moe`) summed over `layers`."""
        moe = arch.moe_layers_in(layers)
        return (len(layers) - moe) * per_layer[False] + (moe * per_layer[True] if moe else 0.0)

    def stage_act(layers: range) -> float:
        if block:  # Megatron-core's block method: the first N layers of each stage
            n = min(training.recompute_num_layers, len(layers))
            return n * act[False] + by_kind(kept, range(layers.start + n, layers.stop))
        if group > 1:  # one kept input per group of layers (the input is the same either kind)
            return -(-len(layers) // group) * act[False]
        return by_kind(act, layers)

    kinds = [
        _Stage(
            states(first),
            len(ranges[first]),
            stage_act(ranges[first]),
            by_kind(wgrad, ranges[first]) if wgrad else 0.0,
        )
        for first in split.firsts
    ]
    if block:  # the block method's activations depend on where the stage starts
        return [
            kinds[k]._replace(act=stage_act(r)) for k, r in zip(split.kinds, ranges, strict=True)
        ]
    return [kinds[k] for k in split.kinds]


class _Split(NamedTuple):
    """A pipeline's stages (`stage_layers`) as kinds: stages of the same size, MoE layers and
    place (first, last) hold the same states and activations, so each kind is sized once."""

    ranges: tuple[range, ...]
    kinds: tuple[int, ...]  # each stage's kind
    firsts: tuple[int, ...]  # each kind's first stage


def _split_of(arch: Architecture, pipeline: PipelineLayout) -> _Split:
    """The layer split of `pipeline`'s stages for `arch` (a dense model has no MoE layers)."""
    return _split(
        arch.layers,
        arch.dense_layers if arch.moe else None,
        pipeline.stages,
        pipeline.lead,
        pipeline.tail,
        pipeline.counts,
    )


@lru_cache(maxsize=1024)
def _split(
    layers: int,
    moe_from: int | None,
    stages: int,
    lead: int,
    tail: int,
    counts: tuple[int, ...],
) -> _Split:
    """`stage_layers` by kind; `moe_from`: the first MoE layer (Architecture.dense_layers),
    None for a dense model. Remembered: the planner sizes each split many times over."""
    ranges = tuple(stage_layers(layers, stages, lead, tail, counts))
    index: dict[tuple[int, int, bool, bool], int] = {}
    kinds: list[int] = []
    firsts: list[int] = []
    for stage, r in enumerate(ranges):
        moe = 0 if moe_from is None else max(0, r.stop - max(r.start, moe_from))
        kind = (len(r), moe, stage == 0, stage == stages - 1)
        if kind not in index:
            index[kind] = len(firsts)
            firsts.append(stage)
        kinds.append(index[kind])
    return _Split(ranges, tuple(kinds), tuple(firsts))


class _Shared(NamedTuple):
    """What every rank of one estimate adds alike (`_ranks`)."""

    working: float  # one recomputed group's activations while it runs its backward
    mtp_act: float  # the MTP layers' activations (last stage)
    logits: float  # the loss's peak (last stage)
    boundary: float  # one micro-batch's stage input or output
    gather: float  # FSDP's per-layer gather buffers
    reduce_copy_bytes: float  # bytes per parameter of DeepSpeed's bf16 gradient copy
    communicators: tuple[int, int]  # `communicators`: every rank's, the first/last stage's more


def _gather_bytes(
    arch: Architecture, parallel: ParallelDegrees, training: TrainingSetup, pipe: PipelineLayout
) -> float:
    """FSDP's per-layer collectives (one layer's parameters, / TP; torch FSDP2
    _fsdp_collectives.py): the all-gather fills a flat buffer on its own stream for the layer
    and the prefetched next one. Without pipeline parallelism the reduce-scatter also copies
    the layer's gradients into a flat buffer in the reduce dtype, held until the next layer's
    is issued, and the layer's bf16 gradients exist until that copy. Under it the weights stay
    gathered and the gradients accumulate unsharded (both priced as states), and torch's
    pipelining reduces them after the last backward pass (stage.py backward_maybe_with_nosync),
    once the activations are gone. None below ZeRO-3."""
    if training.zero_stage < 3:
        return 0.0
    layout = layer_params(arch)
    per_param = 2 * state_bytes(training).weights
    if pipe.ranks == 1:
        per_param += training.grad_bytes + 2.0
    layer = max(layout.dense_layer.dense, layout.moe_layer.dense) / parallel.tensor
    return per_param * layer


def _ranks(
    stages: list[_Stage],
    pipeline: PipelineLayout,
    training: TrainingSetup,
    tensor: int,
    shared: _Shared,
    uncertainty: Uncertainty,
    full: bool,
    only: Sequence[int] | None = None,
) -> _Computed:
    """Each rank's memory from the stages it holds, its whole record only when `full`: the
    planner sizes hundreds of layouts of up to 64 ranks, so this loop is what it pays for
    (per-stage numbers and who holds what come precomputed; each sum keeps its order, so the
    bytes are those of a plain rank-by-rank sum). `only`: those ranks alone (`_contenders`)."""
    from dpguard.schedules.inflight import zb1p_peak  # as sizing.pipeline_layout does

    deferred = pipeline.deferred_w and not training.activation_offload
    working, mtp_act, logits, boundary, gather, reduce_copy_bytes, groups = shared
    c_lo, c_hi = uncertainty.communicators
    overhead = uncertainty.overhead_gib * GIB
    per_group = uncertainty.communicator_gib * GIB
    impl, microbatches = training.pipeline_impl, pipeline.microbatches
    inflight, offload, mirror = pipeline.inflight, training.activation_offload, pipeline.mirror
    holdings = _holdings(pipeline.stage_ranks, pipeline.ranks, pipeline.stages, mirror)
    out = _Computed([], [], [])
    totals, states = out.totals, out.states
    for r in range(len(holdings)) if only is None else only:
        own, held, has_last, later, earlier = holdings[r]
        if len(held) == 1:  # one stage per rank (1F1B, ZB-H1, GPipe)
            stage = stages[held[0]]
            mine, replica, layer_count, acts = stage.states, 0.0, stage.layers, stage.act
            w, g, o = mine.weights, mine.gradients, mine.optimizer
        else:
            mine, (w, g, o), replica, layer_count, acts = _several(stages, own, held, mirror)
        units = inflight[r]
        if offload:
            # Kimi K2 §2.4.3: the micro-batch being computed and the one being prefetched stay
            # on the GPU; the other in-flight activations wait in host memory.
            units = min(units, 2)
        # Each in-flight unit is one micro-batch through one of the rank's stages: the rank's
        # layers per stage, at the rank's average bytes per layer.
        activations = units * acts / len(held)
        if deferred:  # ZB-H1 (one stage per rank): its deferred weight passes
            activations = zb1p_peak(
                pipeline.ranks, r, microbatches, activations / units, stages[own[0]].wgrad
            )
        activations += working if layer_count else 0.0
        loss = 0.0
        if has_last:
            loss = logits
            activations += mtp_act  # MTP layers: one micro-batch on the last stage
        buffers = (
            0.0  # Megatron-core keeps none (`_runtime_buffers`)
            if impl == "megatron"
            else boundary * _buffers(impl, later, earlier, len(held), units, microbatches, tensor)
        )
        reduce_copy = reduce_copy_bytes * mine.params
        step_copy = mine.step_copy
        if impl == "deepspeed":
            # DeepSpeed flattens the step's fp32 gradient copy into one buffer, as large as
            # the bf16 reduce copy: reserved beside the activations' segments the same way
            reduce_copy, step_copy = reduce_copy + step_copy, 0.0
        comms = per_group * (groups[0] + (groups[1] if has_last or 0 in held else 0))
        fixed = overhead + comms  # outside the tensors, in every phase
        # reserved beside the peak, never live in it: the low bound leaves the FSDP
        # reduce-scatter stream's gradients out (the allocator frees cached blocks before
        # failing) and takes DeepSpeed's reduce copy only as the step's own phase
        other = fixed + gather + loss + buffers + reduce_copy + mine.side
        state_total = w + g + o + replica
        step = state_total + step_copy
        if step_copy:
            # Megatron's per-tensor copies fit in the blocks the freed activations leave: the
            # step is a phase of its own, and the rank needs the larger of the two
            other += max(0.0, step + fixed - (state_total + activations + other))
        totals.append(state_total + activations + other)  # as RankMemory.total sums it
        states.append(state_total)
        if not full:
            continue
        # the loss's logits and the runtime's buffers are activations too, and as uncertain:
        # they take their band
        low, high = _band(
            uncertainty,
            (state_total, activations + loss + buffers, gather, reduce_copy, mine.side),
            step if step_copy else None,
            (overhead / 2 + comms * (1 - c_lo), 2 * overhead + comms * (1 + c_hi)),
        )
        parts = (activations, other, inflight[r], layer_count, mine.params, low, high, comms)
        out.ranks.append(RankMemory(r, w, g, o, replica, *parts))
    return out


def _band(
    uncertainty: Uncertainty,
    parts: tuple[float, float, float, float, float],
    step: float | None,
    fixed: tuple[float, float],
) -> tuple[float, float]:
    """A rank's low and high bounds (`_ranks`) from its `parts` (states, transient tensors,
    FSDP gathers, DeepSpeed's reduce copy, side buffers), its step phase when that is one of
    its own, and what lies outside the tensors at each bound (`fixed`)."""
    states, transient, gather, reduce_copy, side = parts
    s_lo, s_hi = uncertainty.states
    a_lo, a_hi = uncertainty.activations
    fixed_low, fixed_high = fixed
    low = states * (1 - s_lo) + transient * (1 - a_lo) + gather + fixed_low
    if reduce_copy:
        low = max(low, (states + reduce_copy) * (1 - s_lo) + fixed_low)
    high = (states + reduce_copy + side) * (1 + s_hi) + transient * (1 + a_hi) + gather + fixed_high
    if step is not None:
        low = max(low, step * (1 - s_lo) + fixed_low)
        high = max(high, step * (1 + s_hi) + fixed_high)
    return low, high


def _several(
    stages: list[_Stage], own: tuple[int, ...], held: tuple[int, ...], mirror: bool
) -> tuple[_StageStates, tuple[float, float, float], float, int, float]:
    """What a rank holding several stages adds up (`_ranks`): its states, its own weights,
    gradients and optimizer states (the mirror apart), DualPipe's replica of the mirrored
    stage, its layers, and one micro-batch's activations through all it holds."""
    mine = stages[own[0]].states if len(own) == 1 else _sum_states([stages[s].states for s in own])
    wgo = (mine.weights, mine.gradients, mine.optimizer)
    replica = 0.0
    if mirror:  # DualPipe: rank r also runs stage P-1-r of the other direction
        mirrored = stages[held[-1]].states
        replica = mirrored.weights + mirrored.gradients + mirrored.optimizer
        mine = _sum_states([mine, mirrored])
    layer_count = sum([stages[s].layers for s in held])
    return mine, wgo, replica, layer_count, sum([stages[s].act for s in held])


class _Computed(NamedTuple):
    """`_ranks`' answer, rank by rank."""

    totals: list[float]  # RankMemory.total
    states: list[float]  # RankMemory.states
    ranks: list[RankMemory]  # the whole records (only when asked for)


@lru_cache(maxsize=256)
def _holdings(
    stage_ranks: tuple[int, ...], ranks: int, stages: int, mirror: bool
) -> tuple[_Holding, ...]:
    """What each rank holds (`_Holding`): only the layout's shape decides it."""
    owned: list[list[int]] = [[] for _ in range(ranks)]
    for stage, rank in enumerate(stage_ranks):
        owned[rank].append(stage)
    out = []
    for r, own in enumerate(owned):
        held = (*own, stages - 1 - r) if mirror else tuple(own)
        later = sum(1 for s in held if s > 0)
        earlier = sum(1 for s in held if s < stages - 1)
        out.append(_Holding(tuple(own), held, stages - 1 in held, later, earlier))
    return tuple(out)


class _Holding(NamedTuple):
    """One rank's stages: those it runs, those whose memory it holds (under DualPipe also the
    mirrored stage P-1-r of the other direction), whether the last stage is among them, and how
    many of them receive their input (`later`) or send an output on (`earlier`)."""

    own: tuple[int, ...]
    held: tuple[int, ...]
    has_last: bool
    later: int
    earlier: int


def _runtime_buffers(
    impl: PipelineImpl,
    held: Sequence[int],
    last: int,
    units: int,
    microbatches: int,
    tensor: int,
) -> float:
    """Stage inputs or outputs (one micro-batch each) a pipeline runtime keeps beyond the
    activations, for a rank holding stages `held` with `units` micro-batches in flight.
    Megatron-core frees a stage output's data once it is sent (schedules.py
    deallocate_output_tensor) and receives into fresh tensors: none."""
    later = sum(1 for s in held if s > 0)  # stages that receive their input
    earlier = sum(1 for s in held if s < last)  # stages that send an output on
    return _buffers(impl, later, earlier, len(held), units, microbatches, tensor)


def _buffers(
    impl: PipelineImpl,
    later: int,
    earlier: int,
    held: int,
    units: int,
    microbatches: int,
    tensor: int,
) -> float:
    """`_runtime_buffers` of a rank holding `held` stages, `later` of which receive their input
    and `earlier` of which send an output on."""
    if impl == "megatron":
        return 0.0
    if impl == "torch":
        # torch.distributed.pipelining allocates one receive buffer per micro-batch for each
        # non-first stage's input (stage.py _prepare_forward_infra) and each non-last stage's
        # output gradient (_create_grad_recv_info), kept for the whole run; those of the
        # micro-batches in flight are the stage inputs the activations already count. A
        # non-last stage also keeps each in-flight micro-batch's output in its fwd_cache until
        # that micro-batch's backward (forward_one_chunk; nothing frees it once sent).
        buffers = microbatches * (later + earlier) - units * later / held
        return max(buffers, 0.0) + units * earlier / held
    # DeepSpeed's PipelineEngine keeps every in-flight micro-batch's stage output until its
    # backward pass (runtime/pipe/engine.py pipe_buffers['outputs'], freed in
    # _exec_backward_pass); with TP only this rank's 1/TP slice of it (the whole tensor's
    # storage is dropped once partitioned: PartitionedTensor)
    return units * earlier / held / tensor


def _assumptions(
    arch: Architecture, parallel: ParallelDegrees, training: TrainingSetup, pipe: PipelineLayout
) -> tuple[str, ...]:
    s = state_bytes(training)
    zero = f"ZeRO-{training.zero_stage} over {parallel.data * parallel.context} (dense)"
    if arch.moe:
        zero += f", {parallel.expert_data:g} (expert)"
    if training.zero_stage >= 3 and pipe.ranks > 1:
        zero += (
            " (under PP: weights gathered and gradients accumulated unsharded for the step, "
            "the sharded gradients cached on FSDP's reduce-scatter stream)"
        )
    offload = training.optimizer_offload
    mods = ", ".join(sorted(training.modules)) or "nothing"
    full = "full recompute (layer inputs kept)"
    if training.recompute_method == "block":
        full = (
            f"full recompute of the first {training.recompute_num_layers} layers of each stage "
            "(the others keep all their activations)"
        )
    elif training.recompute_num_layers > 1:
        full = f"full recompute in groups of {training.recompute_num_layers} layers"
    recompute = {
        "none": "no recompute",
        "full": full,
        "selective": f"selective recompute of {mods}",
        "selective_op": "per-op selective checkpointing (every other matmul kept)",
    }[training.activation_recompute]
    storage = "FP8" if training.activation_fp8 else "BF16"
    if training.precision == "fp8" and not training.activation_fp8:
        storage = "FP8 GEMM-input"
    block = ("SwiGLU" if arch.swiglu else "GeLU") + (", MLA" if arch.mla else "")
    if arch.moe:
        block += f", MoE top-{arch.experts_per_token}"
    return (
        f"model states {s.weights + s.gradients + s.optimizer:g} B/param unsharded (weights "
        f"{s.weights:g} + grads {s.gradients:g} + optimizer {s.optimizer:g}), {zero} ranks"
        + (
            f", the step's fp32 gradient copy ({copy:g} B/param) a phase of its own"
            if (copy := step_copy_bytes(training))
            else ""
        )
        + (f", {offload:.0%} of the optimizer offloaded" if offload else ""),
        f"activations from the block's own tensors ({block}), {recompute}, {storage} storage, "
        f"SP {'on' if parallel.sp else 'off'}"
        + (", DTensor TP keeps the gathered GEMM inputs" if training.dtensor_tp else "")
        + (", offloaded to host but for 2 micro-batches" if training.activation_offload else "")
        + ("" if training.loss == "fused" else f", {training.loss} cross-entropy"),
        f"{pipe.stages} stage{'s' if pipe.stages > 1 else ''} on {pipe.ranks} "
        f"rank{'s' if pipe.ranks > 1 else ''}"
        + (", a second copy of the mirrored stage per rank" if pipe.mirror else "")
        + (
            _RUNTIME_NOTES[training.pipeline_impl].format(m=pipe.microbatches)
            if pipe.ranks > 1
            else ""
        )
        + (
            ", the gradients' all-reduce through a bf16 copy of them (DeepSpeed BF16_Optimizer)"
            if _bf16_pipe_reduce(training, pipe.ranks)
            else ""
        )
        + _groups_note(*communicators(parallel, training, pipe.ranks, arch.tied_embeddings)),
    )


def _groups_note(every: int, edge: int) -> str:
    """The assumption's words for `communicators`."""
    if not every:
        return ""
    more = ", one more on the first and last stage's (tied embeddings)" if edge else ""
    return f", NCCL's buffers for {every} communicator{'s' if every > 1 else ''} per GPU{more}"


def _bf16_pipe_reduce(training: TrainingSetup, ranks: int) -> bool:
    """DeepSpeed's pipeline engine reducing BF16_Optimizer's gradients (see `estimate`)."""
    return training.pipeline_impl == "deepspeed" and training.bf16_grads_kept and ranks > 1


_RUNTIME_NOTES = {
    "megatron": "",
    "torch": ", receive buffers for all {m} micro-batches, in-flight stage outputs kept until "
    "their backward pass and the last stage keeps all {m} logits (torch pipelining)",
    "deepspeed": ", in-flight stage outputs (1/TP of each) kept until their backward pass "
    "(DeepSpeed)",
}


def usable_bytes(usable_gib: float, headroom_fraction: float) -> float:
    if not 0 <= headroom_fraction < 1:
        raise ValueError("headroom_fraction must be in [0, 1)")
    return usable_gib * GIB * (1.0 - headroom_fraction)


def verdict(rank: RankMemory, usable: float) -> str:
    """fits | likely-oom (central over, low bound under) | oom (even the low bound is over)."""
    if rank.low > usable:
        return "oom"
    return "likely-oom" if rank.total > usable else "fits"


def fits_one_gpu(
    arch: Architecture,
    training: TrainingSetup,
    data_parallel: int,
    uncertainty: Uncertainty = DEFAULT_UNCERTAINTY,
) -> RankMemory:
    """Pure data parallelism over `data_parallel` GPUs: the whole model's states (ZeRO shards
    over them) and one micro-batch of activations through every layer, on one GPU."""
    pipe = PipelineLayout(1, 1, (0,), (1,))
    return estimate(arch, ParallelDegrees(data=data_parallel), training, pipe, uncertainty).ranks[0]
