"""Timeline renderers: a text grid (like the DualPipe README figure) and an SVG.

Op names: the kind letter (F forward, B full backward, I input-gradient half, W weight-gradient
half) followed by the micro-batch index, upper case for the device's first model chunk and
lower case for its second (DualPipe: forward direction / reverse direction; DualPipeV: the
stages going down the V / coming back up). With more than two chunks per device (interleaved
1F1B, v > 2) the chunk is appended instead: ``F3:2``. An overlapped pair is ``F7&b3``.

Both renderers are pure and deterministic: same result in, same bytes out.
"""

from __future__ import annotations

from fractions import Fraction
from math import gcd
from xml.sax.saxutils import escape

from dpguard.errors import UsageError
from dpguard.schedules.api import SimResult
from dpguard.schedules.ops import FB, B, F, I, Layout, Op, W

MAX_COLUMNS = 4000  # a text grid wider than this is unreadable; the SVG has no such limit


def number(value: Fraction) -> str:
    """Exact decimal when it terminates within 6 places (2.5), else a short fraction (7/3),
    else 6 significant digits."""
    value = Fraction(value)
    for places in range(7):
        scaled = value * 10**places
        if scaled.denominator == 1:
            digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
            sign = "-" if value < 0 else ""
            return sign + (f"{digits[:-places]}.{digits[-places:]}" if places else digits)
    text = str(value)
    return text if len(text) <= 12 else f"{float(value):.6g}"


def _name(kind: str, pipe: int, stage: int, mb: int, layout: Layout) -> str:
    chunk = layout.chunk_of[pipe][stage]
    if layout.chunks_per_rank > 2:
        return f"{kind}{mb}:{chunk}"
    return f"{kind.lower() if chunk else kind}{mb}"


def op_name(op: Op, layout: Layout) -> str:
    if op.kind == FB:
        return (
            _name(F, op.pipe, op.stage, op.mb, layout)
            + "&"
            + _name(B, op.b_pipe, op.b_stage, op.b_mb, layout)
        )
    return _name(op.kind, op.pipe, op.stage, op.mb, layout)


