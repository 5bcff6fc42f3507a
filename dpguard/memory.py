"""Per-GPU training memory of every pipeline rank: model states + activations (pure functions).

Sources (docs/memory.md has the whole derivation, the calibration table and the departures from
Megatron-LM's `theoretical_memory_usage.py`):

* Model-state bytes per parameter: Megatron-LM docs/user-guide/features/dist_optimizer.md (bf16
  params + fp32 main grads + fp32 master + Adam moments: 18 B, 6 + 12/d with the distributed
  optimizer); BF16 moments 2 + 4 + 8/d (DeepSeek-V3, arXiv 2412.19437 §3.3.3; Megatron's
  precision-aware optimizer); ZeRO stages (arXiv 1910.02054 Fig. 1); optimizer offload removes
  the offloaded fraction of the optimizer bytes (Kimi K2, arXiv 2507.20534 §2.4.2).
* Parameter groups per stage: Megatron's split (theoretical_memory_usage.py L214-267): attention,
  dense MLP, shared experts and vocab matrices / TP; routed experts / (EP x ETP). The leading
  `dense_layers` are dense, the rest MoE; the embedding sits on the first stage, the output layer
  (a copy of the tied embedding too, when P > 1) and the MTP layers on the last one.
* Activations: per layer and per token, the tensors each block keeps for its backward pass
  (Korthikanti et al. arXiv 2205.05198 §4.1 for the GPT block, which this reproduces exactly:
  18h + 4 ffn + 5as with dropout; docs/memory.md (b) for GQA, SwiGLU, MLA and MoE with top-k
  token copies), each tagged with what removes it: a Megatron-core recompute module
  (transformer_config.py `recompute_modules`), FP8 storage (TE caches FP8 GEMM inputs; DeepSeek-V3
  §3.3.3 and Kimi K2 §2.4.3 also SwiGLU inputs), sequence parallelism (Korthikanti §4.2.2).
* In-flight micro-batches per rank from closed forms checked against the simulator
  (dpguard.schedules.inflight); DualPipe keeps a second copy of the mirrored stage (arXiv
  2412.19437 Table 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate
from typing import Literal, NamedTuple

from dpguard.schedules.registry import SCHEDULES

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


# ---- Parallel layout and training setup -------------------------------------------------------


@dataclass(frozen=True)
class ParallelDegrees:
    """Degrees of one run. `pipeline` counts pipeline ranks (devices). `expert_tensor` None =
    `tensor`. `sequence_parallel` None: on when tensor > 1 (Megatron's recommendation)."""

    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    expert: int = 1
    context: int = 1
    expert_tensor: int | None = None
    sequence_parallel: bool | None = None

    def __post_init__(self) -> None:
        degrees = (self.tensor, self.pipeline, self.data, self.expert, self.context)
        if min(*degrees, self.etp) < 1:
            raise ValueError("parallel degrees must be >= 1")

    @property
    def etp(self) -> int:
        return self.tensor if self.expert_tensor is None else self.expert_tensor

    @property
    def sp(self) -> bool:
        return self.tensor > 1 if self.sequence_parallel is None else self.sequence_parallel

    @property
    def expert_data(self) -> float:
        """ZeRO degree of expert parameters: EP x ETP x EDP = TP x CP x DP."""
        return self.tensor * self.context * self.data / (self.expert * self.etp)


@dataclass(frozen=True)
class TrainingSetup:
    precision: Precision = "bf16"
    zero_stage: int = 1
    activation_recompute: Recompute = "none"
    recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES
    # full recompute: every layer in groups of recompute_num_layers (uniform), or only the
    # first recompute_num_layers of each stage (block; Megatron-core's --recompute-method)
    recompute_method: RecomputeMethod = "uniform"
    recompute_num_layers: int = 1
    micro_batch_size: int = 1
    optimizer_moment_bytes: int = 4  # 2 for BF16 moments
    grad_bytes: int = 4  # 2 for BF16 main grads (bf16/fp8 training; fp16 keeps 2 anyway)
    bf16_grads_kept: bool = False  # DeepSpeed's BF16_Optimizer: bf16 grads beside the main grads
    fp8_weights: bool = False  # FP8 primary weights with no cached transpose: 1 B per weight
    fp8_weight_cache: bool = False  # TE's FP8 copy + transpose beside BF16 weights: 2 B more
    activation_fp8: bool = False  # activation_storage: fp8
    activation_offload: bool = False
    optimizer_offload: float = 0.0
    flash_attention: bool = True
    loss: Loss = "fused"  # the cross-entropy implementation (runtime.cross_entropy)
    # FSDP holds the unsharded gradients across a step's backward passes instead of
    # reduce-scattering each (runtime.fsdp_gradient_sync: deferred)
    deferred_grad_sync: bool = False
    dtensor_tp: bool = False  # tensor_parallel_impl: dtensor (PyTorch DTensor, torchtitan)
    pipeline_impl: PipelineImpl = "megatron"  # the pipeline runtime (pipeline_parallel_impl)

    def __post_init__(self) -> None:
        if (
            self.zero_stage not in (0, 1, 2, 3)
            or min(self.micro_batch_size, self.recompute_num_layers) < 1
        ):
            raise ValueError(
                "zero_stage must be 0..3, micro_batch_size and recompute_num_layers >= 1"
            )
        if {self.optimizer_moment_bytes, self.grad_bytes} - {2, 4}:
            raise ValueError("moment and gradient bytes must be 2 or 4")
        if not 0 <= self.optimizer_offload <= 1:
            raise ValueError("optimizer_offload must be within 0..1")

    @property
    def modules(self) -> frozenset[str]:
        """Recomputed modules under selective recompute (none: nothing, full: handled apart)."""
        if self.activation_recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules)


