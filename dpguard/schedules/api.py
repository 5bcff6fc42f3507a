"""Pure entry points: `simulate`, `compare`, and the frozen records they return.

All quantities are exact `Fraction`s (times in the units of the op times, fractions as
ratios); `SimResult.to_dict` converts them to floats for JSON, the only place that rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dpguard.schedules import engine
from dpguard.schedules.closed_forms import ClosedForm
from dpguard.schedules.ops import ConstraintError, OpTimes
from dpguard.schedules.registry import SCHEDULES, check

# Refuse runs beyond this many (stage, micro-batch) pairs: at 2**20 (interleaved-1f1b,
# P=64, v=4, M=4096) a run takes about 4 s and 435 MB on the development machine, and both
# grow linearly. The benchmark's biggest case has 262,144.
MAX_ITEMS = 2**20


@dataclass(frozen=True)
class SimResult:
    """One exact simulation. Times are Fractions in op-time units.

    ``bubble_fraction`` = sum of idle / (ranks x makespan) (schedules.md s1).
    ``closed_form`` is the published formula's value (an idle time of one device) with
    ``closed_form.exact`` False when the inputs are outside its exact regime.
    ``activation_memory`` = max peak x ``chunk_size`` in units of one 1F1B stage's
    activation for one micro-batch; ``param_copies`` is relative to 1F1B on as many devices.
    """

    schedule: str
    ranks: int
    stages: int
    microbatches: int
    virtual_stages: int
    times: OpTimes
    makespan: Fraction
    busy_per_rank: tuple[Fraction, ...]
    idle_per_rank: tuple[Fraction, ...]
    bubble_fraction: Fraction
    peak_activations_per_rank: tuple[int, ...]
    p2p_messages: int
    p2p_sends_per_rank: tuple[int, ...]
    closed_form: ClosedForm
    param_copies: Fraction
    chunk_size: Fraction
    events: int
    timeline: engine.Timeline = field(repr=False, compare=False)

    @property
    def closed_form_bubble(self) -> Fraction:
        return self.closed_form.value

    @property
    def closed_form_exact(self) -> bool:
        return self.closed_form.exact

    @property
    def activation_memory(self) -> Fraction:
        return max(self.peak_activations_per_rank) * self.chunk_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: floats for times and fractions, exact values as strings under 'exact'."""
        cf = self.closed_form
        return {
            "schedule": self.schedule,
            "reference": SCHEDULES[self.schedule].reference,
            "ranks": self.ranks,
            "stages": self.stages,
            "microbatches": self.microbatches,
            "virtual_stages": self.virtual_stages,
            "op_times": {k: float(v) for k, v in self.times.as_dict().items()},
            "makespan": float(self.makespan),
            "bubble_fraction": float(self.bubble_fraction),
            "busy_per_rank": [float(x) for x in self.busy_per_rank],
            "idle_per_rank": [float(x) for x in self.idle_per_rank],
            "peak_activations_per_rank": list(self.peak_activations_per_rank),
            "activation_memory": float(self.activation_memory),
            "param_copies": float(self.param_copies),
            "p2p_messages": self.p2p_messages,
            "p2p_sends_per_rank": list(self.p2p_sends_per_rank),
            "closed_form_bubble": float(cf.value),
            "closed_form_exact": cf.exact,
            "closed_form_label": cf.label,
            "closed_form_formula": cf.formula,
            "closed_form_regime": cf.regime,
            "closed_form_source": cf.source,
            "events": self.events,
            "exact": {
                "makespan": str(self.makespan),
                "bubble_fraction": str(self.bubble_fraction),
                "idle_per_rank": [str(x) for x in self.idle_per_rank],
                "closed_form_bubble": str(cf.value),
            },
        }


def too_large(schedule: str, ranks: int, microbatches: int, virtual_stages: int = 1) -> str | None:
    """Why inputs that `check` passes are too large to simulate, or None: the limit is on the
    schedule's stages (2P for DualPipeV, Pv for interleaved) times M, not on P x M."""
    stages = SCHEDULES[schedule].stages(ranks, virtual_stages)
    if stages * microbatches <= MAX_ITEMS:
        return None
    return (
        f"{stages} stages x {microbatches} micro-batches is too large to simulate "
        f"(limit {MAX_ITEMS:,} stage-micro-batch pairs)"
    )


