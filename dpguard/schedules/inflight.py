"""Closed forms for the peak in-flight activations of every pipeline rank, without simulating.

Same unit and definition as `SimResult.peak_activations_per_rank`: the most (stage,
micro-batch) activations a rank holds at once, from its F until its B or I, in schedule
chunks (multiply by `ScheduleSpec.chunk_size` for 1F1B-stage units). A rank's count moves
only with its own ops (F +1, B or I -1, an overlapped F&B +1 then -1), and a rank runs its ops
in its fixed order, so the peak is a property of the order alone: it does not depend on op
times. Each form below is read off that order; tests/schedules/test_inflight.py checks them
against the simulator.
"""

from __future__ import annotations

from dpguard.schedules.orders import interleaved_rounds
from dpguard.schedules.registry import check


def inflight(
    schedule: str, ranks: int, microbatches: int, virtual_stages: int = 1
) -> tuple[int, ...]:
    """Peak in-flight activations of each rank (schedule chunks), in O(P) time.

    Raises ValueError, one violated constraint per line, for anything `check` rejects.
    """
    problems = check(schedule, ranks, microbatches, virtual_stages)
    if problems:
        raise ValueError("\n".join(problems))
    p, m, v = ranks, microbatches, virtual_stages
    if schedule == "gpipe":
        # All M forwards before any backward (orders.gpipe): M everywhere (arXiv 2104.04473
        # s2.2.1).
        return (m,) * p
    if schedule in ("1f1b", "zb1p"):
        # min(P-r-1, M) warm-up forwards, then F before each B or I (orders.one_f_one_b,
        # orders.zb1p; W frees nothing): min(M, P-r). Megatron schedules.py
        # get_pp_rank_microbatches, warmup = P-r-1; arXiv 2205.05198 eq. 5.
        return tuple(min(m, p - r) for r in range(p))
    if schedule == "interleaved-1f1b":
        # Warm-up (v-1)*g + 2(P-1-r) forwards capped at M*v, then F before each B
        # (orders.interleaved_1f1b, torch's grouping g = M // max(1, M // P)): one more than
        # the warm-up, at most M*v. With g = P (M % P == 0) rank 0 holds vP + P - 1
        # (Megatron schedules.py L964-965; arXiv 2205.05198 s4.2.3).
        _, g = interleaved_rounds(p, m)
        return tuple(min((v - 1) * g + 2 * (p - 1 - r) + 1, m * v) for r in range(p))
    # DualPipe (n = P/2 per half) and DualPipeV (n = N), derived from dualpipe._eight_steps:
    # steps 1-2 run 2(n-h-1) + 2(h+1) = 2n forwards, step 3 keeps 2n (I then F), and step 4
    # (at least one iteration, as M/2 >= P resp. M >= 2N) starts with an F or an F&B that
    # allocates before it frees: 2n + 1 on every rank, and never more (from step 4 on each
    # F is paired with a backward or follows one). DualPipe: PP + 1 (arXiv 2412.19437
    # Table 2); DualPipeV: 2N + 1 = PP + 1 half-size chunks (DualPipe README).
    if schedule == "dualpipe":
        return (p + 1,) * p
    return (2 * p + 1,) * p  # dualpipev


def zb1p_peak(ranks: int, rank: int, microbatches: int, held: float, pending: float) -> float:
    """Peak memory of `rank` in the ZB-H1 order (orders.zb1p) when a micro-batch's stage
    activations cost `held` from its F until its I, and what its deferred W needs (each GEMM's
    input and output gradient; arXiv 2401.10241 Table 1: 32sbh per GPT layer against
    34sbh + 5as^2b) costs `pending` from its I until its W. Rank r warms up with
    w = min(P-r-1, M) forwards and then defers r weight passes, so its steady state holds
    w + 1 forwards and r deferred W before each I, w and r + 1 after it: r deferred W beside
    1F1B's count. Before iteration k's I it holds w + min(k+1, M-w) - k forwards and min(k, r)
    deferred W: piecewise linear in k, breaking at k = M-w-1 and k = r, so the peak is at one
    of those, k = 0 or k = M-1 (tests check it against walking the order)."""
    p, r, m = ranks, rank, microbatches
    warm = min(p - r - 1, m)
    if r < m - warm:  # the steady state is reached (M >= P): its k = r is the peak
        return (warm + 1) * held + r * pending + max(0.0, pending - held)
    best = 0.0
    for k in {0, m - warm - 1, r, m - 1}:
        if 0 <= k < m:
            forwards = warm + min(k + 1, m - warm) - k
            deferred = min(k, r)
            best = max(
                best,
                forwards * held + deferred * pending,
                (forwards - 1) * held + (deferred + 1) * pending,
            )
    return best


def worst(schedule: str, ranks: int, microbatches: int, virtual_stages: int = 1) -> int:
    """The largest per-rank peak: rank 0 for GPipe, 1F1B, ZB1P and interleaved 1F1B."""
    return max(inflight(schedule, ranks, microbatches, virtual_stages))
