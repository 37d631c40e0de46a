"""Policies confined like their templates (issue 42, findings 7 and 8): `db:` names only a
file inside the policy's project, Lethe never adopts a file that has neither its own
tables nor the article's memories table, `extends:` names only policies (shipped ones or
.yaml files in the project), and an error on a file that is not a policy quotes none of
its lines."""

from __future__ import annotations

import os
import sqlite3

import pytest
from click.testing import CliRunner

from bench.seed_article import create_article_db
from engine import Memory, PolicyError, StoreError, load_policy
from engine.cli import main

SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "proj" / "policies").mkdir(parents=True)
    return tmp_path / "proj"


def policy(project, text: str, name: str = "p.yaml") -> str:
    path = project / "policies" / name
    path.write_text("name: p\nextends: lifecycle\n" + text)
    return str(path)


def other_app(path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
    db.execute("INSERT INTO users (email) VALUES ('a@example.com')")
    db.commit()
    db.close()


def tables(path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        db.close()


def journal(path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize("db", ["{other}", "../../elsewhere/app.sqlite", "~/app.sqlite"])
def test_a_policys_db_outside_its_project_is_refused(project, tmp_path, db):
    """Before: `db: /other/app.sqlite` in a policy handed to you made `lethe add --raw`
    give the other application's database 20 Lethe tables and switch it to WAL."""
    (tmp_path / "elsewhere").mkdir()
    other = tmp_path / "elsewhere" / "app.sqlite"
    other_app(other)
    path = policy(project, f"db: {db.format(other=other)}\n")
    with pytest.raises(PolicyError, match="db") as err:
        load_policy(path)
    assert "project" in str(err.value)
    result = CliRunner().invoke(main, ["add", "hello", "--raw", "--offline", "-p", path])
    assert result.exit_code != 0
    assert tables(other) == ["users"] and journal(other) == "delete"


@pytest.mark.parametrize("db", ["agent.db", "../data/agent.db", "./x/../agent.db"])
def test_a_policys_db_inside_its_project_is_used(project, db):
    (project / "data").mkdir()
    pol = load_policy(policy(project, f"db: {db}\n"))
    assert os.path.realpath(pol.db).startswith(os.path.realpath(project))


def test_lethe_never_adopts_a_file_of_another_application(tmp_path):
    """Even given with --db: a file with tables but neither Lethe's nor the article's
    memories table is refused, and nothing in it changes (no table, no WAL)."""
    other = tmp_path / "app.sqlite"
    other_app(other)
    with pytest.raises(StoreError, match="users"):
        Memory(str(other), offline=True)
    assert tables(other) == ["users"] and journal(other) == "delete"
    result = CliRunner().invoke(main, ["add", "hello", "--raw", "--offline", "--db", str(other)])
    assert result.exit_code == 2 and "another application" in result.output
    assert tables(other) == ["users"] and journal(other) == "delete"


def test_an_empty_file_and_an_article_database_are_still_adopted(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    Memory(str(empty), offline=True).close()
    article = tmp_path / "agent_memory.db"
    create_article_db(article)
    with Memory(str(article), offline=True) as mem:
        mem.add("hello", judged=False)


@pytest.mark.parametrize("target", ["../../.env", "{env}", "/etc/passwd", "../secret.txt"])
def test_extends_names_only_policies_and_quotes_no_line_of_another_file(project, tmp_path, target):
    """Before: `extends: ../.env` printed AWS_SECRET_ACCESS_KEY=... in the error's context
    lines, `extends: /etc/shadow` a line per entry."""
    (tmp_path / ".env").write_text(f"{SECRET}\nOTHER=1\n")
    (project / "secret.txt").write_text(f"{SECRET}\n")
    path = policy(project, "")
    (project / "policies" / "p.yaml").write_text(
        f"name: p\nextends: {target.format(env=tmp_path / '.env')}\n"
    )
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    shown = str(err.value)
    assert SECRET not in shown and "root:" not in shown and "OTHER" not in shown, shown
    result = CliRunner().invoke(main, ["validate", path])
    assert result.exit_code == 1
    assert SECRET not in result.output and "root:" not in result.output, result.output


def test_extends_a_yaml_outside_the_project_is_refused(project, tmp_path):
    (tmp_path / "base.yaml").write_text("name: base\nextends: lifecycle\n")
    path = policy(project, "")
    (project / "policies" / "p.yaml").write_text("name: p\nextends: ../../base.yaml\n")
    with pytest.raises(PolicyError, match="project"):
        load_policy(path)


def test_extends_a_yaml_in_the_project_or_a_shipped_name_works(project):
    (project / "base.yaml").write_text("name: base\nextends: lifecycle\nparams: {half_life_days: 9}\n")
    (project / "policies" / "p.yaml").write_text("name: p\nextends: ../base.yaml\n")
    assert load_policy(str(project / "policies" / "p.yaml")).params["half_life_days"] == 9
    (project / "policies" / "q.yaml").write_text("name: q\nextends: lifecycle\n")
    assert load_policy(str(project / "policies" / "q.yaml")).name == "q"


@pytest.mark.parametrize(
    "content",
    [
        f"{SECRET}\nroot:x:0:0:root:/root:/bin/bash\n",
        f"aws:\n  secret: {SECRET[22:]}\n  region: [unclosed\n",
        f"aws_secret: {SECRET[22:]}\nregion: eu\n",
    ],
)
def test_a_file_that_is_not_a_policy_is_refused_quoting_none_of_its_lines(tmp_path, content):
    """Before: `Memory(db, policy='/etc/passwd')` printed the file in the error."""
    for name in ("creds", "creds.yaml"):
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(PolicyError) as err:
            Memory(str(tmp_path / "m.db"), policy=str(path), offline=True)
        shown = str(err.value)
        assert SECRET[22:] not in shown and "root:" not in shown, shown
        assert "not a policy" in shown
