"""The floor under ``bench/producer.py``: the same HTTP calls against a server that does nothing.

    .venv/bin/python bench/http_floor.py [--runs 3000] [--in-flight 32]

Starts uvicorn (as ``tickwork api`` runs it: httptools, no access log) on a free port with a
bare ASGI app that answers every request ``201 {"run_id": ..., "task_run_ids": [...]}`` without
reading anything but the body, then measures what ``bench/producer.py`` measures, with the
SDK's own wires (``sdk/http1.py`` for ``Client``, ``sdk/http1_async.py`` for ``AsyncClient``): one
thread calling ``Client.enqueue`` in a loop, and one ``AsyncClient`` with ``--in-flight`` calls
at once. It prints jobs/s and the client's and the server's CPU per call: what HTTP alone
costs, with no database, no broker and no tickwork server code. Also: the same
``AsyncClient`` calls through ``httpx2.MockTransport`` (no socket, no server; the httpx2 wire a
given ``transport`` takes) for the SDK's own CPU per call above the network.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_submit import cpu_s, free_port, wait_ready

from tickwork.sdk import AsyncClient, Client

ANSWER = json.dumps({"run_id": "r" * 32, "task_run_ids": ["t" * 32]}).encode()
SERVER = """
import sys, uvicorn
ANSWER = %r
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    status = 200 if scope["path"] == "/readyz" else 201
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%%d" %% len(ANSWER))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": ANSWER})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False,
            lifespan="off")
"""


def one_thread(url: str, runs: int) -> tuple[float, float]:
    with Client(url, token="tw_x_y") as tw:
        tw.enqueue("q", {"i": -1})
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(runs):
            tw.enqueue("q", {"i": i})
        return time.perf_counter() - t0, time.process_time() - c0


async def in_flight(url: str | None, runs: int, width: int) -> tuple[float, float]:
    transport = None
    if url is None:
        transport = httpx2.MockTransport(lambda _: httpx2.Response(201, content=ANSWER))
    left = iter(range(runs))

    async def lane(tw: AsyncClient) -> None:
        for i in left:
            await tw.enqueue("q", {"i": i})

    async with AsyncClient(
        url or "http://mock", token="tw_x_y", max_connections=width, transport=transport
    ) as tw:
        await tw.enqueue("q", {"i": -1})
        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(lane(tw) for _ in range(width)))
        return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--in-flight", type=int, default=32)
    args = parser.parse_args()
    port = free_port()
    code = SERVER % (ANSWER,)
    server = subprocess.Popen([sys.executable, "-c", code, str(port)], env=os.environ.copy())
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, time.monotonic() + 30)
        before = cpu_s(server.pid)
        wall, cpu = one_thread(url, args.runs)
        spent = cpu_s(server.pid) - before
        print(f"Client.enqueue, one thread: {args.runs / wall:,.0f} calls/s, client CPU "
              f"{cpu / args.runs * 1e6:,.0f} µs/call, server CPU "
              f"{spent / args.runs * 1e6:,.0f} µs/call", flush=True)  # fmt: skip
        before = cpu_s(server.pid)
        wall, cpu = asyncio.run(in_flight(url, args.runs, args.in_flight))
        spent = cpu_s(server.pid) - before
        print(f"AsyncClient, {args.in_flight} in flight: {args.runs / wall:,.0f} calls/s, client "
              f"CPU {cpu / args.runs * 1e6:,.0f} µs/call, server CPU "
              f"{spent / args.runs * 1e6:,.0f} µs/call", flush=True)  # fmt: skip
        wall, cpu = asyncio.run(in_flight(None, args.runs, args.in_flight))
        print(f"AsyncClient over MockTransport (no socket): {args.runs / wall:,.0f} calls/s, "
              f"client CPU {cpu / args.runs * 1e6:,.0f} µs/call", flush=True)  # fmt: skip
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
