"""The inspector (`lethe ui`) over plain HTTP: the token, bind, Host and Origin rules, the
pages on both backends, keyset paging, escaping, and the edits (each an event; none with
--read-only). The browser drives it in tests/test_inspector_browser.py."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("starlette", reason="the inspector needs the ui extra: pip install -e '.[ui]'")
from starlette.testclient import TestClient

from engine import Memory
from engine.apps.inspector.app import Inspector
from engine.apps.inspector.server import prepare
from engine.base.errors import LetheError
from engine.integrations.httpguard import LINK
from engine.integrations.httpguard import check_bind as check_any_bind
from tests.helpers import ROOT, store_of

pytestmark = pytest.mark.both_backends
TOKEN = "test-token-123"
PORT = 8765


def client(memory, read_only=False, token=TOKEN, host="127.0.0.1"):
    opened = {}

    def opener(ns):
        opened[ns] = memory("lifecycle", namespace=ns, read_only=read_only)
        return opened[ns]

    app, token = prepare(Inspector(opener, "default", read_only), host, PORT, token)
    return TestClient(app, base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)


def signed_in(memory, **kw) -> TestClient:
    c = client(memory, **kw)
    assert c.get(f"/memories?token={TOKEN}").status_code == 200  # sets the cookie
    return c


def ids_on(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-id="(\d+)"', page)]


# ---- who may talk to it ----------------------------------------------------------------
def test_a_request_without_the_token_is_refused(memory):
    c = client(memory)
    assert c.get("/memories").status_code == 401
    assert c.get("/memories?token=wrong-token-1").status_code == 401
    ok = c.get(f"/memories?token={TOKEN}")
    assert ok.status_code == 200 and "lethe_ui_token" in ok.headers["set-cookie"]
    assert c.get("/memory/1").status_code in (200, 404)  # the cookie carries it now
    assert client(memory).get("/static/style.css").status_code == 401  # assets too


def test_a_foreign_host_is_refused_even_with_the_token(memory):
    c = client(memory)
    assert c.get(f"/memories?token={TOKEN}", headers={"host": "evil.example:8765"}).status_code == 403
    assert c.get(f"/memories?token={TOKEN}", headers={"host": "localhost:8765"}).status_code == 200
    assert c.get(f"/memories?token={TOKEN}", headers={"host": "127.0.0.1:9999"}).status_code == 403


def test_a_wildcard_bind_still_refuses_a_foreign_host_name(memory):
    """Bound to 0.0.0.0 the inspector answers this machine's addresses, not any name: the
    guard is lethe mcp's (it accepted any Host there, the token alone guarding)."""
    c = client(memory, host="0.0.0.0")
    assert c.get(f"/memories?token={TOKEN}", headers={"host": "evil.example:8765"}).status_code == 403
    assert c.get(f"/memories?token={TOKEN}", headers={"host": "192.168.1.20:8765"}).status_code == 200
    assert c.get(f"/memories?token={TOKEN}", headers={"host": "localhost:8765"}).status_code == 200


def test_a_foreign_origin_cannot_post(memory):
    c = signed_in(memory)
    mem = memory("lifecycle")
    new = mem.add("User likes tea", judged=False)
    bad = c.post(f"/memory/{new}/forget", data={"reason": "x"}, headers={"origin": "http://evil.example"})
    assert bad.status_code == 403
    assert mem.get(new).status == "active"
    good = c.post(
        f"/memory/{new}/forget", data={"reason": "wrong"}, headers={"origin": f"http://127.0.0.1:{PORT}"}
    )
    assert good.status_code == 303 and mem.get(new).status == "archived"


@pytest.mark.sqlite_only
def check_bind(host, token):
    return check_any_bind(host, token, LINK)[0]


def test_a_non_loopback_bind_needs_a_token():
    with pytest.raises(LetheError, match="needs --token"):
        check_bind("0.0.0.0", None)
    with pytest.raises(LetheError, match="needs --token"):
        check_bind("192.168.1.20", None)
    assert check_bind("0.0.0.0", "a-long-token") == "a-long-token"
    made = check_bind("127.0.0.1", None)
    assert len(made) >= 20 and made != check_bind("127.0.0.1", None)
    with pytest.raises(LetheError, match="letters, digits"):
        check_bind("127.0.0.1", "short")


@pytest.mark.sqlite_only
def test_the_command_refuses_a_public_bind_without_a_token(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "ui", "--db", str(tmp_path / "m.db"), "--host", "0.0.0.0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ROOT},
    )
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "needs --token" in done.stderr
    assert not (tmp_path / "m.db").exists()  # refused before anything was opened


