"""From a manifest and a candidate strategy to numbers: memory per GPU, bubble, GPU-hours.

The one bridge between the normalised `Manifest` and the pure models (`dpguard.memory`,
`dpguard.compute`, `dpguard.schedules`), shared by the policy facts and the planner. Every
assumption (headroom, memory error bands, op-time ratios, efficiency) comes from the policy
settings (`policies/planner.yaml`), never from constants here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any, NamedTuple

from dpguard import compute, memory, resources
from dpguard.frameworks import profiles
from dpguard.manifest import Manifest, Model, Runtime, Training, build_runtime, format_quantity
from dpguard.memo import PerSettings
from dpguard.schedules import SCHEDULES, OpTimes, check, simulate
from dpguard.schedules.inflight import inflight
from dpguard.schedules.ops import FB

GIB = memory.GIB


@dataclass(frozen=True)
class Strategy:
    """A candidate parallel layout for one manifest."""

    schedule: str  # a schedule name, or "none" for no pipeline parallelism
    tensor: int
    pipeline: int  # ranks in one pipeline
    expert: int
    context: int
    virtual_stages: int  # as written in the manifest (interleaved 1F1B); DualPipeV implies 2
    microbatches: int
    account_for_embedding: bool = False  # the stage split counts the embedding as a layer
    account_for_loss: bool = False  # ... and the output layer and loss as another
    stage_layers: tuple[int, ...] = ()  # layers per stage when the manifest sets them
    expert_tensor: int = 0  # the routed experts' TP size; 0: the framework's default (`etp`)


def proposal(manifest: Manifest, schedule: str) -> Strategy | None:
    """The manifest's proposed layout run with `schedule` (None when nothing is proposed or
    the batch gives no whole micro-batch count)."""
    p, micro = manifest.parallelism, manifest.microbatches
    if p is None or micro is None:
        return None
    return Strategy(
        schedule,
        p.tensor,
        p.pipeline,
        p.expert,
        p.context,
        p.virtual_stages,
        micro,
        p.account_for_embedding,
        p.account_for_loss,
        p.stage_layers or (),
        p.expert_tensor or 0,
    )


def data_parallel(manifest: Manifest, s: Strategy) -> int:
    return manifest.cluster.gpus // (s.tensor * s.pipeline * s.context)


def etp(manifest: Manifest, s: Strategy, runtime: Runtime | None = None) -> int:
    """The routed experts' tensor-parallel size under `s`: the strategy's own, else what the
    framework (`runtime`, by default the manifest's) runs when none is written: Megatron-LM's
    ETP = TP when EP x TP divides TP x CP x DP, otherwise 1 (the layout the validator's X009
    accepts, EP | TP x CP x DP; ETP = 1 holds more expert bytes per GPU, so it errs large);
    always 1 where the profile says so (torchtitan, DeepSpeed: its `expert_tensor`)."""
    if s.expert_tensor:
        return s.expert_tensor
    if not (runtime or manifest.runtime).expert_tensor_follows_tensor:
        return 1
    divides = (s.tensor * s.context * data_parallel(manifest, s)) % (s.expert * s.tensor) == 0
    return s.tensor if divides else 1


def architecture(manifest: Manifest) -> memory.Architecture:
    return _architecture(manifest.model)


# The sizing helpers below are pure functions of frozen values, remembered by them: the planner
# sizes hundreds of layouts of one model per file, and building these values (each validated
# in its __post_init__) cost more than many of the sums they feed.
@lru_cache(maxsize=64)
def _architecture(m: Model) -> memory.Architecture:
    return memory.Architecture(
        total_params=m.total_params,
        layers=m.layers,
        hidden_size=m.hidden_size,
        attention_heads=m.attention_heads,
        seq_len=m.seq_len,
        vocab_size=m.vocab_size,
        active_params=m.active_params if m.is_moe else None,
        ffn_hidden_size=m.ffn_hidden_size,
        swiglu=m.ffn_activation == "swiglu",
        kv_heads=m.kv_heads,
        head_dim=m.head_dim,
        mla=m.mla if m.attention == "mla" else None,
        experts=m.experts or 0,
        experts_per_token=m.experts_per_token or 0,
        moe_ffn_hidden_size=m.moe_ffn_hidden_size,
        shared_experts=m.shared_experts,
        dense_layers=m.dense_layers if m.is_moe else 0,
        mtp_layers=m.mtp_layers,
        tied_embeddings=not m.untie_embeddings,
    )


def training_setup(
    manifest: Manifest, runtime: Runtime | None = None, **changes: Any
) -> memory.TrainingSetup:
    """The manifest's training settings under its runtime traits (or `runtime`, another
    profile's); `changes` override fields (the planner's levers)."""
    setup = _training_setup(manifest.training, runtime or manifest.runtime)
    return _changed(setup, tuple(changes.items())) if changes else setup


@lru_cache(maxsize=64)
def _changed(
    setup: memory.TrainingSetup, changes: tuple[tuple[str, Any], ...]
) -> memory.TrainingSetup:
    return replace(setup, **dict(changes))


@lru_cache(maxsize=64)
def _training_setup(t: Training, r: Runtime) -> memory.TrainingSetup:
    return memory.TrainingSetup(
        precision=t.precision,  # type: ignore[arg-type]
        zero_stage=t.zero_stage,
        activation_recompute=t.activation_recompute,  # type: ignore[arg-type]
        recompute_modules=t.recompute_modules,
        recompute_method=t.recompute_method,  # type: ignore[arg-type]
        recompute_num_layers=t.recompute_num_layers,
        micro_batch_size=t.micro_batch_size,
        optimizer_moment_bytes=2 if t.optimizer_moment_dtype == "bf16" else 4,
        # remainders complete a 16-bit weight: not under FP8 primary weights or a ZeRO-0
        # optimizer (NeMo 1 stores full fp32 master weights then; megatron_base_model.py)
        master_remainders=r.master_weights == "bf16_remainder"
        and t.precision in ("bf16", "fp8")
        and t.zero_stage >= 1
        and not (t.precision == "fp8" and r.fp8_param_gather),
        grad_bytes=2 if r.main_grad_dtype == "bf16" else 4,
        bf16_grads_kept=r.bf16_grads_kept,
        fp8_weights=t.precision == "fp8" and r.fp8_param_gather and not r.parameter_transpose_cache,
        fp8_weight_cache=t.precision == "fp8"
        and r.fp8_weight_cache
        and not r.fp8_param_gather
        and r.parameter_transpose_cache,
        activation_fp8=t.activation_storage == "fp8",
        activation_offload=t.activation_offload,
        optimizer_offload=t.optimizer_offload,
        flash_attention=r.flash_attention,
        loss=r.cross_entropy,  # type: ignore[arg-type]
        deferred_grad_sync=r.fsdp_gradient_sync == "deferred",
        dtensor_tp=r.tensor_parallel_impl == "dtensor",
        pipeline_impl=r.pipeline_parallel_impl,  # type: ignore[arg-type]
        tensor_groups=r.tensor_groups,
        model_parallel_group=r.model_parallel_group,
    )


def uncertainty(settings: Mapping[str, Any]) -> memory.Uncertainty:
    u = settings["memory_uncertainty"]
    default = memory.DEFAULT_UNCERTAINTY
    band = u.get("communicators", default.communicators)
    return memory.Uncertainty(
        states=(float(u["states"][0]), float(u["states"][1])),
        activations=(float(u["activations"][0]), float(u["activations"][1])),
        overhead_gib=float(u["runtime_overhead_gib"]),
        # optional keys: a team's block written before they existed keeps the defaults
        communicator_gib=float(u.get("communicator_gib", default.communicator_gib)),
        communicators=(float(band[0]), float(band[1])),
    )


def usable_bytes(manifest: Manifest, settings: Mapping[str, Any]) -> float:
    """The catalog's usable memory less the policy's headroom."""
    return memory.usable_bytes(manifest.cluster.usable_gib, float(settings["memory_headroom"]))


def op_times(settings: Mapping[str, Any]) -> Any:
    """Per-chunk op times in units of one forward chunk, from the policy's ratios."""
    r = settings["op_time_ratios"]
    return _op_times(r["backward"], r["weight"], r["overlapped"])


