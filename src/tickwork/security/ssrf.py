"""The SSRF guard of http tasks: refuse targets inside the operator's own networks.

An http task makes the worker send a request on the user's behalf, from inside the
operator's network. Unless the operator allows a network (``TICKWORK_HTTP_ALLOW``), a target
is refused when any address its host stands for is private, loopback, link-local,
multicast, reserved, unspecified or otherwise not globally routable.

Hosts are read the way the C library reads them when connecting: ``127.1``, ``0x7f.1``,
``0177.0.0.1`` and ``2130706433`` all mean 127.0.0.1, so they are parsed with
``inet_aton`` before any name lookup. IPv4-mapped IPv6 addresses (``::ffff:10.0.0.1``) are
judged by their IPv4 address, and so are the IPv4 addresses that 6to4 (``2002::/16``),
NAT64 (``64:ff9b::/96``) and Teredo (``2001::/32``) addresses lead to. A name is resolved
and refused if it does not resolve or if *any* of its addresses is refused (a client may
connect to any of them).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence

import httpx2

from tickwork.core.errors import TickworkError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: ``(host, port)`` → the addresses the host stands for; raises ``OSError`` if it has none.
Resolver = Callable[[str, int], Awaitable[list[str]]]

RESOLVE_TIMEOUT = 5.0

#: Checked in order; the first that applies names the reason for a refusal.
_KINDS: tuple[tuple[str, Callable[[IPAddress], bool]], ...] = (
    ("unspecified", lambda ip: ip.is_unspecified),
    ("loopback", lambda ip: ip.is_loopback),
    ("link-local", lambda ip: ip.is_link_local),
    ("multicast", lambda ip: ip.is_multicast),
    ("private", lambda ip: ip.is_private),
    ("reserved", lambda ip: ip.is_reserved),
    ("not globally routable", lambda ip: not ip.is_global),
)


class TargetRefused(TickworkError):
    """An http task's URL points somewhere the guard forbids; the message says why."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of ``host`` from the system resolver (``getaddrinfo``), off the loop."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def parse_allow(spec: str) -> tuple[IPNetwork, ...]:
    """``"127.0.0.0/8, 10.0.0.0/8"`` → networks. Raises ``ValueError`` naming a bad entry."""
    networks: list[IPNetwork] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(
                f"TICKWORK_HTTP_ALLOW: {part!r} is not a network; use CIDRs like 10.0.0.0/8"
            ) from None
    return tuple(networks)


def literal_address(host: str) -> IPAddress | None:
    """The IP address ``host`` spells, in any form the C library accepts; None for a name."""
    bare = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if ":" in bare:
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(bare))
    except OSError:
        return None


#: NAT64's well-known prefix (RFC 6052): the last 32 bits are the IPv4 address reached.
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to: 6to4 (``2002:AABB:CCDD::/48``), NAT64
    (``64:ff9b::a.b.c.d``) and Teredo (``2001:0::/32``: its server and its client)."""
    found: list[ipaddress.IPv4Address] = []
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip in NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def refusal(ip: IPAddress, allow: Iterable[IPNetwork] = ()) -> str | None:
    """Why ``ip`` may not be requested, or None if it may. An IPv6 address that embeds an
    IPv4 one (mapped, 6to4, NAT64, Teredo) is refused if that IPv4 address would be."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip.version == net.version and ip in net for net in allow):
        return None
    for kind, applies in _KINDS:
        if applies(ip):
            return kind
    if isinstance(ip, ipaddress.IPv6Address):
        for inner in embedded_ipv4(ip):
            reason = refusal(inner, allow)
            if reason is not None:
                return f"an address that reaches {inner}, which is {reason}"
    return None


class UrlGuard:
    """Refuses http targets in private, loopback, link-local, multicast or reserved networks.

    ``allow`` lists networks the operator opens anyway. ``resolve`` looks names up (tests
    give a table). Call :meth:`check` when a job is saved and again before each request:
    DNS answers can change in between.
    """

    def __init__(
        self, allow: Sequence[IPNetwork] = (), *, resolve: Resolver = system_resolver
    ) -> None:
        self.allow = tuple(allow)
        self._resolve = resolve

    async def check(self, url: str | httpx2.URL) -> None:
        """Raise ``TargetRefused`` unless every address of ``url``'s host may be requested."""
        try:
            parsed = url if isinstance(url, httpx2.URL) else httpx2.URL(url)
        except httpx2.InvalidURL as exc:
            raise TargetRefused(f"not a valid URL ({exc})") from None
        host = parsed.host
        if not host:
            raise TargetRefused("the URL has no host")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        for address in await self._addresses(host, port):
            reason = refusal(address, self.allow)
            if reason is not None:
                raise TargetRefused(_refused_message(host, address, reason))

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        try:
            found = await asyncio.wait_for(self._resolve(host, port), RESOLVE_TIMEOUT)
        except (OSError, TimeoutError, UnicodeError):
            found = []
        addresses = [a for a in (literal_address(f) for f in found) if a is not None]
        if not addresses:
            raise TargetRefused(f"the host {host!r} does not resolve")
        return addresses


def _refused_message(host: str, address: IPAddress, reason: str) -> str:
    where = str(address) if host.strip("[]") == str(address) else f"{host} ({address})"
    return (
        f"refused: {where} is {reason}; an operator can allow networks with "
        "TICKWORK_HTTP_ALLOW (e.g. 10.0.0.0/8)"
    )
