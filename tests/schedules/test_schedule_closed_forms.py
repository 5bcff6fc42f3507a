"""Closed forms against the exact simulation, in the regimes where schedules.md says they hold."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpguard.schedules import SCHEDULES, OpTimes, check, simulate

GRID = [(p, m) for p in (4, 8, 16, 32) for m in (2 * p, 4 * p, 8 * p, 16 * p)]
CASE_I = OpTimes(1, 2, 1, 3)
CASE_II = OpTimes(1, 2, 1, "2.5")

quarter = st.integers(1, 12).map(lambda n: Fraction(n, 4))


@st.composite
def any_times(draw: st.DrawFn) -> OpTimes:
    f, b = draw(quarter), draw(quarter)
    w = Fraction(draw(st.integers(0, int(4 * b) - 1)), 4)
    fb = max(f, b) + (f + b - max(f, b)) * draw(st.integers(0, 4)) / 4
    return OpTimes(f, b, w, fb)


@st.composite
def dual_regime_times(draw: st.DrawFn) -> OpTimes:
    """F = I and W <= F: the regime where the DualPipe README formula is exact."""
    f = draw(quarter)
    w = Fraction(draw(st.integers(0, int(4 * f))), 4)
    b = f + w
    fb = max(f, b) + (f + b - max(f, b)) * draw(st.integers(0, 4)) / 4
    return OpTimes(f, b, w, fb)


@settings(max_examples=40, deadline=None)
@given(times=any_times(), ranks=st.integers(1, 8), extra=st.integers(0, 12))
def test_gpipe_and_1f1b_idle_is_p_minus_1_times_f_plus_b_on_every_rank(times, ranks, extra):
    microbatches = 1 + extra  # any M >= 1, also M < P
    expected = (ranks - 1) * (times.forward + times.backward)
    for name in ("gpipe", "1f1b"):
        result = simulate(name, ranks, microbatches, times)
        assert set(result.idle_per_rank) == {expected}
        assert result.makespan == (microbatches + ranks - 1) * (times.forward + times.backward)
        assert result.closed_form_exact and result.closed_form_bubble == expected


@settings(max_examples=60, deadline=None)
@given(times=any_times(), ranks=st.integers(1, 8), extra=st.integers(0, 10))
def test_zb1p_idle_is_f_plus_i_minus_min_w_f_i_for_m_at_least_p(times, ranks, extra):
    # schedules.md s4: every device idles (P-1)(F+I-min(W,F,I)) for M >= P.
    result = simulate("zb1p", ranks, ranks + extra, times)
    f, i, w = times.forward, times.input, times.weight
    assert set(result.idle_per_rank) == {(ranks - 1) * (f + i - min(w, f, i))}
    readme = (ranks - 1) * (times.forward + times.backward - 2 * w)
    assert result.closed_form_bubble == readme
    in_regime = ranks == 1 or w <= min(f, i)
    assert result.closed_form_exact == in_regime
    if in_regime:
        assert max(result.idle_per_rank) == readme


def test_zb1p_with_fewer_microbatches_than_ranks_idles_more_and_is_flagged():
    result = simulate("zb1p", 4, 2, CASE_I)  # schedules.md s4: "P=4, M=2: 5 vs 3"
    assert max(result.idle_per_rank) == 5
    assert result.closed_form_bubble == 3 and not result.closed_form_exact


@settings(max_examples=40, deadline=None)
@given(times=dual_regime_times(), half=st.integers(1, 4), extra=st.integers(0, 6))
def test_dualpipe_worst_idle_makespan_and_busy_match_the_formulas(times, half, extra):
    p = 2 * half
    m = 2 * p + 2 * extra
    f, b, w, fb = times.forward, times.backward, times.weight, times.overlapped
    delta = f + b - fb
    result = simulate("dualpipe", p, m, times)
    formula = (Fraction(p, 2) - 1) * (fb + b - 3 * w)  # README (PP/2-1)(F&B+B-3W), PP = P
    assert result.closed_form_exact
    assert result.closed_form_bubble == formula == max(result.idle_per_rank)
    # schedules.md s4, DualPipe in this regime:
    assert result.makespan == m * (f + b) - (m - p - 1) * delta + formula
    busy = p * m * (f + b) - delta * (p * (m - 2 * p + p // 2 + 1) + (p // 2) * (p // 2 - 1) - 2)
    assert sum(result.busy_per_rank) == busy
    assert result.idle_per_rank[p // 2 - 1] == result.idle_per_rank[p // 2] == formula


@settings(max_examples=40, deadline=None)
@given(times=dual_regime_times(), n=st.integers(1, 5), extra=st.integers(0, 7))
def test_dualpipev_worst_idle_makespan_and_busy_match_the_formulas(times, n, extra):
    m = 2 * n + extra  # odd M is fine for DualPipeV
    f, b, w, fb = times.forward, times.backward, times.weight, times.overlapped
    delta = f + b - fb
    result = simulate("dualpipev", n, m, times)
    formula = (n - 1) * (fb + b - 3 * w)  # README formula with PP = 2N
    assert result.closed_form_exact
    assert result.closed_form_bubble == formula == max(result.idle_per_rank)
    assert result.idle_per_rank[-1] == formula  # the last rank is the worst
    assert result.makespan == 2 * m * (f + b) - (2 * m - 2 * n - 1) * delta + formula
    busy = 2 * n * m * (f + b) - delta * (n * (2 * m - 3 * n + 1) + Fraction(n * (n - 1), 2) - 1)
    assert sum(result.busy_per_rank) == busy


def _kinds_and_starts(result, rank: int) -> list[tuple[str, int]]:
    tl = result.timeline
    return [(op.kind, s) for op, s in zip(tl.orders[rank], tl.starts[rank], strict=True)]


@settings(max_examples=60, deadline=None)
@given(times=any_times(), n=st.integers(1, 4), extra=st.integers(0, 6))
def test_dualpipev_n_m_runs_the_same_timeline_as_dualpipe_2n_2m(times, n, extra):
    """DualPipeV(N, M) "is DualPipe(2N, 2M) cut in half": what matches exactly, for any op
    times, is each device's timeline. DualPipeV device r runs the same op kinds at the same
    start times as DualPipe rank r (its chunk 0 / chunk 1 = DualPipe's forward / reverse
    direction, same micro-batch indices), and DualPipe's ranks P-1-r mirror rank r. Hence the
    makespan, the per-device idle times, the bubble fraction and the activation peaks agree.
    What does not: DualPipe(2N, 2M) uses 2N devices, holds 2x parameters, sends
    2(2M)(2N-1) messages against DualPipeV's 2M(2N-2), and runs 2M micro-batches of which each
    passes half the model (DualPipeV: M micro-batches through all of it)."""
    m = 2 * n + extra
    v = simulate("dualpipev", n, m, times)
    d = simulate("dualpipe", 2 * n, 2 * m, times)
    for r in range(n):
        assert _kinds_and_starts(d, r) == _kinds_and_starts(v, r), r
        assert _kinds_and_starts(d, 2 * n - 1 - r) == _kinds_and_starts(v, r), r  # mirror
    assert v.makespan == d.makespan
    assert v.idle_per_rank == d.idle_per_rank[:n] == d.idle_per_rank[::-1][:n]
    assert v.bubble_fraction == d.bubble_fraction
    assert v.peak_activations_per_rank == d.peak_activations_per_rank[:n]
    assert (v.p2p_messages, d.p2p_messages) == (2 * m * (2 * n - 2), 4 * m * (2 * n - 1))
    assert (v.param_copies, d.param_copies) == (1, 2)


@settings(max_examples=40, deadline=None)
@given(times=any_times(), ranks=st.integers(1, 6), v=st.integers(1, 4), rounds=st.integers(1, 3))
def test_interleaved_idle_is_p_minus_1_times_chunk_f_plus_b_for_m_at_least_p(
    times, ranks, v, rounds
):
    microbatches = ranks * rounds + (ranks - 1 if rounds == 1 else 0)  # also M % P != 0
    assert not check("interleaved-1f1b", ranks, microbatches, v)
    result = simulate("interleaved-1f1b", ranks, microbatches, times, v)
    # arXiv 2104.04473 s2.2.2: (p-1)(t_f+t_b)/v, i.e. (P-1)(F+B) with per-chunk F and B
    assert set(result.idle_per_rank) == {(ranks - 1) * (times.forward + times.backward)}
    assert result.closed_form_exact


@settings(max_examples=120, deadline=None)
@given(
    name=st.sampled_from(sorted(SCHEDULES)),
    times=any_times(),
    ranks=st.integers(1, 6),
    extra=st.integers(0, 12),
)
def test_a_closed_form_flagged_exact_is_the_worst_idle(name, times, ranks, extra):
    v = 2 if name == "interleaved-1f1b" else 1
    microbatches = 1 + extra
    if name == "dualpipe":
        ranks += ranks % 2
        microbatches = 2 * ranks + 2 * extra
    elif name == "dualpipev":
        microbatches = 2 * ranks + extra
    if check(name, ranks, microbatches, v):
        return
    result = simulate(name, ranks, microbatches, times, v)
    if result.closed_form_exact:
        assert result.closed_form_bubble == max(result.idle_per_rank)


@pytest.mark.parametrize(("p", "m"), GRID)
@pytest.mark.parametrize("times", [CASE_I, CASE_II], ids=["i", "ii"])
def test_schedules_md_grid_dual_max_idle_equals_formula(p, m, times):
    # schedules.md s4: in the grid, cases (i) and (ii) are in the regime: 160 rows match.
    for name, pp in (("dualpipe", p), ("dualpipev", 2 * p)):
        result = simulate(name, p, m, times)
        formula = (Fraction(pp, 2) - 1) * (times.overlapped + times.backward - 3 * times.weight)
        assert result.closed_form_exact and max(result.idle_per_rank) == formula
        if times is CASE_I:  # "In case (i), every device idles exactly the formula value."
            assert set(result.idle_per_rank) == {formula}


@pytest.mark.parametrize(("name", "ranks"), [("dualpipe", 2), ("dualpipev", 1)])
def test_two_stage_dual_pipelines_have_no_bubble(name, ranks):
    for times in (CASE_I, OpTimes(2, 2, 1, 3), OpTimes(1, 3, "0.5", 4)):
        result = simulate(name, ranks, 4 * ranks, times)
        assert set(result.idle_per_rank) == {0} and result.closed_form_exact
        assert result.closed_form_bubble == 0


def test_only_dualpipe_is_registered_with_two_parameter_copies():
    assert {n: s.param_copies for n, s in SCHEDULES.items()} == {
        "gpipe": 1,
        "1f1b": 1,
        "interleaved-1f1b": 1,
        "zb1p": 1,
        "dualpipe": 2,
        "dualpipev": 1,
    }
