"""From a manifest and a layout to a `Prediction`: the layers' passes (dpguard.perf.model) placed
on the pipeline's ranks, the slowest rank's micro-batch times through the schedule's closed form,
data-parallel communication and the optimizer step added once per step."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from dpguard import memory, sizing
from dpguard.manifest import Manifest
from dpguard.perf import data as perf_data
from dpguard.perf.model import (
    BREAKDOWN,
    SECONDS_PER_HOUR,
    TFLOPS,
    Hardware,
    Layout,
    MissingHardware,
    Pass,
    Prediction,
    Shape,
    gemm_seconds,
    hardware,
    layer_pass,
)
from dpguard.schedules import SCHEDULES, OpTimes, check

# Schedules that overlap one micro-batch's expert all-to-all and pipeline sends with another's
# compute by design (DualPipe README: "computation-communication overlap" of forward and
# backward chunks; DeepSeek-V3 §3.2.1: "both all-to-all and PP communication can be fully
# hidden").
_OVERLAPS_BY_DESIGN = frozenset({"dualpipe", "dualpipev"})
# All-to-all kernels that send a token once per remote node and fan it out over NVLink there
# (DeepEP internode kernels; UCCL-EP and MORI implement the same protocol), and those that
# dispatch FP8 under FP8 training (DeepEP README: "FP8 dispatching").
_HIERARCHICAL_A2A = frozenset({"deepep", "uccl-ep", "mori"})
_FP8_DISPATCH = frozenset({"deepep", "uccl-ep", "mori"})


def layout_of(manifest: Manifest, s: sizing.Strategy, micro_batch_size: int) -> Layout:
    """The Layout of a sized strategy (the proposal, or a plan's)."""
    p = manifest.parallelism
    data = sizing.data_parallel(manifest, s)
    spec = SCHEDULES.get(s.schedule)
    return Layout(
        tensor=s.tensor,
        pipeline=s.pipeline,
        virtual_stages=spec.virtual(s.virtual_stages) if spec is not None else 1,
        context=s.context,
        expert=s.expert,
        expert_tensor=sizing.etp(manifest, s) if manifest.model.is_moe else 1,
        data=data,
        micro_batch_size=micro_batch_size,
        microbatches=s.microbatches,
        schedule=s.schedule,
        accumulation_steps=p.accumulation_steps if p is not None else 1,
    )


class _Costs(NamedTuple):
    """One rank's seconds per micro-batch, by cause (exposed communication only)."""

    forward: float  # F: compute + exposed communication of the forward
    input: float  # I: the backward's input gradients (+ recompute)
    weight: float  # W: the backward's weight gradients
    parts: Mapping[str, float]  # the same seconds split by BREAKDOWN's causes (no bubble)


def _exposed(comm: float, window: float, overlapped: bool, residual: float) -> float:
    """What an overlapped collective still costs: the part the work beside it cannot hide, and
    at least the residual share (it slows the kernels it shares the GPU with)."""
    if not overlapped or comm <= 0:
        return comm
    return max(comm - window, residual * comm)


class _Context(NamedTuple):
    manifest: Manifest
    arch: memory.Architecture
    layout: Layout
    hw: Hardware
    d: Mapping[str, Any]
    shape: Shape
    overlap: Mapping[str, bool]


def _layer_costs(c: _Context, p: Pass, recompute: bool) -> dict[str, float]:
    """One layer's seconds per micro-batch (forward, input and weight gradients, recompute) and
    its exposed communication."""
    d, o = c.d, c.overlap
    res = float(d["communication"]["overlapped_residual"])
    overhead = float(d["overhead"]["per_layer_pass_us"]) * 1e-6
    fwd = p.gemm + p.attention + p.elementwise + overhead
    bwd_attention = p.attention_backward
    bwd_elem = p.elementwise * float(d["elementwise"]["backward_ratio"])
    tp_f = _exposed(p.tp, p.gemm, o.get("tp", False), res)
    cp_f = _exposed(p.cp, p.attention, o.get("cp", False), res)
    cp_b = _exposed(2 * p.cp, bwd_attention, o.get("cp", False), res)
    ep_overlap = o.get("ep", False) or c.layout.schedule in _OVERLAPS_BY_DESIGN
    ep_f = _exposed(p.ep, fwd, ep_overlap, res)
    redo = _recompute(c, p) if recompute else (0.0, 0.0, 0.0, 0.0)
    return {
        "forward_compute": fwd,
        "input_compute": p.gemm + bwd_attention + bwd_elem + overhead,
        "weight_compute": p.gemm,
        "recompute": redo[0],
        "tp": 2 * tp_f + redo[1],
        "cp": cp_f + cp_b + redo[2],
        "ep": 2 * ep_f + redo[3],
    }


def _recompute(c: _Context, p: Pass) -> tuple[float, float, float, float]:
    """(compute, tp, cp, ep) seconds the backward repeats for a recomputed layer."""
    t = c.manifest.training
    overhead = float(c.d["overhead"]["per_layer_pass_us"]) * 1e-6
    if t.activation_recompute == "full":
        return p.gemm + p.attention + p.elementwise + overhead, p.tp, p.cp, p.ep
    if t.activation_recompute == "selective_op":
        # torchtitan's per-op policy keeps every other matmul's output and attention's
        return 0.5 * p.gemm + p.elementwise, 0.0, 0.0, 0.0
    if t.activation_recompute != "selective":
        return 0.0, 0.0, 0.0, 0.0
    modules = set(t.recompute_modules)
    seconds = p.attention if "core_attn" in modules else 0.0
    if modules & {"mlp", "moe"}:
        seconds += p.mlp_gemm
    if "mla_up_proj" in modules and c.arch.mla is not None:
        seconds += 0.5 * p.attention_gemm  # the up-projections: about half the MLA GEMMs
    return seconds, 0.0, 0.0, (p.ep if "moe" in modules else 0.0)


def _recomputed(c: _Context, layers: range) -> int:
    """How many of a chunk's layers full recompute repeats (block: only the first n)."""
    t = c.manifest.training
    if t.activation_recompute != "full" or t.recompute_method != "block":
        return len(layers)
    return min(len(layers), t.recompute_num_layers)


def _output_layer(c: _Context) -> float:
    """Forward seconds of the output projection and the loss for one micro-batch (last stage)."""
    m, h, v, t = c.shape.tokens, c.arch.hidden_size, c.arch.vocab_size, c.layout.tensor
    logits = gemm_seconds(m, v / t, h, c.hw, c.shape.gemm_bytes)
    loss = m * v / t * 4 * 3 / c.hw.hbm  # fp32 logits: written, read by the softmax, its grad
    return logits + loss


_Costs4 = dict[tuple[bool, bool], dict[str, float]]


def _chunk(c: _Context, layers: range, costs: _Costs4, last: bool) -> dict[str, float]:
    """A pipeline chunk's seconds per micro-batch: its layers (`costs`: one layer's by kind and
    recompute, computed once per prediction), the output layer and MTP on the last stage."""
    total: dict[str, float] = dict.fromkeys(
        ("forward_compute", "input_compute", "weight_compute", "recompute", "tp", "cp", "ep"), 0.0
    )
    moe = c.arch.moe_layers_in(layers)
    redo = _recomputed(c, layers)
    for kind, count in ((True, moe), (False, len(layers) - moe)):
        if not count:
            continue
        redo_here = min(count, redo)
        redo -= redo_here
        for recompute, n in ((True, redo_here), (False, count - redo_here)):
            if n:
                for key, value in costs[kind, recompute].items():
                    total[key] += n * value
    if last:
        out = _output_layer(c)
        mtp = c.arch.mtp_layers
        block = costs[c.arch.moe, False]
        total["forward_compute"] += out * (1 + mtp) + mtp * block["forward_compute"]
        total["input_compute"] += 2 * out * (1 + mtp) + mtp * block["input_compute"]
        total["weight_compute"] += out * (1 + mtp) + mtp * block["weight_compute"]
    return total


def _pp_send(c: _Context) -> float:
    """One activation (or its gradient) sent to the next stage: b s h / CP, split over TP
    (Megatron's scatter-gather of pipeline sends), over the NIC unless the stages share a node."""
    lay = c.layout
    if lay.pipeline <= 1:
        return 0.0
    # the stages are gpus / P ranks apart; once the pipeline spans nodes its slowest hop,
    # over the NIC, sets the pace of every send
    stride = c.manifest.cluster.gpus // lay.pipeline
    bw, lat = (
        (c.hw.scale_up, c.hw.latency_up)
        if stride * lay.pipeline <= c.hw.domain
        else (
            c.hw.scale_out,
            c.hw.latency_out,
        )
    )
    seconds = lat + c.shape.tokens * c.arch.hidden_size * 2 / lay.tensor / bw
    res = float(c.d["communication"]["overlapped_residual"])
    overlapped = c.overlap.get("pp", False) or lay.schedule in _OVERLAPS_BY_DESIGN
    return res * seconds if overlapped else seconds


def _ranks(c: _Context, passes: Mapping[bool, Pass]) -> list[_Costs]:
    """The costs per micro-batch of every distinct kind of pipeline rank, its chunks summed."""
    lay, m = c.layout, c.manifest
    if lay.schedule == "none" or lay.pipeline == 1:
        stage_ranks: tuple[int, ...] = (0,)
        stages = 1
        mirrored = False
    else:
        spec = SCHEDULES[lay.schedule]
        stages = spec.stages(lay.pipeline, lay.virtual_stages)
        stage_ranks = tuple(spec.placement(lay.pipeline, stages))
        # DualPipe sends half the micro-batches each way: rank r runs stage r for one half and
        # its mirror, stage P-1-r, for the other, so it does the mean of the two per
        # micro-batch (arXiv 2412.19437 §3.2.1, Figure 5)
        mirrored = spec.mirrored and stages > 1
    p = m.parallelism
    chunked = _mixes(
        _Split(
            c.arch.layers,
            c.arch.dense_layers if c.arch.moe else None,
            stages,
            int(p.account_for_embedding) if p else 0,
            int(p.account_for_loss) if p else 0,
            (p.stage_layers or ()) if p else (),
        ),
        stage_ranks,
        mirrored,
    )
    send = _pp_send(c)
    costs = {
        (kind, redo): _layer_costs(c, passes[kind], redo)
        for kind in passes
        for redo in (True, False)
    }
    chunks: dict[tuple[int, int, bool], dict[str, float]] = {}  # stages alike cost alike
    for alike, layers in chunked.alike:
        chunks[alike] = _chunk(c, layers, costs, alike[2])
        chunks[alike]["pp"] = 2 * send if stages > 1 else 0.0
    per_rank: dict[tuple[tuple[tuple[int, int, bool], float], ...], dict[str, float]] = {}
    for mix in chunked.mixes:
        into = dict.fromkeys(chunks[mix[0][0]], 0.0)
        for alike, share in mix:
            for part, value in chunks[alike].items():
                into[part] += value * share
        per_rank[mix] = into
    out = []
    for mix in sorted(per_rank):
        x = per_rank[mix]
        comm = x["tp"] + x["cp"] + x["ep"] + x["pp"]
        forward = x["forward_compute"] + comm / 2
        parts = {
            "compute": x["forward_compute"] + x["input_compute"] + x["weight_compute"],
            "recompute": x["recompute"],
            "tp": x["tp"],
            "cp": x["cp"],
            "ep": x["ep"],
            "pp": x["pp"],
        }
        out.append(
            _Costs(
                forward, x["input_compute"] + x["recompute"] + comm / 2, x["weight_compute"], parts
            )
        )
    return out


class _Split(NamedTuple):
    """How a pipeline splits the layers (memory.stage_layers' arguments); `moe_from`: the first
    MoE layer, None for a dense model."""

    layers: int
    moe_from: int | None
    stages: int
    lead: int
    tail: int
    counts: tuple[int, ...]


class _Mixes(NamedTuple):
    """The chunks of a pipeline by kind (MoE layers, layers, last), each with the layers of its
    first stage, and each distinct rank as the kinds it runs and their shares, sorted."""

    alike: tuple[tuple[tuple[int, int, bool], range], ...]
    mixes: tuple[tuple[tuple[tuple[int, int, bool], float], ...], ...]


@lru_cache(maxsize=256)
def _mixes(split: _Split, stage_ranks: tuple[int, ...], mirrored: bool) -> _Mixes:
    """Which ranks run which kinds of chunk: only the layout's shape decides it, and the
    planner predicts many layouts of each shape (a deep pipeline has 64 stages, two or three
    kinds and as few distinct ranks), so it is worked out once per shape."""
    layers = memory.stage_layers(split.layers, split.stages, split.lead, split.tail, split.counts)
    alike: dict[tuple[int, int, bool], range] = {}
    # each rank as the chunks it runs (their signatures and shares): ranks alike cost alike,
    # and only the slowest matters, so each distinct mix is summed once
    mixes: dict[int, list[tuple[tuple[int, int, bool], float]]] = {}
    for stage, chunk in enumerate(layers):
        moe = 0 if split.moe_from is None else max(0, chunk.stop - max(chunk.start, split.moe_from))
        kind = (moe, len(chunk), stage == split.stages - 1)
        alike.setdefault(kind, chunk)
        homes = (
            (stage_ranks[stage], split.stages - 1 - stage_ranks[stage])
            if mirrored
            else (stage_ranks[stage],)
        )
        for home in homes:
            mixes.setdefault(home, []).append((kind, 1 / len(homes)))
    distinct = sorted({tuple(sorted(v)) for v in mixes.values()})
    return _Mixes(tuple(alike.items()), tuple(distinct))


def _idle(c: _Context, slow: _Costs, chunks: int) -> float:
    """Bubble seconds of the slowest rank: the schedule's closed form over its per-chunk op
    times (dpguard.schedules.closed_forms cites each)."""
    lay = c.layout
    if lay.schedule == "none" or lay.pipeline == 1:
        return 0.0
    spec = SCHEDULES[lay.schedule]

    def us(x: float) -> int:
        return max(round(x / chunks * 1e6), 1)

    f, i, w = us(slow.forward), us(slow.input), us(slow.weight)
    form = spec.closed_form(
        lay.pipeline, lay.microbatches, lay.virtual_stages, OpTimes.whole(f, i + w, w)
    )
    return max(float(form.value), 0.0) * 1e-6


def _rank_params(c: _Context) -> tuple[float, float]:
    """(dense, expert) parameters the slowest-holding rank keeps, before data-parallel sharding:
    its layers' share split over TP (experts over EP x ETP), the vocabulary matrices at the ends."""
    arch, lay = c.arch, c.layout
    params = memory.layer_params(arch)
    stages = max(lay.pipeline, 1)
    layers = arch.layers / stages
    moe = arch.moe_layers_in(range(arch.layers)) / stages
    dense = (layers - moe) * params.dense_layer.dense + moe * params.moe_layer.dense
    dense += arch.vocab_size * arch.hidden_size  # the output layer (or the embedding)
    expert = moe * params.moe_layer.expert / (lay.expert * lay.expert_tensor)
    return dense / lay.tensor, expert


def _ring(ranks: int, stride: int, hw: Hardware) -> tuple[float, float]:
    """(bus bytes/s, latency) of a ring collective over `ranks` GPUs `stride` apart. Inside the
    scale-up domain: the fabric. Across nodes NCCL runs one ring per NIC (rail), so the k
    members of the group in each node share k NICs' worth of traffic: k x the NIC, capped by
    the fabric (NCCL's ring algorithm; nccl-tests' bus bandwidth reaches ~k NICs)."""
    if ranks * stride <= hw.domain:
        return hw.scale_up, hw.latency_up
    per_node = max(1, min(ranks, hw.domain // max(stride, 1)))
    return min(hw.scale_up, hw.scale_out * per_node), hw.latency_out


def _data_parallel(c: _Context, slow: _Costs) -> tuple[float, float]:
    """(exposed data-parallel communication, optimizer step) seconds per optimizer step.

    Each collective costs its ring latency, (ranks - 1) hops of the NCCL ring plus a base per
    call, and its bytes at the ring's bandwidth (`_ring`). ZeRO 0-2: one gradient reduction per
    step in buckets, overlapped with the last backward pass when the framework does, and (ZeRO
    1-2, the distributed optimizer) one parameter all-gather, overlapped with the first
    forward. ZeRO-3 / FSDP: every layer's parameters gathered for the forward, for the
    recompute and for the backward of every micro-batch, its gradients reduce-scattered after
    each backward (once per step when deferred)."""
    lay, m, d = c.layout, c.manifest, c.d
    comm = d["communication"]
    res = float(comm["overlapped_residual"])
    hop = float(comm["ring_hop_us"]) * 1e-6
    bucket = float(comm["bucket_params"])
    dense, expert = _rank_params(c)
    # the gradients are reduced in the buffer's dtype: fp32 main grads, but fp16 training keeps
    # and reduces fp16 ones (memory.states.state_bytes prices them so)
    fp32_grads = m.runtime.main_grad_dtype == "fp32" and m.training.precision != "fp16"
    grad = 4.0 if fp32_grads else 2.0
    weight = 1.0 if m.runtime.fp8_param_gather and m.training.precision == "fp8" else 2.0
    zero = m.training.zero_stage
    expert_dp = max(lay.data * lay.tensor * lay.context // (lay.expert * lay.expert_tensor), 1)
    groups = (
        (dense, lay.data, lay.tensor * lay.context),
        (expert, expert_dp, lay.expert * lay.expert_tensor),
    )
    runs = lay.microbatches * lay.accumulation_steps
    backward = slow.input + slow.weight
    layers = c.arch.layers / max(lay.pipeline, 1)
    passes = 3 if m.training.activation_recompute == "full" else 2
    gathers, reduces = (
        c.overlap.get("dp_param_gather", False),
        c.overlap.get("dp_grad_reduce", False),
    )
    exposed = local = 0.0
    for count, ranks, stride in groups:
        if count <= 0:
            continue
        local += count / ranks if zero >= 1 else count
        if ranks <= 1:
            continue
        bw, base = _ring(ranks, stride, c.hw)
        latency = base + (ranks - 1) * hop  # one ring collective's start-up
        share = (ranks - 1) / ranks
        if zero == 3:
            calls = layers * m.runtime.sharded_gathers_per_layer
            gather = calls * latency + share * count * weight / bw
            scatter = calls * latency + share * count * grad / bw
            if lay.pipeline > 1:
                # Under a pipeline the parameters stay gathered and the gradients unsharded
                # from a step's first forward to its last backward, which then reduce-
                # scatters once (torch.distributed.pipelining stage.py
                # backward_maybe_with_nosync: set_reshard_after_backward(False),
                # set_requires_gradient_sync(False), post_backward after the last backward;
                # torchtitan apply_fsdp: reshard_after_forward=False with PP), as the memory
                # model holds them (memory.estimate._sharded_states): one gather, prefetched
                # layer by layer in the first forward, and one scatter after the last
                # backward, with no compute left to hide it.
                exposed += _exposed(gather, slow.forward, gathers, res) + scatter
                continue
            gather *= passes
            syncs = 1 if m.runtime.fsdp_gradient_sync == "deferred" else runs
            exposed += runs * _exposed(gather, slow.forward + backward, gathers, res)
            exposed += syncs * _exposed(scatter, backward, reduces, res)
            continue
        calls = max(1.0, count / bucket)
        reduce = calls * latency + share * count * grad * (2 if zero == 0 else 1) / bw
        exposed += _exposed(reduce, backward, reduces, res)
        if zero >= 1:
            gather = calls * latency + share * count * weight / bw
            exposed += _exposed(gather, slow.forward, gathers, res)
    o = d["optimizer"]
    bf16_moments = m.training.optimizer_moment_dtype == "bf16"
    per_param = float(o["bytes_per_param_bf16_moments" if bf16_moments else "bytes_per_param"])
    if sizing.training_setup(m).master_remainders:
        per_param -= float(o["master_remainder_saving"])
    return exposed, local * per_param / c.hw.hbm


def model_flops_per_token(arch: memory.Architecture) -> float:
    """Model FLOPs per trained token: 6 x active parameters (forward 2, backward 4; Kaplan et al.
    2020, arXiv 2001.08361 §2.1) plus causal attention, 3 x s x (d_qk + d_v) per layer
    (half of PaLM's 12 L h s, which counts the masked half: Chowdhery et al. 2022, App. B)."""
    if arch.mla is not None:
        width = float(
            arch.attention_heads
            * (arch.mla.qk_head_dim + arch.mla.qk_rope_head_dim + arch.mla.v_head_dim)
        )
    else:
        width = 2 * arch.q_width
    return 6.0 * arch.active + 3.0 * arch.layers * arch.seq_len * width


@lru_cache(maxsize=64)
def _hardware(cluster: Any, precision: str) -> Hardware:
    """`hardware` with the packaged data, by cluster: every layout of a file runs on one."""
    return hardware(cluster, precision, perf_data.load())


@lru_cache(maxsize=256)
def _layer_pass(arch: memory.Architecture, moe: bool, shape: Shape, hw: Hardware) -> Pass:
    """`layer_pass` with the packaged data, by shape: the layouts a search compares differ in
    their pipeline more often than in what one layer's pass sees."""
    return layer_pass(arch, moe, shape, hw, perf_data.load())


def predict(manifest: Manifest, layout: Layout) -> Prediction:
    """The step time of `layout` for `manifest`'s model on its cluster (raises
    model.MissingHardware for a custom accelerator without the numbers it needs)."""
    d = perf_data.load()
    arch = sizing.architecture(manifest)
    t = manifest.training
    hw = _hardware(manifest.cluster, t.precision)
    sp = t.sequence_parallel if t.sequence_parallel is not None else layout.tensor > 1
    shape = Shape(
        tokens=layout.micro_batch_size * arch.seq_len / layout.context,
        tensor=layout.tensor,
        context=layout.context,
        expert=layout.expert,
        expert_tensor=layout.expert_tensor,
        seq=arch.seq_len,
        sequence_parallel=sp,
        fused_attention=manifest.runtime.flash_attention,
        gemm_bytes=1.0 if t.precision == "fp8" else 2.0,
        dedup=manifest.communication.all_to_all_kernel in _HIERARCHICAL_A2A,
        dispatch_bytes=1.0
        if t.precision == "fp8" and manifest.communication.all_to_all_kernel in _FP8_DISPATCH
        else 2.0,
    )
    c = _Context(manifest, arch, layout, hw, d, shape, manifest.runtime.overlapped(layout.schedule))
    passes = {False: _layer_pass(arch, False, shape, hw)}
    if arch.moe:
        passes[True] = _layer_pass(arch, True, shape, hw)
    ranks = _ranks(c, passes)
    slow = max(ranks, key=lambda r: r.forward + r.input + r.weight)
    spec = SCHEDULES.get(layout.schedule)
    chunks = spec.stages(layout.pipeline, layout.virtual_stages) // layout.pipeline if spec else 1
    idle = _idle(c, slow, chunks)
    runs = layout.accumulation_steps
    per_mb = slow.forward + slow.input + slow.weight
    pipeline = runs * (layout.microbatches * per_mb + idle)
    dp, optimizer = _data_parallel(c, slow)
    step = pipeline + dp + optimizer
    scale = layout.microbatches * runs
    breakdown = {k: v * scale for k, v in slow.parts.items()}
    breakdown.update(dp=dp, optimizer=optimizer, bubble=idle * runs)
    # the parts add up to the step but for float rounding: that goes to compute, so the
    # reported breakdown sums to the reported step exactly
    breakdown["compute"] += step - sum(breakdown[k] for k in BREAKDOWN)
    gpus = manifest.cluster.gpus
    tokens = t.global_batch_size * arch.seq_len
    tps = tokens / (step * gpus)
    flops = model_flops_per_token(arch) * tps
    band = d["band"]
    return Prediction(
        layout=layout,
        step_time_s=step,
        tokens_per_s_per_gpu=tps,
        model_tflops_per_gpu=flops / TFLOPS,
        mfu=flops / hw.peak,
        bubble=idle * runs / step,
        gpu_hours=t.tokens / tps / SECONDS_PER_HOUR,
        low=tps * (1 + float(band["low"])),
        high=tps * (1 + float(band["high"])),
        breakdown_s=breakdown,
        notes=hw.notes,
    )


def predicted(manifest: Manifest, s: sizing.Strategy, mbs: int) -> Prediction | None:
    """The prediction for a sized strategy at micro-batch size `mbs`; None when its schedule
    cannot run it or a custom accelerator lacks a number the model needs (the callers then
    fall back to what they priced before the model, and say so). Remembered within the
    process: the facts, the plan and its schedule table ask for the same layouts, and files
    of a batch that describe the same run (Manifest.content) share them."""
    key = (manifest.content, s, mbs)
    if key not in _PREDICTED:
        if len(_PREDICTED) >= 512:
            _PREDICTED.clear()
        _PREDICTED[key] = _predicted(manifest, s, mbs)
    return _PREDICTED[key]


_PREDICTED: dict[Any, Prediction | None] = {}


def _predicted(manifest: Manifest, s: sizing.Strategy, mbs: int) -> Prediction | None:
    spec = SCHEDULES.get(s.schedule)
    if spec and check(s.schedule, s.pipeline, s.microbatches, spec.virtual(s.virtual_stages)):
        return None
    try:  # the layout carries the micro-batch size: predict reads no other
        return predict(manifest, layout_of(manifest, s, mbs))
    except (MissingHardware, ValueError):
        return None
