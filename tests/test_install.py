"""The installed-wheel path: build a wheel of the checkout, install it (not editable) into a fresh
virtual environment, and run that environment's `dpguard` from another directory.

This is what catches data files that only an editable install or the source tree can reach: the
top-level policies/, schemas/ and templates/ are mapped into the package by pyproject and must
ship inside the wheel. The dependencies come from the environment running the tests (system site
packages, plus the running environment's site-packages through a .pth file), so nothing is
downloaded for them; building the wheel uses pip's usual isolated build, like `pip install .`.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Never copied into the build: caches, build output, VCS data, other environments, the tests.
IGNORE = shutil.ignore_patterns(
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".hypothesis",
    "corpus",
    "tests",
)
DATA_DIRS = ("policies", "schemas", "templates")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    elsewhere: Path  # a directory with no dpguard files in it

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.venv / "bin" / argv[0]), *argv[1:]], cwd=self.elsewhere)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.pop("VIRTUAL_ENV", None)
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def _run(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600, check=False
    )


def _must(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = _run(argv, cwd)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("install")
    source = root / "src"
    shutil.copytree(REPO, source, ignore=IGNORE, symlinks=True)
    dist = root / "dist"
    _must(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        root,
    )
    (wheel,) = dist.glob("dpguard-*.whl")

    venv = root / "venv"
    _must(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], root
    )
    python = venv / "bin" / "python"
    purelib = _must(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], root
    )
    # The running environment's packages (a CI venv's, say) after the venv's own and the system's.
    here = [*site.getsitepackages(), sysconfig.get_path("purelib")]
    Path(purelib.stdout.strip(), "test-deps.pth").write_text("\n".join(dict.fromkeys(here)) + "\n")
    _must(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--ignore-installed",  # the running environment's dpguard is visible through the .pth
            "--no-index",
            "-q",
            str(wheel),
        ],
        root,
    )
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return Installed(wheel, venv, elsewhere)


def test_wheel_ships_the_data_directories(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for required in (
        "dpguard/schemas/manifest.schema.json",
        "dpguard/data/accelerators.yaml",
        "dpguard/policies/__init__.py",
        "dpguard/templates/__init__.py",
        "dpguard/schemas/__init__.py",
        "dpguard/commands/review.py",
        "dpguard/py.typed",
    ):
        assert required in names, required
    # Every data file in the top-level directories reaches the wheel under dpguard/<dir>/.
    source = installed.wheel.parent.parent / "src"
    for folder in DATA_DIRS:
        for path in sorted((source / folder).rglob("*")):
            if path.is_file() and path.suffix != ".pyc":
                inside = f"dpguard/{folder}/{path.relative_to(source / folder).as_posix()}"
                assert inside in names, f"{path.relative_to(source)} is not in the wheel"
    assert not any(n.startswith(("tests/", "examples/", "policies/", "schemas/")) for n in names)
    # Every module of the package reaches the wheel (pyproject lists the subpackages one by
    # one: a new subpackage left out installs without its code).
    for path in sorted((REPO / "dpguard").rglob("*.py")):
        module = path.relative_to(REPO).as_posix()
        assert module in names, f"{module} is not in the wheel (pyproject: packages)"


def test_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    done = installed.run(
        "python",
        "-c",
        "import dpguard, dpguard.schemas; print(dpguard.__file__); print(dpguard.schemas.__file__)",
    )
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert Path(line).resolve().is_relative_to(installed.venv.resolve()), line


def test_installed_review_from_another_directory(installed: Installed) -> None:
    done = installed.run("dpguard", "review", str(REPO / "examples" / "frontier-moe.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("1 manifest checked: 1 passed, 0 failed (0 errors, ")
    assert not any(" error " in line for line in lines)
    assert done.stderr == ""


def test_installed_review_reports_mistakes(installed: Installed) -> None:
    done = installed.run(
        "dpguard", "review", "--format", "json", str(REPO / "examples" / "mistakes.yaml")
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [f["code"] for f in report["files"][0]["findings"]] == [
        "X001",
        "X012",
        "X005",
        "X006",
        "S004",
        "S001",
        "X010",
    ]


def test_installed_schema_and_version(installed: Installed) -> None:
    done = installed.run("dpguard", "schema")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (REPO / "schemas" / "manifest.schema.json").read_text(encoding="utf-8")
    version = installed.run("python", "-m", "dpguard", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("dpguard ")
