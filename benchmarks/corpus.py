"""A deterministic corpus of valid manifests for the benchmarks (same seed, same files)."""

from __future__ import annotations

import random
from pathlib import Path

DENSE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {{name: bench-dense-{i}, owner: bench}}
cluster:
  gpus: {gpus}
  accelerator: {accelerator}
  interconnect: {{inter_node_gbps_per_gpu: {gbps}}}
model:
  architecture: dense
  total_params: {params}B
  layers: {layers}
  hidden_size: {hidden}
  attention_heads: {heads}
  seq_len: 4096
  vocab_size: 128256
training:
  tokens: {tokens}T
  global_batch_size: {gbs}
  micro_batch_size: 1
  activation_recompute: full
parallelism:
  tensor: 8
  pipeline: {pipeline}
"""

MOE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {{name: bench-moe-{i}, owner: bench}}
cluster:
  gpus: {gpus}
  accelerator: H800
  interconnect: {{inter_node_gbps_per_gpu: {gbps}}}
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
  untie_embeddings: true
training:
  tokens: 14.8T
  global_batch_size: {gbs}
  activation_recompute: full
parallelism:
  pipeline: 16
  expert: 64
  schedule: dualpipe
communication: {{all_to_all_kernel: deepep}}
"""

# (params in B, layers, hidden, heads): shapes of published dense models.
SHAPES = ((13, 40, 5120, 40), (70, 80, 8192, 64), (175, 96, 12288, 96), (405, 126, 16384, 128))


def write_corpus(directory: Path, count: int, seed: int = 20261122) -> list[Path]:
    """`count` valid manifests in `directory`, three dense for every MoE one."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        if i % 4 == 3:
            nodes = rng.choice((256, 512))
            text = MOE.format(i=i, gpus=nodes * 8, gbps=rng.choice((200, 400)), gbs=nodes * 64)
        else:
            params, layers, hidden, heads = rng.choice(SHAPES)
            pipeline = rng.choice((4, 8, 16))
            gpus = 8 * pipeline * rng.choice((8, 16, 32, 64))
            text = DENSE.format(
                i=i,
                gpus=gpus,
                accelerator=rng.choice(("H100-SXM", "H200", "A100-80GB")),
                gbps=rng.choice((200, 400)),
                params=params,
                layers=layers,
                hidden=hidden,
                heads=heads,
                tokens=rng.choice((1, 2, 15)),
                gbs=gpus // (8 * pipeline) * 16,
                pipeline=pipeline,
            )
        path = directory / f"manifest-{i:04d}.yaml"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


# ---- A realistic corpus: published runs and their neighbours -------------------------------
#
# The synthetic corpus above needs a median of 4 layout sizings per file; manifests teams write
# need 15-22 (issue 28). This one starts from the published-run manifests the tests calibrate
# on and the bundled examples, and varies them the way a training-config repository does: the
# parallelism section left to dpguard, a bigger batch, twice the GPUs, another accelerator, the
# micro-batch size left open, another schedule, another recompute policy, a longer context.

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ("tests/data/calibration", "tests/data/perf/manifests", "examples")
ACCELERATORS = ("H100-SXM", "H200", "A100-80GB", "B200", "H800", "MI300X")
SCHEDULES = ("1f1b", "interleaved-1f1b", "zb1p", "dualpipe", "dualpipev", "gpipe")


def seed_manifests() -> list[Path]:
    """The published-run manifests and examples, in a fixed order (no `source:` among them)."""
    return [p for d in SEEDS for p in sorted((ROOT / d).glob("*.yaml"))]


def _vary(doc: dict, rng: random.Random) -> dict:
    """One to three of the changes a team makes to a manifest it copied."""
    import copy

    doc = copy.deepcopy(doc)
    cluster, model, training = doc["cluster"], doc["model"], doc["training"]
    doc.get("metadata", {}).pop("labels", None)  # calibration labels are not a team's
    for change in rng.sample(range(8), rng.choice((1, 1, 2, 3))):
        p = doc.get("parallelism")
        if change == 0:
            doc.pop("parallelism", None)
        elif change == 1:
            training["global_batch_size"] = int(training["global_batch_size"]) * rng.choice(
                (4, 16, 64)
            )
        elif change == 2:
            cluster["gpus"] = int(cluster["gpus"]) * 2
            training["global_batch_size"] = int(training["global_batch_size"]) * 2
        elif change == 3:
            cluster["accelerator"] = rng.choice(ACCELERATORS)
            cluster.pop("memory_gb", None)
        elif change == 4:
            training.pop("micro_batch_size", None)
        elif change == 5 and p is not None and int(p.get("pipeline", 1)) > 1:
            p["schedule"] = rng.choice(SCHEDULES)
            if p["schedule"] == "interleaved-1f1b":
                p["virtual_stages"] = rng.choice((2, 4))
            else:
                p.pop("virtual_stages", None)
        elif change == 6:
            training["activation_recompute"] = rng.choice(("none", "selective", "full"))
            training.pop("recompute_modules", None)
        elif change == 7:
            model["seq_len"] = int(model.get("seq_len", 4096)) * rng.choice((4, 8))
    return doc


def write_realistic(directory: Path, count: int, seed: int = 20261127) -> list[Path]:
    """`count` manifests: every published-run manifest and example as written, then variants
    of them drawn with a fixed seed. Some variants break a rule or the schema (a schedule the
    layers cannot take, a batch that does not divide): their findings are timed too."""
    import yaml

    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    sources = seed_manifests()
    docs = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sources]
    paths = []
    for i in range(count):
        if i < len(sources):
            text = sources[i].read_text(encoding="utf-8")
            name = f"{i:04d}-{sources[i].stem}.yaml"
        else:
            k = rng.randrange(len(docs))
            text = yaml.safe_dump(_vary(docs[k], rng), sort_keys=False)
            name = f"{i:04d}-{sources[k].stem}-variant.yaml"
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
