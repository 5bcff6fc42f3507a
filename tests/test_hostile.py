"""Hostile input: every attack that once crashed or hung a reader, reviewed as a pull request
would bring it. Each file in tests/hostile/ is one attack class (the large ones are generated
here, in GENERATED); each is reviewed in a scratch repository (a directory with an empty
``.git``) and must give exactly its finding (the limit named, at its line), never D001 (an
internal error), never an exception, never a hang; a path that leads outside the repository is
refused with a message that says nothing about the target (its content, existence or kind).
And one bad file never loses the batch: the hostile files reviewed among 50 valid manifests in
one call leave every valid one judged and the report written.
"""

from __future__ import annotations

import json
import os
import shutil
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from decimal import InvalidOperation
from pathlib import Path
from typing import Any

import pytest
from hang_watch import no_hang

from dpguard.check import check_file
from dpguard.cli import main
from dpguard.frameworks.read import read
from dpguard.yamlsource import load_text

HERE = Path(__file__).resolve().parent
HOSTILE = HERE / "hostile"
VALID = (HERE.parent / "examples" / "small-dense.yaml").read_text(encoding="utf-8")
# planted in every file outside the repository: it must appear in no output
TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
CONFIG_CASE = "dpguard_config_outside.yaml"  # installed as .dpguard.yaml by its own test


# -- the corpus -----------------------------------------------------------------------------

SCRIPT_HEAD = "#!/bin/bash\n# hostile: {what}\nGPUS_PER_NODE=8\nNNODES=2\n"
COMMAND = (
    "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\\n"
    "    --num-layers {layers} --hidden-size {hidden} --num-attention-heads 32 \\\n"
    "    --seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000 \\\n"
    "    --micro-batch-size 1 --global-batch-size 128 --train-iters 100000 --bf16 \\\n"
    "    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2\n"
)


def _script(what: str, body: str = "", layers: str = "32", hidden: str = "4096") -> str:
    return SCRIPT_HEAD.format(what=what) + body + COMMAND.format(layers=layers, hidden=hidden)


def _toml(line: str) -> str:
    return f"# hostile\n[training]\n{line}\nsteps = 10\n"


# Too large to commit (or unreadable as text): written into the scratch repository.
GENERATED: dict[str, Callable[[], str]] = {
    # line 6: the --num-layers value, 5,000 digits (int() of it is quadratic; 4,300 refused)
    "megatron_long_number.sh": lambda: _script("5,000 digits", layers="7" * 5000),
    # line 5: 400 nested defaults (recursion)
    "megatron_nested_expansion.sh": lambda: _script(
        "400 nested ${a:-...}", "L=" + "${a:-" * 400 + "1" + "}" * 400 + "\n", hidden="$L"
    ),
    # line 5: a 1,000-term arithmetic expression
    "megatron_long_arithmetic.sh": lambda: _script(
        "a 1,000-term $((...))", "L=$((" + "+".join(["1"] * 1000) + "))\n", hidden="$L"
    ),
    # 25,000 defaults: each expansion once (was quadratic)
    "megatron_25000_lines.sh": lambda: _script("25,000 lines", "X=${a:-1}\n" * 25_000),
    # line 3: one dotted key of 13,000 parts (tomllib: one table per prefix, gigabytes)
    "torchtitan_dotted_key.toml": lambda: _toml(".".join(["a"] * 13_000) + ".b = 1"),
    # line 3: arrays nested 3,000 deep (tomllib recurses per level)
    "torchtitan_nesting.toml": lambda: _toml("x = [" + "[" * 3000 + "]" * 3000 + "]"),
    # line 4: 5,000 levels: past libyaml's own 1,000 the pure-Python parser finds the place
    "yaml_deep_nesting.yaml": lambda: (
        "# hostile: 5,000 levels\napiVersion: dpguard/v1\nkind: TrainingManifest\n"
        "metadata: " + "[" * 5000 + "]" * 5000 + "\n"
    ),
    # line 4: a number of 5,000 digits
    "yaml_long_number.yaml": lambda: (
        "# hostile: a number of 5,000 digits\napiVersion: dpguard/v1\nkind: TrainingManifest\n"
        "metadata: {name: " + "9" * 5000 + "}\n"
    ),
}


