"""Framework readers on the launch workflows users reported (docs/frameworks.md): a Megatron
script whose degrees its caller's environment sets (the MoE model zoo's `TP=2 PP=8 bash
script.sh`), prefix assignments, the Slurm header's GPU counts, CRLF line ends,
here-documents, Megatron-LM's launch-time refusal of a step batch schedule beside a constant
batch, and a broken nanotron YAML reached through a `source:` manifest. Fixtures:
tests/data/frameworks/workflow, written in the style of Megatron-LM's examples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.findings import Severity
from dpguard.frameworks import shell
from dpguard.frameworks.read import read
from dpguard.yamlevents import Position

HERE = Path(__file__).parent / "data" / "frameworks"
WORKFLOW = HERE / "workflow"
CLUSTER = "cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n"


def manifest(tmp_path: Path, source: str, extra: str = "", gpus: int | None = None) -> str:
    """run.yaml: `source: SOURCE` with what a launch script cannot say, and `extra`."""
    cluster = CLUSTER if gpus is None else CLUSTER.replace("{", f"{{gpus: {gpus}, ", 1)
    path = tmp_path / "run.yaml"
    path.write_text(
        "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: run}\n"
        f"source: {source}\n{cluster}{extra}",
        encoding="utf-8",
    )
    return str(path)


def copy(tmp_path: Path, name: str, text: str | None = None) -> str:
    path = tmp_path / name
    path.write_text(text if text is not None else (WORKFLOW / name).read_text("utf-8"), "utf-8")
    return str(path)


# -- 1. the caller's environment ------------------------------------------------------------------

MIXTRAL = "train_mixtral_caller_env.sh"


def test_a_degree_the_caller_sets_is_noted_and_never_defaulted(tmp_path: Path) -> None:
    """`--tensor-model-parallel-size ${TP}` with TP never assigned: not Megatron's default 1
    but an F002 saying the caller's environment sets it, and an F003 until a manifest does."""
    extract = read(copy(tmp_path, MIXTRAL), "megatron")
    assert "parallelism.tensor" not in extract.values
    assert "parallelism.pipeline" not in extract.values
    assert extract.values["parallelism.expert"] == 8  # ${EP:-8}: what runs when EP is unset
    assert extract.values["cluster.gpus"] == 8  # 8 per node x ${NNODES:-1}
    notes = {n.origin.position.line: n for n in extract.notes if n.code == "F002"}
    assert "$TP, which the caller's environment sets: the script does not assign TP" in (
        notes[54].message
    )
    assert "$PP, which the caller's environment sets" in notes[55].message
    alone = check_file(str(tmp_path / MIXTRAL))
    unread = [(f.code, f.line) for f in alone.findings if f.message.startswith("parallelism.")]
    assert unread == [("F003", 54), ("F003", 55)]


def test_a_manifest_supplies_the_caller_s_environment_without_a_conflict(tmp_path: Path) -> None:
    """The manifest's degrees, nodes and batch are the caller's `TP=1 PP=4 EP=4 NNODES=4
    GBS=512`: no F004 against `${EP:-8}`, `${NNODES:-1}` or `${GBS:-256}` (defaults a caller
    overrides), the script read again with them (the schedule follows PP, the tokens the
    batch), each value placed in the manifest, and an info note at the script's line."""
    copy(tmp_path, MIXTRAL)
    run = manifest(
        tmp_path,
        f"{{path: {MIXTRAL}, format: megatron}}",
        "parallelism: {tensor: 1, pipeline: 4, expert: 4}\ntraining: {global_batch_size: 512}\n",
        gpus=32,
    )
    result = check_file(run)
    assert not [f for f in result.findings if f.code in ("F003", "F004")]
    assert result.manifest is not None
    assert (result.manifest.parallelism.tensor, result.manifest.parallelism.pipeline) == (1, 4)
    assert result.manifest.parallelism.expert == 4
    assert result.manifest.parallelism.schedule == "1f1b"  # from PP 4, as Megatron runs it
    assert result.manifest.cluster.gpus == 32  # NNODES=4 x 8 per node
    assert result.manifest.training.global_batch_size == 512
    assert result.manifest.training.tokens == 500_000 * 512 * 4096  # with the caller's GBS
    notes = sorted(
        (f.line, f.message) for f in result.findings if f.code == "F002" and f.path.endswith(".sh")
    )
    assert [line for line, _ in notes] == [9, 11, 54, 55, 56]
    assert all(f.severity == Severity.INFO for f in result.findings if f.code == "F002")
    by_line = dict(notes)
    assert by_line[9] == (
        "$NNODES comes from the caller's environment: read with NNODES=4, which gives "
        "cluster.gpus 32 as run.yaml says (the script's default, 1, holds only while the "
        "caller leaves NNODES unset)"
    )
    assert by_line[54].endswith(
        "parallelism.tensor 1 as run.yaml says (the script does not assign TP)"
    )


