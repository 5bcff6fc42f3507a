"""The step-time model's physics, one property at a time (the published runs it must reproduce
are tests/test_perf_calibration.py), and the `dpguard perf` command's contract."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dpguard import sizing
from dpguard.check import check_file
from dpguard.cli import main
from dpguard.manifest import Manifest
from dpguard.perf import BREAKDOWN, Layout, MissingHardware, model_flops_per_token, predict
from dpguard.perf.data import load
from dpguard.perf.model import gemm_seconds, hardware

REPO = Path(__file__).parent.parent
LLAMA_70B = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: llama-70b}
cluster:
  gpus: 256
  accelerator: H100-SXM
  interconnect: {inter_node_gbps_per_gpu: 400}
model:
  architecture: dense
  total_params: 70.6B
  layers: 80
  hidden_size: 8192
  attention_heads: 64
  kv_heads: 8
  ffn_hidden_size: 28672
  ffn_activation: swiglu
  seq_len: 8192
  vocab_size: 128256
  untie_embeddings: true
training:
  tokens: 2T
  global_batch_size: 512
  micro_batch_size: 1
  precision: bf16
  framework: megatron
parallelism:
  tensor: 8
  pipeline: 4
  schedule: 1f1b
"""


def manifest(tmp_path: Path, text: str = LLAMA_70B, name: str = "m.yaml") -> Manifest:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = check_file(str(path), None, None, {})
    assert result.manifest is not None, [f.format() for f in result.findings]
    return result.manifest


def layout(m: Manifest, **changes: Any) -> Layout:
    p = m.parallelism
    assert p is not None
    tensor = changes.pop("tensor", p.tensor)
    pipeline = changes.pop("pipeline", p.pipeline)
    context = changes.pop("context", p.context)
    data = m.cluster.gpus // (tensor * pipeline * context)
    mbs = changes.pop("micro_batch_size", m.training.micro_batch_size)
    base = Layout(
        tensor=tensor,
        pipeline=pipeline,
        virtual_stages=1,
        context=context,
        expert=1,
        expert_tensor=1,
        data=data,
        micro_batch_size=mbs,
        microbatches=m.training.global_batch_size // (mbs * data),
        schedule="1f1b" if pipeline > 1 else "none",
    )
    return replace(base, **changes)


def test_the_breakdown_adds_up_to_the_step(tmp_path: Path) -> None:
    p = predict(manifest(tmp_path), layout(manifest(tmp_path)))
    assert set(p.breakdown_s) == set(BREAKDOWN)
    assert sum(p.breakdown_s.values()) == pytest.approx(p.step_time_s)
    assert all(v >= 0 for v in p.breakdown_s.values())
    assert p.low < p.tokens_per_s_per_gpu < p.high
    with pytest.raises(ValueError, match="at least 1"):
        replace(p.layout, microbatches=0)
    assert p.bubble == pytest.approx(p.breakdown_s["bubble"] / p.step_time_s)


def test_throughput_arithmetic(tmp_path: Path) -> None:
    m = manifest(tmp_path)
    p = predict(m, layout(m))
    tokens = m.training.global_batch_size * m.model.seq_len
    assert p.tokens_per_s_per_gpu == pytest.approx(tokens / p.step_time_s / m.cluster.gpus)
    assert p.gpu_hours == pytest.approx(m.training.tokens / p.tokens_per_s_per_gpu / 3600)
    arch = sizing.architecture(m)
    flops = model_flops_per_token(arch) * p.tokens_per_s_per_gpu
    assert p.mfu == pytest.approx(flops / 989e12)
    assert p.model_tflops_per_gpu == pytest.approx(flops / 1e12)


def test_attention_adds_about_40_percent_at_128k(tmp_path: Path) -> None:
    """The issue's case: at 128K context the causal s^2 term adds ~40 % to a 405B model's
    FLOPs per token (6N = 2.43e12, 6 L h s = 1.62e12 for Llama 3 405B)."""
    text = (REPO / "examples" / "large-dense.yaml").read_text(encoding="utf-8")
    short = sizing.architecture(manifest(tmp_path, text))
    long = replace(short, seq_len=131072)
    ratio = model_flops_per_token(long) / model_flops_per_token(short)
    assert 1.5 < ratio < 1.8  # 8K already carries ~5 %
    assert model_flops_per_token(long) / (6 * short.active) == pytest.approx(1.67, abs=0.05)


