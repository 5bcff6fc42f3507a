"""Operations, op times and the stage layout shared by every schedule generator.

An operation (`Op`) is one unit a device runs: a forward ``F``, a full backward ``B``, the
input-gradient half ``I`` and the weight-gradient half ``W`` of a split backward, or an
overlapped forward-and-backward pair ``FB``. Each names its work item by ``(pipe, stage,
microbatch)``: ``pipe`` is 0 except in DualPipe, where pipe 0 is the forward direction (stages on
ranks 0..P-1) and pipe 1 the reverse one (stages on ranks P-1..0). An ``FB`` carries the forward
part in ``pipe, stage, mb`` and the backward part in ``b_pipe, b_stage, b_mb``; the backward part
of a pair is always a full backward, as in deepseek-ai/DualPipe
(`_forward_backward_compute_chunk` never enables the zero-bubble split).

Times are per stage chunk. ``I = B - W`` (schedules.md section 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import NamedTuple

from dpguard.errors import ScheduleError

F = "F"
B = "B"
I = "I"  # noqa: E741 - the op names are the papers' letters
W = "W"
FB = "FB"

TimeLike = int | float | str | Fraction | Decimal


class ConstraintError(ScheduleError):
    """Invalid schedule parameters or op times; prints one violation per line.

    `dpguard.errors.ScheduleError` joins its violations with "; "; the CLI contract for
    `dpguard bubble` is one line per violation, so this subclass only changes the message.
    """

    def __init__(self, violations: list[str] | tuple[str, ...]) -> None:
        super().__init__(violations)
        self.args = ("\n".join(self.violations),)


class OrderError(ScheduleError):
    """A generated order is malformed (an op twice, on the wrong rank, W after a full B).

    Like `DeadlockError`, this is a bug in a schedule generator, never bad user input.
    """


class Op(NamedTuple):
    kind: str
    pipe: int
    stage: int
    mb: int
    b_pipe: int = -1
    b_stage: int = -1
    b_mb: int = -1


@dataclass(frozen=True)
class Layout:
    """Where each stage runs.

    ``rank_of[pipe][stage]`` is the device; ``chunk_of[pipe][stage]`` is the index of that
    stage among the device's own model chunks (0 for the first chunk it holds), used only for
    labels. ``microbatches_per_pipe`` is M for one pipe (M/2 in DualPipe).
    """

    ranks: int
    stages: int
    pipes: int
    microbatches_per_pipe: int
    rank_of: tuple[tuple[int, ...], ...]
    chunk_of: tuple[tuple[int, ...], ...]

    @cached_property
    def chunks_per_rank(self) -> int:
        return max(c for row in self.chunk_of for c in row) + 1


def to_fraction(value: TimeLike) -> Fraction:
    """Exact value of a time. Floats go through their shortest repr, so 0.1 means 1/10."""
    if isinstance(value, bool):
        raise TypeError("a time cannot be a bool")
    if isinstance(value, float):
        return Fraction(repr(value))
    if isinstance(value, (int, Fraction, Decimal)):
        return Fraction(value)
    return Fraction(str(value).strip())


def _fmt(value: Fraction) -> str:
    return str(value) if value.denominator == 1 else f"{float(value):g}"


def op_time_violations(f: Fraction, b: Fraction, w: Fraction, fb: Fraction) -> list[str]:
    """Every reason the op times are unphysical (schedules.md section 8, pitfall 11)."""
    problems = []
    if f <= 0:
        problems.append(f"forward time F must be > 0 (got {_fmt(f)})")
    if b <= 0:
        problems.append(f"backward time B must be > 0 (got {_fmt(b)})")
    if w < 0:
        problems.append(f"weight-gradient time W must be >= 0 (got {_fmt(w)})")
    if b > 0 and w >= b:
        # I = B - W is the input-gradient half; it has to cost something.
        problems.append(
            f"weight-gradient time W ({_fmt(w)}) must be less than the full backward B "
            f"({_fmt(b)}): the input-gradient time I = B - W must be > 0"
        )
    if f > 0 and b > 0 and not max(f, b) <= fb <= f + b:
        # Overlap cannot make a pair faster than its longer half nor slower than running
        # both halves back to back.
        problems.append(
            f"overlapped time F&B ({_fmt(fb)}) must lie in [max(F, B), F + B] = "
            f"[{_fmt(max(f, b))}, {_fmt(f + b)}]"
        )
    return problems


@dataclass(frozen=True, init=False)
class OpTimes:
    """Per-chunk op times, stored as exact fractions.

    Accepts ints, floats (read through their shortest repr, so 0.1 is 1/10), decimal strings
    such as "2.5" or "1/3", Decimals and Fractions. ``overlapped`` (F&B) defaults to
    ``forward + backward``, i.e. no gain from overlapping. Construction raises
    `ConstraintError` listing every violated rule.
    """

    forward: Fraction
    backward: Fraction
    weight: Fraction
    overlapped: Fraction

    def __init__(
        self,
        forward: TimeLike = 1,
        backward: TimeLike = 2,
        weight: TimeLike = 1,
        overlapped: TimeLike | None = None,
    ) -> None:
        try:
            f, b, w = (to_fraction(x) for x in (forward, backward, weight))
            fb = f + b if overlapped is None else to_fraction(overlapped)
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise ConstraintError([f"op times must be numbers: {exc}"]) from None
        problems = op_time_violations(f, b, w, fb)
        if problems:
            raise ConstraintError(problems)
        object.__setattr__(self, "forward", f)
        object.__setattr__(self, "backward", b)
        object.__setattr__(self, "weight", w)
        object.__setattr__(self, "overlapped", fb)

    @classmethod
    def whole(cls, forward: int, backward: int, weight: int) -> OpTimes:
        """`OpTimes(forward, backward, weight)` for whole numbers (the step-time model's
        microseconds, for every layout it prices): the same times, checked in integers rather
        than through Fractions; anything unphysical goes through the constructor, which says
        why."""
        if not (forward > 0 and 0 <= weight < backward):
            return cls(forward, backward, weight)
        times = object.__new__(cls)
        object.__setattr__(times, "forward", Fraction(forward))
        object.__setattr__(times, "backward", Fraction(backward))
        object.__setattr__(times, "weight", Fraction(weight))
        object.__setattr__(times, "overlapped", Fraction(forward + backward))
        return times

    @property
    def input(self) -> Fraction:
        """I = B - W, the input-gradient half of a split backward."""
        return self.backward - self.weight

    def of(self, kind: str) -> Fraction:
        return {
            F: self.forward,
            B: self.backward,
            I: self.input,
            W: self.weight,
            FB: self.overlapped,
        }[kind]

    def as_dict(self) -> dict[str, Fraction]:
        return {
            "forward": self.forward,
            "backward": self.backward,
            "weight": self.weight,
            "input": self.input,
            "overlapped": self.overlapped,
        }