# ---- the pages ---------------------------------------------------------------------------
def test_pages_show_memories_with_counts_filters_and_the_chain(memory):
    mem = memory("lifecycle")
    mem.remember("I use VS Code for everything.")
    mem.remember("I switched to Neovim.")
    old = next(r for r in mem.memories("all", None) if "VS Code" in r.content)
    new = mem.get(old.contradicted_by)
    c = signed_in(memory)
    page = c.get("/memories?status=superseded").text
    assert ids_on(page) == [old.id]
    assert 'data-status="superseded">superseded <b>1</b>' in page
    assert ids_on(c.get("/memories?text=neovim").text) == [new.id]
    one = c.get(f"/memory/{old.id}").text
    assert f'href="/memory/{new.id}" class="successor"' in one
    assert 'data-type="superseded"' in one and 'data-type="created"' in one
    assert "I use VS Code for everything." in one  # the turn it came from
    back = c.get(f"/memory/{new.id}").text
    assert f'href="/memory/{old.id}" class="predecessor"' in back
    for path in ("/recall?q=editor", "/turns", "/costs", "/policy"):
        assert c.get(path).status_code == 200, path
    assert c.get("/memory/99999").status_code == 404


def test_keyset_pages_cover_every_memory_once_in_any_order(memory):
    mem = memory("lifecycle")
    for i in range(120):
        mem.add(f"fact number {i}", importance=i % 7, judged=False)
    c = signed_in(memory)
    for sort in ("id", "importance", "created_at", "rank"):
        seen, url = [], f"/memories?sort={sort}"
        while url:
            page = c.get(url).text
            seen += ids_on(page)
            nxt = re.search(r'<a href="([^"]+)" id="next"', page)
            url = nxt.group(1).replace("&amp;", "&") if nxt else None
        assert sorted(seen) == sorted(set(seen)) and len(seen) == 120, sort


def test_memory_text_is_escaped_everywhere(memory):
    mem = memory("lifecycle")
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    mid = mem.add(evil, tags=['"><b>tag'], judged=False)
    c = signed_in(memory)
    for path in ("/memories", f"/memory/{mid}", "/recall?q=script+alert"):
        page = c.get(path).text
        assert "<script>alert" not in page and "<img src=x" not in page, path
        assert "&lt;script&gt;" in page, path


def test_edits_are_events_and_read_only_refuses_them(memory):
    mem = memory("lifecycle")
    mid = mem.add("User lives in Paris", judged=False)
    ro = signed_in(memory, read_only=True)
    assert "Forget</button>" not in ro.get(f"/memory/{mid}").text
    assert ro.post(f"/memory/{mid}/forget", data={"reason": "x"}).status_code == 403
    assert mem.get(mid).status == "active"

    c = signed_in(memory)
    assert c.post(f"/memory/{mid}/forget", data={"reason": "moved"}).status_code == 303
    assert [e["event_type"] for e in mem.history(mid).events][-1] == "forgotten"
    assert c.post(f"/memory/{mid}/restore", data={"reason": "still true"}).status_code == 303
    assert mem.get(mid).status == "active"
    assert "still true" in mem.history(mid).events[-1]["detail"]
    done = c.post(f"/memory/{mid}/correct", data={"content": "User lives in Lyon", "reason": "moved in May"})
    new_id = int(done.headers["location"].rsplit("/", 1)[1])
    assert mem.get(mid).status == "superseded" and mem.get(mid).contradicted_by == new_id
    assert mem.get(new_id).content == "User lives in Lyon"
    assert "moved in May" in mem.history(mid).events[-1]["detail"]
    assert json.loads(mem.history(new_id).events[0]["detail"])["corrects"] == mid
    no_reason = c.post(f"/memory/{new_id}/forget", data={"reason": " "})
    assert no_reason.status_code == 400 and mem.get(new_id).status == "active"


def test_retry_puts_a_failed_turn_back_in_the_queue(memory):
    mem = memory("lifecycle", offline=False)  # no key: the turn waits
    with pytest.warns(Warning, match="no API key"):
        mem.remember("I moved to Lisbon.")
    turn = mem.pending()[0]
    store_of(mem).turn_failed(turn["id"], "Error code: 400 - context too long", 3, None, "failed")
    c = signed_in(memory)
    page = c.get("/turns").text
    assert "context too long" in page and "status-failed" in page
    assert c.post("/turns/retry", data={"id": str(turn["id"])}).status_code == 303
    assert mem.pending()[0]["status"] == "pending"


def test_a_memory_page_shows_when_it_was_said_and_when_it_was_recorded(memory, clock):
    mem = memory("lifecycle")
    clock.advance(dt.timedelta(days=3))
    mem.remember("I use Postgres for everything.", said_at="2026-01-05T09:00:00")
    mid = mem.memories("all", None)[0].id
    page = signed_in(memory).get(f"/memory/{mid}").text
    assert "<th>said at</th>" in page and "recorded at" in page
    assert "said 2026-01-05 09:00" in page and "recorded 2026-01-08 09:00" in page


