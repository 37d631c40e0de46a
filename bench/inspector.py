"""Inspector benchmark (`lethe ui`): how long its pages take on adopted databases of N rows.

Each page is asked through the whole app (the token guard, Starlette, the `Memory` reads,
the Jinja templates, the SVG) in-process, over the store opened read-only as
`lethe ui --read-only` opens it: the memories page (first page, counts per status and the
filter lists included), the same filtered to superseded, its next page (keyset), a text
filter, and a memory's page (a superseded memory, with its chain, timeline and turn).
Goal: each at most 200 ms median at 1M (the inspector issue's). The counts per status, kinds
and scenes the memories page shows are kept by the app for a minute; the page with them
read again is shown for reference.
"""

from __future__ import annotations

import math
import re
import statistics
import time

from . import datasets as D

GOAL_MS = 200.0
CALLS = 30
TOKEN = "bench-token-123"


def _timed(client, path: str, calls: int, before=None) -> list[float]:
    for _ in range(2):  # warm-up: templates compiled, pages cached by SQLite
        assert client.get(path).status_code == 200, path
    out = []
    for _ in range(calls):
        if before is not None:
            before()
        t0 = time.perf_counter()
        r = client.get(path)
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, (path, r.status_code)
    return out


def _p99(xs: list[float]) -> float:
    s = sorted(xs)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


def bench(sizes, log=print, calls: int = CALLS) -> tuple[list[dict], list[str]]:
    from starlette.testclient import TestClient

    from engine import FixedClock, Memory
    from engine.apps.inspector.app import Inspector
    from engine.apps.inspector.server import prepare

    rows, problems = [], []
    for n in sizes:
        path = str(D.adopted(n, log))

        def opener(ns, path=path):
            return Memory(
                path, policy=str(D.POLICY), namespace=ns, clock=FixedClock(D.T), read_only=True, offline=True
            )

        t0 = time.perf_counter()
        inspector = Inspector(opener, "default", read_only=True)
        app, _ = prepare(inspector, "127.0.0.1", 8765, TOKEN)
        client = TestClient(app, base_url="http://127.0.0.1:8765")
        assert client.get(f"/memories?token={TOKEN}").status_code == 200
        log(f"  inspector {D.label(n)}: opened and first page in {time.perf_counter() - t0:.2f} s")
        first = client.get("/memories?status=superseded").text
        superseded = re.search(r'<tr data-id="(\d+)"', first)
        nxt = re.search(r'<a href="([^"]+)" id="next"', first)
        pages = [("memories page", "/memories"), ("memories page, superseded", "/memories?status=superseded")]
        if nxt:
            pages.append(("memories page, superseded, next page", nxt.group(1).replace("&amp;", "&")))
        pages.append(("memories page, text filter", "/memories?text=project"))
        pages.append(("memories page, active by rank", "/memories?status=active&sort=rank"))
        if superseded:
            pages.append(("memory's page (superseded)", f"/memory/{superseded.group(1)}"))
        else:
            problems.append(f"inspector {D.label(n)}: no superseded memory to open")
        pages.append(("memory's page (active)", "/memory/%d" % _an_active(inspector)))
        for label, url in pages:
            ms = _timed(client, url, calls)
            med = statistics.median(ms)
            rows.append(
                {
                    "measure": f"inspector: {label} (ms)",
                    "n": n,
                    "value": med,
                    "goal": GOAL_MS,
                    "absolute_goal": True,
                    "note": f"median of {calls}; p99 {_p99(ms):.1f} ms; {url}",
                }
            )
            log(f"  inspector {D.label(n)} {label}: median {med:.1f} ms, p99 {_p99(ms):.1f} ms")
        cold = _timed(client, "/memories", max(3, calls // 5), before=inspector._overviews.clear)
        rows.append(
            {
                "measure": "inspector: memories page, counts read again (ms)",
                "n": n,
                "value": statistics.median(cold),
                "goal": GOAL_MS,
                "absolute_goal": True,
                "informative": True,
                "note": "the counts per status, kinds and scenes read every row of the "
                "namespace; the app keeps them a minute (or until an edit)",
            }
        )
        log(
            f"  inspector {D.label(n)} memories page, counts read again: median "
            f"{statistics.median(cold):.1f} ms"
        )
        client.close()
        inspector.close()
    return rows, problems


def _an_active(inspector) -> int:
    records, _ = inspector.memory(None).browse({"status": "active"}, limit=1)
    return records[0].id
