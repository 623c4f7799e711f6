"""Transactional enqueue: runs written in the application's own PostgreSQL transaction.

``enqueue(conn, "job", {...})`` inserts the run on ``conn`` (a psycopg 3 connection, or a
SQLAlchemy ``Connection``/``Session`` over psycopg) inside whatever transaction the caller has
open, so the run exists exactly when that transaction commits: a rollback (or a rolled-back
savepoint) leaves nothing. ``enqueue_async``/``enqueue_many_async`` do the same on a
``psycopg.AsyncConnection`` (separate names, not a coroutine returned by the same call, so a
type checker sees which one awaits).

The run is inserted with its task runs ``scheduled`` and due now: nothing can be published to
the broker before the commit, so the scheduler's leader takes them like any due run. The insert
also issues ``NOTIFY tickwork_enqueue`` (PostgreSQL delivers it only on commit), on which the
scheduler's leader listens (``store/pg_listen.py``) and dispatches at once; its poll
(``max_sleep``, 1 s) is the safety net, and a crash between commit and dispatch loses nothing:
the run is in the table, and whichever scheduler leads next dispatches it.

Once a job has been read, a call costs one statement: the job is remembered per database and
schema, and the insert itself checks that it is still the live one (a changed or deleted job
is read again). With ``schema=`` the tables are looked up in that schema rather than the
connection's ``search_path`` (the application's own tables may live elsewhere).

The work is written once as a generator of statements (``_steps``) and driven by a sync or an
async executor, so the two paths cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.app.enqueue import EnqueueItem, plan_copies
from tickwork.core.errors import Conflict, NotFound, ValidationError
from tickwork.core.model import Job
from tickwork.ids import new_id
from tickwork.store import pg_enqueue, pg_listen
from tickwork.store.rows import job_from_row, task_from_row
from tickwork.store.run_rows import rows_of_copies

__all__ = ["CHANNEL", "Item", "enqueue", "enqueue_async", "enqueue_many", "enqueue_many_async"]

#: The channel the insert notifies (on commit), which the scheduler's leader listens on.
CHANNEL = pg_listen.CHANNEL
#: Idempotency keys of the outbox live beside the API's, under this pseudo token id.
_KEY_OWNER = "outbox"
_KEY_TTL = timedelta(days=1)
_MAX_ITEMS = 5000
#: Jobs read by earlier calls, by (database, schema, name): a call then costs one statement.
_JOBS: dict[tuple[Any, ...], Job] = {}
_JOBS_KEPT = 256

Query = tuple[str, tuple[Any, ...]]
Rows = list[Any]  # dict rows, which the store's decoders read by column name


@dataclass(frozen=True, slots=True)
class Item:
    """One run for ``enqueue_many``: the same arguments as ``enqueue``."""

    job: str
    params: Mapping[str, Any] | None = None
    at: datetime | None = None
    delay: timedelta | float | None = None
    priority: int | None = None
    idempotency_key: str | None = None


def enqueue(
    conn: Any,
    job: str,
    params: Mapping[str, Any] | None = None,
    *,
    at: datetime | None = None,
    delay: timedelta | float | None = None,
    priority: int | None = None,
    idempotency_key: str | None = None,
    schema: str | None = None,
) -> str:
    """Enqueue one run of ``job`` in ``conn``'s open transaction; returns the run id (the
    first run's id when ``idempotency_key`` was used before). ``schema``: where tickwork's
    tables are, when not in ``conn``'s ``search_path``."""
    item = Item(job, params, at, delay, priority, idempotency_key)
    return enqueue_many(conn, [item], schema=schema)[0]


def enqueue_many(conn: Any, items: Sequence[Item], *, schema: str | None = None) -> list[str]:
    """Enqueue ``items`` in ``conn``'s open transaction; their run ids, in order."""
    raw = _driver_connection(conn)
    with raw.cursor(row_factory=_dict_row()) as cur:
        steps = _steps(items, datetime.now(UTC), _target(raw, schema))
        try:
            query = next(steps)
            while True:
                cur.execute(*query)
                query = steps.send(cur.fetchall() if cur.description else [])
        except StopIteration as done:
            result: list[str] = done.value
            return result


