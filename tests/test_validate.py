"""dpguard.validate and dpguard.manifest: every schema rule, every cross-field check, quantities,
normalisation and defaults.

Each case asserts the *complete* list of findings (code, line, column, exact message), so a check
that fires where it should not fails a test as surely as one that stays silent.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpguard import codes
from dpguard.catalog import load_catalog
from dpguard.check import check_file
from dpguard.findings import Severity
from dpguard.frameworks.profiles import TRAITS, default_profile
from dpguard.manifest import MLA, Manifest, build_manifest, derived_sizes, parse_quantity
from dpguard.validate import schema_problems, validate
from dpguard.yamlsource import load_file, load_text

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "schemas" / "manifest.schema.json").read_text(encoding="utf-8"))
CATALOG = load_catalog()

# Every field, one per line, so each line number below is fixed. DP = 2048 / 16 = 128 and
# M = 15360 / (1 x 128) = 120; EP 64 divides 256 experts and tensor x context x DP = 128. The
# model is DeepSeek-V3 written in full (arXiv 2412.19437 §2.1, §4.2: MLA ranks, SwiGLU, 1 shared
# + 256 routed experts of 2048, 3 dense layers, 1 MTP module), so its shape implies its declared
# 671B / 37B (no X025). The training fields that have defaults take other values, so the
# normalised manifest shows that each one was read.
FULL = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata:
  name: test-run
  owner: platform
  description: A manifest that uses every field.
  labels:
    team: llm
cluster:
  gpus: 2048
  gpus_per_node: 8
  accelerator: H800
  memory_gb: 80
  peak_tflops_bf16: 989
  interconnect:
    inter_node_gbps_per_gpu: 400
    intra_node: nvlink
model:
  architecture: moe
  total_params: 671B
  active_params: 37B
  layers: 61
  hidden_size: 7168
  attention_heads: 128
  seq_len: 4096
  vocab_size: 129280
  experts: 256
  experts_per_token: 8
  ffn_hidden_size: 18432
  ffn_activation: swiglu
  kv_heads: 128
  attention: mla
  mla:
    q_lora_rank: 1536
    kv_lora_rank: 512
    qk_head_dim: 128
    qk_rope_head_dim: 64
    v_head_dim: 128
  moe_ffn_hidden_size: 2048
  shared_experts: 1
  dense_layers: 3
  mtp_layers: 1
  untie_embeddings: true
training:
  tokens: 14.8T
  global_batch_size: 15360
  micro_batch_size: 1
  precision: bf16
  zero_stage: 1
  activation_recompute: selective
  sequence_parallel: false
  recompute_modules: [mla_up_proj, layernorm]
  activation_storage: fp8
  activation_offload: true
  optimizer_offload: 0.5
  optimizer_moment_dtype: bf16
runtime:
  main_grad_dtype: bf16
  flash_attention: false
  cross_entropy: unfused
  tensor_parallel_impl: dtensor
  overlap:
    tp: true
parallelism:
  tensor: 1
  pipeline: 16
  virtual_stages: 1
  expert: 64
  expert_tensor: 1
  context: 1
  microbatches: 120
  schedule: dualpipe
  account_for_embedding: false
  account_for_loss: false
communication:
  all_to_all_kernel: deepep
"""

# Line of each key in FULL (the column is 2 x depth + 1).
LINE: dict[str, int] = {}
for _number, _text in enumerate(FULL.splitlines(), start=1):
    _depth = (len(_text) - len(_text.lstrip())) // 2
    _parents = [k for k in LINE if k.count(".") == _depth - 1 and LINE[k] < _number]
    _key = _text.strip().split(":")[0]
    _dotted = (max(_parents, key=LINE.__getitem__) + "." if _depth else "") + _key
    LINE[_dotted] = _number


def at(dotted: str) -> tuple[int, int]:
    return LINE[dotted], 2 * dotted.count(".") + 1


def _span(lines: list[str], dotted: str) -> tuple[int, int]:
    """Index of `dotted`'s line in `lines` and the index after its last child line."""
    start = 0
    for depth, part in enumerate(dotted.split(".")):
        prefix = "  " * depth + part + ":"
        start = next(
            i
            for i in range(start, len(lines))
            if lines[i].startswith(prefix) and lines[i][len(prefix)] in " \n"
        )
    indent = 2 * dotted.count(".")
    end = start + 1
    while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent:
        end += 1
    return start, end


def edit(text: str, dotted: str, value: str | None) -> str:
    """Set `dotted` to the YAML `value` (replacing any children), or delete it when None."""
    lines = text.splitlines(keepends=True)
    start, end = _span(lines, dotted)
    indent = "  " * dotted.count(".")
    new = [] if value is None else [f"{indent}{dotted.split('.')[-1]}: {value}\n"]
    return "".join(lines[:start] + new + lines[end:])


def locate(text: str, dotted: str) -> tuple[int, int]:
    """Line and column of `dotted` in a block-style `text` (what `at` is for FULL)."""
    start, _end = _span(text.splitlines(keepends=True), dotted)
    return start + 1, 2 * dotted.count(".") + 1


def insert(text: str, parent: str, line: str) -> str:
    """Insert `line` as the first child of `parent` ("" for the top level: the first line)."""
    if not parent:
        return line + "\n" + text
    lines = text.splitlines(keepends=True)
    start, _end = _span(lines, parent)
    indent = "  " * (parent.count(".") + 1)
    return "".join([*lines[: start + 1], f"{indent}{line}\n", *lines[start + 1 :]])


def with_key(dotted: str) -> str:
    """FULL, with `dotted` added (as 0) when FULL does not write it."""
    parent, key = dotted.rsplit(".", 1) if "." in dotted else ("", dotted)
    return FULL if dotted in LINE else insert(FULL, parent, f"{key}: 0")


def apply(text: str, edits: dict[str, str | None]) -> str:
    for dotted, value in edits.items():
        text = edit(text, dotted, value)
    return text


Found = tuple[str, int, int, str]


def findings(text: str) -> list[Found]:
    doc = load_text(text, "m.yaml")
    return [(f.code, f.line, f.col, f.message) for f in validate(doc, CATALOG)]


def manifest(text: str) -> Manifest:
    doc = load_text(text, "m.yaml")
    assert validate(doc, CATALOG) == []
    return build_manifest(doc, CATALOG)


def test_full_manifest_is_valid() -> None:
    assert findings(FULL) == []
    assert LINE["cluster.interconnect.intra_node"] == 17
    assert LINE["parallelism.microbatches"] == 71
    assert len(LINE) == 76


# --- S002: required keys ----------------------------------------------------------------------

REQUIRED = [
    ("apiVersion", "(top level)", (1, 1)),
    ("kind", "(top level)", (1, 1)),
    ("metadata", "(top level)", (1, 1)),
    ("cluster", "(top level)", (1, 1)),
    ("model", "(top level)", (1, 1)),
    ("training", "(top level)", (1, 1)),
    ("metadata.name", "metadata", at("metadata")),
    ("cluster.gpus", "cluster", at("cluster")),
    ("cluster.accelerator", "cluster", at("cluster")),
    ("cluster.interconnect", "cluster", at("cluster")),
    (
        "cluster.interconnect.inter_node_gbps_per_gpu",
        "cluster.interconnect",
        at("cluster.interconnect"),
    ),
    ("model.architecture", "model", at("model")),
    ("model.total_params", "model", at("model")),
    ("model.layers", "model", at("model")),
    ("model.hidden_size", "model", at("model")),
    ("model.attention_heads", "model", at("model")),
    ("model.seq_len", "model", at("model")),
    ("model.vocab_size", "model", at("model")),
    ("training.tokens", "training", at("training")),
    ("training.global_batch_size", "training", at("training")),
    # architecture: moe -> then: required (the schema's allOf if/then)
    ("model.active_params", "model", at("model")),
    ("model.experts", "model", at("model")),
    ("model.experts_per_token", "model", at("model")),
    # an mla block names all five ranks
    ("model.mla.q_lora_rank", "model.mla", at("model.mla")),
    ("model.mla.kv_lora_rank", "model.mla", at("model.mla")),
    ("model.mla.qk_head_dim", "model.mla", at("model.mla")),
    ("model.mla.qk_rope_head_dim", "model.mla", at("model.mla")),
    ("model.mla.v_head_dim", "model.mla", at("model.mla")),
]


@pytest.mark.parametrize(("dotted", "parent", "where"), REQUIRED, ids=[r[0] for r in REQUIRED])
def test_required_key_missing(dotted: str, parent: str, where: tuple[int, int]) -> None:
    key = dotted.split(".")[-1]
    assert findings(edit(FULL, dotted, None)) == [
        ("S002", *where, f"{parent} is missing the required key {key!r}")
    ]


def test_moe_requirements_do_not_apply_to_dense() -> None:
    text = apply(
        FULL,
        {
            "model.architecture": "dense",
            "model.total_params": "37B",
            "model.experts": None,
            "model.experts_per_token": None,
            "model.moe_ffn_hidden_size": None,
            "model.shared_experts": None,
            "model.dense_layers": None,
            "parallelism.expert": None,
            "model.active_params": None,
        },
    )
    assert findings(text) == []


def test_several_moe_requirements_at_once() -> None:
    text = apply(FULL, {"model.active_params": None, "model.experts": None})
    assert findings(text) == [
        ("S002", 18, 1, "model is missing the required key 'active_params'"),
        ("S002", 18, 1, "model is missing the required key 'experts'"),
    ]


def test_every_top_level_key_missing_at_once() -> None:
    assert findings("apiVersion: dpguard/v1\n") == [
        ("S002", 1, 1, f"(top level) is missing the required key {key!r}")
        for key in ("cluster", "kind", "metadata", "model", "training")
    ]


# --- S003: types ------------------------------------------------------------------------------

