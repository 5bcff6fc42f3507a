"""Recognise a framework config by its content and read it into an `Extract`.

Formats (docs/frameworks.md): ``megatron`` (launch scripts, and YAML flag maps as in the
Megatron MoE model zoo), ``nemo`` (NeMo 1 / NeMo Framework Launcher YAML), ``bridge``
(Megatron-Bridge YAML), ``flagscale`` (experiment + train YAML), ``torchtitan`` (TOML),
``deepspeed`` (JSON), ``nanotron`` (YAML). Nothing is imported from a framework and nothing is
executed: every reader parses text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dpguard.findings import Severity
from dpguard.frameworks import bridge, deepspeed, flagscale, megatron, nanotron, nemo
from dpguard.frameworks.common import with_values
from dpguard.frameworks.detect import sniff, yaml_format
from dpguard.frameworks.megatron import Arg
from dpguard.frameworks.model import Extract, FrameworkError, Note, Origin, Values
from dpguard.frameworks.numbers import whole
from dpguard.frameworks.shell import Script
from dpguard.yamlevents import Position, SourceDoc, YamlLoadError
from dpguard.yamlsource import load_text, read_text

FORMATS = ("megatron", "nemo", "bridge", "flagscale", "torchtitan", "deepspeed", "nanotron")


def read(path: str, fmt: str, text: str | None = None) -> Extract:
    """Read `path` as `fmt`. Raises InputError (missing file), YamlLoadError or
    FrameworkError (broken content)."""
    text = read_text(path) if text is None else text
    if fmt == "torchtitan":
        from dpguard.frameworks import torchtitan

        return torchtitan.read(path, text)
    if fmt == "deepspeed":
        return deepspeed.read(path, text)
    if fmt == "megatron" and not path.endswith((".yaml", ".yml")):
        return _megatron_script(path, text)
    return read_doc(load_text(text, path), fmt)


def read_doc(doc: SourceDoc, fmt: str) -> Extract:
    """Read an already loaded YAML document as `fmt`."""
    return _YAML_READERS[fmt](doc)


def read_source(path: str, fmt: str | None, manifest: SourceDoc) -> Extract:
    """The framework config a manifest's ``source:`` names. Problems with it are findings:
    at the manifest's ``source.path`` when the file is missing or unrecognised, in the file
    itself when its content is broken."""
    from dpguard.confine import Outside, confined
    from dpguard.errors import InputError

    at = Origin(manifest.name, manifest.value_position(("source", "path")))
    real = path
    try:
        real = confined(path, manifest.name, "source.path")  # the file opened: links resolved
        text = read_text(real)
        if fmt is not None and fmt not in FORMATS:
            raise FrameworkError(
                "F005", f"source.format {fmt!r} is not one of {', '.join(FORMATS)}", at
            )
        found = fmt or sniff(path, text)
        if found is None:
            try:
                doc = load_text(text, path)
            except YamlLoadError:
                doc = None  # not YAML either: not a config dpguard reads
            found = yaml_format(doc.data) if doc is not None else None
            if doc is None or found is None:
                raise FrameworkError(
                    "F005",
                    f"{path} is not a framework config dpguard recognises "
                    f"({', '.join(FORMATS)}); name it with source.format",
                    at,
                )
            return read_doc(doc, found)
        return read(path, found, text)
    except Outside as exc:
        raise FrameworkError("F005", str(exc), at) from None
    except InputError as exc:  # named as the manifest wrote it, not as resolved
        raise FrameworkError("F005", f"source.path: {exc}".replace(real, path), at) from None
    except YamlLoadError as exc:
        raise FrameworkError(exc.code, exc.message, Origin(path, exc.position)) from None


# -- Megatron-LM scripts and YAML flag maps -------------------------------------------------------


def _megatron_script(path: str, text: str) -> Extract:
    from dpguard.frameworks import shell

    try:
        script = shell.parse(text)
    except shell.ShellError as exc:
        raise FrameworkError(
            "F001", f"cannot read the script: {exc.message}", Origin(path, exc.position)
        ) from None
    args, launcher, stray = megatron.command_args(script, path)
    notes = stray + [
        Note(
            Origin(path, at),
            "F002",
            f"`source {name}`: values set in that file are not read",
            Severity.INFO,
        )
        for name, at in script.sourced
    ]
    extra, origins, unknown = _script_gpus(script, launcher, path, text)
    extract = megatron.to_manifest(args, "megatron", path, extra)
    return with_values(extract, origins=origins, notes=notes + unknown)


def _script_gpus(
    script: Script, launcher: Mapping[str, Arg], path: str, text: str
) -> tuple[dict[str, Any], dict[str, Origin], list[Note]]:
    """GPU count from torchrun's ``--nproc_per_node`` x ``--nnodes``, else from the usual
    variables (GPUS_PER_NODE x NNODES), else nodes from the Slurm header (``#SBATCH --nodes=4``
    or ``-N 4``: the allocation the job runs on); an F002 note says why a count the script
    writes cannot be read (``--nnodes $SLURM_NNODES``: the scheduler sets it), so the F003
    that follows has its reason."""
    notes: list[Note] = []

    def first(names: tuple[str, ...]) -> tuple[int | None, Origin | None]:
        for name in names:
            arg = launcher.get(name)
            number = whole(arg.value) if arg is not None and isinstance(arg.value, str) else None
            if arg is not None and number is not None and number >= 0:
                return number, arg.origin
        for name in names:
            words = script.variables.get(name.upper())
            text = words[0].text if words and len(words) == 1 else None
            number = whole(text) if text else None
            if words and number is not None and number >= 0:
                return number, Origin(path, words[0].position)
        unknown = next((launcher[n] for n in names if n in launcher and launcher[n].why), None)
        if unknown is not None:
            why = f"--{names[0]} is {unknown.why}: the GPU count cannot be read from the script"
            notes.append(Note(unknown.origin, "F002", why))
        return None, None

    per_node, at_node = first(("nproc_per_node", "gpus_per_node"))
    nodes, at_nodes = first(("nnodes", "num_nodes"))
    if nodes is None:
        nodes, at_nodes = _sbatch_nodes(text, path)
        if nodes is not None:
            notes.clear()  # the header says it: no reason to give for the launcher's variable
    found = Values()
    if per_node:
        found.put("cluster.gpus_per_node", per_node, at_node)
        if nodes:
            found.put("cluster.gpus", per_node * nodes, at_nodes)
    return found.values, found.origins, notes


# a Slurm batch header line: `#SBATCH --nodes=4`, `#SBATCH --nodes 4`, `#SBATCH -N 4`/`-N4`
_SBATCH_NODES = re.compile(r"#SBATCH[ \t]+(?:--nodes[= \t]+|-N[ \t]*)([0-9]{1,6})[ \t]*")


def _sbatch_nodes(text: str, path: str) -> tuple[int | None, Origin | None]:
    """The node count of the script's Slurm header: its `#SBATCH` lines before the first
    command, as sbatch reads them (a range such as `--nodes=2-4` is not one count)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            break  # sbatch stops reading directives at the first command
        match = _SBATCH_NODES.fullmatch(line.rstrip("\r"))
        if match is not None:
            return int(match.group(1)), Origin(path, Position(number, match.start(1) + 1))
    return None, None


