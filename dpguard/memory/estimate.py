"""Per-rank memory: stage placement, model states, activations in flight, the loss and the
runtime buffers, the error band and the verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
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
    overhead_gib: float = 1.5  # CUDA context, NCCL and cuBLAS/TE workspaces (central)


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

    @property
    def total(self) -> float:
        return self.states + self.activations + self.other

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
        return max(self.ranks, key=lambda r: (r.total, -r.rank))


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
    parallel: ParallelDegrees, training: TrainingSetup, pipeline: PipelineLayout
) -> _Sharded:
    """Model-state bytes per parameter under ZeRO over data x context (dense) and the expert
    data-parallel group, as FSDP holds them across a step's micro-batches."""
    sharding = training
    fsdp_pipe = training.zero_stage >= 3 and pipeline.ranks > 1
    if fsdp_pipe:
        # FSDP under pipeline parallelism keeps parameters gathered and gradients unsharded
        # across the micro-batches of a step (torchtitan's default reshard policy with PP;
        # DeepSpeed refuses ZeRO-3 with PP): only the optimizer stays sharded.
        sharding = replace(training, zero_stage=1)
    dense_degree = parallel.data * parallel.context
    per_dense = sharded_bytes(sharding, dense_degree)
    per_expert = sharded_bytes(sharding, parallel.expert_data)
    deferred = (
        training.deferred_grad_sync
        and training.zero_stage >= 2
        and not fsdp_pipe
        and pipeline.microbatches > 1
    )
    if deferred:
        # FSDP2 with set_requires_gradient_sync(False) (_fsdp_param_group.py post_backward,
        # _fsdp_param.py to_accumulated_grad_if_needed) keeps each parameter's unsharded
        # gradient, cast to the reduce dtype, from the first backward pass of a step to the
        # last: the gradients are not sharded, the weights and optimizer states still are
        whole = replace(training, zero_stage=1)
        per_dense = per_dense._replace(gradients=sharded_bytes(whole, dense_degree).gradients)
        per_expert = per_expert._replace(
            gradients=sharded_bytes(whole, parallel.expert_data).gradients
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
    one_step = PipelineLayout(ranks, ranks, tuple(range(ranks)), (1,) * ranks)
    per_dense, per_expert, _, _ = _sharded_states(parallel, training, one_step)
    total = dense / parallel.tensor * sum(per_dense)
    total += expert / (parallel.expert * parallel.etp) * sum(per_expert)
    copies = 2 if mirror else 1
    return copies * total / ranks * (1 - 1e-9)  # below the exact sums' rounding


def estimate(
    arch: Architecture,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    pipeline: PipelineLayout,
    uncertainty: Uncertainty = DEFAULT_UNCERTAINTY,
) -> MemoryEstimate:
    """Memory of one GPU of every pipeline rank (see the module docstring)."""
    layout = layer_params(arch)
    per_dense, per_expert, side_dense, side_expert = _sharded_states(parallel, training, pipeline)
    stages = stage_layers(
        arch.layers, pipeline.stages, pipeline.lead, pipeline.tail, pipeline.counts
    )
    last_stage = pipeline.stages - 1
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
        no = replace(training, activation_recompute="none")
        kept = {m: layer_activation_bytes(arch, m, parallel, no) for m in act}
        if training.activation_recompute == "full" and training.recompute_method == "uniform":
            group = training.recompute_num_layers
        # One group's recomputed activations while it runs its backward (its input is kept).
        working = max(group * kept[m] - act[m] for m in act)
    block = training.activation_recompute == "full" and training.recompute_method == "block"
    mtp_act = arch.mtp_layers * act[arch.moe]

    # the step's gradient copy is sharded like the optimizer states (ZeRO 1 and up)
    copy = step_copy_bytes(training)
    dense_degree = parallel.data * parallel.context
    copy_dense = copy / dense_degree if training.zero_stage >= 1 else copy
    copy_expert = copy / parallel.expert_data if training.zero_stage >= 1 else copy

    def states(stage: int) -> _StageStates:
        dense, expert = _stage_params(
            arch, layout, stages[stage], stage == 0, stage == last_stage, pipeline.ranks
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

    # stages of the same size and kind hold the same states: sized once per kind (a deep
    # pipeline has 64 stages and two or three kinds)
    kinds: dict[tuple[int, int, bool, bool], _StageStates] = {}
    stage_states = []
    for stage, layers in enumerate(stages):
        kind = (len(layers), arch.moe_layers_in(layers), stage == 0, stage == last_stage)
        if kind not in kinds:
            kinds[kind] = states(stage)
        stage_states.append(kinds[kind])

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

    # per stage once: a rank sums over the stages it holds (the planner sizes hundreds of
    # layouts of up to 64 ranks, so the per-rank loop is what it pays for)
    stage_acts = [stage_act(layers) for layers in stages]
    stage_wgrads: list[float] = []
    if pipeline.deferred_w and not training.activation_offload:
        from dpguard.schedules.inflight import zb1p_peak  # as sizing.pipeline_layout does

        wgrad = {m: layer_wgrad_bytes(arch, m, parallel, training) for m in act}
        stage_wgrads = [by_kind(wgrad, layers) for layers in stages]
    if arch.dropout:
        # The embedding runs outside the recomputed blocks (Megatron-core's
        # LanguageModelEmbedding, DeepSpeed PipelineModule._is_checkpointable): its dropout
        # keeps a 1 B mask per element for each micro-batch in flight (Megatron-LM
        # theoretical_memory_usage.py, 'Dropout in embedding layer'): half a bf16 boundary.
        stage_acts[0] += boundary / 2

    # DeepSpeed 0.6.2-0.14.0's pipeline engine all-reduces BF16_Optimizer's flat fp32 gradients
    # through a bf16 copy of the whole buffer (pipe/engine.py _bf16_reduce_grads -> engine.py
    # allreduce_bucket, communication_data_type bf16): 2 B per parameter after the last backward
    # pass. No activation segment is that large, so the caching allocator maps a new one and
    # keeps it reserved beside the activations' (what nvidia-smi and max_memory_reserved show);
    # under memory pressure it frees its cache first, so only the larger phase is certain.
    reduce_copy_bytes = 2.0 if _bf16_pipe_reduce(training, pipeline.ranks) else 0.0
    gather = 0.0
    if training.zero_stage >= 3:
        # FSDP's per-layer collectives (one layer's parameters, / TP; torch FSDP2
        # _fsdp_collectives.py): the all-gather fills a flat buffer on its own stream for the
        # layer and the prefetched next one. Without pipeline parallelism the reduce-scatter
        # also copies the layer's gradients into a flat buffer in the reduce dtype, held
        # until the next layer's is issued, and the layer's bf16 gradients exist until that
        # copy. Under it the weights stay gathered and the gradients accumulate unsharded
        # (both priced as states), and torch's pipelining reduces them after the last
        # backward pass (stage.py backward_maybe_with_nosync), once the activations are gone.
        per_param = 2 * state_bytes(training).weights
        if pipeline.ranks == 1:
            per_param += training.grad_bytes + 2.0
        layer = max(layout.dense_layer.dense, layout.moe_layer.dense) / parallel.tensor
        gather = per_param * layer
    s_lo, s_hi = uncertainty.states
    a_lo, a_hi = uncertainty.activations
    overhead = uncertainty.overhead_gib * GIB
    ranks: list[RankMemory] = []
    by_rank: list[list[int]] = [[] for _ in range(pipeline.ranks)]
    for stage, rank in enumerate(pipeline.stage_ranks):
        by_rank[rank].append(stage)
    for r in range(pipeline.ranks):
        own = by_rank[r]
        held = list(own)
        mine = (
            stage_states[own[0]] if len(own) == 1 else _sum_states([stage_states[s] for s in own])
        )
        w, g, o = mine.weights, mine.gradients, mine.optimizer
        replica = 0.0
        if pipeline.mirror:  # DualPipe: rank r also runs stage P-1-r of the other direction
            mirrored = stage_states[pipeline.stages - 1 - r]
            replica = mirrored.weights + mirrored.gradients + mirrored.optimizer
            held.append(pipeline.stages - 1 - r)
            mine = _sum_states([mine, mirrored])
        layer_count = sum(len(stages[s]) for s in held)
        units = pipeline.inflight[r]
        if training.activation_offload:
            # Kimi K2 §2.4.3: the micro-batch being computed and the one being prefetched stay
            # on the GPU; the other in-flight activations wait in host memory.
            units = min(units, 2)
        # Each in-flight unit is one micro-batch through one of the rank's stages: the rank's
        # layers per stage, at the rank's average bytes per layer.
        activations = units * sum(stage_acts[s] for s in held) / len(held)
        if stage_wgrads:  # ZB-H1 (one stage per rank): its deferred weight passes
            activations = zb1p_peak(
                pipeline.ranks, r, pipeline.microbatches, activations / units, stage_wgrads[own[0]]
            )
        activations += working if layer_count else 0.0
        loss = 0.0
        if last_stage in held:
            loss = logits
            activations += mtp_act  # MTP layers: one micro-batch on the last stage
        buffers = boundary * _runtime_buffers(
            training.pipeline_impl, held, last_stage, units, pipeline.microbatches, parallel.tensor
        )
        reduce_copy = reduce_copy_bytes * mine.params
        step_copy = mine.step_copy
        if training.pipeline_impl == "deepspeed":
            # DeepSpeed flattens the step's fp32 gradient copy into one buffer, as large as
            # the bf16 reduce copy: reserved beside the activations' segments the same way
            reduce_copy, step_copy = reduce_copy + step_copy, 0.0
        # reserved beside the peak, never live in it: the low bound leaves the FSDP
        # reduce-scatter stream's gradients out (the allocator frees cached blocks before
        # failing) and takes DeepSpeed's reduce copy only as the step's own phase
        other = overhead + gather + loss + buffers + reduce_copy + mine.side
        state_total = w + g + o + replica
        # the loss's logits and the runtime's buffers are activations too, and as uncertain:
        # they take their band
        transient = activations + loss + buffers
        low = state_total * (1 - s_lo) + transient * (1 - a_lo) + gather + overhead / 2
        if reduce_copy:
            low = max(low, (state_total + reduce_copy) * (1 - s_lo) + overhead / 2)
        high = (
            (state_total + reduce_copy + mine.side) * (1 + s_hi)
            + transient * (1 + a_hi)
            + gather
            + 2 * overhead
        )
        if step_copy:
            # Megatron's per-tensor copies fit in the blocks the freed activations leave: the
            # step is a phase of its own, and the rank needs the larger of the two
            step = state_total + step_copy
            other += max(0.0, step + overhead - (state_total + activations + other))
            low = max(low, step * (1 - s_lo) + overhead / 2)
            high = max(high, step * (1 + s_hi) + 2 * overhead)
        inflight, params = pipeline.inflight[r], mine.params
        ranks.append(
            RankMemory(
                r, w, g, o, replica, activations, other, inflight, layer_count, params, low, high
            )
        )
    return MemoryEstimate(tuple(ranks), _assumptions(arch, parallel, training, pipeline))


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
    if impl == "megatron":
        return 0.0
    later = sum(1 for s in held if s > 0)  # stages that receive their input
    earlier = sum(1 for s in held if s < last)  # stages that send an output on
    if impl == "torch":
        # torch.distributed.pipelining allocates one receive buffer per micro-batch for each
        # non-first stage's input (stage.py _prepare_forward_infra) and each non-last stage's
        # output gradient (_create_grad_recv_info), kept for the whole run; those of the
        # micro-batches in flight are the stage inputs the activations already count. A
        # non-last stage also keeps each in-flight micro-batch's output in its fwd_cache until
        # that micro-batch's backward (forward_one_chunk; nothing frees it once sent).
        buffers = microbatches * (later + earlier) - units * later / len(held)
        return max(buffers, 0.0) + units * earlier / len(held)
    # DeepSpeed's PipelineEngine keeps every in-flight micro-batch's stage output until its
    # backward pass (runtime/pipe/engine.py pipe_buffers['outputs'], freed in
    # _exec_backward_pass); with TP only this rank's 1/TP slice of it (the whole tensor's
    # storage is dropped once partitioned: PartitionedTensor)
    return units * earlier / len(held) / tensor


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
        ),
    )


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
