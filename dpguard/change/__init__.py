"""What a change to training manifests costs: both versions judged, paired and rendered
(`dpguard review --baseline REV`, `dpguard diff OLD NEW`)."""

from __future__ import annotations

from collections.abc import Callable

from dpguard.change.model import ChangeReport

Renderer = Callable[..., str]


def renderers() -> dict[str, Renderer]:
    """Format name -> renderer of a ChangeReport (imported on use: review's startup stays
    as it was without --baseline)."""
    from dpguard.change.markdown import render_markdown
    from dpguard.change.render import render_github, render_json, render_text

    return {
        "text": render_text,
        "json": render_json,
        "markdown": render_markdown,
        "github": render_github,
    }


FORMATS = ("text", "json", "markdown", "github")


def render_change(report: ChangeReport, fmt: str) -> str:
    return renderers()[fmt](report)


__all__ = ["FORMATS", "ChangeReport", "render_change", "renderers"]
