"""The files a `review` checks (the first step of its pipeline, dpguard.pipeline): those named,
and for a directory what the published pre-commit hook would pass and `--only-manifests` would
keep, found by walking the directory.

A directory on the command line stands for the training manifests and framework configs under
it, at any depth, in name order (a directory's files before its subdirectories'): files the
hook's ``types_or: [yaml, shell, toml, json]`` covers (by extension, as pre-commit's
`identify` tags them, or an executable without an extension whose ``#!`` line runs a shell)
and that `declares_manifest` keeps, so policy sets, test cases, waivers and unrelated YAML are
passed over as the hook passes them over. ``.git`` and every other hidden directory or file
(``.github``, ``.venv``, ``.dpguard.yaml``) are skipped, and symbolic links to directories are
not followed. A file named on the command line is checked as before, whatever it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from dpguard.errors import DpguardError

# identify's extensions for the hook's types, less formats no training config uses.
EXTENSIONS = (".yaml", ".yml", ".sh", ".bash", ".zsh", ".ksh", ".toml", ".json")
SHELLS = frozenset(("sh", "bash", "dash", "ash", "ksh", "zsh"))  # interpreters identify calls shell


def expand(
    paths: Sequence[str], keep: Callable[[str], bool] | None = None
) -> tuple[list[str], list[str]]:
    """(the files to check, the directories that held none), in command-line order; a path
    named twice is checked once. `keep` filters the files named outright; those found in a
    directory have passed the hook's selection already."""
    out: list[str] = []
    empty: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            found = list(_walk(path))
            out += found
            if not found:
                empty.append(path)
        elif keep is None or keep(path):
            out.append(path)
    return list(dict.fromkeys(out)), empty


def _walk(root: str) -> Iterator[str]:
    """The files under `root` the hook would check; a committed link that leads out of `root`
    is not followed (dpguard.confine: nothing outside is read or shown)."""
    from dpguard.confine import within

    base = os.path.realpath(root)
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(names):
            path = os.path.normpath(os.path.join(directory, name))
            if name.startswith(".") or not within(os.path.realpath(path), base):
                continue
            if _hook_type(path, name) and declares_manifest(path):
                yield path


def _hook_type(path: str, name: str) -> bool:
    """Whether the hook's types would pass this file to dpguard."""
    if not os.path.isfile(path):
        return False
    if name.endswith(EXTENSIONS):
        return True
    if "." in name or not os.access(path, os.X_OK):
        return False
    try:
        with open(path, "rb") as stream:
            first = stream.readline(256)
    except OSError:
        return False
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return bool(words) and os.path.basename(words[0]) in SHELLS


OTHER_KINDS = frozenset({"PolicySet", "PolicyTest", "Waivers"})  # dpguard/v1 files, not manifests


def declares_manifest(path: str) -> bool:
    """Whether `--only-manifests` checks `path`: a framework config dpguard reads (by content:
    docs/frameworks.md), or YAML whose first document's root mapping has ``kind:
    TrainingManifest``, or an ``apiVersion: dpguard/...`` without another dpguard kind (so a
    typo in either key is reported, not skipped). Other files cost little and never fail
    here; a YAML file that cannot be read or is not YAML at all counts as a manifest, so
    review reports it."""
    from dpguard.frameworks.detect import sniff, yaml_format
    from dpguard.yamlsource import YamlLoadError, load_text, read_text, root_scalars

    if not path.endswith((".yaml", ".yml")) and os.path.isfile(path):
        try:
            return sniff(path, read_text(path)) is not None
        except (YamlLoadError, DpguardError):
            return False  # not text dpguard reads: not its business in hook mode
    keys = root_scalars(path, ("apiVersion", "kind"))
    if keys is None:
        return True
    api, kind = keys.get("apiVersion"), keys.get("kind")
    if kind == "TrainingManifest":
        return True
    if api is not None or kind is not None:
        return api is not None and api.startswith("dpguard/") and kind not in OTHER_KINDS
    try:
        return yaml_format(load_text(read_text(path), path).data) is not None
    except (YamlLoadError, DpguardError):
        from dpguard.sourcing import is_sourced

        return is_sourced(path)