@lru_cache(maxsize=16)
def _op_times(backward: float, weight: float, overlapped: float) -> Any:
    return OpTimes(1, backward, weight, overlapped)


class Timing(NamedTuple):
    """What `bubble` needs from one exact simulation (Fractions, op-time units)."""

    makespan: Fraction
    busy: tuple[Fraction, ...]
    idle: tuple[Fraction, ...]
    fraction: Fraction  # sum(idle) / (ranks x makespan), exactly (`_remembered_timing` checks it)


# The reference runs (`_simulated_at`) of every schedule at P = 2..64 (interleaving depths
# 2..8) at the shipped op-time ratios, simulated when the wheel was built: a fresh CI runner
# has no per-user cache, and these were half of its extra cost on a 500-file review.
# tests/test_reference_runs.py checks the grid and every run against the simulator, and
# rewrites the file (DPGUARD_UPDATE_GOLDEN=1).
REFERENCE_RUNS = "data/reference-runs.json"


@lru_cache(maxsize=4)
def shipped_runs(times: OpTimes) -> Mapping[str, str]:
    """The shipped reference runs ("schedule P M V" -> timing text) when `times` are the
    ratios they were simulated at; else none. A missing or malformed file only costs time."""
    table = resources.optional_json("dpguard", REFERENCE_RUNS)
    if isinstance(table, dict) and table.get("op_times") == _times_key(times):
        runs = table.get("runs")
        if isinstance(runs, dict):
            return runs
    return {}


def _times_key(times: OpTimes) -> str:
    return f"{times.forward} {times.backward} {times.weight} {times.overlapped}"


@lru_cache(maxsize=256)
def _simulate(schedule: str, ranks: int, microbatches: int, virtual: int, times: Any) -> Timing:
    """The exact simulation's timing: shipped (`shipped_runs`), else remembered in the
    per-user cache (dpguard.cache): the reference runs repeat across manifests (the same P, M
    and op times), and a DualPipe run at P = 32 costs ~20 ms. Entries are keyed by dpguard's
    version and every input; one that is not authenticated or not a simulation's timing
    (`_remembered_timing`) is simulated again."""
    from dpguard import cache

    run = f"{schedule} {ranks} {microbatches} {virtual}"
    shipped = shipped_runs(times).get(run)
    remembered = None if not isinstance(shipped, str) else _remembered_timing(shipped, ranks)
    if remembered is not None:
        return remembered
    key = f"{run} {_times_key(times)}"
    text = cache.recall("simulations", key.encode())
    remembered = None if text is None else _remembered_timing(text, ranks)
    if remembered is not None:
        return remembered
    r = simulate(schedule, ranks, microbatches, times, virtual_stages=virtual)
    timing = Timing(r.makespan, r.busy_per_rank, r.idle_per_rank, r.bubble_fraction)
    values = (timing.makespan, timing.fraction, *timing.busy, *timing.idle)
    cache.remember("simulations", " ".join(map(str, values)), key.encode())
    return timing


