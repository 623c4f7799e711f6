"""The errors the SDK raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tickwork.sdk.wires import Answer


class ClientError(Exception):
    """Base of the errors the SDK raises."""


class ApiError(ClientError):
    """The API refused a request. ``field`` is the dotted path of the input at fault."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class Unreachable(ClientError):
    """No answer from the server (not running, wrong URL, network down, timeout)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach tickwork at {url} ({reason}); is `tickwork up` running?")
        self.url = url


def api_error(response: Answer) -> ApiError:
    try:
        error = response.json()["error"]
        return ApiError(response.status_code, error["code"], error["message"], error.get("field"))
    except (ValueError, KeyError, TypeError):
        # Not our error shape: a proxy in between, or not a tickwork server at all.
        text = response.text.strip()[:200] or response.reason_phrase
        return ApiError(response.status_code, "http_error", f"HTTP {response.status_code}: {text}")
