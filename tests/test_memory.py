"""dpguard.memory against hand-worked examples (the arithmetic is in each docstring)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dpguard.memory import (
    GIB,
    MLA,
    Architecture,
    ParallelDegrees,
    PipelineLayout,
    TrainingSetup,
    Uncertainty,
    communicators,
    estimate,
    layer_activation_bytes,
    layer_token_bytes,
    layer_wgrad_bytes,
    op_checkpoint_token_bytes,
    output_bytes,
    pipeline_layout,
    shape_total_params,
    sharded_bytes,
    stage_layers,
    state_bytes,
    step_copy_bytes,
    verdict,
    wgrad_token_bytes,
)
from dpguard.schedules.inflight import inflight

# DeepSeek-V3 (arXiv 2412.19437 §2, §4.2): 61 layers (3 dense), h 7168, 128 heads, MLA ranks,
# 256 routed + 1 shared experts of width 2048, top-8, dense FFN 18432, vocab 129,280, 1 MTP.
DSV3 = Architecture(
    671e9, 61, 7168, 128, 4096, 129_280, active_params=37e9, ffn_hidden_size=18432, swiglu=True,
    mla=MLA(1536, 512, 128, 64, 128), experts=256, experts_per_token=8, moe_ffn_hidden_size=2048,
    shared_experts=1, dense_layers=3, mtp_layers=1,
)  # fmt: skip
# Llama 3 405B (arXiv 2407.21783 Table 3): 126 layers, h 16384, 128 heads, 8 KV, FFN 53248.
LLAMA405 = Architecture(
    405e9, 126, 16384, 128, 8192, 128_256, ffn_hidden_size=53248, swiglu=True, kv_heads=8
)
GPT22B = Architecture(22e9, 48, 6144, 64, 2048, 51_200)  # Korthikanti Table 3
# Llama 3.1 8B: 32 layers, h 4096, 32 heads, 8 KV, FFN 14336, vocab 128,256.
LLAMA8 = Architecture(
    8.03e9, 32, 4096, 32, 8192, 128_256, ffn_hidden_size=14336, swiglu=True, kv_heads=8
)


def test_shape_parameter_counts_match_the_published_totals():
    """DeepSeek-V3: 671.0B total, 37.6B active (published 671B / 37B); Llama 3 405B with
    untied embeddings: 405.9B (Meta's 405B)."""
    total, active = shape_total_params(DSV3)
    assert total == pytest.approx(671e9, rel=0.002)
    assert active == pytest.approx(37e9, rel=0.02)
    total, _ = shape_total_params(LLAMA405)
    assert total == pytest.approx(405.85e9, rel=0.001)


def test_gpt_block_is_korthikanti_eq_1():
    """GeLU 4h block with dropout: 18h + 4 ffn = 34h per token, plus 5as without FlashAttention
    and without recompute (arXiv 2205.05198 eq. 1); selective removes the 5as term."""
    none = TrainingSetup(activation_recompute="none", flash_attention=False)
    b = layer_token_bytes(GPT22B, False, none)
    assert b.seq + b.tp == pytest.approx(34 * 6144 + 4 * 64, abs=1)  # + the fp32 LSE, 4a
    assert b.scores == 5 * 64
    selective = replace(none, activation_recompute="selective")
    assert layer_token_bytes(GPT22B, False, selective).scores == 0


def test_llama_block_is_12h_plus_4h_g_over_a_plus_6_ffn():
    """docs/memory.md (b): 12h + 4h G/a + 6 ffn = 31.75h for Llama 3 405B (+ the LSE)."""
    b = layer_token_bytes(LLAMA405, False, TrainingSetup())
    h = 16384
    assert b.seq + b.tp == 12 * h + 4 * h * 8 / 128 + 6 * 53248 + 4 * 128


def test_tensor_and_sequence_parallel_split_per_korthikanti_table_2():
    """TP 8 without SP keeps the 10 sbh outside the TP region whole (sbh(10 + 24/t)); with SP
    everything is divided by t (34 sbh/t)."""
    sel = TrainingSetup(activation_recompute="selective")
    sbh = 2048 * 6144
    without = layer_activation_bytes(
        GPT22B, False, ParallelDegrees(8, sequence_parallel=False), sel
    )
    with_sp = layer_activation_bytes(GPT22B, False, ParallelDegrees(8), sel)
    assert without == pytest.approx(sbh * (10 + 24 / 8) + 2048 * 4 * 64 / 8)
    assert with_sp == pytest.approx(sbh * 34 / 8 + 2048 * 4 * 64 / 8)


def test_deepseek_techniques_cut_the_moe_layer():
    """DeepSeek-V3's MoE layer per token: BF16 without recompute 255 KB (docs/memory.md (b):
    attention ~201 KB is the MLA part, MoE ~255 KB); with recomputed norms and MLA up-projection
    and FP8 storage (SwiGLU output recomputed) about 150 KB, under a third of it in attention."""
    bf16 = layer_token_bytes(DSV3, True, TrainingSetup())
    full = bf16.seq + bf16.tp + bf16.expert
    assert full == pytest.approx(456e3, rel=0.02)
    deepseek = TrainingSetup(
        "fp8", activation_recompute="selective", recompute_modules=("layernorm", "mla_up_proj"),
        activation_fp8=True,
    )  # fmt: skip
    d = layer_token_bytes(DSV3, True, deepseek)
    assert d.seq + d.tp + d.expert == pytest.approx(150e3, rel=0.05)


def test_model_states_per_parameter():
    """Megatron dist_optimizer.md: bf16 18 B -> 6 + 12/d; BF16 moments 2 + 4 + 8/d; optimizer
    offload 0.5 halves the optimizer part; ZeRO-3 shards all three."""
    s = sharded_bytes(TrainingSetup(zero_stage=1), 8)
    assert (s.weights, s.gradients, s.optimizer) == (2, 4, 1.5)
    s = sharded_bytes(TrainingSetup(zero_stage=1, optimizer_moment_bytes=2), 8)
    assert s.optimizer == 1.0
    s = sharded_bytes(TrainingSetup(zero_stage=1, optimizer_offload=0.5), 8)
    assert s.optimizer == 0.75
    s = sharded_bytes(TrainingSetup(zero_stage=3), 8)
    assert (s.weights, s.gradients, s.optimizer) == (0.25, 0.5, 1.5)


def test_stage_layers_spread_the_remainder():
    """61 layers over 16 stages: floor(s x 61 / 16) boundaries, so 3 stages of 3 and 13 of 4."""
    sizes = [len(r) for r in stage_layers(61, 16)]
    assert sum(sizes) == 61 and sorted(set(sizes)) == [3, 4] and sizes.count(3) == 3
    assert sizes[0] == 3  # the first stage, which also holds the embedding, gets fewer
    assert [len(r) for r in stage_layers(8, 4)] == [2, 2, 2, 2]


def test_stage_layers_set_by_hand_are_taken_as_given():
    """Megatron's layout "Et|(tt|)*30mL" (DeepSeek-V3 recipes): 1 layer beside the embedding,
    2 per stage, none beside MTP and the loss. Counts that do not fit are ignored."""
    counts = (1, *[2] * 30, 0)
    ranges = stage_layers(61, 32, counts=counts)
    assert [len(r) for r in ranges] == list(counts)
    assert ranges[0] == range(0, 1) and ranges[-1] == range(61, 61)
    assert [len(r) for r in stage_layers(61, 32, counts=(2,) * 32)] == [
        len(r) for r in stage_layers(61, 32)
    ]


def test_a_split_set_by_hand_moves_memory_between_ranks():
    """Llama 3 405B on 16 stages as Meta split it (arXiv 2407.21783 §3.3.2): 7 layers beside
    the embedding and beside the head, 8 elsewhere. The even split of 126 gives 7 to stages 0
    and 8 and 8 to the last: by hand, the last rank is lighter and rank 8 heavier."""
    even = pipeline_layout("1f1b", 16, 1, inflight("1f1b", 16, 64))
    by_hand = even._replace(counts=(7, *[8] * 14, 7))
    par, train = ParallelDegrees(8, 16, 1), TrainingSetup(activation_recompute="selective")
    a = estimate(LLAMA405, par, train, even).ranks
    b = estimate(LLAMA405, par, train, by_hand).ranks
    assert [r.layers for r in a][::8] == [7, 7] and a[-1].layers == 8
    assert [b[0].layers, b[8].layers, b[-1].layers] == [7, 8, 7]
    assert b[0].total == a[0].total
    assert b[8].total > a[8].total and b[-1].total < a[-1].total


def _dsv3_estimate(schedule: str = "dualpipe"):
    layout = pipeline_layout(schedule, 16, 1, inflight(schedule, 16, 120))
    train = TrainingSetup(
        "fp8", activation_recompute="selective", recompute_modules=("layernorm", "mla_up_proj"),
        optimizer_moment_bytes=2, activation_fp8=True,
    )  # fmt: skip
    return estimate(DSV3, ParallelDegrees(1, 16, 128, 64), train, layout)


def test_dualpipe_rank_0_holds_embedding_head_and_mtp_twice_as_deepseek_says():
    """DualPipe puts the first and the last stage on rank 0 (arXiv 2412.19437 §3.2.3): its
    second copy is the last stage with the output head and the MTP layer, ~36 GiB of states
    (docs/memory.md (c) budget check: ~36 GiB on that rank, ~23 GiB on the others)."""
    e = _dsv3_estimate()
    r0 = e.ranks[0]
    assert r0.states / GIB == pytest.approx(35, abs=2)
    assert e.ranks[1].states / GIB == pytest.approx(23, abs=2)
    assert all(r.inflight == 17 for r in e.ranks)  # PP + 1 (Table 2)
    assert e.worst.rank in (0, 15)
    assert e.worst.low < e.worst.total < e.worst.high


def test_1f1b_has_no_second_copy_and_rank_0_holds_p_micro_batches():
    e = _dsv3_estimate("1f1b")
    assert all(r.replica == 0 for r in e.ranks)
    assert [r.inflight for r in e.ranks[:3]] == [16, 15, 14]


def test_offload_keeps_two_micro_batches_and_full_recompute_keeps_layer_inputs():
    layout = PipelineLayout(4, 4, (0, 1, 2, 3), (4, 3, 2, 1))
    par = ParallelDegrees(8, 4, 1)
    base = estimate(LLAMA405, par, TrainingSetup(), layout).ranks[0]
    off = estimate(LLAMA405, par, TrainingSetup(activation_offload=True), layout).ranks[0]
    assert off.activations == pytest.approx(base.activations / 2)
    full = estimate(LLAMA405, par, TrainingSetup(activation_recompute="full"), layout).ranks[0]
    per_input = 8192 * 2 * 16384 / 8
    working = layer_activation_bytes(LLAMA405, False, par, TrainingSetup())
    assert full.layers == 31  # 126 layers over 4 stages: 31, 32, 31, 32
    # plus one layer's activations while it is recomputed, less its input (already kept)
    assert full.activations == pytest.approx(4 * 31 * per_input + working - per_input)


def test_the_embedding_dropout_mask_stays_on_the_first_stage_under_full_recompute():
    """The embedding is outside the recomputed blocks: with dropout (GeLU, GPT-style) each
    micro-batch in flight keeps its 1 B mask on stage 0, sequence-sharded under SP; a
    Llama-style block trains without dropout and keeps nothing there."""
    layout = PipelineLayout(4, 4, (0, 1, 2, 3), (4, 3, 2, 1))
    full = TrainingSetup(activation_recompute="full")
    for par, mask in (
        (ParallelDegrees(8, 4, 1), 2048 * 6144 / 8),
        (ParallelDegrees(1, 4, 1), 2048 * 6144),
    ):
        gpt = estimate(GPT22B, par, full, layout).ranks
        per_input = 2.0 * 2048 * 6144 / (par.tensor if par.sp else 1)
        assert gpt[0].activations - gpt[1].activations == pytest.approx(
            4 * (12 * per_input + mask) - 3 * 12 * per_input
        )
    llama = estimate(LLAMA405, ParallelDegrees(8, 4, 1), full, layout).ranks
    per_input = 2.0 * 8192 * 16384 / 8
    assert llama[0].activations - llama[2].activations == pytest.approx(2 * 31 * per_input)


def test_verdicts():
    e = _dsv3_estimate()
    w = e.worst
    assert verdict(w, w.total + 1) == "fits"
    assert verdict(w, w.total - 1) == "likely-oom"
    assert verdict(w, w.low - 1) == "oom"


def test_per_op_checkpointing_keeps_every_other_matmul_of_torchtitans_block():
    """Llama 3 8B, TP 1: matmuls wq (h), wk, wv (kv = h/4 each), wo (h), w1, w3 (ffn), w2 (h);
    the 1st, 3rd, 5th and 7th are kept (wq, wv, w1, w2), with the block input, the attention
    output and its fp32 log-sum-exp: seq 2h (input), tp 2(h + h/4 + ffn) + 2h + 4a, full 2h
    (w2's output, a row-parallel partial sum); 15.5h + 4a in all with ffn = 3.5h."""
    h, ffn, a = 4096, 14336, 32
    b = op_checkpoint_token_bytes(LLAMA8, False, ParallelDegrees())
    assert b.seq == 2 * h
    assert b.tp == 2 * (h + h / 4 + ffn) + 2 * h + 4 * a
    assert b.full == 2 * h
    assert b.seq + b.tp + b.full == pytest.approx(15.5 * h + 4 * a)  # docs/memory.md: 15.5h


def test_per_op_checkpointing_of_an_moe_layer_saves_the_all_to_all_outputs_with_ep():
    """DeepSeek-V3 MoE layer: wq_a, wq_b, wkv_a, wkv_b, wo, then the shared expert's w1, w3,
    w2 (the router is recomputed, the grouped expert GEMMs not saved); with EP > 1 the
    dispatched tokens and the returned outputs, 2h per routed copy each."""
    h, k = 7168, 8
    one = op_checkpoint_token_bytes(DSV3, True, ParallelDegrees())
    ep = op_checkpoint_token_bytes(DSV3, True, ParallelDegrees(data=64, expert=64))
    assert one.expert == 0
    assert ep.expert == 2 * k * 2 * h
    # kept: wq_a (1536, replicated), wkv_a (576, replicated), wo (h, partial sums), shared w1
    # (2048): the 1st, 3rd, 5th, 7th; plus attention output 128 x 128 and the LSE
    assert one.full == 2 * (1536 + 576 + h)
    assert one.tp == 2 * 2048 + 2 * 128 * 128 + 4 * 128


def test_per_op_checkpointing_is_between_selective_and_full_recompute():
    """(With FlashAttention, Megatron's default core_attn keeps as much as no recompute.)"""
    par = ParallelDegrees(data=8)
    sizes = [
        layer_activation_bytes(LLAMA8, False, par, TrainingSetup(activation_recompute=mode))
        for mode in ("full", "selective_op", "selective", "none")
    ]
    assert sizes[0] < sizes[1] < sizes[2] == sizes[3]


def test_the_loss_peak_by_implementation():
    """Megatron's fused vocab-parallel loss keeps the fp32 logits (4 B); an eager unfused one
    12 B per logit, 16 B under DTensor loss parallelism, which also keeps the final norm's
    output gathered (2h per token)."""
    tokens, v, h = 8192.0, 128_256, 4096
    fused = output_bytes(LLAMA8, ParallelDegrees(tensor=8), TrainingSetup(), tokens)
    assert fused == 4 * tokens * v / 8
    unfused = TrainingSetup(loss="unfused")
    assert output_bytes(LLAMA8, ParallelDegrees(), unfused, tokens) == 12 * tokens * v
    dtensor = replace(unfused, dtensor_tp=True)
    got = output_bytes(LLAMA8, ParallelDegrees(tensor=8), dtensor, tokens)
    assert got == 16 * tokens * v / 8 + 2 * tokens * h


def test_chunked_and_fused_linear_losses_keep_no_full_fp32_logits():
    """torchtune's chunked loss keeps the bf16 logits and one of 8 chunks' fp32 working set
    (2 + 12/8 B per logit); Liger's fused linear cross-entropy keeps no logits at all, only the
    input's gradient and one chunk (2 + 2 B per hidden value) and the output weight's gradient:
    at a 128k vocabulary and 8,192 tokens, a tenth of the unfused loss's peak."""
    tokens, v, h = 8192.0, 128_256, 4096
    par = ParallelDegrees()
    chunked = output_bytes(LLAMA8, par, TrainingSetup(loss="chunked"), tokens)
    assert chunked == 3.5 * tokens * v
    fused_linear = output_bytes(LLAMA8, par, TrainingSetup(loss="fused_linear"), tokens)
    assert fused_linear == 4 * tokens * h + 2 * v * h
    unfused = output_bytes(LLAMA8, par, TrainingSetup(loss="unfused"), tokens)
    assert fused_linear < chunked < unfused and fused_linear < unfused / 10


def test_dtensor_tp_keeps_the_gathered_gemm_inputs_whole():
    """Under TP 8 with SP, Megatron stores the two norm outputs sharded (2h / 8 each);
    DTensor keeps them all-gathered (2h each on every rank)."""
    par = ParallelDegrees(tensor=8)
    megatron = layer_activation_bytes(LLAMA8, False, par, TrainingSetup())
    dtensor = layer_activation_bytes(LLAMA8, False, par, TrainingSetup(dtensor_tp=True))
    tokens, h = 8192, 4096
    assert dtensor - megatron == pytest.approx(tokens * 2 * (2 * h) * (1 - 1 / 8))


def test_torch_pipelining_keeps_every_micro_batch_s_logits_and_receive_buffers():
    """torch.distributed.pipelining returns the merged outputs of the step, so its last stage
    holds the bf16 logits of all M micro-batches (vocabulary-parallel over TP), and every stage
    keeps one receive buffer per micro-batch for its input (but the first) and its output
    gradient (but the last), the in-flight inputs being the activations already counted;
    Megatron-core frees each output once sent and receives into fresh tensors."""
    layout = pipeline_layout("1f1b", 8, 1, inflight("1f1b", 8, 8))._replace(microbatches=8)
    par = ParallelDegrees(8, 8, 8)
    base = TrainingSetup(activation_recompute="full", micro_batch_size=4)
    megatron = estimate(LLAMA405, par, base, layout).ranks
    torch = estimate(LLAMA405, par, replace(base, pipeline_impl="torch"), layout).ranks
    tokens = 4 * 8192
    kept = 8 * 2.0 * tokens * 128_256 / 8  # 8 micro-batches of bf16 logits
    boundary = 2.0 * tokens * 16384 / 8  # one micro-batch's stage input, sequence-parallel
    assert kept / GIB == pytest.approx(7.83, abs=0.01)
    assert boundary / GIB == 0.125
    # rank 0: 8 output-gradient buffers and its 8 in-flight outputs; rank r (1 .. 6): 8 input
    # buffers less its 8 - r in flight, 8 gradient buffers and its 8 - r outputs; the last
    # rank: 7 input buffers beyond its one in flight
    extra = [t.other - m.other for t, m in zip(torch, megatron, strict=True)]
    assert extra[0] == pytest.approx((8 + 8) * boundary)
    for r in range(1, 7):
        assert extra[r] == pytest.approx((8 - (8 - r) + 8 + (8 - r)) * boundary)
    assert extra[-1] == pytest.approx(kept + 7 * boundary)
    # the logits and the buffers are transient tensors: they widen the band as activations do
    assert torch[-1].high - megatron[-1].high == pytest.approx(extra[-1] * 1.6)
    assert torch[-1].low - megatron[-1].low == pytest.approx(extra[-1] * 0.6)


def test_deepspeed_pipeline_keeps_the_in_flight_stage_outputs():
    """DeepSpeed's PipelineEngine keeps each in-flight micro-batch's stage output until its
    backward pass, on every rank but the last: partitioned over TP when TP > 1 (its 1/TP slice,
    sequence-parallel or not), whole without TP."""
    layout = pipeline_layout("1f1b", 8, 1, inflight("1f1b", 8, 8))._replace(microbatches=32)
    base = TrainingSetup(activation_recompute="full", micro_batch_size=4)
    for par, boundary in (
        (ParallelDegrees(8, 8, 8), 2.0 * 4 * 8192 * 16384 / 8 / 8),
        (ParallelDegrees(8, 8, 8, sequence_parallel=False), 2.0 * 4 * 8192 * 16384 / 8),
        (ParallelDegrees(1, 8, 8), 2.0 * 4 * 8192 * 16384),
    ):
        megatron = estimate(LLAMA405, par, base, layout).ranks
        deepspeed = estimate(LLAMA405, par, replace(base, pipeline_impl="deepspeed"), layout)
        extra = [d.other - m.other for d, m in zip(deepspeed.ranks, megatron, strict=True)]
        assert extra == pytest.approx([(8 - r) * boundary for r in range(7)] + [0.0])


def test_deepspeed_bf16_optimizer_reduces_gradients_through_a_bf16_copy():
    """DeepSpeed's pipeline engine all-reduces BF16_Optimizer's fp32 gradients through a bf16
    copy of the whole buffer, 2 B per parameter of the rank, after the last backward pass: the
    allocator keeps that segment beside the activations' (central and high count it), and
    only the larger phase is certain (the low bound). BLOOM's layout: at micro-batch 2 the
    step is every rank's larger phase; at 4 the activations are on the first seven ranks (12
    down to 6 micro-batches in flight)."""
    layout = pipeline_layout("1f1b", 12, 1, inflight("1f1b", 12, 12))._replace(microbatches=128)
    par = ParallelDegrees(4, 12, 8, sequence_parallel=False)
    gpt = Architecture(176e9, 70, 14336, 112, 2048, 250_880)
    for mbs, activation_phase in ((2, []), (4, list(range(7)))):
        ds = TrainingSetup(
            activation_recompute="full",
            micro_batch_size=mbs,
            flash_attention=False,
            pipeline_impl="deepspeed",
        )
        plain = estimate(gpt, par, ds, layout).ranks
        bf16 = estimate(gpt, par, replace(ds, bf16_grads_kept=True), layout).ranks
        certain_at_step = []
        for p, b in zip(plain, bf16, strict=True):
            copy = 2.0 * b.parameters
            assert b.gradients - p.gradients == pytest.approx(copy)  # the kept bf16 .grad
            assert b.other - p.other == pytest.approx(copy)
            assert b.high - p.high == pytest.approx(2 * copy * 1.05)
            step = (b.states + copy) * 0.97 + 1.5 * GIB / 2 + b.communicators * 0.3
            assert b.low == pytest.approx(max(p.low + copy * 0.97, step))
            certain_at_step.append(b.low == pytest.approx(step))
        assert [r for r, s in enumerate(certain_at_step) if not s] == activation_phase
    # without pipeline parallelism DeepSpeed's plain engine reduces the bf16 gradients in
    # 500M-element buckets instead: no copy of the whole buffer
    alone, one = PipelineLayout(1, 1, (0,), (1,)), ParallelDegrees(4, 1, 96)
    ds = TrainingSetup(activation_recompute="full", pipeline_impl="deepspeed")
    plain = estimate(gpt, one, ds, alone).ranks[0]
    bf16 = estimate(gpt, one, replace(ds, bf16_grads_kept=True), alone).ranks[0]
    assert bf16.other == plain.other


def test_transformer_engine_keeps_an_fp8_copy_of_bf16_weights_for_the_step():
    """Without FP8 primary weights, Megatron-core lets Transformer Engine cache each weight's
    FP8 cast and transpose across the micro-batches (is_first_microbatch): 2 B beside the 2."""
    assert state_bytes(TrainingSetup("fp8", fp8_weight_cache=True)) == (4.0, 4.0, 12.0)
    assert state_bytes(TrainingSetup("fp8")).weights == 2.0


def test_fsdp_collectives_hold_one_layer_s_buffers():
    """FSDP (ZeRO-3) gathers a layer and prefetches the next (bf16), the layer's bf16 gradients
    wait for the reduce-scatter's fp32 copy: 2 + 2 + 2 + 4 = 10 B per parameter of one layer.
    Under pipeline parallelism the weights stay gathered and the gradients accumulate
    unsharded (states), and the reduction runs after the last backward pass: only the two
    gathered layers' buffers remain, 4 B. The sharded fp32 gradients (4 B / 8 per parameter
    of the stage) stay reserved on the reduce-scatter stream: central and high count them,
    the low bound does not (they are never live at the peak)."""
    layer = LLAMA405.hidden_size * (2 * LLAMA405.hidden_size + 2 * 1024)  # attention
    layer += 3 * LLAMA405.hidden_size * 53248  # SwiGLU MLP
    single = PipelineLayout(1, 1, (0,), (1,))
    flat = estimate(LLAMA405, ParallelDegrees(8, 1, 8), TrainingSetup(), single).ranks[0]
    fsdp = estimate(LLAMA405, ParallelDegrees(8, 1, 8), TrainingSetup(zero_stage=3), single)
    assert fsdp.ranks[0].other - flat.other == pytest.approx(10 * layer / 8, rel=0.02)
    piped = pipeline_layout("1f1b", 8, 1, inflight("1f1b", 8, 8))._replace(microbatches=8)
    base = estimate(LLAMA405, ParallelDegrees(8, 8, 8), TrainingSetup(), piped).ranks[0]
    zero3 = estimate(LLAMA405, ParallelDegrees(8, 8, 8), TrainingSetup(zero_stage=3), piped)
    r = zero3.ranks[0]
    gathered, cached = 4 * layer / 8, r.parameters * 4 / 8
    assert r.other - base.other == pytest.approx(gathered + cached, rel=0.02)
    assert r.states == pytest.approx(base.states)
    assert r.low - base.low == pytest.approx(gathered, rel=0.02)
    assert r.high - base.high > gathered + cached


def test_the_fp16_step_copy_is_a_phase_of_its_own():
    """fp16 keeps 16 B per parameter through the forward and backward passes; the optimizer's
    fp32 copy of the gradients (4 B, sharded like the optimizer) exists only at the step. A
    rank needs the larger phase: the activations when many micro-batches are in flight, the
    step copy when few are. DeepSpeed's flat copy is reserved beside the activations instead."""
    assert state_bytes(TrainingSetup("fp16")) == (2.0, 2.0, 12.0)
    assert step_copy_bytes(TrainingSetup("fp16")) == 4.0
    assert step_copy_bytes(TrainingSetup()) == 0.0
    fp16 = TrainingSetup("fp16", zero_stage=0, activation_recompute="none")
    degrees = ParallelDegrees(1, 8, 1)

    def worst(m: int, training: TrainingSetup):
        pipe = pipeline_layout("1f1b", 8, 1, inflight("1f1b", 8, m))._replace(microbatches=m)
        return estimate(GPT22B, degrees, training, pipe).ranks[1]

    many, one = worst(8, fp16), worst(1, fp16)
    copy = 4.0 * one.parameters
    bf16 = replace(fp16, precision="bf16")
    assert many.activations > copy  # the activation phase is the larger: nothing added
    assert many.other == pytest.approx(worst(8, bf16).other)
    assert one.activations < copy  # the step is the larger
    assert one.total == pytest.approx(one.states + copy + 1.5 * GIB + one.communicators, rel=1e-6)
    assert one.low >= (one.states + copy) * 0.97
    deepspeed = worst(8, replace(fp16, pipeline_impl="deepspeed"))
    deepspeed_bf16 = worst(8, replace(bf16, pipeline_impl="deepspeed"))
    assert deepspeed.other - deepspeed_bf16.other == pytest.approx(copy)


def test_a_deferred_weight_pass_keeps_every_gemm_input_and_output_gradient():
    """arXiv 2401.10241 Table 1: a GPT layer's W pass needs 32sbh (the q/k/v, o-proj, fc1 and
    fc2 inputs h + h + h + 4h and their output gradients 3h + h + 4h + h, 2 B each), against
    the 34sbh + 5as^2b the full backward keeps. ZB-H1 (zb1p) defers rank r's weight passes by
    r: its last rank holds P - 1 of them where 1F1B holds one micro-batch; 1F1B is unchanged."""
    h = GPT22B.hidden_size
    assert wgrad_token_bytes(GPT22B, False, TrainingSetup()) == (8 * h, 24 * h, 0.0, 0.0, 0.0)
    training = TrainingSetup(zero_stage=0, activation_recompute="none", flash_attention=False)
    degrees = ParallelDegrees(1, 8, 1)
    pending = 6 * layer_wgrad_bytes(GPT22B, False, degrees, training)  # 48 layers / 8 stages
    held = 6 * layer_activation_bytes(GPT22B, False, degrees, training)
    # (dpguard's held count also has attention's 4a-byte log-sum-exp: 0.03 % here)
    assert pending == pytest.approx(held * 32 / (34 + 5 * 64 * 2048 / h), rel=1e-3)

    def ranks(schedule: str):
        pipe = pipeline_layout(schedule, 8, 1, inflight(schedule, 8, 32))
        return estimate(GPT22B, degrees, training, pipe._replace(microbatches=32)).ranks

    for zb, plain in zip(ranks("zb1p"), ranks("1f1b"), strict=True):
        r = zb.rank
        # the steady state: 8 - r held and r deferred, then one more W right after each I
        expected = max((8 - r) * held + r * pending, (7 - r) * held + (r + 1) * pending)
        assert zb.activations - plain.activations == pytest.approx(
            expected - min(32, 8 - r) * held, rel=1e-9
        )


def test_deepspeed_bf16_optimizer_keeps_the_bf16_gradients_beside_the_fp32_buffer():
    """DeepSpeed's BF16_Optimizer leaves the bf16 .grad tensors allocated beside its fp32
    gradient buffer: 2 B more per parameter (unsharded, ZeRO 0-1); fp16 already counts them."""
    assert state_bytes(TrainingSetup(bf16_grads_kept=True)) == (2.0, 6.0, 12.0)
    assert state_bytes(TrainingSetup("fp8", bf16_grads_kept=True)).gradients == 6.0
    assert state_bytes(TrainingSetup("fp16", bf16_grads_kept=True)) == state_bytes(
        TrainingSetup("fp16")
    )


def test_master_weight_remainders_take_two_bytes_of_the_optimizer_states():
    """Apex's DistributedFusedAdam with store_param_remainders keeps the low 16 bits of each
    fp32 master weight (the bf16 weight is the high half): 2 + 8 B of optimizer states instead
    of 4 + 8, sharded like them; weights and gradients do not change."""
    plain, kept = TrainingSetup(), TrainingSetup(master_remainders=True)
    assert state_bytes(kept) == (2.0, 4.0, 10.0)
    assert state_bytes(replace(kept, optimizer_moment_bytes=2)).optimizer == 6.0
    assert sharded_bytes(kept, 8).optimizer == pytest.approx(10.0 / 8)
    assert state_bytes(plain).optimizer - state_bytes(kept).optimizer == 2.0


def test_fp8_primary_weights_without_a_cached_transpose_take_one_byte():
    """Megatron's --fp8-param-gather keeps FP8 weights; Transformer Engine caches their transpose
    for the backward pass unless --disable-parameter-transpose-cache: 2 B per weight either
    way, 1 B with FP8 weights and no cache. Gradients and optimizer states do not change."""
    assert sharded_bytes(TrainingSetup("fp8"), 1).weights == 2.0
    assert sharded_bytes(TrainingSetup("fp8", fp8_weights=True), 1) == (1.0, 4.0, 12.0)


def test_full_recompute_methods_decide_which_layers_keep_their_activations():
    """Megatron-core's --recompute-method: uniform checkpoints every layer in groups of
    --recompute-num-layers (one input kept per group, a whole group recomputed at once); block
    recomputes only the first that many layers of each stage, the others keep everything."""
    par = ParallelDegrees(tensor=1)
    base = TrainingSetup(activation_recompute="full")
    kept = layer_activation_bytes(LLAMA8, False, par, TrainingSetup())  # no recompute
    inp = layer_activation_bytes(LLAMA8, False, par, base)  # a layer's input
    one = PipelineLayout(1, 1, (0,), (1,))

    def activations(**changes):
        return estimate(LLAMA8, par, replace(base, **changes), one).ranks[0].activations

    every = activations()
    assert every == pytest.approx(32 * inp + (kept - inp))
    # block 5 of 32: 5 inputs, 27 whole layers, one layer recomputed at a time
    assert activations(recompute_method="block", recompute_num_layers=5) == pytest.approx(
        5 * inp + 27 * kept + (kept - inp)
    )
    # a block as deep as the stage is every layer
    assert activations(recompute_method="block", recompute_num_layers=40) == pytest.approx(every)
    # uniform in groups of 4: 8 inputs, 4 layers recomputed together
    assert activations(recompute_num_layers=4) == pytest.approx(8 * inp + (4 * kept - inp))
    # per stage: P = 4 stages of 8, block 2 keeps 6 whole layers on each
    layout = pipeline_layout("1f1b", 4, 1, inflight("1f1b", 4, 8))._replace(microbatches=8)
    staged = estimate(
        LLAMA8, par, replace(base, recompute_method="block", recompute_num_layers=2), layout
    )
    assert staged.ranks[3].activations == pytest.approx(2 * inp + 6 * kept + (kept - inp))
    assert "first 2 layers of each stage" in staged.assumptions[1]


def test_deferred_fsdp_gradient_sync_keeps_the_unsharded_gradients_over_the_step():
    """FSDP2 with set_requires_gradient_sync(False) until a step's last backward pass keeps
    every parameter's unsharded gradient in the reduce dtype (fp32: 4 B) across the step's
    micro-batches; reduced every micro-batch (or with one micro-batch a step) ZeRO-3 shards
    them over the 8 ranks. Weights and optimizer states stay sharded either way, and the
    sharded gradients FSDP reduces into are reserved beside the peak."""
    par = ParallelDegrees(data=8)
    base = TrainingSetup(zero_stage=3, activation_recompute="full")
    layout = pipeline_layout("1f1b", 1, 1, (1,))
    several, single = layout._replace(microbatches=4), layout._replace(microbatches=1)
    every = estimate(LLAMA8, par, base, several).worst
    deferred = replace(base, deferred_grad_sync=True)
    held = estimate(LLAMA8, par, deferred, several).worst
    assert held.gradients == pytest.approx(8 * every.gradients)
    assert (held.weights, held.optimizer) == (every.weights, every.optimizer)
    assert held.total - every.total == pytest.approx(7 * every.gradients + every.gradients)
    # one backward pass a step has nothing to defer
    assert (
        estimate(LLAMA8, par, deferred, single).worst == estimate(LLAMA8, par, base, single).worst
    )


def test_nccl_communicators_are_counted_per_gpu_from_the_layout_and_the_framework():
    """Each process group a GPU communicates in holds an NCCL communicator with its buffers on
    the GPU (NVIDIA/nccl#864). One GPU holds none. BLOOM's first stage under DeepSpeed (TP 4,
    PP 12, DP 8, tied embeddings): the default group, Megatron's tensor-parallel group and
    DeepSpeed's slice group, data, pipeline and model-parallel groups, and on the first and last
    stage the tied-embedding group. DeepSeek-V3 under Megatron-core (PP 16, DP 128, EP 64,
    untied): default, data, expert all-to-all, the experts' own data-parallel group (128 / 64 =
    2 replicas), pipeline and the optimizer's gradient-norm group. FSDP over 8 GPUs in
    torchtitan: the default group and the sharding group."""
    deepspeed = TrainingSetup(tensor_groups=2, model_parallel_group=True)
    megatron = TrainingSetup(model_parallel_group=True)
    assert communicators(ParallelDegrees(), megatron, 1, True) == (0, 0)
    assert communicators(ParallelDegrees(4, 12, 8), deepspeed, 12, True) == (6, 1)
    assert communicators(ParallelDegrees(1, 16, 128, expert=64), megatron, 16, False) == (6, 0)
    assert communicators(ParallelDegrees(1, 1, 8), TrainingSetup(), 1, True) == (2, 0)
    # a rank's central estimate, its bounds and its `other` carry them, the first and last
    # stage's the tied group too; the middle ranks only the six every GPU holds
    layout = pipeline_layout("1f1b", 4, 1, inflight("1f1b", 4, 8))._replace(microbatches=8)
    gpt = Architecture(13e9, 40, 5120, 40, 2048, 32000, tied_embeddings=True)
    par = ParallelDegrees(2, 4, 8)
    none = Uncertainty(communicator_gib=0.0)
    base = estimate(gpt, par, megatron, layout, none).ranks
    counted = estimate(gpt, par, megatron, layout).ranks
    per = 0.43 * GIB
    for rank, (b, c) in enumerate(zip(base, counted, strict=True)):
        groups = 5 + (rank in (0, 3))
        assert c.communicators == pytest.approx(groups * per)
        assert c.other - b.other == pytest.approx(groups * per)
        assert c.total - b.total == pytest.approx(groups * per)
        assert c.low - b.low == pytest.approx(groups * per * 0.3)
        assert c.high - b.high == pytest.approx(groups * per * 3.5)