TYPES = [
    # (dotted, YAML value, expected type in words, the value as the message shows it)
    ("metadata", "5", "a mapping", "5"),
    ("metadata.name", "5", "a string", "5"),
    ("metadata.owner", "[a]", "a string", "a list"),
    ("metadata.description", "true", "a string", "true"),
    ("metadata.labels", "[team]", "a mapping", "a list"),
    ("metadata.labels.team", "1", "a string", "1"),
    ("cluster", "[]", "a mapping", "a list"),
    ("cluster.gpus", "'2048'", "an integer", "'2048'"),
    ("cluster.gpus", "2048.0", "an integer", "2048.0"),
    ("cluster.gpus", "true", "an integer", "true"),
    ("cluster.gpus", "", "an integer", "null"),
    ("cluster.gpus_per_node", "8.0", "an integer", "8.0"),
    ("cluster.accelerator", "800", "a string", "800"),
    ("cluster.memory_gb", "'80'", "a number", "'80'"),
    ("cluster.peak_tflops_bf16", "{a: 1}", "a number", "a mapping"),
    ("cluster.hbm_tbps", "'3.35'", "a number", "'3.35'"),
    ("cluster.scale_up_gbytes_per_s", "true", "a number", "true"),
    ("cluster.interconnect", "400", "a mapping", "400"),
    ("cluster.interconnect.inter_node_gbps_per_gpu", "400G", "a number", "'400G'"),
    ("model", "moe", "a mapping", "'moe'"),
    ("model.layers", "61.0", "an integer", "61.0"),
    ("model.hidden_size", "'7168'", "an integer", "'7168'"),
    ("model.attention_heads", "128.5", "an integer", "128.5"),
    ("model.seq_len", "4K", "an integer", "'4K'"),
    ("model.vocab_size", "false", "an integer", "false"),
    ("model.experts", "'256'", "an integer", "'256'"),
    ("model.experts_per_token", "8.0", "an integer", "8.0"),
    ("model.ffn_hidden_size", "18432.0", "an integer", "18432.0"),
    ("model.kv_heads", "'128'", "an integer", "'128'"),
    ("model.mla", "512", "a mapping", "512"),
    ("model.mla", "[1536, 512]", "a mapping", "a list"),
    ("model.mla.q_lora_rank", "1536.0", "an integer", "1536.0"),
    ("model.mla.kv_lora_rank", "'512'", "an integer", "'512'"),
    ("model.mla.qk_head_dim", "true", "an integer", "true"),
    ("model.mla.qk_rope_head_dim", "64.5", "an integer", "64.5"),
    ("model.mla.v_head_dim", "[128]", "an integer", "a list"),
    ("model.moe_ffn_hidden_size", "'2048'", "an integer", "'2048'"),
    ("model.shared_experts", "1.0", "an integer", "1.0"),
    ("model.dense_layers", "'3'", "an integer", "'3'"),
    ("model.mtp_layers", "true", "an integer", "true"),
    ("training", "1", "a mapping", "1"),
    ("training.global_batch_size", "15360.0", "an integer", "15360.0"),
    ("training.micro_batch_size", "'1'", "an integer", "'1'"),
    ("training.recompute_num_layers", "2.5", "an integer", "2.5"),
    ("training.zero_stage", "1.0", "an integer", "1.0"),
    ("runtime.sharded_gathers_per_layer", "'12'", "an integer", "'12'"),
    ("training.sequence_parallel", "'false'", "true or false", "'false'"),
    ("training.sequence_parallel", "no", "true or false", "'no'"),
    ("training.recompute_modules", "core_attn", "a list", "'core_attn'"),
    ("training.recompute_modules", "{core_attn: true}", "a list", "a mapping"),
    ("training.activation_offload", "1", "true or false", "1"),
    ("training.optimizer_offload", "'0.5'", "a number", "'0.5'"),
    ("training.optimizer_offload", "true", "a number", "true"),
    ("runtime.flash_attention", "'on'", "true or false", "'on'"),
    ("runtime.overlap", "[tp]", "a mapping", "a list"),
    *(
        (f"runtime.overlap.{kind}", "'yes'", "true or false", "'yes'")
        for kind in ("tp", "cp", "ep", "pp", "dp_grad_reduce", "dp_param_gather")
    ),
    ("parallelism", "", "a mapping", "null"),
    ("parallelism.tensor", "2.0", "an integer", "2.0"),
    ("parallelism.pipeline", "'16'", "an integer", "'16'"),
    ("parallelism.virtual_stages", "[1]", "an integer", "a list"),
    ("parallelism.expert", "64.0", "an integer", "64.0"),
    ("parallelism.expert_tensor", "'1'", "an integer", "'1'"),
    ("parallelism.context", "true", "an integer", "true"),
    ("parallelism.microbatches", "'120'", "an integer", "'120'"),
    ("parallelism.accumulation_steps", "2.0", "an integer", "2.0"),
    ("model.untie_embeddings", "'yes'", "true or false", "'yes'"),
    ("model.untie_embeddings", "yes", "true or false", "'yes'"),
    ("model.untie_embeddings", "1", "true or false", "1"),
    ("parallelism.account_for_embedding", "'yes'", "true or false", "'yes'"),
    ("parallelism.account_for_loss", "0", "true or false", "0"),
    ("parallelism.stage_layers", "4", "a list", "4"),
    ("runtime.fp8_param_gather", "'yes'", "true or false", "'yes'"),
    ("runtime.parameter_transpose_cache", "0", "true or false", "0"),
    ("runtime.bf16_grads_kept", "'kept'", "true or false", "'kept'"),
    ("runtime.fp8_weight_cache", "'te'", "true or false", "'te'"),
    ("runtime", "[]", "a mapping", "a list"),
    ("training.framework", "5", "a string", "5"),
    # the deprecated spellings keep their types (and a broken one gets no S008 beside it)
    ("training.flash_attention", "'on'", "true or false", "'on'"),
    ("training.bf16_grads_kept", "'kept'", "true or false", "'kept'"),
    ("training.fp8_weight_cache", "'te'", "true or false", "'te'"),
    ("training.fp8_param_gather", "'yes'", "true or false", "'yes'"),
    ("training.parameter_transpose_cache", "0", "true or false", "0"),
    ("parallelism.untie_embeddings", "'yes'", "true or false", "'yes'"),
    ("communication", "deepep", "a mapping", "'deepep'"),
]


@pytest.mark.parametrize(
    ("dotted", "value", "expected", "shown"), TYPES, ids=[f"{t[0]}={t[1]}" for t in TYPES]
)
def test_wrong_type(dotted: str, value: str, expected: str, shown: str) -> None:
    base = with_key(dotted)
    text = (
        edit(base, dotted, value)
        if dotted != "metadata.labels.team"
        else FULL.replace("    team: llm", f"    team: {value}")
    )
    where = locate(base, dotted) if dotted != "metadata.labels.team" else at(dotted)
    assert findings(text) == [("S003", *where, f"{dotted} must be {expected}, not {shown}")]


QUANTITY_TYPES = [
    ("model.total_params", "true", "true"),
    ("model.active_params", "", "null"),
    ("training.tokens", "[14.8T]", "a list"),
    ("training.tokens", "{T: 14.8}", "a mapping"),
]


@pytest.mark.parametrize(("dotted", "value", "shown"), QUANTITY_TYPES)
def test_quantity_of_the_wrong_type(dotted: str, value: str, shown: str) -> None:
    assert findings(edit(FULL, dotted, value)) == [
        (
            "S003",
            *at(dotted),
            f"{dotted} must be a number or a count such as '671B', not {shown}",
        )
    ]


# --- S005: enums and consts -------------------------------------------------------------------

ENUMS = [
    ("apiVersion", "dpguard/v2", "dpguard/v1", " (did you mean 'dpguard/v1'?)"),
    ("apiVersion", "v1", "dpguard/v1", ""),
    ("kind", "Training", "TrainingManifest", " (did you mean 'TrainingManifest'?)"),
    ("kind", "Job", "TrainingManifest", ""),
    (
        "cluster.interconnect.intra_node",
        "nvlnk",
        "nvlink, xgmi, pcie, other",
        " (did you mean 'nvlink'?)",
    ),
    ("cluster.interconnect.intra_node", "infiniband", "nvlink, xgmi, pcie, other", ""),
    ("model.architecture", "mixture", "moe, dense", ""),
    ("model.architecture", "dens", "moe, dense", " (did you mean 'dense'?)"),
    ("model.ffn_activation", "SwiGLU", "gelu, swiglu", " (did you mean 'swiglu'?)"),
    ("model.ffn_activation", "relu", "gelu, swiglu", " (did you mean 'gelu'?)"),
    ("model.attention", "MLA", "mha, mla", " (did you mean 'mla'?)"),
    ("model.attention", "gqa", "mha, mla", ""),
    ("training.precision", "BF16", "bf16, fp8, fp16", " (did you mean 'bf16'?)"),
    ("training.precision", "fp18", "bf16, fp8, fp16", " (did you mean 'fp8'?)"),
    ("training.precision", "int4", "bf16, fp8, fp16", ""),
    (
        "training.activation_recompute",
        "ful",
        "none, selective, selective_op, full",
        " (did you mean 'full'?)",
    ),
    ("training.activation_recompute", "always", "none, selective, selective_op, full", ""),
    ("training.recompute_method", "blocks", "uniform, block", " (did you mean 'block'?)"),
    ("training.activation_storage", "FP8", "bf16, fp8", " (did you mean 'fp8'?)"),
    ("training.activation_storage", "fp16", "bf16, fp8", " (did you mean 'bf16'?)"),
    ("training.optimizer_moment_dtype", "FP32", "fp32, bf16", " (did you mean 'fp32'?)"),
    ("training.optimizer_moment_dtype", "int8", "fp32, bf16", ""),
    ("runtime.main_grad_dtype", "BF16", "fp32, bf16", " (did you mean 'bf16'?)"),
    ("runtime.main_grad_dtype", "tf32", "fp32, bf16", " (did you mean 'fp32'?)"),
    ("runtime.main_grad_dtype", "int8", "fp32, bf16", ""),
    (
        "runtime.cross_entropy",
        "Unfused",
        "fused, unfused, chunked, fused_linear",
        " (did you mean 'unfused'?)",
    ),
    ("runtime.cross_entropy", "blockwise", "fused, unfused, chunked, fused_linear", ""),
    ("runtime.tensor_parallel_impl", "DTensor", "megatron, dtensor", " (did you mean 'dtensor'?)"),
    ("runtime.tensor_parallel_impl", "fsdp", "megatron, dtensor", ""),
    ("training.main_grad_dtype", "tf32", "fp32, bf16", " (did you mean 'fp32'?)"),
    (
        "runtime.fsdp_gradient_sync",
        "deferrd",
        "per_microbatch, deferred",
        " (did you mean 'deferred'?)",
    ),
    (
        "runtime.master_weights",
        "bf16_remainders",
        "fp32, bf16_remainder",
        " (did you mean 'bf16_remainder'?)",
    ),
    ("training.cross_entropy", "blockwise", "fused, unfused, chunked, fused_linear", ""),
    ("training.tensor_parallel_impl", "fsdp", "megatron, dtensor", ""),
    ("training.pipeline_parallel_impl", "gpipe", "megatron, torch, deepspeed", ""),
    (
        "runtime.pipeline_parallel_impl",
        "torchtitan",
        "megatron, torch, deepspeed",
        " (did you mean 'torch'?)",
    ),
    (
        "parallelism.schedule",
        "DualPipe",
        "gpipe, 1f1b, interleaved-1f1b, zb1p, dualpipe, dualpipev",
        " (did you mean 'dualpipe'?)",
    ),
    (
        "parallelism.schedule",
        "chimera",
        "gpipe, 1f1b, interleaved-1f1b, zb1p, dualpipe, dualpipev",
        "",
    ),
    (
        "communication.all_to_all_kernel",
        "deep-ep",
        "none, nccl, deepep, pplx, uccl-ep, mori, custom",
        " (did you mean 'deepep'?)",
    ),
    (
        "communication.all_to_all_kernel",
        "mpi",
        "none, nccl, deepep, pplx, uccl-ep, mori, custom",
        "",
    ),
]


@pytest.mark.parametrize(
    ("dotted", "value", "allowed", "hint"), ENUMS, ids=[f"{e[0]}={e[1]}" for e in ENUMS]
)
def test_enum_and_const(dotted: str, value: str, allowed: str, hint: str) -> None:
    # (An architecture that is neither moe nor dense gets neither the moe requirements nor the
    # dense checks: the S005 finding is the only one.)
    base = with_key(dotted)
    assert findings(edit(base, dotted, value)) == [
        ("S005", *locate(base, dotted), f"{dotted} is {value!r}; allowed: {allowed}{hint}")
    ]


def test_enum_with_a_non_string_value() -> None:
    assert findings(edit(FULL, "training.precision", "16")) == [
        (
            "S005",
            *at("training.precision"),
            "training.precision is 16; allowed: bf16, fp8, fp16 (did you mean 'bf16'?)",
        )
    ]


# --- S004: ranges, lengths, sizes -------------------------------------------------------------

RANGES = [
    # (dotted, below the minimum, the minimum, above the maximum, the maximum)
    ("cluster.gpus", "0", 1, "1048577", 1048576),
    ("cluster.gpus_per_node", "0", 1, "1025", 1024),
    ("cluster.memory_gb", "0.5", 1, "4097", 4096),
    ("cluster.peak_tflops_bf16", "-1", 1, "100001", 100000),
    ("cluster.hbm_tbps", "0.05", 0.1, "1000.5", 1000),
    ("cluster.scale_up_gbytes_per_s", "0", 1, "100001", 100000),
    ("cluster.interconnect.inter_node_gbps_per_gpu", "0", 1, "100000.5", 100000),
    ("model.layers", "0", 1, "10001", 10000),
    ("model.hidden_size", "0", 1, "1048577", 1048576),
    ("model.attention_heads", "0", 1, "65537", 65536),
    ("model.seq_len", "-4096", 1, "134217729", 134217728),
    ("model.vocab_size", "0", 1, "16777217", 16777216),
    ("model.experts", "0", 1, "65537", 65536),
    ("model.experts_per_token", "0", 1, "65537", 65536),
    ("model.ffn_hidden_size", "0", 1, "16777217", 16777216),
    ("model.kv_heads", "0", 1, "65537", 65536),
    ("model.mla.q_lora_rank", "-1", 0, "1048577", 1048576),
    ("model.mla.kv_lora_rank", "0", 1, "1048577", 1048576),
    ("model.mla.qk_head_dim", "0", 1, "65537", 65536),
    ("model.mla.qk_rope_head_dim", "-1", 0, "65537", 65536),
    ("model.mla.v_head_dim", "0", 1, "65537", 65536),
    ("model.moe_ffn_hidden_size", "0", 1, "16777217", 16777216),
    ("model.shared_experts", "-1", 0, "1025", 1024),
    ("model.dense_layers", "-1", 0, "10001", 10000),
    ("model.mtp_layers", "-1", 0, "65", 64),
    ("training.global_batch_size", "0", 1, "1073741825", 1073741824),
    ("training.micro_batch_size", "0", 1, "65537", 65536),
    ("training.recompute_num_layers", "0", 1, "100001", 100000),
    ("training.zero_stage", "-1", 0, "4", 3),
    ("runtime.sharded_gathers_per_layer", "0", 1, "65", 64),
    ("training.optimizer_offload", "-0.5", 0, "1.5", 1),
    ("parallelism.tensor", "0", 1, "1025", 1024),
    ("parallelism.pipeline", "0", 1, "65537", 65536),
    ("parallelism.virtual_stages", "0", 1, "1025", 1024),
    ("parallelism.expert", "0", 1, "65537", 65536),
    ("parallelism.expert_tensor", "0", 1, "1025", 1024),
    ("parallelism.context", "0", 1, "1025", 1024),
    ("parallelism.microbatches", "0", 1, "16777217", 16777216),
    ("parallelism.accumulation_steps", "0", 1, "65537", 65536),
]


