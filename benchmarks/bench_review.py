"""What `review` costs per file, against check-jsonschema on the same files (issue 28).

Corpora (500 files each unless --files says otherwise):
- realistic: the published-run manifests of every family and the examples as written, then
  variants of them a team writes (no parallelism section, bigger batches, more GPUs, another
  accelerator, schedule or recompute, longer context), and the framework configs of the tests;
- copies: one Llama 3 405B manifest (examples/large-dense.yaml) 500 times;
- rotation: 22 published-run manifests in turn;
- unplanned 65,536: Llama 3 405B's shape on 16,384 H100 without a parallelism section, at a
  global batch of 65,536 sequences (the planner's heaviest search), 500 times.

Each row alternates dpguard and the baseline at least 7 times (run.py's `_alternate`: medians
and the median pair ratio), for the batch and for one file of it, so that the per-file cost is
reported apart from start-up: (batch - one file) / (files - 1), for both tools, and the CPU
time of the whole batch beside its wall time (dpguard judges a batch on every usable core,
dpguard.workers; two rows keep it to one process, `--jobs 1`: `review`, reported, and the
hook, a target, as pre-commit runs it: one process per share of the files). `review`
prints the plan of every file (text); the hook (`--only-manifests --quiet`) prints none, and
review then runs the full search only where a rule reads it. Cold rows give every dpguard run
an empty cache directory (DPGUARD_CACHE_DIR), as on a fresh CI runner; warm rows the per-user
cache, filled by the untimed first run.

Budgets (issue 28's targets) are checked here and reported as `BUDGET EXCEEDED` lines: a
benchmark, never a timed test.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpus import ROOT, seed_manifests, write_realistic

FRAMEWORK_CONFIGS = ROOT / "tests" / "data" / "frameworks"
ROTATION = 22
BATCH_BUDGET = 0.7  # ratio to check-jsonschema, 500 files in one call (batch and per file)
SINGLE_BUDGET = 1.0  # ratio to check-jsonschema, one file, cold process
RSS_BUDGET_MIB = 100  # peak RSS of review over 2,000 files
ONE_PROCESS = "review realistic, one process"  # reported, not a target
# pre-commit splits the files over the cores and runs each share as one dpguard process
# (PRE_COMMIT set: dpguard.workers starts no workers), so the hook's budget holds per process
PRE_COMMIT_HOOK = "hook realistic, one process (as pre-commit runs it)"

UNPLANNED = """apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {{name: unplanned-{i}}}
cluster: {{gpus: 16384, gpus_per_node: 8, accelerator: H100-SXM,
  interconnect: {{inter_node_gbps_per_gpu: 400}}}}
model: {{architecture: dense, total_params: 405B, layers: 126, hidden_size: 16384,
  attention_heads: 128, kv_heads: 8, ffn_hidden_size: 53248, ffn_activation: swiglu,
  seq_len: 8192, vocab_size: 128256}}
