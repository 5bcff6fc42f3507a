"""The step-time model against published throughput (tests/data/perf/manifests: one manifest per
measured configuration that the schema can express, written by tests/data/perf/generate.py from
../shared/data/throughput-calibration.yaml; each file's header says what it assumes).

Each manifest carries its measurement in `metadata.labels`: `measured-tokens-per-s-per-gpu`
(and `-high` where the source's FLOP definition leaves a range), `calibration-entry`, and
`calibration-sweep` for configurations measured side by side. The bar (the issue's): mean
absolute error on tokens/s per GPU <= 10 %, no case worse than 25 % but the misses listed here
with their reason (the test fails when that list stops being exactly the set of misses), and in
every sweep the measured-fastest configuration within 5 % of the predicted fastest and every
pair measured >= 10 % apart ordered as measured. docs/performance.md prints the table these
tests check; DPGUARD_UPDATE_GOLDEN=1 rewrites it.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import NamedTuple

from dpguard import sizing
from dpguard.check import check_file
from dpguard.perf import Prediction, layout_of, predict
from dpguard.perf.data import load

DATA = Path(__file__).parent / "data" / "perf"
FILES = sorted((DATA / "manifests").glob("*.yaml"))
DOC = Path(__file__).parent.parent / "docs" / "performance.md"
BEGIN, END = "<!-- calibration table: begin -->", "<!-- calibration table: end -->"
UPDATE = os.environ.get("DPGUARD_UPDATE_GOLDEN") == "1"

# Cases the model misses by more than 25 %, each with what it does not model.
KNOWN_MISSES = {
    "narayanan-t2-529p6b-zero3-2240": "DeepSpeed ZeRO-3 as released in 2021 at 2,240-way "
    "sharding runs at a third of PTD-P; the model prices its ring collectives, one per "
    "parameter tensor (latency and bytes), but not its per-fetch host work. The 174.6B rows, "
    "as many collectives with fewer bytes each, are within 15 %",
    "narayanan-t2-529p6b-zero3-640": "as above, 640-way sharding with 4 sequences per micro-batch",
    "torchtitan-405b-1f1b": "measured on 96 GB HBM2e H100s at a 500 W power limit, priced as the "
    "catalog's H100 SXM: the same benchmark's 8B FSDP rows read 46-50 % below that part's "
    "prediction, these 36-44 %; kept for the sweep's ranking (docs/performance.md)",
    "torchtitan-405b-interleaved-1f1b": "as above, the interleaved row of the same pair",
}

# Sweeps whose measured-fastest configuration the model does not rank within 5 % of its fastest.
KNOWN_MISRANKED = {
    "narayanan21-t2-174p6b-384": "ZeRO-3 (DeepSpeed 2021) predicted 5 % faster than PTD-P at "
    "384 GPUs where it measured 6 % slower: the same unmodelled ZeRO-3 overhead as the misses",
}


class Case(NamedTuple):
    name: str
    entry: str
    sweep: str | None
    measured: float
    measured_high: float
    prediction: Prediction

    @property
    def error(self) -> float:
        """Relative error of the prediction against the measurement (0 inside its range)."""
        p = self.prediction.tokens_per_s_per_gpu
        if p < self.measured:
            return p / self.measured - 1
        return max(p / self.measured_high - 1, 0.0)


@cache
def cases() -> tuple[Case, ...]:
    out = []
    for path in FILES:
        result = check_file(str(path), None, None, {})
        m = result.manifest
        assert m is not None, [f.format() for f in result.findings]
        assert m.parallelism is not None
        s = sizing.proposal(m, m.parallelism.schedule or "none")
        assert s is not None, path.name
        labels = m.labels
        measured = float(labels["measured-tokens-per-s-per-gpu"])
        out.append(
            Case(
                path.stem,
                labels["calibration-entry"],
                labels.get("calibration-sweep"),
                measured,
                float(labels.get("measured-tokens-per-s-per-gpu-high", measured)),
                predict(m, layout_of(m, s, m.training.micro_batch_size)),
            )
        )
    return tuple(out)


def test_the_manifests_are_the_generators(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("perf_generate", DATA / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    generate.write(tmp_path)
    written = {p.name: p.read_bytes() for p in tmp_path.glob("*.yaml")}
    assert written == {p.name: p.read_bytes() for p in FILES}, "rerun tests/data/perf/generate.py"


def test_the_corpus_covers_every_family() -> None:
    entries = {c.entry.split("-")[0] for c in cases()}
    assert {"mlm", "narayanan21", "korthikanti22", "llama3", "deepseek", "nemo2407", "zb"} <= (
        entries
    )
    assert {"torchtitan", "automodel", "mosaic"} <= entries
    assert len(cases()) >= 90


def test_mean_error_is_at_most_10_percent() -> None:
    mae = statistics.mean(abs(c.error) for c in cases())
    assert mae <= 0.10, f"mean absolute error {mae:.1%}"


def test_no_case_is_off_by_more_than_25_percent_but_the_known_misses() -> None:
    misses = {c.name for c in cases() if abs(c.error) > 0.25}
    assert misses == set(KNOWN_MISSES)


def test_every_sweep_ranks_as_measured() -> None:
    groups: dict[str, list[Case]] = defaultdict(list)
    for c in cases():
        if c.sweep:
            groups[c.sweep].append(c)
    assert len(groups) >= 20
    misranked = set()
    for sweep, members in groups.items():
        fastest = max(members, key=lambda c: c.measured)
        predicted = max(c.prediction.tokens_per_s_per_gpu for c in members)
        if fastest.prediction.tokens_per_s_per_gpu < 0.95 * predicted:
            misranked.add(sweep)
        for a in members:
            for b in members:
                if a.measured >= 1.10 * b.measured:
                    assert a.prediction.tokens_per_s_per_gpu > b.prediction.tokens_per_s_per_gpu, (
                        f"{sweep}: {a.name} measured faster than {b.name}"
                    )
    assert misranked == set(KNOWN_MISRANKED)


def test_the_band_covers_nine_in_ten_measurements() -> None:
    """The band (policies/performance/model.yaml `band`) is the calibration error, not a
    guess: it holds at least 90 % of the measurements, and it is no wider than needed (a
    band 5 points narrower on either side would hold fewer than 90 %)."""
    band = load()["band"]
    low, high = float(band["low"]), float(band["high"])

    def held(lo: float, hi: float) -> float:
        # tokens/s measured inside [pred (1 + lo), pred (1 + hi)] <=> error in [-hi/(1+hi), ...]
        inside = [
            c.prediction.tokens_per_s_per_gpu * (1 + lo) <= c.measured_high
            and c.measured <= c.prediction.tokens_per_s_per_gpu * (1 + hi)
            for c in cases()
        ]
        return sum(inside) / len(inside)

    assert held(low, high) >= 0.90
    assert held(low + 0.05, high) < 0.90 or low >= -0.05
    assert held(low, high - 0.05) < 0.90 or high <= 0.05


def table() -> str:
    rows = [
        "| case | source entry | measured tokens/s/GPU | predicted | error | MFU | bubble |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for c in cases():
        p = c.prediction
        measured = f"{c.measured:,.4g}"
        if c.measured_high != c.measured:
            measured += f"-{c.measured_high:,.4g}"
        miss = " (known miss)" if c.name in KNOWN_MISSES else ""
        rows.append(
            f"| {c.name} | {c.entry} | {measured} | {p.tokens_per_s_per_gpu:,.4g} | "
            f"{c.error:+.1%}{miss} | {p.mfu:.1%} | {p.bubble:.1%} |"
        )
    errors = [abs(c.error) for c in cases()]
    rows += [
        "",
        f"{len(errors)} cases: mean absolute error {statistics.mean(errors):.1%}, median "
        f"{statistics.median(errors):.1%}, {sum(e <= 0.10 for e in errors)} within 10 %, "
        f"{sum(e > 0.25 for e in errors)} beyond 25 %.",
    ]
    return "\n".join(rows)


def test_the_documented_table_is_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    current = f"{head}{BEGIN}\n{table()}\n{END}{tail}"
    if UPDATE:
        DOC.write_text(current, encoding="utf-8")
        text = current
    assert text == current, "DPGUARD_UPDATE_GOLDEN=1 pytest tests/test_perf_calibration.py"
