"""Engine failure modes, input validation and the constraint checker."""

from __future__ import annotations

import re
import time
from fractions import Fraction

import pytest

from dpguard.errors import DeadlockError, ScheduleError
from dpguard.schedules import (
    SCHEDULES,
    ConstraintError,
    OpTimes,
    OrderError,
    check,
    engine,
    orders,
    simulate,
)
from dpguard.schedules.dualpipe import dualpipe
from dpguard.schedules.ops import B, F, I, Op, W


def test_a_crossed_order_raises_deadlock_with_the_rank_by_step_grid():
    layout, good = orders.one_f_one_b(2, 2)
    # Rank 1 (the last stage) asks for B0 before running F0: it waits for itself.
    broken = (good[0], (Op(B, 0, 1, 0), Op(F, 0, 1, 0), Op(F, 0, 1, 1), Op(B, 0, 1, 1)))
    started = time.perf_counter()
    with pytest.raises(DeadlockError) as info:
        engine.run(layout, broken, OpTimes())
    assert time.perf_counter() - started < 1  # reports, never hangs
    lines = str(info.value).splitlines()
    assert "deadlock" in lines[0]
    assert lines[1].split() == ["rank", "step", "|", "-3", "-2", "-1", "stuck", "+1", "+2", "+3"]
    # rank 0 ran F0 and F1 (step 2) and waits for rank 1's backward of micro-batch 0
    assert re.match(
        r" +0 +2 \| +\*F\(p0,s0,m0\) +\*F\(p0,s0,m1\) +\[B\(p0,s0,m0\)\] +B\(p0,s0,m1\) +"
        r"\(waits for B/I\(p0,s1,m0\) on rank 1\)$",
        lines[2],
    )
    # rank 1 (the last stage) is stuck at step 0: B0 before its own F0
    assert re.match(r" +1 +0 \| +\[B\(p0,s1,m0\)\] +F\(p0,s1,m0\)", lines[3])
    assert lines[3].endswith("(waits for F(p0,s1,m0) on rank 1)")
    # the stuck column is aligned
    assert lines[2].index("[") == lines[3].index("[")


def test_a_cycle_across_ranks_in_a_big_schedule_is_reported_not_hung():
    layout, good = dualpipe(8, 32)
    ranks = list(good)
    ops = list(ranks[5])
    # Move rank 5's last forward to the very end: its downstream waits, and so does rank 5.
    i = max(k for k, op in enumerate(ops) if op.kind == F)
    ops.append(ops.pop(i))
    ranks[5] = tuple(ops)
    with pytest.raises(DeadlockError) as info:
        engine.run(layout, tuple(ranks), OpTimes(1, 2, 1, 3))
    rows = str(info.value).splitlines()[2:]
    assert [int(row.split()[0]) for row in rows] == list(range(8))  # a row per rank
    assert all("[" in row and "waits for" in row for row in rows)
    assert len({row.index("[") for row in rows}) == 1


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda o: (o[0] + (Op(F, 0, 0, 0),), o[1]), "runs twice"),
        (lambda o: ((Op(F, 0, 1, 0),) + o[0], o[1]), "does not hold"),
        (lambda o: (o[0] + (Op(F, 0, 0, 9),), o[1]), "does not hold"),
        (lambda o: (o[0][:-1], o[1]), "never run"),
    ],
    ids=["duplicate", "wrong-rank", "bad-microbatch", "missing"],
)
def test_malformed_orders_are_reported_as_generator_bugs(mutate, problem):
    layout, good = orders.one_f_one_b(2, 2)
    with pytest.raises(OrderError, match=problem):
        engine.run(layout, mutate(good), OpTimes())


