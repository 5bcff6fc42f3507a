"""`dpguard explain` covers every code dpguard can print, and the bare-number plausibility hint
(X029) that replaces a nonsense X018 for `total_params: 70`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpguard.cli import main
from dpguard.codes import CODES
from dpguard.reporters.model import ENGINE_CODES

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.mark.parametrize("code", [*CODES, *ENGINE_CODES])
def test_every_built_in_code_is_explained(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", code.lower()]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{code}: {CODES.get(code) or ENGINE_CODES[code]}"
    assert out[1].startswith("kind: ") and "(severity " in out[1]
    assert out[3].startswith("docs: docs/")


def test_every_code_in_the_source_is_known() -> None:
    # a code literal anywhere in dpguard is one explain knows
    found = set()
    for path in (REPO / "dpguard").rglob("*.py"):
        found |= set(re.findall(r'"([YSXFP]\d{3})"', path.read_text(encoding="utf-8")))
    assert found - set(CODES) - set(ENGINE_CODES) == set()


def test_unknown_codes_get_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "X04"]) == 2
    assert capsys.readouterr().err == "dpguard: error: unknown rule X04 (did you mean 'X004'?)\n"


@pytest.mark.parametrize(
    ("key", "written", "message"),
    [
        (
            "total_params: 13B",
            "total_params: 70",
            "error X029 model.total_params is 70 parameters: a bare number counts single "
            "parameters; did you mean 70B? (write the suffix: K, M, B or T)",
        ),
        (
            "tokens: 1T",
            "tokens: 15",
            "error X029 training.tokens is 15 tokens: a bare number counts single tokens; did "
            "you mean 15T? (write the suffix: K, M, B or T)",
        ),
    ],
)
def test_bare_small_numbers_get_a_plausibility_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, written: str, message: str
) -> None:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    assert key in text
    path = tmp_path / "m.yaml"
    path.write_text(text.replace(key, written), encoding="utf-8")
    assert main(["review", str(path)]) == 1
    out = capsys.readouterr().out
    assert message in out
    assert " X018 " not in out  # no negative parameter budget beside it


def test_large_bare_numbers_are_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
    path = tmp_path / "m.yaml"
    path.write_text(text.replace("total_params: 13B", "total_params: 13000000000"), "utf-8")
    assert main(["review", str(path)]) == 0
    assert " X029 " not in capsys.readouterr().out
