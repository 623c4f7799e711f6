"""Private etcd and ZooKeeper servers for the tests, from the Debian packages' binaries.

Each test session (or a test that kills, freezes or restarts its server) starts one of its
own on free ports with a throwaway data directory; no shared server is ever touched. Their
timings are shortened so leases can be short: etcd grants a lease no shorter than 1.5
election timeouts (rounded up to whole seconds), and ZooKeeper negotiates session timeouts
between 2 and 20 ticks.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.redis_server import free_port

ZK_HOME = Path("/usr/share/zookeeper")
ZK_TICK_MS = 100  # sessions of 0.2 to 2 s


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class _Server:
    name = "server"

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"tickwork-{self.name}-"))
        self._proc: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        return _listening(self.port)

    def start(self) -> None:
        log = (self.dir / "server.log").open("ab")
        self._proc = subprocess.Popen(
            self.argv(), stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, env=self.env()
        )
        log.close()
        deadline = time.monotonic() + 30
        while not self.ready():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.dir / "server.log").read_text()[-2000:]
                raise RuntimeError(f"{self.name} on {self.port} did not start:\n{tail}")
            time.sleep(0.05)  # polling a process that is starting, not synchronising tests

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def freeze(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)
            self._proc.kill()
            self._proc.wait(10)
            self._proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateEtcd(_Server):
    name = "etcd"

    def __init__(self) -> None:
        super().__init__()
        self.peer_port = free_port()

    @property
    def url(self) -> str:
        return f"etcd://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        binary = shutil.which("etcd")
        if binary is None:
            raise RuntimeError("etcd is not installed (apt-get install etcd-server)")
        client, peer = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer_port}"
        return [
            binary,
            "--name=test",
            f"--data-dir={self.dir / 'data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--heartbeat-interval=20",
            "--election-timeout=200",  # leases from 1 s
            "--log-level=warn",
        ]

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                return b'"health":"true"' in conn.recv(4096)
        except OSError:
            return False


class PrivateZooKeeper(_Server):
    name = "zookeeper"

    @property
    def url(self) -> str:
        return f"zookeeper://127.0.0.1:{self.port}/tickwork"

    def argv(self) -> list[str]:
        if not (ZK_HOME / "bin/zkServer.sh").exists():
            raise RuntimeError("ZooKeeper is not installed (apt-get install zookeeper)")
        conf = self.dir / "zoo.cfg"
        conf.write_text(
            f"tickTime={ZK_TICK_MS}\n"
            f"dataDir={self.dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "maxClientCnxns=0\n"
            "4lw.commands.whitelist=ruok,srvr\n"
            "maxSessionTimeout=60000\n"
        )
        return [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dzookeeper.log.dir={self.dir}",
            "-Dzookeeper.root.logger=WARN,CONSOLE",
            "-cp",
            "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar",
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(conf),
        ]

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                # Not "ruok": it answers before the server serves sessions; "srvr" says
                # "not currently serving requests" until it does.
                conn.sendall(b"srvr")
                return b"Mode:" in conn.recv(4096)
        except OSError:
            return False
