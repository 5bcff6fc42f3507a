"""Training compute, GPU-hours and per-chunk op times (pure functions).

Sources: /work/shared/docs/domain.md (c) and schedules.md §1/§8.

* Total training FLOPs = 6 x N_active x D (forward 2N + backward 4N per token). It reproduces
  Llama 3 405B's published 3.8e25 FLOPs on 15.6T tokens (arXiv 2407.21783 §1); for MoE, N is the
  *active* parameter count (DeepSeek-V3 arXiv 2412.19437 §4.4.2). It ignores attention-score
  FLOPs, so efficiencies derived from it are lower bounds of MFU (domain.md (c)).
* GPU-hours = FLOPs / (dense peak x efficiency x 3600) / goodput. `efficiency` is MFU against the
  catalog's dense BF16 peak (model FLOPs only: recompute cost shows up as lower MFU, Korthikanti
  §6.3); `goodput` is the share of wall time spent training (restarts, checkpoints; Llama 3
  §3.3.4 reports > 90 %).
* A pipeline bubble stretches the time: hours = ideal / (1 - bubble) with bubble = idle share of
  total device time, Σidle / (devices x makespan) (schedules.md §1); Megatron's (p-1)/m is idle
  relative to *ideal* time, r, whose share of the total is r / (1 + r) (schedules.md §8 item 8).
* The forward of one stage chunk: 2 x params x tokens FLOPs. B (full backward), W and F&B are
  multiples of F from the policy's `op_time_ratios` (policies/planner.yaml cites them); the
  simulator's OpTimes checks that they are physical.
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0
TFLOPS = 1e12


def training_flops(active_params: float, tokens: float) -> float:
    """6 x N_active x D (arXiv 2407.21783 §1; MoE: arXiv 2412.19437 §4.4.2)."""
    if active_params <= 0 or tokens <= 0:
        raise ValueError("active_params and tokens must be positive")
    return 6.0 * active_params * tokens


def _check_rate(peak_tflops: float, efficiency: float) -> None:
    if peak_tflops <= 0 or not 0 < efficiency <= 1:
        raise ValueError("peak_tflops must be positive and efficiency in (0, 1]")


def gpu_hours(flops: float, peak_tflops: float, efficiency: float, goodput: float = 1.0) -> float:
    """FLOPs / (peak x 1e12 x efficiency x 3600) / goodput (domain.md (c) "GPU-hours")."""
    _check_rate(peak_tflops, efficiency)
    if not 0 < goodput <= 1:
        raise ValueError("goodput must be in (0, 1]")
    return flops / (peak_tflops * TFLOPS * efficiency * SECONDS_PER_HOUR) / goodput


def _check_bubble(bubble_fraction: float) -> None:
    if not 0 <= bubble_fraction < 1:
        raise ValueError("bubble_fraction must be in [0, 1) (idle share of total device time)")


def hours_with_bubble(ideal_hours: float, bubble_fraction: float) -> float:
    """Busy time stretched by idle: ideal / (1 - bubble), bubble = Σidle / (devices x makespan)."""
    _check_bubble(bubble_fraction)
    return ideal_hours / (1.0 - bubble_fraction)


def forward_flops(active_params: float, tokens: float) -> float:
    """Forward GEMM FLOPs of a chunk for `tokens` tokens: 2 x params x tokens (one multiply-add
    per parameter per token; the 2N of 6N)."""
    if active_params < 0 or tokens <= 0:
        raise ValueError("active_params must be >= 0 and tokens positive")
    return 2.0 * active_params * tokens


def seconds_for(flops: float, peak_tflops: float, efficiency: float) -> float:
    """Time of `flops` at `efficiency` x dense peak."""
    _check_rate(peak_tflops, efficiency)
    return flops / (peak_tflops * TFLOPS * efficiency)
