"""API tokens: create (the secret is shown once), list, revoke, and authenticate.

A token reads ``tw_<id>_<secret>``. The id is public (it names the token in lists and logs);
the secret is 256 random bits. The store keeps the SHA-256 of the whole token: a fast hash
is right here because the secret is random and long, so there is nothing to brute-force.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from tickwork.core.errors import Conflict, NotFound, ValidationError
from tickwork.ports import ApiToken, Scope, TokenStore

log = logging.getLogger("tickwork.tokens")

#: A revoked token stops working within this many seconds in every process.
CACHE_SECONDS = 1.0
#: A token in use is read again in the background once its cached entry is this old, so that
#: requests never wait for that read (on the request path, the read once a second was the
#: single enqueue's slowest step at the p99: 4-5.5 ms under load, bench/README.md).
REFRESH_AFTER = CACHE_SECONDS / 2
#: ``last_used_at`` is written at most this often per token and process.
TOUCH_EVERY = timedelta(minutes=1)
BOOTSTRAP_FILE = "admin.token"
BOOTSTRAP_NAME = "admin"
_TOKEN = re.compile(r"^tw_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
#: What a token name may be (also published in the OpenAPI document). Checked with
#: ``fullmatch``: a Python ``$`` alone would let a trailing newline through.
TOKEN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
_NAME = re.compile(TOKEN_NAME_PATTERN)
_CACHE_LIMIT = 10_000


def hash_secret(token: str) -> str:
    """The SHA-256 (hex) the store keeps instead of the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_secret() -> tuple[str, str]:
    """A fresh ``(id, token)``."""
    token_id = secrets.token_hex(6)
    return token_id, f"tw_{token_id}_{secrets.token_urlsafe(32)}"


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just created: the only time its secret is known."""

    token: ApiToken
    secret: str


class TokenService:
    """Token use cases over a ``TokenStore``; ``authenticate`` caches lookups briefly.

    ``touch=False`` never writes ``last_used_at``: for a read-only API over a replica.
    """

    def __init__(
        self, store: TokenStore, clock: Callable[[], datetime], *, touch: bool = True
    ) -> None:
        self._store = store
        self._clock = clock
        self._touch_enabled = touch
        self._cache: dict[str, tuple[ApiToken | None, float]] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}

    async def create(self, name: str, scope: Scope) -> IssuedToken:
        """A new token; ``Conflict`` if a live token has the name."""
        if not _NAME.fullmatch(name):
            raise ValidationError("name", "1-100 letters, digits, '.', '_' or '-'")
        token_id, secret = new_secret()
        token = ApiToken(token_id, name, scope, hash_secret(secret), self._clock())
        await self._store.create_token(token)
        return IssuedToken(token, secret)

    async def list(self) -> list[ApiToken]:
        return await self._store.list_tokens()

    async def revoke(self, id_or_name: str) -> ApiToken:
        """Revoke a live token by id or name; ``NotFound`` if there is none."""
        token = await self._store.revoke_token(id_or_name, self._clock())
        if token is None:
            raise NotFound("token", id_or_name)
        self._cache.pop(token.id, None)
        return token

    async def authenticate(self, presented: str) -> ApiToken | None:
        """The live token ``presented`` is, or None (unknown, wrong secret, revoked)."""
        match = _TOKEN.match(presented)
        if match is None:
            return None
        token = await self._lookup(match.group(1))
        if token is None or token.revoked_at is not None:
            return None
        if not hmac.compare_digest(token.secret_hash, hash_secret(presented)):
            return None
        return token

    async def _lookup(self, token_id: str) -> ApiToken | None:
        cached = self._cache.get(token_id)
        now = time.monotonic()
        if cached is None or cached[1] <= now:
            return await self._read(token_id, cached)
        if cached[1] - now < CACHE_SECONDS - REFRESH_AFTER:
            self._refresh(token_id, cached)
        return cached[0]

    async def _read(
        self, token_id: str, cached: tuple[ApiToken | None, float] | None
    ) -> ApiToken | None:
        """Read the token and cache it, unless its entry changed meanwhile (``revoke``)."""
        token = await self._store.get_token(token_id)
        if token is not None and token.revoked_at is None:
            token = await self._touch(token)
        if self._cache.get(token_id) is cached:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[token_id] = (token, time.monotonic() + CACHE_SECONDS)
        return token

    def _refresh(self, token_id: str, cached: tuple[ApiToken | None, float]) -> None:
        loop = asyncio.get_running_loop()
        running = self._refreshing.get(token_id)
        if running is not None and not running.done() and running.get_loop() is loop:
            return
        task = loop.create_task(self._read_quietly(token_id, cached))
        self._refreshing[token_id] = task
        task.add_done_callback(lambda done: self._forget(token_id, done))

    def _forget(self, token_id: str, done: asyncio.Task[None]) -> None:
        if self._refreshing.get(token_id) is done:
            del self._refreshing[token_id]

    async def _read_quietly(self, token_id: str, cached: tuple[ApiToken | None, float]) -> None:
        try:
            await self._read(token_id, cached)
        except Exception as exc:  # the entry expires; the next request reads it itself
            log.debug("token %s: background read failed: %s", token_id, exc)

    async def _touch(self, token: ApiToken) -> ApiToken:
        now = self._clock()
        if not self._touch_enabled:
            return token
        if token.last_used_at is not None and now - token.last_used_at < TOUCH_EVERY:
            return token
        await self._store.touch_token(token.id, now)
        return replace(token, last_used_at=now)

    async def bootstrap(self, data_dir: Path) -> Path | None:
        """On a first start (no token at all), create an admin token in ``data_dir``.

        Writes ``<data_dir>/admin.token`` with mode 0600 and returns its path; returns None
        when tokens exist already (the file, if any, is left as it is). An existing file is
        never overwritten (it may hold the token of another database, such as the one
        ``make run`` wrote): the new token goes to ``admin.token.<id>`` beside it.
        """
        path = data_dir / BOOTSTRAP_FILE
        if await self._store.list_tokens():
            return path if path.exists() else None
        try:
            issued = await self.create(BOOTSTRAP_NAME, Scope.ADMIN)
        except Conflict:
            return path if path.exists() else None  # another process bootstrapped meanwhile
        try:
            _write_private(path, issued.secret + "\n")
        except FileExistsError:
            path = path.with_name(f"{BOOTSTRAP_FILE}.{issued.token.id}")
            _write_private(path, issued.secret + "\n")
        return path


def _write_private(path: Path, text: str) -> None:
    """A new 0600 file; ``FileExistsError`` rather than replacing one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
