"""Hostile and mistaken input (issue 12, findings 8, 10, 12, 14, 15): an alias bomb, a
policy reaching for files outside its project, terminal escapes in memory text, bad
values on the command line and in the database file, colliding experiment names. Each
gets a one-line answer with the right exit code, never a hang, a leak or "internal error"."""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory, PolicyError
from engine import policy as policy_mod
from engine.cli import main
from tests.helpers import POLICIES, ROOT, START

LIFECYCLE = f"{POLICIES}/lifecycle.yaml"


def lethe(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


# ---- finding 8: alias bombs ----------------------------------------------------------
BOMB = "name: bomb\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
)


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    """337 bytes took 17 s and 1.8 GB; a few more levels never finished. Refused by the
    loader's node budget: the message says so (nothing is timed)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 400
    out = lethe("validate", path)
    assert out.exit_code == 1
    assert "bomb.yaml:" in out.output and "expands to more than" in out.output


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("name: loop\nparams: &p {a: [1, *p]}\n")
    with pytest.raises(PolicyError, match="refers to the node that contains it"):
        policy_mod.load(str(path))


def test_ordinary_aliases_still_work(tmp_path):
    path = tmp_path / "aliases.yaml"
    path.write_text(
        "name: aliases\nmodels: {offline: {provider: rules}}\n"
        "params: {half: &h 30}\nscores: {freshness: 'exp(-0.693 * age_days / half)'}\n"
        "passes:\n  decay:\n    every: 1d\n    rules:\n"
        "      - &r {when: \"status = 'active'\", set: {decay_score: freshness}}\n"
        "  again:\n    rules: [*r]\n"
    )
    assert list(policy_mod.load(str(path)).passes) == ["decay", "again"]


# ---- finding 10: templates stay inside the policy's project -------------------------
def policy_with(tmp_path, prompts: str | None, prompt: str = "gate.j2") -> str:
    folder = tmp_path / "project" / "policies"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "p.yaml"
    path.write_text(
        "name: p\n" + (f"prompts: {prompts}\n" if prompts else "") + "models: {m: {provider: rules}}\n"
        f"write:\n  - {{step: gate, model: m, prompt: {prompt}}}\n"
    )
    return str(path)


@pytest.mark.parametrize(
    "prompts,prompt,why",
    [
        ("/", "etc/passwd", "an absolute path"),
        ("/etc", "passwd", "an absolute path"),
        ("../../../../../../../etc", "passwd", "leads out of the policy's project"),
        ("../..", "gate.j2", "leads out of the policy's project"),
    ],
)
def test_a_prompts_folder_outside_the_project_is_refused_at_file_line(tmp_path, prompts, prompt, why):
    """Before: `prompts: /` with `prompt: etc/passwd` validated, and `lethe render`
    printed /etc/passwd (and `remember` sent it to the policy's base_url)."""
    path = policy_with(tmp_path, prompts, prompt)
    out = lethe("validate", path)
    assert out.exit_code == 1
    assert f"{path}:2:10: prompts: " in out.output and why in out.output
    out = lethe("render", path, "gate")
    assert out.exit_code == 1 and "root:" not in out.output


def test_a_template_that_links_out_of_its_folder_is_refused(tmp_path):
    path = policy_with(tmp_path, "../prompts")
    prompts = tmp_path / "project" / "prompts"
    prompts.mkdir()
    (prompts / "gate.j2").symlink_to("/etc/passwd")
    out = lethe("validate", path)
    assert out.exit_code == 1
    assert "p.yaml:5:" in out.output and "leads out of its prompt folder" in out.output


def test_a_prompts_folder_that_links_out_is_refused(tmp_path):
    path = policy_with(tmp_path, "linked")
    (tmp_path / "project" / "policies" / "linked").symlink_to("/etc")
    out = lethe("validate", path)
    assert out.exit_code == 1 and "prompts: 'linked' leads out" in out.output


def test_an_include_that_links_out_is_refused_at_render_time(tmp_path):
    path = policy_with(tmp_path, None)
    prompts = tmp_path / "project" / "prompts"
    prompts.mkdir()
    (prompts / "gate.j2").write_text("{% include 'secret.j2' %}\n")
    (prompts / "secret.j2").symlink_to("/etc/passwd")
    out = lethe("render", path, "gate")
    assert out.exit_code == 1 and "root:" not in out.output
    assert "out of its prompt folder" in out.output


def test_prompts_beside_the_policy_folder_still_work(tmp_path):
    path = policy_with(tmp_path, "../prompts")
    prompts = tmp_path / "project" / "prompts"
    prompts.mkdir()
    (prompts / "gate.j2").write_text("Save this? {{ user }}\n")
    out = lethe("render", path, "gate", "--vars", "-", input='{"user": "hi"}')
    assert out.exit_code == 0, out.output
    assert out.output == "Save this? hi\n"


# ---- finding 12: terminal escapes in memory text -------------------------------------
ESCAPES = (
    "quasar title\x1b]0;pwned\x07 clip\x1b]52;c;ZXZpbA==\x07 csi\x9b31m "
    "cr\rlf\nrtl\u202eevil bell\x07 del\x7f"
)
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\x7f")


@pytest.fixture
def escaped_db(db_path):
    with Memory(db_path, policy=LIFECYCLE, offline=True, clock=FixedClock(START)) as mem:
        mem.add(ESCAPES, judged=False)
    return db_path


@pytest.mark.parametrize("command", [["ls"], ["why", "1"], ["recall", "quasar"]])
def test_human_output_escapes_control_characters(escaped_db, command):
    """Before: OSC title and OSC 52 clipboard sequences reached the terminal as they were."""
    out = lethe(*command, "--db", escaped_db, "--policy", LIFECYCLE, "--offline")
    assert out.exit_code == 0, out.output
    for c in RAW:
        assert c not in out.output
    assert "\\x1b]0;pwned\\x07" in out.output and "\\u202e" in out.output


@pytest.mark.parametrize("command", [["ls"], ["why", "1"], ["recall", "quasar"]])
def test_json_output_keeps_them_json_escaped(escaped_db, command):
    out = lethe(*command, "--db", escaped_db, "--policy", LIFECYCLE, "--offline", "--json")
    assert out.exit_code == 0, out.output
    for c in RAW:
        assert c not in out.output
    data = json.loads(out.output)
    memory = data["memory"] if isinstance(data, dict) else data[0]
    assert memory["content"] == ESCAPES  # exactly the text stored


# ---- finding 14: input mistakes are usage errors or one-line failures ------------------
@pytest.mark.parametrize(
    "args,bad",
    [
        (["ls", "--now", "garbage"], "garbage"),
        (["ls", "--now", "9999-12-31T23:59:59-05:00"], "9999-12-31T23:59:59-05:00"),
        (["run", "--now", "9999-12-31T23:59:59"], "9999-12-31T23:59:59"),
        (["add", "x", "--expires-at", "2026-02-30"], "2026-02-30"),
        (["why", "99999999999999999999"], "99999999999999999999"),
        (["ls", "--limit", "99999999999999999999"], "99999999999999999999"),
        (["daemon", "--interval", "nan"], "nan"),
        (["run", "--lease-ttl", "forever"], "forever"),
        (["run", "--wait", "inf"], "inf"),
        (["pending", "--retry", "-1"], "-1"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_it(db_path, args, bad):
    out = lethe(*args, "--db", db_path, "--policy", LIFECYCLE, "--offline")
    assert out.exit_code == 2, out.output
    assert "internal error" not in out.output and "Traceback" not in out.output
    assert bad in out.output


def _cli(*args, limit_bytes: int | None = None) -> subprocess.CompletedProcess:
    def limited():  # a disk that fills up: writes past the limit fail (EFBIG), no signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited if limit_bytes else None,
    )


def test_a_corrupted_page_is_a_one_line_error(db_path):
    with Memory(db_path, policy=LIFECYCLE, offline=True, clock=FixedClock(START)) as mem:
        for i in range(300):
            mem.add(f"fact number {i} " + "padding " * 40, judged=False)
    with open(db_path, "r+b") as fh:  # scribble over pages past the schema
        fh.seek(4096 * 6)
        fh.write(os.urandom(4096 * 6))
    p = _cli("ls", "--db", db_path, "--policy", LIFECYCLE, "--limit", "500")
    assert p.returncode in (1, 2), p.stderr
    assert p.stderr.startswith("error: ") and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "internal error" not in p.stderr and "malformed" in p.stderr


def test_a_full_disk_is_a_one_line_error(db_path):
    with Memory(db_path, policy=LIFECYCLE, offline=True, clock=FixedClock(START)) as mem:
        mem.add("a first memory", judged=False)
    # 90 kB of words to write, 48 kB of room for the write-ahead log
    p = _cli(
        "add",
        " ".join(f"word{i}" for i in range(10_000)),
        "--raw",
        "--db",
        db_path,
        "--policy",
        LIFECYCLE,
        limit_bytes=48 * 1024,
    )
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.startswith("error: the database failed:"), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "internal error" not in p.stderr
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


# ---- finding 15: experiment --keep with names that slug alike ---------------------------
def test_experiment_keep_never_overwrites_a_run_with_another(tmp_path):
    first = tmp_path / "a.yaml"
    first.write_text(
        "name: Poetry to uv\nstart: 2026-01-05T09:00:00\nsteps:\n  - add: I manage dependencies with poetry\n"
    )
    second = tmp_path / "b.yaml"
    second.write_text(
        "name: poetry-to-uv\nstart: 2026-01-05T09:00:00\nsteps:\n  - add: I use uv now\n  - add: and pytest\n"
    )
    keep = tmp_path / "kept"
    out = lethe("experiment", first, second, "-p", "archive", "--offline", "--keep", keep)
    assert out.exit_code == 0, out.output
    stores = sorted(os.listdir(keep))
    assert stores == ["poetry-to-uv--archive-2.db", "poetry-to-uv--archive.db"]
    counts = []
    for name in stores:
        with sqlite3.connect(keep / name) as db:
            counts.append(db.execute("SELECT count(*) FROM memories").fetchone()[0])
    assert sorted(counts) == [1, 2]
