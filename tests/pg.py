"""A PostgreSQL server for the test session: the configured one, or a throwaway one.

The URL comes from ``TICKWORK_TEST_POSTGRES_URL`` (default: local ``postgres`` user on 5432).
If nothing answers there, a server is started from the installed binaries
(``/usr/lib/postgresql/*/bin``) in a temporary directory on a free port, and stopped at the end.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ENV_VAR = "TICKWORK_TEST_POSTGRES_URL"


def libpq_url(url: str) -> str:
    """``url`` without a SQLAlchemy driver suffix, as psycopg/libpq accept it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def answers(url: str) -> bool:
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@dataclass
class ThrowawayPostgres:
    """A server in a temp directory, owned by the ``postgres`` user when we run as root."""

    bin_dir: Path
    port: int
    #: Extra server settings (``-c name=value``), e.g. ``idle_in_transaction_session_timeout``.
    settings: dict[str, str] = field(default_factory=dict)
    data_dir: Path = field(init=False)
    _root: Path = field(init=False)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def log_path(self) -> Path:
        return self._root / "server.log"

    def start(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="tickwork-pg-"))
        self.data_dir = self._root / "data"
        if os.geteuid() == 0:
            # initdb refuses to run as root.
            owner = pwd.getpwnam("postgres")
            os.chown(self._root, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data_dir), "-U", "postgres", "-A", "trust", "-N")
        self.start_server()

    def start_server(self) -> None:
        """Start the server (again, after ``stop_server``) on the same port and data dir."""
        options = f"-p {self.port} -k {self._root} -c listen_addresses=127.0.0.1 -c fsync=off"
        options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        # -l: the server must not inherit our pipes, or waiting for pg_ctl never ends.
        log = str(self.log_path)
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", log, "-o", options, "-w", "start")

    def stop_server(self, mode: str = "immediate") -> None:
        """Stop the server and keep its data (``immediate``: as if it crashed)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop_server()
        shutil.rmtree(self._root, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> None:
        argv = [str(self.bin_dir / tool), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=60, cwd=self._root)


def find_bin_dir() -> Path | None:
    """The newest installed PostgreSQL ``bin`` directory with initdb and pg_ctl."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    for candidate in candidates:
        path = Path(candidate)
        if (path / "initdb").exists() and (path / "pg_ctl").exists():
            return path
    return None


def _version(bin_dir: str) -> int:
    name = Path(bin_dir).parent.name
    return int(name) if name.isdigit() else 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    """Where the session's PostgreSQL is, or why there is none (``url`` None, ``reason``)."""

    url: str | None
    reason: str = ""
    throwaway: ThrowawayPostgres | None = None

    def stop(self) -> None:
        if self.throwaway is not None:
            self.throwaway.stop()


def provide_postgres() -> PostgresServer:
    """The configured server if it answers, else a throwaway one, else the reason for neither."""
    url = os.environ.get(ENV_VAR, DEFAULT_URL)
    if answers(url):
        return PostgresServer(url=url)
    bin_dir = find_bin_dir()
    if bin_dir is None:
        return PostgresServer(None, f"nothing answers at {url} and no initdb/pg_ctl installed")
    server = ThrowawayPostgres(bin_dir, free_port())
    try:
        server.start()
    except (OSError, KeyError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        reason = f"nothing answers at {url}; starting a throwaway server failed: {exc} {detail!r}"
        server.stop()
        return PostgresServer(None, reason)
    return PostgresServer(url=server.url, throwaway=server)


def create_database(admin_url: str, name: str) -> str:
    """Create database ``name`` on the server of ``admin_url``; return its URL."""
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
