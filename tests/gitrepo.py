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
