"""The experiment report: one self-contained HTML page that loads nothing from anywhere.

The page opens with what each policy did (stale recalls, what it kept, superseded and
forgot, and the recalls where one went stale) and the policies side by side: one chart per
measure (memories of each status, stale recalls so far) with a line per policy, all
scenarios summed, on one scale. Then the matrix of expectations met, the per-policy summary,
every missed expectation, and per policy its memory counts by status over simulated time
(all scenarios summed, then one panel per scenario, each on the scale every policy's panel
of that scenario shares), drawn by matplotlib as SVG and inlined, and per run what was
recalled (stale recalls marked) and what changed.
"""

from __future__ import annotations

import html
import io
import os
import re
import textwrap

from engine.apps.experiment import Experiment, Run
from engine.base.clock import parse_time
from engine.base.distribution import extra_error
from engine.base.errors import LetheError
from engine.policy import STATUSES

COLORS = {
    "active": "#2e7d32",
    "archived": "#757575",
    "superseded": "#ef6c00",
    "expired": "#c62828",
    "compressed": "#6a1b9a",
}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}h3{margin-bottom:.3em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:.25em .6em;
text-align:left}th{background:#f5f5f5}td.num{text-align:right}
td.ok{background:#e8f5e9}td.fail{background:#ffebee}.stale{color:#c62828;font-weight:600}
.muted{color:#777}code{background:#f5f5f5;padding:0 .2em}svg{max-width:100%;height:auto}
details{margin:.3em 0}summary{cursor:pointer}li{margin:.15em 0}
"""


def check_path(path: str) -> None:
    """Refuse a report path that cannot be written, and a missing matplotlib, before an
    experiment runs for minutes only to lose its table at the end."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise LetheError(f"--report {path} is a folder: give a file name (e.g. {path}/experiment.html)")
    if not os.path.isdir(folder):
        raise LetheError(f"--report {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise LetheError(f"--report {path}: cannot write there")
    _pyplot()


def write_report(exp: Experiment, path: str) -> None:
    """Write the report for `exp` to `path` (UTF-8 HTML, no external resources)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(exp))


def render(exp: Experiment) -> str:
    missed = len(exp.missed())
    parts = [
        f"<h1>Lethe experiment: {len(exp.scenarios)} scenario(s) &times; "
        f"{len(exp.policies)} polic{'y' if len(exp.policies) == 1 else 'ies'}</h1>",
        f"<p>Judges: {'offline rules' if exp.offline else 'as each policy declares'}.</p>",
        "<h2>What each policy did</h2>",
        _comparison(exp),
        "<h3>The policies side by side</h3>",
        side_by_side(exp),
        _stale_recalls(exp),
        "<h2>Expectations met</h2>",
        f"<p>{'Every expectation holds.' if exp.ok else f'{missed} expectation(s) missed (below).'}</p>",
        _matrix(exp),
        "<h2>Per policy</h2>",
        _summary(exp),
        _missed(exp),
    ]
    total_top, scenario_tops = _scales(exp)
    for p in exp.policies:
        runs = [r for r in exp.runs if r.policy is p]
        parts += [
            f"<h2>Policy <code>{_e(p.name)}</code></h2>",
            f"<p class=muted>{_e(p.description)}</p>" if p.description else "",
            "<h3>Memories by status, all scenarios summed</h3>",
            total_chart(p.name, runs, total_top),
            "<h3>Memories by status, per scenario</h3>",
            scenario_charts(p.name, runs, scenario_tops),
            "<h3>Runs</h3>",
            *[_run_details(r) for r in runs],
        ]
    body = "\n".join(parts)
    return (
        f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>Lethe experiment</title><style>{CSS}</style></head>\n<body>\n{body}\n"
        "</body></html>\n"
    )


def _e(text) -> str:
    return html.escape(str(text), quote=True)


# ---- tables -------------------------------------------------------------------------
def _comparison(exp: Experiment) -> str:
    """Per policy, over all scenarios: stale recalls, what it kept, superseded, forgot."""
    head = (
        "policy",
        "stale recalls",
        "kept (active)",
        "superseded",
        "forgot (archived)",
        "expired",
        "compressed",
        "judge fallbacks",
    )
    rows = []
    for name, s in exp.summary().items():
        c = s["counts"]
        stale = f"{s['stale_recalls']} of {s['recalls']}"
        cells = [
            stale,
            c["active"],
            c["superseded"],
            c["archived"],
            c["expired"],
            c["compressed"],
            s["fallbacks"],
        ]
        mark = " class='num fail'" if s["stale_recalls"] else " class='num ok'"
        rows.append(
            f"<tr><td><code>{_e(name)}</code></td><td{mark}>{_e(stale)}</td>"
            + "".join(f"<td class=num>{_e(v)}</td>" for v in cells[1:])
            + "</tr>"
        )
    return (
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(rows)
        + "</table><p class=muted>A stale recall returned a memory the scenario marks as "
        "replaced. Counts are memories at the end of each scenario, summed.</p>"
    )


def _stale_recalls(exp: Experiment) -> str:
    """Each recall where some policy returned a stale memory, with what every policy
    returned for it side by side."""
    rows = []
    for s in exp.scenarios:
        runs = [exp.run(s, p) for p in exp.policies]
        for i, first in enumerate(runs[0].playback.recalls):
            got = [r.playback.recalls[i] if i < len(r.playback.recalls) else None for r in runs]
            if not any(g and g["stale"] for g in got):
                continue
            cells = "".join(f"<td>{_recalled(g)}</td>" for g in got)
            rows.append(
                f"<tr><td>{_e(s.name)}<br><span class=muted>{_e(first['at'][:10])}"
                f"</span></td><td>{_e(first['query'])}</td>{cells}</tr>"
            )
    if not rows:
        return "<p>No policy recalled a stale memory.</p>"
    head = "".join(f"<th>{_e(p.name)} recalled</th>" for p in exp.policies)
    return (
        "<h3>Where a policy recalled something stale</h3><table><tr><th>scenario</th>"
        f"<th>query</th>{head}</tr>{''.join(rows)}</table>"
    )


def _recalled(x) -> str:
    if not x:
        return "<span class=muted>-</span>"
    return (
        "; ".join(
            f"<span class=stale>{_e(c)} (stale)</span>" if c in x["stale"] else _e(c) for c in x["recalled"]
        )
        or "<span class=muted>nothing</span>"
    )


def _matrix(exp: Experiment) -> str:
    head = "".join(f"<th>{_e(p.name)}</th>" for p in exp.policies)
    rows = []
    for s in exp.scenarios:
        cells = []
        for p in exp.policies:
            r = exp.run(s, p)
            cells.append(f"<td class='num {'ok' if r.ok else 'fail'}'>{r.met}/{r.total}</td>")
        rows.append(
            f"<tr><td>{_e(s.name)}<br><span class=muted>{_e(s.file)}</span></td>{''.join(cells)}</tr>"
        )
    return f"<table><tr><th>scenario</th>{head}</tr>{''.join(rows)}</table>"


def _summary(exp: Experiment) -> str:
    head = (
        "policy",
        "expectations",
        *STATUSES,
        "stale recalls",
        "model calls",
        "rules calls",
        "fallbacks",
        "tokens",
    )
    rows = []
    for name, s in exp.summary().items():
        cells = [
            f"{s['met']}/{s['total']}",
            *[s["counts"][st] for st in STATUSES],
            f"{s['stale_recalls']}/{s['recalls']}",
            s["model_calls"],
            s["rules_calls"],
            s["fallbacks"],
            s["tokens"],
        ]
        rows.append(
            f"<tr><td>{_e(name)}</td>" + "".join(f"<td class=num>{_e(c)}</td>" for c in cells) + "</tr>"
        )
    return (
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(rows)
        + "</table><p class=muted>Counts are at the end of each scenario, summed. A stale "
        "recall returned a memory the scenario had marked as replaced.</p>"
    )


def _missed(exp: Experiment) -> str:
    missed = exp.missed()
    if not missed:
        return ""
    items = "".join(
        f"<li><code>{_e(m['file'])}:{m['line']}</code> [{_e(m['policy'])}] "
        f"{_e(m['what'])}<br><span class=muted>{_e(m['detail'])}</span></li>"
        for m in missed
    )
    return f"<h2>Missed expectations ({len(missed)})</h2><ul>{items}</ul>"


def _run_details(r: Run) -> str:
    pb = r.playback
    recalls = "".join(
        f"<li>{_e(x['at'])} <b>{_e(x['query'])}</b>: "
        + (
            "; ".join(
                f"<span class=stale>{_e(c)}</span>" if c in x["stale"] else _e(c) for c in x["recalled"]
            )
            or "<span class=muted>nothing</span>"
        )
        + "</li>"
        for x in pb.recalls
    )
    changes = "".join(
        f"<li>{_e(c['at'])} <b>{_e(c['status'])}</b>: {_e(c['content'])}"
        + (f" <span class=muted>&rarr; {_e(c['by'])}</span>" if c["by"] else "")
        + "</li>"
        for c in r.changes
    )
    runs = ", ".join(f"{n} &times;{k}" for n, k in sorted(pb.pass_runs.items())) or "none"
    status = "ok" if r.ok else "missed some"
    return (
        f"<details><summary>{_e(r.scenario.name)}: {r.met}/{r.total} ({status})</summary>"
        f"<p>Passes run: {runs}. Model calls: {r.model.get('calls', 0)}, tokens: "
        f"{r.model.get('tokens', 0)}.{' Error: ' + _e(r.error) if r.error else ''}</p>"
        f"<p>Recalls:</p><ul>{recalls or '<li class=muted>none</li>'}</ul>"
        f"<p>Changes:</p><ul>{changes or '<li class=muted>none</li>'}</ul></details>"
    )


# ---- charts -------------------------------------------------------------------------
MEASURES = (*STATUSES, "stale recalls")
POLICY_COLORS = ("#1565c0", "#d84315", "#2e7d32", "#6a1b9a", "#00838f", "#f9a825", "#4e342e", "#ad1457")


def side_by_side(exp: Experiment) -> str:
    """One chart per measure, a line per policy: memories of each status and stale recalls
    so far, all scenarios summed by day since each began, every policy on the chart's one
    scale, so the better policy shows as the lower or higher line."""
    plt = _pyplot()
    cols = 3
    rows = -(-len(MEASURES) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11, 3.1 * rows), squeeze=False)
    for ax, measure in zip(axes.flat, MEASURES):
        for i, p in enumerate(exp.policies):
            runs = [r for r in exp.runs if r.policy is p]
            days, values = stale_so_far(runs) if measure == "stale recalls" else _one(summed(runs), measure)
            _line(ax, days, values, p.name, i, len(exp.policies))
        ax.set_title(measure if measure == "stale recalls" else f"{measure} memories", fontsize=10)
        ax.set_xlabel("days since the scenario started", fontsize=8)
        ax.set_ylabel("stale recalls so far" if measure == "stale recalls" else "memories", fontsize=8)
        _axes(ax)
        ax.set_ylim(bottom=-0.04 * ax.get_ylim()[1])  # a line at 0 shows above the axis
    for ax in list(axes.flat)[len(MEASURES) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=min(6, len(labels)), fontsize=9, frameon=False)
    _layout(fig, rows, cols, left=0.65, right=0.2, top=0.35, bottom=0.95, wgap=0.7, hgap=0.85)
    return _svg(fig, "side-by-side")


def stale_so_far(runs: list[Run]) -> tuple[list[float], list[int]]:
    """Stale recalls so far, summed over the runs, at every day one of them recalled."""
    points = sorted(
        (parse_time(x["at"]) - r.scenario.start).total_seconds() / 86400
        for r in runs
        for x in r.playback.recalls
        if x["stale"]
    )
    days = sorted({pt["day"] for r in runs for pt in r.playback.timeline[:1]} | set(points)) or [0.0]
    last = max([pt["day"] for r in runs for pt in r.playback.timeline] + days)
    days = days + ([last] if last > days[-1] else [])
    return days, [sum(1 for p in points if p <= d) for d in days]


def _one(summed_: tuple[list[float], dict[str, list[int]]], status: str) -> tuple[list[float], list[int]]:
    days, series = summed_
    return days, series[status]


def _line(ax, days, values, label: str, i: int, n: int) -> None:
    """A policy's line: its own colour, and thinner than the one before it, so lines with
    equal values stay visible on top of each other."""
    if days:
        days = days + [days[-1] + max(0.5, 0.04 * (days[-1] - days[0]))]
        values = values + values[-1:]
    ax.plot(
        days,
        values,
        drawstyle="steps-post",
        color=POLICY_COLORS[i % len(POLICY_COLORS)],
        label=label,
        linewidth=1.2 + 2.8 * (n - 1 - i) / max(1, n - 1),
        linestyle="-" if i % 2 == 0 else (0, (4, 2)),
    )


def _scales(exp: Experiment) -> tuple[float, dict[str, float]]:
    """The top of the y axis shared by every policy's charts: one for the summed chart,
    one per scenario, so a policy's panel reads against another's."""
    total = 1.0
    per_scenario: dict[str, float] = {}
    for p in exp.policies:
        runs = [r for r in exp.runs if r.policy is p]
        total = max(total, *(max(v, default=0) for v in summed(runs)[1].values()))
        for r in runs:
            top = max((max(v, default=0) for v in summed([r])[1].values()), default=0)
            per_scenario[r.scenario.file] = max(per_scenario.get(r.scenario.file, 1.0), top)
    return total * 1.05, {k: v * 1.05 for k, v in per_scenario.items()}


def total_chart(key: str, runs: list[Run], top: float | None = None) -> str:
    """One panel: counts by status summed over the runs, by day since each scenario began."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    days, series = summed(runs)
    _plot(ax, days, series)
    if top:
        ax.set_ylim(0, top)
    ax.set_xlabel("days since the scenario started")
    ax.set_ylabel("memories")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    _layout(fig, 1, 1, left=0.7, right=1.3, top=0.15, bottom=0.55)
    return _svg(fig, f"total-{key}")


def scenario_charts(key: str, runs: list[Run], tops: dict[str, float] | None = None) -> str:
    """Small multiples: one panel per scenario, its whole title wrapped, its axes named."""
    plt = _pyplot()
    cols = min(3, len(runs))
    rows = -(-len(runs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.8 * cols, 2.9 * rows), squeeze=False)
    for ax, r in zip(axes.flat, runs):
        days, series = summed([r])
        _plot(ax, days, series)
        if tops and r.scenario.file in tops:
            ax.set_ylim(0, tops[r.scenario.file])
        ax.set_title("\n".join(textwrap.wrap(r.scenario.name, 40)), fontsize=8)
        ax.set_xlabel("days", fontsize=7)
        ax.set_ylabel("memories", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(runs) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=len(STATUSES), fontsize=8, frameon=False)
    _layout(fig, rows, cols, left=0.55, right=0.15, top=0.45, bottom=0.8, wgap=0.6, hgap=0.85)
    return _svg(fig, f"runs-{key}")


def _layout(fig, rows: int, cols: int, *, left, right, top, bottom, wgap=0.0, hgap=0.0) -> None:
    """Margins and gaps in inches, room enough for the titles, labels and legend drawn: a
    fixed layout costs no draw (matplotlib's tight layout draws the figure once more to
    measure it, which took half the report's time)."""
    width, height = fig.get_size_inches()
    w = (width - left - right - (cols - 1) * wgap) / cols
    h = (height - top - bottom - (rows - 1) * hgap) / rows
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        wspace=wgap / w,
        hspace=hgap / h,
    )


def summed(runs: list[Run]) -> tuple[list[float], dict[str, list[int]]]:
    """Counts by status at every day any run sampled, each run holding its last sample."""
    days = sorted({pt["day"] for r in runs for pt in r.playback.timeline})
    series = {s: [0] * len(days) for s in STATUSES}
    for r in runs:
        line, j = r.playback.timeline, -1
        for i, d in enumerate(days):
            while j + 1 < len(line) and line[j + 1]["day"] <= d:
                j += 1
            if j >= 0:
                for s in STATUSES:
                    series[s][i] += line[j]["counts"].get(s, 0)
    return days, series


# Lines with equal values lie on top of each other: each status is drawn thinner than the
# one before it and dashed its own way, so every line stays visible where they coincide.
WIDTHS = {"active": 4.2, "archived": 3.4, "superseded": 2.6, "expired": 1.8, "compressed": 1.1}
DASHES = {
    "active": "-",
    "archived": "-",
    "superseded": (0, (5, 2)),
    "expired": (0, (2, 2)),
    "compressed": (0, (1, 1.5)),
}


def _plot(ax, days, series) -> None:
    # hold the last counts a little past the end, so a change on the last step shows
    days = days + [days[-1] + max(0.5, 0.04 * (days[-1] - days[0]))] if days else days
    for status in STATUSES:
        values = series[status] + series[status][-1:]
        ax.plot(
            days,
            values,
            drawstyle="steps-post",
            color=COLORS[status],
            label=status,
            linewidth=WIDTHS[status],
            linestyle=DASHES[status],
        )
    _axes(ax)


def _axes(ax) -> None:
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    ax.grid(alpha=0.25)
    ax.yaxis.get_major_locator().set_params(integer=True)


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise extra_error(exc, "report", "--report (matplotlib)", ("matplotlib",)) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _svg(fig, salt: str) -> str:
    """The figure as an inline <svg> element: text kept as text, stable ids, no metadata."""
    import matplotlib
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return f"<div class=chart>{text}</div>"
