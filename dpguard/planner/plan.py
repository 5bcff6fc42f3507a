"""The plan: one frozen value with every number the one-page plan prints and where it came from.

`make_plan` searches and prices the layout (what the policies' facts read: ADV003's GPU-hours,
feasibility); `with_decision` adds the simulations a review's decision line prints,
`with_page` everything the page and its data show. Each is computed once, into a new frozen
value: renderers and reporters only read it.

The planner proposes (search.py), the policies judge (the decision table and refusals have
already chosen the schedule; the plan's own strategy is then evaluated by the same rules),
and the templates render (render.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, NamedTuple

from dpguard import compute, perf, sizing
from dpguard.catalog import load_catalog
from dpguard.findings import Severity
from dpguard.frameworks import profiles
from dpguard.manifest import Manifest, Parallelism
from dpguard.perf import predicted
from dpguard.planner.search import Candidate, search, shown_feasible
from dpguard.policy.engine import Outcome, evaluate
from dpguard.policy.facts import SCHEDULES, manifest_facts
from dpguard.policy.model import Policies
from dpguard.schedules import SCHEDULES as SPECS
from dpguard.schedules import check


@dataclass(frozen=True)
class ScheduleNumbers:
    schedule: str
    bubble: float | None  # exact simulated fraction at the plan's P and M
    gpu_hours: float | None
    makespan_chunks: float | None  # in units of F, the forward of one 1/P stage (op_times)
    violations: tuple[str, ...]  # why the schedule cannot run at this P and M
    virtual_stages: int = 1  # chunks per rank simulated (interleaved 1F1B: at least 2)
    method: str = "simulated"  # or "closed form": beyond the simulator's size, where exact


@dataclass(frozen=True)
class Kernel:
    kernel: str  # "none" for runs without expert parallelism
    requires: str
    source: str


@dataclass(frozen=True)
class Plan:
    manifest: Manifest
    outcome: Outcome  # how the policies judged the manifest as written
    status: str  # planned | no-pipeline | refused | infeasible
    schedule: str | None
    tensor: int
    pipeline: int
    expert: int
    context: int
    data_parallel: int
    microbatches: int
    micro_batch_size: int
    memory: Any  # MemoryEstimate of every pipeline rank, or None
    memory_limit_gb: float
    ideal_gpu_hours: float
    efficiency: float
    op_times: Mapping[str, float]  # seconds per chunk: forward, backward, weight, overlapped
    kernel: Kernel
    rollback_threshold: float | None  # aggregate utilisation %, below which to roll back
    expected_utilization: float | None
    notes: tuple[str, ...]
    training_changes: tuple[str, ...] = ()  # training settings the plan switches (`key: value`)
    training_settings: tuple[tuple[str, Any], ...] = ()  # the same changes as Training fields
    strategy: sizing.Strategy | None = None  # the plan's layout (None: infeasible)
    # the step-time model's prediction for the plan's layout and for the proposal's (None where
    # there is none, or a custom accelerator lacks what the model needs)
    performance: perf.Prediction | None = None
    proposal_performance: perf.Prediction | None = None
    # the fastest layouts of the other schedules the framework runs and of ZeRO-3 without a
    # pipeline, fastest first: filled by `planner.alternatives.with_alternatives` for the pages
    # that show them (`plan`), not for `review`'s findings
    alternatives: tuple[perf.Prediction, ...] = ()
    # the policy's simpler schedule to roll back to (settings.rollback.simpler), if any
    simpler: str | None = None
    # the stated framework whose profile does not run the decision table's schedule
    excluded_by: str | None = None
    # why a plan has no pipeline: "one-gpu" (the whole training state fits one GPU), "sharded"
    # (ZeRO-3 over the data-parallel ranks) or "parallel" (tensor, context or expert
    # parallelism alone), the fastest step; "" with a pipeline or refused
    unpipelined: str = ""
    # the M/P target's micro-batch size and its step time, when the step-time model chose a
    # smaller size (planner.search._smaller_if_faster)
    micro_batch_target: tuple[int, float] | None = None
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    policies: Policies | None = field(default=None, repr=False, compare=False)
    # The schedules simulated at the plan's P and M (`with_numbers`): the decision line reads
    # the plan's and 1F1B's, the page every one (`with_page`)
    simulated: Mapping[str, ScheduleNumbers] = field(
        default_factory=dict, repr=False, compare=False
    )
    # What only the one-page plan and its data show (`with_page`): None until computed, as
    # `review` reports none of it (the policy evaluations alone were a fifth of its cost)
    page: Page | None = field(default=None, repr=False, compare=False)

    def _page(self) -> Page:
        if self.page is None:
            raise LookupError("the plan's page was not computed (planner.plan.with_page)")
        return self.page

    @property
    def plan_findings(self) -> tuple[Any, ...]:
        """The rejects and refusals of the policies on the plan's own layout."""
        return self._page().findings

    @property
    def plan_warnings(self) -> tuple[Any, ...]:
        """The warnings the policies give the plan's own layout."""
        return self._page().warnings

    @property
    def schedule_verdicts(self) -> Mapping[str, tuple[str, ...]]:
        """Each simulated schedule's rejects and refusals at the plan's layout (ids)."""
        return self._page().verdicts

    @property
    def rollback_performance(self) -> perf.Prediction | None:
        """The simpler schedule's prediction at the plan's layout."""
        return self._page().rollback_performance

    @property
    def rollback_to(self) -> str | None:
        """The schedule to roll back to when the trigger fires (None: no trigger)."""
        if self.rollback_threshold is None or self.rollback_performance is None:
            return None
        return self.simpler

    def numbers(self, schedule: str | None) -> ScheduleNumbers | None:
        """One schedule at the plan's P and M (None where no schedule applies); simulated by
        `with_numbers` before any output reads it."""
        if schedule not in SCHEDULES or self.strategy is None or self.schedule == "none":
            return None
        if schedule not in self.simulated:
            raise LookupError(f"{schedule} was not simulated (planner.plan.with_numbers)")
        return self.simulated[schedule]

    @property
    def candidates(self) -> tuple[ScheduleNumbers, ...]:
        """Every schedule at the plan's P and M (empty without a pipeline)."""
        numbers = (self.numbers(name) for name in SCHEDULES)
        return tuple(n for n in numbers if n is not None)


