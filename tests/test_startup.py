"""Start-up is part of what a command costs (issue 14: at 10k memories most of `lethe run`
was Python importing what the pass never calls). Each case runs one command in a fresh
interpreter and lists the modules it imported: what that command does not need stays out."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT

PROBE = """
import json, sys
sys.argv = ["lethe", *json.loads(sys.argv[1])]
from engine.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stderr.write("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def imported(args: list[str], cwd) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    report = json.loads(done.stderr.rsplit("\n", 1)[-1])
    assert report["code"] in (0, None), done.stdout + done.stderr
    return set(report["modules"])


def under(modules: set[str], *packages: str) -> list[str]:
    return sorted(
        m
        for m in modules
        if m.split(".")[0] in packages or any(m == p or m.startswith(p + ".") for p in packages)
    )


def test_version_imports_no_engine_beyond_the_command_line(tmp_path):
    """(`--help` imports every command's module: their help texts live there.)"""
    got = imported(["--version"], tmp_path)
    assert "engine.cli.base" in got
    assert (
        under(got, "engine.memory", "engine.policy", "engine.store", "jinja2", "yaml", "sqlite3", "openai")
        == []
    )


def test_a_pass_imports_no_write_pipeline_recall_judges_or_threads(tmp_path):
    """`lethe run --pass decay`: the policy, the store and the pass; not the write
    pipeline and its lexicon, recall, compression, the rules judges, the openai client,
    thread pools or sockets; nor Jinja (the policy's templates are found, not parsed:
    tests/test_deferred_templates.py), OpenSSL's hashes, or importlib.resources."""
    first = subprocess.run(
        [sys.executable, "-m", "engine.cli", "add", "We use uv.", "--db", "m.db", "--offline"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert first.returncode == 0, first.stderr
    got = imported(["run", "--db", "m.db", "--pass", "expiry", "--pass", "decay"], tmp_path)
    assert {"engine.run.passes", "engine.store.sqlite.sqlite_store", "engine.policy"} <= got
    assert (
        under(
            got,
            "engine.run.write",
            "engine.run.recall",
            "engine.run.compress",
            "engine.run.matching",
            "engine.judges.rules",
            "engine.judges.lexicon.slots",
            "openai",
            "httpx",
            "concurrent.futures",
            "socket",
            "jinja2",
            "hashlib",
            "importlib.resources",
            "tempfile",
            "engine.run.audit",
            "engine.apps.inspector",
            "starlette",
            "uvicorn",
        )
        == []
    )


def test_help_lists_the_inspector_without_importing_its_server(tmp_path):
    """`lethe --help` imports every command's module for its help text; `lethe ui`'s
    declares the inspector and its server (Starlette, uvicorn: the ui extra) lazily."""
    got = imported(["--help"], tmp_path)
    assert "engine.cli.ui" in got
    assert under(got, "engine.apps.inspector", "starlette", "uvicorn", "jinja2") == []


def test_engine_submodules_are_still_reached_as_attributes(tmp_path):
    """`import engine` no longer imports the store, but `engine.store.Store` still works."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import engine; print(engine.store.Store.__name__, engine.Memory.__name__); engine.nothing_here",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert done.stdout.split() == ["SqliteStore", "Memory"]
    assert "AttributeError: module 'engine' has no attribute 'nothing_here'" in done.stderr
