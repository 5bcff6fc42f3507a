"""The planner (dpguard/planner): issue 5's acceptance cases, the M/P choice, the GPU-hours and
op-time arithmetic, bubbles that `dpguard bubble` reproduces, the memory model the planner uses,
determinism, and the golden plans of every example manifest.

Arithmetic is worked by hand in the docstrings; numbers come from the shipped policies
(policies/planner.yaml) and the accelerator catalog (dpguard/data/accelerators.yaml).
Regenerate the golden plans with ``DPGUARD_UPDATE_GOLDEN=1 pytest tests/test_planner.py``.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from ruamel.yaml import YAML

from dpguard import perf
from dpguard.check import check_file
from dpguard.cli import main
from dpguard.frameworks.emit import emit
from dpguard.memory import GIB
from dpguard.planner.patch import manifest_patch
from dpguard.planner.plan import Plan
from dpguard.planner.render import plan_dict, render_markdown
from dpguard.policy.load import load_policies
from dpguard.policy.model import Policies
from dpguard.schedules import OpTimes, simulate

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
PERF = REPO / "tests" / "data" / "perf" / "manifests"
GOLDEN = Path(__file__).parent / "golden" / "plans"
UPDATE = os.environ.get("DPGUARD_UPDATE_GOLDEN") == "1"
VALID_EXAMPLES = ("frontier-moe", "large-dense", "no-pipeline", "small-dense")

# A small MoE whose memory is worked by hand below (test_memory_model_hand_worked): 16 layers,
# hidden 2048, vocab 32768 (one vocab x hidden matrix = 2**26 = 67,108,864 parameters, untied:
# two), 16 routed experts of 500M parameters each, top-2: total - active = 14 x 500M = 7B and
# the routed experts hold 16 x 500M = 8B. The rest, 1.6B, is attention, norms and router.
HAND_MOE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: hand-moe}
cluster:
  gpus: 64
  accelerator: A100-40GB
  interconnect: {inter_node_gbps_per_gpu: 400}
model:
  architecture: moe
  total_params: 9734217728
  active_params: 2734217728
  layers: 16
  hidden_size: 2048
  attention_heads: 16
  seq_len: 4096
  vocab_size: 32768
  experts: 16
  experts_per_token: 2
training:
  tokens: 100B
  global_batch_size: 1024
  micro_batch_size: 1
  activation_recompute: full
parallelism:
  tensor: 1
  expert: 8
  untie_embeddings: true
communication:
  all_to_all_kernel: deepep
"""

IMPOSSIBLE = (REPO / "tests" / "data" / "impossible.yaml").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def policies() -> Policies:
    return load_policies()


