"""Validation of a task's ``config`` by kind (shell, http, python) and of the values inside
it: environment variables, HTTP headers, JSON bodies and arguments. Pure: every error is a
``ValidationError(field, reason)``; ``validate.py`` calls these for tasks and callbacks."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from tickwork.core.errors import ValidationError
from tickwork.core.model import TaskKind
from tickwork.core.secret_refs import is_secret_ref

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_TARGET = re.compile(rf"{_IDENT}(\.{_IDENT})*:{_IDENT}", re.ASCII)
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_KEYS = {
    TaskKind.SHELL: ("argv", "command", "shell", "env", "cwd", "log_max_bytes"),
    TaskKind.HTTP: ("method", "url", "url_auth", "headers", "body", "log_max_bytes"),
    TaskKind.PYTHON: ("target", "kwargs", "log_max_bytes"),
}
# Bounds of a task's log cap (config.log_max_bytes; the worker's default is 16 MiB).
_LOG_MAX_BYTES = (4096, 1024 * 1024 * 1024)
_MAX_TIMEOUT = 7 * 24 * 3600.0
_MAX_DEPTH = 64  # nesting of JSON values; deeper is refused rather than recursed into
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}", re.ASCII)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}", re.ASCII)
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]{0,8192}", re.ASCII)


def task_config(config: object, kind: TaskKind, field: str) -> dict[str, Any]:
    """The ``config`` of a task of ``kind``: known keys only, checked and normalised."""
    if not isinstance(config, Mapping):
        raise ValidationError(field, f"must be an object of {kind} settings")
    allowed = _KEYS[kind]
    for key in config:
        if key not in allowed:
            raise ValidationError(
                f"{field}.{key}", f"is not a {kind} setting; use {', '.join(allowed)}"
            )
    cap = config.get("log_max_bytes")
    low, high = _LOG_MAX_BYTES
    if cap is not None and (not is_int(cap) or not low <= cap <= high):
        raise ValidationError(
            f"{field}.log_max_bytes", f"must be a whole number of bytes from {low} to {high}"
        )
    checks = {TaskKind.SHELL: _shell, TaskKind.HTTP: _http, TaskKind.PYTHON: python_config}
    return checks[kind](dict(config), field)


def _shell(config: dict[str, Any], field: str) -> dict[str, Any]:
    argv, command, shell = config.get("argv"), config.get("command"), config.get("shell", False)
    if not isinstance(shell, bool):
        raise ValidationError(f"{field}.shell", "must be true or false")
    if argv is not None and command is not None:
        raise ValidationError(field, "give either argv or command (with shell: true), not both")
    if shell:
        if not isinstance(command, str) or not command.strip():
            raise ValidationError(f"{field}.command", "shell: true needs a non-empty command")
    elif command is not None:
        raise ValidationError(
            f"{field}.shell", "a command string runs only with shell: true; or give argv"
        )
    elif not _str_list(argv):
        raise ValidationError(
            f"{field}.argv", "must be a non-empty list of strings such as ['pg_dump', 'db']"
        )
    if "env" in config:
        _env(config["env"], f"{field}.env")
    if argv is not None and any("\0" in arg for arg in argv):
        raise ValidationError(f"{field}.argv", "may not hold a NUL character")
    if "cwd" in config and (not isinstance(config["cwd"], str) or not config["cwd"]):
        raise ValidationError(f"{field}.cwd", "must be a directory path")
    if argv is not None:
        config["argv"] = list(argv)
    return config


def _http(config: dict[str, Any], field: str) -> dict[str, Any]:
    method = config.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in _METHODS:
        raise ValidationError(f"{field}.method", f"{method!r} is not one of {', '.join(_METHODS)}")
    config["method"] = method.upper()
    url = config.get("url")
    if not isinstance(url, str) or not is_http_url(url):
        raise ValidationError(
            f"{field}.url",
            "must be an http:// or https:// URL with a host, such as https://example.org/hook",
        )
    check_url_auth(config, url, field)
    if "headers" in config:
        check_headers(config["headers"], f"{field}.headers")
    if "body" in config and not isinstance(config["body"], str):
        _json_value(config["body"], f"{field}.body", 0)
    return config


def check_url_auth(config: Mapping[str, Any], url: str, field: str) -> None:
    """``url_auth``: the URL's userinfo (``user:password``) as a secret reference, resolved
    where the request is sent; never a literal (that would be stored and shown)."""
    if "url_auth" not in config:
        return
    if not is_secret_ref(config["url_auth"]):
        raise ValidationError(
            f"{field}.url_auth",
            'must be {"$secret": NAME}, a secret holding user:password (tickwork secret set)',
        )
    if urlsplit(url).username is not None:
        raise ValidationError(
            f"{field}.url", "holds user:password@ and url_auth is given too; keep one (url_auth)"
        )


def is_http_url(url: str) -> bool:
    """Whether ``url`` is http(s) with a host (and a port other than 0)."""
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a malformed port or IPv6 literal
        return False


def python_config(config: dict[str, Any], field: str) -> dict[str, Any]:
    """A python task or callback: an import ``target`` and JSON ``kwargs``."""
    target = config.get("target")
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        raise ValidationError(
            f"{field}.target", "must be an import path such as 'mypkg.tasks:hello'"
        )
    if "kwargs" in config:
        config["kwargs"] = json_object(config["kwargs"], f"{field}.kwargs")
    return config


def is_int(value: object) -> bool:
    """Whether ``value`` is an int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_timeout(value: object, field: str) -> None:
    """None, or seconds above 0 and at most 7 days."""
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= _MAX_TIMEOUT
    ):
        raise ValidationError(field, "must be a number of seconds above 0 and at most 7 days")


