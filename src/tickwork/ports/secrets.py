"""Where secrets are kept: encrypted values by name (``tickwork secret set``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class StoredSecret:
    """A secret as stored: its name, its value encrypted (never the plain value)."""

    name: str
    ciphertext: str
    created_at: datetime
    updated_at: datetime


class SecretStore(Protocol):
    """Encrypted secrets by name. The store never sees a plain value."""

    async def put_secret(self, name: str, ciphertext: str, now: datetime) -> bool:
        """Create or replace the secret ``name``; True if it was created."""

    async def get_secrets(self, names: Collection[str]) -> dict[str, StoredSecret]:
        """The stored secrets among ``names`` (missing ones are left out)."""

    async def list_secrets(self) -> list[StoredSecret]:
        """Every secret, by name."""

    async def delete_secret(self, name: str) -> bool:
        """Delete the secret ``name``; False if there was none."""
