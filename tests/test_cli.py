"""The command line, in process: `dpguard.cli.main([...])` with captured output.

Exit codes (dpguard.exitcodes): 0 every manifest passes, 1 at least one fails, 2 dpguard cannot
run as asked, 3 internal error. Each test runs in its own empty directory so that no
.dpguard.yaml of the checkout is picked up, and passes relative paths so output is exact.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpguard import __version__
from dpguard.cli import main
from dpguard.yamlsource import MAX_BYTES

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FINDING = re.compile(
    r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): "
    r"(?P<severity>error|warning|info) (?P<code>[A-Z]+\d+) (?P<message>.+)$"
)
SUMMARY = re.compile(
    r"^(\d+) manifests? checked: (\d+) passed, (\d+) failed \((\d+) errors?, (\d+) warnings?\)$"
)


@pytest.fixture(autouse=True)
def _in_empty_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def finding_lines(out: str) -> list[str]:
    """The finding lines; each valid manifest's positioned `decision:` line is left out."""
    return [line for line in out.splitlines() if FINDING.match(line) and not DECISION.match(line)]


def decision_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if DECISION.match(line)]


DECISION = re.compile(r"^[^\s]+:\d+:\d+: info [A-Z][A-Z0-9]*\d{3} decision: ")


def summary(out: str) -> tuple[int, ...]:
    last = out.splitlines()[-1]
    match = SUMMARY.match(last)
    assert match, f"the last line is not the summary: {last!r}"
    return tuple(int(g) for g in match.groups())


@pytest.fixture
def valid(write_manifest: Any, valid_manifest_text: str) -> str:
    write_manifest(valid_manifest_text, "valid.yaml")
    return "valid.yaml"


# --- exit codes 0 and 1 -----------------------------------------------------------------------


def test_valid_manifest_exits_0(capsys: pytest.CaptureFixture[str], valid: str) -> None:
    code, out, err = run(capsys, "review", valid)
    assert code == 0
    assert finding_lines(out) == []
    assert decision_lines(out) == [
        "valid.yaml:9:3: info DT004 decision: 1f1b; plan: 1f1b P=2 M=32 T=1 EP=1, bubble 3.03%"
    ]
    assert summary(out) == (1, 1, 0, 0, 0)
    assert err == ""


def test_broken_manifest_exits_1(capsys: pytest.CaptureFixture[str], write_manifest: Any) -> None:
    write_manifest("a: [1\n", "broken.yaml")
    code, out, err = run(capsys, "review", "broken.yaml")
    assert code == 1
    assert finding_lines(out) == [
        "broken.yaml:2:1: error Y001 invalid YAML: did not find expected ',' or ']' "
        "(while parsing a flow sequence that starts at line 1)"
    ]
    assert summary(out) == (1, 0, 1, 1, 0)
    assert err == ""


def hostile_inputs() -> list[tuple[str, bytes, str]]:
    bomb = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        bomb.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    return [
        (
            "invalid",
            b"a: b: c\n",
            "1:5: error Y001 invalid YAML: mapping values are not allowed in this context",
        ),
        ("empty", b"", "1:1: error Y002 the file is empty: expected a mapping"),
        (
            "two-documents",
            b"a: 1\n---\nb: 2\n",
            "2:1: error Y003 more than one YAML document in the file: one document per file",
        ),
        ("list-root", b"- 1\n", "1:1: error Y004 the top level must be a mapping, not a list"),
        (
            "duplicate",
            b"a: 1\na: 2\n",
            "2:1: error Y005 duplicate key 'a' (first defined at line 1)",
        ),
        (
            "python-tag",
            b"a: !!python/object/apply:os.system ['echo pwned']\n",
            "1:4: error Y006 tag !!python/object/apply:os.system is not allowed: only plain YAML "
            "values are accepted",
        ),
        (
            "alias-bomb",
            ("\n".join(bomb) + "\n").encode(),
            "4:4: error Y007 document expands to more than 10000 values (an alias bomb?)",
        ),
        (
            "deep",
            b"a: " + b"[" * 50_000 + b"]" * 50_000 + b"\n",
            "1:35: error Y008 nesting deeper than 32 levels",
        ),
        ("non-utf8", b"a: \xff\n", "1:4: error Y009 the file is not UTF-8 (byte 0xff at offset 3)"),
        ("nan", b"a: .nan\n", "1:4: error Y010 .nan is not a finite number"),
        (
            "digits",
            b"a: " + b"9" * 40 + b"\n",
            "1:4: error Y011 number 99999999999999999999... has too many digits (the limit is 30)",
        ),
    ]


