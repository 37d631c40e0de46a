"""The built wheel is self-contained: installed by its name, `lethe-lifecycle`, into a fresh
venv outside the repository, the README's quick start prints what the README says, the
shipped `lifecycle` policy and its prompts are found from an empty directory, and a missing
extra names the distribution to install.

Network-free: the wheel is built without build isolation (setuptools is in the test extra)
and pip installs it with `--no-index --find-links`; its dependencies are the ones already
installed here, offered to the new venv through a folder of links to exactly them (the core
dependencies and theirs, no extra), so `mcp`, `langgraph` and this checkout stay out of it.
One module-scoped install serves every test here. The source is copied first so the build
leaves nothing in the checkout and no stale build/ leaks into the wheel.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from engine.base import distribution

ROOT = Path(__file__).resolve().parents[1]
# what a fresh clone would not hold, or the build must not see
SKIP = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    "demo-out",
    "data",
    "*.db",
    "*.db-*",
)
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
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--wheel-dir",
            str(dist),
            "--disable-pip-version-check",
            "-q",
        ],
        base,
        os.environ.copy(),
    )
    [wheel] = dist.glob("lethe_lifecycle-*.whl")
    return wheel


def dependencies(requirements: list[str]) -> set[str]:
    """The installed distributions `requirements` need, transitively (no extras)."""
    env, seen, todo = default_environment(), set(), list(requirements)
    while todo:
        req = Requirement(todo.pop())
        if req.marker and not req.marker.evaluate({**env, "extra": ""}):
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(metadata.distribution(req.name).requires or ())
    return seen


def link_dependencies(folder: Path, needs: list[str]) -> None:
    """A folder of links to the installed files of `needs` and what they need, dist-info
    included (so pip sees them installed), and nothing else."""
    folder.mkdir()
    for name in dependencies(needs):
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or ()}
        for top in tops - {"..", "__pycache__"}:
            target = Path(dist.locate_file(top))
            if target.exists() and not (folder / top).exists():
                (folder / top).symlink_to(target)


def pip_into(venv: Path, *args: str) -> list[str]:
    # no pip inside the venv: this test's pip installs into it (--python), which saves
    # bootstrapping one; no byte-compiling either, the commands run once
    return [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(venv / "bin" / "python"),
        "install",
        "--no-compile",
        "--disable-pip-version-check",
        "--no-index",
        "-q",
        *args,
    ]


def install(base: Path, venv: Path) -> Path:
    """Build the wheel and install it by name into a fresh venv whose site-packages reaches
    the dependencies already installed here."""
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base, os.environ.copy())
    with open(ROOT / "pyproject.toml", "rb") as fh:
        project = tomllib.load(fh)["project"]
    assert project["name"] == distribution.NAME
    link_dependencies(base / "deps", project["dependencies"])
    [site] = venv.glob("lib/python*/site-packages")
    (site / "dependencies.pth").write_text(f"{base / 'deps'}\n")
    wheel = build_wheel(base)
    run(pip_into(venv, "--find-links", str(wheel.parent), distribution.NAME), base, os.environ.copy())
    return wheel


def clean_env(venv: Path) -> dict:
    """The environment of a project that merely installed lethe: no PYTHONPATH, no LETHE_*
    settings, no model keys, the venv's scripts first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH" and not k.startswith(("LETHE_", "OPENAI_", "VIRTUAL_ENV"))
    }
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
        "remember": run(
            [lethe, "remember", REMEMBERED, "Noted.", "--db", "m.db", "--offline"], empty, env, check=False
        ),
        "recall": run([lethe, "recall", QUERY, "--db", "m.db", "--offline"], empty, env, check=False),
        "quickstart": run([python, "-c", readme_block("Quick start", "python")], empty, env, check=False),
        "mcp": run([lethe, "mcp", "--db", "m.db"], empty, env, check=False),
        "version": run([lethe, "--version"], empty, env, check=False),
        "python": run(
            [
                python,
                "-c",
                f"from engine import Memory; print(Memory('m.db', offline=True).recall({QUERY!r}))",
            ],
            empty,
            env,
            check=False,
        ),
    }
    return {"wheel": wheel, "venv": venv, "env": env, "empty": empty, "base": base, **results}


def readme_block(heading: str, lang: str) -> str:
    """The first fenced block of language `lang` in the README section `heading`."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1]
    return re.findall(rf"```{lang}\n(.*?)```", section.split("\n## ", 1)[0], re.S)[0]


def test_the_readme_quick_start_prints_what_the_readme_says(installed):
    done = installed["quickstart"]
    assert done.returncode == 0, done.stderr
    assert done.stdout == readme_block("Quick start", "text")
    assert done.stderr == ""


def test_a_missing_extra_names_the_distribution(installed):
    done = installed["mcp"]
    assert done.returncode == 2
    assert done.stderr == (
        "error: the MCP server needs the 'mcp' extra: pip install 'lethe-lifecycle[mcp]'\n"
    )


def test_the_version_is_the_distributions(installed):
    assert installed["version"].stdout == f"lethe, version {metadata.version(distribution.NAME)}\n"


def test_the_wheel_carries_the_shipped_policies_and_prompts(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    for f in os.listdir(ROOT / "policies"):
        assert f"engine/shipped/policies/{f}" in names
    for f in os.listdir(ROOT / "prompts"):
        assert f"engine/shipped/prompts/{f}" in names
    inspector = ROOT / "engine" / "apps" / "inspector"  # `lethe ui`'s templates and stylesheet
    for folder in ("templates", "static"):
        for f in os.listdir(inspector / folder):
            assert f"engine/apps/inspector/{folder}/{f}" in names


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
    elsewhere = run(
        [str(installed["venv"] / "bin" / "python"), "-c", code], installed["empty"], installed["env"]
    )
    name, path = elsewhere.stdout.split()
    assert name == "lifecycle" and Path(path).is_relative_to(installed["venv"])