def _shown(value: str) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() and "." not in value else value


@pytest.mark.parametrize(
    ("dotted", "low", "minimum", "high", "maximum"), RANGES, ids=[r[0] for r in RANGES]
)
def test_minimum_and_maximum(dotted: str, low: str, minimum: int, high: str, maximum: int) -> None:
    base = with_key(dotted)
    where = locate(base, dotted)
    assert findings(edit(base, dotted, low)) == [
        ("S004", *where, f"{dotted} is {_shown(low)}; it must be at least {minimum}")
    ]
    assert findings(edit(base, dotted, high)) == [
        ("S004", *where, f"{dotted} is {_shown(high)}; it must be at most {maximum}")
    ]


QUANTITY_RANGES = [
    ("model.total_params", "0", "0", "1e+15"),
    ("model.total_params", "-671000000000", "-6.71e+11", "1e+15"),
    ("model.total_params", "1.0e16", "1e+16", "1e+15"),
    ("model.active_params", "0.5", "0.5", "1e+15"),
    ("training.tokens", "0", "0", "1e+17"),
    ("training.tokens", "2.0e17", "2e+17", "1e+17"),
]


@pytest.mark.parametrize(("dotted", "value", "shown", "maximum"), QUANTITY_RANGES)
def test_quantity_number_out_of_range(dotted: str, value: str, shown: str, maximum: str) -> None:
    assert findings(edit(FULL, dotted, value)) == [
        ("S004", *at(dotted), f"{dotted} is {shown}; it must be between 1 and {maximum}")
    ]


LENGTHS = [
    ("metadata.owner", "''", "metadata.owner must not be empty"),
    ("metadata.owner", "o" * 129, "metadata.owner is 129 characters long; it must be at most 128"),
    ("cluster.accelerator", "''", "cluster.accelerator must not be empty"),
    (
        "cluster.accelerator",
        "H" * 65,
        "cluster.accelerator is 65 characters long; it must be at most 64",
    ),
    (
        "metadata.description",
        "d" * 2001,
        "metadata.description is 2001 characters long; it must be at most 2000",
    ),
]


@pytest.mark.parametrize(
    ("dotted", "value", "message"), LENGTHS, ids=[f"{x[0]}-{len(x[1])}" for x in LENGTHS]
)
def test_string_lengths(dotted: str, value: str, message: str) -> None:
    assert findings(edit(FULL, dotted, value)) == [("S004", *at(dotted), message)]


def test_label_value_length_and_label_count() -> None:
    long_value = FULL.replace("    team: llm", "    team: " + "x" * 257)
    assert findings(long_value) == [
        ("S004", 8, 5, "metadata.labels.team is 257 characters long; it must be at most 256")
    ]
    many = edit(FULL, "metadata.labels", "{" + ", ".join(f"k{i}: v" for i in range(65)) + "}")
    assert findings(many) == [
        ("S004", *at("metadata.labels"), "metadata.labels has 65 entries; it must have at most 64")
    ]
    assert (
        findings(
            edit(FULL, "metadata.labels", "{" + ", ".join(f"k{i}: v" for i in range(64)) + "}")
        )
        == []
    )


def test_labels_take_any_key() -> None:
    text = FULL.replace("    team: llm", "    team: llm\n    cost-centre: '4711'\n    Any_Key.x: y")
    assert findings(text) == []


# --- S006: patterns ---------------------------------------------------------------------------

NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
PATTERNS = [
    (
        "metadata.name",
        "-leading-dash",
        f"metadata.name is '-leading-dash'; it must match {NAME_PATTERN}",
    ),
    ("metadata.name", "'has space'", f"metadata.name is 'has space'; it must match {NAME_PATTERN}"),
    ("metadata.name", "'a/b'", f"metadata.name is 'a/b'; it must match {NAME_PATTERN}"),
    ("metadata.name", "''", f"metadata.name is ''; it must match {NAME_PATTERN}"),
    (
        "metadata.name",
        "n" * 129,
        f"metadata.name is '{'n' * 37}...'; it must match {NAME_PATTERN}",
    ),
]
QUANTITY_FORM = ": write a number or a count with a K/M/B/T suffix, such as '671B' or '14.8T'"
for _dotted, _bad in [
    ("model.total_params", "671X"),
    ("model.total_params", "671b"),
    ("model.total_params", "'671 B'"),
    ("model.active_params", "1.5.5B"),
    ("model.active_params", "-37B"),
    ("training.tokens", "lots"),
    ("training.tokens", "''"),
    ("training.tokens", "'.5T'"),
]:
    _written = _bad.strip("'")
    PATTERNS.append((_dotted, _bad, f"{_dotted} is {_written!r}{QUANTITY_FORM}"))


@pytest.mark.parametrize(
    ("dotted", "value", "message"), PATTERNS, ids=[f"{p[0]}={p[1][:12]}" for p in PATTERNS]
)
def test_pattern(dotted: str, value: str, message: str) -> None:
    assert findings(edit(FULL, dotted, value)) == [("S006", *at(dotted), message)]


# --- S001: unknown keys -----------------------------------------------------------------------

UNKNOWN = [
    ("", "clustr: {}", "clustr", "(top level)", " (did you mean 'cluster'?)"),
    ("", "paralelism: {}", "paralelism", "(top level)", " (did you mean 'parallelism'?)"),
    ("", "x-extra: 1", "x-extra", "(top level)", ""),
    ("metadata", "nmae: x", "nmae", "metadata", " (did you mean 'name'?)"),
    ("metadata", "team: x", "team", "metadata", ""),
    ("cluster", "gpu: 8", "gpu", "cluster", " (did you mean 'gpus'?)"),
    ("cluster", "region: eu", "region", "cluster", ""),
    (
        "runtime",
        "flash_atention: true",
        "flash_atention",
        "runtime",
        " (did you mean 'flash_attention'?)",
    ),
    (
        "cluster.interconnect",
        "intra_nod: nvlink",
        "intra_nod",
        "cluster.interconnect",
        " (did you mean 'intra_node'?)",
    ),
    ("cluster.interconnect", "rdma: true", "rdma", "cluster.interconnect", ""),
    ("runtime.overlap", "nvlink: true", "nvlink", "runtime.overlap", ""),
    # the near key here, and where the key as written belongs (tests/test_wrong_section.py)
    (
        "model",
        "expert: 8",
        "expert",
        "model",
        " (did you mean 'experts'? expert belongs under parallelism)",
    ),
    ("model", "rope: yes", "rope", "model", ""),
    ("model", "kv_head: 8", "kv_head", "model", " (did you mean 'kv_heads'?)"),
    ("model.mla", "q_rank: 8", "q_rank", "model.mla", " (did you mean 'q_lora_rank'?)"),
    ("model.mla", "softmax_scale: 1", "softmax_scale", "model.mla", ""),
    ("training", "precison: bf16", "precison", "training", " (did you mean 'precision'?)"),
    ("training", "lr: 0.001", "lr", "training", ""),
    (
        "training",
        "recompute_module: [mlp]",
        "recompute_module",
        "training",
        " (did you mean 'recompute_modules'?)",
    ),
    ("parallelism", "scheduel: 1f1b", "scheduel", "parallelism", " (did you mean 'schedule'?)"),
    ("parallelism", "data: 8", "data", "parallelism", ""),
    (
        "communication",
        "all_to_all: nccl",
        "all_to_all",
        "communication",
        " (did you mean 'all_to_all_kernel'?)",
    ),
    ("communication", "ib: true", "ib", "communication", ""),
]


@pytest.mark.parametrize(
    ("parent", "line", "key", "where", "hint"), UNKNOWN, ids=[u[2] for u in UNKNOWN]
)
def test_unknown_key(parent: str, line: str, key: str, where: str, hint: str) -> None:
    text = insert(FULL, parent, line)
    position = (1, 1) if not parent else (LINE[parent] + 1, 2 * parent.count(".") + 3)
    assert findings(text) == [("S001", *position, f"unknown key {key!r} in {where}{hint}")]


def test_long_unknown_key_is_cut_in_the_message() -> None:
    text = insert(FULL, "training", "k" * 250 + ": 1")  # under MAX_KEY (256): a schema problem
    assert findings(text) == [
        ("S001", 45, 3, f"unknown key '{'k' * 37}...' in training"),
    ]


def test_merge_key_is_an_unknown_key() -> None:
    text = FULL.replace("parallelism:\n", "parallelism:\n  <<: {tensor: 1}\n")
    assert findings(text) == [("S001", 65, 3, "unknown key '<<' in parallelism")]


def test_schema_fallback_code_for_other_keywords() -> None:
    # uniqueItems is outside the table (in the manifest schema on training.recompute_modules:
    # test_recompute_modules_entries).
    from jsonschema import Draft202012Validator

    doc = load_text("items: [a, a]\n", "p.yaml")
    validator = Draft202012Validator({"properties": {"items": {"uniqueItems": True}}})
    assert list(schema_problems(validator, doc)) == [
        (("items",), "S007", "items: ['a', 'a'] has non-unique elements")
    ]


def test_type_lists_are_named() -> None:
    from jsonschema import Draft202012Validator

    doc = load_text("value: [1]\n", "p.yaml")
    validator = Draft202012Validator({"properties": {"value": {"type": ["string", "number"]}}})
    assert list(schema_problems(validator, doc)) == [
        (("value",), "S003", "value must be a string or a number, not a list")
    ]


# --- every schema rule is covered by a table above --------------------------------------------


def schema_rules(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, str]]:
    """(dotted property, keyword) for every constraint in the manifest schema."""
    constrained = (
        "type",
        "enum",
        "const",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "maxProperties",
        "pattern",
        "oneOf",
    )
    for keyword in constrained:
        if keyword in schema and path:
            yield path, keyword
    for name in schema.get("required", []):
        yield (f"{path}.{name}" if path else name), "required"
    if schema.get("additionalProperties") is False:
        yield path, "additionalProperties"
    for name, sub in schema.get("properties", {}).items():
        yield from schema_rules(sub, f"{path}.{name}" if path else name)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from schema_rules(extra, f"{path}.*")
    for branch in schema.get("allOf", []):
        for name in branch["then"]["properties"]["model"]["required"]:
            yield f"model.{name}", "required"


def covered_rules() -> set[tuple[str, str]]:
    covered = {(dotted, "required") for dotted, _parent, _where in REQUIRED}
    covered |= {(dotted, "type") for dotted, *_ in TYPES}
    covered |= {(dotted, "oneOf") for dotted, *_ in QUANTITY_TYPES + QUANTITY_RANGES}
    covered |= {(dotted, "oneOf") for dotted, *_ in PATTERNS if not dotted.startswith("meta")}
    covered |= {(dotted, "enum") for dotted, *_ in ENUMS if "." in dotted}
    covered |= {(dotted, "const") for dotted, *_ in ENUMS if "." not in dotted}
    covered |= {(dotted, k) for dotted, *_ in RANGES for k in ("minimum", "maximum")}
    covered |= {("metadata.owner", "minLength"), ("metadata.owner", "maxLength")}
    covered |= {("cluster.accelerator", "minLength"), ("cluster.accelerator", "maxLength")}
    covered |= {("metadata.description", "maxLength")}
    covered |= {("metadata.labels.*", "type"), ("metadata.labels.*", "maxLength")}
    covered |= {("metadata.labels", "maxProperties"), ("metadata.name", "pattern")}
    covered |= {(parent, "additionalProperties") for parent, *_ in UNKNOWN}
    covered |= {(dotted, keyword) for dotted, keyword, *_ in SOURCE_CASES}
    covered |= {(dotted, keyword) for dotted, keyword, *_ in HEAD_DIM_CASES}
    return {("metadata.labels.*", k) if d == "metadata.labels.team" else (d, k) for d, k in covered}


# model.head_dim, which FULL (an MLA model) does not write: (keyword, value, code, message).
HEAD_DIM_CASES = [
    ("model.head_dim", "type", "'128'", "S003", "model.head_dim must be an integer"),
    ("model.head_dim", "minimum", "0", "S004", "model.head_dim is 0; it must be at least 1"),
    ("model.head_dim", "maximum", "65537", "S004", "it must be at most 65536"),
]


@pytest.mark.parametrize(("dotted", "keyword", "value", "code", "part"), HEAD_DIM_CASES)
def test_head_dim_schema(dotted: str, keyword: str, value: str, code: str, part: str) -> None:
    text = insert(FULL, "model", f"head_dim: {value}")
    ((got, line, _col, message),) = findings(text)
    assert (got, line) == (code, LINE["model"] + 1) and part in message, (keyword, message)


