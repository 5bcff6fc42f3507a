"""The per-user record of policy files that loaded without a problem (policy/load.py): later
processes skip the schema validation and the message lint for exactly those bytes (a team's own
policy files; the shipped ones are vouched for by the shipped record, tests/test_cache.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dpguard.policy import load
from dpguard.policy.load import load_policies, load_set

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "policies" / "core.yaml"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("DPGUARD_CACHE_DIR", str(directory))
    monkeypatch.setenv("DPGUARD_CACHE_KEY_FILE", str(tmp_path / "config" / "cache-key"))
    # the per-user cache as a team's own policy files meet it: without the shipped record
    # (tests/test_cache.py), which vouches for the shipped files' exact bytes
    monkeypatch.setattr("dpguard.cache._shipped", dict)
    return directory


def _markers(cache: Path) -> list[Path]:
    return sorted((cache / "validated-policies").glob("*"))


def test_a_valid_set_is_recorded_and_then_not_revalidated(cache, monkeypatch):
    policy_set, problems = load_set(str(CORE))
    assert policy_set is not None and problems == []
    assert len(_markers(cache)) == 1

    def refuse(*_: object) -> list[str]:
        raise AssertionError("validated again")

    monkeypatch.setattr(load, "_schema_problems", refuse)
    monkeypatch.setattr(load.templates, "check_message", refuse)
    again, problems = load_set(str(CORE))
    assert problems == [] and again is not None
    assert again.rules == policy_set.rules and again.digest == policy_set.digest


def test_changed_bytes_are_validated_again_and_a_broken_set_is_never_recorded(cache, tmp_path):
    load_set(str(CORE))
    broken = tmp_path / "core.yaml"
    text = CORE.read_text(encoding="utf-8")
    broken.write_text(text.replace("{{ derived.stages }}", "{{ derived.stagez }}", 1), "utf-8")
    _, problems = load_set(str(broken))
    assert any("derived.stagez" in p for p in problems)
    assert len(_markers(cache)) == 1  # only the shipped file's
    assert load_set(str(broken))[1] == problems  # and it stays reported


def test_no_cache_when_disabled_or_unwritable(tmp_path, monkeypatch):
    monkeypatch.setenv("DPGUARD_CACHE_KEY_FILE", str(tmp_path / "config" / "cache-key"))
    monkeypatch.setenv("DPGUARD_CACHE_DIR", "")
    assert load_set(str(CORE))[1] == []
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("DPGUARD_CACHE_DIR", str(blocker / "cache"))
    policies = load_policies([])
    assert len(policies.rules) > 0


def test_the_facts_messages_read_are_remembered_not_reparsed(cache, monkeypatch):
    """The facts the rules' messages read decide which costly facts are computed; once
    remembered, a later process takes them from the cache without parsing a template, and
    other messages are another key."""
    first = load_policies([]).uses
    assert "proposal.memory_remedies" in first  # only ADV004's and HR009's messages read it
    parsed: list[str] = []
    real = load.templates.referenced_facts

    def counting(source: str) -> set[str]:
        parsed.append(source)
        return real(source)

    monkeypatch.setattr(load.templates, "referenced_facts", counting)
    rules = load_policies([]).rules
    assert load._uses(rules) == first and parsed == []
    other = (*rules[:-1], dataclasses.replace(rules[-1], message="{{ model.layers }}"))
    assert "model.layers" in load._uses(other) and len(parsed) == len(rules)