def simulate(
    schedule: str,
    ranks: int,
    microbatches: int,
    times: OpTimes | None = None,
    virtual_stages: int = 1,
) -> SimResult:
    """Build the schedule's per-rank orders and simulate them exactly.

    Raises `ConstraintError` (a `ScheduleError`) listing every violated constraint, and
    `DeadlockError` / `OrderError` only on a generator bug.
    """
    problems = check(schedule, ranks, microbatches, virtual_stages)
    if problems:
        raise ConstraintError(problems)
    large = too_large(schedule, ranks, microbatches, virtual_stages)
    if large:
        raise ConstraintError([large])
    spec = SCHEDULES[schedule]
    stages = spec.stages(ranks, virtual_stages)
    times = times or OpTimes()
    layout, orders = spec.generate(ranks, microbatches, virtual_stages)
    tl = engine.run(layout, orders, times)
    makespan = Fraction(tl.makespan, tl.scale)
    busy = tuple(Fraction(b, tl.scale) for b in tl.busy)
    idle = tuple(makespan - b for b in busy)
    total = ranks * makespan
    return SimResult(
        schedule=schedule,
        ranks=ranks,
        stages=stages,
        microbatches=microbatches,
        virtual_stages=virtual_stages,
        times=times,
        makespan=makespan,
        busy_per_rank=busy,
        idle_per_rank=idle,
        bubble_fraction=sum(idle, Fraction(0)) / total,
        peak_activations_per_rank=tl.peak_activations,
        p2p_messages=sum(tl.sends),
        p2p_sends_per_rank=tl.sends,
        closed_form=spec.closed_form(ranks, microbatches, virtual_stages, times),
        param_copies=spec.param_copies,
        chunk_size=spec.chunk_size(virtual_stages),
        events=tl.events,
        timeline=tl,
    )


@dataclass(frozen=True)
class CompareRow:
    """One schedule in a comparison: a result, or the reasons it cannot run."""

    schedule: str
    result: SimResult | None
    violations: tuple[str, ...]


def compare(
    ranks: int,
    microbatches: int,
    times: OpTimes | None = None,
    virtual_stages: int = 2,
) -> tuple[CompareRow, ...]:
    """Every schedule on the same devices and micro-batches, sorted by makespan.

    Here ``times`` are for one 1F1B stage (1/P of the model) so that the rows compare the same
    model on the same devices: a schedule whose chunks are smaller runs them proportionally
    faster (interleaved-1f1b: times / v; dualpipev: times / 2; see `ScheduleSpec.chunk_size`).
    ``virtual_stages`` applies to interleaved-1f1b only. Schedules whose constraints fail come
    last (in registry order) with their violations instead of a result. Raises
    `ConstraintError` naming every schedule too large to simulate, before simulating any: the
    others could take seconds each only to end in that refusal.
    """
    base = times or OpTimes()
    checked = []
    for name, spec in SCHEDULES.items():
        v = virtual_stages if spec.uses_virtual_stages else 1
        checked.append((name, spec, v, check(name, ranks, microbatches, v)))
    large = [
        f"{name}: {why}"
        for name, _, v, problems in checked
        if not problems and (why := too_large(name, ranks, microbatches, v))
    ]
    if large:
        raise ConstraintError(large)
    rows = []
    for name, spec, v, problems in checked:
        if problems:
            rows.append(CompareRow(name, None, problems))
            continue
        c = spec.chunk_size(v)
        scaled = OpTimes(base.forward * c, base.backward * c, base.weight * c, base.overlapped * c)
        rows.append(CompareRow(name, simulate(name, ranks, microbatches, scaled, v), ()))
    order = list(SCHEDULES)
    return tuple(
        sorted(
            rows,
            key=lambda row: (
                row.result is None,
                row.result.makespan if row.result else 0,
                order.index(row.schedule),
            ),
        )
    )
