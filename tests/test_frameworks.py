"""Framework configs read as manifests (docs/frameworks.md): the shell reader, the Megatron
family, composition with a `source:` manifest or `.dpguard.yaml` defaults, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.findings import Severity
from dpguard.frameworks import shell
from dpguard.frameworks.compose import compose
from dpguard.frameworks.read import read, sniff
from dpguard.manifest import build_runtime
from dpguard.policy.load import load_policies
from dpguard.yamlevents import Position

FRAMEWORKS = Path(__file__).parent.parent / "policies" / "tests" / "frameworks"

SCRIPT = """\
#!/bin/bash
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
NNODES=4
TP=2
MODEL_ARGS=(
    --num-layers 32   # comment
    --hidden-size 4096
    --num-attention-heads 32
    --seq-length ${SEQ:-8192}
)
TRAIN="--micro-batch-size 1 \\
  --global-batch-size 256"
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\
    "${MODEL_ARGS[@]}" $TRAIN \\
    --tensor-model-parallel-size $TP --pipeline-model-parallel-size=4 \\
    --vocab-size 32000 --bf16 --use-distributed-optimizer \\
    --recompute-granularity selective --train-iters 1000
"""

DEFAULTS = """\
defaults:
  - files: "*.sh"
    manifest:
      cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}
      training: {tokens: 1T}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def pointer(tmp_path: Path, extra: str) -> str:
    """run.yaml: a manifest pointing at llama.sh with what the script cannot say, and `extra`."""
    return write(
        tmp_path,
        "run.yaml",
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: run}\n"
        "source: {path: llama.sh}\n"
        "cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n" + extra,
    )


def test_shell_words_keep_where_they_were_written() -> None:
    script = shell.parse(SCRIPT)
    (command,) = script.commands
    words = {w.text: w.position for w in command.words}
    assert words["--num-layers"] == Position(6, 5)  # from the array, not the torchrun line
    assert words["8192"] == Position(9, 25)  # the default of ${SEQ:-8192}
    assert words["--global-batch-size"] == Position(12, 3)  # after a continued string
    assert words["2"] == Position(4, 4)  # TP=2
    assert words["--pipeline-model-parallel-size=4"] == Position(15, 38)


def test_shell_never_guesses_computed_or_conditional_values() -> None:
    script = shell.parse(
        "N=$(nproc)\nM=$((N * 2))\nK=$((3 * 4))\nif true; then X=1; fi\nsource env.sh\n"
        "run.py --a $N --b $M --c $K --d $X --e $UNSET\n"
    )
    values = {w.text: w for w in script.commands[-1].words}
    assert "12" in values  # arithmetic over known values is exact
    unknown = [w.why for w in script.commands[-1].words if w.text is None]
    assert unknown == [
        "a command substitution",
        "arithmetic over values the file does not set: $((N * 2))",
        "$X is set inside a conditional or loop at line 4",
        "$UNSET, which the caller's environment sets: the script does not assign UNSET",
    ]
    assert script.sourced == (("env.sh", Position(5, 8)),)


@pytest.mark.parametrize(
    "text, message",
    [
        ("run.py --a 'open\n", "unterminated single quote"),
        ('run.py --a "open\n', "unterminated double quote"),
        ("run.py --a $(date\n", "unterminated command substitution $(...)"),
    ],
)
def test_shell_syntax_errors_are_positioned(text: str, message: str) -> None:
    with pytest.raises(shell.ShellError) as caught:
        shell.parse(text)
    assert (caught.value.message, caught.value.position.line) == (message, 1)


def test_megatron_script_to_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, "llama.sh", SCRIPT)
    assert sniff(path, SCRIPT) == "megatron"
    extract = read(path, "megatron")
    assert dict(extract.values) == {
        "cluster.gpus": 32,
        "cluster.gpus_per_node": 8,
        "model.architecture": "dense",
        "model.attention_heads": 32,
        "model.hidden_size": 4096,
        "model.layers": 32,
        "model.seq_len": 8192,
        "model.vocab_size": 32000,
        "parallelism.pipeline": 4,
        "parallelism.schedule": "1f1b",
        "parallelism.tensor": 2,
        "model.untie_embeddings": False,
        "training.activation_recompute": "selective",
        "training.global_batch_size": 256,
        "training.micro_batch_size": 1,
        "training.precision": "bf16",
        "training.sequence_parallel": False,  # Megatron's default without --sequence-parallel
        "training.tokens": 1000 * 256 * 8192,
        "training.zero_stage": 1,
    }
    assert extract.origins["parallelism.tensor"].position == Position(4, 4)
    assert extract.origins["model.layers"].position == Position(6, 18)


def test_framework_file_reviewed_with_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".dpguard.yaml", DEFAULTS)
    write(tmp_path, "llama.sh", SCRIPT)
    monkeypatch.chdir(tmp_path)
    assert main(["review", "--format", "json", "llama.sh"]) == 0
    report = json.loads(capsys.readouterr().out)
    (entry,) = report["files"]
    assert entry["source_format"] == "megatron"
    assert entry["manifest"]["parallelism"]["tensor"] == 2
    assert entry["manifest"]["cluster"]["accelerator"] == "H100-SXM"
    # total parameters derived from the shape: per layer 4h^2 attention, 8h^2 GeLU MLP and two
    # LayerNorms (weight and bias); one embedding matrix, tied as Megatron-LM's default is
    h = 4096
    assert entry["manifest"]["model"]["total_params"] == 32 * (12 * h * h + 4 * h) + 32000 * h


def test_missing_facts_are_named_once(tmp_path: Path) -> None:
    path = write(tmp_path, "llama.sh", SCRIPT)
    result = check_file(path)
    assert [(f.code, f.message.split(" is not in")[0]) for f in result.findings] == [
        ("F003", "cluster.accelerator"),
        ("F003", "cluster.interconnect.inter_node_gbps_per_gpu"),
    ]  # training.tokens comes from --train-iters x global batch x sequence length
    assert result.source_format == "megatron"


def test_source_manifest_conflicts_name_both_places(tmp_path: Path) -> None:
    write(tmp_path, "llama.sh", SCRIPT)
    manifest = pointer(tmp_path, "training: {global_batch_size: 512}\n")
    result = check_file(manifest)
    assert [(f.path, f.line, f.code, f.message) for f in result.findings] == [
        (
            manifest,
            6,
            "F004",
            f"training.global_batch_size is 512 here but 256 in {tmp_path}/llama.sh:12:23; "
            "set it in one place",
        )
    ]


def test_findings_point_into_the_framework_file(tmp_path: Path) -> None:
    """A rule about a value read from the script is placed on the script's line."""
    write(tmp_path, "vpp.sh", (FRAMEWORKS / "megatron-vpp.sh").read_text(encoding="utf-8"))
    manifest = write(
        tmp_path,
        "run.yaml",
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: run}\n"
        "source: {path: vpp.sh, format: megatron}\n"
        "cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n",
    )
    from dpguard.commands._policies import load
    from dpguard.config import NO_CONFIG

    result = check_file(manifest, policies=load([], NO_CONFIG))
    fw001 = next(f for f in result.findings if f.code == "FW001")
    assert (fw001.path, fw001.line) == (f"{tmp_path}/vpp.sh", 5)
    assert "builds 64 of the 80 layers" in fw001.message