def test_a_memory_page_draws_its_decay_as_the_policy_computes_it(memory):
    mem = memory("lifecycle")
    mid = mem.add("User prefers dark mode", judged=False)
    curve = mem.decay_curve(mid, days_ahead=120)
    scores = [v for _, v in curve["points"]]
    assert curve["pass"] == "decay" and curve["threshold"] == mem.policy.params["archive_below"]
    assert scores[0] == pytest.approx(1.0) and scores[-1] < 0.2
    assert all(a >= b for a, b in zip(scores, scores[1:]))  # freshness only falls, unread
    page = signed_in(memory).get(f"/memory/{mid}").text
    assert '<svg class="curve"' in page and "archive below" in page


def test_every_asset_is_served_here_and_the_browser_is_told_so(memory):
    mem = memory("lifecycle")
    mid = mem.add("User likes tea", judged=False)
    c = signed_in(memory)
    for path in ("/memories", f"/memory/{mid}", "/recall?q=tea", "/turns", "/costs", "/policy"):
        got = c.get(path)
        assert "default-src 'self'" in got.headers["content-security-policy"], path
        links = re.findall(r'(?:src|href)="([^"]*)"', got.text)
        assert links and all(u.startswith(("/", "#")) for u in links), (path, links)
        assert "<script" not in got.text, path
    assert c.get("/static/style.css").status_code == 200


def test_read_only_explains_a_recall_without_writing(memory, db_path):
    mem = memory("lifecycle")
    mem.add("User prefers tabs over spaces", judged=False)
    before = store_of(mem).costs("default")
    c = signed_in(memory, read_only=True)
    page = c.get("/recall?q=tabs+or+spaces")
    assert page.status_code == 200 and "tabs over spaces" in page.text
    assert store_of(mem).costs("default") == before


def test_costs_say_what_each_pass_writes_and_how_often_it_did(memory, clock):
    mem = memory("lifecycle")
    mid = mem.add("User is on call this week", judged=False)
    clock.advance(dt.timedelta(days=400))
    mem.run(["decay"])
    assert mem.get(mid).status == "archived"
    page = signed_in(memory).get("/costs").text
    row = re.search(r"<tr><td>decay</td>(.*?)</tr>", page, re.S).group(1)
    assert "<td>23h</td>" in row and "archived <b>1</b>" in row


def test_as_of_reads_what_was_believed_then(memory, clock):
    mem = memory("lifecycle")
    mem.remember("I use VS Code for everything.")
    before_switch = (clock() + dt.timedelta(days=1)).isoformat()
    clock.advance(dt.timedelta(days=14))
    mem.remember("I switched to Neovim.")
    old = next(r for r in mem.memories("all", None) if "VS Code" in r.content)
    assert old.status == "superseded"
    c = signed_in(memory)
    then = c.get(f"/recall?q=which+editor&as_of={before_switch}").text
    assert 'name="as_of"' in then and "Recalled as of" in then
    listed = then[then.index('id="recalled-then"') : then.index("</ol>")]
    assert "VS Code" in listed and "Neovim" not in listed
    page = c.get(f"/memory/{old.id}?as_of={before_switch}").text
    assert 'status-active">active</span>' in page[page.index('id="as-of"') :]
    assert "Not recorded yet" in c.get(f"/memory/{old.id}?as_of=2020-01-01").text


@pytest.mark.sqlite_only
def test_similarity_lists_memories_by_meaning_where_the_policy_embeds(tmp_path, clock):
    pytest.importorskip("sqlite_vec", reason="the embed extra (sqlite-vec) is not installed")
    from tests.helpers.embeddings import embedding_policy, topic_vector
    from tests.helpers.fake_openai import FakeOpenAI

    with FakeOpenAI(embedder=topic_vector) as fake:
        policy = embedding_policy(tmp_path, fake)
        db = str(tmp_path / "m.db")
        with Memory(db, policy=policy, clock=clock) as mem:
            vegan = mem.add("User is vegan", judged=False)
            tracker = mem.add("Bugs go in Linear", judged=False)
            mem.forget(vegan, "test")  # any status is listed
        c = client(
            lambda _policy, namespace, read_only=False: Memory(
                db, policy=policy, namespace=namespace, clock=clock
            )
        )
        page = c.get(f"/memories?token={TOKEN}&similar=what+does+she+eat").text
        assert 'name="similar"' in page
        assert ids_on(page)[:2] == [vegan, tracker]
        plain = client(
            lambda _policy, namespace, read_only=False: Memory(
                db, policy="lifecycle", namespace=namespace, clock=clock
            )
        )
        assert 'name="similar"' not in plain.get(f"/memories?token={TOKEN}").text


@pytest.mark.sqlite_only
def test_a_failing_database_is_a_page_saying_so(memory):
    opened = []
    app, _ = prepare(
        Inspector(lambda ns: opened.append(memory("lifecycle", namespace=ns)) or opened[-1], "default"),
        "127.0.0.1",
        PORT,
        TOKEN,
    )
    c = TestClient(app, base_url=f"http://127.0.0.1:{PORT}", raise_server_exceptions=False)
    assert c.get(f"/memories?token={TOKEN}").status_code == 200
    store_of(opened[0]).db.close()  # as if the file went away under it
    got = c.get("/memory/1")
    assert got.status_code == 503 and "the database failed" in got.text