async def enqueue_async(
    conn: Any,
    job: str,
    params: Mapping[str, Any] | None = None,
    *,
    at: datetime | None = None,
    delay: timedelta | float | None = None,
    priority: int | None = None,
    idempotency_key: str | None = None,
    schema: str | None = None,
) -> str:
    """``enqueue`` on a ``psycopg.AsyncConnection``."""
    item = Item(job, params, at, delay, priority, idempotency_key)
    return (await enqueue_many_async(conn, [item], schema=schema))[0]


async def enqueue_many_async(
    conn: Any, items: Sequence[Item], *, schema: str | None = None
) -> list[str]:
    """``enqueue_many`` on a ``psycopg.AsyncConnection``."""
    async with conn.cursor(row_factory=_dict_row()) as cur:
        steps = _steps(items, datetime.now(UTC), _target(conn, schema))
        try:
            query = next(steps)
            while True:
                await cur.execute(*query)
                query = steps.send(await cur.fetchall() if cur.description else [])
        except StopIteration as done:
            result: list[str] = done.value
            return result


def _dict_row() -> Any:
    from psycopg.rows import dict_row  # psycopg is the PostgreSQL driver tickwork installs

    return dict_row


def _driver_connection(conn: Any) -> Any:
    """The psycopg connection under a SQLAlchemy ``Session``/``Connection`` (same transaction)."""
    if hasattr(conn, "cursor") and not hasattr(conn, "get_bind"):
        return conn  # psycopg already (SQLAlchemy's Connection has no ``cursor``)
    sa_conn = conn.connection() if callable(getattr(conn, "connection", None)) else conn
    raw = sa_conn.connection.driver_connection
    if raw is None or not hasattr(raw, "cursor"):
        raise ValidationError("conn", "must be a psycopg 3 connection or a SQLAlchemy one on it")
    return raw


@dataclass(frozen=True, slots=True)
class _Target:
    """Where the tables are: the database ``conn`` is on, and the schema (None: search_path)."""

    database: tuple[Any, ...]
    schema: str | None

    def table(self, name: str) -> str:
        return pg_enqueue.qualified(self.schema, name)

    def job_key(self, name: str) -> tuple[Any, ...]:
        return (*self.database, self.schema, name)


def _target(raw: Any, schema: str | None) -> _Target:
    if schema is not None and (
        not isinstance(schema, str) or not 0 < len(schema) <= 63 or "\x00" in schema
    ):
        raise ValidationError("schema", "must be a schema name of 1 to 63 characters")
    info = raw.info
    return _Target((info.host, info.port, info.dbname), schema)


def _steps(
    items: Sequence[Item], now: datetime, target: _Target
) -> Generator[Query, Rows, list[str]]:
    if not 0 < len(items) <= _MAX_ITEMS:
        raise ValidationError("items", f"must hold 1 to {_MAX_ITEMS} runs")
    read: set[str] = set()  # jobs read from the database by this call (not from the cache)
    out: list[str] = []
    for i, item in enumerate(items):
        where = f"items[{i}]." if len(items) > 1 else ""
        job = _JOBS.get(target.job_key(item.job))
        if job is None:
            job = yield from _read_job(item.job, target)
            read.add(item.job)
        if item.idempotency_key is not None:
            known = yield from _claim_key(item, where, now, target)
            if known is not None:
                out.append(known)
                continue
        try:
            run_id = yield from _insert(item, where, now, job, target)
        except ValidationError:
            if item.job in read:
                raise
            run_id = None  # refused by a remembered contract, which may be out of date
        if run_id is None and item.job not in read:  # the cached job changed: read it again
            job = yield from _read_job(item.job, target)
            read.add(item.job)
            run_id = yield from _insert(item, where, now, job, target)
        if run_id is None:
            raise Conflict("job", f"job {job.name!r} changed meanwhile; retry")
        if item.idempotency_key is not None:
            yield _remember_key(item, run_id, target)
        out.append(run_id)
    return out


