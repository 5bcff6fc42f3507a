"""Rule messages and page templates come from a pull request: each rendering is held to a budget
of work (loop iterations, calls, characters built) and of output, checked as the template runs,
so that a hostile template is refused with a message instead of taking the runner's memory or
time (dpguard/policy/templates.py). Each refusal below happens before the big thing is built:
the test finishing at all is the bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.errors import ConfigError
from dpguard.planner.plan import Plan
from dpguard.planner.render import _environment, _shipped_environment, render_markdown
from dpguard.policy.load import load_policies
from dpguard.policy.templates import MESSAGE, PAGE, render_message

REPO = Path(__file__).resolve().parent.parent
SMALL = str(REPO / "examples" / "small-dense.yaml")
RULE = {"id": "TM001", "title": "t"}
OVER = "goes over the work budget of a rule message (200,000 steps"

HOSTILE = [
    ("{{ 'a' | center(10**9) }}", "the center filter would build 1,000,000,000 characters"),
    ("{{ 'a' * 10**9 }}", "repetition would make 1000000000 items (at most 100000)"),
    ("{{ '%999999999s' | format(1) }}", "the format filter would build 1,000,000,010 characters"),
    ("{{ '%.999999999f' % 1 }}", "'%' would build 1,000,000,012 characters"),
    ("{{ 1 | fixed(999999999) }}", "fixed takes 0 to 100 decimals, not 999999999"),
    ("{{ 1 | pct(999999999) }}", "pct takes 0 to 100 decimals, not 999999999"),
    ("{{ '{:>999999999}'.format(1) }}", "str.format would build 1,000,000,013 characters"),
    ("{{ 'a'.ljust(10**8) }}", "calling ljust would build 100,000,000 characters"),
    ("{{ (1).to_bytes(10**9, 'big') }}", "calling to_bytes would build 1,000,000,000 characters"),
    ("{{ 'ab' | indent(10**8) }}", "the indent filter would build 100,000,002 characters"),
    ("{{ range(100000) | join('x' * 1000) }}", "the join filter would build 99,999,001"),
    ("{{ ('a' * 1000).replace('a', 'b' * 1000) }}", "calling replace would build 1,001,000"),
    ("{{ [1, 2] | slice(10**9) | list }}", "the slice filter would build 1,000,000,008"),
    ("{% filter center(10**8) %}x{% endfilter %}", "the center filter would build 100,000,000"),
    (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "a range of 100,000 numbers " + OVER,
    ),
    # ** groups to the right only when written so: 10**10**10 is (10**10)**10, a small number
    ("{{ 10 ** (10 ** 10) }}", "4-bit number to the power 10000000000 is too large"),
    (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
        "{{ f(40) }}",
        "calling f " + OVER,
    ),
    (
        "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
        "calls nest more than 100 deep (calling f): a macro that calls itself without end?",
    ),
    (  # doubling a string forty times, one ~ at a time
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}",
        "joining with ~ would build",
    ),
    (  # a list of shared lists prints 2**80 items
        "{% set ns = namespace(l=[1]) %}{% for i in range(80) %}{% set ns.l = [ns.l, ns.l] %}"
        "{% endfor %}{{ ns.l }}",
        "reading a value " + OVER,
    ),
    (  # hashing a tuple of shared tuples walks every copy
        "{% set ns = namespace(t=(1,)) %}{% for i in range(80) %}{% set ns.t = (ns.t, ns.t) %}"
        "{% endfor %}{{ {ns.t: 1} }}",
        "reading a value " + OVER,
    ),
    (
        "{% set x %}{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}{% endset %}",
        "left of the work budget of a rule message",
    ),
    ("{% for i in range(70000) %}x{% endfor %}", "renders more than 65,536 characters"),
    ("{{ '%*d' % (5, 1) }}", "a * width in a % format is not supported in templates"),
    ("{{ lipsum(10**6) }}", "'lipsum' is undefined"),
]


@pytest.mark.parametrize(("source", "problem"), HOSTILE)
def test_hostile_messages_are_refused_with_the_reason(source: str, problem: str) -> None:
    with pytest.raises(Exception) as caught:
        render_message(source, {}, RULE)
    assert problem in str(caught.value)


def test_left_associative_power_is_small_and_renders() -> None:
    assert render_message("{{ 10**10**10 }}", {}, RULE) == "1" + "0" * 100


BENIGN = [
    ("{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ 1.5 ** 2 }}", "ababab 1024 2.25"),
    ("{{ [1, 2] | join(', ') }} {{ 'x' | center(5) }}|", "1, 2 x |"),
    ("{{ '%5.1f' % 3.14159 }} {{ '%(a)s-%(b)03d' % {'a': 1, 'b': 2} }}", "3.1 1-002"),
    ("{{ '{:>4}|{:.2f}'.format(1, 2.5) }} {{ '%.1f' | format(0.25) }}", "1|2.50 0.2"),
    ("{% for i in range(3) %}{{ loop.index }}{{ loop.cycle('a', 'b') }}{% endfor %}", "1a2b3a"),
    ("{% set d = {'a': [1, 2]} %}{{ d.a[1:] }} {{ 2 in d.a }} {{ 1 < 2 < 3 }}", "[2] True True"),
    (
        "{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m('y') ~ '!' }} {{ 'a,b'.split(',') }}",
        "<y>! ['a', 'b']",
    ),
    (
        "{% set s %}{{ 'k' | upper }}{% endset %}{{ s }} {{ 0.127 | pct }} "
        "{{ 1234567 | thousands }}",
        "K 12.7% 1,234,567",
    ),
    ("{% set l = [1] %}{{ l.append(l) or '' }}{{ l }}", "[1, [...]]"),
]


@pytest.mark.parametrize(("source", "expected"), BENIGN)
def test_benign_messages_render_as_jinja_renders_them(source: str, expected: str) -> None:
    assert render_message(source, {}, RULE) == expected


def test_a_message_at_its_output_limit_renders() -> None:
    size = MESSAGE.output
    source = "{% for i in range(" + str(size // 64) + ") %}" + "x" * 64 + "{% endfor %}"
    assert len(render_message(source, {}, RULE)) == size


def test_a_hostile_policy_message_exits_2_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "apiVersion: dpguard/v1\nkind: PolicySet\nmetadata: {name: team, version: 1.0.0}\n"
        "rules:\n  - id: TM001\n    kind: advise\n    title: t\n"
        "    when: {fact: cluster.gpus, gt: 1}\n"
        "    message: \"{{ 'a' | center(10**9) }}\"\n    docs: d\n",
        encoding="utf-8",
    )
    assert main(["plan", "--policy", str(path), SMALL]) == 2
    err = capsys.readouterr().err
    assert f"{path}:5:5: message of rule TM001 cannot be rendered: the center filter would " in err
    assert "Traceback" not in err


PAGES = [
    ("{% for i in range(100000) %}" + "x" * 99 + "\n{% endfor %}", "renders more than 4,194,304"),
    (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "goes over the work budget of a page (4,000,000 steps",
    ),
    ("{{ plan.name | center(10**9) }}", "the center filter would build 1,000,000,000"),
]


@pytest.mark.parametrize(("source", "problem"), PAGES)
def test_hostile_page_templates_exit_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, problem: str
) -> None:
    (tmp_path / "plan.md.j2").write_text(source, encoding="utf-8")
    assert main(["plan", SMALL, "--templates", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "template cannot be rendered: " in captured.err and problem in captured.err
    assert "Traceback" not in captured.err


def test_a_page_past_its_output_limit_is_a_config_error_in_process(tmp_path: Path) -> None:
    (tmp_path / "plan.md.j2").write_text(
        "{% for i in range(50000) %}" + "x" * 100 + "{% endfor %}", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match="renders more than 4,194,304 characters, the most a"):
        render_markdown(_planned(), load_policies(), str(tmp_path))
    assert PAGE.output == 4 * 1024 * 1024


def _planned() -> Plan:
    result = check_file(SMALL, None, load_policies(), {}, plan_page=True)
    assert result.plan is not None
    return result.plan


def test_constants_are_not_built_while_compiling(tmp_path: Path) -> None:
    # Jinja folds constant expressions when it compiles, outside any rendering's budget: there
    # every metered operation is refused, and left for the rendering to run under its budget.
    source = "{{ 'a' | center(3000000) }}" * 100
    assert len(_environment(str(tmp_path)).compile(source, raw=True)) < 100_000
    (tmp_path / "plan.md.j2").write_text(source, encoding="utf-8")
    with pytest.raises(ConfigError, match="over the work budget of a page"):
        render_markdown(_planned(), load_policies(), str(tmp_path))


def test_no_environment_reads_a_bytecode_cache(tmp_path: Path) -> None:
    # Jinja unmarshals and runs a bytecode cache: whoever can write the cache directory would
    # run code. The shipped templates come precompiled, a team's compile in-process.
    assert _shipped_environment().bytecode_cache is None
    assert _environment(str(tmp_path)).bytecode_cache is None
