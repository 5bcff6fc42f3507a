"""Every report format, checked for content: JSON and SARIF against their schemas (the published
`schemas/report.schema.json`; the official OASIS SARIF 2.1.0 schema under tests/schemas/), JUnit
parsed with xml.etree, GitHub workflow-command escaping, the Markdown comment, waived findings in
each format, and text colour on a terminal only.

Runs from the repository root with relative paths (as the goldens do).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dpguard.cli import main
from dpguard.codes import CODES
from dpguard.findings import Finding, Severity
from dpguard.policy.load import load_policies
from dpguard.reporters.github import annotation, escape_data, escape_property
from dpguard.reporters.markdown import cell, demote

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "examples").glob("*.yaml"))
VALID = [e for e in EXAMPLES if e != "examples/mistakes.yaml"]
REPORT_SCHEMA = json.loads((REPO / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
SARIF_SCHEMA_PATH = REPO / "tests" / "schemas" / "sarif-schema-2.1.0.json"
SARIF_SCHEMA = json.loads(SARIF_SCHEMA_PATH.read_text(encoding="utf-8"))
SARIF_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
DATE = "2026-01-15"


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("NO_COLOR", raising=False)


def review(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["review", "--date", DATE, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def report_json(capsys: pytest.CaptureFixture[str], *paths: str) -> dict[str, Any]:
    _, out, _ = review(capsys, "--format", "json", *paths)
    data: dict[str, Any] = json.loads(out)
    return data


def errors(validator: Any, instance: Any) -> list[str]:
    return sorted(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(instance)
    )


REPORT_VALIDATOR = jsonschema.Draft202012Validator(
    REPORT_SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)
SARIF_VALIDATOR = jsonschema.Draft4Validator(
    SARIF_SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
)


# ---- json -------------------------------------------------------------------------------------


def test_report_schema_is_a_valid_2020_12_schema() -> None:
    assert REPORT_SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert REPORT_SCHEMA["$id"] == "https://dpguard.dev/schemas/report/v1.json"
    jsonschema.Draft202012Validator.check_schema(REPORT_SCHEMA)


def _undescribed(node: Any, path: str = "") -> list[str]:
    missing: list[str] = []
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            if not isinstance(sub, dict) or not sub.get("description"):
                missing.append(f"{path}/properties/{name}")
        for name, sub in node.get("$defs", {}).items():
            if not sub.get("description"):
                missing.append(f"{path}/$defs/{name}")
        for key, sub in node.items():
            missing += _undescribed(sub, f"{path}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            missing += _undescribed(sub, f"{path}/{i}")
    return missing


def test_every_property_of_the_report_schema_is_described() -> None:
    assert _undescribed(REPORT_SCHEMA) == []
    assert _undescribed({"properties": {"x": {"type": "string"}}}) == ["/properties/x"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_json_report_of_each_example_matches_the_schema(
    capsys: pytest.CaptureFixture[str], example: str
) -> None:
    assert errors(REPORT_VALIDATOR, report_json(capsys, example)) == []


def test_json_report_of_all_examples_matches_the_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = report_json(capsys, *EXAMPLES)
    assert errors(REPORT_VALIDATOR, report) == []
    assert [f["path"] for f in report["files"]] == EXAMPLES
    # large-dense (Llama 3 405B at P = 16, M = 16) and frontier-moe (DeepSeek-V3 at the usable
    # line once NCCL's buffers are counted) draw ADV004: likely, not certainly, OOM.
    assert report["summary"] == {"errors": 7, "failed": 1, "files": 5, "warnings": 5}
    assert {p["name"] for p in report["policies"]} == {"dpguard-core", "dpguard-planner"}


def test_the_schema_is_strict(capsys: pytest.CaptureFixture[str]) -> None:
    report = report_json(capsys, "examples/frontier-moe.yaml")
    report["files"][0]["findings"][0]["rule"] = "ADV002"  # a field the schema does not declare
    report["files"][0]["plan"]["candidates"][0]["bubble_fraction"] = "3%"
    del report["summary"]["failed"]
    assert errors(REPORT_VALIDATOR, report) == [
        "files/0/findings/0: Additional properties are not allowed ('rule' was unexpected)",
        "files/0/plan/candidates/0/bubble_fraction: '3%' is not of type 'number', 'null'",
        "summary: 'failed' is a required property",
    ]


# ---- sarif ------------------------------------------------------------------------------------


def test_the_sarif_schema_copy_is_the_official_one() -> None:
    assert hashlib.sha256(SARIF_SCHEMA_PATH.read_bytes()).hexdigest() == SARIF_SHA256
    assert SARIF_SCHEMA["$schema"] == "http://json-schema.org/draft-04/schema#"
    assert SARIF_SCHEMA["id"] == (
        "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    )
    assert "sha256 `" + SARIF_SHA256 + "`" in (REPO / "tests" / "schemas" / "README.md").read_text(
        encoding="utf-8"
    )


@pytest.mark.parametrize("paths", [[e] for e in EXAMPLES] + [EXAMPLES], ids=[*EXAMPLES, "all"])
def test_sarif_matches_the_oasis_schema(
    capsys: pytest.CaptureFixture[str], paths: list[str]
) -> None:
    _, out, _ = review(capsys, "--format", "sarif", *paths)
    assert errors(SARIF_VALIDATOR, json.loads(out)) == []


def test_the_sarif_validator_catches_a_broken_log(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = review(capsys, "--format", "sarif", "examples/mistakes.yaml")
    log = json.loads(out)
    log["runs"][0]["results"][0]["level"] = "fatal"
    log["runs"][0]["results"][1]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    found = errors(SARIF_VALIDATOR, log)
    assert found == [
        "runs/0/results/0/level: 'fatal' is not one of ['none', 'note', 'warning', 'error']",
        "runs/0/results/1/locations/0/physicalLocation/region/startLine: "
        "0 is less than the minimum of 1",
    ]


def test_sarif_rules_results_and_locations(capsys: pytest.CaptureFixture[str]) -> None:
    paths = ["examples/frontier-moe.yaml", "examples/mistakes.yaml"]
    _, out, _ = review(capsys, "--format", "sarif", *paths)
    log = json.loads(out)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"], driver["informationUri"]) == (
        "dpguard",
        "0.1.0",
        "https://dpguard.dev/",
    )
    report = report_json(capsys, *paths)
    findings = [(f["path"], x) for f in report["files"] for x in f["findings"]]
    ids = [r["id"] for r in driver["rules"]]
    assert ids == sorted({x["code"] for _, x in findings})
    assert ids == [
        "ADV001",
        "ADV002",
        "ADV004",
        "S001",
        "S004",
        "X001",
        "X005",
        "X006",
        "X010",
        "X012",
    ]
    policies = load_policies([])
    rules = {r["id"]: r for r in driver["rules"]}
    adv001 = policies.get("ADV001")
    assert adv001 is not None
    assert rules["ADV001"]["help"]["text"] == adv001.docs.strip()
    assert rules["ADV001"]["shortDescription"]["text"] == adv001.title
    assert rules["ADV001"]["defaultConfiguration"]["level"] == "warning"
    assert rules["ADV001"]["properties"]["policy"] == "dpguard-core"
    assert rules["X012"]["shortDescription"]["text"] == CODES["X012"]
    assert rules["X012"]["help"]["text"] == (
        "X012: unknown accelerator. A manifest cross-field check code; docs/manifest.md explains "
        "every Y/S/X code."
    )
    assert rules["S001"]["defaultConfiguration"]["level"] == "error"
    assert len(run["results"]) == len(findings)
    for result, (path, finding) in zip(run["results"], findings, strict=True):
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"] == finding["code"]
        assert result["level"] == {"error": "error", "warning": "warning"}[finding["severity"]]
        assert result["message"]["text"] == finding["message"]
        (location,) = result["locations"]
        assert location["physicalLocation"] == {
            "artifactLocation": {"uri": path},
            "region": {"startLine": finding["line"], "startColumn": finding["column"]},
        }
        assert "suppressions" not in result


def test_sarif_uris(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my runs").mkdir()
    inside = tmp_path / "my runs" / "a#1.yaml"
    shutil.copy(REPO / "examples" / "mistakes.yaml", inside)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    shutil.copy(REPO / "examples" / "mistakes.yaml", outside)
    try:
        monkeypatch.chdir(tmp_path)
        _, out, _ = review(capsys, "--format", "sarif", str(inside), str(outside))
    finally:
        outside.unlink()
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in json.loads(out)["runs"][0]["results"]
    }
    assert uris == {"my%20runs/a%231.yaml", outside.as_uri()}


# ---- junit ------------------------------------------------------------------------------------


def junit(capsys: pytest.CaptureFixture[str], *argv: str) -> ET.Element:
    _, out, _ = review(capsys, "--format", "junit", *argv)
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites ')
    return ET.fromstring(out.encode("utf-8"))


def cases(suite: ET.Element) -> dict[str, ET.Element]:
    return {c.attrib["name"].split(" ")[0]: c for c in suite.iter("testcase")}


def test_junit_one_suite_per_manifest_one_case_per_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = junit(capsys, *EXAMPLES)
    assert root.tag == "testsuites"
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == (
        "16",
        "7",
        "0",
    )
    suites = {s.attrib["name"]: s for s in root.findall("testsuite")}
    assert list(suites) == EXAMPLES
    policies = load_policies([])
    for suite in suites.values():
        (prop,) = suite.findall("properties/property")
        assert prop.attrib == {
            "name": "dpguard.policies",
            "value": ", ".join(f"{s.name} {s.version} ({s.digest})" for s in policies.sets),
        }
    moe = cases(suites["examples/frontier-moe.yaml"])
    assert list(moe) == ["schema", "ADV002", "ADV001", "ADV004"]
    assert moe["ADV001"].attrib == {
        "classname": "examples/frontier-moe.yaml",
        "name": "ADV001 M/P outside 8..16",
    }
    assert moe["ADV001"].find("failure") is None  # a warning does not block with --fail-on error
    assert moe["ADV001"].findtext("system-out") == (
        "examples/frontier-moe.yaml:59:1: warning ADV001 M/P = 120/16 = 7.50 is outside 8..16"
    )
    assert list(moe["schema"]) == []
    mistakes = suites["examples/mistakes.yaml"]
    assert (mistakes.attrib["tests"], mistakes.attrib["failures"]) == ("7", "7")
    bad = cases(mistakes)
    assert list(bad) == ["X001", "X012", "X005", "X006", "S004", "S001", "X010"]  # no schema case
    failure = bad["S001"].find("failure")
    assert failure is not None
    assert failure.attrib == {
        "message": "unknown key 'precison' in training (did you mean 'precision'?)",
        "type": "S001",
    }
    assert failure.text == (
        "examples/mistakes.yaml:26:3: error S001 unknown key 'precison' in training "
        "(did you mean 'precision'?)"
    )
    for name in ("examples/no-pipeline.yaml", "examples/small-dense.yaml"):
        assert list(cases(suites[name])) == ["schema"]


def test_junit_fail_on_warning_turns_warnings_into_failures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = junit(capsys, "--fail-on", "warning", "examples/frontier-moe.yaml")
    (suite,) = root.findall("testsuite")
    assert suite.attrib["failures"] == "3"
    adv002 = cases(suite)["ADV002"].find("failure")
    assert adv002 is not None
    assert adv002.attrib["type"] == "ADV002"


# ---- github -----------------------------------------------------------------------------------


def test_github_escaping() -> None:
    assert escape_data("100% done\r\nnext:a,b") == "100%25 done%0D%0Anext:a,b"
    assert escape_property("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"
    finding = Finding("dir,x/a:b.yaml", 3, 5, "X001", Severity.ERROR, "50% of\nthe GPUs")
    assert annotation(finding) == (
        "::error file=dir%2Cx/a%3Ab.yaml,line=3,col=5,title=X001::50%25 of%0Athe GPUs"
    )


def test_github_annotations_for_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = review(capsys, "--format", "github", *EXAMPLES)
    assert code == 1
    lines = out.splitlines()
    commands = [line for line in lines if line.startswith("::")]
    # 7 errors + 5 warnings, then one decision notice per valid manifest (4).
    assert len(commands) == 16
    assert [c.split(" ")[0] for c in commands[12:]] == ["::notice"] * 4
    assert commands[0] == (
        "::warning file=examples/frontier-moe.yaml,line=25,col=3,title=ADV002::61 layers over 16 "
        "pipeline stages is 3.81 per stage: stages will be unbalanced"
    )
    assert commands[5] == (
        "::error file=examples/mistakes.yaml,line=7,col=3,title=X001::1000 GPUs is not divisible "
        "by tensor x pipeline x context = 3 x 8 x 1 = 24"
    )
    assert lines[-1] == "5 manifests checked: 4 passed, 1 failed (7 errors, 5 warnings)"


def test_github_a_path_cannot_inject_a_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(REPO / "examples" / "frontier-moe.yaml", tmp_path / "::stop-commands::x.yaml")
    monkeypatch.chdir(tmp_path)
    _, out, _ = review(capsys, "--format", "github", "::stop-commands::x.yaml")
    lines = out.splitlines()
    assert lines[0].startswith("::warning file=%3A%3Astop-commands%3A%3Ax.yaml,line=25,col=3,")
    # The decision is a notice whose file property is escaped like every other annotation.
    assert lines[3].startswith(
        "::notice file=%3A%3Astop-commands%3A%3Ax.yaml,line=22,col=3,title=DT001::"
        "decision: dualpipe"
    )
    commands = [line.split(" ")[0] for line in lines if line.startswith("::")]
    assert commands == ["::warning", "::warning", "::warning", "::notice"]


# ---- markdown ---------------------------------------------------------------------------------


def test_markdown_cell_and_demote() -> None:
    assert cell("a|b *c* <d> [e](f) `g`\nh_i\\") == (r"a\|b \*c\* \<d\> \[e\](f) \`g\` h\_i\\")
    text = "# A\n\n## B\n```\n# not a heading\n```\n###### deepest\n"
    assert demote(text) == "#### A\n\n##### B\n```\n# not a heading\n```\n###### deepest"


def test_markdown_comment(capsys: pytest.CaptureFixture[str]) -> None:
    from dpguard.check import check_file
    from dpguard.planner.render import render_markdown

    _, out, _ = review(capsys, "--format", "markdown", *EXAMPLES)
    lines = out.splitlines()
    assert lines[:4] == [
        "<!-- dpguard-review -->",
        "## dpguard review",
        "",
        "**5 manifests checked: 4 passed, 1 failed (7 errors, 5 warnings)**",
    ]
    headings = [line for line in lines if line.startswith("### ")]
    assert headings == [
        "### `examples/frontier-moe.yaml`: passed",
        "### `examples/large-dense.yaml`: passed",
        "### `examples/mistakes.yaml`: failed",
        "### `examples/no-pipeline.yaml`: passed",
        "### `examples/small-dense.yaml`: passed",
    ]
    table = lines.index("### `examples/mistakes.yaml`: failed") + 2
    assert lines[table : table + 3] == [
        "| severity | rule | line:col | message |",
        "|---|---|---|---|",
        "| error | X001 | 7:3 | 1000 GPUs is not divisible by tensor x pipeline x context = "
        "3 x 8 x 1 = 24 |",
    ]
    assert (
        "| error | S004 | 25:3 | training.micro\\_batch\\_size is 0; it must be at least 1 |"
        in (lines)
    )
    policies = load_policies([])
    for example in VALID:  # every manifest with a plan embeds its one-page plan
        result = check_file(example, None, policies, plan_page=True)
        assert result.plan is not None
        page = demote(render_markdown(result.plan, policies)).rstrip("\n")
        assert page.startswith("#### Pipeline plan: ")
        assert page in out
    assert out.count("#### Pipeline plan: ") == 4
    assert lines[-1] == (
        "<sub>policies: "
        + ", ".join(f"{s.name} {s.version} ({s.digest})" for s in policies.sets)
        + "</sub>"
    )


# ---- waived findings, in every format ----------------------------------------------------------


@pytest.fixture
def waived(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "runs").mkdir()
    shutil.copy(REPO / "examples" / "frontier-moe.yaml", tmp_path / "runs" / "moe.yaml")
    (tmp_path / ".dpguard.yaml").write_text("waivers: waivers.yaml\n", encoding="utf-8")
    (tmp_path / "waivers.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: dpguard/v1
            kind: Waivers
            waivers:
              - rule: ADV001
                match: runs/*.yaml
                reason: M/P fixed by the data loader
                owner: llm-platform
                expires: 2026-02-01
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_waived_finding_in_every_format(waived: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--fail-on", "warning", "runs/moe.yaml")
    code, out, err = review(capsys, "--format", "json", *argv)
    assert (code, err) == (1, "")  # ADV002 (and ADV004) still block
    report = json.loads(out)
    assert errors(REPORT_VALIDATOR, report) == []
    assert [(f["code"], f["waived"]) for f in report["files"][0]["findings"]] == [
        ("ADV002", False),
        ("ADV001", True),
        ("ADV004", False),
    ]

    _, out, _ = review(capsys, "--format", "sarif", *argv)
    log = json.loads(out)
    assert errors(SARIF_VALIDATOR, log) == []
    adv002, adv001, adv004 = log["runs"][0]["results"]
    assert "suppressions" not in adv004
    assert "suppressions" not in adv002
    assert adv001["suppressions"] == [
        {
            "kind": "external",
            "status": "accepted",
            # the waiver's own words, owner and expiry, and where it is written
            "justification": "M/P fixed by the data loader (owner llm-platform, waiver expires "
            "2026-02-01)",
            "properties": {
                "reason": "M/P fixed by the data loader",
                "owner": "llm-platform",
                "expires": "2026-02-01",
            },
            "location": {
                "physicalLocation": {
                    "artifactLocation": {"uri": "waivers.yaml"},
                    "region": {"startLine": 4, "startColumn": 5},
                }
            },
        }
    ]

    root = junit(capsys, *argv)
    found = cases(root.findall("testsuite")[0])
    assert found["ADV001"].find("failure") is None
    assert found["ADV001"].findtext("system-out") == (
        "runs/moe.yaml:59:1: warning ADV001 M/P = 120/16 = 7.50 is outside 8..16 (waived)"
    )
    assert found["ADV002"].find("failure") is not None

    _, out, _ = review(capsys, "--format", "github", *argv)
    assert out.splitlines()[:2] == [
        "::warning file=runs/moe.yaml,line=25,col=3,title=ADV002::61 layers over 16 pipeline "
        "stages is 3.81 per stage: stages will be unbalanced",
        "::notice file=runs/moe.yaml,line=59,col=1,title=ADV001::M/P = 120/16 = 7.50 is outside "
        "8..16 (waived)",
    ]

    _, out, _ = review(capsys, "--format", "markdown", *argv)
    assert "| warning (waived) | ADV001 | 59:1 | M/P = 120/16 = 7.50 is outside 8..16 |" in out
    assert "### `runs/moe.yaml`: failed" in out


# ---- text colour ------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


COLOURED = (
    "examples/frontier-moe.yaml:59:1: \x1b[33mwarning\x1b[0m \x1b[1mADV001\x1b[0m "
    "M/P = 120/16 = 7.50 is outside 8..16"
)
PLAIN = "examples/frontier-moe.yaml:59:1: warning ADV001 M/P = 120/16 = 7.50 is outside 8..16"


def text_on(stdout: io.StringIO, monkeypatch: pytest.MonkeyPatch, *argv: str) -> str:
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["review", "--date", DATE, *argv]) == 0
    return stdout.getvalue()


def test_text_is_coloured_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    out = text_on(Terminal(), monkeypatch, "examples/frontier-moe.yaml")
    assert out.splitlines()[1] == COLOURED
    assert out.splitlines()[-1] == (
        "\x1b[1;32m1 manifest checked: 1 passed, 0 failed (0 errors, 3 warnings)\x1b[0m"
    )


@pytest.mark.parametrize("value", ["1", "0", "false"])
def test_no_color_turns_colour_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("NO_COLOR", value)
    out = text_on(Terminal(), monkeypatch, "examples/frontier-moe.yaml")
    assert "\x1b" not in out
    assert out.splitlines()[1] == PLAIN


def test_empty_no_color_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: present *and not empty*
    assert (
        text_on(Terminal(), monkeypatch, "examples/frontier-moe.yaml").splitlines()[1] == COLOURED
    )


def test_no_colour_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    out = text_on(io.StringIO(), monkeypatch, "examples/frontier-moe.yaml")
    assert "\x1b" not in out
    assert out.splitlines()[1] == PLAIN


def test_no_colour_in_an_output_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    assert text_on(Terminal(), monkeypatch, "-o", str(target), "examples/frontier-moe.yaml") == ""
    assert target.read_text(encoding="utf-8").splitlines()[1] == PLAIN


def test_review_offers_exactly_the_registered_formats() -> None:
    """review names its --format choices without importing the renderers (a fast --help and
    fast commands that write no review report); they must stay the registry's."""
    from dpguard.commands.review import FORMATS
    from dpguard.reporters import formats

    assert tuple(formats()) == FORMATS


def test_fail_on_never_reports_every_finding_and_blocks_nothing(capsys, monkeypatch):
    """An advisory rollout: `--fail-on never` prints the same findings (errors included) and
    exits 0."""
    monkeypatch.chdir(REPO)
    default = main(["review", "examples/mistakes.yaml"])
    blocked = capsys.readouterr().out
    code = main(["review", "--fail-on", "never", "examples/mistakes.yaml"])
    advisory = capsys.readouterr().out
    assert (default, code) == (1, 0)
    assert [line for line in advisory.splitlines() if " error " in line] == [
        line for line in blocked.splitlines() if " error " in line
    ]
