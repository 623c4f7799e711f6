"""Pools: named slot limits an operator sets, and the check that a job names only real ones.

A task declaring ``pool: db`` holds ``pool_slots`` of the pool's slots while queued or
running; the engine admits it only when they are free. A job is checked against the pools
when it is saved, so a typo is a 422 rather than a task that waits forever.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from tickwork.core.errors import NotFound, ValidationError
from tickwork.core.model import Job, Pool
from tickwork.core.validate import validate_job_name, validate_pool
from tickwork.ports import PoolStore, PoolUsage


class PoolService:
    """Create, resize, list and delete pools (operator settings: the API asks ``admin``)."""

    def __init__(self, store: PoolStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    async def set_pool(
        self, name: str, slots: int, description: str | None = None
    ) -> tuple[PoolUsage, bool]:
        """Create the pool or change its slots, and its description unless ``None``; the pool
        as it is now and whether it was created. Shrinking takes no slot back from tasks
        holding one."""
        if description is None:
            current = await self._store.get_pool(name)
            description = current.pool.description if current else ""
        pool = validate_pool(Pool(name=name, slots=slots, description=description))
        created = await self._store.set_pool(pool, self._clock())
        return await self.get_pool(name), created

    async def get_pool(self, name: str) -> PoolUsage:
        """The pool and the slots in use; ``NotFound`` otherwise."""
        found = await self._store.get_pool(name)
        if found is None:
            raise NotFound("pool", name)
        return found

    async def list_pools(self) -> list[PoolUsage]:
        """Every pool by name, with the slots in use."""
        return await self._store.list_pools()

    async def delete_pool(self, name: str) -> None:
        """Delete a pool; ``NotFound`` if there is none. Tasks that declare it then wait
        until a pool of that name exists again."""
        validate_job_name(name)
        if not await self._store.delete_pool(name):
            raise NotFound("pool", name)

    async def check_jobs(self, jobs: Sequence[Job]) -> None:
        """Refuse a task that names a pool which does not exist, or asks for more slots than
        the pool has (it could never start). Errors name the field: ``tasks[2].pool``."""
        wanted = {t.pool for job in jobs for t in job.tasks if t.pool is not None}
        if not wanted:
            return
        slots = {usage.pool.name: usage.pool.slots for usage in await self._store.list_pools()}
        for i, job in enumerate(jobs):
            where = f"jobs[{i}]." if len(jobs) > 1 else ""
            for j, task in enumerate(job.tasks):
                if task.pool is not None:
                    _check_task_pool(task.pool, task.pool_slots, slots, f"{where}tasks[{j}]")


def _check_task_pool(pool: str, asked: int, slots: dict[str, int], field: str) -> None:
    if pool not in slots:
        raise ValidationError(
            f"{field}.pool",
            f"no pool {pool!r}; create it first with `tickwork pool set {pool} --slots N`",
        )
    if asked > slots[pool]:
        raise ValidationError(
            f"{field}.pool_slots",
            f"asks for {asked} slots but pool {pool!r} has {slots[pool]}; "
            f"lower pool_slots or resize the pool",
        )
