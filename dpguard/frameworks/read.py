"""Recognise a framework config by its content and read it into an `Extract`.

Formats (docs/frameworks.md): ``megatron`` (launch scripts, and YAML flag maps as in the
Megatron MoE model zoo), ``nemo`` (NeMo 1 / NeMo Framework Launcher YAML), ``bridge``
(Megatron-Bridge YAML), ``flagscale`` (experiment + train YAML), ``torchtitan`` (TOML),
``deepspeed`` (JSON), ``nanotron`` (YAML). Nothing is imported from a framework and nothing is
executed: every reader parses text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
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
                if path.endswith((".yaml", ".yml")):
                    raise  # a broken YAML config: its own error, at its line
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
        if found == "megatron" and not path.endswith((".yaml", ".yml")):
            return _megatron_script(path, text, manifest)
        return read(path, found, text)
    except Outside as exc:
        raise FrameworkError("F005", str(exc), at) from None
    except InputError as exc:  # named as the manifest wrote it, not as resolved
        raise FrameworkError("F005", f"source.path: {exc}".replace(real, path), at) from None
    except YamlLoadError as exc:
        raise FrameworkError(exc.code, exc.message, Origin(path, exc.position)) from None


# -- Megatron-LM scripts and YAML flag maps -------------------------------------------------------


def _megatron_script(path: str, text: str, manifest: SourceDoc | None = None) -> Extract:
    script, extract = _read_script(path, text, {})
    return (
        extract if manifest is None else _caller_environment(path, text, script, extract, manifest)
    )


def _read_script(path: str, text: str, environment: Mapping[str, str]) -> tuple[Script, Extract]:
    from dpguard.frameworks import shell

    try:
        script = shell.parse(text, environment)
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
    return script, with_values(extract, origins=origins, notes=notes + unknown)


@dataclass(frozen=True)
class _Setting:
    """A value of a variable the script leaves to its caller that gives a manifest's value."""

    value: str
    dotted: str  # the field, as the manifest gives it
    wanted: int
    field: tuple[str, ...]  # where the manifest gives it
    at: Position  # where the script reads the variable
    default: str | None  # the script's default for it (None: it has none)


