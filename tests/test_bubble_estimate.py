"""The planner ranks layouts by closed-form bubbles (it never simulates inside its search), and
beyond the simulator's size the plan takes the exact closed form: both checked here against the
exact simulator over a grid of P and M."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpguard import sizing
from dpguard.policy.load import load_policies
from dpguard.schedules import check, simulate

SETTINGS = load_policies([]).settings
RATIOS = SETTINGS["op_time_ratios"]
GRID = [(p, m) for p in (2, 3, 4, 8, 16) for m in (1, 2, 4, 8, 16, 24, 32, 64)]


def _strategy(schedule: str, p: int, m: int, v: int = 1) -> sizing.Strategy:
    return sizing.Strategy(schedule, 1, p, 1, 1, v, m)


def _simulated(s: sizing.Strategy) -> Fraction:
    virtual = s.virtual_stages if s.schedule == "interleaved-1f1b" else 1
    times = sizing.op_times(SETTINGS)
    return simulate(
        s.schedule, s.pipeline, s.microbatches, times, virtual_stages=virtual
    ).bubble_fraction


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb1p", "interleaved-1f1b"])
def test_uniform_idle_schedules_closed_form_is_exact_in_its_regime(schedule):
    """1F1B and GPipe: every M; interleaved 1F1B (v = 2) and ZB1P (W <= min(F, I) with the
    shipped ratios F = 1, I = 1, W = 1): M >= P. There the closed form is the idle time of
    every device, so idle / (idle + work) is the simulated fraction to the last bit."""
    checked = 0
    for p, m in GRID:
        v = 2 if schedule == "interleaved-1f1b" else 1
        s = _strategy(schedule, p, m, v)
        if check(schedule, p, m, v) or (schedule in ("zb1p", "interleaved-1f1b") and m < p):
            continue
        assert sizing.estimated_bubble(s, SETTINGS) == pytest.approx(
            float(_simulated(s)), rel=1e-12
        ), (p, m)
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("schedule", ["dualpipe", "dualpipev"])
def test_dualpipe_closed_form_bounds_the_simulated_fraction(schedule):
    """DualPipe's published closed form is the largest per-device idle (exact for F = I and
    W <= F, the shipped ratios): the worst device's idle over its idle plus work is then at
    least the simulated average, and close to it (the planner uses it only to rank)."""
    checked = 0
    for p, m in GRID:
        if check(schedule, p, m, 1):
            continue
        s = _strategy(schedule, p, m)
        estimate, simulated = sizing.estimated_bubble(s, SETTINGS), float(_simulated(s))
        assert simulated - 1e-12 <= estimate <= simulated + 0.05, (p, m)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(
    ("schedule", "v"),
    [
        ("gpipe", 1),
        ("1f1b", 1),
        ("interleaved-1f1b", 2),
        ("interleaved-1f1b", 3),
        ("zb1p", 1),
        ("dualpipe", 1),
        ("dualpipev", 1),
    ],
)
def test_extrapolation_from_the_reference_m_is_exact(schedule, v):
    """In the steady regime the bubble is simulated at the reference M (the smallest valid
    M >= P, >= 2P for DualPipe and DualPipeV) and extrapolated: every rank's idle time is the
    reference's, its work grows with M. That must equal the full simulation exactly for every
    valid M up to 10P (the claim `sizing._simulated_at` rests on), at the shipped op-time
    ratios and at others a team may write (B != 2F, W != F, partial F&B overlap)."""
    checked = 0
    for backward, weight, overlapped in ((2, 1, 3), (Fraction(3, 2), Fraction(1, 2), 2), (3, 2, 4)):
        ratios = {"backward": backward, "weight": weight, "overlapped": overlapped}
        settings = {**SETTINGS, "op_time_ratios": ratios}
        times = sizing.op_times(settings)
        for p in (2, 3, 4, 5, 8):
            for m in range(p, 10 * p + 1):
                if check(schedule, p, m, v):
                    continue
                s = _strategy(schedule, p, m, v)
                ref = sizing._simulated_at(s)
                if ref is None or ref == m:
                    continue
                full = simulate(schedule, p, m, times, virtual_stages=v)
                extrapolated = sizing.bubble(s, settings)
                assert extrapolated is not None and extrapolated.method == "extrapolated"
                assert (extrapolated.fraction, extrapolated.makespan) == (
                    float(full.bubble_fraction),
                    float(full.makespan),
                ), (backward, weight, p, m)
                checked += 1
    assert checked >= 120


def test_beyond_the_reference_the_exact_closed_form_gives_the_bubble(monkeypatch):
    """When even the reference run is over the limit, 1F1B's bubble is (P - 1) / (M + P - 1)
    from the closed form, marked as such; DualPipe has no exact form for the fraction, so it
    gets none (the page says why)."""
    monkeypatch.setattr(sizing, "SIMULATED_PAIRS", 16)
    monkeypatch.setattr(sizing, "REFERENCE_PAIRS", 16)
    big = _strategy("1f1b", 16, 131_072)
    assert sizing.too_large(big)
    result = sizing.bubble(big, SETTINGS)
    assert result is not None and result.method == "closed form"
    assert result.fraction == pytest.approx(15 / (131_072 + 15), rel=1e-12)
    assert sizing.bubble(_strategy("dualpipe", 16, 131_072), SETTINGS) is None
    assert RATIOS["weight"] <= 1  # the exact regimes above assume the shipped ratios


def test_a_batch_of_a_million_sequences_gets_an_exact_bubble_without_a_long_simulation():
    """16 stages x 1,048,576 micro-batches is simulated at M = 32 only, and 1F1B at P = 4,
    M = 8 at M = 4 (the reference: every M from P on reuses it); short of the steady regime
    (M < P) the run itself is simulated."""
    s = _strategy("dualpipe", 16, 2**20)
    assert sizing.too_large(s) is None
    result = sizing.bubble(s, SETTINGS)
    assert result is not None and result.method == "extrapolated"
    steady = sizing.bubble(_strategy("1f1b", 4, 8), SETTINGS)
    assert steady is not None and steady.method == "extrapolated"
    assert steady.fraction == pytest.approx(3 / 11, rel=1e-12)
    short = sizing.bubble(_strategy("1f1b", 4, 3), SETTINGS)
    assert short is not None and short.method == "simulated"
    assert short.fraction == pytest.approx(3 / 6, rel=1e-12)
