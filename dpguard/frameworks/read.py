"""Recognise a framework config by its content and read it into an `Extract`.

Formats (docs/frameworks.md): ``megatron`` (launch scripts, and YAML flag maps as in the
Megatron MoE model zoo), ``nemo`` (NeMo 1 / NeMo Framework Launcher YAML), ``bridge``
(Megatron-Bridge YAML), ``flagscale`` (experiment + train YAML), ``torchtitan`` (TOML),
``deepspeed`` (JSON), ``nanotron`` (YAML). Nothing is imported from a framework and nothing is
executed: every reader parses text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dpguard.findings import Severity
from dpguard.frameworks import megatron
from dpguard.frameworks.detect import sniff, yaml_format
from dpguard.frameworks.megatron import Arg
from dpguard.frameworks.model import Extract, FrameworkError, Note, Origin, Values
from dpguard.frameworks.shell import Script
from dpguard.yamlevents import MAX_DEPTH, Position, SourceDoc, YamlLoadError
from dpguard.yamlsource import load_text, read_text

FORMATS = ("megatron", "nemo", "bridge", "flagscale", "torchtitan", "deepspeed", "nanotron")


def read(path: str, fmt: str, text: str | None = None) -> Extract:
    """Read `path` as `fmt`. Raises InputError (missing file), YamlLoadError or
    FrameworkError (broken content)."""
    text = read_text(path) if text is None else text
    if fmt == "torchtitan":
        from dpguard.frameworks import torchtitan

        return torchtitan.read(path, text)
    if fmt == "deepspeed":
        return _deepspeed(path, text)
    if fmt == "megatron" and not path.endswith((".yaml", ".yml")):
        return _megatron_script(path, text)
    return read_doc(load_text(text, path), fmt)


def read_doc(doc: SourceDoc, fmt: str) -> Extract:
    """Read an already loaded YAML document as `fmt`."""
    return _YAML_READERS[fmt](doc)


def read_source(path: str, fmt: str | None, manifest: SourceDoc) -> Extract:
    """The framework config a manifest's ``source:`` names. Problems with it are findings:
    at the manifest's ``source.path`` when the file is missing or unrecognised, in the file
    itself when its content is broken."""
    from dpguard.errors import InputError

    at = Origin(manifest.name, manifest.value_position(("source", "path")))
    try:
        text = read_text(path)
        if fmt is not None and fmt not in FORMATS:
            raise FrameworkError(
                "F005", f"source.format {fmt!r} is not one of {', '.join(FORMATS)}", at
            )
        found = fmt or sniff(path, text)
        if found is None:
            try:
                doc = load_text(text, path)
            except YamlLoadError:
                doc = None  # not YAML either: not a config dpguard reads
            found = yaml_format(doc.data) if doc is not None else None
            if doc is None or found is None:
                raise FrameworkError(
                    "F005",
                    f"{path} is not a framework config dpguard recognises "
                    f"({', '.join(FORMATS)}); name it with source.format",
                    at,
                )
            return read_doc(doc, found)
        return read(path, found, text)
    except InputError as exc:
        raise FrameworkError("F005", f"source.path: {exc}", at) from None
    except YamlLoadError as exc:
        raise FrameworkError(exc.code, exc.message, Origin(path, exc.position)) from None


# -- Megatron-LM scripts --------------------------------------------------------------------------


def _megatron_script(path: str, text: str) -> Extract:
    from dpguard.frameworks import shell

    try:
        script = shell.parse(text)
    except shell.ShellError as exc:
        raise FrameworkError(
            "F001", f"cannot read the script: {exc.message}", Origin(path, exc.position)
        ) from None
    args, launcher, stray = megatron.command_args(script, path)
    notes = stray + [
        Note(
            Origin(path, at),
            "F002",
            f"`source {name}`: values set in that file are not read",
            _info(),
        )
        for name, at in script.sourced
    ]
    extra, origins = _script_gpus(script, launcher, path)
    extract = megatron.to_manifest(args, "megatron", path, extra)
    return _with(extract, origins=origins, notes=notes)


def _info() -> Severity:
    return Severity.INFO


def _script_gpus(
    script: Script, launcher: Mapping[str, Arg], path: str
) -> tuple[dict[str, Any], dict[str, Origin]]:
    """GPU count from torchrun's ``--nproc_per_node`` x ``--nnodes``, else from the usual
    variables (GPUS_PER_NODE x NNODES)."""

    def first(names: tuple[str, ...]) -> tuple[int | None, Origin | None]:
        for name in names:
            arg = launcher.get(name)
            if arg is not None and isinstance(arg.value, str) and arg.value.isdigit():
                return int(arg.value), arg.origin
        for name in names:
            words = script.variables.get(name.upper())
            if words and len(words) == 1 and words[0].text and words[0].text.isdigit():
                return int(words[0].text), Origin(path, words[0].position)
        return None, None

    per_node, at_node = first(("nproc_per_node", "gpus_per_node"))
    nodes, at_nodes = first(("nnodes", "num_nodes"))
    found = Values()
    if per_node:
        found.put("cluster.gpus_per_node", per_node, at_node)
        if nodes:
            found.put("cluster.gpus", per_node * nodes, at_nodes)
    return found.values, found.origins


def _with(
    extract: Extract,
    origins: Mapping[str, Origin] = {},
    notes: Sequence[Note] = (),
    values: Mapping[str, Any] = {},
) -> Extract:
    merged_values = {**values, **extract.values}
    merged = {**origins, **extract.origins}
    return replace(
        extract,
        values=merged_values,
        origins={k: v for k, v in merged.items() if k in merged_values},
        notes=tuple(notes) + extract.notes,
    )


# -- YAML dialects of the Megatron family ---------------------------------------------------------

_INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


def _section_args(
    doc: SourceDoc, section: tuple[str | int, ...], flatten: bool = False
) -> dict[str, Arg]:
    """The keys of one section as Megatron arguments, with OmegaConf ``${a.b}`` references
    resolved within the file (anything else stays unknown)."""
    node: Any = doc.data
    for key in section:
        node = node.get(key) if isinstance(node, dict) else None
    args: dict[str, Arg] = {}
    if not isinstance(node, dict):
        return args
    for key, value in node.items():
        path = (*section, key)
        if isinstance(value, dict) and flatten:
            args.update({k: v for k, v in _section_args(doc, path).items() if k not in args})
            continue
        origin = Origin(doc.file(path), doc.value_position(path))
        resolved, why = _resolve(doc, value, section)
        if resolved is None and not why:
            continue  # null (or a reference to null): unset, the framework's default applies
        args[megatron.canonical(str(key))] = Arg(resolved, origin, why)
    return args


# The arithmetic resolvers NeMo-Framework-Launcher registers (main.py: multiply x*y,
# divide_ceil ceil(x/y), divide_floor x//y), used in its configs for derived sizes such as
# ffn_hidden_size: ${multiply:4, ${.hidden_size}}.
_ARITHMETIC = {
    "multiply": lambda x, y: x * y,
    "divide_ceil": lambda x, y: -(-x // y),
    "divide_floor": lambda x, y: x // y,
}
_RESOLVER = re.compile(r"\$\{(" + "|".join(_ARITHMETIC) + r"):(.*)\}", re.S)


def _arguments(text: str) -> list[str]:
    """A resolver's arguments: split at the commas outside nested ``${...}``."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return [*out, text[start:].strip()]