def _caller_environment(
    path: str, text: str, script: Script, extract: Extract, manifest: SourceDoc
) -> Extract:
    """A script run as `TP=8 bash train.sh` reads `${TP}` or `${TP:-4}` from its caller's
    environment (a variable it never assigns; the default 4 holds only while the caller leaves
    TP unset). A `source:` manifest's number for a field read so is that environment, not a
    conflict: the script is read again with the variable set to give it (and what follows
    from it: the schedule with PP, the GPU count with the nodes), the field placed at the
    manifest, and an F002 note says so. A value that no setting gives stays an F004."""
    settings: dict[str, _Setting] = {}
    for field, wanted in _leaves(manifest.data):
        dotted = ".".join(field)
        current = extract.values.get(dotted)
        origin = extract.origins.get(dotted) if current is not None else None
        origin = origin or extract.undetermined.get(dotted)
        if not _whole(wanted) or current == wanted or origin is None or origin.file != path:
            continue
        read_so = script.from_caller.get(origin.position)
        if read_so is None or read_so[0] in settings:
            continue
        name, default = read_so
        if default is None or current is None:
            value: int | None = wanted
        else:  # the field is the variable's value times what the script multiplies it by
            written, factor = whole(default), 0
            if written and _whole(current) and current % written == 0:
                factor = current // written
            value = wanted // factor if factor and wanted % factor == 0 else None
        if value is not None:
            settings[name] = _Setting(str(value), dotted, wanted, field, origin.position, default)
    # Read again with every setting; a setting that does not give its field (the field is
    # not that variable's value times a constant) is dropped and the rest read once more
    environment = {name: setting.value for name, setting in settings.items()}
    for _ in range(2):
        if not environment:
            return extract
        _, again = _read_script(path, text, environment)
        missed = {
            n
            for n, s in settings.items()
            if n in environment and again.values.get(s.dotted) != s.wanted
        }
        if not missed:
            break
        environment = {n: v for n, v in environment.items() if n not in missed}
    else:
        return extract
    origins, notes = dict(again.origins), []
    for name in environment:
        setting = settings[name]
        origins[setting.dotted] = Origin(manifest.name, manifest.value_position(setting.field))
        fallback = (
            f"the script's default, {setting.default}, holds only while the caller leaves "
            f"{name} unset"
            if setting.default is not None
            else f"the script does not assign {name}"
        )
        message = (
            f"${name} comes from the caller's environment: read with {name}={setting.value}, "
            f"which gives {setting.dotted} {setting.wanted} as "
            f"{os.path.basename(manifest.name)} says ({fallback})"
        )
        notes.append(Note(Origin(path, setting.at), "F002", message, Severity.INFO))
    return replace(again, origins=origins, notes=tuple(notes) + again.notes)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _leaves(
    data: Mapping[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """The manifest's values by path, `source:` aside."""
    for key, value in data.items():
        path = (*prefix, str(key))
        if isinstance(value, dict) and path != ("source",):
            yield from _leaves(value, path)
        elif path != ("source",):
            yield path, value


def _script_gpus(
    script: Script, launcher: Mapping[str, Arg], path: str, text: str
) -> tuple[dict[str, Any], dict[str, Origin], list[Note]]:
    """GPU count from torchrun's ``--nproc_per_node`` x ``--nnodes``, else from the usual
    variables (GPUS_PER_NODE x NNODES), else from the Slurm header (the allocation the job
    runs on: ``--nodes``, and per node ``--gpus-per-node`` or ``--gres=gpu:N``, or
    ``--ntasks-per-node`` when srun starts each rank as a task); an F002 note says why a count
    the script writes cannot be read (``--nnodes $SLURM_NNODES``: the scheduler sets it), so
    the F003 that follows has its reason."""
    notes: list[Note] = []
    header = _sbatch(text, path)

    def first(names: tuple[str, ...], options: tuple[str, ...]) -> tuple[int | None, Origin | None]:
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
        option = next((o for o in options if o in header), None)
        if option is not None:  # the header says it: no reason to give for the launcher's
            return header[option]
        unknown = next((launcher[n] for n in names if n in launcher and launcher[n].why), None)
        if unknown is not None:
            why = f"--{names[0]} is {unknown.why}: the GPU count cannot be read from the script"
            notes.append(Note(unknown.origin, "F002", why))
        return None, None

    tasks = ("--ntasks-per-node",) if _rank_per_task(script) else ()
    per_node, at_node = first(
        ("nproc_per_node", "gpus_per_node"), ("--gpus-per-node", "--gres", *tasks)
    )
    nodes, at_nodes = first(("nnodes", "num_nodes"), ("--nodes",))
    found = Values()
    if per_node:
        found.put("cluster.gpus_per_node", per_node, at_node)
        if nodes:
            found.put("cluster.gpus", per_node * nodes, at_nodes)
    return found.values, found.origins, notes


# Launchers that start a node's ranks themselves; without one, srun (or mpirun) starts each
# rank as a Slurm task, and --ntasks-per-node is the GPUs per node
_PER_NODE = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "deepspeed")


def _rank_per_task(script: Script) -> bool:
    found = megatron.training_command(script)
    if found is None:
        return False
    command, program = found
    head = [os.path.basename(w.text or "") for w in command.words[:program]]
    return bool({"srun", "mpirun", "mpiexec"} & set(head)) and not set(_PER_NODE) & set(head)


# `#SBATCH` options that give the job's shape, and the count in each one's value:
# `--nodes=4`/`-N 4`/`-N4`, `--gpus-per-node=8` (or `h100:8`), `--gres=gpu:8` (or
# `gpu:h100:8`, among other resources), `--ntasks-per-node=8` (a range such as `--nodes=2-4`
# is not one count)
_SBATCH_OPTION = re.compile(
    r"(?:^|[ \t])(--nodes|-N|--gpus-per-node|--gres|--ntasks-per-node)(?:=|[ \t]+|(?<=N))(\S+)"
)
_SBATCH_COUNT = {
    "--nodes": re.compile(r"([0-9]{1,6})"),
    "--gpus-per-node": re.compile(r"(?:[\w.-]+:)?([0-9]{1,6})"),
    "--gres": re.compile(r"(?:\S*,)?gpu(?::[\w.-]+)?:([0-9]{1,6})(?:,\S*)?"),
    "--ntasks-per-node": re.compile(r"([0-9]{1,6})"),
}


def _sbatch(text: str, path: str) -> dict[str, tuple[int, Origin]]:
    """The counts of the script's Slurm header: its `#SBATCH` lines before the first command,
    as sbatch reads them (several options to a line, a later one replacing an earlier one, a
    `#` after them a comment)."""
    found: dict[str, tuple[int, Origin]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            break  # sbatch stops reading directives at the first command
        if not line.startswith("#SBATCH"):
            continue
        options = line.split(" #")[0]
        for match in _SBATCH_OPTION.finditer(options, len("#SBATCH")):
            name = "--nodes" if match.group(1) == "-N" else match.group(1)
            count = _SBATCH_COUNT[name].fullmatch(match.group(2))
            if count is not None:
                col = match.start(2) + count.start(1) + 1
                found[name] = (int(count.group(1)), Origin(path, Position(number, col)))
    return found


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
