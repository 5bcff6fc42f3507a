"""Framework profiles (policies/frameworks/*.yaml): the data, its loader's errors, and what the
profiles do to a manifest's runtime, its memory band and its meaning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from dpguard import sizing
from dpguard.catalog import load_catalog
from dpguard.check import check_file
from dpguard.errors import ConfigError
from dpguard.frameworks import profiles
from dpguard.frameworks.read import FORMATS
from dpguard.manifest import DEPRECATED, build_manifest
from dpguard.policy.load import load_policies
from dpguard.schedules import SCHEDULES
from dpguard.validate import validate
from dpguard.yamlsource import load_text

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = ROOT / "tests" / "data" / "calibration"


@pytest.fixture(scope="module")
def policies() -> Any:
    return load_policies([])


def test_every_reader_format_has_a_profile_and_one_is_the_default() -> None:
    loaded = profiles.load_profiles()
    assert set(FORMATS) == set(loaded)
    assert [p.name for p in loaded.values() if p.default] == ["megatron"]
    assert profiles.profile(None).name == "megatron"


def test_the_profile_schema_is_a_json_schema_and_every_file_passes_it() -> None:
    schema = json.loads((ROOT / "schemas" / "profile.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    for path in sorted((ROOT / "policies" / "frameworks").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert list(Draft202012Validator(schema).iter_errors(data)) == [], path.name


@pytest.mark.parametrize("name", sorted(profiles.names()))
def test_each_profile_cites_a_source_for_every_trait_and_runs_known_schedules(name: str) -> None:
    profile = profiles.profile(name)
    assert set(profile.traits) <= set(profiles.TRAITS)
    assert set(profile.trait_sources) == set(profile.traits)
    assert all(source.strip() for source in profile.trait_sources.values())
    assert profile.schedules and set(profile.schedules) <= set(SCHEDULES)
    assert "1f1b" in profile.schedules  # the planner's last resort runs everywhere
    assert set(profile.runtime()) == set(profiles.TRAITS)


def test_variants_inherit_what_they_do_not_replace() -> None:
    megatron, nemo, flagscale = (profiles.profile(n) for n in ("megatron", "nemo", "flagscale"))
    assert nemo.traits == {**megatron.traits, "master_weights": "bf16_remainder"}
    assert nemo.schedules == megatron.schedules
    assert nemo.emit == "nemo" and "FW005" in nemo.validations
    assert flagscale.schedules == ("1f1b", "interleaved-1f1b", "dualpipev")
    # overlap entries are replaced one by one: FlagScale's EP switch, Megatron's DP switches
    assert flagscale.overlap["dp_grad_reduce"] == megatron.overlap["dp_grad_reduce"]
    assert not flagscale.overlap["ep"]


def test_a_trait_the_framework_lacks_takes_its_neutral_value_and_no_override() -> None:
    titan = profiles.profile("torchtitan")
    assert "fp8_weight_cache" not in titan.traits
    assert titan.runtime({"fp8_weight_cache": True})["fp8_weight_cache"] is False
    assert titan.runtime({"cross_entropy": "fused"})["cross_entropy"] == "fused"
    assert titan.runtime()["cross_entropy"] == "unfused"


def _raw(name: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {
        "apiVersion": "dpguard/v1",
        "kind": "FrameworkProfile",
        "metadata": {"name": name, "title": name, "source": "test"},
        **extra,
    }
    return f"policies/frameworks/{name}.yaml", data


def test_a_broken_profile_is_dpguards_own_error_at_its_position() -> None:
    text = (
        "apiVersion: dpguard/v1\nkind: FrameworkProfile\nmetadata: {name: x, title: x, "
        "source: s}\nschedules: [{schedule: 1f1b, source: s}]\ntraits:\n"
        "  flash_atention: {value: true, source: s}\n"
    )
    with pytest.raises(ConfigError) as caught:
        profiles._validated(text, "policies/frameworks/x.yaml")
    assert str(caught.value).startswith("policies/frameworks/x.yaml:6:3: unknown key")
    assert "did you mean 'flash_attention'?" in str(caught.value)
    with pytest.raises(ConfigError, match="invalid YAML"):
        profiles._validated("a: [", "policies/frameworks/x.yaml")


def test_extends_must_name_a_profile_and_never_loop() -> None:
    loop = {"a": _raw("a", extends="b"), "b": _raw("b", extends="a")}
    with pytest.raises(ConfigError, match="extends forms a cycle: a -> b -> a"):
        profiles._build("a", loop)
    with pytest.raises(ConfigError, match="extends unknown profile 'nothing'"):
        profiles._build("c", {"c": _raw("c", extends="nothing")})
    with pytest.raises(ConfigError, match="must list its schedules"):
        profiles._build("d", {"d": _raw("d")})


MANIFEST = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: llama-70b}
cluster: {gpus: 256, accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}
model: {architecture: dense, total_params: 70B, layers: 80, hidden_size: 8192,
  attention_heads: 64, kv_heads: 8, seq_len: 8192, vocab_size: 128256,
  ffn_hidden_size: 28672, ffn_activation: swiglu}
training: {tokens: 2T, global_batch_size: 512, activation_recompute: selective}
parallelism: {tensor: 8, pipeline: 4, schedule: 1f1b}
"""


