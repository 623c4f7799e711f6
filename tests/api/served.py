"""The API app served by a real uvicorn on a loopback socket, for the SDK's network wires."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn


@asynccontextmanager
async def serving(app: Any, **config: Any) -> AsyncIterator[str]:
    """``app`` under uvicorn on a free port until the block ends; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", **config))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        assert not task.done(), "the server stopped"
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
