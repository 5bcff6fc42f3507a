"""Tests for dpguard.catalog: shipped values against domain.md (a), lookup, and the validator."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dpguard.catalog import Accelerator, Catalog, load_catalog, normalize_name, parse_catalog
from dpguard.errors import ConfigError

REQUIRED_IDS = (
    "A100-40GB",
    "A100-80GB",
    "H100-SXM",
    "H800",
    "H200",
    "B200",
    "GB200",
    "MI300X",
    "MI325X",
    "Gaudi3",
)

# (id, memory_gb, peak_tflops_bf16, hbm_tbps, scale_up GB/s unidirectional, domain, Gb/s per GPU)
# typed in from the table in /work/shared/docs/domain.md (a), not copied from the YAML.
EXPECTED = [
    ("A100-40GB", 40, 312, None, 300, 8, 200),
    ("A100-80GB", 80, 312, 2.0, 300, 8, 200),
    ("H100-SXM", 80, 989, 3.35, 450, 8, 400),
    # H800: "400 GB/s nominal (vs 900)" is duplex -> 200 unidirectional (see notes).
    ("H800", 80, 989, 3.35, 200, 8, 400),
    ("H200", 141, 989, 4.8, 450, 8, 400),
    ("B200", 192, 2250, 8.0, 900, 8, 400),
    ("GB200", 186, 2500, 8.0, 900, 72, 400),
    ("MI300X", 192, 1307.4, 5.3, 448, 8, 400),
    ("MI325X", 256, 1307.4, 6.0, 448, 8, 400),
    # Gaudi 3: shipping-clock peak 1,677 (spec 1,835); inter-node split unknown -> None.
    ("Gaudi3", 128, 1677, 3.7, 600, 8, None),
]


def shipped_data() -> dict[str, Any]:
    path = Path(__file__).resolve().parents[1] / "dpguard" / "data" / "accelerators.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_every_required_id_is_present() -> None:
    ids = load_catalog().ids()
    assert set(REQUIRED_IDS) <= set(ids)
    assert list(ids) == sorted(ids)


@pytest.mark.parametrize(("ident", "mem", "peak", "hbm", "link", "domain", "nic"), EXPECTED)
def test_values_match_domain_md(
    ident: str,
    mem: float,
    peak: float,
    hbm: float | None,
    link: float,
    domain: int,
    nic: float | None,
) -> None:
    acc = load_catalog().lookup(ident)
    assert acc is not None
    assert acc.id == ident
    assert acc.memory_gb == mem
    assert acc.peak_tflops_bf16 == pytest.approx(peak)
    assert acc.hbm_tbps == (None if hbm is None else pytest.approx(hbm))
    assert acc.scale_up_gbytes_per_s == pytest.approx(link)
    assert acc.scale_up_domain == domain
    assert acc.typical_inter_node_gbps_per_gpu == nic


def test_vendor_and_family() -> None:
    cat = load_catalog()
    expected = {
        "A100-80GB": ("nvidia", "ampere"),
        "H100-SXM": ("nvidia", "hopper"),
        "B200": ("nvidia", "blackwell"),
        "GB200": ("nvidia", "blackwell"),
        "MI300X": ("amd", "cdna3"),
        "Gaudi3": ("intel", "gaudi"),
    }
    for ident, (vendor, family) in expected.items():
        acc = cat.lookup(ident)
        assert acc is not None
        assert (acc.vendor, acc.family) == (vendor, family)


def test_every_entry_cites_a_source_and_flags_weak_figures() -> None:
    for acc in load_catalog().accelerators:
        assert acc.sources, acc.id
        assert all(s.strip() for s in acc.sources)
    cat = load_catalog()
    # domain.md marks these cells derived / secondary / unverified / conflicting.
    for ident, word in [
        ("H800", "derived"),
        ("H800", "unverified"),
        ("B200", "180 GB"),
        ("GB200", "unverified"),
        ("MI325X", "1,500"),
        ("Gaudi3", "1,835"),
    ]:
        entry = cat.lookup(ident)
        assert entry is not None and word in entry.notes, (ident, word)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100-SXM", "H100-SXM"),
        ("h100-sxm", "H100-SXM"),
        ("H100 SXM", "H100-SXM"),
        ("h100_sxm", "H100-SXM"),
        ("H100", "H100-SXM"),
        ("h100-sxm5", "H100-SXM"),
        ("a100-80gb", "A100-80GB"),
        ("A100 SXM4 40GB", "A100-40GB"),
        ("gaudi3", "Gaudi3"),
        ("Gaudi 3", "Gaudi3"),
        ("mi300x", "MI300X"),
        ("gb200 nvl72", "GB200"),
    ],
)
def test_lookup_is_case_and_separator_insensitive(name: str, expected: str) -> None:
    acc = load_catalog().lookup(name)
    assert acc is not None
    assert acc.id == expected


@pytest.mark.parametrize("name", ["A100", "a100", "custom", "MI300", "Gaudi", "TPUv5", ""])
def test_ambiguous_reserved_and_unknown_names_do_not_resolve(name: str) -> None:
    assert load_catalog().lookup(name) is None


def test_normalize_name() -> None:
    assert normalize_name(" H100_-SXM 5 ") == "h100sxm5"


def test_load_catalog_is_cached() -> None:
    assert load_catalog() is load_catalog()


def test_parse_catalog_builds_records() -> None:
    cat = parse_catalog(shipped_data(), "x.yaml")
    assert isinstance(cat, Catalog)
    assert all(isinstance(a, Accelerator) for a in cat.accelerators)
    assert cat == load_catalog()


def _mutated(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(shipped_data())
    change(data)
    return data


def _entry(data: dict[str, Any], ident: str) -> dict[str, Any]:
    return next(e for e in data["accelerators"] if e["id"] == ident)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["accelerators"].append(copy.deepcopy(d["accelerators"][0])), "clashes"),
        (lambda d: _entry(d, "H200")["aliases"].append("h100"), "clashes with 'H100-SXM'"),
        (lambda d: _entry(d, "B200").__setitem__("id", "h100 sxm"), "clashes"),
        (lambda d: _entry(d, "B200")["aliases"].append("B-200"), "repeats its own"),
        (lambda d: _entry(d, "B200")["aliases"].append("Custom"), "reserved"),
        (lambda d: _entry(d, "H200").pop("memory_gb"), "missing required keys: memory_gb"),
        (
            lambda d: _entry(d, "H200").__setitem__("memory_gb", -1),
            "memory_gb must be a positive number",
        ),
        (lambda d: _entry(d, "H200").__setitem__("memory_gb", "141"), "memory_gb"),
        (lambda d: _entry(d, "H200").__setitem__("memory_gb", True), "memory_gb"),
        (lambda d: _entry(d, "H200").__setitem__("hbm_tbps", 0), "hbm_tbps"),
        (lambda d: _entry(d, "H200").__setitem__("scale_up_domain", 7.5), "scale_up_domain"),
        (lambda d: _entry(d, "H200").__setitem__("sources", []), "at least one source"),
        (lambda d: _entry(d, "H200").__setitem__("sources", "a paper"), "sources must be a list"),
        (lambda d: _entry(d, "H200").__setitem__("vendor", "amd"), "made by 'nvidia'"),
        (lambda d: _entry(d, "H200").__setitem__("family", "volta"), "family must be one of"),
        (lambda d: _entry(d, "H200").__setitem__("tdp_w", 700), "unknown keys: tdp_w"),
        (lambda d: d.__setitem__("kind", "Policy"), "kind must be"),
        (lambda d: d.__setitem__("apiVersion", "v2"), "apiVersion must be"),
        (lambda d: d.__setitem__("accelerators", []), "non-empty list"),
        (lambda d: d["accelerators"].append("H100"), "must be a mapping"),
    ],
)
def test_validator_rejects_broken_data(change: Any, message: str) -> None:
    data = _mutated(change)
    with pytest.raises(ConfigError) as info:
        parse_catalog(data, "broken.yaml")
    assert info.value.location == "broken.yaml"
    assert str(info.value).startswith("broken.yaml: ")
    assert message in str(info.value)


def test_validator_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "cat.yaml"
    data = _mutated(lambda d: _entry(d, "MI325X").__setitem__("peak_tflops_bf16", 0))
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    index = [e["id"] for e in data["accelerators"]].index("MI325X")
    with pytest.raises(
        ConfigError, match=rf"accelerators\[{index}\] \(id 'MI325X'\): peak_tflops_bf16"
    ):
        parse_catalog(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


def test_validator_rejects_non_mapping_top_level() -> None:
    with pytest.raises(ConfigError, match="mapping at the top level"):
        parse_catalog([1, 2], "list.yaml")


def test_fp8_training_is_hopper_and_later_and_the_other_vendors_fp8_parts() -> None:
    """Transformer Engine needs compute capability 8.9 for FP8 (its support matrix): no A100.
    MI300X/MI325X (CDNA3) and Gaudi 3 train in FP8 with their vendors' engines."""
    catalog = load_catalog()
    fp8 = {acc.id: acc.fp8_training for acc in catalog.accelerators}
    assert fp8["A100-40GB"] is False and fp8["A100-80GB"] is False
    assert all(fp8[i] for i in ("H100-SXM", "H800", "H200", "B200", "GB200"))
    assert all(fp8[i] for i in ("MI300X", "MI325X", "Gaudi3"))
    for acc in catalog.accelerators:
        assert any(s.startswith("fp8_training: ") for s in acc.sources), acc.id
        assert any(s.startswith("usable_gib: ") for s in acc.sources), acc.id
