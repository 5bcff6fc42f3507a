"""Megatron-Bridge YAML (`bridge`): the ConfigContainer's `model:`, `train:`, `ddp:`,
`optimizer:`, `dataset:` and `mixed_precision` (docs/frameworks.md)."""

from __future__ import annotations

from dpguard.frameworks import megatron
from dpguard.frameworks.common import config_lengths, section_args, seq_facts
from dpguard.frameworks.megatron import Arg
from dpguard.frameworks.model import Extract, Origin
from dpguard.yamlevents import SourceDoc


def read(doc: SourceDoc) -> Extract:
    args = section_args(doc, ("model",))
    gated = args.get("gated_linear_unit")
    if gated is not None and gated.value is True:  # TransformerConfig: SwiGLU-shaped FFN
        args.setdefault("swiglu", Arg(True, gated.origin))
    for section in ("train", "ddp", "optimizer"):
        args.update(section_args(doc, (section,)))
    mixed = doc.data.get("mixed_precision")
    if isinstance(mixed, str):
        origin = Origin(doc.name, doc.value_position(("mixed_precision",)))
        if "fp8" in mixed:
            args["fp8"] = Arg(True, origin)
            # Megatron-Bridge's FP8 presets keep FP8 primary weights, but for sub-channel
            # scaling (training/mixed_precision.py)
            if "subchannel" not in mixed:
                args.setdefault("fp8_param_gather", Arg(True, origin))
        elif mixed.startswith("bf16"):
            args["bf16"] = Arg(True, origin)
        elif mixed.startswith("fp16") or mixed.startswith("16"):
            args["fp16"] = Arg(True, origin)
    if "seq_length" not in args:
        args.update({k: v for k, v in section_args(doc, ("dataset",)).items() if k == "seq_length"})
    extract = megatron.to_manifest(args, "bridge", doc.name)
    seqs = config_lengths(doc, (("model", "seq_length"), ("dataset", "seq_length")))
    return seq_facts(extract, seqs)
