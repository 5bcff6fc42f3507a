"""Reports: one `Report` value and a registry of renderers keyed by format name.

Renderers return text and never print (`dpguard review` writes it to stdout or, atomically, to
``--output``); each is deterministic: the same input gives byte-identical output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dpguard.reporters.github import render_github
from dpguard.reporters.json_ import decision_dict, plan_data, render_json, report_dict
from dpguard.reporters.junit import render_junit
from dpguard.reporters.markdown import render_markdown_report
from dpguard.reporters.model import (
    REPORT_VERSION,
    Report,
    decision_line,
    finding_dict,
    plan_summary,
    policy_line,
)
from dpguard.reporters.output import emit, write_atomic
from dpguard.reporters.sarif import render_sarif
from dpguard.reporters.text import render_text


class Renderer(Protocol):
    def __call__(self, report: Report, *, color: bool = False) -> str: ...


RENDERERS: dict[str, Renderer] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "junit": render_junit,
    "github": render_github,
    "markdown": render_markdown_report,
}


def render(report: Report, fmt: str, *, color: bool = False) -> str:
    """`color` asks for ANSI colour; only the text format has any."""
    return RENDERERS[fmt](report, color=color)


def formats() -> Sequence[str]:
    return tuple(RENDERERS)


__all__ = [
    "RENDERERS",
    "REPORT_VERSION",
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
    "report_dict",
    "write_atomic",
]
