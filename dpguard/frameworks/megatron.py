"""The Megatron family: Megatron-LM flags, and the same names in the YAML of NeMo 1, the NeMo
Framework Launcher, Megatron-Bridge, FlagScale and the Megatron MoE model zoo.

All of them spell a setting as a Megatron argument (``--tensor-model-parallel-size``, or
``tensor_model_parallel_size`` in YAML), with a few renames (NeMo's
``activations_checkpoint_granularity``, Bridge's ``share_embeddings_and_output_weights``).
Readers collect `Arg`s under canonical Megatron names; `to_manifest` turns them into dpguard
fields, applying Megatron-LM's defaults where the argument is absent (sources:
megatron/training/arguments.py and megatron/core/model_parallel_config.py at d98e8a64,
../shared/docs/config-formats.md section 1.1).

The other way, `emit_config` writes a plan as Megatron-LM flags (`plan --emit megatron`,
dpguard/frameworks/emit.py); `plan_args` is the argument list that NeMo's and FlagScale's
emitters write under their own keys.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from dpguard.findings import Severity
from dpguard.frameworks.emit import framed
from dpguard.frameworks.model import Extract, FrameworkError, Note, Origin, Values
from dpguard.frameworks.numbers import too_long, whole
from dpguard.frameworks.shell import Command, Script, Word
from dpguard.yamlevents import MAX_INT_DIGITS

if TYPE_CHECKING:
    from dpguard.planner.plan import Plan


@dataclass(frozen=True)
class Arg:
    """One argument as written: its value (None when the file does not determine it)."""

    value: Any
    origin: Origin
    why: str = ""


# Other spellings of the same argument -> the Megatron-LM name.
ALIASES = {
    "num_moe_experts": "num_experts",  # Bridge, NeMo
    "encoder_seq_length": "seq_length",  # NeMo 1
    "activations_checkpoint_granularity": "recompute_granularity",  # NeMo 1
    "activations_checkpoint_method": "recompute_method",
    "activations_checkpoint_num_layers": "recompute_num_layers",
    "virtual_pipeline_model_parallel_size": "num_virtual_stages_per_pipeline_rank",
    "moe_enable_deepep": "moe_enable_deepep",
    "padded_vocab_size": "vocab_size",
    "max_position_embeddings_seq": "seq_length",
    "fp8_params": "fp8_param_gather",  # NeMo 1: weights created in FP8 (te.fp8_model_init)
    "pad_vocab_size_to": "vocab_size",  # Megatron-DeepSpeed (BLOOM)
    "checkpoint_num_layers": "recompute_num_layers",  # Megatron-LM before 2.6, -DeepSpeed
}

# Arguments that take several values (argparse nargs="+").
_LISTS = frozenset({"recompute_modules"})

# Megatron flags this reader understands; any other flag is kept but not used.
_INTEGERS = [
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "context_parallel_size",
    "num_virtual_stages_per_pipeline_rank",
    "num_layers_per_virtual_pipeline_stage",
    "micro_batch_size",
    "global_batch_size",
    "train_iters",
    "train_samples",
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "kv_channels",
    "seq_length",
    "num_experts",
    "moe_router_topk",
    "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size",
    "mtp_num_layers",
    "vocab_size",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_head_dim",
    "qk_pos_emb_head_dim",
    "v_head_dim",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
]
# Switches of Megatron-DeepSpeed launches and old spellings: known (read) and never followed
# by a value
_LAUNCH_SWITCHES = (
    "deepspeed",
    "no_pipeline_parallel",
    "moe_layer_recompute",
    "checkpoint_activations",
    "use_flash_attn_v1",
    "use_flash_attn_v2",
)
KNOWN = frozenset(
    [
        *_INTEGERS,
        "sequence_parallel",
        "use_distributed_optimizer",
        "bf16",
        "fp16",
        "fp8_format",
        "fp8",
        "recompute_granularity",
        "recompute_modules",
        "recompute_method",
        "recompute_num_layers",
        "recompute_activations",
        "untie_embeddings_and_output_weights",
        "share_embeddings_and_output_weights",
        "swiglu",
        "activation",
        "gated_linear_unit",
        "group_query_attention",
        "multi_latent_attention",
        "moe_token_dispatcher_type",
        "moe_flex_dispatcher_backend",
        "moe_enable_deepep",
        "moe_layer_freq",
        "account_for_embedding_in_pipeline_split",
        "account_for_loss_in_pipeline_split",
        "pipeline_model_parallel_layout",
        "overlap_moe_expert_parallel_comm",
        "overlap_grad_reduce",
        "overlap_param_gather",
        "tp_comm_overlap",
        "delay_wgrad_compute",
        "grad_reduce_in_bf16",
        "grad_reduce_in_fp32",
        "main_grads_dtype",
        "use_precision_aware_optimizer",
        "exp_avg_dtype",
        "exp_avg_sq_dtype",
        "optimizer_cpu_offload",
        "optimizer_offload_fraction",
        "use_megatron_fsdp",
        "data_parallel_sharding_strategy",
        "fp8_param_gather",
        "disable_parameter_transpose_cache",
        "pp_partition_method",
        "zero_stage",
        "step_batch_size_schedule",
        "decrease_batch_size_if_needed",
        *_LAUNCH_SWITCHES,
    ]
)


def canonical(name: str) -> str:
    name = name.lstrip("-").replace("-", "_")
    return ALIASES.get(name, name)


# -- Megatron-LM command lines --------------------------------------------------------------------

_LAUNCHERS = ("torchrun", "python", "python3", "deepspeed", "srun", "mpirun", "bash")


def _score(command: Command) -> int:
    return sum(1 for w in command.words if w.text and canonical(w.text) in KNOWN)


def training_command(script: Script) -> tuple[Command, int | None] | None:
    """The script's training command, the one passing the most Megatron flags
    (`pretrain_gpt.py ...` under torchrun or python), with the index of its program."""
    best = max(script.commands, key=_score, default=None)
    if best is None or _score(best) == 0:
        return None
    words = best.words
    return best, next((i for i, w in enumerate(words) if w.text and w.text.endswith(".py")), None)


def command_args(script: Script, path: str) -> tuple[dict[str, Arg], dict[str, Arg], list[Note]]:
    """(Megatron arguments, launcher arguments, notes) of the script's training command.
    Words whose value cannot be known and that are no flag's value (an array extended inside
    an `if`) get one note per reason."""
    found = training_command(script)
    if found is None:
        return {}, {}, []
    words, program = list(found[0].words), found[1]
    stray: dict[str, Word] = {}
    launcher = _flags(words[:program], path, {}) if program is not None else {}
    args = _flags(words[program + 1 if program is not None else 0 :], path, stray)
    notes = [
        Note(
            Origin(path, word.position),
            "F002",
            f"arguments that cannot be read from the file ({why}) are not checked",
        )
        for why, word in stray.items()
    ]
    return args, launcher, notes


def _flags(words: list[Word], path: str, stray: dict[str, Word]) -> dict[str, Arg]:
    args: dict[str, Arg] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word.text is None:
            stray.setdefault(word.why, word)
            continue
        if not word.text.startswith("--"):
            continue
        name, equals, inline = word.text.partition("=")
        key = canonical(name)
        origin = Origin(path, word.position)
        if equals:
            args[key] = Arg(inline, origin)
            continue
        if key in _SWITCHES:
            args[key] = Arg(True, origin)
            continue
        values: list[Word] = []
        while i < len(words) and not (words[i].text or "").startswith("--"):
            values.append(words[i])
            i += 1
            if key not in _LISTS:
                break
        if not values:
            args[key] = Arg(True, origin)  # a store_true flag
            continue
        unknown = next((v for v in values if v.text is None), None)
        if unknown is not None:
            args[key] = Arg(None, Origin(path, unknown.position), unknown.why)
        elif key in _LISTS:
            args[key] = Arg([v.text for v in values], Origin(path, values[0].position))
        else:
            args[key] = Arg(values[0].text, Origin(path, values[0].position))
    return args


# -- to the manifest ------------------------------------------------------------------------------


def _int(arg: Arg | None, key: str, notes: list[Note]) -> int | None:
    if arg is None or arg.value is None:
        return None
    value = arg.value
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value).strip()
    number = whole(text)
    if number is not None:
        return number
    if too_long(text):
        raise FrameworkError(
            "F001", f"{flag(key)} has {len(text)} digits: the limit is {MAX_INT_DIGITS}", arg.origin
        )
    notes.append(Note(arg.origin, "F002", f"{flag(key)} is {text!r}, not a whole number"))
    return None


def flag(key: str) -> str:
    """The command-line spelling of an argument name (num_layers -> --num-layers)."""
    return "--" + key.replace("_", "-")


def _true(arg: Arg | None) -> bool:
    if arg is None or arg.value is None:
        return False
    if isinstance(arg.value, str):
        return arg.value.strip().lower() in ("true", "1", "yes")
    return bool(arg.value)


class _Builder(Values):
    """Values placed at the argument each one comes from (the first of `keys` written)."""

    def __init__(self, args: Mapping[str, Arg], notes: list[Note]) -> None:
        super().__init__()
        self.args = args
        self.notes = notes
        self.undetermined: dict[str, Origin] = {}

    def set(self, dotted: str, value: Any, *keys: str) -> None:
        written = next((self.args[k] for k in keys if k in self.args), None)
        if value is None and written is not None:
            # the file writes the argument, but not a value dpguard can read
            self.undetermined[dotted] = written.origin
        self.put(dotted, value, written.origin if written is not None else None)

    def int(self, key: str) -> int | None:
        return _int(self.args.get(key), key, self.notes)


def unknown_notes(args: Mapping[str, Arg], used: Iterable[str]) -> list[Note]:
    """A note for every used argument whose value the file does not determine."""
    return [
        Note(
            args[key].origin,
            "F002",
            f"{flag(key)}: the value cannot be read from the file ({args[key].why}); "
            "dpguard does not guess it",
        )
        for key in sorted(used)
        if key in args and args[key].value is None
    ]


_MLA_RANKS = (
    ("q_lora_rank", "q_lora_rank"),
    ("kv_lora_rank", "kv_lora_rank"),
    ("qk_head_dim", "qk_head_dim"),
    ("qk_rope_head_dim", "qk_pos_emb_head_dim"),
    ("v_head_dim", "v_head_dim"),
)
# megatron/training/arguments.py (_add_mla_args): --q-lora-rank None (a full query projection,
# dpguard's 0), --kv-lora-rank 32, --qk-head-dim 128, --qk-pos-emb-head-dim 64, --v-head-dim 128
_MLA_ARGPARSE = {
    "q_lora_rank": 0,
    "kv_lora_rank": 32,
    "qk_head_dim": 128,
    "qk_pos_emb_head_dim": 64,
    "v_head_dim": 128,
}
# megatron/core/transformer/transformer_config.py MLATransformerConfig
_MLA_CONFIG = {**_MLA_ARGPARSE, "q_lora_rank": 512, "kv_lora_rank": 512}

# Megatron-LM's store_true flags this reader knows: they never take the next word as a value
# (a flag followed by an unknown word would otherwise be read as unknown itself)
_SWITCHES = frozenset(
    {
        "sequence_parallel",
        "use_distributed_optimizer",
        "bf16",
        "fp16",
        "swiglu",
        "untie_embeddings_and_output_weights",
        "group_query_attention",
        "multi_latent_attention",
        "account_for_embedding_in_pipeline_split",
        "account_for_loss_in_pipeline_split",
        "overlap_moe_expert_parallel_comm",
        "overlap_grad_reduce",
        "overlap_param_gather",
        "tp_comm_overlap",
        "delay_wgrad_compute",
        "moe_enable_deepep",
        "recompute_activations",
        "use_mcore_models",
        "use_flash_attn",
        "disable_bias_linear",
        "grad_reduce_in_bf16",
        "use_precision_aware_optimizer",
        "optimizer_cpu_offload",
        "use_megatron_fsdp",
        "fp8_param_gather",
        "disable_parameter_transpose_cache",
        "decrease_batch_size_if_needed",
        *_LAUNCH_SWITCHES,
    }
)


def to_manifest(
    args: Mapping[str, Arg], fmt: str, path: str, extra: Mapping[str, Any] | None = None
) -> Extract:
    """dpguard fields for Megatron arguments, with Megatron-LM's defaults for absent ones."""
    notes = unknown_notes(args, KNOWN)
    b = _Builder(args, notes)
    g = b.int
    layers = g("num_layers")
    _pipeline(b, args, layers)
    untie = _true(args.get("untie_embeddings_and_output_weights")) or (
        "share_embeddings_and_output_weights" in args
        and not _true(args["share_embeddings_and_output_weights"])
    )
    b.set(
        "model.untie_embeddings",
        untie,
        "untie_embeddings_and_output_weights",
        "share_embeddings_and_output_weights",
    )
    for flag, field in (
        ("account_for_embedding_in_pipeline_split", "account_for_embedding"),
        ("account_for_loss_in_pipeline_split", "account_for_loss"),
    ):
        if _true(args.get(flag)):
            b.set(f"parallelism.{field}", True, flag)
    partition = args.get("pp_partition_method")
    if partition is not None and "embedding" in str(partition.value).lower():
        # Megatron-DeepSpeed's 'type:transformer|embedding' balances transformer layers and the
        # (tied) embeddings over the stages: the first and last hold one layer fewer (BLOOM)
        for field in ("account_for_embedding", "account_for_loss"):
            b.set(f"parallelism.{field}", True, "pp_partition_method")

    moe = _shape(b, args, fmt, layers)

    mbs, gbs, seq = g("micro_batch_size"), g("global_batch_size"), g("seq_length")
    b.set("training.micro_batch_size", mbs, "micro_batch_size")
    b.set("training.global_batch_size", gbs, "global_batch_size")
    if fmt in ("megatron", "flagscale"):
        _batch_schedule(b, args)
    iters, samples = g("train_iters"), g("train_samples")
    if iters and gbs and seq:
        b.set("training.tokens", iters * gbs * seq, "train_iters")
    elif samples and seq:
        b.set("training.tokens", samples * seq, "train_samples")
    if args.get("fp8_format") and args["fp8_format"].value not in (None, False, "null"):
        b.set("training.precision", "fp8", "fp8_format", "fp8")
    elif _true(args.get("fp8")):
        b.set("training.precision", "fp8", "fp8")
    elif _true(args.get("bf16")):
        b.set("training.precision", "bf16", "bf16")
    elif _true(args.get("fp16")):
        b.set("training.precision", "fp16", "fp16")
    _state_bytes(b, args)
    _overlap(b, args)
    if _true(args.get("use_megatron_fsdp")):
        # Megatron-FSDP shards what --data-parallel-sharding-strategy names (arguments.py;
        # default optim_grads_params, ZeRO-3)
        strategy = args.get("data_parallel_sharding_strategy")
        zero = _FSDP_ZERO.get(str(strategy.value)) if strategy else 3
        b.set("training.zero_stage", zero, "data_parallel_sharding_strategy", "use_megatron_fsdp")
    elif fmt in ("megatron", "flagscale") or "use_distributed_optimizer" in args:
        zero = 1 if _true(args.get("use_distributed_optimizer")) else 0
        b.set("training.zero_stage", zero, "use_distributed_optimizer")
    _recompute(b, args, fmt)
    _megatron_deepspeed(b, args)
    sp = args.get("sequence_parallel")
    if sp is not None and sp.value is not None:
        b.set("training.sequence_parallel", _true(sp), "sequence_parallel")
    elif sp is None and (b.values.get("parallelism.tensor") or 1) > 1:
        # off unless asked for (argparse's store_true, ModelParallelConfig's default): the
        # manifest's own default (on with TP) is not Megatron's
        b.set("training.sequence_parallel", False, "tensor_model_parallel_size")
    kernel = _dispatcher(args)
    if kernel is not None and moe:
        b.set(
            "communication.all_to_all_kernel",
            kernel,
            "moe_flex_dispatcher_backend",
            "moe_enable_deepep",
            "moe_token_dispatcher_type",
        )
    for dotted, value in (extra or {}).items():
        b.values.setdefault(dotted, value)
    return Extract(fmt, path, b.values, b.origins, tuple(notes), facts(args, fmt), b.undetermined)


