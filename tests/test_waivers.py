"""Waivers: waived, expired, unknown, non-waivable, too far ahead, unused."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from dpguard.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "runs").mkdir()
    shutil.copy(EXAMPLES / "frontier-moe.yaml", tmp_path / "runs" / "moe.yaml")
    (tmp_path / ".dpguard.yaml").write_text("waivers: waivers.yaml\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_waivers(repo: Path, *entries: str) -> None:
    body = "".join(textwrap.indent(textwrap.dedent(e), "  ") for e in entries)
    text = f"apiVersion: dpguard/v1\nkind: Waivers\nwaivers:\n{body}"
    (repo / "waivers.yaml").write_text(text, encoding="utf-8")


ADV001 = """\
- rule: ADV001
  match: runs/*.yaml
  reason: M/P fixed by the data loader
  owner: llm-platform
  expires: {expires}
"""


def review(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["review", "runs/moe.yaml", "--date", "2026-01-10", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_waived_finding_is_kept_and_marked(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_waivers(repo, ADV001.format(expires="2026-02-01"))
    code, out, err = review(capsys, "--fail-on", "warning")
    assert code == 1  # ADV002 still blocks
    assert "warning ADV001 M/P = 120/16 = 7.50 is outside 8..16 (waived)" in out
    assert err == ""


def test_waiver_on_absolute_glob_and_exit(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    adv002 = ADV001.replace("ADV001", "ADV002").replace("runs/*.yaml", "'*moe.yaml'")
    adv004 = ADV001.replace("ADV001", "ADV004").replace("runs/*.yaml", "'*moe.yaml'")
    waivers = (ADV001, adv002, adv004)
    write_waivers(repo, *(w.format(expires="2026-01-10") for w in waivers))
    code, out, err = review(capsys, "--fail-on", "warning")
    assert code == 0, err
    assert out.count("(waived)") == 3


def test_expired_waiver_brings_the_finding_back(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_waivers(repo, ADV001.format(expires="2026-01-09"))
    _, out, err = review(capsys)
    assert "is outside 8..16 (waiver expired 2026-01-09)\n" in out
    assert "(waived)" not in out
    assert err == ""


def test_unused_waiver_warns_without_failing(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_waivers(repo, ADV001.format(expires="2026-02-01").replace("runs/", "other/"))
    code, _, err = review(capsys)
    assert code == 0
    assert err == ("waivers.yaml:4:5: warning unused waiver for ADV001 (match other/*.yaml)\n")


@pytest.mark.parametrize(
    ("rule", "expires", "message"),
    [
        ("ADV01", "2026-02-01", "4:5: waiver of unknown rule ADV01 (did you mean 'ADV001'?)"),
        (
            "HR003",
            "2026-02-01",
            "4:5: rule HR003 is not waivable (reject rules are waivable only when the policy "
            "says waivable: true)",
        ),
        (
            "ADV001",
            "2026-04-11",
            "8:5: waiver expires 2026-04-11, more than 90 days after 2026-01-10 "
            "(latest allowed: 2026-04-10)",
        ),
    ],
)
def test_bad_waivers_are_config_errors(
    repo: Path, capsys: pytest.CaptureFixture[str], rule: str, expires: str, message: str
) -> None:
    write_waivers(repo, ADV001.replace("ADV001", rule).format(expires=expires))
    code, out, err = review(capsys)
    assert code == 2
    assert out == ""
    assert f"{repo / 'waivers.yaml'}:{message}" in err


def test_ninety_days_is_allowed(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_waivers(repo, ADV001.format(expires="2026-04-10"))
    assert review(capsys)[0] == 0


def test_waiver_needs_reason(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_waivers(
        repo,
        ADV001.format(expires="2026-02-01").replace("  reason: M/P fixed by the data loader\n", ""),
    )
    code, _, err = review(capsys)
    assert code == 2
    assert f"{repo / 'waivers.yaml'}:4:5: waivers[0] is missing the required key 'reason'" in err


def test_fail_on_from_config_and_flag_wins(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".dpguard.yaml").write_text("fail_on: warning\n", encoding="utf-8")
    assert review(capsys)[0] == 1
    assert review(capsys, "--fail-on", "error")[0] == 0


def test_json_findings_carry_the_waiver(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A waived finding in the JSON report says who accepted it, why, until when and where,
    as SARIF's suppression does; unwaived findings have no waiver key."""
    import json

    import jsonschema

    from dpguard.resources import schema

    write_waivers(repo, ADV001.format(expires="2026-02-01"))
    _code, out, _err = review(capsys, "--format", "json")
    report = json.loads(out)
    jsonschema.validate(report, schema("report.schema.json"))
    findings = report["files"][0]["findings"]
    waived = [f for f in findings if f["waived"]]
    assert [f["code"] for f in waived] == ["ADV001"]
    waiver = waived[0]["waiver"]
    assert waiver.pop("location") == "waivers.yaml:4:5"  # relative to the cwd, its first key
    assert waiver == {
        "reason": "M/P fixed by the data loader",
        "owner": "llm-platform",
        "expires": "2026-02-01",
    }
    assert all("waiver" not in f for f in findings if not f["waived"])
