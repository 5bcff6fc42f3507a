"""Framework configs judged through the manifests that source them (a step of dpguard.pipeline).

A manifest with ``source: {path: pretrain.sh}`` gives what the script cannot say (the cluster,
the token budget); judged alone, the script lacks those facts and fails F003 although the
repository says them. So when a file under review is a config that some manifest of its
repository sources, that manifest is judged instead (every one that sources it), once per call
however many of them or of their configs were passed, and its findings point into the config
at the config's lines (composition keeps every value's origin). A config no manifest sources is
judged alone, with the F003 guidance.

The repository (dpguard.confine.root) is searched only when a file under review may be a
framework config (not a dpguard manifest), once per call: a review of manifests alone, the
common case, reads nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from dpguard.confine import inside, root, within
from dpguard.errors import DpguardError
from dpguard.yamlsource import YamlLoadError, decoded, load_text, read_regular, root_scalars

_MANIFEST_HINT = ("apiVersion", "source")  # both in the text of a manifest that sources a config


def through_manifests(paths: Sequence[str]) -> list[str]:
    """`paths` with each framework config that a manifest of its repository sources replaced
    by those manifests (in place, each file once)."""
    index: dict[str, dict[str, list[str]]] = {}  # repository root -> config -> manifests
    out: list[str] = []
    for path in paths:
        if not os.path.isfile(path) or _is_manifest(path):  # what is no file is reported so
            out.append(path)
            continue
        top = root(os.path.dirname(os.path.abspath(path)) or ".")
        if top not in index:
            index[top] = _sources(top)
        out += index[top].get(os.path.realpath(path), [path])
    return list(dict.fromkeys(out))


def is_sourced(path: str) -> bool:
    """Whether a manifest of `path`'s repository sources it. The hook's selection asks this only
    of a YAML file it cannot load (a duplicate key in a nanotron config, say): such a file is no
    business of dpguard's unless a manifest runs it, and then its error is that manifest's."""
    top = root(os.path.dirname(os.path.abspath(path)) or ".")
    return os.path.realpath(path) in _sources(top)


def _is_manifest(path: str) -> bool:
    """A dpguard manifest (its own judge), told by its root keys without loading it."""
    if not path.endswith((".yaml", ".yml")):
        return False
    keys = root_scalars(path, ("apiVersion", "kind")) or {}
    return str(keys.get("apiVersion", "")).startswith("dpguard/")


def _sources(top: str) -> dict[str, list[str]]:
    """{config (resolved): the manifests under `top` that source it, as this call names files}."""
    out: dict[str, list[str]] = {}
    for manifest in _manifests(top):
        target = _source_of(manifest)
        if target is not None and inside(target, top):
            out.setdefault(os.path.realpath(target), []).append(_shown(manifest))
    return out


def _manifests(top: str) -> Iterator[str]:
    """The YAML files under `top` that may source a config (hidden directories left out, as the
    hook's walk does; links that lead out of `top` not followed)."""
    base = os.path.realpath(top)
    for directory, subdirs, names in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(names):
            path = os.path.join(directory, name)
            yaml = name.endswith((".yaml", ".yml")) and not name.startswith(".")
            if yaml and within(os.path.realpath(path), base):
                yield path


def _source_of(manifest: str) -> str | None:
    """The path a manifest's `source.path` names (relative to the manifest), or None when the
    file is not a manifest with a source (or cannot be read: it is judged when reviewed)."""
    try:
        text = decoded(read_regular(manifest))
    except (DpguardError, YamlLoadError):
        return None
    if not all(hint in text for hint in _MANIFEST_HINT):
        return None  # most YAML of a repository: not parsed at all
    try:
        data = load_text(text, manifest).data
    except YamlLoadError:
        return None
    source = data.get("source")
    api = str(data.get("apiVersion", ""))
    if not api.startswith("dpguard/") or not isinstance(source, dict):
        return None
    path = source.get("path")
    if not isinstance(path, str) or "\0" in path:
        return None
    return os.path.join(os.path.dirname(manifest), path)


def _shown(path: str) -> str:
    """A path as this call names files: relative to the current directory when under it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
