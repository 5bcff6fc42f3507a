"""The shape the code keeps (the model codebases' habits, docs/style.md): no function over 100
lines, and the core never imports its renderers: the planner computes a plan, `reporters`
only formats it, so nothing under dpguard/planner/ or dpguard/policy/ imports
dpguard.reporters (at module level or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dpguard"
# Jinja's own output, rebuilt by tests/test_plan_templates.py
GENERATED = PACKAGE / "compiled_templates"


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if GENERATED not in p.parents)


def imported(path: Path) -> set[str]:
    """Every dpguard module `path` imports, wherever the import statement stands."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "dpguard" or m.startswith("dpguard.")}


@pytest.mark.parametrize("core", ["planner", "policy", "schedules", "memory", "perf"])
def test_the_core_never_imports_the_reporters(core: str) -> None:
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(
            m for m in imported(p) if m.startswith("dpguard.reporters")
        )
        for p in (PACKAGE / core).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_function_is_over_100_lines() -> None:
    long = [
        f"{p.relative_to(PACKAGE)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})"
        for p in modules()
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 100
    ]
    assert long == []
