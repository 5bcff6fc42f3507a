"""A key written in the wrong section says where it belongs (`precision` under `model`), in
manifests and in the other files dpguard checks against a schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent


def review(path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["review", "--quiet", str(path)]) == 1
    return capsys.readouterr().out.splitlines()[:-1]


def test_manifest_keys_in_the_wrong_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (REPO / "examples" / "small-dense.yaml").read_text(encoding="utf-8")
    assert "\nmodel:\n" in text and "\ntraining:\n" in text
    text = text.replace(
        "\nmodel:\n",
        "\nmodel:\n  precision: bf16\n  gpus: 8\n  expert: 8\n  precison: bf16\n  zzzz: 1\n",
    ).replace("\ntraining:\n", "\ntraining:\n  model: {}\n")
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    lines = [line.split(" S001 ", 1)[1] for line in review(path, capsys)]
    assert lines == [
        "unknown key 'precision' in model (precision belongs under training)",
        "unknown key 'gpus' in model (gpus belongs under cluster)",
        # a near key here is still offered first: 'expert' may be a typo of model.experts
        "unknown key 'expert' in model (did you mean 'experts'? expert belongs under parallelism)",
        # a key defined nowhere: the closest key anywhere, and where that one belongs
        "unknown key 'precison' in model (did you mean 'precision'? precision belongs under "
        "training)",
        # nothing close anywhere: no hint
        "unknown key 'zzzz' in model",
        "unknown key 'model' in training (model belongs at the top level)",
    ]


def test_policy_keys_in_the_wrong_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "apiVersion: dpguard/v1\nkind: PolicySet\nmetadata: {name: team, version: 1.0.0}\n"
        "rules:\n"
        "  - id: TEAM001\n"
        "    kind: advise\n"
        "    title: t\n"
        "    when: {fact: cluster.gpus, ge: 64}\n"
        "    message: m\n"
        "    docs: d\n"
        "    max_waiver_days: 30\n",
        encoding="utf-8",
    )
    assert main(["lint-policies", str(path)]) == 2
    assert capsys.readouterr().out.splitlines() == [
        f"{path}:11:5: unknown key 'max_waiver_days' in rules[0] "
        "(max_waiver_days belongs under settings)"
    ]
