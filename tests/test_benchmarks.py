"""The benchmark suite runs on a tiny corpus and writes its results. Timings are never asserted:
they belong to benchmarks/run.py's printed ratios, measured against a baseline in one run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_suite_writes_every_section(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--output", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert results["quick"] is True
    single = results["single_file"]
    assert set(single) == {
        f"{command} {name}, {cache} cache"
        for command in ("review", "plan", "memory")
        for name in ("405B", "DeepSeek-V3")
        for cache in ("warm", "cold")
    }
    assert all(row["runs"] == 1 for row in single.values())
    # Llama 3 405B and DeepSeek-V3 as published pass review and fit in `dpguard memory`.
    assert all(row["dpguard_exit_codes"] == [0] for row in single.values())
    cost = results["review_cost"]["rows"]
    assert set(cost) == {
        *(f"review {name}" for name in ("realistic", "copies", "rotation", "unplanned 65,536")),
        "hook realistic",
        "hook copies",
        "review realistic, cold cache",
        "hook realistic, cold cache",
        "review realistic, one process",
        "hook realistic, one process (as pre-commit runs it)",
    }
    assert all(
        row["files"] == 4 and row["dpguard_per_file_ms"] is not None for row in cost.values()
    )
    # a valid corpus: judged (0 or 1), never an error of dpguard's own (2, 3)
    assert all(set(row["dpguard_exit_codes"]) <= {0, 1} for row in cost.values())
    assert cost["review copies"]["dpguard_exit_codes"] == [0]
    assert results["review_cost"]["peak_rss_kib"] > 0
    assert "budgets: every review-cost target held" in done.stdout or (
        "BUDGET EXCEEDED" in done.stdout
    )
    assert [row["manifest"] for row in results["planner"]] == ["large-dense", "frontier-moe"]
    assert results["planner"][0]["gpus"] == 16384 and results["planner"][1]["gpus"] == 2048
    # The worst cases are judged, never aborted; the infeasible one's plan exits 1.
    stress = results["stress"]
    assert set(stress) == {
        f"{command} {name}"
        for command in ("review", "plan")
        for name in ("batch-65536", "batch-1000000", "infeasible")
    }
    assert stress["plan infeasible"]["dpguard_exit_codes"] == [1]
    assert stress["plan batch-1000000"]["dpguard_exit_codes"] == [0]
    assert all(set(row["dpguard_exit_codes"]) <= {0, 1} for row in stress.values())
    assert all(row["peak_rss_kib"] < 100 * 1024 for row in stress.values())
    schedules = {row["schedule"] for row in results["simulator"]}
    assert schedules == {"gpipe", "1f1b", "interleaved-1f1b", "zb1p", "dualpipe", "dualpipev"}
    assert all(row["events"] > 0 for row in results["simulator"])
    frameworks = results["frameworks"]
    assert [row["format"] for row in frameworks] == [
        "megatron script",
        "torchtitan TOML",
        "FlagScale YAML",
        "Megatron-Bridge YAML",
    ]
    assert all(row["in_process_framework_ms"] > 0 for row in frameworks)
    assert "review 405B, cold cache: dpguard" in done.stdout


def test_corpus_is_deterministic_and_schema_valid(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from corpus import seed_manifests, write_realistic
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    count = len(seed_manifests()) + 40
    first = [p.read_text() for p in write_realistic(tmp_path / "a", count)]
    second = [p.read_text() for p in write_realistic(tmp_path / "b", count)]
    assert first == second

    from dpguard.catalog import load_catalog
    from dpguard.findings import Severity
    from dpguard.validate import validate
    from dpguard.yamlsource import load_file

    # the published runs as written are valid (examples/mistakes.yaml is wrong on purpose);
    # most variants are too (some break the schema: a schedule the layers cannot take)
    written = sorted((tmp_path / "a").glob("*.yaml"))
    invalid = [
        p
        for p in written
        if any(f.severity is Severity.ERROR for f in validate(load_file(str(p)), load_catalog()))
    ]
    assert [p.name[5:] for p in invalid if "variant" not in p.name] == ["mistakes.yaml"]
    assert len(invalid) < 10
