"""Cross-field checks a JSON Schema cannot express (codes X001-X031, docs/manifest.md).

Each check reads only values that are present and passed the schema, and stays silent
otherwise: the schema finding already covers a broken value, and every problem is still
reported at once. Sources of the framework rules are cited at each check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dpguard.catalog import Catalog
from dpguard.frameworks import profiles
from dpguard.hints import hint
from dpguard.manifest import DEPRECATED, derived_sizes, parse_quantity
from dpguard.yamlsource import Path, SourceDoc


class Raw:
    """Typed, forgiving reads of raw manifest data for the cross-field checks."""

    def __init__(self, doc: SourceDoc, broken: set[Path]) -> None:
        self.doc = doc
        self.broken = broken

    def get(self, dotted_path: str, default: Any = None) -> Any:
        node: Any = self.doc.data
        path = tuple(dotted_path.split("."))
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return None if path in self.broken else node

    def integer(self, dotted_path: str, default: int | None = None) -> int | None:
        value = self.get(dotted_path, default)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def quantity(self, dotted_path: str) -> int | None:
        value = self.get(dotted_path)
        if value is None or isinstance(value, bool):
            return None
        try:
            return parse_quantity(value)
        except ValueError:
            return None

    def has(self, dotted_path: str) -> bool:
        return self.get(dotted_path) is not None

    def broken_value(self, dotted_path: str) -> bool:
        """Written, but the schema rejected it: checks that read it must stay silent."""
        return self.written(dotted_path) and not self.has(dotted_path)

    def written(self, dotted_path: str) -> bool:
        """Whether the key is present at all, broken or not."""
        node: Any = self.doc.data
        for part in dotted_path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True


_MOE_ONLY = ("moe_ffn_hidden_size", "shared_experts", "dense_layers")
# Upper bounds for suffixed quantities; numbers are bounded by the schema itself.
_QUANTITY_MAX = {"model.total_params": 10**15, "model.active_params": 10**15}
_QUANTITY_MAX["training.tokens"] = 10**17
# Below these a bare number is a missing suffix, not a model or a budget ("70" meant 70B): the
# smallest published language models have millions of parameters and train on millions of
# tokens at the very least.
_PLAUSIBLE_MIN = {"model.total_params": 10**6, "model.active_params": 10**6}
_PLAUSIBLE_MIN["training.tokens"] = 10**6


def cross_field_problems(raw: Raw, catalog: Catalog) -> Iterator[tuple[str, str, str]]:
    """(dotted path, code, message) for each cross-field problem. Sources in docs/manifest.md."""
    yield from _quantities(raw)
    yield from _cluster(raw, catalog)
    experts, top_k = raw.integer("model.experts"), raw.integer("model.experts_per_token")
    yield from _model_counts(raw, experts, top_k)
    arch = raw.get("model.architecture")
    total, active = raw.quantity("model.total_params"), raw.quantity("model.active_params")
    yield from _parameter_split(raw, arch, total, active, experts, top_k)
    yield from _architecture(raw, arch)
    yield from _runtime(raw)
    if raw.get("parallelism") is not None:
        yield from _parallelism(raw, experts)
        yield from _batch(raw)


def _quantities(raw: Raw) -> Iterator[tuple[str, str, str]]:
    """Suffixed quantities within range (X016) and bare numbers too small to be meant (X029)."""
    for path, limit in _QUANTITY_MAX.items():
        written = raw.get(path)
        if isinstance(written, str) and not 1 <= (raw.quantity(path) or 0) <= limit:
            # None from raw.quantity: too large to compute, so out of range all the same
            yield path, "X016", f"{path} is {written!r}; it must be between 1 and {limit:.0e}"

    for path, least in _PLAUSIBLE_MIN.items():
        written = raw.get(path)
        if isinstance(written, int) and not isinstance(written, bool) and 0 < written < least:
            unit = "tokens" if path == "training.tokens" else "parameters"
            suffix = "T" if unit == "tokens" and written < 100 else "B"
            yield (
                path,
                "X029",
                f"{path} is {written:,} {unit}: a bare number counts single {unit}; did you mean "
                f"{written}{suffix}? (write the suffix: K, M, B or T)",
            )


def _cluster(raw: Raw, catalog: Catalog) -> Iterator[tuple[str, str, str]]:
    """A known or a fully described accelerator (X012, X013), whole nodes (X002)."""
    name = raw.get("cluster.accelerator")
    if isinstance(name, str) and name.lower() != "custom" and catalog.lookup(name) is None:
        yield (
            "cluster.accelerator",
            "X012",
            f"unknown accelerator {name!r}{catalog.hint(name)}; known: "
            f"{', '.join(catalog.ids())}, or custom",
        )
    if isinstance(name, str) and name.lower() == "custom":
        for key in ("memory_gb", "peak_tflops_bf16"):
            if not raw.has(f"cluster.{key}"):
                yield (
                    "cluster.accelerator",
                    "X013",
                    f"a custom accelerator needs cluster.{key}",
                )
    gpus, per_node = raw.integer("cluster.gpus"), raw.integer("cluster.gpus_per_node", 8)
    if gpus and per_node and gpus > per_node and gpus % per_node:
        yield (
            "cluster.gpus",
            "X002",
            f"{gpus} GPUs is not a whole number of {per_node}-GPU nodes",
        )


def _model_counts(
    raw: Raw, experts: int | None, top_k: int | None
) -> Iterator[tuple[str, str, str]]:
    """Active against total parameters (X005, X017), MoE fields on a dense model (X006), the
    experts a token routes to (X007)."""
    arch = raw.get("model.architecture")
    total, active = raw.quantity("model.total_params"), raw.quantity("model.active_params")
    if total and active and active > total:
        yield (
            "model.active_params",
            "X005",
            f"active_params ({active:,}) exceeds total_params ({total:,})",
        )
    if arch == "dense":
        for key in ("experts", "experts_per_token", *_MOE_ONLY):
            if raw.get(f"model.{key}") is not None:
                yield f"model.{key}", "X006", f"model.{key} is set on a dense model"
        if total and active and active < total:
            yield (
                "model.active_params",
                "X017",
                f"a dense model activates all its parameters: active_params ({active:,}) "
                f"must equal total_params ({total:,}) or be left out",
            )
        if (raw.integer("parallelism.expert") or 1) > 1:
            yield "parallelism.expert", "X006", "expert parallelism is set on a dense model"
    if experts and top_k and top_k >= experts:
        yield (
            "model.experts_per_token",
            "X007",
            f"experts_per_token ({top_k}) must be smaller than experts ({experts}): a model "
            "that routes every token to every expert is dense",
        )


def _parallelism(raw: Raw, experts: int | None) -> Iterator[tuple[str, str, str]]:
    """The proposal's degrees against the model (X008, X010, X011, X022) and its stages
    against the layers (X014, X015, X030)."""
    tp, pp = raw.integer("parallelism.tensor", 1), raw.integer("parallelism.pipeline", 1)
    cp, ep = raw.integer("parallelism.context", 1), raw.integer("parallelism.expert", 1)
    vs = raw.integer("parallelism.virtual_stages", 1)
    heads, seq = raw.integer("model.attention_heads"), raw.integer("model.seq_len")
    layers = raw.integer("model.layers")
    kv = raw.integer("model.kv_heads")
    mla_attention = raw.get("model.attention") == "mla" or raw.broken_value("model.attention")
    if kv and tp and kv % tp and not mla_attention:
        # Megatron-LM arguments.py: num_query_groups % tensor_model_parallel_size == 0
        yield (
            "parallelism.tensor",
            "X022",
            f"tensor parallel size {tp} does not divide kv_heads ({kv}): each tensor-parallel "
            "rank needs whole key-value heads",
        )
    if heads and tp and heads % tp:
        # Megatron-LM arguments.py: num_attention_heads % tensor_model_parallel_size == 0
        yield (
            "parallelism.tensor",
            "X010",
            f"attention_heads ({heads}) is not divisible by tensor parallel size {tp}",
        )
    if seq and cp and cp > 1 and seq % (2 * cp):
        # Megatron-LM arguments.py: seq_length % (2 * context_parallel_size) == 0
        yield (
            "parallelism.context",
            "X011",
            f"seq_len ({seq}) is not divisible by 2 x context parallel size ({2 * cp})",
        )
    if experts and ep and ep > 1 and experts % ep:
        # Megatron-LM arguments.py: num_experts % expert_model_parallel_size == 0
        yield (
            "parallelism.expert",
            "X008",
            f"experts ({experts}) is not divisible by expert parallel size {ep}",
        )
    # Megatron's account-for-embedding/loss count the embedding and the loss as layers of the
    # split: with both, 6 layers fill 8 stages (arguments.py: (layers + 2) % PP == 0)
    accounted = sum(
        raw.get(f"parallelism.account_for_{part}") is True for part in ("embedding", "loss")
    )
    counts = raw.get("parallelism.stage_layers")
    # an element the schema rejects is its finding alone
    whole = isinstance(counts, list) and not any(
        path[:2] == ("parallelism", "stage_layers") for path in raw.broken
    )
    if whole and layers and pp:
        # a split set by hand (Megatron's pipeline layout): one count per stage, all layers
        stages = pp * (2 if raw.get("parallelism.schedule") == "dualpipev" else (vs or 1))
        if len(counts) != stages or sum(counts) != layers:
            yield (
                "parallelism.stage_layers",
                "X030",
                f"stage_layers gives {len(counts)} stages holding {sum(counts)} layers, but the "
                f"pipeline has {stages} stages and the model {layers} layers",
            )
    elif layers and pp and pp * (vs or 1) > layers + accounted:
        yield (
            "parallelism.pipeline",
            "X014",
            f"pipeline x virtual_stages = {pp * (vs or 1)} stages for {layers} layers"
            + (f" and {accounted} accounted" if accounted else "")
            + ": some stages would hold no layer",
        )
    if vs and pp and vs > 1 and pp == 1:
        yield "parallelism.virtual_stages", "X015", "virtual_stages > 1 needs pipeline > 1"


def _batch(raw: Raw) -> Iterator[tuple[str, str, str]]:
    """The GPUs, the degrees and the batch divide (X001, X003, X004, X009)."""
    gpus = raw.integer("cluster.gpus")
    tp, pp = raw.integer("parallelism.tensor", 1), raw.integer("parallelism.pipeline", 1)
    cp, ep = raw.integer("parallelism.context", 1), raw.integer("parallelism.expert", 1)
    if not (gpus and tp and pp and cp):
        return
    if gpus % (tp * pp * cp):
        yield (
            "cluster.gpus",
            "X001",
            f"{gpus} GPUs is not divisible by tensor x pipeline x context = "
            f"{tp} x {pp} x {cp} = {tp * pp * cp}",
        )
        return
    gbs, mbs = (
        raw.integer("training.global_batch_size"),
        raw.integer("training.micro_batch_size", 1),
    )
    if not (gbs and mbs):
        return
    gas = raw.integer("parallelism.accumulation_steps", 1) or 1
    dp, micro = derived_sizes(gpus, tp, pp, cp, gbs, mbs, gas)
    assert dp is not None
    etp = raw.integer("parallelism.expert_tensor")
    if ep and ep > 1 and (tp * cp * dp) % ep:
        # Expert parallelism borrows ranks from data x context x tensor parallelism:
        # torchtitan's dp_shard*cp*tp == efsdp*ep; Megatron's EP x ETP x EDP == TP x CP x DP.
        yield (
            "parallelism.expert",
            "X009",
            f"expert parallel size {ep} does not divide tensor x context x data parallel = "
            f"{tp} x {cp} x {dp} = {tp * cp * dp}",
        )
    elif ep and etp and (tp * cp * dp) % (ep * etp):
        # ... and a written expert tensor-parallel size splits each expert over ETP of them
        yield (
            "parallelism.expert_tensor",
            "X009",
            f"expert x expert_tensor = {ep} x {etp} = {ep * etp} does not divide tensor x "
            f"context x data parallel = {tp} x {cp} x {dp} = {tp * cp * dp}",
        )
    if micro is None:
        yield (
            "training.global_batch_size",
            "X003",
            f"global_batch_size ({gbs}) is not divisible by micro_batch_size x data parallel "
            + (
                f"= {mbs} x {dp} = {mbs * dp}"
                if gas == 1
                else f"x accumulation_steps = {mbs} x {dp} x {gas} = {mbs * dp * gas}"
            ),
        )
        return
    explicit = raw.integer("parallelism.microbatches")
    if explicit is not None and explicit != micro:
        yield (
            "parallelism.microbatches",
            "X004",
            f"microbatches is {explicit} but global_batch_size / (micro_batch_size x data "
            + (
                f"parallel) = {gbs} / ({mbs} x {dp}) = {micro}"
                if gas == 1
                else f"parallel x accumulation_steps) = {gbs} / ({mbs} x {dp} x {gas}) = {micro}"
            ),
        )


def _parameter_split(
    raw: Raw,
    arch: Any,
    total: int | None,
    active: int | None,
    experts: int | None,
    top_k: int | None,
) -> Iterator[tuple[str, str, str]]:
    """The parameters must leave something for the transformer layers once the embeddings
    (vocab x hidden, twice unless tied) and, for MoE, the routed experts are taken out: the
    memory model splits them the same way (dpguard/memory/shape.py: layer_params,
    embedding_matrices)."""
    vocab, hidden = raw.integer("model.vocab_size"), raw.integer("model.hidden_size")
    limit = _QUANTITY_MAX["model.total_params"]
    if not (total and vocab and hidden) or arch not in ("moe", "dense") or total > limit:
        return  # out-of-range totals are X016's to report
    if total < _PLAUSIBLE_MIN["model.total_params"]:
        return  # a missing suffix: X029 says so, a negative layer budget would only confuse
    untied = raw.get("model.untie_embeddings", raw.get("parallelism.untie_embeddings")) is True
    embeddings = vocab * hidden * (2 if untied else 1)
    routed = 0.0
    if arch == "moe":
        if not (active and experts and top_k) or top_k >= experts or active > total:
            return
        routed = experts * (total - active) / (experts - top_k)
    rest = total - routed - embeddings
    if rest <= 0:
        what = f" - routed experts {routed:,.0f}" if arch == "moe" else ""
        yield (
            "model.total_params",
            "X018",
            f"total_params ({total:,}){what} - embeddings {embeddings:,} leaves {rest:,.0f} "
            "parameters for the transformer layers; check total_params, active_params, "
            "experts, vocab_size and hidden_size",
        )


def _architecture(raw: Raw, arch: Any) -> Iterator[tuple[str, str, str]]:
    """Attention kind, recompute modules, GQA, MLA ranks and MoE-only fields. (The parameter
    count the shape implies is a warning on the built manifest: sizing.shape_warnings.)"""
    attention, mla = raw.get("model.attention"), raw.get("model.mla")
    if mla is not None and attention != "mla" and not raw.broken_value("model.attention"):
        yield "model.mla", "X019", "model.mla is set but model.attention is not mla"
    if attention == "mla" and not raw.written("model.mla"):
        yield "model.attention", "X019", "attention: mla needs the model.mla ranks"
    recompute = "training.activation_recompute"
    if raw.get("training.recompute_modules") is not None and (
        raw.get(recompute) != "selective" and not raw.broken_value(recompute)
    ):
        yield (
            "training.recompute_modules",
            "X020",
            "recompute_modules applies only with activation_recompute: selective",
        )
    full = raw.get(recompute) == "full" or raw.broken_value(recompute)
    for key in ("training.recompute_method", "training.recompute_num_layers"):
        if raw.get(key) is not None and not full:
            yield key, "X031", f"{key[9:]} applies only with activation_recompute: full"
    heads, kv = raw.integer("model.attention_heads"), raw.integer("model.kv_heads")
    if heads and kv and heads % kv:
        yield (
            "model.kv_heads",
            "X021",
            f"kv_heads ({kv}) does not divide attention_heads ({heads}): every key-value head "
            "serves a whole group of query heads",
        )
    hidden = raw.integer("model.hidden_size")
    for rank in ("q_lora_rank", "kv_lora_rank"):
        value = raw.integer(f"model.mla.{rank}")
        if hidden and value and value >= hidden:
            yield (
                f"model.mla.{rank}",
                "X023",
                f"mla.{rank} ({value}) must be smaller than hidden_size ({hidden}): it is a "
                "compression rank",
            )
    layers, dense_layers = raw.integer("model.layers"), raw.integer("model.dense_layers")
    if arch == "moe" and layers and dense_layers is not None and dense_layers >= layers:
        yield (
            "model.dense_layers",
            "X024",
            f"dense_layers ({dense_layers}) must be smaller than layers ({layers}) on an MoE model",
        )


def _runtime(raw: Raw) -> Iterator[tuple[str, str, str]]:
    """The framework names a profile (X032); a key is not written at its deprecated and its
    new place with different values (X033); `runtime:` overrides only traits the framework's
    profile has (X034: torchtitan has no Transformer Engine weight cache to turn off); the
    experts' tensor size is one the framework accepts (X035: torchtitan's ParallelDims takes 1
    or TP)."""
    framework = raw.get("training.framework")
    known = profiles.load_profiles()
    if isinstance(framework, str) and framework not in known:
        yield (
            "training.framework",
            "X032",
            f"training.framework is {framework!r}, which names no framework profile; known: "
            f"{', '.join(sorted(known))}{hint(framework, list(known))}",
        )
        framework = None
    for old, new in DEPRECATED.items():
        if raw.has(old) and raw.has(new) and raw.get(old) != raw.get(new):
            yield (
                old,
                "X033",
                f"{old} is {raw.get(old)!r} but {new} is {raw.get(new)!r}: {old} is the "
                f"deprecated spelling of {new}; keep {new} only",
            )
    if not isinstance(framework, str):
        return  # the default profile has every trait; an unknown one is reported above
    chosen = known[framework]
    etp = raw.integer("parallelism.expert_tensor")
    if etp is not None and chosen.expert_tensor_choices:
        tensor = raw.integer("parallelism.tensor") or 1
        choices = chosen.expert_tensor_choices
        if etp not in {tensor if c == "tensor" else c for c in choices}:
            named = (f"the tensor size ({tensor})" if c == "tensor" else str(c) for c in choices)
            yield (
                "parallelism.expert_tensor",
                "X035",
                f"parallelism.expert_tensor is {etp}: {chosen.title} accepts only "
                f"{' or '.join(named)} ({chosen.path} expert_tensor.choices) and refuses "
                "others at launch",
            )
    for trait in profiles.TRAITS:
        for where in (f"runtime.{trait}", f"training.{trait}"):
            if raw.has(where) and trait not in chosen.traits:
                yield (
                    where,
                    "X034",
                    f"{where}: {chosen.title} has no {trait} trait to override "
                    f"({chosen.path}; its traits: "
                    f"{', '.join(sorted(chosen.traits))})",
                )
