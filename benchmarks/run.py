"""dpguard's benchmark suite: one entry point, every figure measured in this invocation.

    python benchmarks/run.py             # the full suite (~15 minutes on 2 cores)
    python benchmarks/run.py --quick     # a tiny corpus, for the tests and a smoke check

Run it from the repository root with dpguard installed (`pip install '.[bench]'` also installs
check-jsonschema, the baseline). Sections:

1. single file, cold process: `dpguard review`, `plan` and `memory` of Llama 3 405B and of
   DeepSeek-V3 as published against `check-jsonschema --schemafile
   schemas/manifest.schema.json FILE`, alternating, medians and the median per-pair ratio,
   with a warm and with an empty cache directory (a fresh CI runner);
2. review cost (bench_review.py): `review` and the hook over realistic corpora of 500 files
   in one call, per-file cost apart from start-up, warm and cold cache, and peak RSS over
   2,000 files, with the issue's budgets checked (`BUDGET EXCEEDED` lines);
3. the schedule simulator for every schedule over P and M (cost against P x M);
4. the planner's full search for a 16,384-GPU dense and a 2,048-GPU MoE manifest;
5. worst cases: `review` and `plan` of manifests that once took seconds (global batches of
   65,536 and 1,000,000 sequences, an infeasible model), against check-jsonschema on the same
   file, with peak RSS;
6. `review --baseline` of 20 changed files against a plain review of them;
7. framework configs: `review` of a Megatron script, torchtitan TOML, FlagScale and Bridge
   YAML (with a `source:` manifest) against the same run as one plain manifest.

Speed is reported as ratios against the baseline run in the same invocation; nothing here
asserts absolute times. Results go to benchmarks/results.json (or --output).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # the sibling benchmark modules, not the dpguard sources

import bench_diff  # noqa: E402
import bench_frameworks  # noqa: E402
import bench_review  # noqa: E402
import bench_schedules  # noqa: E402
from corpus import write_realistic  # noqa: E402


def _tool(name: str) -> str | None:
    """The tool installed next to this interpreter, else on PATH."""
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else shutil.which(name)


def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, int, float]:
    """Wall seconds, exit code, peak RSS (KiB) and CPU seconds (user + system) of one child
    process (`env` added to this one's). CPU time is the steadier measure on a shared machine:
    it leaves out the time the child waited for a core."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env} if env else None,
    )
    _pid, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, child.returncode, int(usage.ru_maxrss), usage.ru_utime + usage.ru_stime


def _alternate(a: list[str], b: list[str] | None, runs: int, cold: bool = False) -> dict[str, Any]:
    """Run a and b alternately `runs` times each (b may be missing): medians and pair ratios.
    `cold`: every run of a gets an empty cache directory, as on a fresh CI runner."""
    times_a: list[float] = []
    times_b: list[float] = []
    cpu_a: list[float] = []
    cpu_b: list[float] = []
    codes: set[int] = set()

    def run_a() -> tuple[float, int, int, float]:
        if not cold:
            return _run(a)
        cache = tempfile.mkdtemp(prefix="dpguard-cold-")
        try:
            return _run(a, {"DPGUARD_CACHE_DIR": cache})
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    run_a()  # warm the file cache for both, so neither pays for the first disk read
    if b:
        _run(b)
    for _ in range(runs):
        seconds, code, _rss, cpu = run_a()
        times_a.append(seconds)
        cpu_a.append(cpu)
        codes.add(code)
        if b:
            seconds, _code, _rss, cpu = _run(b)
            times_b.append(seconds)
            cpu_b.append(cpu)
    out: dict[str, Any] = {"runs": runs, "dpguard_median_s": statistics.median(times_a)}
    out["dpguard_exit_codes"] = sorted(codes)
    out["dpguard_median_cpu_s"] = statistics.median(cpu_a)
    out["cache"] = "cold" if cold else "warm"
    if b:
        out["baseline_median_s"] = statistics.median(times_b)
        out["median_pair_ratio"] = statistics.median(
            x / y for x, y in zip(times_a, times_b, strict=True)
        )
        out["baseline_median_cpu_s"] = statistics.median(cpu_b)
        out["median_pair_cpu_ratio"] = statistics.median(
            x / y for x, y in zip(cpu_a, cpu_b, strict=True)
        )
    return out


