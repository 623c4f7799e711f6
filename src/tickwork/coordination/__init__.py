"""Scheduler leases held outside the database: etcd and ZooKeeper, behind ``LeaseStore``.

Their tokens are checked where the writes land by the store's fence row (``Fence.external``).
``open_leases`` picks the backend from ``TICKWORK_COORDINATION_URL``; with none, the
database's own lease is used, as before.
"""

from __future__ import annotations

from typing import Protocol

from tickwork.core.errors import ValidationError
from tickwork.ports import LeaseStore


class ExternalLeases(LeaseStore, Protocol):
    async def close(self) -> None: ...


def open_leases(url: str) -> ExternalLeases:
    """The lease store of ``url``: ``etcd://host:2379[,host:port…][/prefix]`` or
    ``zookeeper://host:2181[,host:port…]/chroot``."""
    if url.startswith("etcd://"):
        from tickwork.coordination.etcd import EtcdLeases

        return EtcdLeases(url)
    if url.startswith("zookeeper://"):
        from tickwork.coordination.zookeeper import ZooKeeperLeases

        return ZooKeeperLeases(url)
    raise ValidationError(
        "coordination_url",
        f"must start with etcd:// or zookeeper:// (or be empty for the database's own "
        f"lease), not {url!r}",
    )


def split_hosts(url: str, scheme: str, default_port: int) -> tuple[list[str], str]:
    """``scheme://h1:p1,h2/path`` as (["h1:p1", "h2:<default_port>"], "/path")."""
    rest = url.removeprefix(scheme)
    netloc, _, path = rest.partition("/")
    hosts = []
    for part in netloc.split(","):
        host = part.strip()
        if not host:
            continue
        hosts.append(host if ":" in host.rsplit("]", 1)[-1] else f"{host}:{default_port}")
    if not hosts:
        raise ValidationError("coordination_url", f"names no host: {url!r}")
    return hosts, "/" + path.strip("/") if path.strip("/") else ""
