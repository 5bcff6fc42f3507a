"""From a manifest and a candidate strategy to numbers: memory per GPU, bubble, GPU-hours.

The one bridge between the normalised `Manifest` and the pure models (`dpguard.memory`,
`dpguard.compute`, `dpguard.schedules`), shared by the policy facts and the planner. Every
assumption (headroom, activation coefficient, op-time ratios, efficiency) comes from the policy
settings (`policies/planner.yaml`), never from constants here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dpguard import compute, memory
from dpguard.manifest import Manifest

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


def data_parallel(manifest: Manifest, s: Strategy) -> int:
    return manifest.cluster.gpus // (s.tensor * s.pipeline * s.context)


def expert_tensor(tensor: int, expert: int, context: int, data: int) -> int:
    """Expert tensor-parallel size: Megatron's default ETP = TP when EP x TP divides
    TP x CP x DP; otherwise 1 (torchtitan's and DeepSeek's layout, the one the validator's X009
    rule accepts: EP | TP x CP x DP). ETP = 1 holds more expert bytes per GPU: it errs large."""
    return tensor if (tensor * context * data) % (expert * tensor) == 0 else 1


def model_shape(manifest: Manifest, settings: Mapping[str, Any]) -> memory.ModelShape:
    m = manifest.model
    return memory.ModelShape(
        total_params=m.total_params,
        layers=m.layers,
        hidden_size=m.hidden_size,
        attention_heads=m.attention_heads,
        seq_len=m.seq_len,
        vocab_size=m.vocab_size,
        active_params=m.active_params if m.is_moe else None,
        experts=m.experts or 0,
        experts_per_token=m.experts_per_token or 0,
        tied_embeddings=not (manifest.parallelism and manifest.parallelism.untie_embeddings),
        activation_coefficient=float(settings["activation_coefficient"]),
    )


def training_setup(manifest: Manifest, zero_stage: int | None = None) -> memory.TrainingSetup:
    t = manifest.training
    return memory.TrainingSetup(
        precision=t.precision,  # type: ignore[arg-type]
        zero_stage=t.zero_stage if zero_stage is None else zero_stage,
        activation_recompute=t.activation_recompute,  # type: ignore[arg-type]
        micro_batch_size=t.micro_batch_size,
    )


def op_times(settings: Mapping[str, Any]) -> Any:
    """Per-chunk op times in units of one forward chunk, from the policy's ratios."""
    r = settings["op_time_ratios"]
    return _op_times(r["backward"], r["weight"], r["overlapped"])


@lru_cache(maxsize=16)
def _op_times(backward: float, weight: float, overlapped: float) -> Any:
    from dpguard.schedules import OpTimes

    return OpTimes(1, backward, weight, overlapped)


@lru_cache(maxsize=256)
def _simulate(schedule: str, ranks: int, microbatches: int, virtual: int, times: Any) -> Any:
    from dpguard.schedules import simulate

    return simulate(schedule, ranks, microbatches, times, virtual_stages=virtual)


def simulation(s: Strategy, settings: Mapping[str, Any]) -> Any | None:
    """The exact simulation of `s`, or None when the schedule's constraints reject it."""
    from dpguard.schedules import check

    virtual = s.virtual_stages if s.schedule == "interleaved-1f1b" else 1
    if s.schedule == "none" or check(s.schedule, s.pipeline, s.microbatches, virtual):
        return None
    return _simulate(s.schedule, s.pipeline, s.microbatches, virtual, op_times(settings))


def stage_memory(
    manifest: Manifest, s: Strategy, settings: Mapping[str, Any]
) -> memory.MemoryBreakdown | None:
    """Memory of the worst GPU under `s`, with the schedule's in-flight activations counted on
    the simulated timeline (None when the schedule rejects the strategy)."""
    if s.schedule == "none":
        units, virtual, copies, v_shape = 1.0, 1, 1, False
    else:
        result = simulation(s, settings)
        if result is None:
            return None
        from dpguard.schedules import SCHEDULES

        units = float(max(result.peak_activations_per_rank))
        # The registry's copies relative to 1F1B on the same devices: DualPipe keeps two model
        # copies (arXiv 2412.19437 Table 2); DualPipeV's two 1/(2N) chunks weigh as one 1/N.
        copies = int(SCHEDULES[s.schedule].param_copies)
        v_shape = s.schedule == "dualpipev"
        virtual = 2 if v_shape else result.virtual_stages
    dp = data_parallel(manifest, s)
    parallel = memory.ParallelDegrees(
        tensor=s.tensor,
        pipeline=s.pipeline,
        data=dp,
        expert=s.expert,
        context=s.context,
        virtual_stages=virtual,
        expert_tensor=expert_tensor(s.tensor, s.expert, s.context, dp),
    )
    return memory.memory_per_gpu(
        model_shape(manifest, settings),
        parallel,
        training_setup(manifest),
        memory.ScheduleMemory(units, None, copies, v_shape),
    )


def fits(
    manifest: Manifest, breakdown: memory.MemoryBreakdown, settings: Mapping[str, Any]
) -> bool:
    return memory.fits(breakdown, manifest.cluster.memory_gb, float(settings["memory_headroom"]))


def model_fits_one_gpu(manifest: Manifest, settings: Mapping[str, Any]) -> bool:
    """Would the run need no model parallelism at all? Weights and gradients replicated on every
    GPU (ZeRO-2/3 sharding of them is itself model-state parallelism, so it is capped at stage
    1 here), optimizer states sharded over all GPUs, one micro-batch through every layer."""
    return memory.model_fits_one_gpu(
        model_shape(manifest, settings),
        training_setup(manifest, zero_stage=min(manifest.training.zero_stage, 1)),
        manifest.cluster.memory_gb,
        float(settings["memory_headroom"]),
        data_parallel=manifest.cluster.gpus,
    )


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
