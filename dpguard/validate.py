"""Validate a loaded manifest: JSON Schema, then the cross-field checks a schema cannot express.

Every problem is reported at once, each at the line and column of the offending key. Cross-field
checks run even when other parts of the manifest broke the schema: each check reads only values
that are present and valid, and stays silent otherwise (the schema finding already covers them).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from functools import cache
from typing import Any

from dpguard import resources
from dpguard.catalog import Catalog
from dpguard.errors import ConfigError
from dpguard.findings import Finding, Severity
from dpguard.manifest import derived_sizes, parse_quantity
from dpguard.yamlsource import Path, SourceDoc

SCHEMA_FILE = "manifest.schema.json"
SCHEMA_PATH = f"schemas/{SCHEMA_FILE}"

_KEYWORD_CODES = {
    "additionalProperties": "S001",
    "required": "S002",
    "type": "S003",
    "minimum": "S004",
    "maximum": "S004",
    "exclusiveMinimum": "S004",
    "exclusiveMaximum": "S004",
    "minLength": "S004",
    "maxLength": "S004",
    "maxProperties": "S004",
    "enum": "S005",
    "const": "S005",
    "pattern": "S006",
}


def _is_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _validator() -> Any:
    """The compiled manifest schema validator, built once per process.

    JSON Schema counts 2048.0 as an integer. Here a count must be written as one: a float would
    slip past the cross-field checks (which read ints) into the typed Manifest.
    """
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import SchemaError

    schema = resources.schema(SCHEMA_FILE)
    try:  # a broken schema is dpguard's own file: exit 2, not an internal error mid-review
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = dotted(tuple(exc.absolute_path))
        raise ConfigError(
            f"not a valid JSON Schema at {where}: {exc.message}", SCHEMA_PATH
        ) from None
    strict = Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer)
    validator = validators.extend(Draft202012Validator, type_checker=strict)
    return validator(schema)


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _hint(word: str, choices: Any) -> str:
    """ " (did you mean 'x'?)" for the closest choice, ignoring case ("BF16" -> 'bf16')."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    if isinstance(value, str) and len(value) > 40:  # never echo a whole paragraph
        return repr(value[:37] + "...")
    return repr(value)


def _bound(keyword: str, where: str, value: Any, limit: Any) -> str:
    """The message for a violated minimum/maximum/length/size keyword."""
    if keyword == "minimum":
        return f"{where} is {_describe(value)}; it must be at least {limit}"
    if keyword == "maximum":
        return f"{where} is {_describe(value)}; it must be at most {limit}"
    if keyword == "exclusiveMinimum":
        return f"{where} is {_describe(value)}; it must be more than {limit}"
    if keyword == "exclusiveMaximum":
        return f"{where} is {_describe(value)}; it must be less than {limit}"
    if keyword == "minLength":
        return (
            f"{where} must not be empty"
            if limit == 1
            else f"{where} must be at least {limit} characters long"
        )
    if keyword == "maxLength":
        return f"{where} is {len(value)} characters long; it must be at most {limit}"
    if keyword in ("minItems", "minProperties"):
        return f"{where} has {len(value)} entries; it must have at least {limit}"
    return f"{where} has {len(value)} entries; it must have at most {limit}"


def _quantity_branches(alternatives: Any) -> dict[str, Any] | None:
    """For a quantity's ``oneOf: [number, string]``, its number branch; else None."""
    types = {branch.get("type"): branch for branch in alternatives if isinstance(branch, dict)}
    return types["number"] if set(types) == {"number", "string"} else None


_BOUNDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength"}
    | {"minItems", "maxItems", "minProperties", "maxProperties"}
)
_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string"}
_TYPE_NAMES.update({"boolean": "true or false", "object": "a mapping", "array": "a list"})