@pytest.mark.parametrize(
    ("name", "content", "expected"), hostile_inputs(), ids=[h[0] for h in hostile_inputs()]
)
def test_hostile_input_fails_the_manifest_with_one_message(
    capsys: pytest.CaptureFixture[str],
    write_manifest: Any,
    name: str,
    content: bytes,
    expected: str,
) -> None:
    write_manifest(content, f"{name}.yaml")
    code, out, err = run(capsys, "review", f"{name}.yaml")
    assert (code, finding_lines(out), err) == (1, [f"{name}.yaml:{expected}"], "")
    assert summary(out) == (1, 0, 1, 1, 0)


def test_huge_file_fails_the_manifest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with open(tmp_path / "huge.yaml", "wb") as handle:
        handle.truncate(100 * 1024 * 1024)
    code, out, _err = run(capsys, "review", "huge.yaml")
    assert code == 1
    assert finding_lines(out) == [
        f"huge.yaml:1:1: error Y012 file is 104857600 bytes; the limit is {MAX_BYTES} bytes"
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("-64", "cluster.gpus is -64; it must be at least 1"),
        ("100000000000", "cluster.gpus is 100000000000; it must be at most 1048576"),
    ],
)
def test_negative_or_absurd_count_fails(
    capsys: pytest.CaptureFixture[str],
    write_manifest: Any,
    valid_manifest_text: str,
    value: str,
    expected: str,
) -> None:
    write_manifest(valid_manifest_text.replace("  gpus: 64\n", f"  gpus: {value}\n"), "m.yaml")
    code, out, _err = run(capsys, "review", "m.yaml")
    assert code == 1
    assert finding_lines(out) == [f"m.yaml:9:3: error S004 {expected}"]


# --- many files per call ----------------------------------------------------------------------


def test_one_broken_file_does_not_stop_the_others(
    capsys: pytest.CaptureFixture[str], write_manifest: Any, valid: str
) -> None:
    write_manifest("- not a mapping\n", "broken.yaml")
    (Path.cwd() / "mistakes.yaml").write_bytes((EXAMPLES / "mistakes.yaml").read_bytes())
    code, out, err = run(capsys, "review", "broken.yaml", valid, "mistakes.yaml")
    assert code == 1
    assert finding_lines(out) == [
        "broken.yaml:1:1: error Y004 the top level must be a mapping, not a list",
        "mistakes.yaml:7:3: error X001 1000 GPUs is not divisible by tensor x pipeline x context"
        " = 3 x 8 x 1 = 24",
        "mistakes.yaml:9:3: error X012 unknown accelerator 'H900'; known: "
        "A100-40GB, A100-80GB, B200, GB200, Gaudi3, H100-NVL, H100-PCIe, H100-SXM, H20, H200, "
        "H800, L40S, MI300X, MI325X, or custom",
        "mistakes.yaml:15:3: error X005 active_params (80,000,000,000) exceeds total_params "
        "(70,000,000,000)",
        "mistakes.yaml:21:3: error X006 model.experts is set on a dense model",
        "mistakes.yaml:25:3: error S004 training.micro_batch_size is 0; it must be at least 1",
        "mistakes.yaml:26:3: error S001 unknown key 'precison' in training (did you mean "
        "'precision'?)",
        "mistakes.yaml:28:3: error X010 attention_heads (64) is not divisible by tensor parallel "
        "size 3",
    ]
    assert summary(out) == (3, 1, 2, 8, 0)
    assert err == ""


def test_missing_file_among_valid_ones_exits_2_and_the_others_are_reported(
    capsys: pytest.CaptureFixture[str], write_manifest: Any, valid: str, tmp_path: Path
) -> None:
    write_manifest("a: !foo x\n", "tagged.yaml")
    (tmp_path / "folder").mkdir()
    code, out, err = run(capsys, "review", valid, "missing.yaml", "tagged.yaml", "folder")
    assert code == 2
    assert finding_lines(out) == [
        "tagged.yaml:1:4: error Y006 tag !foo is not allowed: only plain YAML values are accepted"
    ]
    assert summary(out) == (2, 1, 1, 1, 0)
    assert err.splitlines() == [
        # a directory is walked for manifests (tests/test_review_dir.py); this one has none
        "dpguard: folder: no manifest or framework config under it",
        "dpguard: error: missing.yaml: no such file",
    ]


