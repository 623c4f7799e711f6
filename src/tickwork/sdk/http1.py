"""``Client``'s wire: HTTP/1.1 on pooled sockets, just what the SDK's calls need.

Until session 16 ``Client`` sent through urllib3. Against a server that answers at once
(``bench/http_floor.py``), a call cost the client ~250 µs of CPU through urllib3 and ~140 µs
through ``http.client`` (which urllib3 drives), against ~45 µs written on the socket here; and
both sent a request's headers and its body in two ``send`` calls, so the server woke and read
twice per request (~80 µs more of its CPU). Here a request goes in one ``sendall``, and the
answer is read off the socket and parsed in a few string operations.

What it keeps of urllib3's pool: connections kept alive and reused (the last one used first),
at most ``max_connections`` at once, shared safely by threads (a call waits up to ``timeout``
for a free one); a pooled connection the server has closed is noticed before a request is sent
on it, and one idle longer than ``keepalive`` seconds (under the server's keep-alive) is not
used again. A request is never sent twice: a failure after it may have left raises
``Unreachable``. ``timeout`` bounds the connect and each read and write. https URLs go over TLS
with the system's certificates, verified.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from tickwork.sdk.errors import Unreachable
from tickwork.sdk.wires import Reply, Settings, _encode, unusable

if TYPE_CHECKING:
    import ssl

    from tickwork.sdk.calls import Call

#: An answer's status line and headers longer than this are refused (a server gone wrong).
MAX_HEAD = 64 * 1024
_READ = 64 * 1024  # bytes asked of the socket at once (more: malloc maps each buffer)
_BODY_EXPECTED = frozenset({"POST", "PUT", "PATCH"})  # given no body: "Content-Length: 0"


class BadAnswer(Exception):
    """The bytes that came back are not an HTTP/1.x answer (or stopped in the middle)."""


class Origin:
    """The server a wire talks to, from its base URL: where to connect, the base path, and
    the headers every request carries; builds each request's bytes."""

    def __init__(self, settings: Settings) -> None:
        self.url = settings.url
        self.unusable = unusable(settings.url)
        parts = urlsplit(settings.url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        try:
            port = parts.port
        except ValueError as exc:  # not a number, or out of range
            port, self.unusable = None, self.unusable or f"{exc} in {settings.url!r}"
        self.port = port or (443 if self.tls else 80)
        self._prefix = parts.path
        host = f"[{self.host}]" if ":" in self.host else self.host
        if port is not None:
            host += f":{port}"
        fixed = {"Host": host, "Accept-Encoding": "identity", "User-Agent": "tickwork-sdk",
                 "Accept": "application/json"}  # fmt: skip
        if settings.token:
            fixed["Authorization"] = f"Bearer {settings.token}"
        self._fixed = "".join(_header(k, v) for k, v in fixed.items())
        self._context: ssl.SSLContext | None = None

    def context(self) -> ssl.SSLContext | None:
        """TLS settings for https (the system's certificates, verified), made on first use."""
        if self.tls and self._context is None:
            import ssl  # on first use: ~15 ms of import a plain-http client never needs

            self._context = ssl.create_default_context()
        return self._context

    def request(self, call: Call[Any]) -> bytes:
        """The request's bytes: line, headers and body, sent in one piece."""
        query = call.query()
        target = self._prefix + call.url() + (f"?{urlencode(query)}" if query else "")
        if not target.isascii() or not target.isprintable() or " " in target:
            raise ValueError(f"cannot send the URL path {target!r}")
        head = f"{call.method} {target} HTTP/1.1\r\n{self._fixed}"
        body = b""
        if call.json is not None:
            body = _encode(call.json).encode()
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        elif call.method in _BODY_EXPECTED:
            head += "Content-Length: 0\r\n"
        if call.headers:
            head += "".join(_header(k, v) for k, v in call.headers.items())
        return (head + "\r\n").encode("latin-1") + body

    def unreachable(self, exc: BaseException) -> Unreachable:
        return Unreachable(self.url, str(exc) or type(exc).__name__)


class Http1Wire:
    """``Client``'s wire: sends ``Call``\\ s over a pool of keep-alive HTTP/1.1 connections
    (one per request in flight, at most ``max_connections``), shared by threads."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._origin = Origin(settings)
        #: Idle connections and when each was last used; the newest last (used first).
        self._idle: list[tuple[socket.socket, float]] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(settings.max_connections)
        self._closed = False

    def send(self, call: Call[Any]) -> Reply:
        origin = self._origin
        if origin.unusable is not None:  # as any other URL nothing answers at: on the call
            raise Unreachable(origin.url, origin.unusable)
        request = origin.request(call)
        timeout = self._settings.timeout
        if not self._slots.acquire(timeout=timeout):
            raise Unreachable(origin.url, f"no free connection within {timeout:g} s")
        try:
            if self._closed:
                raise Unreachable(origin.url, "the client is closed")
            sock, kept = self._pooled(), False
            try:
                if sock is None:
                    sock = self._connect()
                sock.sendall(request)
                reply, reusable = _answer(sock, call.method == "HEAD")
                if reusable and not self._closed:
                    with self._lock:
                        self._idle.append((sock, time.monotonic()))
                    kept = True
                return reply
            except (OSError, BadAnswer) as exc:
                raise origin.unreachable(exc) from exc
            finally:
                if sock is not None and not kept:
                    sock.close()  # failed, interrupted, or not reusable
        finally:
            self._slots.release()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for sock, _ in idle:
            sock.close()

    def _pooled(self) -> socket.socket | None:
        """An idle connection still open and fresh, if any (stale ones are closed)."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sock, used = self._idle.pop()
            if now - used < self._settings.keepalive and not readable(sock):
                return sock
            sock.close()  # expired, or the server closed it (or sent what nobody asked for)

    def _connect(self) -> socket.socket:
        origin = self._origin
        sock = socket.create_connection((origin.host, origin.port), self._settings.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            context = origin.context()
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=origin.host)
        except BaseException:
            sock.close()
            raise
        return sock


def _header(name: str, value: str) -> str:
    if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
        raise ValueError(f"invalid header {name!r}: {value!r}")
    return f"{name}: {value}\r\n"


def readable(sock: Any) -> bool:
    """Whether an idle connection has something to read: the server closed it (or wrote
    without being asked); either way it is not reused."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


def _answer(sock: socket.socket, head_only: bool) -> tuple[Reply, bool]:
    """The answer to the request just sent, and whether the connection can carry another."""
    buf = bytearray()
    while True:
        data = sock.recv(_READ)
        buf += data
        answer = parse(buf, head_only, eof=not data)
        if answer is not None:
            return answer


def parse(buf: bytearray, head_only: bool, eof: bool) -> tuple[Reply, bool] | None:
    """The answer in ``buf`` and whether its connection can carry another request, or None
    while it is incomplete; ``eof``: the server closed the connection after ``buf``."""
    pos = 0
    while True:
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0:
            _incomplete(buf, pos, eof)
            return None
        lines = buf[pos:end].decode("latin-1").split("\r\n")
        version, _, status_reason = lines[0].partition(" ")
        code, _, reason = status_reason.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit() or len(code) != 3:
            raise BadAnswer(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status, pos = int(code), end + 4
        if not 100 <= status < 200 or status == 101:  # 1xx: informational, the answer follows
            break
    length, chunked, close = _framing(version, lines[1:])
    if head_only or status in (204, 304) or status == 101:
        body, done = b"", pos
    elif chunked:
        chunks = _chunks(buf, pos, eof)
        if chunks is None:
            return None
        body, done = chunks
    elif length is not None:
        if len(buf) - pos < length:
            _incomplete(buf, len(buf), eof)
            return None
        body, done = bytes(buf[pos : pos + length]), pos + length
    else:  # the body runs to the close
        if not eof:
            return None
        body, done, close = bytes(buf[pos:]), len(buf), True
    return Reply(status, reason, body), not close and done == len(buf)


def _incomplete(buf: bytearray, pos: int, eof: bool) -> None:
    """Raises if the answer from ``pos`` on cannot complete (closed, or a line too long)."""
    if eof:
        raise BadAnswer("the server closed the connection before its answer ended")
    if len(buf) - pos > MAX_HEAD:
        raise BadAnswer("an answer's headers or chunk line too long")


def _chunks(buf: bytearray, pos: int, eof: bool) -> tuple[bytes, int] | None:
    """A chunked body from ``buf[pos:]`` and where it ends, or None if incomplete."""
    parts: list[bytes] = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            _incomplete(buf, pos, eof)
            return None
        size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadAnswer(f"bad chunk size: {size_text[:80]!r}") from None
        pos = eol + 2
        if size == 0:
            while (eol := buf.find(b"\r\n", pos)) != pos:  # trailers, up to a blank line
                if eol < 0:
                    _incomplete(buf, pos, eof)
                    return None
                pos = eol + 2
            return b"".join(parts), pos + 2
        if len(buf) < pos + size + 2:
            _incomplete(buf, len(buf), eof)
            return None
        if buf[pos + size : pos + size + 2] != b"\r\n":
            raise BadAnswer("a chunk not followed by CRLF")
        parts.append(bytes(buf[pos : pos + size]))
        pos += size + 2


def _framing(version: str, headers: list[str]) -> tuple[int | None, bool, bool]:
    """From an answer's headers: its body's length (None: not given), whether it comes in
    chunks, and whether the server closes the connection after it."""
    length, chunked, close = None, False, version == "HTTP/1.0"
    for line in headers:
        name, colon, value = line.partition(":")
        if not colon:
            raise BadAnswer(f"not an HTTP header: {line[:80]!r}")
        name = name.strip().lower()
        if name == "content-length":
            if not value.strip().isdigit():
                raise BadAnswer(f"bad Content-Length: {value.strip()[:80]!r}")
            length = int(value)
        elif name == "transfer-encoding":
            chunked = value.strip().lower().endswith("chunked")
            close = close or not chunked  # another coding: the body runs to the close
        elif name == "connection":
            tokens = {t.strip() for t in value.lower().split(",")}
            close = "close" in tokens or (version == "HTTP/1.0" and "keep-alive" not in tokens)
    return length, chunked, close