def _insert(
    item: Item, where: str, now: datetime, job: Job, target: _Target
) -> Generator[Query, Rows, str | None]:
    """Insert the run if ``job`` is still the live one (one statement, which also notifies
    the leader); its id, or None if the job changed since it was read."""
    enqueue_item = EnqueueItem(item.params, item.priority, _due(item, where, now))
    copies = plan_copies(job, [enqueue_item], now, new_id, prefix=None, hold=True)
    sql, params = pg_enqueue.statement(
        rows_of_copies(copies), job, schema=target.schema, notify=CHANNEL
    )
    rows = yield (f"{sql} RETURNING 1", params)
    return copies[0].run_id if len(rows) == len(copies[0].task_run_ids) else None


def _read_job(name: str, target: _Target) -> Generator[Query, Rows, Job]:
    """The live job ``name``, remembered for the next calls (the insert checks it is still the
    live one, so a changed or deleted job is read again, never used)."""
    _JOBS.pop(target.job_key(name), None)
    rows = yield (
        f"SELECT * FROM {target.table('jobs')} WHERE name = %s AND deleted_at IS NULL",
        (name,),
    )
    if not rows:
        raise NotFound("job", name)
    row = rows[0]
    tasks = yield (
        f"SELECT * FROM {target.table('tasks')} WHERE job_id = %s ORDER BY position",
        (row["id"],),
    )
    job = job_from_row(row, tuple(task_from_row(t) for t in tasks))
    if len(_JOBS) >= _JOBS_KEPT:
        _JOBS.clear()
    _JOBS[target.job_key(name)] = job
    return job


def _claim_key(
    item: Item, where: str, now: datetime, target: _Target
) -> Generator[Query, Rows, str | None]:
    """The run id a committed transaction stored under the key, or None after claiming it (a
    concurrent transaction holding the key makes this one wait for its outcome)."""
    key = item.idempotency_key
    if not isinstance(key, str) or not 0 < len(key) <= 255:
        raise ValidationError(f"{where}idempotency_key", "must be 1 to 255 characters")
    claimed = yield (
        f"INSERT INTO {target.table('idempotency_keys')} (token_id, key, request_hash, status,"
        " response, created_at, expires_at) VALUES (%s, %s, %s, NULL, NULL, %s, %s)"
        " ON CONFLICT DO NOTHING RETURNING 1",
        (_KEY_OWNER, key, item.job, now, now + _KEY_TTL),
    )
    if claimed:
        return None
    rows = yield (
        f"SELECT response FROM {target.table('idempotency_keys')} WHERE token_id = %s AND key = %s",
        (_KEY_OWNER, key),
    )
    if not rows or rows[0]["response"] is None:
        raise Conflict(f"{where}idempotency_key", "is being used by another transaction")
    run_id: str = json.loads(rows[0]["response"])["run_id"]
    return run_id


def _remember_key(item: Item, run_id: str, target: _Target) -> Query:
    return (
        f"UPDATE {target.table('idempotency_keys')} SET status = 201, response = %s"
        " WHERE token_id = %s AND key = %s",
        (json.dumps({"run_id": run_id}), _KEY_OWNER, item.idempotency_key),
    )


def _due(item: Item, where: str, now: datetime) -> datetime | None:
    if item.at is not None and item.delay is not None:
        raise ValidationError(f"{where}delay", "give either at or delay, not both")
    delay = item.delay
    if delay is None:
        return item.at
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ValidationError(f"{where}delay", "must be a duration of 0 seconds or more")
    return now + timedelta(seconds=seconds)
