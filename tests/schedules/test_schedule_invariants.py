"""Invariants every simulated timeline must satisfy, checked independently of the engine.

The checker below recomputes everything from the orders, the start times and the op times in
`Fraction`s: each (pipe, stage, micro-batch) runs F once, a backward once (B, or I then W),
dependencies hold, a device runs one op at a time, each op starts as early as it could (at 0,
at the end of the device's previous op, or at the end of a dependency), busy time is the sum
of op times, and the bubble fraction lies in [0, 1).
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpguard.schedules import SCHEDULES, OpTimes, SimResult, check, simulate
from dpguard.schedules.ops import FB, B, F, I, W


def parts(op):
    """(kind, (pipe, stage, mb)) of the work an op does; a pair does an F and a full B."""
    if op.kind == FB:
        return [(F, (op.pipe, op.stage, op.mb)), (B, (op.b_pipe, op.b_stage, op.b_mb))]
    return [(op.kind, (op.pipe, op.stage, op.mb))]


def verify(result: SimResult) -> None:
    tl = result.timeline
    layout, times = tl.layout, result.times
    scale = Fraction(1, tl.scale)
    n_stages = layout.stages
    done = Counter()
    end: dict[tuple[str, tuple[int, int, int]], Fraction] = {}
    spans = []
    for r, (order, starts) in enumerate(zip(tl.orders, tl.starts, strict=True)):
        assert len(order) == len(starts)
        for op, start in zip(order, starts, strict=True):
            begin = start * scale
            finish = begin + times.of(op.kind)
            spans.append((r, op, begin, finish))
            for kind, item in parts(op):
                assert layout.rank_of[item[0]][item[1]] == r, (op, r)
                done[kind, item] += 1
                end[("BI" if kind in (B, I) else kind), item] = finish
    mbs = layout.microbatches_per_pipe
    items = [(p, s, m) for p in range(layout.pipes) for s in range(n_stages) for m in range(mbs)]
    for item in items:
        assert done[F, item] == 1, item
        assert done[B, item] + done[I, item] == 1, item
        assert done[W, item] == done[I, item], item
    assert sum(done.values()) == sum(len(parts(op)) for o in tl.orders for op in o)
    assert {op.kind for o in tl.orders for op in o} <= SCHEDULES[result.schedule].op_kinds

    def deps(kind: str, item: tuple[int, int, int]) -> list[tuple[str, tuple[int, int, int]]]:
        p, s, m = item
        if kind == F:
            return [(F, (p, s - 1, m))] if s > 0 else []
        if kind == W:
            return [("BI", item)]
        return [(F, item)] + ([("BI", (p, s + 1, m))] if s < n_stages - 1 else [])

    previous_end: dict[int, Fraction] = {}
    for r, op, begin, finish in spans:
        earliest = [Fraction(0), previous_end.get(r, Fraction(0))]
        for kind, item in parts(op):
            for dep in deps(kind, item):
                assert end[dep] <= begin, (op, dep)
                earliest.append(end[dep])
        assert begin >= previous_end.get(r, Fraction(0)), "a device runs one op at a time"
        assert begin == max(earliest), f"{op} on rank {r} starts late: {begin} > {max(earliest)}"
        previous_end[r] = finish

    makespan = max(f for _, _, _, f in spans)
    assert result.makespan == makespan
    for r, order in enumerate(tl.orders):
        assert result.busy_per_rank[r] == sum((times.of(op.kind) for op in order), Fraction(0))
        assert result.idle_per_rank[r] == makespan - result.busy_per_rank[r]
    assert result.bubble_fraction == sum(result.idle_per_rank) / (result.ranks * makespan)
    assert 0 <= result.bubble_fraction < 1
    assert result.events == len(spans)


def op_times() -> st.SearchStrategy[OpTimes]:
    quarter = st.integers(1, 12).map(lambda n: Fraction(n, 4))

    @st.composite
    def build(draw: st.DrawFn) -> OpTimes:
        f, b = draw(quarter), draw(quarter)
        w = draw(st.integers(0, int(b * 4) - 1).map(lambda n: Fraction(n, 4)))
        fb = max(f, b) + (f + b - max(f, b)) * draw(st.integers(0, 4)) / 4
        return OpTimes(f, b, w, fb)

    return build()


@st.composite
def valid_case(draw: st.DrawFn) -> tuple[str, int, int, int]:
    name = draw(st.sampled_from(sorted(SCHEDULES)))
    ranks = draw(st.integers(1, 6))
    if name == "dualpipe":
        ranks = 2 * draw(st.integers(1, 3))
    v = draw(st.integers(1, 3)) if name == "interleaved-1f1b" else 1
    low = 2 * ranks if name.startswith("dualpipe") else 1
    microbatches = draw(st.integers(low, low + 3 * ranks + 2))
    if name == "dualpipe":
        microbatches += microbatches % 2
    if check(name, ranks, microbatches, v):
        microbatches = ranks * draw(st.integers(1, 3))  # interleaved rounds rule
    assert not check(name, ranks, microbatches, v)
    return name, ranks, microbatches, v


@settings(max_examples=150, deadline=None)
@given(case=valid_case(), times=op_times())
def test_random_valid_inputs_satisfy_every_invariant(case, times):
    name, ranks, microbatches, v = case
    verify(simulate(name, ranks, microbatches, times, v))


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("ranks", [1, 2, 4, 6])
def test_grid_satisfies_every_invariant(name, ranks):
    times = OpTimes(1, 3, 1, "7/2")
    for microbatches in range(1, 3 * ranks + 3):
        v = 2 if name == "interleaved-1f1b" else 1
        if not check(name, ranks, microbatches, v):
            verify(simulate(name, ranks, microbatches, times, v))


def test_results_are_deterministic():
    a = simulate("dualpipe", 8, 32, OpTimes("1", "2.25", "0.75", 3))
    b = simulate("dualpipe", 8, 32, OpTimes(1, Fraction(9, 4), 0.75, 3))
    assert a == b and a.timeline.starts == b.timeline.starts
