"""Compatibility home of the report API; the implementation is the `dpguard.reporters` package
(one module per format, the RENDERERS registry in its ``__init__``)."""

from __future__ import annotations

from dpguard.reporters import (
    RENDERERS,
    REPORT_VERSION,
    Renderer,
    Report,
    decision_dict,
    decision_line,
    finding_dict,
    formats,
    plan_data,
    plan_summary,
    policy_line,
    render,
    report_dict,
    write_atomic,
)

__all__ = [
    "RENDERERS",
    "REPORT_VERSION",
    "Renderer",
    "Report",
    "decision_dict",
    "decision_line",
    "finding_dict",
    "formats",
    "plan_data",
    "plan_summary",
    "policy_line",
    "render",
    "report_dict",
    "write_atomic",
]