@dataclass(frozen=True)
class Case:
    name: str  # the file, in tests/hostile/ or GENERATED
    code: str | None  # the finding it must give; None: no error at all
    says: tuple[str, ...] = ()  # what findings of that code say (the limit, the key)
    line: int | None = None  # the line of the finding
    alone: bool = True  # that finding is the file's only one


OUTSIDE = "leads outside the repository"
CASES = (
    # the escaped key is read (no F003 for it: test_an_escaped_json_key_is_read)
    Case("deepspeed_escaped_key.json", "F003", ("cluster.gpus",), alone=False),
    Case("nanotron_tokens_true.yaml", "F003", ("model.seq_len", "global_batch_size"), alone=False),
    Case("nanotron_model_scalar.yaml", "F003", ("model.layers", "model.hidden_size"), alone=False),
    Case("flagscale_defaults_true.yaml", "F003", ("model.layers",), alone=False),
    Case("flagscale_defaults_outside.yaml", "F005", (OUTSIDE, "defaults: train"), 4),
    Case("megatron_superscript.sh", "F003", ("cluster.gpus is not in",)),
    Case("megatron_long_number.sh", "F001", ("--num-layers has 5000 digits: the limit is 30",), 6),
    Case("megatron_nested_expansion.sh", "F001", ("nested deeper than 16 levels",), 5),
    Case("megatron_long_arithmetic.sh", "F001", ("longer than 256 characters",), 5),
    # the expansions pass 1,000,000 at the 19th doubling (2 + 4 + ... + 2^19 > 10^6)
    Case("megatron_doubling.sh", "F001", ("more than 1,000,000 characters",), 5 + 19),
    Case("megatron_25000_lines.sh", None, alone=False),
    # a note, not an error, and no 300-million-entry list (test_no_pattern_is_unrolled)
    Case("megatron_moe_layer_freq.sh", "F002", ("--moe-layer-freq",), 10, alone=False),
    # FW012 is anchored at the PP value (line 9) that the layout must divide by
    Case("megatron_layout.sh", "FW012", ("not in Megatron's grammar",), 9, alone=False),
    Case("torchtitan_dotted_key.toml", "F001", ("dotted key of more than 32 parts",), 3),
    Case("torchtitan_nesting.toml", "F001", ("nesting deeper than 32 levels",), 3),
    Case("manifest_source_absolute.yaml", "F005", (OUTSIDE,), 5),
    Case("manifest_source_parent.yaml", "F005", (OUTSIDE,), 5),
    Case("manifest_source_link.yaml", "F005", (OUTSIDE,), 5),
    Case("manifest_source_fifo.yaml", "F005", ("not a regular file",), 5),
    Case("manifest_source_nul.yaml", "F005", ("NUL character",), 5),
    Case("yaml_long_number.yaml", "Y011", ("too many digits (the limit is 30)",), 4),
    Case("yaml_long_key.yaml", "Y013", ("a key of 300 characters: the limit is 256",), 3),
    Case("deepspeed_long_key.json", "F001", ("a key of 300 characters: the limit is 256",), 3),
    Case("deepspeed_long_number.json", "F001", ("a number of 50 digits: the limit is 30",), 2),
    Case("yaml_alias_bomb.yaml", "Y007", ("more than 10000 values",)),
    Case("yaml_python_tag.yaml", "Y006", ("!!python/object/apply:os.system", "not allowed"), 4),
    Case("yaml_nesting.yaml", "Y008", ("nesting deeper than 32 levels",), 4),
    Case("yaml_deep_nesting.yaml", "Y008", ("nesting deeper than 32 levels",), 4),
)
BY_NAME = {c.name: c for c in CASES}


def test_every_corpus_file_has_a_case() -> None:
    committed = {p.name for p in HOSTILE.iterdir()} - {CONFIG_CASE}
    assert committed | set(GENERATED) == {c.name for c in CASES}
    assert not committed & set(GENERATED)


CLUSTER = "cluster: {accelerator: H100-SXM, interconnect: {inter_node_gbps_per_gpu: 400}}\n"


