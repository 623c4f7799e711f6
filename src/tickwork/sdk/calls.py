"""Requests described once (``Call``) and turned into methods of both clients (``operation``)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Self, TypeVar, cast, overload
from urllib.parse import quote

from tickwork.sdk.errors import api_error

if TYPE_CHECKING:
    from tickwork.sdk.clients import AsyncClient, Client
    from tickwork.sdk.wires import Answer

API_PREFIX = "/api/v1"

T = TypeVar("T")
P = ParamSpec("P")
_M = TypeVar("_M", bound=Callable[..., Any])


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, described: what to send and which part of the answer is the result."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] | None = None
    prefix: str = API_PREFIX
    #: The key of the JSON object that holds the result (``None``: the whole body).
    pick: str | None = None
    headers: dict[str, str] | None = None

    def query(self) -> dict[str, Any]:
        return {k: v for k, v in (self.params or {}).items() if v is not None}

    def url(self) -> str:
        return self.prefix + self.path

    def result(self, response: Answer) -> T:
        if response.status_code >= 400:
            raise api_error(response)
        body: Any = None if response.status_code == 204 else response.json()
        return cast(T, body[self.pick] if self.pick else body)


class operation(Generic[P, T]):
    """Turns a function that describes a request into a method of both clients: on a
    ``Client`` it returns the result, on an ``AsyncClient`` an awaitable of it."""

    def __init__(self, describe: Callable[P, Call[T]]) -> None:
        self._describe = describe
        self._name = describe.__name__
        self.__doc__ = describe.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, client: AsyncClient, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(
        self, client: Client | AsyncClient | None, owner: type[Any]
    ) -> Self | Callable[P, T] | Callable[P, Awaitable[T]]:
        if client is None:
            return self
        describe = self._describe
        if client.is_async:
            send_async = cast("AsyncClient", client)._send

            @functools.wraps(describe)
            async def awaited(*args: P.args, **kwargs: P.kwargs) -> T:
                return await send_async(describe(*args, **kwargs))

            return self._kept(client, awaited)
        send = cast("Client", client)._send

        @functools.wraps(describe)
        def called(*args: P.args, **kwargs: P.kwargs) -> T:
            return send(describe(*args, **kwargs))

        return self._kept(client, called)

    def _kept(self, client: Client | AsyncClient, method: _M) -> _M:
        """``method`` kept on the client: later calls find it there, without this descriptor
        building it again (``functools.wraps`` costs more than a small call's own work)."""
        vars(client)[self._name] = method
        return method


def flag(value: bool) -> str | None:
    return "true" if value else None


def idem(key: str | None) -> dict[str, str] | None:
    """The ``Idempotency-Key`` header, if a key is given."""
    return None if key is None else {"Idempotency-Key": key}


@functools.lru_cache(maxsize=1024)  # a producer names the same few jobs again and again
def seg(value: str) -> str:
    """A value made safe to use as one URL path segment."""
    return quote(value, safe="")
