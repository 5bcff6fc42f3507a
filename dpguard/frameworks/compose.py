"""One manifest from a framework config, the manifest that points at it, and defaults.

The framework file says how the job launches; what it cannot say (GPU count, accelerator,
interconnect, token budget) comes from a ``source:`` manifest or from ``defaults:`` in
.dpguard.yaml. The result is an ordinary `SourceDoc`, so every schema check, cross-field check,
rule, memory verdict and plan applies unchanged, and every position points into the file the
value was written in.

Precedence: the framework file is what runs, so its values stand; a manifest value that
differs is an error naming both places (F004); defaults only fill what neither says.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from dpguard import resources
from dpguard.findings import Finding, Severity
from dpguard.frameworks import profiles
from dpguard.frameworks.model import Extract, Origin, section
from dpguard.manifest import untie_embeddings
from dpguard.yamlevents import Path, Position, SourceDoc, value_at

# Where a missing fact goes, in the message naming it.
_WHERE = "a manifest with `source: {{path: {name}}}` or `defaults:` in .dpguard.yaml"


def compose(
    extract: Extract,
    manifest: SourceDoc | None = None,
    defaults: Iterable[SourceDoc] = (),
) -> tuple[SourceDoc, list[Finding]]:
    """The composed document (named after the manifest when there is one, else after the
    framework file) and the findings of composing: conflicts (F004), missing facts (F003),
    and the reader's notes."""
    name = manifest.name if manifest is not None else extract.path
    data: dict[str, Any] = {}
    keys: dict[Path, Position] = {}
    files: dict[Path, str] = {}
    defaults = tuple(defaults)
    hand = {d.name for d in defaults} | ({manifest.name} if manifest is not None else set())
    written: set[Path] = set()
    findings = [
        Finding(n.origin.file, *n.origin.position, n.code, n.severity, n.message)
        for n in extract.notes
    ]

    def put(path: Path, value: Any, origin: Origin) -> None:
        node: dict[Any, Any] = data
        for depth, key in enumerate(path[:-1]):
            node = node.setdefault(key, {})
            if not isinstance(node, dict):  # a value where this path needs a section
                raise _Shape(".".join(map(str, path[: depth + 1])), node)
            prefix = path[: depth + 1]
            if prefix not in keys:  # a section sits where its first value was written
                keys[prefix] = origin.position
                if origin.file != name:
                    files[prefix] = origin.file
        node[path[-1]] = value
        keys[path] = origin.position
        if origin.file in hand:
            written.add(path)
        if origin.file != name:
            files[path] = origin.file

    # Every config names its framework: its format's (a reader that knows better, Megatron-
    # DeepSpeed's, says so itself), so that a manifest naming another one conflicts (F004)
    values = {"training.framework": extract.format, **extract.values}
    # ... or the team's profile that reads that framework's configs (a fork's)
    values["training.framework"] = profiles.read_as(values["training.framework"])
    for dotted, value in sorted(values.items()):
        origin = extract.origins.get(dotted, Origin(extract.path, Position(1, 1)))
        put(tuple(dotted.split(".")), value, origin)
    if manifest is not None:
        for path, value in _leaves(manifest.data):
            dotted = ".".join(map(str, path))
            problem = None
            if dotted in values and not _same(values[dotted], value):
                there = extract.origins.get(dotted, Origin(extract.path, Position(1, 1)))
                problem = (
                    f"{dotted} is {_show(value)} here but {_show(values[dotted])} in "
                    f"{there.file}:{there.position.line}:{there.position.col}"
                )
            elif dotted not in values:
                try:
                    put(path, value, Origin(manifest.name, manifest.position(path)))
                except _Shape as shape:
                    problem = (
                        f"{dotted} needs {shape.dotted} to be a section, but it is "
                        f"{_show(shape.value)} in {os.path.basename(extract.path)}"
                    )
            if problem is not None:  # F004: the manifest and its config disagree
                where = manifest.position(path)
                message = f"{problem}; set it in one place"
                findings.append(Finding(manifest.name, *where, "F004", Severity.ERROR, message))
    for default in defaults:
        for path, value in _leaves(default.data):
            if value_at(data, path) is None:
                with contextlib.suppress(_Shape):  # defaults fill only where nothing is set
                    put(path, value, Origin(default.name, default.position(path)))
    with contextlib.suppress(_Shape):  # a manifest's scalar where a section belongs: the
        _derive_batch(extract, data, put)  # schema reports it
    data.setdefault("apiVersion", "dpguard/v1")
    data.setdefault("kind", "TrainingManifest")
    meta = data.setdefault("metadata", {})
    if isinstance(meta, dict):  # else the schema reports the manifest's metadata
        meta.setdefault("name", os.path.splitext(os.path.basename(extract.path))[0] or "config")
    _derive_params(data, keys, files, name)
    at = manifest.position(("source",)) if manifest is not None else Position(1, 1)
    findings += _unsaid(extract, data, name, at)
    return SourceDoc(name, data, keys, dict(keys), files, frozenset(written)), findings


