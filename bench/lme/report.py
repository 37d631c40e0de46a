"""The results as a plain table, a Markdown section for bench/RESULTS.md, and one
self-contained HTML page in the experiment report's style (engine/apps/report.py)."""

from __future__ import annotations

import html

from .metrics import Row
from .play import FATES

HEAD = (
    "system",
    "type",
    "n",
    "evidence recall",
    "stale",
    "answer in ctx",
    "recalled",
    "ctx chars",
    "~ctx tokens",
    "calls/q",
    "model tokens/q",
    "s/q",
    "cpu s/q",
    "QA",
)


def _pct(hit: int, n: int) -> str:
    return f"{hit}/{n} ({100 * hit / n:.0f}%)" if n else "-"


def cells(r: Row) -> tuple[str, ...]:
    qa = "not run" if r.qa is None else _pct(*r.qa)
    return (
        r.system,
        r.qtype,
        str(r.n),
        _pct(*r.evidence),
        _pct(*r.stale),
        _pct(r.in_context, r.n),
        f"{r.recalled:.1f}",
        f"{r.chars:,.0f}",
        f"{r.approx_tokens:,.0f}",
        f"{r.calls:.1f}",
        f"{r.tokens:,.0f}",
        f"{r.seconds:.2f}",
        f"{r.cpu:.2f}",
        qa,
    )


def miss_cells(r: Row) -> tuple[str, ...]:
    total = sum(r.misses.values())
    return (r.system, r.qtype, str(total), *(str(r.misses.get(f, 0)) for f in MISS_COLUMNS))


MISS_COLUMNS = (
    "never stored",
    "stored without the answer",
    "reinforced only",
    "pending",
    "archived",
    "expired",
    "superseded",
    "compressed",
    "active",
    "error",
)
MISS_HEAD = (
    "system",
    "type",
    "misses",
    *[("active, not recalled" if f == "active" else f) for f in MISS_COLUMNS],
)
assert set(FATES) <= set(MISS_COLUMNS)


def text_table(head, rows) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def fmt(r):
        return "  ".join(s.ljust(w) if i < 2 else s.rjust(w) for i, (s, w) in enumerate(zip(r, widths)))

    return "\n".join([fmt(head), "  ".join("-" * w for w in widths), *map(fmt, rows)])


def md_table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def text(rows: list[Row]) -> str:
    return (
        text_table(HEAD, [cells(r) for r in rows]) + "\n\nwhere the newest evidence went, "
        "for each miss:\n" + text_table(MISS_HEAD, [miss_cells(r) for r in rows])
    )


def markdown(rows: list[Row], header: str) -> str:
    misses = md_table(MISS_HEAD, [miss_cells(r) for r in rows])
    return (
        f"{header}\n\n{md_table(HEAD, [cells(r) for r in rows])}\n\nWhere the newest "
        f"evidence went, for each miss:\n\n{misses}\n"
    )


# ---- HTML -----------------------------------------------------------------------------
def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _html_table(head, rows) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=num' if i > 1 else ''}>{_e(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def _bars(rows: list[Row], qtype: str) -> str:
    """Evidence recall per system for one question type, as horizontal bars."""
    out = [f"<h3>{_e(qtype)}</h3><table>"]
    for r in (r for r in rows if r.qtype == qtype):
        hit, n = r.evidence
        pct = 100 * hit / n if n else 0
        stale = f" &middot; stale {_e(_pct(*r.stale))}" if r.stale[1] else ""
        out.append(
            f"<tr><td>{_e(r.system)}</td><td style='width:420px'><div style='background:"
            f"#2e7d32;height:14px;width:{pct:.1f}%'></div></td><td class=num>"
            f"{_e(_pct(hit, n))}{stale}</td></tr>"
        )
    return "".join(out) + "</table>"


def _examples(grades, golds, outcomes, limit: int = 40) -> str:
    """Some misses in full: the question, what was recalled, where the evidence went."""
    items = []
    for g in [g for g in grades if g.miss][:limit]:
        out = outcomes.get((g.system, g.qid))
        recalled = "".join(f"<li>{_e(i.text[:300])}</li>" for i in out.items) if out else ""
        items.append(
            f"<details><summary><code>{_e(g.system)}</code> {_e(g.qid)} "
            f"({_e(g.qtype)}): {_e(g.miss)}</summary><p>{_e(golds[g.qid][0])}</p>"
            f"<p class=muted>gold: {_e(golds[g.qid][1])}</p><ul>{recalled}</ul></details>"
        )
    return "".join(items) or "<p>No misses.</p>"


def page(rows: list[Row], header: str, grades, golds, outcomes) -> str:
    from engine.apps.report import CSS

    types = list(dict.fromkeys(r.qtype for r in rows))
    parts = [
        f"<h1>Lethe on LongMemEval</h1><p>{_e(header)}</p>",
        "<h2>Evidence recall per question type</h2>",
        *[_bars(rows, t) for t in types],
        "<h2>All figures</h2>",
        _html_table(HEAD, [cells(r) for r in rows]),
        "<h2>Where the newest evidence went, for each miss</h2>",
        _html_table(MISS_HEAD, [miss_cells(r) for r in rows]),
        "<h2>Misses</h2>",
        _examples(grades, golds, outcomes),
    ]
    return (
        f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>Lethe on "
        f"LongMemEval</title><style>{CSS}</style></head>\n<body>\n{''.join(parts)}\n"
        "</body></html>\n"
    )
