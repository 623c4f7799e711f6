"""Request size limit: a body over the limit gets 413 before anything parses or writes it."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Default cap on a request body: 1 MiB.
DEFAULT_MAX_BODY = 1024 * 1024


class BodyLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` with 413 in the API's error shape.

    A declared ``Content-Length`` over the limit is refused at once; otherwise the body is
    read (at most ``max_bytes`` + one chunk) and handed on whole, so a chunked upload that
    grows past the limit is refused too, before the app sees any of it.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in {"GET", "HEAD", "OPTIONS"}:
            await self.app(scope, receive, send)
            return
        if _declared_length(scope) > self.max_bytes:
            await self._refuse(send)
            return
        body = await self._read(receive)
        if body is None:
            await self._refuse(send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse(self, send: Send) -> None:
        message = f"the request body is larger than {self.max_bytes} bytes"
        payload = {"error": {"code": "payload_too_large", "message": message}}
        data = json.dumps(payload).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": data})


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