STRESS_BASE = """apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {{name: {name}}}
cluster: {{gpus: {gpus}, gpus_per_node: 8, accelerator: {acc},
  interconnect: {{inter_node_gbps_per_gpu: 400}}}}
model: {{architecture: dense, total_params: {params}, layers: {layers}, hidden_size: {hidden},
  attention_heads: {heads}, kv_heads: 8, ffn_hidden_size: {ffn}, ffn_activation: swiglu,
  seq_len: 8192, vocab_size: 128256}}
training: {{tokens: 15T, global_batch_size: {batch}}}
"""
LLAMA3_405B = dict(params="405B", layers=126, hidden=16384, heads=128, ffn=53248)
STRESS = {
    # Llama 3 405B's shape on 16,384 H100 with batches far beyond any published run.
    "batch-65536": dict(LLAMA3_405B, gpus=16384, acc="H100-SXM", batch=65536),
    "batch-1000000": dict(LLAMA3_405B, gpus=16384, acc="H100-SXM", batch=1_000_000),
    # 405B on 8 A100: nothing fits, the planner prices remedies.
    "infeasible": dict(LLAMA3_405B, gpus=8, acc="A100-80GB", batch=2048),
}


def _stress(directory: Path, dpguard: str, baseline: str | None, schema: str, runs: int) -> dict:
    out: dict[str, Any] = {}
    for name, values in STRESS.items():
        path = directory / f"{name}.yaml"
        path.write_text(STRESS_BASE.format(name=name, **values), encoding="utf-8")
        base = [baseline, "--schemafile", schema, str(path)] if baseline else None
        for command in ("review", "plan"):
            row = _alternate([dpguard, command, str(path)], base, runs)
            row["peak_rss_kib"] = _run([dpguard, command, str(path)])[2]
            out[f"{command} {name}"] = row
    return out