def _flag_map(doc: SourceDoc) -> Extract:
    """A YAML map of Megatron flags (``MODEL_ARGS: {--num-layers: 61, ...}``), as in the
    Megatron MoE model zoo; ``${TP}`` placeholders are filled by its wrapper from the
    environment, so they stay unknown."""
    args: dict[str, Arg] = {}
    sections = [()] + [(k,) for k, v in doc.data.items() if isinstance(v, dict)]
    for section in sections:
        node: Any = doc.data if not section else doc.data[section[0]]
        for key, value in node.items():
            if not str(key).startswith("--"):
                continue
            path = (*section, key)
            origin = Origin(doc.name, doc.value_position(path))
            if isinstance(value, str) and "${" in value:
                args[megatron.canonical(key)] = Arg(
                    None, origin, f"{value!r} is filled in from the environment"
                )
            elif value is None or value == "":
                args[megatron.canonical(key)] = Arg(True, origin)
            elif isinstance(value, list):
                args[megatron.canonical(key)] = Arg([str(v) for v in value], origin)
            else:
                args[megatron.canonical(key)] = Arg(value, origin)
    return megatron.to_manifest(args, "megatron", doc.name)


_YAML_READERS = {
    "megatron": _flag_map,
    "nemo": nemo.read,
    "bridge": bridge.read,
    "flagscale": flagscale.read,
    "nanotron": nanotron.read,
}
