"""What someone who can write dpguard's per-user cache directory (a shared CI runner, a CI cache
restored from a pull request) cannot do (dpguard/cache.py): make a broken policy file pass,
change a printed bubble, hang a review, or get dpguard to trust a key others can read. And what
the cache must still do: an entry written by one process is used by the next."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dpguard import cache, sizing, validate
from dpguard.policy import load
from dpguard.policy.load import load_policies, load_set

REPO = Path(__file__).resolve().parents[1]
SMALL = str(REPO / "examples" / "small-dense.yaml")
SETTINGS = load_policies([]).settings
# Short of the steady regime (M < P): simulated at its own M, not answered by the shipped
# reference runs, so the per-user cache holds it.
SHORT = sizing.Strategy("zb1p", 1, 8, 1, 1, 1, 6)

# A team's own op-time ratios: its simulations are not among the reference runs the wheel
# ships (sizing.shipped_runs), so a review with it writes them to the per-user cache.
TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team, version: 1.0.0}
settings:
  op_time_ratios: {backward: 2.0, weight: 1.0, overlapped: 2.5}
rules:
  - id: TEAM001
    kind: advise
    title: t
    when: {fact: cluster.gpus, gt: 1}
    message: '{{ derived.stages }} stages'
    docs: d
"""


@dataclass
class Setup:
    cache: Path
    key: Path
    env: dict[str, str]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    folder, key = tmp_path / "cache", tmp_path / "config" / "dpguard" / "cache-key"
    monkeypatch.setenv("DPGUARD_CACHE_DIR", str(folder))
    monkeypatch.setenv("DPGUARD_CACHE_KEY_FILE", str(key))
    sizing._simulate.cache_clear()
    validate.forget()
    yield Setup(folder, key, {**os.environ})
    sizing._simulate.cache_clear()
    validate.forget()


def _files(folder: Path, kind: str) -> list[Path]:
    return sorted(p for p in (folder / kind).iterdir() if not p.name.endswith(".tmp"))


def _split(entry: Path) -> tuple[bytes, bytes]:
    header, _, body = entry.read_bytes().partition(b"\n")
    return header, body


def _signed(entry: Path, kind: str, body: bytes, secret: bytes) -> bytes:
    return cache.MAGIC + b" " + cache._mac(secret, kind, entry.name, body) + b"\n" + body


def _dpguard(setup: Setup, *args: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """`dpguard ARGS` in a fresh process with this cache, after `code` (to refuse work). The
    timeout is what fails a hang here, not a measure of speed."""
    script = f"import sys\n{code}\nfrom dpguard.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env=setup.env,
        cwd=setup.cache.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---- Planted markers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (("{{ derived.stages }}", "{{ derived.stagez }}"), "unknown fact 'derived.stagez'"),
        (("kind: advise", "kind: advize"), "rules[0].kind is 'advize'"),
    ],
    ids=["message", "schema"],
)
def test_no_planted_marker_makes_a_broken_policy_file_pass(setup, tmp_path, edit, problem):
    good, broken = tmp_path / "good.yaml", tmp_path / "broken.yaml"
    good.write_text(TEAM, encoding="utf-8")
    broken.write_text(TEAM.replace(*edit), encoding="utf-8")
    assert load_set(str(good))[1] == []
    (genuine,) = _files(setup.cache, "validated-policies")
    assert cache.vouched(*load._validated_key(good.read_bytes()))  # markers do work
    target = cache.marker(*load._validated_key(broken.read_bytes()))
    assert target is not None and target.parent == genuine.parent
    stranger = os.urandom(cache.KEY_BYTES)
    planted = {
        "empty, as the old scheme's marker": b"",
        "no tag": b"0" * 64 + b"\n",
        "a made-up tag": cache.MAGIC + b" " + b"0" * 64 + b"\n",
        "signed with another key": _signed(target, "validated-policies", b"", stranger),
        "the good file's marker, copied": genuine.read_bytes(),
    }
    for name, data in planted.items():
        target.write_bytes(data)
        _, problems = load_set(str(broken))
        assert any(problem in p for p in problems), name
    target.unlink()
    for name, plant in {
        "a symlink to the good file's marker": lambda: target.symlink_to(genuine),
        "a folder": target.mkdir,
    }.items():
        plant()
        _, problems = load_set(str(broken))
        assert any(problem in p for p in problems), name
        target.unlink() if target.is_symlink() else target.rmdir()


def test_a_marker_is_an_authenticated_entry(setup):
    cache.vouch("valid-schemas", b"schema")
    (entry,) = _files(setup.cache, "valid-schemas")
    header, body = _split(entry)
    assert header.startswith(cache.MAGIC + b" ") and body == b""
    assert cache.vouched("valid-schemas", b"schema")
    assert not cache.vouched("valid-schemas", b"another schema")
    entry.write_bytes(b"")
    assert not cache.vouched("valid-schemas", b"schema")


