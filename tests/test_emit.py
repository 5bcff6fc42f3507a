"""`dpguard plan --emit`: the plan in each framework's spelling, read back by dpguard's own
reader for that framework with the same degrees, batch and schedule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.frameworks.emit import EMIT_FORMATS, emit, schedules
from dpguard.frameworks.read import read
from dpguard.planner.plan import Plan, make_plan
from dpguard.policy.load import load_policies

ROOT = Path(__file__).parent.parent
PERF = ROOT / "tests" / "data" / "perf" / "manifests"
# Every valid example and every published run of the calibration set (mistakes.yaml is invalid
# on purpose)
CORPUS = [p for p in sorted((ROOT / "examples").glob("*.yaml")) if p.stem != "mistakes"]
CORPUS += sorted((Path(__file__).parent / "data" / "calibration").glob("*.yaml"))
SUFFIX = {"megatron": ".sh", "nemo": ".yaml", "flagscale": ".yaml", "torchtitan": ".toml"}


@pytest.fixture(scope="module")
def policies():
    return load_policies([])


def _plan(path: Path, policies, fmt: str) -> Plan:
    result = check_file(str(path), None, policies)
    assert result.manifest is not None and result.outcome is not None, result.findings
    return make_plan(result.manifest, result.outcome, policies, schedules(fmt))


def _read_back(text: str, fmt: str, tmp_path: Path) -> dict:
    path = tmp_path / f"emitted{SUFFIX[fmt]}"
    path.write_text(text, encoding="utf-8")
    extract = read(str(path), fmt)
    assert not [n for n in extract.notes if n.code != "F002"], extract.notes
    return extract.values


def _expected(plan: Plan) -> dict:
    s = plan.strategy
    assert s is not None
    out = {
        "parallelism.tensor": s.tensor,
        "parallelism.pipeline": s.pipeline,
        "parallelism.context": s.context,
        "training.micro_batch_size": plan.micro_batch_size,
        "training.global_batch_size": plan.manifest.training.global_batch_size,
    }
    if plan.manifest.model.is_moe:
        out["parallelism.expert"] = s.expert
        if s.expert_tensor:  # unset: the framework's default, and the emitted file says none
            out["parallelism.expert_tensor"] = s.expert_tensor
    if s.pipeline > 1:
        out["parallelism.schedule"] = plan.schedule
    if plan.schedule == "interleaved-1f1b":
        out["parallelism.virtual_stages"] = s.virtual_stages
    return out


def _assert_round_trip(plan: Plan, fmt: str, tmp_path: Path) -> None:
    text = emit(plan, fmt)
    values = _read_back(text, fmt, tmp_path)
    expected = _expected(plan)
    if (
        fmt == "torchtitan"
        and "\n[model]\n" not in text
        and expected.get("parallelism.virtual_stages", 2) != 2
    ):
        # torchtitan counts stages per rank from the flavor's layers: a shape no flavor has
        # is read with its default of 2, and the emitted block says to keep your [model]
        assert "keep your [model]" in text
        del expected["parallelism.virtual_stages"]
    assert {k: values.get(k) for k in expected} == expected
    if fmt in ("megatron", "nemo"):  # the formats that carry nodes x devices
        assert values["cluster.gpus"] == plan.manifest.cluster.gpus


@pytest.mark.parametrize("fmt", EMIT_FORMATS)
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_emitted_config_reads_back_with_the_plans_degrees_batch_and_schedule(
    path, fmt, policies, tmp_path
):
    plan = _plan(path, policies, fmt)
    if plan.strategy is None:  # the known-bad runs: nothing to emit but the reasons
        assert all(line.startswith("#") for line in emit(plan, fmt).splitlines())
        return
    assert plan.schedule in (None, "none", *schedules(fmt))
    _assert_round_trip(plan, fmt, tmp_path)


@pytest.mark.parametrize("fmt", EMIT_FORMATS)
@pytest.mark.parametrize("virtual", [2, 3])
def test_interleaved_virtual_stages_round_trip(fmt, virtual, policies, tmp_path):
    """Interleaving is spelled three ways (Megatron's stages per rank, NeMo's virtual size,
    torchtitan's layers per stage); the examples' plans do not interleave, so the plan is
    rewritten to interleave over a shape whose layers split evenly (and no torchtitan flavor
    has: torchtitan's reader then assumes its default of 2 stages per rank)."""
    plan = _plan(ROOT / "examples" / "large-dense.yaml", policies, "megatron")
    assert plan.strategy is not None
    # Llama 3's split: the embedding and the loss count as a layer of the first and last stage
    lead, tail = int(plan.strategy.account_for_embedding), int(plan.strategy.account_for_loss)
    layers = plan.strategy.pipeline * virtual * 2 - lead - tail
    manifest = replace(plan.manifest, model=replace(plan.manifest.model, layers=layers))
    strategy = replace(plan.strategy, schedule="interleaved-1f1b", virtual_stages=virtual)
    interleaved = replace(plan, manifest=manifest, schedule="interleaved-1f1b", strategy=strategy)
    if fmt == "torchtitan":
        # torchtitan counts them the same way: (layers + lead + tail) / stages per stage
        text = emit(interleaved, fmt)
        assert "pipeline_parallel_layers_per_stage = 2" in text
        assert f"pipeline_parallel_first_stage_less_layers = {lead}" in text
        assert f"pipeline_parallel_last_stage_less_layers = {tail}" in text
    _assert_round_trip(interleaved, fmt, tmp_path)


@pytest.mark.parametrize("fmt", EMIT_FORMATS)
def test_the_experts_tensor_size_round_trips(fmt, policies, tmp_path):
    """A plan's expert tensor-parallel size is written in each framework's spelling
    (Megatron-LM's --expert-tensor-parallel-size, NeMo's and FlagScale's key, torchtitan's
    expert_tensor_parallel_degree) and read back; the framework's own default is not written."""
    doc = yaml.safe_load((PERF / "deepseek-v3-2048xh800.yaml").read_text(encoding="utf-8"))
    del doc["parallelism"]
    path = tmp_path / "dsv3.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    plan = _plan(path, policies, fmt)
    assert plan.strategy is not None and plan.tensor > 1
    for etp in (1, plan.tensor):
        chosen = replace(plan, strategy=replace(plan.strategy, expert_tensor=etp))
        _assert_round_trip(chosen, fmt, tmp_path)
        if fmt == "megatron":  # FW015: Megatron-core runs MoE biases only with whole experts
            assert ("--disable-bias-linear" in emit(chosen, fmt)) == (etp > 1)
    default = replace(plan, strategy=replace(plan.strategy, expert_tensor=0))
    assert "expert_tensor_parallel" not in emit(default, fmt).replace("-", "_")


def test_a_schedule_the_framework_does_not_run_is_replanned_and_said(capsys):
    # frontier-moe's plan is DualPipe, which Megatron-LM does not run
    code = main(["plan", "--emit", "megatron", str(ROOT / "examples" / "frontier-moe.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    assert "dpguard recommends dualpipe, which megatron does not run" in out
    assert "--pipeline-model-parallel-size" in out
    assert "dualpipe" not in out.split("DPGUARD_PLAN_ARGS")[1]


def test_flagscale_dualpipev_is_checked_by_flagscale_s_own_launch_rules(capsys, tmp_path):
    """frontier-moe has an MTP module, which FlagScale's DualPipeV refuses at launch (FW008):
    the emitted config is read back, judged, and planned again without DualPipeV. Without MTP
    DualPipeV is kept."""
    assert main(["plan", "--emit", "flagscale", str(ROOT / "examples/frontier-moe.yaml")]) == 0
    out = capsys.readouterr().out
    assert "use_dualpipev" not in out.split("system:")[1]
    assert "# note: flagscale refuses dualpipev for this run (FW008: " in out
    no_mtp = tmp_path / "moe.yaml"
    text = (ROOT / "examples/frontier-moe.yaml").read_text(encoding="utf-8")
    no_mtp.write_text(text.replace("  mtp_layers: 1\n", ""), encoding="utf-8")
    assert main(["plan", "--emit", "flagscale", str(no_mtp)]) == 0
    assert "use_dualpipev: true" in capsys.readouterr().out


def test_torchtitan_names_the_flavor_and_never_another_model(capsys, tmp_path):
    assert main(["plan", "--emit", "torchtitan", str(ROOT / "examples/large-dense.yaml")]) == 0
    out = capsys.readouterr().out
    assert 'name = "llama3"\nflavor = "405B"' in out
    # an MoE whose attention and dense FFN have Llama 3 8B's sizes is not llama3 8B
    moe = tmp_path / "moe.yaml"
    moe.write_text(
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: moe}\n"
        "cluster: {gpus: 64, accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n"
        "model: {architecture: moe, total_params: 47B, active_params: 13B, layers: 32, "
        "hidden_size: 4096, attention_heads: 32, kv_heads: 8, ffn_hidden_size: 14336, "
        "ffn_activation: swiglu, vocab_size: 128256, seq_len: 4096, experts: 8, "
        "experts_per_token: 2}\ntraining: {tokens: 1T, global_batch_size: 512}\n",
        encoding="utf-8",
    )
    main(["plan", "--emit", "torchtitan", str(moe)])
    out = capsys.readouterr().out
    assert "\n[model]\n" not in out and "no torchtitan flavor in dpguard's table" in out


@pytest.mark.parametrize(
    ("fmt", "written"),
    [
        ("nemo", "virtual_pipeline_model_parallel_size: null"),
        ("flagscale", "num_virtual_stages_per_pipeline_rank: null"),
        (
            "megatron",
            "# remove from your command (this plan switches it off): "
            "--num-virtual-stages-per-pipeline-rank --num-layers-per-virtual-pipeline-stage",
        ),
    ],
)
def test_an_interleaved_config_planned_as_1f1b_switches_interleaving_off(
    capsys, tmp_path, fmt, written
):
    """The emitted keys replace the config's own: an interleaved proposal planned as 1F1B
    must say the virtual stages go, or the config would keep running interleaved."""
    path = tmp_path / "il.yaml"
    path.write_text(
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: il}\n"
        "cluster: {gpus: 32, accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n"
        "model: {architecture: dense, total_params: 70B, layers: 80, hidden_size: 8192, "
        "attention_heads: 64, kv_heads: 8, seq_len: 4096, vocab_size: 128256, "
        "ffn_hidden_size: 28672, ffn_activation: swiglu}\n"
        "training: {tokens: 2T, global_batch_size: 64, activation_recompute: full}\n"
        "parallelism: {tensor: 4, pipeline: 8, virtual_stages: 5, schedule: interleaved-1f1b}\n",
        encoding="utf-8",
    )
    assert main(["plan", "--emit", fmt, str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# dpguard plan for il: 1f1b,")
    assert written in out


def test_an_infeasible_plan_emits_only_comments_and_exits_1(capsys):
    impossible = Path(__file__).parent / "data" / "impossible.yaml"
    code = main(["plan", "--emit", "nemo", str(impossible)])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("# dpguard plan for")
    assert all(line.startswith("#") for line in out.splitlines())


def test_emit_is_deterministic(capsys):
    runs = []
    for _ in range(2):
        main(["plan", "--emit", "torchtitan", str(ROOT / "examples/frontier-moe.yaml")])
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1]


@pytest.mark.parametrize("fmt", EMIT_FORMATS)
@pytest.mark.parametrize("path", CORPUS[::3], ids=lambda p: p.stem)
def test_what_emit_prints_passes_the_framework_s_own_launch_checks(path, fmt, policies):
    """`plan --emit` reads its text back and judges it by the framework's launch rules before
    printing: on the examples and a third of the calibration runs, nothing it prints is
    refused (or the printed notes say why it could not avoid it)."""
    from dpguard.planner.emitted import emit_checked, launch_problems

    result = check_file(str(path), None, policies)
    assert result.manifest is not None and result.outcome is not None
    plan = make_plan(result.manifest, result.outcome, policies, schedules(fmt))
    notes: list[str] = []
    plan, text = emit_checked(plan, result.manifest, fmt, policies, notes)
    if plan.strategy is None:
        return
    problems = launch_problems(plan, fmt, text, policies)
    refused = [n for n in notes if n.startswith(f"{fmt} refuses this at launch")]
    assert len(refused) == len(problems), (problems, notes)


def test_every_profile_that_emits_names_a_registered_emitter() -> None:
    """A profile's `emit` format (policies/frameworks) is one `plan --emit` writes, through the
    `emit_config` of that framework's module, and every registered format is some profile's:
    the data and the code cannot drift apart."""
    import importlib

    from dpguard.frameworks import profiles
    from dpguard.frameworks.emit import EMIT_FORMATS

    named = {p.emit for p in profiles.load_profiles().values() if p.emit is not None}
    assert named == set(EMIT_FORMATS)
    for fmt in EMIT_FORMATS:
        assert callable(importlib.import_module(f"dpguard.frameworks.{fmt}").emit_config)