@dataclass(frozen=True)
class Page:
    """What only the plan page and its data show, computed once by `with_page`."""

    findings: tuple[Any, ...]  # the policies' rejects and refusals on the plan's own layout
    warnings: tuple[Any, ...]  # and their warnings
    # each simulated schedule -> the ids of the rejects and refusals that would judge it at
    # the plan's P, M, T and EP (empty: the policies allow it)
    verdicts: Mapping[str, tuple[str, ...]]
    rollback_performance: perf.Prediction | None  # the simpler schedule, at the plan's layout


def with_numbers(plan: Plan, schedules: tuple[str | None, ...]) -> Plan:
    """`plan` with `schedules` simulated at its P and M (those that apply)."""
    s = plan.strategy
    if s is None or plan.schedule == "none":
        return plan
    wanted = [
        n
        for n in dict.fromkeys(schedules)
        if n is not None and n in SCHEDULES and n not in plan.simulated
    ]
    if not wanted:
        return plan
    done = dict(plan.simulated)
    for name in wanted:
        done[name] = _schedule_numbers(plan.manifest, s, plan.settings, name, plan.micro_batch_size)
    return replace(plan, simulated=done)


def with_decision(plan: Plan) -> Plan:
    """What a review's decision line prints: the plan's schedule and 1F1B simulated."""
    return with_numbers(plan, (plan.schedule, "1f1b"))


def with_page(plan: Plan) -> Plan:
    """`plan` with everything its one-page form and its data show: every schedule simulated
    and judged by the policies at the plan's layout, the policies' verdict on the plan's own
    layout and the rollback target's prediction. Renderers only format what this computed."""
    if plan.page is not None:
        return plan
    plan = with_numbers(plan, tuple(SCHEDULES))
    c, schedule, policies = plan.strategy, plan.schedule, plan.policies
    judged: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ())
    if c is not None and schedule and policies is not None:
        judged = _judge(policies, plan.manifest, c, plan.micro_batch_size, schedule)
    fallback = None
    if plan.simpler is not None and c is not None:
        fallback = predicted(
            plan.manifest, replace(c, schedule=plan.simpler), plan.micro_batch_size
        )
    verdicts = _schedule_verdicts(plan, policies) if policies is not None else {}
    return replace(plan, page=Page(judged[0], judged[1], verdicts, fallback))


