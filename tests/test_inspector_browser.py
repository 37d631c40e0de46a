"""The inspector driven in a real headless browser (Debian's Chromium through Playwright):
`lethe ui` serves a store a shipped scenario made; the test filters to superseded, opens
one, reads it as it stood before it was superseded, follows its supersession link, reads
its timeline, explains a recall (and what recall returned before the switch), retries a
failed turn and forgets a memory, and saves a screenshot of each main page (into
$LETHE_SCREENSHOTS when set: `LETHE_SCREENSHOTS=docs/inspector` refreshes the docs' ones).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import warnings

import pytest

from engine import Memory
from engine.apps.testing import play
from tests.helpers import ROOT, browser, store_of

if browser.missing():
    pytest.skip(
        f"{browser.missing()}: the inspector's browser tests need {browser.HOW_TO_ENABLE}",
        allow_module_level=True,
    )
from playwright.sync_api import expect, sync_playwright

CHROMIUM = browser.CHROMIUM
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "browser-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def store(tmp_path):
    """editor-switch played offline, plus a turn that waits (no key) and one parked as
    failed with a server's message."""
    db = str(tmp_path / "scenario.db")
    checks = play(os.path.join(ROOT, "scenarios", "editor-switch.yaml"), "lifecycle", db)["checks"]
    assert all(c.startswith("ok") for c in checks), checks
    with warnings.catch_warnings(), Memory(db) as mem:  # no key: the turns wait
        warnings.simplefilter("ignore")
        mem.remember("My standup moved to 10:30.")
        mem.remember("I am learning Rust.")
        failed = mem.pending()[-1]["id"]
        store_of(mem).turn_failed(
            failed,
            "Error code: 400 - {'error': {'message': 'This model's maximum context length is 8192 tokens'}}",
            3,
            None,
            "failed",
        )
    return db


@pytest.fixture
def server(store, tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "ui",
            "--db",
            store,
            "--port",
            str(port),
            "--token",
            TOKEN,
            "--offline",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{base}/static/style.css?token={TOKEN}", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(proc.stderr.read())
            time.sleep(0.1)
    yield base
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture
def page():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        tab.set_default_timeout(15_000)
        yield tab
        browser.close()


def shot(page, name: str, tmp_path, full_page: bool = True) -> None:
    folder = os.environ.get("LETHE_SCREENSHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=full_page)


def test_a_user_walks_through_the_inspector(server, page, tmp_path):
    page.goto(f"{server}/memories?token={TOKEN}")
    expect(page.locator("h1")).to_contain_text("Memories of default")
    shot(page, "memories", tmp_path)

    # filter to superseded: VS Code, replaced by Neovim
    page.select_option("#filters select[name=status]", "superseded")
    page.click("#filters button[type=submit]")
    rows = page.locator("#memories tbody tr[data-id]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("VS Code")

    # open it, follow its supersession link
    rows.first.locator("a.memory-link").click()
    expect(page.locator("#status")).to_have_text("superseded")
    expect(page.locator("#event-table")).to_contain_text("superseded by #")
    timeline = page.locator("#timeline svg g.event")
    assert [timeline.nth(i).get_attribute("data-type") for i in range(timeline.count())] == [
        "created",
        "superseded",
    ]
    shot(page, "memory-superseded", tmp_path)
    page.fill("#as-of-form input[name=as_of]", "2026-02-10T00:00:00")  # before the switch
    page.click("#as-of-form button[type=submit]")
    expect(page.locator("#as-of .status")).to_have_text("active")
    expect(page.locator("#status")).to_have_text("superseded")
    page.locator("a.successor").first.click()
    expect(page.locator("#content")).to_contain_text("Neovim")
    expect(page.locator("#status")).to_have_text("active")
    expect(page.locator("a.predecessor")).to_contain_text("#")
    types = page.locator("#timeline svg g.event")
    assert types.first.get_attribute("data-type") == "created"
    expect(page.locator("#decay svg polyline")).to_have_count(1)
    shot(page, "memory", tmp_path)

    # recall explained
    page.click("text=Recall explained")
    page.fill("#recall-form input[name=q]", "which editor should the setup target?")
    page.fill("#recall-form input[name=as_of]", "2026-02-10T00:00:00")
    page.click("#recall-form button[type=submit]")
    expect(page.locator("#recalled-then")).to_contain_text("VS Code")
    expect(page.locator("#candidates tbody tr").first).to_contain_text("Neovim")
    expect(page.locator("#picked")).to_contain_text("Neovim")
    assert "VS Code" not in page.locator("#candidates").inner_text()
    shot(page, "recall", tmp_path)

    # a failed turn, with the server's message; retry it
    page.click("text=Pending turns")
    failed = page.locator("#turns tr", has_text="Rust")
    expect(failed).to_contain_text("maximum context length")
    expect(failed.locator(".status")).to_have_text("failed")
    shot(page, "turns", tmp_path)
    failed.locator("button.retry").click()
    expect(page.locator("#turns tr", has_text="Rust").locator(".status")).to_have_text("pending")

    # forget a memory and see the event
    page.click("text=Memories")
    page.fill("#filters input[name=text]", "GitHub")
    page.click("#filters button[type=submit]")
    page.locator("#memories a.memory-link").first.click()
    page.fill("#forget input[name=reason]", "moved to GitLab")
    page.click("#forget button[type=submit]")
    expect(page.locator("#status")).to_have_text("archived")
    last = page.locator("#event-table tr.event-row").last
    expect(last).to_contain_text("forgotten")
    expect(last).to_contain_text("moved to GitLab")
    assert page.locator("#timeline svg g.event").last.get_attribute("data-type") == "forgotten"

    page.click("text=Costs and health")
    expect(page.locator("h1")).to_have_text("Costs and health")
    shot(page, "costs", tmp_path)
    page.click("text=Policy")
    expect(page.locator("#sql")).to_contain_text("UPDATE")
    shot(page, "policy", tmp_path, full_page=False)  # the whole SQL is pages long