def _unsaid(extract: Extract, data: Mapping[str, Any], name: str, at: Position) -> list[Finding]:
    """F003 for each fact the schema requires that no input gave: at the value the config
    writes but a static reader cannot follow, else at the manifest's `source:` (`at`)."""
    findings: list[Finding] = []
    config = os.path.basename(extract.path)
    unread = {
        dotted: origin
        for dotted, origin in sorted(extract.undetermined.items())
        if value_at(data, tuple(dotted.split("."))) is None
    }
    for dotted, origin in unread.items():
        findings.append(
            Finding(
                origin.file,
                *origin.position,
                "F003",
                Severity.ERROR,
                f"{dotted} cannot be read from {config} and dpguard does not guess it: add "
                f"{dotted} to " + _WHERE.format(name=config),
            )
        )
    for key in (k for k in missing(data) if k not in unread):
        findings.append(
            Finding(
                name,
                *at,
                "F003",
                Severity.ERROR,
                f"{key} is not in {config} ({extract.format}): add it there if the format has "
                "it, or to " + _WHERE.format(name=config),
            )
        )
    return findings


def _leaves(data: Mapping[str, Any], prefix: Path = ()) -> Iterable[tuple[Path, Any]]:
    for key, value in data.items():
        if prefix == () and key == "source":
            continue
        path = (*prefix, key)
        if isinstance(value, dict) and value and path != ("model", "mla"):
            yield from _leaves(value, path)
        else:
            yield path, value


def _same(a: Any, b: Any) -> bool:
    from dpguard.manifest import parse_quantity

    if a == b:
        return True
    try:
        return parse_quantity(a) == parse_quantity(b)
    except (ValueError, TypeError, ArithmeticError):  # decimal's InvalidOperation among them
        return False


class _Shape(Exception):
    """A path that runs through a value (`dotted` is `value`), not a section."""

    def __init__(self, dotted: str, value: Any) -> None:
        super().__init__(dotted)
        self.dotted, self.value = dotted, value


def _show(value: Any) -> str:
    return (
        str(value).lower()
        if isinstance(value, bool)
        else repr(value)
        if isinstance(value, str)
        else str(value)
    )