def _resolve(doc: SourceDoc, value: Any, section: tuple, depth: int = 0) -> tuple[Any, str]:
    if not isinstance(value, str) or "${" not in value:
        return value, ""
    arithmetic = _RESOLVER.fullmatch(value.strip())
    if arithmetic is not None and depth <= 8:
        operands = []
        for text in _arguments(arithmetic.group(2)):
            operand, why = (
                _resolve(doc, text, section, depth + 1)
                if "${" in text
                else (int(text) if re.fullmatch(r"-?[0-9]+", text) else None, "")
            )
            if not isinstance(operand, int) or isinstance(operand, bool):
                return None, why or f"the resolver {value!r} over a value that is not a number"
            operands.append(operand)
        if len(operands) == 2 and (operands[1] != 0 or arithmetic.group(1) == "multiply"):
            return _ARITHMETIC[arithmetic.group(1)](*operands), ""
        return None, f"the resolver {value!r}: two numbers expected, the divisor not 0"
    match = _INTERPOLATION.fullmatch(value.strip())
    if match is None or depth > 8:
        return None, f"the interpolation {value!r}"
    ref = match.group(1)
    if ref.startswith("."):  # relative to the section
        parts = (*section, *ref.lstrip(".").split("."))
    elif ":" in ref or not re.fullmatch(r"[A-Za-z_][\w.]*", ref):
        return None, f"the resolver {value!r}, which only the framework evaluates"
    else:
        parts = tuple(ref.split("."))
    node: Any = doc.data
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None, f"{value!r}, which refers to a key the file does not set"
        node = node[part]
    return _resolve(doc, node, parts[:-1], depth + 1)


