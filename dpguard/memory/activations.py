"""Activation bytes per token of one layer: what each block keeps for its backward pass,
with recompute, FP8 storage, sequence and tensor parallelism."""

from __future__ import annotations

from typing import NamedTuple

from dpguard.memory.shape import FP8_BYTES, Architecture
from dpguard.memory.states import ParallelDegrees, TrainingSetup

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
