"""`dpguard compare`: every pipeline schedule on the same devices, sorted by makespan.

Op times are for one 1F1B stage (1/P of the model). Schedules with smaller chunks run them
proportionally faster (interleaved-1f1b: times / v; dualpipev: times / 2) so every row models
the same model on the same devices. Memory is per device relative to 1F1B: parameters as model
copies, activations in units of one 1F1B stage's activation for one micro-batch. Schedules
whose constraints fail are listed with the reason instead of numbers; that is not an error.
A valid schedule too large to simulate refuses the whole comparison (exit 2), before any
schedule is simulated.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from dpguard.commands.bubble import add_time_arguments, op_times

if TYPE_CHECKING:
    from dpguard.schedules import CompareRow, OpTimes

HELP = "compare every pipeline schedule side by side (makespan, bubble, memory, P2P)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ranks", "-p", type=int, required=True, help="devices in the pipeline")
    parser.add_argument(
        "--microbatches", "-m", type=int, required=True, help="M (DualPipe: total, M/2 each way)"
    )
    parser.add_argument(
        "--virtual-stages", "-v", type=int, default=2, help="chunks per rank, interleaved-1f1b (2)"
    )
    add_time_arguments(parser)


def _row_dict(row: CompareRow) -> dict[str, Any]:
    if row.result is None:
        return {"schedule": row.schedule, "valid": False, "violations": list(row.violations)}
    return {"valid": True, "violations": [], **row.result.to_dict()}


def table(rows: tuple[CompareRow, ...], ranks: int, microbatches: int, times: OpTimes) -> str:
    from dpguard.schedules.render import number

    head = (
        f"{ranks} ranks, {microbatches} micro-batches; op times per 1F1B stage: "
        f"F={number(times.forward)} B={number(times.backward)} W={number(times.weight)} "
        f"F&B={number(times.overlapped)} (smaller chunks run proportionally faster)"
    )
    cols = ("schedule", "makespan", "bubble", "params/dev", "activations/dev", "p2p", "stages")
    lines = [head, "", "{:<18}{:>12}{:>9}{:>12}{:>17}{:>9}{:>8}".format(*cols)]
    for row in rows:
        r = row.result
        if r is None:
            lines.append(f"{row.schedule:<18}not valid here: {row.violations[0]}")
            lines += [f"{'':<18}                {v}" for v in row.violations[1:]]
            continue
        lines.append(
            f"{row.schedule:<18}{number(r.makespan):>12}{float(r.bubble_fraction):>9.2%}"
            f"{number(r.param_copies) + 'x':>12}{number(r.activation_memory):>17}"
            f"{r.p2p_messages:>9}{r.stages:>8}"
        )
    lines += [
        "",
        "params/dev: model copies per device relative to 1F1B; activations/dev: peak held "
        "activations x chunk size, in 1F1B-stage units; bubble = sum idle / (ranks x makespan)",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from dpguard.schedules import ConstraintError, compare

    problems = []
    for what, value in (("ranks", args.ranks), ("micro-batches", args.microbatches)):
        if value < 1:
            problems.append(f"{what} must be an integer >= 1 (got {value})")
    try:
        times = op_times(args)
    except ConstraintError as exc:
        problems += exc.violations
    if problems:
        raise ConstraintError(problems)
    rows = compare(args.ranks, args.microbatches, times, args.virtual_stages)
    if args.format == "json":
        data = {
            "ranks": args.ranks,
            "microbatches": args.microbatches,
            "virtual_stages": args.virtual_stages,
            "op_times_per_1f1b_stage": {k: float(v) for k, v in times.as_dict().items()},
            "schedules": [_row_dict(row) for row in rows],
        }
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(table(rows, args.ranks, args.microbatches, times))
    return 0