def example(name: str) -> dict[str, Any]:
    return YAML(typ="safe").load((EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8"))


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`base` with `patch` deep-merged in; a None value deletes the key."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def write(tmp_path: Path, doc: dict[str, Any] | str, name: str = "manifest.yaml") -> Path:
    path = tmp_path / name
    if isinstance(doc, str):
        path.write_text(doc, encoding="utf-8")
    else:
        with path.open("w", encoding="utf-8") as handle:
            YAML(typ="safe").dump(doc, handle)
    return path


def plan_of(path: Path, policies: Policies) -> Plan:
    """The plan as `dpguard plan` has it, its page computed."""
    result = check_file(str(path), None, policies, plan_page=True)
    assert result.plan is not None, [f.format() for f in result.findings]
    return result.plan


def frontier(tmp_path: Path, policies: Policies, **patch: Any) -> Plan:
    """examples/frontier-moe.yaml with `patch` deep-merged in."""
    return plan_of(write(tmp_path, merged(example("frontier-moe"), patch)), policies)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- Issue 5's acceptance cases ---------------------------------------------------------------


def test_frontier_moe_at_400_gbps_recommends_dualpipe(policies):
    """DeepSeek-V3 as published on 2,048 H800 with 400 Gbps per GPU (examples/frontier-moe.yaml):
    DT001 picks DualPipe and no refusal fires. The manifest fixes T = 1, EP = 64 and micro-batch
    size 1. DeepSeek-V3 trained at P = 16 (arXiv 2412.19437 §3.2), which the model puts at
    75.2 GiB of 75.1 usable (79.1 less 5%; 2.6 of it the buffers of six NCCL communicators):
    over the planner's 90% margin (67.6 GiB). P = 32 is the smallest depth within it,
    59.3 GiB: rank 0 holds the embedding, and as its mirrored
    stage the output head and the MTP layer. 61 layers split evenly over no depth that divides
    2,048. DP = 2048 / 32 = 64 and M = 15360 / (1 x 64) = 240: even and >= 2P."""
    plan = plan_of(EXAMPLES / "frontier-moe.yaml", policies)
    assert (plan.status, plan.schedule) == ("planned", "dualpipe")
    assert (plan.tensor, plan.pipeline, plan.expert, plan.data_parallel) == (1, 32, 64, 64)
    assert (plan.microbatches, plan.micro_batch_size) == (240, 1)
    assert plan.microbatches % 2 == 0 and plan.microbatches >= 2 * plan.pipeline
    assert plan.outcome.decision is not None and plan.outcome.decision.id == "DT001"
    assert plan.outcome.redirects == ()
    assert plan.plan_findings == ()
    assert plan.kernel.kernel == "deepep"
    worst = plan.memory.worst
    assert worst.rank == 0 and worst.replica > 0
    assert worst.total <= 0.9 * plan.memory_limit_gb * GIB < worst.high
    assert worst.total / GIB == pytest.approx(59.26, abs=0.01)
    text = render_markdown(plan, policies)
    assert "**Recommendation: DualPipe** with P = 32 pipeline ranks and M = 240\n" in text


@pytest.mark.parametrize("gbps", [200, 150])
def test_frontier_moe_at_200_gbps_or_less_is_redirected_to_dualpipev_by_rf001(
    tmp_path, policies, gbps
):
    """RF001 refuses DualPipe at <= 200 Gbps per GPU and recommends DualPipeV. DualPipeV keeps
    one parameter copy: at P = 8 (16 stages of 1/16 of the model) its worst rank is over the
    planner's 90% margin (67.6 GiB of 75.1 usable), so P = 16: DP = 128, M = 15360 / 128 =
    120 >= 2P. Its worst rank (rank 0: the embedding stage and, on the way back, the output
    head and MTP stage, 2P + 1 = 33 half-size chunks in flight) is 57.5 GiB."""
    plan = frontier(tmp_path, policies, cluster={"interconnect": {"inter_node_gbps_per_gpu": gbps}})
    assert (plan.status, plan.schedule, plan.pipeline, plan.microbatches) == (
        "planned",
        "dualpipev",
        16,
        120,
    )
    worst = plan.memory.worst
    assert (worst.rank, worst.replica, worst.inflight) == (0, 0, 33)
    assert worst.total / GIB == pytest.approx(57.53, abs=0.01)
    assert [r.id for r in plan.outcome.redirects] == ["RF001"]
    # The redirect is said once, as the redirect, not again as a finding on the plan itself.
    assert plan.plan_findings == ()
    text = render_markdown(plan, policies)
    assert "**Recommendation: DualPipeV** with P = 16 pipeline ranks and M = 120\n" in text
    assert (
        "- Redirected by `RF001`: Inter-node bandwidth at most 200 Gbps per GPU -> refuse "
        "DualPipe, recommend DualPipeV\n"
    ) in text
    assert "This plan:" not in text
    assert "DualPipe replication" not in text


def test_rf001_threshold_is_inclusive_at_200_only(tmp_path, policies):
    plan = frontier(tmp_path, policies, cluster={"interconnect": {"inter_node_gbps_per_gpu": 201}})
    assert plan.schedule == "dualpipe"


@pytest.mark.parametrize("gbps", [400, 200])
def test_nccl_all_to_all_is_redirected_to_zb1p_by_rf002(tmp_path, policies, gbps):
    """RF002 (precedence 50) wins over RF001 (10): without a custom kernel neither
    bidirectional schedule pays, so the decision is Zero Bubble even at 200 Gbps. But ZB-H1's
    rank r defers r weight passes, each keeping every GEMM's input and output gradient of its
    stage (eight routed copies of each token through the experts): no depth up to 61 fits
    (P = 32: 130.0 GiB), so the plan falls back to 1F1B, which holds min(M, P - r)
    micro-batches and no deferred W: P = 8 at 57.9 GiB; DP = 256, M = 15360 / 256 = 60."""
    plan = frontier(
        tmp_path,
        policies,
        cluster={"interconnect": {"inter_node_gbps_per_gpu": gbps}},
        communication={"all_to_all_kernel": "nccl"},
    )
    assert (plan.status, plan.schedule, plan.pipeline, plan.microbatches) == (
        "planned",
        "1f1b",
        8,
        60,
    )
    assert plan.notes[-1] == (
        "none of the policies' schedules (zb1p) fits at any layout: the plan falls back to "
        "1F1B, which runs everywhere"
    )
    assert [r.id for r in plan.outcome.redirects] == ["RF002"]
    text = render_markdown(plan, policies)
    assert "**Recommendation: 1F1B** with P = 8" in text
    assert (
        "- Redirected by `RF002`: No custom all-to-all kernel -> refuse DualPipe, recommend "
        "Zero Bubble\n"
    ) in text


def test_under_1b_tokens_is_refused_with_data_plus_tensor_parallel(tmp_path, policies, capsys):
    """RF003 (900M < 1B tokens) refuses any pipeline. The alternative is data + tensor (+ the
    manifest's expert) parallelism: T = 1 cannot take the global batch (15360 is not divisible
    by DP = 2048), T = 2 does not fit, T = 4 does: DP = 2048 / 4 = 512,
    M = 15360 / 512 = 30 gradient-accumulation steps. No bubble or GPU-hour numbers."""
    path = write(tmp_path, merged(example("frontier-moe"), {"training": {"tokens": "900M"}}))
    plan = plan_of(path, policies)
    assert (plan.status, plan.schedule, plan.pipeline) == ("refused", "none", 1)
    assert (plan.tensor, plan.expert, plan.data_parallel, plan.microbatches) == (4, 64, 512, 30)
    assert [r.id for r in plan.outcome.redirects] == ["RF003"]
    assert plan.candidates == () and plan.op_times == {}
    assert plan.rollback_threshold is None and plan.rollback_to is None
    code, out, err = run(capsys, str(path))
    assert (code, err) == (0, "")
    assert (
        "**Pipeline planning refused** by RF003: 900,000,000 training tokens is under 1B: "
        "pipeline planning is refused; use data parallelism plus tensor parallelism\n"
    ) in out
    assert "**Recommended instead:** data parallelism plus tensor parallelism:\n" in out
    assert "tensor = 4, expert = 64, data parallel = 512 on 2,048 H800\n" in out
    assert "No bubble or GPU-hour comparison applies: there is no pipeline.\n" in out
    assert "%" not in out.split("## Assumptions")[0]
    assert "Your proposal" not in out  # its bubble would be a number that does not apply
    data = json.loads(run(capsys, str(path), "--format", "json")[1])
    assert data["candidates"] == [] and data["op_times_seconds"] == {}
    assert data["rollback"]["threshold_percent"] is None


def test_refused_dense_run_without_a_proposal_uses_the_smallest_tensor_size(tmp_path, policies):
    """small-dense (13B, 64 A100-80GB) at 500M tokens: at T = 1 one GPU needs 103.5 GiB
    (weights and grads 6 x 13e9 B = 72.6 GiB, ZeRO-1 optimizer 12 x 13e9 / 64, one micro-batch
    through all 40 layers, logits, runtime), over the 75.1 GiB usable; T = 2 halves the states
    and activations: 53.6 GiB fits."""
    plan = plan_of(
        write(tmp_path, merged(example("small-dense"), {"training": {"tokens": "500M"}})),
        policies,
    )
    assert (plan.status, plan.tensor, plan.pipeline, plan.data_parallel) == ("refused", 2, 1, 32)


def test_a_model_that_fits_one_gpu_gets_no_pipeline(policies, capsys):
    """examples/no-pipeline.yaml: 1.3B x (2 + 4) B of weights and grads plus 12 B/16 of ZeRO-1
    optimizer plus one micro-batch of 8 sequences fits one H100 even at the estimate's high
    bound (55.5 GiB of 75.1 usable; central 38.3): data parallel over all 16 GPUs,
    M = 512 / (8 x 16) = 4 gradient-accumulation steps."""
    plan = plan_of(EXAMPLES / "no-pipeline.yaml", policies)
    assert (plan.status, plan.schedule, plan.pipeline, plan.tensor) == ("no-pipeline", "none", 1, 1)
    assert (plan.data_parallel, plan.microbatches, plan.micro_batch_size) == (16, 4, 8)
    assert plan.candidates == () and plan.op_times == {}
    assert plan.notes == (
        "the whole training state fits one GPU: data parallelism only, no pipeline",
    )
    code, out, _ = run(capsys, str(EXAMPLES / "no-pipeline.yaml"))
    assert code == 0
    assert "**Recommendation: no pipeline parallelism.**" in out
    assert "op times" not in out


def test_large_dense_falls_back_from_dualpipev_to_zb1p_because_m_over_p_is_1(policies):
    """large-dense fixes T = 8 and micro-batch size 1: DP = 16384 / (8 P) = 2048 / P, so
    M = 2048 / (1 x DP) = P at every P. DualPipeV needs M >= 2P, which no P gives, so the
    planner takes DT002's acceptable zb1p and says why, quoting the deepest P tried: 32 (P
    divides 16384 / 8 = 2048, and DualPipeV's 2P stages need P <= 126 / 2 = 63). As written
    (selective recompute of core_attn, SP) zb1p fits at P = 64 but nowhere within the
    planner's 90% margin (67.6 GiB), and recomputing more does not help: ZB-H1's rank r
    defers r weight passes, whose GEMM inputs and output gradients no recompute drops. So
    the plan keeps the manifest's settings and says it gives up the margin: at P = 64, with
    Llama 3's split (126 layers + embedding + loss = 128 = 64 x 2), rank 1 holds 63
    micro-batches of 2 layers and one deferred W, 71.9 GiB of 75.1 (P = 32, the closest
    before NCCL's buffers were counted, needs 76.4: over the usable memory)."""
    plan = plan_of(EXAMPLES / "large-dense.yaml", policies)
    assert plan.outcome.schedule == "dualpipev"
    assert (plan.status, plan.schedule, plan.tensor, plan.pipeline) == ("planned", "zb1p", 8, 64)
    assert plan.microbatches == plan.pipeline == 64
    worst = plan.memory.worst
    assert (worst.rank, worst.inflight, worst.layers) == (1, 63, 2)
    assert worst.total / GIB == pytest.approx(71.93, abs=0.01)
    assert plan.strategy is not None
    assert (plan.strategy.account_for_embedding, plan.strategy.account_for_loss) == (True, True)
    assert plan.notes == (
        "dualpipev was not possible at any P up to 63 (126 layers, 2 stages per rank): "
        "dualpipev needs micro-batches >= 2 x ranks = 64 (got 32) [deepseek-ai/DualPipe "
        "dualpipev.py: num_chunks >= num_ranks * 2]",
        "no layout keeps the worst rank within 90% of the usable memory (67.6 GiB); this one "
        "needs 71.9 of 75.1 GiB",
    )
    dualpipev = plan.numbers("dualpipev")
    assert dualpipev is not None and dualpipev.bubble is None
    assert dualpipev.violations == (
        "dualpipev needs micro-batches >= 2 x ranks = 128 (got 64) [deepseek-ai/DualPipe "
        "dualpipev.py: num_chunks >= num_ranks * 2]",
    )


def test_an_impossible_manifest_is_infeasible_and_exits_1(tmp_path, policies, capsys):
    """405B dense on 8 A100-40GB (37.4 GiB usable): each schedule's note quotes its closest
    layout as written (T = 4, no recompute: about 1 TB per GPU). The planner's levers
    (selective, then full recompute) do not make it fit either, so the last note prices one
    more change at the closest layout with full recompute: bf16 gradient reduction (a
    Megatron-core flag) and FP8 storage barely help, the
    optimizer in host memory leaves 297 GiB, twice the GPUs (more ZeRO sharding) 582 GiB; the
    last says how many GPUs would do: 256, the first doubling at which a layout fits with every
    lever on. Interleaving, which the decision table accepts, is tried at its searched depths
    and holds more in flight (999 GiB)."""
    path = write(tmp_path, IMPOSSIBLE)
    plan = plan_of(path, policies)
    assert (plan.status, plan.schedule, plan.memory) == ("infeasible", None, None)
    assert plan.notes == (
        "1f1b was not possible at any P up to 64 (the policy's max_pipeline): P = 2, T = 4: "
        "990.8 GiB per GPU is over 37.4 GiB",
        "zb1p was not possible at any P up to 64 (the policy's max_pipeline): P = 2, T = 4: "
        "990.8 GiB per GPU is over 37.4 GiB",
        "interleaved-1f1b was not possible at any P up to 64 (the policy's max_pipeline): P = 2, "
        "T = 4: 999.2 GiB per GPU is over 37.4 GiB",
        "at the closest layout (P = 2, T = 4, full recompute) the worst rank after one more "
        "change, against 37.4 GiB usable: --grad-reduce-in-bf16 -> 770.9 GiB; "
        "activation_storage: fp8 -> 865.4 GiB; "
        "optimizer_offload: 1 -> 296.9 GiB; gpus: 16 -> 581.7 GiB",
        "with 256 GPUs (32x) a plan fits: 1f1b P = 32, T = 8, worst rank 34.4 of 37.4 GiB, "
        "with activation_recompute: full",
    )
    code, out, err = run(capsys, str(path))
    assert (code, err) == (1, "")
    assert "**No feasible pipeline plan.**\n" in out
    code, out, err = run(capsys, str(path), "--format", "json")
    assert (code, err) == (1, "")
    assert json.loads(out)["status"] == "infeasible"


# 1,024 A100-40GB, a dense model of only 12 (very wide) layers, T fixed at 1, full recompute:
# at most P = 8 (powers of two divide the GPUs, P <= layers).
SHALLOW = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: shallow}
cluster:
  gpus: 1024
  accelerator: A100-40GB
  interconnect: {inter_node_gbps_per_gpu: 400}
model:
  architecture: dense
  total_params: 30B
  layers: 12
  hidden_size: 16384
  attention_heads: 128
  seq_len: 2048
  vocab_size: 32000
training:
  tokens: 1T
  global_batch_size: 8192
  activation_recompute: full
parallelism:
  tensor: 1
"""


def test_dualpipev_never_plans_more_stages_than_layers(tmp_path, policies):
    """DT002 picks DualPipeV, whose P ranks run 2P stages: at most P = 12 / 2 = 6 keeps a layer
    in every stage (the validator's X014 for a proposal), so P = 8 is never tried. P = 2 and 4
    do not fit 37.4 GiB (39.39 GiB usable less 5%; P = 4: 53.3 GiB). DT002's acceptable zb1p
    does not fit either: under full recompute a deferred weight pass keeps the recomputed GEMM
    inputs and output gradients of its whole stage, and ZB-H1's later ranks defer up to P - 1
    of them (P = 8: 51.8 GiB). The plan falls back to 1F1B at P = 8 (DP = 128, 64 sequences
    per DP rank: micro-batch 1 gives M/P = 8; its worst rank, the last with the output layer
    and logits, 35.9 GiB: over the planner's 90% margin, which no layout meets, so the plan
    says so)."""
    plan = plan_of(write(tmp_path, SHALLOW), policies)
    assert (plan.schedule, plan.pipeline, plan.microbatches) == ("1f1b", 8, 64)
    assert plan.notes == (
        "dualpipev was not possible at any P up to 6 (12 layers, 2 stages per rank): P = 4, "
        "T = 1: 53.3 GiB per GPU is over 37.4 GiB",
        "zb1p was not possible at any P up to 12 (12 layers, 1 stage per rank): P = 8, T = 1: "
        "51.8 GiB per GPU is over 37.4 GiB",
        "none of the policies' schedules (dualpipev, zb1p) fits at any layout: the plan falls "
        "back to 1F1B, which runs everywhere",
        "no layout keeps the worst rank within 90% of the usable memory (33.7 GiB); this one "
        "needs 35.9 of 37.4 GiB",
    )


@pytest.mark.parametrize(
    "doc",
    [
        IMPOSSIBLE,
        SHALLOW.replace("30B", "60B"),
        merged(example("frontier-moe"), {"cluster": {"gpus": 16}, "parallelism": None}),
    ],
    ids=["405b-on-8", "shallow-60b", "671b-on-16"],
)
def test_an_infeasible_plan_s_notes_do_not_depend_on_the_bound(
    tmp_path, policies, monkeypatch, doc
):
    """A search that fits nothing sizes only the skipped layouts whose states bound could still
    beat the closest one (`_complete_closest`); with the bound disabled (every layout sized)
    the notes, the closest layout and its remedies included, are the same."""
    from dpguard import memo, sizing

    path = write(tmp_path, doc)
    bounded = plan_of(path, policies)
    assert bounded.status == "infeasible"
    assert any("at the closest layout" in note for note in bounded.notes)
    memo.forget()
    monkeypatch.setattr(sizing, "states_floor", lambda manifest, s: 0.0)
    assert plan_of(path, policies).notes == bounded.notes
    memo.forget()


def test_an_infeasible_note_quotes_the_stage_closest_to_fitting(tmp_path, policies):
    """At 60B nothing fits, not even the 1F1B fallback. For 1F1B at P = 8 the note gives the
    memory at the micro-batch size that needs the least (micro-batch 1: 64.3 GiB), not at the
    last one tried (micro-batch 64, over twice as much). The manifest already recomputes
    fully, so the planner has no lever left; the last note prices one more change at that
    closest layout: only T = 2 (which the manifest fixes at 1) would bring it under 37.4 GiB.
    No GPU count would: at T = 1 the 12 layers allow at most P = 8, so no note of more GPUs."""
    plan = plan_of(write(tmp_path, SHALLOW.replace("30B", "60B")), policies)
    assert plan.status == "infeasible"
    assert plan.notes == (
        "dualpipev was not possible at any P up to 6 (12 layers, 2 stages per rank): P = 4, "
        "T = 1: 95.5 GiB per GPU is over 37.4 GiB",
        "zb1p was not possible at any P up to 12 (12 layers, 1 stage per rank): P = 8, T = 1: "
        "80.1 GiB per GPU is over 37.4 GiB",
        "1f1b was not possible at any P up to 12 (12 layers, 1 stage per rank): P = 8, T = 1: "
        "64.3 GiB per GPU is over 37.4 GiB",
        "at the closest layout (P = 8, T = 1, full recompute) the worst rank after one more "
        "change, against 37.4 GiB usable: --grad-reduce-in-bf16 -> 44.8 GiB; "
        "activation_storage: fp8 -> 64.0 GiB; "
        "tensor: 2 -> 34.8 GiB; optimizer_offload: 1 -> 63.3 GiB; gpus: 2048 -> 63.8 GiB",
    )


def test_an_invalid_manifest_has_nothing_to_plan(capsys):
    code, out, err = run(capsys, str(EXAMPLES / "mistakes.yaml"))
    assert (code, out) == (1, "")
    assert err.endswith(f"{EXAMPLES / 'mistakes.yaml'}: the manifest is invalid; nothing to plan\n")


SMALL_MOE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: small-moe}
cluster:
  gpus: 64
  gpus_per_node: 8
  accelerator: H100-SXM
  interconnect: {inter_node_gbps_per_gpu: %d}
model: {architecture: moe, layers: 30, hidden_size: 4096, attention_heads: 32, kv_heads: 4,
  ffn_hidden_size: 16384, ffn_activation: gelu, seq_len: 4096, vocab_size: 32000, experts: 64,
  experts_per_token: 2, moe_ffn_hidden_size: 512, active_params: 1646264320,
  total_params: 9447669760}
training: {tokens: 300B, global_batch_size: 256, activation_recompute: none}
"""


def test_the_expert_parallel_size_is_searched_by_step_time(tmp_path, policies):
    """Without a parallelism section the planner tries the largest EP (64: every GPU) and the
    largest whose group stays inside a node (8). On a 100 Gb/s network the all-to-all across 8
    nodes dominates the step: the model prices EP 64 at about 3x EP 8, and the plan is EP 8.
    The plan's own patch, applied and reviewed, draws no ADV003 (it used to: a proposal at
    EP 16 planned faster than the plan). On a 3.2 Tb/s network the gap is within the policy's
    tolerance and the larger size stays."""
    slow = plan_of(write(tmp_path, SMALL_MOE % 100, "slow.yaml"), policies)
    assert slow.expert == 8 and slow.strategy is not None
    wide = replace(slow.strategy, expert=64)
    wide_time = perf.predicted(slow.manifest, wide, slow.micro_batch_size)
    assert slow.performance is not None and wide_time is not None
    assert wide_time.step_time_s > 2 * slow.performance.step_time_s
    fast = plan_of(write(tmp_path, SMALL_MOE % 3200, "fast.yaml"), policies)
    assert fast.expert == 64


def test_the_experts_tensor_size_is_searched_by_step_time(tmp_path, policies):
    """DeepSeek-V3 on 2,048 H800 planned without its parallelism section: at TP > 1 the planner
    tries the framework's expert TP size (Megatron-LM's: the tensor size) and whole experts
    (ETP 1). Each of its 256 experts is a 7168 x 2048 MLP: split over TP its GEMMs shrink and
    every MoE layer adds TP collectives, so the model prices ETP 1 faster than the policy's
    tolerance and the plan runs it; its patch and its Megatron-LM arguments say so, and a
    manifest that writes the size keeps it."""
    doc = yaml.safe_load((PERF / "deepseek-v3-2048xh800.yaml").read_text(encoding="utf-8"))
    doc.pop("parallelism")
    doc["training"].pop("micro_batch_size")
    plan = plan_of(write(tmp_path, doc), policies)
    s = plan.strategy
    assert s is not None and plan.tensor > 1 and s.expert_tensor == 1
    assert plan.performance is not None and plan.performance.layout.expert_tensor == 1
    split = perf.predicted(plan.manifest, replace(s, expert_tensor=0), plan.micro_batch_size)
    assert split is not None and split.layout.expert_tensor == plan.tensor
    tolerance = policies.settings["planner"]["step_time_tolerance"]
    assert split.step_time_s > (1 + tolerance) * plan.performance.step_time_s
    assert manifest_patch(plan)["parallelism"]["expert_tensor"] == 1
    assert "--expert-tensor-parallel-size 1" in emit(plan, "megatron")
    doc["parallelism"] = {"tensor": plan.tensor, "pipeline": plan.pipeline, "expert": 64}
    doc["parallelism"]["expert_tensor"] = plan.tensor
    kept = plan_of(write(tmp_path, doc, "written.yaml"), policies)
    assert kept.strategy is not None and kept.strategy.expert_tensor == plan.tensor


DEEP_DENSE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: deep-dense}
cluster: {accelerator: MI300X, gpus: 64, gpus_per_node: 8,
  interconnect: {inter_node_gbps_per_gpu: 400}}
model: {architecture: dense, attention_heads: 96, ffn_activation: swiglu, ffn_hidden_size: 32768,
  hidden_size: 12288, kv_heads: 8, layers: 126, seq_len: 8192, total_params: 194210955264,
  vocab_size: 32000}
parallelism: {tensor: 2, pipeline: 1}
training: {activation_recompute: none, global_batch_size: 1024, tokens: 300B%s}
"""


def test_the_step_time_model_has_the_last_word_on_the_micro_batch_size(tmp_path, policies):
    """A 194B model on 64 MI300X proposed at TP 2 without a pipeline: the plan keeps TP 2 and
    runs 1F1B at P = 8, DP = 4, 256 sequences per replica. The
    M/P target (8..16) picks micro-batch 4 (M/P = 8); the step-time model prices micro-batch 1
    (M = 256, a quarter of the bubble) more than the policy's 5 % tolerance faster, so the plan
    runs 1 and its page says why. A micro-batch size the manifest writes stays."""
    plan = plan_of(write(tmp_path, DEEP_DENSE % ""), policies)
    assert (plan.schedule, plan.pipeline, plan.data_parallel) == ("1f1b", 8, 4)
    assert (plan.micro_batch_size, plan.microbatches) == (1, 256)
    assert plan.micro_batch_target is not None and plan.performance is not None
    size, seconds = plan.micro_batch_target
    assert size == 4 and seconds > 1.05 * plan.performance.step_time_s
    page = render_markdown(plan, policies)
    assert "micro-batch size chosen by the step-time model: at 4, the size the M/P" in page
    written = plan_of(write(tmp_path, DEEP_DENSE % ", micro_batch_size: 4", "w.yaml"), policies)
    assert (written.micro_batch_size, written.micro_batch_target) == (4, None)


def test_no_alternative_is_a_layout_the_policies_refuse(tmp_path, policies, capsys):
    """The small MoE names no all-to-all kernel, so RF002 refuses DualPipe (the plan's schedule
    table says so). The step-time model prices DualPipe fastest, but the page's alternatives and
    its "the model expects ... fewer GPU-hours" sentence may not point the team at it: every
    alternative is a layout the policies would accept as a proposal."""
    path = write(tmp_path, SMALL_MOE % 100)
    code, out, _ = run(capsys, str(path), "--format", "json")
    plan = json.loads(out)
    assert code == 0
    assert {c["schedule"]: c["policy_rejects"] for c in plan["candidates"]}["dualpipe"] == ["RF002"]
    schedules = [a["layout"]["schedule"] for a in plan["alternatives"]]
    assert "dualpipe" not in schedules and "dualpipev" in schedules
    code, page, _ = run(capsys, str(path))
    assert "expects dualpipe " not in page and "expects dualpipev " in page


def test_an_unwritten_expert_size_in_a_parallelism_section_is_kept_at_1(tmp_path, policies):
    """A parallelism section without `expert` means expert = 1, which the policies judged (DT001
    does not fire, DT002 picks DualPipeV): the planner keeps EP = 1 instead of choosing 64 and
    contradicting the decision (T = 8 so that the 671B model fits without EP: P = 16 keeps it
    within the planner's 90% memory margin)."""
    doc = merged(example("frontier-moe"), {"parallelism": {"expert": None, "tensor": 8}})
    plan = plan_of(write(tmp_path, doc), policies)
    assert plan.outcome.decision is not None and plan.outcome.decision.id == "DT002"
    assert (plan.schedule, plan.expert, plan.kernel.kernel) == ("dualpipev", 1, "none")
    assert (plan.tensor, plan.pipeline) == (8, 16)


def test_ep_times_tp_not_dividing_the_ranks_is_planned_not_an_internal_error(
    tmp_path, policies, capsys
):
    """T = 8, EP = 64, P = 16 on 2,048 GPUs: DP = 16 and T x DP = 128 is divisible by EP (the
    validator's X009) but not by EP x T = 512, Megatron's default expert-tensor layout; the
    memory model then uses ETP = 1 instead of raising."""
    path = write(tmp_path, merged(example("frontier-moe"), {"parallelism": {"tensor": 8}}))
    code, out, err = run(capsys, str(path), "--format", "json")
    assert (code, err) == (0, "")
    assert json.loads(out)["schedule"] == "dualpipe"


# ---- M/P choices ------------------------------------------------------------------------------


def small_dense(tmp_path: Path, policies: Policies, **training: Any) -> Plan:
    """examples/small-dense.yaml with full recompute (small activations: every micro-batch size
    fits) and the given training keys, planned with a pipeline (`pipelined`: at full recompute
    TP 2 alone is faster, and these tests are about the pipeline's M)."""
    doc = merged(example("small-dense"), {"training": {"activation_recompute": "full", **training}})
    return plan_of(write(tmp_path, doc), pipelined(tmp_path, policies))


def pipelined(tmp_path: Path, policies: Policies) -> Policies:
    """The shipped policies with no layout without a pipeline competing
    (`unpipelined_max_params: 0`): for the tests of the pipeline's own mechanics on models that
    TP or EP alone would fit."""
    return _layered(tmp_path, policies, unpipelined_max_params=0)


def test_unset_micro_batch_size_is_chosen_for_m_over_p_in_the_target_range(tmp_path, policies):
    """13B on 64 GPUs: T = 1, P = 2, DP = 32; 1024 / 32 = 32 sequences per DP rank per step.
    Micro-batch 1 gives M/P = 32/2 = 16, micro-batch 2 gives 16/2 = 8: both inside 8..16, and
    the larger micro-batch (better GEMMs, fewer steps) wins: M = 16."""
    plan = small_dense(tmp_path, policies, micro_batch_size=None)
    assert (plan.tensor, plan.pipeline, plan.data_parallel) == (1, 2, 32)
    assert (plan.micro_batch_size, plan.microbatches) == (2, 16)
    text = render_markdown(plan, policies)
    assert "| Micro-batches | M/P = 8.00; micro-batch size chosen for M/P in 8..16;" in text


def test_unset_micro_batch_size_takes_the_closest_m_over_p_when_the_range_is_impossible(
    tmp_path, policies
):
    """frontier-moe without micro_batch_size: at P = 32 each DP rank has 15360 / 64 = 240
    sequences, so M/P <= 240/32 = 7.5 at micro-batch 1: below 8 whatever the size; 7.5 is the
    closest."""
    doc = merged(example("frontier-moe"), {"training": {"micro_batch_size": None}})
    plan = plan_of(write(tmp_path, doc), policies)
    assert (plan.pipeline, plan.micro_batch_size, plan.microbatches) == (32, 1, 240)
    assert (
        "M/P = 7.50; micro-batch size chosen for M/P as close as the global batch allows to 8..16"
    ) in render_markdown(plan, policies)


@pytest.mark.parametrize(
    ("mbs", "tensor", "dp", "expected"), [(1, 1, 32, 32), (2, 1, 32, 16), (4, 1, 32, 8)]
)
def test_a_written_micro_batch_size_fixes_m(tmp_path, policies, mbs, tensor, dp, expected):
    """M = global batch / (micro-batch x DP), P = 2. At T = 1, DP = 32: micro-batch 1 gives
    M = 1024 / 32 = 32, 2 gives 16 and 4 gives 8 (M/P 4, below the 8..16 target). The step-time
    model keeps T = 1 for micro-batch 4 too: T = 2 (M = 16) halves the bubble but adds its
    collectives and half-width GEMMs, and comes out within the policy's step_time_tolerance of
    T = 1, where the simpler layout wins (the old M/P-first rule took T = 2 for the bubble
    alone)."""
    plan = small_dense(tmp_path, policies, micro_batch_size=mbs)
    assert (plan.pipeline, plan.tensor, plan.data_parallel) == (2, tensor, dp)
    assert (plan.micro_batch_size, plan.microbatches) == (mbs, expected)
    text = render_markdown(plan, policies)
    assert f"M = global batch 1024 / (micro-batch {mbs} x DP {dp})" in text
    if mbs == 4:  # the layout the M/P rule chose is no faster than the tolerance
        wider = replace(plan.strategy, tensor=2, microbatches=16)
        sized = replace(plan.manifest, training=replace(plan.manifest.training, micro_batch_size=4))
        chosen = perf.predict(sized, perf.layout_of(sized, plan.strategy, 4)).step_time_s
        other = perf.predict(sized, perf.layout_of(sized, wider, 4)).step_time_s
        tolerance = policies.settings["planner"]["step_time_tolerance"]
        assert other * (1 + tolerance) >= chosen


def test_dualpipe_gets_an_even_m_of_at_least_2p(tmp_path, policies):
    """hand-moe with global batch 1088 and no micro-batch size: P = 2, DP = 32, 34 sequences per
    DP rank. M/P in 8..16 means M in 16..32: only micro-batch 2 (M = 17) is inside, but DualPipe
    needs an even M (M/2 each way), so the planner takes the next closest, micro-batch 1:
    M = 34 (M/P = 17), even and >= 2P = 4. Zero Bubble (RF002 with an NCCL all-to-all) has no
    parity rule and takes M = 17."""
    doc = YAML(typ="safe").load(HAND_MOE)
    doc["training"]["global_batch_size"] = 1088
    del doc["training"]["micro_batch_size"]
    policies = pipelined(tmp_path, policies)  # EP alone fits it: TP 1 x EP 8, no pipeline
    plan = plan_of(write(tmp_path, doc), policies)
    assert (plan.schedule, plan.pipeline, plan.micro_batch_size, plan.microbatches) == (
        "dualpipe",
        2,
        1,
        34,
    )
    doc["communication"]["all_to_all_kernel"] = "nccl"
    plan = plan_of(write(tmp_path, doc, "nccl.yaml"), policies)
    assert (plan.schedule, plan.pipeline, plan.micro_batch_size, plan.microbatches) == (
        "zb1p",
        2,
        2,
        17,
    )


# ---- GPU-hours, op times, bubbles -------------------------------------------------------------


def test_gpu_hours_arithmetic_frontier_moe(policies):
    """Worked by hand (compute.py; policies/planner.yaml H800 efficiency 0.35; catalog H800
    dense BF16 peak 989 TFLOP/s):

    ideal  = 6 x 37e9 active x 14.8e12 tokens / (989e12 x 0.35 x 3600)
           = 3.2856e24 / 1.246140e18 = 2,636,621.9 GPU-hours
             (DeepSeek-V3 reports 2.664M H800 GPU-hours for the same tokens)
    DualPipe, P = 32, M = 240, F = 1, B = 2, W = 1, F&B = 3 (per chunk):
      busy per rank = M (F + B) = 240 x 3 = 720; idle = (P/2 - 1)(F&B + B - 3W) = 15 x 2 = 30
      makespan 750, bubble = 30/750 = 1/25;         hours = ideal x 25/24 = 2,746,481.1
    1F1B: idle = (P - 1)(F + B) = 93, makespan 813, bubble = 93/813 = 31/271;
                                                    hours = ideal x 813/720 = 2,977,185.5
    (the bubble-only GPU-hours these once gave are now the step-time model's, below)
    """
    plan = plan_of(EXAMPLES / "frontier-moe.yaml", policies)
    data = plan_dict(plan, policies)
    ideal = 6 * 37e9 * 14.8e12 / (989e12 * 0.35 * 3600)
    assert data["efficiency"] == 0.35
    assert data["ideal_gpu_hours"] == pytest.approx(ideal, rel=1e-12)
    assert data["ideal_gpu_hours"] == pytest.approx(2_636_621.89, abs=0.01)
    rows = {c["schedule"]: c for c in data["candidates"]}
    assert Fraction(rows["dualpipe"]["bubble_fraction"]).limit_denominator(1000) == Fraction(1, 25)
    assert Fraction(rows["1f1b"]["bubble_fraction"]).limit_denominator(1000) == Fraction(31, 271)
    assert rows["dualpipe"]["makespan_forward_chunks"] == 750
    assert rows["1f1b"]["makespan_forward_chunks"] == 813
    # GPU-hours are the step-time model's (docs/performance.md). The proposal is DeepSeek-V3's
    # own layout (P = 16): it lands within 10 % of the reported 2.664M H800 GPU-hours of
    # pre-training (arXiv 2412.19437 Table 1). The plan's P = 32 (the memory margin rules out
    # P = 16 by the memory model) costs more, and 1F1B at its layout more again.
    assert plan.performance is not None and plan.proposal_performance is not None
    assert plan.proposal_performance.gpu_hours == pytest.approx(2.664e6, rel=0.10)
    assert rows["dualpipe"]["gpu_hours"] == pytest.approx(plan.performance.gpu_hours, rel=1e-12)
    assert rows["1f1b"]["gpu_hours"] > rows["dualpipe"]["gpu_hours"]
    text = render_markdown(plan, policies)
    hours = f"{rows['dualpipe']['gpu_hours']:,.0f}"
    assert f"| GPU-hours for 14.8T tokens | {hours} (" in text


def test_op_times_in_seconds_frontier_moe(policies):
    """F = 2 x active/(P x T) x tokens per micro-batch / (peak x efficiency)
         = 2 x (37e9 / 32) x (1 x 4096) / (989e12 x 0.35) = 9.472e12 / 3.4615e14 = 0.027364 s;
    B = 2F, W = F, F&B = 3F (policies/planner.yaml op_time_ratios)."""
    data = plan_dict(plan_of(EXAMPLES / "frontier-moe.yaml", policies), policies)
    forward = 2 * (37e9 / 32) * 4096 / (989e12 * 0.35)
    # 9 significant digits, the others exact decimal multiples (so `dpguard bubble` takes them)
    assert data["op_times_seconds"] == {
        "forward": 0.0273638596,
        "backward": 0.0547277192,
        "weight": 0.0273638596,
        "overlapped": 0.0820915788,
    }
    assert data["op_time_ratios"]["backward"] == 2.0
    assert data["op_time_ratios"]["weight"] == 1.0
    assert data["op_time_ratios"]["overlapped"] == 3.0
    assert data["op_times_seconds"] == pytest.approx(
        {"forward": forward, "backward": 2 * forward, "weight": forward, "overlapped": 3 * forward},
        rel=1e-8,
    )
    assert forward == pytest.approx(0.027364, abs=1e-6)


def test_op_times_divide_by_tensor_and_context(tmp_path, policies):
    """large-dense: T = 8, P = 64, one sequence of 8192 tokens per micro-batch, H100 at 40%:
    F = 2 x 405e9 / 512 x 8192 / (989e12 x 0.40) = 0.032760 s."""
    data = plan_dict(plan_of(EXAMPLES / "large-dense.yaml", policies), policies)
    forward = 2 * 405e9 / 512 * 8192 / (989e12 * 0.40)
    assert data["op_times_seconds"]["forward"] == pytest.approx(forward, rel=1e-8)
    assert forward == pytest.approx(0.032760, abs=1e-6)


@pytest.mark.parametrize("name", ["frontier-moe", "large-dense", "small-dense"])
def test_plan_bubbles_equal_dpguard_bubble_and_the_simulator(name, policies, capsys):
    """Every simulated candidate in the plan JSON is reproduced from the JSON alone: by
    `dpguard bubble` with the plan's op-time ratios, by dpguard.schedules.simulate with the same
    ratios and with the op times in seconds (exactly: the bubble is scale-free and the seconds
    keep the ratios exactly), and its GPU-hours are the step-time model's at the plan's layout."""
    plan = plan_of(EXAMPLES / f"{name}.yaml", policies)
    data = plan_dict(plan, policies)
    assert plan.strategy is not None
    hours = {}
    for c in plan.candidates:
        s = replace(plan.strategy, schedule=c.schedule, virtual_stages=c.virtual_stages)
        timed = perf.predicted(plan.manifest, s, plan.micro_batch_size)
        if timed is not None:
            hours[c.schedule] = timed.gpu_hours
    r, s = data["op_time_ratios"], data["op_times_seconds"]
    ratios = OpTimes(1, r["backward"], r["weight"], r["overlapped"])
    seconds = OpTimes(s["forward"], s["backward"], s["weight"], s["overlapped"])
    simulated = [c for c in data["candidates"] if c["bubble_fraction"] is not None]
    assert len(simulated) >= 4
    for c in simulated:
        p, m, v = data["pipeline"], data["microbatches"], c["virtual_stages"]
        exact = simulate(c["schedule"], p, m, ratios, virtual_stages=v)
        assert c["bubble_fraction"] == float(exact.bubble_fraction), c["schedule"]
        assert c["makespan_forward_chunks"] == float(exact.makespan * exact.chunk_size)
        timed = simulate(c["schedule"], p, m, seconds, virtual_stages=v)
        assert timed.bubble_fraction == exact.bubble_fraction, c["schedule"]
        # GPU-hours: the step-time model's for the schedule at the plan's layout
        layout = {**data["performance"]["layout"], "schedule": c["schedule"]}
        layout["virtual_stages"] = v
        assert c["gpu_hours"] == pytest.approx(hours[c["schedule"]], rel=1e-12), layout
        args = ["bubble", "-s", c["schedule"], "-p", str(p), "-m", str(m), "-v", str(v)]
        times = ["-F", "1", "-B", str(r["backward"]), "-W", str(r["weight"])]
        assert main([*args, *times, "--fb", str(r["overlapped"]), "--format", "json"]) == 0
        cli = json.loads(capsys.readouterr().out)
        assert cli["bubble_fraction"] == c["bubble_fraction"], c["schedule"]


def test_rollback_trigger_is_the_predicted_mfu_and_its_band(policies):
    """frontier-moe (P = 32, M = 240): the trigger's metric is model-FLOPs utilisation from the
    logged step time; the plan expects the step-time model's MFU and triggers below the low
    end of its calibrated band (policies/performance/model.yaml band.low = -20 %): 0.8 x the
    expectation. The simpler schedule (policies/planner.yaml rollback.simpler) is DualPipeV,
    priced by the same model at the same layout."""
    plan = plan_of(EXAMPLES / "frontier-moe.yaml", policies)
    assert plan.performance is not None and plan.rollback_performance is not None
    assert plan.expected_utilization == pytest.approx(100 * plan.performance.mfu, rel=1e-12)
    assert plan.rollback_threshold == pytest.approx(
        (1 + float(perf.data.load()["band"]["low"])) * plan.expected_utilization, rel=1e-12
    )
    assert plan.rollback_to == "dualpipev"
    assert plan.rollback_performance.layout.schedule == "dualpipev"
    data = plan_dict(plan, policies)
    assert data["rollback"] == {
        "metric": "model-FLOPs utilisation from the logged step time (docs/planner.md)",
        "to": "dualpipev",
        "threshold_percent": pytest.approx(plan.rollback_threshold),
        "expected_utilization_percent": pytest.approx(plan.expected_utilization),
        "steps": 1000,
    }
    text = render_markdown(plan, policies)
    assert 'nvidia-smi\'s "GPU utilization" is not this\nnumber' in text


# ---- Memory model -----------------------------------------------------------------------------


def test_memory_model_hand_worked(tmp_path, policies):
    """HAND_MOE (header comment) on 64 A100-40GB (37.4 GiB usable: the catalog's 39.39 less 5%)
    with T = 1, EP = 8, full recompute, micro-batch 1. It does not fit one GPU (weights and
    grads alone, 6 B x 9.73e9 = 54 GiB), so DualPipe (DT001, 400 Gbps, DeepEP) at the smallest
    P = 2: DP = 64 / 2 = 32, M = 1024 / 32 = 32.

    Parameters (the declared totals decide the bytes: routed experts (total - active) x E /
    (E - k) = 7e9 x 16/14 = 8e9; the 1.6B left after the two vocab matrices spread evenly over
    the 16 MoE layers, 1e8 each). Stage 0 = layers 0-7 + the embedding, stage 1 = layers 8-15 +
    the output layer, one copy each:
      dense  = 1.6e9 x 8/16 + 67,108,864 = 867,108,864
      expert = 8e9 x 8/16 / EP 8         = 500,000,000          (1,367,108,864 in all)
    Bytes (bf16: weights 2, fp32 grads 4, optimizer 4 + 2 x 4; ZeRO-1 shards the optimizer over
    DP = 32 for dense and over T x DP / EP = 32 / 8 = 4 for expert parameters):
      weights   = 2 x 1,367,108,864                               =  2,734,217,728
      gradients = 4 x 1,367,108,864                               =  5,468,435,456
      optimizer = 12 x 867,108,864 / 32 + 12 x 500,000,000 / 4    =  1,825,165,824
      one stage                                                   = 10,027,819,008
    DualPipe's rank 0 also holds the mirrored stage 1 (replication_extra) = 10,027,819,008; rank
    1 holds the same two stages the other way round, so the totals tie and rank 0 is reported.
    Activations: full recompute keeps each layer's input, 2sbh = 2 x 4096 x 2048 = 16,777,216 B;
    DualPipe holds P + 1 = 3 chunks of 8 layers in flight (arXiv 2412.19437 Table 2; the
    closed form agrees with the simulator). One layer is recomputed at a time with all its
    tensors but its input (already kept): per token, with h = 2048, no SP, FlashAttention, GeLU
    with dropout masks,
    expert width w = 8e9 / 16 layers / 16 experts / 2h = 7,629.39...:
      attention block: norm in 2h + norm out 2h + mask h + q, k, v 6h + o-proj input 2h
                       + log-sum-exp 4a (a = 16)                       = 13h + 64
      MoE block: norm in 2h + mask h + norm out 2h + router logits 4 x 16
                 + 2 routed copies x (input 2h + fc1 out 2w + fc2 in 2w) = 9h + 64 + 8w
      = 22h + 128 + 8w = 106,219.15625 B/token x 4096                 =    435,073,664
      less the input 2h x 4096                                        =    418,296,448
    The embedding runs outside the recomputed layers: its dropout mask, h x 4096 = 8,388,608 B
    per micro-batch, is on stage 0 only, so rank 0's chunks carry half of it on average:
      3 x 8 x 16,777,216 + 418,296,448 + 3 x 8,388,608 / 2             =    833,532,544
    Other: fp32 logits on the stage with the output layer, 4 s v = 4 x 4096 x 32768 =
    536,870,912, plus the 1.5 GiB runtime overhead 1,610,612,736     =  2,147,483,648
    plus six NCCL communicators (the default group, data, expert, expert-data, pipeline and
    Megatron's model-parallel group), 6 x 0.43 GiB                =  2,770,253,905.92
    Total = 2 x 10,027,819,008 + 833,532,544 + 4,917,737,553.92 = 25,806,908,113.92 B =
    24.03 GiB, within 37.42 GiB. Band: states -3 %/+5 %, activations and logits -40 %/+60 %,
    overhead halved or doubled, communicators -70 %/+250 %: low = 20,055,638,016 x 0.97 +
    (833,532,544 + 536,870,912) x 0.6 + 805,306,368 + 2,770,253,905.92 x 0.3 =
    21,912,593,488.896; high = 20,055,638,016 x 1.05 + 1,370,403,456 x 1.6 + 3,221,225,472 +
    2,770,253,905.92 x 3.5 = 36,168,179,589.12.
    """
    plan = plan_of(write(tmp_path, HAND_MOE), policies)
    assert (plan.schedule, plan.pipeline, plan.data_parallel, plan.microbatches) == (
        "dualpipe",
        2,
        32,
        32,
    )
    assert max(simulate("dualpipe", 2, 32, OpTimes(1, 2, 1, 3)).peak_activations_per_rank) == 3
    memory = plan_dict(plan, policies)["memory_bytes"]
    low, high = memory.pop("low"), memory.pop("high")
    assert memory == {
        "weights": 2_734_217_728,
        "gradients": 5_468_435_456,
        "optimizer": 1_825_165_824,
        "replication_extra": 10_027_819_008,
        "activations": 833_532_544,
        "other": 4_917_737_554,
        "total": 25_806_908_114,
    }
    # The JSON rounds to whole bytes; the model's own values keep the fractions.
    assert (low, high) == (21_912_593_489, 36_168_179_589)
    assert plan.memory.worst.low == pytest.approx(21_912_593_488.896, rel=1e-12)
    assert plan.memory.worst.high == pytest.approx(36_168_179_589.12, rel=1e-12)
    assert plan.memory.worst.communicators == pytest.approx(6 * 0.43 * GIB, rel=1e-12)
    worst = plan.memory.worst
    assert (worst.rank, worst.inflight, worst.layers) == (0, 3, 16)
    assert [r.total for r in plan.memory.ranks] == pytest.approx([25_806_908_113.92] * 2, rel=1e-12)
    assert worst.parameters == 2 * 1_367_108_864  # both copies
    text = render_markdown(plan, policies)
    assert (
        "| Memory per GPU (worst rank) | 24.0 GiB (band 20.4-33.7) of 37.4 GiB usable "
        "(39.39 GiB less 5% headroom); rank 0: weights 2.55 + gradients 5.09 + optimizer 1.7 + "
        "second copy 9.34 + activations 0.78 (3 in flight) + other 4.58 GiB"
    ) in text
    assert (
        "| DualPipe replication | +9.3 GiB per GPU for the second parameter copy; fits. 2.73B "
        "parameters per GPU across both copies (28.09% of the model; experts sharded 8-way) |"
    ) in text


def test_memory_model_zero1_over_dp_without_dualpipe(tmp_path, policies):
    """The same model with an NCCL all-to-all: RF002 -> Zero Bubble, one parameter copy per
    rank, the same 10,027,819,008 B of states on both. ZB-H1 at P = 2 holds min(M, P - r)
    chunks as 1F1B does, plus the weight passes it defers: each keeps every GEMM's input and
    output gradient for the stage's 8 layers, per token 8h (attention and MLP inputs, o-proj
    and fc2 output gradients) + 2 x 4h (o-proj input, q/k/v output gradients) + top-2 x (4h +
    4 x 7,629.39) (each routed copy's fc1 and fc2 inputs and output gradients) = 110,187.6 B,
    451,326,592 B a layer at 4,096 tokens, 3,610,612,736 a stage. Full recompute keeps only
    16,777,216 B a layer (134,217,728 a stage), so the peaks are where a W waits: rank 0
    right after its I (one held chunk + one W), rank 1 after its I with the previous
    micro-batch's W deferred (two W). Rank 0: 134,217,728 + 3,610,612,736 + the recomputed
    layer 418,296,448 + the embedding's dropout mask 8,388,608 = 4,171,515,520 B of
    activations, the 1.5 GiB overhead and six NCCL communicators' 2,770,253,905.92 (as
    `test_memory_model_hand_worked`): 18,580,201,169.92. Rank 1, with the output layer:
    2 x 3,610,612,736 + 418,296,448 = 7,639,521,920 of activations, and the fp32 logits
    536,870,912 next to the overhead and communicators: 22,585,078,481.92, the worst rank."""
    nccl = write(tmp_path, HAND_MOE.replace("deepep", "nccl"))
    plan = plan_of(nccl, pipelined(tmp_path, policies))  # (EP alone fits it, faster)
    assert (plan.schedule, plan.pipeline) == ("zb1p", 2)
    assert [r.total for r in plan.memory.ranks] == pytest.approx(
        [18_580_201_169.92, 22_585_078_481.92], rel=1e-12
    )
    assert plan.memory.worst.rank == 1
    memory = plan_dict(plan, policies)["memory_bytes"]
    assert memory["replication_extra"] == 0
    assert memory["activations"] == 7_639_521_920
    assert memory["other"] == 4_917_737_554
    assert memory["total"] == 22_585_078_482


# ---- Determinism and golden plans -------------------------------------------------------------


@pytest.mark.parametrize("name", VALID_EXAMPLES)
@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_plan_output_is_byte_identical_across_runs(name, fmt, capsys):
    path = str(EXAMPLES / f"{name}.yaml")
    first = run(capsys, path, "--format", fmt)
    second = run(capsys, path, "--format", fmt)
    assert first == second
    assert first[0] == 0 and first[1]


@pytest.mark.parametrize("name", VALID_EXAMPLES)
@pytest.mark.parametrize("suffix", ["md", "json"])
def test_golden_plan(name, suffix, capsys, monkeypatch):
    """tests/golden/plans/<example>.<md|json>; DPGUARD_UPDATE_GOLDEN=1 rewrites them. The policy
    sets' digests are masked: editing a comment in a policy file changes no plan. Run from the
    checkout's root: paths under it print relative to it."""
    monkeypatch.chdir(REPO)
    fmt = "markdown" if suffix == "md" else "json"
    code, out, err = run(capsys, str(EXAMPLES / f"{name}.yaml"), "--format", fmt)
    assert (code, err) == (0, "")
    assert re.search(r"sha256:[0-9a-f]{16}", out)
    out = re.sub(r"sha256:[0-9a-f]{16}", "sha256:<digest>", out)
    golden = GOLDEN / f"{name}.{suffix}"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", VALID_EXAMPLES)
def test_golden_plan_fits_one_page(name):
    lines = (GOLDEN / f"{name}.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 60


def test_every_example_has_a_golden_plan_or_is_invalid():
    examples = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
    assert examples == sorted([*VALID_EXAMPLES, "mistakes"])
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(
        f"{n}.{s}" for n in VALID_EXAMPLES for s in ("md", "json")
    )


# ---- docs/planner.md stays true -----------------------------------------------------------------


def test_docs_policy_examples_load_and_the_memory_headroom_claim_holds(tmp_path, policies):
    """docs/planner.md: its policy sets load, and with the first one (`memory_headroom: 0.10`,
    71.2 GiB usable of 79.1) the frontier MoE's own P = 16 layout (75.2 GiB) is likely-oom, as
    it is against the shipped 75.1 GiB; the plan is P = 32, M = 240 with both (P = 16 is over
    the 90% margin of either). Its `memory_uncertainty` bands layer too: they move the low and
    high bounds, not the plan's central estimate; the communicators keep the shipped band."""
    text = (REPO / "docs" / "planner.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    paths = []
    for i, block in enumerate(blocks):
        path = tmp_path / f"doc{i}.yaml"
        path.write_text(block, encoding="utf-8")
        paths.append(str(path))
        load_policies([str(path)])  # raises PolicyError on any problem
    assert "memory_headroom: 0.10" in blocks[0] and "memory_uncertainty:" in blocks[0]
    manifest = EXAMPLES / "frontier-moe.yaml"
    shipped = plan_of(manifest, policies)
    assert (shipped.schedule, shipped.pipeline, shipped.microbatches) == ("dualpipe", 32, 240)
    assert shipped.outcome.facts["proposal.memory_verdict"] == "likely-oom"
    assert shipped.outcome.facts["proposal.stage_memory_gb"] == pytest.approx(75.17, abs=0.01)
    layered = load_policies([paths[0]])
    plan = plan_of(manifest, layered)
    assert (plan.schedule, plan.pipeline, plan.microbatches) == ("dualpipe", 32, 240)
    assert plan.memory_limit_gb == pytest.approx(79.1 * 0.90)
    assert plan.outcome.facts["proposal.memory_verdict"] == "likely-oom"
    w = plan.memory.worst
    states, overhead = w.weights + w.gradients + w.optimizer + w.replica, 1.5 * GIB
    comms = w.communicators
    transient = w.activations + w.other - overhead - comms  # with the logits (ZeRO-1: no gather)
    assert w.low == pytest.approx(states * 0.98 + transient * 0.85 + overhead / 2 + comms * 0.3)
    assert w.high == pytest.approx(states * 1.03 + transient * 1.25 + 2 * overhead + comms * 3.5)


def test_docs_list_every_template_variable(policies):
    from dpguard.planner.render import plan_context

    text = (REPO / "docs" / "planner.md").read_text(encoding="utf-8")
    table = text[text.index("The only variable is `plan`") : text.index("## The JSON form")]
    context = plan_context(plan_of(EXAMPLES / "frontier-moe.yaml", policies), policies)
    missing = [key for key in context if f"`{key}`" not in table and f"`{key}." not in table]
    assert missing == []


EVEN = {
    "apiVersion": "dpguard/v1",
    "kind": "TrainingManifest",
    "metadata": {"name": "even"},
    "cluster": {
        "gpus": 88,
        "gpus_per_node": 8,
        "accelerator": "A100-80GB",
        "interconnect": {"inter_node_gbps_per_gpu": 200},
    },
    "model": {
        "architecture": "dense",
        "total_params": 33 * 12 * 6144**2 + 2 * 32000 * 6144,
        "layers": 33,
        "hidden_size": 6144,
        "attention_heads": 48,
        "seq_len": 4096,
        "vocab_size": 32000,
    },
    "training": {
        "tokens": "1T",
        "global_batch_size": 1056,
        "micro_batch_size": 1,
        "activation_recompute": "selective",
    },
    "parallelism": {"tensor": 1},
}


def test_even_stages_prefers_a_deeper_even_split_and_is_policy_data(tmp_path, policies):
    """15B-class, 33 layers on 88 A100 (P divides 88: 2, 4, 8, 11, ...). P = 2 does not fit;
    P = 4 and 8 fit but split 33 layers (34 or 35 with the embedding and loss) unevenly;
    P = 11 holds 3 layers per stage. Shipped `even_stages: true` plans P = 11; a team set
    with `even_stages: false` takes the smallest depth that fits, P = 4, and keeps ADV002."""
    path = write(tmp_path, EVEN)
    even = plan_of(path, policies)
    assert (even.pipeline, even.strategy.account_for_embedding) == (11, False)
    assert "ADV002" not in {f.code for f in even.plan_warnings}
    team = tmp_path / "team.yaml"
    block = dict(policies.settings["planner"], even_stages=False)
    team.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "dpguard/v1",
                "kind": "PolicySet",
                "metadata": {"name": "uneven-ok", "version": "1.0.0"},
                "settings": {"planner": block},
                "rules": [],
            }
        ),
        encoding="utf-8",
    )
    smallest = plan_of(path, load_policies([str(team)]))
    assert smallest.pipeline == 4
    assert "ADV002" in {f.code for f in smallest.plan_warnings}


def _layered(tmp_path: Path, policies: Policies, **planner: Any) -> Policies:
    team = tmp_path / "planner-team.yaml"
    team.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "dpguard/v1",
                "kind": "PolicySet",
                "metadata": {"name": "planner-team", "version": "1.0.0"},
                "settings": {"planner": dict(policies.settings["planner"], **planner)},
                "rules": [],
            }
        ),
        encoding="utf-8",
    )
    return load_policies([str(team)])