class StateBytes(NamedTuple):
    weights: float
    gradients: float
    optimizer: float


def state_bytes(training: TrainingSetup) -> StateBytes:
    """Unsharded bytes/param (Megatron dist_optimizer.md: bf16/fp32 18 B, fp16/fp16 20 B). FP8
    training keeps BF16 weights and casts per GEMM, or with FP8 primary weights (Megatron's
    --fp8-param-gather) FP8 data plus the transpose Transformer Engine caches for the backward
    pass: 2 B either way, 1 B when that cache is off (--disable-parameter-transpose-cache).
    The embedding and output layer stay BF16 but are priced at 1 B too (a small under-count).
    Without FP8 primary weights, Transformer Engine under Megatron-core caches each weight's
    FP8 cast and its transpose for the step (is_first_microbatch; extensions/transformer_engine.py)
    beside the BF16 weight: 4 B (the embedding, never cast, is priced so too: errs large).
    DeepSpeed's BF16_Optimizer keeps the bf16 gradients the backward writes beside its fp32
    buffer (runtime/bf16_optimizer.py: update_hp_grads(clear_lp_grads=False) in the pipeline
    engine; the BLOOM README's "2 + 4 + 12/DP" leaves them out): 2 B more. Under fp16 the
    optimizer's fp32 copy of the gradients (Megatron's 20 B counts it) exists only at the step:
    `step_copy_bytes`."""
    moments = 2.0 * training.optimizer_moment_bytes
    if training.precision == "fp16":
        return StateBytes(2.0, 2.0, 4.0 + moments)
    weights = 1.0 if training.fp8_weights else 4.0 if training.fp8_weight_cache else 2.0
    grads = training.grad_bytes + (2.0 if training.bf16_grads_kept else 0.0)
    return StateBytes(weights, float(grads), 4.0 + moments)


def step_copy_bytes(training: TrainingSetup) -> float:
    """Unsharded bytes/param a mixed-precision optimizer allocates at the step only: under fp16
    the fp32 copy of the fp16 gradients its master weights step with (Megatron
    optimizer.py _copy_model_grads_to_main_grads, `main_grad.float()`, freed by the next
    zero_grad; DeepSpeed FP16_Optimizer and ZeRO-1/2 flatten them into fp32 likewise), sharded
    like the optimizer states."""
    return 4.0 if training.precision == "fp16" else 0.0


