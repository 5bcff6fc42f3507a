"""`inflight` closed forms against the exact simulator, and its input validation."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpguard.schedules import SCHEDULES, OpTimes, check, simulate
from dpguard.schedules.inflight import inflight, worst, zb1p_peak
from dpguard.schedules.ops import F, I, W
from dpguard.schedules.orders import zb1p

TIMES = OpTimes(1, 2, 1, 3)
# Other op times, to show that the peaks depend on the orders only: F&B at the sum and a
# cheap W; F > B with no W (I = B) and F&B at its fastest.
OTHER_TIMES = (OpTimes(1, 1, Fraction(1, 2), 2), OpTimes(3, 1, 0, 3))
MAX_RANKS = 16


def virtuals(schedule: str) -> range:
    return range(1, 5) if SCHEDULES[schedule].uses_virtual_stages else range(1, 2)


def accepted(schedule: str, ranks: int, microbatches: list[int]) -> list[tuple[int, int]]:
    """(M, v) pairs among `microbatches` x the schedule's v values that `check` accepts."""
    return [
        (m, v) for m in microbatches for v in virtuals(schedule) if not check(schedule, ranks, m, v)
    ]


@pytest.mark.parametrize("ranks", range(1, MAX_RANKS + 1))
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_matches_the_simulator_for_every_accepted_m(schedule: str, ranks: int) -> None:
    # M from 1 (the smallest accepted value is the first `check` lets through: 1, or 2P for
    # DualPipe(V)) to 4P+3: odd and even, M < P, M = P and M a multiple of P or not.
    cases = accepted(schedule, ranks, list(range(1, 4 * ranks + 4)))
    assert cases or schedule == "dualpipe"  # odd P: DualPipe accepts nothing
    for m, v in cases:
        got = simulate(schedule, ranks, m, TIMES, v).peak_activations_per_rank
        assert inflight(schedule, ranks, m, v) == got, (m, v)


@pytest.mark.parametrize("times", OTHER_TIMES, ids=["F1-B1-W0.5-FB2", "F3-B1-W0-FB3"])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_peaks_do_not_depend_on_op_times(schedule: str, times: OpTimes) -> None:
    for p in range(1, MAX_RANKS + 1):
        sample = sorted({1, p - 1, p, p + 1, 2 * p, 2 * p + 1, 3 * p + 2, 4 * p} - {0})
        for m, v in accepted(schedule, p, sample):
            got = simulate(schedule, p, m, times, v).peak_activations_per_rank
            assert inflight(schedule, p, m, v) == got, (p, m, v)


def test_published_forms_where_they_apply() -> None:
    for p in range(1, 9):
        for m in (p, 2 * p, 3 * p):
            # 1F1B / ZB1P: rank r holds min(M, P-r) (Megatron warmup P-r-1; DeepSeek-V3 Table 2)
            for name in ("1f1b", "zb1p"):
                assert inflight(name, p, m) == tuple(min(m, p - r) for r in range(p))
            assert inflight("gpipe", p, m) == (m,) * p
            # interleaved with M % P == 0 (group P): rank 0 holds vP + P - 1 chunk-micro-batches
            # once M*v allows it (M >= 2P); at M = P its warm-up is capped at all M*v = vP
            for v in range(1, 5):
                held = inflight("interleaved-1f1b", p, m, v)[0]
                assert held == (v * p + p - 1 if m >= 2 * p else min(v * p + p - 1, m * v))
            # DualPipeV: PP + 1 chunks with PP = 2N stages, on every rank
            assert inflight("dualpipev", p, 2 * m) == (2 * p + 1,) * p
        if p % 2 == 0:
            # DualPipe: PP + 1 on every rank (arXiv 2412.19437 Table 2)
            assert inflight("dualpipe", p, 2 * p) == (p + 1,) * p


def test_interleaved_group_larger_than_p_raises_rank_0_above_vp_plus_p_minus_1() -> None:
    # torch's grouping for M % P != 0: g = M // max(1, M // P) = 6 > P = 4, so rank 0 warms up
    # (v-1)*6 + 2*3 = 12 = M*v forwards and holds all of them, not vP + P - 1 = 11.
    assert simulate("interleaved-1f1b", 4, 6, TIMES, 2).peak_activations_per_rank[0] == 12
    assert inflight("interleaved-1f1b", 4, 6, 2) == (12, 11, 9, 7)
    # M < P: group = M, and every rank but the last holds all M*v chunk-micro-batches
    assert inflight("interleaved-1f1b", 8, 3, 3) == (9, 9, 9, 9, 9, 9, 9, 7)
    assert simulate("interleaved-1f1b", 8, 3, TIMES, 3).peak_activations_per_rank[-1] == 7