def _manifest(text: str) -> Any:
    doc = load_text(text, "m.yaml")
    assert [f for f in validate(doc, load_catalog()) if f.severity.value == "error"] == []
    return build_manifest(doc, load_catalog())


def _worst(text: str, policies: Any) -> Any:
    m = _manifest(text)
    strategy = sizing.proposal(m, m.parallelism.schedule)
    estimate = sizing.stage_memory(m, strategy, policies.settings, span=True)
    return estimate.worst


def test_the_band_of_a_framework_less_manifest_contains_every_framework_s_estimate(
    policies: Any,
) -> None:
    unnamed = _worst(MANIFEST, policies)
    named = {
        name: _worst(MANIFEST.replace("training: {", f"training: {{framework: {name}, "), policies)
        for name in profiles.names()
    }
    for name, worst in named.items():
        assert unnamed.low <= worst.low and worst.high <= unnamed.high, name
        assert unnamed.low <= worst.total <= unnamed.high, name
    # the centre is the default profile's; naming another framework moves it
    assert unnamed.total == named["megatron"].total
    assert named["torchtitan"].total > named["megatron"].total  # DTensor TP, torch pipelining
    # a framework narrows the band to its own
    assert named["megatron"].high - named["megatron"].low < unnamed.high - unnamed.low


def test_the_band_spans_only_frameworks_that_run_the_schedule(policies: Any) -> None:
    # DeepSpeed runs 1F1B only: an interleaved proposal is not priced with its runtime
    interleaved = MANIFEST.replace(
        "schedule: 1f1b", "virtual_stages: 2, schedule: interleaved-1f1b"
    )
    m = _manifest(interleaved)
    names = {name for name, _ in sizing.alternative_runtimes(m, "interleaved-1f1b")}
    assert not any("deepspeed" in n for n in names)
    assert any("torchtitan" in n for n in names)
    assert sizing.alternative_runtimes(m, "dualpipe") == ()


def test_a_framework_less_estimate_says_what_naming_the_framework_would_change(
    policies: Any,
) -> None:
    m = _manifest(MANIFEST)
    estimate = sizing.stage_memory(m, sizing.proposal(m, "1f1b"), policies.settings, span=True)
    line = estimate.assumptions[-1]
    assert line.startswith("no framework named: the central estimate assumes the megatron")
    assert "torchtitan" in line and line.endswith("training.framework narrows it")
    named = _manifest(MANIFEST.replace("training: {", "training: {framework: torchtitan, "))
    estimate = sizing.stage_memory(named, sizing.proposal(named, "1f1b"), policies.settings)
    assert estimate.assumptions[-1] == (
        "runtime traits of the torchtitan profile (policies/frameworks/torchtitan.yaml)"
    )


