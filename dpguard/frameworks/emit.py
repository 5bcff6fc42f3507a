"""`plan --emit FORMAT`: the interface every framework that writes its own config implements,
and the registry that finds it by format.

A framework module that emits (megatron.py, nemo.py, flagscale.py, torchtitan.py: the profiles
whose `emit` names a format, policies/frameworks) defines, beside its reader::

    def emit_config(plan: Plan, notes: Sequence[str] = ()) -> str

the plan in that framework's own spelling, as `plan --emit` prints it: a comment header saying
what it is, with `notes`, then the keys. It builds the text with `framed`, which writes the
header, and only comments for an infeasible plan, the same for every framework. Frameworks
without an emitter (`emit: null`) define no `emit_config`.

Only what the plan decides or depends on is written: the parallel degrees, the schedule, the
micro- and global batch, and the training settings the memory verdict assumed (sequence
parallelism, recompute, distributed optimizer, untied embeddings). The model shape, data and
everything else stay as they are in the user's config. Each emitted text is spelled as the
framework's reader reads it (tests/test_emit.py reads every emitted block back and compares
degrees, batch and schedule).

This module imports no framework and no planner when loaded: the readers import `framed` from
it, and the review path that imports the readers stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpguard.planner.plan import Plan

EMIT_FORMATS = ("megatron", "nemo", "torchtitan", "flagscale")

# One framework's emitter: (plan, notes) -> the text `plan --emit` prints
EmitConfig = Callable[["Plan", Sequence[str]], str]


def schedules(fmt: str) -> tuple[str, ...]:
    """The pipeline schedules the framework `fmt` runs (its profile, policies/frameworks)."""
    from dpguard.frameworks import profiles

    return profiles.profile(fmt).schedules


def emitter(fmt: str) -> EmitConfig:
    """The `emit_config` of the framework module that writes `fmt` (dpguard/frameworks/FMT.py),
    imported when first asked for."""
    if fmt not in EMIT_FORMATS:
        raise ValueError(f"no emitter for {fmt!r} (known: {', '.join(EMIT_FORMATS)})")
    emit_config: EmitConfig = importlib.import_module(f"dpguard.frameworks.{fmt}").emit_config
    return emit_config


def emit(plan: Plan, fmt: str, notes: Sequence[str] = ()) -> str:
    """The plan in `fmt`'s own spelling, with a comment header saying what it is and `notes`;
    only comments for an infeasible plan."""
    return emitter(fmt)(plan, notes)


def framed(
    plan: Plan,
    notes: Sequence[str],
    title: str,
    body: Callable[[Plan], tuple[list[str], list[str]]],
) -> str:
    """An emitted config: the header naming the plan, `title` (a comment line saying what the
    keys are and what they replace), `notes` and the notes of `body`, then the lines of `body`
    (a function of a feasible plan to (lines, notes on what the framework spells
    differently)). An infeasible plan is only comments: the plan's reasons."""
    name = plan.manifest.name
    if plan.strategy is None:
        lines = [f"# dpguard plan for {name}: no feasible plan"]
        lines += [f"#   {note}" for note in (*notes, *plan.notes)]
        return "\n".join(lines) + "\n"
    s = plan.strategy
    what = (
        f"{plan.schedule}, T={s.tensor} P={s.pipeline} M={s.microbatches} EP={s.expert}"
        if plan.schedule not in (None, "none")
        else f"no pipeline, tensor {s.tensor} x data {plan.data_parallel}"
    )
    lines, spelled = body(plan)
    header = [f"# dpguard plan for {name}: {what}", title]
    header += [f"# note: {note}" for note in (*notes, *spelled)]
    return "\n".join(header + lines) + "\n"