def test_missing_file_alone_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "review", "nope.yaml")
    assert code == 2
    assert summary(out) == (0, 0, 0, 0, 0)
    assert err == "dpguard: error: nope.yaml: no such file\n"


def test_output_is_finding_lines_then_the_summary(
    capsys: pytest.CaptureFixture[str], write_manifest: Any
) -> None:
    write_manifest("b: 1\nb: 2\n", "one.yaml")
    write_manifest("x: .inf\n", "two.yaml")
    code, out, _err = run(capsys, "review", "one.yaml", "two.yaml")
    lines = out.splitlines()
    assert code == 1
    assert lines[:2] == [
        "one.yaml:2:1: error Y005 duplicate key 'b' (first defined at line 1)",
        "two.yaml:1:4: error Y010 .inf is not a finite number",
    ]
    assert lines[-1] == "2 manifests checked: 0 passed, 2 failed (2 errors, 0 warnings)"
    assert out.endswith("\n")
    for line in finding_lines(out):
        match = FINDING.match(line)
        assert match is not None and match["path"] in ("one.yaml", "two.yaml")


# --- JSON -------------------------------------------------------------------------------------


def test_json_report(capsys: pytest.CaptureFixture[str], write_manifest: Any, valid: str) -> None:
    write_manifest("apiVersion: dpguard/v1\n", "partial.yaml")
    code, out, _err = run(capsys, "review", "--format", "json", valid, "partial.yaml")
    assert code == 1
    report = json.loads(out)
    assert report["version"] == 1
    assert report["tool"] == {"name": "dpguard", "version": __version__}
    first, second = report["files"]
    assert (first["path"], first["valid"], first["findings"]) == (valid, True, [])
    m = first["manifest"]
    assert m["name"] == "small-dense"
    assert m["cluster"]["accelerator"] == "A100-80GB"
    assert m["model"]["total_params"] == 13_000_000_000
    assert m["training"]["tokens"] == 10**12
    assert (m["parallelism"], m["data_parallel"], m["microbatches"]) == (None, None, None)
    assert (second["path"], second["valid"], second["manifest"]) == ("partial.yaml", False, None)
    assert [
        {k: f[k] for k in ("code", "severity", "message", "line", "column")}
        for f in second["findings"]
    ] == [
        {
            "code": "S002",
            "severity": "error",
            "message": f"(top level) is missing the required key {key!r}",
            "line": 1,
            "column": 1,
        }
        for key in ("cluster", "kind", "metadata", "model", "training")
    ]
    assert report["summary"] == {"files": 2, "failed": 1, "errors": 5, "warnings": 0}


def test_json_report_of_derived_values(
    capsys: pytest.CaptureFixture[str], write_manifest: Any
) -> None:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    write_manifest(text + "parallelism:\n  pipeline: 2\n", "p.yaml")
    code, out, _err = run(capsys, "review", "--format", "json", "p.yaml")
    manifest = json.loads(out)["files"][0]["manifest"]
    assert code == 0
    assert (manifest["data_parallel"], manifest["microbatches"]) == (32, 32)
    assert manifest["parallelism"]["pipeline"] == 2


def test_reports_are_deterministic(capsys: pytest.CaptureFixture[str], valid: str) -> None:
    (Path.cwd() / "mistakes.yaml").write_bytes((EXAMPLES / "mistakes.yaml").read_bytes())
    for fmt in ("text", "json"):
        first = run(capsys, "review", "--format", fmt, valid, "mistakes.yaml")
        second = run(capsys, "review", "--format", fmt, valid, "mistakes.yaml")
        assert first == second
        assert first[0] == 1


# --- exit code 2: usage -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [[], ["review"], ["review", "--format", "xml", "x.yaml"], ["no-such-command"], ["--bogus"]],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: dpguard")


# --- exit code 2: dpguard's own files broken --------------------------------------------------