def text_timeline(result: SimResult) -> str:
    """One row per rank, one column per time unit (the gcd of the op times used)."""
    tl = result.timeline
    used = {op.kind for order in tl.orders for op in order}
    unit = 0
    for kind in sorted(used):
        unit = gcd(unit, tl.ticks[kind])
    unit = unit or 1
    columns = tl.makespan // unit
    if columns > MAX_COLUMNS:
        raise UsageError(
            f"the text timeline would be {columns} columns wide (limit {MAX_COLUMNS}); "
            "use --svg FILE, or fewer micro-batches"
        )
    names = [[op_name(op, tl.layout) for op in order] for order in tl.orders]
    width = 2
    for order, row in zip(tl.orders, names, strict=True):
        for op, name in zip(order, row, strict=True):
            span = tl.ticks[op.kind] // unit
            width = max(width, -(-(len(name) + 1) // span))  # ceil: the name and one space
    rows = []
    for r, (order, row, starts) in enumerate(zip(tl.orders, names, tl.starts, strict=True)):
        cells = []
        col = 0
        for op, name, start in zip(order, row, starts, strict=True):
            first = start // unit
            cells.append(".".ljust(width) * (first - col))
            span = tl.ticks[op.kind] // unit
            cells.append(name.ljust(width * span - 1, "-" if span > 1 else " ") + " ")
            col = first + span
        cells.append(".".ljust(width) * (columns - col))
        rows.append(f"{r:>4} |" + "".join(cells).rstrip())
    ruler = [" "] * (width * columns + 1)
    for col in range(0, columns, 10):
        mark = number(Fraction(col * unit, tl.scale))
        ruler[width * col : width * col + len(mark)] = mark
    chunks = (
        "F3:2 = chunk 2 of the rank"
        if tl.layout.chunks_per_rank > 2
        else "upper/lower case = the rank's first/second chunk"
    )
    legend = (
        "F forward, B full backward, I input-gradient, W weight-gradient; number = "
        f"micro-batch; {chunks}; X&y = overlapped pair; '-' continues an op; '.' idle; "
        f"one column = {number(Fraction(unit, tl.scale))} unit(s) of time"
    )
    head = f"{result.schedule}: {result.ranks} ranks, {result.stages} stages, " + (
        f"{result.microbatches} micro-batches, makespan {number(result.makespan)}"
    )
    return "\n".join([head, "time |" + "".join(ruler).rstrip(), *rows, legend]) + "\n"


COLOURS = {F: "#f4b183", B: "#9dc3e6", I: "#a9d18e", W: "#ffd966"}
_LEGEND = ((F, "forward"), (B, "full backward"), (I, "input-gradient"), (W, "weight-gradient"))


def svg_timeline(result: SimResult, width: int = 1200) -> str:
    """The same timeline as SVG: one row per rank, one colour per op kind, a legend.

    An overlapped pair is drawn as its forward and backward colours side by side (split in
    proportion F : B) inside one thick black border, like the README's "shared black border".
    """
    tl = result.timeline
    left, top, row_h, gap = 64, 34, 22, 4
    scale = width / tl.makespan if tl.makespan else 1.0
    height = top + tl.layout.ranks * (row_h + gap) + 56

    def num(x: float) -> str:
        return f"{x:.2f}".rstrip("0").rstrip(".")

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + max(width, 800) + 16}" '
        f'height="{height}" font-family="monospace" font-size="10">',
        f'<text x="{left}" y="16" font-size="13">'
        + escape(
            f"{result.schedule}: {result.ranks} ranks, {result.microbatches} micro-batches, "
            f"makespan {num(float(result.makespan))}, bubble "
            f"{float(result.bubble_fraction):.2%}"
        )
        + "</text>",
    ]
    t_f, t_b = tl.ticks[F], tl.ticks[B]
    for r, (order, starts) in enumerate(zip(tl.orders, tl.starts, strict=True)):
        y = top + r * (row_h + gap)
        out.append(f'<text x="4" y="{y + 15}">rank {r}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{width}" height="{row_h}" fill="#f2f2f2"/>')
        for op, start in zip(order, starts, strict=True):
            x = left + start * scale
            w = tl.ticks[op.kind] * scale
            raw = op_name(op, tl.layout)
            name = escape(raw)
            title = f"<title>{name} t={num(start / tl.scale)}</title>"
            if op.kind == FB:
                wf = w * t_f / (t_f + t_b)
                out.append(
                    f'<g class="pair">{title}'
                    f'<rect x="{num(x)}" y="{y}" width="{num(wf)}" height="{row_h}" '
                    f'fill="{COLOURS[F]}"/>'
                    f'<rect x="{num(x + wf)}" y="{y}" width="{num(w - wf)}" height="{row_h}" '
                    f'fill="{COLOURS[B]}"/>'
                    f'<rect x="{num(x)}" y="{y}" width="{num(w)}" height="{row_h}" '
                    'fill="none" stroke="#000" stroke-width="2"/></g>'
                )
            else:
                out.append(
                    f'<g class="{op.kind}">{title}<rect x="{num(x)}" y="{y}" width="{num(w)}" '
                    f'height="{row_h}" fill="{COLOURS[op.kind]}" stroke="#fff" '
                    'stroke-width="0.5"/></g>'
                )
            if w >= 8 * len(raw):
                out.append(
                    f'<text x="{num(x + 2)}" y="{y + 15}" pointer-events="none">{name}</text>'
                )
    y = top + tl.layout.ranks * (row_h + gap) + 12
    x = left
    for kind, text in _LEGEND:
        out.append(f'<rect x="{x}" y="{y}" width="14" height="14" fill="{COLOURS[kind]}"/>')
        out.append(f'<text x="{x + 18}" y="{y + 11}">{kind} {text}</text>')
        x += 150
    out.append(
        f'<rect x="{x}" y="{y}" width="14" height="14" fill="none" stroke="#000" '
        f'stroke-width="2"/><text x="{x + 18}" y="{y + 11}">overlapped F&amp;B pair</text>'
    )
    out.append(
        f'<text x="{left}" y="{y + 32}">grey = idle; lower case = the rank\'s second chunk; '
        "number = micro-batch</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
