"""Reports: one `Report` value and a registry of renderers keyed by format name.

Renderers return text and never print (`dpguard review` writes it to stdout or, atomically, to
``--output``); each is deterministic: the same input gives byte-identical output.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol

from dpguard.check import FileResult
from dpguard.findings import finding_dict
from dpguard.policy.model import policy_line
from dpguard.reporters.model import REPORT_VERSION, Report, decision_line, plan_summary
from dpguard.reporters.output import emit, write_atomic


class Renderer(Protocol):
    def __call__(self, report: Report, *, color: bool = False) -> str: ...


def _deferred(module: str, name: str) -> Renderer:
    """The renderer `name` of `module`, imported when a report is rendered in its format: a
    review imports only the renderer it uses (the JUnit one pulls in XML, the Markdown one the
    planner's page templates)."""

    def render(report: Report, *, color: bool = False) -> str:
        fn: Renderer = getattr(importlib.import_module(module), name)
        return fn(report, color=color)

    return render


RENDERERS: dict[str, Renderer] = {
    "text": _deferred("dpguard.reporters.text", "render_text"),
    "json": _deferred("dpguard.reporters.json_", "render_json"),
    "sarif": _deferred("dpguard.reporters.sarif", "render_sarif"),
    "junit": _deferred("dpguard.reporters.junit", "render_junit"),
    "github": _deferred("dpguard.reporters.github", "render_github"),
    "markdown": _deferred("dpguard.reporters.markdown", "render_markdown_report"),
}


class Part(Protocol):
    def __call__(self, report: Report, result: FileResult) -> str: ...


def _deferred_part(module: str, name: str) -> Part:
    def part(report: Report, result: FileResult) -> str:
        fn: Part = getattr(importlib.import_module(module), name)
        return fn(report, result)

    return part


# Formats whose section of a file needs its manifest and plan: review renders that section as
# soon as the file is judged and keeps only the text (FileResult.part), so a batch's memory
# stays flat however many files it has (the other formats print only what `released` keeps).
PARTS: dict[str, Part] = {
    "json": _deferred_part("dpguard.reporters.json_", "json_part"),
    "markdown": _deferred_part("dpguard.reporters.markdown", "markdown_part"),
}

# JSON's dicts, for the callers that build on them; imported on first use
_JSON = frozenset(("decision_dict", "plan_data"))


def __getattr__(name: str) -> Any:
    if name in _JSON:
        return getattr(importlib.import_module("dpguard.reporters.json_"), name)
    raise AttributeError(name)


def render(report: Report, fmt: str, *, color: bool = False) -> str:
    """`color` asks for ANSI colour; only the text format has any."""
    return RENDERERS[fmt](report, color=color)


def render_pieces(report: Report, fmt: str, *, color: bool = False) -> Sequence[str]:
    """`render`'s text as pieces to write one after the other (output.deliver): a JSON report
    of thousands of files is never joined into one string."""
    if fmt == "json":
        pieces: Sequence[str] = importlib.import_module("dpguard.reporters.json_").json_pieces(
            report
        )
        return pieces
    return (render(report, fmt, color=color),)


def formats() -> Sequence[str]:
    return tuple(RENDERERS)


__all__ = [
    "PARTS",
    "RENDERERS",
    "REPORT_VERSION",
    "Part",
    "Renderer",
    "Report",
    "decision_dict",
    "decision_line",
    "emit",
    "finding_dict",
    "formats",
    "plan_data",
    "plan_summary",
    "policy_line",
    "render",
    "write_atomic",
]
