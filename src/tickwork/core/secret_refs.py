"""``{"$secret": "NAME"}``: a reference to a stored secret, in a task's config.

A reference may stand for a whole value in http ``headers``, shell ``env``, an http
``body`` (anywhere inside it), python ``kwargs`` (anywhere inside them) and a callback's
``headers``; a URL's userinfo is given as ``url_auth: {"$secret": ...}`` (a task's or a
callback's), a secret holding ``user:password``, sent as HTTP Basic auth (see
docs/security.md). The worker resolves references right before the attempt runs; the
API stores and shows only the reference, never the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_REF = "$secret"
#: A secret's name: letters, digits, ``_``, ``.``, ``-``; 1-128 characters.
SECRET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", re.ASCII)


def is_secret_ref(value: object) -> bool:
    """Whether ``value`` is ``{"$secret": "<name>"}`` with a valid name."""
    return (
        isinstance(value, Mapping)
        and len(value) == 1
        and isinstance(value.get(SECRET_REF), str)
        and SECRET_NAME.fullmatch(value[SECRET_REF]) is not None
    )


def secret_names(value: object) -> set[str]:
    """The names of every secret ``value`` refers to, at any depth."""
    if is_secret_ref(value):
        assert isinstance(value, Mapping)
        return {value[SECRET_REF]}
    if isinstance(value, Mapping):
        return {n for v in value.values() for n in secret_names(v)}
    if isinstance(value, list | tuple):
        return {n for v in value for n in secret_names(v)}
    return set()


URL_AUTH = "url_auth"


def url_auth(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (user, password) of a resolved ``url_auth`` (``user:password``; no ``:``: the
    whole value is the user); None without one. ``ValueError`` if it was not resolved."""
    value = config.get(URL_AUTH)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("url_auth: the secret reference was not resolved on this process")
    user, _, password = value.partition(":")
    return user, password


def resolve_refs(value: Any, secrets: Mapping[str, str]) -> Any:
    """``value`` with every reference replaced by its secret (``KeyError`` for a missing one)."""
    if is_secret_ref(value):
        return secrets[value[SECRET_REF]]
    if isinstance(value, Mapping):
        return {k: resolve_refs(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [resolve_refs(v, secrets) for v in value]
    return value