def test_worst_is_the_largest_rank() -> None:
    for name in SCHEDULES:
        for p in (2, 4, 6):
            for m, v in accepted(name, p, [2 * p, 4 * p + 2]):
                assert worst(name, p, m, v) == max(inflight(name, p, m, v))
                result = simulate(name, p, m, TIMES, v)
                assert worst(name, p, m, v) * result.chunk_size == result.activation_memory


def test_large_pipeline_is_answered_from_the_formula() -> None:
    p, m = 64, 100_000  # 6.4 million stage-micro-batch pairs: far beyond the simulator's limit
    assert inflight("gpipe", p, m) == (m,) * p
    assert inflight("1f1b", p, m) == tuple(range(p, 0, -1))
    assert inflight("zb1p", p, m) == tuple(range(p, 0, -1))
    assert inflight("dualpipe", p, m) == (p + 1,) * p
    assert inflight("dualpipev", p, m) == (2 * p + 1,) * p
    # 100000 // 64 = 1562 rounds do not divide 100000, so interleaved needs M = 1600 P
    with pytest.raises(ValueError, match="divisible by the number of rounds"):
        inflight("interleaved-1f1b", p, m, 4)
    got = inflight("interleaved-1f1b", p, 1600 * p, 4)
    assert got == tuple(3 * p + 2 * (p - 1 - r) + 1 for r in range(p))
    assert got[0] == worst("interleaved-1f1b", p, 1600 * p, 4) == 4 * p + p - 1


BAD_INPUTS = [
    ("pipedream", 4, 8, 1),
    ("1f1b", 0, 8, 1),
    ("1f1b", 4, 0, 1),
    ("1f1b", 4, 8, 0),
    ("1f1b", True, 8, 1),
    ("1f1b", 4, 8.0, 1),
    ("gpipe", 4, 8, 2),
    ("zb1p", 4, 8, 3),
    ("interleaved-1f1b", 4, 9, 2),
    ("dualpipe", 3, 8, 1),
    ("dualpipe", 4, 9, 1),
    ("dualpipe", 4, 6, 1),
    ("dualpipev", 3, 5, 1),
]


@pytest.mark.parametrize(("schedule", "ranks", "microbatches", "virtual"), BAD_INPUTS)
def test_rejects_with_the_constraint_messages(
    schedule: str, ranks: int, microbatches: int, virtual: int
) -> None:
    problems = check(schedule, ranks, microbatches, virtual)
    assert problems
    with pytest.raises(ValueError) as info:
        inflight(schedule, ranks, microbatches, virtual)
    assert str(info.value) == "\n".join(problems)
    with pytest.raises(ValueError):
        worst(schedule, ranks, microbatches, virtual)


def test_rejects_exactly_what_check_rejects() -> None:
    for name in SCHEDULES:
        for p in range(0, 9):
            for m in range(0, 4 * p + 4):
                for v in range(0, 5):
                    if check(name, p, m, v):
                        with pytest.raises(ValueError):
                            inflight(name, p, m, v)
                    else:
                        assert len(inflight(name, p, m, v)) == p


def _walk_peak(order, held: float, pending: float) -> float:
    """Memory of one rank walking its order: F holds, I turns a hold into a deferred W, W and
    B free (the definition `zb1p_peak` computes in closed form)."""
    forwards = deferred = 0
    best = 0.0
    for op in order:
        if op.kind == F:
            forwards += 1
        elif op.kind == I:
            forwards, deferred = forwards - 1, deferred + 1
        elif op.kind == W:
            deferred -= 1
        else:
            forwards -= 1
        best = max(best, forwards * held + deferred * pending)
    return best


@pytest.mark.parametrize("ranks", range(1, 13))
def test_zb1p_peak_with_deferred_weight_passes_matches_walking_the_order(ranks: int) -> None:
    """ZB-H1 defers rank r's first r weight passes: what they keep (each GEMM's input and
    output gradient) adds to 1F1B's in-flight count. A W costing less than a held activation
    (no recompute), about as much (FlashAttention: 32sbh against 34sbh) and far more (full
    recompute keeps only the layer input) all peak where the closed form says."""
    for m in range(1, 3 * ranks + 3):
        _, orders = zb1p(ranks, m)
        for held, pending in ((1.0, 0.37), (1.0, 0.94), (1.0, 1.0), (1.0, 16.0), (0.0, 1.0)):
            for r, order in enumerate(orders):
                got = zb1p_peak(ranks, r, m, held, pending)
                assert got == pytest.approx(_walk_peak(order, held, pending)), (m, r)
    # without deferred weight passes' cost, the peak is 1F1B's in-flight count
    assert [zb1p_peak(ranks, r, 4 * ranks, 1.0, 0.0) for r in range(ranks)] == list(
        inflight("zb1p", ranks, 4 * ranks)
    )