def _nemo(doc: SourceDoc) -> Extract:
    args = _section_args(doc, ("model",))
    optim = _section_args(doc, ("model", "optim"))
    args.update({k: v for k, v in optim.items() if k == "name"})
    sync = optim.get("grad_sync_dtype")
    if sync is not None and str(sync.value).lower() in ("fp32", "float32", "bf16", "bfloat16"):
        # NeMo 1 builds Megatron-core's DDP with grad_reduce_in_fp32 = (grad_sync_dtype ==
        # fp32); Apex's distributed Adam keeps its gradient buckets in that dtype too
        args["grad_reduce_in_fp32"] = Arg("32" in str(sync.value), sync.origin)
    trainer = _section_args(doc, ("trainer",))
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
    extra, origins = _nodes_times_devices(trainer.get("num_nodes"), trainer.get("devices"))
    seqs = _lengths(
        doc,
        (("model", "encoder_seq_length"), ("model", "seq_length"), ("model", "data", "seq_length")),
    )
    return (
        _with(extract, origins, (), extra)
        if not seqs
        else _seq_facts(_with(extract, origins, (), extra), seqs)
    )


def _bridge(doc: SourceDoc) -> Extract:
    args = _section_args(doc, ("model",))
    gated = args.get("gated_linear_unit")
    if gated is not None and gated.value is True:  # TransformerConfig: SwiGLU-shaped FFN
        args.setdefault("swiglu", Arg(True, gated.origin))
    for section in ("train", "ddp", "optimizer"):
        args.update(_section_args(doc, (section,)))
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
        args.update(
            {k: v for k, v in _section_args(doc, ("dataset",)).items() if k == "seq_length"}
        )
    extract = megatron.to_manifest(args, "bridge", doc.name)
    seqs = _lengths(doc, (("model", "seq_length"), ("dataset", "seq_length")))
    return _seq_facts(extract, seqs)


def _flagscale(doc: SourceDoc) -> Extract:
    """An experiment file (runner, defaults naming the train file) or a train file alone."""
    train = doc
    runner: dict[str, Arg] = {}
    if isinstance(doc.data.get("experiment"), dict):
        runner = _section_args(doc, ("experiment", "runner"))
        train = _flagscale_train(doc) or doc
    args: dict[str, Arg] = {}
    for section in ("system", "model", "data"):
        for key, arg in _section_args(train, (section,), flatten=True).items():
            args.setdefault(key, arg)
    extract = megatron.to_manifest(args, "flagscale", doc.name)
    per_node = runner.get("nproc_per_node") or Arg(
        8, Origin(doc.name, doc.position(("experiment", "runner")))
    )
    # without nnodes FlagScale runs one node, unless a hostfile lists them (only known at launch)
    nodes = runner.get("nnodes") or Arg(None if "hostfile" in runner else 1, per_node.origin)
    extra, origins = _nodes_times_devices(nodes if runner else None, per_node if runner else None)
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
    out = _with(extract, origins, (), {})
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
    for entry in doc.data.get("defaults") or ():
        if isinstance(entry, dict) and isinstance(entry.get("train"), str):
            base = os.path.dirname(doc.name)
            candidate = os.path.join(base, "train", entry["train"] + ".yaml")
            if os.path.isfile(candidate):
                return load_text(read_text(candidate), candidate)
    return None