# What Megatron-LM refuses beside --step-batch-size-schedule, and where (d98e8a64): validate_args
# in megatron/training/arguments.py raises ValueError('Cannot specify both
# --step-batch-size-schedule and --global-batch-size') for any --global-batch-size written;
# megatron/core/num_microbatches_calculator.py raises ValueError('Cannot specify both
# --step-batch-size-schedule and --decrease-batch-size-if-needed'). The deprecated
# --rampup-batch-size is no such error: set_global_variables no longer passes it on.
_SCHEDULE_REFUSES = (
    ("global_batch_size", "megatron/training/arguments.py, validate_args"),
    ("decrease_batch_size_if_needed", "megatron/core/num_microbatches_calculator.py"),
)


def _batch_schedule(b: _Builder, args: Mapping[str, Arg]) -> None:
    """--step-batch-size-schedule: the global batch steps up during the run. Beside a flag
    Megatron-LM refuses with it, an F001 error at the schedule (the job stops at launch);
    alone, the batch to judge is left to a manifest (F003), not read as the first step's."""
    schedule = args.get("step_batch_size_schedule")
    if schedule is None:
        return
    for key, where in _SCHEDULE_REFUSES:
        if key in args and (key == "global_batch_size" or _true(args[key])):
            b.notes.append(
                Note(
                    schedule.origin,
                    "F001",
                    f"Megatron-LM stops at launch: 'Cannot specify both "
                    f"--step-batch-size-schedule and {flag(key)}' ({where}); keep one of "
                    "them (the schedule sets the global batch)",
                    Severity.ERROR,
                )
            )
    if "global_batch_size" not in args:
        b.undetermined["training.global_batch_size"] = schedule.origin
        b.notes.append(
            Note(
                schedule.origin,
                "F002",
                "--step-batch-size-schedule: the global batch changes during the run; "
                "dpguard judges the one training.global_batch_size gives",
                Severity.INFO,
            )
        )


