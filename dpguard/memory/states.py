"""Parallel degrees, the training setup (precision, ZeRO, recompute, runtime traits) and
the model-state bytes per parameter they give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from dpguard.memory.shape import (
    DEFAULT_RECOMPUTE_MODULES,
    Loss,
    PipelineImpl,
    Precision,
    Recompute,
    RecomputeMethod,
)

# ---- Parallel layout and training setup -------------------------------------------------------


@dataclass(frozen=True)
class ParallelDegrees:
    """Degrees of one run. `pipeline` counts pipeline ranks (devices). `expert_tensor` None =
    `tensor`. `sequence_parallel` None: on when tensor > 1 (Megatron's recommendation)."""

    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    expert: int = 1
    context: int = 1
    expert_tensor: int | None = None
    sequence_parallel: bool | None = None

    def __post_init__(self) -> None:
        degrees = (self.tensor, self.pipeline, self.data, self.expert, self.context)
        if min(*degrees, self.etp) < 1:
            raise ValueError("parallel degrees must be >= 1")

    @property
    def etp(self) -> int:
        return self.tensor if self.expert_tensor is None else self.expert_tensor

    @property
    def sp(self) -> bool:
        return self.tensor > 1 if self.sequence_parallel is None else self.sequence_parallel

    @property
    def expert_data(self) -> float:
        """ZeRO degree of expert parameters: EP x ETP x EDP = TP x CP x DP."""
        return self.tensor * self.context * self.data / (self.expert * self.etp)


@dataclass(frozen=True)
class TrainingSetup:
    precision: Precision = "bf16"
    zero_stage: int = 1
    activation_recompute: Recompute = "none"
    recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES
    # full recompute: every layer in groups of recompute_num_layers (uniform), or only the
    # first recompute_num_layers of each stage (block; Megatron-core's --recompute-method)
    recompute_method: RecomputeMethod = "uniform"
    recompute_num_layers: int = 1
    micro_batch_size: int = 1
    optimizer_moment_bytes: int = 4  # 2 for BF16 moments
    # the optimizer keeps only the 16 bits a bf16 weight lacks of its fp32 master copy
    # (runtime.master_weights: bf16_remainder): 2 B instead of 4
    master_remainders: bool = False
    grad_bytes: int = 4  # 2 for BF16 main grads (bf16/fp8 training; fp16 keeps 2 anyway)
    bf16_grads_kept: bool = False  # DeepSpeed's BF16_Optimizer: bf16 grads beside the main grads
    fp8_weights: bool = False  # FP8 primary weights with no cached transpose: 1 B per weight
    fp8_weight_cache: bool = False  # TE's FP8 copy + transpose beside BF16 weights: 2 B more
    activation_fp8: bool = False  # activation_storage: fp8
    activation_offload: bool = False
    optimizer_offload: float = 0.0
    flash_attention: bool = True
    loss: Loss = "fused"  # the cross-entropy implementation (runtime.cross_entropy)
    # FSDP holds the unsharded gradients across a step's backward passes instead of
    # reduce-scattering each (runtime.fsdp_gradient_sync: deferred)
    deferred_grad_sync: bool = False
    dtensor_tp: bool = False  # tensor_parallel_impl: dtensor (PyTorch DTensor, torchtitan)
    pipeline_impl: PipelineImpl = "megatron"  # the pipeline runtime (pipeline_parallel_impl)
    # the framework's process groups beyond one per parallel dimension (profile
    # `process_groups`): groups over the tensor-parallel ranks, a model-parallel group
    tensor_groups: int = 1
    model_parallel_group: bool = False

    def __post_init__(self) -> None:
        if (
            self.zero_stage not in (0, 1, 2, 3)
            or min(self.micro_batch_size, self.recompute_num_layers) < 1
        ):
            raise ValueError(
                "zero_stage must be 0..3, micro_batch_size and recompute_num_layers >= 1"
            )
        if {self.optimizer_moment_bytes, self.grad_bytes} - {2, 4}:
            raise ValueError("moment and gradient bytes must be 2 or 4")
        if not 0 <= self.optimizer_offload <= 1:
            raise ValueError("optimizer_offload must be within 0..1")

    @property
    def modules(self) -> frozenset[str]:
        """Recomputed modules under selective recompute (none: nothing, full: handled apart)."""
        if self.activation_recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules)


class StateBytes(NamedTuple):
    weights: float
    gradients: float
    optimizer: float


def state_bytes(training: TrainingSetup) -> StateBytes:
    """Unsharded bytes/param (Megatron dist_optimizer.md: bf16/fp32 18 B, fp16/fp16 20 B). FP8
    training keeps BF16 weights and casts per GEMM, or with FP8 primary weights (Megatron's
    --fp8-param-gather) FP8 data plus the transpose Transformer Engine caches for the backward
    pass: 2 B either way, 1 B when that cache is off (--disable-parameter-transpose-cache).
    The embedding and output layer stay BF16 but are priced at 1 B too (a small under-count).
    Apex's DistributedFusedAdam with store_param_remainders (NeMo 1's choice for bf16 weights
    under its distributed optimizer) keeps only the low 16 bits of each fp32 master weight,
    the bf16 weight being its high half: 2 B of master weight instead of 4.
    Without FP8 primary weights, Transformer Engine under Megatron-core caches each weight's
    FP8 cast and its transpose for the step (is_first_microbatch; extensions/transformer_engine.py)
    beside the BF16 weight: 4 B (the embedding, never cast, is priced so too: errs large).
    DeepSpeed's BF16_Optimizer keeps the bf16 gradients the backward writes beside its fp32
    buffer (runtime/bf16_optimizer.py: update_hp_grads(clear_lp_grads=False) in the pipeline
    engine; the BLOOM README's "2 + 4 + 12/DP" leaves them out): 2 B more. Under fp16 the
    optimizer's fp32 copy of the gradients (Megatron's 20 B counts it) exists only at the step:
    `step_copy_bytes`."""
    moments = 2.0 * training.optimizer_moment_bytes
    if training.precision == "fp16":
        return StateBytes(2.0, 2.0, 4.0 + moments)
    weights = 1.0 if training.fp8_weights else 4.0 if training.fp8_weight_cache else 2.0
    grads = training.grad_bytes + (2.0 if training.bf16_grads_kept else 0.0)
    master = 2.0 if training.master_remainders else 4.0
    return StateBytes(weights, float(grads), master + moments)


def step_copy_bytes(training: TrainingSetup) -> float:
    """Unsharded bytes/param a mixed-precision optimizer allocates at the step only: under fp16
    the fp32 copy of the fp16 gradients its master weights step with (Megatron
    optimizer.py _copy_model_grads_to_main_grads, `main_grad.float()`, freed by the next
    zero_grad; DeepSpeed FP16_Optimizer and ZeRO-1/2 flatten them into fp32 likewise), sharded
    like the optimizer states."""
    return 4.0 if training.precision == "fp16" else 0.0


def sharded_bytes(
    training: TrainingSetup, degree: float, zero_stage: int | None = None
) -> StateBytes:
    """Per-GPU bytes/param after ZeRO over `degree` ranks and optimizer offload; `zero_stage`
    in place of the training's (what FSDP holds under a pipeline: the bytes per parameter do
    not depend on the stage, so no copy of the setup is built for it)."""
    s = state_bytes(training)
    z = training.zero_stage if zero_stage is None else zero_stage
    return StateBytes(
        s.weights / degree if z >= 3 else s.weights,
        s.gradients / degree if z >= 2 else s.gradients,
        s.optimizer * (1 - training.optimizer_offload) / (degree if z >= 1 else 1),
    )
