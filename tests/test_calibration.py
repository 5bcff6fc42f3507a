"""The memory model against published runs (tests/data/calibration, one manifest per entry of
/work/shared/data/memory-calibration.yaml that the schema can express, plus published runs
beyond the file that check the model generalises, each saying so; the header of each file
cites its source and says what is reported, inferred or assumed).

Each manifest carries its expectation in `metadata.labels`: `calibration: known-good` must get
no error but the policy rejects `expected-errors` names (a schedule benchmark of a model that
fits one GPU is what HR004 exists for; its memory is what is replayed); `known-bad` must get
HR009 or ADV004; `measured-gib` (with `measured-as`) must lie
inside the estimate's band and within 15 % of the central estimate. docs/memory.md prints the
table these tests check; the runs it misses are listed here with the reason, and the test fails
when that list stops being exactly the set of misses (a fix or a regression both show).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpguard import sizing
from dpguard.check import check_file
from dpguard.findings import Severity
from dpguard.policy.load import load_policies

CALIBRATION = Path(__file__).parent / "data" / "calibration"
FILES = sorted(CALIBRATION.glob("*.yaml"))

# Measured runs the model misses (central outside +-15 %, or the measurement outside the band).
KNOWN_MISSES = {
    # -16 %: the 4D table's CP 8 row at 262,144 tokens reads 9.6 GiB above its CP 1 sibling
    # (same tokens per GPU and micro-batch, which the model prices alike): what ring attention
    # at that length adds is not modelled.
    "torchtitan-llama31-405b-4d-cp8": "context-parallel attention at 262k tokens not modelled",
    # -16 %: BLOOM's fp16 rows (DeepSpeed 0.6, ZeRO-1) read 3-16 % low (median -10 %) with
    # NCCL's buffers counted at the shipped 0.43 GiB per communicator; the rest is not traced
    # to an allocation in DeepSpeed's stage_1_and_2.py (the 2022 NCCL, connecting every
    # protocol on up to 32 NVLink channels, is within the communicators' band).
    "bigscience-fp16-181b-dp8-tp8-pp6-mbs4": "fp16 ZeRO-1 under DeepSpeed 0.6: 16 % low",
}

# Known-bad runs the model does not flag. BLOOM's 206B test (seven 14336-wide layers per stage
# where the 176B run at 59 GB had six) ran out of memory where the model, 1-9 % short on every
# measured sibling, prices 64.7 GiB (band 49.5-82.7) of 75.2: one more layer per stage adds
# states of 5.4 GiB and activations of about 1 GiB, so no sibling's error reaches 80 GB.
UNFLAGGED_OOMS = {"bigscience-206b-dp8-tp4-pp12-mbs2": "OOM not explained by the siblings"}


@pytest.fixture(scope="module")
def policies():
    return load_policies([])


def _judge(path: Path, policies):
    result = check_file(str(path), None, policies)
    assert result.manifest is not None, [f.format() for f in result.findings]
    return result


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_known_good_runs_get_no_error_and_known_bad_runs_are_flagged(path, policies):
    result = _judge(path, policies)
    status = result.manifest.source.data["metadata"]["labels"]["calibration"]
    labels = result.manifest.source.data["metadata"]["labels"]
    expected = set(labels.get("expected-errors", "").split())
    errors = [f.format() for f in result.findings if f.severity is Severity.ERROR]
    memory = {f.code for f in result.findings if f.code in ("HR009", "ADV004")}
    if status == "known-good":
        assert "HR009" not in expected  # a known-good run's memory verdict is never excused
        assert {f.code for f in result.findings if f.severity is Severity.ERROR} == expected, errors
    else:
        assert status == "known-bad"
        flagged = bool(memory)
        assert flagged != (path.stem in UNFLAGGED_OOMS), result.outcome.facts[
            "proposal.memory_verdict"
        ]


# What each kind of reading sees: nvidia-smi the whole GPU; PyTorch's counters (max allocated,
# max reserved) and the tables papers print from them leave out NCCL's buffers, which the
# central estimate (what the GPU holds, what an out-of-memory depends on) counts.
SEES_COMMUNICATORS = {"nvidia-smi"}


def _comparable(result, policies) -> tuple[float, float, float]:
    """The estimate's central, low and high GiB as the run's reading sees them."""
    facts, labels = result.outcome.facts, result.manifest.source.data["metadata"]["labels"]
    central = facts["proposal.stage_memory_gb"]
    low, high = facts["proposal.memory_low_gb"], facts["proposal.memory_high_gb"]
    if labels.get("measured-as") in SEES_COMMUNICATORS:
        return central, low, high
    m, settings = result.manifest, policies.settings
    strategy = sizing.proposal(m, facts["proposal.memory_schedule"])
    estimate = sizing.stage_memory(m, strategy, settings, span=True, every_rank=False)
    comms = estimate.worst.communicators / sizing.GIB
    c_lo, c_hi = sizing.uncertainty(settings).communicators
    return central - comms, low - comms * (1 - c_lo), high - comms * (1 + c_hi)


def _measured_rows(policies):
    for path in FILES:
        result = _judge(path, policies)
        labels = result.manifest.source.data["metadata"]["labels"]
        if "measured-gib" in labels:
            yield (path.stem, float(labels["measured-gib"]), *_comparable(result, policies))


def test_measured_peaks_are_within_15_percent_and_inside_the_band(policies):
    rows = list(_measured_rows(policies))
    assert len(rows) >= 10
    misses = {
        name
        for name, measured, central, low, high in rows
        if not (abs(central / measured - 1) <= 0.15 and low <= measured <= high)
    }
    assert misses == set(KNOWN_MISSES)


# Megatron-LM theoretical_memory_usage.py (commit d98e8a64) for the Korthikanti et al. runs,
# from /work/shared/data/memory-calibration.yaml `megatron_formula_gib`: (weights + optimizer,
# activations as coded, SP + selective) of the first pipeline stage.
MEGATRON = {
    "korthikanti22-22b": (46.2, 9.8),
    "korthikanti22-175b": (46.9, 12.4),
    "korthikanti22-530b": (33.8, 23.3),
    "korthikanti22-1t": (35.7, 27.0),
}


@pytest.mark.parametrize("name", sorted(MEGATRON))
def test_dense_gpt_states_and_activations_agree_with_megatron_within_5_percent(name, policies):
    """Same assumptions as Megatron's formula (GeLU 4h block with dropout, SP + selective, 18 B
    per parameter, no data parallelism): rank 0's states and activations (plus the fp32 logits
    Megatron adds when P = 1) within 5 %. Megatron's count is the whole model's L layers on
    stage 0, which 1F1B's P micro-batches of L/P layers reproduce; interleaving multiplies by
    1 + (P - 1)/(P v) in both."""
    result = _judge(CALIBRATION / f"{name}.yaml", policies)
    m, p = result.manifest, result.manifest.parallelism
    strategy = sizing.Strategy(
        p.schedule or "none", p.tensor, p.pipeline, 1, 1, p.virtual_stages, m.microbatches
    )
    rank0 = sizing.stage_memory(m, strategy, policies.settings).ranks[0]
    runtime = float(policies.settings["memory_uncertainty"]["runtime_overhead_gib"]) * sizing.GIB
    logits = rank0.other - runtime - rank0.communicators if p.pipeline == 1 else 0.0
    states_ref, activations_ref = MEGATRON[name]
    states = (rank0.weights + rank0.gradients + rank0.optimizer) / sizing.GIB
    assert states == pytest.approx(states_ref, rel=0.05)
    assert (rank0.activations + logits) / sizing.GIB == pytest.approx(activations_ref, rel=0.05)


DOCS = Path(__file__).parent.parent / "docs" / "memory.md"
TABLE_HEAD = "| run | expected | verdict | estimate GiB | band GiB | measured GiB | error |"


def _table(policies) -> str:
    lines = [TABLE_HEAD, "|---|---|---|---|---|---|---|"]
    for path in FILES:
        result = _judge(path, policies)
        labels = result.manifest.source.data["metadata"]["labels"]
        facts = result.outcome.facts
        central = facts["proposal.stage_memory_gb"]
        low, high = facts["proposal.memory_low_gb"], facts["proposal.memory_high_gb"]
        measured = error = ""
        if "measured-gib" in labels:
            measured = f"{labels['measured-gib']} ({labels['measured-as']})"
            seen = _comparable(result, policies)[0]
            error = f"{(seen / float(labels['measured-gib']) - 1) * 100:+.0f} %"
        lines.append(
            f"| {path.stem} | {labels['calibration']} | {facts['proposal.memory_verdict']} | "
            f"{central:.1f} | {low:.1f}-{high:.1f} | {measured} | {error} |"
        )
    return "\n".join(lines) + "\n"


def test_the_docs_calibration_table_is_what_the_model_computes(policies):
    """docs/memory.md prints one row per calibration manifest with the current model's verdict,
    estimate, band and error. DPGUARD_UPDATE_GOLDEN=1 rewrites it after a model change."""
    doc = DOCS.read_text(encoding="utf-8")
    start = doc.index(TABLE_HEAD)
    end = doc.index("\n\n", start) + 1
    table = _table(policies)
    if os.environ.get("DPGUARD_UPDATE_GOLDEN"):
        DOCS.write_text(doc[:start] + table + doc[end:], encoding="utf-8")
        doc = DOCS.read_text(encoding="utf-8")
    assert doc[start:end] == table
