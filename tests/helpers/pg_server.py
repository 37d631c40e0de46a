"""A throwaway PostgreSQL server for tests and benchmarks: Debian's binaries, a temporary
data directory, 127.0.0.1 on a free port, fsync off. No Docker.

`initdb` refuses to run as root, so when we are root the server runs as the `postgres`
user. `LETHE_TEST_PG=postgresql://...` skips all this and uses that server instead.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid

ENV_DSN = "LETHE_TEST_PG"
HOW_TO_ENABLE = (
    "install PostgreSQL (apt-get install -y postgresql) or set "
    f"{ENV_DSN}=postgresql://user@host:port/db, and the postgres extra "
    "(pip install -e '.[test,postgres]', which make install does)"
)


def binaries() -> str | None:
    """The directory holding initdb and pg_ctl: LETHE_PG_BIN, else Debian's newest."""
    if os.environ.get("LETHE_PG_BIN"):
        chosen = os.environ["LETHE_PG_BIN"]
        return chosen if os.path.exists(os.path.join(chosen, "initdb")) else None
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def available() -> bool:
    """A server to test on (LETHE_TEST_PG, or binaries to start one) and psycopg to reach it."""
    return (bool(os.environ.get(ENV_DSN)) or binaries() is not None) and has_psycopg()


def has_psycopg() -> bool:
    return importlib.util.find_spec("psycopg") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """One server in a temporary directory; `stop()` removes it all."""

    def __init__(self):
        self.bin = binaries()
        self.dir = tempfile.mkdtemp(prefix="lethe-pg-")
        self.port = _free_port()
        self.data = os.path.join(self.dir, "data")
        self._user = None
        if os.geteuid() == 0:  # initdb refuses root: the server runs as `postgres`
            self._user = pwd.getpwnam("postgres")
            os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)
        self._run(
            "initdb", "-D", self.data, "-U", "lethe", "--auth=trust", "--locale=C", "-E", "UTF8", "--no-sync"
        )
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
            "-c shared_buffers=256MB"
        )
        self._run("pg_ctl", "-D", self.data, "-o", opts, "-l", os.path.join(self.dir, "log"), "-w", "start")
        self.dsn = f"postgresql://lethe@127.0.0.1:{self.port}/postgres"
        # the same server over its Unix socket: a round trip costs less than over TCP
        # (a scenario's thousands of statements: about 0.8x), which the suite's PostgreSQL
        # tests use; `dsn` (TCP, as a deployment reaches a server) stays for bench/
        self.socket_dsn = f"postgresql://lethe@/postgres?host={self.dir}&port={self.port}"

    def _run(self, tool: str, *args: str) -> None:
        kw = {"user": self._user.pw_uid, "group": self._user.pw_gid} if self._user else {}
        subprocess.run(
            [os.path.join(self.bin, tool), *args],
            check=True,
            cwd=self.dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            **kw,
        )

    def restart(self) -> None:
        """Stop the server (every connection to it is dropped) and start it again, with the
        same data, port and options."""
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def fresh_schema(dsn: str) -> str:
    """A new empty schema on the server, and a DSN whose search_path is that schema: each
    test gets a database of its own without the cost of CREATE DATABASE."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}options=-csearch_path%3D{name}"


class Template:
    """A database filled once by `build(dsn)` and copied with CREATE DATABASE ... TEMPLATE:
    a copy is a copy of the files, not the build's thousands of statements again. Where
    the server's user may not create databases (a LETHE_TEST_PG server), each copy is
    built in a fresh schema instead."""

    def __init__(self, dsn: str, build):
        self.dsn, self.build = dsn, build
        self.name: str | None = None
        self.can_create = True

    def copy(self) -> str:
        """A DSN to a new database holding what `build` made."""
        import psycopg

        if self.can_create:
            try:
                if self.name is None:
                    self.name = self._create()
                    self.build(database(self.dsn, self.name))  # which must close its connections
                return database(self.dsn, self._create(self.name))
            except psycopg.errors.InsufficientPrivilege:
                self.can_create = False
        dsn = fresh_schema(self.dsn)
        self.build(dsn)
        return dsn

    def _create(self, template: str | None = None) -> str:
        import psycopg

        name = "d_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return name


def database(dsn: str, name: str) -> str:
    """The DSN with its database replaced by `name`."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(dsn)._replace(path="/" + name))
