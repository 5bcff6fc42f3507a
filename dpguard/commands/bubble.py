"""`dpguard bubble`: exact makespan, bubble and memory of one pipeline schedule.

Prints a text summary or JSON (`--format json`), optionally the per-rank timeline as a text
grid (`--timeline`) and as an SVG file (`--svg FILE`). Op times are per stage chunk; F&B
defaults to F + B (no overlap gain). Violated schedule constraints exit 2, one line each.
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpguard.schedules import OpTimes, SimResult

HELP = "simulate one pipeline schedule exactly: makespan, bubble, activations, P2P"


def _time(text: str) -> Fraction:
    try:
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def add_time_arguments(parser: argparse.ArgumentParser) -> None:
    """Op-time options shared with `dpguard compare`."""
    group = parser.add_argument_group("op times (per stage chunk; exact decimals or a/b)")
    group.add_argument("--forward", "-F", type=_time, default=Fraction(1), help="F (default 1)")
    group.add_argument("--backward", "-B", type=_time, default=Fraction(2), help="full B (2)")
    group.add_argument("--weight", "-W", type=_time, default=Fraction(1), help="W of B (1)")
    group.add_argument(
        "--overlapped", "--fb", type=_time, default=None, help="F&B pair (default F+B)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The registry is stdlib-only and cheap to import; it keeps the names in one place.
    from dpguard.schedules import SCHEDULES

    parser.add_argument("--schedule", "-s", required=True, choices=tuple(SCHEDULES))
    parser.add_argument("--ranks", "-p", type=int, required=True, help="devices in the pipeline")
    parser.add_argument(
        "--microbatches", "-m", type=int, required=True, help="M (DualPipe: total, M/2 each way)"
    )
    parser.add_argument(
        "--virtual-stages",
        "-v",
        type=int,
        default=None,
        help="chunks per rank for interleaved-1f1b (default 2; other schedules: 1)",
    )
    add_time_arguments(parser)
    parser.add_argument("--timeline", action="store_true", help="print the per-rank grid")
    parser.add_argument("--svg", metavar="FILE", help="write the timeline as SVG")


def op_times(args: argparse.Namespace) -> OpTimes:
    from dpguard.schedules import OpTimes

    return OpTimes(args.forward, args.backward, args.weight, args.overlapped)


def summary(result: SimResult) -> str:
    from dpguard.schedules import SCHEDULES
    from dpguard.schedules.ops import FB, B, F, I, W
    from dpguard.schedules.render import number

    spec = SCHEDULES[result.schedule]
    cf = result.closed_form
    t = result.times
    join = " ".join
    used = [(F, "F"), (B, "B"), (W, "W"), (I, "I"), (FB, "F&B")]
    lines = [
        f"schedule          {spec.title} ({result.ranks} ranks, {result.stages} stages, "
        f"{result.microbatches} micro-batches"
        + (f", {result.virtual_stages} chunks/rank)" if result.virtual_stages > 1 else ")")
        + f" [{spec.reference}]",
        "op times          "
        + join(f"{name}={number(t.of(kind))}" for kind, name in used if kind in spec.op_kinds)
        + "  (per stage chunk)",
        f"makespan          {number(result.makespan)}",
        f"bubble fraction   {float(result.bubble_fraction):.4%}  (sum idle / (ranks x makespan))",
        f"idle per rank     {join(number(x) for x in result.idle_per_rank)}",
        f"peak activations  {join(str(x) for x in result.peak_activations_per_rank)}",
        f"p2p messages      {result.p2p_messages}",
        f"closed form       {number(cf.value)} = {cf.formula}",
        f"                  {cf.label}",
        "                  "
        + ("exact for these inputs" if cf.exact else f"NOT exact here (exact when {cf.regime})")
        + f" [{cf.source}]",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from dpguard.schedules import SCHEDULES, ConstraintError, check, simulate
    from dpguard.schedules.render import svg_timeline, text_timeline

    v = args.virtual_stages
    if v is None:
        v = 2 if SCHEDULES[args.schedule].uses_virtual_stages else 1
    # Report op-time and schedule violations together, one line each.
    problems = list(check(args.schedule, args.ranks, args.microbatches, v))
    try:
        times = op_times(args)
    except ConstraintError as exc:
        problems += exc.violations
    if problems:
        raise ConstraintError(problems)
    result = simulate(args.schedule, args.ranks, args.microbatches, times, v)
    grid = text_timeline(result) if args.timeline else None
    if args.svg:
        # review's writer: atomic, and only ever a regular file (never through a link)
        from dpguard.reporters.output import write_atomic

        write_atomic(args.svg, svg_timeline(result), "the timeline")
    if args.format == "json":
        data = result.to_dict()
        if grid is not None:
            data["timeline"] = grid
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(summary(result))
        if grid is not None:
            print()
            print(grid, end="")
    return 0