def _nodes_times_devices(
    nodes: Arg | None, devices: Arg | None
) -> tuple[dict[str, Any], dict[str, Origin]]:
    found = Values()
    per = devices.value if devices is not None else None
    count = nodes.value if nodes is not None else None
    if isinstance(per, int) and not isinstance(per, bool) and per > 0:
        found.put("cluster.gpus_per_node", per, devices.origin)  # type: ignore[union-attr]
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            found.put("cluster.gpus", per * count, nodes.origin)  # type: ignore[union-attr]
    return found.values, found.origins


def _lengths(doc: SourceDoc, paths: tuple[tuple[str, ...], ...]) -> list[tuple[int, Origin]]:
    out = []
    for path in paths:
        node: Any = doc.data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        value, _ = _resolve(doc, node, path[:-1])
        if isinstance(value, int) and not isinstance(value, bool):
            out.append((value, Origin(doc.name, doc.value_position(path))))
    return out


def _seq_facts(extract: Extract, lengths: list[tuple[int, Origin]]) -> Extract:
    distinct = sorted({v for v, _ in lengths})
    fact = None
    if len(distinct) > 1:
        fact = ", ".join(f"{v} (line {o.position.line})" for v, o in lengths)
    return replace(extract, facts={**extract.facts, "framework.sequence_lengths": fact})


def _flag_map(doc: SourceDoc) -> Extract:
    """A YAML map of Megatron flags (``MODEL_ARGS: {--num-layers: 61, ...}``), as in the
    Megatron MoE model zoo; ``${TP}`` placeholders are filled by its wrapper from the
    environment, so they stay unknown."""
    args: dict[str, Arg] = {}
    sections = [()] + [(k,) for k, v in doc.data.items() if isinstance(v, dict)]
    for section in sections:
        node: Any = doc.data if not section else doc.data[section[0]]
        for key, value in node.items():
            if not str(key).startswith("--"):
                continue
            path = (*section, key)
            origin = Origin(doc.name, doc.value_position(path))
            if isinstance(value, str) and "${" in value:
                args[megatron.canonical(key)] = Arg(
                    None, origin, f"{value!r} is filled in from the environment"
                )
            elif value is None or value == "":
                args[megatron.canonical(key)] = Arg(True, origin)
            elif isinstance(value, list):
                args[megatron.canonical(key)] = Arg([str(v) for v in value], origin)
            else:
                args[megatron.canonical(key)] = Arg(value, origin)
    return megatron.to_manifest(args, "megatron", doc.name)