# A remembered number as simulate writes it (str of a Fraction): plain digits, so that no
# entry can make Fraction expand an exponent ("1e999999999") or parse a huge numeral
_NUMBER = re.compile(r"\d{1,200}(?:/\d{1,200})?")


def _remembered_timing(text: str, ranks: int) -> Timing | None:
    """The timing a cache entry holds ("makespan fraction busy... idle..."), or None unless it
    is one a simulation could have produced: non-negative numbers, busy + idle = makespan on
    every rank and the fraction their idle share. The entry is authenticated (dpguard.cache);
    this keeps a well-signed but nonsense one from reaching a review."""
    tokens = text.split(None, 2 + 2 * ranks)  # a longer entry is one token too many, not split
    if ranks < 1 or len(tokens) != 2 + 2 * ranks or not all(_NUMBER.fullmatch(t) for t in tokens):
        return None
    try:
        # whole numbers as ints: a P = 64 entry parsed and summed as Fractions took ~0.8 ms
        makespan, fraction, *rest = (Fraction(t) if "/" in t else int(t) for t in tokens)
    except ZeroDivisionError:
        return None
    busy, idle = rest[:ranks], rest[ranks:]
    if makespan <= 0 or any(b + i != makespan for b, i in zip(busy, idle, strict=True)):
        return None
    if fraction != Fraction(sum(idle), ranks * makespan):
        return None
    return Timing(
        Fraction(makespan),
        tuple(map(Fraction, busy)),
        tuple(map(Fraction, idle)),
        Fraction(fraction),
    )


def _virtual(s: Strategy) -> int:
    spec = SCHEDULES.get(s.schedule)  # "none": no pipeline
    return spec.virtual(s.virtual_stages) if spec is not None else 1


# Every rank's idle time stops depending on M once warm-up and cool-down are complete (from
# the schedule's `steady_from` x P on; tests/test_bubble_estimate.py checks it against full
# simulations, at the shipped op-time ratios and others). A run at or beyond that point is
# therefore simulated once, at the smallest valid M there (the reference), and its bubble at M
# follows exactly (see `bubble`): one simulation per schedule, P and V instead of one per M,
# and a small one. The reference run is simulated up to REFERENCE_PAIRS stage-micro-batch
# pairs (DualPipeV at P = 64: 128 stages x M = 128); a run short of the steady regime is
# simulated at its own M up to SIMULATED_PAIRS (about 6 us per pair: 2,048 pairs take ~12 ms).
SIMULATED_PAIRS = 2048
REFERENCE_PAIRS = 16384


def _pairs(s: Strategy, microbatches: int) -> int:
    return SCHEDULES[s.schedule].stages(s.pipeline, _virtual(s)) * microbatches


def _simulated_at(s: Strategy) -> int | None:
    """The micro-batch count `bubble` simulates `s` at: the reference M (above) when `s` is in
    the steady regime and that run is at most REFERENCE_PAIRS, else its own M up to
    SIMULATED_PAIRS; None beyond both."""
    start = SCHEDULES[s.schedule].steady_from * s.pipeline
    for m in range(start, min(s.microbatches, start + 4 * s.pipeline * _virtual(s) + 1) + 1):
        if not check(s.schedule, s.pipeline, m, _virtual(s)):
            return m if _pairs(s, m) <= REFERENCE_PAIRS else None
    return s.microbatches if _pairs(s, s.microbatches) <= SIMULATED_PAIRS else None


def too_large(s: Strategy) -> str | None:
    """Why `s` cannot get an exact bubble within the size limit, or None: such a strategy gets
    no bubble (it is still sized, and judged on memory), never an abort of the whole call."""
    if s.schedule == "none" or _simulated_at(s) is not None:
        return None
    return (
        f"{_pairs(s, 1)} stages x {s.microbatches} micro-batches is too large to simulate "
        f"exactly (limit {REFERENCE_PAIRS:,} stage-micro-batch pairs at the reference M)"
    )


class Bubble(NamedTuple):
    fraction: float
    makespan: float  # in op-time units of the schedule's own chunks
    method: str  # "simulated" | "extrapolated" | "closed form"


def _closed_form(s: Strategy, settings: Mapping[str, Any]) -> tuple[float, float, bool]:
    """(bubble fraction, makespan, exact) from the schedule's published closed form: the
    worst device's idle over its idle plus its work (M micro-batches through each of its
    chunks, F + B each). Exact for the uniform-idle schedules in their regime; for DualPipe(V)
    an estimate of the worst device, which is enough to rank layouts."""
    spec, times, v = SCHEDULES[s.schedule], op_times(settings), _virtual(s)
    form = spec.closed_form(s.pipeline, s.microbatches, v, times)
    idle = max(float(form.value), 0.0)
    chunks = spec.stages(s.pipeline, v) // s.pipeline
    work = s.microbatches * chunks * float(times.forward + times.backward)
    return idle / (idle + work), idle + work, form.exact and spec.uniform_idle


