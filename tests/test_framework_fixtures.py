"""Hand-checked framework configs (tests/data/frameworks, one per reader, written in the style of
each framework's own example directories): what each reader must take from them
(expected.yaml), and that each, as the working recipe it is, passes review once a manifest
supplies what the config cannot say."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from dpguard.check import check_file, load_any
from dpguard.findings import Severity
from dpguard.frameworks.read import read
from dpguard.policy.load import load_policies

HERE = Path(__file__).parent / "data" / "frameworks"
EXPECTED: dict[str, Any] = yaml.safe_load((HERE / "expected.yaml").read_text(encoding="utf-8"))

# What no config says, given by the pointing manifest only where the config lacks it; a
# DeepSpeed config has no model at all (it lives in Python).
FILL = {
    "cluster": {"accelerator": "H100-SXM", "interconnect": {"inter_node_gbps_per_gpu": 400}},
    "training": {"tokens": "1T"},
}
MODEL = {
    "architecture": "dense",
    "total_params": "1.3B",
    "layers": 24,
    "hidden_size": 2048,
    "attention_heads": 16,
    "seq_len": 2048,
    "vocab_size": 50304,
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_reader_takes_what_the_config_says(name: str) -> None:
    case = EXPECTED[name]
    _, fmt, _, _ = load_any(str(HERE / name))  # detected from the content
    assert fmt == case["format"]
    extract = read(str(HERE / name), fmt)
    assert dict(sorted(extract.values.items())) == case["values"]
    assert [n.code for n in extract.notes] == case["notes"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_recipe_passes_review_with_a_pointing_manifest(name: str, tmp_path: Path) -> None:
    values = EXPECTED[name]["values"]
    manifest: dict[str, Any] = {
        "apiVersion": "dpguard/v1",
        "kind": "TrainingManifest",
        "metadata": {"name": Path(name).stem},
        # beside the manifest, as in a repository (dpguard.confine: source.path reads inside)
        "source": {"path": f"configs/{name}"},
    }
    shutil.copytree(HERE, tmp_path / "configs")
    for section, keys in FILL.items():
        for key, value in keys.items():
            if not any(k.startswith(f"{section}.{key}") for k in values):
                manifest.setdefault(section, {})[key] = value
    if "model.layers" not in values:
        manifest["model"] = MODEL
    elif "model.vocab_size" not in values:  # from the tokenizer
        manifest["model"] = {"vocab_size": 50304}
    if "cluster.gpus" not in values:
        manifest["cluster"]["gpus"] = 128
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    result = check_file(str(path), None, load_policies([]))
    errors = [f.format() for f in result.findings if f.severity is Severity.ERROR]
    assert errors == []
    assert result.source_format == EXPECTED[name]["format"]
