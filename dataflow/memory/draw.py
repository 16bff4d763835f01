"""Text and SVG views of a :class:`~dataflow.memory.planner.MemoryPlan`.

The SVG is Owl's figure in another form: time (the evaluation order) runs left to
right, arena offsets top to bottom, each value a rectangle over the events it is
live, coloured by zone; loop bodies are shaded. It is written by hand (no
dependency).
"""
from __future__ import annotations

from html import escape

__all__ = ["ZONE_COLOURS", "summary", "to_svg"]

ZONE_COLOURS = {
    "forward": "#4e79a7", "gradient": "#e15759", "optimizer": "#59a14f",
    "workspace": "#b07aa1", "variables": "#f28e2b", "constants": "#9c755f",
    "feeds": "#76b7b2", "fetches": "#edc948",
}


def _mib(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def summary(plan, top: int = 10) -> str:
    """The plan's totals, zones, loops and ``top`` largest buffers, as text."""
    lines = [
        (f"peak {_mib(plan.peak_bytes)} = arena {_mib(plan.arena_bytes)} + pinned "
        f"{_mib(plan.pinned_bytes)} + stacks {_mib(plan.stack_bytes_for())} + scratch "
        f"{_mib(plan.scratch_bytes)} + runtime {_mib(plan.runtime_bytes)}"),
        (f"lower bound {_mib(plan.lower_bound_bytes)} (peak / lower bound "
        f"{plan.peak_bytes / max(plan.lower_bound_bytes, 1):.3f}); no reuse "
        f"{_mib(plan.naive_bytes)} (naive / peak {plan.naive_bytes / max(plan.peak_bytes, 1):.2f})"),
        (f"{len(plan.buffers)} buffers, {len(plan.blocks)} arena blocks, "
        f"{len(plan.in_place)} written in place"),
        "zones:",
    ]
    for zone, n in plan.zones.items():
        if n:
            lines.append(f"  {zone:<11} {_mib(n):>12}")
    if plan.trip_counts:
        lines.append("loops (trip counts): " + ", ".join(
            f"{k}={v if v is not None else '?'}" for k, v in sorted(plan.trip_counts.items())))
    for s in plan.stacks:
        where = "host" if s.host else "device"
        lines.append(f"  stack {s.name}: {_mib(s.elem_bytes)} per push x "
                     f"{' x '.join(s.loops) or '1'} ({where})")
    lines.append("largest buffers:")
    for b in sorted(plan.buffers, key=lambda b: -b.size)[:top]:
        where = "pinned" if b.pinned else f"@{b.offset}"
        lines.append(f"  {b.name:<48} {_mib(b.size):>12} {b.zone:<10} {where}"
                     f" live {b.first_use}..{b.last_use}")
    return "\n".join(lines)


def to_svg(plan, path, width: int = 960) -> str:
    """Write the arena picture to ``path`` (returns the SVG text)."""
    arena = [b for b in plan.buffers if not b.pinned]
    n_events = max(len(plan.order), 1)
    height = 480
    left, top, right, bottom = 70, 30, 160, 40
    w, h = width - left - right, height - top - bottom
    scale_y = h / max(plan.arena_bytes, 1)
    scale_x = w / n_events
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">'),
             (f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#f7f7f7" '
             f'stroke="#999"/>')]
    parts += _loop_shading(plan, left, top, h, scale_x)
    for b in arena:
        x = left + b.first_use * scale_x
        y = top + b.offset * scale_y
        bw = max((b.last_use - b.first_use + 1) * scale_x, 0.5)
        bh = max(b.size * scale_y, 0.5)
        parts.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{bw:.2f}" height="{bh:.2f}" '
                     f'fill="{ZONE_COLOURS.get(b.zone, "#888")}" fill-opacity="0.85" '
                     f'stroke="#333" stroke-width="0.3"><title>{escape(b.name)} '
                     f'{b.size} B ({b.zone}, frame {escape(b.frame or "root")})</title></rect>')
    parts.append(f'<text x="{left}" y="{top - 10}">arena {_mib(plan.arena_bytes)}, '
                 f'peak {_mib(plan.peak_bytes)}, lower bound {_mib(plan.lower_bound_bytes)}'
                 f'</text>')
    parts.append(f'<text x="{left}" y="{height - 12}">evaluation order '
                 f'({n_events} events) &#8594;</text>')
    parts.append(f'<text x="8" y="{top + 12}">offset 0</text>')
    parts.append(f'<text x="8" y="{top + h}">{_mib(plan.arena_bytes)}</text>')
    for i, (zone, colour) in enumerate(ZONE_COLOURS.items()):
        y = top + 14 * i
        parts.append(f'<rect x="{left + w + 12}" y="{y}" width="10" height="10" '
                     f'fill="{colour}"/><text x="{left + w + 26}" y="{y + 9}">{zone}</text>')
    parts.append("</svg>")
    text = "\n".join(parts) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


def _loop_shading(plan, left, top, h, scale_x) -> list:
    """A light band over each while loop's stretch of the order."""
    out, begins = [], {}
    for i, (kind, name) in enumerate(plan.order):
        if name in plan.trip_counts:
            if kind == "begin":
                begins[name] = i
            elif kind == "end" and name in begins:
                x0 = left + begins[name] * scale_x
                out.append(f'<rect x="{x0:.2f}" y="{top}" width="{(i - begins[name]) * scale_x:.2f}"'
                           f' height="{h}" fill="#ffe9a8" fill-opacity="0.5">'
                           f'<title>loop {escape(name)}</title></rect>')
    return out