def test_a_verdict_does_not_rest_on_a_default_the_team_can_switch(
    policies: Any, tmp_path: Path
) -> None:
    """NeMo's Llama 3 8B FP8 run on 8 H100 (TP 1, CP 2; NeMo 24.07's performance table) trained,
    but at Megatron-core's defaults (bf16 weights beside TE's FP8 cast and transpose, fp32 main
    grads) even its low bound is over 75 GiB. --fp8-param-gather, --disable-parameter-transpose-
    cache and --grad-reduce-in-bf16 are the framework's own flags (policies/frameworks/
    megatron.yaml `switch`), so the low end of the band assumes them: likely-oom, not a certain
    one. A manifest that states those defaults gets the certain verdict back. (The corpus
    file states the bf16 gradient buffer the run's launcher config sets; this test drops it.)"""
    path = tmp_path / "nemo-llama3-8b-8xh100.yaml"
    published = ROOT / "tests" / "data" / "perf" / "manifests" / path.name
    text = published.read_text(encoding="utf-8").replace("  main_grad_dtype: bf16\n", "")
    path.write_text(text, encoding="utf-8")

    def verdict(text: str) -> tuple[str, str]:
        m = _manifest(text)
        strategy = sizing.proposal(m, "none")
        estimate = sizing.stage_memory(m, strategy, policies.settings, span=True)
        return sizing.verdict(m, estimate, policies.settings), estimate.assumptions[-1]

    unstated, line = verdict(text)
    assert unstated == "likely-oom"
    assert "--fp8-param-gather" in line and "--grad-reduce-in-bf16" in line
    # ADV004 prices them first among the changes that would make it fit
    adv004 = [f for f in check_file(str(path), None, policies).findings if f.code == "ADV004"]
    assert "after one change: --fp8-param-gather, --grad-reduce-in-bf16, " in adv004[0].message
    # a bf16 run has no FP8 weight to gather: only the gradient flag is named
    bf16 = text.replace("precision: fp8", "precision: bf16")
    assert "with --grad-reduce-in-bf16 " in verdict(bf16)[1]
    stated = text.replace(
        "runtime:\n",
        "runtime:\n  main_grad_dtype: fp32\n  fp8_param_gather: false\n"
        "  parameter_transpose_cache: true\n",
    )
    assert verdict(stated) == (
        "oom",
        "runtime traits of the nemo profile (policies/frameworks/nemo.yaml), overridden: "
        "fp8_param_gather, main_grad_dtype, parameter_transpose_cache",
    )


def test_deprecated_spellings_keep_their_meaning(policies: Any) -> None:
    new = MANIFEST.replace(
        "parallelism:", "runtime: {flash_attention: false, main_grad_dtype: bf16}\nparallelism:"
    ).replace("vocab_size: 128256,", "vocab_size: 128256, untie_embeddings: true,")
    old = MANIFEST.replace(
        "training: {", "training: {flash_attention: false, main_grad_dtype: bf16, "
    ).replace("schedule: 1f1b}", "schedule: 1f1b, untie_embeddings: true}")
    assert _worst(new, policies) == _worst(old, policies)
    doc = load_text(old, "m.yaml")
    infos = [f for f in validate(doc, load_catalog()) if f.code == "S008"]
    assert sorted(f.message.split(" is ")[0] for f in infos) == [
        "parallelism.untie_embeddings",
        "training.flash_attention",
        "training.main_grad_dtype",
    ]
    assert set(DEPRECATED) >= {"training.flash_attention", "parallelism.untie_embeddings"}


def test_the_schema_marks_every_deprecated_spelling_with_its_new_place() -> None:
    schema = json.loads((ROOT / "schemas" / "manifest.schema.json").read_text(encoding="utf-8"))
    marked = {}
    for section, node in schema["properties"].items():
        for key, sub in node.get("properties", {}).items():
            if sub.get("deprecated"):
                marked[f"{section}.{key}"] = sub["x-replaced-by"]
    assert marked == DEPRECATED


