"""The step-time model (docs/performance.md): a layout's step time, throughput, MFU and
GPU-hours, with the breakdown of where the time goes. Constants: policies/performance/model.yaml."""

from dpguard.perf.model import BREAKDOWN, Layout, MissingHardware, Prediction
from dpguard.perf.step import layout_of, model_flops_per_token, predict, predicted

__all__ = [
    "BREAKDOWN",
    "Layout",
    "MissingHardware",
    "Prediction",
    "layout_of",
    "model_flops_per_token",
    "predict",
    "predicted",
]
