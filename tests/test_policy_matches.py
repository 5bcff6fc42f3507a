"""Facts metadata.name, metadata.owner, metadata.labels.<key> and the `matches` operator: the
rules platform teams write first ("require an owner", "cost-centre must match ^cc-[0-9]+$")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpguard.cli import main
from dpguard.policy.regex import MAX_WAYS, PatternProblem, compile_pattern, ways

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: acme, version: 1.0.0}
rules:
  - id: ACME001
    kind: reject
    title: every run has an owner
    when: {fact: metadata.owner, exists: false}
    message: run {{ metadata.name }} has no metadata.owner
    docs: on-call needs someone to page.
  - id: ACME002
    kind: reject
    title: every run names its cost centre
    when:
      not: {fact: metadata.labels.cost-centre, matches: '^cc-[0-9]+$'}
    message: >-
      label cost-centre is {{ metadata.labels['cost-centre'] or 'missing' }}; write cc-<digits>
    docs: Finance books GPU-hours by cost centre.
  - id: ACME003
    kind: advise
    title: experiment runs are named exp-
    when:
      all:
        - {fact: metadata.labels.stage, equals: experiment}
        - not: {fact: metadata.name, matches: '^exp-'}
    message: "{{ metadata.owner }}: experiment {{ metadata.name }} should be named exp-..."
    docs: naming convention.
"""


def manifest(tmp_path: Path, metadata: str) -> str:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    start = text.index("metadata:")
    end = text.index("cluster:", start)
    path = tmp_path / "run.yaml"
    path.write_text(text[:start] + f"metadata: {metadata}\n" + text[end:], encoding="utf-8")
    return str(path)


@pytest.fixture
def team(tmp_path: Path) -> str:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("metadata", "codes"),
    [
        ("{name: run1}", ["ACME001", "ACME002"]),
        ("{name: run1, owner: llm, labels: {cost-centre: cc-42}}", []),
        ("{name: run1, owner: llm, labels: {cost-centre: 'cc-42x'}}", ["ACME002"]),
        ("{name: run1, owner: llm, labels: {cost-centre: cc-1, stage: experiment}}", ["ACME003"]),
        ("{name: exp-1, owner: llm, labels: {cost-centre: cc-1, stage: experiment}}", []),
    ],
)
def test_metadata_facts_and_matches_judge_manifests(
    tmp_path: Path,
    team: str,
    capsys: pytest.CaptureFixture[str],
    metadata: str,
    codes: list[str],
) -> None:
    path = manifest(tmp_path, metadata)
    code = main(["review", "--policy", team, path])
    out = capsys.readouterr().out
    fired = sorted({c for c in re.findall(r" (ACME\d{3}) ", out)})
    assert fired == codes
    assert code == (1 if {"ACME001", "ACME002"} & set(codes) else 0)


