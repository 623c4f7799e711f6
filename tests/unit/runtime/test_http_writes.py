"""``serve/http_writes``: an answer's headers and body leave in one write; streams still flow."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from tickwork.serve.http_writes import JoinedWrites, JoinedWritesProtocol


class Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.closed


async def test_writes_of_one_turn_leave_as_one() -> None:
    recorder = Recorder()
    joined = JoinedWrites(recorder, asyncio.get_running_loop())  # type: ignore[arg-type]
    joined.write(b"HTTP/1.1 201 Created\r\n\r\n")
    joined.write(bytearray(b"{}"))
    assert recorder.writes == []
    await asyncio.sleep(0)  # the loop's turn ends
    assert recorder.writes == [b"HTTP/1.1 201 Created\r\n\r\n{}"]
    joined.writelines([b"a", b"b"])
    await asyncio.sleep(0)
    assert recorder.writes[1:] == [b"ab"]
    assert not joined.is_closing()  # anything else is the transport's


async def test_close_sends_what_was_written_and_abort_drops_it() -> None:
    first, second = Recorder(), Recorder()
    loop = asyncio.get_running_loop()
    closing = JoinedWrites(first, loop)  # type: ignore[arg-type]
    closing.write(b"last words")
    closing.close()
    aborting = JoinedWrites(second, loop)  # type: ignore[arg-type]
    aborting.write(b"never sent")
    aborting.abort()
    await asyncio.sleep(0)
    assert (first.writes, first.closed) == ([b"last words"], True)
    assert (second.writes, second.aborted) == ([], True)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/stream":  # three chunks, each sent after the client asked for it
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(3):
            await send({"type": "http.response.body", "body": b"chunk%d" % i, "more_body": True})
            await asyncio.sleep(0)  # the next chunk in another turn of the loop
        await send({"type": "http.response.body", "body": b""})
        return
    body = b'{"run_id":"r1"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", b"15")]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def test_a_served_answer_arrives_whole_and_a_stream_in_chunks() -> None:
    listening = socket.create_server(("127.0.0.1", 0))  # clients wait in its backlog
    port = listening.getsockname()[1]
    config = uvicorn.Config(app, http=JoinedWritesProtocol, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /runs HTTP/1.1\r\nhost: t\r\ncontent-length: 0\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 201 ")
        assert await reader.readexactly(15) == b'{"run_id":"r1"}'
        writer.write(b"GET /stream HTTP/1.1\r\nhost: t\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"transfer-encoding: chunked" in head
        chunks = [await reader.readuntil(b"\r\n0\r\n\r\n")]
        writer.close()
        await writer.wait_closed()
    finally:
        server.should_exit = True
        await serving
        listening.close()
    assert chunks == [b"6\r\nchunk0\r\n6\r\nchunk1\r\n6\r\nchunk2\r\n0\r\n\r\n"]
