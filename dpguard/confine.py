"""Where a file that a manifest, a framework config or `.dpguard.yaml` points at may lie: inside
the repository holding the pointing file (the nearest directory above it with a `.git` entry),
or in the pointing file's own directory when it is in no repository. Paths are compared after
every symbolic link is resolved, so neither `../`, an absolute path nor a committed link leads
out.

Those files are written by whoever opens a pull request, and dpguard's reports are public (PR
comments, annotations): a path outside is refused with a message that names the rule, never the
target's content, existence, kind or size.
"""

from __future__ import annotations

import os

from dpguard.errors import DpguardError

# Directories that stand for a repository root although they hold no `.git` (the baseline's
# files written out by `review --baseline`, whose repository is elsewhere).
_ROOTS: set[str] = set()
_found: dict[str, str] = {}


class Outside(DpguardError):
    """A path leads outside the directory tree it may be read from."""


def add_root(directory: str) -> None:
    _ROOTS.add(os.path.realpath(directory))
    _found.clear()


def remove_root(directory: str) -> None:
    _ROOTS.discard(os.path.realpath(directory))
    _found.clear()


def root(directory: str) -> str:
    """The repository root above `directory` (resolved), else `directory` itself."""
    here = os.path.realpath(directory)
    if here not in _found:
        top = here
        while True:
            if top in _ROOTS or os.path.lexists(os.path.join(top, ".git")):
                _found[here] = top
                break
            parent = os.path.dirname(top)
            if parent == top:
                _found[here] = here
                break
            top = parent
    return _found[here]


def inside(path: str, directory: str) -> bool:
    """Whether `path` resolves (links followed) inside `directory` (resolved)."""
    return within(os.path.realpath(path), os.path.realpath(directory))


def within(real: str, base: str) -> bool:
    """Whether the resolved path `real` lies in the resolved directory `base` (for a walk,
    which resolves its root once)."""
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def confined(target: str, pointing: str, what: str) -> str:
    """`target` resolved (the path to open: links followed once, here) when it lies inside the
    tree `pointing` may read; else Outside, whose message names `what` (``source.path``) and
    the rule only."""
    if "\0" in target:
        raise Outside(f"{what} is not a file name (it holds a NUL character)")
    base = root(os.path.dirname(os.path.abspath(pointing)) or ".")
    real = os.path.realpath(target)
    if not within(real, base):
        raise Outside(
            f"{what} leads outside the repository that holds {os.path.basename(pointing)}: "
            "dpguard reads only files inside it (symbolic links resolved)"
        )
    return real
