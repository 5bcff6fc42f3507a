"""Choose P, M (through the micro-batch size), T and EP for a manifest; the schedule itself comes
from the policies (decision table and refusals), never from here.

The search, in words (docs/planner.md):
1. Refused (RF003-style `none`) or a model that fits one GPU: no pipeline, data parallel (plus
   the smallest tensor parallel size that fits, for a refused plan).
2. Otherwise, for each tensor size inside the scale-up domain (the proposal's, else the
   policy's candidates), the smallest P up to the cap that splits the layers evenly (with the
   embedding and loss counted where that helps, as Llama 3 does) and at which the worst rank
   fits the memory target, with gpus divisible by T x P x C, at least one layer per stage
   and a micro-batch count the schedule accepts; failing an even split, the smallest P that
   fits. Of the tensor sizes, the first with M/P in the target range, else the least
   closed-form bubble. The schedule is the policy's; if no P admits it, the decision row's
   acceptable schedules are tried in order, and the plan says why.
3. The memory target is `planner.memory_margin` of the usable memory, first as written, then
   with the cheap levers (SP, selective recompute of cheap modules); then the usable memory
   itself; full recompute last. The plan notes every lever and a relaxed margin.
4. M = global batch / (micro-batch size x DP). When the manifest leaves micro_batch_size unset,
   the planner picks it so that M/P falls in the policy's target range (else the closest).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from itertools import count, islice
from typing import Any

from dpguard import perf, sizing
from dpguard.manifest import Manifest
from dpguard.memo import PerSettings
from dpguard.memory import MemoryEstimate, Peak, sharded_bytes
from dpguard.memory import TrainingSetup as MemoryTraining
from dpguard.schedules import SCHEDULES, check


@dataclass(frozen=True)
class Candidate:
    """A layout that fits, at its micro-batch size. Its whole memory estimate is built when
    first read: of the layouts that fit, the search keeps one (`_fastest`)."""

    strategy: sizing.Strategy
    micro_batch_size: int
    manifest: Manifest = field(repr=False, compare=False)  # sized as this manifest
    settings: Mapping[str, Any] = field(repr=False, compare=False)
    # the M/P target's micro-batch size and its step time, when the step-time model chose a
    # smaller one (`_smaller_if_faster`)
    target_size: tuple[int, float] | None = field(default=None, compare=False)

    @cached_property
    def memory(self) -> MemoryEstimate:
        setup = _setup(self.manifest, self.micro_batch_size)
        estimate = sizing.estimate_stages(self.manifest, self.strategy, self.settings, setup)
        assert estimate is not None  # it was sized to fit
        return estimate


@dataclass(frozen=True)
class SearchResult:
    candidate: Candidate | None
    notes: tuple[str, ...]  # why the search chose what it chose (printed in the plan)
    changes: tuple[str, ...] = ()  # training settings the plan switches, as `key: value`
    training: tuple[tuple[str, Any], ...] = ()  # the same as Training field changes
    # why a plan of a model that needs a pipeline has none: "one-gpu" (a lever made the whole
    # training state fit one GPU), "sharded" (ZeRO-3 over the data-parallel ranks) or
    # "parallel" (tensor, context or expert parallelism alone), the fastest step
    unpipelined: str = ""


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _mbs_choices(
    manifest: Manifest,
    dp: int,
    s: sizing.Strategy,
    settings: Mapping[str, Any],
    competing: bool = False,
) -> list[int]:
    """Micro-batch sizes to try, best first. A size the manifest writes is the only choice, and
    so is the manifest's (default 1) without a pipeline for a model that fits one GPU: there is
    no bubble to amortise, and it is the size at which the policies found the model fits one
    GPU (HR004). A layout without a pipeline `competing` with pipelined ones takes the largest
    size that fits (fuller GEMMs, fewer ZeRO-3 gathers), as theirs are chosen for them."""
    gbs = manifest.training.global_batch_size
    if gbs % dp:
        return []
    written = ("training", "micro_batch_size") in manifest.source.keys
    if written or (s.schedule == "none" and not competing):
        mbs = manifest.training.micro_batch_size
        return [mbs] if (gbs // dp) % mbs == 0 else []
    if s.schedule == "none":
        return _divisors(gbs // dp)[::-1]
    target = settings["planner"]["microbatches_per_rank"]
    lo, hi = target["min"], target["max"]

    def distance(mbs: int) -> tuple[float, int]:
        ratio = gbs // dp // mbs / s.pipeline
        miss = lo - ratio if ratio < lo else (ratio - hi if ratio > hi else 0.0)
        return (miss, -mbs)  # inside the range: the largest micro-batch (better GEMMs)

    return sorted(_divisors(gbs // dp), key=distance)


# Sized layouts by (training settings, micro-batch size, layout): the strategy, the schedule
# constraint it violates, its worst rank and largest states (`_size`)
_Sized = dict[
    tuple[Any, int, sizing.Strategy],
    tuple[sizing.Strategy, str | None, Peak | None],
]


# A layout that ran but did not fit: its worst-rank bytes, when the search met it (`_fit`'s
# call order), the manifest, the micro-batch size it ran at, the layout
_Closest = tuple[float, int, Manifest, int, sizing.Strategy]


@dataclass
class _Attempt:
    """One pass of the layout search: the memory a plan may use (`limit`, bytes per GPU) and
    the layouts that ran but did not fit, with their worst-rank bytes, shared by every pass: the
    closest one is where the infeasible note prices the remedies."""

    limit: float
    closest: list[_Closest]
    # Sized layouts (`_size`), shared by every pass: the margin pass and the usable-memory pass
    # size the same layouts.
    sized: _Sized
    # The worst rank's model states by layout (micro-batch count 1): they depend neither on the
    # micro-batch nor on the recompute and SP levers, so a layout whose states alone exceed a
    # pass's limit fits at no micro-batch size in any pass with that limit.
    floors: dict[sizing.Strategy, float]
    # Lower bounds of those states (memory.states_floor) by layout: a layout they rule out is
    # skipped unsized, its reason computed only if a note reads it. None: every layout is sized.
    bounds: dict[sizing.Strategy, float] | None = None
    # The layouts the bounds skipped, with their bound and call order, for `_complete_closest`
    # (None: not kept)
    skipped: list[tuple[float, int, Manifest, sizing.Strategy]] | None = None
    # `_fit`'s calls in the order the search makes them, shared by every pass
    order: Iterator[int] = field(default_factory=count)


def _size(
    manifest: Manifest, base: sizing.Strategy, mbs: int, dp: int, settings: Mapping[str, Any]
) -> tuple[sizing.Strategy, str | None, Peak | None]:
    """`base` at micro-batch size `mbs`: the sized strategy, the first schedule constraint it
    violates (then it is not sized), and its worst rank's memory (the whole estimate is built
    for the layout that fits: `_fit`)."""
    s = replace(base, microbatches=manifest.training.global_batch_size // (dp * mbs))
    violation = _violation(s.schedule, s.pipeline, s.microbatches, s.virtual_stages)
    if violation:
        return s, violation, None
    return s, None, sizing.stage_peak(manifest, s, settings, _setup(manifest, mbs))


@lru_cache(maxsize=4096)
def _violation(schedule: str, pipeline: int, microbatches: int, virtual: int) -> str | None:
    """The first constraint of `schedule` that P, M and V break, or None."""
    if schedule == "none":
        return None
    violations = check(schedule, pipeline, microbatches, SCHEDULES[schedule].virtual(virtual))
    return violations[0] if violations else None


def _setup(manifest: Manifest, mbs: int) -> MemoryTraining:
    """The manifest's training setup at micro-batch size `mbs` (a copy of the whole manifest
    per layout cost more than the sums it feeds)."""
    return sizing.training_setup(manifest, micro_batch_size=mbs)


# Why layouts did not fit, in the order tried: a reason, or what a skipped layout's sizing would
# have said (`_reasons`), computed only when a note reads the last one
_Why = list[str | Callable[[], list[str]]]


def _last(why: _Why) -> str | None:
    """The last reason of `why`."""
    for entry in reversed(why):
        reasons = [entry] if isinstance(entry, str) else entry()
        if reasons:
            return reasons[-1]
    return None


def _reasons(
    manifest: Manifest, base: sizing.Strategy, settings: Mapping[str, Any], attempt: _Attempt
) -> list[str]:
    """The reasons `_fit` gives for a layout it sizes (unpruned, in `attempt`'s pass) that does
    not fit."""
    found: _Why = []
    _fit(manifest, base, settings, found, replace(attempt, closest=[], bounds=None))
    return [r for r in found if isinstance(r, str)]


def _fit(
    manifest: Manifest,
    base: sizing.Strategy,
    settings: Mapping[str, Any],
    why: _Why,
    attempt: _Attempt,
    competing: bool = False,
) -> Candidate | None:
    """The best micro-batch size at which `base` runs and fits `attempt.limit`; otherwise
    appends one reason to `why`: the memory of the smallest stage that ran (the closest to
    fitting), else the first schedule constraint that failed."""
    seq = next(attempt.order)
    if attempt.bounds is not None:
        if base not in attempt.bounds:
            attempt.bounds[base] = sizing.states_floor(manifest, base)
        if attempt.bounds[base] > attempt.limit:
            if attempt.skipped is not None:
                attempt.skipped.append((attempt.bounds[base], seq, manifest, base))
            # what sizing it would have said, only if a note reads it (the last reason)
            why.append(
                lambda: _reasons(
                    manifest, base, settings, replace(attempt, closest=[], bounds=None)
                )
            )
            return None
    dp = sizing.data_parallel(manifest, base)
    choices = _mbs_choices(manifest, dp, base, settings, competing)
    if not choices:
        why.append(f"the global batch does not divide over DP {dp} at P = {base.pipeline}")
        return None

    def sized(mbs: int) -> tuple[sizing.Strategy, str | None, Peak | None]:
        key = (manifest.training, mbs, base)
        if key not in attempt.sized:
            attempt.sized[key] = _size(manifest, base, mbs, dp, settings)
        return attempt.sized[key]

    def micro(mbs: int) -> int:
        return manifest.training.global_batch_size // (dp * mbs)

    def violation(mbs: int) -> str | None:
        return _violation(base.schedule, base.pipeline, micro(mbs), base.virtual_stages)

    # The worst rank's memory grows with the micro-batch size (activations do, states do not
    # depend on it), so the sizes that fit are those up to the largest that does: each
    # sizing bounds it from below or above, and the choice is the first size, in the order of
    # preference, known to be within it. The smallest size is sized first (when it does not
    # fit, none does: most layouts a search sizes fit at no size), then the preferred of the
    # sizes left, or, where the preference is the largest size that fits, the middle one of
    # them (a bisection: a layout without a pipeline was sized at every size from the largest
    # down).
    # States alone over the limit (`floors`): only the smallest size is sized (the closest to
    # fitting, for the notes and the remedies).
    runs = [m for m in sorted(choices) if not violation(m)]
    order = [m for m in choices if m in runs]
    largest_first = order == runs[::-1]
    fits_to, fails_from = 0, math.inf  # the largest size known to fit, the smallest known not to
    while attempt.floors.get(base, 0.0) <= attempt.limit:
        pending = [m for m in order if m < fails_from]
        if not pending:
            break
        if pending[0] <= fits_to:
            chosen = replace(base, microbatches=micro(pending[0]))
            return Candidate(chosen, pending[0], manifest, settings)
        unknown = [m for m in runs if fits_to < m < fails_from]
        if runs[0] in unknown:
            mbs = runs[0]
        elif largest_first:
            mbs = unknown[len(unknown) // 2]
        else:
            mbs = pending[0]
        peak = sized(mbs)[2]
        assert peak is not None
        if peak.total <= attempt.limit:
            fits_to = mbs
        else:
            fails_from = mbs
            attempt.floors[base] = peak.states
    if not runs:  # the first constraint that failed
        why.append(violation(choices[0]) or "")
        return None
    s, _, peak = sized(runs[0])  # the closest to fitting
    assert peak is not None
    attempt.closest.append((peak.total, seq, manifest, runs[0], s))
    why.append(
        f"P = {base.pipeline}, T = {base.tensor}: {peak.total / sizing.GIB:.1f} GiB per GPU "
        f"is over {attempt.limit / sizing.GIB:.1f} GiB"
    )
    return None


def _expert_sizes(
    manifest: Manifest, tensor: int, pipeline: int, settings: Mapping[str, Any]
) -> tuple[int, ...]:
    """The expert-parallel sizes to try: the proposal's EP, else the largest size up to the
    policy cap that divides the experts and T x C x DP (EP borrows data-parallel ranks:
    torchtitan dp_shard*cp*tp == efsdp*ep), and the largest that also keeps each EP group's
    all-to-all inside the scale-up domain (EP x TP GPUs, Megatron's rank order with TP
    innermost; the Megatron MoE guide keeps EP x TP within NVLink). The step-time model chooses
    between them: across nodes the dispatch and combine run at the NIC's bandwidth, 3x a step
    on a 100 Gb/s network (tests/test_planner.py), unless the schedule or kernel hides it.

    A parallelism section that leaves `expert` out means expert = 1, and that is what the
    policies judged (DT001 does not fire): the planner keeps it rather than contradict them."""
    p = manifest.parallelism
    if p is not None:
        return (p.expert,)
    if not manifest.model.is_moe or not manifest.model.experts:
        return (1,)
    borrowable = manifest.cluster.gpus // pipeline
    cap = settings["planner"]["expert_parallel_max"]
    sizes = [d for d in _divisors(manifest.model.experts) if d <= cap and borrowable % d == 0]
    inside = [d for d in sizes if d * tensor <= manifest.tensor_domain]
    return tuple(dict.fromkeys((sizes[-1], *inside[-1:])))


def _expert_tensors(manifest: Manifest, tensor: int, pipeline: int, expert: int) -> tuple[int, ...]:
    """The routed experts' tensor-parallel sizes to try (Strategy.expert_tensor; 0: the
    framework's default, sizing.etp): the manifest's when it writes one this depth admits
    (EP x ETP divides T x C x DP = gpus / P, X009); a parallelism section that writes none
    keeps the default, as it keeps its EP (`_expert_sizes`); an MoE model planned without one
    at T > 1 also tries the other of 1 and T (Megatron-LM runs any ETP, torchtitan 1 or T).
    Whole experts (ETP 1) run larger GEMMs without TP collectives and hold more bytes per GPU:
    the step-time model chooses, the framework's default within `step_time_tolerance`."""
    p, ranks = manifest.parallelism, manifest.cluster.gpus // pipeline
    if p is not None and p.expert_tensor:
        return (p.expert_tensor,) if ranks % (expert * p.expert_tensor) == 0 else (0,)
    if p is not None or not manifest.model.is_moe or tensor == 1:
        return (0,)
    default = sizing.etp(manifest, sizing.Strategy("none", tensor, pipeline, expert, 1, 1, 1))
    other = 1 if default == tensor else tensor
    return (0, other) if ranks % (expert * other) == 0 else (0,)


def _stages_per_rank(schedule: str, virtual: int) -> int:
    return SCHEDULES[schedule].stages(1, virtual)


def _cap(manifest: Manifest, schedule: str, virtual: int, settings: Mapping[str, Any]) -> int:
    """The deepest P tried: the policy's cap, and at least one layer per stage (the
    validator's X014 for a proposal; DualPipeV runs 2 stages per rank)."""
    per_rank = _stages_per_rank(schedule, virtual)
    return min(settings["planner"]["max_pipeline"], manifest.model.layers // per_rank)


def _pipelines(
    manifest: Manifest, tensor: int, context: int, settings: Mapping[str, Any], cap: int
) -> Iterator[int]:
    for p in range(2, cap + 1):
        if manifest.cluster.gpus % (tensor * p * context) == 0:
            yield p


_SPLITS = ((False, False), (True, True), (True, False))


def _splits(manifest: Manifest, stages: int) -> tuple[tuple[bool, bool], bool]:
    """(account_for_embedding, account_for_loss) for `stages` stages, and whether it puts the
    same number of layers on every stage. A split the manifest writes is the only one tried;
    otherwise no accounting, then the embedding and loss both counted (Llama 3 405B: 126 + 2
    over 16 stages; Megatron's account-for-embedding/loss flags), then the embedding alone."""
    p, layers = manifest.parallelism, manifest.model.layers
    keys = manifest.source.keys
    if p is not None and (
        ("parallelism", "account_for_embedding") in keys
        or ("parallelism", "account_for_loss") in keys
    ):
        written = (p.account_for_embedding, p.account_for_loss)
        return written, (layers + sum(written)) % stages == 0
    for split in _SPLITS:
        if (layers + sum(split)) % stages == 0:
            return split, True
    return _SPLITS[0], False


def _contexts(manifest: Manifest, settings: Mapping[str, Any]) -> tuple[int, ...]:
    """Context-parallel sizes to try: the proposal's when it writes one; for sequences of at
    least `planner.context_from_seq_len` tokens, the policy's `context_candidates` that split
    the sequence into whole halves per rank (load-balanced causal CP splits each rank's share
    in two: Transformer Engine, Megatron-core); otherwise none (1)."""
    p, planner = manifest.parallelism, settings["planner"]
    if p is not None and ("parallelism", "context") in manifest.source.keys:
        return (p.context,)
    seq = manifest.model.seq_len
    if seq < int(planner.get("context_from_seq_len", 0) or seq + 1):
        return (p.context if p is not None else 1,)
    return tuple(c for c in planner.get("context_candidates", (1,)) if seq % (2 * c) == 0) or (1,)


def _virtuals(schedule: str, written: int, settings: Mapping[str, Any]) -> tuple[int, ...]:
    """Interleaving depths to try: the proposal's first, then the policy's
    `planner.interleaving_candidates`; other schedules run at the depth written."""
    if schedule != "interleaved-1f1b":
        return (written,)
    candidates = tuple(settings["planner"].get("interleaving_candidates", (2,)))
    return tuple(dict.fromkeys((written, *candidates))) if written >= 2 else candidates


# The search space in depth: from the smallest P that fits up to twice it. At a fixed global
# batch M/P (so the bubble) does not change with P; a deeper pipeline only trades data-parallel
# traffic for pipeline sends and memory. On the calibration configs replanned without their
# layouts, 2x lands nearer the published depth than 4x (PP within 2x of the published in 43 of
# 53 against 41) at two thirds of the search's cost.
_DEEPEST = 2


def _fitting_pipelines(
    manifest: Manifest,
    schedule: str,
    tensor: int,
    context: int,
    virtual: int,
    settings: Mapping[str, Any],
    why: _Why,
    attempt: _Attempt,
    first_only: bool = False,
) -> list[Candidate]:
    """Every depth P (and interleaving depth) at which `tensor` runs and fits, for the step-time
    model to choose among; when the policy prefers even stages, the uneven splits only if no
    even one fits (the plan then lists ADV002 with its reason). `first_only`: the first one
    found, when only whether one fits matters."""
    prefer_even = bool(settings["planner"].get("even_stages", False))
    even: list[Candidate] = []
    uneven: list[Candidate] = []
    for v in _virtuals(schedule, virtual, settings):
        cap = _cap(manifest, schedule, v, settings)
        first: int | None = None  # the smallest depth that fits at this T and v
        depths = list(_pipelines(manifest, tensor, context, settings, cap))
        if first_only:  # any depth will do: the deepest, the least memory per GPU, first
            depths.reverse()
        for pipe in depths:
            split, is_even = _splits(manifest, SCHEDULES[schedule].stages(pipe, v))
            if first is not None and pipe > _DEEPEST * first:
                if even or not prefer_even:
                    break
                if not is_even:
                    continue  # past the window only an even split, preferred, still counts
            for ep in _expert_sizes(manifest, tensor, pipe, settings):
                if (manifest.cluster.gpus // pipe) % ep:
                    # Expert parallelism borrows T x C x DP = gpus / P ranks (X009): a
                    # proposal's EP that does not divide them cannot be laid out at this depth.
                    ranks = manifest.cluster.gpus // pipe
                    why.append(
                        f"P = {pipe}: expert parallel size {ep} does not divide {ranks} ranks"
                    )
                    continue
                for etp in _expert_tensors(manifest, tensor, pipe, ep):
                    base = sizing.Strategy(
                        schedule, tensor, pipe, ep, context, v, 1, *split, expert_tensor=etp
                    )
                    found = _fit(manifest, base, settings, why, attempt)
                    if found is not None:
                        if first_only:
                            return [found]
                        first = first or pipe
                        (even if is_even else uneven).append(found)
    if prefer_even:
        return even or uneven
    return even + uneven


def _fastest(
    manifest: Manifest, fitting: list[Candidate], settings: Mapping[str, Any]
) -> Candidate:
    """The fastest step by the step-time model (dpguard.perf; at a fixed GPU count and token
    budget GPU-hours are proportional to it); among layouts within the policy's
    `step_time_tolerance` of it (closer than the model can tell apart: no calibrated sweep
    trades tensor against pipeline size), the practitioners' rule the policy's `near_tie` names
    (shipped: Narayanan et al. 2021, arXiv 2104.04473 §3.3, takeaway 1: tensor parallelism up
    to the scale-up domain, then as shallow a pipeline as fits): the shallower pipeline, then
    the smaller tensor size (`smaller_tensor`: the other way round), then the fewer
    chunks per rank, then the larger expert-parallel size (the rule before EP was searched: the
    fewest experts per GPU), then the framework's own expert tensor size. A custom accelerator
    without the bandwidths the model needs has no prediction for any layout: its layouts are ranked
    by their closed-form bubble instead."""
    predictions = [perf.predicted(manifest, c.strategy, c.micro_batch_size) for c in fitting]
    times = [
        p.step_time_s if p else sizing.estimated_bubble(c.strategy, settings)
        for c, p in zip(fitting, predictions, strict=True)
    ]
    best = min(times)
    tolerance = float(settings["planner"].get("step_time_tolerance", 0.0))
    close = [c for c, s in zip(fitting, times, strict=True) if s <= best * (1 + tolerance)]
    tensor_first = settings["planner"].get("near_tie") == "smaller_tensor"
    chosen = min(
        close,
        key=lambda c: (
            *(
                (c.strategy.tensor, c.strategy.pipeline)
                if tensor_first
                else (c.strategy.pipeline, c.strategy.tensor)
            ),
            c.strategy.virtual_stages,
            -c.strategy.expert,
            c.strategy.expert_tensor != 0,
        ),
    )
    return _smaller_if_faster(manifest, chosen, settings)


def _smaller_if_faster(
    manifest: Manifest, chosen: Candidate, settings: Mapping[str, Any]
) -> Candidate:
    """`chosen` at a smaller micro-batch size (a larger M) when the step-time model expects one
    more than `step_time_tolerance` faster: the M/P target picks the size, and the model, which
    prices the bubble against the GEMMs' efficiency and each micro-batch's communication, has
    the last word. A smaller size fits wherever this one does (the worst rank's memory grows
    with the micro-batch size: `_fit`). A size the manifest writes stays."""
    s, mbs = chosen.strategy, chosen.micro_batch_size
    if mbs == 1 or ("training", "micro_batch_size") in manifest.source.keys:
        return chosen
    now = perf.predicted(manifest, s, mbs)
    if now is None:
        return chosen
    tolerance = float(settings["planner"].get("step_time_tolerance", 0.0))
    fastest, best = now.step_time_s * (1 - tolerance), chosen
    per_replica = manifest.training.global_batch_size // sizing.data_parallel(manifest, s)
    for smaller in _divisors(per_replica):
        if smaller >= mbs:
            break
        micro = per_replica // smaller
        if _violation(s.schedule, s.pipeline, micro, s.virtual_stages):
            continue
        other = replace(s, microbatches=micro)
        timed = perf.predicted(manifest, other, smaller)
        if timed is not None and timed.step_time_s < fastest:
            target = (mbs, now.step_time_s)
            best = Candidate(other, smaller, manifest, settings, target)
            fastest = timed.step_time_s
    return best


def _search_layout(
    manifest: Manifest,
    schedules: tuple[str, ...],
    settings: Mapping[str, Any],
    pipeline_needed: bool,
    attempt: _Attempt,
    first_only: bool = False,
    in_place: tuple[str, ...] = (),
    any_schedule: bool = False,
) -> SearchResult:
    """Plan for the first schedule of `schedules` that some P admits (see module docstring);
    `first_only`: any layout of that schedule that fits, not the fastest; `in_place`: the
    schedules that may replace it at the layout chosen (`_in_place`); `any_schedule`: any
    layout that fits, whichever schedule (or none) the plan would name."""
    p = manifest.parallelism
    fixed_tensor = p is not None and ("parallelism", "tensor") in manifest.source.keys
    domain = manifest.tensor_domain
    candidates = [t for t in settings["planner"]["tensor_candidates"] if t <= domain]
    notes: list[str] = []
    if fixed_tensor and p and p.tensor > domain:
        # HR013 rejects the proposal's size: plan with the sizes that stay on one fabric.
        notes.append(
            f"the proposal's tensor size {p.tensor} spans more than {domain} GPUs (HR013): "
            "the plan keeps tensor parallelism inside the scale-up domain"
        )
        fixed_tensor = False
    tensors = [p.tensor] if fixed_tensor and p else candidates
    if not pipeline_needed and fixed_tensor and p:
        # No pipeline (refused, or the model fits one GPU): data + tensor parallel, so a larger
        # tensor size than the proposal's is the way to fit.
        tensors += [t for t in candidates if t > p.tensor]
    tensors = [t for t in tensors if sizing.tensor_divides(manifest, t)]
    context = p.context if p is not None else 1
    contexts = _contexts(manifest, settings)
    virtual = p.virtual_stages if p is not None else 1
    why: _Why = []
    if not pipeline_needed:
        found = _unpipelined(manifest, tensors, (context,), settings, why, attempt, False)
        if found:
            return SearchResult(found[0], tuple(notes))
        reason = _last(why) or "no tensor-parallel size is possible"
        return SearchResult(None, (*notes, f"without a pipeline nothing fits: {reason}"))
    flat = (
        _unpipelined(manifest, tensors, contexts, settings, [], attempt, True)
        if unpipelined_allowed(manifest, settings)
        else []
    )
    if flat and any_schedule:
        return SearchResult(flat[0], tuple(notes))
    # which schedule the plan names then depends on the step times: the first pipelined
    # layout that fits no longer tells
    first_only = (first_only or any_schedule) and not flat
    for schedule in schedules:
        why = []
        found_all = (
            found
            # any layout will do: the widest, the least memory per GPU, first
            for t in (tensors[::-1] if first_only else tensors)
            for c in (contexts[::-1] if first_only else contexts)
            for found in _fitting_pipelines(
                manifest, schedule, t, c, virtual, settings, why, attempt, first_only
            )
        )
        fitting = list(islice(found_all, 1) if first_only else found_all)
        if fitting:
            if first_only:
                return SearchResult(fitting[0], tuple(notes))
            chosen = _chosen(manifest, fitting, flat, settings, notes)
            return _in_place(manifest, chosen, in_place, settings, attempt)
        # The last reason is the deepest pipeline tried: the most telling one.
        reason = _last(why) or "no pipeline depth divides the GPUs"
        cap = _cap(manifest, schedule, virtual, settings)
        per_rank = _stages_per_rank(schedule, virtual)
        bound = (
            "the policy's max_pipeline"
            if cap == settings["planner"]["max_pipeline"]
            else f"{manifest.model.layers} layers, {per_rank} "
            f"{'stage' if per_rank == 1 else 'stages'} per rank"
        )
        notes.append(f"{schedule} was not possible at any P up to {cap} ({bound}): {reason}")
    if flat:
        return _chosen(manifest, [], flat, settings, notes)
    return SearchResult(None, tuple(notes))


def _in_place(
    manifest: Manifest,
    found: SearchResult,
    schedules: tuple[str, ...],
    settings: Mapping[str, Any],
    attempt: _Attempt,
) -> SearchResult:
    """`found`'s layout run by one of `schedules` instead (interleaved 1F1B at each depth the
    policy lists) where that fits and the step-time model expects it faster by more than the
    policy's `step_time_tolerance`: the tensor size, depth and context size stay the ones the
    search chose, only the schedule (and the micro-batch size it runs at) changes."""
    c = found.candidate
    if not schedules or c is None or c.strategy.schedule == "none":
        return found
    s = c.strategy
    current = perf.predicted(manifest, s, c.micro_batch_size)
    if current is None:
        return found
    prefer_even = bool(settings["planner"].get("even_stages", False))
    faster = []
    for schedule in schedules:
        for v in _virtuals(schedule, s.virtual_stages, settings):
            if schedule == s.schedule and v == s.virtual_stages:
                continue
            if s.pipeline > _cap(manifest, schedule, v, settings):
                continue
            split, even = _splits(manifest, SCHEDULES[schedule].stages(s.pipeline, v))
            if prefer_even and not even:
                continue
            base = sizing.Strategy(
                schedule,
                s.tensor,
                s.pipeline,
                s.expert,
                s.context,
                v,
                1,
                *split,
                expert_tensor=s.expert_tensor,
            )
            other = _fit(manifest, base, settings, [], attempt)
            if other is None:
                continue
            timed = perf.predicted(manifest, other.strategy, other.micro_batch_size)
            if timed is not None:
                faster.append((timed.step_time_s, v, other))
    tolerance = float(settings["planner"].get("step_time_tolerance", 0.0))
    faster = [f for f in faster if f[0] < current.step_time_s * (1 - tolerance)]
    if not faster:
        return found
    seconds, _, best = min(faster, key=lambda f: f[:2])
    b = best.strategy
    depth = f" (v {b.virtual_stages})" if b.virtual_stages > 1 else ""
    note = (
        f"at the layout the {s.schedule} search chose (TP {s.tensor}, PP {s.pipeline}) the "
        f"step-time model expects {b.schedule}{depth} {1 - seconds / current.step_time_s:.0%} "
        f"faster ({seconds:.3g} s against {current.step_time_s:.3g} s a step): the plan runs it "
        "there (policies/planner.yaml planner.fallback_in_place)"
    )
    return replace(found, candidate=best, notes=(*found.notes, note))


def unpipelined_allowed(manifest: Manifest, settings: Mapping[str, Any]) -> bool:
    """Whether layouts without a pipeline compete with the pipelined ones for a model that
    fits no single GPU: tensor parallelism up to the scale-up domain (Narayanan et al. 2021
    §3.3: a pipeline only beyond it; their 18.4B and Korthikanti's 22B run at TP 8 alone),
    expert parallelism, or ZeRO-3 / FSDP over the data-parallel ranks (MosaicML's MPT,
    OPT-175B with TP 8) may fit it without one, up to the policy's
    `planner.unpipelined_max_params` (no published run beyond it trains without one)."""
    cap = settings["planner"].get("unpipelined_max_params")
    return cap is not None and manifest.model.total_params <= float(cap)


def _unpipelined(
    manifest: Manifest,
    tensors: list[int],
    contexts: tuple[int, ...],
    settings: Mapping[str, Any],
    why: _Why,
    attempt: _Attempt,
    competing: bool,
) -> list[Candidate]:
    """The layouts without a pipeline (data, tensor and context parallel) that fit, smallest
    tensor size first. `competing` with pipelined layouts: every one, each at the largest
    micro-batch that fits; otherwise (the model needs no pipeline) the first one, at the
    manifest's micro-batch size."""
    out: list[Candidate] = []
    # under ZeRO-3, only sharding groups within the step-time model's calibrated range compete
    widest = settings["planner"].get("sharded_max_ranks") if competing else None
    sharded = manifest.training.zero_stage >= 3
    for t in tensors:
        for c in contexts:
            if manifest.cluster.gpus % (t * c):
                why.append(f"tensor {t} x context {c} does not divide the GPUs")
                continue
            if sharded and widest is not None and manifest.cluster.gpus // (t * c) > widest:
                continue
            for ep in _expert_sizes(manifest, t, 1, settings):
                for etp in _expert_tensors(manifest, t, 1, ep):
                    base = sizing.Strategy("none", t, 1, ep, c, 1, 1, expert_tensor=etp)
                    found = _fit(manifest, base, settings, why, attempt, competing)
                    if found is not None:
                        out.append(found)
                        if not competing:
                            return out
    return out


def _chosen(
    manifest: Manifest,
    pipelined: list[Candidate],
    flat: list[Candidate],
    settings: Mapping[str, Any],
    notes: list[str],
) -> SearchResult:
    """The fastest pipelined layout of one schedule, or the fastest layout without a pipeline
    when the step-time model expects it to be faster still (with a note, both step times in
    it). It must be predicted strictly faster: the tolerance's shallower-first rule, which
    decides among pipelined layouts, would drop the pipeline on any near-tie (it put a 70B on
    256 H100 at TP 8 alone on a 2 % difference, where published 70B runs pipeline), and a
    margin in the pipeline's favour keeps one where published runs that fit without it run
    without it (a 5 % margin pipelined Megatron-LM's 32B weak-scaling run and NeMo's GPT-3
    20B)."""
    best = _fastest(manifest, pipelined, settings) if pipelined else None
    alone = _fastest(manifest, flat, settings) if flat else None
    if alone is None:
        assert best is not None
        return SearchResult(best, tuple(notes))
    s = alone.strategy
    ours = perf.predicted(manifest, s, alone.micro_batch_size)
    other = perf.predicted(manifest, best.strategy, best.micro_batch_size) if best else None
    if best is not None and not (ours and other and ours.step_time_s < other.step_time_s):
        return SearchResult(best, tuple(notes))
    # here either no pipelined layout fits, or this one is predicted faster than the best
    if best is None:
        why = "no pipelined layout fits" + (
            f" (the step-time model: {ours.step_time_s:.3g} s a step)" if ours else ""
        )
    else:
        assert ours is not None and other is not None
        why = (
            f"the step-time model expects the fastest step ({ours.step_time_s:.3g} s against "
            f"{other.step_time_s:.3g} s for the fastest {best.strategy.schedule} layout, "
            f"TP {best.strategy.tensor}, PP {best.strategy.pipeline})"
        )
    sizes = f"TP {s.tensor}, CP {s.context}" + (f", EP {s.expert}" if s.expert > 1 else "")
    fits, reason = f"the model fits without a pipeline ({sizes})", "parallel"
    zero = manifest.training.zero_stage
    if zero >= 3:
        ranks = sizing.data_parallel(manifest, s)
        fits = f"ZeRO-{zero} shards the model states over the {ranks:,} data-parallel ranks: {fits}"
        reason = "sharded"
    return SearchResult(alone, (*notes, f"{fits}: {why}"), unpipelined=reason)


def levers(manifest: Manifest) -> list[dict[str, Any]]:
    """Training settings the planner may switch when nothing fits as written, cheapest first:
    sequence parallelism (free when TP > 1), selective recompute of the modules that cost
    almost no compute (Megatron-core output-discarding checkpoints: layernorm, moe_act,
    mla_up_proj, plus core_attn; Korthikanti §5: selective costs 2-4 % of FLOPs), then full
    recompute (about a third more compute: one extra forward)."""
    t, m = manifest.training, manifest.model
    out: list[dict[str, Any]] = []
    if t.sequence_parallel is False:
        out.append({"sequence_parallel": None})
    cheap = ["core_attn", "layernorm"]
    if m.attention == "mla":
        cheap.append("mla_up_proj")
    if m.is_moe:
        cheap.append("moe_act")
    if t.activation_recompute == "none" or (
        t.activation_recompute == "selective" and not set(cheap) <= set(t.recompute_modules)
    ):
        modules = tuple(dict.fromkeys((*t.recompute_modules, *cheap)))
        if t.activation_recompute == "none":
            modules = tuple(cheap)
        out.append({"activation_recompute": "selective", "recompute_modules": modules})
    full = sizing.full_recompute(t)
    if full:
        out.append(full)
    return out


def _lever_steps(manifest: Manifest) -> list[dict[str, Any]]:
    """The training changes the search tries in turn: none, then each lever of `levers` added
    to the ones before it."""
    steps: list[dict[str, Any]] = [{}]
    for lever in levers(manifest):
        changes = {**steps[-1], **lever}
        if changes.get("activation_recompute") == "full":
            changes.pop("recompute_modules", None)  # X020: modules only with selective
        steps.append(changes)
    return steps


def _describe(changes: dict[str, Any]) -> tuple[str, ...]:
    out = []
    for key, value in changes.items():
        if key == "sequence_parallel":
            out.append("sequence_parallel: true")
        elif isinstance(value, tuple):
            out.append(f"{key}: [{', '.join(value)}]")
        else:
            out.append(f"{key}: {value}")
    return tuple(out)


_SEARCHED: PerSettings[SearchResult] = PerSettings()
_SHOWN: PerSettings[bool] = PerSettings()


def shown_feasible(
    manifest: Manifest,
    schedules: tuple[str, ...],
    settings: Mapping[str, Any],
    pipeline_needed: bool,
) -> bool:
    """Whether some layout fits, shown by the search's most permissive pass alone (every lever
    on, the larger of the margin and the usable memory), at its first fit: what a review needs
    when a verdict reads only feasibility. That pass is one of `_search`'s, which stops at the
    first pass with a fit, so True is exact and the search finds a layout too (memory is not
    assumed to fall with each lever: a fit found here is enough). False: not shown; the search
    decides (it also tries 1F1B as the last resort)."""

    def shown() -> bool:
        changes = _lever_steps(manifest)[-1]
        share = max(float(settings["planner"].get("memory_margin", 1.0)), 1.0)
        switched = _switched(manifest, changes)
        # as `_search` decides it for this pass: a lever that makes the state fit one GPU
        # drops the pipeline
        needed = pipeline_needed and not (changes and sizing.model_fits_one_gpu(switched, settings))
        attempt = _Attempt(share * sizing.usable_bytes(manifest, settings), [], {}, {}, {})
        found = _search_layout(switched, schedules, settings, needed, attempt, any_schedule=True)
        return found.candidate is not None

    return _SHOWN.get(settings, (manifest.content, schedules, pipeline_needed), shown)


def search(
    manifest: Manifest,
    schedules: tuple[str, ...],
    settings: Mapping[str, Any],
    pipeline_needed: bool,
    first_only: bool = False,
    in_place: tuple[str, ...] = (),
) -> SearchResult:
    """`_search`, once per call for files that describe the same run (dpguard.memo).

    Layouts whose model states alone cannot fit (memory.states_floor) are skipped unsized; the
    reason a note may give for one is computed when it does. A layout skipped is never one
    that fits, so the plan is the same; when nothing fits at all, the notes price the closest
    layout, and only the skipped layouts that could be it are sized then
    (`_complete_closest`). `first_only`: the first layout that fits, where only feasibility and the
    schedule matter (they are the full search's: it stops at the same lever, margin and
    schedule); when nothing fits, the result is the full search's. `in_place`: schedules that
    may replace the one found at its own layout (`_in_place`); the first layout that fits
    does not tell which, so `first_only` runs the full search then."""
    key = (manifest.content, schedules, pipeline_needed, in_place)
    sized: _Sized = {}  # shared by the searches below: each layout is sized once

    def run(first: bool) -> SearchResult:
        return _search(manifest, schedules, settings, pipeline_needed, first, sized, in_place)

    if first_only and not in_place:
        found = _SEARCHED.get(settings, (*key, True), lambda: run(True))
        if found.candidate is not None:
            return found
    return _SEARCHED.get(settings, key, lambda: run(False))


def _search(
    manifest: Manifest,
    schedules: tuple[str, ...],
    settings: Mapping[str, Any],
    pipeline_needed: bool,
    first_only: bool = False,
    sized: _Sized | None = None,
    in_place: tuple[str, ...] = (),
) -> SearchResult:
    """The layout search, first keeping the worst rank within the policy's `memory_margin` of
    usable memory, with the manifest's training settings and then each cheap lever of `levers`
    in turn (accumulating); then up to the usable memory itself; full recompute (a third more
    compute) comes last, margin first. The plan says which lever it switched and when it
    gave up the margin. When nothing fits, 1F1B is the last resort; when still nothing fits,
    the notes price what would make 1F1B fit: the remedies at the closest layout and the
    fewest GPUs (doublings of the job's) at which a plan fits."""
    usable = sizing.usable_bytes(manifest, settings)
    margin = float(settings["planner"].get("memory_margin", 1.0))
    steps = _lever_steps(manifest)
    cheap = [c for c in steps if c.get("activation_recompute") != "full"]
    full = [c for c in steps if c.get("activation_recompute") == "full"]
    order = [(c, margin) for c in cheap] + [(c, 1.0) for c in cheap]
    order += [(c, share) for c in full for share in (margin, 1.0)]
    closest: list[_Closest] = []
    sized = {} if sized is None else sized
    floors: dict[sizing.Strategy, float] = {}
    # by layout, for every pass: the levers change activations, never the model states
    bounds: dict[sizing.Strategy, float] = {}
    skipped: list[tuple[float, int, Manifest, sizing.Strategy]] = []
    calls = count()
    fits_one: dict[Any, bool] = {}  # by training settings: the margin passes repeat them
    as_written: SearchResult | None = None  # why nothing fits, told against usable memory
    for changes, share in order:
        switched = _switched(manifest, changes)
        attempt = _Attempt(share * usable, closest, sized, floors, bounds, skipped, calls)
        # A lever can make the whole training state fit one GPU (HR004's test): then a pipeline
        # only adds bubble, and the plan is data parallel with that lever
        if pipeline_needed and changes and switched.training not in fits_one:
            fits_one[switched.training] = sizing.model_fits_one_gpu(switched, settings)
        needed = pipeline_needed and not (changes and fits_one[switched.training])
        found = _search_layout(switched, schedules, settings, needed, attempt, first_only, in_place)
        if not changes and share == 1.0:
            as_written = found
        if found.candidate is None:
            continue
        lever_fits_one = pipeline_needed and not needed
        return _found(manifest, found, changes, share, margin, usable, lever_fits_one)
    assert as_written is not None
    if first_only:
        # only whether something fits: 1F1B, the last resort, or nothing (and then `search`
        # runs the full search, whose notes say why)
        if schedules and "1f1b" not in schedules:
            return _search(manifest, ("1f1b",), settings, pipeline_needed, True, sized)
        return SearchResult(None, ())
    notes = list(as_written.notes)
    if schedules and "1f1b" not in schedules:
        # 1F1B runs everywhere, at the least activation memory of the schedules dpguard
        # plans: the last resort when none of the policies' schedules fits at any layout
        # (ZB-H1's deferred weight passes can cost more memory than its bubble saves)
        fallback = search(manifest, ("1f1b",), settings, pipeline_needed)
        if fallback.candidate is not None:
            notes.append(
                f"none of the policies' schedules ({', '.join(schedules)}) fits at any "
                "layout: the plan falls back to 1F1B, which runs everywhere"
            )
        # when 1F1B does not fit either, what would make it fit is priced for 1F1B
        return replace(fallback, notes=(*notes, *fallback.notes))
    _complete_closest(closest, skipped, settings, sized)
    if closest:
        nearest, strategy = _nearest(closest)
        priced = sizing.remedies(nearest, strategy, settings, last_resort=True)
        if priced:
            what = "; ".join(f"{change} -> {gib:.1f} GiB" for change, gib in priced)
            notes.append(
                f"at the closest layout (P = {strategy.pipeline}, T = {strategy.tensor}, "
                f"{nearest.training.activation_recompute} recompute) the worst rank after one "
                f"more change, against {usable / sizing.GIB:.1f} GiB usable: {what}"
            )
    notes.extend(_fewest_gpus(manifest, settings, pipeline_needed, steps[-1]))
    return SearchResult(None, tuple(notes))


def _found(
    manifest: Manifest,
    found: SearchResult,
    changes: Mapping[str, Any],
    share: float,
    margin: float,
    usable: float,
    lever_fits_one: bool,
) -> SearchResult:
    """The search's result for the pass that found a layout (its lever `changes`, its share of
    the `usable` memory), with the notes that say what the plan switched and gave up."""
    assert found.candidate is not None
    notes = list(found.notes)
    said = _describe(dict(changes))
    if said:
        if ("training", "recompute_modules") in manifest.source.keys and (
            changes.get("activation_recompute") == "full"
        ):
            said = (*said, "recompute_modules removed")
        where = (
            f"within {margin:.0%} of the usable memory ({share * usable / sizing.GIB:.1f} GiB)"
            if share < 1.0
            else "the usable memory"
        )
        notes.append(f"as written, no layout fits {where}; the plan switches " + ", ".join(said))
    if share > margin:
        worst = found.candidate.memory.worst.total
        notes.append(
            f"no layout keeps the worst rank within {margin:.0%} of the usable memory "
            f"({margin * usable / sizing.GIB:.1f} GiB); this one needs "
            f"{worst / sizing.GIB:.1f} of {usable / sizing.GIB:.1f} GiB"
        )
    unpipelined = found.unpipelined
    if lever_fits_one:
        notes.append(
            "with that change the whole training state fits one GPU: data parallelism only, "
            "no pipeline"
        )
        unpipelined = "one-gpu"
    return SearchResult(found.candidate, tuple(notes), said, tuple(changes.items()), unpipelined)


def _switched(manifest: Manifest, changes: Mapping[str, Any]) -> Manifest:
    """`manifest` with the training `changes`: itself when there are none, so that its content
    key (what the memos read, a hash of the whole manifest) is not computed again."""
    if not changes:
        return manifest
    return replace(manifest, training=replace(manifest.training, **changes))


def _closeness(c: _Closest) -> tuple[float, int]:
    """The worst rank's bytes, then the order met: the first of equally close layouts."""
    return c[0], c[1]


def _complete_closest(
    closest: list[_Closest],
    skipped: list[tuple[float, int, Manifest, sizing.Strategy]],
    settings: Mapping[str, Any],
    sized: _Sized,
) -> None:
    """Add to `closest` the layouts the bounds skipped that could be closer to fitting than
    any sized one, as sizing every layout would have: a skipped layout's worst rank holds at
    least its bound, so once the bounds pass the closest total so far none of the rest can
    beat it (branch and bound; ties go to the layout met first, `_closeness`). A search that
    fits nothing used to size every layout again for this (a tenth of a realistic review)."""
    best = min((c[0] for c in closest), default=math.inf)
    for bound, seq, manifest, base in sorted(skipped, key=lambda k: (k[0], k[1])):
        if bound > best:
            return
        # sized as an unskipped layout that does not fit: at its smallest micro-batch size
        found: list[_Closest] = []
        _fit(manifest, base, settings, [], _Attempt(-1.0, found, sized, {}))
        for total, _, switched, mbs, strategy in found:
            closest.append((total, seq, switched, mbs, strategy))
            best = min(best, total)


def _nearest(closest: list[_Closest]) -> tuple[Manifest, sizing.Strategy]:
    """The layout that came closest to fitting, and its manifest at the micro-batch size it ran
    at (built only here: the search sizes many layouts that do not fit)."""
    _, _, manifest, mbs, strategy = min(closest, key=_closeness)
    return replace(manifest, training=replace(manifest.training, micro_batch_size=mbs)), strategy


# how far `_fewest_gpus` looks: the job's GPUs times 2, 4, ... 1024
_GROWTH = tuple(2**k for k in range(1, 11))


def _fewest_gpus(
    manifest: Manifest,
    settings: Mapping[str, Any],
    pipeline_needed: bool,
    levers_on: dict[str, Any],
) -> tuple[str, ...]:
    """The first doubling of the job's GPUs at which a 1F1B layout fits with every lever on
    (one layout search per count, not the plan's full sequence), as a note: what "more GPUs"
    means in numbers. Empty when none up to 1024x does."""
    cluster = manifest.cluster
    # every byte of the model states sits on some GPU: no layout of g GPUs holds less than
    # 1/g of them on its worst one, so counts below that bound need no search
    states = manifest.model.total_params * sum(sharded_bytes(sizing.training_setup(manifest), 1))
    usable = sizing.usable_bytes(manifest, settings)
    training = replace(manifest.training, **levers_on)
    for factor in _GROWTH:
        if states / (cluster.gpus * factor) > usable:
            continue
        grown = replace(
            manifest, cluster=replace(cluster, gpus=cluster.gpus * factor), training=training
        )
        # only the layout found is kept, not why the others failed: layouts whose states
        # alone cannot fit are skipped unsized (they are never among those that fit)
        attempt = _Attempt(usable, [], {}, {}, {})
        # 1F1B: the planner's last resort, so the first count at which a plan exists
        found = _search_layout(grown, ("1f1b",), settings, pipeline_needed, attempt)
        if found.candidate is None:
            continue
        s, worst = found.candidate.strategy, found.candidate.memory.worst.total
        switched = f", with {', '.join(_describe(levers_on))}" if levers_on else ""
        return (
            f"with {grown.cluster.gpus:,} GPUs ({factor}x) a plan fits: {s.schedule} P = "
            f"{s.pipeline}, T = {s.tensor}, worst rank {worst / sizing.GIB:.1f} of "
            f"{usable / sizing.GIB:.1f} GiB{switched}",
        )
    return ()