def _pipeline(b: _Builder, args: Mapping[str, Arg], layers: int | None) -> None:
    """The parallel degrees, the virtual stages and a split set by hand, and the schedule
    (Megatron-LM runs 1F1B, interleaved with virtual stages)."""
    g = b.int
    tp, pp = g("tensor_model_parallel_size"), g("pipeline_model_parallel_size")
    # Megatron-LM's default (1) only when the flag is absent, never for a value the file
    # computes: that one is undetermined
    for dotted, key, degree in (
        ("parallelism.tensor", "tensor_model_parallel_size", tp),
        ("parallelism.pipeline", "pipeline_model_parallel_size", pp),
    ):
        b.set(dotted, degree if key in args else 1, key)
    b.set("parallelism.expert", g("expert_model_parallel_size"), "expert_model_parallel_size")
    b.set(
        "parallelism.expert_tensor",
        g("expert_tensor_parallel_size"),
        "expert_tensor_parallel_size",
    )
    b.set("parallelism.context", g("context_parallel_size"), "context_parallel_size")
    vpp = virtual_stages(args, layers, pp, b.notes)
    b.set(
        "parallelism.virtual_stages",
        vpp,
        "num_virtual_stages_per_pipeline_rank",
        "num_layers_per_virtual_pipeline_stage",
    )
    counts = stage_counts(args, layers, pp, vpp)
    if counts is not None:
        b.set(
            "parallelism.stage_layers",
            counts,
            "pipeline_model_parallel_layout",
            "decoder_first_pipeline_num_layers",
            "decoder_last_pipeline_num_layers",
        )
    if (pp or 1) > 1:
        schedule = "interleaved-1f1b" if (vpp or 1) > 1 else "1f1b"
        b.set("parallelism.schedule", schedule, "pipeline_model_parallel_size")


