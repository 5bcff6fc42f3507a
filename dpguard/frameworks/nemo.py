"""NeMo 1 / NeMo Framework Launcher YAML (`nemo`): `trainer:` and `model:` under Megatron's
names and NeMo's (docs/frameworks.md). `read` reads one; `emit_config` writes a plan as one
(`plan --emit nemo`, dpguard/frameworks/emit.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dpguard.frameworks import megatron
from dpguard.frameworks.common import (
    config_lengths,
    nodes_times_devices,
    section_args,
    seq_facts,
    switches,
    with_values,
    yaml_sections,
)
from dpguard.frameworks.emit import framed
from dpguard.frameworks.megatron import Arg
from dpguard.frameworks.model import Extract, Origin
from dpguard.yamlevents import SourceDoc

if TYPE_CHECKING:
    from dpguard.planner.plan import Plan


def read(doc: SourceDoc) -> Extract:
    args = section_args(doc, ("model",))
    optim = section_args(doc, ("model", "optim"))
    args.update({k: v for k, v in optim.items() if k == "name"})
    sync = optim.get("grad_sync_dtype")
    if sync is not None and str(sync.value).lower() in ("fp32", "float32", "bf16", "bfloat16"):
        # NeMo 1 builds Megatron-core's DDP with grad_reduce_in_fp32 = (grad_sync_dtype ==
        # fp32); Apex's distributed Adam keeps its gradient buckets in that dtype too
        args["grad_reduce_in_fp32"] = Arg("32" in str(sync.value), sync.origin)
    trainer = section_args(doc, ("trainer",))
    name = args.pop("name", None)
    if name is not None:
        # NeMo 1's Apex distributed Adam and the launcher's Megatron-core distributed optimizer
        # both shard the optimizer states over data parallelism (ZeRO-1)
        sharded = name.value in ("distributed_fused_adam", "mcore_distributed_optim")
        args["use_distributed_optimizer"] = Arg(sharded, name.origin)
    activation = args.get("activation")
    if activation is not None and str(activation.value).endswith("glu"):
        # swiglu, fast-swiglu, geglu, reglu: gated, three FFN matrices (the swiglu shape)
        args.setdefault("swiglu", Arg(True, activation.origin))
    precision = trainer.get("precision")
    if precision is not None and precision.value is not None:
        text = str(precision.value)
        if text.startswith("bf16"):
            args.setdefault("bf16", Arg(True, precision.origin))
        elif text.startswith("16"):
            args.setdefault("fp16", Arg(True, precision.origin))
    if "train_iters" not in args and "max_steps" in trainer:
        args["train_iters"] = trainer["max_steps"]
    extract = megatron.to_manifest(args, "nemo", doc.name)
    extra, origins = nodes_times_devices(trainer.get("num_nodes"), trainer.get("devices"))
    full = _full_master_weights(name, optim)
    if full is not None:
        extra["runtime.master_weights"], origins["runtime.master_weights"] = "fp32", full
    seqs = config_lengths(
        doc,
        (("model", "encoder_seq_length"), ("model", "seq_length"), ("model", "data", "seq_length")),
    )
    return (
        with_values(extract, origins, (), extra)
        if not seqs
        else seq_facts(with_values(extract, origins, (), extra), seqs)
    )


def _full_master_weights(name: Arg | None, optim: dict[str, Arg]) -> Origin | None:
    """Where the config makes the optimizer keep whole fp32 master weights instead of the
    profile's bf16 remainders: another optimizer than Apex's distributed Adam (NeMo 1 wraps
    fused_adam in fp32 main params, mcore_distributed_optim is Megatron-core's), or
    optim.store_params / store_param_remainders written so (megatron_base_model.py keeps a
    value the config sets). FP8 primary weights (fp8_params) store fp32 ones too; the memory
    model applies that from runtime.fp8_param_gather."""
    if name is not None and name.value != "distributed_fused_adam":
        return name.origin
    store, remainders = optim.get("store_params"), optim.get("store_param_remainders")
    if store is not None and store.value is True:
        return store.origin
    if remainders is not None and remainders.value is False:
        return remainders.origin
    return None


def emit_config(plan: Plan, notes: Sequence[str] = ()) -> str:
    """`plan --emit nemo`: the plan as NeMo's `trainer:` and `model:` keys, with `notes` in
    the header."""
    title = "# NeMo config: these keys replace the same keys of your YAML."
    return framed(plan, notes, title, _config_lines)


# Megatron-LM's argument names that NeMo 1 spells its own way (the reader's ALIASES, reversed)
_NEMO_NAMES = {
    "num_virtual_stages_per_pipeline_rank": "virtual_pipeline_model_parallel_size",
    "recompute_granularity": "activations_checkpoint_granularity",
    "recompute_method": "activations_checkpoint_method",
    "recompute_num_layers": "activations_checkpoint_num_layers",
}


def _config_lines(plan: Plan) -> tuple[list[str], list[str]]:
    args, notes = megatron.plan_args(plan)
    model: list[tuple[str, Any]] = []
    optim = False
    for name, value in switches(args):
        if name == "use_distributed_optimizer":
            optim = True
        elif name == "untie_embeddings_and_output_weights":
            model.append(("share_embeddings_and_output_weights", False))
        else:
            model.append((_NEMO_NAMES.get(name, name), value))
    if optim:
        model.append(("optim", {"name": "distributed_fused_adam"}))
    nodes, per_node = megatron.launch_nodes(plan)
    trainer = [("num_nodes", nodes), ("devices", per_node)]
    return yaml_sections((("trainer", trainer), ("model", model))), notes