def _kernel(manifest: Manifest, tensor: int, expert: int, settings: Mapping[str, Any]) -> Kernel:
    if expert <= 1:
        return Kernel("none", "no expert parallelism: no all-to-all", "")
    acc = load_catalog().lookup(manifest.cluster.accelerator)
    domain = acc.scale_up_domain if acc else manifest.cluster.gpus_per_node
    scope = "intra-node" if expert * tensor <= manifest.cluster.gpus_per_node else "cross-node"
    c = manifest.cluster
    keys = {"vendor": c.vendor, "family": c.family, "intra_node": c.interconnect.intra_node}
    for row in settings["all_to_all_kernels"]:
        match = row["match"]
        if all(keys[k] in match[k] for k in keys if k in match) and (
            match.get("scope", scope) == scope and domain >= match.get("scale_up_domain_min", 0)
        ):
            return Kernel(row["kernel"], row["requires"], row["source"])
    return Kernel("nccl", "the framework's collective all-to-all", "fallback")


def _schedule_numbers(
    manifest: Manifest,
    strategy: sizing.Strategy,
    settings: Mapping[str, Any],
    name: str,
    mbs: int,
) -> ScheduleNumbers:
    # Interleaved 1F1B is compared at v >= 2 (with v = 1 it is plain 1F1B).
    virtual = SPECS[name].virtual(max(2, strategy.virtual_stages))
    s = replace(strategy, schedule=name, virtual_stages=virtual)
    problems = tuple(check(name, s.pipeline, s.microbatches, virtual))
    result = None if problems else sizing.bubble(s, settings)
    if result is None:
        big = sizing.too_large(s)
        why = problems or ((f"{big}, and it has no exact closed form",) if big else ())
        return ScheduleNumbers(name, None, None, None, why or ("not simulated",), virtual)
    timed = predicted(manifest, s, mbs)
    return ScheduleNumbers(
        name,
        result.fraction,
        # the step-time model's GPU-hours; the 6ND estimate only where it cannot price the
        # layout (a custom accelerator without bandwidths)
        timed.gpu_hours if timed else sizing.gpu_hours(manifest, result.fraction, settings),
        # The simulator counts in the schedule's own chunks (1/v of a stage for interleaved,
        # 1/2 for DualPipeV): rescale so every row shares one unit.
        result.makespan * float(SPECS[name].chunk_size(virtual)),
        (),
        virtual,
        result.method,
    )


def _op_seconds(manifest: Manifest, c: Candidate, settings: Mapping[str, Any]) -> dict[str, float]:
    """Per-chunk op times in seconds: forward = 2 x active params of one stage x tokens of one
    micro-batch at peak x efficiency (6ND accounting), the rest by the policy's ratios."""
    s = c.strategy
    ratios = settings["op_time_ratios"]
    active = manifest.model.active_params / (s.pipeline * s.tensor)
    tokens = c.micro_batch_size * manifest.model.seq_len / s.context
    forward = compute.seconds_for(
        compute.forward_flops(active, tokens),
        manifest.cluster.peak_tflops_bf16,
        sizing.efficiency(manifest, settings),
    )
    # F to 9 significant digits and the others as exact decimal multiples of it: the JSON's
    # seconds then keep the policy's ratios exactly, so they can be fed back to `dpguard bubble`
    # (float 3 x F can exceed F + 2 x F by one ulp, which the calculator rejects as F&B > F + B).
    f = Decimal(f"{forward:.9g}")
    return {
        "forward": float(f),
        "backward": float(f * Decimal(repr(float(ratios["backward"])))),
        "weight": float(f * Decimal(repr(float(ratios["weight"])))),
        "overlapped": float(f * Decimal(repr(float(ratios["overlapped"])))),
    }


def _proposal_performance(manifest: Manifest, outcome: Outcome) -> perf.Prediction | None:
    """The proposal as written, with the schedule the policies judged it under."""
    p = manifest.parallelism
    schedule = outcome.facts.get("proposal.schedule")
    if p is None or not isinstance(schedule, str):
        return None
    s = sizing.proposal(manifest, schedule)
    return None if s is None else predicted(manifest, s, manifest.training.micro_batch_size)


