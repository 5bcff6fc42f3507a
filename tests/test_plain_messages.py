"""Rule messages in the plain subset (literal text and `{{ dotted.fact }}`, optionally through
one of dpguard's own filters, and `{% if %}` blocks that test one fact)
render without Jinja (dpguard/policy/plain.py, templates.render_message), byte for byte as Jinja
renders them, errors and budgets included; a review whose findings only use such messages never
imports jinja2."""

from __future__ import annotations

import subprocess
import sys
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.policy import plain, templates
from dpguard.policy.facts import FACTS
from dpguard.policy.load import load_policies
from dpguard.policy.templates import MESSAGE

REPO = Path(__file__).resolve().parent.parent
RULE = {"id": "TM001", "title": "t"}
# Its findings (HR004, FW013) only use plain messages; before the plain path, rendering them
# imported jinja2.
ALL_PLAIN = "tests/data/perf/manifests/zb-1.5b-zb1p-m64.yaml"
# The findings most reviews have (ADV001, ADV002, ADV003, ADV004, HR004, HR009): plain since
# `fixed` and `{% if %}` blocks; before, ADV001 alone made nearly every review import jinja2.
COMMON = (
    "examples/large-dense.yaml",
    "tests/data/calibration/bigscience-184b-dp16-tp4-pp6-mbs1.yaml",
    "tests/data/calibration/qi24-zb-t12-1.5b-pp8-mbs6-m2-1f1b.yaml",
)


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


def tag(part: plain.Part) -> str:
    """The part written back as a message writes it (spaces aside)."""
    if isinstance(part, str):
        return part
    if isinstance(part, plain.If):
        test = ".".join(part.test.path)
        test = {
            "": test,
            "not": f"not {test}",
            "==": f"{test} == '{part.text}'",
            "!=": f"{test} != '{part.text}'",
            "is none": f"{test} is none",
            "is not none": f"{test} is not none",
        }[part.op]
        otherwise = "{% else %}" + "".join(map(tag, part.otherwise)) if part.otherwise else ""
        return "{% if " + test + " %}" + "".join(map(tag, part.then)) + otherwise + "{% endif %}"
    args = f"({', '.join(map(str, part.args))})" if part.args else ""
    piped = f" | {part.filter}{args}" if part.filter else ""
    return "{{ " + ".".join(part.path) + piped + " }}"


def test_every_shipped_message_is_classified() -> None:
    """Most shipped messages are plain; the rest (arithmetic) are not."""
    assert MESSAGES and len(PLAIN) >= len(MESSAGES) // 2
    for _rule, message in MESSAGES:
        parts = templates._plain(message)
        if parts is None:
            continue
        assert "{#" not in message
        rebuilt = "".join(map(tag, parts))
        assert "".join(rebuilt.split()) == "".join(message.split())


