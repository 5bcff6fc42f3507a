"""The step-time model: one optimizer step of a layout, priced in seconds.

Per micro-batch and pipeline chunk, on one GPU (docs/performance.md has the derivation):

* compute: each GEMM of a layer (attention projections, MLP or routed experts at the tokens
  each local expert receives, the output layer on the last stage) on an additive roofline,
  FLOPs at the family's achieved share of the peak plus its three matrices' bytes at the HBM
  bandwidth: narrow tensor-parallel shards and small micro-batches lose efficiency by
  construction. Causal attention's s^2 term at the fused kernel's share; memory-bound
  elementwise work (norms, residuals, activation); a host overhead per layer and pass;
* recompute: the forward work the activation-recompute setting repeats in the backward pass;
* communication: tensor-parallel all-gather / reduce-scatter, context-parallel key/value ring,
  expert dispatch and combine, pipeline sends, data-parallel gradient reduction and parameter
  gathers (or FSDP's per-micro-batch gathers), each the bytes it moves per GPU over the link
  it crosses (scale-up inside the domain, the NIC outside), exposed unless the framework
  profile (or runtime.overlap) overlaps it, and then only what the compute beside it cannot hide;
* the optimizer step: its memory traffic per locally updated parameter;
* the pipeline: F, B and W of the slowest rank drive the schedule's published closed form
  (dpguard.schedules.closed_forms), so the bubble is priced in seconds.

Everything numeric comes from policies/performance/model.yaml (`dpguard.perf.data`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dpguard import memory
from dpguard.perf import data as perf_data

TFLOPS = 1e12
SECONDS_PER_HOUR = 3600.0
_BF16 = 2  # bytes per activation element


@dataclass(frozen=True)
class Layout:
    """A parallel layout and its batch split, as `dpguard perf` reports it."""

    tensor: int
    pipeline: int
    virtual_stages: int  # chunks per rank as the schedule runs them (interleaved 1F1B's v)
    context: int
    expert: int
    expert_tensor: int
    data: int
    micro_batch_size: int
    microbatches: int  # M per pipeline schedule run
    schedule: str  # a dpguard schedule name, or "none"
    accumulation_steps: int = 1  # schedule runs per optimizer step (torchtitan)

    def __post_init__(self) -> None:
        sizes = (self.tensor, self.pipeline, self.virtual_stages, self.context, self.expert)
        batch = (self.expert_tensor, self.data, self.micro_batch_size, self.microbatches)
        if min(*sizes, *batch, self.accumulation_steps) < 1:
            raise ValueError(f"every degree and batch size of a layout is at least 1: {self}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor,
            "pipeline": self.pipeline,
            "virtual_stages": self.virtual_stages,
            "context": self.context,
            "expert": self.expert,
            "expert_tensor": self.expert_tensor,
            "data": self.data,
            "micro_batch_size": self.micro_batch_size,
            "microbatches": self.microbatches,
            "schedule": self.schedule,
        }


BREAKDOWN = ("compute", "recompute", "tp", "cp", "ep", "pp", "dp", "optimizer", "bubble")


@dataclass(frozen=True)
class Prediction:
    layout: Layout
    step_time_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    bubble: float  # idle share of the slowest rank's step
    gpu_hours: float  # for the manifest's token budget
    low: float  # bounds of tokens_per_s_per_gpu from the calibration error
    high: float
    breakdown_s: Mapping[str, float]  # the slowest rank's step, by cause; sums to step_time_s
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        """The JSON contract of `dpguard perf` and of `plan --format json` (docs/performance.md)."""
        return {
            "layout": self.layout.as_dict(),
            "step_time_s": _round(self.step_time_s),
            "tokens_per_s_per_gpu": _round(self.tokens_per_s_per_gpu),
            "model_tflops_per_gpu": _round(self.model_tflops_per_gpu),
            "mfu": _round(self.mfu),
            "bubble": _round(self.bubble),
            "gpu_hours": _round(self.gpu_hours),
            "low": _round(self.low),
            "high": _round(self.high),
            "breakdown_s": {k: _round(self.breakdown_s[k]) for k in BREAKDOWN},
            "notes": list(self.notes),
        }


def _round(x: float) -> float:
    """Four significant digits: reports are byte-identical across platforms' last bits."""
    return float(f"{x:.4g}")


# ---- The hardware as the model sees it ---------------------------------------------------------


