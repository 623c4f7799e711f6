"""The scheduler lease in ZooKeeper (kazoo), as an ephemeral sequential node.

A lease named ``name`` is held by the lowest child of ``<chroot>/leases/<name>``; each child
is an ephemeral sequential node whose data names its holder. A replica takes a free lease
by creating its child and reading the children back: the lowest one wins, and a loser
deletes its own child at once. The fencing token is the winning node's ``czxid``, the id of
the transaction that created it: ZooKeeper's zxids only ever grow across the ensemble, so
every new holder gets a higher token (unlike the sequence number, it survives the parent
being deleted).

The lease lives as long as the replica's ZooKeeper session, whose timeout is the lease's
``ttl``: kazoo pings the server while the process runs, so a killed or frozen replica's node
is deleted by the server ``ttl`` after it last heard from it, and a standby takes over then.
A renewal is a round trip that checks the node is still there and still owned by this
session; it fails (the leader steps down at once) as soon as kazoo has lost the connection
(``SUSPENDED``), even if the session may still come back, as the kazoo docs advise.

ZooKeeper grants a session timeout between 2 and 20 of its ticks (4 to 40 s by default).
A timeout shorter than the ``ttl`` asked for would let the server end the lease before the
leader's own deadline, so that is refused (``CoordinationUnavailable`` naming both).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, ZnodeStat

from tickwork.coordination import split_hosts
from tickwork.core.errors import CoordinationUnavailable
from tickwork.ports import Lease

T = TypeVar("T")
CONNECT_TIMEOUT = 10.0  # seconds to wait for a session

log = logging.getLogger("tickwork.coordination.zookeeper")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class _SessionTimeouts(logging.Filter):
    """kazoo does not expose the session timeout the server negotiated, but logs it when a
    session is created: keep it per session id (and drop kazoo's chatter below INFO)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_session: dict[int, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        args: Any = record.args
        if str(record.msg).startswith("Session created") and isinstance(args, tuple):
            self.by_session[int(args[0])] = float(args[2]) / 1000
        return record.levelno >= logging.INFO


_timeouts = _SessionTimeouts()
_kazoo_log = logging.getLogger("tickwork.coordination.kazoo")
_kazoo_log.setLevel(5)  # kazoo's BLATHER, where the session's timeout is logged
_kazoo_log.addFilter(_timeouts)


@dataclass(frozen=True, slots=True)
class _Node:
    path: str
    holder: str
    acquired_at: datetime
    token: int  # czxid
    owner: int  # the session that holds it (ephemeralOwner)


class ZooKeeperLeases:
    """The ``LeaseStore`` port on ZooKeeper (see the module). One session per instance: run
    one per scheduler process. Leases it hands out are ``external``."""

    def __init__(self, url: str, *, clock: Callable[[], datetime] = _utcnow) -> None:
        hosts, chroot = split_hosts(url, "zookeeper://", 2181)
        self._hosts = ",".join(hosts)
        self._root = chroot or "/tickwork"  # every path is under it (not kazoo's chroot,
        # which must exist before a session can use it)
        self._clock = clock
        self._client: KazooClient | None = None
        self._ttl = 0.0
        # kazoo blocks; its calls run here. One thread: requests go out in order anyway.
        self._threads = ThreadPoolExecutor(1, thread_name_prefix="tickwork-zookeeper")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await self._call(lambda: (client.stop(), client.close()))
        self._threads.shutdown(wait=False)

    async def acquire_lease(self, name: str, holder: str, ttl: float) -> Lease | None:
        client = await self._session(ttl)
        return await self._call(lambda: self._acquire(client, name, holder))

    async def renew_lease(self, name: str, holder: str, token: int, ttl: float) -> Lease | None:
        client = await self._session(ttl)
        if client.state != KazooState.CONNECTED:
            return None  # suspended or lost: step down now, whatever the session does next
        node = await self._call(lambda: _lowest(client, self._dir(name)))
        if not self._mine(client, node, holder) or node is None or node.token != token:
            return None
        return self._lease(name, node)

    async def release_lease(self, name: str, holder: str, token: int) -> bool:
        client = self._client
        if client is None or client.state != KazooState.CONNECTED:
            return False
        node = await self._call(lambda: _lowest(client, self._dir(name)))
        if node is None or not self._mine(client, node, holder) or node.token != token:
            return False
        await self._call(lambda: _delete(client, node.path))
        return True

    async def get_lease(self, name: str) -> Lease | None:
        """The current holding (its ``expires_at``: the earliest the server could end it);
        None when nobody holds it: ZooKeeper keeps nothing of an ended session's lease."""
        client = await self._session(self._ttl or 10.0)
        node = await self._call(lambda: _lowest(client, self._dir(name)))
        return None if node is None else self._lease(name, node)

    def _acquire(self, client: KazooClient, name: str, holder: str) -> Lease | None:
        directory = self._dir(name)
        client.ensure_path(directory)
        node = _lowest(client, directory)
        if node is not None:  # held: renew it if it is ours, else it is not to be had
            return self._lease(name, node) if self._mine(client, node, holder) else None
        now = self._clock()
        data = json.dumps({"holder": holder, "acquired_at": now.isoformat()}).encode()
        path = client.create(f"{directory}/lease-", data, ephemeral=True, sequence=True)
        node = _lowest(client, directory)
        if node is not None and node.path == path:
            return self._lease(name, node)
        _delete(client, path)  # another replica's node is lower: it won this round
        return None

    def _dir(self, name: str) -> str:
        return f"{self._root}/leases/{name}"

    def _mine(self, client: KazooClient, node: _Node | None, holder: str) -> bool:
        session = client.client_id  # None while disconnected
        return (
            node is not None
            and session is not None
            and (node.holder, node.owner) == (holder, session[0])
        )

    def _lease(self, name: str, node: _Node) -> Lease:
        now = self._clock()
        expires = now + timedelta(seconds=self._ttl)
        return Lease(name, node.holder, node.token, node.acquired_at, now, expires, external=True)

    async def _session(self, ttl: float) -> KazooClient:
        if not ttl > 0:
            raise ValueError(f"a lease ttl must be a positive number of seconds, not {ttl!r}")
        if self._client is None:
            self._ttl = ttl
            self._client = await self._call(lambda: _connect(self._hosts, ttl))
        return self._client

    async def _call(self, work: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._threads, work)
        except (KazooException, KazooTimeoutError) as exc:
            raise CoordinationUnavailable(f"ZooKeeper {self._hosts}: {exc!r}") from exc


def _connect(hosts: str, ttl: float) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=ttl, logger=_kazoo_log)
    client.start(timeout=CONNECT_TIMEOUT)
    granted = _timeouts.by_session.pop(client.client_id[0], None)
    if granted is not None and granted < ttl:
        client.stop()
        client.close()
        raise CoordinationUnavailable(
            f"ZooKeeper {hosts} granted a session timeout of {granted:g} s, shorter than the "
            f"lease ttl of {ttl:g} s: lower lease_ttl, or raise the server's maxSessionTimeout"
        )
    client.add_listener(_log_state)
    return client


def _log_state(state: str) -> None:
    if state != KazooState.CONNECTED:
        log.warning("ZooKeeper session %s", state.lower())


def _lowest(client: KazooClient, directory: str) -> _Node | None:
    """The lowest live child of ``directory`` (None if there is none)."""
    try:
        children = sorted(client.get_children(directory), key=lambda c: c.rsplit("-", 1)[-1])
    except NoNodeError:
        return None
    for child in children:
        path = f"{directory}/{child}"
        try:
            data, stat = client.get(path)
        except NoNodeError:  # its session ended just now: the next one is the lowest
            continue
        return _node(path, data, stat)
    return None


def _node(path: str, data: bytes, stat: ZnodeStat) -> _Node:
    value: dict[str, Any] = json.loads(data)
    return _Node(
        path=path,
        holder=value["holder"],
        acquired_at=datetime.fromisoformat(value["acquired_at"]),
        token=int(stat.czxid),
        owner=int(stat.ephemeralOwner),
    )


def _delete(client: KazooClient, path: str) -> None:
    with contextlib.suppress(NoNodeError):  # gone already: its session ended
        client.delete(path)
