"""A response's headers and body in one ``send``: uvicorn's httptools protocol over a transport
that joins the writes made in one turn of the event loop.

uvicorn writes a response's status line and headers (``http.response.start``) and its body as
two ``transport.write`` calls. On an idle socket each is a ``send(2)`` of its own: the first
wakes the client, which reads the headers alone and sleeps again until the body comes; on the
loaded 2-core bench machine the woken client often took the CPU between the two, and the
answer's second half waited for it (the single enqueue's body send p99 4.7 ms; trace in
bench/README.md). Here a write is held until the event loop's current turn ends, or the next
write comes: an answer leaves as one segment, one ``send`` and one wake-up of the client. A
streamed body (the dashboard's live streams) still goes out at every turn of the loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class JoinedWrites:
    """A transport whose writes within one turn of the event loop leave as one write."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is None:
            self._held = [bytes(data)]
            self._loop.call_soon(self.flush)
        else:
            self._held.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held:
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()  # what was written before the close still goes, as with a transport
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, pause_reading, ...
        return getattr(self._transport, name)


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over ``JoinedWrites`` (``uvicorn.Config(http=...)``)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        joined = JoinedWrites(transport, self.loop)  # type: ignore[arg-type]
        super().connection_made(joined)  # type: ignore[arg-type]
