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
  total device time, Σidle / (devices x makespan) (schedules.md §1). Megatron's (p-1)/m is idle
  relative to *ideal* time; convert it with `bubble_share_from_ratio` (schedules.md §8 item 8).
* Op times of one stage chunk for one micro-batch. F from its FLOPs; B (full backward), W
  (weight-gradient part) and F&B (one overlapped forward + backward pair) as multiples of F.
  The multiples are policy data and are parameters here. Commonly used values: B = 2F for
  matmul-dominated layers (the backward computes input and weight gradients, each as many FLOPs
  as the forward: the 6N = 2N + 4N split above); W = F (the weight-gradient half of B; DualPipe
  and Zero Bubble cost models use F = 1, B = 2, W = 1, schedules.md §4); F&B between max(F, B)
  (perfect overlap) and F + B (none), e.g. 2.5 or 3 in schedules.md §4; full recompute adds a
  forward to the backward (B = 3F).
"""

from __future__ import annotations

from dataclasses import dataclass

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


def achieved_tflops(flops: float, gpu_hours_spent: float) -> float:
    """Average model TFLOP/s per GPU that `gpu_hours_spent` implies for `flops`."""
    if gpu_hours_spent <= 0:
        raise ValueError("gpu_hours_spent must be positive")
    return flops / (gpu_hours_spent * SECONDS_PER_HOUR) / TFLOPS


def implied_efficiency(flops: float, gpu_hours_spent: float, peak_tflops: float) -> float:
    """The MFU a published (FLOPs, GPU-hours) pair implies against `peak_tflops`."""
    return achieved_tflops(flops, gpu_hours_spent) / peak_tflops


def _check_bubble(bubble_fraction: float) -> None:
    if not 0 <= bubble_fraction < 1:
        raise ValueError("bubble_fraction must be in [0, 1) (idle share of total device time)")


def hours_with_bubble(ideal_hours: float, bubble_fraction: float) -> float:
    """Busy time stretched by idle: ideal / (1 - bubble), bubble = Σidle / (devices x makespan)."""
    _check_bubble(bubble_fraction)
    return ideal_hours / (1.0 - bubble_fraction)


def bubble_share_from_ratio(idle_over_ideal: float) -> float:
    """Convert idle/ideal (Megatron's (p-1)/m, arXiv 2104.04473 §2.2.1) to idle/total: r/(1+r)."""
    if idle_over_ideal < 0:
        raise ValueError("idle_over_ideal must be >= 0")
    return idle_over_ideal / (1.0 + idle_over_ideal)


def gpu_hours_saved(ideal_hours: float, baseline_bubble: float, other_bubble: float) -> float:
    """GPU-hours a schedule saves against a baseline (e.g. 1F1B) for the same ideal work.

    Both bubbles are idle shares of total time; negative when `other` idles more."""
    return hours_with_bubble(ideal_hours, baseline_bubble) - hours_with_bubble(
        ideal_hours, other_bubble
    )


def forward_flops(active_params: float, tokens: float) -> float:
    """Forward GEMM FLOPs of a chunk for `tokens` tokens: 2 x params x tokens (one multiply-add
    per parameter per token; the 2N of 6N)."""
    if active_params < 0 or tokens <= 0:
        raise ValueError("active_params must be >= 0 and tokens positive")
    return 2.0 * active_params * tokens


def attention_forward_flops(layers: int, micro_batch: int, seq_len: int, hidden: int) -> float:
    """Attention-score FLOPs not counted by 2N: 4·b·s²·h per layer (QKᵀ and scores x V,
    Korthikanti arXiv 2205.05198 App. A: layer forward = 24bsh² + 4bs²h), causal mask ignored."""
    return 4.0 * layers * micro_batch * seq_len**2 * hidden


@dataclass(frozen=True)
class OpRatios:
    """B, W and F&B as multiples of F (policy data; see the module docstring for common values)."""

    backward: float
    weight_grad: float
    overlapped: float

    def __post_init__(self) -> None:
        # schedules.md §8 item 11: W > B (I < 0), F&B < max(F, B) and F&B > F + B are unphysical.
        if self.backward <= 0 or not 0 <= self.weight_grad <= self.backward:
            raise ValueError("need backward > 0 and 0 <= weight_grad <= backward")
        if not max(1.0, self.backward) <= self.overlapped <= 1.0 + self.backward:
            raise ValueError("overlapped F&B must lie in [max(F, B), F + B]")


@dataclass(frozen=True)
class OpTimes:
    """Seconds of one chunk for one micro-batch: F, full B, W, and overlapped F&B."""

    forward: float
    backward: float
    weight_grad: float
    overlapped: float

    @property
    def input_grad(self) -> float:
        """I = B - W, the part of the backward on the critical path (zero-bubble split)."""
        return self.backward - self.weight_grad


def seconds_for(flops: float, peak_tflops: float, efficiency: float) -> float:
    """Time of `flops` at `efficiency` x dense peak."""
    _check_rate(peak_tflops, efficiency)
    return flops / (peak_tflops * TFLOPS * efficiency)


def op_times(forward_seconds: float, ratios: OpRatios) -> OpTimes:
    """F, B, W, F&B from F and the ratios."""
    if forward_seconds <= 0:
        raise ValueError("forward_seconds must be positive")
    return OpTimes(
        forward=forward_seconds,
        backward=forward_seconds * ratios.backward,
        weight_grad=forward_seconds * ratios.weight_grad,
        overlapped=forward_seconds * ratios.overlapped,
    )


def chunk_op_times(
    active_params_in_chunk: float,
    tokens_per_microbatch: float,
    peak_tflops: float,
    efficiency: float,
    ratios: OpRatios,
    extra_forward_flops: float = 0.0,
) -> OpTimes:
    """Op times of one stage chunk: F = (2 x params x tokens + extra) / (peak x efficiency).

    `extra_forward_flops` takes e.g. `attention_forward_flops` for long sequences. Pass the
    chunk's share of *active* parameters for MoE models, divided by TP when TP splits it."""
    flops = forward_flops(active_params_in_chunk, tokens_per_microbatch) + extra_forward_flops
    return op_times(seconds_for(flops, peak_tflops, efficiency), ratios)