def test_the_memory_margin_is_policy_data(tmp_path, policies):
    """small-dense at 4,096 tokens a sequence: 1F1B at TP 1, P = 2 (69.4 GiB) is over the
    shipped 90% margin of 75.2 GiB, so the plan runs without a pipeline at TP 2 (55.4 GiB);
    with `memory_margin: 1.0` it is that 1F1B layout, which the step-time model expects
    faster."""
    path = write(tmp_path, merged(example("small-dense"), {"model": {"seq_len": 4096}}))
    shipped = plan_of(path, policies)
    assert (shipped.schedule, shipped.tensor, shipped.pipeline) == ("none", 2, 1)
    assert shipped.memory.worst.total <= 0.9 * shipped.memory_limit_gb * GIB
    full = plan_of(path, _layered(tmp_path, policies, memory_margin=1.0))
    assert (full.schedule, full.tensor, full.pipeline, full.microbatches) == ("1f1b", 1, 2, 32)
    assert full.memory.worst.total / GIB == pytest.approx(69.35, abs=0.01)


def test_the_near_tie_rule_is_policy_data(tmp_path, policies):
    """NeMo 24.07's GPT-3 175B on 128 H100, planned without its layout: the step-time model
    prices NeMo's TP 4 x PP 8 within 5 % of TP 8 x PP 4, so the rule decides. The shipped
    `near_tie: shallower_pipeline` plans TP 8 x PP 4; a team that writes `smaller_tensor` gets
    NeMo's TP 4 x PP 8."""
    doc = yaml.safe_load((PERF / "nemo-gpt3-175b-128xh100.yaml").read_text(encoding="utf-8"))
    del doc["parallelism"], doc["training"]["micro_batch_size"]
    path = write(tmp_path, doc)
    shipped = plan_of(path, policies)
    assert (shipped.tensor, shipped.pipeline) == (8, 4)
    team = plan_of(path, _layered(tmp_path, policies, near_tie="smaller_tensor"))
    assert (team.tensor, team.pipeline) == (4, 8)


