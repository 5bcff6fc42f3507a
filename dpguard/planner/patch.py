"""The plan as a manifest change (`dpguard plan --format yaml`): the `parallelism:` section and
the `training:` keys a manifest needs to run the plan, and the warnings that manifest will still
draw, each with the reason the plan keeps it.

The contract, which tests/test_plan_patch.py checks on the examples, the test corpus and
generated manifests: replace the manifest's `parallelism:` section with the patch's and set its
`training:` keys (a null removes the key); `dpguard review` of the result has no error and no
warning other than the ones listed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import yaml

from dpguard import sizing
from dpguard.planner.plan import Plan, untied
from dpguard.schedules import SCHEDULES


class KeptWarning(NamedTuple):
    code: str
    message: str
    reason: str


def manifest_patch(plan: Plan) -> dict[str, Any] | None:
    """{"parallelism": the whole section, "training": keys to set (None: remove)}, or None for
    an infeasible plan."""
    s = plan.strategy
    if s is None:
        return None
    pipelined = plan.schedule not in (None, "none")
    parallelism: dict[str, Any] = {
        "tensor": s.tensor,
        "pipeline": s.pipeline,
        "virtual_stages": SCHEDULES[s.schedule].virtual(s.virtual_stages) if pipelined else 1,
        "expert": s.expert,
        "context": s.context,
        "microbatches": s.microbatches,
    }
    if s.expert_tensor:  # the plan's own choice, or the manifest's; else the framework's
        parallelism["expert_tensor"] = s.expert_tensor
    if pipelined:
        parallelism["schedule"] = plan.schedule
    if s.account_for_embedding or s.account_for_loss:
        parallelism["account_for_embedding"] = s.account_for_embedding
        parallelism["account_for_loss"] = s.account_for_loss
    training: dict[str, Any] = {"micro_batch_size": plan.micro_batch_size}
    for key, value in plan.training_settings:
        if key == "sequence_parallel":
            training[key] = True if s.tensor > 1 else None  # None: Megatron's default
        else:
            training[key] = list(value) if isinstance(value, tuple) else value
    written = ("training", "recompute_modules") in plan.manifest.source.keys
    if written and training.get("activation_recompute") == "full":
        training["recompute_modules"] = None  # X020: modules only with selective recompute
    patch: dict[str, Any] = {"parallelism": parallelism, "training": training}
    # DualPipe's two copies (HR007), or a value written in its deprecated place under the
    # parallelism section the patch replaces
    moved = ("parallelism", "untie_embeddings") in plan.manifest.source.keys
    if untied(plan.manifest, plan.schedule) and (moved or not plan.manifest.model.untie_embeddings):
        patch["model"] = {"untie_embeddings": True}
    return patch


def _batch_reason(plan: Plan, settings: Mapping[str, Any]) -> str:
    target = settings["planner"]["microbatches_per_rank"]
    lo, hi = target["min"], target["max"]
    per_microbatch = plan.micro_batch_size * plan.data_parallel
    low = math.ceil(lo * plan.pipeline) * per_microbatch
    high = math.floor(hi * plan.pipeline) * per_microbatch
    return (
        f"no layout that fits puts M/P in {lo:g}..{hi:g} with this global batch; at this one "
        f"(P = {plan.pipeline}, DP = {plan.data_parallel}, micro-batch {plan.micro_batch_size}) "
        f"a global batch of {low:,} to {high:,} sequences would"
    )


def kept_warnings(plan: Plan) -> tuple[KeptWarning, ...]:
    """The warnings `review` gives the manifest once the patch is applied: the manifest's own
    (shape and batch, as check.check_file finds them) and the policies' on the plan's own
    layout, each with its reason."""
    settings = plan.settings
    out = [
        KeptWarning(code, message, "about the manifest itself; the plan does not change it")
        for code, _, message in sizing.manifest_warnings(plan.manifest)
    ]
    layers = plan.manifest.model.layers
    for f in plan.plan_warnings:
        if f.code == "ADV001":
            reason = _batch_reason(plan, settings)
        elif f.code == "ADV002":
            reason = (
                f"no pipeline depth that fits splits the {layers} layers evenly over its stages, "
                "also counting the embedding and the loss as layers"
            )
        else:
            reason = "every layout that fits draws it"
        out.append(KeptWarning(f.code, f.message, reason))
    return tuple(out)


def render_yaml(plan: Plan) -> str:
    """The patch as a paste-ready YAML document whose comments say how to apply it and which
    warnings it keeps; only comments for an infeasible plan."""
    patch = manifest_patch(plan)
    name = plan.manifest.name
    if patch is None:
        lines = [f"# dpguard plan for {name}: no feasible plan"]
        lines += [f"#   {note}" for note in plan.notes]
        return "\n".join(lines) + "\n"
    if plan.schedule in (None, "none"):
        what = f"no pipeline, tensor {plan.tensor} x data {plan.data_parallel}"
    else:
        chosen = plan.numbers(plan.schedule)
        bubble = (
            f", bubble {chosen.bubble:.2%}"
            if chosen is not None and chosen.bubble is not None
            else ""
        )
        what = f"{plan.schedule}, T={plan.tensor} P={plan.pipeline} M={plan.microbatches}{bubble}"
    lines = [
        f"# dpguard plan for {name}: {what}",
        "# Replace the manifest's parallelism section with the one below and set the training",
        "# (and model) keys (null: remove the key).",
    ]
    kept = kept_warnings(plan)
    if kept:
        lines.append("# `dpguard review` then still warns, and why:")
        lines += [f"#   {k.code} {k.message}: {k.reason}" for k in kept]
    else:
        lines.append("# `dpguard review` then has no error and no warning.")
    body = yaml.safe_dump(patch, sort_keys=False, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body
