"""Benchmark of the brokers alone: delayed-delivery lateness, publish-to-consume latency and
throughput, for MemoryBroker, RedisStreamsBroker (a real Redis) and RabbitMQBroker (a real
RabbitMQ).

  B1  lateness of `publish_at`: N messages due at distinct instants spread over S seconds
      (published up front), K consumers; lateness = received - due instant.
  B2  latency of `publish`: one message every 10 ms into a waiting consumer;
      latency = received - published.
  B3  throughput: M messages published in batches of 500, consumed and acked in batches
      of 100 by K consumers.

Usage: .venv/bin/python bench/broker.py [--redis-url redis://127.0.0.1:6379/0] [--consumers 2]
       [--amqp-url amqp://guest:guest@127.0.0.1:5672/] [--brokers memory,redis,rabbitmq]
It uses its own key prefix (queue prefix) on the servers and deletes its keys (queues)
afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aio_pika
import redis.asyncio as aioredis

from tickwork.broker.memory import MemoryBroker
from tickwork.broker.rabbitmq import RabbitMQBroker
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.broker.redis_keys import LANES
from tickwork.ports import Broker, Delivery

Make = Callable[[], Broker]


def utcnow() -> datetime:
    return datetime.now(UTC)


def summary(values_ms: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values_ms, n=100, method="inclusive")
    return {
        "n": len(values_ms),
        "p50_ms": round(statistics.median(values_ms), 2),
        "p95_ms": round(cuts[94], 2),
        "p99_ms": round(cuts[98], 2),
        "max_ms": round(max(values_ms), 2),
    }


async def drain(broker: Broker, want: int, got: list[tuple[Delivery, datetime]]) -> None:
    """Consume (and ack) until ``want`` deliveries were received by all consumers together."""
    deadline = time.monotonic() + 60
    while len(got) < want and time.monotonic() < deadline:
        batch = await broker.consume(["default"], 100, 0.2)
        received = utcnow()
        got.extend((d, received) for d in batch)
        await broker.ack(batch)


async def b1_lateness(make: Make, shared: Broker, n: int, seconds: float, k: int) -> Any:
    base = utcnow() + timedelta(seconds=1)
    due = {f"d{i}": base + timedelta(seconds=seconds * i / n) for i in range(n)}
    consumers = [make() for _ in range(k)]
    await shared.publish_at([(Delivery(i, 1), at) for i, at in due.items()])
    got: list[tuple[Delivery, datetime]] = []
    await asyncio.gather(*(drain(c, n, got) for c in consumers))
    for c in consumers:
        if c is not shared:
            await c.close()
    early = sum(1 for d, r in got if r < due[d.task_run_id])
    late = [(r - due[d.task_run_id]).total_seconds() * 1000 for d, r in got]
    return {**summary(late), "early": early}


async def b2_latency(make: Make, shared: Broker, n: int) -> Any:
    consumer = make()
    sent: dict[str, datetime] = {}
    got: list[tuple[Delivery, datetime]] = []
    reader = asyncio.create_task(drain(consumer, n, got))
    for i in range(n):
        sent[f"l{i}"] = utcnow()
        await shared.publish([Delivery(f"l{i}", 1)])
        await asyncio.sleep(0.01)  # the offered rate, not synchronisation
    await reader
    if consumer is not shared:
        await consumer.close()
    return summary([(r - sent[d.task_run_id]).total_seconds() * 1000 for d, r in got])


async def b3_throughput(make: Make, shared: Broker, n: int, k: int) -> Any:
    consumers = [make() for _ in range(k)]
    got: list[tuple[Delivery, datetime]] = []
    started = time.monotonic()
    readers = [asyncio.create_task(drain(c, n, got)) for c in consumers]
    for s in range(0, n, 500):
        await shared.publish([Delivery(f"t{i}", 1) for i in range(s, min(s + 500, n))])
    await asyncio.gather(*readers)
    elapsed = time.monotonic() - started
    for c in consumers:
        if c is not shared:
            await c.close()
    return {"messages": n, "seconds": round(elapsed, 3), "per_s": round(n / elapsed)}


async def run(name: str, make: Make, args: argparse.Namespace) -> dict[str, Any]:
    shared = make()
    try:
        return {
            "B1 publish_at lateness": await b1_lateness(
                make, shared, args.delayed, args.seconds, args.consumers
            ),
            "B2 publish latency": await b2_latency(make, shared, args.latency_messages),
            "B3 throughput": await b3_throughput(make, shared, args.messages, args.consumers),
        }
    finally:
        await shared.close()


async def main(args: argparse.Namespace) -> None:
    results: dict[str, Any] = {"consumers": args.consumers, "cpus": os.cpu_count()}
    brokers = args.brokers.split(",")
    if "memory" in brokers:
        memory = MemoryBroker()  # one in-process broker: every "consumer" shares it
        results["memory"] = await run("memory", lambda: memory, args)
    prefix = f"tickwork-bench-{os.urandom(3).hex()}"
    if "rabbitmq" in brokers:
        try:
            results["rabbitmq"] = await run(
                "rabbitmq", lambda: RabbitMQBroker(args.amqp_url, prefix=prefix), args
            )
        finally:
            await _delete_queues(args.amqp_url, prefix)
    if "redis" not in brokers:
        print(json.dumps(results, indent=2))
        return
    try:
        results["redis"] = await run(
            "redis", lambda: RedisStreamsBroker(args.redis_url, prefix=prefix), args
        )
    finally:
        client = aioredis.Redis.from_url(args.redis_url)
        keys = [key async for key in client.scan_iter(match=f"{{{prefix}}}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    print(json.dumps(results, indent=2))


async def _delete_queues(url: str, prefix: str) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        for lane in LANES:
            await channel.queue_delete(f"{prefix}.default.{lane}")
    finally:
        await connection.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--brokers", default="memory,redis,rabbitmq")
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--delayed", type=int, default=2000, help="B1 messages")
    parser.add_argument("--seconds", type=float, default=5.0, help="B1 spread")
    parser.add_argument("--latency-messages", type=int, default=300, help="B2 messages")
    parser.add_argument("--messages", type=int, default=20000, help="B3 messages")
    asyncio.run(main(parser.parse_args()))