def test_w_needs_a_split_backward():
    layout, good = orders.zb1p(2, 2)
    no_split = tuple(
        tuple(Op(B, *op[1:4]) if op.kind == I else op for op in order) for order in good
    )
    with pytest.raises(OrderError, match="no pending I"):
        engine.run(layout, no_split, OpTimes())
    no_w = tuple(tuple(op for op in order if op.kind != W) for order in good)
    with pytest.raises(OrderError, match="never run"):
        engine.run(layout, no_w, OpTimes())


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("dualpipe", 8, 20), ()),
        (("dualpipe", 6, 12), ()),
        (("dualpipe", 5, 10), ("even number of ranks",)),
        (("dualpipe", 8, 15), ("even number of micro-batches", "2 x ranks = 16")),
        (("dualpipe", 8, 14), ("2 x ranks = 16",)),
        (("dualpipe", 3, 3), ("even number of ranks", "even number of micro", "2 x ranks = 6")),
        (("dualpipev", 4, 8), ()),
        (("dualpipev", 4, 9), ()),  # odd M is fine (pitfall 2)
        (("dualpipev", 1, 2), ()),  # one device is allowed
        (("dualpipev", 4, 7), ("2 x ranks = 8",)),
        (("interleaved-1f1b", 4, 10, 2), ()),  # torch: rounds = 2, 10 % 2 == 0
        (("interleaved-1f1b", 4, 3, 2), ()),  # rounds = 1
        (("interleaved-1f1b", 4, 9, 2), ("rounds max(1, M // P) = 2",)),
        (("gpipe", 8, 1), ()),
        (("1f1b", 8, 3), ()),
        (("zb1p", 8, 3), ()),
        (("gpipe", 4, 8, 2), ("virtual stages must be 1",)),
        (("1f1b", 0, 8), ("ranks must be an integer >= 1",)),
        (("zb1p", 4, 0), ("micro-batches must be an integer >= 1",)),
        (("interleaved-1f1b", 4, 8, 0), ("virtual stages must be an integer >= 1",)),
        (("pipedream", 4, 8), ("unknown schedule 'pipedream'; valid: gpipe, 1f1b",)),
    ],
)
def test_check_lists_each_violation(args, expected):
    problems = check(*args)
    assert len(problems) == len(expected)
    for problem, fragment in zip(problems, expected, strict=True):
        assert fragment in problem


def test_check_never_raises_on_junk():
    assert check("dualpipe", "8", 16)  # type: ignore[arg-type]
    assert check("dualpipe", 8, 16.0)  # type: ignore[arg-type]
    assert check("dualpipe", True, 16)  # type: ignore[arg-type]
    assert check(["dualpipe"], 8, 16)  # type: ignore[arg-type]


def test_simulate_raises_one_message_per_violation():
    with pytest.raises(ConstraintError) as info:
        simulate("dualpipe", 5, 9)
    assert isinstance(info.value, ScheduleError)
    assert len(info.value.violations) == 3
    assert str(info.value).count("\n") == 2  # one line each


@pytest.mark.parametrize(
    ("times", "fragments"),
    [
        ((0, 2, 1), ["F must be > 0"]),
        ((1, -2, 1), ["B must be > 0"]),
        ((1, 2, -1), ["W must be >= 0"]),
        ((1, 2, 3), ["less than the full backward"]),
        ((1, 2, 2), ["less than the full backward"]),
        ((1, 2, 1, "1.5"), ["[max(F, B), F + B] = [2, 3]"]),
        ((1, 2, 1, 4), ["[max(F, B), F + B] = [2, 3]"]),
        ((0, 0, 1, 5), ["F must be > 0", "B must be > 0"]),
        (("x", 2, 1), ["must be numbers"]),
        ((float("nan"), 2, 1), ["must be numbers"]),
    ],
)
def test_unphysical_op_times_are_rejected(times, fragments):
    with pytest.raises(ConstraintError) as info:
        OpTimes(*times)
    assert len(info.value.violations) == len(fragments)
    for problem, fragment in zip(info.value.violations, fragments, strict=True):
        assert fragment in problem


def test_op_times_are_exact_and_default_to_no_overlap_gain():
    t = OpTimes(0.1, "0.3", Fraction(1, 10))
    assert (t.forward, t.backward, t.weight) == (Fraction(1, 10), Fraction(3, 10), Fraction(1, 10))
    assert t.overlapped == Fraction(2, 5) and t.input == Fraction(1, 5)
    assert OpTimes() == OpTimes(1, 2, 1, 3)
    assert OpTimes(1, 2, 0).input == 2  # W = 0: no B/W split


def test_too_large_runs_are_refused_before_allocating():
    with pytest.raises(ConstraintError, match="too large"):
        simulate("gpipe", 4096, 4096)


def test_registry_specs_are_complete():
    for name, spec in SCHEDULES.items():
        assert spec.name == name
        assert spec.generate and spec.closed_form and spec.constraints
        assert spec.closed_form(4, 8, 1, OpTimes()).source
