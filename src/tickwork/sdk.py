"""The Python SDK: typed clients of the tickwork HTTP API, synchronous and asynchronous.

    from tickwork import Client

    with Client("http://127.0.0.1:8080") as tw:
        tw.create_job({
            "name": "hello",
            "schedule": {"kind": "now"},
            "task": {"kind": "python", "target": "mypkg.tasks:hello", "kwargs": {"name": "x"}},
        })
        for run in tw.list_runs(job="hello")["runs"]:
            print(run["id"], run["state"])

``AsyncClient`` has the same methods, each awaited (``async with AsyncClient(...) as tw:``).
Results are the API's JSON as typed dicts; instants are ISO 8601 strings in UTC. Errors the
API reports raise ``ApiError``; a server that cannot be reached raises ``Unreachable``.

Each operation is written once, as a function that describes its request (a ``Call``); the
``operation`` descriptor hands that description to the client's transport, sync or async, so
the two clients cannot drift apart. The typed dicts live in ``tickwork.sdk_types``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, Self, TypeVar, cast, overload
from urllib.parse import quote

import httpx2

from tickwork.app.settings import DEFAULT_URL
from tickwork.sdk_types import (
    AttemptInfo,
    CallbackInput,
    CallbacksInput,
    Fire,
    Fires,
    JobApplied,
    JobInfo,
    JobInput,
    JobPage,
    LogChunk,
    Logs,
    PoolInfo,
    RetryInfo,
    RetryInput,
    RunDetail,
    RunInfo,
    RunPage,
    ScheduleInfo,
    ScheduleInput,
    TaskInfo,
    TaskInput,
    TaskRunInfo,
    TokenInfo,
    TokenSecret,
    TriggerRuleName,
)

if TYPE_CHECKING:
    from tickwork.core.workflow_spec import WorkflowSpec
    from tickwork.workflow import Workflow

__all__ = [
    "API_PREFIX",
    "ApiError",
    "AsyncClient",
    "AttemptInfo",
    "Call",
    "CallbackInput",
    "CallbacksInput",
    "Client",
    "ClientError",
    "Fire",
    "Fires",
    "JobApplied",
    "JobInfo",
    "JobInput",
    "JobPage",
    "LogChunk",
    "Logs",
    "PoolInfo",
    "RetryInfo",
    "RetryInput",
    "RunDetail",
    "RunInfo",
    "RunPage",
    "ScheduleInfo",
    "ScheduleInput",
    "TaskInfo",
    "TaskInput",
    "TaskRunInfo",
    "TokenInfo",
    "TokenSecret",
    "TriggerRuleName",
    "Unreachable",
    "operation",
]

API_PREFIX = "/api/v1"

# -- errors -----------------------------------------------------------------------------------


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


# -- requests ---------------------------------------------------------------------------------

T = TypeVar("T")
P = ParamSpec("P")


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

    def options(self) -> dict[str, Any]:
        """What both clients pass to ``request`` besides method and URL."""
        return {"json": self.json, "params": self.query(), "headers": self.headers}

    def result(self, response: httpx2.Response) -> T:
        if response.status_code >= 400:
            raise _api_error(response)
        body: Any = None if response.status_code == 204 else response.json()
        return cast(T, body[self.pick] if self.pick else body)


class operation(Generic[P, T]):
    """Turns a function that describes a request into a method of both clients: on a
    ``Client`` it returns the result, on an ``AsyncClient`` an awaitable of it."""

    def __init__(self, describe: Callable[P, Call[T]]) -> None:
        self._describe = describe
        self.__doc__ = describe.__doc__

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
        describe, send = self._describe, client._send
        if isinstance(client, AsyncClient):
            send_async = client._send

            @functools.wraps(describe)
            async def awaited(*args: P.args, **kwargs: P.kwargs) -> T:
                return await send_async(describe(*args, **kwargs))

            return awaited

        @functools.wraps(describe)
        def called(*args: P.args, **kwargs: P.kwargs) -> T:
            return cast(T, send(describe(*args, **kwargs)))

        return called


def _flag(value: bool) -> str | None:
    return "true" if value else None


# -- operations -------------------------------------------------------------------------------


class _Operations:
    """Every API operation, each described once; ``Client`` and ``AsyncClient`` send them."""

    # -- jobs -------------------------------------------------------------------------------

    @operation
    def create_job(
        job: JobInput, *, allow_past: bool = False, idempotency_key: str | None = None
    ) -> Call[JobInfo]:
        """Create a job; a ``now`` job is queued at once. ``allow_past`` accepts a past ``at``.

        With ``idempotency_key``, sending the same request again (a retry after a timeout)
        returns the first answer instead of creating the job twice.
        """
        params = {"allow_past": _flag(allow_past)}
        return Call("POST", "/jobs", json=job, params=params, headers=_idem(idempotency_key))

    @operation
    def create_jobs(
        jobs: list[JobInput], *, allow_past: bool = False, idempotency_key: str | None = None
    ) -> Call[list[JobInfo]]:
        """Create up to 1000 jobs in one transaction: all of them or none."""
        params = {"allow_past": _flag(allow_past)}
        body = {"jobs": jobs}
        return Call("POST", "/jobs/batch", json=body, params=params, headers=_idem(idempotency_key))

    @operation
    def list_jobs(
        *,
        limit: int = 100,
        after: str | None = None,
        prefix: str | None = None,
        tag: str | None = None,
        paused: bool | None = None,
        schedule_kind: Literal["now", "at", "cron"] | None = None,
    ) -> Call[JobPage]:
        """Jobs by name, filtered; pass the page's ``next_after`` as ``after`` for more."""
        params = {
            "limit": limit,
            "after": after,
            "prefix": prefix,
            "tag": tag,
            "paused": None if paused is None else str(paused).lower(),
            "schedule_kind": schedule_kind,
        }
        return Call("GET", "/jobs", params=params)

    @operation
    def update_job(
        name: str, changes: dict[str, Any], *, allow_past: bool = False
    ) -> Call[JobInfo]:
        """Change a job for its future runs (``PATCH``): only the fields in ``changes``."""
        params = {"allow_past": _flag(allow_past)}
        return Call("PATCH", f"/jobs/{_seg(name)}", json=changes, params=params)

    @operation
    def apply_job(
        job: JobInput | Workflow | WorkflowSpec, *, allow_past: bool = False
    ) -> Call[JobApplied]:
        """Create the job, or update it (for its future runs) when its definition differs, or
        change nothing when it is the same (``PUT /jobs/{name}``): the result's ``outcome``
        says ``created``, ``updated`` or ``unchanged``. ``job`` is an API job body, a
        ``@workflow`` function or a parsed definition (``tickwork.definitions``)."""
        body = job if isinstance(job, dict) else _definition_body(job)
        params = {"allow_past": _flag(allow_past)}
        return Call("PUT", f"/jobs/{_seg(body['name'])}", json=body, params=params)

    @operation
    def get_job(name: str) -> Call[JobInfo]:
        return Call("GET", f"/jobs/{_seg(name)}")

    @operation
    def delete_job(name: str) -> Call[None]:
        """Delete a job; its unfinished runs are cancelled, its history stays."""
        return Call("DELETE", f"/jobs/{_seg(name)}")

    @operation
    def trigger(
        name: str,
        logical_date: str | None = None,
        params: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Call[RunDetail]:
        """Run a job now by hand, for ``logical_date`` (ISO, default now), with ``params``
        (python tasks: extra kwargs; shell tasks: JSON in ``TICKWORK_PARAMS``)."""
        given = {"logical_date": logical_date, "params": params}
        body = {k: v for k, v in given.items() if v is not None} or None
        path = f"/jobs/{_seg(name)}/trigger"
        return Call("POST", path, json=body, headers=_idem(idempotency_key))

    @operation
    def pause(name: str) -> Call[JobInfo]:
        return Call("POST", f"/jobs/{_seg(name)}/pause")

    @operation
    def resume(name: str) -> Call[JobInfo]:
        return Call("POST", f"/jobs/{_seg(name)}/resume")

    @operation
    def upcoming(name: str, count: int = 10) -> Call[Fires]:
        """The job's next fire times."""
        return Call("GET", f"/jobs/{_seg(name)}/upcoming", params={"count": count})

    @operation
    def preview(
        cron: str, tz: str = "UTC", count: int = 10, after: str | None = None
    ) -> Call[Fires]:
        """Fire times of a cron expression, computed by the server. Creates nothing."""
        params = {"cron": cron, "tz": tz, "count": count, "from": after}
        return Call("GET", "/schedule/preview", params=params)

    # -- runs -------------------------------------------------------------------------------

    @operation
    def list_runs(
        *,
        job: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        logical_from: str | None = None,
        logical_to: str | None = None,
        started_from: str | None = None,
        started_to: str | None = None,
    ) -> Call[RunPage]:
        """Runs newest first; ``state="dead"`` lists dead-lettered runs. ``*_from`` bounds
        (ISO instants) are inclusive, ``*_to`` exclusive."""
        params = {
            "job": job,
            "state": state,
            "limit": limit,
            "cursor": cursor,
            "logical_from": logical_from,
            "logical_to": logical_to,
            "started_from": started_from,
            "started_to": started_to,
        }
        return Call("GET", "/runs", params=params)

    @operation
    def dead_letters(
        *, job: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Call[dict[str, Any]]:
        """Task runs that failed their last attempt, newest first (``task_runs``,
        ``next_cursor``); replay one with ``retry_run(run_id)``."""
        params = {"job": job, "limit": limit, "cursor": cursor}
        return Call("GET", "/dead-letters", params=params)

    @operation
    def get_run(run_id: str) -> Call[RunDetail]:
        return Call("GET", f"/runs/{_seg(run_id)}")

    @operation
    def cancel_run(run_id: str) -> Call[RunDetail]:
        return Call("POST", f"/runs/{_seg(run_id)}/cancel")

    @operation
    def retry_run(run_id: str) -> Call[RunDetail]:
        """Replay a run's failed (dead-lettered) or cancelled tasks."""
        return Call("POST", f"/runs/{_seg(run_id)}/retry")

    @operation
    def cancel_task_run(task_run_id: str) -> Call[RunDetail]:
        """Cancel one task of a run (a running one is killed by its worker); returns the run."""
        return Call("POST", f"/task-runs/{_seg(task_run_id)}/cancel")

    @operation
    def retry_task_run(task_run_id: str) -> Call[RunDetail]:
        """Replay one failed, upstream-failed or cancelled task of a run; returns the run."""
        return Call("POST", f"/task-runs/{_seg(task_run_id)}/retry")

    @operation
    def logs(
        run_id: str, *, task: str | None = None, after_seq: int = -1, limit: int = 1000
    ) -> Call[Logs]:
        """Output after ``after_seq``; poll with ``next_after_seq`` until ``finished``."""
        params = {"task": task, "after_seq": after_seq, "limit": limit}
        return Call("GET", f"/runs/{_seg(run_id)}/logs", params=params)

    # -- pools ------------------------------------------------------------------------------

    @operation
    def set_pool(name: str, slots: int, description: str | None = None) -> Call[PoolInfo]:
        """Create a pool or change its slots, and its description when one is given (needs an
        admin token)."""
        body: dict[str, Any] = {"slots": slots}
        if description is not None:
            body["description"] = description
        return Call("PUT", f"/pools/{_seg(name)}", json=body)

    @operation
    def list_pools() -> Call[list[PoolInfo]]:
        """Every pool by name, with the slots in use (``used``)."""
        return Call("GET", "/pools", pick="pools")

    @operation
    def get_pool(name: str) -> Call[PoolInfo]:
        return Call("GET", f"/pools/{_seg(name)}")

    @operation
    def delete_pool(name: str) -> Call[None]:
        """Delete a pool (needs an admin token); tasks that declare it wait for a new one."""
        return Call("DELETE", f"/pools/{_seg(name)}")

    # -- tokens (admin) ----------------------------------------------------------------------

    @operation
    def create_token(name: str, scope: Literal["read", "write", "admin"]) -> Call[TokenSecret]:
        """A new token; its ``secret`` is in this result only."""
        return Call("POST", "/tokens", json={"name": name, "scope": scope})

    @operation
    def list_tokens() -> Call[list[TokenInfo]]:
        """Every token (never a secret), revoked ones included."""
        return Call("GET", "/tokens", pick="tokens")

    @operation
    def revoke_token(id_or_name: str) -> Call[TokenInfo]:
        return Call("DELETE", f"/tokens/{_seg(id_or_name)}")

    @operation
    def health() -> Call[dict[str, str]]:
        return Call("GET", "/healthz", prefix="")


# -- clients ----------------------------------------------------------------------------------


def _headers(token: str | None) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {token}"} if token else None


class Client(_Operations):
    """A synchronous client of one tickwork server. Use it as a context manager, or ``close()``.

    ``token`` is a bearer token (``tw_...``); every route but the health checks needs one.
    ``transport`` replaces the network (tests pass one that calls the ASGI app in process).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx2.Client(
            base_url=self.url, timeout=timeout, transport=transport, headers=_headers(token)
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.url(), **call.options())
        except httpx2.TransportError as e:
            raise Unreachable(self.url, str(e) or type(e).__name__) from e
        return call.result(response)


class AsyncClient(_Operations):
    """An asynchronous client of one tickwork server: ``Client``'s methods, each awaited.
    Use it as an async context manager, or ``await close()``.

    ``transport`` replaces the network (tests pass ``httpx2.ASGITransport(app=...)``).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx2.AsyncClient(
            base_url=self.url, timeout=timeout, transport=transport, headers=_headers(token)
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.url(), **call.options())
        except httpx2.TransportError as e:
            raise Unreachable(self.url, str(e) or type(e).__name__) from e
        return call.result(response)


def _api_error(response: httpx2.Response) -> ApiError:
    try:
        error = response.json()["error"]
        return ApiError(response.status_code, error["code"], error["message"], error.get("field"))
    except (ValueError, KeyError, TypeError):
        # Not our error shape: a proxy in between, or not a tickwork server at all.
        text = response.text.strip()[:200] or response.reason_phrase
        return ApiError(response.status_code, "http_error", f"HTTP {response.status_code}: {text}")


def _definition_body(job: Workflow | WorkflowSpec) -> Any:
    # Imported on use: definitions load the core and PyYAML, which plain API calls never need.
    from tickwork.definitions import job_body
    from tickwork.workflow import Workflow

    return job_body(job.parse() if isinstance(job, Workflow) else job)


def _idem(key: str | None) -> dict[str, str] | None:
    return None if key is None else {"Idempotency-Key": key}


def _seg(value: str) -> str:
    """A value made safe to use as one URL path segment."""
    return quote(value, safe="")
