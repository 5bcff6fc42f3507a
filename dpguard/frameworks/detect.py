"""Which framework a file is written for, from its content: cheap enough to run on every file
a hook passes, and light to import (the readers themselves load only when one is found)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
_MEGATRON_FLAG = re.compile(
    r"--(?:tensor|pipeline)-model-parallel-size|--num-layers\b|pretrain_\w+\.py"
)
_TOML_TABLE = re.compile(
    r"^\s*\[(?:parallelism|training|model|experimental|activation_checkpoint)\]\s*$", re.M
)


def sniff(path: str, text: str) -> str | None:
    """The format of `text` when it is a framework config dpguard reads, else None. YAML
    manifests and other YAML are told apart by the caller (it loads YAML once)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return (
            "deepspeed"
            if re.search(
                r'"(train_batch_size|train_micro_batch_size_per_gpu|zero_optimization|gradient_accumulation_steps)"',
                text,
            )
            else None
        )
    if _TOML_TABLE.search(text) and re.search(r"^\s*[A-Za-z_][\w-]*\s*=", text, re.M):
        return "torchtitan"
    if path.endswith(SHELL_SUFFIXES) or stripped.startswith("#!"):
        return "megatron" if _MEGATRON_FLAG.search(text) else None
    return None


def yaml_format(data: Mapping[str, Any]) -> str | None:
    """The framework a loaded YAML mapping is written for, or None."""
    if any(
        isinstance(v, dict) and any(str(k).startswith("--") for k in v) for v in data.values()
    ) or any(str(k).startswith("--") for k in data):
        return "megatron"  # a flag map, as in the Megatron MoE model zoo
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    if isinstance(data.get("system"), dict) or (
        isinstance(data.get("experiment"), dict) and "runner" in data["experiment"]
    ):
        return "flagscale"
    if isinstance(data.get("parallelism"), dict) and {"dp", "tp", "pp"} & set(data["parallelism"]):
        return "nanotron"
    if isinstance(data.get("trainer"), dict) and model:
        return "nemo"
    if model and ({"train", "dataset", "ddp", "mixed_precision"} & set(data)):
        return "bridge"
    return None
