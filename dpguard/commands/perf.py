"""`dpguard perf MANIFEST`: the step-time model's prediction for the proposed (or planned) layout.

Step time, tokens/s per GPU with its band, model TFLOP/s per GPU, MFU, the bubble, GPU-hours for
the token budget and where the step's seconds go (docs/performance.md). The JSON keys are a
contract. Exit 1 when the manifest is invalid or there is nothing to time, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from dpguard.commands._layout import manifest_and_layout
from dpguard.commands._policies import add_output_option, add_policy_option

if TYPE_CHECKING:
    from dpguard.perf import Prediction

HELP = "predicted step time, tokens/s, MFU and GPU-hours of a manifest's layout"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="MANIFEST", help="the training manifest")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="default: text")
    add_policy_option(parser)
    add_output_option(parser, "the prediction")


def _text(path: str, p: Prediction, how: str) -> str:
    lay = p.layout
    lines = [
        f"{path}: {lay.schedule}, TP {lay.tensor} x PP {lay.pipeline} (v {lay.virtual_stages}) "
        f"x CP {lay.context} x DP {lay.data}, EP {lay.expert} (ETP {lay.expert_tensor}), "
        f"M {lay.microbatches}, micro-batch {lay.micro_batch_size} ({how})",
        "",
        f"step time        {p.step_time_s:.3g} s",
        f"tokens/s per GPU {p.tokens_per_s_per_gpu:,.0f} (band {p.low:,.0f}-{p.high:,.0f})",
        f"model TFLOP/s    {p.model_tflops_per_gpu:.0f} per GPU, MFU {p.mfu:.1%}",
        f"bubble           {p.bubble:.1%} of the step",
        f"GPU-hours        {p.gpu_hours:,.0f} for the token budget",
        "",
        "where the slowest rank's step goes:",
    ]
    for cause, seconds in p.breakdown_s.items():
        lines.append(f"  {cause:<10}{seconds:>10.3g} s  {seconds / p.step_time_s:>6.1%}")
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from dpguard.exitcodes import ExitCode
    from dpguard.perf import MissingHardware, layout_of, predict
    from dpguard.reporters.output import deliver

    loaded = manifest_and_layout(args, "time")
    if loaded is None:
        return ExitCode.FAILED
    manifest, _policies, s, how = loaded
    if s is None:
        print(f"{args.file}: nothing to time: {how}")
        return ExitCode.FAILED
    try:
        prediction = predict(manifest, layout_of(manifest, s, manifest.training.micro_batch_size))
    except MissingHardware as exc:
        file, line, col = manifest.locate("cluster.accelerator")
        print(f"{file}:{line}:{col}: error: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    if args.format == "json":
        text = json.dumps(prediction.as_dict(), indent=2, sort_keys=True) + "\n"
    else:
        text = _text(args.file, prediction, how)
    deliver(text, args.output, "the prediction")
    return ExitCode.OK
