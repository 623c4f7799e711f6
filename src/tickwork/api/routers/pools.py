"""Pools: reading them needs a `read` token; creating, resizing and deleting an `admin` one
(pools are operator settings that every job's tasks share)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from tickwork.api.deps import ServicesDep
from tickwork.api.schemas.pools import PoolListRead, PoolRead, PoolSet
from tickwork.core.validate import NAME_PATTERN

#: Included with the `read` scope.
read_router = APIRouter(tags=["pools"])
#: Included with the `admin` scope.
admin_router = APIRouter(tags=["pools"])


#: A pool's name in a path. The rule is documented here and checked by the pool service,
#: whose message names it.
PoolName = Annotated[
    str, Path(description="The pool's name.", json_schema_extra={"pattern": NAME_PATTERN})
]


@read_router.get("/pools")
async def list_pools(services: ServicesDep) -> PoolListRead:
    """Every pool by name, with the slots its queued and running tasks hold."""
    return PoolListRead(pools=[PoolRead.of(p) for p in await services.pools.list_pools()])


@read_router.get("/pools/{name}")
async def get_pool(name: PoolName, services: ServicesDep) -> PoolRead:
    """One pool."""
    return PoolRead.of(await services.pools.get_pool(name))


@admin_router.put(
    "/pools/{name}",
    responses={201: {"model": PoolRead, "description": "The pool did not exist: created."}},
)
async def set_pool(
    name: PoolName, body: PoolSet, response: Response, services: ServicesDep
) -> PoolRead:
    """Create a pool (201) or change its slots and description (200). Shrinking below the
    slots in use takes none back: no new task enters until there is room again."""
    usage, created = await services.pools.set_pool(name, body.slots, body.description)
    if created:
        response.status_code = status.HTTP_201_CREATED
    return PoolRead.of(usage)


@admin_router.delete("/pools/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_pool(name: PoolName, services: ServicesDep) -> None:
    """Delete a pool. Tasks that declare it wait until a pool of that name exists again."""
    await services.pools.delete_pool(name)