def build(repo: Path) -> Path:
    """The corpus in `repo` (a repository: `.git`), with what the attacks point at: a file
    outside holding TOKEN, a committed link to it, a FIFO, and .dpguard.yaml defaults for
    what a launch script cannot say (so a script's only errors are its attack's)."""
    (repo / ".git").mkdir(parents=True)
    for path in HOSTILE.iterdir():
        if path.name != CONFIG_CASE:
            shutil.copyfile(path, repo / path.name)
    for name, make in GENERATED.items():
        (repo / name).write_text(make(), encoding="utf-8")
    (repo / ".dpguard.yaml").write_text(
        'defaults:\n  - files: "*.sh"\n    manifest:\n      ' + CLUSTER, encoding="utf-8"
    )
    outside = repo.parent / "outside.sh"  # ../outside.sh from the repository
    outside.write_text(
        f"#!/bin/bash\n# {TOKEN}\ntorchrun pretrain_gpt.py --num-layers 4\n", encoding="utf-8"
    )
    os.symlink(outside, repo / "link.sh")
    os.mkfifo(repo / "fifo.sh")
    valid = repo / "valid"
    valid.mkdir()
    for i in range(50):
        (valid / f"copy{i:02}.yaml").write_text(VALID, encoding="utf-8")
    return repo


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("hostile") / "repo")


@dataclass(frozen=True)
class Review:
    code: int
    report: dict[str, Any]
    output: str  # stdout and stderr of the JSON and the -q run, together


def review(
    repo: Path, names: list[str], capsys: pytest.CaptureFixture[str], quiet: bool = True
) -> Review:
    """`review --format json -o FILE` (and `review -q`) over `names`, from inside `repo`."""
    out = repo.parent / "report.json"
    out.unlink(missing_ok=True)
    here = os.getcwd()
    os.chdir(repo)
    try:
        with no_hang():
            code = main(["review", "--format", "json", "-o", str(out), *names])
            if quiet:
                assert main(["review", "-q", *names]) == code
    finally:
        os.chdir(here)
    captured = capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    return Review(code, json.loads(text), captured.out + captured.err + text)


def assert_safe(output: str) -> None:
    assert "D001" not in output
    assert "D002" not in output  # review's per-file time budget ran out
    assert "internal error" not in output
    assert "Traceback" not in output
    assert TOKEN not in output
    assert "root:" not in output  # nothing of /etc/passwd


