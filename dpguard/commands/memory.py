"""`dpguard memory MANIFEST`: per-rank memory of the proposed (or planned) layout.

Every pipeline rank's weights, gradients, optimizer states, DualPipe's second copy,
activations with their in-flight count, other (logits, buffers, runtime), the central estimate
with its error band, the usable memory and the verdict. The JSON keys are a contract
(docs/memory.md). Exit 1 when the verdict is `oom` (even the low bound does not fit) or the
manifest is invalid, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from dpguard.commands._layout import manifest_and_layout
from dpguard.commands._policies import add_output_option, add_policy_option

if TYPE_CHECKING:
    from dpguard.manifest import Manifest
    from dpguard.memory import MemoryEstimate
    from dpguard.policy.model import Policies
    from dpguard.sizing import Strategy

HELP = "per-rank memory breakdown (states, activations, error band, verdict) of a manifest"
# Text output lists every rank up to this depth; deeper pipelines show first, worst and last.
_ALL_RANKS_UP_TO = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="MANIFEST", help="the training manifest")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="default: text")
    add_policy_option(parser)
    add_output_option(parser, "the breakdown")


def report(
    manifest: Manifest, s: Strategy, estimate: MemoryEstimate, policies: Policies
) -> dict[str, Any]:
    from dpguard import sizing

    usable = sizing.usable_bytes(manifest, policies.settings)
    worst = estimate.worst
    return {
        "usable_gib": round(usable / sizing.GIB, 2),
        "worst_rank": worst.rank,
        "ranks": [r.gib() for r in estimate.ranks],
        "verdict": sizing.verdict(manifest, estimate, policies.settings),
        "strategy": {
            "schedule": s.schedule,
            "tensor": s.tensor,
            "pipeline": s.pipeline,
            "expert": s.expert,
            "expert_tensor": sizing.etp(manifest, s) if manifest.model.is_moe else 1,
            "context": s.context,
            "data_parallel": sizing.data_parallel(manifest, s),
            "microbatches": s.microbatches,
            "micro_batch_size": manifest.training.micro_batch_size,
        },
        "assumptions": list(estimate.assumptions),
    }


def band(r: dict[str, Any]) -> str:
    return f"{r['low_gib']:.1f}-{r['high_gib']:.1f}"


def spans(numbers: list[int]) -> str:
    """Sorted integers as runs: [1, 2, 3, 5, 7, 8] -> "1-3, 5, 7-8"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def _text(path: str, data: dict[str, Any], how: str, remedies: list[str]) -> str:
    s = data["strategy"]
    ranks = data["ranks"]
    shown, hidden = ranks, []
    if len(ranks) > _ALL_RANKS_UP_TO:
        keep = {0, data["worst_rank"], len(ranks) - 1}
        shown = [r for r in ranks if r["rank"] in keep]
        hidden = [r["rank"] for r in ranks if r["rank"] not in keep]
    head = (
        f"{path}: {s['schedule']}, TP {s['tensor']} x PP {s['pipeline']} x CP {s['context']} x "
        f"DP {s['data_parallel']}, EP {s['expert']}"
        + (f" (ETP {s['expert_tensor']})" if s["expert"] > 1 else "")
        + f", M {s['microbatches']}, micro-batch "
        f"{s['micro_batch_size']} ({how})"
    )
    cols = ("rank", "weights", "grads", "optim", "replica", "activ", "other", "total", "band")
    lines = [
        head,
        "",
        "{:>5}{:>9}{:>8}{:>8}{:>9}{:>9}{:>7}{:>8}  {:<13}{}".format(*cols, "in flight"),
    ]
    for r in shown:
        mark = "*" if r["rank"] == data["worst_rank"] else " "
        lines.append(
            f"{r['rank']:>4}{mark}{r['weights_gib']:>9.1f}{r['gradients_gib']:>8.1f}"
            f"{r['optimizer_gib']:>8.1f}{r['replica_gib']:>9.1f}{r['activations_gib']:>9.1f}"
            f"{r['other_gib']:>7.1f}{r['total_gib']:>8.1f}  "
            f"{band(r):<13}{r['inflight_microbatches']}"
        )
    if hidden:  # said, so that a reader never takes the rows shown for the whole pipeline
        lines.append(
            f"ranks {spans(hidden)} of {len(ranks)} not shown: the table keeps the first, "
            "the worst (*) and the last; --format json lists all"
        )
    lines += [
        "",
        f"GiB per GPU; * worst rank. Usable: {data['usable_gib']:.1f} GiB. "
        f"Verdict: {data['verdict']}",
    ]
    lines += [f"  if {r}" for r in remedies]
    lines += ["assumptions:"] + [f"  - {a}" for a in data["assumptions"]]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from dpguard import sizing
    from dpguard.exitcodes import ExitCode
    from dpguard.reporters.output import deliver

    loaded = manifest_and_layout(args, "size")
    if loaded is None:
        return ExitCode.FAILED
    manifest, policies, s, how = loaded
    estimate = sizing.stage_memory(manifest, s, policies.settings, span=True) if s else None
    if s is None or estimate is None:
        print(f"{args.file}: nothing to size: {how if s is None else 'the schedule cannot run'}")
        return ExitCode.FAILED
    data = report(manifest, s, estimate, policies)
    if args.format == "json":
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    else:
        remedies = []
        if data["verdict"] != "fits":
            remedies = [
                f"{change}: {gib:.1f} GiB"
                for change, gib in sizing.remedies(manifest, s, policies.settings)
            ]
        text = _text(args.file, data, how, remedies)
    deliver(text, args.output, "the breakdown")
    return ExitCode.FAILED if data["verdict"] == "oom" else ExitCode.OK
