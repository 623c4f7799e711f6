"""The Python SDK: a typed, synchronous client of the tickwork HTTP API.

    from tickwork.sdk import Client

    with Client("http://127.0.0.1:8080") as tw:
        tw.create_job({
            "name": "hello",
            "schedule": {"kind": "now"},
            "task": {"kind": "python", "target": "mypkg.tasks:hello", "kwargs": {"name": "x"}},
        })
        for run in tw.list_runs(job="hello")["runs"]:
            print(run["id"], run["state"])

Results are the API's JSON as typed dicts; instants are ISO 8601 strings in UTC. Errors the
API reports raise ``ApiError``; a server that cannot be reached raises ``Unreachable``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal, NotRequired, Required, Self, TypedDict, cast
from urllib.parse import quote

import httpx2

from tickwork.app.settings import DEFAULT_URL

API_PREFIX = "/api/v1"

# -- inputs -----------------------------------------------------------------------------------


class ScheduleInput(TypedDict, total=False):
    """``{"kind": "now"}``, ``{"kind": "at", "at": ISO}`` or ``{"kind": "cron", "cron": ...}``."""

    kind: Required[Literal["now", "at", "cron"]]
    at: str
    cron: str
    timezone: str
    start: str
    end: str


class RetryInput(TypedDict, total=False):
    max_attempts: int
    initial_delay: float
    multiplier: float
    max_delay: float
    jitter: float


class TaskInput(TypedDict, total=False):
    """One task. shell: ``argv`` or ``command`` + ``shell``, ``env``, ``cwd``; http: ``method``,
    ``url``, ``headers``, ``body``; python: ``target``, ``kwargs``."""

    kind: Required[Literal["shell", "http", "python"]]
    name: str
    upstream: list[str]
    timeout: float
    retry: RetryInput
    argv: list[str]
    command: str
    shell: bool
    env: dict[str, str]
    cwd: str
    method: str
    url: str
    headers: dict[str, str]
    body: str | dict[str, Any] | list[Any]
    target: str
    kwargs: dict[str, Any]


class JobInput(TypedDict):
    """A job to create (the API's ``JobCreate``)."""

    name: str
    schedule: ScheduleInput
    task: NotRequired[TaskInput]
    tasks: NotRequired[list[TaskInput]]
    retry: NotRequired[RetryInput]
    timeout: NotRequired[float]
    queue: NotRequired[str]
    priority: NotRequired[int]
    catchup: NotRequired[bool]
    tags: NotRequired[list[str]]
    metadata: NotRequired[dict[str, Any]]


# -- results ----------------------------------------------------------------------------------


class ScheduleInfo(TypedDict):
    kind: str
    at: str | None
    cron: str | None
    timezone: str
    start: str | None
    end: str | None


class RetryInfo(TypedDict):
    max_attempts: int
    initial_delay: float
    multiplier: float
    max_delay: float
    jitter: float


class TaskInfo(TypedDict):
    name: str
    kind: str
    config: dict[str, Any]
    upstream: list[str]
    timeout: float | None
    retry: RetryInfo | None


class JobInfo(TypedDict):
    id: str
    name: str
    schedule: ScheduleInfo
    tasks: list[TaskInfo]
    retry: RetryInfo
    timeout: float | None
    queue: str
    priority: int
    catchup: bool
    paused: bool
    tags: list[str]
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    next_fire_at: str | None
    last_fire_at: str | None


class JobPage(TypedDict):
    jobs: list[JobInfo]
    next_after: str | None


class RunInfo(TypedDict):
    id: str
    job_id: str
    job_name: str
    logical_date: str
    state: str
    trigger: str
    created_at: str
    started_at: str | None
    finished_at: str | None


class TaskRunInfo(TypedDict):
    id: str
    task_name: str
    kind: str
    config: dict[str, Any]
    state: str
    attempt: int
    retry: RetryInfo
    due_at: str
    timeout: float | None
    queue: str
    priority: int
    upstream: list[str]
    queued_at: str | None
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    worker_id: str | None
    error: str | None
    exit_code: int | None
    cancel_requested: bool


class AttemptInfo(TypedDict):
    task_run_id: str
    attempt: int
    state: str
    started_at: str | None
    finished_at: str
    error: str | None
    exit_code: int | None
    worker_id: str | None


class RunDetail(RunInfo):
    task_runs: list[TaskRunInfo]
    attempts: list[AttemptInfo]


class RunPage(TypedDict):
    runs: list[RunInfo]
    next_cursor: str | None


class LogChunk(TypedDict):
    attempt: int
    seq: int
    stream: str
    data: str
    created_at: str


class Logs(TypedDict):
    run_id: str
    task_run_id: str
    chunks: list[LogChunk]
    next_after_seq: int
    run_state: str
    finished: bool


class Fire(TypedDict):
    utc: str
    local: str


class Fires(TypedDict):
    timezone: str
    fires: list[Fire]


class TokenInfo(TypedDict):
    id: str
    name: str
    scope: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


class TokenSecret(TokenInfo):
    secret: str


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


# -- client -----------------------------------------------------------------------------------


class Client:
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
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._http = httpx2.Client(
            base_url=self.url, timeout=timeout, transport=transport, headers=headers
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

    # -- jobs -------------------------------------------------------------------------------

    def create_job(self, job: JobInput, *, allow_past: bool = False) -> JobInfo:
        """Create a job; a ``now`` job is queued at once. ``allow_past`` accepts a past ``at``."""
        params = {"allow_past": "true"} if allow_past else None
        return cast(JobInfo, self._call("POST", "/jobs", json=job, params=params))

    def create_jobs(self, jobs: list[JobInput], *, allow_past: bool = False) -> list[JobInfo]:
        """Create up to 1000 jobs in one transaction: all of them or none."""
        params = {"allow_past": "true"} if allow_past else None
        body = {"jobs": jobs}
        return cast(list[JobInfo], self._call("POST", "/jobs/batch", json=body, params=params))

    def list_jobs(
        self,
        *,
        limit: int = 100,
        after: str | None = None,
        prefix: str | None = None,
        tag: str | None = None,
        paused: bool | None = None,
        schedule_kind: Literal["now", "at", "cron"] | None = None,
    ) -> JobPage:
        """Jobs by name, filtered; pass the page's ``next_after`` as ``after`` for more."""
        params = {
            "limit": limit,
            "after": after,
            "prefix": prefix,
            "tag": tag,
            "paused": None if paused is None else str(paused).lower(),
            "schedule_kind": schedule_kind,
        }
        return cast(JobPage, self._call("GET", "/jobs", params=params))

    def update_job(
        self, name: str, changes: dict[str, Any], *, allow_past: bool = False
    ) -> JobInfo:
        """Change a job for its future runs (``PATCH``): only the fields in ``changes``."""
        params = {"allow_past": "true" if allow_past else None}
        path = f"/jobs/{_seg(name)}"
        return cast(JobInfo, self._call("PATCH", path, json=changes, params=params))

    def get_job(self, name: str) -> JobInfo:
        return cast(JobInfo, self._call("GET", f"/jobs/{_seg(name)}"))

    def delete_job(self, name: str) -> None:
        """Delete a job; its unfinished runs are cancelled, its history stays."""
        self._call("DELETE", f"/jobs/{_seg(name)}")

    def trigger(
        self, name: str, logical_date: str | None = None, params: dict[str, Any] | None = None
    ) -> RunDetail:
        """Run a job now by hand, for ``logical_date`` (ISO, default now), with ``params``
        (python tasks: extra kwargs; shell tasks: JSON in ``TICKWORK_PARAMS``)."""
        given = {"logical_date": logical_date, "params": params}
        body = {k: v for k, v in given.items() if v is not None} or None
        return cast(RunDetail, self._call("POST", f"/jobs/{_seg(name)}/trigger", json=body))

    def pause(self, name: str) -> JobInfo:
        return cast(JobInfo, self._call("POST", f"/jobs/{_seg(name)}/pause"))

    def resume(self, name: str) -> JobInfo:
        return cast(JobInfo, self._call("POST", f"/jobs/{_seg(name)}/resume"))

    def upcoming(self, name: str, count: int = 10) -> Fires:
        """The job's next fire times."""
        path = f"/jobs/{_seg(name)}/upcoming"
        return cast(Fires, self._call("GET", path, params={"count": count}))

    def preview(
        self, cron: str, tz: str = "UTC", count: int = 10, after: str | None = None
    ) -> Fires:
        """Fire times of a cron expression, computed by the server. Creates nothing."""
        params = {"cron": cron, "tz": tz, "count": count, "from": after}
        return cast(Fires, self._call("GET", "/schedule/preview", params=params))

    # -- runs -------------------------------------------------------------------------------

    def list_runs(
        self,
        *,
        job: str | None = None,
        state: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        logical_from: str | None = None,
        logical_to: str | None = None,
        started_from: str | None = None,
        started_to: str | None = None,
    ) -> RunPage:
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
        return cast(RunPage, self._call("GET", "/runs", params=params))

    def dead_letters(
        self, *, job: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> dict[str, Any]:
        """Task runs that failed their last attempt, newest first (``task_runs``,
        ``next_cursor``); replay one with ``retry_run(run_id)``."""
        params = {"job": job, "limit": limit, "cursor": cursor}
        return cast(dict[str, Any], self._call("GET", "/dead-letters", params=params))

    def get_run(self, run_id: str) -> RunDetail:
        return cast(RunDetail, self._call("GET", f"/runs/{_seg(run_id)}"))

    def cancel_run(self, run_id: str) -> RunDetail:
        return cast(RunDetail, self._call("POST", f"/runs/{_seg(run_id)}/cancel"))

    def retry_run(self, run_id: str) -> RunDetail:
        """Replay a run's failed (dead-lettered) or cancelled tasks."""
        return cast(RunDetail, self._call("POST", f"/runs/{_seg(run_id)}/retry"))

    def logs(
        self, run_id: str, *, task: str | None = None, after_seq: int = -1, limit: int = 1000
    ) -> Logs:
        """Output after ``after_seq``; poll with ``next_after_seq`` until ``finished``."""
        params = {"task": task, "after_seq": after_seq, "limit": limit}
        return cast(Logs, self._call("GET", f"/runs/{_seg(run_id)}/logs", params=params))

    # -- tokens (admin) ----------------------------------------------------------------------

    def create_token(self, name: str, scope: Literal["read", "write", "admin"]) -> TokenSecret:
        """A new token; its ``secret`` is in this result only."""
        body = {"name": name, "scope": scope}
        return cast(TokenSecret, self._call("POST", "/tokens", json=body))

    def list_tokens(self) -> list[TokenInfo]:
        """Every token (never a secret), revoked ones included."""
        return cast(list[TokenInfo], self._call("GET", "/tokens")["tokens"])

    def revoke_token(self, id_or_name: str) -> TokenInfo:
        return cast(TokenInfo, self._call("DELETE", f"/tokens/{_seg(id_or_name)}"))

    def health(self) -> dict[str, str]:
        return cast(dict[str, str], self._call("GET", "/healthz", prefix=""))

    # -- transport --------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        prefix: str = API_PREFIX,
    ) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, prefix + path, json=json, params=query)
        except httpx2.TransportError as e:
            raise Unreachable(self.url, str(e) or type(e).__name__) from e
        if response.status_code >= 400:
            raise _api_error(response)
        return None if response.status_code == 204 else response.json()


def _api_error(response: httpx2.Response) -> ApiError:
    try:
        error = response.json()["error"]
        return ApiError(response.status_code, error["code"], error["message"], error.get("field"))
    except (ValueError, KeyError, TypeError):
        # Not our error shape: a proxy in between, or not a tickwork server at all.
        text = response.text.strip()[:200] or response.reason_phrase
        return ApiError(response.status_code, "http_error", f"HTTP {response.status_code}: {text}")


def _seg(value: str) -> str:
    """A value made safe to use as one URL path segment."""
    return quote(value, safe="")
