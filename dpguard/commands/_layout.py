"""Which layout a single-manifest command (memory, perf) describes: the proposal as written, or
the plan's when the manifest proposes none."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpguard.manifest import Manifest
    from dpguard.policy.model import Policies
    from dpguard.sizing import Strategy


def layout_to_size(manifest: Manifest, policies: Policies) -> tuple[Strategy | None, int, str]:
    """The layout and micro-batch size to size: the proposal as written, with the policies'
    schedule when it names none; without a parallelism section, the plan's. (None, 0, why)
    when there is nothing to size."""
    from dpguard import sizing
    from dpguard.planner.plan import make_plan
    from dpguard.policy.engine import evaluate
    from dpguard.policy.facts import manifest_facts

    p, mbs = manifest.parallelism, manifest.training.micro_batch_size
    if p is not None and (p.schedule or p.pipeline == 1):
        s = sizing.proposal(manifest, p.schedule or "none")
        if s is not None:
            return s, mbs, "as proposed"
    outcome = evaluate(policies, manifest, manifest_facts(manifest))
    if p is not None and manifest.microbatches is not None:
        schedule = outcome.facts.get("proposal.schedule") or "none"
        s = sizing.proposal(manifest, schedule)
        assert s is not None
        how = f"as proposed, with the policies' schedule {schedule}"
        if sizing.pipeline_layout(s) is None:  # e.g. DualPipeV with M < 2P: size it as 1F1B
            s = replace(s, schedule="1f1b")
            where = f"P = {p.pipeline}, M = {s.microbatches}"
            how = f"as proposed; {schedule} cannot run at {where}: as 1f1b"
        return s, mbs, how
    plan = make_plan(manifest, outcome, policies)
    if plan.strategy is None or plan.schedule is None:
        return None, 0, "no feasible plan: " + "; ".join(plan.notes)
    s = plan.strategy
    return s, plan.micro_batch_size, "as planned by dpguard: the manifest proposes no parallelism"


def manifest_and_layout(
    args: argparse.Namespace, verb: str
) -> tuple[Manifest, Policies, Strategy | None, str] | None:
    """The manifest `args.file` names (`.dpguard.yaml` defaults applied), with the micro-batch
    size of the layout to describe; the layered policies; that layout (None when there is
    none) and how it was chosen; None, after printing the findings to stderr, when
    the manifest is invalid. `verb` says what the command would have done ("size", "time")."""
    from dpguard.check import check_file
    from dpguard.commands._policies import config_of, load
    from dpguard.reporters.safe import diagnostic

    cfg = config_of(args, args.file)
    policies = load(args.policy, cfg)
    result = check_file(args.file, None, None, cfg.defaults_for(args.file))
    manifest = result.manifest
    if manifest is None:
        for finding in result.findings:
            print(diagnostic(finding.format()), file=sys.stderr)
        print(
            diagnostic(f"{args.file}: the manifest is invalid; nothing to {verb}"), file=sys.stderr
        )
        return None
    s, mbs, how = layout_to_size(manifest, policies)
    manifest = replace(manifest, training=replace(manifest.training, micro_batch_size=mbs or 1))
    return manifest, policies, s, how
