"""Policy lint that knows each fact's domain, and hints that never change meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

RULE = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {{name: team, version: 1.0.0}}
rules:
  - id: TEAM001
    kind: advise
    title: a team rule
    when: {when}
    message: fired
    docs: a team's policy
"""


def ok_line(extra: str = "") -> str:
    """The summary with the team's one rule over however many the shipped sets hold."""
    from dpguard.policy.load import load_policies

    shipped = load_policies([])
    return f"{len(shipped.sets) + 1} policy sets, {len(shipped.rules) + 1} rules: ok{extra}"


def lint(tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str) -> tuple[int, str]:
    path = tmp_path / "team.yaml"
    path.write_text(RULE.format(when=when), encoding="utf-8")
    code = main(["lint-policies", str(path)])
    return code, capsys.readouterr().out.replace(str(path), "team.yaml")


@pytest.mark.parametrize(
    ("when", "message"),
    [
        (
            "{fact: cluster.accelerator, equals: H100}",
            "team.yaml:8:39: 'H100' can never match cluster.accelerator: manifests are "
            "normalised to the catalog id, so write 'H100-SXM'",
        ),
        (
            "{fact: cluster.accelerator, equals: h100-sxm}",
            "'h100-sxm' can never match cluster.accelerator: manifests are normalised to the "
            "catalog id, so write 'H100-SXM'",
        ),
        (
            "{fact: cluster.accelerator, in: [A100]}",
            "'A100' is not an accelerator in the catalog (did you mean 'A100-40GB' or "
            "'A100-80GB'?)",
        ),
        (
            "{fact: cluster.accelerator, not_in: [H30]}",
            "'H30' is not an accelerator in the catalog; possible: A100-40GB,",
        ),
        ("{fact: cluster.accelerator, equals: Custom}", "so write 'custom'"),
        ("{fact: parallelism.schedule, equals: DualPipe}", "(did you mean 'dualpipe'?)"),
        ("{fact: training.precision, in: [BF16]}", "(did you mean 'bf16'?)"),
        (
            "{all: [{fact: cluster.gpus, lt: 8}, {fact: cluster.gpus, gt: 16}]}",
            "team.yaml:5:5: rule TEAM001 can never fire: its condition contradicts itself",
        ),
        (
            "{all: [{fact: model.architecture, equals: moe}, "
            "{fact: model.architecture, not_equals: moe}]}",
            "rule TEAM001 can never fire",
        ),
        (
            "{all: [{fact: model.experts, exists: false}, {fact: model.experts, gt: 8}]}",
            "rule TEAM001 can never fire",
        ),
        (
            "{all: [{fact: parallelism.schedule, not_in: [gpipe, 1f1b, interleaved-1f1b, zb1p]}, "
            "{fact: parallelism.schedule, not_in: [dualpipe, dualpipev]}]}",
            "rule TEAM001 can never fire",
        ),
    ],
)
def test_values_outside_a_facts_domain_are_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str, message: str
) -> None:
    code, out = lint(tmp_path, capsys, when)
    assert code == 2
    assert message in out


@pytest.mark.parametrize(
    "when",
    [
        "{fact: cluster.accelerator, equals: H100-SXM}",
        "{fact: cluster.accelerator, in: [custom, GB200]}",
        "{any: [{fact: cluster.gpus, lt: 8}, {fact: cluster.gpus, gt: 16}]}",
        "{not: {all: [{fact: cluster.gpus, lt: 8}, {fact: cluster.gpus, gt: 16}]}}",
        "{fact: metadata.owner, matches: '^x'}",
    ],
)
def test_possible_conditions_lint_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str
) -> None:
    code, out = lint(tmp_path, capsys, when)
    assert (code, out) == (0, ok_line() + "\n")


@pytest.mark.parametrize(
    ("when", "warnings"),
    [
        (
            "{fact: cluster.gpus, lt: 1}",
            [
                "team.yaml:8:32: warning TEAM001: cluster.gpus lt 1 is never true: "
                "cluster.gpus is between 1 and 1048576",
                "team.yaml:5:5: warning TEAM001 can never fire: no manifest's facts are in range "
                "for every test of any branch",
            ],
        ),
        (
            "{fact: proposal.bubble, gt: 1}",
            [
                "team.yaml:8:35: warning TEAM001: proposal.bubble gt 1 is never true: "
                "proposal.bubble is between 0 and 1",
                "team.yaml:5:5: warning TEAM001 can never fire: no manifest's facts are in range "
                "for every test of any branch",
            ],
        ),
        (
            "{fact: training.zero_stage, ge: 0}",
            [
                "team.yaml:8:39: warning TEAM001: training.zero_stage ge 0 is true whenever the "
                "fact is set: training.zero_stage is between 0 and 3 (test exists: true if that "
                "is what is meant)"
            ],
        ),
        (
            "{fact: model.total_params, lt: 1}",
            [
                "team.yaml:8:38: warning TEAM001: model.total_params lt 1 is never true: "
                "model.total_params is at least 1",
                "team.yaml:5:5: warning TEAM001 can never fire: no manifest's facts are in range "
                "for every test of any branch",
            ],
        ),
    ],
)
def test_impossible_numeric_comparisons_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str, warnings: list[str]
) -> None:
    code, out = lint(tmp_path, capsys, when)
    assert code == 0
    lines = out.splitlines()
    assert lines[:-1] == warnings
    plural = "s" if len(warnings) > 1 else ""
    assert lines[-1] == ok_line(f" ({len(warnings)} warning{plural})")


def test_shipped_sets_lint_without_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-policies", "--config", str(EXAMPLES / ".." / "pyproject.toml")]) == 2
    capsys.readouterr()  # not a config: exit 2 (schema), checked elsewhere
    from dpguard.commands.lint_policies import domain_warnings
    from dpguard.policy.load import load_policies

    assert domain_warnings(load_policies([])) == []


@pytest.mark.parametrize(
    ("written", "meant"),
    [("gte", "ge"), ("lte", "le"), ("eq", "equals"), ("neq", "not_equals"), (">=", "ge")],
)
def test_operator_hints_keep_the_meaning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str, meant: str
) -> None:
    code, out = lint(tmp_path, capsys, f"{{fact: cluster.gpus, '{written}': 8}}")
    assert code == 2
    assert f"unknown operator {written!r} (did you mean {meant!r}?)" in out


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        # an 80 GB H100 is the SXM or the PCIe card: both offered (and the NVL, same chip)
        ("h100-80gb", " (did you mean 'H100-SXM' or 'H100-PCIe' or 'H100-NVL'?)"),
        # another form factor is another part: no A100-80GB (SXM4) for a PCIe card
        ("a100-pcie-80gb", ""),
        ("H200 NVL", ""),
        ("H100-PCIe-94GB", " (did you mean 'H100-PCIe'?)"),
        ("Instinct MI325X", ""),  # an alias with a space: found, no X012 at all
        ("H30", ""),  # a different chip: no H20, no H200
        ("H900", ""),
    ],
)
def test_accelerator_suggestions_prefer_the_same_chip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str, hint: str
) -> None:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    path = tmp_path / "m.yaml"
    path.write_text(text.replace("accelerator: A100-80GB", f"accelerator: {written}"), "utf-8")
    main(["review", str(path)])
    out = capsys.readouterr().out
    x012 = [line for line in out.splitlines() if " X012 " in line]
    if written == "Instinct MI325X":
        assert x012 == []
        return
    assert len(x012) == 1
    assert f"unknown accelerator {written!r}{hint}; known: " in x012[0]