def schema_problems(validator: Any, doc: SourceDoc) -> Iterator[tuple[Path, str, str]]:
    """(path, code, message) for every schema violation; unknown keys one by one.

    Shared by manifests and policy files so both get the same positioned, readable messages."""
    for error in validator.iter_errors(doc.data):
        path: Path = tuple(error.absolute_path)
        where = dotted(path)
        keyword = error.validator
        if keyword == "additionalProperties":
            allowed = error.schema.get("properties", {})
            for key in sorted(set(error.instance) - set(allowed)):
                yield (
                    (*path, key),
                    "S001",
                    f"unknown key {_describe(key)} in {where}{_hint(key, allowed)}",
                )
        elif keyword == "required":
            missing = error.message.split("'")[1]
            yield path, "S002", f"{where} is missing the required key {missing!r}"
        elif keyword == "type":
            types = error.validator_value
            names = [
                str(_TYPE_NAMES.get(t, t)) for t in (types if isinstance(types, list) else [types])
            ]
            expected = " or ".join(names)
            yield path, "S003", f"{where} must be {expected}, not {_describe(error.instance)}"
        elif keyword in ("enum", "const"):
            options = error.validator_value if keyword == "enum" else [error.validator_value]
            listed = ", ".join(str(o) for o in options)
            yield (
                path,
                "S005",
                f"{where} is {_describe(error.instance)}; allowed: {listed}"
                f"{_hint(str(error.instance), options)}",
            )
        elif keyword == "oneOf" and (number := _quantity_branches(error.validator_value)):
            # Quantities: a bounded number or a suffixed string. Say which half failed.
            value = error.instance
            if isinstance(value, str):
                yield (
                    path,
                    "S006",
                    f"{where} is {_describe(value)}: write a number or a count with a "
                    "K/M/B/T suffix, such as '671B' or '14.8T'",
                )
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                yield (
                    path,
                    "S004",
                    f"{where} is {value:g}; it must be between "
                    f"{number['minimum']:g} and {number['maximum']:g}",
                )
            else:
                yield (
                    path,
                    "S003",
                    f"{where} must be a number or a count such as '671B', not {_describe(value)}",
                )
        elif keyword in _BOUNDS:
            yield path, "S004", _bound(str(keyword), where, error.instance, error.validator_value)
        elif keyword == "pattern":
            yield (
                path,
                "S006",
                f"{where} is {_describe(error.instance)}; it must match {error.validator_value}",
            )
        else:
            code = _KEYWORD_CODES.get(str(keyword), "S007")
            yield path, code, f"{where}: {error.message}"


class _Raw:
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


# Upper bounds for suffixed quantities; numbers are bounded by the schema itself.
_QUANTITY_MAX = {"model.total_params": 10**15, "model.active_params": 10**15}
_QUANTITY_MAX["training.tokens"] = 10**17