def test_a_script_reviewed_alone_takes_its_manifest_s_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hook's case: a commit changes only the script; it is judged as the manifest that
    sources it, whose TP 8 overrides the script's `TP=${TP:-4}` (Megatron-LM examples' style)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "configs").mkdir()
    shutil.copy(HERE / "megatron_llama3_70b.sh", tmp_path / "configs" / "pretrain.sh")
    (tmp_path / "jobs").mkdir()
    manifest(tmp_path / "jobs", "{path: ../configs/pretrain.sh}", "parallelism: {tensor: 8}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["review", "--format", "json", "configs/pretrain.sh"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["files"]
    assert entry["path"] == "jobs/run.yaml"
    assert entry["manifest"]["parallelism"]["tensor"] == 8
    (note,) = [f for f in entry["findings"] if f["code"] == "F002"]
    assert (note["path"], note["line"], note["severity"]) == ("configs/pretrain.sh", 9, "info")
    assert note["message"].endswith(
        "(the script's default, 4, holds only while the caller leaves TP unset)"
    )


def test_what_the_script_fixes_still_conflicts(tmp_path: Path) -> None:
    """Only what the caller's environment can change gives way: a layer count the script
    writes, or a GPU count no NNODES gives (36 is no multiple of 8 per node), is an F004."""
    copy(tmp_path, MIXTRAL)
    run = manifest(
        tmp_path,
        f"{{path: {MIXTRAL}}}",
        "parallelism: {tensor: 2, pipeline: 4}\nmodel: {layers: 48}\n",
        gpus=36,
    )
    conflicts = [f.message.split(" here")[0] for f in check_file(run).findings if f.code == "F004"]
    assert conflicts == ["cluster.gpus is 36", "model.layers is 48"]


def test_prefix_assignments_are_the_command_s_environment_only() -> None:
    """`TP=2 PP=8 bash train.sh` (the model zoo's call) sets TP and PP for train.sh, not for
    the rest of the script, and `TP=2 torchrun ... ${TP:-1}` passes 1: bash expands the
    command's own words before it applies the assignments."""
    script = shell.parse(
        "TP=4\n"
        "TP=2 PP=8 EP=8 bash train.sh\n"
        "A=1 B=$A env\n"
        "TP=2 torchrun pretrain_gpt.py --tensor-model-parallel-size ${TP:-1} "
        "--pipeline-model-parallel-size ${PP:-1}\n"
    )
    call, env, train = script.commands
    assert [w.text for w in call.words] == ["bash", "train.sh"]
    assert [(name, w.text) for name, w in call.environment] == [
        ("TP", "2"),
        ("PP", "8"),
        ("EP", "8"),
    ]
    assert [(name, w.text) for name, w in env.environment] == [("A", "1"), ("B", "1")]
    assert [w.text for w in train.words][-3:] == ["4", "--pipeline-model-parallel-size", "1"]
    assert {name: [w.text for w in words] for name, words in script.variables.items()} == {
        "TP": ["4"]
    }
    # PP's default is the caller's to override; TP the script assigns
    assert list(script.from_caller.values()) == [("PP", "1")]


# -- 2. the Slurm header --------------------------------------------------------------------------


def test_the_slurm_header_gives_the_gpus_per_node(tmp_path: Path) -> None:
    """`--nproc_per_node $SLURM_GPUS_ON_NODE --nnodes $SLURM_NNODES`: the scheduler's values,
    which the header sets (`--nodes=2` beside another option, `--gpus-per-node=h100:8`)."""
    extract = read(copy(tmp_path, "sbatch_llama3_8b.sh"), "megatron")
    assert (extract.values["cluster.gpus_per_node"], extract.values["cluster.gpus"]) == (8, 16)
    assert extract.origins["cluster.gpus_per_node"].position == Position(4, 30)
    assert extract.origins["cluster.gpus"].position == Position(3, 17)
    assert not [n for n in extract.notes if "GPU count" in n.message]


@pytest.mark.parametrize(
    "directive, launcher, gpus",
    [
        ("#SBATCH --gres=gpu:8", "torchrun --nproc_per_node $SLURM_GPUS_ON_NODE", 16),
        ("#SBATCH --gres=gpu:h100:8,nvme:1", "torchrun --nproc_per_node $SLURM_GPUS_ON_NODE", 16),
        # srun starts each rank as a task: the tasks per node are its GPUs
        ("#SBATCH --ntasks-per-node=8", "srun --mpi=pmix python", 16),
        # one torchrun per node starts the ranks: a task is not a GPU
        ("#SBATCH --ntasks-per-node=1", "torchrun --nproc_per_node $SLURM_GPUS_ON_NODE", None),
    ],
)
def test_slurm_gpu_directives(
    tmp_path: Path, directive: str, launcher: str, gpus: int | None
) -> None:
    text = (
        f"#!/bin/bash\n#SBATCH -N 2\n{directive}\n\n"
        f"{launcher} pretrain_gpt.py --num-layers 32 --tensor-model-parallel-size 2\n"
    )
    extract = read(copy(tmp_path, "job.sh", text), "megatron")
    assert extract.values.get("cluster.gpus") == gpus
    if gpus is None:
        (note,) = [n for n in extract.notes if "GPU count" in n.message]
        assert "$SLURM_GPUS_ON_NODE, which the job scheduler sets" in note.message


# -- 3. CRLF line ends ----------------------------------------------------------------------------


def test_a_crlf_script_reads_as_its_lf_original(tmp_path: Path) -> None:
    """A Windows checkout of a real launch script: flags in arrays and continued with a
    backslash before CR-LF read as in the LF file, at the same lines and columns."""
    lf = (HERE / "megatron_llama3_70b.sh").read_text("utf-8")
    crlf = tmp_path / "crlf.sh"
    crlf.write_bytes(lf.replace("\n", "\r\n").encode("utf-8"))
    assert b"\\\r\n" in crlf.read_bytes()
    expected, got = read(copy(tmp_path, "lf.sh", lf), "megatron"), read(str(crlf), "megatron")
    assert dict(got.values) == dict(expected.values)
    assert {k: o.position for k, o in got.origins.items()} == {
        k: o.position for k, o in expected.origins.items()
    }
    assert [(n.code, n.origin.position, n.message) for n in got.notes] == [
        (n.code, n.origin.position, n.message) for n in expected.notes
    ]
    assert got.values["training.global_batch_size"] == 1024  # from the continued lines


# -- 4. here-documents ----------------------------------------------------------------------------


def test_here_document_bodies_are_data_not_shell(tmp_path: Path) -> None:
    """`<<EOF` with an apostrophe in its body, `<<'JSON'` (a quoted delimiter), `<<-EOF`
    (tab-indented): the bodies are skipped, the training command after them is read."""
    extract = read(copy(tmp_path, "pretrain_gpt_heredoc.sh"), "megatron")
    assert extract.values["model.layers"] == 24
    assert extract.values["parallelism.tensor"] == 2
    assert extract.values["cluster.gpus"] == 8
    assert extract.origins["model.layers"].position == Position(21, 18)  # lines still counted
    assert not extract.notes


@pytest.mark.parametrize(
    "heredoc",
    [
        "cat <<EOF > cfg.txt\nit's here\nEOF\n",
        "cat <<'EOF'\nit's $(here\nEOF\n",
        'cat <<"EOF" | tee a.txt\n"unbalanced\nEOF\n',
        "cat <<-EOF\n\tit's here\n\tEOF\n",
        "cat <<A <<B\nit's A\nA\nthen B\nB\n",
        'read -r x <<< "it\'s a here-string"\n',
        "(( MASK = 1 << 3 ))\n",  # a shift in an arithmetic command, not a here-document
    ],
)
def test_here_documents_in_any_spelling(heredoc: str) -> None:
    script = shell.parse(heredoc + "pretrain_gpt.py --num-layers 4\n")
    assert [w.text for w in script.commands[-1].words] == ["pretrain_gpt.py", "--num-layers", "4"]


def test_a_here_document_without_its_delimiter_runs_to_the_end() -> None:
    script = shell.parse("pretrain_gpt.py --num-layers 4\ncat <<EOF\nit's never closed\n")
    assert [w.text for w in script.commands[0].words][-1] == "4"


# -- 5. Megatron-LM's launch-time refusal ---------------------------------------------------------


def test_a_step_batch_schedule_beside_a_constant_batch_fails_at_launch(tmp_path: Path) -> None:
    """Megatron-LM's validate_args raises 'Cannot specify both --step-batch-size-schedule and
    --global-batch-size' (megatron/training/arguments.py): an F001 error at the schedule."""
    path = copy(tmp_path, "pretrain_gpt_batch_schedule.sh")
    (error,) = [f for f in check_file(path).findings if f.code == "F001"]
    assert (error.severity, error.line, error.col) == (Severity.ERROR, 18, 33)
    assert "'Cannot specify both --step-batch-size-schedule and --global-batch-size'" in (
        error.message
    )


def test_a_step_batch_schedule_alone_leaves_the_batch_to_judge_to_a_manifest(
    tmp_path: Path,
) -> None:
    text = (WORKFLOW / "pretrain_gpt_batch_schedule.sh").read_text("utf-8")
    alone = copy(tmp_path, "alone.sh", text.replace("    --global-batch-size 1024\n", ""))
    findings = check_file(alone).findings
    assert not [f for f in findings if f.code == "F001"]
    (missing,) = [f for f in findings if f.message.startswith("training.global_batch_size")]
    assert (missing.code, missing.line) == ("F003", 18)  # not "add it to the script"
    decrease = text.replace("--global-batch-size 1024", "--decrease-batch-size-if-needed")
    (error,) = [
        f for f in check_file(copy(tmp_path, "d.sh", decrease)).findings if f.code == "F001"
    ]
    assert "--decrease-batch-size-if-needed" in error.message


def test_the_model_zoo_yaml_gets_the_same_launch_check(tmp_path: Path) -> None:
    path = copy(
        tmp_path,
        "flags.yaml",
        "MODEL_ARGS:\n  --num-layers: 24\n  --micro-batch-size: 1\n"
        "  --step-batch-size-schedule: '0:256 1B:512'\n  --global-batch-size: ${GBS}\n",
    )
    (error,) = [n for n in read(path, "megatron").notes if n.code == "F001"]
    assert error.origin.position.line == 4


# -- 6. a broken nanotron YAML through a `source:` manifest ---------------------------------------


@pytest.mark.parametrize("source", ["{path: cfg.yaml, format: nanotron}", "{path: cfg.yaml}"])
def test_a_broken_nanotron_yaml_is_reported_at_its_line(tmp_path: Path, source: str) -> None:
    shutil.copy(WORKFLOW / "nanotron_duplicate_key.yaml", tmp_path / "cfg.yaml")
    (finding,) = check_file(manifest(tmp_path, source)).findings
    assert (finding.path, finding.line, finding.col) == (str(tmp_path / "cfg.yaml"), 21, 3)
    assert (finding.code, finding.message) == (
        "Y005",
        "duplicate key 'tp' (first defined at line 18)",
    )


def test_a_file_that_is_not_yaml_is_still_named_unrecognised(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("it's: [not\n", "utf-8")
    (finding,) = check_file(manifest(tmp_path, "{path: notes.txt}")).findings
    assert finding.code == "F005" and "not a framework config" in finding.message


def test_the_hook_reports_a_broken_config_a_manifest_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A commit that changes only the broken config: the hook passes just that file, which its
    selection cannot load; a manifest sources it, so it is judged (as that manifest) and fails.
    A broken YAML no manifest sources stays none of dpguard's business."""
    (tmp_path / ".git").mkdir()
    shutil.copy(WORKFLOW / "nanotron_duplicate_key.yaml", tmp_path / "cfg.yaml")
    manifest(tmp_path, "{path: cfg.yaml}")
    shutil.copy(WORKFLOW / "nanotron_duplicate_key.yaml", tmp_path / "other.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["review", "--only-manifests", "--quiet", "cfg.yaml"]) == 1
    out = capsys.readouterr().out
    assert "cfg.yaml:21:3: error Y005 duplicate key 'tp' (first defined at line 18)" in out
    assert main(["review", "--only-manifests", "--quiet", "other.yaml"]) == 0
    assert "0 manifests checked" in capsys.readouterr().out