def estimated_bubble(s: Strategy, settings: Mapping[str, Any]) -> float:
    """The closed-form bubble fraction, to rank layouts inside the planner's search (which
    never simulates); the plan page simulates the layout it shows."""
    return _closed_form(s, settings)[0]


def bubble(s: Strategy, settings: Mapping[str, Any]) -> Bubble | None:
    """The exact bubble of `s`, or None when the schedule's constraints reject it:
    - in the steady regime, the simulation at the reference M (`_simulated_at`), extrapolated:
      every rank's idle time is the reference's and its work grows with M, so makespan(M) =
      makespan(ref) + (M - ref) x work per micro-batch and the fraction follows exactly;
    - short of it, the step-by-step simulation at M itself;
    - beyond the size limits, the published closed form where it is exact; else None."""
    v = _virtual(s)
    if s.schedule == "none" or check(s.schedule, s.pipeline, s.microbatches, v):
        return None
    at = _simulated_at(s)
    if at is None:
        fraction, makespan, exact = _closed_form(s, settings)
        return Bubble(fraction, makespan, "closed form") if exact else None
    times = op_times(settings)
    r = _simulate(s.schedule, s.pipeline, at, v, times)
    if at == s.microbatches:
        return Bubble(float(r.fraction), float(r.makespan), "simulated")
    longer = r.busy[0] + _busy_per_microbatch(s, at, r, times) * (s.microbatches - at) + r.idle[0]
    idle = r.fraction * s.pipeline * r.makespan  # every rank's idle time, summed (Timing)
    return Bubble(float(idle / (s.pipeline * longer)), float(longer), "extrapolated")


def _busy_per_microbatch(s: Strategy, at: int, r: Timing, times: OpTimes) -> Fraction:
    """What one more micro-batch adds to a rank's busy time in the steady regime. Busy time
    is affine in M there; it is proportional to M unless the schedule overlaps a forward with
    a backward chunk for less than F + B (DualPipe(V) with a team's `overlapped` ratio): then
    the next valid M's simulation gives the slope (tests/test_bubble_estimate.py)."""
    if (
        FB not in SCHEDULES[s.schedule].op_kinds
        or times.overlapped == times.forward + times.backward
    ):
        return r.busy[0] / at
    v = _virtual(s)
    after = next(
        m for m in range(at + 1, s.microbatches + 1) if not check(s.schedule, s.pipeline, m, v)
    )
    return (_simulate(s.schedule, s.pipeline, after, v, times).busy[0] - r.busy[0]) / (after - at)


@lru_cache(maxsize=1024)
def pipeline_layout(s: Strategy) -> memory.PipelineLayout | None:
    """Stage placement and in-flight micro-batches of `s` from closed forms (no simulation;
    dpguard.schedules.inflight is checked against the simulator in its tests). None when the
    schedule's constraints reject the strategy."""

    if s.schedule == "none":
        return memory.PipelineLayout(1, 1, (0,), (1,))
    if check(s.schedule, s.pipeline, s.microbatches, _virtual(s)):
        return None
    counts = inflight(s.schedule, s.pipeline, s.microbatches, _virtual(s))
    layout = memory.pipeline_layout(s.schedule, s.pipeline, _virtual(s), counts)
    return layout._replace(
        lead=int(s.account_for_embedding),
        tail=int(s.account_for_loss),
        counts=s.stage_layers,
        microbatches=s.microbatches,
    )


def tensor_divides(manifest: Manifest, tensor: int) -> bool:
    """Megatron: attention heads and key-value groups both divide by TP (X010, X022)."""
    m = manifest.model
    return m.attention_heads % tensor == 0 and (m.attention == "mla" or m.kv_heads % tensor == 0)


def parallel_degrees(
    manifest: Manifest, s: Strategy, runtime: Runtime | None = None
) -> memory.ParallelDegrees:
    """`s`'s degrees under the manifest's framework (or `runtime`'s: its expert TP size)."""
    # sequence parallelism as it resolves (unset: on with TP), which is all the memory model
    # reads of it: the planner's SP lever then sizes a layout without TP as the one before it
    written = manifest.training.sequence_parallel
    sp = s.tensor > 1 if written is None else written
    dp = data_parallel(manifest, s)
    return _degrees(s.tensor, s.pipeline, s.expert, s.context, dp, sp, etp(manifest, s, runtime))


@lru_cache(maxsize=1024)
def _degrees(
    tensor: int,
    pipeline: int,
    expert: int,
    context: int,
    dp: int,
    sequence_parallel: bool,
    expert_tensor: int,
) -> memory.ParallelDegrees:
    return memory.ParallelDegrees(
        tensor=tensor,
        pipeline=pipeline,
        data=dp,
        expert=expert,
        context=context,
        expert_tensor=expert_tensor,
        sequence_parallel=sequence_parallel,
    )


# About one entry per file (the verdict's; the search and the remedies read peaks), and each
# key keeps its manifest's document alive: 256 files' worth, not 1,024 (peak memory).
_SIZED: PerSettings[memory.MemoryEstimate | None] = PerSettings(256)


