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


_LOWER_NAME = re.compile(_NAMES)
#: (case-sensitive pattern for lower-cased text, the IGNORECASE original), in order.
_NAMED = [(re.compile(p.pattern), p) for p in (_QUERY, _AUTH, _PAIR)]


def secret_name(name: object) -> bool:
    """Whether a header, env, query or JSON key name marks its value as secret."""
    return isinstance(name, str) and SECRET_NAME.search(name) is not None


def mask_text(text: str) -> str:
    """``text`` (a log line, an error, a command line) with URL userinfo, secret query
    parameters, ``Authorization:`` values and ``name=value`` pairs of secret names masked.

    This runs over every byte a task prints, so it is built for speed: userinfo is looked
    for only where there is an ``@``, and the name patterns only where a secret name
    occurs, matched case-sensitively on a lower-cased copy (``re.IGNORECASE`` made it
    about 4 MB/s)."""
    if not text:
        return text
    if "@" in text:
        text = _USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    if _LOWER_NAME.search(text.lower()) is None:
        return text
    for pattern, slow in _NAMED:
        text = _sub_lowered(pattern, slow, text)
    return text


def _sub_lowered(pattern: re.Pattern[str], slow: re.Pattern[str], text: str) -> str:
    """``slow.sub`` (an IGNORECASE pattern) done with ``pattern``, its case-sensitive twin,
    on ``text.lower()``; the spans are cut from ``text`` itself."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters grow when lower-cased: no shared spans
        return slow.sub(rf"\g<k>{MASK}", text)
    parts: list[str] = []
    at = 0
    for m in pattern.finditer(lowered):
        parts += (text[at : m.end("k")], MASK)
        at = m.end()
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


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