def _shape(b: _Builder, args: Mapping[str, Arg], fmt: str, layers: int | None) -> bool:
    """The model's shape: layers, widths, heads and query groups, MLA ranks, the experts and
    their width, shared experts, leading dense layers, MTP. True for an MoE model."""
    g, notes = b.int, b.notes
    experts = g("num_experts")
    moe = (experts or 0) > 1
    ep = g("expert_model_parallel_size")
    if not moe and (ep or 1) > 1 and "num_experts" not in args:
        # expert parallelism without the experts: an override file whose recipe (Python, as
        # Megatron-Bridge's) sets them; calling it dense would be a guess, and a wrong one
        b.undetermined["model.architecture"] = args["expert_model_parallel_size"].origin
    else:
        b.set("model.architecture", "moe" if moe else "dense", "num_experts", "num_layers")
    b.set("model.layers", layers, "num_layers")
    b.set("model.hidden_size", g("hidden_size"), "hidden_size")
    b.set("model.attention_heads", g("num_attention_heads"), "num_attention_heads")
    b.set("model.seq_len", g("seq_length"), "seq_length")
    b.set("model.vocab_size", g("vocab_size"), "vocab_size")
    b.set("model.ffn_hidden_size", g("ffn_hidden_size"), "ffn_hidden_size")
    if _true(args.get("swiglu")):
        b.set("model.ffn_activation", "swiglu", "swiglu")
    groups = g("num_query_groups")
    # Megatron-LM reads --num-query-groups only with --group-query-attention; the YAML
    # dialects have no switch
    if groups is not None and (fmt != "megatron" or _true(args.get("group_query_attention"))):
        b.set("model.kv_heads", groups, "num_query_groups")
    b.set("model.head_dim", g("kv_channels"), "kv_channels")  # Qwen3: 128 over 64-wide heads
    if _true(args.get("multi_latent_attention")):
        b.set("model.attention", "mla", "multi_latent_attention")
        # an absent rank takes its default: argparse's for the command-line dialects (no
        # query compression, KV rank 32), MLATransformerConfig's for the YAML ones (512, 512)
        defaults = _MLA_ARGPARSE if fmt in ("megatron", "flagscale") else _MLA_CONFIG
        ranks = {
            field: given if (given := g(key)) is not None or key in args else defaults[key]
            for field, key in _MLA_RANKS
        }
        if all(v is not None for v in ranks.values()):
            b.set("model.mla", ranks, "q_lora_rank", "kv_lora_rank", "multi_latent_attention")
    if moe:
        b.set("model.experts", experts, "num_experts")
        if fmt == "bridge" and "moe_router_topk" not in args:
            # a Bridge YAML overrides a Python recipe, which sets the top-k (Kimi K2: 8);
            # Megatron's default of 2 would be a guess
            b.undetermined["model.experts_per_token"] = args["num_experts"].origin
        else:
            b.set("model.experts_per_token", g("moe_router_topk") or 2, "moe_router_topk")
        # arguments.py: an absent --moe-ffn-hidden-size is --ffn-hidden-size
        width = g("moe_ffn_hidden_size") or g("ffn_hidden_size")
        b.set("model.moe_ffn_hidden_size", width, "moe_ffn_hidden_size", "ffn_hidden_size")
        shared = g("moe_shared_expert_intermediate_size")
        if shared and width and shared % width == 0:
            b.set("model.shared_experts", shared // width, "moe_shared_expert_intermediate_size")
        dense = _leading_dense(args.get("moe_layer_freq"), notes)
        if dense:
            b.set("model.dense_layers", dense, "moe_layer_freq")
    b.set("model.mtp_layers", g("mtp_num_layers"), "mtp_num_layers")
    return moe


def _recompute(b: _Builder, args: Mapping[str, Arg], fmt: str) -> None:
    """Activation recompute: --recompute-granularity (full with its method and layers, or
    selective with its modules), the older --recompute-activations and
    --checkpoint-activations, the deprecated --moe-layer-recompute; none when a launch script
    says nothing (Megatron-LM's default)."""
    notes = b.notes
    granularity = args.get("recompute_granularity")
    if granularity is not None and granularity.value not in (None, "null", ""):
        value = str(granularity.value)
        if value in ("full", "selective"):
            b.set("training.activation_recompute", value, "recompute_granularity")
            if value == "full":
                _full_recompute(b, args)
        else:
            notes.append(
                Note(
                    granularity.origin,
                    "F002",
                    f"recompute granularity {value!r} is not full or selective: not read",
                )
            )
    elif _true(args.get("recompute_activations")):  # arguments.py: granularity selective
        b.set("training.activation_recompute", "selective", "recompute_activations")
    elif _true(args.get("checkpoint_activations")):
        # Megatron-LM before 2.6 and Megatron-DeepSpeed: every layer checkpointed, in chunks of
        # --checkpoint-num-layers (default 1)
        b.set("training.activation_recompute", "full", "checkpoint_activations")
        _full_recompute(b, args)
    elif fmt in ("megatron", "flagscale"):
        b.set("training.activation_recompute", "none", "num_layers")
    modules = args.get("recompute_modules")
    if modules is not None and isinstance(modules.value, list):
        b.set("training.recompute_modules", list(modules.value), "recompute_modules")
    if _true(args.get("moe_layer_recompute")) and b.values.get("training.activation_recompute") != (
        "full"
    ):
        # deprecated --moe-layer-recompute: selective, the MoE layer added to the modules
        # (transformer_config.py __post_init__)
        listed = b.values.get("training.recompute_modules", ["core_attn"])
        b.set("training.activation_recompute", "selective", "moe_layer_recompute")
        b.set(
            "training.recompute_modules",
            [*listed, "moe"] if "moe" not in listed else listed,
            "moe_layer_recompute",
        )


def _megatron_deepspeed(b: _Builder, args: Mapping[str, Arg]) -> None:
    """Megatron-DeepSpeed (--deepspeed): DeepSpeed's framework, its ZeRO stage, its pipeline
    engine and BF16_Optimizer regime, and its attention without a flash flag."""
    deepspeed = _true(args.get("deepspeed"))
    if deepspeed:
        # Megatron-DeepSpeed: DeepSpeed runs the optimizer (and the pipeline, below)
        b.set("training.framework", "deepspeed", "deepspeed")
    zero = b.int("zero_stage") if deepspeed else None
    if zero:
        # Megatron-DeepSpeed hands the optimizer to DeepSpeed, whose ZeRO stage the launch
        # passes as --zero-stage (scripts fill the JSON's zero_optimization.stage from the same
        # variable); without --deepspeed the flag is unused
        b.set("training.zero_stage", zero, "zero_stage", "deepspeed")
    if (
        deepspeed
        and not _true(args.get("no_pipeline_parallel"))
        and (b.values.get("parallelism.pipeline") or 1) > 1
    ):
        # Megatron-DeepSpeed pipelines with DeepSpeed's PipelineEngine (pretrain_gpt.py builds
        # GPTModelPipe unless --no-pipeline-parallel), which keeps in-flight stage outputs
        b.set("runtime.pipeline_parallel_impl", "deepspeed", "deepspeed")
        if b.values.get("training.precision") == "bf16" and not zero:
            # bf16 at ZeRO 0 under the pipeline engine runs DeepSpeed's BF16_Optimizer (engine
            # _do_optimizer_sanity_check; BLOOM's script: "bf16 must use z0! it implements its
            # own zero stage 1 equivalent"): optimizer states sharded over data parallelism,
            # the bf16 gradients kept beside its fp32 buffer
            b.set("training.zero_stage", 1, "zero_stage", "deepspeed")
            b.set("runtime.bf16_grads_kept", True, "zero_stage", "deepspeed")
    if deepspeed and not any(
        _true(args.get(k)) for k in ("use_flash_attn", "use_flash_attn_v1", "use_flash_attn_v2")
    ):
        # Megatron-DeepSpeed's attention materialises the scores unless a flash flag asks
        b.set("runtime.flash_attention", False, "deepspeed")


_FSDP_ZERO = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}


