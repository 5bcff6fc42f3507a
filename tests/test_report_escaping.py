"""Text from files cannot drive a terminal or a CI log, in any report format.

dpguard runs in pull-request CI on files the pull request's author wrote. The GitHub Actions
runner reads every line of output for workflow commands (``::`` at the start of a line after
whitespace, the older ``##[`` anywhere in it), a terminal acts on ESC sequences, and bidi controls
reorder what a reviewer reads. Every format is rendered from paths and messages carrying all of
them, through the renderers' public `render` and end to end through the CLI on manifests on disk
(a label key quoted by a schema error, a free-text description on the plan page, a file name),
and checked: the only command lines are dpguard's own annotations, one per finding; no raw
control, bidi control or ``##[`` anywhere else; JSON and SARIF give the text back exactly.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from dpguard.check import FileResult
from dpguard.cli import main
from dpguard.findings import Finding, Severity
from dpguard.reporters import Report, formats, render
from dpguard.reporters.safe import (
    escape_data,
    escape_property,
    guard,
    json_text,
    safe_line,
    visible,
)
from dpguard.reporters.text import BOLD, DIM, RESET, STYLES

REPO = Path(__file__).resolve().parent.parent
SMALL = (REPO / "examples" / "small-dense.yaml").read_text(encoding="utf-8")

# A forged annotation on a line of its own, a carriage return, a colour and a bidi override, an
# already-escaped line break (which must stay text) and an old-style command.
EVIL = "\n::error file=x,line=1::forged\r\x1b[31m\u202e%0A##[add-mask]s"
EVIL_SHOWN = r"\n::error file=x,line=1::forged\r\x1b[31m\u202e%0A#\x23[add-mask]s"
# A path that starts with "::", breaks its line, clears the screen and isolates text; the
# Report-level one adds a byte that is not UTF-8 (a lone surrogate, as os.fsdecode gives it).
EVIL_NAME = "::warning file=y,line=2::p\n::stop-commands::t\x1b[2J\u2066.yaml"
EVIL_PATH = EVIL_NAME + "\udcff"
BIDI = "".join(map(chr, [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]))
RAW = set("\x00\x07\x1b\r\x85\x9b\u2028\u2029" + BIDI)
ANNOTATION = re.compile(r"::(error|warning|notice) file=[^:,]*,line=\d+,col=\d+,title=[^:,]*::")


def commands(out: str) -> list[str]:
    """The lines a GitHub runner would take for a workflow command (actions/runner
    ActionCommand.TryParseV2, then TryParse)."""
    return [line for line in out.split("\n") if line.lstrip().startswith("::") or "##[" in line]


def assert_inert(out: str, annotations: int = 0) -> None:
    """No raw control or bidi character; no command line but `annotations` of dpguard's own."""
    assert not RAW & set(out), sorted(RAW & set(out))
    out.encode("utf-8")  # a lone surrogate could not be written to stdout
    found = commands(out)
    assert len(found) == annotations, found
    assert all(ANNOTATION.match(line) for line in found), found


def unescape(text: str, mapping: dict[str, str]) -> str:
    """The runner's unescaping: each escape replaced in its table's order."""
    for escaped, char in mapping.items():
        text = text.replace(escaped, char)
    return text