@pytest.mark.parametrize(
    ("accelerator", "per_node", "largest"), [("H100-SXM", 8, 8), ("GB200", 4, 16)]
)
def test_tensor_parallelism_stays_inside_the_scale_up_domain(
    tmp_path, policies, accelerator, per_node, largest
):
    """With 16 among the tensor candidates, a 405B dense model that needs the most tensor
    parallelism it can get: an 8-GPU H100 node caps T at 8 (HR013's limit), a GB200 NVL72
    rack (72 GPUs on NVLink) admits 16."""
    doc = merged(
        example("large-dense"),
        {
            "cluster": {"accelerator": accelerator, "gpus_per_node": per_node, "gpus": 4096},
            "parallelism": None,
            "training": {"micro_batch_size": 4, "global_batch_size": 4096},
            "model": {"kv_heads": 16},
        },
    )
    team = _layered(tmp_path, policies, tensor_candidates=[16, 8, 4, 2, 1])
    plan = plan_of(write(tmp_path, doc), team)
    assert plan.status == "planned"
    assert plan.tensor == largest


LONG = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: long}
cluster: {gpus: 512, accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}
model:
  architecture: dense
  total_params: 70B
  layers: 80
  hidden_size: 8192
  attention_heads: 64
  kv_heads: 8
  ffn_hidden_size: 28672
  ffn_activation: swiglu
  seq_len: 131072
  vocab_size: 128256
