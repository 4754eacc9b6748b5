"""A real PostgreSQL for tests: Debian's binaries, a throwaway cluster in a temporary folder on
a free loopback port, trust authentication, durability off (fsync) for speed.

PostgreSQL refuses to run as root, so under root the cluster belongs to the ``postgres`` system
user (created by Debian's ``postgresql`` package) and its commands run through ``runuser``.

``shared_postgres()`` starts one cluster per test process (stopped at exit);
``fresh_database()`` creates an empty schema on it and returns a DSN that uses it. The ``audit_dsn``
fixture runs a test once on SQLite and once on PostgreSQL.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from bench.loopback import BIND_ATTEMPTS
from tests.support.servers import free_port, wait_for_port


def _bin_dir() -> Path:
    initdb = shutil.which("initdb")
    if initdb:
        return Path(os.path.realpath(initdb)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("PostgreSQL is not installed (scripts/install.sh installs Debian's postgresql)")
    return Path(found[-1]).parent


class PostgresServer:
    """One PostgreSQL cluster; ``start()``, ``stop()`` (for outage tests), ``cleanup()``.

    The first ``start()`` moves to another free port when the picked one was taken meanwhile
    (``bench.loopback``); later starts keep the port, so DSNs stay valid across an outage."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="toolgate-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._port_settled = False
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--locale=C", "--no-sync")

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_user, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)

    def start(self) -> PostgresServer:
        """Start the cluster and wait until it accepts connections; raises
        ``subprocess.CalledProcessError`` (the log's tail in its ``stderr``) when it cannot."""
        for attempt in range(BIND_ATTEMPTS):
            log = self.root / f"log-{self.port}"
            options = (
                f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start")
            except subprocess.CalledProcessError as exc:
                text = log.read_text(errors="replace") if log.exists() else ""
                if self._port_settled or "Address already in use" not in text or attempt == BIND_ATTEMPTS - 1:
                    exc.stderr = (exc.stderr or b"") + text[-2000:].encode()
                    raise
                self.port = free_port()
                continue
            wait_for_port(self.port)
            self._port_settled = True
            return self
        raise AssertionError("unreachable")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def cleanup(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


_server: PostgresServer | None = None
_names = itertools.count(1)


def shared_postgres() -> PostgresServer:
    """The cluster of this test process, started on first use and removed at exit."""
    global _server
    if _server is None:
        _server = PostgresServer().start()
        atexit.register(_server.cleanup)
    return _server


def fresh_database() -> str:
    """DSN of a new, empty schema on the shared cluster (its own ``search_path``): as isolated
    as a new database for these tests, and much faster to make."""
    import psycopg

    server = shared_postgres()
    name = f"audit_{os.getpid()}_{next(_names)}"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return f"{server.dsn()}?options=-csearch_path%3D{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def audit_dsn(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A decision log DSN: an SQLite file in ``tmp_path``, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "decisions.sqlite")
    return fresh_database()
