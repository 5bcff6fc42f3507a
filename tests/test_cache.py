"""The per-user cache (dpguard/cache.py) beyond policy files (tests/test_policy_cache.py): the
manifest schema's metaschema check and exact simulation timings. What it returns must be what
the work would have produced, and a missing, unwritable or corrupt cache must only cost time
(what a hostile cache cannot do: tests/test_cache_security.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard import cache, sizing, validate
from dpguard.policy.load import load_policies
from dpguard.schedules import simulate

SETTINGS = load_policies([]).settings
# Short of the steady regime (M < P): simulated at its own M, not answered by the shipped
# reference runs, so the per-user cache holds it.
SHORT = sizing.Strategy("zb1p", 1, 8, 1, 1, 1, 6)


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("DPGUARD_CACHE_DIR", str(folder))
    monkeypatch.setenv("DPGUARD_CACHE_KEY_FILE", str(tmp_path / "config" / "cache-key"))
    sizing._simulate.cache_clear()
    validate.forget()
    yield folder
    sizing._simulate.cache_clear()
    validate.forget()


def _refuse(*_: object, **__: object) -> None:
    raise AssertionError("computed again")


def test_a_remembered_simulation_is_not_run_again_and_gives_the_same_bubble(directory, monkeypatch):
    first = sizing.bubble(SHORT, SETTINGS)
    exact = simulate("zb1p", 8, 6, sizing.op_times(SETTINGS)).bubble_fraction
    assert first is not None and first.fraction == float(exact)
    assert len(list((directory / "simulations").iterdir())) == 1
    sizing._simulate.cache_clear()
    monkeypatch.setattr("dpguard.schedules.simulate", _refuse)
    assert sizing.bubble(SHORT, SETTINGS) == first


def test_a_corrupt_simulation_entry_is_simulated_again(directory):
    first = sizing.bubble(SHORT, SETTINGS)
    (entry,) = (directory / "simulations").iterdir()
    for junk in ("", "1/0 2", "not numbers", "1 2 3"):
        entry.write_text(junk, encoding="utf-8")
        sizing._simulate.cache_clear()
        assert sizing.bubble(SHORT, SETTINGS) == first


def test_without_a_usable_cache_everything_still_works(tmp_path, monkeypatch):
    monkeypatch.setenv("DPGUARD_CACHE_KEY_FILE", str(tmp_path / "config" / "cache-key"))
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    for setting in ("", str(blocker / "cache")):
        monkeypatch.setenv("DPGUARD_CACHE_DIR", setting)
        sizing._simulate.cache_clear()
        validate.forget()
        assert sizing.bubble(SHORT, SETTINGS) is not None
        assert validate._validator() is not None
    sizing._simulate.cache_clear()
    validate.forget()


def test_the_schema_is_checked_against_its_metaschema_once(directory, monkeypatch):
    """Where the shipped record does not vouch for the installed schema (an edited install)."""
    from jsonschema import Draft202012Validator

    monkeypatch.setattr(cache, "_shipped", dict)
    validate._validator()
    assert len(list((directory / "valid-schemas").iterdir())) == 1
    validate.forget()
    monkeypatch.setattr(Draft202012Validator, "check_schema", _refuse)
    assert validate._validator() is not None


SHIPPED = Path(__file__).resolve().parents[1] / "dpguard" / "data" / "shipped-checks.json"


def test_the_shipped_record_vouches_for_exactly_the_shipped_files(tmp_path):
    """dpguard/data/shipped-checks.json is what checking every shipped file proves, computed
    again here in a fresh process with no cache: a policy, schema, profile or model edited
    without it fails this test (DPGUARD_UPDATE_GOLDEN=1 rewrites it), and an installed file
    whose bytes differ from the record is simply checked again at run time."""
    import json
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from dpguard import cache; "
            "print(json.dumps(cache.shipped_record(), indent=1, sort_keys=True))",
        ],
        env={**os.environ, "DPGUARD_CACHE_DIR": ""},
        cwd=tmp_path,  # the installed dpguard, not a checkout's sources beside the cwd
        capture_output=True,
        text=True,
        check=True,
    )
    if os.environ.get("DPGUARD_UPDATE_GOLDEN"):
        SHIPPED.write_text(done.stdout, encoding="utf-8")
    record = json.loads(done.stdout)
    assert set(record) == set(cache.SHIPPED_KINDS)
    assert SHIPPED.read_text(encoding="utf-8") == done.stdout, (
        "the shipped record is stale: DPGUARD_UPDATE_GOLDEN=1 pytest tests/test_cache.py"
    )


def test_a_file_the_record_vouches_for_is_not_checked_again(monkeypatch):
    """A fresh runner (no per-user cache) trusts the shipped record, and only for the exact
    bytes it names."""
    from jsonschema import Draft202012Validator

    monkeypatch.setenv("DPGUARD_CACHE_DIR", "")
    validate.forget()
    monkeypatch.setattr(Draft202012Validator, "check_schema", _refuse)
    try:
        assert validate._validator() is not None
        assert cache.vouched("valid-schemas", b"a schema the record never saw") is False
    finally:
        validate.forget()
