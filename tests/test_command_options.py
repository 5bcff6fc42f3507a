"""Options of the single-manifest and listing commands, run through `dpguard.cli.main` on real
files: `--output` of plan, memory and perf (atomic, regular files only, exit codes as on
stdout); `--format json` of rules and facts (the text's content, deterministic); compare
refusing a run too large to simulate before simulating anything; memory's text saying which
ranks it leaves out."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from dpguard.cli import main
from dpguard.commands import memory as memory_command
from dpguard.policy.facts import FACTS
from dpguard.schedules import api, engine

REPO = Path(__file__).resolve().parent.parent
SMALL = str(REPO / "examples" / "small-dense.yaml")
FRONTIER = str(REPO / "examples" / "frontier-moe.yaml")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- --output of plan, memory, perf -------------------------------------------------------------

WRITERS = [
    ("plan", SMALL),
    ("plan", SMALL, "--format", "json"),
    ("plan", SMALL, "--format", "yaml"),
    ("plan", SMALL, "--emit", "megatron"),
    ("memory", FRONTIER),
    ("memory", FRONTIER, "--format", "json"),
    ("perf", SMALL),
    ("perf", SMALL, "--format", "json"),
]


@pytest.mark.parametrize("argv", WRITERS, ids=lambda a: "-".join(a[:1] + a[2:]))
def test_output_writes_what_stdout_shows_and_nothing_else(
    argv: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, shown, _ = cli(capsys, *argv)
    assert shown
    (tmp_path / "out").mkdir()
    assert cli(capsys, *argv, "--output", "out/doc")[:2] == (code, "")
    assert (tmp_path / "out" / "doc").read_text(encoding="utf-8") == shown
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["doc"]  # no temporary file left
    assert cli(capsys, *argv, "-o", "-")[:2] == (code, shown)


@pytest.mark.parametrize(
    ("command", "manifest", "what"),
    [
        ("plan", SMALL, "the plan"),
        ("memory", SMALL, "the breakdown"),
        ("perf", SMALL, "the prediction"),
    ],
)
def test_output_onto_a_symlink_exits_2_and_writes_nothing(
    command: str,
    manifest: str,
    what: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("real.txt").write_text("old\n", encoding="utf-8")
    os.symlink("real.txt", "doc.txt")
    code, out, err = cli(capsys, command, manifest, "--output", "doc.txt")
    assert (code, out) == (2, "")
    assert err == (
        f"dpguard: error: cannot write {what} to doc.txt: it is a symbolic link, not a regular "
        "file; nothing was written\n"
    )
    assert Path("real.txt").read_text(encoding="utf-8") == "old\n"
    assert os.readlink("doc.txt") == "real.txt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.txt", "real.txt"]


def test_a_plan_that_fails_to_render_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is written before the whole page exists: an existing plan stays as it was."""
    from dpguard.planner import render

    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("template bug")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(render, "render_markdown", broken)
    Path("plan.md").write_text("old\n", encoding="utf-8")
    code, out, err = cli(capsys, "plan", SMALL, "--output", "plan.md")
    assert (code, out) == (3, "")
    assert "template bug" in err
    assert Path("plan.md").read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.md"]


# ---- --format json of rules and facts ----------------------------------------------------------

RULE_ROW = re.compile(r"^(\S+) +(\S+) +(\S+) +(.+?)  \[(.+)@(.+)\]$")
TEAM = (
    "apiVersion: dpguard/v1\nkind: PolicySet\nmetadata: {name: team, version: 1.0.0}\n"
    "rules:\n  - id: TEAM001\n    kind: reject\n    severity: warning\n"
    "    title: team rule\n    when: {fact: cluster.gpus, gt: 1}\n    message: m\n    docs: d\n"
)


def deterministic_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = cli(capsys, *argv)
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert out == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert cli(capsys, *argv)[1] == out  # byte for byte the same on a second run
    return data