def test_missing_or_unknown_source(tmp_path: Path) -> None:
    head = "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: run}\n"
    missing = write(tmp_path, "a.yaml", head + "source: {path: nowhere.sh}\n")
    (finding,) = check_file(missing).findings
    assert (finding.code, finding.line, finding.col) == ("F005", 4, 16)
    write(tmp_path, "notes.txt", "hello\n")
    unknown = write(tmp_path, "b.yaml", head + "source: {path: notes.txt}\n")
    (finding,) = check_file(unknown).findings
    assert finding.code == "F005" and "not a framework config" in finding.message


@pytest.mark.parametrize(
    "name, text, line, message",
    [
        ("broken.sh", "#!/bin/bash\npretrain_gpt.py --num-layers 'x\n", 2, "unterminated"),
        ("dup.json", '{"train_batch_size": 8,\n "train_batch_size": 16}\n', 2, "duplicate key"),
        ("deep.json", '{"train_batch_size": ' + "[" * 40 + "]" * 40 + "}\n", 1, "nesting"),
        ("bad.json", '{"train_batch_size": 8,,}\n', 1, "invalid JSON"),
        ("nan.json", '{"train_batch_size": NaN}\n', 1, "finite"),
    ],
)
def test_hostile_configs_fail_one_file(
    tmp_path: Path, name: str, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, name, text)
    (finding,) = check_file(path).findings
    assert (finding.code, finding.line) == ("F001", line)
    assert message in finding.message


def test_unrecognised_files_are_left_alone_in_hook_mode(tmp_path: Path) -> None:
    from dpguard.discover import declares_manifest

    assert declares_manifest(write(tmp_path, "run.sh", SCRIPT))
    assert not declares_manifest(write(tmp_path, "build.sh", "#!/bin/sh\nmake all\n"))
    assert not declares_manifest(write(tmp_path, "pkg.json", '{"name": "x"}\n'))
    assert not declares_manifest(write(tmp_path, "pyproject.toml", "[project]\nname = 'x'\n"))
    assert declares_manifest(str(FRAMEWORKS / "bridge-seq.yaml"))
    assert declares_manifest(str(FRAMEWORKS / "deepspeed-pipe.json"))
    assert not declares_manifest(
        write(tmp_path, "k8s.yaml", "metadata: {name: x}\nspec: {replicas: 1}\n")
    )


def test_flagscale_reads_the_train_file_it_names() -> None:
    extract = read(str(FRAMEWORKS / "flagscale" / "train_dualpipev.yaml"), "flagscale")
    assert extract.values["parallelism.schedule"] == "dualpipev"
    assert extract.values["cluster.gpus"] == 32
    assert extract.values["model.experts"] == 64
    origin = extract.origins["parallelism.expert"]
    assert origin.file.endswith("train/moe_16b.yaml") and origin.position.line == 4


def test_bridge_and_deepspeed() -> None:
    bridge = read(str(FRAMEWORKS / "bridge-seq.yaml"), "bridge")
    assert bridge.values["model.kv_heads"] == 8
    assert bridge.values["model.untie_embeddings"] is True
    assert bridge.facts["framework.sequence_lengths"] == "8192 (line 10), 4096 (line 18)"
    ds = read(str(FRAMEWORKS / "deepspeed-pipe.json"), "deepspeed")
    assert ds.values["training.zero_stage"] == 2 and ds.facts["framework.zero_with_pipeline"]


def test_deepspeed_without_sections_runs_its_own_defaults(tmp_path: Path) -> None:
    """No zero_optimization: DeepSpeed's stage 0, not the manifest's default 1; no bf16/fp16
    section: fp32, which dpguard does not model, said in an F002 note."""
    path = tmp_path / "ds.json"
    path.write_text('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1}\n', "utf-8")
    ds = read(str(path), "deepspeed")
    assert ds.values["training.zero_stage"] == 0
    assert "training.precision" not in ds.values
    (note,) = ds.notes
    assert note.code == "F002" and "fp32" in note.message


def test_a_node_count_the_scheduler_sets_says_why_the_gpus_are_unknown(tmp_path: Path) -> None:
    text = (
        "#!/bin/bash\nNNODES=${SLURM_NNODES:-32}\n"
        "torchrun --nproc_per_node 8 --nnodes $NNODES pretrain_gpt.py --num-layers 32\n"
    )
    extract = read(write(tmp_path, "run.sh", text), "megatron")
    assert "cluster.gpus" not in extract.values
    (note,) = [n for n in extract.notes if "GPU count" in n.message]
    assert (note.code, note.origin.position.line) == ("F002", 2)
    assert "--nnodes is $SLURM_NNODES, which the job scheduler sets at launch" in note.message


def test_the_slurm_header_gives_the_nodes(tmp_path: Path) -> None:
    text = (
        "#!/bin/bash\n#SBATCH --job-name=llama\n#SBATCH --nodes=4\n\n"
        "torchrun --nproc_per_node 8 --nnodes $SLURM_NNODES pretrain_gpt.py --num-layers 32\n"
        "#SBATCH --nodes=99\n"  # after the first command: sbatch does not read it
    )
    extract = read(write(tmp_path, "run.sh", text), "megatron")
    assert extract.values["cluster.gpus"] == 32
    assert extract.origins["cluster.gpus"].position == Position(3, 17)
    assert not [n for n in extract.notes if "GPU count" in n.message]
    short = text.replace("#SBATCH --nodes=4", "#SBATCH -N 2")
    assert read(write(tmp_path, "short.sh", short), "megatron").values["cluster.gpus"] == 16


def test_a_flag_the_file_computes_is_reported_not_guessed(tmp_path: Path) -> None:
    text = SCRIPT.replace("TP=2", "TP=$(cat tp.txt)")
    extract = read(write(tmp_path, "llama.sh", text), "megatron")
    assert "parallelism.tensor" not in extract.values  # not Megatron's default: unknown
    (note,) = extract.notes
    assert (note.code, note.origin.position) == ("F002", Position(4, 4))
    assert "--tensor-model-parallel-size" in note.message and "command substitution" in note.message


def test_a_computed_degree_fails_unless_a_manifest_supplies_it(tmp_path: Path) -> None:
    """Megatron-LM's default TP of 1 applies when the flag is absent, never to a flag whose
    value the file computes: that is an error at the flag until a manifest says the value."""
    write(tmp_path, "llama.sh", SCRIPT.replace("TP=2", "TP=$(cat tp.txt)"))
    alone = check_file(str(tmp_path / "llama.sh"))
    unread = [f for f in alone.findings if f.message.startswith("parallelism.tensor")]
    assert [(f.code, f.severity, f.line) for f in unread] == [("F003", Severity.ERROR, 4)]
    assert "dpguard does not guess it: add parallelism.tensor to a manifest" in unread[0].message
    manifest = pointer(tmp_path, "parallelism: {tensor: 4}\n")
    supplied = check_file(manifest)
    assert not [f for f in supplied.findings if f.code == "F003"]
    assert supplied.manifest is not None and supplied.manifest.parallelism.tensor == 4


