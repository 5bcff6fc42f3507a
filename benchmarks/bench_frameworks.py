"""What reading a framework config adds to `review` (issue 12: at most 20 ms).

For each shipped framework fixture, a `source:` manifest supplies what the config cannot say;
the same run written out as one plain manifest (the composed document dpguard judged) is the
baseline. Both are reviewed in this process (best of N, the reader's own cost without process
start-up noise) and in cold processes, alternating (what a hook user waits for).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "policies" / "tests" / "frameworks"
CASES = {
    "megatron script": "megatron-vpp-even.sh",
    "torchtitan TOML": "torchtitan-pp1.toml",
    "FlagScale YAML": "flagscale/train_dualpipev.yaml",
    "Megatron-Bridge YAML": "bridge-seq.yaml",
}
# What a config cannot say, given by the pointing manifest only where the config lacks it.
FILL = {
    "cluster.gpus": 64,
    "cluster.accelerator": "H100-SXM",
    "cluster.interconnect.inter_node_gbps_per_gpu": 400,
    "training.tokens": "1T",
}


def _pointer(path: Path, config: Path, missing: set[str]) -> None:
    doc: dict[str, Any] = {
        "apiVersion": "dpguard/v1",
        "kind": "TrainingManifest",
        "metadata": {"name": "bench"},
        "source": {"path": str(config)},
    }
    for dotted, value in FILL.items():
        if dotted in missing:
            *parents, leaf = dotted.split(".")
            node = doc
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _best(call: Callable[[], Any], repeat: int) -> float:
    call()  # caches (schema, policies, catalog) are warm for both sides alike
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def measure(
    directory: Path,
    dpguard: str,
    runs: int,
    alternate: Callable[[list[str], list[str] | None, int], dict[str, Any]],
) -> list[dict[str, Any]]:
    from dpguard.check import check_file
    from dpguard.policy.load import load_policies

    policies = load_policies()
    rows = []
    configs = directory / "configs"  # beside the pointing manifests (source.path reads inside)
    if not configs.exists():
        shutil.copytree(FIXTURES, configs)
    for label, fixture in CASES.items():
        config = configs / fixture
        pointer = directory / f"{config.stem}-pointer.yaml"
        _pointer(pointer, config, set())
        missing = {
            f.message.split(" ")[0]
            for f in check_file(str(pointer), None, policies).findings
            if f.code == "F003"
        }
        _pointer(pointer, config, missing)
        composed = check_file(str(pointer), None, policies)
        assert composed.manifest is not None, [f.format() for f in composed.findings]
        data = {k: v for k, v in composed.manifest.source.data.items() if k != "source"}
        plain = directory / f"{config.stem}-plain.yaml"
        plain.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        repeat = 5 if runs < 5 else 30
        framework_s = _best(lambda p=pointer: check_file(str(p), None, policies), repeat)
        manifest_s = _best(lambda p=plain: check_file(str(p), None, policies), repeat)
        cold = alternate([dpguard, "review", str(pointer)], [dpguard, "review", str(plain)], runs)
        rows.append(
            {
                "format": label,
                "in_process_framework_ms": framework_s * 1e3,
                "in_process_manifest_ms": manifest_s * 1e3,
                "in_process_added_ms": (framework_s - manifest_s) * 1e3,
                "cold_added_ms": (cold["dpguard_median_s"] - cold["baseline_median_s"]) * 1e3,
                "cold_ratio": cold["median_pair_ratio"],
            }
        )
    return rows