@pytest.mark.parametrize("layered", [False, True])
def test_rules_json_lists_what_the_text_lists(
    layered: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra: tuple[str, ...] = ()
    if layered:
        (tmp_path / "team.yaml").write_text(TEAM, encoding="utf-8")
        extra = ("--policy", str(tmp_path / "team.yaml"))
    code, text, _ = cli(capsys, "rules", *extra)
    assert code == 0
    rows = [RULE_ROW.match(line) for line in text.splitlines()]
    expected = [m.groups() for m in rows if m]
    assert len(expected) == len(rows) > 20
    data = deterministic_json(capsys, "rules", *extra, "--format", "json")
    assert set(data) == {"rules"}
    keys = ("id", "kind", "severity", "title", "set", "version")
    assert all(set(rule) == set(keys) for rule in data["rules"])
    assert [tuple(rule[k] for k in keys) for rule in data["rules"]] == expected
    if layered:
        assert data["rules"][-1] == dict(
            zip(keys, ("TEAM001", "reject", "warning", "team rule", "team", "1.0.0"), strict=True)
        )


def test_facts_json_lists_what_the_text_lists(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = cli(capsys, "facts")
    assert code == 0
    lines = text.splitlines()
    data = deterministic_json(capsys, "facts", "--format", "json")
    assert set(data) == {"facts", "unset_facts"}
    facts = data["facts"]
    assert [f["name"] for f in facts] == [*FACTS, "metadata.labels.<key>"]
    assert len(lines) == len(facts) + 1
    for line, fact in zip(lines[:-1], facts, strict=True):
        assert set(fact) == {"name", "type", "description", "choices"}
        name, type_, rest = line.split(None, 2)
        choices = f" (one of: {', '.join(fact['choices'])})" if fact["choices"] else ""
        assert (name, type_, rest) == (fact["name"], fact["type"], fact["description"] + choices)
    for fact in facts[: len(FACTS)]:
        assert fact["choices"] == list(FACTS[fact["name"]].choices)
    assert lines[-1] == f"unset facts: {data['unset_facts']}"


# ---- compare: the size limit before any simulation ---------------------------------------------


@pytest.fixture
def no_simulation(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every simulation started (compare's `simulate`, the engine under bubble)."""
    started: list[str] = []

    def simulate(schedule: str, *args: Any, **kwargs: Any) -> None:
        started.append(schedule)
        raise AssertionError(f"{schedule} was simulated")

    def run(*args: Any, **kwargs: Any) -> None:
        started.append("engine")
        raise AssertionError("the engine ran")

    monkeypatch.setattr(api, "simulate", simulate)
    monkeypatch.setattr(engine, "run", run)
    return started


LIMIT = "(limit 1,048,576 stage-micro-batch pairs)"


def test_compare_refuses_a_size_too_large_before_simulating(
    no_simulation: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """P = 128, M = 8192: GPipe, 1F1B and ZB1P (128 stages) are at the limit, interleaved-1f1b
    (v = 2) and DualPipeV (2P) have 256 stages; DualPipe (P stages, two directions) fits."""
    code, out, err = cli(capsys, "compare", "-p", "128", "-m", "8192")
    assert (code, out, no_simulation) == (2, "", [])
    assert err == (
        "dpguard: error: interleaved-1f1b: 256 stages x 8192 micro-batches is too large to "
        f"simulate {LIMIT}\n"
        f"dualpipev: 256 stages x 8192 micro-batches is too large to simulate {LIMIT}\n"
    )


def test_compare_counts_each_schedule_s_own_stages(
    no_simulation: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A limit of P x M pairs passes the P-stage schedules and refuses the 2P-stage ones, still
    before any of the others is simulated; --format json is refused the same way."""
    monkeypatch.setattr(api, "MAX_ITEMS", 4 * 8)
    code, out, err = cli(capsys, "compare", "-p", "4", "-m", "8", "--format", "json")
    assert (code, out, no_simulation) == (2, "", [])
    refused = [line.split(":")[0] for line in err.removeprefix("dpguard: error: ").splitlines()]
    assert refused == ["interleaved-1f1b", "dualpipev"]
    assert "8 stages x 8 micro-batches is too large to simulate (limit 32 " in err


def test_bubble_refuses_a_size_too_large_before_simulating(
    no_simulation: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "bubble", "-s", "dualpipev", "-p", "128", "-m", "8192")
    assert (code, out, no_simulation) == (2, "", [])
    assert err == (
        f"dpguard: error: 256 stages x 8192 micro-batches is too large to simulate {LIMIT}\n"
    )


# ---- memory: which ranks the text leaves out ---------------------------------------------------


def table_ranks(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if re.match(r"^ {0,3}\d+\*? ", line)]


def test_memory_text_names_the_ranks_it_leaves_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = cli(capsys, "memory", FRONTIER)
    assert code == 0
    assert table_ranks(text) == ["0*", "15"]  # rank 0 ties rank 15: the lower is the worst
    assert (
        "ranks 1-14 of 16 not shown: the table keeps the first, the worst (*) and the last; "
        "--format json lists all\n"
    ) in text
    data = json.loads(cli(capsys, "memory", FRONTIER, "--format", "json")[1])
    assert [r["rank"] for r in data["ranks"]] == list(range(16))


def test_memory_text_with_a_worst_rank_inside(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    report = memory_command.report

    def worst_is_5(*args: Any) -> dict[str, Any]:
        return {**report(*args), "worst_rank": 5}

    monkeypatch.setattr(memory_command, "report", worst_is_5)
    text = cli(capsys, "memory", FRONTIER)[1]
    assert table_ranks(text) == ["0", "5*", "15"]
    assert "\nranks 1-4, 6-14 of 16 not shown: " in text


def test_memory_text_of_a_short_pipeline_shows_every_rank(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text, _ = cli(capsys, "memory", SMALL)
    assert code == 0
    data = json.loads(cli(capsys, "memory", SMALL, "--format", "json")[1])
    assert [r.rstrip("*") for r in table_ranks(text)] == [str(r["rank"]) for r in data["ranks"]]
    assert "not shown" not in text


@pytest.mark.parametrize(
    ("numbers", "said"),
    [([1], "1"), ([1, 2, 3], "1-3"), ([1, 2, 3, 5, 7, 8], "1-3, 5, 7-8"), ([], "")],
)
def test_spans(numbers: list[int], said: str) -> None:
    assert memory_command.spans(numbers) == said