# The `source:` key (docs/frameworks.md), each rule of its schema: (YAML, code, message part).
SOURCE_CASES = [
    ("source", "type", "source: a.sh\n", "S003", "source must be a mapping"),
    ("source", "additionalProperties", "source: {path: a.sh, fmt: x}\n", "S001", "'fmt'"),
    ("source.path", "required", "source: {format: megatron}\n", "S002", "'path'"),
    ("source.path", "type", "source: {path: 3}\n", "S003", "source.path must be a string"),
    ("source.path", "minLength", "source: {path: ''}\n", "S004", "must not be empty"),
    ("source.format", "enum", "source: {path: a.sh, format: megatrn}\n", "S005", "megatron"),
]


@pytest.mark.parametrize("case", SOURCE_CASES, ids=[f"{c[0]}-{c[1]}" for c in SOURCE_CASES])
def test_source_schema(valid_manifest_text: str, case: tuple[str, ...]) -> None:
    _dotted, _keyword, line, code, part = case
    found = findings(valid_manifest_text + line)
    assert [(c, part in m) for c, _, _, m in found] == [(code, True)], found


def test_every_schema_rule_has_a_case() -> None:
    rules = set(schema_rules(SCHEMA))
    rules = {(d or "", k) for d, k in rules}
    missing = rules - covered_rules()
    assert not missing, f"schema rules without a test case: {sorted(missing)}"
    assert len(rules) > 100


