"""Rule messages in the plain subset (literal text and `{{ dotted.fact }}`, optionally through
dpguard's own `pct` or `thousands` filter) render without Jinja (dpguard/policy/plain.py,
templates.render_message), byte for byte as Jinja renders them, errors and budgets included;
a review whose findings only use such messages never imports jinja2."""

from __future__ import annotations

import subprocess
import sys
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.policy import plain, templates
from dpguard.policy.facts import FACTS
from dpguard.policy.load import load_policies

REPO = Path(__file__).resolve().parent.parent
RULE = {"id": "TM001", "title": "t"}
# Its findings (HR004, FW013) only use plain messages; before the plain path, rendering them
# imported jinja2.
ALL_PLAIN = "tests/data/perf/manifests/zb-1.5b-zb1p-m64.yaml"


def shipped_messages() -> list[tuple[str, str]]:
    """(rule id, message) of every rule of every shipped policy set (not their test cases)."""
    out = []
    for path in sorted((REPO / "policies").rglob("*.yaml")):
        if "tests" in path.relative_to(REPO / "policies").parts:
            continue
        doc = YAML(typ="safe").load(path.read_text(encoding="utf-8")) or {}
        out += [(r["id"], r["message"]) for r in doc.get("rules") or () if "message" in r]
    return out


MESSAGES = shipped_messages()
PLAIN = [(rule, message) for rule, message in MESSAGES if templates._plain(message) is not None]


@pytest.fixture(scope="module")
def fact_sets() -> list[Mapping[str, Any]]:
    """The facts the engine computes for every manifest and framework config of examples/ and
    tests/data that gets that far, and one with every fact unset."""
    policies = load_policies()
    found: list[Mapping[str, Any]] = [dict.fromkeys(FACTS)]
    for root in ("examples", "tests/data"):
        for path in sorted((REPO / root).rglob("*")):
            if path.suffix in (".yaml", ".yml", ".sh", ".toml", ".json") and path.is_file():
                try:
                    outcome = check_file(str(path), None, policies).outcome
                except Exception:  # a file these tests cannot read (InputError) gives no facts
                    continue
                if outcome is not None:
                    found.append(outcome.facts)
    assert len(found) > 100
    return found


def render(source: str, facts: Mapping[str, Any]) -> tuple[str, str]:
    """("ok", text) or (the exception's type, its message): what the caller sees."""
    try:
        return "ok", templates.render_message(source, facts, RULE)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def by_jinja(
    monkeypatch: pytest.MonkeyPatch, source: str, facts: Mapping[str, Any]
) -> tuple[str, str]:
    with monkeypatch.context() as patched:
        patched.setattr(templates, "_plain", lambda source: None)
        return render(source, facts)