def test_narrow_shards_and_small_batches_are_less_efficient(tmp_path: Path) -> None:
    hw = hardware(manifest(tmp_path).cluster, "bf16", load())

    def rate(m: int, n: int, k: int) -> float:
        return 2 * m * n * k / gemm_seconds(m, n, k, hw, 2.0)

    big = rate(8192, 28672, 8192)
    assert rate(8192, 28672 // 8, 8192) < big  # a TP-8 shard of the MLP
    assert rate(512, 28672, 8192) < rate(8192, 28672, 8192)  # a small micro-batch
    assert rate(8192, 256, 7168) < 0.6 * big  # DeepSeek's expert-TP 8 shard (issue)
    assert big < hw.gemm_flops


def test_tensor_parallel_beyond_the_node_costs_more(tmp_path: Path) -> None:
    m = manifest(tmp_path)
    inside = predict(m, layout(m, tensor=8, pipeline=4))
    across = predict(m, layout(m, tensor=16, pipeline=2))
    assert across.breakdown_s["tp"] > 5 * inside.breakdown_s["tp"]


def test_pcie_nodes_pay_tensor_parallelism_at_pcie_speed(tmp_path: Path) -> None:
    m = manifest(tmp_path)
    link = replace(m.cluster.interconnect, intra_node="pcie")
    pcie = replace(m, cluster=replace(m.cluster, interconnect=link))
    assert (
        predict(pcie, layout(pcie)).breakdown_s["tp"] > 3 * predict(m, layout(m)).breakdown_s["tp"]
    )


def test_a_deeper_pipeline_at_fixed_batch_has_a_bigger_bubble(tmp_path: Path) -> None:
    m = manifest(tmp_path)
    shallow = predict(m, layout(m, pipeline=2))
    deep = predict(m, layout(m, pipeline=16))
    assert deep.bubble > shallow.bubble
    inter = predict(m, layout(m, pipeline=16, schedule="interleaved-1f1b", virtual_stages=5))
    assert inter.bubble < deep.bubble


def test_overlap_hides_data_parallel_communication(tmp_path: Path) -> None:
    m = manifest(tmp_path)
    plain = predict(m, layout(m))
    on = replace(m, runtime=replace(m.runtime, overlap={"dp_grad_reduce": True}))
    hidden = predict(on, layout(on))
    assert hidden.breakdown_s["dp"] < plain.breakdown_s["dp"]
    assert hidden.step_time_s < plain.step_time_s


def test_megatron_overlaps_pipeline_sends_only_when_interleaving(tmp_path: Path) -> None:
    """Megatron-LM's schedule without interleaving sends and receives synchronously (it raises
    on overlap_p2p_comm): its sends cost in full; the interleaved schedule's overlap them
    (the profile's `overlap.pp.schedules`), and so does DualPipe by design. A manifest that
    writes `runtime.overlap.pp` has the last word under every schedule."""
    m = manifest(tmp_path)
    assert m.runtime.overlapped("1f1b")["pp"] is False
    assert m.runtime.overlapped("interleaved-1f1b")["pp"] is True
    sync = predict(m, layout(m, pipeline=16)).breakdown_s["pp"]  # one chunk per rank
    inter = predict(m, layout(m, pipeline=16, schedule="interleaved-1f1b", virtual_stages=2))
    res = float(load()["communication"]["overlapped_residual"])
    # twice the chunks, each send at the overlapped residual
    assert inter.breakdown_s["pp"] == pytest.approx(2 * res * sync, rel=0.01)
    written = manifest(tmp_path, LLAMA_70B + "runtime:\n  overlap: {pp: true}\n", "w.yaml")
    assert written.runtime.overlapped("1f1b")["pp"] is True
    hidden = predict(written, layout(written, pipeline=16))
    assert hidden.breakdown_s["pp"] == pytest.approx(res * sync, rel=0.01)


def test_fp8_is_faster_than_bf16_on_hopper_but_not_twice(tmp_path: Path) -> None:
    m = manifest(tmp_path)
    fp8 = replace(m, training=replace(m.training, precision="fp8"))
    slow, fast = predict(m, layout(m)), predict(fp8, layout(fp8))
    assert 1.1 < slow.step_time_s / fast.step_time_s < 2.0
    assert fast.mfu < slow.mfu  # against the FP8 peak


def test_full_recompute_costs_about_a_third(tmp_path: Path) -> None:
    m = manifest(tmp_path)
    full = replace(m, training=replace(m.training, activation_recompute="full"))
    base, redo = predict(m, layout(m)), predict(full, layout(full))
    assert redo.breakdown_s["recompute"] > 0 == base.breakdown_s["recompute"]
    assert 1.15 < redo.step_time_s / base.step_time_s < 1.45  # Korthikanti Table 5: ~1.3x


def test_recompute_overheads_of_korthikantis_22b_layer() -> None:
    """Korthikanti et al. 2022 Table 4 measured one 22B layer (TP 8, micro-batch 4, no fused
    attention) under each recompute setting: full +39 %, selective +7 %, selective with SP +4 %
    over no recompute (shared docs/domain.md). Selective recompute repeats only the attention
    core, so its overhead is what the unfused core costs: priced as its FLOPs alone it read
    about 1 %, with its score matrix's HBM traffic about 6 %."""
    path = REPO / "tests" / "data" / "perf" / "manifests" / "korthikanti-22b-selective.yaml"
    m = check_file(str(path), None, None, {}).manifest
    assert m is not None

    def step(recompute: str, sp: bool) -> float:
        t = replace(m.training, activation_recompute=recompute, sequence_parallel=sp)
        run = replace(m, training=t)
        return predict(run, layout(run)).step_time_s

    for sp, low, high in ((False, 0.04, 0.11), (True, 0.025, 0.08)):
        assert low < step("selective", sp) / step("none", sp) - 1 < high
    assert 0.30 < step("full", False) / step("none", False) - 1 < 0.45


def test_zero3_gathers_cost_more_with_more_ranks(tmp_path: Path) -> None:
    text = LLAMA_70B.replace("  framework: megatron\n", "  zero_stage: 3\n  framework: deepspeed\n")
    text = text.replace("  tensor: 8\n  pipeline: 4\n  schedule: 1f1b\n", "  tensor: 1\n")
    m = manifest(tmp_path, text)
    small = predict(m, layout(m, micro_batch_size=2))
    bigger = replace(
        m,
        cluster=replace(m.cluster, gpus=1024),
        training=replace(m.training, global_batch_size=2048),
    )
    large = predict(bigger, layout(bigger, micro_batch_size=2))
    assert large.breakdown_s["dp"] / large.step_time_s > small.breakdown_s["dp"] / small.step_time_s


def test_a_run_s_own_count_of_sharded_collectives_replaces_the_profile_s(tmp_path: Path) -> None:
    """runtime.sharded_gathers_per_layer: DeepSpeed's 2021 ZeRO-3 gathered and reduced every
    parameter tensor on its own (12 per GPT block against the profile's 6 submodule fetches):
    twice the ring start-ups, the same bytes."""
    text = LLAMA_70B.replace("  framework: megatron\n", "  zero_stage: 3\n  framework: deepspeed\n")
    text = text.replace("  tensor: 8\n  pipeline: 4\n  schedule: 1f1b\n", "  tensor: 1\n")
    profile = manifest(tmp_path, text)
    written = manifest(tmp_path, text + "runtime:\n  sharded_gathers_per_layer: 12\n")
    counts = (profile.runtime, written.runtime)
    assert [r.sharded_gathers_per_layer for r in counts] == [6, 12]
    assert profile.content != written.content
    slow = predict(written, layout(written)).breakdown_s["dp"]
    assert slow > predict(profile, layout(profile)).breakdown_s["dp"] > 0


def test_master_weight_remainders_move_fewer_optimizer_bytes(tmp_path: Path) -> None:
    """NeMo 1's bf16 master-weight remainders (runtime.master_weights) read and write 2 + 2 B
    of master weight per parameter instead of 4 + 4: the step moves 30 B, not 34."""
    text = LLAMA_70B.replace("  framework: megatron\n", "  framework: nemo\n")
    nemo = manifest(tmp_path, text)
    fp32 = manifest(tmp_path, text + "runtime:\n  master_weights: fp32\n")
    ratio = (
        predict(nemo, layout(nemo)).breakdown_s["optimizer"]
        / predict(fp32, layout(fp32)).breakdown_s["optimizer"]
    )
    assert ratio == pytest.approx(30 / 34, rel=1e-2)


def test_expert_all_to_all_over_the_network_is_exposed_unless_overlapped(tmp_path: Path) -> None:
    text = (REPO / "examples" / "frontier-moe.yaml").read_text(encoding="utf-8")
    m = manifest(tmp_path, text)
    s = sizing.proposal(m, "1f1b")
    assert s is not None
    from dpguard.perf import layout_of

    one_f_one_b = predict(m, layout_of(m, s, 1))
    dual = predict(m, layout_of(m, replace(s, schedule="dualpipe"), 1))
    assert one_f_one_b.breakdown_s["ep"] > dual.breakdown_s["ep"] > 0
    nccl = replace(m, communication=replace(m.communication, all_to_all_kernel="nccl"))
    assert predict(nccl, layout_of(nccl, s, 1)).breakdown_s["ep"] > one_f_one_b.breakdown_s["ep"]


def test_a_custom_accelerator_without_bandwidths_is_named(tmp_path: Path) -> None:
    text = LLAMA_70B.replace(
        "  accelerator: H100-SXM\n",
        "  accelerator: custom\n  memory_gb: 96\n  peak_tflops_bf16: 800\n",
    )
    m = manifest(tmp_path, text)
    with pytest.raises(MissingHardware, match=r"cluster\.hbm_tbps and cluster\.scale_up_gbytes"):
        predict(m, layout(m))
    ok = text.replace(
        "  memory_gb: 96\n", "  memory_gb: 96\n  hbm_tbps: 4\n  scale_up_gbytes_per_s: 400\n"
    )
    m = manifest(tmp_path, ok, "ok.yaml")
    p = predict(m, layout(m))
    assert p.notes and "no calibrated GEMM efficiency" in p.notes[0]


def test_an_accelerator_without_hbm_figure_gets_one_from_its_peak(tmp_path: Path) -> None:
    m = manifest(tmp_path, LLAMA_70B.replace("H100-SXM", "A100-40GB"))
    p = predict(m, layout(m))
    assert any("no HBM bandwidth" in n for n in p.notes)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["perf", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_perf_json_keys_are_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(LLAMA_70B, encoding="utf-8")
    code, out, _ = run_cli(capsys, str(path), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {
        "layout", "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu",
        "bubble", "gpu_hours", "low", "high", "breakdown_s", "notes",
    }  # fmt: skip
    assert set(data["layout"]) == {
        "tensor", "pipeline", "virtual_stages", "context", "expert", "expert_tensor", "data",
        "micro_batch_size", "microbatches", "schedule",
    }  # fmt: skip
    assert set(data["breakdown_s"]) == set(BREAKDOWN)
    assert data["layout"]["tensor"] == 8 and data["layout"]["data"] == 8
    assert data["low"] < data["tokens_per_s_per_gpu"] < data["high"]
    again = run_cli(capsys, str(path), "--format", "json")[1]
    assert again == out  # byte-identical


def test_perf_text_and_the_plan_without_a_proposal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, str(REPO / "examples" / "no-pipeline.yaml"))
    assert code == 0
    assert "as planned by dpguard" in out and "tokens/s per GPU" in out and "bubble" in out


def test_perf_of_an_invalid_manifest_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(LLAMA_70B.replace("gpus: 256", "gpus: -1"), encoding="utf-8")
    code, _, err = run_cli(capsys, str(path))
    assert code == 1 and "nothing to time" in err


def test_perf_names_what_a_custom_accelerator_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "custom.yaml"
    path.write_text(
        LLAMA_70B.replace(
            "  accelerator: H100-SXM\n",
            "  accelerator: custom\n  memory_gb: 96\n  peak_tflops_bf16: 800\n",
        ),
        encoding="utf-8",
    )
    code, _, err = run_cli(capsys, str(path))
    assert code == 1
    assert f"{path}:6:3: error: the step-time model needs cluster.hbm_tbps" in err
