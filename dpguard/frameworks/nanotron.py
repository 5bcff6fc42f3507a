"""nanotron YAML (`nanotron`): `parallelism:`, `model.model_config`, `tokens:` and
`optimizer:` (docs/frameworks.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpguard.frameworks.model import Extract, Origin, Values, section
from dpguard.yamlevents import SourceDoc


def read(doc: SourceDoc) -> Extract:
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
    dp = ints(section(doc.data, "parallelism").get("dp"))
    take("parallelism.expert", ("parallelism", "expert_parallel_size"), ints)
    take("parallelism.context", ("parallelism", "context_parallel_size"), ints)
    if (pp or 1) > 1:
        engine = (section(doc.data, "parallelism").get("pp_engine")) or "afab"
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
    model_config = section(section(doc.data, "model"), "model_config")
    moe_config = model_config.get("moe_config")
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
    acc = ints(section(doc.data, "tokens").get("batch_accumulation_per_replica"))
    if mbs and acc and dp:
        put(
            "training.global_batch_size",
            mbs * acc * dp,
            ("tokens", "batch_accumulation_per_replica"),
        )
        steps = ints(section(doc.data, "tokens").get("train_steps"))
        if steps and seq:
            put("training.tokens", steps * mbs * acc * dp * seq, ("tokens", "train_steps"))

    if section(doc.data, "parallelism").get("recompute_layer") is True:
        put("training.activation_recompute", "full", ("parallelism", "recompute_layer"))
    par = section(doc.data, "parallelism")
    mode = str(par.get("tp_mode") or "ALL_REDUCE").upper()
    if mode in ("ALL_REDUCE", "REDUCE_SCATTER") and (values.get("parallelism.tensor") or 1) > 1:
        # nanotron's ParallelismArgs: tp_mode defaults to ALL_REDUCE (no sequence parallelism)
        at = ("parallelism", "tp_mode" if "tp_mode" in par else "tp")
        put("training.sequence_parallel", mode == "REDUCE_SCATTER", at)
    zero = section(doc.data, "optimizer").get("zero_stage")
    if isinstance(zero, int) and not isinstance(zero, bool):
        put("training.zero_stage", zero, ("optimizer", "zero_stage"))
    return Extract("nanotron", doc.name, found.values, found.origins)
