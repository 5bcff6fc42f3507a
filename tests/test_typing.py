"""The package type-checks under the project's mypy settings (pyproject [tool.mypy]:
disallow_untyped_defs, warn_unreachable, warn_unused_ignores, Python 3.10 target)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_clean(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), str(ROOT / "dpguard")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
