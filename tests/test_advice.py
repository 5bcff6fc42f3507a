"""ADV003 and ADV005 judged against what the planner actually recommends (issue 11: advice
that never contradicts a refusal or the planner in the same run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dpguard.check import check_file
from dpguard.policy.load import load_policies
from dpguard.reporters.model import decision_text

DENSE_512 = {
    "apiVersion": "dpguard/v1",
    "kind": "TrainingManifest",
    "metadata": {"name": "dense-512"},
    "cluster": {
        "gpus": 512,
        "gpus_per_node": 8,
        "accelerator": "H100-SXM",
        "interconnect": {"inter_node_gbps_per_gpu": 400},
    },
    "model": {
        "architecture": "dense",
        "total_params": "13B",
        "layers": 40,
        "hidden_size": 5120,
        "attention_heads": 40,
        "seq_len": 4096,
        "vocab_size": 32000,
    },
    "training": {"tokens": "1T", "global_batch_size": 512, "micro_batch_size": 1},
    "parallelism": {"tensor": 1, "pipeline": 8, "schedule": "1f1b"},
}


@pytest.fixture(scope="module")
def policies():
    return load_policies([])


def judge(tmp_path: Path, doc: dict[str, Any], policies):
    path = tmp_path / "m.yaml"
    with path.open("w", encoding="utf-8") as handle:
        YAML(typ="safe").dump(doc, handle)
    result = check_file(str(path), None, policies)
    assert result.outcome is not None, [f.format() for f in result.findings]
    return result


def test_adv003_recommends_what_the_planner_can_run(tmp_path, policies):
    """512 GPUs dense: DT002 says DualPipeV, but with micro-batch 1 and a 512 batch M = P at
    every depth, below DualPipeV's 2P, so the planner falls back to Zero Bubble. ADV003
    recommends zb1p and prices the proposal against it, never DualPipeV."""
    result = judge(tmp_path, DENSE_512, policies)
    assert result.outcome.decision.recommend == "dualpipev"
    assert result.plan.schedule == "zb1p"
    (adv,) = [f for f in result.findings if f.code == "ADV003"]
    assert "differs from dpguard's recommendation zb1p (DT002)" in adv.message
    assert "dualpipev" not in adv.message
    facts = result.outcome.facts
    assert facts["plan.recommended_bubble"] < facts["proposal.bubble"]
    hours = facts["proposal.gpu_hours"] - facts["plan.recommended_gpu_hours"]
    assert f"{round(hours):,} GPU-hours more" in adv.message


def test_a_refused_proposal_gets_no_adv003(tmp_path, policies):
    """RF001 (200 Gbps) refuses a proposed DualPipe: the refusal is the error; ADV003 does not
    price the refused schedule again."""
    doc = {
        **DENSE_512,
        "model": {
            **DENSE_512["model"],
            "architecture": "moe",
            "total_params": "99B",
            "active_params": "15B",
            "experts": 64,
            "experts_per_token": 8,
        },
        "cluster": {**DENSE_512["cluster"], "interconnect": {"inter_node_gbps_per_gpu": 200}},
        "training": {**DENSE_512["training"], "global_batch_size": 1024},
        "parallelism": {
            "tensor": 1,
            "pipeline": 8,
            "expert": 8,
            "schedule": "dualpipe",
            "untie_embeddings": True,
        },
        "communication": {"all_to_all_kernel": "deepep"},
    }
    codes = {f.code for f in judge(tmp_path, doc, policies).findings}
    assert "RF001" in codes and "ADV003" not in codes


def test_no_feasible_plan_gets_adv005_and_no_adv003(tmp_path, policies):
    """A 400B dense model on 16 GPUs: nothing fits; ADV005 carries the planner's reason and
    ADV003 stays silent (there is no recommendation to compare with)."""
    doc = {
        **DENSE_512,
        "cluster": {**DENSE_512["cluster"], "gpus": 16},
        "model": {
            **DENSE_512["model"],
            "total_params": "400B",
            "layers": 80,
            "hidden_size": 16384,
            "attention_heads": 128,
        },
        "training": {**DENSE_512["training"], "global_batch_size": 64},
    }
    result = judge(tmp_path, doc, policies)
    assert result.plan.status == "infeasible"
    codes = [f.code for f in result.findings]
    assert "ADV005" in codes and "ADV003" not in codes
    (adv,) = [f for f in result.findings if f.code == "ADV005"]
    assert adv.message.startswith("dpguard finds no layout that fits and runs on 16 H100-SXM: ")
    assert "at the closest layout" in adv.message


def test_bloom_1f1b_on_384_gpus_draws_adv003_only_where_zero_bubble_runs(tmp_path, policies):
    """BLOOM-176B ran 1F1B at TP4 PP12 on 384 A100 (tests/data/calibration/bloom-176b.yaml)
    under DeepSpeed's pipeline engine, which runs 1F1B only: no advice to switch to a schedule
    it cannot run, and the decision line says why the plan is 1F1B. The same manifest without
    its framework draws ADV003 with the GPU-hours dpguard's Zero Bubble plan saves, both priced
    by the step-time model (1F1B is the default only under 100 GPUs)."""
    path = Path(__file__).parent / "data" / "calibration" / "bloom-176b.yaml"
    result = check_file(str(path), None, policies)
    assert "ADV003" not in [f.code for f in result.findings]
    assert result.plan.schedule == "1f1b"
    decision = decision_text(result)
    assert decision is not None
    assert decision.startswith("decision: zb1p (DT003) (deepspeed does not run zb1p: planned")
    unnamed = tmp_path / "bloom.yaml"
    unnamed.write_text(
        path.read_text(encoding="utf-8").replace("  framework: deepspeed\n", ""),
        encoding="utf-8",
    )
    result = check_file(str(unnamed), None, policies)
    (adv,) = [f for f in result.findings if f.code == "ADV003"]
    assert "proposed schedule 1f1b differs from dpguard's recommendation zb1p (DT003)" in (
        adv.message
    )
    assert "GPU-hours more over the token budget than dpguard's plan" in adv.message
    plan = result.plan
    assert plan.performance is not None and plan.proposal_performance is not None
    saved = plan.proposal_performance.gpu_hours - plan.performance.gpu_hours
    assert saved > 0 and f"{saved:,.0f} GPU-hours more" in adv.message
