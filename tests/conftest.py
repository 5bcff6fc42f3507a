"""Fixtures shared by the foundation tests (loader, validation, CLI, install)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

WriteManifest = Callable[..., Path]


@pytest.fixture
def valid_manifest_text() -> str:
    """examples/small-dense.yaml: a manifest that passes every check."""
    return (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")


@pytest.fixture
def write_manifest(tmp_path: Path) -> WriteManifest:
    """``write_manifest(text_or_bytes, name="manifest.yaml")`` -> the path of the new file."""

    def write(content: str | bytes, name: str = "manifest.yaml") -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return write


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """dpguard's per-user cache (validated policy digests) in a directory of this run, for the
    tests and every dpguard process they start: nothing is written to the user's home, and no
    earlier run's cache changes what a test sees."""
    import os

    os.environ["DPGUARD_CACHE_DIR"] = str(tmp_path_factory.mktemp("dpguard-cache"))
    # the cache's signing key too (dpguard.cache): never the user's ~/.config
    key = tmp_path_factory.mktemp("dpguard-config") / "cache-key"
    os.environ["DPGUARD_CACHE_KEY_FILE"] = str(key)


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(path, rev) of a snapshot of this checkout for pre-commit's `repo:`/`rev:` and
    `try-repo`: one per test run, so the hook's environment is built once (PRE_COMMIT_HOME)."""
    from gitrepo import snapshot

    root = tmp_path_factory.mktemp("dpguard-snapshot")
    return root, snapshot(REPO, root)


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PRE_COMMIT_HOME for every pre-commit run of the tests: the first run builds the hook's
    virtual environment (pip installs dpguard and its dependencies), the others reuse it."""
    return tmp_path_factory.mktemp("pre-commit-home")
