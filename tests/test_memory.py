"""Tests for dpguard.memory against hand-worked examples (arithmetic shown in each docstring)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dpguard.memory import (
    GIB,
    MemoryBreakdown,
    ModelShape,
    ParallelDegrees,
    ScheduleMemory,
    StateBytes,
    TrainingSetup,
    activation_bytes,
    activation_bytes_per_layer,
    embedding_params,
    expert_params,
    fits,
    layers_on_rank,
    memory_per_gpu,
    model_fits_one_gpu,
    single_gpu_breakdown,
    state_bytes,
    zero_sharded,
)

# DeepSeek-V3-like: 671B total, 37B active, 256 routed experts top-8, 61 layers, h 7168,
# 128 heads, 4K sequence, vocab 129,280 (arXiv 2412.19437 Table/§4.2 shapes).
DSV3 = ModelShape(
    total_params=671e9,
    layers=61,
    hidden_size=7168,
    attention_heads=128,
    seq_len=4096,
    vocab_size=129_280,
    active_params=37e9,
    experts=256,
    experts_per_token=8,
)
# GPT-3 175B as in Korthikanti (arXiv 2205.05198 Table 3): s 2048, h 12288, a 96, L 96, v 51200.
GPT3 = ModelShape(175e9, 96, 12288, 96, 2048, 51_200)
# A 7B dense model (Llama-2-7B shape: L 32, h 4096, a 32, v 32000), 4K sequence.
DENSE7B = ModelShape(7e9, 32, 4096, 32, 4096, 32_000)


def test_megatron_bytes_per_param_table() -> None:
    """Megatron dist_optimizer.md: bf16/fp32 18 -> 6 + 12/d; fp16/fp16 20 -> 4 + 16/d.
    d = 8: bf16 6 + 12/8 = 7.5; fp16 4 + 16/8 = 6."""
    assert state_bytes("bf16").total == 18
    assert state_bytes("fp8") == state_bytes("bf16")
    assert state_bytes("fp16").total == 20
    assert zero_sharded(state_bytes("bf16"), 1, 8).total == pytest.approx(7.5)
    assert zero_sharded(state_bytes("fp16"), 1, 8).total == pytest.approx(6.0)
    # DeepSeek-V3 BF16 moments: 2 + 4 + (4 + 2 + 2) = 14
    assert state_bytes("bf16", moment_bytes=2).total == 14


@pytest.mark.parametrize(
    ("stage", "expected_gb"),
    [
        (0, 120.0),  # 16 x 7.5 = 120
        (1, 31.40625),  # (2 + 2) x 7.5 + 12 x 7.5 / 64 = 30 + 1.40625
        (2, 16.640625),  # 2 x 7.5 + 14 x 7.5 / 64 = 15 + 1.640625
        (3, 1.875),  # 16 x 7.5 / 64
    ],
)
def test_zero_paper_table(stage: int, expected_gb: float) -> None:
    """ZeRO Fig. 1 (arXiv 1910.02054): K = 12, Psi = 7.5B, N_d = 64 -> 120/31.4/16.6/1.9 GB."""
    zero_paper = StateBytes(weights=2, gradients=2, optimizer=12)
    assert zero_sharded(zero_paper, stage, 64).total * 7.5e9 == pytest.approx(expected_gb * 1e9)


def test_deepseek_parameter_split() -> None:
    """per_expert = (671 - 37)e9 / (256 - 8) = 634e9 / 248 = 2.5564516e9;
    expert_total = 256 x 2.5564516e9 = 654.4516e9; dense = 671 - 654.4516 = 16.5484e9.
    (Check against the real shape: 3 x 7168 x 2048 x 58 MoE layers = 2.554e9 per expert.)"""
    assert expert_params(DSV3) == pytest.approx(654.4516e9, rel=1e-6)
    assert DSV3.total_params - expert_params(DSV3) == pytest.approx(16.5484e9, rel=1e-5)
    assert expert_params(GPT3) == 0
    assert embedding_params(DSV3) == 2 * 926_679_040  # 129,280 x 7,168 = 926,679,040


def test_korthikanti_per_layer_gpt3() -> None:
    """s = 2048, b = 1, h = 12288, a = 96, t = 8: sbh = 25,165,824.
    Paper form (no flash): 34/8 + 5 x 96 x 2048 / (12288 x 8) = 4.25 + 10 = 14.25
      -> 14.25 x 25,165,824 = 358,612,992 B.
    Selective (and the FlashAttention default): 4.25 x 25,165,824 = 106,954,752 B,
      i.e. 1 - 4.25/14.25 = 70 % saved, the paper's GPT-3 figure (§5).
    Full: 2 x 25,165,824 = 50,331,648 B. CP = 2 halves s: selective 53,477,376 B."""
    tp8 = ParallelDegrees(tensor=8, pipeline=8)
    paper = TrainingSetup(activation_recompute="none", flash_attention=False)
    assert activation_bytes_per_layer(GPT3, tp8, paper) == 358_612_992
    for mode in ("none", "selective"):
        flash = TrainingSetup(activation_recompute=mode)
        assert activation_bytes_per_layer(GPT3, tp8, flash) == 106_954_752
    full = TrainingSetup(activation_recompute="full")
    assert activation_bytes_per_layer(GPT3, tp8, full) == 50_331_648
    cp2 = replace(tp8, context=2)
    assert activation_bytes_per_layer(GPT3, cp2, TrainingSetup("bf16", 1, "selective")) == (
        53_477_376
    )
    mbs2 = TrainingSetup(activation_recompute="selective", micro_batch_size=2)
    assert activation_bytes_per_layer(GPT3, tp8, mbs2) == 2 * 106_954_752


def test_gpt3_1f1b_stage0_holds_all_layers() -> None:
    """TP 8, PP 8, DP 8, ZeRO-1, selective, 1F1B: stage 0 stashes p = 8 units of 96/8 = 12
    layers = 96 layers: 96 x 106,954,752 = 10,267,656,192 B (Korthikanti eq. 5: L layers,
    independent of p). The LM-head rank holds 12 x 106,954,752 + 4 x 2048 x 51200 / 8
    = 1,283,457,024 + 52,428,800, which is smaller.
    Params: embeddings 2 x 51200 x 12288 = 1,258,291,200; dense layers 175e9 - that
    = 173,741,708,800; stage 0: /8 = 21,717,713,600 + 629,145,600 = 22,346,859,200; /TP 8
    = 2,793,357,400. Bytes: weights 2x = 5,586,714,800; grads 4x = 11,173,429,600;
    optimizer 12/8 x = 4,190,036,100."""
    parallel = ParallelDegrees(tensor=8, pipeline=8, data=8)
    training = TrainingSetup(activation_recompute="selective")
    b = memory_per_gpu(GPT3, parallel, training, ScheduleMemory(in_flight_units=8))
    assert b.parameters == pytest.approx(2_793_357_400)
    assert b.weights == pytest.approx(5_586_714_800)
    assert b.gradients == pytest.approx(11_173_429_600)
    assert b.optimizer == pytest.approx(4_190_036_100)
    assert b.activations == 10_267_656_192
    assert b.replication_extra == 0
    assert b.total == pytest.approx(5_586_714_800 + 11_173_429_600 + 4_190_036_100 + 10_267_656_192)
    # p = 4 (24 layers per unit, 4 units) stashes the same 96 layers on stage 0.
    p4 = replace(parallel, pipeline=4)
    assert activation_bytes(GPT3, p4, training, ScheduleMemory(4)) == 10_267_656_192


def test_lm_head_rank_can_be_the_worst() -> None:
    """Small model, 256k vocabulary, PP 2, 1F1B, flash, no recompute: L 16, h 2048, s 4096.
    Per layer 4096 x 2048 x 34 = 285,212,672 B. Rank 0: 2 units x 8 layers = 4,563,402,752.
    Last rank: 8 layers = 2,281,701,376 + fp32 logits 4 x 4096 x 256,000 = 4,194,304,000
    -> 6,476,005,376, which is the peak."""
    model = ModelShape(2e9, 16, 2048, 16, 4096, 256_000)
    acts = activation_bytes(model, ParallelDegrees(pipeline=2), TrainingSetup(), ScheduleMemory(2))
    assert acts == 6_476_005_376


def test_deepseek_v3_like_dualpipe() -> None:
    """EP 64, PP 16, DP 128 (2048 GPUs), TP 1, ZeRO-1, BF16 moments (14 B/param), selective,
    DualPipe: 2 parameter copies and PP + 1 = 17 units in flight.
    Layers on the worst rank: ceil(61/16) = 4, share 4/61.
    Dense: (16,548,387,097 - 1,853,358,080) x 4/61 = 963,608,460 + one vocab matrix
      926,679,040 = 1,890,287,500 params.
    Expert: 654,451,612,903 x 4/61 / 64 = 670,544,685 params; expert-DP = 128 / 64 = 2.
    weights 2 x 2,560,832,185 = 5,121,664,371; grads 4 x = 10,243,328,742;
    optimizer 8/128 x 1,890,287,500 + 8/2 x 670,544,685 = 118,142,969 + 2,682,178,742
      = 2,800,321,711; second copy = 18,165,314,823.
    Activations: sbh x 34 = 4096 x 7168 x 34 = 998,244,352 per layer; 17 x 4 layers
      = 67,880,615,936 + fp32 logits 4 x 4096 x 129,280 = 2,118,123,520 -> 69,998,739,456.
    Total 2 x 18,165,314,823 + 69,998,739,456 = 106,329,369,102 > 80 GiB: does not fit H800."""
    parallel = ParallelDegrees(tensor=1, pipeline=16, data=128, expert=64)
    training = TrainingSetup(activation_recompute="selective", optimizer_moment_bytes=2)
    dualpipe = ScheduleMemory(in_flight_units=17, param_copies=2)
    b = memory_per_gpu(DSV3, parallel, training, dualpipe)
    assert layers_on_rank(DSV3, parallel) == 4
    assert b.parameters == pytest.approx(2_560_832_185)
    assert b.weights == pytest.approx(5_121_664_371)
    assert b.gradients == pytest.approx(10_243_328_742)
    assert b.optimizer == pytest.approx(2_800_321_711)
    assert b.replication_extra == pytest.approx(18_165_314_823)
    assert b.activations == pytest.approx(69_998_739_456)
    assert b.total == pytest.approx(106_329_369_102)
    assert not fits(b, 80, 0.1)
    # Full recompute: 2sbh = 58,720,256 x 68 = 3,992,977,408 + logits 2,118,123,520
    # + one layer's 998,244,352 while recomputed = 7,109,345,280; total 43,439,974,926
    # <= 0.9 x 80 GiB = 77,309,411,328.
    full = memory_per_gpu(DSV3, parallel, replace(training, activation_recompute="full"), dualpipe)
    assert full.activations == pytest.approx(7_109_345_280)
    assert full.total == pytest.approx(43_439_974_926)
    assert fits(full, 80, 0.1)


def test_dualpipev_holds_the_same_layers_as_1f1b() -> None:
    """schedules.md §5: DualPipeV on N devices holds 2 chunks of 1/(2N) = 1F1B on N devices.
    32 layers, N = 4: 1F1B 8 layers per rank; DualPipeV 2 x ceil(32/8) = 8. The V puts both
    the embedding and the LM head on rank 0 (untied: one more 4096 x 32000 matrix)."""
    one_f = memory_per_gpu(DENSE7B, ParallelDegrees(pipeline=4), TrainingSetup(), ScheduleMemory(4))
    v = ParallelDegrees(pipeline=4, virtual_stages=2)
    dpv = memory_per_gpu(DENSE7B, v, TrainingSetup(), ScheduleMemory(9, v_shape=True))
    assert layers_on_rank(DENSE7B, v) == layers_on_rank(DENSE7B, ParallelDegrees(pipeline=4)) == 8
    assert dpv.parameters - one_f.parameters == pytest.approx(4096 * 32_000)
    tied = replace(DENSE7B, tied_embeddings=True)
    one_f_t = memory_per_gpu(tied, ParallelDegrees(pipeline=4), TrainingSetup(), ScheduleMemory(4))
    dpv_t = memory_per_gpu(tied, v, TrainingSetup(), ScheduleMemory(9, v_shape=True))
    assert dpv_t.weights == pytest.approx(one_f_t.weights)
    assert dpv_t.replication_extra == 0
    # DualPipe on 4 ranks: a chunk of each of two copies -> model states exactly 2x.
    dp = memory_per_gpu(tied, ParallelDegrees(pipeline=4), TrainingSetup(), ScheduleMemory(5, 8, 2))
    states = one_f_t.weights + one_f_t.gradients + one_f_t.optimizer
    assert dp.replication_extra == pytest.approx(states)


def test_single_gpu_fit_7b() -> None:
    """7B dense, bf16, pure DP over 8 GPUs, mbs 1, 4K, flash, no recompute.
    ZeRO-1: 7e9 x (6 + 12/8) = 52.5e9 B. Activations: 4096 x 4096 x 34 = 570,425,344 per
    layer x 32 = 18,253,611,008 + fp32 logits 4 x 4096 x 32000 = 524,288,000
    -> 18,777,899,008. Total 71,277,899,008 <= 0.9 x 80 GiB = 77,309,411,328 (fits), but
    > 0.8 x 80 GiB = 68,719,476,736. ZeRO-0: 7e9 x 18 = 126e9 alone exceeds 80 GiB."""
    training = TrainingSetup(zero_stage=1)
    b = single_gpu_breakdown(DENSE7B, training, data_parallel=8)
    assert b.parameters == pytest.approx(7e9)
    assert b.weights + b.gradients + b.optimizer == pytest.approx(52.5e9)
    assert b.activations == 18_777_899_008
    assert b.total == pytest.approx(71_277_899_008)
    assert model_fits_one_gpu(DENSE7B, training, 80, 0.1, data_parallel=8)
    assert not model_fits_one_gpu(DENSE7B, training, 80, 0.2, data_parallel=8)
    assert not model_fits_one_gpu(DENSE7B, TrainingSetup(zero_stage=0), 80, 0.0, data_parallel=8)
    # ZeRO-3 over 8: 18/8 x 7e9 = 15.75e9 + activations -> fits 40 GB A100 at 10 % headroom
    # (34,527,899,008 <= 38,654,705,664).
    assert model_fits_one_gpu(DENSE7B, TrainingSetup(zero_stage=3), 40, 0.1, data_parallel=8)


def test_fits_uses_gib_and_headroom() -> None:
    b = MemoryBreakdown(10 * GIB, 0, 0, 0, 0, 1.0, ())
    assert b.total == 10 * GIB
    assert fits(b, 10, 0.0)
    assert not fits(b, 10, 0.01)
    with pytest.raises(ValueError):
        fits(b, 10, 1.0)


def test_expert_group_must_divide() -> None:
    """EP 8 x ETP 1 cannot borrow ranks from TP x CP x DP = 4 (torchtitan mesh rule)."""
    parallel = ParallelDegrees(data=4, expert=8, expert_tensor=1)
    with pytest.raises(ValueError, match="must divide"):
        memory_per_gpu(DSV3, parallel, TrainingSetup(), ScheduleMemory(1))


@pytest.mark.parametrize(
    "make",
    [
        lambda: ModelShape(0, 1, 1, 1, 1, 1),
        lambda: ModelShape(1e9, 1, 1, 1, 1, 1, active_params=2e9, experts=8, experts_per_token=2),
        lambda: ModelShape(1e9, 1, 1, 1, 1, 1, active_params=1e8, experts=8, experts_per_token=8),
        lambda: ParallelDegrees(tensor=0),
        lambda: TrainingSetup(zero_stage=4),
        lambda: TrainingSetup(optimizer_moment_bytes=1),
        lambda: ScheduleMemory(1, param_copies=0),
    ],
)
def test_invalid_inputs_raise(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_embeddings_larger_than_model_rejected() -> None:
    tiny = ModelShape(1e6, 2, 4096, 32, 128, 32_000)  # 2 x 4096 x 32000 = 262M > 1M
    with pytest.raises(ValueError, match="embeddings"):
        memory_per_gpu(tiny, ParallelDegrees(), TrainingSetup(), ScheduleMemory(1))


def test_assumptions_name_the_formulas() -> None:
    b = single_gpu_breakdown(DSV3, TrainingSetup(optimizer_moment_bytes=2), data_parallel=64)
    text = " ".join(b.assumptions)
    assert "14 B/param" in text and "ZeRO-1" in text and "Korthikanti" in text
