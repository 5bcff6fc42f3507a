"""Golden files: `dpguard review --format F` over every bundled example, byte for byte.

The run happens from the repository root with relative paths, so no golden depends on where the
checkout lives. After an intended change to a report, regenerate with

    DPGUARD_UPDATE_GOLDEN=1 pytest tests/test_report_golden.py

and review the diff of tests/golden/ like any other change.

The policy sets' digests (``sha256:...`` of the policy files' bytes) are masked in the goldens:
every edit to policies/*.yaml changes them, and they are checked where they are computed
(the policy engine's tests). Everything else is compared byte for byte, and
`test_byte_identical_across_runs` compares whole unmasked reports.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden"
EXAMPLES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "examples").glob("*.yaml"))
UPDATE = os.environ.get("DPGUARD_UPDATE_GOLDEN") == "1"
# the fixed date keeps any waiver expiry out of the result
DATE = "2026-01-15"
DIGEST = re.compile(r"sha256:[0-9a-f]+")
SUFFIX = {
    "text": "txt",
    "json": "json",
    "sarif": "sarif",
    "junit": "junit.xml",
    "github": "github.txt",
    "markdown": "md",
}


def masked(text: str) -> str:
    return DIGEST.sub("sha256:<digest>", text)


def review(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["review", "--date", DATE, *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("NO_COLOR", raising=False)


def test_the_examples_are_the_ones_the_goldens_cover() -> None:
    assert EXAMPLES == [
        "examples/frontier-moe.yaml",
        "examples/large-dense.yaml",
        "examples/mistakes.yaml",
        "examples/no-pipeline.yaml",
        "examples/small-dense.yaml",
    ]


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_golden(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, err = review(capsys, "--format", fmt, *EXAMPLES)
    assert (code, err) == (1, "")  # examples/mistakes.yaml fails on purpose
    assert DIGEST.search(out)  # the policy sets are named in every format
    out = masked(out)
    golden = GOLDEN / f"review-examples.{SUFFIX[fmt]}"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(out.encode("utf-8"))
    assert golden.exists(), f"{golden} is missing: run with DPGUARD_UPDATE_GOLDEN=1"
    expected = golden.read_bytes().decode("utf-8")
    assert out == expected, f"{fmt} report differs from {golden.relative_to(REPO)}"
    assert str(REPO) not in out  # no absolute checkout path leaks into a golden


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_byte_identical_across_runs(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    first = review(capsys, "--format", fmt, *EXAMPLES)
    second = review(capsys, "--format", fmt, *EXAMPLES)
    assert first == second


@pytest.mark.parametrize("fmt", sorted(SUFFIX))
def test_output_file_holds_exactly_the_stdout_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    target = tmp_path / f"report.{SUFFIX[fmt]}"
    code, out, err = review(capsys, "--format", fmt, "--output", str(target), *EXAMPLES)
    assert (code, out, err) == (1, "", "")
    _, stdout_report, _ = review(capsys, "--format", fmt, *EXAMPLES)
    assert target.read_bytes() == stdout_report.encode("utf-8")
    golden = GOLDEN / f"review-examples.{SUFFIX[fmt]}"
    assert masked(stdout_report).encode("utf-8") == golden.read_bytes()