def test_an_entry_moved_to_another_name_or_kind_is_not_taken(setup):
    cache.remember("simulations", "one", b"a")
    cache.remember("simulations", "two", b"b")
    first = cache.marker("simulations", b"a")
    second = cache.marker("simulations", b"b")
    assert first is not None and second is not None
    second.write_bytes(first.read_bytes())
    assert cache.recall("simulations", b"b") is None
    elsewhere = cache.marker("message-facts", b"a")
    assert elsewhere is not None
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(first.read_bytes())
    assert cache.recall("message-facts", b"a") is None
    assert cache.recall("simulations", b"a") == "one"


# ---- Edited simulations -----------------------------------------------------------------------


def _forged(body: bytes) -> bytes:
    """A timing as consistent as a real one but another bubble: makespan 2, every rank busy
    half of it, a bubble of 50 %."""
    ranks = (len(body.split()) - 2) // 2
    return " ".join(["2", "1/2", *["1"] * (2 * ranks)]).encode()


def test_an_edited_simulation_entry_is_ignored_and_the_printed_bubble_stays(setup, tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    first = _dpguard(setup, "review", SMALL, "--policy", str(team))
    assert first.returncode == 0, first.stderr
    assert "bubble 3.03%" in first.stdout
    entries = _files(setup.cache, "simulations")
    assert entries
    genuine = {entry: entry.read_bytes() for entry in entries}
    for entry in entries:
        tag, newline, body = entry.read_bytes().rpartition(b"\n")
        entry.write_bytes(tag + newline + _forged(body))  # the tag kept, the numbers changed
    again = _dpguard(setup, "review", SMALL, "--policy", str(team))
    assert again.returncode == 0 and again.stdout == first.stdout
    assert {entry: entry.read_bytes() for entry in entries} == genuine  # written again


def test_a_signed_but_impossible_timing_is_simulated_again(setup):
    """The second defence, for a key that leaked: the entry must still be a timing a
    simulation could produce."""
    exact = sizing.bubble(SHORT, SETTINGS)
    assert exact is not None
    (entry,) = _files(setup.cache, "simulations")
    _, body = _split(entry)
    secret = setup.key.read_bytes()
    makespan, fraction, *rest = body.decode().split()
    nonsense = {
        "another fraction": " ".join([makespan, "1/2", *rest]),
        "a huge exponent": " ".join([makespan, "1e999999999", *rest]),
        "a negative time": " ".join(["-" + makespan, fraction, *rest]),
        "a number too long": " ".join(["9" * 5000, fraction, *rest]),
        "a rank too many": " ".join([body.decode(), "1", "1"]),
        "a huge list": body.decode() + " 1" * 1_000_000,
    }
    for name, text in nonsense.items():
        entry.write_bytes(_signed(entry, "simulations", text.encode(), secret))
        sizing._simulate.cache_clear()
        assert sizing.bubble(SHORT, SETTINGS) == exact, name
        assert _split(entry)[1] == body, name  # simulated and written again


def test_a_remembered_timing_is_checked_before_use():
    """sizing._remembered_timing takes only what a simulation could have written."""
    from fractions import Fraction

    timing = sizing._remembered_timing("4 1/4 3 3 1 1", 2)
    assert timing == sizing.Timing(
        Fraction(4), (Fraction(3),) * 2, (Fraction(1),) * 2, Fraction(1, 4)
    )
    for text in (
        "4 1/2 3 3 1 1",  # the fraction is not the idle share
        "4 1/4 3 2 1 1",  # busy + idle is not the makespan
        "4 1/4 3 3 1 1 1 1",  # more ranks than asked
        "0 0 0 0 0 0",  # no makespan
        "4e0 1/4 3 3 1 1",  # an exponent
        "4 1/0 3 3 1 1",
        "4 1/4 3 3 1 -1",
        "",
    ):
        assert sizing._remembered_timing(text, 2) is None, text


def test_a_deeply_nested_remembered_json_is_built_again(setup):
    built: list[int] = []

    def build() -> dict[str, int]:
        built.append(1)
        return {"a": 1}

    cache.remember("performance", "[" * 200_000 + "]" * 200_000, b"model")
    assert cache.remembered_json("performance", (b"model",), build, dict) == {"a": 1}
    assert built == [1]
    assert cache.remembered_json("performance", (b"model",), build, dict) == {"a": 1}
    assert built == [1]


# ---- Planted FIFOs ----------------------------------------------------------------------------


def test_a_fifo_planted_as_an_entry_or_the_key_does_not_hang_a_review(setup, tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    args = ("review", SMALL, "--policy", str(team))
    first = _dpguard(setup, *args)
    assert first.returncode == 0, first.stderr
    planted = _files(setup.cache, "simulations") + _files(setup.cache, "validated-policies")
    assert len(planted) >= 2
    for entry in planted:
        entry.unlink()
        os.mkfifo(entry)
    again = _dpguard(setup, *args)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert all(entry.is_file() for entry in planted)  # written again over the FIFOs
    setup.key.unlink()
    os.mkfifo(setup.key)
    without = _dpguard(setup, *args)
    assert without.returncode == 0 and without.stdout == first.stdout


# ---- The key ----------------------------------------------------------------------------------


def test_the_key_is_created_private_and_never_replaced(setup):
    assert not setup.key.exists()
    cache.remember("simulations", "x", b"k")
    assert setup.key.stat().st_mode & 0o777 == 0o600
    assert setup.key.parent.stat().st_mode & 0o777 == 0o700
    key = setup.key.read_bytes()
    assert len(key) == cache.KEY_BYTES
    cache.remember("simulations", "y", b"k")
    assert setup.key.read_bytes() == key
    assert cache.recall("simulations", b"k") == "y"
    assert [p.name for p in setup.key.parent.iterdir()] == ["cache-key"]  # no temporary left


def test_nothing_is_created_by_reading(setup):
    assert cache.recall("simulations", b"k") is None
    assert not cache.vouched("valid-schemas", b"schema")
    assert not setup.key.exists() and not setup.cache.exists()


def _spoil_mode(key: Path) -> None:
    key.chmod(0o644)


def _spoil_owner(key: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file away")
    os.chown(key, 65534, 65534)


def _spoil_symlink(key: Path) -> None:
    real = key.with_name("real-key")
    key.rename(real)
    key.symlink_to(real)


def _spoil_length(key: Path) -> None:
    key.write_bytes(key.read_bytes()[:16])


@pytest.mark.parametrize(
    "spoil",
    [_spoil_mode, _spoil_owner, _spoil_symlink, _spoil_length],
    ids=["readable by others", "owned by another user", "a symlink", "too short"],
)
def test_a_key_file_not_private_to_the_user_turns_the_cache_off(setup, spoil):
    cache.remember("simulations", "x", b"k")
    cache.vouch("valid-schemas", b"schema")
    assert cache.recall("simulations", b"k") == "x" and cache.vouched("valid-schemas", b"schema")
    spoil(setup.key)
    assert cache.recall("simulations", b"k") is None
    assert not cache.vouched("valid-schemas", b"schema")
    cache.remember("simulations", "z", b"other")
    cache.vouch("valid-schemas", b"other schema")
    assert cache.marker("simulations", b"other").exists() is False
    assert cache.marker("valid-schemas", b"other schema").exists() is False
    sizing._simulate.cache_clear()
    assert sizing.bubble(SHORT, SETTINGS) is not None  # only the time saved is lost


def test_a_key_inside_the_cache_directory_is_refused(setup, monkeypatch):
    monkeypatch.setenv("DPGUARD_CACHE_KEY_FILE", str(setup.cache / "cache-key"))
    cache.remember("simulations", "x", b"k")
    assert cache.recall("simulations", b"k") is None
    assert not (setup.cache / "cache-key").exists()


def test_an_empty_key_setting_turns_the_cache_off(setup, monkeypatch):
    monkeypatch.setenv("DPGUARD_CACHE_KEY_FILE", "")
    cache.remember("simulations", "x", b"k")
    assert cache.recall("simulations", b"k") is None


def test_the_key_lives_in_the_config_directory_not_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("DPGUARD_CACHE_KEY_FILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert cache.key_file() == tmp_path / "config" / "dpguard" / "cache-key"


# ---- Across processes -------------------------------------------------------------------------

REFUSE = """
from dpguard import sizing
from dpguard.policy import load

def refuse(*_, **__):
    raise SystemExit("computed again")

sizing.simulate = load._schema_problems = load.templates.check_message = refuse
"""


def test_a_cache_written_by_one_process_is_used_by_the_next(setup, tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    args = ("review", SMALL, "--policy", str(team))
    first = _dpguard(setup, *args)
    assert first.returncode == 0, first.stderr
    assert _files(setup.cache, "simulations") and _files(setup.cache, "validated-policies")
    again = _dpguard(setup, *args, code=REFUSE)  # simulating or validating fails it
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    # and without the cache the same refusal does fail, so the run above was served by it
    setup.env["DPGUARD_CACHE_KEY_FILE"] = str(tmp_path / "another-key")
    cold = _dpguard(setup, *args, code=REFUSE)
    assert cold.returncode != 0 and "computed again" in cold.stderr


def test_every_file_in_the_cache_is_authenticated_text(setup, tmp_path):
    """No bytecode, no pickle: after a review with a team policy, each entry is a tag line and
    UTF-8 text."""
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    assert _dpguard(setup, "review", SMALL, "--policy", str(team)).returncode == 0
    entries = [p for p in setup.cache.rglob("*") if p.is_file()]
    assert entries
    for entry in entries:
        header, body = _split(entry)
        assert header.startswith(cache.MAGIC + b" "), entry
        body.decode("utf-8")
    assert not hasattr(cache, "template_bytecode")