def sharded_bytes(training: TrainingSetup, degree: float) -> StateBytes:
    """Per-GPU bytes/param after ZeRO over `degree` ranks and optimizer offload."""
    s = state_bytes(training)
    z = training.zero_stage
    return StateBytes(
        s.weights / degree if z >= 3 else s.weights,
        s.gradients / degree if z >= 2 else s.gradients,
        s.optimizer * (1 - training.optimizer_offload) / (degree if z >= 1 else 1),
    )


# ---- Activations ------------------------------------------------------------------------------


class TokenBytes(NamedTuple):
    """Stored bytes per token of one layer: `seq` is sharded by SP (else replicated over TP),
    `tp` lives inside the tensor-parallel region (/ TP), `expert` counts the k routed copies
    (balanced over EP, split over TP like the sequence), `scores` the s x s attention terms
    per token (/ TP, x keys), `full` is whole on every TP rank (GEMM inputs DTensor keeps
    all-gathered, row-parallel partial sums)."""

    seq: float = 0.0
    tp: float = 0.0
    expert: float = 0.0
    scores: float = 0.0
    full: float = 0.0


def layer_token_bytes(arch: Architecture, moe_layer: bool, training: TrainingSetup) -> TokenBytes:
    """Bytes per token one layer keeps for its backward pass (no full recompute)."""
    h, a = arch.hidden_size, arch.attention_heads
    mods = training.modules
    bf = 2.0
    fp8_gemm = training.precision == "fp8" or training.activation_fp8
    gemm = FP8_BYTES if fp8_gemm else bf  # a Linear's input
    act_in = FP8_BYTES if training.activation_fp8 else bf  # a SwiGLU/GeLU input (MoE, DeepSeek)
    mask = 1.0 if arch.dropout else 0.0
    norm_out = 0.0 if "layernorm" in mods else gemm  # norm output = next GEMM's input
    seq = tp = 0.0
    # GEMM inputs after a norm: Megatron's SP stores them sharded and all-gathers again in the
    # backward pass (Korthikanti §4.2.2); DTensor's SequenceParallel saves the all-gathered
    # input of the column-parallel GEMM (torchtitan's TP plan), whole on every TP rank.
    gathered = 0.0
    # Attention block: norm input, norm output, (MLA latents), q/k/v kept by flash attention,
    # the output (o-proj input), the log-sum-exp, the dropout mask after o-proj.
    seq += bf * h + mask * h
    gathered += norm_out * h
    if arch.mla is None:
        tp += bf * (arch.q_width + 2 * arch.kv_width) + gemm * arch.q_width + 4.0 * a
    else:
        m = arch.mla
        qk = m.qk_head_dim + m.qk_rope_head_dim
        seq += bf * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)  # latents (norm inputs)
        gathered += norm_out * (m.q_lora_rank + m.kv_lora_rank)  # up-projection inputs
        if "mla_up_proj" not in mods:
            tp += bf * a * (2 * qk + m.v_head_dim)
        tp += gemm * a * m.v_head_dim + 4.0 * a
    scores = 0.0
    if not training.flash_attention and "core_attn" not in mods:
        # softmax output 2 B, dropout mask 1 B and dropout output 2 B (Korthikanti: 5as)
        scores = 5.0 * a if arch.dropout else 2.0 * a
    # MLP or MoE block: norm input and output, then the feed-forward tensors.
    seq += bf * h + mask * h
    expert = 0.0
    up = 2 if arch.swiglu else 1  # fc1 outputs per ffn unit (gate and up for SwiGLU)
    if not moe_layer:
        if "mlp" in mods:
            seq += gemm * h  # checkpointed MLP: its input only
        else:
            gathered += norm_out * h
            tp += bf * up * arch.ffn + gemm * arch.ffn
    elif "moe" in mods:
        seq += gemm * h
    else:
        width = arch.moe_ffn_hidden_size or _expert_width(arch)
        gathered += norm_out * h
        seq += 4.0 * arch.experts  # router logits (fp32)
        # FP8 storage caches the SwiGLU input and recomputes its output (DeepSeek-V3 §3.3.3),
        # which is what the moe_act module does.
        fc2_in = 0.0 if "moe_act" in mods or training.activation_fp8 else gemm * width
        # Per routed copy: dispatched input, fc1 output (the activation's input), fc2 input.
        # Megatron-core multiplies the routing probability inside the expert's activation
        # (weighted SwiGLU), so the expert outputs are not kept for the probability gradient.
        per_copy = gemm * h + act_in * up * width + fc2_in
        expert = arch.experts_per_token * per_copy
        if "shared_experts" not in mods:
            tp += arch.shared_experts * (act_in * up * width + gemm * width)
    if training.dtensor_tp:
        return TokenBytes(seq, tp, expert, scores, gathered)
    return TokenBytes(seq + gathered, tp, expert, scores)