# RF001 (any cluster at 200 Gbps or less) made one review in a hundred import Jinja until the
# `number` filter replaced its `'%g' | format`.
@pytest.mark.parametrize(
    "rule", ["ADV001", "ADV002", "ADV003", "ADV004", "HR009", "HR014", "RF001"]
)
def test_the_common_findings_are_plain(rule: str) -> None:
    assert templates._plain(dict(MESSAGES)[rule]) is not None


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
    read = {".".join(p.path) for p in templates._fields(parts)}
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
        # fixed: printf's %.Nf
        ("{{ derived.layers_per_stage | fixed(2) }}", {"derived.layers_per_stage": 3.8125}),
        ("{{ derived.layers_per_stage | fixed }}", {"derived.layers_per_stage": -0.04}),
        ("{{ cluster.gpus | fixed(0) }} {{ cluster.gpus | fixed(3) }}", {"cluster.gpus": 7}),
        ("{{ cluster.gpus | fixed(1) }}", {"cluster.gpus": True}),
        ("{{ cluster.gpus | fixed(2) }}", {"cluster.gpus": float("nan")}),
        ("{{ cluster.gpus | fixed(2) }}", {"cluster.gpus": float("-inf")}),
        ("{{ cluster.gpus | fixed(100) }}", {"cluster.gpus": 1e308}),
        ("{{ cluster.gpus | fixed(2) }}", {"cluster.gpus": None}),
        ("{{ cluster.gpus | fixed(2) }}", {"cluster.gpus": "1.5"}),
        ("{{ cluster.gpus | fixed(2) }}", {"cluster.gpus": 10**400}),
        ("{{ cluster.gpus | fixed(101) }}", {"cluster.gpus": 1.0}),
        ("{{ cluster.gpus | fixed(1000000000) }}", {"cluster.gpus": 1.0}),
        ("{{ cluster.gpus | pct(1000000000) }}", {"cluster.gpus": 1.0}),
        # number: printf's %g
        ("{{ cluster.gpus | number }} Gbps", {"cluster.gpus": 200.0}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": 12.5}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": 1234567.0}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": 1e-7}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": True}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": float("nan")}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": 10**400}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": None}),
        ("{{ cluster.gpus | number }}", {"cluster.gpus": "200"}),
        ("{{ cluster.gpus | number(2) }}", {"cluster.gpus": 1.0}),
        # if blocks: Python's truth, ==, != and `is none` on the fact
        ("{% if runtime.stated %}a{% else %}b{% endif %}", {"runtime.stated": False}),
        ("{% if runtime.stated %}a{% else %}b{% endif %}", {"runtime.stated": [0]}),
        (
            "{%if not runtime.stated%}a {{ cluster.gpus }}{%endif%}",
            {"runtime.stated": 0.0, "cluster.gpus": 3},
        ),
        ("x{% if runtime.stated %}{% else %}{% endif %}y", {"runtime.stated": None}),
        (
            "{% if cluster.gpus is none %}-{% else %}{{ cluster.gpus }}{% endif %}",
            {"cluster.gpus": 0},
        ),
        ("{% if cluster.gpus is not none %}{{ cluster.gpus }}{% endif %}", {"cluster.gpus": None}),
        ("{% if plan.rule == 'none' %}a{% endif %}", {"plan.rule": "none"}),
        ('{% if plan.rule == "none" %}a{% endif %}', {"plan.rule": None}),
        ("{% if plan.rule != 'D%} {{x}}' %}a{% endif %}", {"plan.rule": "D%} {{x}}"}),
        ("{% if plan.rule == 'é—' %}a{% endif %}", {"plan.rule": "é—"}),
        ("{% if plan.rule\n== '1'\n%}a\n{% else\n%}b{% endif %}\n", {"plan.rule": 1}),
        ("{% if cluster.gpus == '' %}a{% endif %}", {"cluster.gpus": [""]}),
        ("{% if proposal.notable %}a{% endif %}", {"proposal.notable": 1}),
        # errors: Jinja's
        ("{% if runtime.stated %}a{% endif %}", {}),
        ("{% if runtime.stated.x %}a{% endif %}", {"runtime.stated": True}),
        ("{% if runtime.items %}a{% endif %}", {"runtime.stated": True}),
        ("{% if runtime.stated %}{{ plan.rule }}{% endif %}", {"runtime.stated": True}),
        ("{% if runtime.stated %}{{ plan.rule }}{% endif %}", {"runtime.stated": False}),
        # the budget: a comparison reads its fact; a test is a call that reads it
        ("{% if cluster.accelerator %}{% endif %}", {"cluster.accelerator": "a" * 10**6}),
        ("{% if cluster.accelerator == 'a' %}{% endif %}", {"cluster.accelerator": "a" * 10**6}),
        ("{% if cluster.accelerator is none %}{% endif %}", {"cluster.accelerator": "a" * 10**6}),
        (
            "{% if runtime.stated %}{{ cluster.accelerator }}{% endif %}",
            {
                "runtime.stated": True,
                "cluster.accelerator": "a" * 65_537,
            },
        ),
        (
            "{% if runtime.stated %}{{ cluster.accelerator }}{% endif %}",
            {
                "runtime.stated": False,
                "cluster.accelerator": "a" * 65_537,
            },
        ),
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