class Hardware(NamedTuple):
    gemm_flops: float  # achieved FLOP/s of large GEMMs in the run's GEMM precision
    attention_flops: float  # achieved FLOP/s of the fused attention forward
    hbm: float  # achieved bytes/s of memory-bound kernels
    gemm_hbm: float  # bytes/s of a GEMM's memory roof
    scale_up: float  # collective bus bytes/s inside the scale-up domain
    scale_out: float  # ... over the NIC
    a2a_up: float
    a2a_out: float
    latency_up: float
    latency_out: float
    domain: int  # GPUs one scale-up fabric joins
    peak: float  # dense peak FLOP/s for the run's precision (the MFU denominator)
    notes: tuple[str, ...]


class MissingHardware(ValueError):
    """A custom accelerator lacks a number the model needs (the message names them)."""


def hardware(cluster: Any, precision: str, d: Mapping[str, Any]) -> Hardware:
    """The achieved rates of `cluster`'s accelerator for a run in `precision`."""
    notes: list[str] = []
    missing = [
        name
        for name, value in (
            ("cluster.hbm_tbps", cluster.hbm_tbps),
            ("cluster.scale_up_gbytes_per_s", cluster.scale_up_gbytes_per_s),
        )
        if value is None and cluster.accelerator == "custom"
    ]
    if missing:
        raise MissingHardware(
            f"the step-time model needs {' and '.join(missing)} for a custom accelerator"
        )
    bf16_peak = cluster.peak_tflops_bf16 * TFLOPS
    peak = bf16_peak * (float(d["gemm"]["fp8_peak_ratio"]) if precision == "fp8" else 1.0)
    gemm_share, known = perf_data.by_family(d["gemm"]["peak_share"], cluster.family, precision)
    attn_share, _ = perf_data.by_family(d["attention"]["peak_share"], cluster.family, "bf16")
    if not known:
        notes.append(
            f"{cluster.accelerator} ({cluster.family}) has no calibrated GEMM efficiency: "
            f"the default family's {gemm_share:.0%} of peak is assumed"
        )
    if cluster.hbm_tbps is None:
        hbm_raw = bf16_peak / float(d["gemm"]["flops_per_hbm_byte"])
        notes.append(
            f"{cluster.accelerator} has no HBM bandwidth in the catalog: "
            f"{hbm_raw / 1e12:.2f} TB/s assumed from its peak"
        )
    else:
        hbm_raw = cluster.hbm_tbps * 1e12
    comm = d["communication"]
    link = (cluster.scale_up_gbytes_per_s or 0.0) * 1e9
    nic = cluster.interconnect.inter_node_gbps_per_gpu * 1e9 / 8
    if cluster.interconnect.intra_node == "pcie" or not link:
        # no scale-up fabric (or none known): the node's GPUs talk over PCIe, whose x16 Gen5
        # 64 GB/s per direction is a 400 Gb/s NIC's order; the NIC's figure stands in
        link = nic
    return Hardware(
        gemm_flops=peak * gemm_share,
        attention_flops=bf16_peak * attn_share,
        hbm=hbm_raw * float(d["elementwise"]["hbm_share"]),
        gemm_hbm=hbm_raw,
        scale_up=link * float(comm["bus_share"]["scale_up"]),
        scale_out=nic * float(comm["bus_share"]["scale_out"]),
        a2a_up=link * float(comm["all_to_all_share"]["scale_up"]),
        a2a_out=nic * float(comm["all_to_all_share"]["scale_out"]),
        latency_up=float(comm["latency_us"]["scale_up"]) * 1e-6,
        latency_out=float(comm["latency_us"]["scale_out"]) * 1e-6,
        domain=max(cluster.scale_up_domain, cluster.gpus_per_node),
        peak=peak,
        notes=tuple(notes),
    )


def gemm_seconds(m: float, n: float, k: float, hw: Hardware, elem_bytes: float) -> float:
    """One (m x k) @ (k x n) GEMM on an additive roofline: its FLOPs at the achieved rate plus
    its three matrices' bytes at HBM speed (Williams et al. 2009, the roofline; the sum rather
    than the max models the ramp between the roofs that cuBLAS shapes show)."""
    if min(m, n, k) <= 0:
        return 0.0
    return 2.0 * m * n * k / hw.gemm_flops + elem_bytes * (m * k + k * n + m * n) / hw.gemm_hbm


# ---- One layer, one micro-batch, one GPU -------------------------------------------------------


