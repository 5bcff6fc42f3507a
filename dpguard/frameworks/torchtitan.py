"""torchtitan TOML configs, both key generations.

Keys as of the TOML era (torchtitan/config/job_config.py, last TOML commit 9810191bb^):
``[parallelism] *_degree``, ``[training] local_batch_size``. The Dec-2024 generation (9dec370)
kept the degrees under ``[training]`` and ``[experimental]`` and called the local batch
``batch_size``. The model's shape is not in the file: ``[model] name`` and ``flavor`` select a
row of torchtitan's flavor tables, shipped as dpguard/data/torchtitan_flavors.yaml.

tomllib gives no positions, so a line scan finds each ``key =`` under its ``[table]`` header;
the same scan refuses nesting deeper than the YAML loader's limit before tomllib recurses.

The other way, `emit_config` writes a plan as the same tables (`plan --emit torchtitan`,
dpguard/frameworks/emit.py), naming the flavor only when the table has the whole shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from dpguard.findings import Severity
from dpguard.frameworks.emit import framed
from dpguard.frameworks.model import Extract, FrameworkError, Note, Origin, Values
from dpguard.frameworks.numbers import whole
from dpguard.yamlevents import MAX_DEPTH, MAX_INT_DIGITS, Position

if TYPE_CHECKING:
    from dpguard.planner.plan import Plan

# torch.distributed.pipelining schedule names -> dpguard's; stages per rank of each
SCHEDULES = {
    "1F1B": ("1f1b", 1),
    "GPipe": ("gpipe", 1),
    "Interleaved1F1B": ("interleaved-1f1b", 2),
    "DualPipeV": ("dualpipev", 2),
}
# Accepted by torchtitan, no dpguard equivalent: judged as a proposal without a schedule
_UNMODELLED = ("LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "PipelineScheduleMulti")


def read(path: str, text: str) -> Extract:
    _check_depth(path, text)
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        where = Position(int(match.group(1)), int(match.group(2))) if match else Position(1, 1)
        problem = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        raise FrameworkError(
            "F001", f"invalid TOML: {problem}", Origin(path, where), "torchtitan"
        ) from None
    except RecursionError:  # nesting the scan could not see (tomllib recurses per level)
        raise _error(path, text, 0, f"nesting deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # int() refusing a number of over 4,300 digits
        long = re.search(f"[0-9_]{{{MAX_INT_DIGITS + 1},}}", text)
        problem = f"a number of more than {MAX_INT_DIGITS} digits"
        raise _error(path, text, long.start() if long else 0, problem) from None
    return _extract(path, data, _positions(text))


# A run of key characters (a dotted key or a table header) before `=` or `]`: one with more
# than MAX_DEPTH dots is refused, because tomllib builds one table per part and keeps every
# prefix (quadratic memory: 40 KB of `a.a.a...` took 2.4 GB). One character class, no nested
# quantifier: linear on any input.
_KEY_RUN = re.compile(r"[A-Za-z0-9_\-.\"' \t]+")


def _error(path: str, text: str, offset: int, problem: str) -> FrameworkError:
    """F001 at the line of `offset`."""
    line = text.count("\n", 0, offset) + 1
    return FrameworkError("F001", problem, Origin(path, Position(line, 1)), "torchtitan")


def _is_key(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] stands where TOML has a key: before `=` at a line's start or in
    an inline table (after `{` or `,`), or as a whole table header (`[a.b]`, `[[a.b]]`); a
    string in an array (`[". . ."]`) is not one. Looks back over blanks only: linear."""

    def before(i: int) -> str:  # the character before offset i, blanks skipped ("\n" at start)
        while i > 0 and text[i - 1] in " \t":
            i -= 1
        return text[i - 1] if i > 0 else "\n"

    after = text[end : end + 1]
    if after == "=":
        return before(start) in ("\n", "{", ",")
    if after != "]" or before(start) != "[":
        return False
    opening = text.rfind("[", 0, start)
    return before(opening) == "\n" or (before(opening) == "[" and before(opening - 1) == "\n")


