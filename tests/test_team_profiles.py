"""A team's own framework profile (an internal fork), listed among its .dpguard.yaml policy
files: it joins the shipped profiles for the manifests that config judges, and only for them,
without Python (docs/frameworks.md, "Editing or adding a profile")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpguard.cli import main
from dpguard.frameworks import profiles

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# Megatron-LM without its interleaved schedule, reducing gradients in bf16
ACME = """\
apiVersion: dpguard/v1
kind: FrameworkProfile
metadata:
  name: acme
  title: ACME's Megatron-LM fork
  source: the team's fork of Megatron-LM
extends: megatron
schedules:
  - schedule: 1f1b
    source: the fork runs only the schedule without interleaving
traits:
  main_grad_dtype:
    value: bf16
    source: the fork's launchers turn grad_reduce_in_fp32 off
"""


def manifest(path: Path, framework: str | None) -> Path:
    text = (EXAMPLES / "large-dense.yaml").read_text(encoding="utf-8")
    if framework is not None:
        text = text.replace("\ntraining:\n", f"\ntraining:\n  framework: {framework}\n", 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """repo/ with the team's profile under frameworks/ listed in its .dpguard.yaml, and
    runs/acme.yaml naming it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "frameworks").mkdir()
    (root / "frameworks" / "acme.yaml").write_text(ACME, encoding="utf-8")
    (root / ".dpguard.yaml").write_text("policies: [frameworks]\n", encoding="utf-8")
    manifest(root / "runs" / "acme.yaml", "acme")
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_team_profile_judges_the_manifests_its_config_judges(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its schedules bound the plan (the decision table's DualPipeV is not among them), its
    traits price memory, and the report names the profile with its digest."""
    code, out, _ = run(capsys, "review", str(repo / "runs" / "acme.yaml"))
    assert code == 0, out
    assert "(acme does not run dualpipev: planned among what it runs); plan: 1f1b" in out
    assert "framework profile acme (sha256:" in out
    code, out, _ = run(capsys, "review", "--format", "json", str(repo / "runs" / "acme.yaml"))
    kinds = {p["name"]: p.get("kind") for p in json.loads(out)["files"][0]["policies"]}
    assert kinds["acme"] == "framework-profile" and kinds["dpguard-core"] is None
    code, out, _ = run(capsys, "memory", str(repo / "runs" / "acme.yaml"))
    assert code == 0
    # bf16 main grads: 2 bytes a parameter for gradients, not Megatron-LM's fp32 4
    assert "(weights 2 + grads 2 + optimizer 12)" in out
    assert f"runtime traits of the acme profile ({repo / 'frameworks' / 'acme.yaml'})" in out
    code, out, _ = run(capsys, "plan", str(repo / "runs" / "acme.yaml"))
    assert code == 0 and "**Recommendation: 1F1B**" in out
    assert "which ACME's Megatron-LM fork does not run" in out


def test_a_manifest_under_another_config_does_not_know_it(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One call, two configs: the team's profile exists for its own manifests only."""
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    stray = manifest(other / "acme.yaml", "acme")
    code, out, _ = run(capsys, "review", str(repo / "runs" / "acme.yaml"), str(stray))
    assert code == 1
    lines = [line for line in out.splitlines() if " X032 " in line]
    assert len(lines) == 1 and lines[0].startswith(str(stray))
    assert "names no framework profile; known: bridge, deepspeed" in lines[0]
    assert "acme," not in lines[0]


def test_a_framework_less_manifest_spans_the_team_profile_too(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The band of a manifest that names no framework spans every profile in effect, the
    team's among them, and the verdict names its estimate."""
    plain = manifest(repo / "runs" / "plain.yaml", None)
    code, out, _ = run(capsys, "memory", str(plain))
    assert code == 0
    assert "acme" in next(line for line in out.splitlines() if "no framework named" in line)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("value: bf16", "value: fp64"), "acme.yaml:13:5: traits.main_grad_dtype.value is 'fp64'"),
        (("name: acme", "name: megatron"), "profile 'megatron' is defined twice"),
        (("extends: megatron", "extends: megatrn"), "extends unknown profile 'megatrn'"),
        (("  title: ACME", "  default: true\n  title: ACME"), "cannot be the default"),
        (("title: ACME's", "title: !!python/object:os.system"), "acme.yaml:5:10: tag !!python"),
    ],
)
def test_a_broken_team_profile_is_a_broken_policy(
    repo: Path, change: tuple[str, str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "frameworks" / "acme.yaml").write_text(ACME.replace(*change), encoding="utf-8")
    code, out, err = run(capsys, "review", str(repo / "runs" / "acme.yaml"))
    assert (code, out) == (2, "")
    assert "broken policy" in err and problem in err


def test_lint_policies_counts_it_and_nothing_leaks_into_the_shipped_set(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "lint-policies", str(repo / "frameworks" / "acme.yaml"))
    assert code == 0 and "1 framework profile: ok" in out
    assert "acme" not in profiles.load_profiles()


def test_a_team_profile_that_reads_megatron_judges_its_launch_scripts(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`metadata.reads: megatron`: the fork runs from Megatron-LM launch scripts, so a script
    in the repository is read as before and judged with the team's profile (its schedules,
    its traits); a manifest that names megatron keeps the shipped profile."""
    fork = ACME.replace("  source: the team's fork", "  reads: megatron\n  source: the team's fork")
    (repo / "frameworks" / "acme.yaml").write_text(fork, encoding="utf-8")
    (repo / ".dpguard.yaml").write_text(
        "policies: [frameworks]\ndefaults:\n  - files: '*.sh'\n    manifest:\n"
        "      cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n",
        encoding="utf-8",
    )
    script = repo / "runs" / "pretrain.sh"
    script.write_text(
        (Path(__file__).parent / "data" / "frameworks" / "megatron_llama3_70b.sh").read_text(
            encoding="utf-8"
        ),
        encoding="utf-8",
    )
    code, out, _ = run(capsys, "memory", str(script))
    assert code == 0, out
    assert "runtime traits of the acme profile" in out
    assert "(weights 2 + grads 2 + optimizer 12)" in out  # the fork's bf16 main grads
    named = manifest(repo / "runs" / "named.yaml", "megatron")
    code, out, _ = run(capsys, "memory", str(named))
    assert "runtime traits of the megatron profile" in out


@pytest.mark.parametrize(
    ("reads", "problem"),
    [("megatrn", "metadata.reads names no shipped profile: 'megatrn'"), ("megatron", "already")],
)
def test_what_a_team_profile_reads_is_checked(
    repo: Path, reads: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fork = ACME.replace("  source: the team's fork", f"  reads: {reads}\n  source: the team's fork")
    (repo / "frameworks" / "acme.yaml").write_text(fork, encoding="utf-8")
    twin = fork.replace("name: acme", "name: acme-two")
    (repo / "frameworks" / "acme2.yaml").write_text(twin, encoding="utf-8")
    code, out, err = run(capsys, "review", str(repo / "runs" / "acme.yaml"))
    assert (code, out) == (2, "")
    assert problem in err