class Pass(NamedTuple):
    """Seconds of one layer's forward work on one micro-batch, by kind."""

    gemm: float  # GEMMs (the backward runs two of each: input and weight gradients)
    attention: float  # the attention core's forward
    attention_backward: float  # and its backward
    elementwise: float
    tp: float  # tensor-parallel collectives of the forward (the backward moves as much)
    cp: float  # context-parallel exchange of the forward (the backward moves twice as much)
    ep: float  # expert dispatch + combine of the forward (the backward moves as much)
    attention_gemm: float  # the GEMMs of the attention block alone (recompute of mla_up_proj)
    mlp_gemm: float  # the GEMMs of the MLP or experts alone (recompute of mlp / moe)


class Shape(NamedTuple):
    """What the layer costs depend on, for one layout."""

    tokens: float  # tokens of one micro-batch on one tensor-parallel group (b x s / CP)
    tensor: int
    context: int
    expert: int
    expert_tensor: int
    seq: int
    sequence_parallel: bool
    gemm_bytes: float  # bytes per GEMM operand element (1 under FP8)
    dedup: bool = False  # a hierarchical all-to-all kernel: one copy per remote node
    dispatch_bytes: float = _BF16  # bytes per element of the expert dispatch (1: FP8)
    fused_attention: bool = True  # a FlashAttention-style kernel (no s x s matrix in HBM)


def _link(group_span: int, hw: Hardware) -> tuple[float, float]:
    """(bus bytes/s, latency) of a collective whose group spans `group_span` consecutive GPUs."""
    if group_span <= hw.domain:
        return hw.scale_up, hw.latency_up
    return hw.scale_out, hw.latency_out


def layer_pass(
    arch: memory.Architecture, moe_layer: bool, sh: Shape, hw: Hardware, d: Mapping[str, Any]
) -> Pass:
    """The forward of one transformer layer on one micro-batch, per GPU."""
    h, t, m = arch.hidden_size, sh.tensor, sh.tokens
    params = memory.layer_params(arch)
    shape = memory.shape_layer_params(arch, moe_layer)
    scale = (params.moe_layer if moe_layer else params.dense_layer).dense / shape.dense
    attn_params = memory.attention_params(arch) * scale
    if arch.mla is not None:
        out_width = float(arch.attention_heads * arch.mla.v_head_dim)
        qk = float(arch.attention_heads * (arch.mla.qk_head_dim + arch.mla.qk_rope_head_dim))
        v = float(arch.attention_heads * arch.mla.v_head_dim)
    else:
        out_width = arch.q_width
        qk = v = arch.q_width
    in_width = max(attn_params / h - out_width, 0.0)
    b = sh.gemm_bytes
    attention_gemm = gemm_seconds(m, in_width / t, h, hw, b) + gemm_seconds(
        m, h, out_width / t, hw, b
    )
    gated = 2 if arch.swiglu else 1
    e = d["elementwise"]
    per_ffn = float(e["per_ffn_swiglu"] if arch.swiglu else e["per_ffn_gelu"])
    norm_tokens = m / t if sh.sequence_parallel else m
    elem = float(e["per_hidden"]) + (float(e["per_hidden_dropout"]) if arch.dropout else 0.0)
    elementwise_bytes = elem * h * norm_tokens
    ep_seconds = 0.0
    if moe_layer:
        mlp_width = (shape.dense - memory.attention_params(arch)) * scale / ((gated + 1) * h)
        shared = _mlp_seconds(m, mlp_width, t, h, gated, hw, b) if mlp_width > h else 0.0
        per_expert = params.moe_layer.expert / arch.experts
        width = per_expert / ((gated + 1) * h)
        rank_tokens = m / t
        k, et = arch.experts_per_token, sh.expert_tensor
        local = arch.experts / sh.expert
        per_expert_tokens = sh.expert * et * rank_tokens * k / arch.experts
        experts = local * _mlp_seconds(per_expert_tokens, width, et, h, gated, hw, b)
        mlp_gemm = shared + experts
        elementwise_bytes += per_ffn * (mlp_width / t) * m + per_ffn * rank_tokens * k * width
        elementwise_bytes += float(e["per_routed_hidden"]) * rank_tokens * k * h
        ep_seconds = _all_to_all(rank_tokens * h, k, arch.experts, sh, hw)
    else:
        mlp_gemm = _mlp_seconds(m, arch.ffn, t, h, gated, hw, b)
        elementwise_bytes += per_ffn * (arch.ffn / t) * m
    attention, attention_backward = _attention_core(m, qk + v, arch, sh, hw, d["attention"])
    # tensor parallel: with SP 2 all-gathers + 2 reduce-scatters of b s h / CP per forward,
    # without SP 2 all-reduces (twice the bytes) - the same volume (Korthikanti 2022 §4.2.2);
    # a routed-expert MLP without expert-TP has no TP collective of its own
    tp_seconds = 0.0
    if t > 1:
        bw, lat = _link(t, hw)
        calls = 2 if moe_layer and sh.expert_tensor == 1 else 4
        tp_seconds = calls * (lat + m * h * _BF16 * (t - 1) / t / bw)
    cp_seconds = 0.0
    if sh.context > 1:
        # ring attention: c - 1 steps, each passing this rank's K and V block on
        bw, lat = _link(t * sh.context, hw)
        block = 2 * m * arch.kv_width / t * _BF16
        cp_seconds = (sh.context - 1) * (lat + block / bw)
    return Pass(
        gemm=attention_gemm + mlp_gemm,
        attention=attention,
        attention_backward=attention_backward,
        elementwise=elementwise_bytes * _BF16 / hw.hbm,
        tp=tp_seconds,
        cp=cp_seconds,
        ep=ep_seconds,
        attention_gemm=attention_gemm,
        mlp_gemm=mlp_gemm,
    )


