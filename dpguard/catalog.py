"""The accelerator catalog: GPU/accelerator facts the planner needs, shipped as data.

The figures live in ``dpguard/data/accelerators.yaml`` (each entry cites its sources; see
``/work/shared/docs/domain.md`` section (a)). This module is the only place that reads that file.
It validates the structure once and turns it into frozen records; a broken file is dpguard's own
bug, so it raises `ConfigError` naming the file and the entry.

Name matching (`Catalog.lookup`) ignores case and the separators ``-``, ``_`` and spaces, so
``"h100 sxm"``, ``"H100_SXM"`` and ``"H100-SXM"`` are the same name. The literal ``custom`` is not a
catalog entry: the manifest uses it for user-described hardware, so the catalog refuses it as an
id or alias. The "did you mean" of an unknown name (`Catalog.hint`) never offers a part of another
form factor: ``"H200 NVL"`` gets no ``'H200'``, the SXM part with other clocks, power and links.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from dpguard.errors import ConfigError

API_VERSION = "dpguard/v1"
KIND = "AcceleratorCatalog"

# Closed vocabularies. The family -> vendor pairing catches a mistyped vendor on an entry.
FAMILY_VENDOR: Mapping[str, str] = {
    "ampere": "nvidia",
    "ada": "nvidia",
    "hopper": "nvidia",
    "blackwell": "nvidia",
    "cdna3": "amd",
    "gaudi": "intel",
}
VENDORS = frozenset(FAMILY_VENDOR.values())
RESERVED_NAMES = frozenset({"custom"})

_REQUIRED_NUMBERS = ("memory_gb", "usable_gib", "peak_tflops_bf16")
_OPTIONAL_NUMBERS = ("hbm_tbps", "scale_up_gbytes_per_s", "typical_inter_node_gbps_per_gpu")
_REQUIRED_KEYS = frozenset(
    {
        "id",
        "vendor",
        "family",
        "scale_up_domain",
        "fp8_training",
        "sources",
        *_REQUIRED_NUMBERS,
        *_OPTIONAL_NUMBERS,
    }
)
_ALLOWED_KEYS = _REQUIRED_KEYS | {"aliases", "notes"}
_SEPARATORS = re.compile(r"[-_\s]+")
# Form-factor words in a name (a token of its own): "SXM5" and "PCIe" are other boards of the same
# chip, "NVL" the NVLink-bridged PCIe card. ("NVL72" names a rack-scale domain, not a board.)
_FORM_FACTOR = re.compile(r"(sxm|pcie)\d?|(nvl)")


@dataclass(frozen=True)
class Accelerator:
    """One accelerator model. Units: GB, dense BF16 TFLOPS, TB/s, unidirectional GB/s, Gb/s."""

    id: str
    vendor: str
    family: str
    memory_gb: float
    usable_gib: float  # what PyTorch reports as total_memory: the memory a run can use
    peak_tflops_bf16: float
    hbm_tbps: float | None
    scale_up_gbytes_per_s: float | None
    scale_up_domain: int
    typical_inter_node_gbps_per_gpu: float | None
    fp8_training: bool  # FP8 GEMMs in training (Transformer Engine or the vendor's equivalent)
    aliases: tuple[str, ...]
    sources: tuple[str, ...]
    notes: str


def normalize_name(name: str) -> str:
    """The form names are compared in: lower case, without '-', '_' or whitespace."""
    return _SEPARATORS.sub("", name).lower()


def form_factors(*names: str) -> frozenset[str]:
    """The form-factor words of `names`: "H100 PCIe" -> {'pcie'}, "A100-SXM4-80GB" -> {'sxm'},
    "GB200-NVL72" and "H20" -> {}."""
    found: set[str] = set()
    for name in names:
        for token in _SEPARATORS.split(name.lower()):
            match = _FORM_FACTOR.fullmatch(token)
            if match:
                found.add(match.group(1) or match.group(2))
    return frozenset(found)


@dataclass(frozen=True)
class Catalog:
    """All known accelerators, in file order."""

    accelerators: tuple[Accelerator, ...]

    def lookup(self, name: str) -> Accelerator | None:
        """The entry whose id or alias matches `name` (case- and separator-insensitive)."""
        key = normalize_name(name)
        for acc in self.accelerators:
            if key == normalize_name(acc.id) or any(key == normalize_name(a) for a in acc.aliases):
                return acc
        return None

    def canonical(self, name: str) -> str | None:
        """What a manifest naming `name` carries in cluster.accelerator: the catalog id, or
        `custom`; None for a name the catalog does not know."""
        if name.lower() == "custom":
            return "custom"
        entry = self.lookup(name)
        return entry.id if entry else None

    def ids(self) -> tuple[str, ...]:
        """Sorted ids, for listings and "did you mean" suggestions."""
        return tuple(sorted(acc.id for acc in self.accelerators))

    def hint(self, name: str) -> str:
        """The "did you mean" suffix for an unknown accelerator name: the same chip only, and
        not a part of another form factor. A name that says PCIe, NVL or SXM is offered only
        entries whose names say the same or no form factor at all: "A100-PCIe-80GB" gets no
        'A100-80GB' (the SXM4 part) and "H200 NVL" no 'H200' (SXM), whose clocks, power and
        links differ, so taking the suggestion would plan for different hardware."""
        from dpguard.hints import accelerator_hint

        wanted = form_factors(name)
        entries = []
        for acc in self.accelerators:
            have = form_factors(acc.id, *acc.aliases)
            if not wanted or not have or wanted & have:
                entries.append((acc.id, acc.aliases))
        return accelerator_hint(name, entries)


def _fail(source: str, where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}", source)


def _is_number(value: object) -> bool:
    # bool is an int subclass; `true` in YAML must not pass as 1 GB.
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _str_list(value: object, source: str, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(s, str) and s.strip() for s in value):
        raise _fail(source, where, f"{key} must be a list of non-empty strings")
    return tuple(value)


def _parse_entry(entry: object, source: str, index: int) -> Accelerator:
    where = f"accelerators[{index}]"
    if not isinstance(entry, dict):
        raise _fail(source, where, "each accelerator must be a mapping")
    ident = entry.get("id")
    if not isinstance(ident, str) or not ident.strip():
        raise _fail(source, where, "id must be a non-empty string")
    where = f"{where} (id {ident!r})"
    missing = sorted(_REQUIRED_KEYS - entry.keys())
    if missing:
        raise _fail(source, where, f"missing required keys: {', '.join(missing)}")
    unknown = sorted(str(k) for k in entry.keys() - _ALLOWED_KEYS)
    if unknown:
        raise _fail(source, where, f"unknown keys: {', '.join(unknown)}")

    family, vendor = entry["family"], entry["vendor"]
    if family not in FAMILY_VENDOR:
        raise _fail(source, where, f"family must be one of {sorted(FAMILY_VENDOR)}, got {family!r}")
    if vendor not in VENDORS:
        raise _fail(source, where, f"vendor must be one of {sorted(VENDORS)}, got {vendor!r}")
    if FAMILY_VENDOR[family] != vendor:
        raise _fail(source, where, f"family {family!r} is made by {FAMILY_VENDOR[family]!r}")

    for key in _REQUIRED_NUMBERS:
        if not _is_number(entry[key]) or entry[key] <= 0:
            raise _fail(source, where, f"{key} must be a positive number, got {entry[key]!r}")
    for key in _OPTIONAL_NUMBERS:
        value = entry[key]
        if value is not None and (not _is_number(value) or value <= 0):
            raise _fail(source, where, f"{key} must be a positive number or null, got {value!r}")
    if entry["usable_gib"] > entry["memory_gb"]:
        raise _fail(source, where, "usable_gib cannot exceed memory_gb")
    domain = entry["scale_up_domain"]
    if not isinstance(domain, int) or isinstance(domain, bool) or domain < 1:
        raise _fail(source, where, f"scale_up_domain must be a positive integer, got {domain!r}")

    if not isinstance(entry["fp8_training"], bool):
        raise _fail(source, where, "fp8_training must be true or false")
    sources = _str_list(entry["sources"], source, where, "sources")
    if not sources:
        raise _fail(source, where, "sources must cite at least one source")
    aliases = _str_list(entry.get("aliases", []), source, where, "aliases")
    notes = entry.get("notes", "")
    if not isinstance(notes, str):
        raise _fail(source, where, "notes must be a string")

    def opt(key: str) -> float | None:
        return None if entry[key] is None else float(entry[key])

    return Accelerator(
        id=ident,
        vendor=vendor,
        family=family,
        memory_gb=float(entry["memory_gb"]),
        usable_gib=float(entry["usable_gib"]),
        peak_tflops_bf16=float(entry["peak_tflops_bf16"]),
        hbm_tbps=opt("hbm_tbps"),
        scale_up_gbytes_per_s=opt("scale_up_gbytes_per_s"),
        scale_up_domain=domain,
        typical_inter_node_gbps_per_gpu=opt("typical_inter_node_gbps_per_gpu"),
        fp8_training=entry["fp8_training"],
        aliases=aliases,
        sources=sources,
        notes=notes.strip(),
    )


def parse_catalog(data: object, source: str) -> Catalog:
    """Validate already-parsed YAML `data` and build the catalog.

    `source` names the file in error messages. Checks: the header, required keys and types,
    positive numbers, closed vocabularies, and that no name (id or alias, after normalisation)
    is used twice anywhere in the catalog or is the reserved ``custom``.
    """
    if not isinstance(data, dict):
        raise ConfigError("the catalog must be a mapping at the top level", source)
    if data.get("apiVersion") != API_VERSION:
        raise ConfigError(f"apiVersion must be {API_VERSION!r}", source)
    if data.get("kind") != KIND:
        raise ConfigError(f"kind must be {KIND!r}", source)
    entries = data.get("accelerators")
    if not isinstance(entries, list) or not entries:
        raise ConfigError("accelerators must be a non-empty list", source)

    accelerators = tuple(_parse_entry(entry, source, i) for i, entry in enumerate(entries))
    # normalised name -> (index, id) of the entry that claimed it first
    owner: dict[str, tuple[int, str]] = {}
    for i, acc in enumerate(accelerators):
        where = f"accelerators[{i}] (id {acc.id!r})"
        for name in (acc.id, *acc.aliases):
            key = normalize_name(name)
            if key in RESERVED_NAMES:
                raise _fail(source, where, f"{name!r} is reserved for manifest-described hardware")
            if key in owner:
                j, other = owner[key]
                what = "repeats its own id or alias" if j == i else f"clashes with {other!r}"
                raise _fail(source, where, f"name {name!r} {what} (accelerators[{j}])")
            owner[key] = (i, acc.id)
    return Catalog(accelerators)


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped inside the package (read and validated once per process)."""
    from dpguard.resources import read_text
    from dpguard.yamlsource import YamlLoadError, load_text

    source = "dpguard/data/accelerators.yaml"
    try:
        doc = load_text(read_text("dpguard", "data/accelerators.yaml"), source)
    except YamlLoadError as exc:
        where = f"{source}:{exc.position.line}:{exc.position.col}"
        raise ConfigError(f"invalid YAML: {exc.message}", where) from None
    return parse_catalog(doc.data, source)