@pytest.fixture
def jinja_renders(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The messages templates._compiled is asked for, i.e. rendered by Jinja."""
    asked: list[str] = []
    compiled: Callable[[str], Any] = templates._compiled

    def spy(source: str) -> Any:
        asked.append(source)
        return compiled(source)

    monkeypatch.setattr(templates, "_compiled", spy)
    yield asked


def tag(field: plain.Field) -> str:
    """The field written back as a message writes it (spaces aside)."""
    args = f"({', '.join(map(str, field.args))})" if field.args else ""
    piped = f" | {field.filter}{args}" if field.filter else ""
    return "{{ " + ".".join(field.path) + piped + " }}"


def test_every_shipped_message_is_classified() -> None:
    """Most shipped messages are plain; the rest (`{% if %}`, arithmetic, `format`) are not."""
    assert MESSAGES and len(PLAIN) >= len(MESSAGES) // 2
    for _rule, message in MESSAGES:
        parts = templates._plain(message)
        if parts is None:
            continue
        assert "{%" not in message and "{#" not in message
        rebuilt = "".join(p if isinstance(p, str) else tag(p) for p in parts)
        assert "".join(rebuilt.split()) == "".join(message.split())


@pytest.mark.parametrize(("rule", "message"), PLAIN, ids=[r for r, _ in PLAIN])
def test_plain_messages_render_as_jinja_does(
    rule: str,
    message: str,
    fact_sets: list[Mapping[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    jinja_renders: list[str],
) -> None:
    """Over the facts of every manifest, each of them with each fact the message reads unset,
    and every fact unset: the same text, or the same error (Jinja renders then, to raise it)."""
    parts = templates._plain(message)
    assert parts is not None
    read = {".".join(p.path) for p in parts if not isinstance(p, str)}
    cases = [
        ChainMap(unset, facts)
        for facts in fact_sets
        for unset in ({}, *({path: None} for path in read if path in facts))
    ]
    for facts in cases:
        jinja_renders.clear()
        rendered = render(message, facts)
        assert (rendered[0] == "ok") is (message not in jinja_renders)  # Jinja only to raise
        assert rendered == by_jinja(monkeypatch, message, facts)


@pytest.mark.parametrize(
    ("source", "facts"),
    [
        ("{{ training.tokens | thousands }} tokens", {"training.tokens": 15 * 10**12}),
        ("{{training.tokens|thousands()}}", {"training.tokens": 1234.5}),
        ("{{ training.tokens | thousands }}", {"training.tokens": True}),
        ("{{ proposal.bubble | pct }}", {"proposal.bubble": 0.12345}),
        ("{{ proposal.bubble | pct(3) }} / {{ proposal.bubble | pct(0) }}", {"proposal.bubble": 1}),
        ("{{ proposal.bubble | pct( 2 ) }}", {"proposal.bubble": None}),
        ("a {{ cluster.gpus }}\r\n b\n", {"cluster.gpus": None}),
        ("{{ cluster.gpus }} {{ cluster.accelerator }}", {"cluster.gpus": 0}),
        ("}} {{ cluster.gpus }} }}", {"cluster.gpus": [1, "a", None]}),
        # errors: Jinja's, raised by Jinja
        ("{{ training.tokens | thousands }}", {"training.tokens": None}),
        ("{{ training.tokens | thousands }}", {"training.tokens": "15T"}),
        ("{{ cluster.gpus.count }}", {"cluster.gpus": 8}),
        ("{{ plan.rule }}", {"cluster.gpus": 8}),
        # the budget: what the output and the work of a rule message may be
        ("{{ cluster.accelerator }}", {"cluster.accelerator": "a" * 65_536}),
        ("{{ cluster.accelerator }}", {"cluster.accelerator": "a" * 65_537}),
        ("x{{ cluster.accelerator }}", {"cluster.accelerator": "a" * 65_536}),
        ("x\n", {}),
        ("{{ cluster.gpus }}", {"cluster.gpus": list(range(9_000))}),
        ("{{ cluster.gpus | pct }}", {"cluster.gpus": 10**70_000}),
        ("{{ cluster.gpus | thousands }}", {"cluster.gpus": 10**4_000}),
        ("{{ cluster.gpus | thousands }}", {"cluster.gpus": 10**250_000}),
    ],
)
def test_plain_subset_edges(
    source: str, facts: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert templates._plain(source) is not None
    assert render(source, facts) == by_jinja(monkeypatch, source, facts)


def test_the_plain_path_spends_the_budget_as_the_sandbox_does(
    monkeypatch: pytest.MonkeyPatch, jinja_renders: list[str]
) -> None:
    """pct reads a long number written out (a 200,000-step work budget) into a short text:
    refused from the same length on, the step charged for the filter's call, the value, its
    result and finalize reading it included."""
    source = "{{ proposal.bubble | pct(0) }}"
    outcomes = set()
    for zeros in range(199_985, 199_999):
        facts = {"proposal.bubble": "0" * zeros + ".5"}
        jinja_renders.clear()
        rendered = render(source, facts)
        assert (rendered[0] == "ok") is not jinja_renders
        assert rendered == by_jinja(monkeypatch, source, facts), zeros
        outcomes.add(rendered[0])
    assert outcomes == {"ok", "SecurityError"}


def test_the_plain_path_leaves_a_dicts_attributes_to_jinja() -> None:
    """`cluster.items` is the dict's method in Jinja's sandbox, not a key."""
    parts = templates._plain("{{ cluster.items }}")
    assert parts is not None
    assert templates._render_plain(parts, {"cluster": {"items": 1}}) is None
    assert templates._render_plain(parts, {"cluster": {"item": 1}}) is None


@pytest.mark.parametrize(
    "source",
    [
        "{% if cluster.gpus > 8 %}many{% else %}few{% endif %} GPUs",
        "{{ 2 * parallelism.pipeline }}",
        "{{ parallelism.expert or 1 }}",
        "{{ '%.1f' | format(cluster.gpus) }}",
        "{{ cluster.gpus | upper }}",
        "{{ cluster.gpus | thousands | pct }}",
        "{{ cluster.gpus | pct(-1) }}",
        "{{ cluster.gpus | pct(1.5) }}",
        "{{ cluster.gpus | pct(digits=1) }}",
        "{{ cluster.gpus is none }}",
        "{{ cluster['gpus'] }}",
        "{{- cluster.gpus }}",
        "{{ cluster.gpus -}}",
        "{{{ cluster.gpus }}",
        "{# a comment #}{{ cluster.gpus }}",
        "{{ rule.id }}",
        "{{ metadata.labels.team }}",
        "{{ range }}",
        "{{ cluster.gpus }",
    ],
)
def test_other_messages_are_not_plain(source: str) -> None:
    assert templates._plain(source) is None


def test_other_messages_still_render_through_jinja(jinja_renders: list[str]) -> None:
    source = "{% if cluster.gpus > 8 %}many{% else %}few{% endif %} GPUs: {{ cluster.gpus }}"
    assert templates.render_message(source, {"cluster.gpus": 16}, RULE) == "many GPUs: 16"
    assert jinja_renders == [source]
    plain = "{{ cluster.gpus }} GPUs"
    assert templates.render_message(plain, {"cluster.gpus": 16}, RULE) == "16 GPUs"
    assert jinja_renders == [source]


WRAPPER = """\
import atexit, sys
atexit.register(lambda: print("jinja2 imported:", "jinja2" in sys.modules, file=sys.stderr))
from dpguard.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_review_of_plain_messages_never_imports_jinja(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a process of its own (the per-user cache of this test run: warmed by the first run),
    and printing what the Jinja path prints."""
    for _ in range(2):
        run = subprocess.run(
            # -P: the installed dpguard, not the source tree of the current directory
            [sys.executable, "-P", "-c", WRAPPER, "review", ALL_PLAIN],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.stderr.endswith("jinja2 imported: False\n"), run.stderr
    assert " error HR004 pipeline depth 8 " in run.stdout  # a finding with a message
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(templates, "_plain", lambda source: None)
    assert main(["review", ALL_PLAIN]) == run.returncode == 1
    assert capsys.readouterr().out == run.stdout
