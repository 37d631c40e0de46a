"""SVG drawn on the server: a memory's timeline, its chain of supersessions, and stacked
bars over days. Every text that reaches the SVG is escaped here; the result is Markup."""

from __future__ import annotations

import datetime as dt

from markupsafe import Markup, escape

# one colour per event type (anything else: grey)
COLOURS = {
    "created": "#2b8a3e",
    "reinforced": "#1971c2",
    "superseded": "#e8590c",
    "archived": "#868e96",
    "expired": "#c92a2a",
    "forgotten": "#862e9c",
    "restored": "#0c8599",
    "merged": "#5f3dc4",
    "compressed": "#5f3dc4",
    "updated": "#f08c00",
    "judge_fallback": "#fab005",
    "keyed": "#495057",
    "corrected": "#e8590c",
    "normalised": "#adb5bd",
}
STATUS_COLOURS = {
    "active": "#d3f9d8",
    "superseded": "#ffe8cc",
    "archived": "#e9ecef",
    "expired": "#ffe3e3",
    "compressed": "#e5dbff",
}
OUTCOME_COLOURS = {
    "ok": "#2b8a3e",
    "repaired": "#0c8599",
    "fallback": "#fab005",
    "bad_answer": "#e8590c",
    "failed": "#c92a2a",
    "unavailable": "#868e96",
}
PALETTE = (
    "#1971c2",
    "#2b8a3e",
    "#e8590c",
    "#862e9c",
    "#c92a2a",
    "#0c8599",
    "#f08c00",
    "#5f3dc4",
    "#495057",
    "#fab005",
)


def _e(text) -> str:
    return str(escape("" if text is None else str(text)))


def timeline(events: list[dict], times: tuple[str, ...] = ("occurred_at",)) -> Markup:
    """Events left to right in the order they happened, each a dot coloured by type with
    its type above and its time(s) below (`times`: the event's time fields to show)."""
    if not events:
        return Markup("")
    step = 130 if len(times) == 1 else 165
    names = {"occurred_at": "recorded"} if len(times) > 1 else {}
    first = 50 if len(times) == 1 else 90  # room for the first event's labels
    width = max(400, first + 10 + step * len(events))
    height = 110 + 16 * (len(times) - 1)
    parts = [
        f'<svg class="timeline" role="img" aria-label="timeline of {len(events)} events" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        f'<line x1="20" y1="50" x2="{width - 20}" y2="50" stroke="#adb5bd" stroke-width="2"/>',
    ]
    for i, event in enumerate(events):
        x = first + step * i
        kind = event.get("event_type") or "?"
        colour = COLOURS.get(kind, "#868e96")
        parts.append(
            f'<g class="event" data-type="{_e(kind)}"><title>{_e(kind)}: '
            f"{_e(str(event.get('detail') or '')[:300])}</title>"
            f'<circle cx="{x}" cy="50" r="9" fill="{colour}"/>'
            f'<text x="{x}" y="30" text-anchor="middle" font-size="12">{_e(kind)}</text>'
        )
        for j, name in enumerate(times):
            value = event.get(name)
            if value:
                label = str(value).replace("T", " ")[:16]
                if len(times) > 1:  # which time is which
                    label = f"{names.get(name, name.removesuffix('_at').replace('_', ' '))} {label}"
                parts.append(
                    f'<text x="{x}" y="{78 + 16 * j}" text-anchor="middle" '
                    f'font-size="10" fill="#495057">{_e(label)}</text>'
                )
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


