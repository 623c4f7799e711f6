"""Request dependencies: the services of the app, the checks every parameter gets, and the
shared ``Annotated`` aliases.

Dependencies are ``async def`` even when they never await: FastAPI runs a plain ``def``
dependency on a worker thread, a thread hop (and its hand-off back) per dependency per
request, which made up a large part of a small request's CPU time.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError

from tickwork.api.text import NUL, NUL_MESSAGE
from tickwork.app.services import Services


def services_of(request: Request) -> Services:
    """The one Services instance the app was built with."""
    services: Services = request.app.state.services
    return services


async def get_services(request: Request) -> Services:
    """``services_of`` as a dependency."""
    return services_of(request)


ServicesDep = Annotated[Services, Depends(get_services)]


def check_parameters(request: Request) -> None:
    """Refuse a query parameter given more than once (none of the API's takes a list), and a
    NUL character in any path or query parameter (see ``text``).

    Otherwise ``?paused=nonsense&paused=true`` would be read as ``paused=true``.
    """
    errors: list[dict[str, object]] = []
    seen: set[str] = set()
    for key, value in request.query_params.multi_items():
        if key in seen:
            errors.append(
                {"type": "repeated", "loc": ("query", key), "msg": "given more than once"}
            )
        elif NUL in key or NUL in value:
            errors.append({"type": "nul_character", "loc": ("query", key), "msg": NUL_MESSAGE})
        seen.add(key)
    for key, value in request.path_params.items():
        if isinstance(value, str) and NUL in value:
            errors.append({"type": "nul_character", "loc": ("path", key), "msg": NUL_MESSAGE})
    if errors:
        raise RequestValidationError(errors)
