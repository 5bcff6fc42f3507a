"""Every decision-table message, rendered, beside the numbers that back it: a policy message may
not claim what dpguard's own simulator and step-time model contradict (DT002 once said DualPipeV
"halves the pipeline bubble of Zero Bubble"; the simulator gives both the same bubble).

Each shipped decision rule names the check of its claim in CLAIMS; a new rule without one fails
here, and so does a message that uses a quantitative comparison no check covers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from dpguard import perf, sizing
from dpguard.check import check_file
from dpguard.policy.load import load_policies
from dpguard.policy.templates import render_message
from dpguard.schedules import SCHEDULES, OpTimes, simulate

REPO = Path(__file__).resolve().parent.parent
# The 6ND op-time ratios the plan's schedule table simulates (policies/planner.yaml)
TIMES = OpTimes(1, 2, 1, 3)
GRID = [(p, m) for p in (4, 8, 16) for m in (2 * p, 4 * p, 8 * p)]

# Words that state a number: a message using one needs a check that computes it.
QUANTITATIVE = re.compile(r"\b(halves|halve|twice|double[sd]?|triples?|\d+x|\d+ ?%)", re.I)


def bubble(schedule: str, p: int, m: int) -> Fraction:
    return simulate(schedule, p, m, TIMES).bubble_fraction


def idle(schedule: str, p: int, m: int) -> Fraction:
    r = simulate(schedule, p, m, TIMES)
    return max(r.idle_per_rank)


def dualpipev_reaches_zero_bubble_at_1f1b_parameter_memory() -> None:
    """DT002: DualPipeV's bubble is Zero Bubble's (never more) wherever both run, and each
    device holds 2 of 2P stages: 1/P of the model, as under 1F1B."""
    for p, m in GRID:
        assert bubble("dualpipev", p, m) == bubble("zb1p", p, m), (p, m)
        spec = SCHEDULES["dualpipev"]
        stages = spec.stages(p, spec.virtual(1))
        assert Fraction(stages // p, stages) == Fraction(1, p)


def zero_bubble_removes_most_of_the_1f1b_bubble() -> None:
    """DT003: Zero Bubble's idle time is at most half of 1F1B's at M >= P."""
    for p, m in GRID:
        assert idle("zb1p", p, m) <= idle("1f1b", p, m) / 2, (p, m)


def dualpipe_overlaps_the_expert_all_to_all() -> None:
    """DT001: on the MoE example, the step-time model's exposed all-to-all under DualPipe is
    below 1F1B's at the same layout (DualPipe pairs one chunk's communication with another's
    compute)."""
    m = check_file(str(REPO / "examples" / "frontier-moe.yaml"), None, None, {}).manifest
    assert m is not None
    s = sizing.proposal(m, "1f1b")
    assert s is not None
    plain = perf.predicted(m, s, 1)
    dual = perf.predicted(m, replace(s, schedule="dualpipe"), 1)
    assert plain is not None and dual is not None
    assert dual.breakdown_s["ep"] < plain.breakdown_s["ep"]


def one_f_one_b_needs_no_number() -> None:
    """DT004 states no quantity ("simple and sufficient at this scale"): nothing to compute,
    and QUANTITATIVE keeps it that way."""


CLAIMS: dict[str, Callable[[], None]] = {
    "DT001": dualpipe_overlaps_the_expert_all_to_all,
    "DT002": dualpipev_reaches_zero_bubble_at_1f1b_parameter_memory,
    "DT003": zero_bubble_removes_most_of_the_1f1b_bubble,
    "DT004": one_f_one_b_needs_no_number,
}

DECISIONS = [r for r in load_policies().rules if r.kind == "decision"]


def test_every_decision_rule_names_the_check_of_its_claim() -> None:
    assert sorted(r.id for r in DECISIONS) == sorted(CLAIMS)


@pytest.mark.parametrize("rule", DECISIONS, ids=[r.id for r in DECISIONS])
def test_the_rendered_message_holds_against_the_numbers(rule) -> None:  # type: ignore[no-untyped-def]
    text = render_message(rule.message, {"cluster.gpus": 1024}, {"id": rule.id})
    assert "1024 GPUs" in text or "{{" not in rule.message
    assert not QUANTITATIVE.search(text), f"{rule.id}: {text!r} states a number no check computes"
    CLAIMS[rule.id]()