def chain(nodes: list[dict], href) -> Markup:
    """Boxes left to right joined by arrows: `nodes` are dicts with id, status, text, and
    `current` for the memory whose page this is; `href(id)` links each other box."""
    if not nodes:
        return Markup("")
    box, gap = 190, 50
    width = len(nodes) * box + (len(nodes) - 1) * gap + 20
    parts = [
        f'<svg class="chain" role="img" aria-label="supersession chain" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="96" '
        f'viewBox="0 0 {width} 96">',
        '<defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="9" refY="5" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#495057"/></marker></defs>',
    ]
    for i, node in enumerate(nodes):
        x = 10 + i * (box + gap)
        fill = STATUS_COLOURS.get(str(node.get("status")), "#f1f3f5")
        stroke = "#212529" if node.get("current") else "#adb5bd"
        text = node.get("text") or ""
        text = text if len(text) <= 28 else text[:27] + "…"
        inner = (
            f'<rect x="{x}" y="14" width="{box}" height="64" rx="6" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{2 if node.get("current") else 1}"/>'
            f'<text x="{x + 8}" y="34" font-size="12" font-weight="bold">#{int(node["id"])} '
            f"{_e(node.get('status'))}</text>"
            f'<text x="{x + 8}" y="54" font-size="11">{_e(text)}</text>'
            f'<text x="{x + 8}" y="70" font-size="10" fill="#495057">{_e(node.get("how"))}</text>'
        )
        if node.get("current"):
            parts.append(f'<g class="node current">{inner}</g>')
        else:
            parts.append(
                f'<a class="node" href="{_e(href(node["id"]))}" data-id="{int(node["id"])}">{inner}</a>'
            )
        if i:
            parts.append(
                f'<line x1="{x - gap + 2}" y1="46" x2="{x - 3}" y2="46" '
                'stroke="#495057" stroke-width="2" marker-end="url(#arrow)"/>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def stacked_bars(rows: list[dict], x: str, series: str, value: str, title: str) -> Markup:
    """Bars per `x` (a day), stacked by `series`, of `value`, with a legend."""
    summed: dict[tuple[str, str], float] = {}
    for r in rows:  # one segment per day and series
        key = (r[x] or "?", str(r[series]))
        summed[key] = summed.get(key, 0) + (r[value] or 0)
    rows = [{x: d, series: n, value: v} for (d, n), v in sorted(summed.items())]
    if not any(r[value] for r in rows):
        return Markup(f'<p class="empty">{_e(title)}: nothing logged yet</p>')
    days = sorted({r[x] for r in rows})
    names = sorted({r[series] for r in rows})
    colour = {
        n: COLOURS.get(n) or OUTCOME_COLOURS.get(n) or PALETTE[i % len(PALETTE)] for i, n in enumerate(names)
    }
    totals = {d: 0 for d in days}
    for r in rows:
        totals[r[x]] += r[value]
    top = max(totals.values()) or 1
    bar = max(6, min(40, 700 // len(days)))
    width, plot = max(420, 60 + len(days) * (bar + 4) + 180), 160
    parts = [
        f'<svg class="bars" role="img" aria-label="{_e(title)}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{plot + 60}" '
        f'viewBox="0 0 {width} {plot + 60}"><title>{_e(title)}</title>',
        f'<text x="0" y="12" font-size="12" font-weight="bold">{_e(title)}</text>'
        f'<text x="50" y="26" font-size="10" fill="#495057">max {top:g}</text>',
        f'<line x1="50" y1="{plot + 36}" x2="{60 + len(days) * (bar + 4)}" '
        f'y2="{plot + 36}" stroke="#adb5bd"/>',
    ]
    for i, day in enumerate(days):
        bx, base = 55 + i * (bar + 4), float(plot + 36)
        for r in (r for r in rows if r[x] == day):
            h = (r[value] or 0) / top * plot
            base -= h
            parts.append(
                f'<rect x="{bx}" y="{base:.1f}" width="{bar}" height="{h:.1f}" '
                f'fill="{colour[r[series]]}"><title>{_e(day)} {_e(r[series])}: '
                f"{_e(r[value])}</title></rect>"
            )
        if i % max(1, len(days) // 8) == 0:
            parts.append(f'<text x="{bx}" y="{plot + 50}" font-size="9">{_e(day[5:])}</text>')
    lx = 70 + len(days) * (bar + 4)
    for j, name in enumerate(names[:10]):
        parts.append(
            f'<rect x="{lx}" y="{30 + 16 * j}" width="10" height="10" '
            f'fill="{colour[name]}"/><text x="{lx + 14}" y="{39 + 16 * j}" '
            f'font-size="11">{_e(name)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def curve(points: list[tuple[str, float]], now: str, threshold=None, title: str = "") -> Markup:
    """A line of (ISO time, value 0..1) points over time, with today marked and, when
    given, a threshold (the policy's archive_below) dashed."""
    if len(points) < 2:
        return Markup("")
    width, height, left, top, plot_w, plot_h = 640, 190, 40, 24, 580, 130
    first, last = points[0][0], points[-1][0]
    span = max(1.0, _seconds(first, last))

    def x(t: str) -> float:
        return left + plot_w * _seconds(first, t) / span

    def y(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(1.0, v)))

    line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
    parts = [
        f'<svg class="curve" role="img" aria-label="{_e(title)}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><title>{_e(title)}</title>',
        f'<text x="0" y="12" font-size="12" font-weight="bold">{_e(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#adb5bd"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#adb5bd"/>',
        f'<text x="{left - 6}" y="{top + 4}" font-size="10" text-anchor="end">1</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" font-size="10" text-anchor="end">0</text>',
    ]
    if isinstance(threshold, (int, float)) and 0 <= threshold <= 1:
        parts.append(
            f'<line x1="{left}" y1="{y(threshold):.1f}" x2="{left + plot_w}" '
            f'y2="{y(threshold):.1f}" stroke="#c92a2a" stroke-dasharray="4 3"/>'
            f'<text x="{left + plot_w}" y="{y(threshold) - 4:.1f}" font-size="10" '
            f'text-anchor="end" fill="#c92a2a">archive below {threshold:g}</text>'
        )
    if first <= now <= last:
        parts.append(
            f'<line x1="{x(now):.1f}" y1="{top}" x2="{x(now):.1f}" y2="{top + plot_h}" '
            f'stroke="#1971c2" stroke-dasharray="2 2"/><text x="{x(now):.1f}" '
            f'y="{top - 2}" font-size="10" text-anchor="middle" fill="#1971c2">now</text>'
        )
    parts.append(f'<polyline points="{line}" fill="none" stroke="#2b8a3e" stroke-width="2"/>')
    parts.append(
        f'<text x="{left}" y="{top + plot_h + 16}" font-size="10">{_e(first[:10])}</text>'
        f'<text x="{left + plot_w}" y="{top + plot_h + 16}" font-size="10" '
        f'text-anchor="end">{_e(last[:10])}</text></svg>'
    )
    return Markup("".join(parts))


def _seconds(a: str, b: str) -> float:
    try:
        return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()
    except (ValueError, TypeError):  # a time Lethe did not write, or naive against aware
        return 0.0