def _attention_core(
    m: float, width: float, arch: memory.Architecture, sh: Shape, hw: Hardware, a: Mapping[str, Any]
) -> tuple[float, float]:
    """(forward, backward) seconds of the attention core: QK^T and AV over `width` (the query-
    key plus value widths of all heads) for `m` query tokens against the whole sequence."""
    # causal attention: QK^T and AV each b s^2 d / 2 multiply-adds per head group and layer
    # (Narayanan et al. 2021 eq. 3 counts 4 b s^2 h for both without the causal half)
    flops = m * sh.seq * width / sh.tensor
    if sh.fused_attention:
        forward = flops / hw.attention_flops
        return forward, forward * float(a["backward_flops_ratio"]) / float(a["backward_share"])
    # unfused: the whole s x s matrix at the GEMM rate, each score element's bytes at HBM speed
    # (the byte counts and their kernels: policies/performance/model.yaml attention.unfused)
    u = a["unfused"]
    scores = m * sh.seq * arch.attention_heads / sh.tensor
    drop = arch.dropout
    fwd_bytes = float(u["forward_bytes"]) + (float(u["dropout_forward_bytes"]) if drop else 0.0)
    bwd_bytes = float(u["backward_bytes"]) + (float(u["dropout_backward_bytes"]) if drop else 0.0)
    matmuls = 2 * flops / hw.gemm_flops
    return matmuls + scores * fwd_bytes / hw.hbm, 2 * matmuls + scores * bwd_bytes / hw.hbm


def _mlp_seconds(
    m: float, width: float, shards: int, h: int, gated: int, hw: Hardware, b: float
) -> float:
    """Up (gated: two matrices) and down projection of an MLP of `width`, split `shards` ways."""
    return gemm_seconds(m, gated * width / shards, h, hw, b) + gemm_seconds(
        m, h, width / shards, hw, b
    )


def _all_to_all(token_elems: float, k: int, experts: int, sh: Shape, hw: Hardware) -> float:
    """Dispatch and combine of one MoE layer's tokens (`token_elems` = tokens x hidden on this
    GPU) over the expert-parallel group: each token goes to its k experts; the copies for
    peers inside the scale-up domain cross the fabric, the rest the NIC, both at once (EP
    groups are consecutive ranks after expert-TP: Megatron's rank order). A hierarchical
    kernel (`sh.dedup`: DeepEP and its kind) sends a token once per remote node and fans it
    out over NVLink there: the expected number of distinct remote nodes among k uniform picks
    over G node groups is (G - 1)(1 - (1 - 1/G)^k) instead of k (G - 1) / G copies (DeepEP
    README; DeepSeek-V3 §3.2.2). FP8 dispatch (`sh.dispatch_bytes` 1) halves the way out."""
    e = sh.expert
    if e <= 1:
        return 0.0
    inside = max(1, min(e, hw.domain // max(sh.expert_tensor, 1)))
    groups = e / inside
    copies_near = k * (inside - 1) / e
    copies_far = k * (e - inside) / e
    if sh.dedup and groups > 1:
        copies_far = (groups - 1) * (1 - (1 - 1 / groups) ** k)
    seconds = 0.0
    for elem_bytes in (sh.dispatch_bytes, _BF16):  # dispatch, then combine (always 16-bit)
        near = token_elems * copies_near * elem_bytes / hw.a2a_up
        far = token_elems * copies_far * elem_bytes / hw.a2a_out
        seconds += (hw.latency_out if copies_far else hw.latency_up) + max(near, far)
    return seconds