def wgrad_token_bytes(arch: Architecture, moe_layer: bool, training: TrainingSetup) -> TokenBytes:
    """Bytes per token one layer keeps for a deferred weight pass (a zero-bubble W): every
    GEMM's input and its output gradient, which the input-gradient pass (I) computes and the
    W pass consumes (arXiv 2401.10241 Table 1: 32sbh for a GPT layer). Recompute does not
    shrink it: the W pass needs the recomputed inputs. Megatron's SP stores the inputs after a
    norm sharded and gathers them for the weight gradient."""
    h, bf = arch.hidden_size, 2.0
    gemm = FP8_BYTES if training.precision == "fp8" or training.activation_fp8 else bf
    up = 2 if arch.swiglu else 1
    # attention: its inputs, then the output gradients of its GEMMs
    seq = gemm * h + bf * h  # the q/kv input (the norm's output), the o-proj output
    if arch.mla is None:
        tp = gemm * arch.q_width + bf * (arch.q_width + 2 * arch.kv_width)
    else:
        m = arch.mla
        qk = m.qk_head_dim + m.qk_rope_head_dim
        seq += (gemm + bf) * (m.q_lora_rank + m.kv_lora_rank) + bf * m.qk_rope_head_dim
        tp = gemm * arch.attention_heads * m.v_head_dim
        tp += bf * arch.attention_heads * (qk + m.qk_head_dim + m.v_head_dim)
    # the feed-forward block: fc1's input, fc2's input, their output gradients
    seq += gemm * h + bf * h
    expert = 0.0
    if not moe_layer:
        tp += (gemm + bf * up) * arch.ffn
    else:
        width = arch.moe_ffn_hidden_size or _expert_width(arch)
        expert = arch.experts_per_token * (gemm * h + bf * h + (gemm + bf * up) * width)
        tp += arch.shared_experts * (gemm + bf * up) * width
    return TokenBytes(seq, tp, expert)


