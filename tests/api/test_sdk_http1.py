"""The clients' own HTTP/1.1 wires (``sdk/http1.py``, ``sdk/http1_async.py``) against a
socket server that answers what a test scripts: the answers' framings (length, chunks, to the
close), connections the server closes, broken answers, cancelled calls, the pool shared by
threads or tasks, https. The API itself is driven through these wires in ``test_sdk_wires.py`` and
``test_sdk_pool.py``."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import tickwork.sdk.clients as sdk_clients
from tests.api.served import serving
from tickwork.sdk import ApiError, AsyncClient, Client, Unreachable

BODY = json.dumps({"name": "j"}).encode()
ERROR = json.dumps({"error": {"code": "not_found", "message": "no such job"}}).encode()
#: Scripted answers, by the job name a ``get_job`` asks for.
ANSWERS: dict[str, bytes] = {
    "length": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY),
    "chunked": (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;x=1\r\n" + BODY[:5] + b"\r\n%x\r\n" % (len(BODY) - 5) + BODY[5:] + b"\r\n"
        b"0\r\nTrailer: t\r\n\r\n"
    ),
    "close": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
    % (len(BODY), BODY),
    "to-close": b"HTTP/1.0 200 OK\r\n\r\n" + BODY,
    "cut": b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + BODY,
    "garbage": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "refused": b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(ERROR), ERROR),
}
CLOSES_AFTER = {"close", "to-close", "cut", "garbage", "idle-close"}


class Scripted:
    """A threaded socket server: reads each request whole, answers it as scripted by its
    path's last segment, and counts connections and requests."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.requests: list[bytes] = []
        self.lock = threading.Lock()
        self.gate: threading.Barrier | None = None
        self.hangups = 0  # connections the server closed after answering
        self.hung_up = threading.Condition(self.lock)
        self.release = threading.Event()  # lets a "hang" request be answered
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                with self.lock:
                    self.requests.append(head)
                if self.gate is not None:
                    self.gate.wait(10)
                asked = head.split(b" ")[1].rsplit(b"/", 1)[1].decode()
                if asked == "hang":
                    self.release.wait(10)
                conn.sendall(ANSWERS.get(asked, ANSWERS["length"]))
                if asked in CLOSES_AFTER:
                    break
        with self.hung_up:
            self.hangups += 1
            self.hung_up.notify_all()

    def has_hung_up(self, count: int) -> bool:
        """Waits (up to 10 s) until the server has closed ``count`` connections."""
        with self.hung_up:
            return self.hung_up.wait_for(lambda: self.hangups >= count, timeout=10)

    def close(self) -> None:
        self.release.set()
        self.listener.close()


@pytest.fixture
def server() -> Iterator[Scripted]:
    scripted = Scripted()
    yield scripted
    scripted.close()


def calls(url: str, *names: str, **options: float) -> list[object]:
    """``get_job`` of each name in turn through one ``Client``."""
    with Client(url, token="tw_a_b", timeout=5.0, **options) as tw:  # type: ignore[arg-type]
        return [tw.get_job(name) for name in names]


def test_each_framing_is_read_and_kept_alive_connections_are_reused(server: Scripted) -> None:
    got = calls(server.url, "length", "chunked", "length", "close", "length", "to-close", "length")
    assert got == [{"name": "j"}] * 7
    # one connection until the server's "close", one more until its HTTP/1.0 answer, a third
    assert server.connections == 3
    assert len(server.requests) == 7
    first = server.requests[0].decode()
    assert first.startswith("GET /api/v1/jobs/length HTTP/1.1\r\n")
    assert "\r\nAuthorization: Bearer tw_a_b" in first and "\r\nHost: 127.0.0.1:" in first


def test_an_error_answer_raises_api_error_and_keeps_the_connection(server: Scripted) -> None:
    with Client(server.url, timeout=5.0) as tw:
        with pytest.raises(ApiError) as refused:
            tw.get_job("refused")
        assert (refused.value.status, refused.value.code) == (404, "not_found")
        assert dict(tw.get_job("length")) == {"name": "j"}
    assert server.connections == 1


def test_a_connection_the_server_closed_while_idle_is_not_used(server: Scripted) -> None:
    with Client(server.url, timeout=5.0) as tw:
        tw.get_job("idle-close")  # the server answers, then closes the connection
        assert server.has_hung_up(1)
        assert dict(tw.get_job("length")) == {"name": "j"}  # on a new one, not an error
    assert server.connections == 2


def test_idle_connections_past_the_keepalive_are_not_reused(
    server: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sdk_clients, "KEEPALIVE_EXPIRY", 0.0)
    assert calls(server.url, "length", "length", "length") == [{"name": "j"}] * 3
    assert server.connections == 3


