"""RabbitMQ for the tests: the shared server on 127.0.0.1:5672 (queues named by a prefix of
each test's own, deleted afterwards), or a private node a test may restart and wipe."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import aio_pika

from tests.redis_server import free_port
from tickwork.broker.redis_keys import LANES

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
ENV_VAR = "TICKWORK_TEST_AMQP_URL"


def shared_url() -> str:
    return os.environ.get(ENV_VAR, DEFAULT_URL)


async def delete_queues(url: str, prefix: str, queues: Iterable[str]) -> int:
    """Delete every lane's queue of ``queues`` under ``prefix``; how many existed."""
    connection = await aio_pika.connect(url)
    deleted = 0
    try:
        for queue in queues:
            for lane in LANES:
                channel = await connection.channel()
                try:
                    await channel.queue_delete(f"{prefix}.{queue}.{lane}", if_unused=False)
                    deleted += 1
                except aio_pika.exceptions.ChannelClosed:
                    pass  # there was none (404 closes the channel)
                finally:
                    if not channel.is_closed:
                        await channel.close()
    finally:
        await connection.close()
    return deleted


async def delete_cancel_stream(url: str, prefix: str) -> None:
    """Delete the cancel signals' exchange and stream of ``prefix``."""
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        await channel.queue_delete(f"{prefix}.cancels.recent")
        await channel.exchange_delete(f"{prefix}.cancels")
    finally:
        await connection.close()


class PrivateRabbitMQ:
    """A RabbitMQ node of our own on free ports (AMQP and Erlang distribution), with a
    throwaway data directory, for tests that restart or wipe the broker. Run as root, the
    node runs as the ``rabbitmq`` user (its Erlang cookie is that user's), started directly
    from the package's script rather than through ``/usr/sbin/rabbitmq-server``, whose
    ``su`` would put it in a session we could not kill as one group."""

    def __init__(self) -> None:
        if not Path(SERVER).exists():
            raise RuntimeError("rabbitmq-server is not installed (apt-get install rabbitmq-server)")
        self.port = free_port()
        self.dist_port = free_port()
        self.name = f"tickwork-{os.getpid()}-{os.urandom(3).hex()}@localhost"
        self.dir = Path(tempfile.mkdtemp(prefix="tickwork-rabbitmq-"))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def env(self) -> dict[str, str]:
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\n"
            "loopback_users = none\n"
            "vm_memory_high_watermark.relative = 0.2\n"
            "disk_free_limit.absolute = 50MB\n"
        )
        return dict(os.environ) | {
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq"),
            "RABBITMQ_PID_FILE": str(self.dir / "pid"),
        }

    def start(self) -> None:
        env = self.env()
        user = None
        if os.geteuid() == 0:
            user = "rabbitmq"
            env["HOME"] = "/var/lib/rabbitmq"
            for path in [self.dir, *self.dir.iterdir()]:
                shutil.chown(path, user, user)
        log = (self.dir / "server.out").open("ab")
        self._proc = subprocess.Popen(
            [SERVER], stdout=log, stderr=subprocess.STDOUT, env=env, user=user,
            start_new_session=True, cwd=self.dir,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + 60
        while not _amqp_answers(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.dir / "server.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"rabbitmq-server on {self.port} did not start:\n{tail}")
            time.sleep(0.1)  # polling a process that is starting, not synchronising tests

    def stop(self) -> None:
        """Kill the node (the whole process group: the script, the Erlang VM, epmd stays)."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)
            self._proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _amqp_answers(port: int) -> bool:
    """Whether an AMQP server answers the protocol header there."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"AMQP\x00\x00\x09\x01")
            return conn.recv(8).startswith(b"\x01\x00\x00")  # connection.start frame
    except OSError:
        return False