training: {tokens: 100B, global_batch_size: 64, micro_batch_size: 1, framework: megatron}
"""


def test_long_sequences_get_context_parallelism_and_short_ones_do_not(tmp_path, policies):
    """A 70B model at 128K tokens: the search tries the policy's context sizes (one sequence's
    activations do not fit without), and the page names the one it picks; at 8K it keeps
    CP = 1 (policies/planner.yaml context_from_seq_len 32768)."""
    path = tmp_path / "long.yaml"
    path.write_text(LONG, encoding="utf-8")
    plan = plan_of(path, policies)
    assert plan.status == "planned" and plan.context > 1
    assert plan.performance is not None and plan.performance.layout.context == plan.context
    assert f"context {plan.context}," in render_markdown(plan, policies)
    path.write_text(LONG.replace("seq_len: 131072", "seq_len: 8192"), encoding="utf-8")
    assert plan_of(path, policies).context == 1


MPT_70B = {
    "apiVersion": "dpguard/v1",
    "kind": "TrainingManifest",
    "metadata": {"name": "mpt-70b"},
    "cluster": {
        "gpus": 64,
        "gpus_per_node": 8,
        "accelerator": "H100-SXM",
        "interconnect": {"inter_node_gbps_per_gpu": 400},
    },
    "model": {
        "architecture": "dense",
        "total_params": "70B",
        "layers": 80,
        "hidden_size": 8192,
        "attention_heads": 64,
        "seq_len": 2048,
        "vocab_size": 50432,
    },
    "training": {
        "tokens": "1T",
        "global_batch_size": 2048,
        "precision": "bf16",
        "zero_stage": 3,
        "activation_recompute": "full",
        "framework": "torchtitan",
    },
}


def test_under_zero3_a_layout_without_a_pipeline_competes_on_step_time(tmp_path, policies):
    """A 70B model (about 1.3 TB of training state) fits no H100, so it needs either a pipeline
    or ZeRO-3's sharding over the data-parallel ranks. As MosaicML trained MPT-70B, FSDP over
    64 GPUs without a pipeline: the step-time model finds it faster than every pipelined
    layout, the plan has no pipeline and says why, with both step times."""
    plan = plan_of(write(tmp_path, MPT_70B), policies)
    assert (plan.status, plan.schedule, plan.pipeline) == ("no-pipeline", "none", 1)
    assert not plan.outcome.facts["derived.model_fits_one_gpu"]
    sharded = [n for n in plan.notes if n.startswith("ZeRO-3 shards the model states")]
    assert len(sharded) == 1 and re.search(r"\d s against .* s for the fastest", sharded[0])
    page = render_markdown(plan, policies)
    assert "ZeRO-3 shards the training state over the data-parallel ranks" in page
    assert "fits one H100" not in page
    from dpguard.reporters.model import plan_summary

    assert plan_summary(plan).startswith("no pipeline (ZeRO-3 shards the model states)")
    # the plan's own patch reviews clean: no pipeline, no HR004 (the model fits no GPU alone)
    patch_doc = merged(MPT_70B, {"parallelism": {"tensor": plan.tensor, "pipeline": 1}})
    again = check_file(str(write(tmp_path, patch_doc, "again.yaml")), None, policies)
    assert not [f for f in again.findings if f.severity.name == "ERROR"]


def test_layouts_without_a_pipeline_are_policy_data(tmp_path, policies):
    """The same run at ZeRO-1 cannot shard its states over the data-parallel ranks: without a
    pipeline it needs tensor parallelism (TP 8 fits, at 2,048 tokens a sequence, and the
    model finds it faster than any pipeline). Under a policy whose `unpipelined_max_params` is
    below the model, both are planned with a pipeline."""
    zero1 = write(tmp_path, merged(MPT_70B, {"training": {"zero_stage": 1}}), "zero1.yaml")
    plan = plan_of(zero1, policies)
    assert (plan.status, plan.unpipelined, plan.tensor) == ("no-pipeline", "parallel", 8)
    assert plan_of(write(tmp_path, MPT_70B), policies).unpipelined == "sharded"
    capped = _layered(tmp_path, policies, unpipelined_max_params=50e9)
    assert plan_of(zero1, capped).status == "planned"
    plan = plan_of(write(tmp_path, MPT_70B), capped)
    assert plan.status == "planned" and plan.pipeline > 1
    assert not [n for n in plan.notes if n.startswith("ZeRO-3 shards")]


def test_the_rollback_target_is_a_schedule_the_framework_runs(tmp_path, policies):
    """The policy's chain dualpipe -> dualpipev -> zb1p -> 1f1b is followed down to the first
    schedule the stated framework runs: torchtitan runs DualPipeV but not ZB-H1, so a
    DualPipeV plan rolls back to 1F1B there; with no framework named, to ZB-H1."""
    from dpguard.planner.plan import _simpler

    settings = policies.settings
    named = write(tmp_path, merged(MPT_70B, {"training": {"framework": "torchtitan"}}))
    manifest = check_file(str(named), None, policies).manifest
    assert _simpler(manifest, "dualpipev", settings, None) == "1f1b"
    assert _simpler(manifest, "dualpipe", settings, None) == "dualpipev"
    assert _simpler(manifest, "interleaved-1f1b", settings, None) == "1f1b"
    assert _simpler(manifest, "1f1b", settings, None) is None
    anyone = write(tmp_path, merged(MPT_70B, {"training": {"framework": None}}), "any.yaml")
    manifest = check_file(str(anyone), None, policies).manifest
    assert _simpler(manifest, "dualpipev", settings, None) == "zb1p"
    # `plan --emit`'s schedules decide when given
    assert _simpler(manifest, "dualpipev", settings, ("1f1b", "dualpipev")) == "1f1b"


def test_zero3_without_a_pipeline_stays_within_the_calibrated_sharding(tmp_path, policies):
    """The step-time model prices ZeRO-3 within 25 % up to 384-way sharding and is 28-79 %
    optimistic beyond (DeepSpeed's 640-2,240-way runs): on 1,024 GPUs the plan without a
    pipeline shards over 256 ranks (TP 4), never 1,024, unless the policy widens the range."""
    doc = merged(MPT_70B, {"cluster": {"gpus": 1024}, "training": {"global_batch_size": 4096}})
    path = write(tmp_path, doc)
    plan = plan_of(path, policies)
    assert plan.unpipelined == "sharded"
    assert plan.data_parallel <= policies.settings["planner"]["sharded_max_ranks"] == 384
    wide = plan_of(path, _layered(tmp_path, policies, sharded_max_ranks=4096))
    assert (wide.tensor, wide.data_parallel) == (1, 1024)


def test_the_fallback_runs_interleaved_at_its_own_layout(tmp_path, policies):
    """Llama 3 405B on 16,384 H100 with Megatron-LM named, full recompute and no layout: DT002's
    DualPipeV is not a schedule Megatron-LM runs, so the 1F1B fallback chooses the layout (TP 8,
    P 8, M/P 1: half the step idle); `planner.fallback_in_place` runs that same layout
    interleaved, which the step-time model expects a third faster. Without the setting the plan
    is the 1F1B one, at the same tensor size and depth; and the first-layout search of a review
    names the same schedule as the full plan."""
    from dpguard.planner.plan import recommended_schedule

    training = {"tokens": "1T", "activation_recompute": "full"}
    doc = merged(example("large-dense"), {"parallelism": None, "training": training})
    doc["training"].pop("micro_batch_size", None)
    doc["training"]["framework"] = "megatron"
    path = write(tmp_path, doc)
    upgraded = plan_of(path, policies)
    plain = plan_of(path, _layered(tmp_path, policies, fallback_in_place=[]))
    assert plain.schedule == "1f1b" and upgraded.schedule == "interleaved-1f1b"
    assert (upgraded.tensor, upgraded.pipeline) == (plain.tensor, plain.pipeline)
    assert upgraded.strategy.virtual_stages >= 2
    assert upgraded.performance.step_time_s < 0.95 * plain.performance.step_time_s
    assert [n for n in upgraded.notes if "planner.fallback_in_place" in n]
    result = check_file(str(path), None, policies)
    assert result.manifest is not None and result.outcome is not None
    assert recommended_schedule(result.manifest, result.outcome, policies) == "interleaved-1f1b"


def test_the_search_picks_the_micro_batch_size_a_size_by_size_scan_picks(tmp_path, policies):
    """`search._fit` sizes a layout at a few micro-batch sizes (the smallest, the preferred, a
    bisection), relying on memory growing with the micro-batch size. Over every layout the
    search tries for manifests whose batch leaves many sizes, its choice (or its "nothing
    fits") must be what sizing every size in the order of preference gives, at fewer sizings."""
    from dpguard import sizing
    from dpguard.planner import search

    settings = policies.settings
    tried = fitting = 0
    sized_fast = sized_scan = 0
    for name, gbs in (("large-dense", 2048), ("small-dense", 4096), ("frontier-moe", 15360)):
        doc = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8"))
        doc.pop("parallelism", None)
        doc["training"].pop("micro_batch_size", None)
        doc["training"]["global_batch_size"] = gbs
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        manifest = check_file(str(path), None, policies).manifest
        assert manifest is not None
        limit = sizing.usable_bytes(manifest, settings)
        for schedule, tensor, pipe in (
            (s, t, p)
            for s in ("1f1b", "zb1p", "none")
            for t in (1, 2, 4, 8)
            for p in (1, 2, 4, 8, 16)
        ):
            if (schedule == "none") != (pipe == 1) or manifest.cluster.gpus % (tensor * pipe):
                continue
            ep = (
                1
                if not manifest.model.is_moe
                else min(manifest.model.experts, manifest.cluster.gpus // pipe)
            )
            if (manifest.cluster.gpus // pipe) % ep:
                continue
            base = sizing.Strategy(schedule, tensor, pipe, ep, 1, 1, 1)
            attempt = search._Attempt(limit, [], {}, {})
            found = search._fit(manifest, base, settings, [], attempt, competing=pipe == 1)
            sized_fast += sum(1 for v in attempt.sized.values() if v[2] is not None)
            dp = sizing.data_parallel(manifest, base)
            expected = None
            for mbs in search._mbs_choices(manifest, dp, base, settings, pipe == 1):
                s, violation, peak = search._size(manifest, base, mbs, dp, settings)
                if violation:
                    continue
                sized_scan += 1
                if peak is not None and peak.total <= limit:
                    expected = (s, mbs)
                    break
            assert (
                (found.strategy, found.micro_batch_size) == expected if found else expected is None
            )
            tried += 1
            fitting += found is not None
    assert tried >= 40 and 10 <= fitting < tried  # layouts that fit and layouts that do not
    assert sized_fast < sized_scan