def _full_recompute(b: _Builder, args: Mapping[str, Arg]) -> None:
    """Which layers full recompute covers: Megatron-core's --recompute-method (uniform: every
    layer in groups of --recompute-num-layers; block: only the first that many of each
    stage). A method it does not know is left at dpguard's default (every layer)."""
    method = args.get("recompute_method")
    if method is not None and str(method.value) in ("uniform", "block"):
        b.set("training.recompute_method", str(method.value), "recompute_method")
    layers = b.int("recompute_num_layers")
    if layers is not None and layers >= 1:
        b.set("training.recompute_num_layers", layers, "recompute_num_layers")


# Megatron-LM's switches that hide communication behind compute -> runtime.overlap (read by the
# step-time model, docs/performance.md; the profile's default is off for each)
_OVERLAP = (
    ("overlap_grad_reduce", "dp_grad_reduce"),
    ("overlap_param_gather", "dp_param_gather"),
    ("tp_comm_overlap", "tp"),
    ("overlap_moe_expert_parallel_comm", "ep"),
)


def _overlap(b: _Builder, args: Mapping[str, Arg]) -> None:
    for key, kind in _OVERLAP:
        if _true(args.get(key)):
            b.set(f"runtime.overlap.{kind}", True, key)


def _half(arg: Arg | None) -> bool | None:
    """Whether a dtype argument names a 16- or 8-bit type (None when absent or unknown)."""
    if arg is None or arg.value is None:
        return None
    return any(t in str(arg.value).lower() for t in ("bf16", "bfloat16", "fp16", "float16", "fp8"))