def _str_list(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(v, str) for v in value)
        and bool(value[0])
    )


def _str_map(value: object, field: str, *, allow_refs: bool = False) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and (isinstance(v, str) or (allow_refs and is_secret_ref(v)))
        for k, v in value.items()
    ):
        raise ValidationError(field, "must map names to string values")


def _env(value: object, field: str) -> None:
    """Environment variables: the OS refuses a name with ``=`` or NUL, or an empty one, and
    a value with NUL; refused here, on save, rather than by the runner later."""
    _str_map(value, field, allow_refs=True)
    assert isinstance(value, Mapping)
    for name, text in value.items():
        if not _ENV_NAME.fullmatch(name):
            raise ValidationError(
                f"{field}.{name}", "is not an environment variable name; use A-Z, a-z, 0-9, _"
            )
        if isinstance(text, str) and "\0" in text:
            raise ValidationError(f"{field}.{name}", "may not hold a NUL character")


def check_headers(value: object, field: str, *, refs: bool = True) -> None:
    """HTTP headers: names are RFC 9110 tokens, values visible ASCII (and spaces/tabs), so a
    header can never be split or fail to encode when the request is sent."""
    _str_map(value, field, allow_refs=refs)
    assert isinstance(value, Mapping)
    for name, text in value.items():
        if not _TOKEN.fullmatch(name):
            raise ValidationError(f"{field}.{name}", "is not a header name (RFC 9110 token)")
        if isinstance(text, str) and not _HEADER_VALUE.fullmatch(text):
            raise ValidationError(
                f"{field}.{name}", "must be visible ASCII text (no line breaks or non-ASCII)"
            )


def json_object(value: object, field: str) -> dict[str, Any]:
    """``value`` as a dict, when it is a JSON object (string keys, JSON values inside)."""
    if not isinstance(value, Mapping):
        raise ValidationError(field, "must be a JSON object (string keys)")
    _json_value(value, field, 0)
    return dict(value)


def _json_value(value: object, field: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValidationError(field, f"nests deeper than {_MAX_DEPTH} levels; flatten it")
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(field, "must hold finite numbers only (no NaN or Infinity)")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _json_value(item, f"{field}[{i}]", depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(field, f"key {key!r} must be a string (JSON objects)")
            _json_value(item, f"{field}.{key}", depth + 1)
        return
    raise ValidationError(
        field, f"a {type(value).__name__} is not JSON; use strings, numbers, lists or objects"
    )
