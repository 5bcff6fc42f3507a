"""Per-rank orders of DualPipe and DualPipeV: the 8-step structure of deepseek-ai/DualPipe.

DualPipe (`dualpipe/dualpipe.py`, `DualPipe.step`) runs P stages on P ranks in two directions:
pipe 0 has stage s on rank s, pipe 1 has stage s on rank P-1-s, and each pipe carries M/2 of
the M micro-batches. DualPipeV (`dualpipe/dualpipev.py`) runs 2N stages on N ranks: stage s < N
on rank s and stage s >= N on rank 2N-1-s (a V), all M micro-batches through all 2N stages.

Both generators replay the reference `step()` loop: each rank sees its two chunks as "phase 0"
and "phase 1", keeps one forward and one backward counter per phase, and defers weight
gradients in a FIFO (`WeightGradStore`, `dualpipe/utils.py`): a zero-bubble backward is an I
that pushes its W, and each W op pops the oldest.
"""

from __future__ import annotations

from collections import deque

from dpguard.schedules.ops import FB, B, F, I, Layout, Op, W
from dpguard.schedules.orders import Orders

# (pipe, stage) of a rank's phase-0 chunk and of its phase-1 chunk
Phases = tuple[tuple[int, int], tuple[int, int]]


def _eight_steps(
    n_half: int, half_rank: int, chunks: int, middle: bool, loc: Phases
) -> tuple[Op, ...]:
    """One rank's order, transcribed from `DualPipe.step` / `DualPipeV.step`.

    DualPipe passes ``n_half = P/2``, ``half_rank = min(r, P-1-r)``, ``chunks = M/2`` and
    ``middle`` for ranks P/2-1 and P/2. DualPipeV passes ``n_half = N``, ``half_rank = r``,
    ``chunks = M`` and ``middle`` for the last rank. Step 4's count ``chunks - 2*n_half +
    half_rank + 1`` is DualPipe's ``half_num_chunks - num_ranks + half_rank + 1`` and
    DualPipeV's ``num_chunks - pp_size * 2 + pp_rank + 1``.
    """
    ops: list[Op] = []
    f_next = [0, 0]
    b_next = [0, 0]
    weights: deque[Op] = deque()
    new = tuple.__new__  # Op(...) without the NamedTuple __new__ call: this loop is hot

    def fwd(phase: int) -> Op:
        f_next[phase] += 1
        return new(Op, (F, *loc[phase], f_next[phase] - 1, -1, -1, -1))

    def bwd(phase: int, zero_bubble: bool = False) -> Op:
        b_next[phase] += 1
        mb = b_next[phase] - 1
        if zero_bubble:
            weights.append(new(Op, (W, *loc[phase], mb, -1, -1, -1)))
            return new(Op, (I, *loc[phase], mb, -1, -1, -1))
        return new(Op, (B, *loc[phase], mb, -1, -1, -1))

    def overlapped(f_phase: int, b_phase: int) -> Op:
        f_next[f_phase] += 1
        b_next[b_phase] += 1
        return new(Op, (FB, *loc[f_phase], f_next[f_phase] - 1, *loc[b_phase], b_next[b_phase] - 1))

    def weight() -> Op:
        return weights.popleft()

    rest = n_half - half_rank - 1
    # Step 1: nF0
    ops += (fwd(0) for _ in range(2 * rest))
    # Step 2: nF0F1
    for _ in range(half_rank + 1):
        ops += (fwd(0), fwd(1))
    # Step 3: nB1W1F1 - a zero-bubble backward whose W runs at once
    for _ in range(rest):
        ops.append(bwd(1, zero_bubble=True))
        ops.append(weight())
        ops.append(fwd(1))
    # Step 4 (main step): nF0B1F1B0 - "We don't overlap these two chunks to further reduce
    # bubble size" for the first pair on the middle ranks (DualPipeV: the last rank)
    main = chunks - 2 * n_half + half_rank + 1  # >= 1 because chunks >= 2 * n_half
    if middle:
        ops += (fwd(0), bwd(1), overlapped(1, 0))
        main -= 1
    (p0, s0), (p1, s1) = loc
    f0, f1, b0, b1 = f_next[0], f_next[1], b_next[0], b_next[1]
    for k in range(main):  # the bulk of every order: written out for speed
        ops.append(new(Op, (FB, p0, s0, f0 + k, p1, s1, b1 + k)))
        ops.append(new(Op, (FB, p1, s1, f1 + k, p0, s0, b0 + k)))
    f_next[0] += main
    f_next[1] += main
    b_next[0] += main
    b_next[1] += main
    # Step 5: nB1F1B0
    for _ in range(rest):
        ops.append(bwd(1))
        ops.append(overlapped(1, 0))
    # Step 6: nB1B0 - the last half_rank + 1 of these backwards are zero-bubble
    step_6 = half_rank + 1
    zero_bubble = False
    for i in range(step_6):
        if i == step_6 // 2 and half_rank % 2 == 1:
            zero_bubble = True
        ops.append(bwd(1, zero_bubble))
        if i == step_6 // 2 and half_rank % 2 == 0:
            zero_bubble = True
        ops.append(bwd(0, zero_bubble))
    # Step 7: nWB0
    for _ in range(rest):
        ops.append(weight())
        ops.append(bwd(0, zero_bubble=True))
    # Step 8: nW
    ops += (weight() for _ in range(half_rank + 1))
    assert not weights, "WeightGradStore must be empty after step 8"
    return tuple(ops)


def dualpipe(ranks: int, microbatches: int, virtual_stages: int = 1) -> tuple[Layout, Orders]:
    """DualPipe on P ranks (P even), M total micro-batches (M even, M >= 2P)."""
    p = ranks
    layout = Layout(
        ranks=p,
        stages=p,
        pipes=2,
        microbatches_per_pipe=microbatches // 2,
        rank_of=(tuple(range(p)), tuple(range(p - 1, -1, -1))),
        chunk_of=((0,) * p, (1,) * p),
    )
    orders = []
    for r in range(p):
        # "For the second half of the ranks: phase 0 means reverse direction": phase 0 is
        # always the direction whose first stage lies in this rank's half.
        forward, reverse = (0, r), (1, p - 1 - r)
        loc = (reverse, forward) if r >= p // 2 else (forward, reverse)
        middle = r in (p // 2 - 1, p // 2)
        half_rank = min(r, p - 1 - r)
        orders.append(_eight_steps(p // 2, half_rank, microbatches // 2, middle, loc))
    return layout, tuple(orders)


def dualpipev(ranks: int, microbatches: int, virtual_stages: int = 1) -> tuple[Layout, Orders]:
    """DualPipeV on N ranks with 2N stages, M micro-batches (M >= 2N)."""
    n = ranks
    rank_of = tuple(s if s < n else 2 * n - 1 - s for s in range(2 * n))
    layout = Layout(
        ranks=n,
        stages=2 * n,
        pipes=1,
        microbatches_per_pipe=microbatches,
        rank_of=(rank_of,),
        chunk_of=(tuple(int(s >= n) for s in range(2 * n)),),
    )
    orders = []
    for r in range(n):
        loc = ((0, r), (0, 2 * n - 1 - r))  # phase 0 down the V, phase 1 back up
        orders.append(_eight_steps(n, r, microbatches, r == n - 1, loc))
    return layout, tuple(orders)