# Published totals of the models behind torchtitan's flavors (model cards: Llama 3.1 8B/70B/405B,
# DeepSeek-V2-Lite 15.7B, DeepSeek-V2 236B, DeepSeek-V3 671B, Qwen3 0.6B/1.7B/4.0B/8.2B/14.8B/
# 32.8B and the MoEs' 30.5B and 235B).
PUBLISHED = {
    ("llama3", "8B"): 8.03e9,
    ("llama3", "70B"): 70.6e9,
    ("llama3", "405B"): 405e9,
    ("deepseek_v3", "16B"): 15.7e9,
    ("deepseek_v3", "236B"): 236e9,
    ("deepseek_v3", "671B"): 671e9,
    ("qwen3", "0.6B"): 0.6e9,
    ("qwen3", "1.7B"): 1.7e9,
    ("qwen3", "4B"): 4.0e9,
    ("qwen3", "8B"): 8.2e9,
    ("qwen3", "14B"): 14.8e9,
    ("qwen3", "32B"): 32.8e9,
    ("qwen3", "30B-A3B"): 30.5e9,
    ("qwen3", "235B-A22B"): 235e9,
}


@pytest.mark.parametrize(("name", "flavor"), sorted(PUBLISHED))
def test_torchtitan_flavors_have_the_published_size(tmp_path: Path, name: str, flavor: str) -> None:
    """The flavor table is dpguard's transcription of torchtitan's Python model args: the
    parameter count derived from each shape is the model's published size (within 2 %: the
    cards round)."""
    path = write(
        tmp_path,
        "train.toml",
        f'[model]\nname = "{name}"\nflavor = "{flavor}"\n'
        "[training]\nseq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = 8\n",
    )
    doc, _ = compose(read(path, "torchtitan"))
    assert doc.data["model"]["total_params"] == pytest.approx(PUBLISHED[name, flavor], rel=0.02)


def test_nemo_launcher_arithmetic_resolvers_are_evaluated(tmp_path: Path) -> None:
    """NeMo-Framework-Launcher's configs derive sizes with its own resolvers (multiply,
    divide_ceil, divide_floor over literals and references); any other resolver is left to the
    framework and reported, never guessed."""
    text = (
        "trainer: {devices: 8, num_nodes: 4, precision: bf16}\n"
        "model:\n"
        "  hidden_size: 4096\n"
        "  num_attention_heads: 32\n"
        "  ffn_hidden_size: ${multiply:4, ${.hidden_size}}\n"
        "  num_layers: ${divide_ceil:47, 2}\n"
        "  encoder_seq_length: ${divide_floor:${model.hidden_size}, 2}\n"
        "  micro_batch_size: ${oc.env:MBS}\n"
        "  global_batch_size: ${divide_floor:8, 0}\n"
    )
    extract = read(write(tmp_path, "gpt.yaml", text), "nemo")
    assert extract.values["model.ffn_hidden_size"] == 16384
    assert extract.values["model.layers"] == 24
    assert extract.values["model.seq_len"] == 2048
    assert "training.micro_batch_size" not in extract.values
    assert "training.global_batch_size" not in extract.values
    unread = sorted(n.message for n in extract.notes)
    assert any("oc.env:MBS" in m and "only the framework evaluates" in m for m in unread)
    assert any("divide_floor:8, 0" in m for m in unread)


def test_a_string_of_flags_with_an_unknown_part_still_splits_into_the_flags_it_knows(
    tmp_path: Path,
) -> None:
    """Megatron-LM's multimodal examples keep every flag in one string (OPTIONS="... --tp 4
    --global-batch-size ${BZ} ...") where BZ is set in an if/else: the flags around it are
    read, and only the one word built from BZ is unknown, with BZ's own reason."""
    text = (
        "#!/bin/bash\nif [[ $DEBUG -eq 1 ]]; then\n  BZ=32\nelse\n  BZ=256\nfi\n"
        'OPTIONS=" \\\n    --tensor-model-parallel-size 4 \\\n    --num-layers 32 \\\n'
        '    --global-batch-size ${BZ} \\\n    --micro-batch-size $(echo 1) \\\n    --bf16"\n'
        "torchrun --nproc_per_node 8 pretrain_gpt.py ${OPTIONS}\n"
    )
    extract = read(write(tmp_path, "train.sh", text), "megatron")
    assert extract.values["parallelism.tensor"] == 4
    assert extract.values["model.layers"] == 32
    assert extract.values["training.precision"] == "bf16"
    assert extract.origins["parallelism.tensor"].position == Position(8, 34)
    notes = {n.message.split(":")[0]: n.message for n in extract.notes}
    assert "set inside a conditional or loop at line 5" in notes["--global-batch-size"]
    assert "a command substitution" in notes["--micro-batch-size"]


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        (
            "nemo",
            "trainer: {devices: 8, num_nodes: 2}\n"
            "model: {num_layers: 32, activation: fast-swiglu,\n"
            "        optim: {name: mcore_distributed_optim}}\n",
        ),
        (
            "bridge",
            "model: {num_layers: 32, gated_linear_unit: true}\n"
            "train: {global_batch_size: 8}\nddp: {use_distributed_optimizer: true}\n",
        ),
    ],
)
def test_gated_ffn_and_the_distributed_optimizer_as_nemo_and_bridge_spell_them(
    tmp_path: Path, fmt: str, text: str
) -> None:
    """NeMo-Framework-Launcher's Llama recipes say activation: fast-swiglu and optim name
    mcore_distributed_optim; Megatron-Bridge says gated_linear_unit: true."""
    extract = read(write(tmp_path, "config.yaml", text), fmt)
    assert extract.values["model.ffn_activation"] == "swiglu"
    assert extract.values["training.zero_stage"] == 1


def test_megatron_defaults_and_spellings_the_real_scripts_rely_on(tmp_path: Path) -> None:
    """What Megatron-LM's own argument parser fills in: a store_true flag never takes the next
    word; --recompute-activations is selective recompute; an absent --moe-ffn-hidden-size is
    --ffn-hidden-size; absent MLA ranks take argparse's defaults (no query compression, KV rank
    32); --moe-layer-freq in its other spellings."""
    text = (
        "#!/bin/bash\n"
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 27 --hidden-size 2048 \\\n"
        "  --ffn-hidden-size 1408 --num-experts 64 --moe-layer-freq '[0]+[1]*26' \\\n"
        "  --multi-latent-attention --kv-lora-rank 512 --kv-channels 128 \\\n"
        "  --recompute-activations --sequence-parallel $(cat extra_args.txt)\n"
    )
    extract = read(write(tmp_path, "train.sh", text), "megatron")
    values = extract.values
    assert values["training.sequence_parallel"] is True
    assert values["training.activation_recompute"] == "selective"
    assert values["model.moe_ffn_hidden_size"] == 1408
    assert values["model.head_dim"] == 128  # --kv-channels
    assert values["model.dense_layers"] == 1
    assert values["model.mla"] == {
        "q_lora_rank": 0,
        "kv_lora_rank": 512,
        "qk_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
    }


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        ("([0]*3+[1]*58)", [0] * 3 + [1] * 58),
        ("[0]+[1]*26", [0] + [1] * 26),
        ([0, 1, 1], [0, 1, 1]),
        ("([1]*3+[0]*1)*3", ([1] * 3 + [0]) * 3),
        ("2", None),  # an integer frequency is not a pattern
        ('__import__("os").system("x")', None),  # never evaluated as Python
        ("[0]*10**9", None),
    ],
)
def test_moe_layer_freq_patterns(value: object, pattern: list[int] | None) -> None:
    from dpguard.frameworks.megatron import layer_pattern

    assert layer_pattern(value) == pattern