def stage_memory(
    manifest: Manifest,
    s: Strategy,
    settings: Mapping[str, Any],
    training: memory.TrainingSetup | None = None,
    span: bool = False,
    every_rank: bool = True,
) -> memory.MemoryEstimate | None:
    """Memory of every pipeline rank under `s` (None when the schedule rejects the strategy).
    With `span` (a verdict, not the planner's search), a manifest that names no framework gets
    the band of every framework profile: each rank's low bound is the lowest of any profile's,
    its high bound the highest, the central estimate the default profile's; without
    `every_rank` only the worst rank's band spans them (what a verdict reads), the others keep
    the default profile's. Remembered within the call (dpguard.memo): the verdict, its remedies
    and the search size the same layouts."""
    return _SIZED.get(
        settings,
        # a band spans the profiles in effect, a team's too (frameworks.profiles.using)
        (manifest.content, s, training, span, every_rank, profiles.team() if span else ()),
        lambda: estimate_stages(manifest, s, settings, training, span, every_rank),
    )


def states_floor(manifest: Manifest, s: Strategy) -> float:
    """memory.states_floor for `s`: no layout of its degrees holds less on its worst rank."""
    mirror = s.schedule != "none" and SCHEDULES[s.schedule].mirrored
    degrees = parallel_degrees(manifest, s)
    return memory.states_floor(
        architecture(manifest), degrees, training_setup(manifest), s.pipeline, mirror
    )


def stage_peak(
    manifest: Manifest, s: Strategy, settings: Mapping[str, Any], training: memory.TrainingSetup
) -> memory.Peak | None:
    """`estimate_stages`' worst-rank total and largest model states (memory.peak), under
    `training`: what the planner's search reads of a layout until one fits (None when the
    schedule rejects the strategy)."""
    layout = pipeline_layout(s)
    if layout is None:
        return None
    degrees, band = parallel_degrees(manifest, s), uncertainty(settings)
    return memory.peak(architecture(manifest), degrees, training, layout, band)


def estimate_stages(
    manifest: Manifest,
    s: Strategy,
    settings: Mapping[str, Any],
    training: memory.TrainingSetup | None = None,
    span: bool = False,
    every_rank: bool = True,
) -> memory.MemoryEstimate | None:
    """`stage_memory`, not remembered: for the layout search, which remembers its own (and
    is itself remembered whole)."""
    layout = pipeline_layout(s)
    if layout is None:
        return None
    arch, degrees, band = (
        architecture(manifest),
        parallel_degrees(manifest, s),
        uncertainty(settings),
    )
    central = memory.estimate(arch, degrees, training or training_setup(manifest), layout, band)
    stated = manifest.runtime.stated
    variants = []
    if span:
        named = () if stated else alternative_runtimes(manifest, s.schedule)
        variants = [*named, *switched_runtimes(manifest, [("", manifest.runtime), *named])]
    if not span or (stated and not variants):
        line = _runtime_line(manifest)
        return central._replace(assumptions=(*central.assumptions, line), runtime=line)
    worst = central.worst.rank
    # each variant's own degrees too: a framework that never splits the experts over TP
    # (its profile's expert_tensor) holds more expert bytes per GPU at the same layout
    setups = [
        (name, training_setup(manifest, runtime), parallel_degrees(manifest, s, runtime))
        for name, runtime in variants
    ]
    # the ranks whose band spans the profiles: every one, or the worst alone (a deep
    # pipeline's 64 ranks times every profile were most of a review's verdict)
    spanned = range(len(central.ranks)) if every_rank else (worst,)

    def by_rank(t: memory.TrainingSetup, d: memory.ParallelDegrees) -> dict[int, memory.RankMemory]:
        if every_rank:
            return dict(enumerate(memory.estimate(arch, d, t, layout, band).ranks))
        return {worst: memory.rank_estimate(arch, d, t, layout, worst, band)}

    others = [(n, by_rank(t, d)) for n, t, d in setups]
    ranks = list(central.ranks)
    for i in spanned:
        ranks[i] = ranks[i]._replace(
            low=min([ranks[i].low, *(o[i].low for _, o in others)]),
            high=max([ranks[i].high, *(o[i].high for _, o in others)]),
        )
    alternatives = ", ".join(f"{name} {o[worst].total / GIB:.1f}" for name, o in others)
    if stated:
        line = (
            f"{_runtime_line(manifest)}; the band's low end assumes what the framework's own "
            f"flags the manifest leaves unset would save (worst rank: {alternatives} GiB)"
        )
    else:
        line = (
            f"no framework named: the central estimate assumes the {manifest.runtime.profile} "
            f"runtime and the band spans every framework profile that runs {s.schedule}, each "
            "also with the memory-saving flags of its own"
            + (f" (worst rank: {alternatives} GiB)" if others else ", which all price it alike")
            + "; training.framework narrows it"
        )
    return memory.MemoryEstimate(tuple(ranks), (*central.assumptions, line), line)


def _runtime_line(manifest: Manifest) -> str:
    """Which profile's runtime traits an estimate assumed, and what the manifest overrode."""
    profile = profiles.profile(manifest.runtime.profile)
    changed = ", ".join(manifest.runtime.overrides)
    line = f"runtime traits of the {profile.name} profile ({profile.path})"
    return line + (f", overridden: {changed}" if changed else "")