def op_checkpoint_token_bytes(
    arch: Architecture, moe_layer: bool, parallel: ParallelDegrees
) -> TokenBytes:
    """Bytes per token one layer keeps under per-op selective checkpointing (torchtitan's
    `selective_ac_option = "op"`, torchtitan/distributed/activation_checkpoint.py): the block's
    input, the outputs of attention (with its fp32 log-sum-exp), of the reduce-scatter and
    all-to-all collectives, and of every other matmul counted through the block (the 1st, 3rd,
    ...); the rest is recomputed. The router's GEMM is always recomputed and the routed experts'
    grouped GEMMs are not on the save list. The GEMM order is torchtitan's models' (separate
    q, k, v projections; w1, w3, w2 in the MLP; the shared experts after attention)."""
    h, a, bf = arch.hidden_size, arch.attention_heads, 2.0
    # (output width, whole on every TP rank?) of each matmul, in execution order
    mms: list[tuple[float, bool]] = []
    if arch.mla is None:
        mms += [(arch.q_width, False), (arch.kv_width, False), (arch.kv_width, False)]
        attn_out = arch.q_width
    else:
        m = arch.mla
        qk = m.qk_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:  # the low-rank down-projections are not tensor-parallel
            mms += [(m.q_lora_rank, True), (a * qk, False)]
        else:
            mms.append((a * qk, False))
        mms += [
            (m.kv_lora_rank + m.qk_rope_head_dim, True),
            (a * (m.qk_head_dim + m.v_head_dim), False),
        ]
        attn_out = float(a * m.v_head_dim)
    mms.append((h, True))  # o-proj: row-parallel partial sums before the reduce-scatter
    expert = 0.0
    width = float(arch.ffn)
    if moe_layer:
        width = arch.shared_experts * (arch.moe_ffn_hidden_size or _expert_width(arch))
        if parallel.expert > 1:  # the dispatched tokens and the returned expert outputs
            expert = 2 * arch.experts_per_token * bf * h
    if width:
        mms += [(width, False)] * (2 if arch.swiglu else 1) + [(h, True)]
    tp = bf * attn_out + 4.0 * a
    full = 0.0
    for size, whole in mms[::2]:
        if whole:
            full += bf * size
        else:
            tp += bf * size
    reduce_scatters = 2 if parallel.tensor > 1 else 0
    return TokenBytes(bf * h * (1 + reduce_scatters), tp, expert, 0.0, full)


def _expert_width(arch: Architecture) -> float:
    """Per-expert FFN width from the declared totals when the manifest does not give it."""
    n_moe = arch.layers - arch.dense_layers
    per_expert = (arch.total_params - arch.active) / (arch.experts - arch.experts_per_token)
    return per_expert / max(n_moe, 1) / ((3 if arch.swiglu else 2) * arch.hidden_size)


def layer_wgrad_bytes(
    arch: Architecture, moe_layer: bool, parallel: ParallelDegrees, training: TrainingSetup
) -> float:
    """Bytes one layer keeps on one GPU for one micro-batch's deferred W pass."""
    return _on_one_gpu(arch, parallel, training, wgrad_token_bytes(arch, moe_layer, training))


def _on_one_gpu(
    arch: Architecture, parallel: ParallelDegrees, training: TrainingSetup, b: TokenBytes
) -> float:
    """A layer's per-token bytes `b` for one micro-batch (its s/CP tokens) on one GPU."""
    tokens = arch.seq_len / parallel.context * training.micro_batch_size
    t = parallel.tensor
    seq_div = t if parallel.sp else 1
    return tokens * ((b.seq + b.expert) / seq_div + (b.tp + b.scores * arch.seq_len) / t + b.full)


def layer_activation_bytes(
    arch: Architecture, moe_layer: bool, parallel: ParallelDegrees, training: TrainingSetup
) -> float:
    """Bytes one layer stores for one micro-batch on one GPU (its s/CP tokens; the score
    terms, without FlashAttention, run over all s keys)."""
    if training.activation_recompute == "full":
        # the checkpointed layer input
        return _on_one_gpu(arch, parallel, training, TokenBytes(seq=2.0 * arch.hidden_size))
    if training.activation_recompute == "selective_op":
        b = op_checkpoint_token_bytes(arch, moe_layer, parallel)
    else:
        b = layer_token_bytes(arch, moe_layer, training)
    return _on_one_gpu(arch, parallel, training, b)


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


def estimate(
    arch: Architecture,
    parallel: ParallelDegrees,
    training: TrainingSetup,
    pipeline: PipelineLayout,
    uncertainty: Uncertainty = DEFAULT_UNCERTAINTY,
) -> MemoryEstimate:
    """Memory of one GPU of every pipeline rank (see the module docstring)."""
    layout = layer_params(arch)
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
