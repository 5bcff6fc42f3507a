"""Scratch git repositories for the tests (review --baseline, the CI recipes, the hooks)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(cwd: Path, *argv: str) -> str:
    """Run git in `cwd` with a throwaway identity; its stdout, stripped."""
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *argv],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip()


def snapshot(source: Path, root: Path) -> str:
    """`source`'s working tree (tracked and untracked files, ignored ones left out) committed
    into a fresh repository at `root`, so pre-commit installs the code as it is, not the last
    commit; the commit's sha."""
    import shutil

    listed = git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in sorted(set(filter(None, listed.split("\0")))):
        if (source / name).is_file():  # tracked but deleted in the working tree: left out
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, root / name)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "snapshot")
    return git(root, "rev-parse", "HEAD")