def _derive_params(data: dict[str, Any], keys: dict, files: dict, name: str) -> None:
    """total_params (and active_params of an MoE model) from the shape, when no input says
    them: framework configs describe models by shape, never by count."""
    model = data.get("model")
    if not isinstance(model, dict) or (
        "total_params" in model and ("active_params" in model or model.get("architecture") != "moe")
    ):
        return
    from dpguard import memory

    try:
        arch = memory.Architecture(
            total_params=1.0,
            layers=model["layers"],
            hidden_size=model["hidden_size"],
            attention_heads=model["attention_heads"],
            seq_len=model.get("seq_len", 1),
            vocab_size=model["vocab_size"],
            ffn_hidden_size=model.get("ffn_hidden_size"),
            swiglu=model.get("ffn_activation") == "swiglu",
            kv_heads=model.get("kv_heads"),
            head_dim=model.get("head_dim"),
            mla=memory.MLA(**model["mla"])
            if model.get("attention") == "mla" and "mla" in model
            else None,
            experts=model.get("experts", 0) if model.get("architecture") == "moe" else 0,
            experts_per_token=model.get("experts_per_token", 0),
            moe_ffn_hidden_size=model.get("moe_ffn_hidden_size"),
            shared_experts=model.get("shared_experts", 0),
            dense_layers=model.get("dense_layers", 0),
            tied_embeddings=not untie_embeddings(data),
        )
    except (KeyError, TypeError, ValueError):
        return  # a missing or broken shape: reported as such, not as a missing count
    if arch.moe and arch.moe_ffn_hidden_size is None:
        return
    total, active = memory.shape_total_params(arch)
    anchor = ("model", "layers")
    for key, value in (("total_params", total), ("active_params", active)):
        if key == "active_params" and not arch.moe:
            continue
        if key not in model:
            model[key] = round(value)
            keys[("model", key)] = keys.get(anchor, Position(1, 1))
            if anchor in files:
                files[("model", key)] = files[anchor]


def _derive_batch(extract: Extract, data: dict[str, Any], put: Any) -> None:
    """From the batch one data-parallel replica takes per pipeline schedule (torchtitan's local
    batch), with DP = GPUs / (TP x PP x CP): the global batch (and tokens) where no input gives
    it, else the gradient-accumulation steps that make it up (train.py: GBS / (local x DP))."""
    training, parallel = (section(data, key) for key in ("training", "parallelism"))
    gpus = value_at(data, ("cluster", "gpus"))
    if extract.replica_batch is None or not gpus:
        return
    group = 1
    for key in ("tensor", "pipeline", "context"):
        degree = parallel.get(key, 1)
        group *= degree if isinstance(degree, int) and degree > 0 else 1
    if not isinstance(gpus, int) or gpus % group:
        return  # X001 says the GPUs do not divide
    per_replica, origin = extract.replica_batch
    step = per_replica * (gpus // group)
    written = training.get("global_batch_size")
    if isinstance(written, int) and not isinstance(written, bool):
        if written > step and written % step == 0 and "accumulation_steps" not in parallel:
            put(("parallelism", "accumulation_steps"), written // step, origin)
        return  # anything else: X003 says the batch does not divide
    gbs = step
    put(("training", "global_batch_size"), gbs, origin)
    seq = value_at(data, ("model", "seq_len"))
    if extract.steps is not None and "tokens" not in training and isinstance(seq, int):
        steps, at = extract.steps
        put(("training", "tokens"), steps * gbs * seq, at)


def missing(data: Mapping[str, Any]) -> list[str]:
    """Dotted paths the manifest schema requires that the composed document lacks."""
    schema = resources.schema("manifest.schema.json")
    out: list[str] = []

    def walk(node: Mapping[str, Any], spec: Mapping[str, Any], prefix: str) -> None:
        for key in spec.get("required", ()):
            if key not in node:
                out.append(prefix + key)
        for key, sub in spec.get("properties", {}).items():
            if isinstance(node.get(key), dict) and sub.get("type") == "object":
                walk(node[key], sub, f"{prefix}{key}.")
            elif (
                key in spec.get("required", ()) and key not in node and sub.get("type") == "object"
            ):
                walk({}, sub, f"{prefix}{key}.")

    walk(data, schema, "")
    if "model.vocab_size" in out and "model.total_params" in out and "model.layers" not in out:
        out.remove("model.total_params")  # derived from the shape once the vocabulary is known
    # a missing section is reported through its required keys, not as a key of its own
    return [p for p in out if not any(q.startswith(p + ".") for q in out)]