def properties(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    for name, sub in schema.get("properties", {}).items():
        dotted = f"{path}.{name}" if path else name
        yield dotted, sub
        yield from properties(sub, dotted)


def test_every_schema_property_has_a_description() -> None:
    assert SCHEMA["description"]
    undocumented = [d for d, sub in properties(SCHEMA) if not sub.get("description", "").strip()]
    assert undocumented == []
    assert len(list(properties(SCHEMA))) == 109


def test_schema_rejects_unknown_keys_everywhere() -> None:
    objects = [d for d, sub in properties(SCHEMA) if sub.get("type") == "object"]
    assert objects == [
        "metadata",
        "metadata.labels",
        "source",
        "cluster",
        "cluster.interconnect",
        "model",
        "model.mla",
        "training",
        "runtime",
        "runtime.overlap",
        "parallelism",
        "communication",
    ]
    for dotted, sub in properties(SCHEMA):
        if sub.get("type") == "object" and dotted != "metadata.labels":
            assert sub["additionalProperties"] is False, dotted
    assert SCHEMA["additionalProperties"] is False


def test_schema_defaults_match_the_normalised_manifest(valid_manifest_text: str) -> None:
    text = valid_manifest_text.rstrip("\n") + "\nparallelism: {}\n"
    m = manifest(text.replace("  micro_batch_size: 1\n", ""))
    values = {
        "cluster.gpus_per_node": m.cluster.gpus_per_node,
        "training.micro_batch_size": m.training.micro_batch_size,
        "training.precision": m.training.precision,
        "training.zero_stage": m.training.zero_stage,
        "training.activation_recompute": m.training.activation_recompute,
        "model.ffn_activation": m.model.ffn_activation,
        "model.attention": m.model.attention,
        "model.shared_experts": m.model.shared_experts,
        "model.dense_layers": m.model.dense_layers,
        "model.mtp_layers": m.model.mtp_layers,
        "training.recompute_method": m.training.recompute_method,
        "training.recompute_num_layers": m.training.recompute_num_layers,
        "training.activation_storage": m.training.activation_storage,
        "training.activation_offload": m.training.activation_offload,
        "training.optimizer_offload": m.training.optimizer_offload,
        "training.optimizer_moment_dtype": m.training.optimizer_moment_dtype,
        "parallelism.tensor": m.parallelism.tensor if m.parallelism else None,
        "parallelism.pipeline": m.parallelism.pipeline if m.parallelism else None,
        "parallelism.virtual_stages": m.parallelism.virtual_stages if m.parallelism else None,
        "parallelism.expert": m.parallelism.expert if m.parallelism else None,
        "parallelism.context": m.parallelism.context if m.parallelism else None,
        "parallelism.accumulation_steps": (
            m.parallelism.accumulation_steps if m.parallelism else None
        ),
        "model.untie_embeddings": m.model.untie_embeddings,
        "parallelism.account_for_embedding": (
            m.parallelism.account_for_embedding if m.parallelism else None
        ),
        "parallelism.account_for_loss": m.parallelism.account_for_loss if m.parallelism else None,
        "communication.all_to_all_kernel": m.communication.all_to_all_kernel,
    }
    defaults = {d: sub["default"] for d, sub in properties(SCHEMA) if "default" in sub}
    assert defaults == values
    # The runtime traits have no schema default: they are the default framework profile's
    assert m.runtime.profile == "megatron" and not m.runtime.stated
    assert {k: getattr(m.runtime, k) for k in TRAITS} == default_profile().runtime()
    # Defaults derived from other values, or "unset", cannot be a schema `default`: the schema
    # states them in the description and the normalised manifest fills them in.
    derived = {
        "model.ffn_hidden_size": m.model.ffn_hidden_size,
        "model.kv_heads": m.model.kv_heads,
        "model.mla": m.model.mla,
        "model.moe_ffn_hidden_size": m.model.moe_ffn_hidden_size,
        "training.sequence_parallel": m.training.sequence_parallel,
        "training.recompute_modules": m.training.recompute_modules,
    }
    assert derived == {
        "model.ffn_hidden_size": 4 * m.model.hidden_size,
        "model.kv_heads": m.model.attention_heads,
        "model.mla": None,
        "model.moe_ffn_hidden_size": None,
        "training.sequence_parallel": None,
        "training.recompute_modules": ("core_attn",),
    }
    assert not derived.keys() & defaults.keys()


# --- cross-field checks X001..X024 ------------------------------------------------------------

NO_PARALLELISM = edit(FULL, "parallelism", None)
DENSE = apply(
    FULL,
    {
        "model.architecture": "dense",
        "model.total_params": "70B",
        "model.active_params": None,
        "model.experts": None,
        "model.experts_per_token": None,
        "model.moe_ffn_hidden_size": None,
        "model.shared_experts": None,
        "model.dense_layers": None,
        "parallelism.expert": None,
        "communication.all_to_all_kernel": "none",
    },
)
# Megatron-core's recompute module names (transformer_config.py `recompute_modules`).
RECOMPUTE_MODULES = (
    "core_attn",
    "layernorm",
    "mla_up_proj",
    "mlp",
    "moe",
    "moe_act",
    "shared_experts",
)
# Grouped-query attention instead of MLA (Llama-3-style 8 key-value heads).
GQA = apply(
    FULL,
    {
        "model.kv_heads": "8",
        "model.attention": None,
        "model.mla": None,
        "training.recompute_modules": "[core_attn]",
    },
)
KNOWN = (
    "known: A100-40GB, A100-80GB, B200, GB200, Gaudi3, H100-NVL, H100-PCIe, H100-SXM, H20, "
    "H200, H800, L40S, MI300X, MI325X, or custom"
)

# (id, base text, edits, expected findings); each check once firing, once at its boundary.
STAGED = insert(FULL, "parallelism", "stage_layers: [3" + ", 4" * 14 + ", 2]")

# FULL with full recompute of the first two layers of each stage (Megatron's block method)
BLOCK = insert(
    insert(
        apply(FULL, {"training.activation_recompute": "full", "training.recompute_modules": None}),
        "training",
        "recompute_num_layers: 2",
    ),
    "training",
    "recompute_method: block",
)
_X031 = [
    (
        "X031",
        *locate(BLOCK, f"training.{key}"),
        f"{key} applies only with activation_recompute: full",
    )
    for key in ("recompute_method", "recompute_num_layers")
]

CROSS: list[tuple[str, str, dict[str, str | None], list[Found]]] = [
    (
        "X001",
        FULL,
        {"cluster.gpus": "2040"},
        [
            (
                "X001",
                *at("cluster.gpus"),
                "2040 GPUs is not divisible by tensor x pipeline x context = 1 x 16 x 1 = 16",
            )
        ],
    ),
    ("X001-ok", FULL, {"cluster.gpus": "4096", "parallelism.microbatches": "60"}, []),
    (
        "X001-context",
        FULL,
        {"parallelism.context": "3", "model.seq_len": "4098"},
        [
            (
                "X001",
                *at("cluster.gpus"),
                "2048 GPUs is not divisible by tensor x pipeline x context = 1 x 16 x 3 = 48",
            )
        ],
    ),
    (
        "X002",
        FULL,
        {"cluster.gpus_per_node": "6"},
        [("X002", *at("cluster.gpus"), "2048 GPUs is not a whole number of 6-GPU nodes")],
    ),
    (
        "X002-no-parallelism",
        NO_PARALLELISM,
        {"cluster.gpus": "12"},
        [("X002", *at("cluster.gpus"), "12 GPUs is not a whole number of 8-GPU nodes")],
    ),
    ("X002-ok-part-of-a-node", NO_PARALLELISM, {"cluster.gpus": "4"}, []),
    (
        "X002-ok-default-8",
        NO_PARALLELISM,
        {"cluster.gpus": "16", "cluster.gpus_per_node": None},
        [],
    ),
    (
        "X003",
        FULL,
        {"training.global_batch_size": "15361"},
        [
            (
                "X003",
                *at("training.global_batch_size"),
                "global_batch_size (15361) is not divisible by micro_batch_size x data parallel "
                "= 1 x 128 = 128",
            )
        ],
    ),
    (
        "X003-micro-batch",
        FULL,
        {"training.micro_batch_size": "7"},
        [
            (
                "X003",
                *at("training.global_batch_size"),
                "global_batch_size (15360) is not divisible by micro_batch_size x data parallel "
                "= 7 x 128 = 896",
            )
        ],
    ),
    (
        "X003-ok",
        FULL,
        {"training.global_batch_size": "128", "parallelism.microbatches": "1"},
        [],
    ),
    (
        "X004",
        FULL,
        {"parallelism.microbatches": "100"},
        [
            (
                "X004",
                *at("parallelism.microbatches"),
                "microbatches is 100 but global_batch_size / (micro_batch_size x data parallel) "
                "= 15360 / (1 x 128) = 120",
            )
        ],
    ),
    ("X004-ok-absent", FULL, {"parallelism.microbatches": None}, []),
    (
        "X004-ok-micro-batch-2",
        FULL,
        {"training.micro_batch_size": "2", "parallelism.microbatches": "60"},
        [],
    ),
    (
        "X005",
        FULL,
        {"model.active_params": "700B"},
        [
            (
                "X005",
                *at("model.active_params"),
                "active_params (700,000,000,000) exceeds total_params (671,000,000,000)",
            )
        ],
    ),
    ("X005-ok-equal", FULL, {"model.active_params": "671000000000"}, []),
    (
        "X006-experts",
        DENSE,
        {"model.vocab_size": "129280\n  experts: 8"},
        [("X006", 26, 3, "model.experts is set on a dense model")],
    ),
    (
        "X006-experts-per-token",
        DENSE,
        {"model.vocab_size": "129280\n  experts_per_token: 2"},
        [("X006", 26, 3, "model.experts_per_token is set on a dense model")],
    ),
    (
        "X006-expert-parallelism",
        DENSE,
        {"parallelism.context": "1\n  expert: 2"},
        [("X006", 64, 3, "expert parallelism is set on a dense model")],
    ),
    ("X006-ok-expert-1", DENSE, {"parallelism.context": "1\n  expert: 1"}, []),
    (
        "X007",
        FULL,
        {"model.experts_per_token": "300"},
        [
            (
                "X007",
                *at("model.experts_per_token"),
                "experts_per_token (300) must be smaller than experts (256): a model that routes "
                "every token to every expert is dense",
            )
        ],
    ),
    (
        "X007-equal",
        FULL,
        {"model.experts_per_token": "256"},
        [
            (
                "X007",
                *at("model.experts_per_token"),
                "experts_per_token (256) must be smaller than experts (256): a model that routes "
                "every token to every expert is dense",
            )
        ],
    ),
    (
        # One fewer than the experts, with a consistent shape: 8 experts, top-7, 100B total,
        # 90B active -> 10B per expert, 80B routed, 18.1B left after the embeddings.
        "X007-ok-one-less",
        FULL,
        {
            "model.total_params": "100B",
            "model.active_params": "90B",
            "model.experts": "8",
            "model.experts_per_token": "7",
            "parallelism.expert": "8",
        },
        [],
    ),
    (
        # 64 experts, top-8, 100B total, 10B active: routed experts alone would be
        # 64 x (100B - 10B) / (64 - 8) = 102.86B > 100B (the case that crashed the memory model).
        "X018-moe",
        FULL,
        {"model.total_params": "100B", "model.active_params": "10B", "model.experts": "64"},
        [
            (
                "X018",
                *at("model.total_params"),
                "total_params (100,000,000,000) - routed experts 102,857,142,857 - embeddings "
                "1,853,358,080 leaves -4,710,500,937 parameters for the transformer layers; "
                "check total_params, active_params, experts, vocab_size and hidden_size",
            )
        ],
    ),
    (
        "X008",
        FULL,
        {"model.experts": "160"},
        [
            (
                "X008",
                *at("parallelism.expert"),
                "experts (160) is not divisible by expert parallel size 64",
            )
        ],
    ),
    ("X008-ok", FULL, {"model.experts": "192"}, []),
    (
        "X009",
        FULL,
        {"parallelism.expert": "256"},
        [
            (
                "X009",
                *at("parallelism.expert"),
                "expert parallel size 256 does not divide tensor x context x data parallel "
                "= 1 x 1 x 128 = 128",
            )
        ],
    ),
    ("X009-ok", FULL, {"parallelism.expert": "128"}, []),
    (
        "X009-expert-tensor",
        FULL,
        {"parallelism.expert_tensor": "4"},
        [
            (
                "X009",
                *at("parallelism.expert_tensor"),
                "expert x expert_tensor = 64 x 4 = 256 does not divide tensor x context x data "
                "parallel = 1 x 1 x 128 = 128",
            )
        ],
    ),
    ("X009-expert-tensor-ok", FULL, {"parallelism.expert_tensor": "2"}, []),
    (
        "X010",
        FULL,
        {
            "model.attention_heads": "100",
            "model.kv_heads": "100",  # one per query head: X021 stays out of it
            "parallelism.tensor": "8",
            "parallelism.microbatches": "960",
        },
        [
            (
                "X010",
                *at("parallelism.tensor"),
                "attention_heads (100) is not divisible by tensor parallel size 8",
            )
        ],
    ),
    (
        "X010-ok",
        FULL,
        {"parallelism.tensor": "8", "parallelism.microbatches": "960"},
        [],
    ),
    (
        "X011",
        FULL,
        {"model.seq_len": "4100", "parallelism.context": "4", "parallelism.microbatches": "480"},
        [
            (
                "X011",
                *at("parallelism.context"),
                "seq_len (4100) is not divisible by 2 x context parallel size (8)",
            )
        ],
    ),
    (
        "X011-ok",
        FULL,
        {"model.seq_len": "4104", "parallelism.context": "4", "parallelism.microbatches": "480"},
        [],
    ),
    ("X011-ok-no-context", FULL, {"model.seq_len": "4097"}, []),
    (
        "X012",
        FULL,
        {"cluster.accelerator": "H900"},
        [
            (
                "X012",
                *at("cluster.accelerator"),
                f"unknown accelerator 'H900'; {KNOWN}",
            )
        ],
    ),
    (
        "X012-no-hint",
        FULL,
        {"cluster.accelerator": "TPU-v5p"},
        [("X012", *at("cluster.accelerator"), f"unknown accelerator 'TPU-v5p'; {KNOWN}")],
    ),
    ("X012-ok-alias", FULL, {"cluster.accelerator": "h800_sxm5"}, []),
    ("X012-ok-custom", FULL, {"cluster.accelerator": "Custom"}, []),
    (
        "X013",
        FULL,
        {
            "cluster.accelerator": "custom",
            "cluster.memory_gb": None,
            "cluster.peak_tflops_bf16": None,
        },
        [
            ("X013", *at("cluster.accelerator"), "a custom accelerator needs cluster.memory_gb"),
            (
                "X013",
                *at("cluster.accelerator"),
                "a custom accelerator needs cluster.peak_tflops_bf16",
            ),
        ],
    ),
    ("X013-ok", FULL, {"cluster.accelerator": "custom"}, []),
    (
        "X013-one",
        FULL,
        {"cluster.accelerator": "custom", "cluster.peak_tflops_bf16": None},
        [
            (
                "X013",
                *at("cluster.accelerator"),
                "a custom accelerator needs cluster.peak_tflops_bf16",
            )
        ],
    ),
    (
        "X014",
        FULL,
        {"model.layers": "15"},
        [
            (
                "X014",
                *at("parallelism.pipeline"),
                "pipeline x virtual_stages = 16 stages for 15 layers: some stages would hold "
                "no layer",
            )
        ],
    ),
    (
        "X014-virtual",
        FULL,
        {"model.layers": "31", "parallelism.virtual_stages": "2"},
        [
            (
                "X014",
                *at("parallelism.pipeline"),
                "pipeline x virtual_stages = 32 stages for 31 layers: some stages would hold "
                "no layer",
            )
        ],
    ),
    ("X014-ok", FULL, {"model.layers": "32", "parallelism.virtual_stages": "2"}, []),
    # Megatron's account-for-embedding/loss: 14 layers + embedding + loss fill 16 stages
    (
        "X014-ok-accounted",
        FULL,
        {
            "model.layers": "14",
            "parallelism.account_for_embedding": "true",
            "parallelism.account_for_loss": "true",
        },
        [],
    ),
    # a split set by hand (STAGED: 3 layers beside the embedding, 2 beside MTP and the head,
    # 4 elsewhere): one count per stage, all 61 layers
    (
        "X030",
        STAGED,
        {"parallelism.stage_layers": "[" + ", ".join(["4"] * 16) + "]"},
        [
            (
                "X030",
                *locate(STAGED, "parallelism.stage_layers"),
                "stage_layers gives 16 stages holding 64 layers, but the pipeline has 16 "
                "stages and the model 61 layers",
            )
        ],
    ),
    (
        "X030-stages",
        STAGED,
        {"parallelism.stage_layers": "[1" + ", 4" * 14 + ", 0]"},
        [
            (
                "X030",
                *locate(STAGED, "parallelism.stage_layers"),
                "stage_layers gives 16 stages holding 57 layers, but the pipeline has 16 "
                "stages and the model 61 layers",
            )
        ],
    ),
    ("X030-ok", STAGED, {}, []),
    # a stage set by hand may hold no layer (DeepSeek-V3's last stage: MTP and loss): no X014
    (
        "X030-ok-empty-stage",
        STAGED,
        {"model.layers": "15", "parallelism.stage_layers": "[" + "1, " * 15 + "0]"},
        [],
    ),
    (
        "X015",
        FULL,
        {
            "parallelism.pipeline": "1",
            "parallelism.virtual_stages": "2",
            "training.global_batch_size": "20480",
            "parallelism.microbatches": "10",
        },
        [("X015", *at("parallelism.virtual_stages"), "virtual_stages > 1 needs pipeline > 1")],
    ),
    (
        "X015-ok",
        FULL,
        {
            "parallelism.pipeline": "2",
            "parallelism.virtual_stages": "2",
            "parallelism.microbatches": "15",
        },
        [],
    ),
    (
        "X016",
        FULL,
        {"model.total_params": "2000T"},
        [
            (
                "X016",
                *at("model.total_params"),
                "model.total_params is '2000T'; it must be between 1 and 1e+15",
            )
        ],
    ),
    (
        "X016-zero",
        FULL,
        {"model.active_params": "0B"},
        [
            (
                "X016",
                *at("model.active_params"),
                "model.active_params is '0B'; it must be between 1 and 1e+15",
            )
        ],
    ),
    (
        "X016-fraction",
        FULL,
        {"model.active_params": "'0.4'"},
        [
            (
                "X016",
                *at("model.active_params"),
                "model.active_params is '0.4'; it must be between 1 and 1e+15",
            )
        ],
    ),
    (
        "X016-overflow",
        FULL,
        {"model.total_params": "1e999999T"},
        [
            (
                "X016",
                *at("model.total_params"),
                "model.total_params is '1e999999T'; it must be between 1 and 1e+15",
            )
        ],
    ),
    (
        "X016-tokens",
        FULL,
        {"training.tokens": "100001T"},
        [
            (
                "X016",
                *at("training.tokens"),
                "training.tokens is '100001T'; it must be between 1 and 1e+17",
            )
        ],
    ),
    (
        "X016-ok-limits",
        FULL,
        # Active 100T keeps the MoE split consistent (X018): 256 x 900T / 248 = 929T routed.
        {
            "model.total_params": "1000T",
            "training.tokens": "100000T",
            "model.active_params": "100T",
        },
        [],
    ),
    (
        "X018-dense",
        DENSE,
        {"model.total_params": "1B"},
        [
            (
                "X018",
                *at("model.total_params"),
                # 129,280 x 7,168 x 2 (untied) = 1,853,358,080 embedding parameters
                "total_params (1,000,000,000) - embeddings 1,853,358,080 leaves -853,358,080 "
                "parameters for the transformer layers; check total_params, active_params, "
                "experts, vocab_size and hidden_size",
            )
        ],
    ),
    ("X018-ok-consistent-moe", FULL, {}, []),
    (
        # a missing suffix: the hint, not X018's negative layer budget
        "X029",
        DENSE,
        {"model.total_params": "70"},
        [
            (
                "X029",
                *at("model.total_params"),
                "model.total_params is 70 parameters: a bare number counts single parameters; "
                "did you mean 70B? (write the suffix: K, M, B or T)",
            )
        ],
    ),
    (
        "X029-tokens",
        FULL,
        {"training.tokens": "999999"},
        [
            (
                "X029",
                *at("training.tokens"),
                "training.tokens is 999,999 tokens: a bare number counts single tokens; did you "
                "mean 999999B? (write the suffix: K, M, B or T)",
            )
        ],
    ),
    ("X029-ok-at-a-million", FULL, {"training.tokens": "1000000"}, []),
    (
        "X017",
        DENSE,
        {"model.total_params": "70B\n  active_params: 10B"},
        [
            (
                "X017",
                21,
                3,
                "a dense model activates all its parameters: active_params (10,000,000,000) "
                "must equal total_params (70,000,000,000) or be left out",
            )
        ],
    ),
    ("X017-ok-equal", DENSE, {"model.total_params": "70B\n  active_params: 7.0e10"}, []),
    (
        "X006-moe-ffn-hidden-size",
        DENSE,
        {"model.vocab_size": "129280\n  moe_ffn_hidden_size: 2048"},
        [("X006", 26, 3, "model.moe_ffn_hidden_size is set on a dense model")],
    ),
    (
        "X006-shared-experts",
        DENSE,
        {"model.vocab_size": "129280\n  shared_experts: 1"},
        [("X006", 26, 3, "model.shared_experts is set on a dense model")],
    ),
    (
        "X006-dense-layers",
        DENSE,
        {"model.vocab_size": "129280\n  dense_layers: 3"},
        [("X006", 26, 3, "model.dense_layers is set on a dense model")],
    ),
    # MTP and the dense FFN width are not MoE-only.
    ("X006-ok-mtp-and-ffn", DENSE, {"model.mtp_layers": "2", "model.ffn_hidden_size": "28672"}, []),
    (
        "X019-block-without-attention",
        FULL,
        {"model.attention": None},
        [
            (
                "X019",
                *locate(edit(FULL, "model.attention", None), "model.mla"),
                "model.mla is set but model.attention is not mla",
            )
        ],
    ),
    (
        "X019-block-with-mha",
        FULL,
        {"model.attention": "mha"},
        [("X019", *at("model.mla"), "model.mla is set but model.attention is not mla")],
    ),
    (
        "X019-attention-without-block",
        FULL,
        {"model.mla": None},
        [("X019", *at("model.attention"), "attention: mla needs the model.mla ranks")],
    ),
    ("X019-ok-mha", FULL, {"model.attention": "mha", "model.mla": None}, []),
    ("X019-ok-default-mha", GQA, {}, []),
    (
        "X020",
        FULL,
        {"training.activation_recompute": "full"},
        [
            (
                "X020",
                *at("training.recompute_modules"),
                "recompute_modules applies only with activation_recompute: selective",
            )
        ],
    ),
    (
        # activation_recompute left out is none
        "X020-default-none",
        FULL,
        {"training.activation_recompute": None},
        [
            (
                "X020",
                *locate(
                    edit(FULL, "training.activation_recompute", None), "training.recompute_modules"
                ),
                "recompute_modules applies only with activation_recompute: selective",
            )
        ],
    ),
    (
        "X020-empty-list",
        FULL,
        {"training.activation_recompute": "none", "training.recompute_modules": "[]"},
        [
            (
                "X020",
                *at("training.recompute_modules"),
                "recompute_modules applies only with activation_recompute: selective",
            )
        ],
    ),
    (
        "X020-ok-full-without-modules",
        FULL,
        {"training.activation_recompute": "full", "training.recompute_modules": None},
        [],
    ),
    (
        "X020-ok-selective-all-modules",
        FULL,
        {"training.recompute_modules": f"[{', '.join(RECOMPUTE_MODULES)}]"},
        [],
    ),
    ("X031", BLOCK, {"training.activation_recompute": "selective"}, _X031),
    # activation_recompute left out is none
    ("X031-default-none", BLOCK, {"training.activation_recompute": None}, _X031),
    ("X031-ok-full", BLOCK, {}, []),
    (
        "X032",
        FULL,
        {"training.tokens": "14.8T\n  framework: megatrom"},
        [
            (
                "X032",
                LINE["training.tokens"] + 1,
                3,
                "training.framework is 'megatrom', which names no framework profile; known: "
                "bridge, deepspeed, flagscale, megatron, nanotron, nemo, torchtitan (did you "
                "mean 'megatron'?)",
            )
        ],
    ),
    ("X032-ok", FULL, {"training.tokens": "14.8T\n  framework: torchtitan"}, []),
    (
        "X033",
        FULL,
        {"training.tokens": "14.8T\n  flash_attention: true"},
        [
            (
                "S008",
                LINE["training.tokens"] + 1,
                3,
                "training.flash_attention is deprecated: write it as runtime.flash_attention "
                "(same meaning)",
            ),
            (
                "X033",
                LINE["training.tokens"] + 1,
                3,
                "training.flash_attention is True but runtime.flash_attention is False: "
                "training.flash_attention is the deprecated spelling of runtime.flash_attention; "
                "keep runtime.flash_attention only",
            ),
        ],
    ),
    ("X033-ok", FULL, {"runtime.flash_attention": "true"}, []),
    (
        "X034",
        FULL,
        {
            "training.tokens": "14.8T\n  framework: torchtitan",
            "runtime.flash_attention": "false\n  fp8_weight_cache: true",
        },
        [
            (
                "X034",
                LINE["runtime.flash_attention"] + 2,
                3,
                "runtime.fp8_weight_cache: torchtitan has no fp8_weight_cache trait to override "
                "(policies/frameworks/torchtitan.yaml; its traits: cross_entropy, "
                "flash_attention, fp8_param_gather, fsdp_gradient_sync, main_grad_dtype, "
                "pipeline_parallel_impl, tensor_parallel_impl)",
            )
        ],
    ),
    (
        "X034-ok",
        FULL,
        {
            "training.tokens": "14.8T\n  framework: megatron",
            "runtime.flash_attention": "false\n  fp8_weight_cache: true",
        },
        [],
    ),
    (
        "X035",
        FULL,
        {"training.tokens": "14.8T\n  framework: torchtitan", "parallelism.expert_tensor": "2"},
        [
            (
                "X035",
                LINE["parallelism.expert_tensor"] + 1,
                3,
                "parallelism.expert_tensor is 2: torchtitan accepts only 1 or the tensor size "
                "(1) (policies/frameworks/torchtitan.yaml expert_tensor.choices) and refuses "
                "others at launch",
            )
        ],
    ),
    # Megatron-LM takes any size EP x ETP divides
    (
        "X035-ok",
        FULL,
        {"training.tokens": "14.8T\n  framework: megatron", "parallelism.expert_tensor": "2"},
        [],
    ),
    (
        "X021",
        GQA,
        {"model.kv_heads": "3"},
        [
            (
                "X021",
                *at("model.kv_heads"),
                "kv_heads (3) does not divide attention_heads (128): every key-value head "
                "serves a whole group of query heads",
            )
        ],
    ),
    (
        "X021-more-than-heads",
        GQA,
        {"model.kv_heads": "256"},
        [
            (
                "X021",
                *at("model.kv_heads"),
                "kv_heads (256) does not divide attention_heads (128): every key-value head "
                "serves a whole group of query heads",
            )
        ],
    ),
    ("X021-ok-multi-query", GQA, {"model.kv_heads": "1"}, []),
    ("X021-ok-one-per-head", GQA, {"model.kv_heads": "128"}, []),
    (
        "X022",
        GQA,
        {"model.kv_heads": "4", "parallelism.tensor": "8", "parallelism.microbatches": "960"},
        [
            (
                "X022",
                *locate(GQA, "parallelism.tensor"),
                "tensor parallel size 8 does not divide kv_heads (4): each tensor-parallel rank "
                "needs whole key-value heads",
            )
        ],
    ),
    ("X022-ok", GQA, {"parallelism.tensor": "8", "parallelism.microbatches": "960"}, []),
    # MLA has no key-value head groups to split: kv_heads does not constrain tensor parallelism.
    (
        "X022-ok-mla",
        FULL,
        {"model.kv_heads": "4", "parallelism.tensor": "8", "parallelism.microbatches": "960"},
        [],
    ),
    (
        "X023",
        FULL,
        {"model.mla.q_lora_rank": "7168"},
        [
            (
                "X023",
                *at("model.mla.q_lora_rank"),
                "mla.q_lora_rank (7168) must be smaller than hidden_size (7168): it is a "
                "compression rank",
            )
        ],
    ),
    (
        "X023-kv",
        FULL,
        {"model.mla.kv_lora_rank": "8192"},
        [
            (
                "X023",
                *at("model.mla.kv_lora_rank"),
                "mla.kv_lora_rank (8192) must be smaller than hidden_size (7168): it is a "
                "compression rank",
            )
        ],
    ),
    (
        "X023-ok-one-less",
        FULL,
        {"model.mla.q_lora_rank": "7167", "model.mla.kv_lora_rank": "7167"},
        [],
    ),
    # q_lora_rank 0: no query compression (DeepSeek-V2-Lite), not a rank to compare.
    ("X023-ok-no-query-compression", FULL, {"model.mla.q_lora_rank": "0"}, []),
    (
        "X024",
        FULL,
        {"model.dense_layers": "61"},
        [
            (
                "X024",
                *at("model.dense_layers"),
                "dense_layers (61) must be smaller than layers (61) on an MoE model",
            )
        ],
    ),
    ("X024-ok-one-moe-layer", FULL, {"model.dense_layers": "60"}, []),
]


@pytest.mark.parametrize(("case", "base", "edits", "expected"), CROSS, ids=[c[0] for c in CROSS])
def test_cross_field(
    case: str, base: str, edits: dict[str, str | None], expected: list[Found]
) -> None:
    assert findings(apply(base, edits)) == expected


def test_dense_base_is_valid() -> None:
    assert findings(DENSE) == []
    assert findings(NO_PARALLELISM) == []


# --- X025: the shape against the declared parameter count (a warning on the built manifest) ---

# Llama 2 7B written in full (arXiv 2307.09288 Table 1 and the released config: 32 layers,
# hidden 4096, 32 heads, SwiGLU FFN 11008, vocab 32000, untied embeddings): the shape implies
# 6,738,411,520 parameters, the published 6.74B.
LLAMA2_7B = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata:
  name: llama-2-7b
cluster:
  gpus: 64
  accelerator: A100-80GB
  interconnect:
    inter_node_gbps_per_gpu: 200
model:
  architecture: dense
  total_params: 7B
  layers: 32
  hidden_size: 4096
  attention_heads: 32
  seq_len: 4096
  vocab_size: 32000
  ffn_hidden_size: 11008
  ffn_activation: swiglu
  untie_embeddings: true
training:
  tokens: 2T
  global_batch_size: 1024
"""
LLAMA2_7B_IMPLIED = 6_738_411_520
LLAMA2_7B_EMBEDDINGS = 2 * 32000 * 4096  # a count may leave them out: 6.48B non-embedding
# Llama 3 8B written in full (arXiv 2407.21783 Table 3: 32 layers, hidden 4096, 32 heads with 8
# key-value heads, SwiGLU FFN 14336, vocab 128256, untied): 8.03B implied, 8B declared.
LLAMA3_8B = apply(
    LLAMA2_7B,
    {
        "metadata.name": "llama-3-8b",
        "model.total_params": "8B",
        "model.seq_len": "8192",
        "model.vocab_size": "128256",
        "model.ffn_hidden_size": "14336\n  kv_heads: 8",
    },
)
SHAPE_MESSAGE = (
    "the shape ({shape}) implies about {implied} parameters, but {key} is {written}: check both "
    "(ffn_hidden_size, ffn_activation, kv_heads and untie_embeddings shape the count)"
)
MOE_MLA_SHAPE_MESSAGE = SHAPE_MESSAGE.replace(
    "kv_heads and", "the mla ranks, shared_experts, dense_layers and"
)
LLAMA2_SHAPE = "32 layers, hidden 4096, FFN 11008 swiglu, vocab 32000"
V3_SHAPE = "61 layers, hidden 7168, FFN 18432 swiglu, 256 experts of 2048, vocab 129280"
ShapeFound = tuple[str, int, int, Severity, str]

# (id, manifest text, expected findings of check_file); firing and quiet like CROSS.
SHAPE: list[tuple[str, str, list[ShapeFound]]] = [
    (
        "X025",
        edit(LLAMA2_7B, "model.total_params", "70B"),
        [
            (
                "X025",
                *locate(LLAMA2_7B, "model.total_params"),
                Severity.WARNING,
                SHAPE_MESSAGE.format(
                    shape=LLAMA2_SHAPE, implied="6.74B", key="total_params", written="70B"
                ),
            )
        ],
    ),
    (
        # one parameter above 1.25 x the implied count
        "X025-just-above",
        edit(LLAMA2_7B, "model.total_params", str(LLAMA2_7B_IMPLIED * 5 // 4 + 1)),
        [
            (
                "X025",
                *locate(LLAMA2_7B, "model.total_params"),
                Severity.WARNING,
                SHAPE_MESSAGE.format(
                    shape=LLAMA2_SHAPE, implied="6.74B", key="total_params", written="8.42B"
                ),
            )
        ],
    ),
    (
        # one parameter below the non-embedding count / 1.25
        "X025-just-below",
        edit(
            LLAMA2_7B,
            "model.total_params",
            str((LLAMA2_7B_IMPLIED - LLAMA2_7B_EMBEDDINGS) * 4 // 5 - 1),
        ),
        [
            (
                "X025",
                *locate(LLAMA2_7B, "model.total_params"),
                Severity.WARNING,
                SHAPE_MESSAGE.format(
                    shape=LLAMA2_SHAPE, implied="6.74B", key="total_params", written="5.18B"
                ),
            )
        ],
    ),
    (
        # an MoE model with the expert width: the active count is compared too (28B keeps the
        # parameter split of X018 consistent)
        "X025-active",
        edit(FULL, "model.active_params", "28B"),
        [
            (
                "X025",
                *at("model.active_params"),
                Severity.WARNING,
                MOE_MLA_SHAPE_MESSAGE.format(
                    shape=V3_SHAPE, implied="37.6B", key="active_params", written="28B"
                ),
            )
        ],
    ),
    # exactly 1.25 x and 1 / 1.25 x the implied count (both whole numbers): still quiet
    (
        "X025-ok-at-the-tolerance",
        edit(LLAMA2_7B, "model.total_params", str(LLAMA2_7B_IMPLIED * 5 // 4)),
        [],
    ),
    (
        "X025-ok-at-the-lower-tolerance",
        edit(
            LLAMA2_7B,
            "model.total_params",
            str((LLAMA2_7B_IMPLIED - LLAMA2_7B_EMBEDDINGS) * 4 // 5),
        ),
        [],
    ),
    # a count without the embedding matrices (Moonlight's 2.24B activated of 2.91B) is the
    # model's size too: 29B is within 1.25 of DeepSeek-V3's 35.7B non-embedding active count
    ("X025-ok-without-embeddings", edit(FULL, "model.active_params", "29B"), []),
    ("X025-ok-llama-2-7b", LLAMA2_7B, []),
    ("X025-ok-llama-3-8b", LLAMA3_8B, []),
    ("X025-ok-deepseek-v3-in-full", FULL, []),
    # Without moe_ffn_hidden_size the shape does not fix the experts' size: nothing to compare.
    (
        "X025-ok-moe-without-expert-width",
        apply(FULL, {"model.moe_ffn_hidden_size": None, "model.active_params": "28B"}),
        [],
    ),
]


@pytest.mark.parametrize(("case", "text", "expected"), SHAPE, ids=[c[0] for c in SHAPE])
def test_shape_against_the_declared_parameters(
    tmp_path: Path, case: str, text: str, expected: list[ShapeFound]
) -> None:
    path = tmp_path / f"{case}.yaml"
    path.write_text(text, encoding="utf-8")
    result = check_file(str(path))
    found = [(f.code, f.line, f.col, f.severity, f.message) for f in result.findings]
    assert found == expected
    # A warning: the manifest passes and is built.
    assert result.count(Severity.ERROR) == 0 and result.manifest is not None


def test_a_7b_shape_declared_as_70b_warns_at_total_params(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(edit(LLAMA2_7B, "model.total_params", "70B"), encoding="utf-8")
    result = check_file(str(path))
    assert result.manifest is not None and result.count(Severity.ERROR) == 0
    assert result.count(Severity.WARNING) == 1
    (finding,) = result.findings
    line, col = locate(LLAMA2_7B, "model.total_params")
    assert finding.format().startswith(f"{path}:{line}:{col}: warning X025 the shape ")
    assert "implies about 6.74B parameters, but total_params is 70B" in finding.message
    assert result.manifest.model.total_params == 70 * 10**9  # declared, not replaced


# X026-X028: global batches that cannot be meant (warnings on the built manifest), at seq 4,096.
# X026 above 1B tokens per step: 244,140 x 4,096 = 999,997,440 is under, 244,142 x 4,096 over.
BATCH: list[tuple[str, int, list[str]]] = [
    ("X026", 4_194_304, ["X026"]),
    ("X026-just-over", 244_142, ["X026"]),
    ("X026-ok-just-under", 244_140, []),
    ("X027", 2039, ["X027"]),
    ("X027-ok-composite", 2040, []),
    ("X027-ok-tiny", 3, ["X028"]),  # not prime-checked, but DP can only be 1 on 64 GPUs
    # X028 on 64 GPUs (8 nodes): 1,001 = 7 x 11 x 13 shares no factor with 64; 1,000 does.
    ("X028", 1001, ["X028"]),
    ("X028-ok-shared-factor", 1000, []),
]


def _batch_findings(tmp_path: Path, batch: int) -> list[tuple[str, str]]:
    text = edit(LLAMA2_7B, "training.global_batch_size", str(batch))
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    result = check_file(str(path))
    assert result.manifest is not None and result.count(Severity.ERROR) == 0  # warnings only
    line, col = locate(text, "training.global_batch_size")
    assert all((f.line, f.col) == (line, col) for f in result.findings)
    return [(f.code, f.message) for f in result.findings]


@pytest.mark.parametrize(("case", "batch", "codes_found"), BATCH, ids=[b[0] for b in BATCH])
def test_batch_sanity(tmp_path: Path, case: str, batch: int, codes_found: list[str]) -> None:
    assert [code for code, _ in _batch_findings(tmp_path, batch)] == codes_found


def test_batch_sanity_messages_say_what_was_probably_meant(tmp_path: Path) -> None:
    """4,194,304 'sequences' of 4,096 tokens were most likely 4,194,304 tokens = 1,024
    sequences (the largest published batch is Kimi K2's 67M tokens); a prime batch names a
    nearby batch that splits."""
    ((_, tokens),) = _batch_findings(tmp_path, 4_194_304)
    assert "4,194,304 x seq_len 4,096 = 17.2B tokens per step" in tokens
    assert "if 4,194,304 is tokens, that is 1,024 sequences" in tokens
    ((_, prime),) = _batch_findings(tmp_path, 2039)
    assert prime.startswith("global_batch_size 2,039 is prime: it divides over data")
    assert "a batch such as 2,040 splits" in prime
    ((_, coprime),) = _batch_findings(tmp_path, 1001)
    assert coprime == (
        "global_batch_size 1,001 shares no factor with the 64 GPUs: data parallelism can only "
        "be 1, so all 64 GPUs must form one tensor x pipeline group; a batch such as 1,000 or "
        "1,008 (a multiple of the 8 nodes) splits"
    )


def test_shape_warning_is_kept_among_the_policy_findings(tmp_path: Path) -> None:
    from dpguard.policy.load import load_policies

    path = tmp_path / "m.yaml"
    path.write_text(edit(LLAMA2_7B, "model.total_params", "70B"), encoding="utf-8")
    result = check_file(str(path), None, load_policies())
    assert result.outcome is not None
    shape = [f for f in result.findings if f.code == "X025"]
    line, _col = locate(LLAMA2_7B, "model.total_params")
    assert [(f.line, f.severity) for f in shape] == [(line, Severity.WARNING)]
    assert list(result.findings) == sorted(result.findings)


def test_every_cross_field_check_fires_and_has_a_boundary() -> None:
    # CROSS holds the checks on the raw document (validate), SHAPE the warning on the built
    # manifest (check_file).
    fired = {f[0] for _id, _base, _edits, expected in CROSS for f in expected}
    fired |= {f[0] for _id, _text, expected in SHAPE for f in expected}
    fired |= {code for _id, _batch, expected in BATCH for code in expected}
    fired.discard("S008")  # beside X033: the deprecated spelling it reports
    x_codes = {c for c in codes.CODES if c.startswith("X")}
    assert fired == x_codes
    quiet = {case.split("-")[0] for case, _b, _e, expected in CROSS if not expected}
    quiet |= {case.split("-")[0] for case, _text, expected in SHAPE if not expected}
    quiet |= {case.split("-")[0] for case, _batch, expected in BATCH if not expected}
    assert quiet == x_codes


@pytest.mark.parametrize(
    ("value", "code", "shown"),
    [('[1, "a"]', "S003", "must be an integer, not 'a'"), ("[[1], 2]", "S003", "not a list")],
)
def test_stage_layers_with_a_broken_element_is_that_finding_alone(
    value: str, code: str, shown: str
) -> None:
    """X030 adds no second finding (and no crash summing a string) for a schema-broken count."""
    base = insert(FULL, "parallelism", f"stage_layers: {value}")
    found = findings(base)
    assert [(f[0], shown in f[3]) for f in found] == [(code, True)]


def test_cross_field_checks_stay_silent_on_schema_broken_values() -> None:
    # tensor 0 breaks the schema: no divisibility check may divide by it or report it again.
    assert findings(edit(FULL, "parallelism.tensor", "0")) == [
        ("S004", *at("parallelism.tensor"), "parallelism.tensor is 0; it must be at least 1")
    ]
    assert findings(edit(FULL, "parallelism", "[]")) == [
        ("S003", *at("parallelism"), "parallelism must be a mapping, not a list")
    ]
    # kv_heads 0: no X021 (heads % 0), no X022; tensor 0 with GQA: no X022 (kv_heads % 0).
    assert findings(edit(GQA, "model.kv_heads", "0")) == [
        ("S004", *at("model.kv_heads"), "model.kv_heads is 0; it must be at least 1")
    ]
    assert findings(edit(GQA, "parallelism.tensor", "0")) == [
        (
            "S004",
            *locate(GQA, "parallelism.tensor"),
            "parallelism.tensor is 0; it must be at least 1",
        )
    ]
    # A broken rank, dense_layers or mla block: no X023, X024 or "needs the ranks" (X019).
    assert findings(edit(FULL, "model.mla.q_lora_rank", "'7168'")) == [
        (
            "S003",
            *at("model.mla.q_lora_rank"),
            "model.mla.q_lora_rank must be an integer, not '7168'",
        )
    ]
    assert findings(edit(FULL, "model.dense_layers", "'61'")) == [
        ("S003", *at("model.dense_layers"), "model.dense_layers must be an integer, not '61'")
    ]
    assert findings(edit(FULL, "model.mla", "")) == [
        ("S003", *at("model.mla"), "model.mla must be a mapping, not null")
    ]


# The cross-field checks that read attention or activation_recompute must not report a value the
# schema already refused. (The same product gap fails the model.attention and
# training.activation_recompute rows of ENUMS.)
BROKEN_READS = [
    ("X019", FULL, {"model.attention": "MLA"}, "model.attention"),
    ("X020", FULL, {"training.activation_recompute": "ful"}, "training.activation_recompute"),
    ("X031", BLOCK, {"training.activation_recompute": "ful"}, "training.activation_recompute"),
    (
        "X022",
        GQA,
        {
            "model.kv_heads": "4\n  attention: MHA",
            "parallelism.tensor": "8",
            "parallelism.microbatches": "960",
        },
        "model.attention",
    ),
]


@pytest.mark.parametrize(
    ("code", "base", "edits", "broken"), BROKEN_READS, ids=[b[0] for b in BROKEN_READS]
)
def test_new_checks_stay_silent_on_a_schema_broken_value(
    code: str, base: str, edits: dict[str, str | None], broken: str
) -> None:
    text = apply(base, edits)
    assert [(f[0], f[1], f[2]) for f in findings(text)] == [("S005", *locate(text, broken))]


# Nonsense in the new fields, end to end from a file: one positioned error, never a traceback.
NONSENSE = [
    (
        "optimizer-offload-1.5",
        FULL,
        {"training.optimizer_offload": "1.5"},
        "S004",
        "training.optimizer_offload",
    ),
    (
        "q-lora-rank-above-hidden",
        FULL,
        {"model.mla.q_lora_rank": "8192"},
        "X023",
        "model.mla.q_lora_rank",
    ),
    ("kv-heads-not-dividing-heads", GQA, {"model.kv_heads": "3"}, "X021", "model.kv_heads"),
    (
        "tensor-not-dividing-kv-heads",
        GQA,
        {"model.kv_heads": "2", "parallelism.tensor": "4", "parallelism.microbatches": "480"},
        "X022",
        "parallelism.tensor",
    ),
    (
        "recompute-modules-with-recompute-none",
        FULL,
        {"training.activation_recompute": "none"},
        "X020",
        "training.recompute_modules",
    ),
    ("mla-block-with-attention-mha", FULL, {"model.attention": "mha"}, "X019", "model.mla"),
    ("attention-mla-without-block", FULL, {"model.mla": None}, "X019", "model.attention"),
    (
        "dense-layers-beyond-layers",
        FULL,
        {"model.dense_layers": "100"},
        "X024",
        "model.dense_layers",
    ),
    (
        "moe-ffn-on-a-dense-model",
        DENSE,
        {"model.vocab_size": "129280\n  moe_ffn_hidden_size: 2048"},
        "X006",
        "model.moe_ffn_hidden_size",
    ),
]


@pytest.mark.parametrize(
    ("case", "base", "edits", "code", "where"), NONSENSE, ids=[n[0] for n in NONSENSE]
)
def test_nonsense_is_a_positioned_error(
    tmp_path: Path, case: str, base: str, edits: dict[str, str | None], code: str, where: str
) -> None:
    text = apply(base, edits)
    path = tmp_path / f"{case}.yaml"
    path.write_text(text, encoding="utf-8")
    result = check_file(str(path))
    line, col = locate(text, where)
    assert [(f.code, f.line, f.col, f.severity) for f in result.findings] == [
        (code, line, col, Severity.ERROR)
    ]
    assert result.manifest is None
    assert result.findings[0].format().startswith(f"{path}:{line}:{col}: error {code} ")


def test_recompute_modules_entries() -> None:
    line, col = at("training.recompute_modules")
    allowed = ", ".join(RECOMPUTE_MODULES)
    flow = "[mla_up_proj, attn]"
    assert findings(edit(FULL, "training.recompute_modules", flow)) == [
        (
            "S005",
            line,
            len("  recompute_modules: ") + flow.index("attn") + 1,
            f"training.recompute_modules[1] is 'attn'; allowed: {allowed} (did you mean "
            "'core_attn'?)",
        )
    ]
    block = "\n    - core_attn\n    - mpl"
    assert findings(edit(FULL, "training.recompute_modules", block)) == [
        (
            "S005",
            line + 2,
            7,
            f"training.recompute_modules[1] is 'mpl'; allowed: {allowed} (did you mean 'mlp'?)",
        )
    ]
    assert findings(edit(FULL, "training.recompute_modules", "[mlp, mlp]")) == [
        ("S007", line, col, "training.recompute_modules: ['mlp', 'mlp'] has non-unique elements")
    ]
    # Seven names exist, so an eighth entry is always a duplicate: one finding says so.
    eight = [*RECOMPUTE_MODULES, "mlp"]
    assert findings(edit(FULL, "training.recompute_modules", f"[{', '.join(eight)}]")) == [
        ("S007", line, col, f"training.recompute_modules: {eight} has non-unique elements"),
    ]


def test_every_problem_at_once_sorted_by_position() -> None:
    path = REPO / "examples" / "mistakes.yaml"
    doc = load_file(str(path))
    result = [f.format() for f in validate(doc, CATALOG)]
    p = str(path)
    assert result == [
        f"{p}:7:3: error X001 1000 GPUs is not divisible by tensor x pipeline x context "
        "= 3 x 8 x 1 = 24",
        f"{p}:9:3: error X012 unknown accelerator 'H900'; {KNOWN}",
        f"{p}:15:3: error X005 active_params (80,000,000,000) exceeds total_params "
        "(70,000,000,000)",
        f"{p}:21:3: error X006 model.experts is set on a dense model",
        f"{p}:25:3: error S004 training.micro_batch_size is 0; it must be at least 1",
        f"{p}:26:3: error S001 unknown key 'precison' in training (did you mean 'precision'?)",
        f"{p}:28:3: error X010 attention_heads (64) is not divisible by tensor parallel size 3",
    ]


@pytest.mark.parametrize("name", ["frontier-moe", "large-dense", "small-dense", "no-pipeline"])
def test_valid_examples(name: str) -> None:
    doc = load_file(str(REPO / "examples" / f"{name}.yaml"))
    assert validate(doc, CATALOG) == []


def test_examples_cover_the_issue() -> None:
    large = manifest((REPO / "examples" / "large-dense.yaml").read_text(encoding="utf-8"))
    assert large.model.architecture == "dense" and large.cluster.gpus >= 1024
    frontier = manifest((REPO / "examples" / "frontier-moe.yaml").read_text(encoding="utf-8"))
    assert frontier.model.is_moe and frontier.parallelism is not None
    assert frontier.parallelism.pipeline > 1
    no_pipeline = manifest((REPO / "examples" / "no-pipeline.yaml").read_text(encoding="utf-8"))
    assert no_pipeline.parallelism is None


# --- parse_quantity and derived sizes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("671B", 671_000_000_000),
        ("37B", 37_000_000_000),
        ("14.8T", 14_800_000_000_000),
        ("15.6T", 15_600_000_000_000),
        ("1.3B", 1_300_000_000),
        ("0.5K", 500),
        ("2M", 2_000_000),
        ("1K", 1000),
        ("1.5e12", 1_500_000_000_000),
        ("1e3B", 1_000_000_000_000),
        ("42", 42),
        (1.5e12, 1_500_000_000_000),
        (6.71e11, 671_000_000_000),
        (671000000000, 671_000_000_000),
        (7, 7),
        (1.9, 1),
    ],
)
def test_parse_quantity(value: int | float | str, expected: int) -> None:
    result = parse_quantity(value)
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("671X", "'671X' is not a count"),
        ("671b", "'671b' is not a count"),
        ("", "'' is not a count"),
        ("B", "'B' is not a count"),
        ("-5B", "'-5B' is not a count"),
        ("1.2.3B", "'1.2.3B' is not a count"),
        ("1,000", "'1,000' is not a count"),
        (True, "True is not a count"),
        ("1e999999T", "'1e999999T' is too large to be a count"),
        ("1e30", "'1e30' is too large to be a count"),
        ("1000000000000000000T", "'1000000000000000000T' is too large to be a count"),
    ],
)
def test_parse_quantity_refuses(value: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_quantity(value)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_parse_quantity_largest_count() -> None:
    assert parse_quantity("999999999999999999T") == 999_999_999_999_999_999_000_000_000_000


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((2048, 1, 16, 1, 15360, 1), (128, 120)),
        ((16384, 8, 16, 1, 2048, 1), (128, 16)),
        ((64, 1, 1, 1, 1024, 2), (64, 8)),
        ((2048, 1, 16, 1, 15361, 1), (128, None)),
        ((2040, 1, 16, 1, 15360, 1), (None, None)),
    ],
)
def test_derived_sizes(args: tuple[int, ...], expected: tuple[int | None, int | None]) -> None:
    assert derived_sizes(*args) == expected


# --- the normalised Manifest ------------------------------------------------------------------

MINIMAL = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: minimal}
cluster:
  gpus: 64
  accelerator: a100_sxm4_80gb
  interconnect: {inter_node_gbps_per_gpu: 200}
model:
  architecture: dense
  total_params: 13B
  layers: 40
  hidden_size: 5120
  attention_heads: 40
  seq_len: 4096
  vocab_size: 32000
training:
  tokens: 1T
  global_batch_size: 1024
"""


def test_defaults_applied() -> None:
    m = manifest(MINIMAL)
    assert m.name == "minimal" and m.owner is None and m.description is None
    assert m.cluster == dataclasses.replace(
        m.cluster,
        gpus=64,
        gpus_per_node=8,
        accelerator="A100-80GB",
        vendor="nvidia",
        family="ampere",
        memory_gb=80.0,
        peak_tflops_bf16=312.0,
    )
    assert m.cluster.interconnect.intra_node == "nvlink"
    assert m.cluster.interconnect.inter_node_gbps_per_gpu == 200.0
    assert m.model.total_params == m.model.active_params == 13_000_000_000
    assert m.model.experts is None and m.model.experts_per_token is None
    assert not m.model.is_moe
    assert (m.training.tokens, m.training.micro_batch_size) == (10**12, 1)
    assert m.training.precision == "bf16"
    assert m.training.zero_stage == 1
    assert m.training.activation_recompute == "none"
    # the new model fields: a GPT-style block (4h GeLU MLP, multi-head attention), no MoE extras
    assert (m.model.ffn_hidden_size, m.model.ffn_activation) == (4 * 5120, "gelu")
    assert (m.model.kv_heads, m.model.attention, m.model.mla) == (40, "mha", None)
    assert m.model.moe_ffn_hidden_size is None
    assert (m.model.shared_experts, m.model.dense_layers, m.model.mtp_layers) == (0, 0, 0)
    # the new training fields: sequence parallelism unset (on when tensor > 1), Megatron-core's
    # default recompute module, BF16 activations and FP32 moments on the GPU
    assert m.training.sequence_parallel is None
    assert m.training.recompute_modules == ("core_attn",)
    assert (m.training.activation_storage, m.training.activation_offload) == ("bf16", False)
    assert m.training.optimizer_offload == 0.0 and type(m.training.optimizer_offload) is float
    assert (m.training.optimizer_moment_dtype, m.runtime.main_grad_dtype) == ("fp32", "fp32")
    assert m.runtime.flash_attention is True
    assert m.parallelism is None
    assert m.data_parallel is None and m.microbatches is None
    assert m.communication.all_to_all_kernel == "none"


@pytest.mark.parametrize(
    ("written", "canonical", "vendor", "link", "memory"),
    [
        ("H800", "H800", "nvidia", "nvlink", 80.0),
        ("h800", "H800", "nvidia", "nvlink", 80.0),
        ("H100", "H100-SXM", "nvidia", "nvlink", 80.0),
        ("h100 sxm", "H100-SXM", "nvidia", "nvlink", 80.0),
        ("mi300x", "MI300X", "amd", "xgmi", 192.0),
        ("Instinct-MI325X", "MI325X", "amd", "xgmi", 256.0),
        ("gaudi3", "Gaudi3", "intel", "other", 128.0),
    ],
)
def test_accelerator_canonical_id_and_vendor_link(
    written: str, canonical: str, vendor: str, link: str, memory: float
) -> None:
    m = manifest(edit(MINIMAL, "cluster.accelerator", written))
    assert (m.cluster.accelerator, m.cluster.vendor, m.cluster.interconnect.intra_node) == (
        canonical,
        vendor,
        link,
    )
    assert m.cluster.memory_gb == memory
    assert m.cluster.peak_tflops_bf16 == CATALOG.lookup(canonical).peak_tflops_bf16  # type: ignore[union-attr]


def test_explicit_values_override_the_catalog() -> None:
    text = apply(
        MINIMAL,
        {"cluster.accelerator": "H100\n  memory_gb: 94\n  peak_tflops_bf16: 900.5"},
    )
    text = text.replace(
        "{inter_node_gbps_per_gpu: 200}", "{inter_node_gbps_per_gpu: 200, intra_node: pcie}"
    )
    m = manifest(text)
    assert (m.cluster.memory_gb, m.cluster.peak_tflops_bf16) == (94.0, 900.5)
    assert m.cluster.interconnect.intra_node == "pcie"


def test_custom_accelerator() -> None:
    m = manifest(
        edit(MINIMAL, "cluster.accelerator", "CUSTOM\n  memory_gb: 64\n  peak_tflops_bf16: 500")
    )
    c = m.cluster
    assert (c.accelerator, c.vendor, c.family) == ("custom", "custom", "custom")
    assert (c.memory_gb, c.peak_tflops_bf16, c.interconnect.intra_node) == (64.0, 500.0, "other")


def test_derived_data_parallel_and_microbatches() -> None:
    m = manifest(edit(FULL, "parallelism.microbatches", None))
    assert (m.data_parallel, m.microbatches) == (128, 120)
    assert m.parallelism is not None and m.parallelism.microbatches is None
    explicit = manifest(FULL)
    assert (explicit.data_parallel, explicit.microbatches) == (128, 120)
    assert explicit.parallelism is not None and explicit.parallelism.microbatches == 120
    empty = manifest(MINIMAL + "parallelism: {}\n")
    assert (empty.data_parallel, empty.microbatches) == (64, 16)
    assert empty.parallelism is not None
    assert (empty.parallelism.tensor, empty.parallelism.pipeline) == (1, 1)
    assert empty.parallelism.schedule is None and empty.model.untie_embeddings is False


def test_full_manifest_values() -> None:
    m = manifest(FULL)
    assert m.model.is_moe
    assert (m.model.total_params, m.model.active_params) == (671 * 10**9, 37 * 10**9)
    assert m.training.tokens == 14_800_000_000_000
    assert (m.model.experts, m.model.experts_per_token) == (256, 8)
    assert m.parallelism is not None
    assert (m.parallelism.expert, m.parallelism.schedule) == (64, "dualpipe")
    assert m.model.untie_embeddings is True
    assert m.communication.all_to_all_kernel == "deepep"
    assert (m.model.ffn_hidden_size, m.model.ffn_activation, m.model.kv_heads) == (
        18432,
        "swiglu",
        128,
    )
    assert m.model.attention == "mla"
    assert m.model.mla == MLA(
        q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128, qk_rope_head_dim=64, v_head_dim=128
    )
    assert (m.model.moe_ffn_hidden_size, m.model.shared_experts) == (2048, 1)
    assert (m.model.dense_layers, m.model.mtp_layers) == (3, 1)
    t = m.training
    assert (t.activation_recompute, t.recompute_modules) == (
        "selective",
        ("mla_up_proj", "layernorm"),
    )
    assert t.sequence_parallel is False
    r = m.runtime
    assert (t.activation_storage, t.activation_offload, r.flash_attention) == ("fp8", True, False)
    assert (r.cross_entropy, r.tensor_parallel_impl) == ("unfused", "dtensor")
    assert (t.optimizer_offload, t.optimizer_moment_dtype, r.main_grad_dtype) == (
        0.5,
        "bf16",
        "bf16",
    )
    assert m.position("model.mla.v_head_dim") == (at("model.mla.v_head_dim"))
    assert m.position("parallelism.schedule") == (72, 3)
    assert m.position("parallelism.nothing") == (64, 1)


def test_manifest_is_immutable_and_plain_data() -> None:
    m = manifest(FULL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.cluster.gpus = 1  # type: ignore[misc]
    data = m.to_dict()
    assert "source" not in data and "path" not in data
    assert json.loads(json.dumps(data)) == data
    assert data["data_parallel"] == 128 and data["cluster"]["accelerator"] == "H800"


def test_counts_are_ints_in_the_manifest() -> None:
    m = manifest(FULL)
    for record in (m.cluster, m.model, m.training, m.parallelism):
        for f in dataclasses.fields(record):  # type: ignore[arg-type]
            value = getattr(record, f.name)
            if f.type in ("int", "int | None"):
                assert value is None or type(value) is int, f.name
    assert m.model.mla is not None
    assert all(type(rank) is int for rank in m.model.mla), m.model.mla


# --- every code is exercised ------------------------------------------------------------------


def test_every_code_is_asserted_by_a_test() -> None:
    here = Path(__file__).read_text(encoding="utf-8")
    loader = (Path(__file__).parent / "test_yamlsource.py").read_text(encoding="utf-8")
    loader += (Path(__file__).parent / "test_frameworks.py").read_text(encoding="utf-8")
    unasserted = [c for c in codes.CODES if f'"{c}"' not in here + loader]
    assert unasserted == []


def test_every_code_is_documented() -> None:
    docs = (REPO / "docs" / "manifest.md").read_text(encoding="utf-8")
    assert [c for c in codes.CODES if f"`{c}`" not in docs] == []
    assert [d for d, _sub in properties(SCHEMA) if f"`{d}`" not in docs] == []


def test_the_experts_tensor_size_a_manifest_writes_beside_a_config_is_judged(
    tmp_path: Path,
) -> None:
    """X035 leaves the size a framework config sets to the framework's own rule (FW014), but
    the size the manifest pointing at that config writes is the person's: judged at its line."""
    config = Path(__file__).parent / "data" / "frameworks" / "torchtitan_llama3_70b.toml"
    (tmp_path / "cfg.toml").write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "apiVersion: dpguard/v1\n"
        "kind: TrainingManifest\n"
        "metadata: {name: beside}\n"
        "source: {path: cfg.toml}\n"
        "cluster: {gpus: 64, gpus_per_node: 8, accelerator: H100-SXM,\n"
        "  interconnect: {inter_node_gbps_per_gpu: 400}}\n"
        "parallelism:\n"
        "  expert_tensor: 2\n",
        encoding="utf-8",
    )
    found = [f.format() for f in check_file(str(manifest)).findings if f.code == "X035"]
    assert len(found) == 1 and found[0].startswith(f"{manifest}:8:3: error X035 ")
    assert "the tensor size (8)" in found[0]
    # the config alone: its tensor size is its own, and nothing writes the experts' size
    alone = check_file(str(tmp_path / "cfg.toml")).findings
    assert not [f for f in alone if f.code == "X035"]