def _nanotron(doc: SourceDoc) -> Extract:
    found = Values()
    values = found.values

    def put(dotted: str, value: Any, path: tuple[str, ...]) -> None:
        if value is not None:
            found.put(dotted, value, Origin(doc.name, doc.value_position(path)))

    def take(
        dotted: str, path: tuple[str, ...], convert: Callable[[Any], Any] = lambda v: v
    ) -> Any:
        node: Any = doc.data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return None
        value = convert(node)
        put(dotted, value, path)
        return value

    ints = lambda v: v if isinstance(v, int) and not isinstance(v, bool) else None  # noqa: E731
    tp = take("parallelism.tensor", ("parallelism", "tp"), ints)
    pp = take("parallelism.pipeline", ("parallelism", "pp"), ints)
    dp = ints((doc.data.get("parallelism") or {}).get("dp"))
    take("parallelism.expert", ("parallelism", "expert_parallel_size"), ints)
    take("parallelism.context", ("parallelism", "context_parallel_size"), ints)
    if (pp or 1) > 1:
        engine = ((doc.data.get("parallelism") or {}).get("pp_engine")) or "afab"
        schedule = {"1f1b": "1f1b", "afab": "gpipe"}.get(str(engine), "gpipe")
        put("parallelism.schedule", schedule, ("parallelism", "pp_engine"))
    if dp and tp and pp:
        cp = values.get("parallelism.context", 1)
        put("cluster.gpus", dp * tp * pp * cp, ("parallelism", "dp"))
    config = ("model", "model_config")
    take("model.layers", (*config, "num_hidden_layers"), ints)
    take("model.hidden_size", (*config, "hidden_size"), ints)
    take("model.attention_heads", (*config, "num_attention_heads"), ints)
    take("model.kv_heads", (*config, "num_key_value_heads"), ints)
    take("model.ffn_hidden_size", (*config, "intermediate_size"), ints)
    take("model.vocab_size", (*config, "vocab_size"), ints)
    tied = take(
        "model.untie_embeddings",
        (*config, "tie_word_embeddings"),
        lambda v: (not v) if isinstance(v, bool) else None,
    )
    del tied
    # nanotron's Llama and Qwen2 MLPs are gated (gate_up_proj) whatever hidden_act says
    values["model.ffn_activation"] = "swiglu"
    model_config = (doc.data.get("model") or {}).get("model_config") or {}
    moe_config = model_config.get("moe_config") if isinstance(model_config, dict) else None
    moe: tuple[tuple[str, ...], tuple[str, ...]]
    if isinstance(moe_config, dict):  # Qwen2Config: moe_config {num_experts, top_k, ...}
        moe = ((*config, "moe_config", "num_experts"), (*config, "moe_config", "top_k"))
    else:  # LlaMoEConfig: moe_num_experts, num_experts_per_tok
        moe = ((*config, "moe_num_experts"), (*config, "num_experts_per_tok"))
    experts = take("model.experts", moe[0], ints)
    values["model.architecture"] = "moe" if (experts or 0) > 1 else "dense"
    if (experts or 0) > 1:
        take("model.experts_per_token", moe[1], ints)
        width = (*config, "moe_config", "moe_intermediate_size")
        if take("model.moe_ffn_hidden_size", width, ints) is None:
            take("model.moe_ffn_hidden_size", (*config, "intermediate_size"), ints)
        if isinstance(moe_config, dict) and moe_config.get("enable_shared_expert") is True:
            values["model.shared_experts"] = 1
    else:
        values.pop("model.experts", None)
    seq = take("model.seq_len", ("tokens", "sequence_length"), ints)
    mbs = take("training.micro_batch_size", ("tokens", "micro_batch_size"), ints)
    acc = ints((doc.data.get("tokens") or {}).get("batch_accumulation_per_replica"))
    if mbs and acc and dp:
        put(
            "training.global_batch_size",
            mbs * acc * dp,
            ("tokens", "batch_accumulation_per_replica"),
        )
        steps = ints((doc.data.get("tokens") or {}).get("train_steps"))
        if steps and seq:
            put("training.tokens", steps * mbs * acc * dp * seq, ("tokens", "train_steps"))

    if (doc.data.get("parallelism") or {}).get("recompute_layer") is True:
        put("training.activation_recompute", "full", ("parallelism", "recompute_layer"))
    par = doc.data.get("parallelism")
    par = par if isinstance(par, dict) else {}
    mode = str(par.get("tp_mode") or "ALL_REDUCE").upper()
    if mode in ("ALL_REDUCE", "REDUCE_SCATTER") and (values.get("parallelism.tensor") or 1) > 1:
        # nanotron's ParallelismArgs: tp_mode defaults to ALL_REDUCE (no sequence parallelism)
        at = ("parallelism", "tp_mode" if "tp_mode" in par else "tp")
        put("training.sequence_parallel", mode == "REDUCE_SCATTER", at)
    zero = (doc.data.get("optimizer") or {}).get("zero_stage")
    if isinstance(zero, int) and not isinstance(zero, bool):
        put("training.zero_stage", zero, ("optimizer", "zero_stage"))
    return Extract("nanotron", doc.name, found.values, found.origins)


