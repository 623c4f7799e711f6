"""HTTP callbacks: POST the context as JSON, after the SSRF guard has seen the URL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx2

from tickwork.core.errors import TickworkError
from tickwork.core.secret_refs import url_auth
from tickwork.hooks.alert_context import AlertContext
from tickwork.hooks.context import CallbackContext, CallbackFailed

#: Checked before every POST; raises a ``TickworkError`` (``TargetRefused``, the http
#: runner's ``RequestRefused``) to forbid it. ``UrlGuard.check`` is one.
UrlCheck = Callable[[httpx2.URL], Awaitable[None]]

USER_AGENT = "tickwork"


def parse_webhook(config: Mapping[str, Any]) -> tuple[httpx2.URL, dict[str, str]]:
    """An http callback's ``url`` and ``headers`` (secret references resolved); raise
    ``CallbackFailed`` naming the field."""
    raw, headers = config.get("url"), config.get("headers") or {}
    try:
        url = httpx2.URL(raw) if isinstance(raw, str) else None
    except httpx2.InvalidURL:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise CallbackFailed("config.url: must be an absolute http:// or https:// URL")
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise CallbackFailed("config.headers: must be an object mapping names to strings")
    return url, {"User-Agent": USER_AGENT, **headers}


async def post_webhook(
    client: httpx2.AsyncClient,
    guard: UrlCheck,
    config: Mapping[str, Any],
    context: CallbackContext | AlertContext,
) -> None:
    """POST ``context`` to the callback's URL; raise ``CallbackFailed`` unless it answers 2xx.

    Redirects are not followed (the guard saw only the first URL), and the answer's body is
    not read: only its status counts. No timeout of its own: the caller bounds the callback.
    """
    url, headers = parse_webhook(config)
    try:
        auth = url_auth(config)
    except ValueError as exc:
        raise CallbackFailed(f"config.{exc}") from None
    extra: dict[str, Any] = {} if auth is None else {"auth": auth}
    try:
        await guard(url)
    except TickworkError as exc:
        raise CallbackFailed(f"webhook not sent: {exc}") from None
    try:
        async with client.stream(
            "POST", url, json=context.to_json(), headers=headers, timeout=None, **extra
        ) as response:
            if not response.is_success:
                status = f"HTTP {response.status_code} {response.reason_phrase}"
                raise CallbackFailed(f"webhook POST {url} answered {status}")
    except httpx2.HTTPError as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise CallbackFailed(f"webhook POST {url} failed: {reason}") from None