def untied(manifest: Manifest, schedule: str | None) -> bool:
    """Embedding and output weights of the planned layout: as the model has them, untied for
    DualPipe (HR007)."""
    return schedule == "dualpipe" or manifest.model.untie_embeddings


def _judge(
    policies: Policies,
    manifest: Manifest,
    s: sizing.Strategy,
    mbs: int,
    schedule: str,
    priced: bool = True,
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Evaluate a strategy with `schedule` by the same rules a proposal gets: (rejects and
    refusals of this schedule, warnings)."""
    proposal = Parallelism(
        tensor=s.tensor,
        pipeline=s.pipeline,
        virtual_stages=SPECS[schedule].virtual(s.virtual_stages) if schedule in SPECS else 1,
        expert=s.expert,
        context=s.context,
        microbatches=s.microbatches,
        schedule=None if schedule == "none" else schedule,
        account_for_embedding=s.account_for_embedding,
        account_for_loss=s.account_for_loss,
    )
    planned = replace(
        manifest,
        model=replace(manifest.model, untie_embeddings=untied(manifest, schedule)),
        parallelism=proposal,
        training=replace(manifest.training, micro_batch_size=mbs),
        data_parallel=sizing.data_parallel(manifest, s),
        microbatches=s.microbatches,
    )
    outcome = evaluate(policies, planned, manifest_facts(planned), priced)
    # A refusal that only redirected the decision (to this plan's schedule) is already in
    # `plan.outcome.redirects`; keep the refusals that refuse this plan's own schedule.
    refusing = {r.id for r in policies.rules if r.kind == "refuse" and r.refuses_schedule(schedule)}
    blocking = tuple(
        f
        for f in outcome.findings
        if f.kind == "reject" or (f.kind == "refuse" and f.code in refusing)
    )
    warnings = tuple(
        f for f in outcome.findings if f.kind == "advise" and f.severity is Severity.WARNING
    )
    return blocking, warnings


class _Order(NamedTuple):
    """The schedules the search tries, in order; the stated framework's profile when it does
    not run the decision table's choice; and the schedules that may replace the one found at
    its own layout (the policy's `planner.fallback_in_place`, when the framework runs none of
    the decision row's schedules and the search runs only its fallback)."""

    schedules: tuple[str, ...]
    excluded_by: str | None
    in_place: tuple[str, ...]


def _schedule_order(
    manifest: Manifest,
    outcome: Outcome,
    schedules: tuple[str, ...] | None,
    settings: Mapping[str, Any],
) -> _Order:
    """The decision's schedule, then its acceptable ones, among those the framework runs (the
    stated framework's profile, or `schedules`), then the policy's `planner.framework_fallback`
    and 1F1B."""
    decided = outcome.schedule
    excluded_by = None
    if schedules is None and manifest.runtime.stated:
        profile = profiles.profile(manifest.runtime.profile)
        schedules = profile.schedules
        if decided and decided != "none" and decided not in schedules:
            excluded_by = profile.name
    if not decided or decided == "none":
        return _Order((), excluded_by, ())
    acceptable = outcome.decision.acceptable if outcome.decision and not outcome.redirects else ()
    order = (decided, *(a for a in acceptable if a not in (decided, "none")))
    if schedules is None:
        return _Order(order, excluded_by, ())
    planner = settings["planner"]
    # 1F1B, which every profile runs, is the last resort after the policy's fallback
    fallback = (*planner.get("framework_fallback", ()), "1f1b")
    in_place: tuple[str, ...] = ()
    if not any(n in schedules for n in order):
        in_place = tuple(n for n in planner.get("fallback_in_place", ()) if n in schedules)
    order = tuple(n for n in dict.fromkeys((*order, *fallback)) if n in schedules)
    return _Order(order, excluded_by, in_place)


def _search_space(
    manifest: Manifest,
    outcome: Outcome,
    schedules: tuple[str, ...] | None,
    settings: Mapping[str, Any],
) -> tuple[bool, _Order, bool]:
    """(whether the model fits one GPU, the schedules to search, whether a pipeline is
    needed)."""
    # The policies computed it for HR004 already (sized_facts); the plan must agree with them.
    fits_one = bool(outcome.facts["derived.model_fits_one_gpu"])
    order = _schedule_order(manifest, outcome, schedules, settings)
    return fits_one, order, bool(order.schedules) and not fits_one


def recommended_schedule(manifest: Manifest, outcome: Outcome, policies: Policies) -> str | None:
    """The schedule `make_plan` recommends (None: nothing is feasible), from the first layout
    that fits rather than the fastest: what a review needs when no output shows the plan."""
    _, order, pipeline_needed = _search_space(manifest, outcome, None, policies.settings)
    found = search(
        manifest, order.schedules, policies.settings, pipeline_needed, True, order.in_place
    )
    return found.candidate.strategy.schedule if found.candidate is not None else None


def feasibility_shown(manifest: Manifest, outcome: Outcome, policies: Policies) -> bool:
    """Whether `make_plan` finds a layout, where one pass of its search shows it cheaply
    (search.shown_feasible); False: not shown."""
    _, order, pipeline_needed = _search_space(manifest, outcome, None, policies.settings)
    return shown_feasible(manifest, order.schedules, policies.settings, pipeline_needed)


def make_plan(
    manifest: Manifest,
    outcome: Outcome,
    policies: Policies,
    schedules: tuple[str, ...] | None = None,
) -> Plan:
    """The plan for a judged manifest, among the schedules its framework runs (the stated
    framework's profile, or `schedules`: `plan --emit`'s)."""
    settings = policies.settings
    refused = outcome.schedule == "none"
    fits_one, order, pipeline_needed = _search_space(manifest, outcome, schedules, settings)
    excluded_by = order.excluded_by
    result = search(manifest, order.schedules, settings, pipeline_needed, False, order.in_place)
    if result.training:  # the plan switched recompute or SP: judge and price it that way
        manifest = replace(manifest, training=replace(manifest.training, **dict(result.training)))
    c = result.candidate
    notes = [*_framework_note(outcome, excluded_by), *result.notes]
    if fits_one and not refused:
        notes.append("the whole training state fits one GPU: data parallelism only, no pipeline")
    notes.extend(_replica_note(manifest, c))
    status = "refused" if refused else ("no-pipeline" if not pipeline_needed else "planned")
    if c is None:
        status = "infeasible"
    elif status == "planned" and c.strategy.schedule == "none":
        status = "no-pipeline"  # a lever, or the fastest layout has none (the notes say)
    unpipelined = ""
    if status == "no-pipeline":
        unpipelined = "one-gpu" if fits_one else result.unpipelined
    # what every plan states, a layout or none
    common: dict[str, Any] = {
        "manifest": manifest,
        "outcome": outcome,
        "status": status,
        "memory_limit_gb": sizing.usable_bytes(manifest, settings) / sizing.GIB,
        "ideal_gpu_hours": sizing.ideal_gpu_hours(manifest, settings),
        "efficiency": sizing.efficiency(manifest, settings),
        "notes": tuple(notes),
        "excluded_by": excluded_by,
        "proposal_performance": _proposal_performance(manifest, outcome),
        "settings": settings,
        "policies": policies,
    }
    if c is None:  # the notes say why and what would make a layout fit
        return Plan(
            **common,
            schedule=None,
            tensor=0,
            pipeline=0,
            expert=0,
            context=0,
            data_parallel=0,
            microbatches=0,
            micro_batch_size=0,
            memory=None,
            op_times={},
            kernel=Kernel("none", "", ""),
            rollback_threshold=None,
            expected_utilization=None,
        )
    s, schedule = c.strategy, c.strategy.schedule
    performance = predicted(manifest, s, c.micro_batch_size)
    threshold = expected = None
    if performance is not None and schedule in SCHEDULES:
        chosen = _schedule_numbers(manifest, s, settings, schedule, c.micro_batch_size)
        if chosen.bubble is not None:
            # The user's metric, aggregate GPU utilisation, read as model-FLOPs utilisation from
            # the logged step time (docs/planner.md "Rollback trigger"): the plan expects the
            # model's MFU; below the low end of its calibrated band its premise does not hold.
            expected = 100 * performance.mfu
            threshold = expected * performance.low / performance.tokens_per_s_per_gpu
    return Plan(
        **common,
        schedule=schedule,
        tensor=s.tensor,
        pipeline=s.pipeline,
        expert=s.expert,
        context=s.context,
        data_parallel=sizing.data_parallel(manifest, s),
        microbatches=s.microbatches,
        micro_batch_size=c.micro_batch_size,
        memory=c.memory,
        op_times=_op_seconds(manifest, c, settings) if schedule != "none" else {},
        kernel=_kernel(manifest, s.tensor, s.expert, settings),
        rollback_threshold=threshold,
        expected_utilization=expected,
        training_changes=result.changes,
        training_settings=result.training,
        strategy=s,
        unpipelined=unpipelined,
        micro_batch_target=c.target_size,
        performance=performance,
        simpler=_simpler(manifest, schedule, settings, schedules),
    )


def _framework_note(outcome: Outcome, excluded_by: str | None) -> list[str]:
    """No advice the team cannot follow: when the stated framework does not run the decision
    table's schedule, the plan (and ADV003's comparison) use the best one it runs, and the
    page says why."""
    if excluded_by is None:
        return []
    profile = profiles.profile(excluded_by)
    return [
        f"the decision table recommends {outcome.schedule}, which {profile.title} does not "
        f"run ({profile.path}: {', '.join(profile.schedules)}); "
        "planned with the best schedule it runs"
    ]


def _replica_note(manifest: Manifest, c: Candidate | None) -> list[str]:
    """Why a multi-node plan has a single data-parallel replica, when it does."""
    cluster = manifest.cluster
    if (
        c is None
        or sizing.data_parallel(manifest, c.strategy) != 1
        or cluster.gpus <= cluster.gpus_per_node
    ):
        return []
    gbs = manifest.training.global_batch_size
    why = (
        f"the global batch of {gbs:,} shares no factor with the {cluster.gpus:,} GPUs (X028)"
        if math.gcd(gbs, cluster.gpus) == 1
        else "no layout with more replicas fits"
    )
    return [
        f"data parallelism is 1: all {cluster.gpus:,} GPUs form one tensor x pipeline "
        f"group, because {why}"
    ]


def _simpler(
    manifest: Manifest,
    schedule: str,
    settings: Mapping[str, Any],
    schedules: tuple[str, ...] | None,
) -> str | None:
    """The schedule to roll back to: the policy's simpler one (`rollback.simpler`), followed
    down its chain to the first the job's framework runs (the stated profile's, or
    `schedules`), so that the trigger never asks for what the team cannot launch."""
    runs: tuple[str, ...] | None = schedules
    if runs is None and manifest.runtime.stated:
        runs = profiles.profile(manifest.runtime.profile).schedules
    chain = settings["rollback"]["simpler"]
    simpler = chain.get(schedule)
    seen = {schedule}
    while simpler is not None and runs is not None and simpler not in runs:
        if simpler in seen:  # a cycle in the policy's chain: no runnable target
            return None
        seen.add(simpler)
        simpler = chain.get(simpler)
    return simpler


def _schedule_verdicts(plan: Plan, policies: Policies) -> dict[str, tuple[str, ...]]:
    """For each schedule the plan compares and could simulate: the ids of the rejects and
    refusals that would judge it at the plan's P, M, T and EP (empty: the policies allow it):
    six policy evaluations, for the plan page and its data only."""
    out: dict[str, tuple[str, ...]] = {}
    for c in plan.candidates:
        if c.bubble is None or plan.strategy is None:
            continue
        s = replace(plan.strategy, schedule=c.schedule, virtual_stages=c.virtual_stages)
        out[c.schedule] = blocked_by(policies, plan.manifest, s, plan.micro_batch_size)
    return out


def blocked_by(
    policies: Policies, manifest: Manifest, s: sizing.Strategy, mbs: int
) -> tuple[str, ...]:
    """The ids of the rejects and refusals that would judge `s` (its schedule, at its P, M, T
    and EP) as a proposal; empty when the policies allow it. Only the ids: no remedies priced
    for messages nobody reads."""
    findings, _ = _judge(policies, manifest, s, mbs, s.schedule, False)
    return tuple(dict.fromkeys(f.code for f in findings))
