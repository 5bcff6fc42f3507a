"""The tables of /work/shared/docs/schedules.md, row by row (sections 3 to 6)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest

from dpguard.schedules import OpTimes, simulate
from dpguard.schedules.ops import FB, B, F, I, W

CASE_II = OpTimes(1, 2, 1, "2.5")


# s4, case (ii): schedule, devices, stages, M, formula, idle max, mean, min, makespan,
# true fraction, formula / makespan. Mean and fractions are rounded in the table.
CASE_II_ROWS = [
    ("dualpipe", 8, 8, 16, "4.5", "4.5", 4.125, "3.5", 49, 0.084184, 0.091837),
    ("dualpipe", 32, 32, 512, "22.5", "22.5", 19.219, "15.5", 1319, 0.014571, 0.017058),
    ("dualpipev", 8, 16, 16, "10.5", "10.5", 9.1875, "7.5", 99, 0.092803, 0.106061),
    ("dualpipev", 32, 64, 64, "46.5", "46.5", 39.234, "31.5", 399, 0.098332, 0.116541),
    ("dualpipe", 4, 4, 8, "1.5", "1.5", 1.5, "1.5", 24, 0.0625, 0.0625),
]


@pytest.mark.parametrize("row", CASE_II_ROWS, ids=lambda r: f"{r[0]}-{r[1]}x{r[3]}")
def test_case_ii_table(row):
    name, devices, stages, m, formula, idle_max, mean, idle_min, makespan, frac, ratio = row
    result = simulate(name, devices, m, CASE_II)
    idle = result.idle_per_rank
    assert result.stages == stages
    assert result.closed_form_bubble == Fraction(formula) and result.closed_form_exact
    assert max(idle) == Fraction(idle_max) and min(idle) == Fraction(idle_min)
    assert float(sum(idle) / devices) == pytest.approx(mean, abs=5e-4)
    assert result.makespan == makespan
    assert float(result.bubble_fraction) == pytest.approx(frac, abs=5e-7)
    assert float(result.closed_form_bubble / result.makespan) == pytest.approx(ratio, abs=5e-7)


# s4, "where the README is approximate", P=8, M=32 (DualPipeV: 8 devices, 16 stages):
# (F, B, W, F&B), (formula, simulated) for ZB1P, DualPipe, DualPipeV. "Simulated" is the
# worst device's idle time.
APPROXIMATE_ROWS = [
    (("1", "2", "0.5", "2.5"), ("14", "14"), ("9", "8"), ("21", "20")),
    (("1", "2", "0", "3"), ("21", "21"), ("15", "14"), ("35", "34")),
    (("2", "3", "1", "4"), ("21", "21"), ("12", "12"), ("28", "28")),
    (("1", "3", "1.5", "3.5"), ("7", "10.5"), ("6", "5"), ("14", "13")),
    (("1", "2", "1", "2"), ("7", "7"), ("3", "3"), ("7", "7")),
    (("2", "2", "1", "3"), ("14", "14"), ("6", "9"), ("14", "21")),
]


@pytest.mark.parametrize("row", APPROXIMATE_ROWS, ids=lambda r: ",".join(r[0]))
def test_where_the_readme_is_approximate(row):
    times = OpTimes(*row[0])
    for name, (formula, simulated) in zip(("zb1p", "dualpipe", "dualpipev"), row[1:], strict=True):
        result = simulate(name, 8, 32, times)
        assert result.closed_form_bubble == Fraction(formula), name
        assert max(result.idle_per_rank) == Fraction(simulated), name
        if formula != simulated:
            assert not result.closed_form_exact, name


@pytest.mark.parametrize("p", [4, 8, 16])
def test_dualpipe_error_grows_with_the_pipeline_when_f_exceeds_i(p):
    # s4: with F > I (W <= I) the DualPipe error was (P/2-1)(F-I): 1, 3, 7 for P = 4, 8, 16.
    times = OpTimes(2, 2, 1, 3)
    result = simulate("dualpipe", p, 4 * p, times)
    error = max(result.idle_per_rank) - result.closed_form_bubble
    assert error == (p // 2 - 1) * (times.forward - times.input) == {4: 1, 8: 3, 16: 7}[p]


# s5: peak live activations per device, counted on the simulated timeline.
@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("factor", [2, 4, 8])
def test_activation_peaks(p, factor):
    m = factor * p
    assert simulate("gpipe", p, m).peak_activations_per_rank == (m,) * p
    one_f_one_b = tuple(p - r for r in range(p))  # device r: PP - r
    assert simulate("1f1b", p, m).peak_activations_per_rank == one_f_one_b
    assert simulate("zb1p", p, m).peak_activations_per_rank == one_f_one_b
    assert simulate("dualpipe", p, m).peak_activations_per_rank == (p + 1,) * p
    assert simulate("dualpipev", p, m).peak_activations_per_rank == (2 * p + 1,) * p


# s6: P2P messages per iteration.
@pytest.mark.parametrize("p", [4, 8, 16])
def test_p2p_counts(p):
    m = 4 * p
    for name in ("gpipe", "1f1b", "zb1p", "dualpipe"):
        result = simulate(name, p, m)
        assert result.p2p_messages == 2 * m * (p - 1), name
        ends = (0, p - 1)
        expected = tuple(m if r in ends else 2 * m for r in range(p))
        assert result.p2p_sends_per_rank == expected, name
        assert result.timeline.recvs == expected, name
    v = simulate("dualpipev", p, m)
    assert v.p2p_messages == 2 * m * (2 * p - 2)
    assert v.p2p_sends_per_rank == tuple(2 * m if r in (0, p - 1) else 4 * m for r in range(p))


def _kinds(order) -> Counter:
    return Counter(op.kind for op in order)


# s3: per-rank totals of the 8-step orders.
@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("extra", [0, 2, 10])
def test_dualpipe_per_rank_op_totals(p, extra):
    m = 2 * p + extra
    h_total = p // 2
    orders = simulate("dualpipe", p, m).timeline.orders
    for r, order in enumerate(orders):
        h = min(r, p - 1 - r)
        mid = int(r in (h_total - 1, h_total))
        c = _kinds(order)
        assert c[F] == p + h_total - h - 1 + mid
        assert c[FB] == m - 2 * p + h_total + h + 1 - mid
        assert c[B] == h_total + mid
        assert c[I] == c[W] == p - h - 1


@pytest.mark.parametrize("n", [1, 2, 4, 8])
@pytest.mark.parametrize("extra", [0, 1, 7])
def test_dualpipev_per_rank_op_totals(n, extra):
    m = 2 * n + extra
    orders = simulate("dualpipev", n, m).timeline.orders
    for r, order in enumerate(orders):
        last = int(r == n - 1)
        c = _kinds(order)
        assert c[F] == 3 * n - r - 1 + last
        assert c[FB] == 2 * m - 3 * n + r + 1 - last
        assert c[B] == n + last
        assert c[I] == c[W] == 2 * n - r - 1


def test_middle_ranks_run_the_first_main_step_pair_unoverlapped():
    # s3 / pitfall 5: step 4 iteration 0 on the middle ranks is F0, full B1, then (F1&B0).
    p, m = 8, 20
    orders = simulate("dualpipe", p, m).timeline.orders
    for r in range(p):
        order = orders[r]
        first_pair = next(i for i, op in enumerate(order) if op.kind == FB)
        if r in (3, 4):
            assert [op.kind for op in order[first_pair - 2 : first_pair + 1]] == [F, B, FB]
        else:
            assert order[first_pair - 1].kind in (F, W)  # end of step 2 or step 3
    v = simulate("dualpipev", 4, 10).timeline.orders[3]
    first_pair = next(i for i, op in enumerate(v) if op.kind == FB)
    assert [op.kind for op in v[first_pair - 2 : first_pair + 1]] == [F, B, FB]


def _sends_per_step(result, rank: int, half: int, h: int, main: int, middle: bool) -> list[int]:
    """Split a rank's order into the 8 steps by their lengths in ops (schedules.md s3) and
    count the messages each step sends: F to stage s+1, B or I to stage s-1, when that stage
    lives on another rank."""
    rest = half - h - 1
    lengths = [2 * rest, 2 * (h + 1), 3 * rest, 2 * main + middle, 2 * rest, 2 * (h + 1)]
    lengths += [2 * rest, h + 1]
    order = result.timeline.orders[rank]
    assert sum(lengths) == len(order)
    rank_of = result.timeline.layout.rank_of
    sends, start = [], 0
    for length in lengths:
        count = 0
        for op in order[start : start + length]:
            parts = [(F, op.pipe, op.stage), (B, op.b_pipe, op.b_stage)] if op.kind == FB else []
            for kind, pipe, stage in parts or [(op.kind, op.pipe, op.stage)]:
                row = rank_of[pipe]
                nxt = stage + 1 if kind == F else stage - 1
                if kind != W and 0 <= nxt < len(row) and row[nxt] != rank:
                    count += 1
        sends.append(count)
        start += length
    return sends


@pytest.mark.parametrize("p", [4, 8, 16])
def test_per_step_messages_on_interior_ranks(p):
    # s6 table: sends per step on an interior rank (an F&B counts 2, W counts 0)
    m = 4 * p
    dual = simulate("dualpipe", p, m)
    for r in range(1, p - 1):
        h, half, mm = min(r, p - 1 - r), p // 2, m // 2
        rest, main = half - h - 1, mm - p + h + 1
        expected = [2 * rest, 2 * (h + 1), 2 * rest, 4 * main, 3 * rest, 2 * (h + 1), rest, 0]
        assert _sends_per_step(dual, r, half, h, main, r in (half - 1, half)) == expected, r
    vee = simulate("dualpipev", p, m)
    for r in range(1, p - 1):
        rest, main = p - r - 1, m - 2 * p + r + 1
        expected = [2 * rest, 2 * (r + 1), 2 * rest, 4 * main, 3 * rest, 2 * (r + 1), rest, 0]
        assert _sends_per_step(vee, r, p, r, main, False) == expected, r