def test_nanotron_moe_and_a_debug_model_read_without_false_alarms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nanotron's LlaMoE example (moe_num_experts, num_experts_per_tok) is a MoE; its tiny
    debug shapes are counts read from the config, not bare numbers missing a suffix (X029)."""
    text = (
        "model:\n  model_config: {hidden_size: 64, intermediate_size: 128,\n"
        "    num_hidden_layers: 2,\n"
        "    num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 1000,\n"
        "    moe_num_experts: 4, num_experts_per_tok: 1, tie_word_embeddings: true}\n"
        "parallelism: {dp: 2, tp: 1, pp: 1, expert_parallel_size: 2}\n"
        "tokens: {micro_batch_size: 2, batch_accumulation_per_replica: 1, sequence_length: 256,\n"
        "  train_steps: 10}\n"
    )
    path = write(tmp_path, "config_llamoe.yaml", text)
    extract = read(path, "nanotron")
    assert extract.values["model.architecture"] == "moe"
    assert (extract.values["model.experts"], extract.values["model.experts_per_token"]) == (4, 1)
    write(tmp_path, ".dpguard.yaml", DEFAULTS.replace('"*.sh"', '"*.yaml"'))
    (tmp_path / ".git").mkdir()
    main(["review", "--format", "json", path])
    (entry,) = json.loads(capsys.readouterr().out)["files"]
    assert not [f for f in entry["findings"] if f["code"] == "X029"], entry["findings"]
    assert entry["manifest"]["model"]["total_params"] < 10**6  # X029's threshold


def test_a_shell_script_that_launches_no_megatron_job_is_named_as_such(tmp_path: Path) -> None:
    """Reviewed directly, a helper script (the model zoo's best_practice/*.sh) is no config
    dpguard reads: one F005 saying so, not a YAML syntax error; the hook passes over it."""
    path = write(tmp_path, "setup.sh", "#!/bin/bash\nset -e\npip install -r requirements.txt\n")
    result = check_file(path)
    assert [(f.code, f.line) for f in result.findings] == [("F005", 1)]
    assert "not a config dpguard reads" in result.findings[0].message


def test_scheduler_variables_are_not_read_from_their_local_defaults(tmp_path: Path) -> None:
    """NNODES=${SLURM_NNODES:-"1"} (Megatron-LM's Mixtral example) is the job's node count,
    which Slurm sets at launch; the default 1 is for a local run: the GPU count is unknown,
    never 8."""
    text = (
        '#!/bin/bash\nNNODES=${SLURM_NNODES:-"1"}\n'
        "torchrun --nproc_per_node 8 --nnodes $NNODES pretrain_gpt.py --num-layers 32 \\\n"
        "  --tensor-model-parallel-size 2\n"
    )
    extract = read(write(tmp_path, "train.sh", text), "megatron")
    assert "cluster.gpus" not in extract.values
    assert extract.values["parallelism.tensor"] == 2


def test_expert_parallelism_without_experts_leaves_the_architecture_to_a_manifest(
    tmp_path: Path,
) -> None:
    """A Megatron-Bridge override file sets expert_model_parallel_size while its Python recipe
    sets the experts: the model is not assumed dense (which X006 would then reject)."""
    text = (
        "model: {num_layers: 61, expert_model_parallel_size: 32}\ntrain: {global_batch_size: 8}\n"
    )
    path = write(tmp_path, "kimi_override.yaml", text)
    extract = read(path, "bridge")
    assert "model.architecture" not in extract.values
    assert "model.architecture" in extract.undetermined
    result = check_file(path)
    codes = {f.code for f in result.findings}
    assert "X006" not in codes and "F003" in codes


def test_a_bridge_override_without_top_k_leaves_it_to_a_manifest(tmp_path: Path) -> None:
    """Megatron-Bridge YAML overrides a Python recipe: an MoE override that does not say
    moe_router_topk gets no top-k of 2 (Megatron's argparse default) but an F003 for it."""
    text = "model: {num_layers: 61, num_moe_experts: 384}\ntrain: {global_batch_size: 8}\n"
    extract = read(write(tmp_path, "kimi.yaml", text), "bridge")
    assert "model.experts_per_token" not in extract.values
    assert "model.experts_per_token" in extract.undetermined
    with_topk = text.replace("384}", "384, moe_router_topk: 8}")
    assert (
        read(write(tmp_path, "kimi8.yaml", with_topk), "bridge").values["model.experts_per_token"]
        == 8
    )


@pytest.mark.parametrize(
    "test, taken",
    [
        ('[[ "$DTYPE" == "fp8" ]]', "fp8"),
        ('[ "$DTYPE" = bf16 ]', "other"),
        ('[[ "$DTYPE" != "fp8" ]]', "other"),
        ("[ $N -gt 2 ]", "fp8"),
        ("[ $N -le 2 ]", "other"),
        ('[[ -z "$UNSET_BUT_EMPTY" ]]', "fp8"),
        ('[[ -n "$DTYPE" ]]', "fp8"),
        ('! [[ "$DTYPE" == "fp8" ]]', "other"),
        ('test "$DTYPE" = fp8', "fp8"),
    ],
)
def test_shell_branches_whose_test_is_known_are_followed(test: str, taken: str) -> None:
    """Megatron-LM's examples choose their precision flags with `if [[ "$DTYPE" == "fp8" ]]`
    on a variable the script sets: the branch that runs is read, the others are skipped."""
    script = shell.parse(
        f'DTYPE="fp8"\nN=4\nUNSET_BUT_EMPTY=""\nif {test}; then\n  P=fp8\nelif [ 1 -eq 1 ]; then\n'
        "  P=other\nelse\n  P=never\nfi\nrun.py --p $P\n"
    )
    assert [w.text for w in script.commands[-1].words] == ["run.py", "--p", taken]


@pytest.mark.parametrize(
    "test",
    [
        '[[ "$UNSET" == "x" ]]',  # a value the file does not set
        "true",  # a command
        '[[ "$DTYPE" == fp* ]]',  # a glob pattern
        '[[ "$DTYPE" == "fp8" ]] || [[ "$N" == 1 ]]',  # joined tests
        "[ $DTYPE -gt 1 ]",  # not a number
    ],
)
def test_shell_branches_whose_test_is_not_known_stay_unknown(test: str) -> None:
    script = shell.parse(
        f"DTYPE=fp8\nN=4\nP=default\nif {test}; then\n  P=a\nelse\n  P=b\nfi\n"
        "ARGS=(--x 1)\nrun.py --p $P\n"
    )
    word = script.commands[-1].words[-1]
    assert word.text is None and "inside a conditional or loop" in word.why


def test_shell_unquoted_array_elements_split_into_words() -> None:
    """Bash splits an unquoted ${ARR[@]} element such as "--fp8-format hybrid" into a flag and
    its value; a quoted expansion keeps it whole."""
    script = shell.parse(
        'ARGS=("--fp8-format hybrid" --bf16)\nrun.py ${ARGS[@]}\nrun.py "${ARGS[@]}"\n'
    )
    assert [w.text for w in script.commands[0].words] == [
        "run.py",
        "--fp8-format",
        "hybrid",
        "--bf16",
    ]
    assert [w.text for w in script.commands[1].words] == ["run.py", "--fp8-format hybrid", "--bf16"]


@pytest.mark.parametrize(
    "fmt, text, expected",
    [
        (
            "megatron",
            "torchrun pretrain_gpt.py --bf16 --grad-reduce-in-bf16 --use-precision-aware-optimizer"
            " --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --optimizer-cpu-offload"
            " --optimizer-offload-fraction 0.5\n",
            {"main_grad_dtype": "bf16", "optimizer_moment_dtype": "bf16", "optimizer_offload": 0.5},
        ),
        (
            "megatron",
            "torchrun pretrain_gpt.py --bf16 --main-grads-dtype bf16 --exp-avg-dtype bf16"
            " --exp-avg-sq-dtype bf16 --optimizer-cpu-offload\n",
            # moment dtypes without the precision-aware optimizer are not used by Megatron
            {"main_grad_dtype": "bf16", "optimizer_offload": 1.0},
        ),
        ("megatron", "torchrun pretrain_gpt.py --bf16 --exp-avg-dtype bf16\n", {}),
        (
            "bridge",
            "ddp: {grad_reduce_in_fp32: false}\noptimizer: {use_precision_aware_optimizer: true,"
            " exp_avg_dtype: bf16, exp_avg_sq_dtype: bf16, optimizer_cpu_offload: true,"
            " optimizer_offload_fraction: 0.25}\nmixed_precision: bf16_mixed\n",
            {
                "main_grad_dtype": "bf16",
                "optimizer_moment_dtype": "bf16",
                "optimizer_offload": 0.25,
            },
        ),
        # NeMo 1: the optimizer's grad_sync_dtype decides the gradient buffer (MLPerf configs)
        ("nemo", "model:\n  optim:\n    grad_sync_dtype: bf16\n", {"main_grad_dtype": "bf16"}),
        ("nemo", "model:\n  optim:\n    grad_sync_dtype: fp32\n", {"main_grad_dtype": "fp32"}),
        # NeMo 1's master weights: Apex's bf16 remainders (the profile's) unless the config
        # names another optimizer or keeps whole fp32 ones (megatron_base_model.py)
        ("nemo", "model:\n  optim:\n    name: distributed_fused_adam\n", {}),
        ("nemo", "model:\n  optim:\n    name: fused_adam\n", {"master_weights": "fp32"}),
        (
            "nemo",
            "model:\n  optim:\n    name: mcore_distributed_optim\n",
            {"master_weights": "fp32"},
        ),
        (
            "nemo",
            "model:\n  optim:\n    name: distributed_fused_adam\n    store_params: true\n",
            {"master_weights": "fp32"},
        ),
        (
            "nemo",
            "model:\n  optim:\n    store_param_remainders: false\n",
            {"master_weights": "fp32"},
        ),
    ],
)
def test_gradient_and_optimizer_precision_and_offload(
    tmp_path: Path, fmt: str, text: str, expected: dict[str, object]
) -> None:
    """What decides the model-state bytes: Megatron's --grad-reduce-in-bf16 (Megatron-LM's
    Llama 3 FP8 example), the precision-aware optimizer's moment dtypes (DeepSeek-V3 recipes)
    and optimizer CPU offload, in the command-line and the Megatron-Bridge spellings."""
    keys = ("main_grad_dtype", "optimizer_moment_dtype", "optimizer_offload", "master_weights")
    assert _training(tmp_path, fmt, text, keys) == expected


def _training(tmp_path: Path, fmt: str, text: str, keys: tuple[str, ...]) -> dict[str, object]:
    """The `training.` (or `runtime.`) values among `keys` that the `fmt` reader takes from
    `text`."""
    name = {"megatron": "train.sh", "torchtitan": "job.toml"}.get(fmt, "config.yaml")
    values = read(write(tmp_path, name, text), fmt).values
    return {
        k: values[f"{section}.{k}"]
        for k in keys
        for section in ("training", "runtime")
        if f"{section}.{k}" in values
    }


@pytest.mark.parametrize(
    "flags, zero",
    [
        ("--use-megatron-fsdp", 3),  # default optim_grads_params
        ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads", 2),
        ("--use-megatron-fsdp --data-parallel-sharding-strategy optim", 1),
        ("--use-distributed-optimizer", 1),
        ("", 0),
    ],
)
def test_megatron_fsdp_sharding_strategy_is_the_zero_stage(
    tmp_path: Path, flags: str, zero: int
) -> None:
    text = f"torchrun pretrain_gpt.py --bf16 --num-layers 2 {flags}\n"
    assert read(write(tmp_path, "train.sh", text), "megatron").values["training.zero_stage"] == zero


def test_overlap_switches_are_read_for_the_step_time_model(tmp_path: Path) -> None:
    """Megatron-LM's overlap switches and torchtitan's AsyncTP set runtime.overlap at their
    line; a file without them leaves the profile's defaults (nothing is read)."""
    flags = "--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap"
    text = f"torchrun pretrain_gpt.py --bf16 --num-layers 2 \\\n  {flags}\n"
    values = read(write(tmp_path, "train.sh", text), "megatron").values
    assert {k: v for k, v in values.items() if k.startswith("runtime.overlap")} == {
        "runtime.overlap.dp_grad_reduce": True,
        "runtime.overlap.dp_param_gather": True,
        "runtime.overlap.tp": True,
    }
    plain = read(
        write(tmp_path, "plain.sh", "torchrun pretrain_gpt.py --num-layers 2\n"), "megatron"
    )
    assert not any(k.startswith("runtime.overlap") for k in plain.values)
    toml = '[model]\nname = "llama3"\nflavor = "8B"\n[parallelism]\n'
    toml += "enable_async_tensor_parallel = true\n"
    found = read(write(tmp_path, "a.toml", toml), "torchtitan")
    assert found.values["runtime.overlap.tp"] is True
    assert found.origins["runtime.overlap.tp"].position.line == 5


def test_torchtitan_cpu_offload_moves_the_optimizer_states_to_the_host(tmp_path: Path) -> None:
    text = '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nseq_len = 4096\n'
    plain = read(write(tmp_path, "a.toml", text), "torchtitan")
    offloaded = read(write(tmp_path, "b.toml", text + "enable_cpu_offload = true\n"), "torchtitan")
    assert "training.optimizer_offload" not in plain.values
    assert offloaded.values["training.optimizer_offload"] == 1.0
    assert offloaded.origins["training.optimizer_offload"].position.line == 6


@pytest.mark.parametrize(
    "flags, counts",
    [
        # DeepSeek-V3's layout in Megatron's MoE model zoo: V = 32 / 8 = 4
        (
            "--num-layers 61 --pipeline-model-parallel-size 8 "
            "--pipeline-model-parallel-layout 'Et|(tt|)*30mL'",
            [1, *[2] * 30, 0],
        ),
        # BLOOM-style uneven first and last stages: (70 - 5 - 5) / 10 in between
        (
            "--num-layers 70 --pipeline-model-parallel-size 12 "
            "--decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 5",
            [5, *[6] * 10, 5],
        ),
        (
            "--num-layers 62 --pipeline-model-parallel-size 4 "
            "--decoder-last-pipeline-num-layers 14",
            [16, 16, 16, 14],
        ),
        # what Megatron refuses keeps dpguard's even split: 60 do not divide over 9 stages
        (
            "--num-layers 70 --pipeline-model-parallel-size 10 "
            "--decoder-first-pipeline-num-layers 10",
            None,
        ),
        # a layout that places 60 decoder layers for 61 (FW012 says so)
        (
            "--num-layers 61 --pipeline-model-parallel-size 8 "
            "--pipeline-model-parallel-layout 'Et|(tt|)*29tmL'",
            None,
        ),
        ("--num-layers 64 --pipeline-model-parallel-size 8", None),
    ],
)
def test_a_pipeline_split_set_by_hand_is_read_per_stage(
    tmp_path: Path, flags: str, counts: list[int] | None
) -> None:
    text = f"torchrun pretrain_gpt.py --bf16 {flags}\n"
    extract = read(write(tmp_path, "train.sh", text), "megatron")
    assert extract.values.get("parallelism.stage_layers") == counts
    if counts is not None:
        assert extract.origins["parallelism.stage_layers"].position.line == 1


def test_torchtitan_pipelines_with_torch_pipelining(tmp_path: Path) -> None:
    text = (
        '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nseq_len = 4096\n'
        "[parallelism]\npipeline_parallel_degree = {pp}\n"
    )
    # the torchtitan profile's traits, which the config gets by naming its framework
    staged = read(write(tmp_path, "a.toml", text.format(pp=2)), "torchtitan")
    assert "runtime.pipeline_parallel_impl" not in staged.values
    doc, _findings = compose(staged)
    assert doc.data["training"]["framework"] == "torchtitan"
    runtime = build_runtime(doc.data)
    assert (runtime.profile, runtime.stated) == ("torchtitan", True)
    assert (runtime.pipeline_parallel_impl, runtime.tensor_parallel_impl) == ("torch", "dtensor")


@pytest.mark.parametrize(
    "fmt, text, expected",
    [
        (
            "megatron",
            "torchrun pretrain_gpt.py --fp8-format hybrid --fp8-param-gather\n",
            {"fp8_param_gather": True},
        ),
        # NeMo 1 spells FP8 primary weights fp8_params (MLPerf's GPT-3 175B configs)
        (
            "nemo",
            "model:\n  fp8: true\n  fp8_hybrid: true\n  fp8_params: true\n",
            {"fp8_param_gather": True},
        ),
        # Transformer Engine caches each weight's FP8 cast and transpose over the step
        ("megatron", "torchrun pretrain_gpt.py --fp8-format hybrid\n", {"fp8_weight_cache": True}),
        (
            "megatron",
            "torchrun pretrain_gpt.py --fp8-format hybrid --disable-parameter-transpose-cache\n",
            {"parameter_transpose_cache": False},
        ),
        (
            "megatron",
            "torchrun pretrain_gpt.py --fp8-format hybrid --fp8-param-gather "
            "--disable-parameter-transpose-cache\n",
            {"fp8_param_gather": True, "parameter_transpose_cache": False},
        ),
        # Megatron-Bridge's FP8 presets keep FP8 primary weights, but sub-channel scaling
        (
            "bridge",
            "mixed_precision: bf16_with_fp8_current_scaling_mixed\n"
            "model: {disable_parameter_transpose_cache: true}\n",
            {"fp8_param_gather": True, "parameter_transpose_cache": False},
        ),
        (
            "bridge",
            "mixed_precision: bf16_with_fp8_subchannel_scaling_mixed\n",
            {"fp8_weight_cache": True},
        ),
        ("bridge", "mixed_precision: bf16_mixed\n", {}),
        # torchtitan: FSDP all-gathers Float8 weights in FP8; torchao caches no transpose (its
        # profile has no transpose cache to turn off)
        (
            "torchtitan",
            '[model]\nname = "llama3"\nflavor = "8B"\n[float8]\nenable_float8_linear = true\n'
            "enable_fsdp_float8_all_gather = true\n",
            {"fp8_param_gather": True},
        ),
        (
            "torchtitan",
            '[model]\nname = "llama3"\nflavor = "8B"\nconverters = ["quantize.linear.float8"]\n'
            "[quantize.linear.float8]\nenable_fsdp_float8_all_gather = true\n",
            {"fp8_param_gather": True},
        ),
        # without Float8 linears the option gathers nothing in FP8
        (
            "torchtitan",
            '[model]\nname = "llama3"\nflavor = "8B"\n'
            "[quantize.linear.float8]\nenable_fsdp_float8_all_gather = true\n",
            {},
        ),
    ],
)
def test_fp8_primary_weights_and_the_transpose_cache(
    tmp_path: Path, fmt: str, text: str, expected: dict[str, object]
) -> None:
    keys = ("fp8_param_gather", "parameter_transpose_cache", "fp8_weight_cache")
    assert _training(tmp_path, fmt, text, keys) == expected


@pytest.mark.parametrize(
    "parallelism, counts",
    [
        # pipeline_parallel.py: the embedding and the output count as one layer each, the
        # remainder goes to the first stages: (126 + 2) / 8 = 16, less one at either end
        ("pipeline_parallel_degree = 8", [15, *[16] * 6, 15]),
        (
            "pipeline_parallel_degree = 4\npipeline_parallel_schedule = 'Interleaved1F1B'\n"
            "pipeline_parallel_layers_per_stage = 8",
            [7, *[8] * 14, 7],
        ),
        (
            "pipeline_parallel_degree = 8\npipeline_parallel_first_stage_less_layers = 0\n"
            "pipeline_parallel_last_stage_less_layers = 3",
            [17, *[16] * 6, 13],
        ),
        ("pipeline_parallel_degree = 2\npipeline_parallel_split_points = ['layers.70']", [70, 56]),
        (
            "pipeline_parallel_degree = 2\n"
            "module_fqns_per_model_part = [['tok_embeddings', 'layers.0'], "
            + "["
            + ", ".join(f"'layers.{i}'" for i in range(1, 126))
            + ", 'norm', 'output']]",
            [1, 125],
        ),
        # split points out of order: torchtitan's own check fails; dpguard keeps its even split
        (
            "pipeline_parallel_degree = 3\n"
            "pipeline_parallel_split_points = ['layers.80', 'layers.40']",
            None,
        ),
    ],
)
def test_torchtitan_pipeline_split_is_read_or_generated_per_stage(
    tmp_path: Path, parallelism: str, counts: list[int] | None
) -> None:
    text = f'[model]\nname = "llama3"\nflavor = "405B"\n[parallelism]\n{parallelism}\n'
    values = read(write(tmp_path, "job.toml", text), "torchtitan").values
    assert values.get("parallelism.stage_layers") == counts


def test_torchtitan_2024_configs_split_as_generate_split_points_did(tmp_path: Path) -> None:
    """torchtitan 9dec370 (the 2024 benchmarks): the first stage layers // stages, the next ones
    one more while the remainder lasts, the last the rest; no weight for embedding or output."""
    text = (
        '[model]\nname = "llama3"\nflavor = "405B"\n'
        "[experimental]\npipeline_parallel_degree = {pp}\n{extra}"
    )
    one = read(write(tmp_path, "a.toml", text.format(pp=8, extra="")), "torchtitan")
    assert one.values["parallelism.stage_layers"] == [15, *[16] * 6, 15]
    interleaved = "pipeline_parallel_schedule = 'Interleaved1F1B'\n"
    two = read(write(tmp_path, "b.toml", text.format(pp=8, extra=interleaved)), "torchtitan")
    assert two.values["parallelism.stage_layers"] == [7, *[8] * 14, 7]


@pytest.mark.parametrize(
    "tables, loss",
    [
        # [compile] components default to model and loss (config/job_config.py)
        ("[compile]\nenable = true\n", "fused"),
        ("[compile]\nenable = true\ncomponents = ['model']\n", "unfused"),
        ("[compile]\nenable = false\n", "unfused"),
        # from April 2025 [training] compile compiles the loss too (loss.py)
        ("[training]\ncompile = true\n", "fused"),
        # the Dec-2024 layout compiled the transformer blocks only
        ("[training]\ncompile = true\n[experimental]\npipeline_parallel_degree = 1\n", "unfused"),
        ("", "unfused"),
    ],
)
def test_torchtitan_loss_is_fused_when_torch_compile_compiles_it(
    tmp_path: Path, tables: str, loss: str
) -> None:
    text = '[model]\nname = "llama3"\nflavor = "8B"\n' + tables
    values = read(write(tmp_path, "job.toml", text), "torchtitan").values
    assert values["runtime.cross_entropy"] == loss


@pytest.mark.parametrize(
    "fmt, text, expected",
    [
        (
            "megatron",
            "torchrun pretrain_gpt.py --recompute-granularity full --recompute-method block "
            "--recompute-num-layers 5\n",
            {"recompute_method": "block", "recompute_num_layers": 5},
        ),
        # Megatron-Bridge's Llama 3 8B FP8 recipe on 8 H100 (perf_recipes/llama/h100)
        (
            "bridge",
            "model:\n  recompute_granularity: full\n  recompute_method: block\n"
            "  recompute_num_layers: 5\n",
            {"recompute_method": "block", "recompute_num_layers": 5},
        ),
        (
            "nemo",
            "model:\n  activations_checkpoint_granularity: full\n"
            "  activations_checkpoint_method: uniform\n  activations_checkpoint_num_layers: 2\n",
            {"recompute_method": "uniform", "recompute_num_layers": 2},
        ),
        # only with full granularity (X031): selective leaves them out
        (
            "megatron",
            "torchrun pretrain_gpt.py --recompute-granularity selective --recompute-method block "
            "--recompute-num-layers 5\n",
            {},
        ),
    ],
)
def test_full_recompute_method_and_layers_are_read(
    tmp_path: Path, fmt: str, text: str, expected: dict[str, object]
) -> None:
    keys = ("recompute_method", "recompute_num_layers")
    assert _training(tmp_path, fmt, text, keys) == expected


@pytest.mark.parametrize(
    "flags, impl",
    [
        ("--pipeline-model-parallel-size 12 --deepspeed --deepspeed_config ds.json", "deepspeed"),
        # Megatron-DeepSpeed without its pipeline engine, or with no pipeline at all
        ("--pipeline-model-parallel-size 12 --deepspeed --no-pipeline-parallel", None),
        ("--pipeline-model-parallel-size 1 --deepspeed", None),
        ("--pipeline-model-parallel-size 12", None),
    ],
)
def test_megatron_deepspeed_pipelines_with_deepspeed_s_engine(
    tmp_path: Path, flags: str, impl: str | None
) -> None:
    text = f"deepspeed pretrain_gpt.py --bf16 --num-layers 72 {flags}\n"
    values = read(write(tmp_path, "train.sh", text), "megatron").values
    assert values.get("runtime.pipeline_parallel_impl") == impl


@pytest.mark.parametrize(
    "flags, expected",
    [
        # deprecated --moe-layer-recompute: selective with the MoE layer among the modules
        (
            "--moe-layer-recompute",
            {"activation_recompute": "selective", "recompute_modules": ["core_attn", "moe"]},
        ),
        (
            "--recompute-granularity selective --recompute-modules mla_up_proj "
            "--moe-layer-recompute",
            {"activation_recompute": "selective", "recompute_modules": ["mla_up_proj", "moe"]},
        ),
        ("", {"activation_recompute": "none"}),
    ],
)
def test_moe_layer_recompute_adds_the_moe_module(
    tmp_path: Path, flags: str, expected: dict[str, object]
) -> None:
    text = f"torchrun pretrain_gpt.py --bf16 --num-experts 8 {flags}\n"
    keys = ("activation_recompute", "recompute_modules")
    assert _training(tmp_path, "megatron", text, keys) == expected


@pytest.mark.parametrize(
    "tables, expected",
    [
        # torchtitan's default: every 2nd block fully checkpointed; 16 of Llama 3 8B's 32
        (
            "",
            {
                "activation_recompute": "full",
                "recompute_method": "block",
                "recompute_num_layers": 16,
            },
        ),
        ('[activation_checkpoint]\nselective_ac_option = "1"\n', {"activation_recompute": "full"}),
        # per stage: 4 stages of 8 blocks, every 4th: 2 per stage
        (
            '[activation_checkpoint]\nselective_ac_option = "4"\n'
            "[parallelism]\npipeline_parallel_degree = 4\n",
            {
                "activation_recompute": "full",
                "recompute_method": "block",
                "recompute_num_layers": 2,
            },
        ),
        ('[activation_checkpoint]\nselective_ac_option = "64"\n', {"activation_recompute": "none"}),
        (
            '[activation_checkpoint]\nselective_ac_option = "op"\n',
            {"activation_recompute": "selective_op"},
        ),
    ],
)
def test_torchtitan_layer_interval_checkpointing_is_full_recompute_of_some_blocks(
    tmp_path: Path, tables: str, expected: dict[str, object]
) -> None:
    text = '[model]\nname = "llama3"\nflavor = "8B"\n' + tables
    keys = ("activation_recompute", "recompute_method", "recompute_num_layers")
    assert _training(tmp_path, "torchtitan", text, keys) == expected


# A Megatron-DeepSpeed launch in the style of BLOOM's (bigscience tr11-176B-ml.slurm): DeepSpeed's
# pipeline engine, bf16 at ZeRO 0, activation checkpointing, no flash flag, no SP, the
# 'type:transformer|embedding' partition and a padded vocabulary.
MEGATRON_DEEPSPEED = """\
TP_SIZE=4
PP_SIZE=12
GPT_ARGS=" --pp-partition-method 'type:transformer|embedding' --num-layers 70 \\
  --hidden-size 14336 --num-attention-heads 112 --seq-length 2048 --micro-batch-size 2 \\
  --global-batch-size 2048 --train-samples 220_000_000 --embed-layernorm --bf16 \\
  --checkpoint-activations --pad-vocab-size-to 250880"
ZERO_STAGE=0
DEEPSPEED_ARGS=" --deepspeed --deepspeed_config ds_config.json --zero-stage ${ZERO_STAGE} \\
  --deepspeed-activation-checkpointing"
CMD="pretrain_gpt.py --tensor-model-parallel-size $TP_SIZE \\
  --pipeline-model-parallel-size $PP_SIZE $GPT_ARGS $DEEPSPEED_ARGS"
python -u -m torch.distributed.run --nproc_per_node 8 --nnodes 48 $CMD
"""


def test_megatron_deepspeed_reads_as_its_frameworks_ran(tmp_path: Path) -> None:
    """What BLOOM's calibration manifest states by hand, read from the launch script: the
    pipeline engine's buffers, BF16_Optimizer (ZeRO-1 alike, bf16 gradients kept), full
    recompute, no FlashAttention, no sequence parallelism, the embedding-balanced split, the
    padded vocabulary and an underscored sample count; the memory is the manifest's."""
    values = read(write(tmp_path, "tr11.slurm", MEGATRON_DEEPSPEED), "megatron").values
    assert {k: v for k, v in values.items() if k.startswith(("training.", "runtime."))} == {
        "training.activation_recompute": "full",
        "training.framework": "deepspeed",
        "runtime.bf16_grads_kept": True,
        "runtime.flash_attention": False,
        "training.global_batch_size": 2048,
        "training.micro_batch_size": 2,
        "runtime.pipeline_parallel_impl": "deepspeed",
        "training.precision": "bf16",
        "training.sequence_parallel": False,
        "training.tokens": 220_000_000 * 2048,
        "training.zero_stage": 1,
    }
    assert values["model.vocab_size"] == 250880
    assert values["parallelism.account_for_embedding"] and values["parallelism.account_for_loss"]
    source = write(
        tmp_path,
        "bloom.yaml",
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: bloom}\n"
        "source: {path: tr11.slurm, format: megatron}\n"
        "cluster: {gpus: 384, accelerator: A100-80GB, interconnect: {inter_node_gbps_per_gpu: "
        "200}}\n",
    )
    calibration = Path(__file__).parent / "data" / "calibration" / "bloom-176b.yaml"
    policies = load_policies([])
    read_back = check_file(str(source), None, policies)
    by_hand = check_file(str(calibration), None, policies)
    assert read_back.outcome is not None and by_hand.outcome is not None
    facts = ("proposal.stage_memory_gb", "proposal.memory_low_gb", "proposal.memory_high_gb")
    # (the script's shape implies 176.25B parameters, the manifest declares the published 176.2B)
    assert [read_back.outcome.facts[f] for f in facts] == pytest.approx(
        [by_hand.outcome.facts[f] for f in facts], rel=1e-3
    )


@pytest.mark.parametrize(
    "flags, zero, kept",
    [
        ("--deepspeed --zero-stage 0", 1, True),  # BF16_Optimizer
        ("--deepspeed --zero-stage=1", 1, None),
        ("--deepspeed --zero-stage 2 --no-pipeline-parallel", 2, None),
        ("--zero-stage 1", 0, None),  # Megatron-LM ignores it: no distributed optimizer
    ],
)
def test_megatron_deepspeed_zero_stage_is_deepspeeds(
    tmp_path: Path, flags: str, zero: int, kept: bool | None
) -> None:
    text = f"torchrun pretrain_gpt.py --bf16 --pipeline-model-parallel-size 2 {flags}\n"
    values = read(write(tmp_path, "train.sh", text), "megatron").values
    assert (values["training.zero_stage"], values.get("runtime.bf16_grads_kept")) == (zero, kept)


@pytest.mark.parametrize(
    "flags, flash",
    [("--deepspeed", False), ("--deepspeed --use-flash-attn-v2", None), ("", None)],
)
def test_megatron_deepspeed_attention_keeps_its_scores_unless_a_flash_flag_says(
    tmp_path: Path, flags: str, flash: bool | None
) -> None:
    text = f"torchrun pretrain_gpt.py --bf16 --num-layers 24 {flags}\n"
    assert (
        read(write(tmp_path, "train.sh", text), "megatron").values.get("runtime.flash_attention")
        == flash
    )


@pytest.mark.parametrize(
    "mode, sp",
    [("\n  tp_mode: REDUCE_SCATTER", True), ("\n  tp_mode: ALL_REDUCE", False), ("", False)],
)
def test_nanotron_sequence_parallel_follows_tp_mode(tmp_path: Path, mode: str, sp: bool) -> None:
    """nanotron's tp_mode defaults to ALL_REDUCE, no sequence parallelism."""
    text = f"parallelism:\n  dp: 2\n  pp: 1\n  tp: 4{mode}\n"
    values = read(write(tmp_path, "config.yaml", text), "nanotron").values
    assert values["training.sequence_parallel"] is sp


def test_torchtitan_accumulates_local_batches_each_a_pipeline_schedule(tmp_path: Path) -> None:
    """torchtitan runs pp_schedule.step() once per local batch and accumulates gradients over
    global / (local x DP) of them (train.py): local batch 4, micro-batch 1 and global 1,024 on
    256 GPUs (TP 8, PP 4: DP 8) is M = 4 per schedule, 32 accumulation steps, not M = 128."""
    write(
        tmp_path,
        "job.toml",
        '[model]\nname = "llama3"\nflavor = "70B"\n[training]\nlocal_batch_size = 4\n'
        "global_batch_size = 1024\nseq_len = 8192\nsteps = 1000\n[parallelism]\n"
        "data_parallel_shard_degree = -1\ntensor_parallel_degree = 8\n"
        "pipeline_parallel_degree = 4\npipeline_parallel_microbatch_size = 1\n",
    )
    run = write(
        tmp_path,
        "run.yaml",
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: tt}\n"
        "source: {path: job.toml}\ncluster: {gpus: 256, accelerator: H100-SXM, "
        "interconnect: {inter_node_gbps_per_gpu: 400}}\n",
    )
    result = check_file(str(run), None, load_policies([]))
    m = result.manifest
    assert m is not None and m.parallelism is not None
    assert (m.data_parallel, m.parallelism.accumulation_steps, m.microbatches) == (8, 32, 4)
    assert result.outcome is not None
    assert abs(result.outcome.facts["proposal.bubble"] - 3 / 7) < 1e-9  # (P-1)/(M+P-1)
