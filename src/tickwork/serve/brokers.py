"""The broker and cancel signals of distributed mode, picked by ``broker_url``: Redis Streams
by default (``redis_url``), RabbitMQ for an ``amqp://`` URL (docs/distributed.md)."""

from __future__ import annotations

from tickwork.app.settings import Settings
from tickwork.broker.rabbitmq import RabbitMQBroker
from tickwork.broker.rabbitmq_signals import RabbitMQCancelSignals
from tickwork.broker.redis import RedisStreamsBroker
from tickwork.broker.redis_signals import RedisCancelSignals
from tickwork.core.errors import ValidationError
from tickwork.ports import Broker, CancelSignals

AMQP = ("amqp://", "amqps://")


def open_broker(settings: Settings, consumer: str | None = None) -> Broker:
    """The broker; queue and key names start with ``redis_prefix`` on either.

    RabbitMQ pushes up to ``prefetch`` unacked messages per lane to a worker ahead of its
    consume calls: four per task slot (between 8 and the pool's ``max_prefetch``, 256), a
    claim-ahead's worth for short tasks, without one worker hoarding a burst of long ones
    while others idle."""
    if _rabbitmq(settings):
        prefetch = min(max(4 * settings.concurrency, 8), 256)
        return RabbitMQBroker(settings.broker_url, prefix=settings.redis_prefix, prefetch=prefetch)
    return RedisStreamsBroker(_redis(settings), prefix=settings.redis_prefix, consumer=consumer)


def open_cancels(settings: Settings) -> CancelSignals:
    if _rabbitmq(settings):
        return RabbitMQCancelSignals(settings.broker_url, prefix=settings.redis_prefix)
    return RedisCancelSignals(_redis(settings), prefix=settings.redis_prefix)


def _rabbitmq(settings: Settings) -> bool:
    url = settings.broker_url
    if url and not url.startswith((*AMQP, "redis://", "rediss://", "unix://")):
        raise ValidationError(
            "broker_url", f"must be amqp://… (RabbitMQ) or redis://… (or empty), not {url!r}"
        )
    return url.startswith(AMQP)


def _redis(settings: Settings) -> str:
    return settings.broker_url or settings.redis_url
