"""The H100 PCIe and NVL cards, the H20 and the L40S in the accelerator catalog.

Before these entries, an "H100-PCIe" manifest was told "did you mean 'H100-SXM'?": a different
part (132 SMs at 700 W and NVSwitch against 114 SMs at 350 W and NVLink-bridged pairs). The
expected numbers below are typed in from the sources each entry cites (NVIDIA's H100 PCIe product
brief and datasheet table, third-party copies of the H100 NVL and L40S datasheets, public H20
figures and PyTorch "total capacity" reports), not copied from the YAML.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard.catalog import form_factors, load_catalog
from dpguard.check import check_file
from dpguard.cli import main
from dpguard.perf.data import load
from dpguard.perf.model import hardware

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# (id, family, memory_gb, usable_gib, dense BF16 TFLOPS, HBM TB/s, scale-up GB/s unidirectional,
#  scale-up domain, scale-out Gb/s per GPU, fp8_training)
EXPECTED = [
    # PB-11133 (350 W, > 2,000 GB/s); datasheet PCIe column 1,513 sparse -> 756 dense; NVLink
    # bridge 600 GB/s duplex between a pair -> 300 each way, domain 2.
    ("H100-PCIe", "hopper", 80, 79.1, 756, 2.0, 300, 2, None, True),
    # datasheet NVL column: 1,671 sparse -> 835 dense, 94 GB HBM3 at 3.9 TB/s, bridged pairs;
    # PyTorch reports 93.00 GiB (ali-vilab/VACE #56).
    ("H100-NVL", "hopper", 94, 93.0, 835, 3.9, 300, 2, None, True),
    # 148 dense (a measured 142 TFLOPS matmul), 96 GB HBM3 at 4.0 TB/s, NVLink4 900 duplex in
    # 8-GPU HGX; PyTorch reports 95.00 GiB (modelscope/DiffSynth-Studio #1238).
    ("H20", "hopper", 96, 95.0, 148, 4.0, 450, 8, None, True),
    # 362.05 dense (733 sparse), 48 GB GDDR6 at 864 GB/s, no NVLink (PCIe Gen4 x16); PyTorch
    # reports 44.42 GiB (stepfun-ai/Step-Video-T2V #8). Ada is compute capability 8.9: FP8.
    ("L40S", "ada", 48, 44.42, 362.05, 0.864, None, 1, None, True),
]


@pytest.mark.parametrize(
    ("ident", "family", "mem", "usable", "peak", "hbm", "link", "domain", "nic", "fp8"), EXPECTED
)
def test_values_match_their_sources(
    ident: str,
    family: str,
    mem: float,
    usable: float,
    peak: float,
    hbm: float,
    link: float | None,
    domain: int,
    nic: float | None,
    fp8: bool,
) -> None:
    acc = load_catalog().lookup(ident)
    assert acc is not None and acc.id == ident
    assert (acc.vendor, acc.family) == ("nvidia", family)
    assert acc.memory_gb == mem
    assert acc.usable_gib == pytest.approx(usable)
    assert acc.peak_tflops_bf16 == pytest.approx(peak)
    assert acc.hbm_tbps == pytest.approx(hbm)
    assert acc.scale_up_gbytes_per_s == (None if link is None else pytest.approx(link))
    assert acc.scale_up_domain == domain
    assert acc.typical_inter_node_gbps_per_gpu == nic
    assert acc.fp8_training is fp8


def test_the_variants_are_not_the_sxm_part() -> None:
    cat = load_catalog()
    sxm = cat.lookup("H100-SXM")
    assert sxm is not None
    for ident in ("H100-PCIe", "H100-NVL"):
        card = cat.lookup(ident)
        assert card is not None and card is not sxm
        assert card.peak_tflops_bf16 < sxm.peak_tflops_bf16
        assert card.scale_up_domain < sxm.scale_up_domain


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100-PCIe", "H100-PCIe"),
        ("H100 PCIe", "H100-PCIe"),
        ("h100_pcie", "H100-PCIe"),
        ("H100-PCIE-80GB", "H100-PCIe"),
        ("H100-NVL", "H100-NVL"),
        ("H100 NVL", "H100-NVL"),
        ("H100-NVL-94GB", "H100-NVL"),
        ("H20", "H20"),
        ("h20", "H20"),
        ("L40S", "L40S"),
        ("l40s", "L40S"),
        # plain H100 stays the SXM part
        ("H100", "H100-SXM"),
        ("H100-SXM5", "H100-SXM"),
    ],
)
def test_aliases_resolve(name: str, expected: str) -> None:
    cat = load_catalog()
    acc = cat.lookup(name)
    assert acc is not None and acc.id == expected
    assert cat.canonical(name) == expected


def test_h100_pcie_no_longer_resolves_or_points_to_the_sxm_part() -> None:
    cat = load_catalog()
    assert cat.canonical("H100-PCIe") == "H100-PCIe" != "H100-SXM"
    assert cat.canonical("H100 NVL") == "H100-NVL"


def test_names_that_are_no_catalog_entry_stay_unknown() -> None:
    cat = load_catalog()
    for name in ("H20-3e", "L40", "H200 NVL", "H800-PCIe", "A100-PCIe-80GB", "H200-NVL"):
        assert cat.lookup(name) is None, name


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        # another form factor of a catalogued chip is another part: no suggestion
        ("H200 NVL", ""),
        ("H200-NVL-141GB", ""),
        ("H800-PCIe", ""),
        ("A100-PCIe-80GB", ""),
        ("A100-PCIE-40GB", ""),
        ("B200-NVL", ""),
        # the same form factor (or an entry that names none) is still offered
        ("H100-PCIe-94GB", " (did you mean 'H100-PCIe'?)"),
        ("H100-SXM-94GB", " (did you mean 'H100-SXM'?)"),
        ("L40S-PCIe", " (did you mean 'L40S'?)"),
        ("H20-SXM", " (did you mean 'H20'?)"),
        # no form factor written: every part of the chip
        ("h100-80gb", " (did you mean 'H100-SXM' or 'H100-PCIe' or 'H100-NVL'?)"),
        # NVL72 is a rack-scale domain, not the NVL card
        ("GB200-NVL36", " (did you mean 'GB200'?)"),
    ],
)
def test_a_form_factor_word_is_never_suggested_another_part(name: str, hint: str) -> None:
    cat = load_catalog()
    assert cat.lookup(name) is None
    assert cat.hint(name) == hint


def test_form_factors() -> None:
    assert form_factors("H100 PCIe") == {"pcie"}
    assert form_factors("A100-SXM4-80GB") == {"sxm"}
    assert form_factors("H100-NVL-94GB") == {"nvl"}
    assert form_factors("GB200-NVL72") == frozenset()
    assert form_factors("H20", "HGX-H20") == frozenset()
    assert form_factors("H100-SXM", "H100-PCIe") == {"sxm", "pcie"}


def test_weak_figures_are_flagged_in_the_notes() -> None:
    cat = load_catalog()
    for ident, words in [
        ("H100-PCIe", ("secondary", "derived", "optional")),
        ("H100-NVL", ("secondary", "unverified", "derived", "Conflicts")),
        ("H20", ("secondary", "derived", "unverified")),
        ("L40S", ("secondary", "GDDR6", "No NVLink")),
    ]:
        acc = cat.lookup(ident)
        assert acc is not None
        for word in words:
            assert word in acc.notes, (ident, word)
        assert any(s.startswith("fp8_training: ") for s in acc.sources), ident
        assert any(s.startswith("usable_gib: ") for s in acc.sources), ident


def test_the_header_no_longer_says_the_variants_are_missing() -> None:
    text = (Path(__file__).resolve().parents[1] / "dpguard/data/accelerators.yaml").read_text(
        encoding="utf-8"
    )
    assert "are not in the catalog" not in text
    assert "not catalogued" not in text


def _manifest_text(example: str, accelerator: str) -> str:
    text = (EXAMPLES / example).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    out = [
        f"  accelerator: {accelerator}\n" if line.startswith("  accelerator: ") else line
        for line in lines
    ]
    assert out != lines
    return "".join(out)


@pytest.mark.parametrize("accelerator", ["L40S", "H20", "H100-PCIe", "H100 NVL"])
@pytest.mark.parametrize("example", ["small-dense.yaml", "frontier-moe.yaml"])
def test_review_runs_on_each_new_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], accelerator: str, example: str
) -> None:
    path = tmp_path / example
    path.write_text(_manifest_text(example, accelerator), encoding="utf-8")
    code = main(["review", str(path)])
    out, err = capsys.readouterr()
    assert err == ""
    assert code in (0, 1), out
    assert " X012 " not in out  # the name is known
    assert "manifest checked" in out


def test_a_part_without_nvlink_prices_intra_node_traffic_at_the_nic(tmp_path: Path) -> None:
    """The L40S has no scale-up fabric: the manifest carries domain 1 and no link speed, and
    the step-time model prices the node's GPU-to-GPU traffic at the NIC's rate (its stand-in
    for PCIe) rather than at an NVLink figure."""
    path = tmp_path / "m.yaml"
    path.write_text(_manifest_text("small-dense.yaml", "L40S"), encoding="utf-8")
    result = check_file(str(path), None, None, {})
    assert result.manifest is not None
    cluster = result.manifest.cluster
    assert (cluster.accelerator, cluster.family, cluster.fp8) == ("L40S", "ada", True)
    assert cluster.scale_up_domain == 1 and cluster.scale_up_gbytes_per_s is None
    assert cluster.usable_gib == pytest.approx(44.42)
    hw = hardware(cluster, "bf16", load())
    nic = cluster.interconnect.inter_node_gbps_per_gpu * 1e9 / 8
    assert hw.scale_up / hw.scale_out == pytest.approx(
        load()["communication"]["bus_share"]["scale_up"]
        / load()["communication"]["bus_share"]["scale_out"]
    )
    assert hw.scale_out == pytest.approx(nic * load()["communication"]["bus_share"]["scale_out"])


@pytest.mark.parametrize(
    ("accelerator", "written", "expected"),
    [
        ("H100-PCIe", None, "pcie"),  # bridged in pairs: most GPU pairs of a node meet on PCIe
        ("H100 NVL", None, "pcie"),
        ("L40S", None, "pcie"),
        ("H100-SXM", None, "nvlink"),  # NVSwitch joins the node
        ("H20", None, "nvlink"),
        ("H100-PCIe", "nvlink", "nvlink"),  # a team whose TP stays inside a pair says so
    ],
)
def test_the_node_fabric_defaults_to_pcie_where_nvlink_joins_fewer_gpus_than_the_node(
    tmp_path: Path, accelerator: str, written: str | None, expected: str
) -> None:
    text = _manifest_text("small-dense.yaml", accelerator)
    if written is not None:
        text = text.replace(
            "inter_node_gbps_per_gpu: 200",
            f"inter_node_gbps_per_gpu: 200\n    intra_node: {written}",
        )
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    result = check_file(str(path), None, None, {})
    assert result.manifest is not None, result.findings
    assert result.manifest.cluster.interconnect.intra_node == expected


def test_every_catalog_family_and_vendor_is_a_value_policies_may_test() -> None:
    """A rule written `cluster.family: ada` must lint clean: the facts' domains name every
    family and vendor the catalog has (else lint-policies rejects the value)."""
    from dpguard.policy.facts import FACTS

    catalog = load_catalog()
    entries = [catalog.lookup(name) for name in catalog.ids()]
    assert {e.family for e in entries if e} <= set(FACTS["cluster.family"].choices)
    assert {e.vendor for e in entries if e} <= set(FACTS["cluster.vendor"].choices)