def switched_runtimes(
    manifest: Manifest, runtimes: list[tuple[str, Runtime]]
) -> list[tuple[str, Runtime]]:
    """Each of `runtimes` (a label and a runtime) with the traits its framework lets a run
    change by a flag (Profile.trait_switches) and the manifest leaves unset at the values those
    flags set, labelled with the flags: where that prices memory differently. A run may have
    set them, so a verdict's low bound does not rest on those defaults (docs/memory.md)."""
    out: list[tuple[str, Runtime]] = []
    seen = {training_setup(manifest, r) for _, r in runtimes}
    for label, runtime in runtimes:
        found = switched(manifest, runtime)
        if found is None or training_setup(manifest, found[1]) in seen:
            continue
        seen.add(training_setup(manifest, found[1]))
        out.append((f"{label or runtime.profile} with {found[0]}", found[1]))
    return out


def switched(manifest: Manifest, runtime: Runtime) -> tuple[str, Runtime] | None:
    """(the flags, `runtime` with them): the traits its framework lets a run change by a flag
    that the manifest leaves unset, switched; None when none changes what memory prices."""
    return _switched(manifest.training, runtime, profiles.team())


# By what it reads (the training settings, the runtime and the profiles in effect, a team's
# too: `team` is only the key, profiles.profile reads the same context): every verdict of a
# batch asks it for each framework profile, and a batch's files share a handful of each.
@lru_cache(maxsize=256)
def _switched(
    training: Training, runtime: Runtime, team: tuple[tuple[str, str], ...]
) -> tuple[str, Runtime] | None:
    profile = profiles.profile(runtime.profile)
    flips = profile.switched(runtime.overrides)
    target = _training_setup(training, replace(runtime, **flips))
    if target == _training_setup(training, runtime):
        return None
    # name only the flags that matter here (a bf16 run has no FP8 weight to gather)
    for k in sorted(flips):
        rest = {j: v for j, v in flips.items() if j != k}
        if _training_setup(training, replace(runtime, **rest)) == target:
            flips = rest
    flags = ", ".join(profile.trait_switches[k][0] for k in sorted(flips))
    return flags, replace(runtime, **flips)


def alternative_runtimes(manifest: Manifest, schedule: str) -> tuple[tuple[str, Runtime], ...]:
    """(profile names, runtime) of every framework profile that runs `schedule` ("none": every
    one) and whose runtime prices memory differently from the manifest's own (the default
    profile's when none is named), with the manifest's `runtime:` overrides applied; profiles
    that price alike are named together. A schedule no framework runs (DualPipe) spans none."""
    own = training_setup(manifest)
    groups: dict[memory.TrainingSetup, list[str]] = {own: []}
    runtimes: dict[memory.TrainingSetup, Runtime] = {}
    for name, profile in profiles.load_profiles().items():
        if schedule != "none" and not profile.runs(schedule):
            continue
        runtime = build_runtime(manifest.source.data, name)
        setup = training_setup(manifest, runtime)
        groups.setdefault(setup, []).append(name)
        runtimes.setdefault(setup, runtime)
    return tuple(
        ("/".join(names), runtimes[setup]) for setup, names in groups.items() if setup != own
    )


def verdict(
    manifest: Manifest, estimate: memory.MemoryEstimate, settings: Mapping[str, Any]
) -> str:
    return memory.verdict(estimate.worst, usable_bytes(manifest, settings))


def fits(manifest: Manifest, estimate: memory.MemoryEstimate, settings: Mapping[str, Any]) -> bool:
    """The central estimate of the worst rank fits the usable memory less headroom."""
    return verdict(manifest, estimate, settings) == "fits"


def full_recompute(t: Any) -> dict[str, Any]:
    """The changes to a manifest's (or a TrainingSetup's) training settings that recompute
    every layer, one at a time (Megatron-core's uniform method, one layer per group): what
    the planner and the memory remedies switch to. Empty when it already does."""
    changes: dict[str, Any] = {
        "activation_recompute": "full",
        "recompute_method": "uniform",
        "recompute_num_layers": 1,
    }
    if all(getattr(t, k) == v for k, v in changes.items()):
        return {}
    # named even when already full: the planner orders and explains levers by it
    return {k: v for k, v in changes.items() if k == "activation_recompute" or getattr(t, k) != v}