@pytest.mark.parametrize(
    ("test", "longest"),
    [
        ("cluster.accelerator == 'x'", MESSAGE.work // 2),
        ("cluster.accelerator != 'x'", MESSAGE.work // 2),
        ("cluster.accelerator is none", MESSAGE.work // 2 - 1),
        ("cluster.accelerator is not none", MESSAGE.work // 2 - 1),
    ],
)
def test_an_if_blocks_test_spends_the_budget_as_the_sandbox_does(
    test: str, longest: int, monkeypatch: pytest.MonkeyPatch, jinja_renders: list[str]
) -> None:
    """Twice: a comparison reads its fact ("reading a value"), a test is a call (a step and
    the value), refused from the same length on; a truth test and `not` cost nothing."""
    source = (
        f"{{% if {test} %}}a{{% endif %}}{{% if {test} %}}b{{% endif %}}"
        "{% if cluster.accelerator %}c{% endif %}{% if not cluster.accelerator %}d{% endif %}"
    )
    for length in range(longest - 3, longest + 3):
        facts = {"cluster.accelerator": "a" * length}
        jinja_renders.clear()
        rendered = render(source, facts)
        assert rendered[0] == ("ok" if length <= longest else "SecurityError"), length
        assert (rendered[0] == "ok") is not jinja_renders
        assert rendered == by_jinja(monkeypatch, source, facts), length


def outcome(func: Callable[[], str]) -> tuple[str, str]:
    try:
        return "ok", func()
    except Exception as exc:
        return type(exc).__name__, str(exc)


def only_jinja(source: str, facts: Mapping[str, Any]) -> tuple[str, str]:
    with patch.object(templates, "_plain", lambda source: None):
        return render(source, facts)


NUMBERS = st.one_of(
    st.floats(),  # nan, inf, -0.0 and subnormals included
    st.integers(min_value=-(10**320), max_value=10**320),  # past a float: OverflowError
    st.booleans(),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(value=NUMBERS, digits=st.integers(0, 25))
def test_fixed_is_printfs_fixed_point(value: Any, digits: int) -> None:
    """`x | fixed(n)` is `'%.nf' % x`, and renders as `'%.nf' | format(x)` did (the messages
    it replaced), through the plain path and through Jinja, errors included."""
    assert outcome(lambda: templates.fixed(value, digits)) == outcome(
        lambda: f"%.{digits}f" % value
    )
    facts = {"derived.layers_per_stage": value}
    source = f"{{{{ derived.layers_per_stage | fixed({digits}) }}}}"
    rendered = render(source, facts)
    assert rendered == render(f"{{{{ '%.{digits}f' | format(derived.layers_per_stage) }}}}", facts)
    assert rendered == only_jinja(source, facts)


# if blocks over facts of every kind; texts without quotes or backslashes (plain.py)
PATHS = ("plan.rule", "runtime.stated", "cluster.gpus", "proposal.memory_schedule")
WORDS = ("none", "1f1b", "", "a b", "é—", "True", "0")
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.floats(-2, 2) | st.just(float("nan")),
    st.sampled_from(WORDS),
    st.text(max_size=3),
    st.lists(st.sampled_from((0, "", None)), max_size=2),
    st.dictionaries(st.sampled_from(("a", "items")), st.integers(0, 1), max_size=1),
)
TESTS = {
    "": "{}",
    "not": "not {}",
    "==": "{} == '{}'",
    "!=": '{} != "{}"',
    "is none": "{} is none",
    "is not none": "{}  is\tnot  none",
}
TEXT = st.text(alphabet=" ab\n}%", max_size=3)  # no `{`: it could open a tag with the next
FIELD = st.builds(
    lambda path, piped: "{{ " + path + piped + " }}",
    st.sampled_from(PATHS),
    st.sampled_from(("", "", " | fixed(1)", " | pct", "|thousands")),
)
BODY = st.lists(TEXT | FIELD, max_size=3).map("".join)
BLOCK = st.builds(
    lambda op, path, word, then, otherwise: (
        "{% if "
        + TESTS[op].format(path, word)
        + " %}"
        + then
        + ("" if otherwise is None else "{% else %}" + otherwise)
        + "{% endif %}"
    ),
    st.sampled_from(tuple(TESTS)),
    st.sampled_from(PATHS),
    st.sampled_from(WORDS),
    BODY,
    st.none() | BODY,
)


# every fact set, or now and then one left out (Jinja's error)
FACTS_SET = st.builds(
    lambda facts, left_out: {k: v for k, v in facts.items() if k not in left_out},
    st.fixed_dictionaries(dict.fromkeys(PATHS, VALUES)),
    st.just(()) | st.just(()) | st.tuples(st.sampled_from(PATHS)),
)


@settings(max_examples=400, deadline=None)
@given(
    source=st.lists(TEXT | FIELD | BLOCK, min_size=1, max_size=4).map("".join),
    facts=FACTS_SET,
)
def test_if_blocks_render_as_jinja_does(source: str, facts: dict[str, Any]) -> None:
    """Any mix of text, fields and if blocks over any values: the same text or the same error
    as Jinja's, and the text from the plain path (Jinja renders only to raise, or where a name
    is a dict's attribute)."""
    parts = templates._plain(source)
    assert parts is not None, source
    rendered = render(source, facts)
    assert rendered == only_jinja(source, facts)
    context = templates._context({p.path[0] for p in templates._fields(parts)}, facts)
    text = templates._render_plain(parts, context)
    if text is not None:
        assert rendered == ("ok", " ".join(text.split()))
    else:
        assert rendered[0] != "ok" or any(isinstance(v, dict) for v in facts.values())


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
        "{{ cluster.gpus | fixed(-1) }}",
        "{{ cluster.gpus | fixed(2) | pct }}",
        # if blocks: one test of one fact, not nested, no elif, no whitespace control
        "{% if cluster.gpus %}a",
        "a{% endif %}",
        "{% else %}a",
        "{% if cluster.gpus %}a{% else %}b{% else %}c{% endif %}",
        "{% if cluster.gpus %}{% if runtime.stated %}a{% endif %}{% endif %}",
        "{% if cluster.gpus %}a{% elif runtime.stated %}b{% endif %}",
        "{% if cluster.gpus and runtime.stated %}a{% endif %}",
        "{% if cluster.gpus or runtime.stated %}a{% endif %}",
        "{% if not cluster.gpus is none %}a{% endif %}",
        "{% if not cluster.gpus == 'a' %}a{% endif %}",
        "{% if not not cluster.gpus %}a{% endif %}",
        "{% if cluster.gpus == 8 %}a{% endif %}",
        "{% if cluster.gpus == none %}a{% endif %}",
        "{% if cluster.gpus is None %}a{% endif %}",
        "{% if cluster.gpus is defined %}a{% endif %}",
        "{% if cluster.gpus == 'a\\'b' %}a{% endif %}",
        "{% if cluster.gpus == 'a\nb' %}a{% endif %}",
        "{% if cluster.gpus == 'a' ~ 'b' %}a{% endif %}",
        "{% if cluster.gpus | thousands %}a{% endif %}",
        "{% if cluster['gpus'] %}a{% endif %}",
        "{% if (cluster.gpus) %}a{% endif %}",
        "{%- if cluster.gpus %}a{% endif %}",
        "{%+ if cluster.gpus %}a{% endif %}",
        "{% if cluster.gpus -%}a{% endif %}",
        "{% if cluster.gpus %}a{%- endif %}",
        "{% if cluster.gpus %}a{% endif -%}",
        "{% if cluster.gpus %}a{% endif cluster.gpus %}",
        "{% if cluster.gpus %}{# c #}{% endif %}",
        "{% if rule.id %}a{% endif %}",
        "{% if metadata.labels.team %}a{% endif %}",
        "{% if not %}a{% endif %}",
        "{% if not == 'a' %}a{% endif %}",
        "{% if x %}a{% endif %}",
        "{% raw %}{{ cluster.gpus }}{% endraw %}",
        "{% set x = 1 %}{{ cluster.gpus }}",
        "{% if cluster.gpus %}{{ rule.id }}{% endif %}",
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


@pytest.mark.parametrize(
    ("files", "finding"),
    [
        ((ALL_PLAIN,), " error HR004 pipeline depth 8 "),
        (COMMON, " error HR009 the worst pipeline stage needs at least 79.4 GiB per GPU under "),
    ],
    ids=["plain", "common"],
)
def test_a_review_of_plain_messages_never_imports_jinja(
    files: tuple[str, ...],
    finding: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In a process of its own (the per-user cache of this test run: warmed by the first run),
    and printing what the Jinja path prints."""
    for _ in range(2):
        run = subprocess.run(
            # -P: the installed dpguard, not the source tree of the current directory
            [sys.executable, "-P", "-c", WRAPPER, "review", *files],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.stderr.endswith("jinja2 imported: False\n"), run.stderr
    assert finding in run.stdout  # a finding with a message
    # the JSON report carries the plan, whose schedule table judges every schedule: the ids
    # of what fires are kept there, never a message, so no message needs Jinja
    as_json = subprocess.run(
        [sys.executable, "-P", "-c", WRAPPER, "review", "--format", "json", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert as_json.stderr.endswith("jinja2 imported: False\n"), as_json.stderr
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(templates, "_plain", lambda source: None)
    assert main(["review", *files]) == run.returncode == 1
    assert capsys.readouterr().out == run.stdout
