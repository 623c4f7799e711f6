"""Masking: secret-looking values never leave tickwork in the clear.

Applied to every API answer that shows a task's config (jobs, runs, dead letters), to
errors and log lines, and to what tickwork itself logs. A value is secret-looking when its
name says so (``SECRET_NAME``: authorization, cookie, *token*, *key*, *secret*,
*password*, ...) as an http header, a shell env variable, a URL query parameter or a key
of a JSON body or kwargs; a URL's userinfo always is. ``{"$secret": NAME}`` references are
shown as they are: they hold no secret.

Pure functions of plain data; ``MASK`` replaces what is hidden.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tickwork.core.secret_refs import is_secret_ref

MASK = "***"
_NAMES = r"authorization|cookie|token|secret|passw|pwd|credential|session|signature|api[-_]?key|key"
#: Names whose values are secrets (substring match, any case).
SECRET_NAME = re.compile(_NAMES, re.IGNORECASE)
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@?#]+@")
_QUERY = re.compile(rf"(?P<k>[?&;][^=&#\s]*(?:{_NAMES})[^=&#\s]*=)[^&#\s]*", re.IGNORECASE)
_AUTH = re.compile(
    r"(?P<k>\b(?:proxy-)?authorization\s*[:=]\s*)(?:(?:bearer|basic|token|digest)\s+)?[^\s,;\"']+",
    re.IGNORECASE,
)
_PAIR = re.compile(
    rf"(?P<k>\b[\w.-]*(?:{_NAMES})[\w.-]*[\"']?\s*[:=]\s*[\"']?)(?!\*\*\*)[^\s,;&\"'}}]+",
    re.IGNORECASE,
)


def secret_name(name: object) -> bool:
    """Whether a header, env, query or JSON key name marks its value as secret."""
    return isinstance(name, str) and SECRET_NAME.search(name) is not None


def mask_text(text: str) -> str:
    """``text`` (a log line, an error, a command line) with URL userinfo, secret query
    parameters, ``Authorization:`` values and ``name=value`` pairs of secret names masked."""
    if not text:
        return text
    text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _QUERY.sub(rf"\g<k>{MASK}", text)
    text = _AUTH.sub(rf"\g<k>{MASK}", text)
    return _PAIR.sub(rf"\g<k>{MASK}", text)


def mask_url(url: str) -> str:
    """A URL with its userinfo and secret query parameters masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(secret_name(k) for k, _ in pairs):
            query = urlencode([(k, MASK if secret_name(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_named(values: Mapping[str, Any]) -> dict[str, Any]:
    """Headers or env: values of secret names masked, references kept."""
    return {k: v if is_secret_ref(v) or not secret_name(k) else MASK for k, v in values.items()}


def mask_json(value: Any) -> Any:
    """A JSON value (a body, kwargs) with the values of secret-named keys masked, at any
    depth; strings are masked as text."""
    if is_secret_ref(value):
        return value
    if isinstance(value, Mapping):
        return {
            k: MASK if secret_name(k) and not is_secret_ref(v) else mask_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_json(v) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A task's or callback's config as shown outside: every kind's secret places masked."""
    out = dict(config)
    for key in ("headers", "env"):
        if isinstance(out.get(key), Mapping):
            out[key] = mask_named(out[key])
    if isinstance(out.get("url"), str):
        out["url"] = mask_url(out["url"])
    for key in ("body", "kwargs"):
        if key in out:
            out[key] = mask_json(out[key])
    if isinstance(out.get("argv"), list | tuple):
        out["argv"] = [mask_text(a) if isinstance(a, str) else a for a in out["argv"]]
    if isinstance(out.get("command"), str):
        out["command"] = mask_text(out["command"])
    return out