def _cross_field(raw: _Raw, catalog: Catalog) -> Iterator[tuple[str, str, str]]:
    """(dotted path, code, message) for each cross-field problem. Sources in docs/manifest.md."""
    for path, limit in _QUANTITY_MAX.items():
        written = raw.get(path)
        if isinstance(written, str) and not 1 <= (raw.quantity(path) or 0) <= limit:
            # None from raw.quantity: too large to compute, so out of range all the same
            yield path, "X016", f"{path} is {written!r}; it must be between 1 and {limit:.0e}"

    name = raw.get("cluster.accelerator")
    if isinstance(name, str) and name.lower() != "custom" and catalog.lookup(name) is None:
        yield (
            "cluster.accelerator",
            "X012",
            f"unknown accelerator {name!r}{_hint(name, catalog.ids())}; known: "
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

    arch = raw.get("model.architecture")
    total, active = raw.quantity("model.total_params"), raw.quantity("model.active_params")
    if total and active and active > total:
        yield (
            "model.active_params",
            "X005",
            f"active_params ({active:,}) exceeds total_params ({total:,})",
        )
    if arch == "dense":
        for key in ("experts", "experts_per_token"):
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
    experts, top_k = raw.integer("model.experts"), raw.integer("model.experts_per_token")
    if experts and top_k and top_k >= experts:
        yield (
            "model.experts_per_token",
            "X007",
            f"experts_per_token ({top_k}) must be smaller than experts ({experts}): a model "
            "that routes every token to every expert is dense",
        )
    yield from _parameter_split(raw, arch, total, active, experts, top_k)

    if raw.get("parallelism") is None:
        return
    tp, pp = raw.integer("parallelism.tensor", 1), raw.integer("parallelism.pipeline", 1)
    cp, ep = raw.integer("parallelism.context", 1), raw.integer("parallelism.expert", 1)
    vs = raw.integer("parallelism.virtual_stages", 1)
    heads, seq = raw.integer("model.attention_heads"), raw.integer("model.seq_len")
    layers = raw.integer("model.layers")
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
    if layers and pp and pp * (vs or 1) > layers:
        yield (
            "parallelism.pipeline",
            "X014",
            f"pipeline x virtual_stages = {pp * (vs or 1)} stages for {layers} layers: "
            "some stages would hold no layer",
        )
    if vs and pp and vs > 1 and pp == 1:
        yield "parallelism.virtual_stages", "X015", "virtual_stages > 1 needs pipeline > 1"
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
    dp, micro = derived_sizes(gpus, tp, pp, cp, gbs, mbs)
    assert dp is not None
    if ep and ep > 1 and (tp * cp * dp) % ep:
        # Expert parallelism borrows ranks from data x context x tensor parallelism:
        # torchtitan's dp_shard*cp*tp == efsdp*ep; Megatron's EP x ETP x EDP == TP x CP x DP.
        yield (
            "parallelism.expert",
            "X009",
            f"expert parallel size {ep} does not divide tensor x context x data parallel = "
            f"{tp} x {cp} x {dp} = {tp * cp * dp}",
        )
    if micro is None:
        yield (
            "training.global_batch_size",
            "X003",
            f"global_batch_size ({gbs}) is not divisible by micro_batch_size x data parallel "
            f"= {mbs} x {dp} = {mbs * dp}",
        )
        return
    explicit = raw.integer("parallelism.microbatches")
    if explicit is not None and explicit != micro:
        yield (
            "parallelism.microbatches",
            "X004",
            f"microbatches is {explicit} but global_batch_size / (micro_batch_size x data "
            f"parallel) = {gbs} / ({mbs} x {dp}) = {micro}",
        )


def _parameter_split(
    raw: _Raw,
    arch: Any,
    total: int | None,
    active: int | None,
    experts: int | None,
    top_k: int | None,
) -> Iterator[tuple[str, str, str]]:
    """The parameters must leave something for the transformer layers once the embeddings
    (vocab x hidden, twice unless tied) and, for MoE, the routed experts are taken out: the
    memory model splits them the same way (dpguard/memory.py expert_params/embedding_params)."""
    vocab, hidden = raw.integer("model.vocab_size"), raw.integer("model.hidden_size")
    limit = _QUANTITY_MAX["model.total_params"]
    if not (total and vocab and hidden) or arch not in ("moe", "dense") or total > limit:
        return  # out-of-range totals are X016's to report
    untied = raw.get("parallelism.untie_embeddings") is True
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


def validate(doc: SourceDoc, catalog: Catalog) -> list[Finding]:
    """Every schema and cross-field problem in `doc`, sorted by position."""
    findings: list[Finding] = []
    broken: set[Path] = set()
    for path, code, message in schema_problems(_validator(), doc):
        broken.add(path)
        line, col = doc.position(path)
        findings.append(Finding(doc.name, line, col, code, Severity.ERROR, message))
    for where, code, message in _cross_field(_Raw(doc, broken), catalog):
        line, col = doc.position(tuple(where.split(".")))
        findings.append(Finding(doc.name, line, col, code, Severity.ERROR, message))
    return sorted(set(findings))
