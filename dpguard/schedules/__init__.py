"""Schedule calculator: exact discrete-event simulation of pipeline-parallel schedules.

Definitions (fixed; see docs/schedules.md and /work/shared/docs/schedules.md section 1):

* ``ranks`` (P, or N for DualPipeV) = devices in one pipeline.
* GPipe, 1F1B, ZB1P: P stages on P ranks, stage s on rank s.
* interleaved-1f1b: P*v stages, stage s on rank s mod P (v = ``virtual_stages`` chunks/rank).
* DualPipe: P stages on P ranks in two directions (two model copies); ``microbatches`` M is
  the TOTAL, M/2 per direction. Direction 0 runs stage s on rank s, direction 1 on rank P-1-s.
* DualPipeV: 2N stages on N ranks, stage s < N on rank s, stage s >= N on rank 2N-1-s; all M
  micro-batches go through all 2N stages.
* Op times are per stage chunk: F forward, B full backward, W weight-gradient half, I = B - W
  input-gradient half, F&B one overlapped forward + full backward pair.
* makespan = end of the last op (all ranks start at 0, communication is free);
  idle(r) = makespan - busy(r); bubble_fraction = sum idle / (ranks x makespan).
* peak activations = most (stage, micro-batch) activations a rank holds at once, from F until
  its B or I, counted on the simulated timeline (an overlapped pair allocates first).
* P2P messages = activations and input gradients that cross devices.

Everything is exact (`fractions.Fraction`); floats appear only in `SimResult.to_dict`.
"""

from __future__ import annotations

from dpguard.schedules.api import CompareRow, SimResult, compare, simulate
from dpguard.schedules.closed_forms import ClosedForm
from dpguard.schedules.ops import ConstraintError, Op, OpTimes, OrderError
from dpguard.schedules.registry import SCHEDULES, ScheduleSpec, check

__all__ = [
    "SCHEDULES",
    "ClosedForm",
    "CompareRow",
    "ConstraintError",
    "Op",
    "OpTimes",
    "OrderError",
    "ScheduleSpec",
    "SimResult",
    "check",
    "compare",
    "simulate",
]
