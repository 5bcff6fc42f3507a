"""Where the planner lands against the layouts teams published: every non-sweep calibration
configuration (tests/data/perf/manifests) replanned without its `parallelism` section and its
micro-batch size, the plan's tensor size and pipeline depth beside the published ones.

A ratchet, not the bar: the issue asks that the planner land where experts land, and no
calibrated sweep yet trades tensor against pipeline size (docs/performance.md), so the counts
below are what the planner reaches today; a change that lowers them fails here and must say
why. docs/planner.md prints the table (DPGUARD_UPDATE_GOLDEN=1 rewrites it).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import NamedTuple

import yaml

from dpguard.check import check_file
from dpguard.policy.load import load_policies

DATA = Path(__file__).parent / "data" / "perf" / "manifests"
DOC = Path(__file__).parent.parent / "docs" / "planner.md"
BEGIN, END = "<!-- fidelity table: begin -->", "<!-- fidelity table: end -->"
UPDATE = os.environ.get("DPGUARD_UPDATE_GOLDEN") == "1"

# What the planner reaches today on the 53 configurations as written, overlap flags included
# (tensor size equal, pipeline depth within 2x, both); the previous, bubble-only planner, which
# reads no overlap, reached 32 / 46 / 29; the step-time planner before layouts without a
# pipeline competed (the MPT rows; Korthikanti's 22B and the 16B/32B weak-scaling runs at TP
# alone), 26 / 44 / 23. One row went the other way: NeMo's Llama 2 13B on 16 GPUs, published
# TP 1 PP 4, is planned TP 4 without a pipeline (depth within 2x 45 -> 44 with that change).
# Counting dropout as Megatron's fused bias-dropout-add (the step-time model had priced TP 8
# without SP 5-16 % slow) brought Narayanan's 145.6B to its published TP 8 x PP 8: 33 / 44 / 30.
# Unfused attention priced by its score traffic put Narayanan's 174.6B PTD-P on 384 GPUs within
# 2x of its depth (45), and NeMo AutoModel's Llama 3 70B, written with the full recompute its
# run needs to fit, is planned as published, FSDP alone: 34 / 45 / 31. Narayanan's Table 2
# PTD-P runs written as they ran, without a distributed optimizer (Megatron-LM 2021, like the
# Table 1 runs; they had been written at ZeRO-1), need their published depth to hold the model
# states: 529.6B at TP 8 x PP 35 on all three GPU counts, 174.6B within 2x: 35 / 51 / 35.
# NeMo 24.07's runs written with the bf16 gradient buffer their launcher configs set
# (optim.grad_sync_dtype: bf16) leave room for NeMo's Llama 2 7B at its published TP 1:
# 36 / 51 / 36.
TENSOR_MATCHES, DEPTH_WITHIN_2X, BOTH = 36, 51, 36


class Replanned(NamedTuple):
    name: str
    published: tuple[int, int]  # (tensor, pipeline)
    planned: tuple[int, int] | None


def configurations() -> list[Path]:
    """The configurations one team chose as its layout: sweep members compare schedules or
    recompute settings at a fixed layout (the ZB, Korthikanti full-recompute and ZeRO-3 rows),
    and the README's strong-scaling pair runs a layout it does not publish (mlm-strong-*)."""
    return [
        p
        for p in sorted(DATA.glob("*.yaml"))
        if not p.stem.startswith(("zb-", "mlm-strong-"))
        and "zero3" not in p.stem
        and not p.stem.endswith("-full")
    ]


@cache
def replanned(tmp: str) -> tuple[Replanned, ...]:
    policies = load_policies()
    out = []
    for path in configurations():
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        layout = doc.pop("parallelism")
        doc["training"].pop("micro_batch_size", None)
        bare = Path(tmp) / path.name
        bare.write_text(yaml.safe_dump(doc), encoding="utf-8")
        plan = check_file(str(bare), None, policies, {}).plan
        assert plan is not None, path.name
        planned = (plan.tensor, plan.pipeline) if plan.status != "infeasible" else None
        if plan.status in ("no-pipeline", "refused"):
            planned = (plan.tensor, 1)
        published = (layout.get("tensor", 1), layout.get("pipeline", 1))
        out.append(Replanned(path.stem, published, planned))
    return tuple(out)