_YAML_READERS = {
    "megatron": _flag_map,
    "nemo": _nemo,
    "bridge": _bridge,
    "flagscale": _flagscale,
    "nanotron": _nanotron,
}


# -- DeepSpeed JSON -------------------------------------------------------------------------------


def _deepspeed(path: str, text: str) -> Extract:
    data, positions = load_json(path, text)
    found = Values()

    def put(dotted: str, value: Any, *at: str) -> None:
        if value is not None:
            found.put(dotted, value, Origin(path, positions[at]))

    notes: list[Note] = []

    def number(key: str) -> int | None:
        value = data.get(key)
        if value == "auto":
            notes.append(
                Note(
                    Origin(path, positions[(key,)]),
                    "F002",
                    f'"{key}" is "auto": the trainer fills it in, so dpguard cannot read it',
                    _info(),
                )
            )
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    for key, dotted in (
        ("train_batch_size", "training.global_batch_size"),
        ("train_micro_batch_size_per_gpu", "training.micro_batch_size"),
    ):
        put(dotted, number(key), key)
    number("gradient_accumulation_steps")
    zero = data.get("zero_optimization")
    if isinstance(zero, dict) and isinstance(zero.get("stage"), int):
        put("training.zero_stage", zero["stage"], "zero_optimization", "stage")
        offload = zero.get("offload_optimizer")
        if isinstance(offload, dict) and offload.get("device") in ("cpu", "nvme"):
            put("training.optimizer_offload", 1.0, "zero_optimization", "offload_optimizer")
    for key, precision in (("bf16", "bf16"), ("bfloat16", "bf16"), ("fp16", "fp16")):
        section = data.get(key)
        if isinstance(section, dict) and section.get("enabled") is True:
            put("training.precision", precision, key)
    if isinstance(data.get("activation_checkpointing"), dict):
        put("training.activation_recompute", "full", "activation_checkpointing")
    facts = {
        "framework.zero_with_pipeline": isinstance(data.get("pipeline"), dict)
        and found.get("training.zero_stage", 0) >= 2
    }
    return Extract("deepspeed", path, found.values, found.origins, tuple(notes), facts)


def load_json(path: str, text: str) -> tuple[dict[str, Any], dict[tuple, Position]]:
    """A JSON object with the position of every key, refusing duplicate keys and nesting
    deeper than MAX_DEPTH (the limits the YAML loader applies)."""
    positions: dict[tuple, Position] = {}
    depth = 0
    for match in re.finditer(r'[\[{]|[\]}]|"(?:[^"\\]|\\.)*"', text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise FrameworkError(
                    "F001",
                    f"nesting deeper than {MAX_DEPTH} levels",
                    Origin(path, _pos(text, match.start())),
                )
        elif token in "]}":
            depth -= 1

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise FrameworkError(
            "F001", f"invalid JSON: {exc.msg}", Origin(path, Position(exc.lineno, exc.colno))
        ) from None
    except ValueError as exc:
        key = str(exc).split("'")[1] if "'" in str(exc) else ""
        at = text.rfind(f'"{key}"')
        raise FrameworkError(
            "F001", f"invalid JSON: {exc}", Origin(path, _pos(text, max(at, 0)))
        ) from None
    if not isinstance(data, dict):
        raise FrameworkError(
            "F001", "the top level is not a JSON object", Origin(path, Position(1, 1))
        )
    _positions(text, data, positions)
    return data, positions


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _pos(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    return Position(line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


def _positions(text: str, data: dict[str, Any], out: dict[tuple, Position]) -> None:
    """Key positions by a scan for ``"key":`` in document order (enough for config files,
    whose keys repeat rarely; a repeated key name takes the next occurrence)."""
    cursor = 0

    def walk(node: Any, prefix: tuple) -> None:
        nonlocal cursor
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            found = re.compile(r'"' + re.escape(key) + r'"\s*:').search(text, cursor)
            if found:
                out[(*prefix, key)] = _pos(text, found.start())
                cursor = found.end()
            walk(value, (*prefix, key))

    walk(data, ())