DATA = {"%0D": "\r", "%0A": "\n", "%25": "%"}
PROPERTY = {"%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ",", "%25": "%"}


# ---- the escaping functions -----------------------------------------------------------------


def test_visible_escapes_what_a_terminal_or_a_log_acts_on() -> None:
    assert visible(EVIL) == EVIL_SHOWN
    assert visible("\t\x00\x7f\x9b\u2028\ufffe\udcff") == r"\t\x00\x7f\x9b\u2028\ufffe\udcff"
    assert visible("###[x]") == r"##\x23[x]"  # overlapping: no "##[" left
    assert all(visible(c) != c for c in BIDI)
    # benign text, ASCII or not, is left alone
    benign = "examples/a b.yaml:3:5: error S001 unknown key 'x' (50%) é 日本 ::a #[ [#]"
    assert visible(benign) == benign == safe_line(benign)


def test_guard_escapes_a_leading_command_colon_only() -> None:
    assert guard("::error x::y") == r"\x3a:error x::y"
    assert guard(" \u3000\xa0::y") == " \u3000\xa0\\x3a:y"  # the runner trims that whitespace
    for line in (":a::b", "a::b", "x: ::y", ""):
        assert guard(line) == line


def test_github_escaping_keeps_line_breaks_as_data() -> None:
    data = escape_data(EVIL)
    assert "\n" not in data and "\r" not in data and "\x1b" not in data
    assert unescape(data, DATA) == EVIL.replace("\x1b", r"\x1b").replace("\u202e", r"\u202e")
    prop = escape_property(EVIL_PATH)
    assert not set(prop) & set(":,\n\r\x1b")
    assert (
        unescape(prop, PROPERTY)
        == EVIL_NAME.replace("\x1b", r"\x1b").replace("\u2066", r"\u2066") + r"\udcff"
    )


def test_json_text_round_trips_and_holds_no_old_command() -> None:
    text = json_text({EVIL: [EVIL_PATH, "##[", 1]})
    assert json.loads(text) == {EVIL: [EVIL_PATH, "##[", 1]}
    assert "##[" not in text and text.endswith("\n")
    assert_inert(text)


# ---- every format, from a report ------------------------------------------------------------


def evil_report() -> Report:
    findings = (
        Finding(EVIL_PATH, 3, 5, "S001", Severity.ERROR, f"unknown key {EVIL} in training"),
        Finding(EVIL_PATH, 4, 1, "ADV001", Severity.WARNING, EVIL),
    )
    return Report((FileResult(EVIL_PATH, findings, None),))


@pytest.mark.parametrize("fmt", formats())
def test_every_format_keeps_file_text_inert(fmt: str) -> None:
    assert_inert(render(evil_report(), fmt), annotations=2 if fmt == "github" else 0)


def test_text_shows_the_file_text_escaped_on_one_line() -> None:
    out = render(evil_report(), "text")
    path = r"\x3a:warning file=y,line=2::p\n::stop-commands::t\x1b[2J\u2066.yaml\udcff"
    assert out.split("\n")[:2] == [
        f"{path}:3:5: error S001 unknown key {EVIL_SHOWN} in training",
        f"{path}:4:1: warning ADV001 {EVIL_SHOWN}",
    ]


def test_text_in_colour_has_only_dpguard_s_escape_sequences() -> None:
    out = render(evil_report(), "text", color=True)
    ours = {RESET, BOLD, DIM, "\x1b[1;32m", *STYLES.values()}
    assert set(re.findall("\x1b\\[[0-9;]*[A-Za-z]", out)) <= ours
    for sequence in ours:
        out = out.replace(sequence, "")
    assert_inert(out)


def test_github_annotations_carry_the_file_text_as_data() -> None:
    out = render(evil_report(), "github")
    shown = EVIL.replace("\x1b", r"\x1b").replace("\u202e", r"\u202e")
    path = EVIL_NAME.replace("\x1b", r"\x1b").replace("\u2066", r"\u2066") + r"\udcff"
    messages, paths = [], []
    for line in commands(out):  # as the runner parses: "::name k=v,k=v::data"
        head, _, data = line.removeprefix("::").partition("::")
        props = dict(p.split("=", 1) for p in head.split(" ", 1)[1].split(","))
        messages.append(unescape(data, DATA))
        paths.append(unescape(props["file"], PROPERTY))
    assert messages == [f"unknown key {shown} in training", shown]
    assert paths == [path, path]


def test_junit_is_valid_xml_whose_lines_are_dpguard_s() -> None:
    out = render(evil_report(), "junit")
    root = ET.fromstring(out)
    (suite,) = root.findall("testsuite")
    assert suite.attrib["name"] == visible(EVIL_PATH)
    failure = root.find(".//failure")
    assert failure is not None and failure.text is not None
    assert failure.attrib["message"] == f"unknown key {EVIL_SHOWN} in training"
    assert failure.text.split("\n") == [safe_line(evil_report().findings[0].format())]
    assert failure.text.startswith(r"\x3a:warning")


def test_markdown_rows_and_heading_stay_whole() -> None:
    out = render(evil_report(), "markdown")
    rows = [line for line in out.split("\n") if line.startswith(("| error", "| warning"))]
    assert len(rows) == 2
    # five unescaped pipes: four cells, none split by the file's text
    assert [len(re.findall(r"(?<!\\)\|", row)) for row in rows] == [5, 5]
    heading = next(line for line in out.split("\n") if line.startswith("### "))
    assert heading.count("`") == 2 and heading.endswith(": failed")


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_json_and_sarif_give_the_text_back(fmt: str) -> None:
    data = json.loads(render(evil_report(), fmt))
    if fmt == "json":
        (file,) = data["files"]
        assert file["path"] == EVIL_PATH
        messages = [f["message"] for f in file["findings"]]
    else:
        messages = [r["message"]["text"] for r in data["runs"][0]["results"]]
    assert messages == [f"unknown key {EVIL} in training", EVIL]


# ---- end to end: manifests on disk ----------------------------------------------------------


def labelled(text: str) -> str:
    """`text` with a label whose key is EVIL and whose value is not a string: S003 quotes the
    key in its message. JSON's string escapes are YAML's double-quoted ones."""
    return text.replace(
        "  owner: research\n", f"  owner: research\n  labels:\n    {json.dumps(EVIL)}: 5\n"
    )


def described(text: str) -> str:
    """`text` with EVIL in the free-text description, which the plan page shows."""
    return text.replace(
        "  owner: research\n", f"  owner: research\n  description: {json.dumps(EVIL)}\n"
    )


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, out


@pytest.mark.parametrize("fmt", formats())
def test_review_of_a_hostile_manifest(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path(EVIL_NAME).write_text(labelled(SMALL), encoding="utf-8")
    code, out = cli(capsys, "review", "--format", fmt, EVIL_NAME)
    assert code == 1
    assert_inert(out, annotations=1 if fmt == "github" else 0)
    if fmt == "json":
        (file,) = json.loads(out)["files"]
        assert file["path"] == EVIL_NAME
        assert [f["message"] for f in file["findings"]] == [
            f"metadata.labels.{EVIL} must be a string, not 5"
        ]
    if fmt == "text":
        assert f"error S003 metadata.labels.{EVIL_SHOWN} must be a string, not 5" in out


def test_the_plan_page_shows_a_hostile_description_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text(described(SMALL), encoding="utf-8")
    code, out = cli(capsys, "review", "--format", "markdown", "m.yaml")
    assert code == 0
    assert_inert(out)
    lines = out.split("\n")
    # the description's line breaks stay (it is Markdown text; the page breaks at CR too), but
    # the line that would be a command is not one, and its controls show
    i = lines.index(r"\x3a:error file=x,line=1::forged")
    assert lines[i + 1] == r"\x1b[31m\u202e%0A#\x23[add-mask]s"


def more_tokens(text: str) -> str:
    return text.replace("tokens: 1T", "tokens: 2T")


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "github"])
@pytest.mark.parametrize("edit", [labelled, more_tokens])
def test_diff_to_a_hostile_file(
    fmt: str,
    edit: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A file whose name is hostile: with more tokens, a cost notice at the changed key; with
    the label, also the added finding quoting the file, and the notice at its first line."""
    monkeypatch.chdir(tmp_path)
    Path("old.yaml").write_text(SMALL, encoding="utf-8")
    Path(EVIL_NAME).write_text(edit(SMALL), encoding="utf-8")
    _, out = cli(capsys, "diff", "old.yaml", EVIL_NAME, "--format", fmt)
    assert_inert(out, annotations=(2 if edit is labelled else 1) if fmt == "github" else 0)
    if fmt == "json":
        (change,) = json.loads(out)["changes"]
        assert change["path"] == EVIL_NAME
        added = [f["message"] for f in change["findings"]["added"]]
        assert added == (
            [f"metadata.labels.{EVIL} must be a string, not 5"] if edit is labelled else []
        )
