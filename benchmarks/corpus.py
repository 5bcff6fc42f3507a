"""A deterministic corpus of manifests for the benchmarks and the review equivalence test (same
seed, same files)."""

from __future__ import annotations

import random
from pathlib import Path

# Published runs and their neighbours. The synthetic corpus this replaced needed a median of 4
# layout sizings per file; manifests teams write need 15-22 (issue 28). This one starts from the
# published-run manifests the tests calibrate on and the bundled examples, and varies them the
# way a training-config repository does: the parallelism section left to dpguard, a bigger
# batch, twice the GPUs, another accelerator, the micro-batch size left open, another schedule,
# another recompute policy, a longer context.

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