def remedies(
    manifest: Manifest, s: Strategy, settings: Mapping[str, Any], last_resort: bool = False
) -> tuple[tuple[str, float], ...]:
    """(change, worst-rank GiB after it) for the changes that cut memory without new hardware,
    cheapest first: the framework's own flags the manifest leaves unset, a fused loss, FP8
    activation storage, activation offload, full recompute, twice the tensor parallel size
    inside a node, twice the pipeline depth; with `last_resort`, also the optimizer states in
    host memory (CPU Adam: a slower step) and twice the GPUs (more data parallelism to shard
    the optimizer over). Each is judged alone; a change that does not apply (already set, not
    a valid layout, or saving under 0.05 GiB) is left out."""
    t, m, c = manifest.training, manifest.model, manifest.cluster
    trials: list[tuple[str, Manifest, Strategy, dict[str, Any]]] = []
    flagged = switched(manifest, manifest.runtime)
    if flagged is not None:  # the framework's own flags the manifest leaves unset: no cost
        trials.append((flagged[0], replace(manifest, runtime=flagged[1]), s, {}))
    if manifest.runtime.cross_entropy == "unfused":
        trials.append(("runtime.cross_entropy: fused", manifest, s, {"loss": "fused"}))
    if t.activation_storage != "fp8" and t.activation_recompute != "selective_op":
        # (per-op checkpointing saves bf16 matmul outputs: FP8 input caching changes nothing)
        trials.append(("activation_storage: fp8", manifest, s, {"activation_fp8": True}))
    if not t.activation_offload:
        trials.append(("activation_offload: true", manifest, s, {"activation_offload": True}))
    full = full_recompute(t)
    if full:
        label = ", ".join(f"{k}: {v}" for k, v in full.items() if getattr(t, k) != v)
        trials.append((label, manifest, s, full))
    tp = 2 * s.tensor
    if tp <= c.gpus_per_node and tensor_divides(manifest, tp):
        trials.append((f"tensor: {tp}", manifest, replace(s, tensor=tp), {}))
    if s.schedule != "none" and 2 * s.pipeline <= m.layers:
        trials.append(
            (f"pipeline: {2 * s.pipeline}", manifest, replace(s, pipeline=2 * s.pipeline), {})
        )
    if last_resort and t.optimizer_offload < 1:
        trials.append(("optimizer_offload: 1", manifest, s, {"optimizer_offload": 1.0}))
    if last_resort:
        doubled = replace(manifest, cluster=replace(c, gpus=2 * c.gpus))
        trials.append((f"gpus: {2 * c.gpus}", doubled, s, {}))
    now = _priced(manifest, s, settings, {})
    out = []
    for label, sized, strategy, changes in trials:
        gib = _priced(sized, strategy, settings, changes)
        # a change that saves nothing here (FP8 storage under FP8 compute, offload with one
        # micro-batch in flight) is no remedy
        if gib is not None and (now is None or gib < now - 0.05):
            out.append((label, gib))
    return tuple(out)


