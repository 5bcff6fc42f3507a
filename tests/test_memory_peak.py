"""memory.peak, the planner's cheap reading of an estimate, against the estimate itself: the
same worst-rank bytes and the same largest states, to the last bit, whatever the schedule, the
runtime, the recompute policy or the split (it evaluates one rank per group of ranks alike)."""

from __future__ import annotations

import itertools

import pytest

from dpguard.memory import (
    MLA,
    Architecture,
    ParallelDegrees,
    TrainingSetup,
    estimate,
    peak,
    pipeline_layout,
)
from dpguard.schedules import SCHEDULES, check
from dpguard.schedules.inflight import inflight

GPT = Architecture(22e9, 48, 6144, 64, 2048, 51_200)  # GeLU: dropout on the embedding
LLAMA = Architecture(
    8.03e9, 32, 4096, 32, 8192, 128_256, ffn_hidden_size=14336, swiglu=True, kv_heads=8
)
MOE = Architecture(
    671e9, 61, 7168, 128, 4096, 129_280, active_params=37e9, ffn_hidden_size=18432, swiglu=True,
    mla=MLA(1536, 512, 128, 64, 128), experts=256, experts_per_token=8, moe_ffn_hidden_size=2048,
    shared_experts=1, dense_layers=3, mtp_layers=1,
)  # fmt: skip

SETUPS = (
    TrainingSetup(),
    TrainingSetup(pipeline_impl="torch", loss="unfused", micro_batch_size=2),
    TrainingSetup(pipeline_impl="deepspeed", bf16_grads_kept=True, zero_stage=1),
    TrainingSetup(precision="fp16"),  # the step phase: every rank evaluated
    TrainingSetup(activation_offload=True, activation_recompute="full"),
    TrainingSetup(activation_recompute="full", recompute_method="block", recompute_num_layers=2),
    TrainingSetup(zero_stage=3, pipeline_impl="torch", deferred_grad_sync=True),
)


def _cases() -> list[tuple[Architecture, str, int, int, int]]:
    cases = []
    for arch, schedule, (ranks, micro), v in itertools.product(
        (GPT, LLAMA, MOE),
        ("1f1b", "gpipe", "interleaved-1f1b", "zb1p", "dualpipe", "dualpipev"),
        ((2, 8), (4, 2), (4, 16), (8, 8), (8, 24)),
        (1, 2),
    ):
        virtual = SCHEDULES[schedule].virtual(v)
        if virtual != v or check(schedule, ranks, micro, virtual):
            continue
        cases.append((arch, schedule, ranks, micro, virtual))
    return cases


@pytest.mark.parametrize("setup", SETUPS)
def test_peak_is_the_estimates_worst_rank_and_largest_states(setup: TrainingSetup) -> None:
    checked = 0
    for arch, schedule, ranks, micro, virtual in _cases():
        layout = pipeline_layout(
            schedule, ranks, virtual, inflight(schedule, ranks, micro, virtual)
        )._replace(microbatches=micro, lead=1, tail=1)
        degrees = ParallelDegrees(tensor=2, pipeline=ranks, data=4, expert=4 if arch.moe else 1)
        whole = estimate.__wrapped__(arch, degrees, setup, layout)
        found = peak.__wrapped__(arch, degrees, setup, layout)
        assert found.total == whole.worst.total, (arch.layers, schedule, ranks, micro)
        assert found.states == max(r.states for r in whole.ranks)
        checked += 1
    assert checked > 50
