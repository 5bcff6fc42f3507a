"""dpguard/data/reference-runs.json: the exact simulations a fresh process would otherwise run
first, shipped in the wheel (sizing.shipped_runs). It must hold exactly the reference run of
every schedule at P = 2..64 (interleaving depths 2..8) at the shipped op-time ratios, each what
the simulator gives; DPGUARD_UPDATE_GOLDEN=1 rewrites it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dpguard import sizing
from dpguard.policy.load import load_policies
from dpguard.schedules import SCHEDULES, simulate

TABLE = Path(sizing.__file__).resolve().parent / sizing.REFERENCE_RUNS
SETTINGS = load_policies([]).settings
TIMES = sizing.op_times(SETTINGS)


def _grid() -> dict[str, tuple[str, int, int, int]]:
    """Every reference run the planner and review can ask for at the shipped ratios: the
    steady-regime M of a run far beyond it, for each schedule, P and V (within the limit)."""
    runs = {}
    for name, spec in SCHEDULES.items():
        for v in range(2, 9) if spec.uses_virtual_stages else (1,):
            for p in range(2, 65):
                at = sizing._simulated_at(sizing.Strategy(name, 1, p, 1, 1, v, 10**9))
                if at is not None:
                    runs[f"{name} {p} {at} {v}"] = (name, p, at, v)
    return runs


def _text(name: str, p: int, m: int, v: int) -> str:
    r = simulate(name, p, m, TIMES, virtual_stages=v)
    values = (r.makespan, r.bubble_fraction, *r.busy_per_rank, *r.idle_per_rank)
    return " ".join(map(str, values))


@pytest.fixture(scope="module")
def table() -> dict:
    if os.environ.get("DPGUARD_UPDATE_GOLDEN"):
        runs = {key: _text(*run) for key, run in sorted(_grid().items())}
        data = {"op_times": sizing._times_key(TIMES), "runs": runs}
        TABLE.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    return json.loads(TABLE.read_text(encoding="utf-8"))


def test_the_table_holds_every_reference_run_at_the_shipped_ratios(table):
    assert table["op_times"] == sizing._times_key(TIMES), "DPGUARD_UPDATE_GOLDEN=1 rewrites it"
    assert set(table["runs"]) == set(_grid())
    assert len(table["runs"]) > 600


def test_every_run_is_what_the_simulator_gives(table):
    """All of them, simulated again (about 10 s): a change to a schedule's step order that
    leaves the table stale fails here, never in a review."""
    stale = [key for key, run in _grid().items() if table["runs"][key] != _text(*run)]
    assert not stale, f"{len(stale)} stale, e.g. {stale[:3]}: DPGUARD_UPDATE_GOLDEN=1 rewrites it"


def test_a_fresh_process_simulates_nothing_the_table_holds(monkeypatch):
    """A run in the steady regime at the shipped ratios is answered from the table: the
    simulator is never called, and the answer is the simulation's."""
    sizing._simulate.cache_clear()
    s = sizing.Strategy("dualpipev", 1, 16, 1, 1, 1, 96)
    expected = sizing.bubble(s, SETTINGS)
    sizing._simulate.cache_clear()
    monkeypatch.setattr(sizing, "simulate", None)  # any call would raise
    try:
        assert sizing.bubble(s, SETTINGS) == expected
    finally:
        sizing._simulate.cache_clear()


def test_a_team_s_own_ratios_never_read_the_table():
    other = sizing.op_times({"op_time_ratios": {"backward": 1.5, "weight": 0.5, "overlapped": 2}})
    assert sizing.shipped_runs(other) == {}
    assert sizing.shipped_runs(TIMES)