def _priced(
    manifest: Manifest, s: Strategy, settings: Mapping[str, Any], changes: dict[str, Any]
) -> float | None:
    """Worst-rank GiB of `s` on `manifest` with training `changes`; None if it cannot be laid
    out (GPUs, expert ranks or the global batch do not divide)."""
    if manifest.cluster.gpus % (s.tensor * s.pipeline * s.context):
        return None
    dp = data_parallel(manifest, s)
    gbs, mbs = manifest.training.global_batch_size, manifest.training.micro_batch_size
    steps = manifest.parallelism.accumulation_steps if manifest.parallelism else 1
    if (s.tensor * s.context * dp) % s.expert or gbs % (mbs * dp * steps):
        return None
    strategy = replace(s, microbatches=gbs // (mbs * dp * steps))
    # only the worst rank's bytes are read: the peak, not the whole estimate
    peak = stage_peak(manifest, strategy, settings, training_setup(manifest, **changes))
    return None if peak is None else peak.total / GIB


def memory_floor(manifest: Manifest) -> float:
    """Bytes per GPU that no layout goes under, with every lever dpguard knows on: each weight
    in 16 bits (8 under FP8, as FP8 primary weights keep it) and a 16-bit gradient, both sharded
    over every GPU (ZeRO-3 or TP x PP x EP), the optimizer states in host memory, no
    activations. Parameter offload (ZeRO-Infinity) is no lever of dpguard's: such a run waives
    the rule that reads this (HR014)."""
    weight = 1.0 if manifest.training.precision == "fp8" else 2.0
    return manifest.model.total_params * (weight + 2.0) / manifest.cluster.gpus


def model_fits_one_gpu(manifest: Manifest, settings: Mapping[str, Any]) -> bool:
    """Would the run certainly need no model parallelism? Weights and gradients replicated on
    every GPU (ZeRO-2/3 sharding of them is itself model-state parallelism, so it is capped at
    stage 1 here), optimizer states sharded over all GPUs, one micro-batch through every
    layer: the estimate's *high* bound fits (HR004 rejects a pipeline only when certain)."""
    rank = memory.fits_one_gpu(
        architecture(manifest),
        training_setup(manifest, zero_stage=min(manifest.training.zero_stage, 1)),
        manifest.cluster.gpus,
        uncertainty(settings),
    )
    return rank.high <= usable_bytes(manifest, settings)


def shape_warnings(manifest: Manifest) -> tuple[tuple[str, str], ...]:
    """(dotted path, message) where the parameter count the shape implies is far from the
    declared one (X025): a `70B` that should be `7B`, or a missing ffn_hidden_size. Skipped
    for MoE models without moe_ffn_hidden_size (the shape does not fix the experts' size)."""
    m = manifest.model
    if m.is_moe and m.moe_ffn_hidden_size is None:
        return ()
    arch = architecture(manifest)
    derived = memory.shape_total_params(arch)
    # published counts often leave the embedding matrices out (Moonlight's 2.24B activated,
    # Megatron's non-embedding parameters): either reading is the model's size
    embeddings = memory.embedding_matrices(arch) * m.vocab_size * m.hidden_size
    out = []
    for key, written, implied in zip(
        ("total_params", "active_params"), (m.total_params, m.active_params), derived, strict=True
    ):
        if key == "active_params" and not m.is_moe:
            continue
        if all(
            max(count / written, written / count) > SHAPE_TOLERANCE
            for count in (implied, implied - embeddings)
            if count > 0
        ):
            experts = f", {m.experts} experts of {m.moe_ffn_hidden_size}" if m.is_moe else ""
            shapers = "ffn_hidden_size, ffn_activation, "
            shapers += "the mla ranks" if m.attention == "mla" else "kv_heads"
            if m.is_moe:
                shapers += ", shared_experts, dense_layers"
            shapers += " and untie_embeddings"
            out.append(
                (
                    f"model.{key}",
                    f"the shape ({m.layers} layers, hidden {m.hidden_size}, FFN "
                    f"{m.ffn_hidden_size} {m.ffn_activation}{experts}, vocab {m.vocab_size}) "
                    f"implies about {format_quantity(implied, 3)} parameters, but {key} is "
                    f"{format_quantity(written, 3)}: check both ({shapers} shape the count)",
                )
            )
    return tuple(out)


# Kimi K2's 67M tokens per step (arXiv 2507.20534 §3.1) is the largest published batch we know
# (DeepSeek-V3: 15,360 x 4,096 = 63M); a batch over this many tokens was most likely written in
# tokens, not sequences.
TOKEN_BATCH_LIMIT = 10**9
LARGEST_PUBLISHED_BATCH = "67M tokens, Kimi K2"


def manifest_warnings(manifest: Manifest) -> tuple[tuple[str, str, str], ...]:
    """(code, dotted path, message) of every warning about the manifest itself (its shape and
    its batch), which no layout changes: the validator reports them, the plan keeps them."""
    shape = tuple(("X025", where, message) for where, message in shape_warnings(manifest))
    return shape + batch_warnings(manifest)


def batch_warnings(manifest: Manifest) -> tuple[tuple[str, str, str], ...]:
    """(code, dotted path, message) for global batches that cannot be meant: X026 when the
    batch times the sequence length is far above any published run (a token count written as
    sequences), X027 when it is prime (data parallelism can only be 1 or the whole batch), X028
    when it shares no factor with a multi-node GPU count (data parallelism can only be 1)."""
    gbs, seq = manifest.training.global_batch_size, manifest.model.seq_len
    out = []
    tokens = gbs * seq
    if tokens > TOKEN_BATCH_LIMIT:
        meant = f"{gbs // seq:,} sequences" if gbs >= seq else "far fewer sequences"
        out.append(
            (
                "X026",
                "training.global_batch_size",
                f"global_batch_size {gbs:,} x seq_len {seq:,} = {format_quantity(tokens, 3)} "
                f"tokens per step, more than {format_quantity(TOKEN_BATCH_LIMIT, 3)} (the largest "
                "published batch is "
                f"{LARGEST_PUBLISHED_BATCH}); global_batch_size counts sequences: if "
                f"{gbs:,} is tokens, that is {meant}",
            )
        )
    prime = gbs > 3 and all(gbs % d for d in range(2, math.isqrt(gbs) + 1))
    c = manifest.cluster
    if not prime and c.gpus > c.gpus_per_node and math.gcd(gbs, c.gpus) == 1:
        nodes = -(-c.gpus // c.gpus_per_node)
        below = gbs // nodes * nodes
        nearby = f"{below:,} or {below + nodes:,}" if below else f"{nodes:,}"
        out.append(
            (
                "X028",
                "training.global_batch_size",
                f"global_batch_size {gbs:,} shares no factor with the {c.gpus:,} GPUs: data "
                f"parallelism can only be 1, so all {c.gpus:,} GPUs must form one tensor x "
                f"pipeline group; a batch such as {nearby} (a multiple of the {nodes:,} nodes) "
                "splits",
            )
        )
    if prime:
        nice = max(8, round(gbs / 8) * 8)
        out.append(
            (
                "X027",
                "training.global_batch_size",
                f"global_batch_size {gbs:,} is prime: it divides over data parallelism only "
                f"as 1 or {gbs:,} replicas (one sequence each, so a pipeline gets a single "
                f"micro-batch); a batch such as {nice:,} splits",
            )
        )
    return tuple(out)


# A shape-derived count further than this factor from the declared one is a warning. Llama 3,
# GPT-3 and DeepSeek-V3 written in full land within 2 % of their published counts; Llama-style
# models written with the default 4h GeLU MLP and MHA within 10 %.
SHAPE_TOLERANCE = 1.25


def efficiency(manifest: Manifest, settings: Mapping[str, Any]) -> float:
    table = settings["efficiency"]
    return float(table.get(manifest.cluster.accelerator, table["default"]))


def ideal_gpu_hours(manifest: Manifest, settings: Mapping[str, Any]) -> float:
    """GPU-hours with no bubble: 6 x active params x tokens at peak x efficiency (compute.py)."""
    flops = compute.training_flops(manifest.model.active_params, manifest.training.tokens)
    return compute.gpu_hours(
        flops, manifest.cluster.peak_tflops_bf16, efficiency(manifest, settings)
    )


def gpu_hours(manifest: Manifest, bubble: float, settings: Mapping[str, Any]) -> float:
    return compute.hours_with_bubble(ideal_gpu_hours(manifest, settings), bubble)
