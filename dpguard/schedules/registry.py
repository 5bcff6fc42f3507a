"""The schedule registry: name -> constraints, order generator, closed form, memory factors.

Constraints follow the reference implementation each generator reproduces. Where DeepSeek and
torch differ, dpguard follows DeepSeek for DualPipe and DualPipeV (deepseek-ai/DualPipe
`step()` asserts) and torch for interleaved 1F1B (`M % max(1, M // P) == 0`, which admits
every M that Megatron's ``M % P == 0`` admits, and more). GPipe, 1F1B and ZB1P are the
textbook orders and accept any M >= 1 (torch's `Schedule1F1B` would reject M < P).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from dpguard.schedules import closed_forms, dualpipe, orders
from dpguard.schedules.closed_forms import ClosedForm
from dpguard.schedules.ops import FB, B, F, I, Layout, OpTimes, W
from dpguard.schedules.orders import Orders

Generator = Callable[[int, int, int], tuple[Layout, Orders]]
ClosedFormFn = Callable[[int, int, int, OpTimes], ClosedForm]
ConstraintFn = Callable[[int, int, int], list[str]]


FULL = frozenset({F, B})  # schedules without a B/W split or overlap use only F and B


def _none(ranks: int, microbatches: int, v: int) -> list[str]:
    return []


def _one(v: int) -> Fraction:
    return Fraction(1)


def _p(ranks: int, v: int) -> int:
    return ranks


def _looped(ranks: int, stages: int) -> tuple[int, ...]:
    """Stage s on rank s mod P (one stage per rank, or interleaved chunks)."""
    return tuple(s % ranks for s in range(stages))


def _v_shaped(ranks: int, stages: int) -> tuple[int, ...]:
    """Stage s < N on rank s, stage s >= N on rank 2N - 1 - s (DualPipeV's V)."""
    return tuple(range(ranks)) + tuple(reversed(range(ranks)))


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule. Memory factors are per device, relative to 1F1B on the same devices.

    ``param_copies``: parameter bytes per device (DualPipe keeps two model copies; DualPipeV's
    two chunks of 1/(2N) of the model weigh the same as 1F1B's one chunk of 1/N, schedules.md
    s5). ``chunk_size(v)``: one stage chunk relative to a 1F1B stage (1/P of the model): 1/v
    for interleaved, 1/2 for DualPipeV, else 1. It scales activations (peak count x chunk)
    and, in `compare`, the op times, so that every schedule does the same work per device.
    """

    name: str
    title: str
    reference: str
    generate: Generator
    closed_form: ClosedFormFn
    op_kinds: frozenset[str] = FULL  # the op kinds its orders contain (the op times it uses)
    constraints: ConstraintFn = _none
    param_copies: Fraction = Fraction(1)
    chunk_size: Callable[[int], Fraction] = _one
    stages: Callable[[int, int], int] = _p
    uses_virtual_stages: bool = False
    # From M = steady_from x P on, every rank's idle time no longer depends on M (warm-up and
    # cool-down are complete): sizing.bubble extrapolates from there; tests/
    # test_bubble_estimate.py checks it against full simulations.
    steady_from: int = 1
    # The published closed form, in its exact regime, is the idle time of *every* device (not
    # only the worst), so idle / (idle + work) is the exact bubble fraction.
    uniform_idle: bool = True
    # The rank of each stage, given the ranks and the stage count (the memory model places
    # layers by it).
    placement: Callable[[int, int], tuple[int, ...]] = _looped
    # Weight passes deferred past the input gradient, holding their GEMM inputs and output
    # gradients (ZB-H1: rank r defers r of them; the memory model prices them). DualPipe(V)
    # defer W only in their cool-down, while their in-flight count falls: not flagged.
    defers_weight: bool = False

    def virtual(self, v: int) -> int:
        """The interleaving depth the schedule runs with `v` virtual stages written: v for an
        interleaved schedule, else 1 (a virtual stage count it does not use)."""
        return v if self.uses_virtual_stages else 1

    @cached_property
    def mirrored(self) -> bool:
        """A second copy of the parameters per rank (DualPipe's two directions); remembered
        (a Fraction comparison, and the planner asks for every layout it sizes)."""
        return self.param_copies > 1


def _interleaved(ranks: int, microbatches: int, v: int) -> list[str]:
    rounds, _ = orders.interleaved_rounds(ranks, microbatches)
    if microbatches % rounds:
        return [
            f"interleaved-1f1b needs micro-batches divisible by the number of rounds "
            f"max(1, M // P) = {rounds} (got M={microbatches}, P={ranks}) "
            "[torch ScheduleInterleaved1F1B: M % max(1, M // P) == 0]"
        ]
    return []


def _dualpipe(ranks: int, microbatches: int, v: int) -> list[str]:
    problems = []
    if ranks % 2:
        problems.append(
            f"dualpipe needs an even number of ranks (got {ranks}) "
            "[deepseek-ai/DualPipe dualpipe.py: num_ranks % 2 == 0]"
        )
    if microbatches % 2:
        problems.append(
            f"dualpipe needs an even number of micro-batches, M/2 per direction "
            f"(got {microbatches}) [dualpipe.py: num_chunks % 2 == 0]"
        )
    if microbatches < 2 * ranks:
        problems.append(
            f"dualpipe needs micro-batches >= 2 x ranks = {2 * ranks} (got {microbatches}) "
            "[dualpipe.py: num_chunks >= num_ranks * 2]"
        )
    return problems


def _dualpipev(ranks: int, microbatches: int, v: int) -> list[str]:
    if microbatches < 2 * ranks:
        return [
            f"dualpipev needs micro-batches >= 2 x ranks = {2 * ranks} (got {microbatches}) "
            "[deepseek-ai/DualPipe dualpipev.py: num_chunks >= num_ranks * 2]"
        ]
    return []


SCHEDULES: dict[str, ScheduleSpec] = {
    spec.name: spec
    for spec in (
        ScheduleSpec(
            name="gpipe",
            title="GPipe",
            reference="arXiv 1811.06965; torch ScheduleGPipe",
            generate=orders.gpipe,
            closed_form=closed_forms.one_f_one_b,
        ),
        ScheduleSpec(
            name="1f1b",
            title="1F1B",
            reference="arXiv 2104.04473 s2.2.1 (PipeDream-flush)",
            generate=orders.one_f_one_b,
            closed_form=closed_forms.one_f_one_b,
        ),
        ScheduleSpec(
            name="interleaved-1f1b",
            title="interleaved 1F1B",
            reference="arXiv 2104.04473 s2.2.2; torch ScheduleInterleaved1F1B",
            generate=orders.interleaved_1f1b,
            closed_form=closed_forms.interleaved,
            constraints=_interleaved,
            chunk_size=lambda v: Fraction(1, v),
            stages=lambda ranks, v: ranks * v,
            uses_virtual_stages=True,
        ),
        ScheduleSpec(
            name="zb1p",
            title="ZB1P (ZB-H1)",
            reference="arXiv 2401.10241 s3.1; torch ScheduleInterleavedZeroBubble, 1 stage/rank",
            generate=orders.zb1p,
            closed_form=closed_forms.zb1p,
            op_kinds=frozenset({F, I, W}),
            defers_weight=True,
        ),
        ScheduleSpec(
            name="dualpipe",
            title="DualPipe",
            reference="arXiv 2412.19437 s3.2.1; deepseek-ai/DualPipe dualpipe.py",
            generate=dualpipe.dualpipe,
            steady_from=2,
            uniform_idle=False,
            closed_form=closed_forms.dualpipe,
            constraints=_dualpipe,
            param_copies=Fraction(2),
            op_kinds=frozenset({F, B, I, W, FB}),
        ),
        ScheduleSpec(
            name="dualpipev",
            title="DualPipeV",
            reference="deepseek-ai/DualPipe dualpipev.py",
            generate=dualpipe.dualpipev,
            steady_from=2,
            uniform_idle=False,
            closed_form=closed_forms.dualpipev,
            constraints=_dualpipev,
            chunk_size=lambda v: Fraction(1, 2),
            stages=lambda ranks, v: 2 * ranks,
            placement=_v_shaped,
            op_kinds=frozenset({F, B, I, W, FB}),
        ),
    )
}


def check(schedule: str, ranks: int, microbatches: int, virtual_stages: int = 1) -> tuple[str, ...]:
    """Every violated constraint, one message each; empty when the inputs are valid.

    Never raises, so the policy engine can call it on untrusted manifest values.
    """
    spec = SCHEDULES.get(schedule) if isinstance(schedule, str) else None
    if spec is None:
        return (f"unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}",)
    problems = []
    for what, value in (
        ("ranks", ranks),
        ("micro-batches", microbatches),
        ("virtual stages", virtual_stages),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{what} must be an integer >= 1 (got {value!r})")
    if problems:
        return tuple(problems)
    if virtual_stages != 1 and not spec.uses_virtual_stages:
        problems.append(
            f"{schedule} runs one stage per rank; virtual stages must be 1 (got {virtual_stages})"
        )
    problems += spec.constraints(ranks, microbatches, virtual_stages)
    return tuple(problems)