def _state_bytes(b: _Builder, args: Mapping[str, Arg]) -> None:
    """What decides the model-state bytes: FP8 primary weights (--fp8-param-gather) and the
    transpose cache (--disable-parameter-transpose-cache), the gradient and optimizer-state
    precision, and optimizer offload. Megatron-LM's arguments.py keeps bf16 main gradients in
    fp32 unless --grad-reduce-in-bf16 (or the precision-aware optimizer's --main-grads-dtype
    bf16); Megatron-core's DDP config names it grad_reduce_in_fp32 (the YAML dialects). The
    moment dtypes apply only with --use-precision-aware-optimizer (OptimizerConfig); a 16- or
    8-bit pair is priced at 2 B (fp8 moments are 1 B: this errs large). --optimizer-cpu-offload
    moves --optimizer-offload-fraction of the states to the host (default 1.0)."""
    if _true(args.get("grad_reduce_in_bf16")) or _half(args.get("main_grads_dtype")):
        b.set("runtime.main_grad_dtype", "bf16", "grad_reduce_in_bf16", "main_grads_dtype")
    elif (fp32 := args.get("grad_reduce_in_fp32")) is not None and fp32.value is not None:
        b.set("runtime.main_grad_dtype", "fp32" if _true(fp32) else "bf16", "grad_reduce_in_fp32")
    # FP8 primary weights and Transformer Engine's cache of their transposes (memory.state_bytes)
    if _true(args.get("fp8_param_gather")):
        b.set("runtime.fp8_param_gather", True, "fp8_param_gather")
    if _true(args.get("disable_parameter_transpose_cache")):
        b.set("runtime.parameter_transpose_cache", False, "disable_parameter_transpose_cache")
    elif b.values.get("training.precision") == "fp8" and not _true(args.get("fp8_param_gather")):
        # Megatron-core passes is_first_microbatch to Transformer Engine, which then keeps each
        # weight's FP8 cast and transpose for the whole step beside the BF16 weight
        b.set("runtime.fp8_weight_cache", True, "fp8_format", "fp8")
    if _true(args.get("use_precision_aware_optimizer")) and all(
        _half(args.get(k)) for k in ("exp_avg_dtype", "exp_avg_sq_dtype")
    ):
        b.set("training.optimizer_moment_dtype", "bf16", "exp_avg_dtype", "exp_avg_sq_dtype")
    if _true(args.get("optimizer_cpu_offload")):
        fraction = args.get("optimizer_offload_fraction")
        value = 1.0 if fraction is None else _number(fraction)
        b.set(
            "training.optimizer_offload",
            value,
            "optimizer_offload_fraction",
            "optimizer_cpu_offload",
        )


def _number(arg: Arg) -> float | None:
    try:
        return float(arg.value)
    except (TypeError, ValueError):
        return None


