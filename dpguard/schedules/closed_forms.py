"""Published closed-form bubbles, reported beside the simulation and never instead of it.

Each closed form is an *idle time of one device* (not a fraction), in the units of the op
times. `exact` says whether the inputs lie in the regime where the formula equals the worst
device's simulated idle time (schedules.md section 4, re-verified by tests/schedules); outside
it the formula is only an approximation and can be too high, too low, or even negative.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpguard.schedules.ops import OpTimes


@dataclass(frozen=True)
class ClosedForm:
    value: Fraction
    exact: bool
    label: str  # what the number is
    formula: str  # the formula with this schedule's symbols
    regime: str  # when it is exact
    source: str


def one_f_one_b(ranks: int, microbatches: int, v: int, t: OpTimes) -> ClosedForm:
    # (PP-1)(F+B): DualPipe README table, row 1F1B (= arXiv 2412.19437 Table 2); the same
    # bubble as GPipe's (arXiv 2104.04473 section 2.2.1, t_pb = (p-1)(t_f+t_b)).
    return ClosedForm(
        value=(ranks - 1) * (t.forward + t.backward),
        exact=True,
        label="idle time of every device (so also the worst device's)",
        formula="(P-1)(F+B)",
        regime="always (any M >= 1)",
        source="DualPipe README / arXiv 2412.19437 Table 2; arXiv 2104.04473 s2.2.1",
    )


def interleaved(ranks: int, microbatches: int, v: int, t: OpTimes) -> ClosedForm:
    # arXiv 2104.04473 section 2.2.2: bubble = (p-1)(t_f+t_b)/v with t_f, t_b the times of a
    # whole device's layers. Our F and B are per chunk (t_f = v*F), so the idle time per
    # device is (P-1)(F+B). Exact for M >= P by simulation of the torch order (tests).
    return ClosedForm(
        value=(ranks - 1) * (t.forward + t.backward),
        exact=microbatches >= ranks,
        label="idle time of every device (so also the worst device's)",
        formula="(P-1)(F+B) with per-chunk F, B = (p-1)(t_f+t_b)/v",
        regime="M >= P",
        source="arXiv 2104.04473 s2.2.2",
    )


def zb1p(ranks: int, microbatches: int, v: int, t: OpTimes) -> ClosedForm:
    # (PP-1)(F+B-2W): DualPipe README table, row ZB1P; arXiv 2401.10241 s3.1 writes it
    # (p-1)(T_F+T_B-T_W) with its B = our I. The simulated idle of every device is
    # (P-1)(F+I-min(W,F,I)) for M >= P, which equals this iff W <= min(F, I) (schedules.md s4).
    exact = microbatches >= ranks and (ranks == 1 or t.weight <= min(t.forward, t.input))
    return ClosedForm(
        value=(ranks - 1) * (t.forward + t.backward - 2 * t.weight),
        exact=exact,
        label="idle time of the worst device (all devices idle the same when exact)",
        formula="(P-1)(F+B-2W)",
        regime="M >= P and W <= min(F, I)",
        source="DualPipe README / arXiv 2412.19437 Table 2; arXiv 2401.10241 s3.1",
    )


def _dual(pp: int, t: OpTimes) -> tuple[Fraction, bool]:
    # (PP/2-1)(F&B+B-3W): DualPipe README table, row DualPipe (= arXiv 2412.19437 Table 2).
    # It equals the largest per-device idle iff F = I and W <= F; PP <= 2 always gives 0
    # (schedules.md s4).
    value = (Fraction(pp, 2) - 1) * (t.overlapped + t.backward - 3 * t.weight)
    exact = pp <= 2 or (t.forward == t.input and t.weight <= t.forward)
    return value, exact


def dualpipe(ranks: int, microbatches: int, v: int, t: OpTimes) -> ClosedForm:
    value, exact = _dual(ranks, t)
    return ClosedForm(
        value=value,
        exact=exact,
        label="idle time of the worst device (the middle ranks); others idle less when F&B < F+B",
        formula="(PP/2-1)(F&B+B-3W), PP = P",
        regime="F = I and W <= F (or P = 2)",
        source="DualPipe README / arXiv 2412.19437 Table 2",
    )


def dualpipev(ranks: int, microbatches: int, v: int, t: OpTimes) -> ClosedForm:
    # The README formula with PP = 2N stages: (N-1)(F&B+B-3W) on N devices (pitfall 1).
    value, exact = _dual(2 * ranks, t)
    return ClosedForm(
        value=value,
        exact=exact,
        label="idle time of the worst device (the last rank); others idle less when F&B < F+B",
        formula="(PP/2-1)(F&B+B-3W), PP = 2N stages",
        regime="F = I and W <= F (or N = 1)",
        source="DualPipe README / arXiv 2412.19437 Table 2",
    )
