"""Per-GPU training memory of every pipeline rank: model states + activations (pure functions).

Sources (docs/memory.md has the whole derivation, the calibration table and the departures from
Megatron-LM's `theoretical_memory_usage.py`):

* Model-state bytes per parameter: Megatron-LM docs/user-guide/features/dist_optimizer.md (bf16
  params + fp32 main grads + fp32 master + Adam moments: 18 B, 6 + 12/d with the distributed
  optimizer); BF16 moments 2 + 4 + 8/d (DeepSeek-V3, arXiv 2412.19437 §3.3.3; Megatron's
  precision-aware optimizer); ZeRO stages (arXiv 1910.02054 Fig. 1); optimizer offload removes
  the offloaded fraction of the optimizer bytes (Kimi K2, arXiv 2507.20534 §2.4.2).
* Parameter groups per stage: Megatron's split (theoretical_memory_usage.py L214-267): attention,
  dense MLP, shared experts and vocab matrices / TP; routed experts / (EP x ETP). The leading
  `dense_layers` are dense, the rest MoE; the embedding sits on the first stage, the output layer
  (a copy of the tied embedding too, when P > 1) and the MTP layers on the last one.
* Activations: per layer and per token, the tensors each block keeps for its backward pass
  (Korthikanti et al. arXiv 2205.05198 §4.1 for the GPT block, which this reproduces exactly:
  18h + 4 ffn + 5as with dropout; docs/memory.md (b) for GQA, SwiGLU, MLA and MoE with top-k
  token copies), each tagged with what removes it: a Megatron-core recompute module
  (transformer_config.py `recompute_modules`), FP8 storage (TE caches FP8 GEMM inputs; DeepSeek-V3
  §3.3.3 and Kimi K2 §2.4.3 also SwiGLU inputs), sequence parallelism (Korthikanti §4.2.2).
* In-flight micro-batches per rank from closed forms checked against the simulator
  (dpguard.schedules.inflight); DualPipe keeps a second copy of the mirrored stage (arXiv
  2412.19437 Table 2).
"""

from __future__ import annotations

from dpguard.memory.activations import (
    TokenBytes,
    _expert_width,
    _on_one_gpu,
    layer_activation_bytes,
    layer_token_bytes,
    layer_wgrad_bytes,
    op_checkpoint_token_bytes,
    wgrad_token_bytes,
)
from dpguard.memory.estimate import (
    _LOSS_CHUNKS,
    _RUNTIME_NOTES,
    DEFAULT_UNCERTAINTY,
    MemoryEstimate,
    Peak,
    PipelineLayout,
    RankMemory,
    Uncertainty,
    _assumptions,
    _bf16_pipe_reduce,
    _runtime_buffers,
    _stage_params,
    _StageStates,
    _sum_states,
    communicators,
    estimate,
    fits_one_gpu,
    output_bytes,
    peak,
    pipeline_layout,
    rank_estimate,
    stage_layers,
    states_floor,
    usable_bytes,
    verdict,
)
from dpguard.memory.shape import (
    DEFAULT_RECOMPUTE_MODULES,
    FP8_BYTES,
    GIB,
    MLA,
    Architecture,
    LayerParams,
    Loss,
    ParamLayout,
    PipelineImpl,
    Precision,
    Recompute,
    RecomputeMethod,
    _mlp_params,
    attention_params,
    embedding_matrices,
    layer_params,
    shape_layer_params,
    shape_total_params,
)
from dpguard.memory.states import (
    ParallelDegrees,
    StateBytes,
    TrainingSetup,
    sharded_bytes,
    state_bytes,
    step_copy_bytes,
)

__all__ = [
    "DEFAULT_RECOMPUTE_MODULES",
    "DEFAULT_UNCERTAINTY",
    "FP8_BYTES",
    "GIB",
    "MLA",
    "_LOSS_CHUNKS",
    "_RUNTIME_NOTES",
    "Architecture",
    "LayerParams",
    "Loss",
    "MemoryEstimate",
    "ParallelDegrees",
    "ParamLayout",
    "Peak",
    "PipelineImpl",
    "PipelineLayout",
    "Precision",
    "RankMemory",
    "Recompute",
    "RecomputeMethod",
    "StateBytes",
    "TokenBytes",
    "TrainingSetup",
    "Uncertainty",
    "_StageStates",
    "_assumptions",
    "_bf16_pipe_reduce",
    "_expert_width",
    "_mlp_params",
    "_on_one_gpu",
    "_runtime_buffers",
    "_stage_params",
    "_sum_states",
    "attention_params",
    "communicators",
    "embedding_matrices",
    "estimate",
    "fits_one_gpu",
    "layer_activation_bytes",
    "layer_params",
    "layer_token_bytes",
    "layer_wgrad_bytes",
    "op_checkpoint_token_bytes",
    "output_bytes",
    "peak",
    "pipeline_layout",
    "rank_estimate",
    "shape_layer_params",
    "shape_total_params",
    "sharded_bytes",
    "stage_layers",
    "state_bytes",
    "states_floor",
    "step_copy_bytes",
    "usable_bytes",
    "verdict",
    "wgrad_token_bytes",
]
