"""The model's shape and its parameter counts per layer, as the memory model places them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, NamedTuple

Precision = Literal["bf16", "fp8", "fp16"]
PipelineImpl = Literal["megatron", "torch", "deepspeed"]
Loss = Literal["fused", "unfused", "chunked", "fused_linear"]
Recompute = Literal["none", "selective", "selective_op", "full"]
RecomputeMethod = Literal["uniform", "block"]

GIB = 2**30
# FP8 storage: 1 byte plus one FP32 scale per 1 x 128 tile (DeepSeek-V3 §3.3.2, Kimi K2 §2.4.3).
FP8_BYTES = 1.0 + 4.0 / 128
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)  # Megatron-core transformer_config.py L560-582


class MLA(NamedTuple):
    """Multi-head latent attention ranks (DeepSeek-V2/V3). q_lora_rank 0: no query compression."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Architecture:
    """Model facts. `ffn_hidden_size` None: 4 x hidden; `kv_heads` None: attention_heads;
    `moe_ffn_hidden_size` None: derived from total and active parameters."""

    total_params: float
    layers: int
    hidden_size: int
    attention_heads: int
    seq_len: int
    vocab_size: int
    active_params: float | None = None
    ffn_hidden_size: int | None = None
    swiglu: bool = False
    kv_heads: int | None = None
    head_dim: int | None = None  # None: hidden_size / attention_heads
    mla: MLA | None = None
    experts: int = 0
    experts_per_token: int = 0
    moe_ffn_hidden_size: int | None = None
    shared_experts: int = 0
    dense_layers: int = 0
    mtp_layers: int = 0
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        ints = (self.layers, self.hidden_size, self.attention_heads, self.seq_len, self.vocab_size)
        if min(ints) < 1 or self.total_params <= 0:
            raise ValueError("model sizes must be positive")
        if self.moe and not 0 < self.experts_per_token < self.experts:
            raise ValueError("MoE needs 0 < experts_per_token < experts")
        if self.moe and not 0 < self.active <= self.total_params:
            raise ValueError("MoE needs 0 < active_params <= total_params")
        if not 0 <= self.dense_layers <= self.layers or self.mtp_layers < 0:
            raise ValueError("dense_layers must be within 0..layers and mtp_layers >= 0")

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def active(self) -> float:
        return self.total_params if self.active_params is None else self.active_params

    @property
    def ffn(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def kv(self) -> int:
        return self.kv_heads or self.attention_heads

    @property
    def q_width(self) -> float:
        """Width of all query heads together (the o-projection's input): hidden_size unless the
        heads are wider or narrower than hidden / heads (Qwen3's head_dim 128)."""
        return (
            float(self.attention_heads * self.head_dim)
            if self.head_dim
            else float(self.hidden_size)
        )

    @property
    def kv_width(self) -> float:
        """Width of the key (or value) heads together: kv_heads x head width."""
        return self.q_width * self.kv / self.attention_heads

    @property
    def dropout(self) -> bool:
        """GPT-style blocks (GeLU) train with dropout, Llama-style (SwiGLU) without: the masks
        are 1 byte per element (Korthikanti §4.1)."""
        return not self.swiglu

    def is_moe_layer(self, index: int) -> bool:
        return self.moe and index >= self.dense_layers

    def moe_layers_in(self, layers: range) -> int:
        """MoE layers among `layers` (the leading dense_layers are dense): counted, not looped,
        since the planner sizes thousands of layouts."""
        if not self.moe:
            return 0
        return max(0, layers.stop - max(layers.start, self.dense_layers))


# ---- Parameter counts -------------------------------------------------------------------------


class LayerParams(NamedTuple):
    """Parameters of one layer: split over TP (attention, dense MLP, shared experts, router and
    norms: the last two are replicated in Megatron, but too small to matter) and routed experts."""

    dense: float
    expert: float


def _mlp_params(arch: Architecture, width: int) -> float:
    return (3 if arch.swiglu else 2) * arch.hidden_size * width


def attention_params(arch: Architecture) -> float:
    """Megatron theoretical_memory_usage.py L62-93 (biases and norms left out)."""
    h, a = arch.hidden_size, arch.attention_heads
    if arch.mla is None:
        # q, o: h x (heads x head width); k, v: h x (kv heads x head width)
        return 2.0 * h * (arch.q_width + arch.kv_width)
    m = arch.mla
    qk = m.qk_head_dim + m.qk_rope_head_dim
    q = h * a * qk if not m.q_lora_rank else m.q_lora_rank * (h + a * qk)
    kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a * (
        m.qk_head_dim + m.v_head_dim
    )
    return float(q + kv + a * m.v_head_dim * h)


def shape_layer_params(arch: Architecture, moe_layer: bool) -> LayerParams:
    """One layer's parameters from the shape alone. MoE layers without moe_ffn_hidden_size get
    their expert size from the declared totals (see `layer_params`)."""
    h = arch.hidden_size
    norms = (2 if arch.dropout else 1) * 2 * h  # LayerNorm has a bias, RMSNorm not
    attn = attention_params(arch) + norms
    if not moe_layer:
        return LayerParams(attn + _mlp_params(arch, arch.ffn), 0.0)
    width = arch.moe_ffn_hidden_size or 0
    shared = arch.shared_experts * _mlp_params(arch, width)
    router = h * arch.experts
    return LayerParams(attn + shared + router, arch.experts * _mlp_params(arch, width))


def embedding_matrices(arch: Architecture) -> int:
    return 1 if arch.tied_embeddings else 2


def shape_total_params(arch: Architecture) -> tuple[float, float]:
    """(total, active) implied by the shape, MTP excluded (as published totals exclude it:
    DeepSeek-V3's 671B). None of the MoE expert width known: experts count as zero."""
    vocab = embedding_matrices(arch) * arch.vocab_size * arch.hidden_size
    total = active = float(vocab)
    moe = arch.moe_layers_in(range(arch.layers))
    for count, moe_layer in ((arch.layers - moe, False), (moe, True)):
        if count:  # one layer of each kind, times its count (a review sizes hundreds of files)
            p = shape_layer_params(arch, moe_layer)
            routed = p.expert * arch.experts_per_token / arch.experts if arch.moe else 0.0
            total += count * (p.dense + p.expert)
            active += count * (p.dense + routed)
    return total, active


class ParamLayout(NamedTuple):
    """Per-layer parameters scaled to the declared totals, and the MTP block."""

    dense_layer: LayerParams
    moe_layer: LayerParams
    mtp: LayerParams  # all MTP layers together (projection + block; embedding/head shared)


@lru_cache(maxsize=64)  # one architecture, thousands of layouts in a plan's search
def layer_params(arch: Architecture) -> ParamLayout:
    """The declared totals decide the bytes, the shape decides where they sit: routed experts
    hold (total - active) x E / (E - k) (all experts minus the k active ones), the dense part the
    rest after the vocab matrices, spread over the layers in the shape's proportions."""
    h = arch.hidden_size
    vocab = embedding_matrices(arch) * arch.vocab_size * h
    dense_l = shape_layer_params(arch, False)
    moe_l = shape_layer_params(arch, True)
    n_moe = arch.moe_layers_in(range(arch.layers))
    n_dense = arch.layers - n_moe
    experts = 0.0
    if arch.moe:
        experts = (
            (arch.total_params - arch.active)
            * arch.experts
            / (arch.experts - arch.experts_per_token)
        )
    body_shape = n_dense * dense_l.dense + n_moe * moe_l.dense
    body = arch.total_params - vocab - experts
    if body <= 0 or body_shape <= 0:
        raise ValueError("total_params leave nothing for the transformer layers")
    scale = body / body_shape
    per_moe_expert = experts / n_moe if n_moe else 0.0
    dense_layer = LayerParams(dense_l.dense * scale, 0.0)
    moe_layer = LayerParams(moe_l.dense * scale, per_moe_expert)
    block = moe_layer if arch.moe else dense_layer
    mtp = LayerParams(arch.mtp_layers * (block.dense + 2.0 * h * h), arch.mtp_layers * block.expert)
    return ParamLayout(dense_layer, moe_layer, mtp)
