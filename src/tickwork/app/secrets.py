"""Secrets: set, list, delete (admin, through the API or CLI) and resolve (workers only).

Values are encrypted before they reach the store and decrypted only where a task runs: the
API never answers a value, not even to an admin. A task's config refers to a secret as
``{"$secret": "NAME"}`` (``core.secret_refs``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.core.errors import NotFound, ValidationError
from tickwork.core.model import Callbacks, Job
from tickwork.core.secret_refs import SECRET_NAME, secret_names
from tickwork.ports import SecretStore
from tickwork.security.secrets import SecretCipher, SecretKeyError, resolve_secrets

#: The largest secret value accepted, in characters.
MAX_SECRET = 64 * 1024


@dataclass(frozen=True, slots=True)
class SecretInfo:
    """What anyone may know of a secret: its name and when it was set."""

    name: str
    created_at: datetime
    updated_at: datetime


class SecretService:
    """Secrets over a ``SecretStore``; ``cipher`` None means this process has no key."""

    def __init__(
        self, store: SecretStore, cipher: SecretCipher | None, clock: Callable[[], datetime]
    ) -> None:
        self._store, self._cipher, self._clock = store, cipher, clock

    async def set(self, name: str, value: str) -> bool:
        """Store ``value`` encrypted as ``name``; True if it is a new secret."""
        check_secret_name(name)
        if not isinstance(value, str) or not value or len(value) > MAX_SECRET:
            raise ValidationError("value", f"must be 1 to {MAX_SECRET} characters")
        ciphertext = self._key().encrypt(value)
        return await self._store.put_secret(name, ciphertext, self._clock())

    async def list_all(self) -> list[SecretInfo]:
        return [
            SecretInfo(s.name, s.created_at, s.updated_at) for s in await self._store.list_secrets()
        ]

    async def delete(self, name: str) -> None:
        if not await self._store.delete_secret(name):
            raise NotFound("secret", name)

    async def missing(self, names: Collection[str]) -> list[str]:
        """The names among ``names`` that are not stored."""
        found = await self._store.get_secrets(names)
        return sorted(set(names) - set(found))

    async def resolve(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """``config`` with its secret references resolved (see ``resolve_secrets``)."""
        resolved, _ = await resolve_secrets(self._store, self._cipher, config)
        return resolved

    def _key(self) -> SecretCipher:
        if self._cipher is None:
            raise SecretKeyError(
                "this process has no secret key: set TICKWORK_SECRET_KEY (the same on every "
                "process) to use secrets"
            )
        return self._cipher


def check_secret_name(name: object, field: str = "name") -> str:
    if not isinstance(name, str) or not SECRET_NAME.fullmatch(name):
        raise ValidationError(
            field, "a secret name is 1-128 letters, digits, '_', '.' or '-', starting with one"
        )
    return name


async def check_secret_refs(store: SecretStore, jobs: Sequence[Job]) -> None:
    """Every ``{"$secret": NAME}`` in the jobs' task configs and callbacks names a stored
    secret; ``ValidationError`` on the config or callback otherwise (the value is not needed
    here)."""
    wanted = {
        (f"tasks[{i}].config", name)
        for job in jobs
        for i, task in enumerate(job.tasks)
        for name in secret_names(task.config)
    }
    wanted |= {
        (f"{where}.{event}", name)
        for job in jobs
        for where, hooks in _callbacks_of(job)
        for event, hook in hooks.items()
        for name in secret_names(hook.config)
    }
    if not wanted:
        return
    stored = await store.get_secrets({name for _, name in wanted})
    for field, name in sorted(wanted):
        if name not in stored:
            raise ValidationError(
                field,
                f"refers to secret {name!r}, which does not exist; `tickwork secret set {name}`",
            )


def _callbacks_of(job: Job) -> list[tuple[str, Callbacks]]:
    """A job's callbacks and each task's, with the field that names them."""
    found: list[tuple[str, Callbacks]] = [("callbacks", job.callbacks)]
    found += [(f"tasks[{i}].callbacks", task.callbacks) for i, task in enumerate(job.tasks)]
    return found