def test_untie_embeddings_alone_does_not_make_a_proposal() -> None:
    text = MANIFEST.replace("parallelism: {tensor: 8, pipeline: 4, schedule: 1f1b}", "")
    assert _manifest(text + "parallelism: {untie_embeddings: true}\n").parallelism is None
    assert _manifest(text + "parallelism: {untie_embeddings: true}\n").model.untie_embeddings
    assert _manifest(text + "parallelism: {}\n").parallelism is not None  # as before


CALIBRATED = sorted(
    p
    for p in CALIBRATION.glob("*.yaml")
    if "framework:" in p.read_text(encoding="utf-8")
    and "parallelism" in yaml.safe_load(p.read_text(encoding="utf-8"))
)


@pytest.mark.parametrize("path", CALIBRATED, ids=lambda p: p.stem)
def test_a_profile_prices_exactly_the_knobs_it_replaces(path: Path, policies: Any) -> None:
    """The calibration runs name their framework; written instead with every trait spelled out
    (the old knobs) and no framework, the central estimate is the same (to rounding), but for
    the NCCL communicators: the framework's own process groups (`process_groups`) are no
    knob, so the old spelling gets the default profile's."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    named = check_file(str(path), None, policies).manifest
    assert named is not None and named.runtime.stated
    data["training"].pop("framework")
    data["runtime"] = {k: getattr(named.runtime, k) for k in profiles.TRAITS}
    knobs = _manifest(yaml.safe_dump(data))
    assert not knobs.runtime.stated
    schedule = named.parallelism.schedule or "1f1b"
    a = sizing.stage_memory(named, sizing.proposal(named, schedule), policies.settings)
    b = sizing.stage_memory(knobs, sizing.proposal(knobs, schedule), policies.settings)
    assert a is not None and b is not None
    assert [r.total - r.communicators for r in a.ranks] == pytest.approx(
        [r.total - r.communicators for r in b.ranks], rel=1e-12
    )


def test_a_manifest_naming_another_framework_than_its_config_conflicts(tmp_path: Path) -> None:
    """Every reader names its framework; a `source:` manifest that says another one, or a
    runtime trait the config itself sets otherwise, is F004 at the manifest's key, naming
    both places, every problem at once."""
    (tmp_path / "job.toml").write_text(
        '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 2\n'
        'seq_len = 8192\nsteps = 10\n[compile]\nenable = true\ncomponents = ["loss"]\n'
        "[parallelism]\ndata_parallel_shard_degree = 8\n",
        encoding="utf-8",
    )
    run = tmp_path / "run.yaml"
    run.write_text(
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: r}\n"
        "source: {path: job.toml}\n"
        "cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n"
        "training: {framework: megatron}\nruntime: {cross_entropy: unfused}\n",
        encoding="utf-8",
    )
    result = check_file(str(run))
    conflicts = sorted((f.line, f.message.split(" here ")[0]) for f in result.findings)
    assert conflicts == [
        (6, "training.framework is 'megatron'"),
        (7, "runtime.cross_entropy is 'unfused'"),
    ]
    assert {f.code for f in result.findings} == {"F004"}


def test_an_unknown_framework_is_one_positioned_error_with_the_closest_name(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        MANIFEST.replace("training: {", "training: {framework: torchtitn, "), encoding="utf-8"
    )
    result = check_file(str(path))
    (error,) = [f for f in result.findings if f.severity.value == "error"]
    assert (error.code, error.line) == ("X032", 8)
    assert error.message.endswith("(did you mean 'torchtitan'?)")


@pytest.mark.parametrize("path", CALIBRATED, ids=lambda p: p.stem)
def test_on_every_calibration_run_the_unnamed_band_contains_the_named_estimate(
    path: Path, policies: Any
) -> None:
    """The published runs, each with its framework and without: the band of the manifest that
    names none contains the named framework's whole band, whenever that framework runs the
    judged schedule (else the band leaves it out, and the centre is the default's)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    named = check_file(str(path), None, policies).manifest
    assert named is not None
    data["training"].pop("framework")
    unnamed = _manifest(yaml.safe_dump(data))
    schedule = named.parallelism.schedule or "1f1b"
    runs = profiles.profile(named.runtime.profile).runs(schedule)
    a = sizing.stage_memory(named, sizing.proposal(named, schedule), policies.settings, span=True)
    b = sizing.stage_memory(
        unnamed, sizing.proposal(unnamed, schedule), policies.settings, span=True
    )
    assert a is not None and b is not None
    if runs or named.runtime.profile == profiles.default_profile().name:
        for mine, wide in zip(a.ranks, b.ranks, strict=True):
            assert wide.low <= mine.low + 1 and mine.high <= wide.high + 1


@pytest.mark.parametrize("path", CALIBRATED, ids=lambda p: p.stem)
def test_a_verdict_s_worst_rank_band_is_the_whole_estimate_s(path: Path, policies: Any) -> None:
    """A review's verdict sizes each profile's worst rank alone (every_rank=False); its worst
    rank, band and assumption line are those of the estimate that spans every rank of every
    profile (`dpguard memory`), with and without the named framework."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["training"].pop("framework")
    for m in (check_file(str(path), None, policies).manifest, _manifest(yaml.safe_dump(data))):
        assert m is not None and m.parallelism is not None
        s = sizing.proposal(m, m.parallelism.schedule or "1f1b")
        whole = sizing.stage_memory(m, s, policies.settings, span=True)
        worst = sizing.stage_memory(m, s, policies.settings, span=True, every_rank=False)
        assert whole is not None and worst is not None
        assert worst.worst == whole.worst and worst.runtime == whole.runtime


def test_an_assumed_profile_takes_every_override_a_stated_one_only_its_own() -> None:
    """Without a framework, `runtime:` is the team's word on the runtime, whatever the default
    profile has: deferred FSDP gradient sync applies (torchtitan has the trait, Megatron-LM
    not). Stated, a trait the framework lacks is X034 rather than silently priced."""
    text = MANIFEST.replace("parallelism:", "runtime: {fsdp_gradient_sync: deferred}\nparallelism:")
    assert _manifest(text).runtime.fsdp_gradient_sync == "deferred"
    assert _manifest(text).runtime.overrides == ("fsdp_gradient_sync",)
    titan = _manifest(text.replace("training: {", "training: {framework: torchtitan, "))
    assert titan.runtime.fsdp_gradient_sync == "deferred"
    doc = load_text(text.replace("training: {", "training: {framework: megatron, "), "m.yaml")
    assert [f.code for f in validate(doc, load_catalog())] == ["X034"]


def test_the_process_groups_each_framework_holds_come_from_its_profile() -> None:
    """`process_groups` (policies/frameworks): DeepSpeed's pipeline engine communicates in a
    slice group beside Megatron's tensor-parallel one and reduces ZeRO's gradient norm in a
    model-parallel group; Megatron-core (and the frameworks built on it, by `extends`) has a
    gradient-norm group; torchtitan's DeviceMesh needs none beyond its dimensions."""
    groups = {
        name: (p.tensor_groups, p.model_parallel_group)
        for name in ("megatron", "nemo", "bridge", "flagscale", "deepspeed", "torchtitan")
        for p in [profiles.profile(name)]
    }
    assert groups == {
        "megatron": (1, True),
        "nemo": (1, True),
        "bridge": (1, True),
        "flagscale": (1, True),
        "deepspeed": (2, True),
        "torchtitan": (1, False),
    }
    named = _manifest(MANIFEST.replace("training: {", "training: {framework: deepspeed, ", 1))
    assert named.runtime.profile == "deepspeed"
    setup = sizing.training_setup(named)
    assert (setup.tensor_groups, setup.model_parallel_group) == (2, True)


@pytest.mark.parametrize(
    ("training", "runtime", "remainders"),
    [
        ("framework: nemo, zero_stage: 1", "", True),
        ("framework: nemo, zero_stage: 1, precision: fp8", "", True),
        # NeMo 1 stores whole fp32 master weights for FP8 primary weights, without a
        # distributed optimizer and for fp16 weights (megatron_base_model.py)
        ("framework: nemo, zero_stage: 1, precision: fp8", "fp8_param_gather: true", False),
        ("framework: nemo, zero_stage: 0", "", False),
        ("framework: nemo, zero_stage: 1, precision: fp16", "", False),
        ("framework: nemo, zero_stage: 1", "master_weights: fp32", False),
        ("framework: megatron, zero_stage: 1", "", False),
        ("zero_stage: 1", "master_weights: bf16_remainder", True),
    ],
)
def test_master_weight_remainders_apply_where_nemo_s_optimizer_stores_them(
    training: str, runtime: str, remainders: bool
) -> None:
    """NeMo 1's profile states Apex's bf16 master-weight remainders (2 B of the optimizer
    states instead of 4); Megatron-core keeps fp32 master weights."""
    text = MANIFEST.replace("training: {", f"training: {{{training}, ", 1)
    if runtime:
        text += f"runtime: {{{runtime}}}\n"
    setup = sizing.training_setup(_manifest(text))
    assert setup.master_remainders is remainders


MOE = """\
apiVersion: dpguard/v1
kind: TrainingManifest
metadata: {name: moe-16b}
cluster: {gpus: 64, accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}
model: {architecture: moe, total_params: 16B, active_params: 2.8B, layers: 28,
  hidden_size: 2048, attention_heads: 16, seq_len: 4096, vocab_size: 102400, experts: 64,
  experts_per_token: 6, moe_ffn_hidden_size: 1408, shared_experts: 2, dense_layers: 1,
  ffn_hidden_size: 10944, ffn_activation: swiglu}
training: {tokens: 1T, global_batch_size: 512}
parallelism: {tensor: 2, pipeline: 2, expert: 8, schedule: 1f1b}
"""


def test_the_experts_tensor_size_is_the_framework_s_unless_written(policies: Any) -> None:
    """`expert_tensor` (policies/frameworks): Megatron-LM splits each expert over the TP ranks
    unless --expert-tensor-parallel-size says otherwise, torchtitan and DeepSpeed never do by
    default; a manifest's parallelism.expert_tensor wins. ETP 1 holds twice the expert bytes of
    ETP 2 per GPU, and the band of a manifest that names no framework spans both."""

    def sized(text: str) -> tuple[int, float]:
        m = _manifest(text)
        s = sizing.proposal(m, "1f1b")
        states = sizing.stage_memory(m, s, policies.settings).worst
        return sizing.etp(m, s), states.weights

    named = {
        name: sized(MOE.replace("training: {", f"training: {{framework: {name}, "))
        for name in ("megatron", "nemo", "torchtitan", "deepspeed")
    }
    assert {n: e for n, (e, _) in named.items()} == {
        "megatron": 2,
        "nemo": 2,
        "torchtitan": 1,
        "deepspeed": 1,
    }
    assert sized(MOE)[0] == 2  # no framework named: the default profile's
    written = MOE.replace("expert: 8,", "expert: 8, expert_tensor: 1,")
    assert sized(written)[0] == 1
    assert sized(written)[1] > named["megatron"][1]  # whole experts: more bytes per GPU
    assert sized(written.replace("training: {", "training: {framework: megatron, "))[0] == 1
    # the band of the framework-less manifest contains torchtitan's estimate at its own ETP,
    # rank by rank (its worst rank is not the default profile's)

    def ranks(text: str) -> Any:
        m = _manifest(text)
        return sizing.stage_memory(
            m, sizing.proposal(m, "1f1b"), policies.settings, span=True
        ).ranks

    unnamed = ranks(MOE)
    titan = ranks(MOE.replace("training: {", "training: {framework: torchtitan, "))
    assert max(titan, key=lambda r: r.total).rank != max(unnamed, key=lambda r: r.total).rank
    for u, t in zip(unnamed, titan, strict=True):
        assert u.low <= t.low and t.high <= u.high, u.rank