@pytest.fixture
def manifest_schema_text(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Replace the packaged manifest schema's text with the one item of the yielded list."""
    from dpguard import resources, validate

    original = resources.read_text
    replacement: list[str] = []

    def read_text(package: str, name: str) -> str:
        if name == "manifest.schema.json":
            return replacement[0]
        return original(package, name)

    monkeypatch.setattr(resources, "read_text", read_text)

    def forget() -> None:
        resources.schema_text.cache_clear()
        resources.schema.cache_clear()
        validate.forget()

    forget()
    yield replacement
    forget()


def test_broken_schema_json_exits_2(
    capsys: pytest.CaptureFixture[str], manifest_schema_text: list[str], valid: str
) -> None:
    manifest_schema_text.append('{\n  "type": "object",\n  oops\n}\n')
    code, out, err = run(capsys, "review", valid)
    assert (code, out) == (2, "")
    assert err == (
        "dpguard: error: schemas/manifest.schema.json:3:3: "
        "Expecting property name enclosed in double quotes\n"
    )


def test_invalid_json_schema_exits_2(
    capsys: pytest.CaptureFixture[str], manifest_schema_text: list[str], valid: str
) -> None:
    manifest_schema_text.append('{"properties": {"gpus": {"minimum": "one"}}}')
    code, out, err = run(capsys, "review", valid)
    assert (code, out) == (2, "")
    assert err == (
        "dpguard: error: schemas/manifest.schema.json: not a valid JSON Schema at "
        "properties.gpus.minimum: 'one' is not of type 'number'\n"
    )


# --- exit code 3: internal errors -------------------------------------------------------------


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom")


def test_internal_error_exits_3_without_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, valid: str
) -> None:
    monkeypatch.setattr("dpguard.check.validate", _boom)
    code, out, err = run(capsys, "review", valid)
    assert code == 3
    assert out.splitlines()[0] == (
        f"{valid}:1:1: error D001 internal error while checking this file: RuntimeError: boom "
        "(this is a bug in dpguard)"
    )
    assert err == (
        f"dpguard: internal error in {valid} (a bug in dpguard, its D001 finding): rerun with "
        "--debug for the traceback\n"
    )


def test_a_bug_in_one_file_loses_no_other_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Per-file isolation: the crashing file is its own D001 finding, every other file is
    judged and reported, the report is written, and the call ends with exit 3."""
    import dpguard.check

    real = dpguard.check.validate
    good = [str(tmp_path / f"ok{i}.yaml") for i in range(3)]
    bad = str(tmp_path / "bad.yaml")
    for path in [*good, bad]:
        shutil.copy(EXAMPLES / "small-dense.yaml", path)

    def sometimes(doc: Any, *args: Any, **kwargs: Any) -> Any:
        if doc.name == bad:
            raise RuntimeError("boom")
        return real(doc, *args, **kwargs)

    monkeypatch.setattr("dpguard.check.validate", sometimes)
    report = tmp_path / "report.json"
    code, _out, _err = run(capsys, "review", *good, bad, "--format", "json", "-o", str(report))
    assert code == 3
    files = {f["path"]: f for f in json.loads(report.read_text(encoding="utf-8"))["files"]}
    assert sorted(files) == sorted([*good, bad])
    assert [x["code"] for x in files[bad]["findings"]] == ["D001"]
    assert all(files[g]["findings"] == [] for g in good)


@pytest.mark.parametrize("where", ["before", "after"])
def test_internal_error_traceback_with_debug(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, valid: str, where: str
) -> None:
    """--debug works before the command and after it (where a user adds it on rerunning)."""
    monkeypatch.setattr("dpguard.check.validate", _boom)
    argv = ("--debug", "review", valid) if where == "before" else ("review", valid, "--debug")
    code, _out, err = run(capsys, *argv)
    assert code == 3
    assert err.startswith("Traceback (most recent call last):\n")
    assert err.endswith("RuntimeError: boom\n")


def test_internal_error_in_the_loader_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, valid: str
) -> None:
    monkeypatch.setattr("dpguard.check.load_text", _boom)
    code, _out, err = run(capsys, "review", valid)
    assert code == 3
    assert "Traceback" not in err


# --- --version, --help, schema ----------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, f"dpguard {__version__}\n", "")


@pytest.mark.parametrize("argv", [["--help"], ["review", "--help"]])
def test_help_lists_exit_codes(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, _err = run(capsys, *argv)
    assert code == 0
    assert "exit codes:\n" in out
    assert "  0  every manifest passes\n" in out
    assert "  1  at least one manifest fails\n" in out
    assert (
        "  2  dpguard cannot run as asked (usage, missing file, broken policy/schema/template)\n"
        in out
    )
    assert "  3  internal error (a bug; rerun with --debug for the traceback)\n" in out


def test_help_lists_review_and_schema(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run(capsys, "--help")
    assert "review" in out and "schema" in out


def test_schema_prints_the_schema_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schema")
    assert (code, err) == (0, "")
    text = (REPO / "schemas" / "manifest.schema.json").read_text(encoding="utf-8")
    assert out == text
    assert json.loads(out)["$schema"] == "https://json-schema.org/draft/2020-12/schema"
