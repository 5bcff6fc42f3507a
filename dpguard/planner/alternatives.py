"""The plan's alternatives: the fastest layout of every other schedule the job's framework runs,
and of ZeRO-3 data parallelism without a pipeline, each priced by the step-time model.

The decision table stays the policy: the plan shows the table's schedule. These are what the
model would pick instead, so that the page can say so, with both numbers, when the model
disagrees with the table by more than the policy's margin (`planner.model_disagreement_margin`),
and so that "saved" figures compare with the best 1F1B layout rather than a strawman. Computed
only for the outputs that show them (`plan`); `review`'s findings do not need them.
"""

from __future__ import annotations

from dataclasses import replace

from dpguard import perf
from dpguard.frameworks import profiles
from dpguard.manifest import Manifest
from dpguard.planner.plan import Plan, blocked_by
from dpguard.planner.search import SearchResult, search
from dpguard.policy.facts import SCHEDULES


def with_alternatives(plan: Plan) -> Plan:
    """`plan` with `alternatives` filled, fastest first (at most one per schedule). A layout the
    policies would reject or refuse as a proposal (RF002 refuses DualPipe without a custom
    all-to-all kernel) is no alternative: the page must not point the team at it."""
    if plan.status != "planned" or plan.performance is None or plan.strategy is None:
        return plan
    m, settings = plan.manifest, plan.settings
    runs = profiles.profile(m.runtime.profile).schedules if m.runtime.stated else SCHEDULES
    found: list[perf.Prediction] = []

    def add(manifest: Manifest, result: SearchResult) -> None:
        c = result.candidate
        if c is None or (
            plan.policies is not None
            and blocked_by(plan.policies, manifest, c.strategy, c.micro_batch_size)
        ):
            return
        p = perf.predicted(manifest, c.strategy, c.micro_batch_size)
        if p is not None:
            found.append(p)

    for schedule in runs:
        if schedule == plan.schedule or schedule == "gpipe":
            continue  # GPipe is 1F1B's bubble at more memory: never the faster choice
        result = search(m, (schedule,), settings, True)
        if result.candidate is not None and result.candidate.strategy.schedule == schedule:
            add(m, result)
    if plan.schedule != "none" and m.training.zero_stage < 3:
        # ZeRO-3 / FSDP shards the model states over the data-parallel ranks: a model that does
        # not fit one GPU as written may fit without any pipeline
        sharded = replace(m, training=replace(m.training, zero_stage=3))
        add(sharded, search(sharded, (), settings, False))
    found.sort(key=lambda p: p.step_time_s)
    return replace(plan, alternatives=tuple(found))


def disagreement(plan: Plan) -> str | None:
    """The page's sentence when the model's fastest alternative beats the table's plan by more
    than the policy's margin, with both numbers; None otherwise."""
    if plan.status != "planned" or plan.performance is None or not plan.alternatives:
        return None
    best = plan.alternatives[0]
    margin = float(plan.settings["planner"].get("model_disagreement_margin", 0.05))
    if best.gpu_hours > plan.performance.gpu_hours * (1 - margin):
        return None
    lay = best.layout
    what = (
        f"ZeRO-3 data parallelism without a pipeline (TP {lay.tensor}, DP {lay.data})"
        if lay.schedule == "none"
        else f"{lay.schedule} at TP {lay.tensor}, PP {lay.pipeline}, M {lay.microbatches}"
    )
    ours = plan.performance
    saving = 1 - best.gpu_hours / ours.gpu_hours
    return (
        f"the step-time model expects {what} to need {best.gpu_hours:,.0f} GPU-hours "
        f"({best.tokens_per_s_per_gpu:,.0f} tokens/s per GPU) against {ours.gpu_hours:,.0f} "
        f"({ours.tokens_per_s_per_gpu:,.0f}) for the decision table's {plan.schedule}: "
        f"{saving:.0%} fewer, beyond the {margin:.0%} margin; the plan keeps the table's choice "
        "(policies decide; change the decision table to follow the model)"
    )
