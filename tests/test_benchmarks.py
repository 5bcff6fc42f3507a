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
    assert results["single_file"]["runs"] == 2
    assert results["batch"]["files"] == 3
    # The generated corpus is schema-valid: dpguard judges it (0 or 1), it never errors out.
    assert set(results["single_file"]["dpguard_exit_codes"]) <= {0, 1}
    assert set(results["memory_single_file"]["dpguard_exit_codes"]) <= {0, 1}
    # DeepSeek-V3 as published passes review and fits in `dpguard memory`.
    assert results["frontier_review"]["dpguard_exit_codes"] == [0]
    assert results["frontier_memory"]["dpguard_exit_codes"] == [0]
    assert set(results["peak_rss_kib"]) == {"one_file", "3_files"}
    assert all(v > 0 for v in results["peak_rss_kib"].values())
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
    assert "single file (cold): dpguard" in done.stdout
    assert "memory single file: dpguard" in done.stdout


def test_corpus_is_deterministic_and_schema_valid(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from corpus import write_corpus
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    first = [p.read_text() for p in write_corpus(tmp_path / "a", 12)]
    second = [p.read_text() for p in write_corpus(tmp_path / "b", 12)]
    assert first == second

    from dpguard.catalog import load_catalog
    from dpguard.validate import validate
    from dpguard.yamlsource import load_file

    for path in sorted((tmp_path / "a").glob("*.yaml")):
        assert validate(load_file(str(path)), load_catalog()) == [], path
