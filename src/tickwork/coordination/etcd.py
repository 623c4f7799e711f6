"""The scheduler lease in etcd, through etcd's v3 JSON API (its gRPC gateway) over HTTP.

Why no etcd client library: the well-known Python one (``etcd3``) has had no release since
2020 and no longer imports with current protobuf, and its forks are young; the gateway is
etcd's own documented v3 API (``/v3/kv/txn``, ``/v3/lease/*``), served by every etcd since
3.4 on the client port, and ``httpx2`` (already ours) speaks it with asyncio.

A lease named ``name`` is the key ``<prefix>/leases/<name>`` attached to an etcd lease:

- taking it is one transaction, "create the key if it does not exist", so of holders racing
  exactly one creates it; the fencing token is the key's ``create_revision``: etcd's
  revision only ever grows, so every new holder (a holder coming back too) gets a higher one;
- renewing is a keep-alive of its etcd lease, after checking that the key still names this
  holder and token; an etcd lease can only be kept at the TTL it was granted with (whole
  seconds, ``ceil(ttl)``, never less than the ``ttl`` asked for: the leader's own deadline,
  ``ttl`` after it sent a renewal, comes first);
- releasing revokes the etcd lease, which deletes the key; an expired one deletes it too.

The key's value records the holder and when it took the lease (etcd keeps no such time).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2

from tickwork.coordination import split_hosts
from tickwork.core.errors import CoordinationUnavailable
from tickwork.ports import Lease

DEFAULT_PREFIX = "/tickwork"
TIMEOUT = 3.0  # seconds an etcd request may take before that endpoint counts as down


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class _Key:
    """A lease key as etcd stores it."""

    holder: str
    acquired_at: datetime
    token: int  # create_revision
    lease_id: str


class EtcdLeases:
    """The ``LeaseStore`` port on etcd (see the module). Leases it hands out are ``external``:
    the store checks their tokens against its fence row."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], datetime] = _utcnow,
        timeout: float = TIMEOUT,
    ) -> None:
        hosts, path = split_hosts(url, "etcd://", 2379)
        self._endpoints = [f"http://{host}" for host in hosts]
        self._prefix = path or DEFAULT_PREFIX
        self._clock = clock
        self._http = httpx2.AsyncClient(timeout=timeout)

    async def close(self) -> None:
        await self._http.aclose()

    async def acquire_lease(self, name: str, holder: str, ttl: float) -> Lease | None:
        seconds = _whole_seconds(ttl)
        key = await self._get(name)
        if key is not None:  # held: renew it if it is ours, else it is not to be had
            return await self._keep(name, key) if key.holder == holder else None
        granted = await self._call("/v3/lease/grant", {"TTL": seconds})
        lease_id = granted["ID"]
        now = self._clock()
        value = json.dumps({"holder": holder, "acquired_at": now.isoformat()})
        raw = _b64(self._key(name))
        answer = await self._call(
            "/v3/kv/txn",
            {
                "compare": [
                    {"key": raw, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
                ],
                "success": [{"request_put": {"key": raw, "value": _b64(value), "lease": lease_id}}],
            },
        )
        if not answer.get("succeeded"):  # another holder was quicker
            await self._call("/v3/lease/revoke", {"ID": lease_id}, missing_ok=True)
            return None
        token = int(answer["header"]["revision"])  # the put's revision: the key's creation
        expires = now + timedelta(seconds=int(granted["TTL"]))
        return Lease(name, holder, token, now, now, expires, external=True)

    async def renew_lease(self, name: str, holder: str, token: int, ttl: float) -> Lease | None:
        _whole_seconds(ttl)
        key = await self._get(name)
        if key is None or (key.holder, key.token) != (holder, token):
            return None
        return await self._keep(name, key)

    async def release_lease(self, name: str, holder: str, token: int) -> bool:
        key = await self._get(name)
        if key is None or (key.holder, key.token) != (holder, token):
            return False
        # Revoking deletes the key; a lease ID is never reused, so this revokes that holding.
        await self._call("/v3/lease/revoke", {"ID": key.lease_id}, missing_ok=True)
        return True

    async def get_lease(self, name: str) -> Lease | None:
        """The current holding, or None when the key is gone (never taken, released or
        expired: etcd keeps nothing of a lease once it has ended)."""
        key = await self._get(name)
        if key is None:
            return None
        alive = await self._call("/v3/lease/timetolive", {"ID": key.lease_id})
        left = int(alive.get("TTL", 0))  # omitted when 0 (protobuf's default); -1: gone
        if left < 0:
            return None
        now = self._clock()
        return Lease(
            name, key.holder, key.token, key.acquired_at, now, now + timedelta(seconds=left), True
        )

    async def _keep(self, name: str, key: _Key) -> Lease | None:
        """Keep ``key``'s etcd lease alive; None if it has already expired."""
        now = self._clock()
        answer = await self._call("/v3/lease/keepalive", {"ID": key.lease_id})
        left = int(answer.get("result", {}).get("TTL", 0))
        if left <= 0:
            return None
        expires = now + timedelta(seconds=left)
        return Lease(name, key.holder, key.token, key.acquired_at, now, expires, external=True)

    async def _get(self, name: str) -> _Key | None:
        answer = await self._call("/v3/kv/range", {"key": _b64(self._key(name))})
        kvs = answer.get("kvs") or []
        if not kvs:
            return None
        kv = kvs[0]
        value = json.loads(base64.b64decode(kv["value"]))
        return _Key(
            holder=value["holder"],
            acquired_at=datetime.fromisoformat(value["acquired_at"]),
            token=int(kv["create_revision"]),
            lease_id=kv.get("lease", "0"),
        )

    def _key(self, name: str) -> str:
        return f"{self._prefix}/leases/{name}"

    async def _call(self, path: str, body: dict[str, Any], *, missing_ok: bool = False) -> Any:
        """POST ``body`` to the first endpoint that answers; the next one on a network error."""
        failures = []
        for endpoint in self._endpoints:
            try:
                reply = await self._http.post(endpoint + path, json=body)
            except httpx2.TransportError as exc:
                failures.append(f"{endpoint}: {exc!r}")
                continue
            if reply.status_code == 200:
                return reply.json()
            if missing_ok and "not found" in reply.text:
                return {}
            raise CoordinationUnavailable(f"etcd {endpoint}{path} answered {reply.text[:200]}")
        raise CoordinationUnavailable(f"etcd unreachable: {'; '.join(failures)}")


def _whole_seconds(ttl: float) -> int:
    if not (isinstance(ttl, int | float) and ttl > 0 and math.isfinite(ttl)):
        raise ValueError(f"a lease ttl must be a positive number of seconds, not {ttl!r}")
    return math.ceil(ttl)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
