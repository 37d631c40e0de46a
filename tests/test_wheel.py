"""The built wheel is self-contained: installed into a fresh venv outside the repository, it
finds the shipped `lifecycle` policy and its prompts from an empty directory.

One module-scoped install serves every test here. pip fetches the dependencies from the
package registry (the pip cache helps) while the wheel builds, then installs the wheel with
its dependencies already met. The source is copied first so the build leaves nothing in the
checkout and no stale build/ leaks into the wheel.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what a fresh clone would not hold, or the build must not see
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                              ".pytest_cache", "demo-out", "data", "*.db", "*.db-*")
REMEMBERED = "I moved from Berlin to Lisbon."
QUERY = "where do I live?"


def run(args, cwd, env, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        pytest.fail(f"{args} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def build_wheel(base: Path) -> Path:
    source, dist = base / "source", base / "dist"
    shutil.copytree(ROOT, source, symlinks=True, ignore=SKIP)
    run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--wheel-dir", str(dist),
         "--disable-pip-version-check", "-q"], base, os.environ.copy())
    [wheel] = dist.glob("lethe-*.whl")
    return wheel


def pip_into(venv: Path, *args: str) -> list[str]:
    # no pip inside the venv: this test's pip installs into it (--python), which saves
    # bootstrapping one; no byte-compiling either, the commands run once
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
            "--no-compile", "--disable-pip-version-check", "-q", *args]


def install(base: Path, venv: Path) -> Path:
    """Build the wheel and install it into a fresh venv; the dependencies download meanwhile."""
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base, os.environ.copy())
    with open(ROOT / "pyproject.toml", "rb") as fh:
        needs = tomllib.load(fh)["project"]["dependencies"]
    deps = subprocess.Popen(pip_into(venv, *needs), cwd=base, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wheel = build_wheel(base)
    finally:
        out, _ = deps.communicate(timeout=300)
    if deps.returncode != 0:
        pytest.fail(f"installing {needs} exited {deps.returncode}\n{out}")
    run(pip_into(venv, str(wheel)), base, os.environ.copy())
    return wheel


def clean_env(venv: Path) -> dict:
    """The environment of a project that merely installed lethe: no PYTHONPATH, no LETHE_*
    settings, no model keys, the venv's scripts first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("LETHE_", "OPENAI_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel, the venv, and the four commands run from an empty directory, in order."""
    base = tmp_path_factory.mktemp("wheel")
    venv = base / "venv"
    wheel = install(base, venv)
    env, empty = clean_env(venv), base / "empty"
    empty.mkdir()
    lethe, python = str(venv / "bin" / "lethe"), str(venv / "bin" / "python")
    results = {
        "where": run([python, "-c", "import engine; print(engine.__file__)"], empty, env),
        "validate": run([lethe, "validate", "lifecycle"], empty, env, check=False),
        "remember": run([lethe, "remember", REMEMBERED, "Noted.", "--db", "m.db", "--offline"],
                        empty, env, check=False),
        "recall": run([lethe, "recall", QUERY, "--db", "m.db", "--offline"], empty, env, check=False),
        "python": run([python, "-c", "from engine import Memory; "
                       f"print(Memory('m.db', offline=True).recall({QUERY!r}))"],
                      empty, env, check=False),
    }
    return {"wheel": wheel, "venv": venv, "env": env, "empty": empty, "base": base, **results}


def test_the_wheel_carries_the_shipped_policies_and_prompts(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    for f in os.listdir(ROOT / "policies"):
        assert f"engine/shipped/policies/{f}" in names
    for f in os.listdir(ROOT / "prompts"):
        assert f"engine/shipped/prompts/{f}" in names


def test_the_installed_engine_is_the_venvs_not_the_checkout(installed):
    where = Path(installed["where"].stdout.strip())
    assert installed["venv"] in where.parents and ROOT not in where.parents
    assert not (installed["empty"] / "policies").exists()


@pytest.mark.parametrize("step", ["validate", "remember", "recall", "python"])
def test_each_command_succeeds_from_an_empty_directory(installed, step):
    done = installed[step]
    assert done.returncode == 0, f"{step}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def test_validate_finds_the_shipped_lifecycle(installed):
    assert installed["validate"].stdout.startswith("ok    lifecycle  (lifecycle: ")


def test_remember_stores_the_move_with_the_shipped_templates(installed):
    assert "Lisbon" in installed["remember"].stdout


def test_recall_finds_lisbon(installed):
    assert "Lisbon" in installed["recall"].stdout
    assert "Lisbon" in installed["python"].stdout


def test_a_bare_name_prefers_the_working_directorys_policies(installed):
    here = installed["base"] / "project"
    (here / "policies").mkdir(parents=True)
    mine = here / "policies" / "lifecycle.yaml"
    shutil.copy(ROOT / "policies" / "archive.yaml", mine)
    code = "from engine.policy import load; p = load('lifecycle'); print(p.name, p.path)"
    done = run([str(installed["venv"] / "bin" / "python"), "-c", code], here, installed["env"])
    assert done.stdout.split() == ["archive", str(mine)]
    elsewhere = run([str(installed["venv"] / "bin" / "python"), "-c", code], installed["empty"],
                    installed["env"])
    name, path = elsewhere.stdout.split()
    assert name == "lifecycle" and Path(path).is_relative_to(installed["venv"])