@pytest.mark.parametrize("name", ["cut", "garbage"])
def test_a_broken_answer_raises_unreachable_and_is_not_sent_again(
    server: Scripted, name: str
) -> None:
    with pytest.raises(Unreachable, match=server.url):
        calls(server.url, name)
    assert len(server.requests) == 1


def test_a_header_that_would_split_the_request_is_refused_before_sending(
    server: Scripted,
) -> None:
    with Client(server.url, timeout=5.0) as tw, pytest.raises(ValueError, match="header"):
        tw.enqueue("j", idempotency_key="k\r\nX-Evil: 1")
    assert server.requests == []


def test_threads_share_the_pool_up_to_max_connections(server: Scripted) -> None:
    server.gate = threading.Barrier(2)  # every request waits for a second one in the server
    with Client(server.url, timeout=5.0, max_connections=2) as tw:
        get: Callable[[int], object] = lambda _: tw.get_job("length")  # noqa: E731
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(get, range(40)))
    assert got == [{"name": "j"}] * 40
    assert server.connections == 2


def test_a_closed_client_raises_unreachable(server: Scripted) -> None:
    tw = Client(server.url, timeout=5.0)
    tw.get_job("length")
    tw.close()
    with pytest.raises(Unreachable, match="closed"):
        tw.get_job("length")


async def test_async_each_framing_is_read_and_kept_alive_connections_are_reused(
    server: Scripted,
) -> None:
    names = ["length", "chunked", "length", "close", "length", "to-close", "length"]
    async with AsyncClient(server.url, token="tw_a_b", timeout=5.0) as tw:
        got = [dict(await tw.get_job(name)) for name in names]
        with pytest.raises(ApiError) as refused:
            await tw.get_job("refused")
        assert refused.value.code == "not_found"
        assert dict(await tw.get_job("idle-close")) == {"name": "j"}
        assert server.has_hung_up(3)  # after "close" and "to-close"
        assert dict(await tw.get_job("length")) == {"name": "j"}  # on a new one, not an error
    assert got == [{"name": "j"}] * 7
    assert server.connections == 4  # the server closed three
    assert server.requests[0].decode().startswith("GET /api/v1/jobs/length HTTP/1.1\r\n")


@pytest.mark.parametrize("name", ["cut", "garbage"])
async def test_async_a_broken_answer_raises_unreachable_and_is_not_sent_again(
    server: Scripted, name: str
) -> None:
    async with AsyncClient(server.url, timeout=5.0) as tw:
        with pytest.raises(Unreachable, match=server.url):
            await tw.get_job(name)
    assert len(server.requests) == 1


async def test_async_a_call_cancelled_mid_request_does_not_leave_its_connection_pooled(
    server: Scripted,
) -> None:
    async with AsyncClient(server.url, timeout=5.0) as tw:
        assert dict(await tw.get_job("length")) == {"name": "j"}

        async def hanging() -> object:
            return await tw.get_job("hang")

        call = asyncio.create_task(hanging())
        deadline = asyncio.get_running_loop().time() + 10
        while len(server.requests) < 2:  # the request is in the server
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        server.release.set()  # the late answer goes to a connection the client closed
        assert dict(await tw.get_job("length")) == {"name": "j"}
    assert server.connections == 2


async def test_async_calls_wait_for_one_of_max_connections(server: Scripted) -> None:
    server.gate = threading.Barrier(3)  # every request waits for two more in the server
    async with AsyncClient(server.url, timeout=5.0, max_connections=3) as tw:
        got = await asyncio.gather(*(tw.get_job("length") for _ in range(30)))
    assert [dict(job) for job in got] == [{"name": "j"}] * 30
    assert server.connections == 3


def _self_signed(where: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, signed by its own key: (cert, key) files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = where / "cert.pem", where / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


async def test_https_with_a_trusted_certificate_and_refused_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    peers: set[tuple[str, int]] = set()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            peers.add(tuple(scope["client"]))
            headers = [(b"content-length", str(len(BODY)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": BODY})

    async with serving(app, ssl_certfile=str(cert), ssl_keyfile=str(key)) as url:
        https = url.replace("http://", "https://")
        with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
            await asyncio.to_thread(calls, https, "length")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read when a client makes its context
        got = await asyncio.to_thread(calls, https, "length", "length", "length")
        assert got == [{"name": "j"}] * 3 and len(peers) == 1
        async with AsyncClient(https, timeout=5.0) as tw:
            assert dict(await tw.get_job("length")) == {"name": "j"}
            assert dict(await tw.get_job("length")) == {"name": "j"}
        assert len(peers) == 2
