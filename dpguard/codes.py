"""Stable codes for problems found while loading and validating a manifest.

Policy rules (DT/HR/RF/ADV ids) live in policies/*.yaml; these codes cover what comes before
policies can judge: the YAML itself (Y), the JSON Schema (S), cross-field checks (X) and
reading framework configs (F, docs/frameworks.md).
Codes are part of the contract: never renumber, only add.
"""

from __future__ import annotations

CODES: dict[str, str] = {
    "Y001": "invalid YAML syntax",
    "Y002": "empty file",
    "Y003": "more than one YAML document in the file",
    "Y004": "top level is not a mapping",
    "Y005": "duplicate or non-string mapping key",
    "Y006": "YAML tag not allowed (python/object and custom tags)",
    "Y007": "document expands to too many values (an alias bomb, or a file to split)",
    "Y008": "nesting too deep",
    "Y009": "not UTF-8 text or a forbidden character",
    "Y010": "number is not finite (NaN or infinity)",
    "Y011": "number has too many digits",
    "Y012": "file too large",
    "Y013": "mapping key too long",
    "S001": "unknown key",
    "S002": "required key missing",
    "S003": "wrong type",
    "S004": "value out of range",
    "S005": "value not one of the allowed values",
    "S006": "value does not match the required form",
    "S007": "schema violation",
    "S008": "a deprecated spelling of a key that has moved (info: the new place is named)",
    "X001": "GPU count not divisible by tensor x pipeline x context",
    "X002": "GPU count not a whole number of nodes",
    "X003": "global batch not divisible by micro-batch size x data parallel",
    "X004": "explicit micro-batch count contradicts the batch sizes",
    "X005": "active parameters exceed total parameters",
    "X006": "MoE field on a dense model",
    "X007": "experts per token not smaller than experts",
    "X008": "experts not divisible by expert parallel size",
    "X009": "expert parallel size does not divide tensor x context x data parallel",
    "X010": "attention heads not divisible by tensor parallel size",
    "X011": "sequence length not divisible by 2 x context parallel size",
    "X012": "unknown accelerator",
    "X013": "custom accelerator without memory_gb or peak_tflops_bf16",
    "X014": "more pipeline stages than layers",
    "X015": "virtual stages without pipeline parallelism",
    "X016": "quantity out of range",
    "X017": "dense model with active parameters different from total",
    "X018": "parameters leave nothing for the transformer layers",
    "X019": "attention fields disagree (mla ranks without attention: mla, or the reverse)",
    "X020": "recompute_modules without activation_recompute: selective",
    "X021": "key-value heads do not divide the attention heads",
    "X022": "tensor parallel size does not divide the key-value heads",
    "X023": "MLA compression rank not smaller than the hidden size",
    "X024": "dense_layers leaves no MoE layer",
    "X025": "the shape implies a parameter count far from the declared one (warning)",
    "X026": "global batch looks like a token count: far above any published batch (warning)",
    "X027": "global batch is prime: it cannot be split over data parallelism (warning)",
    "X028": "global batch shares no factor with the GPU count: data parallelism is 1 (warning)",
    "X029": "a bare small number for a parameter or token count: the K/M/B/T suffix is missing",
    "X030": "stage_layers does not give one count per pipeline stage adding up to the layers",
    "X031": "recompute_method or recompute_num_layers without activation_recompute: full",
    "X032": "unknown framework (training.framework names no profile in policies/frameworks)",
    "X033": "a key written at its deprecated place and at its new one with different values",
    "X034": "a runtime override of a trait the framework does not have",
    "X035": "an experts' tensor size the stated framework refuses (torchtitan, DeepSpeed: 1 or TP)",
    "F001": "framework config cannot be parsed (syntax, duplicate key, nesting too deep)",
    "F002": "a framework config value dpguard cannot read or model (warning or info)",
    "F003": "a required fact no input provides (add it to a source: manifest or defaults:)",
    "F004": "a value the manifest and its framework config set differently",
    "F005": "source: names a missing or unrecognised framework config, or a shell script is "
    "not a Megatron-LM launcher",
}

# The checks that are judgement calls, not contradictions: a deliberately unusual shape or batch
# can trip them. A team may switch them off (`disable:` in .dpguard.yaml or a policy set) or
# waive them for some files like a policy rule; every other code marks a manifest that cannot
# run as written and stays.
SILENCEABLE = frozenset(("X025", "X026", "X027", "X028"))