def counts(rows: tuple[Replanned, ...]) -> tuple[int, int, int]:
    tensor = depth = both = 0
    for r in rows:
        if r.planned is None:
            continue
        t_ok = r.planned[0] == r.published[0]
        p_ok = max(r.planned[1], r.published[1]) <= 2 * min(r.planned[1], r.published[1])
        tensor, depth, both = tensor + t_ok, depth + p_ok, both + (t_ok and p_ok)
    return tensor, depth, both


def test_the_planner_lands_at_least_where_it_did(tmp_path: Path) -> None:
    rows = replanned(str(tmp_path))
    assert len(rows) == 53
    tensor, depth, both = counts(rows)
    assert (tensor, depth, both) >= (TENSOR_MATCHES, DEPTH_WITHIN_2X, BOTH), (tensor, depth, both)
    assert tensor >= TENSOR_MATCHES and depth >= DEPTH_WITHIN_2X and both >= BOTH


def test_the_documented_fidelity_table_is_current(tmp_path: Path) -> None:
    rows = replanned(str(tmp_path))
    lines = ["| configuration | published T x P | planned T x P |", "|---|---|---|"]
    for r in rows:
        planned = f"{r.planned[0]} x {r.planned[1]}" if r.planned else "infeasible"
        lines.append(f"| {r.name} | {r.published[0]} x {r.published[1]} | {planned} |")
    tensor, depth, both = counts(rows)
    lines += [
        "",
        f"{len(rows)} configurations: tensor size as published {tensor}, pipeline depth within "
        f"2x of the published {depth}, both {both}.",
    ]
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    current = f"{head}{BEGIN}\n" + "\n".join(lines) + f"\n{END}{tail}"
    if UPDATE:
        DOC.write_text(current, encoding="utf-8")
        text = current
    assert text == current, "DPGUARD_UPDATE_GOLDEN=1 pytest tests/test_planner_fidelity.py"


# The published MoE runs of both calibration corpora: 10 of 13 replanned without their layout
# keep the expert-parallel size they ran. Those that do not: AutoModel's DeepSeek-V3 on 256 GPUs
# (EP 64 at PP 4; planned EP 32 at PP 8), Megatron-Bridge's on 256 (EP 32 at PP 8; planned EP 64
# at PP 2) and Qwen3-30B-A3B on 16 (EP 16 without a pipeline; planned EP 8 at PP 2). The
# planner tries the largest EP its depth allows, as every one of these runs used, and the largest
# inside the scale-up domain; the step-time model keeps the largest in all 13 (on their 400 Gb/s
# or faster networks). A change to that choice must not lower this count.
EXPERT_MATCHES = 10
MEMORY_DATA = Path(__file__).parent / "data" / "calibration"


def test_the_planned_expert_size_is_the_published_one(tmp_path: Path) -> None:
    policies = load_policies()
    moe = [
        p
        for p in (*sorted(DATA.glob("*.yaml")), *sorted(MEMORY_DATA.glob("*.yaml")))
        if "architecture: moe" in p.read_text(encoding="utf-8")
    ]
    matches = 0
    for path in moe:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        published = doc.pop("parallelism")["expert"]
        doc["training"].pop("micro_batch_size", None)
        bare = tmp_path / path.name
        bare.write_text(yaml.safe_dump(doc), encoding="utf-8")
        plan = check_file(str(bare), None, policies, {}).plan
        assert plan is not None and plan.status != "infeasible", path.name
        matches += plan.expert == published
    assert len(moe) == 13
    assert matches >= EXPERT_MATCHES, matches
