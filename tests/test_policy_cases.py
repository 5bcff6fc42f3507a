"""`dpguard test`: the shipped policy cases pass and cover every rule; failures are positioned."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dpguard.cli import main

FAILING = textwrap.dedent(
    """\
    apiVersion: dpguard/v1
    kind: PolicyTest
    manifests:
      small:
        apiVersion: dpguard/v1
        kind: TrainingManifest
        metadata: {name: small}
        cluster:
          gpus: 64
          gpus_per_node: 1
          accelerator: A100-80GB
          interconnect: {inter_node_gbps_per_gpu: 400}
        model:
          architecture: dense
          total_params: 13B
          layers: 40
          hidden_size: 5120
          attention_heads: 40
          seq_len: 4096
          vocab_size: 32000
        training: {tokens: 1T, global_batch_size: 1024, micro_batch_size: 1}
    cases:
      - name: passes
        manifest: small
        expect: {decision: DT004, schedule: 1f1b}
      - name: wrong schedule
        manifest: small
        patch: {cluster: {gpus: 100}}
        expect: {schedule: 1f1b, fired: [RF003], not_fired: [DT003]}
      - name: wrongly invalid
        manifest: small
        expect: {valid: false}
    """
)


def test_shipped_cases_pass_with_coverage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "--require-coverage"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].endswith(" passed, 0 failed")
    assert int(out[-1].split()[0]) >= 40
    assert len(out) == 1


def test_failing_cases_are_positioned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(FAILING, encoding="utf-8")
    assert main(["test", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        # One line per failing case, every unmet expectation of the case on it.
        f"{path}:26:5: case wrong schedule: expected schedule 1f1b, got zb1p; "
        "expected fired [RF003], got fired [DT003]; expected not fired [DT003], got fired [DT003]",
        f"{path}:30:5: case wrongly invalid: expected an invalid manifest, got a valid one",
        "1 passed, 2 failed",
    ]


def test_manifest_by_path_and_inline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    examples = Path(__file__).resolve().parent.parent / "examples"
    path = tmp_path / "cases.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            apiVersion: dpguard/v1
            kind: PolicyTest
            cases:
              - name: by path
                manifest: {examples / "small-dense.yaml"}
                patch: {{training: {{tokens: 999999999}}}}
                expect: {{fired: [RF003], schedule: none}}
              - name: invalid patch
                manifest: {examples / "small-dense.yaml"}
                patch: {{cluster: {{gpus: 0}}}}
                expect: {{valid: false, codes: [S004]}}
            """
        ),
        encoding="utf-8",
    )
    assert main(["test", str(path)]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out == "2 passed, 0 failed\n"


def test_coverage_gap_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(
        FAILING.split("cases:")[0]
        + "cases:\n"
        + FAILING.split("cases:\n")[1].split("  - name: wrong schedule")[0],
        encoding="utf-8",
    )
    assert main(["test", "--require-coverage", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "coverage: DT004: no case in which it stays silent" in out
    assert "coverage: HR002: no case in which it fires" in out
    assert out[-1] == "1 passed, 0 failed"


def test_unknown_rule_in_expectation_is_a_broken_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(FAILING.replace("fired: [RF003]", "fired: [RF033]"), encoding="utf-8")
    assert main(["test", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:29:38: unknown rule RF033 in fired" in err


def test_schema_problem_in_test_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(FAILING.replace("expect: {valid: false}", "expekt: {valid: false}"))
    assert main(["test", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:32:5: unknown key 'expekt' in cases[2]" in err
    assert f"{path}:30:5: cases[2] is missing the required key 'expect'" in err