def _check_depth(path: str, text: str) -> None:
    """Refuse nesting and dotted keys deeper than MAX_DEPTH before tomllib sees them."""
    dotted = next(
        (
            run
            for run in _KEY_RUN.finditer(text)
            if run.group().count(".") > MAX_DEPTH and _is_key(text, run.start(), run.end())
        ),
        None,
    )
    if dotted is not None:
        raise _error(path, text, dotted.start(), f"a dotted key of more than {MAX_DEPTH} parts")
    depth = 0
    for match in re.finditer(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'|#[^\n]*|[\[\]{}]", text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _error(path, text, match.start(), f"nesting deeper than {MAX_DEPTH} levels")
        elif token in "]}":
            depth = max(depth - 1, 0)


_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*=\s*")


def _positions(text: str) -> dict[tuple[str, ...], Position]:
    """(table, key) -> position of the value, and (table,) -> position of the header."""
    out: dict[tuple[str, ...], Position] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = tuple(part.strip().strip('"') for part in header.group(1).split("."))
            out.setdefault(table, Position(number, line.index("[") + 1))
            continue
        key = _KEY.match(line)
        if key:
            out.setdefault((*table, key.group(1)), Position(number, key.end() + 1))
    return out


def _split(
    find: Any, layers: int, stages: int, weights: tuple[int, int], legacy: bool
) -> tuple[list[int] | None, Origin | None]:
    """Transformer layers of each pipeline stage as torchtitan places them: explicit split
    points or module lists when given, else its generated split."""
    points, points_at = find(
        ("parallelism", "pipeline_parallel_split_points"),
        ("experimental", "pipeline_parallel_split_points"),
    )
    parts, parts_at = find(("parallelism", "module_fqns_per_model_part"))
    if isinstance(parts, list) and len(parts) == stages:
        counts = [
            sum(1 for m in part if str(m).startswith("layers.")) if isinstance(part, list) else -1
            for part in parts
        ]
        return (counts, parts_at) if min(counts) >= 0 and sum(counts) == layers else (None, None)
    if isinstance(points, list) and len(points) == stages - 1:
        indices = [_layer_index(p) for p in points]
        cuts = [c for c in indices if c is not None]
        if len(cuts) != len(indices) or cuts != sorted(cuts):
            return None, None
        counts = [b - a for a, b in pairwise([0, *cuts, layers])]
        return (counts, points_at) if min(counts) >= 0 else (None, None)
    if legacy:
        # 9dec370 pipelining_utils.py generate_split_points: the first stage gets
        # layers // stages, the next ones one more while the remainder lasts, the last the rest
        base, extra = divmod(layers, stages)
        middle = [base + 1] * min(extra, stages - 2) + [base] * max(stages - 2 - extra, 0)
        counts = [base, *middle]
        return [*counts, layers - sum(counts)] if stages > 1 else [layers], None
    # pipeline_parallel.py _generate_llm_fqn_per_model_part: the embedding and the output
    # count as `weights` layers; the remainder goes to the first stages
    first, last = weights
    effective = layers + first + last
    base, extra = divmod(effective, stages)
    if base == 0 or first > base or last > base:
        return None, None  # torchtitan refuses this split
    counts = [base + (1 if s < extra else 0) for s in range(stages)]
    counts[0] -= first
    counts[-1] -= last
    return counts, None


def _layer_index(point: Any) -> int | None:
    match = re.fullmatch(r"layers\.(\d+)", str(point))
    return int(match.group(1)) if match else None


@cache
def flavors() -> dict[str, Any]:
    """The packaged flavor table (dpguard's own file: broken means exit 2)."""
    from dpguard.errors import ConfigError
    from dpguard.resources import read_text
    from dpguard.yamlsource import YamlLoadError, load_text

    source = "dpguard/data/torchtitan_flavors.yaml"
    try:
        return load_text(read_text("dpguard", "data/torchtitan_flavors.yaml"), source).data
    except YamlLoadError as exc:
        raise ConfigError(exc.message, f"{source}:{exc.position.line}:{exc.position.col}") from None


def _etp_problem(values: Mapping[str, Any]) -> str | None:
    """An expert tensor-parallel degree torchtitan refuses at launch (FW014): ParallelDims
    (distributed/parallel_dims.py) takes 1 or the tensor-parallel degree only."""
    etp, tp = values.get("parallelism.expert_tensor"), values.get("parallelism.tensor", 1)
    if etp is None or etp in (1, tp):
        return None
    return f"expert_tensor_parallel_degree {etp} with tensor_parallel_degree {tp}"


def _extract(path: str, data: dict[str, Any], where: dict[tuple[str, ...], Position]) -> Extract:
    """The values of a parsed job config, section by section (_Reader)."""
    r = _Reader(path, data, where)
    pp, pp_at, shard, replicate = r.parallelism()
    layers = r.model()
    local, local_at, steps, steps_at = r.batch(pp, shard, replicate)
    facts, stage_count = r.schedule(pp, pp_at, layers)
    facts["framework.expert_tensor_problem"] = _etp_problem(r.found.values)
    r.precision(local_at)
    r.recompute(layers, stage_count)
    r.loss(local_at)
    r.all_to_all()
    # torchtitan runs the pipeline schedule once per local batch (pp_schedule.step()) and
    # accumulates GBS / (local x DP) of them per optimizer step; compose counts them (or the
    # global batch, when the ranks left over are known only with the GPU count:
    # DP = replicate x shard = GPUs / (CP x TP x PP), whatever the replicate degree)
    return Extract(
        "torchtitan",
        path,
        r.found.values,
        r.found.origins,
        tuple(r.notes),
        facts,
        replica_batch=(local, local_at or r.top),
        steps=(steps, steps_at or r.top) if steps else None,
    )


class _Reader:
    """One job config's tables, the values read from them so far and the notes about them."""

    def __init__(
        self, path: str, data: dict[str, Any], where: dict[tuple[str, ...], Position]
    ) -> None:
        self.path, self.data, self.where = path, data, where
        self.found = Values()
        self.put = self.found.put
        self.notes: list[Note] = []
        self.top = Origin(path, Position(1, 1))

    def find(self, *candidates: tuple[str, ...]) -> tuple[Any, Origin | None]:
        """The first of (table, ..., key) the file sets, with where it is written."""
        for keys in candidates:
            node: Any = self.data
            for part in keys:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                return node, Origin(self.path, self.where.get(keys, Position(1, 1)))
        return None, None

    def integer(self, *candidates: tuple[str, ...]) -> tuple[int | None, Origin | None]:
        value, origin = self.find(*candidates)
        if value is None:
            return None, None
        if isinstance(value, bool) or not isinstance(value, int):
            assert origin is not None
            self.note(origin, f"{candidates[0][-1]} is {value!r}, not an integer")
            return None, None
        return value, origin

    def note(self, at: Origin | None, message: str, severity: Severity | None = None) -> None:
        origin = at or self.top
        if severity is None:
            self.notes.append(Note(origin, "F002", message))
        else:
            self.notes.append(Note(origin, "F002", message, severity))

    def parallelism(self) -> tuple[int, Origin | None, int, int]:
        """The degrees; (PP, where it is written, the shard and replicate degrees)."""
        integer, put = self.integer, self.put
        tp, tp_at = integer(
            ("parallelism", "tensor_parallel_degree"), ("training", "tensor_parallel_degree")
        )
        pp, pp_at = integer(
            ("parallelism", "pipeline_parallel_degree"),
            ("experimental", "pipeline_parallel_degree"),
        )
        cp, cp_at = integer(
            ("parallelism", "context_parallel_degree"),
            ("experimental", "context_parallel_degree"),
        )
        ep, ep_at = integer(
            ("parallelism", "expert_parallel_degree"), ("experimental", "expert_parallel_degree")
        )
        etp, etp_at = integer(
            ("parallelism", "expert_tensor_parallel_degree"),
            ("experimental", "expert_tensor_parallel_degree"),
        )
        shard, shard_at = integer(
            ("parallelism", "data_parallel_shard_degree"),
            ("training", "data_parallel_shard_degree"),
        )
        replicate, _ = integer(
            ("parallelism", "data_parallel_replicate_degree"),
            ("training", "data_parallel_replicate_degree"),
        )
        tp, pp, cp = tp or 1, pp or 1, cp or 1
        put("parallelism.tensor", tp, tp_at)
        put("parallelism.pipeline", pp, pp_at)
        if cp_at is not None:
            put("parallelism.context", cp, cp_at)
        if ep_at is not None:
            put("parallelism.expert", ep, ep_at)
        if etp_at is not None:
            put("parallelism.expert_tensor", etp, etp_at)
        shard = -1 if shard is None else shard  # default: the ranks left over
        replicate = replicate or 1
        if shard > 0:  # parallel_dims.py: dp_replicate x dp_shard x cp x tp x pp == world size
            put("cluster.gpus", replicate * shard * cp * tp * pp, shard_at)
        put("training.zero_stage", 3 if shard != 1 else 0, shard_at or tp_at)
        return pp, pp_at, shard, replicate

    def model(self) -> int | None:
        """The shape that name and flavor select in torchtitan's table; its layer count."""
        name, name_at = self.find(("model", "name"))
        flavor, flavor_at = self.find(("model", "flavor"))
        family = flavors().get(str(name)) if name is not None else None
        shape = (family or {}).get("flavors", {}).get(str(flavor)) if flavor is not None else None
        if name is not None and shape is None:
            known = ", ".join(sorted((family or {}).get("flavors", {}))) if family else ""
            what = f"flavor {flavor!r} of {name!r}" if family else f"model {name!r}"
            self.note(
                flavor_at or name_at,
                f"{what} is not in dpguard's torchtitan flavor table"
                + (f" (known: {known})" if known else "")
                + ": write the shape under model: in a manifest with source:",
            )
        if shape is None:
            return None
        at = flavor_at or name_at
        for key, value in shape.items():
            self.put(
                "model.untie_embeddings" if key == "untie_embeddings" else f"model.{key}", value, at
            )
        layers: int | None = shape.get("layers")
        return layers

    def batch(
        self, pp: int, shard: int, replicate: int
    ) -> tuple[int, Origin | None, int | None, Origin | None]:
        """Sequence, micro-batch, global batch and tokens: the local batch is per data-parallel
        rank and PP splits it into micro-batches. (local batch, where, steps, where)."""
        integer, put = self.integer, self.put
        seq, seq_at = integer(("training", "seq_len"))
        put("model.seq_len", seq, seq_at)
        local, local_at = integer(("training", "local_batch_size"), ("training", "batch_size"))
        local = 8 if local is None else local  # job_config.py default
        gbs, gbs_at = integer(("training", "global_batch_size"))
        steps, steps_at = integer(("training", "steps"))
        if pp > 1:
            micro, micro_at = self._micro_batch(local, pp)
            put("training.micro_batch_size", micro, micro_at or local_at)
        else:
            put("training.micro_batch_size", local, local_at)
        if gbs is not None and gbs > 0:
            put("training.global_batch_size", gbs, gbs_at)
        elif shard > 0:
            put("training.global_batch_size", local * replicate * shard, local_at)
        gbs_value = self.found.values.get("training.global_batch_size")
        if steps and gbs_value and seq:
            put("training.tokens", steps * gbs_value * seq, steps_at)
        return local, local_at, steps, steps_at

    def _micro_batch(self, local: int, pp: int) -> tuple[int | None, Origin | None]:
        size, size_at = self.integer(("parallelism", "pipeline_parallel_microbatch_size"))
        count, count_at = self.integer(("experimental", "pipeline_parallel_microbatches"))
        if size is not None:
            return size, size_at
        if count is not None and count > 0 and local % count == 0:
            return local // count, count_at
        if "experimental" in self.data and count is None:
            # 9dec370 pipelining_utils.py: n_microbatches defaults to the PP degree
            return (local // pp if local % pp == 0 else None), None
        return 1, count_at  # job_config.py: pipeline_parallel_microbatch_size defaults to 1

    def schedule(
        self, pp: int, pp_at: Origin | None, layers: int | None
    ) -> tuple[dict[str, Any], int]:
        """The schedule, its virtual stages and each stage's layers; (facts, stages in all)."""
        schedule, schedule_at = self.find(
            ("parallelism", "pipeline_parallel_schedule"),
            ("experimental", "pipeline_parallel_schedule"),
        )
        facts: dict[str, Any] = {"framework.schedule_without_pipeline": None}
        if schedule is not None and pp == 1:
            facts["framework.schedule_without_pipeline"] = str(schedule)
        if pp == 1:
            return facts, 1
        name = str(schedule) if schedule is not None else "1F1B"
        if name not in SCHEDULES:
            if schedule_at is not None:
                self.note(
                    schedule_at,
                    f"schedule {name!r} has no dpguard equivalent"
                    + (
                        " (dpguard models gpipe, 1f1b, interleaved-1f1b, zb1p, dualpipe, dualpipev)"
                        if name not in _UNMODELLED
                        else ""
                    )
                    + ": judged as a pipeline without a named schedule",
                    Severity.INFO,
                )
            return facts, 1
        dp_name, per_rank = SCHEDULES[name]
        self.put("parallelism.schedule", dp_name, schedule_at or pp_at)
        integer = self.integer
        per_stage, per_stage_at = integer(("parallelism", "pipeline_parallel_layers_per_stage"))
        first_less, first_at = integer(("parallelism", "pipeline_parallel_first_stage_less_layers"))
        last_less, last_at = integer(("parallelism", "pipeline_parallel_last_stage_less_layers"))
        weights = (1 if first_less is None else first_less, 1 if last_less is None else last_less)
        if per_stage and layers and dp_name == "interleaved-1f1b":
            # pipeline_parallel.py: ceil((layers + first + last weights) / layers_per_stage)
            stages = -(-(layers + sum(weights)) // per_stage)
            if stages % pp == 0:
                per_rank = stages // pp
        if per_rank > 1 and dp_name != "dualpipev":
            self.put("parallelism.virtual_stages", per_rank, per_stage_at or schedule_at)
        stage_count = pp * per_rank
        if layers:
            split, split_at = _split(
                self.find, layers, stage_count, weights, "experimental" in self.data
            )
            self.put(
                "parallelism.stage_layers",
                split,
                split_at or first_at or last_at or per_stage_at or schedule_at or pp_at,
            )
        return facts, stage_count

    def precision(self, local_at: Origin | None) -> None:
        """Precision (Float8 converters or mixed_precision_param), AsyncTP and CPU offload."""
        find, put = self.find, self.put
        # AsyncTP overlaps the tensor-parallel collectives with the GEMMs (runtime.overlap.tp,
        # read by the step-time model; torchtitan job_config.py enable_async_tensor_parallel)
        async_tp, async_at = find(
            ("parallelism", "enable_async_tensor_parallel"),
            ("experimental", "enable_async_tensor_parallel"),
        )
        if async_tp is True:
            put("runtime.overlap.tp", True, async_at)
        converters, converters_at = find(("model", "converters"))
        float8, float8_at = find(("float8", "enable_float8_linear"))
        if (
            isinstance(converters, list) and any("float8" in str(c) for c in converters)
        ) or float8 is True:
            put("training.precision", "fp8", converters_at or float8_at)
            gather, gather_at = find(
                ("float8", "enable_fsdp_float8_all_gather"),
                ("quantize", "linear", "float8", "enable_fsdp_float8_all_gather"),
            )
            if gather is True:
                # FSDP all-gathers the Float8 linears' weights in FP8 and keeps no bf16 copy;
                # torchao caches no transpose across micro-batches (it casts per GEMM)
                put("runtime.fp8_param_gather", True, gather_at)
        else:
            param, param_at = find(("training", "mixed_precision_param"))
            if param in (None, "bfloat16"):
                put("training.precision", "bf16", param_at or local_at)
            else:
                self.note(
                    param_at,
                    f"mixed_precision_param {param!r}: dpguard models bf16, fp16 and fp8 only",
                )
        offload, offload_at = find(("training", "enable_cpu_offload"))
        if offload is True:
            # FSDP2's CPUOffloadPolicy keeps the sharded parameters, gradients and optimizer
            # states in host memory and steps on the CPU; dpguard prices the optimizer states
            # away and still counts the (sharded) weights and gradients: it errs large
            put("training.optimizer_offload", 1.0, offload_at)

    def recompute(self, layers: int | None, stage_count: int) -> None:
        """[activation_checkpoint] as the recompute policy dpguard prices."""
        put = self.put
        mode, mode_at = self.find(("activation_checkpoint", "mode"))
        mode = "selective" if mode is None else str(mode)  # job_config.py default
        option, option_at = self.find(("activation_checkpoint", "selective_ac_option"))
        option = "2" if option is None else str(option)
        at = option_at or mode_at
        if mode in ("none", "full"):
            put("training.activation_recompute", mode, mode_at)
        elif mode == "selective" and option == "op":
            put("training.activation_recompute", "selective_op", at)
        elif mode == "selective" and (whole(option) or 0) >= 1 and layers:
            # every k-th block fully checkpointed (activation_checkpoint.py _apply_layer_sac),
            # the others keep everything: per stage, as many recomputed blocks as Megatron's
            # block method recomputes with n // k layers (which ones does not change the memory)
            every = whole(option) or 1
            recomputed = -(-layers // stage_count) // every
            if every == 1:
                put("training.activation_recompute", "full", at)
            elif recomputed == 0:
                put("training.activation_recompute", "none", at)
            else:
                put("training.activation_recompute", "full", at)
                put("training.recompute_method", "block", at)
                put("training.recompute_num_layers", recomputed, at)
        elif mode == "selective":
            # an interval the file does not give as a number, or no known layer count: judged
            # as no recompute, so memory is overestimated, never under
            put("training.activation_recompute", "none", at)
            self.note(
                at,
                f"selective_ac_option {option!r} is not a layer interval dpguard can place: "
                "memory is judged as without recompute (an overestimate)",
                Severity.INFO,
            )
        else:
            self.note(
                mode_at,
                f"activation_checkpoint mode {mode!r} is not modelled: judged without recompute",
                Severity.INFO,
            )
            put("training.activation_recompute", "none", mode_at)

    def loss(self, local_at: Origin | None) -> None:
        """The loss is compiled with [compile] enable (components default to model and loss,
        config/job_config.py) or, from April 2025 (loss.py build_cross_entropy_loss), with
        [training] compile; the Dec-2024 layout compiled the blocks only."""
        enable, enable_at = self.find(("compile", "enable"))
        legacy_compile, legacy_at = self.find(("training", "compile"))
        if enable is not None:
            components, _ = self.find(("compile", "components"))
            components = ["model", "loss"] if components is None else components
            compiled = enable is True and isinstance(components, list) and "loss" in components
        else:
            compiled = legacy_compile is True and "experimental" not in self.data
        self.put(
            "runtime.cross_entropy",
            "fused" if compiled else "unfused",
            enable_at or legacy_at or local_at,
        )

    def all_to_all(self) -> None:
        """The expert all-to-all backend of an MoE (DTensor TP and torch.distributed.pipelining
        are the torchtitan profile's traits, not read here)."""
        backend, backend_at = self.find(("parallelism", "expert_parallel_comm_backend"))
        if backend is not None and self.found.values.get("model.architecture") == "moe":
            self.put(
                "communication.all_to_all_kernel",
                {"deepep": "deepep"}.get(str(backend), "nccl"),
                backend_at,
            )


# The emitter (`plan --emit torchtitan`, dpguard/frameworks/emit.py): the plan as a TOML block.

# torchtitan's schedule names, from the reader's table (the one spelling of each)
_SCHEDULE_NAMES = {name: torchtitan for torchtitan, (name, _) in SCHEDULES.items()}


def emit_config(plan: Plan, notes: Sequence[str] = ()) -> str:
    """`plan --emit torchtitan`: the plan as torchtitan job-config tables ([model] name and
    flavor when the flavor table has the shape, [parallelism], [training],
    [activation_checkpoint]), with `notes` in the header."""
    title = "# torchtitan job config: these keys replace the same keys of your TOML."
    return framed(plan, notes, title, _config_lines)


def _config_lines(plan: Plan) -> tuple[list[str], list[str]]:
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
        parallelism.append(("pipeline_parallel_schedule", _SCHEDULE_NAMES[plan.schedule]))
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
        if s.expert_tensor:  # unset: torchtitan's default, 1
            parallelism.append(("expert_tensor_parallel_degree", s.expert_tensor))
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