def _planner(directory: Path) -> list[dict[str, Any]]:
    """The full search (no parallelism proposed) for the two reference manifests."""
    from dpguard import memo
    from dpguard.check import check_file
    from dpguard.planner.plan import make_plan
    from dpguard.policy.load import load_policies

    policies = load_policies()
    rows = []
    for name in ("large-dense", "frontier-moe"):
        text = (ROOT / "examples" / f"{name}.yaml").read_text(encoding="utf-8")
        text = (
            text[: text.index("parallelism:")] + text[text.index("communication:") :]
            if ("communication:" in text)
            else text[: text.index("parallelism:")]
        )
        path = directory / f"{name}-unplanned.yaml"
        path.write_text(text, encoding="utf-8")
        result = check_file(str(path), None, policies)
        assert result.manifest is not None and result.outcome is not None, result.findings
        best = float("inf")
        for _ in range(3):
            memo.forget()  # the search from scratch, not the one remembered from the last run
            start = time.perf_counter()
            plan = make_plan(result.manifest, result.outcome, policies)
            best = min(best, time.perf_counter() - start)
        rows.append(
            {
                "manifest": name,
                "gpus": result.manifest.cluster.gpus,
                "seconds": best,
                "plan": f"{plan.schedule} P={plan.pipeline} M={plan.microbatches} T={plan.tensor}",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny corpus and grid (for tests)")
    parser.add_argument("--files", type=int, default=500, help="batch corpus size (default 500)")
    parser.add_argument(
        "--runs", type=int, default=7, help="runs per tool and row, alternating (default 7)"
    )
    parser.add_argument("--output", default=str(HERE / "results.json"))
    args = parser.parse_args(argv)
    files, runs = (4, 1) if args.quick else (args.files, args.runs)
    dpguard, baseline = _tool("dpguard"), _tool("check-jsonschema")
    if dpguard is None:
        print("dpguard is not installed: pip install '.[bench]'", file=sys.stderr)
        return 2
    if baseline is None:
        print("check-jsonschema not installed (pip install '.[bench]'): no baseline ratios")
    schema = str(ROOT / "schemas" / "manifest.schema.json")

    results: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "quick": args.quick,
    }
    with tempfile.TemporaryDirectory() as tmp:
        # single files: the Llama 3 405B manifest as published and DeepSeek-V3 as published,
        # warm and cold cache
        one = str(ROOT / "examples" / "large-dense.yaml")
        frontier = str(ROOT / "examples" / "frontier-moe.yaml")
        single: dict[str, Any] = {}
        for name, path in (("405B", one), ("DeepSeek-V3", frontier)):
            base = [baseline, "--schemafile", schema, path] if baseline else None
            for command in ("review", "plan", "memory"):
                for cold in (False, True):
                    key = f"{command} {name}, {'cold' if cold else 'warm'} cache"
                    single[key] = _alternate([dpguard, command, path], base, runs, cold)
        results["single_file"] = single
        if baseline is not None:
            results["review_cost"] = bench_review.measure(
                Path(tmp) / "review-cost", dpguard, baseline, schema, files, runs, _run, _alternate
            )
        corpus = write_realistic(Path(tmp) / "corpus", max(files, 20))
        results["planner"] = _planner(Path(tmp))
        results["stress"] = _stress(Path(tmp), dpguard, baseline, schema, runs)
        results["review_baseline"] = bench_diff.measure(
            dpguard, Path(tmp) / "baseline-repo", corpus[:20], runs
        )
        results["frameworks"] = bench_frameworks.measure(Path(tmp), dpguard, runs, _alternate)
    ranks, factors = (
        ((4, 8), (2, 8)) if args.quick else (bench_schedules.RANKS, bench_schedules.FACTORS)
    )
    results["simulator"] = bench_schedules.measure(ranks, factors)
    if not args.quick:
        results["simulator_targets"] = bench_schedules.targets()

    Path(args.output).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    _print(results)
    return 0


def _print(r: dict[str, Any]) -> None:
    def ratio(section: dict[str, Any]) -> str:
        if "median_pair_ratio" not in section:
            return "no baseline"
        return (
            f"check-jsonschema {section['baseline_median_s'] * 1e3:.0f} ms, "
            f"ratio {section['median_pair_ratio']:.2f} (CPU time "
            f"{section['median_pair_cpu_ratio']:.2f})"
        )

    for key, x in r["single_file"].items():
        print(f"{key}: dpguard {x['dpguard_median_s'] * 1e3:.0f} ms; {ratio(x)}")
    if "review_cost" in r:
        bench_review.print_rows(r["review_cost"])
    for key, x in r["stress"].items():
        rss = x["peak_rss_kib"] / 1024
        print(f"{key}: dpguard {x['dpguard_median_s'] * 1e3:.0f} ms, {rss:.1f} MiB; {ratio(x)}")
    d = r["review_baseline"]
    print(
        f"review --baseline ({d['files']} changed files) vs plain review: ratio "
        f"{d['median_pair_ratio']:.2f} (CPU time {d['median_pair_cpu_ratio']:.2f}; target <= 2)"
    )
    for row in r["planner"]:
        print(
            f"planner {row['manifest']} ({row['gpus']} GPUs): "
            f"{row['seconds'] * 1e3:.1f} ms -> {row['plan']}"
        )
    for row in r["frameworks"]:
        print(
            f"{row['format']} vs the same run as a manifest: +"
            f"{row['in_process_added_ms']:.1f} ms in process "
            f"({row['in_process_framework_ms']:.1f} vs {row['in_process_manifest_ms']:.1f} ms), "
            f"{row['cold_added_ms']:+.0f} ms cold (ratio {row['cold_ratio']:.2f})"
        )
    worst = max(r["simulator"], key=lambda row: row["per_pm_ratio"])
    print(
        f"simulator: {len(r['simulator'])} cases; largest time/(PxM) vs the smallest case of the "
        f"same schedule: {worst['per_pm_ratio']:.2f} ({worst['schedule']} P={worst['ranks']} "
        f"M={worst['microbatches']})"
    )
    for name, seconds in r.get("simulator_targets", {}).items():
        print(f"{name}: {seconds:.3f}")
    if "review_cost" in r:
        for line in bench_review.budget_lines(r["review_cost"], r["single_file"]):
            print(line)


if __name__ == "__main__":
    raise SystemExit(main())
