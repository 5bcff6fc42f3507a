"""FlagScale YAML (`flagscale`): an experiment file naming its train file, or a train file
alone, under Megatron's names, with DualPipeV (docs/frameworks.md). `read` reads one;
`emit_config` writes a plan as a train config (`plan --emit flagscale`,
dpguard/frameworks/emit.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dpguard.confine import Outside, confined
from dpguard.frameworks import megatron
from dpguard.frameworks.common import (
    nodes_times_devices,
    section_args,
    switches,
    with_values,
    yaml_sections,
)
from dpguard.frameworks.emit import framed
from dpguard.frameworks.megatron import Arg
from dpguard.frameworks.model import Extract, FrameworkError, Origin, Values
from dpguard.yamlevents import SourceDoc
from dpguard.yamlsource import load_text, read_text

if TYPE_CHECKING:
    from dpguard.planner.plan import Plan


def read(doc: SourceDoc) -> Extract:
    """An experiment file (runner, defaults naming the train file) or a train file alone."""
    train = doc
    runner: dict[str, Arg] = {}
    if isinstance(doc.data.get("experiment"), dict):
        runner = section_args(doc, ("experiment", "runner"))
        train = _flagscale_train(doc) or doc
    args: dict[str, Arg] = {}
    for section in ("system", "model", "data"):
        for key, arg in section_args(train, (section,), flatten=True).items():
            args.setdefault(key, arg)
    extract = megatron.to_manifest(args, "flagscale", doc.name)
    per_node = runner.get("nproc_per_node") or Arg(
        8, Origin(doc.name, doc.position(("experiment", "runner")))
    )
    # without nnodes FlagScale runs one node, unless a hostfile lists them (only known at launch)
    nodes = runner.get("nnodes") or Arg(None if "hostfile" in runner else 1, per_node.origin)
    extra, origins = nodes_times_devices(nodes if runner else None, per_node if runner else None)
    found = Values(dict(extra), origins)
    values = found.values
    dualpipev = (
        _flag_true(args, "use_dualpipev")
        or str(getattr(args.get("schedules_method"), "value", "")) == "dualpipev"
    )
    if _flag_true(args, "use_dualpipe"):
        found.put("parallelism.schedule", "dualpipe", args["use_dualpipe"].origin)
    elif dualpipev:
        switch = args.get("use_dualpipev") or args["schedules_method"]
        found.put("parallelism.schedule", "dualpipev", switch.origin)
    out = with_values(extract, origins, (), {})
    merged = {**out.values, **values}
    merged_origins = {**out.origins, **origins}
    if dualpipev:
        merged.pop("parallelism.virtual_stages", None)
    if "parallelism.schedule" in values:
        # FlagScale's DualPipe(V) places its first/last stage sizes on its own two-chunk
        # layout: dpguard keeps its even split there
        merged.pop("parallelism.stage_layers", None)
    facts = {**out.facts, **_dualpipev_facts(args, dualpipev)}
    return replace(
        out,
        values=merged,
        origins={k: v for k, v in merged_origins.items() if k in merged},
        facts=facts,
    )


def _flag_true(args: Mapping[str, Arg], key: str) -> bool:
    arg = args.get(key)
    return arg is not None and arg.value is True


def _dualpipev_facts(args: Mapping[str, Arg], on: bool) -> dict[str, Any]:
    """FlagScale's own DualPipeV preconditions (arguments.py.patch, validate_args), as facts."""
    if not on:
        return {}

    def value(key: str) -> Any:
        arg = args.get(key)
        return None if arg is None else arg.value

    odd = [
        key
        for key in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
        if isinstance(value(key), int) and value(key) % 2
    ]
    return {
        "framework.shared_expert_overlap": bool(value("moe_shared_expert_overlap")),
        "framework.uneven_odd_stage": ", ".join(odd) or None,
        "framework.fb_overlap_with_grad_overlap": bool(value("moe_fb_overlap"))
        and bool(value("overlap_grad_reduce") or value("overlap_param_gather")),
    }


def _flagscale_train(doc: SourceDoc) -> SourceDoc | None:
    """The train file an experiment file's ``defaults: [_self_, {train: NAME}]`` names:
    ``conf/train/NAME.yaml`` beside it (Hydra's config groups)."""
    entries = doc.data.get("defaults")
    for i, entry in enumerate(entries if isinstance(entries, list) else ()):
        if isinstance(entry, dict) and isinstance(entry.get("train"), str):
            base = os.path.dirname(doc.name)
            candidate = os.path.join(base, "train", entry["train"] + ".yaml")
            try:
                real = confined(candidate, doc.name, f"defaults: train {entry['train'][:80]!r}")
            except Outside as exc:
                at = Origin(doc.name, doc.value_position(("defaults", i, "train")))
                raise FrameworkError("F005", str(exc), at) from None
            if os.path.isfile(real):
                return load_text(read_text(real), candidate)
    return None


def emit_config(plan: Plan, notes: Sequence[str] = ()) -> str:
    """`plan --emit flagscale`: the plan as a FlagScale train config (`system:` and `model:`),
    with `notes` in the header."""
    title = "# FlagScale train config: these keys replace the same keys."
    return framed(plan, notes, title, _config_lines)


def _config_lines(plan: Plan) -> tuple[list[str], list[str]]:
    args, notes = megatron.plan_args(plan)
    batch = ("micro_batch_size", "global_batch_size")
    system = [(k, v) for k, v in switches(args) if k not in batch]
    model = [(k, v) for k, v in switches(args) if k in batch]
    nodes, per_node = megatron.launch_nodes(plan)
    lines = [
        f"# train/<name>.yaml (the experiment file's runner: nnodes {nodes}, "
        f"nproc_per_node {per_node})",
        *yaml_sections((("system", system), ("model", model))),
    ]
    return lines, notes