def test_messages_read_labels_and_owner(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = manifest(tmp_path, "{name: run1}")
    main(["review", "--policy", team, path])
    out = capsys.readouterr().out
    assert "error ACME002 label cost-centre is missing; write cc-<digits>" in out
    assert "error ACME001 run run1 has no metadata.owner" in out
    path = manifest(tmp_path, "{name: r, owner: llm, labels: {cost-centre: x, stage: experiment}}")
    main(["review", "--policy", team, path])
    out = capsys.readouterr().out
    # the finding sits on the label it is about
    assert re.search(r"run\.yaml:\d+:\d+: error ACME002 label cost-centre is x;", out)
    assert "warning ACME003 llm: experiment r should be named exp-..." in out


def write_rule(tmp_path: Path, leaf: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(
        TEAM.split("  - id: ACME002")[0].replace(
            "when: {fact: metadata.owner, exists: false}", f"when: {leaf}"
        ),
        encoding="utf-8",
    )
    return str(path)


REFUSED = [
    # nesting: exponential in re, whatever the budget
    (r"^(?:a?){40}a{40}$", "can backtrack exponentially"),
    (r"(a|aa)+", "can backtrack exponentially"),
    (r"(x+x+)+y", "can backtrack exponentially"),
    (r"(a+)+$", "can backtrack exponentially"),
    (r"(a|ab)*c", "can backtrack exponentially"),
    (r"(a{1,2})+$", "can backtrack exponentially"),
    # no group at all, and still 2**40 ways: counted, not just shaped
    ("a?" * 40 + "a" * 40, "ways on a 256-character value (at most 262,144)"),
    (r".*.*.*x", "a match could try 4,362,470,401 ways"),
    (r"\1", "invalid regular expression: invalid group reference 1"),
    (r"(a)\1", "backreferences (\\1, (?P=name)) are not supported"),
    (r"(?P<x>a)(?P=x)", "backreferences"),
    (r"(?=a)b", "lookahead and lookbehind"),
    (r"a(?!b)", "negative lookahead and lookbehind"),
    (r"(?<=a)b", "lookahead and lookbehind"),
    (r"(a)?(?(1)a|b)", "conditional groups"),
    (r"(?>a+)b", "atomic groups"),
    (r"a++b", "possessive quantifiers"),
    (r"a{1000}", "repeat count 1000 is over 256"),
    (r"(?:)*a", "matches no characters"),
]

USEFUL = [
    (r"^llama-3", "llama-3-70b", "my-llama-3"),
    (r"^(prod|staging)-", "staging-eu", "dev-prod-1"),
    (r"-v[0-9]+$", "ckpt-v12", "ckpt-v12b"),
    (r"^[a-z0-9-]{1,64}$", "team-7", "Team_7"),
    (r"^cc-[0-9]+$", "cc-42", "cc-42x"),
    (r"^[a-z]+-[0-9]+$", "run-7", "run-7-b"),
    (r"^[a-z]+(-[a-z]+)?$", "ab-cd", "ab-cd-ef"),
    (r"(ab)+$", "xabab", "aba"),
    (r"^(?i:exp)-", "EXP-1", "x-exp-1"),
]


@pytest.mark.parametrize(
    ("leaf", "message"),
    [
        ("{fact: metadata.owner, matches: '(cc'}", "invalid regular expression: missing ), "),
        ("{fact: metadata.owner, matches: '(a+)+$'}", "can backtrack exponentially"),
        ("{fact: metadata.owner, matches: '(a|ab)*c'}", "can backtrack exponentially"),
        ("{fact: metadata.owner, matches: '^(?:a?){40}a{40}$'}", "can backtrack exponentially"),
        ("{fact: metadata.owner, matches: '.*.*.*x'}", "ways on a 256-character value"),
        ("{fact: metadata.owner, matches: '(a)\\1'}", "backreferences (\\1, (?P=name))"),
        ("{fact: metadata.owner, matches: '^(?=a)'}", "lookahead and lookbehind"),
        ("{fact: cluster.gpus, matches: '^6'}", "matches needs a str fact; cluster.gpus is int"),
        ("{fact: metadata.owner, matches: 7}", "matches takes a regular expression"),
        ("{fact: metadata.labels.a.b, equals: x}", "unknown fact 'metadata.labels.a.b'"),
        ("{fact: metadata.ownr, exists: true}", "(did you mean 'metadata.owner'?)"),
    ],
)
def test_bad_patterns_are_positioned_policy_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], leaf: str, message: str
) -> None:
    path = write_rule(tmp_path, leaf)
    assert main(["lint-policies", path]) == 2
    out = capsys.readouterr().out
    assert f"{path}:8:" in out  # the line of the condition
    assert message in out
    assert "Traceback" not in out


@pytest.mark.parametrize(("source", "message"), REFUSED)
def test_patterns_outside_the_subset_are_refused_with_the_reason(source: str, message: str) -> None:
    with pytest.raises(PatternProblem) as caught:
        compile_pattern(source)
    assert message in str(caught.value)


@pytest.mark.parametrize(("source", "matching", "other"), USEFUL)
def test_useful_patterns_are_accepted_and_judge_as_re_does(
    source: str, matching: str, other: str
) -> None:
    pattern = compile_pattern(source)
    assert pattern.search(matching) is not None
    assert pattern.search(other) is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (r"^llama-3", 1),  # anchored, no choice
        (r"^(prod|staging)-", 2),  # one way per branch
        (r"-v[0-9]+$", 257 * 256),  # 257 starts, 1..256 digits
        (r"^[a-z0-9-]{1,64}$", 64),
        (r"^[a-z]+(-[a-z])*$", 256 * 257),  # unbounded: counted as n + 1 - low, any width
        (r"^(-[a-z]){0,8}$", 9),  # bounded: 0..8 times
        (r"(?m)^a+$", 257 * 256),  # ^ after any newline: not anchored
        (r"\Aa?b", 2),
        ("a?" * 8, 257 * 2**8),
    ],
)
def test_ways_is_the_documented_product(source: str, expected: int) -> None:
    assert ways(source) == expected


def test_the_budget_and_the_length_cap() -> None:
    # the largest product the subset admits, then one way more than it
    compile_pattern(r"^[a-z]{0,63}[a-z]{0,63}[a-z]{0,63}!")
    assert ways(r"^[a-z]{0,63}[a-z]{0,63}[a-z]{0,63}!") == MAX_WAYS
    with pytest.raises(PatternProblem, match="262,144"):
        compile_pattern(r"^[a-z]{0,64}[a-z]{0,63}[a-z]{0,63}!")
    with pytest.raises(PatternProblem, match="at most 256"):
        compile_pattern("a" * 257)


def test_explain_and_facts_show_them(
    tmp_path: Path, team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "--policy", team, "ACME002"]) == 0
    out = capsys.readouterr().out
    assert "fact: metadata.labels.cost-centre" in out
    assert "matches: '^cc-[0-9]+$'" in out
    assert main(["facts"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^metadata\.owner +str ", out, re.M)
    assert re.search(r"^metadata\.labels\.<key> +str ", out, re.M)
