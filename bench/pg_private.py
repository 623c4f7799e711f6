"""A private PostgreSQL server for a benchmark: ``initdb`` in /tmp, a free port, the server's
default settings plus the ones given (fsync stays on, unlike the tests' throwaway servers).

Run as root, the server runs as the ``postgres`` user (initdb refuses root). Stdlib only.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from peers.infra import free_port


def bin_dir() -> Path:
    """The newest installed ``/usr/lib/postgresql/<version>/bin`` with initdb and pg_ctl."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    for path in reversed(found):
        if Path(path, "initdb").exists() and Path(path, "pg_ctl").exists():
            return Path(path)
    raise SystemExit("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")


class PrivatePostgres:
    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings
        self.port = free_port()
        self.bin = bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="tickwork-pgsizing-"))
        self.data = self.root / "data"
        self.log_path = self.root / "server.log"

    def start(self) -> None:
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self._tool("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        options += "".join(f" -c {k}={v}" for k, v in self.settings.items())
        self._tool("pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-o", options,
                   "-w", "start")  # fmt: skip

    def stop(self, keep_log: Path | None = None) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._tool("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        if keep_log is not None and self.log_path.exists():
            shutil.copy(self.log_path, keep_log)
        shutil.rmtree(self.root, ignore_errors=True)

    def rows(self, sql: str, db: str = "postgres") -> list[list[str]]:
        """``sql``'s rows through psql, each a list of its columns as text."""
        cmd = ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db,
               "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}")
        return [line.split("|") for line in done.stdout.splitlines() if line]

    def _tool(self, tool: str, *args: str) -> None:
        argv = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=120, cwd=self.root)
