"""Per-rank op orders of the single-direction schedules: GPipe, 1F1B, interleaved 1F1B, ZB1P.

Every generator takes ``(ranks, microbatches, virtual_stages)`` and returns the `Layout` and one
ordered tuple of `Op` per rank. They assume valid inputs (see `registry.check`). Micro-batch
indices count up per stage, exactly as the reference implementations keep one counter per stage.
"""

from __future__ import annotations

from collections import deque

from dpguard.schedules.ops import B, F, I, Layout, Op, W

Orders = tuple[tuple[Op, ...], ...]


def _layout(ranks: int, microbatches: int, virtual_stages: int = 1) -> Layout:
    """Stage s runs on rank s mod P ("loop" placement: rank r holds stages r, r+P, r+2P, ...).

    This is the Megatron / torch placement for interleaved 1F1B (arXiv 2104.04473 section
    2.2.2; torch `generate_rank_to_stage_mapping(style="loop")`); with one stage per rank it is
    the plain P-stage pipeline.
    """
    stages = ranks * virtual_stages
    return Layout(
        ranks=ranks,
        stages=stages,
        pipes=1,
        microbatches_per_pipe=microbatches,
        rank_of=(tuple(s % ranks for s in range(stages)),),
        chunk_of=(tuple(s // ranks for s in range(stages)),),
    )


def gpipe(ranks: int, microbatches: int, virtual_stages: int = 1) -> tuple[Layout, Orders]:
    """All forwards, then all backwards in the same micro-batch order.

    Follows torch `ScheduleGPipe` (forward 0..M-1, then full backward 0..M-1). Reversing the
    backward order changes neither the makespan nor the activation peak (M).
    """
    orders = tuple(
        tuple(Op(F, 0, r, m) for m in range(microbatches))
        + tuple(Op(B, 0, r, m) for m in range(microbatches))
        for r in range(ranks)
    )
    return _layout(ranks, microbatches), orders


def one_f_one_b(ranks: int, microbatches: int, virtual_stages: int = 1) -> tuple[Layout, Orders]:
    """Textbook 1F1B (PipeDream-flush; arXiv 2104.04473 section 2.2.1).

    Rank r runs min(P-r-1, M) warm-up forwards, then alternates one forward and one backward,
    then drains the remaining backwards: Megatron's
    ``num_warmup_microbatches = min(P - rank - 1, M)``. Unlike torch `Schedule1F1B` it accepts
    M < P.
    """
    orders = []
    for r in range(ranks):
        warmup = min(ranks - r - 1, microbatches)
        ops = [Op(F, 0, r, m) for m in range(warmup)]
        for k in range(microbatches - warmup):
            ops += (Op(F, 0, r, warmup + k), Op(B, 0, r, k))
        ops += (Op(B, 0, r, m) for m in range(microbatches - warmup, microbatches))
        orders.append(tuple(ops))
    return _layout(ranks, microbatches), tuple(orders)


def zb1p(ranks: int, microbatches: int, virtual_stages: int = 1) -> tuple[Layout, Orders]:
    """ZB1P as the ZB-H1 order (arXiv 2401.10241 section 3.1, Figure 3).

    1F1B with the backward split into I and W; rank r defers its first r weight gradients, so it
    keeps r W pending and runs one W after each later I, oldest first, then flushes the rest.
    This is torch `ScheduleInterleavedZeroBubble` with one stage per rank
    (``num_1f1b_microbatches = rank``) and the sail-sg zb-h1 branch ("W delayed by rank").
    """
    orders = []
    for r in range(ranks):
        warmup = min(ranks - r - 1, microbatches)
        ops = [Op(F, 0, r, m) for m in range(warmup)]
        pending: deque[int] = deque()
        for k in range(microbatches):
            if k + warmup < microbatches:
                ops.append(Op(F, 0, r, k + warmup))
            ops.append(Op(I, 0, r, k))
            pending.append(k)
            if k >= r:
                ops.append(Op(W, 0, r, pending.popleft()))
        ops += (Op(W, 0, r, m) for m in pending)
        orders.append(tuple(ops))
    return _layout(ranks, microbatches), tuple(orders)


def interleaved_rounds(ranks: int, microbatches: int) -> tuple[int, int]:
    """torch's flexible grouping: ``rounds = max(1, M // P)``, ``per_round = M // rounds``.

    torch `ScheduleInterleaved1F1B.__init__` raises unless ``M % rounds == 0``. With
    ``M % P == 0`` this is Megatron's grouping of P micro-batches per chunk.
    """
    rounds = max(1, microbatches // ranks)
    return rounds, microbatches // rounds


def interleaved_1f1b(ranks: int, microbatches: int, virtual_stages: int) -> tuple[Layout, Orders]:
    """Interleaved 1F1B with v model chunks per rank (arXiv 2104.04473 section 2.2.2).

    Port of torch `ScheduleInterleaved1F1B._calculate_single_rank_operations` and
    `_get_1f1b_rank_ops`: rank r warms up with ``(v-1)*per_round + 2*(P-1-r)`` forwards
    (capped at M*v; Megatron's ``(P-r-1)*2 + (v-1)*P`` when per_round = P), then alternates a
    forward and a backward, then drains. Forward op k runs chunk ``(k // per_round) % v``;
    backward op k runs chunk ``v-1 - (k // per_round) % v``. Depth first: a group of
    per_round micro-batches goes through one chunk before the next chunk starts.
    """
    v = virtual_stages
    _, per_round = interleaved_rounds(ranks, microbatches)
    total = microbatches * v
    orders = []
    for r in range(ranks):
        warmup = min((v - 1) * per_round + 2 * (ranks - 1 - r), total)
        next_f = [0] * v
        next_b = [0] * v

        def forward(k: int, r: int = r, next_f: list[int] = next_f) -> Op:
            chunk = (k // per_round) % v
            next_f[chunk] += 1
            return Op(F, 0, chunk * ranks + r, next_f[chunk] - 1)

        def backward(k: int, r: int = r, next_b: list[int] = next_b) -> Op:
            chunk = v - 1 - (k // per_round) % v
            next_b[chunk] += 1
            return Op(B, 0, chunk * ranks + r, next_b[chunk] - 1)

        ops = [forward(k) for k in range(warmup)]
        for k in range(total - warmup):
            ops += (forward(warmup + k), backward(k))
        ops += (backward(k) for k in range(total - warmup, total))
        orders.append(tuple(ops))
    return _layout(ranks, microbatches, v), tuple(orders)