def assert_case(case: Case, entry: dict[str, Any]) -> None:
    findings = entry["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    if case.code is None:
        assert errors == [], errors
        return
    mine = [f for f in findings if f["code"] == case.code]
    assert mine, findings
    for fragment in case.says:
        assert any(fragment in f["message"] for f in mine), (fragment, mine)
    if case.line is not None:
        assert any(f["line"] == case.line for f in mine), mine
    if case.alone:
        assert len(findings) == 1, findings
    assert {f["code"] for f in errors} <= {case.code}, errors


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_attack_gives_its_finding(
    corpus: Path, capsys: pytest.CaptureFixture[str], case: Case
) -> None:
    done = review(corpus, [case.name], capsys)
    fails = case.code is not None and case.code != "F002"  # F002 here is a note
    assert done.code == (1 if fails else 0)
    [entry] = done.report["files"]
    assert entry["path"] == case.name
    assert_case(case, entry)
    assert_safe(done.output)
    if case.line is not None and fails:
        assert f"{case.name}:{case.line}:" in done.output  # the -q line, at its position


def test_the_long_number_finding_names_the_limit(corpus: Path) -> None:
    [finding] = check_file(str(corpus / "yaml_long_number.yaml")).findings
    assert finding.code == "Y011"
    assert "30" in finding.message


def test_a_toml_number_of_5000_digits_is_a_finding(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    path = tmp_path / "titan.toml"
    path.write_text(_toml("x = " + "9" * 5000), encoding="utf-8")
    [finding] = check_file(str(path)).findings
    assert (finding.code, finding.line) == ("F001", 3)
    assert "30" in finding.message or "4300" in finding.message


def test_an_escaped_json_key_is_read(corpus: Path) -> None:
    path = corpus / "deepspeed_escaped_key.json"
    extract = read(str(path), "deepspeed", path.read_text(encoding="utf-8"))
    assert extract.values["training.global_batch_size"] == 8
    assert extract.values["training.micro_batch_size"] == 1
    assert extract.values["training.zero_stage"] == 1
    assert tuple(extract.origins["training.global_batch_size"].position) == (2, 3)
    assert extract.origins["training.zero_stage"].position[0] == 4
    said = " ".join(f.message for f in check_file(str(path)).findings)
    assert "global_batch_size" not in said and "micro_batch_size" not in said


@pytest.mark.parametrize("name", ["megatron_moe_layer_freq.sh", "megatron_layout.sh"])
def test_no_pattern_is_unrolled(corpus: Path, name: str) -> None:
    """A 40-byte pattern once asked for gigabytes: reading it stays small (tracemalloc peak)."""
    tracemalloc.start()
    try:
        with no_hang():
            result = check_file(str(corpus / name), defaults=(load_text(CLUSTER, "d"),))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak:,} bytes"
    assert result.manifest is not None  # judged, not refused: the pattern is only not modelled
    assert "D001" not in {f.code for f in result.findings}


def test_a_fifo_on_the_command_line_is_unreadable_not_a_hang(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = review(corpus, ["fifo.sh", "manifest_source_fifo.yaml"], capsys)
    assert done.code == 2
    assert done.report["unreadable"] == [
        {"path": "fifo.sh", "message": "fifo.sh: not a regular file (a device, FIFO or socket)"}
    ]
    [entry] = done.report["files"]
    assert_case(BY_NAME["manifest_source_fifo.yaml"], entry)
    assert_safe(done.output)


@pytest.mark.parametrize("unreadable", [False, True], ids=["hostile", "hostile+fifo"])
def test_one_bad_file_never_loses_the_batch(
    corpus: Path, capsys: pytest.CaptureFixture[str], unreadable: bool
) -> None:
    valid = sorted(f"valid/{p.name}" for p in (corpus / "valid").iterdir())
    hostile = [c.name for c in CASES]
    names = [*valid[:25], *hostile, *(["fifo.sh"] if unreadable else []), *valid[25:]]
    done = review(corpus, names, capsys, quiet=False)
    assert done.code == (2 if unreadable else 1)
    files = {f["path"]: f for f in done.report["files"]}
    assert sorted(files) == sorted([*valid, *hostile])
    for name in valid:
        assert [f for f in files[name]["findings"] if f["severity"] == "error"] == []
        assert files[name]["valid"] is True
    for case in CASES:
        assert_case(case, files[case.name])
    assert [u["path"] for u in done.report["unreadable"]] == (["fifo.sh"] if unreadable else [])
    assert_safe(done.output)


# A manifest whose `source:` config is read, with a section or a value of the wrong type where
# the config also sets it: composition crashed (found by tests/test_reader_fuzz.py).
COMPOSED = "apiVersion: dpguard/v1\nkind: TrainingManifest\nsource: {path: run.sh}\n"
COMPOSE_CRASHES: dict[str, tuple[type[Exception], str]] = {
    # compose.compose: data.setdefault("metadata", {}) gives None / the string: no .setdefault
    "metadata: null": (
        AttributeError,
        "AttributeError: 'NoneType' object has no attribute 'setdefault'",
    ),
    "metadata: x": (AttributeError, "AttributeError: 'str' object has no attribute 'setdefault'"),
    # compose._same -> manifest.parse_quantity(None) / ([1]): Decimal('None') raises
    # decimal.InvalidOperation, which _same does not catch (only ValueError, TypeError)
    "cluster: {gpus: null}": (
        InvalidOperation,
        "decimal.InvalidOperation from manifest.parse_quantity",
    ),
    "training: {tokens: [1]}": (
        InvalidOperation,
        "decimal.InvalidOperation from manifest.parse_quantity",
    ),
    # compose.compose's put: the config's value (16 GPUs) stands where the manifest has a
    # mapping, then the manifest's leaf beneath it (cluster.gpus.a) is put into the int
    "cluster: {gpus: {a: 1}}": (
        TypeError,
        "TypeError: 'int' object does not support item assignment",
    ),
    "cluster: {gpus: {a: {b: 1}}}": (
        AttributeError,
        "AttributeError: 'int' object has no attribute 'setdefault'",
    ),
}


@pytest.mark.parametrize(
    "line",
    [pytest.param(line, id=crash) for line, (_error, crash) in COMPOSE_CRASHES.items()],
)
def test_a_wrong_type_beside_a_source_config_is_a_finding(tmp_path: Path, line: str) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "run.sh").write_text(_script("none"), encoding="utf-8")
    path = tmp_path / "m.yaml"
    path.write_text(COMPOSED + line + "\n", encoding="utf-8")
    result = check_file(str(path))  # each crashed composition before (review's D001)
    assert any(f.severity.name == "ERROR" for f in result.findings)


# -- confinement: the message is the same whatever lies outside -------------------------------

MANIFEST = "apiVersion: dpguard/v1\nkind: TrainingManifest\nmetadata: {name: m}\n"
POINTERS = {
    # the pointing file in the repository, and the file outside it points at
    "absolute": ("m.yaml", MANIFEST + "source: {path: %(outside)s/target.sh}\n"),
    "parent": ("m.yaml", MANIFEST + "source: {path: ../target.sh}\n"),
    "link": ("m.yaml", MANIFEST + "source: {path: link.sh}\n"),
    "flagscale": (
        "exp.yaml",
        "defaults:\n  - train: ../../target\n"
        "experiment:\n  runner: {nnodes: 1, nproc_per_node: 8}\n",
    ),
    "policies": (".dpguard.yaml", "policies:\n  - ../target.yaml\n"),
    "waivers": (".dpguard.yaml", "waivers: ../target.yaml\n"),
}
STATES = ("file", "missing", "directory", "fifo", "unreadable")


def _plant(target: Path, state: str) -> None:
    if state in ("file", "unreadable"):
        target.write_text(f"# {TOKEN}\ntorchrun pretrain_gpt.py --num-layers 4\n", "utf-8")
        if state == "unreadable":
            target.chmod(0)
    elif state == "directory":
        target.mkdir()
        (target / "x").write_text(TOKEN, encoding="utf-8")
    elif state == "fifo":
        os.mkfifo(target)


def _refused_output(top: Path, outside: Path, pointer: str, state: str) -> tuple[int, str]:
    """Review the file `pointer` names in a fresh repository under `top`, its target outside
    in `state`: the exit code and the output (paths under `top` written as <top>)."""
    name, text = POINTERS[pointer]
    repo = top / "repo"
    (repo / ".git").mkdir(parents=True)
    shutil.rmtree(outside, ignore_errors=True)  # the same path for every state
    outside.mkdir()
    suffix = ".yaml" if pointer in ("flagscale", "policies", "waivers") else ".sh"
    target = outside / f"target{suffix}"
    _plant(target, state)
    if pointer == "flagscale":  # train/<name>.yaml beside the experiment file
        body = text.replace("../../", os.path.relpath(outside, repo / "train") + "/")
    else:
        body = text.replace("../", os.path.relpath(outside, repo) + "/") % {"outside": outside}
    (repo / name).write_text(body, encoding="utf-8")
    if pointer == "link":
        os.symlink(target, repo / "link.sh")
    reviewed = name
    if name == ".dpguard.yaml":
        reviewed = "m.yaml"
        (repo / reviewed).write_text(VALID, encoding="utf-8")
    here = os.getcwd()
    os.chdir(repo)
    try:
        with no_hang():
            code = main(["review", "--format", "json", reviewed])
    finally:
        os.chdir(here)
        if state == "unreadable":
            target.chmod(0o600)
    return code, str(top)


@pytest.mark.parametrize("pointer", POINTERS)
def test_outside_is_refused_alike_whatever_is_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pointer: str
) -> None:
    """Whether the target outside exists, and what it is, is not told: each state gives the
    same output, byte for byte (the scratch directory's own name aside), and none shows the
    content."""
    seen: dict[str, tuple[int, str]] = {}
    for state in STATES:
        code, top = _refused_output(tmp_path / state, tmp_path / "outside", pointer, state)
        captured = capsys.readouterr()
        output = captured.out + captured.err
        assert OUTSIDE in output, output
        assert_safe(output)
        seen[state] = (code, output.replace(top, "<top>"))
    assert len(set(seen.values())) == 1, seen
    assert seen["file"][0] == (2 if POINTERS[pointer][0] == ".dpguard.yaml" else 1)


def test_a_config_whose_policies_lead_outside_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    shutil.copyfile(HOSTILE / CONFIG_CASE, repo / ".dpguard.yaml")
    (tmp_path / "elsewhere.yaml").write_text(f"{TOKEN}: 1\n", encoding="utf-8")
    (repo / "m.yaml").write_text(VALID, encoding="utf-8")
    here = os.getcwd()
    os.chdir(repo)
    try:
        assert main(["review", "-q", "m.yaml"]) == 2
    finally:
        os.chdir(here)
    err = capsys.readouterr().err
    assert ".dpguard.yaml:4:5: policies: '../elsewhere.yaml' " + OUTSIDE in err
    assert_safe(err)