training: {{tokens: 15T, global_batch_size: 65536}}
"""

Run = Callable[..., tuple[float, int, int, float]]
Alternate = Callable[..., dict[str, Any]]  # run.py's _alternate


def corpora(directory: Path, files: int) -> dict[str, list[Path]]:
    """The four corpora, written under `directory`."""
    out: dict[str, list[Path]] = {}
    configs = sorted(
        p
        for p in FRAMEWORK_CONFIGS.rglob("*")
        if p.is_file() and p.suffix in (".sh", ".toml", ".json", ".yaml")
        if p.name != "expected.yaml"
    )
    realistic = write_realistic(directory / "realistic", max(files - len(configs), 1))
    for config in configs:
        target = directory / "realistic" / f"config-{config.name}"
        shutil.copyfile(config, target)
        realistic.append(target)
    out["realistic"] = realistic[:files]
    seeds = seed_manifests()
    rotation = [seeds[i * len(seeds) // ROTATION] for i in range(ROTATION)]
    for name, sources in (
        ("copies", itertools.repeat(ROOT / "examples" / "large-dense.yaml")),
        ("rotation", itertools.cycle(rotation)),
    ):
        (directory / name).mkdir(parents=True)
        paths = []
        for i, source in zip(range(files), sources, strict=False):
            path = directory / name / f"{i:04d}-{source.name}"
            shutil.copyfile(source, path)
            paths.append(path)
        out[name] = paths
    (directory / "unplanned").mkdir(parents=True)
    out["unplanned 65,536"] = []
    for i in range(files):
        path = directory / "unplanned" / f"{i:04d}.yaml"
        path.write_text(UNPLANNED.format(i=i), encoding="utf-8")
        out["unplanned 65,536"].append(path)
    return out


def _row(
    alternate: Alternate,
    command: list[str],
    baseline: list[str],
    files: list[Path],
    runs: int,
    cold: bool,
) -> dict[str, Any]:
    paths = [str(p) for p in files]
    batch = alternate([*command, *paths], [*baseline, *paths], runs, cold)
    one = alternate([*command, paths[0]], [*baseline, paths[0]], runs, cold)
    n = len(paths)
    per_a = (batch["dpguard_median_s"] - one["dpguard_median_s"]) / max(n - 1, 1)
    per_b = (batch["baseline_median_s"] - one["baseline_median_s"]) / max(n - 1, 1)
    return {
        **batch,
        "files": n,
        "dpguard_start_s": one["dpguard_median_s"],
        "baseline_start_s": one["baseline_median_s"],
        "dpguard_per_file_ms": per_a * 1e3,
        "baseline_per_file_ms": per_b * 1e3,
        "per_file_ratio": per_a / per_b if per_b > 0 else None,
    }


def measure(
    directory: Path,
    dpguard: str,
    baseline: str,
    schema: str,
    files: int,
    runs: int,
    run: Run,
    alternate: Alternate,
) -> dict[str, Any]:
    runs = max(runs, 7) if files > 10 else runs
    sets = corpora(directory, files)
    base = [baseline, "--schemafile", schema]
    review = [dpguard, "review"]
    hook = [dpguard, "review", "--only-manifests", "--quiet"]
    rows: dict[str, Any] = {}
    for name, paths in sets.items():
        rows[f"review {name}"] = _row(alternate, review, base, paths, runs, False)
    # one process, as before workers: what a file costs in CPU, apart from the cores used
    rows[ONE_PROCESS] = _row(
        alternate, [*review, "--jobs", "1"], base, sets["realistic"], runs, False
    )
    for name in ("realistic", "copies"):
        rows[f"hook {name}"] = _row(alternate, hook, base, sets[name], runs, False)
    rows[PRE_COMMIT_HOOK] = _row(
        alternate, [*hook, "--jobs", "1"], base, sets["realistic"], runs, False
    )
    rows["review realistic, cold cache"] = _row(
        alternate, review, base, sets["realistic"], runs, True
    )
    rows["hook realistic, cold cache"] = _row(alternate, hook, base, sets["realistic"], runs, True)
    big = write_realistic(directory / "rss", 4 * files)
    rss = run([*review, *map(str, big)])[2]
    return {"rows": rows, "rss_files": len(big), "peak_rss_kib": rss}


def budget_lines(review_cost: dict[str, Any], single: dict[str, dict[str, Any]]) -> list[str]:
    """One `BUDGET EXCEEDED` line per target missed (issue 28), else one line saying all held."""
    missed = []
    for name, row in review_cost["rows"].items():
        if name == ONE_PROCESS:
            continue
        for key, what in (("median_pair_ratio", "batch"), ("per_file_ratio", "per file")):
            value = row.get(key)
            if value is not None and value > BATCH_BUDGET:
                missed.append(f"{name} ({what}): {value:.2f} > {BATCH_BUDGET}")
    for name, row in single.items():
        value = row.get("median_pair_ratio")
        if value is not None and value > SINGLE_BUDGET:
            missed.append(f"{name}: {value:.2f} > {SINGLE_BUDGET}")
    rss = review_cost["peak_rss_kib"] / 1024
    if rss >= RSS_BUDGET_MIB:
        missed.append(f"peak RSS over {review_cost['rss_files']} files: {rss:.1f} MiB")
    if not missed:
        return ["budgets: every review-cost target held"]
    return [f"BUDGET EXCEEDED {line}" for line in missed]


def print_rows(review_cost: dict[str, Any]) -> None:
    for name, row in review_cost["rows"].items():
        per = row["per_file_ratio"]
        print(
            f"{name} ({row['files']} files, {row['cache']}): dpguard "
            f"{row['dpguard_median_s'] * 1e3:.0f} ms, check-jsonschema "
            f"{row['baseline_median_s'] * 1e3:.0f} ms, ratio {row['median_pair_ratio']:.2f}; "
            f"per file {row['dpguard_per_file_ms']:.2f} vs {row['baseline_per_file_ms']:.2f} ms"
            + (f" ({per:.2f})" if per is not None else "")
            + f"; CPU ratio {row['median_pair_cpu_ratio']:.2f}"
        )
    print(
        f"peak RSS over {review_cost['rss_files']} files: "
        f"{review_cost['peak_rss_kib'] / 1024:.1f} MiB"
    )