def virtual_stages(
    args: Mapping[str, Arg], layers: int | None, pp: int | None, notes: list[Note]
) -> int | None:
    """Megatron's virtual stages per pipeline rank, from whichever flag sets them."""
    direct = _int(args.get("num_virtual_stages_per_pipeline_rank"), "", notes)
    if direct is not None:
        return direct
    stages = layout_stages(args.get("pipeline_model_parallel_layout"))
    if stages is not None and pp and len(stages) % pp == 0:
        return len(stages) // pp  # VPP = the layout's stages / PP
    per_stage = _int(args.get("num_layers_per_virtual_pipeline_stage"), "", notes)
    if per_stage and layers and pp:
        # arguments.py: V = (layers / PP) / layers-per-virtual-stage, integer division: the
        # layers that do not fit are silently dropped (Megatron-LM #468; rule FW001)
        return max((layers // pp) // per_stage, 1)
    return None


def stage_counts(
    args: Mapping[str, Arg], layers: int | None, pp: int | None, vpp: int | None
) -> list[int] | None:
    """Decoder layers of each stage when the split is set by hand: the layout's `t`s per stage
    (when Megatron-core would accept it), or --decoder-first/last-pipeline-num-layers with the
    rest spread evenly over the other stages (arguments.py asks that it divides). None for
    Megatron's even split."""
    if not (layers and pp and pp > 1):
        return None
    if _layout_problem(args, layers, pp) is None:
        stages = layout_stages(args.get("pipeline_model_parallel_layout"))
        if stages is not None:
            return [stage.count("t") for stage in stages]
    first = _int(args.get("decoder_first_pipeline_num_layers"), "", [])  # not a number: even
    last = _int(args.get("decoder_last_pipeline_num_layers"), "", [])
    if first is None and last is None:
        return None
    total = pp * (vpp or 1)
    ends = [n for n in (first, last) if n is not None]
    middle, rest = total - len(ends), layers - sum(ends)
    if middle < 1 or rest < 0 or rest % middle:
        return None  # Megatron refuses it; dpguard keeps its even split
    head = [] if first is None else [first]
    tail = [] if last is None else [last]
    return [*head, *[rest // middle] * middle, *tail]


_LAYOUT_GROUP = re.compile(r"\(([^()]+)\)\*([0-9]{1,6})")
_LAYOUT_REPEAT = re.compile(r"([^|()])\*([0-9]{1,6})")
MAX_LAYOUT = 100_000  # letters a layout may unroll to (no model has a tenth of it)


def layout_stages(arg: Arg | None) -> list[str] | None:
    """The stages of a ``--pipeline-model-parallel-layout`` string, each a string of layer
    letters (E embedding, t decoder, m MTP, L loss), or None when there is no layout or it is
    not in that grammar. Megatron-core's parse_str_to_list: commas are cosmetic, ``(...)*n``
    and ``x*n`` repeat, ``|`` separates stages in order PP rank first, then virtual stage."""
    if arg is None or not isinstance(arg.value, str):
        return None
    stages = _parse_layout(arg.value)
    return None if stages is None else list(stages)


@lru_cache(maxsize=16)  # one reading asks for the same string's stages three times
def _parse_layout(value: str) -> tuple[str, ...] | None:
    text = value.replace(",", "").replace(" ", "")
    try:
        for _ in range(8):  # nested groups unroll from the inside out
            unrolled = _LAYOUT_GROUP.sub(_repeat, text)
            if unrolled == text:
                break
            text = unrolled
        text = _LAYOUT_REPEAT.sub(_repeat, text)
    except OverflowError:  # unrolls past MAX_LAYOUT
        return None
    if not re.fullmatch(r"[ELtm|]+", text):
        return None
    return tuple(text.split("|"))


def _repeat(match: re.Match[str]) -> str:
    """One ``x*n`` or ``(...)*n`` unrolled, its size checked before it is built (a 30-byte
    layout could otherwise ask for gigabytes)."""
    body, times = match.group(1), int(match.group(2))
    if len(body) * times > MAX_LAYOUT or len(match.string) > MAX_LAYOUT:
        raise OverflowError
    return body * times


def _layout_problem(args: Mapping[str, Arg], layers: int | None, pp: int) -> str | None:
    """What Megatron-core refuses at launch in a layout (PipelineParallelLayerLayout)."""
    arg = args.get("pipeline_model_parallel_layout")
    if arg is None or arg.value in (None, ""):
        return None
    stages = layout_stages(arg)
    if stages is None:
        text = str(arg.value)
        shown = repr(text[:80]) + ("..." if len(text) > 80 else "")
        return f"the layout {shown} is not in Megatron's grammar (E, t, m, L, |, (...)*n)"
    if len(stages) % pp:
        return f"the layout has {len(stages)} stages, not a multiple of PP {pp}"
    flat = "".join(stages)
    decoders = flat.count("t")
    if layers is not None and decoders != layers:
        return f"the layout places {decoders} decoder layers, not --num-layers {layers}"
    if not (flat.startswith("E") and flat.endswith("L")) or flat.count("E") + flat.count("L") != 2:
        return "the layout must start with the embedding (E) and end with the loss (L), once each"
    return None


def layer_pattern(value: Any) -> list[int] | None:
    """The MoE (1) / dense (0) pattern of ``--moe-layer-freq``: a list (the YAML dialects), or
    Megatron's moe_freq_type string, a Python list expression such as ``"([0]*3+[1]*58)"`` or
    ``"[0]+[1]*26"``, evaluated over list literals, ``+`` and ``* n`` only. None for an integer
    frequency or anything else."""
    if isinstance(value, list):
        items = value
    elif isinstance(value, str) and len(value) < 2000:
        try:
            items = _pattern(ast.parse(value.strip(), mode="eval").body)
        except (SyntaxError, ValueError, RecursionError):
            return None
    else:
        return None
    ok = all(x in (0, 1) and not isinstance(x, bool) for x in items)
    return list(items) if ok and len(items) <= MAX_LAYOUT else None


def _pattern(node: ast.expr) -> list[Any]:
    """The layers of a --moe-layer-freq expression; its size is checked before each repeat is
    multiplied out (``([0]*100000)*3000`` would be 300 million items)."""
    if isinstance(node, ast.List):
        return [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pattern(node.left), _pattern(node.right)
        if len(left) + len(right) > MAX_LAYOUT:
            raise ValueError("a layer pattern longer than any model")
        return left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for count, items in ((node.right, node.left), (node.left, node.right)):
            times = count.value if isinstance(count, ast.Constant) else None
            if type(times) is int and 0 <= times <= MAX_LAYOUT:
                layers = _pattern(items)
                if len(layers) * times > MAX_LAYOUT:
                    raise ValueError("a layer pattern longer than any model")
                return layers * times
    raise ValueError("not a layer pattern")


def _leading_dense(arg: Arg | None, notes: list[Note]) -> int | None:
    """Leading dense layers (dpguard's dense_layers) of a --moe-layer-freq pattern; a pattern
    with dense layers after the first MoE layer cannot be said, and is noted."""
    if arg is None or arg.value is None:
        return None
    pattern = layer_pattern(arg.value)
    if pattern is None:
        if not isinstance(arg.value, int) or arg.value != 1:
            notes.append(
                Note(
                    arg.origin,
                    "F002",
                    f"--moe-layer-freq {arg.value!r}: only leading dense layers are modelled; "
                    "judged as MoE in every layer",
                    Severity.INFO,
                )
            )
        return None
    leading = next((i for i, x in enumerate(pattern) if x == 1), len(pattern))
    if 0 in pattern[leading:]:
        notes.append(
            Note(
                arg.origin,
                "F002",
                "--moe-layer-freq puts dense layers between MoE layers: only the "
                f"{leading} leading dense layers are modelled",
                Severity.INFO,
            )
        )
    return leading


def _dispatcher(args: Mapping[str, Arg]) -> str | None:
    kind = args.get("moe_token_dispatcher_type")
    backend = args.get("moe_flex_dispatcher_backend")
    if _true(args.get("moe_enable_deepep")):
        return "deepep"
    if kind is None or kind.value is None:
        return None
    if kind.value == "alltoall":
        return "nccl"
    if kind.value == "flex":
        chosen = backend.value if backend is not None and backend.value else "deepep"
        return {"deepep": "deepep", "hybridep": "custom", "ncclep": "nccl"}.get(chosen)
    return None


def facts(args: Mapping[str, Arg], fmt: str) -> dict[str, Any]:
    """Facts for the framework rules (policies/frameworks.yaml): what the file asks for that
    the normalised manifest cannot say, such as the layers Megatron leaves out."""
    notes: list[Note] = []
    layers = _int(args.get("num_layers"), "", notes)
    pp = _int(args.get("pipeline_model_parallel_size"), "", notes) or 1
    per_stage = _int(args.get("num_layers_per_virtual_pipeline_stage"), "", notes)
    built = None
    if layers and per_stage and pp > 1:
        v = max((layers // pp) // per_stage, 1)
        built = per_stage * v * pp
    dropped = layers - built if layers and built is not None and built < layers else None
    placed = any(
        key in args and args[key].value not in (None, "")
        for key in (
            "pipeline_model_parallel_layout",
            "decoder_first_pipeline_num_layers",
            "decoder_last_pipeline_num_layers",
        )
    )
    return {
        "framework.layers_dropped": dropped,
        "framework.layout_problem": _layout_problem(args, layers, pp),
        "framework.custom_layout": placed,
        "framework.moe_bias_problem": _moe_bias_problem(args, fmt, notes),
    }


def _moe_bias_problem(args: Mapping[str, Arg], fmt: str, notes: list[Note]) -> str | None:
    """An MoE whose linear layers keep their biases while its experts are split over TP:
    Megatron-core's TransformerConfig asserts "Bias in Moe is only supported when ETP==1", and
    on a Megatron-LM command line the biases stay unless --disable-bias-linear (arguments.py
    add_bias_linear defaults to true) while the experts' TP size defaults to TP. Only for
    Megatron-LM scripts: Megatron-DeepSpeed (--deepspeed) runs DeepSpeed's MoE, and Bridge's
    and NeMo's model providers set the bias per model."""
    if fmt != "megatron" or _true(args.get("deepspeed")) or _true(args.get("disable_bias_linear")):
        return None
    experts = _int(args.get("num_experts"), "", notes) or 0
    tp = _int(args.get("tensor_model_parallel_size"), "", notes) or 1
    etp = _int(args.get("expert_tensor_parallel_size"), "", notes) or tp
    if experts > 1 and etp > 1:
        return (
            f"{experts} experts with biases (no --disable-bias-linear) and expert tensor "
            f"parallel size {etp}"
        )
    return None


# The emitter (`plan --emit megatron`, dpguard/frameworks/emit.py): the plan as Megatron-LM
# arguments. NeMo's and FlagScale's emitters write the same arguments under their own keys
# (`plan_args`, `launch_nodes`, `OFF`).

# A setting the plan switches off: null in YAML (the framework's default, unset), and on a
# Megatron command line a note to remove the flag (argparse has no way to unset one)
OFF = "<off>"


def emit_config(plan: Plan, notes: Sequence[str] = ()) -> str:
    """`plan --emit megatron`: the plan as a bash array of Megatron-LM flags and the
    `torchrun` line that passes them, with `notes` in the header."""
    title = "# Megatron-LM arguments: they replace the same flags of your command."
    return framed(plan, notes, title, _command_lines)


def plan_args(plan: Plan) -> tuple[list[tuple[str, Any]], list[str]]:
    """(Megatron argument name, value) pairs for the plan, with None for a switch that is on,
    and notes on what the framework spells differently."""
    # the planner imports the readers' profiles: imported here, once a plan exists
    from dpguard.planner.plan import untied

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
        if s.expert_tensor:  # unset: Megatron-LM's default, the tensor size
            args.append(("expert_tensor_parallel_size", s.expert_tensor))
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


def _command_lines(plan: Plan) -> tuple[list[str], list[str]]:
    from dpguard import sizing  # as plan_args imports the planner: once a plan exists

    args, notes = plan_args(plan)
    m, s = plan.manifest, plan.strategy
    if m.model.is_moe and s is not None and sizing.etp(m, s) > 1:
        # a Megatron-LM command keeps the biases unless told, and Megatron-core runs an MoE's
        # biases only at expert TP 1 (FW015): the plan's split experts need them off
        args.append(("disable_bias_linear", None))
        notes.append(
            "--disable-bias-linear: Megatron-core runs an MoE's linear biases only when its "
            "experts are not split over TP (transformer_config.py), and this plan splits them"
        )
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
    nodes, per_node = launch_nodes(plan)
    lines += [
        "# The training command: your entry point and its other arguments, with these:",
        f"torchrun --nproc_per_node {per_node} --nnodes {nodes} "
        'pretrain_gpt.py "${DPGUARD_PLAN_ARGS[@]}"',
    ]
    return lines, notes


def launch_nodes(plan: Plan) -> tuple[int, int]:
    """(nodes, GPUs per node) of the plan's cluster, as launchers take them."""
    cluster = plan.manifest.cluster
    per_node = min(cluster.gpus, cluster.gpus_per_node)
    return -(-cluster.gpus // per_node), per_node
