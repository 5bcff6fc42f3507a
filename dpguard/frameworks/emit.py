"""A plan as the framework's own arguments (`dpguard plan --emit FORMAT`): Megatron-LM flags,
a NeMo 1 `model:` block, a torchtitan TOML block or a FlagScale train config, spelled as the
readers in this package read them (tests/test_emit.py reads every emitted block back and
compares degrees, batch and schedule).

Only what the plan decides or depends on is written: the parallel degrees, the schedule, the
micro- and global batch, and the training settings the memory verdict assumed (sequence
parallelism, recompute, distributed optimizer, untied embeddings). The model shape, data and
everything else stay as they are in the user's config.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from dpguard.frameworks import profiles
from dpguard.frameworks.megatron import flag
from dpguard.frameworks.torchtitan import SCHEDULES as TORCHTITAN
from dpguard.planner.plan import Plan, untied

EMIT_FORMATS = ("megatron", "nemo", "torchtitan", "flagscale")


def schedules(fmt: str) -> tuple[str, ...]:
    """The pipeline schedules the framework `fmt` runs (its profile, policies/frameworks)."""
    return profiles.profile(fmt).schedules


# torchtitan's schedule names, from its reader's table (the one spelling of each)
_TORCHTITAN_SCHEDULES = {name: torchtitan for torchtitan, (name, _) in TORCHTITAN.items()}


def megatron_args(plan: Plan) -> tuple[list[tuple[str, Any]], list[str]]:
    """(Megatron argument name, value) pairs for the plan, with None for a switch that is on,
    and notes on what the framework spells differently."""
    s, m = plan.strategy, plan.manifest
    assert s is not None
    t = m.training
    notes: list[str] = []
    args: list[tuple[str, Any]] = [
        ("tensor_model_parallel_size", s.tensor),
        ("pipeline_model_parallel_size", s.pipeline),
    ]
    if plan.schedule == "interleaved-1f1b" and s.virtual_stages > 1:
        args.append(("num_virtual_stages_per_pipeline_rank", s.virtual_stages))
    if m.model.is_moe:
        args.append(("expert_model_parallel_size", s.expert))
    args.append(("context_parallel_size", s.context))
    if s.tensor > 1 and t.sequence_parallel is not False:
        args.append(("sequence_parallel", None))
    args += [
        ("micro_batch_size", plan.micro_batch_size),
        ("global_batch_size", t.global_batch_size),
    ]
    recompute = t.activation_recompute
    if recompute == "selective_op":
        notes.append(
            "torchtitan's per-op selective checkpointing has no Megatron-LM equivalent: "
            "selective recompute of the default modules is written instead"
        )
        recompute = "selective"
    if recompute == "full":
        args += [
            ("recompute_granularity", "full"),
            ("recompute_method", t.recompute_method),
            ("recompute_num_layers", t.recompute_num_layers),
        ]
    elif recompute == "selective":
        args.append(("recompute_granularity", "selective"))
        if t.recompute_modules and t.recompute_modules != ("core_attn",):
            args.append(("recompute_modules", list(t.recompute_modules)))
    if t.zero_stage >= 1:
        args.append(("use_distributed_optimizer", None))
        if t.zero_stage > 1:
            notes.append(
                f"ZeRO-{t.zero_stage}: Megatron-LM's distributed optimizer shards the optimizer "
                "states only (ZeRO-1)"
            )
    if untied(m, plan.schedule):
        args.append(("untie_embeddings_and_output_weights", None))
    if s.account_for_embedding:
        args.append(("account_for_embedding_in_pipeline_split", None))
    if s.account_for_loss:
        args.append(("account_for_loss_in_pipeline_split", None))
    if plan.schedule == "dualpipev":
        args.append(("use_dualpipev", None))  # FlagScale's switch (arguments.py.patch)
    # what the proposal ran and the plan does not: written off, since these keys replace
    # the config's own (an interleaved config planned as 1F1B keeps no virtual stages)
    p = m.parallelism
    if p is not None and p.virtual_stages > 1 and plan.schedule != "interleaved-1f1b":
        args.append(("num_virtual_stages_per_pipeline_rank", OFF))
    if p is not None and p.schedule == "dualpipev" and plan.schedule != "dualpipev":
        args.append(("use_dualpipev", OFF))
    return args, notes


# A setting the plan switches off: null in YAML (the framework's default, unset), and on a
# Megatron command line a note to remove the flag (argparse has no way to unset one)
OFF = "<off>"


def _megatron(plan: Plan, args: list[tuple[str, Any]]) -> list[str]:
    lines = ["DPGUARD_PLAN_ARGS=("]
    off = [flag(name) for name, value in args if value == OFF]
    if flag("num_virtual_stages_per_pipeline_rank") in off:  # its other spelling
        off.append(flag("num_layers_per_virtual_pipeline_stage"))
    if off:
        lines.insert(0, f"# remove from your command (this plan switches it off): {' '.join(off)}")
    for name, value in args:
        if value == OFF:
            continue
        if value is None:
            lines.append(f"    {flag(name)}")
        elif isinstance(value, list):
            lines.append(f"    {flag(name)} {' '.join(value)}")
        else:
            lines.append(f"    {flag(name)} {value}")
    lines.append(")")
    nodes, per_node = _nodes(plan)
    lines += [
        "# The training command: your entry point and its other arguments, with these:",
        f"torchrun --nproc_per_node {per_node} --nnodes {nodes} "
        'pretrain_gpt.py "${DPGUARD_PLAN_ARGS[@]}"',
    ]
    return lines


def _nodes(plan: Plan) -> tuple[int, int]:
    """(nodes, GPUs per node) of the plan's cluster, as launchers take them."""
    cluster = plan.manifest.cluster
    per_node = min(cluster.gpus, cluster.gpus_per_node)
    return -(-cluster.gpus // per_node), per_node


def _yaml_value(value: Any) -> str:
    # JSON is valid YAML for the scalars and flat lists written here, and quotes strings
    # that YAML would otherwise read as something else
    return "null" if value == OFF else json.dumps(value)


def _yaml(sections: Iterable[tuple[str, list[tuple[str, Any]]]]) -> list[str]:
    lines: list[str] = []
    for name, items in sections:
        lines.append(f"{name}:")
        for key, value in items:
            if isinstance(value, dict):
                lines.append(f"  {key}:")
                lines += [f"    {k}: {_yaml_value(v)}" for k, v in value.items()]
            else:
                lines.append(f"  {key}: {_yaml_value(value)}")
    return lines


def _switches(args: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(name, True if value is None else value) for name, value in args]


def _nemo(plan: Plan, args: list[tuple[str, Any]]) -> list[str]:
    names = {
        "num_virtual_stages_per_pipeline_rank": "virtual_pipeline_model_parallel_size",
        "recompute_granularity": "activations_checkpoint_granularity",
        "recompute_method": "activations_checkpoint_method",
        "recompute_num_layers": "activations_checkpoint_num_layers",
    }
    model: list[tuple[str, Any]] = []
    optim = False
    for name, value in _switches(args):
        if name == "use_distributed_optimizer":
            optim = True
        elif name == "untie_embeddings_and_output_weights":
            model.append(("share_embeddings_and_output_weights", False))
        else:
            model.append((names.get(name, name), value))
    if optim:
        model.append(("optim", {"name": "distributed_fused_adam"}))
    nodes, per_node = _nodes(plan)
    trainer = [("num_nodes", nodes), ("devices", per_node)]
    return _yaml((("trainer", trainer), ("model", model)))


def _flagscale(plan: Plan, args: list[tuple[str, Any]]) -> list[str]:
    batch = ("micro_batch_size", "global_batch_size")
    system = [(k, v) for k, v in _switches(args) if k not in batch]
    model = [(k, v) for k, v in _switches(args) if k in batch]
    nodes, per_node = _nodes(plan)
    return [
        f"# train/<name>.yaml (the experiment file's runner: nnodes {nodes}, "
        f"nproc_per_node {per_node})",
        *_yaml((("system", system), ("model", model))),
    ]


def _torchtitan(plan: Plan) -> tuple[list[str], list[str]]:
    s, m = plan.strategy, plan.manifest
    assert s is not None
    t = m.training
    notes: list[str] = []
    parallelism: list[tuple[str, Any]] = [
        ("data_parallel_replicate_degree", 1),
        ("data_parallel_shard_degree", plan.data_parallel),
        ("tensor_parallel_degree", s.tensor),
        ("context_parallel_degree", s.context),
        ("pipeline_parallel_degree", s.pipeline),
    ]
    if t.zero_stage < 3 and plan.data_parallel > 1:
        notes.append(
            f"torchtitan shards data parallelism with FSDP (ZeRO-3); the plan was sized for "
            f"ZeRO-{t.zero_stage}"
        )
    if s.pipeline > 1 and plan.schedule:
        parallelism.append(("pipeline_parallel_schedule", _TORCHTITAN_SCHEDULES[plan.schedule]))
        parallelism.append(("pipeline_parallel_microbatch_size", plan.micro_batch_size))
        # torchtitan counts the embedding and the output as layers of the first and last
        # stage (default 1 each, pipeline_parallel.py): written as the plan's split counts them
        lead, tail = int(s.account_for_embedding), int(s.account_for_loss)
        parallelism += [
            ("pipeline_parallel_first_stage_less_layers", lead),
            ("pipeline_parallel_last_stage_less_layers", tail),
        ]
        if plan.schedule == "interleaved-1f1b":
            stages = s.pipeline * s.virtual_stages
            slots = m.model.layers + lead + tail
            if slots % stages == 0:
                parallelism.append(("pipeline_parallel_layers_per_stage", slots // stages))
            elif s.virtual_stages != 2:
                notes.append(
                    f"{m.model.layers} layers do not split into {stages} equal stages: set "
                    "pipeline_parallel_layers_per_stage for "
                    f"{s.virtual_stages} stages per rank"
                )
    if m.model.is_moe:
        parallelism.append(("expert_parallel_degree", s.expert))
    # The local batch is one data-parallel rank's per step: split into micro-batches by a
    # pipeline, else one forward (torchtitan accumulates gradients up to the global batch)
    local = t.global_batch_size // plan.data_parallel if s.pipeline > 1 else plan.micro_batch_size
    training = [
        ("local_batch_size", local),
        ("global_batch_size", t.global_batch_size),
        ("seq_len", m.model.seq_len),
    ]
    mode = {"selective": "selective", "selective_op": "selective"}.get(
        t.activation_recompute, t.activation_recompute
    )
    checkpoint: list[tuple[str, Any]] = [("mode", mode)]
    if mode == "full" and (t.recompute_method, t.recompute_num_layers) != ("uniform", 1):
        notes.append(
            "torchtitan's full checkpointing recomputes every layer: Megatron's "
            f"{t.recompute_method} method over {t.recompute_num_layers} layers has no equivalent"
        )
    if mode == "selective":
        checkpoint.append(("selective_ac_option", "op"))
        if t.activation_recompute == "selective":
            notes.append(
                "torchtitan's selective checkpointing is per operator (selective_ac_option "
                "'op'), not Megatron's recompute modules"
            )
    if s.tensor > 1 and t.sequence_parallel is False:
        notes.append("torchtitan's tensor parallelism always shards the norms along the sequence")
    model = _flavor(plan)
    if model is None:
        notes.append("no torchtitan flavor in dpguard's table has this shape: keep your [model]")
    lines: list[str] = []
    for table, items in (
        ("model", [("name", model[0]), ("flavor", model[1])] if model else []),
        ("parallelism", parallelism),
        ("training", training),
        ("activation_checkpoint", checkpoint),
    ):
        if items:
            lines.append(f"[{table}]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in items]
            lines.append("")
    return lines[:-1], notes


def _flavor(plan: Plan) -> tuple[str, str] | None:
    """torchtitan's [model] name and flavor for the manifest's shape, if the table has it."""
    from dpguard.frameworks.torchtitan import flavors

    m = plan.manifest.model
    for name, entry in sorted(flavors().items()):
        for flavor, shape in sorted((entry.get("flavors") or {}).items()):
            # the whole block's shape, experts included: a dense flavor of the same width is
            # another model (an MoE must never be emitted as llama3 8B)
            if all(getattr(m, key, None) == shape[key] for key in _FLAVOR_KEYS if key in shape):
                return name, flavor
    return None


_FLAVOR_KEYS = (
    "architecture",
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "ffn_hidden_size",
    "experts",
    "experts_per_token",
    "moe_ffn_hidden_size",
    "shared_experts",
    "dense_layers",
    "attention",
)


def emit(plan: Plan, fmt: str, notes: Sequence[str] = ()) -> str:
    """The plan in `fmt`'s own spelling, with a comment header saying what it is and `notes`;
    only comments for an infeasible plan."""
    name = plan.manifest.name
    if plan.strategy is None:
        lines = [f"# dpguard plan for {name}: no feasible plan"]
        lines += [f"#   {note}" for note in (*notes, *plan.notes)]
        return "\n".join(lines) + "\n"
    s = plan.strategy
    what = (
        f"{plan.schedule}, T={s.tensor} P={s.pipeline} M={s.microbatches} EP={s.expert}"
        if plan.schedule not in (None, "none")
        else f"no pipeline, tensor {s.tensor} x data {plan.data_parallel}"
    )
    header = [f"# dpguard plan for {name}: {what}"]
    if fmt == "torchtitan":
        body, spelled = _torchtitan(plan)
        header.append("# torchtitan job config: these keys replace the same keys of your TOML.")
    else:
        args, spelled = megatron_args(plan)
        if fmt == "megatron":
            body = _megatron(plan, args)
            header.append("# Megatron-LM arguments: they replace the same flags of your command.")
        elif fmt == "nemo":
            body = _nemo(plan, args)
            header.append("# NeMo config: these keys replace the same keys of your YAML.")
        else:
            body = _flagscale(plan, args)
            header.append("# FlagScale train config: these keys replace the same keys.")
    header += [f"# note: {note}" for note in (*notes, *spelled)]
    return "\n".join(header + body) + "\n"
