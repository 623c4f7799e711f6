"""Secrets at rest: Fernet (``cryptography``), the key from ``TICKWORK_SECRET_KEY`` or a key
file created 0600 on first start.

Fernet is authenticated encryption (AES-128-CBC with HMAC-SHA256) from a well-kept library;
a wrong key or a changed ciphertext fails to decrypt instead of yielding garbage.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from tickwork.core.errors import NotFound, TickworkError
from tickwork.core.secret_refs import resolve_refs, secret_names
from tickwork.ports.secrets import SecretStore

#: The environment variable holding the key (a urlsafe-base64 32-byte Fernet key).
KEY_ENV = "TICKWORK_SECRET_KEY"
#: The key file created in the data dir on first start when the variable is unset.
KEY_FILE = "secret.key"


class SecretKeyError(TickworkError):
    """No usable key, or a ciphertext the key cannot decrypt."""


class SecretCipher:
    """Encrypts and decrypts secret values with one Fernet key."""

    def __init__(self, key: str | bytes) -> None:
        try:
            self._fernet = Fernet(key)
        except (ValueError, TypeError):
            raise SecretKeyError(
                f"{KEY_ENV} is not a Fernet key (32 bytes, urlsafe base64); make one with "
                "`python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`"
            ) from None

    def encrypt(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def decrypt(self, ciphertext: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise SecretKeyError(
                "a secret cannot be decrypted with this key; every process needs the same "
                f"{KEY_ENV}"
            ) from None


def cipher_from(environ: Mapping[str, str], data_dir: Path | None) -> SecretCipher | None:
    """The cipher of this process: ``TICKWORK_SECRET_KEY``, else ``<data_dir>/secret.key``
    (created 0600 on first use when ``data_dir`` is given), else None (no secrets)."""
    key = environ.get(KEY_ENV)
    if key:
        return SecretCipher(key)
    if data_dir is None:
        return None
    return SecretCipher(_key_file(data_dir / KEY_FILE))


def _key_file(path: Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it meanwhile
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as handle:
        handle.write(key + b"\n")
    return key


async def resolve_secrets(
    store: SecretStore, cipher: SecretCipher | None, config: Mapping[str, Any]
) -> tuple[Mapping[str, Any], list[str]]:
    """``config`` with every ``{"$secret": NAME}`` replaced by its value, and the values
    used (to mask them in the task's output). ``NotFound`` names a missing secret;
    ``SecretKeyError`` a process without a key, or a key that cannot decrypt."""
    names = secret_names(config)
    if not names:
        return config, []
    stored = await store.get_secrets(names)
    for name in sorted(names - set(stored)):
        raise NotFound("secret", name)
    if cipher is None:
        raise SecretKeyError(
            f"this process has no secret key: set {KEY_ENV} (the same on every process) "
            "to use secrets"
        )
    plain = {name: cipher.decrypt(s.ciphertext) for name, s in stored.items()}
    resolved: Mapping[str, Any] = resolve_refs(config, plain)
    return resolved, list(plain.values())
